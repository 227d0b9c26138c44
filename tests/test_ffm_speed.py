"""The field-aware pass's fast paths: the AVX pair loops (the portable loop's sums and
steps but for rounding), the pass's rows shared by threads without locks (n_jobs > 1), the chunked
initialisation, and fits that skip the objective between epochs."""
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.metrics import log_loss

from polylite import (FieldAwareFactorizationMachineClassifier,
                      FieldAwareFactorizationMachineRegressor)
from polylite._engine import _sgd, solvers
from polylite.datasets import make_ctr
from polylite.polynomial import _fields as fields_module


def _ctr(n, seed=0):
    X, y, fields = make_ctr(n, n_numeric=3, n_categorical=5, max_categories=300,
                            random_state=seed, dtype=np.float32)
    return X, y, fields


def _fit(X, y, fields, **params):
    params = dict(dict(fields=fields, max_iter=3, random_state=0), **params)
    return FieldAwareFactorizationMachineClassifier(**params).fit(X, y)


def _mixed_rows(X):
    """X with a second nonzero in the first field on every fifth row (the general
    steps) beside rows of one nonzero per field (the pair steps)."""
    X = X.tolil(copy=True)
    for i in range(0, X.shape[0], 5):
        X[i, 0] = 0.5
        X[i, 1] = 0.25
    return sp.csr_matrix(X)


@pytest.mark.parametrize("n_components", [4, 8])
@pytest.mark.parametrize("fit_linear", [True, False])
@pytest.mark.parametrize("mixed", [False, True])
def test_vector_pair_loops_agree_with_the_portable_loop(n_components, fit_linear, mixed):
    """float32 AdaGrad with vectors of a multiple of four floats takes the AVX pair
    loops where the CPU has AVX: the portable loop's parameters but for rounding (their
    step sizes' 1 / sqrt(G) is good to about 2^-22, their predictions sum floats in
    another order)."""
    X, y, fields = _ctr(1500)
    if mixed:
        X = _mixed_rows(X)
    fits = []
    for on in (True, False):
        previous = _sgd.set_vector_pairs(on)
        try:
            fits.append(_fit(X, y, fields, n_components=n_components,
                             fit_linear=fit_linear, fit_intercept=fit_linear))
        finally:
            _sgd.set_vector_pairs(previous)
    vector, portable = fits
    assert vector.P_.dtype == np.float32
    np.testing.assert_allclose(vector.P_, portable.P_, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(vector.w_, portable.w_, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(vector.intercept_, portable.intercept_, rtol=1e-4)
    np.testing.assert_allclose(vector.decision_function(X), portable.decision_function(X),
                               rtol=1e-4, atol=1e-5)


def _numpy_pair_steps(X, y, fields, P, G, rows, eta0, beta):
    """libffm's AdaGrad steps on ``rows`` (in that order) of one nonzero per field (no
    linear term, no intercept), in float64, on ``P`` and its sums ``G`` in place."""
    for i in rows:
        ind = X.indices[X.indptr[i]:X.indptr[i + 1]]
        val = X.data[X.indptr[i]:X.indptr[i + 1]].astype(np.float64)
        pred = sum(P[ind[a], fields[ind[b]]] @ P[ind[b], fields[ind[a]]]
                   * val[a] * val[b]
                   for a in range(len(ind)) for b in range(a + 1, len(ind)))
        dl = -y[i] / (1 + np.exp(y[i] * pred))
        for a in range(len(ind)):
            for b in range(a + 1, len(ind)):
                ja, jb = ind[a], ind[b]
                pa, pb = P[ja, fields[jb]], P[jb, fields[ja]]
                c = dl * val[a] * val[b]
                ga, gb = c * pb + beta * pa, c * pa + beta * pb
                G[ja, fields[jb]] += ga * ga
                G[jb, fields[ja]] += gb * gb
                pa -= eta0 * ga / (np.sqrt(G[ja, fields[jb]]) + 1e-8)
                pb -= eta0 * gb / (np.sqrt(G[jb, fields[ja]]) + 1e-8)


def _numpy_pair_fit(X, y, fields, P, epochs, eta0, beta, threads=1, round_rows=None):
    """:func:`_numpy_pair_steps` over every row, ``epochs`` times: the reference of the
    float32 pass.  ``threads`` > 1: each thread takes its contiguous share of the rows,
    ``round_rows`` at a time; in each round each thread steps on its own copy from the
    round's start, and the copies' changes are added (the pass shared by threads when
    every feature that two threads' rows read is hot)."""
    P = P.astype(np.float64).copy()
    G = np.ones_like(P)
    n = X.shape[0]
    shares = [range(n * t // threads, n * (t + 1) // threads) for t in range(threads)]
    round_rows = round_rows or n
    for _ in range(epochs):
        for r in range(0, max(len(share) for share in shares), round_rows):
            start_P, start_G = P.copy(), G.copy()
            for share in shares:
                own_P, own_G = start_P.copy(), start_G.copy()
                _numpy_pair_steps(X, y, fields, own_P, own_G, share[r:r + round_rows],
                                  eta0, beta)
                P += own_P - start_P
                G += own_G - start_G
    return P


def test_float32_pair_steps_against_numpy_reference():
    X, y01, fields = _ctr(150)
    est = FieldAwareFactorizationMachineClassifier(
        fields=fields, n_components=4, fit_linear=False, fit_intercept=False,
        max_iter=2, shuffle=False, random_state=0).fit(X, y01)
    n_fields = int(fields.max()) + 1
    P0 = np.random.RandomState(0).uniform(0, 0.5, size=(X.shape[1], n_fields * 4))
    P0 = P0.astype(np.float32).reshape(X.shape[1], n_fields, 4)
    Xn = sp.csr_matrix(X / np.sqrt(np.asarray(X.multiply(X).sum(axis=1))))
    P = _numpy_pair_fit(Xn, 2.0 * y01 - 1, fields, P0, 2, 0.2, 2e-5)
    np.testing.assert_allclose(est.P_[0], P, rtol=2e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_two_threads_merge_their_copies_of_the_hot_features(monkeypatch, dtype):
    """n_jobs=2: each thread steps on its own copy of the parameters of the features
    that many rows read (the hot ones), merged after every round of rows.  On rows where
    every feature that both threads' rows read is hot, no parameter is shared during a
    round, and the fit is the reference's: in each round, each thread's next rows from
    the round's start, the changes added (float32: the AVX loops where the CPU has
    them; float64: the portable loops)."""
    monkeypatch.setattr(solvers, "MIN_SHARED_ROWS_PER_THREAD", 10)  # threads on few rows
    X, y01, fields = _ctr(150)
    X = X.astype(dtype)
    n_fields = int(fields.max()) + 1
    order = np.arange(X.shape[0], dtype=np.intp)
    slot, hot = _sgd._hot_features(X, order, X.shape[1], 8 * n_fields * 4)
    first, second = (np.unique(X[rows].indices) for rows in (slice(0, 75), slice(75, 150)))
    assert np.all(slot[np.intersect1d(first, second)] >= 0)
    est = FieldAwareFactorizationMachineClassifier(
        fields=fields, n_components=4, fit_linear=False, fit_intercept=False,
        max_iter=2, shuffle=False, random_state=0, n_jobs=2).fit(X, y01)
    assert est.P_.dtype == dtype
    P0 = np.random.RandomState(0).uniform(0, 0.5, size=(X.shape[1], n_fields * 4))
    P0 = P0.astype(dtype).reshape(X.shape[1], n_fields, 4)
    Xn = sp.csr_matrix(X / np.sqrt(np.asarray(X.multiply(X).sum(axis=1))))
    P = _numpy_pair_fit(Xn, 2.0 * y01 - 1, fields, P0, 2, 0.2, 2e-5, threads=2,
                        round_rows=_sgd.HOT_MIN_ROUND_ROWS)  # (75 rows: two rounds)
    np.testing.assert_allclose(est.P_[0], P, rtol=2e-4, atol=1e-5)


def test_hot_features_are_the_ones_many_rows_read():
    """The hot features: read by at least one row in HOT_SHARE, the most read first
    (ties by feature), at most HOT_BYTES of copies."""
    X, _, _ = _ctr(5000)
    order = np.random.RandomState(0).permutation(X.shape[0]).astype(np.intp)
    counts = np.bincount(X.indices, minlength=X.shape[1])
    slot, hot = _sgd._hot_features(X, order, X.shape[1], 64)
    expected = np.flatnonzero(counts * _sgd.HOT_SHARE >= X.shape[0])
    expected = expected[np.argsort(-counts[expected], kind="stable")]
    np.testing.assert_array_equal(hot, expected)
    np.testing.assert_array_equal(slot[hot], np.arange(hot.shape[0]))
    assert np.all(np.delete(slot, hot) == -1)
    row_bytes = _sgd.HOT_BYTES // 3
    np.testing.assert_array_equal(
        _sgd._hot_features(X, order, X.shape[1], row_bytes)[1], expected[:3])


@pytest.mark.parametrize("n_rows, n_jobs", [(6000, 2), (20000, 2), (100000, 4),
                                            (100000, 8)])
@pytest.mark.parametrize("mixed", [False, True])
def test_two_threads_reach_the_log_loss_of_one(n_rows, n_jobs, mixed):
    """n_jobs=2: the threads share each pass's rows, stepping without locks but on
    their own copies of the hot features' parameters, merged after each round of rows
    (20,000 rows: several rounds; mixed: rows with two nonzeros in a field, which step
    on the shared parameters); results vary from run to run, and the fit is as good as
    one thread's.  So on 4 and 8 threads, whose rounds are shorter (on 8 threads with
    rounds as long as two threads', the added copies overshot: log loss 0.45 against
    0.22)."""
    X, y, fields = _ctr(n_rows + 3000)
    if mixed:
        X = _mixed_rows(X)
    X, X_test, y, y_test = X[:n_rows], X[n_rows:], y[:n_rows], y[n_rows:]
    losses = {}
    for threads in (1, n_jobs):
        est = _fit(X, y, fields, max_iter=5, n_jobs=threads)
        losses[threads] = log_loss(y_test, est.predict_proba(X_test)[:, 1])
        assert np.all(np.isfinite(est.P_))
    assert abs(losses[n_jobs] - losses[1]) < 0.01, losses
    assert losses[1] < log_loss(y_test, np.full(y_test.shape, y.mean())) - 0.01


def test_one_thread_unchanged_by_n_jobs_semantics():
    """n_jobs=1 and n_jobs=None are the same fit, bit for bit, run after run; n_jobs=2
    with mini-batches (an explicit batch_size) stays the deterministic mini-batch
    pass."""
    X, y, fields = _ctr(2500)
    a = _fit(X, y, fields, n_jobs=1)
    b = _fit(X, y, fields, n_jobs=None)
    np.testing.assert_array_equal(a.P_, b.P_)
    batch = dict(batch_size=500, max_iter=2)
    one = _fit(X, y, fields, n_jobs=1, **batch)
    two = _fit(X, y, fields, n_jobs=2, **batch)
    np.testing.assert_allclose(two.P_, one.P_, rtol=1e-5, atol=1e-7)


def test_threads_of_a_field_aware_pass():
    """Rows shared by threads only for field-aware AdaGrad/SGD passes of one row per
    step, at least MIN_SHARED_ROWS_PER_THREAD rows per thread."""
    rows = solvers.MIN_SHARED_ROWS_PER_THREAD
    assert solvers.stochastic_threads(2, 1, True, 2 * rows) == 2
    assert solvers.stochastic_threads(2, 1, True, 2 * rows - 1) == 1
    assert solvers.stochastic_threads(2, 1, False, 10 * rows) == 1
    assert solvers.stochastic_threads(None, 1, True, 10 * rows) == 1


@pytest.mark.parametrize("n_threads", [1, 2])
def test_shared_pass_counts_every_row_as_a_step(n_threads):
    """sgd_epoch on threads advances the step count by the pass's rows, as one
    thread's."""
    X, y, fields = _ctr(2400)
    est = FieldAwareFactorizationMachineRegressor(fields=fields, max_iter=1,
                                                  solver="sgd", random_state=0)
    est.fit(X, y.astype(float))
    n_calls = []
    original = _sgd.sgd_epoch

    def spy(*args, **kwargs):
        n_calls.append(kwargs.get("n_threads"))
        return original(*args, **kwargs)

    solvers._sgd.sgd_epoch = spy
    try:
        two = FieldAwareFactorizationMachineRegressor(
            fields=fields, max_iter=1, solver="sgd", random_state=0,
            n_jobs=n_threads).fit(X, y.astype(float))
    finally:
        solvers._sgd.sgd_epoch = original
    assert n_calls == [n_threads]
    assert np.all(np.isfinite(two.P_))


def test_chunked_initialisation_draws_the_same_numbers(monkeypatch):
    monkeypatch.setattr(fields_module, "_FILL_CHUNK", 7)
    out = np.empty((3, 5, 4), np.float32)
    fields_module._fill_uniform(out, np.random.RandomState(4), 0.5)
    expected = np.random.RandomState(4).uniform(0, 0.5, size=out.shape)
    np.testing.assert_array_equal(out, expected.astype(np.float32))
    strided = np.empty((6, 5), np.float64)[::2]
    fields_module._fill_uniform(strided, np.random.RandomState(4), 0.5)
    np.testing.assert_array_equal(strided,
                                  np.random.RandomState(4).uniform(0, 0.5, (3, 5)))


def test_fit_without_tol_skips_the_objective_and_still_catches_divergence():
    """tol=None (the default): no objective between epochs (the same model as with a
    tol that never stops it), and a diverging fit still raises."""
    X, y, fields = _ctr(1200)
    plain = _fit(X, y, fields)
    watched = _fit(X, y, fields, tol=0.0, n_iter_no_change=100)
    np.testing.assert_array_equal(plain.P_, watched.P_)
    reg = FieldAwareFactorizationMachineRegressor(fields=fields, solver="sgd",
                                                  eta0=50.0, learning_rate="constant",
                                                  normalize=False, max_iter=3,
                                                  random_state=0)
    with pytest.raises(FloatingPointError, match="diverged|non-finite"):
        reg.fit(X * 100, y * 1e6)
