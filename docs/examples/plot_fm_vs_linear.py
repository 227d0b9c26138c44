"""
Factorization machine against a linear model
============================================

Targets with planted pairwise interactions between sparse features: a linear model can
only fit the main effects, while a degree-2 factorization machine also learns the
interactions, and its test error falls toward the noise level as the training set
grows.  The interaction weights are low-rank, as the FM assumes, but most pairs of
features never occur together in the training rows: the factors still give them a
weight.
"""

import matplotlib.pyplot as plt
import numpy as np
import scipy.sparse as sp
from sklearn.linear_model import Ridge
from sklearn.metrics import mean_squared_error

from polylite import FactorizationMachineRegressor
from polylite.kernels import predict

# %%
# Planted data
# ------------
# 300 sparse features, 6 nonzeros per row; the target is a linear part plus the
# interactions of a rank-3 factorization machine, plus noise of standard
# deviation 0.1.
rng = np.random.RandomState(0)
n_samples, n_features, nnz_per_row, noise = 12_000, 300, 6, 0.1
indices = np.array([rng.choice(n_features, nnz_per_row, replace=False)
                    for _ in range(n_samples)])
X = sp.csr_matrix((rng.uniform(0.5, 1.5, indices.size), indices.ravel(),
                   np.arange(0, indices.size + 1, nnz_per_row)),
                  shape=(n_samples, n_features))
X.sort_indices()
w = rng.normal(0, 0.5, n_features)
P = rng.normal(0, 0.6, (n_features, 3))
y = predict(X, P, degrees=2, w=w, intercept=1.0) + noise * rng.randn(n_samples)
X_train, y_train = X[:10_000], y[:10_000]
X_test, y_test = X[10_000:], y[10_000:]

# %%
# Test error against the number of training rows
# ----------------------------------------------
sizes = [250, 500, 1000, 2000, 5000, 10_000]
rmse = {"linear (ridge)": [], "FM, degree 2, k = 3": []}
for n in sizes:
    ridge = Ridge(alpha=1.0).fit(X_train[:n], y_train[:n])
    fm = FactorizationMachineRegressor(degree=2, n_components=3, beta=1e-3,
                                       tol=1e-4, max_iter=300, random_state=0)
    fm.fit(X_train[:n], y_train[:n])
    for name, model in zip(rmse, (ridge, fm)):
        error = mean_squared_error(y_test, model.predict(X_test)) ** 0.5
        rmse[name].append(error)
    print(f"{n:6d} rows: ridge {rmse['linear (ridge)'][-1]:.3f}, "
          f"FM {rmse['FM, degree 2, k = 3'][-1]:.3f}")

fig, ax = plt.subplots(figsize=(6, 4))
for name, values in rmse.items():
    ax.plot(sizes, values, "o-", label=name)
ax.axhline(noise, color="gray", linestyle="--", label="noise level")
ax.set_xscale("log")
ax.set_yscale("log")
ax.set_xlabel("training rows")
ax.set_ylabel("test RMSE")
ax.set_title("Planted pairwise interactions")
ax.legend()
fig.tight_layout()
plt.show()
