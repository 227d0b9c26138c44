"""The core's structural limits (``tools/structure.py``, read from the source tree): what
holds now stays held; the count of wide compiled functions only goes down."""
import importlib.util
import os

import pytest

ROOT = os.path.join(os.path.dirname(__file__), os.pardir)
SCRIPT = os.path.join(ROOT, "tools", "structure.py")

pytestmark = pytest.mark.skipif(not os.path.exists(os.path.join(ROOT, "polylite")),
                                reason="needs the source tree")


@pytest.fixture(scope="module")
def structure():
    spec = importlib.util.spec_from_file_location("structure", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _cython_functions(structure):
    return [(rel, *f) for rel, path in structure._sources((".pyx", ".pxd", ".pxi"))
            for f in structure.cython_functions(path)]


def test_no_import_circle(structure):
    assert structure.cycles(structure.import_graph()) == []


def test_no_layout_type_test_outside_the_layout_layer(structure):
    found = []
    for rel, path in structure._sources((".py", ".pyx")):
        if rel in structure.LAYOUT_LAYER:
            continue
        with open(path) as f:
            found += [f"{rel}:{n}" for n, line in enumerate(f, 1)
                      if structure.LAYOUT_TESTS.search(line)]
    assert found == []


def test_no_long_file_or_function(structure):
    long_files = []
    for rel, path in structure._sources((".py", ".pyx", ".pxd", ".pxi")):
        with open(path) as f:
            if sum(1 for _ in f) > structure.MAX_FILE_LINES:
                long_files.append(rel)
    assert long_files == []
    assert [f for f in _cython_functions(structure)
            if f[3] > structure.MAX_FUNCTION_LINES] == []


def test_no_compiled_function_takes_more_than_ten_arguments(structure):
    wide = [f for f in _cython_functions(structure) if f[4] > structure.MAX_ARGUMENTS]
    assert wide == [], sorted(wide, key=lambda f: -f[4])[:5]


def test_the_script_runs(structure, capsys):
    assert structure.main([]) == 0
    assert "import circles" in capsys.readouterr().out
