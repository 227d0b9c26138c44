"""The ``polylite`` command line (also ``python -m polylite``); see :func:`main`.

Commands::

    polylite fit TRAIN --model MODEL [options]   fit a model on an svmlight/libFM or
                                                 libffm file
    polylite predict MODEL DATA [-o FILE]        one prediction per line
    polylite evaluate MODEL DATA                 RMSE/MAE/R^2, accuracy/log-loss/AUC, or
                                                 a ranker's mean AUC
    polylite info MODEL                          estimator, parameters, shapes, version
    polylite demo                                an FM on a synthetic recommender

Data files are svmlight/libsvm/libFM text (``label index:value ...``), zero- or one-based
(detected, or ``--zero-based``/``--one-based``), or libffm text (``label
field:feature:value ...``, indices from 0: names ending in .ffm or .libffm, or
``--format libffm``), optionally gzip, bzip2 or xz compressed.
Compressed files are decompressed as they are read, within a bound: one whose text grows
to more than 200 times its compressed size (past its first 64 MiB) is refused as not a
data file (a decompression bomb), as is any line longer than 256 MiB.  A file without a
data line (empty, or comments only) is an error.

Outputs never overwrite an input (the same file, also through a link).  A new or regular
file is written beside the target and replaces it only on success (through a symlink:
the file it points to); predictions to an existing device or FIFO (/dev/null, a named
pipe) are written into it, as the shell's > does; a model is never saved to one.
predict and evaluate take the models fit writes (factorization machines, field-aware
ones, polynomial networks, rankers), not multi-output, ordinal or pipeline models saved from Python.

libFM's options (-dim, -iter, -task, -method, ...) and libffm's (-k, -t, -r, -l, -p,
--auto-stop, ...) are answered with the polylite options that do the same, and the
polylite command to run instead.  Progress and messages go to stderr, results to stdout.  Exit
status: 0 on success, 1 when the work failed (unreadable data or model, a fit that
diverged), 2 for a usage error (a bad option or value), 130 when interrupted.
"""
import contextlib
import importlib
import os
import sys

from . import _common

__all__ = ["main"]

_DESCRIPTION = __doc__.split("\n", 1)[1].replace("``", "").replace("::", ":")

# The parsers are built from the standard library alone, so that --help, --version and
# mistyped options answer at once; a command's module (NumPy, scikit-learn, the
# estimators) is imported when the command runs.


def main(argv=None):
    """Run the ``polylite`` command.

    Parameters
    ----------
    argv : list of str or None, default=None
        The arguments after the program name (None: ``sys.argv[1:]``).

    Returns
    -------
    status : int
        0 on success, 1 when the work failed, 2 for a usage error, 130 when interrupted.
    """
    from . import _hints, _parser
    parser = _parser.build_parser(_DESCRIPTION)
    argv = sys.argv[1:] if argv is None else list(argv)
    args = None
    try:
        _hints.check_argv(parser, argv)
        args, extra = parser.parse_known_args(argv)
        if extra:  # the command's usage, not the top level's
            args.parser.error(f"unrecognized arguments: {' '.join(extra)}")
        if getattr(args, "chunk_bytes", False) is None:
            from .._svmlight import DEFAULT_CHUNK_BYTES
            args.chunk_bytes = DEFAULT_CHUNK_BYTES
        command = importlib.import_module(f"{__name__}._{args.command}")
        return command.run(args, args.parser)
    except SystemExit as exc:  # argparse: --help, --version, usage errors
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    except _common.user_errors() as exc:
        print(f"polylite {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # stdout closed early (| head): stop quietly, as cat does
        # Point stdout at /dev/null, or the interpreter's final flush fails again.
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except OSError as exc:  # writing output: a full disk, a vanished directory...
        print(f"polylite {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except MemoryError as exc:  # reading or predicting: the data or the model too large
        subject = getattr(args, "data", None) or getattr(args, "train", None) or \
            getattr(args, "model", None)
        print(f"polylite {args.command}: error: not enough memory for {subject}: it "
              f"{_common.allocation_text(exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("polylite: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
