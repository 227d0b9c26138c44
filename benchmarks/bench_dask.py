"""polylite.dask on a local cluster against the one-process L-BFGS fit.

Data: ``--rows`` (10^7) recommender-shaped rows (one-hot user (50,000 levels) and item
(30,000 levels) fields, 3 numeric columns, 5 nonzeros per row; float64) in blocks of
``--block-rows`` (10^6) rows, block i made by ``iter_recommender_chunks(...,
random_state=i)`` (so each block has its own planted model: this measures speed, not
accuracy).  The same blocks are made on the workers (persisted there before timing) and,
concatenated, in this process.

Fits: degree 2, k = 10, ``solver="lbfgs"``, ``--iterations`` (10) iterations (tol = 0),
once in one process (``polylite.FactorizationMachineRegressor``, n_jobs = 1) and once on
a ``LocalCluster`` of ``--workers`` (2) worker processes with one thread each
(``polylite.dask.FactorizationMachineRegressor``), from the same initialisation.
Reported: seconds per iteration (fit time / iterations; L-BFGS may evaluate the gradient
more than once per iteration, equally in both), the overhead ratio (cluster / one
process, the workers sharing the machine's cores), the largest relative difference of
the two fits' factors, and the bytes sent per iteration: the bytes the workers sent
(their ``transfer_outgoing_bytes_total`` counters: the model to the other workers, the
gradient sums between workers and the total to the client) per iteration, and the size of
the model the scheduler sends with each step (its pickle).  Both are O(d k m) whatever the
rows: compare two ``--rows``.  On a shared machine the times are noisy.

    python benchmarks/bench_dask.py [--rows 10000000] [--block-rows 1000000]
                                    [--workers 2] [--iterations 10]
"""
import argparse
import pickle
import time
import warnings

import dask
import dask.array as da
import numpy as np
import scipy.sparse as sp
from distributed import Client, LocalCluster, wait

import polylite
import polylite.dask
from polylite.datasets import iter_recommender_chunks

USERS, ITEMS, NUMERIC = 50_000, 30_000, 3


def make_block(rows, seed):
    return next(iter_recommender_chunks(rows, rows, USERS, ITEMS, NUMERIC,
                                        random_state=seed))


def sent_bytes(client):
    return sum(client.run(lambda dask_worker: dask_worker.transfer_outgoing_bytes_total)
               .values())


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--block-rows", type=int, default=1_000_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--iterations", type=int, default=10)
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # a few iterations do not converge, by design
    n_features = USERS + ITEMS + NUMERIC
    sizes = [min(args.block_rows, args.rows - start)
             for start in range(0, args.rows, args.block_rows)]
    params = dict(degree=2, n_components=10, solver="lbfgs", max_iter=args.iterations,
                  tol=0, random_state=0)

    parts = [make_block(rows, i) for i, rows in enumerate(sizes)]
    X = sp.vstack([X for X, _ in parts], format="csr")
    y = np.concatenate([y for _, y in parts])
    del parts
    start = time.perf_counter()
    local = polylite.FactorizationMachineRegressor(**params).fit(X, y)
    local_time = (time.perf_counter() - start) / local.n_iter_
    print(f"{args.rows} rows, {X.nnz} nonzeros, {len(sizes)} blocks; degree 2, k = 10, "
          f"lbfgs, {local.n_iter_} iterations")
    print(f"one process: {local_time:.2f} s/iteration")
    del X

    blocks = [dask.delayed(make_block)(rows, i) for i, rows in enumerate(sizes)]
    meta = sp.csr_matrix((0, 0))
    X_dask = da.concatenate([
        da.from_delayed(b[0], shape=(rows, n_features), dtype=np.float64, meta=meta)
        for b, rows in zip(blocks, sizes)])
    y_dask = da.concatenate([da.from_delayed(b[1], shape=(rows,), dtype=np.float64)
                             for b, rows in zip(blocks, sizes)])
    with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                      dashboard_address=":0") as cluster, Client(cluster) as client:
        X_dask, y_dask = client.persist([X_dask, y_dask])
        wait([X_dask, y_dask])
        est = polylite.dask.FactorizationMachineRegressor(**params)
        before = sent_bytes(client)
        start = time.perf_counter()
        est.fit(X_dask, y_dask, client=client)
        cluster_time = (time.perf_counter() - start) / est.n_iter_
        sent = (sent_bytes(client) - before) / est.n_iter_
    model = {name: getattr(local, name) for name in ("w_", "P_")}
    model_bytes = len(pickle.dumps(model, protocol=5))
    difference = np.max(np.abs(est.P_ - local.P_)) / np.max(np.abs(local.P_))
    print(f"{args.workers} workers: {cluster_time:.2f} s/iteration, overhead ratio "
          f"{cluster_time / local_time:.2f}; largest relative difference of P "
          f"{difference:.1e}")
    print(f"bytes sent per iteration: {sent / 1e6:.1f} MB by the workers, plus the "
          f"model ({model_bytes / 1e6:.1f} MB) from the scheduler per evaluation")


if __name__ == "__main__":
    main()
