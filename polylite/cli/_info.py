"""``polylite info``: what a model file holds."""
import json

import numpy as np

from ._models import kind_name, load_model, recorded_data, recorded_threshold


def run(args, parser):
    """Describe MODEL: estimator, parameters, fitted arrays, how it was fitted."""
    estimator, header = load_model(args.model)
    threshold = recorded_threshold(header, args.model)
    # A pipeline's steps' parameters and arrays are named "step__name", as sklearn does.
    steps = getattr(estimator, "steps", None)
    parts = ([(f"{name}__", step) for name, step in steps] if isinstance(steps, list)
             else [("", estimator)])
    fitted = {prefix + name: {"shape": list(np.shape(value)),
                              "dtype": str(np.asarray(value).dtype)}
              for prefix, part in parts for name, value in sorted(vars(part).items())
              if name.endswith("_") and not name.startswith("_")}
    result = {
        "file": args.model,
        "estimator": type(estimator).__name__,
        "format_version": header.get("format_version"),
        "polylite_version": header.get("polylite_version"),
        "parameters": {prefix + name: _shown(value) for prefix, part in parts
                       for name, value in part.get_params(deep=False).items()},
        "n_features_in_": int(estimator.n_features_in_),
        "fitted": fitted,
    }
    if len(parts) > 1:
        result["steps"] = [type(part).__name__ for _, part in parts]
    final = parts[-1][1]
    if getattr(final, "_is_classifier", False):
        result["classes_"] = final.classes_.tolist()
    if hasattr(final, "n_fields_"):  # field-aware: the fields of the columns
        result["n_fields_"] = int(final.n_fields_)
    if header.get("metadata"):
        result["metadata"] = header["metadata"]
    if args.json:
        print(json.dumps(result, default=str))
        return 0
    print(f"file           {args.model}  (format version {result['format_version']}, "
          f"written by polylite {result['polylite_version']})")
    print(f"estimator      {kind_name(estimator)}")
    print(f"features       {result['n_features_in_']}")
    if "n_fields_" in result:
        sizes = np.bincount(final.fields_, minlength=final.n_fields_)
        print(f"fields         {result['n_fields_']} (features per field: "
              f"{', '.join(str(int(n)) for n in sizes[:10])}"
              f"{', ...' if sizes.size > 10 else ''})")
    if "classes_" in result:
        print(f"classes        {result['classes_']}")
    print("parameters     " + "\n               ".join(
        f"{name}={value!r}{_resolved(parts, name, value)}"
        for name, value in result["parameters"].items()))
    print("fitted         " + "\n               ".join(
        f"{name:<15} shape {tuple(spec['shape'])} {spec['dtype']}"
        for name, spec in fitted.items()))
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


def _shown(value):
    """A parameter's value as info shows it: an array (a field-aware model's fields, one
    per feature) by its size, not its entries."""
    if isinstance(value, np.ndarray) and value.size > 0:
        return _Summary(f"<{value.size} {value.dtype} values: the field of each "
                        f"feature>")
    return value


class _Summary(str):
    """Text shown as is (without quotes) in the parameters' list."""

    def __repr__(self):
        return str(self)


def _resolved(parts, name, value):
    """What a parameter left at None came to in the fit, where the model says (the
    solver's limit of epochs for max_iter=None)."""
    if value is not None or not name.endswith("max_iter"):
        return ""
    prefix = name[:-len("max_iter")]
    for part_prefix, part in parts:
        if part_prefix == prefix and hasattr(part, "_max_iter"):
            try:
                return f" (the solver's limit: {part._max_iter})"
            except (AttributeError, KeyError):
                return ""
    return ""
