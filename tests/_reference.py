"""Independent NumPy references shared by the test modules (not the package's code)."""
import numpy as np


def reference_loss(loss, y, p):
    """Per-sample loss values written from the formulas, not from polylite._losses."""
    if loss == "squared":
        return 0.5 * (p - y) ** 2
    if loss == "logistic":
        return np.logaddexp(0.0, -y * p)
    if loss == "squared_hinge":
        return np.maximum(0.0, 1.0 - y * p) ** 2
    raise AssertionError(loss)
