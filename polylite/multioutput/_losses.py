"""Losses of the multi-output models (NIPS 2017, appendix A), each one pass over the rows
(``_passes.loss_pass``, in C; fused into the refits' passes by ``_passes.output_loss``).

Each loss takes the targets of the rows and the outputs ``O`` (n_samples, n_outputs) and
returns the weighted mean ``sum_i s_i loss(y_i, o_i)`` (the weights ``s`` sum to 1) with
the matrix ``W = s_i * d loss(y_i, o_i) / d o_ic``: the diagonals D_c of the paper's
Gamma_c, already weighted.  ``smoothness`` bounds the largest eigenvalue of the Hessian of
one row's loss in o (the step sizes of the refits are derived from it).

Multi-class losses (targets: class codes 0..m-1):

* "logistic": ``log sum_c exp(o_c) - o_y``; gradient softmax(o) - e_y;
* "smooth_hinge": the multi-class hinge max_c (1[c != y] + o_c) - o_y smoothed by a
  squared norm: ``max_{p in simplex} <p, 1 - e_y + o - o_y> - ||p||^2 / 2 + 1/2``, an
  upper bound of the hinge (||p|| <= 1 on the simplex), zero once o_y exceeds every
  other output by 2 or more; gradient p* - e_y with p* the projection of
  1 - e_y + o onto the simplex;
* "squared_hinge": ``sum_{c != y} max(0, 1 + o_c - o_y)^2`` (Blondel, Seki, Uehara 2013).

Per-output losses (targets: a real matrix Y), summed over the outputs:

* "squared": ``sum_c (o_c - y_c)^2 / 2``;
* "logistic": ``sum_c log(1 + exp(-y_c o_c))`` with y_c in {-1, 1} (binary logistic per
  output: multi-label, or the ordinal McRank reduction).
"""
import numpy as np
from scipy.special import softmax

from .._engine._losses import LOSSES, MULTICLASS_LOSSES
from . import _passes

CLASSIFIER_LOSSES = ("logistic", "smooth_hinge", "squared_hinge")
REGRESSOR_LOSSES = ("squared", "logistic")


class _Loss:
    """A loss computed by ``_passes.loss_pass`` (and fused into the refits' passes by
    ``_passes.output_loss``), identified there by ``kind``."""
    name = ""
    kind = None

    def __call__(self, targets, O, s, gradient=True):
        """(weighted mean loss, W or None)."""
        raise NotImplementedError

    def smoothness(self, n_outputs):
        raise NotImplementedError


class _Multiclass(_Loss):
    """A multi-class loss of the outputs; targets: class codes 0..m-1."""

    def __call__(self, codes, O, s, gradient=True):
        O = np.ascontiguousarray(O, dtype=np.float64)
        W = np.empty_like(O) if gradient else None
        value = _passes.loss_pass(self.kind, np.asarray(codes, dtype=np.intp), O,
                                  np.asarray(s, dtype=np.float64), W, gradient)
        return value, W


class MulticlassLogistic(_Multiclass):
    name = "logistic"
    kind = MULTICLASS_LOSSES["logistic"]

    def smoothness(self, n_outputs):
        # The Hessian diag(p) - p p^T has eigenvalues at most 1/2.
        return 0.5


class SmoothHinge(_Multiclass):
    name = "smooth_hinge"
    kind = MULTICLASS_LOSSES["smooth_hinge"]

    def smoothness(self, n_outputs):
        return 1.0   # the projection onto the simplex is 1-Lipschitz


class MulticlassSquaredHinge(_Multiclass):
    name = "squared_hinge"
    kind = MULTICLASS_LOSSES["squared_hinge"]

    def smoothness(self, n_outputs):
        # 2 x the Laplacian of a star with up to m - 1 leaves: eigenvalues up to 2 m.
        return 2.0 * n_outputs


class _PerOutput(_Loss):
    """A loss of the kernel layer (``polylite/_engine/_losses.pxd``) applied to every output,
    summed over the outputs, in one threaded pass (``_passes.loss_pass``)."""

    def __init__(self, n_threads=1):
        self.n_threads = n_threads

    def __call__(self, Y, O, s, gradient=True):
        O = np.ascontiguousarray(O, dtype=np.float64)
        W = np.empty_like(O) if gradient else None
        value = _passes.loss_pass(self.kind, Y, O, s, W, gradient, self.n_threads)
        return value, W


class Squared(_PerOutput):
    name = "squared"
    kind = LOSSES["squared"]

    def smoothness(self, n_outputs):
        return 1.0


class BinaryLogistic(_PerOutput):
    name = "logistic"
    kind = LOSSES["logistic"]

    def smoothness(self, n_outputs):
        return 0.25


def classifier_loss(name):
    return {"logistic": MulticlassLogistic, "smooth_hinge": SmoothHinge,
            "squared_hinge": MulticlassSquaredHinge}[name]()


def regressor_loss(name, n_threads=1):
    return {"squared": Squared, "logistic": BinaryLogistic}[name](n_threads)


def class_probabilities(O):
    """softmax of the outputs of the multi-class logistic model."""
    return softmax(O, axis=1)
