"""Tests of the polynomial network estimators (``polylite.polynomial.pn``).

Model, per output:

    y_hat(x) = intercept + <w, x> + sum_s lam_s (gamma_s + <p_s, x>)^m

(``gamma_s = 0`` with ``lower_degrees="none"``; ``lam_s`` fixed to +1, -1, +1, ... with
``output_weights="alternating"``).  The objective that the tests recompute independently
(from ``predict``/``decision_function`` and the fitted attributes, never from the solver's
bookkeeping) is

    sum_i s_i loss(y_i, y_hat_i) / sum_i s_i + alpha/2 ||w||^2
        + beta/2 (||P||^2 + ||gamma||^2 + ||lam||^2 if lam is learned)

with squared loss 1/2 (y - p)^2, logistic log(1 + exp(-y p)) and squared hinge
max(0, 1 - y p)^2 (labels in {-1, +1}, one-vs-rest for more than two classes).
"""
import pickle
import warnings

from types import SimpleNamespace

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone, is_classifier
from sklearn.datasets import make_circles
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.utils.estimator_checks import parametrize_with_checks

import polylite
from polylite._engine.problem import Problem
from polylite import (FactorizationMachineClassifier, PolynomialNetworkClassifier,
                      PolynomialNetworkRegressor, kernels)
from polylite._engine import _losses
from polylite._engine import _cd, _sgd, solvers as _solvers
from _reference import reference_loss, run_cd_epoch

# --------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------

LOWER = ["augment", "none"]
OUTPUT_WEIGHTS = ["learned", "alternating"]


_loss = reference_loss


def _sq(a):
    return float(np.sum(np.square(np.asarray(a, dtype=np.float64))))


def _output_objectives(est, X, y, sample_weight=None):
    """Objective of every output of a fitted PN estimator, from its predictions."""
    n = X.shape[0]
    sw = np.ones(n) if sample_weight is None else np.asarray(sample_weight, np.float64)
    if is_classifier(est):
        classes = est.classes_
        scores = np.asarray(est.decision_function(X), np.float64).reshape(n, -1)
        if classes.shape[0] == 2:
            targets = np.where(y == classes[1], 1.0, -1.0)[:, np.newaxis]
        else:
            targets = np.where(y[:, np.newaxis] == classes[np.newaxis, :], 1.0, -1.0)
        w, P, gamma, lam, loss = est.w_, est.P_, est.gamma_, est.lam_, est.loss
    else:
        scores = np.asarray(est.predict(X), np.float64)[:, np.newaxis]
        targets = np.asarray(y, dtype=np.float64)[:, np.newaxis]
        w, P, gamma, lam, loss = (est.w_[None], est.P_[None], est.gamma_[None],
                                  est.lam_[None], "squared")
    values = []
    for o in range(targets.shape[1]):
        value = np.sum(sw * _loss(loss, targets[:, o], scores[:, o])) / np.sum(sw)
        value += 0.5 * est.alpha * _sq(w[o])
        penalised = _sq(P[o]) + _sq(gamma[o])
        if est.output_weights == "learned":
            penalised += _sq(lam[o])
        values.append(value + 0.5 * est.beta * penalised)
    return np.array(values)


def _rel_rmse(y_hat, y):
    return np.sqrt(np.mean((y_hat - y) ** 2)) / np.std(y)


def _data(n=60, d=6, density=0.7, seed=0, sparse=True):
    rng = np.random.RandomState(seed)
    X = rng.randn(n, d) * (rng.rand(n, d) < density)
    X[np.arange(n), rng.randint(d, size=n)] += 1.0  # no empty row
    return (sp.csr_matrix(X) if sparse else X), rng


def _fit_quietly(est, X, y, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return est.fit(X, y, **kwargs)


# --------------------------------------------------------------------------------------
# 1. planted models are recovered (solver="cd")
# --------------------------------------------------------------------------------------

PLANTED_LAM = np.array([1.0, -1.0, 0.5])  # mixed signs: both curvatures for even m


def _planted(degree, with_gamma, seed, n=300, d=5):
    """Dense Gaussian data and targets of a PN with 3 units, from kernels.predict."""
    rng = np.random.RandomState(seed)
    X = rng.randn(n, d)
    k = PLANTED_LAM.shape[0]
    P = rng.randn(d, k) / np.sqrt(d)
    gamma = rng.randn(1, k) if with_gamma else None
    w = 0.5 * rng.randn(d)
    y = kernels.predict(X, P, degrees=[degree], kernel="polynomial", intercept=0.3, w=w,
                        gamma=gamma, lam=PLANTED_LAM)
    return X, y


# Settings found reliable over 10 data/initialisation seeds (worst relative training RMSE
# in parentheses): 8 units for 3 planted ones, init_scale 0.1, no penalty, many epochs.
# With exactly 3 units CD often stops in a spurious stationary point (relative RMSE
# 0.01-0.4), and degree 3 converges slowly (the learned lam and the scale of p_s trade
# off freely when beta = 0), hence the looser threshold for m = 3.
#   m = 2, 2000 epochs: augment (2e-5), none (2e-5)   -> threshold 1e-3
#   m = 3, 3000 epochs: augment (4e-4), none (3e-4)   -> threshold 3e-3
RECOVERY = {2: (2000, 1e-3), 3: (3000, 3e-3)}


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("lower", LOWER)
@pytest.mark.parametrize("degree", [2, 3])
def test_planted_model_is_recovered(degree, lower, seed):
    """Data planted with gamma for "augment", without gamma for "none"."""
    X, y = _planted(degree, with_gamma=lower == "augment", seed=seed)
    max_iter, threshold = RECOVERY[degree]
    est = PolynomialNetworkRegressor(degree=degree, n_components=8, lower_degrees=lower,
                                     alpha=0.0, beta=0.0, init_scale=0.1,
                                     max_iter=max_iter, tol=1e-14, solver="cd",
                                     random_state=seed).fit(X, y)
    assert _rel_rmse(est.predict(X), y) < threshold


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_planted_model_with_gamma_needs_augment():
    """(gamma + <p, x>)^3 has the quadratic terms 3 gamma <p, x>^2, which neither the
    homogeneous cubic units of lower_degrees="none" nor the linear term can express."""
    X, y = _planted(3, with_gamma=True, seed=0)
    fits = {}
    for lower in LOWER:
        est = PolynomialNetworkRegressor(degree=3, n_components=8, lower_degrees=lower,
                                         alpha=0.0, beta=0.0, init_scale=0.1,
                                         max_iter=RECOVERY[3][0], tol=1e-14,
                                         random_state=0).fit(X, y)
        fits[lower] = _rel_rmse(est.predict(X), y)
    assert fits["augment"] < RECOVERY[3][1]
    assert fits["none"] > 0.05


# --------------------------------------------------------------------------------------
# 2. coordinate descent never increases the objective
# --------------------------------------------------------------------------------------

MONOTONE_KINDS = [("squared", 1), ("logistic", 2), ("squared_hinge", 2),
                  ("logistic", 3)]


def _monotone_problem(loss, n_classes, degree):
    X, rng = _data(n=60, d=6, seed=degree)
    if loss == "squared":
        y = rng.randn(X.shape[0])
    else:
        y = rng.randint(n_classes, size=X.shape[0])
    sw = rng.uniform(0.0, 3.0, size=X.shape[0])
    sw[:3] = 0.0
    return X, y, sw


@pytest.mark.parametrize("output_weights", OUTPUT_WEIGHTS)
@pytest.mark.parametrize("lower", LOWER)
@pytest.mark.parametrize("degree", [2, 3, 4])
@pytest.mark.parametrize("loss,n_classes", MONOTONE_KINDS,
                         ids=[f"{loss}-{c}" for loss, c in MONOTONE_KINDS])
def test_objective_never_increases_across_epochs(loss, n_classes, degree, lower,
                                                 output_weights):
    X, y, sw = _monotone_problem(loss, n_classes, degree)
    params = dict(degree=degree, n_components=3, lower_degrees=lower,
                  output_weights=output_weights, alpha=0.02, beta=0.01, init_scale=0.3,
                  max_iter=1, tol=0.0, warm_start=True, random_state=0, solver="cd")
    if loss == "squared":
        est = PolynomialNetworkRegressor(**params)
    else:
        est = PolynomialNetworkClassifier(loss=loss, **params)
    history = []
    for _ in range(10):
        _fit_quietly(est, X, y, sample_weight=sw)
        history.append(_output_objectives(est, X, y, sw))
        if output_weights == "alternating":
            np.testing.assert_array_equal(
                est.lam_, np.broadcast_to(np.resize([1.0, -1.0], 3), est.lam_.shape))
    history = np.array(history)
    assert history.shape[1] == (1 if n_classes <= 2 else n_classes)
    assert np.all(np.isfinite(history))
    increase = np.diff(history, axis=0)
    assert np.all(increase <= 1e-12 * np.abs(history[:-1])), history
    assert np.all(history[-1] < history[0])  # and it does decrease


# Tiny problems (1-2 features, 1-2 units, no penalty, large initial factors) on which the
# plain Gauss-Newton step without Armijo's safeguard does increase the objective (found by
# scanning with the safeguard removed from _cd._poly_coordinate): they check the safeguard.
SAFEGUARD_CASES = [(2, "none", 1.0, "squared", 2, 1, 2),
                   (3, "augment", 0.5, "squared", 2, 2, 1),
                   (3, "none", 0.5, "logistic", 2, 2, 2),
                   (4, "augment", 0.5, "squared", 1, 2, 0),
                   (4, "augment", 0.5, "logistic", 1, 1, 0),
                   (4, "augment", 1.0, "squared", 1, 1, 1)]


@pytest.mark.parametrize("degree,lower,init_scale,loss,d,k,seed", SAFEGUARD_CASES)
def test_objective_never_increases_when_newton_overshoots(degree, lower, init_scale, loss,
                                                          d, k, seed):
    rng = np.random.RandomState(seed)
    X = rng.randn(30, d)
    y = 3 * rng.randn(30) if loss == "squared" else rng.randint(2, size=30)
    params = dict(degree=degree, n_components=k, lower_degrees=lower, alpha=0.0,
                  beta=0.0, init_scale=init_scale, max_iter=1, tol=0.0, warm_start=True,
                  random_state=seed)
    est = (PolynomialNetworkRegressor(**params) if loss == "squared"
           else PolynomialNetworkClassifier(loss=loss, **params))
    history = []
    for _ in range(10):
        _fit_quietly(est, X, y)
        history.append(_output_objectives(est, X, y)[0])
    history = np.array(history)
    assert np.all(np.isfinite(history))
    assert np.all(np.diff(history) <= 1e-12 * np.abs(history[:-1])), history


def _cd_predictions_drift(kernel, degree, epochs, dtype=np.float32):
    """Run ``_cd.cd_epoch`` on float32 parameters, carrying its predictions from epoch to
    epoch as the estimators do; return max |carried - exact| / max |exact|."""
    rng = np.random.RandomState(0)
    n, d, k = 200, 8, 4
    X = sp.csr_matrix(rng.randn(n, d)).astype(dtype)
    y = 3 * rng.randn(n)
    sw = np.full(n, 1.0 / n)
    intercept, w = np.zeros(1, dtype), np.zeros(d, dtype)
    P = (0.3 * rng.randn(1, d, k)).astype(dtype)
    gamma = (0.3 * rng.randn(1 if kernel == "polynomial" else 0, k)).astype(dtype)
    lam = np.array([1, -1, 1, -1], dtype)

    def exact():
        return kernels.predict(X.astype(np.float64), P.astype(np.float64),
                               degrees=[degree], kernel=kernel,
                               intercept=float(intercept[0]), w=w.astype(np.float64),
                               gamma=gamma.astype(np.float64), lam=lam.astype(np.float64))

    y_pred = exact()
    for _ in range(epochs):
        run_cd_epoch(_solvers.column_groups(X, kernel), X.data, X.indices, X.indptr, y, sw,
                     intercept, w, P, np.array([degree], np.intc), gamma,
                     kernels.KERNELS[kernel], _losses.loss_code("squared"), 0.0, 1e-4,
                     True, True, y_pred, lam, kernel == "polynomial")
    truth = exact()
    return np.max(np.abs(y_pred - truth)) / np.max(np.abs(truth))


def test_cd_float32_carried_predictions_reference_anova():
    """The ANOVA CD applies to its caches the step actually stored in float32 (see
    ``_cd_component``), so the predictions it carries stay within rounding of the exact
    ones however many epochs are run."""
    assert _cd_predictions_drift("anova", 2, 500) < 2e-7


@pytest.mark.parametrize("degree", [2, 3])
def test_cd_float32_carried_predictions_polynomial(degree):
    """Same for the PN coordinate descent (the Newton step is rounded to the precision
    of P_/gamma_ before the caches are updated; before that fix the relative drift grew to
    ~1e-6 after 500 epochs)."""
    assert _cd_predictions_drift("polynomial", degree, 500) < 2e-7


# --------------------------------------------------------------------------------------
# 3. the gradient of the PN objective (polylite._sgd.objective_gradient, kernel code 2)
# --------------------------------------------------------------------------------------


def _objective_gradient(X, y, sw, intercept, w, P, degree, gamma, lam, loss,
                        fit_linear=True):
    grads = dict(intercept=np.zeros(1), w=np.zeros(w.shape), P=np.zeros(P.shape),
                 gamma=np.zeros(gamma.shape), lam=np.zeros(lam.shape))
    value = _sgd.objective_gradient(
        X, Problem(y, sw, kernels.KERNELS["polynomial"], np.array([degree], dtype=np.intc),
                   _losses.loss_code(loss), 0.0, 0.0, True, fit_linear),
        SimpleNamespace(intercept=intercept, w=w, P=P, gamma=gamma, lam=lam), grads)
    return value, grads


@pytest.mark.parametrize("loss", ["squared", "logistic", "squared_hinge"])
@pytest.mark.parametrize("with_gamma", [True, False], ids=["gamma", "no-gamma"])
@pytest.mark.parametrize("degree", [2, 3, 4])
def test_objective_gradient_polynomial_matches_finite_differences(degree, with_gamma,
                                                                  loss):
    X, rng = _data(n=25, d=5, density=0.6, seed=degree)
    X.sort_indices()
    n, d = X.shape
    k = 3
    y = rng.randn(n) if loss == "squared" else np.where(rng.rand(n) < 0.5, -1.0, 1.0)
    sw = rng.uniform(0.2, 2.0, n)
    sw /= sw.sum()
    params = dict(intercept=np.array([0.2]), w=0.3 * rng.randn(d),
                  P=0.5 * rng.randn(1, d, k),
                  gamma=0.7 * rng.randn(1 if with_gamma else 0, k),
                  lam=np.array([1.3, -0.8, 0.4]))

    def value_of(p):
        return _objective_gradient(X, y, sw, p["intercept"], p["w"], p["P"], degree,
                                   p["gamma"], p["lam"], loss)[0]

    value, grads = _objective_gradient(X, y, sw, params["intercept"], params["w"],
                                       params["P"], degree, params["gamma"],
                                       params["lam"], loss)
    # the value is the weighted loss of kernels.predict
    pred = kernels.predict(X, params["P"], degrees=[degree], kernel="polynomial",
                           intercept=params["intercept"][0], w=params["w"],
                           gamma=params["gamma"], lam=params["lam"])
    assert value == pytest.approx(np.sum(sw * _loss(loss, y, pred)), rel=1e-12)
    h = 1e-6
    for name, array in params.items():
        numeric = np.zeros(array.shape)
        for index in np.ndindex(array.shape):
            old = array[index]
            array[index] = old + h
            up = value_of(params)
            array[index] = old - h
            down = value_of(params)
            array[index] = old
            numeric[index] = (up - down) / (2 * h)
        scale = max(1.0, np.max(np.abs(numeric), initial=0.0))
        np.testing.assert_allclose(grads[name], numeric, rtol=1e-5, atol=1e-6 * scale,
                                   err_msg=name)
    if not with_gamma:
        assert grads["gamma"].size == 0
    # P rows of features absent from X get no gradient
    absent = np.asarray(X.getnnz(axis=0) == 0)
    assert np.all(grads["P"][0][absent] == 0)


def test_objective_gradient_fit_linear_false_ignores_w():
    X, rng = _data(n=20, d=4, seed=5)
    X.sort_indices()
    y = rng.randn(20)
    sw = np.full(20, 1 / 20)
    w = rng.randn(4)
    args = (np.array([0.1]), w, 0.4 * rng.randn(1, 4, 2), 3, 0.3 * rng.randn(1, 2),
            np.array([1.0, -1.0]), "squared")
    value, grads = _objective_gradient(X, y, sw, *args, fit_linear=False)
    value_zero_w, _ = _objective_gradient(X, y, sw, args[0], np.zeros(4), *args[2:],
                                          fit_linear=True)
    assert value == pytest.approx(value_zero_w, rel=1e-14)
    assert np.all(grads["w"] == 0)


# --------------------------------------------------------------------------------------
# 4. non-linearly separable problems: XOR and concentric circles
# --------------------------------------------------------------------------------------


def _xor(seed=0, n=400, noise_dims=3):
    """Points in the four quadrants labelled sign(x1 x2), plus Gaussian noise features.

    Each coordinate is uniform on [-1, -0.1] or [0.1, 1] (a band around the axes is left
    empty, so that a correct decision function gives ~100% and not a noisy 95%).
    """
    rng = np.random.RandomState(seed)
    Z = rng.uniform(0.1, 1, size=(n, 2)) * rng.choice([-1.0, 1.0], size=(n, 2))
    y = (Z[:, 0] * Z[:, 1] > 0).astype(int)
    X = np.hstack([Z, 0.5 * rng.randn(n, noise_dims)])
    return X, y


def _circles(seed=0, n=400):
    return make_circles(n_samples=n, noise=0.05, factor=0.5, random_state=seed)


DATASETS = {"xor": _xor, "circles": _circles}


def _split(name, seed=0):
    X, y = DATASETS[name](seed)
    return train_test_split(X, y, test_size=0.3, random_state=seed, stratify=y)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("name", list(DATASETS))
def test_logistic_regression_fails_on_nonlinear_data(name, seed):
    X_tr, X_te, y_tr, y_te = _split(name, seed)
    assert LogisticRegression().fit(X_tr, y_tr).score(X_te, y_te) < 0.8


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("name", list(DATASETS))
def test_polynomial_network_classifier_solves_nonlinear_data(name, seed):
    X_tr, X_te, y_tr, y_te = _split(name, seed)
    clf = PolynomialNetworkClassifier(degree=2, n_components=4, beta=1e-4, max_iter=200,
                                      random_state=0)
    _fit_quietly(clf, X_tr, y_tr)
    # Converged fits misclassify up to 3 of the 120 test points on xor seed 2 (points
    # next to the empty band); logistic regression misses over 20% (test above).
    assert clf.score(X_te, y_te) >= 0.97


def _duplicate(X):
    return np.hstack([X, X])


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("name", list(DATASETS))
def test_factorization_machine_classifier_solves_nonlinear_data(name, seed):
    """FM (degree 2) on XOR and circles.

    The ANOVA kernel only multiplies *distinct* features, so a degree-2 FM on (x1, x2)
    can express x1 x2 (XOR) but not x1^2 + x2^2 (circles).  Duplicating every feature,
    X -> [X, X], is a legitimate user-side input representation that makes the squares
    pairwise interactions of distinct features (x_j times its copy x_j'), so the circles
    become expressible; it is used for both data sets.  Without it the circles are out
    of reach (checked below).
    """
    X_tr, X_te, y_tr, y_te = _split(name, seed)
    clf = FactorizationMachineClassifier(degree=2, n_components=4, beta=1e-4,
                                         init_scale=0.1, max_iter=200, random_state=0)
    _fit_quietly(clf, _duplicate(X_tr), y_tr)
    assert clf.score(_duplicate(X_te), y_te) >= 0.98
    if name == "xor":
        plain = clone(clf)
        _fit_quietly(plain, X_tr, y_tr)
        assert plain.score(X_te, y_te) >= 0.98
    else:
        plain = clone(clf)
        _fit_quietly(plain, X_tr, y_tr)
        assert plain.score(X_te, y_te) < 0.8


# --------------------------------------------------------------------------------------
# 5. scikit-learn compatibility
# --------------------------------------------------------------------------------------

ESTIMATORS = [
    PolynomialNetworkRegressor(),
    PolynomialNetworkClassifier(),
    PolynomialNetworkRegressor(degree=3, lower_degrees="none", output_weights="alternating",
                               n_components=3, max_iter=50),
    PolynomialNetworkClassifier(degree=3, loss="squared_hinge", n_components=3,
                                max_iter=50),
]

#: check name -> written reason; only checks known to fail.
EXPECTED_FAILED_CHECKS = {}


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@parametrize_with_checks(ESTIMATORS, expected_failed_checks=lambda est: EXPECTED_FAILED_CHECKS,
                         xfail_strict=True)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)


# --------------------------------------------------------------------------------------
# 6. save / load and pickle
# --------------------------------------------------------------------------------------

KINDS = ["regressor", "binary", "multiclass"]


def _fit_kind(kind, lower="augment", output_weights="learned", dtype=np.float64,
              degree=2):
    X, rng = _data(n=40, d=6, seed=7)
    X = X.astype(dtype)
    params = dict(degree=degree, n_components=3, lower_degrees=lower,
                  output_weights=output_weights, max_iter=5, init_scale=0.3,
                  random_state=0)
    if kind == "regressor":
        est, y = PolynomialNetworkRegressor(**params), rng.randn(X.shape[0])
    elif kind == "binary":
        est = PolynomialNetworkClassifier(**params)
        y = np.array(["no", "yes"])[rng.randint(2, size=X.shape[0])]
    else:
        est = PolynomialNetworkClassifier(loss="squared_hinge", **params)
        y = np.array(["cat", "dog", "emu", "owl"])[rng.randint(4, size=X.shape[0])]
    return _fit_quietly(est, X, y), X


def _outputs(est, X):
    out = {"predict": est.predict(X)}
    for method in ("decision_function", "predict_proba"):
        if hasattr(est, method):
            out[method] = getattr(est, method)(X)
    return out


def _assert_same_model(a, b, X):
    assert type(a) is type(b)
    assert a.get_params() == b.get_params()
    for name in ("intercept_", "w_", "P_", "gamma_", "lam_", "n_iter_", "n_features_in_",
                 "classes_"):
        assert hasattr(a, name) == hasattr(b, name), name
        if hasattr(a, name):
            va, vb = getattr(a, name), getattr(b, name)
            assert type(va) is type(vb), name
            if isinstance(va, np.ndarray):
                assert va.dtype == vb.dtype, name
                assert va.shape == vb.shape, name
            np.testing.assert_array_equal(va, vb, err_msg=name)
    out_a, out_b = _outputs(a, X), _outputs(b, X)
    assert out_a.keys() == out_b.keys()
    for key in out_a:
        assert out_a[key].dtype == out_b[key].dtype, key
        np.testing.assert_array_equal(out_a[key], out_b[key], err_msg=key)


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("output_weights", OUTPUT_WEIGHTS)
@pytest.mark.parametrize("lower", LOWER)
@pytest.mark.parametrize("kind", KINDS)
def test_save_load_round_trip(tmp_path, kind, lower, output_weights, dtype):
    est, X = _fit_kind(kind, lower, output_weights, dtype)
    path = tmp_path / "pn.npz"
    est.save(path)
    loaded = polylite.load(path)
    _assert_same_model(est, loaded, X)
    assert loaded.P_.dtype == dtype
    X_new, _ = _data(n=30, d=6, seed=99)
    _assert_same_model(est, loaded, X_new.toarray())


@pytest.mark.parametrize("kind", KINDS)
def test_pickle_round_trip(kind):
    est, X = _fit_kind(kind, "augment", "learned", degree=3)
    twin = pickle.loads(pickle.dumps(est))
    _assert_same_model(est, twin, X)
    twin.lam_[...] = 0  # the copy is independent
    assert np.any(est.lam_ != 0)


# --------------------------------------------------------------------------------------
# 7. fitted attributes
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("output_weights", OUTPUT_WEIGHTS)
@pytest.mark.parametrize("lower", LOWER)
def test_regressor_shapes(lower, output_weights):
    X, rng = _data(n=50, d=7, seed=1)
    est = _fit_quietly(PolynomialNetworkRegressor(
        degree=3, n_components=5, lower_degrees=lower, output_weights=output_weights,
        max_iter=5, random_state=0), X, rng.randn(50))
    assert isinstance(est.intercept_, float)
    assert est.w_.shape == (7,)
    assert est.P_.shape == (7, 5)
    assert est.gamma_.shape == (5,)
    assert est.lam_.shape == (5,)
    assert isinstance(est.n_iter_, int)
    if lower == "none":
        assert np.all(est.gamma_ == 0)
    else:
        assert np.any(est.gamma_ != 0)
    if output_weights == "alternating":
        np.testing.assert_array_equal(est.lam_, [1, -1, 1, -1, 1])
    else:
        assert not np.array_equal(est.lam_, [1, -1, 1, -1, 1])
    # the documented model
    expected = (est.intercept_ + X @ est.w_
                + ((est.gamma_ + X @ est.P_) ** 3) @ est.lam_)
    np.testing.assert_allclose(est.predict(X), expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("output_weights", OUTPUT_WEIGHTS)
@pytest.mark.parametrize("lower", LOWER)
@pytest.mark.parametrize("n_classes", [2, 4])
def test_classifier_shapes(n_classes, lower, output_weights):
    X, rng = _data(n=60, d=7, seed=2)
    y = rng.randint(n_classes, size=60)
    est = _fit_quietly(PolynomialNetworkClassifier(
        degree=2, n_components=5, lower_degrees=lower, output_weights=output_weights,
        max_iter=5, random_state=0), X, y)
    n_out = 1 if n_classes == 2 else n_classes
    assert est.intercept_.shape == (n_out,)
    assert est.w_.shape == (n_out, 7)
    assert est.P_.shape == (n_out, 7, 5)
    assert est.gamma_.shape == (n_out, 5)
    assert est.lam_.shape == (n_out, 5)
    assert est.n_iter_.shape == (n_out,)
    if lower == "none":
        assert np.all(est.gamma_ == 0)
    if output_weights == "alternating":
        np.testing.assert_array_equal(est.lam_, np.tile([1, -1, 1, -1, 1], (n_out, 1)))
    scores = np.asarray(est.decision_function(X)).reshape(60, n_out)
    for o in range(n_out):
        expected = (est.intercept_[o] + X @ est.w_[o]
                    + ((est.gamma_[o] + X @ est.P_[o]) ** 2) @ est.lam_[o])
        np.testing.assert_allclose(scores[:, o], expected, rtol=1e-10, atol=1e-12)


def test_alternating_lam_survives_warm_start_and_every_solver():
    X, rng = _data(n=50, d=5, seed=4)
    y = rng.randn(50)
    for solver in ("cd", "sgd", "adagrad", "lbfgs"):
        est = PolynomialNetworkRegressor(n_components=4, output_weights="alternating",
                                         solver=solver, max_iter=3, warm_start=True,
                                         random_state=0)
        _fit_quietly(est, X, y)
        _fit_quietly(est, X, y)
        np.testing.assert_array_equal(est.lam_, [1, -1, 1, -1], err_msg=solver)


def test_warm_start_into_alternating_keeps_alternating_lam():
    """Fixed output weights are +1, -1, ... even when warm-starting from learned ones."""
    X, rng = _data(n=50, d=4, seed=6)
    y = rng.randn(50)
    est = _fit_quietly(PolynomialNetworkRegressor(n_components=3, max_iter=5,
                                                  warm_start=True, random_state=0), X, y)
    assert not np.array_equal(est.lam_, [1, -1, 1])
    _fit_quietly(est.set_params(output_weights="alternating"), X, y)
    np.testing.assert_array_equal(est.lam_, [1, -1, 1])


def test_negative_curvature_is_learned():
    """y = -x1^2: the degree-2 PN needs a negative lam (learned or alternating)."""
    rng = np.random.RandomState(0)
    X = rng.randn(200, 3)
    y = -X[:, 0] ** 2
    for output_weights in OUTPUT_WEIGHTS:
        est = _fit_quietly(PolynomialNetworkRegressor(
            n_components=2, lower_degrees="none", output_weights=output_weights, alpha=0,
            beta=0, max_iter=500, tol=1e-12, random_state=0), X, y)
        assert _rel_rmse(est.predict(X), y) < 1e-3, output_weights


# --------------------------------------------------------------------------------------
# 8. invalid parameters
# --------------------------------------------------------------------------------------

BAD_PARAMS = [
    (dict(degree=1), "degree"),
    (dict(degree=0), "degree"),
    (dict(degree=2.5), "degree"),
    (dict(lower_degrees="shared"), "lower_degrees"),
    (dict(lower_degrees="separate"), "lower_degrees"),
    (dict(lower_degrees="bogus"), "lower_degrees"),
    (dict(output_weights="positive"), "output_weights"),
    (dict(output_weights=None), "output_weights"),
    (dict(n_components=0), "n_components"),
    (dict(beta=-1.0), "beta"),
]


@pytest.mark.parametrize("cls", [PolynomialNetworkRegressor, PolynomialNetworkClassifier])
@pytest.mark.parametrize("params,name", BAD_PARAMS,
                         ids=[f"{name}={list(p.values())[0]!r}" for p, name in BAD_PARAMS])
def test_invalid_parameters_raise(cls, params, name):
    X, rng = _data(n=20, d=3)
    y = rng.randint(2, size=20)
    with pytest.raises(ValueError, match=name):
        cls(**params).fit(X, y)
