/* arm_neon.c — the NEON kernel table (kernels.h) for aarch64.
 *
 * Chosen at compile time: every aarch64 CPU has NEON, so on aarch64 lean_kernels_neon always
 * returns the table; elsewhere the file is the stub at the end. The int8 dot products use sdot
 * (vdotq_s32) when the compiler targets it (__ARM_FEATURE_DOTPROD: -march=armv8.2-a+dotprod or
 * any CPU that has it, e.g. -mcpu=native on an Apple M1, a Graviton 2 or later), else
 * smull + sadalp (vmull_s8, vpadalq_s16); both give the same exact integer sums.
 *
 * What it does: the matmuls of every weight format (the exact ones, float activations, too:
 * kernels.h "exact") and the attention primitives, giving the generic table's bits: each
 * output's float operations are the generic kernel's, in its order
 * (lane i of 8 partial sums for the float formats, then its pairwise combination; per block
 * sum += (d_w * d_x) * float(isum), kernels_shared.h's steps; no FMA: gcc -std=c11 does not
 * contract and kernels_shared.h turns clang's contraction off); only the integer block sums,
 * exact, are computed another way. What it does not: exp_sum, SwiGLU (libm's expf, from the
 * generic table) and the activation quantizer (quant_act.c's, also generic's) —
 * lean_kernels_select fills them.
 *
 * Integer block sums: the weights are unpacked once per row and tile of tokens into int8 lanes
 * in element order, the format's offset subtracted (Q4_0 q - 8, Q5_0 q - 16, Q6_K q - 32:
 * all within int8; Q8_0's -128 times an activation, |a| <= 127, fits the int16 products of
 * smull); a block's 32 products are summed into 4 int32 lanes, the K-quants' sub-block sums
 * each times its scale (vmlaq_n_s32), then added across lanes.
 *
 * Sections: helpers · F32 F16 BF16 · legacy formats · K-quants · exact · attention · table
 */
#include "cpu/kernels_shared.h"

#if defined(__aarch64__) && defined(__ARM_NEON)

#include <arm_neon.h>
#include <string.h>

#define INLINE static inline __attribute__((always_inline))

/* ---- helpers ---- */

INLINE float f16(const uint8_t *p) { return lean_f16_to_f32((uint16_t)(p[0] | (p[1] << 8))); }

/* acc + the products of 16 int8 pairs, summed in fours (sdot) or pairs (smull + sadalp) into
 * the 4 int32 lanes */
#if defined(__ARM_FEATURE_DOTPROD)
INLINE int32x4_t dot16(int32x4_t acc, int8x16_t w, int8x16_t a) { return vdotq_s32(acc, w, a); }
#else
INLINE int32x4_t dot16(int32x4_t acc, int8x16_t w, int8x16_t a) {
    acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(w), vget_low_s8(a)));
    return vpadalq_s16(acc, vmull_high_s8(w, a));
}
#endif

/* ---- F32, F16, BF16 (float activations) ----
 * The generic kernel's 8 partial sums as two vectors: lo holds lanes 0..3 (elements 8k..8k+3),
 * hi lanes 4..7; the tail is zero-padded, which adds +0 to lanes the generic kernel leaves
 * alone (a sum that starts at +0 is never -0, so that changes no bit). Byte loads: rows need
 * no alignment. */

enum { W_F32, W_F16, W_BF16 };

/* 4 weights of format f at p as floats (the f16 and bf16 conversions are exact) */
INLINE float32x4_t load_w4(int f, const uint8_t *p) {
    if (f == W_F32) return vreinterpretq_f32_u8(vld1q_u8(p));
    const uint16x4_t h = vreinterpret_u16_u8(vld1_u8(p));
    if (f == W_F16) return vcvt_f32_f16(vreinterpret_f16_u16(h));
    return vreinterpretq_f32_u32(vshlq_n_u32(vmovl_u16(h), 16));
}

/* Elements c .. c + 8 of a row: 8 weights (zero-padded past cols) as floats. */
INLINE void load_w8(int f, const uint8_t *row, int64_t cols, int64_t c, float32x4_t *wv) {
    const int eb = f == W_F32 ? 4 : 2;
    if (cols - c >= 8) {
        wv[0] = load_w4(f, row + eb * c), wv[1] = load_w4(f, row + eb * (c + 4));
        return;
    }
    uint8_t tmp[32] = {0};
    memcpy(tmp, row + eb * c, (size_t)(eb * (cols - c)));
    wv[0] = load_w4(f, tmp), wv[1] = load_w4(f, tmp + 4 * eb);
}

INLINE void load_x8(const float *x, int64_t cols, int64_t c, float32x4_t *xv) {
    if (cols - c >= 8) {
        xv[0] = vld1q_f32(x + c), xv[1] = vld1q_f32(x + c + 4);
        return;
    }
    float tmp[8] = {0};
    memcpy(tmp, x + c, sizeof(float) * (size_t)(cols - c));
    xv[0] = vld1q_f32(tmp), xv[1] = vld1q_f32(tmp + 4);
}

/* kernels_generic.c's combine8 of the lanes lo (0..3) and hi (4..7) */
INLINE float combine8(float32x4_t lo, float32x4_t hi) {
    const float32x4_t s = vaddq_f32(lo, hi);
    return (vgetq_lane_f32(s, 0) + vgetq_lane_f32(s, 1)) + (vgetq_lane_f32(s, 2) + vgetq_lane_f32(s, 3));
}

INLINE void float_tile(int f, TILE_ARGS) {
    float32x4_t lo[LEAN_TILE_TOKENS], hi[LEAN_TILE_TOKENS];
    for (int j = 0; j < nt; j++) lo[j] = hi[j] = vdupq_n_f32(0.0f);
    for (int64_t c = 0; c < cols; c += 8) {
        float32x4_t wv[2], xv[2];
        load_w8(f, w, cols, c, wv);
        for (int j = 0; j < nt; j++) {
            load_x8((const float *)(x + (size_t)j * xrb), cols, c, xv);
            lo[j] = vaddq_f32(lo[j], vmulq_f32(wv[0], xv[0]));
            hi[j] = vaddq_f32(hi[j], vmulq_f32(wv[1], xv[1]));
        }
    }
    for (int j = 0; j < nt; j++) y[j * ldy] = combine8(lo[j], hi[j]);
}

/* ---- Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 (lean_q8_32 activations) ----
 * Block layouts (formats.c): d f16 [m f16] [qh 4 bytes] qs; element j < 16 is qs[j]'s low
 * nibble, j >= 16 qs[j - 16]'s high nibble, its fifth bit bit j of qh. */

enum { L_Q4_0, L_Q4_1, L_Q5_0, L_Q5_1, L_Q8_0 };

static const size_t legacy_bytes[] = {18, 20, 22, 24, 34};

typedef struct lblock {
    int8x16_t lo, hi; /* elements 0..15, 16..31, offset subtracted */
    float d, m;       /* scale; minimum (_1 formats) */
} lblock;

/* Bit j of the little-endian u32 at p -> 0x10 in byte j, for j in [16 half, 16 half + 16). */
INLINE uint8x16_t fifth_bits(const uint8_t *p, int half) {
    uint32_t h;
    memcpy(&h, p, sizeof h);
    static const uint8_t spread[2][16] = {{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1},
                                          {2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3}};
    static const uint8_t bit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    const uint8x16_t bytes = vqtbl1q_u8(vreinterpretq_u8_u32(vdupq_n_u32(h)), vld1q_u8(spread[half]));
    return vandq_u8(vtstq_u8(bytes, vld1q_u8(bit)), vdupq_n_u8(0x10));
}

INLINE lblock legacy_unpack(int f, const uint8_t *b) {
    lblock u;
    u.d = f16(b);
    u.m = f == L_Q4_1 || f == L_Q5_1 ? f16(b + 2) : 0.0f;
    if (f == L_Q8_0) {
        u.lo = vld1q_s8((const int8_t *)(b + 2)), u.hi = vld1q_s8((const int8_t *)(b + 18));
        return u;
    }
    static const int qs_at[] = {2, 4, 6, 8};
    const uint8x16_t raw = vld1q_u8(b + qs_at[f]);
    uint8x16_t lo = vandq_u8(raw, vdupq_n_u8(0x0f)), hi = vshrq_n_u8(raw, 4);
    if (f == L_Q5_0 || f == L_Q5_1) {
        const uint8_t *qh = b + (f == L_Q5_0 ? 2 : 4);
        lo = vorrq_u8(lo, fifth_bits(qh, 0)), hi = vorrq_u8(hi, fifth_bits(qh, 1));
    }
    const uint8x16_t off = vdupq_n_u8(f == L_Q4_0 ? 8 : f == L_Q5_0 ? 16 : 0);
    u.lo = vreinterpretq_s8_u8(vsubq_u8(lo, off)), u.hi = vreinterpretq_s8_u8(vsubq_u8(hi, off));
    return u;
}

INLINE void legacy_tile(int f, TILE_ARGS) {
    const bool has_min = f == L_Q4_1 || f == L_Q5_1;
    float sum[LEAN_TILE_TOKENS] = {0};
    for (int64_t b = 0; b < cols / 32; b++) {
        const lblock u = legacy_unpack(f, w + (size_t)b * legacy_bytes[f]);
        for (int j = 0; j < nt; j++) {
            const lean_q8_32 *a = (const lean_q8_32 *)(x + (size_t)j * xrb) + b;
            const int32x4_t p = dot16(dot16(vdupq_n_s32(0), u.lo, vld1q_s8(a->qs)), u.hi, vld1q_s8(a->qs + 16));
            sum[j] = lean_legacy_step(sum[j], u.d, u.m, has_min, a, vaddvq_s32(p));
        }
    }
    for (int j = 0; j < nt; j++) y[j * ldy] = sum[j];
}

/* ---- Q4_K, Q5_K, Q6_K, Q2_K, Q3_K (lean_q8_k activations) ----
 * A super-block is unpacked into 16 int8 vectors in element order with one int32 scale per
 * group of `per` vectors (Q4_K / Q5_K: 2, a 32-weight sub-block; Q6_K, Q2_K, Q3_K: 1, their
 * 16-weight sub-blocks; weights Q6_K q - 32, Q3_K q3 in [-4, 3], Q2_K q in [0, 3]).
 * isum = sum over groups of scale * (the group's products); Q4_K / Q5_K also
 * msum = sum_j m[j] (bsums[2j] + bsums[2j + 1]), Q2_K msum = sum_s m[s] bsums[s]. The float
 * step is the generic kernel's. */

enum { K_Q4, K_Q5, K_Q6, K_Q2, K_Q3 };
/* the X_ formats from Q4_K on (kernels.h) are these, in order: f - X_Q4_K picks one */
_Static_assert(X_Q5_K - X_Q4_K == K_Q5 && X_Q6_K - X_Q4_K == K_Q6 && X_Q2_K - X_Q4_K == K_Q2 && X_Q3_K - X_Q4_K == K_Q3,
               "kernels.h's X_ order");

static const size_t kblock_bytes[] = {LEAN_Q4_K_BYTES, LEAN_Q5_K_BYTES, LEAN_Q6_K_BYTES, LEAN_Q2_K_BYTES,
                                      LEAN_Q3_K_BYTES};

/* the formats with mins (w = d sc q - dmin m) */
INLINE bool k_has_min(int f) { return f == K_Q4 || f == K_Q5 || f == K_Q2; }

typedef struct kblock {
    int8x16_t q[16];
    int32_t sc[16];    /* sc[g]: the scale of the group that starts at vector g */
    int16x8_t m16[2];  /* Q4_K / Q5_K: the 8 mins in m16[0]; Q2_K: the 16 mins */
    float d, dmin;
} kblock;

/* Q4_K / Q5_K (block: d, dmin, 12 scale bytes, [qh 32 bytes], qs 128 bytes): sub-blocks j and
 * j + 1 are the low and high nibbles of the same 32 qs bytes; Q5_K's fifth bit of element l of
 * sub-block j is bit j of qh[l]. */
INLINE void k45_unpack(int f, const uint8_t *b, kblock *u) {
    uint8_t sc[8], m[8];
    lean_k4_scales(b + 4, sc, m);
    u->d = f16(b), u->dmin = f16(b + 2);
    const uint8_t *qs = f == K_Q5 ? b + 48 : b + 16;
    for (int j = 0; j < 8; j += 2, qs += 32) {
        for (int half = 0; half < 2; half++) {
            const uint8x16_t raw = vld1q_u8(qs + 16 * half);
            uint8x16_t lo = vandq_u8(raw, vdupq_n_u8(0x0f)), hi = vshrq_n_u8(raw, 4);
            if (f == K_Q5) {
                const uint8x16_t hb = vld1q_u8(b + 16 + 16 * half), one = vdupq_n_u8(1);
                lo = vorrq_u8(lo, vshlq_n_u8(vandq_u8(vshlq_u8(hb, vdupq_n_s8((int8_t)-j)), one), 4));
                hi = vorrq_u8(hi, vshlq_n_u8(vandq_u8(vshlq_u8(hb, vdupq_n_s8((int8_t)(-j - 1))), one), 4));
            }
            u->q[2 * j + half] = vreinterpretq_s8_u8(lo);
            u->q[2 * (j + 1) + half] = vreinterpretq_s8_u8(hi);
        }
        u->sc[2 * j] = sc[j], u->sc[2 * (j + 1)] = sc[j + 1]; /* the groups' first vectors */
    }
    int16_t mins[8];
    for (int j = 0; j < 8; j++) mins[j] = m[j];
    u->m16[0] = vld1q_s16(mins);
}

/* Q6_K (block: ql 128, qh 64, 16 int8 scales, d): in half h, byte l < 32 of ql (and ql + 32)
 * gives elements l (l + 32) by its low nibble and l + 64 (l + 96) by its high one, their two
 * high bits the four 2-bit fields of qh[l]; element e's scale is sc[e / 16]. */
INLINE void k6_unpack(const uint8_t *b, kblock *u) {
    const int8_t *sc = (const int8_t *)(b + 192);
    const uint8x16_t m4 = vdupq_n_u8(0x0f), m3 = vdupq_n_u8(3), off = vdupq_n_u8(32);
    u->d = f16(b + 208), u->dmin = 0.0f;
    for (int h = 0; h < 2; h++) {
        for (int g = 0; g < 2; g++) {
            const uint8x16_t la = vld1q_u8(b + 64 * h + 16 * g), lb = vld1q_u8(b + 64 * h + 32 + 16 * g);
            const uint8x16_t qh = vld1q_u8(b + 128 + 32 * h + 16 * g);
            const uint8x16_t e[4] = {
                vorrq_u8(vandq_u8(la, m4), vshlq_n_u8(vandq_u8(qh, m3), 4)),
                vorrq_u8(vandq_u8(lb, m4), vshlq_n_u8(vandq_u8(vshrq_n_u8(qh, 2), m3), 4)),
                vorrq_u8(vshrq_n_u8(la, 4), vshlq_n_u8(vandq_u8(vshrq_n_u8(qh, 4), m3), 4)),
                vorrq_u8(vshrq_n_u8(lb, 4), vshlq_n_u8(vshrq_n_u8(qh, 6), 4)),
            };
            for (int k = 0; k < 4; k++) { /* sub-block 8 h + 2 k + g */
                const int s = 8 * h + 2 * k + g;
                u->q[s] = vreinterpretq_s8_u8(vsubq_u8(e[k], off));
                u->sc[s] = sc[s];
            }
        }
    }
}

/* Q2_K (block: 16 scale / min bytes, qs 64, d, dmin), Q3_K (hmask 32, qs 64, 12 scale bytes, d):
 * elements 16p .. 16p + 15 of chunk c (32 weights, c = 4h + k) are bits 2k, 2k + 1 of
 * qs[32h + 16p ..]; Q3_K's third bit of element l of the chunk is bit c of hmask[l], and the
 * quant less 4 where it is clear. As int8 (Q2_K [0, 3], Q3_K [-4, 3]). */
INLINE int8x16_t k23_quants(int f, const uint8_t *b, int c, int p) {
    const uint8_t *qs = b + (f == K_Q2 ? 16 : 32) + 32 * (c / 4) + 16 * p;
    uint8x16_t q = vandq_u8(vshlq_u8(vld1q_u8(qs), vdupq_n_s8((int8_t)(-2 * (c % 4)))), vdupq_n_u8(3));
    if (f == K_Q3) {
        const uint8x16_t hb = vandq_u8(vshlq_u8(vld1q_u8(b + 16 * p), vdupq_n_s8((int8_t)-c)), vdupq_n_u8(1));
        q = vsubq_u8(vorrq_u8(q, vshlq_n_u8(hb, 2)), vdupq_n_u8(4));
    }
    return vreinterpretq_s8_u8(q);
}

/* Q2_K's sub-block s: scale b[s] & 15, min b[s] >> 4; Q3_K's: get_scale_q3_k (formats_layout.h) */
INLINE void k23_unpack(int f, const uint8_t *b, kblock *u) {
    for (int c = 0; c < 8; c++) u->q[2 * c] = k23_quants(f, b, c, 0), u->q[2 * c + 1] = k23_quants(f, b, c, 1);
    if (f == K_Q2) {
        u->d = f16(b + 80), u->dmin = f16(b + 82);
        const uint8x16_t m = vshrq_n_u8(vld1q_u8(b), 4);
        u->m16[0] = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(m)));
        u->m16[1] = vreinterpretq_s16_u16(vmovl_high_u8(m));
        for (int s = 0; s < 16; s++) u->sc[s] = b[s] & 0x0f;
    } else {
        u->d = f16(b + 108), u->dmin = 0.0f;
        for (int s = 0; s < 16; s++) u->sc[s] = get_scale_q3_k(s, b + 96);
    }
}

/* Q4_K / Q5_K: msum = sum_j m[j] (bsums[2j] + bsums[2j + 1]); Q2_K: sum_s m[s] bsums[s] */
INLINE int32_t k_msum(int f, const kblock *u, const lean_q8_k *a) {
    const int16x8_t b0 = vld1q_s16(a->bsums), b1 = vld1q_s16(a->bsums + 8);
    if (f == K_Q2) {
        const int32x4_t lo = vmlal_high_s16(vmull_s16(vget_low_s16(u->m16[0]), vget_low_s16(b0)), u->m16[0], b0);
        return vaddvq_s32(vmlal_high_s16(vmlal_s16(lo, vget_low_s16(u->m16[1]), vget_low_s16(b1)), u->m16[1], b1));
    }
    const int16x8_t pairs = vpaddq_s16(b0, b1);
    return vaddvq_s32(vmlal_high_s16(vmull_s16(vget_low_s16(u->m16[0]), vget_low_s16(pairs)), u->m16[0], pairs));
}

INLINE void k_tile(int f, TILE_ARGS) {
    const int per = f == K_Q4 || f == K_Q5 ? 2 : 1;
    float sum[LEAN_TILE_TOKENS] = {0};
    for (int64_t b = 0; b < cols / LEAN_QK_K; b++) {
        kblock u;
        const uint8_t *blk = w + (size_t)b * kblock_bytes[f];
        if (f == K_Q6) k6_unpack(blk, &u);
        else if (f == K_Q2 || f == K_Q3) k23_unpack(f, blk, &u);
        else k45_unpack(f, blk, &u);
        for (int j = 0; j < nt; j++) {
            const lean_q8_k *a = (const lean_q8_k *)(x + (size_t)j * xrb) + b;
            int32x4_t acc = vdupq_n_s32(0);
            for (int g = 0; g < 16; g += per) {
                int32x4_t p = dot16(vdupq_n_s32(0), u.q[g], vld1q_s8(a->qs + 16 * g));
                if (per == 2) p = dot16(p, u.q[g + 1], vld1q_s8(a->qs + 16 * g + 16));
                acc = vmlaq_n_s32(acc, p, u.sc[g]);
            }
            const int32_t isum = vaddvq_s32(acc);
            const int32_t msum = k_has_min(f) ? k_msum(f, &u, a) : 0;
            sum[j] = lean_k_step(sum[j], u.d, u.dmin, k_has_min(f), a->d, isum, msum);
        }
    }
    for (int j = 0; j < nt; j++) y[j * ldy] = sum[j];
}

/* ---- exact: F32 activations (kernels.h "exact") ----
 * The generic exact kernel's operations in its order, so its bits: each weight is the
 * reference dequantizer's float (formats.c), made by its operations (Q8_0 q d; Q4_0 / Q5_0
 * (q - z) d; Q4_1 / Q5_1 q d + m; Q4_K / Q5_K / Q2_K (d sc) q - dmin m; Q6_K (d sc) (q - 32);
 * Q3_K (d s) q3) 4 at a
 * time from the int8 quants widened and converted (exact); its product with the activation is
 * added into lane e % 8 of the 8 partial sums (lo: lanes 0..3, hi: 4..7), element by element,
 * a multiply then an add (no FMA: see the top); then combine8. A block is made 32 weights at
 * a time (a chunk: a legacy block, a Q4_K / Q5_K sub-block, Q6_K's, Q2_K's or Q3_K's weights
 * 32c .. 32c + 31, two sub-blocks) once per tile of up to 4 tokens. */

/* 16 int8 lanes -> 4 float vectors (elements 0..3, 4..7, 8..11, 12..15), exactly */
INLINE void i8_to_f32(int8x16_t b, float32x4_t *dst) {
    const int16x8_t lo = vmovl_s8(vget_low_s8(b)), hi = vmovl_high_s8(b);
    dst[0] = vcvtq_f32_s32(vmovl_s16(vget_low_s16(lo)));
    dst[1] = vcvtq_f32_s32(vmovl_high_s16(lo));
    dst[2] = vcvtq_f32_s32(vmovl_s16(vget_low_s16(hi)));
    dst[3] = vcvtq_f32_s32(vmovl_high_s16(hi));
}

/* Chunk c of the block at b (legacy formats: c = 0; K-quants: ks its scales) -> w[v], the
 * weights of elements 32c + 4v .. 32c + 4v + 3 as the reference dequantizer makes them. */
INLINE void x_chunk(int f, const uint8_t *b, const lean_kscale *ks, int c, float32x4_t w[8]) {
    int8x16_t lo, hi;    /* the int8 quants of elements 0..15, 16..31 (offset subtracted) */
    float s0, s1, m0, m1; /* their scales; minimums (added: _1 formats; subtracted: K) */
    if (f < X_Q4_K) { /* X_Q4_0 .. X_Q8_0 are L_Q4_0 .. L_Q8_0 */
        const lblock u = legacy_unpack(f, b);
        lo = u.lo, hi = u.hi, s0 = s1 = u.d, m0 = m1 = u.m;
    } else if (f == X_Q2_K || f == X_Q3_K) { /* X_Q2_K - X_Q4_K is K_Q2 (kernels.h) */
        lo = k23_quants(f - X_Q4_K, b, c, 0), hi = k23_quants(f - X_Q4_K, b, c, 1);
        s0 = ks->d[2 * c], s1 = ks->d[2 * c + 1];
        m0 = f == X_Q2_K ? ks->m[2 * c] : 0.0f, m1 = f == X_Q2_K ? ks->m[2 * c + 1] : 0.0f;
    } else if (f == X_Q6_K) { /* half h, quarter k: ql's nibble k / 2 at 64h + 32 (k % 2), qh's bits 2k */
        const int h = c / 4, k = c % 4;
        const uint8_t *ql = b + 64 * h + 32 * (k & 1), *qh = b + 128 + 32 * h;
        int8x16_t q[2];
        for (int p = 0; p < 2; p++) {
            uint8x16_t l = vld1q_u8(ql + 16 * p);
            l = k >> 1 ? vshrq_n_u8(l, 4) : vandq_u8(l, vdupq_n_u8(0x0f));
            const uint8x16_t hb = vandq_u8(vshlq_u8(vld1q_u8(qh + 16 * p), vdupq_n_s8((int8_t)(-2 * k))), vdupq_n_u8(3));
            q[p] = vreinterpretq_s8_u8(vsubq_u8(vorrq_u8(l, vshlq_n_u8(hb, 4)), vdupq_n_u8(32)));
        }
        lo = q[0], hi = q[1];
        s0 = ks->d[2 * c], s1 = ks->d[2 * c + 1], m0 = m1 = 0.0f;
    } else { /* Q4_K / Q5_K sub-block c: nibble c % 2 of qs[32 (c / 2) ..], fifth bit bit c of qh[l] */
        const uint8_t *qs = b + (f == X_Q5_K ? 48 : 16) + 32 * (c / 2);
        int8x16_t q[2];
        for (int p = 0; p < 2; p++) {
            const uint8x16_t raw = vld1q_u8(qs + 16 * p);
            uint8x16_t v = c & 1 ? vshrq_n_u8(raw, 4) : vandq_u8(raw, vdupq_n_u8(0x0f));
            if (f == X_Q5_K) {
                const uint8x16_t hb = vshlq_u8(vld1q_u8(b + 16 + 16 * p), vdupq_n_s8((int8_t)-c));
                v = vorrq_u8(v, vshlq_n_u8(vandq_u8(hb, vdupq_n_u8(1)), 4));
            }
            q[p] = vreinterpretq_s8_u8(v);
        }
        lo = q[0], hi = q[1];
        s0 = s1 = ks->d[c], m0 = m1 = ks->m[c];
    }
    i8_to_f32(lo, w), i8_to_f32(hi, w + 4);
    for (int v = 0; v < 8; v++) {
        const float32x4_t mv = vdupq_n_f32(v < 4 ? m0 : m1);
        w[v] = vmulq_n_f32(w[v], v < 4 ? s0 : s1);
        if (f == X_Q4_1 || f == X_Q5_1) w[v] = vaddq_f32(w[v], mv);
        else if (f == X_Q4_K || f == X_Q5_K || f == X_Q2_K) w[v] = vsubq_f32(w[v], mv);
    }
}

/* lo, hi += the 32 products w[v] x[4v ..], in element order (lane e % 8) */
INLINE void x_acc(const float32x4_t w[8], const float *x, float32x4_t *lo, float32x4_t *hi) {
    for (int v = 0; v < 8; v += 2) {
        *lo = vaddq_f32(*lo, vmulq_f32(w[v], vld1q_f32(x + 4 * v)));
        *hi = vaddq_f32(*hi, vmulq_f32(w[v + 1], vld1q_f32(x + 4 * v + 4)));
    }
}

X_TILE_FAMILY(float32x4_t, vdupq_n_f32(0.0f))

/* ---- attention ---- */

/* s[j] = q . k_j: the F32 row kernel (q[i] k_j[i] = k_j[i] q[i] in IEEE arithmetic). */
static void attn_scores(const float *q, const float *k, int64_t k_row_elems, int32_t n, int32_t hd, float *s) {
    for (int32_t j = 0; j < n; j++)
        float_tile(W_F32, hd, (const uint8_t *)(k + (int64_t)j * k_row_elems), (const uint8_t *)q, 0, 1, s + j, 0);
}

/* o = o * c, then += p[j] v_j in key order: 4 output elements at a time, the tail in scalar
 * (the same two roundings per term, no FMA). */
static void attn_accum(float *o, float c, const float *v, int64_t v_row_elems, const float *p, int32_t n,
                       int32_t hd) {
    int32_t i = 0;
    for (; i + 4 <= hd; i += 4) {
        float32x4_t ov = vmulq_n_f32(vld1q_f32(o + i), c);
        for (int32_t j = 0; j < n; j++)
            ov = vaddq_f32(ov, vmulq_n_f32(vld1q_f32(v + (int64_t)j * v_row_elems + i), p[j]));
        vst1q_f32(o + i, ov);
    }
    for (; i < hd; i++) {
        float acc = o[i] * c;
        for (int32_t j = 0; j < n; j++) acc += p[j] * v[(int64_t)j * v_row_elems + i];
        o[i] = acc;
    }
}

/* ---- table ---- */

TILED_TABLE("neon", lean_kernels_neon, TILED_QFORMAT, TILED_QFORMAT)

#else /* not aarch64 */

const lean_kernels *lean_kernels_neon(void) { return NULL; }

#endif
