"""polylite: fast factorization machines and polynomial networks for sparse data.

Estimators follow the scikit-learn API and accept NumPy arrays and SciPy sparse matrices.

Layout (dependencies point down):

- estimators, one subpackage per family: :mod:`polylite.polynomial` (factorization
  machines and polynomial networks), :mod:`polylite.multioutput` (multi-output networks
  and factorization machines with a shared basis, by conditional gradient),
  :mod:`polylite.ordinal` (ordinal regression by McRank on them), :mod:`polylite.bayes`
  (Bayesian factorization machines, sampled, or at degree 2 fitted by mean-field
  variational inference, with the coordinate descent passes of
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

The names below are imported on first use (PEP 562), so that ``import polylite`` is
quick and the ``polylite`` command answers ``--help`` without loading NumPy or
scikit-learn; ``from polylite import X`` and ``polylite.X`` work as usual.
"""
import importlib
from typing import TYPE_CHECKING

# Where each public name is defined, relative to this package.
_EXPORTS = {
    "FactorizationMachineRegressor": "polynomial",
    "FactorizationMachineClassifier": "polynomial",
    "FieldAwareFactorizationMachineRegressor": "polynomial",
    "FieldAwareFactorizationMachineClassifier": "polynomial",
    "FieldWeightedFactorizationMachineRegressor": "polynomial",
    "FieldWeightedFactorizationMachineClassifier": "polynomial",
    "PolynomialNetworkRegressor": "polynomial",
    "PolynomialNetworkClassifier": "polynomial",
    "BayesianFactorizationMachineRegressor": "bayes",
    "BayesianFactorizationMachineClassifier": "bayes",
    "BayesianFactorizationMachineOrdinalRegressor": "bayes",
    "VariationalFactorizationMachineRegressor": "bayes",
    "VariationalFactorizationMachineClassifier": "bayes",
    "MultiOutputPolynomialClassifier": "multioutput",
    "MultiOutputPolynomialRegressor": "multioutput",
    "OrdinalMcRankRegressor": "ordinal",
    "FactorizationMachineRanker": "ranking",
    "FieldEncoder": "preprocessing",
    "RelationalMatrix": "relational",
    "RelationBlock": "relational",
    "load": "_io",
    "save": "_io",
    "ModelFileError": "_io",
}

__all__ = [*_EXPORTS, "__version__"]

# Subpackages and modules reachable as attributes (``polylite.kernels.predict``) without
# an import of their own, as when this package imported them all.  Not the optional
# ``dask``, which needs its extra.
_SUBMODULES = ("bayes", "datasets", "estimator_checks", "kernels", "metrics",
               "multioutput", "ordinal", "polynomial", "preprocessing", "ranking",
               "recommend", "relational")

# The modules whose classes a model file may name: each registers its classes with
# ``_io`` when imported, so every one is imported before ``load`` reads a file.
_MODEL_MODULES = ("polynomial", "bayes", "multioutput", "ordinal", "ranking",
                  "preprocessing")

if TYPE_CHECKING:  # static analysers and IDEs see the names as ordinary imports
    from ._io import ModelFileError, load, save  # noqa: F401
    from .bayes import (BayesianFactorizationMachineClassifier,  # noqa: F401
                        BayesianFactorizationMachineOrdinalRegressor,
                        BayesianFactorizationMachineRegressor,
                        VariationalFactorizationMachineClassifier,
                        VariationalFactorizationMachineRegressor)
    from .multioutput import (MultiOutputPolynomialClassifier,  # noqa: F401
                              MultiOutputPolynomialRegressor)
    from .ordinal import OrdinalMcRankRegressor  # noqa: F401
    from .polynomial import (FactorizationMachineClassifier,  # noqa: F401
                             FactorizationMachineRegressor,
                             FieldAwareFactorizationMachineClassifier,
                             FieldAwareFactorizationMachineRegressor,
                             FieldWeightedFactorizationMachineClassifier,
                             FieldWeightedFactorizationMachineRegressor,
                             PolynomialNetworkClassifier, PolynomialNetworkRegressor)
    from .preprocessing import FieldEncoder  # noqa: F401
    from .ranking import FactorizationMachineRanker  # noqa: F401
    from .relational import RelationalMatrix, RelationBlock  # noqa: F401


def _version():
    """The installed distribution's version: pyproject.toml holds the only copy."""
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("polylite")
    except PackageNotFoundError:  # the source tree on sys.path, not installed
        return "unknown"


def _import_model_modules():
    """Import every module whose classes a model file may name (each registers them)."""
    for module in _MODEL_MODULES:
        importlib.import_module(f"{__name__}.{module}")


def __getattr__(name):
    if name == "__version__":
        value = _version()
    elif name in _EXPORTS:
        if name == "load":
            _import_model_modules()
        value = getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    elif name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # found once: later lookups do not come here
    return value


def __dir__():
    return sorted({*globals(), *__all__, *_SUBMODULES})
