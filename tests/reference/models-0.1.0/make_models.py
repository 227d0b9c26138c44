"""The model files of this folder and their predictions, as polylite 0.1.0 wrote them.

Run with polylite 0.1.0 installed (``pip install polylite==0.1.0``, or a build of the
0.1.0 release)::

    python make_models.py tests/reference/models-0.1.0

``tests/test_model_files.py`` loads each file with the polylite under test and compares
its predictions with those recorded here.
"""
import os
import sys

import numpy as np
import scipy.sparse as sp

import polylite
from polylite import (FactorizationMachineRegressor, FactorizationMachineClassifier,
                      PolynomialNetworkRegressor, PolynomialNetworkClassifier,
                      BayesianFactorizationMachineRegressor,
                      BayesianFactorizationMachineClassifier,
                      BayesianFactorizationMachineOrdinalRegressor,
                      MultiOutputPolynomialRegressor, MultiOutputPolynomialClassifier,
                      OrdinalMcRankRegressor, FactorizationMachineRanker)
out = sys.argv[1]
rng = np.random.default_rng(0)
X = sp.random(60, 12, density=0.3, format="csr", random_state=0)
y = rng.standard_normal(60)
yc = (y > 0).astype(int)
y3 = np.digitize(y, [-0.5, 0.5])
Y = np.c_[y, -y + 0.1 * rng.standard_normal(60)]
models = {
    "fm_regressor_cd": FactorizationMachineRegressor(n_components=3, max_iter=5, random_state=0).fit(X, y),
    "fm_regressor_sgd_degree3": FactorizationMachineRegressor(degree=3, n_components=3, solver="sgd", max_iter=3, random_state=0).fit(X, y),
    "fm_classifier_cd": FactorizationMachineClassifier(n_components=3, max_iter=5, random_state=0).fit(X, yc),
    "fm_classifier_3class": FactorizationMachineClassifier(n_components=2, max_iter=3, random_state=0).fit(X, y3),
    "pn_regressor": PolynomialNetworkRegressor(n_components=3, max_iter=5, random_state=0).fit(X, y),
    "pn_classifier": PolynomialNetworkClassifier(n_components=3, max_iter=5, random_state=0).fit(X, yc),
    "bayes_regressor": BayesianFactorizationMachineRegressor(n_components=3, n_iter=30, n_burn_in=10, n_kept=5, random_state=0).fit(X, y),
    "bayes_classifier": BayesianFactorizationMachineClassifier(n_components=3, n_iter=30, n_burn_in=10, n_kept=5, random_state=0).fit(X, yc),
    "bayes_ordinal": BayesianFactorizationMachineOrdinalRegressor(n_components=3, n_iter=30, n_burn_in=10, n_kept=5, random_state=0).fit(X, y3),
    "multioutput_regressor": MultiOutputPolynomialRegressor(max_basis=4).fit(X, Y),
    "multioutput_classifier": MultiOutputPolynomialClassifier(max_basis=4).fit(X, y3),
    "mcrank": OrdinalMcRankRegressor(max_basis=4).fit(X, y3),
}
preds = {}
for name, m in models.items():
    polylite.save(m, os.path.join(out, name + ".npz"))
    preds[name] = np.asarray(m.predict(X), dtype=float)
    if hasattr(m, "predict_proba"):
        preds[name + ":proba"] = np.asarray(m.predict_proba(X), dtype=float)
# the ranker: users x items with side features
n_users, n_items = 8, 10
U = sp.identity(n_users, format="csr")
I = sp.identity(n_items, format="csr")
users = rng.integers(0, n_users, 50)
items = rng.integers(0, n_items, 50)
Xr = sp.hstack([U[users], I[items]], format="csr")
r = FactorizationMachineRanker(n_components=3, max_iter=3, random_state=0, item_columns=(n_users, n_users + n_items)).fit(Xr)
polylite.save(r, os.path.join(out, "ranker.npz"))
preds["ranker"] = np.asarray(r.predict(Xr), dtype=float)
np.savez(os.path.join(out, "predictions.npz"), X_data=X.data, X_indices=X.indices, X_indptr=X.indptr, X_shape=X.shape,
         Xr_data=Xr.data, Xr_indices=Xr.indices, Xr_indptr=Xr.indptr, Xr_shape=Xr.shape, **preds)
print(polylite.__version__, sorted(preds))
