"""Implicit-feedback top-N recommendation on MovieLens 100K: ranking factorization
machines beside LightFM and a popularity baseline, all evaluated by one code path.

Protocol (positive-only feedback, the u1 split): a rating of 4 or 5 is a positive.  The
models are fitted on the positives of u1.base only (ratings below 4 are not shown to
them).  Every user with at least one positive in u1.test is evaluated (456 users): the
model scores all 1,682 items, the items the user rated in u1.base (any rating) are set
aside, and the rest are ranked.  The user's u1.test positives are the relevant items;
every other remaining item is a negative, including the test items rated below 4.
Metrics, averaged over the evaluated users:

- P@10: relevant items among the first 10, over 10;
- R@10: relevant items among the first 10, over the user's relevant items;
- nDCG@10: binary relevance, DCG = sum over the first 10 of rel_r / log2(r + 1), divided
  by the DCG of the ideal order (min(10, relevant) hits first);
- MAP@10: sum over the hits among the first 10 of the precision at the hit's rank,
  divided by min(10, relevant);
- AUC: for each user, the probability that a relevant item scores above a negative one
  (all remaining items; ties count one half).

Models, each fitted with --seeds seeds (0, 1, ...); the table gives the mean +- standard
deviation over the seeds, and the fit's CPU seconds (``time.process_time``: every thread
of the process) and wall-clock seconds:

- popularity: an item's score is its number of training positives (no seed dependence);
- LightFM (Kula, "Metadata Embeddings for User and Item Cold-start Recommendations",
  CBRecSys 2015) with the WARP loss (Weston, Bengio, Usunier, "WSABIE", IJCAI 2011) and
  with the BPR loss (Rendle et al., UAI 2009): 10 components, learning rate 0.05, 50
  epochs, 2 threads, the library's defaults otherwise; "ids": users and items are their
  ids alone; "ids+side": a user is its id, age band, gender and occupation, an item its
  id and genres, each row of features scaled to sum to one (LightFM's default
  normalisation, built by ``lightfm.data.Dataset``).  Age bands: under 18, 18-24, 25-34,
  35-44, 45-49, 50-55, 56 and over (as MovieLens 1M groups ages).  LightFM's interaction
  matrix holds the positives alone: any other stored entry, even a zero, would change
  its training (its BPR draws negatives among the stored entries, and neither loss takes
  a stored item as a negative).  With several threads its updates are asynchronous
  (Hogwild), so a seed does not fix its result;
- polylite's ``FactorizationMachineRanker`` (``POLYLITE_CONFIGS``) with the same
  losses, sizes and threads, its other parameters at their defaults: degree 2 with ids
  at its default 30 epochs and at LightFM's, BPR, and with side features (the users'
  one-hot age band, gender and occupation, the items' 19 genre columns as they are) at
  degree 2 and at degree 3 (separate and shared lower degrees), and with each user's
  training positives as a field of the user's part ("rated", 15 epochs).  A pipeline
  of a ``FieldEncoder`` (relational output) and the ranker, scored by
  ``polylite.recommend.score_items``.

- polylite's whole-data loss (``loss="ials"``) at its defaults but for ``beta`` and
  ``alpha``, 1e-4 (15 epochs), on ids alone and on ids, side features and rated items;
- ``implicit``'s ``AlternatingLeastSquares`` (Hu, Koren and Volinsky, ICDM 2008; the
  ``implicit`` package, ids only): 10 factors, 15 iterations, regularization 20 and alpha
  3 (the values --tune chooses for it at 16 factors), on the positives' matrix.

Tuned comparison (``--tune``).  Every tool's hyperparameters are chosen on
validation splits of the training positives, never on the test positives: three times
(seeds 0, 1, 2), a random 20% of the u1.base positives are held out; each model of
each grid is fitted on the other 80% of each split (fit seed 0) and scored on its
held-out positives (the same protocol: the users with held-out positives, their other
u1.base items set aside), and the setting of the best validation P@10, the mean over
the three splits (one split is noisy: settings a few thousandths apart swap places
from split to split), is refitted on all the u1.base positives and evaluated on
u1.test with --seeds seeds.  The same splits and the same rule serve every tool.  The
grids (``_ranking_tuning.py``) are printed with every setting's mean validation P@10
and AUC.  The whole-data FM with the users' rated items leaves each observed pair's
item out of the user's set (the ranker's ``rated_items``, the encoder's rated-items
columns).  Then, at k = 16 and on one thread, the ids-only whole-data FM beside
``implicit``'s ALS, each with its best validation setting at 16 factors: their
accuracy after 15 epochs and the CPU seconds per epoch (median over --seeds fits, each
fit's CPU time over its epochs).  --quick: one validation split, the first two
settings of each grid.

The chosen settings on every fold (``--folds``).  The ids-only models of --tune's
results (``implicit``'s ALS and the whole-data FM, each at its chosen setting and at its
k = 16 setting) fitted on the base split of each of MovieLens 100K's five folds (u1 to
u5) and evaluated on its test split as above: the settings were chosen on u1's
training positives only.  --quick: two folds, two epochs.

LightFM is a peer of this benchmark, not a dependency of polylite: ``pip install
lightfm-next`` (a maintained build of LightFM for current Pythons); without it the LightFM
rows are skipped; the same for ``pip install implicit``.  Its random draws differ from polylite's, so equal seeds do not mean
equal initialisations.

Output: the table, the machine (CPU model, cores) and the versions, and the per-seed
rows, the summary and the settings in ``benchmarks/results/ranking_movielens.json``
(--output; --quick, a check that everything runs with 1 seed and 5 epochs, writes no file
unless --output is given).  Times are from a machine that may be running other work.

    python benchmarks/bench_ranking.py [--data ~/polylite_data/ml-100k]
        [--seeds 3] [--epochs 50] [--threads 2] [--quick] [--output PATH]
    python benchmarks/bench_ranking.py --tune [--seeds 3] [--threads 2] [--quick]
        [--output PATH]
    python benchmarks/bench_ranking.py --folds [--seeds 3] [--threads 1] [--quick]
        [--output PATH of --tune's results]
"""
import argparse
import json
import os
import warnings

import numpy as np

import _results
from _ranking_data import (
    K, LEARNING_RATE, METRICS, POLYLITE_IDS, POLYLITE_RATED, POLYLITE_SIDE,
    POLYLITE_SIDE_RATED, POSITIVE, SPLIT, TIMES, evaluate, fit_timed, implicit_scores,
    load_data, make_row, summarize)
from _timing import movielens_folder, movielens_missing

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUTPUT = os.path.join(HERE, "results", "ranking_movielens.json")
TUNED_OUTPUT = os.path.join(HERE, "results", "ranking_tuned.json")
COMPONENTS = 10
EPOCHS = 50
THREADS = 2


# ---- runs -----------------------------------------------------------------------------

def popularity_runs(data, seeds):
    """Score = the item's number of training positives (the same for every user)."""
    rows = []
    for seed in seeds:
        counts = np.zeros(len(data.item_ids))

        def fit():
            counts[:] = np.asarray(data.positives.sum(axis=0)).ravel()
        times = fit_timed(fit)
        scores = np.broadcast_to(counts, (len(data.test_users), len(data.item_ids)))
        rows.append(make_row("popularity", "-", None, None, seed,
                             evaluate(scores, data), times))
    return rows


def lightfm_features(data):
    """LightFM's user and item feature matrices: identity plus side features, each row
    scaled to sum to one (``lightfm.data.Dataset``'s defaults)."""
    from lightfm.data import Dataset
    users, items = data.users, data.items
    user_side = [[f"age_band={b}", f"gender={g}", f"occupation={o}"]
                 for b, g, o in zip(users["age_band"], users["gender"],
                                    users["occupation"])]
    item_side = [[f"genre={data.genre_names[j]}" for j in np.flatnonzero(row)]
                 for row in items["genres"]]
    dataset = Dataset()
    dataset.fit(users["user_id"].tolist(), items["item_id"].tolist(),
                user_features=sorted({f for row in user_side for f in row}),
                item_features=sorted({f for row in item_side for f in row}))
    user_map, _, item_map, _ = dataset.mapping()
    # The matrices' rows must be data.user_ids and data.item_ids, in order.
    assert [user_map[u] for u in users["user_id"].tolist()] == list(range(len(user_map)))
    assert [item_map[i] for i in items["item_id"].tolist()] == list(range(len(item_map)))
    return (dataset.build_user_features(zip(users["user_id"].tolist(), user_side)),
            dataset.build_item_features(zip(items["item_id"].tolist(), item_side)))


def lightfm_runs(data, seeds, *, epochs=EPOCHS, threads=THREADS):
    """LightFM WARP and BPR on ids, and WARP on ids and side features."""
    from lightfm import LightFM
    interactions = data.positives.tocoo()
    user_features, item_features = lightfm_features(data)
    n_items = len(data.item_ids)
    pair_users = np.repeat(data.test_rows, n_items).astype(np.int32)
    pair_items = np.tile(np.arange(n_items), len(data.test_rows)).astype(np.int32)
    configs = [("warp", "ids", {}), ("bpr", "ids", {}),
               ("warp", "ids+side", dict(user_features=user_features,
                                         item_features=item_features))]
    rows = []
    for loss, features, side in configs:
        for seed in seeds:
            model = LightFM(no_components=COMPONENTS, loss=loss,
                            learning_rate=LEARNING_RATE, random_state=seed)
            times = fit_timed(lambda: model.fit(interactions, epochs=epochs,
                                                num_threads=threads, **side))
            scores = model.predict(pair_users, pair_items, num_threads=threads, **side)
            metrics = evaluate(scores.reshape(len(data.test_rows), n_items), data)
            rows.append(make_row(f"LightFM {loss.upper()}", features, COMPONENTS, epochs,
                                 seed, metrics, times))
            print(f"  {rows[-1]['model']} {features} seed {seed}: "
                  f"P@10 {metrics['precision@10']:.4f}, AUC {metrics['auc']:.4f}, "
                  f"fit {times[0]:.2f} CPU s", flush=True)
    return rows


IMPLICIT_DEFAULT = dict(factors=COMPONENTS, regularization=20.0, alpha=3.0, iterations=15)


def implicit_runs(data, seeds, *, threads=THREADS):
    rows = []
    for seed in seeds:
        scores, times = implicit_scores(data, IMPLICIT_DEFAULT, seed, threads)
        result = evaluate(scores, data)
        rows.append(make_row("implicit ALS", "ids", COMPONENTS, 15, seed, result, times))
        print(f"  implicit ALS ids seed {seed}: P@10 {result['precision@10']:.4f}, "
              f"AUC {result['auc']:.4f}, fit {times[0]:.2f} CPU s", flush=True)
    return rows


# polylite's configurations: (label, features, encoder, ranker parameters, epochs: None
# for the run's --epochs).  Degree 2 with defaults (30 epochs) and at LightFM's epochs;
# BPR; side features at degrees 2 and 3 (separate and shared lower degrees); the users'
# rated items, which need fewer epochs (15: chosen among 10, 15 and 20 on the u2 and u3
# splits; their long user rows make query_batch="auto" visit each user's positives in
# batches of 16; the last row steps on every positive alone, for comparison).
POLYLITE_CONFIGS = [
    ("polylite FM WARP", "ids", POLYLITE_IDS, {}, 30),
    ("polylite FM WARP", "ids", POLYLITE_IDS, {}, None),
    ("polylite FM BPR", "ids", POLYLITE_IDS, {"loss": "bpr"}, None),
    ("polylite FM WARP", "ids+side", POLYLITE_SIDE, {}, None),
    ("polylite FM3 WARP", "ids+side", POLYLITE_SIDE, {"degree": 3}, None),
    ("polylite FM3s WARP", "ids+side", POLYLITE_SIDE,
     {"degree": 3, "lower_degrees": "shared"}, None),
    ("polylite FM WARP", "ids+rated", POLYLITE_RATED, {}, 15),
    ("polylite FM WARP", "ids+side+rated", POLYLITE_SIDE_RATED, {}, 15),
    ("polylite FM WARP, query_batch=1", "ids+side+rated", POLYLITE_SIDE_RATED,
     {"query_batch": 1}, 15),
    ("polylite FM iALS", "ids", POLYLITE_IDS,
     {"loss": "ials", "beta": 1e-4, "alpha": 1e-4, "fit_linear": False}, 15),
    ("polylite FM iALS", "ids+side+rated", POLYLITE_SIDE_RATED,
     {"loss": "ials", "beta": 1e-4, "alpha": 1e-4}, 15),
]


def polylite_runs(data, seeds, *, epochs=EPOCHS, threads=THREADS):
    """polylite's FactorizationMachineRanker in each of POLYLITE_CONFIGS: fitted on
    ``data.train`` through a FieldEncoder (relational output), scored by
    ``score_items``.  FM3: degree 3 (separate factors per degree), FM3s: degree 3 with
    shared lower degrees."""
    from sklearn.pipeline import make_pipeline
    from polylite import FieldEncoder
    from polylite.ranking import FactorizationMachineRanker
    from polylite.recommend import score_items

    rows = []
    for label, features, encoder, params, config_epochs in POLYLITE_CONFIGS:
        n_epochs = config_epochs or epochs
        for seed in seeds:
            model = make_pipeline(FieldEncoder(**encoder), FactorizationMachineRanker(
                n_components=COMPONENTS, max_iter=n_epochs, n_jobs=threads,
                random_state=seed, **params))
            times = fit_timed(lambda: model.fit(data.train, fieldencoder__users=data.users,
                                                fieldencoder__items=data.items))
            scores = score_items(model, data.test_users, data.item_ids)
            result = evaluate(scores, data)
            rows.append(make_row(label, features, COMPONENTS, n_epochs, seed, result,
                                 times))
            print(f"  {label} {features} {n_epochs} epochs seed {seed}: "
                  f"P@10 {result['precision@10']:.4f}, AUC {result['auc']:.4f}, "
                  f"fit {times[0]:.2f} CPU s", flush=True)
    return rows


# ---- output ---------------------------------------------------------------------------

def print_table(summary):
    def cell(entry, key, digits):
        return f"{entry[key]:.{digits}f} ±{entry[key + '_std']:.{digits}f}"

    header = (f"{'model':<20}{'features':<10}{'k':>4}{'epochs':>8}"
              + "".join(f"{label:>16}" for _, label in METRICS)
              + "".join(f"{label:>13}" for _, label in TIMES))
    print(header)
    print("-" * len(header))
    for entry in summary:
        k = "-" if entry["k"] is None else entry["k"]
        epochs = "-" if entry["epochs"] is None else entry["epochs"]
        print(f"{entry['model']:<20}{entry['features']:<10}{k:>4}{epochs:>8}"
              + "".join(f"{cell(entry, key, 4):>16}" for key, _ in METRICS)
              + "".join(f"{cell(entry, key, 2):>13}" for key, _ in TIMES))


def write(path, payload):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path + ".tmp", "w") as f:
        json.dump(payload, f, indent=1)
    os.replace(path + ".tmp", path)     # atomic: a killed run never leaves half a file


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=movielens_folder())
    parser.add_argument("--seeds", type=int, default=3,
                        help="number of seeds: 0, 1, ... (default 3)")
    parser.add_argument("--epochs", type=int, default=None,
                        help=f"epochs of the factorization models (default {EPOCHS}; "
                             f"--quick: 5)")
    parser.add_argument("--threads", type=int, default=THREADS)
    parser.add_argument("--quick", action="store_true",
                        help="check that everything runs: 1 seed, 5 epochs, no file "
                             "written unless --output is given")
    parser.add_argument("--tune", action="store_true",
                        help="the tuned comparison: every tool's hyperparameters chosen "
                             "on a validation split of the training positives")
    parser.add_argument("--folds", action="store_true",
                        help="the ids-only settings --tune chose (its JSON file, "
                             "--output or benchmarks/results/ranking_tuned.json) on the "
                             "test splits of the five folds")
    parser.add_argument("--output", default=None,
                        help="the JSON file of the results (default: "
                             "benchmarks/results/ranking_movielens.json)")
    args = parser.parse_args()
    seeds = list(range(1 if args.quick else args.seeds))
    epochs = args.epochs or (5 if args.quick else EPOCHS)
    output = args.output or (None if args.quick else DEFAULT_OUTPUT)

    missing = movielens_missing(args.data)
    if missing:
        print(missing)
        return
    warnings.simplefilter("ignore")
    if args.folds:  # (each fold's data loaded there)
        from _ranking_tuning import folds
        return folds(args.data, seeds, args.threads, args.quick,
                     args.output or TUNED_OUTPUT)
    data = load_data(args.data)
    if args.tune:
        from _ranking_tuning import tuned
        return tuned(data, seeds, args.threads, args.quick,
                     args.output or (None if args.quick else TUNED_OUTPUT))
    found = _results.versions("lightfm-next", "implicit")
    info = _results.machine()
    print(f"MovieLens 100K {SPLIT}: {len(data.train['user_id'])} training positives "
          f"(rating >= {POSITIVE}), {len(data.test_users)} test users with "
          f"{int(data.relevant.sum())} test positives, {len(data.item_ids)} items; "
          f"seeds {seeds}", flush=True)

    rows = popularity_runs(data, seeds)
    if "lightfm-next" not in found:
        print("lightfm is not installed (pip install lightfm-next): LightFM skipped")
    else:
        rows += lightfm_runs(data, seeds, epochs=epochs, threads=args.threads)
    if "implicit" not in found:
        print("implicit is not installed (pip install implicit): its ALS skipped")
    else:
        rows += implicit_runs(data, seeds, threads=args.threads)
    rows += polylite_runs(data, seeds, epochs=epochs, threads=args.threads)
    summary = summarize(rows)

    print()
    print(f"{info['cpu']}, {info['cores']} cores; "
          + ", ".join(f"{name} {version}" for name, version in found.items() if version))
    print(f"mean ±std over {len(seeds)} seed(s); fit CPU s counts every thread")
    print()
    print_table(summary)
    if output:
        settings = dict(split=SPLIT, positive_rating=POSITIVE, k=K, seeds=seeds,
                        epochs=epochs, threads=args.threads, components=COMPONENTS,
                        learning_rate=LEARNING_RATE, test_users=len(data.test_users),
                        items=len(data.item_ids))
        write(output, {"settings": settings, "machine": info, "versions": found,
                       "summary": summary, "runs": rows})
        print(f"\nresults: {os.path.relpath(output)}")


if __name__ == "__main__":
    main()
