"""Metrics of rating prediction and top-N recommendation, vectorised over users.

- :func:`rmse`: root mean squared error of predicted ratings;
- :func:`ndcg_at_k`: how well predicted scores order each user's rated items (the
  measure of ordinal and ranking models on rating data);
- :func:`precision_at_k`, :func:`recall_at_k`, :func:`map_at_k`,
  :func:`binary_ndcg_at_k`: how many of the items recommended to each user (for instance
  by :func:`polylite.recommend.recommend`) are relevant, and how high they are ranked;
- :func:`auc_score`: how well a matrix of scores (for instance from
  :func:`polylite.recommend.score_items`) ranks each user's relevant items above the
  other candidates.

The ranking metrics are means over users.  When no user can be evaluated (for instance
no user has a relevant item) the mean is NaN, with an
:class:`~sklearn.exceptions.UndefinedMetricWarning`.
"""
import numbers
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.exceptions import UndefinedMetricWarning
from sklearn.metrics import root_mean_squared_error
from sklearn.utils import check_consistent_length, column_or_1d

__all__ = ["rmse", "ndcg_at_k", "precision_at_k", "recall_at_k", "map_at_k",
           "binary_ndcg_at_k", "auc_score"]

# Scores ranked at once by auc_score: bounds the memory of its work arrays.
_AUC_BATCH = 2 ** 20


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


def _check_cutoff(k):
    """``k`` as an int, if it is a positive whole number (True is not taken for 1)."""
    whole = isinstance(k, numbers.Integral) or (isinstance(k, numbers.Real)
                                                and float(k).is_integer())
    if isinstance(k, (bool, np.bool_)) or not whole or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    return int(k)


def _group_ranks(codes, sizes, keys):
    """Rank (0 = first) of each row within its group when sorted by ``keys`` descending.

    ``codes`` are the rows' groups (0 .. n_groups - 1), ``sizes`` the rows per group.
    Ties are broken by the order of the rows.
    """
    order = np.lexsort((np.arange(len(keys)), -keys, codes))
    starts = np.cumsum(sizes) - sizes
    ranks = np.empty(len(keys), dtype=np.int64)
    ranks[order] = np.arange(len(keys)) - starts[codes[order]]
    return ranks


def ndcg_at_k(y_true, y_score, users, *, k=10, min_items=2, per_user=False):
    """Normalised discounted cumulative gain of each user's items at rank k, averaged.

    For each user, the user's rows (for instance the ratings of a test set) are ordered
    by ``y_score``; ``DCG@k = sum_{r <= k} (2^rel_r - 1) / log2(r + 1)`` over the first k
    (rel the true relevance, r the rank from 1), divided by the DCG@k of the ideal order
    (by ``y_true``).  A user whose items all have relevance 0 scores 0 (as in
    :func:`sklearn.metrics.ndcg_score`).  Equal scores are ordered as the rows are.
    Each user's gains are scaled by ``2^-max_rel`` of the user, which cancels in the
    ratio, so large relevances give finite values.

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
        Mean over the users evaluated (NaN, with an ``UndefinedMetricWarning``, if none
        is).
    users_evaluated : ndarray of shape (n_users_evaluated,)
        Only when ``per_user``: the users with at least ``min_items`` rows, sorted.
    ndcg_per_user : ndarray of shape (n_users_evaluated,)
        Only when ``per_user``.
    """
    y_true = column_or_1d(y_true).astype(np.float64)
    y_score = column_or_1d(y_score).astype(np.float64)
    users = column_or_1d(users)
    check_consistent_length(y_true, y_score, users)
    k = _check_cutoff(k)
    if not (np.all(np.isfinite(y_true)) and np.all(np.isfinite(y_score))):
        raise ValueError("y_true and y_score must be finite")
    if np.any(y_true < 0):
        raise ValueError("relevance (y_true) must be >= 0")
    labels, codes = np.unique(users, return_inverse=True)
    codes = codes.ravel()
    sizes = np.bincount(codes, minlength=labels.size)
    # Gains (2^rel - 1) scaled by 2^-max_rel of their user: the scale cancels in DCG /
    # ideal DCG, and 2^(rel - max_rel) <= 1 cannot overflow; expm1 keeps small gains.
    top = np.zeros(labels.size)
    np.maximum.at(top, codes, y_true)
    gain = np.exp2(y_true - top[codes]) * -np.expm1(-np.log(2) * y_true)

    def dcg(keys):
        ranks = _group_ranks(codes, sizes, keys)
        cut = ranks < k
        return np.bincount(codes[cut], weights=gain[cut] / np.log2(ranks[cut] + 2),
                           minlength=labels.size)

    actual, ideal = dcg(y_score), dcg(y_true)
    per = np.divide(actual, ideal, out=np.zeros(labels.size), where=ideal > 0)
    return _mean_over(per, sizes >= min_items, per_user, labels=labels,
                      nobody=f"no user has {min_items} or more items")


def _hits(recommended, relevant, k):
    """Check the top-N lists; return whether each of the first k recommended items is
    relevant to its row's user (a repeated item only at its first rank), the number of
    distinct relevant items per user, and the cutoff k."""
    recommended = np.asarray(recommended)
    if recommended.ndim != 2:
        raise ValueError(f"recommended must be 2-D (users, ranked items), got shape "
                         f"{recommended.shape}")
    if len(relevant) != recommended.shape[0]:
        raise ValueError(f"relevant has {len(relevant)} users, recommended "
                         f"{recommended.shape[0]}")
    n_users, n = recommended.shape
    if n == 0 and n_users:
        raise ValueError(f"recommended has no items (shape {recommended.shape})")
    if k is None:
        k = n
    else:
        k = _check_cutoff(k)
        if k > n:
            raise ValueError(f"k={k} but only {n} items are recommended per user")
    sets = [np.asarray(r).ravel() for r in relevant]
    sizes = np.array([np.unique(s).size for s in sets], dtype=np.int64)
    flat = np.concatenate(sets) if sets else np.zeros(0, recommended.dtype)
    # One integer code per distinct item, then one key per (user, item) pair.
    _, codes = np.unique(np.concatenate([recommended.ravel(), flat]), return_inverse=True)
    codes = codes.ravel()
    n_codes = int(codes.max()) + 1 if codes.size else 1
    rows = np.arange(n_users)
    rec_keys = np.repeat(rows, n) * n_codes + codes[:recommended.size]
    rel_keys = np.repeat(rows, [s.size for s in sets]) * n_codes + codes[recommended.size:]
    # An item recommended twice to a user is one hit, at its first rank: the repeat
    # takes a place in the list without showing anything new.
    first = np.zeros(rec_keys.size, dtype=bool)
    first[np.unique(rec_keys, return_index=True)[1]] = True
    hits = (np.isin(rec_keys, rel_keys) & first).reshape(recommended.shape)
    return hits[:, :k], sizes, k


def precision_at_k(recommended, relevant, *, k=None, per_user=False):
    """Share of the first k recommended items that are relevant, averaged over users.

    Users without relevant items are skipped.

    Parameters
    ----------
    recommended : array-like of shape (n_users, n_recommended)
        Item ids recommended to each user, best first (as :func:`polylite.recommend.
        recommend` returns them).  An item listed twice for a user counts once, at its
        first rank.
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
        Mean over the users with relevant items (NaN, with an
        ``UndefinedMetricWarning``, if none).
    rows : ndarray
        Only when ``per_user``: the rows of the users evaluated.
    precision_per_user : ndarray
        Only when ``per_user``.

    Examples
    --------
    >>> from polylite.metrics import precision_at_k
    >>> precision_at_k([[1, 2, 3, 4], [5, 6, 7, 8]], [[2, 4], [9]])
    0.25
    """
    hits, sizes, k = _hits(recommended, relevant, k)
    per = hits.sum(axis=1) / max(k, 1)
    return _mean_over(per, sizes > 0, per_user)


def recall_at_k(recommended, relevant, *, k=None, per_user=False):
    """Share of each user's relevant items among the first k recommended, averaged.

    Users without relevant items are skipped.

    Parameters
    ----------
    recommended : array-like of shape (n_users, n_recommended)
        Item ids recommended to each user, best first (as :func:`polylite.recommend.
        recommend` returns them).  An item listed twice for a user counts once, at its
        first rank.
    relevant : sequence of array-like, length n_users
        The relevant items of each user (for instance the items the user rated 4 or 5
        in a test set), in the ids of ``recommended``.
    k : int or None, default=None
        Cutoff (None: every recommended item).
    per_user : bool, default=False
        Also return the rows evaluated and their own recall.

    Returns
    -------
    recall : float
        Mean over the users with relevant items (NaN, with an
        ``UndefinedMetricWarning``, if none).
    rows : ndarray
        Only when ``per_user``: the rows of the users evaluated.
    recall_per_user : ndarray
        Only when ``per_user``.

    Examples
    --------
    >>> from polylite.metrics import recall_at_k
    >>> recall_at_k([[1, 2, 3, 4], [5, 6, 7, 8]], [[2, 4], [5, 9]], k=2)
    0.5
    """
    hits, sizes, k = _hits(recommended, relevant, k)
    per = np.divide(hits.sum(axis=1), sizes, out=np.zeros(len(sizes)), where=sizes > 0)
    return _mean_over(per, sizes > 0, per_user)


def map_at_k(recommended, relevant, *, k=None, per_user=False):
    """Mean average precision of the first k recommended items, over users.

    The average precision of a user is
    ``AP@k = sum_{r <= k, item r relevant} precision@r / min(n_relevant, k)``: the
    precision at the rank of each relevant item found, summed, and divided by the most
    relevant items the first k could hold.  Users without relevant items are skipped.

    Parameters
    ----------
    recommended : array-like of shape (n_users, n_recommended)
        Item ids recommended to each user, best first (as :func:`polylite.recommend.
        recommend` returns them).  An item listed twice for a user counts once, at its
        first rank.
    relevant : sequence of array-like, length n_users
        The relevant items of each user (for instance the items the user rated 4 or 5
        in a test set), in the ids of ``recommended``.
    k : int or None, default=None
        Cutoff (None: every recommended item).
    per_user : bool, default=False
        Also return the rows evaluated and their own AP@k.

    Returns
    -------
    map : float
        Mean of AP@k over the users with relevant items (NaN, with an
        ``UndefinedMetricWarning``, if none).
    rows : ndarray
        Only when ``per_user``: the rows of the users evaluated.
    ap_per_user : ndarray
        Only when ``per_user``.

    See Also
    --------
    precision_at_k, binary_ndcg_at_k

    Examples
    --------
    The first user's relevant items are ranked first and second (AP 1), the second
    user's only relevant item second (AP 1/2):

    >>> from polylite.metrics import map_at_k
    >>> map_at_k([[1, 2, 3], [4, 5, 6]], [[1, 2], [5]])
    0.75
    """
    hits, sizes, k = _hits(recommended, relevant, k)
    precision = np.cumsum(hits, axis=1) / np.arange(1, k + 1)
    most = np.minimum(sizes, k)
    per = np.divide((precision * hits).sum(axis=1), most, out=np.zeros(len(sizes)),
                    where=most > 0)
    return _mean_over(per, sizes > 0, per_user)


def binary_ndcg_at_k(recommended, relevant, *, k=None, per_user=False):
    """Normalised discounted cumulative gain of the first k recommended items, with
    binary relevance, averaged over users.

    ``DCG@k = sum_{r <= k, item r relevant} 1 / log2(r + 1)`` (r the rank from 1),
    divided by the DCG@k of a list whose first ``min(n_relevant, k)`` items are all
    relevant.  Users without relevant items are skipped.  For graded relevance over a
    user's rated items, see :func:`ndcg_at_k`.

    Parameters
    ----------
    recommended : array-like of shape (n_users, n_recommended)
        Item ids recommended to each user, best first (as :func:`polylite.recommend.
        recommend` returns them).  An item listed twice for a user counts once, at its
        first rank.
    relevant : sequence of array-like, length n_users
        The relevant items of each user (for instance the items the user rated 4 or 5
        in a test set), in the ids of ``recommended``.
    k : int or None, default=None
        Cutoff (None: every recommended item).
    per_user : bool, default=False
        Also return the rows evaluated and their own nDCG@k.

    Returns
    -------
    ndcg : float
        Mean over the users with relevant items (NaN, with an
        ``UndefinedMetricWarning``, if none).
    rows : ndarray
        Only when ``per_user``: the rows of the users evaluated.
    ndcg_per_user : ndarray
        Only when ``per_user``.

    See Also
    --------
    ndcg_at_k, map_at_k

    Examples
    --------
    The only relevant item is ranked second, where it gains ``1 / log2(3)``; ranked
    first it would gain 1:

    >>> from polylite.metrics import binary_ndcg_at_k
    >>> round(binary_ndcg_at_k([[1, 2, 3]], [[2]]), 4)
    0.6309
    """
    hits, sizes, k = _hits(recommended, relevant, k)
    discount = 1 / np.log2(np.arange(2, k + 2))
    dcg = (hits * discount).sum(axis=1)
    # ideal[m]: the DCG of m relevant items ranked first.
    ideal = np.concatenate([[0.0], np.cumsum(discount)])[np.minimum(sizes, k)]
    per = np.divide(dcg, ideal, out=np.zeros(len(sizes)), where=ideal > 0)
    return _mean_over(per, sizes > 0, per_user)


def auc_score(scores, relevant, *, exclude=None, per_user=False):
    """Area under the ROC curve of each user's scores, averaged over users.

    For each user, the AUC is the share of (relevant, other) pairs of candidate items
    in which the relevant item scores higher, equal scores counting one half: the
    probability that a random relevant item is ranked above a random other candidate.
    Every column of ``scores`` is a candidate unless ``exclude`` marks it (for instance
    the items a user rated in the training set); an excluded item is neither relevant
    nor other, even if ``relevant`` lists it.  Users with no relevant candidate or no
    other candidate are skipped.

    Parameters
    ----------
    scores : array-like of shape (n_users, n_items)
        Scores of every item for each user, higher ranked first (for instance from
        :func:`polylite.recommend.score_items`).  Infinite scores are ranked like the
        others (``-inf`` below every finite score); NaN is refused.
    relevant : sequence of array-like, boolean array or sparse matrix
        The relevant items of each user: for each of the n_users, the column indices
        in ``scores`` (integers) or a boolean row of one flag per column; or a boolean
        array or sparse matrix of the shape of ``scores`` whose true (nonzero) entries
        are relevant.
    exclude : sequence of array-like, boolean array, sparse matrix or None, \
default=None
        Items that are not candidates for a user, in the forms of ``relevant`` (None:
        every item is a candidate).
    per_user : bool, default=False
        Also return the rows evaluated and their own AUC.

    Returns
    -------
    auc : float
        Mean over the users evaluated (NaN, with an ``UndefinedMetricWarning``, if
        none).
    rows : ndarray
        Only when ``per_user``: the rows of the users evaluated.
    auc_per_user : ndarray
        Only when ``per_user``.

    See Also
    --------
    sklearn.metrics.roc_auc_score : the AUC of one user.

    Examples
    --------
    The first user's relevant item (column 0) scores above every other; of the second
    user's relevant items (columns 1 and 2), 0.8 is above both others and 0.4 above one
    of the two, so 3 of the 4 pairs are in order:

    >>> import numpy as np
    >>> from polylite.metrics import auc_score
    >>> scores = np.array([[0.9, 0.1, 0.5, 0.3],
    ...                    [0.2, 0.8, 0.4, 0.6]])
    >>> auc_score(scores, [[0], [1, 2]])
    0.875

    Excluding the second user's item 3 leaves one other candidate, below both:

    >>> auc_score(scores, [[0], [1, 2]], exclude=[[], [3]])
    1.0
    """
    if sp.issparse(scores):
        raise ValueError("scores must be a dense array (every item scored for each user)")
    scores = np.asarray(scores)
    if scores.ndim != 2:
        raise ValueError(f"scores must be 2-D (users, items), got shape {scores.shape}")
    if scores.dtype.kind not in "biuf":
        raise ValueError(f"scores must be real numbers, got dtype {scores.dtype}")
    # float64 keeps the order and the ties of float32 and integer scores.
    scores = scores.astype(np.float64, copy=False)
    if np.isnan(scores).any():
        raise ValueError("scores contain NaN: NaN has no rank among the scores")
    positive = _column_mask(relevant, scores.shape, "relevant")
    candidate = (np.ones(scores.shape, dtype=bool) if exclude is None else
                 ~_column_mask(exclude, scores.shape, "exclude"))
    positive = positive & candidate
    n_positive = positive.sum(axis=1)
    n_negative = candidate.sum(axis=1) - n_positive
    rank_sums = np.zeros(scores.shape[0])
    step = max(1, _AUC_BATCH // max(scores.shape[1], 1))
    for start in range(0, scores.shape[0], step):
        rows = slice(start, start + step)
        rank_sums[rows] = _positive_rank_sums(scores[rows], positive[rows], candidate[rows])
    # Mann-Whitney: the pairs in order are the positives' rank sum less the ranks they
    # would have below every negative.
    kept = (n_positive > 0) & (n_negative > 0)
    in_order = rank_sums - n_positive * (n_positive + 1) / 2
    per = np.divide(in_order, n_positive * n_negative, out=np.zeros(len(kept)),
                    where=kept)
    return _mean_over(per, kept, per_user,
                      nobody="no user has both a relevant and another candidate item")


def _positive_rank_sums(scores, positive, candidate):
    """Per row, the sum of the ranks of the ``positive`` entries among the ``candidate``
    entries of the row (1 = lowest score; tied scores share their mean rank)."""
    # Non-candidates become NaN, which sorts after every score: the candidates then
    # fill the first ranks of their row.
    values = np.where(candidate, scores, np.nan)
    order = np.argsort(values, axis=1)
    values = np.take_along_axis(values, order, axis=1)
    position = np.arange(values.shape[1])
    # A run of equal scores spans the positions from its first to its last.
    starts = np.ones(values.shape, dtype=bool)
    starts[:, 1:] = values[:, 1:] != values[:, :-1]
    ends = np.ones(values.shape, dtype=bool)
    ends[:, :-1] = starts[:, 1:]
    first = np.maximum.accumulate(np.where(starts, position, 0), axis=1)
    last = np.minimum.accumulate(np.where(ends, position, values.shape[1])[:, ::-1],
                                 axis=1)[:, ::-1]
    ranks = (first + last) / 2 + 1
    return (ranks * np.take_along_axis(positive, order, axis=1)).sum(axis=1)


def _column_mask(given, shape, name):
    """Boolean mask of the given shape from a boolean array or sparse matrix of that
    shape, or from a sequence of the column indices of each row."""
    if sp.issparse(given) or (isinstance(given, np.ndarray) and given.dtype == bool):
        if given.shape != shape:
            raise ValueError(f"{name} has shape {given.shape}, scores {shape}")
        return given.astype(bool).toarray() if sp.issparse(given) else given
    if len(given) != shape[0]:
        raise ValueError(f"{name} has {len(given)} users, scores {shape[0]}")
    columns = [np.asarray(c).ravel() for c in given]
    # A user's boolean row of one flag per item stands for the items flagged.
    columns = [np.flatnonzero(c) if c.dtype == bool and c.size == shape[1] else c
               for c in columns]
    for user, c in enumerate(columns):
        if c.size and c.dtype.kind not in "iu":
            raise ValueError(f"{name} must give column indices of scores (integers), a "
                             f"boolean array or a sparse matrix; user {user} has "
                             f"{c.dtype} values")
    users = np.repeat(np.arange(shape[0]), [c.size for c in columns])
    columns = (np.concatenate([c.astype(np.int64) for c in columns]) if columns else
               np.zeros(0, dtype=np.int64))
    bad = (columns < 0) | (columns >= shape[1])
    if bad.any():
        raise ValueError(f"{name}: column {columns[bad][0]} of user {users[bad][0]} is "
                         f"not in [0, {shape[1]}), the columns of scores")
    mask = np.zeros(shape, dtype=bool)
    mask[users, columns] = True
    return mask


def _mean_over(per, kept, per_user, labels=None, nobody="no user has relevant items"):
    """The mean of ``per`` over the ``kept`` users, and with ``per_user`` their labels
    (default: their rows) and values.  With no user kept the mean is NaN, and a warning
    says why (``nobody``)."""
    if kept.any():
        mean = float(per[kept].mean())
    else:
        warnings.warn(f"{nobody}: the mean over users is undefined (NaN)",
                      UndefinedMetricWarning, stacklevel=3)
        mean = float("nan")
    if per_user:
        return mean, (np.flatnonzero(kept) if labels is None else labels[kept]), per[kept]
    return mean
