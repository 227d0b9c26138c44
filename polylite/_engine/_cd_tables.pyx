"""Coordinate descent on the tables of a relational input (:mod:`polylite.relational`).

A relation block stores each entity's part of the rows once, as a table row r, and each
interaction i names its table row r = index[i].  Its coordinates (the block's columns)
are updated in the table domain (Rendle, "Scaling Factorization Machines to Relational
Data", VLDB 2013, for degree 2; here any degree through the power sums), so that a pass
costs the table's nonzeros and one visit of each interaction, not the nonzeros of the
expanded rows.

The maths.  Row i is [rest of row i | block part B_r].  The model is affine in each
coordinate p_j of the block, and its derivative there factors as

    g_i = x <phi_i, psi_r>,     x = the table's value of column j in row r,

with phi_i computed from the rest of row i alone and psi_r from the block part alone:

- ANOVA of degree m: A_t of a union of disjoint parts is the convolution of the parts'
  A's, so dA_m/dp_j = x sum_u A_u(rest of i) A_{m-1-u}(B_r without j):
  phi_i = (A_0, ..., A_{m-1})(rest of i), psi_r = (A_{m-1}, ..., A_0)(B_r without j);
- all-subsets: S(x) = S(rest) S(B_r), so phi_i = S(rest of i), psi_r = S(B_r without j);
- linear weights: g_i = x, phi_i = psi_r = 1.

A coordinate step needs sum_i s_i l'_i g_i and sum_i s_i kappa_i g_i^2 over the rows that
hold column j, which are the interactions of the table rows r that hold it:

    sum_r x_rj <psi_r, R_r>,   sum_r x_rj^2 psi_r^T W_r psi_r,
    R_r = sum_{i: index[i] = r} s_i l'_i phi_i,   W_r = sum_{i: index[i] = r} s_i kappa_i phi_i phi_i^T.

The block's own steps leave every phi_i as it is (it depends on the rest of row i only)
and move row i's prediction by delta x <phi_i, psi_r>; for a loss whose derivative is
affine in the prediction that moves R_r by delta x W_r psi_r, so the moments stay exact
through the whole pass over the block's columns, which touches the table alone.  A pass
over the interactions before it sums the moments (table_gather); one after it moves each
prediction by <phi_i, change_r> (the change of the block part's A's, accumulated step by
step: a step moves A_t(B_r) by delta x A_{t-1}(B_r without j)) and each row's cache to the
new block part (table_push).

For the squared loss (kappa_i = 1, l'_i the residual) every step is exactly the step
coordinate descent takes on the expanded rows, in the same order: the fit is the same to
rounding (and so is a Gibbs sweep, whose draws use the same sums).  Other losses' l' is
not affine in the prediction: the moments are exact for a quadratic model of the loss
around the predictions at the start of the pass (l'_i the loss's derivative there,
kappa_i the model's curvature), and the steps minimise the model.  Coordinate descent
takes the loss's local model (Moments.model MODEL_LOCAL, loss_local: the second
derivative; on the expanded rows the steps read the loss itself, so they are not the
same steps, but as long where the loss is flat).  It may lie below the loss away from
the start, so a pass is checked before table_push moves the interactions: the model's
change of the data term, from the table rows' records (table_pass_change: with c_r the
change of table row r, sum_r <R_r, c_r> - c_r^T W_r c_r / 2, R_r at the end of the
pass), plus a bound of how far the loss can rise above the model over moves
|<phi_i, c_r>| <= sum_u max_i |phi_iu| |c_ru| (loss_local_excess; the gather keeps the
largest |phi_u| of each table row), plus the penalty's change, at most 0 accepts the
pass.  Else the data term's change is computed from the interactions (table_check); a
pass that would still increase the objective is undone (table_revert, and the caller
restores the columns' values) and taken again on the loss's upper bound (MODEL_BOUND,
loss_majorizer: the Jaakkola-Jordan bound for the logistic loss), which touches the loss
at the start and lies above it everywhere, so that its steps never increase the
objective (majorise-minimise).

Every pass is shared by the threads: over the interactions (each thread sums into
records of its own, added in thread order), over a group's entries (a group's columns
share no table row), over the table rows.
"""
from libc.math cimport fabs
from libc.stdint cimport int64_t
from cython.parallel cimport prange

from ._kernels cimport anova_from_power_sums, thread_range, POLYLITE_PREFETCH
from ._losses cimport loss_majorizer, loss_local, loss_local_excess, loss_value
from ._cd_core cimport *


cdef Moments table_moments(int kind, int degree) noexcept nogil:
    """The layout of a block's caches and records for coordinates of ``kind`` (an ANOVA
    kind: degree ``degree``)."""
    return _layout(kind, degree)


cdef inline Moments _layout(int kind, int degree) noexcept nogil:
    """table_moments, inline: with ``kind`` and ``degree`` constants (the specialised
    loops'), every offset is one too, and the compiler keeps the loops' sums in
    registers.

    A table row's cache B (the block part's power sums, ``width`` doubles) lives in the
    table's cache array; its record holds [B at the pass's start | change | R | W | N |
    the bounds of phi].  At degree 2 a record is [change (2) | R (2) | W (3) | the bound
    of phi_1]: B at the start is B less the change of A_1 (= D_1), and the noise bounds
    of phi are |phi|, so the noise moments are W's diagonal (summed with the curvature's
    weights)."""
    cdef Moments TM
    TM.kind = kind
    TM.degree = degree
    TM.squared = False
    TM.model = MODEL_BOUND
    TM.first = 0 if kind == KIND_SUBSETS else 1
    if kind == KIND_LINEAR:
        TM.width = 0
        TM.M = 1
    elif kind == KIND_SUBSETS:
        TM.width = 2
        TM.M = 1
    else:
        TM.width = degree - 1
        TM.M = degree
    if kind == 2:
        TM.old = -1
        TM.change = 0
        TM.R = 2
        TM.W = 4
        TM.N = -1
        TM.A = 7
        TM.stride = 8
        return TM
    TM.old = 0
    TM.change = TM.width
    TM.R = TM.change + TM.M
    TM.W = TM.R + TM.M
    TM.N = TM.W + TM.M * (TM.M + 1) // 2
    TM.A = TM.N + TM.M
    TM.stride = TM.A + TM.M - TM.first
    return TM


cdef inline Moments _local_layout(const Moments* TM, int kind, int degree) noexcept nogil:
    """_layout with literal ``kind`` and ``degree`` (a specialised loop's), and TM's
    choices that the layout does not fix."""
    cdef Moments tm = _layout(kind, degree)
    tm.squared = TM.squared
    tm.model = TM.model
    return tm


cdef inline bint _given_weight(const Moments* tm) noexcept nogil:
    """W's first entry is the table row's weight (squared loss, phi_0 = 1)."""
    return tm.squared and tm.kind != KIND_SUBSETS


cdef inline bint _noise_in_W(const Moments* tm) noexcept nogil:
    """The noise moments are W's diagonal (degree 2, see _layout)."""
    return tm.kind == 2


cdef inline double _noise(const Moments* tm, const double* rec, const double* bound,
                          Py_ssize_t M) noexcept nogil:
    """sum_u bound_u^2 N_u of a table row's record."""
    cdef Py_ssize_t u
    cdef double noise = 0
    if tm.kind == KIND_LINEAR or tm.kind == KIND_SUBSETS:
        return 0
    if _noise_in_W(tm):
        return bound[0] * bound[0] * rec[tm.W] + bound[1] * bound[1] * rec[tm.W + 2]
    for u in range(M):
        noise += bound[u] * bound[u] * rec[tm.N + u]
    return noise


# ---- phi and psi -----------------------------------------------------------------------

cdef inline void _newton_bounds(const double* D, Py_ssize_t width, double* bound) noexcept nogil:
    """Bounds of |A_0..A_width| from Newton's identity on |D| (D: power sums 1..width)."""
    cdef Py_ssize_t t, i
    cdef double acc
    bound[0] = 1
    for t in range(1, width + 1):
        acc = 0
        for i in range(1, t + 1):
            acc += bound[t - i] * fabs(D[i - 1])
        bound[t] = acc / t


cdef inline void _phi(const Moments* TM, const double* E, double* phi,
                      double* bound) noexcept nogil:
    """phi of a row whose part outside the block has the cache E, and bounds of the terms
    it is computed from (for the noise test; 0 where coordinate descent has none)."""
    cdef Py_ssize_t m = TM.degree
    if TM.kind == KIND_LINEAR:
        phi[0] = 1
        bound[0] = 0
    elif TM.kind == KIND_SUBSETS:
        # (product of the nonzero factors, number of zero factors)
        phi[0] = E[0] if E[1] < 0.5 else 0.0
        bound[0] = 0
    elif m == 2:
        phi[0] = 1
        phi[1] = E[0]
        bound[0] = 1
        bound[1] = fabs(E[0])
    else:
        anova_from_power_sums(E, m - 1, phi)
        _newton_bounds(E, m - 1, bound)


cdef inline void _psi(const Moments* TM, const double* B, double q, double* psi,
                      double* bound) noexcept nogil:
    """psi of a table row whose block part has the cache B, for an entry of factor
    q = p_j x: the block part's terms without the entry, and their bounds."""
    cdef Py_ssize_t m = TM.degree, t
    cdef double A[MAX_TABLE_DEGREE]
    cdef double bA[MAX_TABLE_DEGREE]
    cdef double c, cb
    if TM.kind == KIND_LINEAR:
        psi[0] = 1
        bound[0] = 0
    elif TM.kind == KIND_SUBSETS:
        psi[0] = _subsets_rest(B, 1 + q)
        bound[0] = 0
    elif m == 2:
        psi[0] = B[0] - q
        psi[1] = 1
        bound[0] = fabs(B[0]) + fabs(q)
        bound[1] = 1
    else:
        # A_t(B without j) = A_t(B) - q A_{t-1}(B without j), from t = 1 up.
        anova_from_power_sums(B, m - 1, A)
        _newton_bounds(B, m - 1, bA)
        c = 1
        cb = 1
        psi[m - 1] = 1
        bound[m - 1] = 1
        for t in range(1, m):
            c = A[t] - q * c
            cb = bA[t] + fabs(q) * cb
            psi[m - 1 - t] = c
            bound[m - 1 - t] = cb


cdef inline double _dot(const double* a, const double* b, Py_ssize_t M) noexcept nogil:
    cdef Py_ssize_t u
    cdef double acc = 0
    for u in range(M):
        acc += a[u] * b[u]
    return acc


cdef inline double _quadratic(const double* W, const double* psi,
                              Py_ssize_t M) noexcept nogil:
    """psi^T W psi with W's upper triangle stored row by row."""
    cdef Py_ssize_t u, v, z = 0
    cdef double acc = 0
    for u in range(M):
        acc += W[z] * psi[u] * psi[u]
        z += 1
        for v in range(u + 1, M):
            acc += 2 * W[z] * psi[u] * psi[v]
            z += 1
    return acc


cdef inline void _add_product(double* out, const double* W, const double* psi,
                              double scale, Py_ssize_t M) noexcept nogil:
    """out += scale W psi (W symmetric, upper triangle row by row)."""
    cdef Py_ssize_t u, v, z = 0
    for u in range(M):
        out[u] += scale * W[z] * psi[u]
        z += 1
        for v in range(u + 1, M):
            out[u] += scale * W[z] * psi[v]
            out[v] += scale * W[z] * psi[u]
            z += 1


cdef inline void _add_outer_rest(double* W, const double* phi, double scale,
                                 Py_ssize_t M) noexcept nogil:
    """_add_outer without W's first entry (phi_0 = 1: the weight, given)."""
    cdef Py_ssize_t u, v, z = 1
    for v in range(1, M):
        W[z] += scale * phi[v]
        z += 1
    for u in range(1, M):
        for v in range(u, M):
            W[z] += scale * phi[u] * phi[v]
            z += 1


cdef inline void _add_outer(double* W, const double* phi, double scale,
                            Py_ssize_t M) noexcept nogil:
    """W += scale phi phi^T (upper triangle row by row)."""
    cdef Py_ssize_t u, v, z = 0
    for u in range(M):
        for v in range(u, M):
            W[z] += scale * phi[u] * phi[v]
            z += 1


# ---- the block part's caches -----------------------------------------------------------

cdef inline void _empty_cache(const Moments* TM, double* B) noexcept nogil:
    """The cache of a part without features."""
    cdef Py_ssize_t t
    if TM.kind == KIND_SUBSETS:
        B[0] = 1  # product of the nonzero factors
        B[1] = 0  # number of zero factors
    else:
        for t in range(TM.width):
            B[t] = 0


cdef inline void _fill_loop(Py_ssize_t lo, Py_ssize_t hi, const Table* T,
                            const Moments* TM, const double* factors,
                            int kind) noexcept nogil:
    cdef Py_ssize_t r, z, end
    cdef double* B
    for r in range(lo, hi):
        B = T.cache + r * TM.width
        _empty_cache(TM, B)
        end = T.indptr[r + 1]
        for z in range(T.indptr[r], end):
            # The factors are read at random: request them ahead.
            if z + PREFETCH_AHEAD < end:
                POLYLITE_PREFETCH(factors + T.indices[z + PREFETCH_AHEAD])
            _add_factor(B, kind, TM.width, factors[T.indices[z]] * T.data[z])


cdef void _fill_rows(Py_ssize_t t, int threads, const Table* T, const Moments* TM,
                     const double* factors) noexcept nogil:
    cdef Py_ssize_t lo, hi
    if not thread_range(t, threads, T.n_rows, &lo, &hi):
        return
    if TM.kind == KIND_SUBSETS:
        _fill_loop(lo, hi, T, TM, factors, KIND_SUBSETS)
    elif TM.kind == 2:
        _fill_loop(lo, hi, T, TM, factors, 2)
    elif TM.kind == 3:
        _fill_loop(lo, hi, T, TM, factors, 3)
    else:
        _fill_loop(lo, hi, T, TM, factors, TM.kind)


cdef void table_fill(const Table* T, const Moments* TM, const double* factors,
                     int threads) noexcept nogil:
    """Each table row's block-part cache B of one component, whose factors are
    ``factors`` (indexed by the model's columns)."""
    cdef Py_ssize_t t
    if TM.width == 0:
        return
    if threads == 1:
        _fill_rows(0, 1, T, TM, factors)
        return
    for t in prange(threads, num_threads=threads, schedule="static", chunksize=1):
        _fill_rows(t, threads, T, TM, factors)


# ---- the moments ----------------------------------------------------------------------

cdef void _start_records(Py_ssize_t t, int threads, const Table* T,
                         const Moments* TM) noexcept nogil:
    """B at the start of the pass kept, the changes and every thread's moments zeroed,
    the next component's caches emptied (the sums passes build them)."""
    cdef Py_ssize_t r, u, other, lo, hi
    cdef double* rec
    if not thread_range(t, threads, T.n_rows, &lo, &hi):
        return
    for r in range(lo, hi):
        rec = T.records + r * TM.stride
        if TM.old >= 0:
            for u in range(TM.width):
                rec[TM.old + u] = T.cache[r * TM.width + u]
        for u in range(TM.change, TM.stride):
            rec[u] = 0
        if _given_weight(TM):
            rec[TM.W] = T.row_weight[r]
        if TM.width > 0:
            _empty_cache(TM, T.next + r * TM.width)
        for other in range(threads - 1):
            rec = T.private + (other * T.n_rows + r) * TM.stride
            for u in range(TM.R, TM.stride):
                rec[u] = 0


cdef inline void _rest_cache(const Moments* TM, const double* D, const double* B,
                             const double* rec, double* E) noexcept nogil:
    """The cache of the part of a row outside the block: its whole cache D without the
    block part's cache at the start of the pass (from the table row's cache B and
    record ``rec``)."""
    cdef Py_ssize_t u
    cdef const double* start = rec + TM.old
    if TM.kind == 2:
        E[0] = D[0] - (B[0] - rec[TM.change + 1])
    elif TM.kind == KIND_SUBSETS:
        E[0] = D[0] / start[0]
        E[1] = D[1] - start[1]
    else:
        for u in range(TM.width):
            E[u] = D[u] - start[u]


cdef inline void _gather_row(const Table* T, const Moments* tm, const double* row,
                             Py_ssize_t r, const Layout* L, Py_ssize_t cur, double* rec,
                             Py_ssize_t M, bint simple) noexcept nogil:
    """Add the share of an interaction of table row r (its record ``row``) to the
    moments of the record ``rec`` (the table row's, or a local sum of a run of them)."""
    cdef Py_ssize_t u
    cdef double dl, kappa, weight, y
    cdef double E[MAX_TABLE_DEGREE]
    cdef double phi[MAX_TABLE_DEGREE]
    cdef double bound[MAX_TABLE_DEGREE]
    if tm.kind == 2:  # no change yet: B itself
        E[0] = row[cur] - T.cache[r]
    elif tm.kind != KIND_LINEAR:
        _rest_cache(tm, row + cur, T.cache + r * tm.width, T.records + r * tm.stride, E)
    _phi(tm, E, phi, bound)
    if simple:
        weight = 1
        kappa = 1
        dl = row[PRED]
    else:
        y = row[L.label] if L.label >= 0 else 0.0
        weight = row[L.weight] if L.weight >= 0 else 1.0
        if tm.model == MODEL_LOCAL:
            dl = weight * loss_local(L.loss, y, row[PRED], &kappa)
            # How far the interactions can move, for the pass's check (table_pass_change).
            for u in range(tm.first, M):
                if fabs(phi[u]) > rec[tm.A + u - tm.first]:
                    rec[tm.A + u - tm.first] = fabs(phi[u])
        else:
            dl = weight * loss_majorizer(L.loss, y, row[PRED], &kappa)
        kappa *= weight
    for u in range(M):
        rec[tm.R + u] += dl * phi[u]
    if not _noise_in_W(tm) and tm.kind != KIND_LINEAR and tm.kind != KIND_SUBSETS:
        for u in range(M):
            rec[tm.N + u] += weight * bound[u] * bound[u]
    if _given_weight(tm):  # W's first entry is given: the rest of the triangle
        _add_outer_rest(rec + tm.W, phi, kappa, M)
    else:
        _add_outer(rec + tm.W, phi, kappa, M)


cdef inline void _push_row(const Table* T, const double* cache, const Moments* tm,
                           double* row, Py_ssize_t i, Py_ssize_t cur,
                           Py_ssize_t M) noexcept nogil:
    """Move interaction i's prediction by its table row's change, and its cache to the
    table row's new block part (the pass's caches ``cache``: T.cache, or what was it
    before a swap)."""
    cdef Py_ssize_t u, r = T.index[i]
    cdef double E[MAX_TABLE_DEGREE]
    cdef double phi[MAX_TABLE_DEGREE]
    cdef double bound[MAX_TABLE_DEGREE]
    cdef double* D = row + cur
    cdef const double* rec = T.records + r * tm.stride
    cdef const double* B = cache + r * tm.width
    if tm.kind == KIND_LINEAR:
        row[PRED] += rec[tm.change]
        return
    _rest_cache(tm, D, B, rec, E)
    _phi(tm, E, phi, bound)
    row[PRED] += _dot(phi, rec + tm.change, M)
    if tm.kind == KIND_SUBSETS:
        D[0] = E[0] * B[0]
        D[1] = E[1] + B[1]
    else:
        for u in range(tm.width):
            D[u] = E[u] + B[u]


cdef struct LoopShape:
    # What a table loop may take as constants (its callers pass literals, so that the
    # loops over the moments unroll).
    int kind             # the coordinates' kind
    int degree           # the ANOVA degree
    Py_ssize_t M         # the moments
    bint simple          # the squared loss with uniform weights: no label, no weight
    bint single          # the group has one column


cdef inline LoopShape _shape(int kind, int degree, Py_ssize_t M, bint simple,
                             bint single) noexcept nogil:
    cdef LoopShape shape
    shape.kind = kind
    shape.degree = degree
    shape.M = M
    shape.simple = simple
    shape.single = single
    return shape


cdef inline void _gather_loop(Py_ssize_t lo, Py_ssize_t hi, const Table* T,
                              const Table* done, const Moments* TM, const RowStates* rows,
                              double* sums, LoopShape shape) noexcept nogil:
    """The gather of interactions lo..hi-1 (after the push of block ``done``, if any)
    for a kind of coordinate (``shape``: the loop's constants)."""
    cdef Py_ssize_t i
    cdef double* row
    cdef Moments tm = _local_layout(TM, shape.kind, shape.degree)
    # (In locals: the loop writes through double pointers, which could alias the records.)
    cdef double* state = rows.state
    cdef const Layout* L = rows.L
    cdef Py_ssize_t stride = L.stride, slot = rows.slot
    for i in range(lo, hi):
        if i + PREFETCH_AHEAD < hi:
            POLYLITE_PREFETCH(sums + T.index[i + PREFETCH_AHEAD] * tm.stride)
            if done != NULL:
                POLYLITE_PREFETCH(done.records + done.index[i + PREFETCH_AHEAD] * tm.stride)
        row = state + i * stride
        if done != NULL:
            _push_row(done, done.cache, &tm, row, i, slot, shape.M)
        _gather_row(T, &tm, row, T.index[i], L, slot, sums + T.index[i] * tm.stride,
                    shape.M, shape.simple)


cdef void _gather_rows(Py_ssize_t t, int threads, const Table* T, const Table* done,
                       const Moments* TM, const RowStates* rows) noexcept nogil:
    cdef Py_ssize_t lo, hi
    cdef double* sums = T.records if t == 0 else T.private + (t - 1) * T.n_rows * TM.stride
    # (The squared loss with uniform weights: no label, no weight in the records.)
    cdef bint simple = rows.L.label < 0 and rows.L.weight < 0
    if not thread_range(t, threads, rows.n, &lo, &hi):
        return
    if TM.kind == KIND_LINEAR:
        if simple:
            _gather_loop(lo, hi, T, done, TM, rows, sums,
                         _shape(KIND_LINEAR, 0, 1, True, False))
        else:
            _gather_loop(lo, hi, T, done, TM, rows, sums,
                         _shape(KIND_LINEAR, 0, 1, False, False))
    elif TM.kind == KIND_SUBSETS:
        _gather_loop(lo, hi, T, done, TM, rows, sums,
                     _shape(KIND_SUBSETS, 0, 1, simple, False))
    elif TM.kind == 2:
        if simple:
            _gather_loop(lo, hi, T, done, TM, rows, sums, _shape(2, 2, 2, True, False))
        else:
            _gather_loop(lo, hi, T, done, TM, rows, sums, _shape(2, 2, 2, False, False))
    elif TM.kind == 3:
        _gather_loop(lo, hi, T, done, TM, rows, sums, _shape(3, 3, 3, simple, False))
    else:
        _gather_loop(lo, hi, T, done, TM, rows, sums,
                     _shape(TM.kind, TM.degree, TM.M, simple, False))


cdef void _reduce_records(Py_ssize_t t, int threads, int summed, const Table* T,
                          const Moments* TM) noexcept nogil:
    """Add the other threads' moments to the shared records, in thread order."""
    cdef Py_ssize_t r, u, other, lo, hi
    cdef double* rec
    cdef const double* own
    # (The sums up to the bounds of phi, the largest of those.)
    cdef Py_ssize_t bounds = TM.A if TM.model == MODEL_LOCAL else TM.stride
    if not thread_range(t, threads, T.n_rows, &lo, &hi):
        return
    for r in range(lo, hi):
        rec = T.records + r * TM.stride
        for other in range(summed - 1):
            own = T.private + (other * T.n_rows + r) * TM.stride
            for u in range(TM.R, bounds):
                rec[u] += own[u]
            for u in range(bounds, TM.stride):
                if own[u] > rec[u]:
                    rec[u] = own[u]


cdef void table_gather(const Table* T, const Moments* TM, const RowStates* rows,
                       int threads, const Table* done) noexcept nogil:
    """Start a pass over the block: each table row's moments R, W, N summed over its
    interactions, from their records (cache of the component in slot ``rows.slot``).
    With ``done``, first end that block's pass (table_push) in the same pass over the
    rows."""
    cdef Py_ssize_t t
    for t in prange(threads, num_threads=threads, schedule="static", chunksize=1):
        _start_records(t, threads, T, TM)
    for t in prange(threads, num_threads=threads, schedule="static", chunksize=1):
        _gather_rows(t, threads, T, done, TM, rows)
    if threads > 1:
        for t in prange(threads, num_threads=threads, schedule="static", chunksize=1):
            _reduce_records(t, threads, threads, T, TM)


# ---- the start of a component ----------------------------------------------------------

cdef inline void _start_loop(Py_ssize_t lo, Py_ssize_t hi, const Start* start,
                             const Push* done, const Moments* TM, const RowStates* rows,
                             double* sums, LoopShape shape) noexcept nogil:
    """table_start_rows for the interactions lo..hi-1 (``shape``: the loop's
    constants)."""
    cdef Py_ssize_t i, b, u, r
    cdef double* row
    cdef double* D
    cdef const double* B
    cdef Moments tm = _local_layout(TM, shape.kind, shape.degree)
    # (In locals: the loop writes through double pointers, which could alias the records.)
    cdef const Table* tables = start.tables
    cdef Py_ssize_t count = start.count
    cdef const double* base = start.base
    cdef const Table* gather = start.gather
    cdef double* state = rows.state
    cdef const Layout* L = rows.L
    cdef Py_ssize_t stride = L.stride, slot = rows.slot
    cdef const Table* done_table = done.table
    cdef const double* done_cache = done.cache
    cdef Moments done_TM = done.TM
    cdef Py_ssize_t done_slot = done.slot
    for i in range(lo, hi):
        row = state + i * stride
        if done_table != NULL and done_TM.kind == shape.kind:
            # (The last component's: as constants.)
            _push_row(done_table, done_cache, &tm, row, i, done_slot, shape.M)
        elif done_table != NULL:  # (the linear weights')
            _push_row(done_table, done_cache, &done_TM, row, i, done_slot, done_TM.M)
        D = row + slot
        if base != NULL:
            for u in range(tm.width):
                D[u] = base[u]
        for b in range(count):
            if i + PREFETCH_AHEAD < hi:
                POLYLITE_PREFETCH(tables[b].cache + tables[b].index[i + PREFETCH_AHEAD]
                                  * tm.width)
            B = tables[b].cache + tables[b].index[i] * tm.width
            if shape.kind == KIND_SUBSETS:
                D[0] *= B[0]
                D[1] += B[1]
            else:
                for u in range(tm.width):
                    D[u] += B[u]
        if gather != NULL:
            r = gather.index[i]
            _gather_row(gather, &tm, row, r, L, slot, sums + r * tm.stride, shape.M,
                        shape.simple)


cdef void _start_rows(Py_ssize_t t, int threads, const Start* start, const Push* done,
                      const Moments* TM, const RowStates* rows) noexcept nogil:
    cdef Py_ssize_t lo, hi
    cdef double* sums = NULL
    cdef const Table* gather = start.gather
    # (The squared loss with uniform weights: no label, no weight in the records.)
    cdef bint simple = rows.L.label < 0 and rows.L.weight < 0
    if gather != NULL:
        sums = (gather.records if t == 0
                else gather.private + (t - 1) * gather.n_rows * TM.stride)
    if not thread_range(t, threads, rows.n, &lo, &hi):
        return
    if TM.kind == KIND_SUBSETS:
        _start_loop(lo, hi, start, done, TM, rows, sums,
                    _shape(KIND_SUBSETS, 0, 1, simple, False))
    elif TM.kind == 2:
        if simple:
            _start_loop(lo, hi, start, done, TM, rows, sums, _shape(2, 2, 2, True, False))
        else:
            _start_loop(lo, hi, start, done, TM, rows, sums, _shape(2, 2, 2, False, False))
    elif TM.kind == 3:
        _start_loop(lo, hi, start, done, TM, rows, sums, _shape(3, 3, 3, simple, False))
    else:
        _start_loop(lo, hi, start, done, TM, rows, sums,
                    _shape(TM.kind, TM.degree, TM.M, simple, False))


cdef void table_start_rows(const Start* start, const Moments* TM, const Push* done,
                           const RowStates* rows, int threads) noexcept nogil:
    """Start a component (``TM``'s kind) on the interactions in one pass: end block
    ``done.table``'s pass (table_push, of kind ``done.TM``; or none), make each row's
    cache in ``rows.slot`` (``start``) and start block ``start.gather``'s pass
    (table_gather; or NULL; not ``done``'s, whose records the pass reads)."""
    cdef Py_ssize_t t
    cdef const Table* gather = start.gather
    if gather != NULL:
        for t in prange(threads, num_threads=threads, schedule="static", chunksize=1):
            _start_records(t, threads, gather, TM)
    for t in prange(threads, num_threads=threads, schedule="static", chunksize=1):
        _start_rows(t, threads, start, done, TM, rows)
    if gather != NULL and threads > 1:
        for t in prange(threads, num_threads=threads, schedule="static", chunksize=1):
            _reduce_records(t, threads, threads, gather, TM)


# ---- a group of the table's columns ----------------------------------------------------

cdef struct Entries:
    # Group g's entries as the table passes read them: entry e has table row rows[e]
    # (rows NULL: e), column columns[e] (columns NULL: column) and value values[e]
    # (values NULL: 1).
    const int64_t* rows
    const int64_t* columns
    int64_t column
    const double* values
    Py_ssize_t count


cdef inline Entries _entries(const Table* T, Py_ssize_t g) noexcept nogil:
    cdef Entries ent
    ent.count = T.group_ptr[g + 1] - T.group_ptr[g]
    ent.rows = T.rows + T.row_ptr[g] if T.row_ptr[g + 1] > T.row_ptr[g] else NULL
    ent.column = T.group_columns[T.columns_ptr[g]]
    ent.columns = (T.columns + T.col_ptr[g] if T.columns_ptr[g + 1] - T.columns_ptr[g] > 1
                   else NULL)
    ent.values = T.values + T.val_ptr[g] if T.val_ptr[g + 1] > T.val_ptr[g] else NULL
    return ent


cdef inline void _entry_sums(const Table* T, const Moments* tm, Py_ssize_t r, double x,
                             double p, double p_next, double* sums,
                             Py_ssize_t M) noexcept nogil:
    """Add the shares of one entry (table row r, value x) of a column of value ``p`` to
    the column's sums (gradient, curvature, noise bound), and its factor in the next
    component (``p_next``) to the row's next cache."""
    cdef double noise
    cdef double psi[MAX_TABLE_DEGREE]
    cdef double bound[MAX_TABLE_DEGREE]
    cdef const double* rec = T.records + r * tm.stride
    if tm.kind != KIND_LINEAR:
        _add_factor(T.next + r * tm.width, tm.kind, tm.width, p_next * x)
    _psi(tm, T.cache + r * tm.width, p * x, psi, bound)
    noise = _noise(tm, rec, bound, M)
    sums[0] += x * _dot(psi, rec + tm.R, M)
    sums[1] += x * x * _quadratic(rec + tm.W, psi, M)
    sums[2] += x * x * M * noise


cdef inline void _column_loop(const Entries* ent, Py_ssize_t lo, Py_ssize_t hi,
                              const Table* T, const Moments* TM, double p, double p_next,
                              double* sums, LoopShape shape) noexcept nogil:
    """The sums of the entries lo..hi-1 of a group of one column, whose value is ``p``
    (``p_next`` in the next component), into ``sums`` (``shape``: the loop's
    constants)."""
    cdef Py_ssize_t e, r, f
    cdef Py_ssize_t M = shape.M
    cdef double other[3]
    cdef Moments tm = _local_layout(TM, shape.kind, shape.degree)
    # Two sets of running sums, for the even and the odd entries: one set would make
    # each entry wait for the previous one's additions.
    other[0] = other[1] = other[2] = 0
    e = lo
    while e + 1 < hi:
        if ent.rows != NULL and e + PREFETCH_AHEAD + 1 < hi:
            POLYLITE_PREFETCH(T.records + ent.rows[e + PREFETCH_AHEAD] * tm.stride)
            POLYLITE_PREFETCH(T.records + ent.rows[e + PREFETCH_AHEAD + 1] * tm.stride)
        r = ent.rows[e] if ent.rows != NULL else e
        _entry_sums(T, &tm, r, ent.values[e] if ent.values != NULL else 1.0, p, p_next,
                    sums, M)
        f = e + 1
        r = ent.rows[f] if ent.rows != NULL else f
        _entry_sums(T, &tm, r, ent.values[f] if ent.values != NULL else 1.0, p, p_next,
                    other, M)
        e += 2
    if e < hi:
        r = ent.rows[e] if ent.rows != NULL else e
        _entry_sums(T, &tm, r, ent.values[e] if ent.values != NULL else 1.0, p, p_next,
                    sums, M)
    sums[0] += other[0]
    sums[1] += other[1]
    sums[2] += other[2]


cdef inline void _gradient_loop(const Entries* ent, Py_ssize_t lo, Py_ssize_t hi,
                                const Table* T, const Moments* TM, double* own,
                                const double* shared, LoopShape shape) noexcept nogil:
    """The sums of the entries lo..hi-1, into their columns' scratch records ``own``
    (the values in the next component from the ``shared`` ones; ``shape``: the loop's
    constants)."""
    cdef Py_ssize_t e, r, j
    cdef Py_ssize_t M = shape.M
    cdef double x
    cdef double sums[3]
    cdef double* col = own + ent.column * COL_STRIDE
    cdef Moments tm = _local_layout(TM, shape.kind, shape.degree)
    if shape.single:
        # One column: its sums kept in registers until the end.
        sums[0] = sums[1] = sums[2] = 0
        _column_loop(ent, lo, hi, T, TM, col[COL_P],
                     shared[ent.column * COL_STRIDE + COL_NEXT], sums, shape)
        col[COL_GRAD] += sums[0]
        col[COL_CURV] += sums[1]
        col[COL_NOISE] += sums[2]
        return
    for e in range(lo, hi):
        r = ent.rows[e] if ent.rows != NULL else e
        if ent.rows != NULL and e + PREFETCH_AHEAD < hi:
            POLYLITE_PREFETCH(T.records + ent.rows[e + PREFETCH_AHEAD] * tm.stride)
        x = ent.values[e] if ent.values != NULL else 1.0
        j = ent.columns[e]
        col = own + j * COL_STRIDE
        _entry_sums(T, &tm, r, x, col[COL_P], shared[j * COL_STRIDE + COL_NEXT],
                    col + COL_GRAD, M)


cdef void _gradient_entries(Py_ssize_t t, int threads, const Table* T, const Moments* TM,
                            Py_ssize_t g, double* scratch,
                            const Threads* th) noexcept nogil:
    cdef Py_ssize_t lo, hi
    cdef Entries ent = _entries(T, g)
    cdef bint single = ent.columns == NULL
    cdef double* own = scratch if t == 0 else th.private + (t - 1) * th.stride
    if not thread_range(t, threads, ent.count, &lo, &hi):
        return
    if TM.kind == KIND_LINEAR:
        if single:
            _gradient_loop(&ent, lo, hi, T, TM, own, scratch,
                           _shape(KIND_LINEAR, 0, 1, False, True))
        else:
            _gradient_loop(&ent, lo, hi, T, TM, own, scratch,
                           _shape(KIND_LINEAR, 0, 1, False, False))
    elif TM.kind == KIND_SUBSETS:
        _gradient_loop(&ent, lo, hi, T, TM, own, scratch,
                       _shape(KIND_SUBSETS, 0, 1, False, single))
    elif TM.kind == 2:
        if single:
            _gradient_loop(&ent, lo, hi, T, TM, own, scratch, _shape(2, 2, 2, False, True))
        else:
            _gradient_loop(&ent, lo, hi, T, TM, own, scratch, _shape(2, 2, 2, False, False))
    elif TM.kind == 3:
        if single:
            _gradient_loop(&ent, lo, hi, T, TM, own, scratch, _shape(3, 3, 3, False, True))
        else:
            _gradient_loop(&ent, lo, hi, T, TM, own, scratch, _shape(3, 3, 3, False, False))
    else:
        _gradient_loop(&ent, lo, hi, T, TM, own, scratch,
                       _shape(TM.kind, TM.degree, TM.M, False, single))


cdef void table_gradients(const Table* T, const Moments* TM, Py_ssize_t g,
                          double* scratch, const Threads* th,
                          int pass_threads) noexcept nogil:
    """The sums of group g's columns (its scratch records started by _group_start): the
    gradient, the curvature and the noise bound of each, from the moments; and the next
    component's caches (COL_NEXT: the columns' values there)."""
    cdef Py_ssize_t t
    if pass_threads == 1:
        _gradient_entries(0, 1, T, TM, g, scratch, th)
        return
    for t in prange(pass_threads, num_threads=pass_threads, schedule="static",
                    chunksize=1):
        _gradient_entries(t, pass_threads, T, TM, g, scratch, th)


cdef inline void _entry_update(const Table* T, const Moments* tm, Py_ssize_t r, double x,
                               double p, double delta, Py_ssize_t M) noexcept nogil:
    """Apply a step ``delta`` of a column of value ``p`` to the table row r of its entry
    x: the row's interactions move by delta x <phi_i, psi>, so their derivatives' sum R
    by delta x W psi and the block part's terms by delta x psi."""
    cdef Py_ssize_t u
    cdef double psi[MAX_TABLE_DEGREE]
    cdef double bound[MAX_TABLE_DEGREE]
    cdef double* rec = T.records + r * tm.stride
    cdef double* B = T.cache + r * tm.width
    _psi(tm, B, p * x, psi, bound)
    _add_product(rec + tm.R, rec + tm.W, psi, delta * x, M)
    for u in range(M):
        rec[tm.change + u] += delta * x * psi[u]
    if tm.kind != KIND_LINEAR:
        _swap_factor(B, tm.kind, tm.width, p * x, (p + delta) * x)


cdef inline void _update_loop(const Entries* ent, Py_ssize_t lo, Py_ssize_t hi,
                              const Table* T, const Moments* TM, const double* scratch,
                              int kind, int degree, Py_ssize_t M) noexcept nogil:
    cdef Py_ssize_t e, r
    cdef double p, delta
    cdef const double* col = scratch + ent.column * COL_STRIDE
    cdef Moments tm = _local_layout(TM, kind, degree)
    delta = col[COL_STEP]
    p = col[COL_P]
    if ent.columns == NULL and delta == 0:
        return
    for e in range(lo, hi):
        if ent.columns != NULL:
            col = scratch + ent.columns[e] * COL_STRIDE
            delta = col[COL_STEP]
            if delta == 0:
                continue
            p = col[COL_P]
        r = ent.rows[e] if ent.rows != NULL else e
        _entry_update(T, &tm, r, ent.values[e] if ent.values != NULL else 1.0, p, delta, M)


cdef void _update_entries(Py_ssize_t t, int threads, const Table* T, const Moments* TM,
                          Py_ssize_t g, const double* scratch) noexcept nogil:
    cdef Py_ssize_t lo, hi
    cdef Entries ent = _entries(T, g)
    if not thread_range(t, threads, ent.count, &lo, &hi):
        return
    if TM.kind == KIND_LINEAR:
        _update_loop(&ent, lo, hi, T, TM, scratch, KIND_LINEAR, 0, 1)
    elif TM.kind == KIND_SUBSETS:
        _update_loop(&ent, lo, hi, T, TM, scratch, KIND_SUBSETS, 0, 1)
    elif TM.kind == 2:
        _update_loop(&ent, lo, hi, T, TM, scratch, 2, 2, 2)
    elif TM.kind == 3:
        _update_loop(&ent, lo, hi, T, TM, scratch, 3, 3, 3)
    else:
        _update_loop(&ent, lo, hi, T, TM, scratch, TM.kind, TM.degree, TM.M)


cdef void table_updates(const Table* T, const Moments* TM, Py_ssize_t g,
                        const double* scratch, const Threads* th,
                        int pass_threads) noexcept nogil:
    """Apply the steps of group g's columns (stored by _group_steps) to the table rows'
    moments, changes and caches."""
    cdef Py_ssize_t t
    if pass_threads == 1:
        _update_entries(0, 1, T, TM, g, scratch)
        return
    for t in prange(pass_threads, num_threads=pass_threads, schedule="static",
                    chunksize=1):
        _update_entries(t, pass_threads, T, TM, g, scratch)


# ---- a group of one column, on one thread -----------------------------------------------

cdef void table_column_sums(const Table* T, const Moments* TM, Py_ssize_t g, double p,
                            double p_next, double* sums) noexcept nogil:
    """The sums (gradient, curvature, noise bound; the last two of N_TERMS zero) of
    group g, of one column whose value is ``p`` (``p_next`` in the next component, whose
    caches it adds to): the group's pass without scratch records, for the many short
    groups of one column (an implicit set's columns)."""
    cdef Entries ent = _entries(T, g)
    sums[0] = sums[1] = sums[2] = sums[3] = sums[4] = 0
    if TM.kind == KIND_LINEAR:
        _column_loop(&ent, 0, ent.count, T, TM, p, p_next, sums,
                     _shape(KIND_LINEAR, 0, 1, False, True))
    elif TM.kind == KIND_SUBSETS:
        _column_loop(&ent, 0, ent.count, T, TM, p, p_next, sums,
                     _shape(KIND_SUBSETS, 0, 1, False, True))
    elif TM.kind == 2:
        _column_loop(&ent, 0, ent.count, T, TM, p, p_next, sums,
                     _shape(2, 2, 2, False, True))
    elif TM.kind == 3:
        _column_loop(&ent, 0, ent.count, T, TM, p, p_next, sums,
                     _shape(3, 3, 3, False, True))
    else:
        _column_loop(&ent, 0, ent.count, T, TM, p, p_next, sums,
                     _shape(TM.kind, TM.degree, TM.M, False, True))


cdef inline void _column_update_loop(const Entries* ent, const Table* T, const Moments* TM,
                                     double p, double delta, int kind, int degree,
                                     Py_ssize_t M) noexcept nogil:
    """table_column_update with kind, degree and M literal constants at the call sites."""
    cdef Py_ssize_t e, r
    cdef Moments tm = _local_layout(TM, kind, degree)
    for e in range(ent.count):
        r = ent.rows[e] if ent.rows != NULL else e
        _entry_update(T, &tm, r, ent.values[e] if ent.values != NULL else 1.0, p, delta, M)


cdef void table_column_update(const Table* T, const Moments* TM, Py_ssize_t g, double p,
                              double delta) noexcept nogil:
    """Apply the step ``delta`` of group g's one column (of value ``p`` before it)."""
    cdef Entries ent = _entries(T, g)
    if TM.kind == KIND_LINEAR:
        _column_update_loop(&ent, T, TM, p, delta, KIND_LINEAR, 0, 1)
    elif TM.kind == KIND_SUBSETS:
        _column_update_loop(&ent, T, TM, p, delta, KIND_SUBSETS, 0, 1)
    elif TM.kind == 2:
        _column_update_loop(&ent, T, TM, p, delta, 2, 2, 2)
    elif TM.kind == 3:
        _column_update_loop(&ent, T, TM, p, delta, 3, 3, 3)
    else:
        _column_update_loop(&ent, T, TM, p, delta, TM.kind, TM.degree, TM.M)


# ---- back to the rows ------------------------------------------------------------------

cdef inline void _push_loop(Py_ssize_t lo, Py_ssize_t hi, const Table* T,
                            const Moments* TM, const RowStates* rows, int kind, int degree,
                            Py_ssize_t M) noexcept nogil:
    cdef Py_ssize_t i
    cdef Moments tm = _local_layout(TM, kind, degree)
    cdef double* state = rows.state
    cdef Py_ssize_t stride = rows.L.stride, slot = rows.slot
    for i in range(lo, hi):
        if i + PREFETCH_AHEAD < hi:
            POLYLITE_PREFETCH(T.records + T.index[i + PREFETCH_AHEAD] * tm.stride)
        _push_row(T, T.cache, &tm, state + i * stride, i, slot, M)


cdef void _push_rows(Py_ssize_t t, int threads, const Table* T, const Moments* TM,
                     const RowStates* rows) noexcept nogil:
    cdef Py_ssize_t lo, hi
    if not thread_range(t, threads, rows.n, &lo, &hi):
        return
    if TM.kind == KIND_LINEAR:
        _push_loop(lo, hi, T, TM, rows, KIND_LINEAR, 0, 1)
    elif TM.kind == KIND_SUBSETS:
        _push_loop(lo, hi, T, TM, rows, KIND_SUBSETS, 0, 1)
    elif TM.kind == 2:
        _push_loop(lo, hi, T, TM, rows, 2, 2, 2)
    elif TM.kind == 3:
        _push_loop(lo, hi, T, TM, rows, 3, 3, 3)
    else:
        _push_loop(lo, hi, T, TM, rows, TM.kind, TM.degree, TM.M)


cdef void table_push(const Table* T, const Moments* TM, const RowStates* rows,
                     int threads) noexcept nogil:
    """End a pass over the block: each interaction's prediction moves by its table row's
    change, and its cache in slot ``rows.slot`` takes the new block part."""
    cdef Py_ssize_t t
    for t in prange(threads, num_threads=threads, schedule="static", chunksize=1):
        _push_rows(t, threads, T, TM, rows)


# ---- the check of a pass on the loss's local model -------------------------------------

cdef inline double _phi_bound(const Moments* TM, const double* rec,
                              Py_ssize_t u) noexcept nogil:
    """The largest |phi_u| of a table row's interactions (MODEL_LOCAL's gather)."""
    return 1.0 if u < TM.first else rec[TM.A + u - TM.first]


cdef void _change_rows(Py_ssize_t t, int threads, const Table* T, const Moments* TM,
                       int loss, double y_bound, double* partial) noexcept nogil:
    """Thread t's share of table_pass_change, in partial[2 t], partial[2 t + 1]."""
    cdef Py_ssize_t r, u, lo, hi
    cdef const double* rec
    cdef const double* c
    cdef double quadratic, radius, change = 0, excess = 0
    if thread_range(t, threads, T.n_rows, &lo, &hi):
        for r in range(lo, hi):
            rec = T.records + r * TM.stride
            c = rec + TM.change
            quadratic = _quadratic(rec + TM.W, c, TM.M)
            # With R at the end of the pass, R_0 + W c: the model's change
            # <R_0, c> + c^T W c / 2 is <R, c> - c^T W c / 2.
            change += _dot(rec + TM.R, c, TM.M) - 0.5 * quadratic
            # |<phi_i, c>| <= sum_u max_i |phi_iu| |c_u| for every interaction i of r.
            radius = 0
            for u in range(TM.M):
                radius += _phi_bound(TM, rec, u) * fabs(c[u])
            excess += loss_local_excess(loss, quadratic, T.row_weight[r],
                                        y_bound * radius)
    partial[2 * t] = change
    partial[2 * t + 1] = excess


cdef double table_pass_change(const Table* T, const Moments* TM, int loss, double y_bound,
                              int threads, double* partial,
                              double* excess) noexcept nogil:
    """After a pass on the loss's local model (MODEL_LOCAL, before table_push): the
    change of the model's data term sum_i s_i (l'_i r_i + kappa_i r_i^2 / 2) over the
    pass (each interaction i moves by r_i = <phi_i, change_r>), from the table rows'
    records alone; and in ``excess`` a bound of how far the loss's change can exceed
    it (loss_local_excess, for labels of magnitude at most ``y_bound``).  ``partial``:
    2 ``threads`` doubles of work space."""
    cdef Py_ssize_t t
    cdef double change = 0
    if threads == 1 or T.n_rows < MIN_COLUMNS_PER_THREAD * threads:
        _change_rows(0, 1, T, TM, loss, y_bound, partial)
        excess[0] = partial[1]
        return partial[0]
    for t in prange(threads, num_threads=threads, schedule="static", chunksize=1):
        _change_rows(t, threads, T, TM, loss, y_bound, partial)
    excess[0] = 0
    for t in range(threads):
        change += partial[2 * t]
        excess[0] += partial[2 * t + 1]
    return change


cdef void _check_rows(Py_ssize_t t, int threads, const Table* T, const Moments* TM,
                      const RowStates* rows, double* partial) noexcept nogil:
    """Thread t's share of table_check, in partial[2 t], partial[2 t + 1]."""
    cdef Py_ssize_t i, r, lo, hi
    cdef const double* row
    cdef const double* rec
    cdef double y, weight, move, before, change = 0, total = 0
    cdef double E[MAX_TABLE_DEGREE]
    cdef double phi[MAX_TABLE_DEGREE]
    cdef double bound[MAX_TABLE_DEGREE]
    cdef const Layout* L = rows.L
    if thread_range(t, threads, rows.n, &lo, &hi):
        for i in range(lo, hi):
            r = T.index[i]
            row = rows.state + i * L.stride
            rec = T.records + r * TM.stride
            if TM.kind == KIND_LINEAR:
                move = rec[TM.change]
            else:
                _rest_cache(TM, row + rows.slot, T.cache + r * TM.width, rec, E)
                _phi(TM, E, phi, bound)
                move = _dot(phi, rec + TM.change, TM.M)
            y = row[L.label] if L.label >= 0 else 0.0
            weight = row[L.weight] if L.weight >= 0 else 1.0
            before = loss_value(L.loss, y, row[PRED])
            change += weight * (loss_value(L.loss, y, row[PRED] + move) - before)
            total += weight * before
    partial[2 * t] = change
    partial[2 * t + 1] = total


cdef double table_check(const Table* T, const Moments* TM, const RowStates* rows,
                        int threads, double* partial, double* loss_sum) noexcept nogil:
    """After a block's pass (before table_push): the change of the data term
    sum_i s_i l(y_i, y_hat_i) that the pass makes, and in ``loss_sum`` the term before
    it, from the interactions (their caches in slot ``rows.slot``).  ``partial``: 2
    ``threads`` doubles of work space."""
    cdef Py_ssize_t t
    cdef double change = 0
    for t in prange(threads, num_threads=threads, schedule="static", chunksize=1):
        _check_rows(t, threads, T, TM, rows, partial)
    loss_sum[0] = 0
    for t in range(threads):
        change += partial[2 * t]
        loss_sum[0] += partial[2 * t + 1]
    return change


cdef void _revert_rows(Py_ssize_t t, int threads, const Table* T,
                       const Moments* TM) noexcept nogil:
    cdef Py_ssize_t r, u, lo, hi
    cdef const double* rec
    cdef double* B
    if not thread_range(t, threads, T.n_rows, &lo, &hi):
        return
    for r in range(lo, hi):
        rec = T.records + r * TM.stride
        B = T.cache + r * TM.width
        if TM.kind == 2:
            B[0] -= rec[TM.change + 1]
        else:
            for u in range(TM.width):
                B[u] = rec[TM.old + u]


cdef void table_revert(const Table* T, const Moments* TM, int threads) noexcept nogil:
    """Undo a block's pass in its table (before table_push): each table row's cache B
    back to that at the start of the pass (the parameters are the caller's to restore;
    the records are gathered again)."""
    cdef Py_ssize_t t
    if TM.width == 0:
        return
    for t in prange(threads, num_threads=threads, schedule="static", chunksize=1):
        _revert_rows(t, threads, T, TM)
