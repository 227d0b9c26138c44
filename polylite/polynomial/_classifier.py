"""One-vs-rest classification on top of :class:`polylite._base._PolynomialModel`."""
import numpy as np
from sklearn.preprocessing import LabelEncoder
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets

from .._classification import ClassifierLayer
from .._engine.outputs import logistic_log_proba
from .._validation import check_choice
from ._base import _partial_fit_available

CLASSIFIER_LOSSES = ("logistic", "squared_hinge")


class _OneVsRestMixin(ClassifierLayer):
    """fit and the outputs of the classifier layer, for binary and multi-class.

    Binary problems fit one output (the second class is positive); multi-class problems fit
    one output per class, class c against the rest, in the order of ``classes_``.
    """

    _is_classifier = True

    def _check_params(self):
        super()._check_params()
        check_choice(self.loss, "loss", CLASSIFIER_LOSSES)

    def fit(self, X, y, sample_weight=None, *, X_val=None, y_val=None):
        """Fit the classifier.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training data; sparse input is used as it is (CSR), never densified.
        y : array-like of shape (n_samples,)
            Class labels (two or more classes).
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights; a weight of 2 counts as the sample given twice.
        X_val, y_val : array-like, default=None
            An explicit validation set: the validation loss is reported with ``verbose``,
            and training stops after ``n_iter_no_change`` epochs without improving it,
            keeping the best model (as ``early_stopping`` does with a held-out part).

        Returns
        -------
        self : object
        """
        with self._fitting():
            return self._fit(X, y, sample_weight, X_val, y_val)

    def _fit(self, X, y, sample_weight, X_val, y_val):
        check_choice(self.loss, "loss", CLASSIFIER_LOSSES)
        X, y = self._prepare_X(X, reset=True, y=y)
        check_classification_targets(y)
        encoder = LabelEncoder().fit(y)
        classes = encoder.classes_
        if classes.shape[0] < 2:
            raise ValueError(f"the classifier needs samples of at least two classes; "
                             f"got one class: {classes[0]!r}")
        codes = encoder.transform(y)
        if self.warm_start and hasattr(self, "classes_") and not np.array_equal(
                self.classes_, classes):
            raise ValueError("warm_start=True but y has different classes from the "
                             "previous fit")
        self.classes_ = classes
        validation = None
        if X_val is not None or y_val is not None:
            X_val, y_val = self._validation_set(X_val, y_val)
            validation = (X_val, self._targets(self._encode(y_val)))
        return self._fit_outputs(X, self._targets(codes), sample_weight, self.loss,
                                 validation=validation, strata=codes)

    def _targets(self, codes):
        """+-1 targets of the outputs: one for two classes, else one per class."""
        if self.classes_.shape[0] == 2:
            return np.where(codes == 1, 1.0, -1.0)[:, np.newaxis]
        return np.where(codes[:, np.newaxis] == np.arange(self.classes_.shape[0]),
                        1.0, -1.0)

    def _encode(self, y):
        y = np.asarray(y)
        codes = np.searchsorted(self.classes_, y)
        codes = np.clip(codes, 0, self.classes_.shape[0] - 1)
        unknown = self.classes_[codes] != y
        if np.any(unknown):
            raise ValueError(f"y holds labels not in classes_ {self.classes_.tolist()}: "
                             f"{np.unique(y[unknown]).tolist()}")
        return codes

    @available_if(_partial_fit_available)
    def partial_fit(self, X, y, sample_weight=None, classes=None):
        """One pass of the stochastic solver over a chunk of data (solver "sgd"/"adagrad").

        Calling it on successive chunks streams a data set that does not fit in memory
        (for example read from an svmlight file or a memory-mapped CSR matrix); the
        learning-rate schedule and AdaGrad's statistics continue across calls.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        sample_weight : array-like of shape (n_samples,), default=None
            Multiplies each sample's loss gradient (1 by default).
        classes : array-like of shape (n_classes,), default=None
            Every class of the whole data set; required on the first call.

        Returns
        -------
        self : object
        """
        from sklearn.utils.multiclass import _check_partial_fit_first_call
        check_choice(self.loss, "loss", CLASSIFIER_LOSSES)
        first = not self.__sklearn_is_fitted__()
        X, y = self._prepare_X(X, reset=first, y=y)
        check_classification_targets(y)
        if first and classes is None:
            raise ValueError("classes must be passed on the first call to partial_fit")
        if first and hasattr(self, "classes_"):
            del self.classes_  # left by a fit that failed: take the classes given now
        _check_partial_fit_first_call(self, classes)
        if self.classes_.shape[0] < 2:
            raise ValueError("the classifier needs at least two classes")
        return self._partial_fit_outputs(X, self._targets(self._encode(y)), sample_weight,
                                         self.loss)

    def _class_scores(self, X):
        """The outputs: one for two classes, one per class (one-vs-rest) for more."""
        self._validate_X_predict()
        return self._decision(self._prepare_X(X, reset=False))

    def _has_proba(self):
        return self.loss == "logistic"

    def _class_proba(self, X):
        """Binary: ``[1 - sigmoid(f), sigmoid(f)]``.  Multi-class: the one-vs-rest
        sigmoids normalised to sum to one."""
        return np.exp(self._class_log_proba(X))

    def _class_log_proba(self, X):
        """The log of :meth:`_class_proba`, computed without under- or overflow."""
        return logistic_log_proba(self._class_scores(X))


class _RegressorFitMixin:
    """fit / predict for a single real-valued output with the squared loss."""

    def fit(self, X, y, sample_weight=None, *, X_val=None, y_val=None):
        """Fit the regressor (squared loss).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training data; sparse input is used as it is (CSR), never densified.
        y : array-like of shape (n_samples,)
            Targets.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights; a weight of 2 counts as the sample given twice.
        X_val, y_val : array-like, default=None
            An explicit validation set: the validation loss is reported with ``verbose``,
            and training stops after ``n_iter_no_change`` epochs without improving it,
            keeping the best model (as ``early_stopping`` does with a held-out part).

        Returns
        -------
        self : object
        """
        with self._fitting():
            return self._fit(X, y, sample_weight, X_val, y_val)

    def _fit(self, X, y, sample_weight, X_val, y_val):
        X, y = self._prepare_X(X, reset=True, y=y)
        validation = None
        if X_val is not None or y_val is not None:
            X_val, y_val = self._validation_set(X_val, y_val)
            validation = (X_val, np.asarray(y_val, dtype=np.float64)[:, np.newaxis])
        targets = np.asarray(y, dtype=np.float64)[:, np.newaxis]
        return self._fit_outputs(X, targets, sample_weight, "squared",
                                 validation=validation)

    @available_if(_partial_fit_available)
    def partial_fit(self, X, y, sample_weight=None):
        """One pass of the stochastic solver over a chunk of data (solver "sgd"/"adagrad").

        Calling it on successive chunks streams a data set that does not fit in memory
        (for example read from an svmlight file or a memory-mapped CSR matrix); the
        learning-rate schedule and AdaGrad's statistics continue across calls.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        sample_weight : array-like of shape (n_samples,), default=None
            Multiplies each sample's loss gradient (1 by default).

        Returns
        -------
        self : object
        """
        first = not self.__sklearn_is_fitted__()
        X, y = self._prepare_X(X, reset=first, y=y)
        targets = np.asarray(y, dtype=np.float64)[:, np.newaxis]
        return self._partial_fit_outputs(X, targets, sample_weight, "squared")

    def predict(self, X):
        """Predicted values.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        y : ndarray of shape (n_samples,)
        """
        self._validate_X_predict()
        X = self._prepare_X(X, reset=False)
        return self._decision(X)[:, 0]
