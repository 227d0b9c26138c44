# Included by _cd.pyx (one compilation unit with it, so that the inline passes stay
# inline and the epoch's structures are shared); see _cd.pyx for the cimports.

# The epoch's set-up: checks, work arrays, the step rule and its priors, the
# relation blocks' tables.

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
    the mean-field variances (or NULL).  The sampler's draws are over-relaxed by
    E.relaxation, whose factor omega (2 - omega) of their variance is taken into the
    scale here, once (_draw_step)."""
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
    if E.rule == STEP_DRAW:
        prior.relaxation = E.relaxation
        prior.scale = E.relaxation * (2 - E.relaxation) * prior.scale


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
    blocks.pending.table = NULL
    blocks.gather_first = False
    blocks.first_gathered = False
    blocks.position = &position_view[0]
    blocks.tables = <Table*> malloc(max(blocks.count, 1) * sizeof(Table))
    if blocks.tables == NULL:
        raise MemoryError("not enough memory for the relation blocks")
    # (A block's columns' values at the start of its pass: only relation blocks have any.)
    cdef double[::1] saved = (_buffer(workspace, "saved", d + 1) if blocks.count > 0
                              else np.empty(1))
    blocks.saved = &saved[0]
    kept = [positions, saved]  # and the tables' records (not in a workspace when there is
    try:                       # none)
        for b in range(blocks.count):
            kept.append(_set_table(&blocks.tables[b], data.blocks[b], n, d, max_degree,
                                   kernel, n_threads, uniform, workspace, f"table {b}"))
    except BaseException:
        free(blocks.tables)
        raise
    return kept


cdef list _set_epoch(Epoch* E, data, problem, params, const floating[::1] csr_data,
                     const index_t[::1] csr_indices, double[::1] y_pred, prior, gradient,
                     options):
    """Set the epoch's structure E: its step rule, records, threads, groups, relation
    blocks, parameters and the rules' priors or gradient arrays (the set-up of cd_epoch,
    checked already by _check_epoch).  Returns the arrays E points into that nothing
    else keeps alive (the caller keeps the list until the passes end, and frees
    E.blocks.tables)."""
    workspace, thread_min_entries, pass_seconds, table_checks = options
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
    # Coordinate descent on a loss other than the squared steps the blocks' columns on
    # the loss's local model, checked after each pass (see _block_pass).
    E.blocks.model = (MODEL_LOCAL if E.rule == STEP_MINIMISE and problem.loss != SQUARED
                      else MODEL_BOUND)
    E.blocks.y_bound = np.max(np.abs(problem.y), initial=0.0)
    cdef int64_t[::1] checks
    E.blocks.checks = NULL
    if table_checks is not None:
        if np.shape(table_checks) != (len(TABLE_CHECKS),):
            raise ValueError(f"cd_epoch: table_checks must have shape "
                             f"({len(TABLE_CHECKS)},), got {np.shape(table_checks)}")
        checks = table_checks  # (int64, added to in place)
        E.blocks.checks = &checks[0]
        kept.append(table_checks)
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
    E.relaxation = getattr(prior, "relaxation", 1.0)
    if not 0 < E.relaxation < 2:
        raise ValueError(f"cd_epoch: prior.relaxation must be in (0, 2), got "
                         f"{E.relaxation}")
    if E.rule == STEP_MEANFIELD:
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
