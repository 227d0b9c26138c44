"""Coordinate descent speed: seconds per epoch against X @ P on recommender-shaped data.

Data: 10^6 rows, one-hot user (50,000 levels) and item (30,000 levels) fields with power-law
popularity and 3 numeric columns (5 nonzeros per row); k = 10; degrees 2, 3, 4 (separate
factor matrices per degree, so degree m updates m - 1 blocks).  Every second epoch of a
fit is measured ("s/epoch": their median), and right after each of them ``X @ P``
(scipy, d x k dense P, the fastest of three: the first product after an epoch finds X
out of cache) and the bandwidth copy below are timed, so that each measured epoch
follows another epoch, as in a fit, and not a copy that emptied the cache.  The ratio
"x (X@P)" is the median over the measured epochs of each one's time over the product's
right after it (the speed of a shared machine drifts, even within a fit); "X@P ms" is
the median of those products.  "fit s/epoch" is the whole fit's wall time (validation,
regrouping of the nonzeros by column groups, the first predictions, objective per
epoch; not the timings between the epochs) divided by its epochs.  Peak memory: the
fit's peak traced by tracemalloc (NumPy buffers, which include the solver's per-row
records and the regrouped copy of the nonzeros), against the size of X.  ``--n-jobs 1 2``
repeats every degree with each number of threads (``n_jobs``); X @ P (SciPy) always runs
on one.  ``--lower-degrees separate shared none`` repeats it with each way of modelling
the lower degrees (the default, separate, fits one factor matrix per degree 2..m; shared
fits one matrix with dummy features; none fits degree m only).

Memory bandwidth.  The header gives the machine's streaming bandwidth, measured in the
same run: ``np.copyto`` of a float64 array of max(256 MiB, 8 x the last-level cache)
(``--copy-mib`` sets another size) into another, median of 7 copies, counted as bytes
read + bytes written (2 x the array).
"GB/s" in the table is the same copy on the fit's number of threads, once after each
measured epoch, like X @ P (the median over them).

Bytes per epoch.  "GB/epoch" is a lower bound of the bytes one epoch moves, computed from
the arguments of the fit's last epoch (its column groups, parameters, loss and weights) by
walking the passes of polylite/_engine/_cd.pyx as it runs them.  Each pass counts
every 64-byte line it visits once: a line it reads once, a line it updates twice (read
and written back), an array it only writes (the records at the start, y_pred at the end)
once.  A row's record holds ``stride`` = 1 + label? + weight? + 2 w doubles
(w = degree - 1 for an ANOVA block, 2 for all-subsets); the linear and intercept passes
use stride 1 + label? + weight?.  Each group's stored entry arrays (rows, columns,
values) are read in its gradient pass and again in its update pass.  A group with an
entry in every row reads and writes every record in a pass it shares with the next
group's gradients (also across components); a sparser group reads its rows' record
lines in pass 1, reads and writes them in pass 2.  Per component and group, the
columns' scratch records (one line each, per thread of the pass) and the lines of
the parameter column count once.  The first component of each block adds a fill pass
(the CSR rows read; every record read and written; the parameter column read);
a block whose record size changes adds a pass that moves the records (read and written).
The intercept takes a read pass and a shift (read and written); the epoch starts by
writing the records from y and y_pred, and ends by reading them to write y_pred.  On
this data every group (user field, item field, one per numeric column) has an entry in
every row, so a block of degree t with G groups and k components moves about

    n (8 s (2 k G + 5) + 2 k E) + CSR + per-column terms,   s = 1 + 2 (t - 1)

bytes (E: the entry bytes per row of all groups, 32 with int32 columns and float64
values; the 5: the lone first gradient pass, the fill pass and the move of the records,
one, two and two record sizes).  It is a lower bound of the traffic when nothing stays in
cache from one pass to the next: the scratch records of a one-hot field's columns, read
at random, and the lines the prefetchers fetch ahead can add more; a last-level cache
(its size is in the header) can keep part of one pass's data for the next, so at small
sizes an epoch can beat it.  "bound s" is GB/epoch at the measured GB/s; "x bound" the
measured s/epoch over it (1 = at the memory bandwidth limit); "bound x(X@P)" is the bound
as a multiple of X @ P: no epoch that moves these bytes can have a ratio below it.  Each
is the median over the measured epochs of the figure from the copy and X @ P after it.
"passes" counts the epoch's passes over the records.  Relational input and the
polynomial kernel are not modelled ("-").

Each kind of pass.  After the table, one per fit splits the epoch by part of the model
(the linear weights, with the intercept and the records' set-up and store; each factor
block) and kind of pass (``polylite._engine._cd.PASS_KINDS``: a group's updates fused
with the next group's gradients, gradients or updates alone, the per-column work, the
fill of a component's caches from the CSR rows, the passes over the records alone):
its seconds per epoch (cd_epoch's ``pass_seconds``, a clock read around each pass; the
median over the epochs), its share of the timed passes, its bytes (the lower bound
above, split the same way), the bandwidth it reached and how far it is from the copy's
("x bound", as for the epoch).

    python benchmarks/bench_cd.py [--rows 1000000] [--epochs 6] [--dtype float64]
                                  [--n-jobs 1 2] [--lower-degrees separate shared none]
                                  [--copy-mib MIB]
"""
import argparse
import itertools
import time
import tracemalloc
import warnings

import numpy as np

from polylite import FactorizationMachineRegressor
from polylite._engine._losses import LOSSES
from polylite.kernels import KERNELS
from polylite._engine import _cd, solvers as _solvers
from polylite.datasets import make_recommender

from _timing import cache_bytes, recommender_arguments, stream_copy, timings

LINE = 64  # bytes per cache line
_epoch = _cd.cd_epoch
epoch_times = []  # the measured epochs' seconds (see timed_epoch)
last_epoch = {}  # the data, problem and parameters of the last epoch
probes = {}  # "xp", "copy": what is timed right after every second epoch
probe_times = []  # (X @ P seconds, copy seconds) after each measured epoch
probe_cost = [0.0]  # seconds spent on them during the fit
peak_seen = [0]  # the fit's traced peak before each probe
pass_times = []  # each measured epoch's pass_seconds: (part, kind of pass) -> seconds
epochs_run = [0]


def timed_epoch(data, problem, params, *args, **kwargs):
    """The solver's epoch, timed (installed in place of polylite._cd.cd_epoch), with the
    seconds of each kind of pass.  Every second epoch is measured, and followed by the
    probes: each measured epoch follows another epoch, as in a fit, not a copy that
    emptied the cache."""
    seconds = np.zeros((params.P.shape[0] + 1, len(_cd.PASS_KINDS)))
    start = time.perf_counter()
    out = _epoch(data, problem, params, *args, pass_seconds=seconds, **kwargs)
    elapsed = time.perf_counter() - start
    last_epoch.update(data=data, problem=problem, params=params)
    epochs_run[0] += 1
    if epochs_run[0] % 2 == 1:
        return out
    epoch_times.append(elapsed)
    pass_times.append(seconds)
    if probes:
        # X @ P and the copy right after the epoch, out of the fit's peak memory.
        start = time.perf_counter()
        peak_seen[0] = max(peak_seen[0], tracemalloc.get_traced_memory()[1])
        probe_times.append((min(timings(probes["xp"], 3)),
                            timings(probes["copy"])[0]))
        tracemalloc.reset_peak()
        probe_cost[0] += time.perf_counter() - start
    return out


_cd.cd_epoch = timed_epoch


def distinct(lines):
    """Number of distinct values in a nondecreasing integer array."""
    return int(lines.size > 0) + int(np.count_nonzero(np.diff(lines)))


class EpochBytes:
    """The lower bound of the bytes one cd_epoch(data, problem, params) moves (see the
    module docstring), walking its passes: ``total`` bytes, ``row_passes`` passes over
    the per-row records, and ``by_pass[part, kind]`` the bytes of each kind of pass
    (cd_epoch's PASS_KINDS) of each part of the model (0: the intercept, the linear
    weights and the records set up and stored; b + 1: factor block b)."""

    def __init__(self, data, problem, params, thread_min_entries=8192):
        self.groups = G = data.groups
        self.n = data.X.shape[0]
        self.sizes = np.diff(G.group_ptr)
        self.widths = np.diff(G.columns_ptr)
        # Bytes of a group's stored entry arrays (rows, columns, values), read per pass.
        self.entry_bytes = (np.diff(G.row_ptr) * G.rows.itemsize
                            + np.diff(G.col_ptr) * G.columns.itemsize
                            + np.diff(G.val_ptr) * G.values.itemsize)
        self.threads = [data.n_threads if size >= data.n_threads * thread_min_entries
                        else 1 for size in self.sizes]
        self._lines = {}
        self.total = 0
        self.row_passes = 0
        self.part = 0
        self.by_pass = np.zeros((params.P.shape[0] + 1, len(_cd.PASS_KINDS)))
        self._walk(data, problem, params)

    def add(self, kind, nbytes):
        self.total += nbytes
        self.by_pass[self.part, _cd.PASS_KINDS.index(kind)] += nbytes

    # -- what one pass moves --
    def record_lines(self, g, stride):
        """Lines of the records of group g's rows (g None: every row), ``stride`` bytes
        apart."""
        if g is None or self.sizes[g] == self.n:
            return -(-self.n * stride // LINE)
        if (g, stride) not in self._lines:
            rows = self.groups.rows[self.groups.row_ptr[g]:self.groups.row_ptr[g + 1]]
            rows = rows.astype(np.int64) * stride
            # Each record's first and last line, in increasing order.
            ends = np.column_stack([rows // LINE, (rows + stride - 1) // LINE]).ravel()
            self._lines[g, stride] = distinct(ends)
        return self._lines[g, stride]

    def rows_pass(self, kind, stride, write, g=None, *entries):
        """A pass of ``kind`` over the records (of group g's rows) reading the entry
        arrays of ``entries`` (groups); ``write``: it updates the records."""
        self.add(kind, self.record_lines(g, stride) * LINE * (2 if write else 1)
                 + sum(int(self.entry_bytes[e]) for e in entries))
        self.row_passes += 1

    def column_lines(self, param, g, s):
        """Once per group and component: its columns' scratch records (one line each,
        per thread of its passes) and the lines of parameter column s of ``param``
        (shape (d, k)) at its columns."""
        G = self.groups
        columns = G.group_columns[G.columns_ptr[g]:G.columns_ptr[g + 1]].astype(np.int64)
        offsets = (columns * param.shape[1] + s) * param.itemsize
        self.add("columns", self.widths[g] * self.threads[g] * LINE
                 + distinct(offsets // LINE) * LINE)

    # -- the epoch --
    def _groups(self, stride, param, s, keep_last):
        """_cd.pyx's _cd_groups: a sweep over the groups' columns; a group with an entry
        in every row leaves its update pass pending, to share the next gradient pass."""
        for g in range(self.sizes.size):
            if self.sizes[g] == 0:
                continue
            self.column_lines(param, g, s)
            full = self.sizes[g] == self.n
            if self.pending is not None and full:
                self.rows_pass("fused", stride, True, None, self.pending, g)
                self.pending = None
            else:
                self._flush(stride)
                self.rows_pass("gradients", stride, False, g, g)
            if full:
                self.pending = g
            else:
                self.rows_pass("updates", stride, True, g, g)
        if not keep_last:
            self._flush(stride)

    def _flush(self, stride):
        if self.pending is not None:
            self.rows_pass("updates", stride, True, None, self.pending)
            self.pending = None

    def _walk(self, data, problem, params):
        n, X, P = self.n, data.X, params.P
        n_blocks, d, k = P.shape
        n_dummy = params.gamma.shape[0]
        sw = problem.sample_weight
        uniform = n > 0 and sw[0] > 0 and bool(np.all(sw == sw[0]))
        cache = 1 + (problem.loss != LOSSES["squared"]) + (not uniform)
        vector = 8 * n  # bytes of y, y_pred or the weights
        self.pending = None
        # The records written from y, y_pred (and the weights).
        stride = 8 * cache
        self.add("records",
                 vector * (2 if uniform else 3) + self.record_lines(None, stride) * LINE)
        self.row_passes += 1
        if problem.fit_intercept and n > 0:
            self.rows_pass("records", stride, False)  # its sums
            self.rows_pass("records", stride, True)   # the predictions shifted
        if problem.fit_linear and d > 0:
            self._groups(stride, params.w.reshape(d, 1), 0, False)
        first_full = self.sizes.size > 1 and n > 0 and self.sizes[0] == n
        csr = X.data.nbytes + X.indices.nbytes + X.indptr.nbytes
        for b in range(n_blocks):
            self.part = b + 1
            width = 2 if problem.kernel == KERNELS["all-subsets"] else problem.degrees[b] - 1
            dummies = n_dummy if b == 0 else 0
            if 8 * (cache + 2 * width) != stride:
                # The records moved to their new size (in place: read and written).
                stride = 8 * (cache + 2 * width)
                self.rows_pass("records", stride, True)
            for s in range(k):
                has_next = s + 1 < k
                if s == 0:
                    # The first component's caches from the CSR rows (its factors
                    # gathered first: a line of P per column, d doubles written).
                    self.rows_pass("fill", stride, True)
                    offsets = (np.arange(d, dtype=np.int64) * k + s) * P.itemsize
                    self.add("fill", csr + distinct(offsets // LINE) * LINE + 8 * d)
                if not first_full or dummies > 0:
                    self._flush(stride)
                if has_next and not first_full:
                    self.rows_pass("records", stride, True)  # the next caches started
                for _ in range(dummies):
                    self.rows_pass("gradients", stride, False)
                    self.rows_pass("updates", stride, True)
                self._groups(stride, P[b], s, has_next and first_full and dummies == 0)
        # The predictions out: the records and y read, y_pred written.
        self.part = 0
        self.add("records", self.record_lines(None, stride) * LINE + 2 * vector)
        self.row_passes += 1


def epoch_bytes(data, problem, params):
    """EpochBytes of an epoch, or None where the model does not apply (relational input,
    the polynomial kernel)."""
    if data.blocks or problem.kernel == KERNELS["polynomial"]:
        return None
    return EpochBytes(data, problem, params)


def print_passes(title, degrees, seconds, nbytes, bandwidth):
    """The table of each kind of pass of one fit: its seconds per epoch (the median over
    the epochs), its bytes (EpochBytes.by_pass), the bandwidth it reached and how far it
    is from the copy's (``bandwidth``); ``degrees``: the blocks'."""
    print()
    print(f"{title}: each kind of pass, per epoch (copy: {bandwidth / 1e9:.1f} GB/s)")
    print(f"{'part':>13} {'pass':>10} {'s/epoch':>8} {'share':>6} {'GB/epoch':>8} "
          f"{'GB/s':>6} {'x bound':>7}")
    total = seconds.sum()
    for part in range(seconds.shape[0]):
        name = "linear" if part == 0 else f"block {part - 1}"
        if part > 0:
            name += f" (m={degrees[part - 1]})"
        for kind, s, b in zip(_cd.PASS_KINDS, seconds[part], nbytes[part]):
            if s == 0 and b == 0:
                continue
            rate = f"{b / s / 1e9:>6.1f}" if s > 0 else f"{'-':>6}"
            bound = f"{s / (b / bandwidth):>7.1f}" if b > 0 else f"{'-':>7}"
            print(f"{name:>13} {kind:>10} {s:>8.4f} {s / total:>6.1%} {b / 1e9:>8.3f} "
                  f"{rate} {bound}")


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    recommender_arguments(parser, degrees=[2, 3, 4])
    parser.add_argument("--epochs", type=int, default=6,
                        help="epochs per fit; every second one is measured")
    parser.add_argument("--dtype", default="float64", choices=["float64", "float32"])
    parser.add_argument("--n-jobs", type=int, nargs="+", default=[1])
    parser.add_argument("--lower-degrees", nargs="+", default=["separate"],
                        choices=["separate", "shared", "none"])
    parser.add_argument("--copy-mib", type=int, default=None,
                        help="MiB of the bandwidth copy's array (default: max(256, 8 x "
                             "the last-level cache); a small one for a quick check)")
    args = parser.parse_args()
    dtype = np.dtype(args.dtype)

    X, y = make_recommender(args.rows, args.users, args.items, 3, dtype=dtype,
                            random_state=0)
    k = args.components
    P = np.random.default_rng(0).normal(size=(X.shape[1], k)).astype(dtype)
    xp = float(np.median(timings(lambda: X @ P, 7)))
    nnz = X.nnz
    x_bytes = X.data.nbytes + X.indices.nbytes + X.indptr.nbytes
    llc = cache_bytes()
    copy, moved = stream_copy(args.copy_mib * 2**20 if args.copy_mib
                              else max(2**28, 8 * (llc or 0)))
    copy()  # (first touch)
    bandwidth = moved / float(np.median(timings(copy, 7)))
    print(f"X: {X.shape[0]} x {X.shape[1]}, {nnz} nonzeros, {dtype}, "
          f"{x_bytes / 2**20:.0f} MiB; k = {k}")
    print(f"X @ P: {xp * 1e3:.1f} ms = {xp / (nnz * k) * 1e9:.2f} ns per nonzero x component")
    print(f"memory bandwidth: {bandwidth / 1e9:.1f} GB/s read + written (np.copyto of "
          f"{moved / 2**21:.0f} MiB, one thread, median of 7); last-level cache "
          + (f"{llc / 2**20:.0f} MiB" if llc else "unknown"))
    print()
    print(f"{'degree':>6} {'lower':>8} {'n_jobs':>6} {'s/epoch':>9} {'ns/(nnz*k)':>11} {'X@P ms':>7} {'x (X@P)':>8} "
          f"{'fit s/epoch':>12} {'peak MiB':>9} {'peak/X':>7} {'passes':>6} {'GB/epoch':>8} "
          f"{'GB/s':>5} {'bound s':>8} {'x bound':>7} {'bound x(X@P)':>12}")
    warnings.simplefilter("ignore")
    passes = []  # the per-pass figures of each fit, printed after the table
    for degree, lower, n_jobs in itertools.product(args.degrees, args.lower_degrees,
                                                   args.n_jobs):
        # (The copy on the fit's threads: cd_threads may take fewer than n_jobs.)
        threads = _solvers.cd_threads(n_jobs, X.shape[0], X.shape[1], x_bytes)
        probes.update(xp=lambda: X @ P, copy=lambda: copy(threads))
        fm = FactorizationMachineRegressor(degree=degree, n_components=k,
                                           max_iter=args.epochs, tol=0, random_state=0,
                                           init_scale=0.1, n_jobs=n_jobs,
                                           lower_degrees=lower)
        epoch_times.clear()
        epochs_run[0] = 0
        pass_times.clear()
        probe_times.clear()
        probe_cost[0] = peak_seen[0] = 0
        tracemalloc.start()
        start = time.perf_counter()
        fm.fit(X, y)
        fit_time = time.perf_counter() - start - probe_cost[0]
        peak = max(peak_seen[0], tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        probes.clear()
        epochs = np.array(epoch_times)
        xp_after = np.array([product for product, _ in probe_times])
        bandwidths = moved / np.array([seconds for _, seconds in probe_times])
        epoch = float(np.median(epochs))
        model = epoch_bytes(**last_epoch)
        degrees = list(last_epoch["problem"].degrees)
        last_epoch.clear()
        if model is None:
            traffic = (f"{'-':>6} {'-':>8} {np.median(bandwidths) / 1e9:>5.1f} {'-':>8} "
                       f"{'-':>7} {'-':>12}")
        else:
            bounds = model.total / bandwidths
            traffic = (f"{model.row_passes:>6} {model.total / 1e9:>8.2f} "
                       f"{np.median(bandwidths) / 1e9:>5.1f} {np.median(bounds):>8.3f} "
                       f"{np.median(epochs / bounds):>7.1f} "
                       f"{np.median(bounds / xp_after):>12.1f}")
        print(f"{degree:>6} {lower:>8} {n_jobs:>6} {epoch:>9.3f} {epoch / (nnz * k) * 1e9:>11.2f} "
              f"{np.median(xp_after) * 1e3:>7.1f} {np.median(epochs / xp_after):>8.1f} "
              f"{fit_time / epochs_run[0]:>12.3f} "
              f"{peak / 2**20:>9.0f} {peak / x_bytes:>7.2f} {traffic}")
        if model is not None:
            passes.append((f"degree {degree}, {lower}, n_jobs {n_jobs}", degrees,
                           np.median(pass_times, axis=0), model.by_pass,
                           float(np.median(bandwidths))))
    for title, degrees, seconds, nbytes, bandwidth in passes:
        print_passes(title, degrees, seconds, nbytes, bandwidth)


if __name__ == "__main__":
    main()
