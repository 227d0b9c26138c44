"""The README's figures come from the benchmark result files: its headline table is the
one ``python benchmarks/report.py --headline`` draws from ``benchmarks/results/``.

Skipped without the source tree's README and benchmarks (an installed package tested
alone)."""
import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
REPORT = ROOT / "benchmarks" / "report.py"

pytestmark = pytest.mark.skipif(not (README.exists() and REPORT.exists()),
                                reason="no source tree")


def _report():
    spec = importlib.util.spec_from_file_location("report", REPORT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_headline_table_is_drawn_from_the_result_files():
    block = re.search(r"<!-- headline: python benchmarks/report.py --headline -->\n"
                      r"(.*?)\n<!-- end headline -->", README.read_text(), re.S)
    assert block, "README.md lacks the headline table's markers"
    report = _report()
    assert block[1].strip() == report.markdown(report.headline_table()).strip(), (
        "README.md's headline table differs from the result files: paste the output of "
        "python benchmarks/report.py --headline")


def test_readme_figure_exists():
    figure = re.search(r"!\[[^\]]*\]\(([^)]+)\)", README.read_text())
    assert figure and (ROOT / figure[1]).exists()
