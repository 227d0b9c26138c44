"""Ranking and rating metrics: hand-computed examples and scikit-learn's ndcg_score."""
import numpy as np
import pytest
from sklearn.metrics import ndcg_score

from polylite.metrics import ndcg_at_k, precision_at_k, recall_at_k, rmse


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
    assert np.isnan(ndcg_at_k([1, 2], [0.2, 0.1], [0, 1]))  # nobody has 2 items


@pytest.mark.parametrize("args, kwargs, match", [
    (([1, 2], [1], [0, 0]), {}, "inconsistent numbers of samples"),
    (([1, 2], [1, 2], [0, 0]), {"k": 0}, "k must be a positive integer"),
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


def test_precision_recall_against_sets(rng):
    recommended = np.array([rng.permutation(40)[:10] for _ in range(25)])
    relevant = [rng.choice(40, rng.integers(0, 8), replace=False) for _ in range(25)]
    for k in (1, 5, 10):
        hits = [len(set(r[:k]) & set(v)) for r, v in zip(recommended, relevant)]
        kept = [i for i, v in enumerate(relevant) if len(v)]
        assert precision_at_k(recommended, relevant, k=k) == pytest.approx(
            np.mean([hits[i] / k for i in kept]))
        assert recall_at_k(recommended, relevant, k=k) == pytest.approx(
            np.mean([hits[i] / len(relevant[i]) for i in kept]))


def test_precision_recall_errors():
    with pytest.raises(ValueError, match="recommended must be 2-D"):
        precision_at_k([1, 2], [[1]])
    with pytest.raises(ValueError, match="relevant has 1 users, recommended 2"):
        recall_at_k([[1], [2]], [[1]])
    with pytest.raises(ValueError, match="only 1 items are recommended"):
        recall_at_k([[1]], [[1]], k=2)
