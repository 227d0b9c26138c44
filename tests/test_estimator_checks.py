"""scikit-learn's estimator checks on the factorization machine estimators.

No check is expected to fail: ``EXPECTED_FAILED_CHECKS`` maps a check name to the written
reason it fails, and is empty.  Should one ever be added, ``xfail_strict`` makes the entry
fail the suite once the check passes again.
"""
import numpy as np
import pytest
from sklearn.base import clone, is_classifier, is_regressor
from sklearn.utils import get_tags
from sklearn.utils.estimator_checks import parametrize_with_checks

from polylite import FactorizationMachineClassifier, FactorizationMachineRegressor

# The checks fit on small random problems with few epochs; not converging is expected.
pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

# The defaults (solver="auto": "lbfgs" on the checks' dense data, "cd" on their few
# sparse ones), then the model variants with coordinate descent.  (The all-subsets
# classifier with "lbfgs" fails the sample-weight equivalence checks by ~1e-7: on a
# non-convex objective, the rounding of weighted against repeated rows sends L-BFGS's
# line searches along slightly different paths, with a tighter tol too.)
ESTIMATORS = [
    FactorizationMachineRegressor(),
    FactorizationMachineClassifier(),
    FactorizationMachineRegressor(degree=3, lower_degrees="shared", n_components=3,
                                  max_iter=50, solver="cd"),
    FactorizationMachineRegressor(degree=4, n_components=2, max_iter=50, solver="cd"),
    FactorizationMachineRegressor(kernel="all-subsets", n_components=3, max_iter=50,
                                  solver="cd"),
    FactorizationMachineClassifier(degree=3, lower_degrees="none", loss="squared_hinge",
                                   n_components=3, max_iter=50, solver="cd"),
    FactorizationMachineClassifier(kernel="all-subsets", n_components=3, max_iter=50,
                                   solver="cd"),
]

#: check name -> reason; only checks that are known to fail, each with its reason.
EXPECTED_FAILED_CHECKS = {}


def _expected_failed_checks(estimator):
    return EXPECTED_FAILED_CHECKS


@parametrize_with_checks(ESTIMATORS, expected_failed_checks=_expected_failed_checks,
                         xfail_strict=True)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)


@pytest.mark.parametrize("estimator", ESTIMATORS[:2], ids=["regressor", "classifier"])
def test_tags_and_kind(estimator):
    tags = get_tags(estimator)
    assert tags.input_tags.sparse
    assert tags.requires_fit
    if is_classifier(estimator):
        assert tags.estimator_type == "classifier"
        assert tags.classifier_tags.multi_class
        assert not is_regressor(estimator)
    else:
        assert tags.estimator_type == "regressor"


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=repr)
def test_clone_and_params_round_trip(estimator):
    params = estimator.get_params()
    twin = clone(estimator)
    assert twin.get_params() == params
    twin.set_params(**params)
    assert repr(twin) == repr(estimator)


def test_default_fit_on_small_sparse_problem():
    """The defaults work end to end on a small sparse regression problem."""
    import scipy.sparse as sp
    rng = np.random.RandomState(0)
    X = sp.random(100, 20, density=0.2, format="csr", random_state=rng)
    y = X @ rng.randn(20) + rng.randn(100) * 0.01
    est = FactorizationMachineRegressor(random_state=0).fit(X, y)
    assert est.score(X, y) > 0.9
