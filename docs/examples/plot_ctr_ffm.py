"""
Field-aware factorization machines on click logs
================================================

Synthetic click logs shaped as Criteo's (:func:`polylite.datasets.make_ctr`: 13
count-like and 26 categorical fields, a 25% click rate) with planted interactions that
depend on which two fields meet.  A field-aware FM gives each feature a latent vector
per field and finds them; a plain FM, with one vector per feature for every pair, and a
logistic regression fitted by FTRL with an L1 penalty do less well.  The plot follows
the test log loss epoch by epoch.  (A check of the planted structure, not evidence on
real clicks.)
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.metrics import log_loss
from sklearn.preprocessing import normalize

from polylite import FactorizationMachineClassifier, FieldAwareFactorizationMachineClassifier
from polylite.datasets import make_ctr

# %%
# The data
# --------
# 60,000 rows: 50,000 to train on and 10,000 to test.  Each row has one nonzero per
# field; the fields' categories come as one-hot columns.
X, y, fields = make_ctr(60_000, max_categories=20_000, random_state=0)
X_train, y_train, X_test, y_test = X[:50_000], y[:50_000], X[50_000:], y[50_000:]
print(f"{X.shape[1]} columns in {fields.max() + 1} fields, click rate {y.mean():.3f}")

# %%
# Three models, an epoch at a time
# --------------------------------
# ``partial_fit`` runs one epoch and continues from where the previous call left the
# model (and its solver's statistics), so the test loss can be read after every epoch.
# The FM and the logistic regression see the rows scaled to unit norm, as the
# field-aware FM does by default.
epochs = 6
models = {
    "field-aware FM, k = 4": FieldAwareFactorizationMachineClassifier(
        fields=fields, n_components=4, random_state=0),
    "FM, k = 4": FactorizationMachineClassifier(
        n_components=4, solver="adagrad", eta0=0.2, alpha=2e-5, beta=2e-5,
        random_state=0),
    "logistic regression (FTRL, l1 = 1)": FactorizationMachineClassifier(
        n_components=1, init_scale=0.0, solver="ftrl", l1=1.0, random_state=0),
}
unit = {name: (X_train, X_test) if name.startswith("field") else
        (normalize(X_train), normalize(X_test)) for name in models}
losses = {name: [] for name in models}
for epoch in range(epochs):
    for name, model in models.items():
        model.partial_fit(unit[name][0], y_train, classes=[0, 1])
        losses[name].append(log_loss(y_test, model.predict_proba(unit[name][1])[:, 1]))

for name, values in losses.items():
    print(f"{name:36s} test log loss {values[-1]:.4f}")
lr = models["logistic regression (FTRL, l1 = 1)"]
print(f"FTRL keeps {lr.n_nonzero_weights_} of {lr.w_.size} weights")

# %%
# Test log loss by epoch
# ----------------------
fig, ax = plt.subplots(figsize=(6, 4))
for name, values in losses.items():
    ax.plot(np.arange(1, epochs + 1), values, marker="o", label=name)
ax.axhline(log_loss(y_test, np.full(y_test.shape, y_train.mean())), color="gray",
           linestyle=":", label="click rate alone")
ax.set_xlabel("epoch")
ax.set_ylabel("test log loss")
ax.legend()
fig.tight_layout()
plt.show()
