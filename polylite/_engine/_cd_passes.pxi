# Included by _cd.pyx (one compilation unit with it, so that the inline passes stay
# inline and the epoch's structures are shared); see _cd.pyx for the cimports.

# The passes over a group of row-disjoint columns, and the columns' steps.

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


cdef struct Pending:
    # A group with an entry in every row whose update pass waits to share the pass of
    # the gradients of the next group, of its component or of the next one.
    Py_ssize_t group     # the group, or -1: none
    bint single
    bint reset           # see _apply_entry
    Sweep sweep          # of its component
    const void* columns  # its entries' columns (``index_t``, kept as void*: a struct
                         # cannot hold a fused type; one column when ``single``)
    const void* values   # and values (``floating``), or NULL: all 1


cdef struct Shape:
    # What the loop of a fused pass may take as constants (its callers pass literals):
    int kind             # the coordinates' kind
    bint done_single     # the pending group is one column
    bint single          # the next group is one column
    bint done_unit       # the pending group's values are all 1 (and not stored)
    bint unit            # the next group's likewise


cdef inline void _fused_span(Py_ssize_t lo, Py_ssize_t hi, bint ahead, const Pending* done,
                             const index_t* columns, const floating* values,
                             const Sweep* sw, double* state, Shape shape,
                             double* sums) noexcept nogil:
    """_fused_rows over entries lo..hi-1, adding to ``sums`` (groups of one column).
    ``ahead`` (a literal): the entries PREFETCH_AHEAD further on exist, so that their
    scratch records are requested without a test per entry."""
    cdef const index_t* done_columns = <const index_t*> done.columns
    cdef const floating* done_values = <const floating*> done.values
    cdef const Sweep* dsw = &done.sweep
    cdef bint reset = done.reset
    cdef int kind = shape.kind
    cdef int n_terms = _n_terms(&sw.L, kind)
    cdef Py_ssize_t z
    cdef double terms[N_TERMS]
    cdef double acc[N_TERMS]
    cdef double* row
    cdef const double* done_col = _column_record(dsw.scratch, done_columns, 0)
    cdef Move move = _move(done_col, kind)
    cdef double* col = _column_record(sw.scratch, columns, 0)
    cdef double p = col[COL_P]
    cdef double var = col[COL_VAR] if kind == KIND_MEANFIELD else 0.0
    cdef int t
    for t in range(n_terms):  # (in registers for the loop)
        acc[t] = sums[t]
    for z in range(lo, hi):
        row = state + z * sw.L.stride
        if not shape.done_single:
            if ahead:
                _request_record(dsw.scratch, done_columns, z + PREFETCH_AHEAD)
            done_col = _column_record(dsw.scratch, done_columns, z)
            move = _move(done_col, kind)
        _apply_entry(&move, 1.0 if shape.done_unit else done_values[z], row, dsw, kind,
                     reset)
        if not shape.single:
            if ahead:
                _request_record(sw.scratch, columns, z + PREFETCH_AHEAD)
            col = _column_record(sw.scratch, columns, z)
            p = col[COL_P]
            if kind == KIND_MEANFIELD:
                var = col[COL_VAR]
        _entry_terms(1.0 if shape.unit else values[z], row, p, var, sw, kind, terms)
        _gather(col, acc, terms, shape.single, n_terms)
    for t in range(n_terms):
        sums[t] = acc[t]


cdef inline void _fused_rows(const Pending* done, const index_t* columns,
                             const floating* values, const Sweep* sweep, Py_ssize_t n,
                             double* state, int mode, Shape shape) noexcept nogil:
    """Pass 2 of the pending group ``done`` (with ``done.reset`` as in _apply_entry) and
    pass 1 of the next (of ``sweep``: the same, or the next component's), both with an
    entry in every row.  ``shape``: the loop's constants."""
    cdef Pending local_done = done[0]
    cdef Sweep sw = sweep[0]
    cdef double sums[N_TERMS]
    _assume(&sw, mode)
    # The entries with one PREFETCH_AHEAD further on, then the rest.
    cdef Py_ssize_t split = n - PREFETCH_AHEAD if n > PREFETCH_AHEAD else 0
    _zero_terms(sums)
    _fused_span(0, split, True, &local_done, columns, values, &sw, state, shape, sums)
    _fused_span(split, n, False, &local_done, columns, values, &sw, state, shape, sums)
    if shape.single:
        _add_terms(_column_record(sw.scratch, columns, 0), sums,
                   _n_terms(&sw.L, shape.kind))


cdef inline Shape _shape(int kind, bint done_single, bint single, bint done_unit,
                         bint unit) noexcept nogil:
    cdef Shape shape
    shape.kind = kind
    shape.done_single = done_single
    shape.single = single
    shape.done_unit = done_unit
    shape.unit = unit
    return shape


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


cdef inline void _fused_units(const Pending* done, const index_t* columns,
                              const floating* values, const Sweep* sw, Py_ssize_t n,
                              double* state, int kind, bint done_single, bint single,
                              bint split) noexcept nogil:
    """_fused_rows of a simple sweep (squared loss, uniform weights), the one-column flags
    literal.  With ``split``, so are the flags of the groups whose values are 1 and not
    stored: only groups of several columns can be one (one column stores its values);
    and between two such groups (user and item, the recommender's pass) ``reset`` too."""
    cdef Pending local_done = done[0]
    cdef bint done_unit = not done_single and done.values == NULL
    cdef bint unit = not single and values == NULL
    if not split:
        _fused_rows(done, columns, values, sw, n, state, SIMPLE,
                    _shape(kind, done_single, single, done_unit, unit))
    elif done_unit and unit and done.reset:
        local_done.reset = True
        _fused_rows(&local_done, columns, values, sw, n, state, SIMPLE,
                    _shape(kind, done_single, single, True, True))
    elif done_unit and unit:
        local_done.reset = False
        _fused_rows(&local_done, columns, values, sw, n, state, SIMPLE,
                    _shape(kind, done_single, single, True, True))
    elif done_unit:
        _fused_rows(done, columns, values, sw, n, state, SIMPLE,
                    _shape(kind, done_single, single, True, False))
    elif unit:
        _fused_rows(done, columns, values, sw, n, state, SIMPLE,
                    _shape(kind, done_single, single, False, True))
    else:
        _fused_rows(done, columns, values, sw, n, state, SIMPLE,
                    _shape(kind, done_single, single, False, False))


cdef inline void _fused_range(const Pending* done, const index_t* columns,
                              const floating* values, bint single, const Sweep* sw,
                              Py_ssize_t n, double* state, kind_tag* tag) noexcept nogil:
    cdef int kind = _tag_kind(tag)
    # One-hot fields (several columns, values 1, not stored) have loops of their own for
    # the linear weights, degrees 2 and 3 and the mean-field factors, the recommender
    # case, where the arithmetic shrinks; the other loops test for them.
    cdef bint ones = kind == KIND_LINEAR or kind == 2 or kind == 3 or kind == KIND_MEANFIELD
    cdef int mode = _mode(&sw.L)
    if mode == LOGISTIC_LOSS and done.single and single:  # dense columns, classification
        _fused_rows(done, columns, values, sw, n, state, LOGISTIC_LOSS,
                    _shape(kind, True, True, False, False))
    elif mode == LOGISTIC_LOSS:  # one loop, with the tests
        _fused_rows(done, columns, values, sw, n, state, LOGISTIC_LOSS,
                    _shape(kind, done.single, single, done.values == NULL,
                           values == NULL))
    elif mode == ANY_LOSS:
        _fused_rows(done, columns, values, sw, n, state, ANY_LOSS,
                    _shape(kind, done.single, single, done.values == NULL,
                           values == NULL))
    elif done.single and single:
        _fused_units(done, columns, values, sw, n, state, kind, True, True, ones)
    elif done.single:
        _fused_units(done, columns, values, sw, n, state, kind, True, False, ones)
    elif single:
        _fused_units(done, columns, values, sw, n, state, kind, False, True, ones)
    else:
        _fused_units(done, columns, values, sw, n, state, kind, False, False, ones)


# Each pass over a group's entries runs on sw.threads.count threads, thread t on the t-th
# run of entries (_chunk), with its own work space and scratch records for the sums
# (_thread_sweep).


cdef inline void _thread_sweep(Sweep* local, Py_ssize_t t, bint sums) noexcept nogil:
    """Make ``local`` (a copy of the sweep) use thread t's work space for
    _anova_derivative and, with ``sums``, sum into thread t's scratch records."""
    local.A = local.threads.work + t * local.threads.work_stride
    if sums and t > 0:
        local.scratch = local.threads.private + (t - 1) * local.threads.stride


cdef enum:
    # What a pass over one group's entries does.
    GRADIENTS = 0        # pass 1: the columns' sums
    UPDATES = 1          # pass 2: the steps applied to the rows' records
    UPDATES_RESET = 2    # pass 2, the next component's caches started afresh (see
                         # _apply_entry)


cdef void _pass_chunk(Py_ssize_t t, const index_t* rows, const index_t* columns,
                      const floating* values, Py_ssize_t count, bint single,
                      const Sweep* sw, int work, double* state,
                      kind_tag* tag) noexcept nogil:
    """Thread t's run of the entries of a pass (``work``) over a group's entries."""
    cdef Py_ssize_t lo, hi, threads = _row_threads(sw.threads, count)
    cdef Sweep local = sw[0]
    cdef const index_t* chunk_rows
    cdef const floating* chunk_values
    cdef double* chunk_state
    if not thread_range(t, threads, count, &lo, &hi):
        return
    _thread_sweep(&local, t, work == GRADIENTS)
    # A group with an entry in every row lists no rows: its entry z is row z.
    chunk_rows = rows + lo if rows != NULL else NULL
    chunk_state = state if rows != NULL else state + lo * sw.L.stride
    chunk_values = values + lo if values != NULL else NULL
    if work != GRADIENTS:
        _updates_range(chunk_rows, columns if single else columns + lo, chunk_values,
                       hi - lo, single, &local, work == UPDATES_RESET, chunk_state, tag)
    else:
        _gradients_range(chunk_rows, columns if single else columns + lo, chunk_values,
                         hi - lo, single, &local, chunk_state, tag)


cdef void _pass_of(const index_t* rows, const index_t* columns, const floating* values,
                   Py_ssize_t count, bint single, const Sweep* sw, int work,
                   double* state, kind_tag* tag) noexcept nogil:
    """Pass 1 (GRADIENTS) or pass 2 (UPDATES, UPDATES_RESET) over a group's entries."""
    cdef Py_ssize_t t, threads = _row_threads(sw.threads, count)
    if count == 0:
        return
    if threads == 1:
        _pass_chunk(0, rows, columns, values, count, single, sw, work, state, tag)
        return
    for t in prange(threads, num_threads=threads, schedule="static", chunksize=1):
        _pass_chunk(t, rows, columns, values, count, single, sw, work, state, tag)


cdef void _fused_chunk(Py_ssize_t t, const Pending* done, const index_t* columns,
                       const floating* values, bint single, const Sweep* sw,
                       Py_ssize_t n, double* state, kind_tag* tag) noexcept nogil:
    """Thread t's run of the rows of a fused pass (see _fused_rows)."""
    cdef Py_ssize_t lo, hi, threads = _row_threads(sw.threads, n)
    cdef Sweep local = sw[0]
    cdef Pending local_done = done[0]
    if not thread_range(t, threads, n, &lo, &hi):
        return
    _thread_sweep(&local, t, True)
    _thread_sweep(&local_done.sweep, t, False)
    if not done.single:
        local_done.columns = (<const index_t*> done.columns) + lo
    if done.values != NULL:
        local_done.values = (<const floating*> done.values) + lo
    _fused_range(&local_done, columns if single else columns + lo,
                 values + lo if values != NULL else NULL, single, &local, hi - lo,
                 state + lo * sw.L.stride, tag)


cdef void _fused_of(const Pending* done, const index_t* columns, const floating* values,
                    bint single, const Sweep* sw, Py_ssize_t n, double* state,
                    kind_tag* tag) noexcept nogil:
    cdef Py_ssize_t t, threads = _row_threads(sw.threads, n)
    if n == 0:
        return
    if threads == 1:
        _fused_chunk(0, done, columns, values, single, sw, n, state, tag)
        return
    for t in prange(threads, num_threads=threads, schedule="static", chunksize=1):
        _fused_chunk(t, done, columns, values, single, sw, n, state, tag)


# Dispatch to the copy of each pass for the kind.

cdef inline void _run_of(const Pending* done, const index_t* rows, const index_t* columns,
                         const floating* values, Py_ssize_t count, bint single,
                         const Sweep* sw, int work, double* state,
                         kind_tag* tag) noexcept nogil:
    if done != NULL:
        _fused_of(done, columns, values, single, sw, count, state, tag)
    else:
        _pass_of(rows, columns, values, count, single, sw, work, state, tag)


cdef void _run(const Pending* done, const index_t* rows, const index_t* columns,
               const floating* values, Py_ssize_t count, bint single, const Sweep* sw,
               int work, double* state, int kind) noexcept nogil:
    """The pass of _pass, or with ``done`` that of _fused, in the copy for ``kind``."""
    cdef double start = _clock_start(sw.threads)
    if kind == KIND_LINEAR:
        _run_of(done, rows, columns, values, count, single, sw, work, state,
                <TagLinear*> NULL)
    elif kind == KIND_SUBSETS:
        _run_of(done, rows, columns, values, count, single, sw, work, state,
                <TagSubsets*> NULL)
    elif kind == 2:
        _run_of(done, rows, columns, values, count, single, sw, work, state,
                <TagAnova2*> NULL)
    elif kind == 3:
        _run_of(done, rows, columns, values, count, single, sw, work, state,
                <TagAnova3*> NULL)
    elif kind == 4:
        _run_of(done, rows, columns, values, count, single, sw, work, state,
                <TagAnova4*> NULL)
    elif kind == KIND_MEANFIELD:
        _run_of(done, rows, columns, values, count, single, sw, work, state,
                <TagMeanField*> NULL)
    else:
        _run_of(done, rows, columns, values, count, single, sw, work, state,
                <TagAnova*> NULL)
    _clock_add(sw.threads, PASS_FUSED if done != NULL else
               (PASS_GRADIENTS if work == GRADIENTS else PASS_UPDATES), start)


cdef inline void _pass(const index_t* rows, const index_t* columns, const floating* values,
                       Py_ssize_t count, bint single, const Sweep* sw, bint update,
                       bint reset, double* state, int kind) noexcept nogil:
    """Pass 1 (gradients) or, with ``update``, pass 2 over a group's entries."""
    _run(NULL, rows, columns, values, count, single, sw,
         (UPDATES_RESET if reset else UPDATES) if update else GRADIENTS, state, kind)


cdef inline void _fused(const Pending* done, const index_t* columns,
                        const floating* values, bint single, const Sweep* sw, Py_ssize_t n,
                        double* state, int kind) noexcept nogil:
    """Pass 2 of the pending group ``done`` and pass 1 of the next (see _fused_rows)."""
    _run(done, NULL, columns, values, n, single, sw, GRADIENTS, state, kind)


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


cdef void _flush(Pending* pending, Py_ssize_t n, double* state, int kind,
                 const index_t* index_type, const floating* value_type) noexcept nogil:
    """The update pass of the pending group, if any, on its own (``index_type`` and
    ``value_type``, never read, name the types of its entries)."""
    if pending.group >= 0:
        _pass(<const index_t*> NULL, <const index_t*> pending.columns,
              <const floating*> pending.values, n, pending.single, &pending.sweep, True,
              pending.reset, state, kind)
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
