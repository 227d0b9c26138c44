"""Packaging: the requirement files agree with pyproject.toml's extras, the installed
metadata carries pyproject.toml's version, and (in CI) the tests run on the installed
package rather than the source tree.

The comparisons need the repository's files; they are skipped without them (an installed
package tested alone) and on Python 3.10, which has no ``tomllib``.
"""
import importlib.metadata
import json
import os
import re
from pathlib import Path

import pytest

import polylite

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = ROOT / "pyproject.toml"
REQUIREMENTS = ROOT / "requirements"


def _pyproject():
    tomllib = pytest.importorskip("tomllib")
    if not PYPROJECT.exists():
        pytest.skip("no pyproject.toml")
    with PYPROJECT.open("rb") as f:
        return tomllib.load(f)["project"]


def _normalise(requirement):
    """``"Dask[array] >= 2023.1"`` -> ``"dask[array]>=2023.1"``: the names compared as pip
    compares them (case, ``-``/``_``/``.``), spaces dropped."""
    requirement = re.sub(r"\s+", "", requirement)
    name = re.match(r"[A-Za-z0-9._-]+", requirement)[0]
    return re.sub(r"[-_.]+", "-", name).lower() + requirement[len(name):].lower()


def _requirement_file(name):
    path = REQUIREMENTS / f"{name}.txt"
    if not path.exists():
        pytest.skip(f"no requirements/{name}.txt")
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return [_normalise(line) for line in lines if line]


@pytest.mark.parametrize("extra", ["test", "docs"])
def test_requirement_files_match_extras(extra):
    """requirements/<extra>.txt installs what ``pip install ".[<extra>]"`` would add."""
    in_pyproject = [_normalise(r) for r in _pyproject()["optional-dependencies"][extra]]
    in_file = _requirement_file(extra)
    assert len(set(in_file)) == len(in_file), f"requirements/{extra}.txt repeats a line"
    assert sorted(in_file) == sorted(in_pyproject), (
        f"requirements/{extra}.txt and pyproject.toml's extra {extra!r} differ: "
        f"only in the file {sorted(set(in_file) - set(in_pyproject))}, only in "
        f"pyproject.toml {sorted(set(in_pyproject) - set(in_file))}")


@pytest.mark.parametrize("extra", ["test", "docs"])
def test_extras_include_dask(extra):
    """The tests and the API reference import polylite.dask: both lists hold the extra
    "dask" in full."""
    extras = _pyproject()["optional-dependencies"]
    dask = {_normalise(r) for r in extras["dask"]}
    assert dask <= {_normalise(r) for r in extras[extra]}


def _installed_editable():
    """Whether polylite is an editable install (its metadata dates from the install)."""
    try:
        text = importlib.metadata.distribution("polylite").read_text("direct_url.json")
    except importlib.metadata.PackageNotFoundError:
        return False
    return bool(text) and json.loads(text).get("dir_info", {}).get("editable", False)


def test_installed_version_is_pyproject_version():
    """The version has one source, pyproject.toml, and the installed package has it."""
    version = _pyproject()["version"]
    if _installed_editable():
        pytest.skip("editable install: its metadata is the version at install time")
    try:
        installed = importlib.metadata.version("polylite")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("polylite is imported from a folder, not installed")
    assert installed == version


@pytest.mark.skipif(not os.environ.get("POLYLITE_TEST_INSTALLED"),
                    reason="POLYLITE_TEST_INSTALLED not set (CI sets it)")
def test_tests_run_on_the_installed_package():
    """CI installs the wheel built from the sdist and runs pytest from the repository
    root: the package under test must be that wheel's, not the source tree's."""
    location = Path(polylite.__file__).resolve()
    assert "site-packages" in location.parts, location
    assert not location.is_relative_to(ROOT), location
    assert not _installed_editable()
