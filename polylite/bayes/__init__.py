"""Bayesian factorization machines of any degree, trained by Gibbs sampling (MCMC): the
coordinate descent passes of :mod:`polylite.polynomial` with each step replaced by a draw
from the coordinate's conditional (``_sampler``), wrapped by the estimators (``fm``, and
``ordinal``, the ordered probit model)."""
from .fm import BayesianFactorizationMachineClassifier, BayesianFactorizationMachineRegressor
from .ordinal import BayesianFactorizationMachineOrdinalRegressor

__all__ = ["BayesianFactorizationMachineRegressor", "BayesianFactorizationMachineClassifier",
           "BayesianFactorizationMachineOrdinalRegressor"]
