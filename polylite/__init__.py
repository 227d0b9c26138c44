"""polylite: fast factorization machines and polynomial networks for sparse data.

Estimators follow the scikit-learn API and accept NumPy arrays and SciPy sparse matrices.

Layout (dependencies point down):

- estimators, one subpackage per family: :mod:`polylite.polynomial` (factorization
  machines and polynomial networks), :mod:`polylite.bayes` (Bayesian factorization
  machines, sampled with the coordinate descent passes of :mod:`polylite.polynomial`),
  :mod:`polylite.multioutput` (multi-output networks and factorization machines with a
  shared basis, by conditional gradient);
- shared machinery: parameter checks (``_validation``), the model file format and its
  class registry (``_io``);
- kernels: :mod:`polylite.kernels` (validated) over the Cython ``_kernels`` and
  ``_losses``.
"""
__version__ = "0.1.0.dev0"

from ._io import ModelFileError, load  # noqa: E402
from .multioutput import (MultiOutputPolynomialClassifier,  # noqa: E402
                          MultiOutputPolynomialRegressor)
from .polynomial import (FactorizationMachineClassifier,  # noqa: E402
                         FactorizationMachineRegressor, PolynomialNetworkClassifier,
                         PolynomialNetworkRegressor)
from .bayes import (BayesianFactorizationMachineClassifier,  # noqa: E402
                    BayesianFactorizationMachineRegressor)

__all__ = ["FactorizationMachineRegressor", "FactorizationMachineClassifier",
           "PolynomialNetworkRegressor", "PolynomialNetworkClassifier",
           "BayesianFactorizationMachineRegressor", "BayesianFactorizationMachineClassifier",
           "MultiOutputPolynomialClassifier", "MultiOutputPolynomialRegressor", "load",
           "ModelFileError", "__version__"]
