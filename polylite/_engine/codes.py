"""The codes the compiled passes take for the names the estimators take."""

__all__ = ["KERNELS", "DEFAULT_MAX_ITER"]

#: Kernel names accepted by :func:`polylite.kernels.predict` and the estimators, with
#: their codes.
KERNELS = {"anova": 0, "all-subsets": 1, "polynomial": 2, "field-aware": 3,
           "field-weighted": 4}

#: The limit of epochs of each solver of the polynomial families for ``max_iter=None``.
DEFAULT_MAX_ITER = {"cd": 100, "sgd": 100, "adagrad": 100, "ftrl": 100, "lbfgs": 1000}
