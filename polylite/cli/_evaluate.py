"""``polylite evaluate``: a saved model's scores on labelled data."""
import json
import warnings

import numpy as np

from .. import _svmlight
from ._common import Failure, note
from ._data import iter_data, stack_rows, warn_dropped
from ._models import (binary_labels, check_ranking_labels, is_ranker, load_model,
                      metrics, predictions, recorded_threshold)


def run(args, parser):
    """Print the scores of MODEL on DATA (exit status 0)."""
    estimator, header = load_model(args.model, "evaluate", from_file=not args.relation)
    stats = _svmlight.ReadStats()
    if is_ranker(estimator):
        result = _ranking_metrics(args, header, estimator, stats)
        warn_dropped(args, stats, estimator)
        _print_metrics(args, result)
        return 0
    # A binary model of libFM's task: DATA's labels read as its training labels were.
    threshold = recorded_threshold(header, args.model)
    parts = []
    for X, y in iter_data(args, header, estimator, stats):
        if X.shape[0]:
            if threshold is not None:
                y = binary_labels(threshold, y)
            y = y.astype(estimator.classes_.dtype) if estimator._is_classifier else y
            parts.append((y,) + predictions(estimator, X))
    y, predicted, scores, proba = (
        np.concatenate([p[i] for p in parts]) if parts[0][i] is not None else None
        for i in range(4))
    result = {"rows": int(y.shape[0])}
    result.update(metrics(estimator, y, predicted, scores, proba))
    warn_dropped(args, stats, estimator)
    unknown = (np.setdiff1d(np.unique(y), estimator.classes_)
               if estimator._is_classifier else [])
    if len(unknown):
        note(args, f"polylite evaluate: warning: {args.data} has labels the model does "
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
    blocks = [(X, y) for X, y in iter_data(args, header, estimator, stats) if X.shape[0]]
    X = stack_rows([X for X, _ in blocks])
    y = np.concatenate([y for _, y in blocks])
    check_ranking_labels(args.data, y)
    if not np.any(y == 1):
        raise Failure(f"{args.data}: no positive (label 1) to score")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UserWarning)
        try:
            auc = estimator.score(X, y)
        except ValueError as exc:
            raise Failure(f"{args.data}: {exc}") from None
    for warning in caught:  # positives of users who interacted with every item
        note(args, f"polylite evaluate: warning: {warning.message}")
    return {"rows": int(y.shape[0]), "positives": int(np.sum(y == 1)), "auc": float(auc)}
