"""Dask estimators: polylite's factorization machines fitted on row blocks held by workers.

The client keeps the model; the workers keep the data.  Functions named ``_block_*`` run
on the workers (module-level, so they travel by reference), one call per row block, and
return sums: each worker adds those of the blocks it holds, and the client adds the
workers' sums, so a worker sends one sum per step whatever its number of blocks.
"""
import contextlib
import functools
import time
import warnings
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted

try:
    import dask
    import dask.array as da
except ImportError as exc:  # pragma: no cover - the extra is not installed
    raise ImportError("polylite.dask needs Dask: pip install 'polylite[dask]'") from exc

from .. import kernels
from .. import polynomial as _local
from .._io import load as _load_local
from .._engine import _cd, _losses, solvers
from ..polynomial import ffm, fm, fwfm
from ..polynomial._base import _OutputParams

__all__ = ["FactorizationMachineRegressor", "FactorizationMachineClassifier",
           "FieldAwareFactorizationMachineRegressor",
           "FieldAwareFactorizationMachineClassifier",
           "FieldWeightedFactorizationMachineRegressor",
           "FieldWeightedFactorizationMachineClassifier", "load"]

PARAM_NAMES = ("intercept", "w", "P", "gamma", "lam")
DASK_SOLVERS = ("auto", "lbfgs", "adagrad")


class _Job(NamedTuple):
    """What a worker needs to compute on a block for one output of the model."""
    est: object        # an unfitted in-memory estimator with the same parameters
    output: int        # which output (one-vs-rest column; 0 for regression)
    classes: object    # ndarray of the classes (classifiers) or None
    loss_code: int
    kernel: str
    degrees: tuple
    row_weight: float  # 1 / rows of the whole data set: the objective is a mean


# ------------------------------------------------------------------ on the workers

def _block_prepare(X, y, index, classifier, unit_rows=False):
    """Check one row block and return it as (canonical CSR X, y); with ``unit_rows``,
    each row scaled to unit norm (the field-aware models' ``normalize``)."""
    if not (sp.issparse(X) and X.format == "csr"):
        kind = f"scipy.sparse {X.format.upper()}" if sp.issparse(X) else type(X).__name__
        raise TypeError(f"row block {index} of X is a {kind}; polylite.dask needs each "
                        f"chunk of X to be a scipy.sparse CSR matrix")
    y = np.asarray(y)
    if y.ndim != 1 or y.shape[0] != X.shape[0]:
        raise ValueError(f"row block {index}: X has {X.shape[0]} rows but the matching "
                         f"chunk of y has shape {y.shape}; chunk y like the rows of X")
    X = kernels.check_X(X, accept_dense=False)
    if unit_rows:
        from sklearn.preprocessing import normalize
        X = normalize(X, norm="l2", copy=True)
    if not classifier:
        y = y.astype(np.float64)
        if not np.all(np.isfinite(y)):
            raise ValueError(f"row block {index}: y contains NaN or infinity")
    elif _missing_labels(y):
        # np.unique would make NaN a class of its own; the in-memory estimators refuse it.
        raise ValueError(f"row block {index}: y contains NaN, None or infinity; every "
                         f"row needs a class label (drop the rows without one)")
    return X, y


def _missing_labels(y):
    """Whether the labels ``y`` (1-D) hold NaN or infinity (float), or None or NaN
    (object)."""
    if y.dtype.kind in "fc":
        return not np.all(np.isfinite(y))
    if y.dtype.kind == "O":
        return any(label is None or (isinstance(label, float) and not np.isfinite(label))
                   for label in y)
    return False


def _block_info(block, classifier):
    X, y = block
    return X.shape, X.dtype.str, (np.unique(y) if classifier else None)


def _block_targets(y, job):
    """The targets of ``job.output``: y itself, or +-1 one-vs-rest labels."""
    if job.classes is None:
        return y
    codes = np.searchsorted(job.classes, y)
    positive = 1 if job.classes.shape[0] == 2 else job.output
    return np.where(codes == positive, 1.0, -1.0)


def _params(model, copy):
    return _OutputParams(**{name: np.array(model[name], copy=copy or None)
                            for name in PARAM_NAMES})


def _block_value_gradient(block, model, job):
    """The block's share of the objective's data term and of its gradient."""
    X, y = block
    params = _params(model, copy=False)
    grads = {name: np.zeros(model[name].shape, np.float64) for name in PARAM_NAMES}
    value = solvers.data_gradient(job.est, X, _block_targets(y, job),
                                   np.full(X.shape[0], job.row_weight), params,
                                   job.loss_code, job.kernel, job.degrees, grads)
    return value, grads


def _block_loss(block, model, job):
    """The block's share of the objective's data term."""
    X, y = block
    pred = job.est._predict_output(X, _params(model, copy=False), job.kernel,
                                   list(job.degrees)).astype(np.float64)
    return _cd.weighted_loss(_block_targets(y, job), pred,
                             np.full(X.shape[0], job.row_weight), job.loss_code)


def _block_adagrad_epoch(block, model, state, seed, job):
    """One local AdaGrad epoch from ``model``; returns (parameters times the block's rows,
    the block's AdaGrad statistics for its next epoch)."""
    X, y = block
    params = _params(model, copy=True)
    if state is None:
        state = solvers.StochasticState(params, adagrad=True,
                                        initial_accumulator=job.est._initial_accumulator)
    solvers.StochasticGradient(job.est, X, _block_targets(y, job), np.ones(X.shape[0]),
                                params, job.loss_code, job.kernel, list(job.degrees),
                                np.random.RandomState(seed), state).epoch()
    rows = float(X.shape[0])
    return {name: getattr(params, name).astype(np.float64) * rows
            for name in PARAM_NAMES}, state


def _add(a, b):
    """Sum of two values, tuples or dicts of arrays (the same structure)."""
    if isinstance(a, dict):
        return {key: a[key] + b[key] for key in a}
    if isinstance(a, tuple):
        return tuple(_add(x, z) for x, z in zip(a, b))
    return a + b


def _predict_block(X, est, method):
    return getattr(est, method)(X)


# ------------------------------------------------------------------ on the client

def _tree_sum(parts):
    """A delayed sum of delayed values, added pairwise on the workers."""
    parts = list(parts)
    while len(parts) > 1:
        parts = [dask.delayed(_add)(parts[i], parts[i + 1]) if i + 1 < len(parts)
                 else parts[i] for i in range(0, len(parts), 2)]
    return parts[0]


def _sum_by_worker(client, blocks, block_value):
    """The sum over the persisted ``blocks`` of ``block_value(i)`` (a delayed value of
    block i): each block's value is computed, and added to those of the other blocks
    the same worker holds (a tree, in block order), on that worker; the client adds the
    workers' sums (in the order of their first blocks).  So each worker sends one value,
    of the size of the model, whatever its number of blocks, and no block moves (even
    where the model is larger than a block).  The order of the additions, and so the
    rounding, follows the blocks' placement.  A block lost since is recomputed where
    the scheduler chooses, as usual."""
    if client is None:
        return _compute(None, _tree_sum(block_value(i) for i in range(len(blocks))))[0]
    where = client.who_has(blocks)
    groups = {}
    for i, block in enumerate(blocks):
        workers = sorted(where.get(block.key, ()))
        groups.setdefault(workers[0] if workers else None, []).append(i)
    sums = []
    for worker, group in groups.items():
        placed = (contextlib.nullcontext() if worker is None else
                  dask.annotate(workers=[worker], allow_other_workers=True))
        with placed:
            sums.append(_tree_sum(block_value(i) for i in group))
    return functools.reduce(_add, _compute(client, *sums))


def _default_client():
    """The ``distributed.Client`` Dask's default scheduler runs on, or None."""
    try:
        from distributed import default_client
        client = default_client()
    except (ImportError, ValueError):  # no distributed, or no client
        return None
    return client if dask.base.get_scheduler() == client.get else None


def _compute(client, *objs):
    if client is not None:
        return tuple(client.compute(list(objs), sync=True))
    return dask.compute(*objs)


def _persist(client, objs):
    if client is not None:
        return list(client.persist(list(objs)))
    return list(dask.persist(*objs))


def _model(params):
    """The parameters as one delayed value: sent to the cluster once per step."""
    return dask.delayed({name: np.array(getattr(params, name)) for name in PARAM_NAMES},
                        traverse=False)


class _DaskMixin:
    """fit on Dask arrays, prediction by ``map_blocks``, conversion to the in-memory model.

    Subclasses put this mixin before the in-memory estimator class (``_local_class``).
    """

    def fit(self, X, y, *, client=None):
        """Fit on a Dask array of CSR row blocks, the data staying on the workers.

        Parameters
        ----------
        X : dask.array.Array of shape (n_samples, n_features)
            Chunks are row blocks (one chunk across the columns), each a
            ``scipy.sparse`` CSR matrix of float32 or float64 values (for example made by
            ``da.from_delayed`` per block and ``da.concatenate``).
        y : dask.array.Array of shape (n_samples,)
            Targets (labels for classifiers), chunked like the rows of ``X``.
        client : dask.distributed.Client or None, default=None
            The cluster to run on; None: Dask's default scheduler (the most recently
            created ``Client``, else Dask's local threads).

        Returns
        -------
        self : object
        """
        if not isinstance(X, da.Array) or not isinstance(y, da.Array):
            raise TypeError(
                f"polylite.dask's {type(self).__name__}.fit takes Dask arrays X and y, got "
                f"{type(X).__name__} and {type(y).__name__}; for data in memory use "
                f"polylite.{type(self).__name__}")
        with self._fitting():
            return self._fit_dask(X, y, _default_client() if client is None else client)

    # The solvers polylite.dask runs for the model.
    _dask_solvers = DASK_SOLVERS

    def _fit_dask(self, X, y, client):
        self._check_params()
        if self.solver not in self._dask_solvers:
            raise ValueError(
                f"polylite.dask fits with solver 'lbfgs' or 'adagrad' ('auto' is "
                f"'lbfgs'), got solver={self.solver!r}" if len(self._dask_solvers) > 1
                else f"polylite.dask fits {type(self).__name__} with solver "
                     f"{self._dask_solvers[0]!r}, got solver={self.solver!r}")
        # No coordinate descent here: "auto" (the in-memory default) means L-BFGS.
        solver = "lbfgs" if self.solver == "auto" else self.solver
        if self.early_stopping:
            raise ValueError("early_stopping=True is not supported by polylite.dask")
        blocks, n_rows, n_features, dtype, labels = self._persist_blocks(X, y, client)
        targets_classes = None
        if self._is_classifier:
            classes = np.unique(np.concatenate(labels))
            check_classification_targets(classes)  # as in memory: no continuous labels
            if classes.shape[0] < 2:
                raise ValueError(f"the classifier needs samples of at least two classes; "
                                 f"got one class: {classes[0]!r}")
            if self.warm_start and hasattr(self, "classes_") and not np.array_equal(
                    self.classes_, classes):
                raise ValueError("warm_start=True but y has different classes from the "
                                 "previous fit")
            self.classes_ = targets_classes = classes
        n_classes = 0 if targets_classes is None else targets_classes.shape[0]
        n_outputs = n_classes if n_classes > 2 else 1  # one-vs-rest beyond two classes
        # The model's checks of the data's shape (the field-aware models: their fields).
        self._check_against_data(sp.csr_matrix((0, n_features), dtype=dtype), n_outputs)
        # The in-memory fit's initialisation: the same random draws in the same order.
        rng = check_random_state(self.random_state)
        stack = self._warm_stack(n_outputs, n_features, dtype)
        if stack is None:
            stack = self._allocate(n_outputs, n_features, dtype)
            for o in range(n_outputs):
                self._init_nonlinear(self._output(stack, o), rng)
        else:
            for o in range(n_outputs):
                self._continue_from(self._output(stack, o))
        kernel, degrees, _ = self._structure()
        local = self._local_class(**dict(self.get_params(), solver=solver))
        for name in ("fields_", "n_fields_"):  # what the passes read of the fields
            if hasattr(self, name):
                setattr(local, name, getattr(self, name))
        loss_code = _losses.loss_code(self.loss if self._is_classifier else "squared")
        n_iter, self.objective_history_ = [], []
        for o in range(n_outputs):
            history = []  # filled as the fit goes: another thread may watch it
            self.objective_history_.append(history)
            job = _Job(local, o, targets_classes, loss_code, kernel, tuple(degrees),
                       1.0 / n_rows)
            prefix = "" if n_outputs == 1 else f"[output {o}] "
            fit_output = self._fit_lbfgs if solver == "lbfgs" else self._fit_adagrad
            n_iter.append(fit_output(blocks, self._output(stack, o), job, rng, client,
                                     prefix, history))
        self.n_features_in_ = n_features
        self.n_iter_ = np.array(n_iter) if self._is_classifier else int(n_iter[0])
        self.solver_ = solver
        self._publish(stack)
        return self

    def _persist_blocks(self, X, y, client):
        """Check the blocks and keep them on the workers; returns (the persisted delayed
        (X, y) blocks, rows, columns, dtype, each block's labels for classifiers)."""
        if X.ndim != 2 or y.ndim != 1:
            raise ValueError(f"X must be 2-D and y 1-D, got {X.ndim}-D and {y.ndim}-D")
        if X.numblocks[1] != 1:
            raise ValueError(f"X has {X.numblocks[1]} chunks across its columns; "
                             f"polylite.dask needs row blocks holding every column "
                             f"(rechunk with X.rechunk({{1: -1}}))")
        if X.numblocks[0] != y.numblocks[0]:
            raise ValueError(f"X has {X.numblocks[0]} row blocks but y has "
                             f"{y.numblocks[0]} chunks; chunk y like the rows of X")
        classifier = self._is_classifier
        unit_rows = bool(getattr(self, "normalize", False))
        blocks = _persist(client, [
            dask.delayed(_block_prepare)(xb, yb, i, classifier, unit_rows)
            for i, (xb, yb) in enumerate(zip(X.to_delayed().ravel(), y.to_delayed()))])
        info = _compute(client, *[dask.delayed(_block_info)(b, classifier)
                                  for b in blocks])
        shapes = [shape for shape, _, _ in info]
        columns = {shape[1] for shape in shapes}
        if len(columns) != 1:
            raise ValueError(f"the row blocks of X have different numbers of columns: "
                             f"{sorted(columns)}")
        dtypes = {dtype for _, dtype, _ in info}
        if len(dtypes) != 1:
            raise ValueError(f"the row blocks of X have different dtypes: "
                             f"{sorted(np.dtype(d).name for d in dtypes)}")
        n_rows = sum(shape[0] for shape in shapes)
        if n_rows == 0:
            raise ValueError("X has no rows")
        return (blocks, n_rows, columns.pop(), np.dtype(dtypes.pop()),
                [labels for _, _, labels in info])

    def _fit_lbfgs(self, blocks, params, job, rng, client, prefix, history):
        """L-BFGS-B on the client, the data term summed over the blocks on the workers;
        returns the iterations run and appends each one's objective to ``history``."""
        start = time.perf_counter()

        def data_term(params, grads):
            model = _model(params)
            value, block_grads = _sum_by_worker(
                client, blocks,
                lambda i: dask.delayed(_block_value_gradient)(blocks[i], model, job))
            for name in PARAM_NAMES:
                grads[name] += block_grads[name]
            return value

        def callback(objective):
            history.append(objective)
            if self.verbose:
                print(f"{prefix}iteration {len(history):4d}  objective {objective:.6e}  "
                      f"{time.perf_counter() - start:.2f}s")
            return False

        n_iter, result = solvers.fit_lbfgs(self, None, None, None, params, job.loss_code,
                                            job.kernel, list(job.degrees), callback,
                                            data_term=data_term)
        if result.status == 1:
            warnings.warn(f"{type(self).__name__}: L-BFGS did not converge in "
                          f"max_iter={self._max_iter} iterations; increase max_iter",
                          ConvergenceWarning)
        return n_iter

    def _objective_dask(self, blocks, params, job, client):
        model = _model(params)
        data = _sum_by_worker(client, blocks,
                              lambda i: dask.delayed(_block_loss)(blocks[i], model, job))
        empty = np.zeros(0)
        return data + self._objective(empty, empty, empty, params, job.loss_code)

    def _fit_adagrad(self, blocks, params, job, rng, client, prefix, history):
        """Epochs of local AdaGrad on every block, averaged on the client by rows;
        returns the epochs run and appends each one's objective to ``history``."""
        start = time.perf_counter()
        objective = best = self._objective_dask(blocks, params, job, client)
        history.append(objective)
        stalled, states = 0, [None] * len(blocks)
        for epoch in range(1, self._max_iter + 1):
            model = _model(params)
            seeds = rng.randint(2**31, size=len(blocks))
            results = _persist(client, [
                dask.delayed(_block_adagrad_epoch)(b, model, st, seed, job)
                for b, st, seed in zip(blocks, states, seeds)])
            states = [result[1] for result in results]
            # each block's epoch ran where the block is
            total = _sum_by_worker(client, blocks, lambda i: results[i][0])
            for name in PARAM_NAMES:
                getattr(params, name)[...] = total[name] * job.row_weight
            if not all(np.all(np.isfinite(getattr(params, name))) for name in PARAM_NAMES):
                raise FloatingPointError(
                    "adagrad diverged: the averaged parameters became non-finite; use a "
                    "smaller learning rate eta0, a larger beta, or scale the features")
            objective = self._objective_dask(blocks, params, job, client)
            history.append(objective)
            if self.verbose:
                print(f"{prefix}epoch {epoch:4d}  objective {objective:.6e}  "
                      f"{time.perf_counter() - start:.2f}s")
            # As the in-memory stochastic solvers: stop after n_iter_no_change epochs
            # without an improvement of the objective by tol (relative); tol None:
            # max_iter epochs.
            if self.tol is None:
                continue
            stalled = stalled + 1 if objective > best - self.tol * abs(best) else 0
            best = min(best, objective)
            if stalled >= self.n_iter_no_change:
                return epoch
        if self.tol is None:
            return self._max_iter
        warnings.warn(f"{type(self).__name__}: adagrad did not converge in "
                      f"max_iter={self._max_iter} epochs; increase max_iter or tol",
                      ConvergenceWarning)
        return self._max_iter

    # ---- prediction, conversion, files -------------------------------------------------

    def _map_rows(self, X, method):
        """``method`` of the in-memory model on every row block of ``X``, lazily."""
        check_is_fitted(self)
        if X.ndim != 2 or X.numblocks[1] != 1:
            raise ValueError("X must be a 2-D Dask array of row blocks holding every "
                             "column (rechunk with X.rechunk({1: -1}))")
        local = self.to_local()
        meta = getattr(local, method)(sp.csr_matrix((1, self.n_features_in_),
                                                    dtype=self.P_.dtype))[:0]
        if meta.ndim == 1:
            return X.map_blocks(_predict_block, local, method, drop_axis=1,
                                dtype=meta.dtype, meta=meta)
        return X.map_blocks(_predict_block, local, method, dtype=meta.dtype, meta=meta,
                            chunks=(X.chunks[0], (meta.shape[1],)))

    def predict(self, X):
        """Predictions of a Dask array of row blocks, as a lazy Dask array.

        Parameters
        ----------
        X : dask.array.Array of shape (n_samples, n_features), or in-memory data
            Row blocks (any format polylite's estimators accept).  In-memory data is
            predicted at once, as by the in-memory estimator.

        Returns
        -------
        y : dask.array.Array of shape (n_samples,) (``.compute()`` gives the NumPy
            predictions), or ndarray for in-memory X
        """
        if not isinstance(X, da.Array):
            return super().predict(X)
        return self._map_rows(X, "predict")

    def to_local(self):
        """The fitted model as polylite's in-memory estimator (same parameters and
        fitted arrays, shared, not copied).

        Returns
        -------
        estimator : polylite.FactorizationMachineRegressor or ...Classifier
        """
        check_is_fitted(self)
        local = self._local_class(**self.get_params())
        for name, value in vars(self).items():
            if (name.endswith("_") and not name.startswith("__")
                    and name != "objective_history_"):
                setattr(local, name, value)
        return local

    @classmethod
    def from_local(cls, estimator):
        """The Dask estimator of a fitted in-memory one (for example read by
        :func:`polylite.load`): same parameters and fitted arrays.

        Parameters
        ----------
        estimator : polylite.FactorizationMachineRegressor or ...Classifier

        Returns
        -------
        estimator : the matching polylite.dask estimator
        """
        if type(estimator) is not cls._local_class:
            raise TypeError(f"{cls.__name__}.from_local takes a "
                            f"polylite.{cls._local_class.__name__}, got "
                            f"{type(estimator).__name__}")
        check_is_fitted(estimator)
        est = cls(**estimator.get_params())
        for name, value in vars(estimator).items():
            if name.endswith("_") and not name.startswith("__"):
                setattr(est, name, value)
        return est

    def save(self, path):
        """Save the fitted model in polylite's file format (that of the in-memory
        estimator: :func:`polylite.load` reads it as one, :func:`load` as this class).

        Parameters
        ----------
        path : str or path-like
        """
        self.to_local().save(path)


def _docstring(summary, local_class, loss_doc="", objective=fm._FM_OBJECTIVE_DOC,
               params=fm._FM_PARAMS_DOC, solver_doc=None):
    """The class docstring: the in-memory estimator's parameters (the solver's entry
    replaced), polylite.dask's notes and the extra attribute."""
    start, end = params.index("    solver :"), params.index("    learning_rate :")
    params = params[:start] + (solver_doc or _SOLVER_DOC) + params[end:]
    return (summary + _FIT_NOTE + objective + params + loss_doc + f"""
    Attributes
    ----------
    objective_history_ : list of list of float, one list per output
        The objective after every iteration ("lbfgs") or epoch ("adagrad", from the
        initial model on), appended as the fit goes (progress can be watched from
        another thread).

    Other fitted attributes are those of :class:`polylite.{local_class.__name__}`.
""")


_FIT_NOTE = """
    ``fit`` takes Dask arrays whose chunks are CSR row blocks and keeps the blocks on the
    workers: only the parameters and their gradients travel.  ``predict`` returns a lazy
    Dask array; :meth:`to_local` gives the in-memory estimator, and the model files are
    those of the in-memory estimators.  ``n_jobs`` is the threads of each block's pass on
    its worker; ``early_stopping`` is not supported.
"""

_SOLVER_DOC = """    solver : {"lbfgs", "adagrad", "auto"}, default="lbfgs"
        "lbfgs": SciPy's L-BFGS-B on the client, each iteration's value and gradient
        summed over the row blocks on the workers: the same fit as the in-memory
        estimator's "lbfgs" on the concatenated rows, up to the rounding of the sums.
        "adagrad": every epoch, each block runs a local AdaGrad epoch from the current
        model (its AdaGrad statistics stay on its worker from one epoch to the next), and
        the client averages the blocks' parameters weighted by their rows.
        "auto" (the in-memory estimators' default, kept by :meth:`from_local`): "lbfgs".
"""


class FactorizationMachineRegressor(_DaskMixin, _local.FactorizationMachineRegressor):
    _local_class = _local.FactorizationMachineRegressor
    __doc__ = _docstring("Factorization machine regressor fitted on a Dask cluster.\n",
                         _local.FactorizationMachineRegressor)

    def __init__(self, degree=2, n_components=8, *, lower_degrees="separate",
                 kernel="anova", fit_linear=True, fit_intercept=True, alpha=1e-4,
                 beta=1e-4, init_scale=0.1, max_iter=100, tol=1e-5, solver="lbfgs",
                 learning_rate="invscaling", eta0=None, power_t=0.25, l1=0.0, l2=0.0,
                 batch_size=1, shuffle=True, early_stopping=False, validation_fraction=0.1,
                 n_iter_no_change=5, warm_start=False, random_state=None, verbose=0,
                 n_jobs=None):
        super().__init__(**{k: v for k, v in locals().items()
                            if k not in ("self", "__class__")})


_CLASSIFIER_LOSS_DOC = """    loss : {"logistic", "squared_hinge"}, default="logistic"
        Loss on labels in {-1, +1}; ``predict_proba`` needs "logistic".
"""


class _DaskClassifierMixin:
    """The classifiers' prediction methods on Dask arrays."""

    def decision_function(self, X):
        """Raw model outputs.

        Parameters
        ----------
        X : dask.array.Array of shape (n_samples, n_features), or in-memory data

        Returns
        -------
        scores : dask.array.Array (ndarray for in-memory X) of shape (n_samples,) for two
            classes, else (n_samples, n_classes)
        """
        if not isinstance(X, da.Array):
            return super().decision_function(X)
        return self._map_rows(X, "decision_function")

    def predict_proba(self, X):
        """Class probabilities (logistic loss only).

        Parameters
        ----------
        X : dask.array.Array of shape (n_samples, n_features), or in-memory data

        Returns
        -------
        proba : dask.array.Array (ndarray for in-memory X) of shape (n_samples, n_classes)
        """
        if not isinstance(X, da.Array):
            return super().predict_proba(X)
        return self._map_rows(X, "predict_proba")


class FactorizationMachineClassifier(_DaskClassifierMixin, _DaskMixin,
                                     _local.FactorizationMachineClassifier):
    _local_class = _local.FactorizationMachineClassifier
    __doc__ = _docstring(
        "Factorization machine classifier (one-vs-rest) fitted on a Dask cluster.\n",
        _local.FactorizationMachineClassifier, _CLASSIFIER_LOSS_DOC)

    def __init__(self, degree=2, n_components=8, *, lower_degrees="separate",
                 kernel="anova", loss="logistic", fit_linear=True, fit_intercept=True,
                 alpha=1e-4, beta=1e-4, init_scale=0.1, max_iter=100, tol=1e-5,
                 solver="lbfgs", learning_rate="invscaling", eta0=None, power_t=0.25,
                 l1=0.0, l2=0.0, batch_size=1, shuffle=True, early_stopping=False,
                 validation_fraction=0.1, n_iter_no_change=5, warm_start=False,
                 random_state=None, verbose=0, n_jobs=None):
        super().__init__(**{k: v for k, v in locals().items()
                            if k not in ("self", "__class__")})


_FIELD_SOLVER_DOC = """    solver : {"adagrad"}, default="adagrad"
        Every epoch, each block runs a local AdaGrad epoch (the in-memory estimator's,
        one row per step or ``batch_size`` rows) from the current model, its AdaGrad
        statistics staying on its worker from one epoch to the next, and the client
        averages the blocks' parameters weighted by their rows.  On one block this is
        the in-memory fit.  Rows are scaled to unit norm on the workers when
        ``normalize``.
"""


def _field_docstring(summary, local_class, module_objective, module_params, loss_doc=""):
    return _docstring(summary, local_class, loss_doc, module_objective, module_params,
                      _FIELD_SOLVER_DOC)


# The field models on Dask take the in-memory estimators' parameters and defaults (their
# __init__): only the solver's documentation and its choices differ.
class FieldAwareFactorizationMachineRegressor(
        _DaskMixin, _local.FieldAwareFactorizationMachineRegressor):
    _local_class = _local.FieldAwareFactorizationMachineRegressor
    _dask_solvers = ("adagrad",)
    __doc__ = _field_docstring(
        "Field-aware factorization machine regressor fitted on a Dask cluster.\n",
        _local.FieldAwareFactorizationMachineRegressor, ffm._FFM_OBJECTIVE_DOC,
        ffm._FFM_PARAMS_DOC)


class FieldAwareFactorizationMachineClassifier(
        _DaskClassifierMixin, _DaskMixin, _local.FieldAwareFactorizationMachineClassifier):
    _local_class = _local.FieldAwareFactorizationMachineClassifier
    _dask_solvers = ("adagrad",)
    __doc__ = _field_docstring(
        "Field-aware factorization machine classifier (one-vs-rest) fitted on a Dask "
        "cluster.\n", _local.FieldAwareFactorizationMachineClassifier,
        ffm._FFM_OBJECTIVE_DOC, ffm._FFM_PARAMS_DOC, _CLASSIFIER_LOSS_DOC)


class FieldWeightedFactorizationMachineRegressor(
        _DaskMixin, _local.FieldWeightedFactorizationMachineRegressor):
    _local_class = _local.FieldWeightedFactorizationMachineRegressor
    _dask_solvers = ("adagrad",)
    __doc__ = _field_docstring(
        "Field-weighted factorization machine regressor fitted on a Dask cluster.\n",
        _local.FieldWeightedFactorizationMachineRegressor, fwfm._FWFM_OBJECTIVE_DOC,
        fwfm._FWFM_PARAMS_DOC)


class FieldWeightedFactorizationMachineClassifier(
        _DaskClassifierMixin, _DaskMixin,
        _local.FieldWeightedFactorizationMachineClassifier):
    _local_class = _local.FieldWeightedFactorizationMachineClassifier
    _dask_solvers = ("adagrad",)
    __doc__ = _field_docstring(
        "Field-weighted factorization machine classifier (one-vs-rest) fitted on a Dask "
        "cluster.\n", _local.FieldWeightedFactorizationMachineClassifier,
        fwfm._FWFM_OBJECTIVE_DOC, fwfm._FWFM_PARAMS_DOC, _CLASSIFIER_LOSS_DOC)


_ALL = (FactorizationMachineRegressor, FactorizationMachineClassifier,
        FieldAwareFactorizationMachineRegressor, FieldAwareFactorizationMachineClassifier,
        FieldWeightedFactorizationMachineRegressor,
        FieldWeightedFactorizationMachineClassifier)


def load(path):
    """Read a model file (:meth:`save`, or an in-memory estimator's) as a polylite.dask
    estimator.

    Parameters
    ----------
    path : str or path-like

    Returns
    -------
    estimator : one of the estimators of polylite.dask
    """
    local = _load_local(path)
    for cls in _ALL:
        if type(local) is cls._local_class:
            return cls.from_local(local)
    raise TypeError(f"polylite.dask has no estimator for a {type(local).__name__}")
