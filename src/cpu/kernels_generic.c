/* kernels_generic.c — the portable kernel table (kernels.h) and the one place that chooses
 * a table at start-up.
 *
 * What it does: for every weight format, y = W x over a row range and a batch of tokens,
 * computed on the quantized blocks: the integer dot product of a block's quants with the
 * 8-bit activations (quant_act.c), exact in int32, then one float multiply-add per block
 * with the two scales. F32 / F16 / BF16 rows are dotted with float activations in eight
 * interleaved partial sums. Plus the attention primitives (scores, softmax numerators,
 * weighted sum) and SwiGLU, with libm's expf.
 * It is the twin every ISA file is tested against, so each kernel reads like the format's
 * definition in core/formats.c: one block at a time, no tricks.
 * What it does not: threads (forward.c partitions rows), SIMD (the ISA files).
 *
 * Order of operations (fixed, whatever the row range or batch): per output, blocks in
 * index order, sum += (d_w * d_x) * (float)isum (+ the format's minimum term): the steps of
 * kernels_shared.h, which the tables that give these bits (arm_neon.c, wasm_simd128.c) share.
 *
 * Sections: helpers · F32 F16 BF16 · Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 · Q4_K Q5_K Q6_K · Q2_K Q3_K ·
 *           matmul drivers (and lean_matmul_tiles, kernels_shared.h's) · attention · table ·
 *           choosing a table
 */
#include "cpu/kernels_shared.h"
#include "core/formats_layout.h" /* load_f16, get_scale_q3_k */

#include <math.h>
#include <string.h>

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

/* ---- helpers ---- */

/* One output: a weight row (cols elements) . one activation row. */
typedef float (*dot_fn)(int64_t cols, const uint8_t *w, const void *x);

/* ---- F32, F16, BF16 (float activations) ----
 * Eight partial sums, lane i % 8 taking element i, combined pairwise at the end; cols need
 * not be a multiple of 8 (the tail goes to the lanes in order). */

static float combine8(const float *acc) {
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

static float dot_f32(int64_t cols, const uint8_t *w, const void *x) {
    const float *xf = x;
    float acc[8] = {0};
    for (int64_t i = 0; i < cols; i++) {
        float wi;
        memcpy(&wi, w + 4 * i, sizeof wi);
        acc[i % 8] += wi * xf[i];
    }
    return combine8(acc);
}

static float dot_f16(int64_t cols, const uint8_t *w, const void *x) {
    const float *xf = x;
    float acc[8] = {0};
    for (int64_t i = 0; i < cols; i++) acc[i % 8] += load_f16(w + 2 * i) * xf[i];
    return combine8(acc);
}

static float dot_bf16(int64_t cols, const uint8_t *w, const void *x) {
    const float *xf = x;
    float acc[8] = {0};
    for (int64_t i = 0; i < cols; i++)
        acc[i % 8] += lean_bf16_to_f32((uint16_t)(w[2 * i] | (w[2 * i + 1] << 8))) * xf[i];
    return combine8(acc);
}

/* ---- Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 (lean_q8_32 activations) ----
 * Element j of a 32-weight block: low 4 bits in qs[j % 16] (low nibble for j < 16), fifth
 * bit (Q5) bit j of qh (formats.c). With s = sum of the activation quants:
 *   Q4_0: sum (q - 8) a = sum q a - 8 s      Q5_0: sum q a - 16 s
 *   Q4_1 / Q5_1: w = q d + m, so sum w a dx = d dx sum q a + m dx s */

static float dot_q8_0(int64_t cols, const uint8_t *w, const void *x) {
    const lean_q8_32 *a = x;
    float sum = 0.0f;
    for (int64_t i = 0; i < cols / 32; i++, w += 34, a++) {
        const int8_t *q = (const int8_t *)(w + 2);
        int32_t isum = 0;
        for (int j = 0; j < 32; j++) isum += q[j] * a->qs[j];
        sum = lean_legacy_step(sum, load_f16(w), 0.0f, false, a, isum);
    }
    return sum;
}

/* sum over the block of q_j * a_j, q_j the 4 low bits in qs (16 bytes) plus, when qh is not
 * NULL, the fifth bits: the low nibbles are elements 0..15, the high nibbles 16..31. Plain
 * loops that compilers vectorize. */
static inline int32_t legacy_isum(const uint8_t *qs, const uint8_t *qh, const int8_t *a) {
    int32_t isum = 0;
    for (int j = 0; j < 16; j++) isum += (qs[j] & 0x0f) * a[j] + (qs[j] >> 4) * a[j + 16];
    if (!qh) return isum;
    const uint32_t h = (uint32_t)qh[0] | ((uint32_t)qh[1] << 8) | ((uint32_t)qh[2] << 16) | ((uint32_t)qh[3] << 24);
    int32_t hsum = 0; /* the fifth bits: 16 * the sum of a_j where bit j is set */
    for (int j = 0; j < 32; j++) hsum += (int32_t)((h >> j) & 1) * a[j];
    return isum + 16 * hsum;
}

static float dot_q4_0(int64_t cols, const uint8_t *w, const void *x) {
    const lean_q8_32 *a = x;
    float sum = 0.0f;
    for (int64_t i = 0; i < cols / 32; i++, w += 18, a++)
        sum = lean_legacy_step(sum, load_f16(w), 0.0f, false, a, legacy_isum(w + 2, NULL, a->qs) - 8 * a->s);
    return sum;
}

static float dot_q5_0(int64_t cols, const uint8_t *w, const void *x) {
    const lean_q8_32 *a = x;
    float sum = 0.0f;
    for (int64_t i = 0; i < cols / 32; i++, w += 22, a++)
        sum = lean_legacy_step(sum, load_f16(w), 0.0f, false, a, legacy_isum(w + 6, w + 2, a->qs) - 16 * a->s);
    return sum;
}

static float dot_q4_1(int64_t cols, const uint8_t *w, const void *x) {
    const lean_q8_32 *a = x;
    float sum = 0.0f;
    for (int64_t i = 0; i < cols / 32; i++, w += 20, a++)
        sum = lean_legacy_step(sum, load_f16(w), load_f16(w + 2), true, a, legacy_isum(w + 4, NULL, a->qs));
    return sum;
}

static float dot_q5_1(int64_t cols, const uint8_t *w, const void *x) {
    const lean_q8_32 *a = x;
    float sum = 0.0f;
    for (int64_t i = 0; i < cols / 32; i++, w += 24, a++)
        sum = lean_legacy_step(sum, load_f16(w), load_f16(w + 2), true, a, legacy_isum(w + 8, w + 4, a->qs));
    return sum;
}

/* ---- Q4_K, Q5_K, Q6_K (lean_q8_k activations) ----
 * Q4_K / Q5_K: sub-block j (32 weights) is d sc[j] q - dmin m[j], so per super-block
 *   sum w a dx = d dx sum_j sc[j] (sum q a) - dmin dx sum_j m[j] (sum a),
 * the second sum from bsums. Q6_K: 16 sub-blocks of 16, w = d sc[k] (q - 32). */

static float dot_k45(int64_t cols, const uint8_t *w, const void *x, int bits) {
    const lean_q8_k *a = x;
    const size_t block_bytes = bits == 5 ? LEAN_Q5_K_BYTES : LEAN_Q4_K_BYTES;
    float sum = 0.0f;
    for (int64_t i = 0; i < cols / LEAN_QK_K; i++, w += block_bytes, a++) {
        uint8_t sc[8], m[8];
        lean_k4_scales(w + 4, sc, m);
        const uint8_t *qh = w + 16; /* Q5_K only */
        const uint8_t *qs = bits == 5 ? w + 48 : w + 16;
        int32_t isum = 0, msum = 0;
        for (int j = 0; j < 8; j += 2, qs += 32) {
            int32_t s1 = 0, s2 = 0;
            for (int l = 0; l < 32; l++) {
                int h1 = bits == 5 ? ((qh[l] >> j) & 1) << 4 : 0;
                int h2 = bits == 5 ? ((qh[l] >> (j + 1)) & 1) << 4 : 0;
                s1 += ((qs[l] & 0x0f) | h1) * a->qs[32 * j + l];
                s2 += ((qs[l] >> 4) | h2) * a->qs[32 * j + 32 + l];
            }
            isum += sc[j] * s1 + sc[j + 1] * s2;
        }
        for (int j = 0; j < 8; j++) msum += m[j] * (a->bsums[2 * j] + a->bsums[2 * j + 1]);
        sum = lean_k_step(sum, load_f16(w), load_f16(w + 2), true, a->d, isum, msum);
    }
    return sum;
}

static float dot_q4_k(int64_t cols, const uint8_t *w, const void *x) { return dot_k45(cols, w, x, 4); }
static float dot_q5_k(int64_t cols, const uint8_t *w, const void *x) { return dot_k45(cols, w, x, 5); }

static float dot_q6_k(int64_t cols, const uint8_t *w, const void *x) {
    const lean_q8_k *a = x;
    float sum = 0.0f;
    for (int64_t i = 0; i < cols / LEAN_QK_K; i++, w += LEAN_Q6_K_BYTES, a++) {
        const int8_t *sc = (const int8_t *)(w + 192);
        int32_t isum = 0;
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = w + 64 * h, *qh = w + 128 + 32 * h;
            const int8_t *ax = a->qs + 128 * h;
            for (int g = 0; g < 2; g++) { /* sub-blocks g, g + 2, g + 4, g + 6 of this half */
                int32_t s0 = 0, s2 = 0, s4 = 0, s6 = 0;
                for (int l = 16 * g; l < 16 * g + 16; l++) {
                    s0 += ((ql[l] & 0x0f) | ((qh[l] & 3) << 4)) * ax[l];
                    s2 += ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) * ax[l + 32];
                    s4 += ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) * ax[l + 64];
                    s6 += ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) * ax[l + 96];
                }
                isum += sc[8 * h + g] * s0 + sc[8 * h + g + 2] * s2 + sc[8 * h + g + 4] * s4 + sc[8 * h + g + 6] * s6;
            }
        }
        int32_t osum = 0; /* the -32 offset: sum_k sc[k] * 32 * bsums[k] */
        for (int k = 0; k < 16; k++) osum += sc[k] * a->bsums[k];
        sum = lean_k_step(sum, load_f16(w + 208), 0.0f, false, a->d, isum - 32 * osum, 0);
    }
    return sum;
}

/* ---- Q2_K, Q3_K (lean_q8_k activations) ----
 * 16 sub-blocks of 16 (formats.c's table): sub-block s's quants dotted with the activations,
 * times its scale; Q2_K w = d sc[s] q - dmin m[s] (the second sum from bsums, as Q4_K),
 * Q3_K w = d s[s] q3 (q3 in [-4, 3], as Q6_K with its offset already in q3). */

/* weight e of a Q2_K / Q3_K block's 2-bit quants qs (plus Q3_K's third bit, from hm) */
static inline int q2_of(const uint8_t *qs, int e) { return (qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3; }
static inline int q3_of(const uint8_t *qs, const uint8_t *hm, int e) {
    return q2_of(qs, e) - ((hm[e % 32] >> (e / 32)) & 1 ? 0 : 4);
}

static float dot_q2_k(int64_t cols, const uint8_t *w, const void *x) {
    const lean_q8_k *a = x;
    float sum = 0.0f;
    for (int64_t i = 0; i < cols / LEAN_QK_K; i++, w += LEAN_Q2_K_BYTES, a++) {
        int32_t isum = 0, msum = 0;
        for (int s = 0; s < 16; s++) {
            int32_t qa = 0;
            for (int e = 16 * s; e < 16 * s + 16; e++) qa += q2_of(w + 16, e) * a->qs[e];
            isum += (w[s] & 0x0f) * qa;
            msum += (w[s] >> 4) * a->bsums[s];
        }
        sum = lean_k_step(sum, load_f16(w + 80), load_f16(w + 82), true, a->d, isum, msum);
    }
    return sum;
}

static float dot_q3_k(int64_t cols, const uint8_t *w, const void *x) {
    const lean_q8_k *a = x;
    float sum = 0.0f;
    for (int64_t i = 0; i < cols / LEAN_QK_K; i++, w += LEAN_Q3_K_BYTES, a++) {
        int32_t isum = 0;
        for (int s = 0; s < 16; s++) {
            int32_t qa = 0;
            for (int e = 16 * s; e < 16 * s + 16; e++) qa += q3_of(w + 32, w, e) * a->qs[e];
            isum += get_scale_q3_k(s, w + 96) * qa;
        }
        sum = lean_k_step(sum, load_f16(w + 108), 0.0f, false, a->d, isum, 0);
    }
    return sum;
}

/* ---- matmul drivers ----
 * Rows outer, tokens inner: a weight row is read from memory once per call and stays in
 * L1 for every token. */

static inline void matmul_rows(dot_fn dot, int64_t cols, const void *w, size_t w_row_bytes, int64_t r0,
                               int64_t r1, const void *x, size_t x_row_bytes, int32_t n_tok, float *y,
                               int64_t y_row_elems) {
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = (const uint8_t *)w + (size_t)r * w_row_bytes;
        for (int32_t t = 0; t < n_tok; t++)
            y[(int64_t)t * y_row_elems + r] = dot(cols, row, (const char *)x + (size_t)t * x_row_bytes);
    }
}

void lean_matmul_tiles(lean_tile_fn tile, LEAN_MATMUL_ARGS) {
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = (const uint8_t *)w + (size_t)r * w_row_bytes;
        for (int32_t t = 0; t < n_tok; t += LEAN_TILE_TOKENS) {
            const int32_t nt = n_tok - t < LEAN_TILE_TOKENS ? n_tok - t : LEAN_TILE_TOKENS;
            tile(cols, row, (const uint8_t *)x + (size_t)t * x_row_bytes, x_row_bytes, nt,
                 y + (int64_t)t * y_row_elems + r, y_row_elems);
        }
    }
}

static void matmul_f32(LEAN_MATMUL_ARGS) { matmul_rows(dot_f32, MATMUL_PASS); }
static void matmul_f16(LEAN_MATMUL_ARGS) { matmul_rows(dot_f16, MATMUL_PASS); }
static void matmul_bf16(LEAN_MATMUL_ARGS) { matmul_rows(dot_bf16, MATMUL_PASS); }
static void matmul_q8_0(LEAN_MATMUL_ARGS) { matmul_rows(dot_q8_0, MATMUL_PASS); }
static void matmul_q4_0(LEAN_MATMUL_ARGS) { matmul_rows(dot_q4_0, MATMUL_PASS); }
static void matmul_q4_1(LEAN_MATMUL_ARGS) { matmul_rows(dot_q4_1, MATMUL_PASS); }
static void matmul_q5_0(LEAN_MATMUL_ARGS) { matmul_rows(dot_q5_0, MATMUL_PASS); }
static void matmul_q5_1(LEAN_MATMUL_ARGS) { matmul_rows(dot_q5_1, MATMUL_PASS); }
static void matmul_q4_k(LEAN_MATMUL_ARGS) { matmul_rows(dot_q4_k, MATMUL_PASS); }
static void matmul_q5_k(LEAN_MATMUL_ARGS) { matmul_rows(dot_q5_k, MATMUL_PASS); }
static void matmul_q6_k(LEAN_MATMUL_ARGS) { matmul_rows(dot_q6_k, MATMUL_PASS); }
static void matmul_q2_k(LEAN_MATMUL_ARGS) { matmul_rows(dot_q2_k, MATMUL_PASS); }
static void matmul_q3_k(LEAN_MATMUL_ARGS) { matmul_rows(dot_q3_k, MATMUL_PASS); }

/* ---- exact: F32 activations (kernels.h, "exact") ----
 * A block at a time: its weights from the reference dequantizer (formats.c) into 32 or 256
 * floats on the stack, dotted with the float activations as dot_f32 does (element i into lane
 * i % 8; blocks are whole multiples of 8, so a lane sees the same elements as in one long
 * row). Tokens in tiles of EXACT_TILE (a CPU batch's default size), so a block is decoded once
 * per tile; an output's arithmetic does not depend on the tile. */

#define EXACT_TILE 64

static void matmul_exact_blocks(uint32_t type, LEAN_MATMUL_ARGS) {
    const lean_type_traits *tt = lean_type_traits_get(type);
    const int64_t be = tt->block_elems, nb = cols / be;
    float wb[LEAN_QK_K]; /* one block's weights */
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = (const uint8_t *)w + (size_t)r * w_row_bytes;
        for (int32_t t0 = 0; t0 < n_tok; t0 += EXACT_TILE) {
            const int32_t nt = n_tok - t0 < EXACT_TILE ? n_tok - t0 : EXACT_TILE;
            float acc[EXACT_TILE][8] = {{0}};
            for (int64_t b = 0; b < nb; b++) {
                tt->dequant(row + (size_t)b * tt->block_bytes, wb, be);
                for (int32_t t = 0; t < nt; t++) {
                    const float *xt = (const float *)((const char *)x + (size_t)(t0 + t) * x_row_bytes) + b * be;
                    for (int64_t j = 0; j < be; j++) acc[t][j % 8] += wb[j] * xt[j];
                }
            }
            for (int32_t t = 0; t < nt; t++) y[(int64_t)(t0 + t) * y_row_elems + r] = combine8(acc[t]);
        }
    }
}

#define EXACT_FORMAT(fmt, TYPE)                                                                      \
    static void matmul_exact_##fmt(LEAN_MATMUL_ARGS) { matmul_exact_blocks(TYPE, MATMUL_PASS); }
EXACT_FORMAT(q8_0, LEAN_TYPE_Q8_0)
EXACT_FORMAT(q4_0, LEAN_TYPE_Q4_0)
EXACT_FORMAT(q4_1, LEAN_TYPE_Q4_1)
EXACT_FORMAT(q5_0, LEAN_TYPE_Q5_0)
EXACT_FORMAT(q5_1, LEAN_TYPE_Q5_1)
EXACT_FORMAT(q4_k, LEAN_TYPE_Q4_K)
EXACT_FORMAT(q5_k, LEAN_TYPE_Q5_K)
EXACT_FORMAT(q6_k, LEAN_TYPE_Q6_K)
EXACT_FORMAT(q2_k, LEAN_TYPE_Q2_K)
EXACT_FORMAT(q3_k, LEAN_TYPE_Q3_K)

/* ---- attention ---- */

static void attn_scores(const float *q, const float *k, int64_t k_row_elems, int32_t n, int32_t hd, float *s) {
    for (int32_t j = 0; j < n; j++) {
        const float *kj = k + (int64_t)j * k_row_elems;
        float acc[8] = {0};
        for (int32_t i = 0; i < hd; i++) acc[i % 8] += q[i] * kj[i];
        s[j] = combine8(acc);
    }
}

static void attn_accum(float *o, float c, const float *v, int64_t v_row_elems, const float *p, int32_t n,
                       int32_t hd) {
    for (int32_t i = 0; i < hd; i++) o[i] *= c;
    for (int32_t j = 0; j < n; j++) {
        const float *vj = v + (int64_t)j * v_row_elems;
        for (int32_t i = 0; i < hd; i++) o[i] += p[j] * vj[i];
    }
}

/* libm's expf, one element at a time, summed in index order */
static float exp_sum(float *s, int32_t n, float m) {
    float sum = 0.0f;
    for (int32_t i = 0; i < n; i++) {
        s[i] = expf(s[i] - m);
        sum += s[i];
    }
    return sum;
}

static void swiglu(float *gate, const float *up, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        const float g = gate[i];
        gate[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

/* ---- table ---- */

const lean_kernels lean_kernels_generic = {
    .name = "generic",
    .same_as_generic = true,
    .matmul = {[LEAN_TYPE_F32] = matmul_f32, [LEAN_TYPE_F16] = matmul_f16, [LEAN_TYPE_BF16] = matmul_bf16,
               [LEAN_TYPE_Q8_0] = matmul_q8_0, [LEAN_TYPE_Q4_0] = matmul_q4_0, [LEAN_TYPE_Q4_1] = matmul_q4_1,
               [LEAN_TYPE_Q5_0] = matmul_q5_0, [LEAN_TYPE_Q5_1] = matmul_q5_1,
               [LEAN_TYPE_Q4_K] = matmul_q4_k, [LEAN_TYPE_Q5_K] = matmul_q5_k, [LEAN_TYPE_Q6_K] = matmul_q6_k,
               [LEAN_TYPE_Q2_K] = matmul_q2_k, [LEAN_TYPE_Q3_K] = matmul_q3_k},
    .matmul_exact = {[LEAN_TYPE_F32] = matmul_f32, [LEAN_TYPE_F16] = matmul_f16, [LEAN_TYPE_BF16] = matmul_bf16,
                     [LEAN_TYPE_Q8_0] = matmul_exact_q8_0, [LEAN_TYPE_Q4_0] = matmul_exact_q4_0,
                     [LEAN_TYPE_Q4_1] = matmul_exact_q4_1, [LEAN_TYPE_Q5_0] = matmul_exact_q5_0,
                     [LEAN_TYPE_Q5_1] = matmul_exact_q5_1, [LEAN_TYPE_Q4_K] = matmul_exact_q4_k,
                     [LEAN_TYPE_Q5_K] = matmul_exact_q5_k, [LEAN_TYPE_Q6_K] = matmul_exact_q6_k,
                     [LEAN_TYPE_Q2_K] = matmul_exact_q2_k, [LEAN_TYPE_Q3_K] = matmul_exact_q3_k},
    .attn_scores = attn_scores, .attn_accum = attn_accum, .exp_sum = exp_sum, .swiglu = swiglu,
    .quantize_act = lean_quantize_act,
};

/* ---- choosing a table ----
 * The candidates, best first; each ISA file's function says whether this CPU runs it. */

static const lean_kernels *generic_table(void) { return &lean_kernels_generic; }

static const lean_kernels *(*const candidates[])(void) = {lean_kernels_avx512, lean_kernels_avx2, lean_kernels_neon,
                                                          lean_kernels_relaxed, lean_kernels_simd128, generic_table};
#define N_CANDIDATES (sizeof candidates / sizeof candidates[0])

int lean_kernels_select(const char *name, lean_kernels *out) {
    const bool any = !name || !strcmp(name, "auto");
    for (size_t i = 0; i < N_CANDIDATES; i++) {
        const lean_kernels *t = candidates[i]();
        if (!t || (!any && strcmp(t->name, name) != 0)) continue;
        lean_kernels k = *t;
        for (size_t j = i + 1; j < N_CANDIDATES; j++) { /* the gaps, from the next ones it runs */
            const lean_kernels *next = candidates[j]();
            if (!next) continue;
            for (int ty = 0; ty < LEAN_N_TYPE_IDS; ty++) {
                if (!k.matmul[ty]) k.matmul[ty] = next->matmul[ty], k.matmul_packed[ty] = next->matmul_packed[ty];
                if (!k.matmul_exact[ty]) k.matmul_exact[ty] = next->matmul_exact[ty];
            }
            if (!k.attn_scores) k.attn_scores = next->attn_scores;
            if (!k.attn_accum) k.attn_accum = next->attn_accum;
            if (!k.quantize_act) k.quantize_act = next->quantize_act;
            if (!k.exp_sum) k.exp_sum = next->exp_sum;
            if (!k.swiglu) k.swiglu = next->swiglu;
        }
        for (int ty = 0; ty < LEAN_N_TYPE_IDS; ty++) /* the float formats: the same product */
            if (lean_act_for((uint32_t)ty) == LEAN_ACT_F32) k.matmul_exact[ty] = k.matmul[ty];
        *out = k;
        return 0;
    }
    return -1;
}
