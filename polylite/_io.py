"""Pickle-free, versioned model files: a NumPy ``.npz`` archive with a JSON header.

The archive holds one uint8 array ``header`` (UTF-8 JSON) and the fitted arrays.  The
header names the format and its version, the estimator class, its parameters, the library
version, scalar fitted attributes and the shape and dtype of every array.  Loading refuses
object arrays from their ``.npy`` headers, reads with ``allow_pickle=False`` and only
instantiates classes from polylite's own registry, so a model file never executes code;
everything in it is checked before it is used.
"""
import importlib
import io
import json
import math
import numbers
import os
import secrets
import zipfile

import numpy as np

FORMAT_NAME = "polylite-model"
FORMAT_VERSION = 1

__all__ = ["load", "load_with_header", "read_archive", "save", "ModelFileError", "FORMAT_VERSION",
           "register_model", "check_array_names", "check_float_arrays"]


class ModelFileError(ValueError):
    """A file is not a valid polylite model (missing, truncated, foreign or inconsistent)."""


# Every class a model file may name, registered by its own module (``@register_model``):
# this module imports no estimator, so the families depend on it and not the reverse.
_MODEL_CLASSES = {}


def register_model(cls):
    """Class decorator: let :func:`load` instantiate ``cls`` by its name.

    A registered class implements ``_model_arrays()``, returning its fitted arrays and
    JSON-able scalar attributes as ``(arrays, attributes)``, and
    ``_restore_model(arrays, attributes)``, which checks them (raising
    :class:`ModelFileError` for anything inconsistent) and installs them on a fresh,
    unfitted instance.  The attributes every scikit-learn estimator shares
    (``n_features_in_``, ``feature_names_in_``, ``classes_``) are handled here.
    """
    _MODEL_CLASSES[cls.__name__] = cls
    return cls


def _model_classes():
    # Each family registers its classes when imported; the package imports them lazily.
    importlib.import_module("polylite")._import_model_modules()
    return dict(_MODEL_CLASSES)


def _json_param(name, value):
    if value is None or isinstance(value, (str, bool)):
        return value
    if isinstance(value, (np.bool_,)):
        return bool(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    if name == "random_state":
        # A RandomState instance has no portable form; the fitted model does not need it.
        return None
    if isinstance(value, dict) and all(isinstance(key, str) for key in value):
        return {key: _json_param(f"{name}[{key!r}]", v) for key, v in value.items()}
    if isinstance(value, (list, tuple)):  # restored as a list
        return [_json_param(f"{name}[{i}]", v) for i, v in enumerate(value)]
    if isinstance(value, type) and issubclass(value, np.generic) or \
            isinstance(value, np.dtype):  # a dtype parameter: restored as its name
        return np.dtype(value).name
    raise TypeError(f"cannot save parameter {name}={value!r}: only numbers, strings, "
                    f"booleans, None, NumPy dtypes, and lists and dicts (with str keys) "
                    f"of those are supported")


def _fitted_arrays(est, exact=False):
    arrays, meta = est._model_arrays()
    arrays, meta = dict(arrays), dict(meta)
    if not exact:  # a family may store a compact form that predicts as the model does
        compact = getattr(est, "_compact_model_arrays", None)
        if compact is not None:
            arrays, meta = compact(arrays, meta)
    clash = set(arrays) & {"header", "classes", "feature_names"}
    if clash:  # pragma: no cover - a family's programming error
        raise RuntimeError(f"{type(est).__name__} uses reserved array names {clash}")
    meta["n_features_in_"] = int(est.n_features_in_)
    if hasattr(est, "classes_"):
        classes = np.asarray(est.classes_)
        meta["classes_dtype"] = str(classes.dtype)
        if classes.dtype == object:
            if not all(isinstance(c, str) for c in classes):
                raise TypeError("cannot save classes_ of mixed Python objects; use "
                                "numbers or strings as class labels")
            classes = classes.astype(str)
        arrays["classes"] = classes
    if hasattr(est, "feature_names_in_"):
        arrays["feature_names"] = np.asarray(est.feature_names_in_).astype(str)
    return arrays, meta


def _new_file(directory):
    """(descriptor, path) of a new file in ``directory`` with the permissions every tool
    gives (0666 less the umask: 0644 usually), not tempfile's private 0600."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    while True:
        path = os.path.join(directory, f".polylite-{secrets.token_hex(8)}.tmp")
        try:
            return os.open(path, flags, 0o666), path
        except FileExistsError:  # pragma: no cover - 64 random bits collided
            continue


def save_model(est, path, metadata=None, exact=False):
    """Write a fitted estimator to ``path`` (see module docstring); atomic on success.

    ``metadata``, a JSON-able dict, is stored in the header under "metadata" (the command
    line records there how its training file was read); :func:`load` ignores it.
    ``exact``: store every array as fitted, never the compact form of a family's
    ``_compact_model_arrays`` (see :func:`save`)."""
    header, arrays = _model_header(est, exact)
    if metadata is not None:
        header["metadata"] = metadata
    _write_archive(path, header, arrays)


def _saved_params(est):
    """The parameters a model file records: ``get_params``, or where a parameter has no
    portable form (a field-aware model's fields given as an encoder) the estimator's own
    ``_saved_params``."""
    own = getattr(est, "_saved_params", None)
    return own() if own is not None else est.get_params(deep=False)


def _model_header(est, exact=False):
    """The header entries (class, params, attributes) and the arrays of one fitted
    estimator."""
    from sklearn.utils.validation import check_is_fitted
    check_is_fitted(est)
    if _model_classes().get(type(est).__name__) is not type(est):
        raise TypeError(f"{type(est).__name__} cannot be saved by polylite")
    arrays, meta = _fitted_arrays(est, exact)
    header = {
        "class": type(est).__name__,
        "params": {k: _json_param(k, v) for k, v in _saved_params(est).items()},
        "attributes": meta,
    }
    return header, arrays


def _write_archive(path, header, arrays):
    """Write ``arrays`` and the JSON ``header`` (completed with the format, the versions
    and the table of the arrays) to ``path``, atomically."""
    from . import __version__
    header = {"format": FORMAT_NAME, "format_version": FORMAT_VERSION,
              "polylite_version": __version__, **header,
              "arrays": {k: {"shape": list(a.shape), "dtype": a.dtype.str}
                         for k, a in arrays.items()}}
    blob = np.frombuffer(json.dumps(header).encode("utf-8"), dtype=np.uint8)
    path = _file_path(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = _new_file(directory)
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, header=blob, **arrays)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


# A pipeline is saved as the list of its steps, each described as a single estimator
# is, with its arrays stored under "<step index>/<array name>".
PIPELINE_CLASS = "Pipeline"


def save(estimator, path, *, exact=False):
    """Save a fitted polylite estimator, or a pipeline of them, pickle-free.

    A Bayesian factorization machine's kept samples are stored in float32 unless
    ``exact``, in half the space: the loaded model's predictions differ from the saved
    one's by the samples' rounding, within a relative 1e-6 (absolute near 0; about 1e-8
    on MovieLens).  ``fit`` checks that bound on up to 1,000 of its training rows; a
    model whose predictions the rounding would move more (large terms that cancel)
    keeps its samples in float64.  Every other array, and every other model, is stored
    exactly.

    A :class:`~sklearn.pipeline.Pipeline` whose steps are all polylite estimators or
    transformers (for instance a :class:`~polylite.preprocessing.FieldEncoder` followed
    by a factorization machine) is saved as one file, step by step; :func:`load` returns
    an equal pipeline.

    Parameters
    ----------
    estimator : polylite estimator or sklearn.pipeline.Pipeline
        Fitted.
    path : str or path-like
        Destination file (NumPy ``.npz`` archive with a JSON header).
    exact : bool, default=False
        Store every array as fitted (a Bayesian model's samples in float64), so that the
        loaded model replays the saved one's predictions bit for bit.

    Raises
    ------
    TypeError
        If the estimator, or a step of the pipeline, is not a polylite class.
    """
    from sklearn.pipeline import Pipeline
    if not isinstance(estimator, Pipeline):
        save_model(estimator, path, exact=exact)
        return
    if estimator.memory is not None:
        raise TypeError("cannot save a pipeline with a memory (cache) setting")
    steps, arrays = [], {}
    for i, (name, step) in enumerate(estimator.steps):
        if step is None or step == "passthrough":
            raise TypeError(f"cannot save pipeline step {name!r}: it is {step!r}")
        header, step_arrays = _model_header(step, exact)
        steps.append(dict(header, name=name))
        arrays.update({f"{i}/{key}": a for key, a in step_arrays.items()})
    _write_archive(path, {"class": PIPELINE_CLASS, "steps": steps,
                          "verbose": bool(estimator.verbose)}, arrays)


def _load_pipeline(header, arrays):
    """A pipeline from the header of :func:`save`."""
    from sklearn.pipeline import Pipeline
    steps = header.get("steps")
    if not isinstance(steps, list) or not steps or not all(isinstance(s, dict)
                                                           for s in steps):
        raise ModelFileError("pipeline file has no valid list of steps")
    indices = {str(i) for i in range(len(steps))}
    for key in arrays:
        index, _, array_name = key.partition("/")
        if index not in indices or not array_name:
            raise ModelFileError(f"pipeline file has arrays of no step: {key!r} is not "
                                 f"named '<step index>/<array name>' with a step index "
                                 f"from 0 to {len(steps) - 1}")
    built = []
    for i, step in enumerate(steps):
        name = step.get("name")
        if not isinstance(name, str) or name in dict(built):
            raise ModelFileError(f"pipeline step {i} has no valid, unique name")
        step_arrays = {key.partition("/")[2]: a for key, a in arrays.items()
                       if key.partition("/")[0] == str(i)}
        built.append((name, _instantiate(step, step_arrays)))
    return Pipeline(built, verbose=bool(header.get("verbose", False)))


_ZIP_MAGIC = b"PK\x03\x04"
# The JSON header holds parameters and array descriptions: kilobytes, not megabytes.
_MAX_HEADER_BYTES = 16 * 2**20
# A .npy header is padded to at most 64 KiB; NumPy refuses longer ones by default.
_MAX_NPY_HEADER_BYTES = 2**16
# save() stores members uncompressed, so a member's data is in the file.  A member that
# someone compressed may expand at most this many times (real parameters compress
# little), beyond the first MiB: a small file never costs gigabytes (a zip bomb).
_MAX_EXPANSION = 100
_FREE_EXPANSION_BYTES = 2**20


def _npy_header(stream):
    """(shape, dtype) from the ``.npy`` header at the start of ``stream``."""
    version = np.lib.format.read_magic(stream)
    if version == (1, 0):
        shape, _, dtype = np.lib.format.read_array_header_1_0(stream)
    elif version == (2, 0):
        shape, _, dtype = np.lib.format.read_array_header_2_0(stream)
    else:
        raise ValueError(f"unsupported .npy format version {version}")
    return shape, dtype


def _members(zf, path):
    """Name -> ZipInfo of every member, checked without reading any."""
    members = {}
    stored = sum(info.compress_size for info in zf.infolist())
    if stored > os.path.getsize(path):
        # Members' data cannot overlap nor lie beyond the end of the file.
        raise ModelFileError(f"{path!r} is truncated or corrupt: its members claim "
                             f"{stored} bytes of data in a file of "
                             f"{os.path.getsize(path)} bytes")
    for info in zf.infolist():
        name = info.filename
        if name in members:
            raise ModelFileError(f"{path!r} holds two members named {name!r}; a model file "
                                 f"names each array once")
        if info.flag_bits & 0x1:
            raise ModelFileError(f"{path!r}: member {name!r} is encrypted")
        if info.compress_type == zipfile.ZIP_STORED:
            if info.compress_size != info.file_size:
                raise ModelFileError(f"{path!r} is truncated or corrupt: member {name!r} "
                                     f"is stored in {info.compress_size} bytes but "
                                     f"declares {info.file_size}")
        elif info.file_size > max(_MAX_EXPANSION * info.compress_size,
                                  _FREE_EXPANSION_BYTES):
            raise ModelFileError(
                f"{path!r}: member {name!r} would expand from {info.compress_size} to "
                f"{info.file_size} bytes, more than {_MAX_EXPANSION} times (a zip bomb?); "
                f"polylite never writes compressed members")
        members[name] = info
    return members


def _array_layout(zf, info, path):
    """(shape, dtype) of a member from its ``.npy`` header, checked against the member's
    declared size; reads at most the header's bytes."""
    with zf.open(info) as member:
        head = io.BytesIO(member.read(min(info.file_size, _MAX_NPY_HEADER_BYTES)))
    shape, dtype = _npy_header(head)
    if dtype.hasobject:
        raise ModelFileError(f"{path!r}: member {info.filename!r} holds Python objects "
                             f"(pickled data), which polylite never loads")
    if dtype.itemsize == 0:
        # Its elements would take no bytes of the file, so their number would be bounded
        # by nothing: 10**10 strings of dtype <U0 are 37 GiB once converted.
        raise ModelFileError(f"{path!r}: member {info.filename!r} has dtype {dtype}, "
                             f"whose elements take 0 bytes; a model file's arrays "
                             f"never do")
    n_bytes = math.prod(shape) * dtype.itemsize
    if head.tell() + n_bytes != info.file_size:
        raise ModelFileError(
            f"{path!r} is truncated or corrupt: member {info.filename!r} declares an "
            f"array of shape {shape} and dtype {dtype} ({n_bytes} bytes) in "
            f"{info.file_size - head.tell()} bytes of data")
    return shape, dtype


def _read_array(zf, info):
    with zf.open(info) as member:
        return np.lib.format.read_array(member, allow_pickle=False)


def _read_header(zf, members, path):
    """The JSON header of a model file (member ``header.npy``)."""
    info = members.get("header.npy")
    if info is None:
        raise ModelFileError(f"{path!r} is not a polylite model file (no header)")
    shape, dtype = _array_layout(zf, info, path)
    if dtype != np.uint8 or len(shape) != 1:
        raise ModelFileError(f"{path!r} is not a polylite model file (its header is not "
                             f"an array of UTF-8 bytes)")
    if info.file_size > _MAX_HEADER_BYTES:
        raise ModelFileError(f"{path!r}: its header takes {info.file_size} bytes, more "
                             f"than a model's header ever needs ({_MAX_HEADER_BYTES})")
    try:
        header = json.loads(_read_array(zf, info).tobytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise ModelFileError(f"{path!r} has an unreadable header: {exc}") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT_NAME:
        raise ModelFileError(f"{path!r} is not a polylite model file (foreign header)")
    return header


def _check_format_version(header):
    version = header.get("format_version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ModelFileError(f"model file has no valid format_version (got {version!r})")
    if version > FORMAT_VERSION:
        raise ModelFileError(
            f"model file has format version {version}, newer than this polylite reads "
            f"(up to {FORMAT_VERSION}; written by polylite "
            f"{header.get('polylite_version')}): upgrade polylite")


def _declared_arrays(header, members):
    """The array table of the header, checked against the members' names: name -> spec
    with a shape (list of non-negative ints) and a dtype (string)."""
    declared = header.get("arrays")
    if not isinstance(declared, dict):
        raise ModelFileError("model file header has no table of its arrays")
    for key, spec in declared.items():
        shape = spec.get("shape") if isinstance(spec, dict) else None
        if not (isinstance(shape, list) and all(_is_int(n) and n >= 0 for n in shape)
                and isinstance(spec.get("dtype"), str)):
            raise ModelFileError(f"model file header describes array {key!r} by {spec!r}, "
                                 f"not by its shape and dtype")
    expected = {f"{key}.npy" for key in declared} | {"header.npy"}
    unexpected = sorted(set(members) - expected)
    if unexpected:
        raise ModelFileError(f"model file has unexpected members {unexpected}, which its "
                             f"header does not declare")
    missing = sorted(expected - set(members))
    if missing:
        raise ModelFileError(f"model file lacks the members {missing} which its header "
                             f"declares")
    return declared


def _file_path(path):
    """``path`` (a str or an os.PathLike giving one) as a str; TypeError otherwise."""
    try:
        name = os.fspath(path)
    except TypeError:
        name = None
    if isinstance(name, bytes):
        raise TypeError(f"a model file's path must be a str or a path-like object such "
                        f"as pathlib.Path, not bytes ({path!r}): decode it, for "
                        f"instance with os.fsdecode")
    if not isinstance(name, str):
        raise TypeError(f"a model file's path must be a str or a path-like object such "
                        f"as pathlib.Path, not {type(path).__name__}")
    return name


def _read_archive(path):
    """The header and the arrays of a model file; never unpickles anything.

    Everything is checked before an array is allocated: the members' names (unique, each
    declared by the header), their declared sizes against the header's shapes and dtypes
    and the bytes stored, so a crafted file costs no more memory than the model it
    declares, and at most about its own size.
    """
    path = _file_path(path)
    if not os.path.exists(path):
        raise ModelFileError(f"no model file at {path!r}")
    if not os.path.isfile(path):
        # A directory, a device such as /dev/zero (read until memory runs out) or a FIFO
        # (opening it waits for a writer, forever).
        raise ModelFileError(f"{path!r} is not a polylite model file (not a regular "
                             f"file)")
    if not zipfile.is_zipfile(path):
        try:
            with open(path, "rb") as f:
                looks_like_zip = f.read(4) == _ZIP_MAGIC
        except OSError:
            looks_like_zip = False
        if looks_like_zip:
            raise ModelFileError(f"{path!r} is truncated or corrupt (an incomplete .npz "
                                 f"archive)")
        raise ModelFileError(f"{path!r} is not a polylite model file (not an .npz archive)")
    try:
        with zipfile.ZipFile(path) as zf:
            members = _members(zf, path)
            header = _read_header(zf, members, path)
            _check_format_version(header)
            declared = _declared_arrays(header, members)
            for key, spec in declared.items():
                shape, dtype = _array_layout(zf, members[f"{key}.npy"], path)
                if list(shape) != spec["shape"] or dtype.str != spec["dtype"]:
                    raise ModelFileError(f"array {key!r} has shape {shape} and dtype "
                                         f"{dtype}, but the header says {spec}")
            arrays = {key: _read_array(zf, members[f"{key}.npy"]) for key in declared}
    except ModelFileError:
        raise
    except (zipfile.BadZipFile, EOFError, OSError, ValueError, KeyError,
            NotImplementedError) as exc:
        raise ModelFileError(f"{path!r} is truncated or corrupt: {exc}") from None
    return header, arrays


def read_archive(path):
    """The JSON header (a dict) and the arrays (name -> ndarray) of the model file at
    ``path``, checked as :func:`load` checks them, without building the estimator: what
    ``polylite info`` describes.  Raises :class:`ModelFileError` as :func:`load` does for
    a file that is not a complete polylite model file."""
    return _read_archive(path)


def load(path):
    """Load a model saved by ``estimator.save(path)`` or :func:`save`.

    Parameters
    ----------
    path : str or path-like

    Returns
    -------
    estimator : polylite estimator or sklearn.pipeline.Pipeline
        Fitted, predicting exactly as the saved one did.

    Raises
    ------
    ModelFileError
        (a ValueError) if the file is missing, not a regular file, truncated, not a
        polylite model, written by a newer format version, or inconsistent (unknown class
        or parameters, parameters that ``fit`` refuses, arrays of the wrong shape or
        dtype, non-finite values, unsorted classes, pickled object arrays).
    TypeError
        If ``path`` is not a str or path-like object (bytes, a file object).
    """
    return load_with_header(path)[0]


def load_with_header(path):
    """:func:`load`, also returning the file's JSON header (a dict: ``format_version``,
    ``polylite_version``, ``class``, ``params``, ``arrays`` (their shapes and dtypes),
    and ``metadata`` when the writer gave some)."""
    header, arrays = _read_archive(path)
    if header.get("class") == PIPELINE_CLASS:
        return _load_pipeline(header, arrays), header
    return _instantiate(header, arrays), header


def _instantiate(header, arrays):
    """The estimator a header (or a pipeline step's) and its arrays describe, everything
    checked."""
    classes = _model_classes()
    name = header.get("class")
    if name not in classes:
        raise ModelFileError(f"model file names an unknown estimator class {name!r}")
    cls = classes[name]
    params = header.get("params")
    if not isinstance(params, dict):
        raise ModelFileError("model file has no parameter table")
    known = set(cls().get_params(deep=False))
    unknown = set(params) - known
    if unknown:
        raise ModelFileError(f"model file has unknown parameters for {name}: "
                             f"{sorted(unknown)}")
    try:
        est = cls(**params)
        est._check_params()
    except (ValueError, TypeError) as exc:
        raise ModelFileError(f"model file has invalid parameters: {exc}") from None
    if not isinstance(header.get("attributes"), dict):
        raise ModelFileError("model file header has no attribute table (n_features_in_)")
    meta = dict(header["attributes"])
    _install_common(est, meta, arrays)
    try:
        est._restore_model(arrays, meta)
    except ModelFileError:
        raise
    except (ValueError, TypeError, KeyError) as exc:
        raise ModelFileError(f"model file is inconsistent: {exc}") from None
    return est


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _install_common(est, meta, arrays):
    """n_features_in_, feature_names_in_ and classes_; removes their entries so that
    ``arrays`` and ``meta`` keep only the family's own."""
    d = meta.pop("n_features_in_", None)
    if not _is_int(d) or d < 0:
        raise ModelFileError(f"model file has no valid n_features_in_ (got {d!r})")
    est.n_features_in_ = d
    if "feature_names" in arrays:
        names = arrays.pop("feature_names")
        if names.dtype.kind != "U" or names.shape != (d,):
            raise ModelFileError(f"array 'feature_names' must hold {d} strings, got shape "
                                 f"{names.shape} and dtype {names.dtype}")
        est.feature_names_in_ = names.astype(object)
    kind = meta.pop("classes_dtype", None)
    is_classifier = getattr(est, "_is_classifier", False)
    if "classes" in arrays and not is_classifier:
        raise ModelFileError(f"model file has unexpected arrays ['classes'] for "
                             f"{type(est).__name__}")
    if "classes" in arrays:
        classes = arrays.pop("classes")
        _check_classes(classes, kind)
        est.classes_ = classes.astype(kind if kind is not None else classes.dtype.str)
    elif is_classifier:
        raise ModelFileError("model file lacks the arrays ['classes']")


def check_array_names(arrays, required, optional=(), owner=""):
    """Raise ModelFileError unless ``arrays`` holds every ``required`` name and nothing
    beyond ``optional``."""
    missing = set(required) - set(arrays)
    if missing:
        raise ModelFileError(f"model file lacks the arrays {sorted(missing)}")
    unexpected = set(arrays) - set(required) - set(optional)
    if unexpected:
        raise ModelFileError(f"model file has unexpected arrays {sorted(unexpected)}" +
                             (f" for {owner}" if owner else ""))


def check_float_arrays(arrays, expected, dtype):
    """Each array named in ``expected`` has that shape, ``dtype`` (float32/float64) and
    only finite values."""
    if np.dtype(dtype) not in (np.float32, np.float64):
        raise ModelFileError(f"parameters have dtype {np.dtype(dtype)}; expected float32 "
                             f"or float64")
    for key, shape in expected.items():
        a = arrays[key]
        if a.shape != tuple(shape):
            raise ModelFileError(f"array {key!r} has shape {a.shape}; the model's "
                                 f"parameters require {tuple(shape)}")
        if a.dtype != dtype:
            raise ModelFileError(f"array {key!r} has dtype {a.dtype}, expected {dtype}")
        if not np.all(np.isfinite(a)):
            raise ModelFileError(f"array {key!r} contains NaN or infinity")


def _check_classes(classes, kind):
    """Class labels: 1-D, at least two, sorted and unique (the order of ``classes_``)."""
    if classes.ndim != 1 or classes.dtype.kind not in "biufU":
        raise ModelFileError(f"array 'classes' must be a 1-D array of numbers or strings, "
                             f"got shape {classes.shape} and dtype {classes.dtype}")
    if classes.shape[0] < 2:
        raise ModelFileError(f"model file has {classes.shape[0]} classes; a classifier "
                             f"has at least two")
    if classes.dtype.kind == "f" and not np.all(np.isfinite(classes)):
        raise ModelFileError("array 'classes' contains NaN or infinity")
    if not np.array_equal(np.unique(classes), classes):
        raise ModelFileError("array 'classes' is not sorted and unique, as classes_ is")
    if kind is None:
        kind = classes.dtype.str
    try:
        dtype = np.dtype(kind) if isinstance(kind, str) else None
    except TypeError:
        dtype = None
    if dtype is None or not (dtype == object or dtype == classes.dtype):
        raise ModelFileError(f"model file has an invalid classes_dtype {kind!r} for "
                             f"classes of dtype {classes.dtype}")
