"""Independent NumPy references shared by the test modules (not the package's code)."""
import numpy as np


def reference_loss(loss, y, p):
    """Per-sample loss values written from the formulas, not from polylite._engine._losses."""
    if loss == "squared":
        return 0.5 * (p - y) ** 2
    if loss == "logistic":
        return np.logaddexp(0.0, -y * p)
    if loss == "squared_hinge":
        return np.maximum(0.0, 1.0 - y * p) ** 2
    raise AssertionError(loss)


def run_cd_epoch(groups, data, indices, indptr, y, sw, intercept, w, P, degrees, gamma,
                 kernel, loss, alpha, beta, fit_intercept, fit_linear, y_pred, lam=None,
                 fit_lam=False, n_threads=1, support=None, thread_min_entries=8192,
                 workspace=None, prior=None, pass_seconds=None):
    """One epoch of ``polylite._engine._cd.cd_epoch`` on explicit arrays: the tests
    set up the rows, groups and parameters themselves (``support`` None: computed;
    ``lam`` None: ones).  ``kernel`` and ``loss`` are codes."""
    import scipy.sparse as sp

    from polylite._engine import _cd
    from polylite.polynomial._base import _OutputParams
    from polylite._engine.problem import Problem
    from polylite._engine.cd_data import CDData
    n, d, k = len(y), P.shape[1], P.shape[2]
    X = sp.csr_matrix((data, indices, indptr), shape=(n, d))
    X.indices, X.indptr = indices, indptr  # as given (scipy may narrow them)
    moments = _cd.column_moments(X.data, indices, indptr, np.asarray(sw, np.float64), d)
    support = moments[0] if support is None else support
    fourth = moments[1]
    if lam is None:
        lam = np.ones(k, P.dtype)
    return _cd.cd_epoch(
        CDData(X, groups, support, fourth, n_threads),
        Problem(y, sw, kernel, np.asarray(degrees, np.intc), loss, alpha, beta,
                  fit_intercept, fit_linear, fit_lam),
        _OutputParams(intercept, w, P, gamma, lam), y_pred, prior=prior,
        workspace=workspace, thread_min_entries=thread_min_entries,
        pass_seconds=pass_seconds)


class Ftrl:
    """FTRL-proximal (McMahan et al. 2013, Algorithm 1) on one array of coordinates
    ``w`` (stepped in place), from z = 0 and n = 0; with ``start``, its first proximal
    term (beta / alpha) centred at the initial ``w`` (z = -beta / alpha w) instead of
    at 0."""

    def __init__(self, w, alpha, beta, l1, l2, start=False):
        self.w, self.z, self.n = w, np.zeros_like(w), np.zeros_like(w)
        self.alpha, self.beta, self.l1, self.l2 = alpha, beta, l1, l2
        if start:
            self.z = -beta / alpha * w

    def step(self, idx, g):
        sigma = (np.sqrt(self.n[idx] + g * g) - np.sqrt(self.n[idx])) / self.alpha
        self.z[idx] += g - sigma * self.w[idx]
        self.n[idx] += g * g
        z = self.z[idx]
        self.w[idx] = np.where(
            np.abs(z) <= self.l1, 0.0,
            -(z - np.sign(z) * self.l1)
            / ((self.beta + np.sqrt(self.n[idx])) / self.alpha + self.l2))
