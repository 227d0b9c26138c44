"""Helpers shared by the command line's test modules."""
from polylite.cli import main


def run_cli(capsys, *argv):
    """(exit status, stdout, stderr) of ``polylite *argv`` run in this process."""
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


def assert_one_line_error(err, *words):
    """``err`` is one line from polylite (no traceback) naming every word of ``words``."""
    assert "Traceback" not in err
    assert err.count("\n") == 1 and err.startswith("polylite "), err
    for word in words:
        assert word in err, err
