"""Shared machinery of the polylite estimators: validation, parameters, the epoch loop.

An estimator holds one or more *outputs* (one for regression and binary classification,
one per class for one-vs-rest multi-class).  Each output is a polynomial model

    y_hat(x) = intercept + <w, x> + sum_b sum_s K_b(P[b, :, s], x)

described by the arrays of :class:`_OutputParams`.  Solvers update these arrays in place,
one epoch per call, so that Python can report progress and test convergence.
"""
import numbers
import time
import warnings
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from . import _cd, _losses, kernels

_FLOAT_DTYPES = [np.float64, np.float32]


@dataclass
class _OutputParams:
    """Parameters of one output; arrays are views into the estimator's fitted arrays."""
    intercept: np.ndarray  # shape (1,)
    w: np.ndarray          # (n_features,)
    P: np.ndarray          # (n_blocks, n_features, n_components)
    gamma: np.ndarray      # (n_dummy, n_components)
    lam: np.ndarray        # (n_components,)


def _check_number(value, name, *, low=None, high=None, integer=False, low_open=False):
    kind = numbers.Integral if integer else numbers.Real
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, kind):
        raise ValueError(f"{name} must be {'an integer' if integer else 'a number'}, "
                         f"got {value!r}")
    if not np.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value!r}")
    if low is not None and (value < low or (low_open and value == low)):
        raise ValueError(f"{name} must be {'>' if low_open else '>='} {low}, got {value!r}")
    if high is not None and value > high:
        raise ValueError(f"{name} must be <= {high}, got {value!r}")
    return value


def _check_choice(value, name, choices):
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {list(choices)}, got {value!r}")
    return value


class _PolynomialModel(BaseEstimator):
    """Base of every estimator: subclasses describe the model, this class fits it."""

    # Set by subclasses.
    _is_classifier = False

    # ---- model structure (subclasses override) ---------------------------------------

    def _structure(self):
        """(kernel name, degree of each block, number of dummy rows) of the model."""
        raise NotImplementedError

    def _init_nonlinear(self, params, rng):
        """Random initial factors (in place); default: N(0, init_scale^2)."""
        params.P[...] = rng.normal(0.0, self.init_scale, size=params.P.shape)
        params.gamma[...] = rng.normal(0.0, self.init_scale, size=params.gamma.shape)

    def _check_params(self):
        _check_number(self.n_components, "n_components", low=1, integer=True)
        _check_number(self.alpha, "alpha", low=0)
        _check_number(self.beta, "beta", low=0)
        _check_number(self.init_scale, "init_scale", low=0)
        _check_number(self.max_iter, "max_iter", low=1, integer=True)
        _check_number(self.tol, "tol", low=0)
        _check_number(self.verbose, "verbose", low=0, integer=True)
        if not isinstance(self.fit_intercept, (bool, np.bool_)):
            raise ValueError(f"fit_intercept must be a bool, got {self.fit_intercept!r}")
        if not isinstance(self.fit_linear, (bool, np.bool_)):
            raise ValueError(f"fit_linear must be a bool, got {self.fit_linear!r}")
        if not isinstance(self.warm_start, (bool, np.bool_)):
            raise ValueError(f"warm_start must be a bool, got {self.warm_start!r}")
        _check_choice(self.solver, "solver", self._solvers)
        try:
            check_random_state(self.random_state)
        except ValueError:
            raise ValueError(f"random_state must be None, an integer in [0, 2**32) or a "
                             f"numpy RandomState, got {self.random_state!r}") from None

    _solvers = ("cd",)

    # ---- sklearn plumbing -----------------------------------------------------------

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

    def _validate_X_predict(self):
        check_is_fitted(self)

    def _prepare_X(self, X, *, reset, y=None):
        """validate_data + CSR structure checks; returns (X, y) or X."""
        dtype = _FLOAT_DTYPES if reset else self.P_.dtype
        if y is None and not reset:
            X = validate_data(self, X, accept_sparse="csr", dtype=dtype, reset=False,
                              accept_large_sparse=True)
            return kernels.check_X(X, dtype=dtype)
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=dtype, reset=reset,
                             accept_large_sparse=True, y_numeric=not self._is_classifier)
        return kernels.check_X(X, dtype=dtype, accept_dense=False), y

    # ---- parameters of the outputs --------------------------------------------------
    #
    # While fitting, the parameters live in a *stack*: a dict of arrays with a leading
    # axis over the outputs, of which the solver updates one output's views at a time.
    # The fitted attributes (``P_`` ...) are the only state kept after ``fit``; prediction
    # and saving rebuild a stack of views from them and never modify the estimator.

    def _allocate(self, n_outputs, n_features, dtype):
        """A fresh stack of zero parameters (``lam`` ones) for ``n_outputs`` outputs."""
        _, degrees, n_dummy = self._structure()
        k = self.n_components
        return dict(
            intercept=np.zeros((n_outputs, 1), dtype),
            w=np.zeros((n_outputs, n_features), dtype),
            P=np.zeros((n_outputs, len(degrees), n_features, k), dtype),
            gamma=np.zeros((n_outputs, n_dummy, k), dtype),
            lam=np.ones((n_outputs, k), dtype),
        )

    @staticmethod
    def _output(stack, o):
        return _OutputParams(**{name: a[o] for name, a in stack.items()})

    def _publish(self, stack):
        """Expose the arrays of ``stack`` as the documented fitted attributes."""
        if self._is_classifier:
            self.intercept_ = stack["intercept"][:, 0]
            self.w_, self.P_, self.gamma_ = stack["w"], stack["P"], stack["gamma"]
        else:
            self.intercept_ = float(stack["intercept"][0, 0])
            self.w_, self.P_, self.gamma_ = stack["w"][0], stack["P"][0], stack["gamma"][0]
        if self._has_lam:
            self.lam_ = stack["lam"] if self._is_classifier else stack["lam"][0]

    _has_lam = False

    def _stacked(self, copy=False):
        """The stack of the fitted attributes (views of them unless ``copy``)."""
        lead = (lambda a: a) if self._is_classifier else (lambda a: a[np.newaxis])
        dtype = self.P_.dtype
        intercept = np.array(self.intercept_, dtype=dtype).reshape(-1, 1)
        k = self.P_.shape[-1]
        lam = lead(self.lam_) if self._has_lam else np.ones((intercept.shape[0], k), dtype)
        return {name: np.array(a, dtype=dtype, copy=copy or None) for name, a in
                dict(intercept=intercept, w=lead(self.w_), P=lead(self.P_),
                     gamma=lead(self.gamma_), lam=lam).items()}

    def _warm_stack(self, n_outputs, n_features, dtype):
        """A copy of the previous fit's stack to continue from, or None to start afresh."""
        if not (self.warm_start and hasattr(self, "P_")):
            return None
        stack = self._stacked(copy=True)
        _, degrees, n_dummy = self._structure()
        expected = (n_outputs, len(degrees), n_features, self.n_components)
        if stack["P"].shape != expected or stack["gamma"].shape[1] != n_dummy:
            raise ValueError(
                f"warm_start=True but the fitted factors have shape {stack['P'].shape[1:]}, "
                f"which does not match the current parameters and data "
                f"{expected[1:]}; set warm_start=False to refit from scratch")
        return {name: a.astype(dtype, copy=False) for name, a in stack.items()}

    # ---- prediction -------------------------------------------------------------------

    def _decision(self, X):
        """Raw outputs, shape (n_samples, n_outputs)."""
        kernel, degrees, _ = self._structure()
        stack = self._stacked()
        n_outputs = stack["P"].shape[0]
        out = np.empty((X.shape[0], n_outputs), dtype=stack["P"].dtype)
        for o in range(n_outputs):
            out[:, o] = self._predict_output(X, self._output(stack, o), kernel, degrees)
        return out

    def _predict_output(self, X, params, kernel, degrees):
        return kernels.predict(
            X, params.P, degrees=degrees, kernel=kernel,
            intercept=params.intercept[0], w=params.w if self.fit_linear else None,
            gamma=params.gamma, lam=params.lam if self._has_lam else None,
            check_input=False)

    # ---- fitting ----------------------------------------------------------------------

    def _fit_outputs(self, X, targets, sample_weight, loss):
        """Fit every output (column of ``targets``) by the chosen solver."""
        self._check_params()
        n, d = X.shape
        n_outputs = targets.shape[1]
        sw = _check_sample_weight(sample_weight, X, dtype=np.float64,
                                  ensure_non_negative=True)
        total = sw.sum()
        if not total > 0:
            raise ValueError("sample_weight must have a positive sum")
        sw = sw / total
        dtype = X.dtype
        stack = self._warm_stack(n_outputs, d, dtype)
        if stack is None:
            stack = self._allocate(n_outputs, d, dtype)
            rng = check_random_state(self.random_state)
            for o in range(n_outputs):
                self._init_nonlinear(self._output(stack, o), rng)
        X_csc = None
        if self.solver == "cd":
            X_csc = X.tocsc()
            X_csc.sort_indices()
            # The solver takes both copies with one index type (scipy may have narrowed
            # the CSC indices of a CSR matrix with 64-bit indices).
            X_csc.indices = X_csc.indices.astype(X.indices.dtype, copy=False)
            X_csc.indptr = X_csc.indptr.astype(X.indptr.dtype, copy=False)
        n_iter = []
        for o in range(n_outputs):
            y = np.ascontiguousarray(targets[:, o], dtype=np.float64)
            n_iter.append(self._fit_one_output(X, X_csc, y, sw, self._output(stack, o),
                                               loss, label=o if n_outputs > 1 else None))
        self.n_iter_ = np.array(n_iter) if self._is_classifier else int(n_iter[0])
        self._publish(stack)
        return self

    def _objective(self, y, y_pred, sw, params, loss_code):
        penalty = 0.5 * self.alpha * float(np.dot(params.w, params.w))
        penalty += 0.5 * self.beta * (float(np.sum(np.square(params.P, dtype=np.float64)))
                                      + float(np.sum(np.square(params.gamma,
                                                               dtype=np.float64))))
        return _cd.weighted_loss(y, y_pred, sw, loss_code) + penalty

    def _fit_one_output(self, X, X_csc, y, sw, params, loss, label=None):
        kernel, degrees, _ = self._structure()
        loss_code = _losses.loss_code(loss)
        y_pred = self._predict_output(X, params, kernel, degrees).astype(np.float64)
        objective = self._objective(y, y_pred, sw, params, loss_code)
        degrees_arr = np.asarray(degrees, dtype=np.intc)
        prefix = "" if label is None else f"[output {label}] "
        if self.verbose:
            print(f"{prefix}epoch {0:4d}  objective {objective:.6e}")
        start = time.perf_counter()
        for epoch in range(1, self.max_iter + 1):
            max_change = _cd.cd_epoch(
                X_csc.data, X_csc.indices, X_csc.indptr, X.data, X.indices, X.indptr,
                y, sw, params.intercept, params.w, params.P, degrees_arr, params.gamma,
                kernels.KERNELS[kernel], loss_code, float(self.alpha), float(self.beta),
                bool(self.fit_intercept), bool(self.fit_linear), y_pred)
            new_objective = self._objective(y, y_pred, sw, params, loss_code)
            if not np.isfinite(new_objective):
                raise FloatingPointError(
                    "the objective became non-finite during coordinate descent; "
                    "scale the features or increase beta")
            decrease = (objective - new_objective) / max(abs(objective), 1e-300)
            objective = new_objective
            if self.verbose:
                print(f"{prefix}epoch {epoch:4d}  objective {objective:.6e}  "
                      f"rel. decrease {decrease:.2e}  max change {max_change:.2e}  "
                      f"{time.perf_counter() - start:.2f}s")
            if decrease < self.tol or max_change < self.tol:
                return epoch
        warnings.warn(
            f"{type(self).__name__}: coordinate descent did not converge in "
            f"max_iter={self.max_iter} epochs (relative decrease {decrease:.2e} > "
            f"tol={self.tol}); increase max_iter or tol", ConvergenceWarning)
        return self.max_iter

    # ---- save / load ------------------------------------------------------------------

    def save(self, path):
        """Save the fitted model to ``path`` in polylite's pickle-free format.

        Parameters
        ----------
        path : str or path-like
            Destination file (NumPy ``.npz`` archive with a JSON header).  See
            :func:`polylite.load`.
        """
        from ._io import save_model
        save_model(self, path)
