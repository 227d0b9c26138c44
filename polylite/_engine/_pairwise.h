/* Kernels of the pairwise passes on one item row (declared in _pairwise.pyx).

   The k-dot of an item's score:

       sum_s a[s] (x b[s])

   each x b[s] and each product rounded to the values' precision, the products summed
   in double in four partial sums (s0 takes the coordinates s = 0 mod 4 and the last
   k mod 4 ones, s1 those = 1 mod 4, ...), returned as (s0 + s1) + (s2 + s3).  The
   partial sums keep additions from waiting on one another; on x86-64 the float32 sums
   take four products at a time in SSE2 registers (every x86-64 CPU has them), each
   lane the same IEEE operations in the same order as the portable loop, so the two
   give the same result to the last bit (no contraction: no FMA is asked for; the tests
   compare them, ``pair_dot``). */
#ifndef POLYLITE_PAIRWISE_H
#define POLYLITE_PAIRWISE_H

#include <stddef.h>

/* The portable loop: the definition of the sums. */
static inline double polylite_pair_dot_f32_portable(const float *a, const float *b,
                                                    float x, ptrdiff_t k) {
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    ptrdiff_t i = 0;
    for (; i + 4 <= k; i += 4) {
        s0 += (double)(a[i] * (x * b[i]));
        s1 += (double)(a[i + 1] * (x * b[i + 1]));
        s2 += (double)(a[i + 2] * (x * b[i + 2]));
        s3 += (double)(a[i + 3] * (x * b[i + 3]));
    }
    for (; i < k; i++) s0 += (double)(a[i] * (x * b[i]));
    return (s0 + s1) + (s2 + s3);
}

#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#include <emmintrin.h>
#define POLYLITE_PAIR_DOT_SSE2 1

/* The same sums, lanes 0-1 of s01 and 2-3 of s23 holding s0..s3. */
static inline double polylite_pair_dot_f32(const float *a, const float *b, float x,
                                           ptrdiff_t k) {
    const __m128 vx = _mm_set1_ps(x);
    __m128d s01 = _mm_setzero_pd(), s23 = _mm_setzero_pd();
    ptrdiff_t i = 0;
    for (; i + 4 <= k; i += 4) {
        __m128 p = _mm_mul_ps(_mm_loadu_ps(a + i), _mm_mul_ps(vx, _mm_loadu_ps(b + i)));
        s01 = _mm_add_pd(s01, _mm_cvtps_pd(p));
        s23 = _mm_add_pd(s23, _mm_cvtps_pd(_mm_movehl_ps(p, p)));
    }
    for (; i < k; i++)  /* into s0 alone (the low lane) */
        s01 = _mm_add_sd(s01, _mm_set_sd((double)(a[i] * (x * b[i]))));
    return (_mm_cvtsd_f64(s01) + _mm_cvtsd_f64(_mm_unpackhi_pd(s01, s01))) +
           (_mm_cvtsd_f64(s23) + _mm_cvtsd_f64(_mm_unpackhi_pd(s23, s23)));
}

#else
#define POLYLITE_PAIR_DOT_SSE2 0

static inline double polylite_pair_dot_f32(const float *a, const float *b, float x,
                                           ptrdiff_t k) {
    return polylite_pair_dot_f32_portable(a, b, x, k);
}

#endif

/* float64 values: the same sums, in the portable loop. */
static inline double polylite_pair_dot_f64(const double *a, const double *b, double x,
                                           ptrdiff_t k) {
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    ptrdiff_t i = 0;
    for (; i + 4 <= k; i += 4) {
        s0 += a[i] * (x * b[i]);
        s1 += a[i + 1] * (x * b[i + 1]);
        s2 += a[i + 2] * (x * b[i + 2]);
        s3 += a[i + 3] * (x * b[i + 3]);
    }
    for (; i < k; i++) s0 += a[i] * (x * b[i]);
    return (s0 + s1) + (s2 + s3);
}

/* A_0, A_1, A_2 of a row of one nonzero (value x, factor row p, k components) in a
   block of degree 2, into ``values`` (3 k): the dynamic programme's one step from
   A_0 = 1, A_1 = A_2 = 0, written out, A_1 = 0 + x p and A_2 = 0 + (x p) 0 (``top``;
   else A_2 = 0, as a query row leaves it).  The row and the values never overlap
   (restrict: the loops vectorise without a test). */
#define POLYLITE_PAIR_VALUES1(T, NAME)                                                 \
    static inline void NAME(const T *restrict p, T x, ptrdiff_t k, T *restrict values, \
                            int top) {                                                 \
        ptrdiff_t s;                                                                   \
        if (top) {                                                                     \
            for (s = 0; s < k; s++) {                                                  \
                T q = x * p[s];                                                        \
                values[s] = 1;                                                         \
                values[k + s] = (T)0 + q;                                              \
                values[2 * k + s] = (T)0 + q * (T)0;                                   \
            }                                                                          \
        } else {                                                                       \
            for (s = 0; s < k; s++) {                                                  \
                values[s] = 1;                                                         \
                values[k + s] = (T)0 + x * p[s];                                       \
                values[2 * k + s] = 0;                                                 \
            }                                                                          \
        }                                                                              \
    }
POLYLITE_PAIR_VALUES1(float, polylite_pair_values1_f32)
POLYLITE_PAIR_VALUES1(double, polylite_pair_values1_f64)

#endif
