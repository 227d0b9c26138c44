# Included by _cd.pyx (one compilation unit with it, so that the inline passes stay
# inline and the epoch's structures are shared); see _cd.pyx for the cimports.

# What a fit derives from its rows once: the column groups and moments; the loss.

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


cdef tuple _column_group_of(const index_t[::1] indices, const index_t[::1] indptr,
                            Py_ssize_t d, bint disjoint, part):
    """Each column's group (intp; -1 for the columns ``part`` leaves out) and the number
    of groups, as :func:`column_groups` defines them."""
    cdef Py_ssize_t n = indptr.shape[0] - 1
    cdef Py_ssize_t i, j, z, n_groups = 0, run = -1, run_start = 0
    cdef bint gap = False
    cdef Py_ssize_t[::1] group = np.full(d, -1, dtype=np.intp)
    cdef const unsigned char[::1] marked = (np.ones(d, dtype=np.uint8) if part is None
                                            else np.asarray(part, dtype=np.uint8))
    cdef Py_ssize_t[::1] before
    if marked.shape[0] != d:
        raise ValueError("column_groups: the part mask needs one entry per column")
    if not disjoint:
        for j in range(d):
            if marked[j]:
                group[j] = n_groups
                n_groups += 1
        return np.asarray(group), n_groups
    # before[j]: the largest column that precedes column j in one of its rows, -1 if none
    # does, EMPTY if no row has j.  A column shares a row with one of the columns
    # start..j-1 exactly when before[j] >= start (the row's nearest predecessor of j is
    # among them), so the runs need no column-wise copy of X.
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
    n_groups = run + 1
    # Columns without entries: one group, last (CD only moves them to 0, see _cd_groups).
    if np.any(np.asarray(group) == EMPTY):
        for j in range(d):
            if group[j] == EMPTY:
                group[j] = n_groups
        n_groups += 1
    return np.asarray(group), n_groups


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

    Returns a :class:`polylite._engine.cd_data.ColumnGroups`: group g holds the
    entries ``group_ptr[g]:group_ptr[g + 1]``, their rows ``rows[row_ptr[g]:row_ptr[g + 1]]``
    (none stored when it has an entry in every row: they are 0..n-1), their columns
    ``columns[col_ptr[g]:col_ptr[g + 1]]`` (none stored when it has one column), their
    values ``values[val_ptr[g]:val_ptr[g + 1]]`` (none stored for a group of several columns
    whose values are all 1, as a one-hot field) and the columns
    ``group_columns[columns_ptr[g]:columns_ptr[g + 1]]`` (increasing).
    """
    from .cd_data import ColumnGroups
    cdef Py_ssize_t n = indptr.shape[0] - 1, nnz = indices.shape[0], d = n_features
    cdef Py_ssize_t i, j, z, g
    index_dtype = np.asarray(indices).dtype
    group_array, n_groups = _column_group_of(indices, indptr, d, disjoint, part)
    cdef const Py_ssize_t[::1] group = group_array
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


def weighted_loss(const double[::1] y, const double[::1] y_pred,
                  const double[::1] sample_weight, int loss):
    """sum_i sample_weight[i] * loss(y[i], y_pred[i])."""
    cdef Py_ssize_t i
    cdef double total = 0
    with nogil:
        for i in range(y.shape[0]):
            total += sample_weight[i] * loss_value(loss, y[i], y_pred[i])
    return total
