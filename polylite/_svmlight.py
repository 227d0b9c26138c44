"""svmlight / libsvm / libFM text files for the command line, read a block of lines at a
time, decompressed on the fly, with errors that name the file and the line.

A line is ``label index:value index:value ...`` (an optional ``qid:N`` first, a comment
after ``#``).  Blocks are parsed with vectorised NumPy (the tokens found in the block's
bytes, the numbers converted in one compiled pass: :mod:`polylite._text`), which keeps scikit-learn out of the command line's
start-up; only when a block is rejected (or holds a non-finite number) is it read again
line by line, to say which line is wrong and why.  Indices are parsed as they are
written; the caller says whether they start at 0 or 1 (:func:`detect_zero_based` decides
from a whole file).

Compressed files are decompressed as they are read, and bounded: one whose text grows past
:data:`EXPANSION_CHECKED_AFTER` bytes at more than :data:`MAX_EXPANSION` times the
compressed bytes read so far is refused (no data file compresses that well; a
"decompression bomb" of gigabytes of zeros does), as is a line longer than
:data:`MAX_LINE_BYTES` in any file.
"""
import bz2
import gzip
import lzma
import os
import zlib
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from . import _text

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

# Indices are read as C ints, as scikit-learn's svmlight reader reads them.
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
        try:
            int(features[0][4:])
        except ValueError:
            return f"the query id {_show(features[0][4:])} is not an integer"
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


# Bytes the parser tells apart (bytes.split() splits at the six ASCII whitespaces).
_NEWLINE, _COLON, _HASH, _SPACE = ord("\n"), ord(":"), ord("#"), ord(" ")
_IS_SPACE = np.zeros(256, bool)
_IS_SPACE[list(b" \t\n\r\x0b\x0c")] = True


class _NotSvmlight(Exception):
    """A block that the vectorised parse rejects (read again line by line to say why)."""


def _spans_mask(n, starts, stops):
    """Boolean mask of length ``n``: True within each [start, stop) (disjoint, each
    stop before the next start)."""
    delta = np.zeros(n + 1, np.int8)
    delta[starts] = 1
    delta[stops] -= 1
    return np.cumsum(delta[:n]) > 0


def text_numbers(buf, starts, stops, *, integers=False):
    """The float64 values of the numbers written in ``buf[starts[i]:stops[i]]`` (bytes of
    ``buf``, a uint8 array).

    Plain decimals (a sign, digits, at most one point) are converted in one compiled
    pass, exactly as ``float`` converts them (:mod:`polylite._text`); the others
    (exponents, long mantissas, inf, nan) by ``float``.  With ``integers``, only a sign
    and digits are accepted.  ValueError if a span is not a number."""
    n = starts.size
    values = np.empty(n)
    if n == 0:
        return values
    converted = np.empty(n, np.uint8)
    status = _text.plain_numbers(buf, np.asarray(starts, np.intp),
                                 np.asarray(stops, np.intp), values, converted, integers)
    if status == _text.Status.EMPTY:
        raise ValueError("an empty number")
    if status == _text.Status.NOT_INTEGER:
        raise ValueError("not an integer")
    other = np.flatnonzero(converted == 0)
    if other.size:
        values[other] = float_spans(buf.tobytes(), starts[other], stops[other])
    return values


def float_spans(raw, starts, stops):
    """The numbers written in ``raw[starts[i]:stops[i]]`` (bytes) converted by ``float``
    (ValueError if one is not a number)."""
    return np.array([raw[a:b] for a, b in zip(starts.tolist(), stops.tolist())],
                    np.float64)


def _rows_of_block(block, dtype):
    """Labels and CSR rows (indices as written) of one block of svmlight lines, parsed
    with vectorised NumPy; _NotSvmlight if any line is malformed."""
    buf = np.frombuffer(block if block.endswith(b"\n") else block + b"\n", np.uint8)
    newlines = np.flatnonzero(buf == _NEWLINE)
    hashes = np.flatnonzero(buf == _HASH)
    if hashes.size:  # blank every comment: from a line's first '#' to its end
        first_hash = hashes[np.concatenate([[True], np.diff(
            np.searchsorted(newlines, hashes)) != 0])]
        buf = buf.copy()
        buf[_spans_mask(buf.size, first_hash,
                        newlines[np.searchsorted(newlines, first_hash)])] = _SPACE
    space = _IS_SPACE[buf]
    starts = np.flatnonzero(~space & np.concatenate([[True], space[:-1]]))
    stops = np.flatnonzero(~space & np.concatenate([space[1:], [True]])) + 1
    if starts.size == 0:
        return np.zeros(0), sp.csr_matrix((0, 1), dtype=dtype)
    line_of = np.searchsorted(newlines, starts)
    label = np.concatenate([[True], line_of[1:] != line_of[:-1]])
    colon_at = np.flatnonzero(buf == _COLON)
    colons = np.bincount(np.searchsorted(starts, colon_at, side="right") - 1,
                         minlength=starts.size)
    if np.any(colons != ~label):  # none in a label, one in every other token
        raise _NotSvmlight
    # the tokens after the labels: text, colon, end; "qid:N" may follow a label
    begin, end = starts[~label], stops[~label]
    after_label = np.concatenate([[False], label[:-1]])[~label]
    qid = after_label & (colon_at - begin == 3)
    qid[qid] = ((buf[begin[qid]] == ord("q")) & (buf[begin[qid] + 1] == ord("i"))
                & (buf[begin[qid] + 2] == ord("d")))
    feature = ~qid
    try:
        y = text_numbers(buf, starts[label], stops[label])
        text_numbers(buf, colon_at[qid] + 1, end[qid], integers=True)
        index = text_numbers(buf, begin[feature], colon_at[feature], integers=True)
        values = text_numbers(buf, colon_at[feature] + 1, end[feature])
    except ValueError:
        raise _NotSvmlight from None
    row = (np.cumsum(label) - 1)[~label][feature]
    if (np.any((index < 0) | (index > _MAX_INDEX))
            or np.any((row[1:] == row[:-1]) & (index[1:] <= index[:-1]))):
        raise _NotSvmlight  # out of range, or not increasing along a line
    indptr = np.concatenate([[0], np.cumsum(np.bincount(row, minlength=y.size))])
    n_features = int(index.max()) + 1 if index.size else 1
    X = sp.csr_matrix((values.astype(dtype), index.astype(np.int64), indptr),
                      shape=(y.size, n_features))
    return y, X


# Bytes parsed at once within a block: the parse's temporaries (a few arrays as long as
# the bytes) then stay in the processor's caches; 64 MiB parsed whole ran at half the
# speed.
PARSE_BYTES = 4 * 2**20


def _pieces(block):
    """(offset of its first line in the block, bytes of whole lines) of about
    PARSE_BYTES each."""
    start, line = 0, 0
    while start < len(block):
        stop = block.rfind(b"\n", start, start + PARSE_BYTES) + 1
        if stop <= start:  # a line longer than PARSE_BYTES
            stop = block.find(b"\n", start + PARSE_BYTES) + 1 or len(block)
        piece = block[start:stop]
        yield line, piece
        line += piece.count(b"\n")
        start = stop


def _parse_piece(piece, path, first_line, dtype):
    """CSR rows (indices as written) and labels of whole lines; DataFileError names the
    line of anything malformed or non-finite."""
    try:
        y, X = _rows_of_block(piece, dtype)
    except _NotSvmlight:
        for offset, content in _data_lines(piece):
            problem = _line_problem(content)
            if problem is not None:
                raise DataFileError(f"{path}:{first_line + offset}: {problem}") from None
        last = first_line + piece.count(b"\n") - 1
        raise DataFileError(f"{path}: lines {first_line}-{last}: not svmlight text "
                            f"(label index:value ...)") from None
    bad_label = np.flatnonzero(~np.isfinite(y))
    bad_value = np.flatnonzero(~np.isfinite(X.data))
    if bad_label.size or bad_value.size:
        value_row = (np.searchsorted(X.indptr, bad_value[0], side="right") - 1
                     if bad_value.size else y.shape[0])
        label_row = bad_label[0] if bad_label.size else y.shape[0]
        row = min(value_row, label_row)
        what = "the label" if row == label_row else "a feature value"
        line = first_line + _line_of_row(piece, row)
        raise DataFileError(f"{path}:{line}: {what} is not finite (NaN or infinity)")
    return X, y


def _parse(block, path, first_line, dtype):
    """CSR rows (indices as written; as many columns as the largest index needs, at
    least one) and labels of one block, parsed a piece at a time."""
    parts = [_parse_piece(piece, path, first_line + offset, dtype)
             for offset, piece in _pieces(block)]
    if len(parts) == 1:
        return parts[0]
    if not parts:
        return sp.csr_matrix((0, 1), dtype=dtype), np.zeros(0)
    ends = np.cumsum([X.nnz for X, _ in parts])
    indptr = np.concatenate([[0]] + [X.indptr[1:] + end - X.nnz
                                     for (X, _), end in zip(parts, ends)])
    X = sp.csr_matrix((np.concatenate([X.data for X, _ in parts]),
                       np.concatenate([X.indices for X, _ in parts]), indptr),
                      shape=(indptr.size - 1, max(X.shape[1] for X, _ in parts)))
    return X, np.concatenate([y for _, y in parts])


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
