"""The ``polylite`` command line.

``polylite demo``: the main job, a factorization machine fitted on a synthetic
recommender data set (no download), with per-epoch progress, the test error against a
linear baseline, and the time taken.
"""
import argparse
import sys
import time



def _demo(args):
    from sklearn.linear_model import Ridge
    from sklearn.metrics import mean_squared_error
    from sklearn.model_selection import train_test_split

    from . import FactorizationMachineRegressor, __version__
    from .datasets import make_recommender

    print(f"polylite {__version__}: factorization machine on a synthetic recommender")
    X, y = make_recommender(n_samples=args.samples, n_users=args.users,
                            n_items=args.items, degree=args.degree,
                            random_state=args.seed)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.2,
                                                        random_state=args.seed)
    print(f"data: {X.shape[0]} rows ({X_train.shape[0]} train, {X_test.shape[0]} test), "
          f"{X.shape[1]} columns ({args.users} users, {args.items} items, 3 numeric), "
          f"{X.nnz} nonzeros; planted degree {args.degree}")

    start = time.perf_counter()
    linear = Ridge(alpha=1.0).fit(X_train, y_train)
    linear_time = time.perf_counter() - start
    rmse_linear = mean_squared_error(y_test, linear.predict(X_test)) ** 0.5

    # Early stopping on a held-out 10% of the training rows keeps the best epoch.
    fm = FactorizationMachineRegressor(degree=args.degree, n_components=args.components,
                                       beta=args.beta, max_iter=args.epochs, tol=1e-4,
                                       init_scale=0.1, early_stopping=True,
                                       n_iter_no_change=3, random_state=args.seed,
                                       verbose=1)
    start = time.perf_counter()
    fm.fit(X_train, y_train)
    fm_time = time.perf_counter() - start
    rmse_fm = mean_squared_error(y_test, fm.predict(X_test)) ** 0.5

    print()
    print(f"{'model':<34}{'test RMSE':>10}{'fit time':>11}")
    print(f"{'linear baseline (sklearn Ridge)':<34}{rmse_linear:>10.4f}{linear_time:>10.2f}s")
    print(f"{f'FM degree {args.degree}, k={args.components} ({fm.n_iter_} epochs)':<34}"
          f"{rmse_fm:>10.4f}{fm_time:>10.2f}s")
    print(f"noise floor (planted noise std)   {0.1:>10.4f}")
    return 0 if rmse_fm < rmse_linear else 1


def main(argv=None):
    """Entry point of the ``polylite`` command."""
    parser = argparse.ArgumentParser(prog="polylite", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="fit an FM on a synthetic recommender (main job)")
    demo.add_argument("--samples", type=int, default=200_000)
    demo.add_argument("--users", type=int, default=5_000)
    demo.add_argument("--items", type=int, default=3_000)
    demo.add_argument("--degree", type=int, default=2)
    demo.add_argument("--components", type=int, default=8)
    demo.add_argument("--beta", type=float, default=1e-5)
    demo.add_argument("--epochs", type=int, default=100)
    demo.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.command == "demo":
        return _demo(args)
    return 2  # pragma: no cover - argparse rejects unknown commands


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
