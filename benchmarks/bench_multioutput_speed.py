"""Multi-output conditional gradient speed: seconds per basis vector against X @ P.

Data: recommender-shaped rows (``make_recommender``: one-hot user and item fields with
power-law popularity and 3 numeric columns, 5 nonzeros per row; 10^6 rows by default).
Targets: c = 5 binary outputs, the ordinal McRank reduction of the planted ratings cut at
their quantiles (``Y[i, l] = +1 if y_i <= level l``), fitted by
``MultiOutputPolynomialRegressor(loss="logistic", kernel="fm")`` with ``refit="output"``
(the default) and the penalty of ``--penalty``.

Per basis vector (one iteration of the conditional gradient: selection by the power method
on all outputs at once, then the output refit), the median of the iterations' seconds
(``history_["seconds"]``) of one fit of ``--basis`` iterations, with the median number of
power iterations (passes over X, each for 2 c columns), of refinement iterations ("l1/l2"
and "l1/linf": a pass for one column and one for the features per trial step) and of
refit steps.  The ratio
divides by the median time of ``X @ P`` (SciPy, P dense d x c, c = 5), timed three times
right before and three times right after each fit (a shared machine's load drifts).
``--n-jobs 1 2`` repeats the fit with each number of threads.

    python benchmarks/bench_multioutput_speed.py [--rows 1000000] [--basis 6]
        [--penalty l1/linf] [--n-jobs 1 2] [--dtype float64]

Measured with the defaults (``--n-jobs 1 2``) on a quiet 2-core machine, six runs:
1.09-1.32 s per basis vector on one thread (median 1.16 s) = 26-42x (median 37.6x) and
0.90-1.10 s (median 1.03 s) = 24-49x (median 37.8x) on two; ``X @ P`` took 0.020-0.046 s
between runs, which makes the ratio jump: against the median of all the runs' ``X @ P``
(0.028 s) it is 41.4x on one thread and 36.7x on two.  6 power, 2 refinement and 8
refit iterations per basis vector.
"""
import argparse

import numpy as np

from polylite import MultiOutputPolynomialRegressor
from polylite.datasets import make_recommender

from _timing import recommender_arguments, timings

N_OUTPUTS = 5


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    recommender_arguments(parser, degrees=[2])
    parser.add_argument("--basis", type=int, default=6)
    parser.add_argument("--penalty", default="l1/linf")
    parser.add_argument("--tau", type=float, default=10.0)
    parser.add_argument("--n-jobs", type=int, nargs="+", default=[1])
    parser.add_argument("--dtype", default="float64", choices=["float64", "float32"])
    args = parser.parse_args()
    X, y = make_recommender(args.rows, args.users, args.items, random_state=0,
                            dtype=np.dtype(args.dtype))
    levels = np.quantile(y, np.linspace(0, 1, N_OUTPUTS + 2)[1:-1])
    Y = np.where(y[:, None] <= levels, 1.0, -1.0)
    P = np.random.default_rng(0).standard_normal((X.shape[1], N_OUTPUTS)).astype(X.dtype)
    print(f"X: {X.shape[0]} rows, {X.shape[1]} features, {X.nnz} nonzeros, {args.dtype}; "
          f"c = {N_OUTPUTS} outputs, penalty {args.penalty}, tau {args.tau:g}, "
          f"refit output")
    print(f"{'n_jobs':>6} {'s/basis':>8} {'X@P s':>8} {'ratio':>6} {'power it':>8} "
          f"{'refine it':>9} {'refit it':>8} {'first s':>8}")
    for n_jobs in args.n_jobs:
        before = timings(lambda: X @ P, repeat=3)
        est = MultiOutputPolynomialRegressor(
            loss="logistic", kernel="fm", penalty=args.penalty, tau=args.tau,
            refit="output", max_basis=args.basis, tol=0, n_jobs=n_jobs, random_state=0)
        est.fit(X, Y)
        after = timings(lambda: X @ P, repeat=3)
        h = est.history_
        per_basis = float(np.median(h["seconds"]))
        base = float(np.median(before + after))
        print(f"{n_jobs:>6} {per_basis:8.3f} {base:8.4f} {per_basis / base:6.1f} "
              f"{np.median(h['power_iterations']):8.0f} "
              f"{np.median(h['refine_iterations']):9.0f} "
              f"{np.median(h['refit_iterations']):8.0f} {h['seconds'][0]:8.3f}",
              flush=True)


if __name__ == "__main__":
    main()
