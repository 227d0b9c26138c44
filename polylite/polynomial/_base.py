"""Shared machinery of the polylite estimators: validation, parameters, the epoch loop.

An estimator holds one or more *outputs* (one for regression and binary classification,
one per class for one-vs-rest multi-class).  Each output is a polynomial model

    y_hat(x) = intercept + <w, x> + sum_b sum_s K_b(P[b, :, s], x)

described by the arrays of :class:`_OutputParams`.  Solvers update these arrays in place,
one epoch per call, so that Python can report progress and test convergence.
"""
import contextlib
import os
import time
import warnings
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_array, check_random_state, column_or_1d
from sklearn.utils.validation import _check_sample_weight, check_is_fitted
from threadpoolctl import threadpool_limits

from .. import kernels
from .._engine.layouts import NO_TARGETS, layout_of
from .._estimator import ModelRoot
from .._io import ModelFileError, check_array_names, check_float_arrays
from .._validation import (check_bool, check_choice, check_number,
                           check_random_state_param)
from .._engine import _cd, _losses, solvers
# max_iter=None: the limit of each solver (see MAX_ITER_TOL_DOC).
from .._engine.codes import DEFAULT_MAX_ITER
from .._engine.outputs import polynomial_output

_FLOAT_DTYPES = [np.float64, np.float32]


@dataclass
class _OutputParams:
    """Parameters of one output; arrays are views into the estimator's fitted arrays."""
    intercept: np.ndarray  # shape (1,)
    w: np.ndarray          # (n_features,)
    P: np.ndarray          # (n_blocks, n_features, n_components)
    gamma: np.ndarray      # (n_dummy, n_components)
    lam: np.ndarray        # (n_components,)


def _physical_memory():
    """Bytes of physical memory, or None where the system does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def _gib(n_bytes):
    return f"{n_bytes / 2**30:.1f} GiB"


def check_model_memory(n_values, itemsize, n_components, axes, shape,
                       advice="use fewer components"):
    """Raise a ValueError if ``n_values`` parameters of ``itemsize`` bytes, mostly factors
    of ``shape`` (its ``axes`` named), would not fit in this machine's memory."""
    memory = _physical_memory()
    if memory is not None and n_values * itemsize > memory:
        raise ValueError(
            f"n_components={n_components} asks for {_gib(n_values * itemsize)} of "
            f"parameters (mostly factors of shape ({axes}) = {shape}, {itemsize} bytes "
            f"each), more than this machine's memory ({_gib(memory)}); {advice}")


class EpochReport(NamedTuple):
    """What the epoch loop tells a progress display (``_epoch_callback``) after each epoch
    (after each iteration of L-BFGS)."""
    output: int             # index of the output being fitted (one-vs-rest: its class)
    n_outputs: int
    epoch: int
    max_iter: int
    objective: float
    validation_loss: float  # NaN without a validation set
    seconds: float          # since the fit of this output started
    # A classifier's: the fraction of validation rows on the output's side (NaN else).
    validation_accuracy: float = float("nan")


# Data with more than this fraction of nonzero entries counts as dense: solver="auto"
# fits it by L-BFGS, sparser data by coordinate descent.  Measured (docs/user_guide/
# solvers.rst): cd is far faster on one-hot recommender rows (bench_solvers.py), lbfgs on
# dense numeric rows (bench_classification.py --speed); on sparse numeric rows lbfgs was
# faster too (bench_solver_choice.py), so this threshold keeps cd for all sparse data,
# where its exact steps never make the objective worse.
DENSE_FRACTION = 0.5


# The estimators' documentation of solver="auto" (FMs and PNs alike).
AUTO_SOLVER_DOC = """\
        "auto": "lbfgs" on dense data (more than half of the entries of X nonzero, such
        as standardised numeric features: coordinate descent needs many epochs when every
        feature shares every row) and "cd" on sparse data (one-hot fields of recommender
        data, text: there coordinate descent converges in few epochs); the choice is made
        from the training data at every ``fit`` and recorded in ``solver_``, and the
        other parameters keep their meaning for the solver chosen.  ``partial_fit``
        exists for "sgd" and "adagrad" only (not for "auto").
"""


# The estimators' documentation of max_iter and tol (FMs and PNs alike).
MAX_ITER_TOL_DOC = """\
    max_iter : int or None, default=None
        Maximum number of epochs (one epoch updates every parameter once), or of L-BFGS
        iterations.  None: 100 epochs, or 1000 iterations when the solver that runs is
        "lbfgs": an L-BFGS iteration costs about one gradient pass and makes less
        progress than an epoch of "cd"; on the dense classification sets satimage and
        letter (degrees 2 and 3, default penalties) L-BFGS converged within 550.
    tol : float, default=1e-5
        Stop when the relative decrease of the objective in an epoch, or the largest
        parameter change, falls below ``tol`` ("lbfgs": SciPy's ``ftol``, the decrease
        in an iteration relative to ``max(|objective|, 1)``; the objective is a mean
        over the rows, below 1 for the classification losses once the fit has started,
        so there ``tol`` bounds the decrease of the mean loss itself).
"""

_SQUARED = _losses.LOSSES["squared"]

def is_dense(X):
    """Whether ``X`` (CSR, or relational: its expanded rows) counts as dense for the
    choice of a solver (``DENSE_FRACTION``), so that either form gets the same one."""
    return layout_of(X).expanded_nnz(X) > DENSE_FRACTION * X.shape[0] * X.shape[1]


def _partial_fit_available(est):
    """partial_fit exists for the stochastic solvers only (``available_if`` test)."""
    return est.solver in solvers.STOCHASTIC


_WEIGHTS_SCALE_STEPS = (
    "by design, not a bug: a stochastic step scales a row's gradient by its weight, so a "
    "weight-2 row is one step with twice the gradient, not two steps of a repeated row "
    "(scikit-learn's own SGD estimators fail this check for the same reason)")


class _PolynomialModel(ModelRoot):
    """Base of the polynomial families (factorization machines, polynomial networks, the
    ranker): subclasses describe the model, this class fits it."""

    _fitted_attribute = "P_"
    _state_attributes = ("_stochastic_states", "_partial_rng")

    # Set by subclasses.
    _is_classifier = False

    # A callable that shows progress (the command line sets one on its estimator): called
    # with an EpochReport after every epoch.  Not a parameter, so neither saved nor cloned.
    _epoch_callback = None

    # Whether partial_fit keeps what it needs to undo a chunk that diverges.  The command
    # line's streamed fit, which stops at such a chunk, sets False on its estimator: the
    # row-penalty models then step in place without copying the chunk's rows, and a
    # diverged chunk leaves the estimator unfitted.  Not a parameter.
    _undo_diverged_chunk = True

    # ---- model structure (subclasses override) ---------------------------------------

    def _structure(self):
        """(kernel name, degree of each block, number of dummy rows) of the model."""
        raise NotImplementedError

    def _init_nonlinear(self, params, rng):
        """Random initial factors (in place); default: N(0, init_scale^2)."""
        params.P[...] = rng.normal(0.0, self.init_scale, size=params.P.shape)
        params.gamma[...] = rng.normal(0.0, self.init_scale, size=params.gamma.shape)

    def _continue_from(self, params):
        """Adjust a warm start's parameters to the current settings (in place)."""

    @property
    def _max_iter(self):
        """``max_iter``, or for None the default of the solver that runs (``solver_``,
        set by ``fit``; ``DEFAULT_MAX_ITER``)."""
        if self.max_iter is not None:
            return int(self.max_iter)
        return DEFAULT_MAX_ITER[getattr(self, "solver_", None) or "cd"]

    def _check_params(self):
        check_number(self.n_components, "n_components", low=1, integer=True)
        check_number(self.alpha, "alpha", low=0)
        check_number(self.beta, "beta", low=0)
        self._check_init_scale()
        if self.max_iter is not None:
            check_number(self.max_iter, "max_iter", low=1, integer=True)
        self._check_tol()
        check_number(self.verbose, "verbose", low=0, integer=True)
        for name in ("fit_intercept", "fit_linear", "warm_start", "shuffle",
                     "early_stopping"):
            check_bool(getattr(self, name), name)
        check_choice(self.solver, "solver", self._solvers)
        check_choice(self.learning_rate, "learning_rate", tuple(solvers.SCHEDULES))
        if self.eta0 is not None:
            check_number(self.eta0, "eta0", low=0, low_open=True)
        check_number(self.power_t, "power_t", low=0)
        check_number(self.batch_size, "batch_size", low=1, integer=True)
        check_number(self.validation_fraction, "validation_fraction", low=0, high=1,
                     low_open=True)
        if self.validation_fraction >= 1:
            raise ValueError(f"validation_fraction must be < 1, got "
                             f"{self.validation_fraction!r}")
        check_number(self.n_iter_no_change, "n_iter_no_change", low=1, integer=True)
        check_random_state_param(self.random_state)

    _solvers = ("auto", "cd", "sgd", "adagrad", "lbfgs")

    def _check_init_scale(self):
        check_number(self.init_scale, "init_scale", low=0)

    def _check_tol(self):
        check_number(self.tol, "tol", low=0)

    def _choose_solver(self, X):
        """The solver a fit on ``X`` (validated CSR) runs: ``solver``, or for "auto"
        "lbfgs" on dense data (:func:`is_dense`) and "cd" otherwise (``AUTO_SOLVER_DOC``)."""
        if self.solver != "auto":
            return self.solver
        return "lbfgs" if is_dense(X) else "cd"

    def _check_against_data(self, X, n_outputs):
        """Refuse parameters that are absurd for the data ``X`` (validated): see
        :meth:`_check_model_size`."""
        self._check_model_size(X.shape[1], n_outputs, X.dtype.itemsize)

    def _check_model_size(self, n_features, n_outputs, itemsize):
        """Refuse parameters that are absurd for ``n_features`` features (a ValueError,
        not the operating system stopping the process): a degree far beyond them
        (:meth:`_check_degree`), a model larger than this machine's memory.  ``fit``
        checks its data so, and ``polylite.load`` a model file."""
        self._check_degree(n_features)
        _, degrees, n_dummy = self._structure()
        k, width = self.n_components, self._factor_width()
        n_values = n_outputs * (1 + n_features + len(degrees) * n_features * width
                                + (n_dummy + 1) * k)
        check_model_memory(n_values, itemsize, k, "outputs, blocks, features, components",
                           (n_outputs, len(degrees), n_features, width))

    def _check_degree(self, n_features):
        """Refuse a ``degree`` absurd for ``n_features`` features (ValueError); the
        families define the bound."""

    @property
    def _n_jobs(self):
        """Threads asked for (``n_jobs``; None for a family without the parameter)."""
        return getattr(self, "n_jobs", None)

    # AdaGrad's sums of squared gradients start at this value (the field-aware models
    # start at 1, so that the first steps are at most eta0 per coordinate).
    _initial_accumulator = 0.0

    def _factor_width(self):
        """Entries of a feature's factor row in each block: ``n_components`` (the
        field-aware models hold a vector per field there)."""
        return self.n_components

    def _lam_width(self):
        """Entries of an output's ``lam``: ``n_components`` (the field-weighted models
        hold the weights of the pairs of fields there)."""
        return self.n_components

    @property
    def _fit_lam(self):
        """Whether the output weights lam are learned (polynomial networks)."""
        return False

    # ---- sklearn plumbing -----------------------------------------------------------

    def _expected_failed_checks(self):
        """scikit-learn's checks this estimator fails by design, with the reasons
        (:func:`polylite.estimator_checks.expected_failed_checks`)."""
        if self.solver not in solvers.STOCHASTIC:
            return {}
        return {f"check_sample_weight_equivalence_on_{kind}_data": _WEIGHTS_SCALE_STEPS
                for kind in ("dense", "sparse")}

    def _validate_X_predict(self):
        check_is_fitted(self)

    # Whether the model takes a polylite.relational.RelationalMatrix (factorization
    # machines do; polynomial networks, whose kernel does not split over the parts of a
    # row, take its to_csr()).
    _takes_relational = False

    def _prepare_X(self, X, *, reset, y=None):
        """The layout's validation of X (and y): returns (X, y) or X.  A fit's rows
        become CSR (dense ones too), a prediction's dense rows stay dense."""
        dtype = _FLOAT_DTYPES if reset else self.P_.dtype
        predicting = y is None and not reset
        out = layout_of(X).validate(self, X, NO_TARGETS if predicting else y, reset=reset,
                                    dtype=dtype, y_numeric=not self._is_classifier,
                                    accept_dense=predicting)
        if not predicting:
            self._fit_dtype = out[0].dtype
        return out

    def _validation_set(self, X_val, y_val):
        """Validate an explicit validation set like the training data."""
        if X_val is None or y_val is None:
            raise ValueError("give both X_val and y_val, or neither")
        X_val = kernels.check_X(X_val, dtype=self._fit_dtype, n_features=self.n_features_in_,
                                accept_dense=False)
        y_val = column_or_1d(check_array(y_val, ensure_2d=False, dtype=None,
                                         ensure_all_finite=not self._is_classifier),
                             warn=True)
        if y_val.shape[0] != X_val.shape[0]:
            raise ValueError(f"X_val has {X_val.shape[0]} rows but y_val has "
                             f"{y_val.shape[0]}")
        return X_val, y_val

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
            P=np.zeros((n_outputs, len(degrees), n_features, self._factor_width()), dtype),
            gamma=np.zeros((n_outputs, n_dummy, k), dtype),
            lam=np.ones((n_outputs, k), dtype),
        )

    @staticmethod
    def _output(stack, o):
        return _OutputParams(**{name: a[o] for name, a in stack.items()})

    # Models with one factor matrix and at most one dummy row (polynomial networks)
    # publish P_ without the block axis and gamma_ without the dummy axis.
    _single_block = False

    # Whether the model reports n_nonzero_weights_ (the models with solver="ftrl").
    _counts_nonzero = False

    def _check_ftrl(self):
        """FTRL's penalties and its limits (one row per step)."""
        if "ftrl" not in self._solvers:
            return
        check_number(self.l1, "l1", low=0)
        check_number(self.l2, "l2", low=0)
        if self.solver == "ftrl" and self.batch_size != 1:
            raise ValueError(f"solver='ftrl' steps one row at a time: batch_size must be "
                             f"1, got {self.batch_size}")

    def _publish(self, stack):
        """Expose the arrays of ``stack`` as the documented fitted attributes."""
        if self._counts_nonzero and "ftrl" in self._solvers:
            self.n_nonzero_weights_ = int(np.count_nonzero(stack["w"])
                                          + np.count_nonzero(stack["P"]))
        P, gamma = stack["P"], stack["gamma"]
        if self._single_block:
            P = P[:, 0]
            gamma = gamma[:, 0] if gamma.shape[1] else np.zeros(
                (P.shape[0], P.shape[-1]), P.dtype)
        if self._is_classifier:
            self.intercept_ = stack["intercept"][:, 0]
            self.w_, self.P_, self.gamma_ = stack["w"], P, gamma
        else:
            self.intercept_ = float(stack["intercept"][0, 0])
            self.w_, self.P_, self.gamma_ = stack["w"][0], P[0], gamma[0]
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
        P, gamma = lead(self.P_), lead(self.gamma_)
        if self._single_block:
            P = P[:, np.newaxis]
            gamma = (gamma[:, np.newaxis] if self._structure()[2]
                     else np.zeros((gamma.shape[0], 0, k), dtype))
        return {name: np.array(a, dtype=dtype, copy=copy or None) for name, a in
                dict(intercept=intercept, w=lead(self.w_), P=P, gamma=gamma,
                     lam=lam).items()}

    def _warm_stack(self, n_outputs, n_features, dtype):
        """A copy of the previous fit's stack to continue from, or None to start afresh."""
        if not (self.warm_start and hasattr(self, "P_")):
            return None
        stack = self._stacked(copy=True)
        _, degrees, n_dummy = self._structure()
        expected = (n_outputs, len(degrees), n_features, self._factor_width())
        if stack["P"].shape != expected or stack["gamma"].shape[1] != n_dummy:
            raise ValueError(
                f"warm_start=True but the fitted factors have shape {stack['P'].shape[1:]}, "
                f"which does not match the current parameters and data "
                f"{expected[1:]}; set warm_start=False to refit from scratch")
        return {name: a.astype(dtype, copy=False) for name, a in stack.items()}

    # ---- prediction -------------------------------------------------------------------

    def _decision(self, X):
        """Raw outputs, shape (n_samples, n_outputs), every one finite: every prediction
        method goes through here, and raises FloatingPointError where the outputs
        overflow (X far beyond the training data, or huge parameters) rather than return
        NaN or infinity."""
        kernel, degrees, _ = self._structure()
        stack = self._stacked()
        n_outputs = stack["P"].shape[0]
        out = np.empty((X.shape[0], n_outputs), dtype=stack["P"].dtype)
        for o in range(n_outputs):
            out[:, o] = self._predict_output(X, self._output(stack, o), kernel, degrees)
        return kernels.check_finite_predictions(out, self, "outputs")

    def _predict_output(self, X, params, kernel, degrees):
        return polynomial_output(X, params, kernel, degrees, fit_linear=self.fit_linear,
                                 has_lam=self._has_lam, n_jobs=self._n_jobs)

    # ---- fitting ----------------------------------------------------------------------

    def _fit_outputs(self, X, targets, sample_weight, loss, validation=None, strata=None):
        """Fit every output (column of ``targets``) by the chosen solver.

        ``validation`` is an explicit (X_val, targets_val) pair or None; with
        ``early_stopping`` and no explicit pair, ``validation_fraction`` of the data is held
        out (stratified by ``strata`` when given).
        """
        self._check_params()
        self._check_against_data(X, targets.shape[1])
        for name in ("_stochastic_states", "_partial_rng"):  # fit starts them afresh
            if hasattr(self, name):
                delattr(self, name)
        sw = _check_sample_weight(sample_weight, X, dtype=np.float64,
                                  ensure_non_negative=True)
        rng = check_random_state(self.random_state)
        if validation is None and self.early_stopping:
            X, targets, sw, validation = self._hold_out(X, targets, sw, strata, rng)
        self.solver_ = self._choose_solver(X)
        total = sw.sum()
        if not total > 0:
            raise ValueError("sample_weight must have a positive sum")
        sw = sw / total
        n, d = X.shape
        n_outputs = targets.shape[1]
        stack = self._warm_stack(n_outputs, d, X.dtype)
        if stack is None:
            stack = self._allocate(n_outputs, d, X.dtype)
            for o in range(n_outputs):
                self._init_nonlinear(self._output(stack, o), rng)
        else:
            for o in range(n_outputs):
                self._continue_from(self._output(stack, o))
        # The outputs (the classes of a one-vs-rest fit) are independent problems on the
        # same rows: they share what coordinate descent derives from X alone, and run on
        # threads of their own, the rest of n_jobs sharing each output's passes.
        workers, row_jobs = solvers.output_threads(self._n_jobs, n_outputs)
        kernel, degrees, _ = self._structure()
        if self.solver_ == "cd" or (self.solver_ == "lbfgs"
                                    and layout_of(X).stored_once):
            # (L-BFGS on relational input: its gradient from coordinate descent's sums
            # over table rows, see solvers.fit_lbfgs.)
            solver_inputs = solvers.cd_data(X, sw, kernel, row_jobs)
        elif self.solver_ == "lbfgs" and is_dense(X):
            solver_inputs = solvers.dense_rows(X, kernel, degrees)
        elif self.solver_ in solvers.STOCHASTIC:
            solver_inputs = solvers.watched_data(X)
        else:
            solver_inputs = None
        # Each output draws from a random stream of its own (the stochastic solvers'
        # shuffles), so that a fit is the same whichever thread runs which output.
        rngs = [rng] if n_outputs == 1 else [
            np.random.RandomState(seed)
            for seed in rng.randint(np.iinfo(np.int32).max, size=n_outputs)]

        def fit_output(o):
            y = np.ascontiguousarray(targets[:, o], dtype=np.float64)
            val = None if validation is None else (
                validation[0], np.ascontiguousarray(validation[1][:, o], np.float64))
            return self._fit_one_output(X, solver_inputs, y, sw, self._output(stack, o),
                                        loss, rngs[o], val, output=(o, n_outputs),
                                        n_jobs=row_jobs)

        # One BLAS thread for L-BFGS, set once for all the outputs' threads (fit_lbfgs).
        with (threadpool_limits(limits=1, user_api="blas") if self.solver_ == "lbfgs"
              else contextlib.nullcontext()):
            results = solvers.map_outputs(fit_output, n_outputs, workers)
        for _, unconverged in results:  # in the order of the outputs, whatever the threads
            if unconverged is not None:
                warnings.warn(unconverged, ConvergenceWarning)
        n_iter = [epochs for epochs, _ in results]
        self.n_iter_ = np.array(n_iter) if self._is_classifier else int(n_iter[0])
        self._publish(stack)
        return self

    def _hold_out(self, X, targets, sw, strata, rng):
        """Split off ``validation_fraction`` of the rows for early stopping."""
        from sklearn.model_selection import train_test_split
        n = X.shape[0]
        n_val = int(np.ceil(self.validation_fraction * n))
        if n_val < 1 or n - n_val < 1:
            raise ValueError(f"validation_fraction={self.validation_fraction} leaves no "
                             f"validation or no training rows out of {n}")
        try:
            parts = train_test_split(X, targets, sw, test_size=n_val, stratify=strata,
                                     random_state=rng)
        except ValueError:  # a class too small to stratify
            parts = train_test_split(X, targets, sw, test_size=n_val, random_state=rng)
        X_fit, X_val, t_fit, t_val, sw_fit, _ = parts
        return X_fit, t_fit, sw_fit, (X_val, t_val)

    def _objective(self, y, y_pred, sw, params, loss_code):
        # Not np.dot: a BLAS call would leave BLAS threads spinning beside the solver.
        # einsum sums the squares without an array of them (as large as the factors).
        def squares(a):
            flat = np.ravel(a)
            return float(np.einsum("i,i->", flat, flat, dtype=np.float64))

        factors = [params.P, params.gamma] + ([params.lam] if self._fit_lam else [])
        penalty = 0.5 * self.alpha * squares(params.w)
        penalty += 0.5 * self.beta * sum(squares(a) for a in factors)
        return _cd.weighted_loss(y, y_pred, sw, loss_code) + penalty

    def _fit_one_output(self, X, solver_inputs, y, sw, params, loss, rng, validation,
                        output=(0, 1), n_jobs=None):
        """Run the solver's epochs on one output; returns the number of epochs run and
        the text of a ConvergenceWarning to give, or None (the caller warns, so that
        outputs fitted on threads warn in their order).

        ``solver_inputs`` is what the solver derives from X once for every output:
        :func:`solvers.cd_data` for "cd" and for "lbfgs" on relational X,
        :func:`solvers.dense_rows` for "lbfgs" on dense X, :func:`solvers.watched_data`
        for the stochastic solvers, else None.  ``output`` is (index of this output, number of
        outputs); ``n_jobs`` the threads that share its rows (None: the estimator's)."""
        kernel, degrees, _ = self._structure()
        loss_code = _losses.loss_code(loss)
        prefix = "" if output[1] == 1 else f"[output {output[0]}] "
        stopper = None if validation is None else _EarlyStopping(
            self, validation, params, kernel, degrees, loss_code)
        start = time.perf_counter()

        def report(epoch, objective):
            if self._epoch_callback is not None:
                self._epoch_callback(EpochReport(
                    output[0], output[1], epoch, self._max_iter, objective,
                    stopper.last if stopper is not None else np.nan,
                    time.perf_counter() - start,
                    stopper.last_accuracy if stopper is not None else np.nan))

        solver_name = self.solver_
        if solver_name == "lbfgs":
            return self._fit_one_output_lbfgs(X, solver_inputs, y, sw, params, loss_code,
                                              kernel, degrees, stopper, prefix, start,
                                              report, n_jobs)
        if solver_name == "cd":
            solver = solvers.CoordinateDescent(self, X, solver_inputs, y, sw, params,
                                                loss_code, kernel, degrees)
        else:
            solver = solvers.StochasticGradient(
                self, X, y, sw * X.shape[0], params, loss_code, kernel, degrees, rng,
                solvers.StochasticState(params, solver_name == "adagrad",
                                        self._initial_accumulator,
                                        ftrl=solver_name == "ftrl"), n_jobs,
                watched=solver_inputs)
        # The objective after each epoch, on the watched rows: for tol, verbose and a
        # progress display.  A stochastic fit that reads none of them (tol=None, as the
        # field-aware models' default, and no early stopping) skips it, and checks the
        # predictions once at the end.
        watch = (solver_name == "cd" or self.tol is not None or bool(self.verbose)
                 or self._epoch_callback is not None or stopper is not None)
        if not watch:
            solver.check_each_pass = False
        objective = best = (self._objective(*solver.watched(y, sw), params, loss_code)
                            if watch else np.nan)
        if self.verbose:
            print(f"{prefix}epoch {0:4d}  objective {objective:.6e}")
        stalled, converged = 0, False
        for epoch in range(1, self._max_iter + 1):
            max_change = solver.epoch()
            if not watch:
                continue
            y_watched, y_pred, sw_watched = solver.watched(y, sw)
            new_objective = self._objective(y_watched, y_pred, sw_watched, params, loss_code)
            # Predictions too: the classification losses of an infinite margin on the
            # right side are 0, and the squared hinge's of NaN is 0 too (fmax).
            if not (np.isfinite(new_objective) and np.all(np.isfinite(y_pred))):
                raise FloatingPointError(
                    f"the objective or the predictions became non-finite during "
                    f"{solver_name}; scale the features, increase beta" +
                    (" or use a smaller learning rate eta0" if solver_name != "cd" else ""))
            decrease = (objective - new_objective) / max(abs(objective), 1e-300)
            objective = new_objective
            stop = stopper.update() if stopper is not None else False
            if self.verbose:
                print(f"{prefix}epoch {epoch:4d}  objective {objective:.6e}  "
                      f"rel. decrease {decrease:.2e}  max change {max_change:.2e}" +
                      (f"  validation loss {stopper.last:.6e}" if stopper else "") +
                      f"  {time.perf_counter() - start:.2f}s")
            report(epoch, objective)
            if stop:
                stopper.restore()
                return epoch, None
            if solver_name == "cd":
                if decrease < self.tol or max_change < self.tol:
                    converged = True
                    break
            elif self.tol is not None:  # (None: max_iter epochs, a stochastic solver's)
                # Stochastic: stop after n_iter_no_change epochs without an improvement
                # of the objective by tol (relative), as scikit-learn's SGD estimators do.
                if objective > best - self.tol * abs(best):
                    stalled += 1
                else:
                    stalled = 0
                best = min(best, objective)
                if stalled >= self.n_iter_no_change:
                    converged = True
                    break
        if not watch:
            solver.check_predictions()
        if stopper is not None:
            stopper.restore()
        elif loss_code == _SQUARED:
            y_watched, y_pred, sw_watched = solver.watched(y, sw)
            # The rows the objective watched (all for CD, the sample of the stochastic
            # solvers), with the final model.
            kernels.check_fitted_scale(self, X, y_watched, y_pred, sw_watched)
        if converged or self.tol is None:
            return epoch, None
        # On dense data coordinate descent's passes are as long as L-BFGS's gradient, and
        # it needs many more of them (benchmarks/bench_classification.py --speed).
        return self._max_iter, (
            f"{type(self).__name__}: {solver_name} did not converge in "
            f"max_iter={self._max_iter} epochs (last relative decrease {decrease:.2e}, "
            f"tol={self.tol}); increase max_iter or tol" +
            ("; on dense data, solver='lbfgs' (or 'auto') usually converges in less time"
             if solver_name == "cd" and is_dense(X) else ""))

    def _fit_one_output_lbfgs(self, X, inputs, y, sw, params, loss_code, kernel, degrees,
                              stopper, prefix, start, report, n_jobs):
        def callback(objective):
            stop = stopper.update() if stopper is not None else False
            if self.verbose:
                print(f"{prefix}iteration {counter[0]:4d}  objective {objective:.6e}" +
                      (f"  validation loss {stopper.last:.6e}" if stopper else "") +
                      f"  {time.perf_counter() - start:.2f}s")
            report(counter[0], objective)
            counter[0] += 1
            return stop

        counter = [1]
        n_iter, result = solvers.fit_lbfgs(self, X, y, sw, params, loss_code, kernel,
                                            degrees, callback, n_jobs=n_jobs,
                                            X_dense=inputs if isinstance(inputs, np.ndarray)
                                            else None,
                                            cd_data=inputs if isinstance(inputs, solvers.CDData)
                                            else None)
        stopped_early = stopper is not None and stopper.stopped
        if stopper is not None:
            if not stopped_early:
                stopper.update()
            stopper.restore()
        # The objective L-BFGS saw was finite, but that of a classifier can be with
        # infinite (or, squared hinge, NaN) predictions.
        y_pred = self._predict_output(X, params, kernel, degrees)
        if not np.all(np.isfinite(y_pred)):
            raise FloatingPointError("L-BFGS ended with non-finite predictions; scale the "
                                     "features or increase beta")
        if loss_code == _SQUARED:
            kernels.check_fitted_scale(self, X, y, y_pred, sw)
        if stopped_early:
            return n_iter, None
        # L-BFGS-B's own test (the objective stalls) also passes where it cannot progress
        # at all, as on features of scale 1e10 and more: a model worse than all zeros is
        # not converged either.
        zero_objective = _cd.weighted_loss(y, np.zeros_like(y), sw, loss_code)
        if result.status == 1:
            problem = f"did not converge in max_iter={self._max_iter} iterations; " \
                      f"increase max_iter"
        elif result.status != 0:
            problem = f"stopped without converging ({result.message})"
        elif result.fun > zero_objective:
            problem = (f"stopped at an objective of {result.fun:.6g}, above the "
                       f"{zero_objective:.6g} of the all-zero model, without converging")
        else:
            return n_iter, None
        if result.status != 1:
            problem += "; scale the features or increase beta"
        return n_iter, f"{type(self).__name__}: L-BFGS {problem}"

    def _partial_fit_outputs(self, X, targets, sample_weight, loss):
        """One pass of the stochastic solver over a chunk, continuing the current model.

        The first call on an unfitted estimator initialises the model; on a fitted one
        (by ``fit``, ``partial_fit`` or :func:`polylite.load`) it continues from the fitted
        parameters.  The learning-rate schedule and AdaGrad's statistics carry over between
        ``partial_fit`` calls (``fit`` starts them afresh).  The pass works on a copy of
        the parameters: if it diverges, the model from before the call is kept (and the
        solver's statistics restart), or the estimator stays unfitted on a first call.
        Models with a row penalty (``_row_penalty``: the passes step only on the
        parameters of the chunk's features, and on the intercept) copy only those: the
        pass steps on the fitted arrays, and a divergence puts the copied rows back, so
        that a chunk costs the memory and time of its features, not of the whole model.
        """
        self._check_params()
        sw = _check_sample_weight(sample_weight, X, dtype=np.float64,
                                  ensure_non_negative=True)
        n_outputs = targets.shape[1]
        if not self.__sklearn_is_fitted__():
            self._check_against_data(X, n_outputs)
            self._partial_rng = check_random_state(self.random_state)
            stack = self._allocate(n_outputs, X.shape[1], X.dtype)
            for o in range(n_outputs):
                self._init_nonlinear(self._output(stack, o), self._partial_rng)
            self.n_iter_ = np.zeros(n_outputs, int) if self._is_classifier else 0
        else:
            stack = self._stacked(copy=not self._row_penalty)
            saved = (_chunk_rows(stack, X) if self._row_penalty
                     and self._undo_diverged_chunk else None)
            if not hasattr(self, "_partial_rng"):
                self._partial_rng = check_random_state(self.random_state)
        states = getattr(self, "_stochastic_states", None)
        adagrad, ftrl = self.solver == "adagrad", self.solver == "ftrl"
        if (states is None or len(states) != n_outputs or
                any(st.adagrad != adagrad or st.ftrl != ftrl or st.last_touch.shape[0] != (
                    X.shape[1] if adagrad or ftrl else 0) for st in states)):
            states = [solvers.StochasticState(self._output(stack, o), adagrad,
                                              self._initial_accumulator, ftrl=ftrl)
                      for o in range(n_outputs)]
        kernel, degrees, _ = self._structure()
        loss_code = _losses.loss_code(loss)
        watched = solvers.watched_data(X)  # the rows of the pass's divergence check
        try:
            for o in range(n_outputs):
                y = np.ascontiguousarray(targets[:, o], dtype=np.float64)
                solvers.StochasticGradient(
                    self, X, y, sw, self._output(stack, o), loss_code, kernel, degrees,
                    self._partial_rng, states[o], watched=watched).epoch()
        except FloatingPointError as exc:
            self.__dict__.pop("_stochastic_states", None)
            if self.__sklearn_is_fitted__() and self._row_penalty:
                if saved is None:  # stepped in place, nothing kept to undo the chunk
                    self._reset_fitted()
                    raise FloatingPointError(f"{exc}; the estimator was stepped in place "
                                             f"and is now unfitted") from None
                _restore_chunk_rows(stack, saved)
            if not self.__sklearn_is_fitted__():
                self._reset_fitted()
                raise FloatingPointError(f"{exc}; the estimator stays unfitted") from None
            raise FloatingPointError(f"{exc}; the model from before this call is "
                                     f"kept") from None
        self._stochastic_states = states
        self.n_iter_ = self.n_iter_ + 1
        self.solver_ = self.solver
        self._publish(stack)
        return self

    # ---- save / load (polylite._io) ----------------------------------------------------

    def _model_arrays(self):
        """The fitted arrays as a stack with a leading axis over the outputs."""
        stack = self._stacked()
        arrays = {name: stack[name] for name in ("intercept", "w", "P", "gamma")}
        if self._has_lam:
            arrays["lam"] = stack["lam"]
        arrays["n_iter"] = np.atleast_1d(np.asarray(self.n_iter_, dtype=np.int64))
        return arrays, {"solver": self.solver_}

    def _restore_model(self, arrays, attributes):
        """Check the arrays of :meth:`_model_arrays` against the parameters, install them."""
        names = {"intercept", "w", "P", "gamma", "n_iter"} | (
            {"lam"} if self._has_lam else set())
        check_array_names(arrays, names, owner=type(self).__name__)
        P = arrays["P"]
        if P.ndim != 4:
            raise ModelFileError(f"array 'P' has shape {P.shape}; expected 4 dimensions "
                                 f"(outputs, blocks, features, components)")
        n_out, d = P.shape[0], self.n_features_in_
        if self._is_classifier:
            n_classes = self.classes_.shape[0]
            if n_out != (1 if n_classes == 2 else n_classes):
                raise ModelFileError(f"model file has {n_out} outputs for {n_classes} "
                                     f"classes")
        elif n_out != 1:
            raise ModelFileError(f"a regressor has 1 output, model file has {n_out}")
        # The bounds of fit (the degree, the memory) before the degree sizes anything.
        self._check_model_size(d, n_out, P.dtype.itemsize)
        _, degrees, n_dummy = self._structure()
        k = self.n_components
        expected = {"intercept": (n_out, 1), "w": (n_out, d),
                    "P": (n_out, len(degrees), d, self._factor_width()),
                    "gamma": (n_out, n_dummy, self._factor_width())}
        if self._has_lam:
            expected["lam"] = (n_out, self._lam_width())
        check_float_arrays(arrays, expected, P.dtype)
        n_iter = arrays["n_iter"]
        if n_iter.shape != (n_out,):
            raise ModelFileError(f"array 'n_iter' has shape {n_iter.shape}; the model's "
                                 f"parameters require {(n_out,)}")
        if n_iter.dtype.kind not in "iu" or np.any(n_iter < 0):
            raise ModelFileError(f"array 'n_iter' must hold non-negative integers, got "
                                 f"dtype {n_iter.dtype}")
        stack = {key: np.array(arrays[key]) for key in ("intercept", "w", "P", "gamma")}
        if self._has_lam:  # (the FMs' output weights are ones, neither stored nor needed)
            stack["lam"] = np.array(arrays["lam"])
        self.n_iter_ = n_iter.copy() if self._is_classifier else int(n_iter[0])
        self.solver_ = self._restored_solver(attributes)
        self._publish(stack)

    def _restored_solver(self, attributes):
        """``solver_`` of a model file: its "solver" attribute; files written before
        ``solver="auto"`` existed have none, and their ``solver`` parameter is the one
        that ran."""
        solver = attributes.get("solver", self.solver)
        ran = [name for name in self._solvers if name != "auto"]
        if solver not in ran:
            raise ModelFileError(f"model file has no valid solver (got {solver!r}); "
                                 f"expected one of {ran}")
        return solver


def _chunk_rows(stack, X):
    """(columns of the CSR chunk X, copies of the linear weights and factor rows of those
    columns, copies of every other array of ``stack``): what a pass over X with a row
    penalty may change."""
    d = stack["w"].shape[1]
    columns = np.flatnonzero(np.bincount(X.indices, minlength=d))  # (sorted, distinct)
    if 2 * columns.shape[0] > d:  # most of them: one contiguous copy is quicker
        columns = slice(None)
        return (columns, stack["w"].copy(), stack["P"].copy(),
                {name: a.copy() for name, a in stack.items() if name not in ("w", "P")})
    # (indexing by an array copies)
    return (columns, stack["w"][:, columns], stack["P"][:, :, columns],
            {name: a.copy() for name, a in stack.items() if name not in ("w", "P")})


def _restore_chunk_rows(stack, saved):
    """Put back what :func:`_chunk_rows` saved."""
    columns, w, P, rest = saved
    stack["w"][:, columns] = w
    stack["P"][:, :, columns] = P
    for name, a in rest.items():
        stack[name][...] = a


class _EarlyStopping:
    """Validation loss after each epoch; keeps a copy of the best parameters."""

    def __init__(self, est, validation, params, kernel, degrees, loss_code):
        self.est, self.params, self.kernel, self.degrees = est, params, kernel, degrees
        self.X_val, self.y_val = validation
        self.loss_code = loss_code
        self.sw_val = np.full(self.X_val.shape[0], 1.0 / max(self.X_val.shape[0], 1))
        self.best = np.inf
        self.best_params = None
        self.stalled = 0
        self.stopped = False
        self.last = self.last_accuracy = np.nan

    def update(self):
        """Score the current parameters (the loss; a classifier's accuracy too, which
        progress displays report); True when it is time to stop."""
        pred = self.est._predict_output(self.X_val, self.params, self.kernel,
                                        self.degrees).astype(np.float64)
        self.last = _cd.weighted_loss(self.y_val, pred, self.sw_val, self.loss_code)
        if self.est._is_classifier:  # the targets of an output are +-1
            self.last_accuracy = float(np.mean((pred > 0) == (self.y_val > 0)))
        if self.last < self.best - (self.est.tol or 0) * abs(self.best) or self.best_params is None:
            self.best = min(self.best, self.last)
            self.best_params = {name: np.array(getattr(self.params, name))
                                for name in ("intercept", "w", "P", "gamma", "lam")}
            self.stalled = 0
        else:
            self.stalled += 1
        self.stopped = self.stalled >= self.est.n_iter_no_change
        return self.stopped

    def restore(self):
        """Put the best parameters seen back in place."""
        if self.best_params is not None:
            for name, value in self.best_params.items():
                getattr(self.params, name)[...] = value
