"""The one description of the problem every pass solves.

Coordinate descent (:func:`polylite._engine._cd.cd_epoch`), the stochastic passes
(:func:`polylite._engine._sgd.sgd_epoch`, ``objective_gradient``) and the pairwise
ranking passes (:func:`polylite._engine._pairwise.pairwise_pass`) take the same
:class:`Problem`: the rows' targets and weights, the model's structure, its loss and its
penalties.  The stochastic passes also take a :class:`Schedule`; the predictions
(:func:`polylite._engine._kernels.predict_csr`, ``predict_relational``) a :class:`FittedModel`.
"""
from typing import NamedTuple

import numpy as np

__all__ = ["Problem", "Schedule", "FittedModel", "SCHEDULES", "ADAGRAD", "FTRL"]

#: The learning-rate schedules of SGD (``learning_rate``), with their codes.
SCHEDULES = {"constant": 0, "invscaling": 1}
#: The schedule code of AdaGrad (per-coordinate step sizes).
ADAGRAD = 2
#: The schedule code of FTRL-proximal (McMahan et al. 2013).
FTRL = 3


class Problem(NamedTuple):
    """What a pass minimises (or, with a prior, samples)."""
    y: np.ndarray              # (n,) float64 targets (labels in {-1, +1} to classify);
                               # None for the pairwise passes (positives only)
    sample_weight: np.ndarray  # (n,) float64 (CD: summing to 1; SGD: mean 1); None for
                               # the pairwise passes (the positives' weights come with them)
    kernel: int                # polylite.kernels.KERNELS
    degrees: np.ndarray        # intc, the degree of each factor block
    loss: int                  # a code of the loss table (polylite._engine._losses)
    alpha: float               # L2 penalty of w, per sample
    beta: float                # L2 penalty of the factors, per sample
    fit_intercept: bool
    fit_linear: bool
    fit_lam: bool = False      # learn the output weights lam (polynomial networks)
    fields: np.ndarray = None  # field-aware kernel: intc, the field of each feature
    n_fields: int = 0          # field-aware kernel: P's rows hold n_fields vectors each
    row_penalty: bool = False  # stochastic passes: penalise, in each row's step, only
                               # the parameters the row reads (libffm's penalty)


class Schedule(NamedTuple):
    """The step sizes of a stochastic pass."""
    kind: int                  # a code of SCHEDULES, ADAGRAD or FTRL
    eta0: float                # the initial (constant, AdaGrad: the base; FTRL: its
                               # alpha) step size
    power_t: float             # inverse scaling: eta0 / step ** power_t
    batch_size: int = 1        # rows per step
    l1: float = 0.0            # FTRL's L1 and L2 penalties, on the sum of the losses
    l2: float = 0.0            # so far (McMahan et al.'s lambda_1 and lambda_2)
    ftrl_beta: float = 1.0     # FTRL's beta


class FittedModel(NamedTuple):
    """A model's parameters as the compiled predictions read them (one dtype)."""
    intercept: float
    w: np.ndarray              # (d,), or empty: no linear term
    P: np.ndarray              # (n_blocks, d, k)
    gamma: np.ndarray          # (n_dummy, k): dummy features of value 1 (factor block 0)
    lam: np.ndarray            # (k,): the polynomial kernel's output weights
    degrees: np.ndarray        # intc, the degree of each factor block
    kernel: int                # polylite.kernels.KERNELS
    fields: np.ndarray = None  # field-aware kernel: intc, the field of each feature
    n_fields: int = 0          # field-aware kernel: P's rows hold n_fields vectors each
