"""The stochastic solvers' objective after each pass is measured on a fixed sample of the
rows (a tenth, at least ``WATCHED_MIN_ROWS``) instead of a prediction pass over all of
them: the objective it reports is the sample's, the sample is the same for every pass
and every output, divergence is still caught, and small data are watched whole."""
import numpy as np
import pytest
import scipy.sparse as sp

from polylite import FactorizationMachineClassifier, FactorizationMachineRegressor
from polylite._engine import solvers as _solvers


@pytest.fixture
def small_minimum(monkeypatch):
    monkeypatch.setattr(_solvers, "WATCHED_MIN_ROWS", 100)


def _data(n=3000, d=40, seed=0):
    rng = np.random.RandomState(seed)
    X = sp.random(n, d, density=0.1, format="csr", random_state=rng)
    return X, X @ rng.randn(d) + 0.3 * rng.randn(n)


def test_watched_rows_are_a_fixed_tenth_or_all(small_minimum):
    X, _ = _data()
    rows, X_rows = _solvers.watched_data(X)
    assert rows.shape == (300,) and np.all(np.diff(rows) > 0)
    assert (X_rows != X[rows]).nnz == 0
    np.testing.assert_array_equal(_solvers.watched_data(X)[0], rows)  # the same sample
    assert _solvers.watched_data(X[:90])[0] == slice(None)  # below the minimum: all


@pytest.mark.parametrize("solver", ["sgd", "adagrad"])
def test_reported_objective_is_the_watched_rows(small_minimum, solver):
    X, y = _data()
    reports = []
    fm = FactorizationMachineRegressor(solver=solver, max_iter=4, tol=0, eta0=0.01,
                                       n_components=3, random_state=0)
    fm._epoch_callback = reports.append
    fm.fit(X, y)
    rows, X_rows = _solvers.watched_data(X)
    penalty = 0.5 * fm.alpha * np.sum(fm.w_ ** 2) + 0.5 * fm.beta * np.sum(fm.P_ ** 2)
    expected = 0.5 * np.mean((fm.predict(X_rows) - y[rows]) ** 2) + penalty
    np.testing.assert_allclose(reports[-1].objective, expected, rtol=1e-8)
    full = 0.5 * np.mean((fm.predict(X) - y) ** 2) + penalty
    assert abs(reports[-1].objective - full) < 0.1 * full  # an estimate of the whole


def test_no_prediction_pass_over_all_rows_after_a_pass(small_minimum, monkeypatch):
    X, y = _data()
    sizes = []
    original = FactorizationMachineRegressor._predict_output

    def counted(self, X_, *args, **kwargs):
        sizes.append(X_.shape[0])
        return original(self, X_, *args, **kwargs)

    monkeypatch.setattr(FactorizationMachineRegressor, "_predict_output", counted)
    FactorizationMachineRegressor(solver="sgd", max_iter=3, tol=0, eta0=0.01,
                                  n_components=3, random_state=0).fit(X, y)
    assert sizes and set(sizes) == {300}  # the initial objective and each pass's
    sizes.clear()
    FactorizationMachineRegressor(solver="adagrad", n_components=3).partial_fit(X, y)
    assert set(sizes) == {300}


def test_one_vs_rest_outputs_watch_the_sample(small_minimum, monkeypatch):
    """Three outputs on two threads: each watches the sample (built once for all)."""
    X, y = _data()
    labels = np.digitize(y, np.quantile(y, [0.33, 0.66]))
    built = []
    original = _solvers.watched_data

    def counted(X_):
        built.append(X_.shape[0])
        return original(X_)

    monkeypatch.setattr(_solvers, "watched_data", counted)
    sizes = []
    predict_output = FactorizationMachineClassifier._predict_output

    def watched(self, X_, *args, **kwargs):
        sizes.append(X_.shape[0])
        return predict_output(self, X_, *args, **kwargs)

    monkeypatch.setattr(FactorizationMachineClassifier, "_predict_output", watched)
    clf = FactorizationMachineClassifier(solver="adagrad", n_components=3, max_iter=8,
                                         tol=0, random_state=0, n_jobs=2)
    clf.fit(X, labels)
    assert built == [3000]
    assert set(sizes) == {300} and len(sizes) == 3 * 9  # each output: start, 8 passes
    assert clf.score(X, labels) > 0.6


def test_divergence_is_still_caught(small_minimum):
    X, y = _data()
    with pytest.raises(FloatingPointError, match="diverged"):
        FactorizationMachineRegressor(solver="sgd", eta0=50.0, max_iter=20,
                                      n_components=3, random_state=0).fit(X * 30, y)
