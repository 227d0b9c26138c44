"""Helpers shared by the benchmark scripts (imported from their own folder)."""
import glob
import os
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np


def recommender_arguments(parser, degrees):
    """The command-line options of the recommender-shaped data (``make_recommender``),
    the rank and the degrees to run."""
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--users", type=int, default=50_000)
    parser.add_argument("--items", type=int, default=30_000)
    parser.add_argument("--components", type=int, default=10)
    parser.add_argument("--degrees", type=int, nargs="+", default=degrees)


# The MovieLens releases the scripts read: the folder and the ratings file of each.
MOVIELENS = {"100k": ("ml-100k", "u.data"), "1m": ("ml-1m", "ratings.dat")}
SHARED_MOVIELENS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "shared", "data", "movielens")


def movielens_folder(version="100k"):
    """The default of a script's ``--data``: the release's folder in polylite's data
    folder (where ``fetch_movielens`` keeps it: $POLYLITE_DATA, else ~/polylite_data),
    else the one in ../shared/data/movielens next to the source tree, else (neither
    there) the data folder's, which :func:`movielens_missing` then explains."""
    from polylite.datasets import get_data_home
    name, ratings = MOVIELENS[version]
    home = os.path.join(get_data_home(), name)
    shared = os.path.normpath(os.path.join(SHARED_MOVIELENS, name))
    if not os.path.exists(os.path.join(home, ratings)) and \
            os.path.exists(os.path.join(shared, ratings)):
        return shared
    return home


def movielens_missing(path, version="100k"):
    """None when the folder ``path`` holds the release's ratings, else the line a script
    prints before it skips the data: how to download it."""
    if os.path.exists(os.path.join(path, MOVIELENS[version][1])):
        return None
    return (f"MovieLens {version.upper()} not found at {os.path.normpath(path)}: skipped. "
            f"Download it once with python -c \"from polylite.datasets import "
            f"fetch_movielens; fetch_movielens('{version}')\" (into the data folder, "
            f"$POLYLITE_DATA or ~/polylite_data), or give its folder with --data")


def timings(fn, repeat=1, clock=time.perf_counter):
    """Seconds of ``repeat`` successive calls of ``fn()``, as a list: wall-clock seconds,
    or those of another ``clock`` (``time.process_time``: the process's CPU seconds)."""
    times = []
    for _ in range(repeat):
        start = clock()
        fn()
        times.append(clock() - start)
    return times


def proc_status_kib(field):
    """A field of /proc/self/status in KiB (VmRSS, VmHWM, RssAnon, RssFile...)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def reset_peak_rss():
    """Reset VmHWM to the current RSS; True when the kernel allowed it."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def cache_bytes(level=None):
    """Size in bytes of the CPU's data cache of ``level`` (1, 2, 3; None: the last level)
    seen by cpu0 (Linux sysfs), or None."""
    best = (0, None)
    for folder in glob.glob("/sys/devices/system/cpu/cpu0/cache/index*"):
        try:
            with open(folder + "/level") as f:
                found = int(f.read())
            with open(folder + "/type") as f:
                kind = f.read().strip()
            with open(folder + "/size") as f:
                size = f.read().strip()
        except (OSError, ValueError):
            continue
        if kind == "Instruction" or (level is not None and found != level):
            continue
        scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(size[-1:], 1)
        best = max(best, (found, int(size.rstrip("KMG")) * scale))
    return best[1]


def stream_copy(n_bytes):
    """(copy, moved): ``copy(threads=1)`` copies a float64 array of ``n_bytes`` into another
    (``np.copyto``, split among ``threads`` threads); ``moved`` is the bytes one copy reads
    plus the bytes it writes.  Timed with :func:`timings`, moved / seconds is the machine's
    streaming memory bandwidth, when ``n_bytes`` is several times the last-level cache."""
    src = np.full(n_bytes // 8, 1.0)
    dst = np.full_like(src, 0.0)  # (its pages touched: no page faults in the copies)
    pools = {}

    def part(bounds, t):
        np.copyto(dst[bounds[t]:bounds[t + 1]], src[bounds[t]:bounds[t + 1]])

    def copy(threads=1):
        if threads <= 1:
            np.copyto(dst, src)
            return
        if threads not in pools:
            pools[threads] = ThreadPoolExecutor(threads)
        bounds = np.linspace(0, src.size, threads + 1).astype(np.intp)
        list(pools[threads].map(lambda t: part(bounds, t), range(threads)))

    return copy, src.nbytes + dst.nbytes
