"""libffm text files: ``label field:feature:value ...`` per line, as libffm and xLearn
read them, a block of lines at a time (decompressed on the fly, as the svmlight files of
:mod:`polylite._svmlight`), with errors that name the file and the line.

A block is checked and parsed in one compiled pass over its bytes
(:func:`polylite._text.libffm_lines`: a label, then tokens of exactly two colons, their
numbers converted exactly as ``float`` converts them); only a block
that fails is read again line by line, to say which line is wrong and why.  Field and
feature indices start at 0, as libffm writes them.  A feature belongs to one field: a
feature seen under two fields is an error naming the line of the second.
"""
import os
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from . import _text
from ._svmlight import DataFileError, _blocks, _pieces, _show, float_spans

__all__ = ["DEFAULT_CHUNK_BYTES", "iter_libffm", "read_libffm", "scan_libffm",
           "write_libffm", "LibffmScan"]

#: Bytes of text parsed at once (blocks end at line ends): the parse holds a few arrays
#: as long as the block.
DEFAULT_CHUNK_BYTES = 16 * 2**20

# Field and feature indices are below this (and written with at most 16 digits): the
# compiled pass converts them exactly through float64.
_MAX_INDEX = 2**53


def _line_problem(content):
    """Why one line (bytes) is not ``label field:feature:value ...``, or None."""
    tokens = content.split()
    try:
        label = float(tokens[0])
    except ValueError:
        return f"the label {_show(tokens[0])} is not a number"
    if not np.isfinite(label):
        return "the label is not finite (NaN or infinity)"
    for token in tokens[1:]:
        parts = token.split(b":")
        if len(parts) != 3:
            return f"{_show(token)} is not of the form field:feature:value"
        for what, text in zip(("field", "feature"), parts[:2]):
            try:
                index = int(text)
            except ValueError:
                return f"the {what} index {_show(text)} is not an integer"
            if index < 0 or index >= _MAX_INDEX:
                return f"the {what} index {index} is out of range [0, 2**53)"
            if len(text.lstrip(b"+-")) > 16:
                return f"the {what} index {_show(text)} has more than 16 digits"
        try:
            value = float(parts[2])
        except ValueError:
            return f"the value {_show(parts[2])} of {_show(token)} is not a number"
        if not np.isfinite(value):
            return f"the value of {_show(token)} is not finite (NaN or infinity)"
    return None


def _first_bad_line(block, path, first_line):
    """The DataFileError of the first malformed line of ``block``."""
    for offset, content in enumerate(block.split(b"\n")):
        if content.strip():
            problem = _line_problem(content)
            if problem is not None:
                return DataFileError(f"{path}:{first_line + offset}: {problem}")
    last = first_line + block.count(b"\n") - 1
    return DataFileError(f"{path}: lines {first_line}-{last}: not libffm text "
                         f"(label field:feature:value ...)")


class _Block(NamedTuple):
    y: np.ndarray          # (n_rows,) labels
    indptr: np.ndarray     # (n_rows + 1,)
    fields: np.ndarray     # (nnz,) int64, the field of each nonzero
    features: np.ndarray   # (nnz,) int64
    values: np.ndarray     # (nnz,) float64
    lines: np.ndarray      # (nnz,) the line of each nonzero (in the file)


def _parse(block, path, first_line):
    """The rows of one block of lines, parsed a piece of a few megabytes at a time (as
    svmlight blocks are), or None if it has none."""
    parts = [blk for offset, piece in _pieces(block)
             if (blk := _parse_piece(piece, path, first_line + offset)) is not None]
    if len(parts) <= 1:
        return parts[0] if parts else None
    ends = np.cumsum([blk.features.size for blk in parts])
    indptr = np.concatenate([[0]] + [blk.indptr[1:] + end - blk.features.size
                                     for blk, end in zip(parts, ends)])
    return _Block(np.concatenate([blk.y for blk in parts]), indptr,
                  *(np.concatenate([getattr(blk, name) for blk in parts])
                    for name in ("fields", "features", "values", "lines")))


def _parse_piece(block, path, first_line):
    """The rows of whole lines, every token checked (DataFileError names the line of
    the first bad one), or None if they have none."""
    (status, y, y_span, y_converted, indptr, fields, features, values, v_span,
     v_converted, lines) = _text.libffm_lines(np.frombuffer(block, np.uint8),
                                              block.count(b"\n") + 1,
                                              block.count(b":") // 2)
    if status != _text.Status.OK:
        raise _first_bad_line(block, path, first_line)
    if y.size == 0:
        return None
    try:  # the numbers the compiled pass leaves to float (exponents, long mantissas)
        for numbers, spans, converted in ((y, y_span, y_converted),
                                          (values, v_span, v_converted)):
            other = np.flatnonzero(converted == 0)
            if other.size:
                numbers[other] = float_spans(block, spans[2 * other],
                                             spans[2 * other + 1])
    except ValueError:
        raise _first_bad_line(block, path, first_line) from None
    ok = (np.isfinite(y).all() and np.isfinite(values).all()
          and np.all(fields >= 0) and np.all(features >= 0))
    if not ok:
        raise _first_bad_line(block, path, first_line)
    return _Block(y, indptr, fields.astype(np.int64), features.astype(np.int64), values,
                  first_line + lines)


def _record_fields(field_of, blk, path):
    """Note the field of each feature of the block in ``field_of`` (grown as needed, -1
    for features not seen yet; returned); DataFileError at a feature seen under a second
    field."""
    if blk.features.size == 0:
        return field_of
    top = int(blk.features.max()) + 1
    if top > field_of.shape[0]:
        field_of = np.concatenate([field_of, np.full(top - field_of.shape[0], -1,
                                                     np.int64)])
    # Usually every feature keeps one field: a write of the block's fields and a read
    # back (no sort) show it; only a clash sorts the block to name its first line.
    written = field_of.copy()
    written[blk.features] = blk.fields
    if np.all(written[blk.features] == blk.fields) and np.all(
            (field_of < 0) | (written == field_of)):
        return written
    # Within the block: the first field given to each feature ...
    order = np.lexsort((blk.lines, blk.features))
    feats, flds = blk.features[order], blk.fields[order]
    head = np.concatenate([[True], feats[1:] != feats[:-1]])
    first_field = np.repeat(flds[head], np.diff(np.append(np.flatnonzero(head),
                                                          feats.size)))
    known = field_of[feats]
    expected = np.where(known >= 0, known, first_field)
    clash = flds != expected
    if clash.any():
        z = order[np.flatnonzero(clash)]
        z = z[np.argmin(blk.lines[z])]
        j, f = int(blk.features[z]), int(blk.fields[z])
        before = int(field_of[j]) if field_of[j] >= 0 else int(
            expected[np.flatnonzero(order == z)[0]])
        raise DataFileError(f"{path}:{int(blk.lines[z])}: feature {j} is in field {f}, "
                            f"but earlier in field {before}; a feature belongs to one "
                            f"field")
    field_of[feats[head]] = flds[head]
    return field_of


def _csr(blk, n_features, dtype):
    """The block's rows as canonical CSR (duplicate features of a line summed)."""
    index_dtype = np.int32 if n_features <= np.iinfo(np.int32).max else np.int64
    X = sp.csr_matrix((blk.values.astype(dtype), blk.features.astype(index_dtype),
                       blk.indptr.astype(index_dtype)),
                      shape=(blk.y.shape[0], n_features))
    X.sum_duplicates()
    return X


def _without_features_from(blk, n_features):
    """The block without its nonzeros of features ``n_features`` and beyond (a test file's
    features that the training file never showed: no model has parameters for them)."""
    keep = blk.features < n_features
    rows = np.repeat(np.arange(blk.y.shape[0]), np.diff(blk.indptr))
    counts = np.bincount(rows[keep], minlength=blk.y.shape[0])
    return _Block(blk.y, np.concatenate([[0], np.cumsum(counts)]), blk.fields[keep],
                  blk.features[keep], blk.values[keep], blk.lines[keep])


def iter_libffm(path, n_features=None, *, dtype=np.float64,
                chunk_bytes=DEFAULT_CHUNK_BYTES):
    """Yield ``(X, y, fields)`` for successive blocks of lines of a libffm file.

    ``fields`` is the field of each of the ``n_features`` columns as far as the file has
    shown them (-1 for columns not seen yet).  Features at ``n_features`` or beyond are
    left out (as libffm's prediction skips features its model does not have).  None:
    each block as wide as its largest feature needs.
    """
    path = os.fspath(path)
    if chunk_bytes < 1:
        raise ValueError(f"chunk_bytes must be positive, got {chunk_bytes}")
    field_of = np.full(n_features or 0, -1, np.int64)
    for first_line, block in _blocks(path, chunk_bytes):
        blk = _parse(block, path, first_line)
        if blk is None:
            continue
        if n_features is not None and blk.features.size and (
                blk.features.max() >= n_features):
            blk = _without_features_from(blk, n_features)
        field_of = _record_fields(field_of, blk, path)
        width = n_features if n_features is not None else field_of.shape[0]
        fields = np.full(width, -1, np.int64)
        fields[:field_of.shape[0]] = field_of[:width]
        yield _csr(blk, width, dtype), blk.y, fields


class LibffmScan(NamedTuple):
    """What one pass over a libffm file found (:func:`polylite.datasets.scan_libffm`).

    Attributes
    ----------
    n_rows : int
    n_features : int
        The largest feature index plus one.
    n_fields : int
        The largest field index plus one.
    fields : ndarray of shape (n_features,)
        The field of each feature (-1 for those the file never shows).
    labels : ndarray
        The distinct labels.
    """
    n_rows: int
    n_features: int        # the largest feature index plus one
    n_fields: int          # the largest field index plus one
    fields: np.ndarray     # (n_features,) the field of each feature (-1: never seen)
    labels: np.ndarray     # the distinct labels


def scan_libffm(path, *, chunk_bytes=DEFAULT_CHUNK_BYTES):
    """One pass over a libffm file without keeping its rows: a :class:`LibffmScan`."""
    n_rows, fields, labels = 0, np.zeros(0, np.int64), np.empty(0)
    for X, y, fields in iter_libffm(path, chunk_bytes=chunk_bytes, dtype=np.float32):
        n_rows += X.shape[0]
        labels = np.union1d(labels, y)
    if n_rows == 0:
        raise DataFileError(f"{os.fspath(path)}: no data (every line is empty)")
    n_fields = int(fields.max()) + 1 if fields.size else 0
    return LibffmScan(n_rows, fields.shape[0], max(n_fields, 1), fields, labels)


def read_libffm(path, *, n_features=None, dtype=np.float64,
                chunk_bytes=DEFAULT_CHUNK_BYTES):
    """The whole file as ``(X, y, fields)`` (see :func:`iter_libffm`)."""
    parts = list(iter_libffm(path, n_features, dtype=dtype, chunk_bytes=chunk_bytes))
    if not parts:
        raise DataFileError(f"{os.fspath(path)}: no data (every line is empty)")
    fields = parts[-1][2]
    width = fields.shape[0]
    X = sp.vstack([sp.csr_matrix((X.data, X.indices, X.indptr), shape=(X.shape[0], width))
                   for X, _, _ in parts], format="csr")
    return X, np.concatenate([y for _, y, _ in parts]), fields


def _format_values(values):
    """Shortest text of float values that reads back the same (repr), 1 as '1'."""
    return [repr(float(v)) if v != 1 else "1" for v in values]


def write_libffm(path, X, y, fields, *, rows_per_block=10_000):
    """Write CSR rows ``X`` with labels ``y`` and the field of each column as a libffm
    file, a block of rows at a time (values as their shortest exact text)."""
    X = sp.csr_matrix(X)
    y = np.asarray(y).ravel()
    fields = np.asarray(fields)
    if y.shape[0] != X.shape[0]:
        raise ValueError(f"X has {X.shape[0]} rows but y has {y.shape[0]}")
    if fields.shape != (X.shape[1],) or (fields.size and fields.min() < 0):
        raise ValueError(f"fields must give each of the {X.shape[1]} columns a field "
                         f">= 0")
    with open(os.fspath(path), "w", encoding="ascii", newline="\n") as out:
        for start in range(0, X.shape[0], rows_per_block):
            block = X[start:start + rows_per_block]
            block.sort_indices()
            cols = block.indices
            tokens = [f"{f}:{j}:{v}" for f, j, v in
                      zip(fields[cols].tolist(), cols.tolist(),
                          _format_values(block.data))]
            labels = y[start:start + rows_per_block]
            lines = []
            for i in range(block.shape[0]):
                label = labels[i]
                text = repr(int(label)) if float(label).is_integer() else repr(float(label))
                row = tokens[block.indptr[i]:block.indptr[i + 1]]
                lines.append(" ".join([text] + row))
            out.write("\n".join(lines) + "\n")
