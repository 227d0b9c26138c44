"""Ordinal regression by McRank: the targets and the level probabilities by hand, the fit
equal to the multi-output model on the cumulative targets, save/load, errors."""
import numpy as np
import pytest
from scipy.special import expit
from sklearn.base import clone
from sklearn.pipeline import make_pipeline
from sklearn.utils.estimator_checks import parametrize_with_checks

import polylite
from polylite import (FieldEncoder, ModelFileError, MultiOutputPolynomialRegressor,
                      OrdinalMcRankRegressor)
from polylite.ordinal.mcrank import cumulative_targets, level_probabilities
from polylite.recommend import recommend

SMALL = dict(max_basis=6, random_state=0)


def _ordinal_problem(rng, n=300, levels=(1, 2, 3, 4, 5)):
    """Levels of a quadratic score with noise (every level present)."""
    X = rng.normal(size=(n, 5))
    score = X[:, 0] * X[:, 1] + X[:, 2] + 0.3 * rng.normal(size=n)
    cuts = np.quantile(score, np.linspace(0, 1, len(levels) + 1)[1:-1])
    return X, np.asarray(levels)[np.digitize(score, cuts)]


def test_cumulative_targets_by_hand():
    Y = cumulative_targets(np.array([1, 3, 5, 2]), np.array([1, 2, 3, 5]))
    np.testing.assert_array_equal(Y, [[1, 1, 1], [-1, -1, 1], [-1, -1, -1], [-1, 1, 1]])


def test_level_probabilities_by_hand():
    # Cumulative p(y <= l_c) 0.2, 0.7, 0.5: crossing, so sorted to 0.2, 0.5, 0.7.
    O = np.log([[0.2 / 0.8, 0.7 / 0.3, 0.5 / 0.5]])
    np.testing.assert_allclose(level_probabilities(O), [[0.2, 0.3, 0.2, 0.3]])
    P = level_probabilities(np.random.RandomState(0).normal(scale=3, size=(50, 4)))
    assert np.all(P >= 0)
    np.testing.assert_allclose(P.sum(axis=1), 1)


@pytest.mark.parametrize("kernel, penalty", [("fm", "l1/linf"), ("pn", "l1/l2")])
def test_fit_is_the_multioutput_model_on_cumulative_targets(rng, kernel, penalty):
    X, y = _ordinal_problem(rng, levels=(1, 2, 4, 8))
    model = OrdinalMcRankRegressor(kernel=kernel, penalty=penalty, **SMALL).fit(X, y)
    # Every parameter of the twin as the ordinal model's (their defaults may differ).
    twin = MultiOutputPolynomialRegressor(loss="logistic", **model.get_params())
    twin.fit(X, cumulative_targets(y, np.array([1, 2, 4, 8])))
    np.testing.assert_array_equal(model.classes_, [1, 2, 4, 8])
    np.testing.assert_allclose(model.H_, twin.H_)
    np.testing.assert_allclose(model.V_, twin.V_)
    np.testing.assert_allclose(model.decision_function(X), twin.decision_function(X))
    # The prediction: the expected level under the (monotone) level probabilities.
    cumulative = np.sort(expit(twin.decision_function(X)), axis=1)
    cumulative = np.hstack([np.zeros((len(y), 1)), cumulative, np.ones((len(y), 1))])
    proba = np.diff(cumulative, axis=1)
    np.testing.assert_allclose(model.predict_proba(X), proba)
    np.testing.assert_allclose(model.predict(X), proba @ [1, 2, 4, 8])
    assert model.predict(X).min() >= 1 and model.predict(X).max() <= 8


def test_learns_the_order_of_the_levels(rng):
    X, y = _ordinal_problem(rng, n=600)
    X_test, y_test = X[400:], y[400:]
    model = OrdinalMcRankRegressor(max_basis=15, random_state=0).fit(X[:400], y[:400])
    predicted = model.predict(X_test)
    rmse = np.sqrt(np.mean((predicted - y_test) ** 2))
    assert rmse < 0.6 * np.std(y_test)
    assert np.corrcoef(predicted, y_test)[0, 1] > 0.8
    # The most probable level is mostly right or next to it.
    best = model.classes_[np.argmax(model.predict_proba(X_test), axis=1)]
    assert np.mean(np.abs(best - y_test) <= 1) > 0.9


def test_defaults_and_float_levels(rng):
    X, y = _ordinal_problem(rng, levels=(0.5, 1.0, 1.5))
    model = OrdinalMcRankRegressor().fit(X, y)
    assert model.classes_.tolist() == [0.5, 1.0, 1.5]
    assert model.V_.shape[1] == 2 and model.n_iter_ >= 1
    assert model.get_params()["kernel"] == "fm"
    assert model.get_params()["penalty"] == "l1/linf"
    # The shared parameter docs, with this estimator's defaults.
    assert 'kernel : {"pn", "fm"}, default="fm"' in OrdinalMcRankRegressor.__doc__
    assert 'penalty : {"l1/l2", "l1", "l1/linf"}, default="l1/linf"' in \
        OrdinalMcRankRegressor.__doc__
    assert "tau : float, default=100.0" in OrdinalMcRankRegressor.__doc__


def test_validation_history_and_best_iteration(rng):
    X, y = _ordinal_problem(rng, n=400)
    model = OrdinalMcRankRegressor(**SMALL).fit(X[:300], y[:300], X_val=X[300:],
                                                y_val=y[300:])
    history = model.history_
    assert history["validation_loss"].shape == (model.n_iter_,)
    best = model.best_iteration_
    assert history["validation_loss"][best - 1] == history["validation_loss"].min()
    rmse = np.sqrt(np.mean((model.predict(X[300:]) - y[300:]) ** 2))
    assert history["validation_rmse"][best - 1] == pytest.approx(rmse)


def test_warm_start_continues(rng):
    X, y = _ordinal_problem(rng)
    model = OrdinalMcRankRegressor(max_basis=3, warm_start=True, random_state=0)
    model.fit(X, y).fit(X, y)
    assert model.n_iter_ == 6
    with pytest.raises(ValueError, match="different levels from the previous fit"):
        model.fit(X, np.minimum(y, 4))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_save_load_round_trip(tmp_path, rng, dtype):
    X, y = _ordinal_problem(rng)
    model = OrdinalMcRankRegressor(**SMALL).fit(X.astype(dtype), y)
    model.save(tmp_path / "m.npz")
    loaded = polylite.load(tmp_path / "m.npz")
    assert type(loaded) is OrdinalMcRankRegressor
    np.testing.assert_array_equal(loaded.classes_, model.classes_)
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    np.testing.assert_array_equal(loaded.predict_proba(X), model.predict_proba(X))
    assert loaded.get_params() == model.get_params()


def test_load_rejects_levels_disagreeing_with_the_outputs(tmp_path, rng):
    X, y = _ordinal_problem(rng)
    model = OrdinalMcRankRegressor(**SMALL).fit(X, y)
    model.classes_ = model.classes_[:-1]  # four levels, but four outputs
    model.save(tmp_path / "m.npz")
    with pytest.raises(ModelFileError, match="4 outputs, expected 3"):
        polylite.load(tmp_path / "m.npz")
    model.classes_ = np.array(["a", "b", "c", "d", "e"])
    model.save(tmp_path / "s.npz")
    with pytest.raises(ModelFileError, match="needs two or more numbers"):
        polylite.load(tmp_path / "s.npz")


def test_recommender_pipeline_saved_and_ranking_by_expected_level(tmp_path, rng):
    """With a FieldEncoder: saved together, and top-N ranks by the expected level."""
    users, items = np.arange(20), np.arange(100, 130)
    ratings = {"user_id": rng.choice(users, 400), "item_id": rng.choice(items, 400)}
    y = 1 + (ratings["user_id"] % 3 + ratings["item_id"] % 4 > 3) + \
        (ratings["item_id"] % 2)
    pipe = make_pipeline(FieldEncoder(), OrdinalMcRankRegressor(**SMALL))
    pipe.fit(ratings, y)
    polylite.save(pipe, tmp_path / "p.npz")
    loaded = polylite.load(tmp_path / "p.npz")
    np.testing.assert_array_equal(loaded.predict(ratings), pipe.predict(ratings))
    top, scores = recommend(loaded, users[:5], n=3)
    pairs = {"user_id": np.repeat(users[:5], len(items)),
             "item_id": np.tile(items, 5)}
    expected = pipe.predict(pairs).reshape(5, len(items))
    np.testing.assert_allclose(scores, -np.sort(-expected, axis=1)[:, :3], rtol=1e-12)


def test_errors(rng):
    X, y = _ordinal_problem(rng)
    with pytest.raises(ValueError, match="at least two levels in y; got 1 class"):
        OrdinalMcRankRegressor().fit(X, np.ones(len(y)))
    with pytest.raises(ValueError, match="y must hold numbers"):
        OrdinalMcRankRegressor().fit(X, np.array(["a", "b"] * (len(y) // 2)))
    with pytest.raises(ValueError, match="one value per row of X_val"):
        OrdinalMcRankRegressor(**SMALL).fit(X, y, X_val=X[:10], y_val=y[:9])
    with pytest.raises(ValueError, match="give both X_val and y_val"):
        OrdinalMcRankRegressor(**SMALL).fit(X, y, X_val=X[:10])
    with pytest.raises(ValueError, match="penalty must be one of"):
        OrdinalMcRankRegressor(penalty="l2").fit(X, y)
    twin = clone(OrdinalMcRankRegressor(tau=3.0))
    assert twin.get_params()["tau"] == 3.0


# A regressor with level probabilities (predict_proba, as McRank is defined), which
# scikit-learn's checks take for a classifier's.
_PROBABILITIES = ("predict_proba gives the probabilities of the levels; the checks expect "
                  "a regressor to have none, or a classifier's shape")
EXPECTED_FAILED_CHECKS = {"check_regressors_no_decision_function": _PROBABILITIES,
                          "check_estimator_sparse_array": _PROBABILITIES,
                          "check_estimator_sparse_matrix": _PROBABILITIES}


@parametrize_with_checks([OrdinalMcRankRegressor(max_basis=2, max_power_iter=20,
                                                 max_refit_iter=50, random_state=0)],
                         expected_failed_checks=lambda est: EXPECTED_FAILED_CHECKS,
                         xfail_strict=True)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)
