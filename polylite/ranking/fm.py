"""Factorization machines of any degree ranked by pairwise losses on positive-only data."""
import time
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.base import RegressorMixin
from sklearn.utils import check_random_state
from sklearn.utils.validation import _check_sample_weight, check_is_fitted
from threadpoolctl import threadpool_limits

from .._engine.layouts import layout_of
from .._engine.codes import KERNELS
from .._engine.problem import ADAGRAD, SCHEDULES, Problem, Schedule
from .._engine._losses import PAIRWISE_LOSSES
from .._io import register_model
from .._validation import (check_bool, check_choice, check_number, row_threads,
                           store_init_params)
from ..polynomial._base import _FLOAT_DTYPES, EpochReport
from ..polynomial.fm import _BaseFactorizationMachine
from . import _data
from .._engine._pairwise import pairwise_pass
from .._engine.solvers import WholeDataDescent

__all__ = ["FactorizationMachineRanker"]

NEGATIVES = ("uniform", "popularity")
# A thread of a pass takes at least this many positives of a chunk.
MIN_POSITIVES_PER_THREAD = 2048
# The whole-data loss's steps of a side of one nonzero per row (side_solver).
SIDE_SOLVERS = ("cd", "als")
# Validation positives scored against the whole catalogue after each epoch: at most this
# many scores (so at most this many / n_items positives), and at least 100 positives.
VALIDATION_SCORES = 2 * 10 ** 7
# query_batch="auto": positives of one query visited in batches of this many when the
# query rows average at least this many nonzeros (sets of rated items, as SVD++'s):
# there a step's cost is mostly the query's, and on MovieLens the batches cut the fit
# time by more than half at nearly the same accuracy; on short rows (ids, a few side
# features) they cost a little accuracy and save nothing.
AUTO_QUERY_BATCH = 16
# The whole-data loss: its name, and the default weight of every unobserved pair.
WHOLE_DATA = "ials"
# Every loss of the ranker.
RANKER_LOSSES = (*PAIRWISE_LOSSES, WHOLE_DATA)
ALPHA0 = 0.1
# A pass of the whole-data loss over one side's rows is shared by threads from this many
# rows per thread.
MIN_ROWS_PER_THREAD = 1024


class _Model:
    """The parameters a pass updates, with AdaGrad's state and the threads' touch
    counts of the features (attributes the pass reads)."""

    def __init__(self, stack, adagrad):
        self.w, self.P, self.gamma = stack["w"][0], stack["P"][0], stack["gamma"][0]

        def state(a):
            # AdaGrad's sums of squared gradients start at 1 (as LightFM's): the first
            # steps are then at most eta0 times the gradient, not eta0 in every
            # coordinate whatever the gradient's size.
            return np.ones_like(a) if adagrad else np.zeros((0,) * a.ndim, a.dtype)

        self.acc_w, self.acc_P, self.acc_gamma = state(self.w), state(self.P), \
            state(self.gamma)
        self.threads(1)
        self.step = 0

    def threads(self, n_threads):
        """Touch counts for ``n_threads`` threads (all zero between epochs)."""
        d = self.w.shape[0]
        if getattr(self, "last_touch", np.zeros((0, 0))).shape != (n_threads, d + 1):
            self.last_touch = np.zeros((n_threads, d + 1), dtype=np.int64)
            self.thread_steps = np.zeros(n_threads, dtype=np.int64)


@register_model
class FactorizationMachineRanker(RegressorMixin, _BaseFactorizationMachine):
    """Factorization machine of any degree that ranks items for users, learned from
    positive interactions only (clicks, plays, purchases).

    Each positive is a row of a user's part (the user's id and side features, and the
    context) and an item's part, as :class:`~polylite.preprocessing.FieldEncoder` makes
    them; the ranker learns to score each positive's item above items the user has not
    interacted with, drawn from the catalogue of items as negatives:

    - ``loss="bpr"``: ``-log sigmoid(f(u, i) - f(u, j))`` for one negative j per
      positive (Rendle et al., "BPR", UAI 2009);
    - ``loss="warp"``: negatives are drawn until one scores within ``margin`` of the
      positive (at most ``max_trials``); the hinge ``margin - f(u, i) + f(u, j)`` is
      weighted by ``L(rank)``, the harmonic number of the positive's rank estimated
      from the draws (Weston et al., "WSABIE", IJCAI 2011): pushes the top of the list;
    - ``loss="ials"``: the whole-data loss of implicit feedback, iALS's (Hu, Koren and
      Volinsky, ICDM 2008) for any features: every (query, item) pair of the training
      queries and the catalogue is a target, 1 with weight
      ``w_ci = 1 + confidence * count_ci`` for the pairs observed (``count_ci``: the
      summed sample weights of their positives), 0 with weight ``alpha0`` for all the
      others, fitted by squared loss (the pairs of a training query that only rows of
      label 0 or held-out positives show weigh 0).  No negatives are drawn: the
      unobserved pairs enter through two k x k Gramians, one over the queries and one
      over the items, never one by one, and coordinate descent minimises the
      objective exactly along each coordinate in turn (Bayer, He, Kanagal and Rendle,
      "A Generic Coordinate Descent Framework for Learning from Implicit Feedback",
      WWW 2017).  Degree 2 with the ANOVA kernel only (its score splits into a query
      part and an item part).

    The model is a factorization machine (``f`` as
    :class:`~polylite.FactorizationMachineRegressor`'s ``predict``; terms of the user's
    part alone are the same for every item, so only its interactions with the item's
    part matter).  The user's part of a positive is computed once for all its
    negatives.  ``predict`` scores rows; :func:`polylite.recommend.recommend` ranks every
    item for users.

    The objective is the weighted mean of the loss over the positives, plus
    ``alpha/2 ||w||^2 + beta/2 (||P||^2 + ||gamma||^2)``: the penalties are per
    positive, so the same values suit small and large data.  It is minimised by
    stochastic steps over the positives in random order (AdaGrad or SGD), a positive at
    a time.  For ``loss="ials"`` the objective is

        1/(2N) [sum_observed w_ci (f(c, i) - 1)^2 + alpha0 sum_unobserved f(c, i)^2]
        + alpha/2 ||w||^2 + beta/2 ||P||^2,

    with N the number of positives (the sum of their sample weights): the loss over
    every pair is divided by the number of positives, not of pairs, so the penalties
    are again per positive (iALS's penalty ``lambda`` is ``N * beta``), and it is
    minimised by coordinate descent (``solver`` and the step-size parameters are then
    not used).

    Parameters
    ----------
    degree : int, default=2
        Degree m >= 2 of the interactions (as :class:`~polylite.
        FactorizationMachineRegressor`).
    n_components : int, default=10
        Rank k of each factor matrix.
    lower_degrees : {"separate", "shared", "none"}, default="separate"
        How the degrees 2..m-1 are modelled (ANOVA kernel), as in the regressor.
    kernel : {"anova", "all-subsets"}, default="anova"
        "anova": interactions of distinct features of the degrees above.
        "all-subsets": ``prod_j (1 + p_j x_j)``, every subset of features at once.
    loss : {"warp", "bpr", "ials"}, default="warp"
        The loss (see above): "warp" trains the top of the list, "bpr" the order of the
        whole list (its AUC), "ials" fits every (query, item) pair by weighted least
        squares.
    negatives : {"uniform", "popularity"}, default="uniform"
        How negatives are drawn from the items the user has not interacted with:
        uniformly, or in proportion to 1 + the item's number of positives (popular
        items, often those the user knows and skipped, more often).  A popularity draw
        that lands on an item the user has seen is redrawn, 32 times at most, then drawn
        uniformly among the unseen.
    max_trials : int, default=10
        "warp": negatives drawn per positive at most; a positive that no draw violates
        is skipped (its rank is already good enough).  More trials train the top of the
        list harder and cost more time per epoch.
    margin : float, default=1.0
        "warp": the margin of the hinge.
    alpha0 : float, default=0.1
        "ials": the weight of every unobserved (query, item) pair, relative to the
        weight ``1 + confidence * count`` of an observed one.  Smaller values trust the
        unobserved pairs less as negatives; try 0.01 to 1.
    confidence : float, default=0.0
        "ials": an observed pair weighs ``1 + confidence * count`` (iALS's alpha), its
        count the summed sample weights of its positives (give play counts as
        ``sample_weight``).
    frequency_exponent : float, default=0.0
        "ials": nu of frequency-scaled penalties (iALS++'s, Rendle, Krichene, Zhang and
        Koren, "Revisiting the Performance of iALS on Item Recommendation Benchmarks",
        RecSys 2022): the penalties of each column (``alpha`` of its linear weight,
        ``beta`` of its factors) are multiplied by ``(F_j / mean F)^nu``, with ``F_j``
        the column's frequency, the sum over the rows of its side (queries or items) of
        ``x^2 (their observed pairs' weights + alpha0 * the other side's rows)`` (for
        ids: user u's ``n_u + alpha0 * n_items``) and the mean over the columns that
        some row has.  0: the same penalty for every column; 1 penalises frequent users,
        items and features in proportion to the data they see, which often ranks
        better (tune beta with it).
    side_sweeps : int, default=1
        "ials": sweeps of coordinate descent over the query side's coordinates, then as
        many over the item side's, in each epoch.  One sweep moves each side part of
        the way to its minimum given the other; two come close to it, as an iteration
        of alternating least squares does (iALS's exact solves), so that an epoch
        costs about twice as much and fewer epochs are needed: 2 with ``max_iter=15``
        fits about as well as 1 with ``max_iter=30``.
    side_solver : {"cd", "als"}, default="cd"
        "ials": how the factors of a side whose rows hold one nonzero each (ids alone:
        users, or items) step.  "cd": one component at a time, as every other side's;
        "als": each column's k factors at once, to their exact minimiser given the
        rest (iALS's least-squares update: a k x k system per user or item), so that
        an epoch on ids alone is an iteration of alternating least squares.  Sides with
        several nonzeros per row (side features, the users' rated items) and fits with
        ``rated_items`` step by coordinates either way.  A user's or item's exact step
        costs about k^3 / 3 operations: it pays at small k (on MovieLens 100K's ids at
        k = 16, 15 epochs reach a lower objective than 15 of two sweeps by coordinates
        in about the same CPU time); at k = 128 an epoch costs several times one by
        coordinates.
    fit_linear : bool, default=True
        Fit the linear term (only its item part matters to the ranking; for "ials"
        the query part's is fitted too, as a bias of the query).
    alpha : float, default=1e-6
        L2 regularisation of the linear weights, per positive.
    beta : float, default=1e-6
        L2 regularisation of the factors, per positive.
    init_scale : float, default=0.05
        Standard deviation of the normal initialisation of the factors (degree 2 on
        MovieLens ranks best from small values; degrees 3 and more, whose gradients
        shrink like init_scale^(m-1), may need 0.1 or more, or more epochs).
    max_iter : int, default=30
        Epochs (passes over the positives) at most.
    tol : float or None, default=None
        None: run ``max_iter`` epochs (or until early stopping stops).  A number: also
        stop when the epoch's objective (the losses met during its pass) has not
        improved by ``tol`` (relative) for ``n_iter_no_change`` epochs.  WARP's
        objective can grow as the model improves (each violation found weighs more), so
        early stopping on the validation AUC is the better test; the objective of
        "ials" (the whole-data objective after the epoch) never increases.  With
        ``early_stopping``, the AUC must improve by ``tol`` (absolute; None: 1e-4).
    solver : {"adagrad", "sgd"}, default="adagrad"
        AdaGrad divides ``eta0`` by the root of each coordinate's summed squared
        gradients (the sums start at 1).  Not used by "ials" (coordinate descent).
    learning_rate : {"constant", "invscaling"}, default="invscaling"
        Step size of "sgd": ``eta0``, or ``eta0 / t^power_t`` at step t.
    eta0 : float or None, default=None
        Initial step size (None: 0.05 for "adagrad", 0.01 for "sgd").
    power_t : float, default=0.25
        Exponent of the "invscaling" schedule.
    shuffle : bool, default=True
        Visit the positives in a new random order every epoch.
    query_batch : int or "auto", default="auto"
        Positives of one query row (a user with its side features and context) visited
        together, at most this many at a time: the query's values are computed once for
        the batch and its parameters step once, at the batch's end, on the sum of the
        batch's gradients (the items' parameters step at every positive, as with 1).
        Where the query rows are long (a set of the user's rated items), most of a
        step's work is the query's, and batches of 16 cut it 16-fold.  With ``shuffle``,
        each epoch groups each query's positives (in random order) into batches of
        near-equal size, and visits the batches in random order; without, a batch is
        a run of consecutive positives of one query.  "auto": 16 when the query rows
        have at least 16 nonzeros per positive on average, else 1 (every positive steps
        on its own).
    early_stopping : bool, default=False
        Hold out ``validation_fraction`` of the positives (or take ``X_val`` given to
        ``fit``) and stop when their AUC (each held-out positive against every item its
        user has not interacted with) has not improved by ``tol`` for
        ``n_iter_no_change`` epochs; the best model is kept.  Up to
        ``2e7 / n_items`` held-out positives (at least 100) are scored.
    validation_fraction : float, default=0.1
        Share of the positives held out when ``early_stopping`` (without ``X_val``).
    n_iter_no_change : int, default=5
        Epochs without improvement before stopping (see ``tol``).
    item_columns : (int, int) or None, default=None
        The columns ``start:stop`` of the item part.  For a
        :class:`~polylite.relational.RelationalMatrix` the item part is a relation
        block: None takes the second block (as ``FieldEncoder(output="relational")``
        lays them out), and the user is the row of the first other block.  CSR rows
        need it: the items are then the distinct item parts of the positives, the users
        the distinct parts of the columns before ``start``.  The catalogue the
        negatives are drawn from is the item block's table (every row with features,
        in the table's order) for a RelationalMatrix, and the distinct item parts in
        the order the positives first show them for CSR rows: a RelationalMatrix and
        its ``to_csr()`` hold the same model but draw different negatives from the same
        ``random_state``, so their fits differ as two seeds do (unless every table row
        is some positive's item, in the order of their first positives).
    rated_items : (int, int) or None, default=None
        "ials": the columns ``start:stop`` of the user's part that hold the set of
        items the user interacted with (implicit feedback), column ``start + t`` for the
        item whose id is column t of the item part, as
        ``FieldEncoder(implicit="user")`` lays them out (its ``fields_`` entry
        ``"rated_items"`` gives them; the item part starts with the item ids).  Each
        observed (user, item) pair is then fitted without the interactions of the
        item's own column of the set with the item, as if the item were left out of
        the user's set: the set describes the user from the other items, and the
        item's own column cannot fit the pair by itself (which does not carry over
        to the items the user has not seen, whose columns are never in the set).
        The pairs that are not observed, and ``predict``, score the rows as they are.
        None: every pair is fitted as it is.
    warm_start : bool, default=False
        Continue from the previous fit's parameters.
    random_state : int, RandomState instance or None, default=None
        Seed of the initialisation, the order of the positives and the negatives.
    verbose : int, default=0
        Print the objective (and the validation AUC) after every epoch when > 0.
    n_jobs : int or None, default=None
        Threads (None: 1; -1: every CPU).  "ials": the threads share the passes over
        the queries and the items, and the results do not depend on their number.
        "warp", "bpr": the threads share each chunk of positives, each taking the
        next block of it as it becomes free (a thread slowed by other work on its core
        holds the others up by one block at most), and step on the shared parameters
        without locks, as LightFM does (Hogwild!).
        Reproducibility: with one thread a fit is the same from run to run for a fixed
        ``random_state``; with more, the order in which threads update shared
        parameters varies from run to run, and so do the results, a little.  Threads
        pay off on large data whose rows share few features (ids); rows that share many
        (implicit sets such as rated items, side features) make the threads contend for
        the same parameters, and on small data one thread is then faster.

    Attributes
    ----------
    intercept_ : float
        0 (it does not change the ranking).
    w_ : ndarray of shape (n_features,)
    P_ : ndarray of shape (n_blocks, n_features, n_components)
    gamma_ : ndarray of shape (n_dummy, n_components)
    n_iter_ : int
        Epochs run.
    query_batch_ : int
        The query batch size used (``query_batch``, "auto" resolved).
    solver_ : str
        The solver that ran ("cd" for "ials").
    loss_curve_ : list of float
        The objective of every epoch, as met during its pass.
    negatives_drawn_ : list of float
        For "bpr" and "warp": the mean number of negatives drawn per positive in every
        epoch (BPR: 1; WARP: between 1 and ``max_trials``, growing as the model ranks
        more positives above the items drawn).  Empty for "ials".
    validation_scores_ : list of float
        With early stopping: the validation AUC after every epoch.
    n_items_ : int
        Items of the catalogue negatives were drawn from.
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.pipeline import make_pipeline
    >>> from polylite import FieldEncoder
    >>> from polylite.ranking import FactorizationMachineRanker
    >>> from polylite.recommend import recommend
    >>> clicks = {"user_id": np.array([1, 1, 2, 2, 3]),
    ...           "item_id": np.array([10, 20, 10, 30, 20])}
    >>> model = make_pipeline(FieldEncoder(output="relational"),
    ...                       FactorizationMachineRanker(n_components=4, random_state=0))
    >>> model = model.fit(clicks)
    >>> items, scores = recommend(model, [1], n=1, exclude=clicks)
    >>> items.shape
    (1, 1)
    """

    _solvers = ("sgd", "adagrad")
    # Fixed for ranking (the intercept does not change an order; one positive a step).
    fit_intercept = False
    batch_size = 1

    # A bound on the validation AUC's cost that the command line sets (``polylite fit
    # --task ranking --validation``): at most this many scores per training positive and
    # epoch, on samples of the validation positives and of their candidate items
    # (_SampledValidationScore; None: every candidate of up to VALIDATION_SCORES / n_items
    # positives).  Not a parameter, so neither saved nor cloned.
    # (the command line tells rankers from the other models by this)
    _is_ranker = True

    _validation_scores_per_positive = None

    def __init__(self, degree=2, n_components=10, *, lower_degrees="separate",
                 kernel="anova", loss="warp", negatives="uniform", max_trials=10,
                 margin=1.0, alpha0=ALPHA0, confidence=0.0, frequency_exponent=0.0,
                 side_sweeps=1, side_solver="cd", fit_linear=True, alpha=1e-6, beta=1e-6,
                 init_scale=0.05, max_iter=30, tol=None, solver="adagrad", learning_rate="invscaling",
                 eta0=None, power_t=0.25, shuffle=True, query_batch="auto",
                 early_stopping=False, validation_fraction=0.1, n_iter_no_change=5,
                 item_columns=None, rated_items=None,
                 warm_start=False, random_state=None, verbose=0, n_jobs=None):
        store_init_params(self, locals())

    # ---- parameters ------------------------------------------------------------------

    def _check_params(self):
        if self.max_iter is None:
            raise ValueError("max_iter must be a positive integer, got None")
        tol, self.tol = self.tol, 0 if self.tol is None else self.tol
        try:
            super()._check_params()
        finally:
            self.tol = tol
        check_choice(self.loss, "loss", RANKER_LOSSES)
        check_number(self.alpha0, "alpha0", low=0)
        check_number(self.confidence, "confidence", low=0)
        check_number(self.frequency_exponent, "frequency_exponent", low=0)
        if self.frequency_exponent != 0 and self.loss != WHOLE_DATA:
            raise ValueError(f"frequency_exponent is used by loss={WHOLE_DATA!r} only, "
                             f"got loss={self.loss!r}")
        check_number(self.side_sweeps, "side_sweeps", low=1, integer=True)
        if self.side_sweeps != 1 and self.loss != WHOLE_DATA:
            raise ValueError(f"side_sweeps is used by loss={WHOLE_DATA!r} only, got "
                             f"loss={self.loss!r}")
        check_choice(self.side_solver, "side_solver", SIDE_SOLVERS)
        if self.side_solver != "cd" and self.loss != WHOLE_DATA:
            raise ValueError(f"side_solver is used by loss={WHOLE_DATA!r} only, got "
                             f"loss={self.loss!r}")
        if self.rated_items is not None and self.loss != WHOLE_DATA:
            raise ValueError(f"rated_items is used by loss={WHOLE_DATA!r} only, got "
                             f"loss={self.loss!r}")
        if self.loss == WHOLE_DATA:
            kernel, degrees, n_dummy = self._structure()
            if kernel != "anova" or list(degrees) != [2] or n_dummy:
                raise ValueError(
                    f"loss={WHOLE_DATA!r} needs a degree-2 FM with the ANOVA kernel (its "
                    f"scores split into a query part and an item part), got "
                    f"degree={self.degree!r}, kernel={self.kernel!r}")
        check_choice(self.negatives, "negatives", NEGATIVES)
        check_number(self.max_trials, "max_trials", low=1, integer=True)
        check_number(self.margin, "margin", low=0, low_open=True)
        check_bool(self.shuffle, "shuffle")
        if not (isinstance(self.query_batch, str) and self.query_batch == "auto"):
            check_number(self.query_batch, "query_batch", low=1, integer=True)

    def _restored_solver(self, attributes):
        """``solver_`` of a model file: "cd" for the whole-data loss."""
        if self.loss == WHOLE_DATA and attributes.get("solver") == "cd":
            return "cd"
        return super()._restored_solver(attributes)

    @property
    def _adagrad(self):
        """Whether the passes keep AdaGrad's sums (not for the whole-data loss)."""
        return self.solver == "adagrad" and self.loss != WHOLE_DATA

    @property
    def _eta0(self):
        if self.eta0 is not None:
            return float(self.eta0)
        return 0.05 if self.solver == "adagrad" else 0.01

    def _pass_description(self):
        """(problem, schedule, negative sampling) of the pairwise passes."""
        kernel, degrees, _ = self._structure()
        problem = Problem(None, None, KERNELS[kernel], np.asarray(degrees, dtype=np.intc),
                          PAIRWISE_LOSSES[self.loss], float(self.alpha), float(self.beta),
                          False, bool(self.fit_linear))
        schedule = Schedule(ADAGRAD if self.solver == "adagrad"
                            else SCHEDULES[self.learning_rate], self._eta0,
                            float(self.power_t))
        sampling = _data.NegativeSampling(int(self.max_trials),
                                          self.negatives == "popularity",
                                          float(self.margin))
        return problem, schedule, sampling

    # ---- input -----------------------------------------------------------------------

    def _check_positives(self, X, *, reset):
        # Validation positives are checked in fit before P_ exists: the fit's dtype.
        dtype = (_FLOAT_DTYPES if reset else
                 self.P_.dtype if hasattr(self, "P_") else self._fit_dtype)
        X = layout_of(X).validate(self, X, reset=reset, dtype=dtype, accept_dense=False)
        if reset:
            self._fit_dtype = X.dtype
        return X

    def _positives(self, X, y, sample_weight, X_val=None, whole=False):
        """The training positives, the catalogue and the validation positives (None
        without a validation set) of ``X`` (checked; ``y``: which rows are positives)
        and ``X_val``; with ``whole``, the catalogue holds the whole-data loss's pairs
        (``whole``)."""
        n = X.shape[0]
        positive = _check_labels(y, n)
        sw = _check_sample_weight(sample_weight, X, dtype=np.float64)
        if np.any(sw < 0) or not np.all(np.isfinite(sw)):
            raise ValueError("sample_weight must be finite and >= 0")
        if X_val is not None:
            X_val = self._check_positives(X_val, reset=False)
            if layout_of(X_val) is not layout_of(X):
                raise ValueError("X_val must have the form of X (both CSR, or both "
                                 "relational)")
            X = layout_of(X).stack([X, X_val])
            sw = np.concatenate([sw, np.ones(X_val.shape[0])])
        layout = layout_of(X)
        columns = layout.item_columns(X, self.item_columns)
        query, item_rows, table, users = layout.split_positives(X, columns, X.dtype)
        users = _data.user_codes(query, users)
        n_users = int(users.max()) + 1
        items, item = _data.catalogue_of(table, item_rows)
        n_items = items.shape[0]
        seen_sets = _data.seen_sets(users, item, n_users, n_items)
        cumulative = (_data.popularity(item[:n][positive], n_items)
                      if self.negatives == "popularity" else np.zeros(0))
        catalogue = _data.Catalogue(items, *seen_sets, cumulative, n_users,
                                    int(np.diff(items.indptr).max()), columns)
        everything = _data.Positives(query, item, users, sw)

        def subset(rows):
            w = everything.weight[rows]
            return _data.Positives(query[rows], item[rows], users[rows], w)

        rows = np.flatnonzero(positive)
        if rows.size == 0:
            raise ValueError("y marks no row as a positive: nothing to rank")
        validation = None
        if X_val is not None:
            validation = subset(np.arange(n, X.shape[0]))
        elif self.early_stopping:
            rng = check_random_state(self.random_state)
            held = rng.permutation(rows)[:max(1, int(round(self.validation_fraction *
                                                           rows.size)))]
            if held.size >= rows.size:
                raise ValueError(f"early_stopping holds out {held.size} of {rows.size} "
                                 f"positives: none would be left to fit; lower "
                                 f"validation_fraction")
            validation, rows = subset(np.sort(held)), np.setdiff1d(rows, held)
        # (every row a positive, none held out: the positives as they are, uncopied)
        training = everything if rows.size == X.shape[0] else subset(rows)
        # A user who has seen every item has no negative: those positives are skipped.
        full = np.diff(catalogue.seen_indptr)[training.user] >= n_items
        if full.all():
            raise ValueError(f"every positive's user has interacted with every one of the "
                             f"{n_items} items: there is no negative item to rank below "
                             f"the positives")
        if full.any():
            warnings.warn(f"{int(full.sum())} positive(s) belong to users who have "
                          f"interacted with every item: with no negative to rank below "
                          f"them, they are skipped", UserWarning, stacklevel=4)
        if training.weight.sum() <= 0:
            raise ValueError("sample_weight is zero for every positive")
        if self.loss != WHOLE_DATA:  # the whole-data loss counts the weights as given
            training = training._replace(weight=training.weight / training.weight.mean())
        if whole:
            trained = np.zeros(X.shape[0], dtype=bool)
            trained[rows] = True
            catalogue = catalogue._replace(whole=_data.whole_data(
                everything, trained, n_items, float(self.confidence)))
        return training, catalogue, validation

    # ---- fit -------------------------------------------------------------------------

    def fit(self, X, y=None, sample_weight=None, *, X_val=None):
        """Learn the ranking from positive interactions.

        Parameters
        ----------
        X : RelationalMatrix or {array-like, sparse matrix} of shape (n_positives, n_features)
            The positives: rows of a user's part and an item's part (see
            ``item_columns``), as :class:`~polylite.preprocessing.FieldEncoder` encodes
            a table of (user, item) interactions.
        y : array-like of shape (n_positives,) or None, default=None
            None: every row is a positive.  Else 1 marks a positive and 0 another
            interaction of the user with the item (a low rating, a skipped item): not
            trained on, and never drawn as the user's negative.
        sample_weight : array-like of shape (n_positives,), default=None
            Weight of each positive in the objective.
        X_val : RelationalMatrix or sparse matrix, default=None
            Validation positives for early stopping (with the same tables as X, for
            relational input), instead of a held-out fraction of X.

        Returns
        -------
        self : FactorizationMachineRanker
        """
        with self._fitting():
            self._check_params()
            X = self._check_positives(X, reset=True)
            self._check_against_data(X, 1)
            training, catalogue, validation = self._positives(
                X, y, sample_weight, X_val, whole=self.loss == WHOLE_DATA)
            rng = check_random_state(self.random_state)
            stack = self._warm_stack(1, X.shape[1], X.dtype)
            if stack is None:
                stack = self._allocate(1, X.shape[1], X.dtype)
                self._init_nonlinear(self._output(stack, 0), rng)
            model = _Model(stack, self._adagrad)
            self.loss_curve_, self.validation_scores_ = [], []
            self.negatives_drawn_ = []
            self.n_iter_ = self._run(training, catalogue, validation, model, stack, rng,
                                     self.max_iter)
            self.n_items_ = catalogue.items.shape[0]
            self._publish(stack)
            self._ranking_state = (model, rng)
        return self

    def partial_fit(self, X, y=None, sample_weight=None):
        """One epoch over the positives ``X``, continuing from the fitted model (of
        :meth:`fit`, earlier calls, or a loaded file) or from a fresh one.

        The negatives of a call are drawn from the catalogue of ``X`` (for relational
        input, the item block's table) and avoid the items each user has among the
        rows of this call.  AdaGrad's sums continue from the previous call or
        :meth:`fit` of this estimator (a loaded model starts them afresh).

        Parameters
        ----------
        X : RelationalMatrix or sparse matrix of shape (n_positives, n_features)
        y : array-like of shape (n_positives,) or None, default=None
            As in :meth:`fit`.
        sample_weight : array-like of shape (n_positives,), default=None

        Returns
        -------
        self : FactorizationMachineRanker
        """
        first = not hasattr(self, "P_")
        with self._fitting():
            self._check_params()
            X = self._check_positives(X, reset=first)
            if first:
                self._check_against_data(X, 1)
            early_stopping, self.early_stopping = self.early_stopping, False
            try:
                training, catalogue, _ = self._positives(
                    X, y, sample_weight, whole=self.loss == WHOLE_DATA)
            finally:
                self.early_stopping = early_stopping
            if first:
                rng = check_random_state(self.random_state)
                stack = self._allocate(1, X.shape[1], X.dtype)
                self._init_nonlinear(self._output(stack, 0), rng)
                model = _Model(stack, self._adagrad)
                self.loss_curve_, self.validation_scores_, self.n_iter_ = [], [], 0
                self.negatives_drawn_ = []
            else:
                stack = self._warm_stack_of(X)
                state = getattr(self, "_ranking_state", None)
                if state is None:  # a loaded model: its solver's sums start afresh
                    state = (_Model(stack, self._adagrad),
                             check_random_state(self.random_state))
                    self.loss_curve_, self.validation_scores_ = [], []
                    self.negatives_drawn_ = []
                model, rng = state
                model.w, model.P, model.gamma = (stack["w"][0], stack["P"][0],
                                                 stack["gamma"][0])
                if model.acc_P.shape not in ((0, 0, 0), model.P.shape):
                    model = _Model(stack, self._adagrad)
            self.n_iter_ += self._run(training, catalogue, None, model, stack, rng, 1)
            self.n_items_ = catalogue.items.shape[0]
            self._publish(stack)
            self._ranking_state = (model, rng)
        return self

    def _warm_stack_of(self, X):
        """A copy of the fitted parameters to continue from on X, checked against the
        current structure."""
        stack = self._stacked(copy=True)
        _, degrees, n_dummy = self._structure()
        expected = (1, len(degrees), X.shape[1], self.n_components)
        if stack["P"].shape != expected or stack["gamma"].shape[1] != n_dummy:
            raise ValueError(f"partial_fit continues the fitted model, whose factors have "
                             f"shape {stack['P'].shape[1:]}, but the current parameters "
                             f"ask for {expected[1:]}")
        return {name: a.astype(X.dtype, copy=False) for name, a in stack.items()}

    def _run(self, training, catalogue, validation, model, stack, rng, max_iter):
        """Run up to ``max_iter`` epochs of the loss's solver; returns the number run."""
        if self.loss == WHOLE_DATA:
            self.solver_ = "cd"
            return self._whole_data_epochs(training, catalogue, validation, model,
                                           stack, rng, max_iter)
        self.solver_ = self.solver
        return self._epochs(training, catalogue, validation, model, stack, rng, max_iter)

    def _epochs(self, training, catalogue, validation, model, stack, rng, max_iter):
        """Run up to ``max_iter`` epochs of the pairwise passes; returns the number
        run."""
        problem, schedule, sampling = self._pass_description()
        threads = row_threads(self.n_jobs, min(training.item.shape[0], _data.CHUNK_ROWS),
                              MIN_POSITIVES_PER_THREAD)
        progress = _Progress(self, validation, catalogue, rng, stack, max_iter,
                             training.item.shape[0])
        buffers = {}
        n = training.item.shape[0]
        self.query_batch_ = self._query_batch_size(training)
        codes = _data.query_codes(training.query) if self.query_batch_ > 1 else None
        every_positive = np.ones(training.item.shape[0], np.uint8)  # batches of one
        model.threads(threads)
        for epoch in range(1, max_iter + 1):
            order = rng.permutation(n) if self.shuffle else np.arange(n)
            if codes is None:
                batch_end = every_positive
            else:
                order, batch_end = _data.query_batches(
                    order, codes, self.query_batch_, rng if self.shuffle else None)
            loss = weight = 0.0
            trials = stepped = 0
            for chunk, last in _data.chunks(training, order, batch_end, buffers,
                                            threads):
                seeds = rng.randint(0, 2 ** 63, size=threads, dtype=np.uint64)
                out = pairwise_pass(problem, schedule, sampling, chunk, catalogue, model,
                                    model.P, model.step, seeds, last)
                model.step += chunk.positive.shape[0]
                if last:
                    model.thread_steps[:] = 0
                if not out["finite"]:
                    raise FloatingPointError(
                        f"the scores became non-finite during {self.solver}; use a smaller "
                        f"eta0, increase beta or scale the features")
                loss += out["loss"]
                weight += out["weight"]
                trials += out["trials"]
                stepped += chunk.positive.shape[0] - out["skipped"]
            self.negatives_drawn_.append(trials / max(stepped, 1))
            objective = loss / max(weight, 1e-300) + self._penalty(model)
            if progress.epoch_done(epoch, objective):
                break
        progress.keep_best()
        return epoch

    def _whole_data_epochs(self, training, catalogue, validation, model, stack, rng,
                           max_iter):
        """Run up to ``max_iter`` epochs of coordinate descent on the whole-data loss;
        returns the number run."""
        data = catalogue.whole
        threads = row_threads(self.n_jobs, max(data.queries.shape[0],
                                               catalogue.items.shape[0]),
                              MIN_ROWS_PER_THREAD)
        start, stop = catalogue.columns
        solver = WholeDataDescent(
            data.queries, catalogue.items, data.pair_query, data.pair_item, data.weight,
            np.arange(start, stop), float(training.weight.sum()), float(self.alpha0),
            float(self.alpha), float(self.beta), bool(self.fit_linear), threads,
            self.n_components, own_columns=self._own_columns(catalogue),
            frequency_exponent=float(self.frequency_exponent),
            sweeps=int(self.side_sweeps), exact_sides=self.side_solver == "als")
        self._penalty_scale = solver.penalty_scale if self.frequency_exponent else None
        self.query_batch_ = 1
        progress = _Progress(self, validation, catalogue, rng, stack, max_iter,
                             training.item.shape[0])
        w, P = model.w, model.P[0]
        if not self.fit_linear:
            w[...] = 0
        for epoch in range(1, max_iter + 1):
            solver.epoch(w, P)
            objective = solver.data_term() + self._penalty(model)
            if not np.isfinite(objective):
                raise FloatingPointError(
                    "the scores became non-finite during coordinate descent; increase "
                    "alpha and beta or scale the features")
            if progress.epoch_done(epoch, objective):
                break
        progress.keep_best()
        return epoch

    def _own_columns(self, catalogue):
        """Each catalogue item's own column of ``rated_items`` (-1: an item without an id
        column inside its range), or None."""
        if self.rated_items is None:
            return None
        items = catalogue.items
        start, stop = catalogue.columns
        try:
            first, last = (int(v) for v in self.rated_items)
            ok = [first, last] == [v for v in self.rated_items]
        except (TypeError, ValueError):
            ok = False
        if not ok or not 0 <= first < last <= items.shape[1]:
            raise ValueError(f"rated_items must be a pair (start, stop) of integers with "
                             f"0 <= start < stop <= n_features={items.shape[1]}, got "
                             f"{self.rated_items!r}")
        width = last - first
        if first < stop and start < last:
            raise ValueError(f"rated_items={self.rated_items!r} overlaps the item part "
                             f"(columns {start}:{stop}): it must be columns of the "
                             f"user's part")
        if width > stop - start:
            raise ValueError(f"rated_items={self.rated_items!r} has {width} columns, "
                             f"more than the item part's {stop - start}")
        ids = sp.csr_matrix(items)[:, start:start + width]
        ids.eliminate_zeros()
        count = np.diff(ids.indptr)
        if np.any(count > 1):
            raise ValueError(f"rated_items={self.rated_items!r}: {int((count > 1).sum())} "
                             f"item(s) have several nonzeros among the item part's first "
                             f"{width} columns, which must be the item ids (one per item)")
        own = np.full(items.shape[0], -1, dtype=np.int64)
        has = count == 1
        own[has] = first + ids.indices[ids.indptr[:-1][has]]
        return own

    def _query_batch_size(self, training):
        """``query_batch``, "auto" resolved: AUTO_QUERY_BATCH when the query rows hold
        at least that many nonzeros per positive on average, else 1."""
        if self.query_batch != "auto":
            return int(self.query_batch)
        nnz_per_positive = training.query.expanded_nnz / max(training.item.shape[0], 1)
        return AUTO_QUERY_BATCH if nnz_per_positive >= AUTO_QUERY_BATCH else 1

    def _penalty(self, model):
        def squares(a):  # not np.dot: BLAS threads would spin through the next pass
            return float(np.square(a, dtype=np.float64).sum())
        scale = getattr(self, "_penalty_scale", None)
        if self.loss == WHOLE_DATA and scale is not None:  # (per column; degree 2)
            w, P = model.w.astype(np.float64), model.P[0].astype(np.float64)
            return 0.5 * float(self.alpha * np.sum(scale * w * w) +
                               self.beta * np.sum(scale[:, np.newaxis] * P * P))
        return 0.5 * (self.alpha * squares(model.w) +
                      self.beta * (squares(model.P) + squares(model.gamma)))

    # ---- prediction --------------------------------------------------------------------

    def predict(self, X):
        """Scores of rows (higher ranks first).

        Parameters
        ----------
        X : RelationalMatrix or {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        scores : ndarray of shape (n_samples,)
        """
        check_is_fitted(self)
        X = self._check_positives(X, reset=False)
        if X.shape[0] == 0:
            return np.zeros(0, dtype=self.P_.dtype)
        return self._decision(X)[:, 0]

    decision_function = predict

    def score(self, X, y=None, sample_weight=None):
        """Mean AUC of the positives ``X``: each against every catalogue item its user
        has no positive with in ``X``.

        Parameters
        ----------
        X : RelationalMatrix or sparse matrix of shape (n_positives, n_features)
        y : array-like of shape (n_positives,) or None, default=None
            As in :meth:`fit`: the rows of label 0 are not scored, and are no
            candidates of their users.
        sample_weight : None
            Ignored.

        Returns
        -------
        auc : float
        """
        check_is_fitted(self)
        X = self._check_positives(X, reset=False)
        early_stopping, self.early_stopping = self.early_stopping, False
        try:
            positives, catalogue, _ = self._positives(X, y, None)
        finally:
            self.early_stopping = early_stopping
        return _ValidationScore(self, positives, catalogue, None, limit=False)(
            self._stacked())

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = False
        return tags


class _Progress:
    """The epoch loop's bookkeeping after each epoch: the objective's curve, the
    validation AUC and the best parameters (early stopping), the test of ``tol``, the
    verbose line and the progress display."""

    def __init__(self, est, validation, catalogue, rng, stack, max_iter, n_training):
        self.est, self.stack, self.max_iter = est, stack, max_iter
        if validation is None:
            self.scorer = None
        elif est._validation_scores_per_positive is not None:
            # (its own draws, fixed: the training's are those of a fit without it)
            self.scorer = _SampledValidationScore(est, validation, catalogue,
                                                  np.random.RandomState(0), n_training)
        else:
            self.scorer = _ValidationScore(est, validation, catalogue, rng)
        self.best, self.best_params, self.stalled = np.inf, None, 0
        self.start = time.perf_counter()

    def epoch_done(self, epoch, objective):
        """Record epoch ``epoch`` of objective ``objective``; returns whether to stop."""
        est, stack = self.est, self.stack
        est.loss_curve_.append(objective)
        score = np.nan
        if self.scorer is not None:
            score = self.scorer(stack)
            est.validation_scores_.append(score)
            improved = self.best_params is None or score > self.best + (
                1e-4 if est.tol is None else est.tol)
            if improved:
                self.best = max(score, self.best) if self.best_params is not None \
                    else score
                self.best_params = {name: stack[name].copy()
                                    for name in ("w", "P", "gamma")}
            self.stalled = 0 if improved else self.stalled + 1
        elif est.tol is not None:
            self.stalled = self.stalled + 1 if objective > self.best - est.tol * abs(
                self.best) else 0
            self.best = min(self.best, objective)
        seconds = time.perf_counter() - self.start
        if est.verbose:
            print(f"epoch {epoch:4d}  objective {objective:.6e}" +
                  (f"  validation AUC {score:.4f}" if self.scorer is not None else "") +
                  f"  {seconds:.2f}s")
        if est._epoch_callback is not None:
            est._epoch_callback(EpochReport(0, 1, epoch, self.max_iter, objective, score,
                                            seconds))
        return self.stalled >= est.n_iter_no_change and self.max_iter > 1

    def keep_best(self):
        """With early stopping, put the best epoch's parameters back."""
        if self.best_params is not None:
            for name, value in self.best_params.items():
                self.stack[name][...] = value
            # (the command line's summary: the kept model's score, and how measured)
            self.est._validation_summary = (
                self.best, *getattr(self.scorer, "sample", (None,) * 3))


def _check_labels(y, n):
    """Which of the n rows are positives: all for ``y=None``, else the rows of label 1
    (``y`` of 0/1 or booleans)."""
    if y is None:
        return np.ones(n, dtype=bool)
    y = np.asarray(y)
    if y.ndim != 1 or y.shape[0] != n:
        raise ValueError(f"y must be None or hold one label per row ({n}), got shape "
                         f"{y.shape}")
    if y.dtype.kind not in "biuf" or not np.all(np.isin(y, (0, 1))):
        raise ValueError("y must hold 1 for a positive and 0 for an interaction that is "
                         "not one (never drawn as a negative), or be None (every row a "
                         "positive)")
    return y.astype(bool)


class _ValidationScore:
    """Mean AUC of validation positives: each positive's score against those of every
    catalogue item its user has not interacted with (ties count half)."""

    def __init__(self, est, positives, catalogue, rng, limit=True):
        n = positives.item.shape[0]
        n_items = catalogue.items.shape[0]
        if limit:
            keep = max(100, VALIDATION_SCORES // max(n_items, 1))
            if n > keep:
                rows = np.sort(rng.choice(n, keep, replace=False))
                positives = _data.Positives(positives.query[rows], positives.item[rows],
                                            positives.user[rows], positives.weight[rows])
        self.est, self.catalogue = est, catalogue
        self.query = positives.query.to_csr()
        self.item, self.user = positives.item, positives.user
        seen = sp.csr_matrix((np.ones(catalogue.seen.shape[0], dtype=bool),
                              catalogue.seen, catalogue.seen_indptr),
                             shape=(catalogue.n_users, n_items))
        self.seen = seen[self.user]

    def __call__(self, stack):
        from ..recommend import _Factors
        est = self.est
        est._publish(stack)
        factors = _Factors(est, self.query, self.catalogue.items)
        n, n_items = self.item.shape[0], self.catalogue.items.shape[0]
        total, counted = 0.0, 0
        step = max(1, 2 ** 22 // max(n_items, 1))
        # One BLAS thread: its threads would spin through the next epoch's pass, and
        # cost more than they save on a sample's products.
        with threadpool_limits(limits=1, user_api="blas"):
            for lo in range(0, n, step):
                total, counted = self._add_block(factors, slice(lo, min(lo + step, n)),
                                                 n_items, total, counted)
        return total / counted if counted else float("nan")

    def _add_block(self, factors, rows, n_items, total, counted):
        """(total, counted) with the AUCs of the positives ``rows`` added."""
        scores = factors.scores(rows).astype(np.float64)
        positive = scores[np.arange(scores.shape[0]), self.item[rows]][:, None]
        seen = self.seen[rows]
        below = (scores < positive).sum(axis=1) + 0.5 * (
            (scores == positive).sum(axis=1) - 1)
        # Seen items are not candidates: take them out of the counts.
        seen_rows = np.repeat(np.arange(seen.shape[0]), np.diff(seen.indptr))
        seen_scores = scores[seen_rows, seen.indices]
        seen_positive = positive[seen_rows, 0]
        seen_below = np.bincount(seen_rows, weights=(seen_scores < seen_positive) +
                                 0.5 * (seen_scores == seen_positive),
                                 minlength=seen.shape[0])
        # The positive itself is seen and counted half among the ties: 0.5 back.
        below = below - seen_below + 0.5
        candidates = n_items - np.diff(seen.indptr)
        ok = candidates > 0
        total += float((below[ok] / candidates[ok]).sum())
        counted += int(ok.sum())
        return total, counted


class _SampledValidationScore:
    """Mean AUC of validation positives, estimated on samples (the command line's
    validation, whose cost is bounded by the training's): each of at most
    ``n_positives`` positives is scored against ``n_candidates`` items drawn at random
    from the catalogue, those its user has interacted with left out (ties count half).
    The mean over the drawn candidates estimates the positive's AUC against all of them
    without bias.  The pairs are drawn once: every epoch scores the same ones, in one
    pass of the model over their rows.

    ``est._validation_scores_per_positive`` bounds the pairs scored per training
    positive (50 candidates each, or the whole catalogue if smaller, which gives the
    exact AUC; at least 100 positives)."""

    def __init__(self, est, positives, catalogue, rng, n_training):
        n = positives.item.shape[0]
        n_items = catalogue.items.shape[0]
        budget = max(5000, int(est._validation_scores_per_positive * n_training))
        # Many positives, few candidates each: the positives' AUCs vary more than the
        # estimate of one from 50 draws.
        n_candidates = int(min(n_items, 50))
        keep = int(min(n, max(100, budget // (n_candidates + 1))))
        rows = np.sort(rng.choice(n, keep, replace=False)) if keep < n else np.arange(n)
        users, items = positives.user[rows], positives.item[rows]
        if n_candidates == n_items:  # a small catalogue: all of it, the exact AUC
            candidates = np.tile(np.arange(n_items), (keep, 1))
        else:
            candidates = rng.randint(0, n_items, size=(keep, n_candidates))
        seen = sp.csr_matrix((np.ones(catalogue.seen.shape[0], dtype=bool),
                              catalogue.seen, catalogue.seen_indptr),
                             shape=(catalogue.n_users, n_items))[users]
        # Seen candidates (the positive's own item among them) are not candidates.
        self.valid = ~np.asarray(seen[np.arange(keep)[:, None], candidates].todense())
        query = positives.query.to_csr()[rows]
        pair_items = np.concatenate([items[:, None], candidates], axis=1).ravel()
        self.pairs = (query[np.repeat(np.arange(keep), n_candidates + 1)] +
                      catalogue.items[pair_items]).tocsr().astype(query.dtype)
        self.est, self.shape = est, (keep, n_candidates + 1)
        # (positives scored, validation positives, candidates drawn for each)
        self.sample = (keep, n, n_candidates)

    def __call__(self, stack):
        est = self.est
        est._publish(stack)
        scores = est._decision(self.pairs)[:, 0].astype(np.float64).reshape(self.shape)
        positive, others = scores[:, :1], scores[:, 1:]
        below = ((others < positive) + 0.5 * (others == positive)) * self.valid
        candidates = self.valid.sum(axis=1)
        ok = candidates > 0
        return float((below.sum(axis=1)[ok] / candidates[ok]).mean()) if ok.any() \
            else float("nan")
