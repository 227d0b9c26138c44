"""
Decision boundaries of FM and PN classifiers
============================================

Three two-dimensional problems, three classifiers: logistic regression (linear), a
degree-2 factorization machine and a degree-2 polynomial network.  With two features,
the FM's only interaction is :math:`x_1 x_2` (the ANOVA kernel leaves out squares), so
its boundaries are hyperbolas: it solves XOR but not the circles.  The polynomial
network's kernel :math:`(\\gamma + \\langle p, x \\rangle)^2` includes
:math:`x_1^2` and :math:`x_2^2`, so it draws ellipses as well.
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import make_circles, make_moons
from sklearn.linear_model import LogisticRegression

from polylite import (FactorizationMachineClassifier,
                      PolynomialNetworkClassifier)

rng = np.random.RandomState(0)
X_xor = rng.uniform(-1, 1, (300, 2))
datasets = {
    "XOR": (X_xor, (X_xor[:, 0] * X_xor[:, 1] > 0).astype(int)),
    "circles": make_circles(300, noise=0.08, factor=0.5, random_state=0),
    "moons": make_moons(300, noise=0.15, random_state=0),
}
classifiers = {
    "logistic regression": lambda: LogisticRegression(),
    "FM, degree 2": lambda: FactorizationMachineClassifier(
        degree=2, n_components=4, alpha=1e-3, beta=1e-3, solver="lbfgs",
        random_state=0),
    "PN, degree 2": lambda: PolynomialNetworkClassifier(
        degree=2, n_components=4, alpha=1e-3, beta=1e-3, solver="lbfgs",
        random_state=0),
}

fig, axes = plt.subplots(len(datasets), len(classifiers), figsize=(9, 9),
                         sharex="row", sharey="row")
for row, (data_name, (X, y)) in enumerate(datasets.items()):
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    axis = np.linspace(-2.5, 2.5, 200)
    xx, yy = np.meshgrid(axis, axis)
    grid = np.c_[xx.ravel(), yy.ravel()]
    for col, (clf_name, make) in enumerate(classifiers.items()):
        clf = make().fit(X, y)
        proba = clf.predict_proba(grid)[:, 1].reshape(xx.shape)
        ax = axes[row, col]
        ax.contourf(xx, yy, proba, levels=np.linspace(0, 1, 11), cmap="RdBu_r",
                    alpha=0.75)
        ax.contour(xx, yy, proba, levels=[0.5], colors="k", linewidths=1)
        ax.scatter(X[:, 0], X[:, 1], c=y, cmap="RdBu_r", edgecolors="w",
                   linewidths=0.4, s=14)
        ax.text(0.03, 0.03, f"training accuracy {clf.score(X, y):.2f}",
                transform=ax.transAxes, fontsize=8,
                bbox=dict(facecolor="white", alpha=0.8, edgecolor="none"))
        ax.set_xticks([])
        ax.set_yticks([])
        if row == 0:
            ax.set_title(clf_name)
        if col == 0:
            ax.set_ylabel(data_name)
fig.tight_layout()
plt.show()
