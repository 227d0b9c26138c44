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
from libc.math cimport exp, log, sqrt, isfinite
from libc.stdlib cimport malloc, free, calloc

from .._kernels cimport (index_t, floating, ANOVA, ALL_SUBSETS, POLYNOMIAL,
                        POLYLITE_PREFETCH, anova_gradient, all_subsets_gradient,
                        linear_forms)
from .._losses cimport loss_derivative, loss_value

cdef double ADAGRAD_EPS = 1e-8

cdef enum:
    # Shuffled rows sit at random places in memory: fetch the row pointer of the row this
    # far ahead, and the row itself (values, indices, label, weight) half as far ahead.
    PREFETCH_ROWS = 16

cdef enum:
    CONSTANT = 0
    INVSCALING = 1
    ADAGRAD = 2


cdef inline double _ipow(double base, int m) noexcept nogil:
    cdef double r = 1
    cdef int i
    for i in range(m):
        r *= base
    return r


cdef double _row_gradient(int kernel, const floating* P, Py_ssize_t d, Py_ssize_t k,
                          Py_ssize_t n_blocks, const int* degrees,
                          const floating* gamma, Py_ssize_t n_dummy, const floating* lam,
                          const index_t* ind, const floating* val, Py_ssize_t nnz,
                          floating* table, floating* adj, floating* gP,
                          floating* ggamma, floating* glam) noexcept nogil:
    """Nonlinear term of the row's prediction; its gradient into the buffers.

    gP[(b * nnz + z) * k + s] = d/dP[b, ind[z], s]; ggamma[r * k + s]; glam[s] (polynomial
    kernel only).  Workspace: ``table`` (n_dummy + nnz + 1) * (max degree + 1) * k and
    ``adj`` (max degree + 1) * k.
    """
    cdef Py_ssize_t b, s, z, m, n_items
    cdef double total = 0, u, um1, coef
    cdef floating* last
    if kernel == ANOVA:
        for b in range(n_blocks):
            m = degrees[b]
            n_items = nnz + (n_dummy if b == 0 else 0)
            anova_gradient(P + b * d * k, k, gamma if b == 0 else NULL,
                           n_dummy if b == 0 else 0, ind, val, nnz, m, table, adj,
                           gP + b * nnz * k, ggamma if b == 0 else NULL)
            last = table + n_items * (m + 1) * k + m * k
            for s in range(k):
                total += last[s]
    elif kernel == ALL_SUBSETS:
        all_subsets_gradient(P, k, ind, val, nnz, table, adj, gP)
        for s in range(k):
            total += table[nnz * k + s]
    else:
        m = degrees[0]
        linear_forms(P, k, gamma if n_dummy > 0 else NULL, ind, val, nnz, adj)
        for s in range(k):
            u = adj[s]
            um1 = _ipow(u, m - 1)
            glam[s] = um1 * u
            total += lam[s] * um1 * u
            coef = lam[s] * m * um1
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


cdef inline void _adagrad_step(floating* p, floating* acc, double g,
                               double eta0) noexcept nogil:
    acc[0] = acc[0] + g * g
    p[0] = p[0] - eta0 * g / (sqrt(acc[0]) + ADAGRAD_EPS)


cdef bint _all_allocated(void** ptrs, int n) noexcept nogil:
    cdef int i
    for i in range(n):
        if ptrs[i] == NULL:
            return False
    return True


cdef void _free_all(void** ptrs, int n) noexcept nogil:
    cdef int i
    for i in range(n):
        free(ptrs[i])


cdef inline void _prefetch_ahead(Py_ssize_t pos, Py_ssize_t n_rows, const Py_ssize_t* order,
                                 const index_t* indptr, const floating* data,
                                 const index_t* ind, const double* y, const double* sw,
                                 const floating* w, const floating* P,
                                 const floating* acc_w, const floating* acc_P,
                                 const long long* last_touch, Py_ssize_t n_blocks,
                                 Py_ssize_t d, Py_ssize_t k) noexcept nogil:
    """Software prefetch, in three stages, for the rows a pass will visit after ``pos``.

    Shuffled rows sit at random places in memory: the row pointer PREFETCH_ROWS ahead,
    the row itself (values, indices, label, weight) half as far ahead, and the parameters
    its nonzeros touch a quarter as far ahead (its indices are cached by then).  A factor
    row may straddle two cache lines: both ends are fetched.  ``acc_w``, ``acc_P`` and
    ``last_touch`` are AdaGrad's (NULL for SGD).
    """
    cdef Py_ssize_t r, z, j, b, lo, hi
    cdef const floating* row
    if pos + PREFETCH_ROWS < n_rows:
        POLYLITE_PREFETCH(indptr + order[pos + PREFETCH_ROWS])
    if pos + PREFETCH_ROWS // 2 < n_rows:
        r = order[pos + PREFETCH_ROWS // 2]
        lo = indptr[r]
        hi = indptr[r + 1] - 1
        POLYLITE_PREFETCH(data + lo)
        POLYLITE_PREFETCH(ind + lo)
        if hi > lo:
            POLYLITE_PREFETCH(data + hi)
            POLYLITE_PREFETCH(ind + hi)
        POLYLITE_PREFETCH(y + r)
        POLYLITE_PREFETCH(sw + r)
    if pos + PREFETCH_ROWS // 4 < n_rows:
        r = order[pos + PREFETCH_ROWS // 4]
        for z in range(indptr[r], indptr[r + 1]):
            j = ind[z]
            POLYLITE_PREFETCH(w + j)
            for b in range(n_blocks):
                row = P + (b * d + j) * k
                POLYLITE_PREFETCH(row)
                POLYLITE_PREFETCH(row + k - 1)
            if acc_P != NULL:
                POLYLITE_PREFETCH(acc_w + j)
                POLYLITE_PREFETCH(last_touch + j)
                for b in range(n_blocks):
                    row = acc_P + (b * d + j) * k
                    POLYLITE_PREFETCH(row)
                    POLYLITE_PREFETCH(row + k - 1)


cdef struct Scales:
    # SGD stores w = wscale * v and P = pscale * V: one step's L2 decay of every
    # parameter is then O(1), exactly the eager update (Bottou's trick).  AdaGrad: 1.
    double w
    double p


cdef inline void _fold_scales(floating* w, Py_ssize_t d, floating* P, Py_ssize_t size_P,
                              Scales* sc) noexcept nogil:
    """Multiply the stored parameters by their scales (then 1)."""
    cdef Py_ssize_t i
    if sc.w != 1:
        for i in range(d):
            w[i] = w[i] * sc.w
        sc.w = 1
    if sc.p != 1:
        for i in range(size_P):
            P[i] = P[i] * sc.p
        sc.p = 1


cdef inline void _forward_row(const floating* p, floating x, int m, floating* a1,
                              floating* a2, floating* a3, Py_ssize_t k) noexcept nogil:
    """Add one item, q = x p_f, to the running A_1..A_m of a block of degree m = 2 or 3:
    the ANOVA dynamic programme of anova_forward, written out (descending degrees, so
    that each update reads the previous item's value).  One branch per factor row, not
    per component, so the k-loop vectorises."""
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


cdef inline void _sgd_row(floating* p, floating x, int m, const floating* a1,
                          const floating* a2, floating fstep, Py_ssize_t k) noexcept nogil:
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


cdef inline void _adagrad_row(floating* p, floating* acc, floating x, int m,
                              const floating* a1, const floating* a2, double dl,
                              double decay, double eta0, Py_ssize_t k) noexcept nogil:
    """AdaGrad on the k coordinates of one factor row of a block of degree m = 2 or 3:
    g_f = dl (gradient of A_m in p_f) + decay p_f, then _adagrad_step.  The module is
    built with -fno-math-errno, so the compiler vectorises the square roots and
    divisions."""
    cdef Py_ssize_t f
    if m == 2:
        for f in range(k):
            _adagrad_step(&p[f], &acc[f], dl * _grad2(x, p[f], a1[f]) + decay * p[f], eta0)
    else:
        for f in range(k):
            _adagrad_step(&p[f], &acc[f],
                          dl * _grad3(x, p[f], a1[f], a2[f]) + decay * p[f], eta0)


cdef inline bint _anova23_pass(const floating* data, const index_t* ind, const index_t* indptr,
                        const double* y, const double* sw, const Py_ssize_t* order,
                        Py_ssize_t n_rows, floating* intercept, floating* w, floating* V,
                        Py_ssize_t n_blocks, const int* degrees, Py_ssize_t d,
                        Py_ssize_t k, int loss, double alpha, double beta,
                        bint fit_intercept, bint fit_linear, int schedule, double eta0,
                        double power_t, long long* step, floating* acc_intercept,
                        floating* acc_w, floating* acc_P, long long* last_touch,
                        floating* work, Scales* sc) noexcept nogil:
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
    cdef bint adagrad = schedule == ADAGRAD
    cdef Py_ssize_t pos, i, z, j, f, b, start, nnz, size_P = n_blocks * d * k
    cdef floating* row
    cdef floating* a
    cdef floating xv, fstep
    cdef int m
    cdef double pred, dl, eta, total, new_w, new_p, elapsed, step_w
    for pos in range(n_rows):
        _prefetch_ahead(pos, n_rows, order, indptr, data, ind, y, sw, w, V, acc_w, acc_P,
                        last_touch, n_blocks, d, k)
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
                _adagrad_step(intercept, acc_intercept, dl, eta0)
            for z in range(nnz):
                j = ind[start + z]
                xv = data[start + z]
                elapsed = step[0] - last_touch[j]  # steps since the last touch
                last_touch[j] = step[0]
                if fit_linear:
                    _adagrad_step(&w[j], &acc_w[j], dl * xv + alpha * elapsed * w[j], eta0)
                for b in range(n_blocks):
                    a = work + 3 * b * k
                    _adagrad_row(V + (b * d + j) * k, acc_P + (b * d + j) * k, xv,
                                 degrees[b], a, a + k, dl, beta * elapsed, eta0, k)
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


def sgd_epoch(const floating[::1] data, const index_t[::1] indices,
              const index_t[::1] indptr, const double[::1] y,
              const double[::1] sample_weight, const Py_ssize_t[::1] order,
              floating[::1] intercept, floating[::1] w, floating[:, :, ::1] P,
              const int[::1] degrees, floating[:, ::1] gamma, floating[::1] lam,
              int kernel, int loss, double alpha, double beta,
              bint fit_intercept, bint fit_linear, bint fit_lam,
              int schedule, double eta0, double power_t, long long step,
              floating[::1] acc_intercept, floating[::1] acc_w,
              floating[:, :, ::1] acc_P, floating[:, ::1] acc_gamma,
              floating[::1] acc_lam, long long[::1] last_touch, Py_ssize_t batch_size,
              bint specialised=True):
    """One pass of SGD or AdaGrad over the rows ``order`` (in that order), in place.

    ``sample_weight`` scales each row's loss gradient (mean 1 over the data set for the
    objective's normalisation).  ``step`` is the number of (mini-batch) steps taken before
    this pass (for the inverse-scaling schedule).  ``acc_*`` are AdaGrad's accumulated
    squared gradients and ``last_touch`` the step at which each feature was last updated
    (both ignored by SGD).  Returns (steps after the pass, finite): on a non-finite
    prediction the pass stops at once with finite False (the caller checks the parameters).
    ``specialised=False`` runs the general loop even where a specialised pass exists
    (ANOVA blocks of degree 2 or 3, no dummies, one row per step): the tests compare
    the two.
    Rows must not repeat a column (canonical CSR).
    """
    cdef Py_ssize_t n_rows = order.shape[0], n_blocks = P.shape[0], d = P.shape[1]
    cdef Py_ssize_t k = P.shape[2], n_dummy = gamma.shape[0]
    cdef Py_ssize_t i, z, b, s, r, j, start, end, nnz, pos, batch_end, row_in_batch
    cdef Py_ssize_t max_nnz = 0, n_touched, t_idx, size_P = n_blocks * d * k
    # The loops below run without bounds checks: the shapes must agree.
    if (w.shape[0] != d or lam.shape[0] != k or gamma.shape[1] != k
            or intercept.shape[0] != 1 or y.shape[0] != indptr.shape[0] - 1
            or sample_weight.shape[0] != y.shape[0]):
        raise ValueError("sgd_epoch: parameter or data shapes disagree")
    if schedule == ADAGRAD and (
            acc_intercept.shape[0] != 1 or acc_w.shape[0] != d or acc_lam.shape[0] != k
            or acc_P.shape[0] != n_blocks or acc_P.shape[1] != d or acc_P.shape[2] != k
            or acc_gamma.shape[0] != n_dummy or acc_gamma.shape[1] != k
            or last_touch.shape[0] != d):
        raise ValueError("sgd_epoch: AdaGrad statistics do not match the parameters")
    for z in range(order.shape[0]):
        if order[z] < 0 or order[z] >= y.shape[0]:
            raise ValueError("sgd_epoch: row order out of range")
    cdef int max_degree = 1
    cdef bint adagrad = schedule == ADAGRAD, finite = True, direct = batch_size == 1
    cdef double eta, pred, dl, g, scale, elapsed, new_w, new_p, buf_intercept
    cdef Scales sc
    sc.w = 1
    sc.p = 1
    for b in range(degrees.shape[0]):
        max_degree = max(max_degree, degrees[b])
    for i in range(indptr.shape[0] - 1):
        max_nnz = max(max_nnz, indptr[i + 1] - indptr[i])
    cdef Py_ssize_t block = (max_degree + 1) * max(k, 1)
    cdef void* owned[13]
    owned[0] = malloc((n_dummy + max_nnz + 1) * block * sizeof(floating))   # table
    owned[1] = malloc(block * sizeof(floating))                              # adj
    owned[2] = malloc((n_blocks * max_nnz * k + 1) * sizeof(floating))       # gP
    owned[3] = malloc((n_dummy * k + 1) * sizeof(floating))                  # ggamma
    owned[4] = malloc((k + 1) * sizeof(floating))                            # glam
    owned[5] = malloc((max_nnz + 1) * sizeof(floating))                      # scaled row
    # Mini-batches only: summed gradients of the touched features, and which they are.
    owned[6] = calloc(1 if direct else d + 1, sizeof(double))
    owned[7] = calloc(1 if direct else size_P + 1, sizeof(double))
    owned[8] = calloc(n_dummy * k + 1, sizeof(double))
    owned[9] = calloc(k + 1, sizeof(double))
    owned[10] = malloc((1 if direct else d + 1) * sizeof(Py_ssize_t))
    owned[11] = calloc(1 if direct else d + 1, 1)
    # The pass for blocks of degree 2 or 3: A_1..A_3 per block.
    owned[12] = malloc((3 * n_blocks * k + 1) * sizeof(floating))
    if not _all_allocated(owned, 13):
        _free_all(owned, 13)
        raise MemoryError("not enough memory for the SGD buffers")
    cdef floating* table = <floating*> owned[0]
    cdef floating* adj = <floating*> owned[1]
    cdef floating* gP = <floating*> owned[2]
    cdef floating* ggamma = <floating*> owned[3]
    cdef floating* glam = <floating*> owned[4]
    cdef floating* xs = <floating*> owned[5]
    cdef double* buf_w = <double*> owned[6]
    cdef double* buf_P = <double*> owned[7]
    cdef double* buf_gamma = <double*> owned[8]
    cdef double* buf_lam = <double*> owned[9]
    cdef Py_ssize_t* touched = <Py_ssize_t*> owned[10]
    cdef char* is_touched = <char*> owned[11]
    cdef floating* work23 = <floating*> owned[12]
    cdef floating* P0 = &P[0, 0, 0] if P.size > 0 else gP
    cdef floating* gam = &gamma[0, 0] if gamma.size > 0 else NULL
    cdef floating* lamp = &lam[0] if lam.shape[0] > 0 else glam
    cdef const index_t* ind0 = &indices[0] if indices.shape[0] > 0 else NULL
    cdef const floating* val0 = &data[0] if data.shape[0] > 0 else NULL
    cdef const Py_ssize_t* ord0 = &order[0] if n_rows > 0 else NULL
    cdef floating* w0 = &w[0] if d > 0 else NULL
    cdef floating* acc_w0 = &acc_w[0] if adagrad and d > 0 else NULL
    cdef floating* acc_P0 = &acc_P[0, 0, 0] if adagrad and acc_P.size > 0 else NULL
    cdef long long* touch0 = &last_touch[0] if adagrad and d > 0 else NULL
    # Factorization machines of degree 2 or 3 (blocks of degree 2 or 3, no dummies, one
    # row per step) have their own pass; the results agree with the general loop up to
    # rounding.
    cdef bint low_degree = (specialised and kernel == ANOVA and n_blocks > 0
                            and degrees.shape[0] >= n_blocks and n_dummy == 0 and direct
                            and k > 0 and d > 0)
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
                finite = _anova23_pass(val0, ind0, &indptr[0], &y[0], &sample_weight[0],
                                       ord0, n_rows, &intercept[0], w0, P0, 1, &degree2,
                                       d, k, loss, alpha, beta, fit_intercept, fit_linear,
                                       schedule, eta0, power_t, &step,
                                       &acc_intercept[0] if adagrad else NULL, acc_w0,
                                       acc_P0, touch0, work23, &sc)
            elif low_degree:
                finite = _anova23_pass(val0, ind0, &indptr[0], &y[0], &sample_weight[0],
                                       ord0, n_rows, &intercept[0], w0, P0, n_blocks,
                                       &degrees[0], d, k, loss, alpha, beta,
                                       fit_intercept, fit_linear, schedule, eta0, power_t,
                                       &step, &acc_intercept[0] if adagrad else NULL,
                                       acc_w0, acc_P0, touch0, work23, &sc)
            if low_degree:
                pos = n_rows  # the general loop below is skipped
            while pos < n_rows and finite:
                batch_end = min(pos + batch_size, n_rows)
                step += 1
                eta = eta0 / _pow_t(step, power_t) if schedule == INVSCALING else eta0
                n_touched = 0
                buf_intercept = 0
                for row_in_batch in range(pos, batch_end):
                    _prefetch_ahead(row_in_batch, n_rows, ord0, &indptr[0], val0, ind0,
                                    &y[0], &sample_weight[0], w0, P0, acc_w0, acc_P0,
                                    touch0, n_blocks, d, k)
                    i = order[row_in_batch]
                    start = indptr[i]
                    end = indptr[i + 1]
                    nnz = end - start
                    # The kernels see P = pscale * V through the values: q = V (pscale x).
                    for z in range(nnz):
                        xs[z] = <floating> (sc.p * data[start + z])
                    pred = intercept[0]
                    if fit_linear:
                        pred += sc.w * _linear(&w[0], ind0 + start, &data[0] + start, nnz)
                    if k > 0 and n_blocks > 0:
                        pred += _row_gradient(kernel, P0, d, k, n_blocks, &degrees[0], gam,
                                              n_dummy, lamp, ind0 + start, xs, nnz,
                                              table, adj, gP, ggamma, glam)
                    if not isfinite(pred):
                        finite = False
                        break
                    # gP is the gradient in V: pscale times the gradient in P.
                    dl = sample_weight[i] * loss_derivative(loss, y[i], pred)
                    if direct:
                        _apply_row(intercept, w, P0, gam, lamp, acc_intercept, acc_w,
                                   acc_P, acc_gamma, acc_lam, last_touch, indices, data,
                                   start, nnz, d, k, n_blocks, n_dummy, kernel, gP, ggamma,
                                   glam, dl, eta, eta0, alpha, beta, step, adagrad,
                                   fit_intercept, fit_linear, fit_lam, &sc)
                        continue
                    buf_intercept += dl
                    for z in range(nnz):
                        j = indices[start + z]
                        if not is_touched[j]:
                            is_touched[j] = 1
                            touched[n_touched] = j
                            n_touched += 1
                        buf_w[j] += dl * data[start + z]
                        for b in range(n_blocks):
                            for s in range(k):
                                buf_P[(b * d + j) * k + s] += (dl * gP[(b * nnz + z) * k + s]
                                                               / sc.p)
                    for r in range(n_dummy * k):
                        buf_gamma[r] += dl * ggamma[r]
                    if kernel == POLYNOMIAL:
                        for s in range(k):
                            buf_lam[s] += dl * glam[s]
                if not finite or direct:
                    pos = batch_end
                    if not direct:
                        break
                    if sc.w < 1e-9 or sc.p < 1e-9:
                        _fold_scales(w0, d, P0, size_P, &sc)
                    continue
                # ---- one step with the mini-batch's mean gradient ----
                scale = 1.0 / (batch_end - pos)
                new_w = sc.w * (1 - eta * alpha) if not adagrad else 1
                new_p = sc.p * (1 - eta * beta) if not adagrad else 1
                if fit_intercept:
                    g = buf_intercept * scale
                    if adagrad:
                        _adagrad_step(&intercept[0], &acc_intercept[0], g, eta0)
                    else:
                        intercept[0] = intercept[0] - eta * g
                for t_idx in range(n_touched):
                    j = touched[t_idx]
                    is_touched[j] = 0
                    if adagrad:
                        elapsed = step - last_touch[j]  # steps since the last touch
                        last_touch[j] = step
                    if fit_linear:
                        g = buf_w[j] * scale
                        if adagrad:
                            _adagrad_step(&w[j], &acc_w[j], g + alpha * elapsed * w[j], eta0)
                        else:
                            w[j] = w[j] - eta * g / new_w
                    buf_w[j] = 0
                    for b in range(n_blocks):
                        for s in range(k):
                            r = (b * d + j) * k + s
                            g = buf_P[r] * scale
                            buf_P[r] = 0
                            if adagrad:
                                _adagrad_step(&P0[r], &acc_P[b, j, s],
                                              g + beta * elapsed * P0[r], eta0)
                            else:
                                P0[r] = P0[r] - eta * g / new_p
                for r in range(n_dummy * k):
                    g = buf_gamma[r] * scale + beta * gam[r]
                    buf_gamma[r] = 0
                    if adagrad:
                        _adagrad_step(&gam[r], &acc_gamma[r // k, r % k], g, eta0)
                    else:
                        gam[r] = gam[r] - eta * g
                if kernel == POLYNOMIAL:
                    for s in range(k):
                        g = buf_lam[s] * scale
                        buf_lam[s] = 0
                        if fit_lam:
                            g += beta * lamp[s]
                            if adagrad:
                                _adagrad_step(&lamp[s], &acc_lam[s], g, eta0)
                            else:
                                lamp[s] = lamp[s] - eta * g
                sc.w = new_w
                sc.p = new_p
                if sc.w < 1e-9 or sc.p < 1e-9:
                    _fold_scales(w0, d, P0, size_P, &sc)
                pos = batch_end
            # Parameters that overflowed are caught by the caller, which checks every array.
            _fold_scales(w0, d, P0, size_P, &sc)
    finally:
        _free_all(owned, 13)
    return step, bool(finite)


cdef inline void _apply_row(floating[::1] intercept, floating[::1] w, floating* P,
                            floating* gamma, floating* lam,
                            floating[::1] acc_intercept, floating[::1] acc_w,
                            floating[:, :, ::1] acc_P, floating[:, ::1] acc_gamma,
                            floating[::1] acc_lam, long long[::1] last_touch,
                            const index_t[::1] indices, const floating[::1] data,
                            Py_ssize_t start, Py_ssize_t nnz, Py_ssize_t d, Py_ssize_t k,
                            Py_ssize_t n_blocks, Py_ssize_t n_dummy, int kernel,
                            const floating* gP, const floating* ggamma,
                            const floating* glam, double dl, double eta, double eta0,
                            double alpha, double beta, long long step, bint adagrad,
                            bint fit_intercept, bint fit_linear, bint fit_lam,
                            Scales* sc) noexcept nogil:
    """One step on one row (batch_size 1), straight from the row's gradient."""
    cdef Py_ssize_t z, j, b, s, r
    cdef double x, elapsed, new_w, new_p, step_p, step_w
    cdef floating* row
    if fit_intercept:
        if adagrad:
            _adagrad_step(&intercept[0], &acc_intercept[0], dl, eta0)
        else:
            intercept[0] = intercept[0] - eta * dl
    if adagrad:
        for z in range(nnz):
            j = indices[start + z]
            x = data[start + z]
            elapsed = step - last_touch[j]  # steps since the last touch
            last_touch[j] = step
            if fit_linear:
                _adagrad_step(&w[j], &acc_w[j], dl * x + alpha * elapsed * w[j], eta0)
            for b in range(n_blocks):
                row = P + (b * d + j) * k
                for s in range(k):
                    _adagrad_step(&row[s], &acc_P[b, j, s],
                                  dl * gP[(b * nnz + z) * k + s] + beta * elapsed * row[s],
                                  eta0)
        for r in range(n_dummy * k):
            _adagrad_step(&gamma[r], &acc_gamma[r // k, r % k],
                          dl * ggamma[r] + beta * gamma[r], eta0)
        if kernel == POLYNOMIAL and fit_lam:
            for s in range(k):
                _adagrad_step(&lam[s], &acc_lam[s], dl * glam[s] + beta * lam[s], eta0)
        return
    new_w = sc.w * (1 - eta * alpha)
    new_p = sc.p * (1 - eta * beta)
    # V -= eta * (gradient in P) / new_p, and gP = pscale * (gradient in P).
    step_p = eta * dl / (sc.p * new_p)
    step_w = eta * dl / new_w  # one division per step, not per nonzero
    for z in range(nnz):
        j = indices[start + z]
        if fit_linear:
            w[j] = w[j] - step_w * data[start + z]
        for b in range(n_blocks):
            row = P + (b * d + j) * k
            for s in range(k):
                row[s] = row[s] - step_p * gP[(b * nnz + z) * k + s]
    for r in range(n_dummy * k):
        gamma[r] = (1 - eta * beta) * gamma[r] - eta * dl * ggamma[r]
    if kernel == POLYNOMIAL and fit_lam:
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


def objective_gradient(const floating[::1] data, const index_t[::1] indices,
                       const index_t[::1] indptr, const double[::1] y,
                       const double[::1] sample_weight,
                       const floating[::1] intercept, const floating[::1] w,
                       const floating[:, :, ::1] P, const int[::1] degrees,
                       const floating[:, ::1] gamma, const floating[::1] lam,
                       int kernel, int loss, bint fit_linear,
                       double[::1] g_intercept, double[::1] g_w, double[:, :, ::1] g_P,
                       double[:, ::1] g_gamma, double[::1] g_lam):
    """sum_i s_i loss(y_i, y_hat_i) and its gradient (added into the zeroed g_* arrays).

    One pass over the rows; ``sample_weight`` should sum to 1.  The penalty is the caller's.
    """
    cdef Py_ssize_t n = indptr.shape[0] - 1, n_blocks = P.shape[0], d = P.shape[1]
    cdef Py_ssize_t k = P.shape[2], n_dummy = gamma.shape[0]
    cdef Py_ssize_t i, z, b, s, r, j, start, end, nnz, max_nnz = 0
    cdef int max_degree = 1
    cdef double pred, dl, total = 0
    for b in range(degrees.shape[0]):
        max_degree = max(max_degree, degrees[b])
    for i in range(n):
        max_nnz = max(max_nnz, indptr[i + 1] - indptr[i])
    cdef Py_ssize_t block = (max_degree + 1) * max(k, 1)
    cdef floating* table = <floating*> malloc((n_dummy + max_nnz + 1) * block * sizeof(floating))
    cdef floating* adj = <floating*> malloc(block * sizeof(floating))
    cdef floating* gP = <floating*> malloc((n_blocks * max_nnz * k + 1) * sizeof(floating))
    cdef floating* ggamma = <floating*> malloc((n_dummy * k + 1) * sizeof(floating))
    cdef floating* glam = <floating*> malloc((k + 1) * sizeof(floating))
    if table == NULL or adj == NULL or gP == NULL or ggamma == NULL or glam == NULL:
        free(table)
        free(adj)
        free(gP)
        free(ggamma)
        free(glam)
        raise MemoryError("not enough memory for the gradient workspace")
    cdef const floating* P0 = &P[0, 0, 0] if P.size > 0 else <floating*> gP
    cdef const floating* gam = &gamma[0, 0] if gamma.size > 0 else NULL
    cdef const floating* lamp = &lam[0] if lam.shape[0] > 0 else NULL
    cdef const index_t* ind0 = &indices[0] if indices.shape[0] > 0 else NULL
    cdef const floating* val0 = &data[0] if data.shape[0] > 0 else NULL
    try:
        with nogil:
            for i in range(n):
                start = indptr[i]
                end = indptr[i + 1]
                nnz = end - start
                pred = intercept[0] + (_linear(&w[0], ind0 + start, val0 + start, nnz)
                                       if fit_linear else 0)
                if k > 0 and n_blocks > 0:
                    pred += _row_gradient(kernel, P0, d, k, n_blocks, &degrees[0], gam,
                                          n_dummy, lamp, ind0 + start, val0 + start, nnz,
                                          table, adj, gP, ggamma, glam)
                total += sample_weight[i] * loss_value(loss, y[i], pred)
                dl = sample_weight[i] * loss_derivative(loss, y[i], pred)
                g_intercept[0] += dl
                for z in range(nnz):
                    j = indices[start + z]
                    if fit_linear:
                        g_w[j] += dl * data[start + z]
                    for b in range(n_blocks):
                        for s in range(k):
                            g_P[b, j, s] += dl * gP[(b * nnz + z) * k + s]
                for r in range(n_dummy * k):
                    g_gamma[r // k, r % k] += dl * ggamma[r]
                if kernel == POLYNOMIAL:
                    for s in range(k):
                        g_lam[s] += dl * glam[s]
    finally:
        free(table)
        free(adj)
        free(gP)
        free(ggamma)
        free(glam)
    return total
