"""MovieLens 100K accuracy: FM test RMSE on the u1 split (user and item columns).

Hyper-parameters are chosen on a validation part of u1.base, never on u1.test; the chosen
model is then refitted on all of u1.base and scored once on u1.test.  Two validation
designs:

- "random": a random 10% of the u1.base ratings;
- "u1-like": half of the users, drawn at random, lose 40% of their ratings to the
  validation part, as u1.test was cut from the ratings of a subset of the users (1-462),
  who are left with fewer training ratings than average.

Two column encodings:

- "one-hot": 1 in the user's and the item's column;
- "freq-scaled": the same columns scaled by (n_j / 50)^-e, n_j the user's or item's number
  of ratings in the data being fitted, e chosen in {0.125, 0.25}.  With the uniform
  penalty beta/2 ||P||^2 this penalises the factors of a user or item in proportion to
  n_j^(2e) (frequency-weighted regularisation, as in ALS-WR), by feature scaling alone.

The grid: k in {8, 10}, sum-scale penalties lam in {8, 10, ..., 18} for the factors
(beta = lam / n, n the rows fitted) and a in {2, 8} for the biases (alpha = a / n);
coordinate descent to convergence
(tol 1e-6, at most 300 epochs).  RMSE of predictions clipped to the rating range [1, 5].
Baselines: the global mean and Ridge on the one-hot columns (alpha chosen on "random").
The selected configuration is also fitted at degree 3 (rows have two nonzeros, so the
degree-3 term is zero and degree 3 equals degree 2).

    python benchmarks/bench_movielens.py [--data ~/polylite_data/ml-100k] [--quick]

``--quick``: the first value of each grid and at most 5 epochs per fit (a check that
the script runs, not a measurement).
"""
import argparse
import itertools
import time
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import Ridge

from polylite import FactorizationMachineRegressor
from polylite.datasets import load_movielens_100k

from _timing import movielens_folder, movielens_missing

COMPONENTS = (8, 10)
PENALTIES = (8, 10, 12, 14, 16, 18)
BIAS_PENALTIES = (2, 8)
EXPONENTS = {"one-hot": (0.0,), "freq-scaled": (0.125, 0.25)}
REFERENCE_COUNT = 50.0


def rmse(y, p):
    return float(np.sqrt(np.mean((y - np.clip(p, 1, 5)) ** 2)))


def user_item(X, n_users):
    """The user and item index of each rating (one-hot rows, users first)."""
    columns = X.tocsr().indices.reshape(-1, 2)
    return columns[:, 0], columns[:, 1] - n_users


def encode(users, items, counts, exponent, shape):
    """Rows with the user's and item's columns, scaled by (count / 50)^-exponent."""
    user_counts, item_counts = counts
    n = len(users)
    values = np.column_stack([(user_counts[users] / REFERENCE_COUNT) ** -exponent,
                              (item_counts[items] / REFERENCE_COUNT) ** -exponent])
    columns = np.column_stack([users, shape[0] + items])
    return sp.csr_matrix((values.ravel(), (np.repeat(np.arange(n), 2), columns.ravel())),
                         shape=(n, sum(shape)))


def validation_split(users, design, rng):
    held = np.zeros(len(users), dtype=bool)
    if design == "random":
        held[rng.choice(len(users), len(users) // 10, replace=False)] = True
        return held
    chosen = rng.choice(np.unique(users), len(np.unique(users)) // 2, replace=False)
    for user in chosen:
        rows = np.flatnonzero(users == user)
        held[rng.choice(rows, int(round(0.4 * len(rows))), replace=False)] = True
    return held


def fit_score(fit, score, exponent, k, lam, a, shape, degree=2, max_iter=300):
    """Fit on ``fit`` = (users, items, y), return (RMSE on ``score``, seconds, epochs)."""
    users, items, y = fit
    counts = (np.maximum(np.bincount(users, minlength=shape[0]), 1.0),
              np.maximum(np.bincount(items, minlength=shape[1]), 1.0))
    n = len(y)
    fm = FactorizationMachineRegressor(degree=degree, n_components=k, alpha=a / n,
                                       beta=lam / n, init_scale=0.1, max_iter=max_iter,
                                       tol=1e-6, random_state=0)
    start = time.perf_counter()
    fm.fit(encode(users, items, counts, exponent, shape), y)
    elapsed = time.perf_counter() - start
    pred = fm.predict(encode(score[0], score[1], counts, exponent, shape))
    return rmse(score[2], pred), elapsed, fm.n_iter_


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=movielens_folder())
    parser.add_argument("--quick", action="store_true",
                        help="the first value of each grid, at most 5 epochs per fit")
    args = parser.parse_args()
    missing = movielens_missing(args.data)
    if missing:
        print(missing)
        return
    warnings.simplefilter("ignore", ConvergenceWarning)
    grids = (COMPONENTS, PENALTIES, BIAS_PENALTIES)
    exponents_of, max_iter = EXPONENTS, 300
    if args.quick:
        grids = tuple(values[:1] for values in grids)
        exponents_of = {encoding: values[:1] for encoding, values in EXPONENTS.items()}
        max_iter = 5

    X, y, X_test, y_test = load_movielens_100k(args.data, "u1")
    n_users = 943
    shape = (n_users, X.shape[1] - n_users)
    users, items = user_item(X, n_users)
    test = (*user_item(X_test, n_users), y_test)
    print(f"u1.base {X.shape[0]} ratings, u1.test {X_test.shape[0]}; "
          f"{shape[0]} users, {shape[1]} items")
    print()
    print(f"{'model':<60}{'val RMSE':>10}{'test RMSE':>10}{'fit s':>8}")
    print(f"{'global mean':<60}{'':>10}{rmse(y_test, np.full_like(y_test, y.mean())):>10.4f}")

    rng = np.random.RandomState(0)
    splits = {design: validation_split(users, design, rng) for design in ("random", "u1-like")}
    held = splits["random"]
    ridge_val = {a: rmse(y[held], Ridge(alpha=a).fit(X[~held], y[~held]).predict(X[held]))
                 for a in (0.1, 1, 10)}
    a = min(ridge_val, key=ridge_val.get)
    start = time.perf_counter()
    ridge = Ridge(alpha=a).fit(X, y)
    print(f"{f'linear (Ridge, alpha={a})':<60}{ridge_val[a]:>10.4f}"
          f"{rmse(y_test, ridge.predict(X_test)):>10.4f}{time.perf_counter() - start:>8.2f}")

    for design, held in splits.items():
        fit = (users[~held], items[~held], y[~held])
        val = (users[held], items[held], y[held])
        for encoding, exponents in exponents_of.items():
            grid = list(itertools.product(exponents, *grids))
            scores = {g: fit_score(fit, val, *g, shape, max_iter=max_iter)[0]
                      for g in grid}
            exponent, k, lam, a = best = min(scores, key=scores.get)
            for degree in (2, 3):
                rmse_test, elapsed, epochs = fit_score((users, items, y), test, *best,
                                                       shape, degree=degree,
                                                       max_iter=max_iter)
                e = f", e={exponent}" if encoding != "one-hot" else ""
                name = f"FM m={degree} {encoding} ({design}): k={k}, lam={lam}, a={a}{e}"
                print(f"{name:<60}{scores[best]:>10.4f}{rmse_test:>10.4f}{elapsed:>8.2f}")


if __name__ == "__main__":
    main()
