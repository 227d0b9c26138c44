"""``polylite info``: what a model file holds.

The description is read from the file alone: its header and the table of its arrays,
checked as :func:`polylite.load` checks them, without building the estimator, so the
command imports neither scikit-learn nor an estimator family and answers at once."""
import json

import numpy as np

from ._common import Failure
from ._models import recorded_data, recorded_threshold


def run(args, parser):
    """Describe MODEL: estimator, parameters, stored arrays, how it was fitted."""
    from .._io import PIPELINE_CLASS, ModelFileError, read_archive
    try:
        header, arrays = read_archive(args.model)
    except ModelFileError as exc:
        raise Failure(str(exc)) from None
    threshold = recorded_threshold(header, args.model)
    # A pipeline's steps' parameters and arrays are named "step__name", as sklearn does.
    if header.get("class") == PIPELINE_CLASS:
        steps = header.get("steps")
        if not isinstance(steps, list) or not all(isinstance(s, dict) for s in steps):
            raise Failure(f"{args.model}: pipeline file has no valid list of steps")
        parts = [(f"{step.get('name')}__", str(i), step) for i, step in enumerate(steps)]
    else:
        parts = [("", None, header)]
    for _, _, part in parts:
        if not (isinstance(part.get("class"), str) and isinstance(part.get("params"), dict)
                and isinstance(part.get("attributes"), dict)):
            raise Failure(f"{args.model}: the model file's header does not describe an "
                          f"estimator (its class, parameters and attributes)")
    stored = {}
    for prefix, index, _ in parts:
        for key in sorted(arrays):
            owner, _, name = key.rpartition("/")
            if (owner or None) == index:
                stored[prefix + name] = {"shape": list(arrays[key].shape),
                                         "dtype": str(arrays[key].dtype)}
    final_prefix, final_index, final = parts[-1]
    classes = arrays.get("classes" if final_index is None else f"{final_index}/classes")
    result = {
        "file": args.model,
        "estimator": header["class"],
        "format_version": header.get("format_version"),
        "polylite_version": header.get("polylite_version"),
        "parameters": {prefix + name: value for prefix, _, part in parts
                       for name, value in part["params"].items()},
        "n_features_in_": parts[0][2]["attributes"].get("n_features_in_"),
        "arrays": stored,
    }
    if len(parts) > 1:
        result["steps"] = [part["class"] for _, _, part in parts]
    if classes is not None:
        result["classes_"] = classes.tolist()
    prefix_of_final = "" if final_index is None else f"{final_index}/"
    field_of = arrays.get(prefix_of_final + "fields")
    n_fields = arrays.get(prefix_of_final + "n_fields")
    if field_of is not None and n_fields is not None:  # field-aware: each column's field
        result["n_fields_"] = int(np.asarray(n_fields).reshape(-1)[0])
    if header.get("metadata"):
        result["metadata"] = header["metadata"]
    if args.json:
        print(json.dumps(result, default=str))
        return 0
    kind = result["estimator"] + (f" of {', '.join(result['steps'])}"
                                  if "steps" in result else "")
    print(f"file           {args.model}  (format version {result['format_version']}, "
          f"written by polylite {result['polylite_version']})")
    print(f"estimator      {kind}")
    print(f"features       {result['n_features_in_']}")
    if "n_fields_" in result:
        sizes = np.bincount(field_of, minlength=result["n_fields_"])
        print(f"fields         {result['n_fields_']} (features per field: "
              f"{', '.join(str(int(n)) for n in sizes[:10])}"
              f"{', ...' if sizes.size > 10 else ''})")
    if "classes_" in result:
        print(f"classes        {result['classes_']}")
    print("parameters     " + "\n               ".join(
        f"{name}={value!r}{_resolved(parts, name, value)}"
        for name, value in result["parameters"].items()))
    print("arrays         " + "\n               ".join(
        f"{name:<15} shape {tuple(spec['shape'])} {spec['dtype']}"
        for name, spec in stored.items()))
    data = recorded_data(header)
    if data:
        read_as = ("libffm file" if data.get("format") == "libffm" else
                   f"{'zero' if data.get('zero_based') else 'one'}-based indices")
        print(f"training data  {data.get('train')}"
              f"{' (streamed)' if data.get('stream') else ''}, {read_as}, "
              f"{data.get('n_features')} features, {data.get('dtype')}")
    if threshold is not None:
        print(f"labels         > {threshold:g}: class 1, the others: class -1 "
              f"(--binary-threshold)")
    return 0


def _resolved(parts, name, value):
    """What a parameter left at None came to in the fit, where the file says (the
    solver's limit of epochs for max_iter=None)."""
    if value is not None or not name.endswith("max_iter"):
        return ""
    from .._engine.codes import DEFAULT_MAX_ITER
    prefix = name[:-len("max_iter")]
    for part_prefix, _, part in parts:
        if part_prefix == prefix:
            solver = part["attributes"].get("solver", part["params"].get("solver"))
            if isinstance(solver, str) and solver in DEFAULT_MAX_ITER:
                return f" (the solver's limit: {DEFAULT_MAX_ITER[solver]})"
    return ""
