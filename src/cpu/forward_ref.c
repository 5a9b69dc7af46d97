/* forward_ref.c — lean_backend_cpu_ref: the plain, correct CPU forward pass.
 *
 * What it does: runs a batch of n tokens at positions pos..pos+n through a llama /
 * qwen2 / qwen3 decoder, writing their keys and values into an F32 KV cache, and
 * (when asked) the next-token logits of the last token. It is the reference every
 * faster backend is held to, so it reads like the math: one op per line, float32,
 * sums in a fixed order, single-threaded (ops_ref.c holds the kernels).
 * What it does not: threads, SIMD, or range checks on ids (lean_ctx does those).
 *
 * Per layer, with x the residual stream (n, n_embd):
 *   xn = rmsnorm(x) * attn_norm
 *   q = xn Wq^T (+bq)   k = xn Wk^T (+bk)   v = xn Wv^T (+bv)     (qwen2 biases)
 *   q, k = rmsnorm per head (qwen3)  ->  RoPE at each token's position
 *   att = softmax(q k^T / sqrt(head_dim), causal) v               (grouped-query)
 *   x += att Wo^T
 *   xn = rmsnorm(x) * ffn_norm
 *   x += (silu(xn Wgate^T) * (xn Wup^T)) Wdown^T
 * then logits = (rmsnorm(x_last) * output_norm) Wout^T.
 * With LoRA adapters (core/lora.h), each product y = xn W^T above becomes
 *   y = xn W^T + sum over the weight's terms: scale * (xn A^T) B^T
 * added to y before anything else touches it (qwen2's bias, SwiGLU, the residual add), and
 * the embedding of id becomes token_embd[id] + sum over its terms: scale * B A[id].
 *
 * Sections: state · create / destroy · blocks (embed, attention, ffn) · forward · LoRA · table
 */
#include "core/backend.h"
#include "core/rope.h"

#include "cpu/ops_ref.h"

#include <math.h>

/* a*b + c is never fused into an fma, so every ISA rounds the same way (gcc does not
 * contract in ISO C mode; clang is told so here). */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif
#include <string.h>

/* ---- state ---- */

/* One sequence. Everything is allocated at create, sized for n_batch tokens; a forward
 * call allocates nothing. q_dim = n_head * head_dim, kv_dim = n_head_kv * head_dim. */
struct lean_backend_state {
    const lean_model *m;
    int32_t n_ctx, n_batch;
    /* KV cache, F32. Rows of one layer are token-major like the activations, so a
     * batch's new keys/values are computed straight into rows pos..pos+n. */
    float *k_cache;   /* (n_layer, n_ctx, kv_dim) keys, after RoPE */
    float *v_cache;   /* (n_layer, n_ctx, kv_dim) values */
    float *x;         /* (n_batch, n_embd) residual stream */
    float *xn;        /* (n_batch, n_embd) normed input of the current sub-block */
    float *proj;      /* (n_batch, n_embd) output of Wo or Wdown, added to x */
    float *q;         /* (n_batch, q_dim) queries, after RoPE */
    float *att;       /* (n_batch, q_dim) attention output, heads concatenated */
    float *gate, *up; /* (n_batch, n_ff) FFN hidden; gate becomes silu(gate) * up */
    float *scores;    /* (n_ctx) attention weights of one head of one token */
    float *rope_cos;  /* (n_batch, head_dim / 2) angles of each token's position */
    float *rope_sin;  /* (n_batch, head_dim / 2) */
    float *row;       /* (max_cols) one dequantized weight row, see ref_matmul */
    const lora_set *lora; /* the context's adapters (NULL: none) */
    float *lora_tmp;  /* (n_batch, lora->max_site_rank) A x of one weight's terms */
    float *lora_row;  /* (max(max_cols, lora->max_rank)) a dequantized row of A or B */
};

static const float *f32(const lean_tensor *t) { return (const float *)t->data; }

/* ---- create / destroy ---- */

/* *out = a zeroed array of a * b * c floats; sizes checked for overflow first. */
static lean_status alloc_f32(float **out, uint64_t a, uint64_t b, uint64_t c, const char *what,
                             lean_error *err) {
    uint64_t n, bytes;
    if (!lean_mul_u64(a, b, &n) || !lean_mul_u64(n, c, &n) ||
        !lean_mul_u64(n, sizeof(float), &bytes) || bytes > SIZE_MAX)
        return LEAN_FAIL(err, LEAN_ERR_NOMEM, "%s: %llu x %llu x %llu floats do not fit in memory",
                         what, (unsigned long long)a, (unsigned long long)b, (unsigned long long)c);
    *out = lean_calloc((size_t)n, sizeof(float));
    if (!*out)
        return LEAN_FAIL(err, LEAN_ERR_NOMEM, "allocating %s (%llu bytes)", what,
                         (unsigned long long)bytes);
    return LEAN_OK;
}

static void cpu_destroy(lean_backend_state *s) {
    if (!s) return;
    float *bufs[] = {s->k_cache, s->v_cache, s->x,      s->xn,       s->proj,     s->q,  s->att,
                     s->gate,    s->up,      s->scores, s->rope_cos, s->rope_sin, s->row,
                     s->lora_tmp, s->lora_row};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) lean_free(bufs[i]);
    lean_free(s);
}

static lean_status cpu_create(const lean_model *m, int32_t n_ctx, int32_t n_batch,
                              lean_backend_state **out, lean_error *err) {
    *out = NULL;
    if (n_ctx < 1 || n_batch < 1 || n_batch > n_ctx)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "cpu_ref: n_ctx %d, n_batch %d (need 1 <= n_batch <= n_ctx)",
                         n_ctx, n_batch);
    const lean_hparams *hp = &m->hp;
    lean_backend_state *s = lean_calloc(1, sizeof *s);
    if (!s) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "allocating the cpu_ref state");
    s->m = m;
    s->n_ctx = n_ctx;
    s->n_batch = n_batch;
    const uint64_t L = (uint64_t)hp->n_layer, C = (uint64_t)n_ctx, B = (uint64_t)n_batch;
    const uint64_t d = (uint64_t)hp->n_embd, qd = (uint64_t)lean_q_dim(hp),
                   kvd = (uint64_t)lean_kv_dim(hp), ff = (uint64_t)hp->n_ff,
                   half = (uint64_t)hp->head_dim / 2;
    const uint64_t max_cols = (uint64_t)lean_max_cols(hp);
    lean_status st;
    if ((st = alloc_f32(&s->k_cache, L, C, kvd, "the key cache", err)) ||
        (st = alloc_f32(&s->v_cache, L, C, kvd, "the value cache", err)) ||
        (st = alloc_f32(&s->x, B, d, 1, "activations", err)) ||
        (st = alloc_f32(&s->xn, B, d, 1, "activations", err)) ||
        (st = alloc_f32(&s->proj, B, d, 1, "activations", err)) ||
        (st = alloc_f32(&s->q, B, qd, 1, "activations", err)) ||
        (st = alloc_f32(&s->att, B, qd, 1, "activations", err)) ||
        (st = alloc_f32(&s->gate, B, ff, 1, "activations", err)) ||
        (st = alloc_f32(&s->up, B, ff, 1, "activations", err)) ||
        (st = alloc_f32(&s->scores, C, 1, 1, "attention scores", err)) ||
        (st = alloc_f32(&s->rope_cos, B, half, 1, "RoPE angles", err)) ||
        (st = alloc_f32(&s->rope_sin, B, half, 1, "RoPE angles", err)) ||
        (st = alloc_f32(&s->row, max_cols, 1, 1, "a weight row", err))) {
        cpu_destroy(s);
        return st;
    }
    *out = s;
    return LEAN_OK;
}

/* ---- blocks ---- */

/* out (n, rows) = x (n, cols) W^T, plus the LoRA terms of W (site; lora.h). */
static void matmul(lean_backend_state *s, float *out, const float *x, int32_t n, const lean_tensor *w, int32_t site) {
    ref_matmul(out, x, n, w, s->row);
    int32_t n_terms;
    const lora_term *terms = lora_terms(s->lora, site, &n_terms);
    if (n_terms == 0) return;
    ref_lora_down(s->lora_tmp, x, n, terms, n_terms, s->lora_row);
    ref_lora_up(out, w->ne[1], n, s->lora_tmp, terms, n_terms, 0, w->ne[1], s->lora_row);
}

/* x (n, n_embd) = the embedding rows of ids, plus the embedding's LoRA terms. */
static void embed(lean_backend_state *s, const int32_t *ids, int32_t n) {
    const int32_t d = s->m->hp.n_embd;
    for (int32_t t = 0; t < n; t++) ref_embed_row(s->x + (int64_t)t * d, &s->m->tok_embd, ids[t]);
    int32_t n_terms;
    const lora_term *terms = lora_terms(s->lora, lora_site_embd(&s->m->hp), &n_terms);
    ref_lora_embed(s->x, d, ids, n, terms, n_terms, s->lora_tmp, s->lora_row);
}

/* xn (n, n_embd) = rmsnorm of each token's x, times w (n_embd). */
static void norm_tokens(lean_backend_state *s, const lean_tensor *w, int32_t n) {
    const int32_t d = s->m->hp.n_embd;
    for (int32_t t = 0; t < n; t++)
        ref_rmsnorm(s->xn + (int64_t)t * d, s->x + (int64_t)t * d, f32(w), d, s->m->hp.rms_eps);
}

/* x (n, n_embd) += proj (n, n_embd) */
static void add_residual(lean_backend_state *s, int32_t n) {
    const int64_t count = (int64_t)n * s->m->hp.n_embd;
    for (int64_t i = 0; i < count; i++) s->x[i] += s->proj[i];
}

/* Angles for positions pos..pos+n, shared by every layer of this call. */
static void rope_angles(lean_backend_state *s, int32_t n, int32_t pos) {
    const lean_hparams *hp = &s->m->hp;
    const int32_t half = hp->head_dim / 2;
    const float *ff = s->m->rope_freqs.data ? f32(&s->m->rope_freqs) : NULL;
    for (int32_t t = 0; t < n; t++)
        lean_rope_angles(s->rope_cos + (int64_t)t * half, s->rope_sin + (int64_t)t * half, pos + t,
                         hp->head_dim, hp->rope_base, ff);
}

/* Per-head RMSNorm of x (n_heads, head_dim) with w (head_dim): qwen3's q/k norm. */
static void norm_heads(float *x, int32_t n_heads, const lean_tensor *w, const lean_hparams *hp) {
    for (int32_t h = 0; h < n_heads; h++) {
        float *xh = x + (int64_t)h * hp->head_dim;
        ref_rmsnorm(xh, xh, f32(w), hp->head_dim, hp->rms_eps);
    }
}

/* att (n_head * head_dim) for one token at position p, whose query is q (q_dim):
 * each head attends to the keys/values at positions 0..p of the KV head it shares
 * (n_head / n_head_kv query heads per KV head). kc, vc: (n_ctx, kv_dim) of one layer. */
static void attend_token(lean_backend_state *s, const float *q, const float *kc, const float *vc,
                         int32_t p, float *att) {
    const lean_hparams *hp = &s->m->hp;
    const int32_t hd = hp->head_dim, kv_dim = lean_kv_dim(hp), group = hp->n_head / hp->n_head_kv;
    const float scale = 1.0f / sqrtf((float)hd);
    for (int32_t h = 0; h < hp->n_head; h++) {
        const float *qh = q + (int64_t)h * hd;       /* (head_dim) */
        const int64_t kv_off = (int64_t)(h / group) * hd; /* this head's slice of a cache row */
        float *out = att + (int64_t)h * hd;          /* (head_dim) */
        for (int32_t j = 0; j <= p; j++)
            s->scores[j] = ref_dot(qh, kc + (int64_t)j * kv_dim + kv_off, hd) * scale;
        ref_softmax(s->scores, p + 1);
        memset(out, 0, sizeof(float) * (size_t)hd);
        for (int32_t j = 0; j <= p; j++) {
            const float *vj = vc + (int64_t)j * kv_dim + kv_off;
            for (int32_t i = 0; i < hd; i++) out[i] += s->scores[j] * vj[i];
        }
    }
}

/* The attention sub-block of layer il for n tokens at pos..pos+n: x += attention(x). */
static void attention(lean_backend_state *s, int32_t il, int32_t n, int32_t pos) {
    const lean_hparams *hp = &s->m->hp;
    const lean_layer *L = &s->m->layers[il];
    const int32_t q_dim = lean_q_dim(hp), kv_dim = lean_kv_dim(hp), half = hp->head_dim / 2;
    float *kc = s->k_cache + (int64_t)il * s->n_ctx * kv_dim; /* (n_ctx, kv_dim) */
    float *vc = s->v_cache + (int64_t)il * s->n_ctx * kv_dim; /* (n_ctx, kv_dim) */
    float *k = kc + (int64_t)pos * kv_dim;                    /* (n, kv_dim) new keys */
    float *v = vc + (int64_t)pos * kv_dim;                    /* (n, kv_dim) new values */

    norm_tokens(s, &L->attn_norm, n);
    matmul(s, s->q, s->xn, n, &L->wq, lora_site(il, LORA_WQ));
    matmul(s, k, s->xn, n, &L->wk, lora_site(il, LORA_WK));
    matmul(s, v, s->xn, n, &L->wv, lora_site(il, LORA_WV));
    if (L->bq.data) { /* qwen2 */
        ref_add_bias(s->q, f32(&L->bq), n, q_dim);
        ref_add_bias(k, f32(&L->bk), n, kv_dim);
        ref_add_bias(v, f32(&L->bv), n, kv_dim);
    }
    for (int32_t t = 0; t < n; t++) {
        float *qt = s->q + (int64_t)t * q_dim, *kt = k + (int64_t)t * kv_dim;
        if (L->q_norm.data) { /* qwen3 */
            norm_heads(qt, hp->n_head, &L->q_norm, hp);
            norm_heads(kt, hp->n_head_kv, &L->k_norm, hp);
        }
        const float *c = s->rope_cos + (int64_t)t * half, *sn = s->rope_sin + (int64_t)t * half;
        ref_rope(qt, hp->n_head, hp->head_dim, hp->rope_style, c, sn);
        ref_rope(kt, hp->n_head_kv, hp->head_dim, hp->rope_style, c, sn);
    }
    /* All n keys are in the cache now; token t sees positions 0..pos+t (causal). */
    for (int32_t t = 0; t < n; t++)
        attend_token(s, s->q + (int64_t)t * q_dim, kc, vc, pos + t, s->att + (int64_t)t * q_dim);
    matmul(s, s->proj, s->att, n, &L->wo, lora_site(il, LORA_WO));
    add_residual(s, n);
}

/* The feed-forward sub-block of layer il: x += Wdown (silu(Wgate xn) * (Wup xn)). */
static void ffn(lean_backend_state *s, int32_t il, int32_t n) {
    const lean_layer *L = &s->m->layers[il];
    norm_tokens(s, &L->ffn_norm, n);
    matmul(s, s->gate, s->xn, n, &L->w_gate, lora_site(il, LORA_GATE));
    matmul(s, s->up, s->xn, n, &L->w_up, lora_site(il, LORA_UP));
    ref_swiglu(s->gate, s->up, (int64_t)n * s->m->hp.n_ff);
    matmul(s, s->proj, s->gate, n, &L->w_down, lora_site(il, LORA_DOWN));
    add_residual(s, n);
}

/* ---- forward ---- */

static lean_status cpu_forward(lean_backend_state *s, const int32_t *ids, int32_t n, int32_t pos,
                               float *logits, lean_error *err) {
    if (n < 1 || n > s->n_batch || pos < 0 || pos > s->n_ctx - n)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "cpu_ref: %d tokens at position %d (n_batch %d, n_ctx %d)",
                         n, pos, s->n_batch, s->n_ctx);
    const lean_model *m = s->m;
    embed(s, ids, n);
    rope_angles(s, n, pos);
    for (int32_t il = 0; il < m->hp.n_layer; il++) {
        attention(s, il, n, pos);
        ffn(s, il, n);
    }
    if (logits) { /* the last token only: logits (n_vocab) = Wout (rmsnorm(x) * output_norm) */
        const int32_t d = m->hp.n_embd;
        ref_rmsnorm(s->xn, s->x + (int64_t)(n - 1) * d, f32(&m->output_norm), d, m->hp.rms_eps);
        matmul(s, logits, s->xn, 1, &m->output, lora_site_output(&m->hp));
    }
    return LEAN_OK;
}

/* ---- KV access (backend.h, kv_host) ---- */

/* Layer il's (n_ctx, kv_dim) keys (kind 0) or values (kind 1), where the forward pass keeps them. */
static float *cpu_kv_host(lean_backend_state *s, int32_t il, int kind) {
    return (kind ? s->v_cache : s->k_cache) + (int64_t)il * s->n_ctx * lean_kv_dim(&s->m->hp);
}

/* ---- LoRA ---- */

/* The scratch of set's terms, then set in force. */
static lean_status cpu_set_lora(lean_backend_state *s, const lora_set *set, lean_error *err) {
    float *tmp = NULL, *row = NULL;
    if (set) {
        const int64_t cols = lora_row_cap(&s->m->hp, set);
        lean_status st = alloc_f32(&tmp, (uint64_t)s->n_batch, (uint64_t)set->max_site_rank, 1, "LoRA scratch", err);
        if (st == LEAN_OK) st = alloc_f32(&row, (uint64_t)cols, 1, 1, "LoRA scratch", err);
        if (st != LEAN_OK) {
            lean_free(tmp);
            return st;
        }
    }
    lean_free(s->lora_tmp);
    lean_free(s->lora_row);
    s->lora = set, s->lora_tmp = tmp, s->lora_row = row;
    return LEAN_OK;
}

/* ---- table ---- */

const lean_backend lean_backend_cpu_ref = {
    .name = "cpu_ref",
    .n_batch_default = 64,
    .create = cpu_create,
    .forward = cpu_forward,
    .destroy = cpu_destroy,
    .kv_host = cpu_kv_host,
    .set_lora = cpu_set_lora,
};
