# FTRL-proximal steps, included by _sgd.pyx.


# ---------------------------------------------------------------------------------------
# FTRL-proximal (McMahan et al., "Ad Click Prediction: a View from the Trenches", KDD
# 2013), per coordinate: with n the sum of the squared gradients and z the sum of the
# gradients less sigma_t times the weight at each step (sigma_t the step's increase of
# sqrt(n) / alpha), the weight is 0 when |z| <= l1, else
# -(z - sign(z) l1) / ((beta + sqrt(n)) / alpha + l2).
# ---------------------------------------------------------------------------------------

cdef inline void _ftrl_step(floating* p, floating* n, floating* z, double g, double alpha,
                            double beta, double l1, double l2) noexcept nogil:
    """One FTRL-proximal step on one coordinate with gradient g."""
    cdef double n_old = n[0], n_new = n_old + g * g
    cdef double zz = z[0] + g - (sqrt(n_new) - sqrt(n_old)) / alpha * p[0]
    z[0] = <floating> zz
    n[0] = <floating> n_new
    if fabs(zz) <= l1:
        p[0] = 0
    else:
        p[0] = <floating> (-(zz - copysign(l1, zz)) / ((beta + sqrt(n_new)) / alpha + l2))


cdef inline void _ftrl_steps(floating* p, floating* n, floating* z, const floating* g,
                             Py_ssize_t count, double dl, const Rule* r) noexcept nogil:
    """FTRL steps on ``count`` coordinates with gradients dl g (penalised by l1, l2)."""
    cdef Py_ssize_t s
    for s in range(count):
        _ftrl_step(&p[s], &n[s], &z[s], dl * g[s], r.eta0, r.ftrl_beta, r.l1, r.l2)


cdef void _apply_row_ftrl(const floating* data, const index_t* ind, Py_ssize_t nnz,
                          const Pass* ps, RowSums* st, double dl) noexcept nogil:
    """:func:`_apply_row` for FTRL: a step on each parameter the row reads (the
    intercept unpenalised; field-aware: the vectors of the fields of the row's other
    nonzeros), with the gradient of its loss."""
    cdef const Rule* r = &ps.rule
    cdef const Model* m = &ps.model
    cdef floating* w = <floating*> m.w
    cdef floating* P = <floating*> m.P
    cdef floating* n_w = <floating*> ps.history.w
    cdef floating* n_P = <floating*> ps.history.P
    cdef floating* z_w = <floating*> ps.history.z_w
    cdef floating* z_P = <floating*> ps.history.z_P
    cdef const floating* gP = <const floating*> st.gP
    cdef Py_ssize_t d = m.d, k = m.k, z, j, b, f, at
    cdef Py_ssize_t kf = k // m.n_fields if m.kernel == FIELD_AWARE else k
    if r.fit_intercept:
        _ftrl_step(<floating*> m.intercept, <floating*> ps.history.intercept,
                   <floating*> ps.history.z_intercept, dl, r.eta0, r.ftrl_beta, 0, 0)
    _count_fields(m, ind, nnz, st.field_count, 1)
    for z in range(nnz):
        j = ind[z]
        if r.fit_linear:
            _ftrl_steps(&w[j], &n_w[j], &z_w[j], &data[z], 1, dl, r)
        for b in range(m.n_blocks):
            at = (b * d + j) * k
            if m.kernel != FIELD_AWARE:
                _ftrl_steps(P + at, n_P + at, z_P + at, gP + (b * nnz + z) * k, k, dl, r)
                continue
            for f in range(m.n_fields):
                if _reads_vector(m, st.field_count, j, f):
                    _ftrl_steps(P + at + f * kf, n_P + at + f * kf, z_P + at + f * kf,
                                gP + (b * nnz + z) * k + f * kf, kf, dl, r)
    _count_fields(m, ind, nnz, st.field_count, -1)
