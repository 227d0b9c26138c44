# The C helpers of _ball that other modules cimport (_passes: the smoothed multi-class
# hinge loss projects each row onto the simplex).

cdef double simplex_threshold(const double* a, Py_ssize_t m, double radius,
                              bint absolute, double* top) noexcept nogil
