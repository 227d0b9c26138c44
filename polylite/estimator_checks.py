"""Which of scikit-learn's estimator checks a polylite estimator fails by design.

scikit-learn (>= 1.6) reads no such declaration from an estimator: its ``check_estimator``
and ``parametrize_with_checks`` take the expected failures as an argument instead (the
``_xfail_checks`` tag is gone).  Pass them this way, so that your run of the checks agrees
with polylite's own test suite::

    from sklearn.utils.estimator_checks import check_estimator
    from polylite import FactorizationMachineRegressor
    from polylite.estimator_checks import expected_failed_checks

    est = FactorizationMachineRegressor(solver="sgd")
    check_estimator(est, expected_failed_checks=expected_failed_checks(est))
"""

__all__ = ["expected_failed_checks"]


def expected_failed_checks(estimator):
    """The scikit-learn checks ``estimator`` is expected to fail, with the reasons.

    Parameters
    ----------
    estimator : estimator instance
        A polylite estimator (with its parameters set: the answer can depend on them);
        any other estimator has none.

    Returns
    -------
    checks : dict of str to str
        Check name to the reason it fails, as ``check_estimator``'s
        ``expected_failed_checks`` takes them.
    """
    declared = getattr(estimator, "_expected_failed_checks", None)
    return dict(declared()) if declared is not None else {}
