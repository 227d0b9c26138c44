"""Solver comparison on MovieLens 100K: training objective against wall time (cf. HOFM Fig. 1).

Data: u1.base (80,000 ratings) as one-hot user + item columns (``load_movielens_100k``);
squared loss, k = 10, alpha = beta = 1e-4, init_scale 0.1 (the estimator's default), the
same random_state (hence the same initial factors) for every solver; solvers "cd",
"adagrad" (eta0: the estimator's default unless --eta0) and "lbfgs", degrees 2, 3, 4
(separate factor matrices per degree).  The objective is the estimator's own:
mean squared loss + alpha/2 ||w||^2 + beta/2 ||P||^2.

Caveat on the data: one-hot user + item rows have exactly 2 nonzeros, and the ANOVA kernel
of degree m >= 3 sums over sets of m *distinct* nonzeros, so the degree-3 and degree-4
terms are identically 0 on these rows: at degree >= 3 every solver minimises the degree-2
objective plus the penalty of factor blocks that cannot help.  ``--side-features`` adds
the user's gender, age band and occupation and the item's genres (one-hot / multi-hot,
from u.user and u.item), so that rows have 5 to 10 nonzeros and higher degrees matter.

Each solver runs once per degree (tol = 0, no iteration limit, AdaGrad's
n_iter_no_change disabled) with verbose=1; stdout is captured and every line
"epoch N objective X ..." (cd, adagrad) or "iteration N objective X ..." (lbfgs) is
time-stamped when printed, from the moment ``fit`` is called (so validation, the column groups
and the objective computed after each cd/adagrad epoch count as the solver's time).  A
fit is stopped by an exception raised from the captured stream at the first line printed
after ``--budget`` seconds (that line is dropped).  L-BFGS prints no iteration 0: its
curve starts at the initial objective (the same initial factors) at time 0.  A single
fit per solver keeps AdaGrad's accumulators (a warm-started max_iter=1 loop would reset
them).

BLAS threads are limited to 1 during the fits (threadpoolctl; --blas-threads 0 lifts the
limit): all solvers are single-threaded, and SciPy >= 1.15's L-BFGS-B makes many tiny
BLAS calls which, with OpenBLAS's threads on a small busy machine, can be an order of
magnitude slower than the whole gradient.

Output: a plot of (objective - best) / best (log scale; best = lowest objective found by
any solver at that degree) against time, one panel per degree, in
``benchmarks/output/solvers_movielens.png`` (the traces as JSON next to it), and a table:
time to come within 1% and 0.1% of the best objective, the objective at the budget.
verbose prints the objective to 7 significant digits, so relative gaps below ~1e-6 are
not resolved (the plot's floor is 1e-7; the best solver's curve ends there by definition).

    python benchmarks/bench_solvers.py [--degrees 2 3 4] [--budget 30] [--data PATH]
"""
import argparse
import contextlib
import io
import json
import os
import re
import time
import warnings

import numpy as np
import scipy.sparse as sp

from polylite import FactorizationMachineRegressor
from polylite.datasets import load_movielens_100k

from _timing import movielens_folder, movielens_missing

HERE = os.path.dirname(os.path.abspath(__file__))
OUTPUT = os.path.join(HERE, "output")
LINE = re.compile(r"^\s*(epoch|iteration)\s+(\d+)\s+objective\s+(\S+)")
LEVELS = (1e-2, 1e-3)
COLORS = {"cd": "tab:blue", "adagrad": "tab:orange", "lbfgs": "tab:green",
          "sgd": "tab:red"}


class OutOfBudget(Exception):
    pass


class TraceStream(io.TextIOBase):
    """stdout replacement: (seconds since start, epoch, objective) of every progress line;
    raises OutOfBudget at the first progress line printed after the budget."""

    def __init__(self, start, budget):
        self.start, self.budget = start, budget
        self.buffer_, self.trace, self.other = "", [], []

    def writable(self):
        return True

    def write(self, s):
        self.buffer_ += s
        while "\n" in self.buffer_:
            line, self.buffer_ = self.buffer_.split("\n", 1)
            t = time.perf_counter() - self.start
            match = LINE.match(line)
            if match is None:
                self.other.append(line)
                continue
            self.trace.append((t, int(match.group(2)), float(match.group(3))))
            if t > self.budget:
                raise OutOfBudget
        return len(s)


def side_features(path, X):
    """X with the user's gender, age band, occupation and the item's genres appended."""
    n_users = 943
    users = X.indices.reshape(-1, 2)[:, 0]          # one user, one item per row, in order
    items = X.indices.reshape(-1, 2)[:, 1] - n_users
    with open(os.path.join(path, "u.user"), encoding="latin-1") as f:
        rows = [line.rstrip("\n").split("|") for line in f if line.strip()]
    age = np.array([int(r[1]) for r in rows])
    gender = np.array([r[2] == "F" for r in rows], dtype=int)
    occupations = sorted({r[3] for r in rows})
    occupation = np.array([occupations.index(r[3]) for r in rows])
    band = np.searchsorted([18, 25, 35, 45, 50, 56], age, side="right")   # 7 bands
    with open(os.path.join(path, "u.item"), encoding="latin-1") as f:
        genres = np.array([[int(v) for v in line.rstrip("\n").split("|")[5:24]]
                           for line in f if line.strip()], dtype=float)
    n = X.shape[0]
    user_side = sp.csr_matrix(
        (np.ones(3 * n), np.column_stack([gender[users], 2 + band[users],
                                          9 + occupation[users]]).ravel(),
         np.arange(0, 3 * n + 1, 3)), shape=(n, 9 + len(occupations)))
    item_side = sp.csr_matrix(genres[items])
    out = sp.hstack([X, user_side, item_side], format="csr", dtype=X.dtype)
    out.sort_indices()
    return out


def run(X, y, solver, degree, args, start_objective=None):
    """One fit, stopped at the budget; its trace [(t, epoch, objective)] and status."""
    fm = FactorizationMachineRegressor(
        degree=degree, n_components=args.components, solver=solver, alpha=args.alpha,
        beta=args.beta, tol=0, max_iter=10**9, n_iter_no_change=10**9,
        eta0=args.eta0 if solver in ("sgd", "adagrad") else None,
        init_scale=args.init_scale, random_state=args.seed, verbose=1)
    stream = TraceStream(time.perf_counter(), args.budget)
    status = "stopped at budget"
    try:
        with contextlib.redirect_stdout(stream):
            fm.fit(X, y)
        status = "finished"                   # cd: no decrease; lbfgs: converged
    except OutOfBudget:
        pass
    except FloatingPointError as exc:
        status = "diverged: " + str(exc).split(";")[0]
    # The line that crossed the budget is dropped: every figure is within the budget.
    trace = [p for p in stream.trace if p[0] <= args.budget]
    if solver == "lbfgs" and start_objective is not None:
        trace = [(0.0, 0, start_objective)] + trace
    return trace, status


def time_to(trace, target):
    for t, _, f in trace:
        if f <= target:
            return t
    return None


def at_budget(trace, budget):
    inside = [(t, e, f) for t, e, f in trace if t <= budget]
    return inside[-1] if inside else None


def plot(results, degrees, solvers, best, path, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(degrees), figsize=(5.2 * len(degrees), 4.4),
                             squeeze=False, constrained_layout=True)
    for ax, degree in zip(axes[0], degrees):
        floor = 1e-7
        for solver in solvers:
            trace, status = results[degree, solver]
            if not trace:
                continue
            t = np.array([p[0] for p in trace])
            f = np.array([p[2] for p in trace])
            gap = np.maximum((f - best[degree]) / abs(best[degree]), 0) + floor
            ax.plot(t, gap, marker="o", markersize=2.5, linewidth=1.4,
                    color=COLORS.get(solver), label=solver +
                    ("" if status in ("stopped at budget", "finished") else " (" +
                     status.split(":")[0] + ")"))
        for level in LEVELS:
            ax.axhline(level, color="0.6", linewidth=0.8, linestyle=":")
        ax.set_yscale("log")
        ax.set_xlabel("wall time (s)")
        ax.set_title(f"degree {degree}  (best objective {best[degree]:.7g})")
        ax.grid(True, which="major", alpha=0.3)
        ax.legend()
    axes[0][0].set_ylabel("(objective - best) / best  + 1e-7")
    fig.suptitle(title)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=movielens_folder(), help="the ml-100k folder")
    parser.add_argument("--degrees", type=int, nargs="+", default=[2, 3, 4])
    parser.add_argument("--solvers", nargs="+", default=["cd", "adagrad", "lbfgs"],
                        choices=["cd", "sgd", "adagrad", "lbfgs"])
    parser.add_argument("--budget", type=float, default=30.0,
                        help="seconds per solver and degree")
    parser.add_argument("--components", type=int, default=10)
    parser.add_argument("--alpha", type=float, default=1e-4)
    parser.add_argument("--beta", type=float, default=1e-4)
    parser.add_argument("--init-scale", type=float, default=0.1)
    parser.add_argument("--eta0", type=float, default=None,
                        help="step size of sgd/adagrad (default: the estimator's)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--side-features", action="store_true",
                        help="append user gender/age/occupation and item genres")
    parser.add_argument("--blas-threads", type=int, default=1,
                        help="BLAS threads during the fits (0: no limit)")
    parser.add_argument("--output", default=None, help="PNG path")
    args = parser.parse_args()
    missing = movielens_missing(args.data)
    if missing:
        print(missing)
        return
    warnings.simplefilter("ignore")

    X, y, _, _ = load_movielens_100k(args.data, "u1")
    name = "user+item"
    if args.side_features:
        X = side_features(args.data, X)
        name = "user+item+side"
    png = args.output or os.path.join(
        OUTPUT, "solvers_movielens" + ("_side" if args.side_features else "") + ".png")
    os.makedirs(os.path.dirname(os.path.abspath(png)), exist_ok=True)

    limit = contextlib.nullcontext()
    if args.blas_threads > 0:
        from threadpoolctl import threadpool_limits
        limit = threadpool_limits(args.blas_threads, user_api="blas")

    print(f"MovieLens 100K u1.base: {X.shape[0]} ratings x {X.shape[1]} columns ({name}, "
          f"{X.nnz / X.shape[0]:.2f} nonzeros per row); squared loss, k = "
          f"{args.components}, alpha = {args.alpha:g}, beta = {args.beta:g}, init_scale "
          f"{args.init_scale:g}, random_state {args.seed}, eta0 "
          f"{'default' if args.eta0 is None else args.eta0}; budget {args.budget:g} s per "
          f"solver; BLAS threads {args.blas_threads or 'unlimited'}")
    results = {}
    with limit:
        for degree in args.degrees:
            # The initial objective (epoch 0 of any epoch-based fit: same initial factors).
            fm0 = FactorizationMachineRegressor(
                degree=degree, n_components=args.components, alpha=args.alpha,
                beta=args.beta, init_scale=args.init_scale, random_state=args.seed,
                max_iter=1, tol=0, verbose=1)
            stream = TraceStream(time.perf_counter(), float("inf"))
            with contextlib.redirect_stdout(stream):
                fm0.fit(X, y)
            start_objective = stream.trace[0][2]
            for solver in args.solvers:
                trace, status = run(X, y, solver, degree, args, start_objective)
                results[degree, solver] = (trace, status)
                last = trace[-1] if trace else (0, 0, float("nan"))
                print(f"  degree {degree} {solver:<8} {len(trace) - 1:>6} "
                      f"{'iterations' if solver == 'lbfgs' else 'epochs'} in "
                      f"{last[0]:6.1f} s, objective {last[2]:.6e}  ({status})", flush=True)

    best = {d: min(f for s in args.solvers for _, _, f in results[d, s][0])
            for d in args.degrees}
    print()
    print("time (s) to reach within 1% / 0.1% of the best objective found by any solver "
          f"at that degree; objective at the {args.budget:g} s budget")
    header = (f"{'degree':>6} {'solver':<8} {'best objective':>15} {'s/epoch':>8} "
              f"{'to 1%':>7} {'to 0.1%':>8} {'at budget':>13} {'gap':>9} {'epochs':>7}  "
              f"status")
    print(header)
    print("-" * len(header))
    for degree in args.degrees:
        for solver in args.solvers:
            trace, status = results[degree, solver]
            hit = [time_to(trace, best[degree] * (1 + level)) for level in LEVELS]
            end = at_budget(trace, args.budget)
            steps = np.diff([t for t, _, _ in trace[1:]])
            per_epoch = f"{np.median(steps):.3f}" if len(steps) else "-"
            cells = [f"{h:.2f}" if h is not None else "never" for h in hit]
            gap = (end[2] - best[degree]) / abs(best[degree]) if end else float("nan")
            print(f"{degree:>6} {solver:<8} {best[degree]:>15.6e} {per_epoch:>8} "
                  f"{cells[0]:>7} {cells[1]:>8} "
                  f"{end[2] if end else float('nan'):>13.6e} {gap:>9.2e} "
                  f"{end[1] if end else 0:>7}  {status}")

    title = (f"MovieLens 100K u1.base ({name}), squared loss, k={args.components}, "
             f"alpha=beta={args.beta:g}")
    plot(results, args.degrees, args.solvers, best, png, title)
    with open(os.path.splitext(png)[0] + ".json", "w") as f:
        json.dump({f"{d} {s}": {"status": st, "trace": tr}
                   for (d, s), (tr, st) in results.items()}, f)
    print()
    print(f"plot: {os.path.relpath(png)}")


if __name__ == "__main__":
    main()
