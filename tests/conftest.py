"""Shared fixtures for the polylite test-suite."""
import numpy as np
import pytest

from _data import movielens_folder, movielens_missing


@pytest.fixture
def rng():
    """A freshly seeded generator, so every test is reproducible on its own."""
    return np.random.default_rng(12345)


@pytest.fixture
def movielens_dir():
    """Path of the MovieLens 100K folder (see _data.py: polylite's data folder, else
    ../shared next to the source tree), or skip the test, saying how to download it."""
    path = movielens_folder("100k")
    if path is None:
        pytest.skip(movielens_missing("100k"))
    return path
