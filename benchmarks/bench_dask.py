"""polylite.dask on a local cluster against the one-process L-BFGS fit.

Data: for each of ``--rows`` (2 x 10^6 and 10^7) rows, recommender-shaped rows (one-hot
user (50,000 levels) and item (30,000 levels) fields, 3 numeric columns, 5 nonzeros per
row; float64) in blocks of ``--block-rows`` (10^6) rows, block i made by
``iter_recommender_chunks(..., random_state=i)`` (so each block has its own planted
model: this measures speed, not accuracy).  The same blocks are made on the workers
(persisted there before timing) and, concatenated, in this process.

Fits: degree 2, k = 10, ``solver="lbfgs"``, ``--iterations`` (10) iterations (tol = 0),
once in one process (``polylite.FactorizationMachineRegressor``, n_jobs = 1) and once on
a ``LocalCluster`` of ``--workers`` (2) worker processes with one thread each
(``polylite.dask.FactorizationMachineRegressor``), from the same initialisation.
Reported per row count: the blocks, iterations and objective evaluations (L-BFGS may
evaluate more than once per iteration, equally in both fits), seconds per iteration in
one process and on the cluster, the overhead ratio (cluster / one process, the workers
sharing the machine's cores), the MB each worker sent per iteration (its
``transfer_outgoing_bytes_total`` counter from the first objective evaluation to the end
of the fit: its sum of its blocks' gradients to the client, and the model to the other
workers; the largest and the mean over the workers),
the size of the model (w and P, pickled: what the scheduler ships with each evaluation),
and the largest relative difference of the two fits' factors.  Each worker adds the
gradients of the blocks it holds before sending, so its bytes are O(d k m) per
evaluation whatever the rows: the two row counts show it.  Dask's work stealing may
still move a whole block to a worker that holds fewer (time against bytes): set
``DASK_DISTRIBUTED__SCHEDULER__WORK_STEALING=False`` to measure the sums alone.  On a
shared machine the times are noisy.

Measured (2 cores shared with other jobs, load 6-10, niced; ``--rows 1000000 3000000
--block-rows 500000 --iterations 3``): 14.1 MB per worker per iteration at both 10^6
rows (2 blocks) and 3 x 10^6 rows (6 blocks, placed 4 and 2) with work stealing off
(4 evaluations in 3 iterations; the model is 7.0 MB: one sum to the client and, on
average, half a model to the other worker per evaluation); with stealing on, 14.1 and
24.6 MB (mean), the scheduler moving blocks to the worker with fewer.  Overhead ratio
0.86-1.07 (the two workers use both cores, the one process one); the fits' factors
agree to 1e-14.

    python benchmarks/bench_dask.py [--rows 2000000 10000000] [--block-rows 1000000]
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
import polylite.dask._estimators
from polylite.datasets import iter_recommender_chunks

USERS, ITEMS, NUMERIC = 50_000, 30_000, 3


def make_block(rows, seed):
    return next(iter_recommender_chunks(rows, rows, USERS, ITEMS, NUMERIC,
                                        random_state=seed))


def sent_bytes(client):
    """Each worker's bytes sent so far (to the client, the scheduler and other workers)."""
    return client.run(lambda dask_worker: dask_worker.transfer_outgoing_bytes_total)


class CountedSums:
    """Counts the sums over the blocks the fit asks for (one per objective evaluation),
    and takes the workers' byte counters at the first (after the fit's one-off checks
    of the blocks, which may move a block's labels to the worker holding its rows)."""

    def __init__(self, client):
        self.client, self.calls, self.start = client, 0, None
        self.original = polylite.dask._estimators._sum_by_worker

    def __call__(self, *args, **kwargs):
        if self.start is None:
            self.start = sent_bytes(self.client)
        self.calls += 1
        return self.original(*args, **kwargs)


def dask_blocks(sizes, n_features):
    blocks = [dask.delayed(make_block)(rows, i) for i, rows in enumerate(sizes)]
    meta = sp.csr_matrix((0, 0))
    X = da.concatenate([
        da.from_delayed(b[0], shape=(rows, n_features), dtype=np.float64, meta=meta)
        for b, rows in zip(blocks, sizes)])
    y = da.concatenate([da.from_delayed(b[1], shape=(rows,), dtype=np.float64)
                        for b, rows in zip(blocks, sizes)])
    return X, y


def run(n_rows, args, client, params):
    """One row count: the one-process fit, then the cluster's; prints a table row."""
    n_features = USERS + ITEMS + NUMERIC
    sizes = [min(args.block_rows, n_rows - start)
             for start in range(0, n_rows, args.block_rows)]
    parts = [make_block(rows, i) for i, rows in enumerate(sizes)]
    X = sp.vstack([X for X, _ in parts], format="csr")
    y = np.concatenate([y for _, y in parts])
    del parts
    start = time.perf_counter()
    local = polylite.FactorizationMachineRegressor(**params).fit(X, y)
    local_time = (time.perf_counter() - start) / local.n_iter_
    del X, y

    X_dask, y_dask = client.persist(list(dask_blocks(sizes, n_features)))
    wait([X_dask, y_dask])
    est = polylite.dask.FactorizationMachineRegressor(**params)
    counted = CountedSums(client)
    polylite.dask._estimators._sum_by_worker = counted
    try:
        start = time.perf_counter()
        est.fit(X_dask, y_dask, client=client)
        cluster_time = (time.perf_counter() - start) / est.n_iter_
        after = sent_bytes(client)
    finally:
        polylite.dask._estimators._sum_by_worker = counted.original
    del X_dask, y_dask
    per_worker = [(after[w] - counted.start[w]) / est.n_iter_ for w in after]
    model_bytes = len(pickle.dumps({name: getattr(local, name) for name in ("w_", "P_")},
                                   protocol=5))
    difference = np.max(np.abs(est.P_ - local.P_)) / np.max(np.abs(local.P_))
    print(f"{n_rows:>10} {len(sizes):>6} {est.n_iter_:>5} {counted.calls:>5} "
          f"{local_time:>8.2f} {cluster_time:>8.2f} {cluster_time / local_time:>8.2f} "
          f"{max(per_worker) / 1e6:>9.1f} {np.mean(per_worker) / 1e6:>9.1f} "
          f"{model_bytes / 1e6:>7.1f} {difference:>9.1e}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, nargs="+", default=[2_000_000, 10_000_000])
    parser.add_argument("--block-rows", type=int, default=1_000_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--iterations", type=int, default=10)
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # a few iterations do not converge, by design
    params = dict(degree=2, n_components=10, solver="lbfgs", max_iter=args.iterations,
                  tol=0, random_state=0)
    print(f"degree 2, k = 10, lbfgs, {args.iterations} iterations; {args.workers} "
          f"workers of one thread; blocks of {args.block_rows} rows; MB sent per "
          f"iteration by each worker (max, mean), the model's size (w and P)")
    print(f"{'rows':>10} {'blocks':>6} {'iter':>5} {'evals':>5} {'1 proc':>8} "
          f"{'cluster':>8} {'overhead':>8} {'MB/w max':>9} {'MB/w mean':>9} "
          f"{'model':>7} {'rel diff':>9}")
    with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                      dashboard_address=":0") as cluster, Client(cluster) as client:
        for n_rows in args.rows:
            run(n_rows, args, client, params)


if __name__ == "__main__":
    main()
