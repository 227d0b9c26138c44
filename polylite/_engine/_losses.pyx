"""Python access to the loss functions of ``_losses.pxd`` (used by tests and estimators)."""
import numpy as np

#: The losses of one output, by name, with their codes (``_losses.pxd``).
LOSSES = {"squared": SQUARED, "logistic": LOGISTIC, "squared_hinge": SQUARED_HINGE}
#: The multi-class losses of the multi-output models, by name, with their codes.
MULTICLASS_LOSSES = {"logistic": MULTICLASS_LOGISTIC,
                     "smooth_hinge": MULTICLASS_SMOOTH_HINGE,
                     "squared_hinge": MULTICLASS_SQUARED_HINGE}
#: The pairwise ranking losses, by name, with their codes.
PAIRWISE_LOSSES = {"bpr": PAIRWISE_BPR, "warp": PAIRWISE_WARP}


def loss_code(name):
    """Integer code of the loss called ``name``, with a clear error for unknown names."""
    try:
        return LOSSES[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown loss {name!r}; expected one of {sorted(LOSSES)}") from None


def _vectorise(int loss, y, p, bint derivative):
    cdef const double[:] yv = np.ascontiguousarray(y, dtype=np.float64).ravel()
    cdef const double[:] pv = np.ascontiguousarray(p, dtype=np.float64).ravel()
    if yv.shape[0] != pv.shape[0]:
        raise ValueError(f"y has {yv.shape[0]} entries but p has {pv.shape[0]}")
    out = np.empty(yv.shape[0], dtype=np.float64)
    cdef double[:] ov = out
    cdef Py_ssize_t i
    with nogil:
        for i in range(yv.shape[0]):
            if derivative:
                ov[i] = loss_derivative(loss, yv[i], pv[i])
            else:
                ov[i] = loss_value(loss, yv[i], pv[i])
    return out


def loss(name, y, p):
    """Per-sample loss values of the named loss at labels ``y`` and predictions ``p``."""
    return _vectorise(loss_code(name), y, p, False)


def loss_gradient(name, y, p):
    """Per-sample derivatives d loss / d p of the named loss."""
    return _vectorise(loss_code(name), y, p, True)


def smoothness(name):
    """The smoothness constant mu of the named loss (bound on its second derivative)."""
    return loss_smoothness(loss_code(name))


def local_model(name, y, p):
    """(d loss / d p, curvature) of the named loss's local quadratic model at labels
    ``y`` and predictions ``p`` (``loss_local``: the model coordinate descent's passes
    over a relational input's tables minimise)."""
    cdef int code = loss_code(name)
    cdef const double[:] yv = np.ascontiguousarray(y, dtype=np.float64).ravel()
    cdef const double[:] pv = np.ascontiguousarray(p, dtype=np.float64).ravel()
    if yv.shape[0] != pv.shape[0]:
        raise ValueError(f"y has {yv.shape[0]} entries but p has {pv.shape[0]}")
    derivative = np.empty(yv.shape[0], dtype=np.float64)
    curvature = np.empty(yv.shape[0], dtype=np.float64)
    cdef double[:] dv = derivative, cv = curvature
    cdef Py_ssize_t i
    with nogil:
        for i in range(yv.shape[0]):
            dv[i] = loss_local(code, yv[i], pv[i], &cv[i])
    return derivative, curvature


def local_model_excess(name, double quadratic, double weight, double radius):
    """``loss_local_excess``: a bound of the named loss's excess over its local model,
    summed over rows that move by at most ``radius`` in the margin, from
    ``quadratic`` = sum_i s_i kappa_i r_i^2 and ``weight`` = sum_i s_i."""
    return loss_local_excess(loss_code(name), quadratic, weight, radius)
