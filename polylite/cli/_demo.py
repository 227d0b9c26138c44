"""``polylite demo``: a factorization machine on a synthetic recommender."""
import time
from types import SimpleNamespace

from ._models import estimators
from ._progress import Progress


def run(args, parser):
    """Fit an FM and a linear baseline on synthetic data; exit status 0 if the FM's
    test RMSE is the lower."""
    from sklearn.linear_model import Ridge
    from sklearn.metrics import mean_squared_error
    from sklearn.model_selection import train_test_split

    from .. import FactorizationMachineRegressor, __version__
    from ..datasets import make_recommender

    # (full run, --quick): the sizes not given on the command line
    for name, sizes in (("samples", (200_000, 20_000)), ("users", (5_000, 500)),
                        ("items", (3_000, 300))):
        if getattr(args, name) is None:
            setattr(args, name, sizes[args.quick])

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
                                       n_iter_no_change=3, random_state=args.seed)
    # The progress of `polylite fit`: the validation RMSE that the summary reports.
    progress = Progress(SimpleNamespace(quiet=False, progress="auto"))
    start = time.perf_counter()
    with progress.watching(estimators()["fm"], fm):
        fm.fit(X_train, y_train)
    progress.close()
    fm_time = time.perf_counter() - start
    rmse_fm = mean_squared_error(y_test, fm.predict(X_test)) ** 0.5

    print()
    print(f"{'model':<34}{'test RMSE':>10}{'fit time':>11}")
    print(f"{'linear baseline (sklearn Ridge)':<34}{rmse_linear:>10.4f}{linear_time:>10.2f}s")
    print(f"{f'FM degree {args.degree}, k={args.components} ({fm.n_iter_} epochs)':<34}"
          f"{rmse_fm:>10.4f}{fm_time:>10.2f}s")
    print(f"noise floor (planted noise std)   {0.1:>10.4f}")
    return 0 if rmse_fm < rmse_linear else 1
