/* weight_upload.c — weight matrices on the GPU in their own block formats (weights.h is the
 * contract): each format's layout on the GPU, the load-time repacking into it, and the upload.
 * The kernels that read these layouts: shaders/formats.wgsl (one dequantizer per format),
 * compiled by weight_kernel.c into matmul.c's and get_rows.c's pipelines.
 *
 * Sections: 1. layouts and the format table  2. upload  3. stacks (one format, or mixed)
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
#include "gpu/weight_kernel.h"

#include "core/formats.h"

#include <string.h>

/* the GPU side of every format (weight_kernel.h's gpu_format) */
static const gpu_format FORMATS[] = {
    {LEAN_TYPE_F32, 4, -1},  {LEAN_TYPE_F16, 4, -1},  {LEAN_TYPE_BF16, 4, -1}, {LEAN_TYPE_Q8_0, 8, 0},
    {LEAN_TYPE_Q4_0, 8, 0},  {LEAN_TYPE_Q4_1, 8, -1}, {LEAN_TYPE_Q5_0, 8, 0},  {LEAN_TYPE_Q5_1, 8, -1},
    {LEAN_TYPE_Q4_K, 16, -1}, {LEAN_TYPE_Q5_K, 16, -1}, {LEAN_TYPE_Q6_K, 16, 208},
};

const gpu_format *gpu_format_of(uint32_t type) {
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
    const gpu_format *f = gpu_format_of(t->type);
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

/* ---- 3. stacks ---- */

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
    if (gpu_format_of(type)->d_offset < 0) { /* Q4_1, Q5_1: the block as it is */
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
