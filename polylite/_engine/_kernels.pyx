"""Polynomial kernels over one sparse row, and batch prediction over a CSR matrix.

The ``cdef`` functions are the single implementation of each formula (ALGORITHMS.md
sections 1-3); the solvers ``cimport`` them.  The ``def`` functions below them expose each
kernel on one row for tests and for users who want the raw kernels.
"""
import numpy as np
from libc.stdlib cimport malloc, free
from libc.stdint cimport uint32_t, int32_t, int64_t
from cython.parallel cimport prange


cdef extern from *:
    """
    /* One item (value x, factor row `row`) of the ANOVA dynamic programme on the table
       a[t*k + s] (row t = degree t), for the degrees t (the highest) down to t_lo >= 1:
           a[t] += x row * a[t-1],   with a[0] = 1 implicit (never read).
       When `fresh`, row t has never been written (t = number of items so far):
       it is assigned instead of accumulated, so the table needs no zeroing.  The pointers
       are `restrict` (the table, P and gamma never overlap) and the inner loop is a plain
       loop over the k components, so the compiler vectorises it without alias checks
       (POLYLITE_RESTRICT: _kernels.pxd). */
    #define POLYLITE_DEFINE_ANOVA_ITEM(NAME, T)                                      \
    static inline void NAME(T *POLYLITE_RESTRICT a, const T *POLYLITE_RESTRICT row,  \
                            const T x, const Py_ssize_t k, Py_ssize_t t,             \
                            const Py_ssize_t t_lo, const int fresh) {                \
        Py_ssize_t s;                                                                \
        if (fresh) {                                                                 \
            T *POLYLITE_RESTRICT h = a + t * k;                                      \
            if (t == 1) {                                                            \
                for (s = 0; s < k; ++s) h[s] = x * row[s];                           \
            } else {                                                                 \
                const T *POLYLITE_RESTRICT l = a + (t - 1) * k;                      \
                for (s = 0; s < k; ++s) h[s] = x * row[s] * l[s];                    \
            }                                                                        \
            --t;                                                                     \
        }                                                                            \
        for (; t >= t_lo && t > 1; --t) {                                            \
            T *POLYLITE_RESTRICT h = a + t * k;                                      \
            const T *POLYLITE_RESTRICT l = a + (t - 1) * k;                          \
            for (s = 0; s < k; ++s) h[s] += x * row[s] * l[s];                       \
        }                                                                            \
        if (t == 1 && t_lo <= 1) {                                                   \
            for (s = 0; s < k; ++s) a[k + s] += x * row[s];                          \
        }                                                                            \
    }
    POLYLITE_DEFINE_ANOVA_ITEM(polylite_anova_item_d, double)
    POLYLITE_DEFINE_ANOVA_ITEM(polylite_anova_item_f, float)

    /* sum_s a[s] in double with four independent accumulators: a single running sum is
       a chain of k dependent additions, which costs more than a row's whole DP. */
    #define POLYLITE_DEFINE_SUM(NAME, T)                                             \
    static inline double NAME(const T *a, const Py_ssize_t k) {                      \
        double s0 = 0, s1 = 0, s2 = 0, s3 = 0;                                       \
        Py_ssize_t s = 0;                                                            \
        for (; s + 4 <= k; s += 4) {                                                 \
            s0 += a[s]; s1 += a[s + 1]; s2 += a[s + 2]; s3 += a[s + 3];              \
        }                                                                            \
        for (; s < k; ++s) s0 += a[s];                                               \
        return (s0 + s1) + (s2 + s3);                                                \
    }
    POLYLITE_DEFINE_SUM(polylite_sum_d, double)
    POLYLITE_DEFINE_SUM(polylite_sum_f, float)
    """
    void polylite_anova_item_d(double* a, const double* row, double x, Py_ssize_t k,
                               Py_ssize_t t_hi, Py_ssize_t t_lo, int fresh) noexcept nogil
    void polylite_anova_item_f(float* a, const float* row, float x, Py_ssize_t k,
                               Py_ssize_t t_hi, Py_ssize_t t_lo, int fresh) noexcept nogil
    double polylite_sum_d(const double* a, Py_ssize_t k) noexcept nogil
    double polylite_sum_f(const float* a, Py_ssize_t k) noexcept nogil


# ---------------------------------------------------------------------------------------
# ANOVA kernel: dynamic programme (HOFM paper, Algorithm 1) and reverse mode (Algorithm 2)
# ---------------------------------------------------------------------------------------

cdef inline const floating* _item_row(const floating* P, Py_ssize_t k,
                                      const floating* gamma, Py_ssize_t n_dummy,
                                      const index_t* ind, Py_ssize_t e) noexcept nogil:
    # Item e of the augmented row: the dummies first, then the row's nonzeros.
    if e < n_dummy:
        return gamma + e * k
    return P + ind[e - n_dummy] * k


cdef inline floating _item_value(const floating* val, Py_ssize_t n_dummy,
                                 Py_ssize_t e) noexcept nogil:
    if e < n_dummy:
        return 1
    return val[e - n_dummy]


cdef void anova_forward(const floating* P, Py_ssize_t k,
                        const floating* gamma, Py_ssize_t n_dummy,
                        const index_t* ind, const floating* val, Py_ssize_t nnz,
                        int degree, floating* a) noexcept nogil:
    """A_t(p_s, x) for t = 0..degree and every component s, into a[(degree+1)*k].

    a[t*k + s] = A_t.  O((n_dummy + nnz) * degree * k) time, no memory beyond ``a``.
    """
    cdef Py_ssize_t s, e, t, top
    cdef Py_ssize_t n_items = n_dummy + nnz
    cdef const floating* row
    cdef floating x
    for s in range(k):
        a[s] = 1
    for s in range(k, (degree + 1) * k):
        a[s] = 0
    for e in range(n_items):
        row = _item_row(P, k, gamma, n_dummy, ind, e)
        x = _item_value(val, n_dummy, e)
        # After e+1 items, degrees above e+1 are still zero: skip them.
        top = e + 1 if e + 1 < degree else degree
        # Descending t so that a[t-1] still holds the previous item's value.
        for t in range(top, 0, -1):
            _dp_add(a + t * k, a + (t - 1) * k, row, x, k)


cdef void anova_gradient(const Factors* f, const index_t* ind, const floating* val,
                         Py_ssize_t nnz, int degree, floating* table, floating* adj,
                         floating* grad, floating* grad_gamma) noexcept nogil:
    """Gradient of A_degree(p_s, x) with respect to p_s (the block ``f``) on the row's
    support.

    Workspace: ``table`` (n_dummy + nnz + 1) * (degree + 1) * k, ``adj`` (degree + 1) * k.
    Output: grad[z*k + s] = dA/dP[ind[z], s], grad_gamma[r*k + s] = dA/dgamma[r, s]
    (skipped when n_dummy == 0).  On return the last block of ``table``,
    table[n_items*(degree+1)*k : ...], holds A_t for t = 0..degree (as anova_forward).
    Every inner loop runs over the k components, so the compiler can vectorise it.
    """
    cdef Py_ssize_t s, k = f.k
    anova_table(<const floating*> f.P, k, <const floating*> f.gamma, f.n_dummy, ind, val,
                nnz, degree, table)
    for s in range((degree + 1) * k):
        adj[s] = 0
    for s in range(k):
        adj[degree * k + s] = 1
    anova_backward(f, ind, val, nnz, degree, table, adj, grad, grad_gamma)


cdef void anova_table(const floating* P, Py_ssize_t k,
                      const floating* gamma, Py_ssize_t n_dummy,
                      const index_t* ind, const floating* val, Py_ssize_t nnz,
                      int degree, floating* table) noexcept nogil:
    """The dynamic programme's state after each item of the augmented row, kept for
    :func:`anova_backward`: table[e*(degree+1)*k + t*k + s] = A_t of the first e items,
    e = 0..n_dummy + nnz (the last block: A_t of the whole row)."""
    cdef Py_ssize_t s, e, t
    cdef Py_ssize_t n_items = n_dummy + nnz
    cdef Py_ssize_t block = (degree + 1) * k
    cdef const floating* row
    cdef floating x
    cdef floating* cur
    cdef floating* nxt
    for s in range(k):
        table[s] = 1
    for s in range(k, block):
        table[s] = 0
    for e in range(n_items):
        row = _item_row(P, k, gamma, n_dummy, ind, e)
        x = _item_value(val, n_dummy, e)
        cur = table + e * block
        nxt = cur + block
        for s in range(k):
            nxt[s] = 1
        for t in range(1, degree + 1):
            _dp_row(nxt + t * k, cur + t * k, cur + (t - 1) * k, row, x, k)


cdef void anova_backward(const Factors* f, const index_t* ind, const floating* val,
                         Py_ssize_t nnz, int degree, const floating* table,
                         floating* adj, floating* grad,
                         floating* grad_gamma) noexcept nogil:
    """Reverse mode of the dynamic programme: the gradient of sum_t c_t,s A_t(p_s, x)
    (t = 0..degree, p_s of the block ``f``) on the row's support, for cotangents c given
    in ``adj`` (adj[t*k + s] = c_t,s; overwritten).  ``table``: from
    :func:`anova_table`.  Output as :func:`anova_gradient`."""
    cdef const floating* P = <const floating*> f.P
    cdef const floating* gamma = <const floating*> f.gamma
    cdef Py_ssize_t k = f.k, n_dummy = f.n_dummy
    cdef Py_ssize_t s, e, t
    cdef Py_ssize_t n_items = n_dummy + nnz
    cdef Py_ssize_t block = (degree + 1) * k
    cdef const floating* row
    cdef floating x
    cdef const floating* cur
    cdef floating* g
    # adj[t] = d(output) / d a[e, t], from e = n_items down to 1.
    for e in range(n_items - 1, -1, -1):
        row = _item_row(P, k, gamma, n_dummy, ind, e)
        x = _item_value(val, n_dummy, e)
        cur = table + e * block
        g = grad_gamma + e * k if e < n_dummy else grad + (e - n_dummy) * k
        # g = x * sum_t adj[t] * a[e-1, t-1]
        for s in range(k):
            g[s] = 0
        for t in range(1, degree + 1):
            _accumulate(g, adj + t * k, cur + (t - 1) * k, k)
        for s in range(k):
            g[s] *= x
        # Ascending t: adj[t+1] still holds the later item's adjoint.
        for t in range(degree):
            _dp_add(adj + t * k, adj + (t + 1) * k, row, x, k)


# The k-loops below take restrict pointers (their arrays never overlap), so the compiler
# vectorises them without a run-time overlap test on every call.

cdef inline void _dp_row(floating_row out, const_floating_row same,
                         const_floating_row lower, const_floating_row row, floating x,
                         Py_ssize_t k) noexcept nogil:
    """out[s] = same[s] + x * row[s] * lower[s] (four distinct arrays)."""
    cdef Py_ssize_t s
    for s in range(k):
        out[s] = same[s] + x * row[s] * lower[s]


cdef inline void _dp_add(floating_row acc, const_floating_row lower,
                         const_floating_row row, floating x, Py_ssize_t k) noexcept nogil:
    """acc[s] += x * row[s] * lower[s]: one update of the dynamic programme in place."""
    cdef Py_ssize_t s
    for s in range(k):
        acc[s] += x * row[s] * lower[s]


cdef inline void _accumulate(floating_row acc, const_floating_row a, const_floating_row b,
                             Py_ssize_t k) noexcept nogil:
    cdef Py_ssize_t s
    for s in range(k):
        acc[s] += a[s] * b[s]


# ---------------------------------------------------------------------------------------
# All-subsets kernel S(p, x) = prod_j (1 + p_j x_j)
# ---------------------------------------------------------------------------------------

cdef void all_subsets_forward(const floating* P, Py_ssize_t k,
                              const index_t* ind, const floating* val, Py_ssize_t nnz,
                              floating* out) noexcept nogil:
    cdef Py_ssize_t s, z
    cdef const floating* row
    cdef floating x
    for s in range(k):
        out[s] = 1
    for z in range(nnz):
        row = P + ind[z] * k
        x = val[z]
        for s in range(k):
            out[s] *= 1 + row[s] * x


cdef void all_subsets_gradient(const floating* P, Py_ssize_t k,
                               const index_t* ind, const floating* val, Py_ssize_t nnz,
                               floating* prefix, floating* suffix,
                               floating* grad) noexcept nogil:
    """grad[z*k+s] = x_z prod_{z' != z} (1 + p_z' x_z'), without dividing (a factor may be 0).

    Workspace: ``prefix`` (nnz + 1) * k, ``suffix`` k.  On return prefix[nnz*k : ] holds S.
    """
    cdef Py_ssize_t s, z
    cdef const floating* row
    cdef floating x
    for s in range(k):
        prefix[s] = 1
        suffix[s] = 1
    for z in range(nnz):
        row = P + ind[z] * k
        x = val[z]
        for s in range(k):
            prefix[(z + 1) * k + s] = prefix[z * k + s] * (1 + row[s] * x)
    for z in range(nnz - 1, -1, -1):
        row = P + ind[z] * k
        x = val[z]
        for s in range(k):
            grad[z * k + s] = x * prefix[z * k + s] * suffix[s]
            suffix[s] *= 1 + row[s] * x


# ---------------------------------------------------------------------------------------
# Polynomial kernel: the linear forms gamma_s + <p_s, x>; callers raise them to the power m
# ---------------------------------------------------------------------------------------

cdef void linear_forms(const floating* P, Py_ssize_t k, const floating* gamma,
                       const index_t* ind, const floating* val, Py_ssize_t nnz,
                       floating* out) noexcept nogil:
    cdef Py_ssize_t s, z
    cdef const floating* row
    cdef floating x
    for s in range(k):
        out[s] = gamma[s] if gamma != NULL else 0
    for z in range(nnz):
        row = P + ind[z] * k
        x = val[z]
        for s in range(k):
            out[s] += row[s] * x


# ---------------------------------------------------------------------------------------
# Power sums and the coordinate derivative (HOFM paper, section 4)
# ---------------------------------------------------------------------------------------

cdef void power_sums(const floating* P, Py_ssize_t k, Py_ssize_t s,
                     const floating* gamma, Py_ssize_t n_dummy,
                     const index_t* ind, const floating* val, Py_ssize_t nnz,
                     int degree, double* D) noexcept nogil:
    """D[t-1] = sum_j (p_js x_j)^t for t = 1..degree (dummies included), component s."""
    cdef Py_ssize_t e, t
    cdef double q, qt
    for t in range(degree):
        D[t] = 0
    for e in range(n_dummy + nnz):
        if e < n_dummy:
            q = gamma[e * k + s]
        else:
            q = P[ind[e - n_dummy] * k + s] * val[e - n_dummy]
        qt = q
        for t in range(degree):
            D[t] += qt
            qt *= q


# ---------------------------------------------------------------------------------------
# The model's nonlinear term on one row (what predict sums)
# ---------------------------------------------------------------------------------------

cdef inline double _anova_sum(const floating* P, Py_ssize_t k,
                              const floating* gamma, Py_ssize_t n_dummy,
                              const index_t* ind, const floating* val, Py_ssize_t nnz,
                              Py_ssize_t degree, floating* a) noexcept nogil:
    """sum_s A_degree(p_s, x): anova_forward pruned to what the top degree needs.

    After item e (0-based) of n, the DP row t can still reach degree m only if the
    n - 1 - e items left can supply the missing m - t factors, so item e updates the
    degrees max(1, m - (n - 1 - e)) .. min(e + 1, m) only: (n - m + 1) m updates of k
    components instead of about n m.  A row with fewer than m items gives 0 at once.
    ``a`` needs (degree + 1) * k entries; row 0 of it is not used.
    """
    cdef Py_ssize_t n_items = n_dummy + nnz
    cdef Py_ssize_t e, t_hi, t_lo
    cdef const floating* row
    cdef floating x
    if n_items < degree or degree < 1:
        return 0
    for e in range(n_items):
        if e < n_dummy:
            row = gamma + e * k
            x = 1
        else:
            row = P + ind[e - n_dummy] * k
            x = val[e - n_dummy]
        t_hi = e + 1 if e + 1 < degree else degree
        t_lo = degree - (n_items - 1 - e)
        if t_lo < 1:
            t_lo = 1
        if floating is double:
            polylite_anova_item_d(a, row, x, k, t_hi, t_lo, e < degree)
        else:
            polylite_anova_item_f(a, row, x, k, t_hi, t_lo, e < degree)
    if floating is double:
        return polylite_sum_d(a + degree * k, k)
    else:
        return polylite_sum_f(a + degree * k, k)


cdef double field_aware_term(const floating* P, Py_ssize_t width, Py_ssize_t n_fields,
                             const int* fields, const index_t* ind, const floating* val,
                             Py_ssize_t nnz, floating* grad) noexcept nogil:
    """The field-aware pairs of one row, ``sum_{a < b} <P[j_a, f_b], P[j_b, f_a]> x_a x_b``
    (j_a = ind[a], f_a = fields[j_a]), with P a (d, width) matrix whose row j holds the
    ``n_fields`` latent vectors of feature j, each ``width / n_fields`` long.

    ``grad`` (NULL: the value only), nnz x width, receives the gradient in the row's factor
    rows: grad[a, f, :] = sum over the b != a of field f of P[j_b, f_a, :] x_a x_b (zero
    for the fields no other nonzero of the row has).  O(nnz^2 k), one pass over the pairs.
    """
    cdef Py_ssize_t k = width // n_fields if n_fields > 0 else 0
    cdef Py_ssize_t a, b, s, ja, jb, fa, fb
    cdef const floating* pa
    cdef const floating* pb
    cdef floating* ga
    cdef floating* gb
    cdef floating xa, xab, dot
    cdef double total = 0
    if grad != NULL:
        for s in range(nnz * width):
            grad[s] = 0
    for a in range(nnz):
        ja = ind[a]
        fa = fields[ja]
        xa = val[a]
        for b in range(a + 1, nnz):
            jb = ind[b]
            fb = fields[jb]
            xab = xa * val[b]
            pa = P + ja * width + fb * k
            pb = P + jb * width + fa * k
            dot = 0
            for s in range(k):
                dot = dot + pa[s] * pb[s]
            total += dot * xab
            if grad != NULL:
                ga = grad + a * width + fb * k
                gb = grad + b * width + fa * k
                for s in range(k):
                    ga[s] = ga[s] + xab * pb[s]
                    gb[s] = gb[s] + xab * pa[s]
    return total


cdef double field_weighted_term(const Model* m, const index_t* ind, const floating* val,
                                Py_ssize_t nnz, floating* grad,
                                floating* grad_r) noexcept nogil:
    """The field-weighted pairs of one row,
    ``sum_{a < b} r[f_a, f_b] <P[j_a], P[j_b]> x_a x_b`` (j_a = ind[a], f_a = m.fields[j_a]),
    with P = m.P (d, k) and the weights r = m.lam packed (:func:`field_pair`).

    ``grad`` (NULL: the value only, and ``grad_r`` is not read), nnz x k, receives the
    gradient in the row's factor rows, grad[a] = sum_{b != a} r[f_a, f_b] P[j_b] x_a x_b;
    ``grad_r`` (the packed weights' shape) the gradient in the weights of the row's pairs
    of fields, grad_r[{f, g}] = the sum of <P[j_a], P[j_b]> x_a x_b over the row's pairs
    a < b of those fields (its other entries are not written).  O(nnz^2 k).
    """
    cdef const floating* P = <const floating*> m.P
    cdef const floating* r = <const floating*> m.lam
    cdef const int* fields = m.fields
    cdef Py_ssize_t k = m.k, n_fields = m.n_fields
    cdef Py_ssize_t a, b, s, ja, fa, e
    cdef const floating* pa
    cdef const floating* pb
    cdef floating* ga
    cdef floating* gb
    cdef floating xab, dot, c
    cdef double total = 0
    if grad != NULL:
        for s in range(nnz * k):
            grad[s] = 0
        for a in range(nnz):
            fa = fields[ind[a]]
            for b in range(a + 1, nnz):
                grad_r[field_pair(fa, fields[ind[b]], n_fields)] = 0
    for a in range(nnz):
        ja = ind[a]
        fa = fields[ja]
        pa = P + ja * k
        for b in range(a + 1, nnz):
            pb = P + ind[b] * k
            e = field_pair(fa, fields[ind[b]], n_fields)
            xab = val[a] * val[b]
            dot = 0
            for s in range(k):
                dot = dot + pa[s] * pb[s]
            total += r[e] * dot * xab
            if grad != NULL:
                grad_r[e] = grad_r[e] + dot * xab
                c = r[e] * xab
                ga = grad + a * k
                gb = grad + b * k
                for s in range(k):
                    ga[s] = ga[s] + c * pb[s]
                    gb[s] = gb[s] + c * pa[s]
    return total


def field_weighted_row(const floating[:, ::1] P, const floating[::1] r,
                       const int[::1] fields, Py_ssize_t n_fields,
                       const index_t[::1] indices,
                       const floating[::1] values, floating[:, ::1] grad=None,
                       floating[::1] grad_r=None):
    """:func:`field_weighted_term` of one row (shapes checked by
    ``polylite.kernels.field_weighted``); its gradients into ``grad`` (nnz x k) and
    ``grad_r`` (the packed weights' shape) if given (both or neither)."""
    cdef Model m
    cdef Py_ssize_t nnz = indices.shape[0]
    cdef floating* g = NULL
    cdef floating* gr = NULL
    if nnz == 0 or P.size == 0 or r.shape[0] == 0:
        return 0.0
    if grad is not None and grad_r is not None and grad.size > 0:
        g = &grad[0, 0]
        gr = &grad_r[0]
    m.P = <void*> &P[0, 0]
    m.lam = <void*> &r[0]
    m.k = P.shape[1]
    m.d = P.shape[0]
    m.fields = &fields[0]
    m.n_fields = n_fields
    return field_weighted_term(&m, &indices[0], &values[0], nnz, g, gr)


def field_aware_row(const floating[:, ::1] P, const int[::1] fields, Py_ssize_t n_fields,
                    const index_t[::1] indices, const floating[::1] values,
                    floating[:, ::1] grad=None):
    """:func:`field_aware_term` of one row (shapes checked by
    ``polylite.kernels.field_aware``); the gradient into ``grad`` (nnz x width) if given."""
    cdef Py_ssize_t nnz = indices.shape[0], width = P.shape[1]
    cdef floating* g = NULL
    if grad is not None and grad.size > 0:
        g = &grad[0, 0]
    if nnz == 0 or P.size == 0:
        return 0.0
    return field_aware_term(&P[0, 0], width, n_fields, &fields[0], &indices[0],
                            &values[0], nnz, g)


cdef double nonlinear_term(const Model* m, const index_t* ind, const floating* val,
                           Py_ssize_t nnz, floating* work) noexcept nogil:
    """Sum over blocks and components of the kernel values of the model ``m``; ``work``
    has (max degree + 1) * k entries.  ANOVA: block b has degree degrees[b] and the
    dummies belong to block 0.  ALL_SUBSETS: one block.  POLYNOMIAL: one block,
    lam[s] * (gamma[s] + <p_s, x>)^degrees[0], with gamma present iff n_dummy == 1."""
    cdef const floating* P = <const floating*> m.P
    cdef const floating* gamma = <const floating*> m.gamma
    cdef const floating* lam = <const floating*> m.lam
    cdef const int* degrees = m.degrees
    cdef Py_ssize_t n_features = m.d, k = m.k, n_dummy = m.n_dummy
    cdef int kernel = m.kernel
    cdef double total = 0
    cdef Py_ssize_t b, s, degree
    cdef const floating* Pb
    if kernel == ANOVA:
        for b in range(m.n_blocks):
            degree = degrees[b]
            Pb = P + b * n_features * k
            if b == 0:
                total += _anova_sum(Pb, k, gamma, n_dummy, ind, val, nnz, degree, work)
            else:
                total += _anova_sum(Pb, k, gamma, 0, ind, val, nnz, degree, work)
    elif kernel == ALL_SUBSETS:
        all_subsets_forward(P, k, ind, val, nnz, work)
        for s in range(k):
            total += work[s]
    elif kernel == FIELD_AWARE:
        total = field_aware_term(P, k, m.n_fields, m.fields, ind, val, nnz, <floating*> NULL)
    elif kernel == FIELD_WEIGHTED:
        total = field_weighted_term(m, ind, val, nnz, <floating*> NULL, <floating*> NULL)
    else:
        linear_forms(P, k, gamma if n_dummy > 0 else NULL, ind, val, nnz, work)
        degree = degrees[0]
        for s in range(k):
            total += lam[s] * int_power(work[s], degree)
    return total


# ---------------------------------------------------------------------------------------
# Batch prediction over a CSR matrix
# ---------------------------------------------------------------------------------------

cdef enum:
    # predict_csr prefetches the rows of P needed this many nonzeros past the current row.
    PREFETCH_NNZ = 16


cdef inline Py_ssize_t _thread_stride(Py_ssize_t n, size_t size) noexcept nogil:
    """Entries (of ``size`` bytes) from one thread's workspace of ``n`` entries to the
    next: ``n`` rounded up to whole THREAD_ALIGN blocks.  Each thread rewrites its DP
    table at every row, so a cache line holding the end of one thread's table and the
    start of the next one's would move between the cores at every row (false sharing: at
    float32, k = 10, degree 2, two threads predicted slower than one)."""
    return (n * size + THREAD_ALIGN - 1) // THREAD_ALIGN * (THREAD_ALIGN // size)


cdef void _predict_rows(Py_ssize_t lo, Py_ssize_t hi, const floating* data,
                        const index_t* indices, const index_t* indptr, double intercept,
                        const Model* m, floating* out, floating* work) noexcept nogil:
    """out[i] for the rows lo..hi-1 (the model's ``w`` NULL: no linear term)."""
    # A copy the compiler can keep in registers (the writes to out cannot reach it).
    cdef Model model = m[0]
    cdef const floating* w = <const floating*> model.w
    cdef const floating* P = <const floating*> model.P
    cdef Py_ssize_t n_blocks = model.n_blocks, d = model.d, k = model.k
    cdef Py_ssize_t i, z, b, start, end, last
    cdef Py_ssize_t ahead = indptr[lo]
    cdef size_t row_bytes = k * sizeof(floating)
    cdef double acc
    for i in range(lo, hi):
        start = indptr[i]
        end = indptr[i + 1]
        # The rows of P (and entries of w) are gathered at random: request those of the
        # next PREFETCH_NNZ nonzeros now, so that their cache misses overlap the work on
        # this row.
        last = end + PREFETCH_NNZ
        if last > indptr[hi]:
            last = indptr[hi]
        while ahead < last:
            if k > 0:
                for b in range(n_blocks):
                    polylite_prefetch_block(P + (b * d + indices[ahead]) * k, row_bytes)
            if w != NULL:
                polylite_prefetch_block(&w[indices[ahead]], sizeof(floating))
            ahead += 1
        acc = intercept
        if w != NULL:
            for z in range(start, end):
                acc += w[indices[z]] * data[z]
        if k > 0 and n_blocks > 0:
            acc += nonlinear_term(&model, indices + start, data + start, end - start, work)
        out[i] = acc


cdef void _predict_share(Py_ssize_t t, Py_ssize_t threads, Py_ssize_t n,
                         const floating* data, const index_t* indices,
                         const index_t* indptr, double intercept, const Model* m,
                         floating* out, floating* work) noexcept nogil:
    """Thread t's share of the rows, with its own workspace ``work``."""
    cdef Py_ssize_t lo, hi
    if thread_range(t, threads, n, &lo, &hi):
        _predict_rows(lo, hi, data, indices, indptr, intercept, m, out, work)


cdef Model _model_of(const floating[::1] w, const floating[:, :, ::1] P, gamma, lam,
                     const int[::1] degrees, int kernel, const floating* empty):
    """The record of a model's arrays (``gamma`` and ``lam`` of P's dtype, or None).
    Empty arrays have no data pointer to take: ``w`` and ``gamma`` are then NULL, ``P``
    and ``lam`` the non-NULL ``empty``, never read.  The arrays must outlive the
    record."""
    cdef const floating[:, ::1] gamma_view
    cdef const floating[::1] lam_view
    cdef Model m
    m.intercept = NULL
    m.w = <void*> &w[0] if w.shape[0] > 0 else NULL
    m.P = <void*> (&P[0, 0, 0] if P.size > 0 else empty)
    m.gamma = NULL
    m.n_dummy = 0
    if gamma is not None:
        gamma_view = gamma
        m.n_dummy = gamma_view.shape[0]
        if gamma_view.size > 0:
            m.gamma = <void*> &gamma_view[0, 0]
    m.lam = <void*> empty
    if lam is not None:
        lam_view = lam
        if lam_view.shape[0] > 0:
            m.lam = <void*> &lam_view[0]
    m.degrees = &degrees[0]
    m.n_blocks = P.shape[0]
    m.d = P.shape[1]
    m.k = P.shape[2]
    m.kernel = kernel
    m.fields = NULL
    m.n_fields = 0
    return m


def predict_csr(const floating[::1] data, const index_t[::1] indices,
                const index_t[::1] indptr, model, floating[::1] out, int n_threads=1):
    """out[i] = intercept + <w, x_i> + nonlinear_term(x_i) for every CSR row i, for the
    ``model`` (a :class:`polylite._engine.problem.FittedModel`, of the rows' dtype).

    Shapes and ranges are the caller's responsibility (``polylite.kernels.predict``
    validates them).
    ``w`` may be empty (no linear term); ``lam`` has one entry per component.
    ``n_threads`` threads share the rows as contiguous ranges; each row is computed
    exactly as on one thread, so the result does not depend on the thread count.
    """
    cdef const floating[::1] w = model.w
    cdef const floating[:, :, ::1] P = model.P
    cdef const int[::1] degrees = model.degrees
    cdef double intercept = model.intercept
    cdef int kernel = model.kernel
    cdef Py_ssize_t n = indptr.shape[0] - 1, k = P.shape[2], i, t
    cdef int max_degree = 1
    if n_threads < 1:
        raise ValueError(f"n_threads must be at least 1, got {n_threads}")
    if out.shape[0] != n:
        raise ValueError(f"out has {out.shape[0]} entries for {n} rows")
    for i in range(degrees.shape[0]):
        if degrees[i] > max_degree:
            max_degree = degrees[i]
    # Each thread's DP table on cache lines of its own (see _thread_stride).
    cdef Py_ssize_t work_size = _thread_stride((max_degree + 1) * max(k, 1),
                                               sizeof(floating))
    cdef void* raw = malloc(n_threads * work_size * sizeof(floating) + THREAD_ALIGN)
    if raw == NULL:
        raise MemoryError()
    cdef floating* work = <floating*> thread_align(raw)
    # Empty arrays have no data pointer to take: point at the workspace instead (unused).
    cdef Model m = _model_of(w, P, model.gamma, model.lam, degrees, kernel,
                             <const floating*> work)
    cdef const int[::1] fields
    if kernel == FIELD_AWARE or kernel == FIELD_WEIGHTED:
        fields = model.fields
        m.fields = &fields[0] if fields.shape[0] > 0 else NULL
        m.n_fields = model.n_fields
    cdef const index_t* ind_ptr = &indices[0] if indices.shape[0] > 0 else NULL
    cdef const floating* val_ptr = &data[0] if data.shape[0] > 0 else NULL
    cdef floating* out_ptr = &out[0] if n > 0 else NULL
    try:
        with nogil:
            if n_threads == 1:
                _predict_share(0, 1, n, val_ptr, ind_ptr, &indptr[0], intercept, &m,
                               out_ptr, work)
            else:
                for t in prange(n_threads, num_threads=n_threads, schedule="static",
                                chunksize=1):
                    _predict_share(t, n_threads, n, val_ptr, ind_ptr, &indptr[0],
                                   intercept, &m, out_ptr, work + t * work_size)
    finally:
        free(raw)
    return np.asarray(out)


# ---------------------------------------------------------------------------------------
# Relational input: each table row's share of the prediction, computed once
# ---------------------------------------------------------------------------------------
#
# A row made of disjoint parts x = [x_1 | x_2 | ...] has <w, x> = sum of the parts',
# S(p, x) = product of the parts' (all-subsets) and, for the ANOVA kernel, the convolution
# A_t(p, x) = sum_{u=0..t} A_u(p, x_1) A_{t-u}(p, [x_2 | ...]) (a set of t distinct
# features takes u of them from the first part).  So each table row's terms are computed
# once (table_terms) and every interaction combines its direct part's with those of its
# table rows (predict_relational): O(nnz(tables) k m + n B k m^2) instead of
# O(nnz(expanded) k m).

cdef Py_ssize_t _terms_width(int kernel, Py_ssize_t n_blocks, const int* degrees,
                             Py_ssize_t k) noexcept nogil:
    """Doubles per table row of table_terms: the linear term, then per factor block the
    values A_1..A_m of every component (degree-major, as the DP table), or the
    all-subsets value of every component."""
    cdef Py_ssize_t b, width = 1
    if kernel == ALL_SUBSETS:
        return 1 + k
    for b in range(n_blocks):
        width += degrees[b] * k
    return width


cdef void _table_row_terms(const floating* data, const index_t* indices, Py_ssize_t nnz,
                           const Model* m, double* out, floating* work) noexcept nogil:
    """One table row's terms (see table_terms) into ``out``; the model's ``w`` NULL: a
    linear term of 0."""
    cdef const floating* w = <const floating*> m.w
    cdef const floating* P = <const floating*> m.P
    cdef Py_ssize_t d = m.d, k = m.k
    cdef Py_ssize_t z, b, t, s, degree
    cdef double acc = 0
    cdef double* block = out + 1
    if w != NULL:
        for z in range(nnz):
            acc += w[indices[z]] * data[z]
    out[0] = acc
    if m.kernel == ALL_SUBSETS:
        all_subsets_forward(P, k, indices, data, nnz, work)
        for s in range(k):
            block[s] = work[s]
        return
    for b in range(m.n_blocks):
        degree = m.degrees[b]
        anova_forward(P + b * d * k, k, <const floating*> NULL, 0, indices, data, nnz,
                      <int> degree, work)
        for t in range(1, degree + 1):
            for s in range(k):
                block[(t - 1) * k + s] = work[t * k + s]
        block += degree * k


def table_terms(const floating[::1] data, const index_t[::1] indices,
                const index_t[::1] indptr, const floating[::1] w,
                const floating[:, :, ::1] P, const int[::1] degrees, int kernel,
                double[:, ::1] out, int n_threads=1):
    """Each table row's share of a prediction (anova or all-subsets kernel), into
    ``out`` (n_rows, width): the linear term ``<w, x>`` (0 when ``w`` is empty), then for
    each factor block b the ANOVA values A_1..A_m of every component (m = degrees[b];
    degree-major: A_t of component s at 1 + offset_b + (t - 1) k + s), or for the
    all-subsets kernel the value S of every component.  Shapes are the caller's
    responsibility (``polylite.kernels.predict``)."""
    cdef Py_ssize_t n = indptr.shape[0] - 1, n_blocks = P.shape[0], d = P.shape[1]
    cdef Py_ssize_t k = P.shape[2], i, t, lo, hi, max_degree = 1
    for i in range(degrees.shape[0]):
        max_degree = max(max_degree, degrees[i])
    if out.shape[0] != n or out.shape[1] != _terms_width(kernel, n_blocks, &degrees[0], k):
        raise ValueError("table_terms: out has the wrong shape")
    # Each thread's DP table on cache lines of its own (see _thread_stride).
    cdef Py_ssize_t work_size = _thread_stride((max_degree + 1) * max(k, 1),
                                               sizeof(floating))
    cdef void* raw = malloc(n_threads * work_size * sizeof(floating) + THREAD_ALIGN)
    if raw == NULL:
        raise MemoryError()
    cdef floating* work = <floating*> thread_align(raw)
    cdef Model m = _model_of(w, P, None, None, degrees, kernel, <const floating*> work)
    cdef const index_t* ind_ptr = &indices[0] if indices.shape[0] > 0 else NULL
    cdef const floating* val_ptr = &data[0] if data.shape[0] > 0 else NULL
    try:
        with nogil:
            for t in prange(n_threads, num_threads=n_threads, schedule="static",
                            chunksize=1):
                # Assigned here, lo and hi are the thread's own (Cython shares, in a
                # prange, what the body only passes by address).
                lo = hi = 0
                if thread_range(t, n_threads, n, &lo, &hi):
                    for i in range(lo, hi):
                        _table_row_terms(val_ptr + indptr[i], ind_ptr + indptr[i],
                                         indptr[i + 1] - indptr[i], &m, &out[i, 0],
                                         work + t * work_size)
    finally:
        free(raw)
    return np.asarray(out)


cdef inline void _convolve(double* A, const double* T, Py_ssize_t m,
                           Py_ssize_t k) noexcept nogil:
    """A_t <- sum_{u=0..t} A_u T_{t-u} for t = m..1 and every component (A_0 = T_0 = 1
    implicit; A holds A_1..A_m, T likewise, degree-major), the ANOVA values of a row
    joined with a part of other columns."""
    cdef Py_ssize_t t, u, s
    for t in range(m, 0, -1):
        for s in range(k):
            A[(t - 1) * k + s] += T[(t - 1) * k + s]
        for u in range(1, t):
            for s in range(k):
                A[(t - 1) * k + s] += A[(u - 1) * k + s] * T[(t - u - 1) * k + s]


cdef struct Tables:
    # Each relation block's table rows' terms (table_terms) and every interaction's row.
    Py_ssize_t count
    const Py_ssize_t** index  # index[b][i]: interaction i's row of block b's table
    const double** terms      # terms[b]: block b's table rows' terms, ``width`` apart
    Py_ssize_t width


cdef struct Workspace:
    # One thread's scratch space for _relational_rows.
    void* work                # ``floating``: the DP table, (max degree + 1) * k
    double* acc               # one row's terms, as a table row's (``width``)


cdef void _relational_rows(Py_ssize_t lo, Py_ssize_t hi, const floating* data,
                           const index_t* indices, const index_t* indptr, double intercept,
                           const Model* m, const Tables* tables, floating* out,
                           const Workspace* ws) noexcept nogil:
    """out[i] for the interactions lo..hi-1: the direct part's terms (as a table row's,
    the dummies with factor block 0), joined with those of each of its table rows."""
    cdef const floating* w = <const floating*> m.w
    cdef const floating* P = <const floating*> m.P
    cdef const floating* gamma = <const floating*> m.gamma
    cdef const int* degrees = m.degrees
    cdef Py_ssize_t d = m.d, k = m.k, n_blocks = m.n_blocks, n_dummy = m.n_dummy
    cdef int kernel = m.kernel
    cdef Py_ssize_t n_tables = tables.count, width = tables.width
    cdef const Py_ssize_t** index = tables.index
    cdef const double** terms = tables.terms
    cdef floating* work = <floating*> ws.work
    cdef double* acc = ws.acc
    cdef Py_ssize_t i, z, b, table, t, s, degree, start, end, offset
    cdef const double* row
    cdef double total
    for i in range(lo, hi):
        start = indptr[i]
        end = indptr[i + 1]
        total = 0
        if w != NULL:
            for z in range(start, end):
                total += w[indices[z]] * data[z]
        if kernel == ALL_SUBSETS:
            all_subsets_forward(P, k, indices + start, data + start, end - start, work)
            for s in range(k):
                acc[1 + s] = work[s]
        else:
            offset = 1
            for b in range(n_blocks):
                degree = degrees[b]
                anova_forward(P + b * d * k, k, gamma if b == 0 else NULL,
                              n_dummy if b == 0 else 0, indices + start, data + start,
                              end - start, <int> degree, work)
                for t in range(1, degree + 1):
                    for s in range(k):
                        acc[offset + (t - 1) * k + s] = work[t * k + s]
                offset += degree * k
        for table in range(n_tables):
            row = terms[table] + index[table][i] * width
            total += row[0]
            if kernel == ALL_SUBSETS:
                for s in range(k):
                    acc[1 + s] *= row[1 + s]
            else:
                offset = 1
                for b in range(n_blocks):
                    _convolve(acc + offset, row + offset, degrees[b], k)
                    offset += degrees[b] * k
        if kernel == ALL_SUBSETS:
            for s in range(k):
                total += acc[1 + s]
        else:
            offset = 1
            for b in range(n_blocks):
                degree = degrees[b]
                for s in range(k):
                    total += acc[offset + (degree - 1) * k + s]
                offset += degree * k
        out[i] = intercept + total


def predict_relational(const floating[::1] data, const index_t[::1] indices,
                       const index_t[::1] indptr, model, list block_index,
                       list block_terms, floating[::1] out, int n_threads=1):
    """Predictions of interactions given by their direct part (CSR, every column; the
    blocks' columns empty) and, per relation block, each interaction's table row
    (``block_index``, intp arrays) and the table rows' :func:`table_terms`
    (``block_terms``), for the ``model`` (a
    :class:`polylite._engine.problem.FittedModel` of the rows' dtype, anova or
    all-subsets kernel; ``w`` may be empty).  Each row is computed as on one thread,
    whatever ``n_threads``."""
    cdef const floating[::1] w = model.w
    cdef const floating[:, :, ::1] P = model.P
    cdef const int[::1] degrees = model.degrees
    cdef double intercept = model.intercept
    cdef int kernel = model.kernel
    cdef Py_ssize_t n = indptr.shape[0] - 1, n_blocks = P.shape[0], k = P.shape[2]
    cdef Py_ssize_t i, t, lo, hi, max_degree = 1
    cdef Tables tables
    tables.count = len(block_index)
    tables.width = _terms_width(kernel, n_blocks, &degrees[0], k)
    cdef const Py_ssize_t[::1] one_index
    cdef const double[:, ::1] one_terms
    if len(block_terms) != tables.count or out.shape[0] != n:
        raise ValueError("predict_relational: one index and one table of terms per block")
    for i in range(degrees.shape[0]):
        max_degree = max(max_degree, degrees[i])
    # Each thread's DP table and accumulators on cache lines of their own (see
    # _thread_stride).
    cdef Py_ssize_t work_size = _thread_stride((max_degree + 1) * max(k, 1),
                                               sizeof(floating))
    cdef Py_ssize_t acc_size = _thread_stride(tables.width, sizeof(double))
    cdef void* work_raw = malloc(n_threads * work_size * sizeof(floating) + THREAD_ALIGN)
    cdef void* acc_raw = malloc(n_threads * acc_size * sizeof(double) + THREAD_ALIGN)
    cdef floating* work = <floating*> thread_align(work_raw)
    cdef double* acc = <double*> thread_align(acc_raw)
    tables.index = <const Py_ssize_t**> malloc(max(tables.count, 1) * sizeof(Py_ssize_t*))
    tables.terms = <const double**> malloc(max(tables.count, 1) * sizeof(double*))
    cdef const floating* data_ptr = &data[0] if data.shape[0] > 0 else NULL
    cdef const index_t* ind_ptr = &indices[0] if indices.shape[0] > 0 else NULL
    cdef floating* out_ptr = &out[0] if n > 0 else NULL
    cdef Model m
    cdef Workspace ws
    try:
        if (work_raw == NULL or acc_raw == NULL or tables.index == NULL
                or tables.terms == NULL):
            raise MemoryError()
        # (an empty P is never read: the non-NULL placeholder is the workspace)
        m = _model_of(w, P, model.gamma, None, degrees, kernel, <const floating*> work)
        for i in range(tables.count):
            one_index = block_index[i]
            one_terms = block_terms[i]
            if one_index.shape[0] != n or one_terms.shape[1] != tables.width:
                raise ValueError("predict_relational: an index or table of terms has "
                                 "the wrong shape")
            tables.index[i] = &one_index[0] if n > 0 else NULL
            tables.terms[i] = &one_terms[0, 0]
        with nogil:
            for t in prange(n_threads, num_threads=n_threads, schedule="static",
                            chunksize=1):
                # Assigned here, lo and hi are the thread's own (Cython shares, in a
                # prange, what the body only passes by address).
                lo = hi = 0
                ws.work = work + t * work_size
                ws.acc = acc + t * acc_size
                if thread_range(t, n_threads, n, &lo, &hi):
                    _relational_rows(lo, hi, data_ptr, ind_ptr, &indptr[0], intercept, &m,
                                     &tables, out_ptr, &ws)
    finally:
        free(work_raw)
        free(acc_raw)
        free(<void*> tables.index)
        free(<void*> tables.terms)
    return np.asarray(out)


ctypedef fused out_index_t:
    int32_t
    int64_t


def append_rows(const floating[::1] data, const index_t[::1] indices,
                const index_t[::1] indptr, const Py_ssize_t[::1] row_of,
                Py_ssize_t offset, floating[::1] out_data, out_index_t[::1] out_indices,
                Py_ssize_t[::1] cursor):
    """Append to each output row i the entries of row ``row_of[i]`` of a CSR part, its
    columns shifted by ``offset``, at ``cursor[i]`` (advanced): the expansion of a
    relational input's rows, one part at a time in column order.  Shapes and ranges
    are the caller's responsibility (``polylite.relational``)."""
    cdef Py_ssize_t i, z, r, at
    if row_of.shape[0] != cursor.shape[0]:
        raise ValueError("append_rows: one source row per output row")
    with nogil:
        for i in range(row_of.shape[0]):
            r = row_of[i]
            at = cursor[i]
            for z in range(indptr[r], indptr[r + 1]):
                out_data[at] = data[z]
                out_indices[at] = <out_index_t> (indices[z] + offset)
                at += 1
            cursor[i] = at


def libfm_row_sizes(const uint32_t[::1] words, int64_t[::1] sizes):
    """The size of each row of a libFM binary matrix's body ``words`` (its 32-bit words
    after the header: per row a size, then two words per entry), into ``sizes``; returns
    the number of words the rows span, or -1 where a size runs past the end.  A row's
    size says where the next one starts, so the walk is one loop."""
    cdef Py_ssize_t r, position = 0, n = words.shape[0]
    cdef bint overrun = False
    with nogil:
        for r in range(sizes.shape[0]):
            if position >= n:
                overrun = True
                break
            sizes[r] = words[position]
            position += 1 + 2 * <Py_ssize_t> words[position]
            if position > n:
                overrun = True
                break
    return -1 if overrun else position


# ---------------------------------------------------------------------------------------
# One-row Python access to each kernel (tests, exploration)
# ---------------------------------------------------------------------------------------

def _row_anova(const floating[:, ::1] P, const index_t[::1] indices,
               const floating[::1] values, int degree, const floating[:, ::1] gamma):
    cdef Py_ssize_t k = P.shape[1]
    out = np.empty((degree + 1, k), dtype=np.asarray(P).dtype)
    cdef floating[:, ::1] o = out
    cdef const floating* g = &gamma[0, 0] if gamma.size > 0 else NULL
    cdef const index_t* ind = &indices[0] if indices.shape[0] > 0 else NULL
    cdef const floating* val = &values[0] if values.shape[0] > 0 else NULL
    if k > 0:
        anova_forward(&P[0, 0], k, g, gamma.shape[0], ind, val, indices.shape[0],
                      degree, &o[0, 0])
    return out


def _row_anova_gradient(const floating[:, ::1] P, const index_t[::1] indices,
                        const floating[::1] values, int degree,
                        const floating[:, ::1] gamma):
    cdef Py_ssize_t k = P.shape[1], nnz = indices.shape[0], n_dummy = gamma.shape[0]
    dtype = np.asarray(P).dtype
    table = np.empty((n_dummy + nnz + 1, degree + 1, k), dtype=dtype)
    adj = np.empty((degree + 1, k), dtype=dtype)
    grad = np.zeros((nnz, k), dtype=dtype)
    grad_gamma = np.zeros((n_dummy, k), dtype=dtype)
    cdef floating[:, :, ::1] tv = table
    cdef floating[:, ::1] av = adj, gv = grad, ggv = grad_gamma
    cdef Factors f
    if k > 0:
        f = factors_of(&P[0, 0], &gamma[0, 0] if n_dummy > 0 else NULL, n_dummy, k)
        anova_gradient(&f, &indices[0] if nnz > 0 else NULL,
                       &values[0] if nnz > 0 else NULL, nnz, degree, &tv[0, 0, 0],
                       &av[0, 0], &gv[0, 0] if nnz > 0 else NULL,
                       &ggv[0, 0] if n_dummy > 0 else NULL)
    return table[n_dummy + nnz], grad, grad_gamma


def _row_all_subsets(const floating[:, ::1] P, const index_t[::1] indices,
                     const floating[::1] values):
    cdef Py_ssize_t k = P.shape[1], nnz = indices.shape[0]
    dtype = np.asarray(P).dtype
    prefix = np.empty((nnz + 1, k), dtype=dtype)
    suffix = np.empty(k, dtype=dtype)
    grad = np.zeros((nnz, k), dtype=dtype)
    value = np.empty(k, dtype=dtype)
    cdef floating[:, ::1] pv = prefix, gv = grad
    cdef floating[::1] sv = suffix, vv = value
    if k > 0:
        all_subsets_forward(&P[0, 0], k, &indices[0] if nnz > 0 else NULL,
                            &values[0] if nnz > 0 else NULL, nnz, &vv[0])
        all_subsets_gradient(&P[0, 0], k, &indices[0] if nnz > 0 else NULL,
                             &values[0] if nnz > 0 else NULL, nnz, &pv[0, 0], &sv[0],
                             &gv[0, 0] if nnz > 0 else NULL)
    return value, grad


def _row_linear_forms(const floating[:, ::1] P, const index_t[::1] indices,
                      const floating[::1] values, const floating[::1] gamma):
    cdef Py_ssize_t k = P.shape[1], nnz = indices.shape[0]
    out = np.empty(k, dtype=np.asarray(P).dtype)
    cdef floating[::1] ov = out
    if k > 0:
        linear_forms(&P[0, 0], k, &gamma[0] if gamma.shape[0] > 0 else NULL,
                     &indices[0] if nnz > 0 else NULL, &values[0] if nnz > 0 else NULL,
                     nnz, &ov[0])
    return out


def _row_power_sums(const floating[:, ::1] P, const index_t[::1] indices,
                    const floating[::1] values, int degree,
                    const floating[:, ::1] gamma):
    cdef Py_ssize_t k = P.shape[1], nnz = indices.shape[0], s
    out = np.empty((degree, k), dtype=np.float64)
    cdef double[::1] D = np.empty(degree, dtype=np.float64)
    for s in range(k):
        power_sums(&P[0, 0], k, s, &gamma[0, 0] if gamma.shape[0] > 0 else NULL,
                   gamma.shape[0], &indices[0] if nnz > 0 else NULL,
                   &values[0] if nnz > 0 else NULL, nnz, degree, &D[0])
        out[:, s] = D
    return out


def _anova_from_power_sums(const double[::1] D):
    cdef int degree = D.shape[0]
    out = np.empty(degree + 1, dtype=np.float64)
    cdef double[::1] ov = out
    anova_from_power_sums(&D[0] if degree > 0 else NULL, degree, &ov[0])
    return out


def _coordinate_derivative(const double[::1] D, int degree, double p_j, double x_j):
    """dA_degree(p, x)/dp_j from the cached power sums D_1..D_{degree-1}."""
    if D.shape[0] < degree - 1:
        raise ValueError(f"need {degree - 1} power sums, got {D.shape[0]}")
    cdef double[::1] A = np.empty(degree, dtype=np.float64)
    anova_from_power_sums(&D[0] if degree > 1 else NULL, degree - 1, &A[0])
    return anova_coordinate_derivative(&A[0], degree, p_j * x_j, x_j)
