"""Pickle-free, versioned model files: a NumPy ``.npz`` archive with a JSON header.

The archive holds one uint8 array ``header`` (UTF-8 JSON) and the fitted arrays.  The
header names the format and its version, the estimator class, its parameters, the library
version, scalar fitted attributes and the shape and dtype of every array.  Loading uses
``allow_pickle=False`` and only instantiates classes from polylite's own registry, so a
model file never executes code; everything in it is checked before it is used.
"""
import io
import json
import numbers
import os
import tempfile
import zipfile

import numpy as np

FORMAT_NAME = "polylite-model"
FORMAT_VERSION = 1

__all__ = ["load", "ModelFileError", "FORMAT_VERSION"]


class ModelFileError(ValueError):
    """A file is not a valid polylite model (missing, truncated, foreign or inconsistent)."""


def _model_classes():
    from . import fm
    classes = [fm.FactorizationMachineRegressor, fm.FactorizationMachineClassifier]
    try:
        from . import pn
        classes += [pn.PolynomialNetworkRegressor, pn.PolynomialNetworkClassifier]
    except ImportError:  # pragma: no cover - polynomial networks not built
        pass
    return {cls.__name__: cls for cls in classes}


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
    raise TypeError(f"cannot save parameter {name}={value!r}: only numbers, strings, "
                    f"booleans and None are supported")


def _fitted_arrays(est):
    arrays = {name: np.asarray(est._stack[name]) for name in ("intercept", "w", "P",
                                                               "gamma")}
    if est._has_lam:
        arrays["lam"] = np.asarray(est._stack["lam"])
    arrays["n_iter"] = np.atleast_1d(np.asarray(est.n_iter_, dtype=np.int64))
    meta = {"n_features_in_": int(est.n_features_in_)}
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
    from sklearn.utils.validation import check_is_fitted
    from . import __version__
    check_is_fitted(est)
    if type(est).__name__ not in _model_classes():
        raise TypeError(f"{type(est).__name__} cannot be saved by polylite")
    est._restack()
    arrays, meta = _fitted_arrays(est)
    header = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "polylite_version": __version__,
        "class": type(est).__name__,
        "params": {k: _json_param(k, v) for k, v in est.get_params(deep=False).items()},
        "attributes": meta,
        "arrays": {k: {"shape": list(a.shape), "dtype": a.dtype.str}
                   for k, a in arrays.items()},
    }
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


def _read_archive(path):
    path = os.fspath(path)
    if not os.path.exists(path):
        raise ModelFileError(f"no model file at {path!r}")
    if not zipfile.is_zipfile(path):
        raise ModelFileError(f"{path!r} is not a polylite model file (not an .npz archive)")
    try:
        with np.load(path, allow_pickle=False) as npz:
            if "header" not in npz.files:
                raise ModelFileError(f"{path!r} is not a polylite model file (no header)")
            header = json.loads(bytes(npz["header"]).decode("utf-8"))
            arrays = {name: npz[name] for name in npz.files if name != "header"}
    except ModelFileError:
        raise
    except (zipfile.BadZipFile, EOFError, OSError, ValueError, UnicodeDecodeError,
            KeyError) as exc:
        raise ModelFileError(f"{path!r} is corrupt or truncated: {exc}") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT_NAME:
        raise ModelFileError(f"{path!r} is not a polylite model file (foreign header)")
    return header, arrays


def load(path):
    """Load a model saved by ``estimator.save(path)``.

    Parameters
    ----------
    path : str or path-like

    Returns
    -------
    estimator : polylite estimator
        Fitted, predicting exactly as the saved one did.

    Raises
    ------
    ModelFileError
        (a ValueError) if the file is missing, truncated, not a polylite model, written by
        a newer format version, or inconsistent (unknown class or parameters, arrays of the
        wrong shape or dtype, non-finite values).
    """
    header, arrays = _read_archive(path)
    version = header.get("format_version")
    if not isinstance(version, int):
        raise ModelFileError("model file has no valid format_version")
    if version > FORMAT_VERSION:
        raise ModelFileError(
            f"model file has format version {version}, newer than this polylite reads "
            f"(up to {FORMAT_VERSION}; written by polylite "
            f"{header.get('polylite_version')}): upgrade polylite")
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
    _check_arrays(est, header, arrays)
    _install(est, header, arrays)
    return est


def _check_arrays(est, header, arrays):
    declared = header.get("arrays")
    if not isinstance(declared, dict) or set(declared) != set(arrays):
        raise ModelFileError("model file arrays do not match its header")
    for key, spec in declared.items():
        if list(arrays[key].shape) != spec.get("shape") or arrays[key].dtype.str != \
                spec.get("dtype"):
            raise ModelFileError(f"array {key!r} has shape {arrays[key].shape} and dtype "
                                 f"{arrays[key].dtype}, but the header says {spec}")
    meta = header.get("attributes", {})
    d = meta.get("n_features_in_")
    if not isinstance(d, int) or d < 0:
        raise ModelFileError("model file has no valid n_features_in_")
    required = {"intercept", "w", "P", "gamma", "n_iter"}
    if est._has_lam:
        required.add("lam")
    if est._is_classifier:
        required.add("classes")
    missing = required - set(arrays)
    if missing:
        raise ModelFileError(f"model file lacks the arrays {sorted(missing)}")
    P = arrays["P"]
    if P.dtype not in (np.float32, np.float64):
        raise ModelFileError(f"factors have dtype {P.dtype}; expected float32 or float64")
    _, degrees, n_dummy = est._structure()
    k = est.n_components
    n_out = P.shape[0] if P.ndim == 4 else -1
    if est._is_classifier:
        n_classes = arrays["classes"].shape[0]
        if n_classes < 2 or n_out != (1 if n_classes == 2 else n_classes):
            raise ModelFileError(f"model file has {n_out} outputs for {n_classes} classes")
    elif n_out != 1:
        raise ModelFileError(f"a regressor has 1 output, model file has {n_out}")
    expected = {"intercept": (n_out, 1), "w": (n_out, d), "P": (n_out, len(degrees), d, k),
                "gamma": (n_out, n_dummy, k), "lam": (n_out, k), "n_iter": (n_out,)}
    for key, shape in expected.items():
        if key not in arrays:
            continue
        if arrays[key].shape != shape:
            raise ModelFileError(f"array {key!r} has shape {arrays[key].shape}; the "
                                 f"model's parameters require {shape}")
        if key != "n_iter":
            if arrays[key].dtype != P.dtype:
                raise ModelFileError(f"array {key!r} has dtype {arrays[key].dtype}, "
                                     f"the factors {P.dtype}")
            if not np.all(np.isfinite(arrays[key])):
                raise ModelFileError(f"array {key!r} contains NaN or infinity")


def _install(est, header, arrays):
    meta = header["attributes"]
    est._stack = {key: np.array(arrays[key]) for key in ("intercept", "w", "P", "gamma")}
    est._stack["lam"] = (np.array(arrays["lam"]) if "lam" in arrays else
                         np.ones((arrays["P"].shape[0], est.n_components), arrays["P"].dtype))
    est.n_features_in_ = meta["n_features_in_"]
    n_iter = arrays["n_iter"]
    est.n_iter_ = n_iter.copy() if est._is_classifier else int(n_iter[0])
    if "classes" in arrays:
        est.classes_ = arrays["classes"].astype(meta.get("classes_dtype", None) or
                                                arrays["classes"].dtype)
    if "feature_names" in arrays:
        est.feature_names_in_ = arrays["feature_names"].astype(object)
    est._publish()
