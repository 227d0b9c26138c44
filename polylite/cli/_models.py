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
                              FieldWeightedFactorizationMachineClassifier,
                              FieldWeightedFactorizationMachineRegressor,
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
        "fwfm": Family({"regression": FieldWeightedFactorizationMachineRegressor,
                        "classification": FieldWeightedFactorizationMachineClassifier},
                       **epochs),
    }


def is_field_aware(estimator):
    """Whether ``estimator`` is a field-aware or field-weighted factorization machine
    (a model of fields, which a libffm file gives)."""
    return hasattr(estimator, "n_fields_") or type(estimator).__name__.startswith(
        ("FieldAware", "FieldWeighted"))


def is_ranker(estimator):
    return getattr(estimator, "_is_ranker", False)


# ---- saved models ------------------------------------------------------------------------

def load_model(path, command=None, from_file=False):
    """The model in ``path`` and its file's header; for ``command`` (predict, evaluate),
    only a kind of model ``polylite fit`` writes.  ``from_file``: a model of the kinds
    :class:`FileModel` knows is returned as one (its predictions computed from the
    file's arrays, without importing scikit-learn or the estimators), when the file
    holds one whose every array is as the estimator would check it; any other model, or
    a file that is not so, is loaded (and its errors reported) by
    :func:`polylite.load`."""
    if from_file:
        from .._io import ModelFileError, read_archive
        try:
            header, arrays = read_archive(path)
        except ModelFileError as exc:
            raise Failure(str(exc)) from None
        model = FileModel.from_file(header, arrays)
        if model is not None:
            return model, header
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


def _fm_structure(params):
    return _outputs().fm_structure(params["degree"], params["lower_degrees"],
                                   params["kernel"])


def _pn_structure(params):
    return _outputs().pn_structure(params["degree"], params["lower_degrees"])


class _Kind(NamedTuple):
    """What a model file's class says of its model, as the estimator class says it."""
    structure: object   # the (kernel, degrees, dummy rows) of the parameters
    has_lam: bool       # output weights (polynomial networks)
    relational: bool    # takes relational rows
    sampled: bool       # keeps samples (Bayesian)
    classifier: bool    # one-vs-rest outputs of classes


class FileModel:
    """A factorization machine or polynomial network (regressor or classifier), or a
    Bayesian factorization machine regressor, as its model file holds it: the command
    line's predictions of such a file, the same as the estimator's (the same
    parameters through the same functions of :mod:`polylite._engine.outputs`), without
    building the estimator (so without importing scikit-learn)."""

    _is_classifier = False

    _KINDS = {
        "FactorizationMachineRegressor": _Kind(_fm_structure, False, True, False, False),
        "PolynomialNetworkRegressor": _Kind(_pn_structure, True, False, False, False),
        "BayesianFactorizationMachineRegressor": _Kind(_fm_structure, False, True, True,
                                                       False),
        "FactorizationMachineClassifier": _Kind(_fm_structure, False, True, False, True),
        "PolynomialNetworkClassifier": _Kind(_pn_structure, True, False, False, True),
    }

    @classmethod
    def from_file(cls, header, arrays):
        """The model of a model file's ``header`` and ``arrays``, or None if the file
        holds another kind of model or anything :func:`polylite.load` would refuse in
        what the predictions use (``load`` then says what)."""
        from .._engine.codes import KERNELS
        kind = cls._KINDS.get(header.get("class"))
        params = header.get("params")
        attributes = header.get("attributes")
        if kind is None or not isinstance(params, dict) or not isinstance(attributes,
                                                                          dict):
            return None
        d, k = attributes.get("n_features_in_"), params.get("n_components")
        n_jobs = params.get("n_jobs")
        try:
            kernel, degrees, n_dummy = kind.structure(params)
        except (KeyError, TypeError, ValueError):
            return None
        if not (_count(d) and _count(k) and k >= 1 and kernel in KERNELS
                and all(_count(m) for m in degrees) and _count(n_dummy)
                and isinstance(params.get("fit_linear"), bool)
                and (n_jobs is None or (isinstance(n_jobs, int) and
                                        not isinstance(n_jobs, bool) and n_jobs != 0))
                and (kernel == "all-subsets" or min(degrees) >= 2)):
            return None
        arrays = dict(arrays)
        classes = _classes(arrays, attributes) if kind.classifier else None
        if kind.classifier and (classes is None or params.get("loss") not in
                                ("logistic", "squared_hinge")):
            return None
        n_outputs = 1 if classes is None or classes.shape[0] == 2 else classes.shape[0]
        shape = (n_outputs, d, k, degrees, n_dummy)
        read = _samples if kind.sampled else _outputs_of
        parameters = read(arrays, attributes, shape, kind.has_lam)
        if parameters is None:
            return None
        base = (cls if classes is None else FileClassifier if params["loss"] != "logistic"
                else FileLogisticClassifier)
        # (named as the estimator class, which the messages name)
        model = type(header["class"], (base,), {})()
        model.n_features_in_ = d
        model._takes_relational = kind.relational
        model._predict_args = dict(kernel=kernel, degrees=degrees,
                                   fit_linear=params["fit_linear"], has_lam=kind.has_lam,
                                   n_jobs=n_jobs)
        model._parameters = parameters
        model.P_ = parameters["P"]  # (its float type is the data's)
        if classes is not None:
            model.classes_, model.loss = classes, params["loss"]
        return model

    def _scores(self, X):
        """The outputs (n_rows, n_outputs) on the CSR rows X, every one finite."""
        from .. import kernels
        args, parameters = self._predict_args, self._parameters
        n_outputs = parameters["P"].shape[0]
        out = np.empty((X.shape[0], n_outputs), dtype=parameters["P"].dtype)
        for o in range(n_outputs):
            output = _OneOutput(**{"lam": None, **{name: a[o] for name, a
                                                   in parameters.items()}})
            out[:, o] = _outputs().polynomial_output(
                X, output, args["kernel"], args["degrees"], fit_linear=args["fit_linear"],
                has_lam=args["has_lam"], n_jobs=args["n_jobs"])
        return kernels.check_finite_predictions(out, self, "outputs")

    def predict(self, X):
        """The values of the CSR rows X (of the model's width and float type)."""
        from .. import kernels
        args, parameters = self._predict_args, self._parameters
        if parameters["P"].ndim == 5:  # the mean over a Bayesian model's kept samples
            outputs = _outputs().sample_outputs(X, parameters, args["kernel"],
                                                args["degrees"], n_jobs=args["n_jobs"])
            kernels.check_finite_predictions(np.moveaxis(outputs, 2, 0), self,
                                             "kept samples' outputs",
                                             dtype=parameters["P"].dtype)
            return _outputs().posterior_mean(outputs[0], self)
        return self._scores(X)[:, 0]


class FileClassifier(FileModel):
    """A one-vs-rest factorization machine or polynomial network classifier from its
    model file (see :class:`FileModel`)."""

    _is_classifier = True

    def decision_function(self, X):
        """The scores: (n_rows,) for two classes, else (n_rows, n_classes)."""
        scores = self._scores(X)
        return scores[:, 0] if scores.shape[1] == 1 else scores

    def predict(self, X):
        """The labels of the rows (elements of ``classes_``)."""
        return _outputs().class_labels(self.classes_, self._scores(X))


class FileLogisticClassifier(FileClassifier):
    """A classifier of the logistic loss from its model file: it has probabilities."""

    def predict_proba(self, X):
        """Class probabilities (n_rows, n_classes), in the order of ``classes_``."""
        return np.exp(_outputs().logistic_log_proba(self._scores(X)))


def _classes(arrays, attributes):
    """The classes of a classifier's file (as polylite.load restores them), or None."""
    from .._io import ModelFileError, _check_classes
    classes = arrays.pop("classes", None)
    kind = attributes.get("classes_dtype")
    if classes is None:
        return None
    try:
        _check_classes(classes, kind)
        return classes.astype(kind if kind is not None else classes.dtype.str)
    except (ModelFileError, TypeError, ValueError):
        return None


def _outputs_of(arrays, attributes, shape, has_lam):
    """The parameters of a maximum-likelihood model's file (with their output axis), or
    None."""
    from .._io import ModelFileError, check_float_arrays
    n_outputs, d, k, degrees, n_dummy = shape
    names = {"intercept", "w", "P", "gamma", "n_iter"} | ({"lam"} if has_lam else set())
    expected = {"intercept": (n_outputs, 1), "w": (n_outputs, d),
                "P": (n_outputs, len(degrees), d, k), "gamma": (n_outputs, n_dummy, k)}
    if has_lam:
        expected["lam"] = (n_outputs, k)
    P = arrays.get("P")
    if set(arrays) - {"feature_names"} != names or P is None:
        return None
    try:
        check_float_arrays(arrays, expected, P.dtype)
    except ModelFileError:
        return None
    return {name: arrays[name] for name in expected}


def _samples(arrays, attributes, shape, has_lam):
    """The kept samples of a Bayesian regressor's file (with their output axis, in the
    float type the estimator restores them in), or None."""
    from .._io import ModelFileError, check_float_arrays
    _, d, k, degrees, n_dummy = shape
    names = ("intercept", "w", "P", "gamma")
    stored = {name: arrays.get(f"{name}_samples") for name in names}
    P = stored["P"]
    if (set(arrays) - {"feature_names", "alpha"}
            != {f"{name}_samples" for name in names} | {"feature_groups"}
            or P is None or P.ndim != 5 or P.shape[0] != 1 or P.shape[1] < 1):
        return None
    n_kept = P.shape[1]
    samples_dtype = attributes.get("samples_dtype")
    if samples_dtype is not None:  # compact samples, restored in float64
        if samples_dtype != "float64" or P.dtype != np.float32:
            return None
    try:
        check_float_arrays(stored, {
            "intercept": (1, n_kept), "w": (1, n_kept, d),
            "P": (1, n_kept, len(degrees), d, k), "gamma": (1, n_kept, n_dummy, k)},
            P.dtype)
    except ModelFileError:
        return None
    if samples_dtype is not None:
        stored = {name: a.astype(np.float64) for name, a in stored.items()}
    return stored


class _OneOutput(NamedTuple):
    intercept: np.ndarray
    w: np.ndarray
    P: np.ndarray
    gamma: np.ndarray
    lam: np.ndarray


def _outputs():
    from .._engine import outputs
    return outputs


def _count(value):
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


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
    last two when the labels allow them), as scikit-learn's metrics compute them (in
    NumPy: no scikit-learn to import for them)."""
    if not estimator._is_classifier:
        return _regression_metrics(np.asarray(y, dtype=np.float64),
                                   np.asarray(predicted, dtype=np.float64))
    classes = estimator.classes_
    out = {"accuracy": float(np.mean(y == predicted))}
    known = np.isin(y, classes)
    if proba is not None and known.all():
        out["log_loss"] = _log_loss(np.searchsorted(classes, y), proba)
    present = np.unique(y[known])
    if present.size >= 2 and known.all():
        if classes.shape[0] == 2:
            out["auc"] = _binary_auc(y == classes[1], scores)
        elif proba is not None and present.size == classes.shape[0]:
            out["auc"] = float(np.mean([_binary_auc(y == c, proba[:, j])
                                        for j, c in enumerate(classes)]))
    return out


def _log_loss(codes, proba):
    """The mean of -log p(true class), each probability clipped to [eps, 1 - eps] of its
    float type (scikit-learn's log_loss)."""
    eps = np.finfo(proba.dtype).eps
    chosen = np.clip(proba, eps, 1 - eps)[np.arange(codes.shape[0]), codes]
    return float(np.mean(-np.log(chosen)))


def _binary_auc(positive, scores):
    """The area under the ROC curve: the probability that a positive outranks a
    negative, ties counting one half (Mann-Whitney, from mid-ranks)."""
    scores = np.asarray(scores, dtype=np.float64)
    _, tie, counts = np.unique(scores, return_inverse=True, return_counts=True)
    mid_ranks = (np.cumsum(counts) - (counts - 1) / 2.0)[tie]
    n_pos = int(np.count_nonzero(positive))
    n_neg = positive.shape[0] - n_pos
    return float((mid_ranks[positive].sum() - n_pos * (n_pos + 1) / 2.0)
                 / (n_pos * n_neg))


def _regression_metrics(y, predicted):
    """RMSE, MAE and R^2 (scikit-learn's: 1 - residual / total sum of squares; for
    constant labels 1.0 if every prediction is exact, else 0.0; NaN for one row)."""
    residual = y - predicted
    result = {"rmse": float(np.sqrt(np.mean(residual ** 2))),
              "mae": float(np.mean(np.abs(residual)))}
    if y.shape[0] < 2:
        result["r2"] = np.nan
        return result
    total = float(np.sum((y - y.mean()) ** 2))
    squares = float(np.sum(residual ** 2))
    result["r2"] = 1.0 - squares / total if total else (1.0 if squares == 0 else 0.0)
    return result


def check_ranking_labels(path, y):
    """A ranker's labels are 1 (a positive) and 0 (another interaction)."""
    from .._svmlight import DataFileError
    other = np.setdiff1d(np.unique(y), (0, 1))
    if other.size:
        shown = ", ".join(f"{value:g}" for value in other[:5])
        raise DataFileError(f"{path}: the labels of a ranker's data are 1 (a positive) "
                            f"and 0 (another interaction of the user with the item), "
                            f"found {shown}{', ...' if other.size > 5 else ''}")
