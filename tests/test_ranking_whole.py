"""The whole-data loss of the ranker (loss="ials"): its Gramian term and objective
against brute-force sums over every (query, item) pair, each coordinate step against
the exact minimiser of the objective, the ids-only model against a NumPy iALS, and the
ranker's features on it."""
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.pipeline import make_pipeline

from polylite import FactorizationMachineRanker, FieldEncoder, load
from polylite._engine.solvers import WholeDataDescent, _Fixed, _swap_slots
from polylite.recommend import recommend

from test_ranking import _clicks, _held_out_auc


# ---- a small problem and its brute-force objective ------------------------------------

def _problem(rng, n_queries=7, n_items=6, dq=9, di=5, k=3, density=0.5):
    """Query rows (an id, side features, a multi-hot set) on columns [0, dq), item rows
    (an id and side features) on [dq, dq + di + n_items), observed pairs with weights."""
    d = dq + n_items + di
    Q = np.zeros((n_queries, d))
    Q[np.arange(n_queries), np.arange(n_queries) % dq] = 1
    Q[:, :dq] += (rng.uniform(0.2, 1.0, (n_queries, dq)) *
                  (rng.random((n_queries, dq)) < 0.4))
    I = np.zeros((n_items, d))
    I[np.arange(n_items), dq + np.arange(n_items)] = 1
    side = rng.uniform(0.2, 1.0, (n_items, di)) * (rng.random((n_items, di)) < 0.5)
    I[:, dq + n_items:] = side
    observed = rng.random((n_queries, n_items)) < density
    observed[0, 0] = True
    cq, ci = np.nonzero(observed)
    weight = 1 + rng.uniform(0, 3, cq.shape[0])
    w = rng.normal(0, 0.3, d)
    P = rng.normal(0, 0.3, (d, k))
    item_columns = np.arange(dq, d)
    return (sp.csr_matrix(Q), sp.csr_matrix(I), cq.astype(np.int64), ci.astype(np.int64),
            weight, item_columns, w, P)


def _scores(Q, I, w, P):
    """Every (query, item) pair's FM score, from its expanded row."""
    Q, I = Q.toarray(), I.toarray()
    X = (Q[:, None, :] + I[None, :, :]).reshape(-1, Q.shape[1])
    XP = X @ P
    y = X @ w + 0.5 * ((XP ** 2).sum(1) - ((X ** 2) @ (P ** 2)).sum(1))
    return y.reshape(Q.shape[0], I.shape[0])


def _objective(Q, I, cq, ci, weight, w, P, alpha0, alpha, beta, n, scale=None):
    """The whole-data objective summed over every pair of queries x items (``scale``:
    each column's factor of its penalties, None: 1)."""
    Y = _scores(Q, I, w, P)
    W = np.full(Y.shape, alpha0)
    T = np.zeros(Y.shape)
    W[cq, ci] = weight
    T[cq, ci] = 1
    scale = np.ones(w.shape[0]) if scale is None else scale
    return (W * (Y - T) ** 2).sum() / (2 * n) + 0.5 * (
        alpha * (scale * w ** 2).sum() + beta * (scale[:, None] * P ** 2).sum())


def _frequency_scales(Q, I, cq, ci, weight, alpha0, exponent):
    """Each column's factor of the penalties, computed from the definition: F_j = sum
    over its side's rows of x^2 (the row's observed weight + alpha0 * the other side's
    rows), (F_j / the mean over the columns some row has)^exponent."""
    Qd, Id = Q.toarray(), I.toarray()
    query_weight = np.bincount(cq, weight, Qd.shape[0]) + alpha0 * Id.shape[0]
    item_weight = np.bincount(ci, weight, Id.shape[0]) + alpha0 * Qd.shape[0]
    F = (Qd ** 2).T @ query_weight + (Id ** 2).T @ item_weight  # (disjoint columns)
    scale = np.ones(F.shape[0])
    had = F > 0
    scale[had] = (F[had] / F[had].mean()) ** exponent
    return scale


def _solver(problem, alpha0=0.3, alpha=0.01, beta=0.02, n=10.0, fit_linear=True,
            threads=1, frequency_exponent=0.0, sweeps=1, exact_sides=False):
    Q, I, cq, ci, weight, item_columns, w, P = problem
    return WholeDataDescent(Q, I, cq, ci, weight, item_columns, n, alpha0, alpha, beta,
                            fit_linear, threads, P.shape[1],
                            frequency_exponent=frequency_exponent, sweeps=sweeps,
                            exact_sides=exact_sides)


def _epoch_objectives(solver, w, P, epochs, objective):
    """The brute-force ``objective`` (w, P) after each of ``epochs`` epochs of
    ``solver`` (penalties alpha 0.01, beta 0.02), each checked against the solver's
    own, from the caches its steps keep up to date."""
    values = []
    for _ in range(epochs):
        solver.epoch(w, P)
        values.append(objective(w, P))
        penalty = 0.5 * (0.01 * (w ** 2).sum() + 0.02 * (P ** 2).sum())
        np.testing.assert_allclose(solver.data_term() + penalty, values[-1], rtol=1e-10)
    return values


def test_the_gramian_term_is_the_sum_over_every_pair(rng):
    problem = _problem(rng)
    Q, I, cq, ci, weight, item_columns, w, P = problem
    solver = _solver(problem)
    solver.refresh(w, P)
    Y = _scores(Q, I, w, P)
    np.testing.assert_allclose(solver.implicit_sum(), (Y ** 2).sum(), rtol=1e-12)
    np.testing.assert_allclose(solver.data_term(),
                               _objective(Q, I, cq, ci, weight, w, P, 0.3, 0, 0, 10.0),
                               rtol=1e-12)


@pytest.mark.parametrize("fit_linear, exponent, sweeps",
                         [(True, 0.0, 1), (False, 0.0, 1), (True, 1.0, 1), (True, 0.5, 1),
                          (True, 0.0, 2), (False, 1.0, 3)])
def test_every_coordinate_step_minimises_the_objective_exactly(fit_linear, exponent,
                                                                sweeps, rng):
    """One coordinate at a time (by the epoch's step limit), each step is the
    minimiser of the objective along its coordinate; with ``sweeps``, every coordinate
    of the query side steps that many times before the item side's first step."""
    problem = _problem(rng)
    Q, I, cq, ci, weight, item_columns, w0, P0 = problem
    settings = dict(alpha0=0.3, alpha=0.01, beta=0.02, n=10.0)
    if not fit_linear:
        w0 = np.zeros_like(w0)
    solver = _solver(problem, fit_linear=fit_linear, frequency_exponent=exponent,
                     sweeps=sweeps, **settings)
    scale = _frequency_scales(Q, I, cq, ci, weight, 0.3, exponent)
    np.testing.assert_allclose(solver.penalty_scale, scale, rtol=1e-12)
    if exponent:
        assert np.ptp(scale) > 0.1  # (the test can fail)
    settings["scale"] = scale

    def after(limit):
        w, P = w0.copy(), P0.copy()
        solver.epoch(w, P, limit=limit)
        return w, P

    def f(w, P):
        return _objective(Q, I, cq, ci, weight, w, P, **settings)

    d, k = P0.shape
    total = sweeps * ((d if fit_linear else 0) + d * k)
    assert solver.epoch(w0.copy(), P0.copy()) == total  # each coordinate steps sweeps times
    query_side = np.setdiff1d(np.arange(d), item_columns)
    query_steps = sweeps * query_side.size * (k + 1 if fit_linear else k)
    w, P = after(query_steps)
    item = np.r_[w[item_columns] - w0[item_columns], (P - P0)[item_columns].ravel()]
    assert not item.any()  # the item side has not stepped yet
    if sweeps > 1:  # ... and the query side's last sweep still moved it
        last = after(query_steps - query_steps // sweeps)
        assert np.abs(P - last[1]).max() > 1e-8
    previous = after(0)
    moved = 0
    for t in range(1, total + 1):
        w, P = after(t)
        changed = np.flatnonzero(np.r_[w != previous[0], (P != previous[1]).ravel()])
        assert changed.size <= 1
        # The objective along the coordinate stepped is a parabola: its minimiser, from
        # three points, is where the step went.
        if changed.size:
            moved += 1
            c = changed[0]
            theta = np.r_[w, P.ravel()]
            eps = 1e-3

            def along(value):
                x = theta.copy()
                x[c] = value
                return f(x[:d], x[d:].reshape(d, k))

            fp, f0, fm = along(theta[c] + eps), along(theta[c]), along(theta[c] - eps)
            minimiser = theta[c] - eps * (fp - fm) / (2 * (fp - 2 * f0 + fm))
            assert abs(minimiser - theta[c]) < 1e-6 * max(1, abs(theta[c]))
            assert f0 <= f(*previous) + 1e-12
        previous = (w, P)
    assert moved > 0.9 * total


@pytest.mark.parametrize("exponent", [0.0, 1.0])
def test_the_objective_never_increases_and_the_caches_follow(exponent, rng):
    problem = _problem(rng, n_queries=12, n_items=9)
    Q, I, cq, ci, weight, item_columns, w, P = problem
    solver = _solver(problem, frequency_exponent=exponent)
    scale = _frequency_scales(Q, I, cq, ci, weight, 0.3, exponent)
    values = [_objective(Q, I, cq, ci, weight, w, P, 0.3, 0.01, 0.02, 10.0, scale)]
    for _ in range(8):
        solver.epoch(w, P)
        values.append(_objective(Q, I, cq, ci, weight, w, P, 0.3, 0.01, 0.02, 10.0,
                                 scale))
        # The pairs' predictions and Gramians kept up to date by the steps.
        penalty = 0.5 * (0.01 * (scale * w ** 2).sum()
                         + 0.02 * (scale[:, None] * P ** 2).sum())
        np.testing.assert_allclose(solver.data_term() + penalty, values[-1], rtol=1e-10)
    assert np.all(np.diff(values) <= 1e-12 * values[0])
    assert values[-1] < 0.9 * values[0]


def test_threads_give_the_same_steps(rng):
    problem = _problem(rng, n_queries=40, n_items=30)
    fits = []
    for threads in (1, 2):
        w, P = problem[6].copy(), problem[7].copy()
        _solver(problem, threads=threads).epoch(w, P)
        fits.append((w, P))
    np.testing.assert_array_equal(fits[0][0], fits[1][0])
    np.testing.assert_array_equal(fits[0][1], fits[1][1])


# ---- iALS: the ids-only special case --------------------------------------------------

def _ials(R, C, X, Y, lam, alpha0, iterations, user_lam=None, item_lam=None):
    """Hu, Koren and Volinsky's alternating least squares on the loss
    sum_observed C (1 - x_u.y_i)^2 + alpha0 sum_unobserved (x_u.y_i)^2
    + lam (|X|^2 + |Y|^2); with ``user_lam`` and ``item_lam``, each row's own lam
    (iALS++'s frequency-scaled penalties)."""
    k = X.shape[1]
    user_lam = np.full(X.shape[0], lam) if user_lam is None else user_lam
    item_lam = np.full(Y.shape[0], lam) if item_lam is None else item_lam

    def solve(A, B, Cm, lams):
        out = np.empty_like(A)
        G = alpha0 * B.T @ B
        for u in range(A.shape[0]):
            obs = np.flatnonzero(Cm[u] > 0)
            Bo = B[obs]
            M = G + (Bo * (Cm[u, obs] - alpha0)[:, None]).T @ Bo + lams[u] * np.eye(k)
            out[u] = np.linalg.solve(M, Bo.T @ Cm[u, obs])
        return out

    for _ in range(iterations):
        X = solve(X, Y, C, user_lam)
        Y = solve(Y, X, C.T, item_lam)
    return X, Y


def _ials_loss(R, C, X, Y, lam, alpha0, user_lam=None, item_lam=None):
    S = X @ Y.T
    W = np.where(R > 0, C, alpha0)
    user_lam = np.full(X.shape[0], lam) if user_lam is None else user_lam
    item_lam = np.full(Y.shape[0], lam) if item_lam is None else item_lam
    return (W * (R - S) ** 2).sum() + (user_lam * (X ** 2).sum(1)).sum() + (
        item_lam * (Y ** 2).sum(1)).sum()


def _ids_problem(rng, n_users=15, n_items=12, confidence=2.0):
    """(R: the users' positives, X: a row of one-hot user and item ids per positive,
    C: iALS's confidences 1 + confidence of the positives)."""
    R = (rng.random((n_users, n_items)) < 0.3).astype(float)
    R[np.arange(n_users), np.arange(n_users) % n_items] = 1
    R[np.arange(n_items) % n_users, np.arange(n_items)] = 1
    users, items = np.nonzero(R)
    n = users.shape[0]
    X = sp.csr_matrix((np.ones(2 * n), (np.repeat(np.arange(n), 2),
                                        np.c_[users, n_users + items].ravel())),
                      shape=(n, n_users + n_items))
    return R, X, np.where(R > 0, 1 + confidence, 0.0)


def test_ids_only_is_ials_with_the_penalty_over_the_positives(rng):
    R, X, C = _ids_problem(rng)
    (n_users, n_items), n, k = R.shape, X.shape[0], 3
    confidence, alpha0, beta = 2.0, 0.5, 0.01
    lam = n * beta  # polylite's penalty is per positive
    U, V = _ials(R, C, rng.normal(0, 0.1, (n_users, k)), rng.normal(0, 0.1, (n_items, k)),
                 lam, alpha0, 300)
    est = FactorizationMachineRanker(
        n_components=k, loss="ials", alpha0=alpha0, confidence=confidence, beta=beta,
        fit_linear=False, item_columns=(n_users, n_users + n_items), max_iter=1,
        random_state=0).fit(X)
    # Start from iALS's fixed point: an epoch of coordinate descent does not move it,
    # and the two objectives agree.
    P = np.r_[U, V]
    est.P_[...] = P.reshape(est.P_.shape)
    est.set_params(warm_start=True).fit(X)
    np.testing.assert_allclose(est.P_.reshape(P.shape), P, atol=1e-7)
    np.testing.assert_allclose(2 * n * est.loss_curve_[-1],
                               _ials_loss(R, C, U, V, lam, alpha0), rtol=1e-9)
    # From a random start, coordinate descent reaches the objective iALS reaches.
    cd = FactorizationMachineRanker(**{**est.get_params(), "warm_start": False,
                                       "max_iter": 300, "init_scale": 0.1}).fit(X)
    assert 2 * n * cd.loss_curve_[-1] <= _ials_loss(R, C, U, V, lam, alpha0) * (1 + 1e-3)


def test_frequency_scaled_ids_only_is_ials_plus_plus(rng):
    """frequency_exponent=1, ids only: each user's penalty lam (sum_i C_ui + alpha0
    n_items), each item's likewise (Rendle et al. 2022), lam = N beta / mean F."""
    R, X, C = _ids_problem(rng)
    (n_users, n_items), n, k = R.shape, X.shape[0], 3
    confidence, alpha0, beta = 2.0, 0.5, 0.01
    F_users = C.sum(1) + alpha0 * n_items
    F_items = C.sum(0) + alpha0 * n_users
    lam = n * beta / np.r_[F_users, F_items].mean()
    U, V = _ials(R, C, rng.normal(0, 0.1, (n_users, k)), rng.normal(0, 0.1, (n_items, k)),
                 lam, alpha0, 300, lam * F_users, lam * F_items)
    est = FactorizationMachineRanker(
        n_components=k, loss="ials", alpha0=alpha0, confidence=confidence, beta=beta,
        frequency_exponent=1.0, fit_linear=False,
        item_columns=(n_users, n_users + n_items), max_iter=1, random_state=0).fit(X)
    P = np.r_[U, V]
    est.P_[...] = P.reshape(est.P_.shape)
    est.set_params(warm_start=True).fit(X)
    np.testing.assert_allclose(est.P_.reshape(P.shape), P, atol=1e-7)
    np.testing.assert_allclose(
        2 * n * est.loss_curve_[-1],
        _ials_loss(R, C, U, V, lam, alpha0, lam * F_users, lam * F_items), rtol=1e-9)
    # (the scaled penalties move the fixed point: plain iALS's is elsewhere)
    plain = _ials(R, C, U, V, n * beta, alpha0, 50)
    assert np.abs(np.r_[plain[0], plain[1]] - P).max() > 1e-3


def test_frequency_exponent_is_for_the_whole_data_loss():
    with pytest.raises(ValueError, match="frequency_exponent is used by loss='ials'"):
        FactorizationMachineRanker(frequency_exponent=1.0, item_columns=(2, 4)).fit(
            sp.csr_matrix(np.eye(4)))


def test_side_sweeps_is_for_the_whole_data_loss_and_a_positive_integer():
    X = sp.csr_matrix(np.eye(4))
    with pytest.raises(ValueError, match="side_sweeps is used by loss='ials'"):
        FactorizationMachineRanker(side_sweeps=2, item_columns=(2, 4)).fit(X)
    for bad in (0, 1.5):
        with pytest.raises(ValueError, match="side_sweeps"):
            FactorizationMachineRanker(loss="ials", side_sweeps=bad,
                                       item_columns=(2, 4)).fit(X)


def test_two_side_sweeps_fit_ids_as_an_ials_iteration_does(rng):
    """Ids only, each side's problem given the other is one least-squares problem per
    row: more sweeps per epoch bring an epoch's objective towards that of an iALS
    iteration (each side solved exactly) from the same start."""
    R, X, C = _ids_problem(rng, n_users=30, n_items=20)
    (n_users, n_items), n, k = R.shape, X.shape[0], 4
    alpha0, beta = 0.5, 0.01
    params = dict(n_components=k, loss="ials", alpha0=alpha0, confidence=2.0, beta=beta,
                  fit_linear=False, item_columns=(n_users, n_users + n_items),
                  max_iter=1, init_scale=0.3, random_state=0)
    # The start: the factors after one epoch of a fit (any start would do).
    P0 = FactorizationMachineRanker(**params).fit(X).P_.reshape(-1, k).copy()
    ials = _ials_loss(R, C, *_ials(R, C, P0[:n_users], P0[n_users:], n * beta, alpha0, 1),
                      n * beta, alpha0)
    losses = []
    for sweeps in (1, 2, 8):
        est = FactorizationMachineRanker(**{**params, "side_sweeps": sweeps,
                                            "warm_start": True}).fit(X)
        est.P_[...] = P0.reshape(est.P_.shape)
        est.fit(X)  # one epoch from P0
        losses.append(2 * n * est.loss_curve_[-1])
    assert losses[0] > losses[1] > losses[2]
    assert abs(losses[2] - ials) < 1e-3 * ials < losses[0] - ials


# ---- side_solver="als": a column's k factors at once ------------------------------------

@pytest.mark.parametrize("fit_linear, exponent", [(False, 0.0), (True, 0.0), (True, 1.0)])
def test_als_steps_of_a_one_hot_side_are_exact_minimisers(fit_linear, exponent, rng):
    """Items with one nonzero each (their ids) and queries with several: with exact
    sides, the queries step by coordinates and each item's k factors at once, so after
    an epoch every item factor is at the minimiser of the objective along it (the
    objective is quadratic in it), and the objective has gone down."""
    problem = _problem(rng, n_queries=10, n_items=8, di=0)
    Q, I, cq, ci, weight, item_columns, w0, P0 = problem
    if not fit_linear:
        w0 = np.zeros_like(w0)
    settings = dict(alpha0=0.3, alpha=0.01, beta=0.02, n=10.0)
    solver = _solver(problem, fit_linear=fit_linear, frequency_exponent=exponent,
                     exact_sides=True, **settings)
    assert (solver.query.exact, solver.item.exact) == (False, True)
    settings["scale"] = _frequency_scales(Q, I, cq, ci, weight, 0.3, exponent)
    w, P = w0.copy(), P0.copy()
    d, k = P.shape
    assert solver.epoch(w, P) == (d if fit_linear else 0) + d * k

    def f(w, P):
        return _objective(Q, I, cq, ci, weight, w, P, **settings)

    assert f(w, P) < f(w0, P0)
    eps = 1e-3
    for j in np.flatnonzero(np.asarray(I.sum(0)).ravel()):
        for s in range(k):
            def along(value):
                moved = P.copy()
                moved[j, s] = value
                return f(w, moved)

            fp, f0, fm = along(P[j, s] + eps), along(P[j, s]), along(P[j, s] - eps)
            minimiser = P[j, s] - eps * (fp - fm) / (2 * (fp - 2 * f0 + fm))
            assert abs(minimiser - P[j, s]) < 1e-6 * max(1, abs(P[j, s]))
    # The query side's factors were not at their minimiser before their steps: the
    # check can fail.
    assert np.abs(P - P0)[item_columns].max() > 1e-3


def test_als_sides_and_threads_keep_the_objective_going_down(rng):
    problem = _problem(rng, n_queries=30, n_items=20, di=0)
    Q, I, cq, ci, weight, item_columns, w0, P0 = problem
    fits = []
    for threads in (1, 2):
        w, P = w0.copy(), P0.copy()
        solver = _solver(problem, threads=threads, exact_sides=True)
        values = _epoch_objectives(solver, w, P, 5, lambda w, P: _objective(
            Q, I, cq, ci, weight, w, P, 0.3, 0.01, 0.02, 10.0))
        assert np.all(np.diff(values) <= 1e-12 * values[0])
        fits.append((w, P))
    np.testing.assert_array_equal(fits[0][0], fits[1][0])
    np.testing.assert_array_equal(fits[0][1], fits[1][1])


def test_sides_of_several_nonzeros_per_row_step_by_coordinates_either_way(rng):
    problem = _problem(rng)
    fits = []
    for exact in (False, True):
        w, P = problem[6].copy(), problem[7].copy()
        solver = _solver(problem, exact_sides=exact)
        assert not (solver.query.exact or solver.item.exact)
        solver.epoch(w, P)
        fits.append((w, P))
    np.testing.assert_array_equal(fits[0][1], fits[1][1])


@pytest.mark.parametrize("exponent", [0.0, 1.0])
def test_an_als_epoch_on_ids_is_an_ials_iteration(exponent, rng):
    """Ids only: side_solver="als" solves each user's, then each item's, least-squares
    problem exactly, as iALS does (iALS++'s penalties with frequency_exponent=1)."""
    R, X, C = _ids_problem(rng, n_users=30, n_items=20)
    (n_users, n_items), n, k = R.shape, X.shape[0], 4
    alpha0, beta = 0.5, 0.01
    params = dict(n_components=k, loss="ials", alpha0=alpha0, confidence=2.0, beta=beta,
                  fit_linear=False, item_columns=(n_users, n_users + n_items),
                  frequency_exponent=exponent, side_solver="als", max_iter=1,
                  init_scale=0.3, random_state=0)
    est = FactorizationMachineRanker(**params).fit(X)
    P0 = est.P_.reshape(-1, k).copy()
    F_users = C.sum(1) + alpha0 * n_items
    F_items = C.sum(0) + alpha0 * n_users
    mean = np.r_[F_users, F_items].mean()
    user_lam, item_lam = (n * beta * (F_users / mean) ** exponent,
                          n * beta * (F_items / mean) ** exponent)
    for iterations in (1, 3):
        U, V = _ials(R, C, P0[:n_users], P0[n_users:], None, alpha0, iterations,
                     user_lam, item_lam)
        fit = FactorizationMachineRanker(**{**params, "max_iter": iterations,
                                            "warm_start": True}).fit(X)
        fit.P_[...] = P0.reshape(fit.P_.shape)
        fit.fit(X)
        np.testing.assert_allclose(fit.P_.reshape(-1, k), np.r_[U, V], atol=1e-10)
        np.testing.assert_allclose(
            2 * n * fit.loss_curve_[-1],
            _ials_loss(R, C, U, V, None, alpha0, user_lam, item_lam), rtol=1e-9)


def test_side_solver_is_for_the_whole_data_loss_and_a_choice():
    X = sp.csr_matrix(np.eye(4))
    with pytest.raises(ValueError, match="side_solver is used by loss='ials'"):
        FactorizationMachineRanker(side_solver="als", item_columns=(2, 4)).fit(X)
    with pytest.raises(ValueError, match="side_solver"):
        FactorizationMachineRanker(loss="ials", side_solver="exact",
                                   item_columns=(2, 4)).fit(X)


def test_block_sweep_refuses_a_side_whose_rows_hold_several_columns(rng):
    from polylite._engine import _cd_whole
    problem = _problem(rng)
    w, P = problem[6].copy(), problem[7].copy()
    solver = _solver(problem)
    solver.refresh(w, P)
    fixed = _Fixed(solver.item.U, np.ascontiguousarray(_swap_slots(solver.G_item)))
    with pytest.raises(ValueError, match="several of the side's columns"):
        _cd_whole.block_sweep(solver.query, fixed, solver.yhat, solver.weight, P,
                              solver.settings + (-1,))


# ---- the ranker's features ------------------------------------------------------------

def test_a_whole_data_fit_ranks_the_users_next_items_first():
    table, items, affinity = _clicks()
    model = make_pipeline(
        FieldEncoder(item_features={"genre": "numeric"}, output="relational"),
        FactorizationMachineRanker(n_components=4, loss="ials", max_iter=15,
                                   beta=1e-3, random_state=0))
    model.fit(table, fieldencoder__items=items)
    assert _held_out_auc(model, table, affinity, 40) > 0.8
    curve = model[-1].loss_curve_
    assert np.all(np.diff(curve) <= 1e-12 * curve[0])
    assert model[-1].solver_ == "cd"


def test_relational_and_csr_positives_give_the_same_whole_data_fit():
    # The same catalogue both ways: every item is some positive's (the sum over every
    # pair runs over the relational table's items, and over the CSR positives' items).
    table, items, _ = _clicks()
    first = {"user_id": np.arange(60), "item_id": np.arange(60) % 40}
    table = {k: np.concatenate([first[k], table[k]]) for k in table}
    enc = FieldEncoder(item_features={"genre": "numeric"}).fit(table, items=items)
    X = enc.transform(table)
    X_rel = enc.set_params(output="relational").transform(table)
    item_columns = (enc.fields_[1].start, enc.fields_[2].stop)
    params = dict(n_components=3, max_iter=3, random_state=0, loss="ials")
    a = FactorizationMachineRanker(**params).fit(X_rel)
    b = FactorizationMachineRanker(item_columns=item_columns, **params).fit(X)
    np.testing.assert_allclose(a.P_, b.P_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(a.w_, b.w_, rtol=1e-9, atol=1e-12)


def test_whole_data_recommend_save_load_float32_and_threads(tmp_path):
    table, items, _ = _clicks(n_users=300, per_user=10)
    fits = []
    for jobs in (1, 2):
        model = make_pipeline(
            FieldEncoder(item_features={"genre": "numeric"}, output="relational",
                         dtype=np.float32),
            FactorizationMachineRanker(n_components=4, loss="ials", max_iter=4,
                                       random_state=0, n_jobs=jobs))
        fits.append(model.fit(table, fieldencoder__items=items))
    np.testing.assert_array_equal(fits[0][-1].P_, fits[1][-1].P_)
    model = fits[0]
    ranker = model[-1]
    assert ranker.P_.dtype == np.float32
    top, _ = recommend(model, np.arange(300), n=5, exclude=table)
    for u in range(0, 300, 37):
        assert not set(top[u]) & set(table["item_id"][table["user_id"] == u])
    ranker.save(tmp_path / "r.npz")
    loaded = load(tmp_path / "r.npz")
    X = model[0].transform(table)
    np.testing.assert_array_equal(loaded.predict(X), ranker.predict(X))
    assert loaded.get_params() == ranker.get_params()


def test_whole_data_early_stopping_and_partial_fit():
    table, _, _ = _clicks(n_users=200)
    est = FactorizationMachineRanker(n_components=4, loss="ials", max_iter=40,
                                     early_stopping=True, n_iter_no_change=2,
                                     random_state=0)
    model = make_pipeline(FieldEncoder(output="relational"), est).fit(table)
    scores = est.validation_scores_
    assert len(scores) == est.n_iter_ and 0.5 < max(scores) <= 1
    X = model[0].transform(table)
    # The best epoch's model is kept: its AUC is the best validation AUC.
    partial = FactorizationMachineRanker(n_components=4, loss="ials", random_state=0)
    for _ in range(6):
        partial.partial_fit(X)
    assert partial.n_iter_ == 6 and len(partial.loss_curve_) == 6
    assert np.all(np.diff(partial.loss_curve_) <= 1e-12 * partial.loss_curve_[0])
    assert partial.score(X) > 0.8


def test_sample_weights_are_counts_of_the_confidence():
    # Two positive rows of one pair weigh as one row of weight 2.
    table, _, _ = _clicks(n_users=50)
    enc = FieldEncoder(output="relational").fit(table)
    X = enc.transform(table)
    doubled = {k: np.r_[v, v[:1]] for k, v in table.items()}
    X2 = enc.transform(doubled)
    params = dict(n_components=3, loss="ials", confidence=2.0, max_iter=3, random_state=0)
    weights = np.ones(X.shape[0])
    weights[0] = 2
    a = FactorizationMachineRanker(**params).fit(X2)
    b = FactorizationMachineRanker(**params).fit(X, sample_weight=weights)
    np.testing.assert_allclose(a.P_, b.P_, rtol=1e-9, atol=1e-12)


def test_whole_data_refuses_models_that_do_not_split():
    table, _, _ = _clicks(n_users=20)
    X = FieldEncoder(output="relational").fit_transform(table)
    for params in (dict(degree=3), dict(kernel="all-subsets")):
        with pytest.raises(ValueError, match="degree-2"):
            FactorizationMachineRanker(loss="ials", **params).fit(X)
    with pytest.raises(ValueError, match="alpha0"):
        FactorizationMachineRanker(loss="ials", alpha0=-1).fit(X)
    with pytest.raises(ValueError, match="confidence"):
        FactorizationMachineRanker(loss="ials", confidence=-1).fit(X)


def test_a_zero_weight_positive_is_an_unobserved_pair():
    table, _, _ = _clicks(n_users=60)
    enc = FieldEncoder(output="relational").fit(table)
    # A positive whose user and item have other positives: without it, the queries and
    # the catalogue are the same.
    users, items = table["user_id"], table["item_id"]
    row = next(r for r in range(len(users))
               if (users == users[r]).sum() > 1 and (items == items[r]).sum() > 1 and
               ((users == users[r]) & (items == items[r])).sum() == 1)
    keep = np.arange(len(users)) != row
    params = dict(n_components=3, loss="ials", confidence=1.0, max_iter=3,
                  random_state=0)
    weights = keep.astype(float)
    a = FactorizationMachineRanker(**params).fit(enc.transform(table),
                                                 sample_weight=weights)
    b = FactorizationMachineRanker(**params).fit(
        enc.transform({k: v[keep] for k, v in table.items()}))
    np.testing.assert_allclose(a.P_, b.P_, rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(a.w_, b.w_, rtol=1e-10, atol=1e-13)


def test_partial_fit_continues_a_loaded_whole_data_model(tmp_path):
    table, _, _ = _clicks(n_users=80)
    X = FieldEncoder(output="relational").fit_transform(table)
    params = dict(n_components=3, loss="ials", beta=1e-3, random_state=0)
    fitted = FactorizationMachineRanker(max_iter=2, **params).fit(X)
    fitted.save(tmp_path / "m.npz")
    loaded = load(tmp_path / "m.npz").partial_fit(X)
    more = FactorizationMachineRanker(max_iter=3, **params).fit(X)
    # One more epoch of coordinate descent from the saved model is the third epoch.
    np.testing.assert_allclose(loaded.P_, more.P_, rtol=1e-12, atol=1e-14)


def test_held_out_and_label_0_pairs_are_left_out_of_the_loss():
    # Pairs the fit does not train on but the data shows (rows of label 0, held-out
    # positives) weigh 0: neither observed nor unobserved.
    table, _, _ = _clicks(n_users=30)
    X = FieldEncoder(output="relational").fit_transform(table)
    users, items = np.asarray(X.parts[0].index), np.asarray(X.parts[1].index)
    y = np.ones(X.shape[0], dtype=int)
    y[::10] = 0
    est = FactorizationMachineRanker(loss="ials", confidence=2.0)
    est._check_params()
    training, catalogue, _ = est._positives(est._check_positives(X, reset=True), y,
                                            None, whole=True)
    data = catalogue.whole
    # The queries are the training users (one block: its index), in order.
    query_users = np.unique(users[y == 1])
    trained = set(zip(users[y == 1].tolist(), items[y == 1].tolist()))
    expected = {(int(np.searchsorted(query_users, u)), i)
                for u, i in zip(users[::10].tolist(), items[::10].tolist())
                if u in set(query_users.tolist()) and (u, i) not in trained}
    zero = data.weight == 0
    assert expected and set(zip(data.pair_query[zero].tolist(),
                                data.pair_item[zero].tolist())) == expected
    observed = set(zip(query_users[data.pair_query[~zero]].tolist(),
                       data.pair_item[~zero].tolist()))
    assert observed == trained and np.all(data.weight[~zero] >= 3)
    # The fit runs, and its objective never increases.
    est = FactorizationMachineRanker(loss="ials", max_iter=4, random_state=0).fit(X, y)
    assert np.all(np.diff(est.loss_curve_) <= 1e-12 * est.loss_curve_[0])


# ---- the items' own columns: an observed pair scored without its item's own column ----

def _rated_problem(rng, n_queries=8, n_items=6, di=3, k=3, density=0.5, zero=True):
    """Queries: an id and the set of their observed items (1/sqrt(n) each, on columns
    [n_queries, n_queries + n_items)); items: an id and side features; some pairs of
    weight 0 and some rated items not observed."""
    observed = rng.random((n_queries, n_items)) < density
    observed[0, 0] = True
    rated = observed | (rng.random((n_queries, n_items)) < 0.1)
    dq = n_queries + n_items
    d = dq + n_items + di
    Q = np.zeros((n_queries, d))
    Q[np.arange(n_queries), np.arange(n_queries)] = 1
    Q[:, n_queries:dq] = rated / np.sqrt(np.maximum(rated.sum(1, keepdims=True), 1))
    I = np.zeros((n_items, d))
    I[np.arange(n_items), dq + np.arange(n_items)] = 1
    I[:, dq + n_items:] = (rng.uniform(0.2, 1.0, (n_items, di)) *
                           (rng.random((n_items, di)) < 0.5))
    cq, ci = np.nonzero(observed)
    weight = 1 + rng.uniform(0, 3, cq.shape[0])
    if zero:
        weight[::5] = 0
    w = rng.normal(0, 0.3, d)
    P = rng.normal(0, 0.3, (d, k))
    own = n_queries + np.arange(n_items)
    return (sp.csr_matrix(Q), sp.csr_matrix(I), cq.astype(np.int64), ci.astype(np.int64),
            weight, np.arange(dq, d), w, P, own)


def _own_objective(problem, w, P, alpha0, alpha, beta, n):
    """The objective with every observed pair (weight > 0) scored without its item's
    own column (brute force: the item left out of the query's row)."""
    Q, I, cq, ci, weight, item_columns, _, _, own = problem
    Y = _scores(Q, I, w, P)
    Qd, Id = Q.toarray(), I.toarray()
    for c, i, wt in zip(cq, ci, weight):
        if wt > 0:
            q = Qd[c].copy()
            q[own[i]] = 0
            Y[c, i] = _scores(sp.csr_matrix(q[None]), sp.csr_matrix(Id[i][None]), w, P)[0, 0]
    W = np.full(Y.shape, alpha0)
    T = np.zeros(Y.shape)
    W[cq, ci] = weight
    T[cq, ci] = 1
    # the query's own terms keep the item's own column (a constant of the query)
    Qfull = _scores(Q, sp.csr_matrix(np.zeros((1, Q.shape[1]))), w, P)[:, 0]
    for c, i, wt in zip(cq, ci, weight):
        if wt > 0:
            q = Qd[c].copy()
            q[own[i]] = 0
            Y[c, i] += Qfull[c] - _scores(sp.csr_matrix(q[None]),
                                          sp.csr_matrix(np.zeros((1, Q.shape[1]))),
                                          w, P)[0, 0]
    return (W * (Y - T) ** 2).sum() / (2 * n) + 0.5 * (alpha * (w ** 2).sum() +
                                                        beta * (P ** 2).sum())


def _own_solver(problem, fit_linear=True, threads=1, alpha0=0.3, alpha=0.01, beta=0.02,
                n=10.0):
    Q, I, cq, ci, weight, item_columns, w, P, own = problem
    return WholeDataDescent(Q, I, cq, ci, weight, item_columns, n, alpha0, alpha, beta,
                            fit_linear, threads, P.shape[1], own_columns=own)


def test_own_columns_objective_against_brute_force(rng):
    problem = _rated_problem(rng)
    w, P = problem[6], problem[7]
    solver = _own_solver(problem)
    solver.refresh(w, P)
    np.testing.assert_allclose(solver.data_term(),
                               _own_objective(problem, w, P, 0.3, 0, 0, 10.0), rtol=1e-12)


@pytest.mark.parametrize("fit_linear", [True, False])
def test_own_columns_steps_are_exact_minimisers(fit_linear, rng):
    problem = _rated_problem(rng)
    w0, P0 = problem[6], problem[7]
    if not fit_linear:
        w0 = np.zeros_like(w0)
    solver = _own_solver(problem, fit_linear=fit_linear)
    settings = dict(alpha0=0.3, alpha=0.01, beta=0.02, n=10.0)

    def f(w, P):
        return _own_objective(problem, w, P, **settings)

    d, k = P0.shape
    total = (d if fit_linear else 0) + d * k
    w, P = w0.copy(), P0.copy()
    previous = (w.copy(), P.copy())
    moved = 0
    for t in range(1, total + 1):
        w, P = w0.copy(), P0.copy()
        solver.epoch(w, P, limit=t)
        changed = np.flatnonzero(np.r_[w != previous[0], (P != previous[1]).ravel()])
        assert changed.size <= 1
        if changed.size:
            moved += 1
            c = changed[0]
            theta = np.r_[w, P.ravel()]
            eps = 1e-3

            def along(value):
                x = theta.copy()
                x[c] = value
                return f(x[:d], x[d:].reshape(d, k))

            fp, f0, fm = along(theta[c] + eps), along(theta[c]), along(theta[c] - eps)
            minimiser = theta[c] - eps * (fp - fm) / (2 * (fp - 2 * f0 + fm))
            assert abs(minimiser - theta[c]) < 1e-6 * max(1, abs(theta[c]))
            assert f0 <= f(*previous) + 1e-12
        previous = (w, P)
    assert moved > 0.9 * total


def test_own_columns_objective_never_increases_and_threads_agree(rng):
    problem = _rated_problem(rng, n_queries=30, n_items=20, density=0.3)
    settings = (0.3, 0.01, 0.02, 10.0)
    fits = []
    for threads in (1, 2):
        w, P = problem[6].copy(), problem[7].copy()
        solver = _own_solver(problem, threads=threads)
        values = [_own_objective(problem, w, P, *settings)] + _epoch_objectives(
            solver, w, P, 4, lambda w, P: _own_objective(problem, w, P, *settings))
        assert np.all(np.diff(values) <= 1e-12 * values[0])
        fits.append((w, P))
    np.testing.assert_array_equal(fits[0][1], fits[1][1])


def test_a_ranker_with_rated_items_leaves_each_pairs_item_out():
    table, items, affinity = _clicks()
    enc = FieldEncoder(item_features={"genre": "numeric"}, implicit="user",
                       output="relational").fit(table, items=items)
    rated, = [(f.start, f.stop) for f in enc.fields_ if f.kind == "implicit"]
    X = enc.transform(table)
    params = dict(n_components=4, loss="ials", max_iter=10, beta=1e-3, random_state=0)
    own = FactorizationMachineRanker(rated_items=rated, **params).fit(X)
    plain = FactorizationMachineRanker(**params).fit(X)
    assert not np.allclose(own.P_, plain.P_)
    curve = own.loss_curve_
    assert np.all(np.diff(curve) <= 1e-12 * curve[0])
    # Each item's own column: the rated set's, in the order of the item ids.
    start, stop = rated
    assert own._own_columns(own._positives(X, None, None, whole=True)[1]).tolist() == \
        list(range(start, stop))
    for bad, message in [((0, 3), "overlaps the item part"),
                         ((start - 5, stop), "columns, more than"),
                         ((start, start), "must be a pair"), ("ab", "must be a pair")]:
        if bad == (0, 3):
            bad = (X.block_columns()[1][0], X.block_columns()[1][0] + 3)
        with pytest.raises(ValueError, match=message):
            FactorizationMachineRanker(rated_items=bad, **params).fit(X)
    with pytest.raises(ValueError, match="loss='ials' only"):
        FactorizationMachineRanker(rated_items=rated, loss="warp").fit(X)
