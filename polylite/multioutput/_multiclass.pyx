"""The multi-class logistic loss in one pass over the rows (``_losses`` defines it).

The refits evaluate it thousands of times per fit; NumPy's version made about ten
temporaries of the size of the outputs per call.
"""
from libc.math cimport exp, log


def logistic(const double[:, ::1] O, const Py_ssize_t[::1] codes, const double[::1] s,
             double[:, ::1] W, bint gradient):
    """sum_i s_i (log sum_c exp(O_ic) - O_i,codes_i); with ``gradient``, W (the shape
    of O) is set to s_i (softmax(O_i) - e_codes_i)."""
    cdef Py_ssize_t n = O.shape[0], m = O.shape[1], i, c
    cdef double value = 0.0, top, total, e, scale
    with nogil:
        for i in range(n):
            top = O[i, 0]
            for c in range(1, m):
                if O[i, c] > top:
                    top = O[i, c]
            total = 0.0
            for c in range(m):
                e = exp(O[i, c] - top)
                total += e
                if gradient:
                    W[i, c] = e
            value += s[i] * (log(total) + top - O[i, codes[i]])
            if gradient:
                scale = s[i] / total
                for c in range(m):
                    W[i, c] *= scale
                W[i, codes[i]] -= s[i]
    return value
