"""Relational input: interaction rows whose repeated parts are stored once, as tables.

In recommender data every rating of a user carries the same user part (the user's id,
side features, the items the user rated) and every rating of an item the same item part.
A :class:`RelationalMatrix` stores each such part once, as a row of a table
(:class:`RelationBlock`), with an index from each interaction to its table row (Rendle,
"Scaling Factorization Machines to Relational Data", VLDB 2013; libFM's ``-relation``,
myFM's ``RelationBlock``).  The rows it stands for are the concatenation

    x_i = [direct part of row i | table_1[index_1[i]] | table_2[index_2[i]] | ...]

in the order the parts are given, so a model fitted on it is a model of the expanded
rows (:meth:`RelationalMatrix.to_csr`): it predicts, saves and loads the same, and takes
either form in ``predict``.  The factorization machines' solvers compute each table
row's share of every sum once (coordinate descent, Gibbs sampling, L-BFGS,
``predict``), so their cost grows with the tables' nonzeros and the number of
interactions, not with the nonzeros of the expanded rows.

What is equal: fits on a RelationalMatrix and on its expanded rows agree to rounding
for the squared loss (coordinate descent, the Gibbs sampler) and, for every loss, with
SGD, AdaGrad and L-BFGS.  Coordinate descent with the logistic or squared-hinge loss
(:class:`~polylite.FactorizationMachineClassifier`) steps each relation block's
columns on the loss's local quadratic model taken at the start of the block's pass (its
second derivative, but the Jaakkola-Jordan curvature on the logistic loss's wrong side
and flat on the rows well past the squared hinge), where on the expanded rows each
coordinate's step reads the loss itself.  Each such pass is checked: one that would
increase the objective is undone and taken again on a quadratic upper bound of the
loss.  So both fits minimise the same objective, which never increases, and stop at the
same kind of point (no single coordinate can lower the objective), but their iterates
differ, and so do the fitted parameters and predictions; measured, the training
objective of the relational fit keeps within 5% of the expanded rows' fit epoch by
epoch (the relational data guide gives the figures).  The ranker draws its negatives
from another catalogue order (see ``FactorizationMachineRanker``).
"""
import numbers

import numpy as np
import scipy.sparse as sp

from ._engine.csr import check_rows

__all__ = ["RelationBlock", "RelationalMatrix"]

_FLOAT_DTYPES = (np.float64, np.float32)


class RelationBlock:
    """A table of entity rows and, for each interaction, the row it uses.

    Parameters
    ----------
    index : array-like of int, shape (n_interactions,)
        For each interaction, the row of ``table`` that holds its part (0-based).
    table : {sparse matrix, array-like} of shape (n_rows, n_columns)
        One row per entity (user, item, ...): its features, stored once.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from polylite.relational import RelationBlock, RelationalMatrix
    >>> users = RelationBlock([0, 0, 1], sp.identity(2, format="csr"))
    >>> items = RelationBlock([1, 2, 1], sp.identity(3, format="csr"))
    >>> X = RelationalMatrix([users, items])
    >>> X.to_csr().toarray()
    array([[1., 0., 0., 1., 0.],
           [1., 0., 0., 0., 1.],
           [0., 1., 0., 1., 0.]])
    """

    def __init__(self, index, table):
        self.index = index
        self.table = table

    @property
    def shape(self):
        """(n_rows, n_columns) of the table."""
        return self.table.shape

    def __repr__(self):
        return (f"RelationBlock({np.shape(self.index)[0]} interactions, table of shape "
                f"{self.table.shape})")


def _part_dtype(part, name):
    dtype = np.asarray(part.data if sp.issparse(part) else part).dtype
    if dtype.kind not in "biuf":
        raise ValueError(f"{name} holds values of dtype {dtype}: real numbers are needed")
    return dtype


def _checked_csr(matrix, name, dtype):
    """``matrix`` as canonical CSR of ``dtype`` with finite values and 32- or 64-bit
    indices of one type, a copy where anything had to change."""
    try:
        return check_rows(matrix, [dtype], accept_dense=False)
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None


def _checked_index(index, n_rows, name):
    """``index`` as a 1-D intp array of table rows in [0, n_rows)."""
    array = np.asarray(index)
    if array.ndim != 1:
        raise ValueError(f"{name} must be 1-D (one table row per interaction), got shape "
                         f"{array.shape}")
    if array.dtype.kind == "b" or (array.dtype.kind not in "iu" and array.size > 0):
        raise ValueError(f"{name} must hold integer table rows, got dtype {array.dtype}")
    if array.size:
        # Checked before the conversion to intp, which would wrap large unsigned values.
        low, high = array.min(), array.max()
        if low < 0:
            raise ValueError(f"{name} holds a negative table row ({low})")
        if high >= n_rows:
            raise ValueError(f"{name} holds table row {high}, out of range for a table of "
                             f"{n_rows} rows")
    return _frozen(np.array(array, dtype=np.intp, order="C", copy=True))


def _frozen(array):
    """``array`` made read-only (in place: it is a copy the matrix owns)."""
    array.flags.writeable = False
    return array


def _owned_csr(matrix, source):
    """The checked CSR ``matrix`` with arrays of its own (copied where they are still the
    caller's ``source``'s), read-only: later changes to the caller's arrays cannot reach
    what the kernels read."""
    source_arrays = ([source.data, source.indices, source.indptr] if sp.issparse(source)
                     else [np.asarray(source)])
    if any(np.may_share_memory(array, other) for array in
           (matrix.data, matrix.indices, matrix.indptr) for other in source_arrays):
        matrix = matrix.copy()
    return _frozen_csr(matrix)


def _frozen_csr(matrix):
    for array in (matrix.data, matrix.indices, matrix.indptr):
        _frozen(array)
    return matrix


class RelationalMatrix:
    """Interaction rows made of a direct part and relation blocks (tables stored once).

    The rows it stands for concatenate its parts in the order given: a sparse matrix (or
    2-D array) is a part of the interactions' own columns, one row per interaction; a
    :class:`RelationBlock` contributes, to each interaction, the row of its table that
    its index names.  Accepted wherever the factorization machines take a CSR matrix
    (``fit``, ``predict``, the Bayesian FMs, :func:`polylite.kernels.predict`).

    Parameters
    ----------
    parts : sequence of {sparse matrix, array-like, RelationBlock}
        The parts in column order; at least one.  Every part gives the same number of
        interactions (the direct parts' rows, the blocks' index lengths).
    dtype : {np.float64, np.float32} or None, default=None
        The values' dtype; None keeps the parts' common floating dtype (float64 for
        integer parts).  Parts of different floating dtypes are refused: convert them
        first, or name a ``dtype``.

    Attributes
    ----------
    shape : tuple (n_interactions, n_features)
        That of the expanded rows.
    dtype : numpy.dtype
    parts : list
        The checked parts: CSR matrices (direct parts) and RelationBlocks with canonical
        CSR tables and intp indices.  They are the matrix's own copies, read-only: the
        arrays given to the constructor can be changed or reused afterwards without
        changing what the matrix holds, and the kernels never read a row or column
        outside what was checked when it was made.
    offsets : ndarray of shape (n_parts + 1,)
        Part p owns the columns ``offsets[p]:offsets[p + 1]``.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from polylite.relational import RelationBlock, RelationalMatrix
    >>> user_table = sp.csr_matrix(np.array([[1.0, 0, 30], [0, 1, 45]]))  # id, age
    >>> X = RelationalMatrix([RelationBlock([0, 1, 1], user_table),
    ...                       sp.csr_matrix(np.eye(3))])  # one column per interaction
    >>> X.shape
    (3, 6)
    >>> X.to_csr().toarray()[2]
    array([ 0.,  1., 45.,  0.,  0.,  1.])
    """

    def __init__(self, parts, *, dtype=None):
        if isinstance(parts, (RelationBlock,)) or sp.issparse(parts):
            raise TypeError("parts must be a list of parts (sparse matrices or "
                            "RelationBlocks), not a single part")
        parts = list(parts)
        if not parts:
            raise ValueError("a RelationalMatrix needs at least one part")
        dtype = self._common_dtype(parts, dtype)
        n = None
        checked, widths = [], []
        for p, part in enumerate(parts):
            if isinstance(part, RelationBlock):
                name = f"block {p} (part {p})"
                table = _owned_csr(_checked_csr(part.table, f"the table of {name}", dtype),
                                   part.table)
                if table.shape[0] == 0:
                    raise ValueError(f"the table of {name} has no rows: a block needs a "
                                     f"row for each entity its index names")
                index = _checked_index(part.index, table.shape[0], f"the index of {name}")
                rows = index.shape[0]
                checked.append(RelationBlock(index, table))
                widths.append(table.shape[1])
            else:
                name = f"part {p}"
                matrix = _owned_csr(_checked_csr(part, name, dtype), part)
                rows = matrix.shape[0]
                checked.append(matrix)
                widths.append(matrix.shape[1])
            if n is not None and rows != n:
                raise ValueError(f"{name} gives {rows} interactions, the parts before it "
                                 f"{n}: every part needs one row (or one index entry) "
                                 f"per interaction")
            n = rows
        self.parts = checked
        self.dtype = np.dtype(dtype)
        self.offsets = np.concatenate([[0], np.cumsum(widths)]).astype(np.intp)
        self.shape = (int(n), int(self.offsets[-1]))

    @staticmethod
    def _common_dtype(parts, dtype):
        if dtype is not None:
            dtype = np.dtype(dtype)
            if dtype not in _FLOAT_DTYPES:
                raise ValueError(f"dtype must be float32 or float64, got {dtype}")
            return dtype
        floats = {}
        for p, part in enumerate(parts):
            block = isinstance(part, RelationBlock)
            matrix = part.table if block else part
            kind = _part_dtype(matrix, f"the table of block {p} (part {p})" if block
                               else f"part {p}")
            if kind.kind == "f":
                floats.setdefault(np.dtype(kind), p)
        if len(floats) > 1:
            described = ", ".join(f"part {p} {kind}" for kind, p in floats.items())
            raise ValueError(f"the parts have different dtypes ({described}); convert "
                             f"them to one, or give dtype=")
        dtype = next(iter(floats), np.dtype(np.float64))
        return dtype if dtype in _FLOAT_DTYPES else np.dtype(np.float64)

    # ---- what the parts are ----------------------------------------------------------

    @property
    def blocks(self):
        """The relation blocks, in column order."""
        return [part for part in self.parts if isinstance(part, RelationBlock)]

    def block_columns(self):
        """Where the blocks' columns lie.

        Returns
        -------
        columns : list of (int, int)
            ``(start, stop)`` of each block's columns, in column order.
        """
        return [(int(self.offsets[p]), int(self.offsets[p + 1]))
                for p, part in enumerate(self.parts) if isinstance(part, RelationBlock)]

    @property
    def nnz(self):
        """Nonzeros stored: the direct parts' and the tables'."""
        return int(sum(part.table.nnz if isinstance(part, RelationBlock) else part.nnz
                       for part in self.parts))

    @property
    def expanded_nnz(self):
        """Nonzeros of the expanded rows (:meth:`to_csr`), without building them."""
        total = 0
        for part in self.parts:
            if isinstance(part, RelationBlock):
                total += int(np.diff(part.table.indptr)[part.index].sum(dtype=np.int64))
            else:
                total += part.nnz
        return total

    def direct(self):
        """The direct parts as one matrix of every column.

        Returns
        -------
        X_direct : csr_matrix of shape (n_interactions, n_features)
            The direct parts' entries at their columns, the blocks' columns empty, with
            indices wide enough for all of them (made once, then kept).
        """
        if getattr(self, "_direct", None) is None:
            self._direct = self._make_direct()
        return self._direct

    def _make_direct(self):
        n, d = self.shape
        pieces = [part if not isinstance(part, RelationBlock)
                  else sp.csr_matrix((n, part.table.shape[1]), dtype=self.dtype)
                  for part in self.parts]
        index_dtype = np.int64 if max(d, sum(p.nnz for p in pieces)) > 2**31 - 1 \
            else np.int32
        out = sp.hstack(pieces, format="csr", dtype=self.dtype)
        out.indices = out.indices.astype(index_dtype, copy=False)
        out.indptr = out.indptr.astype(index_dtype, copy=False)
        out.sort_indices()
        return out

    def to_csr(self):
        """The expanded rows.

        Returns
        -------
        X : csr_matrix of shape (n_interactions, n_features)
            Each interaction's direct part and table rows, as one CSR matrix: the memory
            of ``expanded_nnz`` entries.
        """
        return self._expanded(np.arange(self.shape[0], dtype=np.intp))

    def _sources(self, rows):
        """Each part's CSR matrix and the row of it that each of ``rows`` uses."""
        return [(part.table, part.index[rows]) if isinstance(part, RelationBlock)
                else (part, rows) for part in self.parts]

    def _single_source(self, max_nnz):
        """(table, row_of) when one part holds every nonzero, at most ``max_nnz`` of
        them: expanded row r is row ``row_of[r]`` of ``table`` (CSR, its columns placed
        at the part's columns of the whole row); else None.  A block's table is shared
        by its rows (a user's id and features once per user), so its rows are read
        there, not copied per row."""
        stored = [part.table if isinstance(part, RelationBlock) else part
                  for part in self.parts]
        holding = [p for p, matrix in enumerate(stored) if matrix.nnz > 0]
        p = holding[0] if holding else 0
        if len(holding) > 1 or stored[p].nnz > max_nnz:
            return None
        part = self.parts[p]
        row_of = part.index if isinstance(part, RelationBlock) else np.arange(self.shape[0])
        table = placed(sp.csr_matrix(stored[p], dtype=self.dtype), int(self.offsets[p]),
                       self.shape[1])
        return table, np.asarray(row_of, dtype=np.int64)

    def _row_nnz(self, rows):
        """The nonzeros of each expanded row of ``rows`` (intp), without building them."""
        sizes = np.zeros(rows.shape[0], dtype=np.int64)
        for matrix, row_of in self._sources(rows):
            sizes += matrix.indptr[row_of + 1] - matrix.indptr[row_of]
        return sizes

    def _expanded(self, rows, buffers=None):
        """The expanded rows ``rows`` (intp), as CSR.  With ``buffers`` (a dict), its
        value and index arrays are views of arrays kept there from one call to the next
        (the chunks of a pass: no fresh pages each time), valid until the next call."""
        from ._engine._kernels import append_rows
        n, d = rows.shape[0], self.shape[1]
        # Each part's source row of every output row, and the rows' sizes.
        sources = [(matrix, row_of, int(offset)) for (matrix, row_of), offset
                   in zip(self._sources(rows), self.offsets[:-1])]
        sizes = self._row_nnz(rows)
        nnz = int(sizes.sum())
        index_dtype = np.int32 if max(d, nnz) <= 2**31 - 1 else np.int64
        indptr = np.zeros(n + 1, dtype=index_dtype)
        np.cumsum(sizes, out=indptr[1:])
        data = _buffer(buffers, "data", nnz, self.dtype)
        indices = _buffer(buffers, "indices", nnz, index_dtype)
        cursor = indptr[:-1].astype(np.intp)
        for matrix, row_of, offset in sources:  # in column order: rows stay sorted
            append_rows(np.asarray(matrix.data, self.dtype), matrix.indices, matrix.indptr,
                        np.ascontiguousarray(row_of, np.intp), offset, data, indices, cursor)
        out = sp.csr_matrix((n, d), dtype=self.dtype)
        out.data, out.indices, out.indptr = data, indices, indptr
        out.has_sorted_indices = True
        out.has_canonical_format = True
        return out

    # ---- rows ----------------------------------------------------------------------

    def __getitem__(self, key):
        """The interactions ``key`` (an integer, a 1-D integer array, a boolean mask of
        one entry per interaction or a slice) as a RelationalMatrix sharing the tables;
        ``X[rows, :]`` and ``X[rows, ...]`` too."""
        if isinstance(key, tuple):
            if len(key) != 2 or not (key[1] is Ellipsis or key[1] == slice(None)):
                raise TypeError("a RelationalMatrix selects rows only: X[rows] or "
                                "X[rows, :]")
            key = key[0]
        if isinstance(key, numbers.Integral) and not isinstance(key, (bool, np.bool_)):
            key = [key]
        if not isinstance(key, slice):
            key = np.asarray(key)
            if key.ndim != 1 or not (key.dtype.kind in "iu" or key.dtype.kind == "b"
                                     or key.size == 0):
                raise IndexError(f"a RelationalMatrix selects rows by an integer, a slice "
                                 f"or a 1-D array of integers or booleans, got "
                                 f"{key.ndim}-D {key.dtype}")
            if key.dtype.kind == "b" and key.shape[0] != self.shape[0]:
                raise IndexError(f"a boolean mask needs one entry per interaction "
                                 f"({self.shape[0]}), got {key.shape[0]}")
            key = key.astype(np.intp, copy=False) if key.size == 0 else key
        rows = np.arange(self.shape[0])[key]
        return RelationalMatrix._from_checked(
            [RelationBlock(part.index[rows], part.table) if isinstance(part, RelationBlock)
             else part[rows] for part in self.parts], self.dtype)

    @classmethod
    def _from_checked(cls, parts, dtype):
        """A RelationalMatrix of parts checked already (as ``parts`` holds them: canonical
        CSR of ``dtype``, intp indices in their tables' range, one length): no check, no
        copy."""
        out = object.__new__(cls)
        out.parts, out.dtype = list(parts), np.dtype(dtype)
        for part in out.parts:  # read-only, as the checked parts of __init__
            if isinstance(part, RelationBlock):
                _frozen(part.index)
                _frozen_csr(part.table)
            else:
                _frozen_csr(part)
        widths = [part.table.shape[1] if isinstance(part, RelationBlock) else part.shape[1]
                  for part in out.parts]
        out.offsets = np.concatenate([[0], np.cumsum(widths)]).astype(np.intp)
        first = out.parts[0]
        n = first.index.shape[0] if isinstance(first, RelationBlock) else first.shape[0]
        out.shape = (int(n), int(out.offsets[-1]))
        return out

    def __array__(self, dtype=None, copy=None):
        # NumPy and scikit-learn's checks would make a 0-d object array of it and fail
        # with an unrelated message: say what to do instead.
        raise TypeError("a RelationalMatrix is taken by the factorization machines "
                        "(FactorizationMachine*, BayesianFactorizationMachine*) and "
                        "polylite.kernels.predict; give other estimators and "
                        "transformers its expanded rows, X.to_csr()")

    def astype(self, dtype):
        """The same rows with values of another dtype.

        Parameters
        ----------
        dtype : {np.float64, np.float32}

        Returns
        -------
        X : RelationalMatrix
            ``self`` when it has that dtype already, else a converted copy.
        """
        if np.dtype(dtype) == self.dtype:
            return self
        return RelationalMatrix(self.parts, dtype=dtype)

    def __repr__(self):
        kinds = ", ".join(f"block {part.table.shape}" if isinstance(part, RelationBlock)
                          else f"direct {part.shape[1]} columns" for part in self.parts)
        return (f"<RelationalMatrix of {self.shape[0]} interactions x {self.shape[1]} "
                f"features ({kinds}), {self.nnz} stored nonzeros for "
                f"{self.expanded_nnz} expanded, {self.dtype}>")


def _buffer(buffers, name, size, dtype):
    """An array of ``size`` entries of ``dtype``: new, or a view of the one kept in
    ``buffers`` under ``name`` (grown when too small)."""
    if buffers is None:
        return np.empty(size, dtype=dtype)
    kept = buffers.get(name)
    if kept is None or kept.dtype != dtype or kept.shape[0] < size:
        kept = buffers[name] = np.empty(max(size, 1), dtype=dtype)
    return kept[:size]


def placed(table, start, n_features):
    """A block's table (CSR) at its columns, ``start`` on, of rows of ``n_features``
    columns."""
    table = sp.csr_matrix(table)
    return sp.csr_matrix((table.data, table.indices.astype(np.int64) + start,
                          table.indptr.astype(np.int64)), shape=(table.shape[0], n_features))


def check_relational(X, dtypes, n_features=None):
    """A RelationalMatrix (its parts checked when it was made) with values of one of
    ``dtypes`` (converted to the first when it has another) and ``n_features`` columns
    when given."""
    dtypes = [np.dtype(t) for t in (dtypes if isinstance(dtypes, (tuple, list))
                                    else [dtypes])]
    if X.dtype not in dtypes:
        X = X.astype(dtypes[0])
    if n_features is not None and X.shape[1] != n_features:
        raise ValueError(f"X has {X.shape[1]} features, but the model expects "
                         f"{n_features}")
    return X


def check_relational_input(estimator, X, y=None, *, reset, dtype):
    """An estimator's check of a RelationalMatrix ``X`` (and targets ``y``), as
    scikit-learn's ``validate_data`` checks arrays: the estimator takes relational input,
    X has the model's columns (``reset``: sets ``n_features_in_``) and at least one
    interaction, its values one of ``dtype``; returns X, or (X, y)."""
    from sklearn.utils import check_array, check_consistent_length, column_or_1d
    if not getattr(estimator, "_takes_relational", False):
        raise TypeError(f"{type(estimator).__name__} takes a CSR matrix: relational input "
                        f"is for factorization machines; give X.to_csr()")
    X = check_relational(X, dtype, None if reset else estimator.n_features_in_)
    if X.shape[0] == 0:
        raise ValueError(f"Found a RelationalMatrix of 0 interactions (shape={X.shape}) "
                         f"while a minimum of 1 is required by {type(estimator).__name__}.")
    if reset:
        estimator.n_features_in_ = X.shape[1]
        estimator.__dict__.pop("feature_names_in_", None)
    if y is None:
        return X
    # Labels (classes, ordinal levels) may be strings; regression targets are numbers.
    labels = getattr(estimator, "_labels_as_y", estimator._is_classifier)
    y = column_or_1d(check_array(y, ensure_2d=False, dtype=None if labels else "numeric",
                                 ensure_all_finite=not labels), warn=True)
    check_consistent_length(X, y)
    return X, y
