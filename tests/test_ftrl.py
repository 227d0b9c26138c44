"""FTRL-proximal (solver="ftrl") against a plain NumPy implementation of McMahan et
al.'s per-coordinate update, for factorization machines and field-aware ones."""
import numpy as np
import pytest
import scipy.sparse as sp

from polylite import (FactorizationMachineClassifier, FactorizationMachineRegressor,
                      FieldAwareFactorizationMachineClassifier)

from _reference import Ftrl as _Ftrl


def _fm_reference(X, y, P0, epochs, alpha, l1, l2, classify):
    """FTRL on a degree-2 FM: each row steps on the intercept (unpenalised), the
    weights and the factor rows of its nonzeros."""
    n, d = X.shape
    b = _Ftrl(np.zeros(1), alpha, 1.0, 0.0, 0.0)
    w = _Ftrl(np.zeros(d), alpha, 1.0, l1, l2)
    P = _Ftrl(P0.copy(), alpha, 1.0, l1, l2)
    for _ in range(epochs):
        for i in range(n):
            ind = X.indices[X.indptr[i]:X.indptr[i + 1]]
            val = X.data[X.indptr[i]:X.indptr[i + 1]]
            q = P.w[ind] * val[:, None]
            s = q.sum(axis=0)
            pred = b.w[0] + w.w[ind] @ val + 0.5 * (s @ s - (q * q).sum())
            dl = -y[i] / (1 + np.exp(y[i] * pred)) if classify else pred - y[i]
            grad_P = val[:, None] * (s[None, :] - q)
            b.step(np.array([0]), np.array([dl]))
            w.step(ind, dl * val)
            P.step(ind, dl * grad_P)
    return b.w[0], w.w, P.w


@pytest.mark.parametrize("classify", [True, False])
@pytest.mark.parametrize("l1", [0.0, 0.5])
def test_fm_ftrl_against_numpy_reference(classify, l1):
    rng = np.random.RandomState(0)
    n, d, k = 80, 10, 3
    X = sp.random(n, d, density=0.4, format="csr", random_state=rng)
    labels = rng.randint(0, 2, n)
    y = 2.0 * labels - 1 if classify else rng.randn(n)
    cls = FactorizationMachineClassifier if classify else FactorizationMachineRegressor
    est = cls(n_components=k, solver="ftrl", eta0=0.3, l1=l1, l2=0.1, max_iter=3,
              shuffle=False, random_state=0, tol=0)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X, labels if classify else y)
    P0 = np.random.RandomState(0).normal(0.0, 0.1, size=(1, d, k))[0]
    b, w, P = _fm_reference(X, y, P0, 3, 0.3, l1, 0.1, classify)
    got_P = (est.P_[0, 0] if classify else est.P_[0])
    np.testing.assert_allclose(got_P, P, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(est.w_[0] if classify else est.w_, w, rtol=1e-9,
                               atol=1e-12)
    assert est.n_nonzero_weights_ == np.count_nonzero(w) + np.count_nonzero(P)
    if l1 > 0:
        assert est.n_nonzero_weights_ < d + d * k  # the L1 penalty zeroed weights


def _brute(P, fields, ind, val):
    grad = np.zeros((len(ind),) + P.shape[1:])
    total = 0.0
    for a in range(len(ind)):
        for c in range(len(ind)):
            if a != c:
                fa, fc = fields[ind[a]], fields[ind[c]]
                if a < c:
                    total += P[ind[a], fc] @ P[ind[c], fa] * val[a] * val[c]
                grad[a, fc] += P[ind[c], fa] * val[a] * val[c]
    return total, grad


def test_ffm_ftrl_against_numpy_reference():
    rng = np.random.RandomState(1)
    n, d, k = 50, 8, 2
    fields = np.array([0, 0, 1, 1, 2, 2, 3, 3])
    X = sp.random(n, d, density=0.5, format="csr", random_state=rng)
    labels = rng.randint(0, 2, n)
    y = 2.0 * labels - 1
    est = FieldAwareFactorizationMachineClassifier(
        n_components=k, fields=fields, solver="ftrl", eta0=0.2, l1=0.3, l2=0.05,
        max_iter=2, shuffle=False, normalize=False, random_state=0).fit(X, labels)
    P0 = np.random.RandomState(0).uniform(0, 1 / np.sqrt(k), size=(d, 4 * k))
    b = _Ftrl(np.zeros(1), 0.2, 1.0, 0.0, 0.0)
    w = _Ftrl(np.zeros(d), 0.2, 1.0, 0.3, 0.05)
    P = _Ftrl(P0.reshape(d, 4, k), 0.2, 1.0, 0.3, 0.05, start=True)
    for _ in range(2):
        for i in range(n):
            ind = X.indices[X.indptr[i]:X.indptr[i + 1]]
            val = X.data[X.indptr[i]:X.indptr[i + 1]]
            phi, grad = _brute(P.w, fields, ind, val)
            pred = b.w[0] + w.w[ind] @ val + phi
            dl = -y[i] / (1 + np.exp(y[i] * pred))
            b.step(np.array([0]), np.array([dl]))
            w.step(ind, dl * val)
            for a, j in enumerate(ind):
                for f in sorted({fields[c] for cc, c in enumerate(ind) if cc != a}):
                    P.step((j, f), dl * grad[a, f])
    np.testing.assert_allclose(est.P_[0], P.w, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(est.w_[0], w.w, rtol=1e-9, atol=1e-12)
    assert est.n_nonzero_weights_ == np.count_nonzero(w.w) + np.count_nonzero(P.w)


def test_ftrl_partial_fit_and_limits():
    rng = np.random.RandomState(2)
    X = sp.random(200, 12, density=0.3, format="csr", random_state=rng)
    y = rng.randint(0, 2, 200)
    clf = FactorizationMachineClassifier(solver="ftrl", l1=0.05)
    for _ in range(3):
        clf.partial_fit(X, y, classes=[0, 1])
    assert clf.n_iter_[0] == 3 and clf.solver_ == "ftrl"
    with pytest.raises(ValueError, match="batch_size must be 1"):
        FactorizationMachineClassifier(solver="ftrl", batch_size=8).fit(X, y)
    with pytest.raises(ValueError, match="no dummy features"):
        FactorizationMachineClassifier(solver="ftrl", degree=3,
                                       lower_degrees="shared").fit(X, y)
    with pytest.raises(ValueError, match="l1"):
        FactorizationMachineClassifier(solver="ftrl", l1=-1).fit(X, y)
