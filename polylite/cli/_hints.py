"""Options polylite does not have, caught before argparse parses them: libFM's options
(``-dim 1,1,8``) are answered with the polylite options that do the same, other unknown
options with the closest valid ones.  libFM's spellings are hints, not aliases: each
setting keeps one spelling, which the error names.  The answers follow the table of
docs/user_guide/migration.rst ("Coming from libFM")."""
import difflib


def _dim(value):
    parts = [part.strip() for part in value.split(",")]
    if len(parts) != 3:
        return ("is --n-components K for -dim 'k0,k1,K' (with --no-fit-intercept if k0 "
                "is 0, --no-fit-linear if k1 is 0)")
    options = (["--no-fit-intercept"] if parts[0] == "0" else []) + \
        (["--no-fit-linear"] if parts[1] == "0" else []) + [f"--n-components {parts[2]}"]
    fitted = (["intercept"] if parts[0] != "0" else []) + \
        (["linear term"] if parts[1] != "0" else [])
    if not fitted:
        return "is " + " ".join(options)
    verb = "are" if len(fitted) == 2 else "is"
    return f"is {' '.join(options)} (the {' and the '.join(fitted)} {verb} fitted by " \
           f"default)"


def _regular(value):
    parts = [part.strip() for part in value.split(",")]
    if len(parts) == 1:
        r1 = r2 = parts[0]
    elif len(parts) == 3:
        r1, r2 = parts[1:]
    else:
        r1, r2 = "R1", "R2"
    return (f"is --alpha {r1}/n --beta {r2}/n, n the number of training rows (libFM "
            f"penalises the sum of the losses, polylite their mean; the intercept is not "
            f"penalised; for -method sgd about --alpha {r1} --beta {r2})")


def _task(value):
    if value == "r":
        return "is --task regression"
    if value == "c":
        return ("is --task classification --binary-threshold 0 (labels > 0 are the "
                "positive class; without --binary-threshold each distinct label is a "
                "class)")
    return "is --task regression (r) or --task classification (c)"


def _method(value):
    return "is " + {
        "als": "--solver cd (coordinate descent, which the default --solver auto chooses "
               "on sparse data)",
        "sgd": "--solver sgd --learning-rate constant",
        "sgda": "--solver adagrad --validation FILE (adaptive steps, early stopping)",
        "mcmc": "--estimator bayes-fm (with --n-iter sweeps)",
    }.get(value, "--solver cd (als), --solver sgd --learning-rate constant (sgd), "
                 "--solver adagrad (sgda) or --estimator bayes-fm (mcmc)")


# libFM's option -> (the name of its value, None for a flag; what it is in polylite,
# given the value or that name).
LIBFM = {
    "-task": ("r|c", _task),
    "-train": ("FILE", lambda v: f"is polylite fit {v} --model MODEL"),
    "-test": ("FILE", lambda v: f"is polylite predict MODEL {v} or polylite evaluate "
                                f"MODEL {v} once fit has saved MODEL (while fitting: "
                                f"--validation {v})"),
    "-validation": ("FILE", lambda v: f"is --validation {v}"),
    "-out": ("FILE", lambda v: f"is polylite predict MODEL DATA -o {v} (with --proba "
                               f"for a classifier's probabilities, as libFM writes them)"),
    "-dim": ("k0,k1,k2", _dim),
    "-iter": ("N", lambda v: f"is --max-iter {v} (with --estimator bayes-fm, libFM's "
                             f"-method mcmc: --n-iter {v})"),
    "-method": ("NAME", _method),
    "-regular": ("r0,r1,r2", _regular),
    "-init_stdev": ("S", lambda v: f"is --init-scale {v}"),
    "-learn_rate": ("ETA", lambda v: f"is --eta0 {v}"),
    "-relation": ("R1,R2", lambda v: f"is --relation {v}"),
    "-meta": ("FILE", lambda v: f"is --meta {v} (with --estimator bayes-fm or vb-fm)"),
    "-seed": ("N", lambda v: f"is --seed {v}"),
    "-verbosity": ("N", lambda v: "has no polylite option: progress is shown on stderr "
                                  "by default (--progress lines: a line per epoch), "
                                  "--quiet silences it"),
    "-save_model": ("FILE", lambda v: f"is --model {v}"),
    "-load_model": ("FILE", lambda v: f"is polylite predict {v} DATA"),
    "-cache_size": ("N", lambda v: "is --stream --chunk-bytes SIZE (TRAIN read one "
                                   "block at a time)"),
    "-rlog": ("FILE", lambda v: "has no polylite option: the progress on stderr reports "
                                "every epoch"),
    "-help": (None, lambda v: "is --help"),
}


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
    """The libFM option ``name`` spells: ``-dim``, or ``--dim``, which no command has."""
    if name in LIBFM:
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


def check_argv(parser, argv):
    """Refuse libFM's options and options the command does not have, as a usage error of
    the command's parser (exit status 2); argparse parses what passes."""
    command, first_seen, hints, unknown = None, False, [], None
    tokens = iter(enumerate(argv))
    for i, token in tokens:
        if token == "--":
            break
        if not _is_option(token):
            if not first_seen:  # the command (argparse names a wrong one)
                first_seen = True
                command = token if token in parser.commands else None
            continue
        name, _, attached = token.partition("=")
        current = parser.commands[command] if command else parser
        libfm = _libfm_name(parser, name)
        if libfm is not None:
            metavar, equivalent = LIBFM[libfm]
            value = attached or None
            if metavar and value is None and i + 1 < len(argv) and \
                    not _is_option(argv[i + 1]):
                value = argv[i + 1]
                next(tokens)  # the value, not a command
            given = libfm if metavar is None else f"{libfm} {value or metavar}"
            hints.append(f"libFM's {given} {equivalent(value or metavar)}")
        elif (unknown is None and (command or not first_seen)
              and not _known(current, name)):
            unknown = (current, name, command)
    if hints:
        (parser.commands[command] if command else parser).error("; ".join(hints))
    if unknown is not None:
        current, name, command = unknown
        close = _closest(name, [option for option in current._option_string_actions
                                if option.startswith("--")])
        where = f"polylite {command} --help" if command else "polylite --help"
        current.error(f"unrecognized option {name} " +
                      (f"(did you mean {' or '.join(close)}?)" if close else
                       f"(see {where})"))
