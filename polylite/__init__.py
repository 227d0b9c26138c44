"""polylite: fast factorization machines and polynomial networks for sparse data.

Estimators follow the scikit-learn API and accept NumPy arrays and SciPy sparse matrices.

Layout (dependencies point down):

- estimators, one subpackage per family: :mod:`polylite.polynomial` (factorization
  machines and polynomial networks), :mod:`polylite.multioutput` (multi-output networks
  and factorization machines with a shared basis, by conditional gradient),
  :mod:`polylite.ordinal` (ordinal regression by McRank on them), :mod:`polylite.bayes`
  (Bayesian factorization machines, sampled with the coordinate descent passes of
  :mod:`polylite.polynomial`), :mod:`polylite.ranking` (factorization machines ranked
  by pairwise losses on positive-only data);
- the recommender workflow: :mod:`polylite.datasets` (MovieLens readers, synthetic data),
  :mod:`polylite.preprocessing` (:class:`FieldEncoder`), :mod:`polylite.metrics` (RMSE,
  ranking metrics) and :mod:`polylite.recommend` (top-N recommendation);
- the data layer: :mod:`polylite.relational` (:class:`RelationalMatrix`: interaction rows
  whose repeated user and item parts are tables stored once), which the factorization
  machines' solvers and :mod:`polylite.kernels` take wherever they take CSR rows;
- Dask clusters: :mod:`polylite.dask` (optional extra ``dask``);
- shared machinery: parameter checks (``_validation``), the model file format and its
  class registry (``_io``: :func:`save` and :func:`load`);
- kernels: :mod:`polylite.kernels` (validated) over the Cython ``_kernels`` and
  ``_losses``.
"""
__version__ = "0.1.0.dev0"

from ._io import ModelFileError, load, save  # noqa: E402
from .bayes import (BayesianFactorizationMachineClassifier,  # noqa: E402
                    BayesianFactorizationMachineRegressor)
from .multioutput import (MultiOutputPolynomialClassifier,  # noqa: E402
                          MultiOutputPolynomialRegressor)
from .ordinal import OrdinalMcRankRegressor  # noqa: E402
from .polynomial import (FactorizationMachineClassifier,  # noqa: E402
                         FactorizationMachineRegressor, PolynomialNetworkClassifier,
                         PolynomialNetworkRegressor)
from .preprocessing import FieldEncoder  # noqa: E402
from .ranking import FactorizationMachineRanker  # noqa: E402
from .relational import RelationalMatrix, RelationBlock  # noqa: E402

__all__ = ["FactorizationMachineRegressor", "FactorizationMachineClassifier",
           "PolynomialNetworkRegressor", "PolynomialNetworkClassifier",
           "BayesianFactorizationMachineRegressor", "BayesianFactorizationMachineClassifier",
           "MultiOutputPolynomialClassifier", "MultiOutputPolynomialRegressor",
           "OrdinalMcRankRegressor", "FactorizationMachineRanker", "FieldEncoder", "RelationalMatrix", "RelationBlock",
           "load", "save", "ModelFileError", "__version__"]
