"""Model files written by polylite 0.1.0 load, and predict what 0.1.0 predicted.

The files and their predictions are in ``tests/reference/models-0.1.0`` (written by its
``make_models.py`` with polylite 0.1.0): one file per estimator class of that release.
"""
import os

import numpy as np
import pytest
import scipy.sparse as sp

import polylite

FOLDER = os.path.join(os.path.dirname(__file__), "reference", "models-0.1.0")
RECORDED = np.load(os.path.join(FOLDER, "predictions.npz"))
NAMES = sorted(name[:-4] for name in os.listdir(FOLDER)
               if name.endswith(".npz") and name != "predictions.npz")


def _rows(prefix):
    return sp.csr_matrix((RECORDED[prefix + "_data"], RECORDED[prefix + "_indices"],
                          RECORDED[prefix + "_indptr"]),
                         shape=tuple(RECORDED[prefix + "_shape"]))


def test_every_class_of_the_release_has_a_file():
    assert len(NAMES) == 13


@pytest.mark.parametrize("name", NAMES)
def test_a_model_file_of_0_1_0_loads_and_predicts_as_it_did(name):
    model = polylite.load(os.path.join(FOLDER, name + ".npz"))
    X = _rows("Xr" if name == "ranker" else "X")
    # The same formulas; the order of a few sums may differ (BLAS, threads).
    np.testing.assert_allclose(model.predict(X), RECORDED[name], rtol=1e-9, atol=1e-12)
    if name + ":proba" in RECORDED:
        np.testing.assert_allclose(model.predict_proba(X), RECORDED[name + ":proba"],
                                   rtol=1e-9, atol=1e-12)
