"""Click-through-rate data: field-aware FMs against libffm (and xLearn), FM and FTRL.

Data: ``polylite.datasets.make_ctr`` (13 numeric fields, log-binned, and 26 categorical
fields of 3 to 10^6 categories, Zipf-like frequencies, a 25% click rate, planted
field-aware interactions), written as libffm files that every library reads: --train-rows
training rows, --test-rows test rows of the same draw.

Models, all with k = 4 and the same number of epochs (--epochs):

- libffm (``ffm-train`` built from its source, --libffm FOLDER): its defaults, lambda
  2e-5, eta 0.2, instance-wise normalisation, -s THREADS;
- polylite's ``FieldAwareFactorizationMachineClassifier`` with its defaults (libffm's,
  plus a linear term and an intercept), and without them (``fit_linear=False,
  fit_intercept=False``: libffm's model);
- xLearn's FFM (``xlearn`` imported if installed), its defaults but k = 4;
- polylite's ``FactorizationMachineClassifier`` (AdaGrad, k = 4, the same unit-norm
  rows), and a logistic regression by FTRL (the FM with ``init_scale=0``, ``l1``
  --l1): how much the planted field-aware interactions are worth;
- polylite's ``FieldWeightedFactorizationMachineClassifier`` (FwFM: one vector per
  feature and a learned weight per pair of fields, Pan et al., WWW 2018) with its
  defaults (the FFM's), on one thread.

Reported: test log loss and AUC, and the CPU seconds per epoch (the process's, or the
child's for libffm, over the whole fit divided by the epochs: on two threads, the
seconds of both), the median of --repeats runs, and the ratio to libffm's on one thread
in the same run.  polylite steps one row at a time on one thread whatever n_jobs (its
threads share mini-batches, ``batch_size > 1``); the "2 threads" rows of polylite are
its FFM with ``batch_size=256, n_jobs=2``, a different algorithm (mini-batch AdaGrad).
The FTRL row also prints how many weights its L1 penalty keeps.  A second table puts
each model's number of parameters (intercept, linear weights, factors, weights of the
pairs of fields) beside its test log loss: what the FwFM's accuracy costs in memory
against the FFM's and the FM's.

The table is written to benchmarks/results/ctr.json (--output; with --quick, or with
--models, only when --output is given), the result file of ``_results.py`` that the
benchmarks page shows.

    python benchmarks/bench_ctr.py --libffm path/to/libffm [--train-rows 1000000]
        [--test-rows 100000] [--epochs 5] [--threads 1 2] [--repeats 1] [--quick]
        [--output PATH]
"""
import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np
from sklearn.metrics import log_loss, roc_auc_score

from polylite import (FactorizationMachineClassifier, FieldAwareFactorizationMachineClassifier,
                      FieldWeightedFactorizationMachineClassifier)
from polylite.datasets import dump_libffm, load_libffm, make_ctr

import _results

DEFAULT_OUTPUT = os.path.join(_results.RESULTS, "ctr.json")


def _child_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _scores(y, p):
    p = np.clip(p, 1e-15, 1 - 1e-15)
    return log_loss(y, p), roc_auc_score(y, p)


def run_libffm(folder, train, test, epochs, threads, work):
    """(test probabilities, CPU seconds of training) of libffm's ffm-train/ffm-predict."""
    model = os.path.join(work, f"libffm-{threads}.model")
    out = os.path.join(work, f"libffm-{threads}.out")
    cmd = [os.path.join(folder, "ffm-train"), "-k", "4", "-t", str(epochs), "-s",
           str(threads), "--quiet", train, model]
    # (ffm-train caches the text file's binary form in its working folder: ``work``.)
    start = _child_cpu()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, cwd=work)
    seconds = _child_cpu() - start
    subprocess.run([os.path.join(folder, "ffm-predict"), test, model, out], check=True,
                   stdout=subprocess.DEVNULL, cwd=work)
    return np.loadtxt(out), seconds


def run_xlearn(train, test, epochs, threads, work):
    import xlearn
    model = xlearn.create_ffm()
    model.setTrain(train)
    model.disableEarlyStop()
    model.setQuiet()
    params = {"task": "binary", "k": 4, "epoch": epochs, "nthread": threads,
              "metric": "none"}
    path, out = os.path.join(work, "xlearn.model"), os.path.join(work, "xlearn.out")
    start = time.process_time()
    model.fit(params, path)
    seconds = time.process_time() - start
    model.setTest(test)
    model.setSigmoid()
    model.predict(path, out)
    return np.loadtxt(out), seconds


def run_polylite(est, X, y, X_test):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start = time.process_time()
        est.fit(X, y)
        seconds = time.process_time() - start
    return est.predict_proba(X_test)[:, 1], seconds


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train-rows", type=int, default=1_000_000)
    parser.add_argument("--test-rows", type=int, default=100_000)
    parser.add_argument("--max-categories", type=int, default=1_000_000)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--l1", type=float, default=1.0, help="L1 penalty of FTRL")
    parser.add_argument("--libffm", default=None,
                        help="folder of libffm's ffm-train and ffm-predict")
    parser.add_argument("--models", nargs="+", default=None,
                        help="run only these (names as printed)")
    parser.add_argument("--dir", default=None, help="folder for the data files")
    parser.add_argument("--quick", action="store_true",
                        help="20,000 + 5,000 rows, 2 epochs, 10^4 categories")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", default=None,
                        help="the JSON file of the results (default: "
                             "benchmarks/results/ctr.json; none with --quick or --models)")
    args = parser.parse_args(argv)
    output = args.output or (None if args.quick or args.models else DEFAULT_OUTPUT)
    if args.quick:
        args.train_rows, args.test_rows, args.epochs = 20_000, 5_000, 2
        args.max_categories = 10_000
    work = args.dir or tempfile.mkdtemp(prefix="bench_ctr-")
    os.makedirs(work, exist_ok=True)
    n, m = args.train_rows, args.test_rows
    X, y, fields = make_ctr(n + m, max_categories=args.max_categories,
                            random_state=args.seed, dtype=np.float32)
    train, test = os.path.join(work, "train.ffm"), os.path.join(work, "test.ffm")
    dump_libffm(X[:n], y[:n], fields, train)
    dump_libffm(X[n:], y[n:], fields, test)
    # polylite reads the same files (features of the test file beyond the training
    # file's are left out, as libffm's prediction does).
    X_train, y_train, train_fields = load_libffm(train, dtype=np.float32)
    X_test, y_test, _ = load_libffm(test, n_features=X_train.shape[1], dtype=np.float32)
    train_fields = np.where(train_fields < 0, 0, train_fields)
    print(f"data: {n:,} training and {m:,} test rows, {X_train.shape[1]:,} features in "
          f"{int(train_fields.max()) + 1} fields, click rate {y_train.mean():.3f}; "
          f"k = 4, {args.epochs} epochs; files in {work}")

    libffm = None
    if args.libffm:
        libffm = os.path.abspath(args.libffm)
        if not os.path.exists(os.path.join(libffm, "ffm-train")):
            sys.exit(f"no ffm-train in {libffm}: build libffm there with make")
        # libffm converts a text file to its binary form once (train.ffm.bin): not timed.
        run_libffm(libffm, train, test, 1, 1, work)
    try:
        import xlearn  # noqa: F401
        has_xlearn = True
    except ImportError:
        has_xlearn = False
        print("xLearn: not installed (pip install xlearn), left out")

    epochs = args.epochs
    ffm = dict(fields=train_fields, max_iter=epochs, random_state=args.seed)
    runs = []  # (name, threads, callable returning (probabilities, cpu seconds))
    for threads in args.threads:
        if libffm:
            runs.append(("libffm", threads, lambda t=threads: run_libffm(
                libffm, train, test, epochs, t, work)))
        if has_xlearn:
            runs.append(("xLearn FFM", threads, lambda t=threads: run_xlearn(
                train, test, epochs, t, work)))
        extra = {} if threads == 1 else dict(batch_size=256, n_jobs=threads)
        runs.append(("polylite FFM", threads, lambda e=extra: run_polylite(
            FieldAwareFactorizationMachineClassifier(**ffm, **e), X_train, y_train,
            X_test)))
        runs.append(("polylite FFM, no linear term", threads, lambda e=extra: run_polylite(
            FieldAwareFactorizationMachineClassifier(
                **ffm, **e, fit_linear=False, fit_intercept=False), X_train, y_train,
            X_test)))
    # The baselines, on one thread: an FM on the same unit-norm rows, and FTRL.
    from sklearn.preprocessing import normalize
    X_unit, X_test_unit = normalize(X_train), normalize(X_test)
    fm = FactorizationMachineClassifier(n_components=4, solver="adagrad", eta0=0.2,
                                        alpha=2e-5, beta=2e-5, max_iter=epochs, tol=0,
                                        random_state=args.seed)
    runs.append(("polylite FM (adagrad)", 1,
                 lambda: run_polylite(fm, X_unit, y_train, X_test_unit)))
    lr = FactorizationMachineClassifier(n_components=1, solver="ftrl", init_scale=0.0,
                                        l1=args.l1, max_iter=epochs, tol=0,
                                        random_state=args.seed)
    runs.append(("logistic regression (ftrl, l1)", 1,
                 lambda: run_polylite(lr, X_unit, y_train, X_test_unit)))
    runs.append(("polylite FwFM", 1, lambda: run_polylite(
        FieldWeightedFactorizationMachineClassifier(**ffm), X_train, y_train, X_test)))
    if args.models:
        runs = [r for r in runs if r[0] in args.models]

    results = {}
    for name, threads, fn in runs:
        measured = [fn() for _ in range(args.repeats)]
        seconds = float(np.median([s for _, s in measured]))
        loss, auc = _scores(y_test, measured[-1][0])
        results[(name, threads)] = (loss, auc, seconds / epochs)
    base = results.get(("libffm", 1))
    print(f"\n{'model':34s} {'threads':>7s} {'test logloss':>12s} {'AUC':>7s} "
          f"{'CPU s/epoch':>11s} {'/ libffm 1t':>11s}")
    for (name, threads), (loss, auc, per_epoch) in results.items():
        ratio = f"{per_epoch / base[2]:.2f}" if base else "-"
        print(f"{name:34s} {threads:7d} {loss:12.5f} {auc:7.4f} {per_epoch:11.3f} "
              f"{ratio:>11s}")
    if base:
        print("\ntest logloss minus libffm's (same threads):")
        for (name, threads), (loss, _, _) in results.items():
            peer = results.get(("libffm", threads))
            if peer and name != "libffm":
                print(f"  {name:34s} {threads}t  {loss - peer[0]:+.5f}")
    d, n_fields = X_train.shape[1], int(train_fields.max()) + 1
    sizes = parameter_counts(d, n_fields, 4)
    sized = [(name, sizes[name], loss, auc, per_epoch)
             for (name, threads), (loss, auc, per_epoch) in results.items()
             if threads == 1 and name in sizes]
    if sized:
        print(f"\n{'model (1 thread)':34s} {'parameters':>12s} {'test logloss':>12s} "
              f"{'AUC':>7s} {'CPU s/epoch':>11s}")
        for name, count, loss, auc, per_epoch in sized:
            print(f"{name:34s} {count:12,d} {loss:12.5f} {auc:7.4f} {per_epoch:11.3f}")
    kept = None
    if any(name.startswith("logistic") for name, _, _ in runs):
        kept = int(lr.n_nonzero_weights_)
        print(f"\nFTRL (l1={args.l1:g}) keeps {kept:,} of {lr.w_.size:,} weights")
    if output:
        rows = []
        for (name, threads), (loss, auc, per_epoch) in results.items():
            peer = results.get(("libffm", threads))
            rows.append([name, threads, round(loss, 5), round(auc, 4),
                         round(per_epoch, 3),
                         round(per_epoch / base[2], 2) if base else "-",
                         f"{loss - peer[0]:+.5f}" if peer and name != "libffm" else "-"])
        note = (f"{n:,} training and {m:,} test rows of make_ctr (seed {args.seed}), "
                f"{X_train.shape[1]:,} features in {int(train_fields.max()) + 1} fields, "
                f"k = 4, {epochs} epochs; CPU seconds per epoch counted over every "
                f"thread, the median of {args.repeats} run(s); polylite's 2-thread rows "
                f"are mini-batches of 256 rows")
        if kept is not None:
            note += f"; FTRL (l1={args.l1:g}) keeps {kept:,} of {lr.w_.size:,} weights"
        tables = [_results.table("Test log loss and AUC, CPU seconds per epoch",
                                 ["model", "threads", "test logloss", "AUC", "CPU s/epoch",
                                  "/ libffm 1t", "logloss - libffm's"], rows, note)]
        if sized:
            tables.append(_results.table(
                "Parameters against accuracy (one thread)",
                ["model", "parameters", "test logloss", "AUC", "CPU s/epoch"],
                [[name, count, round(loss, 5), round(auc, 4), round(per_epoch, 3)]
                 for name, count, loss, auc, per_epoch in sized],
                f"{d:,} features in {n_fields} fields, k = 4: the FFM holds a vector per "
                f"feature and field, the FwFM and the FM one per feature (the FwFM also a "
                f"weight per pair of fields), the logistic regression none"))
        _results.save(
            output, "ctr",
            "Click-through-rate data: field-aware FMs against libffm",
            tables,
            dict(train_rows=n, test_rows=m, max_categories=args.max_categories,
                 epochs=epochs, threads=args.threads, repeats=args.repeats, l1=args.l1,
                 seed=args.seed, features=int(X_train.shape[1]),
                 fields=int(train_fields.max()) + 1),
            peers=("xlearn",), command=_command())
    if args.dir is None:
        shutil.rmtree(work, ignore_errors=True)


def parameter_counts(d, n_fields, k):
    """The number of parameters of each model of the table, by name: ``d`` features in
    ``n_fields`` fields, vectors of length ``k`` (libffm's FFM has no linear term)."""
    return {"libffm": d * n_fields * k,
            "polylite FFM": 1 + d + d * n_fields * k,
            "polylite FFM, no linear term": d * n_fields * k,
            "polylite FwFM": 1 + d + d * k + n_fields * (n_fields + 1) // 2,
            "polylite FM (adagrad)": 1 + d + d * k,
            "logistic regression (ftrl, l1)": 1 + d}


def _command():
    """This run's command line, libffm's folder replaced by a placeholder."""
    argv = list(sys.argv)
    if "--libffm" in argv and argv.index("--libffm") + 1 < len(argv):
        argv[argv.index("--libffm") + 1] = "path/to/libffm"
    return _results.command_line(argv)


if __name__ == "__main__":
    main()
