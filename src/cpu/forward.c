/* forward.c — lean_backend_cpu: the fast CPU forward pass (kernel table + thread pool).
 *
 * What it does: the same decoder as forward_ref.c (llama / qwen2 / qwen3; read that file
 * for the math), computed with the kernels of kernels.h on the weights' own blocks, by a
 * pool of persistent threads (pool.h). Per layer, for n tokens at pos..pos+n, one parallel
 * region per line, its work cut into chunks that the threads claim:
 *
 *   region                      one chunk is               writes
 *   norm + quantize             a token                    xn, the activations of Wq/Wk/Wv
 *   Wq Wk Wv                    rows of one of the three   q, the K and V cache rows
 *   bias, q/k norm, RoPE        a token                    q, K
 *   attention                   (head, token tile)         att
 *                               (KV head, row) batched:    q, K, V, att
 *                               that head's bias ... RoPE
 *                               first (no region of its own)
 *   quantize                    a token                    the activations of Wo
 *   Wo, x += .                  rows                       x
 *   norm + quantize             a token                    xn, the activations of Wgate/Wup
 *   Wgate Wup, silu(g) * u      the same rows of both      gate
 *   quantize                    a token                    the activations of Wdown
 *   Wdown, x += .               rows                       x
 * then the logits of the last token (norm, quantize, Wout by rows). LoRA adapters (core/lora.h) add
 * to a matmul: A x of its terms on the calling thread before the rows are shared out (a small
 * matmul: rank rows, by matmul_exact), then each chunk adds scale * B (A x) to its own rows
 * before the epilogue (ops_ref.h's ref_lora_up), so a row's bits depend on no thread count either; the embedding's terms
 * (a row of A per token, then B) run on the calling thread after the lookup. Row chunks are 64 rows
 * for a decode step, about 1024 rows x tokens for a batch (chunk_rows). A region of one chunk (a
 * token's norm in a decode step) runs on the calling thread without waking anyone; nothing
 * is allocated after create.
 *
 * Two kinds of matmul (kernels.h): by default the quantized formats meet 8-bit activations
 * (quantized once per group, the "quantize" lines above); under lean_ctx_params.exact every
 * format meets the float activations (matmul_exact: weights dequantized block by block in
 * registers, F32 arithmetic), so the logits carry float rounding only, as cpu-ref's and the
 * GPU's F32 path's do, and the quantize lines do nothing.
 *
 * Exactness: not the reference's bits (other summation orders, and 8-bit activations unless
 * exact; the tests hold it to the reference), but every output is computed by one thread, within one
 * chunk, in an order fixed by the kernel (kernels.h's contract: it does not depend on the row
 * range, the tokens alongside or the thread). So the logits are the same bits for any thread
 * count, and for a prefill split into any batches or decoded token by token.
 *
 * A batched pass (forward_batch, lean_decode_batch) runs the same regions over n rows that
 * belong to n sequences, one token each: the matmuls over the n rows together (the weights
 * read once), row t's new key and value written to its own sequence's cache at its own
 * position, its attention over that cache (one chunk per KV head and row: the query heads
 * that share a KV head read its keys and values once). A row's arithmetic is
 * the same as in a forward call of it alone (the kernels' contract, and attention's below), so
 * a sequence's logits do not depend on the batch. The first sequence's state does the work:
 * its threads, its scratch (kb, vb hold the rows' new keys and values on their way).
 *
 * Attention streams the softmax (one pass over the keys, in blocks of ATTN_KB keys, with a
 * running maximum and sum): one query per (head, token); a tile is ATTN_TQ tokens of one head
 * (a forward call) or one row's heads of one KV head (a batched pass), so a block of keys and
 * values is read once per tile while it sits in L1. A query's arithmetic depends only on
 * its own keys (block boundaries at multiples of ATTN_KB from position 0), never on the
 * tile it was computed in.
 *
 * Sections: state · create / destroy · regions (token work, matmul groups, attention) ·
 *           forward · LoRA · table
 */
#include "core/backend.h"
#include "core/rope.h"

#include "cpu/kernels.h"
#include "cpu/ops_ref.h"
#include "cpu/pool.h"
#include "cpu/repack.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#define ATTN_KB 32  /* keys per block of the streaming softmax */
#define ATTN_TQ 16  /* tokens per attention tile */
#define ROW_ALIGN 16 /* row chunks start at multiples of this (64-byte lines of y) */

/* ---- state ---- */

struct lean_backend_state {
    const lean_model *m;
    lean_kernels k;
    lean_pool *pool;
    bool exact;       /* matmul_exact with float activations for every format */
    const lean_packed *packed; /* the model's repacked copies (cpu/repack.h), when k reads them; else NULL */
    int32_t n_ctx, n_batch;
    float *k_cache;   /* (n_layer, n_ctx, kv_dim) keys, after RoPE */
    float *v_cache;   /* (n_layer, n_ctx, kv_dim) values */
    float *x;         /* (n_batch, n_embd) residual stream */
    float *xn;        /* (n_batch, n_embd) normed input of the current sub-block */
    float *proj;      /* (n_batch, n_embd) output of Wo or Wdown before it is added to x */
    float *q;         /* (n_batch, q_dim) queries, after RoPE */
    float *att;       /* (n_batch, q_dim) attention output, heads concatenated */
    float *gate, *up; /* (n_batch, n_ff) FFN hidden; gate becomes silu(gate) * up */
    float *rope_cos;  /* (n_batch, head_dim / 2) */
    float *rope_sin;  /* (n_batch, head_dim / 2) */
    float *attn_tmp;  /* (n_threads, attn_tmp_elems) per thread: m and l of each query, scores */
    float *kb, *vb;   /* (n_batch, kv_dim) a batched pass's new keys and values, before their caches */
    void *act[LEAN_N_ACT_TYPES]; /* (n_batch, act row of max_cols) quantized activations; F32 unused */
    const lora_set *lora; /* the context's adapters (NULL: none) */
    float *lora_tmp;  /* (3, n_batch, lora->max_site_rank): A x of each matmul of a group */
    float *lora_row;  /* (n_threads, lora_row_cap) a dequantized row of A or B per thread */
    int64_t lora_row_cap; /* max(max_cols, lora->max_rank) */
};

/* A thread's attention scratch: m and l of a tile's queries (ATTN_TQ tokens of one head, or
 * one row's group of heads), then a block's scores. */
static int64_t attn_tmp_elems(const lean_hparams *hp) {
    const int32_t group = hp->n_head / hp->n_head_kv, q_max = group > ATTN_TQ ? group : ATTN_TQ;
    return 2 * (int64_t)q_max + ATTN_KB;
}

static const float *f32(const lean_tensor *t) { return (const float *)t->data; }

static size_t row_bytes(const lean_tensor *t) {
    uint64_t b = 0;
    lean_type_bytes(t->type, (uint64_t)t->ne[0], &b);
    return (size_t)b;
}

/* ---- create / destroy ---- */

static lean_status alloc_bytes(void **out, uint64_t a, uint64_t b, uint64_t c, const char *what,
                               lean_error *err) {
    uint64_t n;
    if (!lean_mul_u64(a, b, &n) || !lean_mul_u64(n, c, &n) || n > SIZE_MAX)
        return LEAN_FAIL(err, LEAN_ERR_NOMEM, "%s: %llu x %llu x %llu bytes do not fit in memory", what,
                         (unsigned long long)a, (unsigned long long)b, (unsigned long long)c);
    *out = lean_calloc((size_t)n, 1);
    if (!*out) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "allocating %s (%llu bytes)", what, (unsigned long long)n);
    return LEAN_OK;
}

static lean_status alloc_f32(float **out, uint64_t a, uint64_t b, const char *what, lean_error *err) {
    void *p = NULL;
    lean_status st = alloc_bytes(&p, a, b, sizeof(float), what, err);
    *out = p;
    return st;
}

static void cpu_destroy(lean_backend_state *s) {
    if (!s) return;
    lean_pool_free(s->pool);
    float *bufs[] = {s->k_cache, s->v_cache, s->x,        s->xn,       s->proj,    s->q,
                     s->att,     s->gate,    s->up,       s->rope_cos, s->rope_sin, s->attn_tmp,
                     s->kb,      s->vb,      s->lora_tmp, s->lora_row};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) lean_free(bufs[i]);
    for (int i = 0; i < LEAN_N_ACT_TYPES; i++) lean_free(s->act[i]);
    lean_free(s);
}

/* The activation format a matrix of `type` is dotted with, and its kernel. */
static int act_of(const lean_backend_state *s, uint32_t type) { return s->exact ? LEAN_ACT_F32 : lean_act_for(type); }
static lean_matmul_fn matmul_of(const lean_backend_state *s, uint32_t type) {
    return s->exact ? s->k.matmul_exact[type] : s->k.matmul[type];
}

/* The weight matrices of the model, for checking that every type has a kernel; packed[t]: the
 * matrices of type t are read from their repacked copies (cpu/repack.h). */
static lean_status check_types(const lean_backend_state *s, bool *need_act, bool *packed, lean_error *err) {
    const lean_model *m = s->m;
    const lean_tensor *ts[8];
    for (int32_t il = -1; il < m->hp.n_layer; il++) {
        int n = 0;
        if (il < 0) {
            ts[n++] = &m->output;
        } else {
            const lean_layer *L = &m->layers[il];
            ts[n++] = &L->wq, ts[n++] = &L->wk, ts[n++] = &L->wv, ts[n++] = &L->wo;
            ts[n++] = &L->w_gate, ts[n++] = &L->w_up, ts[n++] = &L->w_down;
        }
        for (int i = 0; i < n; i++) {
            const int act = lean_act_for(ts[i]->type) < 0 ? -1 : act_of(s, ts[i]->type);
            if (act < 0 || !matmul_of(s, ts[i]->type))
                return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "cpu: no %s%s kernel for tensor '%s' of type %s",
                                 s->k.name, s->exact ? " exact" : "", ts[i]->name, lean_type_name((int)ts[i]->type));
            need_act[act] = true;
            packed[ts[i]->type] = !s->exact && s->k.matmul_packed[ts[i]->type] && lean_repack_has(ts[i]->type);
        }
    }
    return LEAN_OK;
}

/* bm: NULL (no model-level part: the contexts read the weights where the model mapped them) */
static lean_status cpu_create_config(const lean_model *m, lean_backend_model *bm, const lean_backend_config *cfg,
                                     lean_backend_state **out, lean_error *err) {
    (void)bm;
    *out = NULL;
    const int32_t n_ctx = cfg->n_ctx, n_batch = cfg->n_batch;
    if (n_ctx < 1 || n_batch < 1 || n_batch > n_ctx)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "cpu: n_ctx %d, n_batch %d (need 1 <= n_batch <= n_ctx)", n_ctx,
                         n_batch);
    if (cfg->n_threads < 0) return LEAN_FAIL(err, LEAN_ERR_ARG, "cpu: n_threads %d (need >= 0)", cfg->n_threads);
    lean_kernels k;
    if (lean_kernels_select(cfg->isa, &k) != 0)
        return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "cpu: kernel table '%s' is unknown or not supported by this CPU",
                         cfg->isa);
    const lean_hparams *hp = &m->hp;
    lean_backend_state *s = lean_calloc(1, sizeof *s);
    if (!s) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "allocating the cpu state");
    s->m = m;
    s->k = k;
    s->exact = cfg->exact;
    bool need_act[LEAN_N_ACT_TYPES] = {false}, packed[LEAN_N_TYPE_IDS] = {false}, any_packed = false;
    lean_status st = check_types(s, need_act, packed, err);
    for (int t = 0; t < LEAN_N_TYPE_IDS; t++) any_packed |= packed[t];
    if (st == LEAN_OK && any_packed) st = lean_packed_get(m, packed, &s->packed, err);
    if (st != LEAN_OK) {
        lean_free(s);
        return st;
    }
    s->n_ctx = n_ctx;
    s->n_batch = n_batch;
    const int32_t n_threads = cfg->n_threads ? cfg->n_threads : lean_cpu_count();
    if ((st = lean_pool_create(n_threads, &s->pool, err)) != LEAN_OK) {
        cpu_destroy(s);
        return st;
    }
    const uint64_t L = (uint64_t)hp->n_layer, C = (uint64_t)n_ctx, B = (uint64_t)n_batch;
    const uint64_t d = (uint64_t)hp->n_embd, qd = (uint64_t)lean_q_dim(hp), kvd = (uint64_t)lean_kv_dim(hp),
                   ff = (uint64_t)hp->n_ff, half = (uint64_t)hp->head_dim / 2;
    const uint64_t max_cols = (uint64_t)lean_max_cols(hp);
    const uint64_t nt = (uint64_t)lean_pool_size(s->pool);
    if ((st = alloc_f32(&s->k_cache, L * C, kvd, "the key cache", err)) ||
        (st = alloc_f32(&s->v_cache, L * C, kvd, "the value cache", err)) ||
        (st = alloc_f32(&s->x, B, d, "activations", err)) || (st = alloc_f32(&s->xn, B, d, "activations", err)) ||
        (st = alloc_f32(&s->proj, B, d, "activations", err)) ||
        (st = alloc_f32(&s->q, B, qd, "activations", err)) ||
        (st = alloc_f32(&s->att, B, qd, "activations", err)) ||
        (st = alloc_f32(&s->gate, B, ff, "activations", err)) ||
        (st = alloc_f32(&s->up, B, ff, "activations", err)) ||
        (st = alloc_f32(&s->rope_cos, B, half, "RoPE angles", err)) ||
        (st = alloc_f32(&s->rope_sin, B, half, "RoPE angles", err)) ||
        (st = alloc_f32(&s->attn_tmp, nt, (uint64_t)attn_tmp_elems(hp), "attention scratch", err)) ||
        (st = alloc_f32(&s->kb, B, kvd, "batch keys", err)) || (st = alloc_f32(&s->vb, B, kvd, "batch values", err))) {
        cpu_destroy(s);
        return st;
    }
    for (int a = 1; a < LEAN_N_ACT_TYPES; a++) {
        if (!need_act[a]) continue;
        /* rows of max_cols rounded down to the format's block: only whole rows are used */
        const int64_t blk = a == LEAN_ACT_Q8_K ? LEAN_QK_K : 32;
        const size_t rb = lean_act_row_bytes((lean_act_type)a, (int64_t)max_cols / blk * blk);
        if ((st = alloc_bytes(&s->act[a], B, rb ? rb : 1, 1, "quantized activations", err))) {
            cpu_destroy(s);
            return st;
        }
    }
    *out = s;
    return LEAN_OK;
}

static lean_status cpu_create(const lean_model *m, int32_t n_ctx, int32_t n_batch, lean_backend_state **out,
                              lean_error *err) {
    const lean_backend_config cfg = {.n_ctx = n_ctx, .n_batch = n_batch};
    return cpu_create_config(m, NULL, &cfg, out, err);
}

/* ---- regions ---- */

/* A batched pass's rows: row t is the token of sequence seq[t] at position pos[t]. The
 * regions take NULL for a forward call's rows: all of s's own sequence, row t at pos + t. */
typedef struct batch_rows {
    lean_backend_state *const *seq;
    const int32_t *pos;
} batch_rows;

/* -- token work: fn(s, t, arg) for every token t of the batch, split over threads -- */

typedef void (*token_fn)(lean_backend_state *s, int32_t t, const void *arg);

typedef struct token_job {
    lean_backend_state *s;
    token_fn fn;
    const void *arg;
} token_job;

static void token_chunk(void *vj, int64_t t, int32_t ith) {
    (void)ith;
    const token_job *j = vj;
    j->fn(j->s, (int32_t)t, j->arg);
}

/* One chunk per token (one token runs on the caller alone: lean_pool_run wakes nobody). */
static void for_tokens(lean_backend_state *s, int32_t n, token_fn fn, const void *arg) {
    token_job j = {.s = s, .fn = fn, .arg = arg};
    lean_pool_run(s->pool, n, token_chunk, &j);
}

/* What a matmul group reads: the float source rows (n, cols) and which activation formats
 * the group's weights need; quantize_task fills s->act[...] from it. */
typedef struct act_src {
    const float *src;    /* (n, cols) */
    int64_t cols;
    bool need[LEAN_N_ACT_TYPES];
    const float *norm_w; /* non-NULL: src <- rmsnorm(x) * norm_w first (src is s->xn) */
} act_src;

static void quantize_token(lean_backend_state *s, int32_t t, const void *varg) {
    const act_src *a = varg;
    const float *row = a->src + (int64_t)t * a->cols;
    if (a->norm_w) {
        const int32_t d = s->m->hp.n_embd;
        ref_rmsnorm(s->xn + (int64_t)t * d, s->x + (int64_t)t * d, a->norm_w, d, s->m->hp.rms_eps);
    }
    for (int ty = 1; ty < LEAN_N_ACT_TYPES; ty++) {
        if (!a->need[ty]) continue;
        const size_t rb = lean_act_row_bytes((lean_act_type)ty, a->cols);
        s->k.quantize_act((lean_act_type)ty, row, (char *)s->act[ty] + (size_t)t * rb, a->cols);
    }
}

/* -- matmul groups: up to three matrices reading the same activations -- */

enum { EPI_NONE, EPI_RESIDUAL, EPI_SWIGLU };

typedef struct mm_item {
    const lean_tensor *w;
    float *y;            /* (n, y_row_elems) */
    int64_t y_row_elems;
    int32_t site;        /* w's LoRA site (lora.h) */
    const float *lora_tmp; /* run_group: A x of the site's terms, when it has some */
} mm_item;

typedef struct mm_group {
    lean_backend_state *s;
    const act_src *in;
    mm_item items[3];
    int n_items;
    int32_t n_tok;
    int epilogue; /* EPI_RESIDUAL: x += items[0].y; EPI_SWIGLU: items[0].y = silu(.) * items[1].y */
    bool paired;  /* every item has the same rows; a chunk is the same rows of each */
    int64_t chunk_rows;        /* rows per chunk (a multiple of ROW_ALIGN) */
    int64_t first_chunk[4];    /* unpaired: item i's chunks are [first_chunk[i], first_chunk[i + 1]) */
} mm_group;

static void mm_run_item(const mm_group *g, const mm_item *it, int64_t r0, int64_t r1, int32_t ith) {
    if (r0 >= r1) return;
    lean_backend_state *s = g->s;
    const int act = act_of(s, it->w->type);
    const void *x = act == LEAN_ACT_F32 ? (const void *)g->in->src : s->act[act];
    const size_t x_row_bytes = lean_act_row_bytes((lean_act_type)act, g->in->cols);
    /* r0: a multiple of 16; another context's table may have copied types this one does not read */
    const void *packed = s->packed && s->k.matmul_packed[it->w->type] ? lean_packed_of(s->packed, s->m, it->w) : NULL;
    (packed ? s->k.matmul_packed[it->w->type] : matmul_of(s, it->w->type))(
        it->w->ne[0], packed ? packed : it->w->data, row_bytes(it->w), r0, r1, x, x_row_bytes, g->n_tok, it->y,
        it->y_row_elems);
    int32_t n_terms;
    const lora_term *terms = lora_terms(s->lora, it->site, &n_terms);
    if (n_terms)
        ref_lora_up(it->y, it->y_row_elems, g->n_tok, it->lora_tmp, terms, n_terms, r0, r1,
                    s->lora_row + (int64_t)ith * s->lora_row_cap);
}

/* Chunk c: rows [lo, hi) of every item (paired), or of the one item whose chunks hold c. */
static void mm_chunk(void *vg, int64_t c, int32_t ith) {
    const mm_group *g = vg;
    int64_t lo, hi;
    if (g->paired) {
        lo = c * g->chunk_rows;
        hi = lo + g->chunk_rows < g->items[0].w->ne[1] ? lo + g->chunk_rows : g->items[0].w->ne[1];
        for (int i = 0; i < g->n_items; i++) mm_run_item(g, &g->items[i], lo, hi, ith);
    } else {
        int i = 0;
        while (c >= g->first_chunk[i + 1]) i++;
        const int64_t rows = g->items[i].w->ne[1];
        lo = (c - g->first_chunk[i]) * g->chunk_rows;
        hi = lo + g->chunk_rows < rows ? lo + g->chunk_rows : rows;
        mm_run_item(g, &g->items[i], lo, hi, ith);
    }
    if (g->epilogue == EPI_NONE) return;
    lean_backend_state *s = g->s;
    const mm_item *y0 = &g->items[0];
    for (int32_t t = 0; t < g->n_tok; t++) {
        float *a = y0->y + (int64_t)t * y0->y_row_elems;
        if (g->epilogue == EPI_RESIDUAL) {
            float *x = s->x + (int64_t)t * s->m->hp.n_embd;
            for (int64_t r = lo; r < hi; r++) x[r] += a[r];
        } else {
            const float *u = g->items[1].y + (int64_t)t * g->items[1].y_row_elems;
            s->k.swiglu(a + lo, u + lo, hi - lo);
        }
    }
}

/* Rows per chunk. Decode: 64 (a few microseconds each). A batch: about CHUNK_WORK rows x
 * tokens (16 rows of a 64-token prefill; 128 rows of an 8-row batched decode step, where 16
 * made ~4 700 chunks a step of SmolLM2-135M, each claimed and counted through the pool's shared
 * atomics: docs/runs/2026-12-06-cpu-batch-decode-2.md), but at least 4 chunks a thread where
 * the group has the rows, so that the threads end together. Any split gives the same bits
 * (kernels.h's contract). */
#define CHUNK_WORK 1024
static int64_t chunk_rows(const mm_group *g) {
    if (g->n_tok < 4) return 4 * ROW_ALIGN;
    int64_t rows = 0;
    for (int i = 0; i < g->n_items; i++)
        if (i == 0 || !g->paired) rows += g->items[i].w->ne[1];
    const int64_t by_work = CHUNK_WORK / g->n_tok, by_threads = rows / (4 * lean_pool_size(g->s->pool));
    const int64_t r = (by_work < by_threads ? by_work : by_threads) / ROW_ALIGN * ROW_ALIGN;
    return r > ROW_ALIGN ? r : ROW_ALIGN;
}

/* Quantizes (and first normalizes, if asked) the group's input, then runs the group. */
static void run_group(mm_group *g, act_src *in) {
    lean_backend_state *s = g->s;
    for (int i = 0; i < g->n_items; i++) in->need[act_of(s, g->items[i].w->type)] = true;
    bool any = in->norm_w != NULL;
    for (int ty = 1; ty < LEAN_N_ACT_TYPES; ty++) any |= in->need[ty];
    if (any) for_tokens(s, g->n_tok, quantize_token, in);
    g->in = in;
    for (int i = 0; i < g->n_items; i++) { /* LoRA: A x, before the rows are shared out */
        int32_t n_terms;
        const lora_term *terms = lora_terms(s->lora, g->items[i].site, &n_terms);
        if (!n_terms) continue;
        float *tmp = s->lora_tmp + (int64_t)i * s->n_batch * s->lora->max_site_rank;
        g->items[i].lora_tmp = tmp;
        for (int32_t j = 0; j < n_terms; j++) { /* tmp_j (n_tok, rank) = x A_j^T, as ref_lora_down lays them */
            const lean_tensor *a = terms[j].a;
            s->k.matmul_exact[a->type](a->ne[0], a->data, row_bytes(a), 0, terms[j].rank, in->src,
                                       (size_t)in->cols * sizeof(float), g->n_tok, tmp, terms[j].rank);
            tmp += (int64_t)g->n_tok * terms[j].rank;
        }
    }
    g->chunk_rows = chunk_rows(g);
    int64_t n_chunks = 0;
    for (int i = 0; i < g->n_items; i++) {
        g->first_chunk[i] = n_chunks;
        if (i == 0 || !g->paired) n_chunks += (g->items[i].w->ne[1] + g->chunk_rows - 1) / g->chunk_rows;
    }
    g->first_chunk[g->n_items] = n_chunks;
    lean_pool_run(s->pool, n_chunks, mm_chunk, g);
}

/* -- bias, q/k norm, RoPE of one token -- */

typedef struct qk_arg {
    int32_t il;
    float *k; /* (n, kv_dim) the batch's new keys */
    float *v; /* (n, kv_dim) its new values */
    const batch_rows *rows; /* non-NULL: k, v are s->kb, s->vb, copied to each row's cache */
} qk_arg;

static void norm_heads(float *x, int32_t n_heads, const lean_tensor *w, const lean_hparams *hp) {
    for (int32_t h = 0; h < n_heads; h++) {
        float *xh = x + (int64_t)h * hp->head_dim;
        ref_rmsnorm(xh, xh, f32(w), hp->head_dim, hp->rms_eps);
    }
}

/* Bias, q/k norm and RoPE of token t's KV heads [g0, g1) and the query heads that share them;
 * in a batched pass, those keys and values copied to the row's cache. Each element's arithmetic
 * is the same whichever heads go together. */
static void qk_heads(lean_backend_state *s, int32_t t, const qk_arg *a, int32_t g0, int32_t g1) {
    const lean_hparams *hp = &s->m->hp;
    const lean_layer *L = &s->m->layers[a->il];
    const int32_t q_dim = lean_q_dim(hp), kv_dim = lean_kv_dim(hp), half = hp->head_dim / 2, hd = hp->head_dim;
    const int32_t group = hp->n_head / hp->n_head_kv, nq = (g1 - g0) * group, nk = g1 - g0;
    const int64_t qo = (int64_t)g0 * group * hd, ko = (int64_t)g0 * hd;
    float *qt = s->q + (int64_t)t * q_dim + qo, *kt = a->k + (int64_t)t * kv_dim + ko,
          *vt = a->v + (int64_t)t * kv_dim + ko;
    if (L->bq.data) { /* qwen2 */
        ref_add_bias(qt, f32(&L->bq) + qo, 1, nq * hd);
        ref_add_bias(kt, f32(&L->bk) + ko, 1, nk * hd);
        ref_add_bias(vt, f32(&L->bv) + ko, 1, nk * hd);
    }
    if (L->q_norm.data) { /* qwen3 */
        norm_heads(qt, nq, &L->q_norm, hp);
        norm_heads(kt, nk, &L->k_norm, hp);
    }
    const float *c = s->rope_cos + (int64_t)t * half, *sn = s->rope_sin + (int64_t)t * half;
    ref_rope(qt, nq, hd, hp->rope_style, c, sn);
    ref_rope(kt, nk, hd, hp->rope_style, c, sn);
    if (a->rows) { /* to the row's own cache, layer il, at its position */
        const lean_backend_state *q = a->rows->seq[t];
        const int64_t at = ((int64_t)a->il * q->n_ctx + a->rows->pos[t]) * kv_dim + ko;
        memcpy(q->k_cache + at, kt, sizeof(float) * (size_t)(nk * hd));
        memcpy(q->v_cache + at, vt, sizeof(float) * (size_t)(nk * hd));
    }
}

static void qk_token(lean_backend_state *s, int32_t t, const void *varg) {
    qk_heads(s, t, varg, 0, s->m->hp.n_head_kv);
}

/* -- attention -- */

typedef struct attn_job {
    lean_backend_state *s;
    const float *kc, *vc; /* (n_ctx, kv_dim) this layer's cache (a forward call's) */
    int32_t il, n, pos;
    const batch_rows *rows; /* non-NULL: a batched pass, each row over its own cache */
    const qk_arg *qk;       /* a batched pass: a chunk's heads' bias, norm and RoPE come first */
} attn_job;

/* Queries of heads [h0, h1) (one head, or the heads that share one KV head) for tokens
 * [t0, t1) over the cache kc, vc, streaming over their keys; token t is at position
 * pos0 + t - t0 (it sees keys 0 .. that position). A block of keys and values is read once
 * for all (h1 - h0) x (t1 - t0) queries (at most attn_tmp_elems' q_max). */
static void attend_tile(lean_backend_state *s, const float *kc, const float *vc, int32_t pos0, int32_t h0, int32_t h1,
                        int32_t t0, int32_t t1, float *tmp) {
    const lean_hparams *hp = &s->m->hp;
    const int32_t hd = hp->head_dim, q_dim = lean_q_dim(hp), kv_dim = lean_kv_dim(hp), nt = t1 - t0;
    const int64_t kv_off = (int64_t)(h0 / (hp->n_head / hp->n_head_kv)) * hd;
    const float scale = 1.0f / sqrtf((float)hd);
    const int32_t n_q = (h1 - h0) * nt; /* query i: head h0 + i / nt, token t0 + i % nt */
    float *mx = tmp, *l = tmp + n_q, *sc = tmp + 2 * n_q;
    for (int32_t i = 0; i < n_q; i++) {
        mx[i] = -INFINITY;
        l[i] = 0.0f;
        memset(s->att + (int64_t)(t0 + i % nt) * q_dim + (int64_t)(h0 + i / nt) * hd, 0, sizeof(float) * (size_t)hd);
    }
    const int32_t n_keys_max = pos0 + nt; /* the last token sees positions 0..pos0+t1-t0-1 */
    for (int32_t k0 = 0; k0 < n_keys_max; k0 += ATTN_KB) {
        const float *kb = kc + (int64_t)k0 * kv_dim + kv_off, *vb = vc + (int64_t)k0 * kv_dim + kv_off;
        for (int32_t i = 0; i < n_q; i++) {
            const int32_t t = t0 + i % nt, h = h0 + i / nt, n_keys = pos0 + t - t0 + 1;
            if (k0 >= n_keys) continue;
            const int32_t nb = n_keys - k0 < ATTN_KB ? n_keys - k0 : ATTN_KB;
            const float *qh = s->q + (int64_t)t * q_dim + (int64_t)h * hd;
            float *o = s->att + (int64_t)t * q_dim + (int64_t)h * hd;
            s->k.attn_scores(qh, kb, kv_dim, nb, hd, sc);
            float bmax = -INFINITY;
            for (int32_t j = 0; j < nb; j++) {
                sc[j] *= scale;
                bmax = sc[j] > bmax ? sc[j] : bmax;
            }
            const float m_old = mx[i], m_new = bmax > m_old ? bmax : m_old;
            const float c = expf(m_old - m_new); /* 0 for the first block */
            const float sum = s->k.exp_sum(sc, nb, m_new);
            l[i] = l[i] * c + sum;
            mx[i] = m_new;
            s->k.attn_accum(o, c, vb, kv_dim, sc, nb, hd);
        }
    }
    for (int32_t i = 0; i < n_q; i++) {
        float *o = s->att + (int64_t)(t0 + i % nt) * q_dim + (int64_t)(h0 + i / nt) * hd;
        const float inv = 1.0f / l[i];
        for (int32_t j = 0; j < hd; j++) o[j] *= inv;
    }
}

/* Chunk c: head c / n_tiles, token tile c % n_tiles; in a batched pass, KV head c / n and its
 * group of query heads, row c % n over its own sequence's cache (the row's keys read once for
 * the group: a forward call's decode keeps a chunk per head, to share one token among threads),
 * after those heads' bias, norm and RoPE and the new key and value put in the cache: a row's
 * attention of one KV head needs no other head's, so that takes no region of its own. */
static void attn_chunk(void *vj, int64_t c, int32_t ith) {
    const attn_job *j = vj;
    float *tmp = j->s->attn_tmp + (int64_t)ith * attn_tmp_elems(&j->s->m->hp);
    if (j->rows) {
        const int32_t group = j->s->m->hp.n_head / j->s->m->hp.n_head_kv;
        const int32_t g = (int32_t)(c / j->n), t = (int32_t)(c % j->n);
        const lean_backend_state *q = j->rows->seq[t];
        qk_heads(j->s, t, j->qk, g, g + 1);
        const int64_t layer = (int64_t)j->il * q->n_ctx * lean_kv_dim(&q->m->hp);
        attend_tile(j->s, q->k_cache + layer, q->v_cache + layer, j->rows->pos[t], g * group, (g + 1) * group, t, t + 1,
                    tmp);
        return;
    }
    const int32_t n_tiles = (j->n + ATTN_TQ - 1) / ATTN_TQ;
    const int32_t h = (int32_t)(c / n_tiles), tile = (int32_t)(c % n_tiles);
    const int32_t t0 = tile * ATTN_TQ, t1 = t0 + ATTN_TQ < j->n ? t0 + ATTN_TQ : j->n;
    attend_tile(j->s, j->kc, j->vc, j->pos + t0, h, h + 1, t0, t1, tmp);
}

/* ---- forward ---- */

typedef struct embed_arg {
    const int32_t *ids;
    int32_t pos;
    const batch_rows *rows; /* non-NULL: row t at rows->pos[t] (not pos + t) */
} embed_arg;

/* x of token t = its embedding row; its RoPE angles (position pos + t). */
static void embed_token(lean_backend_state *s, int32_t t, const void *varg) {
    const embed_arg *a = varg;
    const lean_model *m = s->m;
    const int32_t half = m->hp.head_dim / 2;
    ref_embed_row(s->x + (int64_t)t * m->hp.n_embd, &m->tok_embd, a->ids[t]);
    const int32_t pos = a->rows ? a->rows->pos[t] : a->pos + t;
    lean_rope_angles(s->rope_cos + (int64_t)t * half, s->rope_sin + (int64_t)t * half, pos, m->hp.head_dim,
                     m->hp.rope_base, m->rope_freqs.data ? f32(&m->rope_freqs) : NULL);
}

static void attention(lean_backend_state *s, int32_t il, int32_t n, int32_t pos, const batch_rows *rows) {
    const lean_hparams *hp = &s->m->hp;
    const lean_layer *L = &s->m->layers[il];
    const int32_t q_dim = lean_q_dim(hp), kv_dim = lean_kv_dim(hp), d = hp->n_embd;
    float *kc = s->k_cache + (int64_t)il * s->n_ctx * kv_dim; /* (n_ctx, kv_dim) */
    float *vc = s->v_cache + (int64_t)il * s->n_ctx * kv_dim; /* (n_ctx, kv_dim) */
    float *k = rows ? s->kb : kc + (int64_t)pos * kv_dim, *v = rows ? s->vb : vc + (int64_t)pos * kv_dim;

    act_src in = {.src = s->xn, .cols = d, .norm_w = f32(&L->attn_norm)};
    mm_group g = {.s = s, .n_tok = n, .n_items = 3,
                  .items = {{&L->wq, s->q, q_dim, lora_site(il, LORA_WQ), NULL},
                            {&L->wk, k, kv_dim, lora_site(il, LORA_WK), NULL},
                            {&L->wv, v, kv_dim, lora_site(il, LORA_WV), NULL}}};
    run_group(&g, &in);
    qk_arg qa = {.il = il, .k = k, .v = v, .rows = rows};
    if (!rows) for_tokens(s, n, qk_token, &qa); /* a batched pass: in attn_chunk, one region less */

    attn_job aj = {.s = s, .kc = kc, .vc = vc, .il = il, .n = n, .pos = pos, .rows = rows, .qk = &qa};
    const int64_t n_chunks = rows ? (int64_t)hp->n_head_kv * n : (int64_t)hp->n_head * ((n + ATTN_TQ - 1) / ATTN_TQ);
    lean_pool_run(s->pool, n_chunks, attn_chunk, &aj);

    act_src ain = {.src = s->att, .cols = q_dim};
    mm_group o = {.s = s, .n_tok = n, .n_items = 1, .epilogue = EPI_RESIDUAL, .items = {{&L->wo, s->proj, d, lora_site(il, LORA_WO), NULL}}};
    run_group(&o, &ain);
}

static void ffn(lean_backend_state *s, int32_t il, int32_t n) {
    const lean_hparams *hp = &s->m->hp;
    const lean_layer *L = &s->m->layers[il];
    const int32_t d = hp->n_embd, ff = hp->n_ff;
    act_src in = {.src = s->xn, .cols = d, .norm_w = f32(&L->ffn_norm)};
    mm_group gu = {.s = s, .n_tok = n, .n_items = 2, .epilogue = EPI_SWIGLU, .paired = true,
                   .items = {{&L->w_gate, s->gate, ff, lora_site(il, LORA_GATE), NULL},
                             {&L->w_up, s->up, ff, lora_site(il, LORA_UP), NULL}}};
    run_group(&gu, &in);
    act_src hin = {.src = s->gate, .cols = ff};
    mm_group dn = {.s = s, .n_tok = n, .n_items = 1, .epilogue = EPI_RESIDUAL, .items = {{&L->w_down, s->proj, d, lora_site(il, LORA_DOWN), NULL}}};
    run_group(&dn, &hin);
}

/* The pass over n rows (rows: NULL for a forward call's tokens at pos..pos+n, else a batch's
 * sequences); logits (nullable): the last row's (n_vocab), or a batch's every row's (n, n_vocab). */
static void forward_rows(lean_backend_state *s, const int32_t *ids, int32_t n, int32_t pos, const batch_rows *rows,
                         float *logits) {
    const lean_model *m = s->m;
    const lean_hparams *hp = &m->hp;
    const embed_arg ea = {.ids = ids, .pos = pos, .rows = rows};
    for_tokens(s, n, embed_token, &ea);
    int32_t n_terms; /* the embedding's LoRA on the calling thread: rank x n_embd a token */
    const lora_term *terms = lora_terms(s->lora, lora_site_embd(&s->m->hp), &n_terms);
    ref_lora_embed(s->x, s->m->hp.n_embd, ids, n, terms, n_terms, s->lora_tmp, s->lora_row);
    for (int32_t il = 0; il < hp->n_layer; il++) {
        attention(s, il, n, pos, rows);
        ffn(s, il, n);
    }
    if (!logits) return;
    /* logits (n_out, n_vocab) = Wout (rmsnorm(x) * output_norm) of the rows asked for */
    const int32_t d = hp->n_embd, first = rows ? 0 : n - 1, n_out = n - first;
    for (int32_t t = 0; t < n_out; t++)
        ref_rmsnorm(s->xn + (int64_t)t * d, s->x + (int64_t)(first + t) * d, f32(&m->output_norm), d, hp->rms_eps);
    act_src in = {.src = s->xn, .cols = d};
    mm_group g = {.s = s, .n_tok = n_out, .n_items = 1,
                  .items = {{&m->output, logits, hp->n_vocab, lora_site_output(hp), NULL}}};
    run_group(&g, &in);
}

static lean_status cpu_forward(lean_backend_state *s, const int32_t *ids, int32_t n, int32_t pos, float *logits,
                               lean_error *err) {
    if (n < 1 || n > s->n_batch || pos < 0 || pos > s->n_ctx - n)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "cpu: %d tokens at position %d (n_batch %d, n_ctx %d)", n, pos,
                         s->n_batch, s->n_ctx);
    forward_rows(s, ids, n, pos, NULL, logits);
    return LEAN_OK;
}

/* One pass shares first's kernels: the same table and the same kind of matmul. */
static lean_status cpu_batch_check(const lean_backend_state *first, const lean_backend_state *s, int32_t i,
                                   lean_error *err) {
    if (s->m != first->m || strcmp(s->k.name, first->k.name) || s->exact != first->exact)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "cpu: ctx[%d] computes with %s%s, ctx[0] with %s%s: one batch, one setting",
                         i, s->k.name, s->exact ? " exact" : "", first->k.name, first->exact ? " exact" : "");
    if (!lora_set_same(s->lora, first->lora)) /* a pass runs first's matmuls, adapters included, for every row */
        return LEAN_FAIL(err, LEAN_ERR_ARG, "cpu: ctx[%d] has other LoRA adapters than ctx[0]: one batch, one set", i);
    return LEAN_OK;
}

static lean_status cpu_forward_batch(lean_backend_state *const *seq, const int32_t *ids, const int32_t *pos, int32_t n,
                                     float *logits, lean_error *err) {
    lean_backend_state *s = seq[0];
    if (n < 1 || n > s->n_batch)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "cpu: a batch of %d rows (n_batch %d)", n, s->n_batch);
    for (int32_t i = 0; i < n; i++)
        if (pos[i] < 0 || pos[i] >= seq[i]->n_ctx)
            return LEAN_FAIL(err, LEAN_ERR_ARG, "cpu: row %d at position %d (n_ctx %d)", i, pos[i], seq[i]->n_ctx);
    const batch_rows rows = {.seq = seq, .pos = pos};
    forward_rows(s, ids, n, 0, &rows, logits);
    return LEAN_OK;
}

static void cpu_describe(const lean_backend_state *s, char *text, size_t cap) {
    const int32_t n = lean_pool_size(s->pool);
    snprintf(text, cap, "cpu (%s%s, %d thread%s)", s->k.name, s->exact ? ", exact" : "", n, n == 1 ? "" : "s");
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
    int64_t cap = 0;
    for (int32_t t = 0; set && t < set->first[set->n_sites]; t++)
        if (!s->k.matmul_exact[set->terms[t].a->type])
            return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "cpu: no %s exact kernel for LoRA tensor '%s' of type %s",
                             s->k.name, set->terms[t].a->name, lean_type_name((int)set->terms[t].a->type));
    if (set) {
        cap = lora_row_cap(&s->m->hp, set);
        lean_status st = alloc_f32(&tmp, 3 * (uint64_t)s->n_batch, (uint64_t)set->max_site_rank, "LoRA scratch", err);
        if (st == LEAN_OK)
            st = alloc_f32(&row, (uint64_t)lean_pool_size(s->pool), (uint64_t)cap, "LoRA scratch", err);
        if (st != LEAN_OK) {
            lean_free(tmp);
            return st;
        }
    }
    lean_free(s->lora_tmp);
    lean_free(s->lora_row);
    s->lora = set, s->lora_tmp = tmp, s->lora_row = row, s->lora_row_cap = cap;
    return LEAN_OK;
}

/* ---- table ---- */

const lean_backend lean_backend_cpu = {
    .name = "cpu",
    .n_batch_default = 64,
    .create = cpu_create,
    .create_config = cpu_create_config,
    .forward = cpu_forward,
    .destroy = cpu_destroy,
    .kv_host = cpu_kv_host,
    .batch_check = cpu_batch_check,
    .forward_batch = cpu_forward_batch,
    .describe = cpu_describe,
    .set_lora = cpu_set_lora,
};
