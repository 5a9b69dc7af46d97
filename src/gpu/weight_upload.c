/* weight_upload.c — weight matrices on the GPU in their own block formats (weights.h is the
 * contract): each format's layout on the GPU, the load-time repacking into it, and the upload.
 * The kernels that read these layouts: shaders/formats.wgsl (one dequantizer per format),
 * compiled by weight_kernel.c into matmul.c's and get_rows.c's pipelines.
 *
 * Sections: 1. layouts and the format table  2. upload in pieces (gpu_weight_fill)  3. stacks
 * (one format, or mixed), and the fill's begin, put, end
 *
 * ---- 1. Layouts on the GPU ----
 * WGSL storage is read in u32 words, so every block must start on a word. Formats whose
 * blocks are whole words are uploaded as the file has them; the others lose their f16 scale d,
 * which moves to an array after all the blocks. nb = rows * cols / block_elems blocks, in row
 * order (block b of the matrix is block b % bpr of row b / bpr).
 *
 *   F32, F16, BF16       as the file: element e = row * cols + col at byte 4e (F32) or 2e;
 *                        the last word zero-padded
 *   Q4_1 (20 bytes), Q5_1 (24), Q4_K (144), Q5_K (176), Q2_K (84)
 *                        as the file: block b at word b * block_bytes / 4; its f16 d (and m
 *                        or dmin) are the low (and high) half of the block's first word
 *                        (Q2_K's: of its last word)
 *   Q8_0 (34), Q4_0 (18), Q5_0 (22), Q6_K (210), Q3_K (110)  the scale cut out:
 *     OFFSET (bytes)   SIZE          DESCRIPTION
 *     b * qb           qb            block b without its 2 bytes of d (qb = block_bytes - 2:
 *                                    32, 16, 20, 208, 108; the other bytes keep their order)
 *     nb * qb + 2 b    2             d of block b, f16 (the array padded to a whole word)
 *   The words of one block, as formats.wgsl reads them (SCALE_BASE = nb * qb / 4 words):
 *     Q8_0  0..7 qs                      Q4_1  0 d | m << 16, 1..4 qs
 *     Q4_0  0..3 qs                      Q5_1  0 d | m << 16, 1 qh, 2..5 qs
 *     Q5_0  0 qh, 1..4 qs                Q4_K  0 d | dmin << 16, 1..3 scales, 4..35 qs
 *     Q6_K  0..31 ql, 32..47 qh,         Q5_K  0 d | dmin << 16, 1..3 scales, 4..11 qh,
 *           48..51 scales (int8)               12..43 qs
 *     Q3_K  0..7 hmask, 8..23 qs,        Q2_K  0..3 scales, 4..19 qs, 20 d | dmin << 16
 *           24..26 scales
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
    {LEAN_TYPE_Q4_K, 16, -1}, {LEAN_TYPE_Q5_K, 16, -1}, {LEAN_TYPE_Q6_K, 16, 208}, {LEAN_TYPE_Q2_K, 16, -1},
    {LEAN_TYPE_Q3_K, 16, 108},
};

const gpu_format *gpu_format_of(uint32_t type) {
    for (size_t i = 0; i < sizeof FORMATS / sizeof FORMATS[0]; i++)
        if (FORMATS[i].type == type) return &FORMATS[i];
    return NULL;
}


/* ---- 2. upload ----
 * A weight is filled piece by piece (gpu_weight_fill): its buffer is made first, then each of
 * its tensors' blocks are repacked and written where section 1 puts them, as they come (all at
 * once from a mapped file, or chunk by chunk from a stream: forward.c), in any order of the
 * tensors. Two tensors of a stack may share a word (an F16 tensor of odd size, an odd number of
 * split scales): such a word's bytes wait in the fill until the other tensor's come. */

/* Blocks repacked per write: small enough that a piece of quants stays under the runtime's
 * 8 MiB of pending writes. */
#define REPACK_BLOCKS 32768
#define REPACK_QUANT_BYTES 208 /* the most a block keeps: Q6_K's quants (a mixed block: 32) */
#define FILL_MAX_TENSORS 4
#define FILL_MAX_WORDS 16      /* shared words waiting: two a tensor and region at most, in order */

struct gpu_repack {
    uint8_t *quants, *scales; /* REPACK_BLOCKS blocks' quants and f16 scales; made on first use */
};

lean_status gpu_repack_new(gpu_repack **out, lean_error *err) {
    *out = lean_calloc(1, sizeof **out);
    return *out ? LEAN_OK : LEAN_FAIL(err, LEAN_ERR_NOMEM, "allocating the repack scratch");
}

void gpu_repack_free(gpu_repack *r) {
    if (!r) return;
    lean_free(r->quants);
    lean_free(r->scales);
    lean_free(r);
}

static lean_status repack_ready(gpu_repack *r, lean_error *err) {
    if (!r->quants) r->quants = lean_malloc((size_t)REPACK_BLOCKS * REPACK_QUANT_BYTES);
    if (!r->scales) r->scales = lean_malloc(REPACK_BLOCKS * 2);
    return r->quants && r->scales ? LEAN_OK
                                  : LEAN_FAIL(err, LEAN_ERR_NOMEM, "no memory to repack %u blocks for the GPU",
                                              REPACK_BLOCKS);
}

typedef enum fill_mode {
    FILL_PLAIN, /* the tensors' bytes one after another (formats uploaded as the file has them) */
    FILL_SPLIT, /* one split format: the blocks' quants, then every scale */
    FILL_MIXED, /* a mixed stack (section 1) */
} fill_mode;

/* A word two tensors share: the bytes come so far (mask) */
typedef struct fill_word {
    uint64_t word;
    uint8_t bytes[4];
    unsigned mask;
} fill_word;

struct gpu_weight_fill {
    lean_gpu *g;
    gpu_repack *r;
    gpu_weight w;
    fill_mode mode;
    int n;
    struct fill_tensor {
        const char *name;
        uint32_t type, block_bytes;
        uint64_t n_bytes, got; /* got: bytes put so far */
        uint64_t at; /* PLAIN: its first byte; SPLIT: its first block; MIXED: its first virtual block */
    } t[FILL_MAX_TENSORS];
    uint64_t nb; /* SPLIT: blocks in all (the scales start at byte nb * qb) */
    int n_words;
    fill_word words[FILL_MAX_WORDS];
};

/* Bytes [off, off + n) of one word of the buffer; the word is written once all 4 have come. */
static lean_status fill_word_put(gpu_weight_fill *f, uint64_t off, const uint8_t *src, uint32_t n, lean_error *err) {
    int i = 0;
    while (i < f->n_words && f->words[i].word != off / 4) i++;
    if (i == f->n_words) {
        if (i == FILL_MAX_WORDS)
            return LEAN_FAIL(err, LEAN_ERR_ARG, "%s: more than %d shared words in waiting (pieces out of order)",
                             f->t[0].name, FILL_MAX_WORDS);
        f->words[f->n_words++] = (fill_word){.word = off / 4};
    }
    fill_word *w = &f->words[i];
    for (uint32_t j = 0; j < n; j++) {
        w->bytes[off % 4 + j] = src[j];
        w->mask |= 1u << (off % 4 + j);
    }
    if (w->mask != 0xf) return LEAN_OK;
    lean_status st = lean_gpu_buf_write(f->g, f->w.buf, w->word * 4, w->bytes, 4, err);
    *w = f->words[--f->n_words];
    return st;
}

/* Writes n bytes at byte off of the buffer: whole words at once, a shared first or last word
 * through fill_word_put. */
static lean_status fill_bytes(gpu_weight_fill *f, uint64_t off, const uint8_t *src, uint64_t n, lean_error *err) {
    lean_status st = LEAN_OK;
    if (off % 4 && n) {
        const uint32_t head = 4 - off % 4 < n ? 4 - (uint32_t)(off % 4) : (uint32_t)n;
        st = fill_word_put(f, off, src, head, err);
        off += head, src += head, n -= head;
    }
    const uint64_t whole = n & ~(uint64_t)3;
    if (!st && whole) st = lean_gpu_buf_write(f->g, f->w.buf, off, src, whole, err);
    if (!st && n > whole) st = fill_word_put(f, off + whole, src + whole, (uint32_t)(n - whole), err);
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
    const uint64_t limit = gpu_binding_max_bytes(g);
    if (t->n_bytes > limit)
        return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED,
                         "tensor '%s' (%s, %lld x %lld) takes %llu bytes on the GPU, more than this device's "
                         "storage binding limit of %llu bytes",
                         t->name, tr->name, (long long)rows, (long long)cols, (unsigned long long)t->n_bytes,
                         (unsigned long long)limit);
    return LEAN_OK;
}

/* A fill of ts[0..n) into a new buffer of bytes; its tensors' places are the caller's to set. */
static lean_status fill_new(lean_gpu *g, gpu_repack *r, const lean_tensor *const *ts, int n, const char *name,
                            uint64_t bytes, unsigned usage, fill_mode mode, gpu_weight_fill **out, lean_error *err) {
    *out = NULL;
    if (n < 1 || n > FILL_MAX_TENSORS)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "%s: %d tensors in one buffer (1 to %d)", name, n, FILL_MAX_TENSORS);
    gpu_weight_fill *f = lean_calloc(1, sizeof *f);
    if (!f) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "%s: allocating its upload", name);
    *f = (gpu_weight_fill){.g = g, .r = r, .mode = mode, .n = n};
    for (int i = 0; i < n; i++) {
        const lean_type_traits *tr = lean_type_traits_get(ts[i]->type);
        f->t[i] = (struct fill_tensor){.name = ts[i]->name, .type = ts[i]->type, .n_bytes = ts[i]->n_bytes,
                                       .block_bytes = tr ? tr->block_bytes : 1};
    }
    lean_status st = lean_gpu_buf_create(g, bytes, usage, name, &f->w.buf, err);
    if (st != LEAN_OK) {
        lean_free(f);
        return st;
    }
    *out = f;
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

/* A mixed stack's fill (gpu_weight_stackable, more than one type): the layout of section 1,
 * each tensor's first virtual block. */
static lean_status begin_mixed(lean_gpu *g, gpu_repack *r, const lean_tensor *const *ts, int n, const char *name,
                               gpu_weight_fill **out, lean_error *err) {
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
    lean_status st = fill_new(g, r, ts, n, name, bytes, LEAN_GPU_STORAGE, FILL_MIXED, out, err);
    if (st != LEAN_OK) return st;
    w.buf = (*out)->w.buf;
    (*out)->w = w;
    int64_t row = 0; /* tensor i's first row */
    for (int i = 0, p = 0; i < n; row += ts[i]->ne[1] * ts[i]->ne[2] * ts[i]->ne[3], i++) {
        while (w.part[p].end <= row) p++; /* the part holding the tensor's first row */
        (*out)->t[i].at = (uint64_t)(row + w.part[p].gap) * bpr;
    }
    return LEAN_OK;
}

lean_status gpu_weight_fill_begin(lean_gpu *g, gpu_repack *r, const lean_tensor *const *ts, int n, const char *name,
                                  gpu_weight_fill **out, lean_error *err) {
    *out = NULL;
    if (n < 1 || n > FILL_MAX_TENSORS)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "%s: %d tensors in one buffer (1 to %d)", name, n, FILL_MAX_TENSORS);
    lean_tensor t = {.name = name, .type = ts[0]->type, .ne = {ts[0]->ne[0], 0, 1, 1}}; /* the stack as one */
    bool mixed = false;
    for (int i = 0; i < n; i++) {
        const lean_type_traits *tr = lean_type_traits_get(ts[i]->type);
        if (!gpu_format_of(ts[i]->type) || !tr)
            return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "tensor '%s': type %u%s%s has no GPU kernels", ts[i]->name,
                             ts[i]->type, tr ? " = " : "", tr ? tr->name : "");
        if (!gpu_weight_stackable(ts, i + 1))
            return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "%s: '%s' (type %u, %lld columns) does not stack on '%s'",
                             name, ts[i]->name, ts[i]->type, (long long)ts[i]->ne[0], ts[0]->name);
        lean_status st = check_tensor(g, ts[i], tr, err);
        if (st != LEAN_OK) return st;
        mixed = mixed || ts[i]->type != t.type;
        t.ne[1] += ts[i]->ne[1] * ts[i]->ne[2] * ts[i]->ne[3];
        t.n_bytes += ts[i]->n_bytes;
    }
    if (mixed) return begin_mixed(g, r, ts, n, name, out, err);
    const gpu_format *f = gpu_format_of(t.type);
    const lean_type_traits *tr = lean_type_traits_get(t.type);
    lean_status st = n > 1 ? check_tensor(g, &t, tr, err) : LEAN_OK;
    const uint64_t bytes = (t.n_bytes + 3) & ~(uint64_t)3; /* either layout: the file's bytes, reordered */
    if (st == LEAN_OK)
        st = fill_new(g, r, ts, n, name, bytes, LEAN_GPU_STORAGE, f->d_offset < 0 ? FILL_PLAIN : FILL_SPLIT, out, err);
    if (st != LEAN_OK) return st;
    gpu_weight_fill *fl = *out;
    fl->nb = t.n_bytes / tr->block_bytes;
    fl->w = (gpu_weight){.type = t.type, .rows = t.ne[1], .cols = t.ne[0], .buf = fl->w.buf,
                         .scale_base = f->d_offset < 0 ? 0 : fl->nb * (tr->block_bytes - 2) / 4};
    for (int i = 1; i < n; i++)
        fl->t[i].at = fl->t[i - 1].at + (fl->mode == FILL_PLAIN ? ts[i - 1]->n_bytes : ts[i - 1]->n_bytes / tr->block_bytes);
    return LEAN_OK;
}

lean_status gpu_weight_fill_begin_bytes(lean_gpu *g, const lean_tensor *const *ts, int n, const char *name,
                                        unsigned usage, gpu_weight_fill **out, lean_error *err) {
    uint64_t bytes = 0;
    for (int i = 0; i < n && i < FILL_MAX_TENSORS; i++) bytes += ts[i]->n_bytes;
    lean_status st = fill_new(g, NULL, ts, n, name, bytes, usage, FILL_PLAIN, out, err);
    for (int i = 1; st == LEAN_OK && i < n; i++) (*out)->t[i].at = (*out)->t[i - 1].at + ts[i - 1]->n_bytes;
    return st;
}

/* SPLIT: blocks [b0, b0 + nb) of tensor T from src, REPACK_BLOCKS at a time (section 1). */
static lean_status put_split(gpu_weight_fill *f, const struct fill_tensor *T, uint64_t b0, const uint8_t *src,
                             uint64_t nb, lean_error *err) {
    const uint32_t bb = T->block_bytes, qb = bb - 2, d_offset = (uint32_t)gpu_format_of(T->type)->d_offset;
    lean_status st = repack_ready(f->r, err);
    for (uint64_t done = 0; done < nb && st == LEAN_OK;) {
        const uint64_t n = nb - done < REPACK_BLOCKS ? nb - done : REPACK_BLOCKS;
        for (uint64_t i = 0; i < n; i++) {
            const uint8_t *blk = src + (done + i) * bb;
            memcpy(f->r->quants + i * qb, blk, d_offset);
            memcpy(f->r->quants + i * qb + d_offset, blk + d_offset + 2, qb - d_offset);
            memcpy(f->r->scales + 2 * i, blk + d_offset, 2);
        }
        const uint64_t b = T->at + b0 + done; /* over the whole stack */
        st = fill_bytes(f, b * qb, f->r->quants, n * qb, err);
        if (st == LEAN_OK) st = fill_bytes(f, f->nb * qb + 2 * b, f->r->scales, 2 * n, err);
        done += n;
    }
    return st;
}

/* MIXED: blocks [b0, b0 + nb) of tensor T from src, REPACK_BLOCKS at a time (section 1). */
static lean_status put_mixed(gpu_weight_fill *f, const struct fill_tensor *T, uint64_t b0, const uint8_t *src,
                             uint64_t nb, lean_error *err) {
    const uint64_t k = mixed_words(T->type);
    const bool split = gpu_format_of(T->type)->d_offset >= 0;
    lean_status st = repack_ready(f->r, err);
    for (uint64_t done = 0; done < nb && st == LEAN_OK;) {
        const uint64_t n = nb - done < REPACK_BLOCKS ? nb - done : REPACK_BLOCKS;
        for (uint64_t i = 0; i < n; i++)
            mixed_block(T->type, src + (done + i) * T->block_bytes, f->r->quants + 4 * k * i, f->r->scales + 2 * i);
        const uint64_t b = T->at + b0 + done; /* its virtual block */
        st = fill_bytes(f, 4 * k * b, f->r->quants, 4 * k * n, err);
        if (st == LEAN_OK && split) st = fill_bytes(f, 4 * f->w.scale_base + 2 * b, f->r->scales, 2 * n, err);
        done += n;
    }
    return st;
}

lean_status gpu_weight_fill_put(gpu_weight_fill *f, int i, uint64_t at, const void *bytes, uint64_t n,
                                lean_error *err) {
    if (i < 0 || i >= f->n) return LEAN_FAIL(err, LEAN_ERR_ARG, "%s: no tensor %d in it", f->t[0].name, i);
    struct fill_tensor *T = &f->t[i];
    if (at % T->block_bytes || n % T->block_bytes || at > T->n_bytes || n > T->n_bytes - at || (n && !bytes))
        return LEAN_FAIL(err, LEAN_ERR_ARG, "tensor '%s': %llu bytes at %llu are not whole blocks of its %llu",
                         T->name, (unsigned long long)n, (unsigned long long)at, (unsigned long long)T->n_bytes);
    lean_status st;
    switch (f->mode) {
    case FILL_PLAIN: st = fill_bytes(f, T->at + at, bytes, n, err); break;
    case FILL_SPLIT: st = put_split(f, T, at / T->block_bytes, bytes, n / T->block_bytes, err); break;
    default: st = put_mixed(f, T, at / T->block_bytes, bytes, n / T->block_bytes, err); break;
    }
    if (st == LEAN_OK) T->got += n;
    return st;
}

lean_status gpu_weight_fill_end(gpu_weight_fill *f, gpu_weight *out, lean_error *err) {
    lean_status st = LEAN_OK;
    for (int i = 0; st == LEAN_OK && i < f->n; i++)
        if (f->t[i].got != f->t[i].n_bytes)
            st = LEAN_FAIL(err, LEAN_ERR_ARG, "tensor '%s': %llu of its %llu bytes were uploaded", f->t[i].name,
                           (unsigned long long)f->t[i].got, (unsigned long long)f->t[i].n_bytes);
    for (int i = 0; st == LEAN_OK && i < f->n_words; i++) /* the last words, zero-padded */
        st = lean_gpu_buf_write(f->g, f->w.buf, f->words[i].word * 4, f->words[i].bytes, 4, err);
    if (st == LEAN_OK) {
        *out = f->w;
        f->w.buf = NULL;
    }
    gpu_weight_fill_cancel(f);
    return st;
}

void gpu_weight_fill_cancel(gpu_weight_fill *f) {
    if (!f) return;
    lean_gpu_buf_free(f->w.buf);
    lean_free(f);
}

lean_status gpu_weight_upload_stacked(lean_gpu *g, const lean_tensor *const *ts, int n, const char *name,
                                      gpu_weight *out, lean_error *err) {
    gpu_repack *r = NULL;
    gpu_weight_fill *f = NULL;
    lean_status st = gpu_repack_new(&r, err);
    if (st == LEAN_OK) st = gpu_weight_fill_begin(g, r, ts, n, name, &f, err);
    for (int i = 0; st == LEAN_OK && i < n; i++)
        st = ts[i]->data ? gpu_weight_fill_put(f, i, 0, ts[i]->data, ts[i]->n_bytes, err)
                         : LEAN_FAIL(err, LEAN_ERR_ARG, "tensor '%s': its data is not loaded", ts[i]->name);
    if (st == LEAN_OK) st = gpu_weight_fill_end(f, out, err);
    else gpu_weight_fill_cancel(f);
    gpu_repack_free(r);
    return st;
}

lean_status gpu_weight_upload(lean_gpu *g, const lean_tensor *t, gpu_weight *out, lean_error *err) {
    return gpu_weight_upload_stacked(g, &t, 1, t->name, out, err);
}

void gpu_weight_free(gpu_weight *w) {
    if (!w) return;
    lean_gpu_buf_free(w->buf);
    w->buf = NULL;
}
