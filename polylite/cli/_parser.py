"""The parsers of the commands and the types of their options.

Standard library only: ``polylite --help``, ``polylite COMMAND --help`` and mistyped
options answer without importing NumPy, scikit-learn or an estimator.  What the
estimators define (their parameters' allowed values and defaults, shown in ``fit
--help``) is therefore written here, and tests/test_cli_options.py checks it against the
estimators.
"""
import argparse
import math
import sys

# --estimator: the families of polylite.cli._models.estimators().
ESTIMATORS = ("fm", "pn", "bayes-fm", "vb-fm", "ffm", "fwfm")
TASKS = ("regression", "classification", "ranking", "ordinal")
# --format: the data files' text.  auto: libffm for the extensions below (before a
# compression suffix), else svmlight/libFM.
FORMATS = ("auto", "svmlight", "libffm")
LIBFFM_EXTENSIONS = (".ffm", ".libffm")

def auto_or_positive_int(text):
    """'auto' or an integer >= 1 (an option type, as those below)."""
    return text if text == "auto" else bounded(int, text, 1)


# The options of fit that set estimator parameters, each named like the parameter:
# (parameter, type or "bool", allowed values or None, help, default(s)).  The estimators
# check the values; the allowed values listed here are the union over the families.
PARAMETERS = [
    ("degree", int, None, "degree m >= 2 of the interactions", "2"),
    ("n_components", int, None, "rank k of the factor matrices (hidden units of a PN)",
     "8 (bayes-fm/fm/pn/vb-fm), 10 (ranking), 4 (ffm/fwfm)"),
    ("lower_degrees", str, ("separate", "shared", "none", "augment"),
     "how degrees below m are modelled (fm: separate, shared, none; pn: augment, none)",
     "'separate' (bayes-fm/fm/ranking), 'augment' (pn)"),
    ("kernel", str, ("anova", "all-subsets"), "interaction kernel of an fm", "'anova'"),
    ("output_weights", str, ("learned", "alternating"), "weights of the units of a pn",
     "'learned'"),
    # One option for both: the estimator refuses the other task's losses by name.
    ("loss", str, ("logistic", "squared_hinge", "bpr", "warp", "ials"),
     "loss of a classifier (logistic, squared_hinge; logistic gives --proba) or of a "
     "ranker (warp, bpr; ials: the whole-data loss, every user-item pair weighted)",
     "'logistic' (ffm/fm/fwfm/pn), 'warp' (ranking)"),
    ("negatives", str, ("uniform", "popularity"), "how a ranker draws negative items: "
     "uniformly, or by popularity", "'uniform'"),
    ("max_trials", int, None, "negatives a warp ranker draws per positive at most", "10"),
    ("alpha0", float, None, "weight of every unobserved user-item pair of an ials ranker",
     "0.1"),
    ("confidence", float, None, "an ials ranker weighs an observed pair 1 + confidence "
     "* count", "0.0"),
    ("frequency_exponent", float, None, "nu of an ials ranker's frequency-scaled "
     "penalties: each column's alpha and beta times (its frequency / the mean)^nu "
     "(iALS++; 1 penalises frequent users and items more)", "0.0"),
    ("side_sweeps", int, None, "coordinate-descent sweeps of each side of an ials ranker "
     "per epoch (2: close to an alternating-least-squares iteration)", "1"),
    ("side_solver", str, ("cd", "als"), "how an ials ranker steps the factors of a side "
     "of one nonzero per row (ids): by coordinates, or each user's and item's at once "
     "(als: exact least squares, an iALS iteration per epoch on ids)", "'cd'"),
    ("margin", float, None, "margin of a warp ranker's hinge", "1.0"),
    ("query_batch", auto_or_positive_int, None, "positives of one user a ranker visits "
     "together, its part's parameters stepping once per batch (auto: 16 when the users' "
     "rows average 16 nonzeros or more, else 1)", "'auto'"),
    ("fit_linear", "bool", None, "fit the linear term", "True"),
    ("fit_intercept", "bool", None, "fit the intercept", "True"),
    ("alpha", float, None, "L2 penalty of the linear weights, per sample (the objective "
     "is a mean over rows)", "0.0001 (fm/pn), 1e-06 (ranking), 2e-05 (ffm/fwfm)"),
    ("beta", float, None, "L2 penalty of the factors, per sample",
     "0.0001 (fm/pn), 1e-06 (ranking), 2e-05 (ffm/fwfm)"),
    ("relaxation", float, None, "over-relaxation of a vb-fm's factor means or of a "
     "bayes-fm's draws, in (0, 2) (1: plain coordinate ascent or Gibbs sampling)",
     "1.5 (bayes-fm), 1.7 (vb-fm)"),
    ("init_scale", float, None, "standard deviation of the initial factors (bayes-fm: "
     "and linear weights; ffm: their uniform range, None: 1/sqrt(n_components))",
     "0.1 (bayes-fm/fm/pn/vb-fm), 0.05 (ranking), None (ffm/fwfm)"),
    ("max_iter", int, None, "maximum number of epochs (passes over the data; vb-fm: "
     "iterations)", "None (fm/pn), 30 (ranking), 100 (vb-fm), 15 (ffm/fwfm)"),
    ("tol", float, None, "stopping tolerance (vb-fm: the rise of the ELBO per row)",
     "1e-05 (fm/pn), None (ffm/fwfm/ranking), 0.0001 (vb-fm)"),
    ("solver", str, ("auto", "cd", "sgd", "adagrad", "lbfgs", "ftrl"), "optimiser (auto: "
     "lbfgs on dense data, cd on sparse data; ftrl: FTRL-proximal, fm, ffm and fwfm, with "
     "--l1 and --l2)", "'auto' (fm/pn), 'adagrad' (ffm/fwfm/ranking)"),
    ("l1", float, None, "L1 penalty of --solver ftrl, on the sum of the losses (zeroes "
     "weights)", "0.0"),
    ("l2", float, None, "L2 penalty of --solver ftrl, on the sum of the losses", "0.0"),
    ("normalize", "bool", None, "scale each row to unit length before it enters an ffm "
     "(libffm's instance-wise normalisation; --no-normalize is its --no-norm)", "True"),
    ("learning_rate", str, ("constant", "invscaling"), "step size schedule of sgd",
     "'invscaling'"),
    ("eta0", float, None, "initial step size of sgd/adagrad (None: the estimator "
     "chooses)", "None (fm/pn/ranking), 0.2 (ffm/fwfm)"),
    ("power_t", float, None, "exponent of the invscaling schedule", "0.25"),
    ("batch_size", int, None, "rows per stochastic step", "1"),
    ("shuffle", "bool", None, "visit the rows in a new random order every epoch", "True"),
    ("early_stopping", "bool", None, "hold out --validation-fraction of TRAIN and stop "
     "when its loss (a ranker's: AUC) stops improving (or give --validation)", "False"),
    ("validation_fraction", float, None, "share of TRAIN held out by --early-stopping",
     "0.1"),
    ("n_iter_no_change", int, None, "epochs without improvement before stopping (1: "
     "libffm's --auto-stop)", "5 (fm/pn/ranking), 2 (ffm/fwfm)"),
    ("random_state", int, None, "seed of the initialisation and shuffling (also --seed)",
     "None"),
    ("n_jobs", int, None, "threads sharing the rows of prediction, cd, lbfgs and "
     "mini-batches (-1: every CPU)", "None"),
    ("n_iter", int, None, "sweeps of the Gibbs sampler (bayes-fm)", "200"),
    ("n_burn_in", int, None, "sweeps discarded before averaging (bayes-fm; None: a fifth "
     "of --n-iter, at most 5)", "None"),
    ("n_kept", int, None, "samples kept in the model for prediction (bayes-fm; None: "
     "every sweep after the burn-in)", "None"),
]


def data_format(args, path, recorded=None):
    """The format of the data file ``path``: --format's, else libffm for the extensions
    of LIBFFM_EXTENSIONS (before a compression suffix), else ``recorded`` (the model's
    training file's) or svmlight."""
    if getattr(args, "format", "auto") != "auto":
        return args.format
    name = str(path).lower()
    for suffix in (".gz", ".bz2", ".xz"):
        if name.endswith(suffix):
            name = name[:-len(suffix)]
    if name.endswith(LIBFFM_EXTENSIONS):
        return "libffm"
    return recorded or "svmlight"


def option(name):
    """The option of a parameter: n_components -> --n-components."""
    return "--" + name.replace("_", "-")


# ---- option types ------------------------------------------------------------------------

def positive_int(text):
    return bounded(int, text, 1)


def bounded(kind, text, low):
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"invalid {'int' if kind is int else 'float'} value: {text!r}") from None
    if not value >= low:
        raise argparse.ArgumentTypeError(f"must be >= {low}, got {text}")
    return value


def finite_float(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid float value: {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text}")
    return value


def byte_size(text):
    """'64M', '1G', '65536' -> bytes."""
    units = {"k": 2**10, "m": 2**20, "g": 2**30}
    scale = units.get(text[-1:].lower(), 1)
    number = text[:-1] if scale > 1 else text
    try:
        value = int(float(number) * scale)
    except (ValueError, OverflowError):
        raise argparse.ArgumentTypeError(f"invalid size {text!r} (examples: 65536, "
                                         f"512K, 64M, 1G)") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def column_range(text):
    """'40:70' -> (40, 70), the columns start..stop-1."""
    try:
        start, stop = (int(part) for part in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid column range {text!r} (expected "
                                         f"START:STOP, e.g. 40:70)") from None
    if not 0 <= start < stop:
        raise argparse.ArgumentTypeError(f"needs 0 <= START < STOP, got {text}")
    return start, stop


def relation_names(text):
    names = [name for name in text.split(",") if name]
    if not names:
        raise argparse.ArgumentTypeError(f"{text!r} names no relation")
    return names


# ---- the parsers -------------------------------------------------------------------------

class _Version(argparse.Action):
    """--version, read from the installed package's metadata only when asked."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        from polylite import __version__
        print(f"polylite {__version__}", file=sys.stdout)
        parser.exit()


def build_parser(description):
    """The ``polylite`` parser.  Each command's parser is in its ``commands`` (by name)
    and, once parsed, ``args.parser``; the command is run by the ``run(args, parser)``
    of the module ``polylite.cli._<command>``."""
    parser = argparse.ArgumentParser(
        prog="polylite", description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action=_Version, help="show the version and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    parser.commands = {}  # name -> the command's parser
    for add in (_add_fit, _add_predict, _add_evaluate, _add_info, _add_demo):
        command = add(sub)
        command.set_defaults(parser=command)
        parser.commands[command.prog.split()[-1]] = command
    return parser


def _add_fit(sub):
    fit = sub.add_parser("fit", help="fit a model on an svmlight/libFM file",
                         usage="polylite fit TRAIN --model MODEL [options]",
                         description="Fit a model on an svmlight/libFM file and save it. "
                         "Estimator options are named like the Python parameters "
                         "(n_components: --n-components); unset ones keep the "
                         "estimator's default.")
    fit.add_argument("train", metavar="TRAIN", help="training data")
    fit.add_argument("--model", "-m", required=True, metavar="MODEL",
                     help="where to save the fitted model (.npz; written only on success): "
                          "a new or regular file, not a device or FIFO, not an input")
    fit.add_argument("--task", choices=TASKS, default=None,
                     help="default regression (--estimator ffm or fwfm: "
                          "classification, as libffm); classification: binary or multi-class "
                          "(one-vs-rest), as many classes as TRAIN has labels; ranking: "
                          "rank items for users from positive interactions (label 1; 0: "
                          "another interaction), with --item-columns or --relation "
                          "USERS,ITEMS; ordinal (--estimator bayes-fm): ratings as ordered "
                          "levels, the distinct labels of TRAIN (ordered probit)")
    fit.add_argument("--binary-threshold", type=finite_float, metavar="T",
                     help="--task classification into two classes, as libFM's -task c "
                          "(T = 0): labels > T are the positive class 1, the others the "
                          "negative class -1; the model records T, and evaluate applies "
                          "it to DATA's labels")
    fit.add_argument("--estimator", choices=ESTIMATORS, default="fm",
                     help="fm: factorization machine, pn: polynomial network, bayes-fm: "
                          "Bayesian factorization machine by Gibbs sampling (libFM's "
                          "-method mcmc), vb-fm: the same model at degree 2 by "
                          "variational inference, ffm: field-aware factorization "
                          "machine, libffm's model, its fields read from a libffm file, "
                          "fwfm: field-weighted factorization machine, one vector per "
                          "feature and a learned weight per pair of fields, its fields "
                          "read from a libffm file (default fm)")
    fit.add_argument("--validation", metavar="FILE",
                     help="validation data: its score (RMSE, or accuracy for a "
                          "classifier, and its log-loss for an ffm or fwfm; ranking: the AUC of "
                          "its positives) is reported "
                          "every epoch, training stops after --n-iter-no-change epochs "
                          "without improving its loss, and the best model is kept "
                          "(bayes-fm: the score of the prediction averaged over the "
                          "sweeps after the burn-in is reported every sweep, the saved "
                          "model's, which averages --n-kept of them, at the end; vb-fm: "
                          "the fitted model's, once)")
    fit.add_argument("--stream", action="store_true",
                     help="read TRAIN one block at a time (files larger than memory; "
                          "svmlight or libffm, whose fields a first pass reads) and "
                          "train by partial_fit (solver sgd or adagrad; adagrad if "
                          "--solver is not given); --max-iter counts passes over TRAIN "
                          "(not for --task ranking)")
    fit.add_argument("--n-features", type=positive_int, metavar="N",
                     help="number of features (default: the largest index in TRAIN and "
                          "--validation)")
    fit.add_argument("--dtype", choices=("float64", "float32"), default="float64",
                     help="precision of the data and the model (default float64)")
    _add_relation_option(fit, "R.train for TRAIN, R.test for --validation")
    fit.add_argument("--item-columns", type=column_range, metavar="START:STOP",
                     help="--task ranking: the zero-based columns START..STOP-1 of the "
                          "item part of the rows (for a one-based file, its indices minus "
                          "one); the columns before START identify the user")
    fit.add_argument("--rated-items", type=column_range, metavar="START:STOP",
                     help="--task ranking --loss ials: the zero-based columns of the "
                          "user's part that hold the set of items the user rated, column "
                          "START + t for the item whose id is column t of the item part; "
                          "each observed pair is fitted with its own item left out of the "
                          "set")
    fit.add_argument("--meta", metavar="FILE",
                     help="libFM's groups file of TRAIN's features (one group number per "
                          "line): each group gets its own prior (bayes-fm, vb-fm)")
    _add_index_base(fit, "detected from TRAIN and --validation")
    group = fit.add_argument_group("estimator parameters")
    for name, kind, choices, text, default in PARAMETERS:
        flags = [option(name)] + (["--seed"] if name == "random_state" else [])
        text = f"{text} (default {default})"
        if kind == "bool":
            group.add_argument(*flags, dest=name, action=argparse.BooleanOptionalAction,
                               default=argparse.SUPPRESS, help=text)
        else:
            group.add_argument(*flags, dest=name, type=kind, choices=choices,
                               default=argparse.SUPPRESS, help=text,
                               metavar=None if choices else name.upper())
    _add_output_options(fit)
    return fit


MODEL_HELP = ("a model file written by `polylite fit` or by an estimator's save() in "
              "Python (.npz)")


def _add_predict(sub):
    predict = sub.add_parser("predict", help="predict with a saved model",
                             usage="polylite predict MODEL DATA [options]",
                             description="Write one prediction per line of DATA: values "
                             "for a regressor, labels for a classifier, or with --proba "
                             "the probability of the positive class (two classes) or of "
                             "every class in the order `polylite info` lists them.")
    predict.add_argument("model", metavar="MODEL", help=MODEL_HELP)
    predict.add_argument("data", metavar="DATA", help="data (its labels are not used)")
    predict.add_argument("--output", "-o", metavar="FILE", default="-",
                         help="where to write (default: stdout): a new or regular file, "
                              "written only on success, or a device or FIFO, written "
                              "into as the rows are predicted; not an input")
    predict.add_argument("--proba", action="store_true",
                         help="class probabilities (classifiers with the logistic loss)")
    _add_data_options(predict)
    return predict


def _add_evaluate(sub):
    evaluate = sub.add_parser("evaluate", help="score a saved model on labelled data",
                              usage="polylite evaluate MODEL DATA [options]",
                              description="Score MODEL on DATA: RMSE, MAE and R^2 for a "
                              "regressor; accuracy, log-loss (logistic loss) and ROC AUC "
                              "for a classifier (DATA's labels read with the threshold of "
                              "a model fitted with --binary-threshold); the mean AUC of "
                              "DATA's positives for a ranker.  A ranker's AUC here differs "
                              "from the validation AUC of fit's progress lines: here every "
                              "positive of DATA is ranked against every catalogue item its "
                              "user has no interaction with in DATA (the training data are "
                              "not known, so items seen in training count as candidates); "
                              "fit ranks a sample of the validation positives against the "
                              "items their users have no interaction with in TRAIN or the "
                              "validation file.")
    evaluate.add_argument("model", metavar="MODEL", help=MODEL_HELP)
    evaluate.add_argument("data", metavar="DATA")
    evaluate.add_argument("--json", action="store_true", help="print one JSON object")
    _add_data_options(evaluate)
    return evaluate


def _add_info(sub):
    info = sub.add_parser("info", help="describe a saved model",
                          usage="polylite info MODEL [--json]",
                          description="The estimator, its parameters, the shapes of its "
                          "fitted arrays, the polylite version and file format that wrote "
                          "it, and how `polylite fit` read its training data.")
    info.add_argument("model", metavar="MODEL", help=MODEL_HELP)
    info.add_argument("--json", action="store_true", help="print one JSON object")
    return info


def _add_demo(sub):
    demo = sub.add_parser("demo", help="fit an FM on a synthetic recommender (main job)",
                          usage="polylite demo [options]",
                          description="Fit a factorization machine on a synthetic "
                          "recommender data set and compare it with a linear model.")
    demo.add_argument("--quick", action="store_true",
                      help="a run of a few seconds: 20000 rows, 500 users, 300 items "
                           "(unless given)")
    demo.add_argument("--samples", type=lambda t: bounded(int, t, 10), default=None,
                      help="rows (>= 10; default 200000)")
    demo.add_argument("--users", type=positive_int, default=None,
                      help="users (default 5000)")
    demo.add_argument("--items", type=positive_int, default=None,
                      help="items (default 3000)")
    demo.add_argument("--degree", type=lambda t: bounded(int, t, 2), default=2,
                      help="degree >= 2 of the planted model and the FM (default 2)")
    demo.add_argument("--n-components", "--components", dest="components",
                      type=positive_int, default=8, help="rank of the FM (default 8)")
    demo.add_argument("--beta", type=lambda t: bounded(float, t, 0.0), default=1e-5,
                      help="L2 penalty of the factors, per sample (default 1e-5)")
    demo.add_argument("--epochs", "--max-iter", dest="epochs", type=positive_int,
                      default=100, help="maximum epochs (default 100)")
    demo.add_argument("--seed", type=lambda t: bounded(int, t, 0), default=0,
                      help="random seed (default 0)")
    return demo


def _add_data_options(parser):
    """The options of predict and evaluate about DATA and what they print."""
    parser.add_argument("--strict-features", action="store_true",
                        help="refuse DATA if it has features beyond the model's (an error "
                             "naming the largest index); by default they are dropped "
                             "with a warning that counts them")
    _add_relation_option(parser, "R.test for DATA")
    _add_index_base(parser, "as the model's training file")
    _add_output_options(parser)


def _add_index_base(parser, default_text):
    """--zero-based / --one-based (default: ``default_text``) and --chunk-bytes."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--zero-based", dest="zero_based", action="store_const", const=True,
                       help="feature indices start at 0, libFM's convention (default: "
                       f"{default_text})")
    group.add_argument("--one-based", dest="zero_based", action="store_const", const=False,
                       help="feature indices start at 1, svmlight/libsvm's convention")
    parser.set_defaults(zero_based=None)
    parser.add_argument("--format", choices=FORMATS, default="auto",
                        help="the data files' text: svmlight (svmlight/libsvm/libFM, label "
                             "index:value ...) or libffm (label field:feature:value ..., "
                             "indices from 0); auto: libffm for names ending in .ffm or "
                             ".libffm (also compressed: .ffm.gz), else svmlight; predict "
                             "and evaluate read DATA as the model's training file was "
                             "read unless its name or --format says otherwise")
    # None: the reader's default, set when a command runs (the reader needs NumPy).
    parser.add_argument("--chunk-bytes", type=byte_size, default=None, metavar="SIZE",
                        help="text read and parsed at once (default 64M); bounds the "
                             "memory of --stream, predict and evaluate")


def _add_relation_option(parser, which):
    parser.add_argument(
        "--relation", metavar="R1,R2", type=relation_names,
        help=f"libFM's relation blocks (-relation): for each base name R, the table R.x "
             f"(libFM's binary format) and the table row of each line in {which}; their "
             f"columns follow the data file's, in this order (docs: 'Relational data')")


def _add_output_options(parser):
    parser.add_argument("--progress", choices=("auto", "bar", "lines", "none"),
                        default="auto", help="progress on stderr: a bar on a terminal, "
                        "plain lines otherwise (default auto)")
    parser.add_argument("--quiet", "-q", action="store_true",
                        help="no progress and no summary")
