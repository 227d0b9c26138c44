"""Bayesian factorization machines for ordered levels (ratings): the ordered probit model,
sampled by the Gibbs chain of :mod:`polylite.bayes.fm` with cutpoints."""
import numbers

import numpy as np
from sklearn.base import RegressorMixin
from sklearn.utils import check_array, column_or_1d

from .. import kernels
from .._io import ModelFileError, register_model
from .._validation import check_choice, store_init_params
from ._sampler import OrderedProbit, log_interval_probability
from .fm import _MODEL_DOC, _PARAMS_DOC, _BayesianFactorizationMachine

__all__ = ["BayesianFactorizationMachineOrdinalRegressor"]

PREDICTIONS = ("auto", "expected", "most_probable")


def level_probabilities(f, cutpoints):
    """P(y = level j | f) = Phi(c_{j+1} - f) - Phi(c_j - f) for each row's f (n,) under
    the cutpoints c_1 .. c_{L-1} (L - 1,): (n, L)."""
    edges = np.concatenate([[-np.inf], cutpoints, [np.inf]])
    f = np.asarray(f, dtype=np.float64)[:, np.newaxis]
    with np.errstate(invalid="ignore"):  # inf - inf never occurs: f is finite
        return np.exp(log_interval_probability(edges[:-1] - f, edges[1:] - f))


@register_model
class BayesianFactorizationMachineOrdinalRegressor(RegressorMixin,
                                                   _BayesianFactorizationMachine):
    __doc__ = """Bayesian factorization machine for ordered levels, such as star ratings
    (ordered probit, Gibbs sampling).

    A latent ``z ~ N(f(x), 1)``, with ``f`` as in
    :class:`~polylite.FactorizationMachineRegressor`, falls in one of the intervals
    between the cutpoints ``-inf < c_1 = 0 < c_2 < ... < c_{L-1} < inf``, and the level is
    the interval's: ``P(y = level j | x) = Phi(c_{j+1} - f(x)) - Phi(c_j - f(x))``
    (Albert and Chib 1993).  The first cutpoint is fixed at 0 since the intercept
    already sets the location, so two levels give the probit classifier of
    :class:`BayesianFactorizationMachineClassifier`.  Each sweep draws the parameters as
    that classifier does, then each free cutpoint by a Metropolis-Hastings step with
    the latent targets integrated out (Cowles 1996: a cutpoint moves as far as the data
    allow in one step, where the Gibbs draw given the latents mixes slowly on large
    data), then the latents from their truncated normals.  The cutpoint's proposal is
    the normal of a Newton step on its log conditional density at its current value,
    which fits the conditional's width at every step and needs no tuning: the chain is
    exact from its first sweep, and on many rows nearly every proposal is accepted.
    Probabilities average over the kept samples, each with its own cutpoints.
    """ + _MODEL_DOC + _PARAMS_DOC + """    levels : sequence or None, default=None
        The levels in increasing order.  None: the distinct values of y, sorted (numbers,
        or strings in their sorted order).  Give it for labels whose order is not their
        sorted one (``["low", "medium", "high"]``), or to include levels y lacks.
    prediction : {"auto", "expected", "most_probable"}, default="auto"
        What :meth:`predict` returns: "expected", the expected level ``sum_j levels_[j]
        P(y = levels_[j] | x)`` (numeric levels only; what minimises the squared error);
        "most_probable", the level of highest probability; "auto", the expected level
        for numeric levels, else the most probable.

    Attributes
    ----------
    levels_ : ndarray of shape (n_levels,)
        The levels, in increasing order.
    cutpoints_samples_ : ndarray of shape (n_kept, n_levels - 1)
        The kept samples of the cutpoints c_1 .. c_{L-1} (c_1 = 0).
    intercept_samples_ : ndarray of shape (n_kept,)
    w_samples_ : ndarray of shape (n_kept, n_features)
    P_samples_ : ndarray of shape (n_kept, n_blocks, n_features, n_components)
    gamma_samples_ : ndarray of shape (n_kept, n_dummy, n_components)
    cutpoint_acceptance_ : float
        The fraction of the cutpoints' Metropolis-Hastings proposals accepted after the
        burn-in.
    feature_groups_ : ndarray of shape (n_features,)
        Each feature's group index (all 0 without ``feature_groups``).
    eval_proba_ : ndarray of shape (n_eval, n_levels)
        With ``X_eval``: the level probabilities on it averaged over every sweep after
        the burn-in.
    eval_rmse_ : ndarray of shape (n_iter,)
        With ``X_eval`` and ``y_eval`` of numeric levels: after each sweep, the RMSE of
        the expected level of the averaged probabilities so far (during the burn-in, of
        the current sample).  For labels, ``eval_accuracy_`` instead (most probable).
    n_iter_ : int
        Number of sweeps run.
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from polylite import BayesianFactorizationMachineOrdinalRegressor
    >>> rng = np.random.RandomState(0)
    >>> X = rng.rand(200, 4)
    >>> y = np.digitize(X[:, 0] + X[:, 1] * X[:, 2] + 0.2 * rng.randn(200), [0.5, 1, 1.5]) + 1
    >>> model = BayesianFactorizationMachineOrdinalRegressor(n_components=2, random_state=0)
    >>> model.fit(X, y).levels_
    array([1, 2, 3, 4])
    >>> model.predict_proba(X[:1]).shape
    (1, 4)
    """

    def __init__(self, degree=2, n_components=8, *, lower_degrees="separate",
                 kernel="anova", fit_linear=True, fit_intercept=True, n_iter=200,
                 n_burn_in=None, n_kept=None, init_scale=0.1, relaxation=1.5,
                 random_state=None, verbose=0, n_jobs=None, levels=None,
                 prediction="auto"):
        store_init_params(self, locals())

    _SAMPLES = ("intercept", "w", "P", "gamma", "cutpoints")
    _labels_as_y = True  # levels may be strings (read by the input checks)
    _score_name = "RMSE"  # of fit's X_eval (accuracy for levels that are labels)

    # ---- levels ---------------------------------------------------------------------------

    def _fit_levels(self, y):
        """levels_ from the parameter or y, and each row's level index."""
        y = column_or_1d(check_array(y, ensure_2d=False, dtype=None,
                                     ensure_all_finite=True, input_name="y"))
        if self.levels is None:
            levels = np.unique(y)
        else:
            levels = column_or_1d(check_array(self.levels, ensure_2d=False, dtype=None,
                                              input_name="levels"))
            if np.unique(levels).shape[0] != levels.shape[0]:
                raise ValueError(f"levels must be distinct, got {levels.tolist()}")
        if levels.shape[0] < 2:
            raise ValueError(f"an ordinal model needs at least two levels; got one class "
                             f"(level) only: {levels.tolist()}")
        if self._numeric(levels) and self.levels is not None and \
                np.any(np.diff(levels.astype(np.float64)) <= 0):
            raise ValueError(f"numeric levels must be given in increasing order, got "
                             f"{levels.tolist()}")
        self.levels_ = levels
        return self._codes(y, "y")

    @staticmethod
    def _numeric(levels):
        return levels.dtype.kind in "iuf" or (
            levels.dtype == object and all(isinstance(v, numbers.Real) for v in levels))

    def _codes(self, y, name):
        """The index in levels_ of each value of y (ValueError naming unknown values)."""
        order = np.argsort(self.levels_, kind="stable")
        ranked = self.levels_[order]
        try:
            position = np.clip(np.searchsorted(ranked, y), 0, ranked.shape[0] - 1)
            known = ranked[position] == y
        except TypeError:
            raise ValueError(f"{name} holds values of another kind than the levels "
                             f"{self.levels_.tolist()}") from None
        if not np.all(known):
            raise ValueError(f"{name} holds values that are not levels "
                             f"{self.levels_.tolist()}: {np.unique(y[~known]).tolist()}")
        return order[position]

    def _prediction_kind(self):
        check_choice(self.prediction, "prediction", PREDICTIONS)
        numeric = self._numeric(self.levels_)
        if self.prediction == "expected" and not numeric:
            raise ValueError(f"prediction='expected' needs numeric levels; the levels "
                             f"are {self.levels_.tolist()}: use 'most_probable'")
        if self.prediction == "auto":
            return "expected" if numeric else "most_probable"
        return self.prediction

    # ---- fitting --------------------------------------------------------------------------

    def _likelihood(self, target):
        return OrderedProbit(target.astype(np.intp), self.levels_.shape[0])

    def _check_fit_targets(self, targets):
        """Level indices never overflow."""

    def _finish_likelihoods(self, likelihoods):
        (chain,) = likelihoods
        self.cutpoint_acceptance_ = (chain.n_accepted / chain.n_proposed
                                     if chain.n_proposed else float("nan"))

    def _eval_output(self, chain, X_eval):
        return level_probabilities(chain.predict(X_eval),
                                   chain.likelihood.cutpoints[1:-1])

    def fit(self, X, y, *, feature_groups=None, X_eval=None, y_eval=None):
        """Sample the posterior of the model given (X, y).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training data; sparse input is used as it is (CSR), never densified.
        y : array-like of shape (n_samples,)
            Levels (see ``levels``).
        feature_groups : array-like of shape (n_features,), default=None
            A group label for each feature (for instance its field: user, item, ...);
            each group has its own prior precision and mean per parameter set and
            component.  None: one group.
        X_eval : {array-like, sparse matrix} of shape (n_eval, n_features), default=None
            Rows whose level probabilities are averaged over every sweep after the
            burn-in (all samples, not only the kept ones), into ``eval_proba_``.
        y_eval : array-like of shape (n_eval,), default=None
            Their levels: ``eval_rmse_`` (numeric levels) or ``eval_accuracy_``, and
            with ``verbose`` that score per sweep.

        Returns
        -------
        self : object
        """
        X, y = self._validate_fit_data(X, y)
        codes = self._fit_levels(y)
        kind = self._prediction_kind()
        X_eval, y_eval = self._eval_set(X_eval, y_eval, X.dtype)
        score = None
        if y_eval is not None:
            eval_codes = self._codes(y_eval, "y_eval")
            if kind == "expected":
                values = self.levels_.astype(np.float64)
                self._score_name = "RMSE"
                score = lambda mean: float(np.sqrt(np.mean(  # noqa: E731
                    (mean @ values - values[eval_codes]) ** 2)))
            else:
                self._score_name = "accuracy"
                score = lambda mean: float(np.mean(  # noqa: E731
                    np.argmax(mean, axis=1) == eval_codes))
        for name in ("eval_proba_", "eval_rmse_", "eval_accuracy_"):
            self.__dict__.pop(name, None)
        targets = codes.astype(np.float64)[:, np.newaxis]
        _, eval_mean, scores = self._fit_chains(X, targets, feature_groups, X_eval, score)
        if X_eval is not None:
            self.eval_proba_ = eval_mean
            if y_eval is not None:
                setattr(self, "eval_rmse_" if kind == "expected" else "eval_accuracy_",
                        scores)
        return self

    # ---- prediction -----------------------------------------------------------------------

    def predict_proba(self, X):
        """Probability of each level, averaged over the kept samples.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        proba : ndarray of shape (n_samples, n_levels)
            Columns in the order of ``levels_``.
        """
        F = self._sample_outputs(self._validate_predict_data(X))[0]
        proba = np.zeros((F.shape[1], self.levels_.shape[0]))
        for f, cutpoints in zip(F, self.cutpoints_samples_):
            proba += level_probabilities(f, cutpoints)
        return kernels.check_finite_predictions(proba / F.shape[0], self,
                                                "level probabilities")

    def predict(self, X):
        """The expected level or the most probable one (``prediction``).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        y : ndarray of shape (n_samples,)
        """
        proba = self.predict_proba(X)
        if self._prediction_kind() == "expected":
            return proba @ self.levels_.astype(np.float64)
        return self.levels_[np.argmax(proba, axis=1)]

    def _n_outputs(self):
        return 1

    # ---- save / load ----------------------------------------------------------------------

    def _model_arrays(self):
        arrays, attributes = super()._model_arrays()
        levels = np.asarray(self.levels_)
        if levels.dtype == object:
            levels = levels.astype(str if not self._numeric(levels) else np.float64)
        arrays["levels"] = levels
        attributes["cutpoint_acceptance_"] = float(self.cutpoint_acceptance_)
        return arrays, attributes

    def _restore_model(self, arrays, attributes):
        arrays = dict(arrays)
        levels = arrays.pop("levels", None)
        cutpoints = arrays.pop("cutpoints_samples", None)
        if levels is None or cutpoints is None:
            raise ModelFileError("model file lacks the arrays ['cutpoints_samples', "
                                 "'levels']")
        if (levels.ndim != 1 or levels.shape[0] < 2 or levels.dtype.kind not in "biufU"
                or np.unique(levels).shape[0] != levels.shape[0]
                or (levels.dtype.kind == "f" and not np.all(np.isfinite(levels)))):
            raise ModelFileError("array 'levels' must hold at least two distinct numbers "
                                 "or strings")
        acceptance = attributes.get("cutpoint_acceptance_")
        if not isinstance(acceptance, float) or not (np.isnan(acceptance)
                                                     or 0 <= acceptance <= 1):
            raise ModelFileError(f"model file has no valid cutpoint_acceptance_ "
                                 f"(got {acceptance!r})")
        super()._restore_model(arrays, attributes)
        if self.prediction == "expected" and not self._numeric(levels):
            raise ModelFileError(f"the model predicts the expected level "
                                 f"(prediction='expected'), but array 'levels' holds "
                                 f"{levels.dtype} values, not numbers")
        self.levels_ = levels
        self.cutpoint_acceptance_ = acceptance
        n_kept = self.P_samples_.shape[0]
        n_cut = levels.shape[0] - 1
        if (cutpoints.shape != (1, n_kept, n_cut) or cutpoints.dtype != np.float64
                or not np.all(np.isfinite(cutpoints)) or np.any(cutpoints[..., 0] != 0)
                or np.any(np.diff(cutpoints, axis=-1) <= 0)):
            raise ModelFileError(f"array 'cutpoints_samples' must hold {n_kept} samples of "
                                 f"{n_cut} increasing finite cutpoints starting at 0")
        self.cutpoints_samples_ = np.array(cutpoints[0])
