"""Hardening of model files: crafted files that cost memory or time without holding data,
parameters that size the model, paths that are not regular files, and models that fit but
could not be loaded.

Each crafted file is loaded under a cap on the address space (Linux) and with its memory
traced, so that a regression raises MemoryError, fast, instead of taking the machine's
memory; the FIFO is read in a thread that the test releases, so that no regression can
hang the suite.
"""
import contextlib
import io
import json
import os
import re
import threading
import warnings
import zipfile

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning
from sklearn.pipeline import make_pipeline

import polylite
from polylite import (BayesianFactorizationMachineClassifier,
                      BayesianFactorizationMachineOrdinalRegressor,
                      BayesianFactorizationMachineRegressor, FactorizationMachineClassifier,
                      FactorizationMachineRegressor, FieldEncoder,
                      MultiOutputPolynomialClassifier, MultiOutputPolynomialRegressor,
                      ModelFileError, OrdinalMcRankRegressor, PolynomialNetworkRegressor,
                      VariationalFactorizationMachineRegressor)
from polylite.polynomial import _base
from polylite.relational import RelationalMatrix

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

HUGE = 10**10  # elements declared by the crafted files: 37 GiB as strings of one character

# --------------------------------------------------------------------------------------
# helpers: small fitted models, crafted archives, loads under guard
# --------------------------------------------------------------------------------------


def _data(n=30, d=4, seed=0):
    rng = np.random.RandomState(seed)
    X = sp.random(n, d, density=0.6, format="csr", random_state=rng)
    return X, rng


def _saved(est, y, tmp_path, X=None, name="model.npz"):
    """Fit ``est`` on small data, save it; the file's path."""
    if X is None:
        X, _ = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est.fit(X, y)
    path = tmp_path / name
    polylite.save(est, path, exact=True)  # (the arrays as fitted, to be edited)
    return path


def _npy_bytes(array):
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, np.asarray(array), allow_pickle=False)
    return buffer.getvalue()


def _empty_member(shape, descr):
    """A .npy member declaring ``shape`` and ``descr`` over no data (its size is 0)."""
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buffer, {"descr": descr, "fortran_order": False, "shape": tuple(shape)})
    return buffer.getvalue()


def _rewrite(path, edit=None, empty=None):
    """Rewrite the model file ``path``: ``edit(header, arrays)`` changes its header and
    arrays in place; ``empty`` maps array names to (shape, dtype) of members written as
    headers over no data.  The header's table of arrays is made to agree."""
    with np.load(path, allow_pickle=False) as npz:
        arrays = {name: npz[name] for name in npz.files}
    header = json.loads(bytes(arrays.pop("header")).decode("utf-8"))
    if edit is not None:
        edit(header, arrays)
    members = {name: _npy_bytes(a) for name, a in arrays.items()}
    specs = {name: {"shape": list(a.shape), "dtype": a.dtype.str}
             for name, a in arrays.items()}
    for name, (shape, descr) in (empty or {}).items():
        members[name] = _empty_member(shape, descr)
        specs[name] = {"shape": list(shape), "dtype": np.dtype(descr).str}
    header["arrays"] = specs
    blob = np.frombuffer(json.dumps(header).encode("utf-8"), dtype=np.uint8)
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("header.npy", _npy_bytes(blob))
        for name, data in members.items():
            zf.writestr(f"{name}.npy", data)


@contextlib.contextmanager
def _address_space_limit(extra_bytes=2**30):
    """Let the process map at most ``extra_bytes`` more (Linux): an allocation beyond
    raises MemoryError at once.  Elsewhere, no limit."""
    try:
        import resource
        with open("/proc/self/statm") as f:
            used = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (ImportError, OSError, ValueError):
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = used + extra_bytes
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _assert_refused_cheaply(path, match, max_bytes=16 * 2**20):
    """load(path) raises ModelFileError matching ``match`` having allocated less than
    ``max_bytes`` (under a cap on the address space)."""
    import tracemalloc
    tracemalloc.start()
    try:
        with _address_space_limit():
            with pytest.raises(ModelFileError) as info:
                polylite.load(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert re.search(match, str(info.value)), str(info.value)
    assert peak < max_bytes, (peak, str(info.value))
    return str(info.value)


# --------------------------------------------------------------------------------------
# 1. dtypes of zero bytes: no bound on the number of elements
# --------------------------------------------------------------------------------------

ZERO_WIDTH = r"dtype <U0, whose elements take 0 bytes"


def test_classes_of_zero_width_dtype_are_refused(tmp_path):
    """A classifier file whose 'classes' member is <U0 with a declared length of 10^10
    passed the size check (10^10 x 0 bytes) and load allocated 37 GiB."""
    X, rng = _data()
    path = _saved(FactorizationMachineClassifier(max_iter=2), rng.randint(2, size=30),
                  tmp_path)
    _rewrite(path, lambda h, a: a.pop("classes"), empty={"classes": ((HUGE,), "<U0")})
    _assert_refused_cheaply(path, "'classes.npy' has " + ZERO_WIDTH)


def test_feature_names_of_zero_width_dtype_are_refused(tmp_path):
    """feature_names of dtype <U0 for n_features_in_ = 10^10 (its shape): 10^10 objects
    once converted."""
    X, rng = _data()
    path = _saved(FactorizationMachineRegressor(max_iter=2), rng.randn(30), tmp_path)

    def edit(header, arrays):
        header["attributes"]["n_features_in_"] = HUGE
    _rewrite(path, edit, empty={"feature_names": ((HUGE,), "<U0")})
    _assert_refused_cheaply(path, "'feature_names.npy' has " + ZERO_WIDTH)


RATINGS = {"user_id": np.array([1, 1, 2, 3]), "item_id": np.array(["b", "a", "a", "c"])}


def test_encoder_categories_of_zero_width_dtype_are_refused(tmp_path):
    path = tmp_path / "encoder.npz"
    FieldEncoder().fit(RATINGS).save(path)
    _rewrite(path, lambda h, a: a.pop("categories_0"),
             empty={"categories_0": ((HUGE,), "<U0")})
    _assert_refused_cheaply(path, "'categories_0.npy' has " + ZERO_WIDTH)


def test_encoder_numeric_block_of_huge_width_is_refused(tmp_path):
    """A numeric field whose layout declares 10^10 columns: nothing in the file has that
    size, and get_feature_names_out would have built 10^10 names."""
    path = tmp_path / "encoder.npz"
    table = dict(RATINGS, price=np.array([1.0, 2.0, 3.0, 4.0]))
    FieldEncoder(context_features={"price": "numeric"}).fit(table).save(path)

    def edit(header, arrays):
        header["attributes"]["fields"][-1][4] = HUGE
    _rewrite(path, edit)
    _assert_refused_cheaply(path, r"field 'price' is a numeric block of 9999999994 "
                                  r"columns, more than a FieldEncoder fits \(1048576\)")


def test_encoder_fit_refuses_a_numeric_block_it_could_not_load():
    from polylite.preprocessing import MAX_NUMERIC_WIDTH
    table = dict(RATINGS, block=np.zeros((4, MAX_NUMERIC_WIDTH + 1), dtype=np.float32))
    with pytest.raises(ValueError, match=r"numeric column 'block' is a block of 1048577 "
                                         r"columns, more than the 1048576"):
        FieldEncoder(context_features={"block": "numeric"}).fit(table)


# --------------------------------------------------------------------------------------
# 2. zero-size arrays with a huge other dimension
# --------------------------------------------------------------------------------------


def test_zero_size_basis_of_huge_length_is_refused(tmp_path):
    """A multi-output file with H and V of shape (10^10, 0) (no feature, no output) holds
    no data, yet load took 74 GiB in the norms of H's rows."""
    X, rng = _data()
    path = _saved(MultiOutputPolynomialRegressor(max_basis=3, random_state=0),
                  rng.randn(30, 2), tmp_path)

    def edit(header, arrays):
        header["params"]["fit_linear"] = False
        header["attributes"]["n_features_in_"] = 0
        del arrays["H"], arrays["V"]
        arrays["intercept"] = np.zeros(0)
    _rewrite(path, edit, empty={"H": ((HUGE, 0), "<f8"), "V": ((HUGE, 0), "<f8")})
    _assert_refused_cheaply(path, r"'H' and 'V' have 10000000000 basis vectors \(rows\) "
                                  r"after 3 iterations")


def test_file_of_a_model_larger_than_memory_is_refused(tmp_path, monkeypatch):
    """A factorization machine file of no feature and n_components = 2^31 - 1: its
    arrays are empty, and load allocated 16 GiB of output weights; now the bound of fit
    (the machine's memory) applies to a file's parameters too."""
    monkeypatch.setattr(_base, "_physical_memory", lambda: 2**30)
    X = RelationalMatrix([sp.csr_matrix((5, 0))])  # a model of 0 features fits
    path = _saved(FactorizationMachineRegressor(max_iter=2), np.arange(5.0), tmp_path,
                  X=X)
    k = 2**31 - 1

    def edit(header, arrays):
        header["params"]["n_components"] = k
        arrays["P"] = np.zeros((1, 1, 0, k))
        arrays["gamma"] = np.zeros((1, 0, k))
    _rewrite(path, edit)
    _assert_refused_cheaply(path, r"n_components=2147483647 asks for 16\.0 GiB .*"
                                  r"\(1\.0 GiB\)")


# --------------------------------------------------------------------------------------
# 3. parameters that size the model: the bounds of fit, at fit and at load
# --------------------------------------------------------------------------------------

# lower_degrees="separate" has a factor block per degree: a file of another degree has
# arrays of the wrong shape, but its degree sized a list first.  "none" has one block.
DEGREE_FILES = [
    (FactorizationMachineRegressor(max_iter=2), "regressor", 2**31 - 1),
    (FactorizationMachineClassifier(lower_degrees="none", max_iter=2), "binary", 50),
    (PolynomialNetworkRegressor(max_iter=2), "regressor", 2**31 - 1),
    (PolynomialNetworkRegressor(max_iter=2), "regressor", 50),
    (BayesianFactorizationMachineRegressor(n_iter=3, n_burn_in=1, n_kept=2), "regressor",
     2**31 - 1),
    (BayesianFactorizationMachineClassifier(lower_degrees="none", n_iter=3, n_burn_in=1,
                                            n_kept=2), "binary", 50),
]


def _targets(kind, rng, n=30):
    return rng.randn(n) if kind == "regressor" else rng.randint(2, size=n)


@pytest.mark.parametrize("est, kind, degree", DEGREE_FILES,
                         ids=[f"{type(e).__name__}-{m}" for e, _, m in DEGREE_FILES])
def test_file_degree_beyond_the_features_is_refused(tmp_path, est, kind, degree):
    """degree = 2^31 - 1 passed the integer check: load built a list of 2 x 10^9
    degrees (FM and Bayesian FM files), a polynomial network's file loaded and its
    predict failed.  A file's degree now has the bound of fit: max(n_features, 5)."""
    X, rng = _data()
    path = _saved(est, _targets(kind, rng), tmp_path)
    _rewrite(path, lambda h, a: h["params"].__setitem__("degree", degree))
    _assert_refused_cheaply(path, f"degree={degree} exceeds n_features=4: .*use a degree "
                                  f"of at most 5")


@pytest.mark.parametrize("cls, degree", [
    (PolynomialNetworkRegressor, 2**31 - 1), (PolynomialNetworkRegressor, 50),
    (BayesianFactorizationMachineRegressor, 2**31 - 1),
    (BayesianFactorizationMachineRegressor, 50),
    (FactorizationMachineRegressor, 2**31 - 1)])
def test_fit_degree_beyond_the_features_is_refused(cls, degree):
    """The bound of the factorization machines (degree <= max(n_features, 5)) for the
    polynomial networks and the Bayesian FMs too, checked before the degree sizes
    anything (degree 2^31 - 1 took all the memory in every family)."""
    X, rng = _data()
    est = cls(degree=degree)
    with _address_space_limit(), pytest.raises(ValueError, match=f"degree={degree} "
                                                r"exceeds n_features=4"):
        est.fit(X, rng.randn(30))


def test_fit_degree_up_to_five_on_few_features_still_fits():
    X, rng = _data(d=2)
    y = rng.randn(30)
    PolynomialNetworkRegressor(degree=5, max_iter=2).fit(X, y)
    BayesianFactorizationMachineRegressor(degree=5, n_iter=3, n_burn_in=1).fit(X, y)


@pytest.mark.parametrize("cls", [BayesianFactorizationMachineRegressor,
                                 BayesianFactorizationMachineClassifier])
def test_bayesian_model_larger_than_memory_is_refused(cls, monkeypatch):
    """The memory bound of the FMs for the Bayesian FMs: their kept samples (n_kept of
    them, here 4 of 10^8 components) are refused as a ValueError, not allocated."""
    monkeypatch.setattr(_base, "_physical_memory", lambda: 2**30)
    X, rng = _data(d=5)
    est = cls(n_components=10**8, n_iter=5, n_burn_in=1, n_kept=4)
    with _address_space_limit(), pytest.raises(
            ValueError, match=r"n_components=100000000 asks for .* GiB .*\(1, 4, 1, 5, "
                              r"100000000\).* \(1\.0 GiB\); use fewer components or kept "
                              r"samples"):
        est.fit(X, rng.randint(2, size=30))


# --------------------------------------------------------------------------------------
# 4. paths that are not regular files, paths of the wrong type, pipeline array names
# --------------------------------------------------------------------------------------


def _load_in_thread(path, timeout=10.0):
    """load(path) in a thread; (whether it returned in time, its exception or result).
    A load still blocked opening a FIFO is released by opening its writing end."""
    outcome = {}

    def run():
        try:
            outcome["result"] = polylite.load(path)
        except BaseException as exc:  # noqa: B902 - handed to the test
            outcome["result"] = exc
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout)
    blocked = thread.is_alive()
    for _ in range(10):  # each open of the reading end waits for a writer: release it
        if not thread.is_alive():
            break
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass
        thread.join(0.5)
    return not blocked, outcome.get("result")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")
def test_fifo_is_refused_without_blocking(tmp_path):
    """load on a FIFO waited forever for a writer.  The same check refuses devices
    (load('/dev/zero') read until memory ran out), untested: a regression would run away
    in the test process."""
    path = tmp_path / "model.npz"
    os.mkfifo(path)
    returned, result = _load_in_thread(path)
    assert returned, "load blocked on a FIFO"
    assert isinstance(result, ModelFileError), result
    assert "not a regular file" in str(result)


def test_bytes_path_is_a_type_error(tmp_path):
    """load(b'path') raised AttributeError ('bytes' object has no attribute 'seek')."""
    X, rng = _data()
    path = _saved(FactorizationMachineRegressor(max_iter=2), rng.randn(30), tmp_path)
    est = polylite.load(path)
    with pytest.raises(TypeError, match="path must be a str or a path-like object .*not "
                                        "bytes"):
        polylite.load(os.fsencode(path))
    with pytest.raises(TypeError, match="not bytes"):
        polylite.save(est, os.fsencode(path))
    with pytest.raises(TypeError, match="not int"):
        polylite.load(3)


@pytest.mark.parametrize("key", ["0", "1"])
def test_pipeline_array_name_without_step_is_refused(tmp_path, key):
    """A pipeline file whose array name lacks '/' raised IndexError."""
    pipe = make_pipeline(FieldEncoder(), FactorizationMachineRegressor(max_iter=2))
    pipe.fit(RATINGS, np.arange(4.0))
    path = tmp_path / "pipe.npz"
    polylite.save(pipe, path)
    _rewrite(path, lambda h, a: a.__setitem__(key, np.zeros(1)))
    _assert_refused_cheaply(path, f"arrays of no step: '{key}' is not named "
                                  f"'<step index>/<array name>'")


# --------------------------------------------------------------------------------------
# 5. every model that fits loads: models of zero basis vectors, of zero features
# --------------------------------------------------------------------------------------

ZERO_BASIS = [
    (MultiOutputPolynomialRegressor, lambda n: np.zeros((n, 2))),
    (MultiOutputPolynomialRegressor, lambda n: np.zeros(n)),
    (MultiOutputPolynomialClassifier, lambda n: np.arange(n) % 3),
    (OrdinalMcRankRegressor, lambda n: 1 + np.arange(n) % 4),
]


@pytest.mark.parametrize("cls, targets", ZERO_BASIS,
                         ids=["regressor-2d", "regressor-1d", "classifier", "ordinal"])
def test_model_of_zero_basis_vectors_round_trips(tmp_path, cls, targets):
    """fit_linear=False on targets of zeros (or on rows of zeros): the conditional
    gradient stops before its first iteration, with no basis vector and no history;
    such a model saved but failed to load ("invalid history table []")."""
    X, _ = _data()
    if cls is not MultiOutputPolynomialRegressor:
        X = sp.csr_matrix(X.shape)  # rows of zeros: no basis vector can help
    est = cls(fit_linear=False, max_basis=3, random_state=0)
    path = _saved(est, targets(X.shape[0]), tmp_path, X=X)
    assert est.H_.shape[0] == 0 and est.history_ == {}
    loaded = polylite.load(path)
    assert loaded.H_.shape == est.H_.shape and loaded.history_ == {}
    for method in ("predict", "decision_function", "predict_proba"):
        if hasattr(est, method):
            np.testing.assert_array_equal(getattr(loaded, method)(X),
                                          getattr(est, method)(X), err_msg=method)
    # And it continues: a warm start from the loaded model.
    loaded.set_params(warm_start=True).fit(X, targets(X.shape[0]))


@pytest.mark.parametrize("est", [FactorizationMachineRegressor(max_iter=2),
                                 BayesianFactorizationMachineRegressor(n_iter=3,
                                                                       n_burn_in=1)],
                         ids=lambda e: type(e).__name__)
def test_model_of_zero_features_round_trips(tmp_path, est):
    """Relational rows of no column fit (an intercept); the bounds of a file's
    parameters (degree <= max(n_features, 5), memory) keep them loadable."""
    X = RelationalMatrix([sp.csr_matrix((5, 0))])
    path = _saved(est, np.arange(5.0), tmp_path, X=X)
    np.testing.assert_array_equal(polylite.load(path).predict(X), est.predict(X))


# --------------------------------------------------------------------------------------
# 6. finite parameters whose predictions overflow
# --------------------------------------------------------------------------------------

def _huge(name):
    """An edit setting every value of array ``name`` to 1e300."""
    return lambda h, a: a.__setitem__(name, np.full_like(a[name], 1e300))


def _huge_aligned_outputs(header, arrays):
    """A multi-output model whose basis vectors are all the direction of the first row
    of ``_data()`` (with its constant), their output weights 1e308."""
    X, _ = _data()
    x = np.append(X[0].toarray().ravel(), 1.0)
    arrays["H"] = np.tile(x / np.linalg.norm(x), (arrays["H"].shape[0], 1))
    arrays["V"] = np.full_like(arrays["V"], 1e308)


HUGE_PARAMETERS = [
    (FactorizationMachineRegressor(max_iter=2), "regressor", _huge("P")),
    (FactorizationMachineClassifier(max_iter=2), "binary", _huge("P")),
    (PolynomialNetworkRegressor(max_iter=2), "regressor", _huge("P")),
    (BayesianFactorizationMachineRegressor(n_iter=3, n_burn_in=1), "regressor",
     _huge("P_samples")),
    (MultiOutputPolynomialRegressor(max_basis=3, random_state=0), "regressor",
     _huge_aligned_outputs),
]


# NumPy may warn of the overflow before the estimator raises (the multi-output models).
@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
@pytest.mark.parametrize("est, kind, edit", HUGE_PARAMETERS,
                         ids=[type(e).__name__ for e, _, _ in HUGE_PARAMETERS])
def test_huge_finite_parameters_never_predict_infinity(tmp_path, est, kind, edit):
    """A file with P = 1e300 loaded and predicted inf without a word.  Finite values
    load (whether a prediction overflows depends on X as much as on them); predicting
    raises FloatingPointError where the outputs overflow."""
    X, rng = _data()
    path = _saved(est, _targets(kind, rng), tmp_path)
    _rewrite(path, edit)
    loaded = polylite.load(path)
    methods = [m for m in ("predict", "decision_function", "predict_proba")
               if hasattr(loaded, m)]
    for method in methods:
        with pytest.raises(FloatingPointError, match="not finite"):
            getattr(loaded, method)(X)


# --------------------------------------------------------------------------------------
# 7. ordinal and variational files whose predictions were NaN
# --------------------------------------------------------------------------------------

def _ordinal_levels(rng, n=30):
    return rng.randint(1, 4, n)


def test_ordinal_file_with_huge_cutpoints_predicts_numbers(tmp_path):
    """Increasing finite cutpoints up to 1.7e308 loaded, and predict/predict_proba gave
    NaN: intervals beyond the float64 tail have probability 0, the probabilities stay
    a distribution."""
    X, rng = _data()
    est = BayesianFactorizationMachineOrdinalRegressor(n_iter=6, n_burn_in=2,
                                                       random_state=0)
    path = _saved(est, _ordinal_levels(rng), tmp_path)

    def edit(header, arrays):
        cuts = arrays["cutpoints_samples"]
        cuts[..., 1] = 1.7e308
    _rewrite(path, edit)
    loaded = polylite.load(path)
    proba = loaded.predict_proba(X)
    assert np.all(np.isfinite(proba))
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert np.all(np.isfinite(loaded.predict(X)))


def test_ordinal_file_with_huge_outputs_predicts_numbers(tmp_path):
    """A sample whose outputs are finite but huge (intercept 1e300) put NaN in the middle
    levels' probabilities: the top level is certain."""
    X, rng = _data()
    est = BayesianFactorizationMachineOrdinalRegressor(n_iter=6, n_burn_in=2,
                                                       random_state=0)
    path = _saved(est, _ordinal_levels(rng), tmp_path)
    _rewrite(path, _huge("intercept_samples"))
    proba = polylite.load(path).predict_proba(X)
    np.testing.assert_array_equal(proba, np.tile([0.0, 0.0, 1.0], (X.shape[0], 1)))


def test_ordinal_file_with_huge_factors_raises(tmp_path):
    """A factor sample at 1.7e308 (finite) gave NaN: outputs that overflow raise, as the
    regressor's and the classifier's do."""
    X, rng = _data()
    est = BayesianFactorizationMachineOrdinalRegressor(n_iter=6, n_burn_in=2,
                                                       random_state=0)
    path = _saved(est, _ordinal_levels(rng), tmp_path)
    _rewrite(path, lambda h, a: a["P_samples"].__setitem__(..., 1.7e308))
    loaded = polylite.load(path)
    for method in (loaded.predict, loaded.predict_proba):
        with pytest.raises(FloatingPointError, match="not finite"):
            method(X)


def test_ordinal_file_of_string_levels_that_predicts_expected_levels_is_refused(tmp_path):
    """Levels of strings in a file whose model predicts the expected level loaded, then
    failed inside NumPy."""
    X, rng = _data()
    est = BayesianFactorizationMachineOrdinalRegressor(n_iter=6, n_burn_in=2,
                                                       prediction="expected",
                                                       random_state=0)
    path = _saved(est, _ordinal_levels(rng), tmp_path)
    _rewrite(path, lambda h, a: a.__setitem__("levels", np.array(["a", "b", "c"])))
    with pytest.raises(ModelFileError, match="levels.*not numbers"):
        polylite.load(path)


def test_ordinal_file_of_string_levels_predicts_them(tmp_path):
    X, rng = _data()
    est = BayesianFactorizationMachineOrdinalRegressor(n_iter=6, n_burn_in=2,
                                                       random_state=0)
    path = _saved(est, _ordinal_levels(rng), tmp_path)
    _rewrite(path, lambda h, a: a.__setitem__("levels", np.array(["a", "b", "c"])))
    assert set(polylite.load(path).predict(X)) <= {"a", "b", "c"}


def test_variational_file_with_huge_variance_raises_for_the_std(tmp_path):
    """A factor variance of 1e308 loaded, and predict(X, return_std=True) returned an
    all-NaN std."""
    X, rng = _data()
    est = VariationalFactorizationMachineRegressor(random_state=0)
    path = _saved(est, rng.randn(X.shape[0]), tmp_path)
    _rewrite(path, lambda h, a: a["P_var"].__setitem__(..., 1e308))
    loaded = polylite.load(path)
    assert np.all(np.isfinite(loaded.predict(X)))
    with pytest.raises(FloatingPointError, match="variances.*not finite"):
        loaded.predict(X, return_std=True)
