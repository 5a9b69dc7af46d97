/* wasm_relaxed.c — the kernel table (kernels.h) for wasm32 with relaxed SIMD: the quantized
 * formats' integer dot products through i32x4.relaxed_dot_i8x16_i7x16_add_s.
 *
 * Chosen at compile time, as simd128 is (wasm_simd128.c says why): the relaxed build (Makefile
 * `make wasm-relaxed`, clang 19: clang 14 has no such intrinsic) passes -mrelaxed-simd, and
 * this file is compiled only where __wasm_relaxed_simd__ is defined; elsewhere it is the stub at
 * the end. The browser picks that module where WebAssembly.validate accepts a relaxed dot
 * (web/lean.js), the plain simd128 one elsewhere. Every entry this table lacks (F32/F16/BF16,
 * the exact kernels, attention: float arithmetic, below) is simd128's (lean_kernels_select
 * fills the gaps).
 *
 * Why only the integer dot product: the relaxed instructions are deterministic only on part of
 * their domain. relaxed_dot_i8x16_i7x16_add_s multiplies an int8 lane by a lane that must be in
 * [0, 127] (with the top bit set, an engine may read it signed or unsigned), sums pairs into
 * int16 (x86's pmaddubsw saturates) and then fours into int32. The raw quants of Q4_0 .. Q6_K
 * are in [0, 63] (wasm_shared.h) and the activations in [-127, 127], so every pair sum is below
 * 2 * 127 * 63 < 2^15: exact everywhere, the integer block sums are those of simd128, and the
 * float step (kernels_shared.h) is the generic one: the generic table's bits (same_as_generic,
 * tested). Q8_0's weights are signed (-128 included), so they are split into two such operands:
 * w = (w & 0x7f) - 128 [w < 0] (two's complement), two dots of 7-bit operands (the second's
 * lanes 0 or 1). relaxed_madd may or may not fuse (engine by engine), which would change bits
 * between browsers: not used, so the float formats stay simd128's.
 *
 * The integer sums: isum = sum (q - z) a = sum q a - z s (legacy: s the block's activation sum,
 * lean_q8_32.s); K-quants sum q a per sub-block, times its scale (int32 lanes); Q6_K subtracts
 * 32 sum sc[s] bsums[s]. Magnitudes as in wasm_simd128.c (|sum| < 2^28 a super-block).
 *
 * Sections: legacy formats · K-quants · table
 */
#include "cpu/kernels_shared.h"

#if defined(__wasm_relaxed_simd__)

#include "cpu/wasm_shared.h"

/* sum a[i] q[i] over 16 lanes added into acc: a int8 (activations), q raw quants in [0, 127] */
INLINE v128_t rdot(const int8_t *a, v128_t q, v128_t acc) {
    return wasm_i32x4_relaxed_dot_i8x16_i7x16_add(wasm_v128_load(a), q, acc);
}

/* ---- Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 (lean_q8_32 activations) ---- */

INLINE void legacy_tile(int f, TILE_ARGS) {
    const bool has_min = f == L_Q4_1 || f == L_Q5_1;
    const int32_t z = legacy_offset(f);
    float sum[LEAN_TILE_TOKENS] = {0};
    for (int64_t b = 0; b < cols / 32; b++) {
        const uint8_t *blk = w + (size_t)b * legacy_bytes[f];
        v128_t lo, hi; /* elements 0..15, 16..31 */
        legacy_raw(f, blk, &lo, &hi);
        const float d = f16(blk), m = has_min ? f16(blk + 2) : 0.0f;
        for (int j = 0; j < nt; j++) {
            const lean_q8_32 *a = (const lean_q8_32 *)(x + (size_t)j * xrb) + b;
            const int32_t qa = hsum_i32(rdot(a->qs + 16, hi, rdot(a->qs, lo, wasm_i32x4_splat(0))));
            sum[j] = lean_legacy_step(sum[j], d, m, has_min, a, qa - z * a->s);
        }
    }
    for (int j = 0; j < nt; j++) y[j * ldy] = sum[j];
}

/* Q8_0: sum w a = sum (w & 0x7f) a - 128 sum [w < 0] a, each term a dot of 7-bit lanes */
INLINE void q8_0_tile(int f, TILE_ARGS) {
    (void)f;
    const v128_t low7 = wasm_i8x16_splat(0x7f);
    float sum[LEAN_TILE_TOKENS] = {0};
    for (int64_t b = 0; b < cols / 32; b++) {
        const uint8_t *blk = w + (size_t)b * legacy_bytes[L_Q8_0];
        const v128_t lo = wasm_v128_load(blk + 2), hi = wasm_v128_load(blk + 18); /* elements 0..15, 16..31 */
        const v128_t lo7 = wasm_v128_and(lo, low7), hi7 = wasm_v128_and(hi, low7);
        const v128_t lon = wasm_u8x16_shr(lo, 7), hin = wasm_u8x16_shr(hi, 7);
        const float d = f16(blk);
        for (int j = 0; j < nt; j++) {
            const lean_q8_32 *a = (const lean_q8_32 *)(x + (size_t)j * xrb) + b;
            const v128_t pos = rdot(a->qs + 16, hi7, rdot(a->qs, lo7, wasm_i32x4_splat(0)));
            const v128_t neg = rdot(a->qs + 16, hin, rdot(a->qs, lon, wasm_i32x4_splat(0)));
            const int32_t qa = hsum_i32(wasm_i32x4_sub(pos, wasm_i32x4_shl(neg, 7)));
            sum[j] = lean_legacy_step(sum[j], d, 0.0f, false, a, qa);
        }
    }
    for (int j = 0; j < nt; j++) y[j * ldy] = sum[j];
}

/* ---- Q4_K, Q5_K, Q6_K (lean_q8_k activations) ----
 * A super-block's 256 raw quants in element order (16 vectors), each sub-block's scale as an
 * int32 splat; Q4_K / Q5_K also the mins (msum = [m0 m0 .. m7 m7] . bsums), Q6_K its 16 int8
 * scales as int16 (for 32 sum sc[s] bsums[s]). */

typedef struct kblock {
    v128_t q[16];
    v128_t sc[16];   /* Q4_K / Q5_K: sub-block s / 2's scale in sc[s]; Q6_K: sub-block s's */
    v128_t m16[2];   /* Q4_K / Q5_K: the mins, each twice; Q6_K: the scales; int16 */
    float d, dmin;
} kblock;

INLINE void k45_unpack(int f, const uint8_t *b, kblock *u) {
    uint8_t sc[8], m[8];
    lean_k4_scales(b + 4, sc, m);
    u->d = f16(b), u->dmin = f16(b + 2);
    for (int j = 0; j < 8; j += 2)
        for (int half = 0; half < 2; half++) k45_raw(f, b, j, half, &u->q[2 * j + half], &u->q[2 * j + 2 + half]);
    int16_t mins[16];
    for (int j = 0; j < 8; j++) {
        mins[2 * j] = mins[2 * j + 1] = m[j];
        u->sc[2 * j] = u->sc[2 * j + 1] = wasm_i32x4_splat(sc[j]);
    }
    u->m16[0] = wasm_v128_load(mins), u->m16[1] = wasm_v128_load(mins + 8);
}

INLINE void k6_unpack(const uint8_t *b, kblock *u) {
    const int8_t *sc = (const int8_t *)(b + 192);
    u->d = f16(b + 208), u->dmin = 0.0f;
    for (int h = 0; h < 2; h++)
        for (int g = 0; g < 2; g++) {
            v128_t e[4];
            k6_raw(b, h, g, e);
            for (int k = 0; k < 4; k++) u->q[8 * h + 2 * k + g] = e[k]; /* sub-block 8 h + 2 k + g */
        }
    int16_t s16[16];
    for (int s = 0; s < 16; s++) s16[s] = sc[s], u->sc[s] = wasm_i32x4_splat(sc[s]);
    u->m16[0] = wasm_v128_load(s16), u->m16[1] = wasm_v128_load(s16 + 8);
}

INLINE void k_tile(int f, TILE_ARGS) {
    float sum[LEAN_TILE_TOKENS] = {0};
    for (int64_t b = 0; b < cols / LEAN_QK_K; b++) {
        kblock u;
        const uint8_t *blk = w + (size_t)b * kblock_bytes[f];
        if (f == K_Q6) k6_unpack(blk, &u);
        else k45_unpack(f, blk, &u);
        for (int j = 0; j < nt; j++) {
            const lean_q8_k *a = (const lean_q8_k *)(x + (size_t)j * xrb) + b;
            v128_t acc = wasm_i32x4_splat(0);
            for (int s = 0; s < 16; s++) /* 16 elements each: Q6_K a sub-block, Q4_K / Q5_K half one */
                acc = wasm_i32x4_add(acc, wasm_i32x4_mul(rdot(a->qs + 16 * s, u.q[s], wasm_i32x4_splat(0)), u.sc[s]));
            const v128_t bs0 = wasm_v128_load(a->bsums), bs1 = wasm_v128_load(a->bsums + 8);
            const int32_t side = hsum_i32(wasm_i32x4_add(wasm_i32x4_dot_i16x8(u.m16[0], bs0),
                                                         wasm_i32x4_dot_i16x8(u.m16[1], bs1)));
            const int32_t isum = hsum_i32(acc) - (f == K_Q6 ? 32 * side : 0);
            sum[j] = lean_k_step(sum[j], u.d, u.dmin, f != K_Q6, a->d, isum, f == K_Q6 ? 0 : side);
        }
    }
    for (int j = 0; j < nt; j++) y[j * ldy] = sum[j];
}

/* ---- table ---- */

TILED_FORMAT(q4_0, legacy_tile, L_Q4_0)
TILED_FORMAT(q4_1, legacy_tile, L_Q4_1)
TILED_FORMAT(q5_0, legacy_tile, L_Q5_0)
TILED_FORMAT(q5_1, legacy_tile, L_Q5_1)
TILED_FORMAT(q8_0, q8_0_tile, L_Q8_0)
TILED_FORMAT(q4_k, k_tile, K_Q4)
TILED_FORMAT(q5_k, k_tile, K_Q5)
TILED_FORMAT(q6_k, k_tile, K_Q6)

static const lean_kernels table = {
    .name = "relaxed",
    .same_as_generic = true,
    .matmul = {[LEAN_TYPE_Q4_0] = matmul_q4_0, [LEAN_TYPE_Q4_1] = matmul_q4_1, [LEAN_TYPE_Q5_0] = matmul_q5_0,
               [LEAN_TYPE_Q5_1] = matmul_q5_1, [LEAN_TYPE_Q8_0] = matmul_q8_0, [LEAN_TYPE_Q4_K] = matmul_q4_k, [LEAN_TYPE_Q5_K] = matmul_q5_k,
               [LEAN_TYPE_Q6_K] = matmul_q6_k},
};

const lean_kernels *lean_kernels_relaxed(void) { return &table; }

#else /* not wasm32 with relaxed SIMD */

const lean_kernels *lean_kernels_relaxed(void) { return NULL; }

#endif
