"""MovieLens 100K accuracy of Bayesian FMs (Gibbs sampling): test RMSE on the u1 split.

Nothing is tuned: every hyperparameter is sampled (libFM's hyperpriors), the estimator's
defaults are used apart from ``n_iter`` (the sweeps) and ``n_components`` (k), and u1.test
is only scored.  Every encoding is a :class:`polylite.preprocessing.FieldEncoder` fitted on
u1.base (and the user and movie tables), and each of its fields is its own feature group
(``feature_groups``), as libFM's meta file and myFM's examples do, so each field has its
own prior precisions and means.  The encodings, each adding to the one before:

- "one-hot": 1 in the user's column and in the item's (2 nonzeros per row);
- "implicit": plus the items the user rated as a third field (Rendle 2012, section 4.3 of
  "Factorization Machines with libFM"; SVD++'s implicit feedback), each item
  ``1/sqrt(n)`` for a user of n rated items (``--implicit-norm sqrt``, the default, as
  SVD++ and myFM's examples) or ``1/n`` so the field sums to one (``sum``).  Which
  ratings count: those of u1.base (``--implicit-from train``, the default), or also the
  (user, item) pairs of u1.test without their ratings (``train+test``: the transductive
  setting of the Netflix Prize, where the pairs to predict are known in advance).  About
  85 more nonzeros per row, so a sweep costs tens of times the one-hot one, and degree 3
  has interactions to model;
- "implicit-both": plus the users who rated the item as a fourth field, normalised
  likewise (myFM's MovieLens examples use both sides; Rendle 2019's "flipped" SVD++);
- "side": plus the side features of the user (age band, gender, occupation, first zip
  digit) and of the movie (genre flags, release-year bin), each its own field, as in
  myFM's MovieLens examples (the derived columns are ``bench_link_prediction.py``'s);
- "side-date": plus the day of the rating as a categorical field of the interaction
  (myFM's examples, Rendle 2019's time-aware baselines); the days of u1.base only, a
  test rating of a day absent there gets no day column.

Two predictions are scored, each clipped to the rating range [1, 5]:

- "all sweeps": the mean over every sweep after the burn-in, of each sweep's prediction
  clipped to [1, 5] first, as libFM does; ``fit``'s ``X_eval`` running average gives the
  unclipped mean, so the clipped per-sweep mean is taken from kept samples of every sweep
  (``n_kept = n_iter``), which is the same average;
- "kept": ``predict`` with the default ``n_kept`` (50 evenly spaced samples), clipped.

    python benchmarks/bench_bayes_movielens.py [--data ~/polylite_data/ml-100k]
        [--components 8 10] [--sweeps 200] [--degrees 2]
        [--encodings one-hot implicit implicit-both side side-date] [--seeds 0]
        [--implicit-from train] [--implicit-norm sqrt] [--report-at 100 200] [--verbose]

``--report-at`` also prints the "all sweeps" RMSE after fewer sweeps of the same chains
(the average over the sweeps after the burn-in up to there), to see whether the RMSE still
falls.
"""
import argparse
import itertools
import time

import numpy as np

from polylite import BayesianFactorizationMachineRegressor
from polylite.bayes.fm import kept_sweeps
from polylite.datasets import load_movielens
from polylite.preprocessing import FieldEncoder

from _timing import movielens_folder, movielens_missing
from bench_link_prediction import ITEM_FEATURES, USER_FEATURES, side_tables

ENCODINGS = ("one-hot", "implicit", "implicit-both", "side", "side-date")
SECONDS_PER_DAY = 86_400


def encoder_for(encoding, implicit_norm):
    """The FieldEncoder of an encoding (see the module docstring)."""
    level = ENCODINGS.index(encoding)
    return FieldEncoder(
        implicit=[None, "user", "both", "both", "both"][level],
        implicit_norm=implicit_norm,
        user_features=USER_FEATURES if level >= 3 else None,
        item_features=ITEM_FEATURES if level >= 3 else None,
        context_features={"day": "categorical"} if level >= 4 else None,
        handle_unknown="ignore")


def encode(data, encoding, implicit_norm, with_test_pairs):
    """The u1 training and test matrices of an encoding and the field of each column."""
    ratings = data.ratings
    table = {"user_id": ratings.user_id, "item_id": ratings.item_id,
             "day": ratings.timestamp // SECONDS_PER_DAY}
    train_rows, test_rows = data.splits["u1"]
    train, test = ({key: column[rows] for key, column in table.items()}
                   for rows in (train_rows, test_rows))
    rated = None
    if with_test_pairs:
        rated = {key: table[key][np.concatenate([train_rows, test_rows])]
                 for key in ("user_id", "item_id")}
    users, items = side_tables(data)
    encoder = encoder_for(encoding, implicit_norm).fit(train, users=users, items=items,
                                                       rated=rated)
    fields = np.repeat(np.arange(len(encoder.fields_)),
                       [field.stop - field.start for field in encoder.fields_])
    return encoder.transform(train), encoder.transform(test), fields


def rmse(prediction, y):
    return float(np.sqrt(np.mean((np.clip(prediction, 1, 5) - y) ** 2)))


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=movielens_folder())
    parser.add_argument("--components", type=int, nargs="+", default=[8, 10])
    parser.add_argument("--sweeps", type=int, default=200)
    parser.add_argument("--degrees", type=int, nargs="+", default=[2])
    parser.add_argument("--encodings", nargs="+", default=["one-hot", "implicit"],
                        choices=ENCODINGS)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--implicit-from", default="train", choices=["train", "train+test"])
    parser.add_argument("--implicit-norm", default="sqrt", choices=["sqrt", "sum"])
    parser.add_argument("--report-at", type=int, nargs="+", default=[],
                        help="also print the RMSE after these numbers of sweeps")
    parser.add_argument("--n-jobs", type=int, default=None)
    parser.add_argument("--verbose", action="store_true",
                        help="print each sweep (fit's verbose, with the test RMSE of the "
                             "running unclipped average)")
    args = parser.parse_args()
    missing = movielens_missing(args.data)
    if missing:
        print(missing)
        return
    data = load_movielens(args.data, splits=["u1"])
    y_train, y_test = (data.ratings.rating[rows] for rows in data.splits["u1"])
    print(f"MovieLens 100K u1: {y_train.size} training and {y_test.size} test "
          f"ratings; {args.sweeps} sweeps, default burn-in; RMSE clipped to [1, 5]; "
          f"implicit fields from {args.implicit_from}, {args.implicit_norm}-normalised")
    print(f"{'encoding':>13} {'degree':>6} {'k':>3} {'seed':>4} {'sweeps':>6} "
          f"{'all sweeps':>10} {'kept':>7} {'s/sweep':>8}")
    for encoding in args.encodings:
        train, test, fields = encode(data, encoding, args.implicit_norm,
                                     args.implicit_from == "train+test")
        for degree, k, seed in itertools.product(args.degrees, args.components, args.seeds):
            est = BayesianFactorizationMachineRegressor(
                degree=degree, n_components=k, n_iter=args.sweeps, n_kept=args.sweeps,
                random_state=seed, n_jobs=args.n_jobs, verbose=int(args.verbose))
            start = time.perf_counter()
            est.fit(train, y_train, feature_groups=fields,
                    **(dict(X_eval=test, y_eval=y_test) if args.verbose else {}))
            seconds = (time.perf_counter() - start) / args.sweeps
            # outputs[j] is the prediction of sweep n_burn_in + 1 + j.
            outputs = est._sample_outputs(est._validate_predict_data(test))[0]
            clipped = np.clip(outputs, 1, 5)
            row = f"{encoding:>13} {degree:>6} {k:>3} {seed:>4}"
            for sweeps in sorted(s for s in args.report_at
                                 if est.n_burn_in < s < args.sweeps):
                every = rmse(clipped[:sweeps - est.n_burn_in].mean(axis=0), y_test)
                print(f"{row} {sweeps:>6} {every:>10.4f}", flush=True)
            every = rmse(clipped.mean(axis=0), y_test)
            # The samples the default n_kept keeps.
            default = BayesianFactorizationMachineRegressor()
            kept = kept_sweeps(args.sweeps, est.n_burn_in, default.n_kept) - est.n_burn_in - 1
            kept = rmse(outputs[kept].mean(axis=0), y_test)
            print(f"{row} {args.sweeps:>6} {every:>10.4f} {kept:>7.4f} {seconds:>8.3f}",
                  flush=True)


if __name__ == "__main__":
    main()
