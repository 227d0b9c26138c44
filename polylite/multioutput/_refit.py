"""The corrective steps of the conditional gradient (ALGORITHMS.md section 5, steps 3-4).

:class:`Features` holds what the refits need about the features Z = sigma(H, X~) of the
training rows: Z itself (kept and extended by one column per basis vector, never
recomputed unless H changes), its weighted column means m = s^T Z and weighted Gram
matrix M = Z^T diag(s) Z, and the outputs O = Z V + b.

:func:`refit_output` minimises the loss over V in the ball {Omega(V) <= tau} and the free
intercept b, for fixed Z: a convex problem.  Projected gradient steps on the data (FISTA)
converge very slowly here, because the columns of Z are strongly correlated (condition
numbers of 1e6 and more are common: successive basis vectors overlap).  The refit
therefore takes variable-metric projected steps: each minimises over the ball the
quadratic model

    F(V) + <grad F, D> + kappa / 2 <D, C D>,    D = V_new - V,

with C the weighted covariance of the features, M - m m^T (in the variables
(V, b + m V) the features are centred, which decouples the intercept: its step is
-grad_b F / kappa).  With kappa = mu, the loss's smoothness constant, the model is an
upper bound of F (the Hessian of F is at most mu C per output), so each step decreases F;
kappa is halved after each step and doubled until the model bounds F at the new point
(backtracking), which adapts it to the loss's actual curvature.  For the squared loss the
model is exact (mu = 1): one step solves the refit.  The steps are accelerated (Nesterov
momentum on (V, b), restarted when the objective would rise).  The model is minimised
by FISTA with the exact projections and adaptive restarts (O'Donoghue and Candes 2015),
in the t x c space of V: its iterations cost O(t^2 c), independent of the number of
rows; only the gradient and the new objective need a product with Z.  The refit stops
when a step lowers F by at most ``tol`` (relative).

:func:`refit_full` also moves the basis vectors: alternating rounds of one projected
gradient step on H (rows kept in the unit ball, step by backtracking) and a warm
:func:`refit_output`, while the objective keeps falling by more than ``tol`` (relative).
The gradient of the loss in row h_r is 2 Gamma_{e_r} h_r with e_r = W v_r (both
sigma's gradients are 2 Gamma h), one pass over X for all rows at once.
"""
import numpy as np

from . import _passes
from ._projections import minimise_quadratic, penalty_value


def linear_outputs(Z, V, b, n_threads=1):
    """Z V + b, float64 (n_samples, n_outputs), on ``n_threads`` threads."""
    return _passes.linear_outputs(Z, np.ascontiguousarray(V, dtype=np.float64),
                                  np.ascontiguousarray(b, dtype=np.float64), n_threads)

# The minimisation of the quadratic model of a refit: iteration limit and tolerance
# (the norm of its gradient mapping, relative to the first).
MODEL_MAX_ITER = 200
MODEL_TOL = 1e-4
# The curvature kappa of the quadratic model is kept below this multiple of the loss's
# smoothness constant, which already makes the model an upper bound of the loss.
MAX_CURVATURE_FACTOR = 4.0


class Features:
    """Z (n_samples, n_basis) of the training rows with its moments (module docstring)."""

    def __init__(self, n_samples, dtype, s, n_threads=1):
        self.s, self.n_threads = s, n_threads
        self._Z = np.empty((n_samples, 8), dtype=dtype, order="F")
        self.n_basis = 0
        self.gram = np.zeros((0, 0))
        self.mean = np.zeros(0)

    @property
    def Z(self):
        return self._Z[:, :self.n_basis]

    def append(self, z):
        """Add the column z (the features of a new basis vector)."""
        t = self.n_basis
        if t == self._Z.shape[1]:
            grown = np.empty((self._Z.shape[0], 2 * t), dtype=self._Z.dtype, order="F")
            grown[:, :t] = self._Z
            self._Z = grown
        self._Z[:, t] = z
        sz = self.s * self._Z[:, t]
        cross = self.Z.T @ sz.astype(self._Z.dtype)
        gram = np.empty((t + 1, t + 1))
        gram[:t, :t] = self.gram
        gram[t, :t] = gram[:t, t] = cross
        gram[t, t] = float(sz @ self._Z[:, t])
        self.gram = gram
        self.mean = np.append(self.mean, sz.sum())
        self.n_basis = t + 1

    def keep(self, mask):
        """Keep the columns where ``mask`` is True (in order)."""
        kept = np.flatnonzero(mask)
        self._Z[:, :kept.shape[0]] = self._Z[:, kept]
        self.n_basis = kept.shape[0]
        self.gram = self.gram[np.ix_(kept, kept)]
        self.mean = self.mean[kept]

    def reset(self, Z):
        """Replace every column (the basis vectors moved)."""
        self.n_basis = 0
        self.gram = np.zeros((0, 0))
        self.mean = np.zeros(0)
        for r in range(Z.shape[1]):
            self.append(Z[:, r])

    def outputs(self, V, b):
        """O = Z V + b, float64 (n_samples, n_outputs)."""
        return linear_outputs(self.Z, V, b, self.n_threads)

    def transpose_times(self, W):
        """Z^T W, float64 (n_basis, n_outputs)."""
        return (self.Z.T @ W.astype(self._Z.dtype, copy=False)).astype(np.float64,
                                                                       copy=False)


class Problem:
    """The loss of the model on the training rows: what every refit minimises."""

    def __init__(self, loss, targets, s, n_outputs, penalty, tau, fit_intercept):
        self.loss, self.targets, self.s = loss, targets, s
        self.mu = loss.smoothness(n_outputs)
        self.penalty, self.tau, self.fit_intercept = penalty, tau, fit_intercept

    def __call__(self, O, gradient=True):
        return self.loss(self.targets, O, self.s, gradient)


def _largest_eigenvalue(A):
    return float(np.linalg.eigvalsh(A)[-1]) if A.shape[0] else 0.0


def _model_minimiser(g, kappa, cov, V, tau, penalty, largest):
    """argmin over X in the Omega-ball of <g, X - V> + kappa/2 <X - V, cov (X - V)>.

    The unconstrained minimiser if it lies in the ball (exact), else FISTA with exact
    projections and adaptive restarts; each iteration costs O(t^2 c), not a pass over
    the rows.
    """
    X = V - np.linalg.lstsq(cov, g, rcond=None)[0] / kappa
    if penalty_value(X, penalty) <= tau:
        return X
    return minimise_quadratic(g, kappa, cov, V, tau, penalty, 1.0 / (kappa * largest),
                              MODEL_MAX_ITER, MODEL_TOL)


def refit_output(problem, features, V, b, *, tol, max_iter, curvature=None, start=None):
    """Minimise the loss over (V, b), V in the Omega-ball, for fixed features.

    Variable-metric projected steps (module docstring), accelerated: each step is taken
    from the extrapolated point (V, b) + beta (step before), beta by Nesterov's rule,
    restarted whenever the objective would rise (O'Donoghue and Candes 2015).  The
    outputs at the extrapolated point are extrapolated too (they are linear in (V, b)),
    so a step costs one product with Z and one evaluation of the loss.  Returns (V, b,
    O, value, W, iterations, curvature), W the loss gradients at O (what the next
    selection starts from); the objective never increases.  ``start``, if given, is
    (O, value, W) at (V, b) already (a zero row appended to V leaves them unchanged):
    they are not computed again.
    """
    mean = features.mean if problem.fit_intercept else np.zeros(features.n_basis)
    cov = features.gram - np.outer(mean, mean)
    largest = _largest_eigenvalue(cov)
    kappa = problem.mu if curvature is None else curvature
    if start is None:
        O = features.outputs(V, b)
        value, W = problem(O)
    else:
        O, value, W = start
    # The extrapolated point (Y, c) with its outputs, objective and gradients.
    Y, c, O_y, value_y, W_y = V, b, O, value, W
    momentum = 1.0
    n_iter = 0
    while n_iter < max_iter:
        n_iter += 1
        g_b = W_y.sum(axis=0) if problem.fit_intercept else np.zeros_like(b)
        g = features.transpose_times(W_y) - np.outer(mean, g_b)
        while True:
            X = (_model_minimiser(g, kappa, cov, Y, problem.tau, problem.penalty,
                                  largest) if V.shape[0] else Y)
            D, d_b = X - Y, -g_b / kappa
            # Centred variables: c + m Y moves by d_b, so c moves by d_b - m D.
            b_new = c + d_b - mean @ D
            O_new = features.outputs(X, b_new)
            value_new, W_new = problem(O_new)
            predicted = float(np.sum(g * D) + g_b @ d_b) + 0.5 * kappa * float(
                np.sum(D * (cov @ D)) + d_b @ d_b)
            if value_new <= value_y + predicted + 1e-12 * abs(value_y) or \
                    kappa >= MAX_CURVATURE_FACTOR * problem.mu:
                break
            kappa *= 2.0
        if value_new > value:
            if momentum == 1.0:   # no descent left from the current point itself
                break
            # Restart: drop the momentum and step from (V, b) again.
            Y, c, O_y, value_y, W_y, momentum = V, b, O, value, W, 1.0
            continue
        decrease = value - value_new
        V_old, b_old, O_old = V, b, O
        V, b, O, value, W = X, b_new, O_new, value_new, W_new
        kappa *= 0.5
        if decrease <= tol * abs(value) or n_iter >= max_iter:
            break   # before the extrapolated point, which would not be used
        next_momentum = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * momentum ** 2))
        beta = (momentum - 1.0) / next_momentum
        Y, c = V + beta * (V - V_old), b + beta * (b - b_old)
        if beta:
            O_y = np.subtract(O, O_old)   # O + beta (O - O_old), one temporary
            O_y *= beta
            O_y += O
            value_y, W_y = problem(O_y)
        else:
            O_y, value_y, W_y = O, value, W
        momentum = next_momentum
    return V, b, O, value, W, n_iter, kappa


def _unit_ball_rows(H):
    norms = np.linalg.norm(H, axis=1)
    return H / np.maximum(norms, 1.0)[:, np.newaxis]


def refit_full(problem, features, op, H, V, b, *, tol, max_iter):
    """Alternating refits of H and (V, b) (module docstring).

    Returns (H, V, b, O, value, rounds); ``features`` holds sigma(H, X~) on return.
    """
    O = features.outputs(V, b)
    value, W = problem(O)
    step = None
    rounds = 0
    while rounds < max_iter and H.shape[0]:
        rounds += 1
        G, _ = op.gamma(H.T, W @ V.T)
        grad = 2.0 * G.T
        if step is None:
            step = 1.0 / max(np.linalg.norm(grad, axis=1).max(), 1e-300)
        else:
            step *= 2.0
        # Backtracking: the quadratic upper bound at the step must hold.
        while True:
            H_new = _unit_ball_rows(H - step * grad)
            move = H_new - H
            Z_new = op.features(H_new)
            O_new = linear_outputs(Z_new, V, b, op.n_threads)
            value_new, _ = problem(O_new, gradient=False)
            if value_new <= value + np.sum(grad * move) + np.sum(move ** 2) / (2 * step) \
                    or step < 1e-12:
                break
            step *= 0.5
        if value_new > value:   # the step has shrunk to nothing: H is stationary
            break
        H = H_new
        features.reset(Z_new)
        V, b, O, refitted, W, _, _ = refit_output(problem, features, V, b, tol=tol,
                                                  max_iter=max_iter)
        decrease = value - refitted
        value = refitted
        if decrease <= tol * max(abs(value), 1e-12):
            break
    return H, V, b, O, value, rounds
