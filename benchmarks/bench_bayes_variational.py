"""Variational Bayesian factorization machines against myFM's and against the Gibbs
chain, on MovieLens 100K (u1 split), one-hot user and item ids.

Models, each with k = ``--components``, one prior group per field, nothing tuned:

- polylite ``VariationalFactorizationMachineRegressor`` with its defaults (it stops when
  the ELBO settles), with ``--max-iter`` iterations and no early stop, and with
  ``relaxation=1`` (plain coordinate ascent: the factors' means not over-relaxed);
- myFM ``VariationalFMRegressor`` (``pip install myfm``; benchmark only) with its default
  100 iterations;
- polylite ``BayesianFactorizationMachineRegressor`` (Gibbs sampling), ``--sweeps`` sweeps,
  the mean of the clipped predictions of the samples after ``--burn-in``.

Every model reads the same CSR rows.  Test RMSE of the predictions clipped to [1, 5]
(mean and standard deviation over ``--seeds`` seeds), fit CPU seconds (median),
iterations, and the CPU time as a fraction of the chain's are printed and written to
``--output`` (a result file of ``_results.py``).

    python benchmarks/bench_bayes_variational.py [--data ~/polylite_data/ml-100k]
        [--components 10] [--sweeps 200] [--burn-in 20] [--max-iter 100] [--seeds 3]
        [--output benchmarks/results/bayes_variational_movielens.json]
"""
import argparse
import contextlib
import io
import os
import sys
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _timing import movielens_folder, movielens_missing  # noqa: E402

import _results  # noqa: E402
from bench_bayes_movielens import cpu, encode  # noqa: E402

from polylite import (BayesianFactorizationMachineRegressor,  # noqa: E402
                      VariationalFactorizationMachineRegressor)
from polylite.datasets import load_movielens  # noqa: E402


MYFM_ITER = 100  # VariationalFMRegressor.fit's default


def polylite_variational(data, args, seed, **params):
    est = VariationalFactorizationMachineRegressor(n_components=args.components,
                                                   random_state=seed, **params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # max_iter reached on purpose
        seconds, _ = cpu(lambda: est.fit(data["X"], data["y"],
                                         feature_groups=data["fields"]))
    return seconds, np.clip(est.predict(data["X_test"]), 1, 5), est.n_iter_


def polylite_variational_long(data, args, seed):
    return polylite_variational(data, args, seed, max_iter=args.max_iter, tol=0)


def polylite_variational_plain(data, args, seed):
    return polylite_variational(data, args, seed, relaxation=1.0)


def myfm_variational(data, args, seed):
    import myfm
    fm = myfm.VariationalFMRegressor(rank=args.components, random_seed=seed)

    def fit():
        with contextlib.redirect_stderr(io.StringIO()):  # its progress bar
            fm.fit(data["X"], data["y"], group_shapes=data["widths"], n_iter=MYFM_ITER)
    seconds, _ = cpu(fit)
    return seconds, np.clip(fm.predict(data["X_test"]), 1, 5), MYFM_ITER


def polylite_gibbs(data, args, seed):
    est = BayesianFactorizationMachineRegressor(
        n_components=args.components, n_iter=args.sweeps, n_burn_in=args.burn_in,
        n_kept=args.sweeps, random_state=seed)
    seconds, _ = cpu(lambda: est.fit(data["X"], data["y"], feature_groups=data["fields"]))
    outputs = est._sample_outputs(est._validate_predict_data(data["X_test"]))[0]
    return seconds, np.clip(outputs, 1, 5).mean(axis=0), args.sweeps


MODELS = {"polylite variational": polylite_variational,
          "polylite variational, max-iter": polylite_variational_long,
          "polylite variational, relaxation 1": polylite_variational_plain,
          "myFM variational": myfm_variational,
          "polylite Gibbs": polylite_gibbs}


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=movielens_folder())
    parser.add_argument("--components", type=int, default=10)
    parser.add_argument("--sweeps", type=int, default=200)
    parser.add_argument("--burn-in", type=int, default=20)
    parser.add_argument("--max-iter", type=int, default=100)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--output", default=os.path.join(
        _results.RESULTS, "bayes_variational_movielens.json"), help="'-' for none")
    args = parser.parse_args()
    missing = movielens_missing(args.data)
    if missing:
        print(missing)
        return
    ml = encode(load_movielens(args.data, splits=["u1"]), "u1", "one-hot")
    data = dict(ml, X=ml["X"].to_csr(), X_test=ml["X_test"].to_csr())
    results = {}
    for name in args.models:
        runs = [MODELS[name](data, args, seed) for seed in range(args.seeds)]
        results[name] = dict(
            scores=[float(np.sqrt(np.mean((p - data["y_test"]) ** 2))) for _, p, _ in runs],
            seconds=float(np.median([s for s, _, _ in runs])),
            iterations=float(np.median([i for _, _, i in runs])))
    chain = results.get("polylite Gibbs", {}).get("seconds")
    print(f"{'model':<32} {'RMSE':>7} {'sd':>7} {'fit CPU s':>10} {'iterations':>11} "
          f"{'/ chain':>8}   each seed")
    rows = []
    for name, r in results.items():
        spread = float(np.std(r["scores"], ddof=1)) if len(r["scores"]) > 1 else None
        fraction = r["seconds"] / chain if chain else None
        print(f"{name:<32} {np.mean(r['scores']):>7.4f} "
              f"{spread if spread is not None else float('nan'):>7.4f} "
              f"{r['seconds']:>10.2f} {r['iterations']:>11.0f} "
              f"{fraction if fraction is not None else float('nan'):>8.2f}   "
              + " ".join(f"{s:.4f}" for s in r["scores"]))
        rows.append([name, round(float(np.mean(r["scores"])), 4),
                     None if spread is None else round(spread, 4), round(r["seconds"], 2),
                     int(r["iterations"]), None if fraction is None else round(fraction, 2)])
    if args.output != "-":
        _results.save(
            args.output, "bayes_variational_movielens",
            "Variational Bayesian FMs against myFM's and the Gibbs chain",
            [_results.table(
                f"MovieLens 100K u1, one-hot user and item, k = {args.components}, "
                f"mean of {args.seeds} seeds",
                ["model", "test RMSE", "sd", "fit CPU s", "iterations",
                 "CPU / chain"], rows,
                note=f"iterations: of coordinate ascent (sweeps for the chain, "
                     f"{args.sweeps} with burn-in {args.burn_in}); predictions clipped "
                     f"to [1, 5]; one prior group per field")],
            settings=vars(args) | {"data": os.path.basename(os.path.normpath(args.data))},
            peers=("myfm",))


if __name__ == "__main__":
    main()
