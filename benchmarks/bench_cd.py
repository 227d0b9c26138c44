"""Coordinate descent speed: seconds per epoch against X @ P on recommender-shaped data.

Data: 10^6 rows, one-hot user (50,000 levels) and item (30,000 levels) fields with power-law
popularity and 3 numeric columns (5 nonzeros per row); k = 10; degrees 2, 3, 4 (separate
factor matrices per degree, so degree m updates m - 1 blocks).  "s/epoch" is the median time of
the solver's epochs within one fit; "fit s/epoch" is the whole fit's wall time (validation,
regrouping of the nonzeros by column groups, objective per epoch) divided by its epochs.
The ratio divides by the median time of ``X @ P`` (scipy, d x k dense P) measured in the
same process, three times right before and three times right after that fit (the load of a
shared machine drifts).  Peak memory: the fit's peak traced by tracemalloc (NumPy buffers, which
include the solver's per-row records and the regrouped copy of the nonzeros), against the
size of X.  ``--n-jobs 1 2`` repeats every degree with each number of threads (``n_jobs``);
X @ P (SciPy) always runs on one.  ``--lower-degrees separate shared none`` repeats it with
each way of modelling the lower degrees (the default, separate, fits one factor matrix per
degree 2..m; shared fits one matrix with dummy features; none fits degree m only).

    python benchmarks/bench_cd.py [--rows 1000000] [--epochs 3] [--dtype float64]
                                  [--n-jobs 1 2] [--lower-degrees separate shared none]
"""
import argparse
import itertools
import time
import tracemalloc
import warnings

import numpy as np

from polylite import FactorizationMachineRegressor
from polylite.polynomial import _cd
from polylite.datasets import make_recommender

from _timing import recommender_arguments, timings

_epoch = _cd.cd_epoch
epoch_times = []


def timed_epoch(*args, **kwargs):
    """The solver's epoch, timed (installed in place of polylite._cd.cd_epoch)."""
    start = time.perf_counter()
    out = _epoch(*args, **kwargs)
    epoch_times.append(time.perf_counter() - start)
    return out


_cd.cd_epoch = timed_epoch


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    recommender_arguments(parser, degrees=[2, 3, 4])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--dtype", default="float64", choices=["float64", "float32"])
    parser.add_argument("--n-jobs", type=int, nargs="+", default=[1])
    parser.add_argument("--lower-degrees", nargs="+", default=["separate"],
                        choices=["separate", "shared", "none"])
    args = parser.parse_args()
    dtype = np.dtype(args.dtype)

    X, y = make_recommender(args.rows, args.users, args.items, 3, dtype=dtype,
                            random_state=0)
    k = args.components
    P = np.random.default_rng(0).normal(size=(X.shape[1], k)).astype(dtype)
    xp = float(np.median(timings(lambda: X @ P, 7)))
    nnz = X.nnz
    x_bytes = X.data.nbytes + X.indices.nbytes + X.indptr.nbytes
    print(f"X: {X.shape[0]} x {X.shape[1]}, {nnz} nonzeros, {dtype}, "
          f"{x_bytes / 2**20:.0f} MiB; k = {k}")
    print(f"X @ P: {xp * 1e3:.1f} ms = {xp / (nnz * k) * 1e9:.2f} ns per nonzero x component")
    print()
    print(f"{'degree':>6} {'lower':>8} {'n_jobs':>6} {'s/epoch':>9} {'ns/(nnz*k)':>11} {'X@P ms':>7} {'x (X@P)':>8} "
          f"{'fit s/epoch':>12} {'peak MiB':>9} {'peak/X':>7}")
    warnings.simplefilter("ignore")
    for degree, lower, n_jobs in itertools.product(args.degrees, args.lower_degrees,
                                                   args.n_jobs):
        # X @ P right before and right after each fit: the machine's load drifts.
        xp_times = timings(lambda: X @ P, 3)
        fm = FactorizationMachineRegressor(degree=degree, n_components=k,
                                           max_iter=args.epochs, tol=0, random_state=0,
                                           init_scale=0.1, n_jobs=n_jobs,
                                           lower_degrees=lower)
        epoch_times.clear()
        tracemalloc.start()
        start = time.perf_counter()
        fm.fit(X, y)
        fit_time = time.perf_counter() - start
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        epoch = float(np.median(epoch_times))
        xp_times += timings(lambda: X @ P, 3)
        xp_fit = float(np.median(xp_times))
        print(f"{degree:>6} {lower:>8} {n_jobs:>6} {epoch:>9.3f} {epoch / (nnz * k) * 1e9:>11.2f} "
              f"{xp_fit * 1e3:>7.1f} {epoch / xp_fit:>8.1f} {fit_time / len(epoch_times):>12.3f} "
              f"{peak / 2**20:>9.0f} {peak / x_bytes:>7.2f}")


if __name__ == "__main__":
    main()
