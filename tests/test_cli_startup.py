"""What ``polylite --help`` costs: the parsers are built without NumPy, scikit-learn or an
estimator, and ``import polylite`` imports its names on first use, each still there and
``polylite.load`` still reading every kind of model file in a fresh process.  Each check
runs in a new interpreter (the test process has imported everything)."""
import importlib.metadata
import json
import subprocess
import sys

import numpy as np
import pytest

import polylite
from polylite.cli import main


def _python(code, cwd):
    """Run ``code`` in a new interpreter (from ``cwd``, not the source tree: `-c` would
    import the source folder, which lacks the compiled modules of a regular install);
    its stdout parsed as JSON."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


HEAVY = ("numpy", "scipy", "sklearn", "polylite.polynomial", "polylite._io")


def test_the_parsers_import_no_heavy_module(tmp_path):
    loaded = _python(f"""
import contextlib, io, json, sys
import polylite.cli
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    codes = [polylite.cli.main(argv) for argv in (["--help"], ["--version"],
             ["fit", "--help"], ["predict", "--help"], ["evaluate", "--help"],
             ["info", "--help"], ["demo", "--help"], ["fit", "t.svm", "-dim", "1,1,8"],
             ["fit", "t.svm", "-m", "m.npz", "--n-compnents", "4"],
             ["fit", "t.svm", "-m", "m.npz", "--degree", "one"])]
print(json.dumps([codes, [name for name in {list(HEAVY)!r} if name in sys.modules]]))
""", tmp_path)
    assert loaded == [[0, 0, 0, 0, 0, 0, 0, 2, 2, 2], []]


def test_import_polylite_is_lazy_and_complete(tmp_path):
    names, loaded, attributes, missing = _python("""
import json, sys
import polylite
loaded = [name for name in ("numpy", "sklearn") if name in sys.modules]
names = sorted(polylite.__all__)
attributes = [name for name in names if not hasattr(polylite, name)]
try:
    polylite.no_such_name
    missing = "no error"
except AttributeError as exc:
    missing = str(exc)
print(json.dumps([names, loaded, attributes, missing]))
""", tmp_path)
    assert loaded == []
    assert names == sorted(polylite.__all__) and attributes == []
    assert missing == "module 'polylite' has no attribute 'no_such_name'"


def test_public_names_are_the_modules_objects():
    from polylite.polynomial import FactorizationMachineRegressor
    assert polylite.FactorizationMachineRegressor is FactorizationMachineRegressor
    from polylite import _io
    assert (polylite.load, polylite.save, polylite.ModelFileError) == \
        (_io.load, _io.save, _io.ModelFileError)
    assert set(polylite.__all__) <= set(dir(polylite))
    assert {"kernels", "datasets", "polynomial"} <= set(dir(polylite))
    assert polylite.kernels.predict is not None  # submodules as attributes


def test_the_version_is_the_installed_metadata(tmp_path, capsys):
    assert polylite.__version__ == importlib.metadata.version("polylite")
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"polylite {polylite.__version__}\n"
    # Read from the metadata, not written in the package a second time.
    version = _python("""
import importlib.metadata, json
importlib.metadata.version = lambda name: "9.8.7" if name == "polylite" else None
import polylite
print(json.dumps(polylite.__version__))
""", tmp_path)
    assert version == "9.8.7"


def _models():
    """One fitted model of every kind a model file may hold."""
    from sklearn.pipeline import make_pipeline
    rng = np.random.RandomState(0)
    X = rng.randn(60, 4)
    y = X[:, 0] + X[:, 1] * X[:, 2]
    labels = (y > 0).astype(int)
    users = np.repeat(np.arange(6), 2)  # two of the four items each
    items = (users + np.tile([0, 1], 6)) % 4
    rows = np.zeros((12, 10))
    rows[np.arange(12), users] = 1
    rows[np.arange(12), 6 + items] = 1
    kw = dict(n_components=2, max_iter=3, random_state=0)
    bayes = dict(n_components=2, n_iter=4, n_burn_in=1, n_kept=2, random_state=0)
    return {
        "FactorizationMachineRegressor": polylite.FactorizationMachineRegressor(**kw)
        .fit(X, y),
        "FactorizationMachineClassifier": polylite.FactorizationMachineClassifier(**kw)
        .fit(X, labels),
        "PolynomialNetworkRegressor": polylite.PolynomialNetworkRegressor(**kw).fit(X, y),
        "PolynomialNetworkClassifier": polylite.PolynomialNetworkClassifier(**kw)
        .fit(X, labels),
        "BayesianFactorizationMachineRegressor":
            polylite.BayesianFactorizationMachineRegressor(**bayes).fit(X, y),
        "BayesianFactorizationMachineClassifier":
            polylite.BayesianFactorizationMachineClassifier(**bayes).fit(X, labels),
        "MultiOutputPolynomialRegressor":
            polylite.MultiOutputPolynomialRegressor(max_basis=2).fit(X, np.c_[y, -y]),
        "MultiOutputPolynomialClassifier":
            polylite.MultiOutputPolynomialClassifier(max_basis=2).fit(X, labels),
        "OrdinalMcRankRegressor":
            polylite.OrdinalMcRankRegressor(max_basis=2).fit(X, np.digitize(y, [-1, 1])),
        "FactorizationMachineRanker": polylite.FactorizationMachineRanker(
            item_columns=(6, 10), **kw).fit(rows, np.ones(12)),
        "Pipeline": make_pipeline(polylite.FieldEncoder(),
                                  polylite.FactorizationMachineRegressor(**kw))
        .fit({"user_id": users, "item_id": items}, y[:12]),
    }


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_load_reads_every_kind_of_model_in_a_fresh_process(tmp_path):
    paths = {}
    for name, model in _models().items():
        paths[name] = str(tmp_path / f"{name}.npz")
        polylite.save(model, paths[name])
    loaded = _python(f"""
import json
import polylite
print(json.dumps({{name: type(polylite.load(path)).__name__
                  for name, path in {paths!r}.items()}}))
""", tmp_path)
    assert loaded == {name: name for name in paths}


def test_info_reads_the_file_without_scikit_learn(tmp_path):
    """``polylite info`` describes a model from its file: no estimator, no sklearn."""
    from polylite import BayesianFactorizationMachineRegressor
    from polylite.datasets import make_recommender
    X, y = make_recommender(300, n_users=20, n_items=15, random_state=0)
    path = tmp_path / "m.npz"
    BayesianFactorizationMachineRegressor(n_components=2, n_iter=6,
                                          random_state=0).fit(X, y).save(path)
    status, loaded, info = _python(f"""
import contextlib, io, json, sys
import polylite.cli
out = io.StringIO()
with contextlib.redirect_stdout(out):
    status = polylite.cli.main(["info", {str(path)!r}, "--json"])
heavy = ("sklearn", "joblib", "threadpoolctl", "tqdm", "pandas", "dask",
         "polylite.polynomial", "polylite.bayes")
print(json.dumps([status, [name for name in heavy if name in sys.modules],
                  json.loads(out.getvalue())]))
""", tmp_path)
    assert status == 0 and loaded == []
    assert info["estimator"] == "BayesianFactorizationMachineRegressor"
    assert info["n_features_in_"] == X.shape[1]
    assert info["arrays"]["w_samples"]["shape"][-1] == X.shape[1]


@pytest.mark.parametrize("kind", ["fm", "fm-shared", "fm-all-subsets", "pn", "pn-float32",
                                  "bayes", "bayes-exact", "bayes-float32"])
def test_predict_and_evaluate_read_a_regressor_from_its_file(kind, tmp_path):
    """A factorization machine, polynomial network or Bayesian factorization machine
    regressor predicts from its file's arrays, without the estimator, exactly as the
    loaded estimator does; anything else, and a file load refuses, goes through
    polylite.load."""
    import scipy.sparse as sp
    from polylite import (BayesianFactorizationMachineClassifier,
                          BayesianFactorizationMachineRegressor,
                          FactorizationMachineRegressor, PolynomialNetworkRegressor)
    from polylite.cli._common import Failure
    from polylite.cli._models import FileModel, load_model
    from polylite.datasets import make_recommender
    X, y = make_recommender(400, n_users=30, n_items=20, random_state=0)
    X = sp.csr_matrix(X)
    if kind.endswith("float32"):
        X = X.astype(np.float32)
    model = {"fm": FactorizationMachineRegressor(degree=3),
             "fm-shared": FactorizationMachineRegressor(degree=3, lower_degrees="shared"),
             "fm-all-subsets": FactorizationMachineRegressor(kernel="all-subsets"),
             "pn": PolynomialNetworkRegressor(lower_degrees="augment"),
             "pn-float32": PolynomialNetworkRegressor(fit_linear=False, max_iter=3),
             }.get(kind, BayesianFactorizationMachineRegressor(degree=3, n_iter=8))
    if not kind.startswith("bayes"):
        model.set_params(max_iter=3)
    model.set_params(n_components=3, random_state=0).fit(X, y)
    path = str(tmp_path / "m.npz")
    model.save(path, **({"exact": True} if kind.endswith("exact") else {}))
    from_file, header = load_model(path, "predict", from_file=True)
    assert isinstance(from_file, FileModel)
    assert type(from_file).__name__ == type(model).__name__
    assert from_file.n_features_in_ == X.shape[1] and from_file.P_.dtype == X.dtype
    np.testing.assert_array_equal(from_file.predict(X), polylite.load(path).predict(X))
    # A file load refuses: load's error.
    header, arrays = polylite._io.read_archive(path)
    factors = "P_samples" if kind.startswith("bayes") else "P"
    arrays[factors].flat[0] = np.nan
    del header["arrays"]
    polylite._io._write_archive(path, header, arrays)
    with pytest.raises(Failure, match=f"array '{factors}' contains NaN or infinity"):
        load_model(path, "predict", from_file=True)
    # Another kind of model: the estimator.
    BayesianFactorizationMachineClassifier(n_components=2, n_iter=4).fit(
        X, y > np.median(y)).save(path)
    estimator, _ = load_model(path, "predict", from_file=True)
    assert type(estimator) is BayesianFactorizationMachineClassifier


@pytest.mark.parametrize("kind", ["fm-binary", "fm-3-classes", "fm-hinge", "pn-strings",
                                  "fm-float32"])
def test_predict_and_evaluate_read_a_classifier_from_its_file(kind, tmp_path):
    """A factorization machine or polynomial network classifier predicts its scores,
    labels and probabilities from its file's arrays exactly as the loaded estimator."""
    import scipy.sparse as sp
    from polylite import FactorizationMachineClassifier, PolynomialNetworkClassifier
    from polylite.cli._models import FileClassifier, load_model
    from polylite.datasets import make_recommender
    X, y = make_recommender(400, n_users=30, n_items=20, random_state=0)
    X = sp.csr_matrix(X).astype(np.float32 if kind.endswith("float32") else np.float64)
    labels = np.digitize(y, [np.median(y)]) if kind != "fm-3-classes" else np.digitize(
        y, np.quantile(y, [1 / 3, 2 / 3]))
    if kind == "pn-strings":
        labels = np.array(["high", "low"])[labels]
    model = (PolynomialNetworkClassifier(lower_degrees="augment") if kind.startswith("pn")
             else FactorizationMachineClassifier(
                 degree=3, loss="squared_hinge" if kind == "fm-hinge" else "logistic"))
    model.set_params(n_components=3, max_iter=3, random_state=0).fit(X, labels)
    path = str(tmp_path / "m.npz")
    model.save(path)
    from_file, _ = load_model(path, "predict", from_file=True)
    loaded = polylite.load(path)
    assert isinstance(from_file, FileClassifier) and from_file._is_classifier
    assert type(from_file).__name__ == type(model).__name__
    np.testing.assert_array_equal(from_file.classes_, loaded.classes_)
    assert from_file.classes_.dtype == loaded.classes_.dtype
    np.testing.assert_array_equal(from_file.decision_function(X),
                                  loaded.decision_function(X))
    np.testing.assert_array_equal(from_file.predict(X), loaded.predict(X))
    assert hasattr(from_file, "predict_proba") == hasattr(loaded, "predict_proba")
    if hasattr(loaded, "predict_proba"):
        np.testing.assert_array_equal(from_file.predict_proba(X), loaded.predict_proba(X))


def test_evaluate_computes_the_regression_scores_as_scikit_learn_does():
    from sklearn import metrics
    from polylite.cli._models import _regression_metrics
    rng = np.random.default_rng(0)
    y, predicted = rng.normal(size=50), rng.normal(size=50)
    scores = _regression_metrics(y, predicted)
    np.testing.assert_allclose(
        [scores["rmse"], scores["mae"], scores["r2"]],
        [np.sqrt(metrics.mean_squared_error(y, predicted)),
         metrics.mean_absolute_error(y, predicted), metrics.r2_score(y, predicted)],
        rtol=1e-12)
    constant = np.ones(4)
    assert _regression_metrics(constant, constant)["r2"] == metrics.r2_score(
        constant, constant) == 1.0
    assert _regression_metrics(constant, constant + 1)["r2"] == metrics.r2_score(
        constant, constant + 1) == 0.0
    assert np.isnan(_regression_metrics(y[:1], predicted[:1])["r2"])


def test_evaluate_computes_the_classification_scores_as_scikit_learn_does():
    from sklearn import metrics as reference
    from polylite.cli._models import _binary_auc, _log_loss, metrics

    class Model:
        _is_classifier = True
        classes_ = np.array([3, 5, 9])

    rng = np.random.default_rng(0)
    for n_classes in (2, 3):
        Model.classes_ = np.array([3, 5, 9])[:n_classes]
        y = Model.classes_[rng.integers(0, n_classes, 300)]
        proba = rng.dirichlet(np.ones(n_classes), 300)
        proba[:5] = np.eye(n_classes)[rng.integers(0, n_classes, 5)]  # clipped
        scores = np.round(proba[:, 1] * 20) if n_classes == 2 else proba  # ties
        predicted = Model.classes_[np.argmax(proba, axis=1)]
        got = metrics(Model, y, predicted, scores, proba)
        expected_auc = (reference.roc_auc_score(y == Model.classes_[1], scores)
                        if n_classes == 2 else
                        reference.roc_auc_score(y, proba, multi_class="ovr",
                                                labels=Model.classes_))
        np.testing.assert_allclose(
            [got["accuracy"], got["log_loss"], got["auc"]],
            [reference.accuracy_score(y, predicted),
             reference.log_loss(y, proba, labels=Model.classes_), expected_auc],
            rtol=1e-12)
    assert _binary_auc(np.array([True, False]), np.array([1.0, 1.0])) == 0.5
    assert _log_loss(np.array([0]), np.array([[0.0, 1.0]])) == -np.log(
        np.finfo(np.float64).eps)
