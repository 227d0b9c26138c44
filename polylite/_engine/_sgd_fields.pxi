# The field-aware models' steps with libffm's penalty (Rule.row_penalty), included by
# _sgd.pyx: the row's penalty in the mini-batch sums, the general step on one row, and
# the pass pair by pair over rows of one nonzero per field.


cdef inline void _count_fields(const Model* m, const index_t* ind, Py_ssize_t nnz,
                              int* count, int sign) noexcept nogil:
    """Add ``sign`` to the count of each nonzero's field (field-aware models; +1 before
    a row's penalty, -1 after, so that the counts are zero between rows)."""
    cdef Py_ssize_t z
    if m.kernel == FIELD_AWARE:
        for z in range(nnz):
            count[m.fields[ind[z]]] += sign


cdef inline bint _reads_vector(const Model* m, const int* count, Py_ssize_t j,
                               Py_ssize_t f) noexcept nogil:
    """Whether a row (its fields counted in ``count``) with feature j reads j's vector of
    field f: some other nonzero of the row is in field f."""
    return count[f] > (1 if m.fields[j] == f else 0)


cdef void _add_row_penalty(RowSums* st, const index_t* ind, Py_ssize_t nnz,
                           const Model* m, const Rule* rule,
                           const floating* P) noexcept nogil:
    """The gradient of the row's penalty (Rule.row_penalty) into the thread's sums:
    alpha w_j and beta P[b, j] (field-aware: the vectors the row reads) for each of its
    features j (the stored parameters ``P`` = m.P: with a row penalty SGD keeps no
    scales)."""
    cdef const floating* w = <const floating*> m.w
    cdef Py_ssize_t d = m.d, k = m.k, z, j, b, s, f
    cdef Py_ssize_t kf = k // m.n_fields if m.kernel == FIELD_AWARE else k
    cdef double alpha = rule.alpha, beta = rule.beta
    cdef const floating* row
    cdef double* acc
    _count_fields(m, ind, nnz, st.field_count, 1)
    for z in range(nnz):
        j = ind[z]
        if rule.fit_linear:
            st.w[j] += alpha * w[j]
        for b in range(m.n_blocks):
            row = P + (b * d + j) * k
            acc = st.P + (b * d + j) * k
            if m.kernel != FIELD_AWARE:
                for s in range(k):
                    acc[s] += beta * row[s]
                continue
            for f in range(m.n_fields):
                if _reads_vector(m, st.field_count, j, f):
                    for s in range(f * kf, (f + 1) * kf):
                        acc[s] += beta * row[s]
    _count_fields(m, ind, nnz, st.field_count, -1)


cdef inline void _penalised_steps(floating_row p, floating_row acc, const floating* g,
                                  Py_ssize_t n, double dl, double beta, double eta,
                                  double eta0) noexcept nogil:
    """Steps on n coordinates with gradient dl g + beta p: AdaGrad's (``acc`` its sums)
    or, with ``acc`` NULL, SGD's at rate eta."""
    cdef Py_ssize_t s
    if acc != NULL:
        for s in range(n):
            adagrad_step(&p[s], &acc[s], <floating> (dl * g[s] + beta * p[s]), eta0)
    else:
        for s in range(n):
            p[s] = p[s] - <floating> (eta * (dl * g[s] + beta * p[s]))


cdef void _apply_row_penalised(const floating* data, const index_t* ind, Py_ssize_t nnz,
                               const Pass* ps, RowSums* st, double dl,
                               double eta) noexcept nogil:
    """:func:`_apply_row` for a row penalty (Rule.row_penalty): one step on each parameter
    the row reads, with the gradient of its loss and of its penalty (SGD's scales stay
    1); field-aware: only the vectors of the fields of the row's other nonzeros, as
    libffm."""
    cdef floating* intercept = <floating*> ps.model.intercept
    cdef floating* w = <floating*> ps.model.w
    cdef floating* P = <floating*> ps.model.P
    cdef floating* acc_w = <floating*> ps.history.w
    cdef floating* acc_P = <floating*> ps.history.P
    cdef const floating* gP = <const floating*> st.gP
    cdef const Model* m = &ps.model
    cdef Py_ssize_t d = m.d, k = m.k, z, j, b, f, r
    cdef Py_ssize_t kf = k // m.n_fields if m.kernel == FIELD_AWARE else k
    cdef double eta0 = ps.rule.eta0, alpha = ps.rule.alpha, beta = ps.rule.beta
    cdef bint adagrad = ps.rule.schedule == ADAGRAD
    cdef floating x
    if ps.rule.fit_intercept:
        if adagrad:
            adagrad_step(intercept, <floating*> ps.history.intercept, dl, eta0)
        else:
            intercept[0] = intercept[0] - eta * dl
    _count_fields(m, ind, nnz, st.field_count, 1)
    for z in range(nnz):
        j = ind[z]
        x = data[z]
        if ps.rule.fit_linear:
            _penalised_steps(&w[j], &acc_w[j] if adagrad else NULL, &x, 1, dl, alpha, eta,
                             eta0)
        for b in range(m.n_blocks):
            r = (b * d + j) * k
            if m.kernel != FIELD_AWARE:
                _penalised_steps(P + r, acc_P + r if adagrad else NULL,
                                 gP + (b * nnz + z) * k, k, dl, beta, eta, eta0)
                continue
            for f in range(m.n_fields):
                if _reads_vector(m, st.field_count, j, f):
                    _penalised_steps(P + r + f * kf, acc_P + r + f * kf if adagrad else NULL,
                                     gP + (b * nnz + z) * k + f * kf, kf, dl, beta, eta,
                                     eta0)
    _count_fields(m, ind, nnz, st.field_count, -1)


cdef inline floating _dot(const floating* a, const floating* b,
                         Py_ssize_t k) noexcept nogil:
    cdef floating acc = 0
    cdef Py_ssize_t s
    for s in range(k):
        acc = acc + a[s] * b[s]
    return acc


cdef inline void _pair_steps(floating_row pa, floating_row pb, floating_row ga,
                             floating_row gb, floating c, floating beta, floating eta,
                             double eta0, Py_ssize_t k) noexcept nogil:
    """One pair's step on its two vectors (each read by this pair alone): the gradient of
    c <pa, pb> + beta/2 (|pa|^2 + |pb|^2), AdaGrad's (``ga``, ``gb`` their sums) or,
    with ``ga`` NULL, SGD's at rate eta."""
    cdef Py_ssize_t s
    cdef floating a, b
    if ga != NULL:
        for s in range(k):
            a = pa[s]
            b = pb[s]
            adagrad_step(&pa[s], &ga[s], c * b + beta * a, eta0)
            adagrad_step(&pb[s], &gb[s], c * a + beta * b, eta0)
    else:
        for s in range(k):
            a = pa[s]
            b = pb[s]
            pa[s] = a - eta * (c * b + beta * a)
            pb[s] = b - eta * (c * a + beta * b)


cdef bint _field_aware_pass(const floating* data, const index_t* ind, const index_t* indptr,
                            const Pass* ps, long long* step, RowSums* st) noexcept nogil:
    """A batch-size-1 pass of a field-aware model with libffm's penalty (Rule.row_penalty).

    The same steps as the general loop (``_prediction_and_gradient`` then
    ``_apply_row_penalised``), pair by pair: in a row with one nonzero per field, the
    vector P[j_a, f_b] is read by the pair (a, b) alone, so its gradient is that pair's,
    and each pair steps on its two vectors at once, with neither the gradient buffer
    nor the walk over every field of every nonzero.  A row with two nonzeros in a field
    takes the general steps.  Returns False on a non-finite prediction.
    """
    cdef Pass local = ps[0]
    cdef const double* y = local.rows.y
    cdef const double* sw = local.rows.sample_weight
    cdef const Py_ssize_t* order = local.rows.order
    cdef const int* fields = local.model.fields
    cdef Py_ssize_t n_rows = local.rows.n_rows, width = local.model.k
    cdef Py_ssize_t n_fields = local.model.n_fields, kf = width // n_fields
    cdef floating* intercept = <floating*> local.model.intercept
    cdef floating* w = <floating*> local.model.w
    cdef floating* P = <floating*> local.model.P
    cdef floating* acc_w = <floating*> local.history.w
    cdef floating* acc_P = <floating*> local.history.P
    cdef int loss = local.rule.loss, schedule = local.rule.schedule
    cdef double eta0 = local.rule.eta0, power_t = local.rule.power_t
    cdef floating alpha = <floating> local.rule.alpha, beta = <floating> local.rule.beta
    cdef bint adagrad = schedule == ADAGRAD, fit_linear = local.rule.fit_linear
    cdef bint fit_intercept = local.rule.fit_intercept
    cdef int* count = st.field_count
    cdef Py_ssize_t pos, i, a, b, start, nnz, ja, jb, fa, fb
    cdef bint single
    cdef double pred, dl, eta
    cdef floating xa, c, feta
    cdef Scales unscaled
    unscaled.w = 1
    unscaled.p = 1
    for pos in range(n_rows):
        _prefetch_ahead(pos, n_rows, data, ind, indptr, &local)
        if pos + 1 < n_rows:
            # The next row reads its features' whole factor rows (n_fields vectors each)
            # and AdaGrad's sums of them: fetch every cache line of them now.
            i = order[pos + 1]
            for a in range(indptr[i], indptr[i + 1]):
                polylite_prefetch_block(P + ind[a] * width, width * sizeof(floating))
                if acc_P != NULL:
                    polylite_prefetch_block(acc_P + ind[a] * width,
                                            width * sizeof(floating))
        step[0] += 1
        eta = eta0 / _pow_t(step[0], power_t) if schedule == INVSCALING else eta0
        i = order[pos]
        start = indptr[i]
        nnz = indptr[i + 1] - start
        single = True
        for a in range(start, start + nnz):
            fa = fields[ind[a]]
            single = single and count[fa] == 0
            count[fa] += 1
        for a in range(start, start + nnz):
            count[fields[ind[a]]] = 0
        if not single:  # two nonzeros in a field: the general steps
            pred = _prediction_and_gradient(data + start, ind + start, nnz, intercept[0],
                                            &local.model, fit_linear, &unscaled, st)
            if not isfinite(pred):
                return False
            dl = sw[i] * loss_derivative(loss, y[i], pred)
            _apply_row_penalised(data + start, ind + start, nnz, &local, st, dl, eta)
            continue
        pred = intercept[0]
        if fit_linear:
            pred += _linear(w, ind + start, data + start, nnz)
        for a in range(start, start + nnz):
            ja = ind[a]
            fa = fields[ja]
            xa = data[a]
            for b in range(a + 1, start + nnz):
                jb = ind[b]
                pred += xa * data[b] * _dot(P + ja * width + fields[jb] * kf,
                                            P + jb * width + fa * kf, kf)
        if not isfinite(pred):
            return False
        dl = sw[i] * loss_derivative(loss, y[i], pred)
        feta = <floating> eta
        if fit_intercept:
            if adagrad:
                adagrad_step(intercept, <floating*> local.history.intercept, dl, eta0)
            else:
                intercept[0] = intercept[0] - eta * dl
        for a in range(start, start + nnz):
            ja = ind[a]
            fa = fields[ja]
            xa = data[a]
            if fit_linear:
                if adagrad:
                    adagrad_step(&w[ja], &acc_w[ja], <floating> (dl * xa) + alpha * w[ja],
                                  eta0)
                else:
                    w[ja] = w[ja] - feta * (<floating> (dl * xa) + alpha * w[ja])
            for b in range(a + 1, start + nnz):
                jb = ind[b]
                fb = fields[jb]
                c = <floating> (dl * xa * data[b])
                if adagrad:
                    _pair_steps(P + ja * width + fb * kf, P + jb * width + fa * kf,
                                acc_P + ja * width + fb * kf, acc_P + jb * width + fa * kf,
                                c, beta, feta, eta0, kf)
                else:
                    _pair_steps(P + ja * width + fb * kf, P + jb * width + fa * kf,
                                <floating*> NULL, <floating*> NULL, c, beta, feta, eta0, kf)
    return True
