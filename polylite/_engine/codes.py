"""The codes the compiled passes take for the names the estimators take."""

__all__ = ["KERNELS"]

#: Kernel names accepted by :func:`polylite.kernels.predict` and the estimators, with
#: their codes.
KERNELS = {"anova": 0, "all-subsets": 1, "polynomial": 2, "field-aware": 3}
