"""The ``polylite`` command line (also ``python -m polylite``); see :func:`main`.

Commands::

    polylite fit TRAIN --model MODEL [options]   fit a model on an svmlight/libFM file
    polylite predict MODEL DATA [-o FILE]        one prediction per line
    polylite evaluate MODEL DATA                 RMSE/MAE/R^2, accuracy/log-loss/AUC, or
                                                 a ranker's mean AUC
    polylite info MODEL                          estimator, parameters, shapes, version
    polylite demo                                an FM on a synthetic recommender

Data files are svmlight/libsvm/libFM text (``label index:value ...``), zero- or one-based
(detected, or ``--zero-based``/``--one-based``), optionally gzip, bzip2 or xz compressed.
Compressed files are decompressed as they are read, within a bound: one whose text grows
to more than 200 times its compressed size (past its first 64 MiB) is refused as not a
data file (a decompression bomb), as is any line longer than 256 MiB.

Outputs never overwrite an input (the same file, also through a link).  A new or regular
file is written beside the target and replaces it only on success (through a symlink:
the file it points to); predictions to an existing device or FIFO (/dev/null, a named
pipe) are written into it, as the shell's > does; a model is never saved to one.
predict and evaluate take the models fit writes (factorization machines, polynomial
networks, rankers), not multi-output, ordinal or pipeline models saved from Python.

Progress and messages go to stderr, results to stdout.  Exit status: 0 on success, 1
when the work failed (unreadable data or model, a fit that diverged), 2 for a usage error
(a bad option or value), 130 when interrupted.
"""
import argparse
import contextlib
import copy
import json
import os
import stat
import sys
import tempfile
import time
import warnings
from typing import NamedTuple

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from . import _svmlight
from ._svmlight import DataFileError

__all__ = ["main"]

_DESCRIPTION = __doc__.split("\n", 1)[1].replace("``", "").replace("::", ":")


class _Failure(Exception):
    """The command could not do its work (exit status 1); the message says why."""


# ---- the estimators the command line fits ------------------------------------------------
#
# A family reaches the command line by an entry here, and options for any parameters of
# its own in _parameters().

class _Family(NamedTuple):
    classes: dict        # task -> estimator class
    unit: str            # what one step of the fit's progress is
    validation: tuple    # the names of fit's validation data arguments
    callback: str        # the attribute that takes a progress display


def _estimators():
    from .bayes import (BayesianFactorizationMachineClassifier,
                        BayesianFactorizationMachineRegressor)
    from .polynomial import (FactorizationMachineClassifier,
                             FactorizationMachineRegressor, PolynomialNetworkClassifier,
                             PolynomialNetworkRegressor)
    from .ranking import FactorizationMachineRanker
    epochs = dict(unit="epoch", validation=("X_val", "y_val"), callback="_epoch_callback")
    return {
        # The ranker's validation data are positives only: fit gets X_val, no y_val.
        "fm": _Family({"regression": FactorizationMachineRegressor,
                       "classification": FactorizationMachineClassifier,
                       "ranking": FactorizationMachineRanker}, **epochs),
        "pn": _Family({"regression": PolynomialNetworkRegressor,
                       "classification": PolynomialNetworkClassifier}, **epochs),
        "bayes-fm": _Family({"regression": BayesianFactorizationMachineRegressor,
                             "classification": BayesianFactorizationMachineClassifier},
                            unit="sweep", validation=("X_eval", "y_eval"),
                            callback="_sweep_callback"),
    }


def _choices(*groups):
    """The union of several tuples of allowed values, in order."""
    return tuple(dict.fromkeys(value for group in groups for value in group))


def _parameters():
    """(parameter, type or "bool", allowed values or None, help) of the options of fit,
    each named like the estimator parameter it sets; the estimators check the values."""
    from .polynomial import _solvers
    from .polynomial._base import _PolynomialModel
    from .polynomial._classifier import CLASSIFIER_LOSSES
    from .polynomial.fm import FM_KERNELS, LOWER_DEGREES
    from .polynomial.pn import OUTPUT_WEIGHTS, PN_LOWER_DEGREES
    from .ranking.fm import LOSSES as RANKING_LOSSES
    from .ranking.fm import NEGATIVES
    return [
        ("degree", int, None, "degree m >= 2 of the interactions"),
        ("n_components", int, None, "rank k of the factor matrices (hidden units of a PN)"),
        ("lower_degrees", str, _choices(LOWER_DEGREES, PN_LOWER_DEGREES),
         "how degrees below m are modelled (fm: separate, shared, none; pn: augment, none)"),
        ("kernel", str, FM_KERNELS, "interaction kernel of an fm"),
        ("output_weights", str, OUTPUT_WEIGHTS, "weights of the units of a pn"),
        # One option for both: the estimator refuses the other task's losses by name.
        ("loss", str, _choices(CLASSIFIER_LOSSES, RANKING_LOSSES),
         "loss of a classifier (logistic, squared_hinge; logistic gives --proba) or of a "
         "ranker (warp, bpr)"),
        ("negatives", str, NEGATIVES, "how a ranker draws negative items: uniformly, or "
                                      "by popularity"),
        ("max_trials", int, None, "negatives a warp ranker draws per positive at most"),
        ("margin", float, None, "margin of a warp ranker's hinge"),
        ("fit_linear", "bool", None, "fit the linear term"),
        ("fit_intercept", "bool", None, "fit the intercept"),
        ("alpha", float, None, "L2 penalty of the linear weights, per sample (the "
                               "objective is a mean over rows)"),
        ("beta", float, None, "L2 penalty of the factors, per sample"),
        ("init_scale", float, None, "standard deviation of the initial factors"),
        ("max_iter", int, None, "maximum number of epochs (passes over the data)"),
        ("tol", float, None, "stopping tolerance"),
        ("solver", str, _PolynomialModel._solvers, "optimiser (auto: lbfgs on dense data, "
                                                   "cd on sparse data)"),
        ("learning_rate", str, tuple(_solvers.SCHEDULES), "step size schedule of sgd"),
        ("eta0", float, None, "initial step size of sgd/adagrad (None: the estimator "
                               "chooses)"),
        ("power_t", float, None, "exponent of the invscaling schedule"),
        ("batch_size", int, None, "rows per stochastic step"),
        ("shuffle", "bool", None, "visit the rows in a new random order every epoch"),
        ("early_stopping", "bool", None, "hold out --validation-fraction of TRAIN and stop "
                                         "when its loss (a ranker's: AUC) stops improving "
                                         "(or give --validation)"),
        ("validation_fraction", float, None, "share of TRAIN held out by --early-stopping"),
        ("n_iter_no_change", int, None, "epochs without improvement before stopping"),
        ("random_state", int, None, "seed of the initialisation and shuffling (also "
                                    "--seed)"),
        ("n_jobs", int, None, "threads sharing the rows of prediction, cd, lbfgs and "
                              "mini-batches (-1: every CPU)"),
        ("n_iter", int, None, "sweeps of the Gibbs sampler (bayes-fm)"),
        ("n_burn_in", int, None, "sweeps discarded before averaging (bayes-fm)"),
        ("n_kept", int, None, "samples kept in the model for prediction (bayes-fm)"),
    ]


def _option(name):
    return "--" + name.replace("_", "-")


def _default_text(name):
    """The defaults of parameter ``name`` in the estimators that have it, for --help."""
    defaults = {}
    for family, entry in _estimators().items():
        for task, cls in entry.classes.items():
            params = cls().get_params()
            if name in params:
                label = "ranking" if task == "ranking" else family
                defaults.setdefault(repr(params[name]), []).append(label)
    if len(defaults) == 1:
        return f"default {next(iter(defaults))}"
    return "default " + ", ".join(f"{value} ({'/'.join(sorted(set(fams)))})"
                                  for value, fams in defaults.items())


# ---- the parser --------------------------------------------------------------------------

def _positive_int(text):
    return _bounded(int, text, 1)


def _bounded(kind, text, low):
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"invalid {'int' if kind is int else 'float'} value: {text!r}") from None
    if not value >= low:
        raise argparse.ArgumentTypeError(f"must be >= {low}, got {text}")
    return value


def _byte_size(text):
    """'64M', '1G', '65536' -> bytes."""
    units = {"k": 2**10, "m": 2**20, "g": 2**30}
    scale = units.get(text[-1:].lower(), 1)
    number = text[:-1] if scale > 1 else text
    try:
        value = int(float(number) * scale)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid size {text!r} (examples: 65536, "
                                         f"512K, 64M, 1G)") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def _column_range(text):
    """'40:70' -> (40, 70), the columns start..stop-1."""
    try:
        start, stop = (int(part) for part in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid column range {text!r} (expected "
                                         f"START:STOP, e.g. 40:70)") from None
    if not 0 <= start < stop:
        raise argparse.ArgumentTypeError(f"needs 0 <= START < STOP, got {text}")
    return start, stop


def _add_index_base(parser, default_text):
    """--zero-based / --one-based (default: ``default_text``) and --chunk-bytes."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--zero-based", dest="zero_based", action="store_const", const=True,
                       help="feature indices start at 0, libFM's convention (default: "
                       f"{default_text})")
    group.add_argument("--one-based", dest="zero_based", action="store_const", const=False,
                       help="feature indices start at 1, svmlight/libsvm's convention")
    parser.set_defaults(zero_based=None)
    parser.add_argument("--chunk-bytes", type=_byte_size, default=_svmlight.DEFAULT_CHUNK_BYTES,
                        metavar="SIZE", help="text read and parsed at once (default 64M); "
                        "bounds the memory of --stream, predict and evaluate")


def _build_parser():
    parser = argparse.ArgumentParser(
        prog="polylite", description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    from . import __version__
    parser.add_argument("--version", action="version", version=f"polylite {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    fit = sub.add_parser("fit", help="fit a model on an svmlight/libFM file",
                         usage="polylite fit TRAIN --model MODEL [options]",
                         description="Fit a model on an svmlight/libFM file and save it. "
                         "Estimator options are named like the Python parameters "
                         "(n_components: --n-components); unset ones keep the "
                         "estimator's default.")
    fit.add_argument("train", metavar="TRAIN", help="training data")
    fit.add_argument("--model", "-m", required=True, metavar="MODEL",
                     help="where to save the fitted model (.npz; written only on success): "
                          "a new or regular file, not a device or FIFO, not an input")
    fit.add_argument("--task", choices=("regression", "classification", "ranking"),
                     default="regression",
                     help="default regression; ranking: rank items for users from "
                          "positive interactions (label 1; 0: another interaction), "
                          "with --item-columns or --relation USERS,ITEMS")
    fit.add_argument("--estimator", choices=tuple(_estimators()), default="fm",
                     help="fm: factorization machine, pn: polynomial network, bayes-fm: "
                          "Bayesian factorization machine by Gibbs sampling (libFM's "
                          "-method mcmc) (default fm)")
    fit.add_argument("--validation", metavar="FILE",
                     help="validation data: its loss (ranking: the AUC of its positives) "
                          "is reported every epoch, training stops after "
                          "--n-iter-no-change epochs without improving it, and the best "
                          "model is kept (bayes-fm: the error of the averaged prediction "
                          "is reported every sweep)")
    fit.add_argument("--stream", action="store_true",
                     help="read TRAIN one block at a time (files larger than memory) and "
                          "train by partial_fit (solver sgd or adagrad; adagrad if "
                          "--solver is not given); --max-iter counts passes over TRAIN "
                          "(not for --task ranking)")
    fit.add_argument("--n-features", type=_positive_int, metavar="N",
                     help="number of features (default: the largest index in TRAIN and "
                          "--validation)")
    fit.add_argument("--dtype", choices=("float64", "float32"), default="float64",
                     help="precision of the data and the model (default float64)")
    _add_relation_option(fit, "R.train for TRAIN, R.test for --validation")
    fit.add_argument("--item-columns", type=_column_range, metavar="START:STOP",
                     help="--task ranking: the zero-based columns START..STOP-1 of the "
                          "item part of the rows (for a one-based file, its indices minus "
                          "one); the columns before START identify the user")
    fit.add_argument("--meta", metavar="FILE",
                     help="libFM's groups file of TRAIN's features (one group number per "
                          "line): each group gets its own prior (bayes-fm)")
    _add_index_base(fit, "detected from TRAIN and --validation")
    group = fit.add_argument_group("estimator parameters")
    for name, kind, choices, text in _parameters():
        flags = [_option(name)] + (["--seed"] if name == "random_state" else [])
        text = f"{text} ({_default_text(name)})"
        if kind == "bool":
            group.add_argument(*flags, dest=name, action=argparse.BooleanOptionalAction,
                               default=argparse.SUPPRESS, help=text)
        else:
            group.add_argument(*flags, dest=name, type=kind, choices=choices,
                               default=argparse.SUPPRESS, help=text,
                               metavar=None if choices else name.upper())
    _add_output_options(fit)
    fit.set_defaults(run=_fit, parser=fit)

    predict = sub.add_parser("predict", help="predict with a saved model",
                             description="Write one prediction per line of DATA: values "
                             "for a regressor, labels for a classifier, or with --proba "
                             "the probability of the positive class (two classes) or of "
                             "every class in the order `polylite info` lists them.")
    predict.add_argument("model", metavar="MODEL")
    predict.add_argument("data", metavar="DATA", help="data (its labels are not used)")
    predict.add_argument("--output", "-o", metavar="FILE", default="-",
                         help="where to write (default: stdout): a new or regular file, "
                              "written only on success, or a device or FIFO, written "
                              "into as the rows are predicted; not an input")
    predict.add_argument("--proba", action="store_true",
                         help="class probabilities (classifiers with the logistic loss)")
    _add_relation_option(predict, "R.test for DATA")
    _add_index_base(predict, "as the model's training file")
    _add_output_options(predict)
    predict.set_defaults(run=_predict, parser=predict)

    evaluate = sub.add_parser("evaluate", help="score a saved model on labelled data",
                              description="Score MODEL on DATA: RMSE, MAE and R^2 for a "
                              "regressor; accuracy, log-loss (logistic loss) and ROC AUC "
                              "for a classifier.")
    evaluate.add_argument("model", metavar="MODEL")
    evaluate.add_argument("data", metavar="DATA")
    evaluate.add_argument("--json", action="store_true", help="print one JSON object")
    _add_relation_option(evaluate, "R.test for DATA")
    _add_index_base(evaluate, "as the model's training file")
    _add_output_options(evaluate)
    evaluate.set_defaults(run=_evaluate, parser=evaluate)

    info = sub.add_parser("info", help="describe a saved model",
                          description="The estimator, its parameters, the shapes of its "
                          "fitted arrays, the polylite version and file format that wrote "
                          "it, and how `polylite fit` read its training data.")
    info.add_argument("model", metavar="MODEL")
    info.add_argument("--json", action="store_true", help="print one JSON object")
    info.set_defaults(run=_info, parser=info)

    demo = sub.add_parser("demo", help="fit an FM on a synthetic recommender (main job)",
                          description="Fit a factorization machine on a synthetic "
                          "recommender data set and compare it with a linear model.")
    demo.add_argument("--samples", type=lambda t: _bounded(int, t, 10), default=200_000,
                      help="rows (>= 10; default 200000)")
    demo.add_argument("--users", type=_positive_int, default=5_000,
                      help="users (default 5000)")
    demo.add_argument("--items", type=_positive_int, default=3_000,
                      help="items (default 3000)")
    demo.add_argument("--degree", type=lambda t: _bounded(int, t, 2), default=2,
                      help="degree >= 2 of the planted model and the FM (default 2)")
    demo.add_argument("--n-components", "--components", dest="components",
                      type=_positive_int, default=8, help="rank of the FM (default 8)")
    demo.add_argument("--beta", type=lambda t: _bounded(float, t, 0.0), default=1e-5,
                      help="L2 penalty of the factors, per sample (default 1e-5)")
    demo.add_argument("--epochs", "--max-iter", dest="epochs", type=_positive_int,
                      default=100, help="maximum epochs (default 100)")
    demo.add_argument("--seed", type=lambda t: _bounded(int, t, 0), default=0,
                      help="random seed (default 0)")
    demo.set_defaults(run=_demo, parser=demo)
    return parser


def _relation_names(text):
    names = [name for name in text.split(",") if name]
    if not names:
        raise argparse.ArgumentTypeError(f"{text!r} names no relation")
    return names


def _add_relation_option(parser, which):
    parser.add_argument(
        "--relation", metavar="R1,R2", type=_relation_names,
        help=f"libFM's relation blocks (-relation): for each base name R, the table R.x "
             f"(libFM's binary format) and the table row of each line in {which}; their "
             f"columns follow the data file's, in this order (docs: 'Relational data')")


def _add_output_options(parser):
    parser.add_argument("--progress", choices=("auto", "bar", "lines", "none"),
                        default="auto", help="progress on stderr: a bar on a terminal, "
                        "plain lines otherwise (default auto)")
    parser.add_argument("--quiet", "-q", action="store_true",
                        help="no progress and no summary")


# ---- progress on stderr ------------------------------------------------------------------

class _Progress:
    """Progress of the epochs on stderr: a tqdm bar on a terminal, one line per epoch
    otherwise."""

    def __init__(self, args, stream=None):
        self.stream = sys.stderr if stream is None else stream
        mode = "none" if args.quiet else args.progress
        if mode == "auto":
            mode = "bar" if self.stream.isatty() else "lines"
        if mode == "bar":
            import importlib.util
            if importlib.util.find_spec("tqdm") is None:  # pragma: no cover - a dependency
                mode = "lines"
        self.mode = mode
        self.bar = None
        self.bar_key = None

    def epoch(self, output, n_outputs, epoch, max_iter, values, seconds, unit="epoch"):
        """Report an epoch; ``values`` maps names to numbers (NaN ones are left out).
        A pass of --stream (``unit="pass"``) is a line in both modes, its bar being one
        over the bytes of the pass."""
        shown = {name: value for name, value in values.items() if np.isfinite(value)}
        if self.mode == "lines" or (self.mode == "bar" and unit == "pass"):
            self.close()
            prefix = f"[output {output + 1}/{n_outputs}] " if n_outputs > 1 else ""
            text = "".join(f"  {name} {value:.6g}" for name, value in shown.items())
            print(f"{prefix}{unit} {epoch}/{max_iter}{text}  {seconds:.1f}s",
                  file=self.stream, flush=True)
        elif self.mode == "bar":
            bar = self._bar((output, n_outputs), max_iter,
                            f"output {output + 1}/{n_outputs}" if n_outputs > 1 else "fit",
                            unit)
            bar.update(epoch - bar.n)
            bar.set_postfix({name: f"{value:.4g}" for name, value in shown.items()},
                            refresh=True)

    def bytes_read(self, key, total, label, n_bytes):
        """Advance a bar over the bytes of one pass of --stream (bar mode only)."""
        if self.mode == "bar":
            self._bar(key, total, label, "B").update(n_bytes)

    def _bar(self, key, total, label, unit):
        from tqdm import tqdm
        if self.bar_key != key:
            self.close()
            self.bar = tqdm(total=total, desc=label, unit=unit, file=self.stream,
                            leave=False, dynamic_ncols=True,
                            unit_scale=unit == "B", unit_divisor=1024)
            self.bar_key = key
        return self.bar

    def close(self):
        if self.bar is not None:
            self.bar.close()
            self.bar = self.bar_key = None

    def callback(self, unit, estimator):
        """The progress hook of ``estimator``'s fit: ``_epoch_callback`` of the epoch
        loop (unit "epoch") or ``_sweep_callback`` of a Gibbs sampler ("sweep")."""
        if unit == "sweep":
            name = f"validation {estimator._score_name.lower()}"

            def report_sweep(sweep, n_sweeps, score, seconds):
                self.epoch(0, 1, sweep, n_sweeps, {name: score}, seconds, unit="sweep")
            return report_sweep

        # A ranker reports the validation AUC (higher is better) where others a loss.
        name = "validation AUC" if _is_ranker(estimator) else "validation loss"

        def report(r):
            self.epoch(r.output, r.n_outputs, r.epoch, r.max_iter,
                       {"objective": r.objective, name: r.validation_loss}, r.seconds)
        return report


def _is_ranker(estimator):
    from .ranking import FactorizationMachineRanker
    return isinstance(estimator, FactorizationMachineRanker)


def _note(args, message):
    if not args.quiet:
        print(message, file=sys.stderr, flush=True)


# ---- reading data ------------------------------------------------------------------------

def _index_base_text(zero_based, detected):
    base = "zero-based" if zero_based else "one-based"
    return f"{base} indices ({'detected' if detected else 'as given'})"


def _labels_for(task, y):
    """Integer labels for a classifier when every label is integral (so that predictions
    print as 1, not 1.0)."""
    if task == "classification" and np.all(y == np.round(y)):
        return y.astype(np.int64)
    return y


def _read_for_fit(args, dtype, least_features=0):
    """Training (and validation) data of a non-streamed fit, their index base and size
    (at least ``least_features`` columns of the data file's own)."""
    stats = _svmlight.ReadStats()
    X, y = _svmlight.read_file(args.train, dtype=dtype, chunk_bytes=args.chunk_bytes,
                               stats=stats)
    parts = [(X, y, stats)]
    if args.validation:
        val_stats = _svmlight.ReadStats()
        X_val, y_val = _svmlight.read_file(args.validation, dtype=dtype,
                                           chunk_bytes=args.chunk_bytes, stats=val_stats)
        parts.append((X_val, y_val, val_stats))
    zero_based = args.zero_based
    if zero_based is None:
        zero_based = _svmlight.detect_zero_based(*(s for _, _, s in parts))
    elif zero_based is False:
        for (_, _, s), path in zip(parts, (args.train, args.validation)):
            if s.min_index == 0:
                raise DataFileError(f"{path}: holds feature index 0 but --one-based was "
                                    f"given")
    out = []
    for X, y, _ in parts:
        out.append((X if zero_based else _svmlight.from_one_based(X),
                    _labels_for(args.task, y)))
    # The data file's own columns (with relations, none when its lines hold targets only).
    relations = getattr(args, "relation", None)
    n_features = max([X.shape[1] if X.nnz or not relations else 0 for X, _ in out] +
                     [least_features])
    if args.n_features is not None:
        if args.n_features < n_features:
            raise _Failure(f"--n-features {args.n_features} is smaller than the "
                           f"{n_features} features the data uses")
        n_features = args.n_features
    out = [(_svmlight.with_columns(X, n_features, None), y) for X, y in out]
    if getattr(args, "relation", None):
        out = [(_with_relations(args, X, split, dtype, path), y)
               for (X, y), split, path in zip(out, ("train", "test"),
                                              (args.train, args.validation))]
    return out, zero_based, n_features


def _with_relations(args, X, split, dtype, path, rows=None):
    """X (the data file ``path``'s columns) with libFM's relation blocks ``args.relation``
    after them: a RelationalMatrix; ``rows``, the slice of the file's lines X holds (a
    chunk: then the index files are checked against the whole file at its end)."""
    from .relational import RelationalMatrix, RelationBlock
    blocks, _ = _relation_files(args, split, dtype)  # checked
    for name, block in zip(args.relation, blocks):
        lines = block.index.shape[0]
        if rows is None and lines != X.shape[0]:
            raise DataFileError(f"{name}.{split}: table rows for {lines} lines, {path} "
                                f"has {X.shape[0]}")
        if rows is not None and lines < rows.start + X.shape[0]:
            raise DataFileError(f"{name}.{split}: table rows for {lines} lines, {path} "
                                f"has more")
    if rows is not None:
        blocks = [RelationBlock(block.index[rows], block.table) for block in blocks]
    from .kernels import check_X
    # The tables were checked when read: only the data file's columns are, here.
    return RelationalMatrix._from_checked([check_X(X, dtype=dtype), *blocks], dtype)


def _relation_files(args, split, dtype):
    """The blocks and groups of ``args.relation`` for ``split``, read once per command
    (kept on ``args``; the splits share the tables)."""
    from ._libfm import relation_blocks
    from .relational import RelationalMatrix
    read = args.__dict__.setdefault("_relations_read", {"tables": {}})
    key = (split, np.dtype(dtype).name)
    if key not in read:
        blocks, groups = relation_blocks(args.relation, split, None, dtype, read["tables"])
        checked = []  # each block once, whatever the chunks of the data file
        for name, block in zip(args.relation, blocks):
            try:
                checked.extend(RelationalMatrix([block], dtype=dtype).blocks)
            except ValueError as exc:
                raise DataFileError(f"--relation {name}: {exc}") from None
        read[key] = checked, groups
    return read[key]


def _relation_widths(args, dtype, split="train"):
    """The columns of each of ``args.relation``'s tables."""
    if not args.relation:
        return []
    return [block.table.shape[1] for block in _relation_files(args, split, dtype)[0]]


def _feature_groups(args, n_main, dtype):
    """libFM's groups of every column: --meta's for the data file's own (one group
    without it), then each relation's (R.groups, or one), numbered after them."""
    from ._libfm import read_groups
    groups = [read_groups(args.meta, n_main) if args.meta
              else np.zeros(n_main, np.int64)]
    for relation_groups in _relation_files(args, "train", dtype)[1] if args.relation \
            else []:
        start = int(max((g.max() + 1 for g in groups if g.size), default=0))
        groups.append(relation_groups + start)
    return np.concatenate(groups)


# ---- fit ---------------------------------------------------------------------------------

def _chosen_parameters(args, parser, cls):
    """The estimator parameters given as options, checked by the estimator itself."""
    chosen = {name: getattr(args, name) for name, *_ in _parameters() if hasattr(args, name)}
    accepted = cls().get_params()
    for name in chosen:
        if name not in accepted:
            parser.error(f"argument {_option(name)}: not a parameter of {cls.__name__} "
                         f"(--estimator {args.estimator} --task {args.task})")
    try:  # together, as some parameters bound others (n_burn_in < n_iter)
        cls(**chosen)._check_params()
    except ValueError as exc:
        message = str(exc)
        named = ([name for name in chosen if message.startswith(name + " ")] or
                 [name for name in chosen if name in message])
        if not named:  # a default that another option's value contradicts
            parser.error(f"estimator parameters: {message}")
        if message.startswith(named[0] + " "):
            message = message[len(named[0]) + 1:]
        parser.error(f"argument {_option(named[0])}: {message}")
    return chosen


def _check_writable(path, what):
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise _Failure(f"cannot write {what} {path!r}: no directory {directory!r}")
    if not os.access(directory, os.W_OK):
        raise _Failure(f"cannot write {what} {path!r}: directory {directory!r} is not "
                       f"writable")


_SPECIAL_FILES = ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                  (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"))


def _check_output(path, what, inputs, in_place):
    """Check that ``what`` can be written to ``path`` without destroying a file: not one
    of ``inputs`` (pairs of a description and a path or None; the same file through
    links), not a directory, and (unless ``in_place``) not a device or FIFO.  Returns
    True when ``path`` is an existing device or FIFO, to be written into, False when it
    is a new or regular file, to be replaced by a file written beside it."""
    try:
        target = os.stat(path)  # through symlinks
    except FileNotFoundError:
        target = None
    except OSError as exc:
        raise _Failure(f"cannot write {what} to {path!r}: {exc.strerror or exc}") from None
    if target is not None:
        for role, name in inputs:
            try:
                source = os.stat(name) if name is not None else None
            except (OSError, ValueError):
                source = None  # not there: not read, or an error when it is
            if source is not None and (source.st_dev, source.st_ino) == \
                    (target.st_dev, target.st_ino):
                raise _Failure(f"cannot write {what} to {path!r}: it is the same file as "
                               f"{role} {name!r}, which would be overwritten")
        if stat.S_ISDIR(target.st_mode):
            raise _Failure(f"cannot write {what} to {path!r}: it is a directory")
        kind = next((text for test, text in _SPECIAL_FILES if test(target.st_mode)), None)
        if kind is not None:
            if in_place:
                return True
            raise _Failure(f"cannot write {what} to {path!r}: it is {kind}, not a regular "
                           f"file (polylite writes {what} only to a new or regular file)")
    _check_writable(os.path.realpath(path), what)
    return False


def _relation_inputs(args, splits):
    """(description, path) of the files of --relation read for ``splits``."""
    return [("the relation file", f"{name}{suffix}") for name in args.relation or []
            for suffix in (".x", ".groups") + tuple(f".{split}" for split in splits)]


def _fit(args, parser):
    from .polynomial import _solvers
    family = _estimators()[args.estimator]
    if args.task not in family.classes:
        parser.error(f"argument --task: {args.task} is fitted by --estimator fm, not by "
                     f"--estimator {args.estimator}")
    cls = family.classes[args.task]
    params = _chosen_parameters(args, parser, cls)
    if args.task == "ranking":
        _check_ranking_options(args, parser, params)
    elif args.item_columns is not None:
        parser.error("argument --item-columns: only with --task ranking")
    if args.stream:
        if not hasattr(cls, "partial_fit"):
            parser.error(f"argument --stream: trains by partial_fit, which "
                         f"{cls.__name__} (--estimator {args.estimator}) does not have")
        params.setdefault("solver", "adagrad")
        if params["solver"] not in _solvers.STOCHASTIC:
            parser.error(f"argument --solver: --stream trains by partial_fit, which needs "
                         f"one of {list(_solvers.STOCHASTIC)}, got {params['solver']!r}")
        if params.get("early_stopping"):
            parser.error("argument --early-stopping: not with --stream (it holds out rows "
                         "in memory); give --validation FILE instead")
        if args.relation:
            parser.error("argument --relation: not with --stream (the tables and the "
                         "rows' indices are read whole)")
    if args.relation and not getattr(cls, "_takes_relational", False):
        parser.error(f"argument --relation: the relations' tables are taken by "
                     f"factorization machines (--estimator fm or bayes-fm), not by "
                     f"--estimator {args.estimator}; join them into the data file for it")
    if args.meta and args.estimator != "bayes-fm":
        parser.error(f"argument --meta: feature groups are the priors of --estimator "
                     f"bayes-fm, not of {args.estimator}")
    inputs = [("the training data", args.train), ("the validation data", args.validation),
              ("the groups file", args.meta)] + _relation_inputs(args, ("train", "test"))
    _check_output(args.model, "the model", inputs, in_place=False)
    dtype = np.dtype(args.dtype)
    estimator = cls(**params)
    progress = _Progress(args)
    start = time.perf_counter()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ConvergenceWarning)
            if args.stream:
                fitted = _fit_stream(args, estimator, dtype, progress)
            else:
                fitted = _fit_in_memory(args, family, estimator, dtype, progress)
    finally:
        progress.close()
    seconds = time.perf_counter() - start
    for warning in caught:
        # A ranker's UserWarnings are about the data (users who saw every item).
        if issubclass(warning.category, ConvergenceWarning) or (
                args.task == "ranking" and warning.category is UserWarning):
            _note(args, f"polylite fit: warning: {warning.message}")
        else:
            warnings.warn_explicit(warning.message, warning.category, warning.filename,
                                   warning.lineno)
    zero_based, n_features = fitted.zero_based, fitted.n_features
    metadata = {"written_by": "polylite fit",
                "data": {"train": os.path.abspath(args.train),
                         "validation": (os.path.abspath(args.validation)
                                        if args.validation else None),
                         "zero_based": bool(zero_based), "n_features": int(n_features),
                         "dtype": dtype.name, "stream": bool(args.stream),
                         "relation": [os.path.abspath(name) for name in
                                      args.relation or []],
                         "relation_columns": _relation_widths(args, dtype)}}
    from ._io import save_model
    try:
        # Through a symlink: the file it points to is replaced, not the link.
        save_model(estimator, os.path.realpath(args.model), metadata=metadata)
    except OSError as exc:
        raise _Failure(f"cannot write the model {args.model!r}: {exc}") from None
    relations = "".join(f" + {name} ({width} columns)" for name, width in
                        zip(args.relation or [], _relation_widths(args, dtype)))
    _note(args, f"polylite fit: {_describe(estimator)} on {args.train}: {fitted.rows} "
                f"rows, {n_features} features{relations}, "
                f"{_index_base_text(zero_based, args.zero_based is None)}; "
                f"{fitted.epochs} in {seconds:.2f} s; " +
                "".join(f"{score}; " for score in fitted.scores) + f"saved {args.model}")
    return 0


def _check_ranking_options(args, parser, params):
    """The options of --task ranking: where the item part is (item_columns in
    ``params``), and no --stream."""
    if args.stream:
        parser.error("argument --stream: not with --task ranking (the ranker draws "
                     "negatives among every item a user has not interacted with, which "
                     "needs all of TRAIN in memory)")
    if args.item_columns is not None:
        if args.n_features is not None and args.item_columns[1] > args.n_features:
            parser.error(f"argument --item-columns: STOP {args.item_columns[1]} is beyond "
                         f"--n-features {args.n_features}")
        params["item_columns"] = args.item_columns
    elif not args.relation:
        parser.error("argument --item-columns: --task ranking needs the item part of the "
                     "rows: give --item-columns START:STOP (its columns), or --relation "
                     "USERS,ITEMS (the second relation's table)")
    elif len(args.relation) < 2:
        parser.error("argument --relation: --task ranking takes the item part from the "
                     "second relation (--relation USERS,ITEMS), or from the columns "
                     "--item-columns names")


def _check_ranking_labels(path, y):
    """A ranker's labels are 1 (a positive) and 0 (another interaction)."""
    other = np.setdiff1d(np.unique(y), (0, 1))
    if other.size:
        shown = ", ".join(f"{value:g}" for value in other[:5])
        raise DataFileError(f"{path}: the labels of a ranker's data are 1 (a positive) "
                            f"and 0 (another interaction of the user with the item), "
                            f"found {shown}{', ...' if other.size > 5 else ''}")


def _ranking_fit_args(args, validation):
    """fit's X_val: the positive rows of --validation (its other rows are dropped)."""
    if not args.validation:
        return {}
    X_val, y_val = validation
    _check_ranking_labels(args.validation, y_val)
    if not np.any(y_val == 1):
        raise DataFileError(f"{args.validation}: no positive (label 1) to validate on")
    return {"X_val": X_val[np.flatnonzero(y_val == 1)]}


def _auc_text(estimator, name, X, y):
    """``name`` AUC of the positives X (by ``score``), or nothing if it cannot be
    measured (every user of X has interacted with every item of X)."""
    try:
        return [f"{name} AUC {estimator.score(X, y):.4f}"]
    except ValueError:
        return []


class _Fitted(NamedTuple):
    """What a fit tells the summary line and the model file's metadata."""
    rows: int
    zero_based: bool
    n_features: int
    epochs: str         # "12 epochs", "3 passes"...
    scores: list        # "training rmse 0.91", ...


def _describe(estimator):
    shown = {"degree", "n_components", "solver", "kernel", "lower_degrees", "loss"}
    params = estimator.get_params()
    text = {k: repr(v) for k, v in params.items() if k in shown}
    if params.get("solver") == "auto" and hasattr(estimator, "solver_"):
        text["solver"] = f"'auto' ({estimator.solver_})"  # the solver that ran
    return f"{type(estimator).__name__}({', '.join(f'{k}={v}' for k, v in text.items())})"


def _epochs_text(estimator, unit):
    n_iter = np.atleast_1d(estimator.n_iter_)
    if n_iter.size == 1:
        return f"{int(n_iter[0])} {unit}s"
    return f"{int(n_iter.sum())} {unit}s over {n_iter.size} one-vs-rest outputs"


def _fit_in_memory(args, family, estimator, dtype, progress):
    ranking = args.task == "ranking"
    # The item columns are the model's even when TRAIN lacks the last items.
    least = args.item_columns[1] if ranking and args.item_columns and not args.relation \
        else 0
    data, zero_based, n_features = _read_for_fit(args, dtype, least)
    (X, y) = data[0]
    _hint_task(args, y)
    if ranking:
        _check_ranking_labels(args.train, y)
        fit_args = _ranking_fit_args(args, data[1] if args.validation else None)
    else:
        fit_args = dict(zip(family.validation, data[1])) if args.validation else {}
    if args.estimator == "bayes-fm" and (args.meta or args.relation):
        fit_args["feature_groups"] = _feature_groups(args, n_features, dtype)
    setattr(estimator, family.callback, progress.callback(family.unit, estimator))
    try:
        estimator.fit(X, y, **fit_args)
    except (ValueError, FloatingPointError) as exc:
        raise _Failure(str(exc)) from None
    except MemoryError as exc:
        raise _Failure(_memory_text(args, estimator, X.shape[1], exc)) from None
    finally:
        setattr(estimator, family.callback, None)
    if ranking and args.validation:
        # As the epochs measure it: TRAIN's rows (label 0) are the users' interactions,
        # not candidates; the validation positives are ranked against the other items.
        X_val, y_val = data[1]
        scores = _auc_text(estimator, "validation", _stack_rows([X, X_val]),
                           np.concatenate([np.zeros(X.shape[0]), y_val]))
    elif ranking:  # one AUC only: each costs a score per positive and catalogue item
        scores = _auc_text(estimator, "training", X, y)
    else:
        scores = [f"training {_score_text(estimator, X, y)}"]
        if args.validation:
            scores.append(f"validation {_score_text(estimator, *data[1])}")
    return _Fitted(X.shape[0], zero_based, n_features,
                   _epochs_text(estimator, family.unit), scores)


def _memory_text(args, estimator, n_features, exc):
    """Why a fit ran out of memory: the model of ``n_features`` columns is too large."""
    columns = " and the relations' columns" if args.relation else ""
    return (f"not enough memory to fit a {type(estimator).__name__} of {n_features} "
            f"features (set by the largest feature index in {args.train}{columns}): it "
            f"{_allocation_text(exc)}; a smaller --n-components or --dtype float32 needs "
            f"less, as do feature indices numbered without gaps")


def _allocation_text(exc):
    """'needs 2.24 GiB for an array with shape (300000000,) and data type float64', from
    numpy's MemoryError."""
    text = str(exc)
    if text.startswith("Unable to allocate "):
        return "needs " + text[len("Unable to allocate "):]
    return "needs more memory than this machine has"


def _hint_task(args, y):
    if args.task == "regression" and np.unique(y).size <= 2:
        _note(args, "polylite fit: note: the labels take two values; for a classifier "
                    "pass --task classification")


def _score_text(estimator, X, y):
    metrics = _metrics(estimator, y, *_predictions(estimator, X))
    name = "rmse" if "rmse" in metrics else "accuracy"
    return f"{name} {metrics[name]:.4f}"


def _fit_stream(args, estimator, dtype, progress):
    """Passes of partial_fit over TRAIN, one block at a time; early stopping on the
    validation metric (or, without --validation, on the progressive metric: each block
    scored before it is trained on), keeping the best model."""
    classify = args.task == "classification"
    validation = None
    val_stats = None
    if args.validation:
        val_stats = _svmlight.ReadStats()
        validation = _svmlight.read_file(args.validation, dtype=dtype,
                                         chunk_bytes=args.chunk_bytes, stats=val_stats)
    need_scan = classify or args.zero_based is None or args.n_features is None
    stats = (_svmlight.scan_file(args.train, chunk_bytes=args.chunk_bytes,
                                 track_labels=True) if need_scan else None)
    zero_based = args.zero_based
    if zero_based is None:
        zero_based = _svmlight.detect_zero_based(*(s for s in (stats, val_stats) if s))
    n_features = args.n_features
    if n_features is None:
        largest = max(s.max_index for s in (stats, val_stats) if s)
        n_features = max(largest + (1 if zero_based else 0), 1)
    if validation is not None:
        X_val, y_val = validation
        if not zero_based:
            if val_stats.min_index == 0:
                raise DataFileError(f"{args.validation}: holds feature index 0, but the "
                                    f"data is read as one-based")
            X_val = _svmlight.from_one_based(X_val)
        validation = (_svmlight.with_columns(X_val, n_features, None),
                      _labels_for(args.task, y_val))
    if stats is not None:
        _hint_task(args, stats.labels)
    fit_kwargs = {}
    if classify:
        fit_kwargs["classes"] = _labels_for(args.task, stats.labels)
    max_iter, tol, patience = (estimator._max_iter, estimator.tol,
                               estimator.n_iter_no_change)
    best, best_model, stalled, best_values = np.inf, None, 0, {}
    start = time.perf_counter()
    for passes in range(1, max_iter + 1):
        pass_stats = _svmlight.ReadStats()
        scored, total, read = 0, 0.0, 0
        for X, y in _svmlight.iter_file(args.train, zero_based=zero_based,
                                        n_features=n_features, dtype=dtype,
                                        chunk_bytes=args.chunk_bytes, stats=pass_stats):
            y = _labels_for(args.task, y)
            if estimator.__sklearn_is_fitted__():  # score the block before learning it
                total += _metric_sum(estimator, X, y)
                scored += X.shape[0]
            try:
                estimator.partial_fit(X, y, **fit_kwargs)
            except (ValueError, FloatingPointError) as exc:
                raise _Failure(str(exc)) from None
            except MemoryError as exc:
                raise _Failure(_memory_text(args, estimator, n_features, exc)) from None
            progress.bytes_read(("pass", passes), stats.text_bytes if stats else None,
                                f"pass {passes}/{max_iter}", pass_stats.text_bytes - read)
            read = pass_stats.text_bytes
        name = _metric_name(estimator)
        watched = _finish_metric(estimator, total, scored)
        values = {f"progressive {name}": watched}
        if validation is not None:
            watched = _finish_metric(estimator, _metric_sum(estimator, *validation),
                                     validation[0].shape[0])
            values[f"validation {name}"] = watched
        progress.epoch(0, 1, passes, max_iter, values, time.perf_counter() - start,
                       unit="pass")
        if not np.isfinite(watched):  # the first pass has no progressive score
            continue
        if best_model is None or watched < best - tol * abs(best):
            best, best_model, stalled = min(best, watched), copy.deepcopy(estimator), 0
            best_values = values
        else:
            stalled += 1
            if stalled >= patience:
                break
    if best_model is not None:
        vars(estimator).update(vars(best_model))
    scores = [f"{name} {value:.4f}" for name, value in best_values.items()
              if np.isfinite(value)]
    return _Fitted(pass_stats.rows, zero_based, n_features,
                   f"{passes} passes of {pass_stats.rows} rows (streamed)", scores)


# The metric that --stream watches: a sum over rows, so that blocks add up.

def _metric_name(estimator):
    if not getattr(estimator, "_is_classifier", False):
        return "rmse"
    return "log-loss" if estimator.loss == "logistic" else "error rate"


def _metric_sum(estimator, X, y):
    if not estimator._is_classifier:
        return float(np.sum((estimator.predict(X) - y) ** 2))
    if estimator.loss == "logistic":
        log_proba = estimator.predict_log_proba(X)
        codes = np.searchsorted(estimator.classes_, y)
        return float(-np.sum(log_proba[np.arange(y.shape[0]), codes]))
    return float(np.sum(estimator.predict(X) != y))


def _finish_metric(estimator, total, rows):
    if rows == 0:
        return np.nan
    mean = total / rows
    return np.sqrt(mean) if not estimator._is_classifier else mean


# ---- predict / evaluate / info -----------------------------------------------------------

def _load(path, command=None):
    """The model in ``path`` and its file's header; for ``command`` (predict, evaluate),
    only a kind of model ``polylite fit`` writes."""
    from ._io import ModelFileError, load_with_header
    try:
        estimator, header = load_with_header(path)
    except ModelFileError as exc:
        raise _Failure(str(exc)) from None
    supported = [cls for family in _estimators().values() for cls in family.classes.values()]
    if command is not None and type(estimator) not in supported:
        raise _Failure(f"{path} holds {_kind_text(estimator)}, which polylite {command} "
                       f"does not take (it takes the factorization machines, polynomial "
                       f"networks and rankers polylite fit writes); use it from Python "
                       f"(polylite.load)")
    return estimator, header


def _kind_name(estimator):
    """'MultiOutputPolynomialRegressor', 'Pipeline of FieldEncoder, ...'."""
    name = type(estimator).__name__
    steps = getattr(estimator, "steps", None)
    if isinstance(steps, list):
        name += " of " + ", ".join(type(step).__name__ for _, step in steps)
    return name


def _kind_text(estimator):
    name = _kind_name(estimator)
    return f"{'an' if name[0] in 'AEIOU' else 'a'} {name}"


def _data_zero_based(args, header, estimator):
    """Whether DATA's indices start at 0: as given, as the model's training file's, or
    (a model saved from Python) detected."""
    if args.zero_based is not None:
        return args.zero_based
    recorded = (header.get("metadata") or {}).get("data") or {}
    if isinstance(recorded.get("zero_based"), bool):
        return recorded["zero_based"]
    # A model saved from Python: its columns are zero-based; the file may be either.
    stats = _svmlight.scan_file(args.data, chunk_bytes=args.chunk_bytes)
    zero_based = (_svmlight.detect_zero_based(stats) or
                  stats.max_index < estimator.n_features_in_)
    _note(args, f"polylite {args.command}: reading {args.data} with "
                f"{'zero' if zero_based else 'one'}-based indices (the model does not "
                f"record its training file's; pass --zero-based or --one-based to choose)")
    return zero_based


def _iter_data(args, header, estimator, stats):
    dtype = _model_dtype(estimator)
    n_features = estimator.n_features_in_
    if args.relation:
        _check_relations(args, header, estimator, dtype)
        # The model's columns: the data file's own, then the relations' tables'.
        n_features -= sum(_relation_widths(args, dtype, "test"))
    elif _recorded_relations(header)[0]:
        names = ",".join(os.path.basename(name) for name in _recorded_relations(header)[0])
        raise _Failure(f"{args.model} was fitted with --relation {names}: give "
                       f"--relation with the relations' files for {args.data}")
    start = 0
    for X, y in _svmlight.iter_file(args.data,
                                    zero_based=_data_zero_based(args, header, estimator),
                                    n_features=n_features, dtype=dtype,
                                    chunk_bytes=args.chunk_bytes, stats=stats):
        if args.relation:
            X = _with_relations(args, X, "test", dtype, args.data,
                                slice(start, start + X.shape[0]))
            start += X.shape[0]
        yield X, y
    if args.relation:
        blocks, _ = _relation_files(args, "test", dtype)
        for name, block in zip(args.relation, blocks):
            if block.index.shape[0] != start:
                raise DataFileError(f"{name}.test: table rows for {block.index.shape[0]} "
                                    f"lines, {args.data} has {start}")


def _recorded_relations(header):
    """The relations a model file records (base paths and each table's columns), from
    ``polylite fit --relation``; empty for a model fitted without, or saved from Python."""
    data = (header.get("metadata") or {}).get("data") or {}
    return data.get("relation") or [], data.get("relation_columns")


def _check_relations(args, header, estimator, dtype):
    """Refuse relations the model was not fitted with: their tables' columns would be
    read as other columns of the model."""
    if not getattr(estimator, "_takes_relational", False):
        raise _Failure(f"--relation: {type(estimator).__name__} ({args.model}) takes no "
                       f"relations' tables")
    recorded, columns = _recorded_relations(header)
    written_by_fit = (header.get("metadata") or {}).get("written_by") == "polylite fit"
    if written_by_fit and not recorded:
        raise _Failure(f"--relation: {args.model} was fitted without relations")
    widths = _relation_widths(args, dtype, "test")
    if columns is not None and list(widths) != list(columns):
        fitted = ", ".join(f"{os.path.basename(name)} ({width} columns)"
                           for name, width in zip(recorded, columns))
        given = ", ".join(f"{name} ({width} columns)"
                          for name, width in zip(args.relation, widths))
        raise _Failure(f"--relation: {args.model} was fitted with the relations "
                       f"{fitted}, in this order; given {given}")
    if sum(widths) > estimator.n_features_in_:
        raise _Failure(f"--relation: the tables have {sum(widths)} columns, more than "
                       f"the model's {estimator.n_features_in_}")


def _model_dtype(estimator):
    """The float type of a fitted model's factors (its data are read in it)."""
    factors = estimator.P_ if hasattr(estimator, "P_") else estimator.P_samples_
    return factors.dtype


def _warn_dropped(args, stats, estimator):
    if not stats.dropped_nonzeros:
        return
    if args.relation:
        own = estimator.n_features_in_ - sum(_relation_widths(args, _model_dtype(estimator),
                                                              "test"))
        beyond = (f"beyond the data file's own {own} columns (the relations' tables "
                  f"take the columns after them)")
    else:
        beyond = (f"beyond the model's {estimator.n_features_in_} features (unseen in "
                  f"training)")
    _note(args, f"polylite {args.command}: warning: {stats.dropped_nonzeros} nonzeros in "
                f"{stats.dropped_rows} rows of {args.data} have feature indices {beyond}; "
                f"they were ignored")


def _predictions(estimator, X):
    """(labels or values, scores for AUC, probabilities or None) of one block."""
    if not estimator._is_classifier:
        values = estimator.predict(X)
        return values, values, None
    scores = estimator.decision_function(X)
    if scores.ndim == 1:
        labels = estimator.classes_[(scores > 0).astype(np.intp)]
    else:
        labels = estimator.classes_[np.argmax(scores, axis=1)]
    has_proba = hasattr(estimator, "predict_proba")
    return labels, scores, estimator.predict_proba(X) if has_proba else None


def _check_proba(args, estimator, parser):
    if not args.proba:
        return
    if not estimator._is_classifier:
        what = "scores" if _is_ranker(estimator) else "values"
        parser.error(f"argument --proba: {args.model} holds a {type(estimator).__name__}, "
                     f"which predicts {what}, not probabilities")
    if not hasattr(estimator, "predict_proba"):
        parser.error(f"argument --proba: {args.model} was fitted with "
                     f"loss={estimator.loss!r}, which gives no probabilities (fit with "
                     f"--loss logistic)")


@contextlib.contextmanager
def _output_file(path, inputs):
    """A text stream that becomes ``path`` only if the block succeeds (stdout for '-';
    an existing device or FIFO is written into); never one of ``inputs``."""
    if path == "-":
        yield sys.stdout
        sys.stdout.flush()
        return
    if _check_output(path, "the predictions", inputs, in_place=True):
        with open(path, "w") as f:
            yield f
        return
    path = os.path.realpath(path)  # through a symlink: the file it points to
    directory = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".polylite-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            yield f
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _format_rows(values):
    """One line per row: the value, or the row's values separated by spaces."""
    text = np.asarray(values).astype(str)
    if text.ndim == 1:
        return "\n".join(text) + "\n"
    return "\n".join(" ".join(row) for row in text) + "\n"


def _predict(args, parser):
    estimator, header = _load(args.model, "predict")
    _check_proba(args, estimator, parser)
    stats = _svmlight.ReadStats()
    start = time.perf_counter()
    inputs = [("the model", args.model), ("the data", args.data)]
    with _output_file(args.output, inputs + _relation_inputs(args, ("test",))) as out:
        for X, _ in _iter_data(args, header, estimator, stats):
            if X.shape[0] == 0:
                continue
            if args.proba:
                proba = estimator.predict_proba(X)
                out.write(_format_rows(proba[:, 1] if proba.shape[1] == 2 else proba))
            else:
                out.write(_format_rows(estimator.predict(X)))
    _warn_dropped(args, stats, estimator)
    where = "stdout" if args.output == "-" else args.output
    _note(args, f"polylite predict: {stats.rows} rows of {args.data} -> {where} in "
                f"{time.perf_counter() - start:.2f} s")
    return 0


def _metrics(estimator, y, predicted, scores, proba):
    from sklearn import metrics
    if not estimator._is_classifier:
        return {"rmse": float(np.sqrt(metrics.mean_squared_error(y, predicted))),
                "mae": float(metrics.mean_absolute_error(y, predicted)),
                "r2": float(metrics.r2_score(y, predicted)) if y.shape[0] > 1 else np.nan}
    classes = estimator.classes_
    out = {"accuracy": float(metrics.accuracy_score(y, predicted))}
    known = np.isin(y, classes)
    if proba is not None and known.all():
        out["log_loss"] = float(metrics.log_loss(y, proba, labels=classes))
    present = np.unique(y[known])
    if present.size >= 2 and known.all():
        if classes.shape[0] == 2:
            out["auc"] = float(metrics.roc_auc_score(y == classes[1], scores))
        elif proba is not None and present.size == classes.shape[0]:
            out["auc"] = float(metrics.roc_auc_score(y, proba, multi_class="ovr",
                                                     labels=classes))
    return out


def _evaluate(args, parser):
    estimator, header = _load(args.model, "evaluate")
    stats = _svmlight.ReadStats()
    if _is_ranker(estimator):
        result = _ranking_metrics(args, header, estimator, stats)
        _warn_dropped(args, stats, estimator)
        _print_metrics(args, result)
        return 0
    parts = []
    for X, y in _iter_data(args, header, estimator, stats):
        if X.shape[0]:
            y = y.astype(estimator.classes_.dtype) if estimator._is_classifier else y
            parts.append((y,) + _predictions(estimator, X))
    if not parts:
        raise _Failure(f"{args.data}: no data")
    y, predicted, scores, proba = (
        np.concatenate([p[i] for p in parts]) if parts[0][i] is not None else None
        for i in range(4))
    result = {"rows": int(y.shape[0])}
    result.update(_metrics(estimator, y, predicted, scores, proba))
    _warn_dropped(args, stats, estimator)
    unknown = (np.setdiff1d(np.unique(y), estimator.classes_)
               if estimator._is_classifier else [])
    if len(unknown):
        _note(args, f"polylite evaluate: warning: {args.data} has labels the model does "
                    f"not know: {unknown.tolist()} (no log-loss or AUC)")
    _print_metrics(args, result)
    return 0


def _print_metrics(args, result):
    if args.json:
        print(json.dumps(result))
        return
    width = max(9, max(len(name) for name in result) + 1)
    for name, value in result.items():
        print(f"{name:<{width}}{value}" if isinstance(value, int) else
              f"{name:<{width}}{value:.6g}")


def _ranking_metrics(args, header, estimator, stats):
    """The rows and positives of DATA and their mean AUC.  DATA is read whole: each
    positive is ranked against every item its user has no interaction with in DATA."""
    blocks = [(X, y) for X, y in _iter_data(args, header, estimator, stats) if X.shape[0]]
    if not blocks:
        raise _Failure(f"{args.data}: no data")
    X = _stack_rows([X for X, _ in blocks])
    y = np.concatenate([y for _, y in blocks])
    _check_ranking_labels(args.data, y)
    if not np.any(y == 1):
        raise _Failure(f"{args.data}: no positive (label 1) to score")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UserWarning)
        try:
            auc = estimator.score(X, y)
        except ValueError as exc:
            raise _Failure(f"{args.data}: {exc}") from None
    for warning in caught:  # positives of users who interacted with every item
        _note(args, f"polylite evaluate: warning: {warning.message}")
    return {"rows": int(y.shape[0]), "positives": int(np.sum(y == 1)), "auc": float(auc)}


def _stack_rows(blocks):
    """The rows of several matrices of one layout in one matrix (relational ones read
    with the same relations' tables: the first's are kept)."""
    if len(blocks) == 1:
        return blocks[0]
    import scipy.sparse as sp

    from .relational import RelationalMatrix, RelationBlock
    first = blocks[0]
    if not isinstance(first, RelationalMatrix):
        return sp.vstack(blocks, format="csr")
    parts = []
    for p, part in enumerate(first.parts):
        if isinstance(part, RelationBlock):
            parts.append(RelationBlock(np.concatenate([b.parts[p].index for b in blocks]),
                                       part.table))
        else:
            stacked = sp.vstack([b.parts[p] for b in blocks], format="csr")
            stacked.sum_duplicates()  # canonical, as the blocks were
            parts.append(stacked)
    return RelationalMatrix._from_checked(parts, first.dtype)


def _info(args, parser):
    estimator, header = _load(args.model)
    # A pipeline's steps' parameters and arrays are named "step__name", as sklearn does.
    steps = getattr(estimator, "steps", None)
    parts = ([(f"{name}__", step) for name, step in steps] if isinstance(steps, list)
             else [("", estimator)])
    fitted = {prefix + name: {"shape": list(np.shape(value)),
                              "dtype": str(np.asarray(value).dtype)}
              for prefix, part in parts for name, value in sorted(vars(part).items())
              if name.endswith("_") and not name.startswith("_")}
    result = {
        "file": args.model,
        "estimator": type(estimator).__name__,
        "format_version": header.get("format_version"),
        "polylite_version": header.get("polylite_version"),
        "parameters": {prefix + name: value for prefix, part in parts
                       for name, value in part.get_params(deep=False).items()},
        "n_features_in_": int(estimator.n_features_in_),
        "fitted": fitted,
    }
    if len(parts) > 1:
        result["steps"] = [type(part).__name__ for _, part in parts]
    final = parts[-1][1]
    if getattr(final, "_is_classifier", False):
        result["classes_"] = final.classes_.tolist()
    if header.get("metadata"):
        result["metadata"] = header["metadata"]
    if args.json:
        print(json.dumps(result, default=str))
        return 0
    print(f"file           {args.model}  (format version {result['format_version']}, "
          f"written by polylite {result['polylite_version']})")
    print(f"estimator      {_kind_name(estimator)}")
    print(f"features       {result['n_features_in_']}")
    if "classes_" in result:
        print(f"classes        {result['classes_']}")
    print("parameters     " + "\n               ".join(
        f"{name}={value!r}" for name, value in result["parameters"].items()))
    print("fitted         " + "\n               ".join(
        f"{name:<15} shape {tuple(spec['shape'])} {spec['dtype']}"
        for name, spec in fitted.items()))
    data = (result.get("metadata") or {}).get("data")
    if data:
        print(f"training data  {data.get('train')}"
              f"{' (streamed)' if data.get('stream') else ''}, "
              f"{'zero' if data.get('zero_based') else 'one'}-based indices, "
              f"{data.get('n_features')} features, {data.get('dtype')}")
    return 0


# ---- demo --------------------------------------------------------------------------------

def _demo(args, parser):
    from sklearn.linear_model import Ridge
    from sklearn.metrics import mean_squared_error
    from sklearn.model_selection import train_test_split

    from . import FactorizationMachineRegressor, __version__
    from .datasets import make_recommender

    print(f"polylite {__version__}: factorization machine on a synthetic recommender")
    X, y = make_recommender(n_samples=args.samples, n_users=args.users,
                            n_items=args.items, degree=args.degree,
                            random_state=args.seed)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.2,
                                                        random_state=args.seed)
    print(f"data: {X.shape[0]} rows ({X_train.shape[0]} train, {X_test.shape[0]} test), "
          f"{X.shape[1]} columns ({args.users} users, {args.items} items, 3 numeric), "
          f"{X.nnz} nonzeros; planted degree {args.degree}")

    start = time.perf_counter()
    linear = Ridge(alpha=1.0).fit(X_train, y_train)
    linear_time = time.perf_counter() - start
    rmse_linear = mean_squared_error(y_test, linear.predict(X_test)) ** 0.5

    # Early stopping on a held-out 10% of the training rows keeps the best epoch.
    fm = FactorizationMachineRegressor(degree=args.degree, n_components=args.components,
                                       beta=args.beta, max_iter=args.epochs, tol=1e-4,
                                       init_scale=0.1, early_stopping=True,
                                       n_iter_no_change=3, random_state=args.seed,
                                       verbose=1)
    start = time.perf_counter()
    fm.fit(X_train, y_train)
    fm_time = time.perf_counter() - start
    rmse_fm = mean_squared_error(y_test, fm.predict(X_test)) ** 0.5

    print()
    print(f"{'model':<34}{'test RMSE':>10}{'fit time':>11}")
    print(f"{'linear baseline (sklearn Ridge)':<34}{rmse_linear:>10.4f}{linear_time:>10.2f}s")
    print(f"{f'FM degree {args.degree}, k={args.components} ({fm.n_iter_} epochs)':<34}"
          f"{rmse_fm:>10.4f}{fm_time:>10.2f}s")
    print(f"noise floor (planted noise std)   {0.1:>10.4f}")
    return 0 if rmse_fm < rmse_linear else 1


# ---- entry point -------------------------------------------------------------------------

def main(argv=None):
    """Run the ``polylite`` command.

    Parameters
    ----------
    argv : list of str or None, default=None
        The arguments after the program name (None: ``sys.argv[1:]``).

    Returns
    -------
    status : int
        0 on success, 1 when the work failed, 2 for a usage error, 130 when interrupted.
    """
    parser = _build_parser()
    args = None
    try:
        args = parser.parse_args(argv)
        return args.run(args, args.parser)
    except SystemExit as exc:  # argparse: --help, --version, usage errors
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    except (_Failure, DataFileError) as exc:
        print(f"polylite {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # stdout closed early (| head): stop quietly, as cat does
        # Point stdout at /dev/null, or the interpreter's final flush fails again.
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except OSError as exc:  # writing output: a full disk, a vanished directory...
        print(f"polylite {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except MemoryError as exc:  # reading or predicting: the data or the model too large
        subject = getattr(args, "data", None) or getattr(args, "train", None) or \
            getattr(args, "model", None)
        print(f"polylite {args.command}: error: not enough memory for {subject}: it "
              f"{_allocation_text(exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("polylite: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
