"""Throughput of the pairwise ranking passes: positives per second per thread on 10^7
synthetic positives, polylite's FactorizationMachineRanker beside LightFM on the same
(user, item) pairs.

Data: ``polylite.datasets.make_recommender`` draws (user, item) pairs with long-tailed
user activity and item popularity (100,000 users, 20,000 items by default); 10^7
distinct pairs are the positives.  Both models see ids only (float32), k = 10
components, learning rate 0.05 with AdaGrad (sums starting at 1 in both), WARP's margin
1 and at most 10 negatives drawn per positive (polylite's ``max_trials``, LightFM's
``max_sampled``), and fit --epochs epochs from a fresh model.  BPR draws its negatives
as LightFM does, by popularity (``negatives="popularity"``; --bpr-negatives uniform
for uniform draws).  The penalties are each library's defaults (polylite's 1e-6 per
positive, LightFM's 0).  polylite takes the pairs as a RelationalMatrix (a user block
and an item block over identity tables); LightFM its interaction matrix of the same
pairs.

A WARP positive costs as many draws as it takes to find a negative that violates the
margin, and the better the model ranks, the more draws: ``neg/pos`` is polylite's mean
number of negatives drawn per positive over the epochs (``negatives_drawn_``; LightFM
does not report its own).

Each time is that of a whole fit (set-up included, as a user meets it: polylite's
seen-item tables, LightFM's matrix conversion), the median of --repeats fits, the two
libraries alternating; ``pos/s/thread`` counts positives times epochs.  ``CPU s`` is
the process's CPU time (on a machine shared with other work, the one-thread CPU time
is the steadier measure).  The ratio divides polylite's speed by LightFM's, both
measured in this run; the second table gives each library's speed-up of two threads
over one (one-thread time / two-thread time, median and range over the repeats).  The
load average of the machine is printed before and after.

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
        [--items 20000] [--epochs 3] [--repeats 3] [--threads 1 2]
        [--bpr-negatives popularity]
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


MAX_TRIALS = 10
MARGIN = 1.0


def time_polylite(X, loss, threads, seed, epochs, negatives):
    """(wall seconds, CPU seconds, mean negatives drawn per positive) of a fit."""
    model = FactorizationMachineRanker(
        n_components=COMPONENTS, loss=loss, max_iter=epochs, eta0=LEARNING_RATE,
        solver="adagrad", max_trials=MAX_TRIALS, margin=MARGIN,
        negatives=negatives if loss == "bpr" else "uniform", n_jobs=threads,
        random_state=seed)
    start, cpu = time.perf_counter(), time.process_time()
    model.fit(X)
    return (time.perf_counter() - start, time.process_time() - cpu,
            float(np.mean(model.negatives_drawn_)))


def time_lightfm(M, loss, threads, seed, epochs):
    """(wall seconds, CPU seconds) of a fit."""
    from lightfm import LightFM
    model = LightFM(no_components=COMPONENTS, loss=loss, learning_rate=LEARNING_RATE,
                    learning_schedule="adagrad", max_sampled=MAX_TRIALS,
                    random_state=seed)
    start, cpu = time.perf_counter(), time.process_time()
    model.fit(M, epochs=epochs, num_threads=threads)
    return time.perf_counter() - start, time.process_time() - cpu


def load_average():
    try:
        return " ".join(f"{v:.2f}" for v in os.getloadavg())
    except (AttributeError, OSError):
        return "unknown"


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
                        help="epochs of each fit timed")
    parser.add_argument("--bpr-negatives", choices=("popularity", "uniform"),
                        default="popularity",
                        help="polylite's BPR negatives (LightFM's are by popularity)")
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
          f"{COMPONENTS}, ids only, {args.epochs} epoch(s) from a fresh model, max "
          f"{MAX_TRIALS} negatives per positive; polylite's BPR negatives: "
          f"{args.bpr_negatives}; median of {args.repeats}")
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
          f"polylite {polylite.__version__}" +
          (f", lightfm {lightfm_version}" if lightfm_version else ""))
    print(f"load average before: {load_average()}")
    print()
    header = (f"{'loss':<6}{'threads':>8}{'polylite s':>12}{'CPU s':>8}"
              f"{'pos/s/thread':>14}{'neg/pos':>9}")
    if lightfm_version:
        header += (f"{'LightFM s':>11}{'CPU s':>8}{'pos/s/thread':>14}"
                   f"{'polylite / LightFM':>20}")
    print(header)
    print("-" * len(header))
    positives = n * args.epochs
    speedups = []
    for loss in ("bpr", "warp"):
        # Each repeat times every thread count of both libraries in turn: the ratios
        # compare runs made under the same load.
        ours = {threads: [] for threads in args.threads}
        theirs = {threads: [] for threads in args.threads}
        for seed in range(args.repeats):
            for threads in args.threads:
                ours[threads].append(time_polylite(X, loss, threads, seed, args.epochs,
                                                   args.bpr_negatives))
                if lightfm_version:
                    theirs[threads].append(time_lightfm(M, loss, threads, seed,
                                                        args.epochs))
        for threads in args.threads:
            wall, cpu, drawn = np.median(np.asarray(ours[threads]), axis=0)
            line = (f"{loss:<6}{threads:>8}{wall:>12.2f}{cpu:>8.2f}"
                    f"{positives / wall / threads:>14,.0f}{drawn:>9.2f}")
            if lightfm_version:
                their_wall, their_cpu = np.median(np.asarray(theirs[threads]), axis=0)
                line += (f"{their_wall:>11.2f}{their_cpu:>8.2f}"
                         f"{positives / their_wall / threads:>14,.0f}"
                         f"{their_wall / wall:>20.2f}")
            print(line, flush=True)
        if 1 in ours:
            for threads in args.threads:
                if threads == 1:
                    continue
                for name, times in (("polylite", ours), ("LightFM", theirs)):
                    if times[threads]:
                        ratio = (np.asarray(times[1])[:, 0] /
                                 np.asarray(times[threads])[:, 0])
                        speedups.append((loss, threads, name, ratio))
    print(f"load average after: {load_average()}")
    if speedups:
        print()
        header = (f"{'loss':<6}{'threads':>8}{'library':>10}{'speed-up':>10}"
                  f"{'range':>14}")
        print(header)
        print("-" * len(header))
        for loss, threads, name, ratio in speedups:
            print(f"{loss:<6}{threads:>8}{name:>10}{np.median(ratio):>10.2f}"
                  f"{f'{ratio.min():.2f} - {ratio.max():.2f}':>14}")


if __name__ == "__main__":
    main()
