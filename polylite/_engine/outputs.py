"""The outputs of the polynomial models from their parameters alone: the structure the
parameters name (kernel, blocks' degrees, dummy rows) and one output's values on rows.

The estimators predict through here, and so does the command line when it predicts from
a model file without building the estimator (``polylite predict`` and ``evaluate``,
which then import neither scikit-learn nor an estimator family)."""
import numpy as np

from .. import kernels

__all__ = ["fm_structure", "pn_structure", "polynomial_output", "sample_outputs",
           "posterior_mean", "class_labels", "logistic_log_proba"]


def fm_structure(degree, lower_degrees, kernel):
    """(kernel name, degree of each factor block, number of dummy rows) of an FM."""
    if kernel == "all-subsets":
        return "all-subsets", [0], 0
    m = int(degree)
    if lower_degrees == "separate":
        return "anova", list(range(2, m + 1)), 0
    if lower_degrees == "shared":
        return "anova", [m], m - 1
    return "anova", [m], 0


def pn_structure(degree, lower_degrees):
    """(kernel name, degree of each factor block, number of dummy rows) of a polynomial
    network: one block, and one dummy row when the lower degrees are augmented."""
    return "polynomial", [int(degree)], 1 if lower_degrees == "augment" else 0


def polynomial_output(X, params, kernel, degrees, *, fit_linear, has_lam, n_jobs):
    """One output on the rows X (checked), from its parameters ``params`` (intercept of
    shape (1,), w, P, gamma, lam, as a model's stack holds them for one output)."""
    return kernels.predict(
        X, params.P, degrees=degrees, kernel=kernel, intercept=params.intercept[0],
        w=params.w if fit_linear else None, gamma=params.gamma,
        lam=params.lam if has_lam else None, check_input=False, n_jobs=n_jobs)


def sample_outputs(X, samples, kernel, degrees, *, n_jobs):
    """The outputs f of a Bayesian model's kept samples on the rows X (checked):
    (n_outputs, n_kept, n_rows) float64, from ``samples`` (name -> array with leading
    axes over the outputs and the kept samples: intercept, w, P, gamma)."""
    n_outputs, n_kept = samples["P"].shape[:2]
    out = np.empty((n_outputs, n_kept, X.shape[0]))
    for o in range(n_outputs):
        for s in range(n_kept):
            out[o, s] = kernels.predict(
                X, samples["P"][o, s], degrees=degrees, kernel=kernel,
                intercept=samples["intercept"][o, s], w=samples["w"][o, s],
                gamma=samples["gamma"][o, s], check_input=False, n_jobs=n_jobs)
    return out


def posterior_mean(outputs, model):
    """The mean over the kept samples (axis 0) of one output's ``outputs`` (n_kept,
    n_rows), every one finite (else FloatingPointError naming ``model``)."""
    with np.errstate(over="ignore", invalid="ignore"):  # checked below
        mean = outputs.mean(axis=0)
    return kernels.check_finite_predictions(mean, model, "mean predictions")


def class_labels(classes, scores):
    """The predicted labels (elements of ``classes``) of scores (n, n_columns): one
    column for two classes (positive favours ``classes[1]``), else one per class."""
    if scores.shape[1] == 1:
        return classes[(scores[:, 0] > 0).astype(np.intp)]
    return classes[np.argmax(scores, axis=1)]


def logistic_log_proba(scores):
    """The log class probabilities of one-vs-rest logistic outputs (n, n_outputs):
    ``log [1 - sigmoid(f), sigmoid(f)]`` for one output, else the log of the sigmoids
    normalised to sum to one; computed without under- or overflow."""
    scores = np.asarray(scores, dtype=np.float64)
    if scores.shape[1] == 1:
        # log sigmoid(f) = -log(1 + exp(-f)), log(1 - sigmoid(f)) = -log(1 + exp(f))
        return np.column_stack([-np.logaddexp(0.0, scores[:, 0]),
                                -np.logaddexp(0.0, -scores[:, 0])])
    from scipy.special import logsumexp
    log_sigmoid = -np.logaddexp(0.0, -scores)
    return log_sigmoid - logsumexp(log_sigmoid, axis=1, keepdims=True)
