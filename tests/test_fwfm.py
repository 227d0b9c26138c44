"""Field-weighted factorization machines: the kernel against brute force and finite
differences, the engine's gradient against finite differences of its objective, the
passes against a plain NumPy implementation of the same steps (one row and mini-batches
per step; FTRL), the weights the L1 penalty keeps and the model's accuracy.  The
contract of the field models (fields, normalisation, save and load, partial_fit, early
stopping, threads, scikit-learn's checks) is test_field_models.py's."""
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.metrics import log_loss

from polylite import (FieldAwareFactorizationMachineClassifier,
                      FieldAwareFactorizationMachineRegressor,
                      FieldWeightedFactorizationMachineClassifier,
                      FieldWeightedFactorizationMachineRegressor, kernels)

from _clicks import encoded as _encoded
from _reference import Ftrl


def _brute_force(P, R, fields, indices, values):
    """The field-weighted term and its gradients, pair by pair (by definition)."""
    total = 0.0
    grad = np.zeros((len(indices), P.shape[1]))
    grad_R = np.zeros_like(R, dtype=np.float64)
    for a in range(len(indices)):
        for b in range(len(indices)):
            if a == b:
                continue
            ja, jb = indices[a], indices[b]
            fa, fb = fields[ja], fields[jb]
            xab = values[a] * values[b]
            grad[a] += R[fa, fb] * P[jb] * xab
            if a < b:
                total += R[fa, fb] * (P[ja] @ P[jb]) * xab
                grad_R[min(fa, fb), max(fa, fb)] += (P[ja] @ P[jb]) * xab
    grad_R = grad_R + np.triu(grad_R, 1).T  # one weight per pair, shown at both places
    return total, grad, grad_R


def _symmetric(rng, n_fields):
    A = rng.randn(n_fields, n_fields)
    return (A + A.T) / 2


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_kernel_and_gradients_against_brute_force(dtype):
    rng = np.random.RandomState(0)
    d, n_fields, k = 9, 4, 3
    fields = np.array([0, 0, 1, 1, 1, 2, 3, 3, 3])
    P = rng.randn(d, k).astype(dtype)
    R = _symmetric(rng, n_fields).astype(dtype)
    tol = 1e-12 if dtype == np.float64 else 1e-4
    for nnz in (0, 1, 2, 5, 9):
        indices = np.sort(rng.choice(d, nnz, replace=False))
        values = rng.randn(nnz).astype(dtype)
        value, grad, grad_R = kernels.field_weighted_gradient(P, R, fields, indices, values)
        ref = _brute_force(P.astype(np.float64), R.astype(np.float64), fields, indices,
                           values.astype(np.float64))
        assert value == pytest.approx(ref[0], rel=tol, abs=tol)
        np.testing.assert_allclose(grad, ref[1], rtol=tol, atol=tol)
        np.testing.assert_allclose(grad_R, ref[2], rtol=tol, atol=tol)
        assert kernels.field_weighted(P, R, fields, indices, values) == pytest.approx(value)


def test_gradients_against_finite_differences():
    rng = np.random.RandomState(1)
    d, n_fields, k = 6, 3, 2
    fields = np.array([0, 1, 1, 2, 2, 0])
    P, R = rng.randn(d, k), _symmetric(rng, n_fields)
    indices, values = np.array([0, 2, 3, 4, 5]), rng.randn(5)
    _, grad, grad_R = kernels.field_weighted_gradient(P, R, fields, indices, values)
    eps = 1e-6

    def at(P_, R_):
        return kernels.field_weighted(P_, R_, fields, indices, values)

    for a, j in enumerate(indices):
        for s in range(k):
            up, down = P.copy(), P.copy()
            up[j, s] += eps
            down[j, s] -= eps
            assert grad[a, s] == pytest.approx((at(up, R) - at(down, R)) / (2 * eps),
                                               abs=1e-7)
    for f in range(n_fields):
        for g in range(f, n_fields):  # one weight per pair: move both places
            up, down = R.copy(), R.copy()
            up[f, g] += eps
            down[f, g] -= eps
            if f != g:
                up[g, f], down[g, f] = up[f, g], down[f, g]
            numeric = (at(P, up) - at(P, down)) / (2 * eps)
            assert grad_R[f, g] == pytest.approx(numeric, abs=1e-7)
            assert grad_R[g, f] == grad_R[f, g]


def test_pack_and_unpack_field_weights():
    R = _symmetric(np.random.RandomState(2), 5)
    r = kernels.pack_field_weights(R)
    assert r.shape == (15,)
    np.testing.assert_array_equal(kernels.unpack_field_weights(r, 5), R)
    with pytest.raises(ValueError, match="have 15 entries"):
        kernels.unpack_field_weights(r[:-1], 5)


def test_predict_against_explicit_features():
    """The field-weighted model is a degree-2 model on explicit pair features."""
    rng = np.random.RandomState(2)
    n, d, n_fields, k = 40, 7, 3, 2
    fields = np.array([0, 0, 1, 1, 2, 2, 2])
    X = sp.random(n, d, density=0.5, format="csr", random_state=rng)
    P, w, R = rng.randn(d, k), rng.randn(d), _symmetric(rng, n_fields)
    out = kernels.predict(X, P, kernel="field-weighted", fields=fields, lam=R,
                          intercept=0.3, w=w)
    Xd = X.toarray()
    expected = 0.3 + Xd @ w
    for j in range(d):
        for jj in range(j + 1, d):
            expected += R[fields[j], fields[jj]] * (P[j] @ P[jj]) * Xd[:, j] * Xd[:, jj]
    np.testing.assert_allclose(out, expected, rtol=1e-12)
    np.testing.assert_array_equal(
        kernels.predict(X, P, kernel="field-weighted", fields=fields, lam=R, intercept=0.3,
                        w=w, n_jobs=2), out)
    np.testing.assert_array_equal(  # dense rows: the same
        kernels.predict(Xd, P, kernel="field-weighted", fields=fields, lam=R,
                        intercept=0.3, w=w), out)
    with pytest.raises(ValueError, match="needs fields"):
        kernels.predict(X, P, kernel="field-weighted", lam=R)
    with pytest.raises(ValueError, match="symmetric"):
        kernels.predict(X, P, kernel="field-weighted", fields=fields,
                        lam=R + np.triu(np.ones_like(R), 1))
    with pytest.raises(ValueError, match="field 3"):
        kernels.predict(X, P, kernel="field-weighted", fields=[0, 0, 1, 1, 2, 2, 3], lam=R)


def test_engine_gradient_against_finite_differences():
    """The engine's data term and its gradient in every parameter (the mini-batches'
    sums, without a penalty) for the field-weighted kernel, on rows with several
    nonzeros in a field."""
    from polylite._engine import _sgd
    from polylite._engine.codes import KERNELS
    from polylite._engine.problem import Problem
    from polylite.polynomial._base import _OutputParams
    rng = np.random.RandomState(4)
    n, d, k, n_fields = 12, 7, 3, 3
    fields = np.array([0, 0, 1, 1, 2, 2, 2], np.intc)
    X = sp.random(n, d, density=0.6, format="csr", random_state=rng)
    y, sw = rng.randn(n), np.full(n, 1.0 / n)
    params = _OutputParams(intercept=np.array([0.2]), w=rng.randn(d),
                           P=rng.randn(1, d, k), gamma=np.zeros((0, k)),
                           lam=rng.randn(n_fields * (n_fields + 1) // 2))
    problem = Problem(y, sw, KERNELS["field-weighted"], np.array([2], np.intc), 0, 0.0, 0.0,
                      True, True, True, fields, n_fields)

    def value(p):
        grads = {name: np.zeros(np.shape(getattr(p, name))) for name in ("intercept", "w", "P", "gamma", "lam")}
        return _sgd.objective_gradient(X, problem, p, grads, n_threads=2), grads

    _, grads = value(params)
    eps = 1e-6
    for name in ("intercept", "w", "P", "lam"):
        flat = getattr(params, name).reshape(-1)
        for i in range(flat.size):
            old = flat[i]
            flat[i] = old + eps
            up = value(params)[0]
            flat[i] = old - eps
            down = value(params)[0]
            flat[i] = old
            assert grads[name].reshape(-1)[i] == pytest.approx((up - down) / (2 * eps),
                                                               abs=1e-6), (name, i)


def _prepare(X, normalize):
    X = sp.csr_matrix(X, dtype=np.float64)
    if normalize:
        norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
        X = sp.csr_matrix(sp.diags(1 / np.where(norms > 0, norms, 1)) @ X)
    return X


def _pairs_read(fields, ind):
    """The pairs of fields (f <= g) a row reads, once each."""
    fs = [fields[j] for j in ind]
    return {(min(fs[a], fs[b]), max(fs[a], fs[b]))
            for a in range(len(fs)) for b in range(a + 1, len(fs))}


def _numpy_fit(X, y, sw, fields, n_fields, P, epochs, *, classify, adagrad, eta0, alpha,
               beta, normalize):
    """The passes of the field-weighted models, written plainly in NumPy: rows in order,
    one row per step; AdaGrad's sums start at 1; each row's step penalises the
    parameters the row reads (the weights and vectors of its nonzeros, the weights of
    its pairs of fields); SGD at a constant step size."""
    X = _prepare(X, normalize)
    n, d = X.shape
    P = P.astype(np.float64).copy()
    R = np.ones((n_fields, n_fields))
    b, w = 0.0, np.zeros(d)
    G_b, G_w, G_P, G_R = 1.0, np.ones(d), np.ones_like(P), np.ones_like(R)
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
            phi, gP, gR = _brute_force(P, R, fields, ind, val)
            pred = b + w[ind] @ val + phi
            dl = -y[i] / (1 + np.exp(y[i] * pred)) if classify else pred - y[i]
            dl *= sw[i]
            if adagrad:
                G_b += dl * dl
                b -= eta0 * dl / (np.sqrt(G_b) + 1e-8)
            else:
                b -= eta0 * dl
            for f, g in _pairs_read(fields, ind):
                r, G = R[f:f + 1, g], G_R[f:f + 1, g]
                step(r, G, np.array([dl * gR[f, g] + beta * R[f, g]]))
                R[g, f], G_R[g, f] = R[f, g], G_R[f, g]
            for a, j in enumerate(ind):
                step(w[j:j + 1], G_w[j:j + 1], np.array([dl * val[a] + alpha * w[j]]))
                step(P[j], G_P[j], dl * gP[a] + beta * P[j])
    return b, w, P, R


@pytest.mark.parametrize("solver", ["adagrad", "sgd"])
@pytest.mark.parametrize("classify", [True, False])
@pytest.mark.parametrize("normalize", [True, False])
def test_fit_against_numpy_reference(solver, classify, normalize):
    rng = np.random.RandomState(3)
    n, d = 60, 8
    fields = np.array([0, 0, 1, 1, 2, 2, 3, 3])
    X = sp.random(n, d, density=0.5, format="csr", random_state=rng)
    X.data *= 3
    sw = rng.uniform(0.5, 2, n)
    labels = rng.randint(0, 2, n)
    y = 2.0 * labels - 1 if classify else rng.randn(n)
    cls = (FieldWeightedFactorizationMachineClassifier if classify
           else FieldWeightedFactorizationMachineRegressor)
    eta0 = 0.05 if solver == "adagrad" else 0.01
    est = cls(n_components=3, fields=fields, normalize=normalize, solver=solver,
              eta0=eta0, alpha=1e-3, beta=2e-3, max_iter=3, shuffle=False,
              learning_rate="constant", random_state=0)
    est.fit(X, labels if classify else y, sample_weight=sw)
    P0 = np.random.RandomState(0).uniform(0, 1 / np.sqrt(3), size=(d, 3))
    b, w, P, R = _numpy_fit(X, y, sw, fields, 4, P0, 3, classify=classify,
                            adagrad=solver == "adagrad", eta0=eta0, alpha=1e-3, beta=2e-3,
                            normalize=normalize)
    got = [est.P_[0], est.w_[0], est.intercept_[0], est.field_weights_[0]] if classify \
        else [est.P_, est.w_, est.intercept_, est.field_weights_]
    np.testing.assert_allclose(got[0], P, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(got[1], w, rtol=1e-9, atol=1e-12)
    assert got[2] == pytest.approx(b, rel=1e-9, abs=1e-12)
    np.testing.assert_allclose(got[3], R, rtol=1e-9, atol=1e-12)
    assert not np.allclose(R, 1)  # the weights moved


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_mini_batch_against_numpy_reference(n_jobs):
    """batch_size rows per step: the mean of the rows' gradients, each with its row's
    penalty, in one AdaGrad step (the threads' sums added in order)."""
    rng = np.random.RandomState(5)
    n, d, batch, n_fields = 30, 6, 10, 3
    fields = np.array([0, 0, 1, 1, 2, 2])
    X = sp.random(n, d, density=0.6, format="csr", random_state=rng)
    y = rng.randn(n)
    alpha, beta, eta0 = 1e-2, 3e-2, 0.1
    est = FieldWeightedFactorizationMachineRegressor(
        n_components=2, fields=fields, normalize=False, batch_size=batch, max_iter=2,
        shuffle=False, alpha=alpha, beta=beta, eta0=eta0, random_state=0,
        n_jobs=n_jobs).fit(X, y)
    P = np.random.RandomState(0).uniform(0, 1 / np.sqrt(2), size=(d, 2))
    R = np.ones((n_fields, n_fields))
    b, w = 0.0, np.zeros(d)
    G_b, G_w, G_P, G_R = 1.0, np.ones(d), np.ones_like(P), np.ones_like(R)
    for _ in range(2):
        for start in range(0, n, batch):
            g_b, g_w, g_P, g_R = 0.0, np.zeros(d), np.zeros_like(P), np.zeros_like(R)
            for i in range(start, start + batch):
                ind = X.indices[X.indptr[i]:X.indptr[i + 1]]
                val = X.data[X.indptr[i]:X.indptr[i + 1]]
                phi, gP, gR = _brute_force(P, R, fields, ind, val)
                dl = b + w[ind] @ val + phi - y[i]
                g_b += dl
                for a, j in enumerate(ind):
                    g_w[j] += dl * val[a] + alpha * w[j]
                    g_P[j] += dl * gP[a] + beta * P[j]
                for f, g in _pairs_read(fields, ind):
                    g_R[f, g] += dl * gR[f, g] + beta * R[f, g]
            g_b, g_w, g_P, g_R = g_b / batch, g_w / batch, g_P / batch, g_R / batch
            g_R = np.triu(g_R) + np.triu(g_R, 1).T
            G_b += g_b ** 2
            b -= eta0 * g_b / (np.sqrt(G_b) + 1e-8)
            G_w += g_w ** 2
            w -= eta0 * g_w / (np.sqrt(G_w) + 1e-8)
            G_P += g_P ** 2
            P -= eta0 * g_P / (np.sqrt(G_P) + 1e-8)
            G_R += g_R ** 2
            R -= eta0 * g_R / (np.sqrt(G_R) + 1e-8)
    tol = dict(rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(est.P_, P, **tol)
    np.testing.assert_allclose(est.w_, w, **tol)
    np.testing.assert_allclose(est.field_weights_, R, **tol)
    assert est.intercept_ == pytest.approx(b, rel=1e-9)


def _numpy_ftrl(X, y, fields, n_fields, P, epochs, *, classify, alpha, l1, l2):
    """FTRL-proximal on the field-weighted model, written plainly in NumPy: rows in
    order, one row per step on the parameters the row reads (the intercept unpenalised;
    the weights and vectors of its nonzeros; the weights of its pairs of fields, each
    pair once), every state starting at the initial model (Ftrl's ``start``)."""
    n, d = X.shape
    b = Ftrl(np.zeros(1), alpha, 1.0, 0.0, 0.0, start=True)
    w = Ftrl(np.zeros(d), alpha, 1.0, l1, l2, start=True)
    V = Ftrl(P.astype(np.float64).copy(), alpha, 1.0, l1, l2, start=True)
    R = Ftrl(np.ones((n_fields, n_fields)), alpha, 1.0, l1, l2, start=True)
    for _ in range(epochs):
        for i in range(n):
            ind = X.indices[X.indptr[i]:X.indptr[i + 1]]
            val = X.data[X.indptr[i]:X.indptr[i + 1]]
            phi, gP, gR = _brute_force(V.w, R.w, fields, ind, val)
            pred = b.w[0] + w.w[ind] @ val + phi
            dl = -y[i] / (1 + np.exp(y[i] * pred)) if classify else pred - y[i]
            b.step(np.array([0]), np.array([dl]))
            w.step(ind, dl * val)
            for a, j in enumerate(ind):
                V.step(j, dl * gP[a])
            for f, g in _pairs_read(fields, ind):
                R.step((f, g), dl * gR[f, g])
                R.w[g, f] = R.w[f, g]
    return b.w[0], w.w, V.w, R.w


@pytest.mark.parametrize("classify", [True, False])
@pytest.mark.parametrize("l1", [0.0, 3.0])
def test_ftrl_against_numpy_reference(classify, l1):
    rng = np.random.RandomState(4)
    n, d, k = 50, 8, 3
    fields = np.array([0, 0, 1, 1, 2, 2, 3, 3])
    X = sp.random(n, d, density=0.5, format="csr", random_state=rng)
    X.data *= 2
    labels = rng.randint(0, 2, n)
    y = 2.0 * labels - 1 if classify else rng.randn(n)
    cls = (FieldWeightedFactorizationMachineClassifier if classify
           else FieldWeightedFactorizationMachineRegressor)
    est = cls(n_components=k, fields=fields, normalize=False, solver="ftrl", eta0=0.3,
              l1=l1, l2=0.1, max_iter=3, shuffle=False, random_state=0)
    est.fit(X, labels if classify else y)
    P0 = np.random.RandomState(0).uniform(0, 1 / np.sqrt(k), size=(d, k))
    b, w, P, R = _numpy_ftrl(X, y, fields, 4, P0, 3, classify=classify, alpha=0.3,
                             l1=l1, l2=0.1)
    got = [est.P_[0], est.w_[0], est.intercept_[0], est.field_weights_[0]] if classify \
        else [est.P_, est.w_, est.intercept_, est.field_weights_]
    tol = dict(rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(got[0], P, **tol)
    np.testing.assert_allclose(got[1], w, **tol)
    assert got[2] == pytest.approx(b, rel=1e-9, abs=1e-12)
    np.testing.assert_allclose(got[3], R, **tol)
    assert not np.allclose(R, 1)  # the weights moved
    pairs = np.count_nonzero(np.triu(R))
    assert est.n_nonzero_field_pairs_ == pairs
    assert est.n_nonzero_weights_ == np.count_nonzero(w) + np.count_nonzero(P) + pairs


def test_ftrl_starts_at_the_initial_model():
    """FTRL's state starts at the initial model: with a step size so small that the
    steps move nothing visibly, the fit keeps the weights of the pairs of fields near 1
    and the factors near their start (from z = 0 the first step would set them near
    0)."""
    encoder, X, y = _encoded(300)
    params = dict(fields=encoder.fields_, max_iter=1, random_state=0)
    start = FieldWeightedFactorizationMachineClassifier(solver="adagrad", eta0=1e-12,
                                                        **params).fit(X, y)
    ftrl = FieldWeightedFactorizationMachineClassifier(solver="ftrl", eta0=1e-6,
                                                       **params).fit(X, y)
    np.testing.assert_allclose(ftrl.field_weights_, 1, rtol=1e-4)
    np.testing.assert_allclose(ftrl.P_, start.P_, rtol=1e-4, atol=1e-8)


def test_ftrl_l1_drops_weights_and_pairs_of_fields():
    encoder, X, y = _encoded(2000)
    kept, pairs = [], []
    for l1 in (0.0, 1.0, 3.0, 8.0):
        clf = FieldWeightedFactorizationMachineClassifier(
            fields=encoder.fields_, solver="ftrl", l1=l1, max_iter=3,
            random_state=0).fit(X, y)
        kept.append(clf.n_nonzero_weights_)
        pairs.append(clf.n_nonzero_field_pairs_)
        R = clf.field_weights_[0]
        assert clf.n_nonzero_field_pairs_ == np.count_nonzero(np.triu(R))
    assert kept == sorted(kept, reverse=True) and kept[-1] < kept[0]
    # Each row has one nonzero per field: only the 6 pairs of two fields are read, and
    # a large l1 drops them all (the 4 pairs of a field with itself keep their 1).
    assert pairs == sorted(pairs, reverse=True) and pairs[0] == 10 and pairs[-1] == 4


def test_accuracy_against_the_field_aware_model_and_the_weights_learned():
    encoder, X, y = _encoded(6000)
    Xtr, Xte, ytr, yte = X[:4000], X[4000:], y[:4000], y[4000:]
    clf = FieldWeightedFactorizationMachineClassifier(fields=encoder.fields_, max_iter=10,
                                                      random_state=0).fit(Xtr, ytr)
    assert clf.P_.shape == (1, 22, 4) and clf.field_weights_.shape == (1, 4, 4)
    np.testing.assert_array_equal(clf.field_weights_[0], clf.field_weights_[0].T)
    assert clf.n_parameters_ == 1 + 22 + 22 * 4 + 10
    ffm = FieldAwareFactorizationMachineClassifier(fields=encoder.fields_, max_iter=10,
                                                   random_state=0).fit(Xtr, ytr)
    loss = log_loss(yte, clf.predict_proba(Xte)[:, 1])
    assert loss < log_loss(yte, ffm.predict_proba(Xte)[:, 1]) + 0.02
    # The informative pair of fields weighs more than the pairs of noise fields.
    R = np.abs(clf.field_weights_[0])
    assert R[0, 1] > max(R[2, 3], R[0, 2], R[1, 3])
