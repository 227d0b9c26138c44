"""Shared fixtures for the polylite test-suite."""
from pathlib import Path

import numpy as np
import pytest


@pytest.fixture
def rng():
    """A freshly seeded generator, so every test is reproducible on its own."""
    return np.random.default_rng(12345)


@pytest.fixture
def movielens_dir():
    """Path of the MovieLens 100K directory in the shared data area, or skip the test.

    The repository is checked out next to ``shared/`` (``<root>/main`` and
    ``<root>/shared``), so the data is located relative to this file.
    """
    path = (Path(__file__).resolve().parents[2] / "shared" / "data" / "movielens"
            / "ml-100k")
    if not path.exists():
        pytest.skip("MovieLens data not available (../shared absent)")
    return path
