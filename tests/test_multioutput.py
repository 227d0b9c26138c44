"""Multi-output polynomial networks and FMs by conditional gradient (polylite.multioutput).

Each piece against an independent reference on small data: the passes over X against
dense Gamma_c matrices, the projections against SciPy's constrained solver, basis
selection against random restarts and numpy's eigensolver, the losses' gradients against
finite differences, the refits against their optimality conditions, and the estimators
against explicit features.
"""
import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import minimize
from scipy.special import expit, logsumexp, softmax
from sklearn.base import clone
from sklearn.utils.estimator_checks import parametrize_with_checks

import polylite
from polylite import MultiOutputPolynomialClassifier, MultiOutputPolynomialRegressor
from polylite.multioutput import _passes
from polylite.multioutput._losses import classifier_loss, regressor_loss
from polylite.multioutput._operator import RowOperator
from polylite.multioutput._projections import PENALTIES, dual_norm, penalty_value, project
from polylite.multioutput._refit import Features, Problem, refit_output
from polylite.multioutput._selection import dominant_eigenvectors, select_basis

# --------------------------------------------------------------------------------------
# dense references
# --------------------------------------------------------------------------------------


def _augmented(X, constant):
    X = np.asarray(X.todense() if sp.issparse(X) else X, dtype=np.float64)
    return np.hstack([X, np.ones((X.shape[0], 1))]) if constant else X


def _dense_gamma(X, w, constant, kernel):
    """Gamma for one column of weights w: X~^T diag(w) X~, FM with its diagonal removed."""
    A = _augmented(X, constant)
    G = A.T @ (w[:, None] * A)
    if kernel == "fm":
        G = 0.5 * (G - np.diag((A * A).T @ w))
    return G


def _dense_sigma(X, H, constant, kernel):
    A = _augmented(X, constant)
    L = A @ H.T
    if kernel == "pn":
        return L ** 2
    return 0.5 * (L ** 2 - (A ** 2) @ (H ** 2).T)


def _sparse(rng, n, d, density=0.4, dtype=np.float64):
    X = sp.random(n, d, density=density, format="csr", random_state=rng.integers(1 << 30),
                  dtype=np.float64)
    X.data = rng.standard_normal(X.data.shape[0])
    return X.astype(dtype)


# --------------------------------------------------------------------------------------
# passes over X
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("n_threads", [1, 3])
@pytest.mark.parametrize("constant", [True, False])
@pytest.mark.parametrize("kernel", ["pn", "fm"])
def test_features_and_gamma_against_dense(rng, kernel, constant, n_threads):
    X = _sparse(rng, 40, 7).tolil()
    X[5] = 0.0   # an empty row
    X = X.tocsr()
    X.eliminate_zeros()
    op = RowOperator(X, constant=constant, kernel=kernel)
    op.bounds = _passes.row_bounds(X.indptr, n_threads)
    assert op.n_threads == n_threads
    H = rng.standard_normal((4, op.dim))
    np.testing.assert_allclose(op.features(H), _dense_sigma(X, H, constant, kernel),
                               rtol=1e-12, atol=1e-12)
    Q, W = rng.standard_normal((op.dim, 3)), rng.standard_normal((40, 3))
    G, diagonal = op.gamma(Q, W)
    for s in range(3):
        expected = _dense_gamma(X, W[:, s], constant, kernel) @ Q[:, s]
        np.testing.assert_allclose(G[:, s], expected, rtol=1e-12, atol=1e-12)
    # q^T Gamma_s q = sum_i W_is sigma(q, x~_i): what basis selection relies on.
    np.testing.assert_allclose(np.einsum("js,js->s", Q, G),
                               np.einsum("is,is->s", W, _dense_sigma(X, Q.T, constant,
                                                                     kernel)),
                               rtol=1e-10)
    # A diagonal given back is used as it is.
    G2, _ = op.gamma(Q, W, diagonal=diagonal)
    np.testing.assert_array_equal(G, G2)
    # The diagonal is linear in W: that of W a is the diagonal times a (the refinement
    # passes it instead of summing it again).
    a = rng.standard_normal(3)
    Ga, _ = op.gamma(Q[:, :1], (W @ a)[:, None],
                     diagonal=None if diagonal is None else diagonal @ a[:, None])
    np.testing.assert_allclose(Ga[:, 0], _dense_gamma(X, W @ a, constant, kernel) @ Q[:, 0],
                               rtol=1e-12, atol=1e-12)
    # Columns of Q sharing columns of W (one pass for both ends of every output).
    columns = np.array([0, 2, 2, 1, 0])
    Q5 = rng.standard_normal((op.dim, 5))
    G5, diagonal5 = op.gamma(Q5, W, columns=columns)
    for s, c in enumerate(columns):
        expected = _dense_gamma(X, W[:, c], constant, kernel) @ Q5[:, s]
        np.testing.assert_allclose(G5[:, s], expected, rtol=1e-12, atol=1e-12)
    if kernel == "fm":
        np.testing.assert_allclose(diagonal5, diagonal, rtol=1e-12)
        X2 = np.column_stack([X.toarray(), np.ones(40)])[:, :op.dim]
        np.testing.assert_allclose(diagonal, (X2 ** 2).T @ W, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="out of range"):
        op.gamma(Q5, W, columns=[0, 1, 2, 3, 0])


def test_passes_in_float32(rng):
    X = _sparse(rng, 30, 6)
    op32 = RowOperator(X.astype(np.float32), constant=True, kernel="fm")
    op64 = RowOperator(X, constant=True, kernel="fm")
    H = rng.standard_normal((3, 7))
    Z32 = op32.features(H)
    assert Z32.dtype == np.float32
    np.testing.assert_allclose(Z32, op64.features(H), rtol=1e-4, atol=1e-5)
    W = rng.standard_normal((30, 2))
    G32, _ = op32.gamma(H[:2].T, W)
    assert G32.dtype == np.float64
    np.testing.assert_allclose(G32, op64.gamma(H[:2].T, W)[0], rtol=1e-4, atol=1e-4)


def test_power_method_algebra_against_numpy(rng):
    dim, m = 9, 4
    Q, GQ, D, GD, P, GP = (rng.standard_normal((dim, m)) for _ in range(6))
    rho = rng.standard_normal(m)
    GQ[:, 3] = rho[3] * Q[:, 3]   # a zero residual stays zero
    units = np.empty_like(Q)
    norms = _passes.unit_residuals(Q, GQ, rho, units)
    R = GQ - rho * Q
    np.testing.assert_allclose(norms, np.linalg.norm(R, axis=0), atol=1e-12)
    np.testing.assert_allclose(units[:, :3], R[:, :3] / norms[:3], rtol=1e-12)
    np.testing.assert_array_equal(units[:, 3], 0.0)
    d, gd = D.copy(), GD.copy()
    products = _passes.orthogonalise_step(Q, P, d, GQ, GP, gd)
    cq, cp = np.einsum("js,js->s", Q, D), np.einsum("js,js->s", P, D)
    d_ref, gd_ref = D - Q * cq - P * cp, GD - GQ * cq - GP * cp
    np.testing.assert_allclose(d, d_ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gd, gd_ref, rtol=1e-12, atol=1e-12)
    pairs = [(d_ref, d_ref), (P, GP), (d_ref, gd_ref), (Q, gd_ref), (d_ref, GQ),
             (P, gd_ref), (d_ref, GP), (D, D)]
    np.testing.assert_allclose(products, [np.einsum("js,js->s", a, b) for a, b in pairs],
                               rtol=1e-10, atol=1e-12)
    y = rng.standard_normal((m, 3))
    outputs = [np.empty_like(Q) for _ in range(4)]
    quotients = _passes.combine_step(y, (Q, P, D), (GQ, GP, GD), outputs)
    step, gstep = y[:, 1] * P + y[:, 2] * D, y[:, 1] * GP + y[:, 2] * GD
    q_new, gq_new = y[:, 0] * Q + step, y[:, 0] * GQ + gstep
    norm = np.linalg.norm(q_new, axis=0)
    for got, expected in zip(outputs, [q_new / norm, gq_new / norm, step, gstep]):
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(quotients, np.einsum("js,js->s", q_new, gq_new) / norm ** 2,
                               rtol=1e-12)


@pytest.mark.parametrize("n_threads", [1, 3])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("n", [50, 2 * _passes.BLOCK_ROWS + 37])
def test_linear_outputs_against_numpy(rng, monkeypatch, n_threads, dtype, order, n):
    monkeypatch.setattr(_passes, "MIN_BLOCKS_PER_THREAD", 1)   # threads on 3 blocks
    Z = np.asarray(rng.standard_normal((n, 4)), dtype=dtype, order=order)
    V, b = rng.standard_normal((4, 3)), rng.standard_normal(3)
    O = _passes.linear_outputs(Z, V, b, n_threads)
    assert O.dtype == np.float64 and O.flags.c_contiguous
    np.testing.assert_allclose(O, Z.astype(np.float64) @ V + b, rtol=1e-12, atol=1e-12)
    # No features: the intercept alone.
    np.testing.assert_array_equal(_passes.linear_outputs(Z[:, :0], V[:0], b, n_threads),
                                  np.tile(b, (n, 1)))
    with pytest.raises(ValueError, match="inconsistent shapes"):
        _passes.linear_outputs(Z, V[:3], b)


def _simplex_projections(A):
    """Each row of A projected onto the simplex, by NumPy: p = (a - theta)_+ with theta
    from the sorted row (Held, Wolfe, Crowder 1974)."""
    top = -np.sort(-A, axis=1)
    cumulative = np.cumsum(top, axis=1) - 1.0
    j = np.arange(1, A.shape[1] + 1)
    count = (top - cumulative / j > 0).sum(axis=1)
    theta = cumulative[np.arange(A.shape[0]), count - 1] / count
    return np.maximum(A - theta[:, None], 0.0)


@pytest.mark.parametrize("n_threads", [1, 3])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("name", ["squared", "logistic", "multiclass", "smooth_hinge",
                                  "squared_hinge"])
@pytest.mark.parametrize("n", [50, 2 * _passes.BLOCK_ROWS + 37])
def test_output_loss_against_numpy(rng, monkeypatch, n_threads, dtype, order, name, n):
    """The fused refit pass: outputs, loss, its gradient W, Z^T W and W's column sums
    (block by block: rows in several blocks, the last one partial, and with n_threads
    > 1 on two threads)."""
    monkeypatch.setattr(_passes, "MIN_BLOCKS_PER_THREAD", 1)
    t, c = 4, 3
    Z = np.asarray(rng.standard_normal((n, t)), dtype=dtype, order=order)
    V, b = 3 * rng.standard_normal((t, c)), rng.standard_normal(c)
    s = rng.random(n)
    s /= s.sum()
    expected_O = Z.astype(np.float64) @ V + b
    if name in ("multiclass", "smooth_hinge", "squared_hinge"):
        Y = rng.integers(0, c, n)
        rows = np.arange(n)
        loss = classifier_loss("logistic" if name == "multiclass" else name)
        margins = expected_O + 1.0 - expected_O[rows, Y][:, None]
        margins[rows, Y] = 0.0
        if name == "multiclass":
            expected_value = s @ (logsumexp(expected_O, axis=1) - expected_O[rows, Y])
            expected_W = softmax(expected_O, axis=1)
            expected_W[rows, Y] -= 1.0
        elif name == "squared_hinge":
            slack = np.maximum(margins, 0.0)
            expected_value = s @ (slack ** 2).sum(axis=1)
            expected_W = 2.0 * slack
            expected_W[rows, Y] = -expected_W.sum(axis=1)
        else:
            p = _simplex_projections(margins)
            expected_value = s @ ((p * margins).sum(axis=1) - 0.5 * (p * p).sum(axis=1)
                                  + 0.5)
            expected_W = p
            expected_W[rows, Y] -= 1.0
        expected_W *= s[:, np.newaxis]
        np.testing.assert_allclose(loss(Y, expected_O, s)[1], expected_W, rtol=1e-12,
                                   atol=1e-15)
    else:
        loss = regressor_loss(name)
        if name == "logistic":
            Y = np.sign(rng.standard_normal((n, c)))
            V *= 10   # margins out to |z| ~ 100 as well, where exp(-|z|) underflows
            expected_O = Z.astype(np.float64) @ V + b
            margins = Y * expected_O
            expected_value = s @ np.logaddexp(0.0, -margins).sum(axis=1)
            expected_W = -Y * expit(-margins) * s[:, np.newaxis]
        else:
            Y = rng.standard_normal((n, c))
            expected_value = s @ (0.5 * (expected_O - Y) ** 2).sum(axis=1)
            expected_W = (expected_O - Y) * s[:, np.newaxis]
        # The loss objects (one loss pass, no features) give the same.
        value, W = loss(Y, expected_O, s)
        np.testing.assert_allclose(value, expected_value, rtol=1e-12)
        np.testing.assert_allclose(W, expected_W, rtol=1e-12, atol=1e-15)
    O, W = np.empty((n, c)), np.empty((n, c))
    value, ZtW, sums = _passes.output_loss(loss.kind, Z, V, b, Y, s, O, W, n_threads)
    np.testing.assert_allclose(O, expected_O, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(value, expected_value, rtol=1e-12)
    np.testing.assert_allclose(W, expected_W, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(ZtW, Z.astype(np.float64).T @ expected_W, rtol=1e-10,
                               atol=1e-14)
    np.testing.assert_allclose(sums, expected_W.sum(axis=0), rtol=1e-10, atol=1e-14)
    # No features: the intercept alone, Z^T W empty.
    value, ZtW, _ = _passes.output_loss(loss.kind, Z[:, :0], V[:0], b, Y, s, O, W,
                                        n_threads)
    np.testing.assert_allclose(O, np.tile(b, (n, 1)), rtol=1e-12)
    assert ZtW.shape == (0, c)
    with pytest.raises(ValueError, match="inconsistent shapes"):
        _passes.output_loss(loss.kind, Z, V[:3], b, Y, s, O, W)


def test_curvature_ignores_steps_at_rounding_level():
    """A step too short to measure the loss's curvature (its excess over the linear
    model is rounding noise) must not halve kappa: the noise can suggest any curvature,
    and a kappa below the true one costs a rejected step and a doubled kappa after it."""
    from polylite.multioutput._refit import _next_curvature
    assert _next_curvature(1.0, -2.5e-16, 5e-31, True, 4.0, 4e-14) == 1.0
    # A measurable excess still lowers it, or raises it after an unbounded step.  One
    # step lowers it to the smallest power of two above the margin x the curvature seen
    # (0.2 x 1.25 = 0.25 here), not by one halving: the refit stops on a small decrease
    # only at an adapted kappa, so a slow adaptation would cost passes over the rows.
    assert _next_curvature(1.0, 0.1, 1.0, True, 4.0, 4e-14) == 0.25
    assert _next_curvature(1.0, 0.001, 1.0, True, 4.0, 4e-14) == 2.0 ** -8
    assert _next_curvature(1.0, 1.0, 1.0, False, 4.0, 4e-14) == 4.0


def test_row_bounds_split_the_nonzeros():
    indptr = np.array([0, 10, 10, 11, 30, 31, 32, 40], dtype=np.int32)
    bounds = _passes.row_bounds(indptr, 3)
    assert bounds[0] == 0 and bounds[-1] == 7
    assert np.all(np.diff(bounds) >= 0)
    one = _passes.row_bounds(indptr, 1)
    np.testing.assert_array_equal(one, [0, 7])


# --------------------------------------------------------------------------------------
# projections
# --------------------------------------------------------------------------------------


def _scipy_projection(V, tau, penalty):
    """The projection by SLSQP on a smooth reformulation (epigraph variables t_r)."""
    n, c = V.shape

    def split(z):
        return z[:n * c].reshape(n, c), z[n * c:]

    cons = [{"type": "ineq", "fun": lambda z: tau - split(z)[1].sum()}]
    if penalty == "l1":   # t_r >= |x_rc| for every entry, Omega = sum over entries
        t0 = np.abs(V).ravel()
        n_t = n * c
        cons.append({"type": "ineq",
                     "fun": lambda z: np.concatenate([z[n * c:] - z[:n * c],
                                                      z[n * c:] + z[:n * c]])})
    elif penalty == "l1/l2":
        t0, n_t = np.linalg.norm(V, axis=1), n
        cons.append({"type": "ineq", "fun": lambda z: split(z)[1] - np.sqrt(
            np.sum(split(z)[0] ** 2, axis=1) + 1e-16)})
    else:
        t0, n_t = np.abs(V).max(axis=1), n
        cons.append({"type": "ineq",
                     "fun": lambda z: np.concatenate([
                         (split(z)[1][:, None] - split(z)[0]).ravel(),
                         (split(z)[1][:, None] + split(z)[0]).ravel()])})

    def objective_t(z):   # t of any length
        X = z[:n * c].reshape(n, c)
        return 0.5 * np.sum((X - V) ** 2), np.concatenate([(X - V).ravel(),
                                                           np.zeros(n_t)])

    z0 = np.concatenate([V.ravel() * 0.5, t0 * 0.5 + 1e-3])
    res = minimize(objective_t, z0, jac=True, constraints=cons, method="SLSQP",
                   options=dict(ftol=1e-12, maxiter=200))
    X = res.x[:n * c].reshape(n, c)
    # SLSQP may stop on its line search near the optimum: judge the point, not the flag.
    assert penalty_value(X, penalty) <= tau * (1 + 1e-6), res.message
    return X


@pytest.mark.parametrize("penalty", PENALTIES)
@pytest.mark.parametrize("seed", range(4))
def test_projection_against_scipy(penalty, seed):
    rng = np.random.default_rng(seed)
    V = rng.standard_normal((4, 3)) * rng.uniform(0.1, 3)
    tau = 0.3 * penalty_value(V, penalty) * rng.uniform(0.1, 1.0)
    P = project(V, tau, penalty)
    assert penalty_value(P, penalty) <= tau * (1 + 1e-9)
    np.testing.assert_allclose(penalty_value(P, penalty), tau, rtol=1e-9)
    reference = _scipy_projection(V, tau, penalty)
    # The projection is the closest point of the ball: no farther than SciPy's (up to
    # SLSQP's own accuracy: its answer may sit a hair outside the ball, hence closer).
    reference_distance = np.sum((reference - V) ** 2)
    assert np.sum((P - V) ** 2) <= reference_distance * (1 + 1e-7) + 1e-8
    np.testing.assert_allclose(P, reference, atol=2e-4)


@pytest.mark.parametrize("penalty", PENALTIES)
def test_projection_idempotent_and_inside(penalty, rng):
    for _ in range(20):
        V = rng.standard_normal((rng.integers(1, 8), rng.integers(1, 6)))
        V[rng.random(V.shape) < 0.2] = 0.0
        V[rng.random(V.shape) < 0.2] = 1.5   # ties
        tau = rng.uniform(0.01, 1.2) * max(penalty_value(V, penalty), 1e-3)
        P = project(V, tau, penalty)
        assert penalty_value(P, penalty) <= tau * (1 + 1e-9)
        np.testing.assert_allclose(project(P, tau, penalty), P, atol=1e-12)
        assert np.all(P * V >= 0)   # no sign flips
    V = rng.standard_normal((3, 2))
    np.testing.assert_array_equal(project(V, 2 * penalty_value(V, penalty), penalty), V)


def _threshold_of(V, P, penalty):
    """The theta of the optimality conditions that P = project(V, tau, penalty) meets
    (one per penalty, the same for every entry, row or output), checked on the way."""
    A = np.abs(V)
    if penalty == "l1":       # |P| = (|V| - theta)_+, one theta for all entries
        gaps = (A - np.abs(P))[P != 0]
        np.testing.assert_allclose(gaps, gaps[0], atol=1e-9)
        assert np.all(A[P == 0] <= gaps[0] + 1e-9)
        return gaps[0]
    if penalty == "l1/l2":    # row norms (||V_r|| - theta)_+, directions kept
        norms, shrunk = np.linalg.norm(V, axis=1), np.linalg.norm(P, axis=1)
        gaps = (norms - shrunk)[shrunk > 0]
        np.testing.assert_allclose(gaps, gaps[0], atol=1e-9)
        scale = np.divide(shrunk, norms, out=np.zeros_like(norms), where=norms > 0)
        np.testing.assert_allclose(P, V * scale[:, None], atol=1e-9)
        assert np.all(norms[shrunk == 0] <= gaps[0] + 1e-9)
        return gaps[0]
    # l1/linf: row r clipped at its height mu_r; sum_c (|V_rc| - mu_r)_+ = theta for
    # every row kept, rows of l1 norm at most theta zeroed.
    mu = np.abs(P).max(axis=1)
    np.testing.assert_allclose(np.abs(P), np.minimum(A, mu[:, None]), atol=1e-12)
    cut = np.maximum(A - mu[:, None], 0).sum(axis=1)
    np.testing.assert_allclose(cut[mu > 0], cut[mu > 0][0], atol=1e-9)
    assert np.all(A[mu == 0].sum(axis=1) <= cut[mu > 0][0] + 1e-9)
    return cut[mu > 0][0]


@pytest.mark.parametrize("penalty", PENALTIES)
def test_projection_optimality_conditions_on_larger_inputs(penalty, rng):
    # SLSQP is too slow beyond a few entries: check the exact characterisation instead,
    # on the sizes the refits project (up to 150 basis vectors x 26 outputs), with ties.
    for shape in [(1, 1), (1, 26), (30, 1), (50, 7), (150, 26)]:
        V = rng.standard_normal(shape) * rng.uniform(0.1, 10)
        V[rng.random(shape) < 0.2] = 0.0
        V[rng.random(shape) < 0.2] = 0.75
        V[rng.random(shape) < 0.1] = -0.75
        tau = rng.uniform(0.05, 0.9) * penalty_value(V, penalty)
        P = project(V, tau, penalty)
        np.testing.assert_allclose(penalty_value(P, penalty), tau, rtol=1e-9)
        assert _threshold_of(V, P, penalty) > 0
        assert np.all(P * V >= 0)


def test_smooth_hinge_gradient_is_the_simplex_projection(rng):
    """The smoothed hinge's gradient is s (p - e_y), p the projection of the margins
    a = 1 - e_y + o - o_y onto the simplex: p >= 0, sum p = 1, p = (a - theta)_+ with
    one theta per row (ties and rows of every sign included)."""
    n, m = 60, 9
    O = rng.standard_normal((n, m)) * 3
    O[:, 3] = O[:, 5]   # ties
    O[:5] = 0.0
    codes = rng.integers(0, m, n)
    s = np.full(n, 1.0 / n)
    _, W = classifier_loss("smooth_hinge")(codes, O, s)
    rows = np.arange(n)
    P = W / s[:, None]
    P[rows, codes] += 1.0
    A = O + 1.0 - O[rows, codes][:, None]
    A[rows, codes] = 0.0
    assert np.all(P >= -1e-15)
    np.testing.assert_allclose(P.sum(axis=1), 1.0, rtol=1e-12)
    theta = (A - P)[rows, P.argmax(axis=1)]
    np.testing.assert_allclose(P, np.maximum(A - theta[:, None], 0), atol=1e-12)


def test_penalty_values_and_dual_norms():
    V = np.array([[3.0, -4.0], [0.0, 1.0]])
    assert penalty_value(V, "l1") == 8.0
    assert penalty_value(V, "l1/l2") == 6.0
    assert penalty_value(V, "l1/linf") == 5.0
    q = np.array([3.0, -4.0])
    assert (dual_norm(q, "l1"), dual_norm(q, "l1/l2"), dual_norm(q, "l1/linf")) == \
        (4.0, 5.0, 7.0)
    with pytest.raises(ValueError, match="unknown penalty"):
        penalty_value(V, "l2")


# --------------------------------------------------------------------------------------
# losses
# --------------------------------------------------------------------------------------


def _loss_cases(rng):
    n, m = 6, 4
    codes = rng.integers(0, m, n)
    Y = rng.choice([-1.0, 1.0], (n, m))
    Yr = rng.standard_normal((n, m))
    return [(classifier_loss(name), codes) for name in
            ("logistic", "smooth_hinge", "squared_hinge")] + [
        (regressor_loss("squared"), Yr), (regressor_loss("logistic"), Y)]


def test_loss_gradients_against_finite_differences(rng):
    s = rng.uniform(0.5, 1.5, 6)
    s /= s.sum()
    for loss, targets in _loss_cases(rng):
        O = rng.standard_normal((6, 4)) * 2
        value, W = loss(targets, O, s)
        eps = 1e-6
        numeric = np.zeros_like(O)
        for idx in np.ndindex(*O.shape):
            E = np.zeros_like(O)
            E[idx] = eps
            numeric[idx] = (loss(targets, O + E, s, False)[0]
                            - loss(targets, O - E, s, False)[0]) / (2 * eps)
        np.testing.assert_allclose(W, numeric, atol=1e-7, err_msg=loss.name)
        assert loss(targets, O, s, False)[0] == pytest.approx(value)


def test_loss_smoothness_bounds_the_hessian(rng):
    """The stated smoothness bounds the largest eigenvalue of one row's Hessian."""
    for loss, targets in _loss_cases(rng):
        worst = 0.0
        for _ in range(30):
            o = rng.standard_normal(4) * rng.uniform(0.1, 3)
            one = np.ones(1)
            eps = 1e-5
            Hs = np.zeros((4, 4))
            for c in range(4):
                e = np.zeros(4)
                e[c] = eps
                Hs[c] = (loss(targets[:1], (o + e)[None], one)[1][0]
                         - loss(targets[:1], (o - e)[None], one)[1][0]) / (2 * eps)
            worst = max(worst, np.linalg.eigvalsh(0.5 * (Hs + Hs.T))[-1])
        assert worst <= loss.smoothness(4) * (1 + 1e-4), loss.name


def test_smooth_hinge_is_zero_beyond_the_margin():
    """Zero once the true output leads every other by 2 (the smoothing's margin), above
    the hinge everywhere."""
    loss = classifier_loss("smooth_hinge")
    O = np.array([[3.0, 1.0, 0.5]])
    value, W = loss(np.array([0]), O, np.ones(1))
    assert value == pytest.approx(0.0) and np.allclose(W, 0.0)
    assert loss(np.array([0]), np.array([[3.0, 1.1, 0.5]]), np.ones(1))[0] > 0
    O = np.random.default_rng(0).standard_normal((50, 4)) * 2
    codes = np.arange(50) % 4
    for i in range(50):
        hinge = np.max(1.0 + O[i] - O[i, codes[i]] - (np.arange(4) == codes[i]))
        assert loss(codes[i:i + 1], O[i:i + 1], np.ones(1))[0] >= hinge - 1e-12


# --------------------------------------------------------------------------------------
# basis selection
# --------------------------------------------------------------------------------------


def _selection_problem(rng, n_outputs, kernel="pn", n=60, d=5):
    X = _sparse(rng, n, d, density=0.6)
    W = rng.standard_normal((n, n_outputs)) / n
    op = RowOperator(X, constant=True, kernel=kernel)
    gammas = np.stack([_dense_gamma(X, W[:, c], True, kernel) for c in range(n_outputs)])
    return op, W, gammas


def _criterion(h, gammas, penalty):
    """||q(h)||_p for the unit vector along h, gammas stacked (n_outputs, dim, dim)."""
    h = h / np.linalg.norm(h)
    return dual_norm(np.einsum("i,cij,j->c", h, gammas, h), penalty)


@pytest.mark.parametrize("kernel", ["pn", "fm"])
@pytest.mark.parametrize("penalty", PENALTIES)
def test_selection_reaches_the_best_of_random_restarts(penalty, kernel):
    rng = np.random.default_rng(7)
    for trial in range(2):
        op, W, gammas = _selection_problem(rng, 4, kernel)
        h, z, info = select_basis(op, W, penalty, rng, power_tol=1e-6, max_power_iter=500,
                                  refine_tol=1e-8, max_refine_iter=200)
        assert np.linalg.norm(h) == pytest.approx(1.0)
        mine = _criterion(h, gammas, penalty)
        assert info["value"] == pytest.approx(mine, rel=1e-6)
        np.testing.assert_allclose(z, _dense_sigma(op.X, h[None], True, kernel)[:, 0],
                                   atol=1e-12)
        best = 0.0
        for _ in range(15):
            res = minimize(lambda v: -_criterion(v, gammas, penalty),
                           rng.standard_normal(op.dim), method="L-BFGS-B")
            best = max(best, -res.fun)
        assert mine >= 0.95 * best, (trial, mine, best)


@pytest.mark.parametrize("kernel", ["pn", "fm"])
def test_one_output_l1_selects_the_dominant_eigenvector(kernel, rng):
    op, W, gammas = _selection_problem(rng, 1, kernel)
    h, _, info = select_basis(op, W, "l1", rng, power_tol=1e-8, max_power_iter=1000,
                              refine_tol=1e-6, max_refine_iter=50)
    values, vectors = np.linalg.eigh(gammas[0])
    top = np.argmax(np.abs(values))
    assert abs(h @ vectors[:, top]) == pytest.approx(1.0, abs=1e-6)
    assert info["value"] == pytest.approx(abs(values[top]), rel=1e-8)


def test_power_method_finds_every_output_eigenvector(rng):
    """All outputs iterated together, including a Gamma with eigenvalues +-lambda."""
    op, W, gammas = _selection_problem(rng, 3)
    Q, rho, n_iter, _ = dominant_eigenvectors(op, W, rng, 1e-9, 2000)
    assert n_iter < 200
    for c, G in enumerate(gammas):
        values = np.linalg.eigvalsh(G)
        for end, expected in ((c, values[-1]), (c + 3, values[0])):
            assert rho[end] == pytest.approx(expected, rel=1e-9)
            np.testing.assert_allclose(G @ Q[:, end], rho[end] * Q[:, end], atol=1e-6)


def test_refinement_with_one_output_keeps_the_power_method_answer(rng):
    op, W, gammas = _selection_problem(rng, 1)
    h1, _, info1 = select_basis(op, W, "l1", np.random.default_rng(0), power_tol=1e-8,
                                max_power_iter=1000, refine_tol=1e-8, max_refine_iter=50)
    for penalty in ("l1/l2", "l1/linf"):
        h, _, info = select_basis(op, W, penalty, np.random.default_rng(0),
                                  power_tol=1e-8, max_power_iter=1000, refine_tol=1e-8,
                                  max_refine_iter=50)
        assert abs(h @ h1) == pytest.approx(1.0, abs=1e-6)
        assert info["value"] == pytest.approx(info1["value"], rel=1e-6)


# --------------------------------------------------------------------------------------
# refits
# --------------------------------------------------------------------------------------


def _refit_setup(rng, loss, targets, n=80, t=5, penalty="l1/l2", tau=1.0):
    Z = rng.standard_normal((n, t)) ** 2
    s = np.full(n, 1.0 / n)
    features = Features(n, np.float64, s)
    for r in range(t):
        features.append(Z[:, r])
    c = targets.shape[1] if targets.ndim == 2 else int(targets.max()) + 1
    problem = Problem(loss, targets, s, c, penalty, tau, True)
    return Z, features, problem, c


@pytest.mark.parametrize("penalty", PENALTIES)
@pytest.mark.parametrize("name", ["logistic", "smooth_hinge", "squared_hinge"])
def test_output_refit_is_optimal(rng, penalty, name):
    """The refit's answer is a fixed point of the projected gradient step (optimality
    over the ball) with a zero intercept gradient."""
    codes = rng.integers(0, 3, 80)
    Z, features, problem, c = _refit_setup(rng, classifier_loss(name), codes,
                                           penalty=penalty)
    np.testing.assert_allclose(features.gram, Z.T @ Z / 80, rtol=1e-12)
    V, b, O, value, W, n_iter, _ = refit_output(problem, features, np.zeros((5, c)),
                                                np.zeros(c), tol=1e-12, max_iter=3000)
    assert penalty_value(V, penalty) <= problem.tau * (1 + 1e-9)
    np.testing.assert_allclose(O, Z @ V + b, atol=1e-12)
    # The gradients returned are those at the answer (the next selection uses them).
    np.testing.assert_allclose(W, problem(O)[1], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(W.sum(axis=0), 0.0, atol=1e-5)
    step = 0.1
    moved = project(V - step * (Z.T @ W), problem.tau, penalty)
    np.testing.assert_allclose(moved, V, atol=1e-5)
    # No point of a random sample of the ball does better.
    for _ in range(50):
        U = project(V + 0.05 * rng.standard_normal(V.shape), problem.tau, penalty)
        assert problem(Z @ U + b, False)[0] >= value - 1e-9


@pytest.mark.parametrize("tau", [1.0, 100.0])
def test_refit_does_not_stop_on_a_short_first_step(rng, tau):
    """A refit whose first kappa is far above the loss's curvature (carried over from
    another refit, or the smoothness constant on a confident model) takes a short first
    step with a small decrease; it must adapt kappa and go on, not stop there.  Fitting
    letter one basis vector at a time (warm_start) stalled at 88.6% validation accuracy
    this way."""
    codes = rng.integers(0, 3, 80)
    Z, features, problem, c = _refit_setup(rng, classifier_loss("logistic"), codes,
                                           tau=tau)
    zeros_V, zeros_b = np.zeros((5, c)), np.zeros(c)
    best = refit_output(problem, features, zeros_V, zeros_b, tol=1e-12, max_iter=3000)[3]
    start = problem(np.zeros((80, c)), False)[0]
    for curvature in (None, 1024.0 * problem.mu):
        V, b, O, value, W, n_iter, _ = refit_output(
            problem, features, zeros_V, zeros_b, tol=1e-3, max_iter=300,
            curvature=curvature)
        assert n_iter > 1
        assert value - best <= 0.05 * (start - best)


def test_squared_refit_with_a_loose_ball_is_least_squares(rng):
    Y = rng.standard_normal((80, 2))
    Z, features, problem, c = _refit_setup(rng, regressor_loss("squared"), Y, tau=1e6)
    V, b, *_ = refit_output(problem, features, np.zeros((5, 2)), np.zeros(2), tol=1e-14,
                            max_iter=50)
    A = np.hstack([Z, np.ones((80, 1))])
    coef = np.linalg.lstsq(A, Y, rcond=None)[0]
    np.testing.assert_allclose(V, coef[:5], rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(b, coef[5], rtol=1e-6, atol=1e-8)


# --------------------------------------------------------------------------------------
# estimators
# --------------------------------------------------------------------------------------


def _classification(rng, n=150, d=8, n_classes=3, dtype=np.float64):
    X = _sparse(rng, n, d, density=0.5, dtype=dtype)
    scores = _augmented(X, True) @ rng.standard_normal((d + 1, n_classes))
    scores += (_augmented(X, False) @ rng.standard_normal(d))[:, None] ** 2 * np.arange(n_classes)
    return X, np.argmax(scores, axis=1)


@pytest.mark.parametrize("refit", ["output", "full"])
@pytest.mark.parametrize("penalty", PENALTIES)
@pytest.mark.parametrize("kernel", ["pn", "fm"])
def test_objective_decreases_and_stays_in_the_ball(rng, kernel, penalty, refit):
    X, y = _classification(rng)
    est = MultiOutputPolynomialClassifier(kernel=kernel, penalty=penalty, refit=refit,
                                          tau=5.0, max_basis=6, tol=0,
                                          random_state=0).fit(X, y)
    history = est.history_
    assert est.n_iter_ == 6 == history["objective"].shape[0]
    assert np.all(np.diff(history["objective"]) <= 1e-12)
    assert np.all(history["penalty"] <= 5.0 * (1 + 1e-9))
    assert penalty_value(est.V_, penalty) <= 5.0 * (1 + 1e-9)
    assert np.all(np.linalg.norm(est.H_, axis=1) <= 1 + 1e-9)
    assert np.all(history["n_basis"] <= np.arange(1, 7))
    assert np.all(np.any(est.V_ != 0, axis=1))   # zero rows were dropped
    assert est.H_.shape == (history["n_basis"][-1], 9)
    assert est.score(X, y) > 0.7


@pytest.mark.parametrize("kernel", ["pn", "fm"])
def test_predictions_match_explicit_features(rng, kernel):
    X, y = _classification(rng)
    est = MultiOutputPolynomialClassifier(kernel=kernel, max_basis=5,
                                          random_state=0).fit(X, y)
    O = _dense_sigma(X, est.H_, True, kernel) @ est.V_ + est.intercept_
    np.testing.assert_allclose(est.decision_function(X), O, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(est.predict_proba(X).sum(axis=1), 1.0)
    np.testing.assert_array_equal(est.predict(X.toarray()), np.argmax(O, axis=1))
    np.testing.assert_allclose(np.exp(est.predict_log_proba(X)), est.predict_proba(X))
    plain = MultiOutputPolynomialClassifier(kernel=kernel, fit_linear=False,
                                            fit_intercept=False, max_basis=3,
                                            random_state=0).fit(X, y)
    assert plain.H_.shape[1] == 8 and np.all(plain.intercept_ == 0)
    np.testing.assert_allclose(plain.decision_function(X),
                               _dense_sigma(X, plain.H_, False, kernel) @ plain.V_,
                               rtol=1e-10, atol=1e-10)


def test_binary_classifier_has_two_outputs(rng):
    X, y = _classification(rng, n_classes=2)
    labels = np.array(["no", "yes"])[y]
    est = MultiOutputPolynomialClassifier(max_basis=4, random_state=0).fit(X, labels)
    assert est.V_.shape[1] == 2
    scores = est.decision_function(X)
    assert scores.shape == (150,)
    np.testing.assert_array_equal(est.predict(X), np.where(scores > 0, "yes", "no"))


@pytest.mark.parametrize("loss", ["smooth_hinge", "squared_hinge"])
def test_hinge_losses_fit_and_have_no_probabilities(rng, loss):
    X, y = _classification(rng)
    est = MultiOutputPolynomialClassifier(loss=loss, max_basis=6, random_state=0)
    est.fit(X, y)
    assert est.score(X, y) > 0.7
    assert not hasattr(est, "predict_proba")


def test_regressor_squared_multi_output(rng):
    X = rng.standard_normal((200, 5))
    Y = np.column_stack([X[:, 0] * X[:, 1], X[:, 1] * X[:, 2] + X[:, 3]])
    est = MultiOutputPolynomialRegressor(max_basis=15, tau=50.0, random_state=0).fit(X, Y)
    assert est.predict(X).shape == (200, 2)
    assert est.score(X, Y) > 0.95
    assert not hasattr(est, "decision_function") and not hasattr(est, "predict_proba")
    one = MultiOutputPolynomialRegressor(max_basis=5, random_state=0).fit(X, Y[:, 0])
    assert one.predict(X).shape == (200,) and one.n_outputs_ == 1


def test_regressor_binary_logistic_outputs(rng):
    """Binary logistic outputs (multi-label; the McRank reduction of ordinal targets)."""
    X = rng.standard_normal((300, 4))
    latent = X[:, 0] * X[:, 1] + 0.5 * X[:, 2]
    levels = np.array([-0.5, 0.0, 0.5])
    Y = np.where(latent[:, None] <= levels, 1.0, -1.0)   # Y_ic = +1 iff y_i <= c
    est = MultiOutputPolynomialRegressor(loss="logistic", penalty="l1/linf", kernel="fm",
                                         max_basis=10, tau=20.0,
                                         random_state=0).fit(X, Y)
    proba = est.predict_proba(X)
    assert proba.shape == (300, 3) and np.all((proba > 0) & (proba < 1))
    np.testing.assert_allclose(proba, 1 / (1 + np.exp(-est.decision_function(X))))
    assert np.mean(est.predict(X) == Y) > 0.85
    assert set(np.unique(est.predict(X))) <= {-1.0, 1.0}
    with pytest.raises(ValueError, match="-1 and \\+1"):
        clone(est).fit(X, (Y > 0).astype(float))


def test_sample_weight_equals_repeated_rows(rng):
    X, y = _classification(rng, n=60)
    weights = rng.integers(0, 3, 60)
    repeated = sp.csr_matrix(np.repeat(X.toarray(), weights, axis=0))
    params = dict(max_basis=4, random_state=0, tol=0)
    a = MultiOutputPolynomialClassifier(**params).fit(X, y, sample_weight=weights)
    b = MultiOutputPolynomialClassifier(**params).fit(repeated, np.repeat(y, weights))
    np.testing.assert_allclose(a.history_["objective"], b.history_["objective"],
                               rtol=1e-6)
    np.testing.assert_allclose(a.decision_function(X), b.decision_function(X),
                               rtol=1e-5, atol=1e-6)


def test_float32_follows_the_data(rng):
    X, y = _classification(rng, dtype=np.float32)
    est = MultiOutputPolynomialClassifier(max_basis=4, random_state=0).fit(X, y)
    assert est.H_.dtype == est.V_.dtype == est.intercept_.dtype == np.float32
    est64 = MultiOutputPolynomialClassifier(max_basis=4, random_state=0).fit(
        X.astype(np.float64), y)
    np.testing.assert_allclose(est.history_["objective"], est64.history_["objective"],
                               rtol=1e-2)


def test_validation_keeps_the_best_iteration(rng):
    X, y = _classification(rng, n=300)
    Xv, yv = X[200:], y[200:]
    est = MultiOutputPolynomialClassifier(max_basis=8, tol=0, random_state=0).fit(
        X[:200], y[:200], X_val=Xv, y_val=yv)
    acc = est.history_["validation_accuracy"]
    assert acc.shape == (est.n_iter_,)
    best = est.best_iteration_
    assert 0 <= best <= est.n_iter_
    if best > 0:
        assert acc[best - 1] == acc.max()
        assert est.V_.shape[0] == est.history_["n_basis"][best - 1]
        assert est.score(Xv, yv) == pytest.approx(acc[best - 1])
    reg = MultiOutputPolynomialRegressor(max_basis=5, random_state=0).fit(
        X[:200], y[:200].astype(float), X_val=Xv, y_val=yv.astype(float))
    losses = reg.history_["validation_loss"]
    if reg.best_iteration_:
        assert losses[reg.best_iteration_ - 1] == losses.min()


def test_warm_start_continues_the_path(rng):
    X, y = _classification(rng)
    params = dict(max_basis=3, tol=0, random_state=0)
    est = MultiOutputPolynomialClassifier(warm_start=True, **params).fit(X, y)
    first = est.history_["objective"].copy()
    est.fit(X, y)
    assert est.n_iter_ == 6
    np.testing.assert_array_equal(est.history_["objective"][:3], first)
    assert est.history_["objective"][-1] <= first[-1]
    est.set_params(kernel="pn", fit_linear=False)
    with pytest.raises(ValueError, match="warm_start=True"):
        est.fit(X, y)


def test_verbose_prints_progress(rng, capsys):
    X, y = _classification(rng, n=60)
    MultiOutputPolynomialClassifier(max_basis=2, tol=0, verbose=1,
                                    random_state=0).fit(X, y, X_val=X, y_val=y)
    out = capsys.readouterr().out
    assert "iteration    1" in out and "validation_accuracy" in out


@pytest.mark.parametrize("make", [
    lambda: MultiOutputPolynomialClassifier(penalty="l1/linf", kernel="fm", max_basis=4,
                                            random_state=0),
    lambda: MultiOutputPolynomialRegressor(loss="logistic", refit="full", max_basis=3,
                                           random_state=0),
], ids=["classifier", "regressor-logistic"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_save_load_round_trip(tmp_path, rng, make, dtype):
    X, y = _classification(rng, dtype=dtype)
    est = make()
    if isinstance(est, MultiOutputPolynomialRegressor):
        y = np.column_stack([np.where(y == c, 1.0, -1.0) for c in range(3)])
    est.fit(X, y, X_val=X[:40], y_val=y[:40])
    path = tmp_path / "model.npz"
    est.save(path)
    loaded = polylite.load(path)
    assert type(loaded) is type(est) and loaded.get_params() == est.get_params()
    for name in ("H_", "V_", "intercept_"):
        assert getattr(loaded, name).dtype == dtype
        np.testing.assert_array_equal(getattr(loaded, name), getattr(est, name))
    assert loaded.history_.keys() == est.history_.keys()
    for key in est.history_:
        np.testing.assert_array_equal(loaded.history_[key], est.history_[key])
    assert (loaded.n_iter_, loaded.best_iteration_) == (est.n_iter_, est.best_iteration_)
    np.testing.assert_array_equal(loaded.predict(X), est.predict(X))
    np.testing.assert_array_equal(loaded.predict_proba(X), est.predict_proba(X))


def test_load_rejects_corrupted_multioutput_files(tmp_path, rng):
    X, y = _classification(rng)
    est = MultiOutputPolynomialClassifier(max_basis=3, random_state=0).fit(X, y)
    path = tmp_path / "model.npz"
    est.save(path)
    with np.load(path) as archive:
        members = {k: archive[k] for k in archive.files}
    header = [k for k in members if k not in
              {"H", "V", "intercept"} and not k.startswith("history_")]

    def rewrite(**changes):
        bad = dict(members, **changes)
        out = tmp_path / "bad.npz"
        np.savez(out, **bad)
        return out

    with pytest.raises(polylite.ModelFileError):
        polylite.load(rewrite(H=members["H"] * 10))   # rows outside the unit ball
    with pytest.raises(polylite.ModelFileError):
        polylite.load(rewrite(V=members["V"][:, :2]))
    with pytest.raises(polylite.ModelFileError):
        polylite.load(rewrite(history_objective=members["history_objective"][:1]))
    assert header   # the JSON header is a member too


@pytest.mark.parametrize("Est", [MultiOutputPolynomialClassifier,
                                 MultiOutputPolynomialRegressor])
def test_bad_input_errors(Est, rng):
    X, y = _classification(rng, n=40)
    est = Est(max_basis=2)
    bad = X.toarray()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        est.fit(bad, y)
    bad[0, 0] = np.inf
    with pytest.raises(ValueError, match="infinity"):
        clone(est).fit(bad, y)
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        clone(est).fit(X, y[:-1])
    fitted = clone(est).fit(X, y)
    with pytest.raises(ValueError, match="features"):
        fitted.predict(X[:, :5])
    with pytest.raises(ValueError, match="X_val and y_val"):
        clone(est).fit(X, y, X_val=X)
    with pytest.raises(ValueError, match="features"):
        clone(est).fit(X, y, X_val=X[:, :5], y_val=y)
    for name, value in [("tau", 0.0), ("tau", -1.0), ("max_basis", 0), ("penalty", "l2"),
                        ("kernel", "rbf"), ("refit", "none"), ("loss", "hinge"),
                        ("n_jobs", 0), ("power_tol", -1.0), ("fit_linear", "yes")]:
        with pytest.raises(ValueError, match=name):
            clone(est).set_params(**{name: value}).fit(X, y)


def test_classifier_label_errors(rng):
    X, y = _classification(rng, n=40)
    with pytest.raises(ValueError, match="at least two classes"):
        MultiOutputPolynomialClassifier().fit(X, np.zeros(40))
    with pytest.raises(ValueError, match="Unknown label type"):
        MultiOutputPolynomialClassifier().fit(X, rng.standard_normal(40))
    with pytest.raises(ValueError, match="not in classes_"):
        MultiOutputPolynomialClassifier(max_basis=1).fit(X, y, X_val=X, y_val=y + 7)


def test_n_jobs_gives_the_same_model(rng, monkeypatch):
    from polylite import _validation
    monkeypatch.setattr(_validation, "MIN_ROWS_PER_THREAD", 50)   # threads on small data
    X, y = _classification(rng, n=200)
    a = MultiOutputPolynomialClassifier(max_basis=4, tol=0, random_state=0).fit(X, y)
    b = MultiOutputPolynomialClassifier(max_basis=4, tol=0, random_state=0, n_jobs=2)
    b.fit(X, y)
    np.testing.assert_allclose(a.V_, b.V_, rtol=1e-6, atol=1e-9)


# --------------------------------------------------------------------------------------
# scikit-learn compatibility
# --------------------------------------------------------------------------------------

#: check name -> reason; only checks that are known to fail, each with its reason.
EXPECTED_FAILED_CHECKS = {}


@parametrize_with_checks(
    [MultiOutputPolynomialClassifier(max_basis=3),
     MultiOutputPolynomialRegressor(max_basis=3),
     MultiOutputPolynomialRegressor(max_basis=2, kernel="fm", penalty="l1/linf")],
    expected_failed_checks=lambda estimator: EXPECTED_FAILED_CHECKS, xfail_strict=True)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)
