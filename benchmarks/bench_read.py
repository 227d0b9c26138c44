"""How fast polylite reads svmlight files, beside scikit-learn's reader, on the same
files in the same run.

Two files are written to a temporary folder: a rating-like file (a user and an item
column per row, integer ratings, ``--rows`` rows) and a file of decimals (``--rows`` / 5
rows of 10 features written with 6 decimals).  Each is read whole by polylite's reader
(what ``polylite fit``, ``predict`` and ``evaluate`` use) and by scikit-learn's
``load_svmlight_file`` (C), alternating, ``--repeats`` times; the table gives the median
seconds of each and their ratio.  A third file holds click logs
(:func:`polylite.datasets.make_ctr`, ``--rows`` / 10 rows of 39 fields) as libffm text,
read by :func:`polylite.datasets.load_libffm`, beside scikit-learn reading the same rows
written as svmlight text (the same numbers without their fields).  ``--quick`` reads
small files once.

Usage::

    python benchmarks/bench_read.py [--rows 1000000] [--repeats 3] [--quick]
        [--output results/read.txt]
"""
import argparse
import os
import platform
import statistics
import tempfile
import time

import numpy as np


def write_files(folder, rows):
    """(name, path) of the two files."""
    rng = np.random.default_rng(0)
    users = rng.integers(0, 10**5, rows)
    items = rng.integers(10**5, 10**5 + 10**4, rows)
    ratings = rng.integers(1, 6, rows)
    ids = os.path.join(folder, "ids.svm")
    with open(ids, "w") as f:
        f.writelines(f"{r} {u}:1 {i}:1\n" for r, u, i in zip(ratings, users, items))
    decimals = os.path.join(folder, "decimals.svm")
    values = rng.random((max(rows // 5, 1), 10))
    with open(decimals, "w") as f:
        f.writelines(f"{label} " + " ".join(f"{j}:{v:.6f}" for j, v in enumerate(row)) +
                     "\n" for label, row in zip(ratings, values))
    return [("ids (user, item)", ids), ("10 decimals", decimals)]


def write_click_logs(folder, rows):
    """(libffm path, svmlight path) of the same click-log rows."""
    from sklearn.datasets import dump_svmlight_file

    from polylite.datasets import dump_libffm, make_ctr
    X, y, fields = make_ctr(rows, random_state=0)
    ffm, svm = os.path.join(folder, "clicks.ffm"), os.path.join(folder, "clicks.svm")
    dump_libffm(X, y, fields, ffm)
    dump_svmlight_file(X, y, svm, zero_based=True)
    return ffm, svm


def timed(read, path):
    start = time.perf_counter()
    X, y = read(path)
    return time.perf_counter() - start, X, y


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="5,000 rows, one run")
    parser.add_argument("--output", help="also write the table to this file")
    args = parser.parse_args(argv)
    if args.quick:
        args.rows, args.repeats = 5000, 1
    from sklearn.datasets import load_svmlight_file

    import polylite
    from polylite._svmlight import read_file

    from polylite.datasets import load_libffm

    readers = {"polylite": read_file,
               "scikit-learn": lambda path: load_svmlight_file(path, zero_based=True)}
    lines = []

    def show(line):
        print(line, flush=True)
        lines.append(line)

    show(f"svmlight files read whole: median seconds of {args.repeats} run(s), the two "
         f"readers alternating")
    show(f"{platform.machine()}, {os.cpu_count()} cores; Python "
         f"{platform.python_version()}, polylite {polylite.__version__}")
    show("")
    show(f"{'file':<18} {'rows':>9} {'MB':>7} {'polylite s':>11} {'scikit-learn s':>15} "
         f"{'ratio':>6}")
    with tempfile.TemporaryDirectory() as folder:
        for name, path in write_files(folder, args.rows):
            times = {reader: [] for reader in readers}
            for _ in range(args.repeats):
                results = {}
                for reader, read in readers.items():
                    seconds, X, y = timed(read, path)
                    times[reader].append(seconds)
                    results[reader] = (X, y)
            (X, y), (X_ref, y_ref) = results["polylite"], results["scikit-learn"]
            assert (X != X_ref).nnz == 0 and np.array_equal(y, y_ref), "readers differ"
            ours = statistics.median(times["polylite"])
            theirs = statistics.median(times["scikit-learn"])
            show(f"{name:<18} {X.shape[0]:>9,} {os.path.getsize(path) / 1e6:>7.1f} "
                 f"{ours:>11.3f} {theirs:>15.3f} {ours / theirs:>6.2f}")
        ffm, svm = write_click_logs(folder, max(args.rows // 10, 1))
        times = {"polylite": [], "scikit-learn": []}
        for _ in range(args.repeats):
            start = time.perf_counter()
            X, y, _ = load_libffm(ffm)
            times["polylite"].append(time.perf_counter() - start)
            seconds, X_ref, y_ref = timed(readers["scikit-learn"], svm)
            times["scikit-learn"].append(seconds)
        X_ref = X_ref[:, :X.shape[1]]
        assert (X != X_ref).nnz == 0 and np.array_equal(y, y_ref), "readers differ"
        ours = statistics.median(times["polylite"])
        theirs = statistics.median(times["scikit-learn"])
        show("")
        show("click logs (39 fields) as libffm text, read by polylite; the same rows as "
             "svmlight text, read by scikit-learn")
        show(f"{'file':<18} {'rows':>9} {'MB':>7} {'polylite s':>11} {'scikit-learn s':>15} "
             f"{'ratio':>6}  polylite MB/s")
        show(f"{'libffm / svmlight':<18} {X.shape[0]:>9,} {os.path.getsize(ffm) / 1e6:>7.1f} "
             f"{ours:>11.3f} {theirs:>15.3f} {ours / theirs:>6.2f}  "
             f"{os.path.getsize(ffm) / 1e6 / ours:>12.0f}")
    if args.output:
        with open(args.output, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
