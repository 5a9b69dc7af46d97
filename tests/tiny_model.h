/* tiny_model.h — tiny seeded-random GGUF models for the model and forward tests.
 *
 * tiny_write() writes a llama / qwen2 / qwen3 file with gguf_writer (not the public
 * generator, so these tests depend on no other engineer's code) and keeps every tensor's
 * values in memory as float (after a quantize -> dequantize round trip for quantized
 * types), so a test can recompute the forward pass on its own. A tiny_spec can also
 * break the file in one named way (omit a key or tensor, reshape or retype a tensor,
 * override a key) for the validation tests.
 *
 * Header-only (static functions): each test program includes it once.
 */
#ifndef LEAN_TINY_MODEL_H
#define LEAN_TINY_MODEL_H

#include "core/formats.h"
#include "dev/gguf_writer.h"
#include "dev/quantize.h"
#include "test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct tiny_spec {
    const char *arch; /* "llama", "qwen2", "qwen3" */
    int n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_vocab, n_ctx_train;
    float rms_eps, rope_base;
    int tied;             /* no output.weight */
    int rope_freqs;       /* write rope_freqs.weight (llama3 scaling factors in [1, 4)) */
    uint32_t matrix_type; /* type of the layer matrices and output.weight (0 = F32) */
    uint32_t embd_type;   /* type of token_embd.weight (0 = F32) */
    uint64_t seed;
    /* ways to break the file, for validation tests (NULL / 0 = none) */
    const char *omit;    /* a key or tensor name left out */
    const char *reshape; /* a tensor written with one more row (1-D: one more element) */
    const char *as_f16;  /* a tensor written as F16 */
    const char *as_q8_0; /* a tensor written as Q8_0 (q4_k_m's Wv beside Q5_0 Wq, Wk) */
    const char *extra;   /* an extra F32 tensor of (n_embd) elements */
    const char *arch_name; /* general.architecture written instead of arch */
    struct { const char *key; uint32_t value; } set[2]; /* u32 keys overridden */
    int rope_dims;       /* <arch>.rope.dimension_count written when nonzero */
    int n_tokens;        /* tokenizer.ggml.tokens written with this many entries when nonzero */
} tiny_spec;

/* The defaults every test starts from: 2 layers, GQA 4/2, vocab 97. */
static inline tiny_spec tiny_default(const char *arch) {
    tiny_spec s = {.arch = arch, .n_embd = 64, .n_layer = 2, .n_head = 4, .n_head_kv = 2,
                   .head_dim = 16, .n_ff = 96, .n_vocab = 97, .n_ctx_train = 256,
                   .rms_eps = 1e-5f, .rope_base = 10000.0f, .seed = 1};
    if (strcmp(arch, "qwen3") == 0) s.head_dim = 32; /* != n_embd / n_head, as qwen3 allows */
    return s;
}

typedef struct tiny_tensor {
    char name[64];
    int64_t ne0, ne1; /* cols, rows (1 for vectors) */
    uint32_t type;
    float *f;         /* (ne1, ne0) the values as lean should see them */
} tiny_tensor;

typedef struct tiny_model {
    tiny_spec sp;
    int n;
    tiny_tensor t[256];
} tiny_model;

static inline void tiny_free(tiny_model *tm) {
    for (int i = 0; i < tm->n; i++) free(tm->t[i].f);
    tm->n = 0;
}

/* The values of tensor `name`, or NULL. */
static inline const float *tiny_get(const tiny_model *tm, const char *name) {
    for (int i = 0; i < tm->n; i++)
        if (strcmp(tm->t[i].name, name) == 0) return tm->t[i].f;
    return NULL;
}

static inline uint64_t tiny_rng(uint64_t *s) { /* splitmix64 */
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static inline float tiny_unit(uint64_t *s) { /* uniform in [0, 1) */
    return (float)(tiny_rng(s) >> 40) / (float)(1ull << 24);
}
/* n token ids in [0, n_vocab), seeded. */
static inline void tiny_ids(int32_t *ids, int n, int n_vocab, uint64_t seed) {
    for (int i = 0; i < n; i++) ids[i] = (int32_t)(tiny_rng(&seed) % (uint64_t)n_vocab);
}

enum tiny_fill { FILL_MATRIX, FILL_EMBD, FILL_NORM, FILL_BIAS, FILL_FREQS };

/* Adds one tensor: values from the seed, encoded as type (and decoded back into
 * tm so the test sees exactly what lean sees). */
static inline void tiny_add(gguf_writer *w, tiny_model *tm, const char *name, int64_t ne0, int64_t ne1,
                     uint32_t type, enum tiny_fill fill) {
    const tiny_spec *sp = &tm->sp;
    if (sp->omit && strcmp(sp->omit, name) == 0) return;
    if (sp->reshape && strcmp(sp->reshape, name) == 0) {
        if (ne1 > 1) ne1++;
        else ne0++;
    }
    if (sp->as_f16 && strcmp(sp->as_f16, name) == 0) type = LEAN_TYPE_F16;
    if (sp->as_q8_0 && strcmp(sp->as_q8_0, name) == 0) type = LEAN_TYPE_Q8_0;
    uint64_t seed = sp->seed * 1000003u + (uint64_t)tm->n * 7919u;
    int64_t n = ne0 * ne1;
    float *f = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        float u = 2.0f * tiny_unit(&seed) - 1.0f; /* [-1, 1) */
        switch (fill) {
        case FILL_MATRIX: f[i] = u * 2.0f / sqrtf((float)ne0); break;
        case FILL_EMBD: f[i] = u; break;
        case FILL_NORM: f[i] = 1.0f + 0.5f * u; break;
        case FILL_BIAS: f[i] = 0.5f * u; break;
        case FILL_FREQS: f[i] = 2.5f + 1.5f * u; break;
        }
    }
    const lean_type_traits *tt = lean_type_traits_get(type);
    uint64_t bytes = 0;
    lean_type_bytes(type, (uint64_t)n, &bytes);
    void *data = malloc((size_t)bytes);
    lean_quantizer_of(type)(f, data, n);
    tt->dequant(data, f, n);
    const int64_t ne[2] = {ne0, ne1};
    gguf_w_tensor(w, name, type, ne1 > 1 ? 2 : 1, ne, data, bytes);
    free(data);
    tiny_tensor *t = &tm->t[tm->n++];
    *t = (tiny_tensor){.ne0 = ne0, .ne1 = ne1, .type = type, .f = f};
    snprintf(t->name, sizeof t->name, "%s", name);
}

/* Writes "<arch>.<suffix>" = v unless omitted or overridden. */
static inline void tiny_u32(gguf_writer *w, const tiny_spec *sp, const char *suffix, uint32_t v) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", sp->arch, suffix);
    if (sp->omit && strcmp(sp->omit, key) == 0) return;
    for (int i = 0; i < 2; i++)
        if (sp->set[i].key && strcmp(sp->set[i].key, key) == 0) v = sp->set[i].value;
    gguf_w_u32(w, key, v);
}

static inline void tiny_f32(gguf_writer *w, const tiny_spec *sp, const char *suffix, float v) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", sp->arch, suffix);
    if (sp->omit && strcmp(sp->omit, key) == 0) return;
    gguf_w_f32(w, key, v);
}

static inline void tiny_keys(gguf_writer *w, const tiny_spec *sp) {
    if (!sp->omit || strcmp(sp->omit, "general.architecture") != 0)
        gguf_w_str(w, "general.architecture", sp->arch_name ? sp->arch_name : sp->arch);
    gguf_w_str(w, "general.name", "tiny");
    tiny_u32(w, sp, "context_length", (uint32_t)sp->n_ctx_train);
    tiny_u32(w, sp, "embedding_length", (uint32_t)sp->n_embd);
    tiny_u32(w, sp, "block_count", (uint32_t)sp->n_layer);
    tiny_u32(w, sp, "feed_forward_length", (uint32_t)sp->n_ff);
    tiny_u32(w, sp, "attention.head_count", (uint32_t)sp->n_head);
    tiny_u32(w, sp, "attention.head_count_kv", (uint32_t)sp->n_head_kv);
    if (sp->head_dim != sp->n_embd / sp->n_head) {
        tiny_u32(w, sp, "attention.key_length", (uint32_t)sp->head_dim);
        tiny_u32(w, sp, "attention.value_length", (uint32_t)sp->head_dim);
    }
    if (sp->rope_dims) tiny_u32(w, sp, "rope.dimension_count", (uint32_t)sp->rope_dims);
    tiny_f32(w, sp, "attention.layer_norm_rms_epsilon", sp->rms_eps);
    tiny_f32(w, sp, "rope.freq_base", sp->rope_base);
    if (sp->n_tokens) {
        const char **toks = malloc(sizeof(char *) * (size_t)sp->n_tokens);
        char *buf = malloc((size_t)sp->n_tokens * 12);
        for (int i = 0; i < sp->n_tokens; i++) {
            snprintf(buf + i * 12, 12, "t%d", i);
            toks[i] = buf + i * 12;
        }
        gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
        gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, (uint64_t)sp->n_tokens);
        free(buf);
        free(toks);
    }
}

/* Writes the model of sp to path; tm (nullable) receives the values. */
static inline lean_status tiny_write(const tiny_spec *sp, const char *path, tiny_model *tm_out,
                              lean_error *err) {
    static tiny_model scratch;
    tiny_model *tm = tm_out ? tm_out : &scratch;
    memset(tm, 0, sizeof *tm);
    tm->sp = *sp;
    const uint32_t mt = sp->matrix_type, et = sp->embd_type;
    const int64_t d = sp->n_embd, q = (int64_t)sp->n_head * sp->head_dim,
                  kv = (int64_t)sp->n_head_kv * sp->head_dim, ff = sp->n_ff, V = sp->n_vocab;
    const int qwen2 = strcmp(sp->arch, "qwen2") == 0, qwen3 = strcmp(sp->arch, "qwen3") == 0;
    gguf_writer *w = gguf_writer_new();
    tiny_keys(w, sp);
    tiny_add(w, tm, "token_embd.weight", d, V, et, FILL_EMBD);
    tiny_add(w, tm, "output_norm.weight", d, 1, LEAN_TYPE_F32, FILL_NORM);
    if (!sp->tied) tiny_add(w, tm, "output.weight", d, V, mt, FILL_MATRIX);
    if (sp->rope_freqs)
        tiny_add(w, tm, "rope_freqs.weight", sp->head_dim / 2, 1, LEAN_TYPE_F32, FILL_FREQS);
    if (sp->extra) tiny_add(w, tm, sp->extra, d, 1, LEAN_TYPE_F32, FILL_BIAS);
    for (int il = 0; il < sp->n_layer; il++) {
        char nm[64];
#define ADD(suffix, ne0, ne1, type, fill)                                                          \
    (snprintf(nm, sizeof nm, "blk.%d.%s", il, suffix), tiny_add(w, tm, nm, ne0, ne1, type, fill))
        ADD("attn_norm.weight", d, 1, LEAN_TYPE_F32, FILL_NORM);
        ADD("attn_q.weight", d, q, mt, FILL_MATRIX);
        ADD("attn_k.weight", d, kv, mt, FILL_MATRIX);
        ADD("attn_v.weight", d, kv, mt, FILL_MATRIX);
        if (qwen2) {
            ADD("attn_q.bias", q, 1, LEAN_TYPE_F32, FILL_BIAS);
            ADD("attn_k.bias", kv, 1, LEAN_TYPE_F32, FILL_BIAS);
            ADD("attn_v.bias", kv, 1, LEAN_TYPE_F32, FILL_BIAS);
        }
        if (qwen3) {
            ADD("attn_q_norm.weight", sp->head_dim, 1, LEAN_TYPE_F32, FILL_NORM);
            ADD("attn_k_norm.weight", sp->head_dim, 1, LEAN_TYPE_F32, FILL_NORM);
        }
        ADD("attn_output.weight", q, d, mt, FILL_MATRIX);
        ADD("ffn_norm.weight", d, 1, LEAN_TYPE_F32, FILL_NORM);
        ADD("ffn_gate.weight", d, ff, mt, FILL_MATRIX);
        ADD("ffn_up.weight", d, ff, mt, FILL_MATRIX);
        ADD("ffn_down.weight", ff, d, mt, FILL_MATRIX);
#undef ADD
    }
    lean_status st = gguf_writer_write(w, path, err);
    gguf_writer_free(w);
    if (!tm_out) tiny_free(tm);
    return st;
}

/* A fresh temporary file name (the caller unlinks it). */
static inline const char *tiny_path(char *buf, size_t cap) { return test_tmp_path(buf, cap, "tiny.gguf"); }

/* A model of every matrix in `type` (token_embd too) at shapes every format's blocks fit (rows
 * of 256: the K-quants), untied (a tiny tied model echoes its last id with a logit no
 * temperature moves), written to a fresh path (the caller unlinks it) and loaded; NULL after a
 * failed CHECK. */
static inline lean_model *tiny_load_all(const char *arch, uint32_t type, uint64_t seed, char *path, size_t cap) {
    tiny_spec sp = tiny_default(arch);
    sp.matrix_type = type;
    sp.embd_type = type;
    sp.n_embd = 256;
    sp.n_ff = 512;
    sp.head_dim = 64;
    sp.n_vocab = 300;
    sp.seed = seed;
    tiny_path(path, cap);
    lean_error err = {0};
    lean_model *m = NULL;
    CHECK(tiny_write(&sp, path, NULL, &err) == LEAN_OK, "%s", err.msg);
    CHECK(lean_model_load_file(path, &m, &err) == LEAN_OK, "%s: %s", lean_type_name((int)type), err.msg);
    return m;
}

/* Fails the n-th allocation of load sp's model -> ctx (params p; NULL: the defaults) -> prefill
 * for every n, once and from then on: each must end in LEAN_ERR_NOMEM, or on the CPU where
 * auto's GPU rung ran out (session.c), with nothing leaked (ASan's leak check at exit). */
static inline void tiny_alloc_sweep(const tiny_spec *sp, const lean_ctx_params *p) {
    char path[256];
    tiny_path(path, sizeof path);
    lean_error err = {0};
    CHECK(tiny_write(sp, path, NULL, &err) == LEAN_OK, "%s", err.msg);
    const int32_t ids[3] = {5, 6, 7};
    float logits[97];
    for (int sticky = 0; sticky < 2; sticky++) {
        for (uint64_t n = 1; n < 10000; n++) {
            lean_model *m = NULL;
            lean_ctx *c = NULL;
            lean_alloc_fail_at(n, sticky);
            lean_status st = lean_model_load_file(path, &m, &err);
            if (st == LEAN_OK) st = lean_ctx_create(m, p, &c, &err);
            if (st == LEAN_OK) st = lean_prefill(c, ids, 3, logits, &err);
            const uint64_t used = lean_alloc_fail_at(0, false);
            const bool fell = st == LEAN_OK && lean_ctx_fallback(c) && strstr(lean_ctx_fallback(c), "(out of memory)");
            lean_ctx_free(c);
            lean_model_free(m);
            if (used < n) { /* no allocation failed: the sweep is over */
                CHECK(st == LEAN_OK && n > 10, "only %llu allocations? status %d", (unsigned long long)n, st);
                break;
            }
            CHECK(st == LEAN_ERR_NOMEM || fell, "failing allocation %llu (sticky %d): status %d: %s",
                  (unsigned long long)n, sticky, st, st ? err.msg : "ok without falling back");
            if (st != LEAN_ERR_NOMEM && !fell) break;
        }
    }
    unlink(path);
}

#endif
