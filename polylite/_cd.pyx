"""Cyclic coordinate descent for polynomial models (HOFM paper, section 4).

One call of :func:`cd_epoch` updates, in this order, the intercept, every linear weight,
then for each factor block b and each component s every factor entry: the block's dummy
rows gamma first (shared-parameter model), then the features j = 0..d-1.

Each coordinate takes the step of ALGORITHMS.md section 3, the minimiser of a quadratic
upper bound of the objective along that coordinate,

    delta = -(sum_i s_i l'_i g_i + reg * p) / (mu * sum_i s_i g_i^2 + reg),

with g_i the derivative of the prediction of row i in the coordinate, s_i the normalised
sample weights (sum s_i = 1) and mu the smoothness of the loss.  The model is affine in every
single coordinate, so for the squared loss (mu = 1) the step is the exact minimiser and the
objective never increases for any loss.

Per-row state.  Only the current prediction and the cache of the component being updated
are kept, O(n * m) memory, never a dense X: power sums D_1..D_{m-1} for the ANOVA kernel
(Newton's identity gives A_0..A_{m-1} and the coordinate derivative), or (product of the
nonzero factors, number of zero factors) for the all-subsets kernel.  They are packed into
one record per row so that a visit to row i touches one cache line:

    [prediction, label?, weight?, cache of component s, cache of component s + 1]

For the squared loss the record holds the residual y_hat - y (label 0), so no label is
stored; weights are stored only when they are not uniform.  The cache of component s + 1 is
accumulated during the update pass of component s, which visits exactly the (row, feature)
pairs it needs while p_{s+1} is fixed: so only the first component of a block needs a
separate pass over the rows to fill its cache.

Polynomial networks (kernel POLYNOMIAL, term lam_s (gamma_s + <p_s, x>)^m) are not affine
in p_js, so the plain step does not apply.  Each p_js and gamma_s takes a Newton step on
the objective along the coordinate, with the curvature
sum_i s_i (mu a_i^2 + |l'_i b_i|) + reg (a_i, b_i: first and second derivatives of row i's
prediction), which is positive, then the step is halved until the exact change of the
objective along the coordinate (cheap: only the column's rows change) satisfies Armijo's
condition.  So the objective never increases here either.  lam_s enters linearly and takes
the exact bound step.  The per-row cache is the linear form u_i = gamma_s + <p_s, x_i>.
"""
import numpy as np
from libc.stdlib cimport malloc, free
from libc.math cimport fabs

from ._kernels cimport (index_t, floating, ANOVA, ALL_SUBSETS, POLYNOMIAL, power_sums,
                        anova_from_power_sums, anova_coordinate_derivative)
from ._losses cimport SQUARED, loss_derivative, loss_smoothness, loss_value


cdef extern from *:
    """
    /* A volatile asm on x86-64: GCC would otherwise see the helper that holds the
       prefetch as a side-effect-free function and delete its calls. */
    #if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
    #define POLYLITE_PREFETCH(p) \
        __asm__ __volatile__("prefetcht0 %0" : : "m"(*(const char *)(p)))
    #elif defined(__GNUC__) || defined(__clang__)
    #define POLYLITE_PREFETCH(p) __builtin_prefetch((const void *)(p), 0, 3)
    #else
    #define POLYLITE_PREFETCH(p) ((void)0)
    #endif
    """
    void POLYLITE_PREFETCH(const void* p) noexcept nogil

# A derivative whose magnitude is below this multiple of eps times the size of the terms
# it was computed from is rounding noise: the coordinate is treated as uninformed.
cdef double NOISE = 1e4 * 2.220446049250313e-16

cdef enum:
    # Rows of a column are scattered in memory: request the record of the visit this many
    # steps ahead so that its cache miss overlaps the current work.
    PREFETCH_AHEAD = 24
    PRED = 0


cdef struct Layout:
    Py_ssize_t stride     # doubles per record
    Py_ssize_t label      # offset of the label, or -1 (squared loss: PRED is the residual)
    Py_ssize_t weight     # offset of the weight, or -1 (uniform weights)
    double uniform_weight
    Py_ssize_t cache      # offset of the first of the two cache slots
    Py_ssize_t width      # doubles per cache slot
    int loss


cdef inline double _row_dloss(const double* row, Py_ssize_t label, Py_ssize_t weight,
                              double uniform_weight, int loss) noexcept nogil:
    """Weighted loss derivative s_i * l'(y_i, y_hat_i) of one row.

    The layout comes as scalars so that a hot loop can keep them in locals, where the
    compiler knows the state writes cannot change them and hoists the branches.
    """
    cdef double y = row[label] if label >= 0 else 0.0
    cdef double s = row[weight] if weight >= 0 else uniform_weight
    return s * loss_derivative(loss, y, row[PRED])


cdef inline double _dloss(const double* row, const Layout* L) noexcept nogil:
    return _row_dloss(row, L.label, L.weight, L.uniform_weight, L.loss)


cdef inline double _weight(const double* row, const Layout* L) noexcept nogil:
    return row[L.weight] if L.weight >= 0 else L.uniform_weight


cdef inline void _prefetch_row(const double* state, Py_ssize_t stride,
                               const index_t* rows, Py_ssize_t z,
                               Py_ssize_t end) noexcept nogil:
    if z + PREFETCH_AHEAD < end:
        POLYLITE_PREFETCH(state + rows[z + PREFETCH_AHEAD] * stride)


cdef inline double _step(double grad, double curvature, double reg,
                         double value) noexcept nogil:
    """Minimiser of the quadratic bound along one coordinate (no step without curvature)."""
    cdef double denominator = curvature + reg
    if denominator <= 0:
        return 0
    return -(grad + reg * value) / denominator


cdef inline double _unseen_or_step(double support, double grad, double curvature,
                                   double reg, double value) noexcept nogil:
    """The step of a feature's coordinate; ``support`` is the weight of its rows.

    A feature the data never shows (no rows, or rows of weight 0 only) moves to 0, the
    minimiser of the penalty and, without one, the choice that keeps an unseen feature
    from adding anything at prediction time: a weight-0 row is then the same as no row.
    """
    if support <= 0:
        return -value
    return _step(grad, curvature, reg, value)


# ---- ANOVA: power-sum caches ------------------------------------------------------------

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


# ---- all-subsets: (product of nonzero factors, number of zero factors) -----------------

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


# ---- the caches of one component -------------------------------------------------------

cdef inline void _reset_slot(double* state, const Layout* L, Py_ssize_t n,
                             Py_ssize_t slot, int kernel, const floating* gamma,
                             Py_ssize_t n_dummy, Py_ssize_t k, Py_ssize_t s) noexcept nogil:
    """Start the cache of component s in every row: the dummies' share, nothing else."""
    cdef Py_ssize_t i, t, r
    cdef double* D
    cdef double* base = NULL
    if kernel == POLYNOMIAL:
        for i in range(n):
            state[i * L.stride + slot] = gamma[s] if n_dummy > 0 else 0
        return
    if kernel == ALL_SUBSETS:
        for i in range(n):
            D = state + i * L.stride + slot
            D[0] = 1
            D[1] = 0
        return
    for i in range(n):
        D = state + i * L.stride + slot
        if base == NULL:
            for t in range(L.width):
                D[t] = 0
            for r in range(n_dummy):
                _add_powers(D, L.width, gamma[r * k + s], 1.0)
            base = D
        else:
            for t in range(L.width):
                D[t] = base[t]


cdef void _fill_slot(double* state, const Layout* L, Py_ssize_t n, Py_ssize_t slot,
                     int kernel, const floating* P, Py_ssize_t k, Py_ssize_t s,
                     const floating* gamma, Py_ssize_t n_dummy,
                     const floating* csr_data, const index_t* csr_indices,
                     const index_t* csr_indptr) noexcept nogil:
    """Compute the cache of component s in every row from scratch (row-wise pass)."""
    cdef Py_ssize_t i, z, start, end
    for i in range(n):
        start = csr_indptr[i]
        end = csr_indptr[i + 1]
        if kernel == POLYNOMIAL:
            _reset_slot(state + i * L.stride, L, 1, slot, kernel, gamma, n_dummy, k, s)
            for z in range(start, end):
                state[i * L.stride + slot] += <double> P[csr_indices[z] * k + s] * csr_data[z]
        elif kernel == ALL_SUBSETS:
            _reset_slot(state + i * L.stride, L, 1, slot, kernel, gamma, 0, k, s)
            for z in range(start, end):
                _subsets_swap(state + i * L.stride + slot, 1.0,
                              1 + <double> P[csr_indices[z] * k + s] * csr_data[z])
        else:
            power_sums(P, k, s, gamma, n_dummy, csr_indices + start, csr_data + start,
                       end - start, L.width, state + i * L.stride + slot)


cdef double _cd_component(
        const floating* csc_data, const index_t* csc_indices, const index_t* csc_indptr,
        Py_ssize_t n, Py_ssize_t d, Py_ssize_t k, Py_ssize_t s, int kernel, int degree,
        floating* Pb, floating* gamma, Py_ssize_t n_dummy, bint has_next,
        double mu, double beta, double* state, const Layout* L, Py_ssize_t cur,
        Py_ssize_t nxt, double* buf, double* A) noexcept nogil:
    """Update every coordinate of component s; the cache in slot ``cur`` must be current.

    When ``has_next``, also build the cache of component s + 1 in slot ``nxt``.
    Returns the largest |step|.
    """
    cdef Py_ssize_t i, j, z, r, start, end, stride = L.stride, width = L.width
    cdef bint anova = kernel == ANOVA
    cdef double p, x, der, g, h, delta, max_change = 0, p_next, noise, magnitude, support
    cdef double q, q_new, d1, d2, d3, a2, a3, b2, b3, weight
    cdef double* row
    # The layout in locals: loop-invariant for the compiler (state writes cannot alias them).
    cdef Py_ssize_t label_at = L.label, weight_at = L.weight
    cdef double uniform_weight = L.uniform_weight
    cdef int loss = L.loss
    if has_next:
        _reset_slot(state, L, n, nxt, kernel, gamma, n_dummy, k, s + 1)
    # Dummy features (value 1 in every row; ANOVA only).
    for r in range(n_dummy):
        p = gamma[r * k + s]
        g = 0
        h = 0
        noise = 0
        for i in range(n):
            row = state + i * stride
            der = _anova_derivative(row + cur, degree, p, 1.0, A, &magnitude)
            buf[i] = der
            g += _dloss(row, L) * der
            h += _weight(row, L) * der * der
            noise += _weight(row, L) * magnitude * magnitude
        if h <= NOISE * NOISE * noise:
            g = 0
            h = 0
        delta = _step(g, mu * h, beta, p)
        if delta != 0:
            gamma[r * k + s] = <floating> (p + delta)
            delta = gamma[r * k + s] - p  # the step actually taken in this precision
            for i in range(n):
                row = state + i * stride
                row[PRED] += delta * buf[i]
                _add_powers(row + cur, width, p, -1.0)
                _add_powers(row + cur, width, p + delta, 1.0)
            max_change = max(max_change, fabs(delta))
    # Features, through the CSC copy: column j lists the rows that contain j.
    for j in range(d):
        start = csc_indptr[j]
        end = csc_indptr[j + 1]
        p = Pb[j * k + s]
        g = 0
        h = 0
        noise = 0
        support = 0
        for z in range(start, end):
            _prefetch_row(state, stride, csc_indices, z, end)
            row = state + csc_indices[z] * stride
            x = csc_data[z]
            weight = row[weight_at] if weight_at >= 0 else uniform_weight
            if degree == 2 and anova:
                # Closed form of the general case below: A_1 = D_1.
                q = p * x
                der = x * (row[cur] - q)
                magnitude = fabs(x) * (fabs(row[cur]) + fabs(q))
                noise += weight * magnitude * magnitude
            elif degree == 3 and anova:
                # Closed form: A_1 = D_1, A_2 = (D_1^2 - D_2) / 2, der = x (A_2 - q (A_1 - q)).
                q = p * x
                d1 = row[cur]
                d2 = row[cur + 1]
                der = x * (0.5 * (d1 * d1 - d2) - q * (d1 - q))
                magnitude = fabs(x) * (0.5 * (d1 * d1 + fabs(d2)) + fabs(q) * (fabs(d1) + fabs(q)))
                noise += weight * magnitude * magnitude
            elif degree == 4 and anova:
                # Closed form: A_3 = (A_2 D_1 - A_1 D_2 + D_3) / 3 (Newton), then peel q.
                q = p * x
                d1 = row[cur]
                d2 = row[cur + 1]
                d3 = row[cur + 2]
                a2 = 0.5 * (d1 * d1 - d2)
                a3 = (a2 * d1 - d1 * d2 + d3) / 3
                der = x * (a3 - q * (a2 - q * (d1 - q)))
                b2 = 0.5 * (d1 * d1 + fabs(d2))
                b3 = (b2 * fabs(d1) + fabs(d1 * d2) + fabs(d3)) / 3
                magnitude = fabs(x) * (b3 + fabs(q) * (b2 + fabs(q) * (fabs(d1) + fabs(q))))
                noise += weight * magnitude * magnitude
            elif anova:
                der = _anova_derivative(row + cur, degree, p * x, x, A, &magnitude)
                noise += weight * magnitude * magnitude
            else:
                der = x * _subsets_rest(row + cur, 1 + p * x)
            buf[z - start] = der
            g += _row_dloss(row, label_at, weight_at, uniform_weight, loss) * der
            h += weight * der * der
            support += weight
        if anova and h <= NOISE * NOISE * noise:
            g = 0
            h = 0
        delta = _unseen_or_step(support, g, mu * h, beta, p)
        if delta != 0:
            Pb[j * k + s] = <floating> (p + delta)
            delta = Pb[j * k + s] - p
            max_change = max(max_change, fabs(delta))
        elif not has_next:
            continue
        p_next = Pb[j * k + s + 1] if has_next else 0
        for z in range(start, end):
            _prefetch_row(state, stride, csc_indices, z, end)
            row = state + csc_indices[z] * stride
            x = csc_data[z]
            if delta != 0:
                row[PRED] += delta * buf[z - start]
                if degree == 2 and anova:
                    row[cur] += delta * x
                elif degree == 3 and anova:
                    q = p * x
                    q_new = (p + delta) * x
                    row[cur] += q_new - q
                    row[cur + 1] += q_new * q_new - q * q
                elif degree == 4 and anova:
                    q = p * x
                    q_new = (p + delta) * x
                    row[cur] += q_new - q
                    row[cur + 1] += q_new * q_new - q * q
                    row[cur + 2] += q_new * q_new * q_new - q * q * q
                elif anova:
                    _add_powers(row + cur, width, p * x, -1.0)
                    _add_powers(row + cur, width, (p + delta) * x, 1.0)
                else:
                    _subsets_swap(row + cur, 1 + p * x, 1 + (p + delta) * x)
            if has_next:
                if degree == 2 and anova:
                    row[nxt] += p_next * x
                elif degree == 3 and anova:
                    q = p_next * x
                    row[nxt] += q
                    row[nxt + 1] += q * q
                elif degree == 4 and anova:
                    q = p_next * x
                    row[nxt] += q
                    row[nxt + 1] += q * q
                    row[nxt + 2] += q * q * q
                elif anova:
                    _add_powers(row + nxt, width, p_next * x, 1.0)
                else:
                    _subsets_swap(row + nxt, 1.0, 1 + p_next * x)
    return max_change

# ---- polynomial networks ----------------------------------------------------------------

cdef enum:
    MAX_HALVINGS = 30

cdef inline double _power(double base, int m) noexcept nogil:
    cdef double r = 1
    cdef int i
    for i in range(m):
        r *= base
    return r


cdef double _poly_coordinate(floating* param, double reg, int degree, double lam_s,
                             const index_t* rows, const floating* values,
                             Py_ssize_t count, bint dense_column,
                             double* state, const Layout* L, Py_ssize_t cur,
                             double mu) noexcept nogil:
    """Safeguarded Newton step on one coordinate of a PN component; returns the step.

    The coordinate ``param``'s column is ``rows``/``values`` (``count`` entries) or, when
    ``dense_column``, every row with value 1 (gamma_s).  Stores the new value, then updates
    the predictions and the cached linear forms in slot ``cur`` with the step actually
    stored (rounded to the parameter's precision).
    """
    cdef Py_ssize_t z, i
    cdef double p = param[0]
    cdef double x, u, um2, a, b, dl, g = 0, h = 0, delta
    cdef double support = 0
    cdef double* row
    for z in range(count):
        i = z if dense_column else rows[z]
        x = 1.0 if dense_column else values[z]
        row = state + i * L.stride
        u = row[cur]
        um2 = _power(u, degree - 2)
        a = lam_s * degree * um2 * u * x
        b = lam_s * degree * (degree - 1) * um2 * x * x
        dl = _dloss(row, L)
        g += dl * a
        h += _weight(row, L) * mu * a * a + fabs(dl * b)
        support += _weight(row, L)
    g += reg * p
    h += reg
    if support <= 0:
        delta = -p  # unseen feature: see _unseen_or_step
    elif h <= 0 or g == 0:
        return 0
    else:
        delta = _armijo(p, reg, degree, lam_s, rows, values, count, dense_column, state,
                        L, cur, g, h)
    if delta == 0:
        return 0
    param[0] = <floating> (p + delta)
    delta = param[0] - p
    for z in range(count):
        i = z if dense_column else rows[z]
        x = 1.0 if dense_column else values[z]
        row = state + i * L.stride
        u = row[cur]
        row[PRED] += lam_s * (_power(u + delta * x, degree) - _power(u, degree))
        row[cur] = u + delta * x
    return delta


cdef double _armijo(double p, double reg, int degree, double lam_s,
                    const index_t* rows, const floating* values, Py_ssize_t count,
                    bint dense_column, const double* state, const Layout* L,
                    Py_ssize_t cur, double g, double h) noexcept nogil:
    """Halve the Newton step -g/h until the exact objective decreases enough (Armijo)."""
    cdef Py_ssize_t z, i
    cdef double x, u, delta = -g / h, change, y_i, s_i, old, new
    cdef const double* row
    cdef int halving
    for halving in range(MAX_HALVINGS):
        # Exact change of the objective along the coordinate for this step.
        change = 0.5 * reg * ((p + delta) * (p + delta) - p * p)
        for z in range(count):
            i = z if dense_column else rows[z]
            x = 1.0 if dense_column else values[z]
            row = state + i * L.stride
            u = row[cur]
            y_i = row[L.label] if L.label >= 0 else 0.0
            s_i = _weight(row, L)
            old = row[PRED]
            new = old + lam_s * (_power(u + delta * x, degree) - _power(u, degree))
            change += s_i * (loss_value(L.loss, y_i, new) - loss_value(L.loss, y_i, old))
        if change <= 1e-4 * delta * g:
            return delta
        delta *= 0.5
    return 0


cdef double _cd_poly_component(
        const floating* csc_data, const index_t* csc_indices, const index_t* csc_indptr,
        Py_ssize_t n, Py_ssize_t d, Py_ssize_t k, Py_ssize_t s, int degree,
        floating* P, floating* gamma, Py_ssize_t n_dummy, floating* lam, bint fit_lam,
        bint has_next, double mu, double beta, double* state, const Layout* L,
        Py_ssize_t cur, Py_ssize_t nxt) noexcept nogil:
    """Update lam_s, gamma_s and p_s of one PN component (slot ``cur`` holds u_i)."""
    cdef Py_ssize_t i, j, z, start, end
    cdef double p, g, h, feature, delta, max_change = 0, p_next
    cdef double* row
    if has_next:
        _reset_slot(state, L, n, nxt, POLYNOMIAL, gamma, n_dummy, k, s + 1)
    if fit_lam:
        # The prediction is linear in lam_s: exact bound step.
        g = 0
        h = 0
        for i in range(n):
            row = state + i * L.stride
            feature = _power(row[cur], degree)
            g += _dloss(row, L) * feature
            h += _weight(row, L) * feature * feature
        delta = _step(g, mu * h, beta, lam[s])
        if delta != 0:
            p = lam[s]
            lam[s] = <floating> (p + delta)
            delta = lam[s] - p
            for i in range(n):
                row = state + i * L.stride
                row[PRED] += delta * _power(row[cur], degree)
            max_change = max(max_change, fabs(delta))
    if n_dummy > 0:
        delta = _poly_coordinate(&gamma[s], beta, degree, lam[s], <const index_t*> NULL,
                                 <const floating*> NULL, n, True, state, L, cur, mu)
        max_change = max(max_change, fabs(delta))
    for j in range(d):
        start = csc_indptr[j]
        end = csc_indptr[j + 1]
        delta = _poly_coordinate(&P[j * k + s], beta, degree, lam[s], csc_indices + start,
                                 csc_data + start, end - start, False, state, L, cur, mu)
        max_change = max(max_change, fabs(delta))
        if has_next:
            p_next = P[j * k + s + 1]
            for z in range(start, end):
                state[csc_indices[z] * L.stride + nxt] += p_next * csc_data[z]
    return max_change


def cd_epoch(const floating[::1] csc_data, const index_t[::1] csc_indices,
             const index_t[::1] csc_indptr,
             const floating[::1] csr_data, const index_t[::1] csr_indices,
             const index_t[::1] csr_indptr,
             const double[::1] y, const double[::1] sample_weight,
             floating[::1] intercept, floating[::1] w, floating[:, :, ::1] P,
             const int[::1] degrees, floating[:, ::1] gamma,
             int kernel, int loss, double alpha, double beta,
             bint fit_intercept, bint fit_linear, double[::1] y_pred,
             floating[::1] lam=None, bint fit_lam=False):
    """One epoch of cyclic coordinate descent, in place; returns the largest |step|.

    ``sample_weight`` must sum to 1; ``y_pred`` must hold the model's current predictions
    on entry and holds them on return.  ``intercept`` is a length-1 array.  ``lam`` (the
    output weights of the polynomial kernel) is required for kernel POLYNOMIAL.
    """
    if kernel == POLYNOMIAL and (lam is None or lam.shape[0] != P.shape[2]):
        raise ValueError("the polynomial kernel needs one output weight per component")
    cdef Py_ssize_t n = y.shape[0], n_blocks = P.shape[0], d = P.shape[1], k = P.shape[2]
    cdef Py_ssize_t n_dummy = gamma.shape[0]
    cdef Py_ssize_t i, j, z, b, s, start, end, longest = n, cur, nxt
    cdef int max_degree = 2
    cdef double mu = loss_smoothness(loss)
    cdef double g, h, x, delta, max_change = 0, change, support
    cdef bint uniform = True
    cdef Layout L
    for b in range(n_blocks):
        max_degree = max(max_degree, degrees[b])
    for j in range(d):
        longest = max(longest, csc_indptr[j + 1] - csc_indptr[j])
    for i in range(1, n):
        if sample_weight[i] != sample_weight[0]:
            uniform = False
            break
    L.loss = loss
    L.label = -1 if loss == SQUARED else 1
    L.weight = -1 if uniform else 1 + (L.label >= 0)
    L.uniform_weight = sample_weight[0] if n > 0 else 0
    L.cache = 1 + (L.label >= 0) + (L.weight >= 0)
    L.width = 2 if kernel == ALL_SUBSETS else (1 if kernel == POLYNOMIAL else max_degree - 1)
    # Round the record up to 4 or 8 doubles, so that no record straddles two cache lines.
    L.stride = L.cache + 2 * L.width
    L.stride = 4 if L.stride <= 4 else (8 if L.stride <= 8 else L.stride)
    # The per-row records are read in random order: allocate them through NumPy, which asks
    # Linux for transparent huge pages on large buffers (fewer TLB misses per visit).
    cdef double[::1] state_buffer = np.empty(n * L.stride + 1, dtype=np.float64)
    cdef double[::1] column_buffer = np.empty(longest + 1, dtype=np.float64)
    cdef double* state = &state_buffer[0]
    cdef double* buf = &column_buffer[0]
    cdef double* A = <double*> malloc(2 * (max_degree + 1) * sizeof(double))
    cdef double* row
    if A == NULL:
        raise MemoryError("not enough memory for the coordinate descent caches")
    cdef floating* gamma_ptr = &gamma[0, 0] if gamma.size > 0 else NULL
    cdef const floating* csc_val = &csc_data[0] if csc_data.shape[0] > 0 else NULL
    cdef const index_t* csc_ind = &csc_indices[0] if csc_indices.shape[0] > 0 else NULL
    cdef const floating* csr_val = &csr_data[0] if csr_data.shape[0] > 0 else NULL
    cdef const index_t* csr_ind = &csr_indices[0] if csr_indices.shape[0] > 0 else NULL
    try:
        with nogil:
            for i in range(n):
                row = state + i * L.stride
                if L.label >= 0:
                    row[PRED] = y_pred[i]
                    row[L.label] = y[i]
                else:
                    row[PRED] = y_pred[i] - y[i]
                if L.weight >= 0:
                    row[L.weight] = sample_weight[i]
            if fit_intercept and n > 0:
                g = 0
                h = 0
                for i in range(n):
                    row = state + i * L.stride
                    g += _dloss(row, &L)
                    h += _weight(row, &L)
                delta = _step(g, mu * h, 0.0, intercept[0])
                if delta != 0:
                    change = intercept[0]
                    intercept[0] = <floating> (intercept[0] + delta)
                    delta = intercept[0] - change
                    for i in range(n):
                        state[i * L.stride] += delta
                    max_change = max(max_change, fabs(delta))
            if fit_linear:
                for j in range(d):
                    start = csc_indptr[j]
                    end = csc_indptr[j + 1]
                    g = 0
                    h = 0
                    support = 0
                    for z in range(start, end):
                        _prefetch_row(state, L.stride, csc_ind, z, end)
                        row = state + csc_indices[z] * L.stride
                        x = csc_data[z]
                        g += _dloss(row, &L) * x
                        h += _weight(row, &L) * x * x
                        support += _weight(row, &L)
                    delta = _unseen_or_step(support, g, mu * h, alpha, w[j])
                    if delta == 0:
                        continue
                    change = w[j]
                    w[j] = <floating> (w[j] + delta)
                    delta = w[j] - change
                    for z in range(start, end):
                        state[csc_indices[z] * L.stride] += delta * csc_data[z]
                    max_change = max(max_change, fabs(delta))
            for b in range(n_blocks):
                if kernel == ANOVA:
                    L.width = degrees[b] - 1
                if kernel == POLYNOMIAL and b > 0:
                    break
                for s in range(k):
                    # Alternate the two cache slots between consecutive components.
                    cur = L.cache + (s % 2) * L.width
                    nxt = L.cache + ((s + 1) % 2) * L.width
                    if s == 0:
                        _fill_slot(state, &L, n, cur, kernel, &P[b, 0, 0], k, s,
                                   gamma_ptr if b == 0 else NULL,
                                   n_dummy if b == 0 else 0, csr_val, csr_ind,
                                   &csr_indptr[0])
                    if kernel == POLYNOMIAL:
                        change = _cd_poly_component(
                            csc_val, csc_ind, &csc_indptr[0], n, d, k, s, degrees[0],
                            &P[0, 0, 0], gamma_ptr, n_dummy, &lam[0], fit_lam,
                            s + 1 < k, mu, beta, state, &L, cur, nxt)
                        max_change = max(max_change, change)
                        continue
                    change = _cd_component(
                        csc_val, csc_ind, &csc_indptr[0], n, d, k, s, kernel,
                        degrees[b], &P[b, 0, 0], gamma_ptr if b == 0 else NULL,
                        n_dummy if b == 0 else 0, s + 1 < k, mu, beta, state, &L,
                        cur, nxt, buf, A)
                    max_change = max(max_change, change)
            for i in range(n):
                y_pred[i] = state[i * L.stride] + (0 if L.label >= 0 else y[i])
    finally:
        free(A)
    return max_change


def weighted_loss(const double[::1] y, const double[::1] y_pred,
                  const double[::1] sample_weight, int loss):
    """sum_i sample_weight[i] * loss(y[i], y_pred[i])."""
    cdef Py_ssize_t i
    cdef double total = 0
    with nogil:
        for i in range(y.shape[0]):
            total += sample_weight[i] * loss_value(loss, y[i], y_pred[i])
    return total
