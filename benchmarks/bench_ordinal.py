"""Ordinal McRank on MovieLens (NIPS 2017, Figure 4): RMSE, nDCG@1 and nDCG@5 against the
number of basis vectors k.

Rows: one-hot user and item ids (polylite.FieldEncoder), the rating 1-5 as target.
MovieLens 100K: trained on u1.base, tested on u1.test.  MovieLens 1M (when its folder
has ratings.dat): a random 80/20 split (--seed).  Models, each at k = --ks:

- "FM (CD)": polylite's FactorizationMachineRegressor, degree 2, n_components = k,
  coordinate descent to convergence (tol 1e-6, at most 300 epochs), beta = lam / n
  (per sample: the objective is a mean over the n rows) with lam from --lams, alpha = 2/n;
- "PN (CG)", "FM (CG)": the paper's single-output baselines, MultiOutputPolynomialRegressor
  with one output (squared loss, kernel "pn" or "fm"; with one output every penalty is
  the same), k iterations of the conditional gradient;
- "McRank FM l1/l2", "McRank FM l1/linf": OrdinalMcRankRegressor (kernel "fm").

The conditional-gradient models grow one path per tau (--taus): warm-started fits add
basis vectors up to each k in turn.  Hyper-parameters (lam, tau) are chosen for each k on
a validation part of the training ratings (a random 10%, by validation nDCG@5), never on
the test ratings; the chosen model is fitted again on all the training ratings and scored
once on the test ratings.  RMSE of the predictions clipped to [1, 5]; nDCG@k per user
(gain 2^rating - 1, users with fewer than 2 test ratings skipped) of the unclipped scores
(polylite.metrics).

The paper (100K / 1M): McRank FM l1/linf nDCG@1 0.75 / 0.76, single-output FM 0.71 / 0.75.

Output: a table per data set, benchmarks/output/ordinal.json and ordinal.png (the
figure's three panels per data set).  About an hour for 100K with the defaults on a
busy two-core machine (each model writes its results as it ends).

    python benchmarks/bench_ordinal.py [--data ~/polylite_data/ml-100k
        ~/polylite_data/ml-1m] [--ks 1 2 5 10 20 30 40 50]
        [--models fm-cd pn-cg fm-cg mcrank-l1l2 mcrank-l1linf] [--taus 100 1000]
        [--lams 5 10 20]
"""
import argparse
import json
import os
import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from threadpoolctl import threadpool_limits

from polylite import (FactorizationMachineRegressor, FieldEncoder,
                      MultiOutputPolynomialRegressor, OrdinalMcRankRegressor)
from polylite.datasets import MovieLensFormatError, load_movielens
from polylite.metrics import ndcg_at_k, rmse

from _timing import movielens_folder, movielens_missing

HERE = os.path.dirname(os.path.abspath(__file__))
OUTPUT = os.path.join(HERE, "output")
MEASURES = ("rmse", "ndcg1", "ndcg5")
SELECT_BY = "ndcg5"
LABELS = {"fm-cd": "FM (CD)", "pn-cg": "PN (CG)", "fm-cg": "FM (CG)",
          "mcrank-l1l2": "McRank FM l1/l2", "mcrank-l1linf": "McRank FM l1/linf"}
PAPER_NDCG1 = {"ml-100k": {"fm-cg": 0.71, "mcrank-l1linf": 0.75},
               "ml-1m": {"fm-cg": 0.75, "mcrank-l1linf": 0.76}}


def make_path_model(name, tau):
    """A conditional-gradient model of the path of ``name`` (warm-started by steps)."""
    common = dict(tau=tau, warm_start=True, random_state=0)
    if name in ("pn-cg", "fm-cg"):
        return MultiOutputPolynomialRegressor(kernel=name[:2], penalty="l1",
                                              loss="squared", **common)
    penalty = {"mcrank-l1l2": "l1/l2", "mcrank-l1linf": "l1/linf"}[name]
    return OrdinalMcRankRegressor(kernel="fm", penalty=penalty, **common)


def scores(model, X, table):
    """RMSE (clipped predictions) and nDCG@1, @5 (raw scores) of a fitted model."""
    predicted = model.predict(X)
    y, users = table["rating"], table["user_id"]
    return {"rmse": rmse(y, np.clip(predicted, 1, 5)),
            "ndcg1": ndcg_at_k(y, predicted, users, k=1),
            "ndcg5": ndcg_at_k(y, predicted, users, k=5)}


def path_scores(name, tau, ks, X, y, X_eval, table):
    """Scores at each k of one conditional-gradient path (basis vectors added by steps)."""
    model, done, out = make_path_model(name, tau), 0, {}
    for k in ks:
        model.set_params(max_basis=k - done)
        model.fit(X, y)
        done = k
        out[k] = dict(scores(model, X_eval, table), n_basis=int(model.H_.shape[0]))
    return out


def cd_scores(lam, k, X, y, X_eval, table):
    n = X.shape[0]
    model = FactorizationMachineRegressor(n_components=k, beta=lam / n, alpha=2 / n,
                                          max_iter=300, tol=1e-6, random_state=0)
    model.fit(X, y)
    return dict(scores(model, X_eval, table), epochs=int(model.n_iter_))


def run_model(name, args, fit, val, train, test):
    """For each k: validation scores of every setting, the chosen one, its test scores."""
    (X_fit, t_fit), (X_val, t_val) = fit, val
    (X_train, t_train), (X_test, t_test) = train, test
    ks = args.ks
    if name == "fm-cd":
        settings = args.lams
        validation = {lam: {k: cd_scores(lam, k, X_fit, t_fit["rating"], X_val, t_val)
                            for k in ks} for lam in settings}
    else:
        settings = args.taus
        validation = {tau: path_scores(name, tau, ks, X_fit, t_fit["rating"], X_val, t_val)
                      for tau in settings}
    chosen = {k: max(settings, key=lambda s: validation[s][k][SELECT_BY]) for k in ks}
    test_scores = {}
    if name == "fm-cd":
        for k in ks:
            test_scores[k] = cd_scores(chosen[k], k, X_train, t_train["rating"], X_test,
                                       t_test)
    else:
        for tau in sorted(set(chosen.values())):
            path = path_scores(name, tau, ks, X_train, t_train["rating"], X_test, t_test)
            test_scores.update({k: path[k] for k in ks if chosen[k] == tau})
    return {"chosen": {str(k): chosen[k] for k in ks},
            "validation": {str(s): {str(k): v for k, v in by_k.items()}
                           for s, by_k in validation.items()},
            "test": {str(k): test_scores[k] for k in ks}}


def split(data, name, seed):
    """(train, test) tables: u1 for 100K, a random 80/20 split otherwise."""
    ratings = data.ratings
    if "u1" in data.splits:
        train_rows, test_rows = data.splits["u1"]
    else:
        order = np.random.RandomState(seed).permutation(len(ratings["rating"]))
        cut = int(0.8 * len(order))
        train_rows, test_rows = np.sort(order[:cut]), np.sort(order[cut:])
    return ({k: v[train_rows] for k, v in ratings.items()},
            {k: v[test_rows] for k, v in ratings.items()})


def subset(table, rows):
    return {k: v[rows] for k, v in table.items()}


def run_dataset(path, args, save):
    name = os.path.basename(os.path.normpath(path))
    try:
        data = load_movielens(path, splits=["u1"] if name == "ml-100k" else [])
    except (OSError, MovieLensFormatError) as error:
        print(movielens_missing(path, "1m" if name == "ml-1m" else "100k")
              or f"{name}: skipped ({error})")
        return None
    train, test = split(data, name, args.seed)
    n = len(train["rating"])
    held = np.random.RandomState(args.seed).permutation(n)[:n // 10]
    is_held = np.zeros(n, dtype=bool)
    is_held[held] = True
    fit, val = subset(train, ~is_held), subset(train, is_held)
    encoder = FieldEncoder().fit(train, users=data.users, items=data.items)
    parts = [(encoder.transform(t), t) for t in (fit, val, train, test)]
    print(f"{name}: {n} training ratings ({len(fit['rating'])} fitted, "
          f"{len(val['rating'])} for validation), {len(test['rating'])} test ratings, "
          f"{parts[0][0].shape[1]} columns; the machine may be shared", flush=True)
    results = {}
    for model in args.models:
        start = time.perf_counter()
        results[model] = run_model(model, args, *parts)
        results[model]["seconds"] = time.perf_counter() - start
        save(name, results)  # after every model: nothing lost if the run is cut short
        print(f"  {LABELS[model]}: {results[model]['seconds']:.0f} s", flush=True)
    print_table(name, results, args.ks)
    return results


def print_table(name, results, ks):
    print(f"\n{name}: test scores (setting chosen on validation nDCG@5)")
    print(f"{'k':>4}" + "".join(f"{LABELS[m]:>26}" for m in results))
    print(f"{'':>4}" + "".join(f"{'RMSE  nDCG@1  nDCG@5':>26}" for _ in results))
    for k in ks:
        cells = []
        for result in results.values():
            s = result["test"][str(k)]
            cells.append(f"{s['rmse']:.4f}  {s['ndcg1']:.4f}  {s['ndcg5']:.4f}")
        print(f"{k:>4}" + "".join(f"{c:>26}" for c in cells))
    paper = PAPER_NDCG1.get(name, {})
    if paper:
        print("paper nDCG@1 (best k): " + ", ".join(f"{LABELS[m]} {v}"
                                                    for m, v in paper.items()))
    print(flush=True)


def plot(all_results, ks, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = [n for n, r in all_results.items() if r]
    if not names:
        return
    fig, axes = plt.subplots(len(names), 3, figsize=(13, 3.6 * len(names)), squeeze=False)
    for row, name in zip(axes, names):
        for ax, measure, title in zip(row, MEASURES, ("RMSE", "nDCG@1", "nDCG@5")):
            for model, result in all_results[name].items():
                ax.plot(ks, [result["test"][str(k)][measure] for k in ks], marker="o",
                        label=LABELS[model])
            ax.set_title(f"{name} {title}")
            ax.set_xlabel("basis vectors / components k")
        row[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", nargs="+", default=[movielens_folder("100k"),
                                                      movielens_folder("1m")])
    parser.add_argument("--ks", type=int, nargs="+", default=[1, 2, 5, 10, 20, 30, 40, 50])
    parser.add_argument("--models", nargs="+", default=list(LABELS), choices=list(LABELS))
    parser.add_argument("--taus", type=float, nargs="+", default=[100.0, 1000.0])
    parser.add_argument("--lams", type=float, nargs="+", default=[5.0, 10.0, 20.0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", default=os.path.join(OUTPUT, "ordinal.json"))
    args = parser.parse_args()
    args.ks = sorted(set(args.ks))
    warnings.simplefilter("ignore", ConvergenceWarning)
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    all_results = {}

    def save(name, results):
        all_results[name] = results
        with open(args.output, "w") as f:
            json.dump({"args": vars(args), "results": all_results}, f, indent=1)

    for path in args.data:
        name = os.path.basename(os.path.normpath(path))
        save(name, run_dataset(path, args, save))
    plot(all_results, args.ks, os.path.splitext(args.output)[0] + ".png")


if __name__ == "__main__":
    with threadpool_limits(1, user_api="blas"):
        main()
