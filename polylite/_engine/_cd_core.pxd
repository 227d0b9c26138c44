# The coordinate descent core shared by the passes over rows (_cd.pyx) and over the
# tables of a relational input (_cd_tables.pyx): the per-row and per-column records, the
# rules that turn a coordinate's sums into its step (coordinate descent's bound steps, the
# Gibbs sampler's draws) and the per-component caches of each kernel (ANOVA power sums,
# all-subsets products).  Everything here is inline: each module gets its own copy.
#
# A coordinate's step (ALGORITHMS.md section 3) is the minimiser of a quadratic upper
# bound of the objective along it,
#
#     delta = -(sum_i s_i l'_i g_i + reg * p) / (mu * sum_i s_i g_i^2 + reg),
#
# with g_i the derivative of row i's prediction in the coordinate, s_i the normalised
# sample weights and mu the smoothness of the loss (_bound_step, which also takes the
# logistic loss's cubic bound where it promises more).  The sampler replaces the step by
# a draw from the coordinate's Gaussian conditional (_draw_step), with a counter-based
# normal number per coordinate (_normal), so draws do not depend on the thread; mean-field
# variational inference by the optimal Gaussian factor given the others
# (_meanfield_step).
from libc.math cimport fabs, sqrt, log, cos
from libc.stdint cimport uint64_t

from ._kernels cimport (index_t, floating, ALL_SUBSETS,
                        POLYLITE_PREFETCH, anova_from_power_sums,
                        anova_coordinate_derivative)
from ._losses cimport LOGISTIC, loss_derivative, loss_derivatives


cdef enum:
    # How many entries ahead the scratch record of an entry's column is requested.
    PREFETCH_AHEAD = 24
    PRED = 0


cdef enum:
    # The per-column scratch record of the group passes (one cache line).
    COL_STRIDE = 8
    COL_P = 0          # the coordinate's value before the step
    COL_GRAD = 1       # sum_i s_i l'_i g_i
    COL_CURV = 2       # sum_i s_i g_i^2
    COL_NOISE = 3      # sum_i s_i magnitude_i^2 (rounding noise of the derivative)
    COL_HESS = 4       # sum_i s_i l''_i g_i^2 (logistic loss: the bound's curvature)
    COL_CUBE = 5       # sum_i s_i |g_i|^3 (logistic loss: the bound's cubic term)
    COL_STEP = 6       # the step stored
    COL_NEXT = 7       # the coordinate of the next component (its cache is built in pass 2)
    # A mean-field factor's record (see _meanfield_step) also holds its variance before
    # the step (read by pass 1, in the slot of the step, which is not yet taken) and,
    # for pass 2, in the slots of the sums the step has used: the variance before and
    # after the step and the next component's.
    COL_VAR = 6
    COL_VAR_OLD = 3
    COL_VAR_NEW = 4
    COL_VAR_NEXT = 5
    N_TERMS = 5        # the sums COL_GRAD..COL_CUBE, in this order


cdef enum:
    # The kind of a coordinate, which fixes what an entry x = x_ij contributes.
    KIND_LINEAR = 0     # w_j: derivative x
    KIND_SUBSETS = 1    # all-subsets factor
    # 2, 3, 4: ANOVA factor of that degree (closed forms)
    KIND_ANOVA = 5      # ANOVA factor of any degree (``degree``)
    KIND_MEANFIELD = 6  # ANOVA factor of degree 2 under a mean-field posterior (see
                        # _meanfield_step): its row cache is [sum_j p_j x_j,
                        # sum_j v_j x_j^2, sum_j v_j p_j x_j^3] (v_j: p_j's variance)


cdef enum:
    # A loop over a group's columns is shared by the threads from this many per thread.
    MIN_COLUMNS_PER_THREAD = 4096


cdef enum:
    # The step rule of an epoch: how every coordinate moves, chosen once per epoch
    # (cd_epoch) and read by the passes, which are otherwise the same for every rule.
    STEP_MINIMISE = 0   # coordinate descent: the minimiser of the step's bound
    STEP_DRAW = 1       # a Gibbs draw from the coordinate's conditional (the sweep's Prior)
    STEP_MEANFIELD = 2  # the optimal mean-field factor (the Prior with its variances)
    STEP_GRADIENT = 3   # no step: the data term's gradient recorded


cdef struct Layout:
    Py_ssize_t stride     # doubles per record
    Py_ssize_t label      # offset of the label, or -1 (squared loss: PRED is the residual)
    Py_ssize_t weight     # offset of the weight, or -1 (uniform weights, taken as 1:
                          # cd_epoch divides the penalties by the weight instead)
    Py_ssize_t cache      # offset of the first of the two cache slots
    Py_ssize_t width      # doubles per cache slot
    int loss
    double mu             # the loss's smoothness (loss_smoothness)
    double third          # the bound on its third derivative (loss_third_bound), or 0


cdef inline double _value(const floating* values, Py_ssize_t z) noexcept nogil:
    """Entry z's value (``values`` NULL: 1)."""
    return values[z] if values != NULL else 1.0


cdef inline double _row_dloss(const double* row, Py_ssize_t label, Py_ssize_t weight,
                              int loss) noexcept nogil:
    """Weighted loss derivative s_i * l'(y_i, y_hat_i) of one row.

    The layout comes as scalars so that a hot loop can keep them in locals, where the
    compiler knows the state writes cannot change them and hoists the branches.
    """
    cdef double y = row[label] if label >= 0 else 0.0
    cdef double s = row[weight] if weight >= 0 else 1.0
    return s * loss_derivative(loss, y, row[PRED])


cdef inline double _row_dlosses(const double* row, Py_ssize_t label, Py_ssize_t weight,
                                int loss, double* curvature) noexcept nogil:
    """_row_dloss, and s_i times the loss's curvature in ``curvature``
    (loss_derivatives)."""
    cdef double y = row[label] if label >= 0 else 0.0
    cdef double s = row[weight] if weight >= 0 else 1.0
    cdef double dl = loss_derivatives(loss, y, row[PRED], curvature)
    curvature[0] *= s
    return s * dl


cdef inline double _dloss(const double* row, const Layout* L) noexcept nogil:
    return _row_dloss(row, L.label, L.weight, L.loss)


cdef inline double _weight(const double* row, const Layout* L) noexcept nogil:
    return row[L.weight] if L.weight >= 0 else 1.0


cdef inline double* _column_record(const double* scratch, const index_t* columns,
                                   Py_ssize_t z) noexcept nogil:
    """The scratch record of entry z's column (the index widened first: one load that
    sign-extends, and no 32-bit product)."""
    return <double*> scratch + <Py_ssize_t> columns[z] * COL_STRIDE


cdef inline double* _record(const double* scratch, const index_t* columns, Py_ssize_t z,
                            Py_ssize_t count) noexcept nogil:
    """The scratch record of entry z's column.  Also requests that of the entry
    PREFETCH_AHEAD visits ahead: the columns of a group come in random order, so that
    its cache miss overlaps the current work."""
    if z + PREFETCH_AHEAD < count:
        _request_record(scratch, columns, z + PREFETCH_AHEAD)
    return _column_record(scratch, columns, z)


cdef inline void _request_record(const double* scratch, const index_t* columns,
                                 Py_ssize_t z) noexcept nogil:
    """Request the scratch record of entry z's column (see _record)."""
    POLYLITE_PREFETCH(_column_record(scratch, columns, z))


cdef inline void _prefetch_row(const double* state, Py_ssize_t stride, const index_t* rows,
                               Py_ssize_t z, Py_ssize_t count) noexcept nogil:
    """Request the record of the row PREFETCH_AHEAD entries ahead: a sparse group's rows
    increase with gaps that the hardware prefetcher does not follow (``rows`` NULL: rows
    0..count-1, in order, nothing to do)."""
    if rows != NULL and z + PREFETCH_AHEAD < count:
        POLYLITE_PREFETCH(state + rows[z + PREFETCH_AHEAD] * stride)


cdef inline Py_ssize_t _row_of(const index_t* rows, Py_ssize_t z) noexcept nogil:
    """The row of a group's entry z (``rows`` NULL: the group has an entry in every row)."""
    return rows[z] if rows != NULL else z


cdef inline double _step(double grad, double curvature, double reg,
                         double value) noexcept nogil:
    """Minimiser of the quadratic bound along one coordinate (no step without curvature)."""
    cdef double denominator = curvature + reg
    if denominator <= 0:
        return 0
    return -(grad + reg * value) / denominator


cdef inline bint _uninformed(double curvature, double noise) noexcept nogil:
    """The curvature sum is rounding noise (``noise``: sum of s_i magnitude_i^2): the
    coordinate's derivatives carry no information, so its sums count as 0.  (A
    derivative whose magnitude is below 1e4 eps times the size of the terms it was
    computed from is rounding noise: ``curvature``, sum_i s_i g_i^2, is then at most
    (1e4 eps)^2 ``noise``.)"""
    return curvature <= (1e4 * 2.220446049250313e-16) ** 2 * noise


cdef inline double _degree2_noise(double curvature, double p, double fourth) noexcept nogil:
    """A bound of the noise sum of a degree-2 factor's column from its sums: what the
    passes would have summed, sum_i s_i x^2 (|D_1| + |q|)^2 (q = p x; _factor_derivative),
    without a term per row.  With g = x (D_1 - q), (|D_1| + |q|)^2 <= 4 (D_1 - q)^2 + 6 q^2,
    so it is at most 4 ``curvature`` + 6 p^2 ``fourth`` (``fourth``: sum_i s_i x^4), and
    that is at most 10 times it: the same test of _uninformed, within a factor 3.2 of
    the derivative's size."""
    return 4 * curvature + 6 * p * p * fourth


cdef inline double _cubic_step(double grad, double hess, double cube, double reg,
                               double value) noexcept nogil:
    """Minimiser of G d + H d^2 / 2 + cube |d|^3 / 6 with G = grad + reg * value and
    H = hess + reg: the step -2 G / (H + sqrt(H^2 + 2 cube |G|)), free of cancellation."""
    cdef double G = grad + reg * value, H = hess + reg
    cdef double denominator = H + sqrt(H * H + 2 * cube * fabs(G))
    if G == 0 or denominator <= 0:
        return 0
    return -2 * G / denominator


cdef inline double _bound_step(const double* sums, double mu, double third, double reg,
                               double value) noexcept nogil:
    """The step of a coordinate from its sums ``sums[0:N_TERMS]`` (the order of
    COL_GRAD..COL_CUBE): the minimiser of an upper bound of the objective along it, so
    that the objective never increases.

    The bound is the loss's quadratic one, l(p + r) <= l + l' r + mu r^2 / 2 (exact for
    the squared loss).  For the logistic loss (``third`` > 0) it is also the cubic
    l(p + r) <= l + l' r + l'' r^2 / 2 + third |r|^3 / 6, with the loss's own curvature
    l'', far below mu on well-fitted rows, where the quadratic bound's steps are several
    times too short; the step whose bound promises the larger decrease is taken.
    """
    cdef double grad = sums[0], curvature = sums[1], delta, cubic, G, H
    if _uninformed(curvature, sums[2]):
        return _step(0, 0, reg, value)
    delta = _step(grad, mu * curvature, reg, value)
    if third <= 0:
        return delta
    cubic = _cubic_step(grad, sums[3], third * sums[4], reg, value)
    G = grad + reg * value
    H = sums[3] + reg
    if (G * cubic + 0.5 * H * cubic * cubic + third * sums[4] * fabs(cubic) ** 3 / 6
            < G * delta + 0.5 * (mu * curvature + reg) * delta * delta):
        return cubic
    return delta


cdef inline double _unseen_or_step(double support, const double* sums, double mu,
                                   double third, double reg, double value) noexcept nogil:
    """The step of a feature's coordinate (_bound_step); ``support`` is the weight of its
    rows.

    A feature the data never shows (no rows, or rows of weight 0 only) moves to 0, the
    minimiser of the penalty and, without one, the choice that keeps an unseen feature
    from adding anything at prediction time: a weight-0 row is then the same as no row.
    """
    if support <= 0:
        return -value
    return _bound_step(sums, mu, third, reg, value)


cdef inline double _take_step(floating* param, double delta) noexcept nogil:
    """Move the coordinate ``param`` by ``delta``, stored in its own precision; returns
    the step taken in that precision (what the rows' predictions must follow)."""
    cdef double p = param[0]
    if delta == 0:
        return 0
    param[0] = <floating> (p + delta)
    return param[0] - p


cdef struct Prior:
    # The Gibbs sampler's Gaussian prior on the columns of one pass over the groups (see
    # the module docstring), read by the rules STEP_DRAW and STEP_MEANFIELD.
    const Py_ssize_t* group   # column j's prior group, or NULL: group 0 for every column
    const double* reg         # group g's precision as a penalty (lam / (alpha n)), at
    const double* mean        # reg[g * stride]; its mean at mean[g * stride]
    Py_ssize_t stride
    double weight             # the uniform weight the sums leave out (see cd_epoch), or 1
    double scale              # a draw's variance is scale / (curvature + reg) (times
                              # omega (2 - omega) of the over-relaxation, see _draw_step)
    uint64_t seed             # the sweep's stream of normal numbers
    uint64_t draw             # column j takes number draw + j of it
    uint64_t component_draws  # and component s number draw + s * component_draws + j
    double* variance          # or, not NULL: mean-field coordinate ascent (no draws);
    Py_ssize_t variance_stride  # column j's variance is variance[j * variance_stride]
    double relaxation         # and a mean moves this many times its step (see below);
                              # a draw's over-relaxation (_draw_step)


cdef inline Prior _component_prior(const Prior* block, Py_ssize_t s) noexcept nogil:
    """The prior of component s: column s of the block's per-group rows."""
    cdef Prior prior = block[0]
    prior.reg += s
    prior.mean += s
    prior.draw += s * prior.component_draws
    if prior.variance != NULL:
        prior.variance += s
    return prior


cdef inline uint64_t _mix(uint64_t z) noexcept nogil:
    """SplitMix64's output function (Steele, Lea and Flood 2014)."""
    z = (z ^ (z >> 30)) * <uint64_t> 0xbf58476d1ce4e5b9
    z = (z ^ (z >> 27)) * <uint64_t> 0x94d049bb133111eb
    return z ^ (z >> 31)


cdef inline double _normal(uint64_t seed, uint64_t number) noexcept nogil:
    """Standard normal number ``number`` of the stream ``seed``: Box-Muller on the uniforms
    2 number + 1 and 2 number + 2 of SplitMix64 started at ``seed``, read at random."""
    cdef uint64_t golden = <uint64_t> 0x9e3779b97f4a7c15
    cdef double u1 = ((_mix(seed + (2 * number + 1) * golden) >> 11) + 1) * 1.1102230246251565e-16
    cdef double u2 = (_mix(seed + (2 * number + 2) * golden) >> 11) * 1.1102230246251565e-16
    return sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2)


cdef inline double _draw_step(const Prior* prior, Py_ssize_t j, double support,
                              double grad, double curvature, double value) noexcept nogil:
    """The sampler's step of column j, from ``value`` to a draw from its conditional:
    normal, of mean m = value + _step(grad, curvature, reg, value - mean) and variance
    v = scale / (curvature + reg).  A column the data never shows (``support`` 0) is
    drawn from its prior.  With ``prior.relaxation`` = omega other than 1 the draw is
    over-relaxed (Adler 1981): m + (1 - omega) (value - m) + sqrt(omega (2 - omega) v) z,
    which leaves N(m, v) invariant as the plain draw (omega = 1) does, but for omega > 1
    lands on the far side of m, so strongly coupled coordinates move further per sweep.
    (``prior.scale`` holds omega (2 - omega) scale: _set_prior.)"""
    cdef Py_ssize_t g = prior.group[j] * prior.stride if prior.group != NULL else 0
    cdef double reg = prior.reg[g] / prior.weight
    cdef double delta
    if support <= 0:
        grad = 0
        curvature = 0
    delta = prior.relaxation * _step(grad, curvature, reg, value - prior.mean[g])
    if prior.scale > 0 and curvature + reg > 0:
        delta += sqrt(prior.scale / (curvature + reg)) * _normal(prior.seed, prior.draw + j)
    return delta


cdef inline double _meanfield_step(const Prior* prior, Py_ssize_t j, double support,
                                   const double* sums, double mu,
                                   double value) noexcept nogil:
    """Mean-field coordinate ascent on column j (``prior.variance`` set): its Gaussian
    factor q = N(value + step, variance) becomes the optimal one given the others, and
    its variance is stored; returns the step of its mean.

    The row's output is affine in the coordinate, value * h_i + g_i, with h_i and g_i
    random under the other factors.  The optimal factor's precision is
    alpha n (sum_i s_i E[h_i^2] + reg) and its mean that of coordinate descent towards
    the prior mean with E[h_i] for the derivative, except that the curvature takes
    sum_i s_i Var(h_i) (``sums[3]``) and the gradient sum_i s_i Cov(h_i, g_i)
    (``sums[4]``) and value * sums[3] (the step is taken from ``value``).  Both are 0
    for the intercept and the linear weights.  A column the data never shows gets its
    prior.

    The mean of a column the data shows moves ``prior.relaxation`` = omega times that
    step (over-relaxation, as
    successive over-relaxation does for linear systems): given the other factors the
    ELBO is a concave quadratic in the mean, so a step of omega in (0, 2) times the
    optimal one still raises it (by omega (2 - omega) times the optimal gain), and the
    fixed points are those of omega = 1; omega > 1 crosses the long valleys of coupled
    factors in fewer iterations.  The variance does not depend on the mean: it is the
    optimal one."""
    cdef Py_ssize_t g = prior.group[j] * prior.stride if prior.group != NULL else 0
    cdef double reg = prior.reg[g] / prior.weight
    cdef double grad = sums[0], curvature = mu * sums[1]
    if _uninformed(sums[1], sums[2]):
        grad = curvature = 0
    curvature += sums[3]
    grad += sums[4] + value * sums[3]
    cdef double omega = prior.relaxation
    if support <= 0:
        grad = curvature = 0
        omega = 1
    prior.variance[j * prior.variance_stride] = (
        prior.scale / (curvature + reg) if curvature + reg > 0 else 1.0 / 0.0)
    return omega * _step(grad, curvature, reg, value - prior.mean[g])


cdef inline double _coordinate_step(int rule, const Prior* prior, Py_ssize_t j,
                                    double support, const double* sums, double mu,
                                    double third, double reg, double value) noexcept nogil:
    """Column j's step from its sums ``sums[0:N_TERMS]`` by the epoch's ``rule``:
    coordinate descent's (_unseen_or_step), the mean-field update (_meanfield_step) or
    the sampler's draw (squared loss: the quadratic bound), ``prior`` the column's."""
    if rule == STEP_MINIMISE:
        return _unseen_or_step(support, sums, mu, third, reg, value)
    if rule == STEP_MEANFIELD:
        return _meanfield_step(prior, j, support, sums, mu, value)
    if _uninformed(sums[1], sums[2]):
        return _draw_step(prior, j, support, 0.0, 0.0, value)
    return _draw_step(prior, j, support, sums[0], mu * sums[1], value)


cdef inline double _anova_derivative(const double* D, int degree, double q, double x,
                                     double* A, double* magnitude) noexcept nogil:
    """dA_m/dp_j from the cached power sums, and a bound on the terms it was summed from.

    The derivative is a difference of terms that may cancel (Newton's identity, then the
    peeling of q A_{t-1}); ``magnitude`` bounds the sum of their absolute values, so
    rounding errors are below eps * magnitude (times a modest factor for the drift of the
    cache over an epoch).
    """
    cdef int t, i
    cdef double acc, rest
    anova_from_power_sums(D, degree - 1, A)
    # Newton's identity on |D|: bounds |terms| of every A_t (A is reused from A[degree]).
    cdef double* bound = A + degree
    bound[0] = 1
    for t in range(1, degree):
        acc = 0
        for i in range(1, t + 1):
            acc += bound[t - i] * fabs(D[i - 1])
        bound[t] = acc / t
    rest = 1
    for t in range(1, degree):
        rest = bound[t] + fabs(q) * rest
    magnitude[0] = fabs(x) * rest
    return anova_coordinate_derivative(A, degree, q, x)


cdef inline void _add_powers(double* D, Py_ssize_t width, double q,
                             double sign) noexcept nogil:
    """D[t-1] += sign * q^t for t = 1..width."""
    cdef Py_ssize_t t
    cdef double qt = sign * q
    for t in range(width):
        D[t] += qt
        qt *= q


cdef inline double _subsets_rest(const double* cache, double factor) noexcept nogil:
    """prod_{j' != j} (1 + p_j' x_j') from the cache, given row j's factor."""
    cdef double product = cache[0], zeros = cache[1]
    if factor == 0:
        return product if zeros == 1 else 0
    return product / factor if zeros == 0 else 0


cdef inline void _subsets_swap(double* cache, double old_factor,
                               double new_factor) noexcept nogil:
    if old_factor == 0:
        cache[1] -= 1
    else:
        cache[0] /= old_factor
    if new_factor == 0:
        cache[1] += 1
    else:
        cache[0] *= new_factor


cdef inline int _kind(int kernel, int degree) noexcept nogil:
    if kernel == ALL_SUBSETS:
        return KIND_SUBSETS
    return degree if degree <= 4 else KIND_ANOVA


cdef inline double _factor_derivative(const double* D, int kind, int degree, double p,
                                      double x, double* A,
                                      double* magnitude) noexcept nogil:
    """d(prediction of row i)/dp_js for the entry x = x_ij, from row i's cache D.

    ``magnitude`` bounds the terms the derivative was summed from (see
    _anova_derivative).  Degrees 2 to 4 have closed forms of the general case.
    """
    cdef double q = p * x, d1, d2, d3, a2, a3, b2, b3
    if kind == KIND_LINEAR:
        magnitude[0] = 0
        return x
    if kind == KIND_SUBSETS:
        magnitude[0] = 0
        return x * _subsets_rest(D, 1 + q)
    if kind == 2 or kind == KIND_MEANFIELD:
        # A_1 = D_1.
        magnitude[0] = fabs(x) * (fabs(D[0]) + fabs(q))
        return x * (D[0] - q)
    if kind == 3:
        # A_2 = (D_1^2 - D_2) / 2, derivative x (A_2 - q (A_1 - q)).
        d1 = D[0]
        d2 = D[1]
        # Within a factor 1.5 of the sum of the terms' sizes, and cheaper.
        magnitude[0] = fabs(x) * (d1 * d1 + fabs(d2) + q * q)
        return x * (0.5 * (d1 * d1 - d2) - q * (d1 - q))
    if kind == 4:
        # A_3 = (A_2 D_1 - A_1 D_2 + D_3) / 3 (Newton), then peel q off.
        d1 = D[0]
        d2 = D[1]
        d3 = D[2]
        a2 = 0.5 * (d1 * d1 - d2)
        a3 = (a2 * d1 - d1 * d2 + d3) / 3
        b2 = 0.5 * (d1 * d1 + fabs(d2))
        b3 = (b2 * fabs(d1) + fabs(d1 * d2) + fabs(d3)) / 3
        magnitude[0] = fabs(x) * (b3 + fabs(q) * (b2 + fabs(q) * (fabs(d1) + fabs(q))))
        return x * (a3 - q * (a2 - q * (d1 - q)))
    return _anova_derivative(D, degree, q, x, A, magnitude)


cdef inline void _swap_factor(double* D, int kind, Py_ssize_t width, double q,
                              double q_new) noexcept nogil:
    """Replace the entry's factor q = p_js x_ij by q_new in row i's cache D."""
    if kind == KIND_SUBSETS:
        _subsets_swap(D, 1 + q, 1 + q_new)
    elif kind == 2:
        D[0] += q_new - q
    elif kind == 3:
        D[0] += q_new - q
        D[1] += q_new * q_new - q * q
    elif kind == 4:
        D[0] += q_new - q
        D[1] += q_new * q_new - q * q
        D[2] += q_new * q_new * q_new - q * q * q
    else:
        _add_powers(D, width, q, -1.0)
        _add_powers(D, width, q_new, 1.0)


cdef inline void _add_factor(double* D, int kind, Py_ssize_t width,
                             double q) noexcept nogil:
    """Add the entry's factor q to row i's cache D (built from an empty row)."""
    if kind == KIND_SUBSETS:
        _subsets_swap(D, 1.0, 1 + q)  # from the neutral factor 1 to 1 + q
    elif kind == 2:
        D[0] += q
    elif kind == 3:
        D[0] += q
        D[1] += q * q
    elif kind == 4:
        D[0] += q
        D[1] += q * q
        D[2] += q * q * q
    else:
        _add_powers(D, width, q, 1.0)


cdef struct Threads:
    # The threads that share every pass over a group's entries: thread t takes the t-th
    # of ``count`` equal runs of entries (rows, since a row has at most one entry in a
    # group) and sums its gradients into scratch records of its own (thread 0: the shared
    # ones), added up in thread order after the pass (_group_reduce).
    int count
    Py_ssize_t min_entries  # a pass over fewer entries per thread runs on one thread
    double* private      # the records of threads 1..count-1, ``stride`` doubles apart
    Py_ssize_t stride
    double* partial      # N_TERMS * count doubles: each thread's sums or maximum
    double* work         # each thread's work space for _anova_derivative, ``work_stride``
    Py_ssize_t work_stride  # doubles apart
    double* variance_change  # each thread's change of sum_i Var f(x_i) (mean-field
                             # factors' steps)
    double* clock        # the seconds of each kind of pass (PASS_*) are added here, or
                         # NULL: not timed


cdef enum:
    # The kinds of pass of an epoch, as cd_epoch's ``pass_seconds`` counts their time.
    PASS_FUSED = 0      # a group's updates with the next group's gradients
    PASS_GRADIENTS = 1  # a group's gradients alone
    PASS_UPDATES = 2    # a group's updates alone
    PASS_COLUMNS = 3    # per column: scratch records, their threads' sums, the steps
    PASS_FILL = 4       # a component's caches from the CSR rows
    PASS_RECORDS = 5    # the records alone: set up, intercept, resized, stored
    N_PASS_KINDS = 6


cdef extern from "<time.h>" nogil:
    cdef struct timespec:
        long tv_sec
        long tv_nsec
    int timespec_get(timespec* ts, int base)
    int TIME_UTC


cdef inline double _clock_start(const Threads* th) noexcept nogil:
    """Now, in seconds, where the passes are timed (``th.clock``); else 0."""
    cdef timespec now
    if th.clock == NULL:
        return 0
    timespec_get(&now, TIME_UTC)
    return now.tv_sec + 1e-9 * now.tv_nsec


cdef inline void _clock_add(const Threads* th, int kind, double start) noexcept nogil:
    """Add the seconds since ``start`` (from _clock_start) to those of pass ``kind``."""
    if th.clock != NULL:
        th.clock[kind] += _clock_start(th) - start


cdef inline void _zero_terms(double* terms) noexcept nogil:
    cdef int t
    for t in range(N_TERMS):
        terms[t] = 0


cdef inline bint _noise_from_column(const Layout* L, int kind) noexcept nogil:
    """Whether the steps of this kind take their noise sum from the column
    (_degree2_noise, the Sweep's ``fourth``) rather than from a term per row: degree-2
    factors under a squared-loss bound, so that the rows' loops, where the recommender's
    epochs spend their time, only sum the gradient and curvature."""
    return kind == 2 and L.loss != LOGISTIC


cdef inline int _n_terms(const Layout* L, int kind) noexcept nogil:
    """How many of the N_TERMS sums the passes add up: the last two for the logistic loss
    and the mean-field factors only; not the noise sum where it comes from the column."""
    if L.loss == LOGISTIC or kind == KIND_MEANFIELD:
        return N_TERMS
    return 2 if _noise_from_column(L, kind) else 3


cdef inline void _add_terms(double* col, const double* terms, int count) noexcept nogil:
    cdef int t
    for t in range(count):
        col[COL_GRAD + t] += terms[t]


cdef inline Py_ssize_t _width(int kind, Py_ssize_t width) noexcept nogil:
    """Doubles per cache slot, a constant for the kinds that have one."""
    if kind == KIND_SUBSETS:
        return 2
    if kind == 2 or kind == 3 or kind == 4:
        return kind - 1
    if kind == KIND_MEANFIELD:
        return 3
    return width


cdef inline int _row_threads(const Threads* th, Py_ssize_t count) noexcept nogil:
    """Threads for a pass over ``count`` entries: one when there are too few to share."""
    return th.count if count >= th.count * th.min_entries else 1


cdef inline int _column_threads(const Threads* th, Py_ssize_t count) noexcept nogil:
    return th.count if count >= MIN_COLUMNS_PER_THREAD * th.count else 1
