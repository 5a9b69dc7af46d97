/* wasm_simd128.c — the kernel table (kernels.h) for wasm32 with 128-bit SIMD (simd128).
 *
 * Chosen at compile time: the wasm build passes -msimd128 (Makefile WASM_SIMD) and this file
 * is compiled only where __wasm_simd128__ is defined; elsewhere it is the stub at the end. A
 * run-time choice is not possible in wasm: a module holding one SIMD instruction fails to
 * validate as a whole on an engine without SIMD, so a per-function target attribute would buy
 * no fallback. Every browser with WebGPU, and the Node versions the tests use (18, 20), run
 * simd128; `make wasm WASM_SIMD=` builds a scalar module (the generic table) for engines that
 * do not. The relaxed-SIMD build (`make wasm-relaxed`) puts wasm_relaxed.c's table before this
 * one; its gaps are filled from here.
 *
 * What it does: the matmuls of every weight format (the exact ones, float activations, too:
 * kernels.h "exact") and the attention primitives, giving the generic table's bits: each
 * output's float operations are the generic kernel's, in its order
 * (lane i of 8 partial sums for the float formats, then its pairwise combination; per block
 * sum += (d_w * d_x) * float(isum), kernels_shared.h's steps; simd128 has no FMA); only the
 * integer block sums, exact, are computed another way. What it does not: exp_sum, SwiGLU
 * (libm's expf, from the generic table) and the activation quantizer (quant_act.c's, also
 * generic's) — lean_kernels_select fills them.
 *
 * Integer block sums: the weights are unpacked once per row (K-quants: four rows, k_tile4) and
 * tile of tokens into int16 lanes in element order, the format's offset subtracted (Q4_0 q - 8,
 * Q5_0 q - 16, Q6_K q - 32)
 * and, for the K-quants, the sub-block scale multiplied in (|q sc| <= 31 * 63 (Q5_K),
 * 32 * 128 (Q6_K), 4 * 32 (Q3_K): int16); each token's int8 activations are widened to int16 and
 * i32x4.dot_i16x8_s sums the products in pairs into 4 int32 lanes (|sum| < 2^27 per
 * super-block: no overflow), added across lanes per block.
 *
 * Sections: helpers · F32 F16 BF16 · legacy formats · K-quants · exact · attention · table
 */
#include "cpu/kernels_shared.h"

#if defined(__wasm_simd128__)

#include "cpu/wasm_shared.h"

#include <string.h>

/* ---- helpers ---- */

/* sum_i q[i] a[i] over 16 * n16 elements: q int16 lanes (n16 * 2 vectors), a int8. */
INLINE int32_t dot_q_a(const v128_t *q, const int8_t *a, int n16) {
    v128_t s = wasm_i32x4_splat(0);
    for (int k = 0; k < n16; k++) {
        const v128_t av = wasm_v128_load(a + 16 * k);
        s = wasm_i32x4_add(s, wasm_i32x4_dot_i16x8(q[2 * k], wasm_i16x8_extend_low_i8x16(av)));
        s = wasm_i32x4_add(s, wasm_i32x4_dot_i16x8(q[2 * k + 1], wasm_i16x8_extend_high_i8x16(av)));
    }
    return hsum_i32(s);
}

/* 16 int8 lanes -> 2 vectors of 8 int16 lanes */
INLINE void widen(v128_t *dst, v128_t b) {
    dst[0] = wasm_i16x8_extend_low_i8x16(b);
    dst[1] = wasm_i16x8_extend_high_i8x16(b);
}

/* the same, each times scale (exact: see the top) */
INLINE void widen_scaled(v128_t *dst, v128_t b, int16_t scale) {
    const v128_t s = wasm_i16x8_splat(scale);
    dst[0] = wasm_i16x8_mul(wasm_i16x8_extend_low_i8x16(b), s);
    dst[1] = wasm_i16x8_mul(wasm_i16x8_extend_high_i8x16(b), s);
}

/* ---- F32, F16, BF16 (float activations) ----
 * The generic kernel's 8 partial sums as two vectors: lo holds lanes 0..3 (elements 8k..8k+3),
 * hi lanes 4..7; the tail is zero-padded, which adds +0 to lanes the generic kernel leaves
 * alone (a sum that starts at +0 is never -0, so that changes no bit). */

enum { W_F32, W_F16, W_BF16 };

/* 4 weights of format f at p as floats */
INLINE v128_t load_w4(int f, const uint8_t *p) {
    if (f == W_F32) return wasm_v128_load(p);
    const v128_t h = wasm_u32x4_load16x4(p);
    return f == W_F16 ? f16x4(h) : wasm_i32x4_shl(h, 16);
}

/* Elements c .. c + 8 of a row: 8 weights (zero-padded past cols) into w[0..1], as floats. */
INLINE void load_w8(int f, const uint8_t *row, int64_t cols, int64_t c, v128_t *wv) {
    const int eb = f == W_F32 ? 4 : 2;
    if (cols - c >= 8) {
        wv[0] = load_w4(f, row + eb * c), wv[1] = load_w4(f, row + eb * (c + 4));
        return;
    }
    uint8_t tmp[32] = {0};
    memcpy(tmp, row + eb * c, (size_t)(eb * (cols - c)));
    wv[0] = load_w4(f, tmp), wv[1] = load_w4(f, tmp + 4 * eb);
}

INLINE void load_x8(const float *x, int64_t cols, int64_t c, v128_t *xv) {
    if (cols - c >= 8) {
        xv[0] = wasm_v128_load(x + c), xv[1] = wasm_v128_load(x + c + 4);
        return;
    }
    float tmp[8] = {0};
    memcpy(tmp, x + c, sizeof(float) * (size_t)(cols - c));
    xv[0] = wasm_v128_load(tmp), xv[1] = wasm_v128_load(tmp + 4);
}

/* kernels_generic.c's combine8 of the lanes lo (0..3) and hi (4..7) */
INLINE float combine8(v128_t lo, v128_t hi) {
    const v128_t s = wasm_f32x4_add(lo, hi);
    return (wasm_f32x4_extract_lane(s, 0) + wasm_f32x4_extract_lane(s, 1)) +
           (wasm_f32x4_extract_lane(s, 2) + wasm_f32x4_extract_lane(s, 3));
}

INLINE void float_tile(int f, TILE_ARGS) {
    v128_t lo[LEAN_TILE_TOKENS], hi[LEAN_TILE_TOKENS];
    for (int j = 0; j < nt; j++) lo[j] = hi[j] = wasm_f32x4_splat(0.0f);
    for (int64_t c = 0; c < cols; c += 8) {
        v128_t wv[2], xv[2];
        load_w8(f, w, cols, c, wv);
        for (int j = 0; j < nt; j++) {
            load_x8((const float *)(x + (size_t)j * xrb), cols, c, xv);
            lo[j] = wasm_f32x4_add(lo[j], wasm_f32x4_mul(wv[0], xv[0]));
            hi[j] = wasm_f32x4_add(hi[j], wasm_f32x4_mul(wv[1], xv[1]));
        }
    }
    for (int j = 0; j < nt; j++) y[j * ldy] = combine8(lo[j], hi[j]);
}

/* ---- Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 (lean_q8_32 activations; layouts: wasm_shared.h) ---- */

typedef struct lblock {
    v128_t q[4]; /* the 32 weight quants, offset subtracted, as int16 */
    float d, m;  /* scale; minimum (_1 formats) */
} lblock;

/* A block's 32 quants as int8, the format's offset subtracted: elements 0..15 -> *lo, 16..31 -> *hi. */
INLINE void legacy_quants(int f, const uint8_t *b, v128_t *lo, v128_t *hi) {
    if (f == L_Q8_0) {
        *lo = wasm_v128_load(b + 2), *hi = wasm_v128_load(b + 18);
        return;
    }
    v128_t l, h;
    legacy_raw(f, b, &l, &h);
    const v128_t off = wasm_i8x16_splat((int8_t)legacy_offset(f));
    *lo = wasm_i8x16_sub(l, off), *hi = wasm_i8x16_sub(h, off);
}

/* A block's 32 quants as int16 lanes, the format's offset subtracted, except Q4_0's: its quants
 * are kept raw (in [0, 15]) and in int16 lanes straight from the bytes read as int16 (4 masks
 * and shifts, where widening int8 takes 4 extends and the offset 2 subtractions): q[0] elements
 * 0, 2 .. 14, q[1] 1, 3 .. 15, q[2] 16, 18 .. 30, q[3] 17, 19 .. 31. legacy_a16 puts the
 * activations in that order and the caller takes the offset out as 8 a->s: the same integer
 * sum. */
INLINE void legacy_q16(int f, const uint8_t *b, v128_t q[4]) {
    if (f == L_Q4_0) {
        const v128_t r = wasm_v128_load(b + 2), m = wasm_i16x8_splat(0x0f);
        q[0] = wasm_v128_and(r, m), q[1] = wasm_v128_and(wasm_u16x8_shr(r, 8), m);
        q[2] = wasm_v128_and(wasm_u16x8_shr(r, 4), m), q[3] = wasm_u16x8_shr(r, 12);
        return;
    }
    v128_t lo, hi; /* elements 0..15, 16..31 */
    legacy_quants(f, b, &lo, &hi);
    widen(q, lo), widen(q + 2, hi);
}

INLINE lblock legacy_unpack(int f, const uint8_t *b) {
    lblock u;
    u.d = f16(b);
    u.m = f == L_Q4_1 || f == L_Q5_1 ? f16(b + 2) : 0.0f;
    legacy_q16(f, b, u.q);
    return u;
}

/* The activations of a block as int16 lanes in the order legacy_q16 gives the quants */
INLINE void legacy_a16(int f, const int8_t *a, v128_t x[4]) {
    const v128_t a0 = wasm_v128_load(a), a1 = wasm_v128_load(a + 16);
    if (f == L_Q4_0) { /* the int8 pairs read as int16: even elements by shifts, odd by one */
        x[0] = wasm_i16x8_shr(wasm_i16x8_shl(a0, 8), 8), x[1] = wasm_i16x8_shr(a0, 8);
        x[2] = wasm_i16x8_shr(wasm_i16x8_shl(a1, 8), 8), x[3] = wasm_i16x8_shr(a1, 8);
        return;
    }
    widen(x, a0), widen(x + 2, a1);
}

/* q . x of legacy_q16's and legacy_a16's lanes, as 4 lanes not yet added */
INLINE v128_t dot16(const v128_t q[4], const v128_t x[4]) {
    return wasm_i32x4_add(wasm_i32x4_add(wasm_i32x4_dot_i16x8(q[0], x[0]), wasm_i32x4_dot_i16x8(q[1], x[1])),
                          wasm_i32x4_add(wasm_i32x4_dot_i16x8(q[2], x[2]), wasm_i32x4_dot_i16x8(q[3], x[3])));
}

/* A block's integer sum q . a as 4 lanes not yet added (Q4_0: raw quants, legacy_q16's
 * order; the caller takes the offset out) */
INLINE v128_t block_dot(int f, const v128_t *q, const int8_t *a) {
    v128_t x[4];
    legacy_a16(f, a, x);
    return dot16(q, x);
}

/* For legacy_tile4: a block's quants (legacy_q16), and the block dots of 4 rows' with a, the
 * activations widened once for the four */
INLINE void legacy_prep(int f, const uint8_t *blk, v128_t q[4]) { legacy_q16(f, blk, q); }

INLINE void legacy_dot4(int f, const v128_t q[4][4], const lean_q8_32 *a, v128_t s[4]) {
    v128_t x[4];
    legacy_a16(f, a->qs, x);
    for (int k = 0; k < 4; k++) s[k] = dot16(q[k], x);
}

LEGACY_TILE4_FAMILY(f == L_Q4_0 ? 8 : 0)

/* Blocks 4 at a time: their integer sums reduced together and lean_legacy_step's float
 * operations done in lanes, one block a lane, the same operations in the same order; only the
 * additions into the sum stay scalar, in block order. So the bits are lean_legacy_step's. */
INLINE float legacy_quad(int f, float sum, const lblock u[4], bool has_min, const lean_q8_32 *a) {
    v128_t s[4];
    for (int k = 0; k < 4; k++) s[k] = block_dot(f, u[k].q, a[k].qs);
    v128_t is = hsum4_i32(s);
    if (f == L_Q4_0) is = wasm_i32x4_sub(is, wasm_i32x4_shl(wasm_i32x4_make(a[0].s, a[1].s, a[2].s, a[3].s), 3));
    const v128_t dx = wasm_f32x4_make(a[0].d, a[1].d, a[2].d, a[3].d);
    v128_t t = wasm_f32x4_mul(wasm_f32x4_mul(wasm_f32x4_make(u[0].d, u[1].d, u[2].d, u[3].d), dx),
                              wasm_f32x4_convert_i32x4(is));
    if (has_min) {
        const v128_t sx = wasm_f32x4_convert_i32x4(wasm_i32x4_make(a[0].s, a[1].s, a[2].s, a[3].s));
        t = wasm_f32x4_add(t, wasm_f32x4_mul(wasm_f32x4_make(u[0].m, u[1].m, u[2].m, u[3].m), wasm_f32x4_mul(dx, sx)));
    }
    sum += wasm_f32x4_extract_lane(t, 0);
    sum += wasm_f32x4_extract_lane(t, 1);
    sum += wasm_f32x4_extract_lane(t, 2);
    return sum + wasm_f32x4_extract_lane(t, 3);
}

/* FN_N(f, NT, ...) with the tile's token count nt as the constant NT (1 .. LEAN_TILE_TOKENS) */
#define BY_NT(FN_N)                                                                                  \
    switch (nt) {                                                                                    \
    case 1: FN_N(f, 1, cols, w, x, xrb, y, ldy); break;                                              \
    case 2: FN_N(f, 2, cols, w, x, xrb, y, ldy); break;                                              \
    case 3: FN_N(f, 3, cols, w, x, xrb, y, ldy); break;                                              \
    default: FN_N(f, 4, cols, w, x, xrb, y, ldy); break;                                             \
    }

/* NT, the tile's token count, a constant (legacy_tile's switch), so that sum[] and u[] are
 * wasm locals, not linear memory (as X_TILE_FAMILY's x_tile_n) */
INLINE void legacy_tile_n(int f, int NT, int64_t cols, const uint8_t *w, const uint8_t *x, size_t xrb, float *y,
                          int64_t ldy) {
    const bool has_min = f == L_Q4_1 || f == L_Q5_1;
    float sum[LEAN_TILE_TOKENS] = {0};
    int64_t b = 0;
    for (; b + 4 <= cols / 32; b += 4) {
        lblock u[4];
        for (int k = 0; k < 4; k++) u[k] = legacy_unpack(f, w + (size_t)(b + k) * legacy_bytes[f]);
        for (int j = 0; j < NT; j++)
            sum[j] = legacy_quad(f, sum[j], u, has_min, (const lean_q8_32 *)(x + (size_t)j * xrb) + b);
    }
    for (; b < cols / 32; b++) {
        const lblock u = legacy_unpack(f, w + (size_t)b * legacy_bytes[f]);
        for (int j = 0; j < NT; j++) {
            const lean_q8_32 *a = (const lean_q8_32 *)(x + (size_t)j * xrb) + b;
            const int32_t isum = hsum_i32(block_dot(f, u.q, a->qs)) - (f == L_Q4_0 ? 8 * a->s : 0);
            sum[j] = lean_legacy_step(sum[j], u.d, u.m, has_min, a, isum);
        }
    }
    for (int j = 0; j < NT; j++) y[j * ldy] = sum[j];
}

INLINE void legacy_tile(int f, TILE_ARGS) { BY_NT(legacy_tile_n); }

/* ---- Q4_K, Q5_K, Q6_K, Q2_K, Q3_K (lean_q8_k activations) ----
 * A super-block is unpacked into 32 int16 vectors in element order, each weight q sc[sub-block]
 * (Q6_K: (q - 32) sc; Q3_K: q3 s). Then isum = sum q a; Q4_K / Q5_K also msum = sum_j m[j] (sum
 * of a over sub-block j) = [m0 m0 m1 m1 .. m7 m7] . bsums, Q2_K msum = [m0 .. m15] . bsums. The
 * float step is the generic kernel's. */

typedef struct kblock {
    v128_t q[32];  /* 256 scaled weights, int16 */
    v128_t m16[2]; /* Q4_K / Q5_K: the mins, each twice; Q2_K: the 16 mins; int16 */
    float d, dmin;
} kblock;

/* Q4_K / Q5_K (layout: wasm_shared.h, k45_raw) */
INLINE void k45_unpack(int f, const uint8_t *b, kblock *u) {
    uint8_t sc[8], m[8];
    lean_k4_scales(b + 4, sc, m);
    u->d = f16(b), u->dmin = f16(b + 2);
    for (int j = 0; j < 8; j += 2) {
        for (int half = 0; half < 2; half++) {
            v128_t lo, hi;
            k45_raw(f, b, j, half, &lo, &hi);
            widen_scaled(u->q + 4 * j + 2 * half, lo, sc[j]);
            widen_scaled(u->q + 4 * (j + 1) + 2 * half, hi, sc[j + 1]);
        }
    }
    int16_t mins[16];
    for (int j = 0; j < 8; j++) mins[2 * j] = mins[2 * j + 1] = m[j];
    u->m16[0] = wasm_v128_load(mins), u->m16[1] = wasm_v128_load(mins + 8);
}

/* Q6_K (layout: wasm_shared.h, k6_raw) */
INLINE void k6_unpack(const uint8_t *b, kblock *u) {
    const int8_t *sc = (const int8_t *)(b + 192);
    const v128_t off = wasm_i8x16_splat(32);
    u->d = f16(b + 208), u->dmin = 0.0f;
    for (int h = 0; h < 2; h++) {
        for (int g = 0; g < 2; g++) {
            v128_t e[4];
            k6_raw(b, h, g, e);
            for (int k = 0; k < 4; k++) { /* sub-block 8 h + 2 k + g */
                const int s = 8 * h + 2 * k + g;
                widen_scaled(u->q + 2 * s, wasm_i8x16_sub(e[k], off), sc[s]);
            }
        }
    }
}

/* Q2_K, Q3_K (layout: wasm_shared.h, k23_raw) */
INLINE void k23_unpack(int f, const uint8_t *b, kblock *u) {
    for (int c = 0; c < 8; c++)
        for (int p = 0; p < 2; p++) {
            const v128_t q = k23_raw(f, b, c, p);
            widen_scaled(u->q + 2 * (2 * c + p), f == K_Q3 ? wasm_i8x16_sub(q, wasm_i8x16_splat(4)) : q,
                         (int16_t)k23_scale(f, b, 2 * c + p));
        }
    if (f == K_Q2) u->d = f16(b + 80), u->dmin = f16(b + 82), q2_mins16(b, u->m16);
    else u->d = f16(b + 108), u->dmin = 0.0f;
}

/* msum = m16 . bsums */
INLINE int32_t k_msum(const kblock *u, const lean_q8_k *a) {
    const v128_t bs0 = wasm_v128_load(a->bsums), bs1 = wasm_v128_load(a->bsums + 8);
    return hsum_i32(wasm_i32x4_add(wasm_i32x4_dot_i16x8(u->m16[0], bs0), wasm_i32x4_dot_i16x8(u->m16[1], bs1)));
}

INLINE void k_unpack(int f, const uint8_t *blk, kblock *u) {
    if (f == K_Q6) k6_unpack(blk, u);
    else if (f == K_Q2 || f == K_Q3) k23_unpack(f, blk, u);
    else k45_unpack(f, blk, u);
}

/* NT a constant, as legacy_tile_n */
INLINE void k_tile_n(int f, int NT, int64_t cols, const uint8_t *w, const uint8_t *x, size_t xrb, float *y,
                     int64_t ldy) {
    float sum[LEAN_TILE_TOKENS] = {0};
    for (int64_t b = 0; b < cols / LEAN_QK_K; b++) {
        kblock u;
        k_unpack(f, w + (size_t)b * kblock_bytes[f], &u);
        for (int j = 0; j < NT; j++) {
            const lean_q8_k *a = (const lean_q8_k *)(x + (size_t)j * xrb) + b;
            const int32_t isum = dot_q_a(u.q, a->qs, 16);
            const int32_t msum = k_has_min(f) ? k_msum(&u, a) : 0;
            sum[j] = lean_k_step(sum[j], u.d, u.dmin, k_has_min(f), a->d, isum, msum);
        }
    }
    for (int j = 0; j < NT; j++) y[j * ldy] = sum[j];
}

INLINE void k_tile(int f, TILE_ARGS) { BY_NT(k_tile_n); }

/* Rows r .. r + 3 x NT tokens -> y[j ldy + 0..3] (TILE4_FORMAT's k_tile4), as legacy_tile4:
 * the four rows' super-blocks unpacked once for the NT tokens, each token's activations
 * widened once for the four rows, their sums reduced together and lean_k_step in lanes
 * (k_step4) */
INLINE void k_tile4_n(int f, int NT, int64_t cols, const uint8_t *w, size_t wrb, const uint8_t *x, size_t xrb,
                      float *y, int64_t ldy) {
    v128_t sum[LEAN_TILE_TOKENS];
    for (int j = 0; j < NT; j++) sum[j] = wasm_f32x4_splat(0.0f);
    for (int64_t b = 0; b < cols / LEAN_QK_K; b++) {
        kblock u[4];
        for (int k = 0; k < 4; k++) k_unpack(f, w + k * wrb + (size_t)b * kblock_bytes[f], &u[k]);
        const v128_t dw = wasm_f32x4_make(u[0].d, u[1].d, u[2].d, u[3].d);
        const v128_t mw = wasm_f32x4_make(u[0].dmin, u[1].dmin, u[2].dmin, u[3].dmin);
        for (int j = 0; j < NT; j++) {
            const lean_q8_k *a = (const lean_q8_k *)(x + (size_t)j * xrb) + b;
            v128_t s[4], m[4];
            for (int k = 0; k < 4; k++) s[k] = wasm_i32x4_splat(0);
            for (int c = 0; c < 16; c++) {
                v128_t xa[2];
                widen(xa, wasm_v128_load(a->qs + 16 * c));
                for (int k = 0; k < 4; k++)
                    s[k] = wasm_i32x4_add(s[k], wasm_i32x4_add(wasm_i32x4_dot_i16x8(u[k].q[2 * c], xa[0]),
                                                               wasm_i32x4_dot_i16x8(u[k].q[2 * c + 1], xa[1])));
            }
            v128_t ms = wasm_i32x4_splat(0);
            if (k_has_min(f)) {
                const v128_t bs0 = wasm_v128_load(a->bsums), bs1 = wasm_v128_load(a->bsums + 8);
                for (int k = 0; k < 4; k++)
                    m[k] = wasm_i32x4_add(wasm_i32x4_dot_i16x8(u[k].m16[0], bs0), wasm_i32x4_dot_i16x8(u[k].m16[1], bs1));
                ms = hsum4_i32(m);
            }
            sum[j] = k_step4(f, sum[j], dw, mw, a->d, hsum4_i32(s), ms);
        }
    }
    for (int j = 0; j < NT; j++) wasm_v128_store(y + j * ldy, sum[j]);
}

TILE4_BY_NT(k)

/* ---- exact: F32 activations (kernels.h "exact") ----
 * The generic exact kernel's operations in its order, so its bits: each weight is the
 * reference dequantizer's float (formats.c), made by its operations (Q8_0 q d; Q4_0 / Q5_0
 * (q - z) d; Q4_1 / Q5_1 q d + m; Q4_K / Q5_K / Q2_K (d sc) q - dmin m; Q6_K (d sc) (q - 32);
 * Q3_K (d s) q3) 4 at a
 * time from the int8 quants widened and converted (exact); its product with the activation is
 * added into lane e % 8 of the 8 partial sums (lo: lanes 0..3, hi: 4..7), element by element,
 * a multiply then an add (simd128 has no FMA); then combine8. A block is made 32 weights at
 * a time (a chunk: a legacy block, a Q4_K / Q5_K sub-block, Q6_K's, Q2_K's or Q3_K's weights
 * 32c .. 32c + 31, two sub-blocks) once per tile of up to 4 tokens. */

/* int32 lanes in [-2^22, 2^22) -> floats, exactly: the bits of 1.5 * 2^23 + i, less 1.5 * 2^23.
 * (LLVM 14 folds an extend then f32x4.convert_i32x4 into a conversion from int16 that it
 * scalarizes: 4 lane extractions and insertions per vector.) */
INLINE v128_t i32_to_f32(v128_t i) {
    return wasm_f32x4_sub(wasm_i32x4_add(i, wasm_i32x4_splat(0x4b400000)), wasm_f32x4_splat(0x1.8p23f));
}

/* 16 int8 lanes -> 4 float vectors (elements 0..3, 4..7, 8..11, 12..15), exactly */
INLINE void i8_to_f32(v128_t b, v128_t *dst) {
    const v128_t lo = wasm_i16x8_extend_low_i8x16(b), hi = wasm_i16x8_extend_high_i8x16(b);
    dst[0] = i32_to_f32(wasm_i32x4_extend_low_i16x8(lo));
    dst[1] = i32_to_f32(wasm_i32x4_extend_high_i16x8(lo));
    dst[2] = i32_to_f32(wasm_i32x4_extend_low_i16x8(hi));
    dst[3] = i32_to_f32(wasm_i32x4_extend_high_i16x8(hi));
}

/* Chunk c of the block at b (legacy formats: c = 0; K-quants: ks its scales) -> w[v], the
 * weights of elements 32c + 4v .. 32c + 4v + 3 as the reference dequantizer makes them. */
INLINE void x_chunk(int f, const uint8_t *b, const lean_kscale *ks, int c, v128_t w[8]) {
    v128_t lo, hi;        /* the int8 quants of elements 0..15, 16..31 (offset subtracted) */
    float s0, s1, m0, m1; /* their scales; minimums (added: _1 formats; subtracted: K) */
    if (f < X_Q4_K) { /* X_Q4_0 .. X_Q8_0 are L_Q4_0 .. L_Q8_0 */
        legacy_quants(f, b, &lo, &hi);
        s0 = s1 = f16(b), m0 = m1 = f == X_Q4_1 || f == X_Q5_1 ? f16(b + 2) : 0.0f;
    } else if (f == X_Q2_K || f == X_Q3_K) { /* X_Q2_K - X_Q4_K is K_Q2 (kernels.h) */
        const v128_t off = wasm_i8x16_splat(f == X_Q3_K ? 4 : 0);
        lo = wasm_i8x16_sub(k23_raw(f - X_Q4_K, b, c, 0), off), hi = wasm_i8x16_sub(k23_raw(f - X_Q4_K, b, c, 1), off);
        s0 = ks->d[2 * c], s1 = ks->d[2 * c + 1];
        m0 = f == X_Q2_K ? ks->m[2 * c] : 0.0f, m1 = f == X_Q2_K ? ks->m[2 * c + 1] : 0.0f;
    } else if (f == X_Q6_K) { /* half h, quarter k: ql's nibble k / 2 at 64h + 32 (k % 2), qh's bits 2k */
        const int h = c / 4, k = c % 4;
        const uint8_t *ql = b + 64 * h + 32 * (k & 1), *qh = b + 128 + 32 * h;
        v128_t q[2];
        for (int p = 0; p < 2; p++) {
            v128_t l = wasm_v128_load(ql + 16 * p);
            l = k >> 1 ? wasm_u8x16_shr(l, 4) : wasm_v128_and(l, wasm_i8x16_splat(0x0f));
            /* the 16-bit shift moves no bit of a byte's other neighbour into its low two */
            const v128_t hb = wasm_v128_and(wasm_u16x8_shr(wasm_v128_load(qh + 16 * p), (uint32_t)(2 * k)), wasm_i8x16_splat(3));
            q[p] = wasm_i8x16_sub(wasm_v128_or(l, wasm_i8x16_shl(hb, 4)), wasm_i8x16_splat(32));
        }
        lo = q[0], hi = q[1];
        s0 = ks->d[2 * c], s1 = ks->d[2 * c + 1], m0 = m1 = 0.0f;
    } else { /* Q4_K / Q5_K sub-block c: nibble c % 2 of qs[32 (c / 2) ..], fifth bit bit c of qh[l] */
        const uint8_t *qs = b + (f == X_Q5_K ? 48 : 16) + 32 * (c / 2);
        v128_t q[2];
        for (int p = 0; p < 2; p++) {
            const v128_t raw = wasm_v128_load(qs + 16 * p);
            q[p] = c & 1 ? wasm_u8x16_shr(raw, 4) : wasm_v128_and(raw, wasm_i8x16_splat(0x0f));
            if (f == X_Q5_K) { /* by masks, as k45_unpack */
                const v128_t bit = wasm_i8x16_splat((int8_t)(1 << c)), hb = wasm_v128_load(b + 16 + 16 * p);
                q[p] = wasm_v128_or(q[p], wasm_v128_and(wasm_i8x16_eq(wasm_v128_and(hb, bit), bit), wasm_i8x16_splat(0x10)));
            }
        }
        lo = q[0], hi = q[1];
        s0 = s1 = ks->d[c], m0 = m1 = ks->m[c];
    }
    i8_to_f32(lo, w), i8_to_f32(hi, w + 4);
    for (int v = 0; v < 8; v++) {
        const v128_t mv = wasm_f32x4_splat(v < 4 ? m0 : m1);
        w[v] = wasm_f32x4_mul(w[v], wasm_f32x4_splat(v < 4 ? s0 : s1));
        if (f == X_Q4_1 || f == X_Q5_1) w[v] = wasm_f32x4_add(w[v], mv);
        else if (f == X_Q4_K || f == X_Q5_K || f == X_Q2_K) w[v] = wasm_f32x4_sub(w[v], mv);
    }
}

/* lo, hi += the 32 products w[v] x[4v ..], in element order (lane e % 8) */
INLINE void x_acc(const v128_t w[8], const float *x, v128_t *lo, v128_t *hi) {
    for (int v = 0; v < 8; v += 2) {
        *lo = wasm_f32x4_add(*lo, wasm_f32x4_mul(w[v], wasm_v128_load(x + 4 * v)));
        *hi = wasm_f32x4_add(*hi, wasm_f32x4_mul(w[v + 1], wasm_v128_load(x + 4 * v + 4)));
    }
}

X_TILE_FAMILY(v128_t, wasm_f32x4_splat(0.0f))

/* ---- attention ---- */

/* s[j] = q . k_j: the F32 row kernel (q[i] k_j[i] = k_j[i] q[i] in IEEE arithmetic). */
static void attn_scores(const float *q, const float *k, int64_t k_row_elems, int32_t n, int32_t hd, float *s) {
    for (int32_t j = 0; j < n; j++)
        float_tile(W_F32, hd, (const uint8_t *)(k + (int64_t)j * k_row_elems), (const uint8_t *)q, 0, 1, s + j, 0);
}

/* o = o * c, then += p[j] v_j in key order: 4 output elements at a time, the tail in scalar
 * (the same two roundings per term). */
static void attn_accum(float *o, float c, const float *v, int64_t v_row_elems, const float *p, int32_t n,
                       int32_t hd) {
    int32_t i = 0;
    for (; i + 4 <= hd; i += 4) {
        v128_t ov = wasm_f32x4_mul(wasm_v128_load(o + i), wasm_f32x4_splat(c));
        for (int32_t j = 0; j < n; j++)
            ov = wasm_f32x4_add(ov, wasm_f32x4_mul(wasm_f32x4_splat(p[j]), wasm_v128_load(v + j * v_row_elems + i)));
        wasm_v128_store(o + i, ov);
    }
    for (; i < hd; i++) {
        float acc = o[i] * c;
        for (int32_t j = 0; j < n; j++) acc += p[j] * v[(int64_t)j * v_row_elems + i];
        o[i] = acc;
    }
}

/* ---- table ---- */

TILED_TABLE("simd128", lean_kernels_simd128, TILE4_FORMAT, TILE4_FORMAT)

#else /* not wasm32 with simd128 */

const lean_kernels *lean_kernels_simd128(void) { return NULL; }

#endif
