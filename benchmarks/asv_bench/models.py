"""The Bayesian FM's Gibbs sweep and the multi-output network's basis vector against
``X @ P`` (as ``bench_bayes_speed.py`` and ``bench_multioutput_speed.py``, on 2 x 10^5
rows, one thread)."""
import numpy as np

from .common import (COMPONENTS, ITEMS, NUMERIC, UNIT, USERS, RecommenderRows,
                     pass_ratio, quiet, recommender, single_thread)


class GibbsSweep(RecommenderRows):
    """One sweep of the Gibbs chain (``GibbsChain.sweep``: the hyperparameter draws and
    the pass over the coordinates), median of the 11 sweeps of a fit; user, item and
    numeric columns as three feature groups."""

    def setup(self, degree):
        super().setup(degree)
        self.groups = np.repeat([0, 1, 2], [USERS, ITEMS, NUMERIC])

    def track_sweep(self, degree):
        from polylite import BayesianFactorizationMachineRegressor
        from polylite.bayes._sampler import GibbsChain
        est = BayesianFactorizationMachineRegressor(
            degree=degree, n_components=COMPONENTS, n_iter=11, n_burn_in=0, n_jobs=1,
            random_state=0)
        return pass_ratio(GibbsChain, "sweep", self.X, self.P,
                          lambda: est.fit(self.X, self.y, feature_groups=self.groups))


N_OUTPUTS = 5


class MultiOutputBasis:
    """One basis vector of ``MultiOutputPolynomialRegressor(kernel="fm",
    loss="logistic", penalty="l1/linf", refit="output")`` on 5 binary outputs (the
    planted ratings cut at their quantiles): one iteration of the conditional gradient
    (``ConditionalGradient.iteration``: selection by the power method on every output,
    then the refit), median of the 8 of a fit.  As in ``bench_multioutput_speed.py``,
    the yardstick's P has one column per output (d x 5)."""
    unit = UNIT
    timeout = 300

    def setup(self):
        single_thread()
        quiet()
        self.X, y, _ = recommender()
        levels = np.quantile(y, np.linspace(0, 1, N_OUTPUTS + 2)[1:-1])
        self.Y = np.where(y[:, None] <= levels, 1.0, -1.0)
        self.P = np.random.default_rng(0).standard_normal((self.X.shape[1], N_OUTPUTS))

    def track_basis_vector(self):
        from polylite import MultiOutputPolynomialRegressor
        from polylite.multioutput._conditional_gradient import ConditionalGradient
        est = MultiOutputPolynomialRegressor(
            loss="logistic", kernel="fm", penalty="l1/linf", tau=10.0, refit="output",
            max_basis=8, tol=0, n_jobs=1, random_state=0)
        return pass_ratio(ConditionalGradient, "iteration", self.X, self.P,
                          lambda: est.fit(self.X, self.Y))
