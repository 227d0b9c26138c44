"""Data files and outputs of the commands: libFM's relations, DATA read block by block
for a saved model, and outputs that never destroy a file."""
import contextlib
import os
import stat
import sys
import tempfile

import numpy as np

from .. import _libffm, _svmlight
from .._svmlight import DataFileError
from ._common import Failure, note
from ._models import model_dtype, recorded_data

# ---- libFM's relations -------------------------------------------------------------------


def with_relations(args, X, split, dtype, path, rows=None):
    """X (the data file ``path``'s columns) with libFM's relation blocks ``args.relation``
    after them: a RelationalMatrix; ``rows``, the slice of the file's lines X holds (a
    chunk: then the index files are checked against the whole file at its end)."""
    from .._engine.csr import check_rows
    from ..relational import RelationalMatrix, RelationBlock
    blocks, _ = relation_files(args, split, dtype)  # checked
    for name, block in zip(args.relation, blocks):
        lines = block.index.shape[0]
        if rows is None and lines != X.shape[0]:
            raise DataFileError(f"{name}.{split}: table rows for {lines} lines, {path} "
                                f"has {X.shape[0]}")
        if rows is not None and lines < rows.start + X.shape[0]:
            raise DataFileError(f"{name}.{split}: table rows for {lines} lines, {path} "
                                f"has more")
    if rows is not None:
        blocks = [RelationBlock(block.index[rows], block.table) for block in blocks]
    # The tables were checked when read: only the data file's columns are, here.
    return RelationalMatrix._from_checked([check_rows(X, [dtype]), *blocks], dtype)


def relation_files(args, split, dtype):
    """The blocks and groups of ``args.relation`` for ``split``, read once per command
    (kept on ``args``; the splits share the tables)."""
    from .._libfm import relation_blocks
    from ..relational import RelationalMatrix
    read = args.__dict__.setdefault("_relations_read", {"tables": {}})
    key = (split, np.dtype(dtype).name)
    if key not in read:
        blocks, groups = relation_blocks(args.relation, split, None, dtype, read["tables"])
        checked = []  # each block once, whatever the chunks of the data file
        for name, block in zip(args.relation, blocks):
            if block.index.shape[0] == 0:
                raise DataFileError(f"{name}.{split}: no data (no table row for any "
                                    f"line)")
            try:
                checked.extend(RelationalMatrix([block], dtype=dtype).blocks)
            except ValueError as exc:
                raise DataFileError(f"--relation {name}: {exc}") from None
        read[key] = checked, groups
    return read[key]


def relation_widths(args, dtype, split="train"):
    """The columns of each of ``args.relation``'s tables."""
    if not args.relation:
        return []
    return [block.table.shape[1] for block in relation_files(args, split, dtype)[0]]


def relation_inputs(args, splits):
    """(description, path) of the files of --relation read for ``splits``."""
    return [("the relation file", f"{name}{suffix}") for name in args.relation or []
            for suffix in (".x", ".groups") + tuple(f".{split}" for split in splits)]


def stack_rows(blocks):
    """The rows of several matrices of one layout in one matrix (relational ones read
    with the same relations' tables)."""
    from .._engine.layouts import layout_of
    return layout_of(blocks[0]).stack(blocks)


# ---- DATA of predict and evaluate --------------------------------------------------------

def _data_zero_based(args, header, estimator):
    """Whether DATA's indices start at 0: as given, as the model's training file's, or
    (a model saved from Python) detected."""
    if args.zero_based is not None:
        return args.zero_based
    recorded = recorded_data(header)
    if isinstance(recorded.get("zero_based"), bool):
        return recorded["zero_based"]
    # A model saved from Python: its columns are zero-based; the file may be either.
    stats = _svmlight.scan_file(args.data, chunk_bytes=args.chunk_bytes)
    zero_based = (_svmlight.detect_zero_based(stats) or
                  stats.max_index < estimator.n_features_in_)
    note(args, f"polylite {args.command}: reading {args.data} with "
               f"{'zero' if zero_based else 'one'}-based indices (the model does not "
               f"record its training file's; pass --zero-based or --one-based to choose)")
    return zero_based


def recorded_relations(header):
    """The relations a model file records (base paths and each table's columns), from
    ``polylite fit --relation``; empty for a model fitted without, or saved from Python."""
    data = recorded_data(header)
    return data.get("relation") or [], data.get("relation_columns")


def _check_relations(args, header, estimator, dtype):
    """Refuse relations the model was not fitted with: their tables' columns would be
    read as other columns of the model."""
    if not getattr(estimator, "_takes_relational", False):
        raise Failure(f"--relation: {type(estimator).__name__} ({args.model}) takes no "
                      f"relations' tables")
    recorded, columns = recorded_relations(header)
    written_by_fit = (header.get("metadata") or {}).get("written_by") == "polylite fit"
    if written_by_fit and not recorded:
        raise Failure(f"--relation: {args.model} was fitted without relations")
    widths = relation_widths(args, dtype, "test")
    if columns is not None and list(widths) != list(columns):
        fitted = ", ".join(f"{os.path.basename(name)} ({width} columns)"
                           for name, width in zip(recorded, columns))
        given = ", ".join(f"{name} ({width} columns)"
                          for name, width in zip(args.relation, widths))
        raise Failure(f"--relation: {args.model} was fitted with the relations "
                      f"{fitted}, in this order; given {given}")
    if sum(widths) > estimator.n_features_in_:
        raise Failure(f"--relation: the tables have {sum(widths)} columns, more than "
                      f"the model's {estimator.n_features_in_}")


def _own_columns(args, estimator):
    """The model's columns that DATA's own features fill (the relations' tables fill the
    ones after them)."""
    if not args.relation:
        return estimator.n_features_in_
    return estimator.n_features_in_ - sum(relation_widths(args, model_dtype(estimator),
                                                          "test"))


def _width_text(args, estimator):
    if args.relation:
        return (f"the data file's own {_own_columns(args, estimator)} columns (the "
                f"relations' tables take the columns after them)")
    return f"the model's {estimator.n_features_in_} features"


def iter_data(args, header, estimator, stats):
    """The blocks ``(X, y)`` of DATA, read as the model's training data were, each with
    the model's columns; features beyond them are dropped and counted in ``stats`` (see
    :func:`warn_dropped`), or refused with --strict-features.  DATA without a row is an
    error."""
    dtype = model_dtype(estimator)
    if data_format_of(args, header) == "libffm":
        yield from _iter_libffm_data(args, header, estimator, stats, dtype)
        return
    if args.relation:
        _check_relations(args, header, estimator, dtype)
    elif recorded_relations(header)[0]:
        names = ",".join(os.path.basename(name) for name in recorded_relations(header)[0])
        raise Failure(f"{args.model} was fitted with --relation {names}: give "
                      f"--relation with the relations' files for {args.data}")
    n_features = _own_columns(args, estimator)
    zero_based = _data_zero_based(args, header, estimator)
    start = 0
    blocks = _svmlight.iter_file(args.data, zero_based=zero_based, n_features=n_features,
                                 dtype=dtype, chunk_bytes=args.chunk_bytes, stats=stats)
    for X, y in blocks:
        if args.strict_features and stats.dropped_nonzeros:
            for _ in blocks:  # the rest of the file, for its largest index
                pass
            first = 0 if zero_based else 1
            raise DataFileError(
                f"{args.data}: feature index {stats.max_index} is beyond "
                f"{_width_text(args, estimator)}, {'zero' if zero_based else 'one'}-"
                f"based indices {first} to {first + n_features - 1} (--strict-features)")
        if args.relation:
            X = with_relations(args, X, "test", dtype, args.data,
                               slice(start, start + X.shape[0]))
            start += X.shape[0]
        yield X, y
    if stats.rows == 0:
        raise DataFileError(f"{args.data}: no data (every line is empty or a comment)")
    if args.relation:
        blocks, _ = relation_files(args, "test", dtype)
        for name, block in zip(args.relation, blocks):
            if block.index.shape[0] != start:
                raise DataFileError(f"{name}.test: table rows for {block.index.shape[0]} "
                                    f"lines, {args.data} has {start}")


def data_format_of(args, header):
    """DATA's format: --format's, libffm for a .ffm or .libffm name, else the model's
    training file's."""
    from ._parser import data_format
    return data_format(args, args.data, recorded_data(header).get("format"))


def _iter_libffm_data(args, header, estimator, stats, dtype):
    """The blocks ``(X, y)`` of DATA read as a libffm file (its fields are the model's:
    a field-aware model keeps those it was fitted with), as :func:`iter_data`."""
    if args.relation:
        raise Failure(f"--relation: not with a libffm file ({args.data})")
    if args.zero_based is False:
        raise Failure(f"--one-based: not with a libffm file ({args.data}; its indices "
                      f"start at 0)")
    n_features = estimator.n_features_in_
    blocks = _libffm.iter_libffm(args.data, dtype=dtype, chunk_bytes=args.chunk_bytes)
    for X, y, _ in blocks:
        stats.add(X, y, 0, False)
        X = _svmlight.with_columns(X, n_features, stats)
        if args.strict_features and stats.dropped_nonzeros:
            for X_rest, y_rest, _ in blocks:  # the rest of the file, for its largest index
                stats.add(X_rest, y_rest, 0, False)
            raise DataFileError(
                f"{args.data}: feature index {stats.max_index} is beyond "
                f"{_width_text(args, estimator)}, indices 0 to {n_features - 1} "
                f"(--strict-features)")
        yield X, y
    if stats.rows == 0:
        raise DataFileError(f"{args.data}: no data (every line is empty)")


def warn_dropped(args, stats, estimator):
    """Say how many of DATA's nonzeros were beyond the model's features and dropped."""
    if not stats.dropped_nonzeros:
        return
    unseen = "" if args.relation else " (unseen in training)"
    note(args, f"polylite {args.command}: warning: {stats.dropped_nonzeros} nonzeros in "
               f"{stats.dropped_rows} rows of {args.data} have feature indices beyond "
               f"{_width_text(args, estimator)}{unseen}; they were ignored "
               f"(--strict-features refuses such data)")


# ---- outputs -----------------------------------------------------------------------------

def check_writable(path, what):
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise Failure(f"cannot write {what} {path!r}: no directory {directory!r}")
    if not os.access(directory, os.W_OK):
        raise Failure(f"cannot write {what} {path!r}: directory {directory!r} is not "
                      f"writable")


_SPECIAL_FILES = ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                  (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"))


def check_output(path, what, inputs, in_place):
    """Check that ``what`` can be written to ``path`` without destroying a file: not one
    of ``inputs`` (pairs of a description and a path or None; the same file through
    links), not a directory, and (unless ``in_place``) not a device or FIFO.  Returns
    True when ``path`` is an existing device or FIFO, to be written into, False when it
    is a new or regular file, to be replaced by a file written beside it."""
    try:
        target = os.stat(path)  # through symlinks
    except FileNotFoundError:
        target = None
    except OSError as exc:
        raise Failure(f"cannot write {what} to {path!r}: {exc.strerror or exc}") from None
    if target is not None:
        for role, name in inputs:
            try:
                source = os.stat(name) if name is not None else None
            except (OSError, ValueError):
                source = None  # not there: not read, or an error when it is
            if source is not None and (source.st_dev, source.st_ino) == \
                    (target.st_dev, target.st_ino):
                raise Failure(f"cannot write {what} to {path!r}: it is the same file as "
                              f"{role} {name!r}, which would be overwritten")
        if stat.S_ISDIR(target.st_mode):
            raise Failure(f"cannot write {what} to {path!r}: it is a directory")
        kind = next((text for test, text in _SPECIAL_FILES if test(target.st_mode)), None)
        if kind is not None:
            if in_place:
                return True
            raise Failure(f"cannot write {what} to {path!r}: it is {kind}, not a regular "
                          f"file (polylite writes {what} only to a new or regular file)")
    check_writable(os.path.realpath(path), what)
    return False


@contextlib.contextmanager
def output_file(path, inputs):
    """A text stream that becomes ``path`` only if the block succeeds (stdout for '-';
    an existing device or FIFO is written into); never one of ``inputs``."""
    if path == "-":
        yield sys.stdout
        sys.stdout.flush()
        return
    if check_output(path, "the predictions", inputs, in_place=True):
        with open(path, "w") as f:
            yield f
        return
    path = os.path.realpath(path)  # through a symlink: the file it points to
    directory = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".polylite-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            yield f
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask
