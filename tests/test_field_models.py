"""The contract every field model keeps (the field-aware and the field-weighted
factorization machines, on the shared base ``polylite.polynomial._fields``): fields from an
array or a FieldEncoder, row normalisation, save and load, partial_fit as epochs of fit
(AdaGrad and FTRL), warm starts, early stopping, threads, bad parameters, partial_fit in
place, libffm files streamed in chunks and scikit-learn's estimator checks.  Each model's
own kernel and steps are tested against brute force and NumPy references in its module
(test_ffm.py, test_fwfm.py)."""
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.metrics import log_loss
from sklearn.utils.estimator_checks import parametrize_with_checks

import polylite
from polylite import (FieldAwareFactorizationMachineClassifier,
                      FieldAwareFactorizationMachineRegressor,
                      FieldWeightedFactorizationMachineClassifier,
                      FieldWeightedFactorizationMachineRegressor, FieldEncoder)
from polylite.estimator_checks import expected_failed_checks
from polylite.polynomial.ffm import fields_of

from _clicks import FIELDS, encoded as _encoded

# Each field model: (classifier, regressor, its fitted arrays beside w_).
MODELS = {
    "field-aware": (FieldAwareFactorizationMachineClassifier,
                    FieldAwareFactorizationMachineRegressor, ("P_",)),
    "field-weighted": (FieldWeightedFactorizationMachineClassifier,
                       FieldWeightedFactorizationMachineRegressor,
                       ("P_", "field_weights_")),
}
FTRL = dict(solver="ftrl", l1=0.5, l2=0.1)


@pytest.fixture(params=list(MODELS))
def model(request):
    return MODELS[request.param]


def _assert_same_model(a, b, arrays, **tol):
    check = (np.testing.assert_allclose if tol
             else np.testing.assert_array_equal)
    for name in ("w_",) + arrays:
        check(getattr(a, name), getattr(b, name), **tol)


def test_fields_from_field_encoder_and_learning_pairs(model):
    clf_cls = model[0]
    encoder, X, y = _encoded(4000)
    fields, n_fields = fields_of(encoder.fields_, X.shape[1])
    assert n_fields == 4
    np.testing.assert_array_equal(fields, FIELDS)
    np.testing.assert_array_equal(fields_of(encoder, X.shape[1])[0], fields)
    Xtr, Xte, ytr, yte = X[:3000], X[3000:], y[:3000], y[3000:]
    clf = clf_cls(fields=encoder.fields_, max_iter=10, random_state=0).fit(Xtr, ytr)
    np.testing.assert_array_equal(clf.fields_, fields)
    assert clf.n_fields_ == 4
    same = clf_cls(fields=FIELDS, max_iter=10, random_state=0).fit(Xtr, ytr)
    np.testing.assert_array_equal(clf.predict_proba(Xte), same.predict_proba(Xte))
    assert clf.score(Xte, yte) > 0.7
    # Zero factors stay zero: a linear model, which the pairs of fields beat.
    linear = clf_cls(fields=encoder.fields_, max_iter=10, random_state=0,
                     init_scale=0.0).fit(Xtr, ytr)
    assert np.all(linear.P_ == 0)
    assert (log_loss(yte, clf.predict_proba(Xte)[:, 1])
            < log_loss(yte, linear.predict_proba(Xte)[:, 1]) - 0.02)
    with pytest.raises(ValueError, match="unfitted FieldEncoder"):
        clf_cls(fields=FieldEncoder(user="a", item="b")).fit(X, y)
    with pytest.raises(ValueError, match="22 columns"):
        clf_cls(fields=[0, 1]).fit(X, y)


def test_normalize_scales_rows_to_unit_norm(model):
    clf_cls = model[0]
    _, X, y = _encoded(400)
    clf = clf_cls(fields=FIELDS, max_iter=2, random_state=0).fit(X, y)
    scaled = clf_cls(fields=FIELDS, max_iter=2, random_state=0).fit(5 * X, y)
    _assert_same_model(clf, scaled, model[2], rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(clf.decision_function(X),
                               scaled.decision_function(7 * X), rtol=1e-10)


def test_save_load_round_trip(model, tmp_path):
    clf_cls, reg_cls, arrays = model
    encoder, X, y = _encoded(500)
    for est in (clf_cls(fields=encoder, max_iter=3, random_state=0),
                reg_cls(fields=encoder.fields_, normalize=False, max_iter=3,
                        random_state=0),
                clf_cls(fields=encoder.fields_, max_iter=3, random_state=0, **FTRL)):
        est.fit(X, y)
        path = tmp_path / "model.npz"
        polylite.save(est, path)
        back = polylite.load(path)
        assert type(back) is type(est)
        _assert_same_model(back, est, arrays + ("fields_",))
        assert back.n_fields_ == est.n_fields_
        assert (back.solver_, back.l1, back.n_nonzero_weights_) == (
            est.solver_, est.l1, est.n_nonzero_weights_)
        np.testing.assert_array_equal(back.predict(X), est.predict(X))
        np.testing.assert_array_equal(back.get_params()["fields"], est.fields_)
        refit = clone(back).fit(X, y)  # the restored parameter refits the same model
        _assert_same_model(refit, est, arrays)


@pytest.mark.parametrize("solver", [{}, FTRL], ids=["adagrad", "ftrl"])
def test_partial_fit_is_one_epoch_of_fit_and_warm_start(model, solver):
    clf_cls, _, arrays = model
    encoder, X, y = _encoded(600)
    params = dict(fields=encoder.fields_, shuffle=False, random_state=0, **solver)
    one = clf_cls(max_iter=2, **params).fit(X, y)
    streamed = clf_cls(**params)
    for _ in range(2):
        streamed.partial_fit(X, y, classes=[0, 1])
    _assert_same_model(streamed, one, arrays, rtol=1e-12)
    assert streamed.solver_ == one.solver_ == params.get("solver", "adagrad")
    assert streamed.n_nonzero_weights_ == one.n_nonzero_weights_
    warm = clf_cls(max_iter=1, warm_start=True, **params).fit(X, y)
    before = warm.P_.copy()
    warm.fit(X, y)
    assert not np.array_equal(warm.P_, before)


def test_early_stopping_on_validation_logloss(model):
    clf_cls = model[0]
    encoder, X, y = _encoded(3000)
    clf = clf_cls(fields=encoder.fields_, max_iter=200, eta0=1.0, n_iter_no_change=1,
                  random_state=0).fit(X[:2000], y[:2000], X_val=X[2000:], y_val=y[2000:])
    assert clf.n_iter_[0] < 200
    held = clf_cls(fields=encoder.fields_, max_iter=200, eta0=1.0, early_stopping=True,
                   n_iter_no_change=1, random_state=0).fit(X, y)
    assert held.n_iter_[0] < 200


def test_mini_batches_on_two_threads_agree_with_one(model):
    clf_cls, _, arrays = model
    encoder, X, y = _encoded(3000)
    params = dict(fields=encoder.fields_, batch_size=600, max_iter=3, random_state=0)
    one = clf_cls(n_jobs=1, **params).fit(X, y)
    two = clf_cls(n_jobs=2, **params).fit(X, y)
    _assert_same_model(two, one, arrays, rtol=1e-9, atol=1e-12)


def test_bad_parameters(model):
    clf_cls = model[0]
    X, y = np.eye(4), [0, 1, 0, 1]
    for params, message in ((dict(fields="abc"), "fields must"),
                            (dict(fields=[0, -1, 0, 1]), "fields must be >= 0"),
                            (dict(solver="cd"), "solver"),
                            (dict(solver="ftrl", batch_size=2), "batch_size must be 1"),
                            (dict(solver="ftrl", l1=-1), "l1"),
                            (dict(solver="ftrl", l2=np.nan), "l2"),
                            (dict(normalize="yes"), "normalize")):
        with pytest.raises(ValueError, match=message):
            clf_cls(**params).fit(X, y)


def test_streaming_a_libffm_file_in_chunks_is_one_pass(model, tmp_path):
    """partial_fit over the chunks of a libffm file, in order, takes the steps of one
    epoch of fit over the whole file (AdaGrad's statistics carry over)."""
    from polylite.datasets import dump_libffm, iter_libffm_chunks, make_ctr, scan_libffm
    clf_cls, _, arrays = model
    X, y, fields = make_ctr(3000, max_categories=300, random_state=0)
    path = tmp_path / "train.ffm"
    dump_libffm(X, y, fields, path)
    scan = scan_libffm(path)
    assert scan.n_features == X.shape[1]
    params = dict(fields=scan.fields, shuffle=False, random_state=0)
    whole = clf_cls(max_iter=1, **params).fit(X, y)
    streamed = clf_cls(**params)
    n_chunks = 0
    for X_chunk, y_chunk, _ in iter_libffm_chunks(path, scan.n_features,
                                                  chunk_bytes=50_000):
        streamed.partial_fit(X_chunk, y_chunk, classes=[0, 1])
        n_chunks += 1
    assert n_chunks > 3
    _assert_same_model(streamed, whole, arrays, rtol=1e-10, atol=1e-13)


@pytest.mark.parametrize("cls", [cls for clf, reg, _ in MODELS.values()
                                 for cls in (clf, reg)], ids=lambda c: c.__name__)
def test_partial_fit_steps_in_place_and_a_diverged_chunk_is_undone(cls):
    """With the row penalty a chunk's pass steps on the fitted arrays (no copy of the
    model): the rows of the chunk's features change, the others not at all; a chunk that
    diverges puts every parameter back as it was."""
    rng = np.random.RandomState(6)
    n, d = 80, 12
    fields = np.repeat(np.arange(4), 3)
    X = sp.random(n, d, density=0.4, format="csr", random_state=rng)
    y = rng.randint(0, 2, n)
    classes = dict(classes=[0, 1]) if hasattr(cls, "predict_proba") else {}
    est = cls(fields=fields, normalize=False, solver="sgd", eta0=0.01,
              learning_rate="constant", random_state=0).partial_fit(X, y, **classes)
    before = est._stacked(copy=True)
    chunk = sp.hstack([X[:, :6], sp.csr_matrix((n, d - 6))], format="csr")
    est.partial_fit(chunk, y)
    after = est._stacked(copy=True)
    untouched = np.setdiff1d(np.arange(d), np.unique(chunk.indices))
    assert untouched.size >= 6
    np.testing.assert_array_equal(after["P"][:, :, untouched], before["P"][:, :, untouched])
    np.testing.assert_array_equal(after["w"][:, untouched], before["w"][:, untouched])
    assert not np.array_equal(after["P"], before["P"])
    est.set_params(eta0=1e6)
    with pytest.raises(FloatingPointError, match="kept"):
        est.partial_fit(1e6 * chunk, y if classes else 1e6 * y)
    for name, value in est._stacked(copy=True).items():
        np.testing.assert_array_equal(value, after[name])
    # Told to keep nothing to undo a chunk (the command line's streamed fit): the same
    # steps in place, and a diverged chunk leaves the estimator unfitted.
    est, twin = clone(est).set_params(eta0=0.01), clone(est).set_params(eta0=0.01)
    twin._undo_diverged_chunk = False
    for fitted in (est, twin):
        fitted.partial_fit(X, y, **classes)
        fitted.partial_fit(chunk, y)
    np.testing.assert_array_equal(twin.P_, est.P_)
    twin.set_params(eta0=1e6)
    with pytest.raises(FloatingPointError, match="now unfitted"):
        twin.partial_fit(1e6 * chunk, y if classes else 1e6 * y)
    assert not twin.__sklearn_is_fitted__()


ESTIMATORS = [est for clf, reg, _ in MODELS.values() for est in (
    reg(max_iter=20),
    clf(max_iter=20),
    clf(solver="sgd", eta0=0.05, max_iter=20),
    reg(solver="ftrl", l1=0.01, max_iter=20),
)]


@parametrize_with_checks(ESTIMATORS, expected_failed_checks=expected_failed_checks)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=repr)
def test_clone_round_trip(estimator):
    twin = clone(estimator)
    assert twin.get_params() == estimator.get_params()
