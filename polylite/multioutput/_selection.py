"""Basis vector selection: the linear minimisation step of the conditional gradient
(NIPS 2017, section 4; ALGORITHMS.md section 5, step 2).

With W = s * the loss gradients (n_samples, n_outputs), the negative gradient of the
objective in the row of a basis vector h is g_h = -(h^T Gamma_c h)_c, and

    q_c(h) = h^T Gamma_c h = sum_i W_ic sigma(h, x~_i).

The step looks for a unit vector h maximising ||q(h)||_p: p = inf for "l1", 2 for
"l1/l2", 1 for "l1/linf".

* p = inf: the dominant eigenvector of each Gamma_c (largest |eigenvalue|), the best c
  kept.  The eigenvectors of all outputs are iterated together, one pass over X per
  iteration (:meth:`RowOperator.gamma` with one column per output).  Each iteration is
  the power method's step made optimal: the next vector is the best one (largest
  |Rayleigh quotient|) of the plane spanned by h and Gamma h, a 2 x 2 eigenproblem that
  costs no extra pass (a two-dimensional Lanczos restart).  It never does worse than the
  power step Gamma h / ||Gamma h|| and, unlike it, converges when Gamma has eigenvalues
  +lambda and -lambda.  It stops when ||Gamma h - rho h|| <= power_tol |rho|.
* p = 2 or 1: from the p = inf answer, the refinement of the paper (its equation 6):
  ``h <- (1 - eta) h + eta grad f(h) / ||grad f(h)||`` for f = sum_c q_c^2 (p = 2) or
  sum_c huber(q_c) (p = 1), eta by Armijo's rule from 1, each new h rescaled onto the
  unit sphere (f grows with the scale of h, so this can only increase it).  Since
  grad f = 2 Gamma_w h with w = W f'(q), one Gamma (one column) per iteration suffices,
  and f itself needs only the features of h.  The paper's Huber function has width 1
  for its objective summed over the rows; ours is a mean, so the width is relative:
  HUBER_WIDTH x max_c |q_c| at the start.  It stops when the ascent's gap
  grad f . (s - h) falls below refine_tol f, or f gains less than refine_tol f.
"""
import numpy as np

from ._projections import dual_norm

HUBER_WIDTH = 1e-2
ARMIJO_SLOPE = 1e-4
MAX_HALVINGS = 30


def dominant_eigenvectors(op, W, rng, tol, max_iter):
    """Dominant eigenvectors of every Gamma_c (columns of W).

    Returns
    -------
    Q : ndarray of shape (dim, n_outputs), unit columns
    rho : ndarray of shape (n_outputs,)
        The Rayleigh quotients q_c^T Gamma_c q_c (eigenvalue estimates).
    n_iter : int
        Iterations run (passes over X after the first).
    """
    c = W.shape[1]
    Q = rng.standard_normal((op.dim, c))
    Q /= np.linalg.norm(Q, axis=0)
    GQ, diagonal = op.gamma(Q, W)
    rho = np.einsum("ij,ij->j", Q, GQ)
    n_iter = 0
    while True:
        R = GQ - rho * Q
        residual = np.linalg.norm(R, axis=0)
        active = residual > tol * np.abs(rho)
        if not active.any() or n_iter >= max_iter:
            break
        n_iter += 1
        P = R[:, active] / residual[active]
        GP, _ = op.gamma(P, W[:, active],
                         None if diagonal is None else diagonal[:, active])
        # The 2 x 2 matrix of Gamma on the plane (q, p): [[rho, beta], [beta, gamma]],
        # beta = p^T Gamma q = p^T r = ||r||.
        alpha, beta = rho[active], residual[active]
        gam = np.einsum("ij,ij->j", P, GP)
        mid, radius = 0.5 * (alpha + gam), np.hypot(0.5 * (alpha - gam), beta)
        theta = np.where(np.abs(mid + radius) >= np.abs(mid - radius), mid + radius,
                         mid - radius)
        a, b = beta, theta - alpha        # eigenvector of theta
        norm = np.hypot(a, b)
        a, b = a / norm, b / norm
        Q[:, active] = a * Q[:, active] + b * P
        GQ[:, active] = a * GQ[:, active] + b * GP
        rho[active] = theta
        # Keep the columns of unit norm despite rounding.
        norms = np.linalg.norm(Q[:, active], axis=0)
        Q[:, active] /= norms
        GQ[:, active] /= norms
    return Q, rho, n_iter


def _objective(q, p, width):
    """f_p of the values q = q(h) and its derivative in q."""
    if p == 2:
        return float(q @ q), 2.0 * q
    a = np.abs(q)
    small = a <= width
    value = np.where(small, 0.5 * q * q / width, a - 0.5 * width)
    slope = np.where(small, q / width, np.sign(q))
    return float(value.sum()), slope


def _features_and_q(op, W, h):
    z = op.features(h)[:, 0]
    return z, W.T @ z.astype(np.float64)


def refine(op, W, h, p, tol, max_iter):
    """The paper's refinement of h for f_p (see the module docstring).

    Returns (h, its features column z, q(h), iterations).
    """
    z, q = _features_and_q(op, W, h)
    width = HUBER_WIDTH * float(np.abs(q).max(initial=0.0))
    if p == 1 and width == 0:
        return h, z, q, 0
    f, df = _objective(q, p, width)
    n_iter = 0
    while n_iter < max_iter and f > 0:
        n_iter += 1
        w = W @ df
        G, _ = op.gamma(h[:, np.newaxis], w[:, np.newaxis])
        grad = 2.0 * G[:, 0]
        norm = np.linalg.norm(grad)
        if norm == 0:
            break
        direction = grad / norm - h
        slope = float(grad @ direction)
        if slope <= tol * f:
            break
        eta = 1.0
        for _ in range(MAX_HALVINGS):
            candidate = h + eta * direction
            candidate /= np.linalg.norm(candidate)
            z_new, q_new = _features_and_q(op, W, candidate)
            f_new, df_new = _objective(q_new, p, width)
            if f_new >= f + ARMIJO_SLOPE * eta * slope:
                break
            eta *= 0.5
        else:
            break
        gain = f_new - f
        h, z, q, f, df = candidate, z_new, q_new, f_new, df_new
        if gain <= tol * f:
            break
    return h, z, q, n_iter


def select_basis(op, W, penalty, rng, *, power_tol, max_power_iter, refine_tol,
                 max_refine_iter):
    """A unit basis vector h approximately maximising ||q(h)||_p (module docstring).

    ``W`` is float64.

    Returns
    -------
    h : ndarray of shape (dim,)
    z : ndarray of shape (n_samples,)
        The features sigma(h, x~_i), in the dtype of the data.
    info : dict
        ``value`` (||q(h)||_p), ``power_iterations``, ``refine_iterations``.
    """
    Q, rho, power_iterations = dominant_eigenvectors(op, W, rng, power_tol,
                                                     max_power_iter)
    h = Q[:, int(np.argmax(np.abs(rho)))].copy()
    refine_iterations = 0
    if penalty == "l1":
        z, q = _features_and_q(op, W, h)
    else:
        h, z, q, refine_iterations = refine(op, W, h, 2 if penalty == "l1/l2" else 1,
                                            refine_tol, max_refine_iter)
    return h, z, dict(value=dual_norm(q, penalty), power_iterations=power_iterations,
                   refine_iterations=refine_iterations)
