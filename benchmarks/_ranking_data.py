"""The shared parts of the MovieLens 100K ranking benchmarks (``bench_ranking.py`` and
its tuned comparison, ``_ranking_tuning.py``): the protocol's data (u1, positives are
ratings of 4 and 5), the encoders of polylite's features, the metrics of a score matrix,
timed fits, ``implicit``'s ALS scorer and the summary over seeds.  See
``bench_ranking.py`` for the protocol."""
import time
import types

import numpy as np
import scipy.sparse as sp

from polylite import metrics
from polylite.datasets import load_movielens

SPLIT = "u1"
POSITIVE = 4            # ratings >= POSITIVE are positives
K = 10                  # the cut-off of the top-N metrics
LEARNING_RATE = 0.05
AGE_BANDS = (18, 25, 35, 45, 50, 56)   # lower bounds of the bands after the first

# polylite's encoders: ids only, and ids with the users' and items' side features (the
# genres are one block of 19 numeric 0/1 columns).
POLYLITE_IDS = dict(output="relational", handle_unknown="ignore")
POLYLITE_SIDE = dict(user_features={"age_band": "categorical", "gender": "categorical",
                                    "occupation": "categorical"},
                     item_features={"genres": "numeric"}, **POLYLITE_IDS)
# ... and with the items each user has among the training positives as a field of the
# user's part ("rated": implicit feedback, each of n items 1/sqrt(n), as SVD++).
POLYLITE_RATED = dict(implicit="user", **POLYLITE_IDS)
POLYLITE_SIDE_RATED = dict(implicit="user", **POLYLITE_SIDE)

METRICS = (("precision@10", "P@10"), ("recall@10", "R@10"), ("ndcg@10", "nDCG@10"),
           ("map@10", "MAP@10"), ("auc", "AUC"))
TIMES = (("fit_cpu_s", "fit CPU s"), ("fit_wall_s", "fit wall s"))


# ---- data -----------------------------------------------------------------------------

def side_tables(movielens):
    """The users and items tables of a MovieLens 100K release (mappings of column name ->
    array, one row per user or item): ``user_id``, ``age_band`` (0-6, see AGE_BANDS),
    ``gender``, ``occupation``; ``item_id``, ``genres`` (float64 of shape (n_items, 19))."""
    users, items = movielens.users, movielens.items
    users = {"user_id": np.asarray(users.user_id),
             "age_band": np.searchsorted(AGE_BANDS, users.age, side="right"),
             "gender": np.asarray(users.gender), "occupation": np.asarray(users.occupation)}
    items = {"item_id": np.asarray(items.item_id),
             "genres": np.asarray(items.genres, dtype=np.float64)}
    return users, items


def load_data(path, split=SPLIT):
    """The protocol's data (see ``bench_ranking.py``'s docstring) of the fold ``split``,
    as a namespace:

    - ``users``, ``items``: the side tables (:func:`side_tables`), ``genre_names``;
    - ``user_ids``, ``item_ids``: every user and item id, sorted (rows and columns of
      the matrices below and of every score matrix);
    - ``train``: the fold's base positives as a table (``user_id``, ``item_id``);
    - ``positives``: the same as a CSR matrix of ones (n_users, n_items);
    - ``test_users``: the ids of the evaluated users, ``test_rows`` their rows;
    - ``relevant``, ``exclude``: bool arrays (n_test_users, n_items), the u1.test
      positives and the items rated in the base split, of the evaluated users.
    """
    movielens = load_movielens(path, splits=[split])
    users, items = side_tables(movielens)
    order_u, order_i = np.argsort(users["user_id"]), np.argsort(items["item_id"])
    users = {key: value[order_u] for key, value in users.items()}
    items = {key: value[order_i] for key, value in items.items()}
    user_ids, item_ids = users["user_id"], items["item_id"]
    shape = (len(user_ids), len(item_ids))

    def matrix(rows, positive_only):
        ratings = {key: value[rows] for key, value in movielens.ratings.items()}
        if positive_only:
            ratings = {key: value[ratings["rating"] >= POSITIVE]
                       for key, value in ratings.items()}
        u = np.searchsorted(user_ids, ratings["user_id"])
        i = np.searchsorted(item_ids, ratings["item_id"])
        M = sp.csr_matrix((np.ones(len(u), dtype=np.float32), (u, i)), shape=shape)
        return ratings, M

    train_rows, test_rows = movielens.splits[split]
    train, positives = matrix(train_rows, True)
    _, rated = matrix(train_rows, False)
    _, test_positives = matrix(test_rows, True)
    rows = np.flatnonzero(test_positives.getnnz(axis=1) > 0)
    return types.SimpleNamespace(
        users=users, items=items, genre_names=movielens.genre_names, user_ids=user_ids,
        item_ids=item_ids, rated=rated,
        train={"user_id": train["user_id"], "item_id": train["item_id"]},
        positives=positives, test_users=user_ids[rows], test_rows=rows,
        relevant=test_positives[rows].toarray() > 0, exclude=rated[rows].toarray() > 0)


# ---- metrics --------------------------------------------------------------------------

def top_k(scores, exclude, k=K):
    """The column indices of each row's k highest scores, best first, skipping the
    excluded items (ties: the lower column first, as polylite.recommend orders them)."""
    scores = np.where(exclude, -np.inf, np.asarray(scores, dtype=np.float64))
    return np.argsort(-scores, axis=1, kind="stable")[:, :k]


def evaluate(scores, data):
    """The protocol's metrics of a score matrix: rows ``data.test_users``, columns
    ``data.item_ids`` (as ``score_items(model, data.test_users, data.item_ids)`` gives
    them), averaged over the users by :mod:`polylite.metrics`."""
    scores = np.asarray(scores)
    expected = (len(data.test_users), len(data.item_ids))
    if scores.shape != expected:
        raise ValueError(f"scores of shape {scores.shape}, expected {expected}")
    top = top_k(scores, data.exclude)
    relevant = [np.flatnonzero(row) for row in data.relevant]
    return {"precision@10": metrics.precision_at_k(top, relevant),
            "recall@10": metrics.recall_at_k(top, relevant),
            "ndcg@10": metrics.binary_ndcg_at_k(top, relevant),
            "map@10": metrics.map_at_k(top, relevant),
            "auc": metrics.auc_score(scores, data.relevant, exclude=data.exclude)}


# ---- runs -----------------------------------------------------------------------------

def fit_timed(fit):
    """Call ``fit()``; return (CPU seconds of every thread, wall-clock seconds)."""
    cpu, wall = time.process_time(), time.perf_counter()
    fit()
    return time.process_time() - cpu, time.perf_counter() - wall


def make_row(model, features, k, epochs, seed, metrics, times):
    """One fit's result: the model, its features ("ids", "ids+side" or "-"), rank and
    epochs (None when not applicable), the seed, the metrics of :func:`evaluate` and the
    (CPU, wall) seconds of :func:`fit_timed`."""
    return {"model": model, "features": features, "k": k, "epochs": epochs, "seed": seed,
            **{key: float(value) for key, value in metrics.items()},
            "fit_cpu_s": float(times[0]), "fit_wall_s": float(times[1])}


def implicit_fit(data, params, seed, threads):
    """``implicit``'s ALS fitted on ``data.positives`` (``params``: factors,
    regularization, alpha, iterations, and any other of its parameters): (the model,
    times)."""
    from implicit.cpu.als import AlternatingLeastSquares
    model = AlternatingLeastSquares(**params, num_threads=threads, random_state=seed,
                                    calculate_training_loss=False)
    times = fit_timed(lambda: model.fit(data.positives.tocsr(), show_progress=False))
    return model, times


def implicit_scores(data, params, seed, threads):
    """``implicit``'s ALS (:func:`implicit_fit`): (scores of data.test_users x items,
    times)."""
    model, times = implicit_fit(data, params, seed, threads)
    return model.user_factors[data.test_rows] @ model.item_factors.T, times


def summarize(rows):
    """Mean and standard deviation over the seeds of each (model, features, k, epochs)."""
    groups = {}
    for row in rows:
        groups.setdefault((row["model"], row["features"], row["k"], row["epochs"]),
                          []).append(row)
    summary = []
    for (model, features, k, epochs), group in groups.items():
        entry = {"model": model, "features": features, "k": k, "epochs": epochs,
                 "seeds": [row["seed"] for row in group]}
        for key, _ in METRICS + TIMES:
            values = np.array([row[key] for row in group])
            entry[key] = float(values.mean())
            entry[key + "_std"] = float(values.std())
        summary.append(entry)
    return summary
