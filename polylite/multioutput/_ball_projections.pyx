"""The penalties of the output layer and the exact Euclidean projections onto their
balls, in C (``_projections`` documents the penalties and the algorithms).

The refit projects small matrices (basis vectors x outputs) hundreds of times per basis
vector, so each call works in place on a C-contiguous float64 array, with no Python
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
    the loop, so the stack stays O(log n)) down to insertion sort of short runs."""
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


cdef double _simplex_threshold(const double* a, Py_ssize_t m, double radius,
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
    theta = _simplex_threshold(V, size, tau, True, top)
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
    theta = _simplex_threshold(norms, n, tau, False, norms + n)
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
    cdef Py_ssize_t n = V.shape[0], m = V.shape[1]
    cdef int status = 0
    if n == 0 or m == 0:
        return
    with nogil:
        if _penalty(&V[0, 0], n, m, kind) > tau:
            if kind == L1:
                status = _project_l1(&V[0, 0], n * m, tau)
            elif kind == L1_L2:
                status = _project_l1_l2(&V[0, 0], n, m, tau)
            else:
                status = _project_l1_linf(&V[0, 0], n, m, tau)
    if status:
        raise MemoryError


def simplex_rows_inplace(double[:, ::1] A, double radius):
    """Replace each row of A (C-contiguous float64) by its projection onto the simplex
    {p >= 0, sum p = radius}."""
    cdef Py_ssize_t n = A.shape[0], m = A.shape[1], r, j
    cdef double theta
    if n == 0 or m == 0:
        return
    cdef double* top = <double*> malloc(m * sizeof(double))
    if top == NULL:
        raise MemoryError
    with nogil:
        for r in range(n):
            theta = _simplex_threshold(&A[r, 0], m, radius, False, top)
            for j in range(m):
                A[r, j] = A[r, j] - theta if A[r, j] > theta else 0.0
    free(top)
