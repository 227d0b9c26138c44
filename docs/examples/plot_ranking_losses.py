"""
WARP, BPR and the whole-data loss
=================================

:class:`~polylite.FactorizationMachineRanker` learns from positive-only data with three
losses:

- ``loss="warp"`` draws negatives for each positive until one scores within a margin of
  it, and weighs the step by the positive's estimated rank: it trains the top of the
  list;
- ``loss="bpr"`` takes one negative per positive and the logistic loss of the score
  difference: it trains the order of the whole list;
- ``loss="ials"`` draws no negatives: every (user, item) pair is a target, 1 for the
  positives and 0 with the small weight ``alpha0`` for all the others, fitted by
  weighted least squares (iALS's loss, here for a factorization machine with any
  features).  The sum over every pair comes from two small k x k matrices, one over
  the users and one over the items, and coordinate descent minimises the objective
  exactly along each parameter in turn.

Here the three are fitted on MovieLens 100K's ``u1`` split (a rating of 4 or 5 is a
positive), with each user's id, side features and the set of items they rated among the
training positives.  Each user with a test positive ranks the items they did not rate in
training.  When MovieLens is not found (``polylite.datasets.fetch_movielens("100k")``
downloads it) the example runs on synthetic clicks instead, and says so.
"""

import os
import time

import matplotlib.pyplot as plt
import numpy as np
from sklearn.pipeline import make_pipeline

from polylite import FactorizationMachineRanker, FieldEncoder
from polylite.datasets import get_data_home, load_movielens
from polylite.metrics import auc_score, precision_at_k
from polylite.recommend import score_items


def find_movielens():
    """The ml-100k folder (in the data folder, or as shared/data/movielens/ml-100k in
    the current folder or a folder above it), or None."""
    candidates = [os.path.join(get_data_home(), "ml-100k")]
    folder = os.getcwd()
    for _ in range(5):
        candidates.append(os.path.join(folder, "shared", "data", "movielens", "ml-100k"))
        folder = os.path.dirname(folder)
    return next((path for path in candidates
                 if os.path.isfile(os.path.join(path, "u.data"))), None)


def movielens(path):
    """Training positives, test positives, items rated in training, side tables."""
    ml = load_movielens(path, splits=["u1"])
    train_rows, test_rows = ml.splits["u1"]

    def table(rows, positive_only):
        if positive_only:
            rows = rows[ml.ratings["rating"][rows] >= 4]
        return {"user_id": ml.ratings["user_id"][rows],
                "item_id": ml.ratings["item_id"][rows]}

    users = {"user_id": ml.users.user_id, "age": ml.users.age // 10,
             "gender": ml.users.gender, "occupation": ml.users.occupation}
    items = {"item_id": ml.items.item_id,
             "genres": np.asarray(ml.items.genres, dtype=np.float64)}
    return (table(train_rows, True), table(test_rows, True), table(train_rows, False),
            users, items)


def synthetic(seed=0):
    """Clicks of 900 users on 1,200 items: each user mostly clicks items of one of 12
    kinds (item j is of kind j % 12), each user's kind partly given by their group."""
    rng = np.random.default_rng(seed)
    n_users, n_items, n_kinds = 900, 1200, 12
    group = rng.integers(0, 4, n_users)
    taste = np.where(rng.random(n_users) < 0.5, group * 3 + rng.integers(0, 3, n_users),
                     rng.integers(0, n_kinds, n_users))
    user = rng.integers(0, n_users, 60_000)
    kind = np.where(rng.random(user.size) < 0.7, taste[user],
                    rng.integers(0, n_kinds, user.size))
    item = kind + n_kinds * np.minimum(rng.zipf(1.3, user.size) - 1, n_items // n_kinds - 1)
    pairs = np.unique(np.c_[user, item], axis=0)
    test = rng.random(len(pairs)) < 0.2
    train = {"user_id": pairs[~test, 0], "item_id": pairs[~test, 1]}
    users = {"user_id": np.arange(n_users), "group": group}
    items = {"item_id": np.arange(n_items),
             "genres": np.eye(n_kinds)[np.arange(n_items) % n_kinds]}
    return (train, {"user_id": pairs[test, 0], "item_id": pairs[test, 1]}, train, users,
            items)


path = find_movielens()
if path is not None:
    train, test, rated, users, items = movielens(path)
    side = {"age": "categorical", "gender": "categorical", "occupation": "categorical"}
    print("MovieLens 100K, split u1")
else:
    train, test, rated, users, items = synthetic()
    side = {"group": "categorical"}
    print("MovieLens 100K not found: synthetic clicks instead")

# %%
# Every item is a candidate; the rows of the score matrices are the test users, their
# columns the items in the order of ``item_ids``.
item_ids = np.sort(items["item_id"])
test_users = np.unique(test["user_id"])


def columns_of(table):
    """Each test user's items in ``table`` as column numbers."""
    mine = np.isin(table["user_id"], test_users)
    user = np.searchsorted(test_users, table["user_id"][mine])
    item = np.searchsorted(item_ids, table["item_id"][mine])
    return [item[user == u] for u in range(test_users.size)]


relevant, excluded = columns_of(test), columns_of(rated)


def evaluate(scores):
    candidates = scores.copy()
    for u, seen in enumerate(excluded):
        candidates[u, seen] = -np.inf
    top10 = np.argsort(-candidates, axis=1, kind="stable")[:, :10]
    return precision_at_k(top10, relevant), auc_score(scores, relevant, exclude=excluded)


# %%
# The three rankers share the encoder: each user's id, side features and the items the
# user has among the training positives (``implicit="user"``), each item's id and
# genres.  WARP and BPR take 15 epochs of AdaGrad; the whole-data loss 15 epochs of
# coordinate descent, ``alpha0=0.3`` (the weight of an unobserved pair) and penalties
# ``alpha=beta=3e-4`` per positive, the same for every column: a loss that fits every
# pair wants stronger penalties than the pairwise losses' defaults (1e-6).  (On these
# features ``benchmarks/bench_ranking.py --tune`` chooses k = 128, 30 epochs,
# ``alpha0=0.2`` and frequency-scaled penalties, ``beta=4e-4`` with
# ``frequency_exponent=1``, on held-out training positives.)
encoder = dict(user_features=side, item_features={"genres": "numeric"},
               implicit="user", output="relational", handle_unknown="ignore")
rankers = {
    "WARP": dict(loss="warp", max_iter=15),
    "BPR": dict(loss="bpr", max_iter=15),
    "whole-data (ials)": dict(loss="ials", max_iter=15, alpha0=0.3, alpha=3e-4,
                              beta=3e-4),
}
results = {}
for name, params in rankers.items():
    model = make_pipeline(FieldEncoder(**encoder), FactorizationMachineRanker(
        n_components=16, random_state=0, **params))
    start = time.process_time()
    model.fit(train, fieldencoder__users=users, fieldencoder__items=items)
    seconds = time.process_time() - start
    p10, auc = evaluate(score_items(model, test_users, item_ids))
    results[name] = (p10, auc, seconds)
    print(f"{name:<18} P@10 {p10:.3f}  AUC {auc:.3f}  fit {seconds:.2f} CPU s")

# %%
# The whole-data loss's objective never increases from one epoch to the next: each
# coordinate step is the exact minimiser along its coordinate.
curve = model[-1].loss_curve_
print("objective, epoch 1 and 15:", f"{curve[0]:.5f}", f"{curve[-1]:.5f}")

fig, axes = plt.subplots(1, 3, figsize=(10, 3.2))
names = list(results)
for ax, (index, label) in zip(axes, enumerate(["P@10", "AUC", "fit CPU s"])):
    values = [results[name][index] for name in names]
    ax.bar(range(len(names)), values, color=["C0", "C1", "C2"])
    ax.set_xticks(range(len(names)), ["WARP", "BPR", "ials"])
    ax.set_title(label)
    if label == "AUC":
        ax.set_ylim(min(values) - 0.05, 1)
fig.tight_layout()
plt.show()
