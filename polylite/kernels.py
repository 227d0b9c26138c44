"""Validated access to the polynomial kernels and to batch prediction.

The heavy lifting is in the Cython module ``polylite._engine._kernels``; this module turns user
input into the exact arrays it expects and rejects what it cannot handle, naming the
problem.  Estimators call :func:`check_X` and :func:`predict` from here.
"""
import numbers

import numpy as np

from ._engine import _kernels
from ._engine.codes import KERNELS
from ._engine.layouts import layout_of
from ._validation import check_n_jobs

__all__ = ["KERNELS", "check_X", "check_degree", "check_fields", "predict", "anova",
           "anova_gradient", "all_subsets", "all_subsets_gradient", "polynomial",
           "polynomial_gradient", "field_aware", "field_aware_gradient", "field_weighted",
           "field_weighted_gradient", "pack_field_weights", "unpack_field_weights",
           "power_sums",
           "anova_from_power_sums", "anova_coordinate_derivative"]



def check_degree(degree, minimum=1, name="degree"):
    """Return ``degree`` as an int, or raise ValueError if it is not an integer >= minimum.

    Parameters
    ----------
    degree : int
        The degree to check.
    minimum : int, default=1
        The smallest degree allowed.
    name : str, default="degree"
        The name used in the error message.

    Returns
    -------
    degree : int
    """
    if isinstance(degree, (bool, np.bool_)) or not isinstance(degree, numbers.Integral):
        raise ValueError(f"{name} must be an integer >= {minimum}, got {degree!r}")
    if degree < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {degree}")
    return int(degree)


def check_X(X, *, dtype=(np.float64, np.float32), n_features=None, accept_dense=True):
    """Validate a data matrix and return it in CSR form (or as a dense float array).

    Parameters
    ----------
    X : {array-like, sparse matrix, RelationalMatrix} of shape (n_samples, n_features)
        Data.  Any scipy sparse format is accepted and converted to CSR.
    dtype : dtype or tuple of dtypes, default=(float64, float32)
        Allowed floating types; the first is used when X has another type.
    n_features : int or None, default=None
        Expected number of columns, checked when given.
    accept_dense : bool, default=True
        When False, dense input is converted to CSR here.

    Returns
    -------
    X : csr_matrix or csr_array or ndarray or RelationalMatrix
        Canonical CSR (no duplicate entries, indices checked to lie in
        ``[0, n_features)``) or a C-contiguous dense array, finite, of an allowed dtype.
        A :class:`polylite.relational.RelationalMatrix` (checked when it was made) is
        returned as it is, its values converted to an allowed dtype.

    Raises
    ------
    ValueError
        If X contains NaN or inf, is not 2-D, has a wrong number of columns, or has
        negative or out-of-range column indices.
    """
    dtypes = list(dtype) if isinstance(dtype, (tuple, list)) else [dtype]
    return layout_of(X).check(X, dtypes, n_features, accept_dense)


def _as_param(a, dtype, shape, name):
    a = np.ascontiguousarray(a, dtype=dtype)
    if a.shape != shape:
        raise ValueError(f"{name} has shape {a.shape}, expected {shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} contains NaN or infinity")
    return a


def check_finite_predictions(values, estimator, what="predictions", dtype=None):
    """Return ``values`` (an estimator's ``what`` on the rows of X, computed) if every one
    is finite, else raise FloatingPointError, as the solvers do when a fit diverges.
    ``dtype``: the precision the model computes in (default: that of ``values``).

    One test over the result of a prediction call: far cheaper than the prediction.  The
    outputs overflow when X holds values far beyond those the model was fitted on (a
    degree-m interaction grows as their m-th power) or when the model's parameters are
    huge (a model file written by other software, for instance).
    """
    values = np.asarray(values)
    finite = np.isfinite(values)
    if finite.all():
        return values
    rows = ~finite if finite.ndim == 1 else ~finite.all(axis=tuple(range(1, finite.ndim)))
    n_rows = values.shape[0] if values.ndim else 1
    dtype = values.dtype if dtype is None else np.dtype(dtype)
    precision = (f" (the largest {dtype.name} is {np.finfo(dtype).max:.3g})"
                 if dtype.kind == "f" else "")
    raise FloatingPointError(
        f"{type(estimator).__name__}: the {what} on {int(np.count_nonzero(rows))} of the "
        f"{n_rows} rows of X are not finite (NaN or infinity): the model's outputs "
        f"overflow{precision}; the values of X are probably far larger than those the "
        f"model was fitted on (scale X as the training data was), or the model's "
        f"parameters are too large")


#: A regressor whose fitted outputs on its own training rows miss the targets by more than
#: this many times the error of predicting 0 is refused (:func:`check_fitted_scale`).
FITTED_SCALE_LIMIT = 1e3


def check_fitted_scale(estimator, X, y, y_pred, sample_weight=None):
    """Refuse (FloatingPointError) a regressor's fit whose outputs on its own training
    rows are absurd for its targets.

    The rule: the root-mean-square training error, ``sqrt(sum_i s_i (f(x_i) - y_i)^2)``
    (rows weighted by ``sample_weight``, normalised to sum to 1), must not exceed
    :data:`FITTED_SCALE_LIMIT` times ``sqrt(sum_i s_i y_i^2)``, the error of the model
    that predicts 0 everywhere.  A fit a thousand times worse than predicting 0 on the
    rows it was fitted on is garbage, every output finite: features so large (1e38 in
    float64, say) that the products a model of their degree forms dwarf the targets in
    the dtype's precision, or a stochastic solver whose steps diverged without
    overflowing.  Targets that are all 0 are not checked.

    Parameters
    ----------
    estimator : estimator
        The regressor (named in the message).
    X : {sparse matrix, ndarray, RelationalMatrix}
        Its training rows (the largest value is named in the message).
    y, y_pred : ndarray of shape (n_samples,)
        The targets and the fitted model's outputs on X.
    sample_weight : array-like of shape (n_samples,), default=None
        Non-negative row weights (None: equal).

    Raises
    ------
    FloatingPointError
        When the rule does not hold, naming the largest ``|x|`` and what to change.
    """
    y = np.asarray(y, dtype=np.float64)
    weights = (np.ones(y.shape[0]) if sample_weight is None
               else np.asarray(sample_weight, dtype=np.float64))
    weights = weights / max(weights.sum(), np.finfo(np.float64).tiny)
    # (einsum, not np.dot: a BLAS call would leave BLAS threads spinning beside the
    # solvers of the next fit)
    residual = np.asarray(y_pred, np.float64) - y
    with np.errstate(over="ignore", invalid="ignore"):
        error = np.sqrt(np.einsum("i,i,i->", weights, residual, residual))
        zero_error = np.sqrt(np.einsum("i,i,i->", weights, y, y))
    if not zero_error > 0 or error <= FITTED_SCALE_LIMIT * zero_error:
        return
    remedies = "scale the features of X (for example to unit variance)"
    if getattr(estimator, "solver_", None) in ("sgd", "adagrad"):
        remedies += ", or use a smaller learning rate eta0"
    raise FloatingPointError(
        f"{type(estimator).__name__}: the fitted model misses its own training targets "
        f"by a root-mean-square of {error:.3g}, more than {FITTED_SCALE_LIMIT:g} times "
        f"that of predicting 0 ({zero_error:.3g}), so its outputs are meaningless: the "
        f"values of X (largest |x| = {largest_abs(X):.3g}) are too large for a model of "
        f"this degree in {X.dtype.name}, or the fit diverged; {remedies}")


def largest_abs(X):
    """The largest absolute value of X (a sparse matrix, an array or a
    RelationalMatrix), 0.0 when it has none."""
    return layout_of(X).largest_abs(X)


def check_fields(fields, n_features, n_fields=None):
    """Return the field of each column as an intc array, or raise ValueError.

    Parameters
    ----------
    fields : array-like of int, shape (n_features,)
        ``fields[j]`` is the field (0, 1, ...) of column j.
    n_features : int
        The number of columns.
    n_fields : int or None, default=None
        The number of fields; None: ``max(fields) + 1``.

    Returns
    -------
    fields : ndarray of shape (n_features,), dtype intc
    n_fields : int
    """
    raw = np.asarray(fields)
    if raw.ndim != 1 or raw.shape[0] != n_features:
        raise ValueError(f"fields must give the field of each of the {n_features} "
                         f"columns, got an array of shape {raw.shape}")
    if raw.size and (raw.dtype.kind not in "iu" and not (
            raw.dtype.kind == "f" and np.all(np.isfinite(raw))
            and np.all(raw == np.round(raw)))):
        raise ValueError(f"fields must hold integers, got dtype {raw.dtype}")
    if raw.size and raw.min() < 0:
        raise ValueError(f"fields must be >= 0, got {raw.min()}")
    top = int(raw.max()) + 1 if raw.size else 0
    if n_fields is None:
        n_fields = max(top, 1)
    elif top > n_fields:
        raise ValueError(f"fields has field {top - 1} but the model has {n_fields} fields")
    if n_fields > np.iinfo(np.intc).max:
        raise ValueError(f"{n_fields} fields is too many")
    return np.ascontiguousarray(raw, dtype=np.intc), int(n_fields)


# The factors of the field models' kernels: their dimensions, and their shape in words.
_FIELD_FACTORS = {"field-aware": (3, "(n_features, n_fields, n_components)"),
                  "field-weighted": (2, "(n_features, n_components)")}


def _field_params(P, lam, fields, kernel, dtype=None):
    """(P as (n_features, width) of one dtype, the packed ``lam``, fields, n_fields) of a
    field model, checked: "field-aware", P of shape (n_features, n_fields,
    n_components) as rows of n_fields * n_components entries (``lam`` unused: None);
    "field-weighted", P of shape (n_features, n_components) and ``lam`` the symmetric
    (n_fields, n_fields) matrix of the weights of the pairs of fields or None (ones)."""
    if fields is None:
        raise ValueError(f"the {kernel} kernel needs fields, the field of each column")
    P = np.asarray(P)
    ndim, shape = _FIELD_FACTORS[kernel]
    if P.ndim != ndim:
        raise ValueError(f"{kernel} factors P must have shape {shape}, got shape "
                         f"{P.shape}")
    if dtype is None:
        dtype = P.dtype if P.dtype in (np.float32, np.float64) else np.float64
    P = _as_param(P, dtype, P.shape, "P")
    if kernel == "field-aware":
        d, n_fields, k = P.shape
        fields, n_fields = check_fields(fields, d, n_fields)
        return P.reshape(d, n_fields * k), None, fields, n_fields
    if lam is None:
        fields, n_fields = check_fields(fields, P.shape[0])
        lam = np.ones((n_fields, n_fields), dtype)
    lam = np.asarray(lam)
    if lam.ndim != 2 or lam.shape[0] != lam.shape[1]:
        raise ValueError(f"the field-weighted kernel's lam must be a square (n_fields, "
                         f"n_fields) matrix, got shape {lam.shape}")
    lam = _as_param(lam, dtype, lam.shape, "lam")
    if not np.array_equal(lam, lam.T):
        raise ValueError("the field-weighted kernel's lam must be symmetric")
    fields, n_fields = check_fields(fields, P.shape[0], lam.shape[0])
    return P, pack_field_weights(lam), fields, n_fields


def predict(X, P, *, degrees=None, kernel="anova", intercept=0.0, w=None, gamma=None,
            lam=None, check_input=True, n_jobs=None, fields=None):
    """Predictions of a polynomial model of any degree on every row of X.

    ``intercept + <w, x> + sum_b sum_s K_b(P[b, :, s], x)``, where K is

    * ``"anova"``: ``A_{degrees[b]}``, the ANOVA kernel of the degree of block b (separate
      factor matrices per degree); ``gamma`` rows are dummy features of value 1 added to
      block 0 (the shared-parameter, augmented model);
    * ``"all-subsets"``: ``prod_j (1 + p_j x_j)`` (one block);
    * ``"polynomial"``: ``lam[s] * (gamma[0, s] + <p_s, x>)^degrees[0]`` (one block);
    * ``"field-aware"``: ``sum_{j < j'} <P[j, fields[j']], P[j', fields[j]]> x_j x_j'``,
      with P of shape (n_features, n_fields, n_components): each feature has one latent
      vector per field (``degrees``, ``gamma`` and ``lam`` do not apply).
    * ``"field-weighted"``: ``sum_{j < j'} lam[fields[j], fields[j']] <P[j], P[j']> x_j
      x_j'``, with P of shape (n_features, n_components) and ``lam`` the symmetric
      (n_fields, n_fields) matrix of the weights of the pairs of fields (``degrees`` and
      ``gamma`` do not apply).

    X is never densified; dense X is converted to CSR a chunk of rows at a time.  A
    :class:`polylite.relational.RelationalMatrix` (anova and all-subsets kernels) is
    predicted without expanding its rows: each table row's share is computed once.

    Parameters
    ----------
    X : {array-like, sparse matrix, RelationalMatrix} of shape (n_samples, n_features)
    P : ndarray of shape (n_blocks, n_features, n_components) or (n_features, n_components)
        Factor matrices; a 2-D array is one block.
    degrees : int or sequence of int, default=None
        Degree of each block (required for "anova" and "polynomial").
    kernel : {"anova", "all-subsets", "polynomial"}, default="anova"
    intercept : float, default=0.0
    w : ndarray of shape (n_features,) or None
        Linear weights; None means no linear term.
    gamma : ndarray of shape (n_dummy, n_components) or None
        Dummy-feature parameters (see above).
    lam : ndarray of shape (n_components,) or (n_fields, n_fields), or None
        Output weights of the polynomial kernel (default: ones); the "field-weighted"
        kernel's weights of the pairs of fields (symmetric; default: ones).
    check_input : bool, default=True
        Validate X (skip only when it comes from :func:`check_X` already).
    n_jobs : int or None, default=None
        Threads that share the rows (None: 1; -1: every CPU the process may use; at most
        one per 20,000 rows).  Each row is computed as on one thread: the predictions do
        not depend on ``n_jobs``.
    fields : array-like of int of shape (n_features,) or None
        The field of each column (the "field-aware" and "field-weighted" kernels only,
        where it is required).

    Returns
    -------
    y : ndarray of shape (n_samples,)
        In the dtype of P (float32 or float64).
    """
    if kernel not in KERNELS:
        raise ValueError(f"unknown kernel {kernel!r}; expected one of {sorted(KERNELS)}")
    if kernel in _FIELD_FACTORS:
        P, r, fields, n_fields = _field_params(P, lam, fields, kernel)
        return _predict_field_rows(X, P, r, kernel, (fields, n_fields), intercept, w,
                                   check_input, n_jobs)
    P = np.asarray(P)
    if P.ndim == 2:
        P = P[np.newaxis]
    if P.ndim != 3:
        raise ValueError(f"P must be 2-D or 3-D, got {P.ndim} dimensions")
    dtype = P.dtype if P.dtype in (np.float32, np.float64) else np.float64
    n_blocks, d, k = P.shape
    P = _as_param(P, dtype, P.shape, "P")
    if kernel == "all-subsets":
        degrees = [0] * n_blocks
        if n_blocks != 1:
            raise ValueError("the all-subsets kernel takes one factor matrix")
    else:
        if degrees is None:
            raise ValueError(f"degrees is required for the {kernel} kernel")
        degrees = np.atleast_1d(degrees).tolist()
        degrees = [check_degree(m) for m in degrees]
        if len(degrees) != n_blocks:
            raise ValueError(f"{len(degrees)} degrees given for {n_blocks} factor blocks")
    if kernel == "polynomial" and n_blocks != 1:
        raise ValueError("the polynomial kernel takes one factor matrix")
    degrees = np.asarray(degrees, dtype=np.intc)
    gamma = (np.zeros((0, k), dtype) if gamma is None
             else _as_param(gamma, dtype, np.shape(gamma), "gamma"))
    if gamma.ndim != 2 or gamma.shape[1] != k:
        raise ValueError(f"gamma has shape {gamma.shape}, expected (n_dummy, {k})")
    if kernel == "polynomial" and gamma.shape[0] > 1:
        raise ValueError("the polynomial kernel takes at most one gamma row")
    if kernel == "all-subsets" and gamma.shape[0] > 0:
        raise ValueError("the all-subsets kernel takes no gamma")
    lam = np.ones(k, dtype) if lam is None else _as_param(lam, dtype, (k,), "lam")
    X, w, intercept = _check_linear_part(X, dtype, d, w, intercept, check_input, n_jobs)
    return layout_of(X).predict(X, P, degrees, kernel, intercept, w, gamma, lam, n_jobs)


def _check_linear_part(X, dtype, d, w, intercept, check_input, n_jobs):
    """The checks :func:`predict` makes for every kernel: X (d columns), the linear
    weights w (None: none), the intercept and n_jobs; returns X, w and the intercept."""
    w = np.zeros(0, dtype) if w is None else _as_param(w, dtype, (d,), "w")
    intercept = float(intercept)
    if not np.isfinite(intercept):
        raise ValueError("intercept is NaN or infinite")
    if check_input:
        X = check_X(X, dtype=dtype, n_features=d)
    elif X.shape[1] != d:
        raise ValueError(f"X has {X.shape[1]} features, but P has {d} rows")
    check_n_jobs(n_jobs)
    return X, w, intercept


def _predict_field_rows(X, P, lam, kernel, fields, intercept, w, check_input, n_jobs):
    """:func:`predict` for a field model's ``kernel`` with checked parameters (an
    estimator's own, or :func:`_field_params`'): P of shape (n_features, width),
    C-contiguous, ``lam`` the packed weights of the pairs of fields ("field-weighted";
    None: ones, unused by "field-aware"), ``fields`` = (field of each column,
    n_fields)."""
    dtype, d, width = P.dtype, P.shape[0], P.shape[1]
    X, w, intercept = _check_linear_part(X, dtype, d, w, intercept, check_input, n_jobs)
    lam = np.ones(width, dtype) if lam is None else np.ascontiguousarray(lam, dtype)
    return layout_of(X).predict(X, P[np.newaxis], np.array([2], np.intc), kernel,
                                intercept, w, np.zeros((0, width), dtype), lam, n_jobs,
                                fields=fields)


def pack_field_weights(R):
    """The upper triangle of the symmetric matrix ``R`` of the weights of the pairs of
    fields, row by row, as the field-weighted kernel stores them.

    Parameters
    ----------
    R : ndarray of shape (..., n_fields, n_fields)
        Symmetric in its last two axes (only the upper triangle is read).

    Returns
    -------
    r : ndarray of shape (..., n_fields * (n_fields + 1) // 2)
    """
    R = np.asarray(R)
    if R.ndim < 2 or R.shape[-1] != R.shape[-2]:
        raise ValueError(f"field weights must be square matrices, got shape {R.shape}")
    rows, cols = np.triu_indices(R.shape[-1])
    return np.ascontiguousarray(R[..., rows, cols])


def unpack_field_weights(r, n_fields):
    """The symmetric matrix of the weights of the pairs of fields from their packed
    upper triangle (:func:`pack_field_weights`).

    Parameters
    ----------
    r : ndarray of shape (..., n_fields * (n_fields + 1) // 2)
    n_fields : int

    Returns
    -------
    R : ndarray of shape (..., n_fields, n_fields)
    """
    r = np.asarray(r)
    n_pairs = n_fields * (n_fields + 1) // 2
    if r.shape[-1:] != (n_pairs,):
        raise ValueError(f"packed field weights of {n_fields} fields have {n_pairs} "
                         f"entries, got shape {r.shape}")
    rows, cols = np.triu_indices(n_fields)
    R = np.zeros(r.shape[:-1] + (n_fields, n_fields), r.dtype)
    R[..., rows, cols] = r
    R[..., cols, rows] = r
    return R


# --------------------------------------------------------------------------------------
# One-row kernels.  A row is given as (indices, values) of its nonzeros, as in a CSR row.
# --------------------------------------------------------------------------------------

def _row(P, indices, values, gamma=None):
    P = np.asarray(P)
    dtype = P.dtype if P.dtype in (np.float32, np.float64) else np.float64
    if P.ndim == 1:
        P = P[:, np.newaxis]
    P = _as_param(P, dtype, P.shape, "P")
    if P.ndim != 2:
        raise ValueError(f"P must be 1-D or 2-D, got {P.ndim} dimensions")
    indices = np.ascontiguousarray(indices)
    if indices.dtype not in (np.int32, np.int64):
        indices = indices.astype(np.int64)
    values = np.ascontiguousarray(values, dtype=dtype)
    if indices.shape != values.shape or indices.ndim != 1:
        raise ValueError("indices and values must be 1-D arrays of the same length")
    if not np.all(np.isfinite(values)):
        raise ValueError("the row contains NaN or infinity")
    if indices.size and (indices.min() < 0 or indices.max() >= P.shape[0]):
        raise ValueError(f"row indices must lie in [0, {P.shape[0]})")
    if indices.size != np.unique(indices).size:
        raise ValueError("the row has duplicate indices")
    k = P.shape[1]
    gamma = (np.zeros((0, k), dtype) if gamma is None
             else _as_param(np.atleast_2d(gamma), dtype, np.atleast_2d(gamma).shape, "gamma"))
    if gamma.shape[1] != k:
        raise ValueError(f"gamma must have {k} columns")
    return P, indices, values, gamma


def anova(P, indices, values, degree, gamma=None):
    """ANOVA kernels A_t(p_s, x) of one row for t = 0..degree, by dynamic programming.

    Parameters
    ----------
    P : ndarray of shape (n_features, n_components) or (n_features,)
        Factors: one column per component.
    indices, values : ndarray of shape (nnz,)
        The row's nonzeros.
    degree : int >= 1
        The highest degree.
    gamma : ndarray of shape (n_dummy, n_components), optional
        Parameters of dummy features of value 1 prepended to the row.

    Returns
    -------
    A : ndarray of shape (degree + 1, n_components)
        ``A[t, s]`` is ``A_t(p_s, x)``.
    """
    degree = check_degree(degree)
    P, indices, values, gamma = _row(P, indices, values, gamma)
    return _kernels._row_anova(P, indices, values, degree, gamma)


def anova_gradient(P, indices, values, degree, gamma=None):
    """A_degree(p_s, x) and its gradient on the row's support, by reverse mode.

    Parameters
    ----------
    P, indices, values, degree, gamma
        As in :func:`anova`.

    Returns
    -------
    value : ndarray of shape (n_components,)
    grad : ndarray of shape (nnz, n_components)
        ``grad[z, s] = dA/dP[indices[z], s]``.
    grad_gamma : ndarray of shape (n_dummy, n_components)
    """
    degree = check_degree(degree)
    P, indices, values, gamma = _row(P, indices, values, gamma)
    A, grad, grad_gamma = _kernels._row_anova_gradient(P, indices, values, degree, gamma)
    return A[degree], grad, grad_gamma


def field_aware(P, fields, indices, values):
    """The field-aware interactions of one row,
    ``sum_{a < b} <P[j_a, fields[j_b]], P[j_b, fields[j_a]]> x_a x_b`` over its nonzeros
    (j_a = indices[a], x_a = values[a]).

    Parameters
    ----------
    P : ndarray of shape (n_features, n_fields, n_components)
        One latent vector per feature and field.
    fields : array-like of int of shape (n_features,)
        The field of each feature.
    indices, values : ndarray of shape (nnz,)
        The row's nonzeros (distinct indices).

    Returns
    -------
    value : float
    """
    return field_aware_gradient(P, fields, indices, values)[0]


def field_aware_gradient(P, fields, indices, values):
    """:func:`field_aware` and its gradient on the row's support.

    Parameters
    ----------
    P, fields, indices, values
        As in :func:`field_aware`.

    Returns
    -------
    value : float
    grad : ndarray of shape (nnz, n_fields, n_components)
        ``grad[a, f, s] = d value / d P[indices[a], f, s]`` (zero where no other nonzero
        of the row is in field f).
    """
    d, n_fields, k = np.shape(P)
    P2, _, fields, n_fields = _field_params(P, None, fields, "field-aware")
    Pr, indices, values, _ = _row(P2, indices, values)
    grad = np.zeros((indices.shape[0], n_fields * k), Pr.dtype)
    value = _kernels.field_aware_row(Pr, fields, n_fields, indices, values, grad)
    return float(value), grad.reshape(indices.shape[0], n_fields, k)


def field_weighted(P, R, fields, indices, values):
    """The field-weighted interactions of one row (Pan et al., WWW 2018),
    ``sum_{a < b} R[fields[j_a], fields[j_b]] <P[j_a], P[j_b]> x_a x_b`` over its nonzeros
    (j_a = indices[a], x_a = values[a]).

    Parameters
    ----------
    P : ndarray of shape (n_features, n_components)
        One latent vector per feature.
    R : ndarray of shape (n_fields, n_fields)
        The weight of each pair of fields (symmetric).
    fields : array-like of int of shape (n_features,)
        The field of each feature.
    indices, values : ndarray of shape (nnz,)
        The row's nonzeros (distinct indices).

    Returns
    -------
    value : float
    """
    return field_weighted_gradient(P, R, fields, indices, values)[0]


def field_weighted_gradient(P, R, fields, indices, values):
    """:func:`field_weighted` and its gradients on the row's support.

    Parameters
    ----------
    P, R, fields, indices, values
        As in :func:`field_weighted`.

    Returns
    -------
    value : float
    grad : ndarray of shape (nnz, n_components)
        ``grad[a, s] = d value / d P[indices[a], s]``.
    grad_R : ndarray of shape (n_fields, n_fields)
        The gradient in the weights of the pairs of fields, as a function of the upper
        triangle (one weight per unordered pair, shown at both places of a symmetric
        matrix; zero for the pairs the row does not have).
    """
    P, r, fields, n_fields = _field_params(P, R, fields, "field-weighted")
    P, indices, values, _ = _row(P, indices, values)
    grad = np.zeros((indices.shape[0], P.shape[1]), P.dtype)
    grad_r = np.zeros_like(r)
    # The kernel writes the entries of the row's pairs only (zeroed first).
    value = _kernels.field_weighted_row(P, r, fields, n_fields, indices, values, grad,
                                        grad_r)
    if indices.shape[0] < 2:
        grad_r[:] = 0
    return float(value), grad, unpack_field_weights(grad_r, n_fields)


def all_subsets(P, indices, values):
    """All-subsets kernel prod_j (1 + p_js x_j) of one row.

    Parameters
    ----------
    P : ndarray of shape (n_features, n_components) or (n_features,)
        Factors: one column per component.
    indices, values : ndarray of shape (nnz,)
        The row's nonzeros.

    Returns
    -------
    S : ndarray of shape (n_components,)
    """
    P, indices, values, _ = _row(P, indices, values)
    return _kernels._row_all_subsets(P, indices, values)[0]


def all_subsets_gradient(P, indices, values):
    """All-subsets kernel and its gradient, exact when a factor ``1 + p_js x_j`` is 0.

    Parameters
    ----------
    P, indices, values
        As in :func:`all_subsets`.

    Returns
    -------
    S : ndarray of shape (n_components,)
    grad : ndarray of shape (nnz, n_components)
        ``grad[z, s] = dS/dP[indices[z], s]``.
    """
    P, indices, values, _ = _row(P, indices, values)
    return _kernels._row_all_subsets(P, indices, values)


def _linear_forms(P, indices, values, gamma):
    P, indices, values, gamma = _row(P, indices, values, gamma)
    if gamma.shape[0] > 1:
        raise ValueError("the polynomial kernel takes at most one gamma row")
    g = gamma[0] if gamma.shape[0] else np.zeros(0, P.dtype)
    return _kernels._row_linear_forms(P, indices, values, g), values


def polynomial(P, indices, values, degree, gamma=None):
    """Polynomial kernel (gamma_s + <p_s, x>)^degree of one row.

    Parameters
    ----------
    P : ndarray of shape (n_features, n_components) or (n_features,)
        Factors: one column per component (hidden unit).
    indices, values : ndarray of shape (nnz,)
        The row's nonzeros.
    degree : int >= 1
    gamma : ndarray of shape (1, n_components), optional
        Offsets ``gamma_s`` (zero when omitted).

    Returns
    -------
    K : ndarray of shape (n_components,)
    """
    degree = check_degree(degree)
    forms, _ = _linear_forms(P, indices, values, gamma)
    return forms ** degree


def polynomial_gradient(P, indices, values, degree, gamma=None):
    """Polynomial kernel and its gradients.

    Parameters
    ----------
    P, indices, values, degree, gamma
        As in :func:`polynomial`.

    Returns
    -------
    K : ndarray of shape (n_components,)
    grad : ndarray of shape (nnz, n_components)
        ``grad[z, s] = dK_s/dP[indices[z], s]``.
    grad_gamma : ndarray of shape (n_components,)
        ``dK_s/dgamma_s``.
    """
    degree = check_degree(degree)
    forms, values = _linear_forms(P, indices, values, gamma)
    outer = degree * forms ** (degree - 1)
    return forms ** degree, values[:, np.newaxis] * outer, outer


def power_sums(P, indices, values, degree, gamma=None):
    """Power sums D_t(p_s, x) = sum_j (p_js x_j)^t of one row, t = 1..degree.

    Parameters
    ----------
    P, indices, values, degree, gamma
        As in :func:`anova`.

    Returns
    -------
    D : ndarray of shape (degree, n_components)
        ``D[t - 1, s]`` is ``D_t(p_s, x)``.
    """
    degree = check_degree(degree)
    P, indices, values, gamma = _row(P, indices, values, gamma)
    return _kernels._row_power_sums(P, indices, values, degree, gamma)


def anova_from_power_sums(D):
    """ANOVA kernels A_0..A_m from power sums D_1..D_m by Newton's identity.

    Parameters
    ----------
    D : ndarray of shape (m,)
        Power sums ``D_1..D_m`` of one component.

    Returns
    -------
    A : ndarray of shape (m + 1,)
    """
    D = np.ascontiguousarray(D, dtype=np.float64)
    if D.ndim != 1:
        raise ValueError("D must be 1-D (the power sums of one component)")
    return _kernels._anova_from_power_sums(D)


def anova_coordinate_derivative(D, degree, p_j, x_j):
    """dA_degree(p, x)/dp_j from cached power sums (coordinate descent).

    Parameters
    ----------
    D : ndarray of shape (degree - 1,) or longer
        Power sums ``D_1..D_{degree-1}`` of one component and row.
    degree : int >= 1
    p_j : float
        The coordinate's factor.
    x_j : float
        The row's value of feature j.

    Returns
    -------
    derivative : float
    """
    degree = check_degree(degree)
    D = np.ascontiguousarray(D, dtype=np.float64)
    return _kernels._coordinate_derivative(D, degree, float(p_j), float(x_j))
