"""The ``polylite`` command line, driven through ``main(argv)`` (and once as a process)."""
import bz2
import gzip
import json
import lzma
import os
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import dump_svmlight_file

import polylite
from polylite import (FactorizationMachineClassifier, FactorizationMachineRegressor,
                      PolynomialNetworkClassifier, _svmlight)
from polylite.cli import main

from _cli import run_cli as _run
from polylite.datasets import make_recommender


def _write(path, X, y, zero_based=True):
    dump_svmlight_file(X, y, str(path), zero_based=zero_based)
    return str(path)


@pytest.fixture
def recommender(tmp_path):
    """One-based train/test files of a small recommender (no index 0 in them)."""
    X, y = make_recommender(n_samples=1500, n_users=40, n_items=30, random_state=0)
    train = _write(tmp_path / "train.svm", X[:1000], y[:1000], zero_based=False)
    test = _write(tmp_path / "test.svm", X[1000:], y[1000:], zero_based=False)
    return X, y, train, test


@pytest.fixture
def binary(tmp_path):
    rng = np.random.RandomState(0)
    X = rng.randn(400, 5)
    y = np.where(X[:, 0] * X[:, 1] > 0, 1, -1)
    train = _write(tmp_path / "b_train.svm", X[:300], y[:300])
    test = _write(tmp_path / "b_test.svm", X[300:], y[300:])
    return X, y, train, test


def _temporaries(directory):
    return [name for name in os.listdir(directory) if name.startswith(".polylite-")]


# ---- fit / predict / evaluate / info ---------------------------------------------------

@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_fit_predict_matches_python(recommender, tmp_path, capsys):
    X, y, train, test = recommender
    model = tmp_path / "m.npz"
    status, out, err = _run(capsys, "fit", train, "--model", model, "--n-components", 4,
                            "--seed", 0, "--max-iter", 20, "--progress", "lines")
    assert status == 0, err
    assert out == ""
    assert "epoch 1/20  objective" in err
    assert "one-based indices (detected)" in err and "saved" in err and " s; " in err
    assert "solver='auto' (cd)" in err  # the default, and what it chose on one-hot rows
    # The same estimator fitted from Python on the same rows (one-based files drop column
    # 0, which make_recommender always uses, so compare on the columns read).
    fm = FactorizationMachineRegressor(n_components=4, random_state=0, max_iter=20)
    X_read = sp.csr_matrix(X[:1000])
    X_read = X_read[:, :X_read.indices.max() + 1]
    fm.fit(X_read, y[:1000])
    saved = polylite.load(model)
    np.testing.assert_allclose(saved.P_, fm.P_)
    assert saved.solver_ == fm.solver_ == "cd"

    status, out, err = _run(capsys, "predict", model, test)
    assert status == 0, err
    predicted = np.array(out.split(), dtype=float)
    X_test = sp.csr_matrix(X[1000:])[:, :saved.n_features_in_]
    np.testing.assert_allclose(predicted, saved.predict(X_test), rtol=1e-14)

    status, out, _ = _run(capsys, "evaluate", model, test, "--json")
    assert status == 0
    scores = json.loads(out)
    rmse = np.sqrt(np.mean((saved.predict(X_test) - y[1000:]) ** 2))
    assert scores["rows"] == 500
    np.testing.assert_allclose(scores["rmse"], rmse)
    assert set(scores) == {"rows", "rmse", "mae", "r2"}

    status, out, _ = _run(capsys, "info", model, "--json")
    info = json.loads(out)
    assert info["estimator"] == "FactorizationMachineRegressor"
    assert info["parameters"]["n_components"] == 4
    # The arrays as the file stores them: P over (outputs, blocks, features, components).
    assert info["arrays"]["P"] == {"shape": [1, 1, saved.n_features_in_, 4],
                                   "dtype": "float64"}
    assert info["n_features_in_"] == saved.n_features_in_
    assert info["metadata"]["data"]["zero_based"] is False
    assert info["polylite_version"] == polylite.__version__
    status, out, _ = _run(capsys, "info", model)
    assert "FactorizationMachineRegressor" in out and "one-based indices" in out


def test_validation_early_stopping_matches_python(recommender, tmp_path, capsys):
    X, y, train, test = recommender
    model = tmp_path / "m.npz"
    status, _, err = _run(capsys, "fit", train, "-m", model, "--validation", test,
                          "--seed", 1, "--tol", 0, "--n-iter-no-change", 2,
                          "--max-iter", 200, "--beta", 0, "-q")
    assert status == 0, err
    assert err == ""  # --quiet
    saved = polylite.load(model)
    assert saved.n_iter_ < 200  # stopped on the validation loss
    d = saved.n_features_in_
    X = sp.csr_matrix(X)[:, :d]
    fm = FactorizationMachineRegressor(random_state=1, tol=0, n_iter_no_change=2,
                                       max_iter=200, beta=0)
    fm.fit(X[:1000], y[:1000], X_val=X[1000:], y_val=y[1000:])
    assert fm.n_iter_ == saved.n_iter_
    np.testing.assert_allclose(saved.P_, fm.P_)


def test_bayes_fm_matches_python(recommender, binary, tmp_path, capsys):
    # libFM's -method mcmc: a Gibbs chain, the validation error of the averaged
    # prediction every sweep (X_eval), the kept samples in the model file.
    X, y, train, test = recommender
    model = tmp_path / "b.npz"
    status, _, err = _run(capsys, "fit", train, "-m", model, "--estimator", "bayes-fm",
                          "--n-components", 3, "--n-iter", 12, "--n-burn-in", 4,
                          "--n-kept", 5, "--seed", 0, "--validation", test,
                          "--progress", "lines")
    assert status == 0, err
    assert "sweep 12/12  validation rmse" in err and "12 sweeps in" in err
    saved = polylite.load(model)
    d = saved.n_features_in_
    X = sp.csr_matrix(X)[:, :d]
    bfm = polylite.BayesianFactorizationMachineRegressor(
        n_components=3, n_iter=12, n_burn_in=4, n_kept=5, random_state=0)
    bfm.fit(X[:1000], y[:1000], X_eval=X[1000:], y_eval=y[1000:])
    # The file stores the samples in float32 (docs/user_guide/persistence.rst).
    np.testing.assert_allclose(saved.P_samples_, bfm.P_samples_, rtol=2**-24)
    status, out, _ = _run(capsys, "predict", model, test)
    np.testing.assert_allclose(np.array(out.split(), dtype=float), bfm.predict(X[1000:]),
                               rtol=1e-6, atol=1e-6)

    X, y, train, test = binary
    status, _, err = _run(capsys, "fit", train, "-m", model, "--estimator", "bayes-fm",
                          "--task", "classification", "--n-iter", 10, "--n-burn-in", 4,
                          "--seed", 0, "-q")
    assert status == 0, err
    saved = polylite.load(model)
    status, out, _ = _run(capsys, "predict", model, test, "--proba")
    np.testing.assert_allclose(np.array(out.split(), dtype=float),
                               saved.predict_proba(X[300:])[:, 1], rtol=1e-14,
                               atol=1e-20)
    status, out, _ = _run(capsys, "evaluate", model, test, "--json")
    assert {"accuracy", "log_loss", "auc"} <= set(json.loads(out))
    # Options of the other families are refused by name.
    status, _, err = _run(capsys, "fit", train, "-m", model, "--estimator", "bayes-fm",
                          "--beta", 1)
    assert status == 2 and "argument --beta: not a parameter of Bayesian" in err
    status, _, err = _run(capsys, "fit", train, "-m", model, "--estimator", "bayes-fm",
                          "--stream")
    assert status == 2 and "argument --stream: trains by partial_fit" in err
    # Parameters are checked together: the burn-in must be shorter than the chain.
    status, _, err = _run(capsys, "fit", train, "-m", model, "--estimator", "bayes-fm",
                          "--n-iter", 10, "--n-burn-in", 10)
    assert status == 2 and "argument --n-burn-in: must be smaller than n_iter" in err
    # A short chain with the default burn-in (a fifth of the sweeps).
    status, _, err = _run(capsys, "fit", train, "-m", model, "--estimator", "bayes-fm",
                          "--task", "classification", "--n-iter", 3, "--seed", 0, "-q")
    assert status == 0, err
    assert polylite.load(model).P_samples_.shape[1] == 3


def test_classifier_proba_and_labels(binary, tmp_path, capsys):
    X, y, train, test = binary
    model = tmp_path / "c.npz"
    status, _, err = _run(capsys, "fit", train, "-m", model, "--task", "classification",
                          "--seed", 0, "-q")
    assert status == 0, err
    saved = polylite.load(model)
    assert isinstance(saved, FactorizationMachineClassifier)
    assert saved.classes_.tolist() == [-1, 1]  # integral labels stay integers
    status, out, _ = _run(capsys, "predict", model, test)
    assert out.split() == [str(label) for label in saved.predict(X[300:])]
    out_file = tmp_path / "p.txt"
    status, _, _ = _run(capsys, "predict", model, test, "--proba", "-o", out_file)
    assert status == 0
    np.testing.assert_allclose(np.loadtxt(out_file), saved.predict_proba(X[300:])[:, 1])
    assert os.stat(out_file).st_mode & 0o777 == 0o666 & ~_umask()
    status, out, _ = _run(capsys, "evaluate", model, test, "--json")
    scores = json.loads(out)
    assert set(scores) == {"rows", "accuracy", "log_loss", "auc"}
    np.testing.assert_allclose(scores["accuracy"],
                               np.mean(saved.predict(X[300:]) == y[300:]))


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_multiclass_pn_proba_columns(tmp_path, capsys):
    rng = np.random.RandomState(0)
    X = rng.randn(300, 4)
    y = np.argmax(X[:, :3] ** 2, axis=1) + 1
    data = _write(tmp_path / "m.svm", X, y)
    model = tmp_path / "m.npz"
    status, _, err = _run(capsys, "fit", data, "-m", model, "--task", "classification",
                          "--estimator", "pn", "--solver", "lbfgs", "--seed", 0,
                          "--progress", "lines")
    assert status == 0, err
    assert "[output 3/3] epoch" in err
    saved = polylite.load(model)
    assert isinstance(saved, PolynomialNetworkClassifier)
    status, out, _ = _run(capsys, "predict", model, data, "--proba")
    proba = np.array([line.split() for line in out.splitlines()], dtype=float)
    np.testing.assert_allclose(proba, saved.predict_proba(X))
    status, out, _ = _run(capsys, "evaluate", model, data)
    assert "auc" in out and "log_loss" in out


def test_stream_is_partial_fit_per_block(recommender, tmp_path, capsys):
    X, y, train, test = recommender
    model = tmp_path / "s.npz"
    status, _, err = _run(capsys, "fit", train, "-m", model, "--stream", "--max-iter", 2,
                          "--chunk-bytes", 4096, "--seed", 0, "--progress", "lines")
    assert status == 0, err
    assert "pass 2/2  progressive rmse" in err
    saved = polylite.load(model)
    assert saved.solver == "adagrad"
    blocks = list(_svmlight.iter_file(train, zero_based=False, chunk_bytes=4096,
                                      n_features=saved.n_features_in_))
    assert len(blocks) > 5 and max(b[0].shape[0] for b in blocks) < 200
    fm = FactorizationMachineRegressor(solver="adagrad", random_state=0)
    for _ in range(2):
        for X_block, y_block in blocks:
            fm.partial_fit(X_block, y_block)
    assert saved.n_iter_ == 2 * len(blocks)
    np.testing.assert_allclose(saved.P_, fm.P_)


def test_stream_classifier_with_validation(binary, tmp_path, capsys):
    X, y, train, test = binary
    model = tmp_path / "s.npz"
    status, _, err = _run(capsys, "fit", train, "-m", model, "--stream", "--task",
                          "classification", "--validation", test, "--max-iter", 30,
                          "--n-iter-no-change", 2, "--chunk-bytes", 2048,
                          "--solver", "sgd", "--seed", 0, "--progress", "lines")
    assert status == 0, err
    assert "validation log-loss" in err
    saved = polylite.load(model)
    assert saved.classes_.tolist() == [-1, 1]
    assert saved.score(X[300:], y[300:]) > 0.6


def test_gzip_bzip2_xz_read_like_plain(recommender, tmp_path, capsys):
    _, _, train, _ = recommender
    with open(train, "rb") as f:
        raw = f.read()
    models = []
    for name, opener in [("plain", open), ("t.gz", gzip.open), ("t.bz2", bz2.open),
                         ("t.xz", lzma.open)]:
        path = train if name == "plain" else str(tmp_path / name)
        if name != "plain":
            with opener(path, "wb") as f:
                f.write(raw)
        model = tmp_path / f"{name}.npz"
        assert _run(capsys, "fit", path, "-m", model, "--seed", 0, "--max-iter", 3,
                    "-q")[0] == 0
        models.append(polylite.load(model))
    for m in models[1:]:
        np.testing.assert_array_equal(m.P_, models[0].P_)


def test_index_base_detected_forced_and_recorded(tmp_path, capsys):
    X = sp.csr_matrix(np.array([[1.0, 0, 2], [0, 1, 1], [1, 1, 0], [0, 0, 3]]))
    y = np.array([1.0, 2.0, 3.0, 4.0])
    zero = _write(tmp_path / "zero.svm", X, y, zero_based=True)  # uses index 0
    model = tmp_path / "z.npz"
    assert _run(capsys, "fit", zero, "-m", model, "--max-iter", 2, "-q")[0] == 0
    assert polylite.load(model).n_features_in_ == 3
    # A one-based file with index 0: the error names the file and the line.
    status, _, err = _run(capsys, "fit", zero, "-m", tmp_path / "o.npz", "--one-based")
    assert status == 1 and "zero.svm" in err and "--one-based" in err
    assert not (tmp_path / "o.npz").exists()
    # The model remembers zero-based indices: a test file without index 0 is read so.
    test = tmp_path / "t.svm"
    test.write_text("0 1:1 2:1\n0 2:5\n")
    status, out, _ = _run(capsys, "predict", model, test)
    saved = polylite.load(model)
    X_test = sp.csr_matrix(np.array([[0, 1.0, 1], [0, 0, 5]]))
    np.testing.assert_array_equal(np.array(out.split(), float), saved.predict(X_test))
    # ...and as one-based when told so: index 0 is then an error naming its line.
    test.write_text("0 1:1\n0 0:1\n")
    status, _, err = _run(capsys, "predict", model, test, "--one-based")
    assert status == 1 and f"{test}:2: feature index 0" in err


def test_features_beyond_the_model_are_ignored_with_a_warning(binary, tmp_path, capsys):
    X, y, train, _ = binary
    model = tmp_path / "c.npz"
    _run(capsys, "fit", train, "-m", model, "--task", "classification", "-q")
    wide = tmp_path / "wide.svm"
    wide.write_text("1 0:1 9:1\n-1 1:2\n")
    status, out, err = _run(capsys, "predict", model, wide)
    assert status == 0
    assert "1 nonzeros in 1 rows" in err and "ignored" in err
    saved = polylite.load(model)
    expected = saved.predict(sp.csr_matrix(([1.0, 2.0], [0, 1], [0, 1, 2]), shape=(2, 5)))
    assert out.split() == [str(v) for v in expected]


# ---- ranking -----------------------------------------------------------------------------

N_USERS, N_ITEMS = 40, 20


def _interactions(seed=0):
    """Rows of user-item interactions: the user's one-hot columns, then the item's; the
    users of each of four groups interact with the group's items.  Every tenth label is
    0 (an interaction that is not a positive), the others 1."""
    rng = np.random.RandomState(seed)
    users = np.repeat(np.arange(N_USERS), 6)
    items = (users % 4) * (N_ITEMS // 4) + rng.randint(N_ITEMS // 4, size=users.size)
    pairs = np.unique(np.column_stack([users, items]), axis=0)
    pairs = pairs[rng.permutation(pairs.shape[0])]
    n = pairs.shape[0]
    columns = np.column_stack([pairs[:, 0], N_USERS + pairs[:, 1]]).ravel()
    X = sp.csr_matrix((np.ones(2 * n), columns, np.arange(0, 2 * n + 1, 2)),
                      shape=(n, N_USERS + N_ITEMS))
    y = np.ones(n)
    y[::10] = 0
    return X, y, pairs


@pytest.fixture
def interactions(tmp_path):
    """Zero-based train/test files of interactions, and their rows."""
    X, y, pairs = _interactions()
    k = int(0.8 * X.shape[0])
    train = _write(tmp_path / "r_train.svm", X[:k], y[:k])
    test = _write(tmp_path / "r_test.svm", X[k:], y[k:])
    return X, y, pairs, k, train, test


ITEMS = f"{N_USERS}:{N_USERS + N_ITEMS}"  # --item-columns of _interactions' rows


def test_ranker_fit_predict_evaluate_info(interactions, tmp_path, capsys):
    from polylite.ranking import FactorizationMachineRanker
    X, y, _, k, train, test = interactions
    model = tmp_path / "r.npz"
    status, out, err = _run(capsys, "fit", train, "-m", model, "--task", "ranking",
                            "--item-columns", ITEMS, "--n-components", 4, "--max-iter", 5,
                            "--seed", 0, "--progress", "lines")
    assert status == 0, err
    assert out == ""
    assert "epoch 5/5  objective" in err and "training AUC" in err and "saved" in err
    saved = polylite.load(model)
    assert isinstance(saved, FactorizationMachineRanker)
    # The same estimator fitted from Python on the same rows.
    ranker = FactorizationMachineRanker(n_components=4, max_iter=5, random_state=0,
                                        item_columns=(N_USERS, N_USERS + N_ITEMS))
    ranker.fit(X[:k], y[:k])
    np.testing.assert_allclose(saved.P_, ranker.P_)
    assert f"training AUC {ranker.score(X[:k], y[:k]):.4f}" in err

    status, out, err = _run(capsys, "predict", model, test)
    assert status == 0, err
    np.testing.assert_allclose(np.array(out.split(), dtype=float), saved.predict(X[k:]),
                               rtol=1e-14)
    status, _, err = _run(capsys, "predict", model, test, "--proba")
    assert status == 2 and "which predicts scores, not probabilities" in err

    # The mean AUC of the test file's positives, read in many blocks or in one.
    status, out, err = _run(capsys, "evaluate", model, test, "--json", "--chunk-bytes", 64)
    assert status == 0, err
    scores = json.loads(out)
    assert scores == {"rows": X.shape[0] - k, "positives": int(np.sum(y[k:] == 1)),
                      "auc": pytest.approx(saved.score(X[k:], y[k:]), rel=1e-12)}
    status, out, _ = _run(capsys, "evaluate", model, test)
    assert out.splitlines()[1].split() == ["positives", str(scores["positives"])]
    assert out.splitlines()[2].startswith("auc ")

    status, out, _ = _run(capsys, "info", model, "--json")
    info = json.loads(out)
    assert info["estimator"] == "FactorizationMachineRanker"
    assert list(info["parameters"]["item_columns"]) == [N_USERS, N_USERS + N_ITEMS]
    status, out, _ = _run(capsys, "info", model)
    assert status == 0 and "FactorizationMachineRanker" in out


@pytest.mark.parametrize("loss", ["bpr", "warp"])
def test_ranker_losses_and_ranker_options(interactions, tmp_path, capsys, loss):
    _, _, _, _, train, test = interactions
    model = tmp_path / "r.npz"
    status, _, err = _run(capsys, "fit", train, "-m", model, "--task", "ranking",
                          "--item-columns", ITEMS, "--loss", loss, "--negatives",
                          "popularity", "--max-trials", 3, "--margin", 0.5, "--solver",
                          "sgd", "--query-batch", 4, "--max-iter", 3, "--seed", 0, "-q")
    assert status == 0, err
    saved = polylite.load(model)
    assert (saved.loss, saved.negatives, saved.max_trials, saved.margin, saved.solver,
            saved.query_batch) == (loss, "popularity", 3, 0.5, "sgd", 4)
    assert _run(capsys, "evaluate", model, test)[0] == 0


def test_ranker_whole_data_loss_and_its_options(interactions, tmp_path, capsys):
    _, _, _, _, train, test = interactions
    model = tmp_path / "r.npz"
    status, _, err = _run(capsys, "fit", train, "-m", model, "--task", "ranking",
                          "--item-columns", ITEMS, "--loss", "ials", "--alpha0", 0.05,
                          "--confidence", 2, "--beta", 1e-3, "--early-stopping",
                          "--frequency-exponent", 1, "--side-sweeps", 2,
                          "--side-solver", "als", "--max-iter", 3,
                          "--seed", 0, "--progress", "lines")
    assert status == 0, err
    assert "validation AUC" in err
    saved = polylite.load(model)
    assert (saved.loss, saved.alpha0, saved.confidence, saved.frequency_exponent,
            saved.side_sweeps, saved.side_solver, saved.solver_) == (
                "ials", 0.05, 2.0, 1.0, 2, "als", "cd")
    assert _run(capsys, "evaluate", model, test)[0] == 0


def test_ranker_rated_items_on_the_command_line(interactions, tmp_path, capsys):
    """--rated-items: the columns of the users' sets of rated items, as the ranker's
    rated_items; the same fit as in Python."""
    from polylite.ranking import FactorizationMachineRanker
    X, y, pairs, k, _, _ = interactions
    rated = sp.csr_matrix((np.ones(pairs.shape[0]), (pairs[:, 0], pairs[:, 1])),
                          shape=(N_USERS, N_ITEMS))
    rated = sp.csr_matrix(rated.multiply(
        1 / np.sqrt(np.maximum(rated.getnnz(axis=1), 1))[:, None]))  # 1/sqrt(n) each
    X = sp.hstack([X, rated[pairs[:, 0]]], format="csr")
    first = N_USERS + N_ITEMS
    train = _write(tmp_path / "rated.svm", X[:k], y[:k])
    model = tmp_path / "r.npz"
    options = ("--task", "ranking", "--item-columns", ITEMS, "--loss", "ials",
               "--n-components", 3, "--max-iter", 3, "--seed", 0)
    status, _, err = _run(capsys, "fit", train, "-m", model, *options, "--rated-items",
                          f"{first}:{first + N_ITEMS}", "--n-features", X.shape[1])
    assert status == 0, err
    saved = polylite.load(model)
    assert saved.rated_items == [first, first + N_ITEMS]
    ranker = FactorizationMachineRanker(
        loss="ials", n_components=3, max_iter=3, random_state=0,
        item_columns=(N_USERS, N_USERS + N_ITEMS),
        rated_items=(first, first + N_ITEMS)).fit(X[:k], y[:k])
    np.testing.assert_allclose(saved.P_, ranker.P_, rtol=1e-12)
    unleft = FactorizationMachineRanker(**{**ranker.get_params(), "rated_items": None})
    assert not np.allclose(unleft.fit(X[:k], y[:k]).P_, ranker.P_)  # (it matters)
    status, _, err = _run(capsys, "fit", train, "-m", model, "--task", "ranking",
                          "--item-columns", ITEMS, "--rated-items", f"{first}:{first + 5}")
    assert status == 2 and "--rated-items: only with --loss ials" in err
    status, _, err = _run(capsys, "fit", train, "-m", model, "--rated-items", "1:3")
    assert status == 2 and "--rated-items: only with --task ranking" in err


def test_ranker_item_columns_count_after_the_index_base(interactions, tmp_path, capsys):
    # A one-based file of the same rows: its indices are one more, the columns the same.
    X, y, _, k, train, _ = interactions
    one = _write(tmp_path / "one.svm", X[:k], y[:k], zero_based=False)
    models = []
    for path in (train, one):
        models.append(tmp_path / f"{os.path.basename(path)}.npz")
        assert _run(capsys, "fit", path, "-m", models[-1], "--task", "ranking",
                    "--item-columns", ITEMS, "--max-iter", 2, "--seed", 0, "-q")[0] == 0
    np.testing.assert_array_equal(polylite.load(models[0]).P_, polylite.load(models[1]).P_)


def test_ranker_early_stopping_reports_the_validation_auc(interactions, tmp_path, capsys):
    _, _, _, _, train, _ = interactions
    status, _, err = _run(capsys, "fit", train, "-m", tmp_path / "r.npz", "--task",
                          "ranking", "--item-columns", ITEMS, "--early-stopping",
                          "--validation-fraction", 0.2, "--max-iter", 4, "--seed", 0,
                          "--progress", "lines")
    assert status == 0, err
    assert "validation AUC" in err and "validation loss" not in err


def test_ranker_validation_file(interactions, tmp_path, capsys):
    X, y, _, k, train, test = interactions
    model = tmp_path / "r.npz"
    status, _, err = _run(capsys, "fit", train, "-m", model, "--task", "ranking",
                          "--item-columns", ITEMS, "--validation", test, "--max-iter", 8,
                          "--seed", 0, "--progress", "lines")
    assert status == 0, err
    assert "epoch 1/8  objective" in err and "validation AUC" in err
    # The summary gives the kept epoch's validation AUC, as the epochs measured it (on
    # every positive here, fewer than the 100 sampled at least; each against the whole
    # catalogue of 20 items, fewer than the 50 drawn at most).
    epochs = [float(line.split("validation AUC ")[1].split()[0])
              for line in err.splitlines() if line.startswith("epoch ")]
    kept = max(epochs)
    assert epochs.index(kept) >= 2  # (the fit improved: the test can fail)
    n_positives = int(np.sum(y[k:] == 1))
    assert (f"validation AUC {kept:.4f} (the kept epoch's, on {n_positives} of the "
            f"{n_positives} validation positives, each against 20 items of the "
            f"catalogue)") in err
    saved = polylite.load(model)
    auc = saved.score(X, np.concatenate([np.zeros(k), y[k:]]))
    assert abs(auc - kept) < 0.05


def test_ranker_validation_samples_the_positives_to_a_fraction_of_the_training(
        interactions, tmp_path, capsys):
    """Each epoch scores at most RANKING_VALIDATION_SCORES_PER_POSITIVE (positive, item)
    pairs per training positive (at least 5000), and at least 100 validation
    positives."""
    from polylite.cli import _fit
    X, y, _, k, train, test = interactions
    rows = np.repeat(np.arange(k, X.shape[0]), 20)  # 20 times the validation rows
    many = tmp_path / "many.svm"
    from sklearn.datasets import dump_svmlight_file
    dump_svmlight_file(X[rows], y[rows], str(many), zero_based=True)
    status, _, err = _run(capsys, "fit", train, "-m", tmp_path / "r.npz", "--task",
                          "ranking", "--item-columns", ITEMS, "--validation", many,
                          "--zero-based", "--max-iter", 2, "--seed", 0)
    assert status == 0, err
    saved = polylite.load(tmp_path / "r.npz")
    n_val = int(np.sum(y[rows] == 1))
    n_train = int(np.sum(y[:k] == 1))
    budget = max(5000, _fit.RANKING_VALIDATION_SCORES_PER_POSITIVE * n_train)
    n_items = saved.item_columns[1] - saved.item_columns[0]  # (one-hot, all trained)
    scored = max(100, budget // (min(n_items, 50) + 1))
    assert n_val > scored  # (the test can fail: there is a sample to take)
    assert (f"of the {n_val} validation positives, each against {min(n_items, 50)} "
            f"items") in err, err
    sampled = int(err.split("(the kept epoch's, on ")[1].split(" of ")[0])
    assert sampled == scored


def test_ranker_on_libfm_relations(tmp_path, capsys):
    # libFM's relation files, written by the relations' tests' helper.
    from test_libfm_relations import write_table
    X, y, pairs = _interactions()
    k = int(0.8 * X.shape[0])
    write_table(tmp_path / "user.x", sp.identity(N_USERS, format="csr"))
    write_table(tmp_path / "item.x", sp.identity(N_ITEMS, format="csr"))
    for name, column in (("user", 0), ("item", 1)):
        np.savetxt(tmp_path / f"{name}.train", pairs[:k, column], fmt="%d")
        np.savetxt(tmp_path / f"{name}.test", pairs[k:, column], fmt="%d")
    # The lines hold only their labels: the rows are the relations' tables.
    train, test = tmp_path / "train.libfm", tmp_path / "test.libfm"
    train.write_text("".join(f"{label:g}\n" for label in y[:k]))
    test.write_text("".join(f"{label:g}\n" for label in y[k:]))
    relations = f"{tmp_path / 'user'},{tmp_path / 'item'}"
    model = tmp_path / "rel.npz"
    status, _, err = _run(capsys, "fit", train, "-m", model, "--task", "ranking",
                          "--relation", relations, "--max-iter", 3, "--seed", 0,
                          "--progress", "lines")
    assert status == 0, err
    assert "training AUC" in err
    saved = polylite.load(model)
    assert saved.n_features_in_ == N_USERS + N_ITEMS
    # The relations' rows are the interactions' one-hot rows (user, then item columns).
    status, out, _ = _run(capsys, "predict", model, test, "--relation", relations)
    np.testing.assert_allclose(np.array(out.split(), dtype=float), saved.predict(X[k:]),
                               rtol=1e-12)
    status, out, err = _run(capsys, "evaluate", model, test, "--relation", relations,
                            "--json", "--chunk-bytes", 16)
    assert status == 0, err
    assert json.loads(out)["positives"] == int(np.sum(y[k:] == 1))
    # One relation gives no item part.
    status, _, err = _run(capsys, "fit", train, "-m", model, "--task", "ranking",
                          "--relation", tmp_path / "user")
    assert status == 2 and "from the second relation (--relation USERS,ITEMS)" in err


@pytest.mark.parametrize("options, named", [
    ([], "--task ranking needs the item part of the rows: give --item-columns "
         "START:STOP (its columns), or --relation USERS,ITEMS"),
    (["--item-columns", ITEMS, "--stream"], "argument --stream: not with --task ranking"),
    (["--item-columns", ITEMS, "--loss", "logistic"],
     "argument --loss: must be one of ['bpr', 'warp', 'ials'], got 'logistic'"),
    (["--item-columns", ITEMS, "--solver", "cd"],
     "argument --solver: must be one of ['sgd', 'adagrad']"),
    (["--item-columns", ITEMS, "--estimator", "pn"],
     "argument --task: ranking is fitted by --estimator fm"),
    (["--item-columns", "60:40"], "argument --item-columns: needs 0 <= START < STOP"),
    (["--item-columns", "40"], "argument --item-columns: invalid column range '40'"),
    (["--item-columns", "40:70", "--n-features", 60],
     "argument --item-columns: STOP 70 is beyond --n-features 60"),
])
def test_ranker_usage_errors(interactions, tmp_path, capsys, options, named):
    _, _, _, _, train, _ = interactions
    model = tmp_path / "r.npz"
    status, _, err = _run(capsys, "fit", train, "-m", model, "--task", "ranking", *options)
    assert status == 2
    assert named in err and "usage: polylite fit" in err
    assert not model.exists()


def test_ranking_options_need_the_ranking_task(binary, tmp_path, capsys):
    _, _, train, _ = binary
    status, _, err = _run(capsys, "fit", train, "-m", tmp_path / "m.npz",
                          "--item-columns", "2:4")
    assert status == 2 and "argument --item-columns: only with --task ranking" in err
    status, _, err = _run(capsys, "fit", train, "-m", tmp_path / "m.npz", "--task",
                          "classification", "--loss", "warp")
    assert status == 2 and "argument --loss: must be one of ['logistic'" in err


def test_ranker_labels_other_than_0_and_1(interactions, tmp_path, capsys):
    X, y, _, k, train, _ = interactions
    bad = _write(tmp_path / "bad.svm", X[:k], np.where(y[:k] == 1, 2, -1))
    model = tmp_path / "r.npz"
    status, _, err = _run(capsys, "fit", bad, "-m", model, "--task", "ranking",
                          "--item-columns", ITEMS)
    assert status == 1 and not model.exists()
    assert err.strip().splitlines() == [
        f"polylite fit: error: {bad}: the labels of a ranker's data are 1 (a positive) "
        f"and 0 (another interaction of the user with the item), found -1, 2"]
    assert _run(capsys, "fit", train, "-m", model, "--task", "ranking", "--item-columns",
                ITEMS, "--max-iter", 1, "-q")[0] == 0
    status, _, err = _run(capsys, "evaluate", model, bad)
    assert status == 1 and "found -1, 2" in err and "Traceback" not in err


# ---- errors ------------------------------------------------------------------------------

@pytest.mark.parametrize("line, message", [
    ("1 1:2 2:x", "the value 'x' of feature 2 is not a number"),
    ("abc 1:2", "the label 'abc' is not a number"),
    ("1 a:2", "the feature index 'a' is not an integer"),
    ("1 1 2", "'1' is not of the form index:value"),
    ("1 -1:2", "the feature index -1 is out of range [0, 2147483647]"),
    ("1 3:1 2:1", "feature indices must increase along a line"),
    ("1 2:1 2:1", "feature indices must increase along a line"),
    ("1 3000000000:1", "the feature index 3000000000 is out of range"),
    ("1 1:nan", "a feature value is not finite"),
    ("inf 1:1", "the label is not finite"),
])
def test_malformed_line_names_file_and_line(tmp_path, capsys, line, message):
    path = tmp_path / "bad.svm"
    good = "".join(f"{i % 3} {i % 5 + 1}:1\n" for i in range(60))
    path.write_text(good + "# a comment\n\n" + line + "\n" + good)
    model = tmp_path / "m.npz"
    status, _, err = _run(capsys, "fit", path, "-m", model, "--chunk-bytes", 100)
    assert status == 1
    assert f"{path}:63: {message}" in err
    assert not model.exists() and _temporaries(tmp_path) == []


def test_missing_and_empty_files(tmp_path, capsys):
    status, _, err = _run(capsys, "fit", tmp_path / "no.svm", "-m", tmp_path / "m.npz")
    assert status == 1 and "no.svm: no such file" in err
    empty = tmp_path / "empty.svm"
    empty.write_text("# nothing\n\n")
    status, _, err = _run(capsys, "fit", empty, "-m", tmp_path / "m.npz")
    assert status == 1 and "no data" in err
    status, _, err = _run(capsys, "fit", empty, "-m", tmp_path / "no_dir" / "m.npz")
    assert status == 1 and "no directory" in err
    status, _, err = _run(capsys, "predict", tmp_path / "none.npz", empty)
    assert status == 1 and "no model file" in err
    status, _, err = _run(capsys, "info", empty)
    assert status == 1 and "not a polylite model file" in err


@pytest.mark.parametrize("options, named", [
    (["--solver", "newton"], "argument --solver: invalid choice: 'newton' (choose from"),
    (["--degree", "1"], "argument --degree: must be >= 2, got 1"),
    (["--degree", "two"], "argument --degree: invalid int value: 'two'"),
    (["--alpha", "-1"], "argument --alpha: must be >= 0"),
    (["--n-components", "0"], "argument --n-components: must be >= 1"),
    (["--lower-degrees", "augment"], "argument --lower-degrees: must be one of "
                                     "['separate', 'shared', 'none']"),
    (["--estimator", "pn", "--kernel", "anova"], "argument --kernel: not a parameter of "
                                                 "PolynomialNetworkRegressor"),
    (["--loss", "logistic"], "argument --loss: not a parameter of "
                             "FactorizationMachineRegressor"),
    (["--stream", "--solver", "lbfgs"], "argument --solver: --stream trains by "
                                        "partial_fit, which needs one of ['sgd', "
                                        "'adagrad', 'ftrl']"),
    (["--stream", "--early-stopping"], "argument --early-stopping: not with --stream"),
    (["--zero-based", "--one-based"], "not allowed with argument --zero-based"),
    (["--chunk-bytes", "12Q"], "argument --chunk-bytes: invalid size"),
])
def test_bad_options_are_usage_errors(recommender, tmp_path, capsys, options, named):
    _, _, train, _ = recommender
    model = tmp_path / "m.npz"
    status, _, err = _run(capsys, "fit", train, "-m", model, *options)
    assert status == 2
    assert named in err and "usage: polylite fit" in err
    assert not model.exists()


@pytest.mark.parametrize("options, named", [
    (["--degree", "1"], "argument --degree: must be >= 2, got 1"),
    (["--users", "0"], "argument --users: must be >= 1, got 0"),
    (["--items", "-3"], "argument --items: must be >= 1, got -3"),
    (["--samples", "0"], "argument --samples: must be >= 10, got 0"),
    (["--n-components", "0"], "argument --n-components/--components: must be >= 1"),
    (["--beta", "-1"], "argument --beta: must be >= 0"),
    (["--epochs", "x"], "argument --epochs/--max-iter: invalid int value"),
])
def test_demo_option_errors(capsys, options, named):
    status, out, err = _run(capsys, "demo", *options)
    assert status == 2
    assert named in err and "usage: polylite demo" in err
    assert "Traceback" not in err


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_demo_runs_small(capsys):
    status, out, _ = _run(capsys, "demo", "--samples", 3000, "--users", 30, "--items",
                          20, "--epochs", 5)
    assert status in (0, 1)
    assert "test RMSE" in out


def test_proba_errors(recommender, binary, tmp_path, capsys):
    _, _, train, test = recommender
    model = tmp_path / "r.npz"
    _run(capsys, "fit", train, "-m", model, "--max-iter", 2, "-q")
    status, _, err = _run(capsys, "predict", model, test, "--proba")
    assert status == 2 and "argument --proba" in err and "FactorizationMachineRegressor" in err
    _, _, btrain, btest = binary
    hinge = tmp_path / "h.npz"
    _run(capsys, "fit", btrain, "-m", hinge, "--task", "classification", "--loss",
         "squared_hinge", "-q")
    status, _, err = _run(capsys, "predict", hinge, btest, "--proba")
    assert status == 2 and "squared_hinge" in err


def test_failed_fit_keeps_the_previous_model(tmp_path, capsys):
    path = tmp_path / "huge.svm"
    path.write_text("".join(f"{i} 1:{1e150 * (i + 1)} 2:1e150\n" for i in range(50)))
    model = tmp_path / "m.npz"
    model.write_bytes(b"previous")
    status, _, err = _run(capsys, "fit", path, "-m", model, "--solver", "sgd",
                          "--eta0", 10, "--learning-rate", "constant")
    assert status == 1 and "error" in err
    assert model.read_bytes() == b"previous" and _temporaries(tmp_path) == []


def test_closed_stdout_stops_quietly(recommender, tmp_path, monkeypatch, capsys):
    _, _, train, test = recommender
    model = tmp_path / "m.npz"
    assert _run(capsys, "fit", train, "-m", model, "--max-iter", 2, "-q")[0] == 0

    class ClosedPipe:  # stdout of `polylite ... | head` once head has exited
        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

        flush = write

        def fileno(self):
            return os.open(tmp_path / "discarded", os.O_WRONLY | os.O_CREAT)

    monkeypatch.setattr(sys, "stdout", ClosedPipe())
    for command in (["predict", model, test], ["info", model]):
        assert main([str(a) for a in command]) == 141
    assert "error" not in capsys.readouterr().err


def test_help_and_version(capsys):
    status, out, _ = _run(capsys, "--version")
    assert status == 0 and polylite.__version__ in out
    status, out, _ = _run(capsys, "fit", "--help")
    assert status == 0 and "--n-components" in out and "--validation" in out
    status, _, err = _run(capsys)
    assert status == 2


# ---- the reader --------------------------------------------------------------------------

def test_reader_lines_comments_qid_and_blocks(tmp_path):
    path = tmp_path / "f.svm"
    path.write_bytes(b"# header\r\n1 qid:3 1:0.5 4:2 # tail\r\n\n-2 2:1e-3\n3\n")
    stats = _svmlight.ReadStats()
    X, y = _svmlight.read_file(path, stats=stats, chunk_bytes=8)
    assert y.tolist() == [1.0, -2.0, 3.0]
    np.testing.assert_array_equal(X.toarray(), [[0, 0.5, 0, 0, 2], [0, 0, 1e-3, 0, 0],
                                                [0, 0, 0, 0, 0]])
    assert (stats.rows, stats.min_index, stats.max_index) == (3, 1, 4)
    assert not _svmlight.detect_zero_based(stats)


# ---- as a process ------------------------------------------------------------------------

def test_python_dash_m_polylite_process(recommender, tmp_path):
    _, _, train, test = recommender
    model = tmp_path / "m.npz"
    run = [sys.executable, "-m", "polylite"]
    # Run from tmp_path: from the repository root, `-m` would import the source tree
    # (which has no compiled modules in a non-editable install) instead of the package.
    fit = subprocess.run(run + ["fit", train, "--model", str(model), "--max-iter", "3"],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert fit.returncode == 0, fit.stderr
    assert "epoch 3/3" in fit.stderr and "saved" in fit.stderr  # not a terminal: lines
    predict = subprocess.run(run + ["predict", str(model), test], capture_output=True,
                             text=True, timeout=120, cwd=tmp_path)
    assert predict.returncode == 0 and len(predict.stdout.split()) == 500
    bad = subprocess.run(run + ["demo", "--degree", "1"], capture_output=True, text=True,
                         timeout=120, cwd=tmp_path)
    assert bad.returncode == 2 and "argument --degree" in bad.stderr


def test_info_says_what_max_iter_none_came_to(tmp_path, capsys):
    """``info`` showed max_iter=None while the progress counted to the solver's 100."""
    from polylite import FactorizationMachineRegressor
    from polylite.cli import main
    from polylite.datasets import make_recommender
    X, y = make_recommender(500, n_users=20, n_items=15, random_state=0)
    FactorizationMachineRegressor(max_iter=None, n_components=2, tol=1e-2,
                                  random_state=0).fit(X, y).save(tmp_path / "m.npz")
    assert main(["info", str(tmp_path / "m.npz")]) == 0
    assert "max_iter=None (the solver's limit: 100)" in capsys.readouterr().out


def test_datasets_lists_its_public_names_only():
    import polylite.datasets as datasets
    assert set(dir(datasets)) == set(datasets.__all__)
