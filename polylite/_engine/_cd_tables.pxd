# Coordinate descent on the tables of a relational input (see _cd_tables.pyx): the passes
# that _cd.pyx's epoch calls for each relation block, between its passes over the rows.
from libc.stdint cimport int64_t

from ._cd_core cimport Layout, Threads


cdef enum:
    # The highest ANOVA degree of the table passes: their records' and the stack arrays'
    # size (_cd.pyx refuses higher degrees on relational input).
    MAX_TABLE_DEGREE = 16


cdef enum:
    # The quadratic model of the loss that a block's pass minimises (Moments.model).
    MODEL_BOUND = 0     # an upper bound that touches the loss (loss_majorizer)
    MODEL_LOCAL = 1     # its local model (loss_local), checked after the pass


cdef struct Table:
    # One relation block: its table (CSR, the model's column numbers), each
    # interaction's table row, the table's nonzeros regrouped by runs (column_groups, with
    # int64 indices and float64 values) and the per-table-row records.
    Py_ssize_t n_rows
    const int64_t* indptr
    const int64_t* indices
    const double* data
    const int64_t* index          # (n,) each interaction's table row
    Py_ssize_t n_groups
    const Py_ssize_t* group_ptr
    const Py_ssize_t* columns_ptr
    const int64_t* group_columns
    const Py_ssize_t* row_ptr
    const int64_t* rows
    const Py_ssize_t* col_ptr
    const int64_t* columns
    const Py_ssize_t* val_ptr
    const double* values
    const double* row_weight      # per table row, the weight of its interactions (the
                                  # sum of s_i, or their count when the weights are
                                  # uniform and the sums leave them out)
    double* cache                 # n_rows caches B of the block part (Moments.width
                                  # doubles each) of the component being updated
    double* next                  # the next component's, built by the sums passes
    double* records               # n_rows records of Moments.stride doubles
    double* private               # threads - 1 more copies, for the gather's sums


cdef struct Moments:
    # What a table-row record holds for one kind of coordinate.  A row i of table row r
    # has the derivative g_i = x <phi_i, psi_r> in a coordinate of the block (x its value
    # there): phi_i (M values) from the rest of row i, psi_r from the block's part of it.
    # So the sums of a step over the rows are sums over table rows of the moments
    # R = sum_i s_i l'_i phi_i, W = sum_i s_i kappa_i phi_i phi_i^T and N (noise bounds).
    int kind             # KIND_LINEAR, KIND_SUBSETS, or the ANOVA kind (_cd_core._kind)
    int degree           # the ANOVA degree m
    Py_ssize_t width     # doubles of the block part's cache B (m - 1; 2; 0 for linear)
    Py_ssize_t M         # moments (m; 1; 1)
    Py_ssize_t stride    # doubles per record
    Py_ssize_t old       # offsets in a record: B at the start of the block's pass (-1:
                         # none kept, see _cd_tables._layout)
    Py_ssize_t change    # the change of the block part's terms over the pass (M)
    Py_ssize_t R         # M
    Py_ssize_t W         # M (M + 1) / 2, the upper triangle row by row
    Py_ssize_t N         # M
    Py_ssize_t A         # the largest |phi_u| of the table row's interactions, for u from
    int first            # ``first`` on (MODEL_LOCAL; phi_0 = 1 but for all-subsets), at
                         # A + u - first
    # The squared loss (kappa_i = s_i): W's first entry is the table row's weight, given,
    # and at degree 2 the noise moments N are W's diagonal, not summed apart.
    bint squared
    int model            # MODEL_BOUND or MODEL_LOCAL


cdef struct RowStates:
    # The interactions (the rows of the relational input) as the table passes read and
    # write them: their state records and the cache slot of the component at hand.
    double* state        # n records of L.stride doubles
    const Layout* L
    Py_ssize_t n
    Py_ssize_t slot


cdef struct Push:
    # A block's pass whose end (table_push) awaits, to be done in the next pass over the
    # rows (table_start_rows), or none (table NULL).
    const Table* table
    const double* cache  # the table rows' caches of its pass (the table's arrays swap)
    Moments TM
    Py_ssize_t slot      # the rows' cache slot of its component


cdef struct Start:
    # What table_start_rows builds: each row's cache in the slot, from ``base`` (or, if
    # NULL, from what the slot holds: the direct part's) plus the caches B of its table
    # rows of the ``count`` blocks ``tables``; and block ``gather``'s moments (or NULL).
    const Table* tables
    Py_ssize_t count
    const double* base
    const Table* gather


cdef inline RowStates row_states(double* state, const Layout* L, Py_ssize_t n,
                                 Py_ssize_t slot) noexcept nogil:
    cdef RowStates rows
    rows.state = state
    rows.L = L
    rows.n = n
    rows.slot = slot
    return rows


cdef Moments table_moments(int kind, int degree) noexcept nogil

cdef void table_fill(const Table* T, const Moments* TM, const double* factors,
                     int threads) noexcept nogil

cdef void table_start_rows(const Start* start, const Moments* TM, const Push* done,
                           const RowStates* rows, int threads) noexcept nogil

cdef void table_gather(const Table* T, const Moments* TM, const RowStates* rows,
                       int threads, const Table* done) noexcept nogil

cdef void table_gradients(const Table* T, const Moments* TM, Py_ssize_t g,
                          double* scratch, const Threads* th,
                          int pass_threads) noexcept nogil

cdef void table_updates(const Table* T, const Moments* TM, Py_ssize_t g,
                        const double* scratch, const Threads* th,
                        int pass_threads) noexcept nogil

cdef void table_column_sums(const Table* T, const Moments* TM, Py_ssize_t g, double p,
                            double p_next, double* sums) noexcept nogil

cdef void table_column_update(const Table* T, const Moments* TM, Py_ssize_t g, double p,
                              double delta) noexcept nogil

cdef double table_pass_change(const Table* T, const Moments* TM, int loss, double y_bound,
                              int threads, double* partial,
                              double* excess) noexcept nogil

cdef double table_check(const Table* T, const Moments* TM, const RowStates* rows,
                        int threads, double* partial, double* loss_sum) noexcept nogil

cdef void table_revert(const Table* T, const Moments* TM, int threads) noexcept nogil

cdef void table_push(const Table* T, const Moments* TM, const RowStates* rows,
                     int threads) noexcept nogil
