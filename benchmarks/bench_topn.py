"""Top-N speed on MovieLens 100K: every item for every user, factored against brute force.

Models fitted on u1.base (the fit is not timed; a few epochs suffice for timing):

- "FM m=2, ids": one-hot user and item (the usual recommender FM), k = 10;
- "FM m=3, ids+side": the same plus the user's age band, gender and occupation and the
  movie's genres, degree 3 (separate factor matrices per degree), k = 10;
- "PN m=2, ids+side": a polynomial network on the same columns, k = 10.

For all 943 users and all 1,682 items (1,586,126 pairs), timed:

- ``score_items`` (factored): the user part and the item part of the rows separately,
  then a matrix product over the item factors (polylite.recommend);
- ``recommend`` n = 10 excluding the u1.base items of each user (factored scores, then the
  top 10 of each row);
- brute force: the 1,586,126 pair rows built by the encoder (``transform`` of the pair
  table) and the model's ``predict`` on them, both timed.

The largest difference between the factored and the brute-force scores is printed.
Times are medians of --repeat runs, also as ratios to the project's time unit: ``X @ P``
with SciPy, k = 10, on the same pair rows X (timed in the same run).  BLAS runs on one
thread (--blas-threads 0 lifts the limit): the products are small, and OpenBLAS threads
on a busy two-core machine made them several times slower.

    python benchmarks/bench_topn.py [--data ~/polylite_data/ml-100k] [--repeat 5]
"""
import argparse
import contextlib
import warnings

import numpy as np
from sklearn.pipeline import make_pipeline
from threadpoolctl import threadpool_limits

from _timing import movielens_folder, movielens_missing, timings
from polylite import (FactorizationMachineRegressor, FieldEncoder,
                      PolynomialNetworkRegressor)
from polylite.datasets import load_movielens
from polylite.recommend import recommend, score_items

SIDE = dict(user_features={"band": "categorical", "gender": "categorical",
                           "occupation": "categorical"},
            item_features={"genres": "numeric"})


def user_table(users):
    """The users with their age band (7 bands, as MovieLens 1M groups ages)."""
    band = np.searchsorted([18, 25, 35, 45, 50, 56], users.age, side="right")
    return dict(users, band=band)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=movielens_folder())
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--components", type=int, default=10)
    parser.add_argument("--blas-threads", type=int, default=1,
                        help="BLAS threads (0: no limit)")
    args = parser.parse_args()
    missing = movielens_missing(args.data)
    if missing:
        print(missing)
        return
    warnings.simplefilter("ignore")
    limit = (threadpool_limits(args.blas_threads, user_api="blas") if args.blas_threads
             else contextlib.nullcontext())
    with limit:
        run(args)


def run(args):
    data = load_movielens(args.data, splits=["u1"])
    train = {key: v[data.splits["u1"][0]] for key, v in data.ratings.items()}
    users, items = user_table(data.users), data.items
    all_users, all_items = users["user_id"], items.item_id
    pairs = {"user_id": np.repeat(all_users, len(all_items)),
             "item_id": np.tile(all_items, len(all_users))}
    k = args.components
    configs = [
        ("FM m=2, ids", {}, FactorizationMachineRegressor(n_components=k, max_iter=5,
                                                          random_state=0)),
        ("FM m=3, ids+side", SIDE,
         FactorizationMachineRegressor(degree=3, n_components=k, max_iter=5,
                                       random_state=0)),
        ("PN m=2, ids+side", SIDE,
         PolynomialNetworkRegressor(n_components=k, max_iter=5, random_state=0)),
    ]
    print(f"{len(all_users)} users x {len(all_items)} items = {len(pairs['user_id'])} "
          f"pairs; median of {args.repeat} runs (seconds, and in units of X @ P, "
          f"k = {k}, on the pair rows); the machine may be shared")
    print()
    header = (f"{'model':<20}{'unit s':>9}{'factored':>10}{'recommend':>11}"
              f"{'rows':>9}{'predict':>9}{'brute':>9}{'speed-up':>10}{'max |diff|':>12}")
    print(header)
    for name, side, model in configs:
        pipe = make_pipeline(FieldEncoder(**side), model)
        pipe.fit(train, train["rating"], fieldencoder__users=users,
                 fieldencoder__items=items)
        encoder = pipe[0]
        X = encoder.transform(pairs)
        P = np.random.RandomState(0).normal(size=(X.shape[1], k))
        unit = np.median(timings(lambda: X @ P, args.repeat))
        factored = np.median(timings(lambda: score_items(pipe, all_users, all_items),
                                     args.repeat))
        top = np.median(timings(lambda: recommend(pipe, all_users, 10, exclude=train),
                                args.repeat))
        rows = np.median(timings(lambda: encoder.transform(pairs), args.repeat))
        predict = np.median(timings(lambda: model.predict(X), args.repeat))
        diff = np.abs(score_items(pipe, all_users, all_items).ravel() -
                      model.predict(X)).max()
        brute = rows + predict
        print(f"{name:<20}{unit:>9.4f}{factored:>10.3f}{top:>11.3f}{rows:>9.3f}"
              f"{predict:>9.3f}{brute:>9.3f}{brute / factored:>9.1f}x{diff:>12.1e}")
        print(f"{'  (units of X @ P)':<20}{'':>9}{factored / unit:>10.1f}{top / unit:>11.1f}"
              f"{rows / unit:>9.1f}{predict / unit:>9.1f}{brute / unit:>9.1f}")


if __name__ == "__main__":
    main()
