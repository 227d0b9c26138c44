"""The command line's options: libFM's options answered with polylite's, unknown options
with the closest valid ones, each a usage error of the command (exit status 2); the
option tables the parsers are built from, checked against the estimators."""
import re
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

@pytest.mark.parametrize("options, answer", [
    (["-dim", "1,1,8"], "libFM's -dim 1,1,8 is --n-components 8 (the intercept and the "
                        "linear term are fitted by default)"),
    (["-dim", "0,1,4"], "libFM's -dim 0,1,4 is --no-fit-intercept --n-components 4 (the "
                        "linear term is fitted by default)"),
    (["-dim", "0,0,2"], "libFM's -dim 0,0,2 is --no-fit-intercept --no-fit-linear "
                        "--n-components 2"),
    (["-iter", "100"], "libFM's -iter 100 is --max-iter 100"),
    (["-task", "r"], "libFM's -task r is --task regression"),
    (["-task", "c"], "libFM's -task c is --task classification --binary-threshold 0"),
    (["-out", "p.txt"], "libFM's -out p.txt is polylite predict MODEL DATA -o p.txt"),
    (["-method", "als"], "libFM's -method als is --solver cd"),
    (["-method", "sgd"], "libFM's -method sgd is --solver sgd --learning-rate constant"),
    (["-method", "mcmc"], "libFM's -method mcmc is --estimator bayes-fm"),
    (["-init_stdev", "0.1"], "libFM's -init_stdev 0.1 is --init-scale 0.1"),
    (["-regular", "0,0.5,0.5"], "libFM's -regular 0,0.5,0.5 is --alpha 0.5/n --beta "
                                "0.5/n, n the number of training rows"),
    (["-train", "t.libfm"], "libFM's -train t.libfm is polylite fit t.libfm --model MODEL"),
    (["-test", "t.libfm"], "libFM's -test t.libfm is polylite predict MODEL t.libfm"),
    (["-learn_rate", "0.01"], "libFM's -learn_rate 0.01 is --eta0 0.01"),
    (["-validation", "v.libfm"], "libFM's -validation v.libfm is --validation v.libfm"),
    (["-relation", "user,item"], "libFM's -relation user,item is --relation user,item"),
    (["-verbosity", "1"], "libFM's -verbosity 1 has no polylite option: progress is shown"),
    (["-seed", "3"], "libFM's -seed 3 is --seed 3"),
    (["-meta", "groups.txt"], "libFM's -meta groups.txt is --meta groups.txt"),
    (["-save_model", "m.fm"], "libFM's -save_model m.fm is --model m.fm"),
    (["-cache_size", "1000"], "libFM's -cache_size 1000 is --stream --chunk-bytes SIZE"),
    (["-rlog", "log.txt"], "libFM's -rlog log.txt has no polylite option"),
    (["-help"], "libFM's -help is --help"),
    (["--init_stdev", "0.1"], "libFM's -init_stdev 0.1 is --init-scale 0.1"),
    (["-iter"], "libFM's -iter N is --max-iter N"),  # no value given
])
def test_libfm_options_name_the_polylite_options(capsys, options, answer):
    status, out, err = _run(capsys, "fit", "train.libfm", "--model", "m.npz", *options)
    assert status == 2 and out == ""
    assert _usage_error(err, "fit").startswith(answer)


def test_several_libfm_options_are_answered_together(capsys):
    # (-method and -meta begin as -m, --model's short option: they must not reach it.)
    status, _, err = _run(capsys, "fit", "t.libfm", "-m", "m.npz", "-dim", "1,1,8",
                          "-method", "mcmc", "-meta", "g.txt")
    assert status == 2
    message = _usage_error(err, "fit")
    assert message.split("; ") == [
        "libFM's -dim 1,1,8 is --n-components 8 (the intercept and the linear term are "
        "fitted by default)",
        "libFM's -method mcmc is --estimator bayes-fm (with --n-iter sweeps)",
        "libFM's -meta g.txt is --meta g.txt (with --estimator bayes-fm or vb-fm)"]


def test_a_libfm_command_line_without_a_command(capsys):
    status, _, err = _run(capsys, "-task", "r", "-train", "train.libfm", "-test",
                          "test.libfm", "-dim", "1,1,8", "-out", "p.txt")
    assert status == 2
    message = _usage_error(err, None)
    assert "libFM's -train train.libfm is polylite fit train.libfm --model MODEL" \
        in message
    assert "libFM's -out p.txt is polylite predict MODEL DATA -o p.txt" in message


@pytest.mark.parametrize("command", ["predict", "evaluate"])
def test_libfm_options_of_predict_and_evaluate(capsys, command):
    status, _, err = _run(capsys, command, "m.npz", "test.libfm", "-out", "p.txt")
    assert status == 2
    assert _usage_error(err, command).startswith("libFM's -out p.txt is polylite predict")


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
    from polylite.cli._hints import LIBFM
    table = _libfm_table()
    examples = {"-task": ["r", "c"], "-method": ["als", "sgd", "sgda", "mcmc"],
                "-dim": ["0,0,8"], "-regular": ["0,0.5,0.5"]}
    for name, (metavar, equivalent) in LIBFM.items():
        for value in examples.get(name, [metavar]):
            answer = equivalent(value)
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
    from polylite.polynomial import _solvers
    from polylite.polynomial._base import _PolynomialModel
    from polylite.polynomial._classifier import CLASSIFIER_LOSSES
    from polylite.polynomial.fm import FM_KERNELS, LOWER_DEGREES
    from polylite.polynomial.pn import OUTPUT_WEIGHTS, PN_LOWER_DEGREES
    from polylite._losses import PAIRWISE_LOSSES
    from polylite.ranking.fm import NEGATIVES
    families = estimators()
    assert ESTIMATORS == tuple(families)
    assert set(TASKS) == {task for family in families.values() for task in family.classes}
    choices = {
        "lower_degrees": (*LOWER_DEGREES, *PN_LOWER_DEGREES),
        "kernel": FM_KERNELS,
        "output_weights": OUTPUT_WEIGHTS,
        "loss": (*CLASSIFIER_LOSSES, *PAIRWISE_LOSSES),
        "negatives": NEGATIVES,
        "solver": _PolynomialModel._solvers,
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
