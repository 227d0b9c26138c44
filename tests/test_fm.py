"""Tests of the factorization machine estimators and of the coordinate descent solver.

The objective that every test recomputes independently (from ``predict``/``kernels.predict``,
never from the solver's own bookkeeping) is, per output,

    sum_i s_i loss(y_i, y_hat_i) / sum_i s_i + alpha/2 ||w||^2 + beta/2 (||P||^2 + ||gamma||^2)

with squared loss 1/2 (y - p)^2, logistic log(1 + exp(-y p)) and squared hinge
max(0, 1 - y p)^2 (labels in {-1, +1} for classification).
"""
import copy
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import minimize_scalar
from sklearn.base import clone, is_classifier
from sklearn.exceptions import ConvergenceWarning, NotFittedError

from polylite import FactorizationMachineClassifier, FactorizationMachineRegressor, kernels
from polylite._engine import _losses
from polylite._engine import _cd, solvers as _solvers
from _reference import reference_loss, run_cd_epoch

# --------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------


_loss = reference_loss


def _objective(loss, y, p, sw, alpha, beta, w, P, gamma):
    sw = np.ones_like(y) if sw is None else np.asarray(sw, dtype=np.float64)
    value = np.sum(sw * _loss(loss, y, np.asarray(p, dtype=np.float64))) / np.sum(sw)
    value += 0.5 * alpha * np.sum(np.square(w, dtype=np.float64))
    value += 0.5 * beta * (np.sum(np.square(P, dtype=np.float64))
                           + np.sum(np.square(gamma, dtype=np.float64)))
    return value


def _output_objectives(est, X, y, sample_weight=None):
    """Objective of every output of a fitted estimator, computed from its predictions."""
    n = X.shape[0]
    if is_classifier(est):
        classes = est.classes_
        scores = est.decision_function(X).reshape(n, -1)
        if classes.shape[0] == 2:
            targets = np.where(y == classes[1], 1.0, -1.0)[:, np.newaxis]
        else:
            targets = np.where(y[:, np.newaxis] == classes[np.newaxis, :], 1.0, -1.0)
        w, P, gamma, loss = est.w_, est.P_, est.gamma_, est.loss
    else:
        scores = est.predict(X)[:, np.newaxis]
        targets = np.asarray(y, dtype=np.float64)[:, np.newaxis]
        w, P, gamma, loss = est.w_[None], est.P_[None], est.gamma_[None], "squared"
    return np.array([
        _objective(loss, targets[:, o], scores[:, o], sample_weight, est.alpha, est.beta,
                   w[o], P[o], gamma[o])
        for o in range(targets.shape[1])])


def _data(n=60, d=8, density=0.7, seed=0, sparse=True):
    rng = np.random.RandomState(seed)
    X = rng.randn(n, d) * (rng.rand(n, d) < density)
    X[np.arange(n), rng.randint(d, size=n)] += 1.0  # no empty row
    return (sp.csr_matrix(X) if sparse else X), rng


def _structure(degree, lower_degrees, kernel):
    """(degrees, n_dummy) of a model, as documented for the estimators."""
    if kernel == "all-subsets":
        return [0], 0
    if lower_degrees == "separate":
        return list(range(2, degree + 1)), 0
    if lower_degrees == "shared":
        return [degree], degree - 1
    return [degree], 0


class _Problem:
    """A model state and data on which to call ``_cd.cd_epoch`` directly."""

    def __init__(self, X, y, sw, *, degree, lower_degrees, kernel, k, loss, alpha, beta,
                 fit_intercept=True, fit_linear=True, init_scale=0.3, seed=0):
        rng = np.random.RandomState(seed)
        self.X = sp.csr_matrix(X, dtype=np.float64)
        self.X.sort_indices()
        n, d = self.X.shape
        self.y = np.ascontiguousarray(y, dtype=np.float64)
        sw = np.ones(n) if sw is None else np.asarray(sw, dtype=np.float64)
        self.raw_sw = sw
        self.sw = sw / sw.sum()
        self.degrees, n_dummy = _structure(degree, lower_degrees, kernel)
        self.kernel, self.loss = kernel, loss
        self.alpha, self.beta = alpha, beta
        self.fit_intercept, self.fit_linear = fit_intercept, fit_linear
        self.intercept = np.array([0.3 if fit_intercept else 0.0])
        self.w = 0.1 * rng.randn(d) if fit_linear else np.zeros(d)
        self.P = init_scale * rng.randn(len(self.degrees), d, k)
        self.gamma = init_scale * rng.randn(n_dummy, k)

    def predict(self):
        return kernels.predict(
            self.X, self.P, degrees=None if self.kernel == "all-subsets" else self.degrees,
            kernel=self.kernel, intercept=self.intercept[0], w=self.w, gamma=self.gamma)

    def objective(self):
        return _objective(self.loss, self.y, self.predict(), self.raw_sw, self.alpha,
                          self.beta, self.w, self.P, self.gamma)

    def epoch(self, y_pred=None):
        """One epoch from ``y_pred`` (default: exact predictions); returns y_pred after."""
        y_pred = self.predict() if y_pred is None else y_pred
        run_cd_epoch(_solvers.column_groups(self.X, self.kernel), self.X.data,
                     self.X.indices, self.X.indptr, self.y, self.sw, self.intercept, self.w,
                     self.P, np.asarray(self.degrees, dtype=np.intc), self.gamma,
                     kernels.KERNELS[self.kernel], _losses.loss_code(self.loss),
                     float(self.alpha), float(self.beta), self.fit_intercept,
                     self.fit_linear, y_pred)
        return y_pred


def _estimator(loss, **params):
    if loss == "squared":
        return FactorizationMachineRegressor(**params)
    return FactorizationMachineClassifier(loss=loss, **params)


def _targets(loss, rng, n):
    if loss == "squared":
        return rng.randn(n)
    return rng.randint(2, size=n)


def _rel_rmse(y_hat, y):
    return np.sqrt(np.mean((y_hat - y) ** 2)) / np.std(y)


LOSSES = ["squared", "logistic", "squared_hinge"]
VARIANTS = ([(m, lower, "anova") for m in (2, 3, 4, 5)
             for lower in ("separate", "shared", "none")]
            + [(2, "separate", "all-subsets")])
VARIANT_IDS = [f"{kernel}-{lower}-m{m}" for m, lower, kernel in VARIANTS]

# --------------------------------------------------------------------------------------
# 1. the objective never increases
# --------------------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("variant", VARIANTS, ids=VARIANT_IDS)
@pytest.mark.parametrize("loss", LOSSES)
def test_objective_never_increases_across_epochs(loss, variant, weighted):
    degree, lower, kernel = variant
    X, rng = _data(seed=degree)
    y = _targets(loss, rng, X.shape[0])
    sw = rng.uniform(0.1, 3.0, size=X.shape[0]) if weighted else None
    est = _estimator(loss, degree=degree, n_components=3, lower_degrees=lower,
                     kernel=kernel, alpha=0.05, beta=0.005, init_scale=0.4, max_iter=1,
                     tol=0.0, warm_start=True, random_state=0)
    history = []
    for _ in range(8):
        est.fit(X, y, sample_weight=sw)
        history.append(_output_objectives(est, X, y, sw))
    history = np.array(history)[:, 0]
    increase = np.diff(history)
    assert np.all(increase <= 1e-12 * np.abs(history[:-1])), history
    assert history[-1] < history[0]  # and it does decrease


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("loss", ["logistic", "squared_hinge"])
def test_objective_never_increases_multiclass(loss):
    X, rng = _data(n=90, seed=3)
    y = rng.randint(3, size=X.shape[0])
    sw = rng.uniform(0.0, 2.0, size=X.shape[0])
    est = FactorizationMachineClassifier(degree=3, n_components=2, loss=loss, alpha=0.003,
                                         beta=0.02, init_scale=0.4, max_iter=1, tol=0.0,
                                         warm_start=True, random_state=0)
    history = []
    for _ in range(6):
        est.fit(X, y, sample_weight=sw)
        history.append(_output_objectives(est, X, y, sw))
    history = np.array(history)
    assert history.shape == (6, 3)
    assert np.all(np.diff(history, axis=0) <= 1e-12 * np.abs(history[:-1]))
    assert np.all(history[-1] < history[0])


@pytest.mark.parametrize("variant", VARIANTS, ids=VARIANT_IDS)
@pytest.mark.parametrize("loss", LOSSES)
def test_cd_epoch_monotone_and_bookkeeping(loss, variant):
    """The solver's loop: objective from the initial state on, and y_pred kept exact."""
    degree, lower, kernel = variant
    X, rng = _data(n=40, d=7, seed=10 + degree)
    y = rng.randn(40) if loss == "squared" else rng.choice([-1.0, 1.0], size=40)
    prob = _Problem(X, y, rng.uniform(0.2, 2.0, size=40), degree=degree,
                    lower_degrees=lower, kernel=kernel, k=2, loss=loss, alpha=0.02,
                    beta=0.03, init_scale=0.4)
    history = [prob.objective()]
    y_pred = prob.predict()
    for _ in range(6):
        y_pred = prob.epoch(y_pred)  # carried over, as the estimators do
        np.testing.assert_allclose(y_pred, prob.predict(), rtol=1e-10, atol=1e-12)
        history.append(prob.objective())
    history = np.array(history)
    assert np.all(np.diff(history) <= 1e-12 * np.abs(history[:-1])), history
    assert history[-1] < history[0]


# --------------------------------------------------------------------------------------
# 2. coordinate steps are exact minimisers for the squared loss
# --------------------------------------------------------------------------------------


def _argmin_along(objective, t0):
    """Brent's minimiser of a 1-D objective, searched from a bracket around t0."""
    res = minimize_scalar(objective, bracket=(t0 - 1.0, t0 + 1.0), method="brent",
                          options={"xtol": 1e-12})
    return res.x


def _assert_coordinate_minimiser(objective, t):
    """t minimises the convex quadratic ``objective`` along its coordinate."""
    t_brent = _argmin_along(objective, t)
    assert abs(t - t_brent) <= 1e-6 * max(1.0, abs(t)), (t, t_brent)
    # The objective is a quadratic in t: the vertex through three points is exact.
    h = 1e-2 * max(1.0, abs(t))
    f_lo, f_0, f_hi = objective(t - h), objective(t), objective(t + h)
    curvature = f_lo - 2 * f_0 + f_hi
    assert curvature > 0
    vertex = t + h * (f_lo - f_hi) / (2 * curvature)
    assert abs(vertex - t) <= 1e-9 * max(1.0, abs(t)), (t, vertex)
    assert objective(t) <= objective(t_brent) + 1e-13 * abs(objective(t))


@pytest.mark.parametrize("degree", [2, 3, 4])
def test_single_factor_step_is_exact_minimiser_shared(degree):
    """d = 1, k = 1, shared model: the epoch moves P[0, 0, 0] only, to the exact minimum.

    With P = 0 the dummy parameters gamma have zero derivative (every term of the
    augmented ANOVA kernel contains p x), so with beta = 0 their step is 0 and the only
    coordinate that moves is the factor of the single feature.  The gammas are small
    dyadic numbers so that the solver's power-sum arithmetic computes that zero derivative
    exactly (see test_zero_derivative_with_roundoff_takes_no_step for generic values).
    """
    rng = np.random.RandomState(degree)
    n = 30
    X = rng.randn(n, 1)
    y = rng.randn(n)
    sw = rng.uniform(0.5, 2.0, size=n)
    prob = _Problem(X, y, sw, degree=degree, lower_degrees="shared", kernel="anova", k=1,
                    loss="squared", alpha=0.0, beta=0.0, fit_intercept=False,
                    fit_linear=False)
    prob.intercept[0], prob.w[0] = 0.4, -0.7  # fixed offsets
    prob.P[...] = 0.0
    prob.gamma[...] = rng.choice([0.5, 1.0, 1.5, 2.0], size=prob.gamma.shape)
    gamma0 = prob.gamma.copy()
    y_pred = prob.epoch()
    np.testing.assert_array_equal(prob.gamma, gamma0)
    np.testing.assert_allclose(y_pred, prob.predict(), rtol=1e-12, atol=1e-14)
    assert prob.P[0, 0, 0] != 0
    t = prob.P[0, 0, 0]

    def objective(value):
        prob.P[0, 0, 0] = value
        return prob.objective()

    _assert_coordinate_minimiser(objective, t)


def test_zero_derivative_with_roundoff_takes_no_step():
    rng = np.random.RandomState(4)
    X = rng.randn(30, 1)
    prob = _Problem(X, rng.randn(30), None, degree=4, lower_degrees="shared",
                    kernel="anova", k=1, loss="squared", alpha=0.0, beta=0.0,
                    fit_intercept=False, fit_linear=False)
    prob.P[...] = 0.0
    prob.gamma[...] = [[0.9], [1.4], [1.5]]
    y_pred = prob.epoch()
    np.testing.assert_allclose(prob.gamma, [[0.9], [1.4], [1.5]], rtol=1e-6)
    np.testing.assert_allclose(y_pred, prob.predict(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("weighted", [False, True])
def test_degree2_derivative_of_rounding_noise_takes_no_step(weighted):
    """In every row the other factors cancel (0.7 - 0.7): column 0's degree-2 derivative
    is 0 but for rounding (the cache sums 0.1 + 0.7 - 0.7 from the rows), and without
    a penalty its step would be the noise's ratio, about 1e16.  The noise bound that
    the steps take from the column (not summed per row) must call it uninformed."""
    n = 20
    X = np.ones((n, 3))
    rng = np.random.RandomState(0)
    prob = _Problem(X, rng.randn(n), rng.uniform(0.5, 2.0, size=n) if weighted else None,
                    degree=2, lower_degrees="none", kernel="anova", k=1, loss="squared",
                    alpha=0.0, beta=0.0, fit_intercept=False, fit_linear=False)
    prob.P[0, :, 0] = [0.1, 0.7, -0.7]
    assert (0.1 + 0.7) - 0.7 - 0.1 != 0  # (the rounding the test relies on)
    prob.epoch()
    assert prob.P[0, 0, 0] == 0.1
    assert np.all(np.isfinite(prob.P))


def test_column_moments_are_the_weighted_sums_of_x0_and_x4():
    rng = np.random.RandomState(3)
    X = sp.random(40, 7, density=0.4, format="csr", random_state=rng, dtype=np.float64)
    X.data = rng.randn(X.nnz)
    sw = rng.uniform(0.1, 1.0, size=40)
    dense = X.toarray()
    for data in (X.data, X.data.astype(np.float32)):
        support, fourth = _cd.column_moments(data, X.indices, X.indptr, sw, 7)
        np.testing.assert_allclose(support, (sw[:, None] * (dense != 0)).sum(axis=0),
                                   rtol=1e-13)
        np.testing.assert_allclose(fourth, (sw[:, None] * dense ** 4).sum(axis=0),
                                   rtol=1e-6 if data.dtype == np.float32 else 1e-13)
    with pytest.raises(ValueError, match="one weight per row"):
        _cd.column_moments(X.data, X.indices, X.indptr, sw[:-1], 7)


def test_single_factor_step_is_exact_minimiser_all_subsets():
    rng = np.random.RandomState(7)
    X = rng.randn(25, 1)
    prob = _Problem(X, rng.randn(25), rng.uniform(0.5, 2.0, size=25), degree=2,
                    lower_degrees="separate", kernel="all-subsets", k=1, loss="squared",
                    alpha=0.0, beta=0.3, fit_intercept=False, fit_linear=False)
    prob.epoch()
    t = prob.P[0, 0, 0]

    def objective(value):
        prob.P[0, 0, 0] = value
        return prob.objective()

    _assert_coordinate_minimiser(objective, t)


@pytest.mark.parametrize("variant", [(2, "separate", "anova"), (3, "separate", "anova"),
                                     (3, "shared", "anova"), (4, "none", "anova"),
                                     (5, "none", "anova"), (2, "separate", "all-subsets")],
                         ids=lambda v: f"{v[2]}-{v[1]}-m{v[0]}")
def test_first_and_last_coordinate_steps_are_exact(variant):
    """After one epoch: the intercept (first coordinate) took the exact step from the
    initial state, and the last factor coordinate updated (the last column of the last
    column group, last component, last block) is at its exact minimiser given every other
    parameter."""
    degree, lower, kernel = variant
    X, rng = _data(n=50, d=6, density=0.8, seed=20 + degree)
    y = rng.randn(50)
    sw = rng.uniform(0.2, 2.0, size=50)
    prob = _Problem(X, y, sw, degree=degree, lower_degrees=lower, kernel=kernel, k=2,
                    loss="squared", alpha=0.05, beta=0.1, init_scale=0.4)
    residual = y - prob.predict()
    expected_intercept = prob.intercept[0] + np.sum(sw * residual) / np.sum(sw)
    prob.epoch()
    np.testing.assert_allclose(prob.intercept[0], expected_intercept, rtol=1e-12)
    last_column = _solvers.column_groups(prob.X, kernel)[2][-1]
    index = (prob.P.shape[0] - 1, last_column, prob.P.shape[2] - 1)
    t = prob.P[index]

    def objective(value):
        prob.P[index] = value
        return prob.objective()

    _assert_coordinate_minimiser(objective, t)


def test_last_linear_weight_step_is_exact():
    """No factor blocks: the epoch updates intercept then w, group by group; the last
    weight updated is the exact minimiser."""
    X, rng = _data(n=40, d=5, seed=4)
    X = X.toarray()
    X[:, -1] += 1.0
    prob = _Problem(X, rng.randn(40), rng.uniform(0.2, 2.0, size=40), degree=2,
                    lower_degrees="separate", kernel="anova", k=1, loss="squared",
                    alpha=0.2, beta=0.0)
    prob.P = np.zeros((0, 5, 1))
    prob.degrees = []
    prob.epoch()
    last = _solvers.column_groups(prob.X, "anova")[2][-1]
    t = prob.w[last]

    def objective(value):
        prob.w[last] = value
        return prob.objective()

    _assert_coordinate_minimiser(objective, t)


# --------------------------------------------------------------------------------------
# 3. planted models are recovered to (near) zero training error
# --------------------------------------------------------------------------------------


def _planted(degree, lower, kernel, *, n=300, d=6, rank=2, sparse=False, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.randn(n, d)
    if sparse:
        X = sp.csr_matrix(X * (rng.rand(n, d) < 0.5))
    degrees, n_dummy = _structure(degree, lower, kernel)
    P = 0.7 * rng.randn(len(degrees), d, rank)
    gamma = rng.randn(n_dummy, rank)
    y = kernels.predict(X, P, degrees=None if kernel == "all-subsets" else degrees,
                        kernel=kernel, intercept=0.5, w=rng.randn(d), gamma=gamma)
    return X, y


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize(
    "degree, lower, kernel, d, rank, k, sparse, max_iter",
    [(2, "separate", "anova", 10, 2, 4, True, 500),
     (2, "none", "anova", 10, 2, 2, True, 500),
     (3, "separate", "anova", 6, 2, 8, False, 1000),
     (3, "none", "anova", 6, 2, 8, False, 1000),
     (4, "separate", "anova", 6, 2, 8, False, 1000),
     (4, "none", "anova", 6, 2, 8, False, 1000),
     (3, "shared", "anova", 5, 2, 8, False, 1000),
     (4, "shared", "anova", 5, 2, 12, False, 2000),
     (2, "separate", "all-subsets", 6, 1, 2, False, 1000)],
    ids=["m2-separate-sparse", "m2-none-sparse", "m3-separate", "m3-none", "m4-separate",
         "m4-none", "m3-shared", "m4-shared", "all-subsets"])
def test_planted_model_is_fitted_exactly(degree, lower, kernel, d, rank, k, sparse,
                                         max_iter):
    X, y = _planted(degree, lower, kernel, d=d, rank=rank, sparse=sparse)
    est = FactorizationMachineRegressor(
        degree=degree, n_components=k, lower_degrees=lower, kernel=kernel, alpha=0.0,
        beta=0.0, init_scale=0.3, max_iter=max_iter, tol=0.0, random_state=0).fit(X, y)
    assert _rel_rmse(est.predict(X), y) < 1e-3


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_planted_model_float32():
    X, y = _planted(2, "separate", "anova", d=10, rank=2, sparse=True)
    est = FactorizationMachineRegressor(n_components=4, alpha=0.0, beta=0.0, init_scale=0.3,
                                        max_iter=500, tol=0.0, random_state=0)
    est.fit(X.astype(np.float32), y.astype(np.float32))
    assert est.P_.dtype == np.float32
    assert _rel_rmse(est.predict(X), y) < 1e-3


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_planted_lower_degree_not_expressible_without_lower_degrees():
    """Sanity check of the planted test: "none" (degree 3 only, no linear term) cannot fit
    data with a degree-2 interaction, while "separate" can."""
    X, y = _planted(3, "separate", "anova", d=6, rank=2)
    params = dict(degree=3, n_components=8, alpha=0.0, beta=0.0, init_scale=0.3,
                  max_iter=300, tol=0.0, random_state=0)
    none = FactorizationMachineRegressor(lower_degrees="none", **params).fit(X, y)
    separate = FactorizationMachineRegressor(lower_degrees="separate", **params).fit(X, y)
    assert _rel_rmse(none.predict(X), y) > 0.05
    assert _rel_rmse(separate.predict(X), y) < 1e-2


def test_planted_classification_is_separated():
    X, y_score = _planted(2, "separate", "anova", n=200, d=8, rank=2, sparse=True)
    y = np.where(y_score > np.median(y_score), "pos", "neg")
    clf = FactorizationMachineClassifier(n_components=4, alpha=0.0, beta=0.0,
                                         init_scale=0.3, max_iter=300, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf.fit(X, y)
    assert clf.score(X, y) >= 0.99


# --------------------------------------------------------------------------------------
# 4. warm start and convergence
# --------------------------------------------------------------------------------------


def _fitted_arrays(est):
    return [np.atleast_1d(np.asarray(getattr(est, a))) for a in
            ("intercept_", "w_", "P_", "gamma_")]


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("loss, lower, n_classes",
                         [("squared", "separate", 0), ("squared", "shared", 0),
                          ("logistic", "separate", 2), ("squared_hinge", "none", 3)])
def test_warm_start_5_plus_5_equals_10(loss, lower, n_classes):
    X, rng = _data(n=50, seed=1)
    y = rng.randn(50) if loss == "squared" else rng.randint(n_classes, size=50)
    sw = rng.uniform(0.5, 2.0, size=50)
    # (coordinate descent: L-BFGS's curvature memory starts afresh at every fit)
    params = dict(degree=3, n_components=3, lower_degrees=lower, alpha=0.01, beta=0.01,
                  init_scale=0.3, tol=0.0, solver="cd", random_state=0)
    once = _estimator(loss, max_iter=10, **params).fit(X, y, sample_weight=sw)
    twice = _estimator(loss, max_iter=5, warm_start=True, **params)
    twice.fit(X, y, sample_weight=sw)
    first = [a.copy() for a in _fitted_arrays(twice)]
    twice.fit(X, y, sample_weight=sw)
    for a, b, c in zip(_fitted_arrays(once), _fitted_arrays(twice), first):
        np.testing.assert_allclose(b, a, rtol=1e-10, atol=1e-12)
        if c.size:
            assert not np.allclose(b, c, rtol=1e-6)  # the second call did move
    np.testing.assert_allclose(twice.predict(X) if loss == "squared"
                               else twice.decision_function(X),
                               once.predict(X) if loss == "squared"
                               else once.decision_function(X), rtol=1e-9, atol=1e-12)


def test_warm_start_false_restarts_from_scratch():
    X, rng = _data(n=40, seed=2)
    y = rng.randn(40)
    est = FactorizationMachineRegressor(max_iter=20, tol=0.0, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        a = est.fit(X, y).P_.copy()
        b = est.fit(X, y).P_.copy()
    np.testing.assert_array_equal(a, b)


def test_warm_start_with_other_shape_raises():
    X, rng = _data(n=40, seed=2)
    y = rng.randn(40)
    est = FactorizationMachineRegressor(max_iter=5, tol=1.0, warm_start=True).fit(X, y)
    est.set_params(n_components=3)
    with pytest.raises(ValueError, match="warm_start"):
        est.fit(X, y)


def test_warm_start_with_other_classes_raises():
    X, rng = _data(n=40, seed=2)
    clf = FactorizationMachineClassifier(max_iter=2, tol=1.0, warm_start=True)
    clf.fit(X, rng.randint(3, size=40))
    with pytest.raises(ValueError, match="classes"):
        clf.fit(X, rng.randint(3, size=40) + 1)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_warm_start_follows_the_data_dtype():
    X, rng = _data(n=40, seed=2)
    y = rng.randn(40)
    est = FactorizationMachineRegressor(max_iter=3, tol=0.0, warm_start=True,
                                        init_scale=0.1, random_state=0).fit(X, y)
    est.set_params(max_iter=1)
    est64 = copy.deepcopy(est).fit(X, y)
    est.fit(X.astype(np.float32), y)
    assert est.P_.dtype == np.float32 and est.w_.dtype == np.float32
    # continued from the previous parameters, like the float64 continuation
    np.testing.assert_allclose(est.P_, est64.P_, rtol=1e-3, atol=1e-4)


def test_convergence_warning_when_max_iter_reached():
    X, rng = _data(n=40, seed=2)
    y = rng.randn(40)
    est = FactorizationMachineRegressor(degree=3, max_iter=3, tol=0.0, random_state=0)
    with pytest.warns(ConvergenceWarning, match="max_iter=3"):
        est.fit(X, y)
    assert est.n_iter_ == 3
    clf = FactorizationMachineClassifier(max_iter=2, tol=0.0, random_state=0)
    with pytest.warns(ConvergenceWarning, match="max_iter=2"):
        clf.fit(X, rng.randint(3, size=40))
    np.testing.assert_array_equal(clf.n_iter_, [2, 2, 2])


def test_no_convergence_warning_when_converged():
    X, rng = _data(n=40, seed=2)
    y = rng.randn(40)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        est = FactorizationMachineRegressor(max_iter=500, tol=1e-3, random_state=0)
        est.fit(X, y)
    assert 1 <= est.n_iter_ < 500


def test_verbose_prints_objective(capsys):
    X, rng = _data(n=30, seed=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        FactorizationMachineClassifier(max_iter=2, verbose=1, solver="cd",
                                       random_state=0).fit(X, rng.randint(3, size=30))
        FactorizationMachineClassifier(max_iter=2, verbose=1, solver="lbfgs",
                                       random_state=0).fit(X, rng.randint(3, size=30))
    out = capsys.readouterr().out
    assert "[output 2] epoch    2  objective" in out
    assert "[output 2] iteration    2  objective" in out


# --------------------------------------------------------------------------------------
# 6. classifier behaviour
# --------------------------------------------------------------------------------------

@pytest.fixture
def clf_data():
    X, rng = _data(n=90, d=6, seed=5)
    return X, rng


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_binary_classifier_api(clf_data):
    X, rng = clf_data
    y = np.where(rng.rand(X.shape[0]) < 0.5, "spam", "ham")
    clf = FactorizationMachineClassifier(random_state=0, max_iter=30, tol=1e-3).fit(X, y)
    np.testing.assert_array_equal(clf.classes_, ["ham", "spam"])
    scores = clf.decision_function(X)
    assert scores.shape == (X.shape[0],)
    np.testing.assert_array_equal(clf.predict(X), clf.classes_[(scores > 0).astype(int)])
    proba = clf.predict_proba(X)
    assert proba.shape == (X.shape[0], 2)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    np.testing.assert_allclose(proba[:, 1], 1 / (1 + np.exp(-scores)), rtol=1e-12)
    np.testing.assert_allclose(clf.predict_log_proba(X), np.log(proba))
    assert clf.intercept_.shape == (1,)
    assert clf.P_.shape == (1, 1, 6, 8)


@pytest.mark.parametrize("labels", [np.array([3, -1, 7, 10]), np.array(["b", "c", "a"]),
                                    np.array(["b", "c", "a"], dtype=object)],
                         ids=["int", "str", "object"])
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_multiclass_classifier_api(clf_data, labels):
    X, rng = clf_data
    y = labels[rng.randint(len(labels), size=X.shape[0])]
    clf = FactorizationMachineClassifier(degree=3, n_components=2, random_state=0,
                                         max_iter=30, tol=1e-3).fit(X, y)
    np.testing.assert_array_equal(clf.classes_, np.unique(y))
    scores = clf.decision_function(X)
    assert scores.shape == (X.shape[0], len(labels))
    np.testing.assert_array_equal(clf.predict(X), clf.classes_[np.argmax(scores, axis=1)])
    proba = clf.predict_proba(X)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    np.testing.assert_array_equal(np.argmax(proba, axis=1), np.argmax(scores, axis=1))
    n_c = len(labels)
    assert clf.P_.shape == (n_c, 2, 6, 2) and clf.w_.shape == (n_c, 6)
    assert clf.intercept_.shape == (n_c,) and clf.n_iter_.shape == (n_c,)
    assert clf.score(X, y) > 1.0 / n_c


def test_multiclass_outputs_are_one_vs_rest(clf_data):
    """Output 0 of a multi-class fit equals a binary fit of class 0 against the rest with
    the same initial factors (the first draws of the generator)."""
    X, rng = clf_data
    y = rng.randint(3, size=X.shape[0])
    params = dict(degree=2, n_components=2, random_state=0, max_iter=15, tol=0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        multi = FactorizationMachineClassifier(**params).fit(X, y)
        binary = FactorizationMachineClassifier(**params).fit(X, np.where(y == 0, 1, 0))
    np.testing.assert_allclose(multi.decision_function(X)[:, 0],
                               binary.decision_function(X), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("n_classes", [2, 4])
def test_predict_proba_extreme_scores(clf_data, n_classes):
    """Scores far beyond the range of exp(): probabilities stay finite and normalised."""
    X, rng = clf_data
    clf = FactorizationMachineClassifier(max_iter=2, tol=1.0, random_state=0).fit(
        X, rng.randint(n_classes, size=X.shape[0]))
    clf.intercept_ = np.linspace(-2000.0, -1000.0, clf.intercept_.shape[0])
    scores = clf.decision_function(X)
    proba = clf.predict_proba(X)
    assert np.all(np.isfinite(proba))
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    log_proba = clf.predict_log_proba(X)
    assert not np.any(np.isnan(log_proba))
    if n_classes == 2:
        np.testing.assert_allclose(log_proba[:, 1], scores, rtol=1e-6)  # log sigmoid(f)
        np.testing.assert_array_equal(proba[:, 0], 1.0)
    else:
        np.testing.assert_array_equal(np.argmax(proba, axis=1), np.argmax(scores, axis=1))
        np.testing.assert_allclose(np.exp(log_proba), proba, rtol=1e-12)
    clf.intercept_ = -clf.intercept_
    proba = clf.predict_proba(X)
    assert np.all(np.isfinite(proba))
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)


def test_predict_proba_only_with_logistic_loss(clf_data):
    X, rng = clf_data
    y = rng.randint(2, size=X.shape[0])
    clf = FactorizationMachineClassifier(loss="squared_hinge", max_iter=20, tol=1e-3,
                                         random_state=0).fit(X, y)
    assert not hasattr(clf, "predict_proba")
    assert not hasattr(clf, "predict_log_proba")
    with pytest.raises(AttributeError):
        clf.predict_proba(X)
    assert hasattr(FactorizationMachineClassifier(loss="logistic"), "predict_proba")
    assert not hasattr(FactorizationMachineRegressor(), "predict_proba")


@pytest.mark.parametrize("estimator", ["regressor", "binary", "multiclass"])
def test_zero_sample_weight_equals_removing_samples(estimator):
    X, rng = _data(n=80, d=5, density=0.9, seed=6)
    X = X.toarray()
    keep = rng.rand(80) < 0.6
    assert np.all((X[keep] != 0).sum(axis=0) > 0)  # every feature is still seen
    if estimator == "regressor":
        y = rng.randn(80)
        est = FactorizationMachineRegressor(degree=3, n_components=3, random_state=0)
    else:
        y = rng.randint(2 if estimator == "binary" else 3, size=80)
        est = FactorizationMachineClassifier(degree=3, n_components=3, random_state=0)
    est.set_params(max_iter=40, tol=1e-6, init_scale=0.2)
    sw = rng.uniform(0.5, 2.0, size=80) * keep
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        weighted = clone(est).fit(X, y, sample_weight=sw)
        removed = clone(est).fit(X[keep], y[keep], sample_weight=sw[keep])
    predict = "predict" if estimator == "regressor" else "decision_function"
    X_test, _ = _data(n=30, d=5, seed=60)
    # Not to 1e-10: on these dense rows L-BFGS sums the rows by BLAS products, whose
    # blocks of rows change when rows are removed; 40 iterations amplify that rounding to
    # about 1e-8 (a weighting error shows at 1e-2).
    np.testing.assert_allclose(getattr(weighted, predict)(X_test),
                               getattr(removed, predict)(X_test), rtol=1e-6, atol=1e-8)


def test_unseen_feature_linear_weight_is_zero():
    X, rng = _data(n=50, d=5, density=0.9, seed=7, sparse=False)
    X[:, 2] = 0.0
    est = FactorizationMachineRegressor(alpha=0.1, beta=0.1, init_scale=0.5, max_iter=50,
                                        random_state=0).fit(X, rng.randn(50))
    assert est.w_[2] == 0.0


def test_unseen_feature_factors_are_zero():
    X, rng = _data(n=50, d=5, density=0.9, seed=7, sparse=False)
    X[:, 2] = 0.0
    # Coordinate descent's exact step for a feature in no row; L-BFGS only shrinks them.
    est = FactorizationMachineRegressor(alpha=0.1, beta=0.1, init_scale=0.5, max_iter=50,
                                        solver="cd", random_state=0).fit(X, rng.randn(50))
    np.testing.assert_array_equal(est.P_[:, 2], 0.0)


def test_integer_sample_weight_equals_repeating_samples():
    X, rng = _data(n=40, d=5, density=0.9, seed=8)
    y = rng.randn(40)
    counts = rng.randint(1, 4, size=40)
    est = FactorizationMachineRegressor(degree=3, n_components=2, max_iter=30, tol=0.0,
                                        random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        weighted = clone(est).fit(X, y, sample_weight=counts)
        rows = np.repeat(np.arange(40), counts)
        repeated = clone(est).fit(X[rows], y[rows])
    np.testing.assert_allclose(weighted.predict(X), repeated.predict(X), rtol=1e-8)


def test_sample_weight_changes_the_fit():
    X, rng = _data(n=40, d=5, seed=9)
    y = rng.randn(40)
    est = FactorizationMachineRegressor(max_iter=30, tol=1e-6, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        a = clone(est).fit(X, y).predict(X)
        b = clone(est).fit(X, y, sample_weight=rng.uniform(0.1, 5, size=40)).predict(X)
    assert not np.allclose(a, b)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("estimator", [
    FactorizationMachineRegressor(degree=3, lower_degrees="shared", max_iter=10),
    FactorizationMachineRegressor(kernel="all-subsets", max_iter=10),
    FactorizationMachineClassifier(degree=3, max_iter=10)], ids=["reg", "subsets", "clf"])
def test_float32_input_keeps_float32(estimator):
    X, rng = _data(n=50, d=5, seed=11)
    y = rng.randint(3, size=50)
    est32 = clone(estimator).set_params(random_state=0).fit(X.astype(np.float32), y)
    est64 = clone(estimator).set_params(random_state=0).fit(X, y)
    for name in ("P_", "w_", "gamma_"):
        assert getattr(est32, name).dtype == np.float32
        assert getattr(est64, name).dtype == np.float64
    out = est32.predict(X) if not is_classifier(est32) else est32.decision_function(X)
    assert out.dtype == np.float32
    ref = est64.predict(X) if not is_classifier(est64) else est64.decision_function(X)
    np.testing.assert_allclose(out, ref, rtol=1e-3, atol=1e-3)
    # integer input is converted to float64
    est = clone(estimator).fit((X.toarray() * 3).astype(np.int64), y)
    assert est.P_.dtype == np.float64


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("estimator", [
    FactorizationMachineRegressor(degree=3, max_iter=10, random_state=0),
    FactorizationMachineClassifier(degree=2, max_iter=10, random_state=0)],
    ids=["reg", "clf"])
def test_sparse_formats_and_dense_agree(estimator):
    X, rng = _data(n=50, d=6, density=0.5, seed=12)
    y = rng.randint(3, size=50)
    dense = X.toarray()
    predict = "decision_function" if is_classifier(estimator) else "predict"
    ref = getattr(clone(estimator).fit(dense, y), predict)(dense)
    for fmt in ["csr", "csc", "coo", "lil"]:
        Xf = sp.csr_matrix(dense).asformat(fmt)
        est = clone(estimator).fit(Xf, y)
        np.testing.assert_allclose(getattr(est, predict)(Xf), ref, rtol=1e-12, atol=1e-13)
        np.testing.assert_allclose(getattr(est, predict)(dense), ref, rtol=1e-12,
                                   atol=1e-13)
    # 64-bit indices, and COO duplicates summed like scipy does
    X64 = sp.csr_matrix(dense)
    X64.indices, X64.indptr = X64.indices.astype(np.int64), X64.indptr.astype(np.int64)
    est = clone(estimator).fit(X64, y)
    np.testing.assert_allclose(getattr(est, predict)(X64), ref, rtol=1e-12, atol=1e-13)
    coo = sp.coo_matrix(dense)
    dup = sp.coo_matrix((np.concatenate([coo.data / 2, coo.data / 2]),
                         (np.concatenate([coo.row, coo.row]),
                          np.concatenate([coo.col, coo.col]))), shape=dense.shape)
    np.testing.assert_allclose(getattr(est, predict)(dup), ref, rtol=1e-12, atol=1e-13)


def test_predict_does_not_modify_estimator():
    X, rng = _data(n=40, seed=13)
    est = FactorizationMachineRegressor(max_iter=5, tol=1.0, random_state=0).fit(
        X, rng.randn(40))
    before = {k: (v.copy() if isinstance(v, np.ndarray) else v)
              for k, v in vars(est).items()}
    est.predict(X)
    assert set(vars(est)) == set(before)
    for k, v in vars(est).items():
        np.testing.assert_array_equal(v, before[k])


def test_fitted_attributes_are_authoritative():
    """Setting a fitted attribute changes predictions (no stale hidden copy)."""
    X, rng = _data(n=40, seed=13)
    est = FactorizationMachineRegressor(max_iter=5, tol=1.0, random_state=0).fit(
        X, rng.randn(40))
    before = est.predict(X)
    est.intercept_ = est.intercept_ + 1.0
    np.testing.assert_allclose(est.predict(X), before + 1.0)
    est.P_ = np.zeros_like(est.P_)
    np.testing.assert_allclose(
        est.predict(X), X @ est.w_ + est.intercept_, rtol=1e-12)


def test_fit_linear_false_and_fit_intercept_false():
    X, rng = _data(n=40, seed=14)
    y = rng.randn(40) + 5
    est = FactorizationMachineRegressor(fit_linear=False, fit_intercept=False, max_iter=5,
                                        tol=1.0, random_state=0).fit(X, y)
    assert est.intercept_ == 0.0
    np.testing.assert_array_equal(est.w_, 0.0)
    expected = kernels.predict(X, est.P_, degrees=[2])
    np.testing.assert_allclose(est.predict(X), expected, rtol=1e-12)


@pytest.mark.parametrize("degree, lower, kernel, blocks, dummies", [
    (4, "separate", "anova", 3, 0), (4, "shared", "anova", 1, 3), (4, "none", "anova", 1, 0),
    (4, "separate", "all-subsets", 1, 0)])
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # 2 iterations
def test_fitted_shapes(degree, lower, kernel, blocks, dummies):
    X, rng = _data(n=30, d=5, seed=15)
    est = FactorizationMachineRegressor(degree=degree, n_components=3, lower_degrees=lower,
                                        kernel=kernel, max_iter=2, tol=1.0).fit(
        X, rng.randn(30))
    assert est.P_.shape == (blocks, 5, 3)
    assert est.gamma_.shape == (dummies, 3)
    assert est.w_.shape == (5,)
    assert isinstance(est.intercept_, float)
    assert est.n_features_in_ == 5
    degrees, _ = _structure(degree, lower, kernel)
    np.testing.assert_allclose(
        est.predict(X),
        kernels.predict(X, est.P_, degrees=None if kernel == "all-subsets" else degrees,
                        kernel=kernel, intercept=est.intercept_, w=est.w_,
                        gamma=est.gamma_), rtol=1e-12)


def test_random_state_reproducible():
    X, rng = _data(n=40, seed=16)
    y = rng.randn(40)
    est = FactorizationMachineRegressor(max_iter=3, tol=0.0, random_state=42)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        a = clone(est).fit(X, y).predict(X)
        b = clone(est).fit(X, y).predict(X)
        c = clone(est).set_params(random_state=43).fit(X, y).predict(X)
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)


@pytest.mark.parametrize("estimator", [FactorizationMachineRegressor,
                                       FactorizationMachineClassifier])
def test_n_jobs_agrees_with_one_thread(estimator):
    """Threads share the CD passes over the rows: the same fit to rounding (the
    classifier's logistic loss takes the passes that read labels)."""
    rng = np.random.RandomState(18)
    n = 2 * _solvers.MIN_ROWS_PER_THREAD
    users = sp.csr_matrix((np.ones(n), (np.arange(n), rng.randint(300, size=n))),
                          shape=(n, 300))
    X = sp.hstack([users, sp.csr_matrix(rng.randn(n, 2))]).tocsr()
    y = rng.randint(2, size=n) if is_classifier(estimator()) else rng.randn(n)
    fits = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for n_jobs in (None, 2):
            fits[n_jobs] = estimator(degree=3, n_components=3, max_iter=3, tol=0.0,
                                     random_state=0, n_jobs=n_jobs).fit(X, y)
    np.testing.assert_allclose(fits[2].P_, fits[None].P_, rtol=1e-9, atol=1e-12)
    scores = {n_jobs: fit.decision_function(X) if is_classifier(fit) else fit.predict(X)
              for n_jobs, fit in fits.items()}
    np.testing.assert_allclose(scores[2], scores[None], rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("n_jobs, n_rows, cpus, threads", [
    (None, 10**6, 8, 1), (1, 10**6, 8, 1), (4, 10**6, 8, 4), (-1, 10**6, 8, 8),
    (-2, 10**6, 8, 7), (-20, 10**6, 8, 1), (8, 50_000, 8, 2), (-1, 100, 8, 1)])
def test_cd_threads_follow_n_jobs_and_the_rows(monkeypatch, n_jobs, n_rows, cpus,
                                               threads):
    monkeypatch.setattr(_solvers.joblib, "cpu_count", lambda: cpus)
    assert _solvers.cd_threads(n_jobs, n_rows) == threads


def test_cd_threads_keep_their_scratch_space_below_the_size_of_x():
    # 10^6 features: 64 MB of scratch records per extra thread.
    assert _solvers.cd_threads(8, 10**7, 10**6, 3 * 64 * 10**6) == 4
    assert _solvers.cd_threads(8, 10**7, 10**6, 10**6) == 1


# --------------------------------------------------------------------------------------
# 7. bad input
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("params, name", [
    (dict(degree=1), "degree"), (dict(degree=2.5), "degree"), (dict(degree="3"), "degree"),
    (dict(degree=True), "degree"), (dict(n_components=0), "n_components"),
    (dict(n_components=2.0), "n_components"), (dict(alpha=-1e-3), "alpha"),
    (dict(alpha=np.nan), "alpha"), (dict(beta=-1.0), "beta"),
    (dict(init_scale=-0.1), "init_scale"), (dict(max_iter=0), "max_iter"),
    (dict(tol=-1.0), "tol"), (dict(verbose=-1), "verbose"),
    (dict(fit_intercept="yes"), "fit_intercept"), (dict(fit_linear=None), "fit_linear"),
    (dict(lower_degrees="all"), "lower_degrees"), (dict(kernel="rbf"), "kernel"),
    (dict(kernel="polynomial"), "kernel"), (dict(solver="sgd-typo"), "solver"),
    (dict(random_state="seed"), "random_state"), (dict(random_state=-1), "random_state"),
    (dict(n_jobs=0), "n_jobs"), (dict(n_jobs=1.5), "n_jobs"), (dict(n_jobs="2"), "n_jobs")])
@pytest.mark.parametrize("cls", [FactorizationMachineRegressor,
                                 FactorizationMachineClassifier])
def test_invalid_parameters_raise(cls, params, name):
    X, rng = _data(n=20, d=4, seed=17)
    y = rng.randint(2, size=20)
    with pytest.raises(ValueError, match=name):
        cls(**params).fit(X, y)


@pytest.mark.parametrize("loss", ["squared", "hinge", None, "Logistic"])
def test_invalid_classifier_loss_raises(loss):
    X, rng = _data(n=20, d=4, seed=17)
    with pytest.raises(ValueError, match="loss"):
        FactorizationMachineClassifier(loss=loss).fit(X, rng.randint(2, size=20))


def test_regressor_has_no_loss_parameter():
    with pytest.raises(TypeError):
        FactorizationMachineRegressor(loss="logistic")


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_non_finite_X_rejected(bad, sparse):
    X, rng = _data(n=20, d=4, seed=18, sparse=False)
    y = rng.randn(20)
    X[3, 1] = bad
    Xb = sp.csr_matrix(X) if sparse else X
    with pytest.raises(ValueError, match="NaN|infinity"):
        FactorizationMachineRegressor().fit(Xb, y)
    X_ok = np.nan_to_num(X, nan=0.0, posinf=0.0, neginf=0.0)
    est = FactorizationMachineRegressor(max_iter=2, tol=1.0).fit(X_ok, y)
    with pytest.raises(ValueError, match="NaN|infinity"):
        est.predict(Xb)


def test_non_finite_y_rejected():
    X, rng = _data(n=20, d=4, seed=18)
    y = rng.randn(20)
    y[0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        FactorizationMachineRegressor().fit(X, y)


@pytest.mark.parametrize("cls", [FactorizationMachineRegressor,
                                 FactorizationMachineClassifier])
def test_wrong_number_of_features_at_predict(cls):
    X, rng = _data(n=20, d=4, seed=19)
    est = cls(max_iter=2, tol=1.0).fit(X, rng.randint(2, size=20))
    for X_bad in [np.ones((3, 5)), sp.csr_matrix(np.ones((3, 3)))]:
        with pytest.raises(ValueError, match="features"):
            est.predict(X_bad)


@pytest.mark.parametrize("cls", [FactorizationMachineRegressor,
                                 FactorizationMachineClassifier])
def test_bad_sample_weight(cls):
    X, rng = _data(n=20, d=4, seed=20)
    y = rng.randint(2, size=20)
    sw = np.ones(20)
    sw[4] = -1.0
    with pytest.raises(ValueError, match="[Nn]egative"):
        cls().fit(X, y, sample_weight=sw)
    with pytest.raises(ValueError, match="[Ss]ample.weight"):
        cls().fit(X, y, sample_weight=np.zeros(20))
    with pytest.raises(ValueError):
        cls().fit(X, y, sample_weight=np.ones(19))
    sw[4] = np.nan
    with pytest.raises(ValueError):
        cls().fit(X, y, sample_weight=sw)


def test_classifier_needs_two_classes():
    X, _ = _data(n=20, d=4, seed=21)
    with pytest.raises(ValueError, match="class"):
        FactorizationMachineClassifier().fit(X, np.zeros(20))
    with pytest.raises(ValueError, match="[Uu]nknown label type"):
        FactorizationMachineClassifier().fit(X, np.linspace(0, 1, 20))


@pytest.mark.parametrize("cls", [FactorizationMachineRegressor,
                                 FactorizationMachineClassifier])
def test_predict_before_fit(cls):
    with pytest.raises(NotFittedError):
        cls().predict(np.ones((2, 3)))


def test_overflow_reported():
    """Huge features make the objective non-finite: an error, not silent NaN output."""
    rng = np.random.RandomState(22)
    X = rng.randn(30, 6) * 1e80
    with pytest.raises(FloatingPointError, match="non-finite"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            FactorizationMachineRegressor(degree=5, lower_degrees="none", init_scale=1.0,
                                          random_state=0).fit(X, rng.randn(30))
