"""FieldEncoder's click-log kinds: hashed categorical fields (stable across processes,
no vocabulary) and log-binned counts; encoders without id columns."""
import os
import subprocess
import sys

import numpy as np
import pytest

import polylite
from polylite import FieldEncoder
from polylite.datasets import make_ctr
from polylite.preprocessing import hash_buckets

_SNIPPET = ("import numpy as np; from polylite.preprocessing import hash_buckets; "
            "print(hash_buckets(['a', 'site-17', ''], 2**20).tolist(), "
            "hash_buckets(np.array([0, 1, -5, 2**40]), 2**20).tolist(), "
            "hash_buckets(np.array([1.5, -0.0]), 1000).tolist())")


def test_hash_is_the_same_in_every_process():
    outputs = set()
    for seed in ("0", "1", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        out = subprocess.run([sys.executable, "-c", _SNIPPET], env=env, check=True,
                             capture_output=True, text=True).stdout
        outputs.add(out)
    assert len(outputs) == 1
    # ... and the same as this process's, and as recorded (model files stay valid).
    expected = (f"{hash_buckets(['a', 'site-17', ''], 2**20).tolist()} "
                f"{hash_buckets(np.array([0, 1, -5, 2**40]), 2**20).tolist()} "
                f"{hash_buckets(np.array([1.5, -0.0]), 1000).tolist()}\n")
    assert outputs == {expected}
    assert hash_buckets(np.array([0, 1, 2]), 2**20).tolist() == [
        int(v) for v in _recorded_small_integers()]


def _recorded_small_integers():
    # The splitmix64 finaliser of 0, 1 and 2, modulo 2**20 (the first is the first
    # output of the splitmix64 generator seeded with 0).
    return [0xE220A8397B1DCDAF % 2**20, 0x910A2DEC89025CC1 % 2**20,
            0x975835DE1C9756CE % 2**20]


def test_hash_spreads_values_over_the_buckets():
    buckets = hash_buckets(np.arange(100_000), 64)
    counts = np.bincount(buckets, minlength=64)
    assert counts.min() > 1400 and counts.max() < 1750
    strings = hash_buckets(np.array([f"v{i}" for i in range(20_000)]), 16)
    assert np.bincount(strings, minlength=16).min() > 1100


def test_hashed_and_log_binned_context_fields():
    train = {"user_id": np.array([1, 2, 3]), "item_id": np.array([1, 1, 2]),
             "site": np.array(["a", "b", "c"]), "clicks": np.array([0.0, 5.0, np.nan])}
    enc = FieldEncoder(context_features={"site": "hashed", "clicks": "log-binned"},
                       n_buckets=32).fit(train)
    site, clicks = enc.fields_[2], enc.fields_[3]
    assert (site.kind, site.stop - site.start) == ("hashed", 32)
    assert enc.bin_ranges_ == {"clicks": (0, 2)}  # bins of 0 and floor(log(5)^2) = 2
    new = dict(train, site=np.array(["never seen", "b", "a"]),
               clicks=np.array([1e9, -3.0, 1.0]))
    X = enc.transform(new)  # unseen values need no handle_unknown
    cols = X.tocsr()[:, site.start:site.stop]
    np.testing.assert_array_equal(cols.indices, hash_buckets(new["site"], 32))
    binned = X.tocsr()[:, clicks.start:clicks.stop].toarray()
    # columns: missing, bin 0, bin 1, bin 2; 1e9 and -3 fall into the nearest bins
    np.testing.assert_array_equal(binned, [[0, 0, 0, 1], [0, 1, 0, 0], [0, 0, 1, 0]])
    np.testing.assert_array_equal(enc.transform(train).toarray()[2, clicks.start], 1)
    names = enc.get_feature_names_out()
    assert names[clicks.start] == "clicks=missing" and names[site.start] == "site#0"


def test_encoder_without_ids_feeds_a_field_aware_model(tmp_path):
    table, y = make_ctr(3000, max_categories=5000, return_table=True, random_state=0)
    kinds = {k: "log-binned" if k.startswith("I") else "hashed" for k in table}
    enc = FieldEncoder(user=None, item=None, ids="none", context_features=kinds,
                       n_buckets=2**10).fit(table)
    X = enc.transform(table)
    assert len(enc.fields_) == 39 and np.all(X.getnnz(axis=1) == 39)
    clf = polylite.FieldAwareFactorizationMachineClassifier(
        fields=enc.fields_, max_iter=2, random_state=0).fit(X, y)
    assert clf.n_fields_ == 39
    path = tmp_path / "enc.npz"
    enc.save(path)
    back = polylite.load(path)
    assert (back.transform(table) != X).nnz == 0
    assert back.bin_ranges_ == enc.bin_ranges_


def test_bad_parameters():
    table = {"a": np.array([1, 2])}
    with pytest.raises(ValueError, match="n_buckets"):
        FieldEncoder(user=None, item=None, ids="none", context_features={"a": "hashed"},
                     n_buckets=0).fit(table)
    with pytest.raises(ValueError, match="need ids='none'"):
        FieldEncoder(user=None, item=None, context_features={"a": "hashed"}).fit(table)
    with pytest.raises(ValueError, match="user_features"):
        FieldEncoder(user_features={"a": "hashed"}).fit(table)
    with pytest.raises(ValueError, match="not numbers"):
        FieldEncoder(user=None, item=None, ids="none",
                     context_features={"a": "log-binned"}).fit({"a": np.array(["x", "y"])})
