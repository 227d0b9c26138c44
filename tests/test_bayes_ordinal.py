"""The ordered probit Bayesian FM: its truncated normal draws and interval probabilities
against scipy, the cutpoint sampler against the exact posterior, the chain against the
probit classifier's for two levels, planted cutpoints recovered, levels as labels,
save/load, and scikit-learn's estimator checks."""
import numpy as np
import pytest
from scipy import integrate, stats
from sklearn.utils.estimator_checks import parametrize_with_checks

import polylite
from polylite import ModelFileError
from polylite.bayes import (BayesianFactorizationMachineClassifier,
                            BayesianFactorizationMachineOrdinalRegressor)
from polylite.bayes import _sampler
from polylite.bayes.ordinal import level_probabilities

Ordinal = BayesianFactorizationMachineOrdinalRegressor


def _planted(n=3000, seed=0, cutpoints=(1.0, 2.0, 3.0, 4.0)):
    """Rows whose latent f + N(0, 1) falls between planted cutpoints: levels 1..5."""
    rng = np.random.RandomState(seed)
    X = rng.rand(n, 4)
    f = 2.0 * X[:, 0] + 3.0 * X[:, 1] * X[:, 2] + 0.5
    y = np.digitize(f + rng.randn(n), cutpoints) + 1
    return X, y


# ---- the draws and probabilities ------------------------------------------------------------

@pytest.mark.parametrize("lower, upper", [(-np.inf, 0.0), (0.0, np.inf), (-0.5, 0.7),
                                          (3.0, 3.5), (-12.0, -11.0), (9.0, np.inf),
                                          (-np.inf, -40.0), (40.0, 40.01)])
def test_truncated_normal_draws_follow_the_truncated_law(lower, upper):
    """Two-sided intervals too, far in either tail, and mirrored to the right."""
    rng = np.random.RandomState(3)
    mean = np.full(4000, 0.3)
    z = _sampler.draw_truncated_normal(rng, mean, np.full(4000, lower),
                                       np.full(4000, upper))
    assert np.all(np.isfinite(z)) and np.all(z >= lower) and np.all(z <= upper)
    law = stats.truncnorm(lower - 0.3, upper - 0.3, loc=0.3)
    assert stats.kstest(z, law.cdf).pvalue > 1e-4


@pytest.mark.parametrize("a, b", [(-1.0, 0.5), (-np.inf, -30.0), (30.0, np.inf),
                                  (2.0, 2.0 + 1e-9), (-50.0, -49.0), (-np.inf, np.inf)])
def test_interval_log_probability_is_accurate_in_the_tails(a, b):
    expected = np.log(stats.norm.cdf(b) - stats.norm.cdf(a)) if max(abs(a), abs(b)) < 5 \
        else np.logaddexp(stats.norm.logsf(a), -np.inf) if np.isinf(b) \
        else stats.norm.logcdf(b) + np.log1p(-np.exp(stats.norm.logcdf(a)
                                                     - stats.norm.logcdf(b)))
    if b - a < 1e-6:  # a narrow interval: its width times the density
        expected = np.log(b - a) + stats.norm.logpdf(0.5 * (a + b))
    got = _sampler.log_interval_probability(np.array([a]), np.array([b]))[0]
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-12)


def test_level_probabilities_sum_to_one_and_follow_the_cutpoints():
    f = np.array([-30.0, -1.0, 0.0, 0.7, 2.5, 40.0])
    cutpoints = np.array([0.0, 0.8, 2.0])
    p = level_probabilities(f, cutpoints)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=1e-12)
    edges = np.r_[-np.inf, cutpoints, np.inf]
    direct = stats.norm.cdf(edges[1:] - f[:, None]) - stats.norm.cdf(edges[:-1] - f[:, None])
    np.testing.assert_allclose(p, direct, atol=1e-14)


# ---- the cutpoint sampler ----------------------------------------------------------------

def test_cutpoint_sampler_targets_the_exact_posterior():
    """Three levels, f fixed: the free cutpoint c_2's draws match its posterior under a
    flat prior on c_2 > 0, prod over rows of the probability of the row's level,
    integrated numerically."""
    rng = np.random.RandomState(0)
    n = 60
    f = rng.randn(n) * 0.5
    codes = np.digitize(f + rng.randn(n), [0.0, 0.9])
    likelihood = _sampler.OrderedProbit(codes, 3)

    def log_posterior(c2):
        edges = np.array([-np.inf, 0.0, c2, np.inf])
        return float(np.sum(_sampler.log_interval_probability(edges[codes] - f,
                                                              edges[codes + 1] - f)))

    peak = max(log_posterior(c) for c in np.linspace(0.01, 5, 500))
    density = lambda c: np.exp(log_posterior(c) - peak)  # noqa: E731
    mass = integrate.quad(density, 0, 10, limit=200)[0]
    mean = integrate.quad(lambda c: c * density(c), 0, 10, limit=200)[0] / mass
    second = integrate.quad(lambda c: c * c * density(c), 0, 10, limit=200)[0] / mass
    sd = np.sqrt(second - mean ** 2)

    likelihood.cutpoints[2] = 3.0  # far in the tail: a few steps bring it to the mass
    for sweep in range(10):
        likelihood.draw_cutpoints(rng, f)
    assert abs(likelihood.cutpoints[2] - mean) < 4 * sd
    likelihood.n_accepted = likelihood.n_proposed = 0
    draws = []
    for sweep in range(20000):
        likelihood.draw_cutpoints(rng, f)
        draws.append(likelihood.cutpoints[2])
    draws = np.array(draws)
    # Monte Carlo error of a correlated chain: batch means.
    batches = draws.reshape(100, -1).mean(axis=1)
    error = batches.std(ddof=1) / np.sqrt(100)
    assert abs(draws.mean() - mean) < 4 * error + 1e-3, (draws.mean(), mean, error)
    assert abs(draws.std() - sd) < 0.1 * sd
    # The Newton step's normal is close to the conditional: most proposals are taken.
    assert 0.7 < likelihood.n_accepted / likelihood.n_proposed <= 1


# ---- the estimator -------------------------------------------------------------------------

def test_two_levels_is_the_probit_classifier_chain():
    """With two levels there is no free cutpoint: the same chain as the probit
    classifier's, draw for draw."""
    X, y = _planted(500)
    binary = (y > 3).astype(int)
    params = dict(n_components=2, n_iter=15, n_burn_in=3, random_state=4)
    ordinal = Ordinal(**params).fit(X, binary)
    probit = BayesianFactorizationMachineClassifier(**params).fit(X, binary)
    np.testing.assert_array_equal(ordinal.P_samples_, probit.P_samples_[0])
    np.testing.assert_array_equal(ordinal.w_samples_, probit.w_samples_[0])
    np.testing.assert_allclose(ordinal.predict_proba(X), probit.predict_proba(X),
                               atol=1e-12)
    assert np.all(ordinal.cutpoints_samples_ == 0.0)


def test_planted_cutpoints_are_recovered():
    X, y = _planted(4000)
    model = Ordinal(n_components=2, n_iter=150, n_burn_in=30, random_state=0).fit(X, y)
    np.testing.assert_array_equal(model.levels_, [1, 2, 3, 4, 5])
    # c_1 is fixed at 0, so the planted cutpoints are recovered relative to the first,
    # and the model's outputs are the planted ones less the first cutpoint (on average
    # over the rows: the intercept alone trades off against the linear weights, as the
    # features are all positive).
    gaps = model.cutpoints_samples_.mean(axis=0)
    np.testing.assert_allclose(gaps, [0.0, 1.0, 2.0, 3.0], atol=0.12)
    outputs = model._sample_outputs(model._validate_predict_data(X))[0].mean(axis=0)
    planted = 2.0 * X[:, 0] + 3.0 * X[:, 1] * X[:, 2] + 0.5
    assert abs(outputs.mean() - (planted.mean() - 1.0)) < 0.1
    assert 0.8 < model.cutpoint_acceptance_ <= 1  # the Newton proposals, on 4,000 rows
    expected = model.predict(X)
    assert np.sqrt(np.mean((expected - y) ** 2)) < np.std(y)
    proba = model.predict_proba(X)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    np.testing.assert_allclose(expected, proba @ np.arange(1, 6))


def test_levels_as_ordered_labels_and_the_most_probable_level():
    X, y = _planted(600)
    names = np.array(["awful", "bad", "fine", "good", "great"])
    labels = names[y - 1]
    model = Ordinal(n_components=2, n_iter=25, random_state=0, levels=list(names))
    model.fit(X, labels)
    np.testing.assert_array_equal(model.levels_, names)  # the given order, not sorted
    predicted = model.predict(X)
    assert set(predicted) <= set(names)
    np.testing.assert_array_equal(predicted, names[np.argmax(model.predict_proba(X), 1)])
    with pytest.raises(ValueError, match="prediction='expected' needs numeric levels"):
        Ordinal(n_iter=5, n_burn_in=1, prediction="expected").fit(X, labels)
    with pytest.raises(ValueError, match=r"y holds values that are not levels .*'okay'"):
        Ordinal(n_iter=5, n_burn_in=1, levels=["bad", "good"]).fit(X[:2], ["bad", "okay"])
    with pytest.raises(ValueError, match="numeric levels must be given in increasing"):
        Ordinal(n_iter=5, n_burn_in=1, levels=[3, 2, 1]).fit(X[:3], [1, 2, 3])
    with pytest.raises(ValueError, match="at least two levels; got one class"):
        Ordinal(n_iter=5, n_burn_in=1).fit(X[:3], [2, 2, 2])


def test_eval_set_scores_the_averaged_probabilities():
    X, y = _planted(1200)
    model = Ordinal(n_components=2, n_iter=12, n_burn_in=2, random_state=0)
    model.fit(X[:900], y[:900], X_eval=X[900:], y_eval=y[900:])
    assert model.eval_rmse_.shape == (12,)
    last = np.sqrt(np.mean((model.eval_proba_ @ np.arange(1, 6) - y[900:]) ** 2))
    np.testing.assert_allclose(model.eval_rmse_[-1], last)


@pytest.mark.parametrize("labels", [False, True])
def test_save_and_load_round_trip(tmp_path, labels):
    X, y = _planted(300)
    if labels:
        y = np.array(list("abcde"))[y - 1]
    model = Ordinal(n_components=2, n_iter=10, n_burn_in=2, random_state=0).fit(X, y)
    polylite.save(model, tmp_path / "ordinal.npz", exact=True)
    twin = polylite.load(tmp_path / "ordinal.npz")
    np.testing.assert_array_equal(twin.predict_proba(X), model.predict_proba(X))
    np.testing.assert_array_equal(twin.predict(X), model.predict(X))
    np.testing.assert_array_equal(twin.levels_, model.levels_)
    assert twin.cutpoint_acceptance_ == model.cutpoint_acceptance_


def test_model_file_with_unordered_cutpoints_is_refused(tmp_path):
    X, y = _planted(300)
    model = Ordinal(n_components=2, n_iter=10, n_burn_in=2, random_state=0).fit(X, y)
    model.cutpoints_samples_[0, 2] = -1.0
    polylite.save(model, tmp_path / "bad.npz")
    with pytest.raises(ModelFileError, match="increasing finite cutpoints"):
        polylite.load(tmp_path / "bad.npz")


# A regressor with level probabilities (predict_proba), which scikit-learn's checks take
# for a classifier's.
_PROBABILITIES = ("predict_proba gives the probabilities of the levels; the checks expect "
                  "a regressor to have none, or a classifier's shape")
EXPECTED_FAILED_CHECKS = {"check_regressors_no_decision_function": _PROBABILITIES,
                          "check_estimator_sparse_array": _PROBABILITIES,
                          "check_estimator_sparse_matrix": _PROBABILITIES}


@parametrize_with_checks([Ordinal(n_components=2, n_iter=20, n_burn_in=5),
                          Ordinal(degree=3, lower_degrees="shared", n_components=2,
                                  n_iter=20, n_burn_in=5)],
                         expected_failed_checks=lambda estimator: EXPECTED_FAILED_CHECKS,
                         xfail_strict=True)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)


def test_command_line_fits_predicts_and_evaluates_ordinal_ratings(tmp_path, capsys):
    """polylite fit --estimator bayes-fm --task ordinal: expected levels from predict,
    RMSE from evaluate, the sweeps' validation RMSE as progress; the component warning
    is a one-line note."""
    from sklearn.datasets import dump_svmlight_file

    from polylite.cli import main
    X, y = _planted(400)
    dump_svmlight_file(X[:300], y[:300], str(tmp_path / "train.svm"))
    dump_svmlight_file(X[300:], y[300:], str(tmp_path / "test.svm"))
    model = str(tmp_path / "model.npz")
    assert main(["fit", str(tmp_path / "train.svm"), "-m", model, "--estimator",
                 "bayes-fm", "--task", "ordinal", "--n-iter", "12", "--n-burn-in", "2",
                 "--validation", str(tmp_path / "test.svm"), "--progress", "lines"]) == 0
    err = capsys.readouterr().err
    assert "sweep 12/12  validation rmse" in err
    assert "polylite fit: warning: n_components=8 exceeds the 6 interactions" in err
    assert "UserWarning" not in err
    loaded = polylite.load(model)
    assert isinstance(loaded, Ordinal)
    np.testing.assert_array_equal(loaded.levels_, [1, 2, 3, 4, 5])
    out = tmp_path / "predictions.txt"
    assert main(["predict", model, str(tmp_path / "test.svm"), "-o", str(out)]) == 0
    predicted = np.loadtxt(out)
    np.testing.assert_allclose(predicted, loaded.predict(X[300:]), rtol=1e-6)
    assert np.all((predicted >= 1) & (predicted <= 5))
    capsys.readouterr()
    assert main(["evaluate", model, str(tmp_path / "test.svm")]) == 0
    assert "rmse" in capsys.readouterr().out
    assert main(["fit", str(tmp_path / "train.svm"), "-m", model, "--task", "ordinal"]) == 2
    assert "ordinal is fitted by --estimator bayes-fm, not by --estimator fm" in (
        capsys.readouterr().err)
