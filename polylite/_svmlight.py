"""svmlight / libsvm / libFM text files for the command line, read a block of lines at a
time, decompressed on the fly, with errors that name the file and the line.

A line is ``label index:value index:value ...`` (an optional ``qid:N`` first, a comment
after ``#``).  Blocks are parsed by scikit-learn's C parser; only when it rejects a block
(or the block holds a non-finite number) is the block read again line by line, to say
which line is wrong and why.  Indices are parsed as they are written; the caller says
whether they start at 0 or 1 (:func:`detect_zero_based` decides from a whole file).

Compressed files are decompressed as they are read, and bounded: one whose text grows past
:data:`EXPANSION_CHECKED_AFTER` bytes at more than :data:`MAX_EXPANSION` times the
compressed bytes read so far is refused (no data file compresses that well; a
"decompression bomb" of gigabytes of zeros does), as is a line longer than
:data:`MAX_LINE_BYTES` in any file.
"""
import bz2
import gzip
import io
import lzma
import os
import zlib
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

__all__ = ["DataFileError", "DEFAULT_CHUNK_BYTES", "ReadStats", "iter_file", "read_file",
           "scan_file", "detect_zero_based", "from_one_based"]

#: Bytes of text parsed at once (blocks end at line ends).
DEFAULT_CHUNK_BYTES = 64 * 2**20

#: A compressed file is refused when its text passes EXPANSION_CHECKED_AFTER bytes at more
#: than MAX_EXPANSION times the compressed bytes read (text data compresses some 3 to 20
#: times).
MAX_EXPANSION = 200
EXPANSION_CHECKED_AFTER = 64 * 2**20

#: The longest line read (a longer one is refused, as not text data).
MAX_LINE_BYTES = 256 * 2**20

# scikit-learn's parser reads indices as C ints.
_MAX_INDEX = 2**31 - 1

_COMPRESSED = ((b"\x1f\x8b", lambda f: gzip.GzipFile(fileobj=f, mode="rb")),
               (b"BZh", bz2.BZ2File), (b"\xfd7zXZ\x00", lzma.LZMAFile))


class DataFileError(ValueError):
    """A data file is missing, unreadable or malformed (the message names file and line)."""


@dataclass
class ReadStats:
    """What a pass over a file saw (indices as written in the file)."""
    rows: int = 0
    nonzeros: int = 0
    text_bytes: int = 0           # uncompressed
    min_index: int = _MAX_INDEX + 1
    max_index: int = -1
    labels: np.ndarray = field(default_factory=lambda: np.empty(0))  # distinct labels
    dropped_nonzeros: int = 0     # in columns beyond n_features (see iter_file)
    dropped_rows: int = 0

    def add(self, X, y, n_bytes, track_labels):
        self.rows += X.shape[0]
        self.nonzeros += X.nnz
        self.text_bytes += n_bytes
        if X.nnz:
            self.min_index = min(self.min_index, int(X.indices.min()))
            self.max_index = max(self.max_index, int(X.indices.max()))
        if track_labels:
            self.labels = np.union1d(self.labels, y)


def _open(path):
    """``path`` opened for reading bytes, and the text read from it: the same file, or a
    stream decompressing it if it is gzip, bzip2 or xz."""
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        raise DataFileError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise DataFileError(f"{path}: is a directory, not a data file") from None
    except OSError as exc:
        raise DataFileError(f"{path}: cannot read: {exc.strerror or exc}") from None
    head = f.read(6)
    f.seek(0)
    for magic, opener in _COMPRESSED:
        if head.startswith(magic):
            return f, opener(f)
    return f, f


def _size_text(n_bytes):
    return f"{n_bytes / 2**20:.0f} MiB" if n_bytes >= 2**20 else f"{n_bytes} bytes"


def _blocks(path, chunk_bytes):
    """Yield (number of the first line, bytes of whole lines) of about ``chunk_bytes``."""
    raw, f = _open(path)
    with raw, f:
        line, rest, rest_bytes, text_bytes = 1, [], 0, 0  # rest: an unfinished line
        while True:
            try:
                data = f.read(chunk_bytes)
            except (OSError, EOFError, zlib.error, lzma.LZMAError) as exc:
                raise DataFileError(f"{path}: corrupt or truncated compressed file "
                                    f"({exc})") from None
            text_bytes += len(data)
            if (f is not raw and text_bytes > EXPANSION_CHECKED_AFTER
                    and text_bytes > MAX_EXPANSION * raw.tell()):
                raise DataFileError(
                    f"{path}: decompresses to more than {MAX_EXPANSION} times its size "
                    f"({_size_text(text_bytes)} from {_size_text(raw.tell())} so far), "
                    f"which no data file does; polylite stops reading it (decompress it "
                    f"yourself to read it anyway)")
            if not data:
                tail = b"".join(rest)
                if tail.strip():
                    yield line, tail + b"\n"
                return
            cut = data.rfind(b"\n") + 1
            if not cut:  # within a line longer than chunk_bytes: read on
                rest.append(data)
                rest_bytes += len(data)
                if rest_bytes > MAX_LINE_BYTES:
                    raise DataFileError(f"{path}:{line}: a line longer than "
                                        f"{_size_text(MAX_LINE_BYTES)}; not svmlight/libFM "
                                        f"text (a binary file?)")
                continue
            block = b"".join(rest) + data[:cut]
            rest, rest_bytes = [data[cut:]], len(data) - cut
            yield line, block
            line += block.count(b"\n")


def _data_lines(block):
    """(line offset, text without the comment) of the lines of ``block`` that hold data."""
    for offset, text in enumerate(block.split(b"\n")):
        content = text.split(b"#", 1)[0]
        if content.strip():
            yield offset, content


def _show(token):
    return repr(token.decode("utf-8", "replace"))


def _line_problem(content):
    """Why the parser rejects one line (content before '#'), or None if it accepts it."""
    tokens = content.split()
    try:
        float(tokens[0])
    except ValueError:
        return f"the label {_show(tokens[0])} is not a number"
    features = tokens[1:]
    if features and features[0].startswith(b"qid:"):
        features = features[1:]
    previous = -1
    for token in features:
        index, colon, value = token.partition(b":")
        if not colon:
            return f"{_show(token)} is not of the form index:value"
        try:
            j = int(index)
        except ValueError:
            return f"the feature index {_show(index)} is not an integer"
        if j < 0 or j > _MAX_INDEX:
            return f"the feature index {j} is out of range [0, {_MAX_INDEX}]"
        try:
            float(value)
        except ValueError:
            return f"the value {_show(value)} of feature {j} is not a number"
        if j <= previous:
            return (f"feature indices must increase along a line (sorted, no repeats); "
                    f"{j} follows {previous}")
        previous = j
    return None


def _line_of_row(block, row):
    """Offset in ``block`` of the line that holds data row ``row`` (0-based) of it."""
    for count, (offset, _) in enumerate(_data_lines(block)):
        if count == row:
            return offset
    raise AssertionError("row beyond the block")  # pragma: no cover


def _parse(block, path, first_line, dtype):
    """CSR rows (indices as written) and labels of one block; DataFileError names the
    line of anything malformed or non-finite."""
    from sklearn.datasets import load_svmlight_file
    try:
        X, y = load_svmlight_file(io.BytesIO(block), dtype=dtype, zero_based=True)
    except (ValueError, OverflowError) as exc:
        for offset, content in _data_lines(block):
            problem = _line_problem(content)
            if problem is not None:
                raise DataFileError(f"{path}:{first_line + offset}: {problem}") from None
        last = first_line + block.count(b"\n") - 1
        raise DataFileError(f"{path}: lines {first_line}-{last}: {exc}") from None
    bad_label = np.flatnonzero(~np.isfinite(y))
    bad_value = np.flatnonzero(~np.isfinite(X.data))
    if bad_label.size or bad_value.size:
        value_row = (np.searchsorted(X.indptr, bad_value[0], side="right") - 1
                     if bad_value.size else y.shape[0])
        label_row = bad_label[0] if bad_label.size else y.shape[0]
        row = min(value_row, label_row)
        what = "the label" if row == label_row else "a feature value"
        line = first_line + _line_of_row(block, row)
        raise DataFileError(f"{path}:{line}: {what} is not finite (NaN or infinity)")
    return X, y


def iter_file(path, *, zero_based=None, n_features=None, dtype=np.float64,
              chunk_bytes=DEFAULT_CHUNK_BYTES, stats=None, track_labels=False):
    """Yield ``(X, y)`` for successive blocks of lines of an svmlight/libFM file.

    Parameters
    ----------
    path : str
    zero_based : bool or None
        Whether the file's indices start at 0 (True) or 1 (False; index 0 is then an
        error naming its line).  None: keep them as written.
    n_features : int or None
        Columns of every ``X``; nonzeros in columns beyond are dropped and counted in
        ``stats``.  None: each block has as many columns as its largest index needs.
    dtype : {np.float64, np.float32}
    chunk_bytes : int
        Approximate bytes of text per block.
    stats : ReadStats or None
        Updated with each block (indices as written in the file).
    track_labels : bool
        Collect the distinct labels in ``stats.labels``.
    """
    path = os.fspath(path)
    for first_line, block in _blocks(path, chunk_bytes):
        X, y = _parse(block, path, first_line, dtype)
        if stats is not None:
            stats.add(X, y, len(block), track_labels)
        if zero_based is False and X.nnz:
            if X.indices.min() == 0:
                row = np.searchsorted(X.indptr, np.argmin(X.indices), side="right") - 1
                raise DataFileError(
                    f"{path}:{first_line + _line_of_row(block, row)}: feature index 0 in "
                    f"a file read as one-based (pass --zero-based if its indices start "
                    f"at 0)")
            X = from_one_based(X)
        if n_features is not None:
            X = with_columns(X, n_features, stats)
        yield X, y


def from_one_based(X):
    """CSR ``X`` read with one-based indices (no column 0 used), shifted to start at 0."""
    return sp.csr_matrix((X.data, X.indices - 1, X.indptr),
                         shape=(X.shape[0], max(X.shape[1] - 1, 0)))


def with_columns(X, n_features, stats):
    """``X`` with exactly ``n_features`` columns, dropping nonzeros beyond them."""
    if X.shape[1] > n_features:
        keep = X.indices < n_features
        if not keep.all():
            rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
            if stats is not None:
                stats.dropped_nonzeros += int((~keep).sum())
                stats.dropped_rows += np.unique(rows[~keep]).size
            counts = np.bincount(rows[keep], minlength=X.shape[0])
            indptr = np.concatenate([[0], np.cumsum(counts)]).astype(X.indptr.dtype)
            X = sp.csr_matrix((X.data[keep], X.indices[keep], indptr),
                              shape=(X.shape[0], n_features))
    return sp.csr_matrix((X.data, X.indices, X.indptr), shape=(X.shape[0], n_features))


def read_file(path, *, dtype=np.float64, chunk_bytes=DEFAULT_CHUNK_BYTES, stats=None):
    """The whole file as ``(X, y)`` with indices as written (``X`` has the largest index
    plus one columns); ``stats`` as in :func:`iter_file`."""
    parts = [(X, y) for X, y in iter_file(path, dtype=dtype, chunk_bytes=chunk_bytes,
                                          stats=stats) if X.shape[0]]
    if not parts:
        raise DataFileError(f"{os.fspath(path)}: no data (every line is empty or a "
                            f"comment)")
    n_features = max(X.shape[1] for X, _ in parts)
    X = sp.vstack([with_columns(X, n_features, None) for X, _ in parts], format="csr")
    return X, np.concatenate([y for _, y in parts])


def scan_file(path, *, chunk_bytes=DEFAULT_CHUNK_BYTES, track_labels=False):
    """One pass over the file without keeping it: its :class:`ReadStats`."""
    stats = ReadStats()
    for _ in iter_file(path, dtype=np.float32, chunk_bytes=chunk_bytes, stats=stats,
                       track_labels=track_labels):
        pass
    if stats.rows == 0:
        raise DataFileError(f"{os.fspath(path)}: no data (every line is empty or a "
                            f"comment)")
    return stats


def detect_zero_based(*stats):
    """True unless no file has an index 0 (then the indices are taken to start at 1), as
    scikit-learn's ``load_svmlight_file(zero_based="auto")`` decides."""
    return any(s.min_index == 0 for s in stats)
