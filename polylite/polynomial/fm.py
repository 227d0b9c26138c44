"""Factorization machines of any degree (HOFM), trained by coordinate descent."""
from sklearn.base import RegressorMixin

from .._engine.outputs import fm_structure
from .._io import register_model
from .._validation import check_choice, check_n_jobs, check_number, store_init_params
from ._base import AUTO_SOLVER_DOC, MAX_ITER_TOL_DOC, _PolynomialModel
from ._classifier import _OneVsRestMixin, _RegressorFitMixin

__all__ = ["FactorizationMachineRegressor", "FactorizationMachineClassifier"]

LOWER_DEGREES = ("separate", "shared", "none")
FM_KERNELS = ("anova", "all-subsets")
# Degrees above the number of features add only zero interactions; up to this degree they
# are tolerated (small data such as scikit-learn's estimator checks), beyond it refused.
MAX_DEGREE_BEYOND_FEATURES = 5


class _BaseFactorizationMachine(_PolynomialModel):

    _takes_relational = True
    _solvers = _PolynomialModel._solvers + ("ftrl",)
    _counts_nonzero = True

    def _check_params(self):
        super()._check_params()
        check_number(self.degree, "degree", low=2, integer=True)
        check_choice(self.lower_degrees, "lower_degrees", LOWER_DEGREES)
        check_choice(self.kernel, "kernel", FM_KERNELS)
        check_n_jobs(self.n_jobs)
        self._check_ftrl()
        if self.solver == "ftrl" and self.lower_degrees == "shared" and \
                self.kernel == "anova":
            raise ValueError("solver='ftrl' takes no dummy features: use "
                             "lower_degrees='separate' or 'none'")

    def _check_degree(self, n_features):
        if self.kernel == "anova":
            check_anova_degree(self.degree, n_features)

    def _structure(self):
        return fm_structure(self.degree, self.lower_degrees, self.kernel)


def check_anova_degree(degree, n_features):
    """Refuse (ValueError) an ANOVA ``degree`` above ``n_features`` (and above
    MAX_DEGREE_BEYOND_FEATURES): checked by ``fit`` before the degree sizes anything, and
    by ``polylite.load``."""
    if degree > max(n_features, MAX_DEGREE_BEYOND_FEATURES):
        # A_t sums over sets of t distinct features: zero for every x when t > d, at a
        # cost that grows like degree^2 (and a list of the degrees 2..m in memory).
        raise ValueError(
            f"degree={degree} exceeds n_features={n_features}: an ANOVA interaction of "
            f"degree t multiplies t distinct features, so those of degree above "
            f"{n_features} are zero for every input; use a degree of at most "
            f"{max(n_features, MAX_DEGREE_BEYOND_FEATURES)}")


_FM_PARAMS_DOC = """
    Parameters
    ----------
    degree : int, default=2
        Degree m >= 2 of the feature interactions (tested up to 5).  Interactions of
        degree above the number of features are zero for every input (ANOVA kernel), so
        ``fit`` refuses degrees above ``max(n_features, 5)``.
    n_components : int, default=8
        Rank k of each factor matrix.  ``fit`` refuses a model whose parameters would
        not fit in the machine's physical memory.
    lower_degrees : {"separate", "shared", "none"}, default="separate"
        How the interactions of degrees 2..m-1 are modelled (ANOVA kernel only):

        - "separate": one factor matrix per degree t = 2..m (the higher-order FM of
          Blondel et al. 2016); ``P_`` has m - 1 blocks, block t - 2 for degree t.
        - "shared": one factor matrix for all degrees, through m - 1 dummy features of
          value 1 whose learned parameters ``gamma_`` weight the degrees 1..m.
        - "none": degree m only.
    kernel : {"anova", "all-subsets"}, default="anova"
        "anova": interactions of distinct features of the degrees above.  "all-subsets":
        ``prod_j (1 + p_j x_j)``, every subset of features, all degrees at once (so
        ``degree`` and ``lower_degrees`` do not apply).
    fit_linear : bool, default=True
        Fit the linear term ``<w, x>``.
    fit_intercept : bool, default=True
        Fit the intercept (it is not regularised).
    alpha : float, default=1e-4
        L2 regularisation of the linear weights ``w_``, per sample: the objective is a
        mean over the rows, so the same value suits small and large data (a library
        that penalises the summed loss over n rows uses n times larger values).
    beta : float, default=1e-4
        L2 regularisation of the factors (``P_`` and ``gamma_``), per sample (as ``alpha``).
    init_scale : float, default=0.1
        Standard deviation of the normal initialisation of the factors (N(0, 0.01), as in
        the HOFM paper).  Much smaller values slow the first epochs of degree >= 3 down
        (the gradients of A_m shrink like init_scale^(m-1)).
""" + MAX_ITER_TOL_DOC + """\
    solver : {"auto", "cd", "sgd", "adagrad", "ftrl", "lbfgs"}, default="auto"
""" + AUTO_SOLVER_DOC + """\
        "cd": cyclic coordinate descent with cached power sums (the objective never
        increases; best for degree <= 3-4).  On a ``RelationalMatrix`` it steps in the
        table domain: for the squared loss the same fit as on the expanded rows
        (``X.to_csr()``) to rounding; for the classification losses steps on each
        loss's local quadratic model, checked not to increase the objective, so the fit
        differs from the expanded rows' while minimising the same objective, measured
        within 5% of it epoch by epoch (see :mod:`polylite.relational`).  "sgd" and
        "adagrad": stochastic passes over
        the rows (gradients by the ANOVA dynamic programme; for large data, any degree,
        and streaming with ``partial_fit``).  "lbfgs": SciPy's L-BFGS-B on the full
        objective (value and gradient in one pass over the rows).
    learning_rate : {"constant", "invscaling"}, default="invscaling"
        Step size of "sgd": ``eta0``, or ``eta0 / t^power_t`` at step t.  "adagrad"
        divides ``eta0`` by the root of each coordinate's summed squared gradients.
    eta0 : float or None, default=None
        Initial step size of "sgd"/"adagrad".  None: 0.1 for "adagrad"; for "sgd",
        0.01, or less on data of large norms or targets: 2 / L with L the rows' mean
        curvature bound at the initial model (see
        ``polylite._engine.solvers.default_sgd_eta0``), so that unscaled data do not
        diverge.
    power_t : float, default=0.25
        Exponent of the "invscaling" schedule.
    l1 : float, default=0.0
        L1 penalty of "ftrl" (FTRL-proximal, McMahan et al., KDD 2013: a step per row,
        each coordinate at its own rate, ``eta0`` its alpha, default 0.1, and a beta of
        1): McMahan's lambda_1, which sets weights exactly to zero
        (``n_nonzero_weights_`` counts those kept).  Unlike ``alpha`` and ``beta``,
        FTRL's penalties are on the sum of the losses seen so far, as in the paper and
        xLearn, not per sample; with "ftrl", ``alpha`` and ``beta`` do not apply.
    l2 : float, default=0.0
        L2 penalty of "ftrl" (McMahan's lambda_2), as ``l1``.
    batch_size : int, default=1
        Rows per stochastic step (their gradients are averaged).
    shuffle : bool, default=True
        Visit the rows in a new random order every pass ("sgd"/"adagrad").
    early_stopping : bool, default=False
        Hold out ``validation_fraction`` of the training data (stratified for
        classifiers) and stop when its loss has not improved by ``tol`` (relative) for
        ``n_iter_no_change`` epochs; the best model is kept.  ``fit`` also takes an
        explicit validation set ``X_val, y_val``.
    validation_fraction : float, default=0.1
        Share of the training data held out when ``early_stopping``.
    n_iter_no_change : int, default=5
        Epochs without improvement before stopping (validation loss with early stopping;
        training objective for "sgd"/"adagrad", which on more than 20,000 rows is
        measured on a fixed random tenth of them, at least 20,000: a prediction pass
        over every row after each epoch would add up to 40% to the epoch).
    warm_start : bool, default=False
        Continue from the previous fit's parameters.
    random_state : int, RandomState instance or None, default=None
        Seed of the factor initialisation.
    verbose : int, default=0
        Print the objective after every epoch when > 0.
    n_jobs : int or None, default=None
        Threads (None: 1; -1: every CPU the process may use).  The classes of a
        multi-class classifier are fitted at once, one class per thread, whatever the
        solver (each class has its own random stream).  The threads left over (all of
        them for one output) share the rows of
        prediction (``predict``, ``decision_function``, and the objective's predictions
        while fitting), of every pass of "cd" and of "lbfgs"'s value and gradient, and of
        each mini-batch of "sgd"/"adagrad" when ``batch_size > 1`` (steps on one row are
        sequential: ``batch_size=1`` runs on one thread).  Fewer threads run on data too
        small to share: under 20,000 rows per thread (256 rows of a mini-batch), or, for
        "cd", when the extra threads' scratch space (64 bytes per feature each) would
        outgrow X; each extra thread of "lbfgs" and of mini-batches keeps a gradient
        buffer as large as the parameters.
        Reproducibility: predictions do not depend on ``n_jobs``.  A fit is the same
        from run to run for a fixed ``random_state`` and number of threads; with another
        number of threads the sums over rows are added in another order, so it agrees
        to rounding (the rounding differences may grow over many stochastic steps).
"""

_FM_OBJECTIVE_DOC = """
    The objective is ``sum_i s_i loss(y_i, y_hat_i) / sum_i s_i + alpha/2 ||w||^2 +
    beta/2 (||P||^2 + ||gamma||^2)`` with sample weights ``s_i`` (1 by default).
"""


@register_model
class FactorizationMachineRegressor(RegressorMixin, _RegressorFitMixin,
                                    _BaseFactorizationMachine):
    __doc__ = """Factorization machine regressor of any degree (squared loss).

    ``y_hat(x) = intercept_ + <w_, x> + sum_t sum_s A_t(P_[t-2, :, s], x)`` with the ANOVA
    kernel ``A_t`` (sum over sets of t distinct features of the products p_j x_j).
    """ + _FM_OBJECTIVE_DOC + _FM_PARAMS_DOC + """
    Attributes
    ----------
    intercept_ : float
    w_ : ndarray of shape (n_features,)
        Linear weights (zeros when ``fit_linear=False``).
    P_ : ndarray of shape (n_blocks, n_features, n_components)
        Factor matrices; one block per degree 2..m for ``lower_degrees="separate"``,
        otherwise one block.
    gamma_ : ndarray of shape (n_dummy, n_components)
        Parameters of the dummy features (``degree - 1`` rows for "shared", else none).
    n_iter_ : int
        Number of epochs run.
    solver_ : str
        The solver that ran: ``solver``, or the one "auto" chose ("cd" or "lbfgs").
    n_nonzero_weights_ : int
        Nonzero entries of ``w_`` and ``P_`` (with "ftrl" and ``l1 > 0``, the weights
        it keeps).
    n_features_in_ : int
        Number of features seen in ``fit``.

    Examples
    --------
    >>> import numpy as np
    >>> from polylite import FactorizationMachineRegressor
    >>> X = np.random.RandomState(0).rand(50, 4)
    >>> y = X[:, 0] * X[:, 1] + X[:, 2]
    >>> fm = FactorizationMachineRegressor(n_components=2, random_state=0).fit(X, y)
    >>> fm.predict(X[:2]).shape
    (2,)
    """

    def __init__(self, degree=2, n_components=8, *, lower_degrees="separate",
                 kernel="anova", fit_linear=True, fit_intercept=True, alpha=1e-4,
                 beta=1e-4, init_scale=0.1, max_iter=None, tol=1e-5, solver="auto",
                 learning_rate="invscaling", eta0=None, power_t=0.25, l1=0.0, l2=0.0,
                 batch_size=1, shuffle=True, early_stopping=False, validation_fraction=0.1,
                 n_iter_no_change=5, warm_start=False, random_state=None, verbose=0,
                 n_jobs=None):
        store_init_params(self, locals())


@register_model
class FactorizationMachineClassifier(_OneVsRestMixin,
                                     _BaseFactorizationMachine):
    __doc__ = """Factorization machine classifier of any degree, binary or multi-class.

    Multi-class problems are solved one-vs-rest inside the estimator (one model per class).
    """ + _FM_OBJECTIVE_DOC + _FM_PARAMS_DOC + """    loss : {"logistic", "squared_hinge"}, default="logistic"
        Loss on labels in {-1, +1}; ``predict_proba`` needs "logistic".

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    intercept_ : ndarray of shape (n_outputs,)
        n_outputs is 1 for two classes, else n_classes.
    w_ : ndarray of shape (n_outputs, n_features)
    P_ : ndarray of shape (n_outputs, n_blocks, n_features, n_components)
    gamma_ : ndarray of shape (n_outputs, n_dummy, n_components)
    n_iter_ : ndarray of shape (n_outputs,)
    solver_ : str
        The solver that ran: ``solver``, or the one "auto" chose ("cd" or "lbfgs").
    n_nonzero_weights_ : int
        Nonzero entries of ``w_`` and ``P_`` (with "ftrl" and ``l1 > 0``, the weights
        it keeps).
    n_features_in_ : int
    """

    def __init__(self, degree=2, n_components=8, *, lower_degrees="separate",
                 kernel="anova", loss="logistic", fit_linear=True, fit_intercept=True,
                 alpha=1e-4, beta=1e-4, init_scale=0.1, max_iter=None, tol=1e-5,
                 solver="auto", learning_rate="invscaling", eta0=None, power_t=0.25,
                 l1=0.0, l2=0.0, batch_size=1, shuffle=True, early_stopping=False,
                 validation_fraction=0.1, n_iter_no_change=5, warm_start=False,
                 random_state=None, verbose=0, n_jobs=None):
        store_init_params(self, locals())
