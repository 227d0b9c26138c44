"""Synthetic click-through-rate data shaped as Criteo's display-advertising logs (see
:func:`polylite.datasets.make_ctr`)."""
import numpy as np
import scipy.sparse as sp
from sklearn.utils import check_random_state

__all__ = ["make_ctr", "log_bins"]


def log_bins(values):
    """The Criteo challenge winners' bins of count-like numeric values: ``v`` itself for
    ``v <= 2``, else ``floor(log(v)^2)`` (so that bins widen with the value); missing
    values (NaN) get the bin -1.

    Parameters
    ----------
    values : array-like of float

    Returns
    -------
    bins : ndarray of int64
    """
    v = np.asarray(values, dtype=np.float64)
    out = np.full(v.shape, -1, np.int64)
    present = np.isfinite(v)
    low = present & (v <= 2)
    out[low] = np.floor(v[low]).astype(np.int64)
    high = present & (v > 2)
    out[high] = np.floor(np.log(v[high]) ** 2).astype(np.int64)
    return out


def _zipf_draws(n, n_levels, exponent, gen):
    """``n`` draws of levels 0..n_levels-1 with P(rank r) proportional to
    (r + 1)^-exponent, the ranks given to the levels at random."""
    weights = np.arange(1, n_levels + 1, dtype=np.float64) ** -exponent
    cdf = np.cumsum(weights)
    ranks = np.searchsorted(cdf, gen.random(n) * cdf[-1], side="right")
    ranks = np.minimum(ranks, n_levels - 1)
    return gen.permutation(n_levels)[ranks]


def _cardinalities(n_categorical, max_categories, gen):
    """Category counts of the categorical fields, log-spaced from a few to
    ``max_categories``, in a random order of the fields."""
    sizes = np.unique(np.round(np.geomspace(3, max_categories, n_categorical)).astype(
        np.int64)) if n_categorical else np.zeros(0, np.int64)
    while sizes.shape[0] < n_categorical:  # small max_categories: repeat sizes
        sizes = np.concatenate([sizes, sizes])[:n_categorical]
    return gen.permutation(np.sort(sizes))


def _table(n_samples, n_numeric, sizes, gen):
    """The raw columns: count-like numeric ones (about a fifth missing), Zipf-distributed
    category ids."""
    table = {}
    for i in range(n_numeric):
        scale = gen.uniform(0.5, 3.0)
        values = np.floor(np.expm1(gen.exponential(scale, n_samples)))
        values[gen.random(n_samples) < gen.uniform(0.0, 0.4)] = np.nan
        table[f"I{i + 1}"] = values
    for i, size in enumerate(sizes):
        table[f"C{i + 1}"] = _zipf_draws(n_samples, int(size), gen.uniform(1.0, 1.3), gen)
    return table


def _levels(table, n_numeric, n_categorical):
    """Each field's level of each row (numeric fields log-binned), as small integers."""
    levels = []
    for i in range(n_numeric):
        levels.append(log_bins(table[f"I{i + 1}"]) + 1)  # missing: level 0
    for i in range(n_categorical):
        levels.append(np.asarray(table[f"C{i + 1}"]))
    return levels


def _planted_logits(levels, n_pairs, rank, strength, gen):
    """Main effects per level and field-aware interactions: for each of ``n_pairs``
    field pairs (f, g), ``<A_fg z_f[level_f], A_gf z_g[level_g]>`` with per-field level
    embeddings z and per-pair projections A, which a factorization machine with one
    vector per level cannot share across the pairs."""
    n_fields = len(levels)
    n = levels[0].shape[0]
    logit = np.zeros(n)
    embeddings = []
    for lv in levels:
        top = int(lv.max()) + 1
        logit += gen.normal(0, 0.5, top)[lv]
        embeddings.append(gen.normal(0, 1, (top, rank)))
    pairs = set()
    while len(pairs) < min(n_pairs, n_fields * (n_fields - 1) // 2):
        f, g = sorted(gen.choice(n_fields, 2, replace=False).tolist())
        pairs.add((f, g))
    for f, g in sorted(pairs):
        A = gen.normal(0, 1 / np.sqrt(rank), (rank, rank))
        B = gen.normal(0, 1 / np.sqrt(rank), (rank, rank))
        zf = embeddings[f][levels[f]] @ A
        zg = embeddings[g][levels[g]] @ B
        logit += strength * np.einsum("ij,ij->i", zf, zg)
    return logit


def _calibrate(logit, click_rate):
    """The shift of the logits whose mean click probability is ``click_rate``."""
    lo, hi = -30.0, 30.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if np.mean(1 / (1 + np.exp(-(logit + mid)))) < click_rate:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def _one_hot(levels, dtype):
    """CSR rows of one nonzero (1) per field, each field's levels that occur as columns
    (in the order of their values), and the field of each column."""
    n = levels[0].shape[0]
    columns, fields, offset = [], [], 0
    for f, lv in enumerate(levels):
        seen, codes = np.unique(lv, return_inverse=True)
        columns.append(codes.ravel() + offset)
        fields.append(np.full(seen.shape[0], f, np.intc))
        offset += seen.shape[0]
    n_fields = len(levels)
    index_dtype = np.int32 if offset < 2**31 else np.int64
    indices = np.stack(columns, axis=1).astype(index_dtype).ravel()
    indptr = np.arange(0, n * n_fields + 1, n_fields, dtype=index_dtype)
    X = sp.csr_matrix((np.ones(indices.shape[0], dtype), indices, indptr),
                      shape=(n, offset))
    return X, np.concatenate(fields) if fields else np.zeros(0, np.intc)


def make_ctr(n_samples=100_000, *, n_numeric=13, n_categorical=26,
             max_categories=1_000_000, click_rate=0.25, n_pairs=40, rank=4,
             strength=0.6, return_table=False, dtype=np.float64, random_state=None):
    """Synthetic click logs shaped as Criteo's: count-like numeric fields, categorical
    fields of very different cardinalities, a click label, and planted field-aware
    interactions.

    Each row has ``n_numeric`` count-like numeric fields (heavy-tailed, about a fifth of
    the values missing, as Criteo's I1-I13) and ``n_categorical`` categorical fields
    whose numbers of categories are log-spaced from 3 to ``max_categories`` (as C1-C26),
    each drawn with Zipf-like frequencies (a few categories take most rows, a long tail
    is seen once or never).  The click probability is the logistic function of
    per-category main effects plus, for ``n_pairs`` random pairs of fields, an
    interaction ``<A_fg z_f, A_gf z_g>`` of the two fields' category embeddings through
    projections of their own per pair: a field-aware structure that a factorization
    machine, with one vector per category for all pairs, cannot represent with as few
    factors.  The logits are shifted so that the mean click rate is ``click_rate``.

    The matrix form encodes each numeric field by :func:`log_bins` (the Criteo winners'
    binning; a missing value is a bin of its own) and each field's levels one-hot, the
    columns being the levels that occur (so each row has one nonzero per field, of value
    1), as libffm's and xLearn's CTR files hold them: write it with
    :func:`write_libffm`.

    Parameters
    ----------
    n_samples : int, default=100_000
    n_numeric : int, default=13
    n_categorical : int, default=26
    max_categories : int, default=1_000_000
        Categories of the largest categorical field.
    click_rate : float, default=0.25
        Mean click probability (Criteo's is about 0.26).
    n_pairs : int, default=40
        Number of interacting field pairs.
    rank : int, default=4
        Rank of the planted interactions.
    strength : float, default=0.6
        Scale of the interactions' logits.
    return_table : bool, default=False
        Return the raw columns instead of the matrix: a dict of ``"I1"``... (float, NaN
        for missing) and ``"C1"``... (int64 category ids), for
        :class:`polylite.FieldEncoder`.
    dtype : {np.float64, np.float32}, default=np.float64
        dtype of X.
    random_state : int, RandomState instance or None, default=None
        The same seed gives the same data.

    Returns
    -------
    X : csr_matrix of shape (n_samples, n_columns)
        Only when ``return_table`` is False.
    y : ndarray of shape (n_samples,)
        Clicks (0 or 1).
    fields : ndarray of shape (n_columns,)
        The field of each column (numeric fields first, then the categorical ones).  Only
        when ``return_table`` is False.
    table : dict of ndarray
        Only when ``return_table``: the raw columns (X and fields are not returned).

    Examples
    --------
    >>> from polylite.datasets import make_ctr
    >>> X, y, fields = make_ctr(1000, max_categories=1000, random_state=0)
    >>> X.shape[0], int(fields.max()) + 1, bool(X.getnnz(axis=1).max() == 39)
    (1000, 39, True)
    """
    for name, value, low in (("n_samples", n_samples, 1), ("n_numeric", n_numeric, 0),
                             ("n_categorical", n_categorical, 0),
                             ("max_categories", max_categories, 3), ("rank", rank, 1),
                             ("n_pairs", n_pairs, 0)):
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) \
                or value < low:
            raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    if n_numeric + n_categorical < 1:
        raise ValueError("make_ctr needs at least one field")
    if not 0 < click_rate < 1:
        raise ValueError(f"click_rate must be in (0, 1), got {click_rate!r}")
    if not strength >= 0:
        raise ValueError(f"strength must be >= 0, got {strength!r}")
    gen = np.random.default_rng(check_random_state(random_state).randint(2**31))
    sizes = _cardinalities(n_categorical, int(max_categories), gen)
    table = _table(int(n_samples), n_numeric, sizes, gen)
    levels = _levels(table, n_numeric, n_categorical)
    logit = _planted_logits(levels, n_pairs, rank, strength, gen)
    logit += _calibrate(logit, click_rate)
    y = (gen.random(logit.shape[0]) < 1 / (1 + np.exp(-logit))).astype(np.int64)
    if return_table:
        return table, y
    X, fields = _one_hot(levels, dtype)
    return X, y, fields
