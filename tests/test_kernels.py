"""Tests of the kernel layer (polylite._engine._kernels through polylite.kernels).

Every kernel is checked against brute-force enumeration with itertools, every gradient
against central finite differences, the dynamic programme against the power-sum route,
float32 against float64, and batch prediction against a per-row reference and against
explicit polynomial features (scikit-learn's PolynomialFeatures).
"""
import math
from functools import lru_cache
from itertools import combinations, product

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.preprocessing import PolynomialFeatures

from polylite._engine import layouts
import polylite.kernels as K

DEGREES = [1, 2, 3, 4, 5]
ROW_CASES = ["empty", "single", "short", "explicit_zeros", "unsorted", "full"]

# float32 results must agree with float64 ones to this relative tolerance, measured
# against the "absolute" value of the same kernel (all parameters and values replaced by
# their absolute values), which bounds the rounding error of every summation involved.
F32_RTOL = 1e-4


# --------------------------------------------------------------------------------------
# Brute-force references (float64, independent of the Cython code)
# --------------------------------------------------------------------------------------

def _items(P, idx, vals, gamma=None):
    """q[e, s] = p_{e,s} x_e over the augmented row: gamma dummies (value 1) first."""
    P = np.asarray(P, dtype=np.float64)
    q = P[np.asarray(idx, dtype=np.int64)] * np.asarray(vals, dtype=np.float64)[:, None]
    if gamma is not None:
        q = np.vstack([np.atleast_2d(np.asarray(gamma, dtype=np.float64)), q])
    return q


@lru_cache(maxsize=None)
def _index_tuples(kind, n, m):
    """Every m-combination (kind "c") or ordered m-tuple (kind "p") of range(n)."""
    gen = combinations(range(n), m) if kind == "c" else product(range(n), repeat=m)
    tuples = list(gen)
    return np.array(tuples, dtype=np.int64).reshape(len(tuples), m)


def _sum_of_products(q, kind, m):
    tuples = _index_tuples(kind, q.shape[0], m)
    # An empty product is 1 (the empty tuple); no tuple at all sums to 0.
    return np.prod(q[tuples], axis=1).sum(axis=0)


def brute_anova(P, idx, vals, m, gamma=None):
    """A_m(p_s, x) = sum over m distinct items of the product of p_j x_j, shape (k,)."""
    q = _items(P, idx, vals, gamma)
    return _sum_of_products(q, "c", m)


def brute_all_subsets(P, idx, vals):
    """Sum over every subset of the row's nonzeros (the empty one included), shape (k,)."""
    q = _items(P, idx, vals)
    return sum(_sum_of_products(q, "c", r) for r in range(q.shape[0] + 1))


def brute_polynomial(P, idx, vals, m, gamma=None):
    """(gamma_s + <p_s, x>)^m expanded over every ordered m-tuple of items, shape (k,)."""
    q = _items(P, idx, vals, gamma)
    return _sum_of_products(q, "p", m)


def make_row(case, rng, d=12, dtype=np.float64, index_dtype=np.int64):
    """(indices, values) of one sparse row of the named kind."""
    nnz = {"empty": 0, "single": 1, "short": 2, "explicit_zeros": 6, "unsorted": 7,
           "full": 8}[case]
    idx = np.sort(rng.choice(d, size=nnz, replace=False))
    vals = rng.uniform(-1.5, 1.5, size=nnz)
    if case == "explicit_zeros":
        vals[[1, 4]] = 0.0
    if case == "unsorted":
        idx = rng.permutation(idx)
    return idx.astype(index_dtype), vals.astype(dtype)


def make_params(rng, d=12, k=3, n_dummy=0, scale=0.8):
    P = rng.normal(scale=scale, size=(d, k))
    gamma = rng.normal(scale=scale, size=(n_dummy, k)) if n_dummy else None
    return P, gamma


def assert_close(actual, expected, scale=None, rtol=1e-10):
    """|actual - expected| <= rtol * (|expected| + scale), elementwise.

    ``scale`` (scalar or array) is the size of the terms that were summed, e.g. the same
    kernel with every parameter and value replaced by its absolute value: rounding errors
    are relative to it, not to a result that may have cancelled.
    """
    actual = np.asarray(actual, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    bound = rtol * (np.abs(expected) + (0.0 if scale is None else np.asarray(scale)))
    bound = np.broadcast_to(bound, expected.shape)
    err = np.abs(actual - expected)
    bad = ~(err <= bound)
    if np.any(bad):
        raise AssertionError(
            f"{bad.sum()} of {bad.size} entries differ beyond rtol={rtol}: max error "
            f"{err[bad].max():.3g}, smallest bound among them {bound[bad].min():.3g}\n"
            f"actual   {actual[bad][:5]}\nexpected {expected[bad][:5]}")


# --------------------------------------------------------------------------------------
# Kernels against brute force
# --------------------------------------------------------------------------------------

def test_brute_force_references_are_right():
    # The references themselves, on a hand-computed example.
    P = np.array([[1.0], [2.0], [3.0]])
    idx, vals = np.array([0, 1, 2]), np.array([1.0, 1.0, 2.0])   # q = 1, 2, 6
    assert brute_anova(P, idx, vals, 0) == pytest.approx(1)
    assert brute_anova(P, idx, vals, 2) == pytest.approx(1 * 2 + 1 * 6 + 2 * 6)
    assert brute_anova(P, idx, vals, 3) == pytest.approx(12)
    assert brute_anova(P, idx, vals, 4) == pytest.approx(0)
    assert brute_all_subsets(P, idx, vals) == pytest.approx(2 * 3 * 7)
    assert brute_polynomial(P, idx, vals, 3) == pytest.approx(9 ** 3)
    assert brute_polynomial(P, idx, vals, 2, gamma=[[-1.0]]) == pytest.approx(64)


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("n_dummy", [0, 1, 3])
@pytest.mark.parametrize("case", ROW_CASES)
@pytest.mark.parametrize("degree", DEGREES)
def test_anova_matches_brute_force(degree, case, n_dummy, index_dtype, rng):
    P, gamma = make_params(rng, n_dummy=n_dummy)
    idx, vals = make_row(case, rng, index_dtype=index_dtype)
    A = K.anova(P, idx, vals, degree, gamma=gamma)
    assert A.shape == (degree + 1, P.shape[1])
    for t in range(degree + 1):   # every lower degree comes out of the same table
        expected = brute_anova(P, idx, vals, t, gamma)
        assert_close(A[t], expected, brute_anova(abs(P), idx, abs(vals), t,
                                                 None if gamma is None else abs(gamma)))
    if len(idx) + n_dummy < degree:
        np.testing.assert_array_equal(A[degree], 0.0)


def test_anova_one_dimensional_p(rng):
    P = rng.normal(size=10)
    idx, vals = np.array([0, 3, 7]), np.array([0.5, -1.0, 2.0])
    A = K.anova(P, idx, vals, 2)
    assert A.shape == (3, 1)
    assert_close(A[2], brute_anova(P[:, None], idx, vals, 2))


@pytest.mark.parametrize("case", ROW_CASES)
def test_all_subsets_matches_brute_force(case, rng):
    P, _ = make_params(rng)
    idx, vals = make_row(case, rng)
    value = K.all_subsets(P, idx, vals)
    assert_close(value, brute_all_subsets(P, idx, vals),
                 brute_all_subsets(abs(P), idx, abs(vals)))
    value2, _ = K.all_subsets_gradient(P, idx, vals)
    np.testing.assert_array_equal(value, value2)


@pytest.mark.parametrize("n_dummy", [0, 1])
@pytest.mark.parametrize("case", ROW_CASES)
@pytest.mark.parametrize("degree", DEGREES)
def test_polynomial_matches_brute_force(degree, case, n_dummy, rng):
    P, gamma = make_params(rng, n_dummy=n_dummy)
    idx, vals = make_row(case, rng)
    value = K.polynomial(P, idx, vals, degree, gamma=gamma)
    expected = brute_polynomial(P, idx, vals, degree, gamma)
    assert_close(value, expected,
                 brute_polynomial(abs(P), idx, abs(vals), degree,
                                  None if gamma is None else abs(gamma)))
    value2, _, _ = K.polynomial_gradient(P, idx, vals, degree, gamma=gamma)
    assert_close(value2, value)


@pytest.mark.parametrize("n_dummy", [0, 2])
@pytest.mark.parametrize("case", ROW_CASES)
@pytest.mark.parametrize("degree", DEGREES)
def test_power_sums_match_brute_force(degree, case, n_dummy, rng):
    P, gamma = make_params(rng, n_dummy=n_dummy)
    idx, vals = make_row(case, rng)
    D = K.power_sums(P, idx, vals, degree, gamma=gamma)
    q = _items(P, idx, vals, gamma)
    expected = np.array([(q ** t).sum(axis=0) for t in range(1, degree + 1)])
    assert D.shape == (degree, P.shape[1])
    assert_close(D, expected, np.array([(abs(q) ** t).sum(axis=0)
                                        for t in range(1, degree + 1)]))


# --------------------------------------------------------------------------------------
# The all-subsets gradient with a factor 1 + p_j x_j that is exactly zero
# --------------------------------------------------------------------------------------

def test_all_subsets_gradient_with_zero_factor(rng):
    P = rng.normal(size=(8, 2))
    idx = np.array([1, 3, 5, 6])
    vals = np.array([0.5, 2.0, -1.5, 0.25])
    P[3, 0] = -0.5        # 1 + (-0.5)(2.0) == 0 exactly
    value, grad = K.all_subsets_gradient(P, idx, vals)
    factors = 1 + P[idx] * vals[:, None]
    assert factors[1, 0] == 0.0
    assert value[0] == 0.0
    assert_close(value[1], np.prod(factors[:, 1]))
    for z in range(len(idx)):
        for s in range(2):
            others = np.prod(np.delete(factors[:, s], z))
            assert grad[z, s] == pytest.approx(vals[z] * others, rel=1e-12, abs=1e-14)
    # The zero factor's own derivative is the (nonzero) product of the others.
    assert grad[1, 0] != 0.0
    np.testing.assert_array_equal(grad[[0, 2, 3], 0], 0.0)


def test_all_subsets_gradient_with_two_zero_factors():
    P = np.array([[-2.0], [1.0], [-4.0]])
    idx, vals = np.array([0, 1, 2]), np.array([0.5, 3.0, 0.25])
    value, grad = K.all_subsets_gradient(P, idx, vals)
    assert value[0] == 0.0
    np.testing.assert_array_equal(grad, 0.0)   # each derivative keeps the other zero


# --------------------------------------------------------------------------------------
# Gradients against central finite differences
# --------------------------------------------------------------------------------------

def _central_difference(f, x, h):
    """Numerical gradient of the vector function f at array x (same shape as x[...])."""
    x = np.array(x, dtype=np.float64)
    grads = []
    for pos in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[pos] += h
        xm[pos] -= h
        grads.append((f(xp) - f(xm)) / (2 * h))
    out_shape = np.shape(f(x))
    return np.array(grads).reshape(x.shape + out_shape)


@pytest.mark.parametrize("n_dummy", [0, 1, 3])
@pytest.mark.parametrize("case", ROW_CASES)
@pytest.mark.parametrize("degree", DEGREES)
def test_anova_gradient_finite_differences(degree, case, n_dummy, rng):
    P, gamma = make_params(rng, n_dummy=n_dummy)
    idx, vals = make_row(case, rng)
    value, grad, grad_gamma = K.anova_gradient(P, idx, vals, degree, gamma=gamma)
    assert grad.shape == (len(idx), P.shape[1])
    assert grad_gamma.shape == (n_dummy, P.shape[1])
    assert_close(value, brute_anova(P, idx, vals, degree, gamma),
                 brute_anova(abs(P), idx, abs(vals), degree,
                             None if gamma is None else abs(gamma)))
    h = 1e-4

    def f_rows(rows):                    # the row's factor rows -> A_m, shape (k,)
        Q = P.copy()
        Q[idx] = rows
        return brute_anova(Q, idx, vals, degree, gamma)

    num = _central_difference(f_rows, P[idx], h)         # (nnz, k, k)
    # dA(p_s)/dP[j, s'] vanishes for s' != s: the diagonal is the gradient.
    num_grad = np.einsum("zss->zs", num) if len(idx) else np.zeros((0, P.shape[1]))
    assert_close(grad, num_grad, np.max(abs(num_grad), initial=1.0), rtol=1e-7)
    off_diag = num - np.einsum("zs,st->zst", num_grad, np.eye(P.shape[1]))
    assert np.all(abs(off_diag) < 1e-8)
    if n_dummy:
        num = _central_difference(lambda g: brute_anova(P, idx, vals, degree, g),
                                  gamma, h)
        num_gamma = np.einsum("rss->rs", num)
        assert_close(grad_gamma, num_gamma, np.max(abs(num_gamma), initial=1.0),
                     rtol=1e-7)
    # Explicit zeros in the row have a zero gradient.
    np.testing.assert_array_equal(grad[vals == 0], 0.0)


@pytest.mark.parametrize("case", ROW_CASES)
def test_all_subsets_gradient_finite_differences(case, rng):
    P, _ = make_params(rng)
    idx, vals = make_row(case, rng)
    _, grad = K.all_subsets_gradient(P, idx, vals)

    def f_rows(rows):
        Q = P.copy()
        Q[idx] = rows
        return brute_all_subsets(Q, idx, vals)

    num = _central_difference(f_rows, P[idx], 1e-4)
    num_grad = np.einsum("zss->zs", num) if len(idx) else np.zeros((0, P.shape[1]))
    assert grad.shape == (len(idx), P.shape[1])
    assert_close(grad, num_grad, np.max(abs(num_grad), initial=1.0), rtol=1e-7)


@pytest.mark.parametrize("n_dummy", [0, 1])
@pytest.mark.parametrize("case", ROW_CASES)
@pytest.mark.parametrize("degree", DEGREES)
def test_polynomial_gradient_finite_differences(degree, case, n_dummy, rng):
    P, gamma = make_params(rng, n_dummy=n_dummy)
    idx, vals = make_row(case, rng)
    _, grad, grad_gamma = K.polynomial_gradient(P, idx, vals, degree, gamma=gamma)
    h = 1e-5

    def f_rows(rows):
        Q = P.copy()
        Q[idx] = rows
        return brute_polynomial(Q, idx, vals, degree, gamma)

    num = _central_difference(f_rows, P[idx], h)
    num_grad = np.einsum("zss->zs", num) if len(idx) else np.zeros((0, P.shape[1]))
    assert_close(grad, num_grad, np.max(abs(num_grad), initial=1.0), rtol=1e-6)
    g0 = gamma if gamma is not None else np.zeros((1, P.shape[1]))
    num = _central_difference(lambda g: brute_polynomial(P, idx, vals, degree, g), g0, h)
    num_gamma = np.einsum("rss->rs", num)[0]
    assert grad_gamma.shape == (P.shape[1],)
    assert_close(grad_gamma, num_gamma, np.max(abs(num_gamma), initial=1.0), rtol=1e-6)


def test_finite_difference_checker_detects_a_wrong_gradient(rng):
    # Guard against a vacuous comparison: a perturbed gradient must fail.
    P, _ = make_params(rng)
    idx, vals = make_row("full", rng)
    _, grad, _ = K.anova_gradient(P, idx, vals, 3)
    wrong = grad.copy()
    wrong[2, 1] *= 1.001
    num = _central_difference(
        lambda rows: brute_anova(_scatter(P, idx, rows), idx, vals, 3), P[idx], 1e-4)
    num_grad = np.einsum("zss->zs", num)
    assert_close(grad, num_grad, rtol=1e-7)
    with pytest.raises(AssertionError):
        assert_close(wrong, num_grad, rtol=1e-7)


def _scatter(P, idx, rows):
    Q = P.copy()
    Q[idx] = rows
    return Q


# --------------------------------------------------------------------------------------
# Dynamic programme against power sums (Newton's identity, coordinate derivative)
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("n_dummy", [0, 2])
@pytest.mark.parametrize("case", ROW_CASES)
@pytest.mark.parametrize("degree", DEGREES)
def test_anova_from_power_sums_matches_dp(degree, case, n_dummy, rng):
    P, gamma = make_params(rng, n_dummy=n_dummy)
    idx, vals = make_row(case, rng)
    A = K.anova(P, idx, vals, degree, gamma=gamma)
    D = K.power_sums(P, idx, vals, degree, gamma=gamma)
    # Newton's identity cancels, even to an exact zero when the row has fewer items than
    # the degree: measure its rounding error against (sum_j |p_j x_j|)^t.
    l1 = abs(_items(P, idx, vals, gamma)).sum(axis=0)
    for s in range(P.shape[1]):
        A_newton = K.anova_from_power_sums(D[:, s])
        assert A_newton.shape == (degree + 1,)
        assert_close(A_newton, A[:, s], l1[s] ** np.arange(degree + 1), rtol=1e-12)


@pytest.mark.parametrize("n_dummy", [0, 2])
@pytest.mark.parametrize("case", ROW_CASES)
@pytest.mark.parametrize("degree", DEGREES)
def test_coordinate_derivative_matches_reverse_mode(degree, case, n_dummy, rng):
    P, gamma = make_params(rng, n_dummy=n_dummy)
    idx, vals = make_row(case, rng)
    _, grad, _ = K.anova_gradient(P, idx, vals, degree, gamma=gamma)
    D = K.power_sums(P, idx, vals, degree, gamma=gamma)
    l1 = abs(_items(P, idx, vals, gamma)).sum(axis=0)
    for z, (j, x) in enumerate(zip(idx, vals)):
        for s in range(P.shape[1]):
            # Only D_1..D_{degree-1} are needed; passing all of them is allowed.
            for Ds in (D[:degree - 1, s], D[:, s]):
                g = K.anova_coordinate_derivative(Ds, degree, P[j, s], x)
                # Rounding is relative to |x| (sum_j |p_j x_j|)^(degree-1) (see above).
                assert_close(g, grad[z, s], abs(x) * l1[s] ** (degree - 1), rtol=1e-12)


def test_coordinate_derivative_needs_enough_power_sums():
    with pytest.raises(ValueError, match="power sums"):
        K.anova_coordinate_derivative(np.array([1.0]), 3, 0.5, 1.0)
    assert K.anova_coordinate_derivative(np.zeros(0), 1, 0.5, 2.0) == 2.0


def test_anova_from_power_sums_small_case():
    # q = (1, 2, 3): D = (6, 14, 36); A = (1, 6, 11, 6).
    A = K.anova_from_power_sums(np.array([6.0, 14.0, 36.0]))
    np.testing.assert_allclose(A, [1, 6, 11, 6])
    np.testing.assert_array_equal(K.anova_from_power_sums(np.zeros(0)), [1.0])


# --------------------------------------------------------------------------------------
# float32 against float64
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("n_dummy", [0, 2])
@pytest.mark.parametrize("case", ["explicit_zeros", "full"])
@pytest.mark.parametrize("degree", DEGREES)
def test_float32_agrees_with_float64(degree, case, n_dummy, rng):
    P, gamma = make_params(rng, n_dummy=n_dummy)
    idx, vals = make_row(case, rng)
    # Start from float32-representable inputs so only the arithmetic differs.
    P32, v32 = P.astype(np.float32), vals.astype(np.float32)
    g32 = None if gamma is None else gamma.astype(np.float32)
    P64, v64 = P32.astype(np.float64), v32.astype(np.float64)
    g64 = None if g32 is None else g32.astype(np.float64)
    absg = None if g64 is None else abs(g64)

    A32 = K.anova(P32, idx, v32, degree, gamma=g32)
    assert A32.dtype == np.float32
    assert_close(A32, K.anova(P64, idx, v64, degree, gamma=g64),
                 K.anova(abs(P64), idx, abs(v64), degree, gamma=absg), rtol=F32_RTOL)

    val32, gr32, gg32 = K.anova_gradient(P32, idx, v32, degree, gamma=g32)
    val64, gr64, gg64 = K.anova_gradient(P64, idx, v64, degree, gamma=g64)
    _, gr_abs, gg_abs = K.anova_gradient(abs(P64), idx, abs(v64), degree, gamma=absg)
    assert gr32.dtype == np.float32
    assert_close(gr32, gr64, gr_abs, rtol=F32_RTOL)
    assert_close(gg32, gg64, gg_abs, rtol=F32_RTOL)

    S32, Sg32 = K.all_subsets_gradient(P32, idx, v32)
    S64, Sg64 = K.all_subsets_gradient(P64, idx, v64)
    Sa, Sga = K.all_subsets_gradient(abs(P64), idx, abs(v64))
    assert_close(S32, S64, Sa, rtol=F32_RTOL)
    assert_close(Sg32, Sg64, Sga, rtol=F32_RTOL)

    g1_32 = None if g32 is None else g32[:1]
    g1_64 = None if g64 is None else g64[:1]
    Q32, Qg32, Qgg32 = K.polynomial_gradient(P32, idx, v32, degree, gamma=g1_32)
    Q64, Qg64, Qgg64 = K.polynomial_gradient(P64, idx, v64, degree, gamma=g1_64)
    Qa, Qga, Qgga = K.polynomial_gradient(abs(P64), idx, abs(v64), degree,
                                          gamma=None if g1_64 is None else abs(g1_64))
    assert_close(Q32, Q64, Qa, rtol=F32_RTOL)
    assert_close(Qg32, Qg64, Qga, rtol=F32_RTOL)
    assert_close(Qgg32, Qgg64, Qgga, rtol=F32_RTOL)


# --------------------------------------------------------------------------------------
# Batch prediction
# --------------------------------------------------------------------------------------

N_FEATURES, N_COMPONENTS = 9, 3

MODELS = {
    # name: (kernel, n_blocks, degrees, n_dummy, use_lam)
    "fm": ("anova", None, 2, 0, False),                       # 2-D P, degree 2
    "hofm-separate": ("anova", 4, [2, 3, 4, 5], 0, False),     # one P per degree
    "hofm-shared": ("anova", 1, [3], 2, False),                # augmented, 2 dummies
    "hofm-separate-dummies": ("anova", 2, [3, 2], 1, False),   # dummies go to block 0
    "all-subsets": ("all-subsets", None, None, 0, False),
    "polynomial-lam": ("polynomial", 1, [3], 0, True),
    "polynomial-lam-gamma": ("polynomial", 1, [2], 1, True),
    "polynomial-gamma": ("polynomial", None, 4, 1, False),
}


def make_model(name, rng, dtype=np.float64, linear=True):
    kernel, n_blocks, degrees, n_dummy, use_lam = MODELS[name]
    scale = 0.3 if kernel == "all-subsets" else 0.6
    shape = ((N_FEATURES, N_COMPONENTS) if n_blocks is None
             else (n_blocks, N_FEATURES, N_COMPONENTS))
    params = dict(kernel=kernel, degrees=degrees,
                  P=rng.normal(scale=scale, size=shape).astype(dtype))
    if n_dummy:
        params["gamma"] = rng.normal(scale=scale, size=(n_dummy, N_COMPONENTS)).astype(dtype)
    if use_lam:
        params["lam"] = rng.normal(size=N_COMPONENTS).astype(dtype)
    if linear:
        params["w"] = rng.normal(size=N_FEATURES).astype(dtype)
        params["intercept"] = 0.75
    return params


def make_csr(rng, n_rows=40, d=N_FEATURES, dtype=np.float64, index_dtype=np.int32):
    """Random CSR with empty rows, rows shorter than the degrees and stored zeros."""
    indptr, indices, data = [0], [], []
    for i in range(n_rows):
        nnz = 0 if i % 7 == 0 else int(rng.integers(1, 8))
        cols = np.sort(rng.choice(d, size=nnz, replace=False))
        vals = rng.uniform(-1.5, 1.5, size=nnz)
        if i % 5 == 1 and nnz > 1:
            vals[0] = 0.0                        # an explicitly stored zero
        indices.extend(cols)
        data.extend(vals)
        indptr.append(len(indices))
    X = sp.csr_matrix((np.array(data, dtype=dtype), np.array(indices, dtype=np.int32),
                       np.array(indptr, dtype=np.int32)), shape=(n_rows, d))
    # scipy picks int32 for small matrices whatever it is given: set the dtype afterwards.
    X.indices = X.indices.astype(index_dtype)
    X.indptr = X.indptr.astype(index_dtype)
    assert X.indices.dtype == index_dtype and X.indptr.dtype == index_dtype
    return X


def reference_predict(X, P, kernel="anova", degrees=None, intercept=0.0, w=None,
                      gamma=None, lam=None):
    """Row by row with the brute-force kernels, in float64."""
    X = sp.csr_matrix(X, dtype=np.float64)
    P = np.asarray(P, dtype=np.float64)
    if P.ndim == 2:
        P = P[None]
    degrees = np.atleast_1d(degrees) if degrees is not None else [None]
    gamma = None if gamma is None else np.asarray(gamma, dtype=np.float64)
    out = np.empty(X.shape[0])
    for i in range(X.shape[0]):
        idx = X.indices[X.indptr[i]:X.indptr[i + 1]]
        vals = X.data[X.indptr[i]:X.indptr[i + 1]]
        y = float(intercept)
        if w is not None:
            y += float(np.dot(np.asarray(w, dtype=np.float64)[idx], vals))
        if kernel == "anova":
            for b, m in enumerate(degrees):
                y += brute_anova(P[b], idx, vals, m, gamma if b == 0 else None).sum()
        elif kernel == "all-subsets":
            y += brute_all_subsets(P[0], idx, vals).sum()
        else:
            lam_ = np.ones(P.shape[2]) if lam is None else np.asarray(lam, np.float64)
            y += lam_ @ brute_polynomial(P[0], idx, vals, degrees[0], gamma)
        out[i] = y
    return out


def _abs_params(params):
    return {key: (abs(v) if isinstance(v, (np.ndarray, float)) else v)
            for key, v in params.items()}


def _convert(X, fmt):
    if fmt == "csr_matrix":
        return X
    if fmt == "csr_array":
        return sp.csr_array(X)
    if fmt == "csc":
        return X.tocsc()
    if fmt == "coo":
        return X.tocoo()
    if fmt == "dense":
        return X.toarray()
    raise AssertionError(fmt)


# Input formats with the index dtype of the sparse matrix (dense input has none).
FORMATS = [("csr_matrix", np.int32), ("csr_matrix", np.int64), ("csr_array", np.int32),
           ("csr_array", np.int64), ("csc", np.int32), ("csc", np.int64),
           ("dense", np.int32)]


@pytest.mark.parametrize("linear", [False, True], ids=["nolinear", "linear"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("fmt, index_dtype", FORMATS,
                         ids=[f"{f}-{np.dtype(i).name}" for f, i in FORMATS])
@pytest.mark.parametrize("model", list(MODELS))
def test_predict_matches_reference(model, fmt, index_dtype, dtype, linear, rng,
                                   monkeypatch):
    monkeypatch.setattr(layouts, "DENSE_CHUNK_ROWS", 7)   # 40 rows: 6 chunks, last partial
    X = make_csr(rng, dtype=dtype, index_dtype=index_dtype)
    params = make_model(model, rng, dtype=dtype, linear=linear)
    y = K.predict(_convert(X, fmt), **params)
    assert y.shape == (X.shape[0],)
    assert y.dtype == dtype
    expected = reference_predict(X, **params)
    scale = abs(reference_predict(abs(X), **_abs_params(params)))
    rtol = F32_RTOL if dtype == np.float32 else 1e-10
    assert_close(y, expected, scale, rtol=rtol)


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("model", list(MODELS))
def test_predict_without_input_check(model, dtype, index_dtype, rng):
    # check_input=False hands the CSR arrays straight to the Cython loop, so this is
    # what runs the int64-index specialisation for certain.
    X = make_csr(rng, dtype=dtype, index_dtype=index_dtype)
    params = make_model(model, rng, dtype=dtype)
    y = K.predict(X, check_input=False, **params)
    assert_close(y, K.predict(X, **params))
    expected = reference_predict(X, **params)
    scale = abs(reference_predict(abs(X), **_abs_params(params)))
    assert_close(y, expected, scale, rtol=F32_RTOL if dtype == np.float32 else 1e-10)


@pytest.mark.parametrize("model", list(MODELS))
def test_predict_float32_agrees_with_float64(model, rng):
    X = make_csr(rng, dtype=np.float32)
    params32 = make_model(model, rng, dtype=np.float32)
    params64 = {key: (v.astype(np.float64) if isinstance(v, np.ndarray) else v)
                for key, v in params32.items()}
    y32 = K.predict(X, **params32)
    y64 = K.predict(X.astype(np.float64), **params64)
    assert y32.dtype == np.float32 and y64.dtype == np.float64
    scale = abs(K.predict(abs(X.astype(np.float64)), **_abs_params(params64)))
    assert_close(y32, y64, scale, rtol=F32_RTOL)


@pytest.mark.parametrize("n_dummy", [0, 2])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_predict_long_rows_every_degree(dtype, n_dummy, rng):
    # Rows of 0..30 nonzeros and degrees 1..6, against the one-row dynamic programme
    # (itself checked against brute force above): exercises the pruned DP of prediction
    # for rows shorter than, equal to and much longer than the degree.
    n_rows, d, k, degrees = 60, 40, 7, [1, 2, 3, 4, 5, 6]
    lengths = np.concatenate([[0, 1, 2, 3, 4, 5, 6, 7, 30], rng.integers(0, 31, n_rows - 9)])
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    indices = np.concatenate([np.sort(rng.choice(d, size=n, replace=False))
                              for n in lengths]).astype(np.int32)
    X = sp.csr_matrix((rng.uniform(-1, 1, size=indptr[-1]).astype(dtype), indices,
                       indptr), shape=(n_rows, d))
    P = rng.normal(scale=0.7, size=(len(degrees), d, k)).astype(dtype)
    gamma = rng.normal(size=(n_dummy, k)).astype(dtype) if n_dummy else None
    y = K.predict(X, P, degrees=degrees, gamma=gamma)
    expected, scale = np.zeros(n_rows), np.zeros(n_rows)
    for i in range(n_rows):
        idx, vals = X.indices[X.indptr[i]:X.indptr[i + 1]], X.data[X.indptr[i]:X.indptr[i + 1]]
        for b, m in enumerate(degrees):
            g = gamma if b == 0 else None
            expected[i] += K.anova(P[b].astype(np.float64), idx, vals.astype(np.float64), m,
                                   gamma=None if g is None else g.astype(np.float64))[m].sum()
            scale[i] += K.anova(abs(P[b]).astype(np.float64), idx,
                                abs(vals).astype(np.float64), m,
                                gamma=None if g is None else abs(g).astype(np.float64))[m].sum()
    assert_close(y, expected, scale, rtol=F32_RTOL if dtype == np.float32 else 1e-12)
    # One degree at a time gives the same per-block terms.
    total = sum(K.predict(X, P[b], degrees=m, gamma=gamma if b == 0 else None)
                for b, m in enumerate(degrees))
    assert_close(total, expected, scale, rtol=F32_RTOL if dtype == np.float32 else 1e-12)


def test_predict_dense_chunks_cover_every_row(rng, monkeypatch):
    X = make_csr(rng, n_rows=53)
    params = make_model("hofm-separate", rng)
    expected = K.predict(X, **params)
    for chunk in (1, 5, 53, 54, 1000):
        monkeypatch.setattr(layouts, "DENSE_CHUNK_ROWS", chunk)
        assert_close(K.predict(X.toarray(), **params), expected, rtol=1e-12)


def test_predict_sums_duplicate_entries(rng):
    # A duplicated (row, column) entry is one feature: summed, not counted twice.
    X = sp.csr_matrix((np.array([0.5, 0.25, 1.0, 2.0]), np.array([1, 1, 3, 4]),
                       np.array([0, 4])), shape=(1, N_FEATURES))
    params = make_model("hofm-separate", rng)
    X_summed = sp.csr_matrix((np.array([0.75, 1.0, 2.0]), np.array([1, 3, 4]),
                              np.array([0, 3])), shape=(1, N_FEATURES))
    assert_close(K.predict(X, **params), reference_predict(X_summed, **params))


def test_predict_unsorted_indices(rng):
    X = make_csr(rng)
    params = make_model("hofm-shared", rng)
    Xu = X.copy()
    for i in range(Xu.shape[0]):
        sl = slice(Xu.indptr[i], Xu.indptr[i + 1])
        perm = rng.permutation(Xu.indptr[i + 1] - Xu.indptr[i])
        Xu.indices[sl] = Xu.indices[sl][perm]
        Xu.data[sl] = Xu.data[sl][perm]
    Xu.has_sorted_indices = False
    assert_close(K.predict(Xu, **params), K.predict(X, **params))


def test_predict_empty_inputs(rng):
    params = make_model("hofm-separate", rng)
    assert K.predict(sp.csr_matrix((0, N_FEATURES)), **params).shape == (0,)
    y = K.predict(sp.csr_matrix((4, N_FEATURES)), **params)
    np.testing.assert_array_equal(y, 0.75)        # intercept only
    # No components: only the linear part remains.
    X = make_csr(rng)
    y = K.predict(X, P=np.zeros((N_FEATURES, 0)), degrees=2, w=params["w"], intercept=1.0)
    assert_close(y, 1.0 + X @ params["w"])


def test_predict_intercept_and_linear_only(rng):
    X = make_csr(rng)
    w = rng.normal(size=N_FEATURES)
    P = np.zeros((N_FEATURES, 2))
    assert_close(K.predict(X, P, degrees=2, w=w, intercept=-0.5), X @ w - 0.5)


# --------------------------------------------------------------------------------------
# Batch prediction against explicit polynomial features
# --------------------------------------------------------------------------------------

def _esp(values, r):
    """Elementary symmetric polynomial e_r of a 1-D array (by enumeration)."""
    return sum(math.prod(c) for c in combinations(values, r))


@pytest.mark.parametrize("degree", [2, 3, 4, 5])
def test_anova_equals_interaction_features(degree, rng):
    d, k = 6, 3
    X = rng.normal(size=(20, d))
    X[rng.random(X.shape) < 0.3] = 0.0
    P = rng.normal(size=(d, k))
    poly = PolynomialFeatures(degree=degree, interaction_only=True, include_bias=False)
    Phi = poly.fit_transform(X)
    coef = np.array([np.prod(P[e.astype(bool)], axis=0).sum() if e.sum() == degree
                     else 0.0 for e in poly.powers_])
    assert_close(K.predict(X, P, degrees=degree), Phi @ coef)


def test_separate_hofm_equals_interaction_features(rng):
    d, k, degrees = 6, 2, [2, 3, 4, 5]
    X = rng.normal(size=(20, d))
    P = rng.normal(size=(len(degrees), d, k))
    w = rng.normal(size=d)
    poly = PolynomialFeatures(degree=max(degrees), interaction_only=True,
                              include_bias=False)
    Phi = poly.fit_transform(X)
    coef = np.zeros(len(poly.powers_))
    for i, e in enumerate(poly.powers_):
        r = e.sum()
        if r == 1:
            coef[i] = w[e.argmax()]
        else:
            coef[i] = np.prod(P[degrees.index(r)][e.astype(bool)], axis=0).sum()
    assert_close(K.predict(X, P, degrees=degrees, w=w, intercept=2.0), Phi @ coef + 2.0)


@pytest.mark.parametrize("n_dummy", [1, 2, 3])
@pytest.mark.parametrize("degree", [2, 3, 4])
def test_shared_hofm_equals_interaction_features(degree, n_dummy, rng):
    # A_m([gamma, p], [1, x]): monomial x_S gets sum_s e_{m-|S|}(gamma_s) prod_S p_s.
    d, k = 5, 3
    X = rng.normal(size=(15, d))
    P = rng.normal(size=(d, k))
    gamma = rng.normal(size=(n_dummy, k))
    poly = PolynomialFeatures(degree=degree, interaction_only=True, include_bias=True)
    Phi = poly.fit_transform(X)
    coef = np.array([sum(_esp(gamma[:, s], degree - e.sum())
                         * np.prod(P[e.astype(bool), s]) for s in range(k))
                     for e in poly.powers_])
    assert_close(K.predict(X, P, degrees=degree, gamma=gamma), Phi @ coef)


def test_all_subsets_equals_interaction_features(rng):
    d, k = 5, 2
    X = rng.normal(size=(15, d))
    P = rng.normal(size=(d, k))
    poly = PolynomialFeatures(degree=d, interaction_only=True, include_bias=True)
    Phi = poly.fit_transform(X)
    coef = np.array([np.prod(P[e.astype(bool)], axis=0).sum() for e in poly.powers_])
    assert_close(K.predict(X, P, kernel="all-subsets"), Phi @ coef)


@pytest.mark.parametrize("with_gamma", [False, True])
@pytest.mark.parametrize("degree", [1, 2, 3, 4])
def test_polynomial_equals_polynomial_features(degree, with_gamma, rng):
    # lam_s (gamma_s + <p_s, x>)^m = sum over |alpha| <= m of
    # lam_s m! / (alpha! (m - |alpha|)!) gamma_s^(m - |alpha|) p_s^alpha x^alpha.
    d, k = 4, 3
    X = rng.normal(size=(15, d))
    P = rng.normal(size=(d, k))
    lam = rng.normal(size=k)
    gamma = rng.normal(size=(1, k)) if with_gamma else np.zeros((1, k))
    poly = PolynomialFeatures(degree=degree, include_bias=True)
    Phi = poly.fit_transform(X)
    coef = []
    for alpha in poly.powers_:
        rest = degree - alpha.sum()
        multinomial = math.factorial(degree) / (
            math.factorial(rest) * math.prod(math.factorial(a) for a in alpha))
        coef.append(sum(lam[s] * multinomial * gamma[0, s] ** rest
                        * np.prod(P[:, s] ** alpha) for s in range(k)))
    y = K.predict(X, P, kernel="polynomial", degrees=degree, lam=lam,
                  gamma=gamma if with_gamma else None)
    assert_close(y, Phi @ np.array(coef))


# --------------------------------------------------------------------------------------
# Bad input
# --------------------------------------------------------------------------------------

@pytest.fixture
def small(rng):
    X = make_csr(rng, n_rows=6)
    P = rng.normal(size=(N_FEATURES, 2))
    return X, P


@pytest.mark.parametrize("bad", [0, -1, 2.5, 2.0, "2", None, True])
def test_predict_rejects_bad_degree(bad, small):
    X, P = small
    match = "degrees is required" if bad is None else "degree must be an integer >= 1"
    with pytest.raises(ValueError, match=match):
        K.predict(X, P, degrees=bad)
    with pytest.raises(ValueError, match=match):
        K.predict(X, P, kernel="polynomial", degrees=None if bad is None else [bad])


@pytest.mark.parametrize("bad", [0, -2, 1.5, np.float64(3.0)])
def test_row_functions_reject_bad_degree(bad, rng):
    P = rng.normal(size=(5, 2))
    idx, vals = np.array([0, 2]), np.array([1.0, 2.0])
    for f in (K.anova, K.anova_gradient, K.polynomial, K.polynomial_gradient,
              K.power_sums):
        with pytest.raises(ValueError, match="degree must be an integer >= 1"):
            f(P, idx, vals, bad)
    with pytest.raises(ValueError, match="degree must be an integer >= 1"):
        K.anova_coordinate_derivative(np.ones(4), bad, 0.5, 1.0)


def test_check_degree():
    assert K.check_degree(np.int64(3)) == 3
    assert type(K.check_degree(np.int32(2))) is int
    with pytest.raises(ValueError, match="n_blocks must be an integer >= 2"):
        K.check_degree(1, minimum=2, name="n_blocks")


def test_predict_rejects_mismatched_shapes(small, rng):
    X, P = small
    d, k = P.shape
    with pytest.raises(ValueError, match=f"X has {d} features, but the model expects {d + 1}"):
        K.predict(X, rng.normal(size=(d + 1, k)), degrees=2)
    with pytest.raises(ValueError, match="features"):
        K.predict(X.toarray()[:, :-1], P, degrees=2)
    with pytest.raises(ValueError, match="features, but P has"):
        K.predict(X[:, :-1], P, degrees=2, check_input=False)
    with pytest.raises(ValueError, match=r"w has shape \(8,\), expected \(9,\)"):
        K.predict(X, P, degrees=2, w=np.ones(d - 1))
    with pytest.raises(ValueError, match=r"w has shape"):
        K.predict(X, P, degrees=2, w=np.ones((d, 1)))
    with pytest.raises(ValueError, match=r"gamma has shape \(1, 3\), expected \(n_dummy, 2\)"):
        K.predict(X, P, degrees=2, gamma=np.ones((1, k + 1)))
    with pytest.raises(ValueError, match=r"gamma has shape \(2,\)"):
        K.predict(X, P, degrees=2, gamma=np.ones(k))
    with pytest.raises(ValueError, match=r"lam has shape \(3,\), expected \(2,\)"):
        K.predict(X, P, kernel="polynomial", degrees=2, lam=np.ones(k + 1))
    with pytest.raises(ValueError, match="2 degrees given for 1 factor blocks"):
        K.predict(X, P, degrees=[2, 3])
    with pytest.raises(ValueError, match="1 degrees given for 2 factor blocks"):
        K.predict(X, np.stack([P, P]), degrees=[2])
    with pytest.raises(ValueError, match="P must be 2-D or 3-D"):
        K.predict(X, P.ravel(), degrees=2)
    with pytest.raises(ValueError, match="polynomial kernel takes one factor matrix"):
        K.predict(X, np.stack([P, P]), kernel="polynomial", degrees=[2, 2])
    with pytest.raises(ValueError, match="all-subsets kernel takes one factor matrix"):
        K.predict(X, np.stack([P, P]), kernel="all-subsets")
    with pytest.raises(ValueError, match="at most one gamma row"):
        K.predict(X, P, kernel="polynomial", degrees=2, gamma=np.ones((2, k)))
    with pytest.raises(ValueError, match="all-subsets kernel takes no gamma"):
        K.predict(X, P, kernel="all-subsets", gamma=np.ones((1, k)))


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("fmt", ["csr_matrix", "csr_array", "csc", "dense"])
def test_predict_rejects_non_finite_X(fmt, value, small):
    X, P = small
    X = X.copy()
    X.data[3] = value
    match = "NaN" if np.isnan(value) else "infinity"
    with pytest.raises(ValueError, match=match):
        K.predict(_convert(X, fmt), P, degrees=2)
    with pytest.raises(ValueError, match=match):
        K.check_X(_convert(X, fmt))


@pytest.mark.parametrize("value", [np.nan, np.inf])
def test_predict_rejects_non_finite_parameters(value, small):
    X, P = small
    d, k = P.shape
    bad_P = P.copy()
    bad_P[2, 1] = value
    with pytest.raises(ValueError, match="P contains NaN or infinity"):
        K.predict(X, bad_P, degrees=2)
    w = np.ones(d)
    w[0] = value
    with pytest.raises(ValueError, match="w contains NaN or infinity"):
        K.predict(X, P, degrees=2, w=w)
    gamma = np.ones((1, k))
    gamma[0, 1] = value
    with pytest.raises(ValueError, match="gamma contains NaN or infinity"):
        K.predict(X, P, degrees=2, gamma=gamma)
    lam = np.ones(k)
    lam[1] = value
    with pytest.raises(ValueError, match="lam contains NaN or infinity"):
        K.predict(X, P, kernel="polynomial", degrees=2, lam=lam)
    with pytest.raises(ValueError, match="intercept is NaN or infinite"):
        K.predict(X, P, degrees=2, intercept=value)
    with pytest.raises(ValueError, match="P contains NaN or infinity"):
        K.anova(bad_P, np.array([0]), np.array([1.0]), 2)
    with pytest.raises(ValueError, match="gamma contains NaN or infinity"):
        K.anova(P, np.array([0]), np.array([1.0]), 2, gamma=gamma)


def _hand_built_csr(indices, index_dtype=np.int32):
    indices = np.asarray(indices, dtype=index_dtype)
    indptr = np.array([0, 2, len(indices)], dtype=index_dtype)
    data = np.ones(len(indices))
    try:
        return sp.csr_matrix((data, indices, indptr), shape=(2, N_FEATURES))
    except ValueError:
        return None    # scipy rejected the matrix itself: acceptable, nothing to test


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("indices, match", [
    ([0, 3, -1, 2], r"negative column index \(-1\)"),
    ([0, 3, 2, N_FEATURES], rf"column index {N_FEATURES} out of range for {N_FEATURES}"),
    ([0, 3, 2, 10 ** 6], "out of range"),
])
def test_predict_rejects_bad_column_indices(indices, match, index_dtype, small):
    _, P = small
    X = _hand_built_csr(indices, index_dtype)
    if X is None:
        return
    with pytest.raises(ValueError, match=match):
        K.predict(X, P, degrees=2)
    with pytest.raises(ValueError, match=match):
        K.check_X(X)


def test_check_X_rejects_corrupt_indptr():
    X = sp.csr_matrix((np.ones(3), np.array([0, 1, 2], dtype=np.int32),
                       np.array([0, 2, 3], dtype=np.int32)), shape=(2, N_FEATURES))
    X.indptr = np.array([0, 3, 2], dtype=np.int32)
    with pytest.raises(ValueError, match="indptr"):
        K.check_X(X)


def test_row_functions_reject_bad_rows(rng):
    P = rng.normal(size=(5, 2))
    with pytest.raises(ValueError, match=r"row indices must lie in \[0, 5\)"):
        K.anova(P, np.array([0, 5]), np.array([1.0, 1.0]), 2)
    with pytest.raises(ValueError, match=r"row indices must lie in"):
        K.all_subsets(P, np.array([-1]), np.array([1.0]))
    with pytest.raises(ValueError, match="duplicate indices"):
        K.anova_gradient(P, np.array([1, 1]), np.array([1.0, 1.0]), 2)
    with pytest.raises(ValueError, match="same length"):
        K.anova(P, np.array([1, 2]), np.array([1.0]), 2)
    with pytest.raises(ValueError, match="row contains NaN or infinity"):
        K.polynomial(P, np.array([1]), np.array([np.nan]), 2)
    with pytest.raises(ValueError, match="gamma must have 2 columns"):
        K.anova(P, np.array([1]), np.array([1.0]), 2, gamma=np.ones((1, 3)))
    with pytest.raises(ValueError, match="at most one gamma row"):
        K.polynomial(P, np.array([1]), np.array([1.0]), 2, gamma=np.ones((2, 2)))


@pytest.mark.parametrize("name", ["ANOVA", "rbf", "all_subsets", "", None])
def test_predict_rejects_unknown_kernel(name, small):
    X, P = small
    with pytest.raises(ValueError, match="unknown kernel"):
        K.predict(X, P, degrees=2, kernel=name)


def test_check_X_output(rng):
    X = make_csr(rng, index_dtype=np.int64)
    Xc = K.check_X(X)
    assert sp.issparse(Xc) and Xc.format == "csr"
    assert Xc.indices.dtype == Xc.indptr.dtype
    assert Xc.has_canonical_format
    Xa = K.check_X(sp.csr_array(X).tocsc())
    assert Xa.format == "csr"
    Xd = K.check_X(X.toarray().astype(np.int64))
    assert isinstance(Xd, np.ndarray) and Xd.dtype == np.float64
    assert Xd.flags.c_contiguous
    assert K.check_X(X.astype(np.float32)).dtype == np.float32
    assert sp.issparse(K.check_X(X.toarray(), accept_dense=False))
    # Mixed index dtypes are unified for the Cython loop.
    Xm = X.copy()
    Xm.indptr = Xm.indptr.astype(np.int32)
    Xm2 = K.check_X(Xm)
    assert Xm2.indices.dtype == Xm2.indptr.dtype
