"""Solver drivers: one object per fitted output, advancing the model one epoch at a time.

Each driver updates the arrays of an :class:`polylite._base._OutputParams` in place and
knows the current predictions on the training rows, so the estimator's loop can compute the
objective, report progress, test convergence and stop early, whatever the solver.
L-BFGS is driven by SciPy's own loop instead (:func:`fit_lbfgs`).
"""
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import joblib
import numpy as np
import scipy.optimize
import scipy.sparse as sp
from threadpoolctl import threadpool_limits

from .. import kernels
from .._validation import MIN_ROWS_PER_THREAD, row_threads  # noqa: F401 (tests)
from . import _cd, _cd_whole, _losses, _sgd, dense
from .layouts import layout_of
from .problem import ADAGRAD, FTRL, SCHEDULES, Problem, Schedule
from .cd_data import CDData, Gradient, TableBlock

STOCHASTIC = ("sgd", "adagrad", "ftrl")
DEFAULT_ETA0 = {"sgd": 0.01, "adagrad": 0.1, "ftrl": 0.1}


def default_sgd_eta0(est, X, y, sw, loss_code, kernel, degrees, n_dummy):
    """The step size of plain SGD when ``eta0=None``: 0.01, or 2 / L where that is
    smaller, L bounding the curvature of the rows' weighted losses at the initial model
    (2 / L: the stability limit of a gradient step).

    As scikit-learn's SAG takes its step from the squared row norms (the Lipschitz
    constants of a linear model's row gradients), L is the largest over the rows ``x``
    (of squared norm r, plus one per dummy feature) of ``s (mu |dy|^2 + |loss'(y, c)| H)``:
    ``s`` the sample weight, ``mu`` the loss's smoothness, ``dy`` the gradient of the
    prediction at factors of typical size ``init_scale``, ``H`` a bound on its Hessian
    and ``c`` the constant the intercept fits first (the mean target, squared loss).
    The largest row, not the mean: a step is taken on each row alone, and with the
    rows' mean a polynomial network diverged from one random start in four on
    scikit-learn's small unscaled check data.  Rows of small norm (one-hot recommender
    data, standardised FM features) keep 0.01; rows of norm 100 (unscaled features) get
    steps that do not diverge.
    """
    r = _squared_row_norms(X)
    r_bar = r + n_dummy
    s2, k = float(est.init_scale) ** 2, int(est.n_components)
    grad = float(est.fit_intercept) + float(est.fit_linear) * r
    hess = np.zeros_like(r)
    name = dense.LOSS_NAMES[loss_code]
    center = (float(np.average(y, weights=sw))
              if name == "squared" and est.fit_intercept and sw.sum() > 0 else 0.0)
    with np.errstate(over="ignore"):
        for t in degrees:
            if kernel == "polynomial":  # lam (gamma + <p, x>)^t with lam = +-1
                grad = grad + k * (t * t * r_bar * (s2 * r_bar) ** (t - 1)
                                   + (s2 * r_bar) ** t)
                hess = np.maximum(hess, t * (t - 1) * r_bar * (s2 * r_bar) ** (t - 2))
            else:  # an ANOVA block of degree t (all-subsets: counted as degree 2)
                t = max(t, 2)
                grad = grad + k * r_bar * (s2 * r_bar) ** (t - 1)
                hess = np.maximum(hess, r_bar * (s2 * r_bar) ** (t - 2))
        slope = np.abs(_losses.loss_gradient(name, y, np.full_like(y, center)))
        curvature = float(_losses.smoothness(name) * np.max(sw * grad) +
                          np.max(slope, initial=0.0) * np.max(sw * hess))
    if not curvature > 2.0 / DEFAULT_ETA0["sgd"]:
        return DEFAULT_ETA0["sgd"]
    return max(2.0 / curvature, np.finfo(np.float64).tiny)


def _squared_row_norms(X):
    """||x_i||^2 of every row of ``X``, in any layout."""
    return layout_of(X).squared_row_norms(X)


def _degrees_array(degrees):
    return np.asarray(degrees, dtype=np.intc)


def output_threads(n_jobs, n_outputs):
    """(threads that fit outputs at once, jobs that share each output's rows) for
    ``n_jobs`` (as in scikit-learn) and ``n_outputs`` independent outputs: the outputs
    first, as they need no synchronisation; the jobs left over share the rows of each
    output's passes (see :func:`cd_threads`, :func:`polylite._validation.row_threads`)."""
    if n_jobs is None:
        return 1, None
    if n_jobs < 0:
        n_jobs = max(1, joblib.cpu_count() + 1 + n_jobs)
    workers = max(1, min(n_jobs, n_outputs))
    return workers, max(1, n_jobs // workers)


def map_outputs(fit_output, n_outputs, workers):
    """[fit_output(o) for o in range(n_outputs)], on ``workers`` threads (the solvers
    release the GIL in their passes); an exception of any output is raised."""
    if workers <= 1 or n_outputs <= 1:
        return [fit_output(o) for o in range(n_outputs)]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(fit_output, range(n_outputs)))


def column_groups(X, kernel, part=None):
    """The nonzeros of canonical CSR ``X`` regrouped for coordinate descent
    (:func:`polylite._engine._cd.column_groups`): runs of row-disjoint columns in column order,
    except for the polynomial kernel, whose coordinates take one column at a time;
    ``part`` restricts them to the columns it marks."""
    return _cd.column_groups(X.data, X.indices, X.indptr, X.shape[1],
                             kernel != "polynomial", part)


def cd_threads(n_jobs, n_rows, n_features=0, x_bytes=0):
    """Threads for the passes of coordinate descent: :func:`polylite._validation.row_threads`,
    fewer when the extra threads' scratch records would take more memory than X itself
    (``x_bytes``)."""
    threads = row_threads(n_jobs, n_rows)
    if n_features > 0:
        threads = min(threads,
                      1 + x_bytes // (_cd.SCRATCH_BYTES_PER_FEATURE * n_features))
    return int(max(1, threads))


def _csr_bytes(X):
    return X.data.nbytes + X.indices.nbytes + X.indptr.nbytes


def cd_data(X, sw, kernel, n_jobs):
    """:class:`polylite._engine.cd_data.CDData` of checked rows ``X`` (any layout:
    its direct rows and relation blocks, :meth:`Layout.cd_parts`) with sample weights
    ``sw``: what coordinate descent derives from the rows once per fit, for every
    output."""
    direct, blocks = layout_of(X).cd_parts(X)
    if not blocks:
        return CDData(direct, column_groups(direct, kernel),
                      *_cd.column_moments(direct.data, direct.indices, direct.indptr, sw,
                                          direct.shape[1]),
                      cd_threads(n_jobs, direct.shape[0], direct.shape[1],
                                 _csr_bytes(direct)))
    return _block_cd_data(direct, blocks, sw, kernel, n_jobs)


def _block_cd_data(direct, blocks, sw, kernel, n_jobs):
    """:func:`cd_data` of rows with relation blocks: the direct part's groups (its own
    columns, runs ending where a block's columns lie), and for each block its table with
    the model's column numbers, regrouped by runs, and where its columns come among the
    direct groups; each column's support sums the weights of the interactions of the
    table rows that hold it."""
    if kernel == "polynomial":
        raise ValueError("relational input is taken by factorization machines (anova and "
                         "all-subsets kernels); give a polynomial network X.to_csr()")
    n, d = direct.shape
    in_block = np.zeros(d, dtype=bool)
    for _, start, stop in blocks:
        in_block[start:stop] = True
    groups = column_groups(direct, kernel, ~in_block)
    support, fourth = _cd.column_moments(direct.data, direct.indices, direct.indptr, sw, d)
    # The first column of each direct group with entries (the last group may hold the
    # columns without any, whose steps commute with every other: it comes last).
    firsts = groups.group_columns[groups.columns_ptr[:-1]]
    with_entries = np.diff(groups.group_ptr) > 0
    tables = []
    x_bytes = _csr_bytes(direct)
    for block, start, stop in blocks:
        table = block.table
        indptr = table.indptr.astype(np.int64)
        indices = table.indices.astype(np.int64) + start
        data = table.data.astype(np.float64)
        table = sp.csr_matrix((data, indices, indptr), shape=(table.shape[0], d))
        table.indices, table.indptr = indices, indptr  # int64, as the table passes read
        mask = np.zeros(d, dtype=bool)
        mask[start:stop] = True
        table_groups = _cd.column_groups(data, indices, indptr, d, True, mask)
        position = int(np.count_nonzero(with_entries & (firsts < start)))
        row_weight = np.bincount(block.index, weights=sw, minlength=table.shape[0])
        support += _cd.column_moments(data, indices, indptr, row_weight, d)[0]
        row_count = np.bincount(block.index, minlength=table.shape[0]).astype(np.float64)
        tables.append(TableBlock(block.index.astype(np.int64), table, table_groups,
                                 start, stop, position, row_weight, row_count))
        x_bytes += data.nbytes + indices.nbytes + indptr.nbytes + 8 * n
    return CDData(direct, groups, support, fourth, cd_threads(n_jobs, n, d, x_bytes),
                  tuple(tables))


def problem_of(est, y, sw, loss_code, kernel, degrees):
    """The :class:`polylite._engine.problem.Problem` of an estimator's output: what every
    solver's passes take."""
    return Problem(y, sw, kernels.KERNELS[kernel], _degrees_array(degrees), loss_code,
                   float(est.alpha), float(est.beta), bool(est.fit_intercept),
                   bool(est.fit_linear), bool(est._fit_lam), *est._field_structure(),
                   row_penalty=bool(est._row_penalty))



class CoordinateDescent:
    """Cyclic coordinate descent (``polylite._engine._cd``); ``sw`` must sum to 1 and be the
    weights ``data`` (:func:`cd_data`) was made with."""

    def __init__(self, est, X, data, y, sw, params, loss_code, kernel, degrees):
        self.X, self.data, self.params = X, data, params
        self.problem = problem_of(est, y, sw, loss_code, kernel, degrees)
        self.y_pred = est._predict_output(X, params, kernel, degrees).astype(np.float64)
        self.workspace = {}  # cd_epoch's work arrays, kept from one epoch to the next

    def epoch(self):
        return _cd.cd_epoch(self.data, self.problem, self.params, self.y_pred,
                            workspace=self.workspace)

    def predictions(self):
        return self.y_pred

    def watched(self, y, sw):
        """(targets, predictions, weights summing to 1) of the rows whose objective the
        epoch loop watches: all of them (their predictions come with each epoch)."""
        return y, self.y_pred, sw


class _WholeSide:
    """One side of the whole-data loss (the queries or the items): its rows, its
    columns (CSC, in the order they step), its observed pairs grouped by row, and the
    caches ``own`` (the rows' own terms) and ``U`` (their factor sums, (k, n_rows))."""

    def __init__(self, rows, columns, pair_ptr, pair_other, pair_index, k):
        rows = sp.csr_matrix(rows, dtype=np.float64)
        rows.sum_duplicates()
        self.indptr = rows.indptr.astype(np.int64)
        self.indices = rows.indices.astype(np.int64)
        self.data = rows.data
        self.columns = np.asarray(columns, dtype=np.int64)
        by_column = rows[:, self.columns].tocsc()
        by_column.sort_indices()
        self.col_ptr = by_column.indptr.astype(np.int64)
        self.col_rows = by_column.indices.astype(np.int64)
        self.col_vals = by_column.data.astype(np.float64)
        self.pair_ptr, self.pair_other, self.pair_index = pair_ptr, pair_other, pair_index
        self.entry_pair = np.zeros(0, dtype=np.int64)
        self.exact = False  # its factors step by block_sweep (WholeDataDescent)
        self.penalty_scale = np.zeros(0)  # (empty: every column's factor is 1)
        self.own = np.zeros(rows.shape[0])
        self.U = np.zeros((k, rows.shape[0]))

    def one_hot(self):
        """Whether every row holds at most one of the side's columns."""
        return bool(np.all(np.bincount(self.col_rows, minlength=self.own.shape[0]) <= 1))


class _OwnTerms(NamedTuple):
    term: np.ndarray     # each pair's term of its item's own column (kept up to date)
    column: np.ndarray   # int64: that column, or -1 (none, or a pair of weight 0)
    value: np.ndarray    # its value in the pair's query


class _Fixed(NamedTuple):
    U: np.ndarray   # the fixed side's factor sums (k, n_rows)
    J: np.ndarray   # its Gramian in the stepping side's slot order


def _swap_slots(G):
    """A side's Gramian (slots [own, 1, u]) in the other side's order ([1, own, u])."""
    order = np.r_[1, 0, np.arange(2, G.shape[0])]
    return G[np.ix_(order, order)]


class WholeDataDescent:
    """Coordinate descent on the whole-data loss of implicit feedback
    (``polylite._engine._cd_whole``) for a degree-2 FM whose rows split into a query part
    and an item part: an epoch steps the query side's coordinates, then the item side's.

    ``queries`` and ``items`` are the two sides' rows (CSR, the model's columns);
    ``pair_query``, ``pair_item`` and ``pair_weight`` the observed pairs (distinct) and
    their weights; ``item_columns`` the columns of the item side (the others are the
    query side's); ``n`` the objective's divisor (the number of positives).  ``alpha0``
    weighs every unobserved pair; the penalties ``alpha`` and ``beta`` are per positive.

    ``own_columns`` (None: none) gives each item's own column among the query side's
    (-1: none), such as the item's column in a set of the user's rated items: an
    observed pair (weight > 0) is then scored without the interactions of its item's
    own column with the item's columns, x_c,o(i) <p_o(i), v_i>, as if the item were
    left out of the query's set.  The pairs that are not observed are scored in full,
    as the model predicts them (their own column, if any, is not in the query).

    ``frequency_exponent`` (nu) scales each column's penalties by (F_j / mean F)^nu,
    F_j = sum over its side's rows of x_rj^2 (the row's observed weight + alpha0 times
    the other side's rows): for ids, user u's n_u + alpha0 |I|, the frequency-scaled
    penalty of iALS++ (Rendle et al., RecSys 2022); the mean is over the columns that
    some row has.  0 (the default): every column's penalty is alpha and beta.
    ``sweeps``: sweeps over a side's coordinates in an epoch before the other side's
    turn (two bring each side nearer its exact minimum given the other, as an
    alternating-least-squares iteration does).
    ``exact_sides``: a side whose rows hold at most one nonzero each (ids) steps each
    column's k factors at once to their exact minimiser (``_cd_whole.block_sweep``,
    iALS's least-squares update), not one component after another; the other sides,
    and every side with ``own_columns``, step by coordinates.
    ``penalty_scale`` holds the factor of each of the model's columns (1 for a column no
    row has).
    """

    def __init__(self, queries, items, pair_query, pair_item, pair_weight, item_columns,
                 n, alpha0, alpha, beta, fit_linear, threads, k, own_columns=None,
                 frequency_exponent=0.0, sweeps=1, exact_sides=False):
        d = queries.shape[1]
        order = np.lexsort((pair_item, pair_query))
        pair_query, pair_item = pair_query[order], pair_item[order]
        self.pair_item = pair_item.astype(np.int64)
        self.weight = np.ascontiguousarray(pair_weight[order], dtype=np.float64)
        self.n_queries, self.n_items = queries.shape[0], items.shape[0]
        q_ptr = np.r_[0, np.cumsum(np.bincount(pair_query, minlength=self.n_queries))]
        by_item = np.argsort(pair_item, kind="stable")
        i_ptr = np.r_[0, np.cumsum(np.bincount(pair_item, minlength=self.n_items))]
        item_mask = np.zeros(d, dtype=bool)
        item_mask[np.asarray(item_columns, dtype=np.int64)] = True
        empty = np.zeros(0, dtype=np.int64)
        self.query = _WholeSide(queries, np.flatnonzero(~item_mask), q_ptr.astype(np.int64),
                                pair_item.astype(np.int64), empty, k)
        self.item = _WholeSide(items, np.flatnonzero(item_mask), i_ptr.astype(np.int64),
                               pair_query[by_item].astype(np.int64),
                               by_item.astype(np.int64), k)
        self.yhat = np.zeros(pair_query.shape[0])
        self.own = None
        if own_columns is not None:
            self.own = self._own_terms(np.asarray(own_columns, dtype=np.int64),
                                       pair_query, pair_item, ~item_mask)
        self.n, self.alpha0, self.k = float(n), float(alpha0), k
        self.sweeps = int(sweeps)
        self.penalty_scale = self._penalty_scales(d, float(frequency_exponent))
        self.settings = (float(alpha0), float(alpha), float(beta), float(n),
                         bool(fit_linear), int(threads))
        self.G_query = np.zeros((k + 2, k + 2))
        self.G_item = np.zeros((k + 2, k + 2))
        for side in (self.query, self.item):
            side.exact = bool(exact_sides) and self.own is None and side.one_hot()

    def _penalty_scales(self, d, exponent):
        """Each column's factor of the penalties (see the class docstring), (d,); the
        sides keep theirs in their columns' order."""
        scale = np.ones(d)
        if exponent == 0:
            return scale
        frequency = np.zeros(d)
        for side, n_other in ((self.query, self.n_items), (self.item, self.n_queries)):
            observed = np.zeros(side.own.shape[0])
            rows = np.repeat(np.arange(side.own.shape[0]), np.diff(side.pair_ptr))
            index = side.pair_index if side.pair_index.size else np.arange(rows.size)
            np.add.at(observed, rows, self.weight[index])
            row_frequency = observed + self.alpha0 * n_other
            per_entry = side.col_vals ** 2 * row_frequency[side.col_rows]
            entry_column = np.repeat(np.arange(side.columns.size), np.diff(side.col_ptr))
            frequency[side.columns] = np.bincount(entry_column, per_entry,
                                                  side.columns.size)
        had = frequency > 0
        if had.any():
            scale[had] = (frequency[had] / frequency[had].mean()) ** exponent
        for side in (self.query, self.item):
            side.penalty_scale = np.ascontiguousarray(scale[side.columns])
        return scale

    def _own_terms(self, own_columns, pair_query, pair_item, query_mask):
        """The observed pairs' own columns and values, and the query side's map of its
        column entries to the pairs whose own column they are."""
        if own_columns.shape != (self.n_items,):
            raise ValueError(f"own_columns must give one column per item "
                             f"({self.n_items}), got shape {own_columns.shape}")
        valid = own_columns >= 0
        if np.any(own_columns[valid] >= query_mask.size) or \
                not np.all(query_mask[own_columns[valid]]):
            raise ValueError("own_columns must be columns of the query side (or -1)")
        if np.unique(own_columns[valid]).size < int(valid.sum()):
            raise ValueError("own_columns gives one column to several items")
        if pair_query.size == 0:
            return None
        side = self.query
        # The item whose own column each query-side column is (-1: none).
        item_of = np.full(query_mask.size, -1, dtype=np.int64)
        item_of[own_columns[valid]] = np.flatnonzero(valid)
        entry_rows = side.col_rows
        entry_items = item_of[np.repeat(side.columns, np.diff(side.col_ptr))]
        # The pairs are sorted by (query, item): find each entry's (row, item) pair.
        keys = pair_query * self.n_items + pair_item
        wanted = entry_rows * self.n_items + entry_items
        at = np.minimum(np.searchsorted(keys, wanted), keys.size - 1)
        found = (entry_items >= 0) & (keys[at] == wanted) & (self.weight[at] > 0)
        side.entry_pair = np.where(found, at, -1).astype(np.int64)
        column = np.full(keys.size, -1, dtype=np.int64)
        value = np.zeros(keys.size)
        column[at[found]] = np.repeat(side.columns, np.diff(side.col_ptr))[found]
        value[at[found]] = side.col_vals[found]
        return _OwnTerms(np.zeros(keys.size), column, value)

    def refresh(self, w, P):
        """The caches, the observed pairs' predictions and the Gramians from w and P
        (so that rounding never accumulates from one epoch to the next)."""
        threads = self.settings[-1]
        for side in (self.query, self.item):
            _cd_whole.side_caches(side.indptr, side.indices, side.data, w, P, side.own,
                                  side.U, threads)
        q, i = self.query, self.item
        _cd_whole.pair_predictions(q.pair_ptr, q.pair_other, q.own, q.U, i.own,
                                   np.ascontiguousarray(i.U.T), self.yhat, threads)
        _cd_whole.gramian(q.own, q.U, self.G_query)
        _cd_whole.gramian(i.own, i.U, self.G_item)
        if self.own is not None:
            has = self.own.column >= 0
            pairs = np.flatnonzero(has)
            self.own.term[:] = 0
            self.own.term[pairs] = self.own.value[pairs] * np.einsum(
                "ps,sp->p", P[self.own.column[pairs]].astype(np.float64),
                i.U[:, self.pair_item[pairs]])

    def epoch(self, w, P, limit=-1):
        """One epoch (``sweeps`` sweeps of the query side, then as many of the item
        side) on the parameters w (d,) and P (d, k), in place; stops after ``limit``
        coordinate steps if >= 0 (tests; an exact side's sweep of its factors, k steps
        per column, runs whole once begun).  Returns the number of steps taken."""
        self.refresh(w, P)
        steps = 0
        for side, other, G_other in ((self.query, self.item, "G_item"),
                                     (self.item, self.query, "G_query")):
            fixed = _Fixed(other.U, np.ascontiguousarray(_swap_slots(getattr(self,
                                                                             G_other))))
            exact, linear = side.exact, self.settings[4]
            for _ in range(self.sweeps):
                left = -1 if limit < 0 else limit - steps
                if linear or not exact:  # (an exact side's coordinates: its w only)
                    steps += _cd_whole.side_sweep(side, fixed, self.yhat, self.weight, w,
                                                  P, self.settings + (left,), self.own,
                                                  factors=not exact)
                if exact and not 0 <= limit <= steps:
                    steps += _cd_whole.block_sweep(side, fixed, self.yhat, self.weight,
                                                   P, self.settings + (-1,))
                if 0 <= limit <= steps:
                    break
            _cd_whole.gramian(side.own, side.U,
                              self.G_query if side is self.query else self.G_item)
            if 0 <= limit <= steps:
                break
        return steps

    def implicit_sum(self):
        """sum over every (query, item) pair of the catalogue of the squared prediction,
        from the Gramians."""
        return float(np.sum(self.G_query * _swap_slots(self.G_item)))

    def data_term(self):
        """The loss's data term (without penalties) at the current caches:
        1/(2N) [sum_S w (y - 1)^2 + alpha0 sum_{not S} y^2]."""
        y, wt = self.yhat, self.weight
        scored = y - self.own.term if self.own is not None else y
        observed = float(np.sum(wt * (scored - 1) ** 2 - self.alpha0 * y * y))
        return (observed + self.alpha0 * self.implicit_sum()) / (2 * self.n)


# The stochastic solvers' objective after each pass (which tol and n_iter_no_change watch,
# and the divergence check) is measured on a fixed sample of the rows: this fraction of
# them, at least the minimum (all rows of smaller data).  On 10^6 rows a prediction pass
# over every row added 38% to an SGD epoch and 24% to an AdaGrad one
# (benchmarks/bench_sgd_watched.py).
WATCHED_FRACTION = 0.1
WATCHED_MIN_ROWS = 20_000


def watched_data(X):
    """(rows, their X) of the stochastic solvers' objective: a fixed sample of the rows,
    the same for every pass and every fit on as many rows (``slice(None)``: all rows; of
    a relational input always, whose predictions compute each table row once).  Every
    output of a fit shares it."""
    size = max(WATCHED_MIN_ROWS, int(np.ceil(WATCHED_FRACTION * X.shape[0])))
    return layout_of(X).watched(X, size)


# Rows of a mini-batch per thread below which it runs on one thread.  The threads of a
# pass in mini-batches meet at two barriers per mini-batch (gradients summed, step taken):
# at 256 rows (degree 2, k = 10, 5 nonzeros per row: about 60 us of work on a quiet core)
# a barrier costs a few percent; on a machine whose cores are busy with other work it
# can cost a scheduler time slice, and threads lose at any batch size
# (benchmarks/bench_threads.py --batch-sizes ... measures both).
MIN_BATCH_ROWS_PER_THREAD = 256


# Rows per thread below which a pass shared row by row (a field-aware model's, see
# stochastic_threads) runs on one thread: starting the threads costs about a row's work.
MIN_SHARED_ROWS_PER_THREAD = 1000


def stochastic_threads(n_jobs, batch_size, rows_shared=False, n_rows=0):
    """Threads of a stochastic pass over ``n_rows`` rows: those that share each mini-batch
    (``batch_size > 1``); one row per step, those that share the pass's rows and step
    without locks when ``rows_shared`` (a field-aware model's pass, as libffm's
    threads: ``polylite._engine._sgd``), else 1 (steps on one row are sequential)."""
    if batch_size == 1:
        return (row_threads(n_jobs, n_rows, MIN_SHARED_ROWS_PER_THREAD) if rows_shared
                else 1)
    return row_threads(n_jobs, batch_size, MIN_BATCH_ROWS_PER_THREAD)


class StochasticState:
    """What a stochastic solver carries from one pass to the next (and across partial_fit):
    the step count and, for AdaGrad, the accumulated squared gradients and the step at
    which each feature was last updated (empty arrays for SGD)."""

    def __init__(self, params, adagrad, initial_accumulator=0.0, ftrl=False):
        self.step = 0
        self.adagrad = adagrad
        self.ftrl = ftrl
        self.default_eta0 = None  # SGD's data-driven eta0, chosen at the first pass
        dtype = params.P.dtype
        sums = adagrad or ftrl  # FTRL's n: its sums of squared gradients, from 0

        def zeros(a):  # AdaGrad's sums start at ``initial_accumulator``
            return np.full(a.shape if sums else (0,) * a.ndim,
                           initial_accumulator if adagrad else 0.0, dtype)

        self.acc = {name: zeros(getattr(params, name))
                    for name in ("intercept", "w", "P", "gamma", "lam")}
        self.last_touch = np.zeros(params.w.shape[0] if sums else 0, np.int64)
        # FTRL's z of each parameter (lam: the field-weighted kernel's weights of the
        # pairs of fields; the other kernels' passes leave it alone).
        self.z = {name: np.zeros(getattr(params, name).shape if ftrl else (0,), dtype)
                  for name in ("intercept", "w", "P", "lam")}


def start_ftrl(state, params, schedule):
    """Centre FTRL-proximal's first proximal term at the present parameters: its z of
    every parameter p starts at ``-(beta / alpha) p`` instead of 0.

    FTRL's proximal terms ``sigma_s / 2 ||w - w_s||^2`` are centred at its iterates
    ``w_s``, the first, of weight ``beta / alpha``, at the starting point; McMahan et
    al. start at 0, where z = 0 is that term.  From a nonzero start (the initial
    factors, or the field-weighted model's weights of the pairs of fields at 1) z = 0
    would centre it at 0 instead, and the first step would set each parameter near 0
    (keeping about ``|g| / (beta + |g|)`` of it); with this z the first step moves it
    from where it is, by ``-alpha g / (beta + |g|)`` without penalties, as AdaGrad's.
    The penalties l1 and l2 stay centred at 0.  Zero parameters keep z = 0.
    """
    scale = schedule.ftrl_beta / schedule.eta0
    for name, z in state.z.items():
        p = getattr(params, name)
        if z.shape == p.shape:
            z[...] = -scale * p


_SOLVER_NAMES = {0: "sgd", 1: "sgd", ADAGRAD: "adagrad", FTRL: "ftrl"}


def _all_finite(a):
    """Whether every entry of ``a`` is finite, without an array of its size (the
    smallest and largest are NaN if any entry is, else infinite if one is)."""
    return a.size == 0 or bool(np.isfinite(a.min()) and np.isfinite(a.max()))


class StochasticGradient:
    """SGD or AdaGrad passes (``polylite._engine._sgd``); ``sw`` must have mean 1 (or be the raw
    weights of a ``partial_fit`` chunk)."""

    def __init__(self, est, X, y, sw, params, loss_code, kernel, degrees, rng, state,
                 n_jobs=None, watched=None):
        self.est, self.X, self.y, self.sw, self.params = est, X, y, sw, params
        self.loss_code, self.kernel, self.degrees = loss_code, kernel, degrees
        self.kernel_code = kernels.KERNELS[kernel]
        self.degrees_arr = _degrees_array(degrees)
        self.rng, self.state = rng, state
        self._chunk_buffers = {}  # a relational input's expanded chunks (_row_chunks)
        self.adagrad = state.adagrad
        self.schedule = (FTRL if state.ftrl else ADAGRAD if self.adagrad
                         else SCHEDULES[est.learning_rate])
        if est.eta0 is not None:
            self.eta0 = float(est.eta0)
        elif self.adagrad or state.ftrl:  # steps normalised coordinate by coordinate
            self.eta0 = DEFAULT_ETA0["ftrl" if state.ftrl else "adagrad"]
        else:
            if state.default_eta0 is None:
                state.default_eta0 = default_sgd_eta0(est, X, y, sw, loss_code, kernel,
                                                      degrees, est._structure()[2])
            self.eta0 = state.default_eta0
        if state.ftrl and state.step == 0 and est._ftrl_from_start:
            start_ftrl(state, params, Schedule(FTRL, self.eta0, 0.0, 1,
                                               *est._ftrl_penalties()))
        self._y_pred = None
        # Threads of a mini-batch: ``n_jobs``, or the estimator's (see output_threads).
        self.n_jobs = est._n_jobs if n_jobs is None else n_jobs
        # The rows of the objective after each pass (watched_data).
        self._watched = (slice(None), X) if watched is None else watched
        self._watched_targets = None  # (y, weights) of the watched rows, see watched()
        # Whether each pass checks the watched rows' predictions (see epoch); a caller
        # that reads no objective between passes checks them once at the end
        # (check_predictions).
        self.check_each_pass = True
        # A field-aware model's AdaGrad or SGD pass, one row per step: n_jobs threads
        # share its rows (stochastic_threads).
        self._rows_shared = kernel == "field-aware" and not state.ftrl

    def epoch(self):
        est, p, X, st = self.est, self.params, self.X, self.state
        n = X.shape[0]
        order = (self.rng.permutation(n) if est.shuffle else np.arange(n)).astype(np.intp)
        if (self.schedule not in (ADAGRAD, FTRL)
                and self.eta0 * max(est.alpha, est.beta) >= 1):
            raise FloatingPointError(
                f"eta0 * max(alpha, beta) = {self.eta0 * max(est.alpha, est.beta):g} >= 1: "
                f"the L2 decay would flip signs; use a smaller learning rate eta0")
        # The largest parameter change is only reported (verbose); measuring it costs a
        # copy of the model, so it is skipped otherwise.
        before = ({name: np.array(getattr(p, name)) for name in ("w", "P", "gamma")}
                  if est.verbose else None)
        finite = True
        schedule = Schedule(self.schedule, self.eta0, float(est.power_t),
                            int(est.batch_size), *est._ftrl_penalties())
        for rows, X_rows, y_rows, sw_rows in self._row_chunks(order):
            problem = problem_of(est, y_rows, sw_rows, self.loss_code, self.kernel,
                                 self.degrees)
            st.step, finite = _sgd.sgd_epoch(
                X_rows, problem, p, st, schedule, rows,
                n_threads=stochastic_threads(self.n_jobs, int(est.batch_size),
                                             self._rows_shared, rows.shape[0]))
            if not finite:
                break
        self._y_pred = None
        # The pass checks each row's prediction before its step, not after the last one:
        # finite but huge parameters can still overflow the predictions, checked on the
        # watched rows (which fit's objective reuses).
        if not (finite and all(_all_finite(getattr(p, name))
                               for name in ("intercept", "w", "P", "gamma", "lam"))):
            self._diverged()
        if self.check_each_pass:
            self.check_predictions()
        if before is None:
            return float("nan")
        return max(float(np.max(np.abs(getattr(p, name) - before[name]), initial=0.0))
                   for name in before)

    def check_predictions(self):
        """Raise FloatingPointError if a watched row's prediction is not finite (a pass
        checks each row's prediction before its step: this catches parameters that
        overflow a prediction after the last step)."""
        if not np.all(np.isfinite(self.predictions())):
            self._diverged()

    def _diverged(self):
        raise FloatingPointError(
            f"{_SOLVER_NAMES[self.schedule]} diverged: the model's parameters "
            f"or predictions became non-finite (eta0={self.eta0:g}); use a smaller "
            f"learning rate eta0, a larger beta, or scale the features")

    def _row_chunks(self, order):
        """(order, X, y, sw) of one pass, a chunk of rows at a time as the layout gives
        them (all at once, or a relational input's rows expanded a chunk at a time:
        the same steps as on the expanded matrix, the memory of a chunk).  The lazy L2
        scaling is settled at the end of each call, exactly."""
        for order_in_chunk, X_rows, rows in layout_of(self.X).row_chunks(
                self.X, order, int(self.est.batch_size), self._chunk_buffers):
            if rows is None:
                yield order_in_chunk, X_rows, self.y, self.sw
            else:
                yield (order_in_chunk, X_rows, np.ascontiguousarray(self.y[rows]),
                       np.ascontiguousarray(self.sw[rows]))

    def predictions(self):
        """The current predictions on the watched rows (computed once per pass)."""
        if self._y_pred is None:
            self._y_pred = self.est._predict_output(
                self._watched[1], self.params, self.kernel, self.degrees).astype(np.float64)
        return self._y_pred

    def watched(self, y, sw):
        """(targets, predictions, weights summing to 1) of the watched rows; ``y`` and
        ``sw`` are the same at every call of a fit, so their rows are taken once."""
        if self._watched_targets is None:
            rows = self._watched[0]
            weights = sw[rows]
            total = weights.sum()
            self._watched_targets = (y[rows], weights / total if total > 0
                                     else np.full_like(weights, 1 / weights.size))
        targets, weights = self._watched_targets
        return targets, self.predictions(), weights


def data_gradient(est, X, y, sw, params, loss_code, kernel, degrees, grads, n_jobs=None):
    """The data term of the objective, ``sum_i sw_i loss(y_i, y_hat_i)`` over the rows of
    ``X``, returned, and its gradient added into ``grads`` (float64 arrays shaped like the
    parameters, keyed intercept, w, P, gamma, lam): one Cython pass over the rows
    (``polylite._sgd.objective_gradient``, on ``n_jobs`` threads, by default the
    estimator's)."""
    n_threads = row_threads(est._n_jobs if n_jobs is None else n_jobs, X.shape[0])
    return _sgd.objective_gradient(X, problem_of(est, y, sw, loss_code, kernel, degrees),
                                   params, grads, n_threads)


def cd_data_gradient(est, X, data, problem, params, kernel, degrees, grads,
                     workspace=None):
    """:func:`data_gradient` from a gradient pass of coordinate descent
    (``polylite._cd.cd_epoch`` with ``gradient``) on ``data`` (:func:`cd_data` of X): on
    a relational input, each block column's gradient is a sum over table rows, so the
    pass costs the tables' nonzeros and one visit of each interaction per component.
    ``workspace`` keeps cd_epoch's work arrays from one call to the next."""
    y_pred = est._predict_output(X, params, kernel, degrees).astype(np.float64)
    value = _cd.weighted_loss(problem.y, y_pred, problem.sample_weight, problem.loss)
    # (cd_epoch zeroes them before the pass.)
    gradient = Gradient(*(np.empty(grads[name].shape) for name in
                          ("intercept", "w", "P", "gamma")))
    _cd.cd_epoch(data, problem, params, y_pred, gradient=gradient, workspace=workspace)
    for name in ("intercept", "w", "P", "gamma"):
        grads[name] += getattr(gradient, name)
    return value


def dense_rows(X, kernel, degrees):
    """Dense CSR ``X`` (``polylite.polynomial._base.is_dense``: more than half of the
    entries nonzero, so the copy takes at most 4/3 of the memory of X's CSR arrays in
    float64, twice in float32) as a float64 array for :func:`fit_lbfgs`'s BLAS path
    (:mod:`polylite.polynomial._dense`), or None for models that path does not cover."""
    if not dense.dense_gradient_available(kernel, degrees):
        return None
    return X.toarray().astype(np.float64, copy=False)


def fit_lbfgs(est, X, y, sw, params, loss_code, kernel, degrees, callback, data_term=None,
              n_jobs=None, X_dense=None, cd_data=None):
    """Minimise the full objective with SciPy's L-BFGS-B; returns the iterations run.

    Value and gradient of the data term come from :func:`data_gradient` on ``X`` (on
    ``n_jobs`` threads), from BLAS products on ``X_dense`` when given (:func:`dense_rows`
    of X), from coordinate descent's sums when ``cd_data`` is given
    (:func:`cd_data_gradient`; relational X, whose sums are over table rows), or from
    ``data_term(params, grads)`` when given (same contract; :mod:`polylite.dask` sums it
    over a cluster's row blocks, and passes None for X, y and sw).
    ``callback(objective)`` is called after each iteration with the parameters in place;
    returning True stops the optimiser.
    """
    names = ["P", "gamma"]
    if est.fit_intercept:
        names.insert(0, "intercept")
    if est.fit_linear:
        names.insert(1 if est.fit_intercept else 0, "w")
    if est._fit_lam:
        names.append("lam")
    arrays = {name: getattr(params, name) for name in names}
    sizes = [arrays[name].size for name in names]
    bounds = np.cumsum([0] + sizes)
    penalty = {"w": est.alpha, "P": est.beta, "gamma": est.beta, "lam": est.beta,
               "intercept": 0.0}
    if data_term is None and cd_data is not None:
        # The data term alone (the penalties are added below), and the pass's work
        # arrays kept from one evaluation to the next.
        problem = problem_of(est, y, sw, loss_code, kernel, degrees)._replace(alpha=0.0,
                                                                             beta=0.0)
        workspace = {}

        def data_term(params, grads):
            return cd_data_gradient(est, X, cd_data, problem, params, kernel, degrees,
                                    grads, workspace)
    elif data_term is None and X_dense is not None:
        def data_term(params, grads):
            return dense.dense_data_gradient(X_dense, y, sw, params, loss_code, kernel,
                                              degrees, bool(est.fit_linear), grads)
    elif data_term is None:
        def data_term(params, grads):
            return data_gradient(est, X, y, sw, params, loss_code, kernel, degrees, grads,
                                 n_jobs)

    def unpack(x):
        for name, lo, hi in zip(names, bounds[:-1], bounds[1:]):
            arrays[name][...] = x[lo:hi].reshape(arrays[name].shape)

    def pack(source):
        return np.concatenate([np.asarray(source[name], np.float64).ravel()
                               for name in names])

    def value_and_gradient(x):
        unpack(x)
        grads = {name: np.zeros(getattr(params, name).shape, np.float64)
                 for name in ("intercept", "w", "P", "gamma", "lam")}
        value = data_term(params, grads)
        for name in names:
            reg = penalty[name]
            if reg:
                a = np.asarray(arrays[name], np.float64)
                value += 0.5 * reg * float(np.sum(a * a))
                grads[name] += reg * a
        gradient = pack(grads)
        # L-BFGS-B neither stops on nor reports NaN: it would return the point as it is.
        if not (np.isfinite(value) and np.all(np.isfinite(gradient))):
            raise FloatingPointError(
                f"L-BFGS met a non-finite objective or gradient (objective {value:g}); "
                f"scale the features or increase beta")
        return value, gradient

    iterations = [0]

    def on_iteration(intermediate_result):
        iterations[0] += 1
        unpack(intermediate_result.x)
        if callback(float(intermediate_result.fun)):
            raise StopIteration

    # One BLAS thread: L-BFGS-B's small dense steps run many times slower with OpenBLAS's
    # thread pool (a known SciPy/OpenBLAS interaction), and so did the dense path's
    # products on a machine with busy cores; outputs fitted on threads of their own are
    # run under one such limit (see _fit_outputs), as each thread restoring the
    # limit it found would lift it under the others.
    with threadpool_limits(limits=1, user_api="blas"):
        result = scipy.optimize.minimize(
            value_and_gradient, pack(arrays), jac=True, method="L-BFGS-B",
            callback=on_iteration,
            options={"maxiter": est._max_iter, "ftol": float(est.tol), "gtol": 1e-10})
    if not np.all(np.isfinite(result.x)):
        raise FloatingPointError("L-BFGS produced non-finite parameters; scale the "
                                 "features or increase beta")
    unpack(result.x)
    return max(iterations[0], 1), result
