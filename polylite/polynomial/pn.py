"""Polynomial networks: y_hat = intercept + <w, x> + sum_s lam_s (gamma_s + <p_s, x>)^m."""
import numpy as np
from sklearn.base import RegressorMixin

from .._engine.outputs import pn_structure
from .._io import register_model
from .._validation import check_choice, check_n_jobs, check_number, store_init_params
from ._base import AUTO_SOLVER_DOC, MAX_ITER_TOL_DOC, _PolynomialModel
from ._classifier import _OneVsRestMixin, _RegressorFitMixin
from .fm import MAX_DEGREE_BEYOND_FEATURES

__all__ = ["PolynomialNetworkRegressor", "PolynomialNetworkClassifier"]

PN_LOWER_DEGREES = ("augment", "none")
OUTPUT_WEIGHTS = ("learned", "alternating")


class _BasePolynomialNetwork(_PolynomialModel):

    _has_lam = True
    _single_block = True

    def _check_params(self):
        super()._check_params()
        check_number(self.degree, "degree", low=2, integer=True)
        check_choice(self.lower_degrees, "lower_degrees", PN_LOWER_DEGREES)
        check_choice(self.output_weights, "output_weights", OUTPUT_WEIGHTS)
        check_n_jobs(self.n_jobs)

    def _check_degree(self, n_features):
        # The bound of the factorization machines (MAX_DEGREE_BEYOND_FEATURES): a power
        # (gamma + <p, x>)^m of a degree beyond it overflows or vanishes for most inputs.
        limit = max(n_features, MAX_DEGREE_BEYOND_FEATURES)
        if self.degree > limit:
            raise ValueError(
                f"degree={self.degree} exceeds n_features={n_features}: polynomial "
                f"networks, as factorization machines, have a degree of at most the "
                f"number of features (or {MAX_DEGREE_BEYOND_FEATURES} with fewer), "
                f"powers of higher degree overflow or vanish for most inputs; use a "
                f"degree of at most {limit}")

    def _structure(self):
        return pn_structure(self.degree, self.lower_degrees)

    @property
    def _fit_lam(self):
        return self.output_weights == "learned"

    def _init_nonlinear(self, params, rng):
        super()._init_nonlinear(params, rng)
        # Alternating signs, so that even degrees start with both curvatures; learned
        # weights move from there.
        params.lam[...] = self._alternating(params.lam.shape[0])

    def _continue_from(self, params):
        if not self._fit_lam:  # fixed weights are +1, -1, ... whatever was fitted before
            params.lam[...] = self._alternating(params.lam.shape[0])

    @staticmethod
    def _alternating(k):
        return np.where(np.arange(k) % 2 == 0, 1.0, -1.0)


_PN_PARAMS_DOC = """
    Parameters
    ----------
    degree : int, default=2
        Degree m >= 2 of the polynomial kernel (squares of features included).  As for
        the factorization machines, ``fit`` refuses degrees above ``max(n_features, 5)``.
    n_components : int, default=8
        Number k of hidden units (rank).  ``fit`` refuses a model whose parameters would
        not fit in the machine's physical memory.
    lower_degrees : {"augment", "none"}, default="augment"
        "augment": each unit is ``(gamma_s + <p_s, x>)^m`` with a learned offset
        ``gamma_s`` (a constant feature), which covers all degrees 0..m.  "none":
        ``<p_s, x>^m``, degree m only.
    output_weights : {"learned", "alternating"}, default="learned"
        The weights ``lam_s`` of the units.  "learned": initialised to +1, -1, +1, ... and
        learned (L2-penalised by ``beta``), so they may take either sign.  "alternating":
        fixed to +1, -1, +1, ...  Either way the model can represent negative curvature
        for even m (with non-negative weights only, it could not).
    fit_linear : bool, default=True
        Fit the linear term ``<w, x>``.
    fit_intercept : bool, default=True
        Fit the intercept (it is not regularised).
    alpha : float, default=1e-4
        L2 regularisation of the linear weights ``w_``, per sample: the objective is a
        mean over the rows, so the same value suits small and large data (a library
        that penalises the summed loss over n rows uses n times larger values).
    beta : float, default=1e-4
        L2 regularisation of ``P_``, ``gamma_`` and learned ``lam_``, per sample (as ``alpha``).
    init_scale : float, default=0.1
        Standard deviation of the normal initialisation of ``P_`` and ``gamma_``.
""" + MAX_ITER_TOL_DOC + """\
    solver : {"auto", "cd", "sgd", "adagrad", "lbfgs"}, default="auto"
""" + AUTO_SOLVER_DOC + """\
        "sgd", "adagrad" and "lbfgs" use the gradient of the polynomial kernel (see the
        factorization machines).  "cd": cyclic coordinate descent.  ``(gamma_s + <p_s, x>)^m`` is not affine in one
        coordinate, so each coordinate takes a Newton step with a positive curvature
        (Gauss-Newton term plus the absolute second-order term) safeguarded by halving
        until the exact objective along the coordinate decreases (Armijo): the objective
        never increases.  ``lam_`` takes the exact bound step of an affine coordinate.
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
        Seed of the initialisation.
    verbose : int, default=0
        Print the objective after every epoch when > 0.
    n_jobs : int or None, default=None
        Threads (None: 1; -1: every CPU the process may use).  The classes of a
        multi-class classifier are fitted at once, one class per thread, whatever the
        solver.  The threads left over (all of them for one output) share the rows of
        prediction (``predict``, ``decision_function``, and the objective's predictions
        while fitting), of "lbfgs"'s value and gradient, and of each mini-batch of
        "sgd"/"adagrad" when ``batch_size > 1`` (steps on one row are sequential:
        ``batch_size=1`` runs on one thread); "cd"'s passes over the rows of one output
        run on one thread.  Fewer threads
        run on data too small to share: under 20,000 rows per thread (256 rows of a
        mini-batch); each extra thread of "lbfgs" and of mini-batches keeps a gradient
        buffer as large as the parameters.
        Reproducibility: predictions do not depend on ``n_jobs``.  A fit is the same
        from run to run for a fixed ``random_state`` and number of threads; with another
        number of threads the sums over rows are added in another order, so it agrees
        to rounding (the rounding differences may grow over many stochastic steps).
"""

_PN_OBJECTIVE_DOC = """
    The objective is ``sum_i s_i loss(y_i, y_hat_i) / sum_i s_i + alpha/2 ||w||^2 +
    beta/2 (||P||^2 + ||gamma||^2 + ||lam||^2)`` (``lam`` only when learned).
"""


@register_model
class PolynomialNetworkRegressor(RegressorMixin, _RegressorFitMixin,
                                 _BasePolynomialNetwork):
    __doc__ = """Polynomial network regressor (squared loss).

    ``y_hat(x) = intercept_ + <w_, x> + sum_s lam_[s] (gamma_[s] + <P_[:, s], x>)^m``: the
    polynomial kernel, so squares of features are included (unlike the ANOVA kernel of the
    factorization machines).
    """ + _PN_OBJECTIVE_DOC + _PN_PARAMS_DOC + """
    Attributes
    ----------
    intercept_ : float
    w_ : ndarray of shape (n_features,)
    P_ : ndarray of shape (n_features, n_components)
    gamma_ : ndarray of shape (n_components,)
        Unit offsets (zeros and unused when ``lower_degrees="none"``).
    lam_ : ndarray of shape (n_components,)
        Output weights of the units.
    n_iter_ : int
    solver_ : str
        The solver that ran: ``solver``, or the one "auto" chose ("cd" or "lbfgs").
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from polylite import PolynomialNetworkRegressor
    >>> X = np.random.RandomState(0).randn(100, 3)
    >>> y = X[:, 0] ** 2 - X[:, 1] * X[:, 2]
    >>> pn = PolynomialNetworkRegressor(n_components=4, random_state=0).fit(X, y)
    >>> pn.predict(X[:2]).shape
    (2,)
    """

    def __init__(self, degree=2, n_components=8, *, lower_degrees="augment",
                 output_weights="learned", fit_linear=True, fit_intercept=True,
                 alpha=1e-4, beta=1e-4, init_scale=0.1, max_iter=None, tol=1e-5,
                 solver="auto", learning_rate="invscaling", eta0=None, power_t=0.25,
                 batch_size=1, shuffle=True, early_stopping=False, validation_fraction=0.1,
                 n_iter_no_change=5, warm_start=False, random_state=None, verbose=0,
                 n_jobs=None):
        store_init_params(self, locals())


@register_model
class PolynomialNetworkClassifier(_OneVsRestMixin, _BasePolynomialNetwork):
    __doc__ = """Polynomial network classifier, binary or multi-class (one-vs-rest).
    """ + _PN_OBJECTIVE_DOC + _PN_PARAMS_DOC + """    loss : {"logistic", "squared_hinge"}, default="logistic"
        Loss on labels in {-1, +1}; ``predict_proba`` needs "logistic".

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    intercept_ : ndarray of shape (n_outputs,)
        n_outputs is 1 for two classes, else n_classes.
    w_ : ndarray of shape (n_outputs, n_features)
    P_ : ndarray of shape (n_outputs, n_features, n_components)
    gamma_ : ndarray of shape (n_outputs, n_components)
    lam_ : ndarray of shape (n_outputs, n_components)
    n_iter_ : ndarray of shape (n_outputs,)
    solver_ : str
        The solver that ran: ``solver``, or the one "auto" chose ("cd" or "lbfgs").
    n_features_in_ : int
    """

    def __init__(self, degree=2, n_components=8, *, lower_degrees="augment",
                 output_weights="learned", loss="logistic", fit_linear=True,
                 fit_intercept=True, alpha=1e-4, beta=1e-4, init_scale=0.1, max_iter=None,
                 tol=1e-5, solver="auto",
                 learning_rate="invscaling", eta0=None, power_t=0.25, batch_size=1,
                 shuffle=True, early_stopping=False, validation_fraction=0.1,
                 n_iter_no_change=5, warm_start=False, random_state=None, verbose=0,
                 n_jobs=None):
        store_init_params(self, locals())
