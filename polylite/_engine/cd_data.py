"""The named inputs of coordinate descent (:func:`polylite._engine._cd.cd_epoch`).

What a fit derives from its data once (the nonzeros regrouped by columns, each column's
support, the threads), and nothing that changes from one epoch to the next: what it
minimises is a :class:`polylite._engine.problem.Problem`, the parameters are the arrays
of a :class:`polylite.polynomial._base._OutputParams`, updated in place.
"""
from typing import NamedTuple

import numpy as np



class ColumnGroups(NamedTuple):
    """The nonzeros of a CSR matrix regrouped by runs of row-disjoint columns
    (:func:`polylite._engine._cd.column_groups`, which documents every array)."""
    group_ptr: np.ndarray    # entries of group g: group_ptr[g]:group_ptr[g + 1]
    columns_ptr: np.ndarray  # its columns: group_columns[columns_ptr[g]:...]
    group_columns: np.ndarray
    row_ptr: np.ndarray      # its entries' rows (none stored: rows 0..n-1)
    rows: np.ndarray
    col_ptr: np.ndarray      # its entries' columns (none stored: one column)
    columns: np.ndarray
    val_ptr: np.ndarray      # its entries' values (none stored: all 1, several columns)
    values: np.ndarray

    @property
    def n_groups(self):
        return self.group_ptr.shape[0] - 1


class TableBlock(NamedTuple):
    """One relation block of a relational input, as coordinate descent reads it
    (:func:`polylite._engine.solvers.cd_data`): the interactions' table rows, the
    table with the model's column numbers, and its nonzeros regrouped by runs."""
    index: np.ndarray        # (n,) intp: each interaction's table row
    table: object            # CSR (n_rows, n_features), float64 values, intp indices
    groups: ColumnGroups     # of the table (its rows are table rows)
    start: int               # its columns are start:stop
    stop: int
    position: int            # the direct groups before it (coordinate order)
    row_weight: np.ndarray   # (n_rows,) float64: each table row's interactions' weight
    row_count: np.ndarray    # (n_rows,) float64: their number


class CDData(NamedTuple):
    """What coordinate descent derives from the training rows once per fit."""
    X: object                # CSR (n, n_features): the rows, or a relational input's
                             # direct part (the blocks' columns empty)
    groups: ColumnGroups     # of X (its part: the columns outside every block)
    support: np.ndarray      # (n_features,): per column, sum_i s_i over its rows
    fourth: np.ndarray       # (n_features,): per column, sum_i s_i x_ij^4 over the rows
                             # of X (column_moments)
    n_threads: int
    blocks: tuple = ()       # TableBlock of each relation block, in column order


class Gradient(NamedTuple):
    """Where a gradient pass of coordinate descent writes the data term's gradient:
    float64 arrays shaped like the parameters."""
    intercept: np.ndarray    # (1,)
    w: np.ndarray            # (n_features,)
    P: np.ndarray            # (n_blocks, n_features, n_components)
    gamma: np.ndarray        # (n_dummy, n_components)
