/* x86_avx512.c — the AVX-512 (F, BW, VL) + VNNI kernel table (kernels.h), for x86-64 CPUs that
 * have them (chosen at run time: lean_kernels_avx512 asks cpuid).
 *
 * What it does: the matmuls of the quantized formats with 512-bit vectors and the VNNI dot
 * products; the float formats, attention, SwiGLU and quantization are the AVX2 table's (lean_kernels_select fills
 * this table's empty entries from the next table the CPU runs). Every function carries the
 * target attribute (AVX512 below); on any other target the file is only the stub at the end.
 *
 * Legacy formats (Q4_0 Q4_1 Q5_0 Q5_1 Q8_0), two 32-weight blocks per vector, per row r and
 * token t:
 *   q    the two blocks' quants as unsigned bytes in element order (zmm), unpacked once per
 *        row and reused for every token of the tile; the fifth bits come from the 64-bit mask
 *        qh0 | qh1 << 32 in one masked move; Q8_0's signed weights are stored + 128 (w ^ 0x80)
 *   a    the token's two lean_q8_32 blocks (zmm)
 *   vpdpbusd(init, q, a) sums the u8 x s8 products in fours into 16 int32 lanes (8 per block)
 *   on top of init = the format's offset, spread over the 8 lanes of each block: -s (Q4_0:
 *   8 lanes x -s = -8 s), -2 s (Q5_0), -16 s (Q8_0: sum (w + 128) a - 128 s = sum w a), 0 (_1)
 *   acc = fma(float(isum), [d_w0 d_x0 x8 | d_w1 d_x1 x8], acc); the _1 formats add m d_x s in
 *   scalar, as the AVX2 file does. An odd last block runs as a pair with a zero second block.
 * K-quants (Q4_K Q5_K Q6_K), 64 weights per vector: the super-block is unpacked as in the AVX2
 * file (4 zmm of quants, the i16 multiplier of every pair), then per token
 *   isum = sum over 4 vectors of vpdpwssd(isum, vpmaddubsw(q, a), sc)
 * (the 16 sums of a 4 x 4 tile built vector by vector, each row's vector loaded once) and the
 * mins / Q6_K's -32 offset from the bsums (vpmaddwd), then one float step.
 *
 * Tiles: 4 rows x 4 tokens (16 accumulators of the 32 registers) when a call has 4 tokens or
 * more, else 4 x 1 (8 x 1 was slower from DRAM: more streams); 1 x 4 and 1 x 1 at the edges.
 * In a batch each 4-row tile is unpacked once (onto the stack) for all its token tiles. Every (row, token) output is computed by the
 * same operations in the same order in every tile shape, so any split of rows or tokens gives
 * the same bits (kernels.h's contract; tests/test_kernels.c checks it).
 *
 * Sections: helpers · legacy formats · K-quants · table
 */
#include "kernels.h"

#if defined(__x86_64__)

#include <cpuid.h>
#include <immintrin.h>
#include <string.h>

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#define TARGET "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c"
#define AVX512 __attribute__((target(TARGET)))
#define AVX512_INLINE static inline __attribute__((always_inline, target(TARGET)))
/* Tile loops have constant trip counts once inlined; unrolled, their arrays live in registers. */
#define UNROLL _Pragma("GCC unroll 8")

#define MATMUL_ARGS                                                                                  \
    int64_t cols, const void *w, size_t w_row_bytes, int64_t r0, int64_t r1, const void *x,        \
        size_t x_row_bytes, int32_t n_tok, float *y, int64_t y_row_elems
#define MATMUL_PASS cols, (const uint8_t *)w, w_row_bytes, r0, r1, (const uint8_t *)x, x_row_bytes, n_tok, y, y_row_elems

/* ---- helpers ---- */

/* A batch's 4-row tiles are unpacked once for all their token tiles when a row has at most
 * this many weights (the unpacked tile lives on the stack: ~50 KiB); longer rows unpack per
 * token tile. Either way the arithmetic of an output is the same. */
#define CACHE_COLS 4096

/* See x86_avx2.c: software prefetch across 4 KiB pages for weights streamed from DRAM. */
#define PREFETCH_BYTES 4096

AVX512_INLINE void prefetch_ahead(const uint8_t *p) { _mm_prefetch((const char *)p + PREFETCH_BYTES, _MM_HINT_T0); }

AVX512_INLINE float f16(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, sizeof h);
    return _cvtsh_ss(h);
}

/* The lanes' sum in one fixed order: the two 256-bit halves, then x86_avx2.c's order. */
AVX512_INLINE float hsum(__m512 v) {
    const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)); /* no DQ needed */
    const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v), hi);
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* [a | b]: two 256-bit halves. */
AVX512_INLINE __m512i join(__m256i a, __m256i b) { return _mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1); }
AVX512_INLINE __m512 joinf(__m256 a, __m256 b) {
    return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(a)), _mm256_castps_pd(b), 1));
}

/* The tile schedule: 4 x 4 tiles when there are 4 tokens or more, else 4 x 1; then the edges.
 * TILE(RT, TT, r, t) computes rows r.. and tokens t... */
#define TILE_SCHEDULE(TILE)                                                                         \
    do {                                                                                            \
        int64_t r = r0;                                                                             \
        if (n_tok >= 4) {                                                                           \
            for (; r + 4 <= r1; r += 4) {                                                           \
                int32_t t = 0;                                                                      \
                for (; t + 4 <= n_tok; t += 4) TILE(4, 4, r, t);                                    \
                for (; t < n_tok; t++) TILE(4, 1, r, t);                                            \
            }                                                                                       \
        } else {                                                                                    \
            for (; r + 4 <= r1; r += 4)                                                             \
                for (int32_t t = 0; t < n_tok; t++) TILE(4, 1, r, t);                               \
        }                                                                                           \
        for (; r < r1; r++) {                                                                       \
            int32_t t = 0;                                                                          \
            for (; t + 4 <= n_tok; t += 4) TILE(1, 4, r, t);                                        \
            for (; t < n_tok; t++) TILE(1, 1, r, t);                                                \
        }                                                                                           \
    } while (0)

/* ---- Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 (lean_q8_32 activations) ---- */

enum { L_Q4_0, L_Q4_1, L_Q5_0, L_Q5_1, L_Q8_0 };

static const size_t legacy_bytes[] = {18, 20, 22, 24, 34};

/* Lane order. The nibble formats unpack most cheaply as [b0 lo | b1 lo | b0 hi | b1 hi]
 * (16 bytes each: elements 0..15 of block 0, of block 1, then 16..31 of each), so for them the
 * activations are permuted to that order once per token instead of the weights once per row;
 * Q8_0 keeps the natural [b0 | b1]. The scales and offsets follow: in the nibble order the
 * int32 lanes of block 0 are 0..3 and 8..11, those of block 1 4..7 and 12..15. */
AVX512_INLINE bool nibble_order(int f) { return f != L_Q8_0; }

/* Two weight blocks (the second may be absent: zero), unpacked for vpdpbusd. */
typedef struct lpair {
    __m512i q;   /* unsigned quants, in the format's lane order */
    __m512 d;    /* the two scales, in the lane order */
    float m0, m1; /* _1 formats: the minimums */
} lpair;

/* The two f16 scales at p0, p1 (p1 NULL: 0) as 16 float lanes in the format's order. */
AVX512_INLINE __m512 scales_f16(int f, const uint8_t *p0, const uint8_t *p1) {
    uint16_t h0, h1 = 0;
    memcpy(&h0, p0, 2);
    if (p1) memcpy(&h1, p1, 2);
    const __m128i a = _mm_set1_epi16((short)h0), b = _mm_set1_epi16((short)h1);
    const __m256i h = nibble_order(f) ? _mm256_broadcastsi128_si256(_mm_unpacklo_epi64(a, b)) /* [h0 x4 h1 x4] x2 */
                                      : _mm256_inserti128_si256(_mm256_castsi128_si256(a), b, 1);
    return _mm512_cvtph_ps(h);
}

/* 16 bytes of packed nibbles of each block -> [b0 lo | b1 lo | b0 hi | b1 hi] */
AVX512_INLINE __m512i nibbles2(const uint8_t *p0, const uint8_t *p1, bool two) {
    const __m128i x0 = _mm_loadu_si128((const __m128i *)p0);
    const __m128i x1 = two ? _mm_loadu_si128((const __m128i *)p1) : _mm_setzero_si128();
    const __m256i y = _mm256_inserti128_si256(_mm256_castsi128_si256(x0), x1, 1); /* [x0 | x1] */
    return _mm512_and_si512(join(y, _mm256_srli_epi16(y, 4)), _mm512_set1_epi8(0x0f));
}

AVX512_INLINE uint32_t load_u32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

AVX512_INLINE lpair legacy_unpack(int f, const uint8_t *b0, size_t bb, bool two) {
    const uint8_t *b1 = b0 + bb;
    lpair u;
    u.d = scales_f16(f, b0, two ? b1 : NULL);
    u.m0 = f == L_Q4_1 || f == L_Q5_1 ? f16(b0 + 2) : 0.0f;
    u.m1 = two && (f == L_Q4_1 || f == L_Q5_1) ? f16(b1 + 2) : 0.0f;
    switch (f) {
    case L_Q4_0: u.q = nibbles2(b0 + 2, b1 + 2, two); break;
    case L_Q4_1: u.q = nibbles2(b0 + 4, b1 + 4, two); break;
    case L_Q5_0:
    case L_Q5_1: {
        const int o = f == L_Q5_0 ? 2 : 4; /* qh, then qs */
        const uint64_t h0 = load_u32(b0 + o), h1 = two ? load_u32(b1 + o) : 0;
        /* bit j of qh_b is element j of block b; in lane order: b0 0..15, b1 0..15, b0 16..31, b1 16..31 */
        const uint64_t k = (h0 & 0xffff) | (h1 & 0xffff) << 16 | (h0 >> 16) << 32 | (h1 >> 16) << 48;
        u.q = _mm512_or_si512(nibbles2(b0 + o + 4, b1 + o + 4, two),
                              _mm512_maskz_mov_epi8((__mmask64)k, _mm512_set1_epi8(0x10)));
        break;
    }
    default: {
        const __m256i w0 = _mm256_loadu_si256((const __m256i *)(b0 + 2));
        const __m256i w1 = two ? _mm256_loadu_si256((const __m256i *)(b1 + 2)) : _mm256_set1_epi8(-128);
        u.q = _mm512_xor_si512(join(w0, w1), _mm512_set1_epi8(-128)); /* w + 128 */
        break;
    }
    }
    return u;
}

/* One token's two activation blocks, in the format's lane order: quants, the offset init,
 * scales, and the _1 formats' factors. */
typedef struct apair {
    __m512i a;
    __m512i init;
    __m512 d;
    float ms0, ms1; /* d_x * s, for the _1 formats */
} apair;

AVX512_INLINE apair act_pair(int f, const lean_q8_32 *a0, bool two) {
    const lean_q8_32 *a1 = a0 + 1;
    apair p;
    const __m256i q0 = _mm256_loadu_si256((const __m256i *)a0->qs);
    const __m256i q1 = two ? _mm256_loadu_si256((const __m256i *)a1->qs) : _mm256_setzero_si256();
    p.a = join(q0, q1); /* [a0 lo | a0 hi | a1 lo | a1 hi] */
    if (nibble_order(f)) p.a = _mm512_shuffle_i64x2(p.a, p.a, _MM_SHUFFLE(3, 1, 2, 0));
    const int k = f == L_Q4_0 ? 1 : f == L_Q5_0 ? 2 : f == L_Q8_0 ? 16 : 0;
    const int32_t s0 = a0->s, s1 = two ? a1->s : 0;
    const float d0 = a0->d, d1 = two ? a1->d : 0.0f;
    if (nibble_order(f)) { /* [v0 x4 | v1 x4 | v0 x4 | v1 x4] */
        const __m256i iy = _mm256_set_m128i(_mm_set1_epi32(-k * s1), _mm_set1_epi32(-k * s0));
        const __m256 dy = _mm256_set_m128(_mm_set1_ps(d1), _mm_set1_ps(d0));
        p.init = join(iy, iy);
        p.d = joinf(dy, dy);
    } else {
        p.init = join(_mm256_set1_epi32(-k * s0), _mm256_set1_epi32(-k * s1));
        p.d = joinf(_mm256_set1_ps(d0), _mm256_set1_ps(d1));
    }
    p.ms0 = d0 * (float)s0;
    p.ms1 = d1 * (float)s1;
    return p;
}

/* Rows r .. r + RT - 1 x tokens t .. t + TT - 1. U (nullable): those rows' blocks already
 * unpacked, U[i * n_pairs + p] for row i and block pair p; without it they are unpacked here. */
AVX512_INLINE void legacy_tile(int f, int RT, int TT, int64_t cols, const uint8_t *w, size_t wrb, int64_t r,
                               const uint8_t *x, size_t xrb, int32_t t, float *y, int64_t ldy, const lpair *U) {
    const size_t bb = legacy_bytes[f];
    const bool has_min = f == L_Q4_1 || f == L_Q5_1;
    const int64_t nb = cols / 32;
    __m512 acc[4][4];
    float sm[4][4]; /* _1 formats: sum of m * d_x * s, in block order */
    UNROLL
    for (int i = 0; i < RT; i++)
        UNROLL
        for (int j = 0; j < TT; j++) acc[i][j] = _mm512_setzero_ps(), sm[i][j] = 0.0f;
    for (int64_t b = 0; b < nb; b += 2) {
        const bool two = b + 1 < nb;
        lpair u[4];
        UNROLL
        for (int i = 0; i < RT; i++) {
            if (U) {
                u[i] = U[(size_t)i * (size_t)((nb + 1) / 2) + (size_t)(b / 2)];
                continue;
            }
            const uint8_t *blk = w + (size_t)(r + i) * wrb + (size_t)b * bb;
            prefetch_ahead(blk);
            u[i] = legacy_unpack(f, blk, bb, two);
        }
        UNROLL
        for (int j = 0; j < TT; j++) {
            const apair a = act_pair(f, (const lean_q8_32 *)(x + (size_t)(t + j) * xrb) + b, two);
            UNROLL
            for (int i = 0; i < RT; i++) {
                const __m512i isum = _mm512_dpbusd_epi32(a.init, u[i].q, a.a);
                acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(u[i].d, a.d), acc[i][j]);
                if (has_min) {
                    sm[i][j] += u[i].m0 * a.ms0;
                    sm[i][j] += u[i].m1 * a.ms1;
                }
            }
        }
    }
    UNROLL
    for (int i = 0; i < RT; i++)
        UNROLL
        for (int j = 0; j < TT; j++) y[(int64_t)(t + j) * ldy + r + i] = hsum(acc[i][j]) + sm[i][j];
}

AVX512_INLINE void matmul_legacy(int f, int64_t cols, const uint8_t *w, size_t w_row_bytes, int64_t r0, int64_t r1,
                                 const uint8_t *x, size_t x_row_bytes, int32_t n_tok, float *y, int64_t y_row_elems) {
    const int64_t n_pairs = (cols / 32 + 1) / 2;
    if (n_tok >= 4 && n_pairs <= CACHE_COLS / 64) {
        /* a batch: each 4-row tile's blocks unpacked once, for all of its token tiles */
        lpair U[4 * (CACHE_COLS / 64)];
        int64_t r = r0;
        for (; r + 4 <= r1; r += 4) {
            for (int i = 0; i < 4; i++)
                for (int64_t p = 0; p < n_pairs; p++) {
                    const uint8_t *blk = w + (size_t)(r + i) * w_row_bytes + (size_t)(2 * p) * legacy_bytes[f];
                    prefetch_ahead(blk);
                    U[i * n_pairs + p] = legacy_unpack(f, blk, legacy_bytes[f], 2 * p + 1 < cols / 32);
                }
            int32_t t = 0;
            for (; t + 4 <= n_tok; t += 4) legacy_tile(f, 4, 4, cols, w, w_row_bytes, r, x, x_row_bytes, t, y, y_row_elems, U);
            for (; t < n_tok; t++) legacy_tile(f, 4, 1, cols, w, w_row_bytes, r, x, x_row_bytes, t, y, y_row_elems, U);
        }
        for (; r < r1; r++) {
            int32_t t = 0;
            for (; t + 4 <= n_tok; t += 4) legacy_tile(f, 1, 4, cols, w, w_row_bytes, r, x, x_row_bytes, t, y, y_row_elems, NULL);
            for (; t < n_tok; t++) legacy_tile(f, 1, 1, cols, w, w_row_bytes, r, x, x_row_bytes, t, y, y_row_elems, NULL);
        }
        return;
    }
#define LT(RT, TT, r, t) legacy_tile(f, RT, TT, cols, w, w_row_bytes, r, x, x_row_bytes, t, y, y_row_elems, NULL)
    TILE_SCHEDULE(LT);
#undef LT
}

static AVX512 void matmul_q4_0(MATMUL_ARGS) { matmul_legacy(L_Q4_0, MATMUL_PASS); }
static AVX512 void matmul_q4_1(MATMUL_ARGS) { matmul_legacy(L_Q4_1, MATMUL_PASS); }
static AVX512 void matmul_q5_0(MATMUL_ARGS) { matmul_legacy(L_Q5_0, MATMUL_PASS); }
static AVX512 void matmul_q5_1(MATMUL_ARGS) { matmul_legacy(L_Q5_1, MATMUL_PASS); }
static AVX512 void matmul_q8_0(MATMUL_ARGS) { matmul_legacy(L_Q8_0, MATMUL_PASS); }

/* ---- Q4_K, Q5_K, Q6_K (lean_q8_k activations) ----
 * kblock: the super-block's 256 quants as 4 vectors of 64 (element order), and for each the
 * i16 multiplier of every vpmaddubsw pair: Q4_K / Q5_K: sub-block 2p in the low half, 2p + 1
 * in the high half; Q6_K: its four 16-weight sub-blocks' scales, 8 lanes each. */

enum { K_Q4, K_Q5, K_Q6 };

static const size_t kblock_bytes[] = {LEAN_Q4_K_BYTES, LEAN_Q5_K_BYTES, LEAN_Q6_K_BYTES};

typedef struct kblock {
    __m512i q[4];
    __m512i sc[4];
    __m256i m16; /* Q4_K/Q5_K: the mins, each twice; Q6_K: the 16 scales */
    float d, dmin;
} kblock;

AVX512_INLINE void k_unpack(int f, const uint8_t *b, kblock *u) {
    const __m512i m4 = _mm512_set1_epi8(0x0f), m3 = _mm512_set1_epi8(0x03);
    if (f == K_Q6) {
        u->d = f16(b + 208);
        const __m512i sc16 = _mm512_castsi256_si512(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(b + 192))));
        u->m16 = _mm512_castsi512_si256(sc16);
        for (int p = 0; p < 4; p++) { /* lanes 8g .. 8g + 7 <- scale 4p + g */
            const __m512i idx = _mm512_set_epi16(4 * p + 3, 4 * p + 3, 4 * p + 3, 4 * p + 3, 4 * p + 3, 4 * p + 3,
                                                 4 * p + 3, 4 * p + 3, 4 * p + 2, 4 * p + 2, 4 * p + 2, 4 * p + 2,
                                                 4 * p + 2, 4 * p + 2, 4 * p + 2, 4 * p + 2, 4 * p + 1, 4 * p + 1,
                                                 4 * p + 1, 4 * p + 1, 4 * p + 1, 4 * p + 1, 4 * p + 1, 4 * p + 1,
                                                 4 * p, 4 * p, 4 * p, 4 * p, 4 * p, 4 * p, 4 * p, 4 * p);
            u->sc[p] = _mm512_permutexvar_epi16(idx, sc16);
        }
        for (int h = 0; h < 2; h++) {
            const __m512i ql = _mm512_loadu_si512((const void *)(b + 64 * h)); /* [ql0 | ql1] */
            const __m256i qh = _mm256_loadu_si256((const __m256i *)(b + 128 + 32 * h));
            const __m512i h01 = join(qh, _mm256_srli_epi16(qh, 2));
            const __m512i h23 = join(_mm256_srli_epi16(qh, 4), _mm256_srli_epi16(qh, 6));
            u->q[2 * h] = _mm512_or_si512(_mm512_and_si512(ql, m4), _mm512_slli_epi16(_mm512_and_si512(h01, m3), 4));
            u->q[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
                                              _mm512_slli_epi16(_mm512_and_si512(h23, m3), 4));
        }
        return;
    }
    u->d = f16(b);
    u->dmin = f16(b + 2);
    const uint8_t *q = b + 4; /* the 12 scale bytes: formats_k.c's get_scale_min_k4 */
    int16_t mins[16];
    for (int j = 0; j < 8; j += 2) {
        int sc[2], m[2];
        for (int e = 0; e < 2; e++) {
            const int jj = j + e;
            if (jj < 4) {
                sc[e] = q[jj] & 63;
                m[e] = q[jj + 4] & 63;
            } else {
                sc[e] = (q[jj + 4] & 0x0f) | ((q[jj - 4] >> 6) << 4);
                m[e] = (q[jj + 4] >> 4) | ((q[jj] >> 6) << 4);
            }
            mins[2 * jj] = mins[2 * jj + 1] = (int16_t)m[e];
        }
        u->sc[j / 2] = join(_mm256_set1_epi16((int16_t)sc[0]), _mm256_set1_epi16((int16_t)sc[1]));
    }
    u->m16 = _mm256_loadu_si256((const __m256i *)mins);
    const uint8_t *qs = f == K_Q5 ? b + 48 : b + 16;
    const __m256i hb = f == K_Q5 ? _mm256_loadu_si256((const __m256i *)(b + 16)) : _mm256_setzero_si256();
    for (int p = 0; p < 4; p++) { /* sub-blocks 2p (low nibbles) and 2p + 1 (high) */
        const __m256i raw = _mm256_loadu_si256((const __m256i *)(qs + 32 * p));
        __m512i z = _mm512_and_si512(join(raw, _mm256_srli_epi16(raw, 4)), m4);
        if (f == K_Q5) {
            const __m256i one = _mm256_set1_epi8(1);
            const __m256i b0 = _mm256_and_si256(_mm256_srli_epi16(hb, 2 * p), one);
            const __m256i b1 = _mm256_and_si256(_mm256_srli_epi16(hb, 2 * p + 1), one);
            z = _mm512_or_si512(z, _mm512_slli_epi16(join(b0, b1), 4));
        }
        u->q[p] = z;
    }
}

/* The float step of one (row, token) after its isum: the offsets / mins from the bsums. */
AVX512_INLINE __m512 k_finish(int f, const kblock *u, const lean_q8_k *a, __m512i isum, __m512 acc) {
    const __m256i off = _mm256_madd_epi16(u->m16, _mm256_loadu_si256((const __m256i *)a->bsums));
    const __m512i off512 = _mm512_inserti64x4(_mm512_setzero_si512(), off, 0);
    if (f == K_Q6) isum = _mm512_sub_epi32(isum, _mm512_slli_epi32(off512, 5));
    acc = _mm512_fmadd_ps(_mm512_set1_ps(u->d * a->d), _mm512_cvtepi32_ps(isum), acc);
    if (f != K_Q6) acc = _mm512_fnmadd_ps(_mm512_set1_ps(u->dmin * a->d), _mm512_cvtepi32_ps(off512), acc);
    return acc;
}

/* As legacy_tile; U[i * n_superblocks + b]. */
AVX512_INLINE void k_tile(int f, int RT, int TT, int64_t cols, const uint8_t *w, size_t wrb, int64_t r,
                          const uint8_t *x, size_t xrb, int32_t t, float *y, int64_t ldy, const kblock *U) {
    __m512 acc[4][4];
    UNROLL
    for (int i = 0; i < RT; i++)
        UNROLL
        for (int j = 0; j < TT; j++) acc[i][j] = _mm512_setzero_ps();
    for (int64_t b = 0; b < cols / LEAN_QK_K; b++) {
        kblock u[4];
        const kblock *ui[4];
        UNROLL
        for (int i = 0; i < RT; i++) {
            if (U) {
                ui[i] = &U[(size_t)i * (size_t)(cols / LEAN_QK_K) + (size_t)b];
                continue;
            }
            const uint8_t *blk = w + (size_t)(r + i) * wrb + (size_t)b * kblock_bytes[f];
            prefetch_ahead(blk), prefetch_ahead(blk + 64), prefetch_ahead(blk + 128);
            k_unpack(f, blk, &u[i]);
            ui[i] = &u[i];
        }
        /* isum[i][j] = sum over the 4 vectors p, in order: each row's quants and multipliers
         * are loaded once per p for all TT tokens */
        const lean_q8_k *a[4];
        __m512i isum[4][4];
        UNROLL
        for (int j = 0; j < TT; j++) a[j] = (const lean_q8_k *)(x + (size_t)(t + j) * xrb) + b;
        UNROLL
        for (int i = 0; i < RT; i++)
            UNROLL
            for (int j = 0; j < TT; j++) isum[i][j] = _mm512_setzero_si512();
        for (int p = 0; p < 4; p++) {
            __m512i av[4];
            UNROLL
            for (int j = 0; j < TT; j++) av[j] = _mm512_loadu_si512((const void *)(a[j]->qs + 64 * p));
            UNROLL
            for (int i = 0; i < RT; i++) {
                const __m512i q = ui[i]->q[p], sc = ui[i]->sc[p];
                UNROLL
                for (int j = 0; j < TT; j++)
                    isum[i][j] = _mm512_dpwssd_epi32(isum[i][j], _mm512_maddubs_epi16(q, av[j]), sc);
            }
        }
        UNROLL
        for (int i = 0; i < RT; i++)
            UNROLL
            for (int j = 0; j < TT; j++) acc[i][j] = k_finish(f, ui[i], a[j], isum[i][j], acc[i][j]);
    }
    UNROLL
    for (int i = 0; i < RT; i++)
        UNROLL
        for (int j = 0; j < TT; j++) y[(int64_t)(t + j) * ldy + r + i] = hsum(acc[i][j]);
}

AVX512_INLINE void matmul_k(int f, int64_t cols, const uint8_t *w, size_t w_row_bytes, int64_t r0, int64_t r1,
                            const uint8_t *x, size_t x_row_bytes, int32_t n_tok, float *y, int64_t y_row_elems) {
    const int64_t nsb = cols / LEAN_QK_K;
    if (n_tok >= 4 && nsb <= CACHE_COLS / LEAN_QK_K) {
        /* a batch: each 4-row tile's super-blocks unpacked once, for all of its token tiles */
        kblock U[4 * (CACHE_COLS / LEAN_QK_K)];
        int64_t r = r0;
        for (; r + 4 <= r1; r += 4) {
            for (int i = 0; i < 4; i++)
                for (int64_t b = 0; b < nsb; b++) {
                    const uint8_t *blk = w + (size_t)(r + i) * w_row_bytes + (size_t)b * kblock_bytes[f];
                    prefetch_ahead(blk), prefetch_ahead(blk + 64), prefetch_ahead(blk + 128);
                    k_unpack(f, blk, &U[i * nsb + b]);
                }
            int32_t t = 0;
            for (; t + 4 <= n_tok; t += 4) k_tile(f, 4, 4, cols, w, w_row_bytes, r, x, x_row_bytes, t, y, y_row_elems, U);
            for (; t < n_tok; t++) k_tile(f, 4, 1, cols, w, w_row_bytes, r, x, x_row_bytes, t, y, y_row_elems, U);
        }
        for (; r < r1; r++) {
            int32_t t = 0;
            for (; t + 4 <= n_tok; t += 4) k_tile(f, 1, 4, cols, w, w_row_bytes, r, x, x_row_bytes, t, y, y_row_elems, NULL);
            for (; t < n_tok; t++) k_tile(f, 1, 1, cols, w, w_row_bytes, r, x, x_row_bytes, t, y, y_row_elems, NULL);
        }
        return;
    }
#define KT(RT, TT, r, t) k_tile(f, RT, TT, cols, w, w_row_bytes, r, x, x_row_bytes, t, y, y_row_elems, NULL)
    TILE_SCHEDULE(KT);
#undef KT
}

static AVX512 void matmul_q4_k(MATMUL_ARGS) { matmul_k(K_Q4, MATMUL_PASS); }
static AVX512 void matmul_q5_k(MATMUL_ARGS) { matmul_k(K_Q5, MATMUL_PASS); }
static AVX512 void matmul_q6_k(MATMUL_ARGS) { matmul_k(K_Q6, MATMUL_PASS); }

/* ---- table ---- */

static const lean_kernels table = {
    .name = "avx512",
    .matmul =
        {
            [LEAN_TYPE_Q8_0] = matmul_q8_0,
            [LEAN_TYPE_Q4_0] = matmul_q4_0,
            [LEAN_TYPE_Q4_1] = matmul_q4_1,
            [LEAN_TYPE_Q5_0] = matmul_q5_0,
            [LEAN_TYPE_Q5_1] = matmul_q5_1,
            [LEAN_TYPE_Q4_K] = matmul_q4_k,
            [LEAN_TYPE_Q5_K] = matmul_q5_k,
            [LEAN_TYPE_Q6_K] = matmul_q6_k,
        },
};

/* AVX-512 F/BW/VL and VNNI from the compiler's cpuid cache (which checks that the OS saves
 * the ZMM state), F16C from cpuid leaf 1 (ECX bit 29). */
const lean_kernels *lean_kernels_avx512(void) {
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw") ||
        !__builtin_cpu_supports("avx512vl") || !__builtin_cpu_supports("avx512vnni") ||
        !__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma"))
        return NULL;
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 29))) return NULL;
    return &table;
}

#else /* not x86-64 */

const lean_kernels *lean_kernels_avx512(void) { return NULL; }

#endif
