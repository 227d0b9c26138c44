# Included by _cd.pyx (one compilation unit with it, so that the inline passes stay
# inline and the epoch's structures are shared); see _cd.pyx for the cimports.

# The row caches of one component and the kinds of coordinate entry.

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
    Push pending         # the block whose push awaits (pending.table NULL: none)
    bint gather_first    # it may start the first block's pass (nothing before it)
    bint first_gathered  # it did
    int model            # the passes' model of the loss (MODEL_BOUND, MODEL_LOCAL)
    double y_bound       # the largest |y| (MODEL_LOCAL's check)
    double* saved        # a block's columns' values at the start of its pass (MODEL_LOCAL)
    int64_t* checks      # how MODEL_LOCAL's passes ended, counted by CHECK_*, or NULL


cdef enum:
    # How a block's pass on the loss's local model ended (cd_epoch's ``table_checks``).
    CHECK_BOUND = 0     # accepted on the bound of its change from the table rows
    CHECK_COMPUTED = 1  # accepted on its change computed from the interactions
    CHECK_REDONE = 2    # undone, and taken again on the upper bound


cdef struct Fill:
    # What a pass filling the rows' caches of one component writes: the slot, and from
    # what (the component's factor of each column, their variances for mean-field
    # factors, the cache's starting value).
    Py_ssize_t slot
    int kernel
    const double* factors
    const double* variances
    const double* base


cdef inline void _fill_rows(Py_ssize_t lo, Py_ssize_t hi, double* state, const Layout* L,
                            const Fill* fill, int kind, const floating* csr_data,
                            const index_t* csr_indices,
                            const index_t* csr_indptr) noexcept nogil:
    """The cache in ``fill.slot`` of rows lo..hi-1 from their CSR entries (``kind`` a
    literal where the callers can: its arithmetic and the slot's width then fold)."""
    cdef Py_ssize_t slot = fill.slot
    cdef int kernel = fill.kernel
    cdef const double* factors = fill.factors
    cdef const double* variances = fill.variances
    cdef const double* base = fill.base
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
                      Py_ssize_t n, const Fill* fill, int kind, const floating* csr_data,
                      const index_t* csr_indices,
                      const index_t* csr_indptr) noexcept nogil:
    cdef Py_ssize_t lo, hi
    if not thread_range(t, threads, n, &lo, &hi):
        return
    if fill.kernel != POLYNOMIAL and kind == 2:  # (the recommender's: a loop of its own)
        _fill_rows(lo, hi, state, L, fill, 2, csr_data, csr_indices, csr_indptr)
    else:
        _fill_rows(lo, hi, state, L, fill, kind, csr_data, csr_indices, csr_indptr)
