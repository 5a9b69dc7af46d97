/* kernels_shared.h — what the portable table (kernels_generic.c) and the 128-bit ISA files
 * (arm_neon.c, wasm_simd128.c) share: the float step of a block and the matmul driver of row x
 * token tiles (the K-quant scale decoding, lean_k4_scales, every table shares: kernels.h).
 * Internal to src/cpu.
 */
#ifndef LEAN_KERNELS_SHARED_H
#define LEAN_KERNELS_SHARED_H

#include "kernels.h"

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

/* Largest token count of one tile. */
#define LEAN_TILE_TOKENS 4

/* One weight row (cols elements, at w) . nt <= LEAN_TILE_TOKENS activation rows (token j at
 * x + j * x_row_bytes) -> y[j * y_row_elems], j < nt. A tile function computes each output
 * in an order that does not depend on nt (kernels.h's contract). */
typedef void (*lean_tile_fn)(int64_t cols, const uint8_t *w, const uint8_t *x, size_t x_row_bytes, int32_t nt,
                             float *y, int64_t y_row_elems);

/* A lean_matmul_fn made of tiles: rows r0..r1 one at a time, each against the tokens in
 * groups of LEAN_TILE_TOKENS (the row's blocks are unpacked once per group). */
void lean_matmul_tiles(lean_tile_fn tile, int64_t cols, const void *w, size_t w_row_bytes, int64_t r0, int64_t r1,
                       const void *x, size_t x_row_bytes, int32_t n_tok, float *y, int64_t y_row_elems);

#endif
