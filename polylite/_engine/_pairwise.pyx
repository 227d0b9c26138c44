"""Stochastic passes of pairwise ranking losses (BPR, WARP) over positive interactions.

A positive is a query row q (the user's part and the context) and an item i; a negative
is another item j of the catalogue, sampled.  Their rows are q + x_i and q + x_j, on
disjoint columns, so every FM score splits over the query and the item part
(:mod:`polylite.recommend`): the ANOVA kernel of degree m gives, per component,

    A_m(q + x) = sum_{t=0..m} A_t(q) A_{m-t}(x),

and the all-subsets kernel S(q + x) = S(q) S(x).  The terms of q alone are the same for
every item, so a pair's score difference needs only the item score

    s(q, x) = <w, x> + sum_blocks sum_s sum_{t<m} A_t(q) A_{m-t}(x)   (ANOVA)
    s(q, x) = <w, x> + sum_s S(q) S(x)                                 (all-subsets)

with the query's A_t computed once per positive (or once per batch of positives of one
query, ``query_batch``) and shared by every negative tried.
The gradient of a loss of s(q, x_i) - s(q, x_j) reaches the query's parameters through
the A_t(q) and each item's through its A_{m-t}(x): the reverse mode of the ANOVA
programme with the other side's values as cotangents (``anova_backward``).

Regularisation is that of the objective's mean over positives: a parameter is penalised
when a step touches it, for every step since it was last touched (AdaGrad: the penalty
gradient times the steps elapsed; SGD: the decay factor to that power), as the
factorization machines' stochastic solvers do.
"""
import numpy as np
from libc.math cimport exp, log, log1p, sqrt, isfinite, pow
from libc.stdint cimport uint64_t, int64_t
from libc.stdlib cimport malloc, free
from cython.parallel cimport parallel, prange, threadid

from ._kernels cimport (floating, floating_row, float_row, const_floating_row, ANOVA,
                        Factors,
                        POLYLITE_PREFETCH, polylite_prefetch_block, anova_forward,
                        anova_table, anova_backward, factors_of, all_subsets_forward,
                        all_subsets_gradient, polylite_barrier, polylite_team_size,
                        thread_range, thread_align, THREAD_ALIGN, adagrad_step)
from ._losses cimport PAIRWISE_BPR, PAIRWISE_WARP

# Rejections of a popularity-drawn negative the user has seen before the draw falls
# back to a uniform one among the unseen items (a user who saw most popular items).
cdef int MAX_REJECTIONS = 32

cdef enum:
    TOTALS_STRIDE = 4   # Totals apart in the per-thread array (4 * 48 bytes)
    # A positive's query row, item row and their parameters sit at random places in
    # memory: request the rows' pointers this far ahead, the rows (their indices) two
    # thirds as far, their parameters a third as far.
    PREFETCH_AHEAD = 12
    # Negatives are drawn this many draws ahead of their use, from one stream per
    # thread (a positive's draws, then the next positive's): a random item's row and
    # parameters are requested when it is drawn, and its features' parameters a third
    # of the way before its use.
    DRAWS_AHEAD = 12
    RING = 16           # > DRAWS_AHEAD
    # Cache lines of a user's seen filter block requested ahead (the whole block of a
    # user of up to 128 seen items at 16 bits each).
    FILTER_LINES = 4
    # Threads claim a chunk's positives in blocks of at most CLAIM_ROWS, and of at most
    # 1 / CLAIMS_PER_THREAD of a thread's even share of the positives still unclaimed
    # (the blocks shrink as the chunk drains), and of at least MIN_CLAIM_ROWS.
    CLAIM_ROWS = 2048
    CLAIMS_PER_THREAD = 4
    MIN_CLAIM_ROWS = 64

cdef enum:
    # The pairwise losses' codes in the loss table.
    BPR = PAIRWISE_BPR
    WARP = PAIRWISE_WARP

cdef enum:
    CONSTANT = 0
    INVSCALING = 1
    ADAGRAD = 2


cdef struct Settings:
    # The model and the pass: named, as the estimator builds them.
    int kernel              # ANOVA or ALL_SUBSETS (polylite._kernels)
    int loss                # BPR or WARP
    int schedule            # CONSTANT, INVSCALING or ADAGRAD
    int max_trials          # WARP: negatives tried per positive
    bint popularity         # negatives drawn by popularity (else uniformly)
    bint fit_linear
    double alpha            # L2 of w, per sample
    double beta             # L2 of P and gamma, per sample
    double eta0
    double power_t
    double margin           # WARP's margin
    Py_ssize_t n_blocks
    Py_ssize_t n_dummy
    Py_ssize_t max_degree
    Py_ssize_t max_query_nnz
    Py_ssize_t max_item_nnz
    bint item_tables        # the backward pass needs items' tables (ANOVA, degree > 2)
    bint degree2            # every block ANOVA of degree 2 (one-feature items' scores
                            # without their values: _one_feature_score)


cdef struct Totals:
    double loss             # sum of weighted losses
    double weight           # sum of the weights of the positives stepped on
    long long updates       # positives that changed the model
    long long trials        # negatives drawn (WARP: all trials)
    long long skipped       # positives without any negative (no step)
    bint finite


include "_pairwise_negatives.pxi"


# ---- scores ----------------------------------------------------------------------------

cdef extern from "_pairwise.h":
    int POLYLITE_PAIR_DOT_SSE2
    double polylite_pair_dot_f32(const float* a, const float* b, float x,
                                 Py_ssize_t k) noexcept nogil
    double polylite_pair_dot_f32_portable(const float* a, const float* b, float x,
                                          Py_ssize_t k) noexcept nogil
    double polylite_pair_dot_f64(const double* a, const double* b, double x,
                                 Py_ssize_t k) noexcept nogil
    void polylite_pair_values1_f32(const float* p, float x, Py_ssize_t k, float* values,
                                   bint top) noexcept nogil
    void polylite_pair_values1_f64(const double* p, double x, Py_ssize_t k,
                                   double* values, bint top) noexcept nogil


cdef inline double _dot_scaled(const floating* a, const floating* b, floating x,
                               Py_ssize_t k) noexcept nogil:
    """sum_s a[s] (x b[s]) (each x b[s] rounded to the values' precision, as a row's
    A_1 holds it) in four partial sums: one running sum would make every addition wait
    for the one before (scores are computed for every negative tried); _pairwise.h."""
    if floating is float:
        return polylite_pair_dot_f32(a, b, x, k)
    else:
        return polylite_pair_dot_f64(a, b, x, k)


cdef inline double _dot(const floating* a, const floating* b, Py_ssize_t k) noexcept nogil:
    """sum_s a[s] b[s], as :func:`_dot_scaled` sums it (x = 1: the products are exact
    and the compiler drops them)."""
    return _dot_scaled(a, b, <floating> 1, k)


cdef inline double _item_score(const Settings* cfg, const int* degrees, Py_ssize_t k,
                               const floating* w, const floating* query_values,
                               const floating* item_values, Py_ssize_t stride,
                               const int64_t* ind, const floating* val,
                               Py_ssize_t nnz) noexcept nogil:
    """s(q, x): the item's linear term and, per block, sum_s sum_{t<m} A_t(q) A_{m-t}(x)
    (all-subsets: sum_s S(q) S(x)).  ``query_values`` and ``item_values`` hold each
    block's A_0..A_m (or S) at blocks ``stride`` apart."""
    cdef double total = 0
    cdef Py_ssize_t b, t, s, z, m
    cdef const floating* aq
    cdef const floating* ax
    if cfg.fit_linear:
        for z in range(nnz):
            total += w[ind[z]] * val[z]
    if cfg.kernel != ANOVA:
        return total + _dot(query_values, item_values, k)
    for b in range(cfg.n_blocks):
        m = degrees[b]
        aq = query_values + b * stride
        ax = item_values + b * stride
        for t in range(m):
            total += _dot(aq + t * k, ax + (m - t) * k, k)
    return total


cdef inline double _one_feature_score(const Settings* cfg, Py_ssize_t d, Py_ssize_t k,
                                      const floating* w, const floating* P,
                                      const floating* query_values, Py_ssize_t stride,
                                      Py_ssize_t j, floating x) noexcept nogil:
    """s(q, x) of an item row of one nonzero (feature j, value x) when every block is
    ANOVA of degree 2 (``cfg.degree2``), without the row's values: there A_1(x) = x p_j
    and A_2(x) = 0, so a block's sum_{t<2} A_t(q) A_{2-t}(x) is A_1(q) . x p_j.  The
    sums are those of :func:`_item_score` on the row's values (the A_0(q) A_2(x) term,
    +0, added as it adds it), so the scores are the same to the last bit (the ids-only
    case: a negative tried costs one k-dot, as its row is one vector)."""
    cdef double total = 0
    cdef Py_ssize_t b
    if cfg.fit_linear:
        total += w[j] * x
    for b in range(cfg.n_blocks):
        total += 0.0
        total += _dot_scaled(query_values + b * stride + k, P + (b * d + j) * k, x, k)
    return total


cdef inline void _values2(const floating* P, Py_ssize_t k, const int64_t* ind,
                          const floating* val, Py_ssize_t nnz, floating* values,
                          bint top=True) noexcept nogil:
    """A_0, A_1, A_2 of a row for a block of degree 2 (no dummies): the dynamic
    programme written out, without the table its general backward pass needs (that of
    degree 2 has a closed form, :func:`_backward2`).  ``top=False`` (a query row) leaves
    A_2 at 0: the query's own A_2 is the same for every item and never enters a score
    difference."""
    cdef Py_ssize_t s, z
    cdef const floating* row
    cdef floating x, q
    if nnz == 1:  # one nonzero (an id): the programme's one step (_pairwise.h)
        if floating is float:
            polylite_pair_values1_f32(P + ind[0] * k, val[0], k, values, top)
        else:
            polylite_pair_values1_f64(P + ind[0] * k, val[0], k, values, top)
        return
    for s in range(k):
        values[s] = 1
        values[k + s] = 0
        values[2 * k + s] = 0
    for z in range(nnz):
        row = P + ind[z] * k
        x = val[z]
        if top:
            for s in range(k):
                q = x * row[s]
                values[2 * k + s] += q * values[k + s]
                values[k + s] += q
        else:
            for s in range(k):
                values[k + s] += x * row[s]


cdef inline void _backward2(const floating* P, Py_ssize_t k, const int64_t* ind,
                            const floating* val, Py_ssize_t nnz, const floating* values,
                            const floating* adj, floating* grad) noexcept nogil:
    """The gradient of c_1 A_1 + c_2 A_2 (cotangents in ``adj``) on the row's support, for
    a block of degree 2: dA_1/dp_j = x_j, dA_2/dp_j = x_j (A_1 - x_j p_j)."""
    cdef Py_ssize_t s, z
    cdef const floating* row
    cdef floating x
    for z in range(nnz):
        row = P + ind[z] * k
        x = val[z]
        for s in range(k):
            grad[z * k + s] = x * (adj[k + s] + adj[2 * k + s] * (values[k + s] - x * row[s]))


cdef inline void _cotangents2(double g, Py_ssize_t k, const floating* P,
                              const Buffers* bufs, Py_ssize_t at, Row p_row,
                              Row n_row) noexcept nogil:
    """A pair's gradients in a block of degree 2 without dummies (its values and
    cotangents at offset ``at`` of ``bufs``' arrays: A_0, A_1, A_2, k apart; factors
    ``P``), g the loss's derivative: the query's A_1 cotangent g (A_1(x_i) - A_1(x_j))
    added to ``q_cot`` (the only one its steps read), and the items' factors' gradients
    (``g_pos``, ``g_neg``) against their A_1's and A_2's cotangents +-g A_1(q) and
    +-g A_0(q), formed in ``adj`` (the same operations as the general cotangents in
    :func:`_pair_step`, on the entries degree 2 reads)."""
    cdef const floating* q_values = <const floating*> bufs.q_values + at
    cdef const floating* p_values = <const floating*> bufs.p_values + at
    cdef const floating* n_values = <const floating*> bufs.n_values + at
    cdef floating* q_cot = <floating*> bufs.q_cot + at
    cdef floating* adj = <floating*> bufs.adj
    cdef Py_ssize_t s
    for s in range(k):
        q_cot[k + s] += g * (p_values[k + s] - n_values[k + s])
    for s in range(k):
        adj[k + s] = g * q_values[k + s]
        adj[2 * k + s] = g * q_values[s]
    _backward2(P, k, p_row.ind, <const floating*> p_row.val, p_row.nnz, p_values, adj,
               <floating*> bufs.g_pos)
    for s in range(k):
        adj[k + s] = -g * q_values[k + s]
        adj[2 * k + s] = -g * q_values[s]
    _backward2(P, k, n_row.ind, <const floating*> n_row.val, n_row.nnz, n_values, adj,
               <floating*> bufs.g_neg)


cdef inline bint _without_values(const Settings* cfg, Py_ssize_t nnz) noexcept nogil:
    """Whether an item row's score is taken without its values
    (:func:`_one_feature_score`)."""
    return cfg.degree2 and nnz == 1


cdef inline double _trial_score(const Settings* cfg, Model model,
                                const floating* q_values, floating* n_values,
                                Py_ssize_t stride, Row row) noexcept nogil:
    """The score of a negative tried (item row ``row``): from its values, computed into
    ``n_values``, or without them (:func:`_without_values`)."""
    cdef const floating* P = <const floating*> model.P
    cdef const floating* w = <const floating*> model.w
    cdef const floating* val = <const floating*> row.val
    if _without_values(cfg, row.nnz):
        return _one_feature_score(cfg, model.d, model.k, w, P, q_values, stride,
                                  row.ind[0], val[0])
    _item_forward(cfg, model.degrees, model.d, model.k, P, row.ind, val, row.nnz,
                  n_values, stride)
    return _item_score(cfg, model.degrees, model.k, w, q_values, n_values, stride,
                       row.ind, val, row.nnz)


cdef inline void _item_forward(const Settings* cfg, const int* degrees, Py_ssize_t d,
                               Py_ssize_t k, const floating* P, const int64_t* ind,
                               const floating* val, Py_ssize_t nnz, floating* values,
                               Py_ssize_t stride) noexcept nogil:
    """Each block's A_0..A_m (or S) of an item row, at blocks ``stride`` apart."""
    cdef Py_ssize_t b
    if cfg.kernel != ANOVA:
        all_subsets_forward(P, k, ind, val, nnz, values)
        return
    for b in range(cfg.n_blocks):
        if degrees[b] == 2:
            _values2(P + b * d * k, k, ind, val, nnz, values + b * stride)
        else:
            anova_forward(P + b * d * k, k, <const floating*> NULL, 0, ind, val, nnz,
                          degrees[b], values + b * stride)


# ---- steps -----------------------------------------------------------------------------

cdef inline double _step_size(const Settings* cfg, long long step) noexcept nogil:
    if cfg.schedule == INVSCALING:
        return cfg.eta0 / pow(<double> step, cfg.power_t)
    return cfg.eta0


cdef inline void _update(floating_row p, floating_row acc, const_floating_row grad,
                         Py_ssize_t k, double reg, double elapsed, double eta,
                         const Settings* cfg, double x=1) noexcept nogil:
    """One step on k parameters: the loss gradient ``x * grad`` and the penalty of the
    steps ``elapsed`` since they were last touched (p, acc and grad never overlap:
    restrict pointers, so the k-loops vectorise without an overlap test)."""
    cdef Py_ssize_t s
    cdef double decay
    if cfg.schedule == ADAGRAD:  # (the gradient rounded to the parameters' precision)
        for s in range(k):
            if floating_row is float_row:
                adagrad_step(<float*> p + s, <float*> acc + s,
                             <float> (x * grad[s] + reg * elapsed * p[s]), cfg.eta0)
            else:
                adagrad_step(<double*> p + s, <double*> acc + s,
                             x * grad[s] + reg * elapsed * p[s], cfg.eta0)
        return
    decay = pow(1 - eta * reg, elapsed) if eta * reg < 1 else 0
    for s in range(k):
        p[s] = p[s] * decay - eta * x * grad[s]


cdef struct Work:
    # One thread's scratch, in units of floating values (offsets into one buffer).
    Py_ssize_t stride           # one block's A_0..A_m (or S): (max_degree + 1) k
    Py_ssize_t query_table      # per block: (n_dummy + max_query_nnz + 1) stride
    Py_ssize_t item_table       # per block: (max_item_nnz + 1) stride
    Py_ssize_t size


cdef inline Work _work_layout(const Settings* cfg, Py_ssize_t k) noexcept nogil:
    cdef Work work
    work.stride = (cfg.max_degree + 1) * k
    work.query_table = (cfg.n_dummy + cfg.max_query_nnz + 1) * work.stride
    work.item_table = (cfg.max_item_nnz + 1) * work.stride
    work.size = (cfg.n_blocks * (work.query_table + 2 * work.item_table + 4 * work.stride)
                 + work.stride + (cfg.n_dummy + cfg.max_query_nnz
                                  + 2 * cfg.max_item_nnz + 1) * k)
    return work


cdef inline void _scale_rows(floating* grad, Py_ssize_t rows, const floating* coef,
                             Py_ssize_t k) noexcept nogil:
    cdef Py_ssize_t z, s
    for z in range(rows):
        for s in range(k):
            grad[z * k + s] = grad[z * k + s] * coef[s]


cdef inline double _elapsed(const long long* last_touch, Py_ssize_t j,
                            long long own) noexcept nogil:
    """The thread's steps since it last touched feature j (each thread keeps its own
    count: the threads' counts add up to every step of the epoch, and no thread writes
    another's, which on shared features would bounce cache lines between the cores)."""
    return <double> (own - last_touch[j])


cdef struct Model:
    # The parameters a pass steps on, shared by its threads without locks, and their
    # shape (``floating`` arrays, kept as void*: a struct cannot hold a fused type; the
    # passes cast them to their floating type).  The steps take it by value, as they
    # take a row: a copy of their own, which no store to the parameters can change, so
    # that its fields stay in registers.
    void* w                 # (d,) linear weights
    void* P                 # (n_blocks, d, k) factors, C order
    void* gamma             # (n_dummy, k) the shared model's dummies, or NULL (none)
    void* acc_w             # AdaGrad's sums of squared gradients of w, or NULL (SGD)
    void* acc_P             # those of P, or NULL
    void* acc_gamma         # those of gamma, or NULL
    const int* degrees      # (n_blocks,) each block's degree
    Py_ssize_t d            # features
    Py_ssize_t k            # components


cdef struct Row:
    # One sparse row, a query's or an item's (its values ``floating``, kept as void*).
    const int64_t* ind      # its nonzeros' columns, increasing
    const void* val         # their values
    Py_ssize_t nnz


cdef struct Step:
    # One positive's pair, as the pass found it.
    double g                # d loss / d (s(q, x_i) - s(q, x_j)), times the weight
    long long own           # the thread's steps in this epoch, and those at which it
    const long long* last_touch  # last touched each feature (for the penalties)
    double eta


cdef void _apply_items(const Settings* cfg, const Step* st, Model model,
                       Py_ssize_t b, Row p_row, floating* gp, Row n_row,
                       floating* gn) noexcept nogil:
    """The steps on block b's factors of the positive's and the negative's item
    features (gradients ``gp`` and ``gn``, a row of k per nonzero), and with block 0 on
    their linear weights, a feature in both rows stepping once on the sum of its two
    gradients."""
    cdef Py_ssize_t k = model.k, d = model.d
    cdef floating* w = <floating*> model.w
    cdef floating* acc_w = <floating*> model.acc_w
    cdef floating* Pb = <floating*> model.P + b * d * k
    cdef floating* acc_Pb = (<floating*> model.acc_P + b * d * k if model.acc_P != NULL
                             else NULL)
    cdef bint linear = cfg.fit_linear and b == 0
    cdef const long long* last_touch = st.last_touch
    cdef const int64_t* p_ind = p_row.ind
    cdef const int64_t* n_ind = n_row.ind
    cdef const floating* p_val = <const floating*> p_row.val
    cdef const floating* n_val = <const floating*> n_row.val
    cdef Py_ssize_t p_nnz = p_row.nnz, n_nnz = n_row.nnz
    cdef Py_ssize_t zp = 0, zn = 0, j, s
    cdef double elapsed, xp, xn
    cdef floating gw
    cdef floating* grad
    while zp < p_nnz or zn < n_nnz:
        if zn >= n_nnz or (zp < p_nnz and p_ind[zp] < n_ind[zn]):
            j, xp, xn, grad = p_ind[zp], p_val[zp], 0, gp + zp * k
            zp += 1
        elif zp >= p_nnz or n_ind[zn] < p_ind[zp]:
            j, xp, xn, grad = n_ind[zn], 0, n_val[zn], gn + zn * k
            zn += 1
        else:
            j, xp, xn, grad = p_ind[zp], p_val[zp], n_val[zn], gp + zp * k
            for s in range(k):
                grad[s] = grad[s] + gn[zn * k + s]
            zp += 1
            zn += 1
        elapsed = _elapsed(last_touch, j, st.own)
        _update(Pb + j * k, acc_Pb + j * k if acc_Pb != NULL else NULL, grad, k,
                cfg.beta, elapsed, st.eta, cfg)
        if linear:
            gw = <floating> (st.g * (xp - xn))
            _update(w + j, acc_w + j if acc_w != NULL else NULL, &gw, 1, cfg.alpha,
                    elapsed, st.eta, cfg)


cdef void _query_steps(const Settings* cfg, const Step* st, Model model,
                       Py_ssize_t b, Row query, const floating* grad_rows,
                       const floating* shared, const floating* g_gamma,
                       Py_ssize_t n_dummy) noexcept nogil:
    """The steps on block b's factor rows of the query: gradients ``grad_rows`` (a
    row per nonzero), or x_j ``shared`` (one row for all), and on the first
    ``n_dummy`` dummies (gradients ``g_gamma``)."""
    cdef Py_ssize_t k = model.k, d = model.d
    cdef floating* Pb = <floating*> model.P + b * d * k
    cdef floating* acc_Pb = (<floating*> model.acc_P + b * d * k if model.acc_P != NULL
                             else NULL)
    cdef floating* gamma = <floating*> model.gamma
    cdef floating* acc_gamma = <floating*> model.acc_gamma
    cdef const long long* last_touch = st.last_touch
    cdef const int64_t* q_ind = query.ind
    cdef const floating* q_val = <const floating*> query.val
    cdef Py_ssize_t q_nnz = query.nnz
    cdef Py_ssize_t z, j
    for z in range(q_nnz):
        j = q_ind[z]
        if shared != NULL:
            _update(Pb + j * k, acc_Pb + j * k if acc_Pb != NULL else NULL, shared, k,
                    cfg.beta, _elapsed(last_touch, j, st.own), st.eta, cfg, q_val[z])
        else:
            _update(Pb + j * k, acc_Pb + j * k if acc_Pb != NULL else NULL,
                    grad_rows + z * k, k, cfg.beta, _elapsed(last_touch, j, st.own),
                    st.eta, cfg)
    for z in range(n_dummy):
        _update(gamma + z * k, acc_gamma + z * k if acc_gamma != NULL else NULL,
                g_gamma + z * k, k, cfg.beta, _elapsed(last_touch, d, st.own), st.eta,
                cfg)


cdef void _touch(long long* last_touch, const int64_t* ind, Py_ssize_t nnz,
                 long long step) noexcept nogil:
    cdef Py_ssize_t z
    for z in range(nnz):
        last_touch[ind[z]] = step


cdef inline void _forward(const Settings* cfg, Model model, Row row,
                          bint dummies, floating* tables, Py_ssize_t table_size,
                          floating* values, Py_ssize_t stride) noexcept nogil:
    """One row's tables (ANOVA: the programme's states, for the backward pass, at
    blocks ``table_size`` apart) and each block's final A_0..A_m (all-subsets: S) into
    ``values`` (at blocks ``stride`` apart); the shared model's dummies go with the
    query (``dummies``)."""
    cdef const floating* P = <const floating*> model.P
    cdef const floating* gamma = <const floating*> model.gamma
    cdef const int* degrees = model.degrees
    cdef Py_ssize_t d = model.d, k = model.k
    cdef const int64_t* ind = row.ind
    cdef const floating* val = <const floating*> row.val
    cdef Py_ssize_t nnz = row.nnz
    cdef Py_ssize_t b, s, n_dummy, m
    if cfg.kernel != ANOVA:
        all_subsets_forward(P, k, ind, val, nnz, values)
        return
    for b in range(cfg.n_blocks):
        n_dummy = cfg.n_dummy if (dummies and b == 0) else 0
        m = degrees[b]
        if m == 2 and n_dummy == 0:  # no table: the backward pass has a closed form
            _values2(P + b * d * k, k, ind, val, nnz, values + b * stride, not dummies)
            continue
        anova_table(P + b * d * k, k, gamma if n_dummy > 0 else <const floating*> NULL,
                    n_dummy, ind, val, nnz, m, tables + b * table_size)
        for s in range((m + 1) * k):
            values[b * stride + s] = tables[b * table_size + (n_dummy + nnz) * (m + 1) * k + s]


cdef struct Batch:
    # The positives of one query row visited together (``query_batch``): the query's
    # values are computed at its first positive, its parameters step at its last on the
    # sum of the batch's gradients.
    bint pending            # a positive of the batch stepped: the query steps at its end
    long long own           # the thread's steps at that positive (the penalties)
    double eta


cdef struct Buffers:
    # One thread's scratch (Work) as named arrays (untyped: a struct cannot hold a fused
    # type; the passes cast them to their floating type).
    void* q_tables
    void* p_tables
    void* n_tables
    void* q_values
    void* p_values
    void* n_values
    void* adj
    void* q_cot             # the batch's summed cotangents of the query's values
    void* g_gamma
    void* g_query
    void* g_pos
    void* g_neg


cdef inline Buffers _buffers(floating* buf, const Settings* cfg, const Work* work,
                             Py_ssize_t k) noexcept nogil:
    cdef Buffers out
    cdef Py_ssize_t nb = cfg.n_blocks, stride = work.stride
    cdef floating* at = buf
    out.q_tables = at
    at += nb * work.query_table
    out.p_tables = at
    at += nb * work.item_table
    out.n_tables = at
    at += nb * work.item_table
    out.q_values = at
    at += nb * stride
    out.p_values = at
    at += nb * stride
    out.n_values = at
    at += nb * stride
    out.q_cot = at
    at += nb * stride
    out.adj = at
    at += stride
    out.g_gamma = at
    at += cfg.n_dummy * k
    out.g_query = at
    at += cfg.max_query_nnz * k
    out.g_pos = at
    at += cfg.max_item_nnz * k
    out.g_neg = at
    return out


cdef struct Ahead:
    # The chunk's positives and items, as the passes read them, and the negatives (the
    # positives still to come are requested PREFETCH_AHEAD ahead).
    const int64_t* q_row
    const int64_t* q_ptr
    const int64_t* q_ind
    const int64_t* positive
    const int64_t* user
    const double* weight
    const int64_t* i_ptr
    const int64_t* i_ind
    const Negatives* negatives
    const unsigned char* batch_end  # a positive ends its query's batch
    Py_ssize_t end


cdef struct Thread:
    # One thread's state in a pass, as its steps on positives see it (every field its
    # own: no thread writes another's; by value, as Model).
    long long* last_touch   # its step at its last touch of each feature (d + 1: the
                            # last for the dummies)
    long long own           # its steps in this epoch so far
    Draws* draws            # its stream of negatives
    const Buffers* bufs     # its scratch
    Batch* batch            # the query batch under way
    Totals* totals          # its totals


cdef inline void _query_forward(const Settings* cfg, Model model,
                                const Work* work, const Buffers* bufs, Batch* batch,
                                const int64_t* q_ind, const floating* q_val,
                                Py_ssize_t q_nnz) noexcept nogil:
    """A batch's start: the values (and tables) of its query row (``q_nnz`` nonzeros,
    columns ``q_ind``, values ``q_val``), shared by its positives, and its cotangents
    at 0."""
    cdef Py_ssize_t s
    cdef floating* q_cot = <floating*> bufs.q_cot
    cdef Row query
    query.ind, query.val, query.nnz = q_ind, q_val, q_nnz
    _forward(cfg, model, query, True, <floating*> bufs.q_tables, work.query_table,
             <floating*> bufs.q_values, work.stride)
    for s in range(cfg.n_blocks * work.stride):
        q_cot[s] = 0
    batch.pending = False


# The step on one positive is inlined in its thread's loop (GCC, Clang; other compilers
# decide for themselves): the thread's copy of the model and its draws then stay in
# registers from one positive to the next (as a call, it cost the ranking passes 1-2%
# more instructions).
cdef extern from *:
    """
    #if defined(__GNUC__)
    #define POLYLITE_INLINED_VOID __attribute__((always_inline)) void
    #else
    #define POLYLITE_INLINED_VOID void
    #endif
    """
    ctypedef void inlined_void "POLYLITE_INLINED_VOID"


# Threads claim a chunk's positives a block at a time from a shared counter (the block
# start), not as fixed shares: a thread held up (by another process on its core, or by
# positives that draw many negatives) then delays the end of the chunk by one block at
# most, not by the rest of its share; and the blocks shrink as the chunk drains (a
# share of what is left, as OpenMP's guided schedule), so that the threads finish it
# nearly together.  A block's size comes from a look at the counter that may be
# stale (another thread claiming meanwhile): the claim itself is atomic, so blocks
# never overlap, and one that reaches past the end is cut there.
cdef extern from *:
    """
    static inline long long polylite_claim(long long* next, long long total,
                                           long long most, long long least,
                                           long long parts, long long* size) {
        long long seen, got, n;
    #ifdef _OPENMP
        _Pragma("omp atomic read")
    #endif
        seen = *next;
        n = (total - seen) / parts;
        n = n > most ? most : (n < least ? least : n);
    #ifdef _OPENMP
        _Pragma("omp atomic capture")
    #endif
        { got = *next; *next += n; }
        *size = n;
        return got;
    }
    """
    long long polylite_claim(long long* next, long long total, long long most,
                             long long least, long long parts,
                             long long* size) noexcept nogil


cdef inline inlined_void _pair_step(const Settings* cfg, Model model, const Work* work,
                                    Thread th, const Ahead* a, const floating* i_data,
                                    Py_ssize_t pos, long long step) noexcept nogil:
    """The chunk's positive ``pos`` (item rows of values ``i_data``), the pass's step
    ``step``, against its batch's query values: the positive's score, negatives drawn
    (BPR: one; WARP: until one violates the margin), then the steps on the two items'
    parameters, the query's share of the gradient added to the batch's cotangents.  A
    score that is not finite sets the thread's totals' ``finite`` to False, and nothing
    steps."""
    cdef const int* degrees = model.degrees
    cdef Py_ssize_t d = model.d, k = model.k
    cdef floating* w = <floating*> model.w
    cdef floating* P = <floating*> model.P
    cdef floating* acc_P = <floating*> model.acc_P
    cdef long long* last_touch = th.last_touch
    cdef long long own = th.own
    cdef Batch* batch = th.batch
    cdef Totals* totals = th.totals
    cdef const Buffers* bufs = th.bufs
    cdef const Negatives* negatives = a.negatives
    cdef const int64_t* i_ind = a.i_ind
    cdef const int64_t* i_ptr = a.i_ptr
    cdef Py_ssize_t positive = a.positive[pos], user = a.user[pos]
    cdef double weight = a.weight[pos]
    cdef Py_ssize_t nb = cfg.n_blocks, stride = work.stride
    cdef Factors block
    cdef floating* q_values = <floating*> bufs.q_values
    cdef floating* p_values = <floating*> bufs.p_values
    cdef floating* n_values = <floating*> bufs.n_values
    cdef floating* p_tables = <floating*> bufs.p_tables
    cdef floating* n_tables = <floating*> bufs.n_tables
    cdef floating* adj = <floating*> bufs.adj
    cdef floating* q_cot = <floating*> bufs.q_cot
    cdef floating* g_pos = <floating*> bufs.g_pos
    cdef floating* g_neg = <floating*> bufs.g_neg
    cdef const int64_t* p_ind = i_ind + i_ptr[positive]
    cdef const floating* p_val = i_data + i_ptr[positive]
    cdef Py_ssize_t p_nnz = i_ptr[positive + 1] - i_ptr[positive]
    cdef const int64_t* n_ind = NULL
    cdef const floating* n_val = NULL
    cdef Py_ssize_t n_nnz = 0, negative = -1, trials = 0, n_candidates, b, t, s, m
    cdef double score_pos, score_neg = 0, delta, loss, rank_weight
    cdef Step st
    cdef Row p_row, n_row
    cdef floating* Pb
    cdef bint finite = True
    # The draws in a copy over the trials (through th.draws, stores reload them).
    cdef Draws draws = th.draws[0]
    n_candidates = negatives.n_items - (negatives.seen_ptr[user + 1] - negatives.seen_ptr[user])
    if n_candidates <= 0:
        totals.skipped += 1
        return
    p_row.ind, p_row.val, p_row.nnz = p_ind, p_val, p_nnz
    _forward(cfg, model, p_row, False, p_tables, work.item_table, p_values, stride)
    score_pos = _item_score(cfg, degrees, k, w, q_values, p_values, stride, p_ind, p_val,
                            p_nnz)
    if not isfinite(score_pos):
        totals.finite = False
        return
    # Negatives: the scores of those tried need only their final values.
    while trials < (cfg.max_trials if cfg.loss == WARP else 1):
        trials += 1
        negative = _negative(&draws, user, i_data, P, nb, d, k)
        n_ind, n_val = i_ind + i_ptr[negative], i_data + i_ptr[negative]
        n_nnz = i_ptr[negative + 1] - i_ptr[negative]
        n_row.ind, n_row.val, n_row.nnz = n_ind, n_val, n_nnz
        score_neg = _trial_score(cfg, model, q_values, n_values, stride, n_row)
        if not isfinite(score_neg):
            finite = False
            break
        if cfg.loss == BPR or score_neg > score_pos - cfg.margin:
            break
        negative = -1
    th.draws.used, th.draws.rng = draws.used, draws.rng  # (the ring: written in place)
    if not finite:
        totals.finite = False
        return
    totals.trials += trials
    if negative < 0:  # WARP: no violation among the trials
        return
    _prefetch_row(n_ind, n_nnz, P, acc_P, last_touch, nb, d, k)  # its step's state
    delta = score_pos - score_neg
    if cfg.loss == BPR:
        # -log sigmoid(delta), and its derivative -sigmoid(-delta), without overflow.
        loss = log1p(exp(-delta)) if delta > 0 else -delta + log1p(exp(delta))
        st.g = -weight / (1 + exp(delta))
    else:
        # The rank of the positive among the candidates, estimated from the trials.
        rank_weight = _harmonic(max(n_candidates // trials, 1))
        loss = rank_weight * (cfg.margin - delta)
        st.g = -weight * rank_weight
    totals.loss += weight * loss
    totals.updates += 1
    st.own = own
    st.last_touch = last_touch
    st.eta = _step_size(cfg, step)
    batch.pending, batch.own, batch.eta = True, own, st.eta
    if cfg.item_tables or _without_values(cfg, n_nnz):  # the chosen negative's tables
        # (the trials kept its values), or its values (its score went without them)
        _forward(cfg, model, n_row, False, n_tables, work.item_table, n_values, stride)
    for b in range(nb):
        m = degrees[b] if cfg.kernel == ANOVA else 0
        Pb = P + b * d * k
        if cfg.kernel == ANOVA and m == 2 and not (b == 0 and cfg.n_dummy > 0):
            _cotangents2(st.g, k, Pb, bufs, b * stride, p_row, n_row)
        elif cfg.kernel == ANOVA:
            # Cotangents: of the query's A_t, g (A_{m-t}(x_i) - A_{m-t}(x_j)) (summed
            # over the batch); of an item's A_t, +-g A_{m-t}(q).
            for t in range(m + 1):
                for s in range(k):
                    q_cot[b * stride + t * k + s] += st.g * (
                        p_values[b * stride + (m - t) * k + s]
                        - n_values[b * stride + (m - t) * k + s])
            for t in range(m + 1):
                for s in range(k):
                    adj[t * k + s] = st.g * q_values[b * stride + (m - t) * k + s]
            if m == 2:
                _backward2(Pb, k, p_ind, p_val, p_nnz, p_values + b * stride, adj, g_pos)
            else:
                block = factors_of(Pb, NULL, 0, k)
                anova_backward(&block, p_ind, p_val, p_nnz, m,
                               p_tables + b * work.item_table, adj, g_pos,
                               <floating*> NULL)
            for t in range(m + 1):
                for s in range(k):
                    adj[t * k + s] = -st.g * q_values[b * stride + (m - t) * k + s]
            if m == 2:
                _backward2(Pb, k, n_ind, n_val, n_nnz, n_values + b * stride, adj, g_neg)
            else:
                block = factors_of(Pb, NULL, 0, k)
                anova_backward(&block, n_ind, n_val, n_nnz, m,
                               n_tables + b * work.item_table, adj, g_neg,
                               <floating*> NULL)
        else:
            # S(q + x) = S(q) S(x): dS(q)/dp times g (S(x_i) - S(x_j)) (summed over the
            # batch), dS(x)/dp times +-g S(q).  ``adj`` is the suffix workspace, the
            # tables the prefixes.
            all_subsets_gradient(P, k, p_ind, p_val, p_nnz, p_tables, adj, g_pos)
            all_subsets_gradient(P, k, n_ind, n_val, n_nnz, n_tables, adj, g_neg)
            for s in range(k):
                q_cot[s] += st.g * (p_values[s] - n_values[s])
            for s in range(k):
                adj[s] = st.g * q_values[s]
            _scale_rows(g_pos, p_nnz, adj, k)
            for s in range(k):
                adj[s] = -st.g * q_values[s]
            _scale_rows(g_neg, n_nnz, adj, k)
        _apply_items(cfg, &st, model, b, p_row, g_pos, n_row, g_neg)
    _touch(last_touch, p_ind, p_nnz, own)
    _touch(last_touch, n_ind, n_nnz, own)


cdef void _query_step(const Settings* cfg, Model model, const Work* work,
                      const Buffers* bufs, const Batch* batch, long long* last_touch,
                      const int64_t* q_ind, const floating* q_val,
                      Py_ssize_t q_nnz) noexcept nogil:
    """A batch's end: the steps on the parameters of its query row (``q_nnz``
    nonzeros, columns ``q_ind``, values ``q_val``), the gradient of its values against
    the batch's summed cotangents (the reverse mode is linear in them, so one backward
    pass serves every positive of the batch)."""
    cdef const int* degrees = model.degrees
    cdef Py_ssize_t d = model.d, k = model.k
    cdef floating* P = <floating*> model.P
    cdef floating* gamma = <floating*> model.gamma
    cdef Py_ssize_t nb = cfg.n_blocks, stride = work.stride, b, m, n_dummy
    cdef Factors block
    cdef floating* q_cot = <floating*> bufs.q_cot
    cdef floating* g_query = <floating*> bufs.g_query
    cdef floating* g_gamma = <floating*> bufs.g_gamma
    cdef floating* Pb
    cdef Step st
    cdef Row query
    if not batch.pending:
        return
    query.ind, query.val, query.nnz = q_ind, q_val, q_nnz
    st.own, st.eta, st.last_touch = batch.own, batch.eta, last_touch
    for b in range(nb):
        Pb = P + b * d * k
        if cfg.kernel != ANOVA:
            all_subsets_gradient(P, k, q_ind, q_val, q_nnz, <floating*> bufs.q_tables,
                                 <floating*> bufs.adj, g_query)
            _scale_rows(g_query, q_nnz, q_cot, k)
            _query_steps(cfg, &st, model, b, query, g_query, NULL, g_gamma, 0)
            continue
        m = degrees[b]
        n_dummy = cfg.n_dummy if b == 0 else 0
        if m == 2 and n_dummy == 0:
            # The gradient at degree 2 is x_j c_1, c_1 = q_cot[k:2k]: formed in each
            # step, not written out first.
            _query_steps(cfg, &st, model, b, query, NULL, q_cot + b * stride + k,
                         g_gamma, 0)
        else:
            block = factors_of(Pb, gamma if n_dummy > 0 else NULL, n_dummy, k)
            anova_backward(&block, q_ind, q_val, q_nnz, m,
                           <floating*> bufs.q_tables + b * work.query_table,
                           q_cot + b * stride, g_query, g_gamma)
            _query_steps(cfg, &st, model, b, query, g_query, NULL, g_gamma, n_dummy)
    _touch(last_touch, q_ind, q_nnz, batch.own)
    last_touch[d] = batch.own  # the dummies


cdef inline void _prefetch_row(const int64_t* ind, Py_ssize_t nnz, const floating* P,
                               const floating* acc_P, const long long* last_touch,
                               Py_ssize_t n_blocks, Py_ssize_t d, Py_ssize_t k) noexcept nogil:
    """Request the factor rows (both ends: a row may straddle two cache lines),
    AdaGrad's sums and the last touches of a row's features (``acc_P``,
    ``last_touch``: NULL for none)."""
    cdef Py_ssize_t z, b, j
    for z in range(nnz):
        j = ind[z]
        if last_touch != NULL:
            POLYLITE_PREFETCH(last_touch + j)
        for b in range(n_blocks):
            POLYLITE_PREFETCH(P + (b * d + j) * k)
            POLYLITE_PREFETCH(P + (b * d + j) * k + k - 1)
            if acc_P != NULL:
                POLYLITE_PREFETCH(acc_P + (b * d + j) * k)
                POLYLITE_PREFETCH(acc_P + (b * d + j) * k + k - 1)


cdef inline void _prefetch_ahead(Py_ssize_t pos, const Ahead* a, const floating* q_data,
                                 const floating* P, const floating* acc_P,
                                 const long long* last_touch, Py_ssize_t n_blocks,
                                 Py_ssize_t d, Py_ssize_t k) noexcept nogil:
    """The three stages of PREFETCH_AHEAD for the positives after ``pos``: the rows'
    pointers, the rows, then their parameters, of the query and the positive item, and
    the user's seen items (the negatives are requested as they are drawn: Draws)."""
    cdef Py_ssize_t r, u
    cdef const Negatives* neg = a.negatives
    if pos + PREFETCH_AHEAD < a.end:
        POLYLITE_PREFETCH(a.q_ptr + a.q_row[pos + PREFETCH_AHEAD])
        POLYLITE_PREFETCH(a.i_ptr + a.positive[pos + PREFETCH_AHEAD])
        if neg.seen_filter != NULL:
            POLYLITE_PREFETCH(neg.filter_ptr + a.user[pos + PREFETCH_AHEAD])
        elif neg.seen_bits == NULL:
            POLYLITE_PREFETCH(neg.seen_ptr + a.user[pos + PREFETCH_AHEAD])
    if pos + 2 * PREFETCH_AHEAD // 3 < a.end:
        if a.batch_end[pos + 2 * PREFETCH_AHEAD // 3 - 1]:
            # A batch's whole query row: with implicit feedback it spans many cache
            # lines.
            r = a.q_row[pos + 2 * PREFETCH_AHEAD // 3]
            polylite_prefetch_block(a.q_ind + a.q_ptr[r],
                                    (a.q_ptr[r + 1] - a.q_ptr[r]) * sizeof(int64_t))
            polylite_prefetch_block(q_data + a.q_ptr[r],
                                    (a.q_ptr[r + 1] - a.q_ptr[r]) * sizeof(floating))
        POLYLITE_PREFETCH(a.i_ind + a.i_ptr[a.positive[pos + 2 * PREFETCH_AHEAD // 3]])
        u = a.user[pos + 2 * PREFETCH_AHEAD // 3]
        if neg.seen_filter != NULL:  # the user's filter block, its first FILTER_LINES
            polylite_prefetch_block(neg.seen_filter + neg.filter_ptr[u], min(
                (neg.filter_ptr[u + 1] - neg.filter_ptr[u]) * sizeof(uint64_t),
                FILTER_LINES * 64))
        elif neg.seen_bits == NULL:  # the start of the user's list, which a search reads
            POLYLITE_PREFETCH(neg.seen + neg.seen_ptr[u])
    if pos + PREFETCH_AHEAD // 3 < a.end:
        if a.batch_end[pos + PREFETCH_AHEAD // 3 - 1]:  # a batch's query: its parameters
            r = a.q_row[pos + PREFETCH_AHEAD // 3]
            _prefetch_row(a.q_ind + a.q_ptr[r], a.q_ptr[r + 1] - a.q_ptr[r], P, acc_P,
                          last_touch, n_blocks, d, k)
        r = a.positive[pos + PREFETCH_AHEAD // 3]
        _prefetch_row(a.i_ind + a.i_ptr[r], a.i_ptr[r + 1] - a.i_ptr[r], P, acc_P,
                      last_touch, n_blocks, d, k)


cdef bint _rows_in_range(const int64_t[::1] query_row, Py_ssize_t n_query,
                         const int64_t[::1] positive, Py_ssize_t n_items,
                         const int64_t[::1] user, Py_ssize_t n_users) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(query_row.shape[0]):
        if not (0 <= query_row[i] < n_query and 0 <= positive[i] < n_items
                and 0 <= user[i] < n_users):
            return False
    return True


cdef struct Pass:
    # What every thread of a pass reads (the rows' values, typed, travel beside it).
    const Settings* cfg
    const Model* model
    Py_ssize_t n_rows
    long long step0
    bint flush
    Py_ssize_t n_threads    # the threads asked for (rows of last_touch)
    const uint64_t* seeds
    long long* own_steps
    long long* last_touch   # n_threads x (d + 1)
    Totals* totals
    long long* next_row     # the first positive no thread has claimed yet (shared)
    const Work* work
    const Ahead* ahead      # the positives and items of the chunk, and the negatives


cdef void _thread_pass(int t, int threads, const Pass* ps, const floating* q_data,
                       const floating* i_data) noexcept nogil:
    """Thread t's share of a pass (of the query rows' values ``q_data`` and the item
    rows' ``i_data``): the blocks of the chunk's positives it claims (one thread: the
    whole chunk, in order), with its own random stream, draws, scratch and touch counts
    (every local here is the thread's own), then its share of the epoch's settling."""
    cdef const Settings* cfg = ps.cfg
    cdef Model model = ps.model[0]  # the thread's copy (see Model)
    cdef const floating* P = <const floating*> model.P
    cdef const floating* acc_P = <const floating*> model.acc_P
    cdef Py_ssize_t d = model.d, k = model.k, lo, hi, pos, row, q_start = 0
    cdef Py_ssize_t q_nnz = 0
    cdef long long block, most
    cdef Thread th
    cdef Buffers bufs
    cdef Batch batch
    cdef Ahead ahead = ps.ahead[0]
    cdef const Ahead* a = ps.ahead
    cdef Py_ssize_t ring[RING]
    cdef Draws draws
    # The scratch on cache lines of its own: threads' allocations can be neighbours,
    # and the scratch is rewritten at every positive (see thread_align).
    cdef void* raw = malloc(ps.work.size * sizeof(floating) + 2 * THREAD_ALIGN)
    cdef floating* buf = <floating*> thread_align(raw) if raw != NULL else NULL
    th.last_touch = ps.last_touch + t * (d + 1)
    th.own = ps.own_steps[t]
    th.totals = &ps.totals[t * TOTALS_STRIDE]
    th.draws, th.bufs, th.batch = &draws, &bufs, &batch
    draws.ring, draws.negatives = ring, a.negatives
    draws.i_ptr, draws.i_ind = a.i_ptr, a.i_ind
    if buf == NULL:
        th.totals.finite = False
    else:
        _seed(&draws.rng, ps.seeds[t])
        _start_draws(&draws)
        bufs = _buffers(buf, cfg, ps.work, k)
    most = ps.n_rows if threads == 1 else CLAIM_ROWS  # (one thread: the whole chunk)
    while buf != NULL and th.totals.finite:
        lo = polylite_claim(ps.next_row, ps.n_rows, most, min(most, MIN_CLAIM_ROWS),
                            CLAIMS_PER_THREAD * threads if threads > 1 else 1, &block)
        if lo >= ps.n_rows:
            break
        hi = min(lo + block, ps.n_rows)
        ahead.end = hi
        for pos in range(lo, hi):
            _prefetch_ahead(pos, &ahead, q_data, P, acc_P, th.last_touch, cfg.n_blocks,
                            d, k)
            th.own = th.own + 1
            if pos == lo or a.batch_end[pos - 1]:
                # The batch's query row is its first positive's (the others' are equal).
                row = a.q_row[pos]
                q_start, q_nnz = a.q_ptr[row], a.q_ptr[row + 1] - a.q_ptr[row]
                _query_forward(cfg, model, ps.work, &bufs, &batch, a.q_ind + q_start,
                               q_data + q_start, q_nnz)
            _pair_step(cfg, model, ps.work, th, a, i_data, pos, ps.step0 + pos + 1)
            if not th.totals.finite:
                break
            th.totals.weight += a.weight[pos]
            if pos == hi - 1 or a.batch_end[pos]:
                _query_step(cfg, model, ps.work, &bufs, &batch, th.last_touch,
                            a.q_ind + q_start, q_data + q_start, q_nnz)
    ps.own_steps[t] = th.own
    if ps.flush:
        # Every thread's steps are counted before any thread settles a feature.
        polylite_barrier()
        if buf != NULL:
            _settle(cfg, model, ps, t, threads, _step_size(cfg, ps.step0 + ps.n_rows),
                    buf)
    free(raw)


cdef void _settle(const Settings* cfg, Model model, const Pass* ps, int t,
                  int threads, double eta, floating* zeros) noexcept nogil:
    """The penalty of the steps since each feature was last touched, for thread t's
    share (of ``threads``) of the features (the last "feature" is the dummies), at the
    end of an epoch, at step size ``eta``: every parameter then carries the penalty of
    every step, and the touch counts of the pass's threads start again from 0.
    ``zeros``: scratch of k values."""
    cdef Py_ssize_t d = model.d, k = model.k, n_threads = ps.n_threads
    cdef long long* last_touch = ps.last_touch
    cdef const long long* own_steps = ps.own_steps
    cdef floating* w = <floating*> model.w
    cdef floating* acc_w = <floating*> model.acc_w
    cdef floating* P = <floating*> model.P
    cdef floating* acc_P = <floating*> model.acc_P
    cdef floating* gamma = <floating*> model.gamma
    cdef floating* acc_gamma = <floating*> model.acc_gamma
    cdef Py_ssize_t lo, hi, j, u, b
    cdef double elapsed
    for j in range(k):
        zeros[j] = 0
    if not thread_range(t, threads, d + 1, &lo, &hi):
        return
    for j in range(lo, hi):
        elapsed = 0
        for u in range(n_threads):
            elapsed += own_steps[u] - last_touch[u * (d + 1) + j]
            last_touch[u * (d + 1) + j] = 0
        if elapsed <= 0:
            continue
        if j == d:
            for u in range(cfg.n_dummy):
                _update(gamma + u * k, acc_gamma + u * k if acc_gamma != NULL else NULL,
                        zeros, k, cfg.beta, elapsed, eta, cfg)
            continue
        _update(w + j, acc_w + j if acc_w != NULL else NULL, zeros, 1, cfg.alpha,
                elapsed, eta, cfg)
        for b in range(cfg.n_blocks):
            _update(P + (b * d + j) * k, acc_P + (b * d + j) * k if acc_P != NULL
                    else NULL, zeros, k, cfg.beta, elapsed, eta, cfg)


cdef Settings _settings(problem, schedule, sampling, chunk, catalogue, model):
    """The :c:type:`Settings` of a pass, from the problem's description and the data."""
    cdef Settings cfg
    degrees = np.asarray(problem.degrees)
    # The chunk's positives' query rows (chunk.query may hold every positive's).
    indptr, rows = np.asarray(chunk.query.indptr), np.asarray(chunk.query_row)
    query_sizes = indptr[rows + 1] - indptr[rows]
    cfg.kernel = problem.kernel
    cfg.loss = problem.loss
    cfg.schedule = schedule.kind
    cfg.max_trials = sampling.max_trials
    cfg.popularity = sampling.popularity
    cfg.fit_linear = problem.fit_linear
    cfg.alpha = problem.alpha
    cfg.beta = problem.beta
    cfg.eta0 = schedule.eta0
    cfg.power_t = schedule.power_t
    cfg.margin = sampling.margin
    cfg.n_blocks = degrees.shape[0]
    cfg.n_dummy = model.gamma.shape[0]
    cfg.max_degree = int(degrees.max())
    cfg.max_query_nnz = int(query_sizes.max()) if query_sizes.size else 0
    cfg.max_item_nnz = catalogue.max_item_nnz
    cfg.item_tables = cfg.kernel == ANOVA and cfg.max_degree > 2
    cfg.degree2 = cfg.kernel == ANOVA and bool((degrees == 2).all())
    return cfg


def pairwise_pass(problem, schedule, sampling, chunk, catalogue, model,
                  floating[:, :, ::1] P, long long step0, const uint64_t[::1] seeds,
                  bint flush):
    """One pass of pairwise steps over the positives of ``chunk``, in their order, in
    place on ``model``'s parameters (``P`` is ``model.P``, typed).

    ``problem``: a :class:`polylite._engine.problem.Problem` (kernel, degrees, loss
    PAIRWISE_BPR or PAIRWISE_WARP, penalties, fit_linear), ``schedule`` a
    :class:`polylite._engine.problem.Schedule`, ``sampling`` a
    :class:`polylite.ranking._data.NegativeSampling` (WARP's trials and margin, draws by
    popularity).  ``chunk``: the query rows
    (``query``, CSR of int64 indices, the item columns empty), and for each positive its
    row of them (``query_row``), its item (``positive``, a row of the catalogue), user
    (``user``), weight (``weight``) and whether it ends its query's batch
    (``batch_end``, uint8: the positives of a batch share one query row, whose values
    are computed at the batch's first and whose parameters step at its last; all ones:
    every positive steps on its own).  ``catalogue``: the item rows (``items``, CSR of
    int64 indices), every user's seen items (``seen_indptr``, ``seen``, sorted per
    user; ``seen_bits``, their bitmap from :func:`seen_bitmap`, or empty; without it,
    ``filter_ptr`` and ``seen_filter``, their filter from :func:`seen_filter`), for
    popularity sampling the items' cumulative weights (``cumulative``, else empty) and
    the widest item row's nonzeros (``max_item_nnz``).  ``model``: ``w``,
    ``gamma``, AdaGrad's ``acc_w``, ``acc_P``, ``acc_gamma`` (empty for SGD), and per
    thread its steps in the epoch (``thread_steps``) and the step at which it last
    touched each feature (``last_touch``, n_threads x (n_features + 1), the last column
    for the dummies).  ``step0``: the steps taken before this pass (a positive is one
    step; the step size's schedule).  Each of the ``len(seeds)`` threads takes blocks of
    consecutive positives of the chunk as it becomes free (one thread: the whole chunk
    in order), with its own random stream, the threads stepping on the shared
    parameters without locks.  ``flush`` (the epoch's last chunk): settle
    every feature's penalty (:func:`_settle`); the caller then sets ``thread_steps`` to
    0.

    Returns a dict: summed weighted ``loss`` and ``weight`` of the positives stepped on
    or tried, ``updates``, ``trials``, ``skipped`` (positives whose user has seen every
    item) and ``finite`` (False: a score was not finite, the pass stopped).
    """
    cdef Settings cfg = _settings(problem, schedule, sampling, chunk, catalogue, model)
    cdef const int[::1] degrees = problem.degrees
    cdef Py_ssize_t d = P.shape[1], k = P.shape[2]
    cdef floating[::1] w = model.w
    cdef floating[:, ::1] gamma = model.gamma
    cdef floating[::1] acc_w = model.acc_w
    cdef floating[:, :, ::1] acc_P = model.acc_P
    cdef floating[:, ::1] acc_gamma = model.acc_gamma
    cdef long long[:, ::1] last_touch = model.last_touch
    cdef long long[::1] own_steps = model.thread_steps
    query = chunk.query
    cdef const floating[::1] q_data = query.data
    cdef const int64_t[::1] q_ind = query.indices
    cdef const int64_t[::1] q_ptr = query.indptr
    cdef const int64_t[::1] q_row = chunk.query_row
    cdef const int64_t[::1] positive = chunk.positive
    cdef const int64_t[::1] user = chunk.user
    cdef const double[::1] weight = chunk.weight
    cdef const unsigned char[::1] batch_end = chunk.batch_end
    items = catalogue.items
    cdef const floating[::1] i_data = items.data
    cdef const int64_t[::1] i_ind = items.indices
    cdef const int64_t[::1] i_ptr = items.indptr
    cdef const int64_t[::1] seen_ptr = catalogue.seen_indptr
    cdef const int64_t[::1] seen = catalogue.seen
    cdef const uint64_t[::1] seen_bits = catalogue.seen_bits
    cdef const int64_t[::1] filter_ptr = catalogue.filter_ptr
    cdef const uint64_t[::1] filter_words = catalogue.seen_filter
    cdef const double[::1] cumulative = (catalogue.cumulative if cfg.popularity
                                         else np.zeros(0))
    cdef Py_ssize_t n_rows = positive.shape[0], n_threads = seeds.shape[0]
    cdef Negatives negatives
    cdef Work work
    cdef Totals* totals
    cdef Totals* mine
    cdef Totals total
    cdef void* claims
    cdef long long* next_row
    cdef bint adagrad = cfg.schedule == ADAGRAD
    cdef int t
    cdef Ahead common
    cdef Model params
    cdef Pass shared
    cdef floating* acc_w_ptr = &acc_w[0] if adagrad else NULL
    cdef floating* acc_P_ptr = &acc_P[0, 0, 0] if adagrad else NULL
    cdef floating* acc_gamma_ptr = (&acc_gamma[0, 0] if adagrad and gamma.shape[0] > 0
                                    else NULL)
    cdef floating* gamma_ptr = &gamma[0, 0] if gamma.shape[0] > 0 else NULL
    # The loops below run without bounds checks: the shapes must agree.
    if (w.shape[0] != d or gamma.shape[1] != k or last_touch.shape[1] != d + 1
            or last_touch.shape[0] != n_threads or own_steps.shape[0] != n_threads
            or q_row.shape[0] != n_rows or user.shape[0] != n_rows
            or batch_end.shape[0] != n_rows
            or weight.shape[0] != n_rows or items.shape[1] != d or query.shape[1] != d
            or seen_ptr.shape[0] < 2 or degrees.shape[0] != P.shape[0]
            or cfg.n_blocks != P.shape[0] or cfg.n_dummy != gamma.shape[0]
            or (adagrad and (acc_w.shape[0] != d or acc_P.shape[0] != P.shape[0]
                             or acc_P.shape[1] != d or acc_P.shape[2] != k
                             or acc_gamma.shape[0] != gamma.shape[0]))
            or (cfg.popularity and cumulative.shape[0] != i_ptr.shape[0] - 1)
            or n_threads < 1):
        raise ValueError("pairwise_pass: parameter or data shapes disagree")
    if not _rows_in_range(q_row, q_ptr.shape[0] - 1, positive, i_ptr.shape[0] - 1, user,
                          seen_ptr.shape[0] - 1):
        raise ValueError("pairwise_pass: a query row, item or user index is out of range")
    negatives = _negatives_of(seen_ptr, seen, seen_bits, filter_ptr, filter_words,
                              cumulative,
                              i_ptr.shape[0] - 1)
    work = _work_layout(&cfg, k)
    common.q_row, common.q_ptr, common.q_ind = &q_row[0], &q_ptr[0], &q_ind[0]
    common.positive, common.user, common.weight = &positive[0], &user[0], &weight[0]
    common.i_ptr, common.i_ind, common.negatives = &i_ptr[0], &i_ind[0], &negatives
    common.batch_end = &batch_end[0]
    # Each thread's totals a cache line apart at least: it updates them every positive.
    totals = <Totals*> malloc(n_threads * TOTALS_STRIDE * sizeof(Totals))
    # The claims' counter on cache lines of its own (every claim writes it).
    claims = malloc(2 * THREAD_ALIGN)
    if totals == NULL or claims == NULL:
        free(totals)
        free(claims)
        raise MemoryError()
    next_row = <long long*> thread_align(claims)
    next_row[0] = 0
    for t in range(n_threads):
        mine = &totals[t * TOTALS_STRIDE]
        mine.loss = mine.weight = 0
        mine.updates = mine.trials = mine.skipped = 0
        mine.finite = True
    params.w, params.P, params.gamma = &w[0], &P[0, 0, 0], gamma_ptr
    params.acc_w, params.acc_P, params.acc_gamma = acc_w_ptr, acc_P_ptr, acc_gamma_ptr
    params.degrees, params.d, params.k = &degrees[0], d, k
    shared.cfg, shared.model = &cfg, &params
    shared.n_rows, shared.step0, shared.flush = n_rows, step0, flush
    shared.n_threads, shared.seeds, shared.own_steps = n_threads, &seeds[0], &own_steps[0]
    shared.last_touch, shared.totals, shared.work = &last_touch[0, 0], totals, &work
    shared.next_row = next_row
    shared.ahead = &common
    with nogil, parallel(num_threads=n_threads):
        _thread_pass(threadid(), polylite_team_size(), &shared, &q_data[0], &i_data[0])
    total = totals[0]
    for t in range(1, n_threads):
        mine = &totals[t * TOTALS_STRIDE]
        total.loss += mine.loss
        total.weight += mine.weight
        total.updates += mine.updates
        total.trials += mine.trials
        total.skipped += mine.skipped
        total.finite = total.finite and mine.finite
    free(totals)
    free(claims)
    return total


def gather_positives(const int64_t[::1] rows, const int64_t[::1] query_row,
                     const int64_t[::1] item, const int64_t[::1] user,
                     const double[::1] weight, int threads):
    """The positives ``rows`` (a chunk of the epoch's order) as a pass reads them: each
    one's query row (of ``query_row``; empty: its place in the chunk), item, user and
    weight, four arrays.  ``threads`` threads share the gather: the rows are spread
    over the whole data, so that each read is a cache miss, and the threads' misses
    overlap (on one thread, between the passes, the gather would take about a tenth of
    a two-thread BPR epoch)."""
    cdef Py_ssize_t n = rows.shape[0], n_all = item.shape[0], i, r
    cdef bint with_query = query_row.shape[0] > 0
    if user.shape[0] != n_all or weight.shape[0] != n_all or \
            (with_query and query_row.shape[0] != n_all):
        raise ValueError("gather_positives: the positives' arrays differ in length")
    out_query = np.empty(n, dtype=np.int64)
    out_item = np.empty(n, dtype=np.int64)
    out_user = np.empty(n, dtype=np.int64)
    out_weight = np.empty(n, dtype=np.float64)
    cdef int64_t[::1] oq = out_query, oi = out_item, ou = out_user
    cdef double[::1] ow = out_weight
    cdef int bad = 0
    with nogil:
        for i in prange(n, num_threads=max(threads, 1), schedule="static"):
            r = rows[i]
            if r < 0 or r >= n_all:
                bad = 1  # (any thread may set it; none reads it before the end)
                continue
            oq[i] = query_row[r] if with_query else i
            oi[i] = item[r]
            ou[i] = user[r]
            ow[i] = weight[r]
    if bad:
        raise ValueError(f"gather_positives: a row is outside 0..{n_all - 1}")
    return out_query, out_item, out_user, out_weight


def pair_dot(const float[::1] a, const float[::1] b, float x, bint portable=False):
    """sum_s a[s] (x b[s]) as the passes sum an item's score on float32 values (four
    partial sums of float32 products, _pairwise.h), by the SSE2 kernel where it is
    built (``portable=False``) or the portable loop; and whether the SSE2 kernel is
    built.  For the tests, which compare the two bit for bit."""
    if a.shape[0] != b.shape[0]:
        raise ValueError("pair_dot: a and b differ in length")
    cdef Py_ssize_t k = a.shape[0]
    cdef const float* pa = &a[0] if k > 0 else NULL
    cdef const float* pb = &b[0] if k > 0 else NULL
    if portable:
        return polylite_pair_dot_f32_portable(pa, pb, x, k), bool(POLYLITE_PAIR_DOT_SSE2)
    return polylite_pair_dot_f32(pa, pb, x, k), bool(POLYLITE_PAIR_DOT_SSE2)
