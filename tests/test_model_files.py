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


# ---- compact Bayesian model files --------------------------------------------------------

def _close_to(compact, full):
    """Within 1e-6 of ``full``: relative, or absolute where a value is near 0."""
    return np.all(np.abs(compact - full) <= 1e-6 * np.maximum(np.abs(full), 1.0))


def _bayes_round_trip(model, X, tmp_path):
    """(compact file's size, exact file's size, loaded compact, loaded exact)."""
    compact, exact = tmp_path / "compact.npz", tmp_path / "exact.npz"
    model.save(compact)
    polylite.save(model, exact, exact=True)
    return (os.path.getsize(compact), os.path.getsize(exact), polylite.load(compact),
            polylite.load(exact))


def test_a_bayesian_model_is_saved_compact_within_1e_6_of_its_predictions(movielens_dir,
                                                                           tmp_path):
    """MovieLens 100K (u1): the default file stores the samples in float32, half the
    space, and predicts within 1e-6 of the model; exact=True replays it bit for bit."""
    from polylite.datasets import load_movielens_100k
    X, y, X_test, _ = load_movielens_100k(movielens_dir)
    model = polylite.BayesianFactorizationMachineRegressor(
        n_components=8, n_iter=60, random_state=0).fit(X, y)
    full, full_std = model.predict(X_test, return_std=True)
    compact_size, exact_size, compact, exact = _bayes_round_trip(model, X_test, tmp_path)
    assert compact_size < 0.55 * exact_size
    assert compact.P_samples_.dtype == np.float64  # restored in the model's dtype
    predicted, std = compact.predict(X_test, return_std=True)
    assert _close_to(predicted, full) and _close_to(std, full_std)
    assert not np.array_equal(predicted, full)  # (the test can fail)
    np.testing.assert_array_equal(exact.predict(X_test), full)


@pytest.mark.parametrize("kind", ["classifier", "ordinal"])
def test_compact_bayesian_classifiers_keep_their_probabilities(kind, tmp_path):
    from polylite.datasets import make_recommender
    X, y = make_recommender(3000, n_users=150, n_items=100, random_state=0)
    if kind == "classifier":
        model = polylite.BayesianFactorizationMachineClassifier(
            n_components=4, n_iter=30, random_state=0).fit(X, y > np.median(y))
    else:
        model = polylite.BayesianFactorizationMachineOrdinalRegressor(
            n_components=4, n_iter=30, random_state=0).fit(
                X, np.digitize(y, np.quantile(y, [0.25, 0.5, 0.75])))
    compact_size, exact_size, compact, exact = _bayes_round_trip(model, X, tmp_path)
    assert compact_size < 0.6 * exact_size
    assert _close_to(compact.predict_proba(X), model.predict_proba(X))
    np.testing.assert_array_equal(exact.predict_proba(X), model.predict_proba(X))


def test_a_float32_model_and_models_beyond_float32_are_stored_as_they_are(tmp_path):
    from polylite.datasets import make_recommender
    X, y = make_recommender(1000, n_users=50, n_items=40, random_state=0)
    model = polylite.BayesianFactorizationMachineRegressor(
        n_components=2, n_iter=10, random_state=0).fit(X.astype(np.float32), y)
    path = tmp_path / "m.npz"
    model.save(path)
    loaded = polylite.load(path)
    assert loaded.P_samples_.dtype == np.float32
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    model = polylite.BayesianFactorizationMachineRegressor(
        n_components=2, n_iter=10, random_state=0).fit(X, y)
    model.w_samples_ = model.w_samples_.copy()
    model.w_samples_[0, 0] = 1e300  # beyond float32: everything stays float64
    model.save(path)
    assert "samples_dtype" not in polylite._io.read_archive(path)[0]["attributes"]
    np.testing.assert_array_equal(polylite.load(path).w_samples_, model.w_samples_)


def test_a_compact_file_with_a_wrong_samples_dtype_is_refused(tmp_path):
    from polylite._io import _write_archive, read_archive
    from polylite.datasets import make_recommender
    X, y = make_recommender(500, n_users=20, n_items=15, random_state=0)
    path = tmp_path / "m.npz"
    polylite.BayesianFactorizationMachineRegressor(
        n_components=2, n_iter=6, random_state=0).fit(X, y).save(path)
    header, arrays = read_archive(path)
    assert header["attributes"]["samples_dtype"] == "float64"
    header["attributes"]["samples_dtype"] = "float16"
    del header["arrays"]
    _write_archive(path, header, arrays)
    with pytest.raises(polylite.ModelFileError, match="samples_dtype 'float16'"):
        polylite.load(path)


def test_samples_stay_float64_where_float32_would_move_the_predictions(tmp_path):
    """fit checks, on its training rows, that float32 samples predict within 1e-6 of the
    model; where they would not (large terms that cancel), the file keeps float64, and
    a copy saved again from that file does too."""
    import copy
    import warnings
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 6)) * 3
    y = rng.normal(size=200)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = polylite.BayesianFactorizationMachineRegressor(
            degree=3, n_components=3, n_iter=10, init_scale=1.0, random_state=0).fit(X, y)
    # (the test can fail: rounded to float32, these samples move the predictions)
    rounded = copy.copy(model)
    for name in ("intercept", "w", "P", "gamma"):
        samples = getattr(model, f"{name}_samples_")
        setattr(rounded, f"{name}_samples_", samples.astype(np.float32).astype(np.float64))
    moved = [_close_to(a, b) for a, b in zip(rounded.predict(X, return_std=True),
                                              model.predict(X, return_std=True))]
    assert not all(moved)
    path = tmp_path / "a.npz"
    model.save(path)
    assert "samples_dtype" not in polylite._io.read_archive(path)[0]["attributes"]
    loaded = polylite.load(path)
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    loaded.save(path)
    np.testing.assert_array_equal(polylite.load(path).P_samples_, model.P_samples_)
