"""The README's figures come from the benchmark result files: its headline table is the
one ``python benchmarks/report.py --headline`` draws from ``benchmarks/results/``.  Its
Python examples run and print what it shows.

Skipped without the source tree's README and benchmarks (an installed package tested
alone)."""
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from _data import movielens_folder, movielens_missing

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


def _python_blocks():
    """The README's Python examples, each with the output it shows (the block right
    after it when that block names no language, else None): [(code, output)]."""
    blocks = re.findall(r"```(\w*)\n(.*?)```", README.read_text(), re.S)
    return [(code, blocks[i + 1][1] if i + 1 < len(blocks) and not blocks[i + 1][0]
             else None)
            for i, (language, code) in enumerate(blocks) if language == "python"]


def _shape(output):
    """The output with its numbers left out."""
    return re.sub(r"\d[\d,]*(\.\d+)?", "#", output)


@pytest.mark.parametrize("number",
                         range(len(_python_blocks())) if README.exists() else [])
def test_readme_python_examples_run(number, tmp_path):
    """The README's Python examples run as written (from a temporary folder, where they
    save their models) and print what the README shows, but for the times.  MovieLens
    is read from where the tests find it (tests/_data.py), never downloaded."""
    code, output = _python_blocks()[number]
    env = dict(os.environ)
    if "fetch_movielens" in code:
        folder = movielens_folder("100k")
        if folder is None:
            pytest.skip(movielens_missing("100k"))
        env["POLYLITE_DATA"] = str(folder.parent)
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    if output is not None:
        assert _shape(run.stdout) == _shape(output), run.stdout
        for shown, printed in zip(re.findall(r"RMSE (\d\.\d+)", output),
                                  re.findall(r"RMSE (\d\.\d+)", run.stdout)):
            assert abs(float(shown) - float(printed)) < 0.005, run.stdout
