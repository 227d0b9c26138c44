"""Stochastic (SGD, AdaGrad) and full-gradient (L-BFGS) passes over CSR rows.

All three use one routine, :func:`_row_gradient`, that returns the nonlinear term of a row's
prediction and its gradient on the row's support, from the kernel layer (ANOVA reverse mode
for any degree and the dummies of the shared model, all-subsets, polynomial).  An epoch costs
O(nz(X) k m): nothing is ever done per (row, feature) pair outside the row's support.

Regularisation.  Plain SGD applies the L2 penalty of every parameter at every step,
``p <- (1 - eta_t reg) p - eta_t grad``.  Rows are sparse, so the decay of a feature's
parameters is applied just in time: each feature remembers the cumulative log-decay at its
last update and catches up when a row next touches it (and all features at the end of a
pass).  This equals the eager update exactly, on any data.  AdaGrad scales each coordinate by
its own history, so there the penalty gradient ``reg * p`` is added when the feature is
touched, multiplied by the number of steps since its last touch (the scale correction);
on dense data this is the eager update.

Mini-batches: the gradients of ``batch_size`` rows are summed in buffers (only the touched
entries) and applied once, as the mean.
"""
import numpy as np
from libc.math cimport exp, log, sqrt, sqrtf, isfinite, fabs, copysign
from libc.stdlib cimport malloc, free, calloc
from libc.string cimport memcpy, memset
from cython.parallel cimport parallel, prange, threadid

from ._kernels cimport (index_t, floating, floating_row, Factors, Model, ANOVA,
                        ALL_SUBSETS, POLYNOMIAL, FIELD_AWARE, FIELD_WEIGHTED,
                        POLYLITE_PREFETCH, polylite_prefetch_block,
                        polylite_prefetch_block_l2, ADAGRAD_EPS,
                        anova_gradient, factors_of, field_aware_term,
                        field_weighted_term, field_pair, n_field_pairs,
                        all_subsets_gradient, linear_forms, polylite_barrier,
                        polylite_team_size, thread_range, int_power, adagrad_step)
from ._losses cimport loss_derivative, loss_value

cdef enum:
    # Shuffled rows sit at random places in memory: fetch the row pointer of the row this
    # far ahead, and the row itself (values, indices, label, weight) half as far ahead.
    PREFETCH_ROWS = 16

cdef enum:
    CONSTANT = 0
    INVSCALING = 1
    ADAGRAD = 2
    FTRL = 3                  # FTRL-proximal (McMahan et al. 2013), one row per step


cdef struct Rows:
    # The rows a pass visits, with what each contributes.  The CSR arrays themselves
    # (values ``floating``, indices and row pointers ``index_t``) travel typed beside the
    # pass's records: a struct cannot hold a fused type.
    const Py_ssize_t* order   # the rows, in the order visited (NULL: 0..n_rows-1)
    Py_ssize_t n_rows
    # The schedule's steps each row counts for: 1, or the threads that share a pass row
    # by row (each thread's rows stand for that many of the pass's steps).
    long long step_stride
    const double* y
    const double* sample_weight


cdef struct Rule:
    # The objective and the schedule of the steps.
    int loss
    double alpha              # the L2 penalty of w
    double beta               # of P, gamma and lam
    bint fit_intercept
    bint fit_linear
    bint fit_lam
    int schedule              # CONSTANT, INVSCALING or ADAGRAD
    double eta0
    double power_t
    Py_ssize_t batch_size
    # The penalty is each row's (libffm's): the parameters the row's prediction reads
    # are penalised in the row's gradient (alpha w_j, beta P[b, j]; field-aware: the
    # vectors of the fields of the row's other nonzeros), the others not at all; the
    # objective's penalty is then the norm weighted by how often the rows read each
    # parameter.  Else every parameter is penalised at every step (lazily, see above).
    bint row_penalty
    # FTRL-proximal's L1 and L2 penalties (on the sum of the losses so far, as in
    # McMahan et al.; not the intercept's) and its beta (eta0 is its alpha).
    double l1
    double l2
    double ftrl_beta


cdef struct History:
    # AdaGrad's accumulated squared gradients, shaped as the parameters (``floating``,
    # as void*), and the step at which each feature was last updated: NULL for SGD.
    void* intercept
    void* w
    void* P
    void* gamma
    void* lam
    long long* last_touch
    # FTRL: its z of each parameter (``floating``, shaped as the parameters); the sums
    # of squared gradients (its n) are the arrays above.
    void* z_intercept
    void* z_w
    void* z_P
    void* z_lam               # (the field-weighted kernel's weights of pairs of fields)


cdef struct Pass:
    # Everything a pass reads but its step count and SGD's scales (which each thread of
    # a mini-batch pass follows in its own copies).
    Rows rows
    Model model
    Rule rule
    History history


cdef struct BatchStep:
    # One mini-batch's step, the same in every thread.
    double scale              # 1 / the mini-batch's size: its sums become means
    double eta                # the learning rate
    double new_w              # SGD's scales after the step's decay
    double new_p
    long long step            # the step count


cdef struct Scales:
    # SGD stores w = wscale * v and P = pscale * V: one step's L2 decay of every
    # parameter is then O(1), exactly the eager update (Bottou's trick).  AdaGrad: 1.
    double w
    double p


cdef struct HotRows:
    # The features that most rows of a field-aware pass read, in a pass shared by
    # threads: each thread steps its own copy of their parameters for a round of
    # ``round_rows`` of its rows, and the copies are merged into the shared parameters at
    # the round's end (_merge_hot).  A copy (``floating``) holds the factor rows, AdaGrad's
    # sums of them, the linear weights, their sums, the intercept and its sum.
    const int* slot           # each feature's place among the hot ones, -1: not hot
    const Py_ssize_t* feature  # the feature at each place
    Py_ssize_t n_hot
    Py_ssize_t round_rows
    void* start               # the shared values at the round's start, as a copy


cdef struct RowSums:
    # One thread's share of a pass.  Its workspace for the gradient of one row
    # (``floating`` arrays, kept as void*: a struct cannot hold a fused type) ...
    void* table
    void* adj
    void* gP
    void* ggamma
    void* glam
    void* xs
    # ... and the gradient sums of its rows (double, as the parameters are laid out).
    double intercept
    double* w
    double* P
    double* gamma
    double* lam
    Py_ssize_t* touched     # mini-batches: the features with a sum, in order of first touch
    Py_ssize_t n_touched
    char* is_touched
    int* field_count        # field-aware, row_penalty: nonzeros of the row in each field
    # The field-aware pass's pair loops (_locate_row): whether they take the AVX ones,
    # and where each nonzero of the row has its factor row, AdaGrad's sums of it, its
    # linear weight and that weight's sum (the shared parameters, or this thread's copy
    # of the hot features' in ``own``: HotRows; ``floating*``, kept as void*).
    bint vector_pairs
    void** vectors
    void** vector_sums
    void** weights
    void** weight_sums
    const HotRows* hot      # NULL: every parameter shared
    void* own
    int* row_fields         # a row's field offsets (field-aware pair loops) or its
                            # distinct fields (field-weighted), max_nnz
    void* linear            # a row's linear weights and AdaGrad sums (2 max_nnz floating)
    double total            # objective_gradient: the weighted loss of its rows
    bint finite


cdef double _row_gradient(const Model* m, const floating* P, const index_t* ind,
                          const floating* val, Py_ssize_t nnz,
                          RowSums* st) noexcept nogil:
    """Nonlinear term of the row's prediction (factors ``P``, of the shape of ``m``); its
    gradient into the thread's workspace ``st``.

    gP[(b * nnz + z) * k + s] = d/dP[b, ind[z], s]; ggamma[r * k + s]; glam[s] (polynomial
    kernel only).  The field-aware kernel's one block holds each feature's n_fields
    vectors in a factor row of k entries.  Workspace: ``table`` (n_dummy + nnz + 1) * (max degree + 1) * k and
    ``adj`` (max degree + 1) * k.
    """
    cdef Py_ssize_t d = m.d, k = m.k, n_dummy = m.n_dummy
    cdef const floating* gamma = <const floating*> m.gamma
    cdef const floating* lam = <const floating*> m.lam
    cdef floating* table = <floating*> st.table
    cdef floating* adj = <floating*> st.adj
    cdef floating* gP = <floating*> st.gP
    cdef floating* ggamma = <floating*> st.ggamma
    cdef floating* glam = <floating*> st.glam
    cdef Py_ssize_t b, s, z, m_b, n_items
    cdef double total = 0, u, um1, coef
    cdef Factors block
    cdef floating* last
    if m.kernel == ANOVA:
        for b in range(m.n_blocks):
            m_b = m.degrees[b]
            n_items = nnz + (n_dummy if b == 0 else 0)
            block = factors_of(P + b * d * k, gamma if b == 0 else NULL,
                               n_dummy if b == 0 else 0, k)
            anova_gradient(&block, ind, val, nnz, m_b, table, adj, gP + b * nnz * k,
                           ggamma if b == 0 else NULL)
            last = table + n_items * (m_b + 1) * k + m_b * k
            for s in range(k):
                total += last[s]
    elif m.kernel == ALL_SUBSETS:
        all_subsets_gradient(P, k, ind, val, nnz, table, adj, gP)
        for s in range(k):
            total += table[nnz * k + s]
    elif m.kernel == FIELD_AWARE:
        # One block whose factor rows hold a feature's n_fields vectors (k their total).
        total = field_aware_term(P, k, m.n_fields, m.fields, ind, val, nnz, gP)
    elif m.kernel == FIELD_WEIGHTED:
        # glam: the gradient in the weights of the row's pairs of fields.
        total = field_weighted_term(m, ind, val, nnz, gP, glam)
    else:
        m_b = m.degrees[0]
        linear_forms(P, k, gamma if n_dummy > 0 else NULL, ind, val, nnz, adj)
        for s in range(k):
            u = adj[s]
            um1 = int_power(u, m_b - 1)
            glam[s] = um1 * u
            total += lam[s] * um1 * u
            coef = lam[s] * m_b * um1
            if n_dummy > 0:
                ggamma[s] = coef
            for z in range(nnz):
                gP[z * k + s] = coef * val[z]
    return total


cdef inline double _linear(const floating* w, const index_t* ind, const floating* val,
                           Py_ssize_t nnz) noexcept nogil:
    cdef double acc = 0
    cdef Py_ssize_t z
    for z in range(nnz):
        acc += w[ind[z]] * val[z]
    return acc


cdef inline void _prefetch_ahead(Py_ssize_t pos, Py_ssize_t end, const floating* data,
                                 const index_t* ind, const index_t* indptr,
                                 const Pass* ps, bint factors=True) noexcept nogil:
    """Software prefetch, in three stages, for the rows a pass will visit after ``pos``
    (up to ``end``, of its order).

    Shuffled rows sit at random places in memory: the row pointer PREFETCH_ROWS ahead,
    the row itself (values, indices, label, weight) half as far ahead, and the parameters
    its nonzeros touch a quarter as far ahead (its indices are cached by then).  A factor
    row may straddle two cache lines: both ends are fetched, and AdaGrad's statistics
    likewise; not with ``factors`` False (the field-aware pass fetches whole factor rows
    itself), which leaves the linear weights and their sums.
    """
    cdef const Py_ssize_t* order = ps.rows.order
    cdef const floating* w = <const floating*> ps.model.w
    cdef const floating* P = <const floating*> ps.model.P
    cdef const floating* acc_w = <const floating*> ps.history.w
    cdef const floating* acc_P = <const floating*> ps.history.P
    cdef Py_ssize_t n_blocks = ps.model.n_blocks, d = ps.model.d, k = ps.model.k
    cdef Py_ssize_t r, z, j, b, lo, hi
    cdef const floating* row
    if pos + PREFETCH_ROWS < end:
        POLYLITE_PREFETCH(indptr + order[pos + PREFETCH_ROWS])
    if pos + PREFETCH_ROWS // 2 < end:
        r = order[pos + PREFETCH_ROWS // 2]
        lo = indptr[r]
        hi = indptr[r + 1] - 1
        POLYLITE_PREFETCH(data + lo)
        POLYLITE_PREFETCH(ind + lo)
        if hi > lo:
            POLYLITE_PREFETCH(data + hi)
            POLYLITE_PREFETCH(ind + hi)
        POLYLITE_PREFETCH(ps.rows.y + r)
        POLYLITE_PREFETCH(ps.rows.sample_weight + r)
    if pos + PREFETCH_ROWS // 4 < end:
        r = order[pos + PREFETCH_ROWS // 4]
        for z in range(indptr[r], indptr[r + 1]):
            j = ind[z]
            POLYLITE_PREFETCH(w + j)
            if not factors:
                if acc_w != NULL:
                    POLYLITE_PREFETCH(acc_w + j)
                continue
            for b in range(n_blocks):
                row = P + (b * d + j) * k
                POLYLITE_PREFETCH(row)
                POLYLITE_PREFETCH(row + k - 1)
            if acc_P != NULL:
                POLYLITE_PREFETCH(acc_w + j)
                POLYLITE_PREFETCH(ps.history.last_touch + j)
                for b in range(n_blocks):
                    row = acc_P + (b * d + j) * k
                    POLYLITE_PREFETCH(row)
                    POLYLITE_PREFETCH(row + k - 1)


cdef inline void _fold_share(int t, int threads, floating* w, Py_ssize_t d, floating* P,
                             Py_ssize_t size_P, Scales* sc) noexcept nogil:
    """Multiply thread t's share of the stored parameters by their scales (then 1)."""
    cdef Py_ssize_t i, lo, hi
    if sc.w != 1 and thread_range(t, threads, d, &lo, &hi):
        for i in range(lo, hi):
            w[i] = w[i] * sc.w
    if sc.p != 1 and thread_range(t, threads, size_P, &lo, &hi):
        for i in range(lo, hi):
            P[i] = P[i] * sc.p
    sc.w = 1
    sc.p = 1


cdef inline void _fold_scales(floating* w, Py_ssize_t d, floating* P, Py_ssize_t size_P,
                              Scales* sc) noexcept nogil:
    """Multiply the stored parameters by their scales (then 1)."""
    _fold_share(0, 1, w, d, P, size_P, sc)


cdef inline void _forward_row(floating_row p, floating x, int m, floating_row a1,
                              floating_row a2, floating_row a3, Py_ssize_t k) noexcept nogil:
    """Add one item, q = x p_f, to the running A_1..A_m of a block of degree m = 2 or 3:
    the ANOVA dynamic programme of anova_forward, written out (descending degrees, so
    that each update reads the previous item's value).  One branch per factor row, not
    per component, so the k-loop vectorises (restrict pointers: p, a1, a2 and a3 never
    overlap, nor do the row kernels' arrays below)."""
    cdef Py_ssize_t f
    cdef floating q
    if m == 2:
        for f in range(k):
            q = x * p[f]
            a2[f] += q * a1[f]
            a1[f] += q
    else:
        for f in range(k):
            q = x * p[f]
            a3[f] += q * a2[f]
            a2[f] += q * a1[f]
            a1[f] += q


cdef inline floating _grad2(floating x, floating p, floating a1) noexcept nogil:
    """dA_2/dp_j = x_j A_1(without j) = x_j (a1 - q_j), q_j = x_j p_j; a1 includes j."""
    return x * (a1 - x * p)


cdef inline floating _grad3(floating x, floating p, floating a1,
                            floating a2) noexcept nogil:
    """dA_3/dp_j = x_j A_2(without j), peeled off the full sums by multi-linearity
    (A_t = A_t(without j) + q_j A_{t-1}(without j), as anova_coordinate_derivative):
    A_2(without j) = a2 - q_j (a1 - q_j)."""
    cdef floating q = x * p
    return x * (a2 - q * (a1 - q))


cdef inline void _sgd_row(floating_row p, floating x, int m, floating_row a1,
                          floating_row a2, floating fstep, Py_ssize_t k) noexcept nogil:
    """p_f -= fstep * (gradient of A_m in p_f), for the k coordinates of one factor row of a
    block of degree m = 2 or 3 (the row's old values: each is read just before it is
    written)."""
    cdef Py_ssize_t f
    if m == 2:
        for f in range(k):
            p[f] = p[f] - fstep * _grad2(x, p[f], a1[f])
    else:
        for f in range(k):
            p[f] = p[f] - fstep * _grad3(x, p[f], a1[f], a2[f])


cdef inline void _adagrad_row(floating_row p, floating_row acc, floating x, int m,
                              floating_row a1, floating_row a2, floating dl,
                              floating decay, double eta0, Py_ssize_t k) noexcept nogil:
    """AdaGrad on the k coordinates of one factor row of a block of degree m = 2 or 3:
    g_f = dl (gradient of A_m in p_f) + decay p_f, then adagrad_step (vectorised:
    the module is built with -fno-math-errno)."""
    cdef Py_ssize_t f
    if m == 2:
        for f in range(k):
            adagrad_step(&p[f], &acc[f], dl * _grad2(x, p[f], a1[f]) + decay * p[f], eta0)
    else:
        for f in range(k):
            adagrad_step(&p[f], &acc[f],
                          dl * _grad3(x, p[f], a1[f], a2[f]) + decay * p[f], eta0)


cdef inline bint _anova23_pass(const floating* data, const index_t* ind,
                               const index_t* indptr, const Pass* ps, Py_ssize_t n_blocks,
                               const int* degrees, long long* step, floating* work,
                               Scales* sc) noexcept nogil:
    """A batch-size-1 pass for ANOVA blocks of degree 2 or 3 (no dummies).

    The same steps as the general loop of :func:`sgd_epoch` (``_row_gradient`` then
    ``_apply_row``), with the dynamic programme written out: one loop over the row's
    nonzeros gives, per block and component, a1 = sum_j q_j, a2 and (degree 3) a3 =
    A_3, q_j = x_j p_j (k innermost, on contiguous factor rows); a second loop applies
    the closed-form gradients x_j A_{m-1}(without j) (_grad2, _grad3), without the
    general programme's table, backward pass and gradient buffer.  Each block costs
    about what the one block of a degree-2 model costs.  Rows must not repeat a column
    (canonical CSR): each factor row is read for its gradient just before it is
    updated.  ``work`` holds 3 k values per block.  Returns False on a non-finite
    prediction.
    """
    # A copy the compiler can keep in registers (the steps' writes cannot reach it).
    cdef Pass local = ps[0]
    cdef const double* y = local.rows.y
    cdef const double* sw = local.rows.sample_weight
    cdef const Py_ssize_t* order = local.rows.order
    cdef Py_ssize_t n_rows = local.rows.n_rows, d = local.model.d, k = local.model.k
    cdef floating* intercept = <floating*> local.model.intercept
    cdef floating* w = <floating*> local.model.w
    cdef floating* V = <floating*> local.model.P
    cdef int loss = local.rule.loss, schedule = local.rule.schedule
    cdef double alpha = local.rule.alpha, beta = local.rule.beta
    cdef double eta0 = local.rule.eta0, power_t = local.rule.power_t
    cdef bint fit_intercept = local.rule.fit_intercept, fit_linear = local.rule.fit_linear
    cdef floating* acc_intercept = <floating*> local.history.intercept
    cdef floating* acc_w = <floating*> local.history.w
    cdef floating* acc_P = <floating*> local.history.P
    cdef long long* last_touch = local.history.last_touch
    cdef bint adagrad = schedule == ADAGRAD
    cdef Py_ssize_t pos, i, z, j, f, b, start, nnz, size_P = n_blocks * d * k
    cdef floating* row
    cdef floating* a
    cdef floating xv, fstep
    cdef int m
    cdef double pred, dl, eta, total, new_w, new_p, elapsed, step_w
    for pos in range(n_rows):
        _prefetch_ahead(pos, n_rows, data, ind, indptr, &local)
        step[0] += 1
        eta = eta0 / _pow_t(step[0], power_t) if schedule == INVSCALING else eta0
        i = order[pos]
        start = indptr[i]
        nnz = indptr[i + 1] - start
        pred = intercept[0]
        if fit_linear:
            pred += sc.w * _linear(w, ind + start, data + start, nnz)
        # Forward (P = pscale * V, so the values are scaled); block b's a1, a2, a3 are
        # work[3 b k :], each k long.
        for f in range(3 * n_blocks * k):
            work[f] = 0
        for z in range(nnz):
            xv = <floating> (sc.p * data[start + z])
            j = ind[start + z]
            for b in range(n_blocks):
                a = work + 3 * b * k
                _forward_row(V + (b * d + j) * k, xv, degrees[b], a, a + k, a + 2 * k, k)
        total = 0
        for b in range(n_blocks):
            a = work + (3 * b + degrees[b] - 1) * k  # A_m of block b
            for f in range(k):
                total += a[f]
        pred += total
        if not isfinite(pred):
            return False
        dl = sw[i] * loss_derivative(loss, y[i], pred)
        if adagrad:
            if fit_intercept:
                adagrad_step(intercept, acc_intercept, dl, eta0)
            for z in range(nnz):
                j = ind[start + z]
                xv = data[start + z]
                elapsed = step[0] - last_touch[j]  # steps since the last touch
                last_touch[j] = step[0]
                if fit_linear:
                    adagrad_step(&w[j], &acc_w[j], dl * xv + alpha * elapsed * w[j], eta0)
                for b in range(n_blocks):
                    a = work + 3 * b * k
                    _adagrad_row(V + (b * d + j) * k, acc_P + (b * d + j) * k, xv,
                                 degrees[b], a, a + k, <floating> dl,
                                 <floating> (beta * elapsed), eta0, k)
            continue
        # SGD, as _apply_row: V -= eta dl (gradient in V) / (pscale new_pscale).
        new_w = sc.w * (1 - eta * alpha)
        new_p = sc.p * (1 - eta * beta)
        fstep = <floating> (eta * dl / (sc.p * new_p))
        step_w = eta * dl / new_w
        if fit_intercept:
            intercept[0] = intercept[0] - eta * dl
        for z in range(nnz):
            j = ind[start + z]
            if fit_linear:
                w[j] = w[j] - step_w * data[start + z]
            xv = <floating> (sc.p * data[start + z])
            for b in range(n_blocks):
                a = work + 3 * b * k
                _sgd_row(V + (b * d + j) * k, xv, degrees[b], a, a + k, fstep, k)
        sc.w = new_w
        sc.p = new_p
        if sc.w < 1e-9 or sc.p < 1e-9:
            _fold_scales(w, d, V, size_P, sc)
    return True


include "_sgd_fields.pxi"
include "_sgd_ftrl.pxi"
include "_sgd_weighted.pxi"


# ---------------------------------------------------------------------------------------
# Threads: each takes a contiguous share of the rows (of a mini-batch, or of the data for
# the L-BFGS pass) and sums their gradients in its own buffers; the sums are then added
# thread by thread in a fixed order, so a result depends on the thread count only through
# the rounding of those additions, and is the same from run to run.
# ---------------------------------------------------------------------------------------

cdef RowSums* _alloc_row_sums(int threads, int first, size_t fsize, const Model* m,
                              Py_ssize_t max_nnz, Py_ssize_t block,
                              bint track) noexcept nogil:
    """Every thread's row workspace, and zeroed gradient sums for threads first..threads-1
    (with lists of the touched features when ``track``).  NULL when out of memory."""
    cdef Py_ssize_t n_dummy = m.n_dummy, n_blocks = m.n_blocks, k = m.k, d = m.d
    cdef Py_ssize_t size_P = n_blocks * d * k, n_lam = _n_lam(m)
    cdef RowSums* st = <RowSums*> calloc(threads, sizeof(RowSums))
    cdef int t
    cdef bint ok = st != NULL
    for t in range(threads if ok else 0):
        st[t].finite = True
        st[t].table = malloc((n_dummy + max_nnz + 1) * block * fsize)
        st[t].adj = malloc(block * fsize)
        st[t].gP = malloc((n_blocks * max_nnz * k + 1) * fsize)
        st[t].ggamma = malloc((n_dummy * k + 1) * fsize)
        st[t].glam = malloc((n_lam + 1) * fsize)
        st[t].xs = malloc((max_nnz + 1) * fsize)
        st[t].field_count = <int*> calloc(m.n_fields + 1, sizeof(int))
        st[t].vectors = <void**> malloc(4 * (max_nnz + 1) * sizeof(void*))
        st[t].vector_sums = st[t].vectors + (max_nnz + 1)
        st[t].weights = st[t].vectors + 2 * (max_nnz + 1)
        st[t].weight_sums = st[t].vectors + 3 * (max_nnz + 1)
        st[t].row_fields = <int*> malloc((max_nnz + 1) * sizeof(int))
        st[t].linear = malloc((2 * max_nnz + 1) * fsize)
        ok = ok and (st[t].table != NULL and st[t].adj != NULL and st[t].gP != NULL
                     and st[t].ggamma != NULL and st[t].glam != NULL and st[t].xs != NULL
                     and st[t].field_count != NULL and st[t].vectors != NULL
                     and st[t].row_fields != NULL and st[t].linear != NULL)
        if t < first:
            continue
        st[t].w = <double*> calloc(d + 1, sizeof(double))
        st[t].P = <double*> calloc(size_P + 1, sizeof(double))
        st[t].gamma = <double*> calloc(n_dummy * k + 1, sizeof(double))
        st[t].lam = <double*> calloc(n_lam + 1, sizeof(double))
        ok = ok and (st[t].w != NULL and st[t].P != NULL and st[t].gamma != NULL
                     and st[t].lam != NULL)
        if track:
            st[t].touched = <Py_ssize_t*> malloc((d + 1) * sizeof(Py_ssize_t))
            st[t].is_touched = <char*> calloc(d + 1, 1)
            ok = ok and st[t].touched != NULL and st[t].is_touched != NULL
    if not ok:
        _free_row_sums(st, threads, first)
        return NULL
    return st


cdef void _free_row_sums(RowSums* st, int threads, int first) noexcept nogil:
    cdef int t
    if st == NULL:
        return
    for t in range(threads):
        free(st[t].table)
        free(st[t].adj)
        free(st[t].gP)
        free(st[t].ggamma)
        free(st[t].glam)
        free(st[t].xs)
        free(st[t].field_count)
        free(st[t].vectors)
        free(st[t].row_fields)
        free(st[t].linear)
        if t >= first:
            free(st[t].w)
            free(st[t].P)
            free(st[t].gamma)
            free(st[t].lam)
            free(st[t].touched)
            free(st[t].is_touched)
    free(st)


cdef inline double _take_w(RowSums* st, int threads, Py_ssize_t j) noexcept nogil:
    """The sum over the threads, in their order, of their sums of w[j] (then zeroed)."""
    cdef double g = 0
    cdef int t
    for t in range(threads):
        g += st[t].w[j]
        st[t].w[j] = 0
    return g


cdef inline double _take_P(RowSums* st, int threads, Py_ssize_t r) noexcept nogil:
    """As _take_w, for the factor entry r."""
    cdef double g = 0
    cdef int t
    for t in range(threads):
        g += st[t].P[r]
        st[t].P[r] = 0
    return g


cdef inline double _prediction_and_gradient(
        const floating* data, const index_t* ind, Py_ssize_t nnz, double intercept,
        const Model* m, bint fit_linear, const Scales* sc, RowSums* st) noexcept nogil:
    """The prediction of the row (``nnz`` values and indices) by the model ``m`` (its
    intercept read by the caller); the gradient of its nonlinear term into the thread's
    workspace (:func:`_row_gradient`), in the stored factors V (P = pscale V: the kernels
    see it through the values, q = V (pscale x))."""
    cdef const floating* values = data
    cdef floating* xs = <floating*> st.xs
    cdef double pred = intercept
    cdef Py_ssize_t z
    if fit_linear:
        pred += sc.w * _linear(<const floating*> m.w, ind, data, nnz)
    if m.k == 0 or m.n_blocks == 0:
        return pred
    if sc.p != 1:
        for z in range(nnz):
            xs[z] = <floating> (sc.p * data[z])
        values = xs
    return pred + _row_gradient(m, <const floating*> m.P, ind, values, nnz, st)


cdef inline void _add_row(RowSums* st, double dl, const floating* data, const index_t* ind,
                          Py_ssize_t nnz, const Model* m, const Rule* rule, double pscale,
                          bint track) noexcept nogil:
    """dl times the row's gradient (in the workspace, in V) into the thread's sums, in P
    (divided by ``pscale``), and with ``rule.row_penalty`` the row's penalty; with
    ``track``, note the features it touches."""
    cdef const floating* gP = <floating*> st.gP
    cdef const floating* ggamma = <floating*> st.ggamma
    cdef const floating* glam = <floating*> st.glam
    cdef Py_ssize_t d = m.d, k = m.k, n_blocks = m.n_blocks, n_dummy = m.n_dummy
    cdef Py_ssize_t z, j, b, s, r
    cdef bint fit_linear = rule.fit_linear
    cdef double* row
    st.intercept += dl
    if rule.row_penalty:
        _add_row_penalty(st, ind, nnz, m, rule, <const floating*> m.P)
    for z in range(nnz):
        j = ind[z]
        if track and not st.is_touched[j]:
            st.is_touched[j] = 1
            st.touched[st.n_touched] = j
            st.n_touched += 1
        if fit_linear:
            st.w[j] += dl * data[z]
        for b in range(n_blocks):
            row = st.P + (b * d + j) * k
            for s in range(k):
                row[s] += dl * gP[(b * nnz + z) * k + s] / pscale
    for r in range(n_dummy * k):
        st.gamma[r] += dl * ggamma[r]
    if m.kernel == POLYNOMIAL:
        for s in range(k):
            st.lam[s] += dl * glam[s]
    elif m.kernel == FIELD_WEIGHTED:
        _add_field_weights(st, dl, <const floating*> m.lam, ind, nnz, m, rule)


cdef void _batch_share(Py_ssize_t t, Py_ssize_t threads, Py_ssize_t pos,
                       Py_ssize_t batch_end, const floating* data, const index_t* ind,
                       const index_t* indptr, const Pass* ps, const Scales* sc,
                       RowSums* states) noexcept nogil:
    """Thread t's share of the mini-batch pos..batch_end-1: the gradients of its rows,
    summed in its buffers, and the list of the features they touch (the previous
    mini-batch's list is cleared first).  Stops with ``finite`` False at a non-finite
    prediction."""
    cdef RowSums* st = states + t
    # Copies the compiler can keep in registers (the sums' writes cannot reach them).
    cdef Pass local = ps[0]
    cdef const Py_ssize_t* order = local.rows.order
    cdef double intercept = (<const floating*> ps.model.intercept)[0]
    cdef Py_ssize_t lo, hi, r, i, start, nnz
    cdef double pred
    for r in range(st.n_touched):
        st.is_touched[st.touched[r]] = 0
    st.n_touched = 0
    if not thread_range(t, threads, batch_end - pos, &lo, &hi):
        return
    for r in range(pos + lo, pos + hi):
        # The last share prefetches on into the next mini-batch.
        _prefetch_ahead(r, local.rows.n_rows if t == threads - 1 else pos + hi, data, ind,
                        indptr, &local)
        i = order[r]
        start = indptr[i]
        nnz = indptr[i + 1] - start
        pred = _prediction_and_gradient(data + start, ind + start, nnz, intercept,
                                        &local.model, local.rule.fit_linear, sc, st)
        if not isfinite(pred):
            st.finite = False
            return
        _add_row(st, local.rows.sample_weight[i]
                 * loss_derivative(local.rule.loss, local.rows.y[i], pred),
                 data + start, ind + start, nnz, &local.model, &local.rule, sc.p, True)


cdef inline bint _first_touch(const RowSums* st, int u, Py_ssize_t j) noexcept nogil:
    """Whether feature j, in thread u's list, is in no earlier thread's list."""
    cdef int v
    for v in range(u):
        if st[v].is_touched[j]:
            return False
    return True


cdef void _apply_share(int t, int threads, RowSums* st, const Pass* ps, floating* P,
                       const BatchStep* bs) noexcept nogil:
    """Thread t's share of the features the mini-batch touched (those j with
    j % threads == t, found in the threads' lists): one step with the mini-batch's mean
    gradient (the threads' sums added in their order) on w[j] and P[:, j, :] (``P`` the
    model's factors).  Each feature has one owner, so the threads write disjoint entries,
    and the step on a feature does not depend on which thread takes it."""
    cdef floating* w = <floating*> ps.model.w
    cdef floating* acc_w = <floating*> ps.history.w
    cdef floating* acc_P = <floating*> ps.history.P
    cdef long long* last_touch = ps.history.last_touch
    cdef Py_ssize_t d = ps.model.d, k = ps.model.k, n_blocks = ps.model.n_blocks
    cdef double scale = bs.scale, eta = bs.eta, eta0 = ps.rule.eta0
    cdef double alpha = ps.rule.alpha, beta = ps.rule.beta
    cdef bint adagrad = ps.rule.schedule == ADAGRAD, fit_linear = ps.rule.fit_linear
    cdef Py_ssize_t v, j, b, s, r
    cdef int u
    cdef double g, elapsed = 0
    for u in range(threads):
        for v in range(st[u].n_touched):
            j = st[u].touched[v]
            if j % threads != t or not _first_touch(st, u, j):
                continue
            if adagrad and not ps.rule.row_penalty:  # (a row penalty is in the sums)
                elapsed = bs.step - last_touch[j]  # steps since the last touch
                last_touch[j] = bs.step
            if fit_linear:
                g = _take_w(st, threads, j) * scale
                if adagrad:
                    adagrad_step(&w[j], &acc_w[j], g + alpha * elapsed * w[j], eta0)
                else:
                    w[j] = w[j] - eta * g / bs.new_w
            for b in range(n_blocks):
                for s in range(k):
                    r = (b * d + j) * k + s
                    g = _take_P(st, threads, r) * scale
                    if adagrad:
                        adagrad_step(&P[r], &acc_P[r], g + beta * elapsed * P[r], eta0)
                    else:
                        P[r] = P[r] - eta * g / bs.new_p


cdef void _apply_global(int threads, RowSums* st, const Pass* ps, floating* intercept,
                        const BatchStep* bs) noexcept nogil:
    """The mini-batch's step on the parameters every row touches (``intercept``, the
    model's, the dummies' factors, the polynomial kernel's lambda), from the threads' sums
    (then zeroed)."""
    cdef floating* gamma = <floating*> ps.model.gamma
    cdef floating* lam = <floating*> ps.model.lam
    cdef floating* acc_intercept = <floating*> ps.history.intercept
    cdef floating* acc_gamma = <floating*> ps.history.gamma
    cdef floating* acc_lam = <floating*> ps.history.lam
    cdef Py_ssize_t k = ps.model.k, n_dummy = ps.model.n_dummy
    cdef double scale = bs.scale, eta = bs.eta, eta0 = ps.rule.eta0, beta = ps.rule.beta
    cdef bint adagrad = ps.rule.schedule == ADAGRAD
    cdef Py_ssize_t r, s
    cdef int u
    cdef double g = 0
    for u in range(threads):
        g += st[u].intercept
        st[u].intercept = 0
    if ps.rule.fit_intercept:
        g *= scale
        if adagrad:
            adagrad_step(intercept, acc_intercept, g, eta0)
        else:
            intercept[0] = intercept[0] - eta * g
    for r in range(n_dummy * k):
        g = 0
        for u in range(threads):
            g += st[u].gamma[r]
            st[u].gamma[r] = 0
        g = g * scale + beta * gamma[r]
        if adagrad:
            adagrad_step(&gamma[r], &acc_gamma[r], g, eta0)
        else:
            gamma[r] = gamma[r] - eta * g
    if ps.model.kernel == FIELD_WEIGHTED:
        _apply_field_weights(threads, st, ps, bs, lam)
    if ps.model.kernel != POLYNOMIAL:
        return
    for s in range(k):
        g = 0
        for u in range(threads):
            g += st[u].lam[s]
            st[u].lam[s] = 0
        if ps.rule.fit_lam:
            g = g * scale + beta * lam[s]
            if adagrad:
                adagrad_step(&lam[s], &acc_lam[s], g, eta0)
            else:
                lam[s] = lam[s] - eta * g


cdef void _batch_pass(int t, int threads, const floating* data, const index_t* ind,
                      const index_t* indptr, const Pass* ps, long long* step_out,
                      RowSums* st) noexcept nogil:
    """Thread t's part of a pass in mini-batches, run by every thread of one parallel
    region (or by one thread alone): per mini-batch, each thread sums the gradients of its
    share of the rows; after a barrier, it steps the features it owns (thread 0 also the
    intercept, dummies and lambda); a second barrier ends the step.  Every thread follows
    the same schedule (step count, learning rate, SGD's scales) in its own copies;
    thread 0 writes the final step count to ``step_out``.  A non-finite prediction stops
    every thread before the step (its ``finite`` flag is False)."""
    cdef floating* w = <floating*> ps.model.w
    cdef floating* P = <floating*> ps.model.P
    cdef Py_ssize_t d = ps.model.d, n_rows = ps.rows.n_rows
    cdef Py_ssize_t pos = 0, batch_end, size_P = ps.model.n_blocks * d * ps.model.k
    cdef int schedule = ps.rule.schedule
    cdef double eta0 = ps.rule.eta0
    cdef bint adagrad = schedule == ADAGRAD, finite = True
    cdef int u
    cdef BatchStep bs
    cdef Scales sc
    bs.step = step_out[0]
    sc.w = 1
    sc.p = 1
    while pos < n_rows:
        batch_end = min(pos + ps.rule.batch_size, n_rows)
        bs.step += 1
        bs.eta = (eta0 / _pow_t(bs.step, ps.rule.power_t) if schedule == INVSCALING
                  else eta0)
        _batch_share(t, threads, pos, batch_end, data, ind, indptr, ps, &sc, st)
        polylite_barrier()  # every share summed
        for u in range(threads):
            finite = finite and st[u].finite
        if not finite:
            break
        bs.scale = 1.0 / (batch_end - pos)
        bs.new_w = (sc.w * (1 - bs.eta * ps.rule.alpha)
                    if not (adagrad or ps.rule.row_penalty) else 1)
        bs.new_p = (sc.p * (1 - bs.eta * ps.rule.beta)
                    if not (adagrad or ps.rule.row_penalty) else 1)
        if t == 0:
            _apply_global(threads, st, ps, <floating*> ps.model.intercept, &bs)
        _apply_share(t, threads, st, ps, P, &bs)
        sc.w = bs.new_w
        sc.p = bs.new_p
        if sc.w < 1e-9 or sc.p < 1e-9:
            polylite_barrier()  # every step taken at the old scales
            _fold_share(t, threads, w, d, P, size_P, &sc)
        polylite_barrier()  # the step complete before the next mini-batch reads it
        pos = batch_end
    # Parameters that overflowed are caught by the caller, which checks every array.
    _fold_share(t, threads, w, d, P, size_P, &sc)
    if t == 0:
        step_out[0] = bs.step


def sgd_epoch(rows, problem, params, state, schedule, order, bint specialised=True,
              int n_threads=1):
    """One pass of SGD or AdaGrad over the rows ``order`` (in that order), in place.

    ``rows``: CSR rows (canonical: a row never repeats a column).  ``problem``: a
    :class:`polylite._engine.problem.Problem` (``sample_weight`` scales each row's loss
    gradient: mean 1 over the data set for the objective's normalisation).  ``params``:
    the parameters (``intercept``, ``w``, ``P``, ``gamma``, ``lam``), updated in place.
    ``state``: ``step``, the number of (mini-batch) steps taken before this pass (the
    inverse-scaling schedule), AdaGrad's accumulated squared gradients ``acc`` (a dict
    keyed like the parameters) and ``last_touch``, the step at which each feature was
    last updated (both empty for SGD).  ``schedule``: a
    :class:`polylite._engine.problem.Schedule`.  Returns (steps after the pass, finite):
    on a non-finite prediction the pass stops at once with finite False (the caller
    checks the parameters).

    ``specialised=False`` runs the general loop even where a specialised pass exists
    (ANOVA blocks of degree 2 or 3, no dummies, one row per step): the tests compare
    the two.  ``n_threads`` threads share the rows of each mini-batch (``batch_size`` >
    1): each sums the gradients of its contiguous share of the mini-batch, and the sums
    are added in thread order before the step, which the threads share by features.  So
    the pass is the same from run to run for a given ``n_threads``, and agrees with one
    thread's to rounding.  Each thread keeps its own gradient buffers (as large as the
    parameters, in double).  With ``batch_size`` 1 steps on one row are sequential, but
    for the pair-by-pair pass of a field-aware model (``_field_aware_share``): there the
    threads take contiguous shares of ``order`` and step on the shared parameters
    without locks, but for the hot features' (read by at least one row in HOT_SHARE),
    which each thread steps in its own copy, the copies merged after every round of
    rows; that pass changes from run to run.
    """
    _check_pass(rows, problem, params, state, schedule, order, n_threads)
    return _sgd_pass(rows.data, rows.indices, params.P, rows, problem, params, state,
                     schedule, order, (specialised, n_threads))


def _fields_of(problem, Py_ssize_t d):
    """The field of each of the ``d`` features (intc) of a field-aware ``problem``,
    checked, since the passes index with them unchecked; an empty array for the other
    kernels."""
    if problem.kernel != FIELD_AWARE and problem.kernel != FIELD_WEIGHTED:
        return np.zeros(0, np.intc)
    fields = np.ascontiguousarray(problem.fields, dtype=np.intc)
    if fields.shape != (d,) or (d > 0 and (fields.min() < 0
                                           or fields.max() >= problem.n_fields)):
        raise ValueError(f"field-aware problem: fields must give each of the {d} "
                         f"features a field in [0, {problem.n_fields})")
    return fields


cdef Rule _rule_of(problem, schedule):
    """The Rule record of a pass: the problem's objective, the schedule's steps."""
    cdef Rule r
    r.loss = problem.loss
    r.alpha = problem.alpha
    r.beta = problem.beta
    r.fit_intercept = problem.fit_intercept
    r.fit_linear = problem.fit_linear
    r.fit_lam = problem.fit_lam
    r.row_penalty = problem.row_penalty
    r.schedule = schedule.kind
    r.eta0 = schedule.eta0
    r.power_t = schedule.power_t
    r.batch_size = schedule.batch_size
    r.l1 = schedule.l1
    r.l2 = schedule.l2
    r.ftrl_beta = schedule.ftrl_beta
    return r


cdef void _set_ftrl_history(History* h, state, bint ftrl, Py_ssize_t d, Py_ssize_t size_P):
    """FTRL's z arrays (``state.z``, checked by _check_pass) into the record ``h``; NULL
    for the other schedules."""
    cdef char[::1] zi, zw, zP, zl
    h.z_intercept = h.z_w = h.z_P = h.z_lam = NULL
    if not ftrl:
        return
    zi = state.z["intercept"].view(np.int8)
    zw = state.z["w"].reshape(-1).view(np.int8)
    zP = state.z["P"].reshape(-1).view(np.int8)
    zl = state.z["lam"].reshape(-1).view(np.int8)
    h.z_intercept = &zi[0]
    h.z_w = &zw[0] if d > 0 else NULL
    h.z_P = &zP[0] if size_P > 0 else NULL
    h.z_lam = &zl[0] if zl.shape[0] > 0 else NULL


cdef void _set_fields(Model* m, const int[::1] fields, Py_ssize_t n_fields):
    """The field-aware kernel's fields into the record ``m`` (``fields`` must outlive
    it; empty for the other kernels)."""
    m.fields = &fields[0] if fields.shape[0] > 0 else NULL
    m.n_fields = n_fields


def _takes_pairs(problem, n_blocks, d, k):
    """Whether a field-aware model (factors n_blocks x d x k) stepping one row at a time
    with libffm's penalty takes the pass pair by pair (_field_aware_pass: the same steps
    to rounding)."""
    return (problem.kernel == FIELD_AWARE and problem.row_penalty and n_blocks == 1
            and k > 0 and d > 0)


# A field-aware pass shared by threads gives each thread its own copy of the parameters
# of the features that at least one in HOT_SHARE of its rows reads (HotRows), counted on
# up to HOT_SAMPLE of its rows, the most read first, at most HOT_BYTES of them per copy.
# The copies' changes are added after rounds of HOT_ROUND_ROWS rows of each of two
# threads, HOT_ROUND_ROWS * 4 / threads^2 of more, or shorter ones, down to
# HOT_MIN_ROUND_ROWS, so that a pass has at least HOT_ROUNDS rounds: a thread's copy
# does not see the other threads' steps during a round, and in a long round every
# thread would take the same large early steps, which added up overshoot (the more so,
# the more threads).  Passes on more than HOT_MAX_THREADS threads share every parameter.
HOT_SHARE = 128
HOT_SAMPLE = 1 << 16
HOT_BYTES = 4 << 20
HOT_ROUND_ROWS = 1024
HOT_MIN_ROUND_ROWS = 64
HOT_ROUNDS = 32
HOT_MAX_THREADS = 8


def _hot_features(rows, order, Py_ssize_t d, Py_ssize_t row_bytes):
    """The hot features of a field-aware pass over ``rows`` in ``order`` shared by
    threads (HotRows; ``row_bytes``: a copy's bytes per feature).  Returns (slot, intc
    of d: each feature's place among them or -1; feature, intp: the feature at each
    place)."""
    order = np.asarray(order)
    sample = order[::max(1, order.shape[0] // HOT_SAMPLE)]
    indptr = np.asarray(rows.indptr, dtype=np.intp)
    starts = indptr[sample]
    sizes = indptr[sample + 1] - starts
    at = np.repeat(starts - np.cumsum(sizes) + sizes, sizes) + np.arange(sizes.sum())
    counts = np.bincount(np.asarray(rows.indices)[at], minlength=d)
    hot = np.flatnonzero(counts * HOT_SHARE >= max(sample.shape[0], 1))
    hot = hot[np.argsort(-counts[hot], kind="stable")][:HOT_BYTES // max(row_bytes, 1)]
    slot = np.full(d, -1, dtype=np.intc)
    slot[hot] = np.arange(hot.shape[0], dtype=np.intc)
    return slot, hot.astype(np.intp)


cdef object _set_hot(HotRows* hot, rows, order, Py_ssize_t row_bytes, int threads):
    """The record ``hot`` of the hot features of a field-aware pass over ``rows`` in
    ``order`` shared by ``threads`` threads (none on one thread); returns the arrays it
    points into (:func:`_hot_features`'s), to be kept while it is in use."""
    cdef const int[::1] slot
    cdef const Py_ssize_t[::1] feature
    cdef Py_ssize_t n_rows = len(order)
    hot.n_hot = 0
    hot.start = NULL
    if threads == 1 or threads > HOT_MAX_THREADS:
        return None
    arrays = _hot_features(rows, order, rows.shape[1], row_bytes)
    slot, feature = arrays
    hot.slot = &slot[0] if slot.shape[0] > 0 else NULL
    hot.feature = &feature[0] if feature.shape[0] > 0 else NULL
    hot.n_hot = feature.shape[0]
    hot.round_rows = max(HOT_MIN_ROUND_ROWS,
                         min(HOT_ROUND_ROWS * 4 // threads ** 2,
                             n_rows // (threads * HOT_ROUNDS)))
    return arrays


def _check_pass(rows, problem, params, state, schedule, order, int n_threads):
    """Refuse what sgd_epoch cannot take: its loops run without bounds checks, so the
    shapes must agree."""
    n_blocks, d, k = params.P.shape
    n_dummy = params.gamma.shape[0]
    y, sample_weight, order = problem.y, problem.sample_weight, np.asarray(order)
    if problem.kernel == FIELD_AWARE and (
            n_blocks != 1 or problem.n_fields < 1 or k % problem.n_fields or n_dummy):
        raise ValueError("sgd_epoch: a field-aware model has one factor block whose rows "
                         "hold n_fields vectors of equal length, and no dummies")
    n_lam = _lam_size(problem, k)
    if problem.kernel == FIELD_WEIGHTED and (
            n_blocks != 1 or problem.n_fields < 1 or n_dummy):
        raise ValueError("sgd_epoch: a field-weighted model has one factor block and no "
                         "dummies")
    if (params.w.shape[0] != d or params.lam.shape[0] != n_lam or params.gamma.shape[1] != k
            or params.intercept.shape[0] != 1 or y.shape[0] != rows.indptr.shape[0] - 1
            or sample_weight.shape[0] != y.shape[0]):
        raise ValueError("sgd_epoch: parameter or data shapes disagree")
    acc = state.acc
    if schedule.kind == FTRL and (
            n_dummy or problem.kernel == POLYNOMIAL or schedule.batch_size != 1
            or any(state.z[name].shape != getattr(params, name).shape
                   or state.z[name].dtype != params.P.dtype
                   or not state.z[name].flags.c_contiguous
                   for name in ("intercept", "w", "P", "lam"))):
        raise ValueError("sgd_epoch: FTRL steps one row at a time on models without "
                         "dummies, with z arrays shaped and typed as the parameters")
    if schedule.kind in (ADAGRAD, FTRL) and (
            acc["intercept"].shape != (1,) or acc["w"].shape != (d,)
            or acc["lam"].shape != (n_lam,) or acc["P"].shape != (n_blocks, d, k)
            or acc["gamma"].shape != (n_dummy, k) or state.last_touch.shape != (d,)):
        raise ValueError("sgd_epoch: AdaGrad statistics do not match the parameters")
    if n_threads < 1:
        raise ValueError(f"n_threads must be at least 1, got {n_threads}")
    if order.size and (order.min() < 0 or order.max() >= y.shape[0]):
        raise ValueError("sgd_epoch: row order out of range")


def _sgd_pass(const floating[::1] data, const index_t[::1] indices,
              floating[:, :, ::1] P, rows, problem, params, state, schedule,
              const Py_ssize_t[::1] order, options):
    """:func:`sgd_epoch` for one dtype and index type (checked: _check_pass)."""
    specialised, n_threads = options
    cdef const index_t[::1] indptr = rows.indptr
    cdef const double[::1] y = problem.y
    cdef const double[::1] sample_weight = problem.sample_weight
    cdef floating[::1] intercept = params.intercept
    cdef floating[::1] w = params.w
    cdef const int[::1] degrees = problem.degrees
    cdef floating[:, ::1] gamma = params.gamma
    cdef floating[::1] lam = params.lam
    cdef int kernel = problem.kernel, loss = problem.loss
    cdef double alpha = problem.alpha, beta = problem.beta
    cdef bint fit_intercept = problem.fit_intercept, fit_linear = problem.fit_linear
    cdef bint fit_lam = problem.fit_lam
    cdef int kind = schedule.kind
    cdef double eta0 = schedule.eta0, power_t = schedule.power_t
    cdef Py_ssize_t batch_size = schedule.batch_size
    cdef long long step = state.step
    cdef floating[::1] acc_intercept = state.acc["intercept"]
    cdef floating[::1] acc_w = state.acc["w"]
    cdef floating[:, :, ::1] acc_P = state.acc["P"]
    cdef floating[:, ::1] acc_gamma = state.acc["gamma"]
    cdef floating[::1] acc_lam = state.acc["lam"]
    cdef long long[::1] last_touch = state.last_touch
    cdef Py_ssize_t n_rows = order.shape[0], n_blocks = P.shape[0], d = P.shape[1]
    cdef Py_ssize_t k = P.shape[2], n_dummy = gamma.shape[0]
    cdef Py_ssize_t i, z, b, start, nnz, pos
    cdef Py_ssize_t max_nnz = 0, size_P = n_blocks * d * k
    cdef int max_degree = 1, t
    cdef bint adagrad = kind == ADAGRAD or kind == FTRL, finite = True
    cdef bint direct = batch_size == 1
    # A field-aware model stepping one row at a time takes its pass pair by pair, its
    # threads sharing the rows (_field_aware_share); else threads share mini-batches.
    cdef bint field_pairs = (specialised and direct and kind != FTRL
                             and _takes_pairs(problem, n_blocks, d, k))
    cdef int threads = 1 if direct and not field_pairs else n_threads
    cdef double eta, pred, dl
    cdef Scales sc
    cdef Pass ps
    cdef HotRows hot  # of a field-aware pass shared by threads (its arrays kept here)
    hot_arrays = _set_hot(&hot, rows, order, 2 * (k + 1) * sizeof(floating),
                          threads if field_pairs else 1)
    sc.w = sc.p = 1
    for b in range(degrees.shape[0]):
        max_degree = max(max_degree, degrees[b])
    for i in range(indptr.shape[0] - 1):
        max_nnz = max(max_nnz, indptr[i + 1] - indptr[i])
    cdef Py_ssize_t block = (max_degree + 1) * max(k, 1)
    ps.model.d = d
    ps.model.k = k
    ps.model.n_blocks = n_blocks
    ps.model.n_dummy = n_dummy
    ps.model.kernel = kernel
    ps.model.degrees = &degrees[0]
    cdef const int[::1] fields = _fields_of(problem, d)
    _set_fields(&ps.model, fields, problem.n_fields)
    # The row workspace of each thread and, for mini-batches, its gradient sums.
    cdef RowSums* st = _alloc_row_sums(threads, threads if direct else 0, sizeof(floating),
                                       &ps.model, max_nnz, block, True)
    # The pass for blocks of degree 2 or 3: A_1..A_3 per block.
    cdef floating* work23 = <floating*> malloc((3 * n_blocks * k + 1) * sizeof(floating))
    if st == NULL or work23 == NULL:
        _free_row_sums(st, threads, threads if direct else 0)
        free(work23)
        raise MemoryError("not enough memory for the SGD buffers")
    ps.rows.order = &order[0] if n_rows > 0 else NULL
    ps.rows.n_rows = n_rows
    ps.rows.step_stride = 1
    ps.rows.y = &y[0]
    ps.rows.sample_weight = &sample_weight[0]
    ps.model.intercept = &intercept[0]
    ps.model.w = &w[0] if d > 0 else NULL
    ps.model.P = &P[0, 0, 0] if P.size > 0 else st[0].gP
    ps.model.gamma = &gamma[0, 0] if gamma.size > 0 else NULL
    ps.model.lam = &lam[0] if lam.shape[0] > 0 else st[0].glam
    ps.rule = _rule_of(problem, schedule)
    _set_ftrl_history(&ps.history, state, kind == FTRL, d, P.size)
    ps.history.intercept = &acc_intercept[0] if adagrad else NULL
    ps.history.w = &acc_w[0] if adagrad and d > 0 else NULL
    ps.history.P = &acc_P[0, 0, 0] if adagrad and acc_P.size > 0 else NULL
    ps.history.gamma = &acc_gamma[0, 0] if adagrad and acc_gamma.size > 0 else NULL
    ps.history.lam = &acc_lam[0] if adagrad and k > 0 else NULL
    ps.history.last_touch = &last_touch[0] if adagrad and d > 0 else NULL
    cdef const index_t* ind0 = &indices[0] if indices.shape[0] > 0 else NULL
    cdef const floating* val0 = &data[0] if data.shape[0] > 0 else NULL
    # Factorization machines of degree 2 or 3 (blocks of degree 2 or 3, no dummies, one
    # row per step) have their own pass; the results agree with the general loop up to
    # rounding.
    cdef bint low_degree = (specialised and kernel == ANOVA and n_blocks > 0
                            and kind != FTRL
                            and degrees.shape[0] >= n_blocks and n_dummy == 0 and direct
                            and k > 0 and d > 0 and not problem.row_penalty)
    for b in range(n_blocks if low_degree else 0):
        low_degree = low_degree and (degrees[b] == 2 or degrees[b] == 3)
    cdef int degree2 = 2
    try:
        with nogil:
            pos = 0
            # The plain factorization machine (one block of degree 2) gets its own inlined
            # copy of the pass, with the block count and degree constants: the compiler
            # drops the loop over blocks and the degree branches (~10% of its time).
            if low_degree and n_blocks == 1 and degrees[0] == 2:
                finite = _anova23_pass(val0, ind0, &indptr[0], &ps, 1, &degree2, &step,
                                       work23, &sc)
            elif low_degree:
                finite = _anova23_pass(val0, ind0, &indptr[0], &ps, n_blocks, &degrees[0],
                                       &step, work23, &sc)
            if field_pairs:
                finite = _field_aware_threads(val0, ind0, &indptr[0], &ps, &step, st,
                                              threads, &hot if hot.n_hot else NULL)
            if low_degree or field_pairs:
                pos = n_rows  # the general loops below are skipped
            elif not direct:
                # One parallel region for the whole pass (a region per mini-batch
                # costs more than small mini-batches save): see _batch_pass.
                with parallel(num_threads=threads):
                    _batch_pass(threadid(), polylite_team_size(), val0, ind0, &indptr[0],
                                &ps, &step, st)
                for t in range(threads):
                    finite = finite and st[t].finite
                pos = n_rows
            while pos < n_rows and finite:  # one row per step
                step += 1
                eta = eta0 / _pow_t(step, power_t) if kind == INVSCALING else eta0
                _prefetch_ahead(pos, n_rows, val0, ind0, &indptr[0], &ps)
                i = order[pos]
                start = indptr[i]
                nnz = indptr[i + 1] - start
                pred = _prediction_and_gradient(val0 + start, ind0 + start, nnz,
                                                intercept[0], &ps.model, fit_linear, &sc,
                                                st)
                if not isfinite(pred):
                    finite = False
                    break
                # gP is the gradient in V: pscale times the gradient in P.
                dl = sample_weight[i] * loss_derivative(loss, y[i], pred)
                _apply_row(val0 + start, ind0 + start, nnz, &ps, st, dl, eta, step, &sc)
                if sc.w < 1e-9 or sc.p < 1e-9:
                    _fold_scales(<floating*> ps.model.w, d, <floating*> ps.model.P,
                                 size_P, &sc)
                pos += 1
            # Parameters that overflowed are caught by the caller, which checks every array.
            _fold_scales(<floating*> ps.model.w, d, <floating*> ps.model.P, size_P, &sc)
    finally:
        _free_row_sums(st, threads, threads if direct else 0)
        free(work23)
    return step, bool(finite)


cdef inline void _apply_row(const floating* data, const index_t* ind, Py_ssize_t nnz,
                            const Pass* ps, const RowSums* st, double dl, double eta,
                            long long step, Scales* sc) noexcept nogil:
    """One step on one row (batch_size 1, ``nnz`` values and indices), straight from the
    row's gradient in the workspace ``st`` (times the loss's derivative ``dl``)."""
    cdef floating* intercept = <floating*> ps.model.intercept
    cdef floating* w = <floating*> ps.model.w
    cdef floating* P = <floating*> ps.model.P
    cdef floating* gamma = <floating*> ps.model.gamma
    cdef floating* lam = <floating*> ps.model.lam
    cdef floating* acc_w = <floating*> ps.history.w
    cdef floating* acc_P = <floating*> ps.history.P
    cdef floating* acc_gamma = <floating*> ps.history.gamma
    cdef floating* acc_lam = <floating*> ps.history.lam
    cdef long long* last_touch = ps.history.last_touch
    cdef const floating* gP = <const floating*> st.gP
    cdef const floating* ggamma = <const floating*> st.ggamma
    cdef const floating* glam = <const floating*> st.glam
    cdef Py_ssize_t d = ps.model.d, k = ps.model.k, n_blocks = ps.model.n_blocks
    cdef Py_ssize_t n_dummy = ps.model.n_dummy
    cdef double eta0 = ps.rule.eta0, alpha = ps.rule.alpha, beta = ps.rule.beta
    cdef bint adagrad = ps.rule.schedule == ADAGRAD, fit_linear = ps.rule.fit_linear
    cdef bint fit_lam = ps.rule.fit_lam and ps.model.kernel == POLYNOMIAL
    cdef Py_ssize_t z, j, b, s, r
    cdef double x, elapsed, new_w, new_p, step_p, step_w
    cdef floating* row
    if ps.model.kernel == FIELD_WEIGHTED:  # (the weights of the pairs of fields)
        _field_weight_steps(<floating*> ps.model.lam, ind, nnz, ps, <RowSums*> st, dl,
                            eta)
    if ps.rule.schedule == FTRL:
        _apply_row_ftrl(data, ind, nnz, ps, <RowSums*> st, dl)
        return
    if ps.rule.row_penalty and n_dummy == 0 and not fit_lam:
        _apply_row_penalised(data, ind, nnz, ps, <RowSums*> st, dl, eta)
        return
    if ps.rule.fit_intercept:
        if adagrad:
            adagrad_step(intercept, <floating*> ps.history.intercept, dl, eta0)
        else:
            intercept[0] = intercept[0] - eta * dl
    if adagrad:
        for z in range(nnz):
            j = ind[z]
            x = data[z]
            elapsed = step - last_touch[j]  # steps since the last touch
            last_touch[j] = step
            if fit_linear:
                adagrad_step(&w[j], &acc_w[j], dl * x + alpha * elapsed * w[j], eta0)
            for b in range(n_blocks):
                row = P + (b * d + j) * k
                for s in range(k):
                    adagrad_step(&row[s], &acc_P[(b * d + j) * k + s],
                                  dl * gP[(b * nnz + z) * k + s] + beta * elapsed * row[s],
                                  eta0)
        for r in range(n_dummy * k):
            adagrad_step(&gamma[r], &acc_gamma[r], dl * ggamma[r] + beta * gamma[r], eta0)
        if fit_lam:
            for s in range(k):
                adagrad_step(&lam[s], &acc_lam[s], dl * glam[s] + beta * lam[s], eta0)
        return
    new_w = sc.w * (1 - eta * alpha)
    new_p = sc.p * (1 - eta * beta)
    # V -= eta * (gradient in P) / new_p, and gP = pscale * (gradient in P).
    step_p = eta * dl / (sc.p * new_p)
    step_w = eta * dl / new_w  # one division per step, not per nonzero
    for z in range(nnz):
        j = ind[z]
        if fit_linear:
            w[j] = w[j] - step_w * data[z]
        for b in range(n_blocks):
            row = P + (b * d + j) * k
            for s in range(k):
                row[s] = row[s] - step_p * gP[(b * nnz + z) * k + s]
    for r in range(n_dummy * k):
        gamma[r] = (1 - eta * beta) * gamma[r] - eta * dl * ggamma[r]
    if fit_lam:
        for s in range(k):
            lam[s] = lam[s] - eta * (dl * glam[s] + beta * lam[s])
    sc.w = new_w
    sc.p = new_p


cdef inline double _pow_t(long long step, double power_t) noexcept nogil:
    """step ** power_t, with square roots for the common exponents (exp and log per step
    cost as much as a degree-2 row)."""
    cdef double t = <double> step
    if power_t == 0.25:
        return sqrt(sqrt(t))
    if power_t == 0.5:
        return sqrt(t)
    return exp(power_t * log(t))


cdef void _gradient_share(Py_ssize_t t, Py_ssize_t threads, const floating* data,
                          const index_t* ind, const index_t* indptr, const Pass* ps,
                          RowSums* states) noexcept nogil:
    """Thread t's share of the rows 0..n_rows-1: the weighted loss and gradient of its
    rows, summed in its buffers."""
    cdef RowSums* st = states + t
    # A copy the compiler can keep in registers (the sums' writes cannot reach it).
    cdef Model model = ps.model
    cdef const double* y = ps.rows.y
    cdef const double* sw = ps.rows.sample_weight
    cdef double intercept = (<const floating*> ps.model.intercept)[0]
    cdef int loss = ps.rule.loss
    cdef bint fit_linear = ps.rule.fit_linear
    cdef Py_ssize_t lo, hi, i, start, nnz
    cdef double pred
    cdef Scales unscaled
    unscaled.w = 1
    unscaled.p = 1
    if not thread_range(t, threads, ps.rows.n_rows, &lo, &hi):
        return
    for i in range(lo, hi):
        start = indptr[i]
        nnz = indptr[i + 1] - start
        pred = _prediction_and_gradient(data + start, ind + start, nnz, intercept,
                                        &model, fit_linear, &unscaled, st)
        st.total += sw[i] * loss_value(loss, y[i], pred)
        _add_row(st, sw[i] * loss_derivative(loss, y[i], pred), data + start, ind + start,
                 nnz, &model, &ps.rule, 1.0, False)


cdef void _reduce_share(Py_ssize_t t, Py_ssize_t threads, RowSums* st, int n_sums,
                        Py_ssize_t d, Py_ssize_t size_P) noexcept nogil:
    """Thread t's share of the entries of w and P: the other threads' sums added into
    thread 0's (the output), in thread order."""
    cdef Py_ssize_t lo, hi, r
    if thread_range(t, threads, d, &lo, &hi):
        for r in range(lo, hi):
            st[0].w[r] += _take_w(st + 1, n_sums - 1, r)
    if thread_range(t, threads, size_P, &lo, &hi):
        for r in range(lo, hi):
            st[0].P[r] += _take_P(st + 1, n_sums - 1, r)


def objective_gradient(rows, problem, params, grads, int n_threads=1):
    """sum_i s_i loss(y_i, y_hat_i) over the CSR ``rows`` and its gradient, added into the
    zeroed float64 arrays of ``grads`` (a mapping with the parameters' names: intercept,
    w, P, gamma, lam); ``problem`` a :class:`polylite._engine.problem.Problem` (its
    ``sample_weight`` should sum to 1), ``params`` the parameters.

    One pass over the rows; the penalty is the caller's.  ``n_threads`` threads share the
    rows as contiguous blocks, each summing its block's loss and gradient in its own
    buffers (as large as the parameters, in double; thread 0 uses the ``grads`` arrays);
    the blocks' sums are then added in block order.  So the result is the same from run
    to run, and agrees across thread counts to rounding.
    """
    n_blocks, d, k = params.P.shape
    n, n_dummy = rows.indptr.shape[0] - 1, params.gamma.shape[0]
    shapes = dict(intercept=(1,), w=(d,), P=(n_blocks, d, k), gamma=(n_dummy, k),
                  lam=(_lam_size(problem, k),))
    if (any(np.shape(getattr(params, name)) != shape or np.shape(grads[name]) != shape
            for name, shape in shapes.items() if name != "gamma")
            or params.gamma.shape[1:] != (k,) or np.shape(grads["gamma"]) != (n_dummy, k)
            or problem.y.shape[0] != n or problem.sample_weight.shape[0] != n):
        raise ValueError("objective_gradient: parameter, gradient or data shapes disagree")
    if n_threads < 1:
        raise ValueError(f"n_threads must be at least 1, got {n_threads}")
    return _objective_gradient(rows.data, rows.indices, params.P, rows, problem, params,
                               grads, n_threads)


def _objective_gradient(const floating[::1] data, const index_t[::1] indices,
                        const floating[:, :, ::1] P, rows, problem, params, grads,
                        int n_threads):
    """:func:`objective_gradient` for one dtype and index type (shapes checked)."""
    cdef const index_t[::1] indptr = rows.indptr
    cdef const double[::1] y = problem.y
    cdef const double[::1] sample_weight = problem.sample_weight
    cdef const floating[::1] intercept = params.intercept
    cdef const floating[::1] w = params.w
    cdef const int[::1] degrees = problem.degrees
    cdef const floating[:, ::1] gamma = params.gamma
    cdef const floating[::1] lam = params.lam
    cdef double[::1] g_intercept = grads["intercept"]
    cdef double[::1] g_w = grads["w"]
    cdef double[:, :, ::1] g_P = grads["P"]
    cdef double[:, ::1] g_gamma = grads["gamma"]
    cdef double[::1] g_lam = grads["lam"]
    cdef Py_ssize_t n = indptr.shape[0] - 1, n_blocks = P.shape[0], d = P.shape[1]
    cdef Py_ssize_t k = P.shape[2], n_dummy = gamma.shape[0], size_P = n_blocks * d * k
    cdef Py_ssize_t i, b, r, s, max_nnz = 0
    cdef int max_degree = 1, t
    cdef double total = 0
    cdef int threads = n_threads
    cdef Pass ps
    for b in range(degrees.shape[0]):
        max_degree = max(max_degree, degrees[b])
    for i in range(n):
        max_nnz = max(max_nnz, indptr[i + 1] - indptr[i])
    cdef Py_ssize_t block = (max_degree + 1) * max(k, 1)
    ps.model.d = d
    ps.model.k = k
    ps.model.n_blocks = n_blocks
    ps.model.n_dummy = n_dummy
    ps.model.kernel = problem.kernel
    ps.model.degrees = &degrees[0]
    cdef const int[::1] fields = _fields_of(problem, d)
    _set_fields(&ps.model, fields, problem.n_fields)
    cdef RowSums* st = _alloc_row_sums(threads, 1, sizeof(floating), &ps.model, max_nnz,
                                       block, False)
    if st == NULL:
        raise MemoryError("not enough memory for the gradient workspace")
    # Thread 0 sums straight into the outputs (empty arrays: its workspace, never read).
    st[0].w = &g_w[0] if d > 0 else <double*> st[0].adj
    st[0].P = &g_P[0, 0, 0] if size_P > 0 else <double*> st[0].adj
    st[0].gamma = &g_gamma[0, 0] if n_dummy * k > 0 else <double*> st[0].adj
    st[0].lam = &g_lam[0] if g_lam.shape[0] > 0 else <double*> st[0].adj
    # The parameters are only read (the record's pointers are not const).
    ps.model.intercept = <void*> &intercept[0]
    ps.model.w = <void*> &w[0] if d > 0 else NULL
    ps.model.P = <void*> &P[0, 0, 0] if P.size > 0 else st[0].gP
    ps.model.gamma = <void*> &gamma[0, 0] if gamma.size > 0 else NULL
    ps.model.lam = <void*> &lam[0] if lam.shape[0] > 0 else NULL
    ps.rows.order = NULL
    ps.rows.n_rows = n
    ps.rows.step_stride = 1
    ps.rows.y = &y[0] if n > 0 else NULL
    ps.rows.sample_weight = &sample_weight[0] if n > 0 else NULL
    ps.rule.loss = problem.loss
    ps.rule.fit_linear = problem.fit_linear
    ps.rule.row_penalty = False  # (the caller adds the penalty)
    cdef const index_t* ind0 = &indices[0] if indices.shape[0] > 0 else NULL
    cdef const floating* val0 = &data[0] if data.shape[0] > 0 else NULL
    try:
        with nogil:
            if threads == 1:
                _gradient_share(0, 1, val0, ind0, &indptr[0], &ps, st)
            else:
                for t in prange(threads, num_threads=threads, schedule="static",
                                chunksize=1):
                    _gradient_share(t, threads, val0, ind0, &indptr[0], &ps, st)
                for t in prange(threads, num_threads=threads, schedule="static",
                                chunksize=1):
                    _reduce_share(t, threads, st, threads, d, size_P)
            for t in range(threads):
                total += st[t].total
                g_intercept[0] += st[t].intercept
                for r in range(n_dummy * k if t > 0 else 0):
                    st[0].gamma[r] += st[t].gamma[r]
                for s in range(_n_lam(&ps.model) if t > 0 and (
                        ps.model.kernel == POLYNOMIAL or ps.model.kernel == FIELD_WEIGHTED)
                               else 0):
                    st[0].lam[s] += st[t].lam[s]
    finally:
        _free_row_sums(st, threads, 1)
    return total
