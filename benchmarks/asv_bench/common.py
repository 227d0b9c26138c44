"""Data and timing shared by the asv benchmarks.

The data are those of the standalone scripts (``bench_cd.py``, ``bench_sgd.py``,
``bench_threads.py``...): ``polylite.datasets.make_recommender`` with a one-hot user
(50,000 levels) and item (30,000 levels) field of power-law popularity and 3 numeric
columns, 5 nonzeros per row, k = 10, but 2 x 10^5 rows instead of 10^6 so that the whole
suite runs in a few minutes per commit.  Everything runs on one thread (``n_jobs=1``,
BLAS and OpenMP pools limited to one thread).

Every ``track_*`` benchmark returns a pass's time divided by the time of SciPy's
``X @ P`` (P dense, d x k) measured right after it, the median of several such ratios:
the unit is "x X@P", comparable across machines.  Both are CPU seconds of the process
(``time.process_time``, as the "cpu" columns of ``bench_bayes_speed.py``): on one
thread they are the pass's own time, which other work on a shared machine moves far
less than wall seconds (it still shares the caches and the memory bus).
"""
import os
import sys
import time
import warnings

import numpy as np

# The standalone scripts' helpers (benchmarks/_timing.py), one folder up.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _timing import timings  # noqa: E402

ROWS = 200_000
USERS = 50_000
ITEMS = 30_000
NUMERIC = 3
COMPONENTS = 10
UNIT = "x X@P"
CLOCK = time.process_time

_cache = {}


def single_thread():
    """Limit the BLAS and OpenMP pools to one thread for the rest of the process."""
    from threadpoolctl import threadpool_limits
    threadpool_limits(1)


def quiet():
    """Silence the estimators' warnings (a few epochs do not converge, by design)."""
    warnings.simplefilter("ignore")


def recommender(dtype=np.float64):
    """(X, y, P): the recommender-shaped CSR matrix, its targets and a dense d x k P
    (normal, seed 0) for ``X @ P``; made once per process."""
    key = np.dtype(dtype).name
    if key not in _cache:
        from polylite.datasets import make_recommender
        X, y = make_recommender(ROWS, USERS, ITEMS, NUMERIC, dtype=dtype, random_state=0)
        P = np.random.default_rng(0).normal(size=(X.shape[1], COMPONENTS)).astype(dtype)
        X @ P  # page in X and P
        _cache[key] = X, y, P
    return _cache[key]


def cpu_times(fn, repeat=1):
    """CPU seconds of ``repeat`` successive calls of ``fn()``, as a list."""
    return timings(fn, repeat, clock=CLOCK)


def paired_ratio(pairs):
    """The median over ``(seconds, xp_seconds)`` pairs of ``seconds`` over the median
    of ``xp_seconds`` (the ``X @ P`` times taken next to it), to 3 decimals: each pass
    is measured against ``X @ P`` under the same machine load."""
    return round(float(np.median([t / np.median(xp) for t, xp in pairs])), 3)


class PassTimer:
    """Times every call of ``owner.name`` (a module's function or a class's method that
    polylite looks up at each call, as the scripts' wrappers do), and ``X @ P``
    ``xp_each`` times right after each call, outside the call's time.

    Use as a context manager around a fit; ``ratio()`` is the median over the calls of
    the call's time over the median of the ``X @ P`` times next to it."""

    def __init__(self, owner, name, X, P, xp_each=3):
        self.owner, self.name, self.X, self.P = owner, name, X, P
        self.xp_each = xp_each
        self.calls, self.xp = [], []

    def _xp(self):
        X, P = self.X, self.P
        return cpu_times(lambda: X @ P, self.xp_each)

    def __enter__(self):
        original = self.original = self.owner.__dict__[self.name]
        if isinstance(original, (staticmethod, classmethod)):
            raise TypeError(f"{self.name}: wrap plain functions and methods only")

        def timed(*args, **kwargs):
            start = CLOCK()
            out = original(*args, **kwargs)
            self.calls.append(CLOCK() - start)
            self.xp.append(self._xp())
            return out

        self._xp()  # warm-up
        setattr(self.owner, self.name, timed)
        return self

    def __exit__(self, *exc):
        setattr(self.owner, self.name, self.original)
        return False

    def ratio(self):
        if not self.calls:
            raise RuntimeError(f"{self.name} was never called")
        return paired_ratio(zip(self.calls, self.xp))


def pass_ratio(owner, name, X, P, fit):
    """:class:`PassTimer`'s ratio of ``owner.name``'s calls during ``fit()``."""
    with PassTimer(owner, name, X, P) as timer:
        fit()
    return timer.ratio()


class RecommenderRows:
    """What the pass benchmarks share: the recommender rows (``X``, ``y``, the
    yardstick's ``P``) on one thread, warnings silenced, and by default the degrees 2
    and 3 as the parameter.  It has no benchmark of its own."""
    params = [2, 3]
    param_names = ["degree"]
    unit = UNIT
    timeout = 300

    def setup(self, *params):
        single_thread()
        quiet()
        self.X, self.y, self.P = recommender()


def interleaved_ratio(fn, X, P, repeat=15):
    """``paired_ratio`` of ``repeat`` calls of ``fn()``, each followed by 3 of
    ``X @ P``, after a warm-up call of each."""
    fn()
    X @ P
    pairs = []
    for _ in range(repeat):
        pairs.append((cpu_times(fn)[0], cpu_times(lambda: X @ P, 3)))
    return paired_ratio(pairs)
