"""The ids-only whole-data FM against ``implicit``'s ALS on one objective: how far each
solver gets in a given number of epochs.

On ids alone (``fit_linear=False``) polylite's ``loss="ials"`` is iALS's model, and
``implicit``'s objective

    sum_observed alpha (1 - <x_u, y_i>)^2 + sum_unobserved <x_u, y_i>^2
    + lambda (||X||^2 + ||Y||^2)

is polylite's times 2 N alpha with ``alpha0 = 1 / alpha`` and ``beta = lambda /
(alpha N)`` (N positives; ``confidence=0``).  Both fit it on MovieLens 100K's ``u1.base``
positives (ratings of 4 and 5) from their own random starts: ``implicit``'s ALS
(conjugate-gradient steps, its default, and exact solves) for a number of iterations,
polylite's coordinate descent for as many epochs of one or two sweeps of each side
(``side_sweeps``), and its exact steps of each user's and item's factors
(``side_solver="als"``, an iteration of exact ALS per epoch).  The table gives the objective above (summed, computed from the
fitted factors the same way for both; the mean over --seeds), its excess over the
lowest in the table, P@10 and AUC on ``u1.test`` (as ``bench_ranking.py``), and the
fit's CPU seconds (one thread; the median over the seeds; each fit given its data:
``implicit``'s user-item matrix, polylite's encoded rows).  The default setting is
``implicit``'s best at 16 factors on the validation splits of ``bench_ranking.py
--tune`` (regularization 30, alpha 5).

    python benchmarks/bench_ials_solver.py [--data PATH] [--factors 16]
        [--regularization 30] [--alpha 5] [--epochs 5 10 15 30] [--seeds 3] [--quick]

``implicit`` is a peer of this benchmark, not a dependency of polylite (``pip install
implicit``); without it only polylite's rows are printed.  --quick: one seed, 1 and 2
epochs.
"""
import argparse
import os

# implicit's ALS on one thread: OpenBLAS reads this when NumPy loads it.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

import _ranking_data as D
import _results
from _timing import movielens_folder, movielens_missing


def objective(observed, X, Y, alpha, regularization):
    """``implicit``'s objective of the factors X (users) and Y (items); ``observed``:
    the positives' (users x items) mask."""
    S = X @ Y.T
    return float(alpha * ((1 - S[observed]) ** 2).sum() + (S[~observed] ** 2).sum()
                 + regularization * ((X ** 2).sum() + (Y ** 2).sum()))


def implicit_fit(data, args, iterations, exact, seed):
    """(user factors, item factors, CPU s) of ``implicit``'s ALS."""
    model, (cpu, _) = D.implicit_fit(
        data, dict(factors=args.factors, regularization=args.regularization,
                   alpha=args.alpha, iterations=iterations, use_cg=not exact), seed, 1)
    return (np.asarray(model.user_factors, dtype=np.float64),
            np.asarray(model.item_factors, dtype=np.float64), cpu)


def polylite_fit(data, args, epochs, sweeps, seed, side_solver="cd"):
    """(user factors, item factors, CPU s) of the ids-only whole-data FM on the same
    objective."""
    from polylite import FieldEncoder
    from polylite.ranking import FactorizationMachineRanker
    n = data.positives.nnz
    encoder = FieldEncoder(**D.POLYLITE_IDS)
    X = encoder.fit_transform(data.train, users=data.users, items=data.items)
    ranker = FactorizationMachineRanker(
        n_components=args.factors, loss="ials", fit_linear=False,
        alpha0=1 / args.alpha, beta=args.regularization / (args.alpha * n),
        max_iter=epochs, side_sweeps=sweeps, side_solver=side_solver, random_state=seed,
        n_jobs=1)
    cpu, _ = D.fit_timed(lambda: ranker.fit(X))  # (implicit's: its matrix given)
    users, = [f for f in encoder.fields_ if f.side == "user"]
    items, = [f for f in encoder.fields_ if f.side == "item"]
    P = ranker.P_[0].astype(np.float64)
    # The encoder's id columns follow the sorted ids, as the data's rows and columns.
    return P[users.start:users.stop], P[items.start:items.stop], cpu


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=movielens_folder(), help="MovieLens 100K folder")
    parser.add_argument("--factors", type=int, default=16)
    parser.add_argument("--regularization", type=float, default=30.0)
    parser.add_argument("--alpha", type=float, default=5.0)
    parser.add_argument("--epochs", type=int, nargs="+", default=[5, 10, 15, 30])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    missing = movielens_missing(args.data)
    if missing:
        print(missing)
        return
    epochs = [1, 2] if args.quick else args.epochs
    seeds = range(1 if args.quick else args.seeds)
    data = D.load_data(args.data)
    found = _results.versions("implicit")
    solvers = [("polylite CD, 1 sweep", lambda e, s: polylite_fit(data, args, e, 1, s)),
               ("polylite CD, 2 sweeps", lambda e, s: polylite_fit(data, args, e, 2, s)),
               ("polylite ALS", lambda e, s: polylite_fit(data, args, e, 1, s, "als"))]
    if "implicit" in found:
        solvers = [
            ("implicit ALS (CG)", lambda e, s: implicit_fit(data, args, e, False, s)),
            ("implicit ALS (exact)", lambda e, s: implicit_fit(data, args, e, True, s)),
        ] + solvers
    else:
        print("implicit is not installed: its rows are skipped")
    print(f"MovieLens 100K {D.SPLIT}, ids, {data.positives.nnz} positives; "
          f"factors {args.factors}, regularization {args.regularization:g}, alpha "
          f"{args.alpha:g} (polylite: alpha0 {1 / args.alpha:g}, beta "
          f"{args.regularization / (args.alpha * data.positives.nnz):.4g}); mean over "
          f"{len(seeds)} seed(s), one thread")
    info = _results.machine()
    print(f"{info['cpu']}, {info['cores']} cores; " +
          ", ".join(f"{name} {version}" for name, version in found.items()))
    observed = data.positives.toarray() > 0
    rows = []
    for label, fit in solvers:
        for e in epochs:
            results, values, cpu = [], [], []
            for seed in seeds:
                X, Y, seconds = fit(e, seed)
                values.append(objective(observed, X, Y, args.alpha, args.regularization))
                results.append(D.evaluate(X[data.test_rows] @ Y.T, data))
                cpu.append(seconds)
            rows.append([label, e, float(np.mean(values)),
                         float(np.mean([r["precision@10"] for r in results])),
                         float(np.mean([r["auc"] for r in results])),
                         float(np.median(cpu))])
    best = min(row[2] for row in rows)
    header = (f"\n{'solver':<24}{'epochs':>7}{'objective':>12}{'excess':>9}{'P@10':>8}"
              f"{'AUC':>8}{'CPU s':>8}")
    print(header)
    print("-" * (len(header) - 1))
    for label, e, value, p10, auc, cpu in rows:
        print(f"{label:<24}{e:>7}{value:>12,.0f}{(value - best) / best:>9.2%}{p10:>8.4f}"
              f"{auc:>8.4f}{cpu:>8.2f}")
    print("\n(epochs: ALS iterations for implicit; excess: over the lowest objective in "
          "the table)")


if __name__ == "__main__":
    main()
