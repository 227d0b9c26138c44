"""A libffm file larger than memory: ``polylite fit --stream`` on hashed click logs.

Data: click logs of ``polylite.datasets.make_ctr`` (13 count-like numeric fields,
log-binned, and 26 categorical fields of 3 to 10^6 categories), drawn --piece-rows rows
at a time (each piece with its own seed, so its own planted interactions: the file
measures speed and memory, not accuracy) and written as one libffm file whose features
are hashed into --buckets columns (2^20), each field into a range of its own (an equal
share of the columns), as click-log pipelines hash theirs.  The file is written once to
--dir (default: a temporary folder, removed at the end unless --keep) and reused by a
later run with --keep.

Measured, for each --estimators (``ffm``: FieldAwareFactorizationMachineClassifier,
``fwfm``: FieldWeightedFactorizationMachineClassifier; k = 4, float32, AdaGrad, one row
per step):

- ``polylite fit TRAIN --stream --estimator E --max-iter --epochs --dtype float32``, run
  in a child process: its wall-clock seconds (a first pass that reads the file's columns,
  fields and labels, then the training passes, each holding one --chunk-mib block of
  text at a time) and the rows per second of the whole command (rows times epochs over
  its seconds);
- the child's peak resident memory (``ru_maxrss``), next to the model's own parameters
  and AdaGrad's sums of their squared gradients (as large as the parameters), both
  computed from the model's shape, and what the process holds beyond them: the
  interpreter and its libraries, the block being parsed and its rows, and the pass's
  buffers (the command steps on the parameters in place, without a copy);
- the child's resident memory read every --sample-seconds (Linux's /proc), its largest
  value in each quarter of the run: while the model trains it stays flat, whatever the
  number of rows read.

The machine's load changes the speeds: the figures are for comparing runs, not claims.

    python benchmarks/bench_ctr_stream.py [--rows 10000000] [--buckets 1048576]
        [--estimators ffm fwfm] [--epochs 1] [--chunk-mib 16] [--dir DIR] [--keep]
        [--sample-seconds 1]
    # quick check:
    python benchmarks/bench_ctr_stream.py --quick
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

from polylite.datasets import make_ctr
from polylite.preprocessing import hash_buckets

# make_ctr's fields: 13 numeric (I1..I13), then 26 categorical (C1..C26).
N_NUMERIC, N_CATEGORICAL = 13, 26
N_FIELDS = N_NUMERIC + N_CATEGORICAL
CLASSES = {"ffm": "FieldAwareFactorizationMachineClassifier",
           "fwfm": "FieldWeightedFactorizationMachineClassifier"}


def field_ranges(buckets):
    """(first column, number of columns) of each field: equal shares of ``buckets``."""
    share = buckets // N_FIELDS
    return [(f * share, share if f < N_FIELDS - 1 else buckets - f * share)
            for f in range(N_FIELDS)]


def hashed_columns(table, ranges):
    """The column of each row's value of each field, shape (n_rows, n_fields)."""
    from polylite.datasets import log_bins
    names = [f"I{i + 1}" for i in range(N_NUMERIC)] + [f"C{i + 1}"
                                                      for i in range(N_CATEGORICAL)]
    out = np.empty((len(table[names[0]]), N_FIELDS), np.int64)
    for f, name in enumerate(names):
        values = table[name]
        if f < N_NUMERIC:
            values = log_bins(values)
        start, width = ranges[f]
        out[:, f] = start + hash_buckets(values, width, name)
    return out


def write_file(path, n_rows, piece_rows, buckets, seed, max_categories):
    """Write the hashed libffm file a piece at a time; returns (seconds, bytes)."""
    ranges = field_ranges(buckets)
    field_of = np.repeat(np.arange(N_FIELDS), [w for _, w in ranges])
    tokens = [f"{f}:{j}:1" for j, f in enumerate(field_of.tolist())]
    start = time.perf_counter()
    with open(path, "w", encoding="ascii", newline="\n") as out:
        for piece, first in enumerate(range(0, n_rows, piece_rows)):
            rows = min(piece_rows, n_rows - first)
            table, y = make_ctr(rows, max_categories=max_categories, return_table=True,
                                random_state=seed + piece)
            columns = hashed_columns(table, ranges).tolist()
            labels = y.tolist()
            out.write("".join(f"{label} {' '.join(map(tokens.__getitem__, row))}\n"
                              for label, row in zip(labels, columns)))
    return time.perf_counter() - start, os.path.getsize(path)


# The child: the command line in this process, then its peak resident memory.
CHILD = """
import resource, sys
from polylite.cli import main
status = main(sys.argv[1:])
print("peak_kib", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)
sys.exit(status)
"""


def resident_gib(pid):
    """The resident memory of process ``pid`` in GiB (Linux's /proc), or None."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 2**20
    except OSError:
        return None
    return None


def run_fit(path, estimator, args, work):
    """(wall seconds, peak resident KiB, the command's summary line, the resident memory
    sampled every --sample-seconds while the command ran as (seconds, GiB) pairs) of one
    streamed fit in a child process."""
    model = os.path.join(work, f"{estimator}.npz")
    cmd = [sys.executable, "-c", CHILD, "fit", path, "-m", model, "--estimator", estimator,
           "--stream", "--max-iter", str(args.epochs), "--dtype", "float32",
           "--n-components", "4", "--chunk-bytes", str(args.chunk_mib * 2**20),
           "--seed", "0", "--progress", "none"]
    samples = []
    with tempfile.TemporaryFile("w+") as err:
        start = time.perf_counter()
        child = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, text=True)
        while child.poll() is None:
            gib = resident_gib(child.pid)
            if gib is not None:
                samples.append((time.perf_counter() - start, gib))
            time.sleep(args.sample_seconds)
        seconds = time.perf_counter() - start
        err.seek(0)
        stderr = err.read()
    if child.returncode != 0:
        sys.exit(f"polylite fit failed ({child.returncode}):\n{stderr}")
    peak = int(next(line.split()[1] for line in stderr.splitlines()
                    if line.startswith("peak_kib")))
    summary = next((line for line in stderr.splitlines()
                    if line.startswith("polylite fit:")), "")
    return seconds, peak, summary, samples


def quarter_peaks(samples):
    """The largest resident memory of each quarter of the command's run, in GiB (nan
    for a quarter without samples): flat quarters show that the memory does not grow
    with the rows read."""
    if not samples:
        return [float("nan")] * 4
    end = samples[-1][0] or 1.0
    peaks = [float("nan")] * 4
    for t, gib in samples:
        q = min(int(4 * t / end), 3)
        peaks[q] = gib if np.isnan(peaks[q]) else max(peaks[q], gib)
    return peaks


def parameter_bytes(estimator, d, n_fields, k=4, itemsize=4):
    """The model's own parameters in bytes (intercept, linear weights, factors; the
    FwFM's weights of the pairs of fields)."""
    if estimator == "ffm":
        count = 1 + d + d * n_fields * k
    else:
        count = 1 + d + d * k + n_fields * (n_fields + 1) // 2
    return count * itemsize


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--piece-rows", type=int, default=1_000_000)
    parser.add_argument("--buckets", type=int, default=2**20)
    parser.add_argument("--max-categories", type=int, default=1_000_000)
    parser.add_argument("--estimators", nargs="+", choices=tuple(CLASSES),
                        default=["ffm", "fwfm"])
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--chunk-mib", type=int, default=16)
    parser.add_argument("--dir", default=None, help="folder of the data file")
    parser.add_argument("--keep", action="store_true",
                        help="keep the data file (a later run with the same --dir, "
                             "--rows and --buckets reuses it)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sample-seconds", type=float, default=1.0,
                        help="how often the child's resident memory is read")
    parser.add_argument("--output", default=None,
                        help="also write the table to this text file")
    parser.add_argument("--quick", action="store_true",
                        help="20,000 rows, 2^14 buckets, 10^4 categories, 1 MiB blocks")
    args = parser.parse_args(argv)
    if args.quick:
        args.rows, args.piece_rows, args.buckets = 20_000, 10_000, 2**14
        args.max_categories, args.chunk_mib = 10_000, 1
        args.sample_seconds = min(args.sample_seconds, 0.05)
    work = args.dir or tempfile.mkdtemp(prefix="bench_ctr_stream-")
    os.makedirs(work, exist_ok=True)
    path = os.path.join(work, f"ctr-{args.rows}-{args.buckets}.ffm")
    if os.path.exists(path) and args.keep:
        print(f"data: {path} (written by an earlier run), "
              f"{os.path.getsize(path) / 2**30:.2f} GiB")
    else:
        seconds, size = write_file(path, args.rows, args.piece_rows, args.buckets,
                                   args.seed, args.max_categories)
        print(f"data: {args.rows:,} rows of {N_FIELDS} fields hashed into "
              f"{args.buckets:,} columns, written in {seconds:.0f} s: {path}, "
              f"{size / 2**30:.2f} GiB")
    results = []
    for estimator in args.estimators:
        seconds, peak_kib, summary, samples = run_fit(path, estimator, args, work)
        params = parameter_bytes(estimator, args.buckets, N_FIELDS)
        peak = peak_kib * 1024
        beyond = peak - 2 * params  # the parameters and AdaGrad's sums
        results.append((estimator, seconds, args.rows * args.epochs / seconds, params,
                        peak, beyond, quarter_peaks(samples)))
        print(f"  {summary}")
    lines = [f"{'model':6s} {'seconds':>8s} {'rows/s':>10s} {'parameters':>11s} "
             f"{'AdaGrad sums':>12s} {'peak memory':>11s} {'beyond both':>11s}"]
    for estimator, seconds, rate, params, peak, beyond, _ in results:
        lines.append(f"{estimator:6s} {seconds:8.1f} {rate:10,.0f} {params / 2**30:9.3f} G "
                     f"{params / 2**30:10.3f} G {peak / 2**30:9.3f} G "
                     f"{beyond / 2**30:9.3f} G")
    lines.append(f"({args.rows:,} rows of {N_FIELDS} fields in {args.buckets:,} hashed "
                 f"columns, {args.epochs} pass(es) after the first pass that reads the "
                 f"fields; k = 4, float32, blocks of {args.chunk_mib} MiB of text; "
                 f"G = GiB)")
    lines += ["", "resident memory over the run, the largest of each quarter of its time:",
              f"{'model':6s} " + " ".join(f"{name:>9s}" for name in
                                          ("1st", "2nd", "3rd", "4th"))]
    for estimator, *_, quarters in results:
        lines.append(f"{estimator:6s} " + " ".join(f"{gib:7.3f} G" for gib in quarters))
    lines.append(f"(read from /proc every {args.sample_seconds:g} s; the first pass, "
                 f"which reads the fields, comes first; equal quarters while the model "
                 f"trains show memory that does not grow with the rows read)")
    print("\n" + "\n".join(lines))
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
    if args.dir is None and not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    elif not args.keep:
        os.remove(path)


if __name__ == "__main__":
    main()
