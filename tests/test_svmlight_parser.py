"""The command line's svmlight reader against scikit-learn's (the reference parser), on
random blocks of every construct the format has, and its number conversion against
Python's ``float``."""
import io

import numpy as np
import pytest
from sklearn.datasets import load_svmlight_file

from polylite._svmlight import DataFileError, _parse, text_numbers


def _number(rng, v):
    forms = [repr(v), f"{v:.6f}", f"{v:.3g}", str(int(v * 10)), f"{v:e}", "-0", "+3.25",
             ".5", "7.", f"{abs(v):.15g}", f"{v:.16g}", "inf", "-inf", "0007"]
    return forms[rng.integers(len(forms))]


def _random_block(rng):
    lines = []
    for _ in range(rng.integers(0, 25)):
        kind = rng.integers(10)
        if kind == 0:
            lines.append("")
            continue
        if kind == 1:
            lines.append("  # a comment only")
            continue
        tokens = [_number(rng, float(rng.normal()))]
        if kind == 2:
            tokens.append(f"qid:{rng.integers(100)}")
        for j in np.sort(rng.choice(60, rng.integers(0, 6), replace=False)):
            tokens.append(f"{j}:{_number(rng, float(rng.normal() * 10.0 ** rng.integers(-5, 5)))}")
        line = [" ", "\t", "  "][rng.integers(3)].join(tokens)
        if rng.integers(5) == 0:
            line += " # note 3:4"
        if rng.integers(6) == 0:
            line += "\r"
        lines.append(line)
    return ("\n".join(lines) + "\n").encode()


@pytest.mark.parametrize("seed", range(4))
def test_blocks_read_as_scikit_learn_reads_them(seed):
    rng = np.random.default_rng(seed)
    for _ in range(150):
        block = _random_block(rng)
        try:
            expected_X, expected_y = load_svmlight_file(io.BytesIO(block),
                                                        zero_based=True)
        except ValueError:  # only non-finite numbers make these random blocks invalid
            with pytest.raises(DataFileError, match="not finite"):
                _parse(block, "f", 1, np.float64)
            continue
        if not (np.isfinite(expected_y).all() and np.isfinite(expected_X.data).all()):
            with pytest.raises(DataFileError, match="not finite"):
                _parse(block, "f", 1, np.float64)
            continue
        X, y = _parse(block, "f", 1, np.float64)
        assert X.shape == expected_X.shape
        np.testing.assert_array_equal(y, expected_y)
        np.testing.assert_array_equal(X.indptr, expected_X.indptr)
        np.testing.assert_array_equal(X.indices, expected_X.indices)
        np.testing.assert_array_equal(X.data, expected_X.data)  # bit for bit


@pytest.mark.parametrize("line, problem", [
    (b"1 2:3 1:4", "feature indices must increase along a line"),
    (b"1 2:2 2:3", "feature indices must increase along a line"),
    (b"x 1:2", "the label 'x' is not a number"),
    (b"1 a:2", "the feature index 'a' is not an integer"),
    (b"1 1.5:2", "the feature index '1.5' is not an integer"),
    (b"1 1e3:2", "the feature index '1e3' is not an integer"),
    (b"1 -1:2", r"the feature index -1 is out of range \[0, 2147483647\]"),
    (b"1 2147483648:1", "the feature index 2147483648 is out of range"),
    (b"1 1:x", "the value 'x' of feature 1 is not a number"),
    (b"1 1:2:3", "the value '2:3' of feature 1 is not a number"),
    (b"1 :2", "the feature index '' is not an integer"),
    (b"1 2:", "the value '' of feature 2 is not a number"),
    (b"1 3", "'3' is not of the form index:value"),
    (b"1 qid:a 1:2", "the query id 'a' is not an integer"),
    (b"1 3:1 qid:2", "the feature index 'qid' is not an integer"),
    (b"1 1:nan", "a feature value is not finite"),
    (b"inf 1:1", "the label is not finite"),
])
def test_a_bad_line_is_named_with_its_problem(line, problem):
    block = b"1 0:1\n# comment\n" + line + b"\n2 1:1\n"
    with pytest.raises(DataFileError, match=f"^f:3: {problem}"):
        _parse(block, "f", 1, np.float64)


def test_numbers_convert_exactly_as_float_does():
    rng = np.random.default_rng(0)
    texts = [_number(rng, float(rng.normal() * 10.0 ** rng.integers(-12, 12)))
             for _ in range(20000)]
    texts += ["9007199254740991", "9007199254740993", "0.1234567890123456",
              "1234567890123456.7", "0." + "0" * 20 + "1", "nan", "+7", "-0.0"]
    raw = " ".join(texts).encode()
    buf = np.frombuffer(raw, np.uint8)
    stops = np.cumsum([len(t) + 1 for t in texts]) - 1
    starts = stops - [len(t) for t in texts]
    got = text_numbers(buf, starts, stops)
    expected = np.array([float(t) for t in texts])
    same = (got == expected) | (np.isnan(got) & np.isnan(expected))
    assert same.all() and np.array_equal(np.signbit(got), np.signbit(expected))


def test_numbers_refuse_what_is_not_one():
    buf = np.frombuffer(b"12 1x 1.5 -", np.uint8)
    with pytest.raises(ValueError):
        text_numbers(buf, np.array([3]), np.array([5]))
    with pytest.raises(ValueError):
        text_numbers(buf, np.array([10]), np.array([11]))
    with pytest.raises(ValueError):
        text_numbers(buf, np.array([6]), np.array([9]), integers=True)
    np.testing.assert_array_equal(text_numbers(buf, np.array([0]), np.array([2]),
                                               integers=True), [12.0])


def test_a_block_is_parsed_in_pieces_as_a_whole(monkeypatch):
    """Pieces of a few lines give the same rows as the block at once, and errors name
    the block's line."""
    import polylite._svmlight as svmlight
    rng = np.random.default_rng(5)
    blocks = (_random_block(rng) for _ in range(100))
    block = b"".join(b for b in blocks if b"inf" not in b)
    whole_X, whole_y = _parse(block, "f", 1, np.float64)
    monkeypatch.setattr(svmlight, "PARSE_BYTES", 64)
    X, y = _parse(block, "f", 1, np.float64)
    assert len(list(svmlight._pieces(block))) > 10
    assert X.shape == whole_X.shape and (X != whole_X).nnz == 0
    np.testing.assert_array_equal(y, whole_y)
    np.testing.assert_array_equal(X.indptr, whole_X.indptr)
    lines = block.split(b"\n")
    lines[len(lines) // 2] = b"1 x:2"
    with pytest.raises(DataFileError, match=f"^f:{len(lines) // 2 + 1}: the feature "
                                            f"index 'x' is not an integer"):
        _parse(b"\n".join(lines), "f", 1, np.float64)
