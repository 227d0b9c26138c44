"""Where a coordinate descent epoch's work goes: instructions, memory accesses and cache
misses per pass, counted by valgrind's callgrind (``apt install valgrind``).

Data as bench_cd.py, on fewer rows by default (callgrind runs the code about 50 times
slower): one-hot user (50,000 levels) and item (30,000 levels) fields and 3 numeric
columns, 5 nonzeros per row, k = 10, one thread.  For each degree a child process fits
``--epochs`` epochs under ``valgrind --tool=callgrind --cache-sim=yes``, collecting only
inside ``cd_epoch`` (not the data, the regrouping of the nonzeros or the objective).

Callgrind counts instructions exactly, whatever else the machine is doing, so the
figures repeat from run to run and compare two builds without timing noise.  Its cache
misses are those of a simulated two-level cache: a first level as the machine's
(``--d1``) and a last level of ``--ll`` bytes (by default the machine's second-level
cache: on a shared machine the third level often serves a pass at about the speed of
memory, which bench_cd.py measures).  A miss of the last level is a line read from
memory.

One row per kind of pass (a C function of polylite/_engine/_cd.pyx, its coordinate
kind in brackets: linear weights, ANOVA of degree 2 or 3):

- ``fused``: the updates of a group whose entries fill every row and the gradients of
  the next such group, in one pass over the rows' records;
- ``pass``: the gradients, or the updates, of one group alone;
- ``fill``: the first component's caches from the CSR rows;
- ``steps``, ``start``, ``groups``: per column, its step from its sums; its scratch
  record set up; the driver over the groups (which also takes the linear weights' steps);
- ``rows``: the other passes over the records (intercept, their set-up and size change,
  the predictions written back).

"calls" is the number of calls of the pass in one epoch; "instr/row" the instructions of
one call per row of X, "loads/row", "stores/row" its memory reads and writes, "L1 miss"
and "LL miss" its simulated misses per row (reads and writes); for the passes over the
columns (no calls given) the figures are per row of X and epoch, all calls together.
"share" is the pass's part of the epoch's instructions.

    python benchmarks/profile_cd.py [--rows 200000] [--degrees 2 3] [--epochs 2]
                                    [--ll BYTES] [--d1 BYTES]
"""
import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile
import warnings

from _timing import cache_bytes, recommender_arguments

EVENTS = ("Ir", "Dr", "Dw", "I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw")

# The passes of _cd.pyx, by the name of the C function that runs each (its chunk of
# rows on one thread), and the kinds of coordinate of its fused type (kind_tag's order).
PASSES = (("_fused_chunk", "fused"), ("_pass_chunk", "pass"), ("_fill_chunk", "fill"),
          ("_steps_chunk", "steps"), ("_start_chunk", "start"), ("_cd_groups", "groups"),
          ("_reduce_chunk", "reduce"), ("_intercept", "rows"), ("_shift_chunk", "rows"),
          ("_load_chunk", "rows"), ("_store_chunk", "rows"), ("_restride", "rows"))
KINDS = ("linear", "subsets", "anova2", "anova3", "anova4", "anova", "meanfield")


def child(degree, rows, epochs, users, items, components):
    """The fit that callgrind watches."""
    from polylite import FactorizationMachineRegressor
    from polylite.datasets import make_recommender
    X, y = make_recommender(rows, users, items, 3, random_state=0)
    warnings.simplefilter("ignore")
    FactorizationMachineRegressor(degree=degree, n_components=components, max_iter=epochs,
                                  tol=0, random_state=0, init_scale=0.1,
                                  n_jobs=1).fit(X, y)


def read_callgrind(path):
    """(exclusive costs, calls) per function name of a callgrind output file: each a
    dict name -> list of the EVENTS' counts, name -> number of calls."""
    names, costs, calls = {}, collections.defaultdict(lambda: [0] * len(EVENTS)), \
        collections.Counter()
    events = EVENTS
    fn = callee = None
    call_line = False  # the next cost line is a call's inclusive cost, not fn's own

    def name_of(spec):
        match = re.match(r"\((\d+)\)(?:\s+(.*))?", spec)
        if match is None:
            return spec
        if match.group(2):
            names[match.group(1)] = match.group(2)
        return names[match.group(1)]

    with open(path) as f:
        for line in f:
            if line.startswith("events:"):
                events = tuple(line.split()[1:])
            elif line.startswith("fn="):
                fn = name_of(line[3:].strip())
            elif line.startswith("cfn="):
                callee = name_of(line[4:].strip())
            elif line.startswith("calls="):
                calls[callee] += int(line[6:].split()[0])
                call_line = True
            elif line[:1].isdigit() or line[:1] in "+-*":
                if call_line:
                    call_line = False
                    continue
                values = line.split()[1:]
                total = costs[fn]
                for event, value in zip(events, values):
                    if event in EVENTS:
                        total[EVENTS.index(event)] += int(value)
    return costs, calls


def pass_of(name):
    """(pass, kind) of a C function of _cd.pyx, or None."""
    if "_3_cd_" not in name:
        return None
    for marker, label in PASSES:
        if marker in name:
            fused = re.match(r"__pyx_fuse_([\d_]+)__", name)
            kind = None
            if fused and label in ("fused", "pass"):
                kind = KINDS[int(fused.group(1).split("_")[-1])]
            return label, kind
    return "other", None


def profile(degree, args, workdir):
    out = os.path.join(workdir, f"callgrind.{degree}.out")
    command = ["valgrind", "--tool=callgrind", "--cache-sim=yes",
               f"--D1={args.d1},{max(1, args.d1 // 4096)},64",
               f"--LL={args.ll},16,64", "--toggle-collect=*_cd_*cd_epoch",
               f"--callgrind-out-file={out}", sys.executable, __file__, "--child",
               str(degree), "--rows", str(args.rows), "--epochs", str(args.epochs),
               "--users", str(args.users), "--items", str(args.items),
               "--components", str(args.components)]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    costs, calls = read_callgrind(out)
    rows = collections.defaultdict(lambda: [0] * (len(EVENTS) + 1))
    total = 0
    for name, cost in costs.items():
        total += cost[0]
        key = pass_of(name) or ("other", None)
        row = rows[key]
        for e in range(len(EVENTS)):
            row[e] += cost[e]
        row[-1] += calls[name] if key[0] not in ("rows", "other") else 0
    return rows, total


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    recommender_arguments(parser, degrees=[2, 3])
    parser.set_defaults(rows=200_000)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--ll", type=int, default=cache_bytes(2) or 2**21,
                        help="simulated last-level cache bytes (default: the second level)")
    parser.add_argument("--d1", type=int, default=cache_bytes(1) or 2**15,
                        help="simulated first-level data cache bytes")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(args.child, args.rows, args.epochs, args.users, args.items, args.components)
        return
    if shutil.which("valgrind") is None:
        sys.exit("profile_cd.py needs valgrind (callgrind) on the PATH")
    print(f"X: {args.rows} rows, 5 nonzeros each; k = {args.components}; one thread; "
          f"{args.epochs} epochs; simulated caches: L1 {args.d1 // 1024} KiB, "
          f"LL {args.ll / 2**20:g} MiB")
    with tempfile.TemporaryDirectory() as workdir:
        for degree in args.degrees:
            rows, total = profile(degree, args, workdir)
            per = args.rows * args.epochs
            print()
            print(f"degree {degree}: {total / args.epochs / 1e6:.0f} million instructions "
                  f"per epoch = {total / per:.0f} per row")
            print(f"{'pass':>8} {'kind':>9} {'calls':>6} {'instr/row':>10} {'loads/row':>10} "
                  f"{'stores/row':>11} {'L1 miss':>8} {'LL miss':>8} {'share':>6}")
            for (label, kind), row in sorted(rows.items(), key=lambda item: -item[1][0]):
                calls = row[-1] / args.epochs
                if row[0] < 0.001 * total:
                    continue
                # Per row and per call for the passes over the rows; per row of X and
                # epoch for the rest.
                scale = per * (calls if label in ("fused", "pass", "fill") and calls
                               else 1)
                misses_l1 = (row[EVENTS.index("D1mr")] + row[EVENTS.index("D1mw")]) / scale
                misses_ll = (row[EVENTS.index("DLmr")] + row[EVENTS.index("DLmw")]) / scale
                print(f"{label:>8} {kind or '-':>9} {round(calls) if calls else '-':>6} "
                      f"{row[0] / scale:>10.1f} {row[1] / scale:>10.1f} "
                      f"{row[2] / scale:>11.1f} {misses_l1:>8.2f} {misses_ll:>8.2f} "
                      f"{row[0] / total:>6.1%}")


if __name__ == "__main__":
    main()
