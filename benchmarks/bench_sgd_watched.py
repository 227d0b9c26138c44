"""Seconds per epoch of a whole SGD and AdaGrad fit (the pass over the rows and the
objective after it), the objective watched on a fixed tenth of the rows (the default on
more than 20,000 rows) against all of them, in the same run.

Data (as bench_sgd.py): 10^6 rows, one-hot user (50,000 levels) and item (30,000
levels) with power-law popularity and 3 numeric columns; k = 10, degree 2, one thread.
An epoch's time is (fit of 6 epochs - fit of 2) / 4, median of ``--repeats``; "x (X@P)"
divides it by the median time of scipy's ``X @ P`` (d x k dense P) timed in the same
run.

    python benchmarks/bench_sgd_watched.py [--rows 1000000] [--repeats 3]
"""
import argparse
import time
import warnings

import numpy as np

from polylite import FactorizationMachineRegressor
from polylite.datasets import make_recommender
from polylite._engine import solvers as _solvers

from _timing import timings


def seconds_per_epoch(X, y, solver, eta0):
    times = []
    for epochs in (2, 6):
        fm = FactorizationMachineRegressor(solver=solver, max_iter=epochs, tol=0,
                                           eta0=eta0, n_components=10, random_state=0)
        start = time.perf_counter()
        fm.fit(X, y)
        times.append(time.perf_counter() - start)
    return (times[1] - times[0]) / 4


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # a few epochs do not converge, by design
    X, y = make_recommender(args.rows, 50_000, 30_000, 3, random_state=0)
    P = np.random.default_rng(0).normal(size=(X.shape[1], 10))
    default_minimum = _solvers.WATCHED_MIN_ROWS
    print(f"{'solver':<8} {'objective on':<12} {'s/epoch':>8} {'x (X@P)':>8}")
    for solver, eta0 in (("sgd", 0.001), ("adagrad", 0.05)):
        seconds = {"every row": [], "a tenth": []}
        xp = []
        for _ in range(args.repeats):
            for label, minimum in (("every row", X.shape[0] + 1),
                                   ("a tenth", default_minimum)):
                _solvers.WATCHED_MIN_ROWS = minimum
                seconds[label].append(seconds_per_epoch(X, y, solver, eta0))
            xp += timings(lambda: X @ P, 5)
        _solvers.WATCHED_MIN_ROWS = default_minimum
        for label, values in seconds.items():
            s = float(np.median(values))
            print(f"{solver:<8} {label:<12} {s:>8.3f} {s / np.median(xp):>8.1f}",
                  flush=True)
    print(f"X @ P: {np.median(xp) * 1e3:.1f} ms (median)")


if __name__ == "__main__":
    main()
