"""Coordinate descent on the whole-data loss of implicit feedback (iCD: Bayer, He,
Kanagal and Rendle, "A Generic Coordinate Descent Framework for Learning from Implicit
Feedback", WWW 2017) for degree-2 factorization machines whose rows split into a query
part and an item part.

The model.  A pair (query c, item i) is the row x_c + x_i (disjoint columns), and the
degree-2 FM splits:

    y(c, i) = a_c + b_i + sum_s u_cs v_is,

with a_c = <w, x_c> + sum_s A_2(p_s, x_c) (the query part's own terms), u_cs =
<p_s, x_c> (its factor sums), and b_i, v_is the same of the item part.  So y(c, i) =
<phi(c), psi(i)> with phi(c) = [a_c, 1, u_c] and psi(i) = [1, b_i, v_i] (F = k + 2
slots).

The objective.  Observed pairs S with weights w_ci (target 1), every other pair of
queries x items weight alpha0 (target 0):

    L = 1/(2N) [sum_S w_ci (y_ci - 1)^2 + alpha0 sum_{not S} y_ci^2] + penalties
      = 1/(2N) [sum_S ((w_ci - alpha0) y_ci^2 - 2 w_ci y_ci + w_ci)
                + alpha0 <J_C, J_I>] + penalties,

with the Gramians J_C = sum_c phi(c) phi(c)^T and J_I = sum_i psi(i) psi(i)^T (F x F):
the unobserved pairs are never visited.

A coordinate of the query side (a linear weight or a factor of a query column) moves
phi(c) of the queries that have the column only, in two slots: by g_c = dA/dtheta in
slot a and h_c = du_cs/dtheta in slot u_s (x_cj (u_cs - p_js x_cj) and x_cj for the
factor p_js; x_cj and 0 for w_j).  The objective is quadratic in the coordinate, with
gradient and curvature summed over those queries of

    [g, h] . b_c     and     [g, h] C_c [g, h]^T,

where, for the component s being updated,

    b_c = [E0 + alpha0 (J_I phi_c)_a,  E1 + alpha0 (J_I phi_c)_s],
    C_c = [[W0 + alpha0 J_I[a, a], W1 + alpha0 J_I[a, s]],
           [.,                     W2 + alpha0 J_I[s, s]]],

E0 = sum_i e_ci, E1 = sum_i e_ci v_is over the query's observed items (e_ci =
(w_ci - alpha0) y_ci - w_ci, the derivative of its observed term), and W0, W1, W2 the
sums of (w_ci - alpha0) times 1, v_is, v_is^2.  A step moves b_c by C_c [dg, dh], so a
query's record of five numbers follows every step in O(1), and a step costs the
column's nonzeros on its side.  A component's pass over the queries sets the records
up (O(observed pairs + queries F)), and one more, after its steps, moves the observed
pairs' predictions.  The item side is the same with the roles swapped (J_C in place of
J_I, in the item side's slot order).

The penalties.  alpha/2 ||w||^2 + beta/2 ||P||^2 (per positive, as the data term is a
mean over them), each column's terms optionally scaled by a factor of its own
(``penalty_scale``): the frequency-scaled penalties of Rendle, Krichene, Zhang and
Koren ("Revisiting the Performance of iALS on Item Recommendation Benchmarks", RecSys
2022), which the solver's driver computes.

The step of a coordinate is the engine's coordinate-descent rule (_cd_core's
_coordinate_step with STEP_MINIMISE): the minimiser of the objective along the
coordinate, exact since the objective is quadratic in it; a column no row of its side
has moves to 0, and the step is stored in the parameter's precision (_take_step).  So
the objective never increases.

An item's own column.  A query may hold a column o(i) of its own for item i (the item
in a set of the user's rated items); an observed pair is then scored without its
interactions with the item, yh_ci = y_ci - x_c,o(i) <p_o(i), v_i> (the item left out of
the query's set), and its term is w_ci (yh_ci - 1)^2 while the Gramians count it as
alpha0 y_ci^2: the pairs' records take -alpha0 y_ci^2 + w_ci (yh_ci - 1)^2, still
quadratic in every coordinate.  On the item side yh moves with v_is by u_cs -
x_c,o(i) p_o(i),s instead of u_cs (the records' sums use both).  On the query side only
the factor p_o(i),s itself moves yh differently (by g alone: its h v_is cancels), so the
step of column o(i) corrects its gradient, its curvature and the row's record for that
pair alone.

Threads share the passes over a side's rows (each row writes its own record and its
own observed pairs); the columns step one after the other, so results do not depend on
the number of threads.
"""
import numpy as np
from libc.stdint cimport int64_t
from libc.math cimport sqrt
from libc.stdlib cimport malloc, free
from cython cimport floating
from cython.parallel cimport prange, parallel, threadid

from ._cd_core cimport STEP_MINIMISE, _coordinate_step, _take_step


cdef enum:
    # A row's record for the component being updated (REC doubles): the gradient
    # moments b, the curvature C, and the row's own terms and factor sum before the
    # component's steps.
    REC = 8
    B0 = 0
    B1 = 1
    C00 = 2
    C01 = 3
    C11 = 4
    OWN0 = 5
    U0 = 6


cdef struct Side:
    # The side whose coordinates step: its rows' caches and records, its columns (CSC,
    # only the columns of this side, in the order they step) and its observed pairs,
    # grouped by row.
    Py_ssize_t n_rows
    Py_ssize_t k
    Py_ssize_t n_columns
    const int64_t* columns        # the model's column of each
    const int64_t* col_ptr
    const int64_t* col_rows
    const double* col_vals
    const int64_t* pair_ptr       # row r's pairs: pair_ptr[r]:pair_ptr[r + 1]
    const int64_t* pair_other     # their other side's row
    const int64_t* pair_index     # their index in the pairs' arrays, or NULL: the same
    const int64_t* entry_pair     # per column entry: the observed pair whose item owns
                                  # the column (its own column), or -1; NULL: none
    const double* penalty_scale   # per column, the factor of its penalties; NULL: 1
    double* own                   # (n_rows,) the rows' own terms a_r
    double* U                     # (k, n_rows) their factor sums, component by component
    double* records               # (n_rows, REC)


cdef struct Other:
    # The fixed side: its factor sums and Gramian, in this side's slot order.
    Py_ssize_t n_rows
    const double* U               # (k, n_rows)
    const double* J               # (F, F)


cdef struct Pairs:
    double* yhat                  # each observed pair's prediction
    const double* weight          # its weight w_ci
    double* own_term              # the term of its item's own column, or NULL: none
    double* shift                 # (item side) x_c,o(i) p_o(i),s for the component s
    const int64_t* own_col        # the column o(i) of its item in the query, or -1
    const double* own_val         # its value x_c,o(i) in the query
    Py_ssize_t n


cdef struct Settings:
    double alpha0
    double alpha                  # penalties per positive (of w, of the factors)
    double beta
    double n                      # N: the objective's divisor
    int threads
    Py_ssize_t limit              # stop after this many coordinate steps (< 0: never)


cdef inline double _slot_product(const double* Jrow, double own, const double* U,
                                 Py_ssize_t n, Py_ssize_t r, Py_ssize_t k) noexcept nogil:
    """<J[f, :], phi_r> for the row J[f, :] of a Gramian, phi_r = [own, 1, U[:, r]]."""
    cdef double total = Jrow[0] * own + Jrow[1]
    cdef Py_ssize_t t
    for t in range(k):
        total += Jrow[2 + t] * U[t * n + r]
    return total


cdef void _start_row(Side* S, const Other* O, const Pairs* pairs, const Settings* st,
                     Py_ssize_t s, Py_ssize_t r) noexcept nogil:
    """Row r's record for component s (s < 0: the linear weights)."""
    cdef double a0 = st.alpha0, E0 = 0, E1 = 0, W0 = 0, W1 = 0, W2 = 0
    cdef double e, c, v, vh, wt, y, yh
    cdef Py_ssize_t p, q, F = S.k + 2, n = S.n_rows
    cdef const double* vs = O.U + s * O.n_rows if s >= 0 else NULL
    cdef double* rec = S.records + r * REC
    for p in range(S.pair_ptr[r], S.pair_ptr[r + 1]):
        q = S.pair_index[p] if S.pair_index != NULL else p
        y = pairs.yhat[q]
        wt = pairs.weight[q]
        c = wt - a0
        e = c * y - wt
        yh = y
        if pairs.own_term != NULL:
            yh = y - pairs.own_term[q]
            e -= wt * pairs.own_term[q]
        E0 += e
        W0 += c
        if vs != NULL:
            v = vs[S.pair_other[p]]
            if pairs.shift != NULL and pairs.shift[q] != 0:
                vh = v - pairs.shift[q]
                E1 += wt * (yh - 1) * vh - a0 * y * v
                W1 += wt * vh - a0 * v
                W2 += wt * vh * vh - a0 * v * v
            else:
                E1 += e * v
                W1 += c * v
                W2 += c * v * v
    rec[B0] = E0 + a0 * _slot_product(O.J, S.own[r], S.U, n, r, S.k)
    rec[C00] = W0 + a0 * O.J[0]
    rec[OWN0] = S.own[r]
    if vs != NULL:
        rec[B1] = E1 + a0 * _slot_product(O.J + (2 + s) * F, S.own[r], S.U, n, r, S.k)
        rec[C01] = W1 + a0 * O.J[2 + s]
        rec[C11] = W2 + a0 * O.J[(2 + s) * F + 2 + s]
        rec[U0] = S.U[s * n + r]


cdef void _finish_row(Side* S, const Other* O, const Pairs* pairs,
                      Py_ssize_t s, Py_ssize_t r) noexcept nogil:
    """Move row r's observed pairs' predictions by its change over component s."""
    cdef double* rec = S.records + r * REC
    cdef double da = S.own[r] - rec[OWN0], du = 0
    cdef Py_ssize_t p, q
    cdef const double* vs = O.U + s * O.n_rows if s >= 0 else NULL
    if vs != NULL:
        du = S.U[s * S.n_rows + r] - rec[U0]
    if da == 0 and du == 0:
        return
    for p in range(S.pair_ptr[r], S.pair_ptr[r + 1]):
        q = S.pair_index[p] if S.pair_index != NULL else p
        pairs.yhat[q] += da + (du * vs[S.pair_other[p]] if vs != NULL else 0.0)
        if pairs.shift != NULL and du != 0:
            pairs.own_term[q] += du * pairs.shift[q]


cdef void _rows_pass(Side* S, const Other* O, const Pairs* pairs, const Settings* st,
                     Py_ssize_t s, bint finish) noexcept nogil:
    """Every row's record for component s, or (``finish``) its pairs' moves."""
    cdef Py_ssize_t r
    if finish:
        for r in prange(S.n_rows, num_threads=st.threads, schedule="static"):
            _finish_row(S, O, pairs, s, r)
    else:
        for r in prange(S.n_rows, num_threads=st.threads, schedule="static"):
            _start_row(S, O, pairs, st, s, r)


cdef inline void _entry_derivative(const Side* S, Py_ssize_t s, Py_ssize_t r, double x,
                                   double value, double* g, double* h) noexcept nogil:
    """The moves (g, h) of row r's slots a and u_s per unit step of the coordinate (a
    factor p_js of value ``value``, or w_j for s < 0) at its entry x."""
    if s < 0:
        g[0] = x
        h[0] = 0
    else:
        g[0] = x * (S.U[s * S.n_rows + r] - value * x)
        h[0] = x


cdef Py_ssize_t _column_steps(Side* S, const Other* O, Pairs* pairs, const Settings* st,
                              floating* w, floating* P, Py_ssize_t s,
                              Py_ssize_t steps) noexcept nogil:
    """The steps of the side's columns on component s (s < 0: their linear weights), in
    order; returns the number of steps taken so far (``steps`` on entry).

    A column that is an observed pair's item's own column (``entry_pair``) moves that
    pair's scored prediction by g alone, not g + h v: its gradient, curvature and the
    row's record take the difference."""
    cdef Py_ssize_t c, z, r, j, lo, hi, q
    cdef double x, g, h, grad, curv, value, delta, dg, dh, reg, wt, v, yh
    cdef bint own_entries = S.entry_pair != NULL and s >= 0
    cdef const double* vs = O.U + s * O.n_rows if s >= 0 else NULL
    cdef double sums[3]
    cdef double* rec
    cdef floating* param
    for c in range(S.n_columns):
        if st.limit >= 0 and steps >= st.limit:
            return steps
        j = S.columns[c]
        reg = st.alpha if s < 0 else st.beta
        if S.penalty_scale != NULL:
            reg *= S.penalty_scale[c]
        param = &w[j] if s < 0 else &P[j * S.k + s]
        value = param[0]
        lo = S.col_ptr[c]
        hi = S.col_ptr[c + 1]
        grad = 0
        curv = 0
        for z in range(lo, hi):
            r = S.col_rows[z]
            rec = S.records + r * REC
            _entry_derivative(S, s, r, S.col_vals[z], value, &g, &h)
            grad += g * rec[B0] + h * rec[B1]
            curv += g * g * rec[C00] + h * (2 * g * rec[C01] + h * rec[C11])
            if own_entries and S.entry_pair[z] >= 0:
                q = S.entry_pair[z]
                wt = pairs.weight[q]
                v = vs[S.pair_other[q]]
                yh = (pairs.yhat[q] - pairs.own_term[q] + S.own[r] - rec[OWN0] +
                      (S.U[s * S.n_rows + r] - rec[U0]) * v)
                grad -= wt * (yh - 1) * h * v
                curv -= wt * h * v * (2 * g + h * v)
        sums[0] = grad / st.n
        sums[1] = curv / st.n
        sums[2] = 0
        delta = _coordinate_step(STEP_MINIMISE, NULL, j, hi - lo, sums, 1.0, 0.0, reg,
                                 value)
        delta = _take_step(param, delta)
        steps += 1
        if delta == 0:
            continue
        for z in range(lo, hi):
            r = S.col_rows[z]
            rec = S.records + r * REC
            _entry_derivative(S, s, r, S.col_vals[z], value, &g, &h)
            dg = delta * g
            dh = delta * h
            rec[B0] += rec[C00] * dg + rec[C01] * dh
            rec[B1] += rec[C01] * dg + rec[C11] * dh
            S.own[r] += dg
            if s >= 0:
                S.U[s * S.n_rows + r] += dh
            if own_entries and S.entry_pair[z] >= 0:
                q = S.entry_pair[z]
                wt = pairs.weight[q]
                v = vs[S.pair_other[q]]
                rec[B0] -= wt * dh * v
                rec[B1] -= wt * dh * v * v
                pairs.own_term[q] += dh * v
    return steps


cdef Py_ssize_t _sweep(Side* S, const Other* O, Pairs* pairs, const Settings* st,
                       floating* w, floating* P, bint fit_linear,
                       bint factors) noexcept nogil:
    """The side's linear weights, then (``factors``) its factors component by
    component."""
    cdef Py_ssize_t s, q, steps = 0
    for s in range(-1 if fit_linear else 0, S.k if factors else 0):
        if st.limit >= 0 and steps >= st.limit:
            break
        if pairs.shift != NULL:
            for q in range(pairs.n):
                pairs.shift[q] = (pairs.own_val[q] * P[pairs.own_col[q] * S.k + s]
                                  if pairs.own_col[q] >= 0 and s >= 0 else 0.0)
        _rows_pass(S, O, pairs, st, s, False)
        steps = _column_steps(S, O, pairs, st, w, P, s, steps)
        _rows_pass(S, O, pairs, st, s, True)
    return steps


cdef _bind(side, other, double[::1] yhat, const double[::1] weight, Py_ssize_t k,
           Side* S, Other* O, Pairs* pairs, name):
    """Point S, O and pairs at the arrays of ``side``, ``other`` (the other side's
    factor sums ``U``, (k, n_other), and Gramian ``J``), ``yhat`` and ``weight`` (see
    :func:`side_sweep`; no own columns, no records); raises ValueError, naming ``name``,
    when their shapes disagree.  The arrays must outlive the structures."""
    cdef const int64_t[::1] columns = side.columns, col_ptr = side.col_ptr
    cdef const int64_t[::1] col_rows = side.col_rows, pair_ptr = side.pair_ptr
    cdef const int64_t[::1] pair_other = side.pair_other, pair_index = side.pair_index
    cdef const double[::1] col_vals = side.col_vals
    cdef const double[::1] penalty_scale = side.penalty_scale
    cdef double[::1] own = side.own
    cdef double[:, ::1] U = side.U
    cdef const double[:, ::1] other_U = other.U, J = other.J
    cdef Py_ssize_t n_rows = own.shape[0]
    if U.shape[0] != k or U.shape[1] != n_rows or J.shape[0] != k + 2 or \
            J.shape[1] != k + 2 or other_U.shape[0] != k or \
            pair_ptr.shape[0] != n_rows + 1 or col_ptr.shape[0] != columns.shape[0] + 1 \
            or penalty_scale.shape[0] not in (0, columns.shape[0]):
        raise ValueError(f"{name}: inconsistent shapes")
    S.n_rows, S.k, S.n_columns = n_rows, k, columns.shape[0]
    S.columns = &columns[0] if columns.shape[0] else NULL
    S.col_ptr = &col_ptr[0]
    S.col_rows = &col_rows[0] if col_rows.shape[0] else NULL
    S.col_vals = &col_vals[0] if col_vals.shape[0] else NULL
    S.pair_ptr = &pair_ptr[0]
    S.pair_other = &pair_other[0] if pair_other.shape[0] else NULL
    S.pair_index = &pair_index[0] if pair_index.shape[0] else NULL
    S.penalty_scale = &penalty_scale[0] if penalty_scale.shape[0] else NULL
    S.entry_pair = NULL
    S.own = &own[0] if n_rows else NULL
    S.U = &U[0, 0] if n_rows and k else NULL
    S.records = NULL
    O.n_rows = other_U.shape[1]
    O.U = &other_U[0, 0] if other_U.shape[1] and k else NULL
    O.J = &J[0, 0]
    pairs.yhat = &yhat[0] if yhat.shape[0] else NULL
    pairs.weight = &weight[0] if weight.shape[0] else NULL
    pairs.n = yhat.shape[0]
    pairs.own_term = NULL
    pairs.shift = NULL
    pairs.own_col = NULL
    pairs.own_val = NULL


def side_sweep(side, other, double[::1] yhat, const double[::1] weight,
               floating[::1] w, floating[:, ::1] P, settings, own_terms=None,
               bint factors=True):
    """One sweep of coordinate descent over the coordinates of one side (its linear
    weights when ``settings.fit_linear``, then, with ``factors``, its factors,
    component by component), the other side fixed.

    ``side`` holds the side's columns (``columns``, ``col_ptr``, ``col_rows``,
    ``col_vals``, and ``penalty_scale``, each column's factor of the penalties alpha
    and beta, or an empty array: 1), its observed pairs (``pair_ptr``, ``pair_other``, ``pair_index`` or
    an empty array) and its caches ``own`` (n_rows,) and ``U`` (k, n_rows), which the
    sweep keeps up to date; ``other`` the other side's ``U`` and its Gramian ``J`` in this
    side's slot order; ``yhat`` the observed pairs' predictions (kept up to date),
    ``weight`` their weights.  ``settings``: alpha0, alpha, beta, n, fit_linear,
    threads, limit.  ``own_terms`` (None: no pair has one) holds the observed pairs' terms of
    their items' own columns: ``term`` (kept up to date), ``column`` (-1: none) and
    ``value`` per pair; the query side's ``entry_pair`` then maps each of its column
    entries to the pair whose own column it is (-1: none), the item side's is empty.
    Returns the number of coordinate steps taken.
    """
    cdef const int64_t[::1] entry_pair = side.entry_pair
    cdef double[::1] own_term, shift
    cdef const int64_t[::1] own_col
    cdef const double[::1] own_val
    cdef Py_ssize_t k = P.shape[1]
    cdef Side S
    cdef Other O
    cdef Pairs pairs
    cdef Settings st
    _bind(side, other, yhat, weight, k, &S, &O, &pairs, "side_sweep")
    records = np.zeros((max(S.n_rows, 1), REC))
    cdef double[:, ::1] rec = records
    S.records = &rec[0, 0]
    if own_terms is not None and yhat.shape[0]:
        own_term, own_col, own_val = own_terms.term, own_terms.column, own_terms.value
        if own_term.shape[0] != yhat.shape[0] or own_col.shape[0] != yhat.shape[0] or \
                own_val.shape[0] != yhat.shape[0]:
            raise ValueError("side_sweep: inconsistent shapes")
        pairs.own_term = &own_term[0]
        pairs.own_col = &own_col[0]
        pairs.own_val = &own_val[0]
        if entry_pair.shape[0]:
            if entry_pair.shape[0] != S.col_ptr[S.n_columns]:
                raise ValueError("side_sweep: inconsistent shapes")
            S.entry_pair = &entry_pair[0]
        else:
            shift = np.zeros(yhat.shape[0])
            pairs.shift = &shift[0]
    alpha0, alpha, beta, n, fit_linear, threads, limit = settings
    st.alpha0, st.alpha, st.beta, st.n = alpha0, alpha, beta, n
    st.threads, st.limit = max(int(threads), 1), limit
    cdef bint linear = fit_linear
    with nogil:
        steps = _sweep(&S, &O, &pairs, &st, &w[0], &P[0, 0], linear, factors)
    return steps


# ---- a column's k factors at once: sides of one nonzero per row (ids) -----------------

cdef inline void _add_scaled(double* a, const double* b, double c,
                             Py_ssize_t n) noexcept nogil:
    """a[:n] += c b[:n] (a row of a curvature's lower triangle)."""
    cdef Py_ssize_t t
    for t in range(n):
        a[t] += c * b[t]


cdef bint _cholesky_solve(double* H, double* b, Py_ssize_t k) noexcept nogil:
    """b <- H^-1 b for a symmetric positive definite H (k x k, its upper triangle read,
    and overwritten by U, H = U^T U: the loops run along rows, which vectorise); False,
    b unchanged, when H is not positive definite."""
    cdef Py_ssize_t i, j, t
    cdef double d, c
    for j in range(k):
        d = H[j * k + j]
        if not d > 0:  # (NaN included)
            return False
        d = sqrt(d)
        H[j * k + j] = d
        for t in range(j + 1, k):
            H[j * k + t] /= d
        for i in range(j + 1, k):
            _add_scaled(H + i * k + i, H + j * k + i, -H[j * k + i], k - i)
    for i in range(k):  # U^T z = b
        b[i] /= H[i * k + i]
        _add_scaled(b + i + 1, H + i * k + i + 1, -b[i], k - i - 1)
    for i in range(k - 1, -1, -1):  # U x = z
        d = b[i]
        for t in range(i + 1, k):
            d -= H[i * k + t] * b[t]
        b[i] = d / H[i * k + i]
    return True


cdef void _column_block(Side* S, const Other* O, Pairs* pairs, const Settings* st,
                        const double* other_rows, floating* P, Py_ssize_t c,
                        double* H, double* g) noexcept nogil:
    """The step of column c's k factors to the exact minimiser of the objective along
    them (quadratic: iALS's least-squares update of a user's or an item's factors), on
    a side whose rows hold one nonzero each: a row's factor sums are x p_c, its own
    term does not depend on them, and no other column's step reads its rows.
    ``other_rows``: the other side's factor sums row by row (n_other, k); ``H`` and
    ``g``: scratch of k x k and 2 k values."""
    cdef Py_ssize_t k = S.k, F = S.k + 2, n = S.n_rows, j = S.columns[c], z, r, p, q, s, t
    cdef double x, xx = 0, wt, cw, e, dy, reg = st.beta
    cdef double* delta = g + k
    cdef const double* v
    cdef floating* row = P + j * k
    cdef floating moved
    for s in range(k * k):
        H[s] = 0
    for s in range(k):
        g[s] = 0
    # Curvature and gradient summed over the column's rows: the implicit term's
    # alpha0 x^2 J_uu and alpha0 x (J phi_r)_u, each observed pair's (w - alpha0) x^2
    # v v^T and x e v (e: the derivative of its observed term).
    for z in range(S.col_ptr[c], S.col_ptr[c + 1]):
        r = S.col_rows[z]
        x = S.col_vals[z]
        xx += x * x
        for s in range(k):
            g[s] += st.alpha0 * x * _slot_product(O.J + (2 + s) * F, S.own[r], S.U, n, r,
                                                  k)
        for p in range(S.pair_ptr[r], S.pair_ptr[r + 1]):
            q = S.pair_index[p] if S.pair_index != NULL else p
            wt = pairs.weight[q]
            cw = wt - st.alpha0
            e = x * (cw * pairs.yhat[q] - wt)
            v = other_rows + S.pair_other[p] * k
            for s in range(k):  # (the upper triangle)
                g[s] += e * v[s]
                _add_scaled(H + s * k + s, v + s, x * x * cw * v[s], k - s)
    if S.penalty_scale != NULL:
        reg *= S.penalty_scale[c]
    for s in range(k):
        for t in range(s, k):
            H[s * k + t] = (H[s * k + t] + st.alpha0 * xx * O.J[(2 + s) * F + 2 + t]) / st.n
        H[s * k + s] += reg
        delta[s] = -(g[s] / st.n + reg * row[s])
    if not _cholesky_solve(H, delta, k):
        return  # (no curvature: no penalty and no row; the factors stay)
    for s in range(k):
        moved = <floating> (row[s] + delta[s])  # (in the parameters' precision)
        delta[s] = moved - row[s]
        row[s] = moved
    for z in range(S.col_ptr[c], S.col_ptr[c + 1]):
        r = S.col_rows[z]
        x = S.col_vals[z]
        for s in range(k):
            S.U[s * n + r] += x * delta[s]
        for p in range(S.pair_ptr[r], S.pair_ptr[r + 1]):
            q = S.pair_index[p] if S.pair_index != NULL else p
            v = other_rows + S.pair_other[p] * k
            dy = 0
            for s in range(k):
                dy += delta[s] * v[s]
            pairs.yhat[q] += x * dy


def block_sweep(side, other, double[::1] yhat, const double[::1] weight,
                floating[:, ::1] P, settings):
    """One sweep of exact steps of each column's k factors at once (_column_block) over
    a side whose rows hold at most one nonzero each (ids), the other side fixed; the
    columns share no row, so ``settings.threads`` threads take them in parallel, and
    the result does not depend on their number.  ``side``, ``other``, ``yhat``,
    ``weight`` and ``settings`` as in :func:`side_sweep` (own columns excluded; the
    linear weights are not stepped: :func:`side_sweep` with ``factors=False``).
    Returns the steps taken, k per column."""
    cdef const double[:, ::1] other_rows = np.ascontiguousarray(np.asarray(other.U).T)
    cdef Py_ssize_t k = P.shape[1], c
    cdef int threads
    cdef const double* rows_ptr
    cdef Side S
    cdef Other O
    cdef Pairs pairs
    cdef Settings st
    _bind(side, other, yhat, weight, k, &S, &O, &pairs, "block_sweep")
    if np.any(np.asarray(side.col_rows) >= S.n_rows):
        raise ValueError("block_sweep: inconsistent shapes")
    if not side.one_hot():
        raise ValueError("block_sweep: a row holds several of the side's columns")
    alpha0, alpha, beta, n, fit_linear, n_threads, limit = settings
    threads = max(int(n_threads), 1)
    scratch = np.zeros((threads, k * k + 2 * k))
    cdef double[:, ::1] work = scratch
    st.alpha0, st.alpha, st.beta, st.n = alpha0, alpha, beta, n
    st.threads, st.limit = threads, -1
    if k == 0 or S.n_columns == 0:
        return 0
    rows_ptr = &other_rows[0, 0] if other_rows.shape[0] else NULL
    with nogil, parallel(num_threads=threads):
        for c in prange(S.n_columns, schedule="guided"):
            _column_block(&S, &O, &pairs, &st, rows_ptr, &P[0, 0], c,
                          &work[threadid(), 0], &work[threadid(), k * k])
    return S.n_columns * k


def side_caches(const int64_t[::1] indptr, const int64_t[::1] indices,
                const double[::1] data, const floating[::1] w, const floating[:, ::1] P,
                double[::1] own, double[:, ::1] U, int threads):
    """The own terms a_r (``own``) and factor sums (``U``, (k, n_rows)) of a side's rows
    (CSR) under the parameters w and P (degree 2)."""
    cdef Py_ssize_t n = own.shape[0], k = P.shape[1], r, z, s, j
    cdef double a, u, sq, x, q
    for r in prange(n, nogil=True, num_threads=max(threads, 1), schedule="static"):
        a = 0
        for z in range(indptr[r], indptr[r + 1]):
            a = a + data[z] * w[indices[z]]
        for s in range(k):
            u = 0
            sq = 0
            for z in range(indptr[r], indptr[r + 1]):
                q = data[z] * P[indices[z], s]
                u = u + q
                sq = sq + q * q
            U[s, r] = u
            a = a + 0.5 * (u * u - sq)
        own[r] = a


def pair_predictions(const int64_t[::1] pair_ptr, const int64_t[::1] pair_other,
                     const double[::1] own, const double[:, ::1] U,
                     const double[::1] other_own, const double[:, ::1] other_rows,
                     double[::1] yhat, int threads):
    """The observed pairs' predictions a_c + b_i + <u_c, v_i>, pairs grouped by the rows
    of the first side (``U`` (k, n_rows)); ``other_rows`` holds the other side's factor
    sums row by row (n_other, k)."""
    cdef Py_ssize_t n = own.shape[0], k = U.shape[0], r, p, s, o
    cdef double y
    for r in prange(n, nogil=True, num_threads=max(threads, 1), schedule="static"):
        for p in range(pair_ptr[r], pair_ptr[r + 1]):
            o = pair_other[p]
            y = own[r] + other_own[o]
            for s in range(k):
                y = y + U[s, r] * other_rows[o, s]
            yhat[p] = y


def gramian(const double[::1] own, const double[:, ::1] U, double[:, ::1] G):
    """G = sum_r phi_r phi_r^T with phi_r = [own_r, 1, U[:, r]] (F = k + 2)."""
    cdef Py_ssize_t n = own.shape[0], k = U.shape[0], F = k + 2, r, f, g
    cdef double* phi = <double*> malloc(F * sizeof(double))
    if phi == NULL:
        raise MemoryError()
    G[:, :] = 0
    try:
        with nogil:
            for r in range(n):
                phi[0] = own[r]
                phi[1] = 1
                for f in range(k):
                    phi[2 + f] = U[f, r]
                for f in range(F):
                    for g in range(f, F):
                        G[f, g] += phi[f] * phi[g]
            for f in range(F):
                for g in range(f):
                    G[f, g] = G[g, f]
    finally:
        free(phi)
