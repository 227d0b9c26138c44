"""Ranking and rating metrics: hand-computed examples, brute-force loops over users and
scikit-learn's ndcg_score and roc_auc_score."""
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.exceptions import UndefinedMetricWarning
from sklearn.metrics import ndcg_score, roc_auc_score

from polylite.metrics import (auc_score, binary_ndcg_at_k, map_at_k, ndcg_at_k,
                              precision_at_k, recall_at_k, rmse)

LIST_METRICS = [precision_at_k, recall_at_k, map_at_k, binary_ndcg_at_k]


def test_rmse():
    assert rmse([1, 2, 3], [1, 2, 5]) == pytest.approx(np.sqrt(4 / 3))
    assert rmse([1, 2], [2, 2], sample_weight=[3, 1]) == pytest.approx(np.sqrt(3 / 4))


def test_ndcg_hand_computed():
    # User 7: ratings 3, 5, 1 scored 0.9, 0.5, 0.1 (ranked 3, 5, 1; ideal 5, 3, 1).
    # User 8: ratings 4, 2 scored 0.2, 0.3 (ranked 2, 4; ideal 4, 2).
    # User 9: one rating only: skipped.
    y = [3, 5, 1, 4, 2, 5]
    s = [0.9, 0.5, 0.1, 0.2, 0.3, 0.0]
    u = [7, 7, 7, 8, 8, 9]
    d = np.log2([2, 3, 4])
    dcg7 = 7 / d[0] + 31 / d[1] + 1 / d[2]
    idcg7 = 31 / d[0] + 7 / d[1] + 1 / d[2]
    dcg8, idcg8 = 3 / d[0] + 15 / d[1], 15 / d[0] + 3 / d[1]
    mean, users, per = ndcg_at_k(y, s, u, k=3, per_user=True)
    np.testing.assert_allclose(per, [dcg7 / idcg7, dcg8 / idcg8])
    assert users.tolist() == [7, 8]
    assert mean == pytest.approx((dcg7 / idcg7 + dcg8 / idcg8) / 2)
    # k = 1: only the first item counts.
    np.testing.assert_allclose(ndcg_at_k(y, s, u, k=1, per_user=True)[2], [7 / 31, 3 / 15])
    # min_items=1 keeps user 9 (a single item is always in ideal order).
    assert ndcg_at_k(y, s, u, k=3, min_items=1, per_user=True)[2][-1] == 1.0


@pytest.mark.parametrize("k", [1, 3, 5, 50])
def test_ndcg_equals_sklearn_per_user(rng, k):
    n_users = 30
    sizes = rng.integers(2, 12, n_users)
    users = np.repeat(rng.permutation(1000)[:n_users], sizes)
    order = rng.permutation(len(users))  # users' rows interleaved
    users = users[order]
    y = rng.integers(1, 6, len(users)).astype(float)
    s = rng.normal(size=len(users))
    mean, evaluated, per = ndcg_at_k(y, s, users, k=k, per_user=True)
    expected = [ndcg_score([2 ** y[users == u] - 1], [s[users == u]], k=k)
                for u in evaluated]
    np.testing.assert_allclose(per, expected, rtol=1e-12)
    assert mean == pytest.approx(np.mean(expected))


def test_ndcg_ties_and_zero_relevance():
    # Equal scores keep the order of the rows.
    assert ndcg_at_k([1, 3], [0.5, 0.5], [0, 0], k=1) == pytest.approx(1 / 7)
    assert ndcg_at_k([3, 1], [0.5, 0.5], [0, 0], k=1) == 1.0
    # A user whose items all have relevance 0 scores 0, as in sklearn.
    assert ndcg_at_k([0, 0], [0.2, 0.1], [0, 0]) == 0.0
    with pytest.warns(UndefinedMetricWarning, match="no user has 2 or more items"):
        assert np.isnan(ndcg_at_k([1, 2], [0.2, 0.1], [0, 1]))


def test_ndcg_large_relevance_is_finite_and_exact():
    # Relevances 1100 and 1099 (2^rel overflows a double): in units of 2^1100 the gains
    # are 1 and 1/2 (the -1 of 2^rel - 1 is far below a double's precision).
    d = np.log2([2, 3, 4])
    got = ndcg_at_k([1100, 1099, 0], [0.0, 1.0, 2.0], [5, 5, 5], k=3)
    assert got == pytest.approx((0.5 / d[1] + 1 / d[2]) / (1 / d[0] + 0.5 / d[1]),
                                rel=1e-12)
    # A user of large relevances next to a user of small ones: each is scored alone.
    y, s, u = [1100, 1099, 0, 3, 1], [0.0, 1.0, 2.0, 0.2, 0.9], [5, 5, 5, 6, 6]
    per = ndcg_at_k(y, s, u, k=2, per_user=True)[2]
    assert np.all(np.isfinite(per))
    np.testing.assert_allclose(per, [(0.5 / d[1]) / (1 + 0.5 / d[1]),
                                     (1 + 7 / d[1]) / (7 + 1 / d[1])], rtol=1e-12)


def test_ndcg_small_relevance_keeps_precision():
    # 2^rel - 1 for rel = 1e-20 is 6.9e-21, not 0: the user is scored, not called 0.
    assert ndcg_at_k([1e-20, 0], [0.0, 1.0], [0, 0]) == pytest.approx(1 / np.log2(3))


def test_ndcg_no_user_warns():
    with pytest.warns(UndefinedMetricWarning, match="no user"):
        assert np.isnan(ndcg_at_k([], [], []))


@pytest.mark.parametrize("args, kwargs, match", [
    (([1, 2], [1], [0, 0]), {}, "inconsistent numbers of samples"),
    (([1, 2], [1, 2], [0, 0]), {"k": 0}, "k must be a positive integer"),
    (([1, 2], [1, 2], [0, 0]), {"k": True}, "k must be a positive integer, got True"),
    (([1, 2], [1, 2], [0, 0]), {"k": 2.5}, "k must be a positive integer"),
    (([1, np.nan], [1, 2], [0, 0]), {}, "must be finite"),
    (([-1, 2], [1, 2], [0, 0]), {}, "must be >= 0"),
])
def test_ndcg_errors(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        ndcg_at_k(*args, **kwargs)


def test_precision_and_recall_hand_computed():
    recommended = np.array([["a", "b", "c"], ["d", "a", "e"], ["a", "b", "c"]])
    relevant = [["b", "z"], ["a", "d", "e", "f"], []]  # the third user is skipped
    mean, rows, per = precision_at_k(recommended, relevant, per_user=True)
    assert rows.tolist() == [0, 1]
    np.testing.assert_allclose(per, [1 / 3, 3 / 3])
    assert mean == pytest.approx(2 / 3)
    np.testing.assert_allclose(precision_at_k(recommended, relevant, k=1, per_user=True)[2],
                               [0, 1])
    np.testing.assert_allclose(recall_at_k(recommended, relevant, per_user=True)[2],
                               [1 / 2, 3 / 4])
    assert recall_at_k(recommended, relevant, k=2) == pytest.approx((1 / 2 + 2 / 4) / 2)
    # Integer ids, relevant sets with repeats (counted once).
    assert recall_at_k(np.array([[1, 2]]), [np.array([2, 2, 3])]) == 0.5


def _random_lists(rng, n_users=25, n_items=40, repeats=False):
    """Top-10 lists (with repeated items in some rows if ``repeats``) and relevant
    sets (some empty, some with repeats)."""
    recommended = np.array([rng.permutation(n_items)[:10] for _ in range(n_users)])
    relevant = [rng.choice(n_items, rng.integers(0, 8)) for _ in range(n_users)]
    if repeats:  # some of them relevant
        recommended[::3, 4] = recommended[::3, 1]
        recommended[::4, 9] = recommended[::4, 8]
        for u in range(0, n_users, 6):
            relevant[u] = np.append(relevant[u], recommended[u, 1])
    return recommended, relevant


def _first_hits(row, relevant, k):
    """Brute force: whether each of the first k items is relevant and not seen before."""
    return [item in set(relevant) and item not in row[:r] for r, item in
            enumerate(row[:k])]


@pytest.mark.parametrize("repeats", [False, True])
def test_precision_recall_against_sets(rng, repeats):
    recommended, relevant = _random_lists(rng, repeats=repeats)
    for k in (1, 5, 10):
        hits = [sum(_first_hits(list(r), v, k)) for r, v in zip(recommended, relevant)]
        kept = [i for i, v in enumerate(relevant) if len(v)]
        assert precision_at_k(recommended, relevant, k=k) == pytest.approx(
            np.mean([hits[i] / k for i in kept]))
        assert recall_at_k(recommended, relevant, k=k) == pytest.approx(
            np.mean([hits[i] / len(set(relevant[i])) for i in kept]))


def test_precision_recall_errors():
    with pytest.raises(ValueError, match="recommended must be 2-D"):
        precision_at_k([1, 2], [[1]])
    with pytest.raises(ValueError, match="relevant has 1 users, recommended 2"):
        recall_at_k([[1], [2]], [[1]])
    with pytest.raises(ValueError, match="only 1 items are recommended"):
        recall_at_k([[1]], [[1]], k=2)


def test_repeated_recommendations_count_once():
    assert recall_at_k([[1, 1, 1]], [[1, 2]]) == 0.5
    assert precision_at_k([[1, 1]], [[1]]) == 0.5
    assert map_at_k([[1, 1, 2]], [[1, 2]]) == pytest.approx((1 + 2 / 3) / 2)
    assert binary_ndcg_at_k([[1, 1]], [[1, 2]]) == pytest.approx(1 / (1 + 1 / np.log2(3)))
    # Only later repeats are dropped: the first occurrence keeps its rank.
    np.testing.assert_allclose(map_at_k([[3, 1, 1, 3]], [[1]], per_user=True)[2], [1 / 2])


def test_map_hand_computed():
    recommended = [["a", "b", "c", "d"], ["e", "f", "g", "h"], ["a", "b", "c", "d"],
                   ["a", "b", "c", "d"]]
    relevant = [["b", "d"], ["e", "g", "h", "z", "y"], [], ["z"]]
    mean, rows, per = map_at_k(recommended, relevant, per_user=True)
    # Row 0: hits at ranks 2 and 4, precisions 1/2 and 2/4, over min(2, 4) = 2.
    # Row 1: hits at ranks 1, 3, 4: 1, 2/3, 3/4, over min(5, 4) = 4.  Row 2 is skipped.
    expected = [(1 / 2 + 2 / 4) / 2, (1 + 2 / 3 + 3 / 4) / 4, 0]
    assert rows.tolist() == [0, 1, 3]
    np.testing.assert_allclose(per, expected)
    assert mean == pytest.approx(np.mean(expected))
    # k = 3: row 0 has one hit (1/2) over min(2, 3); row 1 two over min(5, 3).
    np.testing.assert_allclose(map_at_k(recommended, relevant, k=3, per_user=True)[2],
                               [(1 / 2) / 2, (1 + 2 / 3) / 3, 0])


def test_binary_ndcg_hand_computed():
    recommended = [[1, 2, 3], [4, 5, 6], [7, 8, 9]]
    relevant = [[2, 3], [4, 10, 11, 12], [9]]
    d = 1 / np.log2([2, 3, 4])
    mean, rows, per = binary_ndcg_at_k(recommended, relevant, per_user=True)
    expected = [(d[1] + d[2]) / (d[0] + d[1]), d[0] / d.sum(), d[2] / d[0]]
    np.testing.assert_allclose(per, expected)
    assert mean == pytest.approx(np.mean(expected))
    np.testing.assert_allclose(binary_ndcg_at_k(recommended, relevant, k=1, per_user=True)[2],
                               [0, 1, 0])


@pytest.mark.parametrize("repeats", [False, True])
@pytest.mark.parametrize("k", [1, 4, 10])
def test_map_and_binary_ndcg_against_loops(rng, k, repeats):
    recommended, relevant = _random_lists(rng, repeats=repeats)
    aps, ndcgs, kept = [], [], []
    for row, (r, v) in enumerate(zip(recommended, relevant)):
        n_relevant = len(set(v))
        if not n_relevant:
            continue
        kept.append(row)
        hits = _first_hits(list(r), v, k)
        ap = sum(sum(hits[:i + 1]) / (i + 1) for i in range(k) if hits[i])
        aps.append(ap / min(n_relevant, k))
        dcg = sum(1 / np.log2(i + 2) for i in range(k) if hits[i])
        ndcgs.append(dcg / sum(1 / np.log2(i + 2) for i in range(min(n_relevant, k))))
    mean, rows, per = map_at_k(recommended, relevant, k=k, per_user=True)
    assert rows.tolist() == kept
    np.testing.assert_allclose(per, aps, rtol=1e-12)
    assert mean == pytest.approx(np.mean(aps))
    mean, rows, per = binary_ndcg_at_k(recommended, relevant, k=k, per_user=True)
    assert rows.tolist() == kept
    np.testing.assert_allclose(per, ndcgs, rtol=1e-12)
    assert mean == pytest.approx(np.mean(ndcgs))


@pytest.mark.parametrize("metric", LIST_METRICS)
def test_list_metrics_without_users_warn(metric):
    with pytest.warns(UndefinedMetricWarning, match="no user has relevant items"):
        assert np.isnan(metric(np.zeros((0, 5), dtype=int), [], k=3))
    with pytest.warns(UndefinedMetricWarning, match="no user has relevant items"):
        assert np.isnan(metric([[1, 2], [3, 4]], [[], []]))


@pytest.mark.parametrize("metric", LIST_METRICS)
@pytest.mark.parametrize("k", [True, np.bool_(True), 0, 1.5, "2"])
def test_list_metrics_refuse_k(metric, k):
    with pytest.raises(ValueError, match="k must be a positive integer"):
        metric([[1, 2]], [[1]], k=k)


def _auc_by_pairs(scores, positive, negative):
    """Brute force: the share of (positive, negative) pairs in order, ties 1/2."""
    pairs = [(p > n) + 0.5 * (p == n) for p in scores[positive] for n in scores[negative]]
    return np.mean(pairs)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("form", ["lists", "boolean", "sparse"])
def test_auc_equals_sklearn_per_user(rng, dtype, form):
    n_users, n_items = 40, 30
    scores = rng.normal(size=(n_users, n_items)).astype(dtype)
    scores[::2] = np.round(scores[::2], 1)  # many ties
    relevant = rng.random((n_users, n_items)) < 0.15
    exclude = rng.random((n_users, n_items)) < 0.2
    relevant[3], relevant[4] = False, True  # no positive; every candidate positive
    relevant[5] = exclude[5]  # every positive excluded

    def given(mask):
        if form == "lists":
            return [np.flatnonzero(row) for row in mask]
        return sp.csr_matrix(mask) if form == "sparse" else mask

    for excluded in (None, exclude):
        candidate = np.ones_like(relevant) if excluded is None else ~excluded
        expected, kept = [], []
        for u in range(n_users):
            truth = relevant[u][candidate[u]]
            if truth.any() and not truth.all():
                kept.append(u)
                expected.append(roc_auc_score(truth, scores[u][candidate[u]]))
        mean, rows, per = auc_score(scores, given(relevant),
                                    exclude=None if excluded is None else given(excluded),
                                    per_user=True)
        assert 3 not in rows and 4 not in rows and (excluded is None or 5 not in rows)
        assert rows.tolist() == kept
        np.testing.assert_allclose(per, expected, rtol=1e-12)
        assert mean == pytest.approx(np.mean(expected))


def test_auc_infinite_scores_and_relevant_excluded():
    scores = np.array([[-np.inf, 0.5, -np.inf, 2.0, np.inf],
                       [1.0, -np.inf, 3.0, -np.inf, 0.0]])
    relevant = [[0, 3], [1, 2]]
    exclude = [[4], [0]]
    expected = []
    for u in range(2):
        positive = np.isin(np.arange(5), relevant[u])
        candidate = ~np.isin(np.arange(5), exclude[u])
        expected.append(_auc_by_pairs(scores[u], positive & candidate,
                                      candidate & ~positive))
    np.testing.assert_allclose(auc_score(scores, relevant, exclude=exclude,
                                         per_user=True)[2], expected)
    # An item both relevant and excluded is no candidate: relevant [0, 4] is [0].
    assert auc_score(scores[:1], [[0, 4]], exclude=[[4]]) == auc_score(scores[:1], [[0]],
                                                                        exclude=[[4]])
    # A boolean row per user is taken as the flags of the items.
    assert auc_score(scores[:1], [[True, False, False, True, False]]) == \
        auc_score(scores[:1], [[0, 3]])


def test_auc_is_fast():
    import time
    rng = np.random.default_rng(0)
    scores = rng.normal(size=(1000, 2000)).astype(np.float32)
    relevant = rng.random(scores.shape) < 0.01
    start = time.perf_counter()
    auc_score(scores, relevant, exclude=rng.random(scores.shape) < 0.05)
    assert time.perf_counter() - start < 2  # about 0.2 s; no loop over pairs


def test_auc_no_user_warns():
    with pytest.warns(UndefinedMetricWarning, match="no user has both"):
        assert np.isnan(auc_score(np.zeros((2, 3)), [[0, 1, 2], []]))
    with pytest.warns(UndefinedMetricWarning, match="no user has both"):
        assert np.isnan(auc_score(np.zeros((0, 3)), []))


@pytest.mark.parametrize("scores, relevant, kwargs, match", [
    ([[0.1, np.nan]], [[0]], {}, "scores contain NaN"),
    ([0.1, 0.2], [[0]], {}, "scores must be 2-D"),
    ([["a", "b"]], [[0]], {}, "scores must be real numbers"),
    (sp.csr_matrix([[0.1, 0.2]]), [[0]], {}, "scores must be a dense array"),
    ([[0.1, 0.2]], [[0], [1]], {}, "relevant has 2 users, scores 1"),
    ([[0.1, 0.2]], [[2]], {}, r"relevant: column 2 of user 0 is not in \[0, 2\)"),
    ([[0.1, 0.2]], [[-1]], {}, r"column -1 of user 0"),
    ([[0.1, 0.2]], [[0.5]], {}, "relevant must give column indices"),
    ([[0.1, 0.2]], np.ones((1, 3), dtype=bool), {}, r"relevant has shape \(1, 3\)"),
    ([[0.1, 0.2]], [[0]], {"exclude": sp.csr_matrix((2, 2))}, "exclude has shape"),
])
def test_auc_errors(scores, relevant, kwargs, match):
    with pytest.raises(ValueError, match=match):
        auc_score(scores, relevant, **kwargs)
