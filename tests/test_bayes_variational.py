"""Variational Bayesian factorization machines: the mean-field sweep of coordinate
descent's passes against a brute-force coordinate ascent, the exact posterior of a linear
model, the ELBO (never decreasing, maximal at the fixed point), the output variance
against Monte Carlo, the estimators (save/load, errors, scikit-learn's checks)."""
import warnings
from types import SimpleNamespace

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.utils.estimator_checks import parametrize_with_checks

import polylite
from polylite import (VariationalFactorizationMachineClassifier,
                      VariationalFactorizationMachineRegressor)
from polylite import kernels
from polylite._engine import _losses
from polylite.bayes import variational
from polylite.bayes._variational import output_variance
from polylite._engine import _cd, solvers as _solvers
from polylite.polynomial._base import _OutputParams
from polylite._engine.problem import Problem

from _cli import run_cli

Regressor = VariationalFactorizationMachineRegressor
Classifier = VariationalFactorizationMachineClassifier


def _fm(X, b, w, P):
    Q = X @ P
    return b + X @ w + 0.5 * ((Q ** 2).sum(1) - ((X ** 2) @ (P ** 2)).sum(1))


def _reference_sweep(X, y, b, w, P, vw, vP, group, lam_w, nu_w, lam_P, nu_P, alpha,
                     fit_linear=True, relaxation=1.0):
    """Coordinate ascent on the mean-field factors of a degree-2 FM, one coordinate at a
    time from the formulas (dense X; lam: prior precisions, nu: prior means), each
    factor's mean moving ``relaxation`` times its step."""
    n, d = X.shape
    w, P, vw, vP = w.copy(), P.copy(), vw.copy(), vP.copy()
    b = b + (y - _fm(X, b, w, P)).sum() / n
    vb = 1 / (alpha * n)
    for j in range(d if fit_linear else 0):
        e, x = y - _fm(X, b, w, P), X[:, j]
        lam, nu = lam_w[group[j]], nu_w[group[j]]
        curvature = x @ x
        w_j = (x @ e + w[j] * curvature + lam / alpha * nu) / (curvature + lam / alpha)
        vw[j] = 1 / (alpha * curvature + lam)
        w[j] = w_j
    for s in range(P.shape[1]):
        for j in range(d):
            e, x = y - _fm(X, b, w, P), X[:, j]
            others = np.arange(d) != j
            Xo = X[:, others]
            rest = Xo @ P[others, s]                    # E[r]
            rest_var = (Xo ** 2) @ vP[others, s]        # Var r
            cube = (Xo ** 3) @ (vP[others, s] * P[others, s])
            h = x * rest
            var_h = x * x * rest_var
            cov = x * (rest * rest_var - cube)
            lam, nu = lam_P[group[j], s], nu_P[group[j], s]
            curvature = h @ h + var_h.sum() + lam / alpha
            optimal = (h @ e + P[j, s] * (h @ h) - cov.sum() + lam / alpha * nu) / curvature
            # (a column without entries takes its prior: not over-relaxed)
            P[j, s] += (relaxation if np.any(x) else 1.0) * (optimal - P[j, s])
            vP[j, s] = 1 / (alpha * curvature)
    return b, vb, w, vw, P, vP


def _kernel_sweep(X, y, b, w, P, vb, vw, vP, group, lam_w, nu_w, lam_P, nu_P, alpha, *,
                  threads=1, fit_linear=True, dtype=np.float64, relaxation=1.0):
    n, d = X.shape
    k = P.shape[1]
    Xc = sp.csr_matrix(X, dtype=dtype)
    params = _OutputParams(np.array([b], dtype), w.astype(dtype), P[None].astype(dtype),
                           np.zeros((0, k), dtype), None)
    variance = variational.Variances(np.array([vb]), vw.copy(), vP[None].copy(),
                                     np.zeros(1))
    data = _solvers.cd_data(Xc, np.full(n, 1.0 / n), "anova", 1)._replace(
        n_threads=threads)
    unit = 1 / (alpha * n)
    prior = variational.VariationalPrior(
        np.asarray(group, np.intp), lam_w * unit, nu_w, (lam_P * unit)[None], nu_P[None],
        np.ones(k), np.zeros(k), unit, 0, variance, relaxation)
    problem = Problem(y, np.full(n, 1.0 / n), kernels.KERNELS["anova"],
                        np.array([2], np.intc), _losses.loss_code("squared"), 0.0, 0.0,
                        True, fit_linear)
    y_pred = kernels.predict(Xc, params.P, degrees=[2], intercept=b,
                             w=params.w).astype(float)
    w_var = variance.w if fit_linear else None
    before = output_variance(Xc, params.P[0], variance.P[0], w_var, 0.0)
    _cd.cd_epoch(data, problem, params, y_pred, prior=prior, thread_min_entries=1)
    # The epoch's running change of sum_i Var f(x_i): the shares of w and P.
    after = output_variance(Xc, params.P[0], variance.P[0], w_var, 0.0)
    np.testing.assert_allclose(variance.output_change[0], np.sum(after - before),
                               rtol=1e-6 if dtype == np.float32 else 1e-10, atol=1e-12)
    return (params.intercept[0], variance.intercept[0], params.w, variance.w,
            params.P[0], variance.P[0], y_pred)


def _problem(seed, layout):
    rng = np.random.RandomState(seed)
    n, d, k = 40, 7, 3
    if layout == "one-hot":  # two fields with an entry in every row: the fused passes
        X = np.zeros((n, d))
        X[np.arange(n), rng.randint(0, 3, n)] = 1
        X[np.arange(n), 3 + rng.randint(0, 4, n)] = 1
    else:
        X = rng.randn(n, d) * (rng.rand(n, d) < 0.5)
        X[:, 1] = rng.rand(n) < 0.5
        X[:, 4] = 0  # a column the data never shows: its factors take their prior
    return dict(X=X, y=rng.randn(n), b=0.3, w=rng.randn(d) * 0.1, P=rng.randn(d, k) * 0.3,
                vb=0.1, vw=rng.rand(d) * 0.2, vP=rng.rand(d, k) * 0.2,
                group=np.array([0, 0, 1, 1, 1, 0, 1]), lam_w=np.array([2.0, 3.0]),
                nu_w=np.array([0.1, -0.2]), lam_P=rng.rand(2, k) + 1,
                nu_P=rng.randn(2, k) * 0.1, alpha=1.7)


@pytest.mark.parametrize("layout", ["sparse", "one-hot"])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("fit_linear", [True, False])
@pytest.mark.parametrize("relaxation", [1.0, 1.7])
def test_meanfield_sweep_is_coordinate_ascent_on_every_factor(layout, threads, fit_linear,
                                                              relaxation):
    case = _problem(0, layout)
    reference = _reference_sweep(
        case["X"], case["y"], case["b"], case["w"], case["P"], case["vw"], case["vP"],
        case["group"], case["lam_w"], case["nu_w"], case["lam_P"], case["nu_P"],
        case["alpha"], fit_linear, relaxation)
    swept = _kernel_sweep(**case, threads=threads, fit_linear=fit_linear,
                          relaxation=relaxation)
    for expected, got in zip(reference, swept):
        np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)
    b, _, w, _, P, _, y_pred = swept
    np.testing.assert_allclose(y_pred, _fm(case["X"], b, w, P), atol=1e-12)


def test_meanfield_sweep_in_float32_follows_float64():
    case = _problem(1, "sparse")
    exact = _kernel_sweep(**case)
    single = _kernel_sweep(**case, dtype=np.float32)
    for expected, got in zip(exact, single):
        np.testing.assert_allclose(got, expected, rtol=2e-4, atol=2e-5)


def test_linear_model_converges_to_the_exact_posterior():
    """With the hyperparameters fixed, coordinate ascent on the linear part of the model
    (no factors reach the rows: one-feature rows of the factor block are never formed)
    converges to the exact posterior mean, and each variance to 1 / precision_jj (the
    mean-field variance)."""
    rng = np.random.RandomState(0)
    n, d, k = 60, 5, 1
    X = rng.randn(n, d) @ (np.eye(d) + 0.5 * rng.randn(d, d))  # correlated features
    y = X @ rng.randn(d) + 1.5 + 0.3 * rng.randn(n)
    alpha, lam = 4.0, np.array([2.0])
    b, w, P = 0.0, np.zeros(d), np.zeros((d, k))
    vb, vw, vP = 1.0, np.ones(d), np.ones((d, k))
    # Factors at 0 with prior mean 0 and an enormous precision stay at 0: the model is
    # linear in (b, w).
    for _ in range(3000):
        b, vb, w, vw, P, vP, _ = _kernel_sweep(
            X, y, b, w, P, vb, vw, vP, np.zeros(d, np.intp), lam, np.zeros(1),
            np.full((1, k), 1e12), np.zeros((1, k)), alpha)
    np.testing.assert_array_equal(P, 0)
    # Exact posterior of (b, w): flat prior on b, N(0, 1 / lam) on w.
    Z = np.column_stack([np.ones(n), X])
    precision = alpha * Z.T @ Z + np.diag(np.r_[0.0, np.full(d, lam[0])])
    mean = np.linalg.solve(precision, alpha * Z.T @ y)
    np.testing.assert_allclose(np.r_[b, w], mean, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(np.r_[vb, vw], 1 / np.diag(precision), rtol=1e-12)


def test_output_variance_matches_monte_carlo():
    rng = np.random.RandomState(2)
    n, d, k = 6, 5, 2
    X = sp.random(n, d, density=0.7, random_state=rng, format="csr") * 2
    P_mean, P_var = rng.randn(d, k), rng.rand(d, k)
    w_mean, w_var, b_var = rng.randn(d), rng.rand(d), 0.3
    exact = output_variance(X, P_mean, P_var, w_var, b_var)
    draws = 200000
    P = P_mean + np.sqrt(P_var) * rng.randn(draws, d, k)
    w = w_mean + np.sqrt(w_var) * rng.randn(draws, d)
    b = np.sqrt(b_var) * rng.randn(draws)
    Xd = X.toarray()
    f = (b[:, None] + w @ Xd.T
         + 0.5 * ((np.einsum("nd,sdk->snk", Xd, P) ** 2).sum(2)
                  - np.einsum("nd,sdk->snk", Xd ** 2, P ** 2).sum(2)))
    np.testing.assert_allclose(exact, f.var(axis=0), rtol=0.03)
    threaded = output_variance(X, P_mean, P_var, w_var, b_var, 2)
    np.testing.assert_allclose(threaded, exact, rtol=1e-14)
    np.testing.assert_allclose(output_variance(X, P_mean, P_var, None, 0.0),
                               exact - b_var - (Xd ** 2) @ w_var, rtol=1e-12)


def test_output_variance_is_never_negative_where_its_terms_cancel():
    """Large means and tiny variances: the expanded form U M^2 - 2 M UM + UMM would
    cancel to negative values; the variance is a sum of terms >= 0."""
    rng = np.random.RandomState(3)
    X = sp.random(2000, 6, density=0.6, random_state=rng, format="csr")
    P_mean = rng.randn(6, 3) * 1e6
    P_var = rng.rand(6, 3) * 1e-6
    got = output_variance(X, P_mean, P_var, None, 0.0)
    Xd = X.toarray()
    a, u = Xd[:, :, None] * P_mean, Xd[:, :, None] ** 2 * P_var
    M = a.sum(1, keepdims=True)
    pairs = 0.5 * (u.sum(1) ** 2 - (u ** 2).sum(1))
    want = ((u * (M - a) ** 2).sum(1) + pairs).sum(1)
    assert np.all(got >= 0)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


def _data(seed=0, n=120, d=8):
    rng = np.random.RandomState(seed)
    X = sp.random(n, d, density=0.4, random_state=rng, format="csr")
    y = X @ rng.randn(d) + (X @ rng.randn(d)) * (X @ rng.randn(d)) + 0.1 * rng.randn(n)
    return X, y


@pytest.mark.parametrize("groups", [None, [0, 0, 0, 1, 1, 1, 2, 2]])
@pytest.mark.parametrize("relaxation", [1.0, 1.7, 1.95])
def test_regressor_elbo_never_decreases(groups, relaxation):
    # (any relaxation below 2: each relaxed step on a concave quadratic still rises)
    X, y = _data()
    est = Regressor(n_components=3, tol=0, max_iter=60, relaxation=relaxation,
                    random_state=0)
    with pytest.warns(polylite.bayes.variational.ConvergenceWarning):
        est.fit(X, y, feature_groups=groups)
    steps = np.diff(est.elbo_)
    assert steps.min() >= -1e-12 * np.abs(est.elbo_).max()
    assert est.elbo_[-1] > est.elbo_[0]


def test_relaxed_means_settle_sooner_where_factors_are_coupled():
    # Users and items seen together: plain coordinate ascent creeps along the coupled
    # factors (two of three fits stop at max_iter), the relaxed steps cross them.
    from polylite.datasets import make_recommender
    X, y = make_recommender(6000, n_users=300, n_items=150, random_state=0)
    fits = {}
    for relaxation in (1.0, 1.7):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", polylite.bayes.variational.ConvergenceWarning)
            fits[relaxation] = [Regressor(n_components=4, relaxation=relaxation,
                                          random_state=seed).fit(X, y) for seed in range(3)]
    iterations = {r: sum(e.n_iter_ for e in f) for r, f in fits.items()}
    elbo = {r: np.mean([e.elbo_[-1] for e in f]) for r, f in fits.items()}
    assert iterations[1.7] < 0.5 * iterations[1.0] and elbo[1.7] > elbo[1.0]


def test_classifier_elbo_never_decreases_and_it_classifies():
    X, y = _data(1)
    labels = np.where(y > np.median(y), "high", "low")
    est = Classifier(n_components=3, max_iter=200, tol=1e-7, random_state=0)
    est.fit(X, labels)
    assert np.diff(est.elbo_[0]).min() >= -1e-12 * np.abs(est.elbo_).max()
    assert np.mean(est.predict(X) == labels) > 0.7
    proba = est.predict_proba(X)
    np.testing.assert_allclose(proba.sum(1), 1)
    np.testing.assert_array_equal(est.classes_[np.argmax(proba, 1)], est.predict(X))
    assert np.all((est.decision_function(X) > 0) == (est.predict(X) == "low"))


def test_fixed_point_maximises_the_elbo_in_every_factor():
    """After convergence every factor is optimal given the others, so moving a mean or a
    variance of any parameter, or the noise's factor, lowers the ELBO: the ELBO and the
    updates are the same function."""
    X, y = _data(2, n=60, d=5)
    est = Regressor(n_components=2, tol=0, max_iter=400, random_state=0)
    q = est._fit_posteriors(est._validate_fit_data(X, y)[0], y[:, None], None)[0]
    q.iterate()  # after the last update: recompute the outputs from the factors

    def elbo():
        q.y_pred = q.predict(q.X)
        q.weights_variance = float(np.sum(output_variance(q.X, p.P[0], v.P[0], v.w, 0.0)))
        return q.elbo()

    p, v = q.params, q.variance
    best = elbo()
    for array in (p.intercept, p.w, p.P, v.intercept, v.w, v.P):
        for index in list(np.ndindex(array.shape))[::3]:
            for step in (1e-3, -1e-3):
                old = array[index]
                array[index] = old + step * max(abs(old), 1e-3)
                assert elbo() <= best + 1e-12, (array.shape, index, step)
                array[index] = old
    for scale in (0.99, 1.01):
        q.alpha_rate *= scale
        assert elbo() <= best
        q.alpha_rate /= scale


def test_predict_return_std_and_the_noise():
    X, y = _data(3)
    est = Regressor(n_components=3, random_state=0, max_iter=300).fit(X, y)
    mean, std = est.predict(X, return_std=True)
    np.testing.assert_allclose(mean, est.predict(X))
    q = SimpleNamespace(P=est.P_[0], P_var=est.P_var_[0])
    np.testing.assert_allclose(std ** 2, output_variance(
        X, q.P, q.P_var, est.w_var_, est.intercept_var_))
    assert np.all(std > 0) and est.alpha_ > 0
    assert np.sqrt(np.mean((mean - y) ** 2)) < np.std(y)


def test_multiclass_one_posterior_per_class():
    X, y = _data(4)
    labels = np.digitize(y, np.quantile(y, [1 / 3, 2 / 3]))
    est = Classifier(n_components=2, random_state=0, max_iter=300).fit(X, labels)
    assert est.P_.shape == (3, 1, 8, 2) and est.elbo_.shape[0] == 3
    assert np.mean(est.predict(X) == labels) > 0.6


@pytest.mark.parametrize("cls", [Regressor, Classifier])
def test_save_and_load_round_trip(tmp_path, cls):
    X, y = _data(5)
    target = y if cls is Regressor else (y > 0)
    est = cls(n_components=2, random_state=0, max_iter=20, tol=1e-3).fit(X, target)
    path = tmp_path / "model.npz"
    est.save(path)
    loaded = polylite.load(path)
    if cls is Regressor:
        for a, b in zip(est.predict(X, return_std=True), loaded.predict(X, return_std=True)):
            np.testing.assert_array_equal(a, b)
        assert loaded.alpha_ == est.alpha_
    else:
        np.testing.assert_array_equal(loaded.predict_proba(X), est.predict_proba(X))
    assert loaded.n_iter_ == est.n_iter_ and loaded.converged_ == est.converged_


def test_model_file_with_negative_variances_is_refused(tmp_path):
    X, y = _data(6)
    est = Regressor(n_components=2, random_state=0, max_iter=5, tol=1e-2).fit(X, y)
    est.P_var_ = -est.P_var_
    est.save(tmp_path / "bad.npz")
    with pytest.raises(polylite.ModelFileError, match="variances"):
        polylite.load(tmp_path / "bad.npz")


def test_relational_input_and_bad_parameters_are_refused():
    X, y = _data(7)
    matrix = polylite.RelationalMatrix([X])
    with pytest.raises(TypeError, match="to_csr"):
        Regressor().fit(matrix, y)
    for params, match in [(dict(max_iter=0), "max_iter"), (dict(tol=-1), "tol"),
                          (dict(n_components=0), "n_components"),
                          (dict(init_scale=0.0), "init_scale"),
                          (dict(relaxation=0.0), "relaxation"),
                          (dict(relaxation=2.0), "relaxation")]:
        with pytest.raises(ValueError, match=match):
            Regressor(**params).fit(X, y)
    with pytest.raises(ValueError, match="two classes"):
        Classifier().fit(X, np.ones(X.shape[0]))


def test_stops_when_the_elbo_settles():
    X, y = _data(8)
    est = Regressor(n_components=2, random_state=0, tol=1e-3, max_iter=500).fit(X, y)
    assert est.converged_ and est.n_iter_ < 500
    assert est.elbo_[-1] - est.elbo_[-2] < 1e-3


@parametrize_with_checks([Regressor(n_components=2, max_iter=10, tol=1e-2),
                          Classifier(n_components=2, max_iter=10, tol=1e-2)])
def test_sklearn_compatible_estimator(estimator, check):
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", polylite.bayes.variational.ConvergenceWarning)
        check(estimator)


def test_command_line_fits_predicts_and_evaluates_variational(tmp_path, capsys):
    """polylite fit --estimator vb-fm: the ELBO per iteration as progress, --meta groups,
    predictions as the model's, classification too; relational input refused."""
    from sklearn.datasets import dump_svmlight_file
    X, y = _data(9, n=300)
    dump_svmlight_file(X[:240], y[:240], str(tmp_path / "train.svm"))
    dump_svmlight_file(X[240:], y[240:], str(tmp_path / "test.svm"))
    (tmp_path / "groups.txt").write_text("\n".join("00111222"))
    model = tmp_path / "model.npz"
    status, _, err = run_cli(capsys, "fit", tmp_path / "train.svm", "-m", model,
                             "--estimator", "vb-fm", "--n-components", "3", "--seed", "0",
                             "--meta", tmp_path / "groups.txt", "--validation",
                             tmp_path / "test.svm", "--progress", "lines")
    assert status == 0, err
    assert "iteration 1/100  ELBO per row" in err
    loaded = polylite.load(model)
    assert isinstance(loaded, Regressor)
    np.testing.assert_array_equal(loaded.feature_groups_, [0, 0, 1, 1, 1, 2, 2, 2])
    out = tmp_path / "predictions.txt"
    assert run_cli(capsys, "predict", model, tmp_path / "test.svm", "-o", out)[0] == 0
    np.testing.assert_allclose(np.loadtxt(out), loaded.predict(X[240:]), rtol=1e-6)
    status, out, _ = run_cli(capsys, "evaluate", model, tmp_path / "test.svm")
    assert status == 0 and "rmse" in out
    status, _, err = run_cli(capsys, "fit", tmp_path / "train.svm", "-m", model,
                             "--estimator", "vb-fm", "--task", "classification",
                             "--binary-threshold", "0", "--relaxation", "1.2",
                             "--progress", "none")
    assert status == 0, err
    assert isinstance(polylite.load(model), Classifier)
    assert polylite.load(model).relaxation == 1.2


def test_running_output_variance_stays_exact():
    """The sweeps keep sum_i Var f(x_i) up to date from their row caches; after many
    iterations it is still the sum of the rows' variances."""
    X, y = _data(10)
    est = Regressor(n_components=3, tol=0, max_iter=80, random_state=0)
    with pytest.warns(polylite.bayes.variational.ConvergenceWarning):
        q = est._fit_posteriors(est._validate_fit_data(X, y)[0], y[:, None], None)[0]
    np.testing.assert_allclose(q.output_variance_sum(),
                               np.sum(q.predict_variance(q.X)), rtol=1e-10)


def test_overflowing_data_is_a_clear_error():
    X, y = _data(11)
    with pytest.raises(ValueError, match="too large"):
        Regressor(n_components=2).fit(X, y * 1e300)
    with pytest.raises((ValueError, FloatingPointError), match="values of X"):
        Regressor(n_components=2, max_iter=5).fit(X * 1e200, y)
