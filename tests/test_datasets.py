"""Data helpers: the synthetic recommender, MovieLens reader, chunked streaming."""
import os

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import dump_svmlight_file

from polylite import FactorizationMachineRegressor
from polylite.datasets import (iter_csr_chunks, iter_recommender_chunks,
                               iter_svmlight_chunks, load_movielens_100k,
                               make_recommender)


def test_make_recommender_shape_and_structure():
    X, y = make_recommender(500, n_users=20, n_items=10, n_numeric=2, random_state=0)
    assert X.shape == (500, 32) and y.shape == (500,)
    assert np.all(np.diff(X.indptr) == 4)
    # One user column and one item column per row, each a one.
    users = X[:, :20].toarray()
    items = X[:, 20:30].toarray()
    assert np.all(users.sum(1) == 1) and np.all(items.sum(1) == 1)
    X2, y2 = make_recommender(500, n_users=20, n_items=10, n_numeric=2, random_state=0)
    np.testing.assert_array_equal(y, y2)


@pytest.mark.parametrize("options", [{}, {"field_sizes": (3,)}, {"return_table": True},
                                     {"implicit": "both", "output": "relational"}])
def test_make_recommender_of_no_rows(options):
    X, y = make_recommender(0, 20, 20, 1, random_state=0, **options)
    assert y.shape == (0,)
    if not options.get("return_table"):
        assert X.shape[0] == 0


def test_make_recommender_dtypes():
    X, _ = make_recommender(100, 5, 5, dtype=np.float32, index_dtype=np.int64,
                            random_state=0)
    assert X.dtype == np.float32 and X.indices.dtype == np.int64


def test_movielens_100k(movielens_dir):
    X, y, X_test, y_test = load_movielens_100k(movielens_dir, "u1")
    assert X.shape == (80000, 943 + 1682) and X_test.shape == (20000, 943 + 1682)
    assert set(np.unique(y)) <= {1.0, 2.0, 3.0, 4.0, 5.0}
    assert np.all(np.diff(X.indptr) == 2)
    assert np.all(X[:, :943].sum(axis=1) == 1)


@pytest.mark.parametrize("zero_based", [True, False])
def test_svmlight_chunks_reassemble_the_file(tmp_path, zero_based):
    X, y = make_recommender(3000, 50, 30, random_state=0)
    path = tmp_path / "data.svm"
    dump_svmlight_file(X, y, str(path), zero_based=zero_based)
    parts = list(iter_svmlight_chunks(path, X.shape[1], chunk_bytes=7000))
    assert len(parts) > 5
    X_all = sp.vstack([a for a, _ in parts])
    y_all = np.concatenate([b for _, b in parts])
    np.testing.assert_allclose(X_all.toarray(), X.toarray(), rtol=1e-12)
    np.testing.assert_allclose(y_all, y, rtol=1e-12)


def test_streaming_partial_fit_equals_one_epoch(tmp_path):
    """partial_fit over svmlight chunks == one sgd epoch over the whole file, in order."""
    X, y = make_recommender(2000, 40, 30, random_state=1)
    path = tmp_path / "data.svm"
    dump_svmlight_file(X, y, str(path), zero_based=True)
    params = dict(n_components=4, solver="sgd", eta0=0.01, shuffle=False, random_state=0)
    streamed = FactorizationMachineRegressor(**params)
    for X_chunk, y_chunk in iter_svmlight_chunks(path, X.shape[1], chunk_bytes=9000):
        streamed.partial_fit(X_chunk, y_chunk)
    X_file = sp.vstack([a for a, _ in iter_svmlight_chunks(path, X.shape[1])])
    whole = FactorizationMachineRegressor(max_iter=1, tol=0, **params)
    with pytest.warns(Warning):
        whole.fit(X_file, y)
    np.testing.assert_allclose(streamed.P_, whole.P_, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(streamed.predict(X), whole.predict(X), rtol=1e-10)


def test_csr_chunks_of_a_memory_mapped_matrix(tmp_path):
    X, y = make_recommender(1000, 30, 20, random_state=2)
    arrays = {}
    for name in ("data", "indices", "indptr"):
        a = getattr(X, name)
        m = np.lib.format.open_memmap(tmp_path / f"{name}.npy", mode="w+", dtype=a.dtype,
                                      shape=a.shape)
        m[:] = a
        arrays[name] = m
    mapped = sp.csr_matrix((arrays["data"], arrays["indices"], arrays["indptr"]),
                           shape=X.shape, copy=False)
    parts = list(iter_csr_chunks(mapped, y, chunk_rows=300))
    assert [p[0].shape[0] for p in parts] == [300, 300, 300, 100]
    np.testing.assert_array_equal(sp.vstack([p[0] for p in parts]).toarray(), X.toarray())


def test_chunk_sizes_are_checked(tmp_path):
    with pytest.raises(ValueError, match="chunk_rows"):
        next(iter_csr_chunks(sp.csr_matrix((2, 2)), np.zeros(2), chunk_rows=0))
    path = tmp_path / "x.svm"
    path.write_text("1 1:1\n")
    with pytest.raises(ValueError, match="chunk_bytes"):
        next(iter_svmlight_chunks(path, 2, chunk_bytes=0))


def test_iter_recommender_chunks_do_not_depend_on_the_chunk_size():
    whole = list(iter_recommender_chunks(250_000, 250_000, 40, 30, random_state=1))
    parts = list(iter_recommender_chunks(250_000, 70_000, 40, 30, random_state=1))
    assert len(whole) == 1
    assert [X.shape[0] for X, _ in parts] == [70_000, 70_000, 70_000, 40_000]
    X = sp.vstack([X for X, _ in parts], format="csr")
    assert (X != whole[0][0]).nnz == 0
    np.testing.assert_array_equal(np.concatenate([y for _, y in parts]), whole[0][1])
    assert parts[1][0].indptr.dtype == np.int32 and parts[1][0].indptr[0] == 0
    # One planted model for every chunk: without noise, a (user, item) pair has one target
    # whichever chunk it is in.
    chunks = list(iter_recommender_chunks(20_000, 10_000, 5, 4, n_numeric=0, noise=0,
                                          random_state=2))
    targets = []
    for X, y in chunks:
        pair = X.indices.reshape(-1, 2) @ np.array([10, 1])  # user, item
        keys, first = np.unique(pair, return_index=True)
        assert keys.shape == (20,)
        np.testing.assert_allclose(y, y[first][np.searchsorted(keys, pair)])
        targets.append(y[first])
    np.testing.assert_allclose(targets[0], targets[1])
    with pytest.raises(ValueError, match="chunk_rows"):
        next(iter_recommender_chunks(10, 0))


def _memmap_csr(folder, X, y, mode):
    arrays = {}
    for name, a in (("data", X.data), ("indices", X.indices), ("indptr", X.indptr),
                    ("y", y)):
        path = folder / f"{name}.bin"
        a.tofile(path)
        arrays[name] = np.memmap(path, a.dtype, mode=mode)
    X_map = sp.csr_matrix((arrays["data"], arrays["indices"], arrays["indptr"]),
                          shape=X.shape, copy=False)
    return X_map, arrays["y"]


def _rss_file_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssFile:"):
                return int(line.split()[1])
    pytest.skip("no RssFile in /proc/self/status")


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="Linux /proc only")
def test_iter_csr_chunks_releases_the_pages_of_memory_mapped_blocks(tmp_path):
    X, y = make_recommender(400_000, 50, 30, random_state=0)  # 24 MB of X on disk
    X_map, y_map = _memmap_csr(tmp_path, X, y, "r")
    before = _rss_file_kib()
    for (chunk, target), start in zip(iter_csr_chunks(X_map, y_map, 50_000),
                                      range(0, X.shape[0], 50_000)):
        assert (chunk != X[start:start + 50_000]).nnz == 0
        np.testing.assert_array_equal(target, y[start:start + 50_000])
    # Without the release, every page read (about 30 MB) would stay resident.
    assert _rss_file_kib() - before < 10_000


def test_iter_csr_chunks_keeps_copy_on_write_changes(tmp_path):
    X, y = make_recommender(100_000, 50, 30, random_state=0)
    X_map, y_map = _memmap_csr(tmp_path, X, y, "c")
    X_map.data[:] = 2.0  # changes only in this process's private copy
    y_map[:] = -1.0
    for _ in range(2):  # the second pass reads the pages again
        for chunk, target in iter_csr_chunks(X_map, y_map, 30_000):
            assert np.all(chunk.data == 2.0) and np.all(target == -1.0)
