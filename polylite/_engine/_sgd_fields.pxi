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
        float** vec
        float** sum
        Py_ssize_t kf
        double dl
        float beta
        float eta0
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


cdef inline void _linear_adagrad(const floating* data, Py_ssize_t nnz, double dl,
                                 floating alpha, double eta0, RowSums* st) noexcept nogil:
    """AdaGrad's steps on the linear weights of a row's ``nnz`` nonzeros (gradient
    dl x_j + alpha w_j, libffm's row penalty; the weights and sums where _locate_row
    found them), gathered into the thread's buffer ``st.linear`` so that the compiler
    vectorises the square roots and divisions (the same steps as one weight at a time:
    a row never repeats a column)."""
    cdef floating* gw = <floating*> st.linear
    cdef floating* gacc = gw + nnz
    cdef Py_ssize_t a
    for a in range(nnz):
        gw[a] = (<floating*> st.weights[a])[0]
        gacc[a] = (<floating*> st.weight_sums[a])[0]
    for a in range(nnz):
        adagrad_step(&gw[a], &gacc[a], <floating> (dl * data[a]) + alpha * gw[a], eta0)
    for a in range(nnz):
        (<floating*> st.weights[a])[0] = gw[a]
        (<floating*> st.weight_sums[a])[0] = gacc[a]


cdef struct HotLayout:
    # Where a copy of the hot features' parameters (HotRows) holds each kind, in
    # entries from its start: the factor rows at 0, then AdaGrad's sums of them, the
    # linear weights, their sums, the intercept and its sum.
    Py_ssize_t sums
    Py_ssize_t weights
    Py_ssize_t weight_sums
    Py_ssize_t intercept
    Py_ssize_t size


cdef inline HotLayout _hot_layout(const HotRows* hot, Py_ssize_t width) noexcept nogil:
    cdef HotLayout at
    at.sums = hot.n_hot * width
    at.weights = 2 * hot.n_hot * width
    at.weight_sums = at.weights + hot.n_hot
    at.intercept = at.weight_sums + hot.n_hot
    at.size = at.intercept + 2
    return at


cdef inline void _locate_row(const index_t* ind, Py_ssize_t nnz, floating* P,
                             const Pass* ps, RowSums* st) noexcept nogil:
    """Where the parameters of each nonzero of a row with one nonzero per field are
    (``P`` the factors): its factor row, AdaGrad's sums of it, its linear weight and
    that weight's sum in the shared parameters or, for a hot feature of a shared pass,
    in this thread's copy (HotRows); and the offset of its field's vectors in the
    other features' rows (field * kf)."""
    cdef Py_ssize_t width = ps.model.k, kf = width // ps.model.n_fields, a, j, h = -1
    cdef HotLayout at
    cdef floating* G = <floating*> ps.history.P
    cdef floating* w = <floating*> ps.model.w
    cdef floating* acc_w = <floating*> ps.history.w
    cdef floating* own = <floating*> st.own
    if st.hot != NULL:
        at = _hot_layout(st.hot, width)
    for a in range(nnz):
        j = ind[a]
        st.row_fields[a] = <int> (ps.model.fields[j] * kf)
        if st.hot != NULL:
            h = st.hot.slot[j]
        if h >= 0:
            st.vectors[a] = own + h * width
            st.vector_sums[a] = own + at.sums + h * width
            st.weights[a] = own + at.weights + h
            st.weight_sums[a] = own + at.weight_sums + h
            continue
        st.vectors[a] = P + j * width
        st.vector_sums[a] = G + j * width if G != NULL else NULL
        st.weights[a] = w + j
        st.weight_sums[a] = acc_w + j if acc_w != NULL else NULL


cdef void _pair_row_steps(const floating* data, Py_ssize_t nnz, const Pass* ps,
                          RowSums* st, double dl, double eta) noexcept nogil:
    """The steps of a row with one nonzero per field (``nnz`` values, their parameters
    located by :func:`_locate_row`) on its linear weights and, pair by pair, on its
    vectors (:func:`_pair_steps`; with ``st.vector_pairs``, the same steps by
    :c:func:`polylite_field_pairs_avx`)."""
    cdef Py_ssize_t kf = ps.model.k // ps.model.n_fields, a, b, fa
    cdef floating* intercept = <floating*> ps.model.intercept
    cdef floating* pa
    cdef floating* ga
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
        _linear_adagrad(data, nnz, dl, alpha, eta0, st)
    if floating is float:
        if st.vector_pairs:
            row.vec = <float**> st.vectors
            row.sum = <float**> st.vector_sums
            row.kf = kf
            row.dl = dl
            row.beta = beta
            row.eta0 = <float> eta0
            row.field = st.row_fields
            row.x = data
            row.nnz = nnz
            polylite_field_pairs_avx(&row)
            return
    for a in range(nnz):
        pa = <floating*> st.vectors[a]
        ga = <floating*> st.vector_sums[a]
        fa = st.row_fields[a]
        xa = data[a]
        if ps.rule.fit_linear and not adagrad:
            c = (<floating*> st.weights[a])[0]
            (<floating*> st.weights[a])[0] = c - feta * (<floating> (dl * xa) + alpha * c)
        for b in range(a + 1, nnz):
            c = <floating> (dl * xa * data[b])
            if adagrad:
                _pair_steps(pa + st.row_fields[b], <floating*> st.vectors[b] + fa,
                            ga + st.row_fields[b], <floating*> st.vector_sums[b] + fa,
                            c, beta, feta, eta0, kf)
            else:
                _pair_steps(pa + st.row_fields[b], <floating*> st.vectors[b] + fa,
                            <floating*> NULL, <floating*> NULL, c, beta, feta, eta0, kf)


cdef double _pair_term(const floating* data, Py_ssize_t nnz, Py_ssize_t kf,
                       const RowSums* st) noexcept nogil:
    """The pair term of a row with one nonzero per field (its parameters located by
    :func:`_locate_row`): the sum over its pairs (a, b), a < b, of
    x_a x_b <P[j_a, f_b], P[j_b, f_a]> (the portable loop)."""
    cdef Py_ssize_t a, b, fa
    cdef double total = 0
    cdef const floating* pa
    cdef floating xa
    for a in range(nnz):
        pa = <const floating*> st.vectors[a]
        fa = st.row_fields[a]
        xa = data[a]
        if kf == 4:  # libffm's default k: the dot product written out
            for b in range(a + 1, nnz):
                total += xa * data[b] * _dot4(pa + st.row_fields[b],
                                              <const floating*> st.vectors[b] + fa)
            continue
        for b in range(a + 1, nnz):
            total += xa * data[b] * _dot(pa + st.row_fields[b],
                                         <const floating*> st.vectors[b] + fa, kf)
    return total


cdef double _vector_pair_term(const floating* data, Py_ssize_t nnz, Py_ssize_t kf,
                              RowSums* st) noexcept nogil:
    """The pair term of a row with one nonzero per field (its parameters located by
    :func:`_locate_row`), by :c:func:`polylite_field_pairs_predict_avx` (float32
    factors, ``st.vector_pairs``)."""
    cdef polylite_pair_row row
    if floating is float:
        row.vec = <float**> st.vectors
        row.kf = kf
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
                if st.hot != NULL and st.hot.slot[ind[a]] >= 0:
                    continue  # this thread's copy
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
        _locate_row(ind + start, nnz, P, &local, st)
        pred = intercept[0]
        if fit_linear:
            for a in range(nnz):
                pred += (<floating*> st.weights[a])[0] * data[start + a]
        if st.vector_pairs:
            pred += _vector_pair_term(data + start, nnz, kf, st)
        else:
            pred += _pair_term(data + start, nnz, kf, st)
        if not isfinite(pred):
            return False
        _pair_row_steps(data + start, nnz, &local, st,
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
    one thread's to the noise of the row order).

    The parameters that most rows read are the exception (HotRows, ``states[t].hot``):
    shared, they would move between the cores' caches at nearly every row.  Each thread
    steps its own copy of them for a round of ``hot.round_rows`` of its rows; at the round's
    end the threads meet and merge the copies (:func:`_merge_hot`), then copy the merged
    values back.  The schedule counts the pass's steps (thread t's i-th row is step
    ``step + t + 1 + i * threads``); ``states[t].finite`` is False after a non-finite
    prediction (then every thread stops at the round's end)."""
    cdef Pass local = ps[0]
    cdef RowSums* st = states + t
    cdef Py_ssize_t lo, hi, first, last, r, rounds = 1, u, size = 1
    cdef long long my_step = step + t + 1 - threads
    cdef bint finite = True
    thread_range(t, threads, ps.rows.n_rows, &lo, &hi)
    local.rows.step_stride = threads
    if st.hot != NULL:
        _own_copy(st, ps, data)
        local.model.intercept = <floating*> st.own + _hot_layout(st.hot, ps.model.k).intercept
        local.history.intercept = <floating*> local.model.intercept + 1
        size = st.hot.round_rows
        rounds = (ps.rows.n_rows // threads + size) // size
    for r in range(rounds):
        first = lo + r * size if st.hot != NULL else lo
        last = min(first + size, hi) if st.hot != NULL else hi
        if last > first and st.finite:
            local.rows.order = ps.rows.order + first
            local.rows.n_rows = last - first
            st.finite = _field_aware_pass(data, ind, indptr, &local, &my_step, st)
        if st.hot == NULL:
            return
        polylite_barrier()
        _merge_hot(t, threads, states, ps, data)
        for u in range(threads):  # (no thread writes its flag before the next barrier)
            finite = finite and states[u].finite
        polylite_barrier()
        if not finite:
            return
        _own_copy(st, ps, data)


cdef void _own_copy(RowSums* st, const Pass* ps, const floating* like) noexcept nogil:
    """The thread's copy of the hot features' parameters set to the shared values at
    the round's start (HotRows)."""
    memcpy(st.own, st.hot.start, _hot_layout(st.hot, ps.model.k).size * sizeof(floating))


cdef void _merge_values(floating* shared, floating* start, const RowSums* states,
                        Py_ssize_t at, Py_ssize_t n, int threads, bint mean) noexcept nogil:
    """Entries at..at+n of the threads' copies merged into the ``n`` shared values: the
    threads' changes over the round added (``mean``: their mean), and the result kept
    as the next round's start."""
    cdef Py_ssize_t c
    cdef int u
    cdef double change
    for c in range(n):
        change = 0
        for u in range(threads):
            change += (<const floating*> states[u].own)[at + c] - start[at + c]
        shared[c] = shared[c] + <floating> (change / threads if mean else change)
        start[at + c] = shared[c]


cdef void _merge_hot(int t, int threads, const RowSums* states, const Pass* ps,
                     const floating* like) noexcept nogil:
    """Thread t's share of the merge of the threads' copies of the hot features'
    parameters (HotRows) into the shared ones: a factor row or linear weight moves by
    the sum of the threads' changes over the round (as their steps would have added up
    on the shared parameter; the mean would slow the hot features' learning by the
    number of threads), the intercept, which every row steps, by their mean, and
    AdaGrad's sums by their total (every row's squared gradients, as one thread would
    have them).  Steps that the general steps (a row with two nonzeros in a field) took
    on the shared parameters during the round are kept."""
    cdef const HotRows* hot = states[0].hot
    cdef Py_ssize_t width = ps.model.k, n = hot.n_hot, lo, hi, h, j
    cdef floating* start = <floating*> hot.start
    cdef floating* P = <floating*> ps.model.P
    cdef floating* G = <floating*> ps.history.P
    cdef floating* w = <floating*> ps.model.w
    cdef floating* acc_w = <floating*> ps.history.w
    cdef HotLayout at = _hot_layout(hot, width)
    thread_range(t, threads, n, &lo, &hi)
    for h in range(lo, hi):
        j = hot.feature[h]
        _merge_values(P + j * width, start, states, h * width, width, threads, False)
        _merge_values(&w[j], start, states, at.weights + h, 1, threads, False)
        if G != NULL:
            _merge_values(G + j * width, start, states, at.sums + h * width, width,
                          threads, False)
            _merge_values(&acc_w[j], start, states, at.weight_sums + h, 1, threads,
                          False)
    if t == 0:
        _merge_values(<floating*> ps.model.intercept, start, states, at.intercept, 1,
                      threads, True)
        if ps.history.intercept != NULL:
            _merge_values(<floating*> ps.history.intercept, start, states,
                          at.intercept + 1, 1, threads, False)


cdef void _hot_start(const Pass* ps, const HotRows* hot, const floating* like) noexcept nogil:
    """The round's start of the hot features' parameters (HotRows) from the shared ones
    (AdaGrad's sums left at zero for SGD, which has none)."""
    cdef Py_ssize_t width = ps.model.k, n = hot.n_hot, h, j
    cdef floating* start = <floating*> hot.start
    cdef const floating* P = <const floating*> ps.model.P
    cdef const floating* G = <const floating*> ps.history.P
    cdef const floating* w = <const floating*> ps.model.w
    cdef const floating* acc_w = <const floating*> ps.history.w
    cdef HotLayout at = _hot_layout(hot, width)
    memset(start, 0, at.size * sizeof(floating))
    for h in range(n):
        j = hot.feature[h]
        memcpy(start + h * width, P + j * width, width * sizeof(floating))
        start[at.weights + h] = w[j]
        if G != NULL:
            memcpy(start + at.sums + h * width, G + j * width, width * sizeof(floating))
            start[at.weight_sums + h] = acc_w[j]
    start[at.intercept] = (<const floating*> ps.model.intercept)[0]
    if ps.history.intercept != NULL:
        start[at.intercept + 1] = (<const floating*> ps.history.intercept)[0]


cdef bint _field_aware_threads(const floating* data, const index_t* ind,
                               const index_t* indptr, const Pass* ps, long long* step,
                               RowSums* st, int threads, HotRows* hot) noexcept nogil:
    """A field-aware pass (:func:`_field_aware_pass`) on ``threads`` threads sharing its
    rows (:func:`_field_aware_share`; ``st`` a workspace per thread, ``hot`` the
    features whose parameters each thread steps in its own copy, NULL: none), the step
    count advanced by the pass's rows.  Returns False on a non-finite prediction.  (Out
    of memory for the copies, the threads share every parameter.)"""
    cdef bint finite = True
    cdef int t
    cdef size_t size
    if threads == 1:
        return _field_aware_pass(data, ind, indptr, ps, step, st)
    if hot != NULL and hot.n_hot > 0:
        size = _hot_layout(hot, ps.model.k).size * sizeof(floating)
        hot.start = malloc(size)
        for t in range(threads):
            st[t].own = malloc(size)
            st[t].hot = hot if st[t].own != NULL and hot.start != NULL else NULL
            finite = finite and st[t].hot != NULL
        if not finite:  # out of memory: every parameter shared
            for t in range(threads):
                st[t].hot = NULL
        else:
            _hot_start(ps, hot, data)
        finite = True
    with parallel(num_threads=threads):
        _field_aware_share(threadid(), polylite_team_size(), data, ind, indptr, ps,
                           step[0], st)
    for t in range(threads):
        finite = finite and st[t].finite
        free(st[t].own)
        st[t].own = NULL
        st[t].hot = NULL
    if hot != NULL:
        free(hot.start)
        hot.start = NULL
    step[0] += ps.rows.n_rows
    return finite
