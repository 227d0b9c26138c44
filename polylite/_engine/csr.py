"""Canonical CSR: the checks every layout's sparse parts go through.

A module of its own, below the layouts and :mod:`polylite.relational` alike: the
relational matrix checks its parts with it, and the layouts (which know the relational
matrix) dispatch to it, so that neither imports the other in a circle.
"""
import numpy as np
import scipy.sparse as sp

__all__ = ["check_rows", "check_csr_structure"]


def check_rows(X, dtypes, n_features=None, accept_dense=True):
    """Sparse or dense rows as canonical CSR (or a C-contiguous dense array), finite, of
    one of ``dtypes`` (the first when X has another), with ``n_features`` columns when
    given; dense input becomes CSR unless ``accept_dense``."""
    from sklearn.utils import check_array
    X = check_array(X, accept_sparse="csr", dtype=list(dtypes), order="C",
                    ensure_all_finite=True, accept_large_sparse=True,
                    ensure_min_samples=0, ensure_min_features=0)
    if n_features is not None and X.shape[1] != n_features:
        raise ValueError(f"X has {X.shape[1]} features, but the model expects "
                         f"{n_features}")
    if sp.issparse(X):
        X = check_csr_structure(X)
    elif not accept_dense:
        X = sp.csr_matrix(X)
    return X


def check_csr_structure(X):
    """CSR ``X`` whose indptr, column indices and index types the kernels can read: a
    copy with one index type, or without duplicate entries, where X needed one."""
    n_rows, n_cols = X.shape
    indptr, indices = X.indptr, X.indices
    if indptr.shape[0] != n_rows + 1 or indptr[0] != 0 or indptr[-1] > indices.shape[0]:
        raise ValueError("X is a corrupt CSR matrix: its indptr does not match its shape")
    if np.any(np.diff(indptr) < 0):
        raise ValueError("X is a corrupt CSR matrix: its indptr is not non-decreasing")
    used = indices[:indptr[-1]]
    if used.size:
        lo, hi = used.min(), used.max()
        if lo < 0:
            raise ValueError(f"X has a negative column index ({lo})")
        if hi >= n_cols:
            raise ValueError(f"X has a column index {hi} out of range for "
                             f"{n_cols} columns")
    if indices.dtype != indptr.dtype or indices.dtype not in (np.int32, np.int64):
        idx = np.int64 if max(indices.dtype.itemsize, indptr.dtype.itemsize) > 4 else np.int32
        X = X.copy()
        X.indices = X.indices.astype(idx)
        X.indptr = X.indptr.astype(idx)
    if not X.has_canonical_format:
        # Duplicate entries would count a feature twice in the ANOVA kernel.
        X = X.copy()
        X.sum_duplicates()
    return X
