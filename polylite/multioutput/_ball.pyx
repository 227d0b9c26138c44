"""The balls {Omega(V) <= tau} of the output layer in C: the penalties, the exact
Euclidean projections (``_projections`` documents the penalties and the algorithms) and
the minimisation of a quadratic over a ball by accelerated projected gradient (the inner
problem of ``_refit.refit_output``).

The refit projects small matrices (basis vectors x outputs) tens of thousands of times
per fit, so everything works in place on C-contiguous float64 arrays, with no Python
object in the loops.  ``kind`` is the index of the penalty in ``_projections.PENALTIES``.
"""
from libc.math cimport fabs, sqrt
from libc.stdlib cimport free, malloc

# The penalties, in the order of _projections.PENALTIES.
cdef enum:
    L1 = 0
    L1_L2 = 1
    L1_LINF = 2


cdef void _sort(double* a, Py_ssize_t n) noexcept nogil:
    """Sort a[:n] in increasing order: quicksort (median of three; the larger part by
    the loop, so the stack stays O(log n)) down to insertion sort of short runs.  Not
    the C library's qsort: its comparisons through a function pointer made the l1/linf
    projection of a 150 x 26 matrix 1.7x slower (300 -> 509 us), l1 3.7x."""
    cdef Py_ssize_t i, j, mid
    cdef double pivot, tmp
    while n > 16:
        mid = n // 2
        # The median of a[0], a[mid], a[n-1] into a[mid]: it bounds both scans.
        if a[mid] < a[0]:
            a[0], a[mid] = a[mid], a[0]
        if a[n - 1] < a[mid]:
            a[n - 1], a[mid] = a[mid], a[n - 1]
            if a[mid] < a[0]:
                a[0], a[mid] = a[mid], a[0]
        pivot = a[mid]
        i, j = 0, n - 1
        while True:
            i += 1
            while a[i] < pivot:
                i += 1
            j -= 1
            while pivot < a[j]:
                j -= 1
            if i >= j:
                break
            a[i], a[j] = a[j], a[i]
        # a[:j+1] <= pivot <= a[j+1:]; both parts are nonempty.
        if j + 1 < n - j - 1:
            _sort(a, j + 1)
            a, n = a + j + 1, n - j - 1
        else:
            _sort(a + j + 1, n - j - 1)
            n = j + 1
    for i in range(1, n):
        tmp = a[i]
        j = i
        while j > 0 and tmp < a[j - 1]:
            a[j] = a[j - 1]
            j -= 1
        a[j] = tmp


cdef void _sorted_descending(const double* a, Py_ssize_t m, bint absolute,
                             double* top) noexcept nogil:
    # top[:m] = a[:m] (or |a[:m]|) from the largest (sorted as minus the values).
    cdef Py_ssize_t j
    for j in range(m):
        top[j] = -fabs(a[j]) if absolute else -a[j]
    _sort(top, m)
    for j in range(m):
        top[j] = -top[j]


cdef double _row_penalty(const double* v, Py_ssize_t m, int kind) noexcept nogil:
    cdef double total = 0.0, a
    cdef Py_ssize_t j
    for j in range(m):
        a = fabs(v[j])
        if kind == L1:
            total += a
        elif kind == L1_L2:
            total += a * a
        elif a > total:
            total = a
    return sqrt(total) if kind == L1_L2 else total


cdef double _penalty(const double* V, Py_ssize_t n, Py_ssize_t m, int kind) noexcept nogil:
    cdef double total = 0.0
    cdef Py_ssize_t r
    for r in range(n):
        total += _row_penalty(V + r * m, m, kind)
    return total


cdef double simplex_threshold(const double* a, Py_ssize_t m, double radius,
                              bint absolute, double* top) noexcept nogil:
    """The theta with sum_j (a_j - theta)_+ = radius, a_j or |a_j| (sort-based, Duchi et
    al. 2008): (sum of the j largest - radius) / j for the largest j whose j-th entry
    exceeds it.  ``top`` is a work buffer of m doubles."""
    cdef Py_ssize_t j
    cdef double cumulative = 0.0, candidate, theta = 0.0
    _sorted_descending(a, m, absolute, top)
    for j in range(m):
        cumulative += top[j]
        candidate = (cumulative - radius) / (j + 1)
        if top[j] - candidate > 0 or j == 0:
            theta = candidate
    return theta


cdef int _project_l1(double* V, Py_ssize_t size, double tau) noexcept nogil:
    # Soft-threshold every entry by the theta that brings sum |V| to tau.
    cdef double* top = <double*> malloc(size * sizeof(double))
    cdef double theta, a
    cdef Py_ssize_t i
    if top == NULL:
        return -1
    theta = simplex_threshold(V, size, tau, True, top)
    for i in range(size):
        a = fabs(V[i]) - theta
        V[i] = 0.0 if a <= 0 else (a if V[i] > 0 else -a)
    free(top)
    return 0


cdef int _project_l1_l2(double* V, Py_ssize_t n, Py_ssize_t m, double tau) noexcept nogil:
    # The row norms onto the l1 ball; every row rescaled to its projected norm.
    cdef double* norms = <double*> malloc(2 * n * sizeof(double))
    cdef double theta, scale
    cdef Py_ssize_t r, j
    if norms == NULL:
        return -1
    for r in range(n):
        norms[r] = _row_penalty(V + r * m, m, L1_L2)
    theta = simplex_threshold(norms, n, tau, False, norms + n)
    for r in range(n):
        scale = 0.0 if norms[r] <= theta else (norms[r] - theta) / norms[r]
        for j in range(m):
            V[r * m + j] *= scale
    free(norms)
    return 0


cdef inline Py_ssize_t _count_below(const double* a, Py_ssize_t m, double x,
                                    bint strict) noexcept nogil:
    # The number of entries of the nondecreasing a[:m] below x (or at most x).
    cdef Py_ssize_t lo = 0, hi = m, mid
    while lo < hi:
        mid = (lo + hi) // 2
        if a[mid] < x or (not strict and a[mid] == x):
            lo = mid + 1
        else:
            hi = mid
    return lo


cdef double _height(const double* cumulative, const double* row_breaks, Py_ssize_t n,
                    Py_ssize_t m, double theta, bint strict, double* inverse) noexcept nogil:
    """M at theta, from the rows' configurations just below theta (``strict``) or at it:
    row r has passed the breakpoints below theta, kept entries 1..kept+1 clipped and
    mu_r = (cumulative_{kept+1} - theta) / (kept+1), or has left (kept = m).  M is
    sum_r mu_r = S - theta * I on the segment; returns S and sets inverse[0] = I."""
    cdef Py_ssize_t r, kept
    cdef double slope_sum = 0.0, inv_sum = 0.0
    for r in range(n):
        kept = _count_below(row_breaks + r * m, m, theta, strict)
        if kept < m:
            slope_sum += cumulative[r * m + kept] / (kept + 1)
            inv_sum += 1.0 / (kept + 1)
    inverse[0] = inv_sum
    return slope_sum


cdef int _project_l1_linf(double* V, Py_ssize_t n, Py_ssize_t m, double tau) noexcept nogil:
    """Row r clipped at mu_r; the mu_r share one threshold theta (module docstring of
    ``_projections``).  Row r keeps its j+1 largest entries above
    mu_r = (cumulative_{j+1} - theta) / (j+1) while theta < row_breaks[r, j]; at
    row_breaks[r, m-1] (its l1 norm) it leaves (mu_r = 0).  The total height
    M(theta) = sum_r mu_r is continuous, decreasing and linear between breakpoints:
    a binary search over all the breakpoints, sorted, finds the first at which M <= tau,
    and M = tau on the segment before it."""
    cdef Py_ssize_t size = n * m, r, j, lo, hi, mid
    cdef double* top = <double*> malloc(4 * size * sizeof(double))
    cdef double* cumulative
    cdef double* row_breaks
    cdef double* sorted_breaks
    cdef double following, slope_sum, inv_sum, theta, mu, a
    if top == NULL:
        return -1
    cumulative, row_breaks, sorted_breaks = top + size, top + 2 * size, top + 3 * size
    for r in range(n):
        _sorted_descending(V + r * m, m, True, top + r * m)
        cumulative[r * m] = top[r * m]
        for j in range(1, m):
            cumulative[r * m + j] = cumulative[r * m + j - 1] + top[r * m + j]
        for j in range(m):
            following = top[r * m + j + 1] if j + 1 < m else 0.0
            row_breaks[r * m + j] = cumulative[r * m + j] - (j + 1) * following
            sorted_breaks[r * m + j] = row_breaks[r * m + j]
    _sort(sorted_breaks, size)
    # The first breakpoint with M <= tau (the last one, every row's l1 norm at most, has
    # M = 0); M = tau on the segment just below it.
    lo, hi = 0, size - 1
    while lo < hi:
        mid = (lo + hi) // 2
        slope_sum = _height(cumulative, row_breaks, n, m, sorted_breaks[mid], False,
                            &inv_sum)
        if slope_sum - sorted_breaks[mid] * inv_sum <= tau:
            hi = mid
        else:
            lo = mid + 1
    slope_sum = _height(cumulative, row_breaks, n, m, sorted_breaks[lo], True, &inv_sum)
    theta = (slope_sum - tau) / inv_sum if inv_sum > 0 else sorted_breaks[lo]
    if theta < 0:
        theta = 0.0
    for r in range(n):
        j = _count_below(row_breaks + r * m, m, theta, False)
        mu = 0.0
        if j < m:
            mu = (cumulative[r * m + j] - theta) / (j + 1)
            if mu < 0:
                mu = 0.0
        for j in range(m):
            a = fabs(V[r * m + j])
            if a > mu:
                V[r * m + j] = mu if V[r * m + j] > 0 else -mu
    free(top)
    return 0


cdef int _project(double* V, Py_ssize_t n, Py_ssize_t m, double tau,
                  int kind) noexcept nogil:
    # V onto {Omega <= tau} in place (unchanged inside); -1 when out of memory.
    if n == 0 or m == 0 or _penalty(V, n, m, kind) <= tau:
        return 0
    if kind == L1:
        return _project_l1(V, n * m, tau)
    if kind == L1_L2:
        return _project_l1_l2(V, n, m, tau)
    return _project_l1_linf(V, n, m, tau)


def penalty(const double[:, ::1] V, int kind):
    """Omega(V) of a C-contiguous float64 V (n_rows, n_outputs)."""
    cdef double value = 0.0
    if V.shape[0] and V.shape[1]:
        with nogil:
            value = _penalty(&V[0, 0], V.shape[0], V.shape[1], kind)
    return value


def project_inplace(double[:, ::1] V, double tau, int kind):
    """Replace V (C-contiguous float64, n_rows x n_outputs) by its projection onto
    {Omega <= tau}; a V already in the ball is left unchanged."""
    cdef int status = 0
    if V.shape[0] and V.shape[1]:
        with nogil:
            status = _project(&V[0, 0], V.shape[0], V.shape[1], tau, kind)
    if status:
        raise MemoryError


def minimise_quadratic(const double[:, ::1] g, double kappa, const double[:, ::1] cov,
                       const double[:, ::1] V, double tau, int kind, double step,
                       Py_ssize_t max_iter, double tol, double[:, ::1] X):
    """X = argmin over the ball of <g, X - V> + kappa/2 <X - V, cov (X - V)> by FISTA
    from V with step ``step`` (at most 1 / (kappa * the largest eigenvalue of cov)),
    the exact projections and adaptive restarts (O'Donoghue and Candes 2015): at most
    ``max_iter`` iterations, until the gradient mapping is ``tol`` times the first.
    Shapes: g, V, X (t, c); cov (t, t), symmetric."""
    cdef Py_ssize_t t = V.shape[0], c = V.shape[1], size = t * c, i, j, k, n_iter
    cdef const double* v = &V[0, 0] if size else NULL
    cdef double* work
    cdef double* Y
    cdef double* X_new
    cdef double* D
    cdef double* row
    cdef double mapping, first = -1.0, turn, diff, momentum = 1.0, next_momentum, beta
    cdef double a
    cdef int status = 0
    if size == 0:
        return
    work = <double*> malloc((3 * size + c) * sizeof(double))
    if work == NULL:
        raise MemoryError
    Y, X_new, D, row = work, work + size, work + 2 * size, work + 3 * size
    with nogil:
        for i in range(t):
            for j in range(c):
                X[i, j] = V[i, j]
                Y[i * c + j] = V[i, j]
        for n_iter in range(max_iter):
            # X_new = P(Y - step (g + kappa cov (Y - V)))
            for i in range(size):
                D[i] = Y[i] - v[i]
            for i in range(t):
                for j in range(c):
                    row[j] = 0.0
                for k in range(t):
                    a = cov[i, k]
                    for j in range(c):
                        row[j] += a * D[k * c + j]
                for j in range(c):
                    X_new[i * c + j] = Y[i * c + j] - step * (g[i, j] + kappa * row[j])
            status = _project(X_new, t, c, tau, kind)
            if status:
                break
            mapping = 0.0
            turn = 0.0
            for i in range(t):
                for j in range(c):
                    diff = Y[i * c + j] - X_new[i * c + j]
                    mapping += diff * diff
                    turn += diff * (X_new[i * c + j] - X[i, j])
            mapping = sqrt(mapping)
            if first < 0:
                first = mapping
            if turn > 0:    # the step turned back: restart the momentum
                momentum = 1.0
            next_momentum = 0.5 * (1.0 + sqrt(1.0 + 4.0 * momentum * momentum))
            beta = (momentum - 1.0) / next_momentum
            for i in range(t):
                for j in range(c):
                    Y[i * c + j] = X_new[i * c + j] + beta * (X_new[i * c + j] - X[i, j])
                    X[i, j] = X_new[i * c + j]
            momentum = next_momentum
            if mapping <= tol * first:
                break
    free(work)
    if status:
        raise MemoryError
