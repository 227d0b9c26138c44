# The field-weighted kernel's weights of the pairs of fields (Pan et al., WWW 2018) in
# the stochastic passes, included by _sgd.pyx.  They live in the model's ``lam`` (packed:
# _kernels.field_pair), their AdaGrad sums (FTRL: its n) in the history's ``lam`` (FTRL's
# z in its ``z_lam``), and a row's gradient in them in the workspace's ``glam``
# (field_weighted_term writes the entries of the row's pairs of fields only).  Every step reads the row's distinct pairs of fields once
# (a row with two nonzeros in fields f and g adds both pairs' gradients to the one weight
# r[f, g]), and each row penalises the weights it reads, beta r (as libffm's penalty on
# the vectors).


cdef inline Py_ssize_t _n_lam(const Model* m) noexcept nogil:
    """The entries of the model's ``lam``: the weights of the pairs of fields of the
    field-weighted kernel, else one per component."""
    return n_field_pairs(m.n_fields) if m.kernel == FIELD_WEIGHTED else m.k


def _lam_size(problem, Py_ssize_t k):
    """The entries of ``lam`` the passes expect for ``problem`` with factor rows of k."""
    if problem.kernel == FIELD_WEIGHTED:
        return n_field_pairs(problem.n_fields)
    return k


cdef Py_ssize_t _row_fields(const Model* m, const index_t* ind, Py_ssize_t nnz, int* count,
                            int* distinct) noexcept nogil:
    """The row's distinct fields into ``distinct`` (in order of first appearance), their
    numbers of nonzeros into ``count`` (zero before; the caller zeroes them after:
    _clear_row_fields); returns how many there are."""
    cdef Py_ssize_t z, n = 0
    cdef int f
    for z in range(nnz):
        f = m.fields[ind[z]]
        if count[f] == 0:
            distinct[n] = f
            n += 1
        count[f] += 1
    return n


cdef inline void _clear_row_fields(int* count, const int* distinct,
                                   Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t u
    for u in range(n):
        count[distinct[u]] = 0


cdef inline bint _pair_read(const int* count, const int* distinct, Py_ssize_t u,
                            Py_ssize_t v) noexcept nogil:
    """Whether the row (its distinct fields ``distinct``, counted in ``count``) has a pair
    of nonzeros in the fields distinct[u] and distinct[v] (u <= v)."""
    return u != v or count[distinct[u]] > 1


cdef void _field_weight_steps(floating* r, const index_t* ind, Py_ssize_t nnz,
                              const Pass* ps, RowSums* st, double dl,
                              double eta) noexcept nogil:
    """One row's step (batch size 1) on the weights ``r`` of its pairs of fields: the
    gradient dl glam + beta r, AdaGrad's (the history's ``lam`` its sums) or SGD's at
    rate eta; FTRL's (the history's ``lam`` its n, ``z_lam`` its z) with the gradient
    dl glam, penalised by its l1 and l2 as the other parameters."""
    cdef const floating* glam = <const floating*> st.glam
    cdef floating* acc = <floating*> ps.history.lam
    cdef floating* z_lam = <floating*> ps.history.z_lam
    cdef Py_ssize_t n_fields = ps.model.n_fields, n, u, v, e
    cdef double beta = ps.rule.beta, g
    cdef bint adagrad = ps.rule.schedule == ADAGRAD, ftrl = ps.rule.schedule == FTRL
    n = _row_fields(&ps.model, ind, nnz, st.field_count, st.row_fields)
    for u in range(n):
        for v in range(u, n):
            if not _pair_read(st.field_count, st.row_fields, u, v):
                continue
            e = field_pair(st.row_fields[u], st.row_fields[v], n_fields)
            if ftrl:
                _ftrl_steps(&r[e], &acc[e], &z_lam[e], &glam[e], 1, dl, &ps.rule)
                continue
            g = dl * glam[e] + beta * r[e]
            if adagrad:
                adagrad_step(&r[e], &acc[e], <floating> g, ps.rule.eta0)
            else:
                r[e] = <floating> (r[e] - eta * g)
    _clear_row_fields(st.field_count, st.row_fields, n)


cdef void _add_field_weights(RowSums* st, double dl, const floating* r, const index_t* ind,
                             Py_ssize_t nnz, const Model* m,
                             const Rule* rule) noexcept nogil:
    """dl times the row's gradient in the weights of its pairs of fields into the
    thread's sums (with ``rule.row_penalty``, and the row's penalty beta r of them)."""
    cdef const floating* glam = <const floating*> st.glam
    cdef Py_ssize_t n, u, v, e
    n = _row_fields(m, ind, nnz, st.field_count, st.row_fields)
    for u in range(n):
        for v in range(u, n):
            if not _pair_read(st.field_count, st.row_fields, u, v):
                continue
            e = field_pair(st.row_fields[u], st.row_fields[v], m.n_fields)
            st.lam[e] += dl * glam[e]
            if rule.row_penalty:
                st.lam[e] += rule.beta * r[e]
    _clear_row_fields(st.field_count, st.row_fields, n)


cdef void _apply_field_weights(int threads, RowSums* st, const Pass* ps,
                               const BatchStep* bs, floating* r) noexcept nogil:
    """A mini-batch's step on the weights ``r`` of the pairs of fields, from the threads'
    sums (then zeroed): the mean gradient, with the mini-batch rows' penalty of the
    weights they read (a weight no row read has a zero gradient, and AdaGrad's step on it
    is none; SGD's also none with a row penalty, else it decays as the factors do)."""
    cdef floating* acc = <floating*> ps.history.lam
    cdef Py_ssize_t e, n = _n_lam(&ps.model)
    cdef bint adagrad = ps.rule.schedule == ADAGRAD
    cdef double g
    cdef int u
    for e in range(n):
        g = 0
        for u in range(threads):
            g += st[u].lam[e]
            st[u].lam[e] = 0
        g *= bs.scale
        if not ps.rule.row_penalty:
            g += ps.rule.beta * r[e]
        if adagrad:
            if g != 0:
                adagrad_step(&r[e], &acc[e], <floating> g, ps.rule.eta0)
        else:
            r[e] = <floating> (r[e] - bs.eta * g)
