"""Factorization machines and polynomial networks: one output per model (one-vs-rest for
several classes), fitted by coordinate descent (``_cd``), SGD/AdaGrad or L-BFGS (``_sgd``),
driven epoch by epoch from Python (``_solvers``, ``_base``)."""
from .fm import FactorizationMachineClassifier, FactorizationMachineRegressor
from .pn import PolynomialNetworkClassifier, PolynomialNetworkRegressor

__all__ = ["FactorizationMachineRegressor", "FactorizationMachineClassifier",
           "PolynomialNetworkRegressor", "PolynomialNetworkClassifier"]
