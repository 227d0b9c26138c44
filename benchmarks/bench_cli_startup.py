"""How fast the ``polylite`` command answers: ``info``, ``predict`` and ``evaluate`` on a
small model and data file, each timed against the import it cannot do without, in the
same run.

Each command runs as its own process (``python -m polylite ...``, as the installed
``polylite`` script runs it), alternating with its baseline process: ``python -c "import
numpy"`` for ``info`` (which reads the model file with NumPy) and ``python -c "import
numpy, scipy.sparse"`` for ``predict`` and ``evaluate`` (which read sparse rows).  The
table gives the median wall time of each over ``--repeats`` runs, the difference, and
whether the difference is within the budget of the command (0.2 s for ``info``, 0.5 s
for ``predict`` and ``evaluate``).  ``--quick`` runs small files, once.

Usage::

    python benchmarks/bench_cli_startup.py [--rows 20000] [--repeats 7] [--quick]
        [--output results/cli_startup.txt]
"""
import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

# command -> (baseline, budget in seconds over the baseline)
BASELINES = {"numpy": "import numpy", "numpy, scipy.sparse": "import numpy, scipy.sparse"}
BUDGETS = {"info": ("numpy", 0.2), "predict": ("numpy, scipy.sparse", 0.5),
           "evaluate": ("numpy, scipy.sparse", 0.5)}
# the models timed: the options of ``polylite fit`` that make them (fm-binary: ratings
# above 3 against the others, as libFM's -task c)
MODELS = {"fm": ["--estimator", "fm", "--max-iter", "2"],
          "fm-binary": ["--estimator", "fm", "--task", "classification",
                        "--binary-threshold", "3", "--max-iter", "2"],
          "bayes-fm": ["--estimator", "bayes-fm", "--n-iter", "20"]}


def write_files(folder, rows, estimator):
    """A rating-like svmlight file of ``rows`` rows (a user and an item each) and a model
    of ``estimator`` fitted on it by ``polylite fit``; returns (data, model)."""
    rng = np.random.default_rng(0)
    users = rng.integers(0, 1000, rows)
    items = rng.integers(1000, 2000, rows)
    ratings = rng.integers(1, 6, rows)
    data = os.path.join(folder, "data.svm")
    with open(data, "w") as f:
        f.writelines(f"{r} {u}:1 {i}:1\n" for r, u, i in zip(ratings, users, items))
    model = os.path.join(folder, f"{estimator}.npz")
    subprocess.run([sys.executable, "-m", "polylite", "fit", data, "-m", model,
                    "--zero-based", "--quiet", *MODELS[estimator]], check=True, cwd=folder)
    return data, model


def wall_time(argv, cwd):
    start = time.perf_counter()
    subprocess.run(argv, check=True, cwd=cwd, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--estimators", nargs="+", default=list(MODELS),
                        choices=list(MODELS))
    parser.add_argument("--quick", action="store_true", help="500 rows, one run")
    parser.add_argument("--output", help="also write the table to this file")
    args = parser.parse_args(argv)
    if args.quick:
        args.rows, args.repeats = 500, 1
    python = sys.executable
    import polylite
    lines = []

    def show(line):
        print(line, flush=True)
        lines.append(line)

    show(f"polylite command start-up: median wall time of {args.repeats} run(s), "
         f"{args.rows:,}-row data file, each command and its baseline alternating")
    show(f"{platform.machine()}, {os.cpu_count()} cores; Python "
         f"{platform.python_version()}, polylite {polylite.__version__}")
    show("")
    show(f"{'model':<9} {'command':<9} {'command s':>9} {'baseline':<22} "
         f"{'baseline s':>10} {'difference s':>12} {'budget s':>8}  within")
    with tempfile.TemporaryDirectory() as folder:
        for estimator in args.estimators:
            data, model = write_files(folder, args.rows, estimator)
            commands = {"info": ["info", model],
                        "predict": ["predict", model, data, "-o", os.devnull],
                        "evaluate": ["evaluate", model, data]}
            for name, command in commands.items():
                baseline, budget = BUDGETS[name]
                times = {"command": [], "baseline": []}
                for _ in range(args.repeats):
                    times["command"].append(
                        wall_time([python, "-m", "polylite", *command], folder))
                    times["baseline"].append(
                        wall_time([python, "-c", BASELINES[baseline]], folder))
                ours = statistics.median(times["command"])
                base = statistics.median(times["baseline"])
                within = "yes" if ours - base <= budget else "no"
                show(f"{estimator:<9} {name:<9} {ours:>9.3f} {baseline:<22} {base:>10.3f} "
                     f"{ours - base:>12.3f} {budget:>8.1f}  {within}")
    if args.output:
        with open(args.output, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
