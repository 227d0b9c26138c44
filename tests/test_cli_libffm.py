"""The command line on libffm files: field-aware and field-weighted factorization machines
(--estimator ffm, fwfm) and FTRL fitted (in memory and streamed), applied and described,
and libffm's ffm-train options answered with polylite's."""
import json
import shlex
import subprocess
import sys

import numpy as np
import pytest

import polylite
from polylite import (FieldAwareFactorizationMachineClassifier,
                      FieldWeightedFactorizationMachineClassifier)
from polylite.datasets import load_libffm

from _cli import run_cli as _run


def _clicks(path, n_rows, seed, n_fields=3, per_field=6):
    """A libffm file: one feature of each field per row, a click when the features of
    fields 0 and 1 agree in parity (a pairwise interaction); returns its path."""
    rng = np.random.RandomState(seed)
    lines = []
    for _ in range(n_rows):
        picks = rng.randint(per_field, size=n_fields)
        label = int(picks[0] % 2 == picks[1] % 2) if rng.rand() > 0.1 else \
            int(rng.rand() < 0.5)
        tokens = [f"{f}:{f * per_field + p}:1" for f, p in enumerate(picks)]
        lines.append(" ".join([str(label)] + tokens))
    path.write_text("\n".join(lines) + "\n")
    return str(path)


@pytest.fixture
def clicks(tmp_path):
    return (_clicks(tmp_path / "train.ffm", 600, 0), _clicks(tmp_path / "valid.ffm", 200, 1),
            _clicks(tmp_path / "test.ffm", 200, 2))


def test_fit_predict_evaluate_info_of_a_field_aware_model(clicks, tmp_path, capsys):
    train, valid, test = clicks
    model = tmp_path / "m.npz"
    status, _, err = _run(capsys, "fit", train, "-m", model, "--estimator", "ffm",
                          "--n-components", 2, "--max-iter", 5, "--eta0", 0.2,
                          "--beta", 2e-5, "--seed", 0, "--progress", "lines")
    assert status == 0, err
    assert "FieldAwareFactorizationMachineClassifier" in err  # libffm's: a classifier
    assert "3 fields (libffm file)" in err and "training log-loss" in err
    assert "epoch 5/5" in err
    fitted = polylite.load(model)
    assert isinstance(fitted, FieldAwareFactorizationMachineClassifier)
    assert fitted.n_fields_ == 3 and fitted.classes_.tolist() == [0, 1]
    assert fitted.P_.shape == (1, 18, 3, 2)

    # The same fit in Python.
    X, y, fields = load_libffm(train)
    same = FieldAwareFactorizationMachineClassifier(
        n_components=2, max_iter=5, eta0=0.2, beta=2e-5, random_state=0,
        fields=fields).fit(X, y.astype(int))
    np.testing.assert_allclose(fitted.P_, same.P_)

    status, out, err = _run(capsys, "predict", model, test, "--proba", "-q")
    assert status == 0, err
    proba = np.array(out.split(), float)
    X_test, y_test, _ = load_libffm(test, n_features=X.shape[1])
    np.testing.assert_allclose(proba, same.predict_proba(X_test)[:, 1], rtol=1e-6)

    status, out, err = _run(capsys, "evaluate", model, test, "--json")
    assert status == 0, err
    scores = json.loads(out)
    assert set(scores) == {"rows", "accuracy", "log_loss", "auc"}
    assert scores["rows"] == 200 and scores["auc"] > 0.6

    status, out, err = _run(capsys, "info", model)
    assert status == 0, err
    assert "FieldAwareFactorizationMachineClassifier" in out
    assert "fields         3 (features per field: 6, 6, 6)" in out
    assert "libffm file" in out


def test_validation_stops_on_its_log_loss(clicks, tmp_path, capsys):
    """libffm's -p FILE --auto-stop: --validation FILE --n-iter-no-change 1, the log-loss
    of the validation file reported every epoch."""
    train, valid, _ = clicks
    model = tmp_path / "m.npz"
    status, _, err = _run(capsys, "fit", train, "-m", model, "--estimator", "ffm",
                          "--validation", valid, "--n-iter-no-change", 1, "--max-iter", 60,
                          "--eta0", 0.5, "--seed", 0, "--progress", "lines")
    assert status == 0, err
    epochs = [line for line in err.splitlines() if line.startswith("epoch ")]
    assert "validation log-loss" in epochs[0] and "validation accuracy" in epochs[0]
    assert len(epochs) < 60  # stopped early
    assert "validation log-loss" in err.splitlines()[-1]
    assert polylite.load(model).n_iter_ == len(epochs)


def test_no_normalisation_ftrl_and_threads(clicks, tmp_path, capsys):
    train, _, test = clicks
    model = tmp_path / "m.npz"
    status, _, err = _run(capsys, "fit", train, "-m", model, "--estimator", "ffm",
                          "--no-normalize", "--solver", "ftrl", "--l1", 0.5, "--l2", 1,
                          "--eta0", 0.1, "--max-iter", 3, "--n-jobs", 2, "-q")
    assert status == 0, err
    fitted = polylite.load(model)
    assert (fitted.normalize, fitted.solver, fitted.l1, fitted.l2, fitted.n_jobs) == \
        (False, "ftrl", 0.5, 1.0, 2)
    # FTRL on a plain FM, from a libffm file (the fields unused).
    status, _, err = _run(capsys, "fit", train, "-m", tmp_path / "fm.npz", "--task",
                          "classification", "--solver", "ftrl", "--l1", 0.1, "--max-iter",
                          2)
    assert status == 0, err
    assert "libffm file (its fields unused)" in err
    status, out, err = _run(capsys, "evaluate", tmp_path / "fm.npz", test)
    assert status == 0 and "auc" in out, err


def test_format_option_and_compressed_files(clicks, tmp_path, capsys):
    import gzip
    train, _, test = clicks
    plain = tmp_path / "train.txt"
    plain.write_text(open(train).read())
    zipped = tmp_path / "test.ffm.gz"
    zipped.write_bytes(gzip.compress(open(test, "rb").read()))
    model = tmp_path / "m.npz"
    # A libffm file under another name: --format libffm.
    status, _, err = _run(capsys, "fit", plain, "-m", model, "--estimator", "ffm",
                          "--max-iter", 2)
    assert status == 2 and "ffm takes the field of each feature from a libffm file" in err
    status, _, err = _run(capsys, "fit", plain, "-m", model, "--estimator", "ffm",
                          "--format", "libffm", "--max-iter", 2, "-q")
    assert status == 0, err
    # DATA read as the model's training file was, or by its name.
    first = _run(capsys, "predict", model, plain, "-q")
    second = _run(capsys, "predict", model, zipped, "-q")
    assert first[0] == second[0] == 0
    assert len(first[1].split()) == 600 and len(second[1].split()) == 200


def test_libffm_errors_name_the_line_and_the_option(clicks, tmp_path, capsys):
    train, _, _ = clicks
    bad = tmp_path / "bad.ffm"
    bad.write_text("1 0:1:1 1:7:1\n0 0:2:1 1:x:1\n")
    status, _, err = _run(capsys, "fit", bad, "-m", tmp_path / "m.npz", "--estimator",
                          "ffm")
    assert status == 1 and "bad.ffm:2: the feature index 'x' is not an integer" in err
    clash = tmp_path / "clash.ffm"
    clash.write_text("1 0:1:1 1:7:1\n0 1:1:1\n")
    status, _, err = _run(capsys, "fit", clash, "-m", tmp_path / "m.npz", "--estimator",
                          "ffm")
    assert status == 1 and "clash.ffm:2: feature 1 is in field 1" in err
    status, _, err = _run(capsys, "fit", train, "-m", tmp_path / "m.npz", "--one-based")
    assert status == 2 and "argument --one-based: not with a libffm file" in err


def test_strict_features_on_libffm_data(clicks, tmp_path, capsys):
    train, _, _ = clicks
    model = tmp_path / "m.npz"
    assert _run(capsys, "fit", train, "-m", model, "--estimator", "ffm", "--max-iter", 1,
                "-q")[0] == 0
    wide = tmp_path / "wide.ffm"
    wide.write_text("1 0:1:1 1:7:1\n0 0:2:1 2:40:1\n")
    status, out, err = _run(capsys, "predict", model, wide)
    assert status == 0 and len(out.split()) == 2
    assert "1 nonzeros in 1 rows of" in err
    status, _, err = _run(capsys, "predict", model, wide, "--strict-features")
    assert status == 1 and "feature index 40 is beyond the model's 18 features" in err


# ---- libffm's options ----------------------------------------------------------------------

def _libffm_error(err, command):
    lines = err.strip().splitlines()
    prog = f"polylite {command}" if command else "polylite"
    assert lines[0].startswith(f"usage: {prog} "), err
    assert lines[1] == f"{prog}: error: these are libffm's options:", err
    split = lines.index("the same in polylite:")
    return ([line[2:] for line in lines[2:split]],
            [shlex.split(line) for line in lines[split + 1:]])


LIBFFM_LINE = ["-l", "0.00002", "-k", "4", "-t", "15", "-r", "0.2", "-s", "2", "-p",
               "valid.ffm", "--auto-stop", "--no-norm"]


def test_libffm_options_are_answered_with_the_command_to_paste(capsys):
    status, out, err = _run(capsys, "fit", "train.ffm", "-m", "m.npz", *LIBFFM_LINE)
    assert status == 2 and out == ""
    answers, commands = _libffm_error(err, "fit")
    assert [answer.split(" is ")[0] for answer in answers] == [
        "-l 0.00002", "-k 4", "-t 15", "-r 0.2", "-s 2", "-p valid.ffm", "--auto-stop",
        "--no-norm"]
    assert answers[0].startswith("-l 0.00002 is --alpha 0.00002 --beta 0.00002 (")
    assert answers[6].startswith("--auto-stop is --n-iter-no-change 1")
    assert answers[7] == "--no-norm is --no-normalize"
    assert commands == [["polylite", "fit", "train.ffm", "-m", "m.npz", "--alpha",
                         "0.00002", "--beta", "0.00002", "--n-components", "4",
                         "--max-iter", "15", "--eta0", "0.2", "--n-jobs", "2",
                         "--validation", "valid.ffm", "--n-iter-no-change", "1",
                         "--no-normalize", "--estimator", "ffm"]]


def test_an_ffm_train_command_line_and_flags_without_equivalent(capsys):
    # ffm-train [options] TRAIN MODEL: the second file is the model.
    status, _, err = _run(capsys, "-k", "8", "-v", "5", "--on-disk", "train.ffm",
                          "model.npz")
    assert status == 2
    answers, commands = _libffm_error(err, None)
    assert answers[1].startswith("-v 5 has no polylite option")
    assert answers[2].startswith("--on-disk has no polylite option")
    assert commands == [["polylite", "fit", "--n-components", "8", "train.ffm", "--model",
                         "model.npz", "--estimator", "ffm"]]


def test_the_pasted_command_runs(clicks, tmp_path, capsys):
    train, valid, _ = clicks
    model = tmp_path / "m.npz"
    status, _, err = _run(capsys, "fit", train, "-m", model, "-k", "2", "-t", "4", "-p",
                          valid, "--auto-stop", "--no-norm")
    assert status == 2
    _, commands = _libffm_error(err, "fit")
    status, _, err = _run(capsys, *commands[0][1:], "-q")
    assert status == 0, err
    fitted = polylite.load(model)
    assert (fitted.n_components, fitted.max_iter, fitted.n_iter_no_change,
            fitted.normalize) == (2, 4, 1, False)


def test_polylite_process_on_libffm_files(clicks, tmp_path):
    train, _, test = clicks
    run = [sys.executable, "-m", "polylite"]
    fit = subprocess.run(run + ["fit", train, "-m", "m.npz", "--estimator", "ffm",
                                "--max-iter", "2"], capture_output=True, text=True,
                         timeout=120, cwd=tmp_path)
    assert fit.returncode == 0, fit.stderr
    predict = subprocess.run(run + ["predict", "m.npz", test, "--proba", "-o", "p.txt"],
                             capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert predict.returncode == 0, predict.stderr
    proba = np.loadtxt(tmp_path / "p.txt")
    assert proba.shape == (200,) and np.all((proba > 0) & (proba < 1))


def test_libffm_answers_agree_with_the_command_line_guide():
    """Every option the answer to a libffm option names is in that option's row of the
    table in docs/user_guide/command_line.rst."""
    import re
    from pathlib import Path

    from polylite.cli._hints import LIBFFM, Context
    guide = Path(__file__).resolve().parent.parent / "docs" / "user_guide" / \
        "command_line.rst"
    if not guide.exists():
        pytest.skip("no docs folder")
    text = guide.read_text()
    start = text.index(".. list-table:: libffm's ``ffm-train``")
    rows, row = [], None
    for line in text[start:].splitlines()[4:]:
        if line.startswith("   * - "):
            row = [line[len("   * - "):]]
            rows.append(row)
        elif line.startswith("     - "):
            row.append(line[len("     - "):])
        elif line.startswith("       ") and row:
            row[-1] += " " + line.strip()
        elif line.strip() and not line.startswith(" "):
            break
    for name, (metavar, answer_of) in LIBFFM.items():
        answer = answer_of(metavar, Context("fit", {}, None))
        cells = [polylite_cell for libffm_cell, polylite_cell in rows
                 if re.match(rf"``{re.escape(name)}(?![-a-z])", libffm_cell)]
        assert cells, f"the table has no row for {name}"
        if not answer.options:
            assert "no equivalent" in cells[0], name
        for option in answer.options:
            if option.startswith("--"):
                assert option in cells[0], (name, option)


def test_fit_predict_evaluate_info_of_a_field_weighted_model(clicks, tmp_path, capsys):
    train, _, test = clicks
    model = tmp_path / "m.npz"
    status, _, err = _run(capsys, "fit", train, "-m", model, "--estimator", "fwfm",
                          "--n-components", 2, "--max-iter", 5, "--seed", 0,
                          "--progress", "lines")
    assert status == 0, err
    assert "FieldWeightedFactorizationMachineClassifier" in err
    assert "3 fields (libffm file)" in err and "training log-loss" in err
    fitted = polylite.load(model)
    assert isinstance(fitted, FieldWeightedFactorizationMachineClassifier)
    assert fitted.P_.shape == (1, 18, 2) and fitted.field_weights_.shape == (1, 3, 3)
    X, y, fields = load_libffm(train)
    same = FieldWeightedFactorizationMachineClassifier(
        n_components=2, max_iter=5, random_state=0, fields=fields).fit(X, y.astype(int))
    np.testing.assert_allclose(fitted.P_, same.P_)
    np.testing.assert_allclose(fitted.field_weights_, same.field_weights_)
    status, out, err = _run(capsys, "evaluate", model, test, "--json")
    assert status == 0, err
    assert json.loads(out)["auc"] > 0.6
    status, out, err = _run(capsys, "info", model)
    assert status == 0, err
    assert "FieldWeightedFactorizationMachineClassifier" in out
    assert "fields         3 (features per field: 6, 6, 6)" in out
    status, _, err = _run(capsys, "fit", tmp_path / "x.svm", "-m", model, "--estimator",
                          "fwfm")
    assert status == 2 and "fwfm takes the field of each feature" in err


@pytest.mark.parametrize("stream", [False, True])
def test_field_weighted_model_by_ftrl(clicks, tmp_path, capsys, stream):
    """--estimator fwfm --solver ftrl: the Python fit (in memory) or its partial_fit
    calls (--stream, one block), with the weights and pairs of fields kept."""
    train, _, test = clicks
    model = tmp_path / "m.npz"
    extra = ["--stream"] if stream else []
    status, _, err = _run(capsys, "fit", train, "-m", model, "--estimator", "fwfm",
                          "--solver", "ftrl", "--l1", 0.5, "--l2", 0.1, "--eta0", 0.5,
                          "--max-iter", 5, "--no-shuffle", "--seed", 0, "-q", *extra)
    assert status == 0, err
    fitted = polylite.load(model)
    assert isinstance(fitted, FieldWeightedFactorizationMachineClassifier)
    assert (fitted.solver, fitted.l1, fitted.l2) == ("ftrl", 0.5, 0.1)
    X, y, fields = load_libffm(train)
    same = FieldWeightedFactorizationMachineClassifier(
        solver="ftrl", l1=0.5, l2=0.1, eta0=0.5, max_iter=5, shuffle=False,
        random_state=0, fields=fields)
    if stream:
        for _ in range(5):
            same.partial_fit(X, y.astype(int), classes=[0, 1])
    else:
        same.fit(X, y.astype(int))
    np.testing.assert_allclose(fitted.field_weights_, same.field_weights_, rtol=1e-6)
    np.testing.assert_allclose(fitted.P_, same.P_, rtol=1e-6, atol=1e-9)
    assert fitted.n_nonzero_weights_ == same.n_nonzero_weights_
    assert fitted.n_nonzero_weights_ < fitted.n_parameters_ - 1  # l1 dropped weights
    status, out, err = _run(capsys, "evaluate", model, test, "--json")
    assert status == 0 and json.loads(out)["auc"] > 0.9, err


@pytest.mark.parametrize("estimator", ["ffm", "fwfm"])
def test_streamed_libffm_file_is_partial_fit_over_its_blocks(clicks, tmp_path, capsys,
                                                             estimator):
    """--stream on a libffm file: the fields from a first pass, then partial_fit over
    blocks of --chunk-bytes: the model of the same partial_fit calls in Python."""
    from polylite.datasets import iter_libffm_chunks, scan_libffm
    train, valid, _ = clicks
    model = tmp_path / "m.npz"
    status, _, err = _run(capsys, "fit", train, "-m", model, "--estimator", estimator,
                          "--stream", "--chunk-bytes", 2000, "--max-iter", 2,
                          "--no-shuffle", "--seed", 0, "--progress", "lines")
    assert status == 0, err
    assert "2 passes of 600 rows (streamed)" in err and "3 fields (libffm file)" in err
    assert "progressive log-loss" in err
    fitted = polylite.load(model)
    scan = scan_libffm(train)
    cls = type(fitted)
    same = cls(fields=scan.fields, shuffle=False, random_state=0)
    n_blocks = 0
    for _ in range(2):
        for X, y, _ in iter_libffm_chunks(train, scan.n_features, chunk_bytes=2000):
            same.partial_fit(X, y.astype(int), classes=[0, 1])
            n_blocks += 1
    assert n_blocks > 4
    np.testing.assert_allclose(fitted.P_, same.P_, rtol=1e-12)
    np.testing.assert_array_equal(fitted.fields_, scan.fields)
    # With a validation file (read whole): its log-loss is watched.
    status, _, err = _run(capsys, "fit", train, "-m", model, "--estimator", estimator,
                          "--stream", "--validation", valid, "--max-iter", 3,
                          "--progress", "lines")
    assert status == 0, err
    assert "validation log-loss" in err
    status, _, err = _run(capsys, "fit", train, "-m", model, "--stream", "--estimator",
                          estimator, "--early-stopping")
    assert status == 2 and "argument --early-stopping: not with --stream" in err
