/* The field-aware pass's AdaGrad steps on the pairs of one row, for float32 factors
   (declared in _sgd_fields.pxi, which also holds the portable loop of the same steps).

   In a row with one nonzero per field, the pair (a, b) of nonzeros steps on two vectors
   of kf floats, P[j_a, f_b] and P[j_b, f_a], each read by that pair alone:

       g_a = c p_b + beta p_a,  G_a += g_a^2,  p_a -= g_a (eta0 / (sqrt(G_a) + eps))

   (and the same with a and b swapped, from the old values), c = dl x_a x_b rounded to
   float.  A square root and a division per coordinate are the costliest operations of
   the pass, and an SSE register holds four floats: on CPUs with AVX the two vectors of
   a pair, four floats each, take their square roots and divisions together in one
   eight-float register, which halves those instructions.  Every operation is the same
   IEEE operation on the same operands in the same order as the portable loop (AVX
   without FMA: no contraction), so the results are equal bit for bit; the CPU is asked
   once per pass (polylite_has_avx). */
#ifndef POLYLITE_FIELD_PAIRS_H
#define POLYLITE_FIELD_PAIRS_H

#include <math.h>
#include <stddef.h>

/* One row's step: its factor rows and AdaGrad's sums (rows of ``width`` floats, the
   feature's n_fields vectors of ``kf``), the step's constants, and the row's nonzeros:
   ``offset[z]`` = feature * width, ``field[z]`` its field, ``x[z]`` its value. */
typedef struct {
    float *P;
    float *G;
    ptrdiff_t kf;
    double dl;
    float beta;
    float eta0;
    float eps;
    const ptrdiff_t *offset;
    const int *field;
    const float *x;
    ptrdiff_t nnz;
} polylite_pair_row;

#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#include <immintrin.h>
#define POLYLITE_HAS_AVX_PAIRS 1

static inline int polylite_has_avx(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx");
}

/* The steps of every pair (a, b), a < b, of the row, in that order; kf a multiple of
   four. */
__attribute__((target("avx")))
static void polylite_field_pairs_avx(const polylite_pair_row *r) {
    const __m256 beta = _mm256_set1_ps(r->beta), eta = _mm256_set1_ps(r->eta0);
    const __m256 eps = _mm256_set1_ps(r->eps);
    const ptrdiff_t kf = r->kf, nnz = r->nnz;
    ptrdiff_t a, b, s;
    for (a = 0; a < nnz; a++) {
        float *pa_row = r->P + r->offset[a], *ga_row = r->G + r->offset[a];
        const ptrdiff_t fa = (ptrdiff_t)r->field[a] * kf;
        const double dla = r->dl * (double)r->x[a];
        for (b = a + 1; b < nnz; b++) {
            const ptrdiff_t fb = (ptrdiff_t)r->field[b] * kf;
            float *pa = pa_row + fb, *ga = ga_row + fb;
            float *pb = r->P + r->offset[b] + fa, *gb = r->G + r->offset[b] + fa;
            const __m256 c = _mm256_set1_ps((float)(dla * (double)r->x[b]));
            for (s = 0; s < kf; s += 4) {
                __m128 va = _mm_loadu_ps(pa + s), vb = _mm_loadu_ps(pb + s);
                /* lanes 0-3: vector a, lanes 4-7: vector b; ``other`` swaps them. */
                __m256 p = _mm256_insertf128_ps(_mm256_castps128_ps256(va), vb, 1);
                __m256 other = _mm256_insertf128_ps(_mm256_castps128_ps256(vb), va, 1);
                __m256 acc = _mm256_insertf128_ps(
                    _mm256_castps128_ps256(_mm_loadu_ps(ga + s)), _mm_loadu_ps(gb + s), 1);
                __m256 g = _mm256_add_ps(_mm256_mul_ps(c, other), _mm256_mul_ps(beta, p));
                acc = _mm256_add_ps(acc, _mm256_mul_ps(g, g));
                p = _mm256_sub_ps(p, _mm256_mul_ps(
                    g, _mm256_div_ps(eta, _mm256_add_ps(_mm256_sqrt_ps(acc), eps))));
                _mm_storeu_ps(ga + s, _mm256_castps256_ps128(acc));
                _mm_storeu_ps(gb + s, _mm256_extractf128_ps(acc, 1));
                _mm_storeu_ps(pa + s, _mm256_castps256_ps128(p));
                _mm_storeu_ps(pb + s, _mm256_extractf128_ps(p, 1));
            }
        }
    }
}
#else
#define POLYLITE_HAS_AVX_PAIRS 0
static inline int polylite_has_avx(void) { return 0; }
static void polylite_field_pairs_avx(const polylite_pair_row *r) { (void)r; }
#endif

#endif
