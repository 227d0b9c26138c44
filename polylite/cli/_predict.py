"""``polylite predict``: one prediction per line of DATA."""
import time

import numpy as np

from .. import _svmlight
from ._common import note
from ._data import iter_data, output_file, relation_inputs, warn_dropped
from ._models import is_ranker, load_model


def run(args, parser):
    """Write the predictions of MODEL for DATA (exit status 0)."""
    estimator, header = load_model(args.model, "predict", from_file=not args.relation)
    _check_proba(args, estimator, parser)
    stats = _svmlight.ReadStats()
    start = time.perf_counter()
    inputs = [("the model", args.model), ("the data", args.data)]
    with output_file(args.output, inputs + relation_inputs(args, ("test",))) as out:
        for X, _ in iter_data(args, header, estimator, stats):
            if X.shape[0] == 0:
                continue
            if args.proba:
                proba = estimator.predict_proba(X)
                out.write(_format_rows(proba[:, 1] if proba.shape[1] == 2 else proba))
            else:
                out.write(_format_rows(estimator.predict(X)))
    warn_dropped(args, stats, estimator)
    where = "stdout" if args.output == "-" else args.output
    note(args, f"polylite predict: {stats.rows} rows of {args.data} -> {where} in "
               f"{time.perf_counter() - start:.2f} s")
    return 0


def _check_proba(args, estimator, parser):
    if not args.proba:
        return
    if not estimator._is_classifier:
        what = "scores" if is_ranker(estimator) else "values"
        parser.error(f"argument --proba: {args.model} holds a {type(estimator).__name__}, "
                     f"which predicts {what}, not probabilities")
    if not hasattr(estimator, "predict_proba"):
        parser.error(f"argument --proba: {args.model} was fitted with "
                     f"loss={estimator.loss!r}, which gives no probabilities (fit with "
                     f"--loss logistic)")


def _format_rows(values):
    """One line per row: the value, or the row's values separated by spaces."""
    text = np.asarray(values).astype(str)
    if text.ndim == 1:
        return "\n".join(text) + "\n"
    return "\n".join(" ".join(row) for row in text) + "\n"
