# Included by _cd.pyx (one compilation unit with it, so that the inline passes stay
# inline and the epoch's structures are shared); see _cd.pyx for the cimports.

# The coordinate steps of polynomial networks (the polynomial kernel).

# ---- polynomial networks ----------------------------------------------------------------

cdef enum:
    MAX_HALVINGS = 30
    # The coordinate steps of the polynomial kernel keep their bound's coefficients in
    # fixed arrays: degrees up to this one (cd_epoch checks).
    MAX_POLY_DEGREE = 12

cdef struct PolyCoordinate:
    # A coordinate of a polynomial network's component, as its gradient pass reads it.
    double p             # its value
    double reg           # its penalty
    int degree
    double lam_s         # the component's output weight
    Py_ssize_t cur       # the rows' cache slot of u_i


cdef double _poly_sums(const PolyCoordinate* coord, const index_t* rows,
                       const floating* values, Py_ssize_t count, const double* state,
                       const Layout* L, double* bound, double* newton) noexcept nogil:
    """The gradient pass of the PN coordinate ``coord`` (its column ``rows``/``values``,
    ``count`` entries); returns its support (the weight of its rows).

    Row i's prediction moves by r_i(d) = lam_s ((u_i + d x)^m - u_i^m) = sum_t c_t d^t,
    c_t = lam_s C(m, t) u_i^(m - t) x^t, when the coordinate moves by d, and its loss by at
    most l' r_i + kappa r_i^2 / 2 + third |r_i|^3 / 6 (kappa: the loss's curvature, or its
    bound mu for the squared hinge, see loss_derivatives; third: loss_third_bound), with
    |r_i|^3 <= (sum_t |c_t| |d|^t)^3.  So the objective changes by at most

        Q(d) = sum_{r=1..2m} bound[r] d^r + sum_{r=3..3m} bound[2m + r] |d|^r,

    the penalty's change included (exact for the squared loss).  ``bound`` takes 5m + 1
    doubles; ``newton`` the curvature sum_i (kappa c_1^2 + |2 l' c_2|) + reg of a Newton
    step with a positive curvature (Q''(0) with its possibly negative part by magnitude).
    """
    cdef double reg = coord.reg, p = coord.p, lam_s = coord.lam_s
    cdef Py_ssize_t cur = coord.cur
    cdef Py_ssize_t z, i
    cdef int t, r, m = coord.degree
    cdef double x, u, dl, kappa, weight, binomial, power, support = 0, positive = 0
    cdef double c[MAX_POLY_DEGREE + 1]       # c_t, t = 1..m
    cdef double square[2 * MAX_POLY_DEGREE + 1]  # (sum_t |c_t| d^t)^2, powers 2..2m
    cdef double* cubic = bound + 2 * m
    cdef const double* row
    for r in range(5 * m + 1):
        bound[r] = 0
    for z in range(count):
        i = _row_of(rows, z)
        x = values[z] if values != NULL else 1.0
        row = state + i * L.stride
        u = row[cur]
        dl = _row_dlosses(row, L.label, L.weight, L.loss, &kappa)
        weight = _weight(row, L)
        support += weight
        binomial = lam_s
        power = 1
        for t in range(1, m + 1):
            binomial = binomial * (m - t + 1) / t
            power *= x
            c[t] = binomial * power
        power = 1
        for t in range(m, 0, -1):
            c[t] *= power
            power *= u
        positive += kappa * c[1] * c[1] + fabs(2 * dl * c[2])
        for t in range(1, m + 1):
            bound[t] += dl * c[t]
            for r in range(1, m + 1):
                bound[t + r] += 0.5 * kappa * c[t] * c[r]
        if L.third > 0:
            for r in range(2, 2 * m + 1):
                square[r] = 0
            for t in range(1, m + 1):
                for r in range(1, m + 1):
                    square[t + r] += fabs(c[t] * c[r])
            for t in range(1, m + 1):
                for r in range(2, 2 * m + 1):
                    cubic[t + r] += L.third / 6 * weight * fabs(c[t]) * square[r]
    bound[1] += reg * p
    bound[2] += 0.5 * reg
    newton[0] = positive + reg
    return support


cdef inline double _poly_value(const double* phi, int top, double tau, double* slope,
                               double* curvature) noexcept nogil:
    """sum_{r=1..top} phi[r] tau^r, with its first and second derivatives (Horner)."""
    cdef int r
    cdef double value = phi[top], first = 0, second = 0
    for r in range(top - 1, -1, -1):
        second = second * tau + 2 * first
        first = first * tau + value
        value = value * tau + (phi[r] if r > 0 else 0.0)
    slope[0] = first
    curvature[0] = second
    return value


cdef double _poly_step(const double* bound, double newton, int degree) noexcept nogil:
    """The step minimising the bound Q of _poly_sums along the descent direction.

    Along d = direction * tau, tau >= 0, Q is a polynomial phi in tau.  Safeguarded Newton
    on phi' between 0 (phi' < 0) and a point where phi' > 0, started from the Newton step
    with the positive curvature ``newton``.  Q majorises the objective, so a step with
    phi < 0 decreases it; if the minimiser found has none, the start is halved until phi
    shows a sufficient decrease (Armijo, on the bound: no pass over the rows), or no step.
    """
    cdef int r, it, m = degree, top = 3 * degree
    cdef double g = bound[1], direction, lo, hi, tau, slope, curvature, start
    cdef double phi[3 * MAX_POLY_DEGREE + 1]
    if g == 0 or newton <= 0:
        return 0
    direction = -1.0 if g > 0 else 1.0
    for r in range(top + 1):
        phi[r] = 0
    for r in range(1, 2 * m + 1):
        phi[r] = bound[r] * (direction if r % 2 == 1 else 1.0)
    for r in range(3, top + 1):
        phi[r] += bound[2 * m + r]
    start = fabs(g) / newton
    lo = 0
    hi = start
    _poly_value(phi, top, hi, &slope, &curvature)
    it = 0
    while slope < 0 and it < 64:  # phi grows like tau^(2m) or faster: a bracket exists
        lo = hi
        hi *= 2
        _poly_value(phi, top, hi, &slope, &curvature)
        it += 1
    tau = 0.5 * (lo + hi)
    if slope >= 0:
        for it in range(100):
            _poly_value(phi, top, tau, &slope, &curvature)
            if slope < 0:
                lo = tau
            else:
                hi = tau
            if curvature > 0 and lo < tau - slope / curvature < hi:
                tau = tau - slope / curvature
            else:
                tau = 0.5 * (lo + hi)
            if hi - lo <= 1e-14 * hi:
                break
        if _poly_value(phi, top, tau, &slope, &curvature) < 0:
            return direction * tau
    tau = start
    for it in range(MAX_HALVINGS):
        if _poly_value(phi, top, tau, &slope, &curvature) <= -1e-4 * fabs(g) * tau:
            return direction * tau
        tau *= 0.5
    return 0


cdef double _poly_coordinate(floating* param, double reg, int degree, double lam_s,
                             const index_t* rows, const floating* values,
                             Py_ssize_t count, double* state, const Layout* L,
                             Py_ssize_t cur) noexcept nogil:
    """One coordinate of a PN component: the gradient pass (_poly_sums), the step that
    minimises the bound (_poly_step), the update pass; returns the step.

    The coordinate ``param``'s column is ``rows``/``values`` (``count`` entries; ``rows``
    NULL: rows 0..count-1, ``values`` NULL: value 1, as for gamma_s).  Stores the new
    value, then updates the predictions and the cached linear forms in slot ``cur`` with
    the step actually stored (rounded to the parameter's precision).
    """
    cdef Py_ssize_t z, i
    cdef double p = param[0], x, u, delta, newton
    cdef double bound[5 * MAX_POLY_DEGREE + 1]
    cdef double* row
    cdef PolyCoordinate coord
    coord.p = p
    coord.reg = reg
    coord.degree = degree
    coord.lam_s = lam_s
    coord.cur = cur
    if _poly_sums(&coord, rows, values, count, state, L, bound, &newton) <= 0:
        delta = -p  # unseen feature: see _unseen_or_step
    else:
        delta = _poly_step(bound, newton, degree)
    delta = _take_step(param, delta)
    if delta == 0:
        return 0
    for z in range(count):
        i = _row_of(rows, z)
        x = values[z] if values != NULL else 1.0
        row = state + i * L.stride
        u = row[cur]
        row[PRED] += lam_s * (int_power(u + delta * x, degree) - int_power(u, degree))
        row[cur] = u + delta * x
    return delta


cdef double _cd_poly_component(Epoch* E, Py_ssize_t s, Py_ssize_t cur, Py_ssize_t nxt,
                               floating* P, const index_t* group_columns) noexcept nogil:
    """Update lam_s, gamma_s and p_s of one PN component (slot ``cur`` holds u_i).

    The groups must be single columns (the steps are per coordinate).
    """
    cdef const Groups* G = &E.G
    cdef const index_t* rows = <const index_t*> E.entry_rows
    cdef const floating* values = <const floating*> E.entry_values
    cdef floating* gamma = <floating*> E.gamma
    cdef floating* lam = <floating*> E.lam
    cdef Py_ssize_t n = E.n, k = E.k, n_dummy = E.n_dummy
    cdef int degree = E.degrees[0]
    cdef bint has_next = s + 1 < k
    cdef double mu = E.L.mu, beta = E.beta
    cdef double* state = E.state
    cdef const Layout* L = &E.L
    cdef double* base = E.base
    cdef Py_ssize_t i, j, z, g, start, end
    cdef const index_t* group_rows
    cdef const floating* group_values  # groups of one column store their values
    cdef double feature, delta, max_change = 0, p_next, curvature
    cdef double sums[N_TERMS]
    cdef double* row
    if has_next:
        _slot_base(base, POLYNOMIAL, 1, gamma, n_dummy, k, s + 1)
        _reset_slot(state, L, n, nxt, base)
    if E.fit_lam:
        # The prediction is linear in lam_s: the bound step of a linear coordinate, with
        # the sums of _entry_terms for the derivative u_i^m.
        _zero_terms(sums)
        for i in range(n):
            row = state + i * L.stride
            feature = int_power(row[cur], degree)
            sums[0] += _row_dlosses(row, L.label, L.weight, L.loss, &curvature) * feature
            sums[1] += _weight(row, L) * feature * feature
            sums[3] += curvature * feature * feature
            sums[4] += _weight(row, L) * fabs(feature) * feature * feature
        delta = _take_step(lam + s, _bound_step(sums, mu, L.third, beta, lam[s]))
        if delta != 0:
            for i in range(n):
                row = state + i * L.stride
                row[PRED] += delta * int_power(row[cur], degree)
            max_change = max(max_change, fabs(delta))
    if n_dummy > 0:
        delta = _poly_coordinate(&gamma[s], beta, degree, lam[s], <const index_t*> NULL,
                                 <const floating*> NULL, n, state, L, cur)
        max_change = max(max_change, fabs(delta))
    for g in range(G.n_groups):
        j = group_columns[G.columns_ptr[g]]
        start = G.group_ptr[g]
        end = G.group_ptr[g + 1]
        group_rows = _group_rows(G, rows, g)
        group_values = _group_values(G, values, g)
        delta = _poly_coordinate(&P[j * k + s], beta, degree, lam[s], group_rows,
                                 group_values, end - start, state, L, cur)
        max_change = max(max_change, fabs(delta))
        if has_next:
            p_next = P[j * k + s + 1]
            for z in range(end - start):
                state[_row_of(group_rows, z) * L.stride + nxt] += (p_next
                                                                   * group_values[z])
    return max_change
