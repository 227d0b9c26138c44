"""Relational input: each user's and item's part stored once, against the expanded rows
and against libFM's and myFM's relational data, all in this script.

Parts (``--parts``; each runs in a process of its own, so that its peak memory is its
own):

- ``movielens``: MovieLens 100K, u1 split, the ``side`` encoding of
  ``bench_bayes_movielens.py`` (ids, the items each user rated and the users who rated
  each item, user and movie side features: 312 nonzeros per rating, 5,328 columns; one
  prior group per field; k = 10, degree 2).  CPU seconds per Gibbs sweep of polylite on
  the CSR rows and on the relational input (``FieldEncoder(output="relational")``), of
  libFM 1.4.4 with ``-relation`` (``--libfm``: its binary, built with make; its own
  ``convert`` and ``transpose`` tools beside it write the relation files) and of myFM
  (its ``RelationBlock``, and a plain CSR), the tools alternating ``--repeats`` times
  (medians); CPU seconds per coordinate descent epoch of
  :class:`~polylite.FactorizationMachineRegressor` on both inputs; the test RMSE after
  ``--sweeps`` sweeps of each sampler, for ``--seeds`` chains each (polylite's and
  libFM's prediction the mean of every sweep's, each clipped to [1, 5] first, polylite's
  after a burn-in of ``--burn-in`` sweeps (20) and libFM's over all; myFM's the mean of
  its samples after the same burn-in, clipped).  A tool's seconds per sweep are those of a run of
  ``--timing-sweeps`` sweeps less a run of 2, over the difference, so loading the data
  does not count.
- ``scale``: MovieLens-10M-sized synthetic data (``make_recommender(10**7, 70_000,
  10_000, implicit="both", output="relational")``, popularity exponent 0.5: users with
  143 ratings and items with 1,000 on average, both implicit sets), k = 10: wall and CPU
  seconds of one Gibbs sweep and one coordinate descent epoch on 1 and 2 threads, the
  process's peak memory, and the size of the expanded CSR that was never built.
- ``degree3``: the same sweep and epoch at degree 3 (factor matrices of degrees 2 and 3)
  against degree 2, on the MovieLens ``side`` input and on the synthetic data.
- ``solvers``: where computing once per table row pays for the other solvers, on the
  MovieLens input against the same on the CSR rows: an L-BFGS value and gradient (a
  gradient pass over the table rows), an SGD epoch (which steps on each row's expanded
  features, a chunk of rows at a time) and a whole SGD fit (whose objective after each
  epoch needs every row's prediction, from the tables).

    python benchmarks/bench_relational.py [--data ~/polylite_data/ml-100k]
        [--libfm path/to/libfm/bin/libFM] [--parts movielens scale degree3 solvers]
        [--sweeps 200] [--seeds 5] [--burn-in 20] [--timing-sweeps 22] [--repeats 3]
        [--scale-rows 10000000] [--csr-rmse] [--encoding side]
        [--output benchmarks/results/relational_movielens.json]

The ``movielens`` part's tables are also written to ``--output`` (a result file of
``_results.py``, which the documentation's benchmarks page is drawn from).
``--encoding`` gives the MovieLens parts another encoding of ``bench_bayes_movielens.py``
(``one-hot``: 2 nonzeros per rating, a quick check that the script runs).
"""
import argparse
import contextlib
import io
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import _results  # noqa: E402
from _timing import movielens_folder, movielens_missing  # noqa: E402
from bench_bayes_movielens import ENCODINGS, encoder_for, rmse  # noqa: E402
from _libfm_mcmc import LibFM  # noqa: E402
from bench_link_prediction import side_tables  # noqa: E402

from polylite import (BayesianFactorizationMachineRegressor,  # noqa: E402
                      FactorizationMachineRegressor)
from polylite.datasets import load_movielens, make_recommender  # noqa: E402
from polylite._engine import _cd  # noqa: E402


# ---- data ---------------------------------------------------------------------------------

def movielens_side(path, encoding="side"):
    """u1's training and test rows in the ``side`` encoding (or another of
    ``bench_bayes_movielens.py``): CSR and relational, the targets, the field of each
    column and the fields' widths."""
    data = load_movielens(path, splits=["u1"])
    ratings = data.ratings
    table = {"user_id": ratings.user_id, "item_id": ratings.item_id}
    train_rows, test_rows = data.splits["u1"]
    train, test = ({key: column[rows] for key, column in table.items()}
                   for rows in (train_rows, test_rows))
    users, items = side_tables(data)
    encoder = encoder_for(encoding, "sqrt").fit(train, users=users, items=items)
    fields = np.repeat(np.arange(len(encoder.fields_)),
                       [field.stop - field.start for field in encoder.fields_])
    csr = encoder.transform(train), encoder.transform(test)
    encoder.set_params(output="relational")
    relational = encoder.transform(train), encoder.transform(test)
    return dict(csr=csr, relational=relational, y=(ratings.rating[train_rows],
                                                   ratings.rating[test_rows]),
                fields=fields, widths=[f.stop - f.start for f in encoder.fields_])


def cpu_seconds(fn):
    """(CPU seconds of this process and its children, wall seconds) of fn()."""
    before = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(
        resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    out = fn()
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(
        resource.RUSAGE_CHILDREN)
    cpu = sum(a.ru_utime + a.ru_stime - b.ru_utime - b.ru_stime
              for a, b in zip(after, before))
    return cpu, wall, out


def per_sweep(run, sweeps):
    """CPU seconds per sweep of ``run(n_sweeps)``: a run of ``sweeps`` less one of 2."""
    long_cpu, _, out = cpu_seconds(lambda: run(sweeps))
    short_cpu, _, _ = cpu_seconds(lambda: run(2))
    return (long_cpu - short_cpu) / (sweeps - 2), out


# ---- the samplers ---------------------------------------------------------------------------

def polylite_chain(X, y, fields, sweeps, X_test=None, degree=2, n_jobs=None, seed=0,
                   burn_in=20):
    """A chain of ``sweeps`` sweeps; with ``X_test``, the mean of the sweeps' predictions
    after ``burn_in``, each clipped to [1, 5] first (as libFM scores its chain)."""
    est = BayesianFactorizationMachineRegressor(
        degree=degree, n_components=10, n_iter=sweeps, n_burn_in=min(burn_in, sweeps - 1),
        n_kept=sweeps, random_state=seed, n_jobs=n_jobs)
    est.fit(X, y, feature_groups=fields)
    if X_test is None:
        return None
    outputs = est._sample_outputs(est._validate_predict_data(X_test))[0]
    return np.clip(outputs, 1, 5).mean(axis=0)


def myfm_chain(ml, sweeps, relational=True, seed=0, burn_in=20):
    import myfm
    from myfm import RelationBlock
    X, X_test = ml["relational" if relational else "csr"]
    y = ml["y"][0]
    fm = myfm.MyFMRegressor(rank=10, random_seed=seed)
    # myFM draws a progress bar on stderr; it would bury the tables.
    with contextlib.redirect_stderr(io.StringIO()):
        if relational:  # myFM takes writable tables (polylite's are read-only views)
            blocks = [RelationBlock(b.index, b.table.copy()) for b in X.blocks]
            test_blocks = [RelationBlock(b.index, b.table.copy()) for b in X_test.blocks]
            fm.fit(None, y, X_rel=blocks, group_shapes=ml["widths"], n_iter=sweeps,
                   n_kept_samples=max(sweeps - burn_in, 1))
            return fm.predict(None, X_rel=test_blocks)
        fm.fit(X, y, group_shapes=ml["widths"], n_iter=sweeps,
               n_kept_samples=max(sweeps - burn_in, 1))
        return fm.predict(X_test)


@contextlib.contextmanager
def timing(owner, name):
    """Within the block, every call of ``owner.name`` appends its (CPU, wall) seconds
    to the list given by ``as``."""
    original, times = getattr(owner, name), []

    def timed(*args, **kwargs):
        cpu, wall, out = cpu_seconds(lambda: original(*args, **kwargs))
        times.append((cpu, wall))
        return out

    setattr(owner, name, timed)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield times
    finally:
        setattr(owner, name, original)


def medians(times):
    """Median CPU and wall seconds of ``timing``'s calls."""
    return np.median([t[0] for t in times]), np.median([t[1] for t in times])


def cd_epoch_seconds(X, y, degree=2, n_jobs=None, epochs=3):
    """Median CPU and wall seconds of the epochs of a coordinate descent fit."""
    with timing(_cd, "cd_epoch") as times:
        FactorizationMachineRegressor(degree=degree, n_components=10, solver="cd",
                                      max_iter=epochs, n_jobs=n_jobs,
                                      random_state=0).fit(X, y)
    return medians(times)


def sweep_seconds(X, y, fields, degree=2, n_jobs=None, sweeps=3):
    """Median CPU and wall seconds of the sweeps of a Gibbs chain (the parameter draws;
    the hyperparameters' draws, NumPy on the parameters, come on top)."""
    with timing(_cd, "cd_epoch") as times:
        polylite_chain(X, y, fields, sweeps, degree=degree, n_jobs=n_jobs)
    return medians(times)


# ---- the parts ------------------------------------------------------------------------------

def part_movielens(args):
    ml = movielens_side(args.data, args.encoding)
    X, X_test = ml["relational"]
    Xc, Xc_test = ml["csr"]
    y, y_test = ml["y"]
    print(f"MovieLens 100K u1, '{args.encoding}' encoding: {Xc.shape[0]} ratings x "
          f"{Xc.shape[1]} columns, {Xc.nnz / Xc.shape[0]:.0f} nonzeros per row expanded; "
          f"relational: {X.nnz} nonzeros stored in {len(X.blocks)} tables; k = 10, "
          f"degree 2")
    libfm = None
    if args.libfm:
        folder = tempfile.mkdtemp()
        libfm = LibFM(args.libfm, ml, folder)
    try:
        import myfm  # noqa: F401
        has_myfm = True
    except ImportError:
        has_myfm = False
    tools = {"polylite relational": lambda s: polylite_chain(X, y, ml["fields"], s),
             "polylite CSR": lambda s: polylite_chain(Xc, y, ml["fields"], s)}
    if libfm is not None:
        tools["libFM -relation"] = libfm.run
    if has_myfm:
        tools["myFM RelationBlock"] = lambda s: myfm_chain(ml, s, True)
        tools["myFM CSR"] = lambda s: myfm_chain(ml, s, False)
    seconds = {name: [] for name in tools}
    for _ in range(args.repeats):
        for name, run in tools.items():
            sweeps = args.timing_sweeps if "CSR" not in name else max(
                4, args.timing_sweeps // 4)
            seconds[name].append(per_sweep(run, sweeps)[0])
    reference = np.median(seconds["polylite relational"])
    print(f"\n{'Gibbs sampler':>20} {'cpu s/sweep':>12} {'x polylite rel.':>16}")
    sweep_rows = []
    for name, values in seconds.items():
        median = np.median(values)
        print(f"{name:>20} {median:>12.4f} {median / reference:>16.2f}", flush=True)
        sweep_rows.append([name, round(float(median), 4), round(median / reference, 2)])
    cd = {name: cd_epoch_seconds(rows, y)[0] for name, rows in
          (("relational", X), ("CSR", Xc))}
    print(f"\n{'CD epoch':>20} {'cpu s/epoch':>12} {'x relational':>16}")
    cd_rows = []
    for name, cpu in cd.items():
        print(f"{name:>20} {cpu:>12.4f} {cpu / cd['relational']:>16.2f}", flush=True)
        cd_rows.append([f"polylite {name}", round(cpu, 4), round(cpu / cd["relational"], 2)])
    seeds = range(args.seeds)
    print(f"\ntest RMSE after {args.sweeps} sweeps (predictions clipped to [1, 5]), "
          f"seeds {seeds.start} to {seeds.stop - 1}, burn-in {args.burn_in}:")
    runs = {"polylite relational": lambda seed: polylite_chain(
        X, y, ml["fields"], args.sweeps, X_test, seed=seed, burn_in=args.burn_in)}
    if args.csr_rmse:
        runs["polylite CSR"] = lambda seed: polylite_chain(
            Xc, y, ml["fields"], args.sweeps, Xc_test, seed=seed, burn_in=args.burn_in)
    if libfm is not None:
        runs["libFM -relation"] = lambda seed: libfm.run(args.sweeps, seed=seed)
    if has_myfm:
        runs["myFM RelationBlock"] = lambda seed: myfm_chain(ml, args.sweeps, True, seed,
                                                             args.burn_in)
    print(f"{'':>20} {'mean':>8} {'sd':>8}   each seed")
    rmse_rows = []
    for name, run in runs.items():
        scores = [rmse(run(seed), y_test) for seed in seeds]
        spread = np.std(scores, ddof=1) if len(scores) > 1 else np.nan
        print(f"{name:>20} {np.mean(scores):>8.4f} {spread:>8.4f}   "
              + " ".join(f"{score:.4f}" for score in scores), flush=True)
        rmse_rows.append([name, round(float(np.mean(scores)), 4),
                          None if np.isnan(spread) else round(float(spread), 4)])
    if libfm is not None:
        shutil.rmtree(libfm.folder)
    if args.output != "-":
        features = ("ids + both implicit sets + user and movie side features"
                    if args.encoding == "side" else f"the {args.encoding} encoding")
        data = (f"MovieLens 100K u1, {features} ({Xc.nnz / Xc.shape[0]:.0f} nonzeros per "
                f"rating), k = 10, degree 2")
        _results.save(
            args.output, "relational_movielens",
            "Bayesian FMs on relational data: polylite, libFM and myFM",
            [_results.table(f"Gibbs sampler, CPU seconds per sweep ({data})",
                            ["sampler", "CPU s/sweep", "x polylite relational"],
                            sweep_rows, note=f"median of {args.repeats} runs, the tools "
                            f"alternating"),
             _results.table(f"Test RMSE after {args.sweeps} sweeps, mean of "
                            f"{args.seeds} chains", ["sampler", "RMSE", "sd"], rmse_rows,
                            note="predictions clipped to [1, 5]"),
             _results.table("Coordinate descent, CPU seconds per epoch",
                            ["solver", "CPU s/epoch", "x relational"], cd_rows)],
            settings={"sweeps": args.sweeps, "seeds": args.seeds,
                      "burn_in": args.burn_in, "timing_sweeps": args.timing_sweeps,
                      "repeats": args.repeats},
            peers=("myfm",), command=_results.command_line(_parent_argv()),
            libfm=bool(libfm))


def scale_data(rows):
    return make_recommender(rows, 70_000, 10_000, 0, implicit="both", output="relational",
                            popularity_exponent=0.5, random_state=0)


def part_scale(args):
    start = time.perf_counter()
    X, y = scale_data(args.scale_rows)
    made = time.perf_counter() - start
    users, items = (np.bincount(b.index) for b in X.blocks)
    expanded = X.expanded_nnz
    print(f"synthetic: {X.shape[0]} ratings, {X.blocks[0].table.shape[0]} users "
          f"({users.mean():.0f} ratings each on average, at most {users.max()}), "
          f"{X.blocks[1].table.shape[0]} items ({items.mean():.0f}, at most "
          f"{items.max()}); {X.shape[1]} columns; made in {made:.1f} s")
    print(f"stored: {X.nnz} table nonzeros; the expanded CSR would hold {expanded:.3g} "
          f"nonzeros, {expanded * 12 / 2**30:.0f} GiB (float64 values, int32 indices)")
    print(f"\n{'pass':>12} {'n_jobs':>6} {'wall s':>8} {'cpu s':>8}")
    fields = np.repeat([0, 1, 2, 3], [70_000, 10_000, 10_000, 70_000])
    for n_jobs in (1, 2):
        cpu, wall = cd_epoch_seconds(X, y, n_jobs=n_jobs, epochs=2)
        print(f"{'CD epoch':>12} {n_jobs:>6} {wall:>8.2f} {cpu:>8.2f}", flush=True)
        cpu, wall = sweep_seconds(X, y, fields, n_jobs=n_jobs, sweeps=2)
        print(f"{'Gibbs sweep':>12} {n_jobs:>6} {wall:>8.2f} {cpu:>8.2f}", flush=True)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(f"peak memory of this process: {peak:.2f} GiB")


def part_degree3(args):
    ml = movielens_side(args.data, args.encoding)
    X = ml["relational"][0]
    y = ml["y"][0]
    print(f"{'data':>10} {'degree':>6} {'sweep cpu s':>12} {'epoch cpu s':>12}")
    for degree in (2, 3):
        sweep = sweep_seconds(X, y, ml["fields"], degree=degree, sweeps=5)[0]
        epoch = cd_epoch_seconds(X, y, degree=degree)[0]
        print(f"{'MovieLens':>10} {degree:>6} {sweep:>12.4f} {epoch:>12.4f}", flush=True)
    X, y = scale_data(args.scale_rows)
    fields = np.repeat([0, 1, 2, 3], [70_000, 10_000, 10_000, 70_000])
    for degree in (2, 3):
        sweep = sweep_seconds(X, y, fields, degree=degree, n_jobs=2, sweeps=2)[1]
        epoch = cd_epoch_seconds(X, y, degree=degree, n_jobs=2, epochs=2)[1]
        print(f"{'synthetic':>10} {degree:>6} {sweep:>11.2f}w {epoch:>11.2f}w "
              f"(wall, 2 threads)", flush=True)


def part_solvers(args):
    from polylite._engine import solvers as _solvers
    ml = movielens_side(args.data, args.encoding)
    y = ml["y"][0]
    print(f"{'what':>28} {'input':>10} {'cpu s':>8} {'x relational':>13}")
    rows = []
    # L-BFGS: a value and gradient (on relational input, a gradient pass of coordinate
    # descent over the tables; on CSR rows, the reverse-mode pass over every nonzero).
    for name in ("relational", "csr"):
        target = "cd_data_gradient" if name == "relational" else "data_gradient"
        with timing(_solvers, target) as times:
            FactorizationMachineRegressor(n_components=10, solver="lbfgs", max_iter=3,
                                          random_state=0).fit(ml[name][0], y)
        rows.append(("L-BFGS value and gradient", name, medians(times)[0]))
    # SGD: an epoch's passes (on relational input, rows expanded a chunk at a time), and
    # a whole fit of 3 epochs (with the objective's predictions after each).
    for name in ("relational", "csr"):
        with timing(_solvers.StochasticGradient, "epoch") as times:
            fit = cpu_seconds(lambda: FactorizationMachineRegressor(
                n_components=10, solver="sgd", max_iter=3,
                random_state=0).fit(ml[name][0], y))[0]
        rows.append(("SGD epoch", name, medians(times)[0]))
        rows.append(("SGD fit, 3 epochs", name, fit))
    reference = {what: cpu for what, name, cpu in rows if name == "relational"}
    for what, name, cpu in rows:
        print(f"{what:>28} {name:>10} {cpu:>8.3f} {cpu / reference[what]:>13.2f}",
              flush=True)


PARTS = {"movielens": part_movielens, "scale": part_scale, "degree3": part_degree3,
         "solvers": part_solvers}


def _parent_argv():
    """This run's command line without the ``--child`` option the parent added, the path
    of libFM's binary replaced by a placeholder."""
    argv = list(sys.argv)
    if "--child" in argv:
        i = argv.index("--child")
        del argv[i:i + 2]
    if "--libfm" in argv[:-1]:
        argv[argv.index("--libfm") + 1] = "path/to/libFM"
    return argv


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=movielens_folder())
    parser.add_argument("--libfm", default=None, help="path of libFM's binary")
    parser.add_argument("--parts", nargs="+", default=list(PARTS), choices=list(PARTS))
    parser.add_argument("--sweeps", type=int, default=200)
    parser.add_argument("--timing-sweeps", type=int, default=22)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seeds", type=int, default=5,
                        help="chains per tool for the test RMSE")
    parser.add_argument("--burn-in", type=int, default=20,
                        help="sweeps left out of polylite's and myFM's averages")
    parser.add_argument("--scale-rows", type=int, default=10_000_000)
    parser.add_argument("--csr-rmse", action="store_true",
                        help="also score polylite's chain on the CSR rows (slow)")
    parser.add_argument("--encoding", default="side", choices=ENCODINGS,
                        help="the MovieLens parts' encoding (bench_bayes_movielens.py's; "
                             "one-hot: a quick check)")
    parser.add_argument("--output", default=os.path.join(
        _results.RESULTS, "relational_movielens.json"),
        help="the movielens part's result file ('-' for none)")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        PARTS[args.child](args)
        return
    missing = movielens_missing(args.data)
    if missing:  # the MovieLens parts skipped
        print(missing)
        args.parts = [part for part in args.parts if part == "scale"]
    for part in args.parts:
        print(f"\n== {part} ==", flush=True)
        subprocess.run([sys.executable, __file__, *sys.argv[1:], "--child", part],
                       check=True)


if __name__ == "__main__":
    main()
