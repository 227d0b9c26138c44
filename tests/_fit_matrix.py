"""The reference matrix of fits: every estimator family, solver, data layout, degree,
lower-degree variant, dtype, loss and weighting, fitted on small data with fixed seeds,
and its predictions.

``tests/test_fit_matrix.py`` refits every case and compares its predictions with those
recorded in ``tests/reference/fit_matrix.npz``: bit for bit where the recording came from
a machine of the same processor (the same compiled code and BLAS kernels), and within a
relative 1e-9 (float64) or 1e-4 (float32) elsewhere, where the BLAS calls in the Python
layers may round differently.  A change that moves results on purpose re-records the
affected cases, in a commit of its own that says which and why::

    python tests/_fit_matrix.py --record            # every case
    python tests/_fit_matrix.py --record --only bayes  # the cases whose id has "bayes"

Each case's fit is small (dozens of rows, a few epochs or sweeps): the whole matrix runs
in well under a minute.
"""
import argparse
import hashlib
import itertools
import os
import platform
import warnings

import numpy as np
import scipy.sparse as sp

REFERENCE = os.path.join(os.path.dirname(__file__), "reference", "fit_matrix.npz")


def processor():
    """What identifies this machine's arithmetic: its processor model (Linux), machine
    kind and the BLAS NumPy runs."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    blas = ""
    try:
        from threadpoolctl import threadpool_info
        blas = ",".join(sorted(f"{i.get('internal_api')}-{i.get('version')}-"
                               f"{i.get('architecture')}" for i in threadpool_info()
                               if i.get("user_api") == "blas"))
    except Exception:  # noqa: BLE001 (an unknown BLAS: compare with tolerances)
        pass
    return f"{platform.machine()}|{model}|{blas}"


# --------------------------------------------------------------------------------------
# Data: small, deterministic, the same on every machine
# --------------------------------------------------------------------------------------

def _ratings(n=80, n_users=9, n_items=7, n_side=3, seed=0):
    """Interactions of users and items with side features, as a RelationalMatrix, and
    targets of a planted degree-2 model."""
    from polylite.relational import RelationalMatrix, RelationBlock
    rng = np.random.RandomState(seed)
    users = sp.hstack([sp.identity(n_users),
                       sp.random(n_users, n_side, density=0.6, random_state=rng)]).tocsr()
    items = sp.hstack([sp.identity(n_items),
                       sp.random(n_items, n_side, density=0.6, random_state=rng)]).tocsr()
    direct = sp.random(n, 2, density=0.5, random_state=rng, format="csr")
    X = RelationalMatrix([RelationBlock(rng.randint(n_users, size=n), users),
                          RelationBlock(rng.randint(n_items, size=n), items), direct])
    dense = X.to_csr().toarray()
    V = rng.randn(dense.shape[1], 2) * 0.5
    y = dense @ rng.randn(dense.shape[1]) * 0.3 + 0.5 * (
        ((dense @ V) ** 2).sum(1) - ((dense ** 2) @ (V ** 2)).sum(1))
    return X, y + 0.1 * rng.randn(n), rng.rand(n) * 2


def _layout(X, layout, dtype):
    if layout == "relational":
        return X.astype(dtype)
    csr = X.to_csr().astype(dtype)
    return csr.toarray() if layout == "dense" else csr


def _targets(y, task):
    if task == "regression":
        return y
    if task == "binary":
        return np.where(y > np.median(y), "yes", "no")
    if task == "multiclass":
        return np.digitize(y, np.quantile(y, [0.33, 0.66]))
    if task == "ordinal":
        return 1 + np.digitize(y, np.quantile(y, [0.25, 0.5, 0.75]))
    raise ValueError(task)


# --------------------------------------------------------------------------------------
# Cases
# --------------------------------------------------------------------------------------

def _polynomial_cases():
    from polylite import (FactorizationMachineClassifier, FactorizationMachineRegressor,
                          PolynomialNetworkClassifier, PolynomialNetworkRegressor)
    families = [
        (FactorizationMachineRegressor, "regression", ["separate", "shared", "none"],
         [None]),
        (FactorizationMachineClassifier, "binary", ["separate", "none"],
         ["logistic", "squared_hinge"]),
        (PolynomialNetworkRegressor, "regression", ["augment", "none"], [None]),
        (PolynomialNetworkClassifier, "binary", ["augment"], ["logistic"]),
    ]
    for cls, task, variants, losses in families:
        relational = cls.__name__.startswith("Factorization")
        for solver, layout, degree, lower, dtype, loss, weighted in itertools.product(
                ["cd", "sgd", "adagrad", "lbfgs"],
                ["csr", "dense"] + (["relational"] if relational else []),
                [2, 3], variants, ["float64", "float32"], losses, [False, True]):
            if layout == "dense" and (degree == 3 or weighted):
                continue  # dense rows: the layouts' difference shows at degree 2
            if layout == "relational" and solver in ("sgd", "adagrad") and degree == 3:
                continue
            params = dict(degree=degree, n_components=3, lower_degrees=lower,
                          solver=solver, max_iter=4, tol=0.0, random_state=0)
            if loss is not None:
                params["loss"] = loss
            if solver in ("sgd", "adagrad"):
                params["eta0"] = 0.01
            yield dict(kind="polynomial", cls=cls, task=task, layout=layout,
                       dtype=dtype, weighted=weighted, params=params)
    # The all-subsets kernel, one-vs-rest classes, mini-batches, early stopping.
    yield dict(kind="polynomial", cls=FactorizationMachineRegressor, task="regression",
               layout="csr", dtype="float64", weighted=False,
               params=dict(kernel="all-subsets", degree=3, n_components=3, max_iter=4,
                           tol=0.0, random_state=0))
    for solver in ("cd", "sgd", "lbfgs"):
        yield dict(kind="polynomial", cls=FactorizationMachineClassifier,
                   task="multiclass", layout="csr", dtype="float64", weighted=False,
                   params=dict(n_components=3, solver=solver, max_iter=4, tol=0.0,
                               random_state=0))
    yield dict(kind="polynomial", cls=FactorizationMachineRegressor, task="regression",
               layout="csr", dtype="float64", weighted=False,
               params=dict(n_components=3, solver="sgd", batch_size=8, max_iter=4,
                           tol=0.0, random_state=0))
    yield dict(kind="polynomial", cls=FactorizationMachineRegressor, task="regression",
               layout="csr", dtype="float64", weighted=False,
               params=dict(n_components=3, solver="cd", early_stopping=True,
                           max_iter=6, random_state=0))


def _bayes_cases():
    from polylite import (BayesianFactorizationMachineClassifier,
                          BayesianFactorizationMachineOrdinalRegressor,
                          BayesianFactorizationMachineRegressor,
                          VariationalFactorizationMachineClassifier,
                          VariationalFactorizationMachineRegressor)
    for cls, task in ((BayesianFactorizationMachineRegressor, "regression"),
                      (BayesianFactorizationMachineClassifier, "binary"),
                      (BayesianFactorizationMachineOrdinalRegressor, "ordinal")):
        for layout, degree, dtype in itertools.product(["csr", "relational"], [2, 3],
                                                       ["float64", "float32"]):
            if degree == 3 and cls is not BayesianFactorizationMachineRegressor:
                continue
            yield dict(kind="bayes", cls=cls, task=task, layout=layout, dtype=dtype,
                       weighted=False,
                       params=dict(degree=degree, n_components=3, n_iter=6,
                                   n_burn_in=2, random_state=0))
    for cls, task in ((VariationalFactorizationMachineRegressor, "regression"),
                      (VariationalFactorizationMachineClassifier, "binary")):
        for dtype in ("float64", "float32"):
            yield dict(kind="bayes", cls=cls, task=task, layout="csr", dtype=dtype,
                       weighted=False,
                       params=dict(n_components=3, max_iter=5, random_state=0))


def _threaded_cases():
    """The threaded fits that are deterministic (each thread sums into records of its
    own, added in thread order): coordinate descent, L-BFGS's gradient, the Gibbs
    sweeps; two threads, with rows split down to a few per thread."""
    from polylite import (BayesianFactorizationMachineRegressor,
                          FactorizationMachineClassifier, FactorizationMachineRegressor)
    for cls, task, solver, layout, degree in itertools.product(
            [FactorizationMachineRegressor, FactorizationMachineClassifier],
            ["regression"], ["cd", "lbfgs"], ["csr", "relational"], [2, 3]):
        task = "binary" if cls is FactorizationMachineClassifier else "regression"
        yield dict(kind="threaded", cls=cls, task=task, layout=layout, dtype="float64",
                   weighted=True,
                   params=dict(degree=degree, n_components=3, solver=solver, max_iter=4,
                               tol=0.0, n_jobs=2, random_state=0))
    for layout in ("csr", "relational"):
        yield dict(kind="threaded", cls=BayesianFactorizationMachineRegressor,
                   task="regression", layout=layout, dtype="float64", weighted=False,
                   params=dict(n_components=3, n_iter=6, n_burn_in=2, n_jobs=2,
                               random_state=0))


def _ranking_cases():
    from polylite import FactorizationMachineRanker
    for loss, solver, layout, degree, weighted in itertools.product(
            ["bpr", "warp"], ["sgd", "adagrad"], ["csr", "relational"], [2, 3],
            [False, True]):
        yield dict(kind="ranking", cls=FactorizationMachineRanker, task="positives",
                   layout=layout, dtype="float64", weighted=weighted,
                   params=dict(loss=loss, solver=solver, degree=degree, n_components=3,
                               max_iter=3, random_state=0))
    # The whole-data loss: coordinate descent, the same on one thread and on two.
    for layout, weighted, n_jobs in itertools.product(["csr", "relational"],
                                                      [False, True], [1, 2]):
        yield dict(kind="ranking", cls=FactorizationMachineRanker, task="positives",
                   layout=layout, dtype="float64", weighted=weighted,
                   params=dict(loss="ials", confidence=1.0, beta=1e-3, n_components=3,
                               max_iter=3, n_jobs=n_jobs, random_state=0))


def _other_cases():
    from polylite import (MultiOutputPolynomialClassifier, MultiOutputPolynomialRegressor,
                          OrdinalMcRankRegressor)
    for cls, task in ((MultiOutputPolynomialRegressor, "regression"),
                      (MultiOutputPolynomialClassifier, "multiclass"),
                      (OrdinalMcRankRegressor, "ordinal")):
        for kernel in ("pn", "fm"):
            yield dict(kind="other", cls=cls, task=task, layout="csr", dtype="float64",
                       weighted=False,
                       params=dict(kernel=kernel, max_basis=3, random_state=0))


def case_id(case):
    params = ",".join(f"{k}={v}" for k, v in sorted(case["params"].items())
                      if k != "random_state")
    return (f"{case['kind']}:{case['cls'].__name__}:{case['task']}:{case['layout']}:"
            f"{case['dtype']}:{'weighted' if case['weighted'] else 'unweighted'}:{params}")


def cases():
    """Every case of the matrix, by id."""
    out = {}
    for case in itertools.chain(_polynomial_cases(), _bayes_cases(), _threaded_cases(),
                                _ranking_cases(), _other_cases()):
        out[case_id(case)] = case
    return out


def key(case_id_):
    """The case's name in the reference file (a digest of its id)."""
    return hashlib.sha1(case_id_.encode()).hexdigest()[:16]


def run(case):
    """The fitted model's outputs on the training rows, as float64 (class
    probabilities or scores where the model has them)."""
    from polylite import _validation
    X, y, weights = _ratings()
    data = _layout(X, case["layout"], np.dtype(case["dtype"]))
    est = case["cls"](**case["params"])
    rows_per_thread = _validation.MIN_ROWS_PER_THREAD
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if case["kind"] == "threaded":  # threads on a few dozen rows
            _validation.MIN_ROWS_PER_THREAD = 8
        try:
            return _outputs(case, est, X, data, y, weights)
        finally:
            _validation.MIN_ROWS_PER_THREAD = rows_per_thread


def _outputs(case, est, X, data, y, weights):
    """What :func:`run` returns, once the estimator is made."""
    if case["kind"] == "ranking":
        kwargs = {"sample_weight": weights} if case["weighted"] else {}
        if case["layout"] == "csr":
            est.set_params(item_columns=X.block_columns()[1])
        est.fit(data, **kwargs)
        return np.asarray(est.predict(data), np.float64)
    target = _targets(y, case["task"])
    kwargs = {"sample_weight": weights} if case["weighted"] else {}
    est.fit(data, target, **kwargs)
    if hasattr(est, "predict_proba") and case["task"] != "regression":
        try:
            return np.asarray(est.predict_proba(data), np.float64)
        except AttributeError:  # squared hinge: no probabilities
            pass
    if hasattr(est, "decision_function"):
        return np.asarray(est.decision_function(data), np.float64)
    return np.asarray(est.predict(data), np.float64)


def main(argv=None):
    parser = argparse.ArgumentParser(description="Record the reference matrix of fits.")
    parser.add_argument("--record", action="store_true", help="run and write the file")
    parser.add_argument("--only", default="", help="re-record the cases whose id has it")
    args = parser.parse_args(argv)
    if not args.record:
        parser.error("nothing to do: give --record")
    kept = {}
    if args.only and os.path.exists(REFERENCE):
        with np.load(REFERENCE, allow_pickle=False) as npz:
            kept = {name: npz[name] for name in npz.files}
    all_cases = cases()
    for cid, case in all_cases.items():
        if args.only and args.only not in cid:
            continue
        kept[key(cid)] = run(case)
    ids = np.array(sorted(all_cases))
    kept["case_ids"] = ids
    kept["processor"] = np.array(processor())
    os.makedirs(os.path.dirname(REFERENCE), exist_ok=True)
    np.savez_compressed(REFERENCE, **kept)
    print(f"{len(ids)} cases recorded in {REFERENCE} ({processor()})")


if __name__ == "__main__":
    import sys
    sys.path.insert(0, os.path.dirname(__file__))
    main()
