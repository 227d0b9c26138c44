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
in the ball unchanged.
"""
import numpy as np

PENALTIES = ("l1", "l1/l2", "l1/linf")


def penalty_value(V, penalty):
    """Omega(V) for V of shape (n_rows, n_outputs)."""
    V = np.asarray(V, dtype=np.float64)
    if V.size == 0:
        return 0.0
    if penalty == "l1":
        return float(np.abs(V).sum())
    if penalty == "l1/l2":
        return float(np.linalg.norm(V, axis=1).sum())
    if penalty == "l1/linf":
        return float(np.abs(V).max(axis=1).sum())
    raise ValueError(f"unknown penalty {penalty!r}; expected one of {list(PENALTIES)}")


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
    V = np.array(V, dtype=np.float64)
    if V.size == 0 or penalty_value(V, penalty) <= tau:
        return V
    if penalty == "l1":
        return np.sign(V) * _simplex_rows(np.abs(V).reshape(1, -1), tau).reshape(V.shape)
    if penalty == "l1/l2":
        norms = np.linalg.norm(V, axis=1)
        shrunk = _simplex_rows(norms[np.newaxis], tau)[0]
        scale = np.divide(shrunk, norms, out=np.zeros_like(norms), where=norms > 0)
        return V * scale[:, np.newaxis]
    if penalty == "l1/linf":
        return _project_l1_linf(V, tau)
    raise ValueError(f"unknown penalty {penalty!r}; expected one of {list(PENALTIES)}")


def project_simplex(A, radius=1.0):
    """Each row of A projected onto the simplex {p >= 0, sum p = radius}, a new array."""
    A = np.asarray(A, dtype=np.float64)
    return _simplex_rows(A, radius) if A.shape[1] else A.copy()


def _simplex_rows(A, radius):
    # Sort-based: the threshold theta of a row is (cumsum of its top j entries - radius)/j
    # for the largest j whose j-th entry still exceeds it.
    n, m = A.shape
    top = -np.sort(-A, axis=1)
    cumulative = np.cumsum(top, axis=1) - radius
    ranks = np.arange(1, m + 1)
    support = (top - cumulative / ranks) > 0
    j = m - np.argmax(support[:, ::-1], axis=1)   # the last j in the support (>= 1)
    theta = cumulative[np.arange(n), j - 1] / j
    return np.maximum(A - theta[:, np.newaxis], 0.0)


def _project_l1_linf(V, tau):
    A = np.abs(V)
    n_rows, m = A.shape
    top = -np.sort(-A, axis=1)
    cumulative = np.cumsum(top, axis=1)              # sum of the j largest, j = 1..m
    ranks = np.arange(1, m + 1, dtype=np.float64)
    following = np.concatenate([top[:, 1:], np.zeros((n_rows, 1))], axis=1)
    # Row r keeps its j largest entries above mu_r = (cumulative_j - theta) / j while
    # theta < breaks[r, j-1]; at breaks[r, m-1] (its l1 norm) it leaves (mu_r = 0).
    breaks = cumulative - ranks * following
    # Total height M(theta) = sum_r mu_r = slope_sum - theta * inv_sum on each segment;
    # every breakpoint changes both sums by the row's move from j to j + 1 entries.
    after = np.concatenate([cumulative[:, 1:] / ranks[1:], np.zeros((n_rows, 1))], axis=1)
    d_height = after - cumulative / ranks
    inv_after = np.concatenate([1.0 / ranks[1:], [0.0]])
    d_inv = np.broadcast_to(inv_after - 1.0 / ranks, (n_rows, m))
    order = np.argsort(breaks, axis=None, kind="stable")
    thetas = breaks.ravel()[order]
    height_sums = A.max(axis=1).sum() + np.concatenate([[0.0],
                                                       np.cumsum(d_height.ravel()[order])])
    inv_sums = n_rows + np.concatenate([[0.0], np.cumsum(d_inv.ravel()[order])])
    # M at each breakpoint, from the segment before it (M is continuous).
    heights = height_sums[:-1] - inv_sums[:-1] * thetas
    e = int(np.argmax(heights <= tau))              # the first breakpoint at or below tau
    theta = max((height_sums[e] - tau) / inv_sums[e], 0.0)
    kept = (breaks <= theta).sum(axis=1)            # entries beyond the first that joined
    mu = np.zeros(n_rows)
    alive = kept < m
    j = kept[alive] + 1
    mu[alive] = np.maximum((cumulative[alive, j - 1] - theta) / j, 0.0)
    return np.sign(V) * np.minimum(A, mu[:, np.newaxis])
