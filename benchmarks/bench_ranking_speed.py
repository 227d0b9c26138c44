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

    python benchmarks/bench_ranking_speed.py [--positives 10000000] [--users 100000]
        [--items 20000] [--repeats 3] [--threads 1 2]
"""
import argparse
import os
import platform
import time
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


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--positives", type=int, default=10_000_000)
    parser.add_argument("--users", type=int, default=100_000)
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    warnings.simplefilter("ignore")
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
