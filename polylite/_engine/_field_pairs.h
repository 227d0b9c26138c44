/* The field-aware pass's pair loops on one row, for float32 factors on CPUs with AVX
   (declared in _sgd_fields.pxi, which also holds the portable loops of the same sums and
   steps).

   In a row with one nonzero per field, the pair (a, b) of nonzeros reads two vectors of
   kf floats, P[j_a, f_b] and P[j_b, f_a], each read by that pair alone.  The prediction
   sums x_a x_b <P[j_a, f_b], P[j_b, f_a]> over the pairs; the step of a pair is

       g_a = c p_b + beta p_a,  G_a += g_a^2,  p_a -= g_a (eta0 / sqrt(G_a))

   (and the same with a and b swapped, from the old values), c = dl x_a x_b rounded to
   float.  Both loops are bound by the latency of each pair's chain of operations, not
   by the arithmetic units, so they are written to keep the chains short and many pairs
   in flight:

   - the prediction keeps x_b <p_a, p_b> in two four-float sums per nonzero a (pairs
     alternate between them), adds x_a times their total to a double, and so takes one
     float addition per pair on its carried chain;
   - the two vectors of a pair step together in one eight-float register, and 1 / sqrt(G)
     is the CPU's reciprocal square root estimate refined by one Newton step, within
     about 2^-22 of the exact value (libffm takes the estimate alone, within 2^-11): a
     square root and a division, exact, would lengthen the chain by some twenty cycles.
     The field-aware models start AdaGrad's sums at 1 and the sums only grow, so the
     portable step's eps = 1e-8 changes no float sqrt(G) + eps: the two loops take the
     same steps but for the last bits of each step size, and the same prediction but for
     the order of its float sums.

   The CPU is asked once per pass (polylite_has_avx). */
#ifndef POLYLITE_FIELD_PAIRS_H
#define POLYLITE_FIELD_PAIRS_H

#include <math.h>
#include <stddef.h>

/* One row: the step's constants and the row's nonzeros: ``vec[z]``, the factor row of
   its feature (the feature's n_fields vectors of ``kf`` floats), ``sum[z]`` AdaGrad's
   sums of it, ``field[z]`` = its field * kf (where the vectors of its field start in the
   other features' rows), ``x[z]`` its value. */
typedef struct {
    float *const *vec;
    float *const *sum;
    ptrdiff_t kf;
    double dl;
    float beta;
    float eta0;
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

/* x_b <p_a, p_b> of one pair, kf floats (a multiple of four), into ``sum``. */
__attribute__((target("avx")))
static inline __m128 pair_product(__m128 sum, const float *pa, const float *pb,
                                  const float *xb, ptrdiff_t kf) {
    const __m128 x = _mm_broadcast_ss(xb);
    ptrdiff_t s;
    for (s = 0; s < kf; s += 4)
        sum = _mm_add_ps(sum, _mm_mul_ps(x, _mm_mul_ps(_mm_loadu_ps(pa + s),
                                                        _mm_loadu_ps(pb + s))));
    return sum;
}

/* The row's pair term: the sum over the pairs (a, b), a < b, of
   x_a x_b <P[j_a, f_b], P[j_b, f_a]>. */
__attribute__((target("avx")))
static double polylite_field_pairs_predict_avx(const polylite_pair_row *r) {
    float *const *vec = r->vec;
    const float *x = r->x;
    const int *field = r->field;
    const ptrdiff_t kf = r->kf, nnz = r->nnz;
    double total = 0.0;
    ptrdiff_t a, b;
    for (a = 0; a < nnz; a++) {
        const float *pa_row = vec[a];
        const ptrdiff_t fa = field[a];
        __m128 even = _mm_setzero_ps(), odd = _mm_setzero_ps();
        float lanes[4];
        for (b = a + 1; b + 1 < nnz; b += 2) {
            even = pair_product(even, pa_row + field[b], vec[b] + fa, x + b, kf);
            odd = pair_product(odd, pa_row + field[b + 1], vec[b + 1] + fa, x + b + 1,
                               kf);
        }
        if (b < nnz)
            even = pair_product(even, pa_row + field[b], vec[b] + fa, x + b, kf);
        _mm_storeu_ps(lanes, _mm_add_ps(even, odd));
        total += (double)x[a] * (double)((lanes[0] + lanes[1]) + (lanes[2] + lanes[3]));
    }
    return total;
}

/* The step of one pair on four coordinates of its two vectors (lanes 0-3: vector a,
   lanes 4-7: vector b; ``other`` swaps them); ``eta_half`` = eta0 / 2.  1 / sqrt(G) is
   y (3 - G y^2) / 2 with y the estimate (relative error below 1.5 2^-12): one Newton
   step, which squares the error; g eta0 y / 2 is formed beside the Newton step's
   chain. */
__attribute__((target("avx")))
static inline void pair_step(float *pa, float *pb, float *ga, float *gb, __m256 c,
                             __m256 beta, __m256 eta_half) {
    const __m128 va = _mm_loadu_ps(pa), vb = _mm_loadu_ps(pb);
    const __m256 p = _mm256_insertf128_ps(_mm256_castps128_ps256(va), vb, 1);
    const __m256 other = _mm256_insertf128_ps(_mm256_castps128_ps256(vb), va, 1);
    __m256 acc = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(ga)),
                                      _mm_loadu_ps(gb), 1);
    const __m256 g = _mm256_add_ps(_mm256_mul_ps(c, other), _mm256_mul_ps(beta, p));
    acc = _mm256_add_ps(acc, _mm256_mul_ps(g, g));
    const __m256 y = _mm256_rsqrt_ps(acc);
    const __m256 scaled = _mm256_mul_ps(g, _mm256_mul_ps(eta_half, y));
    const __m256 newton = _mm256_sub_ps(_mm256_set1_ps(3.0f),
                                        _mm256_mul_ps(_mm256_mul_ps(acc, y), y));
    const __m256 stepped = _mm256_sub_ps(p, _mm256_mul_ps(scaled, newton));
    _mm_storeu_ps(ga, _mm256_castps256_ps128(acc));
    _mm_storeu_ps(gb, _mm256_extractf128_ps(acc, 1));
    _mm_storeu_ps(pa, _mm256_castps256_ps128(stepped));
    _mm_storeu_ps(pb, _mm256_extractf128_ps(stepped, 1));
}

/* The steps of every pair (a, b), a < b, of the row, in that order; kf a multiple of
   four; AdaGrad's sums at least 1. */
__attribute__((target("avx")))
static void polylite_field_pairs_avx(const polylite_pair_row *r) {
    float *const *vec = r->vec, *const *sum = r->sum;
    const float *x = r->x;
    const int *field = r->field;
    const __m256 beta = _mm256_set1_ps(r->beta);
    const __m256 eta_half = _mm256_set1_ps(0.5f * r->eta0);
    const ptrdiff_t kf = r->kf, nnz = r->nnz;
    const double dl = r->dl;
    ptrdiff_t a, b, s;
    for (a = 0; a < nnz; a++) {
        float *const pa_row = vec[a], *const ga_row = sum[a];
        const ptrdiff_t fa = field[a];
        const double dla = dl * (double)x[a];
        for (b = a + 1; b < nnz; b++) {
            float *const pa = pa_row + field[b], *const ga = ga_row + field[b];
            float *const pb = vec[b] + fa, *const gb = sum[b] + fa;
            const __m256 c = _mm256_set1_ps((float)(dla * (double)x[b]));
            if (kf == 4) {  /* libffm's default: no loop over the coordinates */
                pair_step(pa, pb, ga, gb, c, beta, eta_half);
                continue;
            }
            for (s = 0; s < kf; s += 4)
                pair_step(pa + s, pb + s, ga + s, gb + s, c, beta, eta_half);
        }
    }
}
#else
#define POLYLITE_HAS_AVX_PAIRS 0
static inline int polylite_has_avx(void) { return 0; }
static double polylite_field_pairs_predict_avx(const polylite_pair_row *r) {
    (void)r;
    return 0.0;
}
static void polylite_field_pairs_avx(const polylite_pair_row *r) { (void)r; }
#endif

#endif
