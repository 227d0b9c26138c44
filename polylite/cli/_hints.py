"""Options polylite does not have, caught before argparse parses them: libFM's options
(``-dim 1,1,8``) and libffm's (``-k 4 --auto-stop``) are answered with the polylite
options that do the same, one a line, and the polylite command lines that do what the
whole command line asked (ready to paste); other unknown options with the closest valid
ones.  libFM's and libffm's spellings are hints, not aliases: each setting keeps one
spelling, which the error names.  The answers follow the tables of
docs/user_guide/migration.rst ("Coming from libFM") and docs/user_guide/ctr.rst ("Coming
from libffm or xLearn")."""
import difflib
import shlex
from typing import NamedTuple


class Hint(NamedTuple):
    """The answer to one libFM option: the polylite options that do the same, in its place
    on the command line (none: none at all, or in another command), and what it says."""
    options: list
    text: str


def _is(options, note=""):
    """The answer that ``options`` do the same (``note``: what they do not say)."""
    return Hint(options, f"is {shlex.join(options)}" + (f" ({note})" if note else ""))


class Context(NamedTuple):
    """What an answer may depend on: the command (None: a libFM command line without
    one, answered as fit), the libFM options given (name -> value) and the training
    file (or None)."""
    command: str
    libfm: dict
    train: str


def _dim(value, context):
    parts = [part.strip() for part in value.split(",")]
    if len(parts) != 3:
        return Hint([], "is --n-components K for -dim 'k0,k1,K' (with --no-fit-intercept "
                        "if k0 is 0, --no-fit-linear if k1 is 0)")
    options = (["--no-fit-intercept"] if parts[0] == "0" else []) + \
        (["--no-fit-linear"] if parts[1] == "0" else []) + ["--n-components", parts[2]]
    fitted = (["intercept"] if parts[0] != "0" else []) + \
        (["linear term"] if parts[1] != "0" else [])
    if not fitted:
        return _is(options)
    verb = "are" if len(fitted) == 2 else "is"
    return _is(options, f"the {' and the '.join(fitted)} {verb} fitted by default")


def _training_rows(path):
    """The number of rows of the training file, or None if it cannot be read."""
    if path is None:
        return None
    from .._svmlight import DataFileError, _blocks, _data_lines
    try:
        return sum(1 for _, block in _blocks(path, 2**24) for _ in _data_lines(block))
    except DataFileError:
        return None


def _regular(value, context):
    parts = [part.strip() for part in value.split(",")]
    if len(parts) == 1:
        r1 = r2 = parts[0]
    elif len(parts) == 3:
        r1, r2 = parts[1:]
    else:
        return Hint([], "is --alpha R1/n --beta R2/n for -regular 'r0,r1,r2', n the "
                        "number of training rows")
    method = context.libfm.get("-method")
    if method == "mcmc":
        return Hint([], "has no polylite option with -method mcmc: the Bayesian "
                        "factorization machine samples its regularisation")
    if method in ("sgd", "sgda"):
        return _is(["--alpha", r1, "--beta", r2], "about: libFM's SGD penalises each "
                                                  "step's row, as polylite's per-sample "
                                                  "penalty does")
    n = _training_rows(context.train)
    try:
        per_row = [f"{float(r) / n:.3g}" for r in (r1, r2)] if n else None
    except ValueError:
        per_row = None
    sum_text = ("libFM penalises the sum of the losses, polylite their mean; the "
                "intercept is not penalised")
    if per_row is None:
        return _is(["--alpha", f"{r1}/n", "--beta", f"{r2}/n"],
                   f"n the number of training rows: {sum_text}; for -method sgd about "
                   f"--alpha {r1} --beta {r2}")
    return _is(["--alpha", per_row[0], "--beta", per_row[1]],
               f"{r1}/n and {r2}/n, n = {n:,} rows in {context.train}: {sum_text}")


def _task(value, context):
    if value == "r":
        return _is(["--task", "regression"])
    if value == "c":
        return _is(["--task", "classification", "--binary-threshold", "0"],
                   "labels > 0 are the positive class; without --binary-threshold each "
                   "distinct label is a class")
    return Hint([], "is --task regression (r) or --task classification (c)")


def _method(value, context):
    return {
        "als": _is(["--solver", "cd"], "coordinate descent, which the default --solver "
                                       "auto chooses on sparse data"),
        "sgd": _is(["--solver", "sgd", "--learning-rate", "constant"]),
        "sgda": _is(["--solver", "adagrad"], "adaptive steps; with --validation FILE, "
                                             "early stopping"),
        "mcmc": _is(["--estimator", "bayes-fm"], "with --n-iter sweeps"),
    }.get(value, Hint([], "is --solver cd (als), --solver sgd --learning-rate constant "
                          "(sgd), --solver adagrad (sgda) or --estimator bayes-fm (mcmc)"))


def _iter(value, context):
    if context.libfm.get("-method") == "mcmc":
        return _is(["--n-iter", value], "sweeps of the Gibbs sampler")
    return _is(["--max-iter", value], f"with --estimator bayes-fm, libFM's -method "
                                      f"mcmc: --n-iter {value}")


def _train(value, context):
    return Hint([value] if context.command in (None, "fit") else [],
                f"is polylite fit {value} --model MODEL")


def _test(value, context):
    return Hint([value] if context.command in ("predict", "evaluate") else [],
                f"is polylite predict MODEL {value} or polylite evaluate MODEL {value} "
                f"once fit has saved MODEL (while fitting: --validation {value})")


def _out(value, context):
    return Hint(["-o", value] if context.command == "predict" else [],
                f"is polylite predict MODEL DATA -o {value} (with --proba for a "
                f"classifier's probabilities, as libFM writes them)")


def _load_model(value, context):
    return Hint([value] if context.command in ("predict", "evaluate") else [],
                f"is polylite predict {value} DATA")


def _option(name, note=""):
    return lambda value, context: _is([name, value], note)


def _none(text):
    return lambda value, context: Hint([], text)


# libFM's option -> (the name of its value, None for a flag; its answer, given the value
# and the context).
LIBFM = {
    "-task": ("r|c", _task),
    "-train": ("FILE", _train),
    "-test": ("FILE", _test),
    "-out": ("FILE", _out),
    "-validation": ("FILE", _option("--validation")),
    "-dim": ("k0,k1,k2", _dim),
    "-iter": ("N", _iter),
    "-method": ("NAME", _method),
    "-regular": ("r0,r1,r2", _regular),
    "-init_stdev": ("S", _option("--init-scale")),
    "-learn_rate": ("ETA", _option("--eta0")),
    "-relation": ("R1,R2", _option("--relation")),
    "-meta": ("FILE", _option("--meta", "with --estimator bayes-fm or vb-fm")),
    "-seed": ("N", _option("--seed")),
    "-verbosity": ("N", _none("has no polylite option: progress is shown on stderr by "
                              "default (--progress lines: a line per epoch), --quiet "
                              "silences it")),
    "-save_model": ("FILE", _option("--model")),
    "-load_model": ("FILE", _load_model),
    "-cache_size": ("N", lambda value, context: _is(["--stream"], "TRAIN read one "
                                                                  "block at a time, "
                                                                  "--chunk-bytes SIZE "
                                                                  "each")),
    "-rlog": ("FILE", _none("has no polylite option: the progress on stderr reports "
                            "every epoch")),
    "-help": (None, lambda value, context: _is(["--help"])),
}


def _fit_option(name, note=""):
    """The answer of a libffm option of ``ffm-train``: the fit option ``name``, in place
    only in a fit (or a command line without a command, answered as fit)."""
    def answer(value, context):
        options = [name] + ([] if value is None else [value])
        hint = _is(options, note)
        return hint if context.command in (None, "fit") else Hint([], hint.text.replace(
            "is ", "is polylite fit's ", 1))
    return answer


def _fit_flag(options, note=""):
    """A libffm flag answered by the fit options ``options`` (as _fit_option)."""
    def answer(value, context):
        hint = _is(options, note)
        return hint if context.command in (None, "fit") else Hint([], hint.text.replace(
            "is ", "is polylite fit's ", 1))
    return answer


def _lambda(value, context):
    return _fit_flag(["--alpha", value, "--beta", value],
                     "each row penalises what it reads, as libffm; libffm's model has no "
                     "linear term or intercept: --no-fit-linear --no-fit-intercept leave "
                     "them out")(value, context)


# libffm's ffm-train options -> (the name of its value, None for a flag; its answer).
LIBFFM = {
    "-l": ("LAMBDA", _lambda),
    "-k": ("K", _fit_option("--n-components")),
    "-t": ("EPOCHS", _fit_option("--max-iter")),
    "-r": ("ETA", _fit_option("--eta0")),
    "-s": ("THREADS", _fit_option("--n-jobs", "threads share the prediction and "
                                              "mini-batches; steps of one row each, the "
                                              "default, run on one thread")),
    "-p": ("FILE", _fit_option("--validation", "its log-loss reported every epoch; the "
                                               "fit stops after --n-iter-no-change epochs "
                                               "without improving it and keeps the best "
                                               "epoch's model")),
    "--auto-stop": (None, _fit_flag(["--n-iter-no-change", "1"],
                                    "with --validation: stop at the first epoch that does "
                                    "not improve its log-loss, keeping the best model")),
    "--no-norm": (None, _fit_flag(["--no-normalize"])),
    "-v": ("FOLDS", _none("has no polylite option: cross-validate in Python "
                          "(sklearn.model_selection.cross_val_score)")),
    "--on-disk": (None, _none("has no polylite option for libffm files: fit reads them "
                              "into memory (in Python, datasets.iter_libffm_chunks and "
                              "partial_fit stream one)")),
}

# Every option answered: libFM's, then libffm's.
_ANSWERED = {**LIBFM, **LIBFFM}


def _is_option(token):
    if not token.startswith("-") or token == "-":
        return False
    try:
        float(token)  # a negative number is a value
    except ValueError:
        return True
    return False


def _known(parser, name):
    """Whether argparse takes ``name`` as an option of ``parser`` (exactly, as an
    abbreviation, or as a short option with its value attached) or explains itself why
    not (an ambiguous abbreviation)."""
    options = parser._option_string_actions
    if name in options:
        return True
    if name.startswith("--"):
        return any(option.startswith(name) for option in options)
    return name[:2] in options


def _libfm_name(parser, name):
    """The libFM or libffm option ``name`` spells: ``-dim``, or ``--dim``, which no
    command has."""
    if name in _ANSWERED:
        return name
    if name.startswith("--") and name[1:] in LIBFM and not any(
            _known(command, name) for command in parser.commands.values()):
        return name[1:]
    return None


def _closest(name, options):
    """The options most like ``name`` (a typo of one of them), best first: those within
    0.1 of the best similarity, if at least 0.6 (the dashes left out)."""
    scored = sorted(((difflib.SequenceMatcher(None, name.lstrip("-"),
                                              option.lstrip("-")).ratio(), option)
                     for option in options), reverse=True)
    if not scored:
        return []
    floor = max(0.6, scored[0][0] - 0.1)
    return [option for ratio, option in scored if ratio >= floor][:3]


def _takes_value(parser, name):
    """Whether the polylite option ``name`` of ``parser`` (or the one it abbreviates)
    takes a value."""
    options = parser._option_string_actions
    matches = [options[name]] if name in options else \
        [action for option, action in options.items() if option.startswith(name)]
    return len(matches) == 1 and matches[0].nargs != 0


def check_argv(parser, argv):
    """Refuse libFM's options and options the command does not have, as a usage error of
    the command's parser (exit status 2); argparse parses what passes.  libFM's options
    are answered one a line, followed by the polylite command lines that do what the
    whole command line asked."""
    command, first_seen, unknown = None, False, None
    found, positionals = [], []  # found: (first token, last token, libFM name, value)
    at = []  # the indices in argv of the data positionals (not the command)
    tokens = iter(enumerate(argv))
    for i, token in tokens:
        if token == "--":
            break
        if not _is_option(token):
            if not first_seen:  # the command (argparse names a wrong one)
                first_seen = True
                command = token if token in parser.commands else None
                if command is None:
                    at.append(i)
            else:
                positionals.append(token)
                at.append(i)
            continue
        name, equals, attached = token.partition("=")
        current = parser.commands[command] if command else parser
        libfm = _libfm_name(parser, name)
        if libfm is not None:
            metavar = _ANSWERED[libfm][0]
            value, last = attached or None, i
            if metavar and value is None and i + 1 < len(argv) and \
                    not _is_option(argv[i + 1]):
                value, last = argv[i + 1], i + 1
                next(tokens)  # the value, not a command
            found.append((i, last, libfm, value))
        elif not _known(current, name):
            if unknown is None and (command or not first_seen):
                unknown = (current, name, command)
        elif not equals and _takes_value(current, name):
            next(tokens, None)  # its value, not a positional argument
    if found:
        current = parser.commands[command] if command else parser
        current.error(_answer(argv, command, found, positionals, at))
    if unknown is not None:
        current, name, command = unknown
        close = _closest(name, [option for option in current._option_string_actions
                                if option.startswith("--")])
        where = f"polylite {command} --help" if command else "polylite --help"
        current.error(f"unrecognized option {name} " +
                      (f"(did you mean {' or '.join(close)}?)" if close else
                       f"(see {where})"))


def _answer(argv, command, found, positionals, at=()):
    """The usage error of libFM's and libffm's options ``found`` in ``argv``: each
    answered, then the polylite command lines to run instead (``at``: the indices of the
    data positionals in ``argv``)."""
    libfm = {name: value for _, _, name, value in found}
    train = libfm.get("-train") or (positionals[0] if command == "fit" and positionals
                                    else None)
    context = Context(command, libfm, train)
    sources = {"libffm" if name in LIBFFM else "libFM" for name in libfm}
    lines = [f"these are {next(iter(sources))}'s options:" if len(sources) == 1
             else "these are libFM's and libffm's options:"]
    fit_of_libffm = bool(sources & {"libffm"}) and command in (None, "fit")
    # libffm's ffm-train TRAIN MODEL: its second file is the model.
    model_at = at[1] if fit_of_libffm and len(at) == 2 else None

    def tokens(start, stop):
        return [part for i in range(start, stop) for part in
                (["--model", argv[i]] if i == model_at else [argv[i]])]

    replaced, start = ["polylite"] + ([] if command else ["fit"]), 0
    for first, last, name, value in found:
        metavar, answer = _ANSWERED[name]
        hint = answer(value or metavar, context)
        lines.append(f"  {name if metavar is None else f'{name} {value or metavar}'} "
                     f"{hint.text}")
        replaced += tokens(start, first) + hint.options
        start = last + 1
    replaced += tokens(start, len(argv))
    if fit_of_libffm and not any(token == "--estimator" or token.startswith("--estimator=")
                                 for token in replaced):
        replaced += ["--estimator", "ffm"]
    return "\n".join(lines + ["the same in polylite:"] +
                      [f"  {shlex.join(line)}" for line in _commands(replaced, libfm,
                                                                     command)])


def _commands(replaced, libfm, command):
    """The polylite command lines: ``replaced`` (the command line, libFM's options
    replaced by polylite's), with --model MODEL if fit lacks it, then the prediction
    libFM's -test and -out asked of a fit."""
    if command not in (None, "fit"):
        return [replaced]
    model = next((replaced[i + 1] for i, token in enumerate(replaced[:-1])
                  if token in ("-m", "--model")), None)
    model = model or next((token.partition("=")[2] for token in replaced
                           if token.startswith("--model=")), None)
    if model is None:
        model = "MODEL"
        replaced = replaced + ["--model", model]
    lines = [replaced]
    if "-test" in libfm or "-out" in libfm:
        data = libfm.get("-test") or "DATA"
        lines.append(["polylite", "predict", model, data, "-o", libfm["-out"]]
                     if libfm.get("-out") else ["polylite", "evaluate", model, data])
    return lines
