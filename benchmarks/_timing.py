"""Timing helper shared by the benchmark scripts (imported from their own folder)."""
import time


def timings(fn, repeat=1):
    """Wall-clock seconds of ``repeat`` successive calls of ``fn()``, as a list."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times
