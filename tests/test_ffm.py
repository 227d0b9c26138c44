"""Field-aware factorization machines: the kernel against brute force, the passes
against a plain NumPy implementation of the same steps (one row and mini-batches per
step).  The contract of the field models (fields, normalisation, save and load,
partial_fit, early stopping, threads, scikit-learn's checks) is test_field_models.py's."""
import numpy as np
import pytest
import scipy.sparse as sp

from polylite import (FieldAwareFactorizationMachineClassifier,
                      FieldAwareFactorizationMachineRegressor, kernels)


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
