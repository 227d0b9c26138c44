"""Factorization machines (also field-aware and field-weighted) and polynomial networks: one
output per model (one-vs-rest for several classes), fitted by the engine's coordinate
descent, SGD/AdaGrad or L-BFGS (:mod:`polylite._engine`), driven epoch by epoch from
Python (``_base``)."""
from .ffm import (FieldAwareFactorizationMachineClassifier,
                  FieldAwareFactorizationMachineRegressor)
from .fm import FactorizationMachineClassifier, FactorizationMachineRegressor
from .fwfm import (FieldWeightedFactorizationMachineClassifier,
                   FieldWeightedFactorizationMachineRegressor)
from .pn import PolynomialNetworkClassifier, PolynomialNetworkRegressor

__all__ = ["FactorizationMachineRegressor", "FactorizationMachineClassifier",
           "PolynomialNetworkRegressor", "PolynomialNetworkClassifier",
           "FieldAwareFactorizationMachineRegressor",
           "FieldAwareFactorizationMachineClassifier",
           "FieldWeightedFactorizationMachineRegressor",
           "FieldWeightedFactorizationMachineClassifier"]
