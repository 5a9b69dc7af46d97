/* x86_tiles.h — what x86_avx2.c and x86_avx512.c share: the format indices of their kernels,
 * and the tile schedules: how a matmul's
 * rows [r0, r1) x tokens [0, n_tok) are cut into register tiles. Macros over the file's own
 * TILE, because a tile is an always-inline function of constant shape (so its accumulator
 * arrays stay in registers); they expect r0, r1 and n_tok of the matmul in scope.
 *
 *   TILE(RT, TT, r, t, U)   rows r .. r + RT - 1 x tokens t .. t + TT - 1; U: those rows'
 *                           blocks already unpacked (NULL: the tile unpacks them itself)
 *   PREP(r)                 unpacks the RB rows from r into the U that TILE is given, e.g.
 *                           with UNPACK_TILE
 *
 * BATCH_SCHEDULE(RB, PREP, U, TILE)  tiles of RB rows (PREP first) x 4 tokens, then x 1;
 *                                    then the rows left over one at a time (1 x 4, 1 x 1)
 * TILE_SCHEDULE(RB, TILE)            with 4 tokens or more: BATCH_SCHEDULE without unpacking
 *                                    ahead; 2 or 3: RB x 2 or RB x 3 tiles; one (decode): 4 x 1
 *                                    tiles; then the rows left
 * K_MATMUL(RB)                       a K-quant matmul's body over the file's k_tile
 * EXACT_MATMUL(VEC, LANES)           an exact matmul's body over the file's x_unpack and x_tile
 * Every (row, token) output is computed the same way in every tile shape (each file's
 * contract), so the schedule decides speed only, never bits.
 */
#ifndef LEAN_X86_TILES_H
#define LEAN_X86_TILES_H

#include "cpu/kernels.h"

#include <immintrin.h>
#include <string.h>

/* The kernels' helpers are always inlined and their tile loops unrolled (UNROLL): a tile's shape
 * is then constant and its accumulator arrays live in registers. A sanitized build (make asan:
 * -DLEAN_SANITIZE) leaves both to the compiler, whose ASan + UBSan compile of the forced form
 * takes minutes (docs/runs/2026-12-06-ci-time-2.md). The same operations run in the same order,
 * so the outputs are the same bits, with every load and operation still checked. */
#if defined(LEAN_SANITIZE)
#define X86_INLINE
#define UNROLL
#else
#define X86_INLINE __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 8")
#endif

/* A matmul entry point's arguments (kernels.h's LEAN_MATMUL_ARGS), passed on with the
 * pointers as bytes. */
#define MATMUL_PASS cols, (const uint8_t *)w, w_row_bytes, r0, r1, (const uint8_t *)x, x_row_bytes, n_tok, y, y_row_elems

/* The quantized formats as the kernels' f argument, and their block sizes in bytes. */
enum { L_Q4_0, L_Q4_1, L_Q5_0, L_Q5_1, L_Q8_0 };
/* _KS: cpu/repack.h's layout, the scales decoded */
enum { K_Q4, K_Q5, K_Q6, K_Q4_KS, K_Q5_KS, K_Q2, K_Q3 };
static const size_t legacy_bytes[] = {18, 20, 22, 24, 34};
static const size_t kblock_bytes[] = {LEAN_Q4_K_BYTES,     LEAN_Q5_K_BYTES, LEAN_Q6_K_BYTES, LEAN_Q4_K_BYTES + 4,
                                      LEAN_Q5_K_BYTES + 4, LEAN_Q2_K_BYTES, LEAN_Q3_K_BYTES};

/* The quantized formats' table entries of a file (ATTR: its target attribute), each its
 * matmul_legacy or matmul_k of one format; matmul_ks_*: matmul_k on the KS copy (matmul_packed). */
#define QUANT_ENTRY_POINTS(ATTR)                                                                    \
    static ATTR void matmul_q4_0(LEAN_MATMUL_ARGS) { matmul_legacy(L_Q4_0, MATMUL_PASS); }               \
    static ATTR void matmul_q4_1(LEAN_MATMUL_ARGS) { matmul_legacy(L_Q4_1, MATMUL_PASS); }               \
    static ATTR void matmul_q5_0(LEAN_MATMUL_ARGS) { matmul_legacy(L_Q5_0, MATMUL_PASS); }               \
    static ATTR void matmul_q5_1(LEAN_MATMUL_ARGS) { matmul_legacy(L_Q5_1, MATMUL_PASS); }               \
    static ATTR void matmul_q8_0(LEAN_MATMUL_ARGS) { matmul_legacy(L_Q8_0, MATMUL_PASS); }               \
    static ATTR void matmul_q4_k(LEAN_MATMUL_ARGS) { matmul_k(K_Q4, MATMUL_PASS); }                      \
    static ATTR void matmul_q5_k(LEAN_MATMUL_ARGS) { matmul_k(K_Q5, MATMUL_PASS); }                      \
    static ATTR void matmul_q6_k(LEAN_MATMUL_ARGS) { matmul_k(K_Q6, MATMUL_PASS); }                      \
    static ATTR void matmul_q2_k(LEAN_MATMUL_ARGS) { matmul_k(K_Q2, MATMUL_PASS); }                      \
    static ATTR void matmul_q3_k(LEAN_MATMUL_ARGS) { matmul_k(K_Q3, MATMUL_PASS); }                      \
    static ATTR void matmul_ks_q4_k(LEAN_MATMUL_ARGS) { /* w_row_bytes: the KS row's */                 \
        w_row_bytes = (size_t)(cols / LEAN_QK_K) * kblock_bytes[K_Q4_KS];                              \
        matmul_k(K_Q4_KS, MATMUL_PASS);                                                                 \
    }                                                                                               \
    static ATTR void matmul_ks_q5_k(LEAN_MATMUL_ARGS) {                                             \
        w_row_bytes = (size_t)(cols / LEAN_QK_K) * kblock_bytes[K_Q5_KS];                              \
        matmul_k(K_Q5_KS, MATMUL_PASS);                                                                 \
    }

/* Q3_K's 16 six-bit scales (formats.c's table) as int8, in registers (a scalar decode through
 * memory stalls store-to-load forwarding, as Q4_K's mins did): scale k's low nibble from byte
 * k % 8 of q (high nibble for k >= 8), its top 2 bits from bits 2 (k / 4) of byte 8 + k % 4.
 * Target avx2: inlined into both files' functions, whose targets include it. */
static inline X86_INLINE __attribute__((target("avx2"))) __m128i q3k_scales(const uint8_t *q) {
    uint64_t lo8;
    uint32_t hi4;
    memcpy(&lo8, q, 8), memcpy(&hi4, q + 8, 4);
    const __m128i lo = _mm_cvtsi64_si128((long long)lo8), n4 = _mm_set1_epi8(0x0f);
    const __m128i nib = _mm_unpacklo_epi64(_mm_and_si128(lo, n4), _mm_and_si128(_mm_srli_epi16(lo, 4), n4));
    const __m128i top = _mm_and_si128(_mm_srlv_epi32(_mm_set1_epi32((int)hi4), _mm_setr_epi32(0, 2, 4, 6)),
                                      _mm_set1_epi8(0x03));
    return _mm_sub_epi8(_mm_or_si128(nib, _mm_slli_epi16(top, 4)), _mm_set1_epi8(32));
}

/* The exact kernels' blocks' weights and bytes (by kernels.h's X_ formats), and their table
 * entries (ATTR: the file's target attribute). */
static const int xblock_elems[] = {32, 32, 32, 32, 32, LEAN_QK_K, LEAN_QK_K, LEAN_QK_K, LEAN_QK_K, LEAN_QK_K};
static const size_t xblock_bytes[] = {18, 20, 22, 24, 34, LEAN_Q4_K_BYTES, LEAN_Q5_K_BYTES, LEAN_Q6_K_BYTES,
                                      LEAN_Q2_K_BYTES, LEAN_Q3_K_BYTES};

#define EXACT_ENTRY_POINTS(ATTR)                                                                    \
    static ATTR void matmul_exact_q4_0(LEAN_MATMUL_ARGS) { matmul_x(X_Q4_0, MATMUL_PASS); }              \
    static ATTR void matmul_exact_q4_1(LEAN_MATMUL_ARGS) { matmul_x(X_Q4_1, MATMUL_PASS); }              \
    static ATTR void matmul_exact_q5_0(LEAN_MATMUL_ARGS) { matmul_x(X_Q5_0, MATMUL_PASS); }              \
    static ATTR void matmul_exact_q5_1(LEAN_MATMUL_ARGS) { matmul_x(X_Q5_1, MATMUL_PASS); }              \
    static ATTR void matmul_exact_q8_0(LEAN_MATMUL_ARGS) { matmul_x(X_Q8_0, MATMUL_PASS); }              \
    static ATTR void matmul_exact_q4_k(LEAN_MATMUL_ARGS) { matmul_x(X_Q4_K, MATMUL_PASS); }              \
    static ATTR void matmul_exact_q5_k(LEAN_MATMUL_ARGS) { matmul_x(X_Q5_K, MATMUL_PASS); }              \
    static ATTR void matmul_exact_q6_k(LEAN_MATMUL_ARGS) { matmul_x(X_Q6_K, MATMUL_PASS); }              \
    static ATTR void matmul_exact_q2_k(LEAN_MATMUL_ARGS) { matmul_x(X_Q2_K, MATMUL_PASS); }              \
    static ATTR void matmul_exact_q3_k(LEAN_MATMUL_ARGS) { matmul_x(X_Q3_K, MATMUL_PASS); }
#define EXACT_TABLE                                                                                 \
    .matmul_exact = {[LEAN_TYPE_Q8_0] = matmul_exact_q8_0, [LEAN_TYPE_Q4_0] = matmul_exact_q4_0,       \
                     [LEAN_TYPE_Q4_1] = matmul_exact_q4_1, [LEAN_TYPE_Q5_0] = matmul_exact_q5_0,       \
                     [LEAN_TYPE_Q5_1] = matmul_exact_q5_1, [LEAN_TYPE_Q4_K] = matmul_exact_q4_k,       \
                     [LEAN_TYPE_Q5_K] = matmul_exact_q5_k, [LEAN_TYPE_Q6_K] = matmul_exact_q6_k,       \
                     [LEAN_TYPE_Q2_K] = matmul_exact_q2_k, [LEAN_TYPE_Q3_K] = matmul_exact_q3_k}

/* The end of a tile: y of rows r .. r + RT - 1, tokens t .. t + TT - 1 = the lane sums of
 * acc[i][j] (HSUM: the file's fixed-order horizontal sum). */
#define STORE_TILE(RT, TT, HSUM)                                                                    \
    UNROLL for (int i = 0; i < (RT); i++)                                                           \
        UNROLL for (int j = 0; j < (TT); j++)                                                       \
            y[(int64_t)(t + j) * ldy + r + i] = HSUM(acc[i][j])

#define NO_PREP(r) ((void)(r))

/* ONE(p, k) for block b of row r + i at p (the matmul's w and w_row_bytes), k = i * nblk + b:
 * the unpacked tile's index of that block. */
#define UNPACK_TILE(RB, r, nblk, blk_bytes, ONE)                                                    \
    for (int i_ = 0; i_ < (RB); i_++)                                                               \
        for (int64_t b_ = 0; b_ < (nblk); b_++)                                                    \
    ONE(w + (size_t)((r) + i_) * w_row_bytes + (size_t)b_ * (blk_bytes), i_ * (nblk) + b_)

/* K-quants (both files' kblock, kblock_bytes and k_unpack): the super-block at p unpacked into
 * *dst, with the three lines it spans prefetched ahead; K_UNPACK_ONE for UNPACK_TILE. */
#define K_UNPACK_AT(p, dst)                                                                         \
    (prefetch_ahead(p), prefetch_ahead((p) + 64), prefetch_ahead((p) + 128), k_unpack(f, p, dst))
#define K_UNPACK_ONE(p, k) K_UNPACK_AT(p, &U[k])

/* In a K tile (k_tile's names), super-block b: ui[i] = row r + i's, U's (a batch's tile
 * unpacked ahead) or unpacked here into u[i]; a[j] = token t + j's activations. */
#define K_TILE_BLOCK(RT, TT, b)                                                                     \
    kblock u[4];                                                                                    \
    const kblock *ui[4];                                                                            \
    const lean_q8_k *a[4];                                                                          \
    UNROLL for (int i = 0; i < (RT); i++) {                                                         \
        if (U) {                                                                                    \
            ui[i] = &U[(size_t)i * (size_t)(cols / LEAN_QK_K) + (size_t)(b)];                       \
            continue;                                                                               \
        }                                                                                           \
        K_UNPACK_AT(w + (size_t)(r + i) * wrb + (size_t)(b) * kblock_bytes[f], &u[i]);              \
        ui[i] = &u[i];                                                                              \
    }                                                                                               \
    UNROLL for (int j = 0; j < (TT); j++) a[j] = (const lean_q8_k *)(x + (size_t)(t + j) * xrb) + (b)

#define EDGE_ROWS(TILE)                                                                             \
    for (; r < r1; r++) {                                                                           \
        int32_t t = 0;                                                                              \
        for (; t + 4 <= n_tok; t += 4) TILE(1, 4, r, t, NULL);                                      \
        for (; t < n_tok; t++) TILE(1, 1, r, t, NULL);                                              \
    }

#define BATCH_SCHEDULE(RB, PREP, U, TILE)                                                           \
    do {                                                                                            \
        int64_t r = r0;                                                                             \
        for (; r + (RB) <= r1; r += (RB)) {                                                         \
            PREP(r);                                                                                \
            int32_t t = 0;                                                                          \
            for (; t + 4 <= n_tok; t += 4) TILE(RB, 4, r, t, U);                                    \
            for (; t < n_tok; t++) TILE(RB, 1, r, t, U);                                            \
        }                                                                                           \
        EDGE_ROWS(TILE)                                                                             \
    } while (0)

#define TILE_SCHEDULE(RB, TILE)                                                                     \
    do {                                                                                            \
        if (n_tok >= 4) {                                                                           \
            BATCH_SCHEDULE(RB, NO_PREP, NULL, TILE);                                                \
        } else if (n_tok > 1) { /* a batched decode of 2 or 3 sequences: each block unpacked once */ \
            int64_t r = r0;                                                                         \
            for (; r + (RB) <= r1; r += (RB)) {                                                     \
                if (n_tok == 2) TILE(RB, 2, r, 0, NULL);                                            \
                else TILE(RB, 3, r, 0, NULL);                                                       \
            }                                                                                       \
            EDGE_ROWS(TILE)                                                                         \
        } else {                                                                                    \
            int64_t r = r0;                                                                         \
            for (; r + 4 <= r1; r += 4)                                                             \
                for (int32_t t = 0; t < n_tok; t++) TILE(4, 1, r, t, NULL);                         \
            EDGE_ROWS(TILE)                                                                         \
        }                                                                                           \
    } while (0)

/* The parameters of a file's matmul_legacy / matmul_k / matmul_x (f: its format index), which
 * MATMUL_PASS passes. */
#define MATMUL_PARAMS                                                                               \
    int f, int64_t cols, const uint8_t *w, size_t w_row_bytes, int64_t r0, int64_t r1, const uint8_t *x, \
        size_t x_row_bytes, int32_t n_tok, float *y, int64_t y_row_elems

/* The K-quants' matmul (each file's matmul_k body, over its kblock, k_unpack and k_tile), RB rows
 * a tile: a batch unpacks each tile's super-blocks once, for all of its token tiles. */
#define K_TILE_CALL(RT, TT, r, t, U) k_tile(f, RT, TT, cols, w, w_row_bytes, r, x, x_row_bytes, t, y, y_row_elems, U)
#define K_PREP(r) UNPACK_TILE(k_rows, r, nsb, kblock_bytes[f], K_UNPACK_ONE)
#define K_MATMUL(RB)                                                                                \
    do {                                                                                            \
        const int64_t nsb = cols / LEAN_QK_K;                                                       \
        const int k_rows = (RB);                                                                    \
        kblock U[(RB) * (CACHE_COLS / LEAN_QK_K)];                                                  \
        if (n_tok >= 4 && nsb <= CACHE_COLS / LEAN_QK_K) BATCH_SCHEDULE(RB, K_PREP, U, K_TILE_CALL); \
        else TILE_SCHEDULE(RB, K_TILE_CALL);                                                        \
    } while (0)

/* The exact kernels' matmul (each file's matmul_x body, over its x_unpack and x_tile; VEC its
 * vector of LANES floats, XCACHE_VECS its stack's worth): a batch (more than 4 tokens) unpacks
 * 4 rows at a time onto the stack (1 when they do not fit), then tiles of 4 rows x 4 tokens (x 1
 * to 3 for the tokens left); 1 to 4 tokens (decode, a batched decode of a few sequences), and
 * rows too long for the stack, 4 x TT tiles made in registers, each weight made once for the
 * TT tokens (x_tile prefetching each block's lines as it reads them); the rows left over one
 * at a time. X_TILE_TT: x_tile of TT (1 to 4) tokens. */
#define X_TILE_TT(RT, TT)                                                                           \
    do {                                                                                            \
        switch (TT) {                                                                               \
        case 1: x_tile(f, RT, 1, cols, wr, w_row_bytes, c, cs, xs, yt, y_row_elems); break;        \
        case 2: x_tile(f, RT, 2, cols, wr, w_row_bytes, c, cs, xs, yt, y_row_elems); break;        \
        case 3: x_tile(f, RT, 3, cols, wr, w_row_bytes, c, cs, xs, yt, y_row_elems); break;        \
        default: x_tile(f, RT, 4, cols, wr, w_row_bytes, c, cs, xs, yt, y_row_elems); break;       \
        }                                                                                           \
    } while (0)
#define EXACT_MATMUL(VEC, LANES)                                                                    \
    do {                                                                                            \
        VEC cache[XCACHE_VECS];                                                                     \
        const int64_t cs = cols / (LANES); /* a cached row's vectors */                             \
        const bool cached = n_tok > 4 && cs <= XCACHE_VECS;                                         \
        for (int64_t r = r0; r < r1;) {                                                             \
            const int RT = r1 - r >= 4 && (!cached || 4 * cs <= XCACHE_VECS) ? 4 : 1;               \
            const uint8_t *wr = w + (size_t)r * w_row_bytes;                                        \
            if (cached)                                                                             \
                for (int i = 0; i < RT; i++) x_unpack(f, cols, wr + (size_t)i * w_row_bytes, cache + i * cs); \
            const VEC *c = cached ? cache : NULL;                                                   \
            for (int32_t t = 0; t < n_tok;) {                                                       \
                const int TT = n_tok - t < 4 ? n_tok - t : 4;                                       \
                const float *xs[4];                                                                 \
                for (int i = 0; i < 4; i++) xs[i] = (const float *)(x + (size_t)(t + (i < TT ? i : 0)) * x_row_bytes); \
                float *yt = y + (int64_t)t * y_row_elems + r;                                       \
                if (RT == 4) X_TILE_TT(4, TT);                                                      \
                else X_TILE_TT(1, TT);                                                              \
                t += TT;                                                                            \
            }                                                                                       \
            r += RT;                                                                                \
        }                                                                                           \
    } while (0)

#endif
