"""Ratings as ordered levels: the ordered probit Bayesian FM against myFM's and against the
Gaussian chain, on MovieLens 100K (u1 split).

Models, each sampled for ``--sweeps`` sweeps with k = ``--components`` and nothing tuned,
one prior group per field of the encoding:

- polylite ``BayesianFactorizationMachineOrdinalRegressor`` (ordered probit; cutpoints by
  Metropolis steps); the prediction is the expected rating under the level
  probabilities averaged over the samples after ``--burn-in`` (every one kept);
- myFM ``MyFMOrderedProbit`` (``pip install myfm``; benchmark only), the same expected
  rating from its ``predict_proba`` over its samples after the same burn-in;
- polylite ``BayesianFactorizationMachineRegressor`` (Gaussian noise), the mean of the
  kept samples' predictions, each clipped to [1, 5].

Encodings: ``one-hot`` (user and item ids) and ``side`` (ids, the items each user rated,
the users who rated each item, user and movie side features; the encoding of
``bench_relational.py``), both as polylite's relational input and myFM's
``RelationBlock`` for ``side``.  Test RMSE (mean and standard deviation over
``--seeds`` chains) and fit CPU seconds (median) are printed and written to ``--output``
(a result file of ``_results.py``).

    python benchmarks/bench_bayes_ordinal.py [--data ~/polylite_data/ml-100k]
        [--encodings one-hot side] [--sweeps 200] [--burn-in 20] [--components 10]
        [--seeds 3] [--output benchmarks/results/bayes_ordinal_movielens.json]
"""
import argparse
import contextlib
import io
import os
import resource
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import _results  # noqa: E402
from _timing import movielens_folder, movielens_missing  # noqa: E402
from bench_relational import movielens_side  # noqa: E402

from polylite import BayesianFactorizationMachineRegressor  # noqa: E402
from polylite.bayes import BayesianFactorizationMachineOrdinalRegressor  # noqa: E402

LEVELS = np.arange(1, 6)


def encode(path, encoding):
    """u1's relational training and test input of an encoding, the ratings, the field of
    each column and the fields' widths."""
    ml = movielens_side(path, encoding)
    (X, X_test), (y, y_test) = ml["relational"], ml["y"]
    return dict(X=X, X_test=X_test, y=np.asarray(y), y_test=np.asarray(y_test),
                fields=ml["fields"], widths=ml["widths"])


def cpu(fn):
    """(CPU seconds, result) of fn()."""
    before = resource.getrusage(resource.RUSAGE_SELF)
    out = fn()
    after = resource.getrusage(resource.RUSAGE_SELF)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, out


def polylite_ordinal(data, args, seed):
    est = BayesianFactorizationMachineOrdinalRegressor(
        n_components=args.components, n_iter=args.sweeps, n_burn_in=args.burn_in,
        n_kept=args.sweeps, random_state=seed)
    seconds, _ = cpu(lambda: est.fit(data["X"], data["y"], feature_groups=data["fields"]))
    return seconds, est.predict(data["X_test"])


def polylite_gaussian(data, args, seed):
    est = BayesianFactorizationMachineRegressor(
        n_components=args.components, n_iter=args.sweeps, n_burn_in=args.burn_in,
        n_kept=args.sweeps, random_state=seed)
    seconds, _ = cpu(lambda: est.fit(data["X"], data["y"], feature_groups=data["fields"]))
    outputs = est._sample_outputs(est._validate_predict_data(data["X_test"]))[0]
    return seconds, np.clip(outputs, 1, 5).mean(axis=0)


def myfm_ordinal(data, args, seed):
    import myfm
    from myfm import RelationBlock
    blocks = [RelationBlock(b.index, b.table) for b in data["X"].blocks]
    test_blocks = [RelationBlock(b.index, b.table) for b in data["X_test"].blocks]
    fm = myfm.MyFMOrderedProbit(rank=args.components, random_seed=seed)

    def fit():
        with contextlib.redirect_stderr(io.StringIO()):  # its progress bar
            fm.fit(None, data["y"] - 1, X_rel=blocks, group_shapes=data["widths"],
                   n_iter=args.sweeps, n_kept_samples=args.sweeps - args.burn_in)
    seconds, _ = cpu(fit)
    return seconds, fm.predict_proba(None, X_rel=test_blocks) @ LEVELS


MODELS = {"polylite ordered probit": polylite_ordinal,
          "myFM ordered probit": myfm_ordinal,
          "polylite Gaussian": polylite_gaussian}


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=movielens_folder())
    parser.add_argument("--encodings", nargs="+", default=["one-hot", "side"],
                        choices=["one-hot", "side"])
    parser.add_argument("--sweeps", type=int, default=200)
    parser.add_argument("--burn-in", type=int, default=20)
    parser.add_argument("--components", type=int, default=10)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--output", default=os.path.join(
        _results.RESULTS, "bayes_ordinal_movielens.json"), help="'-' for none")
    args = parser.parse_args()
    missing = movielens_missing(args.data)
    if missing:
        print(missing)
        return
    rows = []
    print(f"{'encoding':<9} {'model':<24} {'RMSE':>7} {'sd':>7} {'fit CPU s':>10}   "
          f"each seed")
    for encoding in args.encodings:
        data = encode(args.data, encoding)
        for name in args.models:
            runs = [MODELS[name](data, args, seed) for seed in range(args.seeds)]
            scores = [float(np.sqrt(np.mean((prediction - data["y_test"]) ** 2)))
                      for _, prediction in runs]
            seconds = float(np.median([s for s, _ in runs]))
            spread = float(np.std(scores, ddof=1)) if len(scores) > 1 else None
            print(f"{encoding:<9} {name:<24} {np.mean(scores):>7.4f} "
                  f"{spread if spread is not None else float('nan'):>7.4f} "
                  f"{seconds:>10.2f}   " + " ".join(f"{s:.4f}" for s in scores),
                  flush=True)
            rows.append([encoding, name, round(float(np.mean(scores)), 4),
                         None if spread is None else round(spread, 4), round(seconds, 2)])
    if args.output != "-":
        _results.save(
            args.output, "bayes_ordinal_movielens",
            "Ratings as ordered levels: ordered probit against myFM and the Gaussian chain",
            [_results.table(
                f"MovieLens 100K u1, k = {args.components}, {args.sweeps} sweeps "
                f"(burn-in {args.burn_in}), mean of {args.seeds} chains",
                ["encoding", "model", "test RMSE", "sd", "fit CPU s"], rows,
                note="ordered probit: the expected rating under the averaged level "
                     "probabilities; Gaussian: the mean of the clipped predictions; "
                     "side: ids, both implicit sets and user and movie side features")],
            settings=vars(args) | {"data": os.path.basename(os.path.normpath(args.data))},
            peers=("myfm",))


if __name__ == "__main__":
    main()
