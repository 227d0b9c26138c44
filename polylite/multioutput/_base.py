"""Shared machinery of the multi-output estimators: parameters, the fit loop over the
iterations of the conditional gradient, the path's history, validation, warm start,
prediction, save/load.

The model has ``n_outputs`` outputs

    o(x) = sum_r sigma(h_r, x~) V[r] + intercept,   x~ = [x, 1] if fit_linear else x,

with basis vectors h_r (rows of ``H_``) in the unit ball, shared by every output.
"""
import time

import numpy as np
from sklearn.utils import check_random_state
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data
from threadpoolctl import threadpool_limits

from .. import kernels
from .._estimator import ModelRoot
from .._io import ModelFileError, check_array_names, check_float_arrays
from .._validation import (check_bool, check_choice, check_n_jobs, check_number,
                           check_random_state_param)
from ..polynomial import _base as _polynomial_base
from ._conditional_gradient import ConditionalGradient
from ._operator import RowOperator, chunked_outputs
from ._projections import PENALTIES

KERNELS = ("pn", "fm")
REFITS = ("output", "full")
_FLOAT_DTYPES = [np.float64, np.float32]

# History entries of every fit, and the integer ones among them.
_HISTORY = ("objective", "penalty", "n_basis", "gap", "selection", "power_iterations",
            "refine_iterations", "refit_iterations", "seconds")
_INTEGER_HISTORY = ("n_basis", "power_iterations", "refine_iterations", "refit_iterations")


class _MultiOutputPolynomial(ModelRoot):
    """Base of the two estimators; subclasses define the targets and the losses."""

    _fitted_attribute = "H_"

    _is_classifier = False
    _losses = ()
    # History entries of a fit with validation data (besides _HISTORY).
    _validation_history = ("validation_loss",)

    def _check_params(self):
        check_choice(self.kernel, "kernel", KERNELS)
        check_choice(self.penalty, "penalty", PENALTIES)
        check_number(self.tau, "tau", low=0, low_open=True)
        check_number(self.max_basis, "max_basis", low=1, integer=True)
        check_choice(self.refit, "refit", REFITS)
        check_choice(self.loss, "loss", self._losses)
        for name in ("fit_linear", "fit_intercept", "warm_start"):
            check_bool(getattr(self, name), name)
        for name in ("tol", "power_tol", "refine_tol", "refit_tol"):
            check_number(getattr(self, name), name, low=0)
        for name in ("max_power_iter", "max_refine_iter", "max_refit_iter"):
            check_number(getattr(self, name), name, low=1, integer=True)
        check_n_jobs(self.n_jobs)
        check_number(self.verbose, "verbose", low=0, integer=True)
        check_random_state_param(self.random_state)

    # ---- data -------------------------------------------------------------------------

    def _validate_fit_X(self, X, y, **target_checks):
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=_FLOAT_DTYPES,
                             accept_large_sparse=True, **target_checks)
        return kernels.check_X(X, accept_dense=False), y

    def _validate_X_val(self, X_val, y_val, dtype):
        if X_val is None or y_val is None:
            raise ValueError("give both X_val and y_val, or neither")
        X_val = kernels.check_X(X_val, dtype=dtype, n_features=self.n_features_in_,
                                accept_dense=False)
        if X_val.shape[0] < 1:
            raise ValueError("X_val has no rows")
        return X_val

    def _validate_X_predict(self, X):
        check_is_fitted(self)
        X = validate_data(self, X, accept_sparse="csr", dtype=self.H_.dtype, reset=False,
                          accept_large_sparse=True)
        return kernels.check_X(X, dtype=self.H_.dtype, accept_dense=False)

    def _outputs(self, X):
        """Raw outputs (n_samples, n_outputs), float64, every one finite: every
        prediction method goes through here, and raises FloatingPointError where the
        outputs overflow rather than return NaN or infinity."""
        X = self._validate_X_predict(X)
        with np.errstate(over="ignore", invalid="ignore"):  # checked below
            O = chunked_outputs(X, self.H_, self.V_, self.intercept_,
                                constant=self.fit_linear, kernel=self.kernel,
                                n_jobs=self.n_jobs)
        return kernels.check_finite_predictions(O, self, "outputs", dtype=self.H_.dtype)

    # ---- fitting ----------------------------------------------------------------------

    def _fit_path(self, X, targets, n_outputs, loss, sample_weight, validation):
        """Run the conditional gradient and publish the fitted attributes.

        ``validation``: None or (X_val, function of the validation outputs returning a
        dict of scores, function of such a dict returning its rank: larger is better).
        """
        self._check_params()
        start = time.perf_counter()
        sw = _check_sample_weight(sample_weight, X, dtype=np.float64,
                                  ensure_non_negative=True)
        total = sw.sum()
        if not total > 0:
            raise ValueError("sample_weight must have a positive sum")
        s = sw / total
        rng = check_random_state(self.random_state)
        op = RowOperator(X, constant=self.fit_linear, kernel=self.kernel,
                         n_jobs=self.n_jobs)
        loss.n_threads = op.n_threads   # the threads of the per-output losses' passes
        H, V, b, history = self._starting_model(op.dim, n_outputs)
        self._check_basis_memory(X, op.dim, n_outputs, H.shape[0],
                                 None if validation is None else validation[0])
        scorer = None
        if validation is not None:
            X_val, scorer, rank = validation
            val_op = RowOperator(X_val, constant=self.fit_linear, kernel=self.kernel,
                                 n_jobs=self.n_jobs)
        with threadpool_limits(limits=op.n_threads, user_api="blas"):
            path = ConditionalGradient(
                self, op, loss, targets, s, H, V, b, rng,
                None if validation is None else (val_op, scorer))
            best = None
            if validation is not None:   # the starting model is a candidate too
                best_score = rank(path.validation_scores())
                best = (path.H.copy(), path.V.copy(), path.b.copy(),
                        len(history.get("objective", ())))
            if self.verbose:
                print(f"[{type(self).__name__}] {op.X.shape[0]} rows, {op.dim} "
                      f"dimensions, {n_outputs} outputs; objective {path.value:.6e}")
            for _ in range(self.max_basis):
                record = path.iteration()
                if record is None:
                    if self.verbose:
                        print(f"[{type(self).__name__}] converged: duality gap below "
                              f"tol x objective, or the training targets fitted to "
                              f"rounding")
                    break
                for key, value in record.items():
                    history.setdefault(key, []).append(value)
                if validation is not None:
                    score = rank(record)
                    if score > best_score:
                        best_score = score
                        best = (path.H.copy(), path.V.copy(), path.b.copy(),
                                len(history["objective"]))
                if self.verbose:
                    self._report(history, time.perf_counter() - start)
        n_iter = len(history.get("objective", ()))
        if best is not None:
            H, V, b, best_iteration = best
        else:
            H, V, b, best_iteration = path.H, path.V, path.b, n_iter
        self._publish(H, V, b, X.dtype, history, n_iter, best_iteration)

    def _check_basis_memory(self, X, dim, n_outputs, n_start, X_val):
        """Refuse (ValueError) a ``max_basis`` whose basis could not be held in this
        machine's memory: after ``max_basis`` iterations from ``n_start`` basis vectors,
        the fit holds the Gram matrix of their features (and its copy in the refits,
        float64), their features on the rows of X and X_val (kept with room to double)
        and the vectors themselves."""
        memory = _polynomial_base._physical_memory()
        if memory is None:
            return
        t = n_start + self.max_basis
        n_val = 0 if X_val is None else X_val.shape[0]
        itemsize = X.dtype.itemsize
        n_bytes = (2 * 8 * t * t + 2 * itemsize * t * X.shape[0] + itemsize * t * n_val
                   + 8 * t * (dim + n_outputs))
        if n_bytes > memory:
            raise ValueError(
                f"max_basis={self.max_basis} lets the basis grow to {t} vectors, whose "
                f"Gram matrix and features on the {X.shape[0]} rows of X would take "
                f"{_polynomial_base._gib(n_bytes)}, more than this machine's memory "
                f"({_polynomial_base._gib(memory)}); use a smaller max_basis (the fit "
                f"stops before it anyway once the duality gap is below tol)")

    def _starting_model(self, dim, n_outputs):
        """(H, V, b, history lists) to start from: the fitted model with ``warm_start``."""
        if not (self.warm_start and self.__sklearn_is_fitted__()):
            return (np.zeros((0, dim)), np.zeros((0, n_outputs)), np.zeros(n_outputs),
                    {})
        H, V = self.H_.astype(np.float64), self.V_.astype(np.float64)
        if H.shape[1] != dim or V.shape[1] != n_outputs:
            raise ValueError(
                f"warm_start=True but the fitted model has basis vectors of dimension "
                f"{H.shape[1]} and {V.shape[1]} outputs, the data and parameters now "
                f"need {dim} and {n_outputs}; set warm_start=False to fit from scratch")
        kept = self.best_iteration_
        history = {key: list(values[:kept]) for key, values in self.history_.items()}
        return H, V, self.intercept_.astype(np.float64), history

    def _report(self, history, seconds):
        t = len(history["objective"])
        line = (f"iteration {t:4d}  basis {history['n_basis'][-1]:4d}  objective "
                f"{history['objective'][-1]:.6e}  penalty/tau "
                f"{history['penalty'][-1] / self.tau:.3f}  gap {history['gap'][-1]:.2e}  "
                f"power {history['power_iterations'][-1]:3d}  refine "
                f"{history['refine_iterations'][-1]:3d}  refit "
                f"{history['refit_iterations'][-1]:4d}")
        for key in self._validation_history:
            if key in history:
                line += f"  {key} {history[key][-1]:.4f}"
        print(line + f"  {seconds:.2f}s")

    def _publish(self, H, V, b, dtype, history, n_iter, best_iteration):
        self.H_ = np.ascontiguousarray(H, dtype=dtype)
        self.V_ = np.ascontiguousarray(V, dtype=dtype)
        self.intercept_ = np.ascontiguousarray(b, dtype=dtype)
        self.history_ = {key: np.asarray(values, dtype=np.int64 if key in
                                         _INTEGER_HISTORY else np.float64)
                         for key, values in history.items()}
        self.n_iter_ = int(n_iter)
        self.best_iteration_ = int(best_iteration)

    # ---- save / load (polylite._io) ------------------------------------------------------

    def _model_arrays(self):
        arrays = {"H": self.H_, "V": self.V_, "intercept": self.intercept_}
        for key, values in self.history_.items():
            arrays["history_" + key] = values
        attributes = {"n_iter": self.n_iter_, "best_iteration": self.best_iteration_,
                      "history": sorted(self.history_)}
        return arrays, attributes

    def _n_outputs_expected(self, attributes):
        """The number of outputs a model file must have (None: any)."""
        return None

    def _restore_model(self, arrays, attributes):
        n_iter, best = attributes.get("n_iter"), attributes.get("best_iteration")
        keys = attributes.get("history")
        for name, value in (("n_iter", n_iter), ("best_iteration", best)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ModelFileError(f"model file has no valid {name} (got {value!r})")
        if best > n_iter:
            raise ModelFileError(f"model file has best_iteration {best} > n_iter {n_iter}")
        allowed = set(_HISTORY) | set(self._validation_history)
        # A fit that stopped before its first iteration (no basis vector) has no history.
        no_history = keys == [] and n_iter == 0
        if not isinstance(keys, list) or not (
                no_history or set(_HISTORY) <= set(keys) <= allowed):
            raise ModelFileError(f"model file has an invalid history table {keys!r}")
        check_array_names(arrays, {"H", "V", "intercept"} | {"history_" + k for k in keys},
                          owner=type(self).__name__)
        H = arrays["H"]
        if H.ndim != 2 or arrays["V"].ndim != 2:
            raise ModelFileError("arrays 'H' and 'V' must be 2-D")
        n_basis, n_outputs = H.shape[0], arrays["V"].shape[1]
        if n_basis > n_iter:  # also bounds n_basis when H holds no data (0 columns)
            raise ModelFileError(f"arrays 'H' and 'V' have {n_basis} basis vectors (rows) "
                                 f"after {n_iter} iterations (n_iter); an iteration adds "
                                 f"at most one")
        expected_outputs = self._n_outputs_expected(attributes)
        if expected_outputs is not None and n_outputs != expected_outputs:
            raise ModelFileError(f"model file has {n_outputs} outputs, expected "
                                 f"{expected_outputs}")
        dim = self.n_features_in_ + int(self.fit_linear)
        check_float_arrays(arrays, {"H": (n_basis, dim), "V": (n_basis, n_outputs),
                                    "intercept": (n_outputs,)}, H.dtype)
        if H.size and np.linalg.norm(H.astype(np.float64), axis=1).max() > 1 + 1e-4:
            raise ModelFileError("array 'H' has rows outside the unit ball")
        history = {}
        for key in keys:
            values = arrays["history_" + key]
            kind = "iu" if key in _INTEGER_HISTORY else "f"
            if values.shape != (n_iter,) or values.dtype.kind not in kind or (
                    kind == "f" and not np.all(np.isfinite(values))):
                raise ModelFileError(f"array 'history_{key}' must hold {n_iter} finite "
                                     f"{'integers' if kind == 'iu' else 'numbers'}")
            history[key] = values
        self._publish(H, arrays["V"], arrays["intercept"], H.dtype, history, n_iter, best)


_COMMON_PARAMS_DOC = """
    kernel : {"pn", "fm"}, default="pn"
        The activation sigma of a basis vector h: "pn" (polynomial network)
        ``(h . x~)^2``, squares of features included; "fm" (factorization machine) the
        ANOVA kernel ``A_2(h, x~) = sum_{j < j'} h_j h_j' x_j x_j'``, distinct features
        only.
    penalty : {"l1/l2", "l1", "l1/linf"}, default="l1/l2"
        The norm Omega of the output layer V (one row per basis vector) that ``tau``
        bounds: "l1" the sum of ``|V_rc|`` (each output chooses its own basis vectors; the
        paper shows this amounts to separate nuclear norms per output), "l1/l2" the sum
        of the rows' Euclidean norms (group lasso: basis vectors useful to every output
        together), "l1/linf" the sum of the rows' largest ``|V_rc|``.
    tau : float, default=10.0
        Radius of the constraint ``Omega(V) <= tau``: the only regularisation.  It is a
        bound on the output weights, not a penalty weight, so it does *not* scale with
        the number of rows (the objective is a weighted mean over the rows; a sum, as in
        the paper, would have the same solutions for the same tau).  It does scale with
        the features: sigma grows as ||x||^2, so scaling X by a multiplies the tau
        needed by 1 / a^2.  Larger tau: larger outputs, less regularisation.
    max_basis : int, default=50
        Iterations of the conditional gradient per call to ``fit``; each adds one basis
        vector (the refits may remove others, so ``H_`` has at most this many rows).
        ``fit`` refuses a value whose basis could not be held in the machine's memory
        (the features' Gram matrix grows as its square).
    refit : {"output", "full"}, default="output"
        The corrective step after each new basis vector: "output" refits V (convex, by
        FISTA with exact projections onto the Omega-ball); "full" then alternates
        projected gradient steps on H (rows kept in the unit ball) with output refits
        (non-convex, slower, often fewer basis vectors for the same accuracy).
    fit_linear : bool, default=True
        Augment x with a constant feature 1 (x~ = [x, 1]), as in the paper: the weight
        of the constant in h turns sigma into a full quadratic with a linear term (and,
        for "pn", a constant).  ``H_`` then has one more column, the constant's weight.
    fit_intercept : bool, default=True
        Fit a free (unconstrained) intercept per output, refitted with V.
    tol : float, default=1e-4
        Stop before ``max_basis`` when the Frank-Wolfe duality gap (estimated with the
        selected basis vector) is at most ``tol`` times the objective: the constrained
        problem is then solved to that accuracy.  The path also stops once the model
        fits the training targets to rounding (the objective below ``(32 eps)^2`` times
        that of all-zero outputs, eps of X's dtype): no basis vector can improve it.
    power_tol : float, default=1e-2
        The power method stops when ``||Gamma h - rho h|| <= power_tol |rho|``.
    max_power_iter : int, default=100
        Iteration limit of the power method (each is one pass over X for all outputs).
    refine_tol : float, default=1e-3
        Relative tolerance of the refinement of the basis vector for "l1/l2" and
        "l1/linf" (gain of the selection criterion per iteration).
    max_refine_iter : int, default=30
        Iteration limit of the refinement.
    refit_tol : float, default=1e-4
        The output refit stops when a step (at a curvature fitted to the loss) lowers
        the objective by at most ``refit_tol`` times its value; the full refit stops
        when a round does.  The refit's steps converge slowly on correlated features, so
        a loose tolerance stops refits far from their optimum once the ball binds: on
        letter (26 classes) ``1e-3`` left the validation accuracy at 91.5% where
        ``1e-4`` reaches 92.6%, at about three times the fit time.
    max_refit_iter : int, default=300
        Iteration limit of the steps of an output refit, and of the rounds of a full
        refit.
    n_jobs : int or None, default=None
        Threads that share each pass over the rows of X in ``fit`` and ``predict``
        (None: 1; -1: every CPU the process may use; fewer on data under 20,000 rows per
        thread), and the BLAS threads of the refits.
    random_state : int, RandomState instance or None, default=None
        Seed of the power method's starting vectors.
    verbose : int, default=0
        Print one line per iteration (objective, penalty, gap, inner iterations,
        validation scores, time) when > 0.
    warm_start : bool, default=False
        Continue from the fitted model: ``fit`` re-optimises its output layer on the new
        data and parameters, then runs ``max_basis`` more iterations.  After a fit that
        kept its best iteration on validation data, it continues from that one (and the
        history is cut there).
"""

_COMMON_ATTRIBUTES_DOC = """
    H_ : ndarray of shape (n_basis, n_features + fit_linear)
        The basis vectors (hidden units), rows in the unit ball; with ``fit_linear`` the
        last column is the weight of the constant feature.  In the dtype of the training
        data (float32 or float64).
    V_ : ndarray of shape (n_basis, n_outputs)
        The output layer: row r weighs basis vector r in every output.
    intercept_ : ndarray of shape (n_outputs,)
        The intercepts (zeros without ``fit_intercept``).
    history_ : dict of ndarray of shape (n_iter,)
        One entry per iteration t = 1..``n_iter_`` of the path, after its refit:
        ``objective`` (the training loss, a weighted mean over the rows), ``penalty``
        (Omega(V), at most tau), ``n_basis`` (basis vectors kept), ``gap`` (duality gap
        estimated at the start of the iteration), ``selection`` (||q(h)||_p of the new
        basis vector), ``power_iterations``, ``refine_iterations``,
        ``refit_iterations`` (FISTA iterations, or rounds of the full refit), ``seconds``
        (of the iteration); with validation data also ``validation_loss`` (and, for the
        classifier, ``validation_accuracy``).
    n_iter_ : int
        Iterations run (length of the history).
    best_iteration_ : int
        The iteration whose model is kept: the best on the validation data when given,
        else the last (``n_iter_``).
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features,)
        Only when X has feature names.
"""
