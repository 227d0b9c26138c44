"""FieldEncoder: the column layout against hand-built rows, implicit feedback, unknown
values, table formats, pickle-free saving alone and in a pipeline."""
import json
import zipfile

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.pipeline import make_pipeline
from sklearn.utils import Bunch

import polylite
from polylite import FactorizationMachineRegressor, FieldEncoder, ModelFileError
from polylite.datasets import make_recommender

RATINGS = {"user_id": np.array([1, 1, 2, 3]), "item_id": np.array(["b", "a", "a", "c"]),
           "hour": np.array([8, 20, 8, 8]), "price": np.array([1.5, 2.0, 0.5, 1.0])}
USERS = {"user_id": np.array([3, 1, 2, 4]), "age": np.array([30.0, 20.0, 40.0, 50.0]),
         "sex": np.array(["F", "M", "M", "F"])}
ITEMS = {"item_id": np.array(["a", "b", "c"]),
         "genres": np.array([[1, 0], [0, 1], [1, 1]])}

# The fits here are a few epochs on tiny data; not converging is expected.
pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

FULL = dict(user_features={"age": "numeric", "sex": "categorical"},
            item_features={"genres": "numeric"},
            context_features={"hour": "categorical", "price": "numeric"})


def _full_encoder(**params):
    return FieldEncoder(**dict(FULL, **params)).fit(RATINGS, users=USERS, items=ITEMS)


def test_layout_matches_hand_built_rows():
    enc = _full_encoder()
    names = enc.get_feature_names_out().tolist()
    assert names == ["user_id=1", "user_id=2", "user_id=3", "user_id=4", "age", "sex=F",
                     "sex=M", "item_id=a", "item_id=b", "item_id=c", "genres[0]",
                     "genres[1]", "hour=8", "hour=20", "price"]
    expected = np.array([
        # users     age  F  M   items    genres  hours  price
        [1, 0, 0, 0, 20, 0, 1, 0, 1, 0, 0, 1, 1, 0, 1.5],
        [1, 0, 0, 0, 20, 0, 1, 1, 0, 0, 1, 0, 0, 1, 2.0],
        [0, 1, 0, 0, 40, 0, 1, 1, 0, 0, 1, 0, 1, 0, 0.5],
        [0, 0, 1, 0, 30, 1, 0, 0, 0, 1, 1, 1, 1, 0, 1.0]])
    X = enc.transform(RATINGS)
    assert sp.isspmatrix_csr(X) and X.has_canonical_format and X.dtype == np.float64
    np.testing.assert_array_equal(X.toarray(), expected)
    assert enc.n_features_out_ == 15 and enc.n_features_in_ == 4
    assert enc.feature_names_in_.tolist() == ["user_id", "item_id", "hour", "price"]
    assert [(f.name, f.side, f.kind, f.start, f.stop) for f in enc.fields_] == [
        ("user_id", "user", "id", 0, 4), ("age", "user", "numeric", 4, 5),
        ("sex", "user", "categorical", 5, 7), ("item_id", "item", "id", 7, 10),
        ("genres", "item", "numeric", 10, 12), ("hour", "context", "categorical", 12, 14),
        ("price", "context", "numeric", 14, 15)]
    # The parts add up to the rows.
    parts = (enc.transform_users(RATINGS["user_id"]) +
             enc.transform_items(RATINGS["item_id"]) + enc.transform_context(RATINGS))
    np.testing.assert_array_equal(parts.toarray(), expected)
    assert enc.transform_users([4]).toarray()[0].tolist() == [0, 0, 0, 1, 50, 1, 0] + \
        [0] * 8  # a user of the table without ratings is known


def test_ids_none_side_features_only():
    enc = FieldEncoder(ids="none", **FULL).fit(RATINGS, users=USERS, items=ITEMS)
    assert enc.get_feature_names_out().tolist() == [
        "age", "sex=F", "sex=M", "genres[0]", "genres[1]", "hour=8", "hour=20", "price"]
    enc = FieldEncoder(ids="item").fit(RATINGS)
    assert enc.get_feature_names_out().tolist() == ["item_id=a", "item_id=b", "item_id=c"]


def test_an_encoder_of_no_columns_is_refused():
    """ids="none" and no features gave 0 columns without a word."""
    with pytest.raises(ValueError, match="no columns to make: ids='none'"):
        FieldEncoder(ids="none").fit(RATINGS)


@pytest.mark.parametrize("norm, scale", [("sqrt", lambda n: n ** -0.5),
                                         ("sum", lambda n: 1 / n), ("none", lambda n: 1)])
def test_implicit_feedback(norm, scale):
    enc = FieldEncoder(implicit="both", implicit_norm=norm).fit(RATINGS)
    names = enc.get_feature_names_out().tolist()
    assert names == ["user_id=1", "user_id=2", "user_id=3", "rated_items=a",
                     "rated_items=b", "rated_items=c", "item_id=a", "item_id=b",
                     "item_id=c", "raters=1", "raters=2", "raters=3"]
    X = enc.transform({"user_id": [1, 3], "item_id": ["a", "a"]}).toarray()
    s1, s2 = scale(2), scale(1)  # user 1 rated a and b; item a was rated by 1 and 2
    np.testing.assert_allclose(X[0], [1, 0, 0, s1, s1, 0, 1, 0, 0, s1, s1, 0])
    np.testing.assert_allclose(X[1], [0, 0, 1, 0, 0, s2, 1, 0, 0, s1, s1, 0])


def test_implicit_sets_from_rated_pairs():
    """``rated`` gives the sets (e.g. test pairs without ratings); duplicates count once."""
    rated = {"user_id": [1, 1, 1, 2, 4], "item_id": ["a", "c", "c", "a", "d"]}
    enc = FieldEncoder(implicit="user", implicit_norm="sum").fit(RATINGS, rated=rated)
    assert enc.categories_["user_id"].tolist() == [1, 2, 3, 4]
    assert enc.categories_["item_id"].tolist() == ["a", "b", "c", "d"]
    X = enc.transform({"user_id": [1, 3], "item_id": ["a", "a"]}).toarray()
    np.testing.assert_allclose(X[0, 4:8], [0.5, 0, 0.5, 0])
    np.testing.assert_allclose(X[1, 4:8], 0)  # user 3 has no rated pairs


def test_handle_unknown():
    enc = _full_encoder()
    new = {"user_id": [9], "item_id": ["a"], "hour": [8], "price": [1.0]}
    with pytest.raises(ValueError, match=r"column 'user_id' has 1 value\(s\) unseen in "
                                         r"fit, e.g. 9; set handle_unknown='ignore'"):
        enc.transform(new)
    with pytest.raises(ValueError, match="column 'hour' has 1 value"):
        enc.transform(dict(RATINGS, hour=[8, 9, 8, 8]))
    enc = _full_encoder(handle_unknown="ignore")
    row = enc.transform(new).toarray()[0]
    np.testing.assert_array_equal(row[:7], 0)  # no user part at all
    known = enc.transform(dict(new, user_id=[1])).toarray()[0]
    np.testing.assert_array_equal(row[7:], known[7:])
    row = enc.transform(dict(RATINGS, hour=[8, 9, 8, 8])).toarray()[1]
    np.testing.assert_array_equal(row[12:14], 0)


def test_users_missing_from_the_side_table():
    users = {key: v[:2] for key, v in USERS.items()}  # users 3 and 1 only
    with pytest.raises(ValueError, match=r"1 user\(s\) of X or rated are missing from the "
                                         r"users table, e.g. 2"):
        FieldEncoder(**FULL).fit(RATINGS, users=users, items=ITEMS)
    enc = FieldEncoder(handle_unknown="ignore", **FULL).fit(RATINGS, users=users,
                                                            items=ITEMS)
    row = enc.transform_users([2]).toarray()[0]
    assert row[1] == 1 and row[2:].sum() == 0  # its id, but no side features


@pytest.mark.parametrize("kind", ["dict", "bunch", "structured", "pandas"])
def test_table_formats(kind):
    if kind == "pandas":
        pd = pytest.importorskip("pandas")
        convert = pd.DataFrame
    elif kind == "bunch":
        convert = lambda t: Bunch(**t)  # noqa: E731
    elif kind == "structured":
        def convert(t):
            t = {k: v for k, v in t.items() if np.ndim(v) == 1}
            out = np.empty(len(next(iter(t.values()))),
                           dtype=[(k, np.asarray(v).dtype) for k, v in t.items()])
            for k, v in t.items():
                out[k] = v
            return out
    else:
        convert = dict
    items = {"item_id": ITEMS["item_id"], "genre": np.array(["x", "y", "x"])}
    params = dict(FULL, item_features={"genre": "categorical"})
    reference = FieldEncoder(**params).fit(RATINGS, users=USERS, items=items)
    enc = FieldEncoder(**params).fit(convert(RATINGS), users=convert(USERS),
                                     items=convert(items))
    assert (enc.transform(convert(RATINGS)) != reference.transform(RATINGS)).nnz == 0


def test_object_columns_of_strings_and_ints():
    ratings = {"user_id": np.array(["u1", "u2"], dtype=object),
               "item_id": np.array([5, 7], dtype=object)}
    enc = FieldEncoder().fit(ratings)
    assert enc.categories_["user_id"].dtype.kind == "U"
    assert enc.categories_["item_id"].dtype == np.int64
    np.testing.assert_array_equal(enc.transform(ratings).toarray(),
                                  [[1, 0, 1, 0], [0, 1, 0, 1]])


@pytest.mark.parametrize("params, match", [
    (dict(user=3), "user must be a column name"),
    (dict(item="user_id"), "user and item must be different columns"),
    (dict(user_features=["age"]), "user_features must be a dict"),
    (dict(user_features={"age": "ordinal"}), r"user_features\['age'\] must be one of"),
    (dict(item_features={"item_id": "numeric"}), "names the id column"),
    (dict(ids="users"), "ids must be one of"),
    (dict(implicit=True), "implicit must be one of"),
    (dict(implicit_norm="l2"), "implicit_norm must be one of"),
    (dict(handle_unknown="skip"), "handle_unknown must be one of"),
    (dict(dtype=np.int64), "dtype must be float32 or float64"),
])
def test_invalid_parameters(params, match):
    with pytest.raises(ValueError, match=match):
        FieldEncoder(**params).fit(RATINGS)


def test_invalid_tables():
    with pytest.raises(TypeError, match="X must be a table with named columns"):
        FieldEncoder().fit(np.zeros((3, 2)))
    with pytest.raises(ValueError, match=r"X has no column 'user_id'; its columns are "
                                         r"\['u', 'item_id'\]"):
        FieldEncoder().fit({"u": [1], "item_id": [2]})
    with pytest.raises(ValueError, match="columns of X have different lengths"):
        FieldEncoder().fit({"user_id": [1, 2], "item_id": [2]})
    with pytest.raises(ValueError, match="no users table was given"):
        FieldEncoder(user_features={"age": "numeric"}).fit(RATINGS)
    with pytest.raises(ValueError, match="several rows for user_id 1"):
        FieldEncoder(user_features={"age": "numeric"}).fit(
            RATINGS, users={"user_id": [1, 1, 2, 3], "age": [1.0, 2, 3, 4]})
    with pytest.raises(ValueError, match="numeric column 'age' contains NaN"):
        FieldEncoder(user_features={"age": "numeric"}).fit(
            RATINGS, users={"user_id": [1, 2, 3], "age": [1.0, np.nan, 3]})
    with pytest.raises(ValueError, match="numeric column 'age' holds values that are not"):
        FieldEncoder(user_features={"age": "numeric"}).fit(
            RATINGS, users={"user_id": [1, 2, 3], "age": ["a", "b", "c"]})
    with pytest.raises(ValueError, match="column 'user_id' mixes value types"):
        FieldEncoder().fit({"user_id": np.array([1, "a"], dtype=object), "item_id": [1, 2]})
    with pytest.raises(ValueError, match="categorical column 'hour' contains NaN"):
        FieldEncoder(context_features={"hour": "categorical"}).fit(
            dict(RATINGS, hour=[1.0, np.nan, 2, 3]))
    with pytest.raises(ValueError, match="two fields share a name"):
        FieldEncoder(user_features={"x": "numeric"}, item_features={"x": "numeric"}).fit(
            RATINGS, users={"user_id": [1, 2, 3], "x": [1.0, 2, 3]},
            items={"item_id": ["a", "b", "c"], "x": [1.0, 2, 3]})
    enc = FieldEncoder().fit(RATINGS)
    with pytest.raises(ValueError, match="holds strings, but the encoder was fitted on "
                                         "numbers"):
        enc.transform({"user_id": ["1"], "item_id": ["a"]})


def test_float32_output_and_sklearn_api():
    enc = _full_encoder(dtype=np.float32)
    assert enc.transform(RATINGS).dtype == np.float32
    twin = clone(enc)
    assert twin.get_params() == enc.get_params() and not hasattr(twin, "fields_")
    np.testing.assert_array_equal(
        enc.fit_transform(RATINGS, users=USERS, items=ITEMS).toarray(),
        enc.transform(RATINGS).toarray())


def test_reproduces_make_recommender_columns():
    X, y = make_recommender(400, 6, 5, 2, field_sizes=(3, 4), random_state=0)
    table, y2 = make_recommender(400, 6, 5, 2, field_sizes=(3, 4), return_table=True,
                                 random_state=0)
    np.testing.assert_array_equal(y, y2)
    enc = FieldEncoder(context_features={"field_0": "categorical",
                                         "field_1": "categorical", "numeric": "numeric"})
    X2 = enc.fit_transform(table)
    assert X2.shape == X.shape  # every level appears in 400 rows
    np.testing.assert_allclose(X2.toarray(), X.toarray())


def test_make_recommender_planted_model():
    X, y, model = make_recommender(300, 8, 6, 2, field_sizes=(3,), degree=4, noise=0.0,
                                   return_model=True, random_state=1)
    assert model["P"].shape == (3, 8 + 6 + 3 + 2, 4)
    assert np.all(np.diff(X.indptr) == 5)
    pred = polylite.kernels.predict(X, model["P"], degrees=[2, 3, 4], w=model["w"],
                                    intercept=model["intercept"])
    np.testing.assert_allclose(pred, y, rtol=1e-12)
    with pytest.raises(ValueError, match="at least one level"):
        make_recommender(10, 0, 5)


# ---- saving -----------------------------------------------------------------------------

def _assert_same_encoder(a, b):
    assert a.get_params() == dict(b.get_params(), dtype=a.dtype)
    assert a.fields_ == b.fields_
    assert a.categories_.keys() == b.categories_.keys()
    for key in a.categories_:
        assert a.categories_[key].dtype == b.categories_[key].dtype
        np.testing.assert_array_equal(a.categories_[key], b.categories_[key])
    assert a.feature_names_in_.tolist() == b.feature_names_in_.tolist()
    Xa, Xb = a.transform(RATINGS), b.transform(RATINGS)
    assert Xa.dtype == Xb.dtype and (Xa != Xb).nnz == 0


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_encoder_save_load(tmp_path, dtype):
    enc = _full_encoder(implicit="both", dtype=dtype)
    enc.save(tmp_path / "enc.npz")
    loaded = polylite.load(tmp_path / "enc.npz")
    assert isinstance(loaded, FieldEncoder)
    assert loaded.dtype == np.dtype(dtype).name  # dtypes are saved by name
    _assert_same_encoder(enc, loaded)


def test_encoder_and_model_saved_together(tmp_path):
    pipe = make_pipeline(FieldEncoder(**FULL),
                         FactorizationMachineRegressor(n_components=2, max_iter=5,
                                                       random_state=0))
    y = np.array([4.0, 3.0, 5.0, 1.0])
    pipe.fit(RATINGS, y, fieldencoder__users=USERS, fieldencoder__items=ITEMS)
    polylite.save(pipe, tmp_path / "pipe.npz")
    loaded = polylite.load(tmp_path / "pipe.npz")
    assert [name for name, _ in loaded.steps] == [name for name, _ in pipe.steps]
    _assert_same_encoder(pipe[0], loaded[0])
    np.testing.assert_array_equal(loaded.predict(RATINGS), pipe.predict(RATINGS))
    # A single estimator through polylite.save too.
    polylite.save(pipe[-1], tmp_path / "fm.npz")
    assert isinstance(polylite.load(tmp_path / "fm.npz"), FactorizationMachineRegressor)


def test_save_rejects_foreign_steps(tmp_path):
    from sklearn.preprocessing import StandardScaler
    pipe = make_pipeline(StandardScaler(with_mean=False),
                         FactorizationMachineRegressor(max_iter=2))
    pipe.fit(sp.random(10, 3, density=0.5, format="csr", random_state=0), np.arange(10.0))
    with pytest.raises(TypeError, match="StandardScaler cannot be saved by polylite"):
        polylite.save(pipe, tmp_path / "p.npz")
    with pytest.raises(TypeError, match="cannot save parameter"):
        polylite._io._json_param("x", object())


def _rewrite(path, edit):
    """Rewrite a model file with ``edit(header, arrays)`` applied."""
    with np.load(path) as npz:
        arrays = {k: npz[k] for k in npz.files}
    header = json.loads(arrays.pop("header").tobytes())
    edit(header, arrays)
    header["arrays"] = {k: {"shape": list(a.shape), "dtype": a.dtype.str}
                        for k, a in arrays.items()}
    blob = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
    np.savez(path, header=blob, **arrays)


def _layout_edit(mutate):
    def edit(header, arrays):
        mutate(header["attributes"], arrays)
    return edit


@pytest.mark.parametrize("mutate, match", [
    (lambda a, r: a["fields"].pop(), "fields .* do not match its parameters"),
    (lambda a, r: a["fields"][1].__setitem__(3, 7), "does not follow the previous one"),
    (lambda a, r: a["fields"].__setitem__(0, "x"), "malformed field"),
    (lambda a, r: a.pop("fields"), "no field layout"),
    (lambda a, r: a.__setitem__("category_names", [1]), "no valid category_names"),
    (lambda a, r: r.__setitem__("categories_0", r["categories_0"][::-1].copy()),
     "sorted 1-D array of unique"),
    (lambda a, r: r.__setitem__("categories_0", r["categories_0"][:-1].copy()),
     "has 4 columns but not as many categories"),
    (lambda a, r: r.__setitem__("user_rows_indices", r["user_rows_indices"] + 50),
     "columns outside"),
    (lambda a, r: r.__setitem__("user_rows_indptr", r["user_rows_indptr"][::-1].copy()),
     "not a valid CSR index"),
    (lambda a, r: r.__setitem__("item_rows_data", r["item_rows_data"] * np.nan),
     "NaN or infinity"),
    (lambda a, r: r.__setitem__("item_rows_data", r["item_rows_data"].astype(np.float32)),
     "dtype float32, expected float64"),
    (lambda a, r: r.pop("item_rows_data"), r"lacks the arrays \['item_rows_data'\]"),
    (lambda a, r: a.__setitem__("side_widths", [1, 2]), "side widths"),
    (lambda a, r: r.__setitem__("feature_names", r["feature_names"][::-1].copy()),
     "names its input columns"),
])
def test_corrupt_encoder_file(tmp_path, mutate, match):
    path = tmp_path / "enc.npz"
    _full_encoder().save(path)
    _rewrite(path, _layout_edit(mutate))
    with pytest.raises(ModelFileError, match=match):
        polylite.load(path)


@pytest.mark.parametrize("edit, match", [
    (lambda h, r: h.__setitem__("steps", []), "no valid list of steps"),
    (lambda h, r: h["steps"][1].__setitem__("name", h["steps"][0]["name"]),
     "no valid, unique name"),
    (lambda h, r: r.__setitem__("7/x", np.zeros(1)), "arrays of no step"),
    (lambda h, r: h.__setitem__("format_version", 99), "newer than this polylite"),
    (lambda h, r: h["steps"][1].__setitem__("class", "Nope"), "unknown estimator class"),
])
def test_corrupt_pipeline_file(tmp_path, edit, match):
    pipe = make_pipeline(FieldEncoder(), FactorizationMachineRegressor(max_iter=2))
    pipe.fit(RATINGS, np.arange(4.0))
    path = tmp_path / "pipe.npz"
    polylite.save(pipe, path)
    _rewrite(path, edit)
    with pytest.raises(ModelFileError, match=match):
        polylite.load(path)


def test_pipeline_arrays_are_stored_per_step(tmp_path):
    pipe = make_pipeline(FieldEncoder(), FactorizationMachineRegressor(max_iter=2))
    pipe.fit(RATINGS, np.arange(4.0))
    polylite.save(pipe, tmp_path / "p.npz")
    names = zipfile.ZipFile(tmp_path / "p.npz").namelist()
    assert "0/categories_0.npy" in names and "1/P.npy" in names
