"""Algorithm 1 of the NIPS 2017 paper: the conditional gradient that grows the model one
basis vector per iteration (ALGORITHMS.md section 5).

:class:`ConditionalGradient` holds the model being grown (H, V, b), the features Z of the
training rows (and of the validation rows, if any) and the outputs; :meth:`iteration`
runs one iteration:

1. W = s * loss gradients at the current outputs (the diagonals of Gamma_c);
2. select a basis vector h (:func:`._selection.select_basis`, its eigenvector search
   started from the previous iteration's answer) and compute its features,
   which also give the Frank-Wolfe duality gap of the current model,
   ``tau ||q(h)||_p + <V, Z^T W>`` (an estimate: a lower bound of the true gap, as h is
   an approximate maximiser);
3. append h to H, its features to Z and a zero row to V; refit V (and b) by FISTA;
4. with ``refit="full"``, refit H as well;
5. drop the rows of V that the refit set to zero, with their basis vectors.
"""
import time

import numpy as np

from ._projections import penalty_value
from ._refit import Features, Problem, refit_full, refit_output
from ._selection import select_basis

# The path also stops once the objective is within rounding of zero: below
# (ROUNDING_UNITS * eps)^2 times the loss of the all-zero outputs (eps of X's dtype), the
# outputs of a squared loss match the targets to within about ROUNDING_UNITS rounding
# units, and no basis vector can lower it further in floating point.  (The test on the
# duality gap relative to the objective never passes there: both are rounding noise.)
ROUNDING_UNITS = 32


class ConditionalGradient:
    """One model being grown (see the module docstring).

    ``est`` supplies the settings (its parameters); ``H`` (n_basis, dim), ``V``
    (n_basis, n_outputs) and ``b`` (n_outputs,) are the starting model, float64.
    ``validation`` is None or (RowOperator of the validation rows, score function of
    their outputs returning a dict of numbers).
    """

    def __init__(self, est, op, loss, targets, s, H, V, b, rng, validation=None):
        self.est, self.op, self.rng = est, op, rng
        n_outputs = V.shape[1]
        self.problem = Problem(loss, targets, s, n_outputs, est.penalty, float(est.tau),
                               est.fit_intercept)
        self.features = Features(op.X.shape[0], op.dtype, s, op.n_threads)
        self.H = H
        if H.shape[0]:
            self.features.reset(op.features(H))
        self.validation = validation
        if validation is not None:
            self.Z_val = validation[0].features(H)
        self.curvature = None
        self.eigenvectors = None   # of the last selection: where the next one starts
        self.V, self.b, self.O, self.value, _ = self._refit_output(V, b)
        zero_loss = self.problem(np.zeros(self.problem.outputs_shape), gradient=False)[0]
        self.rounding_floor = (ROUNDING_UNITS * np.finfo(op.dtype).eps) ** 2 * zero_loss

    def validation_scores(self):
        """The scores of the current model on the validation rows (a dict)."""
        O_val = (self.Z_val @ self.V.astype(self.Z_val.dtype)).astype(np.float64) + self.b
        return self.validation[1](O_val)

    def _refit_output(self, V, b, start=None):
        """refit_output, with the curvature of the quadratic models carried over and
        the loss gradients at its answer kept (``self.W``) for the next selection."""
        V, b, O, value, self.W, n_iter, self.curvature = refit_output(
            self.problem, self.features, V, b, tol=self.est.refit_tol,
            max_iter=self.est.max_refit_iter, curvature=self.curvature, start=start)
        return V, b, O, value, n_iter

    def iteration(self):
        """Run one iteration; returns its record, or None if the model is optimal to
        ``tol`` already (the gap is below ``tol`` times the objective) or fits the
        training targets to rounding (``ROUNDING_UNITS``)."""
        est, start = self.est, time.perf_counter()
        if abs(self.value) <= self.rounding_floor:
            return None
        W = self.W
        h, z, info = select_basis(
            self.op, W, est.penalty, self.rng, power_tol=est.power_tol,
            max_power_iter=est.max_power_iter, refine_tol=est.refine_tol,
            max_refine_iter=est.max_refine_iter, start=self.eigenvectors)
        self.eigenvectors = info["eigenvectors"]
        gap = self.problem.tau * info["value"] + float(
            np.sum(self.V * self.features.transpose_times(W)))
        if gap <= est.tol * abs(self.value):
            return None
        self.features.append(z)
        self.H = np.vstack([self.H, h])
        V = np.vstack([self.V, np.zeros((1, self.V.shape[1]))])
        if self.validation is not None:
            self.Z_val = np.column_stack([self.Z_val, self.validation[0].features(h)])
        # The new row of V is zero: the outputs, loss and gradients have not changed.
        V, self.b, self.O, self.value, refit_iterations = self._refit_output(
            V, self.b, start=(self.O, self.value, self.W))
        if est.refit == "full":
            self.H, V, self.b, self.O, self.value, refit_iterations = refit_full(
                self.problem, self.features, self.op, self.H, V, self.b,
                tol=est.refit_tol, max_iter=est.max_refit_iter)
            _, self.W = self.problem(self.O)
            if self.validation is not None:
                self.Z_val = self.validation[0].features(self.H)
        # Rows of V that the refit drove to zero leave with their basis vectors.
        kept = np.any(V != 0, axis=1)
        if not kept.all():
            self.features.keep(kept)
            self.H, V = self.H[kept], V[kept]
            if self.validation is not None:
                self.Z_val = self.Z_val[:, kept]
        self.V = V
        record = dict(objective=self.value,
                      penalty=penalty_value(self.V, est.penalty),
                      n_basis=self.V.shape[0], gap=gap, selection=info["value"],
                      power_iterations=info["power_iterations"],
                      refine_iterations=info["refine_iterations"],
                      refit_iterations=refit_iterations)
        if self.validation is not None:
            record.update(self.validation_scores())
        record["seconds"] = time.perf_counter() - start
        return record
