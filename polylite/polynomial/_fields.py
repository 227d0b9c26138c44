"""The base of the field models, field-aware (``ffm``) and field-weighted (``fwfm``):
factorization machines of degree 2 on one factor block whose columns belong to fields,
fitted by the engine's stochastic passes (AdaGrad as libffm, SGD or FTRL-proximal) with
libffm's penalty of the parameters each row reads, on rows scaled to unit norm
(``normalize``), and whose model files hold their fields.  A model sets its kernel
(``_structure``), the width of a feature's factor row (``_factor_width``), its ``lam``
(``_lam_width``, ``_stacked_lam``) and the fitted attributes it publishes
(``_publish_fields``).
"""
import numpy as np
import scipy.sparse as sp
from sklearn.preprocessing import normalize
from sklearn.utils.sparsefuncs_fast import inplace_csr_row_normalize_l2

from .. import kernels
from .._io import ModelFileError
from .._validation import check_bool, check_n_jobs, check_number, store_init_params
from ._base import _PolynomialModel

__all__ = ["fields_of"]


def fields_of(fields, n_features):
    """The field of each of ``n_features`` columns, as the field-aware models take it.

    Parameters
    ----------
    fields : array-like of int, list of Field, fitted FieldEncoder, or None
        ``fields[j]`` is the field of column j; a fitted
        :class:`polylite.FieldEncoder`'s fields (its ``fields_``, or the encoder itself)
        become the fields, in their order, each holding its columns; None: each column
        a field of its own.
    n_features : int
        The number of columns of the data.

    Returns
    -------
    fields : ndarray of shape (n_features,), dtype intc
    n_fields : int
    """
    if fields is None:
        return np.arange(n_features, dtype=np.intc), max(n_features, 1)
    encoded = getattr(fields, "fields_", None)
    if (isinstance(fields, (list, tuple)) and fields
            and all(hasattr(f, "start") and hasattr(f, "stop") for f in fields)):
        encoded = list(fields)  # a FieldEncoder's fields_
    if encoded is None and hasattr(fields, "get_params") and hasattr(fields, "transform"):
        raise ValueError("fields is an unfitted FieldEncoder: fit it first (its fields_ "
                         "give the model's fields)")
    if encoded is not None:
        out = np.empty(encoded[-1].stop if encoded else 0, np.intc)
        for f, field in enumerate(encoded):
            out[field.start:field.stop] = f
        if out.shape[0] != n_features:
            raise ValueError(f"the FieldEncoder's fields cover {out.shape[0]} columns, "
                             f"but X has {n_features}")
        return out, max(len(encoded), 1)
    return kernels.check_fields(fields, n_features)


class _FieldModel(_PolynomialModel):
    """The row-penalty field models' shared behaviour (see the module's docstring)."""

    _solvers = ("sgd", "adagrad", "ftrl")
    _counts_nonzero = True
    _initial_accumulator = 1.0  # as libffm: the first steps are at most eta0
    _row_penalty = True  # as libffm: each row penalises the parameters it reads
    # FTRL's first proximal term is centred at the initial model (the random factors;
    # field-weighted: the weights of the pairs of fields at 1), not at 0, where its
    # first step would set them near 0: solvers.start_ftrl.
    _ftrl_from_start = True
    # The fitted factors are published without the block axis (one block).
    _single_block = True

    def _check_params(self):
        super()._check_params()
        check_bool(self.normalize, "normalize")
        check_n_jobs(self.n_jobs)
        self._check_ftrl()
        f = self.fields
        if not (f is None or hasattr(f, "transform") or isinstance(f, (list, tuple))
                or (isinstance(f, np.ndarray) and f.ndim == 1)):
            raise ValueError(f"fields must be None, a sequence of ints (the field of each "
                             f"column) or a fitted FieldEncoder, got {type(f).__name__}")

    def _check_init_scale(self):
        if self.init_scale is not None:
            check_number(self.init_scale, "init_scale", low=0)

    def _check_tol(self):
        if self.tol is not None:
            check_number(self.tol, "tol", low=0)

    def _choose_solver(self, X):
        return self.solver

    def _field_structure(self):
        return self.fields_, self.n_fields_

    def _lam_width(self):
        """Entries of an output's ``lam``: a factor row's (unused by the field-aware
        kernel, whose passes expect that width)."""
        return self._factor_width()

    def _check_against_data(self, X, n_outputs):
        """Resolve the fields (``fields_``, ``n_fields_``) for the data, then check the
        model's size."""
        self.fields_, self.n_fields_ = fields_of(self.fields, X.shape[1])
        super()._check_against_data(X, n_outputs)

    def _init_nonlinear(self, params, rng):
        """Factors uniform in [0, init_scale) (default 1 / sqrt(n_components)), as
        libffm; ``lam`` ones."""
        scale = (1.0 / np.sqrt(self.n_components) if self.init_scale is None
                 else float(self.init_scale))
        _fill_uniform(params.P, rng, scale)
        params.lam[...] = 1

    # The rows the passes and the predictions read: scaled to unit norm with normalize.
    def _prepare_X(self, X, *, reset, y=None):
        out = super()._prepare_X(X, reset=reset, y=y)
        if not self.normalize:
            return out
        if isinstance(out, tuple):
            return (_unit_rows(out[0]),) + tuple(out[1:])
        return _unit_rows(out)

    def _validation_set(self, X_val, y_val):
        X_val, y_val = super()._validation_set(X_val, y_val)
        return (_unit_rows(X_val) if self.normalize else X_val), y_val

    # The engine's stack: one factor block of rows of _factor_width entries, no dummies
    # (gamma of no rows), ``lam`` of _lam_width entries.
    def _allocate(self, n_outputs, n_features, dtype):
        stack = super()._allocate(n_outputs, n_features, dtype)
        stack["gamma"] = np.zeros((n_outputs, 0, self._factor_width()), dtype)
        stack["lam"] = np.ones((n_outputs, self._lam_width()), dtype)
        return stack

    def _publish(self, stack):
        super()._publish(stack)
        del self.gamma_
        self._publish_fields(stack)

    def _publish_fields(self, stack):
        """The model's own fitted attributes from ``stack`` (after the shared ones)."""

    def _stacked_lam(self, n_outputs, dtype):
        """The stack's ``lam`` from the fitted attributes: ones."""
        return np.ones((n_outputs, self._lam_width()), dtype)

    def _stacked(self, copy=False):
        P = self.P_ if self._is_classifier else self.P_[np.newaxis]
        n_out, d, width = P.shape[0], P.shape[1], self._factor_width()
        dtype = P.dtype
        w = self.w_ if self._is_classifier else self.w_[np.newaxis]
        stack = dict(intercept=np.array(self.intercept_, dtype=dtype).reshape(-1, 1),
                     w=w, P=P.reshape(n_out, 1, d, width),
                     gamma=np.zeros((n_out, 0, width), dtype),
                     lam=self._stacked_lam(n_out, dtype))
        return {name: np.array(a, dtype=dtype, copy=copy or None)
                for name, a in stack.items()}

    def _predict_output(self, X, params, kernel, degrees):
        # The model's own parameters, checked when fitted or loaded: not checked again
        # (a pass over the whole model at every call, as partial_fit's per chunk).
        return kernels._predict_field_rows(
            X, np.ascontiguousarray(params.P[0]), params.lam, kernel,
            (self.fields_, self.n_fields_), params.intercept[0],
            params.w if self.fit_linear else None, False, self._n_jobs)

    # Model files: the fields are an array of the file (``fields_``), from which the
    # loaded model's parameter ``fields`` is restored; the header holds None for it (a
    # FieldEncoder is no parameter a file can hold, and a list of a million fields is
    # no header).
    def _saved_params(self):
        params = self.get_params(deep=False)
        params["fields"] = None
        return params

    def _model_arrays(self):
        arrays, meta = super()._model_arrays()
        arrays["fields"] = self.fields_.astype(np.int64)
        arrays["n_fields"] = np.array([self.n_fields_], np.int64)
        return arrays, meta

    def _restore_model(self, arrays, attributes):
        arrays = dict(arrays)
        fields, n_fields = arrays.pop("fields", None), arrays.pop("n_fields", None)
        if fields is None or n_fields is None or n_fields.shape != (1,):
            raise ModelFileError("a field-aware model file needs the arrays 'fields' and "
                                 "'n_fields'")
        try:
            self.fields_, self.n_fields_ = kernels.check_fields(
                fields, self.n_features_in_, int(n_fields[0]))
        except ValueError as exc:
            raise ModelFileError(f"model file has invalid fields: {exc}") from None
        super()._restore_model(arrays, attributes)
        self.fields = self.fields_.copy()


# The field models' constructors: the field-aware and the field-weighted models take the
# same parameters with the same defaults (scikit-learn reads them from the signature).
def _regressor_init(self, n_components=4, *, fields=None, normalize=True, fit_linear=True,
                    fit_intercept=True, alpha=2e-5, beta=2e-5, init_scale=None, max_iter=15,
                    tol=None, solver="adagrad", learning_rate="invscaling", eta0=0.2,
                    power_t=0.25, l1=0.0, l2=0.0, batch_size=1, shuffle=True,
                    early_stopping=False, validation_fraction=0.1, n_iter_no_change=2,
                    warm_start=False, random_state=None, verbose=0, n_jobs=None):
    store_init_params(self, locals())


def _classifier_init(self, n_components=4, *, fields=None, normalize=True,
                     loss="logistic", fit_linear=True, fit_intercept=True, alpha=2e-5,
                     beta=2e-5, init_scale=None, max_iter=15, tol=None, solver="adagrad",
                     learning_rate="invscaling", eta0=0.2, power_t=0.25, l1=0.0, l2=0.0,
                     batch_size=1, shuffle=True, early_stopping=False,
                     validation_fraction=0.1, n_iter_no_change=2, warm_start=False,
                     random_state=None, verbose=0, n_jobs=None):
    store_init_params(self, locals())


# Draws per call of _fill_uniform: the same numbers as one call for the whole array, in
# the array's dtype, without a float64 array as large as the factors (on 85 million
# factors that array cost four times the time of the draws).
_FILL_CHUNK = 1 << 20


def _fill_uniform(out, rng, high):
    """Fill ``out`` in place with ``rng.uniform(0, high, size=out.shape)``, drawn a chunk
    at a time (the same values, in the same order)."""
    if not out.flags.c_contiguous:
        out[...] = rng.uniform(0.0, high, size=out.shape)
        return
    flat = out.reshape(-1)  # a view of the contiguous array
    for start in range(0, flat.shape[0], _FILL_CHUNK):
        stop = min(start + _FILL_CHUNK, flat.shape[0])
        flat[start:stop] = rng.uniform(0.0, high, size=stop - start)


def _unit_rows(X):
    """X with each row scaled to unit Euclidean norm (zero rows stay zero).  A CSR
    matrix's copy shares X's indices: only its values are new (the same numbers as
    ``normalize``, in half the memory of a full copy)."""
    if sp.issparse(X) and X.format == "csr":
        unit = type(X)((X.data.copy(), X.indices, X.indptr), shape=X.shape, copy=False)
        inplace_csr_row_normalize_l2(unit)
        return unit
    return normalize(X, norm="l2", copy=True)
