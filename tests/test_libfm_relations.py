"""libFM's relation files (``polylite._libfm``) and the command line's ``--relation`` and
``--meta``: the files are written here from libFM's format as its source defines it."""
import struct

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import dump_svmlight_file

from polylite import _libfm, load
from polylite._svmlight import DataFileError
from polylite.cli import main

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def write_table(path, table):
    """libFM's binary design matrix (its convert tool's .x): header, then per row its
    size and (uint32 column, float32 value) entries."""
    table = sp.csr_matrix(table)
    with open(path, "wb") as f:
        f.write(struct.pack("<IIQII", 2, 4, table.nnz, table.shape[0], table.shape[1]))
        for r in range(table.shape[0]):
            row = table[r]
            f.write(struct.pack("<I", row.nnz))
            for j, v in zip(row.indices, row.data):
                f.write(struct.pack("<If", j, v))


def write_binary_index(path, index):
    with open(path, "wb") as f:
        f.write(struct.pack("<III", 1, 4, len(index)))
        f.write(np.asarray(index, "<u4").tobytes())


def test_a_table_reads_back_as_written(tmp_path):
    table = sp.random(7, 5, density=0.4, random_state=0, format="csr", dtype=np.float32)
    write_table(tmp_path / "t.x", table)
    got = _libfm.read_table(tmp_path / "t.x")
    assert got.shape == (7, 5) and got.dtype == np.float64
    np.testing.assert_array_equal(got.toarray(), table.toarray())


@pytest.mark.parametrize("damage, message", [
    (lambda raw: raw[:10], "too short"),
    (lambda raw: struct.pack("<I", 3) + raw[4:], "not a libFM binary matrix"),
    (lambda raw: raw[:-4], "bytes, but its header declares"),
    (lambda raw: raw[:24] + struct.pack("<I", 1) + struct.pack("<If", 9, 1.0)
     + raw[24 + 12:], "out of range"),
    # A row's size past its entries: the walk over the sizes runs beyond the file.
    (lambda raw: raw[:24] + struct.pack("<I", 2) + raw[28:], "do not add up"),
    (lambda raw: raw[:24] + struct.pack("<I", 0) + raw[28:], "do not add up"),
])
def test_damaged_tables_are_refused_by_name(tmp_path, damage, message):
    write_table(tmp_path / "t.x", sp.csr_matrix(np.eye(3, dtype=np.float32)))
    raw = (tmp_path / "t.x").read_bytes()
    (tmp_path / "bad.x").write_bytes(damage(raw))
    with pytest.raises(DataFileError, match=message):
        _libfm.read_table(tmp_path / "bad.x")


def test_row_indices_in_text_or_binary(tmp_path):
    np.savetxt(tmp_path / "r.train", [2, 0, 1, 1], fmt="%d")
    np.testing.assert_array_equal(_libfm.read_row_index(tmp_path / "r.train", 4),
                                  [2, 0, 1, 1])
    write_binary_index(tmp_path / "r.test", [1, 0])
    np.testing.assert_array_equal(_libfm.read_row_index(tmp_path / "r.test", 2), [1, 0])
    with pytest.raises(DataFileError, match="3 table rows for the 4 lines"):
        _libfm.read_row_index(_save(tmp_path / "short", [0, 1, 2]), 4)
    with pytest.raises(DataFileError, match="not a table row"):
        _libfm.read_row_index(_save(tmp_path / "neg", [0, -1]), 2)


def _save(path, values):
    np.savetxt(path, values, fmt="%d")
    return path


@pytest.fixture
def libfm_files(tmp_path):
    """A data file whose lines have three features of their own, a user relation and an
    item relation (libFM's files), and the same rows expanded in one svmlight file."""
    rng = np.random.RandomState(0)
    n_users, n_items, n = 40, 30, 1500
    users = sp.random(n_users, 8, density=0.4, random_state=1, format="csr",
                      dtype=np.float32).astype(np.float64)
    items = sp.random(n_items, 6, density=0.4, random_state=2, format="csr",
                      dtype=np.float32).astype(np.float64)
    user_index, item_index = rng.randint(n_users, size=n), rng.randint(n_items, size=n)
    own = sp.random(n, 3, density=0.5, random_state=3, format="csr")
    expanded = sp.hstack([own, users[user_index], items[item_index]]).tocsr()
    y = expanded @ rng.randn(expanded.shape[1]) + 0.1 * rng.randn(n)
    write_table(tmp_path / "user.x", users)
    write_table(tmp_path / "item.x", items)
    np.savetxt(tmp_path / "user.train", user_index[:1200], fmt="%d")
    write_binary_index(tmp_path / "user.test", user_index[1200:])
    np.savetxt(tmp_path / "item.train", item_index[:1200], fmt="%d")
    np.savetxt(tmp_path / "item.test", item_index[1200:], fmt="%d")
    np.savetxt(tmp_path / "user.groups", [0] * 4 + [1] * 4, fmt="%d")
    files = {}
    for name, X in (("train", own[:1200]), ("test", own[1200:]),
                    ("train_full", expanded[:1200]), ("test_full", expanded[1200:])):
        target = y[:1200] if name.startswith("train") else y[1200:]
        dump_svmlight_file(X, target, str(tmp_path / f"{name}.libfm"), zero_based=True)
        files[name] = str(tmp_path / f"{name}.libfm")
    files["relations"] = f"{tmp_path / 'user'},{tmp_path / 'item'}"
    return files, tmp_path


def _run(capsys, *argv):
    status = main([str(a) for a in argv])
    return status, *capsys.readouterr()


@pytest.mark.parametrize("estimator", ["fm", "bayes-fm"])
def test_fit_on_relations_equals_fit_on_the_expanded_file(libfm_files, capsys, estimator):
    files, tmp = libfm_files
    common = ["--zero-based", "--n-components", "3", "--seed", "0", "--progress", "none",
              "--estimator", estimator]
    common += (["--max-iter", "15"] if estimator == "fm"
               else ["--n-iter", "12", "--n-burn-in", "4"])
    status, _, err = _run(capsys, "fit", files["train"], "--relation", files["relations"],
                          "-m", tmp / "rel.npz", "--validation", files["test"], *common)
    assert status == 0 and "+ " in err and "(8 columns)" in err
    # The same priors: the data file's columns one group, each relation's groups after
    # (libFM's numbering).
    np.savetxt(tmp / "full.groups", [0] * 3 + [1] * 4 + [2] * 4 + [3] * 6, fmt="%d")
    meta = ["--meta", tmp / "full.groups"] if estimator == "bayes-fm" else []
    _run(capsys, "fit", files["train_full"], "-m", tmp / "full.npz", "--validation",
         files["test_full"], *common, *meta)
    rel, full = load(tmp / "rel.npz"), load(tmp / "full.npz")
    assert rel.n_features_in_ == full.n_features_in_ == 17
    attribute = "P_" if estimator == "fm" else "P_samples_"
    np.testing.assert_allclose(getattr(rel, attribute), getattr(full, attribute),
                               rtol=1e-6, atol=1e-8)
    status, rel_out, _ = _run(capsys, "predict", tmp / "rel.npz", files["test"],
                              "--relation", files["relations"])
    status, full_out, _ = _run(capsys, "predict", tmp / "full.npz", files["test_full"])
    np.testing.assert_allclose(np.array(rel_out.split(), float),
                               np.array(full_out.split(), float), rtol=1e-6, atol=1e-8)
    status, out, _ = _run(capsys, "evaluate", tmp / "rel.npz", files["test"], "--relation",
                          files["relations"], "--json")
    assert status == 0 and '"rows": 300' in out


def test_bayes_fm_takes_libfm_groups(libfm_files, capsys):
    files, tmp = libfm_files
    np.savetxt(tmp / "main.groups", [0, 0, 1], fmt="%d")
    status, _, _ = _run(capsys, "fit", files["train"], "--relation", files["relations"],
                        "--meta", tmp / "main.groups", "--estimator", "bayes-fm",
                        "--n-iter", "5", "--n-burn-in", "1", "--zero-based", "-m",
                        tmp / "model.npz", "--progress", "none")
    assert status == 0
    # The data file's groups 0, 1; the user relation's 0, 1 after them; the item's one.
    np.testing.assert_array_equal(load(tmp / "model.npz").feature_groups_,
                                  [0, 0, 1] + [2] * 4 + [3] * 4 + [4] * 6)


def test_relations_misused_are_one_line_errors(libfm_files, capsys):
    files, tmp = libfm_files
    status, _, err = _run(capsys, "fit", files["train"], "--relation", files["relations"],
                          "-m", tmp / "m.npz", "--zero-based", "--max-iter", "2")
    assert status == 0
    status, _, err = _run(capsys, "predict", tmp / "m.npz", files["test"])
    assert status != 0 and "fitted with --relation user,item" in err
    status, _, err = _run(capsys, "fit", files["train"], "--relation",
                          f"{tmp / 'user'},{tmp / 'missing'}", "-m", tmp / "n.npz")
    assert status != 0 and "missing.x: cannot read" in err
    status, _, err = _run(capsys, "fit", files["train"], "--relation", files["relations"],
                          "--stream", "-m", tmp / "s.npz")
    assert status == 2 and "argument --relation: not with --stream" in err
    status, _, err = _run(capsys, "fit", files["train"], "--meta", tmp / "user.groups",
                          "-m", tmp / "s.npz")
    assert status == 2 and "argument --meta: feature groups are the priors" in err
    # A test file of another length than its index files.
    dump_svmlight_file(sp.csr_matrix((5, 3)), np.zeros(5), str(tmp / "five.libfm"),
                       zero_based=True)
    status, _, err = _run(capsys, "evaluate", tmp / "m.npz", tmp / "five.libfm",
                          "--relation", files["relations"])
    assert status != 0 and "lines" in err


def test_predict_refuses_relations_other_than_the_models(libfm_files, capsys):
    """Fewer relations, or the same in another order, would put the tables' columns at
    other columns of the model: refused, naming what the model was fitted with."""
    files, tmp = libfm_files
    status, _, _ = _run(capsys, "fit", files["train"], "--relation", files["relations"],
                        "-m", tmp / "m.npz", "--zero-based", "--max-iter", "2")
    assert status == 0
    for relations in (f"{tmp / 'user'}", f"{tmp / 'item'},{tmp / 'user'}"):
        status, out, err = _run(capsys, "predict", tmp / "m.npz", files["test"],
                                "--relation", relations)
        assert status != 0 and out == ""
        assert "fitted with the relations user (8 columns), item (6 columns)" in err
    # A model fitted without relations takes none.
    _run(capsys, "fit", files["train_full"], "-m", tmp / "plain.npz", "--zero-based",
         "--max-iter", "2")
    status, _, err = _run(capsys, "predict", tmp / "plain.npz", files["test"],
                          "--relation", files["relations"])
    assert status != 0 and "fitted without relations" in err


def test_every_relations_index_length_is_checked_by_name(libfm_files, capsys):
    files, tmp = libfm_files
    _run(capsys, "fit", files["train"], "--relation", files["relations"], "-m",
         tmp / "m.npz", "--zero-based", "--max-iter", "2")
    # The second relation's files: a table like item's, indices two lines too many.
    (tmp / "long.x").write_bytes((tmp / "item.x").read_bytes())
    index = np.loadtxt(tmp / "item.test", dtype=int)
    np.savetxt(tmp / "long.test", np.concatenate([index, [0, 1]]), fmt="%d")
    np.savetxt(tmp / "long.train", np.concatenate([np.loadtxt(tmp / "item.train"), [0, 1]]),
               fmt="%d")
    relations = f"{tmp / 'user'},{tmp / 'long'}"
    status, _, err = _run(capsys, "evaluate", tmp / "m.npz", files["test"], "--relation",
                          relations)
    assert status != 0 and "long.test: table rows for 302 lines" in err and "has 300" in err
    status, _, err = _run(capsys, "fit", files["train"], "--relation", relations, "-m",
                          tmp / "n.npz", "--zero-based")
    assert status != 0 and "long.train: table rows for 1202 lines" in err
    assert "has 1200" in err
    # Too few, found in a chunk before the file's end.
    np.savetxt(tmp / "long.test", index[:100], fmt="%d")
    status, _, err = _run(capsys, "predict", tmp / "m.npz", files["test"], "--relation",
                          relations, "--chunk-bytes", "2000")
    assert status != 0 and "long.test: table rows for 100 lines" in err


def test_relations_refused_by_polynomial_networks_and_bad_indices(libfm_files, capsys):
    files, tmp = libfm_files
    status, _, err = _run(capsys, "fit", files["train"], "--relation", files["relations"],
                          "--estimator", "pn", "-m", tmp / "pn.npz")
    assert status == 2 and "taken by factorization machines" in err
    _run(capsys, "fit", files["train_full"], "--estimator", "pn", "-m", tmp / "pn.npz",
         "--zero-based", "--max-iter", "2")
    status, _, err = _run(capsys, "predict", tmp / "pn.npz", files["test"], "--relation",
                          files["relations"])
    assert status != 0 and "takes no relations' tables" in err
    status, _, err = _run(capsys, "fit", files["train"], "--relation", ",", "-m",
                          tmp / "x.npz")
    assert status == 2 and "names no relation" in err
    (tmp / "big.x").write_bytes((tmp / "user.x").read_bytes())
    lines = (tmp / "user.train").read_text().splitlines()
    (tmp / "big.train").write_text("\n".join(["1e20"] + lines[1:]) + "\n")
    status, _, err = _run(capsys, "fit", files["train"], "--relation",
                          f"{tmp / 'big'},{tmp / 'item'}", "-m", tmp / "x.npz")
    assert status != 0 and "big.train: value 1 ('1e20') is not a table row" in err


def test_a_data_files_column_past_its_own_is_named_so(libfm_files, capsys):
    files, tmp = libfm_files
    _run(capsys, "fit", files["train"], "--relation", files["relations"], "-m",
         tmp / "m.npz", "--zero-based", "--max-iter", "2")
    lines = open(files["test"]).read().splitlines()
    lines[0] += " 4:1.0"  # column 4: past the data file's 3, inside the model's 17
    (tmp / "extra.libfm").write_text("\n".join(lines) + "\n")
    status, _, err = _run(capsys, "predict", tmp / "m.npz", tmp / "extra.libfm",
                          "--relation", files["relations"])
    assert status == 0 and "beyond the data file's own 3 columns" in err
