"""Ratings as ordered levels: the ordered probit Bayesian FM against myFM's and against the
Gaussian chain, on the five MovieLens 100K folds.

Models, each sampled for ``--sweeps`` sweeps with k = ``--components`` and nothing tuned,
one prior group per field of the encoding, each with its own defaults:

- polylite ``BayesianFactorizationMachineOrdinalRegressor`` (ordered probit; cutpoints by
  Metropolis-Hastings steps): the expected rating under the level probabilities averaged
  over the samples its default burn-in and ``n_kept`` keep;
- myFM ``MyFMOrderedProbit`` (``pip install myfm``; benchmark only), the same expected
  rating from its default samples (the last ``n - 5`` of a chain of n sweeps);
- polylite ``BayesianFactorizationMachineRegressor`` (Gaussian noise), its default
  prediction clipped to [1, 5].

The test RMSE of each is read after each of the ``--checkpoints`` and the last sweep.
Nothing in a sweep depends on the number of sweeps asked for, so a chain of n sweeps is
the first n sweeps of the longer chain of the same seed: every sweep's sample is kept, and
each checkpoint averages those the tool's defaults keep for a chain of that length
(polylite's are checked, on each fold and encoding, against a fit of the shortest length
with the defaults).

Encodings: ``one-hot`` (user and item ids) and ``side`` (ids, the items each user rated,
the users who rated each item, user and movie side features; ``bench_bayes_movielens.py``'s
encodings), as polylite's relational input and myFM's ``RelationBlock``.  For every fold
(``--folds``), encoding and seed (``--seeds``), each model samples one chain; the table
gives each model's mean RMSE over the folds and seeds, the mean difference of polylite's
ordered probit to myFM's with its standard error over the (fold, seed) pairs, and the
median fit CPU seconds of the whole chain.  It is also written to ``--output`` (a result
file of ``_results.py``).

    python benchmarks/bench_bayes_ordinal.py [--data ~/polylite_data/ml-100k]
        [--folds u1 u2 u3 u4 u5] [--encodings one-hot side] [--seeds 0 1 2]
        [--sweeps 200] [--checkpoints 50 100] [--components 10]
        [--output benchmarks/results/bayes_ordinal_movielens.json]
"""
import argparse
import contextlib
import io
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _timing import movielens_folder, movielens_missing  # noqa: E402

import _results  # noqa: E402
from bench_bayes_movielens import (  # noqa: E402
    FOLDS, cpu, encode, myfm_default_prediction, polylite_default_prediction)

from polylite import BayesianFactorizationMachineRegressor  # noqa: E402
from polylite.bayes import BayesianFactorizationMachineOrdinalRegressor  # noqa: E402
from polylite.bayes.ordinal import level_probabilities  # noqa: E402
from polylite.datasets import load_movielens  # noqa: E402

LEVELS = np.arange(1, 6)


def polylite_ordinal(d, args, seed):
    """(CPU seconds, each sweep's expected ratings on the test rows: (sweeps, n_test))."""
    est = BayesianFactorizationMachineOrdinalRegressor(
        n_components=args.components, n_iter=args.sweeps, n_burn_in=0, n_kept=None,
        random_state=seed)
    seconds, _ = cpu(lambda: est.fit(d["X"], d["y"], feature_groups=d["fields"]))
    F = est._sample_outputs(est._validate_predict_data(d["X_test"]))[0]
    # The expected rating is linear in the probabilities: the mean of the samples'
    # expected ratings is that of their mean probabilities.
    return seconds, np.array([level_probabilities(f, c) @ LEVELS
                              for f, c in zip(F, est.cutpoints_samples_)])


def polylite_gaussian(d, args, seed):
    est = BayesianFactorizationMachineRegressor(
        n_components=args.components, n_iter=args.sweeps, n_burn_in=0, n_kept=None,
        random_state=seed)
    seconds, _ = cpu(lambda: est.fit(d["X"], d["y"], feature_groups=d["fields"]))
    return seconds, est._sample_outputs(est._validate_predict_data(d["X_test"]))[0]


def check_defaults(cls, d, args, seed, outputs, n):
    """A chain of n sweeps with the default burn-in and n_kept predicts what
    polylite_default_prediction reads off the longer chain."""
    est = cls(n_components=args.components, n_iter=n, random_state=seed).fit(
        d["X"], d["y"], feature_groups=d["fields"])
    np.testing.assert_allclose(est.predict(d["X_test"]),
                               polylite_default_prediction(outputs, n), rtol=1e-9,
                               atol=1e-9)


def myfm_ordinal(d, args, seed):
    """(CPU seconds, each sweep's expected ratings on the test rows: (sweeps, n_test))."""
    import myfm
    import scipy.sparse as sp
    # myFM takes writable tables (polylite's relational tables are read-only views).
    blocks = [myfm.RelationBlock(b.index, b.table.copy()) for b in d["X"].blocks]
    test_blocks = [myfm.RelationBlock(b.index, b.table.copy()) for b in d["X_test"].blocks]
    fm = myfm.MyFMOrderedProbit(rank=args.components, random_seed=seed)

    def fit():
        with contextlib.redirect_stderr(io.StringIO()):  # its progress bar
            fm.fit(None, d["y"] - 1, X_rel=blocks, group_shapes=d["widths"],
                   n_iter=args.sweeps, n_kept_samples=args.sweeps)
    seconds, _ = cpu(fit)
    empty = sp.csr_matrix((d["X_test"].shape[0], 0))
    return seconds, np.array([sample.oprobit_predict_proba(empty, test_blocks, 0) @ LEVELS
                              for sample in fm.predictor_.samples])


MODELS = {"polylite ordered probit": polylite_ordinal,
          "myFM ordered probit": myfm_ordinal,
          "polylite Gaussian": polylite_gaussian}
DEFAULT_PREDICTION = {"polylite ordered probit": polylite_default_prediction,
                      "myFM ordered probit": myfm_default_prediction,
                      "polylite Gaussian": polylite_default_prediction}
CHECKED = {"polylite ordered probit": BayesianFactorizationMachineOrdinalRegressor,
           "polylite Gaussian": BayesianFactorizationMachineRegressor}


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=movielens_folder())
    parser.add_argument("--folds", nargs="+", default=list(FOLDS), choices=FOLDS)
    parser.add_argument("--encodings", nargs="+", default=["one-hot", "side"],
                        choices=["one-hot", "side"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--sweeps", type=int, default=200)
    parser.add_argument("--checkpoints", type=int, nargs="*", default=[50, 100],
                        help="also score the chains of these numbers of sweeps")
    parser.add_argument("--components", type=int, default=10)
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--output", default=os.path.join(
        _results.RESULTS, "bayes_ordinal_movielens.json"), help="'-' for none")
    args = parser.parse_args()
    missing = movielens_missing(args.data)
    if missing:
        print(missing)
        return
    checkpoints = sorted({n for n in args.checkpoints if 0 < n < args.sweeps}
                         | {args.sweeps})
    models = list(args.models)
    if "myFM ordered probit" in models:
        try:
            import myfm  # noqa: F401
        except ImportError:
            models.remove("myFM ordered probit")
    data = load_movielens(args.data, splits=args.folds)
    print(f"MovieLens 100K, folds {' '.join(args.folds)}, seeds "
          f"{' '.join(map(str, args.seeds))}; k = {args.components}, {args.sweeps} sweeps; "
          f"test RMSE of the expected rating (ordered probit) or of the prediction clipped "
          f"to [1, 5] (Gaussian)")
    print(f"{'fold':<4} {'encoding':<8} {'seed':>4} {'model':<24} {'fit CPU s':>9}   "
          + " ".join(f"{'RMSE@' + str(n):>9}" for n in checkpoints))
    scores = {e: {m: {n: [] for n in checkpoints} for m in models} for e in args.encodings}
    seconds = {e: {m: [] for m in models} for e in args.encodings}
    for fold in args.folds:
        for encoding in args.encodings:
            d = encode(data, fold, encoding)
            for i, seed in enumerate(args.seeds):
                for name in models:
                    sec, outputs = MODELS[name](d, args, seed)
                    if i == 0 and name in CHECKED:
                        check_defaults(CHECKED[name], d, args, seed, outputs,
                                       checkpoints[0])
                    got = [float(np.sqrt(np.mean((np.clip(
                        DEFAULT_PREDICTION[name](outputs, n), 1, 5) - d["y_test"]) ** 2)))
                        for n in checkpoints]
                    seconds[encoding][name].append(sec)
                    for n, value in zip(checkpoints, got):
                        scores[encoding][name][n].append(value)
                    print(f"{fold:<4} {encoding:<8} {seed:>4} {name:<24} {sec:>9.2f}   "
                          + " ".join(f"{v:>9.4f}" for v in got), flush=True)
    count = len(args.folds) * len(args.seeds)
    print(f"\ntest RMSE, mean over {count} chains (folds x seeds); the difference is "
          f"paired by fold and seed")
    paired = ("polylite ordered probit" in models and "myFM ordered probit" in models)
    print(f"{'encoding':<8} {'model':<24} " + " ".join(f"{'@' + str(n):>8}" for n in
                                                       checkpoints) + f" {'fit CPU s':>10}")
    rows = []
    for encoding in args.encodings:
        for name in models:
            means = [round(float(np.mean(scores[encoding][name][n])), 4)
                     for n in checkpoints]
            sec = round(float(np.median(seconds[encoding][name])), 2)
            print(f"{encoding:<8} {name:<24} " + " ".join(f"{m:>8.4f}" for m in means)
                  + f" {sec:>10.2f}")
            rows.append([encoding, name, *means, sec])
        if paired:
            diffs = []
            for n in checkpoints:
                diff = (np.array(scores[encoding]["polylite ordered probit"][n])
                        - np.array(scores[encoding]["myFM ordered probit"][n]))
                se = diff.std(ddof=1) / np.sqrt(diff.size) if diff.size > 1 else np.nan
                diffs.append((float(diff.mean()), float(se)))
            print(f"{encoding:<8} {'polylite - myFM (se)':<24} " + " ".join(
                f"{m:>+8.4f}" for m, _ in diffs) + "\n" + " " * 34 + " ".join(
                f"{'(' + format(s, '.4f') + ')':>8}" for _, s in diffs), flush=True)
            rows.append([encoding, "polylite - myFM (ordered probit)",
                         *(round(m, 4) for m, _ in diffs), None])
            rows.append([encoding, "standard error of the difference",
                         *(None if np.isnan(s) else round(s, 4) for _, s in diffs), None])
    if args.output != "-":
        settings = {key: value for key, value in vars(args).items()
                    if key not in ("output", "data")}
        _results.save(
            args.output, "bayes_ordinal_movielens",
            "Ratings as ordered levels: ordered probit against myFM and the Gaussian chain",
            [_results.table(
                f"MovieLens 100K folds {args.folds[0]}-{args.folds[-1]}, k = "
                f"{args.components}, seeds {args.seeds[0]}-{args.seeds[-1]}: test RMSE "
                f"after n sweeps, mean of {count} chains",
                ["encoding", "model", *(f"{n} sweeps" for n in checkpoints),
                 f"fit CPU s ({args.sweeps} sweeps)"], rows,
                note="each model's default prediction for a chain of n sweeps: ordered "
                     "probit, the expected rating under the averaged level probabilities; "
                     "Gaussian, the mean prediction clipped to [1, 5]; side: ids, both "
                     "implicit sets and user and movie side features; the difference is "
                     "paired by fold and seed")],
            settings=settings, peers=("myfm",))


if __name__ == "__main__":
    main()
