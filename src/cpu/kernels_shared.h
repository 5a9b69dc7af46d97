/* kernels_shared.h — what the portable table (kernels_generic.c) and the 128-bit ISA files
 * (arm_neon.c, wasm_simd128.c) share: the float step of a block, the matmul driver of row x
 * token tiles and the 128-bit files' table (the K-quant scale decoding, lean_k4_scales, every
 * table shares: kernels.h).
 * Internal to src/cpu.
 */
#ifndef LEAN_KERNELS_SHARED_H
#define LEAN_KERNELS_SHARED_H

#include "cpu/kernels.h"

/* The steps below are the bits of the generic table and those that share them: no
 * contraction into FMA, which clang does by default within an expression (gcc's -std=c11
 * does not). In effect for the rest of every file that includes this one. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

/* ---- the float step of a block: one definition for the generic table and the tables that
 * give its bits (same_as_generic). The integer sums are exact, so only these roundings, in
 * this order, decide an output's bits. ---- */

/* sum + a legacy block with weight scale d_w (and, has_min: minimum m_w) and integer sum isum
 * of its quants (offset included) times the activation quants: (d_w d_x) isum [+ m_w (d_x s)] */
static inline float lean_legacy_step(float sum, float d_w, float m_w, bool has_min, const lean_q8_32 *a,
                                     int32_t isum) {
    const float dq = (d_w * a->d) * (float)isum;
    if (!has_min) return sum + dq;
    const float mq = m_w * (a->d * (float)a->s);
    return sum + (dq + mq);
}

/* sum + a K-quant super-block: (d_w d_x) isum - (dmin_w d_x) msum (Q4_K, Q5_K: has_min), or
 * (d_w d_x) isum (Q6_K, isum with its -32 offset) */
static inline float lean_k_step(float sum, float d_w, float dmin_w, bool has_min, float d_x, int32_t isum,
                                int32_t msum) {
    const float d = d_w * d_x;
    if (!has_min) return sum + d * (float)isum;
    const float dmin = dmin_w * d_x;
    return sum + (d * (float)isum - dmin * (float)msum);
}

/* ---- exact (kernels.h "exact") in the 128-bit files: what their tiles share ---- */

/* Largest token count of one tile. */
#define LEAN_TILE_TOKENS 4

/* One weight row (cols elements, at w) . nt <= LEAN_TILE_TOKENS activation rows (token j at
 * x + j * x_row_bytes) -> y[j * y_row_elems], j < nt. A tile function computes each output
 * in an order that does not depend on nt (kernels.h's contract). */
typedef void (*lean_tile_fn)(int64_t cols, const uint8_t *w, const uint8_t *x, size_t x_row_bytes, int32_t nt,
                             float *y, int64_t y_row_elems);

/* A lean_matmul_fn made of tiles: rows r0..r1 one at a time, each against the tokens in
 * groups of LEAN_TILE_TOKENS (the row's blocks are unpacked once per group). */
void lean_matmul_tiles(lean_tile_fn tile, LEAN_MATMUL_ARGS);

/* A matmul's and a tile's arguments passed on (LEAN_MATMUL_ARGS, TILE_ARGS). */
#define MATMUL_PASS cols, w, w_row_bytes, r0, r1, x, x_row_bytes, n_tok, y, y_row_elems
#define TILE_ARGS                                                                                    \
    int64_t cols, const uint8_t *w, const uint8_t *x, size_t xrb, int32_t nt, float *y, int64_t ldy
#define TILE_PASS cols, w, x, xrb, nt, y, ldy

/* The exact tile family x_tile (TILED_TABLE's X_ formats) of a 128-bit file, over its VEC (4
 * floats; ZERO: a VEC of +0), its legacy_bytes and kblock_bytes and its functions
 *   x_chunk(f, blk, ks, c, w)   weights 32c .. 32c + 31 of the block at blk (ks: a K
 *                               super-block's scales) as 8 VECs in element order
 *   x_acc(w, x, &lo, &hi)       their 32 products with x added into the generic exact kernel's
 *                               8 partial sums (lo: lanes 0..3, hi: 4..7), in element order
 *   combine8(lo, hi)            the generic kernel's sum of the 8
 * Block by block (a K super-block's scales made once), chunk by chunk, each chunk made once
 * for all the tile's tokens. x_tile_n takes the token count NT as a constant, so that the
 * accumulators stay in registers (in wasm a runtime-indexed array lives in linear memory). */
#define X_TILE_FAMILY(VEC, ZERO)                                                                      \
    static inline __attribute__((always_inline)) void x_tile_n(int f, int NT, int64_t cols, const uint8_t *w, \
                                                               const uint8_t *x, size_t xrb, float *y,     \
                                                               int64_t ldy) {                              \
        const bool kq = f >= X_Q4_K;                                                                 \
        const int64_t be = kq ? LEAN_QK_K : 32;                                                      \
        const size_t bb = kq ? kblock_bytes[f - X_Q4_K] : legacy_bytes[f];                           \
        VEC lo[LEAN_TILE_TOKENS], hi[LEAN_TILE_TOKENS];                                              \
        for (int j = 0; j < NT; j++) lo[j] = hi[j] = ZERO;                                           \
        for (int64_t b = 0; b < cols / be; b++) {                                                    \
            const uint8_t *blk = w + (size_t)b * bb;                                                 \
            lean_kscale ks = {.d = {0}}; /* read by K chunks only */                                 \
            if (kq) lean_kscale_of(f, blk, &ks);                                                     \
            for (int c = 0; c < be / 32; c++) {                                                      \
                VEC wv[8];                                                                           \
                x_chunk(f, blk, &ks, c, wv);                                                         \
                for (int j = 0; j < NT; j++)                                                         \
                    x_acc(wv, (const float *)(x + (size_t)j * xrb) + b * be + 32 * c, &lo[j], &hi[j]); \
            }                                                                                        \
        }                                                                                            \
        for (int j = 0; j < NT; j++) y[j * ldy] = combine8(lo[j], hi[j]);                            \
    }                                                                                                \
    static inline __attribute__((always_inline)) void x_tile(int f, TILE_ARGS) {                    \
        switch (nt) {                                                                                \
        case 1: x_tile_n(f, 1, cols, w, x, xrb, y, ldy); break;                                      \
        case 2: x_tile_n(f, 2, cols, w, x, xrb, y, ldy); break;                                      \
        case 3: x_tile_n(f, 3, cols, w, x, xrb, y, ldy); break;                                      \
        default: x_tile_n(f, 4, cols, w, x, xrb, y, ldy); break;                                     \
        }                                                                                            \
    }

/* The table of a 128-bit ISA file (arm_neon.c, wasm_simd128.c) and the function NAME_FN that
 * returns it. The file defines four tile families, each a lean_tile_fn with the format as its
 * first argument: float_tile (W_F32, W_F16, W_BF16), legacy_tile (L_Q4_0 ... L_Q8_0),
 * k_tile (K_Q4, K_Q5, K_Q6, K_Q2, K_Q3) and x_tile (X_Q4_0 ... X_Q3_K: float activations,
 * matmul_exact);
 * and attn_scores, attn_accum. Every format's entry is then lean_matmul_tiles over
 * tile_<format>, except where LEGACY or KQUANT (the macros that make the legacy and the
 * K-quant formats' entries: TILED_QFORMAT, or one with its arguments that defines the same
 * names, as wasm_shared.h's TILE4_FORMAT) put another path first. Its entries give the generic
 * table's bits (the files' contract, memcmp-tested in test_kernels.c); the rest (exp_sum, SwiGLU, the activation
 * quantizer) lean_kernels_select takes from the generic table. */
#define TILED_FORMAT(fmt, family, which)                                                             \
    static void tile_##fmt(TILE_ARGS) { family(which, TILE_PASS); }                                 \
    static void matmul_##fmt(LEAN_MATMUL_ARGS) { lean_matmul_tiles(tile_##fmt, MATMUL_PASS); }
/* TILED_FORMAT with the family by its prefix (legacy -> legacy_tile): TILED_TABLE's LEGACY and
 * KQUANT when the tiles are all */
#define TILED_QFORMAT(fmt, family, which) TILED_FORMAT(fmt, family##_tile, which)
#define TILED_TABLE(NAME, NAME_FN, LEGACY, KQUANT)                                                   \
    TILED_FORMAT(f32, float_tile, W_F32)                                                             \
    TILED_FORMAT(f16, float_tile, W_F16)                                                             \
    TILED_FORMAT(bf16, float_tile, W_BF16)                                                           \
    LEGACY(q4_0, legacy, L_Q4_0)                                                                     \
    LEGACY(q4_1, legacy, L_Q4_1)                                                                     \
    LEGACY(q5_0, legacy, L_Q5_0)                                                                     \
    LEGACY(q5_1, legacy, L_Q5_1)                                                                     \
    LEGACY(q8_0, legacy, L_Q8_0)                                                                     \
    KQUANT(q4_k, k, K_Q4)                                                                            \
    KQUANT(q5_k, k, K_Q5)                                                                            \
    KQUANT(q6_k, k, K_Q6)                                                                            \
    KQUANT(q2_k, k, K_Q2)                                                                            \
    KQUANT(q3_k, k, K_Q3)                                                                            \
    TILED_FORMAT(exact_q4_0, x_tile, X_Q4_0)                                                         \
    TILED_FORMAT(exact_q4_1, x_tile, X_Q4_1)                                                         \
    TILED_FORMAT(exact_q5_0, x_tile, X_Q5_0)                                                         \
    TILED_FORMAT(exact_q5_1, x_tile, X_Q5_1)                                                         \
    TILED_FORMAT(exact_q8_0, x_tile, X_Q8_0)                                                         \
    TILED_FORMAT(exact_q4_k, x_tile, X_Q4_K)                                                         \
    TILED_FORMAT(exact_q5_k, x_tile, X_Q5_K)                                                         \
    TILED_FORMAT(exact_q6_k, x_tile, X_Q6_K)                                                         \
    TILED_FORMAT(exact_q2_k, x_tile, X_Q2_K)                                                         \
    TILED_FORMAT(exact_q3_k, x_tile, X_Q3_K)                                                         \
    static const lean_kernels table = {                                                              \
        .name = NAME,                                                                                \
        .same_as_generic = true,                                                                     \
        .matmul = {[LEAN_TYPE_F32] = matmul_f32, [LEAN_TYPE_F16] = matmul_f16,                       \
                   [LEAN_TYPE_BF16] = matmul_bf16, [LEAN_TYPE_Q8_0] = matmul_q8_0,                   \
                   [LEAN_TYPE_Q4_0] = matmul_q4_0, [LEAN_TYPE_Q4_1] = matmul_q4_1,                   \
                   [LEAN_TYPE_Q5_0] = matmul_q5_0, [LEAN_TYPE_Q5_1] = matmul_q5_1,                   \
                   [LEAN_TYPE_Q4_K] = matmul_q4_k, [LEAN_TYPE_Q5_K] = matmul_q5_k,                   \
                   [LEAN_TYPE_Q6_K] = matmul_q6_k, [LEAN_TYPE_Q2_K] = matmul_q2_k,                   \
                   [LEAN_TYPE_Q3_K] = matmul_q3_k},                                                  \
        .matmul_exact = {[LEAN_TYPE_Q8_0] = matmul_exact_q8_0, [LEAN_TYPE_Q4_0] = matmul_exact_q4_0,   \
                         [LEAN_TYPE_Q4_1] = matmul_exact_q4_1, [LEAN_TYPE_Q5_0] = matmul_exact_q5_0,   \
                         [LEAN_TYPE_Q5_1] = matmul_exact_q5_1, [LEAN_TYPE_Q4_K] = matmul_exact_q4_k,   \
                         [LEAN_TYPE_Q5_K] = matmul_exact_q5_k, [LEAN_TYPE_Q6_K] = matmul_exact_q6_k,   \
                         [LEAN_TYPE_Q2_K] = matmul_exact_q2_k, [LEAN_TYPE_Q3_K] = matmul_exact_q3_k},  \
        .attn_scores = attn_scores,                                                                  \
        .attn_accum = attn_accum,                                                                    \
    };                                                                                               \
    const lean_kernels *NAME_FN(void) { return &table; }

#endif
