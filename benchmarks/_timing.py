"""Helpers shared by the benchmark scripts (imported from their own folder)."""
import time


def recommender_arguments(parser, degrees):
    """The command-line options of the recommender-shaped data (``make_recommender``),
    the rank and the degrees to run."""
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--users", type=int, default=50_000)
    parser.add_argument("--items", type=int, default=30_000)
    parser.add_argument("--components", type=int, default=10)
    parser.add_argument("--degrees", type=int, nargs="+", default=degrees)


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
