"""The API reference (docs/api.rst) lists every public class and function.

Public: in the ``__all__`` of polylite or of one of its modules whose name does not start
with an underscore.  Skipped without the docs folder (an installed package tested alone).
"""
import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import pytest

import polylite

API_RST = Path(__file__).resolve().parent.parent / "docs" / "api.rst"

pytestmark = pytest.mark.skipif(not API_RST.exists(), reason="no docs/api.rst")


def _documented():
    """The objects named by the autosummary lists of api.rst, each resolved in the
    ``currentmodule`` in force where it is listed."""
    objects, module, in_list = [], None, False
    for line in API_RST.read_text().splitlines():
        stripped = line.strip()
        current = re.fullmatch(r"\.\. currentmodule:: (\S+)", stripped)
        if current:
            try:
                module = importlib.import_module(current[1])
            except ImportError:  # an optional dependency (dask) is missing
                module = None
        elif stripped == ".. autosummary::":
            in_list = True
        elif (in_list and module is not None and line.startswith("   ") and stripped
              and not stripped.startswith(":")):
            *submodules, name = stripped.split(".")  # "recommend.recommend"
            owner = importlib.import_module(".".join([module.__name__, *submodules]))
            objects.append((f"{owner.__name__}.{name}", getattr(owner, name)))
        elif in_list and stripped and not line.startswith(" "):
            in_list = False
    return objects


def _public_modules():
    yield polylite
    for info in pkgutil.walk_packages(polylite.__path__, "polylite."):
        if any(part.startswith("_") for part in info.name.split(".")):
            continue
        try:
            yield importlib.import_module(info.name)
        except ImportError:  # an optional dependency (dask) is missing
            continue


def _public_objects():
    for module in _public_modules():
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name)
            if inspect.isclass(obj) or inspect.isfunction(obj):
                yield f"{module.__name__}.{name}", obj


def test_api_reference_lists_every_public_class_and_function():
    documented = {id(obj) for _, obj in _documented()}
    names = {}  # each missing object once, by its shortest public name
    for name, obj in _public_objects():
        if id(obj) not in documented:
            names[id(obj)] = min(names.get(id(obj), name), name, key=len)
    missing = sorted(names.values())
    assert not missing, (f"public names missing from the autosummary lists of "
                         f"docs/api.rst: {missing}")


def test_api_reference_names_exist():
    # _documented() resolves every entry (an AttributeError names a stale one); the
    # reference also lists nothing twice.
    names = [id(obj) for _, obj in _documented()]
    assert names and len(names) == len(set(names))
