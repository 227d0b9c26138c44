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
kappa follows the loss's actual curvature along the steps: halved as far as the curvature
observed on the last step leaves room for it, doubled until the model bounds F at the
new point (backtracking, rare).  For the squared loss the model is exact (mu = 1): one
step solves the refit.  The steps are not accelerated: each starts where the last one
ended, whose loss and gradients are known, so that a step costs one pass over the rows
(momentum would need the gradients at an extrapolated point: a second pass).  The
model is minimised by FISTA with the exact projections and adaptive restarts
(O'Donoghue and Candes 2015), in the t x c space of V: its iterations cost O(t^2 c),
independent of the number of rows; only the gradient and the new objective need a
product with Z.  The refit stops when a step at a kappa fitted to the loss (one that
the step did not lower) lowers F by at most ``tol`` (relative): a step at a kappa far
above the loss's curvature is short whatever the distance to the optimum, and stopping
there froze the paths once the ball bound (every refit ended after its first step).

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
# The model's curvature is kept this much above the loss's observed curvature.
CURVATURE_MARGIN = 1.25


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
        cross = self.Z.T @ sz.astype(self._Z.dtype, copy=False)
        gram = np.empty((t + 1, t + 1))
        gram[:t, :t] = self.gram
        gram[t, :t] = gram[:t, t] = cross
        gram[t, t] = float(sz @ self._Z[:, t])
        if not np.all(np.isfinite(gram[t])):
            # The refits' linear algebra would fail on it (LAPACK even prints to stdout).
            raise FloatingPointError(
                f"the outputs of basis vector {t + 1} on X, or their squares, overflow: "
                f"the values of X are too large for the model's degree; scale the "
                f"features of X (for example to unit variance)")
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
        self.outputs_shape = (targets.shape[0], n_outputs)
        self.mu = loss.smoothness(n_outputs)
        self.penalty, self.tau, self.fit_intercept = penalty, tau, fit_intercept

    def __call__(self, O, gradient=True):
        return self.loss(self.targets, O, self.s, gradient)

    def evaluate(self, features, V, b, out=None):
        """The model (V, b) on the features: (O, loss, W, Z^T W, column sums of W), in
        one pass over the rows (``_passes.output_loss``), writing O and W into ``out``
        (a pair of float64 (n_samples, n_outputs) arrays no longer needed) if given."""
        O, W = out if out is not None else (np.empty(self.outputs_shape),
                                            np.empty(self.outputs_shape))
        value, ZtW, column_sums = _passes.output_loss(
            self.loss.kind, features.Z, V, b, self.targets, self.s, O, W,
            features.n_threads)
        return O, value, W, ZtW, column_sums


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

    Variable-metric projected steps (module docstring), each from the current point, so
    that a step costs one pass over the rows (:meth:`Problem.evaluate`: the outputs,
    the loss, its gradients and their products with Z, which the next step starts
    from).  kappa follows the loss's curvature
    along the steps (:func:`_next_curvature`): a step is retried only when the model
    did not bound the loss.  Returns (V, b, O, value, W, iterations, curvature), W the
    loss gradients at O (what the next selection starts from); the objective never
    increases.  ``start``, if given, is (O, value, W) at (V, b) already (a zero row
    appended to V leaves them unchanged): they are not computed again (its arrays O and W
    are overwritten by later steps).
    """
    mean = features.mean if problem.fit_intercept else np.zeros(features.n_basis)
    cov = features.gram - np.outer(mean, mean)
    largest = _largest_eigenvalue(cov)
    kappa = problem.mu if curvature is None else curvature
    ceiling = MAX_CURVATURE_FACTOR * problem.mu
    if start is None:
        O, value, W, ZtW, W_sums = problem.evaluate(features, V, b)
    else:
        O, value, W = start
        ZtW, W_sums = features.transpose_times(W), W.sum(axis=0)
    # The arrays of O and W that no candidate or current point holds, reused by the next
    # evaluation (fresh arrays of this size cost about a tenth of the pass).
    spare = None
    n_iter = 0
    while n_iter < max_iter:
        n_iter += 1
        g_b = W_sums if problem.fit_intercept else np.zeros_like(b)
        g = ZtW - np.outer(mean, g_b)
        while True:
            X = (_model_minimiser(g, kappa, cov, V, problem.tau, problem.penalty,
                                  largest) if V.shape[0] else V)
            D, d_b = X - V, -g_b / kappa
            # Centred variables: b + m V moves by d_b, so b moves by d_b - m D.
            b_new = b + d_b - mean @ D
            O_new, value_new, W_new, ZtW_new, W_sums_new = problem.evaluate(
                features, X, b_new, out=spare)
            spare = O_new, W_new   # if the step is retried
            linear = float(np.sum(g * D) + g_b @ d_b)
            quadratic = float(np.sum(D * (cov @ D)) + d_b @ d_b)
            rounding = 1e-12 * abs(value)
            bounded = value_new <= value + linear + 0.5 * kappa * quadratic + rounding
            used, kappa = kappa, _next_curvature(kappa, value_new - value - linear,
                                                 quadratic, bounded, ceiling, rounding)
            if bounded or used >= ceiling:
                break
        if value_new > value:   # no descent left
            break
        decrease = value - value_new
        spare = O, W
        V, b, O, value, W = X, b_new, O_new, value_new, W_new
        ZtW, W_sums = ZtW_new, W_sums_new
        # A small decrease ends the refit only if the step's kappa fitted the loss: a
        # step at a kappa far above the loss's curvature (the first of a refit, whose
        # kappa comes from elsewhere) is short whether or not the refit has converged.
        if decrease <= tol * abs(value) and kappa >= used:
            break
    return V, b, O, value, W, n_iter, kappa


def _next_curvature(kappa, excess, quadratic, bounded, ceiling, rounding):
    """The curvature kappa of the next model, from the loss's observed curvature along
    the last step, 2 (F(new) - F - <grad F, D>) / <D, C D>: after a bounded step, kappa
    halved as long as it stays above CURVATURE_MARGIN x the observed curvature (once if
    no curvature was seen; kappa unchanged when the step was too short to observe it:
    |excess| within ``rounding``, the rounding error of the loss, whose quotient would
    be noise);
    after a step the model did not bound, kappa doubled until it exceeds that (at most
    ``ceiling``).  Powers of two times the starting kappa, which rounding errors move
    only at a threshold (fits on equivalent data take the same steps)."""
    if bounded and abs(excess) <= rounding:
        return kappa
    target = CURVATURE_MARGIN * (2.0 * excess / quadratic if quadratic > 0 else 0.0)
    if bounded:
        if target <= 0.0:   # no curvature seen along the step
            return 0.5 * kappa
        while 0.5 * kappa >= target:
            kappa *= 0.5
        return kappa
    kappa *= 2.0
    while kappa < min(target, ceiling):
        kappa *= 2.0
    return kappa


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
