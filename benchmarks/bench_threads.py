"""Threads (``n_jobs``): speed-up of prediction and of every solver's pass over the rows.

Data (as bench_cd.py): 10^6 rows, one-hot user (50,000 levels) and item (30,000 levels)
fields with power-law popularity and 3 numeric columns (5 nonzeros per row); k = 10;
degrees 2 and 3 (separate factor matrices per degree).  For each degree, each task and
each thread count:

- predict: ``FactorizationMachineRegressor.predict`` on the training rows (the model after
  one epoch of AdaGrad); median of 5 calls.
- sgd, adagrad: one fit of ``--epochs`` epochs for each ``batch_size`` of
  ``--batch-sizes`` (256 and 4096; ``batch_size=1`` runs on one thread by design), eta0
  0.001 / 0.05; the median time of the Cython pass (``polylite._engine._sgd.sgd_epoch``,
  timed by wrapping it).  The threads meet twice per mini-batch, so a mini-batch is
  shared only with at least ``polylite._engine.solvers.MIN_BATCH_ROWS_PER_THREAD``
  (256) rows per thread (smaller ones run on one thread whatever ``n_jobs``: the
  "threads" column); ``--min-batch-rows`` overrides the rule here, to measure below it.
- lbfgs: one fit of ``--epochs`` iterations; the median time of the value-and-gradient pass
  (``_sgd.objective_gradient``, wrapped).
- cd: one fit of ``--epochs`` epochs; the median time of ``_cd.cd_epoch`` (wrapped).

Each configuration is measured ``--repeats`` times (3), in rounds that take every thread
count in turn, so that a drift of the machine's load reaches all of them alike.  "s/pass"
is the median over the rounds; "x (X@P)" the median of each round's time over the median
of ``X @ P`` (scipy, d x k dense P, one thread) timed three times before and three times
after that measurement; "speed-up" the median of each round's 1-thread time of the same
task and degree over its time at this thread count.

    python benchmarks/bench_threads.py [--rows 1000000] [--degrees 2 3] [--n-jobs 1 2]
                                       [--tasks predict sgd adagrad lbfgs cd] [--epochs 3]
                                       [--batch-sizes 256 4096] [--min-batch-rows N]
                                       [--repeats 3]
                                       [--output benchmarks/results/threads.json]

The table is also written to ``--output`` (a result file of ``_results.py``, which the
documentation's benchmarks page is drawn from).
"""
import argparse
import os
import time
import warnings

import numpy as np

from polylite import FactorizationMachineRegressor
from polylite._validation import row_threads
from polylite.datasets import make_recommender
from polylite._engine import _cd, _sgd, solvers as _solvers

import _results
from _timing import recommender_arguments, timings

TASKS = ("predict", "sgd", "adagrad", "lbfgs", "cd")
pass_times = []


def _timed(module, name):
    """Replace ``module.name`` by a wrapper that appends each call's time to pass_times
    (the solver drivers look the function up in the module at each call)."""
    original = getattr(module, name)

    def timed(*args, **kwargs):
        start = time.perf_counter()
        out = original(*args, **kwargs)
        pass_times.append(time.perf_counter() - start)
        return out

    setattr(module, name, timed)


_timed(_sgd, "sgd_epoch")
_timed(_sgd, "objective_gradient")
_timed(_cd, "cd_epoch")


def measure(task, X, y, degree, k, n_jobs, epochs, batch_size):
    """Seconds of one pass of ``task`` (median over the passes measured)."""
    common = dict(degree=degree, n_components=k, tol=0, random_state=0, n_jobs=n_jobs)
    if task == "predict":
        fm = FactorizationMachineRegressor(solver="adagrad", max_iter=1, eta0=0.05,
                                           batch_size=batch_size, **common).fit(X, y)
        return float(np.median(timings(lambda: fm.predict(X), 5)))
    solver_options = {"sgd": dict(eta0=0.001, batch_size=batch_size),
                      "adagrad": dict(eta0=0.05, batch_size=batch_size),
                      "lbfgs": {}, "cd": {}}[task]
    fm = FactorizationMachineRegressor(solver=task, max_iter=epochs, **solver_options,
                                       **common)
    pass_times.clear()
    fm.fit(X, y)
    return float(np.median(pass_times))


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    recommender_arguments(parser, degrees=[2, 3])
    parser.add_argument("--n-jobs", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=TASKS)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[256, 4096])
    parser.add_argument("--repeats", type=int, default=3,
                        help="rounds over the thread counts; the medians are reported")
    parser.add_argument("--min-batch-rows", type=int, default=None,
                        help="rows of a mini-batch per thread below which it runs on one "
                             "thread (default: polylite's rule)")
    parser.add_argument("--output", default=os.path.join(_results.RESULTS, "threads.json"),
                        help="the result file (default benchmarks/results/threads.json; "
                             "'-' for none)")
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # 3 epochs do not converge, by design
    if args.min_batch_rows is not None:
        _solvers.MIN_BATCH_ROWS_PER_THREAD = args.min_batch_rows

    X, y = make_recommender(args.rows, args.users, args.items, 3, random_state=0)
    k = args.components
    P = np.random.default_rng(0).normal(size=(X.shape[1], k))
    print(f"X: {X.shape[0]} x {X.shape[1]}, {X.nnz} nonzeros, float64; k = {k}; "
          f"mini-batches of at least {_solvers.MIN_BATCH_ROWS_PER_THREAD} rows per thread "
          f"are shared")
    columns = ["task", "degree", "batch", "n_jobs", "threads", "s/pass", "X@P ms",
               "x (X@P)", "speed-up"]
    print(f"{'task':>8} {'degree':>6} {'batch':>6} {'n_jobs':>6} {'threads':>7} "
          f"{'s/pass':>8} {'X@P ms':>7} {'x (X@P)':>8} {'speed-up':>8}")
    rows = []
    for task in args.tasks:
        stochastic = task in ("sgd", "adagrad")
        for degree in args.degrees:
            for batch_size in args.batch_sizes if stochastic else args.batch_sizes[:1]:
                times = {n_jobs: [] for n_jobs in args.n_jobs}
                ratios = {n_jobs: [] for n_jobs in args.n_jobs}
                xps = {n_jobs: [] for n_jobs in args.n_jobs}
                for _ in range(args.repeats):
                    for n_jobs in args.n_jobs:
                        xp_times = timings(lambda: X @ P, 3)
                        seconds = measure(task, X, y, degree, k, n_jobs, args.epochs,
                                          batch_size)
                        xp = float(np.median(xp_times + timings(lambda: X @ P, 3)))
                        times[n_jobs].append(seconds)
                        ratios[n_jobs].append(seconds / xp)
                        xps[n_jobs].append(xp)
                single = np.array(times[args.n_jobs[0]])
                for n_jobs in args.n_jobs:
                    threads = (_solvers.stochastic_threads(n_jobs, batch_size)
                               if stochastic else row_threads(n_jobs, X.shape[0]))
                    batch = batch_size if stochastic else "-"
                    seconds = float(np.median(times[n_jobs]))
                    ratio = float(np.median(ratios[n_jobs]))
                    xp = float(np.median(xps[n_jobs]))
                    speed_up = float(np.median(single / np.array(times[n_jobs])))
                    print(f"{task:>8} {degree:>6} {batch:>6} {n_jobs:>6} {threads:>7} "
                          f"{seconds:>8.3f} {xp * 1e3:>7.1f} {ratio:>8.1f} "
                          f"{speed_up:>8.2f}", flush=True)
                    rows.append([task, degree, batch, n_jobs, threads, round(seconds, 4),
                                 round(xp * 1e3, 1), round(ratio, 2),
                                 round(speed_up, 2)])
    if args.output != "-":
        _results.save(
            args.output, "threads",
            "Seconds per pass over the rows, against X @ P, on one and two threads",
            [_results.table(
                f"{X.shape[0]:,} rows, {X.nnz // X.shape[0]} nonzeros per row, "
                f"k = {k}", columns, rows,
                note=f"medians over {args.repeats} rounds of every thread count; "
                     "x (X@P): the pass's time over that of scipy's X @ P (one thread, "
                     "d x k dense P) timed around it; speed-up: one thread's time over "
                     "this thread count's in the same round")],
            settings={"rows": X.shape[0], "columns": X.shape[1], "nnz": int(X.nnz),
                      "components": k, "epochs": args.epochs, "repeats": args.repeats,
                      "batch_sizes": args.batch_sizes})


if __name__ == "__main__":
    main()
