"""
Top-N recommendations from positive-only data
=============================================

Many recommenders learn from what users did (the films they watched, the songs they
played) with no record of what they disliked.  Here such data comes from MovieLens 100K:
a rating of 4 or 5 is a positive, and the models see nothing else.
:class:`~polylite.FactorizationMachineRanker` learns to score each positive's item
above items the user has not interacted with (sampled negatives), with the WARP or the
BPR loss; :func:`polylite.recommend.score_items` then scores every item for every user.

The protocol is that of the MovieLens ``u1`` split: the models are fitted on the
positives of ``u1.base``.  Each user with a positive in ``u1.test`` gets a ranking of
the items they did not rate in ``u1.base``, and the test positives are the relevant
items.  The lists are measured by precision at 10, nDCG at 10 (binary relevance) and the
AUC (the chance that a relevant item is ranked above another candidate).

MovieLens is not shipped with polylite (``polylite.datasets.fetch_movielens("100k")``
downloads it).  When its ``ml-100k`` folder is not found, the example runs on synthetic
data of the same shape, and says so.
"""

import os
import time

import matplotlib.pyplot as plt
import numpy as np
from sklearn.pipeline import make_pipeline

from polylite import FactorizationMachineRanker, FieldEncoder
from polylite.datasets import get_data_home, load_movielens
from polylite.metrics import auc_score, binary_ndcg_at_k, precision_at_k
from polylite.recommend import recommend, score_items

# %%
# The data
# --------
# The folder ``ml-100k`` is looked for in the data folder, where
# ``fetch_movielens("100k")`` downloads it (``~/polylite_data``), then (also as
# ``shared/data/movielens/ml-100k``) in the current directory, in this example's folder,
# and in the folders above them.  Age is
# grouped in bands (under 18, 18-24, 25-34, 35-44, 45-49, 50-55, 56 and over),
# occupation and gender are categories, and a film's genres are 19 flags.  Tables are
# mappings of column name to array (a pandas DataFrame works the same).
AGE_BANDS = (18, 25, 35, 45, 50, 56)


def find_movielens():
    """The ml-100k folder, or None."""
    try:
        here = os.path.dirname(os.path.abspath(__file__))
    except NameError:  # the gallery runs the example from its own folder
        here = os.getcwd()
    if os.path.isfile(os.path.join(get_data_home(), "ml-100k", "u.data")):
        return os.path.join(get_data_home(), "ml-100k")  # where fetch_movielens puts it
    shared = os.path.join("shared", "data", "movielens", "ml-100k")
    for folder in (os.getcwd(), here):
        for _ in range(5):
            for path in (os.path.join(folder, "ml-100k"), os.path.join(folder, shared)):
                if os.path.isfile(os.path.join(path, "u.data")):
                    return path
            folder = os.path.dirname(folder)
    return None


def movielens(path):
    """Ratings, the u1 split, and the users' and items' tables of MovieLens 100K."""
    ml = load_movielens(path, splits=["u1"])
    users = {"user_id": ml.users.user_id,
             "age_band": np.searchsorted(AGE_BANDS, ml.users.age, side="right"),
             "gender": ml.users.gender, "occupation": ml.users.occupation}
    items = {"item_id": ml.items.item_id, "title": ml.items.title,
             "genres": np.asarray(ml.items.genres, dtype=np.float64)}
    return ml.ratings, ml.splits["u1"], users, items, ml.genre_names


# %%
# The synthetic stand-in has the size of MovieLens 100K: 943 users, 1,682 items, about
# 100,000 ratings of 1 to 5 stars (in about the proportions of MovieLens), and 80% of
# them for training.  A user's taste comes partly from their age band, gender and
# occupation, an item's character partly from its genres; users rate popular items and
# items they like more often, as in real data.
def synthetic(seed=0):
    """Ratings shaped like MovieLens 100K, a random 80/20 split, users and items."""
    rng = np.random.default_rng(seed)
    n_users, n_items, n_genres, rank = 943, 1682, 19, 8
    users = {"user_id": np.arange(1, n_users + 1),
             "age_band": rng.integers(0, 7, n_users),
             "gender": rng.choice(np.array(["F", "M"]), n_users, p=[0.3, 0.7]),
             "occupation": rng.integers(0, 21, n_users)}
    genres = rng.random((n_items, n_genres)) < 0.08
    genres[np.arange(n_items), rng.integers(0, n_genres, n_items)] = True
    items = {"item_id": np.arange(1, n_items + 1),
             "title": np.array([f"item {i}" for i in range(1, n_items + 1)]),
             "genres": genres.astype(np.float64)}
    taste = (rng.normal(0, 0.5, (7, rank))[users["age_band"]]
             + rng.normal(0, 0.5, (2, rank))[(users["gender"] == "M").astype(int)]
             + rng.normal(0, 0.5, (21, rank))[users["occupation"]]
             + rng.normal(0, 0.8, (n_users, rank)))
    character = genres @ rng.normal(0, 0.6, (n_genres, rank)) + rng.normal(
        0, 0.6, (n_items, rank))
    preference = taste @ character.T / np.sqrt(rank) + rng.normal(0, 0.5, n_items)
    popularity = rng.permutation(1.0 / np.arange(1, n_items + 1))
    activity = rng.pareto(1.5, n_users) + 1
    n_rated = np.minimum(20 + (activity / activity.sum() * 81_140).astype(int), 700)
    user_ids, item_ids = [], []
    for user in range(n_users):
        chance = popularity * np.exp(preference[user])
        user_ids.append(np.full(n_rated[user], user + 1))
        item_ids.append(rng.choice(n_items, n_rated[user], replace=False,
                                   p=chance / chance.sum()) + 1)
    user_ids, item_ids = np.concatenate(user_ids), np.concatenate(item_ids)
    liking = preference[user_ids - 1, item_ids - 1] + rng.normal(0, 0.7, user_ids.size)
    # Stars by quantiles of the liking: 6%, 11%, 27%, 34% and 22% are 1 to 5 stars.
    stars = 1 + np.searchsorted(np.quantile(liking, [0.06, 0.17, 0.44, 0.78]), liking)
    ratings = {"user_id": user_ids, "item_id": item_ids, "rating": stars.astype(float)}
    order = rng.permutation(user_ids.size)
    split = order[:int(0.8 * user_ids.size)], order[int(0.8 * user_ids.size):]
    names = tuple(f"genre {g}" for g in range(n_genres))
    return ratings, split, users, items, names


path = find_movielens()
if path is not None:
    ratings, (train_rows, test_rows), users, items, genre_names = movielens(path)
    print("MovieLens 100K, split u1")
else:
    ratings, (train_rows, test_rows), users, items, genre_names = synthetic()
    print("MovieLens 100K not found: synthetic ratings of the same shape instead")


# %%
# The training positives are the ratings of 4 and 5 in the training part; the lower
# ratings are not shown to the models.  Every item a user rated in training, whatever
# the rating, is left out of the user's ranking at test time.
def rows_of(rows, positive_only):
    keep = rows[ratings["rating"][rows] >= 4] if positive_only else rows
    return {"user_id": ratings["user_id"][keep], "item_id": ratings["item_id"][keep]}


train = rows_of(train_rows, positive_only=True)
rated_in_training = rows_of(train_rows, positive_only=False)
test = rows_of(test_rows, positive_only=True)

# Every item is a candidate; rows of the matrices below are the test users, columns the
# items, in the order of item_ids.
item_ids = np.sort(items["item_id"])
test_users = np.unique(test["user_id"])


def user_item_matrix(table):
    """Which items each test user has in a table of (user, item) pairs."""
    mine = np.isin(table["user_id"], test_users)
    matrix = np.zeros((test_users.size, item_ids.size), dtype=bool)
    matrix[np.searchsorted(test_users, table["user_id"][mine]),
           np.searchsorted(item_ids, table["item_id"][mine])] = True
    return matrix


relevant = user_item_matrix(test)
excluded = user_item_matrix(rated_in_training)
relevant_columns = [np.flatnonzero(row) for row in relevant]
print(f"{len(train['user_id'])} training positives of "
      f"{len(rated_in_training['user_id'])} training ratings; {test_users.size} test "
      f"users with {relevant.sum()} test positives; {item_ids.size} items")


def evaluate(scores):
    """P@10, nDCG@10 and AUC of a score matrix (test users x items)."""
    candidates = np.where(excluded, -np.inf, scores)
    top10 = np.argsort(-candidates, axis=1, kind="stable")[:, :10]
    return {"P@10": precision_at_k(top10, relevant_columns),
            "nDCG@10": binary_ndcg_at_k(top10, relevant_columns),
            "AUC": auc_score(scores, relevant, exclude=excluded)}


# %%
# A baseline: popularity
# ----------------------
# Every user gets the items with the most training positives.  On film ratings this is
# a strong baseline: popular films are popular because many people like them.
counts = np.bincount(np.searchsorted(item_ids, train["item_id"]),
                     minlength=item_ids.size).astype(float)
results = {"popularity": evaluate(np.tile(counts, (test_users.size, 1)))}

# %%
# Factorization machine rankers
# -----------------------------
# Each model is a pipeline of a :class:`~polylite.FieldEncoder` and the ranker.
# ``output="relational"`` stores each user's and each item's part once, as the ranker
# prefers.  The ``users`` and ``items`` tables given to ``fit`` make every user and
# every item known to the encoder, including the items without a training positive:
# they are drawn as negatives and scored like the others.  The rankers keep their
# defaults (30 epochs of AdaGrad, one thread) except the rank, ``n_components=10``, and
# the seed:
#
# - WARP draws negatives until one scores within the margin of the positive, and weighs
#   the step by the positive's estimated rank: it works on the top of the list;
# - BPR takes one negative per positive and the logistic loss of the score difference:
#   it works on the order of the whole list;
# - the hybrid is WARP with side features: each user's age band, gender and
#   occupation, and each item's genres, beside the ids;
# - "+ rated" adds to the hybrid's user part the items the user has among the training
#   positives (``implicit="user"``: implicit feedback, as in SVD++).  A user is then
#   also described by what they chose, which users who chose alike share.  Those rows
#   are long, so the ranker visits each user's positives in batches of 16 and computes
#   and steps the user's part once per batch (``query_batch="auto"``); 15 epochs
#   suffice.
side_features = dict(user_features={"age_band": "categorical", "gender": "categorical",
                                    "occupation": "categorical"},
                     item_features={"genres": "numeric"})
configurations = {
    "WARP": (dict(), dict(loss="warp")),
    "BPR": (dict(), dict(loss="bpr")),
    "hybrid WARP": (side_features, dict(loss="warp")),
    "+ rated": (dict(implicit="user", **side_features), dict(loss="warp", max_iter=15)),
}
models = {}
for name, (features, settings) in configurations.items():
    model = make_pipeline(
        FieldEncoder(output="relational", **features),
        FactorizationMachineRanker(n_components=10, random_state=0, **settings))
    start = time.perf_counter()
    model.fit(train, fieldencoder__users=users, fieldencoder__items=items)
    seconds = time.perf_counter() - start
    models[name] = model
    results[name] = evaluate(score_items(model, test_users, item_ids))
    print(f"{name}: fitted in {seconds:.1f} s")

print(f"\n{'':<12}{'P@10':>8}{'nDCG@10':>9}{'AUC':>8}")
for name, value in results.items():
    print(f"{name:<12}{value['P@10']:8.3f}{value['nDCG@10']:9.3f}{value['AUC']:8.3f}")

# %%
# The encoders of the first two models read only the ids from the tables, the others'
# also the features they are asked for, so one ``fit`` call serves all of them.
#
# On MovieLens, both losses learn far better lists than popularity.  WARP, built for
# the top of the list, gives a better top 10 than BPR, which works on the order of the
# whole list.  The side features alone do not improve the lists in 30 epochs: every
# MovieLens user has rated at least 20 films, and with that many interactions the ids
# say more about a user than an age band, a gender and an occupation (side features
# matter most for users and items with few interactions, and for new ones).  The items
# each user chose do: the "+ rated" model gives the best lists of all, in half the
# epochs.
metrics = ["P@10", "nDCG@10", "AUC"]
fig, axes = plt.subplots(1, 3, figsize=(10, 3.2))
names = list(results)
for ax, metric in zip(axes, metrics):
    values = [results[name][metric] for name in names]
    bars = ax.barh(names, values, color=["gray", "C0", "C1", "C2", "C3"])
    ax.bar_label(bars, fmt="%.3f", padding=2, fontsize=8)
    ax.set_xlim(0.5 if metric == "AUC" else 0, 1.0 if metric == "AUC" else
                1.25 * max(values))
    ax.set_title(metric)
    ax.invert_yaxis()
for ax in axes[1:]:
    ax.set_yticklabels([])
fig.suptitle("Test users' rankings of the items they did not rate in training")
fig.tight_layout()
plt.show()

# %%
# One user's list
# ---------------
# :func:`~polylite.recommend.recommend` returns each user's top items directly;
# ``exclude`` leaves out the pairs of a table, here every training rating.  The WARP
# model's top 5 for the first test user, with the genres of each item and whether the
# user rated it 4 or more in the test part:
user = test_users[0]
top_items, top_scores = recommend(models["WARP"], [user], n=5, items=item_ids,
                                  exclude=rated_in_training)
liked = set(test["item_id"][test["user_id"] == user])
print(f"user {user}:")
for item, score in zip(top_items[0], top_scores[0]):
    row = np.flatnonzero(items["item_id"] == item)[0]
    kinds = ", ".join(genre_names[g] for g in np.flatnonzero(items["genres"][row]))
    mark = "liked in test" if item in liked else ""
    line = f"  {items['title'][row]:<45.45} {score:6.2f}  {kinds:<28.28} {mark}"
    print(line.rstrip())
