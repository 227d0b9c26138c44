"""Pickle-free, versioned model files: a NumPy ``.npz`` archive with a JSON header.

The archive holds one uint8 array ``header`` (UTF-8 JSON) and the fitted arrays.  The
header names the format and its version, the estimator class, its parameters, the library
version, scalar fitted attributes and the shape and dtype of every array.  Loading refuses
object arrays from their ``.npy`` headers, reads with ``allow_pickle=False`` and only
instantiates classes from polylite's own registry, so a model file never executes code;
everything in it is checked before it is used.
"""
import json
import numbers
import os
import tempfile
import zipfile

import numpy as np

FORMAT_NAME = "polylite-model"
FORMAT_VERSION = 1

__all__ = ["load", "save", "ModelFileError", "FORMAT_VERSION", "register_model",
           "check_array_names", "check_float_arrays"]


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
    import polylite  # noqa: F401  (importing the package registers every family)
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


def _fitted_arrays(est):
    arrays, meta = est._model_arrays()
    arrays, meta = dict(arrays), dict(meta)
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


def save_model(est, path):
    """Write a fitted estimator to ``path`` (see module docstring); atomic on success."""
    header, arrays = _model_header(est)
    _write_archive(path, dict(header, format=FORMAT_NAME, format_version=FORMAT_VERSION),
                   arrays)


def _model_header(est):
    """The header entries (class, params, attributes, arrays) and arrays of one
    fitted estimator."""
    from sklearn.utils.validation import check_is_fitted
    check_is_fitted(est)
    if _model_classes().get(type(est).__name__) is not type(est):
        raise TypeError(f"{type(est).__name__} cannot be saved by polylite")
    arrays, meta = _fitted_arrays(est)
    header = {
        "class": type(est).__name__,
        "params": {k: _json_param(k, v) for k, v in est.get_params(deep=False).items()},
        "attributes": meta,
        "arrays": {k: {"shape": list(a.shape), "dtype": a.dtype.str}
                   for k, a in arrays.items()},
    }
    return header, arrays


def _write_archive(path, header, arrays):
    """Write ``arrays`` and the JSON ``header`` to ``path``, atomically."""
    from . import __version__
    header = dict(header, polylite_version=__version__)
    blob = np.frombuffer(json.dumps(header).encode("utf-8"), dtype=np.uint8)
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".polylite-", suffix=".tmp")
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


def save(estimator, path):
    """Save a fitted polylite estimator, or a pipeline of them, pickle-free.

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

    Raises
    ------
    TypeError
        If the estimator, or a step of the pipeline, is not a polylite class.
    """
    from sklearn.pipeline import Pipeline
    if not isinstance(estimator, Pipeline):
        save_model(estimator, path)
        return
    if estimator.memory is not None:
        raise TypeError("cannot save a pipeline with a memory (cache) setting")
    steps, arrays = [], {}
    for i, (name, step) in enumerate(estimator.steps):
        if step is None or step == "passthrough":
            raise TypeError(f"cannot save pipeline step {name!r}: it is {step!r}")
        header, step_arrays = _model_header(step)
        steps.append(dict(header, name=name))
        arrays.update({f"{i}/{key}": a for key, a in step_arrays.items()})
    _write_archive(path, {"format": FORMAT_NAME, "format_version": FORMAT_VERSION,
                          "class": PIPELINE_CLASS, "steps": steps,
                          "verbose": bool(estimator.verbose)}, arrays)


def _load_pipeline(header, arrays):
    """A pipeline from the header of :func:`save` (its format version checked)."""
    from sklearn.pipeline import Pipeline
    steps = header.get("steps")
    if not isinstance(steps, list) or not steps or not all(isinstance(s, dict)
                                                           for s in steps):
        raise ModelFileError("pipeline file has no valid list of steps")
    prefixes = {key.split("/", 1)[0] for key in arrays}
    if not prefixes <= {str(i) for i in range(len(steps))}:
        raise ModelFileError("pipeline file has arrays of no step")
    built = []
    for i, step in enumerate(steps):
        name = step.get("name")
        if not isinstance(name, str) or name in dict(built):
            raise ModelFileError(f"pipeline step {i} has no valid, unique name")
        step_arrays = {key.split("/", 1)[1]: a for key, a in arrays.items()
                       if key.split("/", 1)[0] == str(i)}
        step_header = dict(step, format=header["format"],
                           format_version=header["format_version"])
        built.append((name, _instantiate(step_header, step_arrays)))
    return Pipeline(built, verbose=bool(header.get("verbose", False)))


_ZIP_MAGIC = b"PK\x03\x04"


def _npy_header(member):
    """(shape, dtype) from the header of one ``.npy`` member, without reading its data."""
    version = np.lib.format.read_magic(member)
    if version == (1, 0):
        shape, _, dtype = np.lib.format.read_array_header_1_0(member)
    elif version == (2, 0):
        shape, _, dtype = np.lib.format.read_array_header_2_0(member)
    else:
        raise ValueError(f"unsupported .npy format version {version}")
    return shape, dtype


def _read_archive(path):
    """The header and the arrays of a model file; never unpickles anything."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise ModelFileError(f"no model file at {path!r}")
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
        # Refuse object arrays from their .npy headers, before np.load sees them.
        with zipfile.ZipFile(path) as zf:
            for info in zf.infolist():
                with zf.open(info) as member:
                    try:
                        _, dtype = _npy_header(member)
                    except ValueError:
                        continue  # not an array; np.load reports it below
                if dtype.hasobject:
                    raise ModelFileError(
                        f"{path!r}: member {info.filename!r} holds Python objects "
                        f"(pickled data), which polylite never loads")
        with np.load(path, allow_pickle=False) as npz:
            if "header" not in npz.files:
                raise ModelFileError(f"{path!r} is not a polylite model file (no header)")
            blob = npz["header"]
            if not isinstance(blob, np.ndarray) or blob.dtype != np.uint8 or blob.ndim != 1:
                raise ModelFileError(f"{path!r} is not a polylite model file (its header "
                                     f"is not an array of UTF-8 bytes)")
            try:
                header = json.loads(blob.tobytes().decode("utf-8"))
            except (ValueError, RecursionError) as exc:
                raise ModelFileError(f"{path!r} has an unreadable header: {exc}") from None
            arrays = {name: npz[name] for name in npz.files if name != "header"}
        for name, value in arrays.items():
            if not isinstance(value, np.ndarray):  # np.load returns raw bytes for those
                raise ModelFileError(f"{path!r}: member {name!r} is not a NumPy array")
    except ModelFileError:
        raise
    except (zipfile.BadZipFile, EOFError, OSError, ValueError, KeyError,
            NotImplementedError) as exc:
        raise ModelFileError(f"{path!r} is truncated or corrupt: {exc}") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT_NAME:
        raise ModelFileError(f"{path!r} is not a polylite model file (foreign header)")
    return header, arrays


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
        (a ValueError) if the file is missing, truncated, not a polylite model, written by
        a newer format version, or inconsistent (unknown class or parameters, arrays of the
        wrong shape or dtype, non-finite values, unsorted classes, pickled object
        arrays).
    """
    header, arrays = _read_archive(path)
    if header.get("class") == PIPELINE_CLASS:
        _check_version(header)
        return _load_pipeline(header, arrays)
    return _instantiate(header, arrays)


def _check_version(header):
    version = header.get("format_version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ModelFileError(f"model file has no valid format_version (got {version!r})")
    if version > FORMAT_VERSION:
        raise ModelFileError(
            f"model file has format version {version}, newer than this polylite reads "
            f"(up to {FORMAT_VERSION}; written by polylite "
            f"{header.get('polylite_version')}): upgrade polylite")


def _instantiate(header, arrays):
    """The estimator a header and its arrays describe, everything checked."""
    _check_version(header)
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
    _check_declared(header, arrays)
    meta = dict(header.get("attributes") or {})
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


def _check_declared(header, arrays):
    """The archive holds exactly the arrays its header declares, as declared."""
    declared = header.get("arrays")
    if not isinstance(declared, dict) or set(declared) != set(arrays):
        raise ModelFileError("model file arrays do not match its header")
    for key, spec in declared.items():
        if not isinstance(spec, dict):
            raise ModelFileError(f"model file header describes array {key!r} by {spec!r}, "
                                 f"not by its shape and dtype")
        if list(arrays[key].shape) != spec.get("shape") or arrays[key].dtype.str != \
                spec.get("dtype"):
            raise ModelFileError(f"array {key!r} has shape {arrays[key].shape} and dtype "
                                 f"{arrays[key].dtype}, but the header says {spec}")
    if not isinstance(header.get("attributes"), dict):
        raise ModelFileError("model file header has no attribute table (n_features_in_)")


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
