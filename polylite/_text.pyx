"""The numbers of text data files (svmlight, libffm): one pass over the bytes of each
number, without the GIL.

A plain decimal (an optional sign, digits, at most one point) of at most FAST_DIGITS
digits whose digits make an integer below 2**53 is that integer over a power of ten,
both exact in float64: one division then rounds it as ``float`` (and strtod) do.  Every
other number (an exponent, more digits, inf, nan) is left to the caller, which converts
it with ``float``.
"""
from libc.stdint cimport int64_t, uint8_t

# The largest number of digits of a plain decimal converted here.
cdef enum:
    FAST_DIGITS = 16
    # Numbers of more bytes than this are left to the caller (integers: refused).
    WIDEST = 24

cdef double[FAST_DIGITS + 1] POWERS_OF_TEN
cdef int _p
POWERS_OF_TEN[0] = 1.0
for _p in range(1, FAST_DIGITS + 1):
    POWERS_OF_TEN[_p] = POWERS_OF_TEN[_p - 1] * 10.0

# What plain_numbers returns.
cpdef enum Status:
    OK = 0
    EMPTY = 1
    NOT_INTEGER = 2


cdef inline int _plain_number(const uint8_t* text, Py_ssize_t length, bint integers,
                              double* value) noexcept nogil:
    """Parse one number: 1 and its value into ``value`` if it is a plain decimal
    converted here, 0 if the caller must convert it, -1 if ``integers`` and it is not
    an integer (only a sign and digits)."""
    cdef Py_ssize_t c = 0, n_digits = 0, n_points = 0, places = 0
    cdef int64_t mantissa = 0
    cdef uint8_t byte
    cdef bint negative = text[0] == 45  # '-'
    if length > WIDEST:
        return -1 if integers else 0
    if text[0] == 45 or text[0] == 43:  # '-' or '+'
        c = 1
    while c < length:
        byte = text[c]
        if 48 <= byte <= 57:  # a digit
            if n_digits <= FAST_DIGITS:
                mantissa = mantissa * 10 + (byte - 48)
            n_digits += 1
            if n_points:
                places += 1
        elif byte == 46 and n_points == 0:  # '.'
            n_points = 1
        else:  # an exponent, a second point, a letter: not plain
            return -1 if integers else 0
        c += 1
    if n_digits == 0:
        return -1 if integers else 0
    if integers and n_points:
        return -1
    if n_digits > FAST_DIGITS or mantissa >= (<int64_t> 1) << 53:
        return 0
    value[0] = <double> mantissa / POWERS_OF_TEN[places]
    if negative:
        value[0] = -value[0]
    return 1


def plain_numbers(const uint8_t[::1] buf, const Py_ssize_t[:] starts,
                  const Py_ssize_t[:] stops, double[::1] values, uint8_t[::1] converted,
                  bint integers):
    """The numbers written in ``buf[starts[i]:stops[i]]`` into ``values`` where
    ``converted[i]`` is set to 1; 0 where the caller must convert the number itself.
    Returns OK, EMPTY (a span is empty) or NOT_INTEGER (with ``integers``, a span is
    not a sign and digits)."""
    cdef Py_ssize_t i, n = starts.shape[0], start, length
    cdef Status status = OK
    cdef int outcome
    with nogil:
        for i in range(n):
            start = starts[i]
            length = stops[i] - start
            if length <= 0:
                status = EMPTY
                break
            outcome = _plain_number(&buf[start], length, integers, &values[i])
            if outcome < 0:
                status = NOT_INTEGER
                break
            converted[i] = <uint8_t> outcome
    return status


# ---- libffm lines -------------------------------------------------------------------

cdef inline bint _is_space(uint8_t byte) noexcept nogil:
    """Whitespace within a line: a space, a tab or a carriage return (the newline ends
    the line)."""
    return byte == 32 or byte == 9 or byte == 13


cdef inline int _number_at(const uint8_t* buf, Py_ssize_t start, Py_ssize_t stop,
                           bint integers, double* value) noexcept nogil:
    """_plain_number of buf[start:stop] (-1 if the span is empty)."""
    if stop <= start:
        return -1
    return _plain_number(&buf[start], stop - start, integers, value)


cdef struct LibffmPiece:
    # The piece's rows: labels (y) and their spans, then per nonzero the field, feature
    # and value (as float64, checked by the caller), the value's span and the line (from
    # the piece's first) of each; ``converted`` 0 where the caller converts a label or a
    # value itself (y_converted, v_converted).
    double* y
    Py_ssize_t* y_span
    uint8_t* y_converted
    Py_ssize_t* indptr
    double* fields
    double* features
    double* values
    Py_ssize_t* v_span
    uint8_t* v_converted
    Py_ssize_t* lines
    Py_ssize_t n_rows
    Py_ssize_t nnz


cdef Status _libffm_lines(const uint8_t* buf, Py_ssize_t size,
                          LibffmPiece* out) noexcept nogil:
    """Parse whole lines ``label field:feature:value ...``: OK, EMPTY (a malformed token
    or an empty number) or NOT_INTEGER (an index that is not a sign and at most
    FAST_DIGITS digits below 2**53); the caller names the line."""
    cdef Py_ssize_t at = 0, line = 0, start, stop, c, colon1, colon2, n_colons
    cdef int outcome
    out.n_rows = 0
    out.nnz = 0
    out.indptr[0] = 0
    while at < size:
        # A line: its first token is the label, the others field:feature:value.
        start = -1
        while at < size and buf[at] != 10:
            while at < size and _is_space(buf[at]):
                at += 1
            if at >= size or buf[at] == 10:
                break
            stop = at
            colon1 = colon2 = -1
            n_colons = 0
            while stop < size and buf[stop] != 10 and not _is_space(buf[stop]):
                if buf[stop] == 58:  # ':'
                    n_colons += 1
                    if n_colons == 1:
                        colon1 = stop
                    elif n_colons == 2:
                        colon2 = stop
                stop += 1
            if start < 0:  # the label
                start = at
                if n_colons != 0:
                    return EMPTY
                outcome = _number_at(buf, at, stop, False, &out.y[out.n_rows])
                if outcome < 0:
                    return EMPTY
                out.y_converted[out.n_rows] = <uint8_t> outcome
                out.y_span[2 * out.n_rows] = at
                out.y_span[2 * out.n_rows + 1] = stop
            else:
                if n_colons != 2:
                    return EMPTY
                c = out.nnz
                outcome = _number_at(buf, at, colon1, True, &out.fields[c])
                if outcome <= 0:
                    return EMPTY if outcome < 0 else NOT_INTEGER
                outcome = _number_at(buf, colon1 + 1, colon2, True, &out.features[c])
                if outcome <= 0:
                    return EMPTY if outcome < 0 else NOT_INTEGER
                outcome = _number_at(buf, colon2 + 1, stop, False, &out.values[c])
                if outcome < 0:
                    return EMPTY
                out.v_converted[c] = <uint8_t> outcome
                out.v_span[2 * c] = colon2 + 1
                out.v_span[2 * c + 1] = stop
                out.lines[c] = line
                out.nnz += 1
            at = stop
        if start >= 0:  # (a line of whitespace is no row)
            out.n_rows += 1
            out.indptr[out.n_rows] = out.nnz
        at += 1  # past the newline
        line += 1
    return OK


def libffm_lines(const uint8_t[::1] buf, Py_ssize_t max_rows, Py_ssize_t max_nonzeros):
    """The rows of whole libffm lines in ``buf`` (at most ``max_rows`` rows and
    ``max_nonzeros`` tokens after the labels): ``(status, y, y_span, y_converted,
    indptr, fields, features, values, v_span, v_converted, lines)``, the arrays cut to
    the rows and nonzeros found; see _libffm_lines for the status and _plain_number
    for the numbers converted here."""
    import numpy as np
    y = np.empty(max_rows)
    y_span = np.empty(2 * max_rows, np.intp)
    y_converted = np.empty(max_rows, np.uint8)
    indptr = np.empty(max_rows + 1, np.intp)
    fields = np.empty(max_nonzeros)
    features = np.empty(max_nonzeros)
    values = np.empty(max_nonzeros)
    v_span = np.empty(2 * max_nonzeros, np.intp)
    v_converted = np.empty(max_nonzeros, np.uint8)
    lines = np.empty(max_nonzeros, np.intp)
    cdef double[::1] y_, fields_, features_, values_
    cdef Py_ssize_t[::1] y_span_, indptr_, v_span_, lines_
    cdef uint8_t[::1] y_converted_, v_converted_
    y_, fields_, features_, values_ = y, fields, features, values
    y_span_, indptr_, v_span_, lines_ = y_span, indptr, v_span, lines
    y_converted_, v_converted_ = y_converted, v_converted
    cdef LibffmPiece out
    out.y = &y_[0] if max_rows else NULL
    out.y_span = &y_span_[0] if max_rows else NULL
    out.y_converted = &y_converted_[0] if max_rows else NULL
    out.indptr = &indptr_[0]
    out.fields = &fields_[0] if max_nonzeros else NULL
    out.features = &features_[0] if max_nonzeros else NULL
    out.values = &values_[0] if max_nonzeros else NULL
    out.v_span = &v_span_[0] if max_nonzeros else NULL
    out.v_converted = &v_converted_[0] if max_nonzeros else NULL
    out.lines = &lines_[0] if max_nonzeros else NULL
    cdef Status status
    cdef Py_ssize_t size = buf.shape[0]
    with nogil:
        status = _libffm_lines(&buf[0] if size else NULL, size, &out)
    r, z = out.n_rows, out.nnz
    return (status, y[:r], y_span[:2 * r], y_converted[:r], indptr[:r + 1], fields[:z],
            features[:z], values[:z], v_span[:2 * z], v_converted[:z], lines[:z])
