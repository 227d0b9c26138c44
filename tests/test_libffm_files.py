"""libffm files (read whole and in chunks, written, bad lines named) and the synthetic
click logs of polylite.datasets.make_ctr."""
import gzip

import numpy as np
import pytest
import scipy.sparse as sp

from polylite.datasets import (DataFileError, dump_libffm, iter_libffm_chunks, load_libffm,
                               log_bins, make_ctr, scan_libffm)


def _write(tmp_path, text, name="data.ffm"):
    path = tmp_path / name
    path.write_bytes(text.encode())
    return path


def test_reads_a_small_file(tmp_path):
    path = _write(tmp_path, "1 0:0:1 1:3:0.5 2:5:2\n0 0:1:1 2:4:-1\n\n1\n0 1:2:3e-1\n")
    X, y, fields = load_libffm(path)
    np.testing.assert_array_equal(y, [1, 0, 1, 0])
    np.testing.assert_array_equal(fields, [0, 0, 1, 1, 2, 2])
    expected = np.zeros((4, 6))
    expected[0, [0, 3, 5]] = [1, 0.5, 2]
    expected[1, [1, 4]] = [1, -1]
    expected[3, 2] = 0.3
    np.testing.assert_array_equal(X.toarray(), expected)
    X, _, fields = load_libffm(path, n_features=8, dtype=np.float32)
    assert X.shape == (4, 8) and X.dtype == np.float32
    np.testing.assert_array_equal(fields, [0, 0, 1, 1, 2, 2, -1, -1])


def test_repeated_feature_on_a_line_is_summed(tmp_path):
    X, _, _ = load_libffm(_write(tmp_path, "1 0:2:1 0:0:1 0:2:2\n"))
    assert X.has_canonical_format
    np.testing.assert_array_equal(X.toarray(), [[1, 0, 3]])


@pytest.mark.parametrize("text, line, message", [
    ("1 0:1:1\nx 0:1:1\n", 2, "label 'x' is not a number"),
    ("1 0:1:1\n0 0:1\n", 2, "not of the form field:feature:value"),
    ("1 0:1:1\n\n0 0:1:1:2\n", 3, "not of the form field:feature:value"),
    ("1 a:1:1\n", 1, "field index 'a' is not an integer"),
    ("1 0:-1:1\n", 1, "feature index -1 is out of range"),
    ("1 0:1.5:1\n", 1, "feature index '1.5' is not an integer"),
    ("1 0:1:abc\n", 1, "value 'abc'"),
    ("1 0:1:nan\n", 1, "not finite"),
    ("inf 0:1:1\n", 1, "label is not finite"),
    ("1 0:1:1\n0 0:2:1 1:1:1\n", 2, "feature 1 is in field 1, but earlier in field 0"),
    ("1 0:9007199254740992:1\n", 1, "feature index 9007199254740992 is out of range"),
    ("1 0:00000000000000001:1\n", 1, "more than 16 digits"),
    ("1 0::1\n", 1, "feature index '' is not an integer"),
    ("1 0:1:\n", 1, "value ''"),
    ("1:2 0:1:1\n", 1, "label '1:2' is not a number"),
])
def test_bad_lines_are_named(tmp_path, text, line, message):
    path = _write(tmp_path, text)
    with pytest.raises(DataFileError, match=message) as info:
        load_libffm(path)
    assert f"{path}:{line}:" in str(info.value)


def _reference_rows(text):
    """(labels, [(field, feature, value), ...] per row) of libffm text, line by line
    with Python's own conversions: the reference for the compiled parse."""
    labels, rows = [], []
    for line in text.split(b"\n"):
        tokens = line.replace(b"\r", b" ").replace(b"\t", b" ").split(b" ")
        tokens = [t for t in tokens if t]
        if not tokens:
            continue
        labels.append(float(tokens[0]))
        rows.append([(int(f), int(j), float(v))
                     for f, j, v in (t.split(b":") for t in tokens[1:])])
    return labels, rows


def _random_number(rng):
    kind = rng.randint(8)
    if kind == 0:
        return str(rng.randint(-5, 6))
    if kind == 1:
        return repr(float(rng.randn() * 10.0 ** rng.randint(-8, 9)))  # exponents too
    if kind == 2:
        return f"{rng.randn():.{rng.randint(0, 19)}f}"  # up to 20 digits
    if kind == 3:
        return rng.choice(["-0", "+0", "0.", ".5", "-.25", "+1.5", "1e3", "-2E-2"])
    if kind == 4:
        return str(rng.randint(0, 2**53 - 1))  # 16 digits near 2**53
    return f"{rng.rand() * 100:.{rng.randint(1, 7)}f}"


def test_parse_matches_a_line_by_line_reference(tmp_path):
    """Random files (blank lines, CRLF, tabs, runs of spaces, a last line without a
    newline, numbers of every form) read as Python's float and int read them, bit for
    bit, with the line of each nonzero right."""
    rng = np.random.RandomState(0)
    for trial in range(60):
        lines, field_of = [], {}
        for _ in range(rng.randint(0, 40)):
            if rng.rand() < 0.1:
                lines.append(rng.choice(["", " ", "\t", "\r"]))
                continue
            tokens = [_random_number(rng)]
            for _ in range(rng.randint(0, 6)):
                j = int(rng.randint(0, 50))
                f = field_of.setdefault(j, int(rng.randint(0, 5)))
                tokens.append(f"{f}:{j}:{_random_number(rng)}")
            gap = rng.choice([" ", "  ", "\t", " \t "])
            lines.append(gap.join(tokens) + rng.choice(["", " ", "\r"]))
        text = "\n".join(lines) + rng.choice(["", "\n"])
        path = _write(tmp_path, text, name=f"t{trial}.ffm")
        labels, rows = _reference_rows(text.encode())
        for chunk_bytes in (1 << 20, 64):
            if not labels:
                with pytest.raises(DataFileError, match="no data"):
                    scan_libffm(path)
                continue
            X, y, fields = load_libffm(path, n_features=50, chunk_bytes=chunk_bytes)
            assert y.tobytes() == np.array(labels).tobytes()
            expected = np.zeros((len(rows), 50))
            for i, row in enumerate(rows):
                for f, j, v in row:
                    expected[i, j] += v
                    assert fields[j] == f
            assert X.toarray().tobytes() == expected.tobytes()


def test_feature_in_two_fields_across_chunks(tmp_path):
    text = "".join(f"1 0:{j}:1\n" for j in range(200)) + "0 1:5:1\n"
    with pytest.raises(DataFileError, match=":201: feature 5 is in field 1"):
        for _ in iter_libffm_chunks(_write(tmp_path, text), chunk_bytes=64):
            pass


def test_features_beyond_n_features_are_left_out(tmp_path):
    X, y, fields = load_libffm(_write(tmp_path, "1 0:1:1 1:7:2\n1 0:9:1\n0 1:2:1\n"),
                               n_features=5)
    np.testing.assert_array_equal(X.toarray(), [[0, 1, 0, 0, 0], [0] * 5, [0, 0, 1, 0, 0]])
    np.testing.assert_array_equal(fields, [-1, 0, 1, -1, -1])
    np.testing.assert_array_equal(y, [1, 1, 0])


def test_empty_file(tmp_path):
    with pytest.raises(DataFileError, match="no data"):
        load_libffm(_write(tmp_path, "\n\n"))


def test_round_trip_whole_and_in_chunks(tmp_path):
    X, y, fields = make_ctr(3000, max_categories=500, random_state=0)
    X = X.astype(np.float64)
    X.data[::7] = np.random.RandomState(0).randn(X.data[::7].shape[0])
    path = tmp_path / "ctr.ffm"
    dump_libffm(X, y, fields, path)
    X2, y2, f2 = load_libffm(path)
    assert (X2 != X).nnz == 0
    np.testing.assert_array_equal(y2, y)
    np.testing.assert_array_equal(f2, fields)
    chunks = list(iter_libffm_chunks(path, X.shape[1], chunk_bytes=10_000))
    assert len(chunks) > 5
    assert (sp.vstack([c[0] for c in chunks]) != X).nnz == 0
    np.testing.assert_array_equal(np.concatenate([c[1] for c in chunks]), y)
    np.testing.assert_array_equal(chunks[-1][2], fields)
    scan = scan_libffm(path, chunk_bytes=10_000)
    assert (scan.n_rows, scan.n_features, scan.n_fields) == (3000, X.shape[1], 39)
    np.testing.assert_array_equal(scan.labels, [0, 1])
    gz = tmp_path / "ctr.ffm.gz"
    gz.write_bytes(gzip.compress(path.read_bytes()))
    assert (load_libffm(gz)[0] != X).nnz == 0


def test_make_ctr_shape_and_seed():
    X, y, fields = make_ctr(20_000, random_state=3)
    assert np.all(X.getnnz(axis=1) == 39)
    assert np.all(X.data == 1)
    assert int(fields.max()) + 1 == 39
    assert np.all(np.diff(fields) >= 0)
    assert 0.23 < y.mean() < 0.27
    counts = np.bincount(fields)
    assert counts[13:].min() <= 5 and counts[13:].max() > 5000  # a few to very many
    X2, y2, _ = make_ctr(20_000, random_state=3)
    assert (X2 != X).nnz == 0 and np.array_equal(y2, y)
    assert not np.array_equal(make_ctr(20_000, random_state=4)[1], y)
    table, y3 = make_ctr(1000, return_table=True, random_state=0)
    assert sorted(table) == sorted([f"I{i}" for i in range(1, 14)]
                                   + [f"C{i}" for i in range(1, 27)])
    assert np.isnan(table["I1"]).any()
    with pytest.raises(ValueError, match="click_rate"):
        make_ctr(10, click_rate=1.5)


def test_log_bins():
    np.testing.assert_array_equal(log_bins([np.nan, 0, 1, 2, 3, 10, 1000]),
                                  [-1, 0, 1, 2, 1, 5, 47])
