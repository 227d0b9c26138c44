"""Ordinal regression by the McRank reduction (Li, Burges, Wu, NIPS 2007) on a multi-output
factorization machine or polynomial network with a shared basis (Blondel, Niculae, Otsuka,
Ueda, NIPS 2017, section 6.5).

For rating levels ``l_1 < ... < l_m``, output c (c = 1..m-1) is a binary logistic model of
``p(y <= l_c | x) = sigmoid(o_c(x))``, trained on the targets ``Y[i, c] = +1 if y_i <= l_c
else -1``; every output shares the basis vectors of one conditional-gradient fit.
``p(y <= l_m) = 1`` needs no output.
"""
import numpy as np
from scipy.special import expit
from sklearn.base import RegressorMixin
from sklearn.utils import check_array, column_or_1d

from .._io import ModelFileError, register_model
from .._validation import store_init_params
from ..multioutput._base import (_COMMON_ATTRIBUTES_DOC, _COMMON_PARAMS_DOC,
                                 _MultiOutputPolynomial)
from ..multioutput._losses import regressor_loss

__all__ = ["OrdinalMcRankRegressor"]


def _with_default(doc, parameter, old, new):
    """``doc`` with the default of ``parameter`` changed from ``old`` to ``new`` (a test
    checks that the line was found)."""
    return doc.replace(f"{parameter}, default={old}", f"{parameter}, default={new}", 1)


# The paper's McRank model (FM, l1/linf); tau as chosen on validation ratings of
# MovieLens 100K with one-hot users and items (benchmarks/bench_ordinal.py: tau = 10
# stops at one basis vector, 1000 validates worse than 100).
_PARAMS_DOC = _COMMON_PARAMS_DOC
for _parameter, _old, _new in (('kernel : {"pn", "fm"}', '"pn"', '"fm"'),
                               ('penalty : {"l1/l2", "l1", "l1/linf"}', '"l1/l2"',
                                '"l1/linf"'),
                               ("tau : float", "10.0", "100.0")):
    _PARAMS_DOC = _with_default(_PARAMS_DOC, _parameter, _old, _new)
del _parameter, _old, _new


def cumulative_targets(y, levels):
    """The McRank targets ``Y[i, c] = +1 if y[i] <= levels[c] else -1`` for every level
    but the last, shape (n_samples, n_levels - 1)."""
    return np.where(y[:, np.newaxis] <= levels[np.newaxis, :-1], 1.0, -1.0)


def level_probabilities(O):
    """Probabilities of the levels, shape (n_samples, n_outputs + 1), from the outputs O
    of the cumulative models: ``p(y <= l_c) = sigmoid(O[:, c])``, sorted along c so that
    they are monotone (the rearrangement of crossing cumulative estimates), with
    ``p(y <= l_0) = 0`` and ``p(y <= l_m) = 1``; then ``p(y = l_c)`` the differences."""
    n = O.shape[0]
    cumulative = np.sort(expit(O), axis=1)
    return np.diff(np.hstack([np.zeros((n, 1)), cumulative, np.ones((n, 1))]), axis=1)


@register_model
class OrdinalMcRankRegressor(RegressorMixin, _MultiOutputPolynomial):
    __doc__ = """Ordinal regression (ratings) by McRank on a multi-output factorization
    machine or polynomial network, fitted by conditional gradient.

    For the levels ``l_1 < ... < l_m`` of y (``classes_``), output c = 1..m-1 models
    ``p(y <= l_c | x) = sigmoid(o_c(x))`` with the binary logistic loss on the targets
    ``Y[i, c] = +1 if y_i <= l_c else -1``; all outputs share one set of basis vectors
    (``o(x) = sum_r sigma(h_r, x~) V_[r] + intercept_``), grown by the conditional
    gradient of :class:`~polylite.MultiOutputPolynomialRegressor`, so the m - 1 models
    cost little more than one.  The cumulative probabilities are made monotone in c
    (sorted), ``p(y = l_c) = p(y <= l_c) - p(y <= l_{c-1})`` (:meth:`predict_proba`),
    and the prediction is the expected level ``sum_c l_c p(y = l_c)`` (:meth:`predict`),
    which ranks items well by nDCG (NIPS 2017, section 6.5).

    Parameters
    ----------""" + _PARAMS_DOC + """
    Attributes
    ----------
    classes_ : ndarray of shape (n_levels,)
        The levels found in y, sorted; output c models ``p(y <= classes_[c])``.""" + \
        _COMMON_ATTRIBUTES_DOC.replace("(n_basis, n_outputs)", "(n_basis, n_levels - 1)")\
        .replace("intercept_ : ndarray of shape (n_outputs,)",
                 "intercept_ : ndarray of shape (n_levels - 1,)") + """
    See Also
    --------
    polylite.MultiOutputPolynomialRegressor : the multi-output model underneath.
    polylite.FactorizationMachineRegressor : a single-output model of the ratings.
    polylite.metrics.ndcg_at_k : the ranking measure McRank aims at.

    Examples
    --------
    >>> import numpy as np
    >>> from polylite import OrdinalMcRankRegressor
    >>> rng = np.random.RandomState(0)
    >>> X = rng.randn(300, 4)
    >>> y = np.digitize(X[:, 0] * X[:, 1] + X[:, 2], [-1.0, 0.0, 1.0]) + 1
    >>> model = OrdinalMcRankRegressor(max_basis=10, random_state=0).fit(X, y)
    >>> model.classes_
    array([1, 2, 3, 4])
    >>> model.predict_proba(X[:2]).shape
    (2, 4)
    """

    # One binary logistic loss per cumulative output.
    loss = "logistic"
    _losses = ("logistic",)
    # For polylite._io: classes_ is saved with the model and required on load.
    _is_classifier = True
    _validation_history = ("validation_loss", "validation_rmse")

    def __init__(self, kernel="fm", penalty="l1/linf", tau=100.0, max_basis=50,
                 refit="output", fit_linear=True, fit_intercept=True, tol=1e-4,
                 power_tol=1e-2, max_power_iter=100, refine_tol=1e-3, max_refine_iter=30,
                 refit_tol=1e-4, max_refit_iter=300, n_jobs=None, random_state=None,
                 verbose=0, warm_start=False):
        store_init_params(self, locals())

    def fit(self, X, y, sample_weight=None, *, X_val=None, y_val=None):
        """Fit the cumulative models: run ``max_basis`` iterations.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training data; sparse input is used as it is (CSR), never densified.
        y : array-like of shape (n_samples,)
            Ordinal targets (for instance ratings 1-5): numbers, at least two distinct
            values; their distinct values are the levels (``classes_``).
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights; a weight of 2 counts as the row given twice (the
            objective is the weighted mean of the losses).
        X_val, y_val : array-like, default=None
            Validation data: scored after every iteration (``history_``: the logistic
            loss of the cumulative models and the RMSE of :meth:`predict`), and the model
            of the iteration with the smallest validation loss is kept
            (``best_iteration_``).

        Returns
        -------
        self : object
        """
        X, y = self._validate_fit_X(X, y, y_numeric=True)
        if y.dtype.kind not in "iuf":
            raise ValueError(f"y must hold numbers (ordered levels such as ratings), got "
                             f"dtype {y.dtype}")
        levels = np.unique(y)
        if levels.shape[0] < 2:
            raise ValueError(f"ordinal regression needs at least two levels in y; got "
                             f"1 class: {levels[0]!r}")
        if self.warm_start and self.__sklearn_is_fitted__() and not np.array_equal(
                self.classes_, levels):
            raise ValueError("warm_start=True but y has different levels from the "
                             "previous fit")
        loss = regressor_loss(self.loss)
        validation = None
        if X_val is not None or y_val is not None:
            X_val = self._validate_X_val(X_val, y_val, X.dtype)
            y_val = column_or_1d(check_array(y_val, ensure_2d=False, dtype=np.float64))
            if y_val.shape[0] != X_val.shape[0]:
                raise ValueError(f"y_val must have one value per row of X_val "
                                 f"({X_val.shape[0]}), got {y_val.shape[0]}")
            Y_val = cumulative_targets(y_val, levels)
            uniform = np.full(X_val.shape[0], 1.0 / X_val.shape[0])

            def scores(O_val):
                expected = level_probabilities(O_val) @ levels
                return dict(validation_loss=loss(Y_val, O_val, uniform, False)[0],
                            validation_rmse=float(np.sqrt(np.mean((expected - y_val) ** 2))))

            validation = (X_val, scores, lambda r: -r["validation_loss"])
        self._fit_path(X, cumulative_targets(y, levels), levels.shape[0] - 1, loss,
                       sample_weight, validation)
        self.classes_ = levels
        return self

    def decision_function(self, X):
        """Outputs of the cumulative models: ``o_c(x)``, the log-odds of
        ``y <= classes_[c]`` (before they are made monotone).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        outputs : ndarray of shape (n_samples, n_levels - 1)
        """
        return self._outputs(X)

    def predict_proba(self, X):
        """Probability of each level.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        proba : ndarray of shape (n_samples, n_levels)
            ``proba[:, c] = p(y = classes_[c] | x)``: non-negative, each row sums to 1.
        """
        return level_probabilities(self._outputs(X))

    def predict(self, X):
        """Expected level, ``sum_c classes_[c] p(y = classes_[c] | x)``.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        y : ndarray of shape (n_samples,)
            Between the smallest and the largest level.
        """
        return self.predict_proba(X) @ self.classes_.astype(np.float64)

    def _n_outputs_expected(self, attributes):
        if self.classes_.dtype.kind not in "iuf" or self.classes_.shape[0] < 2:
            raise ModelFileError(f"model file has levels {self.classes_!r}: "
                                 f"{type(self).__name__} needs two or more numbers")
        return self.classes_.shape[0] - 1
