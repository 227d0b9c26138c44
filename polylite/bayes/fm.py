"""Bayesian factorization machines of any degree, trained by Gibbs sampling (MCMC)."""
import copy
import math
import time
import warnings

import numpy as np
from scipy.special import log_ndtr, logsumexp, ndtr, ndtri_exp
from sklearn.base import RegressorMixin
from sklearn.preprocessing import LabelEncoder
from sklearn.utils import check_array, check_random_state, column_or_1d
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted

from .. import kernels
from .._classification import ClassifierLayer, one_vs_rest_probabilities
from .._engine.layouts import layout_of
from .._estimator import ModelRoot
from .._io import ModelFileError, check_array_names, check_float_arrays, register_model
from .._validation import (check_bool, check_choice, check_n_jobs, check_number,
                           check_random_state_param, store_init_params)
from .._engine import solvers
from .._engine.outputs import posterior_mean, sample_outputs
from ..polynomial._base import _OutputParams, check_model_memory
from ..polynomial.fm import FM_KERNELS, LOWER_DEGREES, check_anova_degree, fm_structure
from ._sampler import FeatureGroups, Gaussian, GibbsChain, Probit

__all__ = ["BayesianFactorizationMachineRegressor",
           "BayesianFactorizationMachineClassifier"]

_FLOAT_DTYPES = [np.float64, np.float32]


# The default burn-in: a fifth of the sweeps, at most this many.
MAX_DEFAULT_BURN_IN = 5


def default_burn_in(n_iter):
    """The burn-in of ``n_burn_in=None``: ``min(n_iter // 5, 5)`` sweeps."""
    return min(int(n_iter) // 5, MAX_DEFAULT_BURN_IN)


def kept_sweeps(n_iter, n_burn_in, n_kept=None):
    """The sweeps (1-based) whose samples are kept: ``n_kept`` of those after the burn-in,
    evenly spaced and ending with the last (all of them when there are no more, or when
    ``n_kept`` is None)."""
    after = n_iter - n_burn_in
    count = after if n_kept is None else min(n_kept, after)
    return n_burn_in + (np.arange(1, count + 1) * after) // count


def probit_targets(estimator, y):
    """The probit models' targets for labels ``y``: -1/+1 per output, one output for two
    classes and one per class (one-vs-rest) for more, (n, n_outputs); sets
    ``estimator.classes_``."""
    check_classification_targets(y)
    encoder = LabelEncoder().fit(y)
    if encoder.classes_.shape[0] < 2:
        raise ValueError(f"the classifier needs samples of at least two classes; "
                         f"got one class: {encoder.classes_[0]!r}")
    estimator.classes_ = encoder.classes_
    codes = encoder.transform(y)
    if encoder.classes_.shape[0] == 2:
        return np.where(codes == 1, 1.0, -1.0)[:, np.newaxis]
    return np.where(codes[:, np.newaxis] == np.arange(encoder.classes_.shape[0]), 1.0, -1.0)


class _BayesianFactorizationMachine(ModelRoot):
    """Fit and prediction shared by the regressor and the classifier: one chain per output
    (one for regression and two classes, one per class for more), swept in turn."""

    _is_classifier = False  # the probit model (also read by polylite._io)
    _fitted_attribute = "P_samples_"
    _noise_sampled = False  # the Gaussian model's noise precision, alpha_
    _takes_relational = True  # polylite.relational.RelationalMatrix, as fit and predict
    _fit_time = "sampling time"  # what n_components lengthens (warnings)
    # A progress display (the command line's) called after every sweep with (sweep,
    # n_iter, the X_eval score of the averaged predictor or NaN, seconds so far).
    _sweep_callback = None

    # ---- parameters ---------------------------------------------------------------------

    def _check_params(self):
        check_number(self.degree, "degree", low=2, integer=True)
        check_choice(self.lower_degrees, "lower_degrees", LOWER_DEGREES)
        check_choice(self.kernel, "kernel", FM_KERNELS)
        self._check_shared_params()
        check_number(self.n_iter, "n_iter", low=1, integer=True)
        if self.n_burn_in is not None:
            check_number(self.n_burn_in, "n_burn_in", low=0, integer=True)
            if self.n_burn_in >= self.n_iter:
                raise ValueError(f"n_burn_in must be smaller than n_iter, got n_burn_in="
                                 f"{self.n_burn_in} and n_iter={self.n_iter}")
        if self.n_kept is not None:
            check_number(self.n_kept, "n_kept", low=1, integer=True)
        check_number(self.init_scale, "init_scale", low=0)
        check_number(self.relaxation, "relaxation", low=0, high=2, low_open=True,
                     high_open=True)

    def _burn_in(self):
        """The sweeps discarded before averaging: ``n_burn_in``, or its default for
        ``n_iter`` (:func:`default_burn_in`)."""
        if self.n_burn_in is None:
            return default_burn_in(self.n_iter)
        return int(self.n_burn_in)

    def _check_shared_params(self):
        """The parameters the Gibbs and variational estimators share."""
        check_number(self.n_components, "n_components", low=1, integer=True)
        for name in ("fit_linear", "fit_intercept"):
            check_bool(getattr(self, name), name)
        check_random_state_param(self.random_state)
        check_number(self.verbose, "verbose", low=0, integer=True)
        check_n_jobs(self.n_jobs)

    def _structure(self):
        return fm_structure(self.degree, self.lower_degrees, self.kernel)

    def _check_model_size(self, n_features, n_outputs, n_kept, itemsize):
        """Refuse parameters absurd for ``n_features`` features, with the bounds of the
        maximum likelihood FMs (a ValueError): an ANOVA degree beyond them, ``n_kept``
        samples (and the chains' current parameters) larger than this machine's memory.
        ``fit`` checks its data so, and ``polylite.load`` a model file."""
        if self.kernel == "anova":
            check_anova_degree(self.degree, n_features)
        _, degrees, n_dummy = self._structure()
        k = self.n_components
        n_values = n_outputs * (n_kept + 1) * (
            1 + n_features + (len(degrees) * n_features + n_dummy + 1) * k)
        check_model_memory(n_values, itemsize, k,
                           "outputs, kept samples, blocks, features, components",
                           (n_outputs, n_kept, len(degrees), n_features, k),
                           advice="use fewer components or kept samples (n_kept)")

    def _warn_components_beyond_interactions(self, n_features):
        """Warn when n_components exceeds the number of distinct interactions a factor
        block weights: that many components (one per interaction) already reach every
        weighting of them, and the sampler's time grows in proportion to n_components."""
        kernel, degrees, n_dummy = self._structure()
        if kernel == "all-subsets":
            interactions, what = 2 ** min(n_features, 64), "subsets of the"
        else:
            interactions = max(math.comb(n_features + n_dummy, t) for t in degrees)
            what = f"interactions of degree {max(degrees)} among the"
        if self.n_components > interactions:
            warnings.warn(
                f"n_components={self.n_components} exceeds the {interactions} {what} "
                f"{n_features} features of X: components beyond {interactions} reach no "
                f"model that fewer cannot, and each adds to the {self._fit_time} (it grows in "
                f"proportion to n_components)", UserWarning, stacklevel=4)

    # ---- data ---------------------------------------------------------------------------

    def _validate_fit_data(self, X, y):
        return layout_of(X).validate(
            self, X, y, reset=True, dtype=_FLOAT_DTYPES, accept_dense=False,
            y_numeric=not getattr(self, "_labels_as_y", self._is_classifier))

    def _validate_predict_data(self, X):
        check_is_fitted(self)
        return layout_of(X).validate(self, X, reset=False, dtype=self.P_samples_.dtype)

    def _check_feature_groups(self, feature_groups, n_features):
        """Each column's group index in [0, n_groups) from any labels, and n_groups."""
        if feature_groups is None:
            return np.zeros(n_features, dtype=np.intp), 1
        labels = column_or_1d(check_array(feature_groups, ensure_2d=False, dtype=None,
                                          ensure_min_samples=0,
                                          input_name="feature_groups"))
        if labels.shape[0] != n_features:
            raise ValueError(f"feature_groups must give a group to each of the "
                             f"{n_features} features, got {labels.shape[0]} labels")
        if n_features == 0:
            return np.zeros(0, dtype=np.intp), 1
        try:  # the groups are numbered in the sorted order of their labels
            _, index = np.unique(labels, return_inverse=True)
        except TypeError:
            kinds = sorted({type(label).__name__ for label in labels})
            raise ValueError(f"feature_groups must hold labels that can be sorted: all "
                             f"numbers or all strings (for instance each feature's field "
                             f"name), got labels of type {', '.join(kinds)}") from None
        return index.astype(np.intp), int(index.max()) + 1

    def _eval_set(self, X_eval, y_eval, dtype):
        if X_eval is None:
            if y_eval is not None:
                raise ValueError("y_eval is given without X_eval")
            return None, None
        X_eval = kernels.check_X(X_eval, dtype=dtype, n_features=self.n_features_in_,
                                 accept_dense=False)
        if y_eval is not None:
            y_eval = column_or_1d(check_array(y_eval, ensure_2d=False, dtype=None,
                                              ensure_all_finite=not self._is_classifier,
                                              ensure_min_samples=0))
            if y_eval.shape[0] != X_eval.shape[0]:
                raise ValueError(f"X_eval has {X_eval.shape[0]} rows but y_eval has "
                                 f"{y_eval.shape[0]}")
        return X_eval, y_eval

    # ---- fitting ------------------------------------------------------------------------

    def _fit_chains(self, X, targets, feature_groups, X_eval, eval_score):
        """Run a chain per column of ``targets`` (n, n_outputs) for n_iter sweeps and
        keep the samples; returns (the noise precisions drawn, (n_outputs, n_iter); the
        mean of the outputs' predictions on X_eval after the burn-in, (n_eval,
        n_outputs), or None; the scores of the averaged predictor after each sweep).

        The outputs' predictions are f for regression, Phi(f) for the probit model;
        ``eval_score(mean)`` scores their mean on X_eval (None without y_eval).
        """
        self._check_params()
        self._check_fit_targets(targets)
        burn_in = self._burn_in()
        kept = kept_sweeps(self.n_iter, burn_in, self.n_kept)
        self._check_model_size(X.shape[1], targets.shape[1], len(kept), X.dtype.itemsize)
        self._warn_components_beyond_interactions(X.shape[1])
        rng = check_random_state(self.random_state)
        n, d = X.shape
        n_outputs = targets.shape[1]
        kernel, degrees, n_dummy = structure = self._structure()
        k = self.n_components
        index, n_groups = self._check_feature_groups(feature_groups, d)
        groups = FeatureGroups(index, n_groups)
        data = solvers.cd_data(X, np.full(n, 1.0 / n), kernel, self.n_jobs)
        dtype = X.dtype
        samples = dict(
            intercept=np.zeros((n_outputs, len(kept), 1), dtype),
            w=np.zeros((n_outputs, len(kept), d), dtype),
            P=np.zeros((n_outputs, len(kept), len(degrees), d, k), dtype),
            gamma=np.zeros((n_outputs, len(kept), n_dummy, k), dtype))
        likelihoods = [self._likelihood(targets[:, o]) for o in range(n_outputs)]
        for name, value in likelihoods[0].kept_state().items():  # the ordinal cutpoints
            samples[name] = np.zeros((n_outputs, len(kept), *value.shape))
        workspace = {}  # cd_epoch's work arrays, rebuilt by every call: shared by the chains
        chains = []
        for o in range(n_outputs):
            # The linear weights start as the factors do: both draw their first prior
            # precisions from their starting values.
            with np.errstate(over="ignore"):  # checked by _check_start
                params = _OutputParams(
                    intercept=np.zeros(1, dtype),
                    P=rng.normal(0.0, self.init_scale, (len(degrees), d, k)).astype(dtype),
                    gamma=rng.normal(0.0, self.init_scale, (n_dummy, k)).astype(dtype),
                    w=(rng.normal(0.0, self.init_scale, d).astype(dtype) if self.fit_linear
                       else np.zeros(d, dtype)),
                    lam=np.ones(k, dtype))
            self._check_start(X, params)
            chains.append(GibbsChain(X, targets[:, o], data, params, structure, groups,
                                     fit_intercept=bool(self.fit_intercept),
                                     fit_linear=bool(self.fit_linear),
                                     likelihood=likelihoods[o], rng=rng,
                                     workspace=workspace,
                                     relaxation=float(self.relaxation),
                                     n_jobs=self.n_jobs))
            self._check_start(X, params, chains[-1])
        eval_sum = None
        alphas = np.zeros((n_outputs, self.n_iter))
        scores = np.full(self.n_iter, np.nan)
        start = time.perf_counter()
        for sweep in range(1, self.n_iter + 1):
            for o, chain in enumerate(chains):
                try:
                    chain.sweep(count=sweep > burn_in)
                except FloatingPointError as exc:
                    where = f"sweep {sweep}" + (f", output {o}" if n_outputs > 1 else "")
                    raise FloatingPointError(
                        f"{type(self).__name__}: the Gibbs sampler diverged at {where} "
                        f"({exc}): {self._scale_advice(X, targets)}") from None
                alphas[o, sweep - 1] = chain.hyper.alpha
            slot = np.searchsorted(kept, sweep)
            if slot < len(kept) and kept[slot] == sweep:
                for o, chain in enumerate(chains):
                    state = chain.likelihood.kept_state()
                    for name in samples:
                        samples[name][o, slot] = (state[name] if name in state
                                                  else getattr(chain.params, name))
            if X_eval is not None:
                current = np.column_stack([self._eval_output(chain, X_eval)
                                           for chain in chains])
                if sweep > burn_in:
                    eval_sum = current if eval_sum is None else eval_sum + current
                    mean = eval_sum / (sweep - burn_in)
                else:
                    mean = current  # during the burn-in, the current sample's
                if eval_score is not None:
                    scores[sweep - 1] = eval_score(mean)
            if self.verbose:
                self._report(sweep, alphas[:, sweep - 1], scores[sweep - 1],
                             time.perf_counter() - start)
            if self._sweep_callback is not None:
                self._sweep_callback(sweep, self.n_iter, scores[sweep - 1],
                                     time.perf_counter() - start)
        for o, chain in enumerate(chains):
            if isinstance(chain.likelihood, Gaussian):  # regression: y on f's scale
                kernels.check_fitted_scale(self, X, targets[:, o], chain.y_pred)
        self.n_iter_ = int(self.n_iter)
        self.feature_groups_ = index
        self._finish_likelihoods(likelihoods)
        samples["intercept"] = samples["intercept"][:, :, 0]
        self._publish(samples)
        self._keep_compact_probe(X)
        eval_mean = None if X_eval is None else eval_sum / (self.n_iter - burn_in)
        return alphas, eval_mean, scores

    def _likelihood(self, target):
        """The likelihood of one output's chain, given its column of targets."""
        return Probit() if self._is_classifier else Gaussian()

    def _eval_output(self, chain, X_eval):
        """What ``fit`` averages over the sweeps on X_eval for one chain: f for
        regression, Phi(f) for the probit model (n_eval,)."""
        return self._link(chain.predict(X_eval))

    def _finish_likelihoods(self, likelihoods):
        """What the fitted model keeps of its chains' likelihoods (nothing here)."""

    def _check_fit_targets(self, targets):
        """Refuse (ValueError) regression targets whose squares overflow: the sampler's
        noise precision is drawn from the sum of the squared residuals."""
        if self._is_classifier:
            return
        with np.errstate(over="ignore"):
            squares = float(np.einsum("ij,ij->", targets, targets))
        if not np.isfinite(squares):
            raise ValueError(
                f"y is too large for {type(self).__name__}: the sum of its squares "
                f"overflows float64 (largest |y| = {np.max(np.abs(targets)):.3g}), and the "
                f"noise precision is fitted from the squared residuals; scale y "
                f"(for example standardise it, then scale the predictions back)")

    def _check_start(self, X, params, chain=None):
        """Refuse (ValueError) an initial model that is not finite, or whose outputs on
        X (those of ``chain``, when given) or their squared residuals overflow: X or
        init_scale too large."""
        with np.errstate(over="ignore", invalid="ignore"):
            if chain is None:
                finite = np.all(np.isfinite(params.P)) and np.all(np.isfinite(params.gamma))
                what = f"init_scale={self.init_scale!r} draws factors beyond {X.dtype.name}"
            else:
                residuals = chain.y_pred - chain.y
                finite = np.isfinite(np.einsum("i,i->", residuals, residuals))
                what = "the initial model's outputs on X, or their squares, overflow"
        if not finite:
            raise ValueError(f"{type(self).__name__}: {what}: {self._scale_advice(X)}")

    def _scale_advice(self, X, targets=None):
        """What to scale, naming the inputs and parameters that are large: the values of
        X, y (``targets`` of a regressor) and init_scale."""
        largest_x = kernels.largest_abs(X)
        largest_y = (np.max(np.abs(targets)) if targets is not None and targets.size
                     and not self._is_classifier else 0.0)
        causes = []
        if largest_y > 1e3:
            causes.append(f"y (largest |y| = {largest_y:.3g})")
        if self.init_scale > 1:
            causes.append(f"init_scale={self.init_scale!r}")
        if largest_x > 1e3 or not causes:
            causes.insert(0, f"the values of X (largest |x| = {largest_x:.3g})")
        remedies = {"the values of X": "scale the features of X (for example to unit "
                                       "variance)",
                    "y ": "scale y (for example standardise it)",
                    "init_scale": "lower init_scale (default 0.1)"}
        verb = "are" if len(causes) > 1 or causes[0].startswith("the values") else "is"
        return (f"{' and '.join(causes)} {verb} too large for interactions of degree "
                f"{self.degree} in {X.dtype.name}: " +
                ", ".join(remedy for key, remedy in remedies.items()
                          if any(cause.startswith(key) for cause in causes)))

    def _report(self, sweep, alphas, score, elapsed):
        phase = "burn-in" if sweep <= self._burn_in() else "sample "
        line = f"sweep {sweep:4d} {phase}"
        if not self._is_classifier:
            line += f"  alpha {alphas[0]:.4g} (noise sd {alphas[0] ** -0.5:.4g})"
        if np.isfinite(score):
            line += f"  {self._score_name} on X_eval {score:.5f}"
        print(f"{line}  {elapsed:.2f}s", flush=True)

    # ---- prediction -----------------------------------------------------------------------

    @staticmethod
    def _link(f):
        return f

    _FM_SAMPLES = ("intercept", "w", "P", "gamma")
    _SAMPLES = _FM_SAMPLES  # and the likelihood's own (the ordinal cutpoints)

    def _publish(self, samples):
        """Expose ``samples`` (name -> array with a leading axis over the outputs) as the
        ``*_samples_`` attributes (without that axis for one output)."""
        for name, values in samples.items():
            setattr(self, f"{name}_samples_",
                    values if self._is_classifier else values[0])

    def _samples(self):
        """The kept samples, each array with a leading axis over the outputs."""
        return {name: (getattr(self, f"{name}_samples_") if self._is_classifier
                       else getattr(self, f"{name}_samples_")[np.newaxis])
                for name in self._SAMPLES}

    def _sample_outputs(self, X):
        """The kept samples' outputs f on X: (n_outputs, n_kept, n_samples), float64,
        every one finite (else FloatingPointError: every prediction method comes here)."""
        kernel, degrees, _ = self._structure()
        samples = self._samples()
        out = sample_outputs(X, samples, kernel, degrees, n_jobs=self.n_jobs)
        kernels.check_finite_predictions(np.moveaxis(out, 2, 0), self,
                                         "kept samples' outputs",
                                         dtype=samples["P"].dtype)
        return out

    # ---- save / load (polylite._io) --------------------------------------------------------

    def _model_arrays(self):
        """The kept samples (with the output axis), the feature groups and, for the
        regressor, the noise precisions drawn."""
        arrays = {f"{name}_samples": a for name, a in self._samples().items()}
        arrays["feature_groups"] = self.feature_groups_.astype(np.int64)
        if self._noise_sampled:
            arrays["alpha"] = np.asarray(self.alpha_, dtype=np.float64)
        attributes = {"n_iter_": int(self.n_iter_)}
        if self.P_samples_.dtype == np.float64:  # (kept by every copy of the file)
            attributes["float32_samples_hold"] = self._float32_samples_hold()
        return arrays, attributes

    # Rows of the training data on which float32 samples must predict as the model does
    # (within COMPACT_TOLERANCE) for a model file to store them.
    COMPACT_CHECK_ROWS = 1000
    COMPACT_TOLERANCE = 1e-6

    def _keep_compact_probe(self, X):
        """Keep (privately, never in a model file) up to COMPACT_CHECK_ROWS rows of the
        training data X, on which the first save checks the float32 samples."""
        n_rows = X.shape[0]
        self._compact_probe = X if n_rows <= self.COMPACT_CHECK_ROWS else X[np.sort(
            np.random.default_rng(n_rows).choice(n_rows, self.COMPACT_CHECK_ROWS,
                                                 replace=False))]
        self._float32_hold = None  # not checked yet

    def _saved_predictions(self, X):
        """What a model file must reproduce: the scores and probabilities of a
        classifier, the mean and standard deviation of a regressor."""
        if hasattr(self, "predict_proba"):
            scores = (self.decision_function(X),) if hasattr(self, "decision_function") \
                else ()
            return scores + (self.predict_proba(X),)
        return self.predict(X, return_std=True)

    def _float32_samples_hold(self):
        """Whether the model, its float64 samples rounded to float32 (as the default model
        file stores them), predicts within COMPACT_TOLERANCE of itself (relative, or
        absolute where a prediction is near 0) on the training rows kept by fit (checked
        once; a loaded model: as its file says).  Rating data stays near 1e-8; where the
        terms of the model are far larger than its predictions and cancel, the rounding
        can move them more, and the file then keeps the samples in float64."""
        hold = getattr(self, "_float32_hold", None)
        if hold is not None:
            return hold
        probe = getattr(self, "_compact_probe", None)
        if probe is None:  # (a model from a file that predates the check)
            return True
        samples = self._samples()
        rounded = copy.copy(self)
        with np.errstate(over="ignore"):
            rounded._publish({**samples, **{
                name: samples[name].astype(np.float32).astype(np.float64)
                for name in self._FM_SAMPLES}})
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                moved = zip(rounded._saved_predictions(probe),
                            self._saved_predictions(probe))
                hold = all(np.all(np.abs(a - b) <= self.COMPACT_TOLERANCE
                                  * np.maximum(np.abs(b), 1.0)) for a, b in moved)
        except (FloatingPointError, ValueError):  # beyond float32: not compact
            hold = False
        self._float32_hold = hold
        return hold

    def _compact_model_arrays(self, arrays, attributes):
        """The factorization machine's float64 samples in float32 (the attribute
        ``samples_dtype`` says they are restored in float64): each value within a relative
        6e-8 of its own, the predictions within COMPACT_TOLERANCE of the model's on the
        training rows fit kept (about 1e-8 on MovieLens).  Left in float64 where a value
        would not fit in float32, or where the predictions would move more."""
        names = [f"{name}_samples" for name in self._FM_SAMPLES]
        if (arrays["P_samples"].dtype != np.float64
                or not attributes.get("float32_samples_hold", True)):
            return arrays, attributes
        with np.errstate(over="ignore"):  # (checked next)
            compact = {name: arrays[name].astype(np.float32) for name in names}
        if not all(np.all(np.isfinite(a)) for a in compact.values()):
            return arrays, attributes
        return {**arrays, **compact}, {**attributes, "samples_dtype": "float64"}

    def _restore_model(self, arrays, attributes):
        """Check the arrays of :meth:`_model_arrays` against the parameters, install them
        (samples stored in float32 by :meth:`_compact_model_arrays` back in float64)."""
        samples_dtype = attributes.get("samples_dtype")
        if samples_dtype is not None:
            stored = [arrays.get(f"{name}_samples") for name in self._FM_SAMPLES]
            if samples_dtype != "float64" or not all(
                    a is not None and a.dtype == np.float32 for a in stored):
                raise ModelFileError(f"model file has samples_dtype {samples_dtype!r}; "
                                     f"expected 'float64' with samples stored in float32")
            arrays = {**arrays, **{f"{name}_samples": a.astype(np.float64)
                                   for name, a in zip(self._FM_SAMPLES, stored)}}
        names = ({f"{name}_samples" for name in self._FM_SAMPLES} | {"feature_groups"}
                 | ({"alpha"} if self._noise_sampled else set()))
        check_array_names(arrays, names, owner=type(self).__name__)
        P = arrays["P_samples"]
        if P.ndim != 5:
            raise ModelFileError(f"array 'P_samples' has shape {P.shape}; expected 5 "
                                 f"dimensions (outputs, samples, blocks, features, "
                                 f"components)")
        n_outputs, n_kept = P.shape[:2]
        expected_outputs = self._n_outputs()
        if n_outputs != expected_outputs:
            raise ModelFileError(f"model file has {n_outputs} outputs; "
                                 f"{type(self).__name__} with these classes has "
                                 f"{expected_outputs}")
        if n_kept < 1:
            raise ModelFileError("model file keeps no sample")
        # The bounds of fit (the degree, the memory) before the degree sizes anything.
        self._check_model_size(self.n_features_in_, n_outputs, n_kept, P.dtype.itemsize)
        _, degrees, n_dummy = self._structure()
        d, k = self.n_features_in_, self.n_components
        check_float_arrays(arrays, {
            "intercept_samples": (n_outputs, n_kept), "w_samples": (n_outputs, n_kept, d),
            "P_samples": (n_outputs, n_kept, len(degrees), d, k),
            "gamma_samples": (n_outputs, n_kept, n_dummy, k)}, P.dtype)
        n_iter = attributes.get("n_iter_")
        if isinstance(n_iter, bool) or not isinstance(n_iter, int) or n_iter < 1:
            raise ModelFileError(f"model file has no valid n_iter_ (got {n_iter!r})")
        groups = arrays["feature_groups"]
        if (groups.shape != (d,) or groups.dtype.kind not in "iu"
                or (d > 0 and (groups.min() < 0 or groups.max() >= d))):
            raise ModelFileError(f"array 'feature_groups' must hold a group index in "
                                 f"[0, {d}) for each of the {d} features")
        if self._noise_sampled:
            alpha = arrays["alpha"]
            if alpha.shape != (n_iter,) or alpha.dtype != np.float64 or not np.all(
                    np.isfinite(alpha)):
                raise ModelFileError(f"array 'alpha' must hold {n_iter} finite float64 "
                                     f"values, one per sweep")
            self.alpha_ = np.array(alpha)
        hold = attributes.get("float32_samples_hold", True)
        if not isinstance(hold, bool):
            raise ModelFileError(f"model file has float32_samples_hold {hold!r}; "
                                 f"expected true or false")
        self._float32_hold = hold
        self._compact_probe = None
        self.n_iter_ = n_iter
        self.feature_groups_ = groups.astype(np.intp)
        self._publish({name: np.array(arrays[f"{name}_samples"])
                       for name in self._FM_SAMPLES})


_PARAMS_DOC = """
    Parameters
    ----------
    degree : int, default=2
        Degree m >= 2 of the feature interactions; ``fit`` refuses degrees above
        ``max(n_features, 5)`` (ANOVA kernel), as the maximum likelihood FMs do.
    n_components : int, default=8
        Rank k of each factor matrix.  ``fit`` refuses a model whose kept samples would
        not fit in the machine's physical memory.
    lower_degrees : {"separate", "shared", "none"}, default="separate"
        How the interactions of degrees 2..m-1 are modelled (ANOVA kernel only), as in
        :class:`~polylite.FactorizationMachineRegressor`: one factor matrix per degree
        2..m ("separate"), one matrix for every degree through m - 1 dummy features of
        value 1 ("shared"), or degree m only ("none").
    kernel : {"anova", "all-subsets"}, default="anova"
        "all-subsets": ``prod_j (1 + p_j x_j)``, every subset of features at once
        (``degree`` and ``lower_degrees`` do not apply).
    fit_linear : bool, default=True
        Sample the linear term ``<w, x>`` (else it is 0).
    fit_intercept : bool, default=True
        Sample the intercept, under a flat prior (else it is 0).
    n_iter : int, default=200
        Number of sweeps of the Gibbs sampler (one sweep draws the hyperparameters, then
        every parameter once).
    n_burn_in : int or None, default=None
        Sweeps discarded before averaging; must be smaller than ``n_iter``.  None: a
        fifth of the sweeps, at most 5 (``min(n_iter // 5, 5)``), so that a chain of
        any length keeps samples.  The chain starts from small parameters, and its first
        samples are shrunk towards the prior rather than far off: averaging them costs
        little, and a short burn-in leaves more samples to average.
    n_kept : int or None, default=None
        Samples kept for prediction on new data: that many of the sweeps after the
        burn-in, evenly spaced and ending with the last (all of them when there are
        fewer).  None: every sweep after the burn-in.  Prediction costs one model
        evaluation per kept sample, and the model holds
        ``n_kept * n_outputs * n_features * n_components * n_blocks`` floats: give a
        number to bound them on large models.
    init_scale : float, default=0.1
        Standard deviation of the normal initialisation of the factors and of the linear
        weights (the intercept starts at the mean of the targets).
    relaxation : float, default=1.5
        Over-relaxation of the draws, in (0, 2) (Adler 1981): each parameter moves from
        its value ``v`` to ``m + (1 - relaxation) (v - m) + sqrt(relaxation (2 -
        relaxation)) s z``, with ``N(m, s^2)`` its conditional given all the others and
        ``z`` a standard normal number.  Each conditional is left invariant, so the chain
        samples the same posterior for any value; 1 is plain Gibbs sampling, and values
        above 1 land on the far side of the conditional mean, so the parameters of users
        and items, which are strongly coupled, move further per sweep and the average of
        the samples settles in fewer sweeps.
    random_state : int, RandomState instance or None, default=None
        Seed of the initialisation and of every draw.  A fit is reproducible for a fixed
        ``random_state`` and ``n_jobs``.
    verbose : int, default=0
        Print a line per sweep when > 0: the sampled noise precision (regression) and,
        when ``fit`` is given ``X_eval`` and ``y_eval``, the score of the averaged
        predictor on them.
    n_jobs : int or None, default=None
        Threads that share each sweep's passes over the rows, as the coordinate descent
        of :class:`~polylite.FactorizationMachineRegressor`, and the rows of predictions
        (None: 1; -1: every CPU).  A fitted model's predictions do not depend on it; the
        chain does, slightly: every coordinate's normal draw is the same whatever thread
        takes it, but the sums of a draw are added in another order, so chains with
        different ``n_jobs`` agree only to rounding at first, then drift apart (each is a
        valid chain).
"""

_MODEL_DOC = """
    Every parameter has a Gaussian prior whose precision and mean are themselves sampled
    (Gamma and normal hyperpriors with libFM's constants alpha_0 = beta_0 = gamma_0 = 1,
    mu_0 = 0): one pair for the linear weights, and one per factor block and component,
    or one per feature group when ``fit`` is given ``feature_groups`` (as libFM's
    groups); the dummy features of ``lower_degrees="shared"`` have their own.  So there
    is no regularisation to tune.  Each sweep draws these hyperparameters, then every
    parameter from its Gaussian conditional (over-relaxed, see ``relaxation``) in the
    order and with the caches of coordinate descent (a sweep costs about one coordinate
    descent epoch).
"""


@register_model
class BayesianFactorizationMachineRegressor(RegressorMixin, _BayesianFactorizationMachine):
    __doc__ = """Bayesian factorization machine regressor of any degree (Gibbs sampling).

    ``y = f(x) + noise``, ``f(x) = intercept + <w, x> + sum_t sum_s A_t(P[t-2, :, s], x)``
    as in :class:`~polylite.FactorizationMachineRegressor`, Gaussian noise of precision
    ``alpha`` (sampled).  Predictions average the model over the posterior samples.
    """ + _MODEL_DOC + _PARAMS_DOC + """
    Attributes
    ----------
    intercept_samples_ : ndarray of shape (n_kept,)
        The kept samples of the intercept (n_kept: at most ``n_kept``, see there).
    w_samples_ : ndarray of shape (n_kept, n_features)
    P_samples_ : ndarray of shape (n_kept, n_blocks, n_features, n_components)
        The kept samples of the factor matrices (blocks as ``P_`` of the MAP estimator).
    gamma_samples_ : ndarray of shape (n_kept, n_dummy, n_components)
    alpha_ : ndarray of shape (n_iter,)
        The noise precision drawn at each sweep.
    feature_groups_ : ndarray of shape (n_features,)
        Each feature's group index (all 0 without ``feature_groups``).
    eval_prediction_ : ndarray of shape (n_eval,)
        With ``X_eval``: the mean prediction on it over every sweep after the burn-in.
    eval_rmse_ : ndarray of shape (n_iter,)
        With ``X_eval`` and ``y_eval``: after each sweep, the RMSE of the averaged
        predictor so far (during the burn-in, of the current sample).
    n_iter_ : int
        Number of sweeps run.
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from polylite import BayesianFactorizationMachineRegressor
    >>> X = np.random.RandomState(0).rand(50, 4)
    >>> y = X[:, 0] * X[:, 1] + X[:, 2]
    >>> fm = BayesianFactorizationMachineRegressor(n_components=2, random_state=0)
    >>> mean, std = fm.fit(X, y).predict(X[:2], return_std=True)
    >>> mean.shape, std.shape
    ((2,), (2,))
    """
    _score_name = "RMSE"
    _noise_sampled = True

    def __init__(self, degree=2, n_components=8, *, lower_degrees="separate",
                 kernel="anova", fit_linear=True, fit_intercept=True, n_iter=200,
                 n_burn_in=None, n_kept=None, init_scale=0.1, relaxation=1.5,
                 random_state=None, verbose=0, n_jobs=None):
        store_init_params(self, locals())

    def fit(self, X, y, *, feature_groups=None, X_eval=None, y_eval=None):
        """Sample the posterior of the model given (X, y).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training data; sparse input is used as it is (CSR), never densified.
        y : array-like of shape (n_samples,)
            Targets.
        feature_groups : array-like of shape (n_features,), default=None
            A group label for each feature (for instance its field: user, item, ...);
            each group has its own prior precision and mean per parameter set and
            component.  None: one group.
        X_eval : {array-like, sparse matrix} of shape (n_eval, n_features), default=None
            Rows whose predictions are averaged over every sweep after the burn-in (all
            samples, not only the kept ones), into ``eval_prediction_``.
        y_eval : array-like of shape (n_eval,), default=None
            Their targets: ``eval_rmse_`` and, with ``verbose``, the RMSE per sweep.

        Returns
        -------
        self : object
        """
        X, y = self._validate_fit_data(X, y)
        X_eval, y_eval = self._eval_set(X_eval, y_eval, X.dtype)
        score = None if y_eval is None else (
            lambda mean: float(np.sqrt(np.mean((mean[:, 0] - y_eval) ** 2))))
        targets = np.asarray(y, dtype=np.float64)[:, np.newaxis]
        for name in ("eval_prediction_", "eval_rmse_"):
            self.__dict__.pop(name, None)
        alphas, eval_mean, scores = self._fit_chains(X, targets, feature_groups, X_eval,
                                                     score)
        self.alpha_ = alphas[0]
        if X_eval is not None:
            self.eval_prediction_ = eval_mean[:, 0]
            if y_eval is not None:
                self.eval_rmse_ = scores
        return self

    def predict(self, X, return_std=False):
        """Mean prediction over the kept samples.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        return_std : bool, default=False
            Also return the standard deviation of the samples' predictions (the
            model's uncertainty about f(x); the noise, of variance about
            ``1 / alpha_[-1]``, comes on top for a new observation).

        Returns
        -------
        y_mean : ndarray of shape (n_samples,)
        y_std : ndarray of shape (n_samples,)
            Only with ``return_std``.
        """
        outputs = self._sample_outputs(self._validate_predict_data(X))[0]
        mean = posterior_mean(outputs, self)
        if return_std:
            with np.errstate(over="ignore", invalid="ignore"):  # checked below
                std = outputs.std(axis=0)
            return mean, kernels.check_finite_predictions(std, self, "standard deviations")
        return mean

    def _n_outputs(self):
        return 1


@register_model
class BayesianFactorizationMachineClassifier(ClassifierLayer, _BayesianFactorizationMachine):
    __doc__ = """Bayesian factorization machine classifier of any degree (Gibbs sampling).

    The probit model: ``P(y = 1 | x) = Phi(f(x))`` with ``f`` as in
    :class:`~polylite.FactorizationMachineRegressor`, sampled through latent targets
    ``z ~ N(f(x), 1)`` truncated to the side of the label (Albert and Chib 1993).
    Probabilities average ``Phi(f(x))`` over the posterior samples.  Multi-class problems
    are solved one-vs-rest (one chain per class, probabilities normalised to sum to one).
    """ + _MODEL_DOC + _PARAMS_DOC + """
    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    intercept_samples_ : ndarray of shape (n_outputs, n_kept)
        n_outputs is 1 for two classes, else n_classes.
    w_samples_ : ndarray of shape (n_outputs, n_kept, n_features)
    P_samples_ : ndarray of shape (n_outputs, n_kept, n_blocks, n_features, n_components)
    gamma_samples_ : ndarray of shape (n_outputs, n_kept, n_dummy, n_components)
    feature_groups_ : ndarray of shape (n_features,)
        Each feature's group index (all 0 without ``feature_groups``).
    eval_proba_ : ndarray of shape (n_eval, n_classes)
        With ``X_eval``: class probabilities on it averaged over every sweep after the
        burn-in.
    eval_accuracy_ : ndarray of shape (n_iter,)
        With ``X_eval`` and ``y_eval``: after each sweep, the accuracy of the averaged
        predictor so far (during the burn-in, of the current sample).
    n_iter_ : int
        Number of sweeps run.
    n_features_in_ : int
    """
    _is_classifier = True
    _score_name = "accuracy"

    def __init__(self, degree=2, n_components=8, *, lower_degrees="separate",
                 kernel="anova", fit_linear=True, fit_intercept=True, n_iter=200,
                 n_burn_in=None, n_kept=None, init_scale=0.1, relaxation=1.5,
                 random_state=None, verbose=0, n_jobs=None):
        store_init_params(self, locals())

    def fit(self, X, y, *, feature_groups=None, X_eval=None, y_eval=None):
        """Sample the posterior of the model given (X, y).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training data; sparse input is used as it is (CSR), never densified.
        y : array-like of shape (n_samples,)
            Class labels (two or more classes).
        feature_groups : array-like of shape (n_features,), default=None
            A group label for each feature (for instance its field: user, item, ...);
            each group has its own prior precision and mean per parameter set and
            component.  None: one group.
        X_eval : {array-like, sparse matrix} of shape (n_eval, n_features), default=None
            Rows whose class probabilities are averaged over every sweep after the
            burn-in (all samples, not only the kept ones), into ``eval_proba_``.
        y_eval : array-like of shape (n_eval,), default=None
            Their labels: ``eval_accuracy_`` and, with ``verbose``, the accuracy per
            sweep.

        Returns
        -------
        self : object
        """
        X, y = self._validate_fit_data(X, y)
        targets = probit_targets(self, y)
        X_eval, y_eval = self._eval_set(X_eval, y_eval, X.dtype)
        score = None
        if y_eval is not None:
            eval_codes = self._encode(y_eval)
            score = lambda mean: float(np.mean(  # noqa: E731
                np.argmax(one_vs_rest_probabilities(mean), axis=1) == eval_codes))
        for name in ("eval_proba_", "eval_accuracy_"):
            self.__dict__.pop(name, None)
        _, eval_mean, scores = self._fit_chains(X, targets, feature_groups, X_eval, score)
        if X_eval is not None:
            self.eval_proba_ = one_vs_rest_probabilities(eval_mean)
            if y_eval is not None:
                self.eval_accuracy_ = scores
        return self

    def _encode(self, y):
        codes = np.clip(np.searchsorted(self.classes_, y), 0, self.classes_.shape[0] - 1)
        unknown = self.classes_[codes] != y
        if np.any(unknown):
            raise ValueError(f"y_eval holds labels not in classes_ "
                             f"{self.classes_.tolist()}: {np.unique(y[unknown]).tolist()}")
        return codes

    @staticmethod
    def _link(f):
        return ndtr(f)


    def _output_proba(self, X):
        """Each output's mean P(y = its class | x) over the kept samples: (n, n_outputs)."""
        return ndtr(self._sample_outputs(self._validate_predict_data(X))).mean(axis=1).T

    def _class_proba(self, X):
        """The class probabilities averaged over the kept samples.  Binary: ``[1 - p,
        p]`` with ``p`` the mean of ``Phi(f(x))``.  Multi-class: each class's
        one-vs-rest probability, normalised to sum to one."""
        return one_vs_rest_probabilities(self._output_proba(X))

    def _predict_scores(self, X):
        """The most probable class under the mean probabilities."""
        p = self._output_proba(X)
        return p - 0.5 if p.shape[1] == 1 else p

    def _class_scores(self, X):
        """``Phi^-1`` of each output's mean probability: the probit score of the averaged
        predictor, finite, in the order of ``predict_proba`` and finer.

        The mean probability ``p`` of a confident row rounds to 1 (or 0) in floating point
        once ``f(x)`` passes about 8.3 (-38) on every sample, where ``Phi^-1(p)`` would be
        infinite and such rows tied.  So the score is computed from the logarithms of the
        means of ``Phi(f)`` and of ``Phi(-f) = 1 - Phi(f)`` over the samples (the smaller
        of ``p`` and ``1 - p`` kept to full relative precision): ``Phi^-1(p)`` exactly, a
        strictly increasing function of ``p`` without saturation (a row whose every sample
        has ``f = 40`` scores 40).  Only beyond ``|f| ~ 1.9e154`` on every sample, where
        even ``log Phi(-|f|)`` underflows, is it the samples' mean ``f``.
        """
        F = self._sample_outputs(self._validate_predict_data(X))
        log_n = np.log(F.shape[1])
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            log_p = logsumexp(log_ndtr(F), axis=1) - log_n   # log of the mean of Phi(f)
            log_q = logsumexp(log_ndtr(-F), axis=1) - log_n  # log of 1 - that mean
            # Phi^-1(p) = -Phi^-1(1 - p): from the smaller of p and 1 - p.
            scores = np.where(log_p < log_q, ndtri_exp(log_p), -ndtri_exp(log_q))
            scores = np.where(np.isfinite(scores), scores, F.mean(axis=1)).T
        return kernels.check_finite_predictions(scores, self, "scores")

    def _n_outputs(self):
        return 1 if self.classes_.shape[0] == 2 else self.classes_.shape[0]
