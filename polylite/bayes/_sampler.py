"""Gibbs sampling of a factorization machine of any degree, one output per chain.

The model (Freudenthaler, Schmidt-Thieme and Rendle 2011; Rendle 2012, section 4.3):

- likelihood (a :class:`Gaussian`, :class:`Probit` or :class:`OrderedProbit` object):
  ``y_i ~ N(f(x_i), 1 / alpha)`` for regression; the probit model for binary labels
  ``y_i`` in {-1, +1}: a latent ``z_i ~ N(f(x_i), 1)`` with ``y_i = sign(z_i)``, so
  ``P(y_i = 1) = Phi(f(x_i))`` (alpha is then 1); the ordered probit model for levels
  ``y_i`` in {0, ..., L - 1}: ``y_i = j`` when ``c_j < z_i <= c_{j+1}``, with cutpoints
  ``-inf = c_0 < c_1 = 0 < c_2 < ... < c_{L-1} < c_L = inf`` (c_1 is fixed at 0, since the
  intercept already sets the location; Albert and Chib 1993);
- priors: every parameter of a set (the linear weights; the factors of component s of
  factor block b; the dummy features' parameters of component s) that belongs to feature
  group g is ``N(mu_g, 1 / lam_g)``, with a pair (mu_g, lam_g) per set and group; the
  intercept's prior is flat;
- hyperpriors: ``lam_g ~ Gamma(ALPHA_0 / 2, GAMMA_0 / 2)`` (shape, rate),
  ``mu_g | lam_g ~ N(MU_0, 1 / (BETA_0 lam_g))``, ``alpha ~ Gamma(ALPHA_0 / 2, GAMMA_0 / 2)``,
  with libFM's values of these constants.

A sweep draws the hyperparameters given the parameters (conjugate Gamma and normal draws in
NumPy, O(d k m)), then every parameter given all others: the coordinate descent epoch of
:func:`polylite._engine._cd.cd_epoch` with a prior, which replaces each step by a draw
from the coordinate's Gaussian conditional, over-relaxed (Adler 1981) when the chain's
``relaxation`` is not 1; then, for the probit models, the cutpoints (ordered probit) and
the latent targets.

The chain starts from the estimator's random parameters (the linear weights and factors
``N(0, init_scale^2)``, as libFM and myFM start) with the intercept at the mean of the
initial targets, so that the first noise precision is drawn from centred residuals.
"""
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from scipy.special import log_ndtr, ndtri, ndtri_exp

from .. import kernels
from .._engine import _cd, _losses
from .._engine.problem import Problem

# libFM's hyper-hyperparameters.
ALPHA_0 = 1.0
BETA_0 = 1.0
GAMMA_0 = 1.0
MU_0 = 0.0


class GibbsPrior(NamedTuple):
    """The ``prior`` argument of :func:`polylite._engine._cd.cd_epoch` (see there):
    precisions as penalties (lam / (alpha n)) and means of each set and group, the
    variance scale 1 / (alpha n) of the draws, the sweep's seed and the draws'
    over-relaxation."""
    feature_group: np.ndarray  # (d,) intp
    w_reg: np.ndarray          # (G,)
    w_mean: np.ndarray         # (G,)
    P_reg: np.ndarray          # (n_blocks, G, k)
    P_mean: np.ndarray         # (n_blocks, G, k)
    gamma_reg: np.ndarray      # (k,)
    gamma_mean: np.ndarray     # (k,)
    scale: float
    seed: int
    relaxation: float = 1.0    # the draws' over-relaxation, in (0, 2) (1: Gibbs draws)


class FeatureGroups:
    """Each column's group (``index``, (d,) intp in [0, n_groups)) and sums over groups."""

    def __init__(self, index, n_groups):
        self.index = np.ascontiguousarray(index, dtype=np.intp)
        self.n_groups = int(n_groups)
        self.counts = np.bincount(self.index, minlength=self.n_groups).astype(np.float64)
        d = self.index.shape[0]
        self._indicator = None if self.n_groups == 1 else sp.csr_matrix(
            (np.ones(d), (self.index, np.arange(d))), shape=(self.n_groups, d))

    def sums(self, values):
        """Sum of the rows of ``values`` (d, k) over each group: (n_groups, k)."""
        if self._indicator is None:
            return values.sum(axis=0, keepdims=True)
        return np.asarray(self._indicator @ values)


class Hyperparameters:
    """The chain's hyperparameters: noise precision ``alpha`` and the prior precisions
    ``*_lam`` and means ``*_mu`` of the linear weights (G,), the factors (n_blocks, G, k)
    and the dummies (k,)."""

    def __init__(self, n_blocks, n_groups, k):
        self.alpha = 1.0
        self.w_lam, self.w_mu = np.ones(n_groups), np.zeros(n_groups)
        self.P_lam = np.ones((n_blocks, n_groups, k))
        self.P_mu = np.zeros((n_blocks, n_groups, k))
        self.gamma_lam, self.gamma_mu = np.ones(k), np.zeros(k)


def draw_group_prior(rng, theta, groups, mu):
    """Draw (lam, mu) of each group and column of ``theta`` (d, k) given theta and the
    previous means ``mu`` (G, k): first lam | mu, theta, then mu | lam, theta (libFM's
    order); returns the new (lam, mu), each (G, k)."""
    theta = np.asarray(theta, dtype=np.float64)
    count = groups.counts[:, np.newaxis]
    deviation = theta - mu[groups.index]
    rate = 0.5 * (GAMMA_0 + BETA_0 * (mu - MU_0) ** 2 + groups.sums(deviation * deviation))
    lam = rng.gamma(0.5 * (ALPHA_0 + count + 1), 1.0 / rate)
    mean = (groups.sums(theta) + BETA_0 * MU_0) / (count + BETA_0)
    mu = mean + rng.standard_normal(mean.shape) / np.sqrt((count + BETA_0) * lam)
    return lam, mu


def draw_noise_precision(rng, residuals):
    """alpha | residuals: Gamma((ALPHA_0 + n) / 2, rate (GAMMA_0 + sum r_i^2) / 2)."""
    squares = float(np.einsum("i,i->", residuals, residuals))
    return rng.gamma(0.5 * (ALPHA_0 + residuals.shape[0]), 2.0 / (GAMMA_0 + squares))


def _mirrored(a, b):
    """Intervals [a, b] of the standard normal moved into the left half where they lie
    right of 0 (a > 0 becomes [-b, -a]), so that its CDF is evaluated where it is small
    and kept to full relative precision; and which were moved."""
    flip = a > 0
    return np.where(flip, -b, a), np.where(flip, -a, b), flip


def _log1mexp(x):
    """log(1 - exp(x)) for x <= 0, accurate near 0 and far below it."""
    with np.errstate(divide="ignore"):
        return np.where(x > -0.6931471805599453, np.log(-np.expm1(x)),
                        np.log1p(-np.exp(x)))


def log_interval_probability(a, b):
    """log P(a < x <= b) = log(Phi(b) - Phi(a)) for a standard normal x, a < b
    elementwise (infinite ends allowed), accurate far in either tail."""
    a, b, _ = _mirrored(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))
    log_b = log_ndtr(b)
    with np.errstate(invalid="ignore"):
        out = log_b + _log1mexp(log_ndtr(a) - log_b)
    # An interval beyond the float64 tail (log Phi(b) = -inf: -inf - -inf above) or one
    # that rounding emptied (a = b) has probability 0, not NaN.
    return np.where((log_b == -np.inf) | (a >= b), -np.inf, out)


def draw_truncated_normal(rng, mean, lower, upper):
    """z_i ~ N(mean_i, 1) truncated to [lower_i, upper_i] (infinite ends allowed), by
    inverting the normal CDF on the log scale, on the side where the interval's
    probabilities are small (accurate however far the interval lies in a tail)."""
    a, b, flip = _mirrored(lower - mean, upper - mean)
    log_a, log_b = log_ndtr(a), log_ndtr(b)
    u = rng.random_sample(mean.shape[0])  # in [0, 1)
    # p uniform on [Phi(a), Phi(b)]: log p = log Phi(b) + log(1 - u (1 - Phi(a)/Phi(b))).
    x = ndtri_exp(log_b + np.log1p(u * np.expm1(log_a - log_b)))
    return mean + np.where(flip, -x, x)


class Gaussian:
    """Regression: ``y ~ N(f, 1 / alpha)``, the noise precision alpha sampled."""

    latent = False

    def initial_target(self, y):
        return y.copy()

    def kept_state(self):
        """The likelihood's own parameters kept with each sample (none)."""
        return {}

    def noise_precision(self, rng, y_pred, y):
        """alpha | residuals (FloatingPointError if the squared residuals overflow)."""
        with np.errstate(over="ignore", invalid="ignore"):
            alpha = draw_noise_precision(rng, y_pred - y)
        if not (np.isfinite(alpha) and alpha > 0):
            raise FloatingPointError(f"the squared residuals of the model on (X, y) "
                                     f"overflow: the noise precision drawn is {alpha:.3g}")
        return alpha


class Probit:
    """Binary labels in {-1, +1} through latent targets ``z ~ N(f, 1)``, y = sign(z)."""

    latent = True

    def initial_target(self, y):
        return y.copy()  # the labels (+-1), as libFM starts

    def kept_state(self):
        return {}

    def noise_precision(self, rng, y_pred, y):
        return 1.0

    def draw_latent(self, rng, y_pred, y, count=True):
        """z_i ~ N(f_i, 1) truncated to z_i > 0 where y_i = +1, z_i <= 0 where -1."""
        positive = y > 0
        return draw_truncated_normal(rng, y_pred, np.where(positive, 0.0, -np.inf),
                                     np.where(positive, np.inf, 0.0))


class OrderedProbit(Probit):
    """Levels ``y`` in {0, ..., L - 1} through latent targets ``z ~ N(f, 1)`` and
    cutpoints (module docstring), of which c_2 .. c_{L-1} are sampled.

    Each sweep first draws every free cutpoint in turn by a Metropolis-Hastings step on
    its conditional with the latent targets integrated out: given f, c_j moves only the
    probabilities ``Phi(c_{j+1} - f) - Phi(c_j - f)`` of the rows of its two
    neighbouring levels, and the prior of ordered cutpoints is flat.  Integrating the
    latents out (Cowles 1996) lets a cutpoint move as far as the data allow at once,
    where the Gibbs draw given the latents (Albert and Chib 1993) is pinned between the
    nearest latents of the two levels and crawls on large data.  The conditional is
    log-concave (the probability of an interval of a normal variable is log-concave in
    its ends), and close to normal on many rows: the proposal is centred at the end of
    the Newton step, ``c + g / h``, with g and -h the log-density's first and second
    derivatives at the current c, and of scale ``1 / sqrt(h)``, a Student t
    (:attr:`PROPOSAL_DF`), and the reverse proposal from the proposed point enters the
    acceptance ratio.  This proposal needs no tuning (it fits the conditional's width
    at every step, and jumps towards its mode from a start far from it), so the chain is
    an exact Metropolis-within-Gibbs sampler from its first sweep.  A proposal outside
    (c_{j-1}, c_{j+1}) is rejected.  Then the latent targets are drawn given the new
    cutpoints.
    """

    LOG_SQRT_2PI = 0.9189385332046727  # log sqrt(2 pi)
    # The proposal's degrees of freedom: a Student t, whose tails are heavier than the
    # log-concave conditional's, so that the chain leaves a start in the conditional's
    # tail in a few steps (a normal proposal's reverse density from the mode back to
    # such a start would be smaller still than the conditional there).
    PROPOSAL_DF = 5.0

    def __init__(self, codes, n_levels):
        self.n_levels = int(n_levels)
        self.rows = [np.flatnonzero(codes == level) for level in range(self.n_levels)]
        # c_j at Phi^-1 of the cumulative proportion of levels below j, moved so that
        # c_1 = 0: the cutpoints of f = const.
        counts = np.array([r.shape[0] for r in self.rows], dtype=np.float64)
        cumulative = np.clip(np.cumsum(counts)[:-1] / counts.sum(), 1e-6, 1 - 1e-6)
        inner = ndtri(cumulative)
        self.cutpoints = np.concatenate([[-np.inf], inner - inner[0], [np.inf]])
        self.n_proposed = self.n_accepted = 0

    def kept_state(self):
        """The cutpoints c_1 .. c_{L-1}, kept with each sample."""
        return {"cutpoints": self.cutpoints[1:-1].copy()}

    def initial_target(self, y):
        c = self.cutpoints
        codes = y.astype(np.intp)
        lower, upper = c[codes], c[codes + 1]
        # The middle of each level's interval, or one unit beyond an infinite end.
        return np.where(np.isinf(lower), upper - 1.0,
                        np.where(np.isinf(upper), lower + 1.0, 0.5 * (lower + upper)))

    @classmethod
    def _side(cls, log_p, point, sign):
        """The sum of one level's log-probabilities ``log_p`` (of intervals of a
        standard normal variable, one per row) and its first and second derivatives in
        the end of the intervals at ``point`` (per row), the upper end (``sign`` 1) or
        the lower (-1)."""
        if log_p.shape[0] == 0:
            return 0.0, 0.0, 0.0
        # phi(point) / P, from logarithms (finite however small P is).
        ratio = np.exp(-0.5 * point * point - cls.LOG_SQRT_2PI - log_p)
        first = sign * ratio
        second = -point * first - ratio * ratio
        return float(np.sum(log_p)), float(np.sum(first)), float(np.sum(second))

    def _conditional(self, j, value, f_below, f_above, log_below=None):
        """c_j's log conditional density at ``value`` given the other cutpoints and f
        (up to a constant) and its first and second derivatives; and the
        log-probabilities of level j's rows.  ``log_below``: those of level j - 1's rows
        at ``value``, when known."""
        c = self.cutpoints
        upper = value - f_below
        if log_below is None:
            log_below = log_interval_probability(c[j - 1] - f_below, upper)
        lower = value - f_above
        log_above = log_interval_probability(lower, c[j + 1] - f_above)
        below = self._side(log_below, upper, 1.0)
        above = self._side(log_above, lower, -1.0)
        return tuple(a + b for a, b in zip(below, above)), log_above

    def draw_cutpoints(self, rng, f, count=True):
        """Each free cutpoint by a Metropolis-Hastings step given f (the class
        docstring); ``count``: add the steps to the acceptance counts."""
        c = self.cutpoints
        f_levels = [f[rows] for rows in self.rows]  # each level's rows, gathered once
        # The log-probabilities of level j - 1's rows under the current cutpoints: those
        # the previous step computed for its level above (None: not yet).
        log_below = None
        for j in range(2, self.n_levels):
            f_below, f_above = f_levels[j - 1], f_levels[j]
            if f_below.shape[0] == 0 and f_above.shape[0] == 0:
                # No row in either level: the conditional is flat on (c_{j-1}, c_{j+1}),
                # drawn exactly where that is bounded (else c_j stays).
                if np.isfinite(c[j + 1]):
                    c[j] = c[j - 1] + (c[j + 1] - c[j - 1]) * rng.random_sample()
                log_below = None
                continue
            current, log_above = self._conditional(j, c[j], f_below, f_above, log_below)
            proposal, forward = self._newton_proposal(rng, c[j], current)
            accepted = False
            if forward is not None and c[j - 1] < proposal < c[j + 1]:
                state, new_above = self._conditional(j, proposal, f_below, f_above)
                backward = self._newton_log_density(c[j], proposal, state)
                log_ratio = state[0] - current[0] + backward - forward
                accepted = bool(np.log(1.0 - rng.random_sample()) < log_ratio)
                if accepted:
                    c[j], log_above = proposal, new_above
            log_below = log_above
            if count:
                self.n_proposed += 1
                self.n_accepted += int(accepted)

    @classmethod
    def _newton_proposal(cls, rng, value, state):
        """A draw from the Newton step's proposal at ``value`` of log-density ``state``
        (value, first and second derivatives), and the log-density of that draw under
        it; (value, None) where the curvature is not a finite negative number (no
        proposal)."""
        _, first, second = state
        if not (np.isfinite(first) and np.isfinite(second) and second < 0):
            rng.standard_t(cls.PROPOSAL_DF)  # the same count of draws either way
            return value, None
        proposal = value + first / -second + rng.standard_t(cls.PROPOSAL_DF) / np.sqrt(
            -second)
        return proposal, cls._newton_log_density(proposal, value, state)

    @classmethod
    def _newton_log_density(cls, target, value, state):
        """The log-density of ``target`` (up to a constant) under the Newton step's
        proposal at ``value`` of log-density ``state``: a Student t centred at the
        Newton step's end, of scale the inverse square root of the curvature (-inf where
        the curvature is not a finite negative number: no proposal)."""
        _, first, second = state
        if not (np.isfinite(first) and np.isfinite(second) and second < 0):
            return -np.inf
        precision = -second
        t = (target - value - first / precision) * np.sqrt(precision)
        nu = cls.PROPOSAL_DF
        return 0.5 * np.log(precision) - 0.5 * (nu + 1) * np.log1p(t * t / nu)

    def draw_latent(self, rng, y_pred, y, count=True):
        self.draw_cutpoints(rng, y_pred, count)
        codes = y.astype(np.intp)
        return draw_truncated_normal(rng, y_pred, self.cutpoints[codes],
                                     self.cutpoints[codes + 1])


def _checked_prior(draw, what):
    """``draw`` (lam, mu) of :func:`draw_group_prior` if every precision is finite and
    > 0 and every mean finite, else FloatingPointError (the squares of ``what``
    overflow)."""
    lam, mu = draw
    if not (np.all(np.isfinite(lam)) and np.all(lam > 0) and np.all(np.isfinite(mu))):
        raise FloatingPointError(f"the squares of the {what} overflow: their prior "
                                 f"precision drawn is not a finite positive number")
    return lam, mu


class GibbsChain:
    """One output's Markov chain: its parameters (``params``, arrays of the
    :class:`polylite.polynomial._base._OutputParams` kind, updated in place), the
    hyperparameters, the predictions on the training rows and, for the probit models, the
    latent targets.

    ``likelihood`` is a :class:`Gaussian`, :class:`Probit` or :class:`OrderedProbit`
    (whose cutpoints the chain then samples); ``data`` is :func:`polylite._engine.solvers.cd_data` of X with uniform
    weights; ``structure`` the FM's (kernel, degrees, n_dummy); ``groups`` a
    :class:`FeatureGroups`; ``workspace`` a dict of cd_epoch's work arrays, which chains
    on the same X may share; ``relaxation`` the draws' over-relaxation (1: Gibbs draws);
    ``n_jobs`` the threads of :meth:`predict`.  A fitted intercept starts at the mean of
    the likelihood's initial targets.
    """

    def __init__(self, X, y, data, params, structure, groups, *, fit_intercept,
                 fit_linear, likelihood, rng, workspace, relaxation=1.0, n_jobs=None):
        self.X, self.data, self.params, self.groups = X, data, params, groups
        self.relaxation, self.n_jobs = relaxation, n_jobs
        self.kernel, self.degrees, _ = structure
        self.fit_intercept, self.fit_linear = fit_intercept, fit_linear
        self.likelihood = likelihood
        self.rng, self.workspace = rng, workspace
        self.y = np.ascontiguousarray(y, dtype=np.float64)
        n = X.shape[0]
        self.sample_weight = np.full(n, 1.0 / n)
        self.target = likelihood.initial_target(self.y)
        if fit_intercept and n > 0:  # the first noise precision from centred targets
            params.intercept[0] = self.target.mean()
        self.y_pred = self.predict(X).astype(np.float64)
        k = params.P.shape[2]
        self.hyper = Hyperparameters(params.P.shape[0], groups.n_groups, k)

    def predict(self, X):
        """The current sample's outputs f(x) on the rows of X (validated CSR)."""
        p = self.params
        return kernels.predict(X, p.P, degrees=self.degrees, kernel=self.kernel,
                               intercept=p.intercept[0], w=p.w, gamma=p.gamma,
                               check_input=False, n_jobs=self.n_jobs)

    def draw_hyperparameters(self):
        """Every hyperparameter given the current parameters and residuals; raises
        FloatingPointError where a draw is not a finite precision > 0 or a finite mean
        (the squares of the residuals or of the parameters overflow)."""
        h, p, rng = self.hyper, self.params, self.rng
        h.alpha = self.likelihood.noise_precision(rng, self.y_pred, self.y)
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            if self.fit_linear:
                lam, mu = _checked_prior(draw_group_prior(
                    rng, p.w[:, np.newaxis], self.groups, h.w_mu[:, np.newaxis]),
                    "linear weights")
                h.w_lam, h.w_mu = lam[:, 0], mu[:, 0]
            for b in range(p.P.shape[0]):
                h.P_lam[b], h.P_mu[b] = _checked_prior(
                    draw_group_prior(rng, p.P[b], self.groups, h.P_mu[b]), "factors")
            if p.gamma.shape[0] > 0:
                one_group = FeatureGroups(np.zeros(p.gamma.shape[0], np.intp), 1)
                lam, mu = _checked_prior(draw_group_prior(
                    rng, p.gamma, one_group, h.gamma_mu[np.newaxis]), "dummy factors")
                h.gamma_lam, h.gamma_mu = lam[0], mu[0]

    def prior(self):
        """The priors of the parameters' draws, given the hyperparameters."""
        h = self.hyper
        with np.errstate(over="ignore", divide="ignore"):
            unit = 1.0 / (h.alpha * self.X.shape[0])  # the variance of one row's sum
        if not (np.isfinite(unit) and unit > 0):
            raise FloatingPointError(f"the noise precision drawn, {h.alpha:.3g}, leaves "
                                     f"no finite variance for the draws")
        return GibbsPrior(self.groups.index, h.w_lam * unit, h.w_mu, h.P_lam * unit, h.P_mu,
                          h.gamma_lam * unit, h.gamma_mu, unit,
                          int(self.rng.randint(0, 2 ** 62, dtype=np.int64)),
                          self.relaxation)

    def sweep(self, count=True):
        """One sweep: the hyperparameters, then every parameter, then (probit models) the
        cutpoints and the latent targets; ``count``: add the ordered probit's cutpoint
        steps to its acceptance counts (after the burn-in)."""
        self.draw_hyperparameters()
        self.draw_parameters(self.prior())
        if self.likelihood.latent:
            self.target = self.likelihood.draw_latent(self.rng, self.y_pred, self.y, count)

    def draw_parameters(self, prior):
        """Draw the intercept, the linear weights and every factor from their conditionals
        under ``prior`` (a :class:`GibbsPrior`), in coordinate descent's order."""
        problem = Problem(self.target, self.sample_weight, kernels.KERNELS[self.kernel],
                            np.asarray(self.degrees, dtype=np.intc),
                            _losses.loss_code("squared"), 0.0, 0.0, self.fit_intercept,
                            self.fit_linear)
        with np.errstate(over="ignore", invalid="ignore"):
            _cd.cd_epoch(self.data, problem, self.params, self.y_pred,
                         workspace=self.workspace, prior=prior)
        self.check_finite("the parameters drawn")

    def check_finite(self, when):
        """Raise FloatingPointError unless the parameters and the outputs on the training
        rows are finite (``when``: what produced them, for the message)."""
        p = self.params
        if not all(np.all(np.isfinite(a)) for a in (p.intercept, p.w, p.P, p.gamma)):
            raise FloatingPointError(f"{when} are not finite")
        # The outputs are kept in float64, but a model of float32 parameters predicts in
        # float32: outputs beyond its range would be infinite at predict.
        largest = np.finfo(p.P.dtype).max
        if not np.all(np.abs(self.y_pred) <= largest):
            raise FloatingPointError(f"the model's outputs on X under {when} overflow "
                                     f"{p.P.dtype.name}")
