"""Data for examples, tests and benchmarks: a synthetic recommender, synthetic click logs,
MovieLens (downloaded from GroupLens or read from a folder), libffm files and chunked
streaming of large files.

No data set is shipped with polylite: :func:`fetch_movielens` downloads MovieLens once into
the data folder (:func:`get_data_home`), :func:`load_movielens` reads a folder anywhere.
"""
import mmap
import os

import numpy as np
import scipy.sparse as sp
from sklearn.utils import check_random_state

from . import _libffm
from ._ctr import log_bins, make_ctr
from ._download import get_data_home
from ._libffm import LibffmScan
from ._svmlight import DataFileError
from ._movielens import MovieLens, MovieLensFormatError, fetch_movielens, load_movielens

__all__ = ["make_recommender", "iter_recommender_chunks", "fetch_movielens",
           "load_movielens", "load_movielens_100k", "MovieLens", "MovieLensFormatError",
           "get_data_home", "iter_svmlight_chunks", "iter_csr_chunks", "make_ctr",
           "log_bins", "load_libffm", "iter_libffm_chunks", "scan_libffm", "dump_libffm",
           "LibffmScan", "DataFileError"]


def __dir__():
    # The public names only (not the modules it imports).
    return list(__all__)


def _power_law_levels(n_samples, n_levels, exponent, rng):
    # Popularity of level r proportional to (r + 1)^-exponent, levels shuffled.
    weights = (np.arange(1, n_levels + 1, dtype=np.float64)) ** -exponent
    weights /= weights.sum()
    levels = rng.choice(n_levels, size=n_samples, p=weights)
    return rng.permutation(n_levels)[levels]


def make_recommender(n_samples=100_000, n_users=5_000, n_items=3_000, n_numeric=3, *,
                     field_sizes=(), degree=2, rank=4, noise=0.1, popularity_exponent=1.0,
                     implicit=None, output="csr", return_table=False, return_model=False,
                     dtype=np.float64, index_dtype=np.int32, random_state=None):
    """Synthetic recommender data from a planted factorization machine of any degree.

    Each row has one user and one item (one-hot, with power-law popularity), one level
    of each extra categorical field (``field_sizes``; likewise power-law) and
    ``n_numeric`` standard-normal columns.  With ``implicit``, the rows are distinct
    (user, item) pairs, and the user's part also holds the set of items the user rated,
    the item's part the set of users who rated it (implicit feedback, each member
    ``1/sqrt(n)`` for a set of n).  Targets come from a planted factorization machine of
    the given degree and rank over every column (an intercept of 3, a weight per
    column, and the ANOVA interactions of degrees 2..degree, one factor matrix per
    degree), plus Gaussian noise.

    At scale, ask for ``output="relational"``: each user's and item's part is then a
    table row stored once (:class:`polylite.relational.RelationalMatrix`), where the
    expanded rows of implicit sets would repeat a user's whole set on each of the
    user's ratings (10^7 ratings of users with 140 each and items with 1,000 each:
    about 1.1 * 10^10 nonzeros expanded, 2 * 10^7 in the tables).

    Parameters
    ----------
    n_samples : int, default=100_000
    n_users, n_items : int, default=5_000, 3_000
    n_numeric : int, default=3
    field_sizes : sequence of int, default=()
        Number of levels of each extra categorical field (context such as the time of
        day or the device).
    degree : int, default=2
        Degree of the planted interactions.
    rank : int, default=4
        Rank of the planted factor matrices.
    noise : float, default=0.1
        Standard deviation of the added noise.
    popularity_exponent : float, default=1.0
        The level of popularity rank r (users, items, field levels) is drawn with
        probability proportional to r^-exponent (long-tailed activity of users and
        popularity of items).  With ``implicit``, a user rates an item at most once, so
        the most active users and popular items get fewer rows than these
        probabilities give, at most ``n_items`` and ``n_users``.
    implicit : {None, "user", "item", "both"}, default=None
        Implicit-feedback fields: after the user's id, the items the user rated
        ("user" or "both"); after the item's id, the users who rated it ("item" or
        "both"), as :class:`~polylite.preprocessing.FieldEncoder` encodes them.
    output : {"csr", "relational"}, default="csr"
        A CSR matrix, or a :class:`~polylite.relational.RelationalMatrix` of the same
        rows: a user block (its id and rated items), an item block (its id and raters)
        and the other columns as its direct part.
    return_table : bool, default=False
        Return the rows as a table for :class:`polylite.preprocessing.FieldEncoder`
        instead of a matrix.
    return_model : bool, default=False
        Also return the planted parameters.
    dtype : {np.float64, np.float32}, default=np.float64
    index_dtype : {np.int32, np.int64}, default=np.int32
    random_state : int, RandomState instance or None, default=None

    Returns
    -------
    X : csr_matrix or RelationalMatrix of shape (n_samples, n_features)
        Columns: users, the items each user rated (``implicit`` "user" or "both"), items,
        the users who rated each item ("item" or "both"), each extra field, then the
        numeric columns.  Only when ``return_table`` is False.
    table : dict of ndarray
        Only when ``return_table``: ``"user_id"`` and ``"item_id"`` (int64 of shape
        (n_samples,)), ``"field_<j>"`` (the level of extra field j) and ``"numeric"``
        (shape (n_samples, n_numeric)).  Encoded with ``FieldEncoder(context_features=
        {"field_0": "categorical", ..., "numeric": "numeric"})`` it gives the columns of X
        that the rows use.
    y : ndarray of shape (n_samples,)
    model : dict
        Only when ``return_model``: ``intercept`` (float), ``w`` (shape (n_columns,)),
        ``P`` (shape (degree - 1, n_columns, rank); block t - 2 for degree t), so that
        ``polylite.kernels.predict(X, P, degrees=range(2, degree + 1), w=w,
        intercept=intercept)`` is y without the noise.
    """
    rng = check_random_state(random_state)
    if implicit not in IMPLICIT:
        raise ValueError(f"implicit must be one of {list(IMPLICIT)}, got {implicit!r}")
    if output not in ("csr", "relational"):
        raise ValueError(f"output must be 'csr' or 'relational', got {output!r}")
    gen = np.random.default_rng(rng.randint(2**31))
    sizes = [n_users, n_items, *[int(f) for f in field_sizes]]
    if implicit is None:
        X = _recommender_rows(n_samples, sizes, n_numeric, dtype, index_dtype, gen,
                              popularity_exponent)
        table = (_recommender_table(X, sizes) if return_table or output == "relational"
                 else None)
        if output == "relational":
            X = _relational_rows(table, n_users, n_items, None, X[:, n_users + n_items:],
                                 dtype)
    else:
        if n_samples > n_users * n_items:
            raise ValueError(f"{n_samples} distinct (user, item) pairs cannot be drawn "
                             f"from {n_users} users and {n_items} items")
        users, items = _distinct_pairs(n_samples, n_users, n_items, popularity_exponent,
                                       gen)
        context = _recommender_rows(n_samples, sizes[2:], n_numeric, dtype, index_dtype,
                                    gen, popularity_exponent)
        table = {"user_id": users, "item_id": items,
                 **_recommender_table(context, sizes[2:], offset=0)}
        X = _relational_rows(table, n_users, n_items, implicit, context, dtype)
    model = _planted_model(X.shape[1], degree, rank, gen)
    out = [X, _planted_targets(X, model, noise, gen)]
    if output == "csr" and implicit is not None:
        out[0] = _index_type(X.to_csr(), index_dtype)
    if return_table:
        out[0] = table
    if return_model:
        w, P = model
        out.append({"intercept": _PLANTED_INTERCEPT, "w": w, "P": P})
    return tuple(out)


def iter_recommender_chunks(n_samples, chunk_rows=1_000_000, n_users=5_000, n_items=3_000,
                            n_numeric=3, *, degree=2, rank=4, noise=0.1,
                            popularity_exponent=1.0, dtype=np.float64,
                            index_dtype=np.int32, random_state=None):
    """:func:`make_recommender`'s data made a chunk of rows at a time, for data sets larger
    than memory (for example written to disk as they come, see the streaming benchmark).

    Every chunk's targets come from one planted model.  The rows differ from those of
    :func:`make_recommender` with the same seed, but the chunks do not depend on
    ``chunk_rows`` beyond how the rows are cut.

    Parameters
    ----------
    n_samples : int
        Rows in all.
    chunk_rows : int, default=1_000_000
        Rows per chunk; the last chunk may be shorter.
    n_users, n_items, n_numeric, degree, rank, noise, popularity_exponent, dtype, \
index_dtype, random_state
        As in :func:`make_recommender`.

    Yields
    ------
    X : csr_matrix of shape (n_chunk_rows, n_users + n_items + n_numeric)
    y : ndarray of shape (n_chunk_rows,)
    """
    if chunk_rows < 1:
        raise ValueError(f"chunk_rows must be positive, got {chunk_rows}")
    seed = check_random_state(random_state).randint(2**31)
    n_features = n_users + n_items + n_numeric
    model = _planted_model(n_features, degree, rank, np.random.default_rng([seed, 0]))
    # Rows are drawn in blocks of a fixed size, whatever chunk_rows is.
    block = 100_000
    pending_X, pending_y, have = [], [], 0
    for b, start in enumerate(range(0, n_samples, block)):
        gen = np.random.default_rng([seed, 1, b])
        X = _recommender_rows(min(block, n_samples - start), [n_users, n_items],
                              n_numeric, dtype, index_dtype, gen, popularity_exponent)
        pending_X.append(X)
        pending_y.append(_planted_targets(X, model, noise, gen))
        have += X.shape[0]
        while have >= chunk_rows or (have and start + block >= n_samples):
            X = _vstack_csr(pending_X, index_dtype)
            y = np.concatenate(pending_y)
            take = min(chunk_rows, have)
            yield X[:take], y[:take]
            pending_X, pending_y, have = [X[take:]], [y[take:]], have - take


def _vstack_csr(parts, index_dtype):
    X = parts[0] if len(parts) == 1 else sp.vstack(parts, format="csr")
    X.indices = X.indices.astype(index_dtype, copy=False)
    X.indptr = X.indptr.astype(index_dtype, copy=False)
    return X


def _recommender_rows(n_samples, sizes, n_numeric, dtype, index_dtype, gen,
                      popularity_exponent=1.0):
    """The rows of :func:`make_recommender`: one level of each categorical field (users,
    items, extra fields; ``sizes`` levels each), then the numeric columns."""
    if any(size < 1 for size in sizes):
        raise ValueError(f"every field needs at least one level, got {sizes}")
    levels = [_power_law_levels(n_samples, size, popularity_exponent, gen)
              for size in sizes]
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    n_features = offsets[-1] + n_numeric
    row_nnz = len(sizes) + n_numeric
    indices = np.empty((n_samples, row_nnz), dtype=index_dtype)
    for f, level in enumerate(levels):
        indices[:, f] = offsets[f] + level
    indices[:, len(sizes):] = offsets[-1] + np.arange(n_numeric)
    data = np.ones((n_samples, row_nnz), dtype=dtype)
    data[:, len(sizes):] = gen.standard_normal((n_samples, n_numeric))
    indptr = (np.arange(n_samples + 1, dtype=index_dtype) * row_nnz).astype(index_dtype)
    X = sp.csr_matrix((data.ravel(), indices.ravel(), indptr),
                      shape=(n_samples, n_features))
    # scipy narrows the index arrays of small matrices: keep the type asked for.
    X.indices = X.indices.astype(index_dtype, copy=False)
    X.indptr = X.indptr.astype(index_dtype, copy=False)
    return X


def _planted_model(n_features, degree, rank, gen):
    """Linear weights and factors (one block per degree 2..degree) of the planted FM."""
    w = gen.normal(0, 0.3, n_features)
    P = gen.normal(0, 0.5 / rank ** 0.25, (degree - 1, n_features, rank))
    return w, P


# The planted model's intercept (near the middle of a 1..5 rating scale).
_PLANTED_INTERCEPT = 3.0


def _planted_targets(X, model, noise, gen):
    from .kernels import predict
    w, P = model
    y = predict(X, P, degrees=list(range(2, P.shape[0] + 2)), w=w,
                intercept=_PLANTED_INTERCEPT, check_input=False).astype(np.float64)
    return y + noise * gen.standard_normal(X.shape[0])


def _recommender_table(X, sizes, offset=2):
    """:func:`make_recommender`'s rows as a table for ``FieldEncoder``: the level of each
    categorical field (read back from X's columns) and the numeric columns; the first
    two fields (unless ``offset`` is 0) are the user and the item."""
    n_fields = len(sizes)
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    # Every row holds one entry per categorical field, then every numeric column.
    width = n_fields + X.shape[1] - int(offsets[-1])
    indices = X.indices.reshape(X.shape[0], width)
    data = X.data.reshape(X.shape[0], width)
    levels = [(indices[:, f] - offsets[f]).astype(np.int64) for f in range(n_fields)]
    ids = {"user_id": levels[0], "item_id": levels[1]} if offset else {}
    return {**ids, **{f"field_{j}": level for j, level in enumerate(levels[offset:])},
            "numeric": data[:, n_fields:].astype(np.float64)}


IMPLICIT = (None, "user", "item", "both")


def _index_type(X, index_dtype):
    X.indices = X.indices.astype(index_dtype, copy=False)
    X.indptr = X.indptr.astype(index_dtype, copy=False)
    return X


def _distinct_pairs(n_samples, n_users, n_items, exponent, gen):
    """``n_samples`` distinct (user, item) pairs, users and items drawn with power-law
    probabilities (as :func:`_power_law_levels`), repeated pairs drawn again; after a few
    rounds (the most popular pairs all taken) the missing pairs are drawn uniformly."""
    def weights(n_levels):
        w = np.arange(1, n_levels + 1, dtype=np.float64) ** -exponent
        return w / w.sum(), gen.permutation(n_levels)

    user_p, user_perm = weights(n_users)
    item_p, item_perm = weights(n_items)
    keys = np.zeros(0, dtype=np.int64)
    for attempt in range(30):
        need = n_samples - keys.shape[0]
        if need <= 0:
            break
        draws = int(1.1 * need) + 16
        if attempt < 4:
            users = user_perm[gen.choice(n_users, draws, p=user_p)]
            items = item_perm[gen.choice(n_items, draws, p=item_p)]
        else:
            users, items = gen.integers(n_users, size=draws), gen.integers(n_items,
                                                                          size=draws)
        keys = np.sort(np.concatenate([keys, users.astype(np.int64) * n_items + items]))
        keys = keys[np.concatenate([[True], keys[1:] != keys[:-1]])]  # sorted, distinct
    if keys.shape[0] < n_samples:  # nearly every pair taken: the rest, in order
        free = np.setdiff1d(np.arange(n_users * n_items, dtype=np.int64), keys)
        keys = np.concatenate([keys, free[:n_samples - keys.shape[0]]])
    keys = gen.permutation(gen.choice(keys, n_samples, replace=False))
    return keys // n_items, keys % n_items


def _relational_rows(table, n_users, n_items, implicit, context, dtype):
    """A RelationalMatrix of users and items (with their implicit sets) as blocks and
    ``context`` (CSR) as its direct part."""
    from .preprocessing import _implicit_sets
    from .relational import RelationalMatrix, RelationBlock
    users, items = table["user_id"], table["item_id"]
    user_parts = [sp.identity(n_users, dtype=dtype, format="csr")]
    item_parts = [sp.identity(n_items, dtype=dtype, format="csr")]
    if implicit in ("user", "both"):
        user_parts.append(_implicit_sets(users, items, n_users, n_items, "sqrt", dtype))
    if implicit in ("item", "both"):
        item_parts.append(_implicit_sets(items, users, n_items, n_users, "sqrt", dtype))
    return RelationalMatrix(
        [RelationBlock(users, sp.hstack(user_parts, format="csr", dtype=dtype)),
         RelationBlock(items, sp.hstack(item_parts, format="csr", dtype=dtype)),
         sp.csr_matrix(context, dtype=dtype)], dtype=dtype)


def load_movielens_100k(path, split="u1", dtype=np.float64):
    """Read a MovieLens 100K train/test split as one-hot user and item columns.

    A shortcut for the common case of :func:`load_movielens` and
    :class:`~polylite.preprocessing.FieldEncoder`.

    Parameters
    ----------
    path : str or path-like
        The ``ml-100k`` folder (it holds ``u.data``, ``u1.base``, ``u1.test``, ...).
    split : {"u1", ..., "u5", "ua", "ub"}, default="u1"
        Which of the data set's own splits to read (``<split>.base``/``<split>.test``).
    dtype : {np.float64, np.float32}, default=np.float64

    Returns
    -------
    X_train, y_train, X_test, y_test : csr_matrix, ndarray, csr_matrix, ndarray
        Columns 0..942 are users, 943..2624 items (the full id ranges of the data set).
    """
    from .preprocessing import FieldEncoder
    data = load_movielens(path, splits=[split])
    encoder = FieldEncoder(dtype=dtype).fit(data.ratings, users=data.users,
                                            items=data.items)
    out = []
    for rows in data.splits[split]:
        part = {key: values[rows] for key, values in data.ratings.items()}
        out += [encoder.transform(part), part["rating"]]
    return tuple(out)


def iter_svmlight_chunks(path, n_features, chunk_bytes=64 * 2**20, dtype=np.float64,
                         zero_based="auto"):
    """Read an svmlight/libsvm file a chunk of lines at a time (for ``partial_fit``).

    Only one chunk is in memory at once, so a file larger than memory can be streamed:

    >>> for X, y in iter_svmlight_chunks("train.svm", n_features):  # doctest: +SKIP
    ...     model.partial_fit(X, y)

    Parameters
    ----------
    path : str or path-like
    n_features : int
        Number of columns of the whole data set (a chunk may not show them all).
    chunk_bytes : int, default=64 MiB
        Approximate size of a chunk of the file; chunks end at line boundaries.
    dtype : {np.float64, np.float32}, default=np.float64
    zero_based : bool or "auto", default="auto"
        Whether column indices in the file start at 0 (see
        :func:`sklearn.datasets.load_svmlight_file`).  With "auto", decide once, from the
        file's first 64 KiB (one-based unless an index 0 appears there).

    Yields
    ------
    X : csr_matrix of shape (n_chunk_rows, n_features)
    y : ndarray of shape (n_chunk_rows,)
    """
    from sklearn.datasets import load_svmlight_file
    if chunk_bytes < 1:
        raise ValueError(f"chunk_bytes must be positive, got {chunk_bytes}")
    if zero_based == "auto":
        # Decide once for the whole file, so that every chunk is read the same way.
        zero_based = not _one_based_hint(path)
    size = os.path.getsize(path)
    offset = 0
    while offset < size:
        X, y = load_svmlight_file(path, n_features=n_features, dtype=dtype,
                                  offset=offset, length=chunk_bytes,
                                  zero_based=zero_based)
        offset += chunk_bytes
        if X.shape[0]:
            yield X, y


def _one_based_hint(path):
    """True when the file looks one-based (no column index 0 in its first lines)."""
    with open(path, "rb") as f:
        head = f.read(1 << 16).split(b"\n")
    for line in head:
        for token in line.split(b"#")[0].split()[1:]:
            if token.split(b":")[0] == b"0":
                return False
    return True


def iter_csr_chunks(X, y, chunk_rows=100_000):
    """Yield (X[start:stop], y[start:stop]) row blocks of a (memory-mapped) CSR matrix.

    With ``X`` (and ``y``) built on ``np.memmap`` arrays, only the current block is read
    into memory, and the file pages of the blocks already yielded leave the process's
    resident set (``madvise(MADV_DONTNEED)``; they stay in the operating system's file
    cache), so that the resident memory stays about one block whatever the file's size.
    Copy-on-write maps (``mode="c"``) keep their pages.

    Parameters
    ----------
    X : sparse matrix of shape (n_samples, n_features), CSR
    y : array-like of shape (n_samples,)
    chunk_rows : int, default=100_000

    Yields
    ------
    X_chunk : csr_matrix of shape (n_chunk_rows, n_features)
    y_chunk : ndarray of shape (n_chunk_rows,)
    """
    if chunk_rows < 1:
        raise ValueError(f"chunk_rows must be positive, got {chunk_rows}")
    X = sp.csr_matrix(X) if not sp.issparse(X) or X.format != "csr" else X
    pages = [_FilePages(a) for a in (X.data, X.indices, X.indptr, y)]
    for start in range(0, X.shape[0], chunk_rows):
        stop = min(start + chunk_rows, X.shape[0])
        yield X[start:stop], np.asarray(y[start:stop])
        for part, end in zip(pages, (X.indptr[stop], X.indptr[stop], stop, stop)):
            part.release_before(int(end))


class _FilePages:
    """The file mapping under an array that views a shared ``np.memmap`` (modes "r",
    "r+", "w+"), able to drop the pages of its first elements from the resident set."""

    def __init__(self, a):
        self.mapping = None
        top = a
        while isinstance(top, np.ndarray) and not isinstance(top.base, mmap.mmap):
            top = top.base
        if not (isinstance(top, np.memmap) and isinstance(a, np.ndarray)
                and a.ndim == 1 and top.mode != "c" and a.flags.c_contiguous):
            return
        # np.memmap maps from the allocation boundary below its offset.
        mapping_start = top.ctypes.data - top.offset % mmap.ALLOCATIONGRANULARITY
        self.mapping, self.itemsize = top.base, a.itemsize
        self.begin = a.ctypes.data - mapping_start  # byte offset of a[0] in the mapping
        self.released = self.begin - self.begin % mmap.PAGESIZE

    def release_before(self, n):
        """Drop the whole pages holding only elements before a[n] (and earlier bytes)."""
        if self.mapping is None or not hasattr(mmap, "MADV_DONTNEED"):
            return  # nothing mapped, or a platform without madvise
        end = self.begin + n * self.itemsize
        end -= end % mmap.PAGESIZE
        if end > self.released:
            self.mapping.madvise(mmap.MADV_DONTNEED, self.released, end - self.released)
            self.released = end


def load_libffm(path, *, n_features=None, dtype=np.float64, chunk_bytes=16 * 2**20):
    """Read a libffm file (``label field:feature:value ...`` per line) whole.

    The format of libffm and xLearn's field-aware models: field and feature indices
    start at 0, and each feature belongs to one field.  gzip, bzip2 and xz files are
    decompressed as they are read.

    Parameters
    ----------
    path : str or path-like
    n_features : int or None, default=None
        Columns of X: give the training data's to read a test file (which may not show
        every feature of the training file, and may show features it never did: those
        at ``n_features`` and beyond are left out, as libffm's prediction skips
        features its model does not have).  None: the largest feature index plus one.
    dtype : {np.float64, np.float32}, default=np.float64
    chunk_bytes : int, default=16 MiB
        Bytes of text parsed at once.

    Returns
    -------
    X : csr_matrix of shape (n_rows, n_features)
        Canonical CSR (a feature repeated on a line is summed).
    y : ndarray of shape (n_rows,)
        The labels as written (libffm's are 0 and 1).
    fields : ndarray of shape (n_features,)
        The field of each column, -1 for columns the file never shows: the ``fields`` of
        :class:`polylite.FieldAwareFactorizationMachineClassifier` (map the -1 to any
        field).

    Raises
    ------
    polylite.datasets.DataFileError
        A malformed line (the message names the file and the line and says what is
        wrong), a feature in two fields, or a file without data.
    """
    return _libffm.read_libffm(path, n_features=n_features, dtype=dtype,
                               chunk_bytes=chunk_bytes)


def iter_libffm_chunks(path, n_features=None, *, chunk_bytes=16 * 2**20,
                       dtype=np.float64):
    """Read a libffm file a chunk of lines at a time (for ``partial_fit``).

    Only one chunk is in memory at once, so a file larger than memory can be streamed:

    >>> from polylite import FieldAwareFactorizationMachineClassifier
    >>> info = scan_libffm("train.ffm")  # doctest: +SKIP
    >>> model = FieldAwareFactorizationMachineClassifier(  # doctest: +SKIP
    ...     fields=info.fields.clip(0))
    >>> for X, y, _ in iter_libffm_chunks("train.ffm", info.n_features):  # doctest: +SKIP
    ...     model.partial_fit(X, y, classes=[0, 1])

    Parameters
    ----------
    path : str or path-like
    n_features : int or None, default=None
        Columns of every chunk (of the whole data set: a chunk may not show them all);
        features beyond are left out.  None: each chunk as wide as the largest feature
        seen so far needs.
    chunk_bytes : int, default=16 MiB
        Approximate bytes of text per chunk; chunks end at line ends.
    dtype : {np.float64, np.float32}, default=np.float64

    Yields
    ------
    X : csr_matrix of shape (n_chunk_rows, n_features)
    y : ndarray of shape (n_chunk_rows,)
    fields : ndarray of shape (n_features,)
        The field of each column as far as the file has shown them (-1: not yet).

    Raises
    ------
    polylite.datasets.DataFileError
        As :func:`load_libffm`, naming the line.
    """
    yield from _libffm.iter_libffm(path, n_features, dtype=dtype, chunk_bytes=chunk_bytes)


def scan_libffm(path, *, chunk_bytes=16 * 2**20):
    """One pass over a libffm file without keeping its rows (for streaming it).

    Parameters
    ----------
    path : str or path-like
    chunk_bytes : int, default=16 MiB

    Returns
    -------
    scan : LibffmScan
        ``n_rows``, ``n_features`` (the largest feature index plus one), ``n_fields``,
        ``fields`` (the field of each feature, -1 for those never seen) and ``labels``
        (the distinct labels).
    """
    return _libffm.scan_libffm(path, chunk_bytes=chunk_bytes)


def dump_libffm(X, y, fields, path):
    """Write rows as a libffm file (``label field:feature:value ...`` per line).

    Parameters
    ----------
    X : {array-like, sparse matrix} of shape (n_samples, n_features)
        Only the nonzeros are written, in column order.
    y : array-like of shape (n_samples,)
        Labels (integers are written without a decimal point).
    fields : array-like of int of shape (n_features,)
        The field of each column.
    path : str or path-like
    """
    _libffm.write_libffm(path, X, y, fields)
