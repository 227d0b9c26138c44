"""
Top-N recommendations from a factorization machine
==================================================

Ratings are a recommender's classic data: each row one-hot encodes a user and an item,
and the target is the user's rating of the item.  A degree-2 factorization machine on
these rows is a biased matrix factorization, :math:`w_0 + w_u + w_i + \\langle p_u,
p_i\\rangle`, so it can rank for every user the items they have not rated yet.

The ratings here are synthetic (MovieLens cannot ship with the docs) but shaped like
real ones: users and items with power-law popularity, each user rating a few dozen
items, preferences of rank 4.  Since the true preferences are known, the top 10 items
recommended to each user can be checked against the user's true top 10 among the items
they have not rated (precision at 10).
"""

import matplotlib.pyplot as plt
import numpy as np
import scipy.sparse as sp
from sklearn.linear_model import Ridge

from polylite import FactorizationMachineRegressor

# %%
# Synthetic ratings
# -----------------
# 500 users, 300 items; every user rates 20 to 80 items, the popular ones more often.
# A rating is the true preference plus noise of standard deviation 0.3.
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
    rated = rng.choice(n_items, n_rated, replace=False, p=popularity)
    users.append(np.full(rated.size, user))
    items.append(rated)
users, items = np.concatenate(users), np.concatenate(items)
ratings = (preference[users, items]
           + noise * rng.standard_normal(users.size))


def one_hot(users, items):
    """Rows with a one in the user's column and one in the item's."""
    columns = np.column_stack([users, n_users + items]).ravel()
    return sp.csr_matrix((np.ones(columns.size), columns,
                          np.arange(0, columns.size + 1, 2)),
                         shape=(users.size, n_users + n_items))


train = rng.random(users.size) < 0.8
X_train, y_train = one_hot(users[train], items[train]), ratings[train]
X_test, y_test = one_hot(users[~train], items[~train]), ratings[~train]
print(f"{users.size} ratings, {train.sum()} for training, "
      f"{X_train.shape[1]} one-hot columns")

# %%
# Scoring every item for every user
# ---------------------------------
# Any fitted estimator can rank: build the rows of every (user, item) pair, predict,
# hide the items the user rated in training, and keep the 10 best.
all_pairs = one_hot(np.repeat(np.arange(n_users), n_items),
                    np.tile(np.arange(n_items), n_users))
seen = np.zeros((n_users, n_items), dtype=bool)
seen[users[train], items[train]] = True


def top_n(scores, n=10):
    """The n best unseen items of every user, best first."""
    scores = np.where(seen, -np.inf, scores)
    best = np.argpartition(-scores, n, axis=1)[:, :n]
    order = np.argsort(-np.take_along_axis(scores, best, axis=1), axis=1)
    return np.take_along_axis(best, order, axis=1)


def precision_at_10(recommended):
    """Share of the recommended items among the true unseen top 10."""
    truth = top_n(preference)
    hits = [np.intersect1d(r, t).size for r, t in zip(recommended, truth)]
    return np.sum(hits) / recommended.size


# %%
# A linear model against factorization machines of growing rank
# -------------------------------------------------------------
# The linear model (ridge regression on the same one-hot rows) learns a bias per user
# and per item: it recommends the same well-rated items to everybody.  The FM adds
# :math:`\langle p_u, p_i\rangle` and personalises the list; its rank ``n_components``
# is the number of taste dimensions it can represent.  ``alpha`` and ``beta`` weigh a
# mean over rows, and a user's factors appear in about 1/500 of them: per user, the
# penalty acts about 500 times as strongly, so it is set small.
ridge = Ridge(alpha=1.0).fit(X_train, y_train)


def test_rmse(model):
    return np.sqrt(np.mean((model.predict(X_test) - y_test) ** 2))


def recommend(model):
    """The model's top 10 unseen items of every user."""
    return top_n(model.predict(all_pairs).reshape(n_users, n_items))


ridge_rmse = test_rmse(ridge)
ridge_precision = precision_at_10(recommend(ridge))
print(f"ridge: test RMSE {ridge_rmse:.3f}, "
      f"precision@10 {ridge_precision:.2f}")

ranks = [1, 2, 4, 8]
fm_rmse, fm_precision = [], []
for k in ranks:
    fm = FactorizationMachineRegressor(
        degree=2, n_components=k, alpha=1e-4, beta=1e-4, max_iter=100,
        tol=1e-5, random_state=0)
    fm.fit(X_train, y_train)
    fm_rmse.append(test_rmse(fm))
    recommended = recommend(fm)
    fm_precision.append(precision_at_10(recommended))
    print(f"FM k = {k}: test RMSE {fm_rmse[-1]:.3f}, "
          f"precision@10 {fm_precision[-1]:.2f}")

fig, (left, right) = plt.subplots(1, 2, figsize=(8, 3.5))
for ax, fm_values, ridge_value, floor, floor_name in [
        (left, fm_rmse, ridge_rmse, noise, "noise level"),
        (right, fm_precision, ridge_precision, 10 / n_items,
         "random items")]:
    ax.plot(ranks, fm_values, "o-", label="FM, degree 2")
    ax.axhline(ridge_value, color="C1", linestyle="--",
               label="linear (ridge)")
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
# user has rated none of them).
user = 0
scores = fm.predict(one_hot(np.full(n_items, user), np.arange(n_items)))
print("rank  item  predicted  true")
for position, item in enumerate(recommended[user][:5], start=1):
    print(f"{position:4d}  {item:4d}  {scores[item]:9.2f}  "
          f"{preference[user, item]:4.2f}")
