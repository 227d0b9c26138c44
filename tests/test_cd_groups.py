"""Coordinate descent over runs of row-disjoint columns (``polylite._engine._cd.column_groups``).

Within a group (a run of consecutive columns) no two columns share a row, so CD may take
their steps together (two passes over the group's entries in row order) and, when
consecutive groups have an entry in every row, fuse the update pass of one with the
gradient pass of the next.  These tests check the grouping itself, and that a grouped epoch
equals plain cyclic CD, one column at a time in column order, without any fused pass.
"""
import numpy as np
import pytest
import scipy.sparse as sp

from _reference import run_cd_epoch
from polylite import kernels
from polylite._engine import _losses
from polylite._engine import _cd, solvers as _solvers
from polylite._engine.cd_data import ColumnGroups


def _fields_matrix(n=120, seed=0, dtype=np.float64, index_dtype=np.int32):
    """Rows with two complete one-hot fields, one with missing values, two dense numeric
    columns, a few sparse ones and two empty ones, the fields in shuffled order (each
    field's columns contiguous), an empty column inside one of them."""
    rng = np.random.RandomState(seed)
    blocks = []
    for levels, missing in ((10, 0.0), (8, 0.0), (5, 0.4)):
        level = rng.randint(levels, size=n)
        present = rng.rand(n) >= missing
        blocks.append(sp.csr_matrix((np.ones(present.sum()), (np.flatnonzero(present),
                                                              level[present])),
                                    shape=(n, levels)))
    blocks.append(sp.csr_matrix(rng.randn(n, 2)))
    blocks.append(sp.random(n, 3, density=0.3, random_state=rng, format="csr"))
    blocks.append(sp.csr_matrix((n, 1)))  # a feature no row shows
    blocks = [blocks[i] for i in rng.permutation(len(blocks))]
    blocks.insert(1, sp.csr_matrix((n, 1)))  # another, between two fields
    X = sp.hstack(blocks).tocsr().astype(dtype)
    X.sort_indices()
    X.indices = X.indices.astype(index_dtype)
    X.indptr = X.indptr.astype(index_dtype)
    return X, rng


def _unpack(groups):
    """(columns, rows of the entries, their columns, their values) of each group."""
    (group_ptr, columns_ptr, group_columns, row_ptr, rows, col_ptr, columns, val_ptr,
     values) = groups
    for g in range(len(group_ptr) - 1):
        count = group_ptr[g + 1] - group_ptr[g]
        cols = group_columns[columns_ptr[g]:columns_ptr[g + 1]]
        group_rows = rows[row_ptr[g]:row_ptr[g + 1]]
        if len(group_rows) < count:
            assert len(group_rows) == 0  # an entry in every row: 0..n-1, not stored
            group_rows = np.arange(count)
        entry_columns = columns[col_ptr[g]:col_ptr[g + 1]]
        if len(cols) == 1:
            assert len(entry_columns) == 0  # one column: not stored either
            entry_columns = np.full(count, cols[0])
        entry_values = values[val_ptr[g]:val_ptr[g + 1]]
        if len(entry_values) < count:
            assert len(entry_values) == 0 and len(cols) > 1  # ones: not stored
            entry_values = np.ones(count, dtype=values.dtype)
        yield cols, group_rows, entry_columns, entry_values


@pytest.mark.parametrize("disjoint", [True, False])
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_groups_partition_the_entries_into_row_disjoint_groups(disjoint, index_dtype):
    X, _ = _fields_matrix(index_dtype=index_dtype)
    groups = _cd.column_groups(X.data, X.indices, X.indptr, X.shape[1], disjoint)
    assert groups[2].dtype == groups[4].dtype == groups[6].dtype == index_dtype
    seen = set()
    listed = []
    for cols, rows, columns, values in _unpack(groups):
        assert np.all(np.diff(cols) > 0)
        assert np.all(np.isin(columns, cols))
        assert np.all(np.diff(rows) > 0)  # row order, and one entry per row at most
        if not disjoint:
            assert len(cols) == 1
        for i, j, v in zip(rows, columns, values):
            assert X[i, j] == v
            seen.add((i, j))
        listed.extend(cols)
    assert len(seen) == X.nnz
    assert sorted(listed) == list(range(X.shape[1]))


def test_groups_are_maximal_runs_of_row_disjoint_columns_in_column_order():
    X, _ = _fields_matrix()
    n, d = X.shape
    groups = list(_unpack(_cd.column_groups(X.data, X.indices, X.indptr, d, True)))
    seen = X.getnnz(axis=0) > 0
    rows_of = [set(X[:, j].nonzero()[0]) for j in range(d)]
    *runs, (empty, _, _, _) = groups
    np.testing.assert_array_equal(empty, np.flatnonzero(~seen))  # no entries: last
    previous = -1
    for cols, _, _, _ in runs:
        # Consecutive columns (those without entries skipped), each a new run only where
        # it shares a row with the run before.
        np.testing.assert_array_equal(cols, np.flatnonzero(seen)[
            np.searchsorted(np.flatnonzero(seen), cols[0]):][:len(cols)])
        assert cols[0] > previous
        previous = cols[-1]
    for (cols, _, _, _), (after, _, _, _) in zip(runs, runs[1:]):
        assert any(rows_of[after[0]] & rows_of[j] for j in cols)
    # So each one-hot field (contiguous columns) is one group, and each dense column a
    # group of its own.
    assert sum(len(cols) > 1 and len(rows) == n for cols, rows, _, _ in runs) == 2
    for j in np.flatnonzero(X.getnnz(axis=0) == n):
        assert any(list(cols) == [j] for cols, _, _, _ in runs)


def test_a_part_mask_restricts_the_groups_and_ends_runs_at_other_columns():
    """The direct columns of a relational input: the others get no group, and a run
    never reaches over them (they are updated in between)."""
    n = 50
    X = sp.csr_matrix((np.ones(2 * n), (np.repeat(np.arange(n), 2),
                                        np.tile([0, 3], n))), shape=(n, 5))
    part = np.array([True, True, False, True, True])
    groups = _cd.column_groups(X.data, X.indices, X.indptr, 5, True, part)
    assert [list(cols) for cols, *_ in _unpack(groups)] == [[0], [3], [1, 4]]
    # Without the mask, columns 0 and 3 share every row: two runs, then the empty ones.
    groups = _cd.column_groups(X.data, X.indices, X.indptr, 5, True)
    assert [list(cols) for cols, *_ in _unpack(groups)] == [[0], [3], [1, 2, 4]]


def _greedy_runs(X, part):
    """column_groups' runs by their definition: in column order, a marked column with
    entries joins the current run unless it shares a row with one of the run's columns
    or unmarked columns lie between them; -1: unmarked, -2: no entries."""
    rows_of = [set(X[:, j].nonzero()[0]) for j in range(X.shape[1])]
    group, run, taken, gap = [], -1, set(), False
    for j, rows in enumerate(rows_of):
        if not part[j]:
            group.append(-1)
            gap = True
        elif not rows:
            group.append(-2)
        else:
            if gap or run < 0 or rows & taken:
                run, taken, gap = run + 1, set(), False
            taken |= rows
            group.append(run)
    return np.array(group)


@pytest.mark.parametrize("seed", range(6))
def test_runs_match_their_definition_on_random_matrices(seed):
    """Random patterns of every density, with and without a mask, and with the indices
    of some rows out of order (the groups do not depend on it)."""
    rng = np.random.RandomState(seed)
    n, d = rng.randint(1, 40), rng.randint(1, 30)
    X = sp.random(n, d, density=rng.choice([0.02, 0.1, 0.4]), random_state=rng,
                  format="csr")
    X.data[rng.rand(X.nnz) < 0.5] = 1.0
    part = rng.rand(d) < (1.0 if seed % 2 else 0.8)
    shuffled = X.copy()
    for i in range(n):
        lo, hi = shuffled.indptr[i], shuffled.indptr[i + 1]
        order = lo + rng.permutation(hi - lo)
        shuffled.indices[lo:hi], shuffled.data[lo:hi] = X.indices[order], X.data[order]
    expected = _greedy_runs(X, part)
    for M in (X, shuffled):
        groups = _cd.column_groups(M.data, M.indices, M.indptr, d, True, part)
        group = np.full(d, -1)
        for g, (cols, rows, columns, values) in enumerate(_unpack(groups)):
            group[cols] = g
            for i, j, v in zip(rows, columns, values):
                assert X[i, j] == v
        runs = expected.max() + 1 if expected.size else 0
        np.testing.assert_array_equal(group[expected >= 0], expected[expected >= 0])
        # The marked columns without entries: one group, after the runs.
        np.testing.assert_array_equal(group[expected == -2], runs)


def _singleton_groups(X, order):
    """Groups of one column each, in ``order`` (the reference: plain cyclic CD)."""
    Xc = X.tocsc()
    Xc.sort_indices()
    parts = [slice(Xc.indptr[j], Xc.indptr[j + 1]) for j in order]
    idx = X.indices.dtype
    group_ptr = np.cumsum([0] + [p.stop - p.start for p in parts]).astype(np.intp)
    return ColumnGroups(
        group_ptr, np.arange(len(order) + 1, dtype=np.intp), np.asarray(order, dtype=idx),
        group_ptr,  # every group lists its rows
        np.concatenate([Xc.indices[p] for p in parts]).astype(idx),
        np.zeros(len(order) + 1, dtype=np.intp), np.zeros(0, dtype=idx),  # one column
        group_ptr, np.concatenate([Xc.data[p] for p in parts]))


def _epochs(X, y, sw, groups, *, degrees, kernel, n_dummy, loss, epochs, seed=0,
            n_threads=1, workspace=None, pass_seconds=None):
    rng = np.random.RandomState(seed)
    n, d = X.shape
    k = 3
    params = dict(intercept=np.array([0.1]), w=0.1 * rng.randn(d),
                  P=0.3 * rng.randn(len(degrees), d, k), gamma=0.3 * rng.randn(n_dummy, k))
    params = {name: a.astype(X.dtype) for name, a in params.items()}
    y_pred = kernels.predict(X.astype(np.float64), params["P"].astype(np.float64),
                             degrees=None if kernel == "all-subsets" else degrees,
                             kernel=kernel, intercept=float(params["intercept"][0]),
                             w=params["w"].astype(np.float64),
                             gamma=params["gamma"].astype(np.float64))
    for _ in range(epochs):
        run_cd_epoch(groups, X.data, X.indices, X.indptr, y, sw, params["intercept"],
                     params["w"], params["P"], np.asarray(degrees, np.intc),
                     params["gamma"], kernels.KERNELS[kernel], _losses.loss_code(loss),
                     0.01, 0.02, True, True, y_pred, n_threads=n_threads,
                     thread_min_entries=1,  # threads even on these few rows
                     workspace=workspace, pass_seconds=pass_seconds)
    return params, y_pred


@pytest.mark.parametrize("n_threads", [1, 3])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("loss", ["squared", "logistic", "squared_hinge"])
@pytest.mark.parametrize("variant", [((2,), "anova", 0), ((2, 3), "anova", 0),
                                     ((4,), "anova", 0), ((5,), "anova", 0),
                                     ((3,), "anova", 2), ((0,), "all-subsets", 0)],
                         ids=["m2", "m2-3", "m4", "m5", "m3-shared", "subsets"])
def test_grouped_epoch_equals_cyclic_cd_one_column_at_a_time(variant, loss, weighted,
                                                              dtype, n_threads):
    degrees, kernel, n_dummy = variant
    X, rng = _fields_matrix(dtype=dtype)
    n = X.shape[0]
    y = rng.randn(n) if loss == "squared" else rng.choice([-1.0, 1.0], size=n)
    sw = rng.uniform(0.2, 2.0, size=n) if weighted else np.ones(n)
    groups = _solvers.column_groups(X, kernel)
    order = np.concatenate([cols for cols, *_ in _unpack(groups)])
    # Column order, the columns without entries last (they commute with every other).
    seen = X.getnnz(axis=0) > 0
    np.testing.assert_array_equal(order, np.r_[np.flatnonzero(seen), np.flatnonzero(~seen)])
    got, got_pred = _epochs(X, y, sw / sw.sum(), groups, degrees=list(degrees),
                            kernel=kernel, n_dummy=n_dummy, loss=loss, epochs=3,
                            n_threads=n_threads)
    # The reference gets one more row, empty and of weight 0: it changes no sum, but no
    # column has an entry in every row any more, so no pass is fused.
    X_ref = sp.vstack([X, sp.csr_matrix((1, X.shape[1]), dtype=dtype)]).tocsr()
    X_ref.indices = X_ref.indices.astype(X.indices.dtype)
    X_ref.indptr = X_ref.indptr.astype(X.indptr.dtype)
    sw_ref = np.append(sw, 0.0)
    want, want_pred = _epochs(X_ref, np.append(y, 1.0), sw_ref / sw_ref.sum(),
                              _singleton_groups(X_ref, order), degrees=list(degrees),
                              kernel=kernel, n_dummy=n_dummy, loss=loss, epochs=3)
    rtol = 1e-10 if dtype == np.float64 else 1e-4
    for name in got:
        np.testing.assert_allclose(got[name], want[name], rtol=rtol, atol=rtol,
                                   err_msg=name)
    np.testing.assert_allclose(got_pred, want_pred[:n], rtol=rtol, atol=rtol)


@pytest.mark.parametrize("n_threads", [1, 2])
def test_workspace_kept_between_epochs_changes_nothing(n_threads):
    """The work arrays a fit keeps from one epoch to the next (``workspace``) give the
    epochs of fresh ones, bit for bit, and are reused by a new fit, which reads nothing
    the last one left in them."""
    X, rng = _fields_matrix()
    n = X.shape[0]
    y = rng.choice([-1.0, 1.0], size=n)
    sw = rng.uniform(0.2, 2.0, size=n)
    groups = _solvers.column_groups(X, "anova")
    setup = dict(degrees=[2, 3], kernel="anova", n_dummy=0, loss="logistic", epochs=3,
                 n_threads=n_threads)
    want, want_pred = _epochs(X, y, sw / sw.sum(), groups, **setup)
    workspace = {}
    for repeat in range(2):
        got, got_pred = _epochs(X, y, sw / sw.sum(), groups, workspace=workspace, **setup)
        for name in want:
            np.testing.assert_array_equal(got[name], want[name], err_msg=name)
        np.testing.assert_array_equal(got_pred, want_pred)
        if repeat == 0:
            arrays = dict(workspace)
            for array in arrays.values():
                array.fill(np.nan)  # nothing may read what the last fit left there
    assert sorted(arrays) == ["factors", "partial", "private", "scratch", "state",
                              "variance_change", "work"]
    assert all(workspace[name] is arrays[name] for name in arrays)


@pytest.mark.parametrize("n_threads", [1, 2])
@pytest.mark.parametrize("variant", [((2, 3), 0), ((3,), 2)], ids=["m2-3", "m3-shared"])
def test_pass_seconds_time_each_kind_of_pass_and_change_nothing(variant, n_threads):
    """cd_epoch(pass_seconds=...) adds the seconds of each kind of pass, per part of the
    model, within the epoch's own time, and the epoch is bit for bit the one without."""
    import time
    degrees, n_dummy = variant
    X, rng = _fields_matrix(n=3000)
    n = X.shape[0]
    y = rng.randn(n)
    groups = _solvers.column_groups(X, "anova")
    setup = dict(degrees=list(degrees), kernel="anova", n_dummy=n_dummy, loss="squared",
                 epochs=2, n_threads=n_threads)
    want, want_pred = _epochs(X, y, np.full(n, 1 / n), groups, **setup)
    seconds = np.zeros((len(degrees) + 1, len(_cd.PASS_KINDS)))
    start = time.perf_counter()
    got, got_pred = _epochs(X, y, np.full(n, 1 / n), groups, pass_seconds=seconds,
                            **setup)
    elapsed = time.perf_counter() - start
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)
    np.testing.assert_array_equal(got_pred, want_pred)
    assert np.all(seconds >= 0) and seconds.sum() <= elapsed
    kinds = {kind: seconds[:, c] for c, kind in enumerate(_cd.PASS_KINDS)}
    # The fields matrix has consecutive groups with an entry in every row (fused), and
    # others without (gradients and updates alone); row 0 is the linear weights' and the
    # records', the others the blocks'.
    for kind in ("fused", "gradients", "updates", "columns"):
        assert np.all(kinds[kind] > 0), kind
    assert kinds["records"][0] > 0 and np.all(kinds["fill"][1:] > 0)
    assert kinds["fill"][0] == 0
    with pytest.raises(ValueError, match="pass_seconds must have shape"):
        _epochs(X, y, np.full(n, 1 / n), groups, pass_seconds=np.zeros((1, 2)), **setup)


def test_cd_epoch_rejects_groups_of_another_matrix():
    X, rng = _fields_matrix()
    other = X[:, :-1].tocsr()
    groups = _solvers.column_groups(other, "anova")
    n, d = X.shape
    with pytest.raises(ValueError, match="shapes disagree"):
        run_cd_epoch(groups, X.data, X.indices, X.indptr, rng.randn(n), np.full(n, 1 / n),
                     np.zeros(1), np.zeros(d), np.zeros((1, d, 2)), np.array([2], np.intc),
                     np.zeros((0, 2)), kernels.KERNELS["anova"], 0, 0.0, 0.0, True, True,
                     np.zeros(n))


def test_polynomial_kernel_needs_groups_of_one_column():
    X, rng = _fields_matrix()
    n, d = X.shape
    groups = _solvers.column_groups(X, "anova")  # several columns per group
    with pytest.raises(ValueError, match="groups of one column"):
        run_cd_epoch(groups, X.data, X.indices, X.indptr, rng.randn(n), np.full(n, 1 / n),
                     np.zeros(1), np.zeros(d), np.zeros((1, d, 2)), np.array([2], np.intc),
                     np.zeros((0, 2)), kernels.KERNELS["polynomial"], 0, 0.0, 0.0, True,
                     True, np.zeros(n), np.ones(2), False)


def test_groups_with_an_entry_in_every_row_store_no_rows():
    X, _ = _fields_matrix()
    groups = _cd.column_groups(X.data, X.indices, X.indptr, X.shape[1], True)
    full = [len(rows) == X.shape[0] for _, rows, _, _ in _unpack(groups)]
    assert any(full) and not all(full)
    # Their rows (0..n-1) are not stored; the others' are.  Nor are the entries' columns
    # of a group of one column.
    group_ptr, columns_ptr, row_ptr, col_ptr = groups[0], groups[1], groups[3], groups[5]
    empty = np.diff(group_ptr) == 0
    np.testing.assert_array_equal(np.diff(row_ptr) == 0, np.array(full) | empty)
    np.testing.assert_array_equal(np.diff(col_ptr) == 0, (np.diff(columns_ptr) == 1) | empty)


def test_columns_without_entries_form_the_last_group():
    X, _ = _fields_matrix()
    empty = np.flatnonzero(X.getnnz(axis=0) == 0)
    assert len(empty) == 2 and empty[0] + 1 < empty[1]
    groups = _cd.column_groups(X.data, X.indices, X.indptr, X.shape[1], True)
    cols, rows, _, _ = list(_unpack(groups))[-1]
    assert len(rows) == 0
    np.testing.assert_array_equal(cols, empty)


def test_cd_moves_features_no_row_shows_to_zero():
    X, rng = _fields_matrix()
    empty = np.flatnonzero(X.getnnz(axis=0) == 0)
    n = X.shape[0]
    params, _ = _epochs(X, rng.randn(n), np.full(n, 1.0 / n),
                        _solvers.column_groups(X, "anova"), degrees=[2], kernel="anova",
                        n_dummy=0, loss="squared", epochs=1)
    assert np.all(params["w"][empty] == 0) and np.all(params["P"][:, empty] == 0)
    assert np.all(params["P"][:, X.getnnz(axis=0) > 0] != 0)


def test_cd_epoch_rejects_groups_that_omit_rows_they_need():
    X, rng = _fields_matrix()
    n, d = X.shape
    groups = list(_solvers.column_groups(X, "anova"))
    group_ptr = groups[0]
    partial = next(g for g in range(len(group_ptr) - 1)
                   if 0 < group_ptr[g + 1] - group_ptr[g] < n)
    groups[3] = groups[3].copy()
    groups[3][partial + 1:] -= groups[3][partial + 1] - groups[3][partial]  # drop its rows
    groups[4] = groups[4][:groups[3][-1]]
    with pytest.raises(ValueError, match="shapes disagree"):
        run_cd_epoch(ColumnGroups(*groups), X.data, X.indices, X.indptr, rng.randn(n),
                     np.full(n, 1 / n), np.zeros(1), np.zeros(d), np.zeros((1, d, 2)),
                     np.array([2], np.intc), np.zeros((0, 2)), kernels.KERNELS["anova"], 0,
                     0.0, 0.0, True, True, np.zeros(n))


@pytest.mark.parametrize("weighted", [False, True])
def test_threads_share_the_passes_of_wide_groups(weighted):
    """Many rows and a field of many levels: the loops over a group's columns (start,
    steps, the threads' sums added up) are shared too; the result agrees with one
    thread's to rounding, and is the same from one run to the next."""
    rng = np.random.RandomState(0)
    n, levels = 30000, 9000
    field = sp.csr_matrix((np.ones(n), (np.arange(n), rng.randint(levels, size=n))),
                          shape=(n, levels))
    X = sp.hstack([field, sp.csr_matrix(rng.randn(n, 2))]).tocsr()
    X.sort_indices()
    y = rng.randn(n)
    sw = rng.uniform(0.2, 2.0, size=n) if weighted else np.ones(n)
    groups = _solvers.column_groups(X, "anova")
    assert max(np.diff(groups[1])) >= 2 * 4096  # MIN_COLUMNS_PER_THREAD per thread
    runs = [_epochs(X, y, sw / sw.sum(), groups, degrees=[2, 3], kernel="anova",
                    n_dummy=0, loss="squared", epochs=2, n_threads=threads)
            for threads in (1, 2, 2)]
    (one, one_pred), (two, two_pred), (again, again_pred) = runs
    for name in one:
        np.testing.assert_allclose(two[name], one[name], rtol=1e-10, atol=1e-12,
                                   err_msg=name)
        np.testing.assert_array_equal(again[name], two[name])
    np.testing.assert_allclose(two_pred, one_pred, rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(again_pred, two_pred)


def test_cd_epoch_rejects_a_thread_count_below_one():
    X, rng = _fields_matrix()
    with pytest.raises(ValueError, match="n_threads must be at least 1"):
        _epochs(X, rng.randn(X.shape[0]), np.full(X.shape[0], 1 / X.shape[0]),
                _solvers.column_groups(X, "anova"), degrees=[2], kernel="anova",
                n_dummy=0, loss="squared", epochs=1, n_threads=0)


def _with_every_value_stored(groups):
    """The same groups, with the values of the groups of ones stored too."""
    values = np.concatenate([v for *_, v in _unpack(groups)])
    return groups._replace(val_ptr=groups.group_ptr.copy(), values=values)


def test_fields_of_ones_store_no_values():
    X, _ = _fields_matrix()
    groups = _cd.column_groups(X.data, X.indices, X.indptr, X.shape[1], True)
    group_ptr, columns_ptr, val_ptr = groups[0], groups[1], groups[7]
    stored = np.diff(val_ptr)
    assert stored.sum() == len(groups[8]) < X.nnz
    for g, (cols, _, _, values) in enumerate(_unpack(groups)):
        ones = len(cols) > 1 and np.all(values == 1)
        assert stored[g] == (0 if ones else group_ptr[g + 1] - group_ptr[g])
    assert any(stored == 0) and any(np.diff(group_ptr)[stored == 0] > 0)


@pytest.mark.parametrize("n_threads", [1, 2])
@pytest.mark.parametrize("variant", [((2,), "squared", False), ((2, 3), "squared", False),
                                     ((2, 3), "logistic", False), ((4,), "squared", False),
                                     ((2,), "squared", True)])
def test_loops_for_fields_of_ones_agree_with_those_that_read_values(variant, n_threads):
    degrees, loss, weighted = variant
    X, rng = _fields_matrix()
    n = X.shape[0]
    y = rng.randn(n) if loss == "squared" else rng.choice([-1.0, 1.0], size=n)
    sw = rng.uniform(0.2, 2.0, size=n) if weighted else np.ones(n)
    groups = _solvers.column_groups(X, "anova")
    runs = [_epochs(X, y, sw / sw.sum(), g, degrees=list(degrees), kernel="anova",
                    n_dummy=0, loss=loss, epochs=2, n_threads=n_threads)
            for g in (groups, _with_every_value_stored(groups))]
    (ones, ones_pred), (read, read_pred) = runs
    for name in ones:
        np.testing.assert_allclose(ones[name], read[name], rtol=1e-13, atol=1e-14,
                                   err_msg=name)
    np.testing.assert_allclose(ones_pred, read_pred, rtol=1e-13, atol=1e-14)


def test_cd_epoch_rejects_missing_values_or_supports_of_the_wrong_length():
    X, rng = _fields_matrix()
    n = X.shape[0]
    groups = _solvers.column_groups(X, "anova")
    single = np.flatnonzero(np.diff(groups[1]) == 1)[0]
    val_ptr = groups[7].copy()
    val_ptr[single + 1:] -= val_ptr[single + 1] - val_ptr[single]  # drop its values
    values = np.delete(groups[8], np.arange(groups[7][single], groups[7][single + 1]))
    for bad, extra in ((groups._replace(val_ptr=val_ptr, values=values), {}),
                       (groups, dict(support=np.ones(3)))):
        with pytest.raises(ValueError, match="shapes disagree"):
            run_cd_epoch(bad, X.data, X.indices, X.indptr, rng.randn(n),
                         np.full(n, 1 / n), np.zeros(1), np.zeros(X.shape[1]),
                         np.zeros((1, X.shape[1], 2)), np.array([2], np.intc),
                         np.zeros((0, 2)), 0, 0, 0.1, 0.1, True, True, np.zeros(n),
                         **extra)


def test_more_threads_than_rows_and_polynomial_networks_on_threads():
    """Threads without rows of their own do nothing; a polynomial network (one-column
    groups, its first caches and intercept on the threads) gives the same epoch to
    rounding on any number of threads."""
    X, rng = _fields_matrix(n=7)
    n, d = X.shape
    y = rng.randn(n)
    groups = _solvers.column_groups(X, "anova")
    one, one_pred = _epochs(X, y, np.full(n, 1 / n), groups, degrees=[2, 3],
                            kernel="anova", n_dummy=0, loss="squared", epochs=2)
    many, many_pred = _epochs(X, y, np.full(n, 1 / n), groups, degrees=[2, 3],
                              kernel="anova", n_dummy=0, loss="squared", epochs=2,
                              n_threads=12)
    for name in one:
        np.testing.assert_allclose(many[name], one[name], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(many_pred, one_pred, rtol=1e-12, atol=1e-14)

    X, rng = _fields_matrix(n=60)
    n, d = X.shape
    groups = _solvers.column_groups(X, "polynomial")
    runs = []
    for threads in (1, 3):
        P = 0.3 * np.random.RandomState(1).randn(1, d, 2)
        lam, gamma, w = np.ones(2), 0.3 * np.ones((1, 2)), np.zeros(d)
        y_pred = np.zeros(n)
        y_pred[:] = kernels.predict(X, P, degrees=[2], kernel="polynomial", w=w,
                                    gamma=gamma, lam=lam)
        for _ in range(2):
            run_cd_epoch(groups, X.data, X.indices, X.indptr, np.ones(n), np.full(n, 1 / n),
                         np.zeros(1), w, P, np.array([2], np.intc), gamma,
                         kernels.KERNELS["polynomial"], 0, 0.01, 0.01, True, True, y_pred,
                         lam, True, n_threads=threads, thread_min_entries=1)
        runs.append((P, lam, y_pred))
    for a, b in zip(*runs):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
