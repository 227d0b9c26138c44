"""Field-aware factorization machines: the kernel against brute force, the passes
against a plain NumPy implementation of the same steps, the estimators (fields from an
array or a FieldEncoder, normalisation, save and load, partial_fit, early stopping,
threads) and scikit-learn's estimator checks."""
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.utils.estimator_checks import parametrize_with_checks

import polylite
from polylite import (FieldAwareFactorizationMachineClassifier,
                      FieldAwareFactorizationMachineRegressor, FieldEncoder, kernels)
from polylite.estimator_checks import expected_failed_checks
from polylite.polynomial.ffm import fields_of


def _brute_force(P, fields, indices, values):
    """The field-aware term and its gradient, pair by pair (gradient by definition)."""
    total = 0.0
    grad = np.zeros((len(indices),) + P.shape[1:])
    for a in range(len(indices)):
        for b in range(len(indices)):
            if a == b:
                continue
            ja, jb = indices[a], indices[b]
            fa, fb = fields[ja], fields[jb]
            if a < b:
                total += P[ja, fb] @ P[jb, fa] * values[a] * values[b]
            grad[a, fb] += P[jb, fa] * values[a] * values[b]
    return total, grad


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_kernel_and_gradient_against_brute_force(dtype):
    rng = np.random.RandomState(0)
    d, n_fields, k = 9, 4, 3
    fields = np.array([0, 0, 1, 1, 1, 2, 3, 3, 3])
    P = rng.randn(d, n_fields, k).astype(dtype)
    tol = 1e-12 if dtype == np.float64 else 1e-4
    for nnz in (0, 1, 2, 5, 9):
        indices = np.sort(rng.choice(d, nnz, replace=False))
        values = rng.randn(nnz).astype(dtype)
        value, grad = kernels.field_aware_gradient(P, fields, indices, values)
        ref_value, ref_grad = _brute_force(P.astype(np.float64), fields, indices,
                                           values.astype(np.float64))
        assert value == pytest.approx(ref_value, rel=tol, abs=tol)
        np.testing.assert_allclose(grad, ref_grad, rtol=tol, atol=tol)
        assert kernels.field_aware(P, fields, indices, values) == pytest.approx(value)


def test_gradient_against_finite_differences():
    rng = np.random.RandomState(1)
    d, n_fields, k = 6, 3, 2
    fields = np.array([0, 1, 1, 2, 2, 0])
    P = rng.randn(d, n_fields, k)
    indices, values = np.array([0, 2, 3, 5]), rng.randn(4)
    _, grad = kernels.field_aware_gradient(P, fields, indices, values)
    eps = 1e-6
    for a, j in enumerate(indices):
        for f in range(n_fields):
            for s in range(k):
                up, down = P.copy(), P.copy()
                up[j, f, s] += eps
                down[j, f, s] -= eps
                numeric = (kernels.field_aware(up, fields, indices, values)
                           - kernels.field_aware(down, fields, indices, values)) / (2 * eps)
                assert grad[a, f, s] == pytest.approx(numeric, abs=1e-7)


def test_predict_against_explicit_features():
    """The field-aware model is a degree-2 model on explicit pair features."""
    rng = np.random.RandomState(2)
    n, d, n_fields, k = 40, 7, 3, 2
    fields = np.array([0, 0, 1, 1, 2, 2, 2])
    X = sp.random(n, d, density=0.5, format="csr", random_state=rng)
    P, w = rng.randn(d, n_fields, k), rng.randn(d)
    out = kernels.predict(X, P, kernel="field-aware", fields=fields, intercept=0.3, w=w)
    Xd = X.toarray()
    expected = 0.3 + Xd @ w
    for j in range(d):
        for jj in range(j + 1, d):
            expected += P[j, fields[jj]] @ P[jj, fields[j]] * Xd[:, j] * Xd[:, jj]
    np.testing.assert_allclose(out, expected, rtol=1e-12)
    np.testing.assert_allclose(
        kernels.predict(X, P, kernel="field-aware", fields=fields, intercept=0.3, w=w,
                        n_jobs=2), out, rtol=0, atol=0)
    with pytest.raises(ValueError, match="needs fields"):
        kernels.predict(X, P, kernel="field-aware")
    with pytest.raises(ValueError, match="field 3"):
        kernels.predict(X, P, kernel="field-aware", fields=[0, 0, 1, 1, 2, 2, 3])


def _numpy_fit(X, y, sw, fields, P, epochs, *, classify, adagrad, eta0, alpha, beta,
               normalize):
    """The passes of the field-aware models, written plainly in NumPy: rows in order, one
    row per step; AdaGrad's sums start at 1; each row's step penalises the parameters
    the row reads (the weights of its nonzeros, and each nonzero's vectors of the fields
    of the row's other nonzeros), as libffm; SGD at a constant step size."""
    X = sp.csr_matrix(X, dtype=np.float64)
    if normalize:
        norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
        X = sp.csr_matrix(sp.diags(1 / np.where(norms > 0, norms, 1)) @ X)
    n, d = X.shape
    P = P.astype(np.float64).copy()
    b, w = 0.0, np.zeros(d)
    G_b, G_w, G_P = 1.0, np.ones(d), np.ones_like(P)
    sw = sw * n / sw.sum()

    def step(p, G, g):
        if adagrad:
            G += g * g
            p -= eta0 * g / (np.sqrt(G) + 1e-8)
        else:
            p -= eta0 * g

    for _ in range(epochs):
        for i in range(n):
            ind = X.indices[X.indptr[i]:X.indptr[i + 1]]
            val = X.data[X.indptr[i]:X.indptr[i + 1]]
            phi, gP = _brute_force(P, fields, ind, val)
            pred = b + w[ind] @ val + phi
            dl = -y[i] / (1 + np.exp(y[i] * pred)) if classify else pred - y[i]
            dl *= sw[i]
            if adagrad:
                G_b += dl * dl
                b -= eta0 * dl / (np.sqrt(G_b) + 1e-8)
            else:
                b -= eta0 * dl
            for a, j in enumerate(ind):
                g = np.array([dl * val[a] + alpha * w[j]])
                wj, Gj = w[j:j + 1], G_w[j:j + 1]
                step(wj, Gj, g)
                others = {fields[jj] for aa, jj in enumerate(ind) if aa != a}
                for f in sorted(others):
                    step(P[j, f], G_P[j, f], dl * gP[a, f] + beta * P[j, f])
    return b, w, P


@pytest.mark.parametrize("solver", ["adagrad", "sgd"])
@pytest.mark.parametrize("classify", [True, False])
@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize("one_per_field", [False, True])
def test_fit_against_numpy_reference(solver, classify, normalize, one_per_field):
    """Rows with two nonzeros in a field take the general steps, rows of one nonzero per
    field (click logs) the pass pair by pair: both against the plain reference."""
    rng = np.random.RandomState(3)
    n, d = 60, 8
    fields = np.array([0, 0, 1, 1, 2, 2, 3, 3])
    if one_per_field:
        cols = np.stack([rng.randint(0, 2, n) + 2 * f for f in range(4)], axis=1)
        X = sp.csr_matrix((rng.uniform(0.5, 1.5, 4 * n), cols.ravel(),
                           np.arange(0, 4 * n + 1, 4)), shape=(n, d))
        X.data[::5] = 0  # some rows with fewer fields
        X.eliminate_zeros()
    else:
        X = sp.random(n, d, density=0.5, format="csr", random_state=rng)
    X.data *= 3
    sw = rng.uniform(0.5, 2, n)
    labels = rng.randint(0, 2, n)
    y = 2.0 * labels - 1 if classify else rng.randn(n)
    cls = (FieldAwareFactorizationMachineClassifier if classify
           else FieldAwareFactorizationMachineRegressor)
    eta0 = 0.05 if solver == "adagrad" else 0.01
    est = cls(n_components=3, fields=fields, normalize=normalize, solver=solver,
              eta0=eta0, alpha=1e-3, beta=2e-3, max_iter=3, shuffle=False,
              learning_rate="constant", random_state=0)
    est.fit(X, labels if classify else y, sample_weight=sw)
    # The initial factors: the same draws as the fit's.
    P0 = np.random.RandomState(0).uniform(0, 1 / np.sqrt(3), size=(1, 1, d, 4 * 3))
    P0 = P0.reshape(d, 4, 3)
    b, w, P = _numpy_fit(X, y, sw, fields, P0, 3, classify=classify,
                         adagrad=solver == "adagrad", eta0=eta0, alpha=1e-3, beta=2e-3,
                         normalize=normalize)
    got_P = est.P_[0] if classify else est.P_
    got_w = est.w_[0] if classify else est.w_
    got_b = est.intercept_[0] if classify else est.intercept_
    np.testing.assert_allclose(got_P, P, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(got_w, w, rtol=1e-9, atol=1e-12)
    assert got_b == pytest.approx(b, rel=1e-9, abs=1e-12)


def _clicks(n=2000, seed=0):
    """Binary rows of three one-hot fields whose label depends on a field pair."""
    rng = np.random.RandomState(seed)
    a, b, c = rng.randint(0, 5, n), rng.randint(0, 4, n), rng.randint(0, 3, n)
    logit = 2.0 * ((a % 2) == (b % 2)) - 1.0 + 0.3 * (c == 0)
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-2 * logit))).astype(int)
    frame = pd.DataFrame({"a": a, "b": b, "c": c})
    return frame, y


def test_fields_from_field_encoder():
    frame, y = _clicks()
    encoder = FieldEncoder(user="a", item="b", context_features={"c": "categorical"}).fit(frame)
    X = encoder.transform(frame)
    fields, n_fields = fields_of(encoder.fields_, X.shape[1])
    assert n_fields == 3
    np.testing.assert_array_equal(fields, [0] * 5 + [1] * 4 + [2] * 3)
    np.testing.assert_array_equal(fields_of(encoder, X.shape[1])[0], fields)
    clf = FieldAwareFactorizationMachineClassifier(fields=encoder.fields_, max_iter=5,
                                                   random_state=0).fit(X, y)
    assert clf.P_.shape == (1, 12, 3, 4)
    np.testing.assert_array_equal(clf.fields_, fields)
    same = FieldAwareFactorizationMachineClassifier(fields=fields, max_iter=5,
                                                    random_state=0).fit(X, y)
    np.testing.assert_array_equal(clf.predict_proba(X), same.predict_proba(X))
    assert clf.score(X, y) > 0.7
    with pytest.raises(ValueError, match="unfitted FieldEncoder"):
        FieldAwareFactorizationMachineClassifier(
            fields=FieldEncoder(user="a", item="b")).fit(X, y)
    with pytest.raises(ValueError, match="12 columns"):
        FieldAwareFactorizationMachineClassifier(fields=[0, 1]).fit(X, y)


def test_learns_field_pairs_better_than_linear():
    frame, y = _clicks(4000)
    encoder = FieldEncoder(user="a", item="b", context_features={"c": "categorical"}).fit(frame)
    X = encoder.transform(frame)
    Xtr, Xte, ytr, yte = X[:3000], X[3000:], y[:3000], y[3000:]
    ffm = FieldAwareFactorizationMachineClassifier(fields=encoder.fields_, max_iter=10,
                                                   random_state=0).fit(Xtr, ytr)
    linear = FieldAwareFactorizationMachineClassifier(
        fields=encoder.fields_, max_iter=10, random_state=0, init_scale=0.0,
        eta0=0.2).fit(Xtr, ytr)  # zero factors stay zero: a linear model
    assert np.all(linear.P_ == 0)
    from sklearn.metrics import log_loss
    assert (log_loss(yte, ffm.predict_proba(Xte)[:, 1])
            < log_loss(yte, linear.predict_proba(Xte)[:, 1]) - 0.02)


def test_save_load_round_trip(tmp_path):
    frame, y = _clicks(500)
    encoder = FieldEncoder(user="a", item="b", context_features={"c": "categorical"}).fit(frame)
    X = encoder.transform(frame)
    for est in (FieldAwareFactorizationMachineClassifier(fields=encoder, max_iter=3,
                                                         random_state=0),
                FieldAwareFactorizationMachineRegressor(fields=encoder.fields_,
                                                        normalize=False, max_iter=3,
                                                        random_state=0)):
        est.fit(X, y)
        path = tmp_path / "ffm.npz"
        polylite.save(est, path)
        back = polylite.load(path)
        assert type(back) is type(est)
        np.testing.assert_array_equal(back.P_, est.P_)
        np.testing.assert_array_equal(back.fields_, est.fields_)
        assert back.n_fields_ == est.n_fields_
        np.testing.assert_array_equal(back.predict(X), est.predict(X))
        np.testing.assert_array_equal(back.get_params()["fields"], est.fields_)
        refit = clone(back).fit(X, y)  # the restored parameter refits the same model
        np.testing.assert_array_equal(refit.fields_, est.fields_)


def test_partial_fit_is_one_epoch_of_fit():
    frame, y = _clicks(600)
    encoder = FieldEncoder(user="a", item="b", context_features={"c": "categorical"}).fit(frame)
    X = encoder.transform(frame)
    params = dict(fields=encoder.fields_, shuffle=False, random_state=0)
    one = FieldAwareFactorizationMachineClassifier(max_iter=2, **params).fit(X, y)
    streamed = FieldAwareFactorizationMachineClassifier(**params)
    for _ in range(2):
        streamed.partial_fit(X, y, classes=[0, 1])
    np.testing.assert_allclose(streamed.P_, one.P_, rtol=1e-12)
    np.testing.assert_allclose(streamed.w_, one.w_, rtol=1e-12)


def test_early_stopping_on_validation_logloss():
    frame, y = _clicks(3000)
    encoder = FieldEncoder(user="a", item="b", context_features={"c": "categorical"}).fit(frame)
    X = encoder.transform(frame)
    clf = FieldAwareFactorizationMachineClassifier(
        fields=encoder.fields_, max_iter=200, eta0=1.0, n_iter_no_change=1,
        random_state=0).fit(X[:2000], y[:2000], X_val=X[2000:], y_val=y[2000:])
    assert clf.n_iter_[0] < 200
    held = FieldAwareFactorizationMachineClassifier(
        fields=encoder.fields_, max_iter=200, eta0=1.0, early_stopping=True,
        n_iter_no_change=1, random_state=0).fit(X, y)
    assert held.n_iter_[0] < 200


def test_mini_batches_on_two_threads_agree_with_one():
    frame, y = _clicks(3000)
    encoder = FieldEncoder(user="a", item="b", context_features={"c": "categorical"}).fit(frame)
    X = encoder.transform(frame)
    params = dict(fields=encoder.fields_, batch_size=600, max_iter=3, random_state=0)
    one = FieldAwareFactorizationMachineClassifier(n_jobs=1, **params).fit(X, y)
    two = FieldAwareFactorizationMachineClassifier(n_jobs=2, **params).fit(X, y)
    np.testing.assert_allclose(two.P_, one.P_, rtol=1e-9, atol=1e-12)


def test_normalize_scales_rows_to_unit_norm():
    frame, y = _clicks(400)
    X = FieldEncoder(user="a", item="b", context_features={"c": "categorical"}).fit_transform(frame)
    fields = [0] * 5 + [1] * 4 + [2] * 3
    clf = FieldAwareFactorizationMachineClassifier(fields=fields, max_iter=2,
                                                   random_state=0).fit(X, y)
    scaled = FieldAwareFactorizationMachineClassifier(fields=fields, max_iter=2,
                                                      random_state=0).fit(5 * X, y)
    np.testing.assert_allclose(clf.P_, scaled.P_, rtol=1e-10)
    np.testing.assert_allclose(clf.decision_function(X),
                               scaled.decision_function(7 * X), rtol=1e-10)


def test_bad_parameters():
    X, y = np.eye(4), [0, 1, 0, 1]
    with pytest.raises(ValueError, match="fields must"):
        FieldAwareFactorizationMachineClassifier(fields="abc").fit(X, y)
    with pytest.raises(ValueError, match="fields must be >= 0"):
        FieldAwareFactorizationMachineClassifier(fields=[0, -1, 0, 1]).fit(X, y)
    with pytest.raises(ValueError, match="solver"):
        FieldAwareFactorizationMachineClassifier(solver="cd").fit(X, y)


ESTIMATORS = [
    FieldAwareFactorizationMachineRegressor(max_iter=20),
    FieldAwareFactorizationMachineClassifier(max_iter=20),
    FieldAwareFactorizationMachineClassifier(solver="sgd", eta0=0.05, max_iter=20),
]


@parametrize_with_checks(ESTIMATORS, expected_failed_checks=expected_failed_checks)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=repr)
def test_clone_round_trip(estimator):
    twin = clone(estimator)
    assert twin.get_params() == estimator.get_params()


def test_mini_batch_against_numpy_reference():
    """batch_size rows per step: the mean of the rows' gradients, each with its row's
    penalty, in one AdaGrad step."""
    rng = np.random.RandomState(5)
    n, d, batch = 30, 6, 10
    fields = np.array([0, 0, 1, 1, 2, 2])
    X = sp.random(n, d, density=0.6, format="csr", random_state=rng)
    y = rng.randn(n)
    alpha, beta, eta0 = 1e-2, 3e-2, 0.1
    est = FieldAwareFactorizationMachineRegressor(
        n_components=2, fields=fields, normalize=False, batch_size=batch, max_iter=2,
        shuffle=False, alpha=alpha, beta=beta, eta0=eta0, random_state=0).fit(X, y)
    P = np.random.RandomState(0).uniform(0, 1 / np.sqrt(2), size=(d, 3 * 2)).reshape(d, 3, 2)
    b, w = 0.0, np.zeros(d)
    G_b, G_w, G_P = 1.0, np.ones(d), np.ones_like(P)
    for _ in range(2):
        for start in range(0, n, batch):
            g_b, g_w, g_P = 0.0, np.zeros(d), np.zeros_like(P)
            for i in range(start, start + batch):
                ind = X.indices[X.indptr[i]:X.indptr[i + 1]]
                val = X.data[X.indptr[i]:X.indptr[i + 1]]
                phi, gP = _brute_force(P, fields, ind, val)
                dl = b + w[ind] @ val + phi - y[i]
                g_b += dl
                for a, j in enumerate(ind):
                    g_w[j] += dl * val[a] + alpha * w[j]
                    g_P[j] += dl * gP[a]
                    for f in {fields[jj] for aa, jj in enumerate(ind) if aa != a}:
                        g_P[j, f] += beta * P[j, f]
            g_b, g_w, g_P = g_b / batch, g_w / batch, g_P / batch
            G_b += g_b ** 2
            b -= eta0 * g_b / (np.sqrt(G_b) + 1e-8)
            G_w += g_w ** 2
            w -= eta0 * g_w / (np.sqrt(G_w) + 1e-8)
            G_P += g_P ** 2
            P -= eta0 * g_P / (np.sqrt(G_P) + 1e-8)
    np.testing.assert_allclose(est.P_, P, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(est.w_, w, rtol=1e-9, atol=1e-12)
    assert est.intercept_ == pytest.approx(b, rel=1e-9)


def test_streaming_a_libffm_file_in_chunks_is_one_pass(tmp_path):
    """partial_fit over the chunks of a libffm file, in order, takes the steps of one
    epoch of fit over the whole file (AdaGrad's statistics carry over)."""
    from polylite.datasets import dump_libffm, iter_libffm_chunks, make_ctr, scan_libffm
    X, y, fields = make_ctr(3000, max_categories=300, random_state=0)
    path = tmp_path / "train.ffm"
    dump_libffm(X, y, fields, path)
    scan = scan_libffm(path)
    assert scan.n_features == X.shape[1]
    params = dict(fields=scan.fields, shuffle=False, random_state=0)
    whole = FieldAwareFactorizationMachineClassifier(max_iter=1, **params).fit(X, y)
    streamed = FieldAwareFactorizationMachineClassifier(**params)
    n_chunks = 0
    for X_chunk, y_chunk, _ in iter_libffm_chunks(path, scan.n_features,
                                                  chunk_bytes=50_000):
        streamed.partial_fit(X_chunk, y_chunk, classes=[0, 1])
        n_chunks += 1
    assert n_chunks > 3
    np.testing.assert_allclose(streamed.P_, whole.P_, rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(streamed.w_, whole.w_, rtol=1e-10, atol=1e-13)
