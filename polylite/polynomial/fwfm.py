"""Field-weighted factorization machines (Pan et al., "Field-weighted Factorization
Machines for Click-Through Rate Prediction in Display Advertising", WWW 2018), trained
by the engine's stochastic passes (AdaGrad, SGD or FTRL-proximal).

The model is the engine's field-weighted kernel (``polylite._engine._kernels``:
``field_weighted_term``) on one factor block of one latent vector per feature, with the
weights of the pairs of fields in the engine's ``lam`` (packed, the upper triangle of the
symmetric matrix); the passes, their step rules and the epoch loop are the factorization
machines' (:class:`polylite.polynomial._base._PolynomialModel`), the fields, the
normalisation of the rows and the model files the field models'
(:class:`polylite.polynomial._fields._FieldModel`).
"""
import numpy as np
from sklearn.base import RegressorMixin

from .. import kernels
from .._io import register_model
from ._base import check_model_memory
from ._classifier import _OneVsRestMixin, _RegressorFitMixin
from ._fields import _FieldModel, _classifier_init, _regressor_init
from .ffm import _FFM_PARAMS_DOC

__all__ = ["FieldWeightedFactorizationMachineRegressor",
           "FieldWeightedFactorizationMachineClassifier"]


class _BaseFieldWeightedFM(_FieldModel):

    _has_lam = True  # the weights of the pairs of fields, in the engine's lam

    @property
    def _fit_lam(self):
        return True

    def _structure(self):
        return "field-weighted", [2], 0

    def _factor_width(self):
        return self.n_components

    def _lam_width(self):
        return self.n_fields_ * (self.n_fields_ + 1) // 2

    def _check_model_size(self, n_features, n_outputs, itemsize):
        super()._check_model_size(n_features, n_outputs, itemsize)
        n_pairs = self._lam_width()
        check_model_memory(n_outputs * n_pairs, itemsize, self.n_components,
                           "outputs, pairs of fields", (n_outputs, n_pairs),
                           advice="give the columns fewer fields")

    # The fitted factors: P_ of shape ([n_outputs,] n_features, n_components) and the
    # weights field_weights_ of shape ([n_outputs,] n_fields, n_fields), symmetric (the
    # weights of the pairs of fields start at 1: the model starts as a factorization
    # machine).
    def _publish_fields(self, stack):
        pairs = int(np.count_nonzero(stack["lam"]))
        self.n_nonzero_field_pairs_ = pairs
        self.n_nonzero_weights_ += pairs
        self.field_weights_ = kernels.unpack_field_weights(self.lam_, self.n_fields_)
        del self.lam_

    def _stacked_lam(self, n_outputs, dtype):
        return kernels.pack_field_weights(self.field_weights_).reshape(n_outputs, -1)

    @property
    def n_parameters_(self):
        """Number of parameters of the fitted model: the intercepts, the linear weights,
        the latent vectors and the weights of the pairs of fields."""
        n_out = np.size(self.intercept_)
        return int(n_out * (1 + self.w_.shape[-1] + self.P_.shape[-2] * self.P_.shape[-1]
                            + self._lam_width()))


_FWFM_PARAMS_DOC = (_FFM_PARAMS_DOC
                    .replace("""    n_components : int, default=4
        Length k of each latent vector (libffm's ``-k``).  The model holds
        ``n_features * n_fields * n_components`` factors.""",
                             """    n_components : int, default=4
        Length k of each latent vector.  The model holds ``n_features * n_components``
        factors and ``n_fields * (n_fields + 1) / 2`` weights of pairs of fields.""")
                    .replace("""        None: every column is a field of its own (small data only: the model then grows
        with the square of the columns).""",
                             """        None: every column is a field of its own (small data only: the weights of the
        pairs of fields then grow with the square of the columns).""")
                    .replace("""    beta : float, default=2e-5
        L2 regularisation of the latent vectors ``P_``, per sample, as libffm's ``-l``:
        each row's step penalises the vectors its prediction reads (feature j's vectors
        of the fields of the row's other nonzeros), so frequent features are penalised
        more than rare ones.""",
                             """    beta : float, default=2e-5
        L2 regularisation of the latent vectors ``P_`` and of the weights of the pairs
        of fields ``field_weights_``, per sample, as the field-aware models': each row's
        step penalises the vectors of its nonzeros and the weights of its pairs of
        fields, so frequent features and pairs are penalised more than rare ones.""")
                    .replace("""        The latent vectors start uniform in ``[0, init_scale)``; None: 1 /
        sqrt(n_components), as libffm.""",
                             """        The latent vectors start uniform in ``[0, init_scale)``; None: 1 /
        sqrt(n_components), as the field-aware models.  The weights of the pairs of
        fields start at 1.""")
                    .replace("""        Epochs (libffm's ``-t``).""", """        Epochs.""")
                    .replace("""        steps on the parameters it reads.  FTRL's first proximal term (its beta over
        ``eta0``) is centred at the initial model, as the later ones are at the
        iterates: the first step moves the latent vectors from their random start, as
        AdaGrad's does,""",
                             """        steps on the parameters it reads, the weights of its pairs of fields among
        them.  FTRL's first proximal term (its beta over ``eta0``) is centred at the
        initial model, as the later ones are at the iterates: the first step moves the
        weights of the pairs of fields from 1 and the latent vectors from their random
        start, as AdaGrad's does,""")
                    .replace("""        start, as AdaGrad's does, where McMahan et al.'s zero state would first set them near 0
        (``l1`` and ``l2`` stay centred at 0).""",
                             """        start, as AdaGrad's does, where McMahan et al.'s zero state would first set
        them near 0 (``l1`` and ``l2`` stay centred at 0).""")
                    .replace("""        Base step size (libffm's ``-r``).""", """        Base step size.""")
                    .replace("""    l1 : float, default=0.0
        L1 penalty of "ftrl" (McMahan's lambda_1), which sets weights and factors
        exactly to zero (``n_nonzero_weights_`` counts those kept).""",
                             """    l1 : float, default=0.0
        L1 penalty of "ftrl" (McMahan's lambda_1), on the linear weights, the latent
        vectors and the weights of the pairs of fields (centred at 0, as FTRL's),
        which it sets exactly to zero (``n_nonzero_weights_`` counts those kept): a
        pair of fields whose weight is 0 no longer interacts
        (``n_nonzero_field_pairs_`` counts the pairs kept).""")
                    .replace("""    l2 : float, default=0.0
        L2 penalty of "ftrl" (McMahan's lambda_2), as ``l1``.""",
                             """    l2 : float, default=0.0
        L2 penalty of "ftrl" (McMahan's lambda_2), on the same weights as ``l1``
        (the weights of the pairs of fields towards 0)."""))

_FWFM_OBJECTIVE_DOC = """
    ``y_hat(x) = intercept_ + <w_, x> + sum_{j < j'} R[f(j), f(j')] <P_[j], P_[j']> x_j
    x_j'`` with f(j) the field of column j (``fields_``), R the symmetric matrix
    ``field_weights_`` (one learned weight per pair of fields, the same field's pairs
    included) and x the row scaled to unit norm when ``normalize``.  The linear term is
    the plain one, a weight per feature (the paper's variants with linear vectors per
    feature or per field are not offered).  The objective is ``sum_i s_i (loss(y_i,
    y_hat_i) + alpha/2 ||w[x_i]||^2 + beta/2 (||P[x_i]||^2 + ||R[x_i]||^2)) / sum_i s_i``
    with sample weights ``s_i`` (1 by default), where ``w[x_i]``, ``P[x_i]`` and
    ``R[x_i]`` are the weights, vectors and weights of pairs of fields that row i's
    prediction reads.

    The model has one latent vector per feature where a field-aware machine has one per
    feature and field: ``n_fields`` times fewer factors, for an accuracy close to it on
    click-through data (the paper's finding; :doc:`/user_guide/ctr` measures it).
"""


@register_model
class FieldWeightedFactorizationMachineRegressor(RegressorMixin, _RegressorFitMixin,
                                                 _BaseFieldWeightedFM):
    __doc__ = """Field-weighted factorization machine regressor (squared loss).

    Each feature has one latent vector, and a pair of features interacts through the
    product of their vectors times a learned weight of their pair of fields (Pan et al.,
    "Field-weighted Factorization Machines for Click-Through Rate Prediction in Display
    Advertising", WWW 2018).
    """ + _FWFM_OBJECTIVE_DOC + _FWFM_PARAMS_DOC + """
    Attributes
    ----------
    intercept_ : float
    w_ : ndarray of shape (n_features,)
        Linear weights (zeros when ``fit_linear=False``).
    P_ : ndarray of shape (n_features, n_components)
        ``P_[j]`` is feature j's latent vector.
    field_weights_ : ndarray of shape (n_fields, n_fields)
        The weight of each pair of fields (symmetric).
    fields_ : ndarray of shape (n_features,)
        The field of each column.
    n_fields_ : int
    n_parameters_ : int
        Number of parameters (intercept, linear weights, latent vectors, weights of the
        pairs of fields).
    n_nonzero_weights_ : int
        Nonzero entries of ``w_``, ``P_`` and of the weights of the pairs of fields
        (each pair once; with "ftrl" and ``l1 > 0``, the weights it keeps).
    n_nonzero_field_pairs_ : int
        Pairs of fields (each once, a field with itself included) whose weight is
        nonzero: the pairs that interact (with "ftrl" and ``l1 > 0``, those it
        keeps).
    n_iter_ : int
        Number of epochs run.
    solver_ : str
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from polylite import FieldWeightedFactorizationMachineRegressor
    >>> X = np.random.RandomState(0).rand(50, 4)
    >>> y = X[:, 0] * X[:, 1] + X[:, 2]
    >>> fwfm = FieldWeightedFactorizationMachineRegressor(fields=[0, 0, 1, 2],
    ...                                                   random_state=0).fit(X, y)
    >>> fwfm.P_.shape, fwfm.field_weights_.shape
    ((4, 4), (3, 3))
    """

    __init__ = _regressor_init


@register_model
class FieldWeightedFactorizationMachineClassifier(_OneVsRestMixin, _BaseFieldWeightedFM):
    __doc__ = """Field-weighted factorization machine classifier, binary or multi-class.

    A model of click-through-rate prediction with a field-aware machine's accuracy and a
    factorization machine's size (Pan et al., "Field-weighted Factorization Machines for
    Click-Through Rate Prediction in Display Advertising", WWW 2018): each feature has
    one latent vector, and a pair of features interacts through the product of their
    vectors times a learned weight of their pair of fields.  Multi-class problems are
    solved one-vs-rest (one model per class).
    """ + _FWFM_OBJECTIVE_DOC + _FWFM_PARAMS_DOC + """    loss : {"logistic", "squared_hinge"}, default="logistic"
        Loss on labels in {-1, +1}; ``predict_proba`` needs "logistic".

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    intercept_ : ndarray of shape (n_outputs,)
        n_outputs is 1 for two classes, else n_classes.
    w_ : ndarray of shape (n_outputs, n_features)
    P_ : ndarray of shape (n_outputs, n_features, n_components)
    field_weights_ : ndarray of shape (n_outputs, n_fields, n_fields)
        The weight of each pair of fields (symmetric), per output.
    fields_ : ndarray of shape (n_features,)
        The field of each column.
    n_fields_ : int
    n_parameters_ : int
        Number of parameters (intercepts, linear weights, latent vectors, weights of the
        pairs of fields).
    n_nonzero_weights_ : int
        Nonzero entries of ``w_``, ``P_`` and of the weights of the pairs of fields
        (each pair once, per output; with "ftrl" and ``l1 > 0``, the weights it keeps).
    n_nonzero_field_pairs_ : int
        Pairs of fields (each once, per output, a field with itself included) whose
        weight is nonzero: the pairs that interact (with "ftrl" and ``l1 > 0``, those
        it keeps).
    n_iter_ : ndarray of shape (n_outputs,)
    solver_ : str
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from polylite import FieldWeightedFactorizationMachineClassifier
    >>> rng = np.random.RandomState(0)
    >>> X = rng.randint(0, 2, size=(200, 6)).astype(float)
    >>> y = (X[:, 0] * X[:, 3] + X[:, 1] > 0.5).astype(int)
    >>> clf = FieldWeightedFactorizationMachineClassifier(
    ...     fields=[0, 0, 1, 1, 2, 2], random_state=0).fit(X, y)
    >>> clf.predict_proba(X[:2]).shape
    (2, 2)
    """

    __init__ = _classifier_init
