"""polylite.dask: fits on Dask arrays of CSR row blocks, on a local cluster of processes."""
import threading
import time
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

import polylite  # noqa: E402
from polylite import dask as pdask  # noqa: E402
from polylite.dask import _estimators  # noqa: E402
from polylite.datasets import make_recommender  # noqa: E402

LBFGS = dict(degree=2, n_components=3, solver="lbfgs", max_iter=25, random_state=0)


def to_dask(X, y, rows):
    """X as da.concatenate of da.from_delayed CSR row blocks, y chunked alike."""
    starts = range(0, X.shape[0], rows)
    blocks = [da.from_delayed(dask.delayed(X[i:i + rows]),
                              shape=(min(rows, X.shape[0] - i), X.shape[1]),
                              dtype=X.dtype, meta=sp.csr_matrix((0, 0), dtype=X.dtype))
              for i in starts]
    return da.concatenate(blocks), da.from_array(np.asarray(y), chunks=rows)


@pytest.fixture(scope="module")
def data():
    return make_recommender(1500, 25, 15, random_state=0)


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as cluster, \
            distributed.Client(cluster) as client:
        yield client


def assert_close(actual, expected, rtol=1e-6):
    scale = max(np.max(np.abs(expected)), 1e-12)
    assert np.max(np.abs(np.asarray(actual) - expected)) <= rtol * scale


def _sent_bytes(client):
    return client.run(lambda dask_worker: dask_worker.transfer_outgoing_bytes_total)


def test_each_worker_sends_one_sum_whatever_its_blocks(client):
    """The parts of the blocks one worker holds are added there: each worker sends one
    part's bytes (a tree over the blocks in their order would send one per addition
    whose inputs sit on different workers: here every one)."""
    size = 250_000  # parts of 2 MB
    workers = sorted(client.scheduler_info()["workers"])
    blocks = [client.scatter(np.full(size, float(i)), workers=[workers[i % 2]])
              for i in range(8)]
    before = _sent_bytes(client)
    total = _estimators._sum_by_worker(client, blocks,
                                       lambda i: dask.delayed(np.multiply)(blocks[i], 2.0))
    sent = [n - before[w] for w, n in _sent_bytes(client).items()]
    np.testing.assert_array_equal(total, np.full(size, 56.0))
    assert max(sent) < 1.5 * total.nbytes


def test_lbfgs_equals_the_in_memory_fit(client, data):
    X, y = data
    Xd, yd = to_dask(X, y, 400)  # 4 blocks, the last one shorter
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = pdask.FactorizationMachineRegressor(**LBFGS).fit(Xd, yd, client=client)
        local = polylite.FactorizationMachineRegressor(**LBFGS).fit(X, y)
    assert fit.n_iter_ == local.n_iter_
    for name in ("w_", "P_"):
        assert_close(getattr(fit, name), getattr(local, name))
    assert fit.intercept_ == pytest.approx(local.intercept_, rel=1e-6)
    pred = fit.predict(Xd)
    assert isinstance(pred, da.Array)
    assert_close(pred.compute(), local.predict(X))
    history = fit.objective_history_[0]
    assert len(history) == fit.n_iter_ and history[-1] < history[0]
    # "auto", the in-memory default that from_local keeps, is L-BFGS here.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        auto = pdask.FactorizationMachineRegressor(**dict(LBFGS, solver="auto")).fit(
            Xd, yd, client=client)
    assert auto.solver_ == "lbfgs"
    # each fit persists its blocks anew, and the sums follow their placement: rounding
    assert_close(auto.P_, fit.P_, rtol=1e-9)


def test_multiclass_lbfgs_equals_the_in_memory_fit(client, data):
    X, y = data
    labels = np.digitize(y, np.percentile(y, [30, 70]))  # 3 classes
    Xd, yd = to_dask(X, labels, 500)
    params = dict(LBFGS, max_iter=10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = pdask.FactorizationMachineClassifier(**params).fit(Xd, yd, client=client)
        local = polylite.FactorizationMachineClassifier(**params).fit(X, labels)
    np.testing.assert_array_equal(fit.classes_, local.classes_)
    assert_close(fit.P_, local.P_)
    assert_close(fit.decision_function(Xd).compute(), local.decision_function(X))
    np.testing.assert_array_equal(fit.predict(Xd).compute(), local.predict(X))
    assert fit.predict_proba(Xd).compute().shape == (X.shape[0], 3)


def test_binary_classifier_with_string_labels(data):
    """Two classes: one output, the second class positive, as in memory (on Dask's
    synchronous scheduler: no cluster needed)."""
    X, y = data
    labels = np.where(y > np.median(y), "high", "low")
    Xd, yd = to_dask(X, labels, 500)
    params = dict(LBFGS, max_iter=10)
    with dask.config.set(scheduler="synchronous"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = pdask.FactorizationMachineClassifier(**params).fit(Xd, yd)
        local = polylite.FactorizationMachineClassifier(**params).fit(X, labels)
        assert fit.P_.shape == local.P_.shape == (1, 1, X.shape[1], 3)
        assert_close(fit.P_, local.P_)
        scores = fit.decision_function(Xd).compute()
        assert scores.shape == (X.shape[0],)
        np.testing.assert_array_equal(fit.predict(Xd).compute(), local.predict(X))


def test_adagrad_averages_the_blocks_local_epochs_by_rows(data):
    """One epoch: the rows-weighted mean of each block's local epoch from the initial
    model (replayed here with the seeds the fit draws), on Dask's synchronous scheduler."""
    X, y = data
    Xd, yd = to_dask(X, y, 1000)  # blocks of 1000 and 500 rows
    params = dict(degree=2, n_components=3, solver="adagrad", eta0=0.05, max_iter=1,
                  random_state=0)
    with dask.config.set(scheduler="synchronous"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = pdask.FactorizationMachineRegressor(**params).fit(Xd, yd)
    est = polylite.FactorizationMachineRegressor(**params)
    rng = np.random.RandomState(0)
    stack = est._allocate(1, X.shape[1], X.dtype)
    est._init_nonlinear(est._output(stack, 0), rng)
    model = {name: a[0] for name, a in stack.items()}
    seeds = rng.randint(2**31, size=2)
    job = _estimators._Job(est, 0, None, 0, "anova", (2,), 1 / X.shape[0])
    parts = [_estimators._block_adagrad_epoch((X[a:b], y[a:b]), model, None, seed, job)[0]
             for (a, b), seed in zip([(0, 1000), (1000, 1500)], seeds)]
    expected = (parts[0]["P"] + parts[1]["P"]) / X.shape[0]
    assert not np.allclose(parts[0]["P"] / 1000, parts[1]["P"] / 500)  # blocks differ
    np.testing.assert_allclose(fit.P_, expected, rtol=1e-12)
    history = fit.objective_history_[0]
    assert len(history) == 2 and history[1] < history[0]


def test_adagrad_on_the_cluster_learns(client, data):
    X, y = data
    Xd, yd = to_dask(X, y, 500)
    est = pdask.FactorizationMachineRegressor(
        degree=2, n_components=3, solver="adagrad", eta0=0.05, max_iter=15, tol=0,
        random_state=0)
    with pytest.warns(ConvergenceWarning, match="adagrad did not converge"):
        fit = est.fit(Xd, yd, client=client)
    history = fit.objective_history_[0]
    assert len(history) == 16 and history[-1] < 0.5 * history[0]
    rmse = np.sqrt(np.mean((fit.predict(Xd).compute() - y) ** 2))
    assert rmse < np.std(y)


def test_to_local_save_and_load(client, data, tmp_path):
    X, y = data
    Xd, yd = to_dask(X, y, 750)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = pdask.FactorizationMachineRegressor(**dict(LBFGS, max_iter=5)).fit(
            Xd, yd, client=client)
    local = fit.to_local()
    assert type(local) is polylite.FactorizationMachineRegressor
    expected = fit.predict(Xd).compute()
    np.testing.assert_array_equal(local.predict(X), expected)
    np.testing.assert_array_equal(fit.predict(X), expected)  # in-memory X: at once
    fit.save(tmp_path / "model.npz")
    np.testing.assert_array_equal(polylite.load(tmp_path / "model.npz").predict(X),
                                  expected)
    again = pdask.load(tmp_path / "model.npz")
    assert type(again) is pdask.FactorizationMachineRegressor
    np.testing.assert_array_equal(again.predict(Xd).compute(), expected)
    with pytest.raises(TypeError, match="from_local takes"):
        pdask.FactorizationMachineClassifier.from_local(local)


def test_bad_input_gets_clear_errors(data):
    X, y = data
    X = X[:600]
    y = y[:600]
    est = pdask.FactorizationMachineRegressor(**LBFGS)
    with dask.config.set(scheduler="synchronous"):
        with pytest.raises(TypeError, match="takes Dask arrays"):
            est.fit(X, y)
        dense = da.from_array(X.toarray(), chunks=(300, -1))
        with pytest.raises(TypeError, match=r"row block \d of X is a ndarray.*CSR"):
            est.fit(dense, da.from_array(y, chunks=300))
        csc = da.from_delayed(dask.delayed(X.tocsc()), shape=X.shape, dtype=X.dtype)
        with pytest.raises(TypeError, match="scipy.sparse CSC"):
            est.fit(csc, da.from_array(y, chunks=600))
        Xd, _ = to_dask(X, y, 300)
        with pytest.raises(ValueError, match="2 row blocks but y has 3 chunks"):
            est.fit(Xd, da.from_array(y, chunks=200))
        with pytest.raises(ValueError, match="X has 200 rows but the matching chunk"):
            # Chunk sizes declared wrongly: the blocks themselves disagree.
            wrong = da.from_delayed(dask.delayed(X[:200]), shape=(300, X.shape[1]),
                                    dtype=X.dtype)
            est.fit(da.concatenate([wrong, Xd.blocks[1]]), da.from_array(y, chunks=300))
        narrow = da.from_delayed(dask.delayed(X[300:, :-1]), shape=(300, X.shape[1]),
                                 dtype=X.dtype)
        with pytest.raises(ValueError, match="different numbers of columns"):
            est.fit(da.concatenate([Xd.blocks[0], narrow]), da.from_array(y, chunks=300))
        with pytest.raises(ValueError, match="solver 'lbfgs' or 'adagrad'"):
            pdask.FactorizationMachineRegressor(solver="cd").fit(
                Xd, da.from_array(y, chunks=300))
    assert not hasattr(est, "P_")


def test_a_worker_lost_mid_fit_gives_the_right_model_or_an_error(data):
    """Three worker processes, one killed during an L-BFGS fit: Dask recomputes its
    blocks from their source, and the fit equals the in-memory one (or raises)."""
    X, y = data
    Xd, yd = to_dask(X, y, 250)  # 6 blocks, two per worker
    params = dict(LBFGS, max_iter=40, tol=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        local = polylite.FactorizationMachineRegressor(**params).fit(X, y)
    est = pdask.FactorizationMachineRegressor(**params)
    outcome = {}

    def fit():
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est.fit(Xd, yd, client=client)
        except Exception as exc:  # noqa: BLE001 - any clear error is acceptable
            outcome["error"] = exc

    with distributed.LocalCluster(n_workers=3, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as cluster, \
            distributed.Client(cluster) as client:
        thread = threading.Thread(target=fit)
        thread.start()
        deadline = time.monotonic() + 120
        while (not getattr(est, "objective_history_", [[]])[0][2:]
               and time.monotonic() < deadline and thread.is_alive()):
            time.sleep(0.05)
        assert thread.is_alive(), "the fit ended before a worker could be lost"
        victim = next(iter(cluster.workers.values()))
        victim.process.process.kill()  # as a crash would
        thread.join(180)
        assert not thread.is_alive()
    if "error" in outcome:
        assert str(outcome["error"])
    else:
        assert_close(est.P_, local.P_)
        assert_close(est.w_, local.w_)


def _click_rows(n=600, seed=0):
    """One-hot rows of three fields (6, 5 and 4 levels) and clicks that depend on the
    first two fields' levels; the field of each column."""
    rng = np.random.RandomState(seed)
    sizes = (6, 5, 4)
    starts = np.cumsum((0,) + sizes[:-1])
    levels = np.stack([rng.randint(s, size=n) for s in sizes], axis=1)
    cols = (levels + starts).ravel()
    X = sp.csr_matrix((np.ones(cols.size), cols, np.arange(0, cols.size + 1, 3)),
                      shape=(n, sum(sizes)))
    logit = 2.0 * ((levels[:, 0] % 2) == (levels[:, 1] % 2)) - 1.0
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-2 * logit))).astype(int)
    return X, y, np.repeat(np.arange(3), sizes)


FIELD_MODELS = [("FieldAwareFactorizationMachineClassifier", "P_"),
                ("FieldWeightedFactorizationMachineClassifier", "field_weights_"),
                ("FieldWeightedFactorizationMachineRegressor", "field_weights_")]


@pytest.mark.parametrize("name, attribute", FIELD_MODELS)
def test_field_models_on_one_block_are_the_in_memory_fit(name, attribute):
    """AdaGrad averaging of one block is the block's own passes: the in-memory fit
    (rows in order), its fields, row normalisation, AdaGrad's sums starting at 1 and
    statistics carried from epoch to epoch included."""
    X, y, fields = _click_rows()
    params = dict(fields=fields, max_iter=3, shuffle=False, random_state=0)
    with dask.config.set(scheduler="synchronous"):
        fit = getattr(pdask, name)(**params).fit(*to_dask(X, y, X.shape[0]))
    local = getattr(polylite, name)(**params).fit(X, y)
    for attr in ("w_", "P_", attribute):
        np.testing.assert_allclose(getattr(fit, attr), getattr(local, attr), rtol=1e-10,
                                   atol=1e-13)
    np.testing.assert_allclose(fit.predict(X), local.predict(X), rtol=1e-10)
    assert type(fit.to_local()) is type(local)


@pytest.mark.parametrize("name, attribute", FIELD_MODELS[:2])
def test_field_models_average_the_blocks_local_epochs_by_rows(name, attribute):
    """One epoch on two blocks: the rows-weighted mean of each block's local epoch from
    the initial model (replayed with the seeds the fit draws)."""
    X, y, fields = _click_rows()
    params = dict(fields=fields, max_iter=1, random_state=0)
    with dask.config.set(scheduler="synchronous"):
        fit = getattr(pdask, name)(**params).fit(*to_dask(X, y, 400))
    est = getattr(polylite, name)(**params)
    est.fields_, est.n_fields_ = fields.astype(np.intc), 3
    rng = np.random.RandomState(0)
    stack = est._allocate(1, X.shape[1], X.dtype)
    est._init_nonlinear(est._output(stack, 0), rng)
    model = {key: a[0] for key, a in stack.items()}
    seeds = rng.randint(2**31, size=2)
    kernel = est._structure()[0]
    job = _estimators._Job(est, 0, np.array([0, 1]), 1, kernel, (2,), 1 / X.shape[0])
    from sklearn.preprocessing import normalize
    Xu = normalize(X)
    parts = [_estimators._block_adagrad_epoch((Xu[a:b], y[a:b]), model, None, seed,
                                              job)[0]
             for (a, b), seed in zip([(0, 400), (400, 600)], seeds)]
    for key in ("P", "lam" if attribute == "field_weights_" else "w"):
        expected = (parts[0][key] + parts[1][key]) / X.shape[0]
        assert not np.allclose(parts[0][key] / 400, parts[1][key] / 200)
        got = fit._stacked()[key][0]
        np.testing.assert_allclose(got, expected.astype(got.dtype).reshape(got.shape),
                                   rtol=1e-12)


def test_field_models_on_the_cluster_learn(client):
    X, y, fields = _click_rows(1500)
    Xd, yd = to_dask(X, y, 500)
    for name, _ in FIELD_MODELS[:2]:
        fit = getattr(pdask, name)(fields=fields, max_iter=8, random_state=0).fit(
            Xd, yd, client=client)
        history = fit.objective_history_[0]
        assert len(history) == 9 and history[-1] < history[0]
        proba = fit.predict_proba(Xd).compute()[:, 1]
        assert np.mean((proba > 0.5) == y) > 0.7
    with pytest.raises(ValueError, match="solver 'adagrad'"):
        pdask.FieldAwareFactorizationMachineClassifier(fields=fields,
                                                       solver="sgd").fit(Xd, yd)
    for name, _ in FIELD_MODELS:  # FTRL steps one row after another: not averaged
        with pytest.raises(ValueError, match="solver 'adagrad', got solver='ftrl'"):
            getattr(pdask, name)(fields=fields, solver="ftrl").fit(Xd, yd)
