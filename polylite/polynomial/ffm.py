"""Field-aware factorization machines (Juan et al., RecSys 2016), trained by the engine's
stochastic passes (AdaGrad as libffm, SGD or FTRL-proximal).

The model is the engine's field-aware kernel (``polylite._engine._kernels``:
``field_aware_term``) on one factor block whose row j holds feature j's latent vector for
each field; the passes, their step rules and the epoch loop are the factorization
machines' (:class:`polylite.polynomial._base._PolynomialModel`), the fields, the
normalisation of the rows and the model files the field models'
(:class:`polylite.polynomial._fields._FieldModel`).
"""
from sklearn.base import RegressorMixin

from .._io import register_model
from ._classifier import _OneVsRestMixin, _RegressorFitMixin
from ._fields import (_FieldModel, _classifier_init, _regressor_init,
                      fields_of)  # noqa: F401 (fields_of: the models' fields)

__all__ = ["FieldAwareFactorizationMachineRegressor",
           "FieldAwareFactorizationMachineClassifier"]


class _BaseFieldAwareFM(_FieldModel):

    def _structure(self):
        return "field-aware", [2], 0

    def _factor_width(self):
        return self.n_fields_ * self.n_components

    # The fitted factors: P_ of shape ([n_outputs,] n_features, n_fields, n_components),
    # a view of the engine's block of rows of n_fields * n_components entries.
    def _publish_fields(self, stack):
        self.P_ = self.P_.reshape(self.P_.shape[:-1] + (self.n_fields_, self.n_components))


_FFM_PARAMS_DOC = """
    Parameters
    ----------
    n_components : int, default=4
        Length k of each latent vector (libffm's ``-k``).  The model holds
        ``n_features * n_fields * n_components`` factors.
    fields : array-like of int, list of Field, FieldEncoder or None, default=None
        The field of each column: an array (``fields[j]`` the field of column j, as
        :func:`polylite.datasets.load_libffm` returns it), or the ``fields_`` of the
        fitted :class:`polylite.FieldEncoder` that made X, whose fields become the
        model's, in order (the fitted encoder itself is taken too, but scikit-learn's
        ``clone``, as in a grid search, would hand the model an unfitted copy of it).
        None: every column is a field of its own (small data only: the model then grows
        with the square of the columns).
    normalize : bool, default=True
        Scale each row to unit Euclidean norm before it enters the model, in fitting and
        in prediction (libffm's instance-wise normalisation: a pair's product is then
        divided by the squared norm of the row; libffm's ``--no-norm`` is False).
    fit_linear : bool, default=True
        Fit the linear term ``<w, x>``.
    fit_intercept : bool, default=True
        Fit the intercept (it is not regularised).
    alpha : float, default=2e-5
        L2 regularisation of the linear weights ``w_``, per sample: each row's step
        penalises the weights of its nonzeros, so the objective's penalty is
        ``alpha/2 sum_j (n_j / n) w_j^2`` with ``n_j`` the rows that have feature j.
    beta : float, default=2e-5
        L2 regularisation of the latent vectors ``P_``, per sample, as libffm's ``-l``:
        each row's step penalises the vectors its prediction reads (feature j's vectors
        of the fields of the row's other nonzeros), so frequent features are penalised
        more than rare ones.
    init_scale : float or None, default=None
        The latent vectors start uniform in ``[0, init_scale)``; None: 1 /
        sqrt(n_components), as libffm.
    max_iter : int, default=15
        Epochs (libffm's ``-t``).
    tol : float or None, default=None
        None: run ``max_iter`` epochs (as libffm), or until the validation loss stops
        improving with a validation set.  A number: also stop after
        ``n_iter_no_change`` epochs in which the training objective did not improve by
        ``tol`` (relative), and warn if ``max_iter`` epochs end before that.
    solver : {"adagrad", "sgd", "ftrl"}, default="adagrad"
        "adagrad": each coordinate's step is ``eta0`` divided by the root of the sum of
        its squared gradients, that sum starting at 1 (libffm's update).  "sgd": plain
        stochastic gradient with the ``learning_rate`` schedule.  "ftrl":
        FTRL-proximal (McMahan et al., "Ad Click Prediction: a View from the
        Trenches", KDD 2013) with the penalties ``l1`` and ``l2`` instead of ``alpha``
        and ``beta``, ``eta0`` its alpha and a beta of 1, one row per step; each row
        steps on the parameters it reads.  FTRL's first proximal term (its beta over
        ``eta0``) is centred at the initial model, as the later ones are at the
        iterates: the first step moves the latent vectors from their random start, as
        AdaGrad's does, where McMahan et al.'s zero state would first set them near 0
        (``l1`` and ``l2`` stay centred at 0).
    learning_rate : {"constant", "invscaling"}, default="invscaling"
        Step size of "sgd": ``eta0``, or ``eta0 / t^power_t`` at step t.
    eta0 : float, default=0.2
        Base step size (libffm's ``-r``).
    power_t : float, default=0.25
        Exponent of the "invscaling" schedule.
    l1 : float, default=0.0
        L1 penalty of "ftrl" (McMahan's lambda_1), which sets weights and factors
        exactly to zero (``n_nonzero_weights_`` counts those kept).  FTRL's penalties
        are on the sum of the losses seen so far, as in the paper and xLearn, not per
        sample.
    l2 : float, default=0.0
        L2 penalty of "ftrl" (McMahan's lambda_2), as ``l1``.
    batch_size : int, default=1
        Rows per step (their gradients are averaged).  With ``batch_size > 1`` the
        ``n_jobs`` threads share each mini-batch (reproducible, but with libffm's step
        size mini-batches fit worse than single rows: one row per step shares its rows
        among the threads instead, see ``n_jobs``).
    shuffle : bool, default=True
        Visit the rows in a new random order every epoch.
    early_stopping : bool, default=False
        Hold out ``validation_fraction`` of the training data (stratified for
        classifiers) and stop when its loss (the log loss for the logistic loss) has not
        improved by ``tol`` for ``n_iter_no_change`` epochs, keeping the best model
        (libffm's ``--auto-stop`` with ``n_iter_no_change=1``).  ``fit`` also takes an
        explicit validation set ``X_val, y_val`` (libffm's ``-p``).
    validation_fraction : float, default=0.1
        Share of the training data held out when ``early_stopping``.
    n_iter_no_change : int, default=2
        Epochs without improvement before stopping.
    warm_start : bool, default=False
        Continue from the previous fit's parameters.
    random_state : int, RandomState instance or None, default=None
        Seed of the initialisation and of the order of the rows.
    verbose : int, default=0
        Print the objective after every epoch when > 0.
    n_jobs : int or None, default=None
        Threads (None: 1; -1: every CPU the process may use): the rows of prediction,
        the classes of a multi-class classifier, and the rows of each epoch: with
        ``batch_size=1`` ("adagrad" and "sgd") the threads share each epoch's rows and
        step on the shared parameters without locks, as libffm's threads do (at least
        1,000 rows per thread), but for the parameters of the features that many rows
        read (at least one in 128), which each thread steps in its own copy, the
        copies' changes added after every round of up to 1,024 rows per thread (fewer
        on more threads; on more than 8 threads every parameter is shared); with
        ``batch_size > 1`` they share each mini-batch.  With one row per step on more
        than one thread a fit is not reproducible bit for bit: two threads may step on
        the same vector at once, so the result changes from run to run (as libffm's);
        it fits as well as one thread.  "ftrl" steps on one thread.
"""

_FFM_OBJECTIVE_DOC = """
    ``y_hat(x) = intercept_ + <w_, x> + sum_{j < j'} <P_[j, f(j')], P_[j', f(j)]> x_j x_j'``
    with f(j) the field of column j (``fields_``) and x the row scaled to unit norm when
    ``normalize``.  The objective is ``sum_i s_i (loss(y_i, y_hat_i) + alpha/2 ||w[x_i]||^2
    + beta/2 ||P[x_i]||^2) / sum_i s_i`` with sample weights ``s_i`` (1 by default),
    where ``w[x_i]`` and ``P[x_i]`` are the weights and vectors that row i's
    prediction reads.
"""


@register_model
class FieldAwareFactorizationMachineRegressor(RegressorMixin, _RegressorFitMixin,
                                              _BaseFieldAwareFM):
    __doc__ = """Field-aware factorization machine regressor (squared loss).

    Each feature has one latent vector per field, and a pair of features interacts
    through the vector each keeps for the other's field (Juan et al., "Field-aware
    Factorization Machines for CTR Prediction", RecSys 2016).
    """ + _FFM_OBJECTIVE_DOC + _FFM_PARAMS_DOC + """
    Attributes
    ----------
    intercept_ : float
    w_ : ndarray of shape (n_features,)
        Linear weights (zeros when ``fit_linear=False``).
    P_ : ndarray of shape (n_features, n_fields, n_components)
        ``P_[j, f]`` is feature j's latent vector for field f.
    fields_ : ndarray of shape (n_features,)
        The field of each column.
    n_fields_ : int
    n_nonzero_weights_ : int
        Nonzero entries of ``w_`` and ``P_`` (with "ftrl" and ``l1 > 0``, the weights
        it keeps).
    n_iter_ : int
        Number of epochs run.
    solver_ : str
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from polylite import FieldAwareFactorizationMachineRegressor
    >>> X = np.random.RandomState(0).rand(50, 4)
    >>> y = X[:, 0] * X[:, 1] + X[:, 2]
    >>> ffm = FieldAwareFactorizationMachineRegressor(fields=[0, 0, 1, 2],
    ...                                               random_state=0).fit(X, y)
    >>> ffm.P_.shape
    (4, 3, 4)
    """

    __init__ = _regressor_init


@register_model
class FieldAwareFactorizationMachineClassifier(_OneVsRestMixin, _BaseFieldAwareFM):
    __doc__ = """Field-aware factorization machine classifier, binary or multi-class.

    The model of click-through-rate prediction that won the Criteo and Avazu challenges
    (Juan et al., "Field-aware Factorization Machines for CTR Prediction", RecSys 2016):
    each feature has one latent vector per field, and a pair of features interacts
    through the vector each keeps for the other's field.  Multi-class problems are
    solved one-vs-rest (one model per class).
    """ + _FFM_OBJECTIVE_DOC + _FFM_PARAMS_DOC + """    loss : {"logistic", "squared_hinge"}, default="logistic"
        Loss on labels in {-1, +1}; ``predict_proba`` needs "logistic".

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    intercept_ : ndarray of shape (n_outputs,)
        n_outputs is 1 for two classes, else n_classes.
    w_ : ndarray of shape (n_outputs, n_features)
    P_ : ndarray of shape (n_outputs, n_features, n_fields, n_components)
    fields_ : ndarray of shape (n_features,)
        The field of each column.
    n_fields_ : int
    n_nonzero_weights_ : int
        Nonzero entries of ``w_`` and ``P_`` (with "ftrl" and ``l1 > 0``, the weights
        it keeps).
    n_iter_ : ndarray of shape (n_outputs,)
    solver_ : str
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from polylite import FieldAwareFactorizationMachineClassifier
    >>> rng = np.random.RandomState(0)
    >>> X = rng.randint(0, 2, size=(200, 6)).astype(float)
    >>> y = (X[:, 0] * X[:, 3] + X[:, 1] > 0.5).astype(int)
    >>> clf = FieldAwareFactorizationMachineClassifier(
    ...     fields=[0, 0, 1, 1, 2, 2], random_state=0).fit(X, y)
    >>> clf.predict_proba(X[:2]).shape
    (2, 2)
    """

    __init__ = _classifier_init
