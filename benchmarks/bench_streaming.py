"""Data larger than memory: AdaGrad by ``partial_fit`` over chunks read from disk.

Data: recommender-shaped rows (``polylite.datasets.iter_recommender_chunks``: one-hot user
(50,000 levels) and item (30,000 levels) fields with power-law popularity, 3 numeric
columns, 5 nonzeros per row, targets from one planted degree-2 FM), made and written a
chunk at a time: the writers never hold the whole matrix.

1. Memory-mapped CSR (``--rows``, default 10^8): float32 values, int32 indices and
   indptr, float64 targets, written to four raw files in ``--dir``, opened with
   ``np.memmap`` as one ``csr_matrix`` and streamed by ``iter_csr_chunks``
   (``--chunk-rows`` rows at a time) into ``FactorizationMachineRegressor(solver="adagrad",
   degree=2, n_components=10, eta0=0.05).partial_fit``, ``--epochs`` (2) passes.
   Reported: write time, rows per second of training (reading included), and the peak
   resident memory of the process while training (VmHWM after resetting it when the
   kernel allows it), split into anonymous memory (what the process allocates: the model,
   AdaGrad's accumulators, the current chunk) and file pages (the memory-mapped files' page
   cache, which the kernel reclaims under pressure; sampled after every chunk).
2. Streamed against in-memory, at ``--compare-rows`` (10^6) rows of the same files: the
   time of one streamed epoch (``partial_fit`` over the chunks, reading included) divided
   by the time per epoch of an in-memory ``fit`` of ``--memory-epochs`` (100) epochs on
   the same rows (whole fit / epochs; ``tol=0``).  Target: <= 1.3.  ``--memory-epochs 0``
   skips this part.
3. svmlight text (``--svm-rows``, default 10^7, same chunks, written by
   ``sklearn.datasets.dump_svmlight_file`` a chunk at a time): parsing throughput in MB/s
   of ``iter_svmlight_chunks`` over the whole file (``--chunk-mib`` MiB chunks) next to
   ``sklearn.datasets.load_svmlight_file`` reading it at once, then AdaGrad's rows per
   second over ``--epochs`` streamed passes (parsing included).

Measured (a 2-core machine shared with other jobs, load 6-10, this run niced: the rates
are pessimistic), part 1 at 10^8 rows: 5.20 GB written in 337 s; 2 epochs in 680 s,
294,000 rows/s (the process got 18% of a core); peak resident memory 0.31 GiB (0.22 GiB
anonymous, 0.09 GiB file pages; before iter_csr_chunks dropped the pages already read:
5.08 GiB).  Part 3 at 10^7 rows: 1,092 MB written in 389 s; parsing 4.5 MB/s against
4.4 MB/s for load_svmlight_file (the machine at its busiest).

Files are removed at the end unless ``--keep``.  Disk needed: about 52 bytes per row for
(1) (5.2 GB at 10^8 rows) and about 110 bytes per row for (3) (1.1 GB at 10^7).  The
machine's load changes the figures: compare ratios measured in the same run.

    python benchmarks/bench_streaming.py [--rows 100000000] [--svm-rows 10000000]
        [--compare-rows 1000000] [--memory-epochs 100] [--epochs 2]
        [--chunk-rows 1000000] [--chunk-mib 64] [--dir /tmp] [--keep]
    # quick check:
    python benchmarks/bench_streaming.py --rows 1000000 --svm-rows 1000000
"""
import argparse
import os
import tempfile
import time
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.datasets import dump_svmlight_file, load_svmlight_file

from polylite import FactorizationMachineRegressor
from polylite.datasets import (iter_csr_chunks, iter_recommender_chunks,
                               iter_svmlight_chunks)

from _timing import proc_status_kib, reset_peak_rss

USERS, ITEMS, NUMERIC = 50_000, 30_000, 3
N_FEATURES = USERS + ITEMS + NUMERIC


def chunks(n_rows, chunk_rows):
    return iter_recommender_chunks(n_rows, chunk_rows, USERS, ITEMS, NUMERIC,
                                   dtype=np.float32, random_state=0)


def model():
    return FactorizationMachineRegressor(degree=2, n_components=10, solver="adagrad",
                                        eta0=0.05, tol=0, random_state=0)


# ------------------------------------------------------------------ memory-mapped CSR

def write_memmap_csr(folder, n_rows, chunk_rows):
    """Append the chunks to raw files data/indices/indptr/y; returns their paths."""
    paths = {name: os.path.join(folder, f"polylite_bench_{name}.bin")
             for name in ("data", "indices", "indptr", "y")}
    files = {name: open(path, "wb") for name, path in paths.items()}
    try:
        offset = 0
        np.zeros(1, np.int32).tofile(files["indptr"])
        for X, y in chunks(n_rows, chunk_rows):
            X.data.astype(np.float32).tofile(files["data"])
            X.indices.astype(np.int32).tofile(files["indices"])
            if offset + X.nnz >= 2**31:
                raise ValueError("more than 2^31 nonzeros: use int64 indptr")
            (X.indptr[1:].astype(np.int64) + offset).astype(np.int32).tofile(
                files["indptr"])
            y.astype(np.float64).tofile(files["y"])
            offset += X.nnz
    finally:
        for f in files.values():
            f.close()
    return paths


def open_memmap_csr(paths, n_rows=None):
    """The files as one CSR matrix on np.memmap arrays (the first ``n_rows`` rows)."""
    indptr = np.memmap(paths["indptr"], np.int32, mode="r")
    n = indptr.shape[0] - 1 if n_rows is None else n_rows
    indptr = indptr[:n + 1]
    nnz = int(indptr[-1])
    data = np.memmap(paths["data"], np.float32, mode="r")[:nnz]
    indices = np.memmap(paths["indices"], np.int32, mode="r")[:nnz]
    y = np.memmap(paths["y"], np.float64, mode="r")[:n]
    X = sp.csr_matrix((data, indices, indptr), shape=(n, N_FEATURES), copy=False)
    return X, y


def stream_epochs(est, chunk_iter_factory, epochs):
    """``epochs`` passes of partial_fit over fresh chunk iterators; returns (seconds,
    rows, peak anonymous KiB, peak file-page KiB) sampled after every chunk."""
    rows, anon, file_pages = 0, 0, 0
    start = time.perf_counter()
    for _ in range(epochs):
        for X, y in chunk_iter_factory():
            est.partial_fit(X, y)
            rows += X.shape[0]
            anon = max(anon, proc_status_kib("RssAnon"))
            file_pages = max(file_pages, proc_status_kib("RssFile"))
    return time.perf_counter() - start, rows, anon, file_pages


def rmse(est, X, y):
    return float(np.sqrt(np.mean((est.predict(X) - y) ** 2)))


def memmap_part(args, folder):
    start = time.perf_counter()
    paths = write_memmap_csr(folder, args.rows, args.chunk_rows)
    written = time.perf_counter() - start
    size = sum(os.path.getsize(p) for p in paths.values())
    print(f"[memmap CSR] {args.rows} rows, {size / 1e9:.2f} GB written in {written:.1f} s")
    X, y = open_memmap_csr(paths)
    est = model()
    exact_peak = reset_peak_rss()
    seconds, rows, anon, file_pages = stream_epochs(
        est, lambda: iter_csr_chunks(X, y, args.chunk_rows), args.epochs)
    peak = proc_status_kib("VmHWM")
    head = min(args.rows, 100_000)
    print(f"  AdaGrad, degree 2, k = 10, {args.epochs} epochs by partial_fit over "
          f"{args.chunk_rows}-row chunks: {seconds:.1f} s, {rows / seconds:,.0f} rows/s")
    print(f"  peak resident memory {peak / 2**20:.2f} GiB"
          f"{'' if exact_peak else ' (whole process: clear_refs not writable)'}; "
          f"of which at most {anon / 2**20:.2f} GiB anonymous, "
          f"{file_pages / 2**20:.2f} GiB file pages (target <= 4 GiB)")
    print(f"  training RMSE on the first {head} rows: "
          f"{rmse(est, X[:head], np.asarray(y[:head])):.4f} (noise 0.1)")

    if args.memory_epochs:
        compare_to_memory(args, paths)


def compare_to_memory(args, paths):
    """Streamed against in-memory on the first compare_rows rows of the same files."""
    n = min(args.compare_rows, args.rows)
    Xc, yc = open_memmap_csr(paths, n)
    chunk = min(args.chunk_rows, n)
    streamed, _, _, _ = stream_epochs(model(), lambda: iter_csr_chunks(Xc, yc, chunk), 1)
    X_mem = sp.csr_matrix((np.array(Xc.data), np.array(Xc.indices), np.array(Xc.indptr)),
                          shape=Xc.shape)
    y_mem = np.array(yc)
    fit = model().set_params(max_iter=args.memory_epochs)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit.fit(X_mem, y_mem)
    per_epoch = (time.perf_counter() - start) / fit.n_iter_
    print(f"  at {n} rows: one streamed epoch {streamed:.2f} s; in memory "
          f"{per_epoch:.2f} s per epoch ({fit.n_iter_} epochs); ratio "
          f"{streamed / per_epoch:.2f} (target <= 1.3)")


# ------------------------------------------------------------------------- svmlight

def write_svmlight(folder, n_rows, chunk_rows):
    path = os.path.join(folder, "polylite_bench.svm")
    with open(path, "wb") as f:
        for X, y in chunks(n_rows, chunk_rows):
            dump_svmlight_file(X, y, f, zero_based=True)
    return path


def svmlight_part(args, folder):
    start = time.perf_counter()
    path = write_svmlight(folder, args.svm_rows, args.chunk_rows)
    mb = os.path.getsize(path) / 1e6
    print(f"[svmlight] {args.svm_rows} rows, {mb:.0f} MB written in "
          f"{time.perf_counter() - start:.1f} s")
    chunk_bytes = args.chunk_mib * 2**20

    def parse_chunks():
        return iter_svmlight_chunks(path, N_FEATURES, chunk_bytes=chunk_bytes,
                                    dtype=np.float32, zero_based=True)

    start = time.perf_counter()
    rows = sum(X.shape[0] for X, _ in parse_chunks())
    ours = time.perf_counter() - start
    start = time.perf_counter()
    X, _ = load_svmlight_file(path, n_features=N_FEATURES, dtype=np.float32,
                              zero_based=True)
    theirs = time.perf_counter() - start
    assert X.shape[0] == rows == args.svm_rows, (X.shape, rows)
    del X
    print(f"  parsing: iter_svmlight_chunks ({args.chunk_mib} MiB chunks) "
          f"{mb / ours:.1f} MB/s; sklearn load_svmlight_file (whole file) "
          f"{mb / theirs:.1f} MB/s")
    est = model()
    seconds, rows, anon, _ = stream_epochs(est, parse_chunks, args.epochs)
    print(f"  AdaGrad, degree 2, k = 10, {args.epochs} epochs by partial_fit over the "
          f"parsed chunks: {seconds:.1f} s, {rows / seconds:,.0f} rows/s "
          f"(peak anonymous memory {anon / 2**20:.2f} GiB)")


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=100_000_000)
    parser.add_argument("--svm-rows", type=int, default=10_000_000)
    parser.add_argument("--compare-rows", type=int, default=1_000_000)
    parser.add_argument("--memory-epochs", type=int, default=100)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--chunk-rows", type=int, default=1_000_000)
    parser.add_argument("--chunk-mib", type=int, default=64)
    parser.add_argument("--dir", default=tempfile.gettempdir())
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    try:
        if args.rows:
            memmap_part(args, args.dir)
        if args.svm_rows:
            svmlight_part(args, args.dir)
    finally:
        if not args.keep:
            for name in ("data", "indices", "indptr", "y"):
                path = os.path.join(args.dir, f"polylite_bench_{name}.bin")
                if os.path.exists(path):
                    os.remove(path)
            path = os.path.join(args.dir, "polylite_bench.svm")
            if os.path.exists(path):
                os.remove(path)


if __name__ == "__main__":
    main()
