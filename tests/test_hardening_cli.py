"""The command line against destructive outputs, models it cannot use, memory errors and
decompression bombs.

Output tests use FIFOs and symlinks in a temporary folder, never a real device node: run
as root, the bug they guard against replaces the device.  Every FIFO test runs under a
deadline, so that a regression which blocks on the FIFO fails instead of hanging.
"""
import bz2
import contextlib
import gzip
import lzma
import os
import signal
import stat

import numpy as np
import pytest
from sklearn.datasets import dump_svmlight_file

import polylite
from polylite import FactorizationMachineRegressor, _svmlight

from _cli import assert_one_line_error as _one_line_error, run_cli

try:
    from numpy._core._exceptions import _ArrayMemoryError
except ImportError:  # numpy < 2
    from numpy.core._exceptions import _ArrayMemoryError


class _Hung(Exception):
    """A command did not finish in time (not an OSError: main() would report those)."""


@contextlib.contextmanager
def _deadline(seconds=60):
    def expire(signum, frame):
        raise _Hung(f"no answer in {seconds} s (blocked on a FIFO?)")
    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _run(capsys, *argv):
    with _deadline():
        return run_cli(capsys, *argv)


@pytest.fixture
def files(tmp_path, capsys):
    """A small regression file and a model fitted on it by the command line."""
    rng = np.random.RandomState(0)
    X = rng.randn(60, 4)
    y = X[:, 0] + X[:, 1] * X[:, 2]
    data = tmp_path / "a.svm"
    dump_svmlight_file(X, y, str(data), zero_based=True)
    model = tmp_path / "m.npz"
    status, _, err = _run(capsys, "fit", data, "-m", model, "--max-iter", 5, "-q")
    assert status == 0, err
    return data, model


def _contents(*paths):
    return [path.read_bytes() for path in paths]


# ---- outputs: never an input, never a replaced device or FIFO ---------------------------

def test_predict_refuses_to_write_over_its_inputs(files, tmp_path, capsys):
    data, model = files
    before = _contents(data, model)
    (tmp_path / "data-link").symlink_to(data)
    os.link(data, tmp_path / "data-hardlink")
    (tmp_path / "model-link").symlink_to(model)
    for output, role in [(data, "the data"), (tmp_path / "data-link", "the data"),
                         (tmp_path / "data-hardlink", "the data"), (model, "the model"),
                         (tmp_path / "model-link", "the model")]:
        status, out, err = _run(capsys, "predict", model, data, "-o", output)
        assert status == 1 and out == ""
        _one_line_error(err, "same file as", role)
    assert _contents(data, model) == before
    assert (tmp_path / "data-link").is_symlink() and (tmp_path / "model-link").is_symlink()


def test_fit_refuses_to_save_over_its_inputs(files, tmp_path, capsys):
    data, model = files
    validation = tmp_path / "v.svm"
    validation.write_bytes(data.read_bytes())
    before = _contents(data, validation)
    (tmp_path / "train-link").symlink_to(data)
    for target, role in [(data, "the training data"),
                         (tmp_path / "train-link", "the training data"),
                         (validation, "the validation data")]:
        status, _, err = _run(capsys, "fit", data, "--validation", validation,
                              "-m", target, "--max-iter", 2, "-q")
        assert status == 1
        _one_line_error(err, "same file as", role)
    assert _contents(data, validation) == before
    assert (tmp_path / "train-link").is_symlink()


def test_fit_does_not_replace_a_fifo_with_the_model(files, tmp_path, capsys):
    data, _ = files
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (tmp_path / "fifo-link").symlink_to(fifo)
    for target in (fifo, tmp_path / "fifo-link"):
        status, _, err = _run(capsys, "fit", data, "-m", target, "--max-iter", 2, "-q")
        assert status == 1
        _one_line_error(err, "FIFO", "not a regular file")
        assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert (tmp_path / "fifo-link").is_symlink()


def test_predict_writes_into_a_fifo(files, tmp_path, capsys):
    data, model = files
    status, expected, err = _run(capsys, "predict", model, data, "-q")
    assert status == 0, err
    assert len(expected) < 16384  # fits in the FIFO's buffer: no reader thread needed
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (tmp_path / "fifo-link").symlink_to(fifo)
    for output in (fifo, tmp_path / "fifo-link"):
        # A reader first (non-blocking), so that opening the FIFO to write does not wait.
        reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        try:
            status, out, err = _run(capsys, "predict", model, data, "-o", output, "-q")
            assert status == 0, err
            assert out == ""
            assert stat.S_ISFIFO(os.lstat(fifo).st_mode)  # not replaced by a file
            received = b""
            with contextlib.suppress(BlockingIOError):
                while chunk := os.read(reader, 65536):
                    received += chunk
        finally:
            os.close(reader)
        assert received.decode() == expected
    assert (tmp_path / "fifo-link").is_symlink()


def test_predict_through_a_symlink_writes_the_file_it_points_to(files, tmp_path, capsys):
    data, model = files
    target = tmp_path / "out.txt"
    target.write_text("old\n")
    link = tmp_path / "out-link"
    link.symlink_to(target)
    status, _, err = _run(capsys, "predict", model, data, "-o", link, "-q")
    assert status == 0, err
    assert link.is_symlink()
    assert len(target.read_text().splitlines()) == 60
    # A dangling link: the file is created where it points.
    link.unlink()
    target.unlink()
    link.symlink_to(target)
    status, _, err = _run(capsys, "predict", model, data, "-o", link, "-q")
    assert status == 0, err
    assert link.is_symlink() and len(target.read_text().splitlines()) == 60
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".polylite-")]


def test_an_output_directory_is_refused(files, tmp_path, capsys):
    data, model = files
    status, _, err = _run(capsys, "predict", model, data, "-o", tmp_path)
    assert status == 1
    _one_line_error(err, "is a directory")
    status, _, err = _run(capsys, "fit", data, "-m", tmp_path, "-q")
    assert status == 1
    _one_line_error(err, "is a directory")


# ---- models the command line cannot use --------------------------------------------------

def _other_models(tmp_path):
    from sklearn.pipeline import make_pipeline

    from polylite import MultiOutputPolynomialRegressor, OrdinalMcRankRegressor
    from polylite.preprocessing import FieldEncoder
    rng = np.random.RandomState(0)
    X = rng.randn(40, 4)
    y = X[:, 0] + X[:, 1] * X[:, 2]
    ratings = {"user_id": rng.randint(0, 5, 40), "item_id": rng.randint(0, 7, 40)}
    models = {
        "MultiOutputPolynomialRegressor":
            MultiOutputPolynomialRegressor(max_basis=3).fit(X, np.c_[y, -y]),
        "OrdinalMcRankRegressor":
            OrdinalMcRankRegressor(max_basis=3).fit(X, np.digitize(y, [-1, 0, 1])),
        "Pipeline of FieldEncoder, FactorizationMachineRegressor":
            make_pipeline(FieldEncoder(), FactorizationMachineRegressor(
                n_components=2, max_iter=3)).fit(ratings, y),
    }
    paths = {}
    for i, (name, model) in enumerate(models.items()):
        paths[name] = tmp_path / f"other{i}.npz"
        polylite.save(model, paths[name])
    return paths


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_models_the_command_line_cannot_use_are_named(files, tmp_path, capsys):
    data, _ = files
    for name, path in _other_models(tmp_path).items():
        for command in ("predict", "evaluate"):
            status, out, err = _run(capsys, command, path, data)
            assert status == 1 and out == ""
            _one_line_error(err, name, f"polylite {command} does not take")
        status, out, err = _run(capsys, "info", path)
        assert status == 0, err
        assert name in out


# ---- memory errors -----------------------------------------------------------------------

def _memory_error(*args, **kwargs):
    raise _ArrayMemoryError((300_000_000, 8), np.dtype(np.float64))


def test_fit_out_of_memory_is_one_line(files, tmp_path, monkeypatch, capsys):
    data, _ = files
    monkeypatch.setattr(FactorizationMachineRegressor, "fit", _memory_error)
    status, _, err = _run(capsys, "fit", data, "-m", tmp_path / "new.npz", "-q")
    assert status == 1
    _one_line_error(err, "not enough memory", "4 features", "a.svm", "17.9 GiB",
                    "(300000000, 8)")
    assert not (tmp_path / "new.npz").exists()


def test_predict_and_evaluate_out_of_memory_are_one_line(files, monkeypatch, capsys):
    data, model = files
    from polylite.cli._models import FileModel
    monkeypatch.setattr(FactorizationMachineRegressor, "predict", _memory_error)
    # (predict and evaluate compute the regressor from its file's arrays)
    monkeypatch.setattr(FileModel, "predict", _memory_error)
    for command in ("predict", "evaluate"):
        status, out, err = _run(capsys, command, model, data, "-q")
        assert status == 1 and out == ""
        _one_line_error(err, "not enough memory", "17.9 GiB", "(300000000, 8)")


# ---- decompression bombs and endless lines -----------------------------------------------

@pytest.mark.parametrize("compress", [gzip.compress, bz2.compress, lzma.compress])
def test_a_decompression_bomb_is_refused(files, tmp_path, monkeypatch, capsys, compress):
    data, model = files
    bomb = tmp_path / "bomb.svm.z"
    bomb.write_bytes(compress(b"\0" * (8 * 2**20)))  # 8 MiB of zeros, a few KiB packed
    monkeypatch.setattr(_svmlight, "EXPANSION_CHECKED_AFTER", 2**20)
    for argv in (("fit", bomb, "-m", tmp_path / "new.npz"), ("predict", model, bomb),
                 ("fit", bomb, "-m", tmp_path / "new.npz", "--stream")):
        status, out, err = _run(capsys, *argv, "--chunk-bytes", "256K", "-q")
        assert status == 1 and out == ""
        _one_line_error(err, "bomb.svm.z: decompresses to more than 200 times its size")
    # Ordinary data, compressed, is read past the lowered bound.
    monkeypatch.setattr(_svmlight, "EXPANSION_CHECKED_AFTER", 0)
    packed = tmp_path / "a.svm.z"
    packed.write_bytes(compress(data.read_bytes()))
    X, y = _svmlight.read_file(packed, chunk_bytes=1024)
    assert X.shape[0] == 60


def test_a_line_longer_than_the_bound_is_refused(files, tmp_path, monkeypatch, capsys):
    data, model = files
    endless = tmp_path / "endless.svm"
    endless.write_bytes(b"1 " + b"1" * (3 * 2**20))  # no line end
    monkeypatch.setattr(_svmlight, "MAX_LINE_BYTES", 2**20)
    status, _, err = _run(capsys, "predict", model, endless, "--chunk-bytes", "64K", "-q")
    assert status == 1
    _one_line_error(err, "endless.svm:1: a line longer than 1 MiB")
    # Lines longer than a block but within the bound are read whole.
    long_line = b"2 " + b" ".join(b"%d:1" % j for j in range(1, 20000)) + b"\n"
    (tmp_path / "long.svm").write_bytes(b"1 1:1\n" + long_line + b"3 5:1\n")
    X, y = _svmlight.read_file(tmp_path / "long.svm", chunk_bytes=4096)
    np.testing.assert_array_equal(y, [1, 2, 3])
    assert X[1].nnz == 19999


def test_the_help_states_the_bounds():
    from polylite import cli
    text = " ".join(cli._DESCRIPTION.split())
    assert f"more than {_svmlight.MAX_EXPANSION} times its compressed size" in text
    assert f"past its first {_svmlight.EXPANSION_CHECKED_AFTER // 2**20} MiB" in text
    assert f"longer than {_svmlight.MAX_LINE_BYTES // 2**20} MiB" in text
