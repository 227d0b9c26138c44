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
  defaults (the FFM's), on one thread;
- the FFM and the FwFM by FTRL-proximal (``solver="ftrl"``, ``l1`` --l1, their other
  defaults), on one thread: what the L1 penalty keeps of them and what it costs.

Reported: test log loss and AUC, the CPU seconds per epoch (the process's, or the
child's for libffm, over the whole fit divided by the epochs: on two threads, the
seconds of both) and the wall-clock seconds per epoch, the medians of --repeats runs,
and the ratio of the CPU seconds to libffm's on as many threads.  Each repeat runs every
model once, in turn, and the ratio is taken within a repeat (on a machine shared with
other work the times of one repeat see about the same load): its median over the
repeats is printed with its range.  On two threads polylite's field-aware models share
each epoch's rows between the threads, which step on the shared parameters without
locks, as libffm's (``n_jobs=2``: the results vary from run to run).  The FTRL rows also
print how many weights their L1 penalty keeps (the FwFM's: and pairs of fields).  A
second table puts
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
    """(test probabilities, CPU seconds, wall seconds of training) of libffm's
    ffm-train/ffm-predict."""
    model = os.path.join(work, f"libffm-{threads}.model")
    out = os.path.join(work, f"libffm-{threads}.out")
    cmd = [os.path.join(folder, "ffm-train"), "-k", "4", "-t", str(epochs), "-s",
           str(threads), "--quiet", train, model]
    # (ffm-train caches the text file's binary form in its working folder: ``work``.)
    start, wall = _child_cpu(), time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, cwd=work)
    seconds, wall = _child_cpu() - start, time.perf_counter() - wall
    subprocess.run([os.path.join(folder, "ffm-predict"), test, model, out], check=True,
                   stdout=subprocess.DEVNULL, cwd=work)
    return np.loadtxt(out), seconds, wall


def run_xlearn(train, test, epochs, threads, work):
    import xlearn
    model = xlearn.create_ffm()
    model.setTrain(train)
    model.disableEarlyStop()
    model.setQuiet()
    params = {"task": "binary", "k": 4, "epoch": epochs, "nthread": threads,
              "metric": "none"}
    path, out = os.path.join(work, "xlearn.model"), os.path.join(work, "xlearn.out")
    start, wall = time.process_time(), time.perf_counter()
    model.fit(params, path)
    seconds, wall = time.process_time() - start, time.perf_counter() - wall
    model.setTest(test)
    model.setSigmoid()
    model.predict(path, out)
    return np.loadtxt(out), seconds, wall


def run_polylite(est, X, y, X_test):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start, wall = time.process_time(), time.perf_counter()
        est.fit(X, y)
        seconds, wall = time.process_time() - start, time.perf_counter() - wall
    return est.predict_proba(X_test)[:, 1], seconds, wall


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
    # (name, threads, callable returning (probabilities, cpu seconds, wall seconds))
    runs = []
    for threads in args.threads:
        if libffm:
            runs.append(("libffm", threads, lambda t=threads: run_libffm(
                libffm, train, test, epochs, t, work)))
        if has_xlearn:
            runs.append(("xLearn FFM", threads, lambda t=threads: run_xlearn(
                train, test, epochs, t, work)))
        extra = dict(n_jobs=threads)
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
    # FTRL on the field models (the fitted estimators kept for the weights they keep).
    sparse = {"polylite FFM (ftrl, l1)": FieldAwareFactorizationMachineClassifier(
                  **ffm, solver="ftrl", l1=args.l1),
              "polylite FwFM (ftrl, l1)": FieldWeightedFactorizationMachineClassifier(
                  **ffm, solver="ftrl", l1=args.l1)}
    for name, est in sparse.items():
        runs.append((name, 1, lambda e=est: run_polylite(e, X_train, y_train, X_test)))
    if args.models:
        runs = [r for r in runs if r[0] in args.models]

    # Each repeat runs every model once, in turn: the ratios to libffm are taken within
    # a repeat.
    measured = {(name, threads): [] for name, threads, _ in runs}
    for _ in range(args.repeats):
        for name, threads, fn in runs:
            measured[(name, threads)].append(fn())
    results = {}
    for (name, threads), runs_of in measured.items():
        peer = measured.get(("libffm", threads))
        ratios = ([s / p[1] for (_, s, _), p in zip(runs_of, peer)] if peer else [])
        loss, auc = _scores(y_test, runs_of[-1][0])
        results[(name, threads)] = (
            loss, auc, float(np.median([s for _, s, _ in runs_of])) / epochs,
            float(np.median([w for _, _, w in runs_of])) / epochs, ratios)
    print(f"\n{'model':34s} {'threads':>7s} {'test logloss':>12s} {'AUC':>7s} "
          f"{'CPU s/epoch':>11s} {'wall s/epoch':>12s} {'CPU / libffm':>20s}")
    for (name, threads), (loss, auc, per_epoch, wall, ratios) in results.items():
        print(f"{name:34s} {threads:7d} {loss:12.5f} {auc:7.4f} {per_epoch:11.3f} "
              f"{wall:12.3f} {_ratio_text(ratios):>20s}")
    if ("libffm", 1) in results:
        print("\ntest logloss minus libffm's (same threads):")
        for (name, threads), (loss, *_) in results.items():
            peer = results.get(("libffm", threads))
            if peer and name != "libffm":
                print(f"  {name:34s} {threads}t  {loss - peer[0]:+.5f}")
    d, n_fields = X_train.shape[1], int(train_fields.max()) + 1
    sizes = parameter_counts(d, n_fields, 4)
    sized = [(name, sizes[name], loss, auc, per_epoch)
             for (name, threads), (loss, auc, per_epoch, *_) in results.items()
             if threads == 1 and name in sizes]
    if sized:
        print(f"\n{'model (1 thread)':34s} {'parameters':>12s} {'test logloss':>12s} "
              f"{'AUC':>7s} {'CPU s/epoch':>11s}")
        for name, count, loss, auc, per_epoch in sized:
            print(f"{name:34s} {count:12,d} {loss:12.5f} {auc:7.4f} {per_epoch:11.3f}")
    kept = []  # what each FTRL model's L1 penalty keeps
    ran = {name for name, _, _ in runs}
    if "logistic regression (ftrl, l1)" in ran:
        kept.append(f"the logistic regression {int(lr.n_nonzero_weights_):,} of "
                    f"{lr.w_.size:,} weights")
    for name, est in sparse.items():
        if name in ran:
            text = (f"the {name.split()[1]} {est.n_nonzero_weights_:,} of "
                    f"{sizes[name] - 1:,} weights")
            if hasattr(est, "n_nonzero_field_pairs_"):
                text += (f" ({est.n_nonzero_field_pairs_} of "
                         f"{n_fields * (n_fields + 1) // 2} pairs of fields)")
            kept.append(text)
    if kept:
        print(f"\nFTRL (l1={args.l1:g}) keeps " + "; ".join(kept))
    if output:
        rows = []
        for (name, threads), (loss, auc, per_epoch, wall, ratios) in results.items():
            peer = results.get(("libffm", threads))
            rows.append([name, threads, round(loss, 5), round(auc, 4),
                         round(per_epoch, 3), round(wall, 3), _ratio_text(ratios),
                         f"{loss - peer[0]:+.5f}" if peer and name != "libffm" else "-"])
        note = (f"{n:,} training and {m:,} test rows of make_ctr (seed {args.seed}), "
                f"{X_train.shape[1]:,} features in {int(train_fields.max()) + 1} fields, "
                f"k = 4, {epochs} epochs; CPU seconds per epoch counted over every "
                f"thread, and wall-clock seconds, the medians of {args.repeats} run(s); "
                f"CPU / libffm: the ratio to libffm's CPU seconds on as many threads in "
                f"the same repeat, its median [range] over the repeats; on 2 threads "
                f"polylite's threads share each epoch's rows (lock-free, as libffm's)")
        if kept:
            note += f"; FTRL (l1={args.l1:g}) keeps " + "; ".join(kept)
        tables = [_results.table("Test log loss and AUC, seconds per epoch",
                                 ["model", "threads", "test logloss", "AUC", "CPU s/epoch",
                                  "wall s/epoch", "CPU / libffm", "logloss - libffm's"],
                                 rows, note)]
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


def _ratio_text(ratios):
    """The median of a model's CPU-time ratios to libffm over the repeats, with their
    range when there are several ("-": no libffm run on as many threads)."""
    if not ratios:
        return "-"
    text = f"{np.median(ratios):.2f}"
    if len(ratios) > 1:
        text += f" [{min(ratios):.2f}-{max(ratios):.2f}]"
    return text


def parameter_counts(d, n_fields, k):
    """The number of parameters of each model of the table, by name: ``d`` features in
    ``n_fields`` fields, vectors of length ``k`` (libffm's FFM has no linear term)."""
    return {"libffm": d * n_fields * k,
            "polylite FFM": 1 + d + d * n_fields * k,
            "polylite FFM, no linear term": d * n_fields * k,
            "polylite FwFM": 1 + d + d * k + n_fields * (n_fields + 1) // 2,
            "polylite FFM (ftrl, l1)": 1 + d + d * n_fields * k,
            "polylite FwFM (ftrl, l1)": 1 + d + d * k + n_fields * (n_fields + 1) // 2,
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
