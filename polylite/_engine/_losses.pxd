# Losses shared by every solver: value, derivative in the prediction, and the smoothness
# constant mu (a bound on the second derivative) that coordinate descent divides by.
# Computed in double whatever the parameter dtype: the cost is negligible and it keeps
# float32 models from overflowing in exp().
from libc.math cimport exp, expm1, fabs, log1p, fmax, tanh

# The loss table: every loss of every model has its code here (polylite._engine._losses.LOSSES
# and MULTICLASS_LOSSES name them).
cdef enum:
    # Losses of one output, l(y, p) of a target and a prediction (every solver).
    SQUARED = 0
    LOGISTIC = 1
    SQUARED_HINGE = 2
    # Multi-class losses of all the outputs o of a row at once, l(y, o) of a class code
    # (the multi-output models: multioutput/_passes.pyx computes them).
    MULTICLASS_LOGISTIC = 100
    MULTICLASS_SMOOTH_HINGE = 101
    MULTICLASS_SQUARED_HINGE = 102
    # Pairwise ranking losses of a positive and its negatives (the ranker: computed by
    # ranking/_pairwise.pyx): BPR's -log sigmoid(f+ - f-), WARP's rank-weighted hinge.
    PAIRWISE_BPR = 200
    PAIRWISE_WARP = 201


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


cdef inline double logistic_from_exp(double y, double z, double e, double log1p_e,
                                     double* derivative) noexcept nogil:
    """The logistic loss log(1 + exp(-z)) at the margin z = y p, and d loss / d p in
    ``derivative``, from e = exp(-|z|) and log1p(e): for callers that compute these two
    for many margins at once.  Selects, not branches (random signs of z mispredict) nor
    fmax (a library call): a loop of it vectorises."""
    derivative[0] = -y * (e if z > 0 else 1.0) / (1.0 + e)
    return log1p_e + (-z if z < 0 else 0.0)


cdef inline double loss_value_derivative(int loss, double y, double p,
                                         double* derivative) noexcept nogil:
    """loss_value, and d loss / d p in ``derivative``: for the logistic loss with one exp
    (e = exp(-|z|) gives both log(1 + exp(-z)) and sigma(-z))."""
    cdef double z, e
    if loss == LOGISTIC:
        z = y * p
        e = exp(-fabs(z))
        return logistic_from_exp(y, z, e, log1p(e), derivative)
    derivative[0] = loss_derivative(loss, y, p)
    return loss_value(loss, y, p)


cdef inline double loss_smoothness(int loss) noexcept nogil:
    """Largest second derivative of the loss in p (labels in {-1, 1} for classification)."""
    if loss == SQUARED:
        return 1.0
    elif loss == LOGISTIC:
        return 0.25
    return 2.0


cdef inline double loss_derivatives(int loss, double y, double p,
                                    double* curvature) noexcept nogil:
    """d loss / d p, and in ``curvature`` the curvature a coordinate step's bound uses:
    the second derivative for the squared and logistic losses, and for the squared hinge,
    whose second derivative jumps at the hinge, its bound mu.  One exp for both."""
    cdef double z, e, r
    if loss == LOGISTIC:
        # With e = exp(-|z|), r = 1 / (1 + e): sigma(-z) = e r (z > 0) or r, and
        # sigma(z) sigma(-z) = e r^2; l' = -y sigma(-z), l'' = y^2 sigma(z) sigma(-z).
        z = y * p
        e = exp(-fabs(z))
        r = 1.0 / (1.0 + e)
        curvature[0] = y * y * e * r * r
        return -y * (e * r if z > 0 else r)
    curvature[0] = loss_smoothness(loss)
    return loss_derivative(loss, y, p)


cdef inline double loss_third_bound(int loss, double y_bound) noexcept nogil:
    """Bound on |d^3 loss / d p^3| for labels of magnitude at most ``y_bound``, the
    constant of the cubic term of the bound l(p + r) <= l + l' r + l'' r^2 / 2 + c |r|^3 / 6:
    sqrt(3) / 18 |y|^3 for the logistic loss (the largest |s (1 - s) (1 - 2 s)|), 0 for the
    squared loss (exact to second order) and for the squared hinge (its steps use mu)."""
    if loss == LOGISTIC:
        return 0.09622504486493763 * y_bound * y_bound * y_bound
    return 0.0


cdef inline double loss_majorizer(int loss, double y, double p,
                                  double* curvature) noexcept nogil:
    """d loss / d p, and in ``curvature`` that of a quadratic upper bound of the loss that
    touches it at p: l(p + r) <= l(p) + l'(p) r + curvature r^2 / 2 for every r.  1 for
    the squared loss (exact); for the logistic loss the Jaakkola-Jordan bound,
    y^2 tanh(z / 2) / (2 z) at the margin z = y p (1/4 at z = 0, about 1 / (2 |z|) far
    from it, where the global bound 1/4 is loose); the smoothness mu otherwise."""
    cdef double z
    if loss == LOGISTIC:
        z = y * p
        curvature[0] = y * y * (0.25 if fabs(z) < 1e-6 else tanh(0.5 * z) / (2.0 * z))
    else:
        curvature[0] = loss_smoothness(loss)
    return loss_derivative(loss, y, p)


cdef inline double hinge_slack() noexcept nogil:
    """The squared hinge's local model (loss_local) is flat on the rows whose margin y p
    is at least 1 + hinge_slack(): they stay on the flat side of the hinge while they
    move by less than that."""
    return 0.5


cdef inline double loss_local(int loss, double y, double p,
                              double* curvature) noexcept nogil:
    """d loss / d p, and in ``curvature`` that of the loss's local quadratic model at p,
    l(p + r) ~ l(p) + l'(p) r + curvature r^2 / 2: the second derivative for the squared
    loss (1, exact) and for the logistic loss on the right side (margin z = y p >= 0),
    and on its wrong side the Jaakkola-Jordan curvature y^2 tanh(z / 2) / (2 z) (above
    the second derivative, where the steps would overshoot: the rows' curvature grows
    as they move towards the right side); for the squared hinge 2 y^2 on the rows within
    hinge_slack() of the hinge or beyond it (z < 1 + hinge_slack(), where the model lies
    above the loss everywhere), 0 on the others (exact while they stay flat).  One exp
    for the logistic loss's derivative and curvature.  Unlike loss_majorizer's, the
    model may lie below the loss away from p: loss_local_excess bounds by how much."""
    cdef double z, e, r
    if loss == SQUARED_HINGE:
        curvature[0] = 2.0 * y * y if y * p < 1.0 + hinge_slack() else 0.0
        return loss_derivative(loss, y, p)
    if loss == LOGISTIC:
        z = y * p
        e = exp(-fabs(z))
        r = 1.0 / (1.0 + e)
        if z >= 0:
            curvature[0] = y * y * e * r * r  # sigma(z) sigma(-z)
        elif z > -1e-6:
            curvature[0] = 0.25 * y * y
        else:
            curvature[0] = y * y * (1.0 - e) * r / (-2.0 * z)  # tanh(|z| / 2) / (2 |z|)
        return -y * (e * r if z > 0 else r)
    return loss_derivatives(loss, y, p, curvature)


cdef inline double loss_local_excess(int loss, double quadratic, double weight,
                                     double radius) noexcept nogil:
    """A bound of the loss's excess over its local model (loss_local), summed over rows
    that each move by at most ``radius`` in the margin (|y_i r_i| <= radius):
    sum_i s_i [l(p_i + r_i) - l(p_i) - l'_i r_i - kappa_i r_i^2 / 2], from
    ``quadratic`` = sum_i s_i kappa_i r_i^2 and ``weight`` = sum_i s_i.

    Logistic loss: l'' changes by at most a factor exp(|y t|) over a move t, so a row's
    excess is at most kappa_i r_i^2 g(|y_i r_i|) with g(x) = (e^x - 1 - x - x^2 / 2) / x^2,
    which increases with x: at most ``quadratic`` g(radius) (the rows on the wrong side
    have none: their model lies above the loss).  Squared hinge: the model of the rows
    near or before the hinge lies above the loss, and a flat row (margin at least
    1 + hinge_slack()) stays flat over moves up to hinge_slack(), past which its loss is
    at most (radius - hinge_slack())^2: at most ``weight`` times that.  Squared loss: 0
    (the model is the loss)."""
    cdef double g
    if loss == LOGISTIC:
        if radius <= 1e-3:
            # The series x / 6 + x^2 / 24 + ... is at most x / 6 (1 + x / 3) there.
            g = radius / 6.0 * (1.0 + radius / 3.0)
        else:
            g = (expm1(radius) - radius - 0.5 * radius * radius) / (radius * radius)
            g *= 1.0 + 1e-9  # (rounding: a bound, never below)
        return quadratic * g
    if loss == SQUARED_HINGE:
        g = radius - hinge_slack()
        return weight * g * g if g > 0 else 0.0
    return 0.0
