"""MovieLens 100K accuracy: FM test RMSE on the u1 split (one-hot user and item columns).

beta (factor regularisation; alpha = 1e-4 for the biases) is chosen on a validation part of
u1.base (a random 10% of its ratings), never on u1.test; the chosen model is then refitted on all of u1.base
and scored once on u1.test.  Baselines: the global mean and a linear model (user + item
biases, the same estimator with fit_linear only / Ridge).

    python benchmarks/bench_movielens.py [--data ../shared/data/movielens/ml-100k]
"""
import argparse
import os
import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import Ridge
from sklearn.metrics import mean_squared_error
from sklearn.model_selection import train_test_split

from polylite import FactorizationMachineRegressor
from polylite.datasets import load_movielens_100k

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_DATA = os.path.join(HERE, "..", "..", "shared", "data", "movielens", "ml-100k")


def rmse(y, p):
    return mean_squared_error(y, np.clip(p, 1, 5)) ** 0.5


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=DEFAULT_DATA)
    parser.add_argument("--components", type=int, default=10)
    parser.add_argument("--degrees", type=int, nargs="+", default=[2, 3])
    parser.add_argument("--betas", type=float, nargs="+",
                        default=[3e-5, 1e-4, 1.5e-4, 2e-4, 3e-4, 1e-3])
    parser.add_argument("--max-iter", type=int, default=100)
    args = parser.parse_args()
    warnings.simplefilter("ignore", ConvergenceWarning)

    X, y, X_test, y_test = load_movielens_100k(args.data, "u1")
    X_fit, X_val, y_fit, y_val = train_test_split(X, y, test_size=0.1, random_state=0)
    print(f"u1.base {X.shape[0]} ratings (fit {X_fit.shape[0]}, validation "
          f"{X_val.shape[0]}), u1.test {X_test.shape[0]}; {X.shape[1]} one-hot columns")
    print()
    print(f"{'model':<36}{'beta':>8}{'val RMSE':>10}{'test RMSE':>10}{'fit s':>8}")
    print(f"{'global mean':<36}{'':>8}{'':>10}{rmse(y_test, np.full_like(y_test, y.mean())):>10.4f}")

    best = None
    for a in [0.1, 1, 10]:
        val = rmse(y_val, Ridge(alpha=a).fit(X_fit, y_fit).predict(X_val))
        if best is None or val < best[0]:
            best = (val, a)
    start = time.perf_counter()
    ridge = Ridge(alpha=best[1]).fit(X, y)
    print(f"{'linear (Ridge, alpha=' + str(best[1]) + ')':<36}{'':>8}{best[0]:>10.4f}"
          f"{rmse(y_test, ridge.predict(X_test)):>10.4f}{time.perf_counter() - start:>8.2f}")

    for degree in args.degrees:
        scores = []
        for beta in args.betas:
            fm = FactorizationMachineRegressor(
                degree=degree, n_components=args.components, alpha=1e-4, beta=beta,
                init_scale=0.1, max_iter=args.max_iter, tol=1e-5, random_state=0)
            fm.fit(X_fit, y_fit)
            scores.append((rmse(y_val, fm.predict(X_val)), beta))
        val, beta = min(scores)
        fm = FactorizationMachineRegressor(
            degree=degree, n_components=args.components, alpha=1e-4, beta=beta,
            init_scale=0.1, max_iter=args.max_iter, tol=1e-5, random_state=0)
        start = time.perf_counter()
        fm.fit(X, y)
        elapsed = time.perf_counter() - start
        name = f"FM degree {degree}, k={args.components} ({fm.n_iter_} epochs)"
        print(f"{name:<36}{beta:>8.0e}{val:>10.4f}{rmse(y_test, fm.predict(X_test)):>10.4f}"
              f"{elapsed:>8.2f}")


if __name__ == "__main__":
    main()
