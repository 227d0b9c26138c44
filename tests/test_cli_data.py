"""What the command line does with the data it is given: features beyond the model's
(dropped with a warning, or refused with --strict-features), empty files (an error
everywhere), and labels of a classification (several classes said so; libFM's binary
task by --binary-threshold)."""
import json

import numpy as np
import pytest
from sklearn.datasets import dump_svmlight_file

import polylite

from _cli import run_cli as _run, assert_one_line_error as _one_line_error


@pytest.fixture
def ratings(tmp_path):
    """Zero-based train/test files of 5 features and ratings 1 to 5."""
    rng = np.random.RandomState(0)
    X = rng.randn(300, 5)
    y = np.digitize(X[:, 0] + X[:, 1] * X[:, 2], [-1.5, -0.5, 0.5, 1.5]) + 1
    train, test = tmp_path / "train.svm", tmp_path / "test.svm"
    dump_svmlight_file(X[:200], y[:200], str(train), zero_based=True)
    dump_svmlight_file(X[200:], y[200:], str(test), zero_based=True)
    return X, y, train, test


@pytest.fixture
def model(ratings, tmp_path, capsys):
    """A regressor fitted on the ratings by the command line."""
    _, _, train, _ = ratings
    path = tmp_path / "m.npz"
    status, _, err = _run(capsys, "fit", train, "-m", path, "--max-iter", 3, "-q")
    assert status == 0, err
    return path


# ---- features beyond the model's ---------------------------------------------------------

@pytest.mark.parametrize("command", ["predict", "evaluate"])
def test_strict_features_refuses_features_beyond_the_model(model, tmp_path, capsys,
                                                           command):
    wide = tmp_path / "wide.svm"
    # The largest index is in the last block read, after the first one beyond the model.
    wide.write_text("1 0:1 7:1\n" + "2 1:1\n" * 40 + "3 2:1 12:0.5\n")
    status, out, err = _run(capsys, command, model, wide, "--strict-features",
                            "--chunk-bytes", 64)
    assert status == 1 and out == ""
    _one_line_error(err, f"polylite {command}: error: {wide}: feature index 12 is beyond "
                         f"the model's 5 features, zero-based indices 0 to 4 "
                         f"(--strict-features)")
    # By default they are dropped, with a warning that names the option.
    status, out, err = _run(capsys, command, model, wide)
    assert status == 0
    assert "2 nonzeros in 2 rows" in err and "ignored" in err
    assert "--strict-features" in err
    # Data within the model's features passes.
    status, _, err = _run(capsys, command, model, tmp_path / "test.svm",
                          "--strict-features", "-q")
    assert status == 0, err


def test_strict_features_writes_no_output_file(model, tmp_path, capsys):
    wide = tmp_path / "wide.svm"
    wide.write_text("1 1:1\n2 2:1 5:1\n")
    out_file = tmp_path / "p.txt"
    status, _, err = _run(capsys, "predict", model, wide, "--strict-features", "-o",
                          out_file)
    assert status == 1 and not out_file.exists()
    _one_line_error(err, "feature index 5", "5 features")


def test_strict_features_counts_one_based_indices(ratings, tmp_path, capsys):
    X, y, _, _ = ratings
    train = tmp_path / "one.svm"
    dump_svmlight_file(X[:50], y[:50], str(train), zero_based=False)
    path = tmp_path / "one.npz"
    assert _run(capsys, "fit", train, "-m", path, "--max-iter", 2, "-q")[0] == 0
    wide = tmp_path / "wide.svm"
    wide.write_text("1 1:1 6:1\n")
    status, _, err = _run(capsys, "predict", path, wide, "--strict-features")
    assert status == 1
    _one_line_error(err, "feature index 6 is beyond the model's 5 features, one-based "
                         "indices 1 to 5")


@pytest.mark.parametrize("command", ["predict", "evaluate"])
def test_the_help_states_the_default_for_features_beyond_the_model(capsys, command):
    status, out, _ = _run(capsys, command, "--help")
    text = " ".join(out.split())
    assert status == 0
    assert "--strict-features refuse DATA if it has features beyond the model's" in text
    assert "by default they are dropped with a warning" in text


# ---- empty files -------------------------------------------------------------------------

def _empty(tmp_path, name="empty.svm"):
    path = tmp_path / name
    path.write_text("# nothing but a comment\n\n")
    return path


@pytest.mark.parametrize("command", ["predict", "evaluate"])
def test_empty_data_is_an_error(model, tmp_path, capsys, command):
    empty = _empty(tmp_path)
    out_file = tmp_path / "p.txt"
    extra = ["-o", out_file] if command == "predict" else []
    status, out, err = _run(capsys, command, model, empty, *extra)
    assert status == 1 and out == ""
    _one_line_error(err, f"polylite {command}: error: {empty}: no data")
    assert not out_file.exists()


@pytest.mark.parametrize("options", [
    [],
    ["--stream"],
    ["--stream", "--n-features", "5", "--zero-based"],  # TRAIN not scanned first
])
def test_an_empty_training_file_is_an_error(tmp_path, capsys, options):
    empty = _empty(tmp_path)
    status, _, err = _run(capsys, "fit", empty, "-m", tmp_path / "m.npz", *options)
    assert status == 1 and not (tmp_path / "m.npz").exists()
    _one_line_error(err, f"polylite fit: error: {empty}: no data")


@pytest.mark.parametrize("options", [[], ["--stream"], ["--task", "classification"],
                                     ["--estimator", "bayes-fm", "--n-iter", 30]])
def test_an_empty_validation_file_is_an_error(ratings, tmp_path, capsys, options):
    _, _, train, _ = ratings
    empty = _empty(tmp_path)
    status, _, err = _run(capsys, "fit", train, "-m", tmp_path / "v.npz", "--validation",
                          empty, *options)
    assert status == 1 and not (tmp_path / "v.npz").exists()
    _one_line_error(err, f"polylite fit: error: {empty}: no data")


def test_empty_relation_and_groups_files_are_errors(tmp_path, capsys):
    import scipy.sparse as sp
    from test_libfm_relations import write_table
    user = tmp_path / "user"
    write_table(tmp_path / "user.x", sp.identity(4, format="csr"))
    (tmp_path / "user.train").write_text("")
    train = tmp_path / "train.libfm"
    train.write_text("1 0:1\n2 1:1\n3 0:1\n")
    fit = ["fit", train, "-m", tmp_path / "m.npz", "--relation", user]
    status, _, err = _run(capsys, *fit)
    assert status == 1
    _one_line_error(err, f"polylite fit: error: {user}.train: no data")
    (tmp_path / "user.train").write_text("0\n1\n2\n")
    groups = tmp_path / "groups.txt"
    groups.write_text("")
    status, _, err = _run(capsys, *fit, "--estimator", "bayes-fm", "--meta", groups)
    assert status == 1
    _one_line_error(err, f"polylite fit: error: {groups}: 0 groups for 2 columns")
    (tmp_path / "user.groups").write_text("")
    status, _, err = _run(capsys, *fit, "--estimator", "bayes-fm")
    assert status == 1
    _one_line_error(err, f"polylite fit: error: {user}.groups: 0 groups for 4 columns")
    (tmp_path / "user.groups").unlink()
    # A relation's empty row index for predict's DATA.
    assert _run(capsys, *fit, "--max-iter", 2, "-q")[0] == 0
    (tmp_path / "user.test").write_text("")
    status, _, err = _run(capsys, "predict", tmp_path / "m.npz", train, "--relation",
                          user)
    assert status == 1
    _one_line_error(err, f"polylite predict: error: {user}.test: no data")


# ---- the classes of a classification -----------------------------------------------------

def test_several_classes_are_said_to_be_fitted_one_vs_rest(ratings, tmp_path, capsys):
    _, _, train, _ = ratings
    path = tmp_path / "c.npz"
    status, _, err = _run(capsys, "fit", train, "-m", path, "--task", "classification",
                          "--max-iter", 2)
    assert status == 0, err
    assert ("polylite fit: note: 5 classes (1, 2, 3, 4, 5): fitting a multi-class model "
            "(one-vs-rest); --binary-threshold T fits two classes") in err
    assert polylite.load(path).classes_.tolist() == [1, 2, 3, 4, 5]
    # Two classes need no note; nor does --quiet print one.
    status, _, err = _run(capsys, "fit", train, "-m", path, "--task", "classification",
                          "--max-iter", 2, "-q")
    assert status == 0 and err == ""


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("stream", [False, True])
def test_binary_threshold_fits_libfm_binary_task(ratings, tmp_path, capsys, stream):
    X, y, train, test = ratings
    path = tmp_path / "b.npz"
    status, _, err = _run(capsys, "fit", train, "-m", path, "--task", "classification",
                          "--binary-threshold", 3, "--max-iter", 3, "--seed", 0,
                          *(["--stream"] if stream else []))
    assert status == 0, err
    assert "classes" not in err  # no multi-class note
    saved = polylite.load(path)
    assert saved.classes_.tolist() == [-1, 1]
    # The same as a classifier of the labels so split, fitted from Python.
    if not stream:
        fm = polylite.FactorizationMachineClassifier(max_iter=3, random_state=0)
        fm.fit(X[:200], np.where(y[:200] > 3, 1, -1))
        np.testing.assert_allclose(saved.P_, fm.P_)
    # predict writes the two classes; evaluate reads DATA's labels with the threshold.
    status, out, _ = _run(capsys, "predict", path, test)
    assert status == 0 and set(out.split()) <= {"-1", "1"}
    status, out, err = _run(capsys, "evaluate", path, test, "--json")
    assert status == 0 and "does not know" not in err
    scores = json.loads(out)
    expected = np.mean(saved.predict(X[200:]) == np.where(y[200:] > 3, 1, -1))
    assert scores["accuracy"] == pytest.approx(expected)
    assert {"log_loss", "auc"} <= set(scores)
    status, out, _ = _run(capsys, "info", path, "--json")
    assert json.loads(out)["metadata"]["data"]["binary_threshold"] == 3.0
    status, out, _ = _run(capsys, "info", path)
    assert "> 3: class 1" in out


def test_binary_threshold_errors(ratings, tmp_path, capsys):
    _, _, train, _ = ratings
    path = tmp_path / "b.npz"
    status, _, err = _run(capsys, "fit", train, "-m", path, "--binary-threshold", 3)
    assert status == 2
    assert "argument --binary-threshold: only with --task classification" in err
    assert "usage: polylite fit" in err
    status, _, err = _run(capsys, "fit", train, "-m", path, "--task", "classification",
                          "--binary-threshold", 5)
    assert status == 1 and not path.exists()
    _one_line_error(err, "every label is at or below --binary-threshold 5",
                    "one class only")
    status, _, err = _run(capsys, "fit", train, "-m", path, "--task", "classification",
                          "--binary-threshold", "nan")
    assert status == 2 and "must be a finite number" in err


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_a_threshold_that_is_not_a_number_is_refused(ratings, tmp_path, capsys):
    from polylite._io import save_model
    X, y, _, test = ratings
    fm = polylite.FactorizationMachineClassifier(max_iter=2).fit(X, np.where(y > 3, 1, -1))
    path = tmp_path / "odd.npz"
    save_model(fm, str(path), metadata={"data": {"binary_threshold": "3"}})
    for argv in (("evaluate", path, test), ("info", path)):
        status, out, err = _run(capsys, *argv)
        assert status == 1 and out == ""
        _one_line_error(err, "records a binary threshold that is not a number: '3'")
