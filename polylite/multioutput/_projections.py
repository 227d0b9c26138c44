"""The penalties Omega of the output layer V (one row per basis vector) and the exact
Euclidean projections onto their balls {V : Omega(V) <= tau}.

* "l1": ``sum |V_rc|``; the projection soft-thresholds every entry by the one threshold
  that brings the sum to tau (sort-based, Duchi et al. 2008);
* "l1/l2" (group lasso): ``sum_r ||V_r||_2``; the row norms are projected onto the l1 ball
  and every row rescaled to its projected norm;
* "l1/linf": ``sum_r max_c |V_rc|``; row r is clipped at a height mu_r, where the mu_r
  share one threshold theta: ``sum_c (|V_rc| - mu_r)_+ = theta`` for every row kept
  (mu_r > 0), rows whose l1 norm is at most theta are zeroed, and ``sum_r mu_r = tau``
  (Quattoni, Carreras, Collins, Darrell 2009).  The total height is a piecewise linear,
  decreasing function of theta; its breakpoints, sorted once, locate theta exactly.

All projections are O(N log N) for N entries, exact up to rounding, and leave a V already
in the ball unchanged.  They are C kernels (``_ball``): the refit projects
small matrices hundreds of times per basis vector.
"""
import numpy as np

from . import _ball

PENALTIES = ("l1", "l1/l2", "l1/linf")


def _kind(penalty):
    try:
        return PENALTIES.index(penalty)
    except ValueError:
        raise ValueError(f"unknown penalty {penalty!r}; expected one of "
                         f"{list(PENALTIES)}") from None


def penalty_value(V, penalty):
    """Omega(V) for V of shape (n_rows, n_outputs)."""
    V = np.ascontiguousarray(V, dtype=np.float64)
    return _ball.penalty(V, _kind(penalty))


def dual_norm(q, penalty):
    """The norm of one row of the negative gradient that basis selection maximises
    (ALGORITHMS.md section 5): linf for "l1", l2 for "l1/l2", l1 for "l1/linf"."""
    q = np.abs(np.asarray(q, dtype=np.float64))
    if penalty == "l1":
        return float(q.max(initial=0.0))
    if penalty == "l1/l2":
        return float(np.sqrt(q @ q))
    return float(q.sum())


def project(V, tau, penalty):
    """The Euclidean projection of V (n_rows, n_outputs) onto {Omega <= tau}, a new array."""
    V = np.array(V, dtype=np.float64, order="C")
    _ball.project_inplace(V, tau, _kind(penalty))
    return V


def minimise_quadratic(g, kappa, cov, V, tau, penalty, step, max_iter, tol):
    """argmin over X in {Omega <= tau} of <g, X - V> + kappa/2 <X - V, cov (X - V)>.

    FISTA from V with the given step (at most 1 / (kappa * the largest eigenvalue of
    cov)), the exact projections and adaptive restarts (O'Donoghue and Candes 2015), in
    C: at most ``max_iter`` iterations, until the norm of the gradient mapping falls to
    ``tol`` times the first.  g, V of shape (t, c), cov (t, t) symmetric; a new array.
    """
    g, cov, V = (np.ascontiguousarray(A, dtype=np.float64) for A in (g, cov, V))
    X = np.empty(V.shape)
    _ball.minimise_quadratic(g, kappa, cov, V, tau, _kind(penalty), step, max_iter, tol, X)
    return X
