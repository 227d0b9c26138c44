"""Multi-output polynomial networks and factorization machines with a shared basis, fitted
by conditional gradient (Blondel, Niculae, Otsuka, Ueda, NIPS 2017)."""
import numpy as np
from scipy.special import expit, log_softmax
from sklearn.base import RegressorMixin
from sklearn.preprocessing import LabelEncoder
from sklearn.utils import check_array
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets

from .._classification import ClassifierLayer
from .._io import ModelFileError, register_model
from .._validation import check_choice, store_init_params
from ._base import _COMMON_ATTRIBUTES_DOC, _COMMON_PARAMS_DOC, _MultiOutputPolynomial
from ._losses import (CLASSIFIER_LOSSES, REGRESSOR_LOSSES, class_probabilities,
                      classifier_loss, regressor_loss)

__all__ = ["MultiOutputPolynomialClassifier", "MultiOutputPolynomialRegressor"]

_FIT_DOC = """
        Parameters
        ----------
        X : {{array-like, sparse matrix}} of shape (n_samples, n_features)
            Training data; sparse input is used as it is (CSR), never densified.
        y : {y}
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights; a weight of 2 counts as the row given twice (the
            objective is the weighted mean of the losses).
        X_val, y_val : array-like, default=None
            Validation data: scored after every iteration (``history_``), and the model
            of the best iteration is kept ({selection}; ``best_iteration_``).

        Returns
        -------
        self : object
"""


def _has_logistic_loss(est):
    return est.loss == "logistic"


@register_model
class MultiOutputPolynomialClassifier(ClassifierLayer, _MultiOutputPolynomial):
    __doc__ = """Multi-class polynomial network or factorization machine, one output per
    class over one shared set of basis vectors, grown by conditional gradient.

    ``o_c(x) = sum_r sigma(h_r, x~) V_[r, c] + intercept_[c]``; the predicted class
    maximises o_c.  Each iteration adds the basis vector that most decreases the loss to
    first order over all classes (a power method over X, never forming a d x d
    matrix), then refits the output layer under the constraint ``Omega(V) <= tau``;
    rows the refit zeroes leave the model.  One fit gives the whole path of models with
    1..max_basis basis vectors (``history_``), and validation data pick the best one.

    Parameters
    ----------""" + _COMMON_PARAMS_DOC.replace(
        "    max_basis :", """    loss : {"logistic", "smooth_hinge", "squared_hinge"}, default="logistic"
        The multi-class loss: logistic (softmax cross-entropy, with ``predict_proba``),
        the multi-class hinge smoothed by a squared norm, or the multi-class squared
        hinge ``sum_{c != y} max(0, 1 + o_c - o_y)^2``.
    max_basis :""", 1) + """
    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        The class labels; output c is class ``classes_[c]`` (n_outputs = n_classes,
        also for two classes).""" + _COMMON_ATTRIBUTES_DOC + """
    See Also
    --------
    MultiOutputPolynomialRegressor : real or binary (+-1) outputs.
    polylite.PolynomialNetworkClassifier : one-vs-rest, a separate network per class.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from polylite import MultiOutputPolynomialClassifier
    >>> X, y = load_iris(return_X_y=True)
    >>> clf = MultiOutputPolynomialClassifier(max_basis=10, random_state=0).fit(X, y)
    >>> clf.predict(X[:3])
    array([0, 0, 0])
    """

    _is_classifier = True
    _losses = CLASSIFIER_LOSSES
    _validation_history = ("validation_loss", "validation_accuracy")

    def __init__(self, kernel="pn", penalty="l1/l2", tau=10.0, loss="logistic",
                 max_basis=50, refit="output", fit_linear=True, fit_intercept=True,
                 tol=1e-4, power_tol=1e-2, max_power_iter=100, refine_tol=1e-3,
                 max_refine_iter=30, refit_tol=1e-4, max_refit_iter=300, n_jobs=None,
                 random_state=None, verbose=0, warm_start=False):
        store_init_params(self, locals())

    def fit(self, X, y, sample_weight=None, *, X_val=None, y_val=None):
        check_choice(self.loss, "loss", self._losses)
        X, y = self._validate_fit_X(X, y)
        check_classification_targets(y)
        classes = LabelEncoder().fit(y).classes_
        if classes.shape[0] < 2:
            raise ValueError(f"the classifier needs samples of at least two classes; "
                             f"got one class: {classes[0]!r}")
        if self.warm_start and self.__sklearn_is_fitted__() and not np.array_equal(
                self.classes_, classes):
            raise ValueError("warm_start=True but y has different classes from the "
                             "previous fit")
        codes = np.searchsorted(classes, y)
        loss = classifier_loss(self.loss)
        validation = None
        if X_val is not None or y_val is not None:
            X_val = self._validate_X_val(X_val, y_val, X.dtype)
            codes_val = _encode(classes, y_val, X_val.shape[0])
            uniform = np.full(X_val.shape[0], 1.0 / X_val.shape[0])

            def scores(O_val):
                return dict(validation_loss=loss(codes_val, O_val, uniform, False)[0],
                            validation_accuracy=float(np.mean(
                                np.argmax(O_val, axis=1) == codes_val)))

            validation = (X_val, scores, lambda r: (r["validation_accuracy"],
                                                    -r["validation_loss"]))
        self._fit_path(X, codes, classes.shape[0], loss, sample_weight, validation)
        self.classes_ = classes
        return self

    fit.__doc__ = "Fit the classifier: run ``max_basis`` iterations.\n" + _FIT_DOC.format(
        y="array-like of shape (n_samples,)\n            Class labels (two or more).",
        selection="largest accuracy, ties broken by the smaller validation loss")

    def _n_outputs_expected(self, attributes):
        return self.classes_.shape[0]

    def _has_proba(self):
        return self.loss == "logistic"

    def _class_scores(self, X):
        """The outputs, one per class; for two classes ``o_1 - o_0``."""
        O = self._outputs(X)   # checks that the model is fitted
        return O[:, 1:] - O[:, :1] if O.shape[1] == 2 else O

    def _predict_scores(self, X):
        return self._outputs(X)

    def _class_proba(self, X):
        """The softmax of the outputs (logistic loss)."""
        return class_probabilities(self._outputs(X))

    def _class_log_proba(self, X):
        return log_softmax(self._outputs(X), axis=1)


def _encode(classes, y, n_rows):
    y = np.asarray(y)
    if y.ndim != 1 or y.shape[0] != n_rows:
        raise ValueError(f"y_val must be 1-D with one label per row of X_val ({n_rows}), "
                         f"got shape {y.shape}")
    codes = np.clip(np.searchsorted(classes, y), 0, classes.shape[0] - 1)
    unknown = classes[codes] != y
    if np.any(unknown):
        raise ValueError(f"y_val holds labels not in classes_ {classes.tolist()}: "
                         f"{np.unique(y[unknown]).tolist()}")
    return codes


def _check_binary_targets(Y, name):
    if not np.all((Y == 1) | (Y == -1)):
        raise ValueError(f"loss='logistic' needs {name} of -1 and +1 only (binary "
                         f"targets per output; for 0/1 indicators pass 2 * {name} - 1)")


@register_model
class MultiOutputPolynomialRegressor(RegressorMixin, _MultiOutputPolynomial):
    __doc__ = """Multi-output polynomial network or factorization machine: several real
    outputs (squared loss each) or several binary ones (logistic loss each), over one
    shared set of basis vectors grown by conditional gradient.

    ``o_c(x) = sum_r sigma(h_r, x~) V_[r, c] + intercept_[c]``.  With
    ``loss="logistic"`` the targets are -1/+1 per output (multi-label classification,
    or the ordinal McRank reduction: ``Y[i, c] = +1 if y_i <= c else -1``), and
    :meth:`predict_proba` gives ``P(Y[:, c] = +1 | x) = sigmoid(o_c(x))``.

    Parameters
    ----------""" + _COMMON_PARAMS_DOC.replace(
        "    max_basis :", """    loss : {"squared", "logistic"}, default="squared"
        The loss of each output, summed over the outputs: ``(o_c - y_c)^2 / 2``, or
        the binary logistic loss ``log(1 + exp(-y_c o_c))`` on targets -1/+1.
    max_basis :""", 1) + """
    Attributes
    ----------
    n_outputs_ : int
        Number of outputs (columns of y; 1 for 1-D y).""" + _COMMON_ATTRIBUTES_DOC + """
    See Also
    --------
    MultiOutputPolynomialClassifier : multi-class, one output per class.

    Examples
    --------
    >>> import numpy as np
    >>> from polylite import MultiOutputPolynomialRegressor
    >>> rng = np.random.RandomState(0)
    >>> X = rng.randn(200, 5)
    >>> Y = np.column_stack([X[:, 0] * X[:, 1], X[:, 1] * X[:, 2] + X[:, 3]])
    >>> reg = MultiOutputPolynomialRegressor(max_basis=10, random_state=0).fit(X, Y)
    >>> reg.predict(X).shape
    (200, 2)
    """

    _losses = REGRESSOR_LOSSES

    def __init__(self, kernel="pn", penalty="l1/l2", tau=10.0, loss="squared",
                 max_basis=50, refit="output", fit_linear=True, fit_intercept=True,
                 tol=1e-4, power_tol=1e-2, max_power_iter=100, refine_tol=1e-3,
                 max_refine_iter=30, refit_tol=1e-4, max_refit_iter=300, n_jobs=None,
                 random_state=None, verbose=0, warm_start=False):
        store_init_params(self, locals())

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        tags.target_tags.single_output = True
        return tags

    def fit(self, X, y, sample_weight=None, *, X_val=None, y_val=None):
        check_choice(self.loss, "loss", self._losses)
        X, y = self._validate_fit_X(X, y, multi_output=True, y_numeric=True)
        Y = np.ascontiguousarray(np.asarray(y, dtype=np.float64).reshape(X.shape[0], -1))
        if self.loss == "logistic":
            _check_binary_targets(Y, "y")
        loss = regressor_loss(self.loss)
        validation = None
        if X_val is not None or y_val is not None:
            X_val = self._validate_X_val(X_val, y_val, X.dtype)
            Y_val = check_array(y_val, ensure_2d=False, dtype=np.float64)
            Y_val = np.ascontiguousarray(Y_val.reshape(Y_val.shape[0], -1))
            if Y_val.shape != (X_val.shape[0], Y.shape[1]):
                raise ValueError(f"y_val must have shape {(X_val.shape[0], Y.shape[1])} "
                                 f"(a row per row of X_val, a column per output), got "
                                 f"{np.shape(y_val)}")
            if self.loss == "logistic":
                _check_binary_targets(Y_val, "y_val")
            uniform = np.full(X_val.shape[0], 1.0 / X_val.shape[0])

            def scores(O_val):
                return dict(validation_loss=loss(Y_val, O_val, uniform, False)[0])

            validation = (X_val, scores, lambda r: -r["validation_loss"])
        self._fit_path(X, Y, Y.shape[1], loss, sample_weight, validation)
        self.n_outputs_ = Y.shape[1]
        self._target_ndim = np.ndim(y)
        return self

    fit.__doc__ = "Fit the regressor: run ``max_basis`` iterations.\n" + _FIT_DOC.format(
        y="array-like of shape (n_samples,) or (n_samples, n_outputs)\n            "
          "Targets; -1/+1 only with ``loss='logistic'``.",
        selection="smallest validation loss")

    def _shaped(self, O):
        return O[:, 0] if self._target_ndim == 1 else O

    @available_if(_has_logistic_loss)
    def decision_function(self, X):
        """Raw outputs o(x), the log-odds of each output (logistic loss only; with the
        squared loss :meth:`predict` returns them).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        outputs : ndarray of shape (n_samples, n_outputs), or (n_samples,) after a fit
            on 1-D y
        """
        return self._shaped(self._outputs(X))

    def predict(self, X):
        """Predicted targets: the outputs (squared loss), or their signs, -1/+1
        (logistic loss).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        y : ndarray of shape (n_samples, n_outputs), or (n_samples,) after a fit on 1-D y
        """
        O = self._shaped(self._outputs(X))
        return np.where(O > 0, 1.0, -1.0) if self.loss == "logistic" else O

    @available_if(_has_logistic_loss)
    def predict_proba(self, X):
        """``P(y_c = +1 | x) = sigmoid(o_c(x))`` per output (logistic loss only).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        proba : ndarray of shape (n_samples, n_outputs), or (n_samples,) after a fit on
            1-D y
        """
        return expit(self.decision_function(X))

    def _model_arrays(self):
        arrays, attributes = super()._model_arrays()
        attributes["target_ndim"] = int(self._target_ndim)
        return arrays, attributes

    def _restore_model(self, arrays, attributes):
        ndim = attributes.get("target_ndim")
        if ndim not in (1, 2) or isinstance(ndim, bool):
            raise ModelFileError(f"model file has no valid target_ndim (got {ndim!r})")
        super()._restore_model(arrays, attributes)
        if ndim == 1 and self.V_.shape[1] != 1:
            raise ModelFileError(f"model file has 1-D targets but {self.V_.shape[1]} "
                                 f"outputs")
        self.n_outputs_ = self.V_.shape[1]
        self._target_ndim = ndim
