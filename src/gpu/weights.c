/* weights.c — weight matrices on the GPU in their own block formats (weights.h is the
 * contract): the load-time repacking, the upload, and the three kernels that read them —
 * matmul_vec (decode), matmul_tiled (prefill) and get_rows (embedding gather), each compiled
 * after shaders/formats.wgsl, which decodes every format on the GPU.
 *
 * Sections: 1. layouts and the format table  2. upload  3. pipelines and dispatch shapes
 *           4. matmul  5. get_rows
 *
 * ---- 1. Layouts on the GPU ----
 * WGSL storage is read in u32 words, so every block must start on a word. Formats whose
 * blocks are whole words are uploaded as the file has them; the others lose their f16 scale d,
 * which moves to an array after all the blocks. nb = rows * cols / block_elems blocks, in row
 * order (block b of the matrix is block b % bpr of row b / bpr).
 *
 *   F32, F16, BF16       as the file: element e = row * cols + col at byte 4e (F32) or 2e;
 *                        the last word zero-padded
 *   Q4_1 (20 bytes), Q5_1 (24), Q4_K (144), Q5_K (176)
 *                        as the file: block b at word b * block_bytes / 4; its f16 d (and m
 *                        or dmin) are the low (and high) half of the block's first word
 *   Q8_0 (34), Q4_0 (18), Q5_0 (22), Q6_K (210)  the scale cut out:
 *     OFFSET (bytes)   SIZE          DESCRIPTION
 *     b * qb           qb            block b without its 2 bytes of d (qb = block_bytes - 2:
 *                                    32, 16, 20, 208; the other bytes keep their order)
 *     nb * qb + 2 b    2             d of block b, f16 (the array padded to a whole word)
 *   The words of one block, as formats.wgsl reads them (SCALE_BASE = nb * qb / 4 words):
 *     Q8_0  0..7 qs                      Q4_1  0 d | m << 16, 1..4 qs
 *     Q4_0  0..3 qs                      Q5_1  0 d | m << 16, 1 qh, 2..5 qs
 *     Q5_0  0 qh, 1..4 qs                Q4_K  0 d | dmin << 16, 1..3 scales, 4..35 qs
 *     Q6_K  0..31 ql, 32..47 qh,         Q5_K  0 d | dmin << 16, 1..3 scales, 4..11 qh,
 *           48..51 scales (int8)               12..43 qs
 *
 * The f16 values are read with unpack2x16float, bf16 by a shift; every weight is recomputed
 * with the reference dequantizer's operations (formats.wgsl), so get_rows is exact.
 *
 * A mixed stack (gpu_weight_upload_stacked of Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 parts: all 32-weight
 * blocks, 8-weight chunks) keeps each part's block layout above in one buffer, so each part's
 * dq_<fmt> reads it unchanged. The parts' rows are placed at virtual rows: block b (over the
 * virtual rows) of a part with k words a block sits at word k * b, and the separated scales of
 * every virtual row at SCALE_BASE + b / 2, as in one matrix. A part starts at the first virtual
 * row after the previous one whose words do not overlap it (k rising: right after it; falling:
 * a gap of unused rows). Chunks must give the same columns in every part (the kernels read x
 * once for all rows): the nibble formats' order (col_nib), so a Q8_0 part's 32 quants are
 * stored in that order (byte 8k + i of a block holds the weight of column col_nib(k, i)).
 */
#include "weights.h"

#include "formats.h"
#include "ops.h" /* GPU_OP_WG: rmsnorm's workgroup, whose order a normed matmul keeps */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The GPU side of a format: weights per chunk (formats.wgsl), and the byte offset of the f16
 * scale cut out of each block (-1: the blocks are uploaded as they are). The WGSL helpers are
 * named after lean_type_traits.name (dq_q4_0, col_q4_0). */
typedef struct gpu_format {
    uint32_t type;
    uint32_t chunk;
    int32_t d_offset;
} gpu_format;

static const gpu_format FORMATS[] = {
    {LEAN_TYPE_F32, 4, -1},  {LEAN_TYPE_F16, 4, -1},  {LEAN_TYPE_BF16, 4, -1}, {LEAN_TYPE_Q8_0, 8, 0},
    {LEAN_TYPE_Q4_0, 8, 0},  {LEAN_TYPE_Q4_1, 8, -1}, {LEAN_TYPE_Q5_0, 8, 0},  {LEAN_TYPE_Q5_1, 8, -1},
    {LEAN_TYPE_Q4_K, 16, -1}, {LEAN_TYPE_Q5_K, 16, -1}, {LEAN_TYPE_Q6_K, 16, 208},
};

static const gpu_format *format_of(uint32_t type) {
    for (size_t i = 0; i < sizeof FORMATS / sizeof FORMATS[0]; i++)
        if (FORMATS[i].type == type) return &FORMATS[i];
    return NULL;
}

/* ---- 2. upload ---- */

/* Blocks repacked per write: even (so each piece of the scale array starts on a word) and
 * small enough that a piece of quants stays under the runtime's 8 MiB write. */
#define REPACK_BLOCKS 32768

/* Uploads the bytes as they are: whole words, then the last 1..3 bytes zero-padded. */
static lean_status upload_plain(lean_gpu *g, lean_gpu_buf *b, const uint8_t *src, uint64_t n_bytes,
                                lean_error *err) {
    const uint64_t whole = n_bytes & ~(uint64_t)3;
    lean_status st = whole ? lean_gpu_buf_write(g, b, 0, src, whole, err) : LEAN_OK;
    if (st == LEAN_OK && whole < n_bytes) {
        uint8_t tail[4] = {0};
        memcpy(tail, src + whole, (size_t)(n_bytes - whole));
        st = lean_gpu_buf_write(g, b, whole, tail, 4, err);
    }
    return st;
}

/* Uploads nb blocks with their f16 scale cut out (section 1), REPACK_BLOCKS at a time. */
static lean_status upload_split(lean_gpu *g, lean_gpu_buf *b, const uint8_t *src, uint64_t nb,
                                uint32_t block_bytes, uint32_t d_offset, lean_error *err) {
    const uint32_t qb = block_bytes - 2;
    uint8_t *quants = lean_malloc((size_t)REPACK_BLOCKS * qb);
    uint8_t *scales = lean_malloc(REPACK_BLOCKS * 2);
    lean_status st = LEAN_OK;
    if (!quants || !scales) {
        st = LEAN_FAIL(err, LEAN_ERR_NOMEM, "no memory to repack %u blocks for the GPU", REPACK_BLOCKS);
        goto done;
    }
    for (uint64_t b0 = 0; b0 < nb && st == LEAN_OK; b0 += REPACK_BLOCKS) {
        const uint64_t n = nb - b0 < REPACK_BLOCKS ? nb - b0 : REPACK_BLOCKS;
        for (uint64_t i = 0; i < n; i++) {
            const uint8_t *blk = src + (b0 + i) * block_bytes;
            memcpy(quants + i * qb, blk, d_offset);
            memcpy(quants + i * qb + d_offset, blk + d_offset + 2, qb - d_offset);
            memcpy(scales + 2 * i, blk + d_offset, 2);
        }
        const uint64_t scale_bytes = (2 * n + 3) & ~(uint64_t)3; /* padded: n is even but at the end */
        if (scale_bytes > 2 * n) memset(scales + 2 * n, 0, 2);
        st = lean_gpu_buf_write(g, b, b0 * qb, quants, n * qb, err);
        if (st == LEAN_OK) st = lean_gpu_buf_write(g, b, nb * qb + 2 * b0, scales, scale_bytes, err);
    }
done:
    lean_free(quants);
    lean_free(scales);
    return st;
}

uint64_t gpu_binding_max_bytes(const lean_gpu *g) {
    const lean_gpu_info *info = lean_gpu_get_info(g);
    uint64_t limit = info->max_storage_binding < info->max_buffer ? info->max_storage_binding : info->max_buffer;
    return limit > (1ull << 32) - 4 ? (1ull << 32) - 4 : limit;
}

/* t's shape against its type, and its size against gpu_binding_max_bytes. */
static lean_status check_tensor(lean_gpu *g, const lean_tensor *t, const lean_type_traits *tr, lean_error *err) {
    const int64_t cols = t->ne[0], rows = t->ne[1] * t->ne[2] * t->ne[3];
    uint64_t file_bytes;
    if (cols < 1 || rows < 1 || cols % tr->block_elems ||
        !lean_type_bytes(t->type, (uint64_t)rows * (uint64_t)cols, &file_bytes) || file_bytes != t->n_bytes)
        return LEAN_FAIL(err, LEAN_ERR_ARG,
                         "tensor '%s' (%s): %lld x %lld elements, %llu bytes is not a whole number of %u-element blocks",
                         t->name, tr->name, (long long)rows, (long long)cols, (unsigned long long)t->n_bytes,
                         tr->block_elems);
    if (!t->data) return LEAN_FAIL(err, LEAN_ERR_ARG, "tensor '%s': its data is not loaded", t->name);
    const uint64_t limit = gpu_binding_max_bytes(g);
    if (t->n_bytes > limit)
        return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED,
                         "tensor '%s' (%s, %lld x %lld) takes %llu bytes on the GPU, more than this device's "
                         "storage binding limit of %llu bytes",
                         t->name, tr->name, (long long)rows, (long long)cols, (unsigned long long)t->n_bytes,
                         (unsigned long long)limit);
    return LEAN_OK;
}

lean_status gpu_weight_upload(lean_gpu *g, const lean_tensor *t, gpu_weight *out, lean_error *err) {
    const gpu_format *f = format_of(t->type);
    const lean_type_traits *tr = lean_type_traits_get(t->type);
    if (!f || !tr)
        return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "tensor '%s': type %u%s%s has no GPU kernels", t->name,
                         t->type, tr ? " = " : "", tr ? tr->name : "");
    lean_status st = check_tensor(g, t, tr, err);
    if (st != LEAN_OK) return st;
    const uint64_t gpu_bytes = (t->n_bytes + 3) & ~(uint64_t)3; /* either layout: the file's bytes, reordered */
    lean_gpu_buf *b = NULL;
    st = lean_gpu_buf_create(g, gpu_bytes, LEAN_GPU_STORAGE, t->name, &b, err);
    if (st != LEAN_OK) return st;
    if (f->d_offset < 0) st = upload_plain(g, b, t->data, t->n_bytes, err);
    else
        st = upload_split(g, b, t->data, t->n_bytes / tr->block_bytes, tr->block_bytes, (uint32_t)f->d_offset,
                          err);
    if (st != LEAN_OK) {
        lean_gpu_buf_free(b);
        return st;
    }
    const uint64_t nb = t->n_bytes / tr->block_bytes;
    *out = (gpu_weight){.type = t->type, .rows = t->ne[1] * t->ne[2] * t->ne[3], .cols = t->ne[0], .buf = b,
                        .scale_base = f->d_offset < 0 ? 0 : nb * (tr->block_bytes - 2) / 4};
    return LEAN_OK;
}

/* Words a block of a mixed stack's format keeps on the GPU (section 1); 0: it does not mix. */
static uint32_t mixed_words(uint32_t type) {
    switch (type) {
    case LEAN_TYPE_Q4_0: return 4;
    case LEAN_TYPE_Q5_0: case LEAN_TYPE_Q4_1: return 5;
    case LEAN_TYPE_Q5_1: return 6;
    case LEAN_TYPE_Q8_0: return 8;
    default: return 0;
    }
}

bool gpu_weight_stackable(const lean_tensor *const *ts, int n) {
    int runs = 1;
    bool mixable = mixed_words(ts[0]->type) > 0;
    for (int i = 1; i < n; i++) {
        if (ts[i]->ne[0] != ts[0]->ne[0]) return false;
        runs += ts[i]->type != ts[i - 1]->type;
        mixable = mixable && mixed_words(ts[i]->type) > 0;
    }
    return runs == 1 || (mixable && runs <= GPU_WEIGHT_MAX_PARTS);
}

/* Copies block src of a mixed stack's part into its place: the quants at q (a Q8_0 block's in
 * col_nib order), the f16 scale (split formats) at scale. */
static void mixed_block(uint32_t type, const uint8_t *src, uint8_t *q, uint8_t *scale) {
    const lean_type_traits *tr = lean_type_traits_get(type);
    if (format_of(type)->d_offset < 0) { /* Q4_1, Q5_1: the block as it is */
        memcpy(q, src, tr->block_bytes);
        return;
    }
    memcpy(scale, src, 2); /* d first in Q4_0, Q5_0, Q8_0 */
    if (type != LEAN_TYPE_Q8_0) {
        memcpy(q, src + 2, tr->block_bytes - 2u);
        return;
    }
    for (int k = 0; k < 4; k++) /* chunk k: columns 4k .. 4k + 3, then 16 + 4k .. 16 + 4k + 3 */
        for (int i = 0; i < 8; i++) q[8 * k + i] = src[2 + (i < 4 ? 4 * k + i : 12 + 4 * k + i)];
}

/* The parts of a mixed stack (runs of one type) with their virtual rows (section 1); returns
 * the virtual rows in all, *words the words of quants before the scales. */
static int64_t mixed_layout(const lean_tensor *const *ts, int n, gpu_weight *w, uint64_t *words) {
    const uint64_t bpr = (uint64_t)ts[0]->ne[0] / 32;
    int64_t logical = 0, virt = 0, end_words = 0; /* end_words: the last part's end, in rows x bpr x k */
    w->n_parts = 0;
    for (int i = 0; i < n; i++) {
        const int64_t rows = ts[i]->ne[1] * ts[i]->ne[2] * ts[i]->ne[3];
        if (i == 0 || ts[i]->type != ts[i - 1]->type) { /* a new part: its first virtual row */
            const int64_t k = mixed_words(ts[i]->type), start = (end_words + k - 1) / k;
            virt = start > virt ? start : virt;
            w->part[w->n_parts++] = (gpu_weight_part){.type = ts[i]->type, .gap = virt - logical};
        }
        logical += rows, virt += rows;
        w->part[w->n_parts - 1].end = logical;
        end_words = virt * (int64_t)mixed_words(ts[i]->type);
    }
    *words = (uint64_t)end_words * bpr;
    return virt;
}

/* A stack of several 32-weight block formats (gpu_weight_stackable), laid out on the host as
 * section 1 says and uploaded. */
static lean_status upload_mixed(lean_gpu *g, const lean_tensor *const *ts, int n, const char *name, gpu_weight *out,
                                lean_error *err) {
    gpu_weight w = {.type = ts[0]->type, .cols = ts[0]->ne[0]};
    uint64_t words;
    const int64_t virt = mixed_layout(ts, n, &w, &words);
    const uint64_t bpr = (uint64_t)w.cols / 32, bytes = 4 * words + (((uint64_t)virt * bpr * 2 + 3) & ~(uint64_t)3);
    w.rows = w.part[w.n_parts - 1].end;
    w.scale_base = words;
    if (bytes > gpu_binding_max_bytes(g))
        return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "%s: %llu bytes on the GPU, more than this device's storage binding "
                         "limit of %llu bytes", name, (unsigned long long)bytes,
                         (unsigned long long)gpu_binding_max_bytes(g));
    uint8_t *host = lean_calloc(1, (size_t)bytes);
    if (!host) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "%s: no memory to stack %llu bytes", name, (unsigned long long)bytes);
    int64_t row = 0; /* tensor i's first row */
    for (int i = 0, p = 0; i < n; row += ts[i]->ne[1] * ts[i]->ne[2] * ts[i]->ne[3], i++) {
        const lean_type_traits *tr = lean_type_traits_get(ts[i]->type);
        while (w.part[p].end <= row) p++; /* the part holding the tensor's first row */
        const uint64_t nb = ts[i]->n_bytes / tr->block_bytes, k = mixed_words(ts[i]->type);
        const uint64_t b0 = (uint64_t)(row + w.part[p].gap) * bpr; /* the tensor's first virtual block */
        for (uint64_t b = 0; b < nb; b++)
            mixed_block(ts[i]->type, (const uint8_t *)ts[i]->data + b * tr->block_bytes, host + 4 * k * (b0 + b),
                        host + 4 * words + 2 * (b0 + b));
    }
    lean_status st = lean_gpu_buf_create(g, bytes, LEAN_GPU_STORAGE, name, &w.buf, err);
    if (st == LEAN_OK) st = lean_gpu_buf_write(g, w.buf, 0, host, bytes, err); /* it writes in pieces */
    lean_free(host);
    if (st != LEAN_OK) {
        lean_gpu_buf_free(w.buf);
        return st;
    }
    *out = w;
    return LEAN_OK;
}

lean_status gpu_weight_upload_stacked(lean_gpu *g, const lean_tensor *const *ts, int n, const char *name,
                                      gpu_weight *out, lean_error *err) {
    lean_tensor t = {.name = name, .type = ts[0]->type, .ne = {ts[0]->ne[0], 0, 1, 1}};
    bool mixed = false;
    for (int i = 0; i < n; i++) {
        if (!gpu_weight_stackable(ts, i + 1))
            return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "%s: '%s' (type %u, %lld columns) does not stack on '%s'",
                             name, ts[i]->name, ts[i]->type, (long long)ts[i]->ne[0], ts[0]->name);
        lean_status st = check_tensor(g, ts[i], lean_type_traits_get(ts[i]->type), err);
        if (st != LEAN_OK) return st;
        mixed = mixed || ts[i]->type != t.type;
        t.ne[1] += ts[i]->ne[1] * ts[i]->ne[2] * ts[i]->ne[3];
        t.n_bytes += ts[i]->n_bytes;
    }
    if (mixed) return upload_mixed(g, ts, n, name, out, err);
    uint8_t *bytes = t.n_bytes <= SIZE_MAX ? lean_malloc((size_t)t.n_bytes) : NULL;
    if (!bytes)
        return LEAN_FAIL(err, LEAN_ERR_NOMEM, "%s: no memory to stack %llu bytes", name, (unsigned long long)t.n_bytes);
    for (uint64_t i = 0, at = 0; i < (uint64_t)n; at += ts[i]->n_bytes, i++)
        memcpy(bytes + at, ts[i]->data, ts[i]->n_bytes);
    t.data = bytes;
    lean_status st = gpu_weight_upload(g, &t, out, err);
    lean_free(bytes);
    return st;
}

void gpu_weight_free(gpu_weight *w) {
    if (!w) return;
    lean_gpu_buf_free(w->buf);
    w->buf = NULL;
}

/* ---- 3. pipelines and dispatch shapes ---- */

/* Kernel shapes (the compat defaults bound them: <= 128 invocations, <= 16 KiB workgroup
 * memory), each the fastest of a sweep on the H200 (scripts/h200_tile_sweep.sh; the numbers
 * are in docs/runs/2026-12-02-gpu-h200-resident.md, 2026-12-03-gpu-h200-decode.md and
 * 2026-12-03-gpu-h200-latency.md).
 * matmul_vec: VEC_WG lanes, VEC_RPW outputs per workgroup (more workgroups for latency-bound
 * decode: 2 outputs ran smollm2-135m q8_0 tg128 1.18x faster than 4, 1 and 8 slower), but
 * VEC_RPW_SHORT where a lane has at most VEC_SHORT_CPL chunks of a row: with little work a
 * workgroup, more rows share its start and its reduction (tg128 against 2 everywhere:
 * smollm2-360m q4_0 1.08x, qwen2.5-0.5b q4_k_m 1.05x, smollm2-135m q8_0 0.99x; 4 up to 3
 * chunks a lane and 8 outputs were slower).
 * matmul_tiled: 64 x 2 invocations, each 2 outputs (an output's NW rows: 2 for SwiGLU) x 16
 * tokens: tiles of 128 outputs x 32 tokens, so a weight chunk is decoded once per 16 tokens;
 * 128 columns of the 32 tokens staged per step (16 KiB); 1.2x (smollm2-360m) to 1.45x
 * (smollm2-1.7b) the 128 x (1 output x 16 tokens) before it at pp512. Matrices of
 * TILE_WIDE_MIN outputs and columns or more take 128 x 1 invocations of 2 outputs x 32 tokens
 * (tiles of 256 x 32: a chunk decoded once per 32 tokens): pp512 smollm2-1.7b q4_0 1.18x
 * (5515 -> 6516 tokens/s), where shorter rows lose more to the halved workgroup count than
 * they gain (qwen2.5-0.5b q8_0 0.95x with its 4864 x 896 [Wgate; Wup] wide). Outside SwiGLU
 * (whose 2 outputs are 4 rows already) a wide invocation takes TILE_WIDE_TR = 4 outputs x 32
 * tokens (tiles of 512 x 32): each x the workgroup stages is read from workgroup memory once
 * for 4 rows, not 2 — those reads, not the multiply-adds, bound the kernel. pp512 smollm2-1.7b
 * q4_0 8372 vs 7633 (1.10x), q8_0 7965 vs 7998; where every shape took 4, qwen2.5-0.5b q8_0
 * lost (0.96x; docs/runs/2026-12-04-gpu-h200-groups.md). The shape never changes the bits.
 * get_rows: ROWS_WG chunks per workgroup. */
enum { VEC_WG = 128, VEC_RPW = 2, VEC_RPW_SHORT = 4, VEC_SHORT_CPL = 1 };
/* a normed matmul_vec whose lanes take several chunks: 4 outputs share a workgroup's norm
 * (smollm2-1.7b tg128 q4_0 1.01x, q8_0 1.01x against 2) */
enum { VEC_RPW_NORMED = 4 };
/* Prefetch (vec_prefetch): a normed matmul_vec decodes its lanes' first chunk of every row
 * before it sums the row's squares (matmul_vec.wgsl's PRE; the same sums), in formats of
 * chunks up to VEC_PREFETCH_CH weights (the K-quants' 16 would hold 2 x RPW_NORMED x 16
 * registers). H200 tg128 against no prefetch, scripts/h200_tile_sweep.sh's "pipe:0" and
 * "pre:1" (docs/runs/2026-12-03-gpu-h200-sweep.md): smollm2-135m q4_k_m (its normed matrices
 * Q5_0) 1.09x, smollm2-1.7b q4_0 1.00x, q8_0 0.95x, qwen2.5-0.5b q8_0 0.97x: Q5_0 alone takes
 * it. lean_gpu_options.vec_prefetch overrides it (the tests run the default, and every format
 * that can with it on). */
enum { VEC_PREFETCH_CH = 8 };
/* the logits' matrix, a row a vocabulary entry: VEC_RPW_VOCAB outputs a workgroup from
 * VEC_VOCAB_OUTS outputs on, where 2 made tens of thousands of workgroups of a few KiB each
 * (H200 tg128 qwen2.5-0.5b q8_0, 151936 rows: 1135 tokens/s at 8, 1100 at 2, 1108 at 16;
 * smollm2's 49152 rows within 1%: docs/runs/2026-12-03-gpu-h200-table.md) */
enum { VEC_RPW_VOCAB = 8, VEC_VOCAB_OUTS = 16384 };
_Static_assert(VEC_RPW % 2 == 0 && VEC_RPW_SHORT % 2 == 0 && VEC_RPW_NORMED % 2 == 0,
               "the q|k|v epilogue: a workgroup holds whole RoPE pairs");
_Static_assert(VEC_WG >= GPU_OP_WG && (VEC_WG & (VEC_WG - 1)) == 0, "matmul_in.wgsl sums as rmsnorm's GPU_OP_WG lanes");
enum { TILE_GR = 64, TILE_GT = 2, TILE_TR = 2, TILE_TT = 16, TILE_KSTEP = 128 };
enum { TILE_WIDE_GR = 128, TILE_WIDE_MIN = 2048, TILE_WIDE_TR = 4 };
enum { TILE_T = TILE_GT * TILE_TT }; /* tokens a tile, both shapes (the wide one has GT = 1) */
/* A matrix whose output tiles give a TILE_SPLIT_TOK-token prefill fewer than TILE_SPLIT_WG
 * workgroups is split over its columns into enough parts to reach it, each of at least
 * TILE_SPLIT_MIN_STEPS 128-column steps (matmul_tiled.wgsl's KSPLIT; the partial sums are
 * added by matmul_combine.wgsl, COMBINE_WG outputs x COMBINE_CT tokens a workgroup). Unsplit,
 * a 896-output Wdown (qwen2.5-0.5b) made 112 workgroups at pp512 for the H200's 132
 * multiprocessors. Split (H200 pp512 against no split, docs/runs/2026-12-03-gpu-h200-split.md):
 * qwen2.5-0.5b q8_0 1.12x, smollm2-135m q4_k_m 1.13x, smollm2-1.7b q4_0 1.09x; a target of
 * 256, 512 or 1024 workgroups within 3% of each other, 1024 taken. The rule reads the
 * matrix's shape alone, so the bits never depend on n_tok. */
enum { TILE_SPLIT_WG = 1024, TILE_SPLIT_TOK = 512, TILE_SPLIT_MIN_STEPS = 2 };
enum { COMBINE_WG = 64, COMBINE_CT = 8 };
enum { ROWS_WG = 64 };

/* Chunks of formats.wgsl in a row of w (the F32/F16/BF16 rows end in a partial one). */
static uint64_t row_chunks(const gpu_weight *w) {
    const uint32_t chunk = format_of(w->type)->chunk;
    return ((uint64_t)w->cols + chunk - 1) / chunk;
}

/* The constants every kernel over w needs (formats.wgsl's list); returns how many. */
static int shape_consts(const gpu_weight *w, lean_gpu_const *c) {
    const gpu_format *f = format_of(w->type);
    const lean_type_traits *tr = lean_type_traits_get(w->type);
    const uint64_t bpr = (uint64_t)w->cols / tr->block_elems, scale_base = w->scale_base;
    c[0] = (lean_gpu_const){"ROWS", 'u', (double)w->rows};
    c[1] = (lean_gpu_const){"COLS", 'u', (double)w->cols};
    c[2] = (lean_gpu_const){"CHUNKS", 'u', (double)row_chunks(w)};
    c[3] = (lean_gpu_const){"BPR", 'u', (double)bpr};
    c[4] = (lean_gpu_const){"SCALE_BASE", 'u', (double)scale_base};
    c[5] = (lean_gpu_const){"CH", 'u', (double)f->chunk};
    return 6;
}

/* The chunk dot matmul_vec takes for a format (formats.wgsl's vl_ and vd_ pairs): Q4_0's,
 * Q4_1's and Q5_1's own (their quants dotted with x, then the block's scale and min), every
 * other format's decoded chunk ("dq"). H200 tg128 against "dq" (docs/runs/2026-12-04-gpu-h200-
 * dots.md): smollm2-1.7b q4_0 1.08x, smollm2-360m q4_1 1.08x, q5_1 1.06x. Not Q5_0 (smollm2-360m
 * q5_0 0.96x, though the Q4_K_M files, whose normed matrices are Q5_0, gained 3-4% with it) nor
 * Q8_0 (smollm2-1.7b 0.96x, qwen2.5-0.5b 1.02x). */
static const char *chunk_dot_of(uint32_t type) {
    const bool own = type == LEAN_TYPE_Q4_0 || type == LEAN_TYPE_Q4_1 || type == LEAN_TYPE_Q5_1;
    return own ? lean_type_traits_get(type)->name : "dq";
}

/* matmul_vec's chunk pair for the glue: VRAW, chunk_vload and chunk_vdot as formats.wgsl's
 * vl_ and vd_ pair named dot; returns the text's length */
static int chunk_dot_glue(char *glue, size_t cap, const char *dot) {
    return snprintf(glue, cap,
                    "alias VRAW = VR_%s;\n"
                    "fn chunk_vload(row: u32, c: u32) -> VRAW { return vl_%s(row, c); }\n"
                    "fn chunk_vdot(r: VRAW, acc: f32, x: XRUNS) -> f32 { return vd_%s(r, acc, x); }\n",
                    dot, dot, dot);
}

/* The glue naming w's format for formats.wgsl (its functions; a mixed stack's dequant_chunk
 * picks the part by row, every part's chunks in col_nib's columns), and the format's name for
 * labels; returns the glue's length. Groups (matmul_tiled's loads): Q4_0's and Q8_0's own, of
 * 4 and 2 chunks; every other format (and a mixed stack) one chunk a group. Chunk dots
 * (matmul_vec's): chunk_dot_of's; a mixed stack of decoded chunks alone takes "dq" through its
 * dequant_chunk (so PRE still decodes its first chunks early), one with a part of its own dot
 * a chunk_vdot that picks the part by row, VRAW (row, c) (so its loads come late, PRE or not). */
static int weight_glue(const gpu_weight *w, char *glue, size_t cap, char *name, size_t name_cap) {
    const char *first = lean_type_traits_get(w->type)->name;
    const bool grouped = w->n_parts == 0 && (w->type == LEAN_TYPE_Q4_0 || w->type == LEAN_TYPE_Q8_0);
    int n = snprintf(glue, cap,
                     "const GCH: u32 = %du;\n"
                     "fn chunk_group(row: u32, g: u32) -> GRAW { return gl_%s(row, g); }\n"
                     "fn group_chunk(r: GRAW, k: u32) { gd_%s(r, k); }\n",
                     !grouped ? 1 : w->type == LEAN_TYPE_Q4_0 ? 4 : 2, grouped ? first : "any", grouped ? first : "any");
    if (grouped) /* matmul_tiled_i8's blocks */
        n += snprintf(glue + n, cap - (size_t)n, "const BI_ZERO: i32 = %d;\nfn block_i8(row: u32, b: u32) -> BI8 { return bi_%s(row, b); }\n",
                      w->type == LEAN_TYPE_Q4_0 ? 8 : 0, first);
    if (w->n_parts == 0) {
        snprintf(name, name_cap, "%s", first);
        n += snprintf(glue + n, cap - (size_t)n,
                      "fn dequant_chunk(row: u32, c: u32) { dq_%s(row, c); }\n"
                      "fn chunk_col(c: u32, i: u32) -> u32 { return col_%s(c, i); }\n",
                      first, first);
        return n + chunk_dot_glue(glue + n, cap - (size_t)n, chunk_dot_of(w->type));
    }
    n += snprintf(glue + n, cap - (size_t)n, "fn dequant_chunk(row: u32, c: u32) {\n");
    int m = 0; /* the chunk_vdot that picks the part, appended after dequant_chunk's */
    char vdot[1024];
    m += snprintf(vdot, sizeof vdot,
                  "alias VRAW = vec2<u32>;\n"
                  "fn chunk_vload(row: u32, c: u32) -> VRAW { return VRAW(row, c); }\n"
                  "fn chunk_vdot(r: VRAW, acc: f32, x: XRUNS) -> f32 {\n");
    size_t at = 0;
    bool own = false; /* a part with its own chunk dot */
    for (int p = 0; p < w->n_parts; p++) {
        const lean_type t = w->part[p].type;
        const char *fmt = lean_type_traits_get(t)->name, *dot = chunk_dot_of(t);
        const long long end = (long long)w->part[p].end, gap = (long long)w->part[p].gap;
        at += (size_t)snprintf(name + at, name_cap - at, "%s%s", p ? "+" : "", fmt);
        n += snprintf(glue + n, cap - (size_t)n, "    if (row < %lldu) { dq_%s(row + %lldu, c); return; }\n", end, fmt,
                      gap);
        own = own || strcmp(dot, "dq") != 0;
        /* vl_dq reads through dequant_chunk, which finds the part itself: the row as it is */
        m += snprintf(vdot + m, sizeof vdot - (size_t)m, "    if (r.x < %lldu) { return vd_%s(vl_%s(r.x + %lldu, r.y), acc, x); }\n",
                      end, dot, dot, strcmp(dot, "dq") ? gap : 0);
    }
    n += snprintf(glue + n, cap - (size_t)n, "}\nfn chunk_col(c: u32, i: u32) -> u32 { return col_nib(c, i); }\n");
    if (!own) return n + chunk_dot_glue(glue + n, cap - (size_t)n, "dq");
    return n + snprintf(glue + n, cap - (size_t)n, "%s    return acc;\n}\n", vdot);
}

/* Compiles formats.wgsl + the glue naming w's format (and, for a matmul, its modes: out, a
 * function of matmul_out.wgsl; in, one of matmul_in.wgsl, matmul_vec only) + kernel + those
 * files + words (how W is read: "words_u32" or "words_vec4") + arith (matmul_tiled's
 * tiled_f32.wgsl or tiled_f16.wgsl) + tiled_common.wgsl for the tiled kernels, with w's shape
 * constants and n_extra kernel constants. NULL modes: not compiled in. */
static lean_status make_pipeline(lean_gpu *g, const gpu_weight *w, const char *kernel, const char *words,
                                 const char *in, const char *out, const char *arith, const lean_gpu_const *extra,
                                 int n_extra, lean_gpu_pipeline **res, lean_error *err) {
    char glue[2048], label[96], name[48];
    int n = weight_glue(w, glue, sizeof glue, name, sizeof name);
    if (out)
        n += snprintf(glue + n, sizeof glue - (size_t)n,
                      "fn y_out(i: u32, o: u32, a: f32, b: f32) { y_%s(i, o, a, b); }\n", out);
    if (in)
        snprintf(glue + n, sizeof glue - (size_t)n,
                 "fn x_begin(l: u32) { x_begin_%s(l); }\n"
                 "fn x4_at(col: u32) -> vec4<f32> { return x4_at_%s(col); }\n", in, in);
    snprintf(label, sizeof label, "%s_%s%s%s%s%s%s%s", kernel, name, in ? "_" : "", in ? in : "", out ? "_" : "",
             out ? out : "", arith ? "_" : "", arith ? arith : "");
    const char *src[8] = {lean_gpu_shader("formats"), glue, lean_gpu_shader(kernel), lean_gpu_shader(words)};
    int n_src = 4;
    if (out) src[n_src++] = lean_gpu_shader("matmul_out");
    if (in) src[n_src++] = lean_gpu_reduce_shader(g), src[n_src++] = lean_gpu_shader("matmul_in");
    if (arith) src[n_src++] = lean_gpu_shader(arith);
    if (!strncmp(kernel, "matmul_tiled", 12)) src[n_src++] = lean_gpu_shader("tiled_common"); /* both tiled kernels' */
    for (int i = 0; i < n_src; i++)
        if (!src[i]) return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "pipeline '%s': shader missing", label);
    lean_gpu_const consts[32];
    const int n_shape = shape_consts(w, consts);
    memcpy(consts + n_shape, extra, sizeof(lean_gpu_const) * (size_t)n_extra);
    return lean_gpu_pipeline_create(g, label, src, n_src, consts, n_shape + n_extra, res, err);
}

/* the device's limit on workgroups per dispatch dimension (65535 when it does not say) */
static uint32_t max_groups(lean_gpu *g) {
    const uint32_t max = lean_gpu_get_info(g)->max_workgroups_per_dim;
    return max ? max : 65535;
}

/* n workgroups over x and y (each <= the device's per-dimension limit): *nx * *ny >= n; the
 * kernels index workgroup wid.y * nx + wid.x and skip those >= n. */
static lean_status split_groups(lean_gpu *g, uint64_t n, const char *what, uint32_t *nx, uint32_t *ny,
                                lean_error *err) {
    const uint32_t max = max_groups(g);
    const uint64_t x = n < max ? n : max, y = (n + x - 1) / x;
    if (y > max)
        return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "%s: %llu workgroups exceed %u x %u", what,
                         (unsigned long long)n, max, max);
    *nx = (uint32_t)x;
    *ny = (uint32_t)y;
    return LEAN_OK;
}

/* buf holds [offset, offset + bytes) and offset is aligned for binding */
static lean_status check_binding(lean_gpu *g, const lean_gpu_buf *buf, uint64_t offset, uint64_t bytes,
                                 const char *what, lean_error *err) {
    const uint32_t align = lean_gpu_get_info(g)->min_storage_offset_align;
    if (!buf) return LEAN_FAIL(err, LEAN_ERR_ARG, "%s: no buffer", what);
    if (align && offset % align)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "%s: offset %llu is not a multiple of %u", what,
                         (unsigned long long)offset, align);
    if (offset > lean_gpu_buf_size(buf) || bytes > lean_gpu_buf_size(buf) - offset)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "%s: needs bytes [%llu, %llu), the buffer has %llu", what,
                         (unsigned long long)offset, (unsigned long long)(offset + bytes),
                         (unsigned long long)lean_gpu_buf_size(buf));
    return LEAN_OK;
}

/* ---- 4. matmul ---- */

struct gpu_matmul {
    lean_gpu_pipeline *vec, *tiled, *combine; /* tiled: NULL when max_tok is 1; combine: unless split */
    lean_gpu_bindgroup *vec_bg, *tiled_bg, *combine_bg;
    uint32_t vec_x, vec_y;   /* matmul_vec's workgroups */
    uint32_t tile_x, tile_y; /* matmul_tiled's output tiles x splits (tokens tiles go in z) */
    uint32_t combine_x;      /* matmul_combine's workgroups over the outputs (tokens in y) */
};

/* The output functions of matmul_out.wgsl, by gpu_mm_mode; weight rows per output. */
static const char *const MODE_FN[] = {"set", "add", "bias", "swiglu"};
/* matmul_vec's output function: the mode's, or the Q, K, V epilogue's (with or without a bias) */
static const char *vec_out_fn(const gpu_mm_out *out) {
    if (!out->kv) return MODE_FN[out->mode];
    return out->mode == GPU_MM_BIAS ? "qkv_bias" : "qkv";
}
static uint32_t rows_per_out(gpu_mm_mode mode) { return mode == GPU_MM_SWIGLU ? 2 : 1; }

/* The constants both kernels take for out, w's outputs being outs; bias_at: the kernel's
 * binding for the bias; kv_at: the first of the Q, K, V epilogue's four (0: the
 * kernel does not run it). Returns how many (written to k). */
static int out_consts(const gpu_mm_out *out, uint64_t outs, uint32_t bias_at, uint32_t kv_at, lean_gpu_const *k) {
    const gpu_mm_kv *kv = kv_at ? out->kv : NULL;
    k[0] = (lean_gpu_const){"NW", 'u', rows_per_out(out->mode)};
    k[1] = (lean_gpu_const){"OUTS", 'u', (double)outs};
    k[2] = (lean_gpu_const){"Y_STRIDE", 'u', out->stride ? out->stride : (double)outs};
    k[3] = (lean_gpu_const){"Y_COL", 'u', out->col};
    k[4] = (lean_gpu_const){"BIAS_AT", 'u', bias_at};
    k[5] = (lean_gpu_const){"KV_MODE", 'u', kv != NULL};
    k[6] = (lean_gpu_const){"KV_AT", 'u', kv ? kv_at : bias_at + 1};
    k[7] = (lean_gpu_const){"NEOX", 'u', kv && kv->neox};
    k[8] = (lean_gpu_const){"HEAD_DIM", 'u', kv ? kv->head_dim : 2};
    k[9] = (lean_gpu_const){"Q_DIM", 'u', kv ? kv->q_dim : 0};
    k[10] = (lean_gpu_const){"KV_DIM", 'u', kv ? kv->kv_dim : 0};
    return 11;
}

/* The bindings a matmul may have, in this order (raw, norm: a normed input's; the last four:
 * the Q, K, V epilogue's). */
enum { B_W, B_X, B_Y, B_STEP, B_BIAS, B_RAW, B_NORM, B_KV_STEP, B_KC, B_VC, B_TABLE, B_PART, N_BINDS };

/* Binds the kernel's own (W, x, y[, step]: n_own of all, x replaced by raw when normed), then the
 * bias in BIAS mode, then (normed) the norm weight, then (kv) the epilogue's four. */
static lean_status bind_matmul(lean_gpu *g, lean_gpu_pipeline *p, const lean_gpu_bind *all, int n_own, bool normed,
                               bool kv, const gpu_mm_out *out, const char *label, lean_gpu_bindgroup **bg,
                               lean_error *err) {
    lean_gpu_bind b[N_BINDS];
    memcpy(b, all, sizeof(lean_gpu_bind) * (size_t)n_own);
    if (normed) b[B_X] = all[B_RAW];
    int n = n_own;
    if (out->mode == GPU_MM_BIAS) b[n++] = all[B_BIAS];
    if (normed) b[n++] = all[B_NORM];
    if (kv) memcpy(b + n, all + B_KV_STEP, 4 * sizeof(lean_gpu_bind)), n += 4;
    return lean_gpu_bindgroup_create(g, p, b, n, label, bg, err);
}

/* a kernel variant: as lean_gpu_options forces it (the tests), else the library's dflt */
static bool variant_on(lean_gpu_force f, bool dflt) { return f == LEAN_GPU_AUTO ? dflt : f == LEAN_GPU_ON; }

static bool vec_prefetch(lean_gpu *g, uint32_t type) {
    return variant_on(lean_gpu_options_of(g)->vec_prefetch, type == LEAN_TYPE_Q5_0) && format_of(type)->chunk <= VEC_PREFETCH_CH;
}

/* matmul_vec's outputs per workgroup for w */
static uint32_t vec_rpw(const gpu_weight *w, uint64_t outs, bool normed) {
    if (outs >= VEC_VOCAB_OUTS) return VEC_RPW_VOCAB;
    if (lean_div_up(row_chunks(w), VEC_WG) <= VEC_SHORT_CPL) return VEC_RPW_SHORT;
    return normed ? VEC_RPW_NORMED : VEC_RPW;
}

/* Every workgroup of a normed matmul sums the whole row's squares again, so the fusion pays
 * while the row is short: on the H200 at n_embd 2048 (smollm2-1.7b q4_0) tg128 ran 672
 * tokens/s fused against 645 with the norms as dispatches (docs/runs/2026-12-03-gpu-h200-fusion.md). */
#define NORM_FUSE_MAX_COLS 2048

/* The storage buffers a matmul_vec binds: W, x, y, then the bias, the norm weight and the
 * Q, K, V epilogue's three where used. */
static uint32_t vec_storage_buffers(bool bias, bool normed, bool kv) { return 3u + bias + normed + 3u * kv; }

static bool storage_fits(lean_gpu *g, uint32_t n) { return lean_gpu_get_info(g)->max_storage_buffers_per_stage >= n; }

bool gpu_matmul_can_norm(lean_gpu *g, int32_t cols) {
    return cols > 0 && cols <= NORM_FUSE_MAX_COLS && storage_fits(g, vec_storage_buffers(true, true, false));
}

bool gpu_matmul_kv_fits(lean_gpu *g, bool bias, bool normed) {
    return storage_fits(g, vec_storage_buffers(bias, normed, true));
}

static lean_status matmul_vec_make(lean_gpu *g, const gpu_weight *w, const lean_gpu_bind *binds, const gpu_mm_in *in,
                                   const gpu_mm_out *out, gpu_matmul *m, lean_error *err) {
    const uint64_t outs = (uint64_t)w->rows / rows_per_out(out->mode);
    const bool normed = in->norm != NULL;
    const uint32_t rpw = vec_rpw(w, outs, normed);
    lean_status st = split_groups(g, lean_div_up(outs, rpw), "matmul_vec", &m->vec_x, &m->vec_y, err);
    const uint32_t norm_at = 3 + (out->mode == GPU_MM_BIAS);
    lean_gpu_const k[24] = {{"WG", 'u', VEC_WG}, {"RPW", 'u', rpw}, {"NX", 'u', m->vec_x}};
    int n = 3 + out_consts(out, outs, 3, norm_at + normed, k + 3);
    k[n++] = (lean_gpu_const){"NORM_AT", 'u', norm_at};
    k[n++] = (lean_gpu_const){"NORM_VEC4", 'u', (double)((w->cols + 3) / 4)};
    k[n++] = (lean_gpu_const){"RED_ROWS", 'u', rpw * rows_per_out(out->mode)};
    k[n++] = (lean_gpu_const){"SG", 'u', lean_gpu_subgroup_size(g)};
    k[n++] = (lean_gpu_const){"NORM_LANES", 'u', GPU_OP_WG};
    k[n++] = (lean_gpu_const){"EPS", 'f', in->eps};
    k[n++] = (lean_gpu_const){"PRE", 'u', normed && vec_prefetch(g, w->type)};
    if (st == LEAN_OK)
        st = make_pipeline(g, w, "matmul_vec", "words_u32", normed ? "normed" : "plain", vec_out_fn(out), NULL, k, n, &m->vec,
                           err);
    if (st == LEAN_OK)
        st = bind_matmul(g, m->vec, binds, 3, normed, out->kv != NULL, out, "matmul_vec", &m->vec_bg, err);
    return st;
}

/* Whether a prefill matmul of w takes 8-bit activations and integer dot products
 * (matmul_tiled_i8.wgsl): Q8_0 and Q4_0 matrices where lean_gpu_int8. */
static bool tile_i8(lean_gpu *g, const gpu_weight *w) {
    return lean_gpu_int8(g) && w->n_parts == 0 && (w->type == LEAN_TYPE_Q4_0 || w->type == LEAN_TYPE_Q8_0);
}

/* Whether matmul_tiled issues each group's loads one group ahead (matmul_tiled.wgsl's PF), for a
 * matrix of w in the wide shape or not. H200 pp512 against none: smollm2-1.7b (every matrix
 * wide) q8_0 1.05x (7937 -> 8362 tokens/s) but q4_0 0.97x; in the narrow shape q8_0 0.99x
 * (qwen2.5-0.5b) to 1.01x (smollm2-135m, -360m). So Q8_0 in the wide shape alone
 * (docs/runs/2026-12-04-gpu-h200-prefill.md). The options' tile_prefetch overrides it (the tests
 * run every format both ways). */
static bool tile_prefetch(lean_gpu *g, const gpu_weight *w, bool wide) {
    return variant_on(lean_gpu_options_of(g)->tile_prefetch, wide && w->n_parts == 0 && w->type == LEAN_TYPE_Q8_0);
}

/* Whether matmul_tiled takes the wide shape for a matrix of outs outputs and cols columns: by
 * TILE_WIDE_MIN, or for every matrix or none (the options' tile_wide), which the tests use to
 * run both shapes on every format and mode. */
static bool tile_wide(lean_gpu *g, uint64_t outs, uint64_t cols) {
    return variant_on(lean_gpu_options_of(g)->tile_wide, outs >= TILE_WIDE_MIN && cols >= TILE_WIDE_MIN);
}

/* matmul_tiled's shape for a matrix of rows x cols in mode: invocations gr x gt, output tiles,
 * and its split over the columns (ksplit parts of sps steps; 1 part where it takes no split) */
typedef struct tile_shape {
    uint32_t gr, gt, opt; /* opt: outputs an invocation */
    bool wide;
    uint64_t tiles_o, ksplit, sps;
} tile_shape;

/* The split by TILE_SPLIT_WG, or the options' tile_ksplit parts (at most one a step), which the
 * tests use to split every matrix. */
static uint64_t tile_ksplit(lean_gpu *g, uint64_t tiles_o, uint64_t steps) {
    const uint64_t forced = lean_gpu_options_of(g)->tile_ksplit;
    if (forced > 0) return forced < steps ? forced : steps;
    const uint64_t wgs = tiles_o * (TILE_SPLIT_TOK / TILE_T), most = steps / TILE_SPLIT_MIN_STEPS;
    const uint64_t k = wgs >= TILE_SPLIT_WG ? 1 : lean_div_up(TILE_SPLIT_WG, wgs);
    return k < most ? k : most ? most : 1;
}

/* split: whether the matmul has a part buffer (gpu_mm_out) */
static tile_shape tile_shape_of(lean_gpu *g, int64_t rows, int64_t cols, gpu_mm_mode mode, bool split) {
    const uint64_t outs = (uint64_t)rows / rows_per_out(mode), steps = lean_div_up((uint64_t)cols, TILE_KSTEP);
    tile_shape t = {.gr = TILE_GR, .gt = TILE_GT, .opt = TILE_TR};
    t.wide = tile_wide(g, outs, (uint64_t)cols);
    if (t.wide) t.gr = TILE_WIDE_GR, t.gt = 1, t.opt = mode == GPU_MM_SWIGLU ? TILE_TR : TILE_WIDE_TR;
    t.tiles_o = lean_div_up(outs, (uint64_t)t.gr * t.opt);
    t.sps = lean_div_up(steps, split ? tile_ksplit(g, t.tiles_o, steps) : 1);
    t.ksplit = lean_div_up(steps, t.sps); /* no part left empty */
    return t;
}

uint64_t gpu_matmul_part_floats(lean_gpu *g, int64_t rows, int64_t cols, gpu_mm_mode mode, int32_t max_tok) {
    if (max_tok < 2 || rows < 1 || cols < 1) return 0;
    const tile_shape t = tile_shape_of(g, rows, cols, mode, true);
    return t.ksplit > 1 ? t.ksplit * (uint64_t)max_tok * (uint64_t)rows : 0;
}

/* matmul_combine for a matmul split over its columns: binds part (P), y (and the bias) */
static lean_status matmul_combine_make(lean_gpu *g, const gpu_weight *w, int32_t max_tok, const lean_gpu_bind *binds,
                                       const gpu_mm_out *out, uint64_t ksplit, gpu_matmul *m, lean_error *err) {
    const uint64_t outs = (uint64_t)w->rows / rows_per_out(out->mode);
    if (lean_div_up(outs, COMBINE_WG) > max_groups(g) || lean_div_up((uint64_t)max_tok, COMBINE_CT) > max_groups(g))
        return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "matmul_combine: %llu outputs x %d tokens exceed %u x %u workgroups",
                         (unsigned long long)outs, max_tok, max_groups(g) * COMBINE_WG, max_groups(g) * COMBINE_CT);
    m->combine_x = (uint32_t)lean_div_up(outs, COMBINE_WG);
    char glue[128], label[64];
    snprintf(glue, sizeof glue, "fn y_out(i: u32, o: u32, a: f32, b: f32) { y_%s(i, o, a, b); }\n", MODE_FN[out->mode]);
    snprintf(label, sizeof label, "matmul_combine_%s", MODE_FN[out->mode]);
    const char *src[] = {lean_gpu_shader("matmul_combine"), glue, lean_gpu_shader("matmul_out")};
    if (!src[0] || !src[2]) return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "pipeline '%s': shader missing", label);
    lean_gpu_const k[24] = {{"WG", 'u', COMBINE_WG}, {"CT", 'u', COMBINE_CT}, {"KSPLIT", 'u', (double)ksplit},
                            {"ROWS", 'u', (double)w->rows}};
    const int n = 4 + out_consts(out, outs, 3, 0, k + 4);
    lean_gpu_bind b[N_BINDS]; /* P, y, step (then the bias, by bind_matmul) */
    memcpy(b, binds, sizeof b);
    b[0] = binds[B_PART], b[1] = binds[B_Y], b[2] = binds[B_STEP];
    lean_status st = lean_gpu_pipeline_create(g, label, src, 3, k, n, &m->combine, err);
    if (st == LEAN_OK) st = bind_matmul(g, m->combine, b, 3, false, false, out, label, &m->combine_bg, err);
    return st;
}

static lean_status matmul_tiled_make(lean_gpu *g, const gpu_weight *w, int32_t max_tok, const lean_gpu_bind *binds,
                                     const gpu_mm_out *out, gpu_matmul *m, lean_error *err) {
    /* a tile is GR x t.opt outputs; an invocation's t.opt outputs take TR = t.opt x NW rows */
    const uint64_t outs = (uint64_t)w->rows / rows_per_out(out->mode);
    const tile_shape t = tile_shape_of(g, w->rows, w->cols, out->mode, out->part != NULL);
    const bool split = t.ksplit > 1;
    lean_status st = split_groups(g, t.tiles_o * t.ksplit, "matmul_tiled", &m->tile_x, &m->tile_y, err);
    lean_gpu_const k[24] = {{"GR", 'u', t.gr},          {"GT", 'u', t.gt},   {"TR", 'u', (double)(t.opt * rows_per_out(out->mode))},
                            {"TT", 'u', TILE_T / t.gt}, {"KSTEP", 'u', TILE_KSTEP}, {"NX", 'u', m->tile_x},
                            {"TILES_O", 'u', (double)t.tiles_o}, {"KSPLIT", 'u', (double)t.ksplit},
                            {"SPS", 'u', (double)t.sps}, {"PF", 'u', tile_prefetch(g, w, t.wide)}};
    const int n = 10 + out_consts(out, outs, 4, 0, k + 10);
    /* split: y is the part buffer, written by tile_part; the mode is the combine's */
    lean_gpu_bind b[N_BINDS];
    memcpy(b, binds, sizeof b);
    if (split) b[B_Y] = binds[B_PART];
    const gpu_mm_out part_out = {.mode = GPU_MM_SET};
    const gpu_mm_out *tile_out = split ? &part_out : out;
    const bool i8 = tile_i8(g, w); /* its own arithmetic; else tiled_f32's or tiled_f16's */
    const char *arith = i8 ? NULL : lean_gpu_f16(g) ? "tiled_f16" : "tiled_f32";
    if (st == LEAN_OK)
        st = make_pipeline(g, w, i8 ? "matmul_tiled_i8" : "matmul_tiled", "words_vec4", NULL, MODE_FN[tile_out->mode], arith,
                           k, n, &m->tiled, err);
    if (st == LEAN_OK) st = bind_matmul(g, m->tiled, b, 4, false, false, tile_out, "matmul_tiled", &m->tiled_bg, err);
    if (st == LEAN_OK && split) st = matmul_combine_make(g, w, max_tok, binds, out, t.ksplit, m, err);
    return st;
}

/* The bytes of x that max_tok tokens' inputs span, a whole number of vec4s (matmul_vec reads
 * x as vec4s; every buffer is a whole number of them, lean_gpu_buf_create). */
static uint64_t x_bytes(const gpu_weight *w, int32_t max_tok) {
    return ((uint64_t)max_tok * (uint64_t)w->cols * 4 + 15) & ~(uint64_t)15;
}

/* in against w and max_tok: x (and a normed input's raw row and norm weight) large enough */
static lean_status check_in(lean_gpu *g, const gpu_weight *w, int32_t max_tok, const gpu_mm_in *in, lean_error *err) {
    const uint64_t norm_bytes = x_bytes(w, 1); /* one row, padded to a vec4 */
    if (in->offset % 16) /* matmul_vec reads x as vec4s */
        return LEAN_FAIL(err, LEAN_ERR_ARG, "matmul x: offset %llu is not a multiple of 16",
                         (unsigned long long)in->offset);
    lean_status st = check_binding(g, in->x, in->offset, x_bytes(w, max_tok), "matmul x", err);
    if (st == LEAN_OK && in->norm) st = check_binding(g, in->raw, 0, x_bytes(w, 1), "matmul raw x", err);
    if (st == LEAN_OK && in->norm && lean_gpu_buf_size(in->norm) < norm_bytes)
        st = LEAN_FAIL(err, LEAN_ERR_ARG, "matmul: the norm weight has %llu bytes, %llu wanted",
                       (unsigned long long)lean_gpu_buf_size(in->norm), (unsigned long long)norm_bytes);
    return st;
}

/* The floats of y that max_tok tokens' outputs span, from out->offset. */
static uint64_t y_floats(const gpu_weight *w, int32_t max_tok, const gpu_mm_out *out) {
    const uint64_t outs = (uint64_t)w->rows / rows_per_out(out->mode), stride = out->stride ? out->stride : outs;
    return (uint64_t)(max_tok - 1) * stride + out->col + outs;
}

/* the Q, K, V epilogue (gpu_mm_kv) against out: whole heads of the q | k | v row, a mode it
 * takes, its buffers there */
static lean_status check_kv(const gpu_mm_out *out, uint64_t outs, lean_error *err) {
    const gpu_mm_kv *kv = out->kv;
    const int64_t hd = kv->head_dim, row = (int64_t)kv->q_dim + 2 * (int64_t)kv->kv_dim;
    if (hd < 2 || hd % 2 || kv->q_dim % hd || kv->kv_dim % hd || out->col % hd || outs % (uint64_t)hd ||
        out->stride != row || (out->mode != GPU_MM_SET && out->mode != GPU_MM_BIAS))
        return LEAN_FAIL(err, LEAN_ERR_ARG, "matmul q|k|v epilogue: %llu outputs at column %u of rows of %u, head_dim "
                         "%d, q_dim %d, kv_dim %d, mode %d", (unsigned long long)outs, out->col, out->stride,
                         kv->head_dim, kv->q_dim, kv->kv_dim, (int)out->mode);
    if (!kv->step || !kv->kc || !kv->vc || !kv->table)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "matmul q|k|v epilogue: a buffer missing");
    return LEAN_OK;
}

/* out against w and max_tok: a mode w can serve, y (and the bias) large enough */
static lean_status check_out(lean_gpu *g, const gpu_weight *w, int32_t max_tok, const gpu_mm_out *out,
                             lean_error *err) {
    if ((unsigned)out->mode > GPU_MM_SWIGLU || (out->mode == GPU_MM_SWIGLU && w->rows % 2) ||
        (out->mode == GPU_MM_BIAS && !out->bias))
        return LEAN_FAIL(err, LEAN_ERR_ARG, "matmul: mode %d over %lld rows%s", (int)out->mode, (long long)w->rows,
                         out->mode == GPU_MM_BIAS ? " without a bias" : "");
    const uint64_t outs = (uint64_t)w->rows / rows_per_out(out->mode);
    if (out->stride ? out->col + outs > out->stride : out->col > 0)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "matmul: %llu outputs at column %u of rows of %u", (unsigned long long)outs,
                         out->col, out->stride);
    lean_status st = check_binding(g, out->y, out->offset, y_floats(w, max_tok, out) * 4, "matmul y", err);
    if (st == LEAN_OK && out->mode == GPU_MM_BIAS)
        st = check_binding(g, out->bias, 0, (out->col + outs) * 4, "matmul bias", err);
    if (st == LEAN_OK && out->kv) st = check_kv(out, outs, err);
    const uint64_t part = gpu_matmul_part_floats(g, w->rows, w->cols, out->mode, max_tok);
    if (st == LEAN_OK && out->part && part) st = check_binding(g, out->part, 0, part * 4, "matmul part", err);
    return st;
}

lean_status gpu_matmul_create(lean_gpu *g, const gpu_weight *w, int32_t max_tok, lean_gpu_buf *step,
                              const gpu_mm_in *in, const gpu_mm_out *out, gpu_matmul **res, lean_error *err) {
    if (max_tok < 1 || (uint64_t)max_tok > 65535ull * TILE_T)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "matmul: max_tok %d is not in 1 .. %d", max_tok, 65535 * TILE_T);
    lean_status st = check_in(g, w, max_tok, in, err);
    if (st == LEAN_OK) st = check_out(g, w, max_tok, out, err);
    const uint32_t n_storage = vec_storage_buffers(out->mode == GPU_MM_BIAS, in->norm != NULL, out->kv != NULL);
    if (st == LEAN_OK && !storage_fits(g, n_storage))
        st = LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "matmul: %u storage buffers (bias %d, normed %d, q|k|v epilogue %d), "
                       "the device binds %u", n_storage, out->mode == GPU_MM_BIAS, in->norm != NULL, out->kv != NULL,
                       lean_gpu_get_info(g)->max_storage_buffers_per_stage);
    if (st == LEAN_OK && max_tok > 1 && !step) st = LEAN_FAIL(err, LEAN_ERR_ARG, "matmul: no step uniform");
    if (st != LEAN_OK) return st;
    gpu_matmul *m = lean_calloc(1, sizeof *m);
    if (!m) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "no memory for a matmul");
    lean_gpu_bind binds[N_BINDS] = {
        [B_W] = {w->buf, 0, 0},      [B_X] = {in->x, in->offset, x_bytes(w, max_tok)},
        [B_Y] = {out->y, out->offset, y_floats(w, max_tok, out) * 4},
        [B_STEP] = {step, 0, 16},    [B_BIAS] = {out->bias, 0, 0},
        [B_RAW] = {in->raw, 0, x_bytes(w, 1)}, [B_NORM] = {in->norm, 0, 0},
        [B_PART] = {out->part, 0, gpu_matmul_part_floats(g, w->rows, w->cols, out->mode, max_tok) * 4}};
    const gpu_mm_kv *kv = out->kv;
    if (kv) {
        binds[B_KV_STEP] = (lean_gpu_bind){kv->step, 0, 16};
        binds[B_KC] = (lean_gpu_bind){kv->kc, 0, 0};
        binds[B_VC] = (lean_gpu_bind){kv->vc, 0, 0};
        binds[B_TABLE] = (lean_gpu_bind){kv->table, 0, 0};
    }
    st = matmul_vec_make(g, w, binds, in, out, m, err);
    if (st == LEAN_OK && max_tok > 1) st = matmul_tiled_make(g, w, max_tok, binds, out, m, err);
    if (st != LEAN_OK) {
        gpu_matmul_free(m);
        return st;
    }
    *res = m;
    return LEAN_OK;
}

void gpu_matmul_record(lean_gpu_cmd *c, const gpu_matmul *m, int32_t n_tok) {
    if (n_tok == 1) lean_gpu_dispatch(c, m->vec, m->vec_bg, m->vec_x, m->vec_y, 1);
    else lean_gpu_dispatch(c, m->tiled, m->tiled_bg, m->tile_x, m->tile_y, (uint32_t)(n_tok + TILE_T - 1) / TILE_T);
    if (n_tok > 1 && m->combine)
        lean_gpu_dispatch(c, m->combine, m->combine_bg, m->combine_x, (uint32_t)(n_tok + COMBINE_CT - 1) / COMBINE_CT, 1);
}

void gpu_matmul_free(gpu_matmul *m) {
    if (!m) return;
    lean_gpu_bindgroup_free(m->vec_bg);
    lean_gpu_bindgroup_free(m->tiled_bg);
    lean_gpu_bindgroup_free(m->combine_bg);
    lean_free(m);
}

/* ---- 5. get_rows ---- */

struct gpu_get_rows {
    lean_gpu_pipeline *p;
    lean_gpu_bindgroup *bg;
    uint32_t groups_x; /* workgroups per row; y = the token */
};

lean_status gpu_get_rows_create(lean_gpu *g, const gpu_weight *w, int32_t max_tok, lean_gpu_buf *step,
                                lean_gpu_buf *ids, lean_gpu_buf *out, gpu_get_rows **res, lean_error *err) {
    const uint32_t max_dim = max_groups(g);
    if (w->n_parts)
        return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "get_rows: a stack of %d formats (its rows are in col_nib order)",
                         w->n_parts);
    if (max_tok < 1 || (uint32_t)max_tok > max_dim)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "get_rows: max_tok %d is not in 1 .. %u", max_tok, max_dim);
    const uint64_t out_bytes = (uint64_t)max_tok * (uint64_t)w->cols * 4;
    lean_status st = check_binding(g, ids, 0, (uint64_t)max_tok * 4, "get_rows ids", err);
    if (st == LEAN_OK) st = check_binding(g, out, 0, out_bytes, "get_rows out", err);
    if (st == LEAN_OK && !step) st = LEAN_FAIL(err, LEAN_ERR_ARG, "get_rows: no step uniform");
    if (st != LEAN_OK) return st;
    gpu_get_rows *gr = lean_calloc(1, sizeof *gr);
    if (!gr) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "no memory for a get_rows");
    gr->groups_x = (uint32_t)((row_chunks(w) + ROWS_WG - 1) / ROWS_WG); /* <= 65535 for cols < 16 M */
    const lean_gpu_const k[] = {{"WG", 'u', ROWS_WG}};
    const lean_gpu_bind binds[4] = {{w->buf, 0, 0}, {ids, 0, (uint64_t)max_tok * 4}, {out, 0, out_bytes}, {step, 0, 16}};
    st = make_pipeline(g, w, "get_rows", "words_u32", NULL, NULL, NULL, k, 1, &gr->p, err);
    if (st == LEAN_OK) st = lean_gpu_bindgroup_create(g, gr->p, binds, 4, "get_rows", &gr->bg, err);
    if (st != LEAN_OK) {
        gpu_get_rows_free(gr);
        return st;
    }
    *res = gr;
    return LEAN_OK;
}

void gpu_get_rows_record(lean_gpu_cmd *c, const gpu_get_rows *gr, int32_t n_tok) {
    lean_gpu_dispatch(c, gr->p, gr->bg, gr->groups_x, (uint32_t)n_tok, 1);
}

void gpu_get_rows_free(gpu_get_rows *gr) {
    if (!gr) return;
    lean_gpu_bindgroup_free(gr->bg);
    lean_free(gr);
}
