"""Where coordinate descent and L-BFGS cross over: fit time against the density of X.

The measurement behind ``solver="auto"`` (``polylite.polynomial._base.DENSE_FRACTION``):
the estimators at their defaults (tol, max_iter, init_scale) with ``solver="cd"`` and
``solver="lbfgs"`` on data of growing density, reporting the median fit seconds (wall and
CPU, all threads) of ``--repeats`` fits, the epochs (L-BFGS: iterations), the final
training objective and the test RMSE.

Data (``make_data``): ``--rows`` rows (80% train, 20% test) over ``--features`` columns;
each row has ``round(density * features)`` nonzeros at random columns, values N(0, 1)
(standardised numeric features) or 1 (``--binary``: multi-hot indicators, as one-hot
fields); the target is a random degree-2 factorization machine of rank 5 plus a linear
term, plus noise, scaled to unit variance.  With ``--movielens`` the MovieLens 100K u1
split as one-hot user and item columns (2 nonzeros per row, density 0.08%) is added, read
from the folder ``fetch_movielens("100k")`` downloads into polylite's data folder
(~/polylite_data/ml-100k, or in $POLYLITE_DATA), else ../shared/data/movielens/ml-100k.

Models: ``FactorizationMachineRegressor(degree=2)`` and ``PolynomialNetworkRegressor
(degree=2)``, rank ``--components``, ``n_jobs=--n-jobs``, random_state 0.  The machine's
load drifts: compare the two solvers within a row, not seconds across runs::

    python benchmarks/bench_solver_choice.py [--densities 0.01 0.05 0.1 0.2 0.3 0.5 0.7 1]
        [--rows 20000] [--features 100] [--components 10] [--n-jobs 2] [--repeats 3]
        [--models fm pn] [--binary] [--movielens]
"""
import argparse
import time
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning
from threadpoolctl import threadpool_limits

from polylite import FactorizationMachineRegressor, PolynomialNetworkRegressor

from _timing import movielens_folder, movielens_missing

MOVIELENS = movielens_folder()
MODELS = {"fm": FactorizationMachineRegressor, "pn": PolynomialNetworkRegressor}


def make_data(n_rows, n_features, density, binary, seed=0):
    """(X_train, y_train, X_test, y_test): CSR rows of ``density * n_features`` nonzeros
    each, targets from a random FM (see the module docstring)."""
    rng = np.random.RandomState(seed)
    nnz_row = max(1, int(round(density * n_features)))
    cols = np.argsort(rng.rand(n_rows, n_features), axis=1)[:, :nnz_row]
    cols.sort(axis=1)
    values = (np.ones((n_rows, nnz_row)) if binary else rng.randn(n_rows, nnz_row))
    X = sp.csr_matrix((values.ravel(), cols.ravel(),
                       np.arange(0, n_rows * nnz_row + 1, nnz_row)),
                      shape=(n_rows, n_features))
    P = rng.randn(n_features, 5) / np.sqrt(nnz_row)
    w = rng.randn(n_features) / np.sqrt(nnz_row)
    XP = X @ P
    pairwise = 0.5 * (np.sum(XP ** 2, axis=1) - (X.multiply(X)) @ np.sum(P ** 2, axis=1))
    y = X @ w + pairwise
    y = y + 0.1 * y.std() * rng.randn(n_rows)
    y = (y - y.mean()) / y.std()
    split = int(0.8 * n_rows)
    return X[:split], y[:split], X[split:], y[split:]


def load_movielens_u1():
    from polylite.datasets import load_movielens_100k
    X_train, y_train, X_test, y_test = load_movielens_100k(MOVIELENS)
    return X_train, y_train, X_test, y_test


def time_fit(make, X, y, repeats):
    """(median wall s, median CPU s, the last fitted estimator)."""
    wall, cpu = [], []
    for _ in range(repeats):
        est = make()
        start, start_cpu = time.perf_counter(), time.process_time()
        est.fit(X, y)
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return float(np.median(wall)), float(np.median(cpu)), est


def objective(est, X, y):
    """The estimator's training objective (mean squared loss + penalties)."""
    residual = est.predict(X) - y
    factors = [est.P_, est.gamma_] + ([est.lam_] if hasattr(est, "lam_") else [])
    return (0.5 * np.mean(residual ** 2) + 0.5 * est.alpha * np.sum(est.w_ ** 2)
            + 0.5 * est.beta * sum(np.sum(a ** 2) for a in factors))


def run(name, data, args, rows):
    X, y, X_test, y_test = data
    density = X.nnz / (X.shape[0] * X.shape[1])
    for model in args.models:
        for solver in ("cd", "lbfgs"):
            wall, cpu, est = time_fit(
                lambda: MODELS[model](degree=2, n_components=args.components,
                                      solver=solver, n_jobs=args.n_jobs, random_state=0),
                X, y, args.repeats)
            rmse = float(np.sqrt(np.mean((est.predict(X_test) - y_test) ** 2)))
            rows.append((name, density, model, solver, wall, cpu, int(est.n_iter_),
                         objective(est, X, y), rmse))
            print(f"{name:<14} {density:8.4f} {model:<3} {solver:<6} {wall:8.2f} "
                  f"{cpu:8.2f} {int(est.n_iter_):7d} {rows[-1][7]:12.6f} {rmse:8.4f}",
                  flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--densities", type=float, nargs="+",
                        default=[0.01, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 1.0])
    parser.add_argument("--rows", type=int, default=20000)
    parser.add_argument("--features", type=int, default=100)
    parser.add_argument("--components", type=int, default=10)
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--models", nargs="+", default=["fm", "pn"], choices=list(MODELS))
    parser.add_argument("--binary", action="store_true",
                        help="nonzeros of value 1 (multi-hot) instead of N(0, 1)")
    parser.add_argument("--movielens", action="store_true",
                        help="also MovieLens 100K u1, one-hot user and item columns")
    args = parser.parse_args()
    warnings.simplefilter("ignore", ConvergenceWarning)
    print(f"{args.rows} rows x {args.features} features ({'binary' if args.binary else 'N(0,1)'}"
          f" values), degree 2, k={args.components}, n_jobs={args.n_jobs}, median of "
          f"{args.repeats} fit(s)")
    header = (f"{'data':<14} {'density':>8} {'est':<3} {'solver':<6} {'fit s':>8} "
              f"{'CPU s':>8} {'epochs':>7} {'objective':>12} {'test rmse':>8}")
    print(header)
    print("-" * len(header))
    rows = []
    with threadpool_limits(limits=1, user_api="blas"):
        for density in args.densities:
            run(f"density {density:g}", make_data(args.rows, args.features, density,
                                                   args.binary), args, rows)
        if args.movielens:
            missing = movielens_missing(MOVIELENS)
            if missing:
                print(missing)
            else:
                run("movielens u1", load_movielens_u1(), args, rows)
    print("\nCPU seconds of cd over lbfgs (< 1: cd faster):")
    for cd, lbfgs in zip(rows[::2], rows[1::2]):  # (name, density, model, solver, wall, cpu, ...)
        print(f"  {cd[0]:<14} {cd[2]:<3} {cd[5] / lbfgs[5]:6.2f}")


if __name__ == "__main__":
    main()
