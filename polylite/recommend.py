"""Top-N recommendation: score every candidate item for a batch of users.

A row of a :class:`~polylite.preprocessing.FieldEncoder` is the sum of a user part
``x_u`` (and context) and an item part ``x_i`` on disjoint columns, and every polylite
model splits over such a sum into a few products of a user factor and an item factor:

- ANOVA kernel: ``A_t(p, x_u + x_i) = sum_{j=0..t} A_j(p, x_u) A_{t-j}(p, x_i)``
  (a subset of distinct features takes j of them from the user's part), for every degree
  t, with the dummy features of the shared model on the user side;
- all-subsets kernel: ``S(p, x_u + x_i) = S(p, x_u) S(p, x_i)``;
- polynomial networks: ``(gamma + <p, x_u> + <p, x_i>)^m`` by the binomial theorem.

So the scores of all pairs are ``f_u + f_i + U R^T``, one matrix product over the item
factors per batch of users, instead of one CSR row and one prediction per pair.  Other
estimators are scored exactly by building the pair rows a batch at a time.
"""
from math import comb

import numpy as np
import scipy.sparse as sp
from sklearn.base import is_classifier
from sklearn.pipeline import Pipeline
from sklearn.utils.validation import check_is_fitted

from . import kernels
from ._validation import check_choice, check_number
from .preprocessing import FieldEncoder, _codes, _columns
from .relational import RelationalMatrix, RelationBlock

__all__ = ["recommend", "score_items"]

METHODS = ("auto", "factored", "pairs")
# Scores computed at once (users x items) when batch_size is None: a block that stays in
# cache while its top n are found.
_BATCH_SCORES = 2 ** 17


def _split_estimator(estimator, encoder):
    """(model, encoder) from a Pipeline [FieldEncoder, model] or from the arguments."""
    if isinstance(estimator, Pipeline):
        if encoder is not None:
            raise ValueError("give either a pipeline or a model and its encoder, not both")
        if len(estimator.steps) != 2 or not isinstance(estimator.steps[0][1], FieldEncoder):
            raise ValueError("the pipeline must have two steps: a FieldEncoder, then the "
                             "model")
        encoder, estimator = estimator.steps[0][1], estimator.steps[1][1]
    if not isinstance(encoder, FieldEncoder):
        raise ValueError(f"the model's encoder must be a fitted FieldEncoder, got "
                         f"{type(encoder).__name__}")
    check_is_fitted(encoder)
    check_is_fitted(estimator)
    if getattr(estimator, "n_features_in_", encoder.n_features_out_) != \
            encoder.n_features_out_:
        raise ValueError(f"the model takes {estimator.n_features_in_} features but the "
                         f"encoder makes {encoder.n_features_out_}")
    return estimator, encoder


def _factored(model):
    """True when ``model`` is a polylite model of one output whose scores split."""
    from .polynomial._base import _PolynomialModel
    if not isinstance(model, _PolynomialModel):
        return False
    return model._stacked()["P"].shape[0] == 1


def _check_single_output(model):
    if is_classifier(model) and len(model.classes_) > 2:
        raise ValueError(f"top-N recommendation ranks by one score; the classifier has "
                         f"{len(model.classes_)} classes (use a regressor or a binary "
                         f"classifier)")


class _Factors:
    """The scores ``f_u[:, None] + f_i[None, :] + U_f @ R_f.T`` of a model for its user
    rows ``Xu`` and item rows ``Xi`` (their columns disjoint), kept as the factors
    ``U = [U_f, f_u, 1]`` and ``R = [R_f, 1, f_i]`` of one matrix product."""

    def __init__(self, model, Xu, Xi):
        stack = model._stacked()
        kernel, degrees, _ = model._structure()
        w, b = stack["w"][0], float(stack["intercept"][0, 0])
        self.f_u = b + Xu @ w
        self.f_i = Xi @ w
        self._U, self._R = [], []
        if kernel == "polynomial":
            self._polynomial(Xu, Xi, stack["P"][0, 0], stack["gamma"][0], stack["lam"][0],
                             degrees[0])
        else:
            for block, degree in enumerate(degrees):
                gamma = stack["gamma"][0] if block == 0 else None
                self._kernel(Xu, Xi, stack["P"][0, block], gamma, kernel, degree)
        # One matrix product gives the whole score: [U, f_u, 1] @ [R, 1, f_i]^T.
        ones_u, ones_i = np.ones(Xu.shape[0]), np.ones(Xi.shape[0])
        dtype = stack["P"].dtype
        self.U = np.column_stack(self._U + [self.f_u, ones_u]).astype(dtype, copy=False)
        self.R = np.column_stack(self._R + [ones_i, self.f_i]).astype(dtype, copy=False)
        del self._U, self._R

    def _add(self, U, R):
        self._U.append(U)
        self._R.append(R)

    def _kernel(self, Xu, Xi, P, gamma, kernel, degree):
        if kernel == "all-subsets":
            self._add(_per_component(Xu, P, None, "all-subsets", 0),
                      _per_component(Xi, P, None, "all-subsets", 0))
            return
        # A_j of every component for j = 1..degree; A_0 = 1.
        A_u = [_per_component(Xu, P, gamma, "anova", j) for j in range(1, degree + 1)]
        A_i = [_per_component(Xi, P, None, "anova", j) for j in range(1, degree + 1)]
        self.f_u = self.f_u + A_u[-1].sum(axis=1)
        self.f_i = self.f_i + A_i[-1].sum(axis=1)
        for j in range(1, degree):
            self._add(A_u[j - 1], A_i[degree - j - 1])

    def _polynomial(self, Xu, Xi, P, gamma, lam, degree):
        a = Xu @ P + (gamma[0] if gamma.shape[0] else 0)
        c = np.asarray(Xi @ P)
        self.f_u = self.f_u + (a ** degree) @ lam
        self.f_i = self.f_i + (c ** degree) @ lam
        for j in range(1, degree):
            self._add(comb(degree, j) * lam * a ** j, c ** (degree - j))

    def scores(self, users=slice(None)):
        return self.U[users] @ self.R.T


def _per_component(X, P, gamma, kernel, degree):
    """Kernel value of every row of X and every component s, shape (n_rows, k)."""
    k = P.shape[1]
    out = np.empty((X.shape[0], k), dtype=P.dtype)
    for s in range(k):
        out[:, s] = kernels.predict(
            X, P[:, s:s + 1], degrees=[degree] if kernel == "anova" else None,
            kernel=kernel, gamma=None if gamma is None else gamma[:, s:s + 1],
            check_input=False)
    return out


def _pair_scores(model, Xu, Xi, widths):
    """Scores of every (user row, item row) pair, by the model on the pair rows: for a
    model that takes relational input, the user rows (with their context) and the item
    rows as relation blocks (each row stored once, its share computed once), else the
    expanded CSR rows.  ``widths``: the columns of the user part and of the item part;
    for relational pairs, ``Xi`` holds the item part's columns alone."""
    n_u, n_i = Xu.shape[0], Xi.shape[0]
    user_index, item_index = np.repeat(np.arange(n_u), n_i), np.tile(np.arange(n_i), n_u)
    if getattr(model, "_takes_relational", False):
        u_w, i_w = widths
        parts = [RelationBlock(user_index, Xu[:, :u_w]), RelationBlock(item_index, Xi)]
        if Xu.shape[1] > u_w + i_w:  # the context, per user
            parts.append(RelationBlock(user_index, Xu[:, u_w + i_w:]))
        rows = RelationalMatrix(parts, dtype=Xu.dtype)
    else:
        rows = sp.csr_matrix(Xu[user_index] + Xi[item_index])
    score = model.decision_function if is_classifier(model) else model.predict
    return np.asarray(score(rows), dtype=np.float64).reshape(n_u, n_i)


def _user_rows(encoder, users, context, dtype):
    """The user part (plus the context) of the query rows, checked."""
    Xu = encoder.transform_users(users)
    has_context = any(f.side == "context" for f in encoder.fields_)
    if context is None:
        if has_context:
            raise ValueError("the encoder has context features: give their values for "
                             "the recommendations as context (one row, or one per user)")
    else:
        Xc = encoder.transform_context(context)
        if Xc.shape[0] not in (1, Xu.shape[0]):
            raise ValueError(f"context must have one row or one per user ({Xu.shape[0]}), "
                             f"got {Xc.shape[0]}")
        if Xc.shape[0] == 1:
            Xc = Xc[np.zeros(Xu.shape[0], dtype=np.intp)]
        Xu = Xu + Xc
    return kernels.check_X(sp.csr_matrix(Xu, dtype=dtype), dtype=dtype)


def _prepare(estimator, users, items, encoder, context, method):
    model, encoder = _split_estimator(estimator, encoder)
    check_choice(method, "method", METHODS)
    _check_single_output(model)
    factored = _factored(model)
    if method == "factored" and not factored:
        raise ValueError(f"method='factored' needs a polylite factorization machine or "
                         f"polynomial network of one output, got {type(model).__name__}")
    use_factors = factored and method != "pairs"
    dtype = model._stacked()["P"].dtype if factored else np.float64
    users = np.asarray(users)
    if users.ndim != 1:
        raise ValueError(f"users must be a 1-D array of user ids, got shape {users.shape}")
    items = (encoder.categories_[encoder.item] if items is None else np.asarray(items))
    if items.ndim != 1:
        raise ValueError(f"items must be a 1-D array of item ids, got shape {items.shape}")
    if items.shape[0] == 0:
        raise ValueError("items is empty: there is no item to score")
    values, counts = np.unique(items, return_counts=True)
    if np.any(counts > 1):
        # A repeated candidate would take several places in a user's top n.
        repeated = counts > 1
        raise ValueError(f"items must list each candidate once; "
                         f"{values[repeated].tolist()[0]!r} is listed "
                         f"{counts[repeated][0]} times")
    Xu = _user_rows(encoder, users, context, dtype)
    Xi = kernels.check_X(encoder.transform_items(items).astype(dtype), dtype=dtype)
    if use_factors:
        factors = _Factors(model, Xu, Xi)
        return (lambda rows: factors.scores(rows)), encoder, users, items
    widths = u_w, i_w = (encoder._side_rows["user"].shape[1],
                         encoder._side_rows["item"].shape[1])
    if getattr(model, "_takes_relational", False):
        Xi = Xi[:, u_w:u_w + i_w]  # the item part's columns, once for every batch
    return (lambda rows: _pair_scores(model, Xu[rows], Xi, widths)), encoder, users, items


def _batches(n_users, n_items, batch_size, pairs):
    if batch_size is None:
        per = (2 ** 20 if pairs else _BATCH_SCORES) // max(n_items, 1)
        batch_size = max(1, per)
    else:
        check_number(batch_size, "batch_size", low=1, integer=True)
    for start in range(0, n_users, batch_size):
        yield slice(start, min(start + batch_size, n_users))


def score_items(estimator, users, items=None, *, encoder=None, context=None,
                method="auto", batch_size=None):
    """Scores of every (user, item) pair, as the model would predict them.

    Parameters
    ----------
    estimator : Pipeline or fitted estimator
        A fitted pipeline of a :class:`~polylite.preprocessing.FieldEncoder` and a model,
        or a fitted model (then give ``encoder``).  Regressors are scored by ``predict``,
        binary classifiers by ``decision_function``.
    users : array-like of shape (n_users,)
        User ids.  Unknown users raise ValueError, or with the encoder's
        ``handle_unknown="ignore"`` are scored without a user part.
    items : array-like of shape (n_items,) or None, default=None
        Candidate item ids, each listed once (None: every item the encoder knows, in
        sorted order).
    encoder : FieldEncoder or None, default=None
        The fitted encoder of the model's rows, when ``estimator`` is a bare model.
    context : table or None, default=None
        Values of the encoder's context features: one row for every user, or one row per
        user.  Required when the encoder has context features.
    method : {"auto", "factored", "pairs"}, default="auto"
        "factored": the user part and the item part separately, then matrix products over
        the item factors (polylite factorization machines of any degree and kernel, and
        polynomial networks, with one output).  "pairs": the estimator predicts on the
        pair rows, built a batch at a time (any estimator).  "auto": "factored" when
        possible.
    batch_size : int or None, default=None
        Users scored at once (None: as many as keep a batch to about 130,000 scores, or
        1 million pair rows).

    Returns
    -------
    scores : ndarray of shape (n_users, n_items)
        float32 for a float32 polylite model scored by "factored", else float64.
    """
    score, _, users, items = _prepare(estimator, users, items, encoder, context, method)
    pairs = method == "pairs"
    return np.vstack([score(rows) for rows in
                      _batches(len(users), len(items), batch_size, pairs)] or
                     [np.zeros((0, len(items)))])


def recommend(estimator, users, n=10, *, encoder=None, items=None, exclude=None,
              context=None, method="auto", batch_size=None):
    """The n best-scored items for each user, best first.

    Parameters
    ----------
    estimator : Pipeline or fitted estimator
        A fitted pipeline of a :class:`~polylite.preprocessing.FieldEncoder` and a model,
        or a fitted model (then give ``encoder``).
    users : array-like of shape (n_users,)
        User ids.
    n : int, default=10
        Number of items per user (at most the number of candidates).
    encoder : FieldEncoder or None, default=None
        The fitted encoder of the model's rows, when ``estimator`` is a bare model.
    items : array-like or None, default=None
        Candidate item ids, each listed once (None: every item the encoder knows).
    exclude : table or None, default=None
        (user, item) pairs never to recommend, for instance the training ratings (a table
        with the encoder's ``user`` and ``item`` columns).  Pairs of other users or items
        are ignored.
    context : table or None, default=None
        Values of the encoder's context features (one row, or one per user).
    method : {"auto", "factored", "pairs"}, default="auto"
        How the scores are computed (see :func:`score_items`).
    batch_size : int or None, default=None
        Users scored at once (see :func:`score_items`).

    Returns
    -------
    items : ndarray of shape (n_users, n)
        Recommended item ids, best first (ties: the earlier candidate first).
    scores : ndarray of shape (n_users, n)
        Their scores.  When a user has fewer than n candidates left after ``exclude``,
        the row ends with score ``-inf`` (and excluded items).  Scores rank the items:
        a rating model's are its predictions, unclipped, so they may lie outside the
        rating scale (5.15 on ratings of 1 to 5).
    """
    score, encoder, users, items = _prepare(estimator, users, items, encoder, context,
                                            method)
    check_number(n, "n", low=1, integer=True)
    n = min(int(n), len(items))
    excluded = _excluded_pairs(encoder, users, items, exclude)
    top_items = np.empty((len(users), n), dtype=items.dtype)
    top_scores = np.empty((len(users), n))
    for rows in _batches(len(users), len(items), batch_size, method == "pairs"):
        scores = np.asarray(score(rows), dtype=np.float64)
        if excluded is not None:
            scores[excluded[rows].nonzero()] = -np.inf
        best = _top(scores, n)
        top_items[rows] = items[best]
        top_scores[rows] = np.take_along_axis(scores, best, axis=1)
    return top_items, top_scores


def _top(scores, n):
    """Columns of the n largest scores of each row, largest first (equal scores: lower
    column first; which of several items tied at the cut are kept is unspecified)."""
    if n < scores.shape[1]:
        part = np.argpartition(scores, scores.shape[1] - n, axis=1)[:, -n:]
    else:
        part = np.broadcast_to(np.arange(scores.shape[1]), scores.shape)
    order = np.lexsort((part, -np.take_along_axis(scores, part, axis=1)), axis=1)
    return np.take_along_axis(part, order, axis=1)


def _excluded_pairs(encoder, users, items, exclude):
    """CSR mask (n_users, n_items) of the query pairs found in ``exclude``."""
    if exclude is None:
        return None
    keys = (encoder.user, encoder.item)
    pairs = _columns(exclude, keys, "exclude")
    sizes = [encoder.categories_[key].size for key in keys]

    def codes(key, values):  # -1: unknown to the encoder
        return _codes(encoder.categories_[key], np.asarray(values), key, "ignore")

    u, i = codes(keys[0], pairs[keys[0]]), codes(keys[1], pairs[keys[1]])
    known = (u >= 0) & (i >= 0)
    # One more row and column, empty, for the queries of unknown ids.
    seen = sp.csr_matrix((np.ones(int(known.sum()), dtype=bool), (u[known], i[known])),
                         shape=(sizes[0] + 1, sizes[1] + 1))
    query_u, query_i = codes(keys[0], users), codes(keys[1], items)
    query_u[query_u < 0], query_i[query_i < 0] = sizes[0], sizes[1]
    return seen[query_u][:, query_i].tocsr()
