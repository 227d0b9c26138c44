"""Cyclic coordinate descent for polynomial models (HOFM paper, section 4).

One call of :func:`cd_epoch` updates, in this order, the intercept, every linear weight,
then for each factor block b and each component s every factor entry: the block's dummy
rows gamma first (shared-parameter model), then the features in column order (the groups
of :func:`column_groups`; a relational input's blocks take their steps in the table
domain, _cd_tables.pyx, between the direct part's groups that precede and follow them).

Column groups.  The nonzeros are regrouped once per fit into groups of consecutive
columns that share no row (maximal runs in column order; a one-hot field is one group)
and, within a group, listed in row order.  Steps of such columns do not interact, so a
group is updated in two passes over its entries, gradients then updates, each reading the
per-row records in increasing address order instead of at random as through the rows of a
CSC column; the result is exactly that of updating the columns one after the other.
Groups with an entry in every row share a pass between the updates of one and the
gradients of the next, also across components: the last group of component s with the
first of component s + 1.

Each coordinate takes the step of ALGORITHMS.md section 3, the minimiser of a quadratic
upper bound of the objective along that coordinate,

    delta = -(sum_i s_i l'_i g_i + reg * p) / (mu * sum_i s_i g_i^2 + reg),

with g_i the derivative of the prediction of row i in the coordinate, s_i the normalised
sample weights (sum s_i = 1) and mu the smoothness of the loss.  The model is affine in every
single coordinate, so for the squared loss (mu = 1) the step is the exact minimiser and the
objective never increases for any loss.  For the logistic loss the bound's mu = 1/4 is far
above the curvature l''_i of well-fitted rows, so its steps are several times too short;
the coordinate also has the cubic bound l(p + r) <= l + l' r + l'' r^2 / 2 + c |r|^3 / 6
(c: the largest |l'''|), from the sums of s_i l''_i g_i^2 and s_i |g_i|^3, and takes the
step of whichever bound promises more (_bound_step): still monotone, and much faster on
classification (the steps are taken where each row's loss is actually curved).

Per-row state.  Only the current prediction and the cache of the component being updated
are kept, O(n * m) memory, never a dense X: power sums D_1..D_{m-1} for the ANOVA kernel
(Newton's identity gives A_0..A_{m-1} and the coordinate derivative), or (product of the
nonzero factors, number of zero factors) for the all-subsets kernel.  They are packed into
one record per row:

    [prediction, label?, weight?, cache of component s, cache of component s + 1]

For the squared loss the record holds the residual y_hat - y (label 0), so no label is
stored; weights are stored only when they are not uniform.  The cache of component s + 1 is
accumulated during the update pass of component s, which visits exactly the (row, feature)
pairs it needs while p_{s+1} is fixed: so only the first component of a block needs a
separate pass over the rows to fill its cache.  When the first group has an entry in
every row, its update pass also starts that cache (the dummies' share), so the slot
needs no pass of its own either.

Polynomial networks (kernel POLYNOMIAL, term lam_s (gamma_s + <p_s, x>)^m) are not affine
in p_js, so the plain step does not apply.  Row i's prediction is a polynomial of degree m
in the coordinate's step, so the loss's quadratic (or, logistic, cubic) bound makes the
objective along the coordinate bounded by a polynomial Q whose coefficients one pass over
the column's rows sums (_poly_sums); the step minimises Q (safeguarded Newton on Q', from
the Newton step with a positive curvature; _poly_step), with no further pass over the
rows.  So the objective never increases here either.  lam_s enters linearly and takes the
bound step of a linear coordinate.  The per-row cache is the linear form
u_i = gamma_s + <p_s, x_i>.

Gibbs sampling (``prior``, for polylite.bayes).  With the squared loss the residuals are
Gaussian and each coordinate's conditional posterior under a Gaussian prior N(mean, 1/lam) is
Gaussian too, with precision alpha n (sum_i s_i g_i^2 + reg) (reg = lam / (alpha n)) and mean
p + delta, delta the step above taken towards the prior mean.  A sweep of the sampler is
then the same epoch with each step replaced by a draw from that conditional (_draw_step):
the passes, caches and fused one-hot loops are those of coordinate descent, only the rule
that turns a column's sums into its step changes.  Each coordinate's normal number is a
function of the sweep's seed and the coordinate's index (counter-based, _normal), so the
draws do not depend on which thread takes the coordinate.  The draws may be over-relaxed
(``prior.relaxation``, Adler 1981): each conditional is still left invariant.

Mean-field variational inference (``prior.variance``, for polylite.bayes.variational).
Each parameter has a Gaussian factor N(mean, variance); the epoch replaces each factor in
turn by the optimal one given the others (coordinate ascent on the evidence lower bound).
The row's output is affine in the coordinate with a random derivative h_i, so the
optimal factor is the sampler's conditional with E[h_i] for g_i, its variance added to
the curvature and its covariance with the rest of the output to the gradient
(_meanfield_step).  At degree 2 those need two more sums per row and component,
sum_j v_j x_ij^2 and sum_j v_j p_j x_ij^3 (v_j: the variances), kept beside the power sum
in the same cache slot (KIND_MEANFIELD): the passes, groups and threads are the same.
The factors' means may be over-relaxed (``prior.relaxation``): the ELBO still never
decreases.

Files.  The module is one compilation unit (its passes are inline functions and share
its structures), in files by concern: this one holds the epoch's driver (cd_epoch,
_run_epoch and the sweeps it calls, over the Epoch structure) and the passes over all
rows; ``include``d, _cd_rows.pxi (a component's row caches, the kinds of coordinate
entry), _cd_passes.pxi (the passes over a group's entries and the columns' steps),
_cd_setup.pxi (an epoch's set-up: checks, work arrays, step rule, priors, tables),
_cd_columns.pxi (column groups and moments, computed once per fit) and _cd_poly.pxi (the
polynomial kernel's steps).
"""
import numpy as np
from libc.stdlib cimport malloc, free
from libc.math cimport fabs
from libc.stdint cimport int64_t, uint64_t
from cython.parallel cimport prange

from ._kernels cimport (index_t, floating, thread_range, ANOVA, ALL_SUBSETS,
                        POLYNOMIAL, int_power)
from ._losses cimport (SQUARED, LOGISTIC, loss_smoothness, loss_third_bound,
                        loss_value)
from ._cd_core cimport *
from ._cd_tables cimport (MAX_TABLE_DEGREE, MODEL_BOUND, MODEL_LOCAL, Table, Moments,
                          RowStates, Push, Start, row_states, table_moments, table_fill,
                          table_gather, table_gradients, table_updates, table_push,
                          table_column_sums, table_column_update, table_start_rows,
                          table_pass_change, table_check, table_revert)


# The scratch space of each thread beyond the first (see _solvers.cd_threads).
SCRATCH_BYTES_PER_FEATURE = COL_STRIDE * sizeof(double)

# The kinds of pass whose seconds cd_epoch's ``pass_seconds`` counts, in its column order:
# a group's updates fused with the next group's gradients; a group's gradients, or
# updates, alone; the per-column work (scratch records, the threads' sums, the steps);
# a component's caches from the CSR rows; the passes over the records alone.
PASS_KINDS = ("fused", "gradients", "updates", "columns", "fill", "records")

# How the relation blocks' passes on the loss's local model ended, in the order of
# cd_epoch's ``table_checks``: accepted on the bound of the objective's change from the
# table rows, accepted on the change computed from the interactions, undone and taken
# again on the loss's upper bound.
TABLE_CHECKS = ("bound", "computed", "redone")


cdef enum:
    EMPTY = -2  # column_groups: a column without entries (its ``before`` and, before
                # numbering, its group)


cdef struct Groups:
    Py_ssize_t n_groups
    const Py_ssize_t* group_ptr     # entries of group g: group_ptr[g]:group_ptr[g + 1]
    const Py_ssize_t* columns_ptr   # its columns: group_columns[columns_ptr[g]:...]
    const Py_ssize_t* row_ptr       # its rows: rows[row_ptr[g]:row_ptr[g + 1]], or none
                                    # when it has an entry in every row (see _group_rows)
    const Py_ssize_t* col_ptr       # the columns of its entries: columns[col_ptr[g]:...],
                                    # or none when it has one column (_entry_columns)
    const Py_ssize_t* val_ptr       # its values: values[val_ptr[g]:...], or none when they
                                    # are all 1 (_group_values)


cdef inline const index_t* _group_rows(const Groups* G, const index_t* rows,
                                      Py_ssize_t g) noexcept nogil:
    """The rows of group g's entries, or NULL: rows 0..n-1 (it has an entry in every
    row, so its rows are not stored)."""
    if G.row_ptr[g + 1] == G.row_ptr[g]:
        return NULL
    return rows + G.row_ptr[g]


cdef inline const index_t* _entry_columns(const Groups* G, const index_t* group_columns,
                                          const index_t* columns,
                                          Py_ssize_t g) noexcept nogil:
    """The columns of group g's entries; for a group of one column, its column alone (the
    passes then read only the first)."""
    if G.columns_ptr[g + 1] - G.columns_ptr[g] == 1:
        return group_columns + G.columns_ptr[g]
    return columns + G.col_ptr[g]


cdef inline const floating* _group_values(const Groups* G, const floating* values,
                                          Py_ssize_t g) noexcept nogil:
    """The values of group g's entries, or NULL: all 1 (a one-hot field)."""
    if G.val_ptr[g + 1] == G.val_ptr[g]:
        return NULL
    return values + G.val_ptr[g]


include "_cd_rows.pxi"
include "_cd_passes.pxi"


# ---- the epoch: what its passes share -----------------------------------------------------

cdef struct Epoch:
    # What the passes of one epoch share, set once by _set_epoch before they run: the
    # step rule, the rows' records, the threads, the groups, the relation blocks, the
    # model's structure and penalties, the rules' priors and gradient arrays.
    int rule                  # STEP_*: how every coordinate moves
    Layout L                  # the records (width and stride change from block to block)
    Threads threads
    Groups G
    Blocks blocks
    Pending pending           # a group's update pass awaiting the next pass over the rows
    Py_ssize_t n
    Py_ssize_t d
    Py_ssize_t k
    Py_ssize_t n_blocks
    Py_ssize_t n_dummy
    int kernel
    const int* degrees
    double alpha              # the penalties of w and of the factors, per sample, over
    double beta               # ``weight``
    double weight             # the uniform weight the sums leave out (see cd_epoch), or 1
    bint fit_intercept
    bint fit_linear
    bint fit_lam
    double* state             # the rows' records
    double* scratch           # the columns' scratch records (one cache line each)
    double* A                 # _anova_derivative's work space (thread 0's)
    double* base              # a cache slot of a row without entries (_slot_base)
    double* factor_column     # _fill_slot's gathered factors, then their variances
    const double* support     # per column, sum_i s_i over its rows
    const double* fourth      # per column, sum_i s_i x_ij^4
    const double* y
    const double* sample_weight
    double* y_pred
    double* clock             # pass_seconds, or NULL
    # The parameters and the rows in the epoch's dtype and index type: a pass takes them
    # back typed, its own typed pointer argument fixing the types.
    void* intercept
    void* w
    void* gamma
    void* lam
    const void* csr_data
    const void* csr_indices
    const void* csr_indptr
    const void* group_columns
    const void* entry_rows
    const void* entry_columns
    const void* entry_values
    # STEP_DRAW and STEP_MEANFIELD: the priors (a factor block's set by _block_prior).
    Prior intercept_prior
    Prior linear_prior
    Prior dummy_prior
    Prior block_prior
    const Py_ssize_t* prior_group
    const double* P_reg       # (n_blocks, n_groups, k): each block's group precisions
    const double* P_mean      # and means
    Py_ssize_t n_groups
    double scale
    uint64_t seed
    double relaxation
    double flat               # the intercept's prior: flat (precision 0, mean 0)
    double* var_P             # STEP_MEANFIELD: the factors' variances (n_blocks, d, k)
    double* output_change
    # STEP_GRADIENT: the gradient arrays, shaped like the parameters.
    double* grad_intercept
    double* grad_w
    double* grad_P
    double* grad_gamma


cdef inline Sweep _sweep(const Epoch* E, Py_ssize_t cur, Py_ssize_t nxt, bint has_next,
                         int degree, const double* base, const Prior* prior,
                         double* gradient) noexcept nogil:
    """The Sweep of a pass over columns of epoch E (the linear weights': cur 0, nxt -1,
    no next, degree 0, base NULL)."""
    cdef Sweep sweep
    sweep.L = E.L
    sweep.threads = &E.threads
    sweep.support = E.support
    sweep.fourth = NULL
    sweep.cur = cur
    sweep.nxt = nxt
    sweep.has_next = has_next
    sweep.degree = degree
    sweep.scratch = E.scratch
    sweep.A = E.A
    sweep.base = base
    sweep.rule = E.rule
    sweep.prior = prior
    sweep.gradient = gradient
    sweep.gradient_scale = E.weight
    return sweep


cdef double _cd_groups(Epoch* E, const Sweep* sw, Py_ssize_t g_begin, Py_ssize_t g_end,
                       floating* param, Py_ssize_t param_stride, double reg, int kind,
                       bint keep_last, const index_t* group_columns) noexcept nogil:
    """One sweep over the coordinates param[j * param_stride] of the columns of the
    direct groups g_begin..g_end-1, group by group (``kind`` KIND_LINEAR: the linear
    weights; else factors whose row caches are in slot sw.cur, and the next component's
    cache is built in slot sw.nxt).  Returns the largest |step|.

    A group with an entry in every row leaves its update pass pending (E.pending), to
    share the pass of the next group's gradients.  On entry, E.pending may hold the last
    group of the previous component (no column in common with the first group here);
    with ``keep_last``, the last group here may be left pending on return.
    """
    cdef const Groups* G = &E.G
    cdef const index_t* rows = <const index_t*> E.entry_rows
    cdef const index_t* columns = <const index_t*> E.entry_columns
    cdef const floating* values = <const floating*> E.entry_values
    cdef Pending* pending = &E.pending
    cdef Py_ssize_t n = E.n
    cdef double* state = E.state
    cdef double mu = sw.L.mu
    cdef Py_ssize_t g, e0, e1, c0, c1
    cdef bint single, full
    cdef int pass_threads
    cdef double max_change = 0, start
    for g in range(g_begin, g_end):
        e0 = G.group_ptr[g]
        e1 = G.group_ptr[g + 1]
        c0 = G.columns_ptr[g]
        c1 = G.columns_ptr[g + 1]
        single = c1 - c0 == 1
        full = e1 - e0 == n and n > 0
        start = _clock_start(sw.threads)
        if e1 == e0:
            max_change = max(max_change, _unseen_columns(
                group_columns + c0, c1 - c0, param, param_stride, sw, mu, reg))
            _clock_add(sw.threads, PASS_COLUMNS, start)
            continue
        # The threads of this group's gradient pass, and their scratch records.
        pass_threads = _row_threads(sw.threads, e1 - e0)
        _group_start(group_columns + c0, c1 - c0, sw, param, param_stride, pass_threads)
        _clock_add(sw.threads, PASS_COLUMNS, start)
        if pending.group >= 0 and full:
            _fused(pending, _entry_columns(G, group_columns, columns, g),
                   _group_values(G, values, g), single, sw, n, state, kind)
            pending.group = -1
        else:
            _flush(pending, n, state, kind, columns, values)
            _pass(_group_rows(G, rows, g), _entry_columns(G, group_columns, columns, g),
                  _group_values(G, values, g), e1 - e0, single, sw, False, False, state,
                  kind)
        start = _clock_start(sw.threads)
        _group_reduce(group_columns + c0, c1 - c0, sw, pass_threads)
        _group_steps(group_columns + c0, c1 - c0, sw, param, param_stride, mu, reg,
                     &max_change)
        _clock_add(sw.threads, PASS_COLUMNS, start)
        if sw.rule == STEP_GRADIENT:
            continue  # no steps: nothing to apply
        # The next component's caches start from sw.base in the first group's pass 2.
        pending.reset = g == 0 and sw.base != NULL
        if full:
            pending.group = g
            pending.single = single
            pending.sweep = sw[0]
            pending.columns = _entry_columns(G, group_columns, columns, g)
            pending.values = _group_values(G, values, g)
        else:
            _pass(_group_rows(G, rows, g), _entry_columns(G, group_columns, columns, g),
                  _group_values(G, values, g), e1 - e0, single, sw, True, pending.reset,
                  state, kind)
    if not keep_last:
        _flush(pending, n, state, kind, columns, values)
    return max_change


# ---- relation blocks: their columns between the direct groups ---------------------------

cdef double _block_pass(Epoch* E, Table* T, const Table* done, const Sweep* sw, int kind,
                        floating* param, Py_ssize_t param_stride, double reg,
                        bint build_next, bint gathered) noexcept nogil:
    """CD over one block's columns (kind ``kind``, ANOVA degree sw.degree) in the table
    domain (_cd_tables.pyx): the moments summed from the interactions (after the end of
    block ``done``'s pass, if any, in the same pass over them), then each group's steps
    from them.  The table rows' caches B of the component must be current; the pass
    ends with table_push (the caller's, or the next block's gather).  Returns the
    largest |step|.

    The steps minimise the loss's quadratic model whose sums the moments hold
    (blocks.model).  A pass on the local model (MODEL_LOCAL: the logistic loss's own
    curvature, the squared hinge's flat beyond the hinge) is checked before it is pushed
    (_pass_accepted); one that would increase the objective is undone and taken again on
    the upper bound (MODEL_BOUND), whose steps never increase it."""
    cdef Py_ssize_t c, count = T.columns_ptr[T.n_groups]
    cdef double max_change
    cdef Moments TM = table_moments(kind, sw.degree)
    TM.squared = sw.L.loss == SQUARED
    TM.model = E.blocks.model
    # The moments hold the (model's) curvature: steps with mu = 1, no cubic term.
    cdef Sweep tsw = sw[0]
    tsw.L.third = 0
    tsw.fourth = NULL  # (the moments sum the noise)
    tsw.has_next = build_next  # COL_NEXT: the columns' values in the next component
    cdef RowStates rows = row_states(E.state, &sw.L, E.n, sw.cur)
    if not gathered:  # (else the component's start gathered it)
        table_gather(T, &TM, &rows, E.blocks.threads, done)
    if TM.model == MODEL_LOCAL:
        for c in range(count):
            E.blocks.saved[c] = param[T.group_columns[c] * param_stride]
    max_change = _block_steps(T, &TM, &tsw, param, param_stride, reg)
    if (TM.model != MODEL_LOCAL or max_change == 0
            or _pass_accepted(E, T, &TM, &sw.L, sw.cur, param, param_stride, reg)):
        return max_change
    for c in range(count):
        param[T.group_columns[c] * param_stride] = <floating> E.blocks.saved[c]
    table_revert(T, &TM, E.blocks.threads)
    TM.model = MODEL_BOUND
    table_gather(T, &TM, &rows, E.blocks.threads, NULL)
    return _block_steps(T, &TM, &tsw, param, param_stride, reg)


cdef double _block_steps(Table* T, const Moments* TM, Sweep* tsw, floating* param,
                         Py_ssize_t param_stride, double reg) noexcept nogil:
    """The steps of a block's columns, group by group, from the moments gathered
    (_block_pass); returns the largest |step|."""
    cdef Py_ssize_t g, e0, e1, c0, c1, j
    cdef int pass_threads
    cdef double max_change = 0, p, delta
    cdef double sums[N_TERMS]
    for g in range(T.n_groups):
        e0 = T.group_ptr[g]
        e1 = T.group_ptr[g + 1]
        c0 = T.columns_ptr[g]
        c1 = T.columns_ptr[g + 1]
        if e1 == e0:
            max_change = max(max_change, _unseen_columns(
                T.group_columns + c0, c1 - c0, param, param_stride, tsw, 1.0, reg))
            continue
        pass_threads = _row_threads(tsw.threads, e1 - e0)
        if c1 - c0 == 1 and pass_threads == 1:
            # One column on one thread (an implicit set's columns, mostly): its sums,
            # step and update directly, without the scratch records.
            j = T.group_columns[c0]
            p = param[j * param_stride]
            table_column_sums(T, TM, g, p,
                              param[j * param_stride + 1] if tsw.has_next else 0.0, sums)
            if tsw.rule == STEP_GRADIENT:
                tsw.gradient[j * param_stride] = tsw.gradient_scale * sums[0]
                continue
            delta = _take_step(param + j * param_stride, _coordinate_step(
                tsw.rule, tsw.prior, j, tsw.support[j], sums, 1.0, 0.0, reg, p))
            if delta != 0:
                table_column_update(T, TM, g, p, delta)
                max_change = max(max_change, fabs(delta))
            continue
        _group_start(T.group_columns + c0, c1 - c0, tsw, param, param_stride, pass_threads)
        table_gradients(T, TM, g, tsw.scratch, tsw.threads, pass_threads)
        _group_reduce(T.group_columns + c0, c1 - c0, tsw, pass_threads)
        _group_steps(T.group_columns + c0, c1 - c0, tsw, param, param_stride, 1.0, reg,
                     &max_change)
        if tsw.rule != STEP_GRADIENT:
            table_updates(T, TM, g, tsw.scratch, tsw.threads, pass_threads)
    return max_change


cdef bint _pass_accepted(Epoch* E, const Table* T, const Moments* TM, const Layout* L,
                         Py_ssize_t cur, const floating* param, Py_ssize_t param_stride,
                         double reg) noexcept nogil:
    """Whether a block's pass on the loss's local model (before its push) leaves the
    objective no higher: the penalty's change from the columns' values before
    (blocks.saved) and after, plus the data term's change, bounded from the table rows'
    records (table_pass_change: the model's change and how far the loss can exceed it)
    or, where that bound does not settle it, computed from the interactions
    (table_check)."""
    cdef Py_ssize_t c, count = T.columns_ptr[T.n_groups]
    cdef double penalty = 0, change, excess, before, p, q
    for c in range(count):
        p = param[T.group_columns[c] * param_stride]
        q = E.blocks.saved[c]
        penalty += 0.5 * reg * (p - q) * (p + q)
    change = table_pass_change(T, TM, L.loss, E.blocks.y_bound, E.blocks.threads,
                               E.threads.partial, &excess)
    cdef bint accepted
    if change + excess + penalty <= 0:
        _count_check(&E.blocks, CHECK_BOUND)
        return True
    cdef RowStates rows = row_states(E.state, L, E.n, cur)
    change = table_check(T, TM, &rows, E.blocks.threads, E.threads.partial, &before)
    # (An increase within the rounding of the sums counts as none.)
    accepted = change + penalty <= 1e-14 * before
    _count_check(&E.blocks, CHECK_COMPUTED if accepted else CHECK_REDONE)
    return accepted


cdef inline void _count_check(Blocks* blocks, int outcome) noexcept nogil:
    if blocks.checks != NULL:
        blocks.checks[outcome] += 1


cdef double _cd_columns(Epoch* E, const Sweep* sw, floating* param,
                        Py_ssize_t param_stride, double reg, int kind, bint keep_last,
                        const index_t* group_columns) noexcept nogil:
    """One sweep over every column of one kind (see _cd_groups), in column order: the
    direct groups, with each relation block's pass (_block_pass) between them where its
    columns lie; consecutive blocks share the pass over the rows that ends one and
    starts the next.  The first block's gather may be done already
    (``blocks.first_gathered``), and the last block's push left to the next component's
    start (``blocks.defer``: then ``blocks.pending``).  Returns the largest |step|."""
    cdef Blocks* blocks = &E.blocks
    cdef const Groups* G = &E.G
    cdef Py_ssize_t b, g = 0, later
    cdef double max_change = 0
    cdef Table* done = NULL  # a block whose pass awaits its push
    cdef Moments TM = table_moments(kind, sw.degree)
    cdef RowStates rows = row_states(E.state, &sw.L, E.n, sw.cur)
    cdef bint gathered
    if blocks.count == 0:
        return _cd_groups(E, sw, 0, G.n_groups, param, param_stride, reg, kind, keep_last,
                          group_columns)
    for b in range(blocks.count):
        if blocks.position[b] > g:
            if done != NULL:
                table_push(done, &TM, &rows, blocks.threads)
                done = NULL
            max_change = max(max_change, _cd_groups(
                E, sw, g, blocks.position[b], param, param_stride, reg, kind, False,
                group_columns))
            g = blocks.position[b]
        gathered = b == 0 and blocks.first_gathered
        max_change = max(max_change, _block_pass(
            E, &blocks.tables[b], done, sw, kind, param, param_stride, reg,
            blocks.build_next and kind != KIND_LINEAR, gathered))
        # (No steps, nothing to push: the next gather starts afresh.)
        done = &blocks.tables[b] if sw.rule != STEP_GRADIENT else NULL
    blocks.first_gathered = False
    if done != NULL:
        # Direct groups after the last block read the rows: push it first.
        later = 0
        for b in range(g, G.n_groups):
            later += G.group_ptr[b + 1] - G.group_ptr[b]
        if blocks.defer and later == 0:
            blocks.pending.table = done
            blocks.pending.cache = done.cache
            blocks.pending.TM = TM
            blocks.pending.slot = sw.cur
        else:
            table_push(done, &TM, &rows, blocks.threads)
    return max(max_change, _cd_groups(
        E, sw, g, G.n_groups, param, param_stride, reg, kind, False, group_columns))


cdef double _cd_component(Epoch* E, Py_ssize_t b, Py_ssize_t s, Py_ssize_t cur,
                          Py_ssize_t nxt, floating* Pb,
                          const index_t* group_columns) noexcept nogil:
    """Move every coordinate of component s of factor block b (Pb its factors) by the
    epoch's rule; the cache in slot ``cur`` must be current, except for the update pass
    of a pending group of component s - 1.  The columns of the relation blocks are
    updated in the table domain, where they lie.

    With a next component (and no relation blocks, and steps to take), also build its
    cache in slot ``nxt``.  Without dummies, the last group's update pass may be left
    pending, to share the first pass of component s + 1.  Returns the largest |step|.
    """
    cdef const Groups* G = &E.G
    cdef const Layout* L = &E.L
    cdef Py_ssize_t n = E.n, k = E.k
    cdef Py_ssize_t i, r, t
    cdef int degree = E.degrees[b]
    cdef floating* gamma = <floating*> E.gamma if b == 0 else NULL
    cdef Py_ssize_t n_dummy = E.n_dummy if b == 0 else 0
    cdef bint has_next = (s + 1 < k and E.blocks.count == 0
                          and E.rule != STEP_GRADIENT)
    cdef bint sampling = E.rule == STEP_DRAW or E.rule == STEP_MEANFIELD
    cdef double* gradient = (E.grad_P + b * E.d * k if E.rule == STEP_GRADIENT
                             else NULL)
    cdef double p, delta, max_change = 0, start
    cdef double terms[N_TERMS]
    cdef double sums[N_TERMS]
    cdef int kind = _kind(E.kernel, degree)
    cdef Prior features, dummies
    cdef Move move
    if E.rule == STEP_MEANFIELD:
        kind = KIND_MEANFIELD  # (degree 2, see _prior_arrays)
    if sampling:
        features = _component_prior(&E.block_prior, s)
        if b == 0:
            dummies = _component_prior(&E.dummy_prior, s)
    # Does the first group have an entry in every row (its pass 2 then resets the rows'
    # next caches, and may share the last group's pass 2 of the previous component)?
    cdef bint first_full = (G.n_groups > 1 and n > 0
                            and G.group_ptr[1] - G.group_ptr[0] == n)
    if not first_full or n_dummy > 0:
        _flush(&E.pending, n, E.state, kind, <const index_t*> E.entry_columns,
               <const floating*> E.entry_values)
    if has_next:
        _slot_base(E.base, E.kernel, L.width, gamma, n_dummy, k, s + 1)
        if not first_full:
            start = _clock_start(&E.threads)
            _reset_slot(E.state, L, n, nxt, E.base)
            _clock_add(&E.threads, PASS_RECORDS, start)
    cdef Sweep sweep = _sweep(E, cur, nxt, has_next, degree,
                              E.base if has_next and first_full else NULL,
                              &features if sampling else NULL,
                              gradient + s if gradient != NULL else NULL)
    if _noise_from_column(L, kind):
        sweep.fourth = E.fourth
    # Dummy features (value 1 in every row; ANOVA only): the entry terms and updates of
    # a feature (their next-component share is already in the next cache's start).
    for r in range(n_dummy):
        p = gamma[r * k + s]
        _zero_terms(sums)
        start = _clock_start(&E.threads)
        for i in range(n):
            _entry_terms(1.0, E.state + i * L.stride, p, 0.0, &sweep, kind, terms)
            for t in range(N_TERMS):
                sums[t] += terms[t]
        _clock_add(&E.threads, PASS_GRADIENTS, start)
        if E.rule == STEP_GRADIENT:
            E.grad_gamma[r * k + s] = E.weight * sums[0]
            continue
        delta = _take_step(gamma + r * k + s, _coordinate_step(
            E.rule, &dummies if sampling else NULL, r, 1.0, sums, L.mu, L.third, E.beta, p))
        if delta != 0:
            move.delta = delta
            move.p = p
            move.p_next = move.var = move.var_new = move.var_next = 0
            start = _clock_start(&E.threads)
            for i in range(n):
                _apply_entry(&move, 1.0, E.state + i * L.stride, &sweep, kind, False)
            _clock_add(&E.threads, PASS_UPDATES, start)
            max_change = max(max_change, fabs(delta))
    # The features, group by group.
    return max(max_change, _cd_columns(E, &sweep, Pb + s, k, E.beta, kind,
                                       has_next and first_full and n_dummy == 0,
                                       group_columns))


# ---- the passes of an epoch, in coordinate order -------------------------------------------

cdef double _run_epoch(Epoch* E, floating* P, const index_t* group_columns) noexcept nogil:
    """The passes of one epoch (E set up): the records in, the intercept, the linear
    weights, each factor block's components, the records out.  Returns the largest
    |step|."""
    cdef Py_ssize_t b, t
    cdef int n_threads = E.threads.count
    cdef double max_change = 0
    cdef double start = _clock_start(&E.threads)
    for t in prange(n_threads, num_threads=n_threads, schedule="static", chunksize=1):
        _load_chunk(t, n_threads, E.state, &E.L, E.y, E.y_pred, E.sample_weight, E.n)
    if E.fit_intercept and E.n > 0:
        max_change = max(max_change, _intercept_pass(E, <floating*> E.intercept))
    _clock_add(&E.threads, PASS_RECORDS, start)
    if E.fit_linear and E.d > 0:
        max_change = max(max_change, _linear_sweep(E, <floating*> E.w, group_columns))
    for b in range(E.n_blocks):
        if E.kernel == ANOVA:
            E.L.width = (E.degrees[b] - 1 if E.rule != STEP_MEANFIELD
                         else _width(KIND_MEANFIELD, 0))
        if E.kernel == POLYNOMIAL and b > 0:
            break
        max_change = max(max_change, _factor_block_sweep(E, b, P, group_columns))
    _flush_push(&E.blocks, E.state, &E.L, E.n)
    E.threads.clock = E.clock
    start = _clock_start(&E.threads)
    for t in prange(n_threads, num_threads=n_threads, schedule="static", chunksize=1):
        _store_chunk(t, n_threads, E.state, &E.L, E.y, E.y_pred, E.n)
    _clock_add(&E.threads, PASS_RECORDS, start)
    if E.rule == STEP_MEANFIELD:
        for t in range(n_threads):
            E.output_change[0] += E.threads.variance_change[t]
    return max_change


cdef double _linear_sweep(Epoch* E, floating* w, const index_t* group_columns) noexcept nogil:
    """The linear weights' sweep over every column."""
    cdef bint sampling = E.rule == STEP_DRAW or E.rule == STEP_MEANFIELD
    cdef Sweep linear = _sweep(E, 0, -1, False, 0, NULL,
                               &E.linear_prior if sampling else NULL,
                               E.grad_w if E.rule == STEP_GRADIENT else NULL)
    # The last block's push waits for the first component's start (its rows'
    # predictions only: no cache to move).
    E.blocks.defer = E.n_blocks > 0 and E.kernel != POLYNOMIAL
    return _cd_columns(E, &linear, w, 1, E.alpha, KIND_LINEAR, False, group_columns)


cdef double _factor_block_sweep(Epoch* E, Py_ssize_t b, floating* P,
                                const index_t* group_columns) noexcept nogil:
    """Factor block b's sweep, component by component: each component's caches, then
    its coordinates (the polynomial kernel's own steps for a polynomial network)."""
    cdef Blocks* blocks = &E.blocks
    cdef Py_ssize_t s, cur, nxt, k = E.k
    cdef floating* Pb = P + b * E.d * k
    cdef double max_change = 0, change, start
    if E.clock != NULL:
        E.threads.clock = E.clock + (b + 1) * N_PASS_KINDS
    start = _clock_start(&E.threads)
    _restride(E.state, &E.L, E.n, E.L.cache + 2 * E.L.width)
    _clock_add(&E.threads, PASS_RECORDS, start)
    if E.rule == STEP_DRAW or E.rule == STEP_MEANFIELD:
        _block_prior(E, b)
    for s in range(k):
        # Alternate the two cache slots between consecutive components.
        cur = E.L.cache + (s % 2) * E.L.width
        nxt = E.L.cache + ((s + 1) % 2) * E.L.width
        # The caches of component s: built while component s - 1 was updated, or with
        # relation blocks, here (the direct part, then each block's, whose table caches
        # component s - 1's sums passes built).
        if s == 0:
            blocks.next_built = False
        blocks.build_next = s + 1 < k
        # The component's start may end the last sweep's last block and start its first
        # (without dummies, whose steps come first).
        blocks.defer = s + 1 < k
        blocks.gather_first = (blocks.count > 0 and blocks.position[0] == 0
                               and (b > 0 or E.n_dummy == 0))
        if s == 0 or blocks.count > 0 or E.rule == STEP_GRADIENT:
            start = _clock_start(&E.threads)
            _fill_slot(E, b, s, cur, Pb, <const index_t*> E.csr_indices)
            _clock_add(&E.threads, PASS_FILL, start)
        if E.kernel == POLYNOMIAL:
            change = _cd_poly_component(E, s, cur, nxt, P, group_columns)
        else:
            change = _cd_component(E, b, s, cur, nxt, Pb, group_columns)
            blocks.next_built = blocks.build_next
        max_change = max(max_change, change)
    _flush_push(blocks, E.state, &E.L, E.n)
    return max_change


cdef void _fill_slot(Epoch* E, Py_ssize_t b, Py_ssize_t s, Py_ssize_t slot,
                     const floating* P, const index_t* csr_indices) noexcept nogil:
    """Compute the cache of component s of factor block b (P its factors) in every row
    from scratch, into ``slot`` (row-wise pass on the epoch's threads): the dummies'
    share, the row's own entries and each relation block's table row (their caches
    computed first, _cd_tables.table_fill, or built by the sums passes of component
    s - 1 when ``blocks.next_built``).  The d factors of component s are gathered first
    (E.factor_column), so that the rows read them from one contiguous array, not one
    cache line each; a mean-field block's variances after them."""
    cdef const Layout* L = &E.L
    cdef Blocks* blocks = &E.blocks
    cdef double* state = E.state
    cdef Py_ssize_t n = E.n, d = E.d, k = E.k
    cdef int kernel = E.kernel, degree = E.degrees[b], threads = E.threads.count
    cdef const floating* csr_data = <const floating*> E.csr_data
    cdef const index_t* csr_indptr = <const index_t*> E.csr_indptr
    cdef double* base = E.base
    cdef double* factors = E.factor_column
    cdef const double* variance = (E.var_P + b * d * k
                                   if E.rule == STEP_MEANFIELD and d > 0 else NULL)
    cdef Py_ssize_t t, j
    cdef int kind = _kind(kernel, degree) if E.rule != STEP_MEANFIELD else KIND_MEANFIELD
    cdef double* variances = factors + d + 1
    cdef Moments TM = table_moments(kind, degree)
    cdef double* swap
    cdef bint direct = csr_indptr[n] > 0  # the rows have entries of their own
    cdef Fill fill
    TM.squared = L.loss == SQUARED
    TM.model = blocks.model
    _slot_base(base, kernel, L.width, <const floating*> E.gamma if b == 0 else NULL,
               E.n_dummy if b == 0 else 0, k, s)
    for j in range(d):
        factors[j] = P[j * k + s]
    if variance != NULL:
        for j in range(d):
            variances[j] = variance[j * k + s]
    for j in range(blocks.count):
        if blocks.next_built:  # by the sums passes of component s - 1
            swap = blocks.tables[j].cache
            blocks.tables[j].cache = blocks.tables[j].next
            blocks.tables[j].next = swap
        else:
            table_fill(&blocks.tables[j], &TM, factors, blocks.threads)
    if direct or blocks.count == 0:
        fill.slot = slot
        fill.kernel = kernel
        fill.factors = factors
        fill.variances = variances
        fill.base = base
        if threads == 1:
            _fill_chunk(0, 1, state, L, n, &fill, kind, csr_data, csr_indices, csr_indptr)
        else:
            for t in prange(threads, num_threads=threads, schedule="static", chunksize=1):
                _fill_chunk(t, threads, state, L, n, &fill, kind, csr_data, csr_indices,
                            csr_indptr)
    if blocks.count == 0:
        return
    # One pass over the rows: the previous sweep's last push, the blocks' caches, the
    # first block's gather.
    cdef Start start
    start.tables = blocks.tables
    start.count = blocks.count
    start.base = NULL if direct else base
    start.gather = NULL
    if blocks.gather_first and blocks.pending.table != &blocks.tables[0]:
        start.gather = &blocks.tables[0]
    cdef RowStates rows = row_states(state, L, n, slot)
    table_start_rows(&start, &TM, &blocks.pending, &rows, blocks.threads)
    blocks.pending.table = NULL
    blocks.first_gathered = start.gather != NULL


cdef void _flush_push(Blocks* blocks, double* state, const Layout* L,
                      Py_ssize_t n) noexcept nogil:
    """The push left pending by the last sweep, on its own."""
    cdef RowStates rows
    if blocks.pending.table != NULL:  # (its caches not swapped since)
        rows = row_states(state, L, n, blocks.pending.slot)
        table_push(blocks.pending.table, &blocks.pending.TM, &rows, blocks.threads)
        blocks.pending.table = NULL


cdef double _intercept_pass(Epoch* E, floating* intercept) noexcept nogil:
    """The intercept's move by the epoch's rule: its sums over the rows, then the rows'
    predictions shifted.  Returns |step|."""
    cdef const Layout* L = &E.L
    cdef const Threads* threads = &E.threads
    cdef const Prior* prior = &E.intercept_prior
    cdef double* state = E.state
    cdef Py_ssize_t n = E.n
    cdef Py_ssize_t i, t
    cdef int n_threads = threads.count
    cdef double delta
    cdef double sums[N_TERMS]
    for t in prange(n_threads, num_threads=n_threads, schedule="static", chunksize=1):
        _intercept_chunk(t, n_threads, state, L, n, threads.partial)
    _zero_terms(sums)
    for t in range(n_threads):
        for i in range(N_TERMS):
            sums[i] += threads.partial[N_TERMS * t + i]
    # (sums[1] is the rows' weight, the intercept's support)
    if E.rule == STEP_GRADIENT:
        E.grad_intercept[0] = E.weight * sums[0]
        return 0
    if E.rule == STEP_MEANFIELD:
        delta = _take_step(intercept, _meanfield_step(prior, 0, sums[1], sums, L.mu,
                                                      intercept[0]))
    elif E.rule == STEP_DRAW:
        delta = _take_step(intercept, _draw_step(prior, 0, sums[1], sums[0],
                                                 L.mu * sums[1], intercept[0]))
    else:
        delta = _take_step(intercept, _bound_step(sums, L.mu, L.third, 0.0, intercept[0]))
    if delta != 0:
        for t in prange(n_threads, num_threads=n_threads, schedule="static", chunksize=1):
            _shift_chunk(t, n_threads, state, L, n, delta)
    return fabs(delta)


# ---- passes over all rows (records in and out, the intercept) --------------------------

cdef void _load_chunk(Py_ssize_t t, int threads, double* state, const Layout* L,
                      const double* y, const double* y_pred, const double* sample_weight,
                      Py_ssize_t n) noexcept nogil:
    """Start the rows' records: prediction (residual for the squared loss), label, weight."""
    cdef Py_ssize_t i, lo, hi
    cdef double* row
    if not thread_range(t, threads, n, &lo, &hi):
        return
    for i in range(lo, hi):
        row = state + i * L.stride
        if L.label >= 0:
            row[PRED] = y_pred[i]
            row[L.label] = y[i]
        else:
            row[PRED] = y_pred[i] - y[i]
        if L.weight >= 0:
            row[L.weight] = sample_weight[i]


cdef void _store_chunk(Py_ssize_t t, int threads, const double* state, const Layout* L,
                       const double* y, double* y_pred, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i, lo, hi
    if not thread_range(t, threads, n, &lo, &hi):
        return
    for i in range(lo, hi):
        y_pred[i] = state[i * L.stride] + (0 if L.label >= 0 else y[i])


cdef void _restride(double* state, Layout* L, Py_ssize_t n,
                    Py_ssize_t stride) noexcept nogil:
    """Move the rows' records to ``stride`` doubles apart, keeping their first L.cache
    (prediction, label, weight; the caches are rebuilt): each pass then reads only the
    record sizes it needs, the linear weights' 1-3 doubles, a block of degree t's 2(t-1)
    more.  In place, in the order that reads each record before it is overwritten."""
    cdef Py_ssize_t i, t, old = L.stride
    if stride < old:
        for i in range(1, n):
            for t in range(L.cache):
                state[i * stride + t] = state[i * old + t]
    elif stride > old:
        for i in range(n - 1, 0, -1):
            for t in range(L.cache - 1, -1, -1):
                state[i * stride + t] = state[i * old + t]
    L.stride = stride


cdef void _intercept_chunk(Py_ssize_t t, int threads, const double* state,
                           const Layout* L, Py_ssize_t n, double* sums) noexcept nogil:
    """Thread t's share of the intercept's sums (those of _entry_terms for the derivative
    1), in sums[N_TERMS * t:N_TERMS * (t + 1)]."""
    cdef Py_ssize_t i, lo, hi
    cdef double curvature, weight
    cdef double* own = sums + N_TERMS * t
    cdef const double* row
    _zero_terms(own)
    if thread_range(t, threads, n, &lo, &hi):
        for i in range(lo, hi):
            row = state + i * L.stride
            weight = _weight(row, L)
            if L.loss == LOGISTIC:
                own[0] += _row_dlosses(row, L.label, L.weight, L.loss, &curvature)
                own[3] += curvature
                own[4] += weight
            else:
                own[0] += _dloss(row, L)
            own[1] += weight


cdef void _shift_chunk(Py_ssize_t t, int threads, double* state, const Layout* L,
                       Py_ssize_t n, double delta) noexcept nogil:
    cdef Py_ssize_t i, lo, hi
    if not thread_range(t, threads, n, &lo, &hi):
        return
    for i in range(lo, hi):
        state[i * L.stride + PRED] += delta


def cd_epoch(data, problem, params, double[::1] y_pred, *, prior=None, gradient=None,
             dict workspace=None, Py_ssize_t thread_min_entries=8192, pass_seconds=None,
             table_checks=None):
    """One epoch of cyclic coordinate descent, in place; returns the largest |step|.

    Parameters
    ----------
    data : polylite._engine.cd_data.CDData
        The rows and what a fit derives from them once (:func:`column_groups` with
        ``disjoint`` false for kernel POLYNOMIAL, :func:`column_moments`, the
        threads).
    problem : polylite._engine.problem.Problem
        Targets, sample weights (summing to 1), kernel, degrees, loss, penalties.
    params : polylite.polynomial._base._OutputParams
        The parameters, updated in place (``intercept`` a length-1 array; ``lam``, the
        output weights of the polynomial kernel, learned when ``problem.fit_lam``).
    y_pred : ndarray of shape (n,)
        The model's current predictions on entry; holds them on return.
    prior : object, optional
        Makes the epoch a sweep of the Gibbs sampler (squared loss, kernel anova or
        all-subsets): every coordinate is drawn from its Gaussian conditional instead of
        minimised (``alpha`` and ``beta`` are then unused).  It has the attributes
        ``feature_group`` (each column's prior group, in [0, G)), ``w_reg``, ``w_mean``
        (G,), ``P_reg``, ``P_mean`` (n_blocks, G, k) and ``gamma_reg``, ``gamma_mean``
        (k,): the precision of each group's Gaussian prior as a penalty (lam / (alpha n)
        for noise precision alpha and n rows: the role of ``alpha``/``beta``) and its
        mean; ``scale``, the variance of a draw times its precision sum_i s_i g_i^2 + reg
        (1 / (alpha n); 0 turns the epoch into coordinate descent towards the prior
        means); ``seed``, the sweep's stream of normal numbers, of which the intercept
        takes number 0, w_j number 1 + j, P[b, j, s] number 1 + d + (b k + s) d + j and
        gamma[r, s] number 1 + d + n_blocks k d + s n_dummy + r.  The intercept's prior
        is flat.  An attribute ``relaxation`` other than 1 (in (0, 2)) over-relaxes every
        draw (see _draw_step).  With an attribute ``variance`` that is not None, the
        epoch is a sweep of mean-field coordinate ascent instead (ANOVA kernel, every
        block of degree 2, no dummies, no relation blocks): the parameters hold the means
        of their Gaussian factors and ``variance.intercept`` (1,), ``variance.w`` (d,)
        and ``variance.P`` (n_blocks, d, k), float64, their variances; each factor in
        turn becomes the optimal one given the others and the prior (no draws), except
        that the factors' means move ``prior.relaxation`` (in (0, 2)) times their
        optimal step (over-relaxation, see _meanfield_step).  The epoch adds to
        ``variance.output_change`` (1,) the change of sum_i Var f(x_i) that the updates
        of the linear weights and factors make (the intercept's, n times the change of
        its variance, is left to the caller).
    gradient : object, optional
        Makes the epoch a gradient pass (anova or all-subsets kernel): no parameter
        moves, and the gradient of the data term sum_i s_i loss(y_i, y_hat_i) in every
        parameter is written into the float64 arrays ``gradient.intercept``, ``w``,
        ``P`` and ``gamma`` (shaped like the parameters; 0 for a term not fitted), each
        coordinate's from the sums its step would use.  On relational input these are
        sums over table rows: what L-BFGS asks for, at the cost of an epoch.
    workspace : dict, optional
        Keeps the per-row records and other work arrays from one call to the next (the
        epochs of one fit), so that an epoch allocates no O(n) memory.
    thread_min_entries : int, default=8192
        A pass over fewer entries per thread runs on one thread (starting the threads
        would cost more than they save).
    pass_seconds : ndarray of shape (n_blocks + 1, len(PASS_KINDS)), optional
        Float64; the wall seconds of each kind of pass (:data:`PASS_KINDS`) are added to
        it: row 0 those of the intercept, the linear weights and the records set up and
        stored, row b + 1 those of factor block b.  The polynomial kernel's passes and
        those over a relational input's tables are not timed apart (the tables' gathers
        count with the fill, their steps not at all).  (For benchmarks: a clock read
        before and after each pass.)
    table_checks : ndarray of shape (len(TABLE_CHECKS),), optional
        Int64; on relational input with the logistic or squared-hinge loss (coordinate
        descent), each relation block's pass is taken on the loss's local model and
        checked (see _block_pass), and how each check ended is counted into it, in the
        order of :data:`TABLE_CHECKS`.

    ``data.n_threads`` threads share each pass over a group's entries (the sums of a
    step are then added in another order: the result agrees with one thread's to
    rounding); the polynomial kernel and the dummy features' passes run on one.

    The epoch's step rule (STEP_MINIMISE, STEP_DRAW with a ``prior``, STEP_MEANFIELD
    with a ``prior`` that has variances, STEP_GRADIENT with ``gradient``) is chosen once
    from these arguments; every pass is the same for every rule.
    """
    X = data.X
    return _epoch(data, problem, params, X.data, X.indices, y_pred, (prior, gradient),
                  (workspace, thread_min_entries, pass_seconds, table_checks))


def _epoch(data, problem, params, const floating[::1] csr_data,
           const index_t[::1] csr_indices, double[::1] y_pred, steps, options):
    """:func:`cd_epoch` for one dtype of the parameters and one index type of X
    (``steps``: (prior, gradient); ``options``: (workspace, thread_min_entries,
    pass_seconds, table_checks)): the set-up, then the passes."""
    prior, gradient = steps
    _check_epoch(data, problem, params, y_pred, gradient)
    cdef floating[:, :, ::1] P = params.P
    cdef floating* factors = &P[0, 0, 0]
    cdef const index_t* group_columns
    cdef Epoch E
    cdef double max_change
    kept = _set_epoch(&E, data, problem, params, csr_data, csr_indices, y_pred, prior,
                      gradient, options)
    group_columns = <const index_t*> E.group_columns
    try:
        with nogil:
            max_change = _run_epoch(&E, factors, group_columns)
    finally:
        free(E.blocks.tables)
    return max_change


# The set-up of an epoch, the data a fit derives once, the polynomial kernel's steps.
include "_cd_setup.pxi"
include "_cd_columns.pxi"
include "_cd_poly.pxi"
