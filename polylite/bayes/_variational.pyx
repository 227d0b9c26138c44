"""The variance of a degree-2 factorization machine's output under a mean-field Gaussian
posterior, row by row (what the evidence lower bound and ``predict(return_std=True)`` of
the variational estimators need).

With independent factors p_js ~ N(m_js, v_js), component s's output on row x is
A_s = sum_{j < j'} a_j a_j' with a_j = p_js x_j, of means m_j x_j and variances
u_j = v_js x_j^2.  Its variance is

    Var A_s = sum_j u_j (M - m_j x_j)^2 + sum_{j < j'} u_j u_j'
            = sum_j u_j (M - m_j x_j)^2 + (U^2 - sum_j u_j^2) / 2

(M = sum_j m_j x_j, U = sum_j u_j): two passes over the row's nonzeros per component,
summing terms that are all >= 0 but the last difference (clamped at 0 against its
rounding).  The intercept, the linear term and the components are independent, so their
variances add.
"""
import numpy as np
from cython.parallel cimport prange

from .._engine._kernels cimport index_t, floating, thread_range


cdef struct Posterior:
    # The mean-field posterior of the model's parameters (the factors' means are
    # ``floating``, kept as void*: a struct cannot hold a fused type).
    const void* P_mean      # (d, k) the factors' means, C order
    const double* P_var     # (d, k) their variances
    const double* w_var     # (d,) the linear weights' variances, or NULL (not fitted)
    Py_ssize_t k            # components
    double intercept_var    # the intercept's variance


cdef void _rows(Py_ssize_t t, int threads, Py_ssize_t n, const floating* data,
                const index_t* indices, const index_t* indptr, const Posterior* post,
                double* out) noexcept nogil:
    """Rows lo..hi-1 of thread t of the n rows of X (CSR): their output variances under
    ``post`` into ``out``, the sums of each component in registers, over the row's
    nonzeros (a few, on recommender rows)."""
    cdef const floating* P_mean = <const floating*> post.P_mean
    cdef const double* P_var = post.P_var
    cdef const double* w_var = post.w_var
    cdef Py_ssize_t k = post.k
    cdef double base = post.intercept_var
    cdef Py_ssize_t i, z, s, j, lo, hi
    cdef double x, u, M, U, UU, spread, total
    if not thread_range(t, threads, n, &lo, &hi):
        return
    for i in range(lo, hi):
        total = base
        if w_var != NULL:
            for z in range(indptr[i], indptr[i + 1]):
                total += w_var[indices[z]] * data[z] * data[z]
        for s in range(k):
            M = U = UU = spread = 0
            for z in range(indptr[i], indptr[i + 1]):
                j = indices[z]
                u = P_var[j * k + s] * data[z] * data[z]
                M += P_mean[j * k + s] * data[z]
                U += u
                UU += u * u
            for z in range(indptr[i], indptr[i + 1]):
                j = indices[z]
                x = data[z]
                spread += P_var[j * k + s] * x * x * (M - P_mean[j * k + s] * x) ** 2
            total += spread + 0.5 * max(U * U - UU, 0.0)
        out[i] = total


def output_variance(X, P_mean, P_var, w_var, double intercept_var, int n_threads=1):
    """Var f(x_i) for each row of X (canonical CSR, of P_mean's dtype) under independent
    Gaussian factors: intercept of variance ``intercept_var``, linear weights of
    variances ``w_var`` ((d,) float64, or None: not fitted) and factors of means
    ``P_mean`` and variances ``P_var`` (d, k, float64).  Returns an (n,) float64 array.
    """
    if (P_var.shape != P_mean.shape or X.shape[1] != P_mean.shape[0]
            or (w_var is not None and w_var.shape != (X.shape[1],))):
        raise ValueError("output_variance: X, P_mean, P_var and w_var disagree in shape")
    out = np.empty(X.shape[0], dtype=np.float64)
    if X.shape[0] > 0:
        threads = max(1, n_threads)
        _variance(X.data, X.indices, X.indptr, P_mean, P_var,
                  w_var if w_var is not None else np.zeros(0), w_var is not None,
                  intercept_var, threads, out)
    return out


def _variance(const floating[::1] data, const index_t[::1] indices,
              const index_t[::1] indptr, const floating[:, ::1] P_mean,
              const double[:, ::1] P_var, const double[::1] w_var, bint linear,
              double intercept_var, int threads, double[::1] out):
    cdef Py_ssize_t n = out.shape[0], t
    cdef const index_t* ind_ptr = &indices[0] if indices.shape[0] > 0 else NULL
    cdef const floating* data_ptr = &data[0] if data.shape[0] > 0 else NULL
    cdef Posterior post
    post.P_mean = &P_mean[0, 0] if P_mean.size > 0 else NULL
    post.P_var = &P_var[0, 0] if P_var.size > 0 else NULL
    post.w_var = &w_var[0] if linear and w_var.shape[0] > 0 else NULL
    post.k = P_mean.shape[1]
    post.intercept_var = intercept_var
    with nogil:
        if threads == 1:
            _rows(0, 1, n, data_ptr, ind_ptr, &indptr[0], &post, &out[0])
        else:
            for t in prange(threads, num_threads=threads, schedule="static", chunksize=1):
                _rows(t, threads, n, data_ptr, ind_ptr, &indptr[0], &post, &out[0])
