"""SGD and AdaGrad speed: seconds per epoch against X @ P on recommender-shaped data.

Data (as bench_cd.py): 10^6 rows, one-hot user (50,000 levels) and item (30,000 levels)
fields with power-law popularity and 3 numeric columns (5 nonzeros per row); k = 10;
degrees 2..5 (separate factor matrices per degree: degree m carries m - 1 blocks);
solvers "sgd" (invscaling schedule) and "adagrad", batch_size 1, eta0 = 0.001 (small, so
that nothing diverges on this data), tol = 0, 3 epochs, init_scale 0.1 (as bench_cd.py).

"s/epoch" is the median time of the solver's epochs within one fit, timed by wrapping
``polylite._sgd.sgd_epoch`` (the Cython pass alone: not the shuffle, the divergence
checks or the objective); "fit s/epoch" is the whole fit's wall time divided by its
epochs.  "ns/(nnz*k)" divides s/epoch by nonzeros x components (whatever the degree, as
bench_cd.py).  The ratio divides s/epoch by the median time of ``X @ P`` (scipy, d x k
dense P of the same dtype) measured in the same process: 5 times before the fit, twice
right after each epoch (inside the wrapper, outside both timings and the peak memory) and
5 times after the fit, so that both see the same machine load (on a shared machine the
absolute times are noisy).  "train RMSE" is the fitted model's RMSE on the training rows:
a divergence check, not a quality measure (3 epochs at a small step size).

Peak memory: measured, not estimated -- one fresh subprocess per configuration (dtype,
solver, degree), reading the kernel's counters.  The child generates the data, calls
``malloc_trim``, notes VmRSS, resets the peak-RSS counter (``echo 5 >
/proc/self/clear_refs``), fits, and reports VmHWM (the peak RSS since the reset) minus
that VmRSS.  This counts whatever the fit touches: NumPy arrays (parameters, AdaGrad
accumulators, predictions, the shuffle order, the copies the driver keeps to measure the
largest change) and the C buffers ``sgd_epoch`` mallocs for each pass, as pages actually
touched, whatever the current _sgd.pyx allocates.  Children run with glibc's mmap
threshold fixed at 128 KiB (MALLOC_MMAP_THRESHOLD_), so freed arrays leave the resident
set instead of being reused unseen.  (Plain ``resource.getrusage`` ru_maxrss is not used
directly: it never decreases, so data generation's peak would hide the fit's, and a
child's value starts from its parent's at exec.  It is the fallback, flagged in the
output, where clear_refs is not writable.)  "peak/X" divides by the bytes of X
(data + indices + indptr).

    python benchmarks/bench_sgd.py [--rows 1000000] [--degrees 2 3 4 5] [--epochs 3]
                                   [--solvers sgd adagrad] [--dtypes float64 float32]
"""
import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
import warnings

import numpy as np

from _timing import proc_status_kib, recommender_arguments, reset_peak_rss, timings

# Target ratios of degree-2 SGD and AdaGrad epochs to X @ P (float64 rows); other degrees
# and float32 are informational.  AdaGrad adds a square root and a division per
# coordinate (k per nonzero), which go through the CPU's divider: 1.5-2x X @ P on
# top of the SGD pass at k = 10 here.
TARGETS = {("sgd", 2): 3.0, ("adagrad", 2): 4.0}
TARGET_NOTE = ("targets at degree 2, float64: sgd <= 3x X @ P, adagrad <= 4x "
               "(a widely used C++ FM library's SGD spends about 7x)")


# ---------------------------------------------------------------- child: one configuration

def _malloc_trim():
    """Return freed heap memory to the kernel, so that VmRSS is the live set (glibc)."""
    try:
        import ctypes
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def run_config(cfg):
    """Generate the data, fit one configuration, return the measurements (a dict)."""
    import gc

    from polylite import FactorizationMachineRegressor
    from polylite._engine import _sgd
    from polylite.datasets import make_recommender

    epoch_times, xp_times, xp_in_fit = [], [], [0.0]
    peak_kib = [0]
    can_reset = reset_peak_rss()
    _epoch = _sgd.sgd_epoch

    def timed_epoch(*args, **kwargs):
        start = time.perf_counter()
        out = _epoch(*args, **kwargs)
        epoch_times.append(time.perf_counter() - start)
        if can_reset:
            # X @ P right after each epoch, so that the ratio sees the same machine load;
            # its time is taken out of the fit's wall time and its n x k output out of
            # the peak (peak so far noted, X @ P, peak counter reset).
            peak_kib[0] = max(peak_kib[0], proc_status_kib("VmHWM"))
            start = time.perf_counter()
            xp_times.extend(timings(lambda: X @ P, 2))
            xp_in_fit[0] += time.perf_counter() - start
            reset_peak_rss()
        return out

    _sgd.sgd_epoch = timed_epoch  # polylite._solvers calls it as _sgd.sgd_epoch

    dtype = np.dtype(cfg["dtype"])
    k = cfg["components"]
    X, y = make_recommender(cfg["rows"], cfg["users"], cfg["items"], 3, dtype=dtype,
                            random_state=0)
    P = np.random.default_rng(0).normal(size=(X.shape[1], k)).astype(dtype)
    X @ P                                           # warm-up
    xp_times += timings(lambda: X @ P, 5)
    fm = FactorizationMachineRegressor(
        degree=cfg["degree"], n_components=k, solver=cfg["solver"], eta0=cfg["eta0"],
        batch_size=cfg["batch_size"], max_iter=cfg["epochs"], tol=0, random_state=0,
        init_scale=0.1)
    warnings.simplefilter("ignore")
    gc.collect()
    _malloc_trim()
    rss_before = proc_status_kib("VmRSS")
    maxrss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    reset = reset_peak_rss()
    status = "ok"
    start = time.perf_counter()
    try:
        fm.fit(X, y)
    except FloatingPointError as exc:
        status = "diverged: " + str(exc).split(";")[0]
    fit_time = time.perf_counter() - start - xp_in_fit[0]
    if reset:
        peak = (max(peak_kib[0], proc_status_kib("VmHWM")) - rss_before) * 1024
        memory_method = "VmHWM - VmRSS (clear_refs reset)"
    else:
        peak = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - maxrss_before) * 1024
        memory_method = "ru_maxrss delta (fallback)"
    xp_times += timings(lambda: X @ P, 5)
    rmse = None
    if status == "ok":
        rmse = float(np.sqrt(np.mean((fm.predict(X) - y) ** 2)))
    return {
        "epoch_times": epoch_times, "fit_time": fit_time, "xp": float(np.median(xp_times)),
        "nnz": int(X.nnz), "n_rows": int(X.shape[0]), "n_features": int(X.shape[1]),
        "x_bytes": int(X.data.nbytes + X.indices.nbytes + X.indptr.nbytes),
        "peak": int(peak), "memory_method": memory_method, "status": status,
        "rmse": rmse, "y_std": float(np.std(y)),
    }


# ---------------------------------------------------------------- parent: the tables

def spawn(cfg):
    """Run one configuration in a fresh interpreter; its result, or an error dict."""
    # A fixed mmap threshold: large arrays are mmap'd and given back when freed, so the
    # resident set follows the live memory (glibc otherwise raises the threshold and keeps
    # freed blocks in the heap, where a later allocation reuses them unseen).
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="131072")
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--child",
                           json.dumps(cfg)], capture_output=True, text=True, env=env)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {"status": f"failed (exit {proc.returncode}): {tail}"}
    return json.loads(lines[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    recommender_arguments(parser, degrees=[2, 3, 4, 5])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--solvers", nargs="+", default=["sgd", "adagrad"],
                        choices=["sgd", "adagrad"])
    parser.add_argument("--dtypes", nargs="+", default=["float64", "float32"],
                        choices=["float64", "float32"])
    parser.add_argument("--eta0", type=float, default=0.001)
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child:
        print(json.dumps(run_config(json.loads(args.child))))
        return

    import polylite  # noqa: F401  (rebuild the extension once, before timing anything)
    print(f"polylite SGD/AdaGrad epochs vs scipy X @ P  |  "
          f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"numpy {np.__version__}")
    print(f"data: make_recommender({args.rows}, {args.users} users, {args.items} items, "
          f"3 numeric), 5 nonzeros per row; k = {args.components}; eta0 = {args.eta0}, "
          f"batch_size = {args.batch_size}, {args.epochs} epochs, tol = 0; "
          f"one fresh process per row")
    print(TARGET_NOTE)
    print()
    header = (f"{'dtype':<8} {'solver':<8} {'degree':>6} {'s/epoch':>8} {'ns/(nnz*k)':>11} "
              f"{'X@P ms':>7} {'x (X@P)':>8} {'fit s/epoch':>12} {'peak MiB':>9} "
              f"{'peak/X':>7} {'train RMSE':>11}  target")
    print(header)
    print("-" * len(header))
    results = {}
    methods = set()
    x_mib = x_dtype = None
    y_std = None
    all_ok = True
    for dtype in args.dtypes:
        for solver in args.solvers:
            for degree in args.degrees:
                cfg = dict(dtype=dtype, solver=solver, degree=degree, rows=args.rows,
                           users=args.users, items=args.items, components=args.components,
                           epochs=args.epochs, eta0=args.eta0, batch_size=args.batch_size)
                r = spawn(cfg)
                results[dtype, solver, degree] = r
                label = f"{dtype:<8} {solver:<8} {degree:>6}"
                if "epoch_times" not in r or not r["epoch_times"]:
                    print(f"{label}  {r['status']}", flush=True)
                    all_ok = False
                    continue
                methods.add(r["memory_method"])
                y_std = r["y_std"]
                if dtype == "float64" or x_mib is None:
                    x_mib = r["x_bytes"] / 2**20
                    x_dtype = dtype
                epoch = float(np.median(r["epoch_times"]))
                nk = r["nnz"] * args.components
                ratio = epoch / r["xp"]
                target = TARGETS.get((solver, degree)) if dtype == "float64" else None
                verdict = ""
                if target is not None:
                    ok = ratio <= target
                    all_ok &= ok
                    verdict = f"<= {target:g}x " + ("ok" if ok else "MISSED")
                if r["status"] != "ok":
                    verdict = (verdict + "  " + r["status"]).strip()
                rmse = f"{r['rmse']:.4f}" if r["rmse"] is not None else "-"
                print(f"{label} {epoch:>8.3f} {epoch / nk * 1e9:>11.2f} "
                      f"{r['xp'] * 1e3:>7.1f} {ratio:>8.1f} "
                      f"{r['fit_time'] / len(r['epoch_times']):>12.3f} "
                      f"{r['peak'] / 2**20:>9.0f} {r['peak'] / r['x_bytes']:>7.2f} "
                      f"{rmse:>11}  {verdict}", flush=True)
    print()
    if y_std is not None:
        print(f"std of y: {y_std:.4f}; X ({x_dtype}): {x_mib:.0f} MiB")
    print("peak memory: " + "; ".join(sorted(methods)))
    print("degree-2 targets met (float64)" if all_ok else "some targets MISSED or runs failed")

    if "float64" in args.dtypes and "float32" in args.dtypes:
        print()
        print("float32 / float64")
        print("(time f32/f64 compares seconds; 'x (X@P)' compares each run's ratio to its "
              "own X @ P, which cancels some of the machine's load)")
        header = (f"{'solver':<8} {'degree':>6} {'s/epoch f64':>12} {'s/epoch f32':>12} "
                  f"{'time f32/f64':>13} {'x (X@P) f64':>12} {'x (X@P) f32':>12} "
                  f"{'peak MiB f64':>13} {'peak MiB f32':>13} {'peak f32/f64':>13}")
        print(header)
        print("-" * len(header))
        for solver in args.solvers:
            for degree in args.degrees:
                a = results.get(("float64", solver, degree), {})
                b = results.get(("float32", solver, degree), {})
                if not a.get("epoch_times") or not b.get("epoch_times"):
                    continue
                ta, tb = np.median(a["epoch_times"]), np.median(b["epoch_times"])
                print(f"{solver:<8} {degree:>6} {ta:>12.3f} {tb:>12.3f} {tb / ta:>13.2f} "
                      f"{ta / a['xp']:>12.1f} {tb / b['xp']:>12.1f} "
                      f"{a['peak'] / 2**20:>13.0f} {b['peak'] / 2**20:>13.0f} "
                      f"{b['peak'] / max(a['peak'], 1):>13.2f}")


if __name__ == "__main__":
    main()
