"""Variational Bayesian factorization machines of degree 2 (mean-field coordinate ascent).

The model and priors are those of the Gibbs sampler (:mod:`polylite.bayes._sampler`):
Gaussian priors ``N(mu_g, 1 / lam_g)`` on every parameter of a set and feature group,
Normal-Gamma hyperpriors on ``(mu_g, lam_g)`` and a Gamma prior on the noise precision
``alpha``, with libFM's constants; the probit model for binary labels.  The posterior is
approximated by a product of independent factors: a Gaussian per parameter, a Gamma per
precision, a Gaussian per prior mean and, for the probit model, a truncated normal per
latent target.  An iteration replaces each factor in turn by the optimal one given the
others (coordinate ascent on the evidence lower bound, ELBO, which therefore never
decreases): the noise precision, the priors, then every parameter in the order and with
the passes of coordinate descent (:func:`polylite._engine._cd.cd_epoch` with
``prior.variance``), then the latent targets.
"""
import math
import time
import warnings
from typing import NamedTuple

import numpy as np
from scipy.special import digamma, gammaln, log_ndtr, ndtr
from sklearn.base import RegressorMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from .. import kernels
from .._classification import ClassifierLayer, one_vs_rest_probabilities
from .._engine.layouts import layout_of
from .._io import ModelFileError, check_array_names, check_float_arrays, register_model
from .._validation import check_number, row_threads, store_init_params
from .._engine import _cd, _losses, solvers
from ..polynomial._base import _OutputParams, check_model_memory
from .._engine.problem import Problem
from ._sampler import ALPHA_0, BETA_0, GAMMA_0, MU_0, FeatureGroups
from ._variational import output_variance
from .fm import _BayesianFactorizationMachine, probit_targets

__all__ = ["VariationalFactorizationMachineRegressor",
           "VariationalFactorizationMachineClassifier"]

_LOG_2PI = math.log(2 * math.pi)


class Variances(NamedTuple):
    """The variances of the parameters' Gaussian factors (float64, shaped like them), and
    where a sweep adds the change of the linear weights' and factors' share of
    sum_i Var f(x_i)."""
    intercept: np.ndarray  # (1,)
    w: np.ndarray          # (n_features,)
    P: np.ndarray          # (1, n_features, n_components)
    output_change: np.ndarray  # (1,): of the shares of w and P


class VariationalPrior(NamedTuple):
    """The ``prior`` of :func:`polylite._engine._cd.cd_epoch` for a mean-field sweep:
    the expected precisions as penalties (E[lam] / (E[alpha] n)) and expected means, the
    variance scale 1 / (E[alpha] n) and the variances, updated in place."""
    feature_group: np.ndarray
    w_reg: np.ndarray
    w_mean: np.ndarray
    P_reg: np.ndarray
    P_mean: np.ndarray
    gamma_reg: np.ndarray
    gamma_mean: np.ndarray
    scale: float
    seed: int
    variance: Variances
    relaxation: float  # of the factors' means, in (0, 2) (1: coordinate ascent)


class GroupFactors:
    """The factors of one parameter set's priors, per group and column (G, c):
    q(lam) = Gamma(shape, rate) and q(mu) = N(mu_mean, mu_var)."""

    def __init__(self, n_groups, n_columns):
        self.shape = np.full((n_groups, n_columns), 0.5 * (ALPHA_0 + 1))
        self.rate = np.full((n_groups, n_columns), 0.5 * (ALPHA_0 + 1))  # E[lam] = 1
        self.mu_mean = np.zeros((n_groups, n_columns))
        self.mu_var = np.ones((n_groups, n_columns))

    @property
    def lam(self):
        return self.shape / self.rate

    def _spread(self, mean, var, groups):
        """sum_{j in g} E[(theta_j - mu_g)^2] per group and column."""
        deviation = mean - self.mu_mean[groups.index]
        return (groups.sums(deviation * deviation + var)
                + groups.counts[:, np.newaxis] * self.mu_var)

    def update(self, mean, var, groups):
        """q(lam) given q(mu) and the parameters' factors (means, variances (d, c)), then
        q(mu) given q(lam)."""
        mean = np.asarray(mean, dtype=np.float64)
        count = groups.counts[:, np.newaxis]
        self.shape = np.broadcast_to(0.5 * (ALPHA_0 + count + 1), self.rate.shape).copy()
        self.rate = 0.5 * (GAMMA_0 + BETA_0 * ((self.mu_mean - MU_0) ** 2 + self.mu_var)
                           + self._spread(mean, var, groups))
        self.mu_mean = (groups.sums(mean) + BETA_0 * MU_0) / (count + BETA_0)
        self.mu_var = 1.0 / (self.lam * (count + BETA_0))

    def elbo(self, mean, var, groups):
        """This set's terms of the ELBO: E[log p(theta | mu, lam) + log p(mu | lam) +
        log p(lam)] and the entropies of q(theta), q(mu) and q(lam)."""
        log_lam = digamma(self.shape) - np.log(self.rate)
        lam = self.lam
        count = groups.counts[:, np.newaxis]
        value = (0.5 * count * (log_lam - _LOG_2PI) - 0.5 * lam * self._spread(mean, var, groups)
                 + 0.5 * (math.log(BETA_0) + log_lam - _LOG_2PI)
                 - 0.5 * BETA_0 * lam * ((self.mu_mean - MU_0) ** 2 + self.mu_var)
                 + _gamma_log_prior(log_lam, lam)
                 + _gamma_entropy(self.shape, self.rate)
                 + _normal_entropy(self.mu_var))
        return float(np.sum(value) + np.sum(_normal_entropy(var)))


def _gamma_log_prior(log_x, x):
    """E[log Gamma(x | ALPHA_0 / 2, GAMMA_0 / 2)] from E[log x] and E[x]."""
    a, b = 0.5 * ALPHA_0, 0.5 * GAMMA_0
    return a * math.log(b) - math.lgamma(a) + (a - 1) * log_x - b * x


def _gamma_entropy(shape, rate):
    return shape - np.log(rate) + gammaln(shape) + (1 - shape) * digamma(shape)


def _normal_entropy(var):
    return 0.5 * (np.log(var) + _LOG_2PI + 1)


class MeanField:
    """One output's mean-field posterior: the parameters' means (``params``, updated in
    place) and variances, the priors' and the noise's factors, the expected outputs on
    the training rows and the sum of their variances, and, for the probit model, the
    expected latent targets.  ``data`` is :func:`polylite._engine.solvers.cd_data` of X with
    uniform weights; ``groups`` a :class:`polylite.bayes._sampler.FeatureGroups`."""

    def __init__(self, X, y, data, params, groups, *, fit_intercept, fit_linear, probit,
                 init_variance, workspace, relaxation, n_jobs=None):
        self.X, self.data, self.params, self.groups = X, data, params, groups
        self.relaxation = relaxation
        self.fit_intercept, self.fit_linear, self.probit = fit_intercept, fit_linear, probit
        self.workspace, self.n_jobs = workspace, n_jobs
        self.y = np.ascontiguousarray(y, dtype=np.float64)
        n, d = X.shape
        k = params.P.shape[2]
        self.sample_weight = np.full(n, 1.0 / n)
        self.variance = Variances(np.full(1, init_variance if fit_intercept else 0.0),
                                  np.full(d, init_variance if fit_linear else 0.0),
                                  np.full(params.P.shape, init_variance), np.zeros(1))
        self.w_prior = GroupFactors(groups.n_groups, 1)
        self.P_prior = GroupFactors(groups.n_groups, k)
        # q(alpha) = Gamma(alpha_shape, alpha_rate); the probit model's alpha is 1.
        self.alpha_shape = 0.5 * (ALPHA_0 + n)
        self.alpha_rate = self.alpha_shape
        self.y_pred = self.predict(X)
        # The linear weights' and factors' share of sum_i Var f(x_i), which the sweeps
        # keep up to date.
        self.weights_variance = float(np.sum(output_variance(
            X, params.P[0], self.variance.P[0], self.variance.w if fit_linear else None,
            0.0, row_threads(n_jobs, X.shape[0]))))
        self.target = self.y if not probit else self._latent_means()
        self._elbo_squared_error = None  # set by elbo(), read by the next iteration

    # ---- the model on rows ---------------------------------------------------------------

    def predict(self, X):
        """E[f(x)] on the rows of X: the model at the means (validated CSR), float64."""
        p = self.params
        return kernels.predict(X, p.P, degrees=[2], intercept=p.intercept[0],
                               w=p.w if self.fit_linear else None, check_input=False,
                               n_jobs=self.n_jobs).astype(np.float64)

    def predict_variance(self, X):
        """Var f(x) on the rows of X under the factors (validated CSR)."""
        v = self.variance
        return output_variance(X, self.params.P[0], v.P[0], v.w if self.fit_linear else None,
                               float(v.intercept[0]), row_threads(self.n_jobs, X.shape[0]))

    # ---- the updates -------------------------------------------------------------------

    @property
    def alpha(self):
        """E[alpha] (1 for the probit model)."""
        return 1.0 if self.probit else self.alpha_shape / self.alpha_rate

    def output_variance_sum(self):
        """sum_i Var f(x_i) over the training rows under the factors."""
        return (self.X.shape[0] * float(self.variance.intercept[0])
                + self.weights_variance)

    def _squared_error(self):
        """sum_i E[(target_i - f(x_i))^2] given the factors (targets: E[z] for probit)."""
        residual = self.target - self.y_pred
        # (not residual @ residual: BLAS would wake its threads for one dot product)
        return float(np.sum(residual * residual)) + self.output_variance_sum()

    def iterate(self):
        """One iteration of coordinate ascent: the noise's factor, the priors', every
        parameter's, the latent targets'; returns the ELBO after it, or raises
        FloatingPointError if it is not finite (the means or outputs overflowed)."""
        if not self.probit:
            # (the last ELBO's, when nothing has moved since)
            squared = self._elbo_squared_error
            self.alpha_rate = 0.5 * (GAMMA_0 + (
                squared if squared is not None else self._squared_error()))
        p, v = self.params, self.variance
        if self.fit_linear:
            self.w_prior.update(p.w[:, np.newaxis], v.w[:, np.newaxis], self.groups)
        self.P_prior.update(p.P[0], v.P[0], self.groups)
        self.update_parameters()
        self._elbo_squared_error = None
        if self.probit:
            self.target = self._latent_means()
        with np.errstate(over="ignore", invalid="ignore"):
            elbo = self.elbo()
        if not np.isfinite(elbo):
            raise FloatingPointError("the factors' means or the outputs are not finite")
        return elbo

    def update_parameters(self):
        """Every parameter's factor in turn, given the others: a mean-field sweep of
        coordinate descent's passes under the expected precisions and means."""
        n, k = self.X.shape[0], self.params.P.shape[2]
        unit = 1.0 / (self.alpha * n)
        if not (np.isfinite(unit) and unit > 0):
            raise FloatingPointError(f"the expected noise precision, {self.alpha:.3g}, "
                                     f"leaves no finite variance")
        w, P = self.w_prior, self.P_prior
        prior = VariationalPrior(self.groups.index, w.lam[:, 0] * unit, w.mu_mean[:, 0],
                                 (P.lam * unit)[np.newaxis], P.mu_mean[np.newaxis],
                                 np.ones(k), np.zeros(k), unit, 0, self.variance,
                                 self.relaxation)
        problem = Problem(self.target, self.sample_weight, kernels.KERNELS["anova"],
                            np.array([2], dtype=np.intc), _losses.loss_code("squared"),
                            0.0, 0.0, self.fit_intercept, self.fit_linear)
        self.variance.output_change[0] = 0.0
        with np.errstate(over="ignore", invalid="ignore"):
            _cd.cd_epoch(self.data, problem, self.params, self.y_pred,
                         workspace=self.workspace, prior=prior)
        self.weights_variance += float(self.variance.output_change[0])

    def _latent_means(self):
        """E[z_i] under q(z_i): N(E f(x_i), 1) truncated to the side of y_i."""
        f, y = self.y_pred, self.y
        # phi(f) / Phi(y f), from logarithms (no 0 / 0 far on the wrong side).
        ratio = np.exp(-0.5 * f * f - 0.5 * _LOG_2PI - log_ndtr(y * f))
        return f + y * ratio

    def elbo(self):
        """The evidence lower bound of the current factors (up to a constant: the
        intercept's prior is flat)."""
        value = 0.0
        n = self.X.shape[0]
        if self.probit:
            value += float(np.sum(log_ndtr(self.y * self.y_pred))
                           - 0.5 * self.output_variance_sum())
        else:
            a, b = self.alpha_shape, self.alpha_rate
            log_alpha = digamma(a) - math.log(b)
            self._elbo_squared_error = self._squared_error()
            value += (0.5 * n * (log_alpha - _LOG_2PI)
                      - 0.5 * (a / b) * self._elbo_squared_error
                      + _gamma_log_prior(log_alpha, a / b) + _gamma_entropy(a, b))
        p, v = self.params, self.variance
        if self.fit_intercept:
            value += float(_normal_entropy(v.intercept[0]))
        if self.fit_linear:
            value += self.w_prior.elbo(p.w[:, np.newaxis].astype(np.float64),
                                       v.w[:, np.newaxis], self.groups)
        value += self.P_prior.elbo(p.P[0].astype(np.float64), v.P[0], self.groups)
        return value


_PARAMS_DOC = """
    Parameters
    ----------
    n_components : int, default=8
        Rank k of the factor matrix (degree-2 interactions).
    fit_linear : bool, default=True
        Fit the linear term ``<w, x>`` (else it is 0).
    fit_intercept : bool, default=True
        Fit the intercept, under a flat prior (else it is 0).
    max_iter : int, default=100
        Largest number of iterations (one iteration updates every factor once and costs
        about one coordinate descent epoch).
    tol : float, default=1e-4
        Stop when an iteration raises the evidence lower bound by less than ``tol``
        nats per training row (``elbo_`` records it after each iteration).
    init_scale : float, default=0.1
        Standard deviation of the normal initialisation of the means of the linear
        weights and factors, and their initial standard deviation; > 0.
    relaxation : float, default=1.7
        Over-relaxation of the factors' means, in (0, 2): each update moves a factor's
        mean this many times its coordinate-ascent step (1: plain coordinate ascent).
        Given the other factors the ELBO is a concave quadratic in each mean, so it
        still never decreases, and the fit converges to the same kind of fixed point,
        in fewer iterations where the factors are strongly coupled (users and items
        seen together: about 18 instead of 32 on MovieLens 100K).  The intercept's and
        the linear weights' steps are not relaxed.
    random_state : int, RandomState instance or None, default=None
        Seed of the initialisation; the iterations themselves are deterministic.
    verbose : int, default=0
        Print a line per iteration when > 0: the ELBO and, for regression, the expected
        noise precision.
    n_jobs : int or None, default=None
        Threads that share each iteration's passes over the rows, as the coordinate
        descent of :class:`~polylite.FactorizationMachineRegressor`, and the rows of
        predictions (None: 1; -1: every CPU).  Results agree across ``n_jobs`` to
        rounding (sums are added in another order).
"""

_MODEL_DOC = """
    The model and its priors are those of the Gibbs sampler of
    :class:`~polylite.BayesianFactorizationMachineRegressor` at degree 2: Gaussian
    priors whose precisions and means have Gamma and normal hyperpriors (one pair for the
    linear weights and one per component, or per feature group with ``feature_groups``),
    so there is no regularisation to tune.  Instead of sampling, ``fit`` approximates the
    posterior by independent factors (mean field: a Gaussian per parameter, a Gamma per
    precision, a Gaussian per prior mean) and improves them by coordinate ascent on the
    evidence lower bound (the factors' means over-relaxed, see ``relaxation``), which
    never decreases, until it stops rising; each iteration takes the passes and caches
    of coordinate descent.  It is a deterministic fit in a couple of dozen iterations
    where the sampler takes a few hundred sweeps, at the price of
    the mean-field approximation: the factors' variances are smaller than the
    posterior's.  Relational input is not taken (give ``X.to_csr()``).
"""


class _VariationalFactorizationMachine(_BayesianFactorizationMachine):
    """Fit and prediction shared by the regressor and the classifier: one mean-field
    posterior per output (one for regression and two classes, one per class for more),
    updated in turn."""

    _fitted_attribute = "P_"
    # What the helpers shared with the Gibbs estimators read (not parameters here).
    degree = 2
    kernel = "anova"
    lower_degrees = "separate"
    _takes_relational = False
    _fit_time = "fitting time"
    _iteration_callback = None  # called after each iteration with (iteration, max_iter,
                                # ELBO per row, seconds so far)

    def _check_params(self):
        self._check_shared_params()
        check_number(self.max_iter, "max_iter", low=1, integer=True)
        check_number(self.tol, "tol", low=0)
        # (from means and variances of 0 the factors would never move)
        check_number(self.init_scale, "init_scale", low=0, low_open=True)
        check_number(self.relaxation, "relaxation", low=0, high=2, low_open=True,
                     high_open=True)

    def _check_memory(self, n_features, n_outputs):
        """Refuse (ValueError) means and variances larger than this machine's memory:
        ``fit`` checks its data so, and ``polylite.load`` a model file."""
        k = self.n_components
        check_model_memory(n_outputs * 2 * (1 + n_features + n_features * k), 8, k,
                           "outputs, features, components", (n_outputs, n_features, k))

    def fit(self, X, y, *, feature_groups=None):
        """Fit the mean-field posterior of the model given (X, y).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training data; sparse input is used as it is (CSR), never densified.
        y : array-like of shape (n_samples,)
            Targets (regressor), or class labels, two or more classes (classifier).
        feature_groups : array-like of shape (n_features,), default=None
            A group label for each feature (for instance its field: user, item, ...);
            each group has its own prior precision and mean per parameter set and
            component.  None: one group.

        Returns
        -------
        self : object
        """
        X, y = self._validate_fit_data(X, y)
        self._fit_posteriors(X, self._targets(y), feature_groups)
        return self

    def _validate_fit_data(self, X, y):
        if layout_of(X).stored_once:
            raise TypeError(f"{type(self).__name__} does not take relational input; give "
                            f"X.to_csr(), or sample the posterior with the Gibbs "
                            f"estimators, which do")
        return super()._validate_fit_data(X, y)

    def _validate_predict_data(self, X):
        check_is_fitted(self)
        layout = layout_of(X)
        if layout.stored_once:  # its kernels compute every row's features
            X = layout.to_csr(X)
            layout = layout_of(X)
        return layout.validate(self, X, reset=False, dtype=self.P_.dtype,
                               accept_dense=False)

    def _fit_posteriors(self, X, targets, feature_groups):
        """Fit a mean-field posterior per column of ``targets`` (n, n_outputs); returns
        them (their parameters installed as the fitted attributes)."""
        self._check_params()
        n, d = X.shape
        n_outputs, k = targets.shape[1], self.n_components
        self._check_memory(d, n_outputs)
        self._warn_components_beyond_interactions(d)
        if not self._is_classifier:
            self._check_fit_targets(targets)
        rng = check_random_state(self.random_state)
        index, n_groups = self._check_feature_groups(feature_groups, d)
        groups = FeatureGroups(index, n_groups)
        data = solvers.cd_data(X, np.full(n, 1.0 / n), "anova", self.n_jobs)
        workspace = {}  # cd_epoch's work arrays, shared by the outputs
        posteriors = []
        for o in range(n_outputs):
            with np.errstate(over="ignore"):
                # Random linear weights as well as factors: the updates settle in
                # fewer iterations than from w = 0.
                params = _OutputParams(
                    intercept=np.zeros(1, X.dtype),
                    w=rng.normal(0.0, self.init_scale if self.fit_linear else 0.0,
                                 d).astype(X.dtype),
                    P=rng.normal(0.0, self.init_scale, (1, d, k)).astype(X.dtype),
                    gamma=np.zeros((0, k), X.dtype), lam=np.ones(k, X.dtype))
            self._check_start(X, params)
            posteriors.append(MeanField(
                X, targets[:, o], data, params, groups,
                fit_intercept=bool(self.fit_intercept), fit_linear=bool(self.fit_linear),
                probit=self._is_classifier,
                init_variance=self.init_scale ** 2, relaxation=float(self.relaxation),
                workspace=workspace, n_jobs=self.n_jobs))
            with np.errstate(over="ignore", invalid="ignore"):
                start_error = posteriors[-1]._squared_error()
            if not np.isfinite(start_error):
                raise ValueError(f"{type(self).__name__}: the initial model's outputs on "
                                 f"X, or their squares, overflow: {self._scale_advice(X)}")
        history = [[] for _ in range(n_outputs)]  # each output's ELBO per row
        active = np.ones(n_outputs, dtype=bool)
        start = time.perf_counter()
        for iteration in range(self.max_iter):
            for o in np.flatnonzero(active):
                try:
                    history[o].append(posteriors[o].iterate() / n)
                except FloatingPointError as exc:
                    where = f"iteration {iteration + 1}" + (
                        f", output {o}" if n_outputs > 1 else "")
                    raise FloatingPointError(
                        f"{type(self).__name__}: the updates diverged at {where} ({exc}): "
                        f"{self._scale_advice(X, targets)}") from None
                if len(history[o]) > 1 and history[o][-1] - history[o][-2] < self.tol:
                    active[o] = False
            current = np.array([h[-1] for h in history])
            if self.verbose:
                self._report(iteration + 1, current, posteriors, time.perf_counter() - start)
            if self._iteration_callback is not None:
                self._iteration_callback(iteration + 1, self.max_iter,
                                         float(np.mean(current)),
                                         time.perf_counter() - start)
            if not active.any():
                break
        self.n_iter_ = iteration + 1
        self.converged_ = not active.any()
        if not self.converged_:
            warnings.warn(f"{type(self).__name__} stopped after max_iter={self.max_iter} "
                          f"iterations before the ELBO settled (tol={self.tol}); raise "
                          f"max_iter", ConvergenceWarning, stacklevel=3)
        # (an output that stopped earlier keeps its last value)
        elbo = np.array([h + h[-1:] * (self.n_iter_ - len(h)) for h in history])
        self.elbo_ = elbo if self._is_classifier else elbo[0]
        if not self._is_classifier:
            for o, posterior in enumerate(posteriors):
                kernels.check_fitted_scale(self, X, targets[:, o], posterior.y_pred)
        self.feature_groups_ = index
        self._install(posteriors)
        return posteriors

    def _install(self, posteriors):
        """The fitted attributes: the factors' means and variances (with a leading axis
        over the outputs for the classifier)."""
        fitted = {
            "intercept_": np.array([q.params.intercept[0] for q in posteriors]),
            "w_": np.stack([q.params.w for q in posteriors]),
            "P_": np.stack([q.params.P for q in posteriors]),
            "intercept_var_": np.array([q.variance.intercept[0] for q in posteriors]),
            "w_var_": np.stack([q.variance.w for q in posteriors]),
            "P_var_": np.stack([q.variance.P for q in posteriors])}
        if not self._is_classifier:
            self.alpha_ = float(posteriors[0].alpha)
        self._publish_fitted(fitted)

    def _publish_fitted(self, fitted):
        for name, value in fitted.items():
            setattr(self, name, value if self._is_classifier else value[0])

    def _fitted(self):
        """The fitted arrays, each with a leading axis over the outputs."""
        return {name: (getattr(self, name) if self._is_classifier
                       else np.asarray(getattr(self, name))[np.newaxis])
                for name in _FITTED}

    def _report(self, iteration, elbo, posteriors, elapsed):
        line = f"iteration {iteration:4d}  ELBO per row {np.mean(elbo):.6f}"
        if not self._is_classifier:
            alpha = posteriors[0].alpha
            line += f"  alpha {alpha:.4g} (noise sd {alpha ** -0.5:.4g})"
        print(f"{line}  {elapsed:.2f}s", flush=True)

    def _moments(self, X, variance=True):
        """E[f(x)] and Var f(x) of each output on X: two (n_outputs, n_samples) arrays
        (the second None without ``variance``)."""
        X = self._validate_predict_data(X)
        fitted = self._fitted()
        mean = np.empty((fitted["P_"].shape[0], X.shape[0]))
        var = np.empty_like(mean)
        threads = row_threads(self.n_jobs, X.shape[0])
        for o in range(mean.shape[0]):
            w = fitted["w_"][o] if self.fit_linear else None
            mean[o] = kernels.predict(X, fitted["P_"][o], degrees=[2],
                                      intercept=fitted["intercept_"][o], w=w,
                                      check_input=False, n_jobs=self.n_jobs)
            if variance:
                var[o] = output_variance(X, fitted["P_"][o][0], fitted["P_var_"][o][0],
                                         fitted["w_var_"][o] if self.fit_linear else None,
                                         float(fitted["intercept_var_"][o]), threads)
        kernels.check_finite_predictions(mean.T, self, "expected outputs")
        if not variance:
            return mean, None
        kernels.check_finite_predictions(var.T, self, "output variances")
        return mean, var

    # ---- save / load (polylite._io) --------------------------------------------------------

    def _compact_model_arrays(self, arrays, attributes):
        """Stored as fitted: the file holds one mean and one variance per parameter, not
        samples, so it is small already."""
        return arrays, attributes

    def _model_arrays(self):
        arrays = {name.rstrip("_"): a for name, a in self._fitted().items()}
        arrays["feature_groups"] = self.feature_groups_.astype(np.int64)
        attributes = {"n_iter_": int(self.n_iter_), "converged_": bool(self.converged_)}
        if not self._is_classifier:
            attributes["alpha_"] = float(self.alpha_)
        return arrays, attributes

    def _restore_model(self, arrays, attributes):
        names = {name.rstrip("_") for name in _FITTED} | {"feature_groups"}
        check_array_names(arrays, names, owner=type(self).__name__)
        P = arrays["P"]
        n_outputs, d, k = self._n_outputs(), self.n_features_in_, self.n_components
        if P.ndim != 4 or P.shape[0] != n_outputs:
            raise ModelFileError(f"array 'P' has shape {P.shape}; expected ({n_outputs}, "
                                 f"1, {d}, {k})")
        means = {"intercept": (n_outputs,), "w": (n_outputs, d), "P": (n_outputs, 1, d, k)}
        check_float_arrays(arrays, means, P.dtype)
        check_float_arrays(arrays, {f"{name}_var": shape for name, shape in means.items()},
                           np.float64)
        if not all(np.all(arrays[f"{name}_var"] >= 0) for name in means):
            raise ModelFileError("the model file's variances must be >= 0")
        self._check_memory(d, n_outputs)
        n_iter = attributes.get("n_iter_")
        if isinstance(n_iter, bool) or not isinstance(n_iter, int) or n_iter < 1:
            raise ModelFileError(f"model file has no valid n_iter_ (got {n_iter!r})")
        converged = attributes.get("converged_")
        if not isinstance(converged, bool):
            raise ModelFileError(f"model file has no valid converged_ (got {converged!r})")
        if not self._is_classifier:
            alpha = attributes.get("alpha_")
            if not isinstance(alpha, float) or not (np.isfinite(alpha) and alpha > 0):
                raise ModelFileError(f"model file has no valid alpha_ (got {alpha!r})")
            self.alpha_ = alpha
        groups = arrays["feature_groups"]
        if (groups.shape != (d,) or groups.dtype.kind not in "iu"
                or (d > 0 and (groups.min() < 0 or groups.max() >= d))):
            raise ModelFileError(f"array 'feature_groups' must hold a group index in "
                                 f"[0, {d}) for each of the {d} features")
        self.n_iter_ = n_iter
        self.converged_ = converged
        self.feature_groups_ = groups.astype(np.intp)
        self._publish_fitted({name: np.array(arrays[name.rstrip("_")]) for name in _FITTED})


_FITTED = ("intercept_", "w_", "P_", "intercept_var_", "w_var_", "P_var_")

_ATTRIBUTES_DOC = """
    feature_groups_ : ndarray of shape (n_features,)
        Each feature's group index (all 0 without ``feature_groups``).
    n_iter_ : int
        Number of iterations run.
    converged_ : bool
        Whether the ELBO settled (else ``fit`` warned that max_iter was reached).
    n_features_in_ : int
"""


@register_model
class VariationalFactorizationMachineRegressor(RegressorMixin,
                                              _VariationalFactorizationMachine):
    __doc__ = """Variational Bayesian factorization machine regressor (degree 2).

    ``y = f(x) + noise``, ``f(x) = intercept + <w, x> + sum_s A_2(P[0, :, s], x)`` as in
    :class:`~polylite.FactorizationMachineRegressor`, Gaussian noise of precision
    ``alpha``; the posterior is approximated by mean-field variational inference.
    Predictions are the expected output, with its posterior standard deviation on
    request.
    """ + _MODEL_DOC + _PARAMS_DOC + """
    Attributes
    ----------
    intercept_ : float
        The mean of the intercept's factor (the ``*_var_`` attributes: the variances).
    w_ : ndarray of shape (n_features,)
    P_ : ndarray of shape (1, n_features, n_components)
    intercept_var_ : float
    w_var_ : ndarray of shape (n_features,)
    P_var_ : ndarray of shape (1, n_features, n_components)
    alpha_ : float
        The expected noise precision.
    elbo_ : ndarray of shape (n_iterations,)
        The evidence lower bound per training row after each of the ``n_iter_``
        iterations (up to a constant), non-decreasing.""" + _ATTRIBUTES_DOC + """
    Examples
    --------
    >>> import numpy as np
    >>> from polylite import VariationalFactorizationMachineRegressor
    >>> X = np.random.RandomState(0).rand(50, 4)
    >>> y = X[:, 0] * X[:, 1] + X[:, 2]
    >>> fm = VariationalFactorizationMachineRegressor(n_components=2, random_state=0)
    >>> mean, std = fm.fit(X, y).predict(X[:2], return_std=True)
    >>> mean.shape, std.shape
    ((2,), (2,))
    """

    def __init__(self, n_components=8, *, fit_linear=True, fit_intercept=True,
                 max_iter=100, tol=1e-4, init_scale=0.1, relaxation=1.7,
                 random_state=None, verbose=0, n_jobs=None):
        store_init_params(self, locals())

    @staticmethod
    def _targets(y):
        """The one output's targets: y as a column."""
        return np.asarray(y, dtype=np.float64)[:, np.newaxis]

    def predict(self, X, return_std=False):
        """The expected output under the posterior.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        return_std : bool, default=False
            Also return the posterior standard deviation of f(x) (the model's
            uncertainty; the noise, of variance about ``1 / alpha_``, comes on top for a
            new observation).

        Returns
        -------
        y_mean : ndarray of shape (n_samples,)
        y_std : ndarray of shape (n_samples,)
            Only with ``return_std``.
        """
        mean, var = self._moments(X, variance=return_std)
        if return_std:
            return mean[0], np.sqrt(var[0])
        return mean[0]

    def _n_outputs(self):
        return 1


@register_model
class VariationalFactorizationMachineClassifier(ClassifierLayer,
                                               _VariationalFactorizationMachine):
    __doc__ = """Variational Bayesian factorization machine classifier (degree 2).

    The probit model of :class:`~polylite.BayesianFactorizationMachineClassifier`,
    ``P(y = 1 | x) = Phi(f(x))``, with latent targets ``z ~ N(f(x), 1)`` truncated to the
    side of the label, whose factors are truncated normals; the posterior is approximated
    by mean-field variational inference.  Probabilities are
    ``Phi(E[f(x)] / sqrt(1 + Var f(x)))``, the probit model averaged over a Gaussian of
    the output's posterior mean and variance.  Multi-class problems are solved
    one-vs-rest (one posterior per class, probabilities normalised to sum to one).
    """ + _MODEL_DOC + _PARAMS_DOC + """
    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    intercept_ : ndarray of shape (n_outputs,)
        The means of each output's intercept factor (n_outputs is 1 for two classes,
        else n_classes; the ``*_var_`` attributes: the variances).
    w_ : ndarray of shape (n_outputs, n_features)
    P_ : ndarray of shape (n_outputs, 1, n_features, n_components)
    intercept_var_ : ndarray of shape (n_outputs,)
    w_var_ : ndarray of shape (n_outputs, n_features)
    P_var_ : ndarray of shape (n_outputs, 1, n_features, n_components)
    elbo_ : ndarray of shape (n_outputs, n_iterations)
        Each output's evidence lower bound per training row after each of the
        ``n_iter_`` iterations (up to a constant), non-decreasing; an output that
        stopped earlier keeps its last value.""" + _ATTRIBUTES_DOC

    _is_classifier = True

    def __init__(self, n_components=8, *, fit_linear=True, fit_intercept=True,
                 max_iter=100, tol=1e-4, init_scale=0.1, relaxation=1.7,
                 random_state=None, verbose=0, n_jobs=None):
        store_init_params(self, locals())

    def _targets(self, y):
        """The probit outputs' targets (and ``classes_``)."""
        return probit_targets(self, y)

    def _class_scores(self, X):
        """The probit score ``E[f(x)] / sqrt(1 + Var f(x))`` of each output, whose
        ``Phi`` is the output's probability."""
        mean, var = self._moments(X)
        return (mean / np.sqrt(1.0 + var)).T

    def _class_proba(self, X):
        """Binary: ``[1 - p, p]`` with ``p = Phi(score)`` (:meth:`decision_function`).
        Multi-class: each class's one-vs-rest probability, normalised to sum to one."""
        return one_vs_rest_probabilities(ndtr(self._class_scores(X)))

    def _predict_scores(self, X):
        """The most probable class under :meth:`predict_proba`."""
        return self._class_proba(X)

    def _n_outputs(self):
        n_classes = self.classes_.shape[0]
        return 1 if n_classes == 2 else n_classes
