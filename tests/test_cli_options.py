"""The command line's options: libFM's options answered with polylite's, unknown options
with the closest valid ones, each a usage error of the command (exit status 2); the
option tables the parsers are built from, checked against the estimators."""
import re
import shlex
from pathlib import Path

import numpy as np
import pytest

from _cli import run_cli as _run

MIGRATION = Path(__file__).resolve().parent.parent / "docs" / "user_guide" / "migration.rst"


def _usage_error(err, command):
    """A usage error: the command's usage line, then one error line."""
    lines = err.strip().splitlines()
    assert len(lines) == 2, err
    prog = f"polylite {command}" if command else "polylite"
    assert lines[0].startswith(f"usage: {prog} "), err
    assert lines[1].startswith(f"{prog}: error: "), err
    return lines[1][len(f"{prog}: error: "):]


# ---- libFM's options ---------------------------------------------------------------------

def _libfm_error(err, command):
    """A usage error answering libFM's options: the command's usage line, the answers
    one a line, then the polylite command lines: (answers, command lines)."""
    lines = err.strip().splitlines()
    prog = f"polylite {command}" if command else "polylite"
    assert lines[0].startswith(f"usage: {prog} "), err
    assert lines[1] == f"{prog}: error: these are libFM's options:", err
    split = lines.index("the same in polylite:")
    assert all(line.startswith("  ") for line in lines[2:split] + lines[split + 1:]), err
    return ([line[2:] for line in lines[2:split]],
            [shlex.split(line) for line in lines[split + 1:]])


@pytest.mark.parametrize("options, answer", [
    (["-dim", "1,1,8"], "-dim 1,1,8 is --n-components 8 (the intercept and the linear "
                        "term are fitted by default)"),
    (["-dim", "0,1,4"], "-dim 0,1,4 is --no-fit-intercept --n-components 4 (the linear "
                        "term is fitted by default)"),
    (["-dim", "0,0,2"], "-dim 0,0,2 is --no-fit-intercept --no-fit-linear "
                        "--n-components 2"),
    (["-iter", "100"], "-iter 100 is --max-iter 100"),
    (["-task", "r"], "-task r is --task regression"),
    (["-task", "c"], "-task c is --task classification --binary-threshold 0"),
    (["-out", "p.txt"], "-out p.txt is polylite predict MODEL DATA -o p.txt"),
    (["-method", "als"], "-method als is --solver cd"),
    (["-method", "sgd"], "-method sgd is --solver sgd --learning-rate constant"),
    (["-method", "mcmc"], "-method mcmc is --estimator bayes-fm"),
    (["-init_stdev", "0.1"], "-init_stdev 0.1 is --init-scale 0.1"),
    # train.libfm does not exist: n is named, not computed.
    (["-regular", "0,0.5,0.5"], "-regular 0,0.5,0.5 is --alpha 0.5/n --beta 0.5/n (n the "
                                "number of training rows"),
    (["-train", "t.libfm"], "-train t.libfm is polylite fit t.libfm --model MODEL"),
    (["-test", "t.libfm"], "-test t.libfm is polylite predict MODEL t.libfm"),
    (["-learn_rate", "0.01"], "-learn_rate 0.01 is --eta0 0.01"),
    (["-validation", "v.libfm"], "-validation v.libfm is --validation v.libfm"),
    (["-relation", "user,item"], "-relation user,item is --relation user,item"),
    (["-verbosity", "1"], "-verbosity 1 has no polylite option: progress is shown"),
    (["-seed", "3"], "-seed 3 is --seed 3"),
    (["-meta", "groups.txt"], "-meta groups.txt is --meta groups.txt"),
    (["-save_model", "m.fm"], "-save_model m.fm is --model m.fm"),
    (["-cache_size", "1000"], "-cache_size 1000 is --stream (TRAIN read one block"),
    (["-rlog", "log.txt"], "-rlog log.txt has no polylite option"),
    (["-help"], "-help is --help"),
    (["--init_stdev", "0.1"], "-init_stdev 0.1 is --init-scale 0.1"),
    (["-iter"], "-iter N is --max-iter N"),  # no value given
])
def test_libfm_options_name_the_polylite_options(capsys, options, answer):
    status, out, err = _run(capsys, "fit", "train.libfm", "--model", "m.npz", *options)
    assert status == 2 and out == ""
    answers, _ = _libfm_error(err, "fit")
    assert len(answers) == 1 and answers[0].startswith(answer)


def test_several_libfm_options_are_answered_together(capsys):
    # (-method and -meta begin as -m, --model's short option: they must not reach it.)
    status, _, err = _run(capsys, "fit", "t.libfm", "-m", "m.npz", "-dim", "1,1,8",
                          "-method", "mcmc", "-meta", "g.txt", "-iter", "50")
    assert status == 2
    answers, commands = _libfm_error(err, "fit")
    assert answers == [
        "-dim 1,1,8 is --n-components 8 (the intercept and the linear term are fitted "
        "by default)",
        "-method mcmc is --estimator bayes-fm (with --n-iter sweeps)",
        "-meta g.txt is --meta g.txt (with --estimator bayes-fm or vb-fm)",
        "-iter 50 is --n-iter 50 (sweeps of the Gibbs sampler)"]  # (with -method mcmc)
    assert commands == [["polylite", "fit", "t.libfm", "-m", "m.npz", "--n-components",
                         "8", "--estimator", "bayes-fm", "--meta", "g.txt", "--n-iter",
                         "50"]]


def test_a_libfm_command_line_without_a_command(capsys):
    status, _, err = _run(capsys, "-task", "r", "-train", "train.libfm", "-test",
                          "test.libfm", "-dim", "1,1,8", "-out", "p.txt", "-verbosity", 1)
    assert status == 2
    answers, commands = _libfm_error(err, None)
    assert "-train train.libfm is polylite fit train.libfm --model MODEL" in answers
    assert "-out p.txt is polylite predict MODEL DATA -o p.txt (with --proba for a " \
        "classifier's probabilities, as libFM writes them)" in answers
    assert commands == [
        ["polylite", "fit", "--task", "regression", "train.libfm", "--n-components", "8",
         "--model", "MODEL"],
        ["polylite", "predict", "MODEL", "test.libfm", "-o", "p.txt"]]


@pytest.mark.parametrize("command", ["predict", "evaluate"])
def test_libfm_options_of_predict_and_evaluate(capsys, command):
    status, _, err = _run(capsys, command, "m.npz", "-test", "test.libfm", "-out", "p.txt")
    assert status == 2
    answers, commands = _libfm_error(err, command)
    assert answers[1].startswith("-out p.txt is polylite predict")
    assert commands == [["polylite", command, "m.npz", "test.libfm",
                         *(["-o", "p.txt"] if command == "predict" else [])]]


def test_the_polylite_command_runs_with_the_penalty_per_training_row(capsys, tmp_path):
    """libFM's summed penalty divided by the rows of the training file, and the command
    line to paste, which fits and saves the model."""
    train = tmp_path / "train.libfm"
    rng = np.random.RandomState(0)
    train.write_text("".join(f"{rng.randn():.3f} {i % 7}:1 {7 + i % 5}:1\n"
                             for i in range(400)))
    model = tmp_path / "m.npz"
    status, _, err = _run(capsys, "fit", train, "-m", model, "-dim", "1,1,2", "-iter", 3,
                          "-regular", "0,0.2,0.01", "-seed", 1)
    assert status == 2
    answers, commands = _libfm_error(err, "fit")
    assert answers[2] == (f"-regular 0,0.2,0.01 is --alpha 0.0005 --beta 2.5e-05 (0.2/n "
                          f"and 0.01/n, n = 400 rows in {train}: libFM penalises the sum "
                          f"of the losses, polylite their mean; the intercept is not "
                          f"penalised)")
    assert commands == [["polylite", "fit", str(train), "-m", str(model),
                         "--n-components", "2", "--max-iter", "3", "--alpha", "0.0005",
                         "--beta", "2.5e-05", "--seed", "1"]]
    status, _, err = _run(capsys, *commands[0][1:], "-q")
    assert status == 0, err
    import polylite
    fitted = polylite.load(model)
    assert (fitted.alpha, fitted.beta, fitted.n_components) == (0.0005, 2.5e-05, 2)


def _libfm_table():
    """The rows of migration.rst's libFM table: (libFM cell, polylite command cell)."""
    text = MIGRATION.read_text()
    start = text.index(".. list-table::", text.index("\nlibFM\n"))
    rows, row = [], None
    for line in text[start:].splitlines()[4:]:
        if line.startswith("   * - "):
            row = [line[len("   * - "):]]
            rows.append(row)
        elif line.startswith("     - "):
            row.append(line[len("     - "):])
        elif line.startswith("       ") and row:
            row[-1] += " " + line.strip()
        elif line.strip() and not line.startswith(" "):
            break
    return [(cells[0], cells[1]) for cells in rows]


def _options(text):
    """The long options ``text`` names; ``--[no-]x`` names --x and --no-x."""
    names = set()
    for name in re.findall(r"--(?:\[no-\])?[a-z][a-z0-9-]*", text):
        names |= {name.replace("[no-]", ""), name.replace("[no-]", "no-")}
    return names


@pytest.mark.skipif(not MIGRATION.exists(), reason="no docs folder")
def test_libfm_answers_agree_with_the_migration_guide():
    from polylite.cli._hints import LIBFM, Context
    table = _libfm_table()
    examples = {"-task": ["r", "c"], "-method": ["als", "sgd", "sgda", "mcmc"],
                "-dim": ["0,0,8"], "-regular": ["0,0.5,0.5"]}
    for name, (metavar, answer_of) in LIBFM.items():
        for value in examples.get(name, [metavar]):
            answer = answer_of(value, Context(None, {}, None)).text
            # The rows of the option (of the value, for -method's).
            rows = [command for libfm, command in table
                    if re.search(rf"``{re.escape(name)}(?![_a-z])", libfm) and
                    (name != "-method" or f"-method {value}``" in libfm)]
            assert rows, f"migration.rst's libFM table has no row for {name} {value}"
            documented = set().union(*(_options(row) for row in rows))
            missing = _options(answer) - documented
            assert not missing, (f"the answer to {name} {value} names {sorted(missing)}, "
                                 f"which its row of migration.rst does not")


# ---- unknown options ---------------------------------------------------------------------

@pytest.mark.parametrize("argv, command, answer", [
    (["fit", "t.svm", "-m", "m.npz", "--n-compnents", "4"], "fit",
     "unrecognized option --n-compnents (did you mean --n-components?)"),
    # A misspelt required option: named, rather than the option it fails to give.
    (["fit", "t.svm", "--modle", "m.npz"], "fit",
     "unrecognized option --modle (did you mean --model?)"),
    (["fit", "t.svm", "-m", "m.npz", "--valdation=v.svm"], "fit",
     "unrecognized option --valdation (did you mean --validation?)"),
    (["predict", "m.npz", "d.svm", "--porba"], "predict",
     "unrecognized option --porba (did you mean --proba?)"),
    (["evaluate", "m.npz", "d.svm", "--jsno"], "evaluate",
     "unrecognized option --jsno (did you mean --json?)"),
    (["info", "m.npz", "--xyzzy"], "info",
     "unrecognized option --xyzzy (see polylite info --help)"),
    (["demo", "--smaples", "100"], "demo",
     "unrecognized option --smaples (did you mean --samples?)"),
    (["--verison"], None, "unrecognized option --verison (did you mean --version?)"),
    # Options of another command are not this one's.
    (["predict", "m.npz", "d.svm", "--n-components", "4"], "predict",
     "unrecognized option --n-components (see polylite predict --help)"),
    (["info", "m.npz", "extra.npz"], "info", "unrecognized arguments: extra.npz"),
])
def test_unknown_options_name_the_closest_valid_ones(capsys, argv, command, answer):
    status, out, err = _run(capsys, *argv)
    assert status == 2 and out == ""
    assert _usage_error(err, command) == answer


def test_values_that_look_like_options_still_parse(tmp_path, capsys):
    # Negative numbers are values; '-' is stdout; abbreviations stay accepted.
    rng = np.random.RandomState(0)
    path = tmp_path / "d.svm"
    path.write_text("".join(f"{rng.randint(3) - 1} 0:{rng.rand():.3f} 1:{rng.rand():.3f}\n"
                            for _ in range(40)))
    status, _, err = _run(capsys, "fit", path, "-m", tmp_path / "m.npz", "--task",
                          "classification", "--binary-threshold", "-0.5", "--n-jobs", "-1",
                          "--max-it", "2", "-q")
    assert status == 0, err
    status, out, err = _run(capsys, "predict", tmp_path / "m.npz", path, "-o", "-", "-q")
    assert status == 0 and len(out.split()) == 40, err


# ---- what the parsers state of the estimators --------------------------------------------

def _default_text(name):
    """The defaults of parameter ``name`` in the estimators that have it, as --help
    shows them."""
    from polylite.cli._models import estimators
    defaults = {}
    for family, entry in estimators().items():
        for task, cls in entry.classes.items():
            params = cls().get_params()
            if name in params:
                label = "ranking" if task == "ranking" else family
                defaults.setdefault(repr(params[name]), []).append(label)
    if len(defaults) == 1:
        return next(iter(defaults))
    return ", ".join(f"{value} ({'/'.join(sorted(set(families)))})"
                     for value, families in defaults.items())


def test_the_parameter_table_matches_the_estimators():
    from polylite.cli._models import estimators
    from polylite.cli._parser import ESTIMATORS, PARAMETERS, TASKS
    from polylite._engine import solvers as _solvers
    from polylite.polynomial._base import _PolynomialModel
    from polylite.polynomial._classifier import CLASSIFIER_LOSSES
    from polylite.polynomial.fm import FM_KERNELS, LOWER_DEGREES
    from polylite.polynomial.pn import OUTPUT_WEIGHTS, PN_LOWER_DEGREES
    from polylite.ranking.fm import NEGATIVES, RANKER_LOSSES, SIDE_SOLVERS
    families = estimators()
    assert ESTIMATORS == tuple(families)
    assert set(TASKS) == {task for family in families.values() for task in family.classes}
    choices = {
        "lower_degrees": (*LOWER_DEGREES, *PN_LOWER_DEGREES),
        "kernel": FM_KERNELS,
        "output_weights": OUTPUT_WEIGHTS,
        "loss": (*CLASSIFIER_LOSSES, *RANKER_LOSSES),
        "negatives": NEGATIVES,
        "side_solver": SIDE_SOLVERS,
        "solver": (*_PolynomialModel._solvers, "ftrl"),  # ftrl: fm, ffm and fwfm
        "learning_rate": tuple(_solvers.SCHEDULES),
    }
    parameters = set()
    for family in families.values():
        for cls in family.classes.values():
            parameters |= set(cls().get_params())
    for name, kind, allowed, _, default in PARAMETERS:
        assert name in parameters, name
        assert default == _default_text(name), name
        if allowed is None:
            assert name not in choices, name
        else:
            assert tuple(allowed) == tuple(dict.fromkeys(choices[name])), name


def test_the_help_states_the_default_chunk_size(capsys):
    from polylite import _svmlight
    assert _svmlight.DEFAULT_CHUNK_BYTES == 64 * 2**20
    status, out, _ = _run(capsys, "predict", "--help")
    assert status == 0 and "(default 64M)" in " ".join(out.split())
