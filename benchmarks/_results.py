"""Result files of the benchmarks: what a run measured, on which machine, by which command.

Each benchmark that feeds the documentation writes one JSON file into
``benchmarks/results/`` (``--output``)::

    {"benchmark": name, "title": ..., "date": "YYYY-MM-DD",
     "command": the command line that reproduces it,
     "machine": {"cpu", "cores", "memory_gib", "os", "python"},
     "versions": {"polylite", "numpy", "scipy", peers...},
     "settings": {...}, "tables": [{"title", "columns", "rows", "note"}], ...}

``benchmarks/report.py`` draws the docs' tables and figures from these files, so the pages
are rebuilt from the data, never retyped.
"""
import datetime
import json
import os
import platform
import shlex
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")


def machine():
    """The CPU model, core count, memory, OS and Python of this machine."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    memory = None
    try:
        memory = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "memory_gib": memory,
            "os": f"{platform.system()} {platform.release()}",
            "python": platform.python_version()}


def versions(*peers):
    """Versions of polylite, NumPy, SciPy and the peer packages named (if installed)."""
    from importlib import metadata
    out = {}
    for name in ("polylite", "numpy", "scipy", *peers):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


def command_line(argv=None):
    """The command that reproduces this run, from the repository root."""
    argv = sys.argv if argv is None else argv
    script = os.path.relpath(os.path.abspath(argv[0]), os.path.dirname(HERE))
    return shlex.join(["python", script, *argv[1:]])


def table(title, columns, rows, note=None):
    """One table of a result file: ``rows`` are lists of cells (numbers or strings)."""
    out = {"title": title, "columns": list(columns), "rows": [list(r) for r in rows]}
    if note:
        out["note"] = note
    return out


def save(path, benchmark, title, tables, settings, peers=(), command=None, **extra):
    """Write a result file (see the module docstring) and say where."""
    payload = {"benchmark": benchmark, "title": title,
               "date": datetime.date.today().isoformat(),
               "command": command or command_line(), "machine": machine(),
               "versions": versions(*peers), "settings": settings, "tables": tables,
               **extra}
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(payload, f, indent=1)
        f.write("\n")
    print(f"results written to {path}")
    return payload
