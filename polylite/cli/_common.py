"""What every command shares and the entry point needs before a command runs: the error
of a command that failed, messages on stderr.  Standard library only (imported by
:func:`polylite.cli.main` before it knows the command)."""
import sys


class Failure(Exception):
    """The command could not do its work (exit status 1); the message says why."""


def user_errors():
    """The exceptions that report a user's mistake in one line: :class:`Failure`, and a
    data file's errors once the reader is loaded (it cannot have raised before)."""
    reader = sys.modules.get("polylite._svmlight")
    return (Failure,) + ((reader.DataFileError,) if reader is not None else ())


def note(args, message):
    """Print ``message`` on stderr unless --quiet."""
    if not getattr(args, "quiet", False):
        print(message, file=sys.stderr, flush=True)


def allocation_text(exc):
    """'needs 2.24 GiB for an array with shape (300000000,) and data type float64', from
    NumPy's MemoryError."""
    text = str(exc)
    if text.startswith("Unable to allocate "):
        return "needs " + text[len("Unable to allocate "):]
    return "needs more memory than this machine has"
