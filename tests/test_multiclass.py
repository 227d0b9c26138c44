"""One-vs-rest fits: the classes fitted on threads of their own (n_jobs), and the solver
advice of the convergence warning."""
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning

from polylite import FactorizationMachineClassifier, PolynomialNetworkClassifier
from polylite._engine import solvers as _solvers

ESTIMATORS = [FactorizationMachineClassifier, PolynomialNetworkClassifier]
ARRAYS = ("intercept_", "w_", "P_", "gamma_", "lam_", "n_iter_")


def _problem(n_classes=4, n=120, d=5, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.randn(n, d)
    y = np.argmax(X[:, :n_classes] * X[:, 1:n_classes + 1], axis=1)
    return X, y


@pytest.mark.parametrize("solver", ["cd", "adagrad", "lbfgs"])
@pytest.mark.parametrize("cls", ESTIMATORS)
def test_one_vs_rest_fit_is_the_same_whatever_n_jobs(cls, solver):
    # Each class draws from a random stream of its own (the stochastic solvers' shuffles),
    # so which thread fits which class does not matter.
    X, y = _problem()
    fits = []
    for n_jobs in (None, 1, 2, 3):
        est = cls(n_components=3, max_iter=5, solver=solver, random_state=0,
                  n_jobs=n_jobs)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            est.fit(X, y)
        fits.append(est)
    for est in fits[1:]:
        for name in ARRAYS:
            if hasattr(est, name):
                np.testing.assert_array_equal(getattr(est, name), getattr(fits[0], name),
                                              err_msg=name)
        np.testing.assert_array_equal(est.decision_function(X),
                                      fits[0].decision_function(X))


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_one_vs_rest_warns_once_per_unconverged_class(cls):
    X, y = _problem()
    est = cls(n_components=2, max_iter=1, tol=0.0, random_state=0, n_jobs=2)
    with pytest.warns(ConvergenceWarning) as caught:
        est.fit(X, y)
    assert len([w for w in caught if w.category is ConvergenceWarning]) == 4
    np.testing.assert_array_equal(est.n_iter_, [1, 1, 1, 1])


def test_one_vs_rest_error_of_a_class_reaches_the_caller(monkeypatch):
    X, y = _problem()
    fit_one_output = FactorizationMachineClassifier._fit_one_output

    def failing(self, *args, output, **kwargs):
        if output[0] == 2:
            raise FloatingPointError("class 2 failed")
        return fit_one_output(self, *args, output=output, **kwargs)

    monkeypatch.setattr(FactorizationMachineClassifier, "_fit_one_output", failing)
    est = FactorizationMachineClassifier(n_components=2, max_iter=2, random_state=0,
                                         n_jobs=2)
    with pytest.raises(FloatingPointError, match="class 2 failed"):
        est.fit(X, y)


@pytest.mark.parametrize("n_jobs,n_outputs,expected", [
    (None, 6, (1, None)), (1, 6, (1, 1)), (2, 6, (2, 1)), (4, 2, (2, 2)),
    (5, 2, (2, 2)), (3, 1, (1, 3))])
def test_output_threads_fit_outputs_first(n_jobs, n_outputs, expected):
    assert _solvers.output_threads(n_jobs, n_outputs) == expected


def test_output_threads_negative_n_jobs_counts_cpus(monkeypatch):
    monkeypatch.setattr(_solvers.joblib, "cpu_count", lambda: 4)
    assert _solvers.output_threads(-1, 10) == (4, 1)
    assert _solvers.output_threads(-2, 10) == (3, 1)
    assert _solvers.output_threads(-1, 2) == (2, 2)


@pytest.mark.parametrize("dense", [True, False])
def test_cd_warning_suggests_lbfgs_on_dense_data(dense):
    X, y = _problem(n_classes=2)
    if not dense:
        X = sp.random(120, 40, density=0.05, format="csr", random_state=0)
    est = FactorizationMachineClassifier(n_components=2, max_iter=1, tol=0.0,
                                         solver="cd", random_state=0)
    with pytest.warns(ConvergenceWarning) as caught:
        est.fit(X, y)
    assert ("solver='lbfgs' (or 'auto')" in str(caught[0].message)) == dense
