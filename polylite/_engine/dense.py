"""The data term of the objective and its gradient on dense X, by BLAS products.

On dense rows the Cython pass of :func:`polylite._engine._sgd.objective_gradient`
(which walks each row's nonzeros, as it must on sparse rows) does the work of a few
matrix products one scalar at a time: on letter (10,000 x 16, k = 30, degree 2) it took
25 ms per evaluation against 3 ms here (one thread, a shared machine).  L-BFGS
(:func:`polylite._engine.solvers.fit_lbfgs`) evaluates it for every iteration, so on
dense data it uses this module.

The formulas, for a row ``x`` and a factor column ``p`` (one of the k components):

* ANOVA kernel of degree m from the power sums ``D_j = sum_f (p_f x_f)^j`` (one product
  ``X^j P^j`` with elementwise powers) by Newton's identities
  ``A_t = (1/t) sum_{j=1..t} (-1)^(j+1) A_{t-j} D_j``, ``A_0 = 1``; its derivative
  ``dA_m / dp_f = x_f A_{m-1}(x without f) = sum_{j<m} (-1)^j p_f^j x_f^(j+1) A_{m-1-j}``,
  so the gradient of ``sum_i r_i A_m(x_i)`` is
  ``sum_{j<m} (-1)^j P^j * ((X^(j+1))^T (r * A_{m-1-j}))``.  The dummy features of
  ``gamma`` (value 1) join block 0's power sums and gradient as columns of ones.
* polynomial kernel ``lam_s (gamma_s + <p_s, x>)^t``: ``Z = X P + gamma``, the gradient
  of P is ``X^T (r * t Z^(t-1) * lam)``.

Power sums cancel as the degree grows, so the dense path stops at ANOVA degree 3
(``MAX_ANOVA_DEGREE``); higher degrees and the all-subsets kernel keep the Cython pass.
"""
import numpy as np

from . import _losses

MAX_ANOVA_DEGREE = 3

# Rows per block of the products: ROW_BLOCK_ENTRIES / max(n_features, n_components), so
# that the temporaries stay near 1 MiB on tall data; on letter (10,000 x 16, k = 30)
# blocks of a quarter of that size took twice the time (Python overhead per block).
ROW_BLOCK_ENTRIES = 1 << 17

# Loss names by code (the Python functions of _losses take names).
LOSS_NAMES = {code: name for name, code in _losses.LOSSES.items()}


def dense_gradient_available(kernel, degrees):
    """Whether :func:`dense_data_gradient` covers the model (kernel, block degrees)."""
    if kernel == "polynomial":
        return True
    return kernel == "anova" and max(degrees) <= MAX_ANOVA_DEGREE


def _anova_forward(X_powers, P, gamma, degree):
    """(kernels, value): ``kernels`` the ANOVA kernels [None, A_1, .., A_{degree-1}] of
    every row and component (arrays of shape (rows, k); A_0 = 1 is left implicit), which
    the gradient needs, and ``value`` the sum over the components of A_degree on every
    row, computed from row sums (its own power sum only as a product with P's row sums).
    ``X_powers[j]`` is X**j (j >= 1), ``gamma`` the dummy rows or None."""
    def power_sum(j, summed):
        """D_j (rows, k), or its sum over the components (rows,) when ``summed``."""
        Pj = P ** j
        extra = 0.0 if gamma is None else np.sum(gamma ** j, axis=0)
        if summed:
            return X_powers[j] @ np.sum(Pj, axis=1) + np.sum(extra)
        return X_powers[j] @ Pj + extra

    D = [None] + [power_sum(j, False) for j in range(1, degree)]
    A = [None]
    for t in range(1, degree + 1):
        # Newton: t A_t = sum_{j=1..t} (-1)^(j+1) A_{t-j} D_j, with A_0 = 1 (the j = t term)
        sign = 1.0 if t % 2 else -1.0
        if t == degree:
            value = sign * power_sum(t, True)
            for j in range(1, t):
                value += (1.0 if j % 2 else -1.0) * np.einsum("ij,ij->i", A[t - j], D[j])
            return A, value / t
        total = sign * D[t]
        for j in range(1, t):
            total += (1.0 if j % 2 else -1.0) * (A[t - j] * D[j])
        A.append(total / t)


def _anova_backward(X_powers, P, gamma, A, degree, r, grad_P, grad_gamma):
    """Add the gradient of ``sum_i r_i sum_s A_degree(x_i; p_s)`` into ``grad_P`` and,
    with dummy rows, ``grad_gamma``; ``A`` the kernels of :func:`_anova_forward`."""
    for j in range(degree):
        if j == degree - 1:  # A_0 = 1
            by_feature = (X_powers[j + 1].T @ r)[:, np.newaxis]
            by_dummy = np.sum(r)
        else:
            weighted = r[:, np.newaxis] * A[degree - 1 - j]
            by_feature = X_powers[j + 1].T @ weighted
            by_dummy = np.sum(weighted, axis=0)
        sign = (-1) ** j
        grad_P += sign * P ** j * by_feature
        if gamma is not None:
            grad_gamma += sign * gamma ** j * by_dummy


def dense_data_gradient(X, y, sw, params, loss_code, kernel, degrees, fit_linear,
                        grads):
    """``sum_i sw_i loss(y_i, y_hat_i)`` on the rows of dense float64 ``X``, returned, and
    its gradient added into ``grads`` (the contract of
    :func:`polylite._engine.solvers.data_gradient`, which computes the same by the
    Cython pass over CSR rows).  Requires :func:`dense_gradient_available`."""
    model = {name: np.asarray(getattr(params, name), np.float64)
             for name in ("intercept", "w", "P", "gamma", "lam")}
    step = max(1, ROW_BLOCK_ENTRIES // max(X.shape[1], model["P"].shape[2], 1))
    total = 0.0
    # Overflow gives inf or NaN silently, as in the Cython pass: the caller checks.
    with np.errstate(over="ignore", invalid="ignore"):
        for lo in range(0, X.shape[0], step):
            rows = slice(lo, lo + step)
            total += _row_block(X[rows], y[rows], sw[rows], model, LOSS_NAMES[loss_code],
                                kernel, degrees, fit_linear, grads)
    return total


def _row_block(X, y, sw, model, loss, kernel, degrees, fit_linear, grads):
    """:func:`dense_data_gradient` on one block of rows (``model``: float64 parameters)."""
    P, lam = model["P"], model["lam"]
    dummies = model["gamma"] if model["gamma"].shape[0] else None  # block 0's dummy rows
    polynomial = kernel == "polynomial"
    powers = [None, X] + [X ** j for j in range(2, 1 if polynomial else max(degrees) + 1)]
    y_hat = np.full(X.shape[0], model["intercept"][0])
    if fit_linear:
        y_hat += X @ model["w"]
    if polynomial:
        Z = X @ P[0]
        if dummies is not None:
            Z += dummies[0]
        Zt = Z ** degrees[0]
        y_hat += Zt @ lam
    else:
        kernels = []
        for b in range(P.shape[0]):
            A, value = _anova_forward(powers, P[b], dummies if b == 0 else None, degrees[b])
            kernels.append(A)
            y_hat += value
    total = float(np.dot(sw, _losses.loss(loss, y, y_hat)))
    r = sw * _losses.loss_gradient(loss, y, y_hat)
    grads["intercept"] += np.sum(r)
    if fit_linear:
        grads["w"] += X.T @ r
    if polynomial:
        t = degrees[0]
        grads["lam"] += Zt.T @ r
        outer = r[:, np.newaxis] * (t * Z ** (t - 1) * lam)
        grads["P"][0] += X.T @ outer
        if dummies is not None:
            grads["gamma"][0] += np.sum(outer, axis=0)
    else:
        for b, A in enumerate(kernels):
            _anova_backward(powers, P[b], dummies if b == 0 else None, A, degrees[b], r,
                            grads["P"][b], grads["gamma"])
    return total
