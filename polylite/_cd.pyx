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

Per row, only the current prediction and the cache of the component being updated are kept:
power sums D_1..D_{m-1} for the ANOVA kernel (from which Newton's identity gives
A_0..A_{m-1} and the coordinate derivative), and (product of the nonzero factors, number of
zero factors) for the all-subsets kernel.  O(n * m) memory, never a dense X.
"""
import numpy as np
from libc.stdlib cimport malloc, free
from libc.math cimport fabs

from ._kernels cimport (index_t, floating, ANOVA, ALL_SUBSETS, power_sums,
                        anova_from_power_sums, anova_coordinate_derivative)
from ._losses cimport loss_derivative, loss_smoothness, loss_value


cdef inline double _step(double grad, double curvature, double reg,
                         double value) noexcept nogil:
    """Minimiser of the quadratic bound along one coordinate (0 for an unused coordinate)."""
    cdef double denominator = curvature + reg
    if denominator <= 0:
        return 0
    return -(grad + reg * value) / denominator


cdef inline double _anova_derivative(const double* D, int degree, double q, double x,
                                     double* A) noexcept nogil:
    anova_from_power_sums(D, degree - 1, A)
    return anova_coordinate_derivative(A, degree, q, x)


cdef inline void _shift_power_sums(double* D, int width, double q_old,
                                   double q_new) noexcept nogil:
    cdef int t
    cdef double po = q_old, pn = q_new
    for t in range(width):
        D[t] += pn - po
        po *= q_old
        pn *= q_new


cdef inline double _subsets_rest(const double* cache, double factor) noexcept nogil:
    """prod_{j' != j} (1 + p_j' x_j') from (product of nonzero factors, zero count)."""
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


cdef double _cd_anova_component(
        const floating* csc_data, const index_t* csc_indices, const index_t* csc_indptr,
        const floating* csr_data, const index_t* csr_indices, const index_t* csr_indptr,
        Py_ssize_t n, Py_ssize_t d, Py_ssize_t k, Py_ssize_t s, int degree,
        floating* Pb, floating* gamma, Py_ssize_t n_dummy,
        const double* y, const double* sw, int loss, double mu, double beta,
        double* y_pred, double* cache, double* buf, double* A) noexcept nogil:
    cdef Py_ssize_t i, j, z, r, start, end
    cdef int width = degree - 1
    cdef double p, q, x, der, dl, g, h, delta, max_change = 0
    # Fresh power sums D_1..D_{m-1} of component s for every row (row-wise: sequential).
    for i in range(n):
        start = csr_indptr[i]
        end = csr_indptr[i + 1]
        power_sums(Pb, k, s, gamma, n_dummy, csr_indices + start, csr_data + start,
                   end - start, width, cache + i * width)
    # Dummy features (value 1 in every row).
    for r in range(n_dummy):
        p = gamma[r * k + s]
        g = 0
        h = 0
        for i in range(n):
            der = _anova_derivative(cache + i * width, degree, p, 1.0, A)
            buf[i] = der
            g += sw[i] * loss_derivative(loss, y[i], y_pred[i]) * der
            h += sw[i] * der * der
        delta = _step(g, mu * h, beta, p)
        if delta != 0:
            gamma[r * k + s] = <floating> (p + delta)
            delta = gamma[r * k + s] - p  # the step actually taken in this precision
            for i in range(n):
                y_pred[i] += delta * buf[i]
                _shift_power_sums(cache + i * width, width, p, p + delta)
            max_change = max(max_change, fabs(delta))
    # Features, through the CSC copy: column j lists the rows that contain j.
    for j in range(d):
        start = csc_indptr[j]
        end = csc_indptr[j + 1]
        if start == end:
            continue
        p = Pb[j * k + s]
        g = 0
        h = 0
        for z in range(start, end):
            i = csc_indices[z]
            x = csc_data[z]
            der = _anova_derivative(cache + i * width, degree, p * x, x, A)
            buf[z - start] = der
            g += sw[i] * loss_derivative(loss, y[i], y_pred[i]) * der
            h += sw[i] * der * der
        delta = _step(g, mu * h, beta, p)
        if delta == 0:
            continue
        Pb[j * k + s] = <floating> (p + delta)
        delta = Pb[j * k + s] - p
        for z in range(start, end):
            i = csc_indices[z]
            x = csc_data[z]
            y_pred[i] += delta * buf[z - start]
            _shift_power_sums(cache + i * width, width, p * x, (p + delta) * x)
        max_change = max(max_change, fabs(delta))
    return max_change


cdef double _cd_subsets_component(
        const floating* csc_data, const index_t* csc_indices, const index_t* csc_indptr,
        const floating* csr_data, const index_t* csr_indices, const index_t* csr_indptr,
        Py_ssize_t n, Py_ssize_t d, Py_ssize_t k, Py_ssize_t s, floating* P,
        const double* y, const double* sw, int loss, double mu, double beta,
        double* y_pred, double* cache, double* buf) noexcept nogil:
    cdef Py_ssize_t i, j, z, start, end
    cdef double p, x, f, der, g, h, delta, max_change = 0
    # Per row: cache[0] = product of the nonzero factors 1 + p_js x_ij, cache[1] = zeros.
    for i in range(n):
        cache[2 * i] = 1
        cache[2 * i + 1] = 0
        for z in range(csr_indptr[i], csr_indptr[i + 1]):
            f = 1 + <double> P[csr_indices[z] * k + s] * csr_data[z]
            _subsets_swap(cache + 2 * i, 1.0, f)
    for j in range(d):
        start = csc_indptr[j]
        end = csc_indptr[j + 1]
        if start == end:
            continue
        p = P[j * k + s]
        g = 0
        h = 0
        for z in range(start, end):
            i = csc_indices[z]
            x = csc_data[z]
            der = x * _subsets_rest(cache + 2 * i, 1 + p * x)
            buf[z - start] = der
            g += sw[i] * loss_derivative(loss, y[i], y_pred[i]) * der
            h += sw[i] * der * der
        delta = _step(g, mu * h, beta, p)
        if delta == 0:
            continue
        P[j * k + s] = <floating> (p + delta)
        delta = P[j * k + s] - p
        for z in range(start, end):
            i = csc_indices[z]
            x = csc_data[z]
            y_pred[i] += delta * buf[z - start]
            _subsets_swap(cache + 2 * i, 1 + p * x, 1 + (p + delta) * x)
        max_change = max(max_change, fabs(delta))
    return max_change


def cd_epoch(const floating[::1] csc_data, const index_t[::1] csc_indices,
             const index_t[::1] csc_indptr,
             const floating[::1] csr_data, const index_t[::1] csr_indices,
             const index_t[::1] csr_indptr,
             const double[::1] y, const double[::1] sample_weight,
             floating[::1] intercept, floating[::1] w, floating[:, :, ::1] P,
             const int[::1] degrees, floating[:, ::1] gamma,
             int kernel, int loss, double alpha, double beta,
             bint fit_intercept, bint fit_linear, double[::1] y_pred):
    """One epoch of cyclic coordinate descent, in place; returns the largest |step|.

    ``sample_weight`` must sum to 1; ``y_pred`` must hold the model's current predictions
    on entry and holds them on return.  ``intercept`` is a length-1 array.
    """
    cdef Py_ssize_t n = y.shape[0], n_blocks = P.shape[0], d = P.shape[1], k = P.shape[2]
    cdef Py_ssize_t n_dummy = gamma.shape[0]
    cdef Py_ssize_t i, j, z, b, s, start, end, longest = n
    cdef int max_degree = 2
    cdef double mu = loss_smoothness(loss)
    cdef double g, h, x, delta, max_change = 0, change
    for b in range(n_blocks):
        max_degree = max(max_degree, degrees[b])
    for j in range(d):
        longest = max(longest, csc_indptr[j + 1] - csc_indptr[j])
    cdef double* cache = <double*> malloc(n * max(max_degree - 1, 2) * sizeof(double) + 1)
    cdef double* buf = <double*> malloc(longest * sizeof(double) + 1)
    cdef double* A = <double*> malloc((max_degree + 1) * sizeof(double))
    if cache == NULL or buf == NULL or A == NULL:
        free(cache)
        free(buf)
        free(A)
        raise MemoryError("not enough memory for the coordinate descent caches")
    cdef floating* gamma_ptr = &gamma[0, 0] if gamma.size > 0 else NULL
    cdef const floating* csc_val = &csc_data[0] if csc_data.shape[0] > 0 else NULL
    cdef const index_t* csc_ind = &csc_indices[0] if csc_indices.shape[0] > 0 else NULL
    cdef const floating* csr_val = &csr_data[0] if csr_data.shape[0] > 0 else NULL
    cdef const index_t* csr_ind = &csr_indices[0] if csr_indices.shape[0] > 0 else NULL
    try:
        with nogil:
            if fit_intercept and n > 0:
                g = 0
                h = 0
                for i in range(n):
                    g += sample_weight[i] * loss_derivative(loss, y[i], y_pred[i])
                    h += sample_weight[i]
                delta = _step(g, mu * h, 0.0, intercept[0])
                if delta != 0:
                    change = intercept[0]
                    intercept[0] = <floating> (intercept[0] + delta)
                    delta = intercept[0] - change
                    for i in range(n):
                        y_pred[i] += delta
                    max_change = max(max_change, fabs(delta))
            if fit_linear:
                for j in range(d):
                    start = csc_indptr[j]
                    end = csc_indptr[j + 1]
                    g = 0
                    h = 0
                    for z in range(start, end):
                        i = csc_indices[z]
                        x = csc_data[z]
                        g += sample_weight[i] * loss_derivative(loss, y[i], y_pred[i]) * x
                        h += sample_weight[i] * x * x
                    delta = _step(g, mu * h, alpha, w[j])
                    if delta == 0:
                        continue
                    change = w[j]
                    w[j] = <floating> (w[j] + delta)
                    delta = w[j] - change
                    for z in range(start, end):
                        y_pred[csc_indices[z]] += delta * csc_data[z]
                    max_change = max(max_change, fabs(delta))
            for b in range(n_blocks):
                for s in range(k):
                    if kernel == ANOVA:
                        change = _cd_anova_component(
                            csc_val, csc_ind, &csc_indptr[0], csr_val, csr_ind,
                            &csr_indptr[0], n, d, k, s, degrees[b],
                            &P[b, 0, 0], gamma_ptr if b == 0 else NULL,
                            n_dummy if b == 0 else 0,
                            &y[0], &sample_weight[0], loss, mu, beta, &y_pred[0],
                            cache, buf, A)
                    else:
                        change = _cd_subsets_component(
                            csc_val, csc_ind, &csc_indptr[0], csr_val, csr_ind,
                            &csr_indptr[0], n, d, k, s, &P[b, 0, 0],
                            &y[0], &sample_weight[0], loss, mu, beta, &y_pred[0],
                            cache, buf)
                    max_change = max(max_change, change)
    finally:
        free(cache)
        free(buf)
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
