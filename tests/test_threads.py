"""Threads (``n_jobs``): batch prediction, the L-BFGS pass and SGD/AdaGrad mini-batches.

What is promised: predictions do not depend on the thread count at all; the L-BFGS value
and gradient and a mini-batch pass agree across thread counts to rounding and are the
same, bit for bit, from run to run with the same thread count.  The Cython functions are
called with explicit thread counts (including more threads than rows); the estimators
with ``n_jobs``, with the rows-per-thread thresholds lowered so that small data is shared.
"""
import warnings

from types import SimpleNamespace

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning

from polylite._engine import layouts
from polylite._engine.problem import FittedModel, Problem, Schedule
from polylite import (FactorizationMachineClassifier, FactorizationMachineRegressor,
                      PolynomialNetworkClassifier, PolynomialNetworkRegressor,
                      _validation, kernels)
from polylite._engine import _kernels, _losses, _sgd, solvers as _solvers

# (kernel, degrees, number of dummy rows): every structure the solvers know.
MODELS = [("anova", [2], 0), ("anova", [3], 0), ("anova", [2, 3, 4], 0),
          ("anova", [3], 2), ("all-subsets", [0], 0), ("polynomial", [2], 1),
          ("polynomial", [3], 0)]
MODEL_IDS = ["fm2", "fm3", "fm2-4", "fm3-shared", "all-subsets", "pn2-augment", "pn3"]


def _problem(model, n=40, d=7, k=3, dtype=np.float64, index_dtype=np.int32, seed=0):
    kernel, degrees, n_dummy = model
    rng = np.random.RandomState(seed)
    X = sp.random(n, d, density=0.5, format="csr", random_state=rng, dtype=np.float64)
    X.data = rng.uniform(-1.0, 1.0, X.nnz)
    X.sort_indices()
    X = sp.csr_matrix((X.data.astype(dtype), X.indices.astype(index_dtype),
                       X.indptr.astype(index_dtype)), shape=X.shape)
    params = dict(intercept=np.array([0.3], dtype), w=rng.randn(d).astype(dtype),
                  P=(0.4 * rng.randn(len(degrees), d, k)).astype(dtype),
                  gamma=(0.4 * rng.randn(n_dummy, k)).astype(dtype),
                  lam=(rng.randn(k) if kernel == "polynomial" else np.ones(k)).astype(dtype))
    y = rng.randn(n)
    sw = rng.uniform(0.2, 2.0, n)
    return X, y, sw, params


def _predict_csr(X, model, params, n_threads):
    kernel, degrees, _ = model
    out = np.empty(X.shape[0], params["P"].dtype)
    return _kernels.predict_csr(X.data, X.indices, X.indptr, _fitted(model, params), out,
                                n_threads)


def _fitted(model, params):
    kernel, degrees, _ = model
    return FittedModel(float(params["intercept"][0]), params["w"], params["P"],
                       params["gamma"], params["lam"], np.array(degrees, np.intc),
                       kernels.KERNELS[kernel])


# ---- batch prediction -------------------------------------------------------------------

@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("model", MODELS, ids=MODEL_IDS)
def test_predict_is_the_same_on_any_number_of_threads(model, dtype, index_dtype):
    X, _, _, params = _problem(model, n=23, dtype=dtype, index_dtype=index_dtype)
    one = _predict_csr(X, model, params, 1)
    for n_threads in (2, 3, 8, 23, 40):  # 40 threads for 23 rows: some get none
        np.testing.assert_array_equal(_predict_csr(X, model, params, n_threads), one)
    # and the same as the reference of the kernel layer's tests (explicit terms)
    kernel, degrees, _ = model
    ref = kernels.predict(X, params["P"], degrees=None if kernel == "all-subsets"
                          else degrees, kernel=kernel, intercept=params["intercept"][0],
                          w=params["w"], gamma=params["gamma"], lam=params["lam"])
    np.testing.assert_array_equal(one, ref)


def test_predict_threads_with_empty_rows_and_no_rows():
    model = ("anova", [2], 0)
    X, _, _, params = _problem(model, n=6)
    X = sp.vstack([sp.csr_matrix((3, X.shape[1])), X, sp.csr_matrix((2, X.shape[1]))],
                  format="csr")
    np.testing.assert_array_equal(_predict_csr(X, model, params, 4),
                                  _predict_csr(X, model, params, 1))
    assert _predict_csr(X[:0], model, params, 3).shape == (0,)


def test_predict_csr_rejects_bad_thread_counts_and_output_sizes():
    model = ("anova", [2], 0)
    X, _, _, params = _problem(model, n=5)
    with pytest.raises(ValueError, match="n_threads"):
        _predict_csr(X, model, params, 0)
    with pytest.raises(ValueError, match="out has"):
        _kernels.predict_csr(X.data, X.indices, X.indptr, _fitted(model, params),
                             np.empty(4), 1)


def test_kernels_predict_n_jobs(monkeypatch):
    model = ("anova", [2, 3], 0)
    X, _, _, params = _problem(model, n=50)
    monkeypatch.setattr(_validation, "MIN_ROWS_PER_THREAD", 10)
    calls = []
    original = _kernels.predict_csr

    def spy(*args):
        calls.append(args[-1])
        return original(*args)

    monkeypatch.setattr(_kernels, "predict_csr", spy)
    kw = dict(degrees=[2, 3], intercept=0.3, w=params["w"])
    one = kernels.predict(X, params["P"], **kw)
    np.testing.assert_array_equal(kernels.predict(X, params["P"], n_jobs=3, **kw), one)
    np.testing.assert_array_equal(kernels.predict(X, params["P"], n_jobs=-1, **kw), one)
    assert calls[:2] == [1, 3]
    with pytest.raises(ValueError, match="n_jobs"):
        kernels.predict(X, params["P"], n_jobs=0, **kw)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("k", [1, 3, 10])
@pytest.mark.parametrize("model", [("anova", [3], 0), ("anova", [4], 0),
                                   ("anova", [2, 3, 4], 0), ("anova", [3], 2)],
                         ids=["fm3", "fm4", "fm2-4", "fm3-shared"])
def test_predict_threads_running_at_once(monkeypatch, model, k, dtype):
    """Thousands of rows per thread, so that the threads work at the same time: were two
    threads' workspaces (each padded to cache lines of its own) to overlap, rows would be
    computed from another thread's DP table.  Sparse input in one call, dense input in
    several chunks."""
    monkeypatch.setattr(_validation, "MIN_ROWS_PER_THREAD", 1000)
    monkeypatch.setattr(layouts, "DENSE_CHUNK_ROWS", 25_000)   # 3 chunks, the last partial
    X, _, _, params = _problem(model, n=60_000, d=16, k=k, dtype=dtype)
    kw = dict(degrees=model[1], intercept=0.3, w=params["w"], gamma=params["gamma"])
    one = kernels.predict(X, params["P"], **kw)
    dense = kernels.predict(X.toarray(), params["P"], **kw)
    for n_jobs in (2, 3):
        np.testing.assert_array_equal(kernels.predict(X, params["P"], n_jobs=n_jobs, **kw),
                                      one)
        np.testing.assert_array_equal(
            kernels.predict(X.toarray(), params["P"], n_jobs=n_jobs, **kw), dense)


# ---- thread counts --------------------------------------------------------------------

@pytest.mark.parametrize("n_jobs, n_rows, min_rows, cpus, threads", [
    (None, 10**6, 1, 8, 1), (3, 10**6, 1, 8, 3), (-1, 10**6, 1, 8, 8),
    (-2, 10**6, 1, 8, 7), (-20, 10**6, 1, 8, 1), (8, 50, 20, 8, 2), (4, 5, 20, 8, 1)])
def test_row_threads(monkeypatch, n_jobs, n_rows, min_rows, cpus, threads):
    import joblib  # (what row_threads imports when it counts the CPUs)
    monkeypatch.setattr(joblib, "cpu_count", lambda: cpus)
    assert _validation.row_threads(n_jobs, n_rows, min_rows) == threads


def test_stochastic_threads_only_for_mini_batches():
    assert _solvers.stochastic_threads(4, 1) == 1
    assert _solvers.stochastic_threads(4, 10**6) == 4
    assert _solvers.stochastic_threads(4, 2 * _solvers.MIN_BATCH_ROWS_PER_THREAD) == 2
    assert _solvers.stochastic_threads(None, 10**6) == 1


# ---- the L-BFGS value and gradient ------------------------------------------------------

def _objective_gradient(X, y, sw, model, params, loss, n_threads, fit_linear=True):
    kernel, degrees, _ = model
    grads = {name: np.zeros(a.shape) for name, a in params.items()}
    value = _sgd.objective_gradient(
        X, Problem(y, sw / sw.sum(), kernels.KERNELS[kernel], np.array(degrees, np.intc),
                   _losses.loss_code(loss), 0.0, 0.0, True, fit_linear),
        SimpleNamespace(**params), grads, n_threads)
    return value, grads


@pytest.mark.parametrize("loss", ["squared", "logistic"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("model", MODELS, ids=MODEL_IDS)
def test_objective_gradient_threads_agree_to_rounding(model, dtype, loss):
    X, y, sw, params = _problem(model, dtype=dtype)
    if loss == "logistic":
        y = np.sign(y)
    value, grads = _objective_gradient(X, y, sw, model, params, loss, 1)
    for n_threads in (2, 3, 40, 64):  # 64 threads for 40 rows: some get none
        v, g = _objective_gradient(X, y, sw, model, params, loss, n_threads)
        assert v == pytest.approx(value, rel=1e-13)
        for name in grads:
            np.testing.assert_allclose(g[name], grads[name], rtol=1e-12, atol=1e-14,
                                       err_msg=name)
        # the same thread count gives the same bits
        v2, g2 = _objective_gradient(X, y, sw, model, params, loss, n_threads)
        assert v2 == v
        for name in grads:
            np.testing.assert_array_equal(g2[name], g[name])
    # every part of the gradient is exercised
    assert np.max(np.abs(grads["P"])) > 1e-3 and np.max(np.abs(grads["w"])) > 1e-3


def test_objective_gradient_threads_without_linear_term_and_no_rows():
    model = ("anova", [2], 0)
    X, y, sw, params = _problem(model)
    _, grads = _objective_gradient(X, y, sw, model, params, "squared", 3, fit_linear=False)
    np.testing.assert_array_equal(grads["w"], 0.0)
    value, grads = _objective_gradient(X[:0], y[:0], np.ones(0), model, params,
                                       "squared", 3)
    assert value == 0.0 and not np.any(grads["P"])


def test_objective_gradient_rejects_mismatched_shapes():
    model = ("anova", [2], 0)
    X, y, sw, params = _problem(model)
    with pytest.raises(ValueError, match="shapes disagree"):
        _objective_gradient(X, y[:-1], sw[:-1], model, params, "squared", 1)
    with pytest.raises(ValueError, match="n_threads"):
        _objective_gradient(X, y, sw, model, params, "squared", 0)


# ---- SGD/AdaGrad mini-batches -----------------------------------------------------------

def _epochs(X, y, sw, model, params, solver, batch_size, n_threads, epochs=2,
            schedule=1, eta0=0.05, alpha=0.01, beta=0.02):
    kernel, degrees, _ = model
    p = {name: a.copy() for name, a in params.items()}
    adagrad = solver == "adagrad"
    acc = {name: np.zeros(a.shape if adagrad else (0,) * a.ndim, a.dtype)
           for name, a in p.items()}
    last_touch = np.zeros(X.shape[1] if adagrad else 0, np.int64)
    rng = np.random.RandomState(1)
    state = SimpleNamespace(step=0, acc=acc, last_touch=last_touch)
    problem = Problem(y, sw, kernels.KERNELS[kernel], np.array(degrees, np.intc), 0, alpha,
                      beta, True, True, kernel == "polynomial")
    for _ in range(epochs):
        order = rng.permutation(X.shape[0]).astype(np.intp)
        state.step, finite = _sgd.sgd_epoch(
            X, problem, SimpleNamespace(**p), state,
            Schedule(2 if adagrad else schedule, eta0, 0.25, batch_size), order,
            n_threads=n_threads)
        assert finite
    return p, acc, last_touch, state.step


@pytest.mark.parametrize("batch_size", [3, 40, 100])
@pytest.mark.parametrize("solver, schedule", [("sgd", 1), ("sgd", 0), ("adagrad", 2)],
                         ids=["sgd-invscaling", "sgd-constant", "adagrad"])
@pytest.mark.parametrize("model", MODELS, ids=MODEL_IDS)
def test_mini_batch_threads_agree_to_rounding(model, solver, schedule, batch_size):
    X, y, sw, params = _problem(model)
    if model[0] == "polynomial":
        params["P"] *= 0.5
    ref = _epochs(X, y, sw, model, params, solver, batch_size, 1, schedule=schedule)
    for n_threads in (2, 7):  # 7 threads for batches of 3 rows: some get none
        got = _epochs(X, y, sw, model, params, solver, batch_size, n_threads,
                      schedule=schedule)
        assert got[3] == ref[3]
        np.testing.assert_array_equal(got[2], ref[2])
        for name in params:
            np.testing.assert_allclose(got[0][name], ref[0][name], rtol=1e-10,
                                       atol=1e-12, err_msg=name)
            np.testing.assert_allclose(got[1][name], ref[1][name], rtol=1e-10,
                                       atol=1e-12, err_msg=name)
        again = _epochs(X, y, sw, model, params, solver, batch_size, n_threads,
                        schedule=schedule)
        for name in params:
            np.testing.assert_array_equal(again[0][name], got[0][name])
    # the epochs moved the parameters (the comparison is not vacuous)
    assert np.max(np.abs(ref[0]["P"] - params["P"])) > 1e-3


@pytest.mark.parametrize("n_threads", [2, 7])
def test_mini_batch_threads_fold_sgd_scales_mid_pass(n_threads):
    """A strong penalty on w halves SGD's scale of w at each step, so it falls below 1e-9
    after 30 of the pass's 40 mini-batches: the threads fold both scales into their
    shares of the parameters between barriers, and the pass still agrees with one
    thread's."""
    model = ("anova", [2, 3], 1)
    X, y, sw, params = _problem(model, n=120)
    options = dict(schedule=0, eta0=0.05, alpha=10.0, beta=0.1, epochs=1)
    ref = _epochs(X, y, sw, model, params, "sgd", 3, 1, **options)
    got = _epochs(X, y, sw, model, params, "sgd", 3, n_threads, **options)
    for name in params:
        np.testing.assert_allclose(got[0][name], ref[0][name], rtol=1e-10, atol=1e-12,
                                   err_msg=name)
    # the gradient steps keep w away from zero, and P moved (the test is not vacuous)
    assert np.max(np.abs(ref[0]["w"])) > 1e-3
    assert np.max(np.abs(ref[0]["P"] - params["P"])) > 1e-3


def test_mini_batch_threads_stop_at_a_non_finite_prediction():
    model = ("anova", [2], 0)
    X, y, sw, params = _problem(model)
    params["P"][:] = 1e200
    kernel, degrees, _ = model
    acc = {name: np.zeros((0,) * a.ndim) for name, a in params.items()}
    order = np.arange(X.shape[0], dtype=np.intp)
    _, finite = _sgd.sgd_epoch(
        X, Problem(y, sw, 0, np.array(degrees, np.intc), 0, 0.0, 0.0, True, True),
        SimpleNamespace(**params),
        SimpleNamespace(step=0, acc=acc, last_touch=np.zeros(0, np.int64)),
        Schedule(0, 0.01, 0.25, 8), order, n_threads=3)
    assert not finite


# ---- the estimators ---------------------------------------------------------------------

ESTIMATORS = {
    "fm": lambda **kw: FactorizationMachineRegressor(degree=3, n_components=3, **kw),
    "fmc-3class": lambda **kw: FactorizationMachineClassifier(n_components=3, **kw),
    "pn": lambda **kw: PolynomialNetworkRegressor(n_components=3, **kw),
    "pnc": lambda **kw: PolynomialNetworkClassifier(n_components=3, **kw),
}


def _data(name, n=120, seed=3):
    rng = np.random.RandomState(seed)
    X = sp.random(n, 12, density=0.4, format="csr", random_state=rng)
    if "3class" in name:
        y = rng.randint(3, size=n)
    elif name.endswith("c"):
        y = rng.randint(2, size=n)
    else:
        y = X @ rng.randn(12) + rng.randn(n) * 0.1
    return X, y


def _fit(make, X, y, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return make(random_state=0, tol=0.0, **kw).fit(X, y)


def _scores(est, X):
    return est.decision_function(X) if hasattr(est, "classes_") else est.predict(X)


@pytest.mark.parametrize("solver, kw", [
    ("lbfgs", dict(max_iter=10)),
    ("adagrad", dict(max_iter=2, batch_size=30)),
    ("sgd", dict(max_iter=2, batch_size=30, eta0=0.05)),
])
@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_estimator_n_jobs_agrees_and_repeats(monkeypatch, name, solver, kw):
    monkeypatch.setattr(_validation, "MIN_ROWS_PER_THREAD", 20)
    monkeypatch.setattr(_solvers, "MIN_BATCH_ROWS_PER_THREAD", 4)
    make = ESTIMATORS[name]
    X, y = _data(name)
    one = _fit(make, X, y, solver=solver, **kw)
    two = _fit(make, X, y, solver=solver, n_jobs=2, **kw)
    again = _fit(make, X, y, solver=solver, n_jobs=2, **kw)
    np.testing.assert_array_equal(again.P_, two.P_)
    # L-BFGS amplifies rounding differences over its iterations more than a few epochs do
    rtol = 1e-6 if solver == "lbfgs" else 1e-9
    np.testing.assert_allclose(two.P_, one.P_, rtol=rtol, atol=rtol * 1e-2)
    np.testing.assert_allclose(_scores(two, X), _scores(one, X), rtol=rtol,
                               atol=rtol * 1e-2)
    # prediction with threads gives the same bits as on one thread
    np.testing.assert_array_equal(_scores(two, X), _scores(two.set_params(n_jobs=None), X))


def test_estimator_threads_are_used(monkeypatch):
    """The estimators pass their thread counts down (a spy on the Cython calls)."""
    monkeypatch.setattr(_validation, "MIN_ROWS_PER_THREAD", 20)
    monkeypatch.setattr(_solvers, "MIN_BATCH_ROWS_PER_THREAD", 4)
    seen = {"predict": set(), "gradient": set(), "epoch": set()}
    for module, name, key in [(_kernels, "predict_csr", "predict"),
                              (_sgd, "objective_gradient", "gradient"),
                              (_sgd, "sgd_epoch", "epoch")]:
        original = getattr(module, name)

        def spy(*args, _original=original, _key=key, **kw):
            seen[_key].add(kw.get("n_threads", args[-1] if _key != "epoch" else None))
            return _original(*args, **kw)

        monkeypatch.setattr(module, name, spy)
    X, y = _data("pn")
    _fit(ESTIMATORS["pn"], X, y, solver="lbfgs", max_iter=2, n_jobs=3).predict(X)
    _fit(ESTIMATORS["pn"], X, y, solver="adagrad", max_iter=1, batch_size=16, n_jobs=3)
    assert seen == {"predict": {3}, "gradient": {3}, "epoch": {3}}


def test_pn_n_jobs_is_validated():
    X, y = _data("pn")
    with pytest.raises(ValueError, match="n_jobs"):
        PolynomialNetworkRegressor(n_jobs=0).fit(X, y)
