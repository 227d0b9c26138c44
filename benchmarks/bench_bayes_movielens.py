"""MovieLens 100K accuracy of Bayesian FMs (Gibbs sampling): test RMSE on the u1 split.

Nothing is tuned: every hyperparameter is sampled (libFM's hyperpriors), the estimator's
defaults are used apart from ``n_iter`` (the sweeps) and ``n_components`` (k), and u1.test
is only scored.  The columns are grouped by field (``feature_groups``), as libFM's meta file
does, so each field has its own prior precisions and means.  Three encodings:

- "one-hot": 1 in the user's column and in the item's (2 nonzeros per row);
- "implicit": the same, plus the items the user rated as a third field, each
  1 / (number of such items) so the field sums to 1 (Rendle 2012, section 4.3 of "Factorization
  Machines with libFM"; SVD++'s implicit feedback).  Which ratings count: those of u1.base
  (``--implicit-from train``, the default), or also the (user, item) pairs of u1.test
  without their ratings (``train+test``: the transductive setting of the Netflix Prize,
  where the pairs to predict are known in advance).  About 170 nonzeros per row, so a sweep
  costs about 85 times the one-hot one, and degree 3 has interactions to model.  A local
  encoding (the recommender issue's field encoder may replace it);
- "implicit-both": "implicit" plus the users who rated the item as a fourth field, each
  1 / (number of such users), as myFM's MovieLens examples use both sides.

Two predictions are scored, each clipped to the rating range [1, 5]:

- "all sweeps": the mean over every sweep after the burn-in, of each sweep's prediction
  clipped to [1, 5] first, as libFM does; ``fit``'s ``X_eval`` running average gives the
  unclipped mean, so the clipped per-sweep mean is taken from kept samples of every sweep
  (``n_kept = n_iter``), which is the same average;
- "kept": ``predict`` with the default ``n_kept`` (50 evenly spaced samples), clipped.

    python benchmarks/bench_bayes_movielens.py [--data ../shared/data/movielens/ml-100k]
        [--components 8 10] [--sweeps 200] [--degrees 2] [--encodings one-hot implicit implicit-both]
        [--seeds 0] [--implicit-from train] [--verbose]
"""
import argparse
import itertools
import os
import time

import numpy as np
import scipy.sparse as sp

from polylite import BayesianFactorizationMachineRegressor
from polylite.bayes.fm import kept_sweeps
from polylite.datasets import load_movielens_100k

N_USERS, N_ITEMS = 943, 1682


def normalised_rated(rows, columns):
    """0/1 matrix "row id rated column id" from the one-hot blocks of the rating pairs,
    each row scaled to sum to 1 (SVD++'s |N(u)|^-1 weighting; empty rows stay 0)."""
    rated = (rows.T @ columns).tocsr()
    rated.data[:] = 1.0
    counts = np.maximum(np.asarray(rated.sum(axis=1)).ravel(), 1.0)
    return (sp.diags(1.0 / counts) @ rated).tocsr()


def implicit_encoding(X_train, X_test, with_test_pairs=False, item_side=False):
    """Append to the one-hot rows the field "items the user rated in X_train" (and in
    X_test when ``with_test_pairs``), and when ``item_side`` the field "users who rated
    the item", each weighted so that the field sums to 1; returns the two matrices and the
    column fields (0 user, 1 item, 2 items rated by the user, 3 users who rated the item)."""
    pairs = sp.vstack([X_train, X_test]) if with_test_pairs else X_train
    users, items = pairs[:, :N_USERS], pairs[:, N_USERS:]
    by_user = normalised_rated(users, items)
    by_item = normalised_rated(items, users) if item_side else None

    def encode(X):
        blocks = [X, X[:, :N_USERS] @ by_user]
        if item_side:
            blocks.append(X[:, N_USERS:] @ by_item)
        return sp.hstack(blocks, format="csr")

    sizes = [N_USERS, N_ITEMS, N_ITEMS] + ([N_USERS] if item_side else [])
    fields = np.repeat(np.arange(len(sizes)), sizes)
    return encode(X_train), encode(X_test), fields


def rmse(prediction, y):
    return float(np.sqrt(np.mean((np.clip(prediction, 1, 5) - y) ** 2)))


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=os.path.join(
        os.path.dirname(__file__), "..", "..", "shared", "data", "movielens", "ml-100k"))
    parser.add_argument("--components", type=int, nargs="+", default=[8, 10])
    parser.add_argument("--sweeps", type=int, default=200)
    parser.add_argument("--degrees", type=int, nargs="+", default=[2])
    parser.add_argument("--encodings", nargs="+", default=["one-hot", "implicit"],
                        choices=["one-hot", "implicit", "implicit-both"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--implicit-from", default="train", choices=["train", "train+test"])
    parser.add_argument("--n-jobs", type=int, default=None)
    parser.add_argument("--verbose", action="store_true",
                        help="print each sweep (fit's verbose, with the test RMSE of the "
                             "running unclipped average)")
    args = parser.parse_args()
    X_train, y_train, X_test, y_test = load_movielens_100k(args.data, "u1")
    data = {"one-hot": (X_train, X_test, np.repeat([0, 1], [N_USERS, N_ITEMS]))}
    for encoding in {"implicit", "implicit-both"} & set(args.encodings):
        data[encoding] = implicit_encoding(X_train, X_test,
                                           args.implicit_from == "train+test",
                                           item_side=encoding == "implicit-both")
    print(f"MovieLens 100K u1: {X_train.shape[0]} training and {X_test.shape[0]} test "
          f"ratings; {args.sweeps} sweeps, default burn-in; RMSE clipped to [1, 5]; "
          f"implicit field from {args.implicit_from}")
    print(f"{'encoding':>13} {'degree':>6} {'k':>3} {'seed':>4} {'all sweeps':>10} "
          f"{'kept':>7} {'s/sweep':>8}")
    for encoding, degree, k, seed in itertools.product(args.encodings, args.degrees,
                                                       args.components, args.seeds):
        train, test, fields = data[encoding]
        est = BayesianFactorizationMachineRegressor(
            degree=degree, n_components=k, n_iter=args.sweeps, n_kept=args.sweeps,
            random_state=seed, n_jobs=args.n_jobs, verbose=int(args.verbose))
        start = time.perf_counter()
        est.fit(train, y_train, feature_groups=fields,
                **(dict(X_eval=test, y_eval=y_test) if args.verbose else {}))
        seconds = (time.perf_counter() - start) / args.sweeps
        outputs = est._sample_outputs(est._validate_predict_data(test))[0]
        every = rmse(np.clip(outputs, 1, 5).mean(axis=0), y_test)
        # The samples the default n_kept keeps (outputs[j] is sweep n_burn_in + 1 + j).
        default = BayesianFactorizationMachineRegressor()
        kept = kept_sweeps(args.sweeps, est.n_burn_in, default.n_kept) - est.n_burn_in - 1
        kept = rmse(outputs[kept].mean(axis=0), y_test)
        print(f"{encoding:>13} {degree:>6} {k:>3} {seed:>4} {every:>10.4f} {kept:>7.4f} "
              f"{seconds:>8.3f}", flush=True)


if __name__ == "__main__":
    main()
