/* x86_avx512.c — the AVX-512 (F, BW, VL) + VNNI kernel table (kernels.h), for x86-64 CPUs that
 * have them (chosen at run time: lean_kernels_avx512 asks cpuid).
 *
 * What it does: the matmuls of the quantized formats with 512-bit vectors and the VNNI dot
 * products, and the attention scores and weighted sums (16 keys / 16 elements a vector); the
 * float formats, the exponentials and quantization are the AVX2 table's (lean_kernels_select
 * fills this table's empty entries from the next table the CPU runs). Every function carries the
 * target attribute (AVX512 below); on any other target the file is only the stub at the end.
 *
 * Legacy formats (Q4_0 Q4_1 Q5_0 Q5_1 Q8_0): 16 rows in the 16 int32 lanes, a block's 32
 * quants transposed so that one vpdpbusd with 4 broadcast activation bytes advances all 16 rows;
 * one float step per block for 16 rows at once (details at the section). Measured here, one
 * thread, Q4_0 1536 x 576 x 64 tokens from L2: 38-45 GMAC/s with the previous 4 x 4 tiles of
 * two blocks per vector, 117-145 GMAC/s this way; decode (one token) the same from DRAM.
 * K-quants (Q2_K Q3_K Q4_K Q5_K Q6_K), 64 weights per vector: the super-block is unpacked as in the AVX2
 * file (4 zmm of quants, the i16 multiplier of every pair), then per token
 *   isum = sum over 4 vectors of vpdpwssd(isum, vpmaddubsw(q, a), sc)
 * (the 16 sums of a 4 x 4 tile built vector by vector, each row's vector loaded once) and the
 * mins / Q6_K's -32 and Q3_K's -4 offsets from the bsums (vpmaddwd), then one float step.
 *
 * K-quant tiles: 4 rows x 4 tokens (16 accumulators of the 32 registers) when a call has 4
 * tokens or more, else 4 x 1 (8 x 1 was slower from DRAM: more streams); 1 x 4 and 1 x 1 at the
 * edges. In a batch each 4-row tile is unpacked once (onto the stack) for all its token tiles.
 * In both families every (row, token) output is computed by the
 * same operations in the same order in every tile shape, so any split of rows or tokens gives
 * the same bits (kernels.h's contract; tests/test_kernels.c checks it).
 *
 * Exact (F32 activations, every quantized format): each weight dequantized in registers to the
 * reference's float, FMA against the float activations (details at the section).
 *
 * Sections: helpers · legacy formats · K-quants · exact · attention · table
 */
#include "cpu/kernels.h"

#if defined(__x86_64__)

#include "cpu/x86_tiles.h"

#include <cpuid.h>
#include <immintrin.h>
#include <string.h>

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#define TARGET "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c"
#define AVX512 __attribute__((target(TARGET)))
#define AVX512_INLINE static inline X86_INLINE __attribute__((target(TARGET)))

/* ---- helpers ---- */

/* A batch's K-quant 4-row tiles are unpacked once for all their token tiles when a row has at
 * most this many weights (the unpacked tile lives on the stack: ~70 KiB; 8192 covers qwen2.5's
 * 4864-wide ffn_down); longer rows unpack per token tile. Either way the arithmetic of an
 * output is the same. */
#define CACHE_COLS 8192

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

/* ---- Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 (lean_q8_32 activations): 16 rows in the lanes ----
 * A 32-weight block needs one float step per (row, token); with a block per 8 lanes that step
 * cost as much as the integer work. So here the 16 int32 lanes are 16 rows: a 16-row tile's
 * block b is unpacked (transposed) to 8 vectors, vector s holding the quants of elements
 * 4s .. 4s + 3 of every row (lane i = row r + i, unsigned), and a token's 4 activation bytes of
 * those elements are broadcast to every lane:
 *   isum = -k s + sum over s of vpdpbusd(q_s, broadcast(a[4s .. 4s + 3]))   whole blocks, exact
 *   acc  = fma(float(isum), d_w * d_x, acc)      (_1 formats: then acc = fma(m_w, d_x * s, acc))
 * with k the format's offset (Q4_0 8, Q5_0 16, Q8_0 128: its signed weights are stored + 128;
 * _1 formats 0). So every (row, token) output is that chain over the blocks in index order,
 * in every tile shape, batch and row range (kernels.h's contract), and lands in its lane: no
 * horizontal sum. Elements 4s .. 4s + 3 of a nibble format are the low (s < 4) or high nibbles
 * of qs dword s mod 4, and their fifth bits are bits 4s .. 4s + 3 of qh; Q8_0's are qs dword s.
 * The transpose: 4 vectors of rows (g, g + 4, g + 8, g + 12) in their 128-bit lanes, then a 4 x 4
 * dword transpose inside each lane (unpacklo/hi). Rows past the tile's end read as zero and are
 * not stored. Tokens go 8 at a time (8 int + 8 float accumulators + the 8 quant vectors stay in
 * registers), fewer in one tile of all those left (a batched decode of 2..8 sequences unpacks
 * each block once, in registers); above 8 tokens a batch unpacks each 16-row tile once onto the
 * stack for all its tokens. */

static const int legacy_offset[] = {8, 0, 16, 0, 128}; /* k above */

/* A batch's 16-row tiles are unpacked once for all their tokens when a row has at most this
 * many blocks (the unpacked tile lives on the stack: 576 bytes a block); longer rows unpack
 * per token tile. Either way the arithmetic of an output is the same. */
#define CACHE_BLOCKS 256

/* Block b of 16 rows, unpacked. */
typedef struct rtile {
    __m512i q[8]; /* q[s] lane i: row i's quants of elements 4s .. 4s + 3, unsigned */
    __m512 d, m;  /* the rows' scales; _1 formats: their minimums */
} rtile;

/* 16 bytes at p, or zero (a masked load: no branch, no fault) */
AVX512_INLINE __m128i load_row16(const uint8_t *p, bool ok) {
    return _mm_maskz_loadu_epi32((__mmask8)(ok ? 0x0f : 0), p);
}

/* The 16 bytes at p + row * wrb of rows 0..15 (rows >= nr: zero) as 4 vectors, vector j lane i
 * = row i's dword j. */
AVX512_INLINE void transpose16x4(const uint8_t *p, size_t wrb, int nr, __m512i out[4]) {
    __m512i z[4];
    UNROLL
    for (int g = 0; g < 4; g++) { /* z[g]: rows g, g + 4, g + 8, g + 12 */
        __m512i v = _mm512_castsi128_si512(load_row16(p + (size_t)g * wrb, g < nr));
        v = _mm512_inserti32x4(v, load_row16(p + (size_t)(g + 4) * wrb, g + 4 < nr), 1);
        v = _mm512_inserti32x4(v, load_row16(p + (size_t)(g + 8) * wrb, g + 8 < nr), 2);
        z[g] = _mm512_inserti32x4(v, load_row16(p + (size_t)(g + 12) * wrb, g + 12 < nr), 3);
    }
    const __m512i t0 = _mm512_unpacklo_epi32(z[0], z[1]), t1 = _mm512_unpackhi_epi32(z[0], z[1]);
    const __m512i t2 = _mm512_unpacklo_epi32(z[2], z[3]), t3 = _mm512_unpackhi_epi32(z[2], z[3]);
    out[0] = _mm512_unpacklo_epi64(t0, t2);
    out[1] = _mm512_unpackhi_epi64(t0, t2);
    out[2] = _mm512_unpacklo_epi64(t1, t3);
    out[3] = _mm512_unpackhi_epi64(t1, t3);
}

/* The dword at p + row * wrb of rows 0..15 (rows >= nr: 0), one gather. */
AVX512_INLINE __m512i column_u32(const uint8_t *p, size_t wrb, int nr) {
    const __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                           _mm512_set1_epi32((int)wrb));
    return _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), (__mmask16)((1u << nr) - 1), idx, p, 1);
}

/* The low f16 of each lane as a float. */
AVX512_INLINE __m512 low_f16(__m512i v) { return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(v)); }

/* The fifth bits of elements 4s .. 4s + 3 (bits 4s .. 4s + 3 of each lane's qh) as 0x10 in
 * bytes 0..3: bit k of x = (qh >> 4s) & 15 goes to bit 8k + 4 by x << (7k + 4), four copies
 * that do not overlap, i.e. one multiply by 2^4 + 2^11 + 2^18 + 2^25. */
AVX512_INLINE __m512i fifth_bits16(__m512i qh, int s) {
    const __m512i x = _mm512_and_si512(_mm512_srli_epi32(qh, (unsigned)(4 * s)), _mm512_set1_epi32(15));
    return _mm512_and_si512(_mm512_mullo_epi32(x, _mm512_set1_epi32(0x02040810)), _mm512_set1_epi32(0x10101010));
}

/* Rows r .. r + nr - 1 (nr <= 16) of block b. */
AVX512_INLINE void legacy_unpack16(int f, const uint8_t *w, size_t wrb, int64_t r, int nr, int64_t b, rtile *u) {
    const uint8_t *blk = w + (size_t)r * wrb + (size_t)b * legacy_bytes[f];
    /* The next tile (16 rows of wrb bytes, contiguous) swept in step with this one: block b
     * asks for its bytes [16 bb b, 16 bb (b + 1)), line by line, one tile's time ahead. (A
     * prefetch per row and block, 16 a step mostly for lines already asked for, stalled
     * decode on the fill buffers.) */
    const size_t bb16 = 16 * legacy_bytes[f];
    const char *next = (const char *)w + (size_t)(r + 16) * wrb;
    for (size_t o = (size_t)b * bb16 & ~(size_t)63; o < (size_t)(b + 1) * bb16; o += 64)
        _mm_prefetch(next + o, _MM_HINT_T0);
    const __m512i head = column_u32(blk, wrb, nr); /* d, then m (_1 formats) or qs */
    u->d = low_f16(head);
    const bool has_min = f == L_Q4_1 || f == L_Q5_1;
    u->m = has_min ? low_f16(_mm512_srli_epi32(head, 16)) : _mm512_setzero_ps();
    __m512i dw[4];
    if (f == L_Q8_0) {
        const __m512i flip = _mm512_set1_epi8(-128); /* w + 128 */
        transpose16x4(blk + 2, wrb, nr, dw);
        UNROLL
        for (int s = 0; s < 4; s++) u->q[s] = _mm512_xor_si512(dw[s], flip);
        transpose16x4(blk + 18, wrb, nr, dw);
        UNROLL
        for (int s = 0; s < 4; s++) u->q[4 + s] = _mm512_xor_si512(dw[s], flip);
        return;
    }
    const size_t qs = f == L_Q4_0 ? 2 : f == L_Q4_1 ? 4 : f == L_Q5_0 ? 6 : 8;
    transpose16x4(blk + qs, wrb, nr, dw);
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    UNROLL
    for (int s = 0; s < 4; s++) {
        u->q[s] = _mm512_and_si512(dw[s], m4);
        u->q[4 + s] = _mm512_and_si512(_mm512_srli_epi16(dw[s], 4), m4);
    }
    if (f == L_Q5_0 || f == L_Q5_1) {
        const __m512i qh = column_u32(blk + qs - 4, wrb, nr);
        UNROLL
        for (int s = 0; s < 8; s++) u->q[s] = _mm512_or_si512(u->q[s], fifth_bits16(qh, s));
    }
}

/* An R16 matrix is one contiguous stream: bytes a software prefetch runs ahead of the block
 * being read, and asks for at a tile's start (a decode call's tile, 18-170 KiB, would otherwise
 * begin on demand). Measured in docs/runs/2026-12-05-cpu-decode-roofline.md and
 * 2026-12-06-cpu-decode-q4.md. */
#define R16_AHEAD 2048

/* The first R16_AHEAD bytes at p, before a tile's first block (the loop asks for the rest). */
AVX512_INLINE void prefetch_start(const uint8_t *p) {
    for (size_t o = 0; o < R16_AHEAD; o += 64) _mm_prefetch((const char *)p + o, _MM_HINT_T0);
}

/* Block b of the R16 group at g (cpu/repack.h): legacy_unpack16's tile, from wide loads. */
AVX512_INLINE void legacy_load16(int f, const uint8_t *g, int64_t b, rtile *u) {
    const size_t bb16 = 16 * legacy_bytes[f];
    const uint8_t *p = g + (size_t)b * bb16;
    /* the lines R16_AHEAD bytes on in the same stream (see there) */
    const uintptr_t ahead = (uintptr_t)p + R16_AHEAD;
    for (uintptr_t o = ahead & ~(uintptr_t)63; o < ahead + bb16; o += 64) _mm_prefetch((const char *)o, _MM_HINT_T0);
    u->d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
    const bool has_min = f == L_Q4_1 || f == L_Q5_1, five = f == L_Q5_0 || f == L_Q5_1;
    u->m = has_min ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p + 32))) : _mm512_setzero_ps();
    p += has_min ? 64 : 32;
    if (f == L_Q8_0) {
        UNROLL
        for (int s = 0; s < 8; s++) u->q[s] = _mm512_xor_si512(_mm512_loadu_si512((const void *)(p + 64 * s)), _mm512_set1_epi8(-128));
        return;
    }
    const __m512i qh = five ? _mm512_loadu_si512((const void *)p) : _mm512_setzero_si512();
    p += five ? 64 : 0;
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    UNROLL
    for (int s = 0; s < 4; s++) {
        const __m512i dw = _mm512_loadu_si512((const void *)(p + 64 * s));
        u->q[s] = _mm512_and_si512(dw, m4);
        u->q[4 + s] = _mm512_and_si512(_mm512_srli_epi16(dw, 4), m4);
    }
    if (five)
        UNROLL
        for (int s = 0; s < 8; s++) u->q[s] = _mm512_or_si512(u->q[s], fifth_bits16(qh, s));
}

/* acc[j] += block b of 16 rows . token t + j, j < TT. */
AVX512_INLINE void legacy_block16(int f, int TT, const rtile *u, const uint8_t *x, size_t xrb, int32_t t, int64_t b,
                                  __m512 acc[8]) {
    const lean_q8_32 *a[8];
    __m512i isum[8];
    UNROLL
    for (int j = 0; j < TT; j++) {
        a[j] = (const lean_q8_32 *)(x + (size_t)(t + j) * xrb) + b;
        isum[j] = _mm512_set1_epi32(-legacy_offset[f] * a[j]->s);
    }
    /* up to 3 tokens, two chains per token (even and odd s), added at the end: integer sums,
     * so the same isum in any order, and half the dependent vpdpbusd latency; from 4 tokens the
     * tokens' chains are enough, and one chain each leaves registers for 8 tokens (no spill) */
    __m512i odd[8];
    UNROLL
    for (int j = 0; j < TT; j++) odd[j] = _mm512_setzero_si512();
    UNROLL
    for (int s = 0; s < 8; s += 2)
        UNROLL
        for (int j = 0; j < TT; j++) {
            const uint8_t *aq = (const uint8_t *)a[j]->qs + 4 * s;
            isum[j] = _mm512_dpbusd_epi32(isum[j], u->q[s], _mm512_set1_epi32((int)load_u32(aq)));
            if (TT < 4) odd[j] = _mm512_dpbusd_epi32(odd[j], u->q[s + 1], _mm512_set1_epi32((int)load_u32(aq + 4)));
            else isum[j] = _mm512_dpbusd_epi32(isum[j], u->q[s + 1], _mm512_set1_epi32((int)load_u32(aq + 4)));
        }
    UNROLL
    for (int j = 0; j < TT; j++) isum[j] = _mm512_add_epi32(isum[j], odd[j]);
    UNROLL
    for (int j = 0; j < TT; j++) {
        acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[j]), _mm512_mul_ps(u->d, _mm512_set1_ps(a[j]->d)), acc[j]);
        if (f == L_Q4_1 || f == L_Q5_1) acc[j] = _mm512_fmadd_ps(u->m, _mm512_set1_ps(a[j]->d * (float)a[j]->s), acc[j]);
    }
}

/* Rows r .. r + nr - 1 x tokens t .. t + TT - 1; U (nullable): those rows' blocks unpacked;
 * packed: w is in the R16 layout (r a multiple of 16). */
AVX512_INLINE void legacy_tile16(int f, int TT, int64_t cols, const uint8_t *w, size_t wrb, int64_t r, int nr,
                                 const uint8_t *x, size_t xrb, int32_t t, float *y, int64_t ldy, const rtile *U,
                                 bool packed) {
    __m512 acc[8];
    UNROLL
    for (int j = 0; j < TT; j++) acc[j] = _mm512_setzero_ps();
    if (packed) prefetch_start(w + (size_t)r * wrb);
    for (int64_t b = 0; b < cols / 32; b++) {
        if (U) {
            legacy_block16(f, TT, &U[b], x, xrb, t, b, acc);
        } else { /* a separate path, so that this block stays in registers */
            rtile own;
            if (packed) legacy_load16(f, w + (size_t)r * wrb, b, &own);
            else legacy_unpack16(f, w, wrb, r, nr, b, &own);
            legacy_block16(f, TT, &own, x, xrb, t, b, acc);
        }
    }
    const __mmask16 keep = (__mmask16)((1u << nr) - 1);
    UNROLL
    for (int j = 0; j < TT; j++) _mm512_mask_storeu_ps(y + (int64_t)(t + j) * ldy + r, keep, acc[j]);
}

/* packed: w in the R16 layout, r0 a multiple of 16; its blocks load as cheaply from there as
 * from a stack cache, so it makes none. */
AVX512_INLINE void matmul_legacy_any(int f, bool packed, int64_t cols, const uint8_t *w, size_t w_row_bytes, int64_t r0,
                                     int64_t r1, const uint8_t *x, size_t x_row_bytes, int32_t n_tok, float *y,
                                     int64_t y_row_elems) {
    const int64_t nb = cols / 32;
    const bool cache = !packed && n_tok > 8 && nb <= CACHE_BLOCKS;
    rtile U[CACHE_BLOCKS];
    for (int64_t r = r0; r < r1; r += 16) {
        const int nr = r1 - r < 16 ? (int)(r1 - r) : 16;
        if (cache)
            for (int64_t b = 0; b < nb; b++) legacy_unpack16(f, w, w_row_bytes, r, nr, b, &U[b]);
        const rtile *u = cache ? U : NULL;
        /* one tile of all the tokens left, up to 8: a batched decode of 2..8 sequences unpacks
         * every block once (docs/runs/2026-12-05-batch-cpu-tiles.md) */
        for (int32_t t = 0; t < n_tok; t += 8) {
#define LT(TT) legacy_tile16(f, TT, cols, w, w_row_bytes, r, nr, x, x_row_bytes, t, y, y_row_elems, u, packed)
            switch (n_tok - t < 8 ? n_tok - t : 8) {
            case 1: LT(1); break;
            case 2: LT(2); break;
            case 3: LT(3); break;
            case 4: LT(4); break;
            case 5: LT(5); break;
            case 6: LT(6); break;
            case 7: LT(7); break;
            default: LT(8); break;
            }
#undef LT
        }
    }
}

AVX512_INLINE void matmul_legacy(MATMUL_PARAMS) { matmul_legacy_any(f, false, MATMUL_PASS); }
AVX512_INLINE void matmul_legacy_r16(MATMUL_PARAMS) { matmul_legacy_any(f, true, MATMUL_PASS); }

static AVX512 void matmul_r16_q4_0(LEAN_MATMUL_ARGS) { matmul_legacy_r16(L_Q4_0, MATMUL_PASS); }
static AVX512 void matmul_r16_q4_1(LEAN_MATMUL_ARGS) { matmul_legacy_r16(L_Q4_1, MATMUL_PASS); }
static AVX512 void matmul_r16_q5_0(LEAN_MATMUL_ARGS) { matmul_legacy_r16(L_Q5_0, MATMUL_PASS); }
static AVX512 void matmul_r16_q5_1(LEAN_MATMUL_ARGS) { matmul_legacy_r16(L_Q5_1, MATMUL_PASS); }
static AVX512 void matmul_r16_q8_0(LEAN_MATMUL_ARGS) { matmul_legacy_r16(L_Q8_0, MATMUL_PASS); }

/* ---- Q2_K, Q3_K, Q4_K, Q5_K, Q6_K (lean_q8_k activations) ----
 * kblock: the super-block's 256 quants as 4 vectors of 64 (element order), and for each the
 * i16 multiplier of every vpmaddubsw pair: Q4_K / Q5_K: sub-block 2p in the low half, 2p + 1
 * in the high half; Q6_K, Q2_K, Q3_K: its four 16-weight sub-blocks' scales, 8 lanes each.
 * The offsets from the bsums as in x86_avx2.c: Q6_K's -32 and Q3_K's -4 (q = q3 + 4 in [0, 7])
 * taken from isum, the Q4_K / Q5_K / Q2_K mins as a second float step. */

typedef struct kblock {
    __m512i q[4];
    __m512i sc[4];
    __m256i m16; /* Q4_K/Q5_K: the mins, each twice; Q2_K: the 16 mins; Q6_K, Q3_K: the 16 scales */
    float d, dmin;
} kblock;

/* u->sc[p] lanes 8g .. 8g + 7 <- scale 4p + g of s16 (16 i16 scales, one per 16 weights: Q6_K,
 * Q2_K, Q3_K), so that vector p's 4 sub-blocks of 16 each take their own. */
AVX512_INLINE void k_scales16(__m256i s16, kblock *u) {
    const __m512i s = _mm512_castsi256_si512(s16);
    const __m512i g = _mm512_setr_epi64(0, 0, 0x0001000100010001, 0x0001000100010001, 0x0002000200020002,
                                        0x0002000200020002, 0x0003000300030003, 0x0003000300030003);
    for (int p = 0; p < 4; p++) u->sc[p] = _mm512_permutexvar_epi16(_mm512_add_epi16(g, _mm512_set1_epi16((short)(4 * p))), s);
}

/* Q2_K, Q3_K: vector p holds elements 64p .. 64p + 63 (sub-blocks 4p .. 4p + 3): 2-bit quants k
 * = 2 (p % 2) (elements 64p ..) and k + 1 (64p + 32 ..) of the 32 bytes of qs half p / 2, and
 * (Q3_K, hm not NULL) the third bit, hmask[l] bit 4 (p / 2) + k, as bit 2. */
AVX512_INLINE void k_unpack_q23(const uint8_t *qs, const uint8_t *hm, kblock *u) {
    const __m512i m3 = _mm512_set1_epi8(0x03), four = _mm512_set1_epi8(0x04);
    const __m256i hb = hm ? _mm256_loadu_si256((const __m256i *)hm) : _mm256_setzero_si256();
    for (int p = 0; p < 4; p++) {
        const int k = 2 * (p % 2), c = 4 * (p / 2) + k;
        const __m256i raw = _mm256_loadu_si256((const __m256i *)(qs + 32 * (p / 2)));
        __m512i q = _mm512_and_si512(join(_mm256_srli_epi16(raw, 2 * k), _mm256_srli_epi16(raw, 2 * k + 2)), m3);
        if (hm) {
            const __m512i h = join(_mm256_srli_epi16(hb, c), _mm256_srli_epi16(hb, c + 1));
            q = _mm512_or_si512(q, _mm512_and_si512(_mm512_slli_epi16(h, 2), four));
        }
        u->q[p] = q;
    }
}

AVX512_INLINE void k_unpack(int f, const uint8_t *b, kblock *u) {
    const __m512i m4 = _mm512_set1_epi8(0x0f), m3 = _mm512_set1_epi8(0x03);
    if (f == K_Q2) {
        u->d = f16(b + 80);
        u->dmin = f16(b + 82);
        const __m256i sm = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)b));
        u->m16 = _mm256_srli_epi16(sm, 4);
        k_scales16(_mm256_and_si256(sm, _mm256_set1_epi16(0x0f)), u);
        k_unpack_q23(b + 16, NULL, u);
        return;
    }
    if (f == K_Q3) {
        u->d = f16(b + 108);
        u->m16 = _mm256_cvtepi8_epi16(q3k_scales(b + 96));
        k_scales16(u->m16, u);
        k_unpack_q23(b + 32, b, u);
        return;
    }
    if (f == K_Q6) {
        u->d = f16(b + 208);
        u->m16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(b + 192)));
        k_scales16(u->m16, u);
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
    /* Q4_K / Q5_K; _KS: repack.h's blocks, the scales decoded at load and the rest 4 bytes on */
    const bool ks = f == K_Q4_KS || f == K_Q5_KS, five = f == K_Q5 || f == K_Q5_KS;
    u->d = f16(b);
    u->dmin = f16(b + 2);
    /* the scales and mins (KS: decoded at load; else here, in registers) as i16 lanes 0..7 and
     * 8..15 of one vector, spread by permutes (the scalar unpacking and a store-to-load round
     * trip of the mins cost more than the dot products of a decode step:
     * docs/runs/2026-12-05-llamacpp-cpu.md) */
    uint64_t sc, m;
    if (ks) memcpy(&sc, b + 4, 8), memcpy(&m, b + 12, 8);
    else lean_k4_scales64(b + 4, &sc, &m);
    b += ks ? 4 : 0;
    const __m512i sm = _mm512_castsi256_si512(_mm256_cvtepu8_epi16(_mm_set_epi64x((long long)m, (long long)sc)));
    for (int p = 0; p < 4; p++) /* sub-block 2p in the low half, 2p + 1 in the high */
        u->sc[p] = _mm512_permutexvar_epi16(join(_mm256_set1_epi16((short)(2 * p)), _mm256_set1_epi16((short)(2 * p + 1))), sm);
    const __m256i mins2 = _mm256_setr_epi16(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15);
    u->m16 = _mm256_permutexvar_epi16(mins2, _mm512_castsi512_si256(sm)); /* each min twice */
    const uint8_t *qs = five ? b + 48 : b + 16;
    const __m256i hb = five ? _mm256_loadu_si256((const __m256i *)(b + 16)) : _mm256_setzero_si256();
    for (int p = 0; p < 4; p++) { /* sub-blocks 2p (low nibbles) and 2p + 1 (high) */
        const __m256i raw = _mm256_loadu_si256((const __m256i *)(qs + 32 * p));
        __m512i z = _mm512_and_si512(join(raw, _mm256_srli_epi16(raw, 4)), m4);
        if (five) {
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
    if (f == K_Q3) isum = _mm512_sub_epi32(isum, _mm512_slli_epi32(off512, 2));
    acc = _mm512_fmadd_ps(_mm512_set1_ps(u->d * a->d), _mm512_cvtepi32_ps(isum), acc);
    if (f != K_Q6 && f != K_Q3) acc = _mm512_fnmadd_ps(_mm512_set1_ps(u->dmin * a->d), _mm512_cvtepi32_ps(off512), acc);
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
        K_TILE_BLOCK(RT, TT, b);
        /* isum[i][j] = sum over the 4 vectors p, in order: each row's quants and multipliers
         * are loaded once per p for all TT tokens */
        __m512i isum[4][4];
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
    STORE_TILE(RT, TT, hsum);
}

/* 4-row tiles (x86_tiles.h) */
AVX512_INLINE void matmul_k(MATMUL_PARAMS) {
    K_MATMUL(4);
}

QUANT_ENTRY_POINTS(AVX512)

/* ---- exact: F32 activations (kernels.h "exact") ----
 * Every weight is the reference dequantizer's float, made by its operations in its order
 * (formats.c), in registers: a block's 16 (Q4) or 32 (Q5) possible weights are built as a
 * table of floats, e.g. Q4_0's T[k] = (float)(k - 8) * d, and the quants index it (vpermps,
 * vpermt2ps: one instruction for 16 weights); Q8_0 and Q6_K convert and multiply. A row's
 * vectors come in a fixed sequence (units: a legacy block, a Q4_K / Q5_K sub-block pair, a
 * Q6_K / Q2_K / Q3_K quarter), and each (row, token) output is one FMA chain over them in that sequence, then
 * hsum: the same in every tile shape, row range and batch, so an output depends on cols alone.
 * Tiles of 4 rows x 4 tokens share each vector of activations and weights (8 loads for 16
 * FMAs); decode is 4 rows x 1 token (four chains in flight), 2..4 tokens 4 rows x TT. A batch
 * (more than 4 tokens) unpacks 4 rows at a time onto the stack for all its token tiles (one at
 * a time for rows of more than XCACHE_VECS * 4 weights); up to 4 tokens unpack in registers,
 * straight into the FMAs. */

#define XCACHE_VECS 1024 /* 64 KiB of stack: 4 rows of up to 4096 weights, or one of 16384 */

AVX512_INLINE __m512i u8x16(const uint8_t *p) { return _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p)); }
AVX512_INLINE __m512 cvt(__m512i v) { return _mm512_cvtepi32_ps(v); }
AVX512_INLINE __m512 bcast_f16(const uint8_t *p) { /* the f16 at p, exactly, in 16 lanes */
    uint16_t h;
    memcpy(&h, p, sizeof h);
    return _mm512_cvtph_ps(_mm256_set1_epi16((short)h));
}
AVX512_INLINE __m512 iota(void) { return _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15); }
AVX512_INLINE __m512i bits_at(__m512i v, int shift, int mask) { /* (v >> shift) & mask */
    return _mm512_and_si512(_mm512_srl_epi32(v, _mm_cvtsi32_si128(shift)), _mm512_set1_epi32(mask));
}

/* A legacy block at b -> w[0] (elements 0..15), w[1] (16..31). Q8_0: qs * d. Q4_0: T[q] with
 * T[k] = (float)(k - 8) * d; Q4_1: (float)k * d + m; Q5_0 / Q5_1 the same over 32 entries, the
 * fifth bit (bit j of qh) choosing the table's upper half. */
AVX512_INLINE void xq_legacy(int f, const uint8_t *b, __m512 w[2]) {
    const __m512 d = bcast_f16(b);
    if (f == X_Q8_0) {
        for (int h = 0; h < 2; h++)
            w[h] = _mm512_mul_ps(cvt(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(b + 2 + 16 * h)))), d);
        return;
    }
    const bool five = f == X_Q5_0 || f == X_Q5_1, min = f == X_Q4_1 || f == X_Q5_1;
    const int head = min ? 4 : 2; /* d (and m), then Q5's qh */
    const __m512i q = u8x16(b + head + (five ? 4 : 0));
    const __m512 k = iota(), m = min ? bcast_f16(b + 2) : _mm512_setzero_ps();
    if (!five) { /* vpermps reads the low 4 bits of an index: the low nibble as it is */
        const __m512 t = min ? _mm512_add_ps(_mm512_mul_ps(k, d), m) : _mm512_mul_ps(_mm512_sub_ps(k, _mm512_set1_ps(8)), d);
        w[0] = _mm512_permutexvar_ps(q, t);
        w[1] = _mm512_permutexvar_ps(_mm512_srli_epi32(q, 4), t);
        return;
    }
    const __m512 k16 = _mm512_add_ps(k, _mm512_set1_ps(16));
    const __m512 lo = min ? _mm512_add_ps(_mm512_mul_ps(k, d), m) : _mm512_mul_ps(_mm512_sub_ps(k, _mm512_set1_ps(16)), d);
    const __m512 hi = min ? _mm512_add_ps(_mm512_mul_ps(k16, d), m) : _mm512_mul_ps(k, d); /* k + 16 - 16 = k */
    const uint32_t qh = load_u32(b + head);
    const __m512i sixteen = _mm512_set1_epi32(16);
    __m512i i0 = _mm512_and_si512(q, _mm512_set1_epi32(15)), i1 = _mm512_srli_epi32(q, 4);
    i0 = _mm512_mask_or_epi32(i0, (__mmask16)(qh & 0xffff), i0, sixteen);
    i1 = _mm512_mask_or_epi32(i1, (__mmask16)(qh >> 16), i1, sixteen);
    w[0] = _mm512_permutex2var_ps(lo, i0, hi);
    w[1] = _mm512_permutex2var_ps(lo, i1, hi);
}

/* Unit u (0..3) of a K super-block -> w[0..3] at elements off(f, u, i) (k_off).
 * Q4_K / Q5_K: sub-blocks 2u (the low nibbles of qs[32u ..]) and 2u + 1 (the high), tables
 * T[k] = (d sc) k - dmin m (32 entries with Q5_K's fifth bit, bit j of qh[l]).
 * Q2_K / Q3_K: sub-blocks 4u + i (16 weights each), tables T[k] = (d sc) k - dmin m (Q2_K) and
 * (d s) (k - 4) (Q3_K, the third bit as bit 2 of k), indexed by the quants' byte shifted, the
 * bits above k's (the next quants) landing in the table's repeats.
 * Q6_K: half h = u / 2, l = 16 (u % 2) ..: the four quants of ql[l], ql[l + 32], qh[l], each
 * (d sc) (q - 32) at 128 h + 32 i + l. */
AVX512_INLINE void xq_kunit(int f, const uint8_t *b, const lean_kscale *ks, int u, __m512 w[4]) {
    if (f == X_Q2_K || f == X_Q3_K) { /* vector i: sub-block 4u + i, 2-bit quants k of l = 16 (i % 2) .. */
        const bool three = f == X_Q3_K;
        const __m512 c = three ? _mm512_setr_ps(-4, -3, -2, -1, 0, 1, 2, 3, -4, -3, -2, -1, 0, 1, 2, 3)
                               : _mm512_setr_ps(0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3);
        const int h = u / 2;
        for (int p = 0; p < 2; p++) {
            const __m512i raw = u8x16(b + (three ? 32 : 16) + 32 * h + 16 * p);
            const __m512i hb = three ? _mm512_slli_epi32(u8x16(b + 16 * p), 2) : _mm512_setzero_si512();
            for (int kk = 0; kk < 2; kk++) {
                const int i = 2 * kk + p, k = 2 * (u % 2) + kk, s = 4 * u + i;
                __m512i idx = _mm512_srl_epi32(raw, _mm_cvtsi32_si128(2 * k)); /* low 2 bits: q (T repeats every 4) */
                if (three) /* bit 2 <- the third bit, hmask[l] bit 4h + k (T repeats every 8): 3 ? idx : hb' */
                    idx = _mm512_ternarylogic_epi32(idx, _mm512_srl_epi32(hb, _mm_cvtsi32_si128(4 * h + k)),
                                                    _mm512_set1_epi32(3), 0xe4);
                const __m512 dj = _mm512_set1_ps(ks->d[s]);
                w[i] = _mm512_permutexvar_ps(idx, three ? _mm512_mul_ps(dj, c)
                                                        : _mm512_sub_ps(_mm512_mul_ps(dj, c), _mm512_set1_ps(ks->m[s])));
            }
        }
        return;
    }
    if (f == X_Q6_K) {
        const int h = u / 2, g = u % 2;
        const uint8_t *ql = b + 64 * h + 16 * g, *qh = b + 128 + 32 * h + 16 * g;
        const __m512i a = u8x16(ql), c = u8x16(ql + 32), hb = u8x16(qh), k15 = _mm512_set1_epi32(15);
        const __m512i q[4] = {
            _mm512_or_si512(_mm512_and_si512(a, k15), _mm512_slli_epi32(bits_at(hb, 0, 3), 4)),
            _mm512_or_si512(_mm512_and_si512(c, k15), _mm512_slli_epi32(bits_at(hb, 2, 3), 4)),
            _mm512_or_si512(_mm512_srli_epi32(a, 4), _mm512_slli_epi32(bits_at(hb, 4, 3), 4)),
            _mm512_or_si512(_mm512_srli_epi32(c, 4), _mm512_slli_epi32(bits_at(hb, 6, 3), 4))};
        UNROLL /* rolled, GCC kept w[] on the stack: a store and a load a vector, Q6_K 20% slower */
        for (int i = 0; i < 4; i++)
            w[i] = _mm512_mul_ps(_mm512_set1_ps(ks->d[8 * h + g + 2 * i]),
                                 cvt(_mm512_sub_epi32(q[i], _mm512_set1_epi32(32))));
        return;
    }
    const bool five = f == X_Q5_K;
    const uint8_t *qs = b + (five ? 48 : 16) + 32 * u, *qh = b + 16;
    const __m512 k = iota(), k16 = _mm512_add_ps(k, _mm512_set1_ps(16));
    for (int s = 0; s < 2; s++) { /* sub-block 2u + s: the low (s = 0) or high nibbles */
        const int j = 2 * u + s;
        const __m512 dj = _mm512_set1_ps(ks->d[j]), mj = _mm512_set1_ps(ks->m[j]);
        const __m512 lo = _mm512_sub_ps(_mm512_mul_ps(dj, k), mj);
        const __m512 hi = five ? _mm512_sub_ps(_mm512_mul_ps(dj, k16), mj) : lo;
        for (int p = 0; p < 2; p++) { /* l = 16 p .. 16 p + 15 */
            __m512i idx = u8x16(qs + 16 * p);
            if (s) idx = _mm512_srli_epi32(idx, 4);
            if (five) {
                idx = _mm512_or_si512(_mm512_and_si512(idx, _mm512_set1_epi32(15)),
                                      _mm512_slli_epi32(bits_at(u8x16(qh + 16 * p), j, 1), 4));
                w[2 * s + p] = _mm512_permutex2var_ps(lo, idx, hi);
            } else {
                w[2 * s + p] = _mm512_permutexvar_ps(idx, lo);
            }
        }
    }
}

/* lean_kscale_of's floats (each an exact product) made in registers: its scalar decode, 16 scales
 * a super-block a row, cost Q3_K's exact kernel more than its FMAs (docs/runs/2026-12-06-q23k-x86.md);
 * Q3_K's by the AVX2 kernels' q3k_scales. */
AVX512_INLINE void x_kscale(int f, const uint8_t *b, lean_kscale *ks) {
    if (f == X_Q4_K || f == X_Q5_K) {
        uint64_t sc, m;
        lean_k4_scales64(b + 4, &sc, &m);
        const __m256 d = _mm256_set1_ps(f16(b)), dmin = _mm256_set1_ps(f16(b + 2));
        _mm256_storeu_ps(ks->d, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)sc)))));
        _mm256_storeu_ps(ks->m, _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)m)))));
        return;
    }
    if (f == X_Q2_K) {
        const __m512i sm = u8x16(b);
        _mm512_storeu_ps(ks->d, _mm512_mul_ps(bcast_f16(b + 80), cvt(_mm512_and_si512(sm, _mm512_set1_epi32(15)))));
        _mm512_storeu_ps(ks->m, _mm512_mul_ps(bcast_f16(b + 82), cvt(_mm512_srli_epi32(sm, 4))));
        return;
    }
    const __m128i s8 = f == X_Q3_K ? q3k_scales(b + 96) : _mm_loadu_si128((const __m128i *)(b + 192));
    _mm512_storeu_ps(ks->d, _mm512_mul_ps(bcast_f16(b + (f == X_Q3_K ? 108 : 208)), cvt(_mm512_cvtepi8_epi32(s8))));
}

/* The element of K unit u's vector i, within its super-block. */
AVX512_INLINE int k_off(int f, int u, int i) { return f == X_Q6_K ? 128 * (u / 2) + 16 * (u % 2) + 32 * i : 64 * u + 16 * i; }

/* A block's lines, PREFETCH_BYTES ahead, asked for as the block is read: a tile's rows all at
 * once (a burst of up to 70 prefetches) filled the line buffers and the loop waited on them,
 * 35% of a Q5_0 decode's samples (docs/runs/2026-12-06-exact-cpu-4.md). */
AVX512_INLINE void x_prefetch(int f, const uint8_t *b) {
    for (size_t o = 0; o < xblock_bytes[f]; o += 64) prefetch_ahead(b + o);
}

/* One vector position of RT rows x TT tokens: acc[i][t] += w[i] * x_t[e .. e + 15] (each token's
 * 16 activations loaded once for the RT rows). */
AVX512_INLINE void xfma(int RT, int TT, const __m512 *w, const float *const *xs, int64_t e, __m512 acc[4][4]) {
    __m512 xv[4];
    UNROLL
    for (int t = 0; t < TT; t++) xv[t] = _mm512_loadu_ps(xs[t] + e);
    UNROLL
    for (int i = 0; i < RT; i++)
        UNROLL for (int t = 0; t < TT; t++) acc[i][t] = _mm512_fmadd_ps(w[i], xv[t], acc[i][t]);
}

/* Rows r .. r + RT - 1 (at w, wrb apart) x TT tokens -> y[t * ldy + i]. cache: those rows'
 * vectors in unit order (x_unpack; row i at cache + i * cstride), or NULL: unpacked here. One
 * accumulator per (row, token), fed the row's vectors in unit order: the same FMAs in the same
 * order in every tile shape, cached or not. */
AVX512_INLINE void x_tile(int f, int RT, int TT, int64_t cols, const uint8_t *w, size_t wrb, const __m512 *cache,
                          int64_t cstride, const float *const *xs, float *y, int64_t ldy) {
    __m512 acc[4][4], wv[4][4], col[4];
    UNROLL
    for (int i = 0; i < RT; i++)
        UNROLL for (int t = 0; t < TT; t++) acc[i][t] = _mm512_setzero_ps();
    if (f < X_Q4_K) {
        for (int64_t b = 0; b < cols / 32; b++) {
            UNROLL
            for (int i = 0; i < RT; i++) {
                if (!cache) x_prefetch(f, w + (size_t)i * wrb + (size_t)b * xblock_bytes[f]);
                if (cache) wv[i][0] = cache[i * cstride + 2 * b], wv[i][1] = cache[i * cstride + 2 * b + 1];
                else xq_legacy(f, w + (size_t)i * wrb + (size_t)b * xblock_bytes[f], wv[i]);
            }
            UNROLL
            for (int h = 0; h < 2; h++) {
                UNROLL for (int i = 0; i < RT; i++) col[i] = wv[i][h];
                xfma(RT, TT, col, xs, 32 * b + 16 * h, acc);
            }
        }
    } else {
        for (int64_t sb = 0; sb < cols / LEAN_QK_K; sb++) {
            lean_kscale ks[4];
            if (!cache)
                UNROLL for (int i = 0; i < RT; i++) {
                    x_prefetch(f, w + (size_t)i * wrb + (size_t)sb * xblock_bytes[f]);
                    x_kscale(f, w + (size_t)i * wrb + (size_t)sb * xblock_bytes[f], &ks[i]);
                }
            UNROLL
            for (int u = 0; u < 4; u++) {
                UNROLL
                for (int i = 0; i < RT; i++) {
                    if (cache)
                        UNROLL for (int k = 0; k < 4; k++) wv[i][k] = cache[i * cstride + 16 * sb + 4 * u + k];
                    else xq_kunit(f, w + (size_t)i * wrb + (size_t)sb * xblock_bytes[f], &ks[i], u, wv[i]);
                }
                UNROLL
                for (int k = 0; k < 4; k++) {
                    UNROLL for (int i = 0; i < RT; i++) col[i] = wv[i][k];
                    xfma(RT, TT, col, xs, sb * LEAN_QK_K + k_off(f, u, k), acc);
                }
            }
        }
    }
    UNROLL
    for (int i = 0; i < RT; i++)
        UNROLL for (int t = 0; t < TT; t++) y[t * ldy + i] = hsum(acc[i][t]);
}

/* A row's vectors in x_tile's unit order -> cache (cols / 16 vectors). */
AVX512_INLINE void x_unpack(int f, int64_t cols, const uint8_t *row, __m512 *cache) {
    if (f < X_Q4_K) {
        for (int64_t b = 0; b < cols / 32; b++, cache += 2) xq_legacy(f, row + (size_t)b * xblock_bytes[f], cache);
        return;
    }
    for (int64_t sb = 0; sb < cols / LEAN_QK_K; sb++) {
        const uint8_t *b = row + (size_t)sb * xblock_bytes[f];
        lean_kscale ks;
        x_kscale(f, b, &ks);
        for (int u = 0; u < 4; u++, cache += 4) xq_kunit(f, b, &ks, u, cache);
    }
}

/* x86_tiles.h's schedule over x_unpack and x_tile */
AVX512_INLINE void matmul_x(MATMUL_PARAMS) {
    EXACT_MATMUL(__m512, 16);
}

EXACT_ENTRY_POINTS(AVX512)

/* ---- attention ---- */

/* The sums of the lanes of 16 vectors, as one vector (lane u: the sum of a[u]'s lanes): halves
 * of 256, 128, 64 and 32 bits folded pairwise, every lane of the result the sum of one input's
 * lanes in a fixed tree, whatever the other inputs hold; the last step puts key u in lane u. */
AVX512_INLINE __m512 sum16(const __m512 a[16]) {
    __m512 t[8], v[4], w[2];
    for (int p = 0; p < 8; p++)
        t[p] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * p], a[2 * p + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_f32x4(a[2 * p], a[2 * p + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    for (int p = 0; p < 4; p++)
        v[p] = _mm512_add_ps(_mm512_shuffle_f32x4(t[2 * p], t[2 * p + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_f32x4(t[2 * p], t[2 * p + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    for (int p = 0; p < 2; p++)
        w[p] = _mm512_add_ps(_mm512_shuffle_ps(v[2 * p], v[2 * p + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_ps(v[2 * p], v[2 * p + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    const __m512 r = _mm512_add_ps(_mm512_shuffle_ps(w[0], w[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm512_shuffle_ps(w[0], w[1], _MM_SHUFFLE(3, 1, 3, 1)));
    /* lane l now holds input (l % 4) * 4 + l / 4, a permutation that is its own inverse */
    return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), r);
}

/* Sixteen keys at a time: one FMA chain per key (lane i of key u's accumulator takes elements
 * 16m + i; a partial last vector of hd is masked to 0), then sum16. A key's score depends only
 * on its own chain and that tree, so a group short of 16 keys gives the same bits. */
static AVX512 void attn_scores(const float *q, const float *k, int64_t k_row_elems, int32_t n, int32_t hd, float *s) {
    for (int32_t j = 0; j < n; j += 16) {
        const int nk = n - j < 16 ? n - j : 16;
        __m512 acc[16];
        UNROLL
        for (int u = 0; u < 16; u++) acc[u] = _mm512_setzero_ps();
        for (int32_t i = 0; i < hd; i += 16) {
            const __mmask16 m = hd - i < 16 ? (__mmask16)((1u << (hd - i)) - 1) : (__mmask16)0xffff;
            const __m512 qv = _mm512_maskz_loadu_ps(m, q + i);
            const float *kj = k + (int64_t)j * k_row_elems + i;
            if (nk == 16) {
                UNROLL
                for (int u = 0; u < 16; u++)
                    acc[u] = _mm512_fmadd_ps(qv, _mm512_maskz_loadu_ps(m, kj + (int64_t)u * k_row_elems), acc[u]);
            } else {
                for (int u = 0; u < nk; u++)
                    acc[u] = _mm512_fmadd_ps(qv, _mm512_maskz_loadu_ps(m, kj + (int64_t)u * k_row_elems), acc[u]);
            }
        }
        _mm512_mask_storeu_ps(s + j, (__mmask16)((1u << nk) - 1), sum16(acc));
    }
}

/* o = o * c, then += p[j] v_j in key order, 16 output elements at a time (the last vector
 * masked): per element the AVX2 table's operations, so the same bits. */
static AVX512 void attn_accum(float *o, float c, const float *v, int64_t v_row_elems, const float *p, int32_t n,
                              int32_t hd) {
    const __m512 cv = _mm512_set1_ps(c);
    for (int32_t i = 0; i < hd; i += 16) {
        const __mmask16 m = hd - i < 16 ? (__mmask16)((1u << (hd - i)) - 1) : (__mmask16)0xffff;
        __m512 ov = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, o + i), cv);
        for (int32_t j = 0; j < n; j++)
            ov = _mm512_fmadd_ps(_mm512_set1_ps(p[j]), _mm512_maskz_loadu_ps(m, v + (int64_t)j * v_row_elems + i), ov);
        _mm512_mask_storeu_ps(o + i, m, ov);
    }
}

/* ---- table ---- */

static const lean_kernels table = {
    .name = "avx512",
    .matmul = {[LEAN_TYPE_Q8_0] = matmul_q8_0, [LEAN_TYPE_Q4_0] = matmul_q4_0, [LEAN_TYPE_Q4_1] = matmul_q4_1,
               [LEAN_TYPE_Q5_0] = matmul_q5_0, [LEAN_TYPE_Q5_1] = matmul_q5_1,
               [LEAN_TYPE_Q2_K] = matmul_q2_k, [LEAN_TYPE_Q3_K] = matmul_q3_k, [LEAN_TYPE_Q4_K] = matmul_q4_k,
               [LEAN_TYPE_Q5_K] = matmul_q5_k, [LEAN_TYPE_Q6_K] = matmul_q6_k},
    .matmul_packed = {[LEAN_TYPE_Q8_0] = matmul_r16_q8_0, [LEAN_TYPE_Q4_0] = matmul_r16_q4_0,
                      [LEAN_TYPE_Q4_1] = matmul_r16_q4_1, [LEAN_TYPE_Q5_0] = matmul_r16_q5_0,
                      [LEAN_TYPE_Q5_1] = matmul_r16_q5_1, [LEAN_TYPE_Q4_K] = matmul_ks_q4_k,
                      [LEAN_TYPE_Q5_K] = matmul_ks_q5_k},
    EXACT_TABLE,
    .attn_scores = attn_scores,
    .attn_accum = attn_accum,
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
