"""Data layouts: the forms the rows X of a model come in, behind one interface.

A layout answers every question the estimators and solvers ask of the rows: their
checks, their nonzeros and norms, their predictions, the direct rows and relation blocks
coordinate descent reads, the chunks of a stochastic pass, and, for the rankers, where
the item part lies.  It imports no model family: the families ask it.  :func:`layout_of` is the one place that tells the layouts apart; everything else
asks the layout it returns.

- :class:`CSRLayout`: a SciPy sparse matrix (canonical CSR once checked);
- :class:`DenseLayout`: a NumPy array (and other array-likes);
- :class:`RelationalLayout`: a :class:`polylite.relational.RelationalMatrix`, whose
  repeated parts are stored once, as the rows of tables.

A new layout is a class here (the methods below) and a case of :func:`layout_of`.
"""
import numpy as np
import scipy.sparse as sp
# (scikit-learn is imported where used: predictions from CSR rows, as the command line
# makes them, need none of it)

from . import _kernels
from .._validation import row_threads
from ..relational import RelationalMatrix, RelationBlock, check_relational, \
    check_relational_input, placed
from .codes import KERNELS
from .csr import check_csr_structure, check_rows
from .problem import FittedModel

__all__ = ["layout_of", "Layout", "CSRLayout", "DenseLayout", "RelationalLayout"]

# Dense input is predicted this many rows at a time, so prediction on a large dense array
# never holds a second full copy of it as CSR.
DENSE_CHUNK_ROWS = 8192
# A stochastic pass expands relational rows this many at a time (whole mini-batches).
RELATIONAL_CHUNK_ROWS = 65536
#: ``validate``'s targets when there are none to check (None is a missing y).
NO_TARGETS = "no_validation"


def layout_of(X):
    """The layout of ``X``: relational, sparse (CSR) or dense (any other array-like)."""
    if isinstance(X, RelationalMatrix):
        return RELATIONAL
    if sp.issparse(X):
        return CSR
    return DENSE


class Layout:
    """The interface of a layout (every method takes the rows X in that layout)."""

    #: Whether estimators that compute every row's features (polynomial networks, the
    #: variational FMs) must be given the expanded rows instead.
    stored_once = False

    def check(self, X, dtypes, n_features=None, accept_dense=True):
        """X checked for the kernels: finite values of one of ``dtypes`` (the first
        when X has another), ``n_features`` columns when given."""
        raise NotImplementedError

    def validate(self, est, X, y=NO_TARGETS, *, reset, dtype, y_numeric=False,
                 accept_dense=True):
        """An estimator's check of X (and targets y), as scikit-learn's
        ``validate_data``: sets ``n_features_in_`` when ``reset``; returns X, or (X, y)
        when ``y`` is given (None included: a fit without targets is refused).  Dense
        rows stay dense with ``accept_dense``, else become CSR."""
        raise NotImplementedError

    def expanded_nnz(self, X):
        """The nonzeros of the rows as a model reads them."""
        raise NotImplementedError

    def largest_abs(self, X):
        """The largest absolute value of the rows (0.0 without any)."""
        raise NotImplementedError

    def squared_row_norms(self, X):
        """``||x_i||^2`` of every row (float64)."""
        raise NotImplementedError

    def to_csr(self, X):
        """The rows as one CSR matrix."""
        raise NotImplementedError

    def stack(self, matrices):
        """The rows of several matrices of this layout, in one."""
        raise NotImplementedError

    def predict(self, X, P, degrees, kernel, intercept, w, gamma, lam, n_jobs,
                fields=(None, 0)):
        """:func:`polylite.kernels.predict` on checked rows and parameters; ``fields``:
        the field-aware kernel's (field of each feature, number of fields)."""
        raise NotImplementedError

    def cd_parts(self, X):
        """(direct rows, relation blocks) as coordinate descent reads them: a CSR matrix
        of the rows' own entries at their columns (the blocks' columns empty) and, for
        each relation block, ``(block, start, stop)``, its columns ``start:stop``."""
        raise NotImplementedError

    def watched(self, X, size):
        """(rows, their X) of a fixed sample of about ``size`` rows, on which the
        stochastic solvers watch the objective; ``slice(None)`` for all of them."""
        n_rows = X.shape[0]
        if size >= n_rows:
            return slice(None), X
        rows = np.sort(np.random.default_rng(n_rows).choice(n_rows, size, replace=False))
        return rows, X[rows]

    def row_chunks(self, X, order, batch_size, buffers):
        """(order within the chunk, the chunk's rows, the rows of X it holds) of a
        stochastic pass over the rows in ``order``: here all the rows at once."""
        yield order, X, None

    def item_columns(self, X, item_columns):
        """The (start, stop) columns of a ranker's item part, checked."""
        if item_columns is None:
            raise ValueError(
                "CSR positives need item_columns=(start, stop), the columns of the item "
                "part (FieldEncoder.fields_ gives them), or give a RelationalMatrix: "
                "FieldEncoder(output='relational') makes one whose second block is the "
                "items")
        return check_pair(item_columns, X.shape[1])

    def split_positives(self, X, columns, dtype):
        """(query rows as a RelationalMatrix, each positive's item as a code of the
        catalogue, the catalogue's rows, each positive's user code or None) of ranking
        positives X whose item part lies at ``columns``: the catalogue is the distinct
        item parts, in the order the positives first show them."""
        start, stop = columns
        X = sp.csr_matrix(X)
        inside = (X.indices >= start) & (X.indices < stop)
        rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
        item_part = sp.csr_matrix((X.data[inside], (rows[inside], X.indices[inside])),
                                  shape=X.shape, dtype=dtype)
        query = sp.csr_matrix((X.data[~inside], (rows[~inside], X.indices[~inside])),
                              shape=X.shape, dtype=dtype)
        item, first = distinct_rows(item_part)
        users = None
        if start > 0:
            users = distinct_rows(query[:, :start])[0]
        return (RelationalMatrix._from_checked([query], dtype), item, item_part[first],
                users)


class CSRLayout(Layout):
    """Rows as a SciPy sparse matrix: canonical CSR once checked."""

    def check(self, X, dtypes, n_features=None, accept_dense=True):
        return check_rows(X, dtypes, n_features, accept_dense)

    def validate(self, est, X, y=NO_TARGETS, *, reset, dtype, y_numeric=False,
                 accept_dense=True):
        from sklearn.utils.validation import validate_data
        kwargs = dict(accept_sparse="csr", dtype=dtype, reset=reset,
                      accept_large_sparse=True)
        if y is NO_TARGETS:
            X = validate_data(est, X, **kwargs)
        else:
            X, y = validate_data(est, X, y, y_numeric=y_numeric, **kwargs)
        # (validate_data has checked the values: a sparse X needs only its structure
        # checked, not a second pass over its values, serial before the threads)
        if sp.issparse(X):
            X = check_csr_structure(X)
        elif accept_dense:
            X = np.ascontiguousarray(X)
        else:
            X = sp.csr_matrix(X)
        return X if y is NO_TARGETS else (X, y)

    def expanded_nnz(self, X):
        return X.nnz

    def largest_abs(self, X):
        return float(np.max(np.abs(X.data))) if X.data.size else 0.0

    def squared_row_norms(self, X):
        from sklearn.utils.extmath import row_norms
        return row_norms(X, squared=True).astype(np.float64)

    def to_csr(self, X):
        return sp.csr_matrix(X)

    def stack(self, matrices):
        return sp.vstack(matrices, format="csr")

    def predict(self, X, P, degrees, kernel, intercept, w, gamma, lam, n_jobs,
                fields=(None, 0)):
        out = np.empty(X.shape[0], dtype=P.dtype)
        model = FittedModel(intercept, w, P, gamma, lam, degrees, KERNELS[kernel],
                            *fields)
        for start, chunk in self._csr_chunks(X):
            _kernels.predict_csr(np.asarray(chunk.data, dtype=P.dtype), chunk.indices,
                                 chunk.indptr, model, out[start:start + chunk.shape[0]],
                                 row_threads(n_jobs, chunk.shape[0]))
        return out

    def _csr_chunks(self, X):
        yield 0, X

    def cd_parts(self, X):
        return X, []


class DenseLayout(CSRLayout):
    """Rows as a NumPy array (or another array-like): checked, then read as CSR by the
    passes, or predicted a chunk of rows at a time."""

    def expanded_nnz(self, X):
        return int(np.count_nonzero(X))

    def largest_abs(self, X):
        X = np.asarray(X)
        return float(np.max(np.abs(X))) if X.size else 0.0

    def squared_row_norms(self, X):
        X = np.asarray(X, dtype=np.float64)
        return np.einsum("ij,ij->i", X, X)

    def stack(self, matrices):
        return np.vstack(matrices)

    def _csr_chunks(self, X):
        for start in range(0, X.shape[0], DENSE_CHUNK_ROWS):
            yield start, sp.csr_matrix(X[start:start + DENSE_CHUNK_ROWS])


class RelationalLayout(Layout):
    """Rows as a :class:`~polylite.relational.RelationalMatrix`: direct columns and
    relation blocks, each table row stored once (checked when the matrix was made)."""

    stored_once = True

    def check(self, X, dtypes, n_features=None, accept_dense=True):
        return check_relational(X, dtypes, n_features)

    def validate(self, est, X, y=NO_TARGETS, *, reset, dtype, y_numeric=False,
                 accept_dense=True):
        if y is NO_TARGETS:
            return check_relational_input(est, X, reset=reset, dtype=dtype)
        if y is None:
            raise ValueError(f"{type(est).__name__} requires y to be passed, but the "
                             f"target y is None.")
        return check_relational_input(est, X, y, reset=reset, dtype=dtype)

    def expanded_nnz(self, X):
        return X.expanded_nnz

    def largest_abs(self, X):
        return max(CSR.largest_abs(X.direct()),
                   *[CSR.largest_abs(block.table) for block in X.blocks], 0.0)

    def squared_row_norms(self, X):
        from sklearn.utils.extmath import row_norms
        norms = row_norms(X.direct(), squared=True).astype(np.float64)
        for block in X.blocks:
            norms += row_norms(block.table, squared=True).astype(np.float64)[block.index]
        return norms

    def to_csr(self, X):
        return X.to_csr()

    def stack(self, matrices):
        """The rows of relational matrices with the same relation blocks' tables (the
        first's are kept: a block's tables must be equal)."""
        first = matrices[0]
        if len(matrices) == 1:
            return first
        for m in matrices[1:]:
            if len(m.parts) != len(first.parts):
                raise ValueError("the matrices have different numbers of parts")
        parts = []
        for p, part in enumerate(first.parts):
            if isinstance(part, RelationBlock):
                for m in matrices[1:]:
                    other = m.parts[p]
                    if not (isinstance(other, RelationBlock)
                            and _same_table(part.table, other.table)):
                        raise ValueError(
                            f"part {p} differs between the matrices: stacked rows need "
                            f"the same relation blocks' tables (encode them with one "
                            f"FieldEncoder)")
                parts.append(RelationBlock(np.concatenate([m.parts[p].index
                                                           for m in matrices]),
                                           part.table))
            else:
                if any(isinstance(m.parts[p], RelationBlock) for m in matrices[1:]):
                    raise ValueError(f"part {p} differs between the matrices: a direct "
                                     f"part in one, a relation block in another")
                stacked = sp.vstack([m.parts[p] for m in matrices], format="csr")
                stacked.sum_duplicates()  # canonical, as the parts were
                parts.append(stacked)
        return RelationalMatrix._from_checked(parts, first.dtype)

    def predict(self, X, P, degrees, kernel, intercept, w, gamma, lam, n_jobs,
                fields=(None, 0)):
        if kernel in ("polynomial", "field-aware", "field-weighted"):
            raise ValueError(f"relational input is taken by the anova and all-subsets "
                             f"kernels (factorization machines); give the {kernel} "
                             f"kernel X.to_csr()")
        X = X.astype(P.dtype)
        w = w if w.shape[0] else np.zeros(P.shape[1], P.dtype)
        terms = self.table_terms(X, P, degrees, kernel, w, n_jobs)
        direct = X.direct()
        out = np.empty(X.shape[0], dtype=P.dtype)
        model = FittedModel(intercept, w, P, gamma, None, degrees, KERNELS[kernel])
        _kernels.predict_relational(direct.data, direct.indices, direct.indptr, model,
                                    [block.index for block in X.blocks], terms, out,
                                    row_threads(n_jobs, X.shape[0]))
        return out

    def table_terms(self, X, P, degrees, kernel, w, n_jobs=None):
        """Each relation block's :func:`polylite._engine._kernels.table_terms`: its table rows'
        shares of a prediction (float64, one array per block of ``X``)."""
        out = []
        for block, (start, stop) in zip(X.blocks, X.block_columns()):
            table = block.table
            n_terms = 1 + (P.shape[2] if kernel == "all-subsets"
                           else int(np.sum(degrees)) * P.shape[2])
            terms = np.empty((table.shape[0], n_terms))
            _kernels.table_terms(np.asarray(table.data, P.dtype), table.indices,
                                 table.indptr, w[start:stop],
                                 np.ascontiguousarray(P[:, start:stop]), degrees,
                                 KERNELS[kernel], terms, row_threads(n_jobs, table.shape[0]))
            out.append(terms)
        return out

    def cd_parts(self, X):
        return X.direct(), [(block, start, stop) for block, (start, stop)
                            in zip(X.blocks, X.block_columns())]

    def watched(self, X, size):
        # Predictions compute each table row once: a sample of the rows saves little.
        return slice(None), X

    def row_chunks(self, X, order, batch_size, buffers):
        """The rows in ``order`` expanded a chunk at a time (identity order within
        each), whole mini-batches per chunk: the same steps as on the expanded matrix,
        the memory of a chunk (arrays reused from one chunk to the next, ``buffers``)."""
        chunk = max(batch_size, RELATIONAL_CHUNK_ROWS // batch_size * batch_size)
        for start in range(0, order.shape[0], chunk):
            rows = order[start:start + chunk]
            yield (np.arange(rows.shape[0], dtype=np.intp), X._expanded(rows, buffers),
                   rows)

    def item_columns(self, X, item_columns):
        blocks = X.block_columns()
        if item_columns is None:
            if len(blocks) < 2:
                raise ValueError(
                    f"the positives have {len(blocks)} relation block(s): the ranker "
                    f"takes the item part from the second block (a user block, then an "
                    f"item block, as FieldEncoder(output='relational') makes them), or "
                    f"from the block whose columns item_columns names")
            return blocks[1]
        columns = check_pair(item_columns, X.shape[1])
        if columns not in blocks:
            raise ValueError(f"item_columns={item_columns!r} is not the column range of "
                             f"a relation block of the positives ({blocks})")
        return columns

    def split_positives(self, X, columns, dtype):
        """The item block's table is the catalogue (in its order), the first other
        block's index the users."""
        start, _ = columns
        parts, item_block, user_block = [], None, None
        for part, offset in zip(X.parts, X.offsets[:-1]):
            if isinstance(part, RelationBlock) and int(offset) == start:
                item_block = part
                parts.append(sp.csr_matrix((X.shape[0], part.table.shape[1]), dtype=dtype))
                continue
            if isinstance(part, RelationBlock) and user_block is None:
                user_block = part
            parts.append(part)
        query = RelationalMatrix._from_checked(parts, dtype)
        table = placed(item_block.table, start, X.shape[1])
        item, users = item_block.index.astype(np.int64), None
        if user_block is not None:
            users = user_block.index.astype(np.int64)
        return query, item, table, users


def distinct_rows(X):
    """Codes of the distinct rows of CSR ``X`` (equal rows, equal codes; codes in order
    of first appearance) and the first row of each code.

    Rows are grouped by two random projections and their size, then checked entry by
    entry against their group's first row; should two different rows ever share a
    group, an exact (slower) grouping by the rows' bytes is used instead.
    """
    X = sp.csr_matrix(X)
    X.sum_duplicates()
    X.sort_indices()
    n = X.shape[0]
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    rng = np.random.default_rng(0)
    keys = np.column_stack([X @ rng.standard_normal(X.shape[1]),
                            X @ rng.standard_normal(X.shape[1]),
                            np.diff(X.indptr)])
    _, first, codes = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    codes = codes.ravel()
    # Renumber in order of first appearance.
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    codes, first = rank[codes], first[order]
    if (X - X[first[codes]]).count_nonzero() == 0:
        return codes.astype(np.int64), first.astype(np.int64)
    seen, codes, first = {}, np.empty(n, np.int64), []
    for r in range(n):
        lo, hi = X.indptr[r], X.indptr[r + 1]
        key = X.indices[lo:hi].tobytes() + X.data[lo:hi].tobytes()
        if key not in seen:
            seen[key] = len(first)
            first.append(r)
        codes[r] = seen[key]
    return codes, np.asarray(first, np.int64)


def check_pair(item_columns, n_features):
    """``item_columns`` as a checked (start, stop) pair of columns of ``n_features``."""
    try:
        start, stop = (int(v) for v in item_columns)
        ok = [start, stop] == [v for v in item_columns]
    except (TypeError, ValueError):
        ok = False
    if not ok or not 0 <= start < stop <= n_features:
        raise ValueError(f"item_columns must be a pair (start, stop) of integers with "
                         f"0 <= start < stop <= n_features={n_features}, got "
                         f"{item_columns!r}")
    return start, stop


def _same_table(a, b):
    return a is b or (a.shape == b.shape and a.nnz == b.nnz and
                      np.array_equal(a.indptr, b.indptr) and
                      np.array_equal(a.indices, b.indices) and
                      np.array_equal(a.data, b.data))


CSR = CSRLayout()
DENSE = DenseLayout()
RELATIONAL = RelationalLayout()
