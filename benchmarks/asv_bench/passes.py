"""Passes over the rows against ``X @ P``: prediction, coordinate descent, SGD, AdaGrad
and L-BFGS (as ``bench_kernels.py``, ``bench_cd.py``, ``bench_sgd.py``,
``bench_sgd_watched.py`` and ``bench_threads.py``, on 2 x 10^5 rows, one thread).

A solver's pass is timed by wrapping the Cython function that polylite's drivers call
(``_cd.cd_epoch``, ``_sgd.sgd_epoch``, ``_sgd.objective_gradient``), as the scripts do,
so the figure is the pass alone; ``track_fit_epoch`` times whole fits instead (the
shuffle, the objective watched after each epoch and the checks included).
"""
import numpy as np

from .common import (CLOCK, COMPONENTS, UNIT, PassTimer, cpu_times, interleaved_ratio,
                     paired_ratio, quiet, recommender, single_thread)


class Predict:
    """``polylite.kernels.predict`` of the degree-m ANOVA term (no linear term), as
    ``bench_kernels.py``."""
    params = [2, 3]
    param_names = ["degree"]
    unit = UNIT
    timeout = 300

    def setup(self, degree):
        single_thread()
        self.X, _, self.P = recommender()
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


class CDEpoch:
    """One coordinate descent epoch (``_cd.cd_epoch``), median of the 11 epochs of one
    fit, as ``bench_cd.py``."""
    params = [2, 3]
    param_names = ["degree"]
    unit = UNIT
    timeout = 300

    def setup(self, degree):
        single_thread()
        quiet()
        self.X, self.y, self.P = recommender()

    def track_cd_epoch(self, degree):
        from polylite import FactorizationMachineRegressor
        from polylite.polynomial import _cd
        fm = FactorizationMachineRegressor(degree=degree, n_components=COMPONENTS,
                                           solver="cd", max_iter=11, tol=0,
                                           random_state=0, init_scale=0.1, n_jobs=1)
        with PassTimer(_cd, "cd_epoch", self.X, self.P) as timer:
            fm.fit(self.X, self.y)
        return timer.ratio()


# eta0 of the scripts: small enough that nothing diverges on these data.
ETA0 = {"sgd": 0.001, "adagrad": 0.05}


class StochasticEpoch:
    """SGD and AdaGrad at degree 2, batch_size 1 (``bench_sgd.py``,
    ``bench_sgd_watched.py``)."""
    params = ["sgd", "adagrad"]
    param_names = ["solver"]
    unit = UNIT
    timeout = 300

    def setup(self, solver):
        single_thread()
        quiet()
        self.X, self.y, self.P = recommender()

    def _estimator(self, solver, epochs):
        from polylite import FactorizationMachineRegressor
        return FactorizationMachineRegressor(degree=2, n_components=COMPONENTS,
                                             solver=solver, eta0=ETA0[solver],
                                             batch_size=1, max_iter=epochs, tol=0,
                                             random_state=0, init_scale=0.1, n_jobs=1)

    def track_epoch(self, solver):
        """The Cython pass (``_sgd.sgd_epoch``), median of 11 epochs of one fit."""
        from polylite.polynomial import _sgd
        with PassTimer(_sgd, "sgd_epoch", self.X, self.P) as timer:
            self._estimator(solver, 11).fit(self.X, self.y)
        return timer.ratio()

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


class LBFGSPass:
    """L-BFGS's value and gradient over every row (``_sgd.objective_gradient``), median
    of the calls of a fit of 11 iterations, as ``bench_threads.py``."""
    params = [2]
    param_names = ["degree"]
    unit = UNIT
    timeout = 300

    def setup(self, degree):
        single_thread()
        quiet()
        self.X, self.y, self.P = recommender()

    def track_value_gradient(self, degree):
        from polylite import FactorizationMachineRegressor
        from polylite.polynomial import _sgd
        fm = FactorizationMachineRegressor(degree=degree, n_components=COMPONENTS,
                                           solver="lbfgs", max_iter=11, tol=0,
                                           random_state=0, init_scale=0.1, n_jobs=1)
        with PassTimer(_sgd, "objective_gradient", self.X, self.P) as timer:
            fm.fit(self.X, self.y)
        return timer.ratio()

