"""Checks of estimator parameters shared by every model family.

scikit-learn's convention: ``__init__`` stores its arguments as they are
(:func:`store_init_params`), and ``fit`` validates them with these functions, which raise
ValueError naming the parameter and the value received.
"""
import numbers

import numpy as np

# joblib and scikit-learn are imported where used: polylite.kernels (and through it the
# command line's predictions) imports this module without them.

__all__ = ["check_number", "check_choice", "check_bool", "check_n_jobs",
           "check_random_state_param", "store_init_params", "row_threads",
           "MIN_ROWS_PER_THREAD"]

# Below this many rows per thread, a pass over the rows is too short for threads to pay.
MIN_ROWS_PER_THREAD = 20_000


#: Bounds of every integer parameter unless narrower ones are given: the compiled code
#: counts in C ints, and Python integers have no size limit.
INT_MIN, INT_MAX = -2**31, 2**31 - 1


def check_number(value, name, *, low=None, high=None, integer=False, low_open=False,
                 high_open=False):
    """Return ``value`` if it is a finite (integer) number in the given range (``low``
    and ``high`` excluded with ``low_open`` and ``high_open``).

    Integers must also lie in [INT_MIN, INT_MAX] (C ints) when ``low``/``high`` are not
    given.
    """
    kind = numbers.Integral if integer else numbers.Real
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, kind):
        raise ValueError(f"{name} must be {'an integer' if integer else 'a number'}, "
                         f"got {value!r}")
    if integer:
        low = INT_MIN if low is None else low
        high = INT_MAX if high is None else high
    else:
        try:
            finite = bool(np.isfinite(float(value)))
        except OverflowError:  # a Python integer beyond the float range
            finite = False
        if not finite:
            raise ValueError(f"{name} must be finite, got {value!r}")
    if low is not None and (value < low or (low_open and value == low)):
        raise ValueError(f"{name} must be {'>' if low_open else '>='} {low}, got {value!r}")
    if high is not None and (value > high or (high_open and value == high)):
        raise ValueError(f"{name} must be {'<' if high_open else '<='} {high}, got "
                         f"{value!r}")
    return value


def check_choice(value, name, choices):
    """Return ``value`` if it is one of the strings ``choices``."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {list(choices)}, got {value!r}")
    return value


def check_bool(value, name):
    """Return ``value`` if it is a Python or NumPy bool."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be a bool, got {value!r}")
    return value


def check_n_jobs(n_jobs):
    """``n_jobs`` as scikit-learn takes it: None, a positive count, or a negative count
    back from every CPU (-1: all)."""
    if n_jobs is not None:
        check_number(n_jobs, "n_jobs", integer=True)
        if n_jobs == 0:
            raise ValueError("n_jobs must be None, a positive number of threads or a "
                             "negative count back from every CPU (-1: all), got 0")
    return n_jobs


def row_threads(n_jobs, n_rows, min_rows_per_thread=None):
    """Threads for a pass over ``n_rows`` rows: ``n_jobs`` as in scikit-learn (None: 1;
    -1: every CPU this process may use, as joblib counts them, with its affinity mask and
    container quota; -2: all but one...), but at most one per ``min_rows_per_thread``
    rows (default :data:`MIN_ROWS_PER_THREAD`, read at call time), and at least 1."""
    if n_jobs is None:
        return 1
    if n_jobs < 0:
        import joblib
        n_jobs = joblib.cpu_count() + 1 + n_jobs
    if min_rows_per_thread is None:
        min_rows_per_thread = MIN_ROWS_PER_THREAD
    return int(max(1, min(n_jobs, n_rows // min_rows_per_thread)))


def check_random_state_param(random_state):
    """Raise a ValueError naming ``random_state`` if NumPy cannot seed from it."""
    from sklearn.utils import check_random_state
    try:
        return check_random_state(random_state)
    except ValueError:
        raise ValueError(f"random_state must be None, an integer in [0, 2**32) or a "
                         f"numpy RandomState, got {random_state!r}") from None


def store_init_params(estimator, params):
    """Store an estimator's constructor arguments (``locals()`` of its ``__init__``) as
    they are, under their own names: scikit-learn's convention, validation is for fit."""
    for name, value in params.items():
        if name != "self":
            setattr(estimator, name, value)
