"""``polylite fit``: fit an estimator on an svmlight/libFM file and save it."""
import copy
import os
import time
import warnings
from typing import NamedTuple

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from .. import _libffm, _svmlight
from .._svmlight import DataFileError
from ._common import Failure, allocation_text, note
from ._data import (check_output, relation_files, relation_inputs, relation_widths,
                    stack_rows, with_relations)
from ._models import (binary_labels, check_ranking_labels, estimators, is_field_aware,
                      metrics, predictions)
from ._parser import PARAMETERS, data_format, option
from ._progress import Progress

# --task ranking --validation: the validation AUC after each epoch scores at most this
# many (positive, item) pairs per training positive (a sample of the validation
# positives, each against 50 sampled candidate items).  A WARP epoch costs about 8 such
# scores per positive (MovieLens 100K, 10 components), so the validation costs about an
# eighth of the training.
RANKING_VALIDATION_SCORES_PER_POSITIVE = 1


def run(args, parser):
    """Fit the estimator ``args`` choose on TRAIN and save it (exit status 0)."""
    from .._engine import solvers
    if args.task is None:  # libffm's model is a classifier's
        args.task = ("classification" if args.estimator in ("ffm", "fwfm")
                     else "regression")
    family = estimators()[args.estimator]
    if args.task not in family.classes:
        fitting = [name for name, other in estimators().items() if args.task in other.classes]
        parser.error(f"argument --task: {args.task} is fitted by --estimator "
                     f"{' or '.join(fitting)}, not by --estimator {args.estimator}")
    cls = family.classes[args.task]
    params = _chosen_parameters(args, parser, cls)
    if args.binary_threshold is not None and args.task != "classification":
        parser.error("argument --binary-threshold: only with --task classification")
    if args.task == "ranking":
        _check_ranking_options(args, parser, params)
    else:
        for name, given in (("--item-columns", args.item_columns),
                            ("--rated-items", args.rated_items)):
            if given is not None:
                parser.error(f"argument {name}: only with --task ranking")
    if args.stream:
        if not hasattr(cls, "partial_fit"):
            parser.error(f"argument --stream: trains by partial_fit, which "
                         f"{cls.__name__} (--estimator {args.estimator}) does not have")
        params.setdefault("solver", "adagrad")
        offered = next(allowed for name, _, allowed, _, _ in PARAMETERS if name == "solver")
        streaming = [s for s in solvers.STOCHASTIC if s in offered]
        if params["solver"] not in streaming:
            parser.error(f"argument --solver: --stream trains by partial_fit, which needs "
                         f"one of {streaming}, got {params['solver']!r}")
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
    fmt = _check_format(args, parser)
    if args.meta and args.estimator not in ("bayes-fm", "vb-fm"):
        parser.error(f"argument --meta: feature groups are the priors of --estimator "
                     f"bayes-fm or vb-fm, not of {args.estimator}")
    inputs = [("the training data", args.train), ("the validation data", args.validation),
              ("the groups file", args.meta)] + relation_inputs(args, ("train", "test"))
    check_output(args.model, "the model", inputs, in_place=False)
    dtype = np.dtype(args.dtype)
    estimator = cls(**params)
    progress = Progress(args)
    start = time.perf_counter()
    shown = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        # The estimators' UserWarnings (ConvergenceWarning among them) are about the data
        # or the parameters: a one-line note as they happen, not a Python warning.
        if issubclass(category, UserWarning):
            progress.close()
            note(args, f"polylite fit: warning: {message}")
        else:
            shown(message, category, filename, lineno, file, line)

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("always", ConvergenceWarning)
            warnings.showwarning = show
            if args.stream:
                fitted = _fit_stream(args, estimator, dtype, progress, fmt)
            elif fmt == "libffm":
                fitted = _fit_libffm(args, family, estimator, dtype, progress)
            else:
                fitted = _fit_in_memory(args, family, estimator, dtype, progress)
    finally:
        progress.close()
    seconds = time.perf_counter() - start
    zero_based, n_features = fitted.zero_based, fitted.n_features
    metadata = {"written_by": "polylite fit",
                "data": {"train": os.path.abspath(args.train),
                         "validation": (os.path.abspath(args.validation)
                                        if args.validation else None),
                         "zero_based": bool(zero_based), "n_features": int(n_features),
                         "dtype": dtype.name, "stream": bool(args.stream),
                         "relation": [os.path.abspath(name) for name in
                                      args.relation or []],
                         "relation_columns": relation_widths(args, dtype),
                         "binary_threshold": args.binary_threshold,
                         "format": fmt}}
    from .._io import save_model
    try:
        # Through a symlink: the file it points to is replaced, not the link.
        save_model(estimator, os.path.realpath(args.model), metadata=metadata)
    except OSError as exc:
        raise Failure(f"cannot write the model {args.model!r}: {exc}") from None
    relations = "".join(f" + {name} ({width} columns)" for name, width in
                        zip(args.relation or [], relation_widths(args, dtype)))
    read_as = (_libffm_text(estimator) if fmt == "libffm" else
               _index_base_text(zero_based, args.zero_based is None))
    note(args, f"polylite fit: {_describe(estimator)} on {args.train}: {fitted.rows} "
               f"rows, {n_features} features{relations}, {read_as}; "
               f"{fitted.epochs} in {seconds:.2f} s; " +
               "".join(f"{score}; " for score in fitted.scores) + f"saved {args.model}")
    return 0


def _check_format(args, parser):
    """The format of TRAIN (and --validation: the same), and the options a libffm file
    does not go with; --estimator ffm needs one (its fields)."""
    fmt = data_format(args, args.train)
    if args.validation and data_format(args, args.validation, fmt) != fmt:
        parser.error(f"argument --validation: {args.validation} is read as "
                     f"{data_format(args, args.validation, fmt)} text, {args.train} as "
                     f"{fmt}; give files of one format (or --format)")
    if fmt != "libffm":
        if args.estimator in ("ffm", "fwfm"):
            parser.error(f"argument --estimator: {args.estimator} takes the field of each "
                         f"feature from "
                         f"a libffm file (label field:feature:value ...): name it .ffm "
                         f"or .libffm, or give --format libffm; {args.train} is read as "
                         f"{fmt}")
        return fmt
    refused = [("--relation", args.relation),
               ("--meta", args.meta), ("--item-columns", args.item_columns),
               ("--rated-items", args.rated_items),
               ("--one-based", args.zero_based is False)]
    for name, given in refused:
        if given:
            parser.error(f"argument {name}: not with a libffm file ({args.train}; its "
                         f"indices start at 0)")
    if args.task == "ranking" or args.task == "ordinal":
        parser.error(f"argument --task: {args.task} is not fitted on a libffm file")
    return fmt


def _chosen_parameters(args, parser, cls):
    """The estimator parameters given as options, checked by the estimator itself."""
    chosen = {name: getattr(args, name) for name, *_ in PARAMETERS if hasattr(args, name)}
    accepted = cls().get_params()
    for name in chosen:
        if name not in accepted:
            parser.error(f"argument {option(name)}: not a parameter of {cls.__name__} "
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
        parser.error(f"argument {option(named[0])}: {message}")
    return chosen


def _check_ranking_options(args, parser, params):
    """The options of --task ranking: where the item part is (item_columns in
    ``params``), the users' rated items (rated_items), and no --stream."""
    if args.stream:
        parser.error("argument --stream: not with --task ranking (the ranker draws "
                     "negatives among every item a user has not interacted with, which "
                     "needs all of TRAIN in memory)")
    if args.item_columns is not None:
        if args.n_features is not None and args.item_columns[1] > args.n_features:
            parser.error(f"argument --item-columns: STOP {args.item_columns[1]} is beyond "
                         f"--n-features {args.n_features}")
        params["item_columns"] = args.item_columns
    if args.rated_items is not None:
        if args.n_features is not None and args.rated_items[1] > args.n_features:
            parser.error(f"argument --rated-items: STOP {args.rated_items[1]} is beyond "
                         f"--n-features {args.n_features}")
        if params.get("loss") != "ials":
            parser.error("argument --rated-items: only with --loss ials (the whole-data "
                         "loss)")
        params["rated_items"] = args.rated_items
    if args.item_columns is None and not args.relation:
        parser.error("argument --item-columns: --task ranking needs the item part of the "
                     "rows: give --item-columns START:STOP (its columns), or --relation "
                     "USERS,ITEMS (the second relation's table)")
    if args.item_columns is None and len(args.relation) < 2:
        parser.error("argument --relation: --task ranking takes the item part from the "
                     "second relation (--relation USERS,ITEMS), or from the columns "
                     "--item-columns names")


# ---- the labels --------------------------------------------------------------------------

def _labels_for(args, y):
    """A classifier's labels: with --binary-threshold, -1 and 1; else integers when every
    label is integral (so that predictions print as 1, not 1.0)."""
    if args.task != "classification":
        return y
    if args.binary_threshold is not None:
        return binary_labels(args.binary_threshold, y)
    if np.all(y == np.round(y)):
        return y.astype(np.int64)
    return y


def _check_labels(args, labels):
    """Say what the labels of TRAIN (``labels``, its distinct ones) are fitted as: a
    regression of two values, or a classification of more than two classes, is
    probably not what a libFM user meant."""
    if args.task == "regression" and labels.size <= 2:
        note(args, "polylite fit: note: the labels take two values; for a classifier "
                   "pass --task classification")
    elif args.task == "classification" and args.binary_threshold is not None:
        positive = labels > args.binary_threshold
        if positive.all() or not positive.any():
            raise Failure(f"{args.train}: every label is "
                          f"{'above' if positive.all() else 'at or below'} "
                          f"--binary-threshold {args.binary_threshold:g} (labels "
                          f"{_values_text(labels)}): one class only")
    elif args.task == "classification" and labels.size > 2:
        note(args, f"polylite fit: note: {labels.size} classes ({_values_text(labels)}): "
                   f"fitting a multi-class model (one-vs-rest); --binary-threshold T fits "
                   f"two classes, labels > T against the others, as libFM's -task c does "
                   f"with T = 0")


def _values_text(values, shown=10):
    """'1, 2, 3' or '1, 2, ..., 100' (the first and last of many)."""
    texts = [f"{value:g}" for value in values]
    if len(texts) > shown:
        texts = texts[:shown - 1] + ["...", texts[-1]]
    return ", ".join(texts)


# ---- in memory ---------------------------------------------------------------------------

def _read_for_fit(args, dtype, least_features=0):
    """Training (and validation) data of a non-streamed fit, with their labels as read,
    their index base and size (at least ``least_features`` columns of the data file's
    own)."""
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
    out = [(X if zero_based else _svmlight.from_one_based(X), y) for X, y, _ in parts]
    # The data file's own columns (with relations, none when its lines hold targets only).
    n_features = max([X.shape[1] if X.nnz or not args.relation else 0 for X, _ in out] +
                     [least_features])
    if args.n_features is not None:
        if args.n_features < n_features:
            raise Failure(f"--n-features {args.n_features} is smaller than the "
                          f"{n_features} features the data uses")
        n_features = args.n_features
    out = [(_svmlight.with_columns(X, n_features, None), y) for X, y in out]
    if args.relation:
        out = [(with_relations(args, X, split, dtype, path), y)
               for (X, y), split, path in zip(out, ("train", "test"),
                                              (args.train, args.validation))]
    return out, zero_based, n_features


def _feature_groups(args, n_main, dtype):
    """libFM's groups of every column: --meta's for the data file's own (one group
    without it), then each relation's (R.groups, or one), numbered after them."""
    from .._libfm import read_groups
    groups = [read_groups(args.meta, n_main) if args.meta
              else np.zeros(n_main, np.int64)]
    for relation_groups in relation_files(args, "train", dtype)[1] if args.relation \
            else []:
        start = int(max((g.max() + 1 for g in groups if g.size), default=0))
        groups.append(relation_groups + start)
    return np.concatenate(groups)


class _Fitted(NamedTuple):
    """What a fit tells the summary line and the model file's metadata."""
    rows: int
    zero_based: bool
    n_features: int
    epochs: str         # "12 epochs", "3 passes"...
    scores: list        # "training rmse 0.91", ...


def _fit_in_memory(args, family, estimator, dtype, progress):
    ranking = args.task == "ranking"
    # The item columns are the model's even when TRAIN lacks the last items.
    least = args.item_columns[1] if ranking and args.item_columns and not args.relation \
        else 0
    data, zero_based, n_features = _read_for_fit(args, dtype, least)
    _check_labels(args, np.unique(data[0][1]))
    data = [(X, _labels_for(args, y)) for X, y in data]
    X, y = data[0]
    if ranking:
        check_ranking_labels(args.train, y)
        fit_args = _ranking_fit_args(args, data[1] if args.validation else None)
        estimator._validation_scores_per_positive = RANKING_VALIDATION_SCORES_PER_POSITIVE
    else:
        fit_args = dict(zip(family.validation, data[1])) if args.validation else {}
    if args.estimator in ("bayes-fm", "vb-fm") and (args.meta or args.relation):
        fit_args["feature_groups"] = _feature_groups(args, n_features, dtype)
    try:
        with progress.watching(family, estimator):
            estimator.fit(X, y, **fit_args)
    except (ValueError, FloatingPointError) as exc:
        raise Failure(str(exc)) from None
    except MemoryError as exc:
        raise Failure(_memory_text(args, estimator, X.shape[1], exc)) from None
    if ranking and args.validation:
        # The kept model's score as the epochs measured it (the best epoch's), on the
        # sampled validation positives: scoring them all again would cost more than the
        # epochs' validation together.
        best, scored, total, drawn = estimator._validation_summary
        scores = [f"validation AUC {best:.4f} (the kept epoch's, on {scored} of the "
                  f"{total} validation positives, each against {drawn} items of the "
                  f"catalogue)"]
    elif ranking:  # one AUC only: each costs a score per positive and catalogue item
        scores = _auc_text(estimator, "training", X, y)
    else:
        scores = [f"training {_score_text(estimator, X, y)}"]
        if args.validation:
            scores.append(f"validation {_score_text(estimator, *data[1])}"
                          f"{_averaged_sweeps_text(estimator, family)}")
    return _Fitted(X.shape[0], zero_based, n_features,
                   _epochs_text(estimator, family.unit), scores)


def _read_libffm_for_fit(args, dtype):
    """TRAIN and --validation as libffm files: ``[(X, y), ...]`` with the same columns,
    the number of columns and the field of each (the training file's, else the
    validation file's; 0 for columns neither shows)."""
    paths = [args.train] + ([args.validation] if args.validation else [])
    read = [_libffm.read_libffm(path, dtype=dtype, chunk_bytes=args.chunk_bytes)
            for path in paths]
    n_features, fields = _libffm_fields(args, paths, [seen for _, _, seen in read])
    data = [(_svmlight.with_columns(X, n_features, None), y) for X, y, _ in read]
    return data, n_features, fields


def _libffm_fields(args, paths, seen_fields):
    """(number of columns, field of each) of libffm files ``paths`` whose reads found
    the fields ``seen_fields`` (-1: a feature the file does not show): the training
    file's, else the validation file's, 0 for columns neither shows; --n-features
    widens them."""
    n_features = max(seen.shape[0] for seen in seen_fields)
    if args.n_features is not None:
        if args.n_features < n_features:
            raise Failure(f"--n-features {args.n_features} is smaller than the "
                          f"{n_features} features the data uses")
        n_features = args.n_features
    fields = np.full(n_features, -1, np.int64)
    for seen, path in zip(seen_fields, paths):
        known = (fields[:seen.shape[0]] >= 0) & (seen >= 0)
        clash = np.flatnonzero(known & (fields[:seen.shape[0]] != seen))
        if clash.size:
            j = int(clash[0])
            raise DataFileError(f"{path}: feature {j} is in field {int(seen[j])}, but in "
                                f"field {int(fields[j])} in {args.train}; a feature "
                                f"belongs to one field")
        new = (fields[:seen.shape[0]] < 0) & (seen >= 0)
        fields[:seen.shape[0]][new] = seen[new]
    return n_features, fields.clip(0)


def _fit_libffm(args, family, estimator, dtype, progress):
    """A fit on a libffm file, held in memory; a field-aware model gets its fields."""
    data, n_features, fields = _read_libffm_for_fit(args, dtype)
    _check_labels(args, np.unique(data[0][1]))
    data = [(X, _labels_for(args, y)) for X, y in data]
    X, y = data[0]
    if is_field_aware(estimator):
        estimator.set_params(fields=fields)
    fit_args = dict(zip(family.validation, data[1])) if args.validation else {}
    try:
        with progress.watching(family, estimator):
            estimator.fit(X, y, **fit_args)
    except (ValueError, FloatingPointError) as exc:
        raise Failure(str(exc)) from None
    except MemoryError as exc:
        raise Failure(_memory_text(args, estimator, n_features, exc)) from None
    scores = [f"training {_score_text(estimator, X, y)}"]
    if args.validation:
        scores.append(f"validation {_score_text(estimator, *data[1])}")
    return _Fitted(X.shape[0], True, n_features, _epochs_text(estimator, family.unit),
                   scores)


def _ranking_fit_args(args, validation):
    """fit's X_val: the positive rows of --validation (its other rows are dropped)."""
    if not args.validation:
        return {}
    X_val, y_val = validation
    check_ranking_labels(args.validation, y_val)
    if not np.any(y_val == 1):
        raise DataFileError(f"{args.validation}: no positive (label 1) to validate on")
    return {"X_val": X_val[np.flatnonzero(y_val == 1)]}


def _memory_text(args, estimator, n_features, exc):
    """Why a fit ran out of memory: the model of ``n_features`` columns is too large."""
    columns = " and the relations' columns" if args.relation else ""
    return (f"not enough memory to fit a {type(estimator).__name__} of {n_features} "
            f"features (set by the largest feature index in {args.train}{columns}): it "
            f"{allocation_text(exc)}; a smaller --n-components or --dtype float32 needs "
            f"less, as do feature indices numbered without gaps")


# ---- the summary -------------------------------------------------------------------------

def _libffm_text(estimator):
    if is_field_aware(estimator):
        return f"{estimator.n_fields_} fields (libffm file)"
    return "libffm file (its fields unused)"


def _index_base_text(zero_based, detected):
    base = "zero-based" if zero_based else "one-based"
    return f"{base} indices ({'detected' if detected else 'as given'})"


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


def _score_text(estimator, X, y):
    """'rmse 0.9123' or 'accuracy 0.8750', the score the progress lines report."""
    scores = metrics(estimator, y, *predictions(estimator, X))
    name = "rmse" if "rmse" in scores else "accuracy"
    if is_field_aware(estimator) and "log_loss" in scores:  # libffm's score
        return f"log-loss {scores['log_loss']:.4f}, {name} {scores[name]:.4f}"
    return f"{name} {scores[name]:.4f}"


def _averaged_sweeps_text(estimator, family):
    """What a Gibbs sampler's last progress line reported, when it is another figure
    than the saved model's: the prediction averaged over every sweep after the burn-in,
    of which the model keeps n_kept samples."""
    if family.unit != "sweep":
        return ""
    after = estimator.n_iter - estimator._burn_in()
    kept = after if estimator.n_kept is None else min(estimator.n_kept, after)
    reported = vars(estimator).get("eval_rmse_", vars(estimator).get("eval_accuracy_"))
    if kept == after or reported is None:
        return ""
    return (f" (the saved model: {kept} kept samples; the progress's {reported[-1]:.4f} "
            f"averages all {after} sweeps after the burn-in)")


def _auc_text(estimator, name, X, y):
    """``name`` AUC of the positives X (by ``score``), or nothing if it cannot be
    measured (every user of X has interacted with every item of X)."""
    try:
        return [f"{name} AUC {estimator.score(X, y):.4f}"]
    except ValueError:
        return []


# ---- streamed ----------------------------------------------------------------------------

class _Stream(NamedTuple):
    """What a streamed fit reads: TRAIN's blocks, pass after pass (``blocks(stats)``
    yields ``(X, y, amount)``, ``amount`` the progress of the block, and counts its
    rows in the ReadStats ``stats``), the progress's total of a pass and its unit, the
    validation rows (or None), the distinct labels of TRAIN, the columns and how TRAIN
    numbers them."""
    blocks: object
    total: object
    unit: str
    validation: object
    labels: object
    n_features: int
    zero_based: bool


def _fit_stream(args, estimator, dtype, progress, fmt="svmlight"):
    """Passes of partial_fit over TRAIN, one block at a time; early stopping on the
    validation metric (or, without --validation, on the progressive metric: each block
    scored before it is trained on), keeping the best model."""
    classify = args.task == "classification"
    # A chunk that diverges ends the command: partial_fit need keep nothing to undo it.
    estimator._undo_diverged_chunk = False
    _return_freed_blocks()
    stream = (_libffm_stream(args, estimator, dtype) if fmt == "libffm"
              else _svmlight_stream(args, dtype, classify))
    validation, n_features, zero_based = (stream.validation, stream.n_features,
                                          stream.zero_based)
    if stream.labels is not None:
        _check_labels(args, stream.labels)
    fit_kwargs = {}
    if classify:
        fit_kwargs["classes"] = np.unique(_labels_for(args, stream.labels))
    max_iter, tol, patience = (estimator._max_iter, estimator.tol,
                               estimator.n_iter_no_change)
    best, best_model, stalled, best_values = np.inf, None, 0, {}
    best_is_current = False
    start = time.perf_counter()
    for passes in range(1, max_iter + 1):
        pass_stats = _svmlight.ReadStats()
        scored, total = 0, 0.0
        for X, y, amount in stream.blocks(pass_stats):
            if X.shape[0] == 0:  # a block of comments and empty lines
                continue
            y = _labels_for(args, y)
            if estimator.__sklearn_is_fitted__():  # score the block before learning it
                total += _metric_sum(estimator, X, y)
                scored += X.shape[0]
            try:
                estimator.partial_fit(X, y, **fit_kwargs)
            except (ValueError, FloatingPointError) as exc:
                raise Failure(str(exc)) from None
            except MemoryError as exc:
                raise Failure(_memory_text(args, estimator, n_features, exc)) from None
            progress.bytes_read(("pass", passes), stream.total, f"pass {passes}/{max_iter}",
                                amount, unit=stream.unit)
        if pass_stats.rows == 0:  # (not scanned first: a regression of known width)
            raise DataFileError(f"{args.train}: no data (every line is empty or a "
                                f"comment)")
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
        if not best_values or watched < best - (tol or 0.0) * abs(best):
            best, stalled, best_values, best_is_current = min(best, watched), 0, values, True
            # The best pass's model, in case a later pass is worse (after the last pass
            # the estimator is it); without the solver's statistics, which the saved
            # model does not hold.
            best_model = ({name: copy.deepcopy(value) for name, value in
                           vars(estimator).items() if name != "_stochastic_states"}
                          if passes < max_iter else None)
        else:
            stalled, best_is_current = stalled + 1, False
            if stalled >= patience:
                break
    if best_model is not None and not best_is_current:
        vars(estimator).update(best_model)
    scores = [f"{name} {value:.4f}" for name, value in best_values.items()
              if np.isfinite(value)]
    return _Fitted(pass_stats.rows, zero_based, n_features,
                   f"{passes} passes of {pass_stats.rows} rows (streamed)", scores)


def _return_freed_blocks():
    """Have the C allocator (glibc's) hand blocks of 1 MiB and more back to the system
    when they are freed: each block of a streamed file is parsed into arrays of tens of
    MiB, which glibc would otherwise keep for reuse once its threshold has risen, so that
    the process's memory grows with the pass (0.38 GiB more at the peak of a pass of 10^5
    click-log rows).  Elsewhere (another C library) nothing changes."""
    import ctypes
    import ctypes.util
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):
        return
    M_MMAP_THRESHOLD = -3
    mallopt(ctypes.c_int(M_MMAP_THRESHOLD), ctypes.c_int(1 << 20))


def _libffm_stream(args, estimator, dtype):
    """A libffm TRAIN streamed: a first pass finds its columns, the field of each (a
    field-aware or field-weighted model gets them) and its labels; --validation is read
    whole.  Each pass then holds one block of rows at a time."""
    scan = _libffm.scan_libffm(args.train, chunk_bytes=args.chunk_bytes)
    paths, seen = [args.train], [scan.fields]
    validation = None
    if args.validation:
        X_val, y_val, val_fields = _libffm.read_libffm(args.validation, dtype=dtype,
                                                       chunk_bytes=args.chunk_bytes)
        paths.append(args.validation)
        seen.append(val_fields)
    n_features, fields = _libffm_fields(args, paths, seen)
    if args.validation:
        validation = (_svmlight.with_columns(X_val, n_features, None),
                      _labels_for(args, y_val))
    if is_field_aware(estimator):
        estimator.set_params(fields=fields)

    def blocks(stats):
        for X, y, _ in _libffm.iter_libffm(args.train, n_features, dtype=dtype,
                                           chunk_bytes=args.chunk_bytes):
            stats.add(X, y, 0, False)
            yield X, y, X.shape[0]

    return _Stream(blocks, scan.n_rows, "rows", validation, scan.labels, n_features, True)


def _svmlight_stream(args, dtype, classify):
    """An svmlight TRAIN streamed: a first pass (when the labels, the index base or the
    width are not given) finds them; --validation is read whole."""
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
                      _labels_for(args, y_val))

    def blocks(pass_stats):
        read = 0
        for X, y in _svmlight.iter_file(args.train, zero_based=zero_based,
                                        n_features=n_features, dtype=dtype,
                                        chunk_bytes=args.chunk_bytes, stats=pass_stats):
            yield X, y, pass_stats.text_bytes - read
            read = pass_stats.text_bytes

    return _Stream(blocks, stats.text_bytes if stats else None, "B", validation,
                   stats.labels if stats is not None else None, n_features, zero_based)


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
