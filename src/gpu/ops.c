/* ops.c — makes and records the forward pass's non-matmul kernels (ops.h has the contract of
 * each; the WGSL is in shaders/, one family per file, named as the op).
 *
 * What it does: for each op, the constants its shader is compiled with, its source list
 * (step.wgsl's struct, reduce.wgsl's workgroup sums where used, then the kernel), its bindings
 * in @binding order, and its workgroup counts.
 * What it does not: decide which ops a model runs (forward.c) or own any buffer.
 *
 * Sections: common · norms and element-wise ops · position · attention
 */
#include "gpu/ops.h"

#include "core/rope.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- common ---- */

#define WG GPU_OP_WG

/* Which shared sources precede a kernel, in this order: the step or the batch's rows, the
 * reductions, the part a kernel shares with its batched twin (qkv_post_head, attention_walk,
 * attn_merge). */
enum { USE_STEP = 1, USE_REDUCE = 2, USE_ROWS = 4, USE_QKV_HEAD = 8, USE_WALK = 16, USE_MERGE = 32 };

/* Compiles kernel `name` (with the shared sources `uses` names, consts and WG = wg invocations)
 * and binds bufs as @binding(0..n_bufs), whole. */
static lean_status make_op_wg(lean_gpu *g, const char *name, unsigned uses, const lean_gpu_const *consts,
                              int n_consts, lean_gpu_buf *const *bufs, int n_bufs, uint32_t wg, uint32_t wg_x,
                              bool per_tok, gpu_op *op, lean_error *err) {
    *op = (gpu_op){.wg_x = wg_x, .per_tok = per_tok};
    const char *src[6];
    int n_src = 0;
    if (uses & USE_STEP) src[n_src++] = lean_gpu_shader("step");
    if (uses & USE_ROWS) src[n_src++] = lean_gpu_shader("batch_rows");
    if (uses & USE_REDUCE) src[n_src++] = lean_gpu_reduce_shader(g);
    if (uses & USE_QKV_HEAD) src[n_src++] = lean_gpu_shader("qkv_post_head");
    if (uses & USE_WALK) src[n_src++] = lean_gpu_shader("attention_walk");
    if (uses & USE_MERGE) src[n_src++] = lean_gpu_shader("attn_merge");
    src[n_src++] = lean_gpu_shader(name);
    for (int i = 0; i < n_src; i++)
        if (!src[i]) return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "shader '%s' is not in this build", name);
    lean_gpu_const all[16];
    if (n_consts + 3 > (int)(sizeof all / sizeof all[0]))
        return LEAN_FAIL(err, LEAN_ERR_ARG, "%s: %d constants", name, n_consts);
    for (int i = 0; i < n_consts; i++) all[i] = consts[i];
    all[n_consts++] = (lean_gpu_const){"WG", 'u', wg};
    all[n_consts++] = (lean_gpu_const){"RED_ROWS", 'u', 1};
    all[n_consts++] = (lean_gpu_const){"SG", 'u', lean_gpu_subgroup_size(g)};
    lean_gpu_bind binds[8];
    for (int i = 0; i < n_bufs; i++) binds[i] = (lean_gpu_bind){bufs[i], 0, 0};
    lean_status st = lean_gpu_pipeline_create(g, name, src, n_src, all, n_consts, &op->pipe, err);
    if (st == LEAN_OK) st = lean_gpu_bindgroup_create(g, op->pipe, binds, n_bufs, name, &op->bg, err);
    return st;
}

/* make_op_wg with the GPU_OP_WG invocations of every kernel here but decode's attention */
static lean_status make_op(lean_gpu *g, const char *name, unsigned uses, const lean_gpu_const *consts,
                           int n_consts, lean_gpu_buf *const *bufs, int n_bufs, uint32_t wg_x, bool per_tok,
                           gpu_op *op, lean_error *err) {
    return make_op_wg(g, name, uses, consts, n_consts, bufs, n_bufs, WG, wg_x, per_tok, op, err);
}

void gpu_op_record(lean_gpu_cmd *c, const gpu_op *op, int32_t n_tok) {
    lean_gpu_dispatch(c, op->pipe, op->bg, op->wg_x, op->per_tok ? (uint32_t)n_tok : 1u, 1);
}

void gpu_op_free(gpu_op *op) {
    lean_gpu_bindgroup_free(op->bg);
    *op = (gpu_op){0};
}

/* ---- norms and element-wise ops ---- */

lean_status gpu_rmsnorm_create(lean_gpu *g, lean_gpu_buf *step, lean_gpu_buf *x, lean_gpu_buf *w,
                               lean_gpu_buf *out, int32_t n, float eps, bool last_only, gpu_op *op, lean_error *err) {
    const lean_gpu_const k[] = {{"N", 'u', n}, {"EPS", 'f', eps}, {"LAST_ONLY", 'u', last_only}};
    lean_gpu_buf *b[] = {step, x, w, out};
    return make_op(g, "rmsnorm", USE_STEP | USE_REDUCE, k, 3, b, 4, lean_div_up(n, 4 * WG), !last_only, op, err);
}

lean_status gpu_swiglu_create(lean_gpu *g, lean_gpu_buf *gate, lean_gpu_buf *up, int32_t n, gpu_op *op,
                              lean_error *err) {
    const lean_gpu_const k[] = {{"N", 'u', n}};
    lean_gpu_buf *b[] = {gate, up};
    return make_op(g, "swiglu", 0, k, 1, b, 2, lean_div_up(n, WG), true, op, err);
}

/* ---- position ---- */

enum { ROPE_CHUNK = 256 }; /* positions computed and written at a time: bounded host memory */

lean_status gpu_rope_table_create(lean_gpu *g, int32_t n_ctx, int32_t head_dim, float base,
                                  const float *freq_factors, lean_gpu_buf **out, lean_error *err) {
    *out = NULL;
    const uint64_t row_bytes = (uint64_t)head_dim * 4, bytes = (uint64_t)n_ctx * row_bytes;
    if (n_ctx < 1 || head_dim < 2 || head_dim % 2)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "rope table: n_ctx %d, head_dim %d", n_ctx, head_dim);
    if (bytes > gpu_binding_max_bytes(g))
        return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED,
                         "n_ctx %d: the RoPE table (n_ctx x head_dim %d floats, %llu bytes) exceeds this device's "
                         "storage binding limit of %llu bytes; use a smaller n_ctx",
                         n_ctx, head_dim, (unsigned long long)bytes, (unsigned long long)gpu_binding_max_bytes(g));
    float *rows = lean_malloc((size_t)ROPE_CHUNK * (size_t)row_bytes); /* (ROPE_CHUNK, head_dim) */
    if (!rows) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "rope table: out of memory");
    lean_status st = lean_gpu_buf_create(g, bytes, LEAN_GPU_STORAGE, "rope table", out, err);
    for (int32_t p0 = 0; !st && p0 < n_ctx; p0 += ROPE_CHUNK) {
        const int32_t n = n_ctx - p0 < ROPE_CHUNK ? n_ctx - p0 : ROPE_CHUNK;
        for (int32_t t = 0; t < n; t++) {
            float *row = rows + (int64_t)t * head_dim;
            lean_rope_angles(row, row + head_dim / 2, p0 + t, head_dim, base, freq_factors);
        }
        st = lean_gpu_buf_write(g, *out, (uint64_t)p0 * row_bytes, rows, (uint64_t)n * row_bytes, err);
    }
    lean_free(rows);
    if (st) {
        lean_gpu_buf_free(*out);
        *out = NULL;
    }
    return st;
}

/* qkv_post's constants (9) into k; its norms binding's bytes. */
static uint64_t qkv_post_consts(const lean_hparams *hp, bool norms, lean_gpu_const *k) {
    const uint64_t norm_bytes = norms ? 2 * (uint64_t)hp->head_dim * 4 : 16;
    const lean_gpu_const c[] = {{"N_HEAD", 'u', hp->n_head},
                                {"N_HEAD_KV", 'u', hp->n_head_kv},
                                {"HEAD_DIM", 'u', hp->head_dim},
                                {"KV_DIM", 'u', lean_kv_dim(hp)},
                                {"QKV", 'u', lean_q_dim(hp) + 2 * lean_kv_dim(hp)},
                                {"NEOX", 'u', hp->rope_style == LEAN_ROPE_NEOX},
                                {"QK_NORM", 'u', norms},
                                {"EPS", 'f', hp->rms_eps},
                                {"NORM_VEC4", 'u', (double)(norm_bytes / 16)}};
    for (int i = 0; i < 9; i++) k[i] = c[i];
    return norm_bytes;
}

lean_status gpu_qkv_post_create(lean_gpu *g, const lean_hparams *hp, lean_gpu_buf *step, lean_gpu_buf *qkv,
                                lean_gpu_buf *kc, lean_gpu_buf *vc, lean_gpu_buf *table, lean_gpu_buf *norms,
                                gpu_op *op, lean_error *err) {
    lean_gpu_const k[9];
    const uint64_t norm_bytes = qkv_post_consts(hp, norms != NULL, k);
    if (norm_bytes > LEAN_GPU_UNIFORM_MAX_BYTES)
        return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "head_dim %d: the q/k norm weights (%llu bytes) pass the %d-byte "
                         "uniform binding every adapter grants", hp->head_dim, (unsigned long long)norm_bytes,
                         LEAN_GPU_UNIFORM_MAX_BYTES);
    /* without norms the kernel never reads the binding: the step uniform's 16 bytes fill it */
    lean_gpu_buf *b[] = {step, qkv, kc, vc, table, norms ? norms : step};
    return make_op(g, "qkv_post", USE_STEP | USE_REDUCE | USE_QKV_HEAD, k, 9, b, 6,
                   (uint32_t)(hp->n_head + 2 * hp->n_head_kv), true, op, err);
}

/* ---- attention ---- */

uint32_t gpu_attention_chunk(int32_t pos) {
    const uint64_t keys = (uint64_t)pos + 1, span = (uint64_t)GPU_ATTN_MIN_CHUNK * GPU_ATTN_MAX_SPLITS;
    return (uint32_t)(GPU_ATTN_MIN_CHUNK * ((keys + span - 1) / span));
}

void gpu_step_words(int32_t n_tok, int32_t pos, uint32_t w[4]) {
    w[0] = (uint32_t)n_tok;
    w[1] = (uint32_t)pos;
    w[2] = gpu_attention_chunk(pos + n_tok - 1);
    w[3] = 0;
}

/* Splits of a one-token call at position pos: the ones forward.c dispatches and
 * attn_combine.wgsl assumes (<= GPU_ATTN_MAX_SPLITS). */
static uint32_t n_splits(int32_t pos) { return lean_div_up((int64_t)pos + 1, gpu_attention_chunk(pos)); }

uint64_t gpu_attention_out_floats(const lean_hparams *hp, int32_t n_ctx, int32_t n_batch) {
    const uint64_t att = (uint64_t)n_batch * (uint64_t)lean_q_dim(hp);
    uint64_t splits = lean_div_up(n_ctx, GPU_ATTN_MIN_CHUNK); /* the most any position needs */
    if (splits > GPU_ATTN_MAX_SPLITS) splits = GPU_ATTN_MAX_SPLITS;
    return att + splits * (uint64_t)hp->n_head * (uint64_t)(hp->head_dim + 2);
}

/* Bytes of attention_tiled.wgsl's workgroup arrays for lpt lanes a token, ks key splits and bk
 * keys a tile: the tiles' keys and values, and (lpt > 1) the lanes' partial scores. */
static uint64_t tiled_storage(int32_t head_dim, uint32_t lpt, uint32_t ks, uint32_t bk) {
    const uint64_t wg = (uint64_t)ks * GPU_ATTN_TILED_TQ_LANES;
    return 4 * (2 * (uint64_t)ks * bk * (uint64_t)head_dim + (lpt > 1 ? wg * bk : 1));
}

/* The most keys a tile (a power of two, 32 at most) whose arrays fit cap bytes; 0: none. */
static uint32_t tiled_bk(int32_t head_dim, uint32_t lpt, uint32_t ks, uint64_t cap) {
    uint32_t bk = 32;
    while (bk > 0 && tiled_storage(head_dim, lpt, ks, bk) > cap) bk /= 2;
    return bk;
}

/* The prefill kernel, attention_tiled.wgsl, over the buffers b of attention.wgsl: a token's
 * head held by lpt lanes of 16 vec4s or fewer (the fewest that divide its vec4s: one lane up
 * to head_dim 64), GPU_ATTN_TILED_TQ_LANES / lpt tokens a workgroup, their keys walked by
 * GPU_ATTN_KSPLITS splits of lanes side by side (lean_gpu_options.attn_ksplits, 1 to 8, for
 * the tests); keys in tiles of 32 a split, halved until the arrays fit the device's workgroup
 * storage and the 16 KiB every adapter grants. Splits and small tiles are for parallelism: a
 * prefill has few workgroups (heads x n_tok / tokens a workgroup) and the last tile's walk
 * over every key is the critical path; 2 splits of 16 tokens were the fastest shape
 * (docs/runs/2026-12-03-gpu-h200-split.md). */
static lean_status make_tiled(lean_gpu *g, const lean_hparams *hp, int32_t q_stride, lean_gpu_buf *const *b,
                              gpu_attention *a, lean_error *err) {
    uint64_t cap = lean_gpu_get_info(g)->max_workgroup_storage;
    if (cap > 16384) cap = 16384;
    const uint32_t hd4 = (uint32_t)hp->head_dim / 4;
    uint32_t lpt = lean_div_up(hd4, 16);
    while (hd4 % lpt) lpt++;
    const uint32_t tq = GPU_ATTN_TILED_TQ_LANES / lpt;
    const uint32_t forced = lean_gpu_options_of(g)->attn_ksplits; /* the tests' other splits */
    const uint32_t ks = forced >= 1 && forced <= 8 ? forced : GPU_ATTN_KSPLITS;
    const uint32_t bk = tiled_bk(hp->head_dim, lpt, ks, cap);
    if (bk == 0 || lpt > GPU_ATTN_TILED_TQ_LANES)
        return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED,
                         "head_dim %d: attention needs %llu bytes of workgroup storage, the device has %llu",
                         hp->head_dim, (unsigned long long)tiled_storage(hp->head_dim, lpt, ks, 1),
                         (unsigned long long)cap);
    a->tq = tq;
    const lean_gpu_const k[] = {{"GROUP", 'u', hp->n_head / hp->n_head_kv},
                                {"HEAD_DIM", 'u', hp->head_dim},
                                {"KV_DIM", 'u', lean_kv_dim(hp)},
                                {"Q_DIM", 'u', lean_q_dim(hp)},
                                {"Q_STRIDE", 'u', q_stride},
                                {"SCALE", 'f', 1.0f / sqrtf((float)hp->head_dim)},
                                {"LPT", 'u', lpt},
                                {"TQ", 'u', tq},
                                {"KS", 'u', ks},
                                {"BK", 'u', bk}};
    return make_op_wg(g, "attention_tiled", USE_STEP, k, 10, b, 5, ks * tq * lpt, (uint32_t)hp->n_head, false,
                      &a->tiled, err);
}

/* decode attention's constants (8) into k, the partials from float part_off of out. */
static void attention_consts(const lean_hparams *hp, double part_off, lean_gpu_const *k) {
    const uint32_t hd4 = (uint32_t)hp->head_dim / 4;
    const lean_gpu_const c[] = {{"N_HEAD", 'u', hp->n_head},
                                {"GROUP", 'u', hp->n_head / hp->n_head_kv},
                                {"HEAD_DIM", 'u', hp->head_dim},
                                {"KV_DIM", 'u', lean_kv_dim(hp)},
                                {"SCALE", 'f', 1.0f / sqrtf((float)hp->head_dim)},
                                {"HD4", 'u', hd4},
                                {"KG", 'u', GPU_ATTN_WG / hd4},
                                {"PART_OFF", 'u', part_off}};
    for (int i = 0; i < 8; i++) k[i] = c[i];
}

/* decode's kernels read queries, keys and values as vec4s, a lane a vec4 of the head */
static lean_status attention_fits(const lean_hparams *hp, int32_t q_stride, lean_error *err) {
    if (hp->head_dim % 4 || hp->head_dim > 4 * GPU_ATTN_WG || q_stride % 4)
        return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "gpu attention: head_dim %d (needs a multiple of 4 up to %d)",
                         hp->head_dim, 4 * GPU_ATTN_WG);
    return LEAN_OK;
}

lean_status gpu_attention_create(lean_gpu *g, const lean_hparams *hp, int32_t n_batch, lean_gpu_buf *step,
                                 lean_gpu_buf *q, int32_t q_stride, lean_gpu_buf *kc, lean_gpu_buf *vc,
                                 lean_gpu_buf *out, gpu_attention *a, lean_error *err) {
    *a = (gpu_attention){.n_head = hp->n_head};
    lean_status st = attention_fits(hp, q_stride, err);
    if (st != LEAN_OK) return st;
    const double part_off = (double)n_batch * lean_q_dim(hp);
    lean_gpu_const k[8];
    attention_consts(hp, part_off, k);
    lean_gpu_buf *b[] = {step, q, kc, vc, out};
    st = make_op_wg(g, "attention", USE_STEP | USE_REDUCE | USE_WALK, k, 8, b, 5, GPU_ATTN_WG, (uint32_t)hp->n_head,
                    false, &a->main, err);
    if (st != LEAN_OK) return st;
    const lean_gpu_const kc2[] = {k[0], k[2], k[7]}; /* N_HEAD, HEAD_DIM, PART_OFF */
    lean_gpu_buf *b2[] = {step, out};
    st = make_op(g, "attn_combine", USE_STEP | USE_MERGE, kc2, 3, b2, 2, (uint32_t)hp->n_head, false, &a->combine,
                 err);
    if (st == LEAN_OK && n_batch > 1) st = make_tiled(g, hp, q_stride, b, a, err);
    return st;
}

void gpu_attention_record(lean_gpu_cmd *c, const gpu_attention *a, int32_t n_tok, int32_t pos) {
    if (n_tok > 1) {
        lean_gpu_dispatch(c, a->tiled.pipe, a->tiled.bg, (uint32_t)a->n_head, lean_div_up(n_tok, a->tq), 1);
        return;
    }
    const uint32_t split = n_splits(pos);
    lean_gpu_dispatch(c, a->main.pipe, a->main.bg, (uint32_t)a->n_head, 1, split);
    if (split > 1) gpu_op_record(c, &a->combine, 1);
}

void gpu_attention_free(gpu_attention *a) {
    gpu_op_free(&a->main);
    gpu_op_free(&a->combine);
    gpu_op_free(&a->tiled);
}

/* ---- the batched pass's attention (kvpool.h: one KV page's rows) ---- */

uint64_t gpu_attention_rows_out_floats(const lean_hparams *hp, int32_t rows_max) {
    return (uint64_t)rows_max * ((uint64_t)lean_q_dim(hp) +
                                 (uint64_t)GPU_ATTN_MAX_SPLITS * (uint64_t)hp->n_head * (uint64_t)(hp->head_dim + 2));
}

lean_status gpu_attention_rows_create(lean_gpu *g, const lean_hparams *hp, lean_gpu_buf *rows, int32_t rows_max,
                                      lean_gpu_buf *qkv, lean_gpu_buf *kc, lean_gpu_buf *vc, lean_gpu_buf *table,
                                      lean_gpu_buf *norms, lean_gpu_buf *out, gpu_attention_rows *a, lean_error *err) {
    *a = (gpu_attention_rows){.n_head = hp->n_head, .n_slots = hp->n_head + 2 * hp->n_head_kv};
    const int32_t q_stride = lean_q_dim(hp) + 2 * lean_kv_dim(hp);
    lean_status st = attention_fits(hp, q_stride, err);
    if (st != LEAN_OK) return st;
    lean_gpu_const k[14];
    const uint64_t norm_bytes = qkv_post_consts(hp, norms != NULL, k);
    k[9] = (lean_gpu_const){"ROWS", 'u', rows_max};
    if (norm_bytes > LEAN_GPU_UNIFORM_MAX_BYTES) /* gpu_qkv_post_create refused it first */
        return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "head_dim %d: q/k norms past a uniform binding", hp->head_dim);
    lean_gpu_buf *bp[] = {rows, qkv, kc, vc, table, norms ? norms : rows};
    st = make_op(g, "qkv_post_rows", USE_ROWS | USE_REDUCE | USE_QKV_HEAD, k, 10, bp, 6, (uint32_t)a->n_slots, true,
                 &a->post, err);
    attention_consts(hp, (double)rows_max * lean_q_dim(hp), k);
    k[8] = (lean_gpu_const){"ROWS", 'u', rows_max};
    k[9] = (lean_gpu_const){"Q_DIM", 'u', lean_q_dim(hp)};
    k[10] = (lean_gpu_const){"Q_STRIDE4", 'u', q_stride / 4};
    k[11] = (lean_gpu_const){"SPLITS", 'u', GPU_ATTN_MAX_SPLITS};
    lean_gpu_buf *b[] = {rows, qkv, kc, vc, out};
    if (!st)
        st = make_op_wg(g, "attention_rows", USE_ROWS | USE_REDUCE | USE_WALK, k, 12, b, 5, GPU_ATTN_WG,
                        (uint32_t)hp->n_head, true, &a->main, err);
    /* attn_combine's N_HEAD, HEAD_DIM, PART_OFF are attention's 0, 2, 7 */
    const lean_gpu_const kc2[] = {k[0], k[2], k[7], k[8], k[9], k[11]};
    lean_gpu_buf *b2[] = {rows, out};
    if (!st)
        st = make_op(g, "attn_combine_rows", USE_ROWS | USE_MERGE, kc2, 6, b2, 2, (uint32_t)hp->n_head, true,
                     &a->combine, err);
    if (st) gpu_attention_rows_free(a);
    return st;
}

void gpu_attention_rows_record(lean_gpu_cmd *c, const gpu_attention_rows *a, int32_t n_rows, int32_t max_pos) {
    gpu_op_record(c, &a->post, n_rows);
    const uint32_t split = n_splits(max_pos);
    lean_gpu_dispatch(c, a->main.pipe, a->main.bg, (uint32_t)a->n_head, (uint32_t)n_rows, split);
    if (split > 1) gpu_op_record(c, &a->combine, n_rows);
}

void gpu_attention_rows_free(gpu_attention_rows *a) {
    gpu_op_free(&a->post);
    gpu_op_free(&a->main);
    gpu_op_free(&a->combine);
}
