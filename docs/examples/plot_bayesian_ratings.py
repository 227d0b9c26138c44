"""
Star ratings with Bayesian factorization machines: Gibbs, variational, ordered levels
=====================================================================================

A Bayesian factorization machine has hyperpriors on its regularisation, so there is none
to tune.  For star ratings it comes in three forms:

- :class:`~polylite.BayesianFactorizationMachineRegressor` treats a rating as a number
  with Gaussian noise and samples the posterior (Gibbs sampling);
- :class:`~polylite.VariationalFactorizationMachineRegressor` is the same model fitted
  by mean-field variational inference: one deterministic model in a couple of dozen
  iterations;
- :class:`~polylite.BayesianFactorizationMachineOrdinalRegressor` treats a rating as
  one of a few ordered levels (ordered probit): it learns where the boundaries between
  1, 2, ..., 5 stars lie and gives the probability of each level.

All three are fitted here on the ``u1`` split of MovieLens 100K, with the user and item ids
as features; the chains are scored by the test RMSE after every sweep, the variational
model once, fitted.  MovieLens is not shipped
with polylite (``polylite.datasets.fetch_movielens("100k")`` downloads it): when its
``ml-100k`` folder is not found, the example runs on synthetic ratings of the same shape,
and says so.
"""

import os

import matplotlib.pyplot as plt
import numpy as np

from polylite import (BayesianFactorizationMachineOrdinalRegressor,
                      BayesianFactorizationMachineRegressor, FieldEncoder,
                      VariationalFactorizationMachineRegressor)
from polylite.datasets import get_data_home, load_movielens, make_recommender


def find_movielens():
    """The ml-100k folder (in the data folder, where ``fetch_movielens("100k")``
    downloads it, else in the current directory, this example's folder, or their
    parents, also as shared/data/movielens/ml-100k), or None."""
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


def synthetic(seed=0):
    """Ratings of 1 to 5 stars from a planted factorization machine, shaped like
    MovieLens 100K, and a random 80/20 split."""
    table, y = make_recommender(100_000, 943, 1682, 0, return_table=True, noise=0.8,
                                random_state=seed)[:2]
    stars = 1 + np.searchsorted(np.quantile(y, [0.06, 0.17, 0.44, 0.78]), y)
    order = np.random.default_rng(seed).permutation(y.shape[0])
    ratings = {"user_id": table["user_id"], "item_id": table["item_id"],
               "rating": stars.astype(float)}
    return ratings, (order[:80_000], order[80_000:])


path = find_movielens()
if path is not None:
    ml = load_movielens(path, splits=["u1"])
    ratings, (train_rows, test_rows) = ml.ratings, ml.splits["u1"]
    print("MovieLens 100K, split u1")
else:
    ratings, (train_rows, test_rows) = synthetic()
    print("MovieLens 100K not found: synthetic ratings of the same shape instead")

# %%
# The features: a one-hot user id and item id, stored as relational input (each user's
# and each item's part once).  Each field is its own feature group, with its own prior.
pairs = {"user_id": np.asarray(ratings["user_id"]),
         "item_id": np.asarray(ratings["item_id"])}
train = {key: column[train_rows] for key, column in pairs.items()}
test = {key: column[test_rows] for key, column in pairs.items()}
encoder = FieldEncoder(output="relational", handle_unknown="ignore").fit(train)
X_train, X_test = encoder.transform(train), encoder.transform(test)
y_train = np.asarray(ratings["rating"])[train_rows]
y_test = np.asarray(ratings["rating"])[test_rows]
groups = np.repeat(np.arange(len(encoder.fields_)),
                   [field.stop - field.start for field in encoder.fields_])

# %%
# Both chains run 100 sweeps and report, after each, the test RMSE of their prediction
# averaged over the sweeps so far (``X_eval``, ``y_eval``).
common = dict(n_components=8, n_iter=100, n_burn_in=10, random_state=0)
gaussian = BayesianFactorizationMachineRegressor(**common)
gaussian.fit(X_train, y_train, feature_groups=groups, X_eval=X_test, y_eval=y_test)
ordinal = BayesianFactorizationMachineOrdinalRegressor(**common)
ordinal.fit(X_train, y_train, feature_groups=groups, X_eval=X_test, y_eval=y_test)


def rmse(prediction):
    return np.sqrt(np.mean((prediction - y_test) ** 2))


print(f"test RMSE, Gaussian (clipped to [1, 5]): "
      f"{rmse(np.clip(gaussian.predict(X_test), 1, 5)):.4f}")
print(f"test RMSE, ordered probit (expected level): {rmse(ordinal.predict(X_test)):.4f}")
print(f"cutpoints (posterior mean): {np.round(ordinal.cutpoints_samples_.mean(0), 2)}")

# %%
# The variational model takes CSR rows (``to_csr``) and stops when its evidence lower
# bound settles.  ``predict(return_std=True)`` gives each rating's posterior standard
# deviation: larger for the users with the fewest training ratings.
variational = VariationalFactorizationMachineRegressor(n_components=8, random_state=0)
variational.fit(X_train.to_csr(), y_train, feature_groups=groups)
mean, std = variational.predict(X_test.to_csr(), return_std=True)
print(f"test RMSE, variational ({variational.n_iter_} iterations, clipped): "
      f"{rmse(np.clip(mean, 1, 5)):.4f}")
ratings_of = dict(zip(*np.unique(train["user_id"], return_counts=True)))
user_counts = np.array([ratings_of.get(user, 0) for user in test["user_id"]])
few = user_counts <= np.quantile(user_counts, 0.1)
print(f"mean posterior sd: {std[few].mean():.3f} for the tenth of test ratings whose users "
      f"rated the fewest items, {std[~few].mean():.3f} for the others")

# %%
# Left, the running test RMSE of both chains (the ordinal model's running prediction is
# the expected level), and the variational model's.  Right, the ordinal model's mean
# probability of each level for the test ratings of each number of stars: the
# probabilities shift with the true rating, and the model knows when a rating is
# uncertain.
proba = ordinal.predict_proba(X_test)
fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
sweeps = np.arange(1, common["n_iter"] + 1)
left.plot(sweeps, gaussian.eval_rmse_, label="Gaussian")
left.plot(sweeps, ordinal.eval_rmse_, label="ordered probit")
left.axhline(rmse(np.clip(mean, 1, 5)), color="C2", ls="--",
             label=f"variational ({variational.n_iter_} iterations)")
left.axvline(common["n_burn_in"], color="0.7", ls=":")
left.set_ylim(min(gaussian.eval_rmse_.min(), ordinal.eval_rmse_.min()) - 0.01,
              min(gaussian.eval_rmse_.min(), ordinal.eval_rmse_.min()) + 0.12)
left.set_xlabel("sweep")
left.set_ylabel("test RMSE of the running average")
left.legend()
stars = ordinal.levels_
for level in stars:
    right.plot(stars, proba[y_test == level].mean(axis=0), marker="o",
               label=f"true {level:g} stars")
right.set_xlabel("predicted level")
right.set_ylabel("mean probability")
right.legend(fontsize=8)
fig.tight_layout()
plt.show()
