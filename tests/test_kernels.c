/* test_kernels.c — src/cpu/quant_act.c and every kernel table of kernels.h (kernels_generic.c,
 * x86_avx2.c, x86_avx512.c, arm_neon.c, wasm_relaxed.c, wasm_simd128.c: those the target and CPU
 * run; the relaxed build, `make wasm-relaxed`, holds both wasm tables), against the
 * reference dequantizers of formats.c, on random blocks of every format and ragged shapes.
 *
 * What is checked, and why the tolerances are what they are:
 *
 *   activations  lean_quantize_act: |x - qs * d| <= d / 2 + |x| 2^-22 for every element
 *                (d = max |x| / 127; the 2^-22 covers the rounding of x * (127 / max|x|)),
 *                |qs| <= 127, s = the sum of qs, bsums = the sums of 16.
 *   matmul       for each table, weight type, and (rows, cols, n_tok) from a list of shape
 *                classes (rows and tokens not multiples of any tile, F32/F16/BF16 rows of any
 *                length), y[t][r] against the double-precision sum_i w_i xh_i, where w is the
 *                reference dequantization of the row and xh the dequantized activations
 *                (qs * d, or x itself for float activations). A kernel computes that sum
 *                exactly in integers per block and rounds only when it scales and adds a
 *                block's result, so it is within
 *                    tol = 4 * 2^-24 * (cols / 16 + 8) * mag,
 *                    mag = sum_i (|w_i| + 2 |z_i|) |xh_i|
 *                (a first-order bound on float32 rounding of at most one multiply and two adds
 *                per 16 elements, with room to spare; z_i is the weight with its quants zeroed,
 *                i.e. the format's offset or minimum, so mag also bounds the terms that cancel
 *                in d * sum(q x) - dmin * sum(m x)). A wrong quant, scale or bit moves a
 *                result by ~mag / cols, orders of magnitude more.
 *                Then against the float activations themselves: the quantization moves the
 *                sum by at most sum over blocks of d_b / 2 * sum_{i in b} |w_i| (above), so
 *                |y - sum_i w_i x_i| <= that + tol.
 *                A table's own quantize_act must give quant_act.c's bytes exactly.
 *   exact        every table's matmul_exact (float activations for every format) the same way:
 *                xh = x, so the quantization bound is 0 and only float rounding remains,
 *                held to the same tol (its sums, in float, have at most as many roundings);
 *                and with an infinite or NaN scale, outputs of the reference's class (NaN,
 *                +inf, -inf, finite).
 *   invariance   the same outputs, bit for bit, computed one row and one token per call, and
 *                over random row ranges [r0, r1) (which must leave the other rows untouched):
 *                the contract that makes logits independent of threads and batches.
 *   repacked     a table's matmul_packed (cpu/repack.h's R16 or KS copy of the weights) gives its
 *                matmul's bits: the whole matrix, row ranges from multiples of 16 (the
 *                kernel's contract), one token per call; rows past r1 stay untouched.
 *   same bits    a table that says same_as_generic (neon, relaxed, simd128) gives the generic table's
 *                bits for every matmul and attention output.
 *   wasm f16     (wasm simd128 builds) wasm_shared.h's inline f16 scale read, against
 *                lean_f16_to_f32 bit for bit over all 65536 halves (subnormals, inf, NaN).
 *   attention    scores and weighted sums against double, with the same kind of bound;
 *                the softmax numerators (exp_sum) and SwiGLU within 1e-6 relative.
 */
#include "core/formats.h"
#include "cpu/kernels.h"
#include "cpu/repack.h"
#include "dev/quantize.h"
#if defined(__wasm_simd128__)
#include "cpu/wasm_shared.h"
#endif
#include "test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

static uint64_t rng(void) { /* splitmix64 */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double unit(void) { return (double)(rng() >> 11) / 9007199254740992.0; } /* [0, 1) */

static float normal(void) {
    double u1 = unit() + 1e-12, u2 = unit();
    return (float)(sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2));
}

static const uint32_t all_types[] = {LEAN_TYPE_F32,  LEAN_TYPE_F16,  LEAN_TYPE_BF16, LEAN_TYPE_Q8_0,
                                     LEAN_TYPE_Q4_0, LEAN_TYPE_Q4_1, LEAN_TYPE_Q5_0, LEAN_TYPE_Q5_1,
                                     LEAN_TYPE_Q4_K, LEAN_TYPE_Q5_K, LEAN_TYPE_Q6_K, LEAN_TYPE_Q2_K,
                                     LEAN_TYPE_Q3_K};
#define N_TYPES (sizeof all_types / sizeof all_types[0])

/* ---- activations ---- */

/* x (n): one of several shapes of data, by kind. */
static void fill_x(float *x, int64_t n, int kind) {
    const float scale = kind == 1 ? 1e-3f : kind == 2 ? 1e4f : kind == 3 ? 1e-30f : 1.0f;
    for (int64_t i = 0; i < n; i++) x[i] = normal() * scale;
    if (kind == 4) /* blocks of zeros, and an outlier */
        for (int64_t i = 0; i < n; i++) x[i] = (i / 32) % 3 == 1 ? 0.0f : i % 97 == 5 ? 300.0f : x[i];
}

static double act_value(lean_act_type act, const void *a, int64_t i) {
    if (act == LEAN_ACT_F32) return ((const float *)a)[i];
    if (act == LEAN_ACT_Q8_32) {
        const lean_q8_32 *b = (const lean_q8_32 *)a + i / 32;
        return (double)b->qs[i % 32] * b->d;
    }
    const lean_q8_k *b = (const lean_q8_k *)a + i / LEAN_QK_K;
    return (double)b->qs[i % LEAN_QK_K] * b->d;
}

static double act_scale(lean_act_type act, const void *a, int64_t i) {
    if (act == LEAN_ACT_Q8_32) return ((const lean_q8_32 *)a)[i / 32].d;
    if (act == LEAN_ACT_Q8_K) return ((const lean_q8_k *)a)[i / LEAN_QK_K].d;
    return 0;
}

static void test_quant_act(void) {
    const int64_t ns[] = {256, 512, 1536};
    for (int act = LEAN_ACT_Q8_32; act <= LEAN_ACT_Q8_K; act++) {
        for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
            for (int kind = 0; kind < 5; kind++) {
                const int64_t n = ns[ni];
                float *x = malloc(sizeof(float) * (size_t)n);
                fill_x(x, n, kind);
                void *q = malloc(lean_act_row_bytes((lean_act_type)act, n));
                lean_quantize_act((lean_act_type)act, x, q, n);
                int bad = 0, bad_range = 0, bad_sum = 0;
                for (int64_t i = 0; i < n; i++) {
                    const double d = act_scale((lean_act_type)act, q, i), v = act_value((lean_act_type)act, q, i);
                    if (!(fabs(x[i] - v) <= d / 2 + fabs(x[i]) * 0x1p-22)) bad++;
                }
                if (act == LEAN_ACT_Q8_32) {
                    const lean_q8_32 *b = q;
                    for (int64_t i = 0; i < n / 32; i++) {
                        int s = 0;
                        for (int j = 0; j < 32; j++) {
                            s += b[i].qs[j];
                            bad_range += b[i].qs[j] < -127;
                        }
                        bad_sum += s != b[i].s;
                    }
                } else {
                    const lean_q8_k *b = q;
                    for (int64_t i = 0; i < n / LEAN_QK_K; i++)
                        for (int g = 0; g < 16; g++) {
                            int s = 0;
                            for (int j = 0; j < 16; j++) {
                                s += b[i].qs[16 * g + j];
                                bad_range += b[i].qs[16 * g + j] < -127;
                            }
                            bad_sum += s != b[i].bsums[g];
                        }
                }
                CHECK(bad == 0 && bad_range == 0 && bad_sum == 0,
                      "act %d n %lld kind %d: %d values off, %d out of range, %d bad sums", act, (long long)n, kind,
                      bad, bad_range, bad_sum);
                free(x);
                free(q);
            }
        }
    }
    CHECK(lean_act_for(LEAN_TYPE_Q4_K) == LEAN_ACT_Q8_K && lean_act_for(LEAN_TYPE_Q5_1) == LEAN_ACT_Q8_32 &&
              lean_act_for(LEAN_TYPE_BF16) == LEAN_ACT_F32 && lean_act_for(5) == -1,
          "lean_act_for");
}

/* A table's quantize_act gives quant_act.c's bytes, for every kind of data and special values. */
static void test_quant_same(const lean_kernels *kt) {
    if (!kt->quantize_act) return;
    for (int act = LEAN_ACT_Q8_32; act <= LEAN_ACT_Q8_K; act++) {
        for (int kind = 0; kind < 6; kind++) {
            const int64_t n = 1536;
            float *x = malloc(sizeof(float) * (size_t)n);
            fill_x(x, n, kind % 5);
            if (kind == 5) x[3] = NAN, x[300] = INFINITY, x[600] = -INFINITY, x[900] = -0.0f;
            const size_t rb = lean_act_row_bytes((lean_act_type)act, n);
            uint8_t *a = malloc(rb), *b = malloc(rb);
            memset(a, 0x55, rb);
            memset(b, 0xaa, rb);
            lean_quantize_act((lean_act_type)act, x, a, n);
            kt->quantize_act((lean_act_type)act, x, b, n);
            CHECK(memcmp(a, b, rb) == 0, "%s quantize_act (act %d, kind %d) differs from quant_act.c's", kt->name, act,
                  kind);
            free(x), free(a), free(b);
        }
    }
}

/* ---- weights ---- */

static void put_f16(uint8_t *p, float f) {
    uint16_t h = lean_f32_to_f16(f);
    p[0] = (uint8_t)h;
    p[1] = (uint8_t)(h >> 8);
}

/* The byte ranges of a block that hold quants (zeroed to find the offsets/minimums), and the
 * f16 scale fields (set to sane values in random-byte blocks). */
typedef struct fmt_info {
    int q_lo, q_hi;   /* quant bytes [q_lo, q_hi) */
    int f16[2];       /* offsets of f16 fields, -1 for none */
} fmt_info;

static fmt_info info_of(uint32_t type) {
    switch (type) {
    case LEAN_TYPE_Q8_0: return (fmt_info){2, 34, {0, -1}};
    case LEAN_TYPE_Q4_0: return (fmt_info){2, 18, {0, -1}};
    case LEAN_TYPE_Q4_1: return (fmt_info){4, 20, {0, 2}};
    case LEAN_TYPE_Q5_0: return (fmt_info){2, 22, {0, -1}};
    case LEAN_TYPE_Q5_1: return (fmt_info){4, 24, {0, 2}};
    case LEAN_TYPE_Q4_K: return (fmt_info){16, 144, {0, 2}};
    case LEAN_TYPE_Q5_K: return (fmt_info){16, 176, {0, 2}};
    case LEAN_TYPE_Q6_K: return (fmt_info){0, 192, {208, -1}};
    case LEAN_TYPE_Q2_K: return (fmt_info){16, 80, {80, 82}};
    case LEAN_TYPE_Q3_K: return (fmt_info){0, 96, {108, -1}};
    default: return (fmt_info){0, 0, {-1, -1}};
    }
}

/* rows of a (rows, cols) matrix: even rows quantized from random floats (each row with its
 * own magnitude), odd rows random bytes with sane scales (extreme quants: Q8_0's -128, every
 * 6-bit scale and min, every Q6_K int8 scale). */
static uint8_t *make_weights(uint32_t type, int64_t rows, int64_t cols, size_t *row_bytes) {
    const lean_type_traits *tt = lean_type_traits_get(type);
    uint64_t rb = 0;
    lean_type_bytes(type, (uint64_t)cols, &rb);
    *row_bytes = (size_t)rb;
    uint8_t *w = malloc((size_t)rb * (size_t)rows);
    float *f = malloc(sizeof(float) * (size_t)cols);
    const fmt_info fi = info_of(type);
    for (int64_t r = 0; r < rows; r++) {
        uint8_t *row = w + (size_t)r * rb;
        const float mag = (float)pow(10.0, -2 + 3 * unit());
        for (int64_t i = 0; i < cols; i++) f[i] = normal() * mag;
        if (r % 2 == 0 || tt->block_elems == 1) {
            lean_quantizer_of(type)(f, row, cols);
            continue;
        }
        for (size_t i = 0; i < rb; i++) row[i] = (uint8_t)rng();
        for (int64_t b = 0; b < cols / tt->block_elems; b++)
            for (int k = 0; k < 2; k++)
                if (fi.f16[k] >= 0) put_f16(row + (size_t)b * tt->block_bytes + fi.f16[k], (float)(unit() - 0.5) * mag);
    }
    free(f);
    return w;
}

/* ---- matmul against the reference ---- */

typedef struct shape {
    int64_t rows;
    int32_t n_tok;
} shape;

static const shape shapes[] = {{1, 1}, {11, 1}, {3, 2}, {5, 3}, {8, 4}, {13, 5}, {17, 8}, {33, 9}, {4, 16}, {6, 7}, {2, 6}};

static void cols_for(uint32_t type, const int64_t **cols, int *n) {
    static const int64_t f[] = {1, 7, 8, 17, 33, 100, 576};
    /* past the row lengths up to which the x86 files unpack a batch's row tile once, so both
     * of their paths run: 4160 and 4352 past x86_avx2.c's CACHE_COLS 4096, 8224 and 8448 past
     * x86_avx512.c's CACHE_BLOCKS 256 (legacy) and CACHE_COLS 8192 (K-quants); the exact
     * kernels cache 4 rows up to 4096, one row up to 16384 (XCACHE_VECS): 16416 and 16640 past */
    static const int64_t legacy[] = {32, 96, 160, 576, 1536, 4160, 8224, 16416};
    static const int64_t k[] = {256, 768, 1536, 4352, 8448, 16640};
    const uint32_t be = lean_type_traits_get(type)->block_elems;
    if (be == 1) *cols = f, *n = 7;
    else if (be == 32) *cols = legacy, *n = 8;
    else *cols = k, *n = 6;
}

/* Outputs of got that differ from want's bits in rows [r0, r1), or were written outside them
 * (got starts NaN). */
static int range_diff(const float *got, const float *want, int64_t ldy, int32_t n_tok, int64_t r0, int64_t r1) {
    int diff = 0;
    for (int32_t t = 0; t < n_tok; t++)
        for (int64_t r = 0; r < ldy; r++) {
            const float a = got[t * ldy + r], b = want[t * ldy + r];
            diff += r >= r0 && r < r1 ? memcmp(&a, &b, sizeof a) != 0 : !isnan(a);
        }
    return diff;
}

/* matmul_packed on w's repacked copy against y, matmul's outputs of all rows and tokens (y2: scratch). */
static void check_packed(const lean_kernels *kt, uint32_t type, const uint8_t *w, size_t wrb, int64_t rows,
                         int64_t cols, const uint8_t *xq, size_t xrb, int32_t n_tok, const float *y, float *y2,
                         int64_t ldy) {
    const lean_matmul_fn mm = kt->matmul_packed[type];
    const char *tn = lean_type_traits_get(type)->name;
    CHECK(lean_repack_has(type), "%s: a packed %s kernel for a type without a repacked layout", kt->name, tn);
    const bool ks = type == LEAN_TYPE_Q4_K || type == LEAN_TYPE_Q5_K; /* else R16 */
    CHECK(lean_repack_bytes(type, rows, cols) ==
              (ks ? (uint64_t)rows * (wrb + (size_t)cols / 64) : (uint64_t)((rows + 15) / 16 * 16) * wrb),
          "%s: repacked bytes", tn);
    uint8_t *p = malloc((size_t)lean_repack_bytes(type, rows, cols));
    lean_repack(type, rows, cols, w, wrb, p);
    const size_t ny = (size_t)(ldy * n_tok);
    for (int rep = 0; rep < 4; rep++) { /* [0, rows), then random [16 k, r1) */
        const int64_t r0 = rep ? 16 * (int64_t)(rng() % (uint64_t)((rows + 15) / 16)) : 0;
        const int64_t r1 = rep ? r0 + 1 + (int64_t)(rng() % (uint64_t)(rows - r0)) : rows;
        for (size_t i = 0; i < ny; i++) y2[i] = NAN;
        if (rep == 3) /* one token per call */
            for (int32_t t = 0; t < n_tok; t++) mm(cols, p, wrb, r0, r1, xq + (size_t)t * xrb, xrb, 1, y2 + t * ldy, ldy);
        else
            mm(cols, p, wrb, r0, r1, xq, xrb, n_tok, y2, ldy);
        const int diff = range_diff(y2, y, ldy, n_tok, r0, r1);
        CHECK(diff == 0, "%s packed %s rows [%lld, %lld) of %lld, cols %lld, n_tok %d: %d outputs differ from matmul's",
              kt->name, tn, (long long)r0, (long long)r1, (long long)rows, (long long)cols, n_tok, diff);
    }
    free(p);
}

/* One table, one type, one shape, the default matmul or (exact) matmul_exact: accuracy, then
 * invariance. */
static void check_case(const lean_kernels *kt, bool exact, uint32_t type, int64_t rows, int64_t cols,
                       int32_t n_tok) {
    const lean_type_traits *tt = lean_type_traits_get(type);
    const lean_act_type act = exact ? LEAN_ACT_F32 : (lean_act_type)lean_act_for(type);
    const lean_matmul_fn mm = exact ? kt->matmul_exact[type] : kt->matmul[type];
    const char *kind = exact ? " exact" : "";
    size_t wrb;
    uint8_t *w = make_weights(type, rows, cols, &wrb);
    const size_t xrb = lean_act_row_bytes(act, cols);
    float *x = malloc(sizeof(float) * (size_t)(cols * n_tok));
    uint8_t *xq = malloc(xrb * (size_t)n_tok);
    for (int32_t t = 0; t < n_tok; t++) {
        fill_x(x + t * cols, cols, t % 5 == 4 ? 4 : t % 3);
        lean_quantize_act(act, x + t * cols, xq + (size_t)t * xrb, cols);
    }
    const int64_t ldy = rows + 3; /* a gap after each token's outputs */
    const size_t ny = (size_t)(ldy * n_tok);
    float *y = malloc(sizeof(float) * ny), *y2 = malloc(sizeof(float) * ny);
    for (size_t i = 0; i < ny; i++) y[i] = y2[i] = NAN;
    mm(cols, w, wrb, 0, rows, xq, xrb, n_tok, y, ldy);

    /* accuracy */
    float *wf = malloc(sizeof(float) * (size_t)cols), *zf = malloc(sizeof(float) * (size_t)cols);
    uint8_t *zrow = malloc(wrb);
    const fmt_info fi = info_of(type);
    double worst = 0, worst_x = 0;
    int64_t worst_r = 0, worst_t = 0;
    for (int64_t r = 0; r < rows; r++) {
        const uint8_t *row = w + (size_t)r * wrb;
        tt->dequant(row, wf, cols);
        memcpy(zrow, row, wrb);
        if (fi.q_hi > 0)
            for (int64_t b = 0; b < cols / tt->block_elems; b++)
                memset(zrow + (size_t)b * tt->block_bytes + fi.q_lo, 0, (size_t)(fi.q_hi - fi.q_lo));
        tt->dequant(zrow, zf, cols);
        if (fi.q_hi == 0) memset(zf, 0, sizeof(float) * (size_t)cols);
        for (int32_t t = 0; t < n_tok; t++) {
            const uint8_t *a = xq + (size_t)t * xrb;
            const float *xt = x + t * cols;
            double ref = 0, ref_x = 0, mag = 0, qbound = 0, wsum = 0;
            for (int64_t i = 0; i < cols; i++) {
                const double xh = act_value(act, a, i);
                ref += (double)wf[i] * xh;
                ref_x += (double)wf[i] * xt[i];
                mag += (fabs(wf[i]) + 2 * fabs(zf[i])) * fabs(xh);
                wsum += fabs(wf[i]);
                if ((i + 1) % (act == LEAN_ACT_Q8_K ? LEAN_QK_K : 32) == 0 || i + 1 == cols) {
                    qbound += act_scale(act, a, i) / 2 * wsum * (1 + 1e-5);
                    wsum = 0;
                }
            }
            const double tol = 4 * 0x1p-24 * ((double)cols / 16 + 8) * mag + 1e-35;
            const double got = y[t * ldy + r];
            const double e = fabs(got - ref) / tol, ex = fabs(got - ref_x) / (qbound + tol);
            if (!(e <= worst)) worst = e, worst_r = r, worst_t = t;
            if (!(ex <= worst_x)) worst_x = ex;
        }
    }
    CHECK(worst <= 1, "%s%s %s rows %lld cols %lld n_tok %d: y[%lld][%lld] is %.3g tolerances from the reference",
          kt->name, kind, tt->name, (long long)rows, (long long)cols, n_tok, (long long)worst_t, (long long)worst_r,
          worst);
    CHECK(worst_x <= 1, "%s%s %s cols %lld: %.3g x the activation-quantization bound from the float sum", kt->name,
          kind, tt->name, (long long)cols, worst_x);
    int outside = 0;
    for (int32_t t = 0; t < n_tok; t++)
        for (int64_t r = rows; r < ldy; r++) outside += !isnan(y[t * ldy + r]);
    CHECK(outside == 0, "%s%s %s: %d outputs written outside [r0, r1)", kt->name, kind, tt->name, outside);
    const lean_matmul_fn gen = exact ? lean_kernels_generic.matmul_exact[type] : lean_kernels_generic.matmul[type];
    if (kt->same_as_generic && mm != gen) {
        for (size_t i = 0; i < ny; i++) y2[i] = NAN;
        gen(cols, w, wrb, 0, rows, xq, xrb, n_tok, y2, ldy);
        CHECK(memcmp(y, y2, sizeof(float) * ny) == 0,
              "%s%s %s rows %lld cols %lld n_tok %d: not the generic table's bits", kt->name, kind, tt->name,
              (long long)rows, (long long)cols, n_tok);
    }

    /* invariance: one row and one token per call */
    for (int64_t r = 0; r < rows; r++)
        for (int32_t t = 0; t < n_tok; t++)
            mm(cols, w, wrb, r, r + 1, xq + (size_t)t * xrb, xrb, 1, y2 + t * ldy, ldy);
    CHECK(memcmp(y, y2, sizeof(float) * ny) == 0,
          "%s%s %s rows %lld cols %lld n_tok %d: one row/token per call differs", kt->name, kind, tt->name,
          (long long)rows, (long long)cols, n_tok);
    /* invariance: random row ranges, all tokens at once; untouched rows stay NaN */
    for (int rep = 0; rep < 3; rep++) {
        for (size_t i = 0; i < ny; i++) y2[i] = NAN;
        const int64_t r0 = (int64_t)(rng() % (uint64_t)rows), r1 = r0 + 1 + (int64_t)(rng() % (uint64_t)(rows - r0));
        mm(cols, w, wrb, r0, r1, xq, xrb, n_tok, y2, ldy);
        const int diff = range_diff(y2, y, ldy, n_tok, r0, r1);
        CHECK(diff == 0, "%s%s %s rows [%lld, %lld) of %lld, n_tok %d: %d outputs differ", kt->name, kind, tt->name,
              (long long)r0, (long long)r1, (long long)rows, n_tok, diff);
    }
    if (!exact && kt->matmul_packed[type]) check_packed(kt, type, w, wrb, rows, cols, xq, xrb, n_tok, y, y2, ldy);
    free(w), free(x), free(xq), free(y), free(y2), free(wf), free(zf), free(zrow);
}

/* Returns how many of the table's own kernels it ran (the ledger's variant lines, main). */
static int test_matmul(const lean_kernels *kt, bool exact) {
    int own = 0;
    for (size_t ti = 0; ti < N_TYPES; ti++) {
        const uint32_t type = all_types[ti];
        if (!(exact ? kt->matmul_exact : kt->matmul)[type]) { /* another table's stands in (lean_kernels_select) */
            printf("%s: no %s%s kernel of its own\n", kt->name, lean_type_name((int)type), exact ? " exact" : "");
            continue;
        }
        own++;
        const int64_t *cols;
        int n_cols;
        cols_for(type, &cols, &n_cols);
        for (int ci = 0; ci < n_cols; ci++)
            for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
                check_case(kt, exact, type, shapes[si].rows, cols[ci], shapes[si].n_tok);
    }
    return own;
}

/* ---- exact, with a scale that is not finite ----
 * A block whose f16 scale (or minimum) is +inf, -inf or NaN: matmul_exact's outputs must be of
 * the class the reference's weights give (NaN, +inf, -inf or finite). The reference makes (q - 8)
 * * inf an infinity, where a kernel that folds dequantization into fma(q, d, -8 d) gets inf - inf
 * = NaN (x86_avx2.c recomputes such outputs the reference's way: this holds it to that). Weights
 * quantized from 1.0 (a block's quants alike, so its infinities are of one sign), activations
 * positive; the batch path (6 tokens) and decode's (1 token a call). */
static int value_class(double v) { return isnan(v) ? 0 : isinf(v) ? (v > 0 ? 1 : 2) : 3; }

static void test_exact_nonfinite(const lean_kernels *kt) {
    static const float bad[] = {INFINITY, -INFINITY, NAN};
    const int64_t rows = 13; /* row 0 sane; then each bad value in each f16 field of block 1 */
    const int32_t n_tok = 6;
    for (size_t ti = 0; ti < N_TYPES; ti++) {
        const uint32_t type = all_types[ti];
        const lean_type_traits *tt = lean_type_traits_get(type);
        const fmt_info fi = info_of(type);
        const lean_matmul_fn mm = kt->matmul_exact[type];
        if (fi.f16[0] < 0 || !mm) continue;
        const int64_t cols = 3 * tt->block_elems;
        uint64_t rb = 0;
        lean_type_bytes(type, (uint64_t)cols, &rb);
        uint8_t *w = malloc((size_t)rb * (size_t)rows);
        float *f = malloc(sizeof(float) * (size_t)cols), *x = malloc(sizeof(float) * (size_t)(cols * n_tok));
        float *y = malloc(sizeof(float) * (size_t)(rows * n_tok)), *y1 = malloc(sizeof(float) * (size_t)(rows * n_tok));
        for (int64_t i = 0; i < cols; i++) f[i] = 1.0f;
        for (int64_t i = 0; i < cols * n_tok; i++) x[i] = (float)(0.5 + unit());
        for (int64_t r = 0; r < rows; r++) {
            uint8_t *row = w + (size_t)r * rb;
            lean_quantizer_of(type)(f, row, cols);
            const int k = (int)((r - 1) / 3) % 2, field = fi.f16[k] >= 0 ? fi.f16[k] : fi.f16[0];
            if (r > 0 && r < 7) put_f16(row + tt->block_bytes + field, bad[(r - 1) % 3]);
            if (r >= 7) put_f16(row + (size_t)(r % 3) * tt->block_bytes + field, bad[(r - 7) % 3]); /* any block */
        }
        mm(cols, w, rb, 0, rows, x, sizeof(float) * (size_t)cols, n_tok, y, rows);
        for (int32_t t = 0; t < n_tok; t++)
            mm(cols, w, rb, 0, rows, x + t * cols, sizeof(float) * (size_t)cols, 1, y1 + t * rows, rows);
        int wrong = 0;
        for (int64_t r = 0; r < rows; r++) {
            tt->dequant(w + (size_t)r * rb, f, cols);
            for (int32_t t = 0; t < n_tok; t++) {
                double ref = 0;
                for (int64_t i = 0; i < cols; i++) ref += (double)f[i] * x[t * cols + i];
                wrong += value_class(y[t * rows + r]) != value_class(ref);
                wrong += value_class(y1[t * rows + r]) != value_class(ref);
            }
        }
        CHECK(wrong == 0, "%s exact %s: %d outputs of a block with a non-finite scale unlike the reference's", kt->name,
              tt->name, wrong);
        free(w), free(f), free(x), free(y), free(y1);
    }
}

/* ---- attention ---- */

static void test_attention(const lean_kernels *kt) {
    const int32_t hds[] = {16, 32, 64, 80, 128};
    const int32_t ns[] = {1, 5, 32};
    for (size_t hi = 0; hi < sizeof hds / sizeof hds[0]; hi++) {
        for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
            const int32_t hd = hds[hi], n = ns[ni];
            const int64_t stride = 3 * hd + 5; /* rows of a wider cache, not aligned */
            float *q = malloc(sizeof(float) * (size_t)hd), *kv = malloc(sizeof(float) * (size_t)(stride * n));
            float *s = malloc(sizeof(float) * (size_t)n), *o = malloc(sizeof(float) * (size_t)hd);
            float *o0 = malloc(sizeof(float) * (size_t)hd), *p = malloc(sizeof(float) * (size_t)n);
            float *p2 = malloc(sizeof(float) * (size_t)(n > hd ? n : hd)); /* generic's outputs */
            for (int32_t i = 0; i < hd; i++) q[i] = normal(), o[i] = o0[i] = normal();
            for (int64_t i = 0; i < stride * n; i++) kv[i] = normal();
            for (int32_t j = 0; j < n; j++) p[j] = (float)unit();
            kt->attn_scores(q, kv + 1, stride, n, hd, s);
            if (kt->same_as_generic) {
                lean_kernels_generic.attn_scores(q, kv + 1, stride, n, hd, p2);
                CHECK(memcmp(s, p2, sizeof(float) * (size_t)n) == 0, "%s attn_scores hd %d n %d: not generic's bits",
                      kt->name, hd, n);
            }
            double worst = 0;
            for (int32_t j = 0; j < n; j++) {
                double ref = 0, mag = 0;
                for (int32_t i = 0; i < hd; i++) {
                    ref += (double)q[i] * kv[j * stride + 1 + i];
                    mag += fabs((double)q[i] * kv[j * stride + 1 + i]);
                }
                const double e = fabs(s[j] - ref) / (4 * 0x1p-24 * (hd / 8.0 + 8) * mag);
                if (!(e <= worst)) worst = e;
            }
            CHECK(worst <= 1, "%s attn_scores hd %d n %d: %.3g tolerances off", kt->name, hd, n, worst);
            const float c = (float)unit();
            kt->attn_accum(o, c, kv + 2, stride, p, n, hd);
            if (kt->same_as_generic) {
                memcpy(p2, o0, sizeof(float) * (size_t)hd);
                lean_kernels_generic.attn_accum(p2, c, kv + 2, stride, p, n, hd);
                CHECK(memcmp(o, p2, sizeof(float) * (size_t)hd) == 0, "%s attn_accum hd %d n %d: not generic's bits",
                      kt->name, hd, n);
            }
            worst = 0;
            for (int32_t i = 0; i < hd; i++) {
                double ref = (double)o0[i] * c, mag = fabs(ref);
                for (int32_t j = 0; j < n; j++) {
                    ref += (double)p[j] * kv[j * stride + 2 + i];
                    mag += fabs((double)p[j] * kv[j * stride + 2 + i]);
                }
                const double e = fabs(o[i] - ref) / (4 * 0x1p-24 * (n + 8) * mag);
                if (!(e <= worst)) worst = e;
            }
            CHECK(worst <= 1, "%s attn_accum hd %d n %d: %.3g tolerances off", kt->name, hd, n, worst);
            free(q), free(kv), free(s), free(o), free(o0), free(p), free(p2);
        }
    }
}

/* exp_sum and swiglu against double precision: within 1e-6 relative (expf is within 1 ulp,
 * the vector polynomials within 2; a few more roundings follow). */
static void test_exp(const lean_kernels *kt) {
    const int32_t ns[] = {1, 7, 8, 32, 37};
    for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
        const int32_t n = ns[ni];
        float s[64], g[64], u[64], g0[64];
        double want_sum = 0, worst = 0;
        const float m = 3.0f;
        for (int32_t i = 0; i < n; i++) {
            s[i] = m - (float)(40 * unit()); /* exponents in (-40, 0] */
            g0[i] = g[i] = (float)(60 * unit() - 30), u[i] = normal();
        }
        float s0[64];
        memcpy(s0, s, sizeof s);
        const double got_sum = kt->exp_sum(s, n, m);
        for (int32_t i = 0; i < n; i++) {
            const double e = exp((double)s0[i] - m);
            want_sum += e;
            worst = fmax(worst, fabs(s[i] - e) / (e + 1e-300));
        }
        CHECK(worst <= 1e-6 && fabs(got_sum - want_sum) <= 1e-6 * want_sum, "%s exp_sum n %d: %.3g relative", kt->name,
              n, fmax(worst, fabs(got_sum - want_sum) / want_sum));
        kt->swiglu(g, u, n);
        worst = 0;
        for (int32_t i = 0; i < n; i++) {
            const double want = g0[i] / (1 + exp(-(double)g0[i])) * u[i];
            worst = fmax(worst, fabs(g[i] - want) / (fabs(want) + 1e-30));
        }
        CHECK(worst <= 1e-6, "%s swiglu n %d: %.3g relative", kt->name, n, worst);
    }
}

/* ---- choosing ---- */

static void test_select(void) {
    lean_kernels k;
    memset(&k, 0, sizeof k);
    CHECK(lean_kernels_select("generic", &k) == 0 && !strcmp(k.name, "generic"), "select generic");
    CHECK(lean_kernels_select("no-such-isa", &k) == -1 && !strcmp(k.name, "generic"), "unknown name");
    CHECK(lean_kernels_select(NULL, &k) == 0, "select auto");
    const lean_kernels *avx2 = lean_kernels_avx2(), *avx512 = lean_kernels_avx512();
    const lean_kernels *neon = lean_kernels_neon(), *simd128 = lean_kernels_simd128();
    const lean_kernels *relaxed = lean_kernels_relaxed();
    const char *best = avx512    ? "avx512"
                       : avx2    ? "avx2"
                       : neon    ? "neon"
                       : relaxed ? "relaxed"
                       : simd128 ? "simd128"
                                 : "generic";
    CHECK(!strcmp(k.name, best), "auto chose %s, not %s", k.name, best);
    CHECK((lean_kernels_select("avx2", &k) == 0) == (avx2 != NULL), "select avx2");
    CHECK((lean_kernels_select("avx512", &k) == 0) == (avx512 != NULL), "select avx512");
    CHECK((lean_kernels_select("neon", &k) == 0) == (neon != NULL), "select neon");
    CHECK((lean_kernels_select("simd128", &k) == 0) == (simd128 != NULL), "select simd128");
    CHECK((lean_kernels_select("relaxed", &k) == 0) == (relaxed != NULL), "select relaxed");
#if defined(__aarch64__)
    CHECK(neon != NULL, "no neon table on aarch64");
#endif
#if defined(__wasm_simd128__)
    CHECK(simd128 != NULL, "no simd128 table in a simd128 build");
#endif
#if defined(__wasm_relaxed_simd__)
    CHECK(relaxed != NULL, "no relaxed table in a relaxed-simd build");
#endif
    if (relaxed && simd128 && lean_kernels_select("relaxed", &k) == 0) { /* its gaps come from simd128 */
        CHECK(k.matmul[LEAN_TYPE_F32] == simd128->matmul[LEAN_TYPE_F32] && k.attn_accum == simd128->attn_accum,
              "relaxed's gaps are not filled from simd128");
        CHECK(k.matmul[LEAN_TYPE_Q4_0] == relaxed->matmul[LEAN_TYPE_Q4_0] && relaxed->matmul[LEAN_TYPE_Q4_0],
              "relaxed has its own Q4_0 kernel");
        CHECK(k.matmul[LEAN_TYPE_Q8_0] == simd128->matmul[LEAN_TYPE_Q8_0], "relaxed's Q8_0 is simd128's");
    }
    const char *names[] = {"generic", "avx2", "avx512", "neon", "relaxed", "simd128"};
    for (int i = 0; i < 6; i++) {
        if (lean_kernels_select(names[i], &k) != 0) continue;
        int holes = !k.attn_scores || !k.attn_accum || !k.exp_sum || !k.swiglu || !k.quantize_act;
        for (size_t ti = 0; ti < N_TYPES; ti++)
            holes += (k.matmul[all_types[ti]] == NULL) + (k.matmul_exact[all_types[ti]] == NULL);
        CHECK(holes == 0, "the selected %s table has %d empty entries", names[i], holes);
    }
    if (avx512 && avx2 && lean_kernels_select("avx512", &k) == 0) /* its gaps come from avx2 */
        CHECK(k.matmul[LEAN_TYPE_F16] == avx2->matmul[LEAN_TYPE_F16] && k.swiglu == avx2->swiglu,
              "avx512's gaps are not filled from avx2");
    const lean_kernels *all[] = {&lean_kernels_generic, avx2, avx512, neon, relaxed, simd128};
    for (int i = 0; i < 6; i++) { /* a packed kernel comes with the matmul whose bits it gives */
        if (lean_kernels_select(names[i], &k) != 0) continue;
        int strays = 0;
        for (size_t ti = 0; ti < N_TYPES; ti++) {
            const uint32_t ty = all_types[ti];
            bool paired = !k.matmul_packed[ty];
            for (int j = 0; j < 6; j++)
                paired |= all[j] && all[j]->matmul[ty] == k.matmul[ty] && all[j]->matmul_packed[ty] == k.matmul_packed[ty];
            strays += !paired;
        }
        CHECK(strays == 0, "%s: %d packed kernels not of their matmul's table", names[i], strays);
    }
    for (int i = 0; i < 6; i++) /* the float formats' exact product is their matmul */
        if (lean_kernels_select(names[i], &k) == 0)
            CHECK(k.matmul_exact[LEAN_TYPE_F16] == k.matmul[LEAN_TYPE_F16] &&
                      k.matmul_exact[LEAN_TYPE_F32] == k.matmul[LEAN_TYPE_F32] &&
                      k.matmul_exact[LEAN_TYPE_BF16] == k.matmul[LEAN_TYPE_BF16],
                  "%s: exact float formats are not the matmul", names[i]);
    printf("kernel tables on this CPU: generic%s%s%s%s%s\n", avx2 ? ", avx2" : "", avx512 ? ", avx512" : "",
           neon ? ", neon" : "", relaxed ? ", relaxed" : "", simd128 ? ", simd128" : "");
}

#if defined(__wasm_simd128__)
static void test_wasm_f16(void) {
    int wrong = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        const uint8_t p[2] = {(uint8_t)h, (uint8_t)(h >> 8)};
        const float got = f16(p), want = lean_f16_to_f32((uint16_t)h);
        wrong += memcmp(&got, &want, sizeof got) != 0;
    }
    CHECK(wrong == 0, "wasm_shared.h f16: %d of 65536 halves not lean_f16_to_f32's bits", wrong);
}
#endif

/* The ledger (tests/run.sh's CPU_VARIANTS): "variant cpu-NAME: ran" for a table whose own
 * matmuls ran, cpu-NAME-exact for its own matmul_exact; NAME is the table's (backends.c's
 * cpu-NAME). NEON's 8-bit kernels without sdot (build-neon-v8) are a variant of their own. */
static void ledger_ran(const char *name, int own, int own_exact) {
#if defined(__aarch64__) && !defined(__ARM_FEATURE_DOTPROD)
    const char *v8 = !strcmp(name, "neon") ? "-v8" : "";
#else
    const char *v8 = "";
#endif
    if (own) printf("variant cpu-%s%s: ran\n", name, v8);
    if (own_exact) printf("variant cpu-%s-exact: ran\n", name); /* float: no sdot in it */
}

int main(void) {
#if defined(__wasm_simd128__)
    test_wasm_f16();
#endif
    test_quant_act();
    test_select();
    const lean_kernels *tables[] = {&lean_kernels_generic, lean_kernels_avx2(), lean_kernels_avx512(),
                                    lean_kernels_neon(), lean_kernels_relaxed(), lean_kernels_simd128()};
    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++) {
        if (!tables[i]) continue;
        lean_kernels k;
        CHECK(lean_kernels_select(tables[i]->name, &k) == 0, "select %s", tables[i]->name);
        test_quant_same(tables[i]);
        const int own = test_matmul(tables[i], false), own_exact = test_matmul(tables[i], true);
        test_exact_nonfinite(tables[i]);
        if (tables[i]->attn_scores) test_attention(tables[i]);
        if (tables[i]->exp_sum && tables[i]->swiglu) test_exp(tables[i]);
        ledger_ran(tables[i]->name, own, own_exact);
    }
#if defined(__x86_64__) /* the x86 tables this build has and this CPU cannot run */
    if (!tables[1]) printf("variant cpu-avx2: not here: the CPU lacks AVX2, FMA or F16C (cpuid)\n"
                           "variant cpu-avx2-exact: not here: the CPU lacks AVX2, FMA or F16C (cpuid)\n");
    if (!tables[2]) printf("variant cpu-avx512: not here: the CPU lacks AVX-512 F/BW/VL or VNNI (cpuid)\n"
                           "variant cpu-avx512-exact: not here: the CPU lacks AVX-512 F/BW/VL or VNNI (cpuid)\n");
#endif
    return test_finish("test_kernels");
}
