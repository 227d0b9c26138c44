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
draws do not depend on which thread takes the coordinate.

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
"""
import numpy as np
from libc.stdlib cimport malloc, free
from libc.math cimport fabs
from libc.stdint cimport int64_t, uint64_t
from cython.parallel cimport prange

from .._kernels cimport (index_t, floating, thread_range, ANOVA, ALL_SUBSETS,
                        POLYNOMIAL, int_power)
from .._losses cimport (SQUARED, LOGISTIC, loss_smoothness, loss_third_bound,
                        loss_value)
from ._cd_core cimport *
from ._cd_tables cimport (MAX_TABLE_DEGREE, Table, Moments, table_moments, table_fill,
                          table_gather, table_gradients, table_updates, table_push,
                          table_column_sums, table_column_update, table_start_rows)


# The scratch space of each thread beyond the first (see _solvers.cd_threads).
SCRATCH_BYTES_PER_FEATURE = COL_STRIDE * sizeof(double)

# The kinds of pass whose seconds cd_epoch's ``pass_seconds`` counts, in its column order:
# a group's updates fused with the next group's gradients; a group's gradients, or
# updates, alone; the per-column work (scratch records, the threads' sums, the steps);
# a component's caches from the CSR rows; the passes over the records alone.
PASS_KINDS = ("fused", "gradients", "updates", "columns", "fill", "records")


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


# ---- the caches of one component -------------------------------------------------------

cdef void _slot_base(double* base, int kernel, Py_ssize_t width,
                     const floating* gamma, Py_ssize_t n_dummy, Py_ssize_t k,
                     Py_ssize_t s) noexcept nogil:
    """The cache of component s of a row without features (``width`` doubles): the
    dummies' share, nothing else."""
    cdef Py_ssize_t t, r
    if kernel == POLYNOMIAL:
        base[0] = gamma[s] if n_dummy > 0 else 0
    elif kernel == ALL_SUBSETS:
        base[0] = 1  # product of the nonzero factors
        base[1] = 0  # number of zero factors
    else:
        for t in range(width):
            base[t] = 0
        for r in range(n_dummy):
            _add_powers(base, width, gamma[r * k + s], 1.0)


cdef void _reset_slot(double* state, const Layout* L, Py_ssize_t n, Py_ssize_t slot,
                      const double* base) noexcept nogil:
    """Start the cache in ``slot`` of every row from ``base`` (see _slot_base)."""
    cdef Py_ssize_t i, t
    for i in range(n):
        for t in range(L.width):
            state[i * L.stride + slot + t] = base[t]


# ---- one entry of a column ---------------------------------------------------------------
#
# What a coordinate's entry x = x_ij contributes depends on the kind of coordinate; the
# hot loops below exist once per kind, with the kind a constant (see kind_tag), so that
# every branch on it folds away.


# Tag types: a fused argument of one of these types makes Cython write one copy of a
# hot loop per kind, in which the kind is a literal constant.
cdef struct TagLinear:
    char unused
cdef struct TagSubsets:
    char unused
cdef struct TagAnova2:
    char unused
cdef struct TagAnova3:
    char unused
cdef struct TagAnova4:
    char unused
cdef struct TagAnova:
    char unused
cdef struct TagMeanField:
    char unused

ctypedef fused kind_tag:
    TagLinear
    TagSubsets
    TagAnova2
    TagAnova3
    TagAnova4
    TagAnova
    TagMeanField


cdef inline int _tag_kind(kind_tag* tag) noexcept nogil:
    if kind_tag is TagLinear:
        return KIND_LINEAR
    elif kind_tag is TagSubsets:
        return KIND_SUBSETS
    elif kind_tag is TagAnova2:
        return 2
    elif kind_tag is TagAnova3:
        return 3
    elif kind_tag is TagAnova4:
        return 4
    elif kind_tag is TagMeanField:
        return KIND_MEANFIELD
    else:
        return KIND_ANOVA


cdef struct Blocks:
    # The relation blocks of a relational input (none for a CSR matrix), in column order:
    # block b's columns come after the direct groups 0..position[b]-1 (coordinate order).
    Py_ssize_t count
    Table* tables
    const Py_ssize_t* position
    int threads          # of the passes over the interactions
    bint build_next      # the sums passes build the next component's table caches
    bint next_built      # they did (component s - 1's): no table_fill for component s
    # The pass over the rows that ends the last block of a sweep over the columns can be
    # the one that starts the next component (_fill_slot, table_start_rows):
    bint defer           # leave the last block's push to it
    Table* pending       # the block whose push awaits, or NULL
    const double* pending_cache  # the caches of its pass (the table's arrays swap)
    Moments pending_TM
    Py_ssize_t pending_slot
    bint gather_first    # it may start the first block's pass (nothing before it)
    bint first_gathered  # it did


cdef inline void _fill_rows(Py_ssize_t lo, Py_ssize_t hi, double* state, const Layout* L,
                            Py_ssize_t slot, int kernel, int kind, const double* factors,
                            const double* variances, const floating* csr_data,
                            const index_t* csr_indices, const index_t* csr_indptr,
                            const double* base) noexcept nogil:
    """The cache in ``slot`` of rows lo..hi-1 from their CSR entries (``kind`` a literal
    where the callers can: its arithmetic and the slot's width then fold)."""
    cdef Py_ssize_t i, z, t, end = csr_indptr[hi]
    cdef Py_ssize_t width = _width(kind, L.width) if kernel != POLYNOMIAL else L.width
    cdef double q, x, v
    cdef double* D
    for i in range(lo, hi):
        D = state + i * L.stride + slot
        for t in range(width):
            D[t] = base[t]
        for z in range(csr_indptr[i], csr_indptr[i + 1]):
            # The factors are read at random: request them ahead.
            if z + PREFETCH_AHEAD < end:
                POLYLITE_PREFETCH(factors + csr_indices[z + PREFETCH_AHEAD])
            x = csr_data[z]
            q = factors[csr_indices[z]] * x
            if kernel == POLYNOMIAL:
                D[0] += q
            elif kind == KIND_MEANFIELD:
                v = variances[csr_indices[z]]
                D[0] += q
                D[1] += v * x * x
                D[2] += v * q * x * x
            else:
                _add_factor(D, kind, width, q)


cdef void _fill_chunk(Py_ssize_t t, int threads, double* state, const Layout* L,
                      Py_ssize_t n, Py_ssize_t slot, int kernel, int kind,
                      const double* factors, const double* variances,
                      const floating* csr_data, const index_t* csr_indices,
                      const index_t* csr_indptr, const double* base) noexcept nogil:
    cdef Py_ssize_t lo, hi
    if not thread_range(t, threads, n, &lo, &hi):
        return
    if kernel != POLYNOMIAL and kind == 2:  # (the recommender's: a loop of its own)
        _fill_rows(lo, hi, state, L, slot, kernel, 2, factors, variances, csr_data,
                   csr_indices, csr_indptr, base)
    else:
        _fill_rows(lo, hi, state, L, slot, kernel, kind, factors, variances, csr_data,
                   csr_indices, csr_indptr, base)


# ---- a group of row-disjoint columns -----------------------------------------------------
#
# The columns of a group share no row, so updating them one after the other or all at
# once is the same: the gradient of one column reads only rows that no other column of
# the group writes.  CD over a group is therefore two passes over its entries in row order
# (the per-row records are read in increasing address order, not at random as through a
# CSC column): one that sums every column's gradient, one that applies every column's
# step.  Between them, the steps are taken column by column.
#
# A group with an entry in every row (a one-hot field without missing values, a dense
# numeric column) lists its rows as 0..n-1, and when the next group does too, the update
# pass of the one and the gradient pass of the other are one pass over the rows: each row
# is updated for the first group, then read for the second, as sequential CD requires.
# Rows are independent, so the same holds between the last group of component s and the
# first of component s + 1 (without dummies, whose steps need every row updated): a row's
# cache of s + 1 is complete once the last group's step of component s is applied to it.


cdef struct Sweep:
    # What the passes of one sweep share (copied into a local by each pass, so that the
    # compiler knows the row writes cannot change it).
    Layout L
    const Threads* threads
    const double* support  # per column, sum_i s_i over its rows (see column_moments)
    const double* fourth   # degree-2 factors' rows sweeps: per column, sum_i s_i x_ij^4
                           # (column_moments), whence each column's noise sum
                           # (_degree2_noise) where _noise_from_column; else NULL
    Py_ssize_t cur       # cache slot of the component being updated (unused: linear)
    Py_ssize_t nxt       # cache slot of the next component (factors: a slot even without
                         # one, see _apply_entry)
    bint has_next        # there is a next component
    int degree           # for KIND_ANOVA
    double* scratch      # per-column records, COL_STRIDE doubles each
    double* A            # work space of _anova_derivative
    const double* base   # the next component's cache of a row without features, which
                         # the update pass of the first group writes into slot nxt before
                         # its factor (that group has an entry in every row); NULL when
                         # slot nxt was reset by a pass of its own
    int rule             # STEP_*: how the columns move
    const Prior* prior   # STEP_DRAW, STEP_MEANFIELD: the prior of these columns
    double* gradient     # STEP_GRADIENT: each column's data-term gradient
                         # sum_i s_i l'_i g_i recorded here (at the parameter's place)
    double gradient_scale  # the weight the sums leave out (see cd_epoch), or 1


cdef inline void _entry_terms(double x, const double* row, double p, double var,
                              const Sweep* sw, int kind, double* terms) noexcept nogil:
    """Pass 1 for one entry x = x_ij of row i: its shares of column j's sums,
    terms = (s_i l'_i g_i, s_i g_i^2, s_i magnitude_i^2, s_i l''_i g_i^2, s_i |g_i|^3),
    the last two for the logistic loss only (see _bound_step); for a mean-field factor
    (of variance ``var``), the last two are s_i Var(h_i) and s_i Cov(h_i, g_i) instead
    (see _meanfield_step)."""
    cdef double der, magnitude, weight, curvature, rest, rest_var
    cdef const double* D
    weight = row[sw.L.weight] if sw.L.weight >= 0 else 1.0
    der = _factor_derivative(row + sw.cur, kind, sw.degree, p, x, sw.A, &magnitude)
    if kind == KIND_MEANFIELD:
        # h_i = x r with r = sum_{j' != j} p_j' x_ij', of mean D_1 - p x and variance
        # V = D_2 - v x^2 (independent factors); the part of g_i that varies with r is
        # (r^2 - sum_{j' != j} p_j'^2 x_ij'^2) / 2, of covariance with r
        # E[r] V - sum_{j' != j} v_j' p_j' x_ij'^3 = E[r] V - (D_3 - v p x^3).
        D = row + sw.cur
        rest = D[0] - p * x
        rest_var = D[1] - var * x * x
        terms[0] = _row_dloss(row, sw.L.label, sw.L.weight, sw.L.loss) * der
        terms[1] = weight * der * der
        terms[2] = weight * magnitude * magnitude
        terms[3] = weight * x * x * rest_var
        terms[4] = weight * x * (rest * rest_var - (D[2] - var * p * x * x * x))
        return
    if sw.L.loss == LOGISTIC:
        terms[0] = _row_dlosses(row, sw.L.label, sw.L.weight, sw.L.loss, &curvature) * der
        terms[3] = curvature * der * der
        terms[4] = weight * fabs(der) * der * der
    else:
        terms[0] = _row_dloss(row, sw.L.label, sw.L.weight, sw.L.loss) * der
        terms[3] = terms[4] = 0
    terms[1] = weight * der * der
    terms[2] = weight * magnitude * magnitude


cdef inline void _gather(double* col, double* sums, const double* terms,
                         bint single, int count) noexcept nogil:
    """Pass 1: add an entry's first ``count`` terms to its column's record, or for a
    group of one column to the sums kept in registers until the end of the pass
    (consecutive additions to one memory location would wait for each other)."""
    cdef int t
    if single:
        for t in range(count):
            sums[t] += terms[t]
    else:
        _add_terms(col, terms, count)


cdef struct Move:
    # What pass 2 applies to the entries of one column (from its scratch record, _move).
    double delta    # the step
    double p        # the value before it
    double p_next   # the column's value in the next component (0: none)
    double var      # mean-field factors: the variance before and after the step,
    double var_new  # and in the next component
    double var_next


cdef inline Move _move(const double* col, int kind) noexcept nogil:
    cdef Move move
    move.delta = col[COL_STEP]
    move.p = col[COL_P]
    move.p_next = col[COL_NEXT]
    if kind == KIND_MEANFIELD:
        move.var = col[COL_VAR_OLD]
        move.var_new = col[COL_VAR_NEW]
        move.var_next = col[COL_VAR_NEXT]
    else:
        move.var = move.var_new = move.var_next = 0
    return move


cdef inline void _apply_meanfield(const Move* m, double x, double* row, const Sweep* sw,
                                  bint reset) noexcept nogil:
    """_apply_entry for a mean-field factor: its cache holds the variances' sums too."""
    cdef double* D = row + sw.cur
    cdef double* N = row + sw.nxt
    cdef double q = m.p * x, q_new = (m.p + m.delta) * x, x2 = x * x
    cdef Py_ssize_t t
    row[PRED] += m.delta * x * (D[0] - q)
    D[0] += q_new - q
    D[1] += (m.var_new - m.var) * x2
    D[2] += (m.var_new * q_new - m.var * q) * x2
    if reset:
        for t in range(3):
            N[t] = sw.base[t]
    N[0] += m.p_next * x
    N[1] += m.var_next * x2
    N[2] += m.var_next * m.p_next * x * x2


cdef inline void _apply_entry(const Move* m, double x, double* row, const Sweep* sw,
                              int kind, bint reset) noexcept nogil:
    """Pass 2 for one entry x = x_ij: apply column j's step m.delta (from value m.p)
    to the row's prediction and cache, and add the next component's factor
    (m.p_next x) to the row's next cache (started from sw.base first if ``reset``).

    Without a next component p_next is 0 and slot nxt is a dead slot (never read before
    it is filled again): adding to it anyway keeps a branch out of the hot loops.
    """
    cdef double magnitude, delta = m.delta, p = m.p
    cdef double fresh[3]
    cdef Py_ssize_t t
    if kind == KIND_LINEAR:
        row[PRED] += delta * x
        return
    if kind == KIND_MEANFIELD:
        _apply_meanfield(m, x, row, sw, reset)
        return
    # A zero step changes nothing: skip it, except where the closed forms make it exact
    # arithmetic (q - q = 0), cheaper than a branch in the loop.
    if delta != 0 or kind == 2 or kind == 3 or kind == 4:
        row[PRED] += delta * _factor_derivative(row + sw.cur, kind, sw.degree, p, x, sw.A,
                                                &magnitude)
        _swap_factor(row + sw.cur, kind, sw.L.width, p * x, (p + delta) * x)
    if reset and kind != KIND_ANOVA:
        # Started in registers and stored once: a slot just stored one double at a time
        # and read back by one wider load would wait for the stores to reach the cache.
        for t in range(_width(kind, sw.L.width)):
            fresh[t] = sw.base[t]
        _add_factor(fresh, kind, sw.L.width, m.p_next * x)
        for t in range(_width(kind, sw.L.width)):
            row[sw.nxt + t] = fresh[t]
        return
    if reset:
        for t in range(sw.L.width):
            row[sw.nxt + t] = sw.base[t]
    _add_factor(row + sw.nxt, kind, sw.L.width, m.p_next * x)


# The passes.  Each is written once, as an inline function whose last arguments are
# flags that its callers pass as literal constants, so that the compiler writes one loop
# per combination with the tests folded away:
#   simple       squared loss and uniform weights (no label, no weight, no loss switch);
#   done_single  the group whose steps are applied is one column: its scratch record is
#                read once, not looked up (and prefetched) per row;
#   single       the group whose sums are taken is one column: its sums stay in
#                registers until the end (consecutive additions to one memory location
#                would wait for each other).

cdef enum:
    # What the loop of a pass may take as constants (its ``mode``, a literal):
    ANY_LOSS = 0    # nothing
    SIMPLE = 1      # the squared loss and uniform weights (no label, no weight)
    LOGISTIC_LOSS = 2  # the logistic loss (its label in the record; weights either way)


cdef inline void _assume(Sweep* sw, int mode) noexcept nogil:
    """Make the local copy of a sweep say what ``mode`` promises, as constants."""
    if mode == SIMPLE:
        sw.L.label = -1
        sw.L.weight = -1
        sw.L.loss = SQUARED
    elif mode == LOGISTIC_LOSS:
        sw.L.label = 1
        sw.L.loss = LOGISTIC


cdef inline int _mode(const Layout* L) noexcept nogil:
    if L.label < 0 and L.weight < 0 and L.loss == SQUARED:
        return SIMPLE
    return LOGISTIC_LOSS if L.loss == LOGISTIC else ANY_LOSS


cdef inline void _gradient_rows(const index_t* rows, const index_t* columns,
                                const floating* values, Py_ssize_t count,
                                const Sweep* sweep, double* state, int kind,
                                int mode, bint single) noexcept nogil:
    """Pass 1 over a group's entries."""
    cdef Py_ssize_t z
    cdef Sweep sw = sweep[0]
    cdef double terms[N_TERMS]
    cdef double sums[N_TERMS]
    cdef double* col = _column_record(sw.scratch, columns, 0)
    cdef double p = col[COL_P]
    cdef double var = col[COL_VAR] if kind == KIND_MEANFIELD else 0.0
    _assume(&sw, mode)
    cdef int n_terms = _n_terms(&sw.L, kind)
    _zero_terms(sums)
    for z in range(count):
        _prefetch_row(state, sw.L.stride, rows, z, count)
        if not single:
            col = _record(sw.scratch, columns, z, count)
            p = col[COL_P]
            if kind == KIND_MEANFIELD:
                var = col[COL_VAR]
        _entry_terms(_value(values, z), state + _row_of(rows, z) * sw.L.stride, p, var,
                     &sw, kind, terms)
        _gather(col, sums, terms, single, n_terms)
    if single:
        _add_terms(col, sums, n_terms)


cdef inline void _update_rows(const index_t* rows, const index_t* columns,
                              const floating* values, Py_ssize_t count,
                              const Sweep* sweep, bint reset, double* state, int kind,
                              bint single) noexcept nogil:
    """Pass 2 over a group's entries."""
    cdef Py_ssize_t z
    cdef Sweep sw = sweep[0]
    cdef const double* col = _column_record(sw.scratch, columns, 0)
    cdef Move move = _move(col, kind)
    for z in range(count):
        _prefetch_row(state, sw.L.stride, rows, z, count)
        if not single:
            col = _record(sw.scratch, columns, z, count)
            move = _move(col, kind)
        _apply_entry(&move, _value(values, z), state + _row_of(rows, z) * sw.L.stride,
                     &sw, kind, reset)


cdef inline void _fused_span(Py_ssize_t lo, Py_ssize_t hi, bint ahead,
                             const index_t* done_columns, const floating* done_values,
                             const Sweep* dsw, bint reset, const index_t* columns,
                             const floating* values, const Sweep* sw, double* state,
                             int kind, int n_terms, bint done_single, bint single,
                             bint done_unit, bint unit, double* sums) noexcept nogil:
    """_fused_rows over entries lo..hi-1, adding to ``sums`` (groups of one column).
    ``ahead`` (a literal): the entries PREFETCH_AHEAD further on exist, so that their
    scratch records are requested without a test per entry."""
    cdef Py_ssize_t z
    cdef double terms[N_TERMS]
    cdef double acc[N_TERMS]
    cdef double* row
    cdef const double* done = _column_record(dsw.scratch, done_columns, 0)
    cdef Move move = _move(done, kind)
    cdef double* col = _column_record(sw.scratch, columns, 0)
    cdef double p = col[COL_P]
    cdef double var = col[COL_VAR] if kind == KIND_MEANFIELD else 0.0
    cdef int t
    for t in range(n_terms):  # (in registers for the loop)
        acc[t] = sums[t]
    for z in range(lo, hi):
        row = state + z * sw.L.stride
        if not done_single:
            if ahead:
                _request_record(dsw.scratch, done_columns, z + PREFETCH_AHEAD)
            done = _column_record(dsw.scratch, done_columns, z)
            move = _move(done, kind)
        _apply_entry(&move, 1.0 if done_unit else done_values[z], row, dsw, kind, reset)
        if not single:
            if ahead:
                _request_record(sw.scratch, columns, z + PREFETCH_AHEAD)
            col = _column_record(sw.scratch, columns, z)
            p = col[COL_P]
            if kind == KIND_MEANFIELD:
                var = col[COL_VAR]
        _entry_terms(1.0 if unit else values[z], row, p, var, sw, kind, terms)
        _gather(col, acc, terms, single, n_terms)
    for t in range(n_terms):
        sums[t] = acc[t]


cdef inline void _fused_rows(const index_t* done_columns, const floating* done_values,
                             const Sweep* done_sweep, bint reset,
                             const index_t* columns, const floating* values,
                             const Sweep* sweep, Py_ssize_t n, double* state, int kind,
                             int mode, bint done_single, bint single, bint done_unit,
                             bint unit) noexcept nogil:
    """Pass 2 of a group (of ``done_sweep``, with ``reset`` as in _apply_entry) and pass 1
    of the next (of ``sweep``: the same, or the next component's), both with an entry in
    every row.  ``done_unit``, ``unit``: the group's values are all 1 (and not stored)."""
    cdef Sweep dsw = done_sweep[0]
    cdef Sweep sw = sweep[0]
    cdef double sums[N_TERMS]
    _assume(&sw, mode)
    cdef int n_terms = _n_terms(&sw.L, kind)
    # The entries with one PREFETCH_AHEAD further on, then the rest.
    cdef Py_ssize_t split = n - PREFETCH_AHEAD if n > PREFETCH_AHEAD else 0
    _zero_terms(sums)
    _fused_span(0, split, True, done_columns, done_values, &dsw, reset, columns, values,
                &sw, state, kind, n_terms, done_single, single, done_unit, unit, sums)
    _fused_span(split, n, False, done_columns, done_values, &dsw, reset, columns, values,
                &sw, state, kind, n_terms, done_single, single, done_unit, unit, sums)
    if single:
        _add_terms(_column_record(sw.scratch, columns, 0), sums, n_terms)


cdef struct Pending:
    # A group with an entry in every row whose update pass waits to share the pass of
    # the gradients of the next group, of its component or of the next one.
    Py_ssize_t group     # the group, or -1: none
    bint single
    bint reset           # see _apply_entry
    Sweep sweep          # of its component


cdef inline void _gradients_range(const index_t* rows, const index_t* columns,
                                  const floating* values, Py_ssize_t count, bint single,
                                  const Sweep* sw, double* state,
                                  kind_tag* tag) noexcept nogil:
    cdef int kind = _tag_kind(tag)
    cdef int mode = _mode(&sw.L)
    if mode == SIMPLE:
        if single:
            _gradient_rows(rows, columns, values, count, sw, state, kind, SIMPLE, True)
        else:
            _gradient_rows(rows, columns, values, count, sw, state, kind, SIMPLE, False)
    elif mode == LOGISTIC_LOSS:
        if single:
            _gradient_rows(rows, columns, values, count, sw, state, kind, LOGISTIC_LOSS,
                           True)
        else:
            _gradient_rows(rows, columns, values, count, sw, state, kind, LOGISTIC_LOSS,
                           False)
    elif single:
        _gradient_rows(rows, columns, values, count, sw, state, kind, ANY_LOSS, True)
    else:
        _gradient_rows(rows, columns, values, count, sw, state, kind, ANY_LOSS, False)


cdef inline void _updates_range(const index_t* rows, const index_t* columns,
                                const floating* values, Py_ssize_t count, bint single,
                                const Sweep* sw, bint reset, double* state,
                                kind_tag* tag) noexcept nogil:
    cdef int kind = _tag_kind(tag)
    if single:
        _update_rows(rows, columns, values, count, sw, reset, state, kind, True)
    else:
        _update_rows(rows, columns, values, count, sw, reset, state, kind, False)


cdef inline void _fused_units(const Pending* done, const index_t* done_columns,
                              const floating* done_values, const index_t* columns,
                              const floating* values, const Sweep* sw, Py_ssize_t n,
                              double* state, int kind, bint done_single, bint single,
                              bint split) noexcept nogil:
    """_fused_rows of a simple sweep (squared loss, uniform weights), the one-column flags
    literal.  With ``split``, so are the flags of the groups whose values are 1 and not
    stored: only groups of several columns can be one (one column stores its values);
    and between two such groups (user and item, the recommender's pass) ``reset`` too."""
    cdef const Sweep* dsw = &done.sweep
    cdef bint done_unit = not done_single and done_values == NULL
    cdef bint unit = not single and values == NULL
    if not split:
        _fused_rows(done_columns, done_values, dsw, done.reset, columns, values, sw, n,
                    state, kind, SIMPLE, done_single, single, done_unit, unit)
    elif done_unit and unit and done.reset:
        _fused_rows(done_columns, done_values, dsw, True, columns, values, sw, n,
                    state, kind, SIMPLE, done_single, single, True, True)
    elif done_unit and unit:
        _fused_rows(done_columns, done_values, dsw, False, columns, values, sw, n,
                    state, kind, SIMPLE, done_single, single, True, True)
    elif done_unit:
        _fused_rows(done_columns, done_values, dsw, done.reset, columns, values, sw, n,
                    state, kind, SIMPLE, done_single, single, True, False)
    elif unit:
        _fused_rows(done_columns, done_values, dsw, done.reset, columns, values, sw, n,
                    state, kind, SIMPLE, done_single, single, False, True)
    else:
        _fused_rows(done_columns, done_values, dsw, done.reset, columns, values, sw, n,
                    state, kind, SIMPLE, done_single, single, False, False)


cdef inline void _fused_range(const Pending* done, const index_t* done_columns,
                              const floating* done_values, const index_t* columns,
                              const floating* values, bint single, const Sweep* sw,
                              Py_ssize_t n, double* state, kind_tag* tag) noexcept nogil:
    cdef int kind = _tag_kind(tag)
    # One-hot fields (several columns, values 1, not stored) have loops of their own for
    # the linear weights, degrees 2 and 3 and the mean-field factors, the recommender
    # case, where the arithmetic shrinks; the other loops test for them.
    cdef bint ones = kind == KIND_LINEAR or kind == 2 or kind == 3 or kind == KIND_MEANFIELD
    cdef int mode = _mode(&sw.L)
    if mode == LOGISTIC_LOSS and done.single and single:  # dense columns, classification
        _fused_rows(done_columns, done_values, &done.sweep, done.reset, columns, values,
                    sw, n, state, kind, LOGISTIC_LOSS, True, True, False, False)
    elif mode == LOGISTIC_LOSS:  # one loop, with the tests
        _fused_rows(done_columns, done_values, &done.sweep, done.reset, columns, values,
                    sw, n, state, kind, LOGISTIC_LOSS, done.single, single,
                    done_values == NULL, values == NULL)
    elif mode == ANY_LOSS:
        _fused_rows(done_columns, done_values, &done.sweep, done.reset, columns, values,
                    sw, n, state, kind, ANY_LOSS, done.single, single, done_values == NULL,
                    values == NULL)
    elif done.single and single:
        _fused_units(done, done_columns, done_values, columns, values, sw, n, state, kind,
                     True, True, ones)
    elif done.single:
        _fused_units(done, done_columns, done_values, columns, values, sw, n, state, kind,
                     True, False, ones)
    elif single:
        _fused_units(done, done_columns, done_values, columns, values, sw, n, state, kind,
                     False, True, ones)
    else:
        _fused_units(done, done_columns, done_values, columns, values, sw, n, state, kind,
                     False, False, ones)


# Each pass over a group's entries runs on sw.threads.count threads, thread t on the t-th
# run of entries (_chunk), with its own work space and scratch records for the sums
# (_thread_sweep).


cdef inline void _thread_sweep(Sweep* local, Py_ssize_t t, bint sums) noexcept nogil:
    """Make ``local`` (a copy of the sweep) use thread t's work space for
    _anova_derivative and, with ``sums``, sum into thread t's scratch records."""
    local.A = local.threads.work + t * local.threads.work_stride
    if sums and t > 0:
        local.scratch = local.threads.private + (t - 1) * local.threads.stride


cdef void _pass_chunk(Py_ssize_t t, Py_ssize_t threads, const index_t* rows,
                      const index_t* columns,
                      const floating* values, Py_ssize_t count, bint single,
                      const Sweep* sw, bint update, bint reset, double* state,
                      kind_tag* tag) noexcept nogil:
    cdef Py_ssize_t lo, hi
    cdef Sweep local = sw[0]
    cdef const index_t* chunk_rows
    cdef const floating* chunk_values
    cdef double* chunk_state
    if not thread_range(t, threads, count, &lo, &hi):
        return
    _thread_sweep(&local, t, not update)
    # A group with an entry in every row lists no rows: its entry z is row z.
    chunk_rows = rows + lo if rows != NULL else NULL
    chunk_state = state if rows != NULL else state + lo * sw.L.stride
    chunk_values = values + lo if values != NULL else NULL
    if update:
        _updates_range(chunk_rows, columns if single else columns + lo, chunk_values,
                       hi - lo, single, &local, reset, chunk_state, tag)
    else:
        _gradients_range(chunk_rows, columns if single else columns + lo, chunk_values,
                         hi - lo, single, &local, chunk_state, tag)


cdef void _pass_of(const index_t* rows, const index_t* columns, const floating* values,
                   Py_ssize_t count, bint single, const Sweep* sw, bint update, bint reset,
                   double* state, kind_tag* tag) noexcept nogil:
    """Pass 1 (gradients) or, with ``update``, pass 2 over a group's entries."""
    cdef Py_ssize_t t, threads = _row_threads(sw.threads, count)
    if count == 0:
        return
    if threads == 1:
        _pass_chunk(0, 1, rows, columns, values, count, single, sw, update, reset, state,
                    tag)
        return
    for t in prange(threads, num_threads=threads, schedule="static", chunksize=1):
        _pass_chunk(t, threads, rows, columns, values, count, single, sw, update, reset,
                    state, tag)


cdef void _fused_chunk(Py_ssize_t t, Py_ssize_t threads, const Pending* done,
                       const index_t* done_columns,
                       const floating* done_values, const index_t* columns,
                       const floating* values, bint single, const Sweep* sw,
                       Py_ssize_t n, double* state, kind_tag* tag) noexcept nogil:
    cdef Py_ssize_t lo, hi
    cdef Sweep local = sw[0]
    cdef Pending local_done = done[0]
    if not thread_range(t, threads, n, &lo, &hi):
        return
    _thread_sweep(&local, t, True)
    _thread_sweep(&local_done.sweep, t, False)
    _fused_range(&local_done, done_columns if done.single else done_columns + lo,
                 done_values + lo if done_values != NULL else NULL,
                 columns if single else columns + lo,
                 values + lo if values != NULL else NULL, single, &local, hi - lo,
                 state + lo * sw.L.stride, tag)


cdef void _fused_of(const Pending* done, const index_t* done_columns,
                    const floating* done_values, const index_t* columns,
                    const floating* values, bint single, const Sweep* sw,
                    Py_ssize_t n, double* state, kind_tag* tag) noexcept nogil:
    cdef Py_ssize_t t, threads = _row_threads(sw.threads, n)
    if n == 0:
        return
    if threads == 1:
        _fused_chunk(0, 1, done, done_columns, done_values, columns, values, single, sw, n,
                     state, tag)
        return
    for t in prange(threads, num_threads=threads, schedule="static", chunksize=1):
        _fused_chunk(t, threads, done, done_columns, done_values, columns, values, single,
                     sw, n, state, tag)


# Dispatch to the copy of each pass for the kind.

cdef inline void _run_of(const Pending* done, const index_t* done_columns,
                         const floating* done_values, const index_t* rows,
                         const index_t* columns, const floating* values, Py_ssize_t count,
                         bint single, const Sweep* sw, bint update, bint reset,
                         double* state, kind_tag* tag) noexcept nogil:
    if done != NULL:
        _fused_of(done, done_columns, done_values, columns, values, single, sw, count,
                  state, tag)
    else:
        _pass_of(rows, columns, values, count, single, sw, update, reset, state, tag)


cdef void _run(const Pending* done, const index_t* done_columns,
               const floating* done_values, const index_t* rows, const index_t* columns,
               const floating* values, Py_ssize_t count, bint single, const Sweep* sw,
               bint update, bint reset, double* state, int kind) noexcept nogil:
    """The pass of _pass, or with ``done`` that of _fused, in the copy for ``kind``."""
    cdef double start = _clock_start(sw.threads)
    if kind == KIND_LINEAR:
        _run_of(done, done_columns, done_values, rows, columns, values, count, single, sw,
                update, reset, state, <TagLinear*> NULL)
    elif kind == KIND_SUBSETS:
        _run_of(done, done_columns, done_values, rows, columns, values, count, single, sw,
                update, reset, state, <TagSubsets*> NULL)
    elif kind == 2:
        _run_of(done, done_columns, done_values, rows, columns, values, count, single, sw,
                update, reset, state, <TagAnova2*> NULL)
    elif kind == 3:
        _run_of(done, done_columns, done_values, rows, columns, values, count, single, sw,
                update, reset, state, <TagAnova3*> NULL)
    elif kind == 4:
        _run_of(done, done_columns, done_values, rows, columns, values, count, single, sw,
                update, reset, state, <TagAnova4*> NULL)
    elif kind == KIND_MEANFIELD:
        _run_of(done, done_columns, done_values, rows, columns, values, count, single, sw,
                update, reset, state, <TagMeanField*> NULL)
    else:
        _run_of(done, done_columns, done_values, rows, columns, values, count, single, sw,
                update, reset, state, <TagAnova*> NULL)
    _clock_add(sw.threads, PASS_FUSED if done != NULL else
               (PASS_UPDATES if update else PASS_GRADIENTS), start)


cdef inline void _pass(const index_t* rows, const index_t* columns, const floating* values,
                       Py_ssize_t count, bint single, const Sweep* sw, bint update,
                       bint reset, double* state, int kind) noexcept nogil:
    """Pass 1 (gradients) or, with ``update``, pass 2 over a group's entries."""
    _run(NULL, NULL, NULL, rows, columns, values, count, single, sw, update, reset, state,
         kind)


cdef inline void _fused(const Pending* done, const index_t* done_columns,
                        const floating* done_values, const index_t* columns,
                        const floating* values, bint single, const Sweep* sw, Py_ssize_t n,
                        double* state, int kind) noexcept nogil:
    """Pass 2 of the pending group and pass 1 of the next (see _fused_rows)."""
    _run(done, done_columns, done_values, NULL, columns, values, n, single, sw, False,
         False, state, kind)


cdef void _steps_chunk(Py_ssize_t t, int threads, const index_t* group_columns,
                       Py_ssize_t count, const Sweep* sw, floating* param,
                       Py_ssize_t param_stride, double mu, double reg,
                       double* max_change) noexcept nogil:
    cdef Py_ssize_t c, j, lo, hi
    cdef double* col
    cdef double p, p_new, delta, var, var_new, largest = 0, change = 0
    # (locals: the compiler then knows the parameters' writes cannot change them)
    cdef int rule = sw.rule
    cdef double* scratch = sw.scratch
    cdef const double* support = sw.support
    cdef const Prior* prior = sw.prior
    cdef double third = sw.L.third
    cdef double* gradient = sw.gradient
    cdef double gradient_scale = sw.gradient_scale
    cdef bint has_next = sw.has_next
    cdef const double* fourth = sw.fourth
    if thread_range(t, threads, count, &lo, &hi):
        for c in range(lo, hi):
            j = group_columns[c]
            col = scratch + j * COL_STRIDE
            if rule == STEP_GRADIENT:
                gradient[j * param_stride] = gradient_scale * col[COL_GRAD]
                col[COL_STEP] = 0
                continue
            p = col[COL_P]
            var = col[COL_VAR]
            if fourth != NULL:  # (in the sums' scale: without the weight they leave out)
                col[COL_NOISE] = _degree2_noise(col[COL_CURV], p,
                                                fourth[j] / gradient_scale)
            delta = _take_step(param + j * param_stride,
                               _coordinate_step(rule, prior, j, support[j], col + COL_GRAD,
                                                mu, third, reg, p))
            largest = max(largest, fabs(delta))
            col[COL_STEP] = delta
            if rule == STEP_MEANFIELD:
                # The change of sum_i Var f(x_i) from the column's sums (see
                # _meanfield_variance_change), then what pass 2 needs (over the sums).
                p_new = param[j * param_stride]
                var_new = prior.variance[j * prior.variance_stride]
                change += _meanfield_variance_change(col + COL_GRAD, p, p_new, var,
                                                     var_new)
                col[COL_VAR_OLD] = var
                col[COL_VAR_NEW] = var_new
                col[COL_VAR_NEXT] = (prior.variance[j * prior.variance_stride + 1]
                                     if has_next else 0.0)
    max_change[t] = largest
    if rule == STEP_MEANFIELD:
        sw.threads.variance_change[t] += change


cdef inline double _meanfield_variance_change(const double* sums, double p, double p_new,
                                              double var, double var_new) noexcept nogil:
    """The change of sum_i Var f(x_i) when a mean-field factor moves from (p, var) to
    (p_new, var_new), from its sums ``sums[0:N_TERMS]`` (_entry_terms, uniform weights).

    With a_j = p_j x_j and u_j = v_j x_j^2, a component's output on row i has the
    variance sum_j u_j (M - a_j)^2 + sum_{j < j'} u_j u_j' (M = sum_j a_j), which depends
    on the entry's (a, u) through 2 a (R U' - W') + a^2 U' + u (R^2 + U'), with R = M - a
    and U', W' the sums of u_j and u_j a_j over the row's other entries.  Summed over
    the column's rows, x (R U' - W'), x^2 U' and (x R)^2 are the sums of Cov(h, g),
    Var(h) and E[h]^2 that the step took.  For a linear weight (sums[3] = sums[4] = 0),
    it is (var_new - var) sum_i x_ij^2, as it should."""
    return (2 * (p_new - p) * sums[4] + (p_new * p_new - p * p) * sums[3]
            + (var_new - var) * (sums[1] + sums[3]))


cdef void _group_steps(const index_t* group_columns, Py_ssize_t count, const Sweep* sw,
                       floating* param, Py_ssize_t param_stride, double mu, double reg,
                       double* max_change) noexcept nogil:
    """Between the passes: take every column's step, store it, and note it in scratch
    (or, with sw.gradient, record each column's gradient instead of a step)."""
    cdef Py_ssize_t t
    cdef int threads = _column_threads(sw.threads, count)
    cdef double* largest = sw.threads.partial
    if threads == 1:
        _steps_chunk(0, 1, group_columns, count, sw, param, param_stride, mu, reg, largest)
    else:
        for t in prange(threads, num_threads=threads, schedule="static", chunksize=1):
            _steps_chunk(t, threads, group_columns, count, sw, param, param_stride, mu, reg,
                         largest)
    for t in range(threads):
        max_change[0] = max(max_change[0], largest[t])


cdef inline void _start_sums(double* col, double p) noexcept nogil:
    col[COL_P] = p
    _zero_terms(col + COL_GRAD)


cdef void _start_chunk(Py_ssize_t t, int threads, const index_t* group_columns,
                       Py_ssize_t count, const Sweep* sw, const floating* param,
                       Py_ssize_t param_stride, int pass_threads) noexcept nogil:
    cdef Py_ssize_t c, j, other, lo, hi
    cdef double* col
    cdef const Threads* th = sw.threads
    if not thread_range(t, threads, count, &lo, &hi):
        return
    cdef const Prior* prior = sw.prior
    cdef bint meanfield = sw.rule == STEP_MEANFIELD
    cdef double* private
    for c in range(lo, hi):
        j = group_columns[c]
        col = sw.scratch + j * COL_STRIDE
        _start_sums(col, param[j * param_stride])
        col[COL_NEXT] = param[j * param_stride + 1] if sw.has_next else 0
        if meanfield:
            col[COL_VAR] = prior.variance[j * prior.variance_stride]
        for other in range(pass_threads - 1):
            private = th.private + other * th.stride + j * COL_STRIDE
            _start_sums(private, col[COL_P])
            if meanfield:
                private[COL_VAR] = col[COL_VAR]


cdef void _group_start(const index_t* group_columns, Py_ssize_t count, const Sweep* sw,
                       const floating* param, Py_ssize_t param_stride,
                       int pass_threads) noexcept nogil:
    """Before pass 1: each column's current value (and next component's), zero sums, in
    the shared scratch records and in those of the pass's other threads."""
    cdef Py_ssize_t t
    cdef int threads = _column_threads(sw.threads, count)
    if threads == 1:
        _start_chunk(0, 1, group_columns, count, sw, param, param_stride, pass_threads)
        return
    for t in prange(threads, num_threads=threads, schedule="static", chunksize=1):
        _start_chunk(t, threads, group_columns, count, sw, param, param_stride,
                     pass_threads)


cdef void _reduce_chunk(Py_ssize_t t, int threads, const index_t* group_columns,
                        Py_ssize_t count, const Sweep* sw, int pass_threads) noexcept nogil:
    cdef Py_ssize_t c, j, other, lo, hi
    cdef const Threads* th = sw.threads
    # (the sums of a mean-field factor's steps, else of any kind of the loss: the
    # linear weights' of a mean-field sweep have no more)
    cdef int n_terms = (N_TERMS if sw.rule == STEP_MEANFIELD
                        else _n_terms(&sw.L, KIND_LINEAR))
    if not thread_range(t, threads, count, &lo, &hi):
        return
    for c in range(lo, hi):
        j = group_columns[c]
        for other in range(pass_threads - 1):
            _add_terms(sw.scratch + j * COL_STRIDE,
                       th.private + other * th.stride + j * COL_STRIDE + COL_GRAD,
                       n_terms)


cdef void _group_reduce(const index_t* group_columns, Py_ssize_t count,
                        const Sweep* sw, int pass_threads) noexcept nogil:
    """After pass 1: add the pass's other threads' sums to the shared records, in thread
    order (so that a fit is the same from one run to the next)."""
    cdef Py_ssize_t t
    cdef int threads = _column_threads(sw.threads, count)
    if pass_threads == 1:
        return
    if threads == 1:
        _reduce_chunk(0, 1, group_columns, count, sw, pass_threads)
        return
    for t in prange(threads, num_threads=threads, schedule="static", chunksize=1):
        _reduce_chunk(t, threads, group_columns, count, sw, pass_threads)


cdef void _flush(Pending* pending, const Groups* G, const index_t* group_columns,
                 const index_t* columns, const floating* values, Py_ssize_t n,
                 double* state, int kind) noexcept nogil:
    """The update pass of the pending group, if any, on its own."""
    cdef Py_ssize_t g = pending.group
    if g >= 0:
        _pass(NULL, _entry_columns(G, group_columns, columns, g),
              _group_values(G, values, g), n, pending.single, &pending.sweep, True, pending.reset, state, kind)
        pending.group = -1


cdef inline double _unseen_columns(const index_t* group_columns, Py_ssize_t count,
                                   floating* param, Py_ssize_t param_stride,
                                   const Sweep* sw, double mu, double reg) noexcept nogil:
    """The steps of ``count`` columns no row shows: each the unseen rule's (to 0, see
    _unseen_or_step; the sampler's: a draw from the prior), from sums of zero and
    without scratch records; a gradient pass records their gradients, 0.  Returns the
    largest |step|."""
    cdef Py_ssize_t c, j
    cdef double max_change = 0
    cdef double unseen[N_TERMS]
    _zero_terms(unseen)
    for c in range(count):
        j = group_columns[c]
        if sw.rule == STEP_GRADIENT:
            sw.gradient[j * param_stride] = 0
            continue
        max_change = max(max_change, fabs(_take_step(
            param + j * param_stride,
            _coordinate_step(sw.rule, sw.prior, j, 0.0, unseen, mu, sw.L.third, reg,
                             param[j * param_stride]))))
    return max_change


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
            _fused(pending, _entry_columns(G, group_columns, columns, pending.group),
                   _group_values(G, values, pending.group),
                   _entry_columns(G, group_columns, columns, g), _group_values(G, values, g),
                   single, sw, n, state, kind)
            pending.group = -1
        else:
            _flush(pending, G, group_columns, columns, values, n, state, kind)
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
        else:
            _pass(_group_rows(G, rows, g), _entry_columns(G, group_columns, columns, g),
                  _group_values(G, values, g), e1 - e0, single, sw, True, pending.reset,
                  state, kind)
    if not keep_last:
        _flush(pending, G, group_columns, columns, values, n, state, kind)
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
    largest |step|."""
    cdef Py_ssize_t g, e0, e1, c0, c1, j
    cdef int pass_threads
    cdef double max_change = 0, p, delta
    cdef double sums[N_TERMS]
    cdef Moments TM = table_moments(kind, sw.degree)
    TM.squared = sw.L.loss == SQUARED
    # The moments hold the (bound's) curvature: steps with mu = 1, no cubic term.
    cdef Sweep tsw = sw[0]
    tsw.L.third = 0
    tsw.fourth = NULL  # (the moments sum the noise)
    tsw.has_next = build_next  # COL_NEXT: the columns' values in the next component
    if not gathered:  # (else the component's start gathered it)
        table_gather(T, &TM, E.state, &sw.L, E.n, sw.cur, E.blocks.threads, done)
    for g in range(T.n_groups):
        e0 = T.group_ptr[g]
        e1 = T.group_ptr[g + 1]
        c0 = T.columns_ptr[g]
        c1 = T.columns_ptr[g + 1]
        if e1 == e0:
            max_change = max(max_change, _unseen_columns(
                T.group_columns + c0, c1 - c0, param, param_stride, &tsw, 1.0, reg))
            continue
        pass_threads = _row_threads(tsw.threads, e1 - e0)
        if c1 - c0 == 1 and pass_threads == 1:
            # One column on one thread (an implicit set's columns, mostly): its sums,
            # step and update directly, without the scratch records.
            j = T.group_columns[c0]
            p = param[j * param_stride]
            table_column_sums(T, &TM, g, p,
                              param[j * param_stride + 1] if build_next else 0.0, sums)
            if tsw.rule == STEP_GRADIENT:
                tsw.gradient[j * param_stride] = tsw.gradient_scale * sums[0]
                continue
            delta = _take_step(param + j * param_stride, _coordinate_step(
                tsw.rule, tsw.prior, j, tsw.support[j], sums, 1.0, 0.0, reg, p))
            if delta != 0:
                table_column_update(T, &TM, g, p, delta)
                max_change = max(max_change, fabs(delta))
            continue
        _group_start(T.group_columns + c0, c1 - c0, &tsw, param, param_stride, pass_threads)
        table_gradients(T, &TM, g, tsw.scratch, tsw.threads, pass_threads)
        _group_reduce(T.group_columns + c0, c1 - c0, &tsw, pass_threads)
        _group_steps(T.group_columns + c0, c1 - c0, &tsw, param, param_stride, 1.0, reg,
                     &max_change)
        if tsw.rule != STEP_GRADIENT:
            table_updates(T, &TM, g, tsw.scratch, tsw.threads, pass_threads)
    return max_change


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
    cdef bint gathered
    if blocks.count == 0:
        return _cd_groups(E, sw, 0, G.n_groups, param, param_stride, reg, kind, keep_last,
                          group_columns)
    for b in range(blocks.count):
        if blocks.position[b] > g:
            if done != NULL:
                table_push(done, &TM, E.state, &sw.L, E.n, sw.cur, blocks.threads)
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
            blocks.pending = done
            blocks.pending_cache = done.cache
            blocks.pending_TM = TM
            blocks.pending_slot = sw.cur
        else:
            table_push(done, &TM, E.state, &sw.L, E.n, sw.cur, blocks.threads)
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
        _flush(&E.pending, G, group_columns, <const index_t*> E.entry_columns,
               <const floating*> E.entry_values, n, E.state, kind)
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


# ---- column groups ----------------------------------------------------------------------

cdef void _unsorted_row_before(Py_ssize_t* before, const index_t* indices, Py_ssize_t lo,
                               Py_ssize_t hi) noexcept nogil:
    """column_groups' ``before`` for the columns of a row whose indices are not sorted:
    each column's largest predecessor in the row, by a scan of the row."""
    cdef Py_ssize_t z, y, j
    for z in range(lo, hi):
        j = indices[z]
        before[j] = max(before[j], -1)
        for y in range(lo, hi):
            if indices[y] < j:
                before[j] = max(before[j], indices[y])


def column_groups(const floating[::1] data, const index_t[::1] indices,
                  const index_t[::1] indptr, Py_ssize_t n_features, bint disjoint,
                  part=None):
    """Regroup the nonzeros of a CSR matrix by groups of columns, for :func:`cd_epoch`.

    Coordinate descent updates the columns in increasing order.  With ``disjoint``, each
    group is a maximal run of consecutive columns that share no row (so a row has at most
    one entry in a group): a one-hot field whose columns are contiguous is one group.
    Updating a group's columns together is then exactly updating them one after the other,
    and the groups in order are cyclic coordinate descent in column order, whatever data
    layout holds the same rows (a relational input's parts are runs of their own, see
    :mod:`polylite.relational`).  The columns without entries form one group, last (their
    steps depend on no row).  Without ``disjoint`` every column is a group of one, in
    column order.  Within a group the entries are in row order, as in the CSR matrix.

    ``part``, a boolean mask of the columns, restricts the groups to the columns it marks
    (the others get none) and ends a run wherever unmarked columns lie between two marked
    ones: the columns of the other parts of a relational input, updated in between.

    Returns a :class:`polylite.polynomial._cd_data.ColumnGroups`: group g holds the
    entries ``group_ptr[g]:group_ptr[g + 1]``, their rows ``rows[row_ptr[g]:row_ptr[g + 1]]``
    (none stored when it has an entry in every row: they are 0..n-1), their columns
    ``columns[col_ptr[g]:col_ptr[g + 1]]`` (none stored when it has one column), their
    values ``values[val_ptr[g]:val_ptr[g + 1]]`` (none stored for a group of several columns
    whose values are all 1, as a one-hot field) and the columns
    ``group_columns[columns_ptr[g]:columns_ptr[g + 1]]`` (increasing).
    """
    from ._cd_data import ColumnGroups
    cdef Py_ssize_t n = indptr.shape[0] - 1, nnz = indices.shape[0], d = n_features
    cdef Py_ssize_t i, j, z, g, n_groups = 0, run = -1, run_start = 0
    cdef bint gap = False
    index_dtype = np.asarray(indices).dtype
    cdef Py_ssize_t[::1] group = np.full(d, -1, dtype=np.intp)
    cdef const unsigned char[::1] marked = (np.ones(d, dtype=np.uint8) if part is None
                                            else np.asarray(part, dtype=np.uint8))
    cdef Py_ssize_t[::1] before
    if marked.shape[0] != d:
        raise ValueError("column_groups: the part mask needs one entry per column")
    if disjoint:
        # before[j]: the largest column that precedes column j in one of its rows, -1 if
        # none does, EMPTY if no row has j.  A column shares a row with one of the
        # columns start..j-1 exactly when before[j] >= start (the row's nearest
        # predecessor of j is among them), so the runs need no column-wise copy of X.
        before = np.full(d, EMPTY, dtype=np.intp)
        with nogil:
            for i in range(n):
                for z in range(indptr[i], indptr[i + 1]):
                    j = indices[z]
                    if z == indptr[i]:
                        before[j] = max(before[j], -1)
                    elif indices[z - 1] < j:
                        before[j] = max(before[j], indices[z - 1])
                    else:
                        _unsorted_row_before(&before[0], &indices[0], indptr[i],
                                             indptr[i + 1])
                        break
            for j in range(d):
                if not marked[j]:
                    gap = True
                    continue
                if before[j] == EMPTY:
                    group[j] = EMPTY  # grouped apart below
                    continue
                if gap or run < 0 or before[j] >= run_start:
                    run += 1
                    run_start = j
                    gap = False
                group[j] = run
        before = None
        n_groups = run + 1
        # Columns without entries: one group, last (CD only moves them to 0, see _cd_groups).
        if np.any(np.asarray(group) == EMPTY):
            for j in range(d):
                if group[j] == EMPTY:
                    group[j] = n_groups
            n_groups += 1
    else:
        for j in range(d):
            if marked[j]:
                group[j] = n_groups
                n_groups += 1
    group_array = np.asarray(group)
    # Columns and entries per group (the entries of unmarked columns belong to none).
    widths = np.bincount(group_array[group_array >= 0], minlength=n_groups)
    sizes = np.zeros(n_groups, dtype=np.intp)
    # Values are stored for groups of one column and groups with a value other than 1.
    keeps_values_array = (widths == 1).astype(np.uint8)
    cdef Py_ssize_t[::1] entries_of = sizes
    cdef unsigned char[::1] not_ones = keeps_values_array
    with nogil:
        for z in range(nnz):
            g = group[indices[z]]
            if g >= 0:
                entries_of[g] += 1
                if data[z] != 1:
                    not_ones[g] = 1
    # Where each group starts.  A group with an entry in every row does not store their
    # rows (0..n-1), nor a group of one column its entries' column.
    keeps_rows_array = sizes != n
    keeps_columns_array = widths != 1

    def starts(counts):
        ptr = np.zeros(n_groups + 1, dtype=np.intp)
        np.cumsum(counts, out=ptr[1:])
        return ptr

    group_ptr = starts(sizes)
    columns_ptr = starts(widths)
    row_ptr = starts(np.where(keeps_rows_array, sizes, 0))
    col_ptr = starts(np.where(keeps_columns_array, sizes, 0))
    val_ptr = starts(np.where(keeps_values_array, sizes, 0))
    group_columns = np.empty(columns_ptr[n_groups], dtype=index_dtype)
    rows = np.empty(row_ptr[n_groups], dtype=index_dtype)
    columns = np.empty(col_ptr[n_groups], dtype=index_dtype)
    values = np.empty(val_ptr[n_groups], dtype=np.asarray(data).dtype)
    # Fill cursors, one per group and array: counting sorts by group, stable, so that a
    # group's entries stay in row order.
    cdef Py_ssize_t[::1] next_value = val_ptr[:-1].copy()
    cdef Py_ssize_t[::1] next_column = columns_ptr[:-1].copy()
    cdef Py_ssize_t[::1] next_row = row_ptr[:-1].copy()
    cdef Py_ssize_t[::1] next_entry_column = col_ptr[:-1].copy()
    cdef const unsigned char[::1] keeps_rows = keeps_rows_array.astype(np.uint8)
    cdef const unsigned char[::1] keeps_columns = keeps_columns_array.astype(np.uint8)
    cdef const unsigned char[::1] keeps_values = keeps_values_array
    cdef index_t[::1] gc = group_columns, out_rows = rows, out_columns = columns
    cdef floating[::1] out_values = values
    with nogil:
        for j in range(d):
            g = group[j]
            if g >= 0:
                gc[next_column[g]] = <index_t> j
                next_column[g] += 1
        for i in range(n):
            for z in range(indptr[i], indptr[i + 1]):
                g = group[indices[z]]
                if g < 0:
                    continue
                if keeps_rows[g]:
                    out_rows[next_row[g]] = <index_t> i
                    next_row[g] += 1
                if keeps_columns[g]:
                    out_columns[next_entry_column[g]] = indices[z]
                    next_entry_column[g] += 1
                if keeps_values[g]:
                    out_values[next_value[g]] = data[z]
                    next_value[g] += 1
    return ColumnGroups(group_ptr, columns_ptr, group_columns, row_ptr, rows, col_ptr,
                        columns, val_ptr, values)


# ---- polynomial networks ----------------------------------------------------------------

cdef enum:
    MAX_HALVINGS = 30
    # The coordinate steps of the polynomial kernel keep their bound's coefficients in
    # fixed arrays: degrees up to this one (cd_epoch checks).
    MAX_POLY_DEGREE = 12

cdef double _poly_sums(double reg, double p, int degree, double lam_s,
                       const index_t* rows, const floating* values, Py_ssize_t count,
                       const double* state, const Layout* L, Py_ssize_t cur,
                       double* bound, double* newton) noexcept nogil:
    """The gradient pass of a PN coordinate; returns its support (the weight of its rows).

    Row i's prediction moves by r_i(d) = lam_s ((u_i + d x)^m - u_i^m) = sum_t c_t d^t,
    c_t = lam_s C(m, t) u_i^(m - t) x^t, when the coordinate moves by d, and its loss by at
    most l' r_i + kappa r_i^2 / 2 + third |r_i|^3 / 6 (kappa: the loss's curvature, or its
    bound mu for the squared hinge, see loss_derivatives; third: loss_third_bound), with
    |r_i|^3 <= (sum_t |c_t| |d|^t)^3.  So the objective changes by at most

        Q(d) = sum_{r=1..2m} bound[r] d^r + sum_{r=3..3m} bound[2m + r] |d|^r,

    the penalty's change included (exact for the squared loss).  ``bound`` takes 5m + 1
    doubles; ``newton`` the curvature sum_i (kappa c_1^2 + |2 l' c_2|) + reg of a Newton
    step with a positive curvature (Q''(0) with its possibly negative part by magnitude).
    """
    cdef Py_ssize_t z, i
    cdef int t, r, m = degree
    cdef double x, u, dl, kappa, weight, binomial, power, support = 0, positive = 0
    cdef double c[MAX_POLY_DEGREE + 1]       # c_t, t = 1..m
    cdef double square[2 * MAX_POLY_DEGREE + 1]  # (sum_t |c_t| d^t)^2, powers 2..2m
    cdef double* cubic = bound + 2 * m
    cdef const double* row
    for r in range(5 * m + 1):
        bound[r] = 0
    for z in range(count):
        i = _row_of(rows, z)
        x = values[z] if values != NULL else 1.0
        row = state + i * L.stride
        u = row[cur]
        dl = _row_dlosses(row, L.label, L.weight, L.loss, &kappa)
        weight = _weight(row, L)
        support += weight
        binomial = lam_s
        power = 1
        for t in range(1, m + 1):
            binomial = binomial * (m - t + 1) / t
            power *= x
            c[t] = binomial * power
        power = 1
        for t in range(m, 0, -1):
            c[t] *= power
            power *= u
        positive += kappa * c[1] * c[1] + fabs(2 * dl * c[2])
        for t in range(1, m + 1):
            bound[t] += dl * c[t]
            for r in range(1, m + 1):
                bound[t + r] += 0.5 * kappa * c[t] * c[r]
        if L.third > 0:
            for r in range(2, 2 * m + 1):
                square[r] = 0
            for t in range(1, m + 1):
                for r in range(1, m + 1):
                    square[t + r] += fabs(c[t] * c[r])
            for t in range(1, m + 1):
                for r in range(2, 2 * m + 1):
                    cubic[t + r] += L.third / 6 * weight * fabs(c[t]) * square[r]
    bound[1] += reg * p
    bound[2] += 0.5 * reg
    newton[0] = positive + reg
    return support


cdef inline double _poly_value(const double* phi, int top, double tau, double* slope,
                               double* curvature) noexcept nogil:
    """sum_{r=1..top} phi[r] tau^r, with its first and second derivatives (Horner)."""
    cdef int r
    cdef double value = phi[top], first = 0, second = 0
    for r in range(top - 1, -1, -1):
        second = second * tau + 2 * first
        first = first * tau + value
        value = value * tau + (phi[r] if r > 0 else 0.0)
    slope[0] = first
    curvature[0] = second
    return value


cdef double _poly_step(const double* bound, double newton, int degree) noexcept nogil:
    """The step minimising the bound Q of _poly_sums along the descent direction.

    Along d = direction * tau, tau >= 0, Q is a polynomial phi in tau.  Safeguarded Newton
    on phi' between 0 (phi' < 0) and a point where phi' > 0, started from the Newton step
    with the positive curvature ``newton``.  Q majorises the objective, so a step with
    phi < 0 decreases it; if the minimiser found has none, the start is halved until phi
    shows a sufficient decrease (Armijo, on the bound: no pass over the rows), or no step.
    """
    cdef int r, it, m = degree, top = 3 * degree
    cdef double g = bound[1], direction, lo, hi, tau, slope, curvature, start
    cdef double phi[3 * MAX_POLY_DEGREE + 1]
    if g == 0 or newton <= 0:
        return 0
    direction = -1.0 if g > 0 else 1.0
    for r in range(top + 1):
        phi[r] = 0
    for r in range(1, 2 * m + 1):
        phi[r] = bound[r] * (direction if r % 2 == 1 else 1.0)
    for r in range(3, top + 1):
        phi[r] += bound[2 * m + r]
    start = fabs(g) / newton
    lo = 0
    hi = start
    _poly_value(phi, top, hi, &slope, &curvature)
    it = 0
    while slope < 0 and it < 64:  # phi grows like tau^(2m) or faster: a bracket exists
        lo = hi
        hi *= 2
        _poly_value(phi, top, hi, &slope, &curvature)
        it += 1
    tau = 0.5 * (lo + hi)
    if slope >= 0:
        for it in range(100):
            _poly_value(phi, top, tau, &slope, &curvature)
            if slope < 0:
                lo = tau
            else:
                hi = tau
            if curvature > 0 and lo < tau - slope / curvature < hi:
                tau = tau - slope / curvature
            else:
                tau = 0.5 * (lo + hi)
            if hi - lo <= 1e-14 * hi:
                break
        if _poly_value(phi, top, tau, &slope, &curvature) < 0:
            return direction * tau
    tau = start
    for it in range(MAX_HALVINGS):
        if _poly_value(phi, top, tau, &slope, &curvature) <= -1e-4 * fabs(g) * tau:
            return direction * tau
        tau *= 0.5
    return 0


cdef double _poly_coordinate(floating* param, double reg, int degree, double lam_s,
                             const index_t* rows, const floating* values,
                             Py_ssize_t count, double* state, const Layout* L,
                             Py_ssize_t cur) noexcept nogil:
    """One coordinate of a PN component: the gradient pass (_poly_sums), the step that
    minimises the bound (_poly_step), the update pass; returns the step.

    The coordinate ``param``'s column is ``rows``/``values`` (``count`` entries; ``rows``
    NULL: rows 0..count-1, ``values`` NULL: value 1, as for gamma_s).  Stores the new
    value, then updates the predictions and the cached linear forms in slot ``cur`` with
    the step actually stored (rounded to the parameter's precision).
    """
    cdef Py_ssize_t z, i
    cdef double p = param[0], x, u, delta, newton
    cdef double bound[5 * MAX_POLY_DEGREE + 1]
    cdef double* row
    if _poly_sums(reg, p, degree, lam_s, rows, values, count, state, L, cur, bound,
                  &newton) <= 0:
        delta = -p  # unseen feature: see _unseen_or_step
    else:
        delta = _poly_step(bound, newton, degree)
    delta = _take_step(param, delta)
    if delta == 0:
        return 0
    for z in range(count):
        i = _row_of(rows, z)
        x = values[z] if values != NULL else 1.0
        row = state + i * L.stride
        u = row[cur]
        row[PRED] += lam_s * (int_power(u + delta * x, degree) - int_power(u, degree))
        row[cur] = u + delta * x
    return delta


cdef double _cd_poly_component(Epoch* E, Py_ssize_t s, Py_ssize_t cur, Py_ssize_t nxt,
                               floating* P, const index_t* group_columns) noexcept nogil:
    """Update lam_s, gamma_s and p_s of one PN component (slot ``cur`` holds u_i).

    The groups must be single columns (the steps are per coordinate).
    """
    cdef const Groups* G = &E.G
    cdef const index_t* rows = <const index_t*> E.entry_rows
    cdef const floating* values = <const floating*> E.entry_values
    cdef floating* gamma = <floating*> E.gamma
    cdef floating* lam = <floating*> E.lam
    cdef Py_ssize_t n = E.n, k = E.k, n_dummy = E.n_dummy
    cdef int degree = E.degrees[0]
    cdef bint has_next = s + 1 < k
    cdef double mu = E.L.mu, beta = E.beta
    cdef double* state = E.state
    cdef const Layout* L = &E.L
    cdef double* base = E.base
    cdef Py_ssize_t i, j, z, g, start, end
    cdef const index_t* group_rows
    cdef const floating* group_values  # groups of one column store their values
    cdef double feature, delta, max_change = 0, p_next, curvature
    cdef double sums[N_TERMS]
    cdef double* row
    if has_next:
        _slot_base(base, POLYNOMIAL, 1, gamma, n_dummy, k, s + 1)
        _reset_slot(state, L, n, nxt, base)
    if E.fit_lam:
        # The prediction is linear in lam_s: the bound step of a linear coordinate, with
        # the sums of _entry_terms for the derivative u_i^m.
        _zero_terms(sums)
        for i in range(n):
            row = state + i * L.stride
            feature = int_power(row[cur], degree)
            sums[0] += _row_dlosses(row, L.label, L.weight, L.loss, &curvature) * feature
            sums[1] += _weight(row, L) * feature * feature
            sums[3] += curvature * feature * feature
            sums[4] += _weight(row, L) * fabs(feature) * feature * feature
        delta = _take_step(lam + s, _bound_step(sums, mu, L.third, beta, lam[s]))
        if delta != 0:
            for i in range(n):
                row = state + i * L.stride
                row[PRED] += delta * int_power(row[cur], degree)
            max_change = max(max_change, fabs(delta))
    if n_dummy > 0:
        delta = _poly_coordinate(&gamma[s], beta, degree, lam[s], <const index_t*> NULL,
                                 <const floating*> NULL, n, state, L, cur)
        max_change = max(max_change, fabs(delta))
    for g in range(G.n_groups):
        j = group_columns[G.columns_ptr[g]]
        start = G.group_ptr[g]
        end = G.group_ptr[g + 1]
        group_rows = _group_rows(G, rows, g)
        group_values = _group_values(G, values, g)
        delta = _poly_coordinate(&P[j * k + s], beta, degree, lam[s], group_rows,
                                 group_values, end - start, state, L, cur)
        max_change = max(max_change, fabs(delta))
        if has_next:
            p_next = P[j * k + s + 1]
            for z in range(end - start):
                state[_row_of(group_rows, z) * L.stride + nxt] += (p_next
                                                                   * group_values[z])
    return max_change


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


def column_moments(const floating[::1] data, const index_t[::1] indices,
                   const index_t[::1] indptr, const double[::1] sample_weight,
                   Py_ssize_t n_features):
    """Two weighted sums over each column's stored entries, the same in every epoch:
    the weight of its rows, sum_i s_i (its support: a step of :func:`cd_epoch` needs it
    to tell a feature the data never shows, of weight 0), and sum_i s_i x_ij^4 (the
    rounding-noise bound of its degree-2 factors' steps, _degree2_noise).  Returns the
    two float64 arrays (n_features,)."""
    cdef Py_ssize_t i, z, n = indptr.shape[0] - 1
    cdef double x2
    support_array = np.zeros(n_features, dtype=np.float64)
    fourth_array = np.zeros(n_features, dtype=np.float64)
    cdef double[::1] support = support_array, fourth = fourth_array
    if sample_weight.shape[0] != n:
        raise ValueError("column_moments: one weight per row is needed")
    with nogil:
        for i in range(n):
            for z in range(indptr[i], indptr[i + 1]):
                x2 = data[z] * <double> data[z]
                support[indices[z]] += sample_weight[i]
                fourth[indices[z]] += sample_weight[i] * x2 * x2
    return support_array, fourth_array


def _buffer(dict workspace, str name, Py_ssize_t size):
    """A float64 work array of at least ``size`` (contents undefined), the one kept in
    ``workspace`` under ``name`` when it is large enough."""
    buffer = workspace.get(name) if workspace is not None else None
    if buffer is None or buffer.shape[0] < size:
        buffer = np.empty(size, dtype=np.float64)
        if workspace is not None:
            workspace[name] = buffer
    return buffer


def _prior_arrays(prior, Py_ssize_t n_blocks, Py_ssize_t d, Py_ssize_t k,
                  Py_ssize_t n_dummy, int kernel, int loss, degrees, bint has_blocks):
    """The arrays of :func:`cd_epoch`'s ``prior``, checked against the model's shapes:
    feature_group, the regs and means, then the variances of the intercept, w and P, the
    output change and the variance object (five None without ``prior.variance``)."""
    if loss != SQUARED or kernel == POLYNOMIAL:
        raise ValueError("cd_epoch: sampling needs the squared loss and a kernel that is "
                         "affine in each factor (anova or all-subsets)")
    n_groups = np.asarray(prior.w_reg).shape[0]
    if n_groups < 1:
        raise ValueError("cd_epoch: the prior needs at least one group")
    arrays = [np.ascontiguousarray(prior.feature_group, dtype=np.intp)]
    shapes = [(n_groups,), (n_groups,), (n_blocks, n_groups, k), (n_blocks, n_groups, k),
              (k,), (k,)]
    for name, shape in zip(("w_reg", "w_mean", "P_reg", "P_mean", "gamma_reg",
                            "gamma_mean"), shapes):
        array = np.ascontiguousarray(getattr(prior, name), dtype=np.float64)
        if array.shape != shape:
            raise ValueError(f"cd_epoch: prior.{name} has shape {array.shape}, expected "
                             f"{shape}")
        arrays.append(array)
    if arrays[0].shape != (d,) or (d > 0 and (arrays[0].min() < 0
                                              or arrays[0].max() >= n_groups)):
        raise ValueError(f"cd_epoch: prior.feature_group must give each of the {d} "
                         f"columns a group in [0, {n_groups})")
    if not prior.scale >= 0:
        raise ValueError(f"cd_epoch: prior.scale must be >= 0, got {prior.scale}")
    variance = getattr(prior, "variance", None)
    if variance is None:
        return arrays + [None] * 5
    if kernel != ANOVA or np.any(np.asarray(degrees) != 2) or n_dummy > 0 or has_blocks:
        raise ValueError("cd_epoch: mean-field updates take factor blocks of the ANOVA "
                         "kernel of degree 2, without dummy features or relation blocks")
    for name, shape in zip(("intercept", "w", "P", "output_change"),
                           ((1,), (d,), (n_blocks, d, k), (1,))):
        array = getattr(variance, name)
        if (not isinstance(array, np.ndarray) or array.dtype != np.float64
                or array.shape != shape or not array.flags.c_contiguous):
            raise ValueError(f"cd_epoch: prior.variance.{name} must be a C-contiguous "
                             f"float64 array of shape {shape}")
        arrays.append(array)
    arrays.append(variance)
    return arrays


cdef inline void _set_prior(Prior* prior, const Epoch* E, bint grouped, const double* reg,
                            const double* mean, Py_ssize_t stride, uint64_t draw,
                            uint64_t component_draws, double* variance,
                            Py_ssize_t variance_stride) noexcept nogil:
    """A Prior of epoch E's draws (its weight, scale and seed): the columns' groups
    (``grouped``, else group 0), their precisions and means ``reg``, ``mean`` (``stride``
    apart), the first of its normal numbers and the step to the next component's, and
    the mean-field variances (or NULL)."""
    prior.group = E.prior_group if grouped else NULL
    prior.reg = reg
    prior.mean = mean
    prior.stride = stride
    prior.weight = E.weight
    prior.scale = E.scale / E.weight
    prior.seed = E.seed
    prior.draw = draw
    prior.component_draws = component_draws
    prior.variance = variance
    prior.variance_stride = variance_stride
    prior.relaxation = 1


def cd_epoch(data, problem, params, double[::1] y_pred, *, prior=None, gradient=None,
             dict workspace=None, Py_ssize_t thread_min_entries=8192, pass_seconds=None):
    """One epoch of cyclic coordinate descent, in place; returns the largest |step|.

    Parameters
    ----------
    data : polylite.polynomial._cd_data.CDData
        The rows and what a fit derives from them once (:func:`column_groups` with
        ``disjoint`` false for kernel POLYNOMIAL, :func:`column_moments`, the
        threads).
    problem : polylite.polynomial._cd_data.CDProblem
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
        is flat.  With an attribute ``variance`` that is not None, the epoch is a sweep of
        mean-field coordinate ascent instead (ANOVA kernel, every block of degree 2, no
        dummies, no relation blocks): the parameters hold the means of their Gaussian
        factors and ``variance.intercept`` (1,), ``variance.w`` (d,) and ``variance.P``
        (n_blocks, d, k), float64, their variances; each factor in turn becomes the
        optimal one given the others and the prior (no draws), except that the factors'
        means move ``prior.relaxation`` (in (0, 2)) times their optimal step
        (over-relaxation, see _meanfield_step).  The epoch adds to
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

    ``data.n_threads`` threads share each pass over a group's entries (the sums of a
    step are then added in another order: the result agrees with one thread's to
    rounding); the polynomial kernel and the dummy features' passes run on one.

    The epoch's step rule (STEP_MINIMISE, STEP_DRAW with a ``prior``, STEP_MEANFIELD
    with a ``prior`` that has variances, STEP_GRADIENT with ``gradient``) is chosen once
    from these arguments; every pass is the same for every rule.
    """
    X = data.X
    return _epoch(data, problem, params, X.data, X.indices, y_pred, (prior, gradient),
                  (workspace, thread_min_entries, pass_seconds))


def _check_epoch(data, problem, params, y_pred, gradient):
    """Refuse what :func:`cd_epoch` cannot take: the passes run without bounds checks,
    so every shape must agree.  Zeroes the arrays of a gradient pass."""
    groups, X, P = data.groups, data.X, params.P
    n, (n_blocks, d, k) = problem.y.shape[0], P.shape
    kernel, degrees, lam, gamma = problem.kernel, problem.degrees, params.lam, params.gamma
    n_dummy = gamma.shape[0]
    if data.n_threads < 1:
        raise ValueError(f"n_threads must be at least 1, got {data.n_threads}")
    if kernel == POLYNOMIAL and (lam is None or lam.shape[0] != k):
        raise ValueError("the polynomial kernel needs one output weight per component")
    if kernel == POLYNOMIAL and data.blocks:
        raise ValueError("relational input is taken by the anova and all-subsets kernels")
    # A group lists the rows of its entries, or none when it has one in every row, their
    # columns, or none when it has one column, and their values, or none when it has
    # several columns (and the values are 1).  The direct part of a relational input
    # has groups for its own columns only.
    pointers = [np.asarray(groups.group_ptr), np.asarray(groups.columns_ptr),
                np.asarray(groups.row_ptr), np.asarray(groups.col_ptr),
                np.asarray(groups.val_ptr)]
    n_groups = groups.n_groups
    direct_columns = d - sum([block.stop - block.start for block in data.blocks])
    agree = (all(pointer.shape[0] == n_groups + 1 for pointer in pointers)
             and groups.group_columns.shape[0] == direct_columns
             and pointers[1][n_groups] == direct_columns
             and pointers[0][n_groups] == X.indices.shape[0]
             and groups.rows.shape[0] == pointers[2][n_groups]
             and groups.columns.shape[0] == pointers[3][n_groups]
             and groups.values.shape[0] == pointers[4][n_groups]
             and X.indptr.shape[0] == n + 1 and params.w.shape[0] == d
             and problem.sample_weight.shape[0] == n and y_pred.shape[0] == n
             and params.intercept.shape[0] == 1 and (n_dummy == 0 or gamma.shape[1] == k)
             and degrees.shape[0] == n_blocks and (lam is None or lam.shape[0] == k)
             and data.support.shape[0] == d and data.fourth.shape[0] == d)
    if agree and n_groups > 0:
        entries, columns, rows, entry_columns, values = (np.diff(p) for p in pointers)
        single_column = columns == 1
        agree = not np.any(((rows != entries) & ((rows != 0) | (entries != n)))
                           | (entry_columns != np.where(single_column, 0, entries))
                           | ((values != entries) & (single_column | (values != 0))))
    if not agree:
        raise ValueError("cd_epoch: parameter, data or group shapes disagree")
    if kernel == POLYNOMIAL and n_groups != d:
        raise ValueError("the polynomial kernel needs groups of one column")
    if kernel == POLYNOMIAL and not 2 <= degrees[0] <= MAX_POLY_DEGREE:
        raise ValueError(f"coordinate descent takes polynomial kernels of degree 2 to "
                         f"{MAX_POLY_DEGREE}, got {degrees[0]}")
    if gradient is not None:
        if kernel == POLYNOMIAL:
            raise ValueError("cd_epoch: a gradient pass takes the anova and all-subsets "
                             "kernels")
        expected = [(1,), (d,), (n_blocks, d, k), (n_dummy, k)]
        arrays = [gradient.intercept, gradient.w, gradient.P, gradient.gamma]
        if any(np.shape(a) != shape for a, shape in zip(arrays, expected)):
            raise ValueError("cd_epoch: the gradient arrays' shapes disagree with the "
                             "parameters'")
        for array in arrays:
            np.asarray(array)[...] = 0


cdef Groups _group_struct(groups):
    """The pointers of the group arrays (kept alive by ``groups``)."""
    cdef const Py_ssize_t[::1] group_ptr = groups.group_ptr
    cdef const Py_ssize_t[::1] columns_ptr = groups.columns_ptr
    cdef const Py_ssize_t[::1] row_ptr = groups.row_ptr
    cdef const Py_ssize_t[::1] col_ptr = groups.col_ptr
    cdef const Py_ssize_t[::1] val_ptr = groups.val_ptr
    cdef Groups G
    G.n_groups = group_ptr.shape[0] - 1
    G.group_ptr = &group_ptr[0]
    G.columns_ptr = &columns_ptr[0]
    G.row_ptr = &row_ptr[0]
    G.col_ptr = &col_ptr[0]
    G.val_ptr = &val_ptr[0]
    return G


cdef Layout _layout(int loss, double max_abs_y, bint uniform, int kernel,
                    int max_degree) noexcept:
    """The rows' records: [prediction, label?, weight?, two cache slots]."""
    cdef Layout L
    L.loss = loss
    L.mu = loss_smoothness(loss)
    # The cubic bound of the logistic loss holds for labels of magnitude at most max|y|.
    L.third = loss_third_bound(loss, max_abs_y) if loss == LOGISTIC else 0.0
    L.label = -1 if loss == SQUARED else 1
    L.weight = -1 if uniform else 1 + (L.label >= 0)
    L.cache = 1 + (L.label >= 0) + (L.weight >= 0)
    L.width = 2 if kernel == ALL_SUBSETS else (1 if kernel == POLYNOMIAL else max_degree - 1)
    L.stride = L.cache
    return L


cdef bint _uniform(const double[::1] sample_weight) noexcept:
    """Whether every row has the same positive weight (a weight of 0 everywhere is
    stored)."""
    cdef Py_ssize_t i, n = sample_weight.shape[0]
    if n > 0 and sample_weight[0] <= 0:
        return False
    for i in range(1, n):
        if sample_weight[i] != sample_weight[0]:
            return False
    return True


cdef list _set_blocks(Blocks* blocks, data, Py_ssize_t n, Py_ssize_t d, int max_degree,
                      int kernel, int n_threads, bint uniform, dict workspace):
    """Point ``blocks`` at the relation blocks of ``data`` and their tables' records
    (blocks.tables is malloc'd: the caller frees it); returns the arrays the caller
    keeps alive while ``blocks`` is used."""
    positions = np.array([block.position for block in data.blocks] + [0], dtype=np.intp)
    cdef Py_ssize_t[::1] position_view = positions
    cdef Py_ssize_t b
    blocks.count = len(data.blocks)
    blocks.threads = n_threads
    blocks.build_next = False
    blocks.next_built = False
    blocks.defer = False
    blocks.pending = NULL
    blocks.gather_first = False
    blocks.first_gathered = False
    blocks.position = &position_view[0]
    blocks.tables = <Table*> malloc(max(blocks.count, 1) * sizeof(Table))
    if blocks.tables == NULL:
        raise MemoryError("not enough memory for the relation blocks")
    kept = [positions]  # and the tables' records (not in a workspace when there is none)
    try:
        for b in range(blocks.count):
            kept.append(_set_table(&blocks.tables[b], data.blocks[b], n, d, max_degree,
                                   kernel, n_threads, uniform, workspace, f"table {b}"))
    except BaseException:
        free(blocks.tables)
        raise
    return kept


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


def _epoch(data, problem, params, const floating[::1] csr_data,
           const index_t[::1] csr_indices, double[::1] y_pred, steps, options):
    """:func:`cd_epoch` for one dtype of the parameters and one index type of X
    (``steps``: (prior, gradient); ``options``: (workspace, thread_min_entries,
    pass_seconds)): the set-up, then the passes."""
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


cdef list _set_epoch(Epoch* E, data, problem, params, const floating[::1] csr_data,
                     const index_t[::1] csr_indices, double[::1] y_pred, prior, gradient,
                     options):
    """Set the epoch's structure E: its step rule, records, threads, groups, relation
    blocks, parameters and the rules' priors or gradient arrays (the set-up of cd_epoch,
    checked already by _check_epoch).  Returns the arrays E points into that nothing
    else keeps alive (the caller keeps the list until the passes end, and frees
    E.blocks.tables)."""
    workspace, thread_min_entries, pass_seconds = options
    cdef const index_t[::1] csr_indptr = data.X.indptr
    cdef const double[::1] y = problem.y
    cdef const double[::1] sample_weight = problem.sample_weight
    cdef floating[::1] intercept = params.intercept
    cdef floating[::1] w = params.w
    cdef const int[::1] degrees = problem.degrees
    cdef floating[:, ::1] gamma = params.gamma
    cdef floating[::1] lam = params.lam
    groups = data.groups
    cdef const index_t[::1] group_columns = groups.group_columns
    cdef const index_t[::1] entry_rows = groups.rows
    cdef const index_t[::1] entry_columns = groups.columns
    cdef const floating[::1] entry_values = groups.values
    cdef const double[::1] col_support = data.support
    cdef const double[::1] col_fourth = data.fourth
    cdef Py_ssize_t n = y.shape[0], n_blocks = params.P.shape[0]
    cdef Py_ssize_t d = params.P.shape[1], k = params.P.shape[2]
    cdef Py_ssize_t nnz = csr_indices.shape[0]
    cdef int n_threads = data.n_threads
    E.kernel = problem.kernel
    E.n = n
    E.d = d
    E.k = k
    E.n_blocks = n_blocks
    E.n_dummy = gamma.shape[0]
    E.degrees = &degrees[0]
    E.fit_intercept = problem.fit_intercept
    E.fit_linear = problem.fit_linear
    E.fit_lam = problem.fit_lam
    E.G = _group_struct(groups)
    E.group_columns = &group_columns[0] if group_columns.shape[0] > 0 else NULL
    E.entry_rows = &entry_rows[0] if entry_rows.shape[0] > 0 else NULL
    E.entry_columns = &entry_columns[0] if entry_columns.shape[0] > 0 else NULL
    E.entry_values = &entry_values[0] if entry_values.shape[0] > 0 else NULL
    E.csr_data = &csr_data[0] if nnz > 0 else NULL
    E.csr_indices = &csr_indices[0] if nnz > 0 else NULL
    E.csr_indptr = &csr_indptr[0]
    E.intercept = &intercept[0]
    E.w = &w[0]
    E.gamma = &gamma[0, 0] if gamma.size > 0 else NULL
    E.lam = &lam[0] if params.lam is not None and lam.shape[0] > 0 else NULL
    E.support = &col_support[0]
    E.fourth = &col_fourth[0]
    E.y = &y[0]
    E.sample_weight = &sample_weight[0]
    E.y_pred = &y_pred[0]
    cdef int max_degree = max(2, int(np.max(problem.degrees, initial=2)))
    # With uniform weights every sum of a step carries the same factor s: the sums leave
    # it out (weight 1) and the penalties are divided by s instead, the same steps with
    # fewer products; a gradient pass and the sampler put it back.
    cdef bint uniform = _uniform(sample_weight)
    E.weight = sample_weight[0] if uniform and n > 0 else 1.0
    E.alpha = problem.alpha / E.weight
    E.beta = problem.beta / E.weight
    kept = [_set_rule(E, prior, gradient, problem, params, len(data.blocks) > 0)]
    if E.rule == STEP_MEANFIELD and not uniform:
        raise ValueError("cd_epoch: mean-field updates take uniform sample weights")
    E.L = _layout(problem.loss, np.max(np.abs(problem.y), initial=0.0)
                  if problem.loss == LOGISTIC else 0.0, uniform, E.kernel, max_degree)
    if E.rule == STEP_MEANFIELD:
        E.L.width = _width(KIND_MEANFIELD, 0)
    kept += _set_work(E, workspace, n_threads, thread_min_entries, max_degree, pass_seconds)
    kept += _set_blocks(&E.blocks, data, n, d, max_degree, E.kernel, n_threads, uniform,
                        workspace)
    E.pending.group = -1
    return kept


cdef object _set_rule(Epoch* E, prior, gradient, problem, params, bint has_blocks):
    """The step rule (cd_epoch's ``prior`` and ``gradient`` arguments), and the arrays it
    reads: the priors' and the mean-field variances, or the gradient arrays.  Returns
    what E points into."""
    cdef Py_ssize_t n_blocks = params.P.shape[0], d = params.P.shape[1]
    cdef Py_ssize_t k = params.P.shape[2], n_dummy = params.gamma.shape[0]
    cdef double[::1] grad_intercept, grad_w, var_intercept, var_w, output_change
    cdef double[:, :, ::1] grad_P, P_reg, P_mean, var_P
    cdef double[:, ::1] grad_gamma
    cdef const Py_ssize_t[::1] prior_group
    cdef const double[::1] w_reg, w_mean, gamma_reg, gamma_mean
    E.rule = STEP_MINIMISE
    E.grad_intercept = E.grad_w = E.grad_P = E.grad_gamma = NULL
    E.var_P = E.output_change = NULL
    if gradient is not None:
        if prior is not None:
            raise ValueError("cd_epoch: a gradient pass takes no prior")
        E.rule = STEP_GRADIENT
        grad_intercept, grad_w, grad_P, grad_gamma = (
            gradient.intercept, gradient.w, gradient.P, gradient.gamma)
        E.grad_intercept = &grad_intercept[0]
        E.grad_w = &grad_w[0] if d > 0 else NULL
        E.grad_P = &grad_P[0, 0, 0] if grad_P.size > 0 else NULL
        E.grad_gamma = &grad_gamma[0, 0] if grad_gamma.size > 0 else NULL
        return gradient
    if prior is None:
        return None
    arrays = _prior_arrays(prior, n_blocks, d, k, n_dummy, problem.kernel, problem.loss,
                           problem.degrees, has_blocks)
    (prior_group, w_reg, w_mean, P_reg, P_mean, gamma_reg, gamma_mean, var_intercept,
     var_w, var_P, output_change, variance) = arrays
    E.rule = STEP_DRAW if variance is None else STEP_MEANFIELD
    E.relaxation = 1
    if E.rule == STEP_MEANFIELD:
        E.relaxation = prior.relaxation
        if not 0 < E.relaxation < 2:
            raise ValueError(f"cd_epoch: prior.relaxation must be in (0, 2), got "
                             f"{E.relaxation}")
        E.var_P = &var_P[0, 0, 0] if var_P.size > 0 else NULL
        E.output_change = &output_change[0]
    E.seed = int(prior.seed) & 0xFFFFFFFFFFFFFFFF
    E.scale = prior.scale
    E.n_groups = w_reg.shape[0]
    E.prior_group = &prior_group[0] if d > 0 else NULL
    E.P_reg = &P_reg[0, 0, 0]
    E.P_mean = &P_mean[0, 0, 0]
    # The priors of the intercept (flat), the linear weights and the dummies, numbered
    # as in cd_epoch's docstring; the factor blocks' by _block_prior.
    E.flat = 0
    _set_prior(&E.intercept_prior, E, False, &E.flat, &E.flat, 0, 0, 0,
               &var_intercept[0] if E.rule == STEP_MEANFIELD else NULL, 0)
    _set_prior(&E.linear_prior, E, True, &w_reg[0], &w_mean[0], 1, 1, 0,
               &var_w[0] if E.rule == STEP_MEANFIELD and d > 0 else NULL, 1)
    _set_prior(&E.dummy_prior, E, False, &gamma_reg[0], &gamma_mean[0], 0,
               1 + d + n_blocks * k * d, n_dummy, NULL, 0)
    return arrays


cdef list _set_work(Epoch* E, dict workspace, int n_threads,
                    Py_ssize_t thread_min_entries, int max_degree, pass_seconds):
    """The rows' records, the columns' scratch records, the threads' work space and
    clock: arrays kept in ``workspace`` from one epoch to the next.  Returns them."""
    cdef const Layout* L = &E.L
    cdef Py_ssize_t n = E.n, d = E.d
    # Room for the widest records; the intercept and linear weights use the narrowest.
    cdef double[::1] state_buffer = _buffer(workspace, "state",
                                            n * (L.cache + 2 * L.width) + 1)
    E.state = &state_buffer[0]
    # Records start on a cache line (one line each: the prefetch fetches all of it).
    cdef double[::1] column_scratch = _buffer(workspace, "scratch", (d + 1) * COL_STRIDE)
    E.scratch = <double*> ((<size_t> &column_scratch[0] + 63) & ~(<size_t> 63))
    # The other threads' scratch records (only the columns of the group being summed are
    # touched, see _group_start).
    E.threads.count = n_threads
    E.threads.min_entries = thread_min_entries
    E.threads.stride = (d + 1) * COL_STRIDE
    cdef double[::1] private_scratch = _buffer(
        workspace, "private", (n_threads - 1) * E.threads.stride + COL_STRIDE)
    E.threads.private = <double*> ((<size_t> &private_scratch[0] + 63) & ~(<size_t> 63))
    cdef double[::1] partial = _buffer(workspace, "partial", N_TERMS * n_threads)
    E.threads.partial = &partial[0]
    cdef double[::1] variance_change = _buffer(workspace, "variance_change", n_threads)
    variance_change[:] = 0
    E.threads.variance_change = &variance_change[0]
    cdef double[::1] factor_column = _buffer(workspace, "factors", 2 * (d + 1))
    E.factor_column = &factor_column[0]
    # Work space: _anova_derivative's for each thread, then a cache slot (_slot_base).
    E.threads.work_stride = 2 * (max_degree + 1)
    cdef double[::1] work = _buffer(workspace, "work",
                                    n_threads * E.threads.work_stride
                                    + max(max_degree + 1, _width(KIND_MEANFIELD, 0)))
    E.A = &work[0]
    E.base = E.A + n_threads * E.threads.work_stride
    E.threads.work = E.A
    # The passes' seconds: row 0 the intercept's, the linear weights' and the records',
    # row b + 1 block b's (see cd_epoch).
    cdef double[:, ::1] seconds
    E.clock = NULL
    if pass_seconds is not None:
        if np.shape(pass_seconds) != (E.n_blocks + 1, N_PASS_KINDS):
            raise ValueError(f"cd_epoch: pass_seconds must have shape "
                             f"({E.n_blocks + 1}, {N_PASS_KINDS}), got "
                             f"{np.shape(pass_seconds)}")
        seconds = pass_seconds  # (float64, C-contiguous: added to in place)
        E.clock = &seconds[0, 0]
    E.threads.clock = E.clock
    return [state_buffer, column_scratch, private_scratch, partial, variance_change,
            factor_column, work, pass_seconds]


cdef void _block_prior(Epoch* E, Py_ssize_t b) noexcept nogil:
    """The prior of factor block b's columns (STEP_DRAW, STEP_MEANFIELD)."""
    cdef Py_ssize_t d = E.d, k = E.k
    _set_prior(&E.block_prior, E, True, E.P_reg + b * E.n_groups * k,
               E.P_mean + b * E.n_groups * k, k, 1 + d + b * k * d, d,
               E.var_P + b * d * k if E.rule == STEP_MEANFIELD and d > 0 else NULL, k)
    E.block_prior.relaxation = E.relaxation


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
    cdef Table* gather = NULL
    TM.squared = L.loss == SQUARED
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
        if threads == 1:
            _fill_chunk(0, 1, state, L, n, slot, kernel, kind, factors, variances,
                        csr_data, csr_indices, csr_indptr, base)
        else:
            for t in prange(threads, num_threads=threads, schedule="static", chunksize=1):
                _fill_chunk(t, threads, state, L, n, slot, kernel, kind, factors,
                            variances, csr_data, csr_indices, csr_indptr, base)
    if blocks.count == 0:
        return
    # One pass over the rows: the previous sweep's last push, the blocks' caches, the
    # first block's gather.
    if blocks.gather_first and blocks.pending != &blocks.tables[0]:
        gather = &blocks.tables[0]
    table_start_rows(blocks.tables, blocks.count, &TM, blocks.pending, blocks.pending_cache,
                     &blocks.pending_TM, blocks.pending_slot, gather, state, L, n, slot,
                     base, not direct, blocks.threads)
    blocks.pending = NULL
    blocks.first_gathered = gather != NULL


cdef void _flush_push(Blocks* blocks, double* state, const Layout* L,
                      Py_ssize_t n) noexcept nogil:
    """The push left pending by the last sweep, on its own."""
    if blocks.pending != NULL:  # (its caches not swapped since)
        table_push(blocks.pending, &blocks.pending_TM, state, L, n, blocks.pending_slot,
                   blocks.threads)
        blocks.pending = NULL


cdef object _set_table(Table* T, block, Py_ssize_t n, Py_ssize_t d, int max_degree,
                       int kernel, int n_threads, bint uniform, dict workspace,
                       str name):
    """Point ``T`` at the arrays of ``block`` (a _cd_data.TableBlock) and at records for
    its table rows (and the threads' copies), kept in ``workspace``; returns the records'
    array, which the caller keeps alive."""
    cdef const int64_t[::1] indptr = block.table.indptr
    cdef const int64_t[::1] indices = block.table.indices
    cdef const double[::1] data = block.table.data
    cdef const int64_t[::1] index = block.index
    groups = block.groups
    cdef const Py_ssize_t[::1] group_ptr = groups.group_ptr
    cdef const Py_ssize_t[::1] columns_ptr = groups.columns_ptr
    cdef const int64_t[::1] group_columns = groups.group_columns
    cdef const Py_ssize_t[::1] row_ptr = groups.row_ptr
    cdef const int64_t[::1] rows = groups.rows
    cdef const Py_ssize_t[::1] col_ptr = groups.col_ptr
    cdef const int64_t[::1] columns = groups.columns
    cdef const Py_ssize_t[::1] val_ptr = groups.val_ptr
    cdef const double[::1] values = groups.values
    # The weight of each table row's interactions: their count where the sums leave a
    # uniform weight out.
    cdef const double[::1] row_weight = block.row_count if uniform else block.row_weight
    T.n_rows = indptr.shape[0] - 1
    T.n_groups = group_ptr.shape[0] - 1
    if (index.shape[0] != n or block.table.shape[1] != d or T.n_rows < 1
            or columns_ptr.shape[0] != T.n_groups + 1 or row_ptr.shape[0] != T.n_groups + 1
            or col_ptr.shape[0] != T.n_groups + 1 or val_ptr.shape[0] != T.n_groups + 1
            or group_ptr[T.n_groups] != indices.shape[0]
            or columns_ptr[T.n_groups] != block.stop - block.start
            or row_weight.shape[0] != T.n_rows or max_degree > MAX_TABLE_DEGREE):
        raise ValueError("cd_epoch: a relation block's table, index or groups disagree "
                         "with the data")
    T.indptr = &indptr[0]
    T.indices = &indices[0] if indices.shape[0] > 0 else NULL
    T.data = &data[0] if data.shape[0] > 0 else NULL
    T.index = &index[0] if n > 0 else NULL
    T.group_ptr = &group_ptr[0]
    T.columns_ptr = &columns_ptr[0]
    T.group_columns = &group_columns[0] if group_columns.shape[0] > 0 else NULL
    T.row_ptr = &row_ptr[0]
    T.rows = &rows[0] if rows.shape[0] > 0 else NULL
    T.col_ptr = &col_ptr[0]
    T.columns = &columns[0] if columns.shape[0] > 0 else NULL
    T.val_ptr = &val_ptr[0]
    T.values = &values[0] if values.shape[0] > 0 else NULL
    T.row_weight = &row_weight[0]
    # Records wide enough for the widest kind of coordinate.
    cdef Py_ssize_t stride = table_moments(KIND_LINEAR, 0).stride
    if kernel == ALL_SUBSETS:
        stride = max(stride, table_moments(KIND_SUBSETS, 0).stride)
    else:
        stride = max(stride, table_moments(_kind(kernel, max_degree), max_degree).stride)
    # Records start on a cache line (at degree 2, a record is one).
    stride = (stride + 7) // 8 * 8
    cdef Py_ssize_t width = 2 if kernel == ALL_SUBSETS else max(max_degree - 1, 1)
    cdef double[::1] records = _buffer(workspace, name, n_threads * T.n_rows * stride
                                       + 2 * T.n_rows * width + 8)
    T.records = <double*> ((<size_t> &records[0] + 63) & ~(<size_t> 63))
    T.private = T.records + T.n_rows * stride
    T.cache = T.private + (n_threads - 1) * T.n_rows * stride
    T.next = T.cache + T.n_rows * width
    return records.base


def weighted_loss(const double[::1] y, const double[::1] y_pred,
                  const double[::1] sample_weight, int loss):
    """sum_i sample_weight[i] * loss(y[i], y_pred[i])."""
    cdef Py_ssize_t i
    cdef double total = 0
    with nogil:
        for i in range(y.shape[0]):
            total += sample_weight[i] * loss_value(loss, y[i], y_pred[i])
    return total
