"""Matrix-free passes over the rows of a CSR matrix for the multi-output models.

The models see each row as x~ = [x, 1] when ``constant`` is set (ALGORITHMS.md section 5:
the linear term comes from augmenting x with a constant feature): a parameter matrix
Q of shape (n_features + constant, m) holds one column per basis vector (or per output),
and its last row, the weights of the constant feature, is passed to the kernel layer's
``linear_forms`` as its offset ``gamma``.  The constant column of X is never stored.

Two passes, each one read of X for all m columns at once (one nonzero touches the
contiguous row Q[j, :]), split over ``n_threads`` threads by ranges of rows of about equal
numbers of nonzeros:

* :func:`features`: Z[i, s] = sigma(q_s, x~_i), with sigma(q, x) = (q.x)^2 ("pn") or the
  ANOVA kernel A_2(q, x) = ((q.x)^2 - sum_j q_j^2 x_j^2) / 2 ("fm");
* :func:`linear_outputs`: the outputs Z V + b of the features Z;
* :func:`loss_pass`: the weighted loss of the outputs (the kernel layer's per-output
  losses, or the multi-class losses) and its gradient, one pass over them;
* :func:`output_loss`: both of these fused for the refits' steps, with the products
  with Z their gradients need, block by block (products by BLAS, the logistic loss's
  exp and log1p by NumPy's vectorised ufuncs);
* :func:`gram_product`: G[:, s] = X~^T (W[:, w_s] * (X~ Q[:, s])) with w_s = columns[s]
  (several columns of Q may share one of W), and when asked the diagonal terms
  Dg[:, c] = (X~ o X~)^T W[:, c]: what Gamma_c q is made of, Gamma_c = X~^T diag(W[:, c])
  X~ ("pn") or (X~^T diag(W[:, c]) X~ - diag(Dg[:, c])) / 2 ("fm"), without forming
  Gamma_c.  Each thread sums into its own table (double) whose row j holds Q[j, :]
  next to its sums, so that a row's sums are in the cache lines just read for its
  dot products; the tables are added at the end;
* :func:`unit_residuals`, :func:`orthogonalise_step`, :func:`combine_step`: the vector
  algebra of a power-method iteration on (dim, m) blocks, a few sweeps without
  temporaries.
"""
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from cython.parallel cimport prange
from libc.math cimport fabs, log, sqrt

from .._engine._kernels cimport index_t, floating, linear_forms, polylite_prefetch_block
from .._engine._losses cimport logistic_from_exp, loss_value_derivative
from .._engine._losses cimport (SQUARED as _SQUARED, LOGISTIC as _LOGISTIC,
                       MULTICLASS_LOGISTIC as _MULTICLASS_LOGISTIC,
                       MULTICLASS_SMOOTH_HINGE as _SMOOTH_HINGE,
                       MULTICLASS_SQUARED_HINGE as _SQUARED_HINGE)
from ._ball cimport simplex_threshold

# Scratch rows of different threads are kept this many doubles (a cache line) apart.
PAD_DOUBLES = 8

# loss_pass takes the per-output losses of the loss table (_losses.pxd: squared,
# logistic) and its multi-class ones (targets: class codes): the multi-class logistic loss
# (softmax cross-entropy), the smoothed and the squared multi-class hinge
# (multioutput/_losses.py documents them).

cdef enum:
    # The row passes prefetch the rows of Q (and of the Gamma tables) that the nonzeros
    # this far past the current one need: they are gathered at random, and on many
    # features miss the cache.
    PREFETCH_NNZ = 16


cdef struct Features:
    # What a pass of :func:`features` reads and writes besides the rows of X
    # (``floating`` arrays, kept as void*: a struct cannot hold a fused type).
    const void* Q           # (n_features + constant, m) the basis vectors, C order
    Py_ssize_t m            # columns of Q (and of Z)
    const void* gamma       # Q's row of the constant feature, or NULL (no constant)
    bint anova              # sigma is the ANOVA kernel A_2 ("fm"), else (q.x)^2 ("pn")
    void* Z                 # (n, m) the features, written


cdef void _features_rows(Py_ssize_t lo, Py_ssize_t hi, const floating* data,
                         const index_t* indices, const index_t* indptr,
                         const Features* f, double* squares) noexcept nogil:
    """Rows lo..hi of the features Z of ``f``; ``squares``: the thread's scratch row of
    m doubles."""
    cdef const floating* Q = <const floating*> f.Q
    cdef const floating* gamma = <const floating*> f.gamma
    cdef floating* Z = <floating*> f.Z
    cdef Py_ssize_t m = f.m
    cdef bint anova = f.anova
    cdef Py_ssize_t i, z, s, start, nnz, ahead = indptr[lo], last
    cdef const floating* row
    cdef floating* out
    cdef double x, q
    for i in range(lo, hi):
        start = indptr[i]
        nnz = indptr[i + 1] - start
        last = min(start + nnz + PREFETCH_NNZ, indptr[hi])
        while ahead < last:
            polylite_prefetch_block(Q + indices[ahead] * m, m * sizeof(floating))
            ahead += 1
        out = Z + i * m
        linear_forms(Q, m, gamma, indices + start, data + start, nnz, out)
        if not anova:
            for s in range(m):
                out[s] = out[s] * out[s]
            continue
        # A_2 = ((q.x)^2 - sum_j (q_j x_j)^2) / 2, the squares summed in double.
        for s in range(m):
            q = gamma[s] if gamma != NULL else 0
            squares[s] = q * q
        for z in range(nnz):
            row = Q + indices[start + z] * m
            x = data[start + z]
            for s in range(m):
                q = row[s] * x
                squares[s] += q * q
        for s in range(m):
            out[s] = <floating>(0.5 * (<double>out[s] * out[s] - squares[s]))


cdef struct Gram:
    # What a pass of :func:`gram_product` reads besides the rows of X and the threads'
    # tables (W is ``floating``, kept as void*: a struct cannot hold a fused type).
    Py_ssize_t m            # columns of Q
    bint constant           # x~ = [x, 1]: a table's row n_features is the constant's
    Py_ssize_t n_features
    const void* W           # (n, k) the rows' weights, C order
    Py_ssize_t k            # columns of W
    const Py_ssize_t* columns   # (m,) the column of W of each column of Q


cdef void _gram_rows(Py_ssize_t lo, Py_ssize_t hi, const floating* data,
                     const index_t* indices, const index_t* indptr, const Gram* g,
                     double* table, double* diag, double* r) noexcept nogil:
    """Rows lo..hi of the Gamma products of ``g`` into the thread's ``table``
    (dim, 2 m): row j holds Q[j, :] (read) followed by its sums G[j, :] (written), so
    that the sums of a row's features are next to the values just read for it (one
    fetch from memory, not two); the diagonal terms into ``diag`` (dim, k), or NULL;
    ``r``: the thread's scratch row of m doubles."""
    cdef const floating* W = <const floating*> g.W
    cdef const Py_ssize_t* columns = g.columns
    cdef Py_ssize_t m = g.m, k = g.k, n_features = g.n_features
    cdef bint constant = g.constant
    cdef Py_ssize_t i, z, s, start, nnz, width = 2 * m, ahead = indptr[lo], last
    cdef const floating* w
    cdef const double* q
    cdef double* a
    cdef double x, xx
    for i in range(lo, hi):
        start = indptr[i]
        nnz = indptr[i + 1] - start
        last = min(start + nnz + PREFETCH_NNZ, indptr[hi])
        while ahead < last:
            polylite_prefetch_block(table + indices[ahead] * width, width * sizeof(double))
            if diag != NULL:
                polylite_prefetch_block(diag + indices[ahead] * k, k * sizeof(double))
            ahead += 1
        w = W + i * k
        # r = w * (X~ Q)_i
        if constant:
            q = table + n_features * width
            for s in range(m):
                r[s] = q[s]
        else:
            for s in range(m):
                r[s] = 0
        for z in range(nnz):
            q = table + indices[start + z] * width
            x = data[start + z]
            for s in range(m):
                r[s] += q[s] * x
        for s in range(m):
            r[s] *= w[columns[s]]
        for z in range(nnz):
            x = data[start + z]
            a = table + indices[start + z] * width + m
            for s in range(m):
                a[s] += x * r[s]
            if diag != NULL:
                xx = x * x
                a = diag + indices[start + z] * k
                for s in range(k):
                    a[s] += xx * w[s]
        if constant:  # the constant feature, value 1
            a = table + n_features * width + m
            for s in range(m):
                a[s] += r[s]
            if diag != NULL:
                a = diag + n_features * k
                for s in range(k):
                    a[s] += w[s]


def _thread_scratch(Py_ssize_t n_threads, Py_ssize_t m):
    """Zeroed float64 scratch rows of m values, one per thread, a cache line apart: rows
    that shared a line would bounce it between the cores at every row of X (false
    sharing: a 2-thread pass with one column ran slower than on one thread)."""
    return np.zeros((n_threads, m + PAD_DOUBLES))


def row_bounds(const index_t[::1] indptr, Py_ssize_t n_threads):
    """Row ranges [bounds[t], bounds[t+1]) of about equal numbers of nonzeros (and rows)."""
    cdef Py_ssize_t n = indptr.shape[0] - 1
    # Each row also costs a fixed amount (its dot products and their squares): count it
    # as one nonzero.
    work = np.asarray(indptr, dtype=np.int64) + np.arange(n + 1)
    targets = work[n] * np.arange(n_threads + 1) // max(n_threads, 1)
    bounds = np.searchsorted(work, targets).astype(np.intp)
    bounds[0], bounds[n_threads] = 0, n
    return bounds


def features(const floating[::1] data, const index_t[::1] indices,
             const index_t[::1] indptr, Py_ssize_t n_features,
             const floating[:, ::1] Q, bint constant, bint anova,
             floating[:, ::1] Z, const Py_ssize_t[::1] bounds):
    """Z[i, s] = sigma(Q[:, s], x~_i) for every row, in place (see the module docstring)."""
    cdef Py_ssize_t m = Q.shape[1]
    cdef Py_ssize_t n_threads = bounds.shape[0] - 1
    cdef Py_ssize_t t
    if Q.shape[0] != n_features + constant or Z.shape[1] != m or \
            Z.shape[0] != indptr.shape[0] - 1:
        raise ValueError("features: inconsistent shapes")
    if m == 0 or Z.shape[0] == 0:
        return
    cdef double[:, ::1] sq = _thread_scratch(n_threads, m)
    cdef const floating* data_ptr = &data[0] if data.shape[0] else NULL
    cdef const index_t* indices_ptr = &indices[0] if indices.shape[0] else NULL
    cdef Features f
    f.Q, f.m, f.anova, f.Z = &Q[0, 0], m, anova, &Z[0, 0]
    f.gamma = &Q[n_features, 0] if constant else NULL
    if n_threads == 1:
        with nogil:
            _features_rows(0, Z.shape[0], data_ptr, indices_ptr, &indptr[0], &f,
                           &sq[0, 0])
        return
    for t in prange(n_threads, nogil=True, num_threads=n_threads, schedule="static",
                    chunksize=1):
        _features_rows(bounds[t], bounds[t + 1], data_ptr, indices_ptr, &indptr[0], &f,
                       &sq[t, 0])


def gram_product(const floating[::1] data, const index_t[::1] indices,
                 const index_t[::1] indptr, Py_ssize_t n_features,
                 const floating[:, ::1] Q, bint constant, const floating[:, ::1] W,
                 const Py_ssize_t[::1] columns, bint with_diagonal,
                 const Py_ssize_t[::1] bounds):
    """(G, Dg): G[:, s] = X~^T (W[:, columns[s]] * (X~ Q[:, s])) and Dg = (X~ o X~)^T W
    (None unless ``with_diagonal``).

    G has the shape of Q, (n_features + constant, m); Dg one column per column of W;
    both float64 (see the module docstring).  Several columns of Q may share a column of
    W (the rows are read once for all of them).
    """
    cdef Py_ssize_t m = Q.shape[1]
    cdef Py_ssize_t k = W.shape[1]
    cdef Py_ssize_t n = indptr.shape[0] - 1
    cdef Py_ssize_t dim = n_features + constant
    cdef Py_ssize_t n_threads = bounds.shape[0] - 1
    cdef Py_ssize_t t
    if Q.shape[0] != dim or W.shape[0] != n or columns.shape[0] != m:
        raise ValueError("gram_product: inconsistent shapes")
    if m and (np.min(columns) < 0 or np.max(columns) >= k):
        raise ValueError("gram_product: a column of W out of range")
    # One table per thread: Q in the first m columns, the thread's sums in the others.
    tables = np.zeros((n_threads, dim, 2 * m))
    tables[:, :, :m] = Q
    diagonals = np.zeros((n_threads, dim, k)) if with_diagonal else np.zeros((1, 1, 1))
    if m == 0 or n == 0:
        return tables[0, :, m:], (diagonals[0] if with_diagonal else None)
    cdef double[:, :, ::1] table = tables
    cdef double[:, :, ::1] dg = diagonals
    cdef double[:, ::1] r = _thread_scratch(n_threads, m)
    cdef const floating* data_ptr = &data[0] if data.shape[0] else NULL
    cdef const index_t* indices_ptr = &indices[0] if indices.shape[0] else NULL
    cdef Gram g
    g.m, g.constant, g.n_features = m, constant, n_features
    g.W, g.k, g.columns = &W[0, 0], k, &columns[0]
    if n_threads == 1:
        with nogil:
            _gram_rows(0, n, data_ptr, indices_ptr, &indptr[0], &g, &table[0, 0, 0],
                       &dg[0, 0, 0] if with_diagonal else NULL, &r[0, 0])
    else:
        for t in prange(n_threads, nogil=True, num_threads=n_threads, schedule="static",
                        chunksize=1):
            _gram_rows(bounds[t], bounds[t + 1], data_ptr, indices_ptr, &indptr[0], &g,
                       &table[t, 0, 0], &dg[t, 0, 0] if with_diagonal else NULL,
                       &r[t, 0])
    G = (np.ascontiguousarray(tables[0, :, m:]) if n_threads == 1
         else tables[:, :, m:].sum(axis=0))
    if not with_diagonal:
        return G, None
    return G, (diagonals[0] if n_threads == 1 else diagonals.sum(axis=0))


# Rows per block of linear_outputs and output_loss: a block's outputs, gradients and
# exp / log1p buffers (4 x 4096 x c doubles) stay in the cache between the steps that
# write and read them, and the Python calls per block cost little (10^6 rows, c = 5:
# 2048 rows per block 51 ms, 4096 49 ms, 8192 48 ms, 1024 55 ms).
BLOCK_ROWS = 4096


# Threads share a pass only if each gets this many blocks: on fewer rows, starting the
# threads and waiting for the slowest costs more than they save.
MIN_BLOCKS_PER_THREAD = 4


def _on_row_ranges(Py_ssize_t n, int n_threads, work):
    """work(k, lo, hi) for n_threads ranges of the n rows (fewer if some would get
    under MIN_BLOCKS_PER_THREAD blocks), each on its own Python thread if there are
    several: the blocks' BLAS products, NumPy ufuncs and C loops release the GIL."""
    n_threads = max(1, min(n_threads, n // (MIN_BLOCKS_PER_THREAD * BLOCK_ROWS)))
    bounds = np.linspace(0, n, n_threads + 1).astype(np.intp)
    if n_threads == 1:
        work(0, 0, n)
        return
    with ThreadPoolExecutor(n_threads) as pool:
        list(pool.map(lambda k: work(k, bounds[k], bounds[k + 1]), range(n_threads)))


def _block_outputs(Z, V, b, O, Py_ssize_t start, Py_ssize_t stop):
    """O[start:stop] = Z[start:stop] V + b, by BLAS (a thin product is several times
    faster by blocks that stay in the cache than in one call or row by row)."""
    O_block = O[start:stop]
    np.matmul(Z[start:stop], V, out=O_block)
    O_block += b


def linear_outputs(Z, V, b, int n_threads=1):
    """O = Z V + b, float64 of shape (n_samples, n_outputs), C-ordered (Z float32 or
    float64 in any layout: the features are kept column by column)."""
    V = np.ascontiguousarray(V, dtype=np.float64)
    b = np.ascontiguousarray(b, dtype=np.float64)
    if Z.ndim != 2 or V.shape[0] != Z.shape[1] or b.shape != (V.shape[1],):
        raise ValueError("linear_outputs: inconsistent shapes")
    O = np.empty((Z.shape[0], V.shape[1]))

    def work(k, lo, hi):
        for start in range(lo, hi, BLOCK_ROWS):
            _block_outputs(Z, V, b, O, start, min(start + BLOCK_ROWS, hi))

    _on_row_ranges(Z.shape[0], n_threads, work)
    return O


cdef inline double _row_loss(int loss, const double* y, const double* o, double s,
                             Py_ssize_t m, double* w) noexcept nogil:
    """s sum_c loss(y[c], o[c]) for one row, and w[c] = s d loss / d o[c] unless w is
    NULL."""
    cdef Py_ssize_t c
    cdef double row = 0.0, derivative
    for c in range(m):
        row += loss_value_derivative(loss, y[c], o[c], &derivative)
        if w != NULL:
            w[c] = s * derivative
    return s * row


cdef struct Block:
    # A block of rows of a loss pass (at most BLOCK_ROWS), and where its gradient goes.
    Py_ssize_t lo           # its rows lo..hi-1 (row i - lo of the scratch arrays)
    Py_ssize_t hi
    bint gradient           # write W[i, c] = s_i d loss / d O[i, c] and add W's column
    double* column_sums     # sums to these (m,)


cdef double _logistic_block_loss(const Block* blk, const double[:, ::1] Y,
                                 const double[::1] s, const double[:, ::1] O,
                                 double[:, ::1] E, double[:, ::1] L,
                                 double[:, ::1] W) noexcept nogil:
    """The weighted binary logistic loss of the block's rows of O, summed over the
    outputs, from E = exp(-|z|) and L = log1p(E) of the margins z = Y O (their rows
    i - lo; both overwritten); with the block's ``gradient``, W[i, c] =
    s_i d loss / d O[i, c] and W's column sums (added to its ``column_sums``).  A flat
    loop over the block's entries (the kernel layer's logistic_from_exp, which the
    compiler vectorises), then one over the rows for their weights."""
    cdef Py_ssize_t lo = blk.lo, hi = blk.hi
    cdef bint gradient = blk.gradient
    cdef double* column_sums = blk.column_sums
    cdef Py_ssize_t m = Y.shape[1], i, c, j, size = (hi - lo) * m
    cdef const double* y = &Y[lo, 0]
    cdef const double* o = &O[lo, 0]
    cdef double* e = &E[0, 0]
    cdef double* loss = &L[0, 0]
    cdef double total = 0.0, row, derivative
    for j in range(size):
        loss[j] = logistic_from_exp(y[j], y[j] * o[j], e[j], loss[j], &derivative)
        e[j] = derivative
    for i in range(lo, hi):
        row = 0.0
        for c in range(m):
            row += L[i - lo, c]
        total += s[i] * row
        if gradient:
            for c in range(m):
                W[i, c] = s[i] * E[i - lo, c]
                column_sums[c] += W[i, c]
    return total


cdef double _per_output_block_loss(int loss, const Block* blk, const double[:, ::1] Y,
                                   const double[::1] s, const double[:, ::1] O,
                                   double[:, ::1] W) noexcept nogil:
    """The weighted per-output loss (the kernel layer's loss_value_derivative) of the
    block's rows of O; with the block's ``gradient``, their W[i, c] =
    s_i d loss / d O[i, c] and W's column sums (added to its ``column_sums``)."""
    cdef Py_ssize_t lo = blk.lo, hi = blk.hi
    cdef bint gradient = blk.gradient
    cdef double* column_sums = blk.column_sums
    cdef Py_ssize_t m = Y.shape[1], i, c
    cdef double total = 0.0
    for i in range(lo, hi):
        total += _row_loss(loss, &Y[i, 0], &O[i, 0], s[i], m,
                           &W[i, 0] if gradient else NULL)
        if gradient:
            for c in range(m):
                column_sums[c] += W[i, c]
    return total


cdef void _negative_abs_margins(Py_ssize_t lo, Py_ssize_t hi, const double[:, ::1] Y,
                                const double[:, ::1] O, double[:, ::1] E) noexcept nogil:
    """E[i - lo, c] = -|Y[i, c] O[i, c]| for rows lo..hi."""
    cdef Py_ssize_t m = Y.shape[1], i, c
    for i in range(lo, hi):
        for c in range(m):
            E[i - lo, c] = -fabs(Y[i, c] * O[i, c])


cdef void _softmax_exponents(Py_ssize_t lo, Py_ssize_t hi, const double[:, ::1] O,
                             double[:, ::1] E, double* tops) noexcept nogil:
    """For rows lo..hi: tops[i - lo] = max_c O[i, c] and E[i - lo, c] = O[i, c] - top
    (whose exp cannot overflow)."""
    cdef Py_ssize_t m = O.shape[1], i, c
    cdef double top
    for i in range(lo, hi):
        top = O[i, 0]
        for c in range(1, m):
            if O[i, c] > top:
                top = O[i, c]
        tops[i - lo] = top
        for c in range(m):
            E[i - lo, c] = O[i, c] - top


cdef double _multiclass_block_loss(const Block* blk, const Py_ssize_t[::1] codes,
                                   const double[::1] s, const double[:, ::1] O,
                                   const double[:, ::1] E, const double* tops,
                                   double[:, ::1] W) noexcept nogil:
    """The multi-class logistic loss sum_i s_i (log sum_c exp(O_ic) - O_i,codes_i) of
    the block's rows from E = exp(O - tops) (rows i - lo); with the block's
    ``gradient``, W[i] = s_i (softmax(O_i) - e_codes_i) and W's column sums added to its
    ``column_sums``."""
    cdef Py_ssize_t lo = blk.lo, hi = blk.hi
    cdef bint gradient = blk.gradient
    cdef double* column_sums = blk.column_sums
    cdef Py_ssize_t m = O.shape[1], i, c
    cdef double value = 0.0, total, scale
    for i in range(lo, hi):
        total = 0.0
        for c in range(m):
            total += E[i - lo, c]
        value += s[i] * (log(total) + tops[i - lo] - O[i, codes[i]])
        if gradient:
            scale = s[i] / total
            for c in range(m):
                W[i, c] = E[i - lo, c] * scale
            W[i, codes[i]] -= s[i]
            for c in range(m):
                column_sums[c] += W[i, c]
    return value


cdef double _hinge_block_loss(int loss, const Block* blk, const Py_ssize_t[::1] codes,
                              const double[::1] s, const double[:, ::1] O,
                              double[:, ::1] A, double[:, ::1] work,
                              double[:, ::1] W) noexcept nogil:
    """The multi-class hinge loss of the block's rows (weighted by s), with y = codes[i]
    and the margins a_c = 1 + O[i, c] - O[i, y] (a_y = 0): SQUARED_HINGE
    sum_{c != y} max(a_c, 0)^2, SMOOTH_HINGE <p, a> - ||p||^2 / 2 + 1/2 with p the
    projection of a onto the simplex; with the block's ``gradient``, W[i] =
    s_i d loss / d O[i] (2 max(a, 0), minus their sum at y; p - e_y) and W's column sums
    added to its ``column_sums``.  A and work: scratch rows (i - lo) of at least m
    values."""
    cdef Py_ssize_t lo = blk.lo, hi = blk.hi
    cdef bint gradient = blk.gradient
    cdef double* column_sums = blk.column_sums
    cdef Py_ssize_t m = O.shape[1], i, c, y
    cdef double value = 0.0, row, total, theta, p, slack, top
    cdef double* a
    for i in range(lo, hi):
        y = codes[i]
        a = &A[i - lo, 0]
        top = -1.0   # the largest a_c, c != y, if above -1
        for c in range(m):
            a[c] = 1.0 + O[i, c] - O[i, y] if c != y else 0.0
            if c != y and a[c] > top:
                top = a[c]
        if loss == _SMOOTH_HINGE and top <= -1.0:
            # Beyond the margin: the projection is e_y (theta = -1), loss and gradient
            # zero, as the sort would find.
            if gradient:
                for c in range(m):
                    W[i, c] = 0.0
            continue
        if loss == _SQUARED_HINGE:
            row = 0.0
            total = 0.0
            for c in range(m):
                slack = a[c] if a[c] > 0 else 0.0
                row += slack * slack
                if gradient:
                    W[i, c] = 2.0 * s[i] * slack
                    total += W[i, c]
            if gradient:
                W[i, y] = -total
        else:
            theta = simplex_threshold(a, m, 1.0, False, &work[i - lo, 0])
            row = 0.5
            for c in range(m):
                p = a[c] - theta if a[c] > theta else 0.0
                row += p * a[c] - 0.5 * p * p
                if gradient:
                    W[i, c] = s[i] * (p - 1.0 if c == y else p)
        value += s[i] * row
        if gradient:
            for c in range(m):
                column_sums[c] += W[i, c]
    return value


class _Buffers:
    """One thread's scratch for blocks of rows: exp(-|margins|) or exp(O - max), their
    log1p, and the row maxima (the hinge losses: their margins and the sort's work)."""

    def __init__(self, Py_ssize_t m):
        self.exponents = np.empty((BLOCK_ROWS, m))
        self.logs = np.empty((BLOCK_ROWS, m))
        self.tops = np.empty(BLOCK_ROWS)


def _block_loss(int loss, Py_ssize_t start, Py_ssize_t stop, Y, s, O, W, bint gradient,
                buffers, double[::1] column_sums):
    """The loss of rows start..stop (at most BLOCK_ROWS) of O, and with ``gradient``
    their W and W's column sums (added to ``column_sums``): the exponentials by NumPy's
    vectorised ufuncs (several times faster than the C library's one value at a time)
    between C loops.  Y: targets (n, m), or class codes (n,) for the multi-class
    losses."""
    cdef Py_ssize_t k = stop - start
    exponents, logs = buffers.exponents, buffers.logs
    cdef double[:, ::1] E = exponents
    cdef double[:, ::1] L = logs
    cdef double[::1] tops = buffers.tops
    cdef const double[::1] s_view = s
    cdef const double[:, ::1] O_view = O
    cdef double[:, ::1] W_view = W
    cdef const double[:, ::1] Y_view
    cdef const Py_ssize_t[::1] codes
    cdef double value
    cdef Block blk
    blk.lo, blk.hi, blk.gradient, blk.column_sums = start, stop, gradient, &column_sums[0]
    if loss == _SMOOTH_HINGE or loss == _SQUARED_HINGE:
        codes = Y
        with nogil:
            value = _hinge_block_loss(loss, &blk, codes, s_view, O_view, E, L, W_view)
        return value
    if loss == _MULTICLASS_LOGISTIC:
        codes = Y
        with nogil:
            _softmax_exponents(start, stop, O_view, E, &tops[0])
        np.exp(exponents[:k], out=exponents[:k])
        with nogil:
            value = _multiclass_block_loss(&blk, codes, s_view, O_view, E, &tops[0],
                                           W_view)
        return value
    Y_view = Y
    if loss == _LOGISTIC:
        with nogil:
            _negative_abs_margins(start, stop, Y_view, O_view, E)
        np.exp(exponents[:k], out=exponents[:k])
        np.log1p(exponents[:k], out=logs[:k])
        with nogil:
            value = _logistic_block_loss(&blk, Y_view, s_view, O_view, E, L, W_view)
        return value
    with nogil:
        value = _per_output_block_loss(loss, &blk, Y_view, s_view, O_view, W_view)
    return value


def _check_shapes(int loss, n, m, Y, s, O, W, bint gradient):
    """The shapes and layouts that loss_pass and output_loss need (ValueError if not)."""
    targets = (n,) if loss >= _MULTICLASS_LOGISTIC else (n, m)
    if Y.shape != targets or s.shape != (n,) or O.shape != (n, m) or (
            gradient and W.shape != (n, m)):
        raise ValueError("loss pass: inconsistent shapes")
    if not O.flags.c_contiguous or O.dtype != np.float64 or (gradient and not (
            W.flags.c_contiguous and W.dtype == np.float64)):
        raise ValueError("loss pass: O and W must be C-contiguous float64")


def loss_pass(int loss, Y, O, s, W, bint gradient, int n_threads=1):
    """sum_i s_i loss(Y[i], O[i]) for the outputs O (n, m), float64 C order: a
    per-output loss of the kernel layer summed over the outputs (SQUARED:
    (o - y)^2 / 2, LOGISTIC: log(1 + exp(-y o))) or a multi-class loss, Y the class
    codes (n,): MULTICLASS_LOGISTIC (log sum_c exp(o_c) - o_y), SMOOTH_HINGE or
    SQUARED_HINGE (:func:`_hinge_block_loss`); with ``gradient`` also
    W[i, c] = s_i d loss / d O[i, c], in place.  Block by block, as in
    :func:`output_loss`, on ``n_threads`` threads."""
    cdef Py_ssize_t n = O.shape[0], m = O.shape[1]
    if not gradient:
        W = np.empty((0, m))
    _check_shapes(loss, n, m, Y, s, O, W, gradient)
    if n == 0 or m == 0:
        return 0.0
    scratch = _thread_scratch(max(n_threads, 1), m + 1)

    def work(k, lo, hi):
        buffers = _Buffers(m)
        for start in range(lo, hi, BLOCK_ROWS):
            scratch[k, m] += _block_loss(loss, start, min(start + BLOCK_ROWS, hi), Y, s,
                                         O, W, gradient, buffers, scratch[k, :m])

    _on_row_ranges(n, n_threads, work)
    return float(scratch[:, m].sum())


class _OutputLoss:
    """The arrays of one :func:`output_loss` pass, as its row ranges read and write
    them: the loss's code, the features Z, the linear layer V and b, the targets Y (or
    class codes) and weights s, the outputs O and their gradients W (written)."""

    def __init__(self, loss, Z, V, b, Y, s, O, W):
        self.loss, self.Z, self.V, self.b = loss, Z, V, b
        self.Y, self.s, self.O, self.W = Y, s, O, W


def _output_loss_range(job, Py_ssize_t lo, Py_ssize_t hi, double[::1] sums):
    """Rows lo..hi of the :func:`output_loss` pass ``job`` (an :class:`_OutputLoss`),
    block by block: O = Z V + b and Z^T W by BLAS and the loss between them
    (:func:`_block_loss`).  Adds the rows' Z^T W, W's column sums and loss to
    ``sums``."""
    Z, V, b, O, W = job.Z, job.V, job.b, job.O, job.W
    cdef Py_ssize_t t = Z.shape[1], m = V.shape[1], start, stop
    buffers = _Buffers(m)
    ZtW = np.zeros((t, m))
    cdef double total = 0.0
    for start in range(lo, hi, BLOCK_ROWS):
        stop = min(start + BLOCK_ROWS, hi)
        _block_outputs(Z, V, b, O, start, stop)
        total += _block_loss(job.loss, start, stop, job.Y, job.s, O, W, True, buffers,
                             sums[t * m:])
        ZtW += Z[start:stop].T @ W[start:stop]
    np.asarray(sums)[:t * m] += ZtW.ravel()
    sums[t * m + m] += total


def output_loss(int loss, Z, V, b, Y, s, O, W, int n_threads=1):
    """One pass over the rows for a refit step: the outputs O = Z V + b, the loss
    sum_i s_i sum_c loss(Y[i, c], O[i, c]) and W[i, c] = s_i d loss / d O[i, c] (as
    :func:`loss_pass`; for the multi-class losses, Y holds the class codes (n,)), O and W
    (float64, C order) in place, and what the next step's gradient needs: Z^T W
    (t, n_outputs) and the column sums of W (n_outputs,), while each block of rows is in
    the cache.  Returns (loss, Z^T W, sums).

    Blocks of rows (:func:`_output_loss_range`) on ``n_threads`` threads
    (:func:`_on_row_ranges`)."""
    V = np.ascontiguousarray(V, dtype=np.float64)
    b = np.ascontiguousarray(b, dtype=np.float64)
    cdef Py_ssize_t n = Z.shape[0], t = Z.shape[1], m = V.shape[1]
    if Z.ndim != 2 or V.shape[0] != t or b.shape != (m,):
        raise ValueError("output_loss: inconsistent shapes")
    _check_shapes(loss, n, m, Y, s, O, W, True)
    if n == 0 or m == 0:
        return 0.0, np.zeros((t, m)), np.zeros(m)
    scratch = _thread_scratch(max(n_threads, 1), t * m + m + 1)
    job = _OutputLoss(loss, Z, V, b, Y, s, O, W)
    _on_row_ranges(n, n_threads, lambda k, lo, hi: _output_loss_range(
        job, lo, hi, scratch[k]))
    total = scratch.sum(axis=0)
    return (float(total[t * m + m]), total[:t * m].reshape(t, m),
            total[t * m:t * m + m].copy())


# The vector algebra of the power method's iterations (_selection.dominant_eigenvectors):
# column-wise operations on (dim, m) blocks of float64 vectors, each a sweep over the
# block's rows with no temporaries.

def unit_residuals(const double[:, ::1] Q, const double[:, ::1] GQ, const double[::1] rho,
                   double[:, ::1] P):
    """P[:, s] = r_s / ||r_s|| for the residuals r_s = GQ[:, s] - rho[s] Q[:, s], in
    place (a zero residual stays zero); returns the norms ||r_s||, shape (m,)."""
    cdef Py_ssize_t dim = Q.shape[0], m = Q.shape[1], j, s
    cdef double r
    norms = np.zeros(m)
    cdef double[::1] norm = norms
    with nogil:
        for j in range(dim):
            for s in range(m):
                r = GQ[j, s] - rho[s] * Q[j, s]
                P[j, s] = r
                norm[s] += r * r
        for s in range(m):
            norm[s] = sqrt(norm[s])
        for j in range(dim):
            for s in range(m):
                if norm[s] > 0:
                    P[j, s] /= norm[s]
    return norms


def orthogonalise_step(const double[:, ::1] q, const double[:, ::1] p,
                       double[:, ::1] d, const double[:, ::1] gq,
                       const double[:, ::1] gp, double[:, ::1] gd):
    """d <- d - q (q.d) - p (p.d) and gd <- gd - gq (q.d) - gp (p.d) in place (Gamma d
    follows d), column by column; returns the products the 3 x 3 eigenproblem needs,
    shape (8, m): d.d, p.gp, d.gd, q.gd, d.gq, p.gd, d.gp (after the update) and d.d
    before it."""
    cdef Py_ssize_t dim = q.shape[0], m = q.shape[1], j, s
    cdef double x, y
    coefficients = np.zeros((2, m))
    products = np.zeros((8, m))
    cdef double[:, ::1] c = coefficients
    cdef double[:, ::1] out = products
    with nogil:
        for j in range(dim):
            for s in range(m):
                c[0, s] += q[j, s] * d[j, s]
                c[1, s] += p[j, s] * d[j, s]
                out[7, s] += d[j, s] * d[j, s]
        for j in range(dim):
            for s in range(m):
                x = d[j, s] - q[j, s] * c[0, s] - p[j, s] * c[1, s]
                y = gd[j, s] - gq[j, s] * c[0, s] - gp[j, s] * c[1, s]
                d[j, s] = x
                gd[j, s] = y
                out[0, s] += x * x
                out[1, s] += p[j, s] * gp[j, s]
                out[2, s] += x * y
                out[3, s] += q[j, s] * y
                out[4, s] += x * gq[j, s]
                out[5, s] += p[j, s] * y
                out[6, s] += x * gp[j, s]
    return products


def combine_step(const double[:, ::1] y, directions, gammas, out):
    """With coefficients y (m, 3) and the ``directions`` (q, p, d): step = y1 p + y2 d,
    q_new = (y0 q + step) / its norm, and the same combinations of their ``gammas``
    (gq, gp, gd: Gamma of each), into ``out`` (q_new, gq_new, step, gstep) in place;
    returns the Rayleigh quotients q_new . gq_new, shape (m,).  Every block is (dim, m)
    float64 in C order."""
    cdef const double[:, ::1] q, p, d, gq, gp, gd
    cdef double[:, ::1] q_new, gq_new, step, gstep
    q, p, d = directions
    gq, gp, gd = gammas
    q_new, gq_new, step, gstep = out
    cdef Py_ssize_t dim = q.shape[0], m = q.shape[1], j, s
    cdef double a, b
    norms = np.zeros(m)
    quotients = np.zeros(m)
    cdef double[::1] norm = norms
    cdef double[::1] rho = quotients
    with nogil:
        for j in range(dim):
            for s in range(m):
                a = y[s, 1] * p[j, s] + y[s, 2] * d[j, s]
                b = y[s, 1] * gp[j, s] + y[s, 2] * gd[j, s]
                step[j, s] = a
                gstep[j, s] = b
                a = y[s, 0] * q[j, s] + a
                q_new[j, s] = a
                gq_new[j, s] = y[s, 0] * gq[j, s] + b
                norm[s] += a * a
        for s in range(m):
            norm[s] = 1.0 / sqrt(norm[s])
        for j in range(dim):
            for s in range(m):
                q_new[j, s] *= norm[s]
                gq_new[j, s] *= norm[s]
                rho[s] += q_new[j, s] * gq_new[j, s]
    return quotients
