"""Bayesian factorization machine estimators: accuracy against the MAP fit and across
degrees on planted data, the averaged predictions (kept samples, X_eval, return_std),
probit classification, reproducibility, save/load and scikit-learn's estimator checks.

The sampler's draws themselves are tested against their exact conditionals in
test_bayes_sampler.py.
"""
import re
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import ndtr
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.estimator_checks import parametrize_with_checks

from polylite import _validation
from polylite import (BayesianFactorizationMachineClassifier,
                      BayesianFactorizationMachineRegressor, FactorizationMachineRegressor,
                      kernels, load)
from polylite import BayesianFactorizationMachineOrdinalRegressor
from polylite.bayes.fm import default_burn_in, kept_sweeps
from polylite.datasets import make_recommender
from polylite._engine import solvers as _solvers


def _rmse(a, b):
    return float(np.sqrt(np.mean((a - b) ** 2)))


# ---- accuracy on planted data ------------------------------------------------------------

def test_averaged_predictor_beats_the_map_fit_at_its_best_beta():
    """Noisy one-hot recommender data from a planted degree-2 FM: the posterior average
    of an untuned Bayesian FM beats the MAP FM with every penalty of a grid, the best
    chosen on the held-out rows themselves."""
    X, y = make_recommender(3000, 150, 100, 2, degree=2, rank=3, noise=0.5,
                            random_state=0)
    X_train, y_train, X_test, y_test = X[:2000], y[:2000], X[2000:], y[2000:]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        map_rmse = min(
            _rmse(FactorizationMachineRegressor(
                n_components=4, alpha=beta, beta=beta, max_iter=300,
                random_state=0).fit(X_train, y_train).predict(X_test), y_test)
            for beta in np.geomspace(1e-4, 1, 13))
    bayes = BayesianFactorizationMachineRegressor(n_components=4, n_iter=200,
                                                  random_state=0).fit(X_train, y_train)
    bayes_rmse = _rmse(bayes.predict(X_test), y_test)
    # Measured: 0.551 against 0.591 (the noise alone: 0.5).
    assert bayes_rmse < map_rmse - 0.02, (bayes_rmse, map_rmse)


def test_degree_3_beats_degree_2_on_degree_3_data():
    rng = np.random.RandomState(0)
    X = rng.randn(400, 6)
    y = kernels.predict(X, 0.7 * rng.randn(1, 6, 2), degrees=[3], intercept=0.5,
                        w=rng.randn(6)) + 0.1 * rng.randn(400)
    scores = {}
    for degree in (2, 3):
        est = BayesianFactorizationMachineRegressor(
            degree=degree, n_components=4, n_iter=100, n_burn_in=50, random_state=0)
        scores[degree] = _rmse(est.fit(X[:300], y[:300]).predict(X[300:]), y[300:])
    # Measured: 0.107 (the noise: 0.1) against 0.377.
    assert scores[3] < 0.15 < 0.3 < scores[2], scores


@pytest.mark.parametrize("kernel, lower_degrees, degree", [
    ("anova", "shared", 3), ("anova", "none", 3), ("anova", "separate", 4),
    ("all-subsets", "separate", 2)])
def test_other_structures_fit_their_planted_models(kernel, lower_degrees, degree):
    rng = np.random.RandomState(1)
    X = rng.randn(300, 5)
    est = BayesianFactorizationMachineRegressor(
        degree=degree, n_components=3, kernel=kernel, lower_degrees=lower_degrees,
        n_iter=60, n_burn_in=30, random_state=0)
    _, degrees, n_dummy = est._structure()
    y = kernels.predict(X, 0.5 * rng.randn(len(degrees), 5, 2),
                        degrees=None if kernel == "all-subsets" else degrees,
                        kernel=kernel, intercept=0.3, w=rng.randn(5),
                        gamma=rng.randn(n_dummy, 2)) + 0.05 * rng.randn(300)
    est.fit(X[:200], y[:200])
    assert est.P_samples_.shape[1:] == (len(degrees), 5, 3)
    assert est.gamma_samples_.shape[1:] == (n_dummy, 3)
    assert _rmse(est.predict(X[200:]), y[200:]) < 0.25 * y.std()


# ---- samples, averages and uncertainty ---------------------------------------------------

@pytest.mark.parametrize("n_iter, n_burn_in, n_kept", [(10, 2, 3), (10, 2, 8), (10, 2, 50),
                                                       (7, 0, 1), (200, 20, 50)])
def test_kept_sweeps_are_evenly_spread_after_the_burn_in_and_end_with_the_last(
        n_iter, n_burn_in, n_kept):
    kept = kept_sweeps(n_iter, n_burn_in, n_kept)
    assert len(kept) == min(n_kept, n_iter - n_burn_in)
    assert kept[-1] == n_iter and kept[0] > n_burn_in
    assert np.all(np.diff(kept) >= 1)
    gaps = np.diff(np.r_[n_burn_in, kept])
    assert gaps.max() - gaps.min() <= 1


def test_kept_sweeps_default_to_every_sweep_after_the_burn_in():
    np.testing.assert_array_equal(kept_sweeps(12, 2), np.arange(3, 13))
    np.testing.assert_array_equal(kept_sweeps(1, 0), [1])


@pytest.mark.parametrize("n_iter, burn_in", [(1, 0), (4, 0), (5, 1), (9, 1), (20, 4),
                                             (25, 5), (200, 5), (1000, 5)])
def test_the_default_burn_in_is_a_fifth_of_the_sweeps_at_most_five(n_iter, burn_in):
    assert default_burn_in(n_iter) == burn_in


@pytest.mark.parametrize("n_iter", range(1, 21))
@pytest.mark.parametrize("cls", [BayesianFactorizationMachineRegressor,
                                 BayesianFactorizationMachineClassifier,
                                 BayesianFactorizationMachineOrdinalRegressor])
def test_short_chains_fit_with_the_default_burn_in(cls, n_iter):
    """Any number of sweeps works with the default n_burn_in and n_kept (the samples
    after the burn-in, all kept)."""
    X, y = _small_regression(n=40)
    if cls is not BayesianFactorizationMachineRegressor:
        y = np.digitize(y, np.quantile(y, [0.3, 0.6]))
    est = cls(n_components=2, n_iter=n_iter, random_state=0).fit(X, y)
    assert est.P_samples_.shape[-4] == n_iter - min(n_iter // 5, 5)
    assert est.n_iter_ == n_iter
    assert np.all(np.isfinite(est.predict(X)))


def _small_regression(n=120, d=10, seed=0):
    rng = np.random.RandomState(seed)
    X = sp.random(n, d, density=0.4, format="csr", random_state=rng)
    y = X @ rng.randn(d) + 0.5 * kernels.predict(X, rng.randn(d, 2), degrees=[2]) \
        + 0.1 * rng.randn(n)
    return X, y


def test_prediction_is_the_mean_of_the_kept_samples_and_std_their_spread():
    X, y = _small_regression()
    est = BayesianFactorizationMachineRegressor(n_components=3, n_iter=30, n_burn_in=10,
                                                n_kept=7, random_state=0).fit(X, y)
    assert est.P_samples_.shape == (7, 1, 10, 3)
    assert est.intercept_samples_.shape == (7,) and est.w_samples_.shape == (7, 10)
    assert est.alpha_.shape == (30,) and np.all(est.alpha_ > 0)
    outputs = np.array([kernels.predict(X, est.P_samples_[s], degrees=[2],
                                        intercept=est.intercept_samples_[s],
                                        w=est.w_samples_[s]) for s in range(7)])
    mean, std = est.predict(X, return_std=True)
    np.testing.assert_allclose(mean, outputs.mean(axis=0), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(std, outputs.std(axis=0), rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(est.predict(X), mean)
    assert np.all(std > 0)
    # The samples differ (a chain that stopped moving would pass the equalities above).
    assert np.ptp(est.P_samples_[:, 0, 0, 0]) > 0


def test_rows_of_features_never_seen_are_more_uncertain():
    X, y = _small_regression(d=10)
    X = X.tolil()
    X[:, 9] = 0
    X = X.tocsr()
    est = BayesianFactorizationMachineRegressor(n_components=3, n_iter=60,
                                                random_state=0).fit(X, y)
    rows = sp.csr_matrix(np.r_[np.eye(10)[[0, 1, 2]], np.eye(10)[[9]]])
    _, std = est.predict(rows, return_std=True)
    assert std[3] > 2 * std[:3].max()


def test_X_eval_averages_every_sweep_after_the_burn_in():
    """Keeping every sweep after the burn-in, the running average on X_eval is the kept
    samples' mean prediction, and eval_rmse_ its RMSE after the last sweep."""
    X, y = _small_regression(n=160)
    X_train, y_train, X_eval, y_eval = X[:120], y[:120], X[120:], y[120:]
    est = BayesianFactorizationMachineRegressor(n_components=3, n_iter=25, n_burn_in=5,
                                                n_kept=20, random_state=0)
    est.fit(X_train, y_train, X_eval=X_eval, y_eval=y_eval)
    np.testing.assert_allclose(est.eval_prediction_, est.predict(X_eval), rtol=1e-10,
                               atol=1e-12)
    assert est.eval_rmse_.shape == (25,)
    assert est.eval_rmse_[-1] == pytest.approx(_rmse(est.predict(X_eval), y_eval),
                                               rel=1e-10)
    # The eval set changes nothing of the chain.
    twin = clone(est).fit(X_train, y_train)
    np.testing.assert_array_equal(twin.P_samples_, est.P_samples_)
    assert not hasattr(twin, "eval_prediction_")
    # Thinned: the average over all sweeps differs from the kept samples'.
    thinned = clone(est).set_params(n_kept=3).fit(X_train, y_train, X_eval=X_eval)
    np.testing.assert_allclose(thinned.eval_prediction_, est.eval_prediction_,
                               rtol=1e-10, atol=1e-12)
    assert not np.allclose(thinned.predict(X_eval), est.eval_prediction_)


def test_verbose_reports_each_sweep(capsys):
    X, y = _small_regression(n=160)
    BayesianFactorizationMachineRegressor(n_components=2, n_iter=6, n_burn_in=2,
                                          verbose=1, random_state=0).fit(
        X[:120], y[:120], X_eval=X[120:], y_eval=y[120:])
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 6
    assert "burn-in" in lines[1] and "sample" in lines[2]
    for line in lines:
        assert re.search(r"alpha [\d.e+-]+ .*RMSE on X_eval [\d.]+", line), line


def test_feature_groups_have_their_own_priors():
    X, y = _small_regression()
    labels = np.array(["a"] * 4 + ["b"] * 6)
    est = BayesianFactorizationMachineRegressor(n_components=2, n_iter=5, n_burn_in=1,
                                                random_state=0)
    est.fit(X, y, feature_groups=labels)
    np.testing.assert_array_equal(est.feature_groups_, [0] * 4 + [1] * 6)
    # One group per feature label changes the chain.
    one = clone(est).fit(X, y)
    np.testing.assert_array_equal(one.feature_groups_, np.zeros(10))
    assert not np.array_equal(one.P_samples_, est.P_samples_)


# ---- reproducibility ---------------------------------------------------------------------

@pytest.mark.parametrize("n_jobs", [1, 2])
def test_fits_are_reproducible_for_fixed_random_state_and_n_jobs(n_jobs, monkeypatch):
    # Small data: let the passes take n_jobs threads.
    monkeypatch.setattr(_validation, "MIN_ROWS_PER_THREAD", 100)
    X, y = make_recommender(3000, 60, 40, 2, random_state=0)
    assert _solvers.cd_data(X, np.ones(3000), "anova", n_jobs).n_threads == n_jobs
    est = BayesianFactorizationMachineRegressor(n_components=3, n_iter=8, n_burn_in=1,
                                                n_jobs=n_jobs, random_state=0)
    a, b = clone(est).fit(X, y), clone(est).fit(X, y)
    np.testing.assert_array_equal(a.P_samples_, b.P_samples_)
    np.testing.assert_array_equal(a.alpha_, b.alpha_)
    other = clone(est).set_params(random_state=1).fit(X, y)
    assert not np.array_equal(a.P_samples_, other.P_samples_)


# ---- classification ----------------------------------------------------------------------

def test_probit_classifier_separates_planted_classes():
    X, y = _small_regression(n=400)
    labels = np.where(y > np.median(y), "high", "low")
    est = BayesianFactorizationMachineClassifier(n_components=3, n_iter=60,
                                                 random_state=0)
    est.fit(X[:300], labels[:300], X_eval=X[300:], y_eval=labels[300:])
    proba = est.predict_proba(X[300:])
    assert proba.shape == (100, 2)
    np.testing.assert_allclose(proba.sum(axis=1), 1)
    assert est.score(X[300:], labels[300:]) >= 0.85
    np.testing.assert_array_equal(est.predict(X[300:]),
                                  est.classes_[(proba[:, 1] > 0.5).astype(int)])
    # decision_function is the probit score of the averaged probability.
    np.testing.assert_allclose(ndtr(est.decision_function(X[300:])), proba[:, 1],
                               rtol=1e-10)
    # The averaged probability is that of the kept samples' Phi(f).
    f = np.array([kernels.predict(X[300:], est.P_samples_[0, s], degrees=[2],
                                  intercept=est.intercept_samples_[0, s],
                                  w=est.w_samples_[0, s])
                  for s in range(est.P_samples_.shape[1])])
    np.testing.assert_allclose(proba[:, 1], ndtr(f).mean(axis=0), rtol=1e-10)
    assert est.eval_accuracy_.shape == (60,) and est.eval_accuracy_[-1] >= 0.85
    assert est.eval_proba_.shape == (100, 2)


def test_multi_class_is_one_vs_rest():
    rng = np.random.RandomState(0)
    centres = 3 * rng.randn(3, 4)
    labels = rng.randint(3, size=300)
    X = centres[labels] + rng.randn(300, 4)
    est = BayesianFactorizationMachineClassifier(n_components=2, n_iter=40,
                                                 random_state=0).fit(X, labels)
    assert est.P_samples_.shape[0] == 3
    proba = est.predict_proba(X)
    np.testing.assert_allclose(proba.sum(axis=1), 1)
    np.testing.assert_array_equal(est.predict(X), np.argmax(proba, axis=1))
    assert est.score(X, labels) > 0.9


def test_y_eval_labels_must_be_known_classes():
    X, y = _small_regression()
    labels = (y > 0).astype(int)
    with pytest.raises(ValueError, match="not in classes_"):
        BayesianFactorizationMachineClassifier(n_iter=2, n_burn_in=1).fit(
            X, labels, X_eval=X[:5], y_eval=[0, 1, 2, 0, 1])


# ---- parameter and input errors ----------------------------------------------------------

@pytest.mark.parametrize("params, message", [
    (dict(n_iter=10, n_burn_in=10), "n_burn_in must be smaller than n_iter"),
    (dict(n_kept=0), "n_kept"), (dict(degree=1), "degree"),
    (dict(kernel="polynomial"), "kernel"), (dict(init_scale=-1), "init_scale"),
    (dict(relaxation=0.0), "relaxation"), (dict(relaxation=2.0), "relaxation"),
    (dict(n_burn_in=-1), "n_burn_in")])
def test_bad_parameters_are_named(params, message):
    X, y = _small_regression()
    with pytest.raises(ValueError, match=message):
        BayesianFactorizationMachineRegressor(**params).fit(X, y)


def test_bad_eval_sets_and_groups_are_named():
    X, y = _small_regression()
    est = BayesianFactorizationMachineRegressor(n_iter=2, n_burn_in=1)
    with pytest.raises(ValueError, match="feature_groups must give a group to each"):
        est.fit(X, y, feature_groups=[0, 1])
    with pytest.raises(ValueError, match="y_eval is given without X_eval"):
        est.fit(X, y, y_eval=y)
    with pytest.raises(ValueError, match="X_eval has 5 rows but y_eval has 4"):
        est.fit(X, y, X_eval=X[:5], y_eval=y[:4])
    with pytest.raises(ValueError, match="features"):
        est.fit(X, y, X_eval=X[:5, :3])


# ---- save / load -------------------------------------------------------------------------

@pytest.mark.parametrize("make", [
    lambda: BayesianFactorizationMachineRegressor(degree=3, lower_degrees="shared",
                                                  n_components=2, n_iter=6, n_burn_in=1,
                                                  n_kept=3),
    lambda: BayesianFactorizationMachineRegressor(kernel="all-subsets", n_components=2,
                                                  n_iter=6, n_burn_in=1),
    lambda: BayesianFactorizationMachineClassifier(n_components=2, n_iter=6, n_burn_in=1),
], ids=["regressor-shared", "regressor-all-subsets", "classifier"])
@pytest.mark.parametrize("n_classes", [2, 3])
def test_save_load_round_trip(make, n_classes, tmp_path):
    X, y = _small_regression()
    est = make().set_params(random_state=0)
    if isinstance(est, BayesianFactorizationMachineClassifier):
        y = np.digitize(y, np.quantile(y, np.linspace(0, 1, n_classes + 1)[1:-1]))
    elif n_classes == 3:
        X = X.astype(np.float32)
    est.fit(X, y, feature_groups=np.arange(10) % 3)
    est.save(tmp_path / "model.npz", exact=True)  # (the default: test_model_files.py)
    twin = load(tmp_path / "model.npz")
    assert type(twin) is type(est) and twin.get_params() == est.get_params()
    np.testing.assert_array_equal(twin.predict(X), est.predict(X))
    np.testing.assert_array_equal(twin.feature_groups_, est.feature_groups_)
    if hasattr(est, "predict_proba"):
        np.testing.assert_array_equal(twin.predict_proba(X), est.predict_proba(X))
    else:
        np.testing.assert_array_equal(twin.alpha_, est.alpha_)
        np.testing.assert_array_equal(twin.predict(X, return_std=True)[1],
                                      est.predict(X, return_std=True)[1])
    assert twin.P_samples_.dtype == X.dtype


def test_files_of_the_earlier_defaults_predict_as_they_were_saved(tmp_path):
    """A model file written with the defaults of polylite 0.1.0 (n_burn_in=20, n_kept=50,
    no relaxation parameter) loads with those parameters and predicts from its samples,
    whatever the defaults are now."""
    import json
    X, y = _small_regression()
    est = BayesianFactorizationMachineRegressor(n_components=2, n_iter=30, n_burn_in=20,
                                                n_kept=50, random_state=0).fit(X, y)
    est.save(tmp_path / "model.npz", exact=True)
    with np.load(tmp_path / "model.npz", allow_pickle=False) as npz:
        arrays = {name: npz[name] for name in npz.files}
    header = json.loads(arrays["header"].tobytes().decode())
    del header["params"]["relaxation"]
    header["polylite_version"] = "0.1.0"
    arrays["header"] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
    np.savez(tmp_path / "old.npz", **arrays)
    old = load(tmp_path / "old.npz")
    assert old.n_burn_in == 20 and old.n_kept == 50 and old.P_samples_.shape[0] == 10
    np.testing.assert_array_equal(old.predict(X), est.predict(X))
    np.testing.assert_array_equal(old.predict(X, return_std=True)[1],
                                  est.predict(X, return_std=True)[1])


# ---- scikit-learn ------------------------------------------------------------------------

ESTIMATORS = [
    BayesianFactorizationMachineRegressor(n_iter=20, n_burn_in=5),
    BayesianFactorizationMachineClassifier(n_iter=20, n_burn_in=5),
    BayesianFactorizationMachineRegressor(degree=3, lower_degrees="shared", n_components=3,
                                          n_iter=20, n_burn_in=5),
    BayesianFactorizationMachineClassifier(kernel="all-subsets", n_components=3, n_iter=20,
                                           n_burn_in=5),
]


@parametrize_with_checks(ESTIMATORS, expected_failed_checks=lambda estimator: {},
                         xfail_strict=True)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)
