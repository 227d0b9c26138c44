"""One-vs-rest classification on top of :class:`polylite._base._PolynomialModel`."""
import numpy as np
from scipy.special import logsumexp
from sklearn.preprocessing import LabelEncoder
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets

from ._base import _check_choice

CLASSIFIER_LOSSES = ("logistic", "squared_hinge")


class _OneVsRestMixin:
    """fit / decision_function / predict / predict_proba for binary and multi-class.

    Binary problems fit one output (the second class is positive); multi-class problems fit
    one output per class, class c against the rest, in the order of ``classes_``.
    """

    _is_classifier = True

    def _check_params(self):
        super()._check_params()
        _check_choice(self.loss, "loss", CLASSIFIER_LOSSES)

    def fit(self, X, y, sample_weight=None):
        """Fit the classifier.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training data; sparse input is used as it is (CSR), never densified.
        y : array-like of shape (n_samples,)
            Class labels (two or more classes).
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights; a weight of 2 counts as the sample given twice.

        Returns
        -------
        self : object
        """
        _check_choice(self.loss, "loss", CLASSIFIER_LOSSES)
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
        if classes.shape[0] == 2:
            targets = np.where(codes == 1, 1.0, -1.0)[:, np.newaxis]
        else:
            targets = np.where(codes[:, np.newaxis] == np.arange(classes.shape[0]),
                               1.0, -1.0)
        return self._fit_outputs(X, targets, sample_weight, self.loss)

    def decision_function(self, X):
        """Raw model outputs.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        scores : ndarray of shape (n_samples,) for two classes, else (n_samples, n_classes)
            For two classes, positive scores favour ``classes_[1]``.
        """
        self._validate_X_predict()
        X = self._prepare_X(X, reset=False)
        scores = self._decision(X)
        return scores[:, 0] if scores.shape[1] == 1 else scores

    def predict(self, X):
        """Predicted class labels, shape (n_samples,)."""
        scores = self.decision_function(X)
        if scores.ndim == 1:
            return self.classes_[(scores > 0).astype(np.intp)]
        return self.classes_[np.argmax(scores, axis=1)]

    def _has_proba(self):
        return self.loss == "logistic"

    @available_if(_has_proba)
    def predict_proba(self, X):
        """Class probabilities (logistic loss only).

        Binary: ``[1 - sigmoid(f), sigmoid(f)]``.  Multi-class: the one-vs-rest sigmoids
        normalised to sum to one.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
        """
        return np.exp(self.predict_log_proba(X))

    @available_if(_has_proba)
    def predict_log_proba(self, X):
        """Logarithm of :meth:`predict_proba`, computed without under- or overflow.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        log_proba : ndarray of shape (n_samples, n_classes)
        """
        scores = np.asarray(self.decision_function(X), dtype=np.float64)
        if scores.ndim == 1:
            # log sigmoid(f) = -log(1 + exp(-f)), log(1 - sigmoid(f)) = -log(1 + exp(f))
            return np.column_stack([-np.logaddexp(0.0, scores),
                                    -np.logaddexp(0.0, -scores)])
        log_sigmoid = -np.logaddexp(0.0, -scores)
        return log_sigmoid - logsumexp(log_sigmoid, axis=1, keepdims=True)


class _RegressorFitMixin:
    """fit / predict for a single real-valued output with the squared loss."""

    def fit(self, X, y, sample_weight=None):
        """Fit the regressor (squared loss).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training data; sparse input is used as it is (CSR), never densified.
        y : array-like of shape (n_samples,)
            Targets.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights; a weight of 2 counts as the sample given twice.

        Returns
        -------
        self : object
        """
        X, y = self._prepare_X(X, reset=True, y=y)
        targets = np.asarray(y, dtype=np.float64)[:, np.newaxis]
        return self._fit_outputs(X, targets, sample_weight, "squared")

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
