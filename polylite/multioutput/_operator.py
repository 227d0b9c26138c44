"""The rows of a data set as the multi-output models see them, with the passes over them.

:class:`RowOperator` wraps a canonical CSR matrix X and answers, without forming any
d x d matrix or a dense copy of X:

* ``features(H)``: Z[i, r] = sigma(h_r, x~_i) for basis vectors H (n_basis, dim);
* ``gamma(Q, W, columns=, diagonal=)``: Gamma_c Q[:, s] for every column s at once
  (c = columns[s], by default s), where Gamma_c = X~^T diag(W[:, c]) X~ ("pn") or
  (X~^T diag(W[:, c]) X~ - diag((X~ o X~)^T W[:, c])) / 2 ("fm"), so that
  q^T Gamma_c q = sum_i W[i, c] sigma(q, x~_i).

x~ is x followed by a constant 1 when ``constant`` (dim = n_features + 1).
"""
import numpy as np

from .._validation import row_threads
from . import _passes

# Prediction computes the features of this many rows at a time.
CHUNK_ROWS = 16_384


class RowOperator:
    """Passes over the rows of canonical CSR ``X`` (see the module docstring)."""

    def __init__(self, X, *, constant, kernel, n_jobs=None):
        self.X = X
        self.constant = bool(constant)
        self.anova = kernel == "fm"
        self.n_features = X.shape[1]
        self.dim = self.n_features + self.constant
        self.dtype = X.dtype
        self.bounds = _passes.row_bounds(X.indptr, row_threads(n_jobs, X.shape[0]))

    @property
    def n_threads(self):
        return self.bounds.shape[0] - 1

    def _columns(self, Q):
        return np.ascontiguousarray(Q, dtype=self.dtype)

    def features(self, H):
        """sigma(h_r, x~_i) for the rows h_r of H, shape (n_samples, n_basis), X's dtype."""
        H = np.atleast_2d(H)
        Z = np.empty((self.X.shape[0], H.shape[0]), dtype=self.dtype)
        _passes.features(self.X.data, self.X.indices, self.X.indptr, self.n_features,
                         self._columns(H.T), self.constant, self.anova, Z, self.bounds)
        return Z

    def gamma(self, Q, W, *, columns=None, diagonal=None):
        """(Gamma Q[:, s] for every column s, shape (dim, m), float64; the FM diagonal).

        ``W`` (n_samples, k) weights the rows: column s of Q is multiplied by the Gamma
        of column ``columns[s]`` of W (by default s; several columns of Q may share one
        of W, the pass reads it once).  For "fm" the diagonal terms (X~ o X~)^T W, shape
        (dim, k), are computed in the same pass unless given (``diagonal``, as returned
        by an earlier call with the same W); for "pn" the second value is None.
        """
        W = np.ascontiguousarray(W, dtype=self.dtype)
        Q = self._columns(Q)
        columns = (np.arange(Q.shape[1]) if columns is None
                   else np.ascontiguousarray(columns, dtype=np.intp))
        with_diagonal = self.anova and diagonal is None
        G, computed = _passes.gram_product(self.X.data, self.X.indices, self.X.indptr,
                                           self.n_features, Q, self.constant, W, columns,
                                           with_diagonal, self.bounds)
        if not self.anova:
            return G, None
        if diagonal is None:
            diagonal = computed
        return 0.5 * (G - diagonal[:, columns] * Q), diagonal


def chunked_outputs(X, H, V, intercept, *, constant, kernel, n_jobs=None):
    """sigma(H, X~) @ V + intercept for every row of X, computed CHUNK_ROWS at a time
    (each chunk's features on ``n_jobs`` threads)."""
    n = X.shape[0]
    out = np.empty((n, V.shape[1]), dtype=np.float64)
    for start in range(0, n, CHUNK_ROWS):
        chunk = RowOperator(X[start:start + CHUNK_ROWS], constant=constant, kernel=kernel,
                            n_jobs=n_jobs)
        out[start:start + chunk.X.shape[0]] = chunk.features(H) @ V + intercept
    return out
