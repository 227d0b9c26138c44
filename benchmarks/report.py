"""Tables and figures of the benchmark results, drawn from the files in ``results/``.

The documentation's benchmarks page calls this module at build time (so the page always
shows the data), and the README's headline table and figure come from it too::

    python benchmarks/report.py                   # every result as text tables
    python benchmarks/report.py --markdown NAME   # one result's tables in Markdown
    python benchmarks/report.py --figure PATH     # the headline figure (needs matplotlib)

A result file is written by a benchmark's ``--output`` (see ``_results.py``); the ranking
benchmark's files keep their own summary format, which :func:`tables` converts.
"""
import argparse
import json
import math
import os
import shlex

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")

# The result files of the benchmarks page, in its order.
PAGE = ("relational_movielens", "bayes_movielens", "bayes_ordinal_movielens",
        "bayes_variational_movielens",
        "ranking_movielens_1thread", "ranking_movielens", "threads")

_RANKING_METRICS = [("precision@10", "P@10"), ("recall@10", "R@10"),
                    ("ndcg@10", "nDCG@10"), ("map@10", "MAP@10"), ("auc", "AUC")]


def load(name):
    """The result file ``results/<name>.json``, as a dict."""
    with open(os.path.join(RESULTS, f"{name}.json")) as f:
        return json.load(f)


def available(name):
    return os.path.exists(os.path.join(RESULTS, f"{name}.json"))


def tables(result):
    """The result's tables: dicts of ``title``, ``columns``, ``rows`` and ``note``."""
    if "tables" in result:
        return result["tables"]
    return [_ranking_table(result)]


def _ranking_table(result):
    settings = result["settings"]
    rows = []
    for entry in result["summary"]:
        rows.append([entry["model"], entry["features"],
                     entry["epochs"] if entry["epochs"] is not None else "-",
                     *(entry[key] for key, _ in _RANKING_METRICS),
                     entry["fit_cpu_s"]])
    threads = settings["threads"]
    return {"title": (f"MovieLens 100K u1, positives = ratings >= "
                      f"{settings['positive_rating']}, k = {settings['components']}, "
                      f"{threads} thread{'s' if threads > 1 else ''}, mean of "
                      f"{len(settings['seeds'])} seeds"),
            "columns": ["model", "features", "epochs",
                        *(label for _, label in _RANKING_METRICS), "fit CPU s"],
            "rows": rows,
            "note": (f"each of the {settings['test_users']} test users' unrated items "
                     f"ranked ({settings['items']} items); ids: one-hot user and item; "
                     f"side: + age band, gender, occupation and genres; rated: + the "
                     f"items the user rated")}


def cell(value):
    """A table cell as text: 4 significant digits for floats, '-' for nothing."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float):
        if value == 0 or 1e-3 <= abs(value) < 1e5:
            digits = max(0, 3 - int(math.floor(math.log10(abs(value))))) if value else 0
            return f"{value:.{min(digits, 4)}f}"
        return f"{value:.3g}"
    return str(value)


def text(table):
    """A table as aligned plain text."""
    cells = [table["columns"]] + [[cell(v) for v in row] for row in table["rows"]]
    widths = [max(len(row[j]) for row in cells) for j in range(len(cells[0]))]
    lines = ["  ".join(c.rjust(w) if j else c.ljust(w) for j, (c, w) in
                       enumerate(zip(row, widths))) for row in cells]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join([table["title"], *lines] + ([table["note"]] if table.get("note")
                                                 else []))


def markdown(table):
    """A table in Markdown (the README's)."""
    lines = ["| " + " | ".join(table["columns"]) + " |",
             "|" + "---|" * len(table["columns"])]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in table["rows"]]
    return "\n".join(lines)


def command(result):
    """The command that reproduces the result (from the repository root), without the
    paths of the machine it ran on (see :func:`portable`)."""
    if result.get("command"):
        return portable(result["command"])
    settings = result["settings"]  # the ranking benchmark's files name their settings
    return (f"python benchmarks/bench_ranking.py --threads {settings['threads']} "
            f"--seeds {len(settings['seeds'])} --epochs {settings['epochs']}")


def portable(command):
    """``command`` with its absolute paths made portable: a path in the source tree
    relative to its root, any other "path/to/" and its last part (``--libfm
    /opt/libfm/bin/libFM`` becomes ``--libfm path/to/libFM``)."""
    root = os.path.dirname(HERE)
    words = []
    for word in shlex.split(command):
        option, equals, value = word.partition("=") if word.startswith("-") else \
            ("", "", word)
        if os.path.isabs(value):
            relative = os.path.relpath(value, root)
            value = (relative if not relative.startswith(os.pardir)
                     else "path/to/" + os.path.basename(value))
        words.append(option + equals + value)
    return shlex.join(words)


def machine_line(result):
    """Where and how the result was measured, in one sentence."""
    m = result["machine"]
    memory = f", {m['memory_gib']:.0f} GiB" if m.get("memory_gib") else ""
    versions = ", ".join(f"{k} {v}" for k, v in result.get("versions", {}).items() if v)
    date = f" on {result['date']}" if result.get("date") else ""
    return f"{m['cpu']}, {m['cores']} cores{memory}; {versions}{date}"


def _headline_ranking_row(row):
    """The ranking models of the headline: LightFM's WARP with and without side
    features, and polylite's WARP on ids (30 epochs), with side features (50) and with
    side features and the users' rated items (15)."""
    model, features, epochs = row[:3]
    return ((model == "LightFM WARP" and features in ("ids", "ids+side"))
            or (model == "polylite FM WARP" and (features, epochs) in (
                ("ids", 30), ("ids+side", 50), ("ids+side+rated", 15))))


def headline_table():
    """The README's table: polylite against the peers on the headline tasks, from the
    relational and the one-thread ranking result files."""
    rows = []
    if available("relational_movielens"):
        sweep, accuracy = tables(load("relational_movielens"))[:2]
        seconds = {row[0]: row[1] for row in sweep["rows"]}
        for name, rmse, _ in accuracy["rows"]:
            rows.append(["Bayesian FM, MovieLens 100K (relational, side features)", name,
                         f"RMSE {rmse:.4f}", f"{seconds[name]:.3f} CPU s per sweep"])
    if available("bayes_ordinal_movielens"):
        table = tables(load("bayes_ordinal_movielens"))[0]
        sweeps = table["columns"][-2]  # the longest chains' RMSE, then the fit seconds
        for encoding, model, *cells in table["rows"]:
            if encoding == "side" and model in ("polylite ordered probit",
                                                "myFM ordered probit"):
                rows.append(["Ratings as ordered levels, MovieLens 100K (side features, "
                             "five folds)", model, f"RMSE {cells[-2]:.4f} ({sweeps})",
                             f"{cells[-1]:.2f} CPU s fit"])
    if available("bayes_variational_movielens"):
        table = tables(load("bayes_variational_movielens"))[0]
        for model, rmse, _, seconds, _, _ in table["rows"]:
            if model in ("polylite variational", "myFM variational"):
                rows.append(["Variational Bayesian FM, MovieLens 100K (one-hot)", model,
                             f"RMSE {rmse:.4f}", f"{seconds:.2f} CPU s fit"])
    if available("ranking_movielens_1thread"):
        table = tables(load("ranking_movielens_1thread"))[0]
        columns = table["columns"]
        p10, auc, cpu = (columns.index(c) for c in ("P@10", "AUC", "fit CPU s"))
        for row in table["rows"]:
            if _headline_ranking_row(row):
                rows.append(["Ranking from clicks, MovieLens 100K (1 thread)",
                             f"{row[0].replace(' FM', '')} {row[2]} epochs, {row[1]}",
                             f"P@10 {row[p10]:.3f}, AUC {row[auc]:.3f}",
                             f"{row[cpu]:.2f} CPU s fit"])
    return {"title": "polylite and its peers, measured in the same runs",
            "columns": ["task", "model", "accuracy", "time"], "rows": rows}


def headline_figure(path):
    """The headline figure: seconds per Gibbs sweep and test RMSE against libFM and myFM
    (relational MovieLens), and ranking quality against fit CPU time against LightFM."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [name for name in ("relational_movielens", "ranking_movielens_1thread")
              if available(name)]
    fig, axes = plt.subplots(1, max(len(panels), 1), figsize=(5.2 * len(panels), 3.6),
                             squeeze=False)
    for ax, name in zip(axes[0], panels):
        result = load(name)
        if name == "relational_movielens":
            sweep, accuracy = tables(result)[:2]
            rmse = {row[0]: row[1] for row in accuracy["rows"]}
            names = [row[0] for row in sweep["rows"] if row[0] in rmse]
            seconds = [row[1] for row in sweep["rows"] if row[0] in rmse]
            colors = ["C0" if n.startswith("polylite") else "C7" for n in names]
            ax.barh(names, seconds, color=colors)
            for y, (n, s) in enumerate(zip(names, seconds)):
                ax.text(s, y, f"  RMSE {rmse[n]:.4f}", va="center", fontsize=8)
            ax.set_xlabel("CPU seconds per Gibbs sweep (lower is better)")
            ax.set_xlim(0, max(seconds) * 1.9)
            ax.invert_yaxis()
            ax.set_title("Bayesian FM, MovieLens 100K, relational", fontsize=10)
        else:
            table = tables(result)[0]
            columns = table["columns"]
            p10, cpu = columns.index("P@10"), columns.index("fit CPU s")
            for row in table["rows"]:
                if row[0] == "popularity":
                    ax.axhline(row[p10], color="C7", ls=":", lw=1)
                    ax.text(0, row[p10], " popularity", va="bottom", fontsize=8)
                    continue
                if not _headline_ranking_row(row) and "BPR" not in row[0]:
                    continue
                color = "C0" if row[0].startswith("polylite") else "C7"
                ax.scatter(row[cpu], row[p10], color=color)
                ax.annotate(f"{row[0].replace('polylite FM', 'polylite')}, {row[1]}",
                            (row[cpu], row[p10]), fontsize=7,
                            xytext=(4, 2) if color == "C0" else (4, -9),
                            textcoords="offset points")
            ax.set_xlim(0, max(row[cpu] for row in table["rows"]
                               if _headline_ranking_row(row)) * 1.7)
            ax.set_xlabel("fit CPU seconds, one thread (lower is better)")
            ax.set_ylabel("precision@10 (higher is better)")
            ax.set_title("Ranking from clicks, MovieLens 100K", fontsize=10)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--markdown", metavar="NAME", help="one result in Markdown")
    parser.add_argument("--figure", metavar="PATH", help="draw the headline figure")
    parser.add_argument("--headline", action="store_true",
                        help="the README's table, in Markdown")
    args = parser.parse_args()
    if args.headline:
        print(markdown(headline_table()))
    elif args.figure:
        print(headline_figure(args.figure))
    elif args.markdown:
        print("\n\n".join(markdown(t) for t in tables(load(args.markdown))))
    else:
        for name in PAGE:
            if available(name):
                result = load(name)
                print(f"== {result.get('title', name)} ==\n{machine_line(result)}\n"
                      f"{command(result)}\n")
                print("\n\n".join(text(t) for t in tables(result)) + "\n")


if __name__ == "__main__":
    main()
