"""polylite: fast factorization machines and polynomial networks for sparse data.

Estimators follow the scikit-learn API and accept NumPy arrays and SciPy sparse matrices.
"""
__version__ = "0.1.0.dev0"

from .fm import FactorizationMachineClassifier, FactorizationMachineRegressor  # noqa: E402
from .pn import PolynomialNetworkClassifier, PolynomialNetworkRegressor  # noqa: E402
from ._io import load  # noqa: E402

__all__ = ["FactorizationMachineRegressor", "FactorizationMachineClassifier",
           "PolynomialNetworkRegressor", "PolynomialNetworkClassifier", "load",
           "__version__"]
