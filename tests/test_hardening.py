"""Hostile input: the defects found by trying bad input and random fuzzing (issue 16).

Each test failed before its fix.  Model files are tested in ``test_io.py``, random
problems in ``test_fuzz.py``.
"""
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import is_classifier
from sklearn.exceptions import ConvergenceWarning, NotFittedError

import polylite.kernels
from polylite import (FactorizationMachineClassifier, FactorizationMachineRegressor,
                      PolynomialNetworkClassifier, PolynomialNetworkRegressor)
from polylite.estimator_checks import expected_failed_checks
from polylite.polynomial import _base
from polylite._engine import solvers as _solvers

ESTIMATORS = [FactorizationMachineRegressor, FactorizationMachineClassifier,
              PolynomialNetworkRegressor, PolynomialNetworkClassifier]
ids = [cls.__name__ for cls in ESTIMATORS]


def _small_problem(cls, n=20, d=3, seed=0):
    rng = np.random.RandomState(seed)
    X, y = rng.rand(n, d), rng.rand(n) * 4
    return X, (y > 2).astype(int) if cls._is_classifier else y


def _outputs(est, X):
    return est.decision_function(X) if is_classifier(est) else est.predict(X)


# --------------------------------------------------------------------------------------
# 1. L-BFGS: no silent non-finite or unconverged model
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("cls", ESTIMATORS, ids=ids)
def test_lbfgs_raises_on_non_finite_objective(cls):
    """X scaled by 1e200: the objective is NaN from the start.  L-BFGS-B used to return
    after one iteration with every prediction NaN, and no error or warning."""
    X, y = _small_problem(cls)
    est = cls(solver="lbfgs", random_state=0)
    with pytest.raises(FloatingPointError, match="non-finite"):
        est.fit(X * 1e200, y)
    with pytest.raises(NotFittedError):
        est.predict(X)


@pytest.mark.parametrize("cls", ESTIMATORS, ids=ids)
def test_lbfgs_is_never_silent_on_huge_features(cls):
    """X scaled by 1e20: L-BFGS-B reports convergence (the objective stalls) with
    predictions around 1e23 for targets below 4.  Either a line-search step overflows
    (FloatingPointError) or the fit ends worse than the all-zero model: a warning."""
    X, y = _small_problem(cls)
    est = cls(solver="lbfgs", random_state=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            est.fit(X * 1e20, y)
        except FloatingPointError:
            with pytest.raises(NotFittedError):
                est.predict(X)
            return
    assert any(issubclass(w.category, ConvergenceWarning) for w in caught), \
        [str(w.message) for w in caught]
    assert np.all(np.isfinite(_outputs(est, X * 1e20)))


@pytest.mark.parametrize("cls", ESTIMATORS, ids=ids)
def test_lbfgs_converged_fit_does_not_warn(cls):
    """The new warning (a model worse than all zeros) never fires on a good fit."""
    X, y = _small_problem(cls, n=60, d=4)
    est = cls(solver="lbfgs", max_iter=2000, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        est.fit(X, y)


def test_lbfgs_non_finite_predictions_of_a_finite_objective_raise(monkeypatch):
    """A classifier's objective stays finite with infinite margins (and, squared hinge,
    NaN predictions): the fit checks the predictions it ends with."""
    X, y = _small_problem(FactorizationMachineClassifier)
    est = FactorizationMachineClassifier(solver="lbfgs", loss="squared_hinge",
                                         max_iter=3, random_state=0)
    real = _solvers.fit_lbfgs

    def ends_with_overflowing_factors(est_, X_, y_, sw, params, *args, **kwargs):
        out = real(est_, X_, y_, sw, params, *args, **kwargs)
        params.P[...] = 1e200  # finite parameters, predictions of 1e400
        return out

    monkeypatch.setattr(_solvers, "fit_lbfgs", ends_with_overflowing_factors)
    with pytest.raises(FloatingPointError, match="non-finite predictions"):
        est.fit(X, y)


def test_cd_classifier_with_nan_predictions_raises():
    """A classifier on X of scale 1e200 (squared hinge, whose loss is 0 at a NaN
    prediction: the objective stays finite) used to end with a NaN intercept and no
    error."""
    rng = np.random.RandomState(0)
    X = rng.randn(7, 4) * 1e200
    y = np.array(list("aabcabc"))
    est = FactorizationMachineClassifier(solver="cd", loss="squared_hinge", n_components=1,
                                         init_scale=0.01, beta=0.0, max_iter=5, tol=0.01,
                                         random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        with pytest.raises(FloatingPointError, match="non-finite"):
            est.fit(X, y)
    with pytest.raises(NotFittedError):
        est.predict(X)


# --------------------------------------------------------------------------------------
# 2. SGD: partial_fit checks the predictions, not only the parameters
# --------------------------------------------------------------------------------------

def _fuzzed_regression(seed):
    """The random small problems of the fuzz loop that found the defect."""
    rng = np.random.RandomState(seed)
    n, d = rng.randint(2, 30), rng.randint(1, 8)
    X = rng.randn(n, d) * 10 ** rng.uniform(-2, 3)
    y = rng.randn(n) * 10 ** rng.uniform(-2, 3)
    return X, y, int(rng.randint(1, 9)), int(rng.randint(2, 5))


@pytest.mark.parametrize("seed, cls", [(34, FactorizationMachineRegressor),
                                       (81, PolynomialNetworkRegressor),
                                       (208, FactorizationMachineRegressor)])
def test_sgd_partial_fit_never_leaves_non_finite_predictions(seed, cls, monkeypatch):
    """partial_fit after fit left finite parameters (up to 1e203) whose predictions were
    inf or NaN, with no error: now it raises and keeps the model from before the call.
    (Such a fit is itself refused now, as absurd for its targets: the rule is lifted
    here to reach the partial_fit.)"""
    monkeypatch.setattr(polylite.kernels, "FITTED_SCALE_LIMIT", np.inf)
    X, y, batch_size, degree = _fuzzed_regression(seed)
    est = cls(solver="sgd", eta0=0.01, batch_size=batch_size, degree=degree, max_iter=5,
              random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est.fit(X, y)
    before = est.predict(X)
    assert np.all(np.isfinite(before))
    with pytest.raises(FloatingPointError, match="diverged.*kept"):
        est.partial_fit(X, y)
    np.testing.assert_array_equal(est.predict(X), before)


# --------------------------------------------------------------------------------------
# 3. Parameters too large: a ValueError naming them
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["max_iter", "degree", "n_components", "batch_size",
                                  "n_iter_no_change", "verbose", "n_jobs"])
def test_huge_integer_parameter_is_a_value_error(name):
    """10**20 used to raise TypeError from np.isfinite (no int64 holds it)."""
    X, y = _small_problem(FactorizationMachineRegressor)
    with pytest.raises(ValueError, match=f"{name} must be <= {2**31 - 1}"):
        FactorizationMachineRegressor(**{name: 10**20}).fit(X, y)


@pytest.mark.parametrize("name", ["alpha", "beta", "tol", "eta0", "init_scale"])
def test_huge_real_parameter_is_a_value_error(name):
    X, y = _small_problem(FactorizationMachineRegressor)
    with pytest.raises(ValueError, match=f"{name} must be finite"):
        FactorizationMachineRegressor(**{name: 10**400}).fit(X, y)


@pytest.mark.parametrize("lower_degrees", ["separate", "none", "shared"])
def test_degree_beyond_the_features_is_refused(lower_degrees):
    """degree 1000 on 3 x 2 data ran for minutes (the cost grows like degree^2) to fit
    interactions that are zero for every input."""
    X, y = _small_problem(FactorizationMachineRegressor, n=3, d=2)
    est = FactorizationMachineRegressor(degree=1000, lower_degrees=lower_degrees)
    with pytest.raises(ValueError, match="degree=1000 exceeds n_features=2"):
        est.fit(X, y)


def test_degree_a_little_beyond_the_features_still_fits():
    """Small data (scikit-learn's checks: 3 features, degree 4) still fit."""
    X, y = _small_problem(FactorizationMachineRegressor, n=10, d=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        FactorizationMachineRegressor(degree=5, max_iter=3).fit(X, y)


@pytest.mark.parametrize("cls", ESTIMATORS, ids=ids)
@pytest.mark.parametrize("method", ["fit", "partial_fit"])
def test_model_larger_than_memory_is_refused(cls, method, monkeypatch):
    """n_components=10**9 on 5 features asked for 37 GiB (an operating system's
    out-of-memory kill, or MemoryError); now a ValueError with the size."""
    monkeypatch.setattr(_base, "_physical_memory", lambda: 2**30)
    X, y = _small_problem(cls, d=5)
    est = cls(solver="sgd", n_components=10**8)
    extra = {"classes": np.unique(y)} if method == "partial_fit" and cls._is_classifier \
        else {}
    with pytest.raises(ValueError, match=r"n_components=100000000 asks for [45]\.\d GiB .*"
                                         r"\(1, 1, 5, 100000000\).* \(1\.0 GiB\)"):
        getattr(est, method)(X, y, **extra)


def test_model_larger_than_any_memory_is_refused():
    X = sp.random(3, 1000, density=0.01, format="csr", random_state=0)
    with pytest.raises(ValueError, match="n_components=2147483647 asks for .* GiB"):
        FactorizationMachineRegressor(n_components=2**31 - 1).fit(X, [1.0, 2.0, 3.0])


# --------------------------------------------------------------------------------------
# 9. scikit-learn contract of the stochastic solvers
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("cls", ESTIMATORS, ids=ids)
def test_expected_failed_checks_are_declared_by_the_estimator(cls):
    """A user's own check_estimator run can read the checks that fail by design."""
    for solver in ("sgd", "adagrad"):
        declared = expected_failed_checks(cls(solver=solver))
        assert set(declared) == {"check_sample_weight_equivalence_on_dense_data",
                                 "check_sample_weight_equivalence_on_sparse_data"}
        assert all("by design" in reason for reason in declared.values())
    for solver in ("cd", "lbfgs"):
        assert expected_failed_checks(cls(solver=solver)) == {}
    assert expected_failed_checks(object()) == {}


def test_sgd_default_step_size_on_unscaled_blobs():
    """scikit-learn's check_estimators_partial_fit_n_features data (blobs shifted to
    non-negative values): the default step took from the rows' mean curvature diverged
    from one random start in four with a polynomial network."""
    from sklearn.datasets import make_blobs
    X, y = make_blobs(n_samples=50, random_state=1)
    X -= X.min()
    for seed in range(20):
        PolynomialNetworkRegressor(solver="sgd", random_state=seed).partial_fit(X, y)


@pytest.mark.parametrize("cls", ESTIMATORS, ids=ids)
def test_sgd_default_step_size_on_unscaled_data(cls):
    """scikit-learn's checks fit X ~ N(100, 1) (check_fit_idempotent, check_n_features_in,
    ...), where the fixed default eta0 = 0.01 diverged: the default now comes from the
    data."""
    rng = np.random.RandomState(0)
    X = rng.normal(loc=100, size=(30, 2))
    y = (rng.normal(size=30) > 0).astype(int) if cls._is_classifier else rng.normal(size=30)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est = cls(solver="sgd", random_state=0).fit(X, y)
    assert np.all(np.isfinite(_outputs(est, X)))


def _default_eta0(est, X, y):
    X = sp.csr_matrix(X)
    kernel, degrees, n_dummy = est._structure()
    loss = "squared" if not is_classifier(est) else est.loss
    return _solvers.default_sgd_eta0(est, X, np.asarray(y, float), np.ones(X.shape[0]),
                                     _solvers._losses.loss_code(loss), kernel, degrees,
                                     n_dummy)


@pytest.mark.parametrize("cls", [FactorizationMachineRegressor, PolynomialNetworkRegressor])
def test_sgd_default_step_size_keeps_001_on_scaled_data(cls):
    """Rows of norm about 1 and standardised targets keep the former default 0.01;
    features of scale 100 get a step below the stability limit 2 / ||x||^2 of the linear
    part alone."""
    rng = np.random.RandomState(0)
    X, y = rng.randn(200, 10), rng.randn(200)
    est = cls(solver="sgd")
    assert _default_eta0(est, X / np.sqrt(10), y) == 0.01
    eta0 = _default_eta0(est, 100 + X, y)
    assert eta0 < 2 / np.max(np.sum((100 + X) ** 2, axis=1))
    # A larger model, higher degree or larger targets only lower it.
    assert _default_eta0(cls(solver="sgd", degree=3), 100 + X, y) < eta0
    assert _default_eta0(est, 100 + X, 100 * y) < eta0
