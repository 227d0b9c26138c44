"""libFM's relation blocks (``-relation``) and feature groups (``-meta``), read for the
command line.

libFM stores a relation ``R`` as files beside each other: ``R.x``, the table (one row per
entity) in the binary design-matrix format of libFM's ``convert`` tool; ``R.train`` and
``R.test``, the table row of each line of the training and test files (one integer per
line, or libFM's binary vector format); and optionally ``R.groups``, a group number per
column of the table.  ``R.xt`` (the transposed table) is not needed.  The formats are
those of libFM's source (``src/util/fmatrix.h``, ``src/util/matrix.h``,
``src/libfm/src/relation.h``): little-endian, 32-bit unsigned integers and 32-bit floats.

- ``R.x``: a header of ``uint32 id = 2, uint32 float_size = 4, uint64 num_values,
  uint32 num_rows, uint32 num_cols`` (24 bytes), then per row ``uint32 size`` and
  ``size`` entries of ``uint32 column, float32 value``.
- a row index file: text, or ``uint32 1, uint32 4, uint32 n`` then n ``uint32``.

The columns of a model are libFM's: the main file's features first, then each relation's
columns, in the order of ``-relation``.
"""
import os

import numpy as np
import scipy.sparse as sp

from ._svmlight import DataFileError
from .relational import RelationBlock

__all__ = ["read_table", "read_row_index", "read_groups", "relation_blocks"]

_MATRIX_ID = 2
_VECTOR_ID = 1
_HEADER = np.dtype([("id", "<u4"), ("float_size", "<u4"), ("num_values", "<u8"),
                    ("num_rows", "<u4"), ("num_cols", "<u4")])
_ENTRY = np.dtype([("column", "<u4"), ("value", "<f4")])


def _read_bytes(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise DataFileError(f"{path}: cannot read ({exc.strerror or exc})") from None


def read_table(path, dtype=np.float64):
    """A relation's table from libFM's binary design-matrix file ``path`` (``R.x``), as
    canonical CSR of ``dtype``."""
    raw = _read_bytes(path)
    if len(raw) < _HEADER.itemsize:
        raise DataFileError(f"{path}: too short for libFM's binary matrix header "
                            f"({len(raw)} bytes)")
    header = np.frombuffer(raw, _HEADER, count=1)[0]
    if header["id"] != _MATRIX_ID or header["float_size"] != 4:
        raise DataFileError(f"{path}: not a libFM binary matrix (file id "
                            f"{int(header['id'])}, float size {int(header['float_size'])}; "
                            f"expected 2 and 4, as libFM's convert tool writes)")
    n_rows, n_cols = int(header["num_rows"]), int(header["num_cols"])
    n_values = int(header["num_values"])
    expected = _HEADER.itemsize + 4 * n_rows + _ENTRY.itemsize * n_values
    if len(raw) != expected:
        raise DataFileError(f"{path}: {len(raw)} bytes, but its header declares {n_rows} "
                            f"rows and {n_values} values ({expected} bytes)")
    # Each row: its size, then its entries; a row's size says where the next starts (a
    # compiled walk over the sizes), then every entry is taken at once.
    from ._engine._kernels import libfm_row_sizes
    words = np.frombuffer(raw, "<u4", offset=_HEADER.itemsize).astype(np.uint32,
                                                                       copy=False)
    sizes = np.empty(n_rows, dtype=np.int64)
    if libfm_row_sizes(words, sizes) != words.shape[0] or sizes.sum() != n_values:
        raise DataFileError(f"{path}: its row sizes do not add up to the {n_values} "
                            f"values its header declares")
    # The entries' words: all but each row's size word.
    size_words = np.cumsum(np.concatenate([[0], 1 + 2 * sizes[:-1]])) if n_rows else \
        np.zeros(0, np.int64)
    is_entry = np.ones(words.shape[0], dtype=bool)
    is_entry[size_words] = False
    entries = words[is_entry].view(_ENTRY)
    columns = entries["column"].astype(np.int64)
    if n_values and columns.max() >= n_cols:
        raise DataFileError(f"{path}: column {int(columns.max())} out of range for the "
                            f"{n_cols} columns its header declares")
    if not np.all(np.isfinite(entries["value"])):
        raise DataFileError(f"{path}: holds NaN or infinite values")
    indptr = np.concatenate([[0], np.cumsum(sizes)])
    table = sp.csr_matrix((entries["value"].astype(dtype), columns, indptr),
                          shape=(n_rows, n_cols))
    table.sum_duplicates()
    return table


def read_row_index(path, n_rows=None):
    """The table row of each of ``n_rows`` lines of a data file (None: as many as the
    file holds), from ``path`` (text, one integer per line, or libFM's binary vector),
    as intp."""
    raw = _read_bytes(path)
    if (len(raw) >= 12 and int.from_bytes(raw[:4], "little") == _VECTOR_ID
            and int.from_bytes(raw[4:8], "little") == 4):  # libFM's binary vector
        count = int.from_bytes(raw[8:12], "little")
        if len(raw) != 12 + 4 * count:
            raise DataFileError(f"{path}: {len(raw)} bytes, but its header declares "
                                f"{count} rows")
        index = np.frombuffer(raw, "<u4", count=count, offset=12).astype(np.intp)
    else:
        try:
            tokens = raw.decode("ascii").split()
            values = np.array(tokens, dtype=np.float64)
        except (UnicodeDecodeError, ValueError):
            raise DataFileError(f"{path}: a row index file holds one integer per line "
                                f"(or libFM's binary vector)") from None
        # (Beyond 2^53 a float64 is no longer an exact integer: no table is that long.)
        bad = ~((values >= 0) & (values < 2.0 ** 53) & (values == np.floor(values)))
        if np.any(bad):
            at = int(np.argmax(bad))
            raise DataFileError(f"{path}: value {at + 1} ({tokens[at]!r}) is not a table "
                                f"row (a non-negative integer)")
        index = values.astype(np.intp)
    if n_rows is not None and index.shape[0] != n_rows:
        raise DataFileError(f"{path}: {index.shape[0]} table rows for the {n_rows} lines "
                            f"of the data file")
    return index


def read_groups(path, n_columns):
    """A group number per column from a libFM groups file (``-meta``, ``R.groups``)."""
    raw = _read_bytes(path)
    try:
        groups = np.array(raw.decode("ascii").split(), dtype=np.int64)
    except (UnicodeDecodeError, ValueError):
        raise DataFileError(f"{path}: a groups file holds one group number per line") \
            from None
    if groups.shape[0] < n_columns:
        raise DataFileError(f"{path}: {groups.shape[0]} groups for {n_columns} columns")
    if np.any(groups < 0):
        raise DataFileError(f"{path}: holds a negative group number")
    return groups[:n_columns]


def relation_blocks(names, split, n_rows=None, dtype=np.float64, tables=None):
    """The relation blocks ``names`` (base paths of libFM's relation files) for the
    ``n_rows`` lines of a data file (None: as many as the index files give): ``split``
    "train" reads ``R.train``, "test" reads ``R.test``.  ``tables``, a dict, keeps the
    tables read (``R.x``, under ``(R, dtype)``) for the next call.

    Returns the blocks and each one's column groups (``R.groups``, or one group).
    """
    blocks, groups = [], []
    tables = {} if tables is None else tables
    for name in names:
        key = (name, np.dtype(dtype).name)
        if key not in tables:
            tables[key] = read_table(name + ".x", dtype)
        table = tables[key]
        index = read_row_index(f"{name}.{split}", n_rows)
        if index.size and index.max() >= table.shape[0]:
            raise DataFileError(f"{name}.{split}: table row {int(index.max())} out of "
                                f"range for the {table.shape[0]} rows of {name}.x")
        blocks.append(RelationBlock(index, table))
        path = name + ".groups"
        groups.append(read_groups(path, table.shape[1]) if os.path.exists(path)
                      else np.zeros(table.shape[1], np.int64))
    return blocks, groups
