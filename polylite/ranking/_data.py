"""Positive interactions as the pairwise passes walk them.

A positive row is a query part (the user's columns and the context) and an item part
on other columns.  The passes need the query rows, the catalogue of item rows (each
item stored once: the negatives are drawn from it), each positive's item and user, and
every user's seen items, whichever form the positives came in:

- a :class:`~polylite.relational.RelationalMatrix` (``FieldEncoder(output="relational")``):
  the item part is a relation block (by default the second, as the encoder lays the
  blocks out), its table the catalogue; the user is the row of the first other block;
- CSR rows: the item part is the columns ``item_columns``; the catalogue is the distinct
  item parts of the positives, the user the distinct parts before the item columns.
"""
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from .._engine.layouts import distinct_rows
from ..relational import RelationalMatrix

# Positives per chunk of a pass: its query rows are expanded a chunk at a time, unless
# one block's table holds them all (read there) or all of them together hold at most
# EXPANDED_NNZ nonzeros (then expanded once for every pass).
CHUNK_ROWS = 65536
EXPANDED_NNZ = 2 ** 22
# The seen pairs as a bitmap when it takes at most this much memory (it then mostly
# stays in cache; larger, a lookup would be a miss to memory).
BITMAP_BYTES = 2 ** 22


class Positives(NamedTuple):
    """Positive interactions, as the passes and the validation score walk them."""
    query: RelationalMatrix      # the query rows, item columns empty
    item: np.ndarray             # int64: each positive's row of the catalogue
    user: np.ndarray             # int64: each positive's user
    weight: np.ndarray           # float64: sample weights, mean 1


class NegativeSampling(NamedTuple):
    """How a pairwise pass draws the negatives of a positive."""
    max_trials: int              # WARP: negatives tried per positive (BPR: one)
    popularity: bool             # drawn by popularity (else uniformly)
    margin: float                # WARP's margin


class Catalogue(NamedTuple):
    """The candidate items and every user's seen ones."""
    items: sp.csr_matrix         # one row per item, at its columns of the model, int64
    seen_indptr: np.ndarray      # int64: user u's seen items are seen[seen_indptr[u]:...]
    seen: np.ndarray             # int64, sorted per user
    seen_bits: np.ndarray        # uint64: their bitmap (users x items), or empty
    filter_ptr: np.ndarray       # int64: without the bitmap, each user's block of
    seen_filter: np.ndarray      # uint64: the filter of its seen items (else empty)
    cumulative: np.ndarray       # float64: popularity sampling's cumulative weights
    n_users: int
    max_item_nnz: int            # the nonzeros of the widest item row
    columns: tuple = None        # (start, stop): the model's columns of the item part
    whole: object = None         # the whole-data loss's pairs (WholeData), or None


class Chunk(NamedTuple):
    """The positives of one chunk of a pass, in the order they are visited."""
    query: sp.csr_matrix         # query rows (int64 indices)
    query_row: np.ndarray        # int64: each positive's row of ``query``
    positive: np.ndarray
    user: np.ndarray
    weight: np.ndarray
    batch_end: np.ndarray        # uint8: the positive ends its query's batch


def _int64_csr(X):
    """X (CSR) with int64 indices, sorted, as the passes read it (SciPy's constructor
    would narrow them)."""
    if X.indices.dtype == np.int64 and X.indptr.dtype == np.int64 and \
            X.has_sorted_indices:
        return X
    X = sp.csr_matrix(X)
    X.sort_indices()
    out = sp.csr_matrix(X.shape, dtype=X.dtype)
    out.data, out.indices, out.indptr = (X.data, X.indices.astype(np.int64),
                                         X.indptr.astype(np.int64))
    out.has_sorted_indices = True
    return out


def user_codes(query, users):
    """Each positive's user: ``users`` if known, else the distinct query rows."""
    if users is not None:
        return users
    return distinct_rows(query.to_csr())[0]


def catalogue_of(table, item):
    """The catalogue (the table's rows that have features) and each positive's row of
    it; raises for a positive whose item has no features."""
    nonempty = np.diff(table.indptr) > 0
    row_of = np.cumsum(nonempty) - 1
    if not nonempty[item].all():
        bad = int((~nonempty[item]).sum())
        raise ValueError(
            f"{bad} positive(s) have an item part without any feature (an item unknown "
            f"to the encoder?): the ranker cannot score them; drop them, or encode their "
            f"items")
    items = _int64_csr(table[nonempty])
    codes = row_of[item].astype(np.int64)
    return items, codes


def seen_sets(user, item, n_users, n_items):
    """Every user's seen items, sorted, as (indptr, items), and what the passes look
    draws up in first: their bitmap (users x items, a row of ceil(n_items / 64) words per
    user) when it is small enough to stay in cache, else a filter of each user's seen
    items (:func:`polylite._engine._pairwise.seen_filter`) that rules most unseen items
    out before a search of the user's sorted list.  Returns (indptr, items, bitmap,
    filter_ptr, filter), the arrays not in use empty."""
    from .._engine._pairwise import seen_bitmap, seen_filter
    pairs = sp.csr_matrix((np.ones(user.shape[0], dtype=np.int8), (user, item)),
                          shape=(n_users, n_items))
    pairs.sum_duplicates()
    pairs.sort_indices()
    indptr, seen = pairs.indptr.astype(np.int64), pairs.indices.astype(np.int64)
    none = np.zeros(0, dtype=np.uint64)
    if n_users * ((n_items + 63) // 64) * 8 > BITMAP_BYTES:
        return (indptr, seen, none) + seen_filter(indptr, seen)
    owners = np.repeat(np.arange(n_users, dtype=np.int64), np.diff(indptr))
    return (indptr, seen, seen_bitmap(owners, seen, n_users, n_items),
            np.zeros(0, dtype=np.int64), none)


def popularity(item, n_items):
    """Cumulative sampling weights: 1 + the item's positives (items without positives
    are still drawn)."""
    return np.cumsum(1.0 + np.bincount(item, minlength=n_items)).astype(np.float64)


def query_codes(query):
    """Codes of the positives' query rows: equal codes for equal rows of the relation
    blocks' tables (by index) and equal direct entries, taken without expanding the rows
    (two indices of identical table rows get different codes: their positives are then
    batched apart, which costs a little time only)."""
    keys = [np.asarray(block.index, dtype=np.int64) for block in query.blocks]
    direct = query.direct()
    if direct.nnz > 0:
        keys.append(distinct_rows(direct)[0])
    if len(keys) == 0:
        return np.zeros(query.shape[0], np.int64)
    if len(keys) == 1:
        return keys[0]
    return np.unique(np.column_stack(keys), axis=0,
                     return_inverse=True)[1].ravel().astype(np.int64)


def query_batches(order, codes, size, rng):
    """The visiting order and its batches: the positives of one query row are visited
    together, in batches of at most ``size`` (a query's positives split into batches
    of near-equal sizes), the batches in random order (``rng``; None: ``order`` kept,
    a batch is a run of positives of one query in it).  Returns the order and, for each
    positive in it, whether it ends its batch (uint8)."""
    n = order.shape[0]
    if n == 0:
        return order, np.ones(0, np.uint8)
    if rng is not None:  # stable: within a query, the positives keep their order
        order = order[np.argsort(codes[order], kind="stable")]
    keys = codes[order]
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    lengths = np.diff(np.r_[starts, n])
    run = np.repeat(np.arange(starts.size), lengths)
    within = np.arange(n) - starts[run]
    n_batches = -(-lengths // size)
    # Batch b of a run of length L holds the positions [b L / nb, (b + 1) L / nb).
    batch = (np.cumsum(n_batches) - n_batches)[run] + within * n_batches[run] // lengths[run]
    if rng is not None:
        batch = rng.permutation(int(n_batches.sum()))[batch]
        visit = np.argsort(batch, kind="stable")
        order, batch = order[visit], batch[visit]
    batch_end = np.r_[batch[1:] != batch[:-1], True].astype(np.uint8)
    return order, batch_end


def chunks(positives, order, batch_end, buffers, threads=1):
    """The positives in ``order``, a chunk at a time, with their query rows (kept in
    ``buffers`` when they are few: the table of the one block that holds them, or the
    rows expanded once; else expanded a chunk at a time), their
    batches' ends (``batch_end``, aligned with ``order``), and whether the chunk is the
    last.  A chunk holds CHUNK_ROWS positives, or CHUNK_ROWS per thread of the pass
    (``threads``) when the query rows are kept: the threads then meet once per
    CHUNK_ROWS positives each, whatever their number."""
    if "query" not in buffers:
        single = positives.query._single_source(EXPANDED_NNZ)
        if single is not None:
            # one block's table (ids, a user's features): read where it is
            buffers["query"], buffers["query_row"] = _int64_csr(single[0]), single[1]
        elif positives.query.expanded_nnz <= EXPANDED_NNZ:
            buffers["query"] = _int64_csr(positives.query.to_csr())
            buffers["query_row"] = np.arange(positives.query.shape[0], dtype=np.int64)
    from .._engine._pairwise import gather_positives
    size = CHUNK_ROWS * max(int(threads), 1) if "query" in buffers else CHUNK_ROWS
    no_rows = np.zeros(0, dtype=np.int64)
    for lo in range(0, order.shape[0], size):
        rows = np.ascontiguousarray(order[lo:lo + size], dtype=np.int64)
        if "query" in buffers:
            query, query_rows = buffers["query"], buffers["query_row"]
        else:  # (the rows expanded for this chunk: a positive's row is its place)
            query = _int64_csr(positives.query._expanded(rows, buffers))
            query_rows = no_rows
        query_row, item, user, weight = gather_positives(
            rows, query_rows, positives.item, positives.user, positives.weight, threads)
        yield (Chunk(query, query_row, item, user, weight, batch_end[lo:lo + size]),
               lo + size >= order.shape[0])


class WholeData(NamedTuple):
    """The positives as the whole-data loss sees them: distinct query rows and the
    (query, item) pairs that are not unobserved, with their weights."""
    queries: sp.csr_matrix       # one row per distinct training query (float64)
    pair_query: np.ndarray       # int64: each pair's query (row of ``queries``)
    pair_item: np.ndarray        # int64: its item (row of the catalogue)
    weight: np.ndarray           # float64: its weight (0: left out of the loss)


def whole_data(positives, trained, n_items, confidence):
    """The distinct query rows of the training positives (``trained``: which of
    ``positives`` are fitted) and their pairs: each observed pair weighted
    ``1 + confidence * count`` (count: the summed sample weights of its positives; a
    pair whose positives all weigh 0 is unobserved), and, with weight 0 (left out of the
    loss, as the pairwise losses never draw them as negatives), the pairs of a training
    query and an item that only the other rows show (held-out positives, rows of label
    0)."""
    codes = query_codes(positives.query)
    fitted = np.flatnonzero(trained)
    train_codes, first = np.unique(codes[fitted], return_index=True)
    queries = sp.csr_matrix(positives.query[fitted[first]].to_csr(), dtype=np.float64)
    query_of = np.minimum(np.searchsorted(train_codes, codes), train_codes.size - 1)
    shape = (train_codes.size, n_items)
    observed = sp.csr_matrix((positives.weight[fitted], (query_of[fitted],
                                                         positives.item[fitted])),
                             shape=shape)
    observed.sum_duplicates()
    observed.eliminate_zeros()
    other = ~trained & (train_codes[query_of] == codes)
    left_out = sp.csr_matrix((np.ones(int(other.sum())),
                              (query_of[other], positives.item[other])), shape=shape)
    left_out.sum_duplicates()
    left_out = (left_out - left_out.multiply(observed > 0)).tocsr()
    left_out.eliminate_zeros()
    observed, left_out = observed.tocoo(), left_out.tocoo()
    return WholeData(queries,
                     np.r_[observed.row, left_out.row].astype(np.int64),
                     np.r_[observed.col, left_out.col].astype(np.int64),
                     np.r_[1.0 + confidence * observed.data.astype(np.float64),
                           np.zeros(left_out.nnz)])
