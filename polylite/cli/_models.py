"""The estimators the command line fits, the models it loads, and their scores."""
import math
from typing import NamedTuple

import numpy as np

from ._common import Failure

# ---- the estimators the command line fits ------------------------------------------------
#
# A family reaches the command line by an entry here and in _parser.ESTIMATORS, and
# options for any parameters of its own in _parser.PARAMETERS.


class Family(NamedTuple):
    classes: dict        # task -> estimator class
    unit: str            # what one step of the fit's progress is
    validation: tuple    # the names of fit's validation data arguments


def estimators():
    """--estimator's families, by name."""
    from ..bayes import (BayesianFactorizationMachineClassifier,
                         BayesianFactorizationMachineOrdinalRegressor,
                         BayesianFactorizationMachineRegressor,
                         VariationalFactorizationMachineClassifier,
                         VariationalFactorizationMachineRegressor)
    from ..polynomial import (FactorizationMachineClassifier, FactorizationMachineRegressor,
                              FieldAwareFactorizationMachineClassifier,
                              FieldAwareFactorizationMachineRegressor,
                              PolynomialNetworkClassifier, PolynomialNetworkRegressor)
    from ..ranking import FactorizationMachineRanker
    epochs = dict(unit="epoch", validation=("X_val", "y_val"))
    return {
        # The ranker's validation data are positives only: fit gets X_val, no y_val.
        "fm": Family({"regression": FactorizationMachineRegressor,
                      "classification": FactorizationMachineClassifier,
                      "ranking": FactorizationMachineRanker}, **epochs),
        "pn": Family({"regression": PolynomialNetworkRegressor,
                      "classification": PolynomialNetworkClassifier}, **epochs),
        "bayes-fm": Family({"regression": BayesianFactorizationMachineRegressor,
                            "classification": BayesianFactorizationMachineClassifier,
                            "ordinal": BayesianFactorizationMachineOrdinalRegressor},
                           unit="sweep", validation=("X_eval", "y_eval")),
        # (its validation score is reported after the fit)
        "vb-fm": Family({"regression": VariationalFactorizationMachineRegressor,
                         "classification": VariationalFactorizationMachineClassifier},
                        unit="iteration", validation=()),
        # The fields of its columns come from a libffm file (fit sets them).
        "ffm": Family({"regression": FieldAwareFactorizationMachineRegressor,
                       "classification": FieldAwareFactorizationMachineClassifier},
                      **epochs),
    }


def is_field_aware(estimator):
    """Whether ``estimator`` is a field-aware factorization machine."""
    return hasattr(estimator, "n_fields_") or type(estimator).__name__.startswith(
        "FieldAware")


def is_ranker(estimator):
    from ..ranking import FactorizationMachineRanker
    return isinstance(estimator, FactorizationMachineRanker)


# ---- saved models ------------------------------------------------------------------------

def load_model(path, command=None):
    """The model in ``path`` and its file's header; for ``command`` (predict, evaluate),
    only a kind of model ``polylite fit`` writes."""
    import polylite
    from .._io import ModelFileError, load_with_header
    polylite._import_model_modules()  # the registry names every kind of model
    try:
        estimator, header = load_with_header(path)
    except ModelFileError as exc:
        raise Failure(str(exc)) from None
    supported = [cls for family in estimators().values() for cls in family.classes.values()]
    if command is not None and type(estimator) not in supported:
        raise Failure(f"{path} holds {kind_text(estimator)}, which polylite {command} "
                      f"does not take (it takes the factorization machines, field-aware "
                      f"ones, polynomial networks and rankers polylite fit writes); use "
                      f"it from Python (polylite.load)")
    return estimator, header


def kind_name(estimator):
    """'MultiOutputPolynomialRegressor', 'Pipeline of FieldEncoder, ...'."""
    name = type(estimator).__name__
    steps = getattr(estimator, "steps", None)
    if isinstance(steps, list):
        name += " of " + ", ".join(type(step).__name__ for _, step in steps)
    return name


def kind_text(estimator):
    name = kind_name(estimator)
    return f"{'an' if name[0] in 'AEIOU' else 'a'} {name}"


def model_dtype(estimator):
    """The float type of a fitted model's factors (its data are read in it)."""
    factors = estimator.P_ if hasattr(estimator, "P_") else estimator.P_samples_
    return factors.dtype


def recorded_data(header):
    """How ``polylite fit`` read the model's training data (empty for a model saved from
    Python)."""
    metadata = header.get("metadata")
    data = metadata.get("data") if isinstance(metadata, dict) else None
    return data if isinstance(data, dict) else {}


def recorded_threshold(header, path):
    """The --binary-threshold the model in ``path`` was fitted with, or None."""
    threshold = recorded_data(header).get("binary_threshold")
    if threshold is not None and not (isinstance(threshold, (int, float)) and
                                      not isinstance(threshold, bool) and
                                      math.isfinite(threshold)):
        raise Failure(f"{path}: the model file records a binary threshold that is not a "
                      f"number: {threshold!r}")
    return threshold


def binary_labels(threshold, y):
    """libFM's binary task: labels > ``threshold`` are the positive class 1, the others
    the negative class -1."""
    return np.where(y > threshold, 1, -1)


# ---- scores ------------------------------------------------------------------------------

def predictions(estimator, X):
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


def metrics(estimator, y, predicted, scores, proba):
    """RMSE, MAE and R^2 of a regressor; accuracy, log-loss and AUC of a classifier (the
    last two when the labels allow them)."""
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


def check_ranking_labels(path, y):
    """A ranker's labels are 1 (a positive) and 0 (another interaction)."""
    from .._svmlight import DataFileError
    other = np.setdiff1d(np.unique(y), (0, 1))
    if other.size:
        shown = ", ".join(f"{value:g}" for value in other[:5])
        raise DataFileError(f"{path}: the labels of a ranker's data are 1 (a positive) "
                            f"and 0 (another interaction of the user with the item), "
                            f"found {shown}{', ...' if other.size > 5 else ''}")
