"""The progress lines of ``polylite fit`` report the score its summary line reports: the
RMSE of a regressor, the accuracy of a classifier, a Gibbs sampler's averaged prediction
(the AUC of a ranker is tested with its command)."""
import re

import numpy as np
import pytest
from sklearn.datasets import dump_svmlight_file

import polylite
from polylite import FactorizationMachineClassifier, FactorizationMachineRegressor

from _cli import run_cli as _run

pytestmark = pytest.mark.filterwarnings(
    "ignore::sklearn.exceptions.ConvergenceWarning")


@pytest.fixture
def data(tmp_path):
    rng = np.random.RandomState(0)
    X = rng.randn(400, 6)
    score = X[:, 0] * X[:, 1] + X[:, 2]
    paths = {}
    for name, y in [("r", score + 0.1 * rng.randn(400)), ("b", np.where(score > 0, 1, -1)),
                    ("m", np.digitize(score, [-0.7, 0.7]) + 1)]:
        paths[name] = (str(tmp_path / f"{name}_train.svm"),
                       str(tmp_path / f"{name}_valid.svm"), y)
        dump_svmlight_file(X[:300], y[:300], paths[name][0], zero_based=True)
        dump_svmlight_file(X[300:], y[300:], paths[name][1], zero_based=True)
    return X, paths


def _progress(err, name):
    """The values of ``name`` on the progress lines, in order."""
    return [float(value) for value in
            re.findall(rf"^(?:\[.*\] )?epoch \d+/\d+ .*  {re.escape(name)} (\S+)  ", err,
                       re.MULTILINE)]


def _summary(err, name):
    return float(re.search(rf"; {re.escape(name)} (\S+);", err)[1])


FIT = ["--max-iter", 6, "--tol", 0, "--n-iter-no-change", 100, "--seed", 0,
       "--solver", "cd", "--n-components", 3, "--progress", "lines"]


def test_a_regressor_reports_the_rmse(data, tmp_path, capsys):
    X, paths = data
    train, valid, y = paths["r"]
    status, _, err = _run(capsys, "fit", train, "-m", tmp_path / "r.npz", "--validation",
                          valid, *FIT)
    assert status == 0, err
    assert "validation loss" not in err
    reported = _progress(err, "validation rmse")
    assert len(reported) == 6
    # The model kept is the epoch of the lowest validation loss, hence RMSE.
    assert _summary(err, "validation rmse") == round(min(reported), 4)
    for epochs in (1, 6):  # each epoch's RMSE is the RMSE of the model of that epoch
        fm = FactorizationMachineRegressor(max_iter=epochs, tol=0, random_state=0,
                                           solver="cd", n_components=3)
        fm.fit(X[:300], y[:300])
        rmse = np.sqrt(np.mean((fm.predict(X[300:]) - y[300:]) ** 2))
        assert reported[epochs - 1] == pytest.approx(rmse, rel=1e-5)


def test_a_classifier_reports_the_accuracy(data, tmp_path, capsys):
    X, paths = data
    train, valid, y = paths["b"]
    status, _, err = _run(capsys, "fit", train, "-m", tmp_path / "b.npz", "--task",
                          "classification", "--validation", valid, *FIT)
    assert status == 0, err
    assert "validation loss" not in err
    reported = _progress(err, "validation accuracy")
    assert len(reported) == 6
    assert round(_summary(err, "validation accuracy"), 4) in \
        {round(value, 4) for value in reported}
    for epochs in (1, 4):
        fm = FactorizationMachineClassifier(max_iter=epochs, tol=0, random_state=0,
                                            solver="cd", n_components=3)
        fm.fit(X[:300], y[:300])
        assert reported[epochs - 1] == pytest.approx(fm.score(X[300:], y[300:]))


def test_held_out_rows_report_the_accuracy(data, tmp_path, capsys):
    _, paths = data
    train, _, _ = paths["b"]
    status, _, err = _run(capsys, "fit", train, "-m", tmp_path / "b.npz", "--task",
                          "classification", "--early-stopping", *FIT)
    assert status == 0, err
    reported = _progress(err, "validation accuracy")
    assert len(reported) == 6 and all(0 <= value <= 1 for value in reported)


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_one_vs_rest_outputs_report_their_accuracy(data, tmp_path, capsys, n_jobs):
    X, paths = data
    train, valid, y = paths["m"]
    status, _, err = _run(capsys, "fit", train, "-m", tmp_path / "m.npz", "--task",
                          "classification", "--validation", valid, "--n-jobs", n_jobs,
                          *FIT)
    assert status == 0, err
    # Each output keeps its epoch of the lowest validation loss: the one-vs-rest accuracy
    # of the model saved is one of its output's reports.
    scores = polylite.load(tmp_path / "m.npz").decision_function(X[300:])
    for output, label in enumerate((1, 2, 3)):
        reported = _progress(err, f"validation accuracy ({label} vs rest)")
        assert len(reported) == 6
        accuracy = np.mean((scores[:, output] > 0) == (y[300:] == label))
        assert round(accuracy, 6) in {round(value, 6) for value in reported}
    assert "[output 3/3] epoch 6/6" in err


def _sweeps(err, name):
    return [float(value) for value in
            re.findall(rf"^sweep \d+/\d+  {re.escape(name)} (\S+)  ", err, re.MULTILINE)]


@pytest.mark.parametrize("n_kept", [5, 25])
def test_a_gibbs_sampler_says_what_each_figure_is(data, tmp_path, capsys, n_kept):
    """The sweeps report the prediction averaged over all the sweeps after the burn-in,
    the summary the saved model's (n_kept of them): one figure when every sweep is kept,
    else both, each named."""
    X, paths = data
    train, valid, y = paths["r"]
    model = tmp_path / "bayes.npz"
    status, _, err = _run(capsys, "fit", train, "-m", model, "--validation", valid,
                          "--estimator", "bayes-fm", "--n-iter", 30, "--n-burn-in", 5,
                          "--n-kept", n_kept, "--n-components", 3, "--seed", 0,
                          "--progress", "lines")
    assert status == 0, err
    reported = _sweeps(err, "validation rmse")
    assert len(reported) == 30
    saved = polylite.load(model).predict(X[300:])
    rmse = np.sqrt(np.mean((saved - y[300:]) ** 2))
    summary = re.search(r"; validation rmse (\S+)( \(.*\))?; saved", err)
    assert float(summary[1]) == round(rmse, 4)
    if n_kept == 25:  # every sweep after the burn-in kept: the same figure
        assert summary[2] is None and float(summary[1]) == round(reported[-1], 4)
    else:
        assert summary[2] == (f" (the saved model: 5 kept samples; the progress's "
                              f"{reported[-1]:.4f} averages all 25 sweeps after the "
                              f"burn-in)")
        assert round(rmse, 4) != round(reported[-1], 4)
