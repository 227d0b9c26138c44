"""Bayesian factorization machines of any degree, trained by Gibbs sampling (MCMC): the
coordinate descent passes of :mod:`polylite.polynomial` with each step replaced by a draw
from the coordinate's conditional (``_sampler``), wrapped by the estimators (``fm``, and
``ordinal``, the ordered probit model); and their mean-field variational approximation at
degree 2 (``variational``), fitted by coordinate ascent with the same passes."""
from .fm import BayesianFactorizationMachineClassifier, BayesianFactorizationMachineRegressor
from .ordinal import BayesianFactorizationMachineOrdinalRegressor
from .variational import (VariationalFactorizationMachineClassifier,
                          VariationalFactorizationMachineRegressor)

__all__ = ["BayesianFactorizationMachineRegressor", "BayesianFactorizationMachineClassifier",
           "BayesianFactorizationMachineOrdinalRegressor",
           "VariationalFactorizationMachineRegressor",
           "VariationalFactorizationMachineClassifier"]
