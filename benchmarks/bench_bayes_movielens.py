"""MovieLens 100K accuracy of Bayesian FMs (Gibbs sampling) on the five folds, against
libFM's and myFM's samplers in the same run.

Nothing is tuned: every hyperparameter is sampled (libFM's hyperpriors), and each tool
runs with its own defaults apart from the sweeps and the rank k.  Every encoding is a
:class:`polylite.preprocessing.FieldEncoder` fitted on the fold's training ratings (and
the user and movie tables), stored as relational input (each user's and item's part
once), and each of its fields is its own feature group (``feature_groups``), as libFM's
group files and myFM's ``group_shapes`` make them, so each field has its own prior
precisions and means.  The encodings, each adding to the one before:

- "one-hot": 1 in the user's column and in the item's (2 nonzeros per row);
- "implicit": plus the items the user rated as a third field (Rendle 2012, section 4.3 of
  "Factorization Machines with libFM"; SVD++'s implicit feedback), each item
  ``1/sqrt(n)`` for a user of n rated items (``--implicit-norm sqrt``, the default, as
  SVD++ and myFM's examples) or ``1/n`` so the field sums to one (``sum``).  Which
  ratings count: those of the fold's training set (``--implicit-from train``, the
  default), or also the (user, item) pairs of its test set without their ratings
  (``train+test``: the transductive setting of the Netflix Prize, where the pairs to
  predict are known in advance);
- "implicit-both": plus the users who rated the item as a fourth field, normalised
  likewise (myFM's MovieLens examples use both sides; Rendle 2019's "flipped" SVD++);
- "side": plus the side features of the user (age band, gender, occupation, first zip
  digit) and of the movie (genre flags, release-year bin), each its own field, as in
  myFM's MovieLens examples (the derived columns are ``bench_link_prediction.py``'s);
- "side-date": plus the day of the rating as a categorical field of the interaction
  (myFM's examples, Rendle 2019's time-aware baselines); the days of the training set
  only, a test rating of a day absent there gets no day column.  Its rows have a part of
  their own beside the user and item tables, which the peers are not given here: they
  run on the other encodings.

For every fold (``--folds``, u1 to u5), encoding and seed, each tool samples one chain of
``--sweeps`` sweeps, and the test RMSE (predictions clipped to [1, 5]) is read after each
of the ``--checkpoints`` and the last sweep:

- polylite ``BayesianFactorizationMachineRegressor`` with its default burn-in and kept
  samples: the prediction of ``fit(n_iter=n)`` then ``predict``.  Nothing in a sweep
  depends on ``n_iter``, so a chain of n sweeps is the first n sweeps of the longer chain
  of the same seed; the script keeps every sweep's sample of the long chain and averages
  those the defaults keep for n (and checks, on each fold and encoding, that a fit of the
  shortest length with the defaults predicts the same);
- libFM's MCMC (``--libfm``: its binary, built with make; its ``convert`` and
  ``transpose`` tools beside it write the relation files), with ``-relation`` on both
  encodings: its own prediction, the mean of every sweep's prediction clipped to the
  training ratings' range (its log gives it after every sweep);
- myFM's ``MyFMRegressor`` with ``RelationBlock`` (when myFM is installed, ``pip install
  myfm``): its default prediction for a chain of n sweeps, the mean of its last
  ``n - 5`` samples (every sweep's sample is kept for the checkpoints).

The table gives each tool's mean over the folds and seeds, and the mean difference of
polylite's RMSE to each peer's with its standard error, over the (fold, seed) pairs (the
folds' differences cancel in the pairs).  ``--output`` writes the table to a result
file of ``_results.py``.

    python benchmarks/bench_bayes_movielens.py [--data ~/polylite_data/ml-100k]
        [--folds u1 u2 u3 u4 u5] [--encodings one-hot side] [--seeds 0 1 2]
        [--components 10] [--degree 2] [--sweeps 200] [--checkpoints 50 100]
        [--libfm path/to/libfm/bin/libFM] [--no-myfm] [--implicit-from train]
        [--implicit-norm sqrt] [--output benchmarks/results/bayes_movielens.json]
"""
import argparse
import contextlib
import io
import os
import resource
import shutil
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _timing import movielens_folder, movielens_missing  # noqa: E402

import _results  # noqa: E402
from bench_link_prediction import ITEM_FEATURES, USER_FEATURES, side_tables  # noqa: E402

from polylite import BayesianFactorizationMachineRegressor  # noqa: E402
from polylite.bayes.fm import default_burn_in  # noqa: E402
from polylite.datasets import load_movielens  # noqa: E402
from polylite.preprocessing import FieldEncoder  # noqa: E402

ENCODINGS = ("one-hot", "implicit", "implicit-both", "side", "side-date")
FOLDS = ("u1", "u2", "u3", "u4", "u5")
SECONDS_PER_DAY = 86_400
MYFM_BURN_IN = 5  # myFM keeps the last n_iter - 5 samples by default


def encoder_for(encoding, implicit_norm):
    """The FieldEncoder of an encoding (see the module docstring)."""
    level = ENCODINGS.index(encoding)
    return FieldEncoder(
        implicit=[None, "user", "both", "both", "both"][level],
        implicit_norm=implicit_norm,
        user_features=USER_FEATURES if level >= 3 else None,
        item_features=ITEM_FEATURES if level >= 3 else None,
        context_features={"day": "categorical"} if level >= 4 else None,
        handle_unknown="ignore")


def encode(data, fold, encoding, implicit_norm="sqrt", with_test_pairs=False):
    """A fold's training and test rows of an encoding as relational input, their ratings,
    the field of each column and the fields' widths."""
    ratings = data.ratings
    table = {"user_id": ratings.user_id, "item_id": ratings.item_id,
             "day": ratings.timestamp // SECONDS_PER_DAY}
    train_rows, test_rows = data.splits[fold]
    train, test = ({key: column[rows] for key, column in table.items()}
                   for rows in (train_rows, test_rows))
    rated = None
    if with_test_pairs:
        rated = {key: table[key][np.concatenate([train_rows, test_rows])]
                 for key in ("user_id", "item_id")}
    users, items = side_tables(data)
    encoder = encoder_for(encoding, implicit_norm).set_params(output="relational")
    encoder.fit(train, users=users, items=items, rated=rated)
    widths = [field.stop - field.start for field in encoder.fields_]
    return dict(X=encoder.transform(train), X_test=encoder.transform(test),
                y=ratings.rating[train_rows], y_test=ratings.rating[test_rows],
                fields=np.repeat(np.arange(len(widths)), widths), widths=widths)


def rmse(prediction, y):
    return float(np.sqrt(np.mean((np.clip(prediction, 1, 5) - y) ** 2)))


def cpu(fn):
    """(CPU seconds of this process and its children, result) of fn()."""
    def total():
        return sum(u.ru_utime + u.ru_stime for u in (
            resource.getrusage(resource.RUSAGE_SELF),
            resource.getrusage(resource.RUSAGE_CHILDREN)))
    before = total()
    out = fn()
    return total() - before, out


# ---- the tools: each sweep's test predictions, or the RMSE after each sweep --------------

def polylite_default_prediction(outputs, n):
    """What fit(n_iter=n) with the default burn-in and n_kept predicts: the mean of the
    samples of sweeps burn-in + 1 .. n (``outputs[j]``: sweep j + 1's)."""
    return outputs[default_burn_in(n):n].mean(axis=0)


def polylite_chain(d, args, seed):
    """(CPU seconds, each sweep's predictions on the test rows: (sweeps, n_test))."""
    est = BayesianFactorizationMachineRegressor(
        degree=args.degree, n_components=args.components, n_iter=args.sweeps,
        n_burn_in=0, n_kept=None, random_state=seed, n_jobs=args.n_jobs)
    seconds, _ = cpu(lambda: est.fit(d["X"], d["y"], feature_groups=d["fields"]))
    return seconds, est._sample_outputs(est._validate_predict_data(d["X_test"]))[0]


def check_defaults(d, args, seed, outputs, n):
    """A chain of n sweeps with the default burn-in and n_kept predicts what
    polylite_default_prediction reads off the longer chain."""
    est = BayesianFactorizationMachineRegressor(
        degree=args.degree, n_components=args.components, n_iter=n, random_state=seed,
        n_jobs=args.n_jobs).fit(d["X"], d["y"], feature_groups=d["fields"])
    np.testing.assert_allclose(est.predict(d["X_test"]),
                               polylite_default_prediction(outputs, n), rtol=1e-9,
                               atol=1e-9)


def myfm_default_prediction(outputs, n):
    """What myFM predicts for a chain of n sweeps: the mean of its last max(n - 5, 5)
    samples (all of them for n <= 5)."""
    kept = min(max(n - MYFM_BURN_IN, MYFM_BURN_IN), n)
    return outputs[n - kept:n].mean(axis=0)


def myfm_chain(d, args, seed):
    """(CPU seconds, each sweep's predictions on the test rows: (sweeps, n_test))."""
    import myfm
    import scipy.sparse as sp
    # myFM takes writable tables (polylite's relational tables are read-only views).
    blocks = [myfm.RelationBlock(b.index, b.table.copy()) for b in d["X"].blocks]
    test_blocks = [myfm.RelationBlock(b.index, b.table.copy()) for b in d["X_test"].blocks]
    fm = myfm.MyFMRegressor(rank=args.components, random_seed=seed)

    def fit():
        with contextlib.redirect_stderr(io.StringIO()):  # its progress bar
            fm.fit(None, d["y"], X_rel=blocks, group_shapes=d["widths"],
                   n_iter=args.sweeps, n_kept_samples=args.sweeps)
    seconds, _ = cpu(fit)
    empty = sp.csr_matrix((d["X_test"].shape[0], 0))
    return seconds, np.array([sample.predict_score(empty, test_blocks)
                              for sample in fm.predictor_.samples])


def libfm_chain(libfm, args, seed):
    """(CPU seconds, the test RMSE of libFM's prediction after each sweep)."""
    return cpu(lambda: libfm.run(args.sweeps, degree_dims=f"1,1,{args.components}",
                                 seed=seed, log=True)[1])


# ---- the table ---------------------------------------------------------------------------

def summary(scores, tools, checkpoints):
    """Rows of the table: per encoding and checkpoint, each tool's mean RMSE and polylite's
    mean difference to each peer with its standard error over the (fold, seed) pairs
    (None where a peer did not run)."""
    rows = []
    for encoding, by_tool in scores.items():
        for n in checkpoints:
            row = [encoding, n]
            base = np.array(by_tool["polylite"][n])
            row += [round(float(np.mean(by_tool[tool][n])), 4) if by_tool[tool][n]
                    else None for tool in tools]
            for tool in tools[1:]:
                if not by_tool[tool][n]:
                    row += [None, None]
                    continue
                diff = base - np.array(by_tool[tool][n])
                se = diff.std(ddof=1) / np.sqrt(diff.size) if diff.size > 1 else np.nan
                row += [round(float(diff.mean()), 4),
                        None if np.isnan(se) else round(float(se), 4)]
            rows.append(row)
    return rows


def print_table(rows, tools, count):
    head = f"{'encoding':<13} {'sweeps':>6} " + " ".join(f"{t:>8}" for t in tools)
    head += "".join(f"   {'polylite - ' + t:>17} {'(se)':>8}" for t in tools[1:])
    print(f"\ntest RMSE, mean over {count} chains (folds x seeds); the differences are "
          f"paired by fold and seed")
    print(head)
    for row in rows:
        encoding, n, *cells = row
        means, diffs = cells[:len(tools)], cells[len(tools):]
        line = f"{encoding:<13} {n:>6} " + " ".join(
            f"{m:>8.4f}" if m is not None else f"{'-':>8}" for m in means)
        for mean, se in zip(diffs[::2], diffs[1::2]):
            line += (f"   {mean:>+17.4f} " if mean is not None else f"   {'-':>17} ") + (
                f"({se:.4f})" if se is not None else "")
        print(line, flush=True)


def sanitised_command(argv):
    """This run's command line, the path of libFM's binary replaced by a placeholder."""
    argv = list(argv)
    if "--libfm" in argv:
        argv[argv.index("--libfm") + 1] = "path/to/libFM"
    return _results.command_line(argv)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=movielens_folder())
    parser.add_argument("--folds", nargs="+", default=list(FOLDS), choices=FOLDS)
    parser.add_argument("--encodings", nargs="+", default=["one-hot", "side"],
                        choices=ENCODINGS)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--components", type=int, default=10)
    parser.add_argument("--degree", type=int, default=2)
    parser.add_argument("--sweeps", type=int, default=200)
    parser.add_argument("--checkpoints", type=int, nargs="*", default=[50, 100],
                        help="also score the chains of these numbers of sweeps")
    parser.add_argument("--libfm", default=None, help="path of libFM's binary")
    parser.add_argument("--no-myfm", action="store_true", help="leave myFM out")
    parser.add_argument("--implicit-from", default="train", choices=["train", "train+test"])
    parser.add_argument("--implicit-norm", default="sqrt", choices=["sqrt", "sum"])
    parser.add_argument("--n-jobs", type=int, default=None)
    parser.add_argument("--output", default="-",
                        help="a result file to write the table to ('-': none)")
    args = parser.parse_args()
    missing = movielens_missing(args.data)
    if missing:
        print(missing)
        return
    checkpoints = sorted({n for n in args.checkpoints if 0 < n < args.sweeps}
                         | {args.sweeps})
    tools = ["polylite"]
    if args.libfm:
        tools.append("libFM")
    if not args.no_myfm:
        try:
            import myfm  # noqa: F401
            tools.append("myFM")
        except ImportError:
            pass
    data = load_movielens(args.data, splits=args.folds)
    print(f"MovieLens 100K, folds {' '.join(args.folds)}, seeds "
          f"{' '.join(map(str, args.seeds))}; k = {args.components}, degree {args.degree}, "
          f"{args.sweeps} sweeps; test RMSE of the predictions clipped to [1, 5]; "
          f"tools: {', '.join(tools)}")
    print(f"{'fold':<4} {'encoding':<13} {'seed':>4} {'tool':<8} {'CPU s/sweep':>11}   "
          + " ".join(f"{'RMSE@' + str(n):>9}" for n in checkpoints))
    scores = {e: {t: {n: [] for n in checkpoints} for t in tools} for e in args.encodings}
    seconds = {t: [] for t in tools}
    for fold in args.folds:
        for encoding in args.encodings:
            d = encode(data, fold, encoding, args.implicit_norm,
                       args.implicit_from == "train+test")
            tables_only = d["X"].direct().nnz == 0  # no part beside the tables
            libfm = None
            if "libFM" in tools and tables_only:
                from _libfm_mcmc import LibFM
                ml = dict(relational=(d["X"], d["X_test"]), y=(d["y"], d["y_test"]),
                          fields=d["fields"])
                libfm = LibFM(args.libfm, ml, tempfile.mkdtemp())
            for i, seed in enumerate(args.seeds):
                for tool in tools if tables_only else ["polylite"]:
                    if tool == "polylite":
                        sec, outputs = polylite_chain(d, args, seed)
                        if i == 0:
                            check_defaults(d, args, seed, outputs, checkpoints[0])
                        got = [rmse(polylite_default_prediction(outputs, n), d["y_test"])
                               for n in checkpoints]
                    elif tool == "myFM":
                        sec, outputs = myfm_chain(d, args, seed)
                        got = [rmse(myfm_default_prediction(outputs, n), d["y_test"])
                               for n in checkpoints]
                    else:
                        sec, curve = libfm_chain(libfm, args, seed)
                        got = [float(curve[n - 1]) for n in checkpoints]
                    seconds[tool].append(sec / args.sweeps)
                    for n, value in zip(checkpoints, got):
                        scores[encoding][tool][n].append(value)
                    print(f"{fold:<4} {encoding:<13} {seed:>4} {tool:<8} "
                          f"{sec / args.sweeps:>11.4f}   "
                          + " ".join(f"{v:>9.4f}" for v in got), flush=True)
            if libfm is not None:
                shutil.rmtree(libfm.folder)
    rows = summary(scores, tools, checkpoints)
    count = len(args.folds) * len(args.seeds)
    print_table(rows, tools, count)
    print("\nmedian CPU seconds per sweep (whole fit over sweeps, data loading included): "
          + ", ".join(f"{t} {np.median(s):.4f}" for t, s in seconds.items() if s))
    if args.output != "-":
        columns = ["encoding", "sweeps", *(f"{t} RMSE" for t in tools)]
        for tool in tools[1:]:
            columns += [f"polylite - {tool}", "se"]
        settings = {key: value for key, value in vars(args).items()
                    if key not in ("output", "data", "libfm", "n_jobs")}
        _results.save(
            args.output, "bayes_movielens",
            "Bayesian FMs on the five MovieLens 100K folds: polylite, libFM and myFM",
            [_results.table(
                f"MovieLens 100K folds {args.folds[0]}-{args.folds[-1]}, k = "
                f"{args.components}, degree {args.degree}, seeds "
                f"{args.seeds[0]}-{args.seeds[-1]}: test RMSE after n sweeps, mean of "
                f"{count} chains", columns, rows,
                note="predictions clipped to [1, 5]; each tool's default prediction for a "
                     "chain of n sweeps (polylite: burn-in min(n // 5, 5), every later "
                     "sample; libFM: every sweep's; myFM: the last n - 5); differences "
                     "paired by fold and seed, with their standard errors")],
            settings=settings | {"libfm": bool(args.libfm)}, peers=("myfm",),
            command=sanitised_command(sys.argv))


if __name__ == "__main__":
    main()
