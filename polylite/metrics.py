"""Metrics of rating prediction and top-N recommendation, vectorised over users.

- :func:`rmse`: root mean squared error of predicted ratings;
- :func:`ndcg_at_k`: how well predicted scores order each user's rated items (the
  measure of ordinal and ranking models on rating data);
- :func:`precision_at_k`, :func:`recall_at_k`: how many of the items recommended to each
  user (for instance by :func:`polylite.recommend.recommend`) are relevant.
"""
import numpy as np
from sklearn.metrics import root_mean_squared_error
from sklearn.utils import check_consistent_length, column_or_1d

__all__ = ["rmse", "ndcg_at_k", "precision_at_k", "recall_at_k"]


def rmse(y_true, y_pred, *, sample_weight=None):
    """Root mean squared error, ``sqrt(mean((y_true - y_pred)^2))``.

    Parameters
    ----------
    y_true, y_pred : array-like of shape (n_samples,)
    sample_weight : array-like of shape (n_samples,), default=None

    Returns
    -------
    rmse : float
    """
    return float(root_mean_squared_error(y_true, y_pred, sample_weight=sample_weight))


def _group_ranks(groups, keys):
    """Rank (0 = first) of each row within its group when sorted by ``keys`` descending.

    Ties are broken by the order of the rows.  Returns (ranks, group codes, group sizes).
    """
    codes, sizes = np.unique(groups, return_inverse=True, return_counts=True)[1:]
    order = np.lexsort((np.arange(len(keys)), -keys, codes))
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    ranks = np.empty(len(keys), dtype=np.int64)
    ranks[order] = np.arange(len(keys)) - starts[codes[order]]
    return ranks, codes, sizes


def ndcg_at_k(y_true, y_score, users, *, k=10, min_items=2, per_user=False):
    """Normalised discounted cumulative gain of each user's items at rank k, averaged.

    For each user, the user's rows (for instance the ratings of a test set) are ordered
    by ``y_score``; ``DCG@k = sum_{r <= k} (2^rel_r - 1) / log2(r + 1)`` over the first k
    (rel the true relevance, r the rank from 1), divided by the DCG@k of the ideal order
    (by ``y_true``).  A user whose items all have relevance 0 scores 0 (as in
    :func:`sklearn.metrics.ndcg_score`).  Equal scores are ordered as the rows are.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True relevance (for instance the rating), >= 0.
    y_score : array-like of shape (n_samples,)
        Predicted scores; higher ranks first.
    users : array-like of shape (n_samples,)
        The user (group) of each row.
    k : int, default=10
        Rank cutoff.
    min_items : int, default=2
        Users with fewer rows are skipped (the order of one item says nothing).
    per_user : bool, default=False
        Also return the users and their own nDCG@k.

    Returns
    -------
    ndcg : float
        Mean over the users evaluated (NaN if none is).
    users_evaluated : ndarray of shape (n_users_evaluated,)
        Only when ``per_user``: the users with at least ``min_items`` rows, sorted.
    ndcg_per_user : ndarray of shape (n_users_evaluated,)
        Only when ``per_user``.
    """
    y_true = column_or_1d(y_true).astype(np.float64)
    y_score = column_or_1d(y_score).astype(np.float64)
    users = column_or_1d(users)
    check_consistent_length(y_true, y_score, users)
    if int(k) != k or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    if not (np.all(np.isfinite(y_true)) and np.all(np.isfinite(y_score))):
        raise ValueError("y_true and y_score must be finite")
    if np.any(y_true < 0):
        raise ValueError("relevance (y_true) must be >= 0")
    gain = 2.0 ** y_true - 1
    n_users = np.unique(users).size

    def dcg(keys):
        ranks, codes, sizes = _group_ranks(users, keys)
        top = ranks < k
        return np.bincount(codes[top], weights=gain[top] / np.log2(ranks[top] + 2),
                           minlength=n_users), sizes

    actual, sizes = dcg(y_score)
    ideal, _ = dcg(y_true)
    per = np.divide(actual, ideal, out=np.zeros(n_users), where=ideal > 0)
    return _mean_over(per, sizes >= min_items, per_user, labels=np.unique(users))


def _hits(recommended, relevant):
    """Whether each recommended item is relevant to its row's user, and the counts of
    relevant items per user."""
    recommended = np.asarray(recommended)
    if recommended.ndim != 2:
        raise ValueError(f"recommended must be 2-D (users, ranked items), got shape "
                         f"{recommended.shape}")
    if len(relevant) != recommended.shape[0]:
        raise ValueError(f"relevant has {len(relevant)} users, recommended "
                         f"{recommended.shape[0]}")
    sets = [np.asarray(r).ravel() for r in relevant]
    sizes = np.array([np.unique(s).size for s in sets], dtype=np.int64)
    flat = np.concatenate(sets) if sets else np.zeros(0, recommended.dtype)
    # One integer code per distinct item, then one key per (user, item) pair.
    _, codes = np.unique(np.concatenate([recommended.ravel(), flat]), return_inverse=True)
    n_codes = int(codes.max()) + 1 if codes.size else 1
    rows = np.arange(recommended.shape[0])
    rec_keys = np.repeat(rows, recommended.shape[1]) * n_codes + codes[:recommended.size]
    rel_keys = np.repeat(rows, [s.size for s in sets]) * n_codes + codes[recommended.size:]
    hits = np.isin(rec_keys, rel_keys).reshape(recommended.shape)
    return hits, sizes


def _check_k(k, recommended):
    n = np.shape(recommended)[1] if np.ndim(recommended) == 2 else 0
    if k is None:
        return n
    if int(k) != k or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    if k > n:
        raise ValueError(f"k={k} but only {n} items are recommended per user")
    return int(k)


def precision_at_k(recommended, relevant, *, k=None, per_user=False):
    """Share of the first k recommended items that are relevant, averaged over users.

    Users without relevant items are skipped.

    Parameters
    ----------
    recommended : array-like of shape (n_users, n_recommended)
        Item ids recommended to each user, best first (as :func:`polylite.recommend.
        recommend` returns them).
    relevant : sequence of array-like, length n_users
        The relevant items of each user (for instance the items the user rated 4 or 5
        in a test set), in the ids of ``recommended``.
    k : int or None, default=None
        Cutoff (None: every recommended item).
    per_user : bool, default=False
        Also return the rows evaluated and their own precision.

    Returns
    -------
    precision : float
        Mean over the users with relevant items (NaN if none).
    rows : ndarray
        Only when ``per_user``: the rows of the users evaluated.
    precision_per_user : ndarray
        Only when ``per_user``.
    """
    k = _check_k(k, recommended)
    hits, sizes = _hits(recommended, relevant)
    per = hits[:, :k].sum(axis=1) / k
    return _mean_over(per, sizes > 0, per_user)


def recall_at_k(recommended, relevant, *, k=None, per_user=False):
    """Share of each user's relevant items among the first k recommended, averaged.

    Users without relevant items are skipped.

    Parameters
    ----------
    recommended : array-like of shape (n_users, n_recommended)
        Item ids recommended to each user, best first.
    relevant : sequence of array-like, length n_users
        The relevant items of each user, in the ids of ``recommended``.
    k : int or None, default=None
        Cutoff (None: every recommended item).
    per_user : bool, default=False
        Also return the rows evaluated and their own recall.

    Returns
    -------
    recall : float
        Mean over the users with relevant items (NaN if none).
    rows : ndarray
        Only when ``per_user``: the rows of the users evaluated.
    recall_per_user : ndarray
        Only when ``per_user``.
    """
    k = _check_k(k, recommended)
    hits, sizes = _hits(recommended, relevant)
    per = np.divide(hits[:, :k].sum(axis=1), sizes, out=np.zeros(len(sizes)),
                    where=sizes > 0)
    return _mean_over(per, sizes > 0, per_user)


def _mean_over(per, kept, per_user, labels=None):
    """The mean of ``per`` over the ``kept`` users (NaN if none), and with ``per_user``
    their labels (default: their rows) and values."""
    mean = float(per[kept].mean()) if kept.any() else float("nan")
    if per_user:
        return mean, (np.flatnonzero(kept) if labels is None else labels[kept]), per[kept]
    return mean
