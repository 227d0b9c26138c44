"""Throughput of the pairwise ranking passes: positives per second per thread on 10^7
synthetic positives, polylite's FactorizationMachineRanker beside LightFM on the same
(user, item) pairs.

Data: ``polylite.datasets.make_recommender`` draws (user, item) pairs with long-tailed
user activity and item popularity (100,000 users, 20,000 items by default); 10^7
distinct pairs are the positives.  Both models see ids only, k = 10 components, learning rate
0.05 (AdaGrad), and run one epoch from a fresh model (the first epoch: a WARP pass
then finds a violating negative within few draws, as it does early in any fit; later
epochs draw more negatives per positive and run longer, for both libraries alike).
polylite takes the pairs as a RelationalMatrix (a user block and an item block over
identity tables); LightFM its interaction matrix of the same pairs.

Each cell is the median of --repeats fits; the ratio divides LightFM's epoch time by
polylite's, both measured in this run.  Fit setup outside the pass (polylite's seen-item
tables, LightFM's matrix conversion) is inside the times, as a user meets it.

The whole-data loss (``--whole-data``): ``loss="ials"`` on the same kind of pairs
(10^7 positives, 10^5 users, 10^4 items), k = 32, each user's part its id and the set of
its training items (each of n items 1/sqrt(n), as ``FieldEncoder(implicit="user")``
encodes them); the seconds of one epoch (the median over the epochs of a fit of
--epochs epochs, after the fit's set-up) for each thread count; the peak memory of the
arrays a one-epoch fit allocates (NumPy's allocations as ``tracemalloc`` sees them,
beyond the data), the data's own arrays, and the process's peak resident memory
(``resource.getrusage``: the most the process held at once, the data's generation
included).

    python benchmarks/bench_ranking_speed.py [--positives 10000000] [--users 100000]
        [--items 20000] [--repeats 3] [--threads 1 2]
    python benchmarks/bench_ranking_speed.py --whole-data [--positives 10000000]
        [--users 100000] [--items 10000] [--epochs 3] [--threads 2]
"""
import argparse
import os
import platform
import resource
import sys
import time
import tracemalloc
import warnings

import numpy as np
import scipy.sparse as sp

import polylite
from polylite.datasets import make_recommender
from polylite.ranking import FactorizationMachineRanker
from polylite.relational import RelationalMatrix, RelationBlock

COMPONENTS = 10
LEARNING_RATE = 0.05


def pairs(n_positives, n_users, n_items, seed=0):
    """``n_positives`` distinct (user, item) pairs drawn by make_recommender (its rows
    repeat popular pairs: more are drawn until enough are distinct), in random order."""
    keys, draws = np.zeros(0, dtype=np.int64), n_positives
    while keys.size < n_positives:
        table, _ = make_recommender(draws, n_users=n_users, n_items=n_items,
                                    n_numeric=0, return_table=True, random_state=seed)
        keys = np.unique(np.concatenate([keys, table["user_id"] * n_items +
                                         table["item_id"]]))
        seed, draws = seed + 1, 2 * draws
    keys = np.random.default_rng(seed).permutation(keys)[:n_positives]
    return keys // n_items, keys % n_items


def relational(users, items, n_users, n_items):
    def identity(n):
        return sp.identity(n, dtype=np.float32, format="csr")
    return RelationalMatrix([RelationBlock(users, identity(n_users)),
                             RelationBlock(items, identity(n_items))])


def time_polylite(X, loss, threads, seed):
    model = FactorizationMachineRanker(n_components=COMPONENTS, loss=loss, max_iter=1,
                                       eta0=LEARNING_RATE, n_jobs=threads,
                                       random_state=seed)
    start = time.perf_counter()
    model.fit(X)
    return time.perf_counter() - start


def time_lightfm(M, loss, threads, seed):
    from lightfm import LightFM
    model = LightFM(no_components=COMPONENTS, loss=loss, learning_rate=LEARNING_RATE,
                    random_state=seed)
    start = time.perf_counter()
    model.fit(M, epochs=1, num_threads=threads)
    return time.perf_counter() - start


def rated(users, items, n_users, n_items):
    """The users' table of ``--whole-data``: each user's id and its positives' items,
    each of n items 1/sqrt(n)."""
    n = users.shape[0]
    counts = np.bincount(users, minlength=n_users).astype(np.float64)
    values = 1 / np.sqrt(np.maximum(counts[users], 1))
    sets = sp.csr_matrix((values, (users, items)), shape=(n_users, n_items))
    table = sp.hstack([sp.identity(n_users, format="csr"), sets], format="csr")
    return RelationalMatrix([
        RelationBlock(users, table),
        RelationBlock(items, sp.identity(n_items, dtype=np.float64, format="csr"))],
        dtype=np.float64)


def peak_memory_mb():
    """The process's peak resident memory (ru_maxrss: KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2 ** 20 if sys.platform == "darwin" else peak / 2 ** 10


def data_mb(X):
    """Megabytes of the arrays of the relational matrix X (tables and indices)."""
    total = 0
    for part in X.parts:
        table = getattr(part, "table", part)
        total += table.data.nbytes + table.indices.nbytes + table.indptr.nbytes
        total += getattr(np.asarray(getattr(part, "index", [])), "nbytes", 0)
    return total / 2 ** 20


def whole_data(args):
    """Seconds per epoch of loss="ials" on ids and rated items, k = 32."""
    users, items = pairs(args.positives, args.users, args.items)
    X = rated(users, items, args.users, args.items)
    print(f"{users.shape[0]} distinct positives ({args.users} users, {args.items} "
          f"items), loss='ials', k = {WHOLE_DATA_COMPONENTS}, ids + rated items "
          f"({X.parts[0].table.nnz} nonzeros in the users' table); median seconds of "
          f"the epochs of a {args.epochs}-epoch fit")
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
          f"polylite {polylite.__version__}")
    print()
    header = f"{'threads':>8}{'s / epoch':>12}{'set-up s':>10}{'fit s':>10}"
    print(header)
    print("-" * len(header))
    for threads in args.threads:
        ends = []
        model = FactorizationMachineRanker(
            n_components=WHOLE_DATA_COMPONENTS, loss="ials", max_iter=args.epochs,
            n_jobs=threads, random_state=0)
        model._epoch_callback = lambda report: ends.append(time.perf_counter())
        start = time.perf_counter()
        model.fit(X)
        total = time.perf_counter() - start
        epochs = np.diff(ends)
        first = ends[0] - start
        per_epoch = float(np.median(epochs)) if epochs.size else first
        print(f"{threads:>8}{per_epoch:>12.2f}{first - per_epoch:>10.2f}{total:>10.2f}",
              flush=True)
    # The fit's own arrays: NumPy reports its allocations to tracemalloc (a fit of one
    # epoch, apart from the timed ones).
    tracemalloc.start()
    FactorizationMachineRanker(n_components=WHOLE_DATA_COMPONENTS, loss="ials",
                               max_iter=1, n_jobs=args.threads[0], random_state=0).fit(X)
    fit_peak = tracemalloc.get_traced_memory()[1] / 2 ** 20
    tracemalloc.stop()
    print(f"\npeak memory of a fit's arrays (tracemalloc) {fit_peak:,.0f} MB; "
          f"the data's arrays {data_mb(X):,.0f} MB; peak resident memory of the "
          f"process (data generation included) {peak_memory_mb():,.0f} MB")


WHOLE_DATA_COMPONENTS = 32


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--positives", type=int, default=10_000_000)
    parser.add_argument("--users", type=int, default=100_000)
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, nargs="+", default=None,
                        help="thread counts (default 1 2; --whole-data: 2)")
    parser.add_argument("--whole-data", action="store_true",
                        help="time the whole-data loss instead (default --items 10000)")
    parser.add_argument("--epochs", type=int, default=3,
                        help="--whole-data: epochs of the fit timed")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    if args.whole_data:
        args.threads = args.threads or [2]
        if "--items" not in sys.argv:
            args.items = 10_000
        return whole_data(args)
    args.threads = args.threads or [1, 2]
    users, items = pairs(args.positives, args.users, args.items)
    n = users.shape[0]
    X = relational(users, items, args.users, args.items)
    M = sp.coo_matrix((np.ones(n, dtype=np.float32), (users, items)),
                      shape=(args.users, args.items))
    try:
        import lightfm
        lightfm_version = lightfm.__version__
    except ImportError:
        lightfm_version = None
        print("lightfm is not installed (pip install lightfm-next): LightFM skipped")
    print(f"{n} distinct positives ({args.users} users, {args.items} items), k = "
          f"{COMPONENTS}, one epoch from a fresh model, median of {args.repeats}")
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
          f"polylite {polylite.__version__}" +
          (f", lightfm {lightfm_version}" if lightfm_version else ""))
    print()
    header = (f"{'loss':<6}{'threads':>8}{'polylite s':>12}{'pos/s/thread':>14}"
              f"{'LightFM s':>12}{'pos/s/thread':>14}{'LightFM / polylite':>20}")
    print(header)
    print("-" * len(header))
    for loss in ("bpr", "warp"):
        for threads in args.threads:
            ours = np.median([time_polylite(X, loss, threads, seed)
                              for seed in range(args.repeats)])
            line = (f"{loss:<6}{threads:>8}{ours:>12.2f}"
                    f"{n / ours / threads:>14,.0f}")
            if lightfm_version:
                theirs = np.median([time_lightfm(M, loss, threads, seed)
                                    for seed in range(args.repeats)])
                line += (f"{theirs:>12.2f}{n / theirs / threads:>14,.0f}"
                         f"{theirs / ours:>20.2f}")
            print(line, flush=True)


if __name__ == "__main__":
    main()
