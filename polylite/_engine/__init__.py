"""The engine under every model family (see the Architecture page of the documentation).

- the kernel layer and the loss table: ``_kernels``, ``_losses`` (compiled);
- data layouts (``layouts``, ``csr``) and the problem a pass solves (``problem``,
  ``codes``);
- the passes: coordinate descent with its step rules (``_cd``, over relation tables
  ``_cd_tables``; the data it prepares, ``cd_data``), the stochastic passes over rows
  (``_sgd``) and over pairs (``_pairwise``), dense rows in NumPy (``dense``);
- the drivers the estimators call, epoch by epoch (``solvers``);
- the polynomial models' outputs from their parameters alone (``outputs``), which the
  estimators and the command line's predictions from a model file share.
"""
