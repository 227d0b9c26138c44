"""Gibbs sampler speed: seconds per sweep against one coordinate descent epoch and X @ P.

Data as in bench_cd.py: 10^6 rows, one-hot user (50,000 levels) and item (30,000 levels)
fields with power-law popularity and 3 numeric columns (5 nonzeros per row); k = 10;
degrees 2 and 3 (separate factor matrices per degree).  For each degree, one chain of
:class:`polylite.BayesianFactorizationMachineRegressor` (user, item and numeric columns as
three feature groups) is set up, and then, ``--repeats`` times in turn: ``X @ P`` (scipy,
d x k dense P), one coordinate descent epoch (``cd_epoch`` without a prior, squared loss,
on a copy of the chain's parameters) and one sweep of the chain (its hyperparameter draws,
then ``cd_epoch`` with the prior).  The table gives the medians and the ratios of the
medians; "fit s/sweep" is the wall time of a whole ``fit`` (validation, grouping of the
nonzeros, kept samples) of ``--fit-sweeps`` sweeps, divided by them.  The "cpu" columns are
the same ratios of CPU seconds (``time.process_time``, all threads), which the load of a
shared machine moves far less than wall seconds.  The chain's draws are over-relaxed as
the estimator's are by default (``relaxation``).

    python benchmarks/bench_bayes_speed.py [--rows 1000000] [--repeats 5]
                                           [--degrees 2 3] [--n-jobs 1 2]
"""
import argparse
import dataclasses
import itertools
import time

import numpy as np

from polylite import BayesianFactorizationMachineRegressor
from polylite import kernels
from polylite._engine import _losses
from polylite.bayes._sampler import FeatureGroups, Gaussian, GibbsChain
from polylite.datasets import make_recommender
from polylite._engine import _cd, solvers as _solvers
from polylite.polynomial._base import _OutputParams
from polylite._engine.problem import Problem

from _timing import recommender_arguments, timings


def chain_and_epoch(X, y, groups, degree, k, n_jobs):
    """A Gibbs chain of a degree-``degree`` FM on (X, y) and a function that runs one
    coordinate descent epoch on a copy of its parameters."""
    n, d = X.shape
    rng = np.random.RandomState(0)
    structure = ("anova", list(range(2, degree + 1)), 0)
    params = _OutputParams(intercept=np.zeros(1), w=np.zeros(d),
                           P=rng.normal(0, 0.1, (degree - 1, d, k)),
                           gamma=np.zeros((0, k)), lam=np.ones(k))
    data = _solvers.cd_data(X, np.full(n, 1.0 / n), "anova", n_jobs)
    chain = GibbsChain(X, y, data, params, structure, groups, fit_intercept=True,
                       fit_linear=True, likelihood=Gaussian(), rng=rng, workspace={},
                       relaxation=BayesianFactorizationMachineRegressor().relaxation,
                       n_jobs=n_jobs)
    cd_params = dataclasses.replace(params, **{name: np.array(getattr(params, name))
                                               for name in ("intercept", "w", "P")})
    cd_pred = chain.y_pred.copy()
    workspace = {}
    problem = Problem(chain.y, chain.sample_weight, kernels.KERNELS["anova"],
                        np.arange(2, degree + 1, dtype=np.intc),
                        _losses.loss_code("squared"), 1e-5, 1e-5, True, True)

    def epoch():
        _cd.cd_epoch(data, problem, cd_params, cd_pred, workspace=workspace)

    return chain, epoch


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    recommender_arguments(parser, degrees=[2, 3])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--fit-sweeps", type=int, default=3)
    parser.add_argument("--n-jobs", type=int, nargs="+", default=[1])
    args = parser.parse_args()
    X, y = make_recommender(args.rows, args.users, args.items, 3, random_state=0)
    d, k = X.shape[1], args.components
    field = np.repeat([0, 1, 2], [args.users, args.items, 3])
    groups = FeatureGroups(field, 3)
    P = np.random.default_rng(0).normal(size=(d, k))
    print(f"X: {X.shape[0]} x {d}, {X.nnz} nonzeros, float64; k = {k}; "
          f"{args.repeats} repeats (medians); a shared machine")
    print(f"{'degree':>6} {'n_jobs':>6} {'X@P ms':>7} {'CD s/epoch':>10} {'s/sweep':>8} "
          f"{'sweep/CD':>8} {'sweep/(X@P)':>11} {'fit s/sweep':>11} {'cpu sweep/CD':>12} "
          f"{'cpu sweep/(X@P)':>15}")
    for degree, n_jobs in itertools.product(args.degrees, args.n_jobs):
        chain, epoch = chain_and_epoch(X, y, groups, degree, k, n_jobs)
        wall = {"xp": [], "cd": [], "sweep": []}
        cpu = {"xp": [], "cd": [], "sweep": []}
        for _ in range(args.repeats):
            for name, run in (("xp", lambda: X @ P), ("cd", epoch), ("sweep", chain.sweep)):
                start = time.process_time()
                wall[name] += timings(run)
                cpu[name].append(time.process_time() - start)
        xp, cd, sweep = (float(np.median(wall[name])) for name in ("xp", "cd", "sweep"))
        cpu_xp, cpu_cd, cpu_sweep = (float(np.median(cpu[name]))
                                     for name in ("xp", "cd", "sweep"))
        est = BayesianFactorizationMachineRegressor(
            degree=degree, n_components=k, n_iter=args.fit_sweeps, n_burn_in=0,
            n_jobs=n_jobs, random_state=0)
        start = time.perf_counter()
        est.fit(X, y, feature_groups=field)
        fit = (time.perf_counter() - start) / args.fit_sweeps
        print(f"{degree:>6} {n_jobs:>6} {xp * 1e3:>7.1f} {cd:>10.3f} {sweep:>8.3f} "
              f"{sweep / cd:>8.2f} {sweep / xp:>11.1f} {fit:>11.3f} "
              f"{cpu_sweep / cpu_cd:>12.2f} {cpu_sweep / cpu_xp:>15.1f}", flush=True)


if __name__ == "__main__":
    main()
