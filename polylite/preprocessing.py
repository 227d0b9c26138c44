"""Encoding recommender data as sparse feature rows for factorization machines.

:class:`FieldEncoder` turns interactions (a user id, an item id and optional context
columns per row) and the side information of users and items (tables with one row per
user or item) into CSR rows of one-hot and numeric fields, with a recorded column layout,
so that new rows are encoded the same way.  It is saved pickle-free on its own
(:meth:`FieldEncoder.save`) or with the model after it in a pipeline
(:func:`polylite.save`).
"""
import numbers
import zlib
from collections.abc import Mapping
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from ._io import (ModelFileError, check_array_names, check_float_arrays, register_model,
                  save_model)
from ._validation import check_choice, store_init_params
from .relational import RelationalMatrix, RelationBlock

__all__ = ["FieldEncoder", "Field", "hash_buckets"]

FEATURE_KINDS = ("categorical", "numeric")
# Kinds of context features only: categorical values hashed into ``n_buckets`` columns
# (no vocabulary), count-like numbers in log-spaced bins (one-hot).
CONTEXT_KINDS = FEATURE_KINDS + ("hashed", "log-binned")
ID_FIELDS = ("both", "user", "item", "none")
IMPLICIT = ("user", "item", "both")
IMPLICIT_NORMS = ("sqrt", "sum", "none")
HANDLE_UNKNOWN = ("error", "ignore")
OUTPUTS = ("csr", "relational")
# Names of the implicit-feedback fields (user side: the items the user rated; item side:
# the users who rated the item).
RATED_ITEMS, RATERS = "rated_items", "raters"
# The most columns of a "hashed" field.
MAX_BUCKETS = 2**31 - 1
# The most columns of a numeric block: a bound a model file's layout is checked against
# (nothing else in the file has that size), and hence fit's too.
MAX_NUMERIC_WIDTH = 2**20


class Field(NamedTuple):
    """One field of the column layout of a :class:`FieldEncoder`.

    Attributes
    ----------
    name : str
        The column it comes from (the id column for "id" fields), or ``"rated_items"`` /
        ``"raters"`` for the implicit-feedback fields.
    side : {"user", "item", "context"}
        Whose field it is: the user's (from the ``users`` table or the user id), the
        item's, or the interaction's own (a column of X).
    kind : {"id", "categorical", "numeric", "implicit", "hashed", "log-binned"}
    start, stop : int
        Its output columns are ``start:stop``.
    """
    name: str
    side: str
    kind: str
    start: int
    stop: int


# ---- tables -----------------------------------------------------------------------------

def _column_names(table, what):
    """The column names of a table, or TypeError if ``table`` is not one."""
    names = getattr(getattr(table, "dtype", None), "names", None)
    if names is not None:  # NumPy structured array
        return list(names)
    if hasattr(table, "columns") and hasattr(table, "to_numpy"):  # pandas DataFrame
        return list(table.columns)
    if isinstance(table, Mapping):
        return list(table.keys())
    raise TypeError(f"{what} must be a table with named columns (a dict or Bunch of "
                    f"arrays, a pandas DataFrame or a NumPy structured array), got "
                    f"{type(table).__name__}")


def _column(table, key, what):
    """Column ``key`` of a table as a NumPy array."""
    names = _column_names(table, what)
    if key not in names:
        raise ValueError(f"{what} has no column {key!r}; its columns are {names}")
    values = table[key]
    values = values.to_numpy() if hasattr(values, "to_numpy") else np.asarray(values)
    if values.ndim == 0:
        raise ValueError(f"column {key!r} of {what} is a scalar, not one value per row")
    return values


def _columns(table, keys, what):
    """The columns ``keys`` of a table, checked to have the same number of rows."""
    if table is None:
        raise ValueError(f"the encoder reads {list(keys)} from {what}, but no {what} "
                         f"table was given")
    out = {key: _column(table, key, what) for key in keys}
    lengths = {key: len(v) for key, v in out.items()}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"the columns of {what} have different lengths: {lengths}")
    return out


def _categories(values, name):
    """Values of a categorical column as a NumPy array of numbers or str, checked."""
    if values.ndim != 1:
        raise ValueError(f"categorical column {name!r} must be 1-D, got shape "
                         f"{values.shape}")
    if values.dtype == object:
        if all(isinstance(v, str) for v in values):
            values = values.astype(str)
        elif all(isinstance(v, numbers.Integral) and not isinstance(v, bool)
                 for v in values):
            values = values.astype(np.int64)
        else:
            raise ValueError(f"column {name!r} mixes value types (or holds None); a "
                             f"categorical column holds numbers or strings")
    if values.dtype.kind not in "biufU":
        raise ValueError(f"column {name!r} has dtype {values.dtype}; a categorical column "
                         f"holds numbers or strings")
    if values.dtype.kind == "f" and not np.all(np.isfinite(values)):
        raise ValueError(f"categorical column {name!r} contains NaN or infinity")
    return values


def _numeric(values, name, dtype):
    """A numeric column (1-D, or 2-D for a block of columns) as a 2-D float array."""
    if values.ndim not in (1, 2):
        raise ValueError(f"numeric column {name!r} must be 1-D or 2-D, got shape "
                         f"{values.shape}")
    try:
        values = np.asarray(values, dtype=dtype)
    except (TypeError, ValueError):
        raise ValueError(f"numeric column {name!r} holds values that are not numbers"
                         ) from None
    if not np.all(np.isfinite(values)):
        raise ValueError(f"numeric column {name!r} contains NaN or infinity")
    if values.ndim == 2 and values.shape[1] > MAX_NUMERIC_WIDTH:
        raise ValueError(f"numeric column {name!r} is a block of {values.shape[1]} "
                         f"columns, more than the {MAX_NUMERIC_WIDTH} a FieldEncoder "
                         f"encodes densely; encode wide features as a sparse matrix and "
                         f"stack it beside the encoder's output")
    return values.reshape(len(values), -1)


def _codes(vocabulary, values, name, handle_unknown):
    """Position of each value in the sorted ``vocabulary``; -1 for unknown values."""
    values = _categories(values, name)
    if (vocabulary.dtype.kind == "U") != (values.dtype.kind == "U"):
        kinds = ["strings" if a.dtype.kind == "U" else "numbers" for a in (values, vocabulary)]
        raise ValueError(f"column {name!r} holds {kinds[0]}, but the encoder was fitted on "
                         f"{kinds[1]}")
    if vocabulary.size == 0:
        pos = np.zeros(values.shape, dtype=np.intp)
        found = np.zeros(values.shape, dtype=bool)
    elif _dense_integer_range(vocabulary, values):
        # Integer ids in a compact range: a lookup table, much faster than a search.
        low = int(vocabulary[0])
        table = np.full(int(vocabulary[-1]) - low + 1, -1, dtype=np.intp)
        table[vocabulary.astype(np.int64) - low] = np.arange(vocabulary.size)
        offset = values.astype(np.int64) - low
        inside = (offset >= 0) & (offset < table.size)
        pos = np.where(inside, table[np.where(inside, offset, 0)], -1)
        found = pos >= 0
    else:
        pos = np.minimum(np.searchsorted(vocabulary, values), vocabulary.size - 1)
        found = vocabulary[pos] == values
    if handle_unknown == "error" and not np.all(found):
        unknown = values[~found]
        raise ValueError(f"column {name!r} has {np.unique(unknown).size} value(s) unseen "
                         f"in fit, e.g. {unknown[0].item()!r}; set "
                         f"handle_unknown='ignore' to encode them as zeros")
    return np.where(found, pos, -1)


def _splitmix64(x):
    """The splitmix64 finaliser of uint64 ``x`` (a bijection that mixes every bit)."""
    with np.errstate(over="ignore"):
        z = x + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def hash_buckets(values, n_buckets, name="values"):
    """The bucket (0 .. n_buckets-1) of each categorical value, the same in every process.

    Integers (and booleans) are mixed from their 64-bit value, floats from the bits of
    their 64-bit value (0.0 and -0.0 alike), strings from the CRC-32 of their UTF-8
    bytes; unlike Python's ``hash``, which is salted per process, nothing depends on
    the process or the machine.

    Parameters
    ----------
    values : array-like of shape (n,)
        Numbers or strings.
    n_buckets : int
    name : str, default="values"
        The column's name, for error messages.

    Returns
    -------
    buckets : ndarray of shape (n,), dtype int64
    """
    values = _categories(np.asarray(values), name)
    if values.dtype.kind == "U":
        unique, inverse = np.unique(values, return_inverse=True)
        keys = np.array([zlib.crc32(v.encode("utf-8")) for v in unique.tolist()],
                        dtype=np.uint64)[inverse.ravel()]
        keys = keys | np.uint64(1 << 63)  # strings apart from the small integers
    elif values.dtype.kind == "f":
        keys = (values.astype(np.float64) + 0.0).view(np.uint64)
    else:
        keys = values.astype(np.int64).view(np.uint64)
    return (_splitmix64(keys) % np.uint64(n_buckets)).astype(np.int64)


# log_bins's bin of a missing value.
MISSING_BIN = np.iinfo(np.int64).min


def _log_binned(values, name):
    """The log bins of a 1-D count-like column, MISSING_BIN for NaN."""
    values = np.asarray(values)
    if values.ndim != 1:
        raise ValueError(f"log-binned column {name!r} must be 1-D, got shape "
                         f"{values.shape}")
    try:
        values = values.astype(np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"log-binned column {name!r} holds values that are not numbers"
                         ) from None
    if np.isinf(values).any():
        raise ValueError(f"log-binned column {name!r} contains infinity")
    from ._ctr import log_bins
    missing = np.isnan(values)
    return np.where(missing, MISSING_BIN, log_bins(np.where(missing, 0.0, values)))


def _dense_integer_range(vocabulary, values):
    """Whether integer ``values`` can be looked up in a table over the vocabulary's
    range (integers only, a range at most a few times the vocabulary's size)."""
    if vocabulary.dtype.kind not in "iu" or values.dtype.kind not in "iu":
        return False
    span = int(vocabulary[-1]) - int(vocabulary[0]) + 1
    return span <= max(4 * vocabulary.size, 1 << 16)


def _dense_to_csr(values):
    """CSR of the nonzeros of a dense 2-D block, built directly (scipy goes through COO);
    its arrays are new, never views of ``values``."""
    n, width = values.shape
    nonzero = values != 0
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(nonzero.sum(axis=1), out=indptr[1:])
    return sp.csr_matrix((values[nonzero], np.nonzero(nonzero)[1], indptr),
                         shape=(n, width))


def _one_hot(codes, width, dtype):
    """CSR rows with a one in column ``codes[i]`` (no entry where the code is -1)."""
    known = codes >= 0
    indptr = np.concatenate([[0], np.cumsum(known)])
    return sp.csr_matrix((np.ones(int(known.sum()), dtype), codes[known], indptr),
                         shape=(len(codes), width))


def _implicit_sets(owners, members, n_owners, n_members, norm, dtype):
    """Implicit-feedback rows: row o holds the members paired with owner o (each pair
    once), each valued by ``norm`` of the set's size n ("sqrt": 1/sqrt(n), "sum": 1/n,
    "none": 1); CSR of shape (n_owners, n_members)."""
    block = sp.csr_matrix((np.ones(len(owners), dtype), (owners, members)),
                          shape=(n_owners, n_members))
    block.sum_duplicates()
    block.data[:] = 1
    size = np.diff(block.indptr).astype(dtype)
    scale = {"sqrt": lambda s: 1 / np.sqrt(s), "sum": lambda s: 1 / s,
             "none": np.ones_like}[norm](np.maximum(size, 1))
    block.data *= np.repeat(scale, np.diff(block.indptr)).astype(dtype)
    return block


# ---- the encoder ------------------------------------------------------------------------

@register_model
class FieldEncoder(TransformerMixin, BaseEstimator):
    """Encode recommender interactions as sparse rows of one-hot and numeric fields.

    Each row of the output concatenates, in this order, the fields of the row's user (a
    one-hot user id, the user's side features, the items the user rated), of its item (a
    one-hot item id, side features, the users who rated it) and of the interaction itself
    (context columns of X).  Side features come from tables with one row per user or item
    given to :meth:`fit`; the column layout found there (``fields_``, ``categories_``) is
    kept, so new rows are encoded the same way.  The user part and the item part of a row
    never share a column, which :func:`polylite.recommend.recommend` uses to score every
    item for a user without one row per pair.

    Tables (X and the side tables) are mappings of column name to a 1-D array (a dict,
    :class:`~sklearn.utils.Bunch` or pandas DataFrame) or NumPy structured arrays.

    Parameters
    ----------
    user : str or None, default="user_id"
        The column of user ids, in X and in the ``users`` table.  ``user=None,
        item=None``: rows without ids, only context features (click logs), with
        ``ids="none"``.
    item : str or None, default="item_id"
        The column of item ids, in X and in the ``items`` table (None: see ``user``).
    user_features : dict or None, default=None
        Columns of the ``users`` table to encode, each mapped to its kind: "categorical"
        (one-hot over the values found in the table) or "numeric" (the value as it is; a
        2-D column of a mapping is a block of at most 2**20 numeric columns).
    item_features : dict or None, default=None
        Likewise, columns of the ``items`` table.
    context_features : dict or None, default=None
        Likewise, columns of X itself (properties of each interaction, e.g. the time),
        where two more kinds serve click logs: "hashed" (each value, a number or a
        string, hashed into one of ``n_buckets`` columns: no vocabulary is learned, an
        unseen value needs no ``handle_unknown``, and a value lands in the same column
        in every process and on every machine) and "log-binned" (a count-like number
        in one-hot bins of ``floor(log(v)^2)`` for v > 2, else of ``floor(v)``, as the
        Criteo challenge winners binned them: see :func:`polylite.datasets.log_bins`;
        the bins beyond those seen in :meth:`fit` fall into the nearest one, and a
        missing value (NaN) has a column of its own).
    ids : {"both", "user", "item", "none"}, default="both"
        Which ids get one-hot columns of their own ("none": side features only, as in
        link prediction from node features).
    implicit : {"user", "item", "both"} or None, default=None
        Implicit-feedback fields, as in SVD++ and libFM: "user" adds to each row the set
        of items its user rated (field ``"rated_items"``), "item" the set of users who
        rated its item (field ``"raters"``); the pairs are those of ``rated`` in
        :meth:`fit` (default: X).
    implicit_norm : {"sqrt", "sum", "none"}, default="sqrt"
        Value of each member of an implicit set of size n: ``1/sqrt(n)`` (SVD++),
        ``1/n`` (the values sum to one, libFM's convention) or 1.
    handle_unknown : {"error", "ignore"}, default="error"
        What to do with a user, item or context category unseen in :meth:`fit`: raise a
        ValueError, or encode its fields as zeros (an unknown user keeps no user part at
        all: no id, side features or implicit set; the model then scores from the rest).
        Also applies in :meth:`fit` to users or items of X missing from the side tables.
    n_buckets : int, default=2**20
        Columns of each "hashed" field.
    dtype : {np.float64, np.float32}, default=np.float64
        dtype of the output.
    output : {"csr", "relational"}, default="csr"
        What :meth:`transform` returns: CSR rows, or a
        :class:`~polylite.relational.RelationalMatrix` of the same columns whose user and
        item parts are blocks (each user's and each item's row stored once, with an index
        from each interaction to it) and whose context part is direct.  The factorization
        machines fit and predict both the same; the relational form saves the memory and
        time of repeating long user and item rows (side features, implicit sets) on
        every interaction of the user or item.

    Attributes
    ----------
    fields_ : list of Field
        The column layout: each field's name, side, kind and output columns.
    categories_ : dict of str to ndarray
        The sorted values of every one-hot field (the user and item ids under the names
        ``user`` and ``item``, and each categorical feature); the vocabularies of the
        implicit fields are those of the ids.
    n_features_out_ : int
        Number of output columns.
    n_features_in_ : int
        Number of columns of X the encoder reads (ids and context features).
    feature_names_in_ : ndarray of shape (n_features_in,)
        Their names.

    Examples
    --------
    >>> import numpy as np
    >>> from polylite.preprocessing import FieldEncoder
    >>> ratings = {"user_id": np.array([1, 1, 2]), "item_id": np.array([10, 20, 10])}
    >>> users = {"user_id": np.array([1, 2]), "age": np.array([31.0, 45.0])}
    >>> enc = FieldEncoder(user_features={"age": "numeric"}).fit(ratings, users=users)
    >>> enc.transform(ratings).toarray()
    array([[ 1.,  0., 31.,  1.,  0.],
           [ 1.,  0., 31.,  0.,  1.],
           [ 0.,  1., 45.,  1.,  0.]])
    >>> enc.get_feature_names_out().tolist()
    ['user_id=1', 'user_id=2', 'age', 'item_id=10', 'item_id=20']
    """

    def __init__(self, user="user_id", item="item_id", *, user_features=None,
                 item_features=None, context_features=None, ids="both", implicit=None,
                 implicit_norm="sqrt", handle_unknown="error", n_buckets=2**20,
                 dtype=np.float64, output="csr"):
        store_init_params(self, locals())

    # ---- parameters -------------------------------------------------------------------

    def _context_only(self):
        """Whether the encoder reads no ids (``user=None, item=None``: click logs)."""
        return self.user is None and self.item is None

    def _id_columns(self):
        return [] if self._context_only() else [self.user, self.item]

    def _check_params(self):
        if self._context_only():
            if (self.ids != "none" or self.implicit is not None or self.user_features
                    or self.item_features or self.output != "csr"):
                raise ValueError("user=None and item=None (no id columns) need ids='none', "
                                 "no user_features, item_features or implicit sets, and "
                                 "output='csr'")
        for name in ("user", "item"):
            if not isinstance(getattr(self, name), str) and not self._context_only():
                raise ValueError(f"{name} must be a column name (str), got "
                                 f"{getattr(self, name)!r}")
        if self.user == self.item and not self._context_only():
            raise ValueError(f"user and item must be different columns, both are "
                             f"{self.user!r}")
        for name in ("user_features", "item_features", "context_features"):
            self._features(name)
        check_choice(self.ids, "ids", ID_FIELDS)
        if self.implicit is not None:
            check_choice(self.implicit, "implicit", IMPLICIT)
        check_choice(self.implicit_norm, "implicit_norm", IMPLICIT_NORMS)
        check_choice(self.handle_unknown, "handle_unknown", HANDLE_UNKNOWN)
        check_choice(self.output, "output", OUTPUTS)
        if (isinstance(self.n_buckets, bool) or not isinstance(self.n_buckets, numbers.Integral)
                or not 1 <= self.n_buckets <= MAX_BUCKETS):
            raise ValueError(f"n_buckets must be an integer in [1, {MAX_BUCKETS}], got "
                             f"{self.n_buckets!r}")
        try:
            dtype = np.dtype(self.dtype)
        except TypeError:
            dtype = None
        if dtype not in (np.float32, np.float64):
            raise ValueError(f"dtype must be float32 or float64, got {self.dtype!r}")
        return dtype

    def _features(self, name):
        """The dict ``name`` checked: column name (str) -> kind."""
        features = getattr(self, name)
        if features is None:
            return {}
        if not isinstance(features, dict):
            raise ValueError(f"{name} must be a dict of column name to kind, got "
                             f"{features!r}")
        kinds = CONTEXT_KINDS if name == "context_features" else FEATURE_KINDS
        for column, kind in features.items():
            if not isinstance(column, str):
                raise ValueError(f"{name} keys must be column names (str), got {column!r}")
            check_choice(kind, f"{name}[{column!r}]", kinds)
        reserved = set(self._id_columns()) & set(features)
        if reserved:
            raise ValueError(f"{name} names the id column {sorted(reserved)}; ids are "
                             f"encoded through the ids parameter")
        return features

    def _sides_with_ids(self):
        return {"both": ("user", "item"), "user": ("user",), "item": ("item",),
                "none": ()}[self.ids]

    def _implicit_sides(self):
        return {None: (), "user": ("user",), "item": ("item",),
                "both": ("user", "item")}[self.implicit]

    # ---- fit --------------------------------------------------------------------------

    def fit(self, X, y=None, *, users=None, items=None, rated=None):
        """Learn the vocabularies and the side rows of every user and item.

        Parameters
        ----------
        X : table of n_samples rows
            Interactions: the ``user`` and ``item`` columns and the context features.
        y : None
            Ignored.
        users : table or None, default=None
            One row per user: the ``user`` column and the columns of ``user_features``
            (required when there are user features).  Its users are known to the
            encoder even if X has none of their interactions.
        items : table or None, default=None
            Likewise for items and ``item_features``.
        rated : table or None, default=None
            The (user, item) pairs of the implicit-feedback sets (``user`` and ``item``
            columns; for instance every rating, test ratings included, without their
            values).  Default: X.

        Returns
        -------
        self : FieldEncoder
        """
        dtype = self._check_params()
        keys = {} if self._context_only() else {"user": self.user, "item": self.item}
        context = self._features("context_features")
        X_columns = _columns(X, [*self._id_columns(), *context], "X")
        rated = X_columns if rated is None else _columns(rated, [self.user, self.item],
                                                          "rated")
        tables = {"user": users, "item": items}
        side_features = {"user": self._features("user_features"),
                         "item": self._features("item_features")}
        side_columns, categories = {}, {}
        for side, key in keys.items():
            ids = [_categories(X_columns[key], key), _categories(rated[key], key)]
            if tables[side] is not None or side_features[side]:
                side_columns[side] = _columns(tables[side], [key, *side_features[side]],
                                              f"{side}s")
                ids.append(_categories(side_columns[side][key], key))
            categories[key] = np.unique(np.concatenate(ids))

        self.fields_, blocks = [], {}
        for side, key in keys.items():
            blocks[side] = self._side_blocks(side, key, categories, side_features[side],
                                             side_columns.get(side), rated, dtype)
        context_fields, self.bin_ranges_ = [], {}
        for column, kind in context.items():
            values = X_columns[column]
            if kind == "categorical":
                categories[column] = np.unique(_categories(values, column))
                width = categories[column].size
            elif kind == "hashed":
                _categories(values, column)
                width = int(self.n_buckets)
            elif kind == "log-binned":
                bins = _log_binned(values, column)
                present = bins[bins != MISSING_BIN]
                low, high = (int(present.min()), int(present.max())) if present.size \
                    else (0, 0)
                self.bin_ranges_[column] = (low, high)
                width = high - low + 2  # column 0: missing
            else:
                width = _numeric(values, column, dtype).shape[1]
            context_fields.append((column, kind, width))
        self._add_fields("context", context_fields)
        names = [f.name for f in self.fields_]
        if len(set(names)) != len(names):
            raise ValueError(f"two fields share a name in {names}; rename a column")
        self.categories_ = categories
        self._side_rows = {side: sp.vstack(
            [sp.hstack(blocks[side], format="csr", dtype=dtype),
             sp.csr_matrix((1, sum(b.shape[1] for b in blocks[side])), dtype=dtype)],
            format="csr") for side in keys}
        for side in ("user", "item"):  # (context only: no id columns, empty sides)
            self._side_rows.setdefault(side, sp.csr_matrix((1, 0), dtype=dtype))
        if not self.fields_ or self.fields_[-1].stop == 0:
            raise ValueError(
                f"the encoder has no columns to make: ids={self.ids!r} with no "
                f"user_features, item_features, context_features or implicit sets; "
                f"give some features, or ids='both'")
        self.n_features_out_ = self.fields_[-1].stop
        read = [*self._id_columns(), *context]
        self.n_features_in_ = len(read)
        self.feature_names_in_ = np.array(read, dtype=object)
        return self

    def _add_fields(self, side, specs):
        """Append fields (name, kind, width) of ``side`` to the layout."""
        start = self.fields_[-1].stop if self.fields_ else 0
        for name, kind, width in specs:
            self.fields_.append(Field(name, side, kind, start, start + width))
            start += width

    def _side_blocks(self, side, key, categories, features, table, rated, dtype):
        """The CSR blocks (one row per known user or item) of one side's fields."""
        vocabulary = categories[key]
        n = vocabulary.size
        specs, blocks = [], []
        if side in self._sides_with_ids():
            specs.append((key, "id", n))
            blocks.append(sp.identity(n, dtype=dtype, format="csr"))
        if features:
            # The table row of every known id (-1: not in the table).
            table_codes = _codes(vocabulary, table[key], key, "error")
            _check_unique_ids(table[key], key, f"{side}s")
            row_of = np.full(n, -1)
            row_of[table_codes] = np.arange(len(table_codes))
            missing = row_of < 0
            if missing.any() and self.handle_unknown == "error":
                raise ValueError(f"{missing.sum()} {side}(s) of X or rated are missing "
                                 f"from the {side}s table, e.g. "
                                 f"{vocabulary[missing][0].item()!r}; set "
                                 f"handle_unknown='ignore' to give them no side features")
            for column, kind in features.items():
                values = table[column]
                if kind == "categorical":
                    values = _categories(values, column)
                    categories[column] = np.unique(values)
                    codes = _codes(categories[column], values, column, "error")
                    block = _one_hot(codes, categories[column].size, dtype)
                else:
                    block = _dense_to_csr(_numeric(values, column, dtype))
                block = sp.vstack([block, sp.csr_matrix((1, block.shape[1]), dtype=dtype)],
                                  format="csr")[row_of]  # row -1: the zero row
                specs.append((column, kind, block.shape[1]))
                blocks.append(block)
        if side in self._implicit_sides():
            other = self.item if side == "user" else self.user
            blocks.append(_implicit_sets(
                _codes(vocabulary, rated[key], key, "error"),
                _codes(categories[other], rated[other], other, "error"),
                n, categories[other].size, self.implicit_norm, dtype))
            specs.append((RATED_ITEMS if side == "user" else RATERS, "implicit",
                          categories[other].size))
        self._add_fields(side, specs)
        if not blocks:
            blocks.append(sp.csr_matrix((n, 0), dtype=dtype))
        return blocks

    # ---- transform --------------------------------------------------------------------

    def transform(self, X):
        """Encode interactions.

        Parameters
        ----------
        X : table of n_samples rows
            The ``user`` and ``item`` columns and the context features.

        Returns
        -------
        X_out : csr_matrix or RelationalMatrix of shape (n_samples, n_features_out)
            A RelationalMatrix when ``output="relational"``: the user and item parts as
            relation blocks (the tables of every known user's and item's row, and a
            last row of zeros for unknown ones), the context as its direct part.
        """
        check_is_fitted(self)
        check_choice(self.output, "output", OUTPUTS)
        context = self._features("context_features")
        columns = _columns(X, [*self._id_columns(), *context], "X")
        if self._context_only():
            return self._context_block(columns)
        # The layout is the user block, the item block, then the context block.
        if self.output == "relational":
            return RelationalMatrix(
                [self._relation_block("user", columns[self.user]),
                 self._relation_block("item", columns[self.item]),
                 self._context_block(columns)], dtype=np.dtype(self.dtype))
        blocks = [self._side_block("user", columns[self.user]),
                  self._side_block("item", columns[self.item]),
                  self._context_block(columns)]
        return sp.hstack(blocks, format="csr", dtype=np.dtype(self.dtype))

    def _relation_block(self, side, ids):
        """One side's part as a relation block: its table of every known user's (or
        item's) row, the zero row last, and each interaction's row of it."""
        rows = self._side_rows[side]
        codes = self.codes(side, ids)
        return RelationBlock(np.where(codes < 0, rows.shape[0] - 1, codes), rows)

    def transform_users(self, users):
        """The user part of the rows of ``users`` (their other columns are zero).

        Parameters
        ----------
        users : array-like of shape (n_users,)
            User ids.

        Returns
        -------
        X_users : csr_matrix of shape (n_users, n_features_out)
        """
        return self._placed("user", self._side_block("user", users))

    def transform_items(self, items):
        """The item part of the rows of ``items`` (their other columns are zero).

        Parameters
        ----------
        items : array-like of shape (n_items,)
            Item ids.

        Returns
        -------
        X_items : csr_matrix of shape (n_items, n_features_out)
        """
        return self._placed("item", self._side_block("item", items))

    def transform_context(self, X):
        """The context part of the rows of X (the user and item columns are zero).

        Parameters
        ----------
        X : table
            The context features (the ``user`` and ``item`` columns are not needed).

        Returns
        -------
        X_context : csr_matrix of shape (n_samples, n_features_out)
        """
        check_is_fitted(self)
        columns = _columns(X, list(self._features("context_features")), "X")
        return self._placed("context", self._context_block(columns))

    def codes(self, side, ids):
        """Index of each id in ``categories_`` of the user or item ids (-1: unknown).

        Parameters
        ----------
        side : {"user", "item"}
        ids : array-like of shape (n,)

        Returns
        -------
        codes : ndarray of shape (n,)
            Raises ValueError for unknown ids when ``handle_unknown="error"``.
        """
        check_is_fitted(self)
        check_choice(side, "side", ("user", "item"))
        if self._context_only():
            raise ValueError("the encoder has no user or item ids (user=None, item=None)")
        key = self.user if side == "user" else self.item
        return _codes(self.categories_[key], np.asarray(ids), key, self.handle_unknown)

    def _side_block(self, side, ids):
        """The rows of the user or item block for ``ids`` (zero rows for unknown ids)."""
        check_is_fitted(self)
        rows, codes = self._side_rows[side], self.codes(side, ids)  # -1: the zero row
        if np.diff(rows.indptr)[codes].sum(dtype=np.int64) > np.iinfo(np.int32).max:
            # The output needs 64-bit indices (long implicit sets repeated on many rows).
            rows = sp.csr_matrix((rows.data, rows.indices.astype(np.int64),
                                  rows.indptr.astype(np.int64)), shape=rows.shape)
        return rows[codes]

    def _placed(self, side, block):
        """``block`` (the columns of one side) placed at its columns of the layout."""
        start = {"user": 0, "item": self._side_rows["user"].shape[1],
                 "context": self._side_rows["user"].shape[1] +
                 self._side_rows["item"].shape[1]}[side]
        return sp.csr_matrix((block.data, block.indices + start, block.indptr),
                             shape=(block.shape[0], self.n_features_out_))

    def _context_block(self, columns):
        """The context columns of the rows of ``columns``."""
        dtype = np.dtype(self.dtype)
        n = len(next(iter(columns.values()))) if columns else 0
        parts = []
        for field in self.fields_:
            if field.side != "context":
                continue
            values, width = columns[field.name], field.stop - field.start
            if field.kind == "categorical":
                codes = _codes(self.categories_[field.name], values, field.name,
                               self.handle_unknown)
                parts.append(_one_hot(codes, width, dtype))
                continue
            if field.kind == "hashed":
                parts.append(_one_hot(hash_buckets(values, width, field.name), width,
                                      dtype))
                continue
            if field.kind == "log-binned":
                low, high = self.bin_ranges_[field.name]
                bins = _log_binned(values, field.name)
                codes = np.where(bins == MISSING_BIN, 0,
                                 np.clip(bins, low, high) - low + 1)
                parts.append(_one_hot(codes, width, dtype))
                continue
            values = _numeric(values, field.name, dtype)
            if values.shape[1] != width:
                raise ValueError(f"numeric column {field.name!r} has {values.shape[1]} "
                                 f"columns, {width} in fit")
            parts.append(_dense_to_csr(values))
        if not parts:
            return sp.csr_matrix((n, 0), dtype=dtype)
        return sp.hstack(parts, format="csr", dtype=dtype)

    def get_feature_names_out(self, input_features=None):
        """Names of the output columns.

        ``"<column>=<value>"`` for one-hot fields (``"rated_items=<item>"`` and
        ``"raters=<user>"`` for the implicit ones), ``"<column>"`` for a numeric column
        and ``"<column>[j]"`` for column j of a numeric block.

        Parameters
        ----------
        input_features : None
            Ignored (the names come from the fitted layout).

        Returns
        -------
        names : ndarray of str objects, shape (n_features_out,)
        """
        check_is_fitted(self)
        names = []
        for field in self.fields_:
            width = field.stop - field.start
            if field.kind in ("id", "categorical"):
                names += [f"{field.name}={v}" for v in self.categories_[field.name]]
            elif field.kind == "implicit":
                key = self.item if field.name == RATED_ITEMS else self.user
                names += [f"{field.name}={v}" for v in self.categories_[key]]
            elif field.kind == "hashed":
                names += [f"{field.name}#{b}" for b in range(width)]
            elif field.kind == "log-binned":
                low, _ = self.bin_ranges_[field.name]
                names += [f"{field.name}=missing"] + [
                    f"{field.name}~bin{low + b}" for b in range(width - 1)]
            elif width == 1:
                names.append(field.name)
            else:
                names += [f"{field.name}[{j}]" for j in range(width)]
        return np.array(names, dtype=object)

    def __sklearn_is_fitted__(self):
        return hasattr(self, "fields_")

    # ---- save / load (polylite._io) ---------------------------------------------------

    def save(self, path):
        """Save the fitted encoder to ``path`` in polylite's pickle-free format.

        Parameters
        ----------
        path : str or path-like
            Destination file (NumPy ``.npz`` archive with a JSON header); read back by
            :func:`polylite.load`.  To save the encoder with the model it feeds, put both
            in a :class:`~sklearn.pipeline.Pipeline` and use :func:`polylite.save`.
        """
        save_model(self, path)

    def _model_arrays(self):
        arrays = {}
        for side, rows in self._side_rows.items():
            for part in ("data", "indices", "indptr"):
                arrays[f"{side}_rows_{part}"] = getattr(rows, part)
        names = list(self.categories_)
        for i, name in enumerate(names):
            arrays[f"categories_{i}"] = self.categories_[name]
        attributes = {"fields": [list(f) for f in self.fields_], "category_names": names,
                      "bin_ranges": {k: list(v) for k, v in self.bin_ranges_.items()},
                      "side_widths": [int(self._side_rows[s].shape[1])
                                      for s in ("user", "item")]}
        return arrays, attributes

    def _restore_model(self, arrays, attributes):
        dtype = np.dtype(self.dtype)
        names = attributes.get("category_names")
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise ModelFileError("encoder file has no valid category_names")
        row_arrays = [f"{s}_rows_{p}" for s in ("user", "item")
                      for p in ("data", "indices", "indptr")]
        check_array_names(arrays, row_arrays + [f"categories_{i}" for i in
                                                range(len(names))], owner="FieldEncoder")
        categories = {}
        for i, name in enumerate(names):
            values = arrays[f"categories_{i}"]
            if values.ndim != 1 or values.dtype.kind not in "biufU" or \
                    not np.array_equal(np.unique(values), values):
                raise ModelFileError(f"categories of {name!r} must be a sorted 1-D array of "
                                     f"unique numbers or strings")
            categories[name] = values
        for key in self._id_columns():
            if key not in categories:
                raise ModelFileError(f"encoder file lacks the vocabulary of {key!r}")
        fields = self._restored_fields(attributes.get("fields"), categories)
        widths = attributes.get("side_widths")
        side_rows = {}
        for s, side in enumerate(("user", "item")):
            n_rows = 1 if self._context_only() else categories[
                self.user if side == "user" else self.item].size + 1
            side_fields = [f for f in fields if f.side == side]
            width = sum(f.stop - f.start for f in side_fields)
            if not isinstance(widths, list) or len(widths) != 2 or widths[s] != width:
                raise ModelFileError(f"encoder file has side widths {widths!r}, its fields "
                                     f"say {width} for the {side}s")
            side_rows[side] = _restored_csr(arrays, f"{side}_rows", (n_rows, width), dtype)
        read = [*self._id_columns(), *self._features("context_features")]
        if getattr(self, "feature_names_in_", np.array([])).tolist() != read:
            raise ModelFileError(f"encoder file names its input columns "
                                 f"{getattr(self, 'feature_names_in_', None)}, its "
                                 f"parameters {read}")
        self.bin_ranges_ = self._restored_bins(attributes.get("bin_ranges", {}), fields)
        self.fields_, self.categories_, self._side_rows = fields, categories, side_rows
        self.n_features_out_ = fields[-1].stop if fields else 0

    def _restored_bins(self, raw, fields):
        """The bin ranges of the "log-binned" fields from a model file, checked against
        the fields' widths (and the "hashed" fields' widths against n_buckets)."""
        if not isinstance(raw, dict):
            raise ModelFileError("encoder file has no valid bin_ranges")
        ranges = {}
        for f in fields:
            width = f.stop - f.start
            if f.kind == "hashed" and width != self.n_buckets:
                raise ModelFileError(f"hashed field {f.name!r} has {width} columns, "
                                     f"n_buckets={self.n_buckets}")
            if f.kind != "log-binned":
                continue
            pair = raw.get(f.name)
            if not (isinstance(pair, list) and len(pair) == 2
                    and all(isinstance(b, int) for b in pair)
                    and pair[1] - pair[0] + 2 == width):
                raise ModelFileError(f"encoder file has no valid bin range for the "
                                     f"{width} columns of {f.name!r}")
            ranges[f.name] = tuple(pair)
        return ranges

    def _restored_fields(self, raw, categories):
        """The layout from a model file, checked against the parameters."""
        if not isinstance(raw, list):
            raise ModelFileError("encoder file has no field layout")
        fields, start = [], 0
        for entry in raw:
            if not (isinstance(entry, list) and len(entry) == 5):
                raise ModelFileError(f"encoder file has a malformed field {entry!r}")
            field = Field(*entry)
            if field.start != start or not isinstance(field.stop, int) or \
                    field.stop < field.start:
                raise ModelFileError(f"encoder file field {entry!r} does not follow the "
                                     f"previous one (column {start})")
            start = field.stop
            fields.append(field)
        expected = self._expected_layout(categories, fields)
        if [(f.name, f.side, f.kind) for f in fields] != expected:
            raise ModelFileError(f"encoder file fields {[f.name for f in fields]} do not "
                                 f"match its parameters")
        for f in fields:
            width = f.stop - f.start
            if f.kind == "numeric" and width > MAX_NUMERIC_WIDTH:
                raise ModelFileError(f"field {f.name!r} is a numeric block of {width} "
                                     f"columns, more than a FieldEncoder fits "
                                     f"({MAX_NUMERIC_WIDTH})")
            if f.kind in ("id", "categorical") and (
                    f.name not in categories or categories[f.name].size != width):
                raise ModelFileError(f"field {f.name!r} has {width} columns but not as many "
                                     f"categories")
            if f.kind == "implicit":
                key = self.item if f.name == RATED_ITEMS else self.user
                if categories[key].size != width:
                    raise ModelFileError(f"field {f.name!r} has {width} columns, not one "
                                         f"per id of {key!r}")
        return fields

    def _expected_layout(self, categories, fields):
        """(name, side, kind) of every field, in order, from the parameters."""
        out = []
        for side, key in (("user", self.user), ("item", self.item)):
            if key is None:
                continue
            if side in self._sides_with_ids():
                out.append((key, side, "id"))
            out += [(c, side, k) for c, k in self._features(f"{side}_features").items()]
            if side in self._implicit_sides():
                out.append((RATED_ITEMS if side == "user" else RATERS, side, "implicit"))
        out += [(c, "context", k) for c, k in self._features("context_features").items()]
        return out


def _check_unique_ids(ids, key, what):
    values, counts = np.unique(_categories(ids, key), return_counts=True)
    if np.any(counts > 1):
        raise ValueError(f"the {what} table has several rows for {key} "
                         f"{values[counts > 1][0].item()!r}")


def _restored_csr(arrays, prefix, shape, dtype):
    """A CSR matrix from its three arrays in a model file, every invariant checked."""
    data, indices, indptr = (arrays[f"{prefix}_{p}"] for p in ("data", "indices", "indptr"))
    check_float_arrays({"data": data}, {"data": data.shape}, dtype)
    if data.ndim != 1 or indices.shape != data.shape or indptr.shape != (shape[0] + 1,):
        raise ModelFileError(f"arrays {prefix}_* have inconsistent shapes")
    if indices.dtype.kind not in "iu" or indptr.dtype.kind not in "iu":
        raise ModelFileError(f"arrays {prefix}_indices/indptr must hold integers")
    if indptr[0] != 0 or indptr[-1] != data.size or np.any(np.diff(indptr) < 0):
        raise ModelFileError(f"array {prefix}_indptr is not a valid CSR index")
    if indices.size and (indices.min() < 0 or indices.max() >= shape[1]):
        raise ModelFileError(f"array {prefix}_indices has columns outside [0, {shape[1]})")
    return sp.csr_matrix((data, indices, indptr), shape=shape)
