"""Numbers out of range: predictions that overflow, fits on huge inputs or parameters,
parameters beyond what memory or the data allow, labels that are not classes.

Each test failed before its fix: predictions were NaN or infinity without a word, the
Bayesian classifier's scores were infinite on confident rows, the Gibbs sampler stopped
on a ZeroDivisionError or a message naming neither the input nor the overflow, and
polylite.dask made a class of a missing label.
"""
import re
import time
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import ndtri
from sklearn.exceptions import ConvergenceWarning

import polylite
from polylite import (BayesianFactorizationMachineClassifier,
                      BayesianFactorizationMachineRegressor, FactorizationMachineClassifier,
                      FactorizationMachineRegressor, MultiOutputPolynomialClassifier,
                      MultiOutputPolynomialRegressor, OrdinalMcRankRegressor,
                      PolynomialNetworkClassifier, PolynomialNetworkRegressor)
from polylite.bayes import _sampler
from polylite.polynomial import _base

NOT_FINITE = r"rows of X are not finite \(NaN or infinity\).*overflow"
BAYES = dict(n_components=2, n_iter=12, n_burn_in=2, n_kept=5, random_state=0)


def _methods(est):
    """The prediction methods of ``est`` (those it has)."""
    return [name for name in ("predict", "decision_function", "predict_proba",
                              "predict_log_proba") if hasattr(est, name)]


def _small(rng, n=30, d=6):
    X = rng.rand(n, d)
    return X, X[:, 0] * X[:, 1] + X[:, 2]


# --------------------------------------------------------------------------------------
# 1. Predictions that overflow raise FloatingPointError, in every family
# --------------------------------------------------------------------------------------

def test_float32_all_subsets_fm_on_inputs_far_beyond_the_training_data():
    """Degree 4, all-subsets, float32: inputs 3000 times those of the fit gave NaN."""
    rng = np.random.RandomState(0)
    X = rng.rand(50, 20).astype(np.float32)
    fm = FactorizationMachineRegressor(degree=4, kernel="all-subsets",
                                       random_state=0).fit(X, X[:, 0] * X[:, 1])
    assert np.all(np.isfinite(fm.predict(X)))
    with pytest.raises(FloatingPointError, match="FactorizationMachineRegressor: the "
                                                 "outputs on 50 of the 50 " + NOT_FINITE +
                                                 r".*float32"):
        fm.predict(X * 3000)


@pytest.mark.parametrize("cls", [FactorizationMachineRegressor,
                                 FactorizationMachineClassifier,
                                 PolynomialNetworkRegressor, PolynomialNetworkClassifier])
def test_model_file_with_huge_parameters_does_not_predict_infinity(cls, tmp_path):
    """P = 1e300 is finite, so the file loads; its outputs overflow."""
    rng = np.random.RandomState(0)
    X, y = _small(rng)
    if cls._is_classifier:
        y = (y > np.median(y)).astype(int)
    est = cls(n_components=2, random_state=0).fit(X, y)
    est.P_ = np.full_like(est.P_, 1e300)
    est.save(tmp_path / "model.npz")
    loaded = polylite.load(tmp_path / "model.npz")
    for est in (est, loaded):
        for method in _methods(est):
            with pytest.raises(FloatingPointError, match=NOT_FINITE):
                getattr(est, method)(X)


@pytest.mark.parametrize("cls", [BayesianFactorizationMachineRegressor,
                                 BayesianFactorizationMachineClassifier])
def test_bayesian_model_with_huge_parameters_does_not_predict_infinity(cls, tmp_path):
    rng = np.random.RandomState(0)
    X, y = _small(rng)
    if cls._is_classifier:
        y = (y > np.median(y)).astype(int)
    est = cls(**BAYES).fit(X, y)
    est.P_samples_ = np.full_like(est.P_samples_, 1e300)
    est.save(tmp_path / "model.npz")
    for est in (est, polylite.load(tmp_path / "model.npz")):
        for method in _methods(est):
            with pytest.raises(FloatingPointError, match=NOT_FINITE):
                getattr(est, method)(X)
        if not cls._is_classifier:
            with pytest.raises(FloatingPointError, match=NOT_FINITE):
                est.predict(X, return_std=True)


def test_bayesian_regressor_mean_that_overflows_raises():
    """Every sample's output finite (1e308), their mean's sum not."""
    rng = np.random.RandomState(0)
    X, y = _small(rng)
    est = BayesianFactorizationMachineRegressor(**BAYES).fit(X, y)
    est.P_samples_ = np.zeros_like(est.P_samples_)
    est.w_samples_ = np.zeros_like(est.w_samples_)
    est.intercept_samples_ = np.full_like(est.intercept_samples_, 1.7e308)
    with pytest.raises(FloatingPointError, match="mean predictions on 30 of the 30"):
        est.predict(X)


@pytest.mark.parametrize("cls", [MultiOutputPolynomialRegressor,
                                 MultiOutputPolynomialClassifier, OrdinalMcRankRegressor])
def test_multioutput_and_ordinal_outputs_that_overflow_raise(cls):
    rng = np.random.RandomState(0)
    X, y = _small(rng, n=60)
    if cls is not MultiOutputPolynomialRegressor:
        y = np.digitize(y, np.quantile(y, [0.33, 0.66]))
    est = cls(max_basis=5, random_state=0).fit(X, y)
    for method in _methods(est):
        assert np.all(np.isfinite(getattr(est, method)(X)))
        with pytest.raises(FloatingPointError, match=f"{cls.__name__}: the outputs on "
                                                     f"60 of the 60 " + NOT_FINITE):
            getattr(est, method)(X * 1e200)


def test_dask_predictions_that_overflow_raise():
    dask = pytest.importorskip("dask")
    da = pytest.importorskip("dask.array")
    from polylite import dask as pdask
    rng = np.random.RandomState(0)
    X, y = _small(rng)
    local = FactorizationMachineRegressor(n_components=2, random_state=0).fit(X, y)
    local.P_ = np.full_like(local.P_, 1e300)
    est = pdask.FactorizationMachineRegressor.from_local(local)
    Xs = sp.csr_matrix(X)
    Xd = da.from_delayed(dask.delayed(Xs), shape=Xs.shape, dtype=Xs.dtype,
                         meta=sp.csr_matrix((0, 0)))
    with dask.config.set(scheduler="synchronous"):
        with pytest.raises(FloatingPointError, match=NOT_FINITE):
            est.predict(Xd).compute()
        with pytest.raises(FloatingPointError, match=NOT_FINITE):
            est.predict(X)


# --------------------------------------------------------------------------------------
# 2. The Bayesian classifier's scores: finite, in the order of the probabilities
# --------------------------------------------------------------------------------------

def test_bayesian_decision_function_is_finite_on_confident_rows():
    """Phi^-1 of a mean probability that rounds to 1 was +inf: 10 of 40 rows here, tied,
    so that AUC and top-n lists broke their ties arbitrarily."""
    rng = np.random.RandomState(0)
    X = rng.randn(40, 4) * 30
    y = (X[:, 0] + X[:, 1] * X[:, 2] / 30 > 0).astype(int)
    clf = BayesianFactorizationMachineClassifier(n_components=2, n_iter=100,
                                                 random_state=0).fit(X, y)
    p = clf.predict_proba(X)[:, 1]
    scores = clf.decision_function(X)
    assert np.all(np.isfinite(scores))
    assert np.sum((p == 1.0) | (p == 0.0)) >= 5  # the rows that were infinite
    assert np.unique(scores).shape[0] == 40      # no ties among them now
    order = np.argsort(scores, kind="stable")
    assert np.all(np.diff(p[order]) >= 0)        # the order of predict_proba
    inside = (p > 1e-6) & (p < 1 - 1e-6)
    np.testing.assert_allclose(scores[inside], ndtri(p[inside]), rtol=1e-8, atol=1e-8)
    np.testing.assert_array_equal(clf.predict(X), clf.classes_[(scores > 0).astype(int)])


@pytest.mark.parametrize("margin", [40.0, -40.0, 1e10, -1e200])
def test_bayesian_decision_function_of_a_constant_margin_is_that_margin(margin):
    """Every sample's f(x) = margin: Phi^-1(Phi(margin)) = margin, without saturation
    (beyond |f| ~ 1.9e154 the mean margin)."""
    rng = np.random.RandomState(0)
    X, y = _small(rng)
    clf = BayesianFactorizationMachineClassifier(**BAYES).fit(X, y > np.median(y))
    for name in ("P_samples_", "w_samples_"):
        setattr(clf, name, np.zeros_like(getattr(clf, name)))
    clf.intercept_samples_ = np.full_like(clf.intercept_samples_, margin)
    np.testing.assert_allclose(clf.decision_function(X[:3]), np.full(3, margin),
                               rtol=1e-12)


def test_bayesian_multiclass_decision_function_is_finite_and_agrees_with_predict():
    rng = np.random.RandomState(0)
    X = rng.randn(60, 3) * 30
    y = np.digitize(X[:, 0], [-10.0, 10.0])
    clf = BayesianFactorizationMachineClassifier(n_components=2, n_iter=60,
                                                 random_state=0).fit(X, y)
    scores = clf.decision_function(X)
    assert scores.shape == (60, 3) and np.all(np.isfinite(scores))
    np.testing.assert_array_equal(clf.predict(X), clf.classes_[np.argmax(scores, axis=1)])


# --------------------------------------------------------------------------------------
# 3. The Gibbs sampler on huge inputs and parameters: errors that name them
# --------------------------------------------------------------------------------------

def test_bayesian_fit_on_huge_targets_names_y():
    """ZeroDivisionError inside the prior before."""
    rng = np.random.RandomState(0)
    X, y = _small(rng)
    with pytest.raises(ValueError, match=r"y is too large for BayesianFactorization"
                                         r"MachineRegressor.*largest \|y\| = .*e\+300.*"
                                         r"scale y"):
        BayesianFactorizationMachineRegressor(**BAYES).fit(X, y * 1e300)


@pytest.mark.parametrize("init_scale", [1e300, 1e100])
def test_bayesian_fit_with_huge_init_scale_names_init_scale(init_scale):
    """"cd_epoch: prior.scale must be >= 0, got nan" (1e300) or ZeroDivisionError
    (1e100) before."""
    rng = np.random.RandomState(0)
    X, y = _small(rng)
    est = BayesianFactorizationMachineRegressor(**dict(BAYES, init_scale=init_scale))
    with pytest.raises(ValueError, match=rf"initial model's outputs on X.*overflow: "
                                         rf"{re.escape(f'init_scale={init_scale!r}')} "
                                         rf"is too large.*"
                                         rf"lower init_scale"):
        est.fit(X, y)


@pytest.mark.parametrize("cls", [BayesianFactorizationMachineRegressor,
                                 BayesianFactorizationMachineClassifier])
@pytest.mark.parametrize("scale", [1e200, 1e100])
def test_bayesian_fit_on_huge_features_names_x(cls, scale):
    """The regressor stopped with "prior.scale must be >= 0, got nan" (1e200) or a
    ZeroDivisionError (1e100); the classifier kept NaN samples without a word."""
    rng = np.random.RandomState(0)
    X, y = _small(rng)
    if cls._is_classifier:
        y = y > np.median(y)
    with pytest.raises(ValueError, match=r"the values of X \(largest \|x\| = .*\) are too "
                                         r"large for interactions of degree 2 in float64: "
                                         r"scale the features of X"):
        cls(**BAYES).fit(X * scale, y)


def test_bayesian_fit_with_float32_factors_beyond_float32_names_init_scale():
    rng = np.random.RandomState(0)
    X, y = _small(rng)
    est = BayesianFactorizationMachineRegressor(**dict(BAYES, init_scale=1e40))
    with pytest.raises(ValueError, match=r"init_scale=1e\+40 draws factors beyond float32"):
        est.fit(X.astype(np.float32), y)


def test_bayesian_sampler_that_diverges_mid_fit_says_where(monkeypatch):
    """A draw that overflows during sampling: FloatingPointError naming the sweep, not
    an error of the compiled code about its arguments."""
    rng = np.random.RandomState(0)
    X, y = _small(rng)
    calls = []

    def draw(rng, residuals):
        calls.append(1)
        return 1.0 if len(calls) < 3 else 0.0

    monkeypatch.setattr(_sampler, "draw_noise_precision", draw)
    with pytest.raises(FloatingPointError, match=r"diverged at sweep 3 \(the squared "
                                                 r"residuals.*noise precision drawn is 0\)"):
        BayesianFactorizationMachineRegressor(**BAYES).fit(X, y)


@pytest.mark.parametrize("groups, message", [
    ([None] * 6, "feature_groups must hold labels that can be sorted.*NoneType"),
    ([0, 0, 1, 1, np.nan, 2], "feature_groups contains NaN"),
])
def test_bayesian_feature_groups_that_are_not_labels_name_feature_groups(groups, message):
    """[None] * d raised "'<' not supported between instances of 'NoneType' and
    'NoneType'"."""
    rng = np.random.RandomState(0)
    X, y = _small(rng)
    with pytest.raises(ValueError, match=message):
        BayesianFactorizationMachineRegressor(**BAYES).fit(X, y, feature_groups=groups)


# --------------------------------------------------------------------------------------
# 4. Sizes beyond memory, and a path beyond what the data allow
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("cls", [BayesianFactorizationMachineRegressor,
                                 BayesianFactorizationMachineClassifier])
def test_bayesian_components_beyond_memory_are_refused_at_once(cls, monkeypatch):
    """n_components=10**6 on 30 x 6 data: 50 kept samples of 6 x 10**6 factors, 2.2 GiB,
    minutes of sampling before anything was said."""
    monkeypatch.setattr(_base, "_physical_memory", lambda: 2**30)
    rng = np.random.RandomState(0)
    X, y = _small(rng)
    if cls._is_classifier:
        y = y > np.median(y)
    start = time.perf_counter()
    with pytest.raises(ValueError, match=r"n_components=1000000 asks for .* GiB.*"
                                         r"\(1\.0 GiB\).*n_kept"):
        cls(n_components=10**6, random_state=0).fit(X, y)
    assert time.perf_counter() - start < 5


@pytest.mark.parametrize("params, bound, what", [
    (dict(), 15, "interactions of degree 2 among the 6 features"),
    (dict(degree=3), 20, "interactions of degree 3 among the 6 features"),
    (dict(degree=3, lower_degrees="shared"), 56, "interactions of degree 3 among the 6"),
    (dict(kernel="all-subsets"), 64, "subsets of the 6 features"),
])
def test_bayesian_components_beyond_the_interactions_warn_at_once(params, bound, what):
    """n_components=10**6 on 30 x 6 data fits in memory (2.2 GiB) but samples for
    minutes; it now says at once that components beyond the number of interactions add
    only time.  The warning is raised as an error here to stop the fit."""
    rng = np.random.RandomState(0)
    X, y = _small(rng)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        with pytest.raises(UserWarning, match=rf"n_components=1000000 exceeds the {bound} "
                                              rf"{what}"):
            BayesianFactorizationMachineRegressor(n_components=10**6, **params).fit(X, y)
        # As many components as interactions: no warning.
        BayesianFactorizationMachineRegressor(n_components=bound, n_iter=2, n_burn_in=1,
                                              **params).fit(X, y)
    assert time.perf_counter() - start < 5


@pytest.mark.parametrize("cls", [MultiOutputPolynomialRegressor, OrdinalMcRankRegressor])
def test_multioutput_basis_beyond_memory_is_refused_at_once(cls):
    """max_basis=10**9 on 30 x 6 data: its Gram matrix alone would take 10**19 bytes;
    the path ran until stopped before."""
    rng = np.random.RandomState(0)
    X, y = _small(rng)
    if cls is OrdinalMcRankRegressor:
        y = np.digitize(y, np.quantile(y, [0.5]))
    start = time.perf_counter()
    with pytest.raises(ValueError, match=r"max_basis=1000000000 lets the basis grow to "
                                         r"1000000000 vectors.*more than this machine's "
                                         r"memory"):
        cls(max_basis=10**9, random_state=0).fit(X, y)
    assert time.perf_counter() - start < 5


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kernel", ["pn", "fm"])
def test_multioutput_path_stops_once_the_data_are_fitted_to_rounding(dtype, kernel):
    """30 rows, 7 dimensions: 28 basis vectors fit the quadratic targets exactly; then
    the gap and the objective are rounding noise, the gap never fell below tol times
    the objective, and the path went on for every iteration of max_basis."""
    rng = np.random.RandomState(0)
    X = rng.randn(30, 6).astype(dtype)
    Y = np.column_stack([X[:, 0] * X[:, 1], X[:, 2]]).astype(np.float64)
    est = MultiOutputPolynomialRegressor(kernel=kernel, max_basis=2000,
                                         random_state=0).fit(X, Y)
    assert est.n_iter_ < 40
    assert est.history_["objective"][-1] < 1e-10
    np.testing.assert_allclose(est.predict(X), Y, atol=1e-4)


@pytest.mark.parametrize("penalty", ["l1/l2", "l1", "l1/linf"])
def test_multioutput_basis_outputs_that_overflow_raise_without_lapack_noise(penalty, capfd):
    """X ~ 1e200: the refit's least squares met an infinite Gram matrix, and LAPACK
    printed "On entry to DLASCL parameter number 4 had an illegal value" to stdout
    before "SVD did not converge"."""
    rng = np.random.RandomState(0)
    X = sp.random(30, 6, density=0.6, random_state=rng, format="csr") * 1e200
    y = rng.standard_normal((30, 2))
    est = MultiOutputPolynomialRegressor(kernel="fm", refit="full", penalty=penalty,
                                         random_state=0)
    with pytest.raises(FloatingPointError, match="outputs of basis vector 1 on X, or "
                                                 "their squares, overflow.*scale the "
                                                 "features of X"):
        est.fit(X, y)
    assert capfd.readouterr().out == ""


# --------------------------------------------------------------------------------------
# 5. polylite.dask: a missing label is not a class
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("missing", [np.nan, None])
def test_dask_classifier_refuses_missing_labels(missing):
    """classes_ was [0, 1, nan]; the in-memory estimators refuse such labels."""
    dask = pytest.importorskip("dask")
    da = pytest.importorskip("dask.array")
    from polylite import dask as pdask
    rng = np.random.RandomState(0)
    X, y = _small(rng, n=40)
    labels = (y > np.median(y)).astype(float if missing is not None else object)
    labels[7] = missing
    Xs = sp.csr_matrix(X)
    Xd = da.concatenate([da.from_delayed(dask.delayed(Xs[i:i + 20]), shape=(20, 6),
                                         dtype=Xs.dtype, meta=sp.csr_matrix((0, 0)))
                         for i in (0, 20)])
    est = pdask.FactorizationMachineClassifier(n_components=2, max_iter=3)
    with dask.config.set(scheduler="synchronous"), warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        with pytest.raises(ValueError, match=r"row block 0: y contains NaN"):
            est.fit(Xd, da.from_array(labels, chunks=20))
        assert not hasattr(est, "classes_")
        with pytest.raises(ValueError, match="continuous"):
            est.fit(Xd, da.from_array(y, chunks=20))


# --------------------------------------------------------------------------------------
# Huge finite features: a fitted model that misses its own targets absurdly is refused
# --------------------------------------------------------------------------------------

def _huge_features(n=200, d=10, seed=0):
    """Features near 3e38 (finite in float64), targets in [0, 3]."""
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.3, random_state=seed, format="csr")
    X.data[:] = 3e38 * rng.uniform(0.5, 1.0, X.nnz)
    return X, rng.uniform(0.0, 3.0, n)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("est", [
    BayesianFactorizationMachineRegressor(**BAYES),
    polylite.VariationalFactorizationMachineRegressor(max_iter=5, random_state=0),
    FactorizationMachineRegressor(max_iter=5, random_state=0),
    FactorizationMachineRegressor(solver="sgd", max_iter=3, random_state=0),
    FactorizationMachineRegressor(solver="lbfgs", max_iter=5, random_state=0),
    PolynomialNetworkRegressor(max_iter=5, random_state=0),
], ids=lambda est: f"{type(est).__name__}-{getattr(est, 'solver', '')}")
def test_features_near_3e38_are_refused_not_fitted_into_garbage(est):
    """Fitted without a word and predicted about 1e39 to 1e74 on targets in [0, 3]."""
    X, y = _huge_features()
    with pytest.raises(FloatingPointError, match=r"misses its own training targets.*"
                                                 r"largest \|x\| = 3e\+38"):
        est.fit(X, y)
    assert not est.__sklearn_is_fitted__()


def test_the_rule_passes_ordinary_fits_and_zero_targets():
    rng = np.random.RandomState(0)
    X, y = _small(rng)
    FactorizationMachineRegressor(max_iter=3, random_state=0).fit(X, y)
    FactorizationMachineRegressor(max_iter=3, random_state=0).fit(X, np.zeros(len(y)))
    polylite.kernels.check_fitted_scale(None, X, y, y * 999.0)
    with pytest.raises(FloatingPointError):
        polylite.kernels.check_fitted_scale(None, X, y, y * 1002.0)


def test_cli_fit_on_a_relation_of_float32_3e38_is_an_error(tmp_path, capsys):
    """A libFM relation file with float32 values of 3e38 fitted with exit 0 and
    evaluated to an RMSE of 3.5e70 (fm) or 7.9e62 (bayes-fm, nothing printed)."""
    from sklearn.datasets import dump_svmlight_file
    from test_libfm_relations import write_binary_index, write_table
    from polylite.cli import main
    rng = np.random.RandomState(0)
    n, n_users = 300, 20
    table = sp.random(n_users, 5, density=0.5, random_state=1, format="csr")
    table.data[:] = 3e38
    write_table(tmp_path / "user.x", table)
    write_binary_index(tmp_path / "user.train", rng.randint(n_users, size=n))
    own = sp.random(n, 3, density=0.5, random_state=2, format="csr")
    dump_svmlight_file(own, rng.uniform(1, 5, n), str(tmp_path / "train.libfm"),
                       zero_based=True)
    for estimator, extra in (("fm", ["--max-iter", "3"]),
                             ("bayes-fm", ["--n-iter", "4", "--n-burn-in", "1"])):
        status = main(["fit", str(tmp_path / "train.libfm"), "--relation",
                       str(tmp_path / "user"), "--zero-based", "--estimator", estimator,
                       "-m", str(tmp_path / f"{estimator}.npz"), "--progress", "none",
                       *extra])
        err = capsys.readouterr().err
        assert status == 1, err
        assert "misses its own training targets" in err and "3e+38" in err
        assert not (tmp_path / f"{estimator}.npz").exists()
