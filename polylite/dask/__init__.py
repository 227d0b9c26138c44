"""Factorization machines trained on a Dask cluster (optional extra: ``pip install
polylite[dask]``).

The estimators take the parameters of :mod:`polylite`'s own and fit a Dask array ``X``
whose chunks are row blocks of ``scipy.sparse`` CSR matrices, with ``y`` a Dask array
chunked like ``X``'s rows.  The blocks are persisted on the workers and never gathered on
the client: only the model's parameters (and their gradients) travel.

- ``solver="lbfgs"``: every iteration sums the objective's value and gradient over the
  blocks (computed on the workers by polylite's kernels) and steps SciPy's L-BFGS-B on the
  client: the same fit as :class:`polylite.FactorizationMachineRegressor` with
  ``solver="lbfgs"`` on the concatenated rows, up to the rounding of the sums.
- ``solver="adagrad"``: every epoch, each block runs a local AdaGrad epoch from the current
  model (keeping its own AdaGrad statistics on its worker from one epoch to the next) and
  the client averages the blocks' parameters weighted by their rows (model averaging).
  The field-aware and field-weighted factorization machines are fitted so (their only
  solver here), with their fields, penalties and row normalisation as in memory.

No cluster is started by the library: the work runs on the client passed to ``fit``, else
on Dask's default scheduler (a ``dask.distributed.Client`` created earlier, or Dask's local
threads).
"""
from ._estimators import (FactorizationMachineClassifier, FactorizationMachineRegressor,
                          FieldAwareFactorizationMachineClassifier,
                          FieldAwareFactorizationMachineRegressor,
                          FieldWeightedFactorizationMachineClassifier,
                          FieldWeightedFactorizationMachineRegressor, load)

__all__ = ["FactorizationMachineRegressor", "FactorizationMachineClassifier",
           "FieldAwareFactorizationMachineRegressor",
           "FieldAwareFactorizationMachineClassifier",
           "FieldWeightedFactorizationMachineRegressor",
           "FieldWeightedFactorizationMachineClassifier", "load"]
