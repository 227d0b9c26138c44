"""
Top-N recommendations from a factorization machine
==================================================

Ratings are a recommender's classic data: each row is a user, an item and the user's
rating of the item.  :class:`~polylite.preprocessing.FieldEncoder` turns such a table
into sparse rows (a one-hot user and a one-hot item), on which a degree-2 factorization
machine is a biased matrix factorization, :math:`w_0 + w_u + w_i + \\langle p_u,
p_i\\rangle`.  :func:`polylite.recommend.recommend` then ranks, for every user, the
items not rated yet, by matrix products over the item factors (no row per pair).

The ratings here are synthetic (MovieLens cannot ship with the docs) but shaped like
real ones: users and items with power-law popularity, each user rating a few dozen
items, more often those they like, preferences of rank 4.  Since the true preferences are known, the top 10 items
recommended to each user can be checked against the user's true top 10 among the items
they have not rated (precision at 10).
"""

import time

import matplotlib.pyplot as plt
import numpy as np
from sklearn.linear_model import Ridge
from sklearn.pipeline import make_pipeline

from polylite import FactorizationMachineRegressor, FieldEncoder
from polylite.metrics import ndcg_at_k, precision_at_k, rmse
from polylite.recommend import recommend

# %%
# Synthetic ratings
# -----------------
# 500 users, 300 items; every user rates 20 to 80 items, the popular ones and those the
# user likes more often.  A rating is the true preference plus noise of standard
# deviation 0.3.  Tables are
# mappings of column name to array (a pandas DataFrame works the same).
rng = np.random.default_rng(0)
n_users, n_items, rank, noise = 500, 300, 4, 0.3
user_factors = rng.normal(0, 0.5, (n_users, rank))
item_factors = rng.normal(0, 0.5, (n_items, rank))
# The true preference of every user for every item: (n_users, n_items).
preference = (3.0 + rng.normal(0, 0.3, (n_users, 1))
              + rng.normal(0, 0.3, n_items)
              + user_factors @ item_factors.T)

popularity = 1.0 / np.arange(1, n_items + 1) ** 0.8
popularity = rng.permutation(popularity / popularity.sum())
users, items = [], []
for user in range(n_users):
    n_rated = rng.integers(20, 81)
    users.append(np.full(n_rated, user))
    chance = popularity * np.exp(2 * (preference[user] - preference[user].mean()))
    items.append(rng.choice(n_items, n_rated, replace=False, p=chance / chance.sum()))
users, items = np.concatenate(users), np.concatenate(items)
ratings = preference[users, items] + noise * rng.standard_normal(users.size)

train = rng.random(users.size) < 0.8
train_table = {"user_id": users[train], "item_id": items[train]}
test_table = {"user_id": users[~train], "item_id": items[~train]}
y_train, y_test = ratings[train], ratings[~train]
print(f"{users.size} ratings, {train.sum()} for training")

# %%
# The true top 10 of every user, among the items they did not rate in training (and
# that the training ratings contain at all: an item nobody rated cannot be scored).
unseen = np.ones((n_users, n_items), dtype=bool)
unseen[users[train], items[train]] = False
unseen[:, np.setdiff1d(np.arange(n_items), items[train])] = False
true_top = np.argsort(-np.where(unseen, preference, -np.inf), axis=1)[:, :10]
every_user = np.arange(n_users)


def evaluate(model):
    """Test RMSE, nDCG@5 of the test ratings, precision@10 of the top-10 lists."""
    predicted = model.predict(test_table)
    recommended, _ = recommend(model, every_user, n=10, exclude=train_table)
    return (rmse(y_test, predicted),
            ndcg_at_k(y_test, predicted, test_table["user_id"], k=5),
            precision_at_k(recommended, list(true_top)))


# %%
# A linear model against factorization machines of growing rank
# -------------------------------------------------------------
# Each model is a pipeline: the encoder, then the regressor.  ``handle_unknown="ignore"``
# scores a test pair whose user or item never appeared in training from the part that
# is known.  The linear model (ridge regression on the same one-hot rows) learns a bias
# per user and per item: it recommends the same well-rated items to everybody (and
# ``recommend`` scores it pair by pair).  The FM adds :math:`\langle p_u, p_i\rangle`
# and personalises the list; its rank ``n_components`` is the number of taste
# dimensions it can represent.  ``alpha`` and ``beta`` weigh a mean over rows, and a
# user's factors appear in about 1/500 of them: per user, the penalty acts about 500
# times as strongly, so it is set small.
def encoder():
    return FieldEncoder(handle_unknown="ignore")


ridge = make_pipeline(encoder(), Ridge(alpha=1.0)).fit(train_table, y_train)
ridge_scores = evaluate(ridge)
print("ridge:  test RMSE {:.3f}, nDCG@5 {:.3f}, precision@10 {:.2f}".format(
    *ridge_scores))

ranks = [1, 2, 4, 8]
fm_scores = []
for k in ranks:
    fm = make_pipeline(encoder(), FactorizationMachineRegressor(
        degree=2, n_components=k, alpha=1e-4, beta=1e-4, max_iter=100, tol=1e-5,
        random_state=0))
    fm.fit(train_table, y_train)
    fm_scores.append(evaluate(fm))
    print("FM k = {}: test RMSE {:.3f}, nDCG@5 {:.3f}, precision@10 {:.2f}".format(
        k, *fm_scores[-1]))
fm_rmse, _, fm_precision = np.array(fm_scores).T

fig, (left, right) = plt.subplots(1, 2, figsize=(8, 3.5))
for ax, fm_values, ridge_value, floor, floor_name in [
        (left, fm_rmse, ridge_scores[0], noise, "noise level"),
        (right, fm_precision, ridge_scores[2], 10 / n_items, "random items")]:
    ax.plot(ranks, fm_values, "o-", label="FM, degree 2")
    ax.axhline(ridge_value, color="C1", linestyle="--", label="linear (ridge)")
    ax.axhline(floor, color="gray", linestyle=":", label=floor_name)
    ax.set_xscale("log", base=2)
    ax.set_xticks(ranks, [str(k) for k in ranks])
    ax.minorticks_off()
    ax.set_xlabel("n_components")
left.set(ylabel="test RMSE", title="Rating error")
right.set(ylabel="precision at 10", ylim=(0, 1), title="Top-10 lists")
left.legend()
right.legend(loc="center right")
fig.tight_layout()
plt.show()

# %%
# One user's list
# ---------------
# The last FM's top 5 for user 0, with the predicted and the true preference (the
# user has rated none of them in training).
top_items, top_scores = recommend(fm, [0], n=5, exclude=train_table)
print("rank  item  predicted  true")
for position, (item, score) in enumerate(zip(top_items[0], top_scores[0]), start=1):
    print(f"{position:4d}  {item:4d}  {score:9.2f}  {preference[0, item]:4.2f}")

# %%
# Implicit feedback, each user's and item's part stored once
# ----------------------------------------------------------
# Which items a user chose to rate says something about their taste, whatever the
# ratings were.  ``implicit="both"`` adds to each row the set of items its user rated
# and the set of users who rated its item (the implicit fields of SVD++ and libFM), so
# every row repeats its user's and its item's sets: a few hundred nonzeros instead of
# two.  ``output="relational"`` stores each user's and each item's part once, as a row
# of a table, with an index from each rating to it (a
# :class:`~polylite.RelationalMatrix`): coordinate descent then takes each step from
# sums kept per table row, and the model is the same as on the expanded CSR rows.
implicit = FieldEncoder(implicit="both", handle_unknown="ignore", output="relational")
X_relational = implicit.fit(train_table).transform(train_table)
X_csr = X_relational.to_csr()
print(f"{X_relational.shape[0]} rows, {X_relational.shape[1]} columns; nonzeros stored: "
      f"{X_relational.nnz} relational, {X_csr.nnz} as CSR rows")

# Five epochs on each form: the same fit, at a fraction of the time.
fits = {}
for name, X in [("relational", X_relational), ("CSR", X_csr)]:
    start = time.perf_counter()
    fits[name] = FactorizationMachineRegressor(
        n_components=4, alpha=1e-4, beta=1e-4, max_iter=5, tol=0,
        random_state=0).fit(X, y_train)
    print(f"{name:>10}: {(time.perf_counter() - start) / 5:.4f} s per epoch")
difference = np.abs(fits["relational"].predict(X_relational)
                    - fits["CSR"].predict(X_csr)).max()
print(f"largest difference between the two fits' predictions: {difference:.1e}")

# %%
# The implicit fields improve both the predicted ratings and the top-10 lists of the
# rank-4 FM; ``recommend`` scores every (user, item) pair from the user and item tables.
plain = make_pipeline(encoder(), FactorizationMachineRegressor(
    n_components=4, alpha=1e-4, beta=1e-4, max_iter=100, tol=1e-5, random_state=0))
with_implicit = make_pipeline(implicit, FactorizationMachineRegressor(
    n_components=4, alpha=1e-4, beta=1e-4, max_iter=100, tol=1e-5, random_state=0))
for name, model in [("FM k = 4", plain), ("+ implicit", with_implicit)]:
    model.fit(train_table, y_train)
    print("{:>10}: test RMSE {:.3f}, nDCG@5 {:.3f}, precision@10 {:.2f}".format(
        name, *evaluate(model)))
