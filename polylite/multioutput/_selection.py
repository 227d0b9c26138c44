"""Basis vector selection: the linear minimisation step of the conditional gradient
(NIPS 2017, section 4; ALGORITHMS.md section 5, step 2).

With W = s * the loss gradients (n_samples, n_outputs), the negative gradient of the
objective in the row of a basis vector h is g_h = -(h^T Gamma_c h)_c, and

    q_c(h) = h^T Gamma_c h = sum_i W_ic sigma(h, x~_i).

The step looks for a unit vector h maximising ||q(h)||_p: p = inf for "l1", 2 for
"l1/l2", 1 for "l1/linf".

* p = inf: the dominant eigenvector of each Gamma_c (largest |eigenvalue|), the best c
  kept.  The eigenvectors of all outputs are iterated together, one pass over X per
  iteration (:meth:`RowOperator.gamma` with two columns per output, one for each end of
  the spectrum).  Each iteration is the power method's step made optimal (LOBPCG with
  one vector per column): the next vector is the best one (largest, or smallest,
  Rayleigh quotient) of the span of h, Gamma h and the previous step, a 3 x 3
  eigenproblem that costs no extra pass.  It converges much faster than the power step
  and, unlike it, also when Gamma has eigenvalues +lambda and -lambda.  It stops when
  ||Gamma h - rho h|| <= power_tol |rho| (rho of the larger end).
* p = 2 or 1: from the extreme eigenvector (of any output, either end) with the
  largest ||q(h)||_p, the refinement of the paper (its equation 6):
  ``h <- (1 - eta) h + eta grad f(h) / ||grad f(h)||`` for f = sum_c q_c^2 (p = 2) or
  sum_c huber(q_c) (p = 1), eta by Armijo's rule from 1, each new h rescaled onto the
  unit sphere (f grows with the scale of h, so this can only increase it).  Since
  grad f = 2 Gamma_w h with w = W f'(q), one Gamma (one column) per iteration suffices,
  and f itself needs only the features of h.  The paper's Huber function has width 1
  for its objective summed over the rows; ours is a mean, so the width is relative:
  HUBER_WIDTH x max_c |q_c| at the start.  It stops when the ascent's gap
  grad f . (s - h) falls below refine_tol f, or f gains less than refine_tol f.
"""
import numpy as np

from . import _passes
from ._projections import dual_norm

HUBER_WIDTH = 1e-2
ARMIJO_SLOPE = 1e-4
MAX_HALVINGS = 30


def _dots(A, B):
    """Column-wise dot products of two (dim, m) arrays."""
    return np.einsum("ij,ij->j", A, B)


def dominant_eigenvectors(op, W, rng, tol, max_iter, start=None):
    """Extreme eigenvectors of every Gamma_c (columns of W).

    Each Gamma_c is iterated from both ends of its spectrum (two columns per output, one
    pass over X for all of them), each column by the locally optimal step (LOBPCG with
    one vector): the next vector is the best, largest or smallest Rayleigh quotient, of
    the span of the vector q, its residual Gamma q - rho q and the previous step d, a
    3 x 3 eigenproblem that costs no extra pass (Gamma d is carried along).  Either end
    alone could settle on the wrong one (an extreme eigenvector is a local maximum of
    |Rayleigh quotient|), the pair cannot.  The vectors are (dim, m) arrays: the
    iteration does, besides the pass, five sweeps over them (``_passes``: the residuals,
    the previous step made orthogonal, the new vectors), no full-length temporaries.

    ``start`` (dim, 2 * n_outputs), if given, are the starting vectors: the answer for
    the previous W, whose Gamma_c differ little from these, saves most iterations.

    Returns
    -------
    Q : ndarray of shape (dim, 2 * n_outputs), unit columns
        Column c approximates the eigenvector of the largest eigenvalue of Gamma_c,
        column n_outputs + c that of its smallest.
    rho : ndarray of shape (2 * n_outputs,)
        Their Rayleigh quotients (eigenvalue estimates).
    n_iter : int
        Iterations run (passes over X after the first).
    diagonal : ndarray of shape (dim, n_outputs) or None
        The FM diagonal terms (X~ o X~)^T W (:meth:`RowOperator.gamma`), None for "pn".
    """
    c = W.shape[1]
    W = np.ascontiguousarray(W, dtype=op.dtype)   # converted once for all the passes
    output = np.tile(np.arange(c), 2)             # the output (column of W) of a column
    sign = np.where(np.arange(2 * c) < c, 1.0, -1.0)   # +1 climbs, -1 descends
    Q = rng.standard_normal((op.dim, 2 * c)) if start is None else start.copy()
    Q /= np.linalg.norm(Q, axis=0)
    GQ, diagonal = op.gamma(Q, W, columns=output)
    rho = _dots(Q, GQ)
    D, GD = np.zeros_like(Q), np.zeros_like(Q)
    stalled = np.zeros(2 * c, dtype=bool)
    n_iter = 0
    P = np.empty_like(Q)
    spare = None
    while True:
        residual = _passes.unit_residuals(Q, GQ, rho, P)   # P: the unit residuals
        # Converged to tol relative to the larger end of the same Gamma_c, or stalled
        # at the rounding floor (a step that no longer improves rho).
        scale = np.tile(np.maximum(np.abs(rho[:c]), np.abs(rho[c:])), 2)
        running = (residual > tol * scale) & ~stalled
        if not running.any() or n_iter >= max_iter:
            break
        n_iter += 1
        # Work on the running columns only: all of Q, GQ, P, D, GD when all are running
        # (d and gd are updated in place; a column whose step then fails stalls, and
        # its D is not used again), else copies of the running columns.
        every = running.all()
        cols = slice(None) if every else np.flatnonzero(running)
        q, gq, p, d, gd = (Q, GQ, P, D, GD) if every else (
            np.ascontiguousarray(A[:, cols]) for A in (Q, GQ, P, D, GD))
        rq = rho[cols]
        gp, _ = op.gamma(p, W, columns=output[cols], diagonal=diagonal)
        # The previous step made orthogonal to q and p (Gamma d follows linearly); it
        # enters with unit norm, or is left out when it has (nearly) vanished.
        (dd, pgp, dgd, qgd, dgq, pgd, dgp,
         dd_before) = _passes.orthogonalise_step(q, p, d, gq, gp, gd)
        norm_d = np.sqrt(dd)
        keep = norm_d > 1e-6 * np.sqrt(dd_before + 1e-300)
        inv = np.where(keep, 1.0 / np.where(keep, norm_d, 1.0), 0.0)
        # Gamma on the span of (q, p, d / ||d||), one symmetric 3 x 3 matrix per column.
        A = np.empty((q.shape[1], 3, 3))
        A[:, 0, 0] = rq
        A[:, 1, 1] = pgp
        A[:, 2, 2] = dgd * inv * inv
        A[:, 0, 1] = A[:, 1, 0] = residual[cols]      # p^T Gamma q = p^T r = ||r||
        A[:, 0, 2] = A[:, 2, 0] = 0.5 * (qgd + dgq) * inv
        A[:, 1, 2] = A[:, 2, 1] = 0.5 * (pgd + dgp) * inv
        # A left-out direction must not be chosen: its eigenvalue goes to the far end.
        direction = sign[cols]
        A[~keep, 2, 2] = rq[~keep] - direction[~keep] * (
            1.0 + 10 * (np.abs(rq[~keep]) + residual[cols][~keep]))
        _, vectors = np.linalg.eigh(A)
        y = vectors[np.arange(q.shape[1]), :, np.where(direction > 0, 2, 0)]
        y[:, 2] *= inv   # the coefficient of d itself
        # The arrays that the last full step replaced are reused (no new pages).
        q_new, gq_new, step, gstep = (spare if every and spare is not None
                                      else (np.empty_like(q) for _ in range(4)))
        rho_new = _passes.combine_step(np.ascontiguousarray(y), (q, p, d), (gq, gp, gd),
                                       (q_new, gq_new, step, gstep))
        better = direction * (rho_new - rq) > 1e-12 * scale[cols]
        where = np.flatnonzero(running)
        stalled[where[~better]] = True
        if every and better.all():
            spare = Q, GQ, D, GD
            Q, GQ, D, GD, rho = q_new, gq_new, step, gstep, rho_new
            continue
        moved = where[better]
        Q[:, moved], GQ[:, moved] = q_new[:, better], gq_new[:, better]
        D[:, moved], GD[:, moved] = step[:, better], gstep[:, better]
        rho[moved] = rho_new[better]
    return Q, rho, n_iter, diagonal


def _objective(q, p, width):
    """f_p of the values q = q(h) and its derivative in q."""
    if p == 2:
        return float(q @ q), 2.0 * q
    a = np.abs(q)
    small = a <= width
    value = np.where(small, 0.5 * q * q / width, a - 0.5 * width)
    slope = np.where(small, q / width, np.sign(q))
    return float(value.sum()), slope


def _features_and_q(op, W, h):
    z = op.features(h)[:, 0]
    return z, W.T @ z.astype(np.float64, copy=False)


def refine(op, W, diagonal, h, z, q, p, tol, max_iter):
    """The paper's refinement of h for f_p (see the module docstring), from h with its
    features z and q(h); ``diagonal`` as returned by :func:`dominant_eigenvectors`
    (that of Gamma_w is linear in w = W f'(q): no pass computes it again).

    Returns (h, its features column z, q(h), iterations).
    """
    width = HUBER_WIDTH * float(np.abs(q).max(initial=0.0))
    if p == 1 and width == 0:
        return h, z, q, 0
    f, df = _objective(q, p, width)
    n_iter = 0
    while n_iter < max_iter and f > 0:
        n_iter += 1
        w = W @ df
        G, _ = op.gamma(h[:, np.newaxis], w[:, np.newaxis],
                        diagonal=None if diagonal is None else diagonal @ df[:, np.newaxis])
        grad = 2.0 * G[:, 0]
        norm = np.linalg.norm(grad)
        if norm == 0:
            break
        direction = grad / norm - h
        slope = float(grad @ direction)
        if slope <= tol * f:
            break
        eta = 1.0
        for _ in range(MAX_HALVINGS):
            candidate = h + eta * direction
            candidate /= np.linalg.norm(candidate)
            z_new, q_new = _features_and_q(op, W, candidate)
            f_new, df_new = _objective(q_new, p, width)
            if f_new >= f + ARMIJO_SLOPE * eta * slope:
                break
            eta *= 0.5
        else:
            break
        gain = f_new - f
        h, z, q, f, df = candidate, z_new, q_new, f_new, df_new
        if gain <= tol * f:
            break
    return h, z, q, n_iter


def select_basis(op, W, penalty, rng, *, power_tol, max_power_iter, refine_tol,
                 max_refine_iter, start=None):
    """A unit basis vector h approximately maximising ||q(h)||_p (module docstring).

    ``W`` is float64.

    Returns
    -------
    h : ndarray of shape (dim,)
    z : ndarray of shape (n_samples,)
        The features sigma(h, x~_i), in the dtype of the data.
    info : dict
        ``value`` (||q(h)||_p), ``power_iterations``, ``refine_iterations``,
        ``eigenvectors`` (the extreme eigenvectors found: ``start`` of the next call).

    ``start``: as in :func:`dominant_eigenvectors`.
    """
    Q, rho, power_iterations, diagonal = dominant_eigenvectors(op, W, rng, power_tol,
                                                               max_power_iter, start)
    refine_iterations = 0
    if penalty == "l1":
        h = Q[:, int(np.argmax(np.abs(rho)))].copy()
        z, q = _features_and_q(op, W, h)
    else:
        # Refine the extreme eigenvector that is best for ||q||_p already (one pass,
        # which also gives the features the refinement starts from).
        Z = op.features(Q.T)
        values = W.T @ Z.astype(np.float64, copy=False)
        best = int(np.argmax([dual_norm(v, penalty) for v in values.T]))
        h, z, q, refine_iterations = refine(
            op, W, diagonal, Q[:, best].copy(), Z[:, best].copy(), values[:, best],
            2 if penalty == "l1/l2" else 1, refine_tol, max_refine_iter)
    return h, z, dict(value=dual_norm(q, penalty), power_iterations=power_iterations,
                      refine_iterations=refine_iterations, eigenvectors=Q)
