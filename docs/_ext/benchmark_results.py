"""Sphinx directives that draw the benchmarks page from ``benchmarks/results/``.

``.. benchmark-results:: NAME`` renders the result file ``NAME.json`` (its tables, the
machine and versions it was measured on, the command that reproduces it), and
``.. benchmark-text:: FILE`` a benchmark's saved text output as it printed it.  The
headline figure is drawn into ``docs/_generated/`` when the build starts.  Everything
comes from ``benchmarks/report.py``, which the README's table uses too.
"""
import os
import sys

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.util.docutils import SphinxDirective

BENCHMARKS = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..",
                                          "benchmarks"))
sys.path.insert(0, BENCHMARKS)
import report  # noqa: E402

FIGURE = "_generated/benchmarks.png"


def _list_table(table):
    lines = [f".. list-table:: {table['title']}", "   :header-rows: 1", ""]
    for row in [table["columns"]] + [[report.cell(v) for v in r] for r in table["rows"]]:
        lines.append(f"   * - {row[0]}")
        lines += [f"     - {value}" for value in row[1:]]
    lines.append("")
    if table.get("note"):
        lines += [table["note"][0].upper() + table["note"][1:] + ".", ""]
    return lines


class BenchmarkResults(SphinxDirective):
    """The tables of one result file, with where and how they were measured."""

    required_arguments = 1
    option_spec = {"tables": directives.unchanged}

    def run(self):
        name = self.arguments[0]
        path = os.path.join(report.RESULTS, f"{name}.json")
        self.env.note_dependency(path)
        result = report.load(name)
        chosen = report.tables(result)
        if "tables" in self.options:
            chosen = [chosen[int(i)] for i in self.options["tables"].split()]
        lines = []
        for table in chosen:
            lines += _list_table(table)
        lines += [f"Measured on {report.machine_line(result)}, by::", "",
                  f"    {report.command(result)}", ""]
        return self.parse_text_to_nodes("\n".join(lines))


class BenchmarkText(SphinxDirective):
    """A benchmark's saved text output, as it printed it."""

    required_arguments = 1

    def run(self):
        path = os.path.join(report.RESULTS, self.arguments[0])
        self.env.note_dependency(path)
        with open(path) as f:
            text = f.read().rstrip()
        return [nodes.literal_block(text, text)]


def _draw_figure(app):
    report.headline_figure(os.path.join(app.srcdir, FIGURE))


def setup(app):
    app.add_directive("benchmark-results", BenchmarkResults)
    app.add_directive("benchmark-text", BenchmarkText)
    app.connect("builder-inited", _draw_figure)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
