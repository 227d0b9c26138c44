"""Top-N recommendation: the factored scores of every model kind equal brute-force
predictions on the pair rows; the top-N lists, exclusions, unknown users and context."""
import numpy as np
import pytest
from sklearn.linear_model import Ridge
from sklearn.pipeline import make_pipeline

from polylite import (FactorizationMachineClassifier, FactorizationMachineRegressor,
                      FieldEncoder, PolynomialNetworkRegressor)
from polylite.recommend import _top, recommend, score_items

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

N_USERS, N_ITEMS = 12, 15


def _tables(seed=0, n=150):
    rng = np.random.RandomState(seed)
    users = {"user_id": np.arange(100, 100 + N_USERS),
             "age": rng.uniform(0.5, 1.5, N_USERS),
             "job": rng.choice(["a", "b", "c"], N_USERS)}
    items = {"item_id": np.array([f"i{j}" for j in range(N_ITEMS)]),
             "tags": (rng.rand(N_ITEMS, 3) < 0.5) * rng.uniform(0.5, 1, (N_ITEMS, 3))}
    ratings = {"user_id": users["user_id"][rng.randint(N_USERS, size=n)],
               "item_id": items["item_id"][rng.randint(N_ITEMS, size=n)]}
    y = rng.normal(size=n)
    return ratings, users, items, y


ENCODER = dict(user_features={"age": "numeric", "job": "categorical"},
               item_features={"tags": "numeric"}, implicit="user")


def _fitted(model, y_kind="regression", seed=0, **encoder):
    ratings, users, items, y = _tables(seed)
    if y_kind == "binary":
        y = np.where(y > 0, "yes", "no")
    elif y_kind == "multiclass":
        y = np.digitize(y, [-0.5, 0.5])
    pipe = make_pipeline(FieldEncoder(**dict(ENCODER, **encoder)), model)
    pipe.fit(ratings, y, fieldencoder__users=users, fieldencoder__items=items)
    return pipe, ratings, users, items


def _all(pipe):
    """The default candidates: every item the encoder knows, sorted."""
    return pipe[0].categories_["item_id"]


def _brute_force(pipe, users, items):
    """The model's own predictions on one encoded row per (user, item) pair."""
    pairs = {"user_id": np.repeat(users, len(items)), "item_id": np.tile(items, len(users))}
    X = pipe[0].transform(pairs)
    model = pipe[-1]
    score = model.decision_function if hasattr(model, "classes_") else model.predict
    return score(X).reshape(len(users), len(items))


PARAMS = dict(n_components=3, max_iter=3, init_scale=0.5, random_state=0)
MODELS = {
    "fm2": FactorizationMachineRegressor(**PARAMS),
    "fm3": FactorizationMachineRegressor(degree=3, **PARAMS),
    "fm4": FactorizationMachineRegressor(degree=4, **PARAMS),
    "fm3-shared": FactorizationMachineRegressor(degree=3, lower_degrees="shared", **PARAMS),
    "fm4-shared": FactorizationMachineRegressor(degree=4, lower_degrees="shared", **PARAMS),
    "fm3-none": FactorizationMachineRegressor(degree=3, lower_degrees="none", **PARAMS),
    "fm-linear-off": FactorizationMachineRegressor(fit_linear=False, **PARAMS),
    "all-subsets": FactorizationMachineRegressor(kernel="all-subsets", **PARAMS),
    "pn2": PolynomialNetworkRegressor(**PARAMS),
    "pn3-none": PolynomialNetworkRegressor(degree=3, lower_degrees="none", **PARAMS),
    "pn3-alternating": PolynomialNetworkRegressor(degree=3, output_weights="alternating",
                                                  **PARAMS),
    "fm3-sgd": FactorizationMachineRegressor(degree=3, solver="sgd", **PARAMS),
}


@pytest.mark.parametrize("name", list(MODELS))
def test_factored_scores_equal_brute_force(name):
    pipe, ratings, users, items = _fitted(MODELS[name])
    u, i = users["user_id"][[3, 0, 3, 7]], items["item_id"]  # a user asked twice
    expected = _brute_force(pipe, u, i)
    assert np.abs(expected).max() > 1e-3  # not a trivial model
    np.testing.assert_allclose(score_items(pipe, u, i), expected, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(score_items(pipe, u, i, method="pairs"), expected,
                               rtol=1e-10, atol=1e-12)


def test_binary_classifier_scores_are_decision_values():
    model = FactorizationMachineClassifier(degree=3, **PARAMS)
    pipe, _, users, items = _fitted(model, "binary")
    u = users["user_id"]
    np.testing.assert_allclose(score_items(pipe, u), _brute_force(pipe, u, _all(pipe)),
                               rtol=1e-10, atol=1e-12)


def test_float32_model():
    pipe, _, users, items = _fitted(FactorizationMachineRegressor(degree=3, **PARAMS),
                                    dtype=np.float32)
    scores = score_items(pipe, users["user_id"])
    assert scores.dtype == np.float32
    np.testing.assert_allclose(scores, _brute_force(pipe, users["user_id"], _all(pipe)),
                               rtol=1e-4, atol=1e-5)


def test_model_and_encoder_given_apart_and_batches():
    pipe, _, users, items = _fitted(MODELS["fm3"])
    u = users["user_id"]
    whole = score_items(pipe, u)
    np.testing.assert_array_equal(score_items(pipe[-1], u, encoder=pipe[0]), whole)
    np.testing.assert_allclose(score_items(pipe, u, batch_size=5), whole, rtol=1e-12)
    np.testing.assert_allclose(score_items(pipe, u, batch_size=5, method="pairs"), whole,
                               rtol=1e-10)


def test_any_estimator_by_pairs():
    """Another estimator (here Ridge on the encoded rows) is scored on the pair rows."""
    pipe, _, users, items = _fitted(Ridge(alpha=1.0))
    u = users["user_id"][:4]
    np.testing.assert_allclose(score_items(pipe, u), _brute_force(pipe, u, _all(pipe)))
    with pytest.raises(ValueError, match="method='factored' needs a polylite"):
        score_items(pipe, u, method="factored")


def test_recommend_is_the_top_of_the_scores():
    pipe, ratings, users, items = _fitted(MODELS["fm3-shared"])
    u, candidates = users["user_id"], _all(pipe)
    scores = _brute_force(pipe, u, candidates)
    top, top_scores = recommend(pipe, u, n=4)
    for r in range(len(u)):
        order = np.argsort(-scores[r], kind="stable")[:4]
        np.testing.assert_array_equal(top[r], candidates[order])
        np.testing.assert_allclose(top_scores[r], scores[r, order], rtol=1e-10)
    # Excluding the rated items: none comes back, the rest in order.
    top, top_scores = recommend(pipe, u, n=4, exclude=ratings)
    rated = set(zip(ratings["user_id"], ratings["item_id"]))
    for r, user in enumerate(u):
        allowed = [j for j in range(N_ITEMS) if (user, candidates[j]) not in rated]
        order = sorted(allowed, key=lambda j: -scores[r, j])[:4]
        np.testing.assert_array_equal(top[r], candidates[order])
        assert not any((user, item) in rated for item in top[r])


def test_recommend_few_candidates_and_unknown_ids():
    pipe, ratings, users, items = _fitted(MODELS["fm2"])
    candidates = items["item_id"][:3]
    exclude = {"user_id": [100, 100, 999], "item_id": ["i0", "i1", "i0"]}
    top, scores = recommend(pipe, [100, 101], n=10, items=candidates, exclude=exclude)
    assert top.shape == (2, 3)
    assert top[0, 0] == "i2" and np.all(np.isneginf(scores[0, 1:]))
    assert np.all(np.isfinite(scores[1]))
    with pytest.raises(ValueError, match="column 'user_id' has 1 value"):
        recommend(pipe, [100, 999])


def test_unknown_users_ignored_are_scored_without_user_part():
    pipe, _, users, items = _fitted(MODELS["fm3"], handle_unknown="ignore")
    u = np.array([100, 999])
    np.testing.assert_allclose(score_items(pipe, u), _brute_force(pipe, u, _all(pipe)),
                               rtol=1e-10, atol=1e-12)


def test_context_features():
    ratings, users, items, y = _tables()
    rng = np.random.RandomState(1)
    ratings = dict(ratings, hour=rng.choice([8, 20], len(y)), price=rng.rand(len(y)))
    enc = FieldEncoder(context_features={"hour": "categorical", "price": "numeric"},
                       **ENCODER)
    pipe = make_pipeline(enc, FactorizationMachineRegressor(degree=3, **PARAMS))
    pipe.fit(ratings, y, fieldencoder__users=users, fieldencoder__items=items)
    u, i = users["user_id"][:3], _all(pipe)
    with pytest.raises(ValueError, match="the encoder has context features"):
        score_items(pipe, u)
    context = {"hour": [20, 8, 20], "price": [0.3, 0.9, 0.1]}
    pairs = {"user_id": np.repeat(u, len(i)), "item_id": np.tile(i, len(u)),
             "hour": np.repeat(context["hour"], len(i)),
             "price": np.repeat(context["price"], len(i))}
    expected = pipe.predict(pairs).reshape(len(u), len(i))
    np.testing.assert_allclose(score_items(pipe, u, context=context), expected, rtol=1e-10)
    one = {"hour": [20], "price": [0.3]}
    same = {"hour": [20] * 3, "price": [0.3] * 3}
    np.testing.assert_allclose(score_items(pipe, u, context=one),
                               score_items(pipe, u, context=same), rtol=1e-12)
    with pytest.raises(ValueError, match="context must have one row or one per user"):
        score_items(pipe, u, context={"hour": [8, 8], "price": [1.0, 1.0]})


def test_invalid_calls():
    pipe, _, users, items = _fitted(MODELS["fm2"])
    u = users["user_id"]
    with pytest.raises(ValueError, match="either a pipeline or a model and its encoder"):
        score_items(pipe, u, encoder=pipe[0])
    with pytest.raises(ValueError, match="must be a fitted FieldEncoder"):
        score_items(pipe[-1], u)
    with pytest.raises(ValueError, match="two steps: a FieldEncoder, then the model"):
        score_items(make_pipeline(pipe[-1]), u)
    other = FieldEncoder(ids="user").fit({"user_id": u, "item_id": u})
    with pytest.raises(ValueError, match="the model takes .* features but the encoder"):
        score_items(pipe[-1], u, encoder=other)
    with pytest.raises(ValueError, match="method must be one of"):
        score_items(pipe, u, method="fast")
    with pytest.raises(ValueError, match="users must be a 1-D array"):
        score_items(pipe, [u])
    for method in ("factored", "pairs"):
        with pytest.raises(ValueError, match="items is empty"):
            recommend(pipe, u, items=[], method=method)
    with pytest.raises(ValueError, match="n must be >= 1"):
        recommend(pipe, u, n=0)
    # A candidate listed twice would fill two places of a top-n list.
    for method in ("factored", "pairs"):
        with pytest.raises(ValueError, match="each candidate once; 'i1' is listed 3 times"):
            recommend(pipe, u, items=["i1", "i1", "i1", "i2"], method=method)
        with pytest.raises(ValueError, match="each candidate once; 'i3' is listed 2 times"):
            score_items(pipe, u, items=np.array(["i3", "i0", "i3"]), method=method)
    multi, _, users, _ = _fitted(FactorizationMachineClassifier(**PARAMS), "multiclass")
    with pytest.raises(ValueError, match="the classifier has 3 classes"):
        recommend(multi, users["user_id"])


def test_top_orders_equal_scores_by_candidate():
    scores = np.array([[1.0, 3.0, 3.0, 0.0, 3.0], [2.0, 2.0, 2.0, 2.0, 2.0]])
    # All ties kept: the earlier candidate first.
    assert _top(scores, 5).tolist() == [[1, 2, 4, 0, 3], [0, 1, 2, 3, 4]]
    top = _top(scores, 3)
    assert top[0].tolist() == [1, 2, 4]
    assert sorted(top[1]) == top[1].tolist()  # which tied items are kept: unspecified


@pytest.mark.parametrize("name", ["fm3", "all-subsets"])
def test_relational_encoder_output_in_a_pipeline(name):
    """A pipeline whose encoder gives relational rows fits, predicts and recommends as
    one giving CSR rows (the same columns, the same model)."""
    csr, *_ = _fitted(MODELS[name], implicit="both")
    rel, _, users, items = _fitted(MODELS[name], implicit="both", output="relational")
    u = users["user_id"]
    np.testing.assert_allclose(rel[-1].P_, csr[-1].P_, rtol=1e-9, atol=1e-12)
    for method in ("factored", "pairs"):
        np.testing.assert_allclose(score_items(rel, u, method=method),
                                   score_items(csr, u, method=method), rtol=1e-9,
                                   atol=1e-12)


def test_bayesian_models_are_scored_on_relational_pair_rows():
    """A model whose scores do not split (a Bayesian FM averages its samples) is scored
    on the pairs, given as relation blocks of the user rows (with their context) and the
    item rows: the same scores as the expanded pair rows."""
    from polylite import BayesianFactorizationMachineRegressor
    from polylite.relational import RelationalMatrix
    model = BayesianFactorizationMachineRegressor(n_components=2, n_iter=5, n_burn_in=1,
                                                  random_state=0)
    ratings, users, items, y = _tables()
    ratings["hour"] = np.arange(len(y)) % 3
    pipe = make_pipeline(FieldEncoder(**ENCODER, context_features={"hour": "categorical"}),
                         model)
    pipe.fit(ratings, y, fieldencoder__users=users, fieldencoder__items=items)
    u, i = users["user_id"][:5], items["item_id"]
    seen = []
    predict = type(model).predict

    def spy(self, X, **kwargs):
        seen.append(type(X))
        return predict(self, X, **kwargs)

    type(model).predict = spy
    try:
        got = score_items(pipe, u, i, context={"hour": np.array([2])})
    finally:
        type(model).predict = predict
    assert seen == [RelationalMatrix]
    pairs = {"user_id": np.repeat(u, len(i)), "item_id": np.tile(i, len(u)),
             "hour": np.full(len(u) * len(i), 2)}
    np.testing.assert_allclose(got, pipe.predict(pairs).reshape(len(u), len(i)),
                               rtol=1e-10, atol=1e-12)
