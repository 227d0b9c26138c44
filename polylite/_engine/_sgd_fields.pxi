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


cdef inline floating _dot4(const floating* a, const floating* b) noexcept nogil:
    """:func:`_dot` of four entries, written out (the same sums in the same order)."""
    cdef floating acc = 0
    acc = acc + a[0] * b[0]
    acc = acc + a[1] * b[1]
    acc = acc + a[2] * b[2]
    acc = acc + a[3] * b[3]
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


cdef extern from "_field_pairs.h":
    ctypedef struct polylite_pair_row:
        float* P
        float* G
        Py_ssize_t kf
        double dl
        float beta
        float eta0
        const Py_ssize_t* offset
        const int* field
        const float* x
        Py_ssize_t nnz
    bint polylite_has_avx() noexcept nogil
    void polylite_field_pairs_avx(const polylite_pair_row* r) noexcept nogil
    double polylite_field_pairs_predict_avx(const polylite_pair_row* r) noexcept nogil


cdef inline bint _vector_pairs(const Pass* ps, size_t fsize) noexcept nogil:
    """Whether the pair loops of a pass take :c:func:`polylite_field_pairs_predict_avx`
    and :c:func:`polylite_field_pairs_avx` (the same sums and steps but for the last
    bits: see _field_pairs.h): AdaGrad on float32 factors, vectors of a multiple of four
    floats, a CPU with AVX (and ``vector_pairs`` not switched off, for the tests)."""
    return (fsize == sizeof(float) and ps.rule.schedule == ADAGRAD and _vector_pairs_on
            and (ps.model.k // ps.model.n_fields) % 4 == 0 and polylite_has_avx())


# Whether the field-aware pass may use the AVX pair loops (set_vector_pairs: the tests
# compare both ways).
cdef bint _vector_pairs_on = True


def set_vector_pairs(bint on):
    """Let the field-aware pass use its AVX pair loops where the CPU has AVX (on, the
    default) or not; returns the previous setting.  The results agree either way but
    for rounding (the steps' 1 / sqrt(G) to about 2^-22): the tests check it."""
    global _vector_pairs_on
    previous = _vector_pairs_on
    _vector_pairs_on = on
    return previous


cdef inline void _linear_adagrad(floating* w, floating* acc_w, const index_t* ind,
                                 const floating* data, Py_ssize_t nnz, double dl,
                                 floating alpha, double eta0, RowSums* st) noexcept nogil:
    """AdaGrad's steps on the linear weights of a row's ``nnz`` nonzeros (gradient
    dl x_j + alpha w_j, libffm's row penalty), gathered into the thread's buffer
    ``st.linear`` so that the compiler vectorises the square roots and divisions (the
    same steps as one weight at a time: a row never repeats a column)."""
    cdef floating* gw = <floating*> st.linear
    cdef floating* gacc = gw + nnz
    cdef Py_ssize_t a
    for a in range(nnz):
        gw[a] = w[ind[a]]
        gacc[a] = acc_w[ind[a]]
    for a in range(nnz):
        adagrad_step(&gw[a], &gacc[a], <floating> (dl * data[a]) + alpha * gw[a], eta0)
    for a in range(nnz):
        w[ind[a]] = gw[a]
        acc_w[ind[a]] = gacc[a]


cdef void _pair_row_steps(const floating* data, const index_t* ind, Py_ssize_t nnz,
                          const Pass* ps, RowSums* st, double dl,
                          double eta) noexcept nogil:
    """The steps of a row with one nonzero per field (``nnz`` values and indices) on
    its linear weights and, pair by pair, on its vectors (:func:`_pair_steps`; with
    ``st.vector_pairs``, the same steps by :c:func:`polylite_field_pairs_avx`, on the
    offsets that :func:`_vector_pair_term` left in ``st``)."""
    cdef const int* fields = ps.model.fields
    cdef Py_ssize_t width = ps.model.k, kf = width // ps.model.n_fields, a, b, ja, fa, fb
    cdef floating* intercept = <floating*> ps.model.intercept
    cdef floating* w = <floating*> ps.model.w
    cdef floating* P = <floating*> ps.model.P
    cdef floating* acc_w = <floating*> ps.history.w
    cdef floating* acc_P = <floating*> ps.history.P
    cdef double eta0 = ps.rule.eta0
    cdef floating alpha = <floating> ps.rule.alpha, beta = <floating> ps.rule.beta
    cdef floating feta = <floating> eta, xa, c
    cdef bint adagrad = ps.rule.schedule == ADAGRAD
    cdef polylite_pair_row row
    if ps.rule.fit_intercept:
        if adagrad:
            adagrad_step(intercept, <floating*> ps.history.intercept, dl, eta0)
        else:
            intercept[0] = intercept[0] - eta * dl
    if adagrad and ps.rule.fit_linear:
        # The linear steps first: they touch no vector, so the order is the same.
        _linear_adagrad(w, acc_w, ind, data, nnz, dl, alpha, eta0, st)
    if floating is float:
        if st.vector_pairs:  # (st.offsets and st.row_fields filled by _vector_row)
            row.P = P
            row.G = acc_P
            row.kf = kf
            row.dl = dl
            row.beta = beta
            row.eta0 = <float> eta0
            row.offset = st.offsets
            row.field = st.row_fields
            row.x = data
            row.nnz = nnz
            polylite_field_pairs_avx(&row)
            return
    for a in range(nnz):
        ja = ind[a]
        fa = fields[ja]
        xa = data[a]
        if ps.rule.fit_linear and not adagrad:
            w[ja] = w[ja] - feta * (<floating> (dl * xa) + alpha * w[ja])
        for b in range(a + 1, nnz):
            fb = fields[ind[b]]
            c = <floating> (dl * xa * data[b])
            if adagrad:
                _pair_steps(P + ja * width + fb * kf, P + ind[b] * width + fa * kf,
                            acc_P + ja * width + fb * kf, acc_P + ind[b] * width + fa * kf,
                            c, beta, feta, eta0, kf)
            else:
                _pair_steps(P + ja * width + fb * kf, P + ind[b] * width + fa * kf,
                            <floating*> NULL, <floating*> NULL, c, beta, feta, eta0, kf)


cdef double _pair_term(const floating* data, const index_t* ind, Py_ssize_t nnz,
                       const Model* m) noexcept nogil:
    """The pair term of a row with one nonzero per field: the sum over its pairs (a, b),
    a < b, of x_a x_b <P[j_a, f_b], P[j_b, f_a]> (the portable loop)."""
    cdef const floating* P = <const floating*> m.P
    cdef const int* fields = m.fields
    cdef Py_ssize_t width = m.k, kf = width // m.n_fields, a, b, ja, fa
    cdef double total = 0
    cdef floating xa
    for a in range(nnz):
        ja = ind[a]
        fa = fields[ja]
        xa = data[a]
        if kf == 4:  # libffm's default k: the dot product written out
            for b in range(a + 1, nnz):
                total += xa * data[b] * _dot4(P + ja * width + fields[ind[b]] * 4,
                                              P + ind[b] * width + fa * 4)
            continue
        for b in range(a + 1, nnz):
            total += xa * data[b] * _dot(P + ja * width + fields[ind[b]] * kf,
                                         P + ind[b] * width + fa * kf, kf)
    return total


cdef double _vector_pair_term(const floating* data, const index_t* ind, Py_ssize_t nnz,
                              const Pass* ps, RowSums* st) noexcept nogil:
    """The pair term of a row with one nonzero per field, by
    :c:func:`polylite_field_pairs_predict_avx` (float32 factors, ``st.vector_pairs``);
    fills the row's factor offsets and field offsets in ``st`` for its steps
    (:func:`_pair_row_steps`)."""
    cdef Py_ssize_t width = ps.model.k, kf = width // ps.model.n_fields, a
    cdef polylite_pair_row row
    for a in range(nnz):
        st.offsets[a] = ind[a] * width
        st.row_fields[a] = <int> (ps.model.fields[ind[a]] * kf)
    if floating is float:
        row.P = <float*> ps.model.P
        row.kf = kf
        row.offset = st.offsets
        row.field = st.row_fields
        row.x = data
        row.nnz = nnz
        return polylite_field_pairs_predict_avx(&row)
    return 0.0


cdef bint _field_aware_pass(const floating* data, const index_t* ind, const index_t* indptr,
                            const Pass* ps, long long* step, RowSums* st) noexcept nogil:
    """A batch-size-1 pass of a field-aware model with libffm's penalty (Rule.row_penalty).

    The same steps as the general loop (``_prediction_and_gradient`` then
    ``_apply_row_penalised``), pair by pair: in a row with one nonzero per field, the
    vector P[j_a, f_b] is read by the pair (a, b) alone, so its gradient is that pair's,
    and each pair steps on its two vectors at once, with neither the gradient buffer
    nor the walk over every field of every nonzero (:func:`_pair_row_steps`).  A row
    with two nonzeros in a field takes the general steps.  Each row counts
    ``rows.step_stride`` steps of the schedule (threads sharing a pass: see
    :func:`_field_aware_share`).  Returns False on a non-finite prediction.
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
    cdef floating* acc_P = <floating*> local.history.P
    cdef int loss = local.rule.loss, schedule = local.rule.schedule
    cdef double eta0 = local.rule.eta0, power_t = local.rule.power_t
    cdef bint fit_linear = local.rule.fit_linear
    cdef int* count = st.field_count
    cdef Py_ssize_t pos, i, a, start, nnz, fa
    cdef bint single
    cdef double pred, dl, eta
    cdef Scales unscaled
    unscaled.w = 1
    unscaled.p = 1
    st.vector_pairs = _vector_pairs(&local, sizeof(floating))
    for pos in range(n_rows):
        _prefetch_ahead(pos, n_rows, data, ind, indptr, &local, False)
        if pos + 1 < n_rows:
            # The next row reads its features' whole factor rows (n_fields vectors each)
            # and AdaGrad's sums of them: fetch every cache line of them now, into the
            # second-level cache (tens of kilobytes: the first would lose this row's).
            i = order[pos + 1]
            for a in range(indptr[i], indptr[i + 1]):
                polylite_prefetch_block_l2(P + ind[a] * width, width * sizeof(floating))
                if acc_P != NULL:
                    polylite_prefetch_block_l2(acc_P + ind[a] * width,
                                               width * sizeof(floating))
        step[0] += local.rows.step_stride
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
        if st.vector_pairs:
            pred += _vector_pair_term(data + start, ind + start, nnz, &local, st)
        else:
            pred += _pair_term(data + start, ind + start, nnz, &local.model)
        if not isfinite(pred):
            return False
        _pair_row_steps(data + start, ind + start, nnz, &local, st,
                        sw[i] * loss_derivative(loss, y[i], pred), eta)
    return True


cdef void _field_aware_share(int t, int threads, const floating* data,
                             const index_t* ind, const index_t* indptr, const Pass* ps,
                             long long step, RowSums* states) noexcept nogil:
    """Thread t's part of a field-aware pass shared by ``threads`` threads without
    locks ("Hogwild!", Niu et al., NIPS 2011, as libffm's threads): it takes its
    contiguous share of the pass's rows (of the shuffled order) and steps on the shared
    parameters as :func:`_field_aware_pass` does, while the other threads step on theirs.
    Two threads may read and write the same parameter at once: a step may then be lost
    or read a half-updated vector, so the result changes from run to run (the rows of a
    click-through-rate data set share few parameters at a time, and the fits agree with
    one thread's to the noise of the row order).  The schedule counts the pass's steps
    (thread t's i-th row is step ``step + t + 1 + i * threads``); ``states[t].finite``
    is False after a non-finite prediction (that thread stops)."""
    cdef Pass local = ps[0]
    cdef Py_ssize_t lo, hi
    cdef long long my_step = step + t + 1 - threads
    if not thread_range(t, threads, ps.rows.n_rows, &lo, &hi):
        return
    local.rows.order = ps.rows.order + lo
    local.rows.n_rows = hi - lo
    local.rows.step_stride = threads
    states[t].finite = _field_aware_pass(data, ind, indptr, &local, &my_step, states + t)


cdef bint _field_aware_threads(const floating* data, const index_t* ind,
                               const index_t* indptr, const Pass* ps, long long* step,
                               RowSums* st, int threads) noexcept nogil:
    """A field-aware pass (:func:`_field_aware_pass`) on ``threads`` threads sharing its
    rows (:func:`_field_aware_share`; ``st`` a workspace per thread), the step count
    advanced by the pass's rows.  Returns False on a non-finite prediction."""
    cdef bint finite = True
    cdef int t
    if threads == 1:
        return _field_aware_pass(data, ind, indptr, ps, step, st)
    with parallel(num_threads=threads):
        _field_aware_share(threadid(), polylite_team_size(), data, ind, indptr, ps,
                           step[0], st)
    for t in range(threads):
        finite = finite and st[t].finite
    step[0] += ps.rows.n_rows
    return finite
