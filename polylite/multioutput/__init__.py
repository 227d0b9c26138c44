"""Multi-output polynomial networks and factorization machines with a shared basis,
grown by conditional gradient (Blondel, Niculae, Otsuka, Ueda, NIPS 2017).

Matrix-free passes over the CSR rows in Cython (``_passes``: features and Gamma products
for many columns in one pass, threaded by ``n_jobs``); the algorithm in NumPy on top:
basis selection (``_selection``), exact projections (``_projections``), the refits
(``_refit``), the conditional gradient loop (``_conditional_gradient``), the estimators
(``_base``, ``estimators``).
"""
from .estimators import MultiOutputPolynomialClassifier, MultiOutputPolynomialRegressor

__all__ = ["MultiOutputPolynomialClassifier", "MultiOutputPolynomialRegressor"]
