/* wasm_shared.h — what the two wasm tables (wasm_simd128.c, wasm_relaxed.c) share: lane sums
 * and the weights' raw quants, unpacked from their blocks with simd128 alone.
 *
 * "Raw" quants are the stored values, the format's offset not yet subtracted: Q4_0 / Q4_1 and
 * the Q4_K nibbles in [0, 15], Q5_0 / Q5_1 / Q5_K in [0, 31], Q6_K in [0, 63], Q2_K in [0, 3],
 * Q3_K in [0, 7] (q3 + 4: the third bit as bit 2). They fit in
 * 7 bits, which is what relaxed SIMD's i8 x i7 dot product needs of one operand.
 * Included only where __wasm_simd128__ is defined.
 */
#ifndef LEAN_WASM_SHARED_H
#define LEAN_WASM_SHARED_H

#include "cpu/kernels_shared.h"

#include <string.h>
#include <wasm_simd128.h>

#define INLINE static inline __attribute__((always_inline))

/* lean_f16_to_f32's bits, inline (a call per block was 12% of a wasm decode step): the magnitude
 * shifted into place is a float 2^112 too small (wasm keeps subnormals, so subnormal halves too),
 * except exponent 31 (inf, NaN: made quiet); the sign is or-ed in (zero -> -0). */
INLINE float f16(const uint8_t *p) {
    const uint32_t h = (uint32_t)(p[0] | (p[1] << 8)), mag = (h & 0x7fffu) << 13;
    uint32_t bits;
    if (mag >= 0x0f800000u) {
        bits = mag | 0x70000000u | (mag > 0x0f800000u ? 0x00400000u : 0);
    } else {
        float f;
        memcpy(&f, &mag, 4);
        f *= 0x1p112f;
        memcpy(&bits, &f, 4);
    }
    bits |= (h & 0x8000u) << 16;
    float r;
    memcpy(&r, &bits, 4);
    return r;
}

/* 4 f16 (as u32 lanes) -> f32 exactly: f16()'s operations in lanes. */
INLINE v128_t f16x4(v128_t h) {
    const v128_t mag = wasm_i32x4_shl(wasm_v128_and(h, wasm_i32x4_splat(0x7fff)), 13);
    const v128_t fin = wasm_f32x4_mul(mag, wasm_f32x4_splat(0x1p112f));
    const v128_t nan = wasm_v128_and(wasm_i32x4_gt(mag, wasm_i32x4_splat(0x0f800000)), wasm_i32x4_splat(0x00400000));
    const v128_t inf = wasm_v128_or(wasm_v128_or(mag, wasm_i32x4_splat(0x70000000)), nan);
    const v128_t big = wasm_i32x4_ge(mag, wasm_i32x4_splat(0x0f800000));
    const v128_t sign = wasm_i32x4_shl(wasm_v128_and(h, wasm_i32x4_splat(0x8000)), 16);
    return wasm_v128_or(wasm_v128_bitselect(inf, fin, big), sign);
}

/* The f16 at p[0] .. p[3] (4 rows' block scales) as 4 floats */
INLINE v128_t f16x4_at(const uint8_t *const p[4]) {
    v128_t h = wasm_i32x4_splat(0);
    h = wasm_v128_load16_lane(p[0], h, 0), h = wasm_v128_load16_lane(p[1], h, 2);
    h = wasm_v128_load16_lane(p[2], h, 4), h = wasm_v128_load16_lane(p[3], h, 6);
    return f16x4(h);
}

/* Each byte's high nibble (i8x16.shr_u has no x86 instruction: engines emulate it with
 * several; a 16-bit shift and a mask are two) */
INLINE v128_t hi_nibbles(v128_t v) { return wasm_v128_and(wasm_u16x8_shr(v, 4), wasm_i8x16_splat(0x0f)); }

/* The lanes' sum (integers: any order gives the same value). */
INLINE int32_t hsum_i32(v128_t v) {
    v = wasm_i32x4_add(v, wasm_i32x4_shuffle(v, v, 2, 3, 0, 1));
    v = wasm_i32x4_add(v, wasm_i32x4_shuffle(v, v, 1, 0, 3, 2));
    return wasm_i32x4_extract_lane(v, 0);
}

/* The 4 lanes' sums of s[0..3], as lanes 0..3 (integers: any order gives the same value). */
INLINE v128_t hsum4_i32(const v128_t s[4]) {
    const v128_t t01 = wasm_i32x4_add(wasm_i32x4_shuffle(s[0], s[1], 0, 4, 1, 5), wasm_i32x4_shuffle(s[0], s[1], 2, 6, 3, 7));
    const v128_t t23 = wasm_i32x4_add(wasm_i32x4_shuffle(s[2], s[3], 0, 4, 1, 5), wasm_i32x4_shuffle(s[2], s[3], 2, 6, 3, 7));
    return wasm_i32x4_add(wasm_i32x4_shuffle(t01, t23, 0, 1, 4, 5), wasm_i32x4_shuffle(t01, t23, 2, 3, 6, 7));
}

/* ---- Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 ----
 * Block layouts (formats.c): d f16 [m f16] [qh 4 bytes] qs; element j < 16 is qs[j]'s low
 * nibble, j >= 16 qs[j - 16]'s high nibble, its fifth bit bit j of qh. */

enum { L_Q4_0, L_Q4_1, L_Q5_0, L_Q5_1, L_Q8_0 };

static const size_t legacy_bytes[] = {18, 20, 22, 24, 34};

/* Bit j of the little-endian u32 at p -> 0x10 in byte j, for j in [16 half, 16 half + 16). */
INLINE v128_t fifth_bits(const uint8_t *p, int half) {
    const v128_t bytes = wasm_v128_load16_splat(p + 2 * half);
    const v128_t spread = wasm_i8x16_shuffle(bytes, bytes, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    const v128_t bit = wasm_u8x16_make(1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128);
    return wasm_v128_and(wasm_i8x16_eq(wasm_v128_and(spread, bit), bit), wasm_i8x16_splat(0x10));
}

/* A 4- or 5-bit block's 32 raw quants: elements 0..15 -> *lo, 16..31 -> *hi (not Q8_0). */
INLINE void legacy_raw(int f, const uint8_t *b, v128_t *lo, v128_t *hi) {
    static const int qs_at[] = {2, 4, 6, 8};
    const v128_t raw = wasm_v128_load(b + qs_at[f]);
    v128_t l = wasm_v128_and(raw, wasm_i8x16_splat(0x0f)), h = hi_nibbles(raw);
    if (f == L_Q5_0 || f == L_Q5_1) {
        const uint8_t *qh = b + (f == L_Q5_0 ? 2 : 4);
        l = wasm_v128_or(l, fifth_bits(qh, 0)), h = wasm_v128_or(h, fifth_bits(qh, 1));
    }
    *lo = l, *hi = h;
}

/* The offset a legacy format's raw quants carry (z: weight = (q - z) d). */
INLINE int legacy_offset(int f) { return f == L_Q4_0 ? 8 : f == L_Q5_0 ? 16 : 0; }

/* family_tile4(f, nt, ...) over family_tile4_n with the tile's token count as the constant NT
 * (1 .. LEAN_TILE_TOKENS), so that its sum[] are wasm locals, not linear memory */
#define TILE4_BY_NT(family)                                                                          \
    INLINE void family##_tile4(int f, int32_t nt, int64_t cols, const uint8_t *w, size_t wrb, const uint8_t *x,  \
                               size_t xrb, float *y, int64_t ldy) {                                  \
        switch (nt) {                                                                                \
        case 1: family##_tile4_n(f, 1, cols, w, wrb, x, xrb, y, ldy); break;                         \
        case 2: family##_tile4_n(f, 2, cols, w, wrb, x, xrb, y, ldy); break;                         \
        case 3: family##_tile4_n(f, 3, cols, w, wrb, x, xrb, y, ldy); break;                         \
        default: family##_tile4_n(f, 4, cols, w, wrb, x, xrb, y, ldy); break;                        \
        }                                                                                            \
    }

/* Rows r .. r + 3 of a legacy format x NT tokens (token j's activation row at x + j xrb) ->
 * y[j ldy + 0..3]: each block's quants prepared once for the NT tokens, the four rows' integer
 * block sums reduced together (hsum4_i32) and lean_legacy_step's float operations done in
 * lanes, one row a lane, block by block: each output's operations in its order, so its bits.
 * A decode step (NT 1) and a prefill (NT up to LEAN_TILE_TOKENS, where one row a tile took a
 * horizontal sum and a scalar step per block and token) both go here. Needs the file's
 *   legacy_prep(f, blk, q)     a block's quants as its dot takes them (4 vectors)
 *   legacy_dot4(f, q, a, s)    the block dots of 4 rows' prepared quants q[0..3] with the
 *                              activation block a, as 4 vectors of lanes not yet added
 * and Z, the offset (an expression in f) its sums still carry, taken out as Z s. */
#define LEGACY_TILE4_FAMILY(Z)                                                                        \
    INLINE void legacy_tile4_n(int f, int NT, int64_t cols, const uint8_t *w, size_t wrb, const uint8_t *x,     \
                               size_t xrb, float *y, int64_t ldy) {                                  \
        const bool has_min = f == L_Q4_1 || f == L_Q5_1;                                             \
        v128_t sum[LEAN_TILE_TOKENS];                                                                \
        for (int j = 0; j < NT; j++) sum[j] = wasm_f32x4_splat(0.0f);                                \
        for (int64_t b = 0; b < cols / 32; b++) {                                                    \
            const uint8_t *blk[4];                                                                   \
            v128_t q[4][4];                                                                          \
            for (int k = 0; k < 4; k++) {                                                            \
                blk[k] = w + k * wrb + (size_t)b * legacy_bytes[f];                                  \
                legacy_prep(f, blk[k], q[k]);                                                        \
            }                                                                                        \
            const uint8_t *mp[4] = {blk[0] + 2, blk[1] + 2, blk[2] + 2, blk[3] + 2};                 \
            const v128_t dw = f16x4_at(blk), mw = has_min ? f16x4_at(mp) : wasm_f32x4_splat(0.0f);   \
            for (int j = 0; j < NT; j++) {                                                           \
                const lean_q8_32 *a = (const lean_q8_32 *)(x + (size_t)j * xrb) + b;                 \
                v128_t s[4];                                                                         \
                legacy_dot4(f, (const v128_t(*)[4])q, a, s);                                         \
                const v128_t is = wasm_i32x4_sub(hsum4_i32(s), wasm_i32x4_splat((Z) * a->s));        \
                v128_t t = wasm_f32x4_mul(wasm_f32x4_mul(dw, wasm_f32x4_splat(a->d)), wasm_f32x4_convert_i32x4(is)); \
                if (has_min) t = wasm_f32x4_add(t, wasm_f32x4_mul(mw, wasm_f32x4_splat(a->d * (float)a->s))); \
                sum[j] = wasm_f32x4_add(sum[j], t);                                                  \
            }                                                                                        \
        }                                                                                            \
        for (int j = 0; j < NT; j++) wasm_v128_store(y + j * ldy, sum[j]);                           \
    }                                                                                                \
    TILE4_BY_NT(legacy)

/* A quantized format's tile_<fmt> and matmul_<fmt> (TILED_TABLE's LEGACY and KQUANT): rows
 * four at a time against every tile of tokens (family_tile4), the rows left over through
 * family_tile. */
#define TILE4_FORMAT(fmt, family, which)                                                             \
    static void tile_##fmt(TILE_ARGS) { family##_tile(which, TILE_PASS); }                          \
    static void matmul_##fmt(LEAN_MATMUL_ARGS) {                                                     \
        for (; r0 + 4 <= r1; r0 += 4)                                                                \
            for (int32_t t = 0; t < n_tok; t += LEAN_TILE_TOKENS)                                    \
                family##_tile4(which, n_tok - t < LEAN_TILE_TOKENS ? n_tok - t : LEAN_TILE_TOKENS, cols, \
                               (const uint8_t *)w + (size_t)r0 * w_row_bytes, w_row_bytes,           \
                               (const uint8_t *)x + (size_t)t * x_row_bytes, x_row_bytes,            \
                               y + (int64_t)t * y_row_elems + r0, y_row_elems);                      \
        lean_matmul_tiles(tile_##fmt, MATMUL_PASS);                                                  \
    }

/* ---- Q4_K, Q5_K, Q6_K, Q2_K, Q3_K ---- */

enum { K_Q4, K_Q5, K_Q6, K_Q2, K_Q3 };
/* the X_ formats from Q4_K on (kernels.h) are these, in order: f - X_Q4_K picks one */
_Static_assert(X_Q5_K - X_Q4_K == K_Q5 && X_Q6_K - X_Q4_K == K_Q6 && X_Q2_K - X_Q4_K == K_Q2 && X_Q3_K - X_Q4_K == K_Q3,
               "kernels.h's X_ order");

static const size_t kblock_bytes[] = {LEAN_Q4_K_BYTES, LEAN_Q5_K_BYTES, LEAN_Q6_K_BYTES, LEAN_Q2_K_BYTES,
                                      LEAN_Q3_K_BYTES};

/* the formats with mins (w = d sc q - dmin m) */
INLINE bool k_has_min(int f) { return f == K_Q4 || f == K_Q5 || f == K_Q2; }

/* Q4_K / Q5_K (block: d, dmin, 12 scale bytes, [qh 32 bytes], qs 128 bytes): sub-blocks j and
 * j + 1 (j even) are the low and high nibbles of the same 32 qs bytes; Q5_K's fifth bit of
 * element l of sub-block j is bit j of qh[l]. Elements 16 half .. 16 half + 15 of sub-block j
 * -> *lo, of j + 1 -> *hi, raw. */
INLINE void k45_raw(int f, const uint8_t *b, int j, int half, v128_t *lo, v128_t *hi) {
    const uint8_t *qs = (f == K_Q5 ? b + 48 : b + 16) + 16 * j;
    const v128_t raw = wasm_v128_load(qs + 16 * half);
    v128_t l = wasm_v128_and(raw, wasm_i8x16_splat(0x0f)), h = hi_nibbles(raw);
    if (f == K_Q5) { /* bits j, j + 1 of qh -> 0x10 (by masks: LLVM 14 scalarizes an i8x16
                      * shift by a loop counter) */
        const v128_t hb = wasm_v128_load(b + 16 + 16 * half), x10 = wasm_i8x16_splat(0x10);
        const v128_t bj = wasm_i8x16_splat((int8_t)(1 << j)), bj1 = wasm_i8x16_splat((int8_t)(2 << j));
        l = wasm_v128_or(l, wasm_v128_and(wasm_i8x16_eq(wasm_v128_and(hb, bj), bj), x10));
        h = wasm_v128_or(h, wasm_v128_and(wasm_i8x16_eq(wasm_v128_and(hb, bj1), bj1), x10));
    }
    *lo = l, *hi = h;
}

/* Q6_K (block: ql 128, qh 64, 16 int8 scales, d): in half h, byte l < 32 of ql (and ql + 32)
 * gives elements l (l + 32) by its low nibble and l + 64 (l + 96) by its high one, their two
 * high bits the four 2-bit fields of qh[l]; element e's scale is sc[e / 16]. e[k] gets the raw
 * quants of sub-block 8 h + 2 k + g (16 elements), k = 0..3. */
INLINE void k6_raw(const uint8_t *b, int h, int g, v128_t e[4]) {
    const v128_t m4 = wasm_i8x16_splat(0x0f), m3 = wasm_i8x16_splat(3);
    const v128_t la = wasm_v128_load(b + 64 * h + 16 * g), lb = wasm_v128_load(b + 64 * h + 32 + 16 * g);
    const v128_t qh = wasm_v128_load(b + 128 + 32 * h + 16 * g);
    e[0] = wasm_v128_or(wasm_v128_and(la, m4), wasm_i8x16_shl(wasm_v128_and(qh, m3), 4));
    e[1] = wasm_v128_or(wasm_v128_and(lb, m4), wasm_i8x16_shl(wasm_v128_and(wasm_u8x16_shr(qh, 2), m3), 4));
    e[2] = wasm_v128_or(wasm_u8x16_shr(la, 4), wasm_i8x16_shl(wasm_v128_and(wasm_u8x16_shr(qh, 4), m3), 4));
    e[3] = wasm_v128_or(wasm_u8x16_shr(lb, 4), wasm_i8x16_shl(wasm_u8x16_shr(qh, 6), 4));
}

/* Q2_K (block: 16 scale / min bytes, qs 64, d, dmin), Q3_K (hmask 32, qs 64, 12 scale bytes, d):
 * elements 16p .. 16p + 15 of chunk c (32 weights, c = 4h + k; sub-block 2c + p) are bits 2k,
 * 2k + 1 of qs[32h + 16p ..]; Q3_K's third bit of element l of the chunk is bit c of hmask[l]
 * (q3 = q - 4 where it is clear). Raw: Q3_K's bit as bit 2. The 16-bit shifts move no bit of
 * a byte's neighbour into the bits kept (and take a count that is not a constant). */
INLINE v128_t k23_raw(int f, const uint8_t *b, int c, int p) {
    const v128_t raw = wasm_v128_load(b + (f == K_Q2 ? 16 : 32) + 32 * (c / 4) + 16 * p);
    const v128_t q = wasm_v128_and(wasm_u16x8_shr(raw, (uint32_t)(2 * (c % 4))), wasm_i8x16_splat(3));
    if (f == K_Q2) return q;
    const v128_t hb = wasm_v128_and(wasm_u16x8_shr(wasm_v128_load(b + 16 * p), (uint32_t)c), wasm_i8x16_splat(1));
    return wasm_v128_or(q, wasm_i16x8_shl(hb, 2));
}

/* Q2_K's 16 mins (the scale bytes' high nibbles) as int16 lanes -> m[0], m[1] */
INLINE void q2_mins16(const uint8_t *b, v128_t m[2]) {
    const v128_t s = hi_nibbles(wasm_v128_load(b));
    m[0] = wasm_u16x8_extend_low_u8x16(s), m[1] = wasm_u16x8_extend_high_u8x16(s);
}

/* sub-block s's scale: Q2_K the scale byte's low nibble, Q3_K get_scale_q3_k (formats_layout.h) */
INLINE int k23_scale(int f, const uint8_t *b, int s) { return f == K_Q2 ? b[s] & 0x0f : get_scale_q3_k(s, b + 96); }

/* sum + 4 rows' super-blocks (lanes) with a token's (d_x): lean_k_step's operations, a row a
 * lane (dw, mw: the rows' d and dmin; is, ms: their isum and msum) */
INLINE v128_t k_step4(int f, v128_t sum, v128_t dw, v128_t mw, float d_x, v128_t is, v128_t ms) {
    const v128_t dx = wasm_f32x4_splat(d_x);
    v128_t t = wasm_f32x4_mul(wasm_f32x4_mul(dw, dx), wasm_f32x4_convert_i32x4(is));
    if (k_has_min(f)) t = wasm_f32x4_sub(t, wasm_f32x4_mul(wasm_f32x4_mul(mw, dx), wasm_f32x4_convert_i32x4(ms)));
    return wasm_f32x4_add(sum, t);
}

#endif
