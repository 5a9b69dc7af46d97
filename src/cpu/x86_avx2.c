/* x86_avx2.c — the AVX2 + FMA + F16C kernel table (kernels.h), for x86-64 CPUs that have
 * them (chosen at run time: lean_kernels_avx2 asks cpuid).
 *
 * What it does: the matmuls of every weight format, the attention primitives, SwiGLU (with a
 * polynomial exp) and the activation quantizer (quant_act.c's bytes) with 256-bit vectors. Every function carries the target attribute (AVX2 below), so the file builds with
 * the same flags as the rest of the tree and nothing here runs on a CPU without AVX2. On any
 * other target the file is only the stub at the end.
 *
 * How a quantized dot product is computed (per 32 weights, per row r and token t):
 *   q   the weight quants as unsigned bytes in element order (nibbles split, fifth or sixth
 *       bits merged in), unpacked once per row and reused for every token of a tile
 *   a   the token's int8 activations (lean_q8_32 / lean_q8_k)
 *   vpmaddubsw(q, a) -> 16 x i16 pair sums (no saturation: |q| <= 63, |a| <= 127),
 *   vpmaddwd with ones (or the K-quant sub-block scales) -> 8 x i32, exact;
 *   the formats' offsets come from the activation sums: Q4_0 sum (q - 8) a = sum q a - 8 s
 *   is one vpsubd of s from each of the 8 lanes (16 s for Q5_0: 2 s per lane); Q6_K's -32 and
 *   the K mins go through vpmaddwd with the bsums. Q8_0's weights are signed: |w| and
 *   sign(a, w) (ggml's trick).
 *   Then one float step per block (legacy) or super-block (K): acc = fma(d_w * d_x, float(isum),
 *   acc), 8 lanes per (row, token), summed across lanes once at the end (hsum).
 *
 * Tiles: rows x tokens of 2 x 4 (4 x 1 when a call has fewer than 4 tokens, 1 x 4 and 1 x 1 at
 * the edges), so 8 accumulators stay in registers; in a batch each 2-row tile is unpacked
 * once (onto the stack) for all its token tiles. For the K-quants the 8 (row, token) integer
 * sums of a super-block are built chunk by chunk, each row's chunk loaded once for 4 tokens. The per-(row, token) arithmetic is the same in every tile shape — the same
 * operations in the same order, each product of scales one IEEE multiply — so any split of
 * rows or tokens gives the same bits (kernels.h's contract; tests/test_kernels.c checks it).
 *
 * Exact (F32 activations, every quantized format): each weight dequantized to the reference's
 * float, FMA against the float activations (details at the section).
 *
 * Sections: helpers · F32 F16 BF16 · legacy formats · K-quants · exact · attention ·
 *           exponentials · activation quantization · table
 */
#include "cpu/kernels.h"

#if defined(__x86_64__)

#include "cpu/x86_tiles.h"

#include <cpuid.h>
#include <immintrin.h>
#include <math.h>
#include <string.h>

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#define AVX2 __attribute__((target("avx2,fma,f16c")))
#define AVX2_INLINE static inline X86_INLINE __attribute__((target("avx2,fma,f16c")))

/* ---- helpers ---- */

/* A batch's row tiles are unpacked once for all their token tiles when a row has at most this
 * many weights (the unpacked tile lives on the stack: ~20 KiB); longer rows unpack per token
 * tile. Either way the arithmetic of an output is the same. */
#define CACHE_COLS 4096

/* Decode streams every weight once from DRAM (a model is larger than the caches); the
 * hardware prefetchers stop at 4 KiB pages, so each row's reads also ask for the line
 * PREFETCH_BYTES ahead, which doubled a Q4_0 matvec's throughput from DRAM
 * (docs/runs/2026-12-04-moved-from-src.md). Prefetches never fault, so reading past the
 * matrix is harmless. */
#define PREFETCH_BYTES 4096

AVX2_INLINE void prefetch_ahead(const uint8_t *p) { _mm_prefetch((const char *)p + PREFETCH_BYTES, _MM_HINT_T0); }

AVX2_INLINE float f16(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, sizeof h);
    return _cvtsh_ss(h);
}

/* The lanes' sum in one fixed order: (0+4, 1+5, 2+6, 3+7), then (.0+.2, .1+.3), then the two. */
AVX2_INLINE float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* 16 bytes of packed nibbles -> 32 bytes: the low nibbles (elements 0..15), then the high. */
AVX2_INLINE __m256i nibbles(const uint8_t *p) {
    const __m128i raw = _mm_loadu_si128((const __m128i *)p);
    const __m256i both = _mm256_set_m128i(_mm_srli_epi16(raw, 4), raw);
    return _mm256_and_si256(both, _mm256_set1_epi8(0x0f));
}

/* Bit j of the little-endian u32 at p -> 0x10 in byte j (the fifth bit of element j). */
AVX2_INLINE __m256i fifth_bits(const uint8_t *p) {
    uint32_t x32;
    memcpy(&x32, p, sizeof x32);
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
    __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32((int)x32), shuf); /* byte j = byte j/8 of x */
    bytes = _mm256_or_si256(bytes, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe)); /* all but bit j%8 set */
    bytes = _mm256_cmpeq_epi8(bytes, _mm256_set1_epi64x(-1));               /* 0xff where bit j is */
    return _mm256_and_si256(bytes, _mm256_set1_epi8(0x10));
}

/* ---- F32, F16, BF16 (float activations) ----
 * Per (row, token) one 8-lane accumulator: lane i takes elements 8k + i in order; a partial
 * last vector is zero-padded (so rows of any length). */

enum { W_F32, W_F16, W_BF16 };

/* Elements c .. c + n (n <= 8) of a row as 8 floats, zero-padded. */
AVX2_INLINE __m256 load_w8(int f, const uint8_t *row, int64_t c, int n) {
    if (n == 8) {
        if (f == W_F32) return _mm256_loadu_ps((const float *)(row + 4 * c));
        const __m128i h = _mm_loadu_si128((const __m128i *)(row + 2 * c));
        if (f == W_F16) return _mm256_cvtph_ps(h);
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    }
    uint8_t tmp[32] = {0};
    memcpy(tmp, row + (f == W_F32 ? 4 : 2) * c, (size_t)n * (f == W_F32 ? 4 : 2));
    return load_w8(f, tmp, 0, 8);
}

AVX2_INLINE __m256 load_x8(const float *x, int64_t c, int n) {
    if (n == 8) return _mm256_loadu_ps(x + c);
    float tmp[8] = {0};
    memcpy(tmp, x + c, sizeof(float) * (size_t)n);
    return _mm256_loadu_ps(tmp);
}

/* The first n (<= 8) lanes of v -> x[c .. c + n). */
AVX2_INLINE void store_x8(float *x, int64_t c, __m256 v, int n) {
    if (n == 8) {
        _mm256_storeu_ps(x + c, v);
        return;
    }
    float tmp[8];
    _mm256_storeu_ps(tmp, v);
    memcpy(x + c, tmp, sizeof(float) * (size_t)n);
}

AVX2_INLINE void float_tile(int f, int RT, int TT, int64_t cols, const uint8_t *w, size_t wrb, int64_t r,
                            const uint8_t *x, size_t xrb, int32_t t, float *y, int64_t ldy) {
    __m256 acc[4][4];
    UNROLL
    for (int i = 0; i < RT; i++)
        UNROLL
        for (int j = 0; j < TT; j++) acc[i][j] = _mm256_setzero_ps();
    for (int64_t c = 0; c < cols; c += 8) {
        const int n = cols - c < 8 ? (int)(cols - c) : 8;
        __m256 wv[4];
        UNROLL
        for (int i = 0; i < RT; i++) {
            prefetch_ahead(w + (size_t)(r + i) * wrb + (size_t)c * (f == W_F32 ? 4 : 2));
            wv[i] = load_w8(f, w + (size_t)(r + i) * wrb, c, n);
        }
        UNROLL
        for (int j = 0; j < TT; j++) {
            const __m256 xv = load_x8((const float *)(x + (size_t)(t + j) * xrb), c, n);
            UNROLL
            for (int i = 0; i < RT; i++) acc[i][j] = _mm256_fmadd_ps(wv[i], xv, acc[i][j]);
        }
    }
    STORE_TILE(RT, TT, hsum);
}

AVX2_INLINE void matmul_float(int f, int64_t cols, const uint8_t *w, size_t w_row_bytes, int64_t r0, int64_t r1,
                              const uint8_t *x, size_t x_row_bytes, int32_t n_tok, float *y, int64_t y_row_elems) {
#define FT(RT, TT, r, t, U) float_tile(f, RT, TT, cols, w, w_row_bytes, r, x, x_row_bytes, t, y, y_row_elems)
    TILE_SCHEDULE(2, FT);
#undef FT
}

static AVX2 void matmul_f32(LEAN_MATMUL_ARGS) { matmul_float(W_F32, MATMUL_PASS); }
static AVX2 void matmul_f16(LEAN_MATMUL_ARGS) { matmul_float(W_F16, MATMUL_PASS); }
static AVX2 void matmul_bf16(LEAN_MATMUL_ARGS) { matmul_float(W_BF16, MATMUL_PASS); }

/* ---- Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 (lean_q8_32 activations) ---- */


/* One weight block, unpacked for vpmaddubsw. */
typedef struct lblock {
    __m256i q;    /* unsigned quants (Q8_0: |w|) */
    __m256i sgn;  /* Q8_0: the signed weights, for sign(a, w) */
    float d, m;   /* scale; minimum (_1 formats) */
} lblock;

AVX2_INLINE lblock legacy_unpack(int f, const uint8_t *b) {
    lblock u;
    u.d = f16(b);
    u.m = f == L_Q4_1 || f == L_Q5_1 ? f16(b + 2) : 0.0f;
    switch (f) {
    case L_Q4_0: u.q = nibbles(b + 2); break;
    case L_Q4_1: u.q = nibbles(b + 4); break;
    case L_Q5_0: u.q = _mm256_or_si256(nibbles(b + 6), fifth_bits(b + 2)); break;
    case L_Q5_1: u.q = _mm256_or_si256(nibbles(b + 8), fifth_bits(b + 4)); break;
    default:
        u.sgn = _mm256_loadu_si256((const __m256i *)(b + 2));
        u.q = _mm256_sign_epi8(u.sgn, u.sgn);
        break;
    }
    return u;
}

/* sum over the block of (weight quant - offset) * a, as 8 int32 lanes */
AVX2_INLINE __m256i legacy_isum(int f, const lblock *u, const lean_q8_32 *a) {
    __m256i av = _mm256_loadu_si256((const __m256i *)a->qs);
    if (f == L_Q8_0) av = _mm256_sign_epi8(av, u->sgn);
    __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(u->q, av), _mm256_set1_epi16(1));
    if (f == L_Q4_0) p = _mm256_sub_epi32(p, _mm256_set1_epi32(a->s));
    if (f == L_Q5_0) p = _mm256_sub_epi32(p, _mm256_set1_epi32(2 * a->s));
    return p;
}

/* Rows r .. r + RT - 1 x tokens t .. t + TT - 1. U (nullable): those rows' blocks already
 * unpacked, U[i * n_blocks + b] for row i and block b; without it they are unpacked here. */
AVX2_INLINE void legacy_tile(int f, int RT, int TT, int64_t cols, const uint8_t *w, size_t wrb, int64_t r,
                             const uint8_t *x, size_t xrb, int32_t t, float *y, int64_t ldy, const lblock *U) {
    const size_t bb = legacy_bytes[f];
    const bool has_min = f == L_Q4_1 || f == L_Q5_1;
    __m256 acc[4][4];
    float sm[4][4]; /* _1 formats: sum of m * (d_x * s), in block order */
    UNROLL
    for (int i = 0; i < RT; i++)
        UNROLL
        for (int j = 0; j < TT; j++) acc[i][j] = _mm256_setzero_ps(), sm[i][j] = 0.0f;
    for (int64_t b = 0; b < cols / 32; b++) {
        lblock u[4];
        UNROLL
        for (int i = 0; i < RT; i++) {
            if (U) {
                u[i] = U[(size_t)i * (size_t)(cols / 32) + (size_t)b];
                continue;
            }
            const uint8_t *blk = w + (size_t)(r + i) * wrb + (size_t)b * bb;
            prefetch_ahead(blk);
            u[i] = legacy_unpack(f, blk);
        }
        UNROLL
        for (int j = 0; j < TT; j++) {
            const lean_q8_32 *a = (const lean_q8_32 *)(x + (size_t)(t + j) * xrb) + b;
            const float ms = a->d * (float)a->s;
            UNROLL
            for (int i = 0; i < RT; i++) {
                const __m256i p = legacy_isum(f, &u[i], a);
                const float d = u[i].d * a->d;
                acc[i][j] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(p), acc[i][j]);
                if (has_min) sm[i][j] += u[i].m * ms;
            }
        }
    }
    UNROLL
    for (int i = 0; i < RT; i++)
        UNROLL
        for (int j = 0; j < TT; j++) y[(int64_t)(t + j) * ldy + r + i] = hsum(acc[i][j]) + sm[i][j];
}

AVX2_INLINE void matmul_legacy(int f, int64_t cols, const uint8_t *w, size_t w_row_bytes, int64_t r0, int64_t r1,
                               const uint8_t *x, size_t x_row_bytes, int32_t n_tok, float *y, int64_t y_row_elems) {
    const int64_t nb = cols / 32;
    lblock U[2 * (CACHE_COLS / 32)];
#define LT(RT, TT, r, t, U) legacy_tile(f, RT, TT, cols, w, w_row_bytes, r, x, x_row_bytes, t, y, y_row_elems, U)
#define ONE(p, k) (prefetch_ahead(p), U[k] = legacy_unpack(f, p))
#define UNPACK(r) UNPACK_TILE(2, r, nb, legacy_bytes[f], ONE)
    /* a batch: each 2-row tile's blocks unpacked once, for all of its token tiles */
    if (n_tok >= 4 && nb <= CACHE_COLS / 32) BATCH_SCHEDULE(2, UNPACK, U, LT);
    else TILE_SCHEDULE(2, LT);
#undef UNPACK
#undef ONE
#undef LT
}

/* ---- Q2_K, Q3_K, Q4_K, Q5_K, Q6_K (lean_q8_k activations) ----
 * A super-block of a row is first unpacked (kblock: 8 chunks of 32 unsigned quants in
 * element order, with the i16 multipliers of each chunk's pairs), then dotted with each
 * token of the tile: isum = sum_k vpmaddwd(vpmaddubsw(q_k, a_k), sc_k), 8 int32 lanes.
 *   Q4_K / Q5_K: chunk k is sub-block k (scale sc[k]); the mins give
 *                msum = vpmaddwd([m0 m0 m1 m1 ... m7 m7], bsums), and
 *                acc += d dx isum - dmin dx msum.
 *   Q6_K:        chunk k holds sub-blocks 2k (elements 0..15) and 2k + 1 (16..31), scales
 *                sc[2k] in the low 128-bit lane and sc[2k + 1] in the high one; the -32
 *                offset is 32 sum_g sc[g] bsums[g] = vpmaddwd(sc (16 x i16), bsums) << 5,
 *                taken from isum; acc += d dx isum.
 *   Q2_K:        chunk k as Q6_K's (sub-blocks 2k, 2k + 1; q in [0, 3], bits 2 (k % 4) of the
 *                32 bytes of qs half k / 4); the 16 mins give msum = vpmaddwd(m, bsums), then
 *                as Q4_K.
 *   Q3_K:        as Q6_K with q = q3 + 4 in [0, 7] (the hmask bit as bit 2) and an offset of 4:
 *                isum - vpmaddwd(s, bsums) << 2. */

typedef struct kblock {
    __m256i q[8];
    __m256i sc[8];
    __m256i m16; /* Q4_K/Q5_K: the mins, each twice; Q2_K: the 16 mins; Q6_K, Q3_K: the 16 scales */
    float d, dmin;
} kblock;

/* Q2_K, Q3_K: chunk k's 32 quants (bits 2 (k % 4) of qs[32 (k / 4) + l]; Q3_K: hmask[l] bit k
 * as bit 2) and its two sub-blocks' i16 multipliers from s16 (the 16 scales, lanes in order). */
AVX2_INLINE void k_unpack_q23(const uint8_t *qs, const uint8_t *hm, __m256i s16, kblock *u) {
    const __m256i m3 = _mm256_set1_epi8(0x03), four = _mm256_set1_epi8(0x04);
    __m128i s8[2] = {_mm256_castsi256_si128(s16), _mm256_extracti128_si256(s16, 1)};
    const __m256i hb = hm ? _mm256_loadu_si256((const __m256i *)hm) : _mm256_setzero_si256();
    for (int h = 0; h < 2; h++) {
        const __m256i raw = _mm256_loadu_si256((const __m256i *)(qs + 32 * h));
        for (int k = 0; k < 4; k++) {
            const int c = 4 * h + k;
            __m256i q = _mm256_and_si256(_mm256_srli_epi16(raw, 2 * k), m3);
            if (hm) q = _mm256_or_si256(q, _mm256_and_si256(_mm256_slli_epi16(_mm256_srli_epi16(hb, c), 2), four));
            u->q[c] = q;
            const __m128i lo = _mm_shuffle_epi8(s8[c / 4], _mm_set1_epi16((short)(0x0100 + 0x0404 * (c % 4)))),
                          hi = _mm_shuffle_epi8(s8[c / 4], _mm_set1_epi16((short)(0x0302 + 0x0404 * (c % 4))));
            u->sc[c] = _mm256_set_m128i(hi, lo);
        }
    }
}

AVX2_INLINE void k_unpack(int f, const uint8_t *b, kblock *u) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), m3 = _mm256_set1_epi8(0x03);
    if (f == K_Q2) {
        u->d = f16(b + 80);
        u->dmin = f16(b + 82);
        const __m256i sm = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)b));
        u->m16 = _mm256_srli_epi16(sm, 4);
        k_unpack_q23(b + 16, NULL, _mm256_and_si256(sm, _mm256_set1_epi16(0x0f)), u);
        return;
    }
    if (f == K_Q3) {
        u->d = f16(b + 108);
        u->m16 = _mm256_cvtepi8_epi16(q3k_scales(b + 96));
        k_unpack_q23(b + 32, b, u->m16, u);
        return;
    }
    if (f == K_Q6) {
        u->d = f16(b + 208);
        const int8_t *sc = (const int8_t *)(b + 192);
        for (int k = 0; k < 8; k++) u->sc[k] = _mm256_set_m128i(_mm_set1_epi16(sc[2 * k + 1]), _mm_set1_epi16(sc[2 * k]));
        u->m16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(b + 192)));
        for (int h = 0; h < 2; h++) {
            const __m256i ql0 = _mm256_loadu_si256((const __m256i *)(b + 64 * h));
            const __m256i ql1 = _mm256_loadu_si256((const __m256i *)(b + 64 * h + 32));
            const __m256i qh = _mm256_loadu_si256((const __m256i *)(b + 128 + 32 * h));
            const __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(qh, m3), 4);
            const __m256i h1 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), m3), 4);
            const __m256i h2 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), m3), 4);
            const __m256i h3 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), m3), 4);
            u->q[4 * h + 0] = _mm256_or_si256(_mm256_and_si256(ql0, m4), h0);
            u->q[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(ql1, m4), h1);
            u->q[4 * h + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4), h2);
            u->q[4 * h + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4), h3);
        }
        return;
    }
    /* Q4_K / Q5_K; _KS: repack.h's blocks, the scales decoded at load and the rest 4 bytes on */
    const bool ks = f == K_Q4_KS || f == K_Q5_KS, five = f == K_Q5 || f == K_Q5_KS;
    u->d = f16(b);
    u->dmin = f16(b + 2);
    /* in registers (KS: decoded at load): the mins stored as i16 one at a time and read back as
     * a vector stalled store-to-load forwarding (docs/runs/2026-12-05-llamacpp-cpu.md) */
    uint64_t sc, m;
    if (ks) memcpy(&sc, b + 4, 8), memcpy(&m, b + 12, 8);
    else lean_k4_scales64(b + 4, &sc, &m);
    b += ks ? 4 : 0;
    for (int j = 0; j < 8; j++) u->sc[j] = _mm256_set1_epi16((short)(uint8_t)(sc >> 8 * j));
    const __m128i mb = _mm_cvtsi64_si128((long long)m);
    u->m16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mb, mb)); /* each min twice */
    const uint8_t *qs = five ? b + 48 : b + 16;
    const __m256i hb = five ? _mm256_loadu_si256((const __m256i *)(b + 16)) : _mm256_setzero_si256();
    for (int j = 0; j < 8; j += 2) {
        const __m256i raw = _mm256_loadu_si256((const __m256i *)(qs + 16 * j));
        u->q[j] = _mm256_and_si256(raw, m4);
        u->q[j + 1] = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
        if (five) {
            const __m256i one = _mm256_set1_epi8(1);
            const __m256i b0 = _mm256_and_si256(_mm256_srli_epi16(hb, j), one);
            const __m256i b1 = _mm256_and_si256(_mm256_srli_epi16(hb, j + 1), one);
            u->q[j] = _mm256_or_si256(u->q[j], _mm256_slli_epi16(b0, 4));
            u->q[j + 1] = _mm256_or_si256(u->q[j + 1], _mm256_slli_epi16(b1, 4));
        }
    }
}

/* The float step of one (row, token) after its isum: the offsets / mins from the bsums. */
AVX2_INLINE __m256 k_finish(int f, const kblock *u, const lean_q8_k *a, __m256i isum, __m256 acc) {
    const __m256i bs = _mm256_loadu_si256((const __m256i *)a->bsums);
    const __m256i off = _mm256_madd_epi16(u->m16, bs);
    if (f == K_Q6) isum = _mm256_sub_epi32(isum, _mm256_slli_epi32(off, 5));
    if (f == K_Q3) isum = _mm256_sub_epi32(isum, _mm256_slli_epi32(off, 2));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(u->d * a->d), _mm256_cvtepi32_ps(isum), acc);
    if (f != K_Q6 && f != K_Q3) acc = _mm256_fnmadd_ps(_mm256_set1_ps(u->dmin * a->d), _mm256_cvtepi32_ps(off), acc);
    return acc;
}

/* As legacy_tile; U[i * n_superblocks + b]. */
AVX2_INLINE void k_tile(int f, int RT, int TT, int64_t cols, const uint8_t *w, size_t wrb, int64_t r,
                        const uint8_t *x, size_t xrb, int32_t t, float *y, int64_t ldy, const kblock *U) {
    __m256 acc[4][4];
    UNROLL
    for (int i = 0; i < RT; i++)
        UNROLL
        for (int j = 0; j < TT; j++) acc[i][j] = _mm256_setzero_ps();
    for (int64_t b = 0; b < cols / LEAN_QK_K; b++) {
        K_TILE_BLOCK(RT, TT, b);
        /* isum[i][j] = sum over the 8 chunks k, in order: each row's quants and multipliers
         * are loaded once per k for all TT tokens */
        __m256i isum[4][4];
        UNROLL
        for (int i = 0; i < RT; i++)
            UNROLL
            for (int j = 0; j < TT; j++) isum[i][j] = _mm256_setzero_si256();
        for (int k = 0; k < 8; k++) {
            UNROLL
            for (int i = 0; i < RT; i++) {
                const __m256i q = ui[i]->q[k], sc = ui[i]->sc[k];
                UNROLL
                for (int j = 0; j < TT; j++) {
                    const __m256i av = _mm256_loadu_si256((const __m256i *)(a[j]->qs + 32 * k));
                    isum[i][j] = _mm256_add_epi32(isum[i][j], _mm256_madd_epi16(_mm256_maddubs_epi16(q, av), sc));
                }
            }
        }
        UNROLL
        for (int i = 0; i < RT; i++)
            UNROLL
            for (int j = 0; j < TT; j++) acc[i][j] = k_finish(f, ui[i], a[j], isum[i][j], acc[i][j]);
    }
    STORE_TILE(RT, TT, hsum);
}

/* 2-row tiles (x86_tiles.h) */
AVX2_INLINE void matmul_k(MATMUL_PARAMS) {
    K_MATMUL(2);
}

QUANT_ENTRY_POINTS(AVX2)

/* ---- exact: F32 activations (kernels.h "exact") ----
 * Every weight is the reference dequantizer's float (formats.c), made in two instructions a
 * vector (convert the quants, one fma): each format's weight is an exact product plus at most
 * one rounded addition, so with finite scales Q4_0's (float)(q - 8) * d is fma(q, d, -8 d) (q d
 * and 8 d exact: an f16's 11 bits times 5), Q4_1's q d + m is fma(q, d, m), Q4_K's (d sc) q -
 * dmin m is fma(q, d sc, -(dmin m)) (d sc: 17 bits; times q: 22), Q6_K's (d sc)(q - 32) is
 * fma(q, d sc, -32 d sc), Q2_K's (d sc) q - dmin m (q < 4: 19 bits) as Q4_K's, Q3_K's (d s) q3 as
 * Q6_K's with q = q3 + 4 and -4 d s, Q8_0's q d one multiply. An infinite or NaN scale makes every one of
 * its block's fma weights NaN or infinite, hence the output it feeds; so an output that is not
 * finite is computed again the reference's way (x_dot_ref: its operations, the same chain),
 * and the fma shortcut never shows. Quants: Q4_0 / Q5_0's as the float 128 + q, one vpshufb a
 * vector (q4_bytes), then fma(128 + q, d, -(128 + 8) d); other 4 bits widened from the block's
 * nibbles (masked or shifted); Q5_1's fifth bit shifted to each lane's sign and chosen with
 * vblendvps; Q5_K's, Q6_K's, Q2_K's and Q3_K's unpacked a super-block at a time into bytes in
 * element order (the 8-bit path's k_unpack), then widened.
 * A row's vectors come in a fixed sequence (units: a legacy block, a Q4_K / Q5_K sub-block pair,
 * a Q6_K quarter), and each (row, token) output is one FMA chain over them in that sequence, then
 * hsum: the same in every tile shape, row range and batch. 4 tokens or fewer: 4 rows x TT
 * tokens, a block of one row at a time made in registers straight into the FMAs of the TT
 * tokens; a batch unpacks 4
 * rows at a time onto the stack (1 for rows of more than XCACHE_VECS * 2 weights) for 4 x 4 tiles. */

#define XCACHE_VECS 2048 /* 64 KiB of stack: 4 rows of up to 4096 weights, or one of 16384 */

AVX2_INLINE __m256i u8x8(const uint8_t *p) { return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p)); }
AVX2_INLINE __m256 cvt(__m256i v) { return _mm256_cvtepi32_ps(v); }
AVX2_INLINE __m256 bcast_f16(const uint8_t *p) { /* the f16 at p, exactly, in 8 lanes */
    uint16_t h;
    memcpy(&h, p, sizeof h);
    return _mm256_cvtph_ps(_mm_set1_epi16((short)h));
}

/* One row's block (legacy) or super-block (K), ready for its vectors (x_vec). */
typedef struct xblk {
    const uint8_t *q;       /* legacy, Q4_K: the packed nibbles (Q8_0: the int8 quants); else qv */
    __m256i qh;             /* Q5_0 / Q5_1: the fifth bits, in every lane */
    __m256i nib[2];         /* Q4_0, Q5_0: the quants of elements 0..15, 16..31 (q4_bytes) */
    __m256 d, z;            /* legacy: w = fma(q, d, z) */
    float kd[16], kz[16];   /* K, per sub-block: w = fma(q, kd, kz) */
    __m256i qv[8];          /* Q5_K, Q6_K: the quants, a byte each, in element order */
} xblk;

/* Q4_0, Q5_0: each quant as the float 128 + q, built by one vpshufb a vector (q4_vec) from a
 * block's bytes arranged here: the 16 bytes of nibbles in both 128-bit halves, of which the low
 * half keeps dwords 0 and 2 (elements 0..3 and 8..11 of a nibble half) and the high half dwords
 * 1 and 3 (4..7, 12..15); the others hold 0x43430430, which leaves a byte 0x43 after the mask
 * (byte 2) and after the shift by 4 (byte 0): the exponent byte of 128.0. Q5_0's fifth bits
 * (qh: bit j of the u32 for element j) are or-ed in as 0x10 (fifth_bits' test, in this order).
 * Then w = fma(128 + q, d, -136 d) = (q - 8) d, or -144 d for Q5_0's (q - 16) d: exact as the
 * fma of x_vec below. */
AVX2_INLINE void q4_bytes(const uint8_t *qs, const uint8_t *qh, __m256i nib[2]) {
    const __m256i raw = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
    const __m256i r = _mm256_blend_epi32(raw, _mm256_set1_epi32(0x43430430), 0x5a);
    const __m256i keep = _mm256_setr_epi32(0x0f0f0f0f, -1, 0x0f0f0f0f, -1, -1, 0x0f0f0f0f, -1, 0x0f0f0f0f);
    nib[0] = _mm256_and_si256(r, keep);
    nib[1] = _mm256_and_si256(_mm256_srli_epi16(r, 4), keep);
    if (!qh) return;
    uint32_t h32;
    memcpy(&h32, qh, sizeof h32);
    const __m256i hv = _mm256_set1_epi32((int)h32);
    /* byte p of nibble half h: the qh byte of its element (2 h + 0 or 1; -128: a C byte, 0),
     * then all bits but the element's set, so 0xff exactly where its fifth bit is */
    const __m256i at = _mm256_setr_epi32(0, -1, 0x01010101, -1, -1, 0, -1, 0x01010101);
    const __m256i others = _mm256_setr_epi32((int)0xf7fbfdfeu, 0, (int)0xf7fbfdfeu, 0, 0, 0x7fbfdfef, 0, 0x7fbfdfef);
    for (int h = 0; h < 2; h++) {
        const __m256i idx = _mm256_or_si256(_mm256_add_epi8(at, _mm256_set1_epi8((char)(2 * h))),
                                            _mm256_cmpeq_epi32(at, _mm256_set1_epi32(-1)));
        __m256i t = _mm256_or_si256(_mm256_shuffle_epi8(hv, idx), others);
        t = _mm256_and_si256(_mm256_cmpeq_epi8(t, _mm256_set1_epi8(-1)), _mm256_set1_epi8(0x10));
        nib[h] = _mm256_or_si256(nib[h], t);
    }
}

/* Q4_0's elements e .. e + 7 (e a multiple of 8) as the floats 128 + q: each lane's bytes
 * [zero, zero, the quant, 0x43] picked from q4_bytes' nibbles. */
AVX2_INLINE __m256 q4_vec(const xblk *p, int e) {
#define Q4_LANE(data, c) (int)(0x8080u | (unsigned)(data) << 16 | (unsigned)(c) << 24)
#define Q4_IDX(d0, d1, c0, c1)                                                                      \
    _mm256_setr_epi32(Q4_LANE(d0, c0), Q4_LANE(d0 + 1, c0), Q4_LANE(d0 + 2, c0), Q4_LANE(d0 + 3, c0),   \
                      Q4_LANE(d1, c1), Q4_LANE(d1 + 1, c1), Q4_LANE(d1 + 2, c1), Q4_LANE(d1 + 3, c1))
    const int hi = e / 16, odd = (e / 8) % 2;
    const __m256i idx = hi ? (odd ? Q4_IDX(8, 12, 4, 0) : Q4_IDX(0, 4, 4, 0)) : (odd ? Q4_IDX(8, 12, 6, 2) : Q4_IDX(0, 4, 6, 2));
#undef Q4_IDX
#undef Q4_LANE
    return _mm256_castsi256_ps(_mm256_shuffle_epi8(p->nib[hi], idx));
}

AVX2_INLINE void x_prep(int f, const uint8_t *b, xblk *p) {
    if (f == X_Q4_0 || f == X_Q5_0) {
        const bool five = f == X_Q5_0;
        p->d = bcast_f16(b);
        p->z = _mm256_mul_ps(p->d, _mm256_set1_ps(five ? -144.0f : -136.0f));
        p->q = b + (five ? 6 : 2);
        uint32_t qh = 0;
        if (five) memcpy(&qh, b + 2, sizeof qh);
        p->qh = _mm256_set1_epi32((int)qh); /* for x_quants (x_dot_ref) */
        q4_bytes(p->q, five ? b + 2 : NULL, p->nib);
        return;
    }
    if (f < X_Q4_K) {
        const bool min = f == X_Q4_1 || f == X_Q5_1, five = f == X_Q5_0 || f == X_Q5_1;
        p->d = bcast_f16(b);
        p->z = min ? bcast_f16(b + 2) : _mm256_mul_ps(p->d, _mm256_set1_ps(five ? -16.0f : -8.0f));
        p->q = b + (min ? 4 : 2) + (five ? 4 : 0);
        if (five) {
            uint32_t qh;
            memcpy(&qh, b + (min ? 4 : 2), sizeof qh);
            p->qh = _mm256_set1_epi32((int)qh);
        } else {
            p->qh = _mm256_setzero_si256(); /* unused; set so no compiler sees it read unset */
        }
        return;
    }
    p->d = p->z = _mm256_setzero_ps(); /* unused by K blocks; set so no compiler sees them read unset */
    p->qh = _mm256_setzero_si256();
    if (f == X_Q2_K || f == X_Q3_K) { /* the 8-bit path's unpacking: quants, Q3_K's scales (q = q3 + 4) */
        kblock kb;
        const bool two = f == X_Q2_K;
        k_unpack(two ? K_Q2 : K_Q3, b, &kb);
        const __m256i s16 = two ? _mm256_and_si256(_mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)b)),
                                                   _mm256_set1_epi16(0x0f))
                                : kb.m16;
        const __m256 d = bcast_f16(b + (two ? 80 : 108)), nm = _mm256_xor_ps(bcast_f16(b + 82), _mm256_set1_ps(-0.0f));
        for (int h = 0; h < 2; h++) {
            const __m128i sh = h ? _mm256_extracti128_si256(s16, 1) : _mm256_castsi256_si128(s16);
            const __m128i mh = h ? _mm256_extracti128_si256(kb.m16, 1) : _mm256_castsi256_si128(kb.m16);
            const __m256 ds = _mm256_mul_ps(d, cvt(_mm256_cvtepi16_epi32(sh)));
            _mm256_storeu_ps(p->kd + 8 * h, ds);
            _mm256_storeu_ps(p->kz + 8 * h, two ? _mm256_mul_ps(nm, cvt(_mm256_cvtepi16_epi32(mh)))
                                                : _mm256_mul_ps(ds, _mm256_set1_ps(-4.0f)));
        }
        for (int k = 0; k < 8; k++) p->qv[k] = kb.q[k];
        p->q = (const uint8_t *)p->qv;
        return;
    }
    if (f == X_Q6_K) {
        const __m256 d = bcast_f16(b + 208);
        for (int h = 0; h < 2; h++) {
            const __m256 ds = _mm256_mul_ps(d, cvt(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(b + 192 + 8 * h)))));
            _mm256_storeu_ps(p->kd + 8 * h, ds);
            _mm256_storeu_ps(p->kz + 8 * h, _mm256_mul_ps(ds, _mm256_set1_ps(-32.0f)));
        }
    } else {
        uint64_t sc, m;
        lean_k4_scales64(b + 4, &sc, &m);
        const __m256i scv = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)sc));
        const __m256i mv = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)m));
        _mm256_storeu_ps(p->kd, _mm256_mul_ps(bcast_f16(b), cvt(scv)));
        _mm256_storeu_ps(p->kz, _mm256_mul_ps(_mm256_xor_ps(bcast_f16(b + 2), _mm256_set1_ps(-0.0f)), cvt(mv)));
    }
    p->q = b + 16;
    if (f != X_Q4_K) {
        kblock kb;
        k_unpack(f == X_Q6_K ? K_Q6 : K_Q5, b, &kb);
        for (int k = 0; k < 8; k++) p->qv[k] = kb.q[k];
        p->q = (const uint8_t *)p->qv;
    }
}

/* Vector v of a block (x_prep's order): its first element, and its scale group. */
AVX2_INLINE int x_elem(int f, int v) {
    if (f < X_Q4_K || f >= X_Q2_K) return 8 * v;
    const int u = v / 8, i = v % 8;
    return f == X_Q6_K ? 128 * (u / 2) + 16 * (u % 2) + 32 * (i / 2) + 8 * (i % 2) : 64 * u + 8 * i;
}
AVX2_INLINE int x_group(int f, int e) { return f == X_Q4_K || f == X_Q5_K ? e / 32 : e / 16; }

/* Q5_0 / Q5_1: the fifth bits of elements e .. e + 7 (bit e + l of qh) in the lanes' sign bits. */
AVX2_INLINE __m256 fifth_signs(const xblk *p, int e) {
    const __m256i l = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_castsi256_ps(_mm256_sllv_epi32(p->qh, _mm256_sub_epi32(_mm256_set1_epi32(31 - e), l)));
}

/* The low 4 bits of elements e .. e + 7 of a legacy block (byte e % 16, the high nibble from
 * 16) or a Q4_K super-block (byte 32 (j / 2) + l of sub-block j, the high nibble for odd j). */
AVX2_INLINE __m256 nibbles_at(int f, const xblk *p, int e) {
    const bool hi = f == X_Q4_K ? (e / 32) % 2 : e / 16;
    const __m256i raw = u8x8(p->q + (f == X_Q4_K ? 32 * (e / 64) + e % 32 : e % 16));
    return cvt(hi ? _mm256_srli_epi32(raw, 4) : _mm256_and_si256(raw, _mm256_set1_epi32(15)));
}

/* The quants of elements e .. e + 7 of a prepared block as floats. */
AVX2_INLINE __m256 x_quants(int f, const xblk *p, int e) {
    if (f == X_Q8_0) return cvt(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(p->q + e))));
    if (f >= X_Q5_K) return cvt(u8x8(p->q + e));
    const __m256 lo = nibbles_at(f, p, e);
    if (f != X_Q5_0 && f != X_Q5_1) return lo;
    return _mm256_add_ps(lo, _mm256_blendv_ps(_mm256_setzero_ps(), _mm256_set1_ps(16.0f), fifth_signs(p, e)));
}

/* Elements e .. e + 7 of a prepared block: the reference's floats while its scales are finite. */
AVX2_INLINE __m256 x_vec(int f, const xblk *p, int e) {
    if (f == X_Q4_0 || f == X_Q5_0) return _mm256_fmadd_ps(q4_vec(p, e), p->d, p->z); /* (128 + q) d - (128 + 8) d */
    const __m256 q = x_quants(f, p, e);
    if (f == X_Q8_0) return _mm256_mul_ps(q, p->d);
    if (f < X_Q4_K) return _mm256_fmadd_ps(q, p->d, p->z);
    const int g = x_group(f, e);
    return _mm256_fmadd_ps(q, _mm256_set1_ps(p->kd[g]), _mm256_set1_ps(p->kz[g]));
}

/* The output of a row and a token's activations x by the reference's operations, in x_vec's
 * chain (rare, so out of line, where it cannot crowd the fast path's registers). */
static AVX2 __attribute__((noinline)) float x_dot_ref(int f, int64_t cols, const uint8_t *row, const float *x) {
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < cols / xblock_elems[f]; b++) {
        const uint8_t *blk = row + (size_t)b * xblock_bytes[f];
        xblk p;
        lean_kscale ks;
        x_prep(f, blk, &p);
        if (f >= X_Q4_K) lean_kscale_of(f, blk, &ks);
        for (int v = 0; v < xblock_elems[f] / 8; v++) {
            const int e = x_elem(f, v), g = x_group(f, e);
            const __m256 q = x_quants(f, &p, e);
            __m256 w;
            switch (f) { /* formats.c's operations, in its order */
            case X_Q4_0: w = _mm256_mul_ps(_mm256_sub_ps(q, _mm256_set1_ps(8.0f)), p.d); break;
            case X_Q5_0: w = _mm256_mul_ps(_mm256_sub_ps(q, _mm256_set1_ps(16.0f)), p.d); break;
            case X_Q4_1:
            case X_Q5_1: w = _mm256_add_ps(_mm256_mul_ps(q, p.d), p.z); break;
            case X_Q8_0: w = _mm256_mul_ps(q, p.d); break;
            case X_Q6_K: w = _mm256_mul_ps(_mm256_set1_ps(ks.d[g]), _mm256_sub_ps(q, _mm256_set1_ps(32.0f))); break;
            case X_Q3_K: w = _mm256_mul_ps(_mm256_set1_ps(ks.d[g]), _mm256_sub_ps(q, _mm256_set1_ps(4.0f))); break;
            default: w = _mm256_sub_ps(_mm256_mul_ps(_mm256_set1_ps(ks.d[g]), q), _mm256_set1_ps(ks.m[g])); break;
            }
            acc = _mm256_fmadd_ps(w, _mm256_loadu_ps(x + b * xblock_elems[f] + e), acc);
        }
    }
    return hsum(acc);
}

/* One vector position of RT rows x TT tokens: acc[i][t] += w[i] * x_t[e .. e + 7]. */
AVX2_INLINE void xfma(int RT, int TT, const __m256 *w, const float *const *xs, int64_t e, __m256 acc[4][4]) {
    __m256 xv[4];
    UNROLL
    for (int t = 0; t < TT; t++) xv[t] = _mm256_loadu_ps(xs[t] + e);
    UNROLL
    for (int i = 0; i < RT; i++)
        UNROLL for (int t = 0; t < TT; t++) acc[i][t] = _mm256_fmadd_ps(w[i], xv[t], acc[i][t]);
}

/* Up to 4 tokens: unit u (NK vectors) of RT prepared rows into their chains, one row at a
 * time, each weight vector made once for the TT tokens (xs[t] + e0: token t's block). */
AVX2_INLINE void x_rows(int f, int RT, int TT, int NK, const xblk *p, const float *const *xs, int64_t e0, int u,
                        __m256 acc[4][4]) {
    UNROLL
    for (int i = 0; i < RT; i++)
        UNROLL
        for (int k = 0; k < NK; k++) {
            const int e = x_elem(f, 8 * u + k);
            const __m256 wv = x_vec(f, &p[i], e);
            UNROLL
            for (int t = 0; t < TT; t++) acc[i][t] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(xs[t] + e0 + e), acc[i][t]);
        }
}

/* Rows r .. r + RT - 1 (at w, wrb apart) x TT tokens -> y[t * ldy + i]. cache: those rows'
 * vectors (x_unpack; row i at cache + i * cstride), each token's activations loaded once for
 * the RT rows; or NULL: each row's block made here, a row at a time (what is live stays in
 * registers). The same FMAs in the same order either way. */
AVX2_INLINE void x_tile(int f, int RT, int TT, int64_t cols, const uint8_t *w, size_t wrb, const __m256 *cache,
                        int64_t cstride, const float *const *xs, float *y, int64_t ldy) {
    const int nv = xblock_elems[f] / 8;
    __m256 acc[4][4], col[4];
    UNROLL
    for (int i = 0; i < RT; i++)
        UNROLL for (int t = 0; t < TT; t++) acc[i][t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < cols / xblock_elems[f]; b++) {
        const int64_t e0 = b * xblock_elems[f];
        if (cache) {
            for (int v0 = 0; v0 < nv; v0 += 4)
                UNROLL
                for (int k = 0; k < 4; k++) {
                    UNROLL for (int i = 0; i < RT; i++) col[i] = cache[i * cstride + b * nv + v0 + k];
                    xfma(RT, TT, col, xs, e0 + x_elem(f, v0 + k), acc);
                }
            continue;
        }
        /* decode streams the rows from DRAM: each block's lines asked for PREFETCH_BYTES ahead as
         * it is read (a tile's rows all at once filled the line buffers, the loop waiting on them) */
        UNROLL
        for (int i = 0; i < RT; i++)
            for (size_t o = 0; o < xblock_bytes[f]; o += 64) prefetch_ahead(w + (size_t)i * wrb + (size_t)b * xblock_bytes[f] + o);
        xblk p[4];
        if (f < X_Q4_K) { /* a row's block made and used before the next row's (what is live fits) */
            UNROLL
            for (int i = 0; i < RT; i++) {
                x_prep(f, w + (size_t)i * wrb + (size_t)b * xblock_bytes[f], &p[i]);
                x_rows(f, 1, TT, 4, &p[i], xs, e0, 0, &acc[i]);
            }
            continue;
        }
        UNROLL
        for (int i = 0; i < RT; i++) x_prep(f, w + (size_t)i * wrb + (size_t)b * xblock_bytes[f], &p[i]);
        if (f == X_Q4_K || f == X_Q5_K) { /* unrolled: constant element and scale indices (rolled, they
                                            * cost Q4_K ~5%; Q2_K / Q3_K / Q6_K gain nothing, or lose) */
            UNROLL
            for (int u = 0; u < 4; u++) x_rows(f, RT, TT, 8, p, xs, e0, u, acc);
        } else {
            for (int u = 0; u < 4; u++) x_rows(f, RT, TT, 8, p, xs, e0, u, acc);
        }
    }
    bool finite = true;
    UNROLL
    for (int i = 0; i < RT; i++)
        UNROLL for (int t = 0; t < TT; t++) {
            y[t * ldy + i] = hsum(acc[i][t]);
            finite &= isfinite(y[t * ldy + i]);
        }
    if (!finite)
        for (int i = 0; i < RT; i++)
            for (int t = 0; t < TT; t++) y[t * ldy + i] = x_dot_ref(f, cols, w + (size_t)i * wrb, xs[t]);
}

/* A row's vectors in x_prep's order -> cache (cols / 8 vectors). */
AVX2_INLINE void x_unpack(int f, int64_t cols, const uint8_t *row, __m256 *cache) {
    const int nv = xblock_elems[f] / 8;
    for (int64_t b = 0; b < cols / xblock_elems[f]; b++, cache += nv) {
        xblk p;
        x_prep(f, row + (size_t)b * xblock_bytes[f], &p);
        for (int v = 0; v < nv; v++) cache[v] = x_vec(f, &p, x_elem(f, v));
    }
}

/* x86_tiles.h's schedule over x_unpack and x_tile */
AVX2_INLINE void matmul_x(MATMUL_PARAMS) {
    EXACT_MATMUL(__m256, 8); /* x_tile prefetches block by block */
}

EXACT_ENTRY_POINTS(AVX2)

/* ---- attention ---- */

/* Eight keys at a time: eight FMA chains (lane i of key k's accumulator takes elements
 * 8m + i), then one reduction network that sums each accumulator's lanes (hadd pairs, hadd
 * again, then the two 128-bit halves) into one vector of the eight scores. A key's score
 * depends only on its own accumulator and that fixed tree, so a group short of eight keys
 * (zero accumulators for the missing ones) gives the same bits; hd of any size (the last
 * partial vector zero-padded). */
static AVX2 void attn_scores(const float *q, const float *k, int64_t k_row_elems, int32_t n, int32_t hd, float *s) {
    for (int32_t j = 0; j < n; j += 8) {
        const int nk = n - j < 8 ? n - j : 8;
        __m256 acc[8];
        UNROLL
        for (int u = 0; u < 8; u++) acc[u] = _mm256_setzero_ps();
        for (int32_t i = 0; i < hd; i += 8) {
            const int nv = hd - i < 8 ? hd - i : 8;
            const __m256 qv = load_x8(q, i, nv);
            if (nk == 8) {
                UNROLL
                for (int u = 0; u < 8; u++)
                    acc[u] = _mm256_fmadd_ps(qv, load_x8(k + (int64_t)(j + u) * k_row_elems, i, nv), acc[u]);
            } else {
                for (int u = 0; u < nk; u++)
                    acc[u] = _mm256_fmadd_ps(qv, load_x8(k + (int64_t)(j + u) * k_row_elems, i, nv), acc[u]);
            }
        }
        const __m256 t0 = _mm256_hadd_ps(acc[0], acc[1]), t1 = _mm256_hadd_ps(acc[2], acc[3]);
        const __m256 t2 = _mm256_hadd_ps(acc[4], acc[5]), t3 = _mm256_hadd_ps(acc[6], acc[7]);
        const __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
        const __m256 r = _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
        store_x8(s, j, r, nk);
    }
}

/* o = o * c, then += p[j] v_j in key order; 8 output elements at a time. */
static AVX2 void attn_accum(float *o, float c, const float *v, int64_t v_row_elems, const float *p, int32_t n,
                            int32_t hd) {
    int32_t i = 0;
    const __m256 cv = _mm256_set1_ps(c);
    for (; i + 8 <= hd; i += 8) {
        __m256 ov = _mm256_mul_ps(_mm256_loadu_ps(o + i), cv);
        for (int32_t j = 0; j < n; j++)
            ov = _mm256_fmadd_ps(_mm256_set1_ps(p[j]), _mm256_loadu_ps(v + (int64_t)j * v_row_elems + i), ov);
        _mm256_storeu_ps(o + i, ov);
    }
    for (; i < hd; i++) {
        float acc = o[i] * c;
        for (int32_t j = 0; j < n; j++) acc = __builtin_fmaf(p[j], v[(int64_t)j * v_row_elems + i], acc);
        o[i] = acc;
    }
}

/* ---- exponentials: SwiGLU and the softmax numerators ----
 * e^x as Cephes' expf: x = n ln2 + r with n = round(x / ln2) (ln2 in two parts, so r is
 * exact), e^r by a degree-6 polynomial, 2^n put in the exponent; x clamped to [-87.3, 88.7]
 * (normal results; e^-87.3 ~ 1.2e-38 stands in for smaller ones). Within 2 ulp of expf. */

AVX2_INLINE __m256 exp8(__m256 x) {
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.33654f)), _mm256_set1_ps(88.72283f));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(_mm256_mul_ps(p, r), r, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    /* n in [-126, 128]: 2^n in two steps, so 2^128 (x near 88.7) does not overflow the exponent */
    const __m256i ni = _mm256_cvtps_epi32(n);
    const __m256i h = _mm256_srai_epi32(ni, 1);
    const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(h, _mm256_set1_epi32(127)), 23));
    const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(ni, h), _mm256_set1_epi32(127)), 23));
    return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}

/* Eight at a time; the tail through the same vector code, zero-padded. */
static AVX2 void swiglu(float *gate, const float *up, int64_t n) {
    for (int64_t i = 0; i < n; i += 8) {
        const int nv = n - i < 8 ? (int)(n - i) : 8;
        const __m256 g = load_x8(gate, i, nv), u = load_x8(up, i, nv);
        const __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), g));
        const __m256 v = _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), u);
        store_x8(gate, i, v, nv);
    }
}

/* Eight lanes of partial sums (lane i takes elements 8k + i; the padding of a partial last
 * vector is masked to 0), summed with hsum. */
static AVX2 float exp_sum(float *s, int32_t n, float m) {
    __m256 acc = _mm256_setzero_ps();
    const __m256 mv = _mm256_set1_ps(m);
    for (int32_t i = 0; i < n; i += 8) {
        const int nv = n - i < 8 ? n - i : 8;
        __m256 e = exp8(_mm256_sub_ps(load_x8(s, i, nv), mv));
        if (nv < 8) {
            const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
            e = _mm256_and_ps(e, _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(nv), lane)));
        }
        store_x8(s, i, e, nv);
        acc = _mm256_add_ps(acc, e);
    }
    return hsum(acc);
}

/* ---- activation quantization ----
 * quant_act.c's definition, 8 values per vector: max |x| on the bit patterns (integer max,
 * exact), the same two scalar divisions, then x * id rounded with the same magic-number add,
 * clamped, narrowed. Every step is the scalar one on each lane, so the bytes are the same. */

AVX2_INLINE float block_quant(const float *x, int8_t *qs, int n) {
    const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff);
    __m256i mx = _mm256_setzero_si256();
    for (int j = 0; j < n; j += 8)
        mx = _mm256_max_epu32(mx, _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(x + j)), abs_mask));
    __m128i m = _mm_max_epu32(_mm256_castsi256_si128(mx), _mm256_extracti128_si256(mx, 1));
    m = _mm_max_epu32(m, _mm_shuffle_epi32(m, _MM_SHUFFLE(1, 0, 3, 2)));
    m = _mm_max_epu32(m, _mm_shuffle_epi32(m, _MM_SHUFFLE(2, 3, 0, 1)));
    const float amax = _mm_cvtss_f32(_mm_castsi128_ps(m));
    const float d = amax / 127.0f;
    const float id = d > 0.0f ? 127.0f / amax : 0.0f;
    const __m256 idv = _mm256_set1_ps(id), magic = _mm256_set1_ps(12582912.f);
    const __m256i lo = _mm256_set1_epi32(-127), hi = _mm256_set1_epi32(127);
    for (int j = 0; j < n; j += 32) {
        __m256i q[4];
        for (int k = 0; k < 4; k++) {
            const __m256 v = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(x + j + 8 * k), idv), magic);
            __m256i i = _mm256_sub_epi32(_mm256_and_si256(_mm256_castps_si256(v), _mm256_set1_epi32(0x007fffff)),
                                         _mm256_set1_epi32(0x00400000));
            q[k] = _mm256_min_epi32(_mm256_max_epi32(i, lo), hi);
        }
        /* int32 -> int8 in element order: the packs interleave 128-bit lanes, the permute undoes it */
        const __m256i p16a = _mm256_packs_epi32(q[0], q[1]), p16b = _mm256_packs_epi32(q[2], q[3]);
        const __m256i p8 = _mm256_packs_epi16(p16a, p16b);
        _mm256_storeu_si256((__m256i *)(qs + j),
                            _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
    }
    return d;
}

static AVX2 void quantize_act(lean_act_type act, const float *x, void *dst, int64_t n) {
    if (act == LEAN_ACT_Q8_32) {
        lean_q8_32 *b = dst;
        for (int64_t i = 0; i < n / 32; i++, x += 32, b++) {
            b->d = block_quant(x, b->qs, 32);
            const __m256i s16 = _mm256_maddubs_epi16(_mm256_set1_epi8(1), _mm256_loadu_si256((const __m256i *)b->qs));
            __m256i s32 = _mm256_madd_epi16(s16, _mm256_set1_epi16(1));
            __m128i s = _mm_add_epi32(_mm256_castsi256_si128(s32), _mm256_extracti128_si256(s32, 1));
            s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
            s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
            b->s = _mm_cvtsi128_si32(s);
        }
    } else if (act == LEAN_ACT_Q8_K) {
        lean_q8_k *b = dst;
        for (int64_t i = 0; i < n / LEAN_QK_K; i++, x += LEAN_QK_K, b++) {
            b->d = block_quant(x, b->qs, LEAN_QK_K);
            for (int g = 0; g < 16; g += 2) { /* two sums of 16 per 32 bytes */
                const __m256i s16 =
                    _mm256_maddubs_epi16(_mm256_set1_epi8(1), _mm256_loadu_si256((const __m256i *)(b->qs + 16 * g)));
                const __m256i s32 = _mm256_madd_epi16(s16, _mm256_set1_epi16(1)); /* 4 per 16 bytes */
                __m128i s = _mm_hadd_epi32(_mm256_castsi256_si128(s32), _mm256_extracti128_si256(s32, 1));
                s = _mm_hadd_epi32(s, s); /* [sum of group g, sum of group g + 1, ...] */
                b->bsums[g] = (int16_t)_mm_cvtsi128_si32(s);
                b->bsums[g + 1] = (int16_t)_mm_extract_epi32(s, 1);
            }
        }
    } else {
        lean_quantize_act(act, x, dst, n);
    }
}

/* ---- table ---- */

static const lean_kernels table = {
    .name = "avx2",
    .matmul = {[LEAN_TYPE_F32] = matmul_f32, [LEAN_TYPE_F16] = matmul_f16, [LEAN_TYPE_BF16] = matmul_bf16,
               [LEAN_TYPE_Q8_0] = matmul_q8_0, [LEAN_TYPE_Q4_0] = matmul_q4_0, [LEAN_TYPE_Q4_1] = matmul_q4_1,
               [LEAN_TYPE_Q5_0] = matmul_q5_0, [LEAN_TYPE_Q5_1] = matmul_q5_1,
               [LEAN_TYPE_Q2_K] = matmul_q2_k, [LEAN_TYPE_Q3_K] = matmul_q3_k, [LEAN_TYPE_Q4_K] = matmul_q4_k,
               [LEAN_TYPE_Q5_K] = matmul_q5_k, [LEAN_TYPE_Q6_K] = matmul_q6_k},
    .matmul_packed = {[LEAN_TYPE_Q4_K] = matmul_ks_q4_k, [LEAN_TYPE_Q5_K] = matmul_ks_q5_k},
    EXACT_TABLE,
    .attn_scores = attn_scores, .attn_accum = attn_accum, .exp_sum = exp_sum, .swiglu = swiglu,
    .quantize_act = quantize_act,
};

/* AVX2 and FMA from the compiler's cpuid cache (which also checks that the OS saves the
 * YMM registers); F16C, which __builtin_cpu_supports does not name in every compiler, from
 * cpuid leaf 1 (ECX bit 29). */
const lean_kernels *lean_kernels_avx2(void) {
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return NULL;
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 29))) return NULL;
    return &table;
}

#else /* not x86-64 */

const lean_kernels *lean_kernels_avx2(void) { return NULL; }

#endif
