"""Relational input (``polylite.relational``): the matrix itself, prediction, coordinate
descent and Gibbs sweeps in the table domain against the same on the expanded CSR rows,
the estimators, FieldEncoder's relational output, and clear errors on bad input."""
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.model_selection import train_test_split

from _reference import reference_loss
from polylite import (BayesianFactorizationMachineClassifier,
                      BayesianFactorizationMachineRegressor,
                      FactorizationMachineClassifier, FactorizationMachineRegressor,
                      PolynomialNetworkRegressor, _validation, kernels,
                      load)
from polylite.bayes._sampler import GibbsPrior
from polylite._engine import layouts
from polylite._engine import _cd, _losses, solvers as _solvers
from polylite.polynomial._base import _OutputParams
from polylite._engine.problem import Problem
from polylite.preprocessing import FieldEncoder
from polylite.relational import RelationalMatrix, RelationBlock

# Short fits: convergence is not what these tests are about.
pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def _relational(n=300, seed=0, dtype=np.float64, direct_between=True):
    """Interactions of users (one-hot id, side features, a sparse 'implicit' set) and
    items (id, features), with direct columns between the two blocks (or after them)."""
    rng = np.random.RandomState(seed)
    n_users, n_items = 25, 18
    users = sp.hstack([sp.identity(n_users),
                       sp.random(n_users, 4, density=0.5, random_state=rng),
                       sp.random(n_users, 12, density=0.3, random_state=rng)]).tocsr()
    items = sp.hstack([sp.identity(n_items),
                       sp.random(n_items, 5, density=0.5, random_state=rng)]).tocsr()
    direct = sp.random(n, 4, density=0.4, random_state=rng, format="csr")
    user_block = RelationBlock(rng.randint(n_users, size=n), users.astype(dtype))
    item_block = RelationBlock(rng.randint(n_items, size=n), items.astype(dtype))
    parts = ([user_block, direct.astype(dtype), item_block] if direct_between
             else [user_block, item_block, direct.astype(dtype)])
    return RelationalMatrix(parts), rng


# ---- the matrix -----------------------------------------------------------------------

def test_to_csr_concatenates_the_direct_part_and_the_table_rows():
    X, rng = _relational()
    dense = X.to_csr().toarray()
    user, direct, item = X.parts
    expected = np.hstack([user.table.toarray()[user.index], direct.toarray(),
                          item.table.toarray()[item.index]])
    np.testing.assert_array_equal(dense, expected)
    assert X.shape == dense.shape
    assert X.expanded_nnz == X.to_csr().nnz
    assert X.nnz == user.table.nnz + direct.nnz + item.table.nnz
    assert X.block_columns() == [(0, user.table.shape[1]),
                                 (X.shape[1] - item.table.shape[1], X.shape[1])]


def test_rows_are_selected_with_the_tables_shared():
    X, _ = _relational()
    rows = np.array([5, 0, 7, 7])
    for key in (rows, (rows, slice(None)), (rows, Ellipsis)):
        np.testing.assert_array_equal(X[key].to_csr().toarray(), X.to_csr()[rows].toarray())
    assert X[2:5].shape == (3, X.shape[1])
    mask = np.zeros(X.shape[0], bool)
    mask[[1, 4]] = True
    np.testing.assert_array_equal(X[mask].to_csr().toarray(),
                                  X.to_csr()[[1, 4]].toarray())
    assert X[rows].blocks[0].table is X.blocks[0].table
    X_train, X_test, y_train, _ = train_test_split(X, np.arange(X.shape[0]), test_size=0.25,
                                                   random_state=0)
    np.testing.assert_array_equal(X_train.to_csr().toarray(),
                                  X.to_csr()[y_train].toarray())
    with pytest.raises(TypeError, match="selects rows only"):
        X[:, 3]
    assert X[-1].shape == (1, X.shape[1]) and X[[]].shape == (0, X.shape[1])
    for key in (np.array([[0, 1], [2, 3]]), True, None, [0.5], mask[:-1]):
        with pytest.raises(IndexError):
            X[key]


def test_numpy_and_other_estimators_are_told_to_expand_it():
    X, _ = _relational()
    with pytest.raises(TypeError, match=r"X.to_csr\(\)"):
        np.asarray(X)
    from sklearn.linear_model import Ridge
    with pytest.raises(TypeError, match="factorization machines"):
        Ridge().fit(X, np.zeros(X.shape[0]))


def test_dtypes_follow_the_parts_or_the_argument():
    X, _ = _relational(dtype=np.float32)
    assert X.dtype == np.float32 and X.to_csr().dtype == np.float32
    assert X.astype(np.float64).dtype == np.float64
    ones = RelationalMatrix([RelationBlock([0, 1], sp.identity(2, dtype=np.int64,
                                                               format="csr"))])
    assert ones.dtype == np.float64


@pytest.mark.parametrize("make, message", [
    (lambda t: [RelationBlock([0, 3], t)], "out of range for a table of 3 rows"),
    (lambda t: [RelationBlock([0, -1], t)], "negative table row"),
    (lambda t: [RelationBlock([0.0, 1.0], t)], "integer table rows"),
    (lambda t: [RelationBlock([True, False], t)], "integer table rows"),
    (lambda t: [RelationBlock([[0, 1]], t)], "must be 1-D"),
    (lambda t: [RelationBlock(np.array([0, 2**63], np.uint64), t)],
     "table row 9223372036854775808, out of range"),
    (lambda t: [RelationBlock([0, 1, 2], t), sp.csr_matrix(np.ones((2, 2)))],
     "gives 2 interactions, the parts before it 3"),
    (lambda t: [RelationBlock([0, 1], t.astype(np.float32)), sp.csr_matrix(np.ones((2, 2)))],
     "different dtypes"),
    (lambda t: [RelationBlock([], sp.csr_matrix((0, 3)))], "has no rows"),
    (lambda t: [], "at least one part"),
    (lambda t: [RelationBlock([0, 1], t.astype(np.complex128))],
     "table of block 0 .* complex128: real numbers are needed"),
    (lambda t: [RelationBlock([0, 1], sp.csr_matrix(np.array([[np.nan, 1], [0, 1]])))],
     "NaN"),
])
def test_bad_parts_get_errors_that_name_them(make, message):
    table = sp.identity(3, format="csr")
    with pytest.raises(ValueError, match=message):
        RelationalMatrix(make(table))


def test_a_single_part_outside_a_list_is_refused():
    with pytest.raises(TypeError, match="list of parts"):
        RelationalMatrix(RelationBlock([0], sp.identity(1, format="csr")))


# ---- prediction ---------------------------------------------------------------------------

@pytest.mark.parametrize("dtype, rtol", [(np.float64, 1e-12), (np.float32, 1e-4)])
@pytest.mark.parametrize("variant", [([2], "anova", 0), ([2, 3, 4], "anova", 0),
                                     ([3], "anova", 2), (None, "all-subsets", 0)],
                         ids=["m2", "m2-4", "m3-shared", "subsets"])
def test_predict_equals_the_expanded_rows(variant, dtype, rtol):
    degrees, kernel, n_dummy = variant
    X, rng = _relational(dtype=dtype)
    d = X.shape[1]
    P = (0.5 * rng.randn(1 if degrees is None else len(degrees), d, 3)).astype(dtype)
    w, gamma = rng.randn(d).astype(dtype), rng.randn(n_dummy, 3).astype(dtype)
    got = kernels.predict(X, P, degrees=degrees, kernel=kernel, intercept=0.3, w=w,
                          gamma=gamma)
    want = kernels.predict(X.to_csr(), P, degrees=degrees, kernel=kernel, intercept=0.3,
                           w=w, gamma=gamma)
    assert got.dtype == dtype
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * np.abs(want).max())
    threaded = kernels.predict(X, P, degrees=degrees, kernel=kernel, intercept=0.3, w=w,
                               gamma=gamma, n_jobs=2)
    np.testing.assert_array_equal(threaded, got)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("variant", [([3], "anova", 0), ([2, 3, 4], "anova", 0),
                                     ([3], "anova", 2), (None, "all-subsets", 0)],
                         ids=["m3", "m2-4", "m3-shared", "subsets"])
def test_predict_threads_running_at_once(variant, dtype, monkeypatch):
    """Threads that share the interactions (and the table rows) give the same bits as
    one: each has workspaces of its own, on cache lines of their own."""
    monkeypatch.setattr(_validation, "MIN_ROWS_PER_THREAD", 10)   # the tables too
    degrees, kernel, n_dummy = variant
    X, rng = _relational(n=6000, dtype=dtype)
    d = X.shape[1]
    P = (0.5 * rng.randn(1 if degrees is None else len(degrees), d, 3)).astype(dtype)
    w, gamma = rng.randn(d).astype(dtype), rng.randn(n_dummy, 3).astype(dtype)
    kw = dict(degrees=degrees, kernel=kernel, intercept=0.3, w=w, gamma=gamma)
    one = kernels.predict(X, P, **kw)
    for n_jobs in (2, 3):
        np.testing.assert_array_equal(kernels.predict(X, P, n_jobs=n_jobs, **kw), one)


def test_predict_refuses_the_polynomial_kernel():
    X, _ = _relational()
    with pytest.raises(ValueError, match="anova and all-subsets"):
        kernels.predict(X, np.ones((1, X.shape[1], 2)), degrees=[2], kernel="polynomial")


# ---- coordinate descent and Gibbs sweeps against the expanded rows ----------------------

def _epochs(X, y, sw, degrees, kernel, n_dummy, loss, epochs, n_jobs=None, prior=None,
            dtype=np.float64):
    rng = np.random.RandomState(0)
    n, d = X.shape
    k = 3
    params = _OutputParams(np.array([0.1], dtype), (0.1 * rng.randn(d)).astype(dtype),
                           (0.3 * rng.randn(len(degrees), d, k)).astype(dtype),
                           (0.3 * rng.randn(n_dummy, k)).astype(dtype), np.ones(k, dtype))
    data = _solvers.cd_data(X, sw, kernel, n_jobs)
    problem = Problem(y, sw, kernels.KERNELS[kernel], np.asarray(degrees, np.intc),
                        _losses.loss_code(loss), 0.01, 0.02, True, True)
    y_pred = kernels.predict(X, params.P, degrees=None if kernel == "all-subsets"
                             else degrees, kernel=kernel, intercept=params.intercept[0],
                             w=params.w, gamma=params.gamma).astype(np.float64)
    for _ in range(epochs):
        _cd.cd_epoch(data, problem, params, y_pred, prior=prior, thread_min_entries=1)
    return params, y_pred


VARIANTS = [([2], "anova", 0), ([2, 3], "anova", 0), ([3], "anova", 2), ([4], "anova", 0),
            ([0], "all-subsets", 0)]
VARIANT_IDS = ["m2", "m2-3", "m3-shared", "m4", "subsets"]


@pytest.mark.parametrize("n_jobs", [None, 2])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("direct_between", [True, False])
@pytest.mark.parametrize("variant", VARIANTS, ids=VARIANT_IDS)
def test_cd_epochs_equal_those_on_the_expanded_rows(variant, direct_between, weighted,
                                                    n_jobs, monkeypatch):
    """Squared loss: each block's steps are the expanded rows' steps, in the same order
    (column order), from sums kept per table row; so are the fits, to rounding."""
    monkeypatch.setattr(_validation, "MIN_ROWS_PER_THREAD", 10)  # threads on few rows
    degrees, kernel, n_dummy = variant
    X, rng = _relational(direct_between=direct_between)
    n = X.shape[0]
    y = rng.randn(n)
    sw = rng.uniform(0.2, 2.0, n) if weighted else np.ones(n)
    sw /= sw.sum()
    got, got_pred = _epochs(X, y, sw, degrees, kernel, n_dummy, "squared", 3, n_jobs)
    want, want_pred = _epochs(X.to_csr(), y, sw, degrees, kernel, n_dummy, "squared", 3,
                              n_jobs)
    for name in ("intercept", "w", "P", "gamma"):
        np.testing.assert_allclose(getattr(got, name), getattr(want, name), rtol=1e-11,
                                   atol=1e-12, err_msg=name)
    np.testing.assert_allclose(got_pred, want_pred, rtol=1e-11, atol=1e-11)
    # The predictions carried through the table passes are the model's.
    exact = kernels.predict(X, got.P, degrees=None if kernel == "all-subsets" else degrees,
                            kernel=kernel, intercept=got.intercept[0], w=got.w,
                            gamma=got.gamma)
    np.testing.assert_allclose(got_pred, exact, rtol=1e-11, atol=1e-11)


def test_cd_epochs_in_float32_equal_those_on_the_expanded_rows():
    X, rng = _relational(dtype=np.float32)
    n = X.shape[0]
    y, sw = rng.randn(n), np.full(n, 1.0 / n)
    got, _ = _epochs(X, y, sw, [2, 3], "anova", 0, "squared", 3, dtype=np.float32)
    want, _ = _epochs(X.to_csr(), y, sw, [2, 3], "anova", 0, "squared", 3, dtype=np.float32)
    assert got.P.dtype == np.float32
    np.testing.assert_allclose(got.P, want.P, rtol=1e-3, atol=1e-4)


def _objective(loss, X, params, degrees, kernel, y, sw, alpha=0.01, beta=0.02):
    pred = kernels.predict(X, params.P, degrees=None if kernel == "all-subsets" else degrees,
                           kernel=kernel, intercept=params.intercept[0], w=params.w,
                           gamma=params.gamma)
    return (np.sum(sw * reference_loss(loss, y, pred)) + 0.5 * alpha * np.sum(params.w ** 2)
            + 0.5 * beta * (np.sum(params.P ** 2) + np.sum(params.gamma ** 2)))


@pytest.mark.parametrize("loss", ["logistic", "squared_hinge"])
@pytest.mark.parametrize("variant", VARIANTS, ids=VARIANT_IDS)
def test_cd_epochs_on_other_losses_never_increase_the_objective(variant, loss):
    """Other losses: a block's pass minimises the loss's local quadratic model, and is
    kept only where the objective did not increase (else taken again on a quadratic
    bound of the loss that touches it at the pass's start), so the objective never
    increases."""
    degrees, kernel, n_dummy = variant
    X, rng = _relational()
    n = X.shape[0]
    y = rng.choice([-1.0, 1.0], size=n)
    sw = rng.uniform(0.2, 2.0, n)
    sw /= sw.sum()
    history = []
    for epochs in range(6):
        params, y_pred = _epochs(X, y, sw, degrees, kernel, n_dummy, loss, epochs)
        history.append(_objective(loss, X, params, degrees, kernel, y, sw))
    assert np.all(np.diff(history) <= 1e-12 * np.abs(history[:-1])), history
    assert history[-1] < 0.9 * history[0]


@pytest.mark.parametrize("loss, variant, seed", [
    ("logistic", VARIANTS[1], 0), ("logistic", VARIANTS[4], 2),
    ("squared_hinge", VARIANTS[3], 1), ("squared_hinge", VARIANTS[1], 2)])
def test_passes_that_would_increase_the_objective_are_taken_again(loss, variant, seed):
    """From far off (large initial parameters, random labels) some passes on the local
    model would increase the objective: they are undone and taken again on the upper
    bound (counted in table_checks), the objective still never increases, and the
    predictions carried through the passes stay the model's."""
    degrees, kernel, n_dummy = variant
    X, rng = _relational(seed=seed)
    n, d = X.shape
    y = rng.choice([-1.0, 1.0], size=n)
    sw = np.full(n, 1.0 / n)
    init = np.random.RandomState(0)
    params = _OutputParams(np.array([0.0]), init.randn(d), init.randn(len(degrees), d, 3),
                           init.randn(n_dummy, 3), np.ones(3))
    data = _solvers.cd_data(X, sw, kernel, None)
    problem = Problem(y, sw, kernels.KERNELS[kernel], np.asarray(degrees, np.intc),
                      _losses.loss_code(loss), 1e-3, 1e-3, True, True)

    def predict():
        return kernels.predict(X, params.P, degrees=None if kernel == "all-subsets"
                               else degrees, kernel=kernel, intercept=params.intercept[0],
                               w=params.w, gamma=params.gamma)

    y_pred = predict()
    checks = np.zeros(len(_cd.TABLE_CHECKS), dtype=np.int64)
    history = [_objective(loss, X, params, degrees, kernel, y, sw, 1e-3, 1e-3)]
    for _ in range(6):
        _cd.cd_epoch(data, problem, params, y_pred, table_checks=checks)
        history.append(_objective(loss, X, params, degrees, kernel, y, sw, 1e-3, 1e-3))
    redone = dict(zip(_cd.TABLE_CHECKS, checks))["redone"]
    assert redone > 0, checks
    assert np.all(np.diff(history) <= 1e-12 * np.abs(history[:-1])), history
    np.testing.assert_allclose(y_pred, predict(), rtol=1e-9, atol=1e-9)


def _classifier_objectives(X, y, loss, degree, seed, epochs):
    objectives = []
    clf = FactorizationMachineClassifier(solver="cd", loss=loss, degree=degree,
                                         n_components=4, max_iter=epochs, tol=0,
                                         random_state=seed)
    clf._epoch_callback = lambda report: objectives.append(report.objective)
    clf.fit(X, y)
    return np.array(objectives)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("degree", [2, 3])
@pytest.mark.parametrize("loss", ["logistic", "squared_hinge"])
def test_classifier_objective_keeps_pace_with_the_expanded_rows(loss, degree, seed):
    """Coordinate descent on relational input reaches, epoch by epoch, the training
    objective of the same fit on the expanded rows within 5% (recommender rows with
    both implicit sets), and never increases it.  (A pass on a quadratic upper bound of
    the loss instead of its local model fell 10-28% behind by epoch 10 here.)"""
    from polylite.datasets import make_recommender
    X, target = make_recommender(3000, 150, 80, 2, implicit="both", output="relational",
                                 popularity_exponent=0.5, random_state=seed)
    y = (target > np.median(target)).astype(int)
    relational = _classifier_objectives(X, y, loss, degree, seed, 10)
    expanded = _classifier_objectives(X.to_csr(), y, loss, degree, seed, 10)
    assert np.all(relational <= 1.05 * expanded), relational / expanded
    assert np.all(np.diff(relational) <= 1e-12 * relational[:-1]), relational


@pytest.mark.parametrize("variant", VARIANTS[:3], ids=VARIANT_IDS[:3])
def test_gibbs_sweeps_equal_those_on_the_expanded_rows(variant):
    degrees, kernel, n_dummy = variant
    X, rng = _relational()
    n, d = X.shape
    groups = rng.randint(3, size=d).astype(np.intp)
    unit = 1.0 / (2.0 * n)
    prior = GibbsPrior(groups, rng.rand(3) * unit, rng.randn(3),
                       rng.rand(len(degrees), 3, 3) * unit, rng.randn(len(degrees), 3, 3),
                       rng.rand(3) * unit, rng.randn(3), unit, 12345)
    y, sw = rng.randn(n), np.full(n, 1.0 / n)
    got, got_pred = _epochs(X, y, sw, degrees, kernel, n_dummy, "squared", 3, prior=prior)
    want, want_pred = _epochs(X.to_csr(), y, sw, degrees, kernel, n_dummy, "squared", 3,
                              prior=prior)
    for name in ("intercept", "w", "P", "gamma"):
        np.testing.assert_allclose(getattr(got, name), getattr(want, name), rtol=1e-9,
                                   atol=1e-10, err_msg=name)
    np.testing.assert_allclose(got_pred, want_pred, rtol=1e-9, atol=1e-10)


# ---- the estimators ---------------------------------------------------------------------

def _targets(X, rng):
    Xc = X.to_csr()
    return np.asarray(Xc @ rng.randn(X.shape[1])).ravel() + 0.1 * rng.randn(X.shape[0])


@pytest.mark.parametrize("params", [dict(degree=2), dict(degree=3),
                                    dict(degree=3, lower_degrees="shared"),
                                    dict(kernel="all-subsets")],
                         ids=["m2", "m3", "m3-shared", "subsets"])
def test_regressor_fits_equal_those_on_the_expanded_rows(params, tmp_path):
    X, rng = _relational()
    y = _targets(X, rng)
    kw = dict(n_components=3, solver="cd", max_iter=8, tol=0, random_state=0, **params)
    rel = FactorizationMachineRegressor(**kw).fit(X, y)
    csr = FactorizationMachineRegressor(**kw).fit(X.to_csr(), y)
    assert rel.n_iter_ == csr.n_iter_ == 8
    np.testing.assert_allclose(rel.P_, csr.P_, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(rel.w_, csr.w_, rtol=1e-9, atol=1e-10)
    # predict takes either form, and so does a saved and loaded model.
    np.testing.assert_allclose(rel.predict(X), csr.predict(X.to_csr()), rtol=1e-9,
                               atol=1e-9)
    np.testing.assert_allclose(rel.predict(X.to_csr()), rel.predict(X), rtol=1e-12,
                               atol=1e-12)
    rel.save(tmp_path / "model.npz")
    np.testing.assert_array_equal(load(tmp_path / "model.npz").predict(X), rel.predict(X))
    assert rel.score(X, y) > 0.5


@pytest.mark.parametrize("variant", [([2], "anova", 0), ([2, 3], "anova", 0),
                                     ([3], "anova", 2), ([0], "all-subsets", 0)],
                         ids=["m2", "m2-3", "m3-shared", "subsets"])
@pytest.mark.parametrize("loss", ["squared", "logistic", "squared_hinge"])
def test_gradient_pass_equals_the_gradient_of_the_expanded_rows(variant, loss):
    """A gradient pass (cd_epoch with ``gradient``: the sums of every coordinate's step,
    no step taken) gives the data term's gradient, from sums over table rows on
    relational input: what L-BFGS uses."""
    from polylite._engine import _sgd
    from polylite._engine.cd_data import Gradient
    degrees, kernel, n_dummy = variant
    X, rng = _relational()
    n, d = X.shape
    y = rng.randn(n) if loss == "squared" else rng.choice([-1.0, 1.0], size=n)
    sw = rng.uniform(0.2, 2.0, n)
    sw /= sw.sum()
    k = 3
    params = _OutputParams(np.array([0.1]), 0.1 * rng.randn(d),
                           0.3 * rng.randn(len(degrees), d, k), 0.3 * rng.randn(n_dummy, k),
                           np.ones(k))
    Xc = X.to_csr()
    want = {name: np.zeros(getattr(params, name).shape)
            for name in ("intercept", "w", "P", "gamma", "lam")}
    _sgd.objective_gradient(Xc, Problem(y, sw, kernels.KERNELS[kernel],
                                        np.asarray(degrees, np.intc),
                                        _losses.loss_code(loss), 0.0, 0.0, True, True),
                            params, want, 1)
    before = params.P.copy()
    for rows in (X, Xc):
        got = Gradient(np.zeros(1), np.zeros(d), np.zeros(params.P.shape),
                       np.zeros(params.gamma.shape))
        y_pred = kernels.predict(rows, params.P, degrees=None if kernel == "all-subsets"
                                 else degrees, kernel=kernel, intercept=params.intercept[0],
                                 w=params.w, gamma=params.gamma).astype(np.float64)
        problem = Problem(y, sw, kernels.KERNELS[kernel], np.asarray(degrees, np.intc),
                            _losses.loss_code(loss), 0.0, 0.0, True, True)
        _cd.cd_epoch(_solvers.cd_data(rows, sw, kernel, None), problem, params, y_pred,
                     gradient=got)
        np.testing.assert_array_equal(params.P, before)  # no step taken
        for name in ("intercept", "w", "P", "gamma"):
            np.testing.assert_allclose(getattr(got, name), want[name], rtol=1e-10,
                                       atol=1e-13, err_msg=name)


def test_auto_solver_takes_coordinate_descent_and_the_others_work_too():
    X, rng = _relational()
    y = _targets(X, rng)
    est = FactorizationMachineRegressor(n_components=2, random_state=0, max_iter=3)
    assert est.fit(X, y).solver_ == "cd"
    # Dense expanded rows get L-BFGS, as their CSR form does: the same model either way.
    dense = RelationalMatrix([RelationBlock(np.arange(X.shape[0]) % 5,
                                            sp.csr_matrix(rng.rand(5, 4)))])
    rel = FactorizationMachineRegressor(n_components=2, random_state=0).fit(dense, y)
    csr = FactorizationMachineRegressor(n_components=2, random_state=0).fit(dense.to_csr(),
                                                                           y)
    assert rel.solver_ == csr.solver_ == "lbfgs"
    np.testing.assert_allclose(rel.predict(dense), csr.predict(dense.to_csr()), rtol=1e-8,
                               atol=1e-10)
    for solver in ("sgd", "adagrad", "lbfgs"):
        kw = dict(n_components=2, random_state=0, max_iter=3, solver=solver)
        rel = FactorizationMachineRegressor(**kw).fit(X, y)
        csr = FactorizationMachineRegressor(**kw).fit(X.to_csr(), y)
        np.testing.assert_allclose(rel.P_, csr.P_, rtol=1e-9, atol=1e-10, err_msg=solver)
    sgd = FactorizationMachineRegressor(n_components=2, solver="sgd", random_state=0)
    sgd.partial_fit(X[:100], y[:100]).partial_fit(X[100:], y[100:])
    assert np.all(np.isfinite(sgd.predict(X)))


@pytest.mark.parametrize("solver, batch_size", [("sgd", 1), ("adagrad", 1), ("sgd", 7)])
def test_stochastic_passes_over_expanded_chunks_equal_those_on_the_whole(
        solver, batch_size, monkeypatch):
    """The stochastic solvers expand a relational input's rows a chunk at a time (whole
    mini-batches), in the pass's shuffled order: the same steps as on the expanded
    matrix."""
    monkeypatch.setattr(layouts, "RELATIONAL_CHUNK_ROWS", 50)
    X, rng = _relational()
    y = np.where(_targets(X, rng) > 0, 1, -1)
    kw = dict(n_components=2, random_state=0, max_iter=4, solver=solver,
              batch_size=batch_size, degree=3)
    rel = FactorizationMachineClassifier(**kw).fit(X, y)
    csr = FactorizationMachineClassifier(**kw).fit(X.to_csr(), y)
    np.testing.assert_allclose(rel.P_, csr.P_, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(rel.w_, csr.w_, rtol=1e-9, atol=1e-11)


def test_classifier_fits_and_predicts_relational_input():
    X, rng = _relational()
    score = _targets(X, rng)
    y = np.where(score > np.median(score), "high", "low")
    clf = FactorizationMachineClassifier(n_components=3, solver="cd", max_iter=20,
                                         random_state=0).fit(X, y)
    assert clf.score(X, y) > 0.8
    np.testing.assert_allclose(clf.predict_proba(X), clf.predict_proba(X.to_csr()),
                               rtol=1e-10)
    # Three classes: one output per class, each on the same tables.
    y3 = np.digitize(score, np.quantile(score, [1 / 3, 2 / 3]))
    clf3 = FactorizationMachineClassifier(n_components=2, solver="cd", max_iter=10,
                                          random_state=0).fit(X, y3)
    assert clf3.predict_proba(X).shape == (X.shape[0], 3)


def test_early_stopping_and_validation_sets_take_relational_input():
    X, rng = _relational(n=600)
    y = _targets(X, rng)
    est = FactorizationMachineRegressor(n_components=2, early_stopping=True,
                                        random_state=0, max_iter=30).fit(X, y)
    assert est.n_iter_ <= 30
    X_train, X_val, y_train, y_val = train_test_split(X, y, random_state=0)
    est = FactorizationMachineRegressor(n_components=2, random_state=0, max_iter=30)
    est.fit(X_train, y_train, X_val=X_val, y_val=y_val)
    assert est.score(X_val, y_val) > 0.3


def test_sample_weights_of_relational_rows_act_as_on_csr():
    X, rng = _relational()
    y = _targets(X, rng)
    sw = rng.uniform(0.1, 3.0, X.shape[0])
    kw = dict(n_components=2, solver="cd", max_iter=5, tol=0, random_state=0)
    rel = FactorizationMachineRegressor(**kw).fit(X, y, sample_weight=sw)
    csr = FactorizationMachineRegressor(**kw).fit(X.to_csr(), y, sample_weight=sw)
    np.testing.assert_allclose(rel.P_, csr.P_, rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("params", [dict(degree=2), dict(degree=3, lower_degrees="shared")])
def test_bayesian_fits_equal_those_on_the_expanded_rows(params, tmp_path):
    X, rng = _relational()
    y = _targets(X, rng)
    kw = dict(n_components=2, n_iter=6, n_burn_in=2, random_state=0, **params)
    groups = np.repeat([0, 1, 2], [25, X.shape[1] - 25 - 23, 23])
    rel = BayesianFactorizationMachineRegressor(**kw).fit(X, y, feature_groups=groups)
    csr = BayesianFactorizationMachineRegressor(**kw).fit(X.to_csr(), y,
                                                          feature_groups=groups)
    np.testing.assert_allclose(rel.P_samples_, csr.P_samples_, rtol=1e-7, atol=1e-8)
    mean, std = rel.predict(X, return_std=True)
    np.testing.assert_allclose(mean, csr.predict(X.to_csr()), rtol=1e-7, atol=1e-7)
    rel.save(tmp_path / "bayes.npz", exact=True)
    np.testing.assert_array_equal(load(tmp_path / "bayes.npz").predict(X), mean)
    labels = np.where(y > np.median(y), 1, 0)
    clf = BayesianFactorizationMachineClassifier(**kw).fit(X, labels)
    clf_csr = BayesianFactorizationMachineClassifier(**kw).fit(X.to_csr(), labels)
    np.testing.assert_allclose(clf.predict_proba(X), clf_csr.predict_proba(X.to_csr()),
                               rtol=1e-6, atol=1e-7)


def test_polynomial_networks_refuse_relational_input_by_name():
    X, rng = _relational()
    with pytest.raises(TypeError, match="X.to_csr"):
        PolynomialNetworkRegressor(n_components=2).fit(X, rng.randn(X.shape[0]))


def test_relational_input_of_the_wrong_width_or_length_is_refused():
    X, rng = _relational()
    y = _targets(X, rng)
    est = FactorizationMachineRegressor(n_components=2, max_iter=2).fit(X, y)
    narrow = RelationalMatrix(X.parts[:2])
    with pytest.raises(ValueError, match="features, but the model expects"):
        est.predict(narrow)
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        FactorizationMachineRegressor().fit(X, y[:-1])
    for model in (est, BayesianFactorizationMachineRegressor(n_components=2, n_iter=2,
                                                             n_burn_in=1).fit(X, y)):
        with pytest.raises(ValueError, match="0 interactions"):
            model.predict(X[[]])


# ---- FieldEncoder -----------------------------------------------------------------------

def _ratings(seed=0, n=400):
    rng = np.random.RandomState(seed)
    ratings = {"user_id": rng.randint(30, size=n), "item_id": rng.randint(20, size=n) * 7,
               "hour": rng.randint(24, size=n)}
    users = {"user_id": np.arange(30), "age": rng.uniform(18, 70, 30),
             "job": rng.choice(["a", "b", "c"], 30)}
    items = {"item_id": np.arange(20) * 7, "genre": rng.choice(["x", "y"], 20)}
    y = rng.randn(n)
    return ratings, users, items, y


def test_field_encoder_relational_output_has_the_csr_layout(tmp_path):
    ratings, users, items, y = _ratings()
    enc = FieldEncoder(user_features={"age": "numeric", "job": "categorical"},
                       item_features={"genre": "categorical"},
                       context_features={"hour": "categorical"}, implicit="both",
                       handle_unknown="ignore").fit(ratings, users=users, items=items)
    csr = enc.transform(ratings)
    X = enc.set_params(output="relational").transform(ratings)
    assert isinstance(X, RelationalMatrix) and len(X.blocks) == 2
    np.testing.assert_array_equal(X.to_csr().toarray(), csr.toarray())
    # Unknown users and items get the tables' zero rows, as in the CSR output.
    unknown = {"user_id": np.array([99]), "item_id": np.array([7]), "hour": np.array([3])}
    np.testing.assert_array_equal(enc.transform(unknown).to_csr().toarray(),
                                  enc.set_params(output="csr").transform(unknown).toarray())
    enc.set_params(output="relational").save(tmp_path / "enc.npz")
    assert isinstance(load(tmp_path / "enc.npz").transform(ratings), RelationalMatrix)
    with pytest.raises(ValueError, match="output must be one of"):
        FieldEncoder(output="dense").fit(ratings)


@pytest.mark.parametrize("with_direct", [False, True])
@pytest.mark.parametrize("variant", VARIANTS, ids=VARIANT_IDS)
def test_cd_epochs_on_one_block_equal_those_on_the_expanded_rows(variant, with_direct):
    """One block: the pass that starts a component cannot also end that block's last
    pass (it reads the records it would restart)."""
    degrees, kernel, n_dummy = variant
    X, rng = _relational()
    parts = [X.parts[0]] + ([X.parts[1]] if with_direct else [])
    X = RelationalMatrix(parts)
    n = X.shape[0]
    y, sw = rng.randn(n), np.full(n, 1.0 / n)
    got, got_pred = _epochs(X, y, sw, degrees, kernel, n_dummy, "squared", 3)
    want, want_pred = _epochs(X.to_csr(), y, sw, degrees, kernel, n_dummy, "squared", 3)
    for name in ("intercept", "w", "P", "gamma"):
        np.testing.assert_allclose(getattr(got, name), getattr(want, name), rtol=1e-11,
                                   atol=1e-12, err_msg=name)
    np.testing.assert_allclose(got_pred, want_pred, rtol=1e-11, atol=1e-11)


# --------------------------------------------------------------------------------------
# The matrix owns its arrays: changes to the caller's arrays after construction
# --------------------------------------------------------------------------------------

_MUTATION_SCRIPT = """
import numpy as np, scipy.sparse as sp
from polylite import BayesianFactorizationMachineRegressor, FactorizationMachineRegressor
from polylite.relational import RelationBlock, RelationalMatrix
rng = np.random.default_rng(0)
users = rng.integers(0, 5, 60).astype(np.intp)
items = rng.integers(0, 4, 60).astype(np.intp)
user_table, item_table = sp.identity(5, format="csr"), sp.identity(4, format="csr")
direct = sp.random(60, 3, density=0.5, format="csr", random_state=0)
X = RelationalMatrix([direct, RelationBlock(users, user_table),
                      RelationBlock(items, item_table)])
y = rng.random(60)
fm = FactorizationMachineRegressor(max_iter=5, random_state=0).fit(X, y)
before = fm.predict(X)
users[0] = 10**8
item_table.indices[0] = 10**8
item_table.indptr[-1] = 10**6
direct.indices[:] = 10**7
after = fm.predict(X)
assert np.array_equal(before, after), "predictions changed"
FactorizationMachineRegressor(max_iter=2).fit(X, y)
BayesianFactorizationMachineRegressor(n_iter=3, n_burn_in=1).fit(X, y)
print("ok")
"""


def test_changing_the_callers_arrays_after_construction_changes_nothing(tmp_path):
    """predict read out of bounds (a segfault) after the caller changed an index array
    or a table it had given; fit raised an IndexError, the Bayesian fit an internal
    error.  Run in a process of its own, so that a crash fails this test only (from
    another folder: the package imported is the installed one, not the source tree)."""
    import subprocess
    import sys
    result = subprocess.run([sys.executable, "-c", _MUTATION_SCRIPT], cwd=tmp_path,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().endswith("ok")


def test_the_matrix_arrays_are_read_only():
    X = _relational(n=50)[0]
    for part in X.parts:
        arrays = ([part.index, part.table.data, part.table.indices, part.table.indptr]
                  if isinstance(part, RelationBlock)
                  else [part.data, part.indices, part.indptr])
        for array in arrays:
            with pytest.raises(ValueError, match="read-only"):
                array[0] = array[0]
    for part in X[np.arange(10)].parts:  # selected rows: read-only too
        if isinstance(part, RelationBlock):
            with pytest.raises(ValueError, match="read-only"):
                part.index[0] = 0


def test_single_source_reads_rows_from_the_one_part_that_holds_them():
    # A block's table, placed at its columns of the whole row, and each row's row of
    # it give the expanded rows; parts without nonzeros do not count; two parts that
    # hold nonzeros have no single source, nor has a table beyond max_nnz.
    table = sp.random(5, 4, density=0.5, format="csr", random_state=0, dtype=np.float32)
    index = np.array([3, 0, 0, 4, 2, 1, 3])
    X = RelationalMatrix([sp.csr_matrix((7, 3), dtype=np.float32),
                          RelationBlock(index, table)])
    matrix, row_of = X._single_source(max_nnz=table.nnz)
    assert matrix.shape == (5, 7) and matrix.dtype == np.float32
    np.testing.assert_array_equal(matrix[row_of].toarray(), X.to_csr().toarray())
    both = RelationalMatrix([RelationBlock(index, table), RelationBlock(index, table)])
    assert both._single_source(max_nnz=100) is None
    assert X._single_source(max_nnz=table.nnz - 1) is None
