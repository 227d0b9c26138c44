# The kernel layer: per-row polynomial kernels over the nonzeros of one CSR row.
#
# Layout convention: a factor matrix P is (n_features, n_components) in C order, so one
# nonzero j touches the contiguous block P[j*k : (j+1)*k] and every kernel runs its
# recurrence for all k components of that nonzero together (vectorisable inner loop).
# "Dummy" rows gamma (n_dummy, k) are extra features of value 1 processed before the
# row's nonzeros: they implement the shared-parameter ("augmented") HOFM and the PN
# offset gamma_s of (gamma_s + <p_s, x>)^m.
from libc.stdint cimport int32_t, int64_t
from cython cimport floating
from libc.math cimport sqrt, sqrtf

ctypedef fused index_t:
    int32_t
    int64_t

# C99 restrict pointers, for the k-loops of the solvers' row kernels whose arrays never
# overlap (a factor row, its AdaGrad statistics, a gradient or running-sum buffer): told
# so, the compiler vectorises such a loop without an overlap test on every call.
cdef extern from *:
    """
    #ifndef POLYLITE_RESTRICT
    #if defined(_MSC_VER)
    #define POLYLITE_RESTRICT __restrict
    #else
    #define POLYLITE_RESTRICT restrict
    #endif
    #endif
    """
    ctypedef float* float_row "float *POLYLITE_RESTRICT"
    ctypedef double* double_row "double *POLYLITE_RESTRICT"
    ctypedef const float* const_float_row "const float *POLYLITE_RESTRICT"
    ctypedef const double* const_double_row "const double *POLYLITE_RESTRICT"

ctypedef fused floating_row:
    float_row
    double_row

ctypedef fused const_floating_row:
    const_float_row
    const_double_row

# AdaGrad's epsilon (added to the square root of the accumulated squared gradients): one
# definition for the stochastic passes and the pairwise ranking passes.
cdef extern from *:
    """
    #define POLYLITE_ADAGRAD_EPS 1e-8
    """
    const double ADAGRAD_EPS "POLYLITE_ADAGRAD_EPS"


cdef inline void adagrad_step(floating* p, floating* acc, floating g,
                              double eta0) noexcept nogil:
    """AdaGrad on one coordinate with gradient g: G += g^2, p -= g eta0 / (sqrt(G) + 1e-8),
    the step of every stochastic and pairwise pass.

    All in the parameter's precision: float32 parameters take the whole step on float32
    lanes (four to an SSE register, no conversions to double and back; the square root
    and the division, the costliest operations of a step, run twice as wide), float64
    ones on float64 lanes.
    """
    acc[0] = acc[0] + g * g
    if floating is float:
        p[0] = p[0] - g * (<float> eta0 / (sqrtf(acc[0]) + <float> ADAGRAD_EPS))
    else:
        p[0] = p[0] - g * (eta0 / (sqrt(acc[0]) + ADAGRAD_EPS))


cdef inline double int_power(double base, int m) noexcept nogil:
    """base ** m for m >= 0 by m products (the rounding the kernels were tested with)."""
    cdef double r = 1
    cdef int i
    for i in range(m):
        r *= base
    return r


# Software prefetch (one definition, in C, for every module that cimports this one).
cdef extern from "_prefetch.h":
    void POLYLITE_PREFETCH(const void* p) noexcept nogil
    void polylite_prefetch_block(const void* p, size_t nbytes) noexcept nogil
    void polylite_prefetch_block_l2(const void* p, size_t nbytes) noexcept nogil

# Passes that keep one OpenMP parallel region over many steps (C, as Cython has no
# barrier): the threads the region got, and a barrier of its threads.
cdef extern from "_threads.h":
    int polylite_team_size() noexcept nogil
    void polylite_barrier() noexcept nogil

# Threads (n_jobs) share a pass over rows as contiguous ranges: thread t of ``threads``
# takes the entries lo..hi-1 of ``count``; false when it has none.
cdef inline bint thread_range(Py_ssize_t t, Py_ssize_t threads, Py_ssize_t count,
                              Py_ssize_t* lo, Py_ssize_t* hi) noexcept nogil:
    lo[0] = count * t // threads
    hi[0] = count * (t + 1) // threads
    return hi[0] > lo[0]

# Threads' workspaces that are rewritten at every row or step sit on cache lines of their
# own: a line holding the end of one thread's workspace and the start of another's
# would move between the cores at every write (false sharing).  Workspaces start on
# THREAD_ALIGN boundaries (two cache lines: some CPUs fetch lines in adjacent pairs).
cdef enum:
    THREAD_ALIGN = 128

cdef inline void* thread_align(void* raw) noexcept nogil:
    """``raw`` rounded up to a THREAD_ALIGN boundary (allocate THREAD_ALIGN bytes more;
    2 * THREAD_ALIGN more for a workspace whose end is not followed by another aligned
    one)."""
    return <void*> ((<size_t> raw + THREAD_ALIGN - 1) & ~(<size_t> (THREAD_ALIGN - 1)))

cdef enum:
    ANOVA = 0
    ALL_SUBSETS = 1
    POLYNOMIAL = 2
    # Field-aware pairs (degree 2): feature j has one latent vector per field, and the
    # pair (j, j') interacts through <P[j, field(j')], P[j', field(j)]>.  One factor block
    # whose rows are the n_fields vectors of a feature laid end to end (``k`` is then
    # n_fields times the vectors' length): the passes that read a factor row as k
    # contiguous values (the steps, AdaGrad's statistics, the lazy L2 decay, the
    # mini-batch sums) take it unchanged.
    FIELD_AWARE = 3
    # Field-weighted pairs (degree 2, Pan et al., WWW 2018): feature j has one latent
    # vector (one factor block, k its length), and the pair (j, j') interacts through
    # r[field(j), field(j')] <P[j], P[j']>, with one learned weight r per unordered pair
    # of fields, held in ``lam`` packed (field_pair).
    FIELD_WEIGHTED = 4


cdef struct Model:
    # A polynomial model as the passes read it: its parameters (``floating`` arrays, kept
    # as void*: a struct cannot hold a fused type; each function reads them typed) and
    # their shape.  The predictions take the intercept as a number (``intercept`` NULL).
    void* intercept           # 1
    void* w                   # d, or NULL: no linear term
    void* P                   # n_blocks x d x k
    void* gamma               # n_dummy x k, or NULL (dummy features of value 1, with
                              # factor block 0; the polynomial kernel's offset)
    void* lam                 # k (the polynomial kernel's output weights)
    const int* degrees        # each factor block's degree
    Py_ssize_t d
    Py_ssize_t k
    Py_ssize_t n_blocks
    Py_ssize_t n_dummy
    int kernel                # ANOVA, ALL_SUBSETS, POLYNOMIAL, FIELD_AWARE or
                              # FIELD_WEIGHTED (whose ``lam`` holds the weights of the
                              # pairs of fields, n_fields (n_fields + 1) / 2, field_pair)
    const int* fields         # FIELD_AWARE, FIELD_WEIGHTED: the field of each feature
                              # (d), else unread
    Py_ssize_t n_fields       # FIELD_AWARE: k = n_fields * the latent vectors' length

cdef void anova_forward(const floating* P, Py_ssize_t k,
                        const floating* gamma, Py_ssize_t n_dummy,
                        const index_t* ind, const floating* val, Py_ssize_t nnz,
                        int degree, floating* a) noexcept nogil

cdef struct Factors:
    # One factor block as the ANOVA kernel's reverse mode reads it (``floating`` arrays
    # kept as void*): P (d x k) and the dummy rows (value 1) before a row's nonzeros.
    const void* P
    const void* gamma         # n_dummy x k, or NULL
    Py_ssize_t n_dummy
    Py_ssize_t k

cdef inline Factors factors_of(const void* P, const void* gamma, Py_ssize_t n_dummy,
                               Py_ssize_t k) noexcept nogil:
    cdef Factors f
    f.P = P
    f.gamma = gamma
    f.n_dummy = n_dummy
    f.k = k
    return f

cdef void anova_gradient(const Factors* f, const index_t* ind, const floating* val,
                         Py_ssize_t nnz, int degree, floating* table, floating* adj,
                         floating* grad, floating* grad_gamma) noexcept nogil

cdef void anova_table(const floating* P, Py_ssize_t k,
                      const floating* gamma, Py_ssize_t n_dummy,
                      const index_t* ind, const floating* val, Py_ssize_t nnz,
                      int degree, floating* table) noexcept nogil

cdef void anova_backward(const Factors* f, const index_t* ind, const floating* val,
                         Py_ssize_t nnz, int degree, const floating* table,
                         floating* adj, floating* grad,
                         floating* grad_gamma) noexcept nogil

cdef void all_subsets_forward(const floating* P, Py_ssize_t k,
                              const index_t* ind, const floating* val, Py_ssize_t nnz,
                              floating* out) noexcept nogil

cdef void all_subsets_gradient(const floating* P, Py_ssize_t k,
                               const index_t* ind, const floating* val, Py_ssize_t nnz,
                               floating* prefix, floating* suffix,
                               floating* grad) noexcept nogil

cdef void linear_forms(const floating* P, Py_ssize_t k, const floating* gamma,
                       const index_t* ind, const floating* val, Py_ssize_t nnz,
                       floating* out) noexcept nogil

cdef void power_sums(const floating* P, Py_ssize_t k, Py_ssize_t s,
                     const floating* gamma, Py_ssize_t n_dummy,
                     const index_t* ind, const floating* val, Py_ssize_t nnz,
                     int degree, double* D) noexcept nogil

# Called once per (row, coordinate) visit by coordinate descent: inline, so that the solver
# module gets its own inlined copy of this single definition.
cdef inline void anova_from_power_sums(const double* D, int degree, double* A) noexcept nogil:
    """Newton's identity: A[t] = (1/t) sum_{i=1..t} (-1)^(i+1) A[t-i] D_i, t = 0..degree."""
    cdef int t, i
    cdef double acc, sign
    A[0] = 1
    for t in range(1, degree + 1):
        acc = 0
        sign = 1
        for i in range(1, t + 1):
            acc += sign * A[t - i] * D[i - 1]
            sign = -sign
        A[t] = acc / t


cdef inline double anova_coordinate_derivative(const double* A, int degree,
                                        double q, double x) noexcept nogil:
    """dA_degree/dp_j = x_j A_{degree-1}(p without j, x without j), q = p_j x_j.

    A holds A_0..A_{degree-1}(p, x).  Multi-linearity gives
    A_t(p, x) = A_t(without j) + q A_{t-1}(without j), peeled off from t = 1 upwards.
    """
    cdef int t
    cdef double rest = 1  # A_0 without j
    for t in range(1, degree):
        rest = A[t] - q * rest
    return x * rest


cdef double field_aware_term(const floating* P, Py_ssize_t width, Py_ssize_t n_fields,
                             const int* fields, const index_t* ind, const floating* val,
                             Py_ssize_t nnz, floating* grad) noexcept nogil

cdef inline Py_ssize_t field_pair(Py_ssize_t f, Py_ssize_t g,
                                  Py_ssize_t n_fields) noexcept nogil:
    """The place of the unordered pair of fields {f, g} among the field-weighted
    kernel's n_fields (n_fields + 1) / 2 weights: the upper triangle of the symmetric
    matrix r, row by row (a <= b: a (2 n_fields - a + 1) / 2 + b - a)."""
    cdef Py_ssize_t a = f if f <= g else g, b = g if f <= g else f
    return a * (2 * n_fields - a + 1) // 2 + b - a


cdef inline Py_ssize_t n_field_pairs(Py_ssize_t n_fields) noexcept nogil:
    """The field-weighted kernel's number of weights."""
    return n_fields * (n_fields + 1) // 2


cdef double field_weighted_term(const Model* m, const index_t* ind, const floating* val,
                                Py_ssize_t nnz, floating* grad,
                                floating* grad_r) noexcept nogil

cdef double nonlinear_term(const Model* m, const index_t* ind, const floating* val,
                           Py_ssize_t nnz, floating* work) noexcept nogil
