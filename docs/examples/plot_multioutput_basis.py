"""
Multi-output polynomial networks: accuracy against the number of basis vectors
==============================================================================

A multi-output polynomial network shares one set of basis vectors (hidden units) among
all the classes of a multi-class problem and grows it one vector at a time by
conditional gradient.  The constraint on the output layer decides how the classes share
the vectors: ``"l1"`` lets each class pick its own, the group penalty ``"l1/l2"`` picks
vectors useful to all classes together (``"l1/linf"`` behaves like ``"l1/l2"`` but its
basis-vector refinement is slower: it is left out to keep this example fast).  One fit gives the whole path
of models with 1, 2, ... basis vectors (``history_``), scored here on held-out digits.
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import MaxAbsScaler

from polylite import MultiOutputPolynomialClassifier, PolynomialNetworkClassifier

# %%
# Ten classes of 8 x 8 digits
# ---------------------------
# Features scaled to [0, 1] (``tau`` scales with the square of the features).
X, y = load_digits(return_X_y=True)
X = MaxAbsScaler().fit_transform(X)
X_train, X_test, y_train, y_test = train_test_split(
    X, y, train_size=600, test_size=600, random_state=0, stratify=y)

# %%
# The path of each penalty
# ------------------------
# ``max_basis=12`` iterations; with ``X_val, y_val`` every iteration's model is
# scored on the held-out rows (``history_["validation_accuracy"]``).
fig, ax = plt.subplots(figsize=(6, 4))
for penalty in ["l1", "l1/l2"]:
    clf = MultiOutputPolynomialClassifier(
        penalty=penalty, tau=100.0, max_basis=12, random_state=0)
    clf.fit(X_train, y_train, X_val=X_test, y_val=y_test)
    history = clf.history_
    ax.plot(history["n_basis"], history["validation_accuracy"], "o-",
            markersize=3, label=f'penalty="{penalty}"')
    print(f"{penalty:8s} best accuracy "
          f"{history['validation_accuracy'].max():.3f} with "
          f"{history['n_basis'][clf.best_iteration_ - 1]} basis vectors")

# %%
# One-vs-rest for comparison: a separate polynomial network per class,
# 10 classes x 2 hidden units = 20 basis vectors in all.
ovr = PolynomialNetworkClassifier(n_components=2, solver="lbfgs",
                                  random_state=0)
ovr_accuracy = ovr.fit(X_train, y_train).score(X_test, y_test)
ax.axhline(ovr_accuracy, color="gray", linestyle="--",
           label="one-vs-rest PN, 20 units")
ax.set_xlabel("basis vectors (hidden units)")
ax.set_ylabel("test accuracy")
ax.set_title("Digits: multi-output polynomial networks")
ax.legend(loc="lower right")
fig.tight_layout()
plt.show()
