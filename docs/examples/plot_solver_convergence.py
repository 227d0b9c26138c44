"""
Objective against time: coordinate descent, AdaGrad and L-BFGS
==============================================================

The training objective of a factorization machine (mean squared loss plus the L2
penalties) against the time taken, for each solver, at degrees 2, 3 and 4.  With
``verbose=1`` an estimator prints the objective and the seconds elapsed after every
epoch (every iteration of L-BFGS); this example reads those lines.

The data has five nonzeros per row (one-hot user and item, three numeric columns), so
interactions of degree 3 and 4 exist.  Each solver runs 30 epochs (iterations), and the
gap to the lowest objective any of them reached is plotted.  On this data coordinate
descent, which needs no step size, gets lowest fastest at degree 2; its epochs grow with
the degree, and at degrees 3 and 4 AdaGrad's cheaper epochs get further in the same
budget; L-BFGS needs many iterations to start (see :doc:`../user_guide/solvers`).
"""

import contextlib
import io
import re
import warnings

import matplotlib.pyplot as plt
import numpy as np
from sklearn.exceptions import ConvergenceWarning

from polylite import FactorizationMachineRegressor
from polylite.datasets import make_recommender

X, y = make_recommender(n_samples=10_000, n_users=300, n_items=200, degree=3,
                        random_state=0)

# "epoch 3  objective 1.234567e-01 ... 0.12s" (cd, adagrad) or
# "iteration 3  objective 1.234567e-01 ... 0.12s" (lbfgs)
LINE = re.compile(
    r"^(?:epoch|iteration)\s+(\d+)\s+objective\s+(\S+).*\s(\S+)s$")


def trace(solver, degree, max_iter=30):
    """(seconds, objective) after each epoch of one fit, from verbose output."""
    fm = FactorizationMachineRegressor(degree=degree, n_components=8,
                                       solver=solver, max_iter=max_iter, tol=0,
                                       random_state=0, verbose=1)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fm.fit(X, y)
    points = [LINE.match(line) for line in printed.getvalue().splitlines()]
    points = [(float(m[3]), float(m[2]))
              for m in points if m and int(m[1]) > 0]
    return np.array(points).T


colors = {"cd": "tab:blue", "adagrad": "tab:orange", "lbfgs": "tab:green"}
fig, axes = plt.subplots(1, 3, figsize=(11, 3.6))
for ax, degree in zip(axes, (2, 3, 4)):
    curves = {solver: trace(solver, degree) for solver in colors}
    best = min(values.min() for _, values in curves.values())
    for solver, (seconds, values) in curves.items():
        gap = (values - best) / best
        # The best point has no gap: it is left out of the log scale.
        ax.plot(seconds, np.where(gap > 0, gap, np.nan), ".-",
                color=colors[solver], label=solver)
    ax.set_yscale("log")
    ax.set_title(f"degree {degree}")
    ax.set_xlabel("seconds")
axes[0].set_ylabel("(objective - best) / best")
axes[0].legend()
fig.tight_layout()
plt.show()
