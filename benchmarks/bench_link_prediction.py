"""Link prediction on MovieLens 100K with node features (HOFM paper, Table 3, last column).

The task (Blondel et al., Higher-Order Factorization Machines, NIPS 2016, section 6.1):
predict which (user, movie) pairs are 5-star ratings from the features of the user and of
the movie only (no ids).  The positives are the 21,201 5-star pairs; every other pair of
the 943 x 1,682 is a negative.  For each seed, half the positives and as many negatives,
drawn uniformly, are the training set; all the other pairs (10,601 positives and about
1.55 million negatives) are the test set.  Models are fitted with the squared loss on
labels 1/0 by coordinate descent, k = 30, factors initialised N(0, 0.01) (init_scale 0.1),
an intercept fitted; test AUC over the whole test set, scored for all pairs at once
(polylite.recommend.score_items).

The features, x = [user features (49 columns), movie features (29 columns)], encoded by
polylite.preprocessing.FieldEncoder from u.user and u.item.  The paper's appendix, which
lists them, is not at hand; ours match its column counts: the user's age band (7 bands:
under 18, 18-24, 25-34, 35-44, 45-49, 50-55, 56+), gender (2), occupation (21) and the
first character of the zip code (19 distinct), one-hot; the movie's 19 genre flags and its
release year in 10 bins (the decades 1920s-1980s, 1990-94, 1995-98, unknown), one-hot.

Models (as in the paper's formulas): HOFM m = 2..5 (one factor matrix per degree and a
linear term, alpha = beta), HOFM-shared-augmented m = 2..5 (one factor matrix, m - 1 dummy
features; no separate linear term), all-subsets (no separate linear term) and polynomial
networks m = 2..3 (units (gamma_s + <p_s, x>)^m; polylite's learned output weights
lam_s, which the paper's formula lacks).

beta (per sample: the objective is a mean over the rows) is chosen by 3-fold
cross-validation on the training set only (AUC on the held-out folds), from --betas
(default 1e-6 ... 1e2; the paper's grid goes to 1e6, where every model is constant).  By
default beta is chosen on the first seed's training set and kept for the other seeds
(--cv-each-seed chooses it again for every seed: five times the work).  Convergence is
reported: the epochs of the final fits and how many stopped at --max-iter.

Output: a table of the test AUC (mean and standard deviation over --seeds seeds of the
split and negative sampling) next to the paper's, and benchmarks/output/link_prediction.json.
Runs for about an hour on two cores (the cross-validation fits dominate).

    python benchmarks/bench_link_prediction.py [--data ~/polylite_data/ml-100k]
        [--seeds 5] [--models hofm2 hofm3 ...] [--max-iter 100] [--cv-each-seed]
"""
import argparse
import json
import os
import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import StratifiedKFold
from threadpoolctl import threadpool_limits

from polylite import (FactorizationMachineRegressor, FieldEncoder,
                      PolynomialNetworkRegressor)
from polylite.datasets import load_movielens
from polylite.recommend import score_items

from _timing import movielens_folder, movielens_missing

HERE = os.path.dirname(os.path.abspath(__file__))
OUTPUT = os.path.join(HERE, "output")
BETAS = [10.0 ** e for e in range(-6, 3)]

# Table 3 of the HOFM paper, MovieLens 100K column.
PAPER = {"hofm2": 0.778, "hofm3": 0.786, "hofm4": 0.786, "hofm5": 0.786,
         "shared2": 0.778, "shared3": 0.787, "shared4": 0.779, "shared5": 0.621,
         "all-subsets": 0.714, "pn2": 0.761, "pn3": 0.696}
NAMES = {"hofm": "HOFM m={}", "shared": "HOFM-shared-augmented m={}", "pn": "PN m={}"}


def make_model(name, beta, max_iter, seed):
    """The estimator of a model name (see the module docstring)."""
    common = dict(n_components=30, beta=beta, init_scale=0.1, max_iter=max_iter,
                  random_state=seed)
    if name == "all-subsets":
        return FactorizationMachineRegressor(kernel="all-subsets", fit_linear=False,
                                             **common)
    degree = int(name[-1])
    if name.startswith("hofm"):
        return FactorizationMachineRegressor(degree=degree, alpha=beta, **common)
    if name.startswith("shared"):
        return FactorizationMachineRegressor(degree=degree, lower_degrees="shared",
                                             fit_linear=False, **common)
    return PolynomialNetworkRegressor(degree=degree, fit_linear=False, **common)


def label(name):
    if name == "all-subsets":
        return "all-subsets"
    return NAMES[name.rstrip("0123456789")].format(name[-1])


# The side features of users and movies, each its own field: age bands, gender, occupation,
# first zip digit; genre flags (one numeric block) and release-year bins.
USER_FEATURES = {"age_band": "categorical", "gender": "categorical",
                 "occupation": "categorical", "zip_first": "categorical"}
ITEM_FEATURES = {"genres": "numeric", "year_bin": "categorical"}


def side_tables(data):
    """The user and movie tables of ``data`` with the derived columns of USER_FEATURES and
    ITEM_FEATURES (age band, first zip digit, release-year bin; -1 when the year is
    unknown)."""
    users = dict(data.users)
    users["age_band"] = np.searchsorted([18, 25, 35, 45, 50, 56], users["age"],
                                        side="right")
    users["zip_first"] = np.array([z[:1] for z in users["zip_code"]])
    items = dict(data.items)
    year = items["release_year"]
    bins = np.searchsorted([1930, 1940, 1950, 1960, 1970, 1980, 1990, 1995],
                           np.nan_to_num(year), side="right")
    items["year_bin"] = np.where(np.isnan(year), -1, bins)
    return users, items


def node_features(data):
    """The encoder of the user and movie side features (no ids)."""
    users, items = side_tables(data)
    encoder = FieldEncoder(ids="none", user_features=USER_FEATURES,
                           item_features=ITEM_FEATURES)
    no_pairs = {"user_id": users["user_id"][:0], "item_id": items["item_id"][:0]}
    return encoder.fit(no_pairs, users=users, items=items)


class LinkData:
    """The links (5-star pairs) and, per seed, the training rows and the test mask."""

    def __init__(self, data, encoder):
        # The pair grid: the encoder's users times its items, in the order of their codes.
        self.encoder = encoder
        self.user_ids = encoder.categories_[encoder.user]
        self.item_ids = encoder.categories_[encoder.item]
        n_items = len(self.item_ids)
        five = data.ratings.rating == 5
        links = (encoder.codes("user", data.ratings.user_id[five]) * n_items +
                 encoder.codes("item", data.ratings.item_id[five]))
        self.y_all = np.zeros(len(self.user_ids) * n_items, dtype=bool)
        self.y_all[links] = True
        self.n_items = n_items

    def split(self, seed):
        rng = np.random.RandomState(seed)
        positives = rng.permutation(np.flatnonzero(self.y_all))
        train_pos = positives[:len(positives) // 2]
        train_neg = rng.choice(np.flatnonzero(~self.y_all), len(train_pos), replace=False)
        train = np.concatenate([train_pos, train_neg])
        y = np.concatenate([np.ones(len(train_pos)), np.zeros(len(train_neg))])
        test = np.ones(self.y_all.size, dtype=bool)
        test[train] = False
        pairs = {"user_id": self.user_ids[train // self.n_items],
                 "item_id": self.item_ids[train % self.n_items]}
        return self.encoder.transform(pairs), y, test

    def test_auc(self, model, test):
        scores = score_items(model, self.user_ids, self.item_ids, encoder=self.encoder)
        return roc_auc_score(self.y_all[test], scores.ravel()[test])


def cross_validate(name, X, y, betas, max_iter, seed):
    """Mean held-out AUC of each beta over 3 stratified folds of the training set."""
    folds = list(StratifiedKFold(3, shuffle=True, random_state=seed).split(X, y))
    scores = {}
    for beta in betas:
        aucs = []
        for fit, held in folds:
            model = make_model(name, beta, max_iter, seed).fit(X[fit], y[fit])
            aucs.append(roc_auc_score(y[held], model.predict(X[held])))
        scores[beta] = float(np.mean(aucs))
    return scores


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=movielens_folder())
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--models", nargs="+", default=list(PAPER), choices=list(PAPER))
    parser.add_argument("--betas", type=float, nargs="+", default=BETAS)
    parser.add_argument("--max-iter", type=int, default=100)
    parser.add_argument("--cv-each-seed", action="store_true")
    parser.add_argument("--output", default=os.path.join(OUTPUT, "link_prediction.json"))
    args = parser.parse_args()
    missing = movielens_missing(args.data)
    if missing:
        print(missing)
        return
    warnings.simplefilter("ignore", ConvergenceWarning)
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)

    data = load_movielens(args.data, splits=[])
    links = LinkData(data, node_features(data))
    splits = [links.split(seed) for seed in range(args.seeds)]
    X0 = splits[0][0]
    print(f"{int(links.y_all.sum())} links; {X0.shape[0]} training pairs per seed, "
          f"{X0.shape[1]} features ({X0.nnz / X0.shape[0]:.2f} nonzeros per row), "
          f"{int(splits[0][2].sum())} test pairs; {args.seeds} seeds; "
          f"max_iter={args.max_iter}; the machine may be shared", flush=True)
    results = {}
    for name in args.models:
        start = time.perf_counter()
        runs, cv = [], None
        for seed, (X, y, test) in enumerate(splits):
            if cv is None or args.cv_each_seed:
                cv = cross_validate(name, X, y, args.betas, args.max_iter, seed)
                beta = max(cv, key=cv.get)
            model = make_model(name, beta, args.max_iter, seed).fit(X, y)
            runs.append({"seed": seed, "beta": beta, "cv_auc": cv[beta],
                         "test_auc": links.test_auc(model, test),
                         "epochs": int(model.n_iter_)})
            print(f"  {label(name)} seed {seed}: beta {beta:g} (CV AUC {cv[beta]:.4f}), "
                  f"test AUC {runs[-1]['test_auc']:.4f}, {model.n_iter_} epochs",
                  flush=True)
        results[name] = {"runs": runs, "cv": {str(b): a for b, a in cv.items()},
                         "seconds": time.perf_counter() - start}
        with open(args.output, "w") as f:
            json.dump({"args": vars(args), "results": results}, f, indent=1)
    print()
    print(f"{'model':<30}{'beta':>8}{'test AUC':>16}{'paper':>8}{'diff':>8}"
          f"{'epochs':>8}{'at max':>8}")
    for name, result in results.items():
        auc = np.array([r["test_auc"] for r in result["runs"]])
        epochs = np.array([r["epochs"] for r in result["runs"]])
        betas = sorted({r["beta"] for r in result["runs"]})
        print(f"{label(name):<30}{'/'.join(f'{b:g}' for b in betas):>8}"
              f"{auc.mean():>10.4f} ±{auc.std():.4f}{PAPER[name]:>8.3f}"
              f"{auc.mean() - PAPER[name]:>+8.3f}{np.median(epochs):>8.0f}"
              f"{int((epochs >= args.max_iter).sum()):>6}/{len(epochs)}")


if __name__ == "__main__":
    with threadpool_limits(1, user_api="blas"):
        main()
