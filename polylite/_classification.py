"""The classifier layer: ``decision_function``, ``predict``, ``predict_proba`` and
``predict_log_proba``, written once for every classifier family.

A family says what its outputs are; this layer turns them into the scikit-learn
methods.  A family class puts :class:`ClassifierLayer` before its own root and
provides:

- ``_class_scores(X)``: (n_samples, n_columns) scores, one column for two classes
  (positive favours ``classes_[1]``) or one per class (largest for the predicted
  class), which :meth:`ClassifierLayer.decision_function` returns (1-D for one column);
- ``_class_proba(X)``: (n_samples, n_classes) class probabilities, for the families
  and losses that have them (``_has_proba()``);
- optionally ``_class_log_proba(X)`` (default: the log of ``_class_proba``) and
  ``_predict_scores(X)``, what :meth:`ClassifierLayer.predict` ranks the classes by
  (default ``_class_scores``; a family whose probabilities are not a function of its
  scores ranks by them instead).
"""
import numpy as np
from sklearn.base import ClassifierMixin
from sklearn.utils.metaestimators import available_if

from ._engine.outputs import class_labels

__all__ = ["ClassifierLayer", "one_vs_rest_probabilities"]


def one_vs_rest_probabilities(p):
    """Class probabilities from each output's probability of its class, (n, n_outputs):
    ``[1 - p, p]`` for one output (two classes), else normalised to sum to one (rows of
    zeros: equal probabilities); (n, n_classes)."""
    if p.shape[1] == 1:
        return np.column_stack([1.0 - p[:, 0], p[:, 0]])
    total = p.sum(axis=1, keepdims=True)
    return np.divide(p, total, out=np.full_like(p, 1.0 / p.shape[1]), where=total > 0)


def _gives_probabilities(est):
    # (a function of the module: in the class body the name _has_proba is the method)
    return est._has_proba()


class ClassifierLayer(ClassifierMixin):
    """decision_function / predict / predict_proba / predict_log_proba of a classifier
    (see the module's docstring for what a family provides)."""

    def _has_proba(self):
        """Whether the model gives probabilities (its loss or likelihood has a link)."""
        return True

    def _predict_scores(self, X):
        return self._class_scores(X)

    def _class_log_proba(self, X):
        with np.errstate(divide="ignore"):
            return np.log(self._class_proba(X))

    def decision_function(self, X):
        """Scores of the classes.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        scores : ndarray of shape (n_samples,) for two classes, else (n_samples, n_classes)
            For two classes, positive scores favour ``classes_[1]``; for more, column c
            is the score of class c, largest for the predicted class.
        """
        scores = self._class_scores(X)
        return scores[:, 0] if scores.shape[1] == 1 else scores

    def predict(self, X):
        """Predicted class labels.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        labels : ndarray of shape (n_samples,)
            Elements of ``classes_``.
        """
        scores = self._predict_scores(X)  # (which checks that the model is fitted)
        return class_labels(self.classes_, scores)

    @available_if(_gives_probabilities)
    def predict_proba(self, X):
        """Class probabilities.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
            Columns in the order of ``classes_``.
        """
        return self._class_proba(X)

    @available_if(_gives_probabilities)
    def predict_log_proba(self, X):
        """Logarithm of :meth:`predict_proba`.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        log_proba : ndarray of shape (n_samples, n_classes)
        """
        return self._class_log_proba(X)
