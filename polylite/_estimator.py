"""The root of every estimator family: what a polylite model is beyond its algorithm.

Every family's base class derives from :class:`ModelRoot`, which gives it
scikit-learn's estimator contract with sparse input, the test of being fitted, the
all-or-nothing ``fit`` (an estimator whose fit raised is left unfitted, or as it was
with ``warm_start``) and saving in polylite's pickle-free model files
(:mod:`polylite._io`; each family writes and checks its own arrays in
``_model_arrays`` and ``_restore_model``).  Classifiers add the classifier layer,
:class:`polylite._classification.ClassifierLayer`.
"""
import contextlib

from sklearn.base import BaseEstimator

from ._io import save_model

__all__ = ["ModelRoot"]


class ModelRoot(BaseEstimator):
    """Base of every polylite estimator (see the module's docstring).

    A family sets ``_fitted_attribute``, the fitted attribute whose presence means the
    model is fitted.
    """

    _is_classifier = False
    _fitted_attribute = "P_"
    # Solver state beside the fitted attributes, forgotten with them (_reset_fitted).
    _state_attributes = ()

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

    def __sklearn_is_fitted__(self):
        return hasattr(self, self._fitted_attribute)

    # The stochastic passes penalise, in each row's step, only the parameters the row
    # reads (libffm's penalty: the field-aware models), not every parameter.
    _row_penalty = False

    # Whether FTRL-proximal's first proximal term is centred at the initial parameters
    # (solvers.start_ftrl), else at 0 (z = 0, McMahan et al.'s start).
    _ftrl_from_start = False

    def _ftrl_penalties(self):
        """(l1, l2) of FTRL-proximal (estimators with ``solver="ftrl"``)."""
        return float(getattr(self, "l1", 0.0)), float(getattr(self, "l2", 0.0))

    def _field_structure(self):
        """(field of each feature, number of fields) of a field-aware model, which the
        engine's problem carries; (None, 0) for the others."""
        return None, 0

    @contextlib.contextmanager
    def _fitting(self):
        """Make ``fit`` all-or-nothing: if it raises, the estimator is left unfitted, or
        with ``warm_start`` as it was before the call (parameters are fitted on a copy)."""
        before = {name: value for name, value in vars(self).items()
                  if name.endswith("_") and not name.startswith("__")}
        try:
            yield
        except BaseException:
            self._reset_fitted()
            if getattr(self, "warm_start", False):
                vars(self).update(before)
            raise

    def _reset_fitted(self):
        """Forget every fitted attribute and solver state."""
        for name in list(vars(self)):
            if (name.endswith("_") and not name.startswith("__")
                    or name in self._state_attributes):
                delattr(self, name)

    def save(self, path, *, exact=False):
        """Save the fitted model to ``path`` in polylite's pickle-free format.

        Parameters
        ----------
        path : str or path-like
            Destination file (NumPy ``.npz`` archive with a JSON header).  See
            :func:`polylite.load`.  A model file holds the fitted parameters, not what
            ``fit`` reported on the way (histories, scores on evaluation rows).
        exact : bool, default=False
            Store every array as fitted.  By default a Bayesian factorization machine's
            kept samples are stored in float32 (half the space; the loaded model's
            predictions within a relative 1e-6 of the saved one's, as ``fit`` checks
            on its training rows, else the samples stay float64); other models are
            always stored exactly.  See :func:`polylite.save`.
        """
        save_model(self, path, exact=exact)

    def _compact_model_arrays(self, arrays, attributes):
        """The arrays and attributes of ``_model_arrays`` as a default save stores them:
        a family whose file can be smaller at no cost to its predictions overrides this
        (and its ``_restore_model`` reads both forms)."""
        return arrays, attributes
