"""Passes over the rows against ``X @ P``: prediction, coordinate descent, SGD, AdaGrad
and L-BFGS (as ``bench_kernels.py``, ``bench_cd.py``, ``bench_sgd.py``,
``bench_sgd_watched.py`` and ``bench_threads.py``, on 2 x 10^5 rows, one thread).

A solver's pass is timed by wrapping the Cython function that polylite's drivers call
(``_cd.cd_epoch``, ``_sgd.sgd_epoch``, ``_sgd.objective_gradient``), as the scripts do,
so the figure is the pass alone; ``track_fit_epoch`` times whole fits instead (the
shuffle, the objective watched after each epoch and the checks included).
"""
import numpy as np

from .common import (CLOCK, COMPONENTS, RecommenderRows, cpu_times, interleaved_ratio,
                     paired_ratio, pass_ratio, recommender, single_thread)


class Predict(RecommenderRows):
    """``polylite.kernels.predict`` of the degree-m ANOVA term (no linear term), as
    ``bench_kernels.py``."""

    def setup(self, degree):
        super().setup(degree)
        self.F = np.random.default_rng(1).normal(scale=0.1, size=self.P.shape)

    def _predict(self, degree):
        from polylite import kernels
        return kernels.predict(self.X, self.F, degrees=[degree], check_input=False,
                               n_jobs=1)

    def track_predict(self, degree):
        return interleaved_ratio(lambda: self._predict(degree), self.X, self.P)

    def time_predict(self, degree):
        self._predict(degree)

    time_predict.timer = CLOCK


class XP:
    """The yardstick itself, in CPU seconds (its drift across runs shows the
    machine's)."""
    timer = CLOCK
    timeout = 120

    def setup(self):
        single_thread()
        self.X, _, self.P = recommender()

    def time_x_at_p(self):
        self.X @ self.P


def _fm(degree, solver, max_iter, **params):
    """The factorization machine the pass benchmarks fit, on one thread."""
    from polylite import FactorizationMachineRegressor
    return FactorizationMachineRegressor(degree=degree, n_components=COMPONENTS,
                                         solver=solver, max_iter=max_iter, tol=0,
                                         random_state=0, init_scale=0.1, n_jobs=1,
                                         **params)


class CDEpoch(RecommenderRows):
    """One coordinate descent epoch (``_cd.cd_epoch``), median of the 11 epochs of one
    fit, as ``bench_cd.py``."""

    def track_cd_epoch(self, degree):
        from polylite._engine import _cd
        fm = _fm(degree, "cd", 11)
        return pass_ratio(_cd, "cd_epoch", self.X, self.P, lambda: fm.fit(self.X, self.y))

    def track_cd_fit(self, degree):
        """A whole fit of 3 epochs (the regrouping of the nonzeros, the first
        predictions, the epochs and their objective), against ``X @ P`` timed before
        and after it; median of 3."""
        X, P = self.X, self.P
        pairs = []
        for _ in range(3):
            fm = _fm(degree, "cd", 3)
            xp = cpu_times(lambda: X @ P)
            seconds = cpu_times(lambda: fm.fit(self.X, self.y))[0]
            pairs.append((seconds, xp + cpu_times(lambda: X @ P)))
        return paired_ratio(pairs)


# eta0 of the scripts: small enough that nothing diverges on these data.
ETA0 = {"sgd": 0.001, "adagrad": 0.05}


class StochasticEpoch(RecommenderRows):
    """SGD and AdaGrad at degree 2, batch_size 1 (``bench_sgd.py``,
    ``bench_sgd_watched.py``)."""
    params = ["sgd", "adagrad"]
    param_names = ["solver"]

    def _estimator(self, solver, epochs):
        return _fm(2, solver, epochs, eta0=ETA0[solver], batch_size=1)

    def track_epoch(self, solver):
        """The Cython pass (``_sgd.sgd_epoch``), median of 11 epochs of one fit."""
        from polylite._engine import _sgd
        fm = self._estimator(solver, 11)
        return pass_ratio(_sgd, "sgd_epoch", self.X, self.P, lambda: fm.fit(self.X, self.y))

    def track_fit_epoch(self, solver):
        """A whole fit's epoch: (fit of 6 epochs - fit of 2) / 4, against ``X @ P``
        timed before, between and after the two fits; median of 5, as
        ``bench_sgd_watched.py``."""
        X, P = self.X, self.P
        pairs = []
        for _ in range(5):
            seconds, xp = [], cpu_times(lambda: X @ P)
            for n in (2, 6):
                fm = self._estimator(solver, n)
                seconds += cpu_times(lambda: fm.fit(self.X, self.y))
                xp += cpu_times(lambda: X @ P)
            pairs.append(((seconds[1] - seconds[0]) / 4, xp))
        return paired_ratio(pairs)


class LBFGSPass(RecommenderRows):
    """L-BFGS's value and gradient over every row (``_sgd.objective_gradient``), median
    of the calls of a fit of 11 iterations, as ``bench_threads.py``."""
    params = [2]

    def track_value_gradient(self, degree):
        from polylite._engine import _sgd
        fm = _fm(degree, "lbfgs", 11)
        return pass_ratio(_sgd, "objective_gradient", self.X, self.P,
                          lambda: fm.fit(self.X, self.y))

