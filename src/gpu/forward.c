/* forward.c — lean_backend_gpu: the forward pass on WebGPU, the twin of forward_ref.c.
 *
 * What it does: the model's first context opens the device and uploads every weight in its own
 * format (weights.h; the 1-D norms and biases as F32 buffers) into the model-level part
 * (lean_backend_model, backend.h), which every context of the model then shares; a GPU-only
 * load (model.c) makes that part itself, the weights read from its stream in file order. Each context
 * takes its F32 KV cache from the model's pool (kvpool.h: a slot of a page, with the page's RoPE
 * cos/sin of every position, computed on the host by the reference's own code), allocates
 * activations for n_batch tokens, and makes every pipeline
 * (cached on the device by source), bind group and matmul a call will need. A forward call
 * then writes the 16-byte step uniform and the ids, records the whole batch — embedding, every
 * layer, and (when logits are asked for) the last token's final norm and logits — into one
 * command buffer, submits it, and reads back only the logits. Nothing is allocated per call.
 * Batched prefill starts at any position (a suffix over a resident prefix takes the same path);
 * decode is the one-token case; truncation is a later call at a lower position (rows at and past
 * it are overwritten before they are read).
 * A resident generation (gen_begin / gen_next / gen_end, backend.h) runs draw-and-decode
 * steps on the GPU: each step decodes the id drawn last (its embedding reads it from the id
 * buffer the sampler wrote), draws the next with sample.h's sampler, and copies the id into a
 * mappable slot; the host maps a slot at a time while later steps run (section "generation").
 * What it does not: check ids (lean_ctx does); the batched calls (lean_decode_batch,
 * lean_gen_next_batch), which are forward_batch.c's. The state both share is forward_impl.h's.
 *
 * Per layer, the dispatches, in forward_ref.c's order (buffers in brackets):
 *   1 [Wq; Wk; Wv] [x -> qkv: q | k | v per token]: the attention RMSNorm computed by the
 *     matmul itself in decode (gpu_matmul_can_norm: n_embd up to 2048), qwen2's biases added
 *     by it; [Wq; Wk] and Wv, or
 *     Wq, Wk, Wv, as matmuls into qkv's columns when their formats differ
 *   2 qkv_post: qwen3's per-head q/k norm, RoPE [q in place; k -> key cache row pos+t], the
 *     value write [v -> value cache row pos+t]; in decode without q/k norms, done by 1's
 *     matmuls themselves where the device binds their 6-8 storage buffers (gpu_mm_kv;
 *     lean_gpu_options.no_kv_epilogue keeps the dispatch)
 *   3 attention [q, cache -> att] (+ 1 combine past GPU_ATTN_MIN_CHUNK keys in decode)
 *   4 Wo [x += Wo att: the residual add is the matmul's]
 *   5 [Wgate; Wup] with SwiGLU [x -> gate], the FFN RMSNorm in the matmul as in 1 (Wgate, Wup,
 *     SwiGLU when their formats differ)
 *   6 Wdown [x += Wdown gate]
 * Prefill (n_tok > 1) runs each RMSNorm as its own dispatch before 1 and 5 [x -> xn], as does
 * decode where the row is wider than the fusion pays for (matmul.c: NORM_FUSE_MAX_COLS). A
 * decode step is then 5 n_layer + 3 dispatches (embedding; final norm, logits; 6 n_layer + 3
 * with qkv_post, 2 more a layer with the separate norms), and, generating, the draw's 2-5
 * (sample.h).
 * With LoRA adapters (gpu/lora.h, section "LoRA"), each adapted matmul is followed by its
 * term's two dispatches (Q, K, V's and gate, up's shared; the embedding's after its gather), and an adapted layer's decode runs
 * its norms, qkv_post and (stacked gate, up) SwiGLU as dispatches of their own.
 *
 * Sections: create / destroy (the model's part, a context's) · recording · forward · generation · LoRA ·
 * profile · test accessors · table (each call holding the device's lock)
 */
#include "gpu/forward_impl.h"
#include "gpu/test_hooks.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void gen_free(lean_backend_state *s);

/* ---- create / destroy: the model's part, then a context's ---- */

static void stream_plan_free(struct stream_plan *sp);

static void model_free(lean_backend_model *bm) {
    stream_plan_free(bm->stream);
    for (int32_t il = 0; bm->layers && il < bm->m->hp.n_layer; il++) {
        gpu_layer_weights *W = &bm->layers[il];
        for (int i = 0; i < N_MATRICES; i++) gpu_weight_free(&W->w[i]);
        lean_gpu_buf *bufs[] = {W->attn_norm, W->ffn_norm, W->bqkv, W->qk_norm};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) lean_gpu_buf_free(bufs[i]);
    }
    lean_free(bm->layers);
    gpu_weight_free(&bm->tok_embd);
    gpu_weight_free(&bm->output);
    lean_gpu_buf_free(bm->output_norm);
    gpu_sampler_check_free(bm->check);
    lean_gpu_close(bm->g);
    lean_mutex_destroy(&bm->lock);
    lean_free(bm);
}

/* Drops a reference (the model's: model_release; a context's: gpu_destroy); the last frees. */
static void model_unref(lean_backend_model *bm) {
    if (atomic_fetch_sub(&bm->refs, 1) == 1) model_free(bm);
}

static void free_layer(gpu_layer *L) {
    for (int i = 0; i < N_MATRICES; i++) gpu_matmul_free(L->mm[i]), gpu_matmul_free(L->lora_mm[i]);
    gpu_op *ops[] = {&L->norm_attn, &L->qkv_post, &L->norm_ffn, &L->swiglu, &L->swiglu_rows};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) gpu_op_free(ops[i]);
    gpu_attention_free(&L->attn);
}

/* Frees s's objects on the device (with bm's lock held) and s. */
static void free_state(lean_backend_state *s) {
    gen_free(s);
    gpu_batch_free(s);
    if (s->layers)
        for (int32_t il = 0; il < s->m->hp.n_layer; il++) free_layer(&s->layers[il]);
    lean_free(s->layers);
    gpu_get_rows_free(s->embed);
    gpu_matmul_free(s->mm_out);
    gpu_op_free(&s->norm_out);
    gpu_lora_free(s->lora);
    gpu_kv_give(&s->bm->pool, s->m, &s->kv);
    lean_gpu_buf *bufs[] = {s->step, s->step1, s->ids, s->x,         s->xn,    s->qkv, s->att,
                            s->gate, s->up,    s->x_last, s->logits, s->part, s->logits_rb, s->gu};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) lean_gpu_buf_free(bufs[i]);
    lean_free(s);
}

static void gpu_destroy(lean_backend_state *s) {
    if (!s) return;
    lean_backend_model *bm = s->bm;
    lean_mutex_lock(&bm->lock);
    free_state(s);
    lean_mutex_unlock(&bm->lock);
    model_unref(bm);
}

/* *out = a zeroed storage buffer of a * b floats (or u32s). */
lean_status gpu_new_buf(lean_backend_state *s, uint64_t a, uint64_t b, const char *label, lean_gpu_buf **out,
                        lean_error *err) {
    uint64_t bytes;
    if (!lean_mul_u64(a, b, &bytes) || !lean_mul_u64(bytes, 4, &bytes))
        return LEAN_FAIL(err, LEAN_ERR_NOMEM, "%s: %llu x %llu floats overflow", label, (unsigned long long)a,
                         (unsigned long long)b);
    return lean_gpu_buf_create(s->g, bytes, LEAN_GPU_STORAGE, label, out, err);
}

/* The weights' upload so far, for lean_ctx_params.progress: bytes of the tensors uploaded. */
typedef struct upload_progress {
    lean_progress_fn fn; /* nullable */
    void *user;
    uint64_t done, total;
} upload_progress;

/* The bytes gpu_model_create uploads: every tensor the model reads but rope_freqs (each
 * state's RoPE table holds it), the tied output once; absent ones are zeroed views. */
static uint64_t upload_total(const lean_model *m) {
    uint64_t n = m->tok_embd.n_bytes + m->output_norm.n_bytes + (m->tied_output ? 0 : m->output.n_bytes);
    for (int32_t il = 0; il < m->hp.n_layer; il++) {
        const lean_layer *L = &m->layers[il];
        n += L->attn_norm.n_bytes + L->wq.n_bytes + L->wk.n_bytes + L->wv.n_bytes + L->wo.n_bytes + L->bq.n_bytes +
             L->bk.n_bytes + L->bv.n_bytes + L->q_norm.n_bytes + L->k_norm.n_bytes + L->ffn_norm.n_bytes +
             L->w_gate.n_bytes + L->w_up.n_bytes + L->w_down.n_bytes;
    }
    return n;
}

/* ts[0..n) are on the device: tell the caller. */
static void uploaded(upload_progress *up, const lean_tensor *const *ts, int n) {
    for (int i = 0; i < n; i++) up->done += ts[i]->n_bytes;
    if (up->fn) up->fn(up->user, up->done, up->total);
}

/* The F32s the part buffer needs: the most any of a layer's matmuls takes, for each shape they
 * may have (Q, K, V and gate, up stacked or apart, by their files' formats). */
static uint64_t part_floats(lean_gpu *g, const lean_hparams *hp, int32_t B) {
    const int64_t d = hp->n_embd, qd = lean_q_dim(hp), kvd = lean_kv_dim(hp), ff = hp->n_ff;
    const struct { int64_t rows, cols; gpu_mm_mode mode; } mats[] = {
        {qd + 2 * kvd, d, GPU_MM_SET}, {qd + kvd, d, GPU_MM_SET}, {qd, d, GPU_MM_SET}, {kvd, d, GPU_MM_SET},
        {d, qd, GPU_MM_ADD}, {2 * ff, d, GPU_MM_SWIGLU}, {ff, d, GPU_MM_SET}, {d, ff, GPU_MM_ADD}};
    uint64_t most = 0;
    for (size_t i = 0; i < sizeof mats / sizeof mats[0]; i++) {
        const uint64_t n = gpu_matmul_part_floats(g, mats[i].rows, mats[i].cols, mats[i].mode, B);
        most = n > most ? n : most;
    }
    return most;
}

static lean_status alloc_activations(lean_backend_state *s, lean_error *err) {
    const lean_hparams *hp = &s->m->hp;
    const uint64_t B = (uint64_t)s->n_batch, d = (uint64_t)hp->n_embd, qd = (uint64_t)lean_q_dim(hp),
                   kvd = (uint64_t)lean_kv_dim(hp), ff = (uint64_t)hp->n_ff;
    lean_status st;
    if ((st = lean_gpu_buf_create(s->g, 16, LEAN_GPU_UNIFORM, "step", &s->step, err)) ||
        (st = lean_gpu_buf_create(s->g, 16, LEAN_GPU_UNIFORM, "step1", &s->step1, err)) ||
        (st = lean_gpu_buf_write(s->g, s->step1, 0, (const uint32_t[4]){1, 0, 0, 0}, 16, err)) ||
        (st = gpu_new_buf(s, B, 1, "ids", &s->ids, err)) || (st = gpu_new_buf(s, B, d, "x", &s->x, err)) ||
        (st = gpu_new_buf(s, B, d, "xn", &s->xn, err)) ||
        (st = gpu_new_buf(s, B, qd + 2 * kvd, "qkv", &s->qkv, err)) ||
        (st = gpu_new_buf(s, gpu_attention_out_floats(hp, s->n_ctx, s->n_batch), 1, "att", &s->att, err)) ||
        (st = gpu_new_buf(s, B, ff, "gate", &s->gate, err)) || (st = gpu_new_buf(s, B, ff, "up", &s->up, err)) ||
        (st = gpu_new_buf(s, d, 1, "x_last", &s->x_last, err)) ||
        (st = gpu_new_buf(s, (uint64_t)hp->n_vocab, 1, "logits", &s->logits, err)) ||
        (st = lean_gpu_buf_create(s->g, 4ull * (uint64_t)hp->n_vocab, LEAN_GPU_READBACK, "logits read-back",
                                  &s->logits_rb, err)))
        return st;
    return gpu_new_part(s, s->n_batch, "matmul parts", &s->part, err);
}

lean_status gpu_new_part(lean_backend_state *s, int32_t B, const char *name, lean_gpu_buf **out, lean_error *err) {
    /* none where the parts would pass what one binding holds (a large n_batch on a device of
     * WebGPU's default 128 MiB): the matmuls then run unsplit, their sums rounded otherwise */
    const uint64_t part = part_floats(s->g, &s->m->hp, B);
    if (!part || part * 4 > gpu_binding_max_bytes(s->g)) return LEAN_OK;
    return gpu_new_buf(s, part, 1, name, out, err);
}

/* The input of a matmul after the RMSNorm by weight `norm`: xn, which decode's kernel makes
 * itself from x where the row is short enough (gpu_matmul_can_norm, gpu_mm_in). */
static gpu_mm_in normed_input(const lean_backend_state *s, const gpu_layer *L, lean_gpu_buf *norm) {
    if (!L->norm_in_matmul) return (gpu_mm_in){.x = s->xn};
    return (gpu_mm_in){.x = s->xn, .raw = s->x, .norm = norm, .eps = s->m->hp.rms_eps};
}

/* QKV_ORDER[k]'s output: its columns of qkv's rows, qwen2's biases added, kv (nullable) the
 * q|k|v epilogue, part (nullable) the tiled kernel's split sums. */
static gpu_mm_out qkv_out(const lean_backend_state *s, const gpu_layer_weights *W, int k, const gpu_mm_kv *kv,
                          lean_gpu_buf *part) {
    const int32_t qd = lean_q_dim(&s->m->hp), kvd = lean_kv_dim(&s->m->hp);
    const uint32_t col[] = {0, 0, (uint32_t)qd, (uint32_t)(qd + kvd)}; /* QKV_ORDER's */
    return (gpu_mm_out){.y = s->qkv, .col = col[k], .stride = (uint32_t)(qd + 2 * kvd),
                        .mode = W->bqkv ? GPU_MM_BIAS : GPU_MM_SET, .bias = W->bqkv, .kv = kv, .part = part};
}

/* One of a layer's matmuls: weight w[i] from in into out. */
typedef struct layer_mm {
    int i;
    gpu_mm_in in;
    gpu_mm_out out;
} layer_mm;

/* Layer W's matmuls, for decode's kernels and the batched pass's alike: Q, K, V from in_attn
 * into qkv's columns (one matmul when stacked; kv: the q|k|v epilogue or NULL), Wo from att,
 * gate and up from in_ffn (one SwiGLU matmul into gate when stacked, else into gate and up for
 * the SwiGLU op), down from gate; Wo and down added to x; part (nullable): every output's split
 * sums for the tiled kernel. Returns how many, at most N_MATRICES. */
static int layer_matmuls(const lean_backend_state *s, const gpu_layer_weights *W, gpu_mm_in in_attn,
                         const gpu_mm_kv *kv, lean_gpu_buf *att, gpu_mm_in in_ffn, lean_gpu_buf *part,
                         layer_mm mm[N_MATRICES]) {
    int n = 0;
    for (int k = 0; k < 4; k++)
        if (W->w[QKV_ORDER[k]].buf) mm[n++] = (layer_mm){QKV_ORDER[k], in_attn, qkv_out(s, W, k, kv, part)};
    const gpu_mm_out residual = {.y = s->x, .mode = GPU_MM_ADD, .part = part};
    mm[n++] = (layer_mm){W_O, {.x = att}, residual};
    if (W->w[W_GATE_UP].buf) {
        mm[n++] = (layer_mm){W_GATE_UP, in_ffn, {.y = s->gate, .mode = GPU_MM_SWIGLU, .part = part}};
    } else {
        mm[n++] = (layer_mm){W_GATE, in_ffn, {.y = s->gate, .part = part}};
        mm[n++] = (layer_mm){W_UP, in_ffn, {.y = s->up, .part = part}};
    }
    mm[n++] = (layer_mm){W_DOWN, {.x = s->gate}, residual};
    return n;
}

/* Layer il's Q, K, V matmuls without decode's q|k|v epilogue (lora_mm at QKV_ORDER's indices,
 * where the layer has it: kv_in_matmul), made once: decode's kernel, over up to n_batch rows
 * where they take rows (gpu_matmul_rows_fit), for adapters (section "LoRA": the terms are added
 * before qkv_post). */
lean_status gpu_make_plain_qkv(lean_backend_state *s, int32_t il, lean_error *err) {
    gpu_layer *L = &s->layers[il];
    const gpu_layer_weights *W = &s->bm->layers[il];
    const gpu_mm_in in = normed_input(s, L, W->attn_norm);
    lean_status st = LEAN_OK;
    for (int k = 0; !st && k < 4; k++) {
        const int i = QKV_ORDER[k];
        const gpu_mm_out out = qkv_out(s, W, k, NULL, s->part);
        const int32_t rows = gpu_matmul_rows_fit(&W->w[i]) ? s->n_batch : 1;
        if (L->mm[i] && !L->lora_mm[i])
            st = gpu_matmul_create_rows(s->g, &W->w[i], rows, NULL, &in, &out, &L->lora_mm[i], err);
    }
    return st;
}

lean_status gpu_make_batch_matmuls(lean_backend_state *s, int32_t il, int32_t rows, lean_gpu_buf *uniform,
                                   lean_gpu_buf *att, bool tiled_ffn, lean_gpu_buf *part, gpu_matmul **mm,
                                   lean_error *err) {
    const gpu_layer_weights *W = &s->bm->layers[il];
    const gpu_mm_in xn = {.x = s->xn};
    layer_mm list[N_MATRICES];
    const int n = layer_matmuls(s, W, xn, NULL, att, xn, part, list);
    lean_status st = LEAN_OK;
    for (int j = 0; !st && j < n; j++) {
        const int i = list[j].i;
        if (tiled_ffn && (i == W_GATE_UP || i == W_GATE || i == W_UP || i == W_DOWN))
            st = gpu_matmul_create(s->g, &W->w[i], rows, uniform, &list[j].in, &list[j].out, &mm[i], err);
        else
            st = gpu_matmul_create_rows(s->g, &W->w[i], rows, uniform, &list[j].in, &list[j].out, &mm[i], err);
    }
    return st;
}

/* A context's: layer il's KV cache and kernels (see the list at the top): the two RMSNorms
 * (which decode's matmuls also fuse where the row is short enough: normed_input), the layer's
 * matmuls, qkv_post, the attention, and the SwiGLU op where gate and up are apart. */
static lean_status make_layer(lean_backend_state *s, int32_t il, lean_error *err) {
    gpu_layer *L = &s->layers[il];
    const gpu_layer_weights *W = &s->bm->layers[il];
    const lean_hparams *hp = &s->m->hp;
    const int32_t d = hp->n_embd, qd = lean_q_dim(hp), kvd = lean_kv_dim(hp), B = s->n_batch;
    L->norm_in_matmul = gpu_matmul_can_norm(s->g, d);
    L->k_cache = s->kv.k[il];
    L->v_cache = s->kv.v[il];
    const gpu_mm_kv kv = {.step = s->step, .kc = L->k_cache, .vc = L->v_cache, .table = s->rope_table,
                          .q_dim = qd, .kv_dim = kvd, .head_dim = hp->head_dim,
                          .neox = hp->rope_style == LEAN_ROPE_NEOX};
    L->kv_in_matmul = !W->qk_norm && gpu_matmul_kv_fits(s->g, W->bqkv != NULL, L->norm_in_matmul) &&
                      !lean_gpu_options_of(s->g)->no_kv_epilogue;
    layer_mm list[N_MATRICES];
    const int n = layer_matmuls(s, W, normed_input(s, L, W->attn_norm), L->kv_in_matmul ? &kv : NULL, s->att,
                                normed_input(s, L, W->ffn_norm), s->part, list);
    lean_status st = LEAN_OK;
    for (int j = 0; !st && j < n; j++)
        st = gpu_matmul_create(s->g, &W->w[list[j].i], B, s->step, &list[j].in, &list[j].out, &L->mm[list[j].i], err);
    if (!st) st = gpu_rmsnorm_create(s->g, s->step, s->x, W->attn_norm, s->xn, d, hp->rms_eps, false, &L->norm_attn, err);
    if (!st) st = gpu_rmsnorm_create(s->g, s->step, s->x, W->ffn_norm, s->xn, d, hp->rms_eps, false, &L->norm_ffn, err);
    if (!st)
        st = gpu_qkv_post_create(s->g, hp, s->step, s->qkv, L->k_cache, L->v_cache, s->rope_table, W->qk_norm,
                                 &L->qkv_post, err);
    if (!st)
        st = gpu_attention_create(s->g, hp, B, s->step, s->qkv, qd + 2 * kvd, L->k_cache, L->v_cache, s->att,
                                  &L->attn, err);
    if (!st && !W->w[W_GATE_UP].buf) st = gpu_swiglu_create(s->g, s->gate, s->up, hp->n_ff, &L->swiglu, err);
    return st;
}

/* ---- the weights' upload (the model's part) ----
 * Every buffer is made first (a job: a weight, or an F32 buffer, and the tensors it holds),
 * then filled (weights.h's gpu_weight_fill): from the tensor views of a mapped or read model,
 * or, in a GPU-only load (lean_backend_config.source), from the stream in file order, each
 * piece written to the device as it is read and never held whole on the host. */
typedef struct upload_job {
    gpu_weight_fill *fill; /* NULL once ended */
    gpu_weight *w;         /* where it goes: a weight, or */
    lean_gpu_buf **buf;    /* an F32 buffer */
    const lean_tensor *ts[3];
    int n;
} upload_job;

typedef struct upload_plan {
    lean_gpu *g;
    gpu_repack *repack;
    upload_job *jobs;
    int n_jobs;
    upload_progress up;
} upload_plan;

/* A job for ts[0..n): a weight named name into *w, or (w NULL) F32 tensors into *buf. */
static lean_status plan_job(upload_plan *p, const lean_tensor *const *ts, int n, const char *name, gpu_weight *w,
                            lean_gpu_buf **buf, unsigned usage, lean_error *err) {
    upload_job *j = &p->jobs[p->n_jobs];
    *j = (upload_job){.w = w, .buf = buf, .n = n};
    memcpy(j->ts, ts, sizeof *ts * (size_t)n);
    lean_status st = w ? gpu_weight_fill_begin(p->g, p->repack, ts, n, name, &j->fill, err)
                       : gpu_weight_fill_begin_bytes(p->g, ts, n, name, usage, &j->fill, err);
    if (!st) p->n_jobs++;
    return st;
}

/* F32 tensors ts[0..n) one after another in one buffer of `usage` (LEAN_GPU_STORAGE and/or
 * UNIFORM; uniform arrays are of vec4s: the buffer's size is rounded up to 16 bytes); *out
 * stays NULL when ts[0] is absent (the model has all of them or none). */
static lean_status plan_f32(upload_plan *p, const lean_tensor *const *ts, int n, unsigned usage, lean_gpu_buf **out,
                            lean_error *err) {
    return ts[0]->name ? plan_job(p, ts, n, ts[0]->name, NULL, out, usage, err) : LEAN_OK;
}

/* The layer's matrices, each in its file's format: Q, K (and V) stacked and gate, up stacked
 * where they share it; then its norms and biases. */
static lean_status plan_layer(upload_plan *p, const lean_layer *src, gpu_layer_weights *W, lean_error *err) {
    const lean_tensor *mats[W_QKV] = {&src->wq, &src->wk, &src->wv, &src->wo,
                                      &src->w_gate, &src->w_up, &src->w_down};
    const int n_qkv = gpu_weight_stackable(mats + W_Q, 3) ? 3 : gpu_weight_stackable(mats + W_Q, 2) ? 2 : 0;
    const bool stack_ffn = gpu_weight_stackable(mats + W_GATE, 2);
    lean_status st = LEAN_OK;
    for (int i = 0; !st && i < W_QKV; i++) {
        const bool stacked = i < n_qkv || (stack_ffn && (i == W_GATE || i == W_UP));
        if (!stacked) st = plan_job(p, mats + i, 1, mats[i]->name, &W->w[i], NULL, 0, err);
    }
    if (!st && n_qkv) st = plan_job(p, mats + W_Q, n_qkv, "attn_qkv", &W->w[W_QKV], NULL, 0, err);
    if (!st && stack_ffn) st = plan_job(p, mats + W_GATE, 2, "ffn_gate+ffn_up", &W->w[W_GATE_UP], NULL, 0, err);
    const lean_tensor *bias[] = {&src->bq, &src->bk, &src->bv}, *qk_norm[] = {&src->q_norm, &src->k_norm};
    if (!st) st = plan_f32(p, (const lean_tensor *[]){&src->attn_norm}, 1, LEAN_GPU_STORAGE, &W->attn_norm, err);
    if (!st) st = plan_f32(p, (const lean_tensor *[]){&src->ffn_norm}, 1, LEAN_GPU_STORAGE, &W->ffn_norm, err);
    if (!st) st = plan_f32(p, bias, 3, LEAN_GPU_STORAGE, &W->bqkv, err);
    if (!st) st = plan_f32(p, qk_norm, 2, LEAN_GPU_UNIFORM, &W->qk_norm, err);
    return st;
}

/* Job j's buffer, filled, to its place. */
static lean_status end_job(upload_job *j, lean_error *err) {
    gpu_weight w = {0};
    lean_status st = gpu_weight_fill_end(j->fill, &w, err);
    j->fill = NULL;
    if (st) return st;
    if (j->w) *j->w = w;
    else *j->buf = w.buf;
    return LEAN_OK;
}

/* A GPU-only load's plan, kept in the model's part while the stream comes: tensor k of the
 * list given to the source is part part[k] of job job[k]. */
typedef struct stream_plan {
    upload_plan p;
    int *job, *part;
} stream_plan;

static void stream_plan_free(stream_plan *sp) {
    if (!sp) return;
    for (int j = 0; j < sp->p.n_jobs; j++) gpu_weight_fill_cancel(sp->p.jobs[j].fill); /* those not ended */
    lean_free(sp->p.jobs);
    gpu_repack_free(sp->p.repack);
    lean_free(sp->job);
    lean_free(sp->part);
    lean_free(sp);
}

/* A piece from the stream (lean_tensor_sink). */
static lean_status stream_put(void *user, int k, uint64_t at, const void *bytes, uint64_t n, lean_error *err) {
    stream_plan *sp = user;
    lean_status st = gpu_weight_fill_put(sp->p.jobs[sp->job[k]].fill, sp->part[k], at, bytes, n, err);
    upload_progress *up = &sp->p.up;
    up->done += n;
    if (!st && up->fn) up->fn(up->user, up->done, up->total);
    return st;
}

/* Names every job's tensors to the source, which gives them to stream_put; the plan moves to
 * bm->stream until model_finish. */
static lean_status upload_stream(lean_backend_model *bm, upload_plan *p, lean_weight_source *src, lean_error *err) {
    int n = 0;
    for (int j = 0; j < p->n_jobs; j++) n += p->jobs[j].n;
    stream_plan *sp = lean_calloc(1, sizeof *sp);
    const lean_tensor **ts = lean_calloc((size_t)n, sizeof *ts);
    if (sp) sp->job = lean_calloc((size_t)n, sizeof *sp->job), sp->part = lean_calloc((size_t)n, sizeof *sp->part);
    lean_status st = sp && ts && sp->job && sp->part ? LEAN_OK
                                                      : LEAN_FAIL(err, LEAN_ERR_NOMEM, "gpu: listing %d tensors", n);
    if (sp) sp->p = *p, *p = (upload_plan){0}, bm->stream = sp; /* bm owns the plan from here */
    for (int j = 0, k = 0; !st && j < sp->p.n_jobs; j++)
        for (int i = 0; i < sp->p.jobs[j].n; i++, k++) ts[k] = sp->p.jobs[j].ts[i], sp->job[k] = j, sp->part[k] = i;
    if (!st) st = lean_weight_source_expect(src, ts, n, stream_put, sp, err);
    lean_free(ts);
    return st;
}

/* Every weight of the model on bm's device, from the views or from cfg->source. */
static lean_status upload_weights(lean_backend_model *bm, const lean_backend_config *cfg, lean_error *err) {
    const lean_model *m = bm->m;
    upload_plan p = {.g = bm->g, .up = {.fn = cfg->progress, .user = cfg->progress_user, .total = upload_total(m)}};
    p.jobs = lean_calloc((size_t)m->hp.n_layer * 11 + 3, sizeof *p.jobs); /* 7 matrices and 4 F32 buffers a layer */
    lean_status st = p.jobs ? gpu_repack_new(&p.repack, err)
                            : LEAN_FAIL(err, LEAN_ERR_NOMEM, "gpu: planning %d layers' uploads", m->hp.n_layer);
    if (!st) st = plan_job(&p, (const lean_tensor *[]){&m->tok_embd}, 1, m->tok_embd.name, &bm->tok_embd, NULL, 0, err);
    if (!st && !m->tied_output)
        st = plan_job(&p, (const lean_tensor *[]){&m->output}, 1, m->output.name, &bm->output, NULL, 0, err);
    if (!st) st = plan_f32(&p, (const lean_tensor *[]){&m->output_norm}, 1, LEAN_GPU_STORAGE, &bm->output_norm, err);
    for (int32_t il = 0; !st && il < m->hp.n_layer; il++) st = plan_layer(&p, &m->layers[il], &bm->layers[il], err);
    if (!st && cfg->source) {
        st = upload_stream(bm, &p, cfg->source, err);
    } else {
        for (int j = 0; !st && j < p.n_jobs; j++) {
            upload_job *J = &p.jobs[j];
            for (int i = 0; !st && i < J->n; i++)
                st = gpu_weight_fill_put(J->fill, i, 0, J->ts[i]->data, J->ts[i]->n_bytes, err);
            if (!st) st = end_job(J, err);
            if (!st) uploaded(&p.up, J->ts, J->n);
        }
    }
    for (int j = 0; p.jobs && j < p.n_jobs; j++) gpu_weight_fill_cancel(p.jobs[j].fill); /* those left on a failure */
    lean_free(p.jobs);
    gpu_repack_free(p.repack);
    return st;
}

/* Embedding, final norm, logits. */
static lean_status make_ends(lean_backend_state *s, lean_error *err) {
    const lean_model *m = s->m;
    const lean_backend_model *bm = s->bm;
    const gpu_weight *out = m->tied_output ? &bm->tok_embd : &bm->output;
    lean_status st = gpu_get_rows_create(s->g, &bm->tok_embd, s->n_batch, s->step, s->ids, s->x, &s->embed, err);
    if (!st)
        st = gpu_rmsnorm_create(s->g, s->step, s->x, bm->output_norm, s->x_last, m->hp.n_embd, m->hp.rms_eps, true,
                                &s->norm_out, err);
    const gpu_mm_out logits = {.y = s->logits};
    if (!st) st = gpu_matmul_create(s->g, out, 1, s->step1, &(gpu_mm_in){.x = s->x_last}, &logits, &s->mm_out, err);
    return st;
}

/* Set once an open for `auto` found no WebGPU or only a software adapter: adapters do not
 * come and go within a process, and each open costs a library load, an adapter and a device
 * (~0.3 s over llvmpipe), which contexts made by the dozen (tests, chat OOM loops) skip. */
static atomic_int no_hardware_adapter;

/* The device options a context asks for: the tests' variants (cfg->gpu), profiling, and exact,
 * which keeps every matmul in F32 (no f16 path, no 8-bit prefill). */
static lean_gpu_options context_options(const lean_backend_config *cfg) {
    lean_gpu_options opt = cfg->gpu ? *cfg->gpu : (lean_gpu_options){.profile = false};
    opt.profile |= cfg->profile;
    if (cfg->exact) {
        opt.f16 = opt.int8 = LEAN_GPU_OFF;
    }
    return opt;
}

/* Whether a device opened with dev computes what a context asking for want computes: every
 * variant the same, and profiling where it is asked for (a profiled device serves all). */
static bool options_serve(const lean_gpu_options *dev, const lean_gpu_options *want) {
    return dev->f16 == want->f16 && dev->int8 == want->int8 && dev->tile_wide == want->tile_wide &&
           dev->tile_prefetch == want->tile_prefetch && dev->vec_prefetch == want->vec_prefetch &&
           dev->tile_ksplit == want->tile_ksplit && dev->attn_ksplits == want->attn_ksplits &&
           dev->no_subgroups == want->no_subgroups && dev->no_kv_epilogue == want->no_kv_epilogue &&
           dev->no_resident == want->no_resident && (dev->profile || !want->profile);
}

static lean_status open_device(lean_gpu **g, const lean_backend_config *cfg, lean_error *err) {
    const bool hardware_only = cfg->hardware_only;
    if (hardware_only && atomic_load(&no_hardware_adapter))
        return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "gpu: no hardware WebGPU adapter (found earlier in this process)");
    const lean_gpu_options opt = context_options(cfg);
    lean_status st = lean_gpu_open(g, &opt, err);
    if (!st && hardware_only && lean_gpu_get_info(*g)->software)
        st = LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "gpu: adapter '%s' is a software renderer",
                       lean_gpu_get_info(*g)->adapter);
    if (st == LEAN_ERR_UNSUPPORTED && hardware_only) atomic_store(&no_hardware_adapter, 1);
    return st;
}

/* One per thread: its address names the thread. Dawn's OpenGL backends make their GL context
 * current on the thread that opens the device and fail elsewhere (eglCreateSync: EGL_BAD_MATCH,
 * seen over llvmpipe), so a device there serves that thread's contexts only (gpu_model_check). */
static _Thread_local char thread_tag;

/* The model's part: opens the device and uploads every weight, each once, telling
 * cfg->progress after each tensor. */
static lean_status gpu_model_create(const lean_model *m, const lean_backend_config *cfg, lean_backend_model **out,
                                    lean_error *err) {
    *out = NULL;
    lean_backend_model *bm = lean_calloc(1, sizeof *bm);
    if (!bm || !lean_mutex_init(&bm->lock)) {
        lean_free(bm);
        return LEAN_FAIL(err, LEAN_ERR_NOMEM, "allocating the gpu model");
    }
    bm->m = m;
    atomic_init(&bm->refs, 1);
    lean_status st = open_device(&bm->g, cfg, err);
    if (!st && !strncmp(lean_gpu_get_info(bm->g)->backend, "OpenGL", 6)) bm->thread = &thread_tag;
    if (!st) {
        bm->layers = lean_calloc((size_t)m->hp.n_layer, sizeof *bm->layers);
        if (!bm->layers) st = LEAN_FAIL(err, LEAN_ERR_NOMEM, "allocating %d gpu layers", m->hp.n_layer);
    }
    if (!st) st = upload_weights(bm, cfg, err);
    if (!st && !cfg->source) st = lean_gpu_finish(bm->g, err); /* the uploads are done before create returns */
    if (st) {
        model_free(bm);
        return st;
    }
    *out = bm;
    return LEAN_OK;
}

/* A GPU-only load's end: every buffer filled (each tensor checked whole), the uploads done and,
 * in pump mode, their checks back (LEAN_PENDING until then: made again, it resumes there). */
static lean_status gpu_model_finish(lean_backend_model *bm, lean_error *err) {
    stream_plan *sp = bm->stream;
    lean_status st = LEAN_OK;
    for (int j = 0; sp && !st && j < sp->p.n_jobs; j++) st = end_job(&sp->p.jobs[j], err);
    if (sp && !st) st = lean_gpu_finish(bm->g, err);
    stream_plan_free(sp);
    bm->stream = NULL;
    return st ? st : lean_gpu_settle(bm->g, err);
}

/* A lost device fails with LEAN_ERR_DEVICE, so session.c makes the model another one. A context
 * goes alone (a device of its own) on another thread's OpenGL device, or where the device's
 * options do not serve it (options_serve: one shared part a model, the first context's). */
static lean_status gpu_model_check(lean_backend_model *bm, const lean_backend_config *cfg, bool *alone,
                                   lean_error *err) {
    const lean_gpu_options want = context_options(cfg);
    *alone = (bm->thread && bm->thread != &thread_tag) || !options_serve(lean_gpu_options_of(bm->g), &want);
    lean_mutex_lock(&bm->lock);
    lean_status st = lean_gpu_check(bm->g, err);
    lean_mutex_unlock(&bm->lock);
    if (!st && cfg->hardware_only && lean_gpu_get_info(bm->g)->software)
        st = LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "gpu: adapter '%s' is a software renderer",
                       lean_gpu_get_info(bm->g)->adapter);
    return st;
}

/* A context: its KV cache, activations and kernels over bm's weights, on bm's device. */
static lean_status gpu_create_config(const lean_model *m, lean_backend_model *bm, const lean_backend_config *cfg,
                                     lean_backend_state **out, lean_error *err) {
    *out = NULL;
    const int32_t n_ctx = cfg->n_ctx, n_batch = cfg->n_batch;
    /* dispatch counts: up to n_batch workgroups along one dimension (65535 at most) */
    if (n_ctx < 1 || n_batch < 1 || n_batch > n_ctx || n_batch > 65535)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "gpu: n_ctx %d, n_batch %d (need 1 <= n_batch <= n_ctx, n_batch <= 65535)",
                         n_ctx, n_batch);
    lean_backend_state *s = lean_calloc(1, sizeof *s);
    if (!s) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "allocating the gpu state");
    *s = (lean_backend_state){.bm = bm, .m = m, .g = bm->g, .n_ctx = n_ctx, .n_batch = n_batch,
                                .exact = cfg->exact};
    atomic_fetch_add(&bm->refs, 1);
    lean_mutex_lock(&bm->lock);
    s->layers = lean_calloc((size_t)m->hp.n_layer, sizeof *s->layers);
    lean_status st = s->layers ? LEAN_OK : LEAN_FAIL(err, LEAN_ERR_NOMEM, "allocating %d gpu layers", m->hp.n_layer);
    if (!st) st = gpu_kv_take(s->g, &bm->pool, m, n_ctx, cfg->n_seq, &s->kv, err);
    if (!st) s->rope_table = s->kv.page->rope;
    if (!st) st = alloc_activations(s, err);
    if (!st) st = make_ends(s, err);
    for (int32_t il = 0; !st && il < m->hp.n_layer; il++) st = make_layer(s, il, err);
    if (!st) st = lean_gpu_finish(s->g, err); /* the writes are done before create returns */
    if (st) free_state(s);
    lean_mutex_unlock(&bm->lock);
    if (st) {
        model_unref(bm);
        return st;
    }
    *out = s;
    return LEAN_OK;
}

/* ---- recording ---- */

/* Layer il; the adapters in force (s->lora) add each adapted weight's term right after its
 * matmul, through the variants of section "LoRA" where an epilogue would read it first. */
static void record_layer(lean_gpu_cmd *c, const lean_backend_state *s, int32_t il, int32_t n, int32_t pos) {
    const gpu_layer *L = &s->layers[il];
    const gpu_lora *lo = s->lora;
    const bool lora_qkv = gpu_lora_on(lo, lora_site(il, LORA_WQ)) || gpu_lora_on(lo, lora_site(il, LORA_WK)) ||
                          gpu_lora_on(lo, lora_site(il, LORA_WV));
    const bool lora_ffn = gpu_lora_on(lo, lora_site(il, LORA_GATE)) || gpu_lora_on(lo, lora_site(il, LORA_UP));
    const bool norm_op = n > 1 || !L->norm_in_matmul; /* adapters read xn, which a normed matmul keeps to itself */
    const bool qkv_plain = lora_qkv && n == 1 && L->kv_in_matmul;
    if (norm_op || lora_qkv) gpu_op_record(c, &L->norm_attn, n);
    for (int k = 0; k < 4; k++) {
        const int i = QKV_ORDER[k];
        if (L->mm[i]) gpu_matmul_record(c, qkv_plain ? L->lora_mm[i] : L->mm[i], n);
    }
    for (int slot = LORA_WQ; slot <= LORA_WV; slot++) gpu_lora_record(c, lo, lora_site(il, slot), n);
    if (n > 1 || !L->kv_in_matmul || qkv_plain) gpu_op_record(c, &L->qkv_post, n);
    gpu_attention_record(c, &L->attn, n, pos);
    gpu_matmul_record(c, L->mm[W_O], n);
    gpu_lora_record(c, lo, lora_site(il, LORA_WO), n);
    if (norm_op || lora_ffn) gpu_op_record(c, &L->norm_ffn, n);
    if (L->mm[W_GATE_UP] && !lora_ffn) {
        gpu_matmul_record(c, L->mm[W_GATE_UP], n);
    } else {
        if (L->mm[W_GATE_UP]) {
            gpu_matmul_record(c, L->lora_mm[W_GATE_UP], n);
        } else {
            gpu_matmul_record(c, L->mm[W_GATE], n);
            gpu_matmul_record(c, L->mm[W_UP], n);
        }
        gpu_lora_record(c, lo, lora_site(il, LORA_GATE), n);
        gpu_lora_record(c, lo, lora_site(il, LORA_UP), n);
        gpu_op_record(c, L->mm[W_GATE_UP] ? &L->swiglu_rows : &L->swiglu, n);
    }
    gpu_matmul_record(c, L->mm[W_DOWN], n);
    gpu_lora_record(c, lo, lora_site(il, LORA_DOWN), n);
}

/* ---- forward ---- */

/* Writes the step uniform for n tokens at pos and begins a command buffer holding the
 * forward pass of the tokens in s->ids: every layer, then (logits) the last token's final
 * norm and logits into s->logits. */
static lean_status begin_forward(lean_backend_state *s, int32_t n, int32_t pos, bool logits, lean_gpu_cmd **c,
                                 lean_error *err) {
    uint32_t step[4];
    gpu_step_words(n, pos, step);
    lean_status st = lean_gpu_buf_write(s->g, s->step, 0, step, sizeof step, err);
    if (!st) st = lean_gpu_begin(s->g, c, err);
    if (st) return st;
    gpu_get_rows_record(*c, s->embed, n);
    gpu_lora_record(*c, s->lora, lora_site_embd(&s->m->hp), n);
    for (int32_t il = 0; il < s->m->hp.n_layer; il++) record_layer(*c, s, il, n, pos);
    if (logits) {
        gpu_op_record(*c, &s->norm_out, n);
        gpu_matmul_record(*c, s->mm_out, 1);
        gpu_lora_record(*c, s->lora, lora_site_output(&s->m->hp), 1);
    }
    return LEAN_OK;
}

/* The logits come back through logits_rb, copied and mapped with the forward pass. Pump mode:
 * LEAN_PENDING leaves the map in flight (logits_wait), and the call made again (the same ids,
 * n, pos: session.c) only takes it. */
lean_status gpu_forward(lean_backend_state *s, const int32_t *ids, int32_t n, int32_t pos, float *logits,
                        lean_error *err) {
    if (n < 1 || n > s->n_batch || pos < 0 || pos > s->n_ctx - n)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "gpu: %d tokens at position %d (n_batch %d, n_ctx %d)", n, pos,
                         s->n_batch, s->n_ctx);
    if (s->gen.on) return LEAN_FAIL(err, LEAN_ERR_ARG, "gpu: forward during a generation");
    const uint64_t bytes = (uint64_t)s->m->hp.n_vocab * sizeof(float);
    lean_status st = LEAN_OK;
    if (!s->logits_wait) {
        lean_gpu_cmd *c = NULL;
        /* ids are >= 0 (lean_ctx checks them), so their int32 bits are the u32 the kernels read */
        st = lean_gpu_buf_write(s->g, s->ids, 0, ids, (uint64_t)n * 4, err);
        if (!st) st = begin_forward(s, n, pos, logits != NULL, &c, err);
        if (st) return st;
        if (logits) lean_gpu_copy(c, s->logits, 0, s->logits_rb, 0, bytes);
        st = lean_gpu_submit_step(c, err);
        if (!st && logits) st = lean_gpu_map_begin(s->logits_rb, err);
        if (st || !logits) return st;
    }
    st = lean_gpu_map_take(s->logits_rb, logits, bytes, err);
    s->logits_wait = st == LEAN_PENDING;
    return st;
}

/* ---- generation ----
 *
 * Why these block sizes: steps are queued ahead of the host so the GPU never waits for it: a
 * greedy reply is read back a block of ids at a time with two blocks in flight, so the GPU
 * always has the next block's steps queued while the host waits for one map; a sampled reply
 * (chat) maps every id as its step is submitted, several steps ahead, so text streams token by
 * token. But a queued step cannot be recalled: after a stop (an end-of-generation id, a stop
 * string, an abort) the steps in flight still run, and the next call waits behind them. So the
 * depth is GPU time, not a count (gen_pace): a greedy block is what the GPU runs in about
 * GEN_AHEAD_MS (16 ids on a fast GPU, where a step takes under 1.5 ms; one on a software
 * adapter, where it takes a second and 32 queued steps made the next chat turn wait half a
 * minute), a sampled flight likewise, 2 to 8 steps. A generation starts at one id per block,
 * so the first id comes after one step. The ids do not depend on it; their cache rows past a
 * stop lie past the caller's position. A masked reply (a grammar's) cannot run ahead: each step
 * waits for its mask, which follows the id drawn before; it writes n_vocab / 8 bytes of mask and
 * reads back one id, never the logits. */

double gpu_now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* The depth for a step time of step_ms: greedy ids per block in 1 .. GEN_BLOCK_MAX, or sampled
 * blocks in flight in 2 .. GEN_SAMPLED_FLIGHT, as many as take GEN_AHEAD_MS (lean_gpu_options'
 * gen_pace fixes it). */
static int32_t gen_pace(lean_backend_state *s, bool greedy, double step_ms) {
    const uint32_t fixed = lean_gpu_options_of(s->g)->gen_pace; /* a test's: no timing */
    if (fixed) step_ms = GEN_AHEAD_MS / fixed;
    const int32_t lo = greedy ? 1 : 2, hi = greedy ? GEN_BLOCK_MAX : GEN_SAMPLED_FLIGHT;
    const double n = step_ms > 0 ? GEN_AHEAD_MS / step_ms : hi;
    return n >= hi ? hi : n <= lo ? lo : (int32_t)n;
}

/* Whether a sampler made for a serves b, but for the bias (set on every generation). */
static bool same_cfg(const sampler_cfg *a, const sampler_cfg *b) {
    return a->greedy == b->greedy && a->use_penalty == b->use_penalty && a->penalty == b->penalty &&
           a->inv_penalty == b->inv_penalty && a->temperature == b->temperature &&
           a->inv_temperature == b->inv_temperature && a->top_k == b->top_k && a->use_top_p == b->use_top_p &&
           a->top_p == b->top_p && a->top_p_f == b->top_p_f && a->repeat_last_n == b->repeat_last_n &&
           a->seed == b->seed;
}

/* The sampler for cfg (made once per settings; again for a bias on one made without room for
 * it) and the read-back slots (made once). */
static lean_status gen_prepare(lean_backend_state *s, const sampler_cfg *cfg, lean_error *err) {
    gpu_gen *G = &s->gen;
    int *checked = &s->bm->sampler_checked; /* the device's arithmetic: one verdict for every context */
    lean_status st = LEAN_OK;
    if (*checked == 0) { /* a verdict on the arithmetic is kept; a failure (a lost device) is not */
        if (!s->bm->check) st = gpu_sampler_check_begin(s->g, &s->bm->check, err);
        if (s->bm->check) { /* pump mode: resumed by the call made again */
            st = gpu_sampler_check_end(s->bm->check, err);
            if (st == LEAN_PENDING) return st;
            s->bm->check = NULL;
        }
        if (st != LEAN_OK && st != LEAN_ERR_UNSUPPORTED) return st;
        *checked = st == LEAN_OK ? 1 : -1;
        st = LEAN_OK;
    }
    if (*checked < 0)
        return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "gpu: this adapter's arithmetic does not reproduce the CPU's draw");
    if (G->smp && (!same_cfg(&G->cfg, cfg) || (cfg->n_bias > 0 && !gpu_sampler_takes_bias(G->smp)))) {
        gpu_sampler_free(G->smp);
        G->smp = NULL;
    }
    if (!G->smp) {
        st = gpu_sampler_create(s->g, cfg, s->m->hp.n_vocab, s->logits, 0, s->ids, 0, &G->smp, err);
        if (st) return st;
        G->cfg = *cfg;
        G->cfg.bias = NULL; /* the caller's; same_cfg leaves the bias to gpu_sampler_set_bias */
        G->cfg.n_bias = 0;
    }
    st = gpu_sampler_set_bias(G->smp, cfg->bias, cfg->n_bias, err);
    for (int k = 0; !st && k < GEN_SLOTS; k++) /* the missing ones: an earlier call may have failed midway */
        if (!G->slot[k])
            st = lean_gpu_buf_create(s->g, GEN_BLOCK_MAX * 4, LEAN_GPU_READBACK, "generated ids", &G->slot[k], err);
    return st;
}

static lean_status gpu_gen_begin(lean_backend_state *s, const sampler_cfg *cfg, const int32_t *history,
                                 int32_t n_history, int32_t pos, int32_t max_ids, bool masked, lean_error *err) {
    gpu_gen *G = &s->gen;
    if (G->on) return LEAN_FAIL(err, LEAN_ERR_ARG, "gpu: a generation is already in progress");
    if (lean_gpu_options_of(s->g)->no_resident) /* session.c then draws on the host */
        return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "gpu: resident generation off (lean_gpu_options)");
    if (max_ids < 1 || pos < 1 || pos > s->n_ctx || max_ids > s->n_ctx - pos + 1)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "gpu: %d draws from position %d (n_ctx %d)", max_ids, pos, s->n_ctx);
    lean_status st = gen_prepare(s, cfg, err);
    if (!st) st = gpu_sampler_reset(G->smp, (uint32_t)pos, history, n_history, err);
    if (!st && !masked) st = gpu_sampler_set_mask(G->smp, NULL, err);
    if (st) return st;
    G->on = true;
    G->greedy = cfg->greedy;
    G->masked = masked; /* one step at a time: each mask follows the id drawn before */
    G->stepwise = false;
    G->behind = false;
    G->pace = gen_pace(s, G->greedy, 1e9); /* the shallowest until a step is timed */
    G->pos0 = pos;
    G->limit = max_ids;
    G->n_sub = G->n_read = G->n_out = G->b_sub = G->b_read = G->ready_n = 0;
    G->taken_ms = gpu_now_ms();
    return LEAN_OK;
}

/* Submits step j = G->n_sub into block G->b_sub's slot at index i: decode the last drawn id
 * (j > 0), draw (under mask when masked), copy the id to the slot. */
static lean_status gen_submit(lean_backend_state *s, int32_t i, const uint32_t *mask, lean_error *err) {
    gpu_gen *G = &s->gen;
    const int32_t j = G->n_sub;
    lean_gpu_cmd *c = NULL;
    lean_status st = G->masked ? gpu_sampler_set_mask(G->smp, mask, err) : LEAN_OK;
    /* after batched draws (gpu_sampler_rows: no penalty, so no window to restore) */
    if (!st && G->behind) st = gpu_sampler_reset(G->smp, (uint32_t)(G->pos0 + j), NULL, 0, err);
    if (st) return st;
    G->behind = false;
    st = j > 0 ? begin_forward(s, 1, G->pos0 + j - 1, true, &c, err) : lean_gpu_begin(s->g, &c, err);
    if (st) return st;
    gpu_sampler_record(c, G->smp);
    lean_gpu_copy(c, s->ids, 0, G->slot[G->b_sub % GEN_SLOTS], (uint64_t)i * 4, 4);
    if ((st = lean_gpu_submit_step(c, err))) return st;
    G->n_sub++;
    return LEAN_OK;
}

/* Submits the next block (its size from the pace, within the limit) and maps its slot. */
static lean_status gen_submit_block(lean_backend_state *s, const uint32_t *mask, lean_error *err) {
    gpu_gen *G = &s->gen;
    const int k = G->b_sub % GEN_SLOTS;
    const int32_t want = G->greedy && !G->masked && !G->stepwise ? G->pace : 1, left = G->limit - G->n_sub;
    const int32_t n = want < left ? want : left;
    G->slot_t0_ms[k] = gpu_now_ms();
    lean_status st = LEAN_OK;
    for (int32_t i = 0; !st && i < n; i++) st = gen_submit(s, i, mask, err);
    if (!st) st = lean_gpu_map_begin(G->slot[k], err);
    if (st) return st; /* only lean_gen_end follows a failure */
    G->mapping[k] = true;
    G->slot_n[k] = n;
    G->b_sub++;
    return LEAN_OK;
}

/* Hands out the next id, taking the oldest block submitted when none is ready (one must be). */
lean_status gpu_gen_take(lean_backend_state *s, int32_t *id, lean_error *err) {
    gpu_gen *G = &s->gen;
    if (G->n_out == G->n_read) {
        const int k = G->b_read % GEN_SLOTS;
        lean_status st = G->shared[k] ? gpu_step_ids_take(G->shared[k], G->shared_row[k], G->ready, err)
                                      : lean_gpu_map_take(G->slot[k], G->ready, (uint64_t)G->slot_n[k] * 4, err);
        if (st == LEAN_PENDING) return st; /* pump mode: every step stays submitted, the map in flight */
        G->mapping[k] = false;
        if (G->shared[k]) gpu_step_ids_release(G->shared[k]), G->shared[k] = NULL;
        if (st) return st;
        /* the block ran from its submit or the last take, whichever came later, until now */
        const double t = gpu_now_ms(), t0 = G->slot_t0_ms[k] > G->taken_ms ? G->slot_t0_ms[k] : G->taken_ms;
        G->pace = gen_pace(s, G->greedy, (t - t0) / G->slot_n[k]);
        G->taken_ms = t;
        G->ready_n = G->slot_n[k];
        G->n_read += G->ready_n;
        G->b_read++;
    }
    const uint32_t u = (uint32_t)G->ready[G->ready_n - (G->n_read - G->n_out)];
    if (u == GPU_SAMPLE_NO_ID || u >= (uint32_t)s->m->hp.n_vocab)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "gpu: no id has a finite logit at position %d", G->pos0 + G->n_out);
    *id = (int32_t)u;
    G->n_out++;
    return LEAN_OK;
}

lean_status gpu_gen_next(lean_backend_state *s, const uint32_t *mask, int32_t *id, lean_error *err) {
    gpu_gen *G = &s->gen;
    if (!G->on || G->n_out >= G->limit) return LEAN_FAIL(err, LEAN_ERR_ARG, "gpu: no draw left in this generation");
    if (G->n_out == G->n_read) { /* submit blocks up to the flight (stepwise: one step ahead), then take */
        lean_status st = LEAN_OK;
        const int32_t flight = G->masked ? 1 : G->stepwise || G->greedy ? GEN_GREEDY_FLIGHT : G->pace;
        while (!st && G->n_sub < G->limit && G->b_sub - G->b_read < flight) st = gen_submit_block(s, mask, err);
        if (st) return st;
    }
    return gpu_gen_take(s, id, err);
}

static void gpu_gen_end(lean_backend_state *s) {
    gpu_gen *G = &s->gen;
    if (s->logits_wait) lean_gpu_map_drop(s->logits_rb);
    s->logits_wait = false;
    for (int k = 0; k < GEN_SLOTS; k++) {
        if (G->mapping[k]) lean_gpu_map_drop(G->slot[k]);
        if (G->shared[k]) gpu_step_ids_release(G->shared[k]);
    }
    memset(G->mapping, 0, sizeof G->mapping);
    memset(G->shared, 0, sizeof G->shared);
    G->on = false;
}

static void gen_free(lean_backend_state *s) {
    gpu_gen_end(s);
    gpu_sampler_free(s->gen.smp);
    for (int k = 0; k < GEN_SLOTS; k++) lean_gpu_buf_free(s->gen.slot[k]);
}

/* ---- LoRA (gpu/lora.h) ----
 * An adapter's term is added to its weight's product before anything reads it. Where decode
 * fuses an epilogue into the matmul (the q|k|v epilogue's RoPE and cache writes, a stacked gate,
 * up's SwiGLU) an adapted layer takes the variants made here instead, and the epilogue's own
 * dispatch after the terms; where a normed matmul makes its input itself, the norm's dispatch
 * runs for the adapters' xn (record_layer). A set costs its upload (gpu_lora_create) and, the
 * first time a layer needs them, these kernels; the same set again costs nothing. */

static bool set_on(const lora_set *set, int32_t il, int slot) {
    int32_t n;
    lora_terms(set, lora_site(il, slot), &n);
    return n > 0;
}

/* Layer il's variants for set, those not made yet. */
static lean_status make_lora_variants(lean_backend_state *s, int32_t il, const lora_set *set, lean_error *err) {
    gpu_layer *L = &s->layers[il];
    const gpu_layer_weights *W = &s->bm->layers[il];
    const lean_hparams *hp = &s->m->hp;
    lean_status st = LEAN_OK;
    if (L->kv_in_matmul && (set_on(set, il, LORA_WQ) || set_on(set, il, LORA_WK) || set_on(set, il, LORA_WV)))
        st = gpu_make_plain_qkv(s, il, err);
    if (W->w[W_GATE_UP].buf && (set_on(set, il, LORA_GATE) || set_on(set, il, LORA_UP))) {
        const gpu_mm_in in = normed_input(s, L, W->ffn_norm);
        if (!st && !s->gu) st = gpu_new_buf(s, (uint64_t)s->n_batch, 2 * (uint64_t)hp->n_ff, "gate|up", &s->gu, err);
        if (!st && !L->lora_mm[W_GATE_UP])
            st = gpu_matmul_create(s->g, &W->w[W_GATE_UP], s->n_batch, s->step, &in,
                                   &(gpu_mm_out){.y = s->gu, .part = s->part}, &L->lora_mm[W_GATE_UP], err);
        if (!st && !L->swiglu_rows.bg) {
            gpu_op_free(&L->swiglu_rows);
            st = gpu_swiglu_rows_create(s->g, s->gu, s->gate, hp->n_ff, &L->swiglu_rows, err);
        }
    }
    return st;
}

/* Where site i reads and adds (gpu_lora_io), by the layout of forward_impl.h's state. */
static gpu_lora_io lora_io(const lean_backend_state *s, int32_t i) {
    const lean_hparams *hp = &s->m->hp;
    const uint32_t d = (uint32_t)hp->n_embd, qd = (uint32_t)lean_q_dim(hp), kvd = (uint32_t)lean_kv_dim(hp),
                   ff = (uint32_t)hp->n_ff;
    if (i == lora_site_embd(hp)) /* the ids the embedding reads, a generation's draws included */
        return (gpu_lora_io){.gather = true, .x = s->ids, .y = s->x, .y_stride = d, .rows = d, .max_tok = s->n_batch};
    if (i == lora_site_output(hp))
        return (gpu_lora_io){.x = s->x_last, .x_stride = d, .y = s->logits, .y_stride = (uint32_t)hp->n_vocab,
                             .rows = (uint32_t)hp->n_vocab, .max_tok = 1};
    const bool gu = s->bm->layers[i / LORA_N_SLOTS].w[W_GATE_UP].buf != NULL;
    gpu_lora_io io = {.x = s->xn, .x_stride = d, .y = s->qkv, .y_stride = qd + 2 * kvd, .rows = qd,
                      .max_tok = s->n_batch};
    switch (i % LORA_N_SLOTS) {
    case LORA_WK: io.y_col = qd, io.rows = kvd; break;
    case LORA_WV: io.y_col = qd + kvd, io.rows = kvd; break;
    case LORA_WO: io.x = s->att, io.x_stride = qd, io.y = s->x, io.y_stride = d, io.rows = d; break;
    case LORA_GATE: io.y = gu ? s->gu : s->gate, io.y_stride = gu ? 2 * ff : ff, io.rows = ff; break;
    case LORA_UP: io.y = gu ? s->gu : s->up, io.y_stride = gu ? 2 * ff : ff, io.y_col = gu ? ff : 0, io.rows = ff; break;
    case LORA_DOWN: io.x = s->gate, io.x_stride = ff, io.y = s->x, io.y_stride = d, io.rows = d; break;
    default: break; /* LORA_WQ */
    }
    return io;
}

static lean_status gpu_set_lora(lean_backend_state *s, const lora_set *set, lean_error *err) {
    if (lora_set_same(set, s->lora_set)) {
        s->lora_set = set;
        return LEAN_OK;
    }
    gpu_lora *l = NULL;
    gpu_lora_io *io = set ? lean_calloc((size_t)set->n_sites, sizeof *io) : NULL;
    lean_status st = !set || io ? LEAN_OK : LEAN_FAIL(err, LEAN_ERR_NOMEM, "gpu lora: %d sites", set->n_sites);
    for (int32_t il = 0; set && !st && il < s->m->hp.n_layer; il++) st = make_lora_variants(s, il, set, err);
    for (int32_t i = 0; set && !st && i < set->n_sites; i++) io[i] = lora_io(s, i);
    if (set && !st) st = gpu_lora_create(s->g, set, io, &l, err);
    lean_free(io);
    if (st) return st; /* the variants made stay, for the next set */
    gpu_lora_free(s->lora);
    s->lora = l;
    s->lora_set = set;
    return LEAN_OK;
}

/* ---- profile ---- */

static lean_status gpu_profile(lean_backend_state *s, int64_t steps, char *text, size_t cap, lean_error *err) {
    if (!lean_gpu_profiling(s->g))
        return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "gpu: not profiling (create the context with lean_ctx_params.profile)");
    lean_gpu_profile_report(s->g, steps, text, cap);
    return LEAN_OK;
}

/* ---- for tests (test_hooks.h) ---- */

lean_gpu *lean_backend_gpu_device(lean_backend_state *s) { return s->g; }
lean_gpu_buf *lean_backend_gpu_logits(lean_backend_state *s) { return s->logits; }
int64_t lean_backend_gpu_batch_rows(lean_backend_state *s) { return s->batch_rows; }
int64_t lean_backend_gpu_batch_attention(lean_backend_state *s) { return s->batch_attn; }
uint64_t lean_backend_gpu_kv_page(lean_backend_state *s, int32_t *cap) {
    *cap = s->kv.page->cap;
    return s->kv.page->id;
}
int32_t lean_backend_gpu_gen_ahead(lean_backend_state *s) { return s->gen.on ? s->gen.n_sub - s->gen.n_out : 0; }

static void gpu_describe(const lean_backend_state *s, char *text, size_t cap) {
    const lean_gpu_info *in = lean_gpu_get_info(s->g);
    snprintf(text, cap, "gpu (%s, %s)", in->adapter, in->backend);
}

/* ---- KV access (backend.h: snapshots and forks) ---- */

static lean_gpu_buf *kv_buf(lean_backend_state *s, int32_t il, int kind) {
    return kind ? s->layers[il].v_cache : s->layers[il].k_cache;
}

/* Blocking reads: in pump mode (no JSPI) lean_gpu_buf_read refuses, saying so. */
static lean_status gpu_kv_read(lean_backend_state *s, int32_t il, int kind, int32_t n, void *dst, lean_error *err) {
    const uint64_t bytes = (uint64_t)n * lean_kv_dim(&s->m->hp) * 4;
    lean_mutex_lock(&s->bm->lock);
    lean_status st = lean_gpu_buf_read(s->g, kv_buf(s, il, kind), 0, dst, bytes, err);
    lean_mutex_unlock(&s->bm->lock);
    return st;
}

static lean_status gpu_kv_write(lean_backend_state *s, int32_t il, int kind, int32_t n, const void *src,
                                lean_error *err) {
    const uint64_t bytes = (uint64_t)n * lean_kv_dim(&s->m->hp) * 4;
    lean_mutex_lock(&s->bm->lock);
    lean_status st = lean_gpu_buf_write(s->g, kv_buf(s, il, kind), 0, src, bytes, err);
    lean_mutex_unlock(&s->bm->lock);
    return st;
}

/* Contexts on one device (one model part) copy on it: one submit of 2 n_layer copies. */
static lean_status gpu_kv_copy(lean_backend_state *dst, lean_backend_state *src, int32_t n, lean_error *err) {
    if (dst->g != src->g)
        return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "gpu: the two contexts are on different devices");
    const uint64_t bytes = (uint64_t)n * lean_kv_dim(&dst->m->hp) * 4;
    if (!bytes) return LEAN_OK;
    lean_mutex_lock(&dst->bm->lock);
    lean_gpu_cmd *c = NULL;
    lean_status st = lean_gpu_begin(dst->g, &c, err);
    for (int32_t il = 0; !st && il < dst->m->hp.n_layer; il++)
        for (int kind = 0; kind < 2; kind++) lean_gpu_copy(c, kv_buf(src, il, kind), 0, kv_buf(dst, il, kind), 0, bytes);
    if (!st) st = lean_gpu_submit(c, err);
    lean_mutex_unlock(&dst->bm->lock);
    return st;
}

/* ---- table: each call on a context holds the device's lock (the model's part) ---- */

static lean_status locked_forward(lean_backend_state *s, const int32_t *ids, int32_t n, int32_t pos, float *logits,
                                  lean_error *err) {
    lean_mutex_lock(&s->bm->lock);
    lean_status st = gpu_forward(s, ids, n, pos, logits, err);
    lean_mutex_unlock(&s->bm->lock);
    return st;
}

static lean_status locked_forward_batch(lean_backend_state *const *s, const int32_t *ids, const int32_t *pos,
                                        int32_t n, float *logits, lean_error *err) {
    lean_mutex_lock(&s[0]->bm->lock); /* every row's: batch_check */
    lean_status st = gpu_forward_batch(s, ids, pos, n, logits, err);
    lean_mutex_unlock(&s[0]->bm->lock);
    return st;
}

static lean_status locked_gen_begin(lean_backend_state *s, const sampler_cfg *cfg, const int32_t *history,
                                    int32_t n_history, int32_t pos, int32_t max_ids, bool masked, lean_error *err) {
    lean_mutex_lock(&s->bm->lock);
    lean_status st = gpu_gen_begin(s, cfg, history, n_history, pos, max_ids, masked, err);
    lean_mutex_unlock(&s->bm->lock);
    return st;
}

static lean_status locked_gen_next(lean_backend_state *s, const uint32_t *mask, int32_t *id, lean_error *err) {
    lean_mutex_lock(&s->bm->lock);
    lean_status st = gpu_gen_next(s, mask, id, err);
    lean_mutex_unlock(&s->bm->lock);
    return st;
}

static lean_status locked_gen_next_batch(lean_backend_state *const *s, const uint32_t *const *masks, int32_t n,
                                         int32_t *ids, lean_error *err) {
    lean_mutex_lock(&s[0]->bm->lock); /* every row's: batch_check */
    lean_status st = gpu_gen_next_batch(s, masks, n, ids, err);
    lean_mutex_unlock(&s[0]->bm->lock);
    return st;
}

static void locked_gen_end(lean_backend_state *s) {
    lean_mutex_lock(&s->bm->lock);
    gpu_gen_end(s);
    lean_mutex_unlock(&s->bm->lock);
}

static lean_status locked_settle(lean_backend_state *s, lean_error *err) {
    lean_mutex_lock(&s->bm->lock);
    lean_status st = lean_gpu_settle(s->g, err);
    lean_mutex_unlock(&s->bm->lock);
    return st;
}

static lean_status locked_set_lora(lean_backend_state *s, const lora_set *set, lean_error *err) {
    lean_mutex_lock(&s->bm->lock);
    lean_status st = gpu_set_lora(s, set, err);
    lean_mutex_unlock(&s->bm->lock);
    return st;
}

static lean_status locked_profile(lean_backend_state *s, int64_t steps, char *text, size_t cap, lean_error *err) {
    lean_mutex_lock(&s->bm->lock);
    lean_status st = gpu_profile(s, steps, text, cap, err);
    lean_mutex_unlock(&s->bm->lock);
    return st;
}

const lean_backend lean_backend_gpu = {
    .name = "gpu",
    .n_batch_default = 512,
    .create_config = gpu_create_config,
    .model_create = gpu_model_create,
    .model_check = gpu_model_check,
    .model_release = model_unref,
    .model_finish = gpu_model_finish,
    .forward = locked_forward,
    .destroy = gpu_destroy,
    .batch_check = gpu_batch_check,
    .forward_batch = locked_forward_batch,
    .gen_begin = locked_gen_begin,
    .gen_next = locked_gen_next,
    .gen_end = locked_gen_end,
    .gen_next_batch = locked_gen_next_batch,
    .settle = locked_settle,
    .profile = locked_profile,
    .describe = gpu_describe,
    .kv_read = gpu_kv_read,
    .kv_write = gpu_kv_write,
    .kv_copy = gpu_kv_copy,
    .set_lora = locked_set_lora,
};
