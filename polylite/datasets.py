"""Data for examples, tests and benchmarks: a synthetic recommender and MovieLens readers.

No data set is shipped with polylite; MovieLens is read from a path the user gives.
"""
import os

import numpy as np
import scipy.sparse as sp
from sklearn.utils import check_random_state

__all__ = ["make_recommender", "load_movielens_100k"]


def _power_law_levels(n_samples, n_levels, exponent, rng):
    # Popularity of level r proportional to (r + 1)^-exponent, levels shuffled.
    weights = (np.arange(1, n_levels + 1, dtype=np.float64)) ** -exponent
    weights /= weights.sum()
    levels = rng.choice(n_levels, size=n_samples, p=weights)
    return rng.permutation(n_levels)[levels]


def make_recommender(n_samples=100_000, n_users=5_000, n_items=3_000, n_numeric=3, *,
                     degree=2, rank=4, noise=0.1, popularity_exponent=1.0,
                     dtype=np.float64, index_dtype=np.int32, random_state=None):
    """Synthetic recommender data: one-hot user and item fields plus numeric columns.

    Each row has one user (one-hot, power-law popularity), one item (likewise) and
    ``n_numeric`` standard-normal columns.  Targets come from a planted factorization
    machine of the given degree and rank (a bias per user and item, a weight per numeric
    column, and interactions between all fields), plus Gaussian noise.

    Parameters
    ----------
    n_samples : int, default=100_000
    n_users, n_items : int, default=5_000, 3_000
    n_numeric : int, default=3
    degree : int, default=2
        Degree of the planted interactions (ANOVA kernel, separate factors per degree).
    rank : int, default=4
        Rank of the planted factor matrices.
    noise : float, default=0.1
        Standard deviation of the added noise.
    popularity_exponent : float, default=1.0
        Exponent of the power law of user and item popularity.
    dtype : {np.float64, np.float32}, default=np.float64
    index_dtype : {np.int32, np.int64}, default=np.int32
    random_state : int, RandomState instance or None, default=None

    Returns
    -------
    X : csr_matrix of shape (n_samples, n_users + n_items + n_numeric)
        Columns: users, then items, then numeric features.
    y : ndarray of shape (n_samples,)
    """
    from .kernels import predict
    rng = check_random_state(random_state)
    gen = np.random.default_rng(rng.randint(2**31))
    users = _power_law_levels(n_samples, n_users, popularity_exponent, gen)
    items = _power_law_levels(n_samples, n_items, popularity_exponent, gen)
    n_features = n_users + n_items + n_numeric
    row_nnz = 2 + n_numeric
    indices = np.empty((n_samples, row_nnz), dtype=index_dtype)
    indices[:, 0] = users
    indices[:, 1] = n_users + items
    indices[:, 2:] = n_users + n_items + np.arange(n_numeric)
    data = np.ones((n_samples, row_nnz), dtype=dtype)
    data[:, 2:] = gen.standard_normal((n_samples, n_numeric))
    indptr = np.arange(0, n_samples * row_nnz + 1, row_nnz, dtype=index_dtype)
    X = sp.csr_matrix((data.ravel(), indices.ravel(), indptr),
                      shape=(n_samples, n_features))
    w = gen.normal(0, 0.3, n_features)
    P = gen.normal(0, 0.5 / rank ** 0.25, (degree - 1, n_features, rank))
    y = predict(X, P, degrees=list(range(2, degree + 1)), w=w, intercept=3.0,
                check_input=False).astype(np.float64)
    y += noise * gen.standard_normal(n_samples)
    return X, y


def _read_ratings(path):
    raw = np.loadtxt(path, dtype=np.int64, usecols=(0, 1, 2), ndmin=2)
    return raw[:, 0] - 1, raw[:, 1] - 1, raw[:, 2].astype(np.float64)


def load_movielens_100k(path, split="u1", dtype=np.float64):
    """Read a MovieLens 100K train/test split as one-hot user and item columns.

    Parameters
    ----------
    path : str or path-like
        The ``ml-100k`` folder (it holds ``u.data``, ``u1.base``, ``u1.test``, ...).
    split : {"u1", ..., "u5", "ua", "ub"}, default="u1"
        Which of the data set's own splits to read (``<split>.base``/``<split>.test``).
    dtype : {np.float64, np.float32}, default=np.float64

    Returns
    -------
    X_train, y_train, X_test, y_test : csr_matrix, ndarray, csr_matrix, ndarray
        Columns 0..942 are users, 943..2624 items (the full id ranges of the data set).
    """
    path = os.fspath(path)
    n_users, n_items = 943, 1682
    out = []
    for part in ("base", "test"):
        users, items, ratings = _read_ratings(os.path.join(path, f"{split}.{part}"))
        n = users.shape[0]
        rows = np.repeat(np.arange(n), 2)
        cols = np.column_stack([users, n_users + items]).ravel()
        X = sp.csr_matrix((np.ones(2 * n, dtype=dtype), (rows, cols)),
                          shape=(n, n_users + n_items))
        out += [X, ratings]
    return tuple(out)
