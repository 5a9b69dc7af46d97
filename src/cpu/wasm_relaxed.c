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
 * and Q2_K are in [0, 63] (wasm_shared.h) and the activations in [-127, 127], so every pair sum is below
 * 2 * 127 * 63 < 2^15: exact everywhere, the integer block sums are those of simd128, and the
 * float step (kernels_shared.h) is the generic one: the generic table's bits (same_as_generic,
 * tested). Q8_0's weights are signed (-128 included): split into two such operands, w = (w &
 * 0x7f) - 128 [w < 0], they took four dots a block where simd128's int16 dot takes two, and were
 * slower than simd128 (docs/runs/2026-12-07-wasm-prefill.md): Q8_0 is simd128's. relaxed_madd
 * may or may not fuse (engine by engine), which would change bits between browsers: not used,
 * so the float formats stay simd128's.
 *
 * The integer sums: isum = sum (q - z) a = sum q a - z s (legacy: s the block's activation sum,
 * lean_q8_32.s); K-quants sum q a per sub-block as int16 pairs (i16x8.relaxed_dot, the same
 * pmaddubsw), times its scale by i32x4.dot_i16x8 (int32 lanes); Q6_K subtracts
 * 32 sum sc[s] bsums[s]. Q3_K is simd128's: this table's own was slower
 * (docs/runs/2026-12-06-q23-simd.md). Magnitudes as in wasm_simd128.c (|sum| < 2^28 a super-block).
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

/* ---- Q4_0, Q4_1, Q5_0, Q5_1 (lean_q8_32 activations; Q8_0 is simd128's) ---- */

/* A block's raw quants (legacy_raw: elements 0..15 -> q[0], 16..31 -> q[1]) . the activations
 * a (elements 0..15), a + 16, as 4 lanes not yet added (the offset not taken out) */
INLINE v128_t legacy_dot(const v128_t q[2], const int8_t *a) {
    return rdot(a + 16, q[1], rdot(a, q[0], wasm_i32x4_splat(0)));
}

INLINE void legacy_tile(int f, TILE_ARGS) {
    const bool has_min = f == L_Q4_1 || f == L_Q5_1;
    const int32_t z = legacy_offset(f);
    float sum[LEAN_TILE_TOKENS] = {0};
    for (int64_t b = 0; b < cols / 32; b++) {
        const uint8_t *blk = w + (size_t)b * legacy_bytes[f];
        v128_t q[2];
        legacy_raw(f, blk, &q[0], &q[1]);
        const float d = f16(blk), m = has_min ? f16(blk + 2) : 0.0f;
        for (int j = 0; j < nt; j++) {
            const lean_q8_32 *a = (const lean_q8_32 *)(x + (size_t)j * xrb) + b;
            sum[j] = lean_legacy_step(sum[j], d, m, has_min, a, hsum_i32(legacy_dot(q, a->qs)) - z * a->s);
        }
    }
    for (int j = 0; j < nt; j++) y[j * ldy] = sum[j];
}

/* For legacy_tile4: a block's raw quants (q[0], q[1]), and the block dots of 4 rows' with a */
INLINE void legacy_prep(int f, const uint8_t *blk, v128_t q[4]) { legacy_raw(f, blk, &q[0], &q[1]); }

INLINE void legacy_dot4(int f, const v128_t q[4][4], const lean_q8_32 *a, v128_t s[4]) {
    (void)f;
    for (int k = 0; k < 4; k++) s[k] = legacy_dot(q[k], a->qs);
}

LEGACY_TILE4_FAMILY(legacy_offset(f))

/* ---- Q4_K, Q5_K, Q6_K, Q2_K, Q3_K (lean_q8_k activations) ----
 * A super-block's 256 raw quants in element order (16 vectors), each sub-block's scale as an
 * int32 splat; Q4_K / Q5_K also the mins (msum = [m0 m0 .. m7 m7] . bsums), Q2_K its 16 mins
 * (msum = m . bsums), Q6_K its 16 int8 scales as int16 (for 32 sum sc[s] bsums[s]). */

typedef struct kblock {
    v128_t q[16];
    v128_t sc[16];   /* Q4_K / Q5_K: sub-block s / 2's scale in sc[s]; the others: sub-block s's; int16 */
    v128_t m16[2];   /* Q4_K / Q5_K: the mins, each twice; Q2_K: the mins; Q6_K: the scales; int16 */
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
        u->sc[2 * j] = u->sc[2 * j + 1] = wasm_i16x8_splat(sc[j]);
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
    for (int s = 0; s < 16; s++) s16[s] = sc[s], u->sc[s] = wasm_i16x8_splat(sc[s]);
    u->m16[0] = wasm_v128_load(s16), u->m16[1] = wasm_v128_load(s16 + 8);
}

/* Q2_K (layout: wasm_shared.h, k23_raw) */
INLINE void k2_unpack(const uint8_t *b, kblock *u) {
    for (int s = 0; s < 16; s++) u->sc[s] = wasm_i16x8_splat((int16_t)k23_scale(K_Q2, b, s));
    for (int c = 0; c < 8; c++) u->q[2 * c] = k23_raw(K_Q2, b, c, 0), u->q[2 * c + 1] = k23_raw(K_Q2, b, c, 1);
    u->d = f16(b + 80), u->dmin = f16(b + 82);
    q2_mins16(b, u->m16);
}

/* sum a[i] q[i] over 16 lanes as 8 int16 pair sums (a int8 activations, q raw quants in
 * [0, 63]): each within 2 * 127 * 63 < 2^15, and Q4_K / Q5_K's two added (q < 32) within
 * 4 * 127 * 31 < 2^15: exact, no saturation */
INLINE v128_t rdot16(const int8_t *a, v128_t q) { return wasm_i16x8_relaxed_dot_i8x16_i7x16(wasm_v128_load(a), q); }

/* A super-block's sum q sc . a (int32 lanes, not yet added) and its side sum (Q4_K / Q5_K / Q2_K:
 * the mins . bsums; Q6_K: sc . bsums). The int16 pair sums times the scale by i32x4.dot_i16x8
 * (one multiply-add, where an int32 multiply is two); Q4_K / Q5_K: the two halves of a
 * sub-block share a scale, so their pairs are added first. */
INLINE void k_dot(int f, const kblock *u, const lean_q8_k *a, v128_t *acc, v128_t *side) {
    v128_t s = wasm_i32x4_splat(0);
    if (f != K_Q4 && f != K_Q5)
        for (int k = 0; k < 16; k++) /* 16 elements a sub-block */
            s = wasm_i32x4_add(s, wasm_i32x4_dot_i16x8(rdot16(a->qs + 16 * k, u->q[k]), u->sc[k]));
    else
        for (int k = 0; k < 16; k += 2) /* 32 */
            s = wasm_i32x4_add(s, wasm_i32x4_dot_i16x8(wasm_i16x8_add(rdot16(a->qs + 16 * k, u->q[k]),
                                                                      rdot16(a->qs + 16 * k + 16, u->q[k + 1])),
                                                       u->sc[k]));
    const v128_t bs0 = wasm_v128_load(a->bsums), bs1 = wasm_v128_load(a->bsums + 8);
    *acc = s;
    *side = wasm_i32x4_add(wasm_i32x4_dot_i16x8(u->m16[0], bs0), wasm_i32x4_dot_i16x8(u->m16[1], bs1));
}

INLINE void k_unpack(int f, const uint8_t *blk, kblock *u) {
    if (f == K_Q6) k6_unpack(blk, u);
    else if (f == K_Q2) k2_unpack(blk, u);
    else k45_unpack(f, blk, u);
}

INLINE void k_tile(int f, TILE_ARGS) {
    float sum[LEAN_TILE_TOKENS] = {0};
    for (int64_t b = 0; b < cols / LEAN_QK_K; b++) {
        kblock u;
        k_unpack(f, w + (size_t)b * kblock_bytes[f], &u);
        for (int j = 0; j < nt; j++) {
            const lean_q8_k *a = (const lean_q8_k *)(x + (size_t)j * xrb) + b;
            v128_t acc, sv;
            k_dot(f, &u, a, &acc, &sv);
            const int32_t side = hsum_i32(sv), isum = hsum_i32(acc) - (f == K_Q6 ? 32 * side : 0);
            sum[j] = lean_k_step(sum[j], u.d, u.dmin, k_has_min(f), a->d, isum, f == K_Q6 ? 0 : side);
        }
    }
    for (int j = 0; j < nt; j++) y[j * ldy] = sum[j];
}

/* Rows r .. r + 3 x NT tokens -> y[j ldy + 0..3] (TILE4_FORMAT's k_tile4), as legacy_tile4:
 * each row's super-block unpacked once and dotted with the NT tokens while it is fresh (the
 * decode step was slower with the four rows unpacked first), then the four rows' sums reduced
 * together and lean_k_step in lanes (k_step4) */
INLINE void k_tile4_n(int f, int NT, int64_t cols, const uint8_t *w, size_t wrb, const uint8_t *x, size_t xrb,
                      float *y, int64_t ldy) {
    v128_t sum[LEAN_TILE_TOKENS];
    for (int j = 0; j < NT; j++) sum[j] = wasm_f32x4_splat(0.0f);
    for (int64_t b = 0; b < cols / LEAN_QK_K; b++) {
        v128_t acc[LEAN_TILE_TOKENS][4], side[LEAN_TILE_TOKENS][4];
        float d[4], dmin[4];
        for (int k = 0; k < 4; k++) {
            kblock u;
            k_unpack(f, w + k * wrb + (size_t)b * kblock_bytes[f], &u);
            for (int j = 0; j < NT; j++)
                k_dot(f, &u, (const lean_q8_k *)(x + (size_t)j * xrb) + b, &acc[j][k], &side[j][k]);
            d[k] = u.d, dmin[k] = u.dmin;
        }
        const v128_t dw = wasm_f32x4_make(d[0], d[1], d[2], d[3]), mw = wasm_f32x4_make(dmin[0], dmin[1], dmin[2], dmin[3]);
        for (int j = 0; j < NT; j++) {
            const v128_t ms = hsum4_i32(side[j]);
            const v128_t is = f == K_Q6 ? wasm_i32x4_sub(hsum4_i32(acc[j]), wasm_i32x4_shl(ms, 5)) : hsum4_i32(acc[j]);
            sum[j] = k_step4(f, sum[j], dw, mw, ((const lean_q8_k *)(x + (size_t)j * xrb) + b)->d, is, ms);
        }
    }
    for (int j = 0; j < NT; j++) wasm_v128_store(y + j * ldy, sum[j]);
}

TILE4_BY_NT(k)

/* ---- table ---- */

TILE4_FORMAT(q4_0, legacy, L_Q4_0)
TILE4_FORMAT(q4_1, legacy, L_Q4_1)
TILE4_FORMAT(q5_0, legacy, L_Q5_0)
TILE4_FORMAT(q5_1, legacy, L_Q5_1)
TILE4_FORMAT(q4_k, k, K_Q4)
TILE4_FORMAT(q5_k, k, K_Q5)
TILE4_FORMAT(q6_k, k, K_Q6)
TILE4_FORMAT(q2_k, k, K_Q2)

static const lean_kernels table = {
    .name = "relaxed",
    .same_as_generic = true,
    .matmul = {[LEAN_TYPE_Q4_0] = matmul_q4_0, [LEAN_TYPE_Q4_1] = matmul_q4_1, [LEAN_TYPE_Q5_0] = matmul_q5_0,
               [LEAN_TYPE_Q5_1] = matmul_q5_1, [LEAN_TYPE_Q4_K] = matmul_q4_k,
               [LEAN_TYPE_Q5_K] = matmul_q5_k, [LEAN_TYPE_Q6_K] = matmul_q6_k, [LEAN_TYPE_Q2_K] = matmul_q2_k},
};

const lean_kernels *lean_kernels_relaxed(void) { return &table; }

#else /* not wasm32 with relaxed SIMD */

const lean_kernels *lean_kernels_relaxed(void) { return NULL; }

#endif
