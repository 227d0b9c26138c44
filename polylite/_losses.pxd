# Losses shared by every solver: value, derivative in the prediction, and the smoothness
# constant mu (a bound on the second derivative) that coordinate descent divides by.
# Computed in double whatever the parameter dtype: the cost is negligible and it keeps
# float32 models from overflowing in exp().
from libc.math cimport exp, log1p, fmax

cdef enum:
    SQUARED = 0
    LOGISTIC = 1
    SQUARED_HINGE = 2


cdef inline double loss_value(int loss, double y, double p) noexcept nogil:
    cdef double z, r
    if loss == SQUARED:
        r = p - y
        return 0.5 * r * r
    elif loss == LOGISTIC:
        z = y * p
        if z > 0:
            return log1p(exp(-z))
        return -z + log1p(exp(z))
    else:
        r = fmax(0.0, 1.0 - y * p)
        return r * r


cdef inline double loss_derivative(int loss, double y, double p) noexcept nogil:
    """d loss / d p."""
    cdef double z, e
    if loss == SQUARED:
        return p - y
    elif loss == LOGISTIC:
        z = y * p
        if z > 0:
            e = exp(-z)
            return -y * e / (1.0 + e)
        return -y / (1.0 + exp(z))
    else:
        return -2.0 * y * fmax(0.0, 1.0 - y * p)


cdef inline double loss_smoothness(int loss) noexcept nogil:
    """Largest second derivative of the loss in p (labels in {-1, 1} for classification)."""
    if loss == SQUARED:
        return 1.0
    elif loss == LOGISTIC:
        return 0.25
    return 2.0
