/* model.c — a GGUF file -> a lean_model: architecture, hyperparameters, validated
 * tensor views.
 *
 * What it does: parses the header (gguf.c), picks the architecture from
 * general.architecture, reads and bounds-checks the hyperparameters, finds every tensor
 * the architecture needs and checks its shape and type, and only then points the tensor
 * views at the weights: into the mapping (lean_model_load_file) or into one owned buffer
 * filled by bounded reads in file order (lean_model_load_stream; also what load_file
 * falls back to, through stdio, where the host has no mmap, as in WASI; or pushed by the
 * caller, lean_model_loader), or into the caller's bytes (lean_model_load_memory); or,
 * GPU-only (lean_model_params.gpu_only), into no host buffer at all: the GPU backend's model
 * part is made during the load and takes every tensor from the stream as it comes
 * (lean_weight_source).
 * What it does not: compute anything, or convert any weight (they stay in their format).
 * Tensors the architecture does not use are ignored.
 *
 * Sections, in dependency order:
 *   limits            the largest hyperparameters we accept (so sizes never overflow)
 *   hyperparameters   <arch>.* keys -> lean_hparams
 *   tensors           name -> lean_tensor, with shape and type checks
 *   weights           binding views to mapped or streamed data
 *   streamed data    the data section walked in file order, pulled or pushed
 *   pushed load       lean_model_loader: the header kept until it parses, then the data
 *   load / free       the public loaders and their shared tail
 *   info              lean_model_get_info, lean_model_n_vocab, its tokenizer, its chat
 *                     template and the BOS / EOS texts a template is rendered with
 */
#include "core/model.h"

#include "core/backend.h"
#include "core/formats.h"
#include "cpu/repack.h"
#include "text/tokenizer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- limits ----
 * Far above any model we run, far below what would overflow: the largest product a
 * backend forms, n_layer * n_ctx * kv_dim * 4 bytes, stays below 2^63 for n_ctx <= 2^24. */
#define MAX_EMBD     (1 << 16)
#define MAX_FF       (1 << 20)
#define MAX_LAYER    1024
#define MAX_HEAD     1024
#define MAX_HEAD_DIM 1024
#define MAX_VOCAB    (1 << 22)
#define MAX_CTX      LEAN_MAX_N_CTX

/* Streamed loads read at most this many bytes per call (DESIGN.md: bounded chunks). */
#define STREAM_CHUNK_BYTES ((size_t)8 << 20)

/* ---- hyperparameters ---- */

static const char *const arch_names[] = {
    [LEAN_ARCH_LLAMA] = "llama", [LEAN_ARCH_QWEN2] = "qwen2", [LEAN_ARCH_QWEN3] = "qwen3"};

static lean_status parse_arch(const gguf_file *f, lean_arch *out, lean_error *err) {
    const char *name;
    if (!gguf_find(f, "general.architecture"))
        return LEAN_FAIL(err, LEAN_ERR_MODEL, "missing key 'general.architecture'");
    lean_status st = gguf_get_str(f, "general.architecture", &name, err);
    if (st != LEAN_OK) return st;
    for (int a = 0; a < (int)(sizeof arch_names / sizeof arch_names[0]); a++) {
        if (strcmp(name, arch_names[a]) == 0) {
            *out = (lean_arch)a;
            return LEAN_OK;
        }
    }
    return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED,
                     "architecture '%s' is not supported (lean runs llama, qwen2, qwen3)", name);
}

/* Reads the integer key "<arch>.<suffix>" into *out, which must land in [lo, hi].
 * def < 0: the key is required; otherwise it is the value when the key is absent. */
static lean_status get_count(const gguf_file *f, const char *arch, const char *suffix,
                             int64_t def, int32_t lo, int32_t hi, int32_t *out, lean_error *err) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    uint32_t v;
    const bool absent = gguf_find(f, key) == NULL;
    if (absent) {
        if (def < 0) return LEAN_FAIL(err, LEAN_ERR_MODEL, "missing key '%s'", key);
        v = (uint32_t)def;
    } else {
        lean_status st = gguf_get_u32(f, key, &v, err);
        if (st != LEAN_OK) return st;
    }
    if (v < (uint32_t)lo || v > (uint32_t)hi)
        return LEAN_FAIL(err, LEAN_ERR_MODEL, "%s is %u%s, expected %d..%d", key, v,
                         absent ? " (absent; the default)" : "", lo, hi);
    *out = (int32_t)v;
    return LEAN_OK;
}

/* Reads the float key "<arch>.<suffix>" (def used when absent, unless required), which
 * must be finite and in (0, hi]. */
static lean_status get_positive(const gguf_file *f, const char *arch, const char *suffix,
                                bool required, float def, float hi, float *out, lean_error *err) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    float v = def;
    if (!gguf_find(f, key)) {
        if (required) return LEAN_FAIL(err, LEAN_ERR_MODEL, "missing key '%s'", key);
    } else {
        lean_status st = gguf_get_f32(f, key, &v, err);
        if (st != LEAN_OK) return st;
    }
    if (!isfinite(v) || !(v > 0.0f) || v > hi)
        return LEAN_FAIL(err, LEAN_ERR_MODEL, "%s is %g, expected a number in (0, %g]", key,
                         (double)v, (double)hi);
    *out = v;
    return LEAN_OK;
}

/* Everything but n_vocab, which comes from token_embd's shape (see load_tensors). */
static lean_status parse_hparams(const gguf_file *f, lean_hparams *hp, lean_error *err) {
    lean_status st = parse_arch(f, &hp->arch, err);
    if (st != LEAN_OK) return st;
    const char *a = arch_names[hp->arch];
    if ((st = get_count(f, a, "context_length", -1, 1, MAX_CTX, &hp->n_ctx_train, err)) ||
        (st = get_count(f, a, "embedding_length", -1, 1, MAX_EMBD, &hp->n_embd, err)) ||
        (st = get_count(f, a, "block_count", -1, 1, MAX_LAYER, &hp->n_layer, err)) ||
        (st = get_count(f, a, "feed_forward_length", -1, 1, MAX_FF, &hp->n_ff, err)) ||
        (st = get_count(f, a, "attention.head_count", -1, 1, MAX_HEAD, &hp->n_head, err)) ||
        (st = get_count(f, a, "attention.head_count_kv", hp->n_head, 1, MAX_HEAD, &hp->n_head_kv,
                        err)))
        return st;
    if (hp->n_head % hp->n_head_kv != 0)
        return LEAN_FAIL(err, LEAN_ERR_MODEL, "n_head (%d) is not a multiple of n_head_kv (%d)",
                         hp->n_head, hp->n_head_kv);

    /* head_dim defaults to n_embd / n_head; qwen3 sets it apart (key_length). */
    int32_t head_dim_def = hp->n_embd / hp->n_head, v_dim, rope_dims;
    if ((st = get_count(f, a, "attention.key_length", head_dim_def, 1, MAX_HEAD_DIM, &hp->head_dim,
                        err)) ||
        (st = get_count(f, a, "attention.value_length", hp->head_dim, 1, MAX_HEAD_DIM, &v_dim,
                        err)) ||
        (st = get_count(f, a, "rope.dimension_count", hp->head_dim, 1, MAX_HEAD_DIM, &rope_dims,
                        err)))
        return st;
    if (v_dim != hp->head_dim)
        return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED,
                         "%s.attention.value_length is %d but key_length is %d: lean needs them equal",
                         a, v_dim, hp->head_dim);
    if (rope_dims != hp->head_dim)
        return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED,
                         "%s.rope.dimension_count is %d but head_dim is %d: partial RoPE is not supported",
                         a, rope_dims, hp->head_dim);
    if (hp->head_dim % 2 != 0)
        return LEAN_FAIL(err, LEAN_ERR_MODEL, "head_dim is %d, RoPE needs it even", hp->head_dim);

    if ((st = get_positive(f, a, "attention.layer_norm_rms_epsilon", true, 0.0f, 1.0f,
                           &hp->rms_eps, err)) ||
        (st = get_positive(f, a, "rope.freq_base", false, 10000.0f, 1e12f, &hp->rope_base, err)))
        return st;
    hp->rope_style = hp->arch == LEAN_ARCH_LLAMA ? LEAN_ROPE_NORM : LEAN_ROPE_NEOX;
    return LEAN_OK;
}

/* ---- tensors ---- */

/* "[64, 32]": the first n_dims of ne. */
static const char *shape_str(char *buf, size_t cap, const int64_t *ne, int n_dims) {
    size_t at = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < n_dims && at < cap; d++)
        at += (size_t)snprintf(buf + at, cap - at, "%s%lld", d ? ", " : "", (long long)ne[d]);
    if (at < cap) snprintf(buf + at, cap - at, "]");
    return buf;
}

enum tensor_kind { T_MATRIX, T_F32 }; /* a matrix may have any supported type; T_F32 must be F32 */

/* Finds tensor `name`, checks it has shape (ne1 rows, ne0 cols) — ne1 = 0 for a 1-D
 * tensor — and a type its kind allows, and fills *out (data stays NULL until bind).
 * An absent optional tensor leaves *out zeroed (name NULL). */
static lean_status get_tensor(const gguf_file *f, const char *name, int64_t ne0, int64_t ne1,
                              enum tensor_kind kind, bool required, lean_tensor *out,
                              lean_error *err) {
    memset(out, 0, sizeof *out);
    const gguf_tensor_info *ti = gguf_find_tensor(f, name);
    if (!ti) {
        if (!required) return LEAN_OK;
        return LEAN_FAIL(err, LEAN_ERR_MODEL, "tensor '%s' is missing", name);
    }
    const int64_t want[4] = {ne0, ne1 ? ne1 : 1, 1, 1};
    if (memcmp(ti->ne, want, sizeof want) != 0) {
        char got_s[96], want_s[64];
        return LEAN_FAIL(err, LEAN_ERR_MODEL, "tensor '%s' has shape %s, expected %s", name,
                         shape_str(got_s, sizeof got_s, ti->ne, (int)ti->n_dims),
                         shape_str(want_s, sizeof want_s, want, ne1 ? 2 : 1));
    }
    const lean_type_traits *tt = lean_type_traits_get(ti->type);
    if (!tt)
        return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "tensor '%s' has type %s (id %u), which lean does not support",
                         name, lean_ggml_type_name(ti->type) ? lean_ggml_type_name(ti->type) : "?", ti->type);
    if (kind == T_F32 && ti->type != LEAN_TYPE_F32)
        return LEAN_FAIL(err, LEAN_ERR_MODEL, "tensor '%s' has type %s, expected f32", name, tt->name);
    uint64_t row_bytes;
    if (!lean_type_bytes(ti->type, (uint64_t)ne0, &row_bytes))
        return LEAN_FAIL(err, LEAN_ERR_MODEL, "tensor '%s': rows of %lld elements are not whole %s blocks of %u",
                         name, (long long)ne0, tt->name, tt->block_elems);
    /* F32 tensors are read through float pointers, so they must be 4-byte aligned; the
     * data section start is (a multiple of the alignment, itself a power of two). */
    if (ti->type == LEAN_TYPE_F32 && (f->data_offset + ti->offset) % sizeof(float) != 0)
        return LEAN_FAIL(err, LEAN_ERR_FORMAT, "tensor '%s' (f32) starts at byte %llu, not a multiple of 4",
                         name, (unsigned long long)(f->data_offset + ti->offset));
    *out = (lean_tensor){.name = ti->name.ptr, .type = ti->type, .n_bytes = ti->n_bytes,
                         .offset = ti->offset};
    memcpy(out->ne, ti->ne, sizeof out->ne);
    return LEAN_OK;
}

/* The tensors of block il, named as llama.cpp names them ("blk.3.attn_q.weight"). */
static lean_status load_layer(const gguf_file *f, const lean_hparams *hp, int il, lean_layer *L,
                              lean_error *err) {
    const int64_t d = hp->n_embd, q_dim = lean_q_dim(hp), kv_dim = lean_kv_dim(hp), ff = hp->n_ff;
    const bool qwen2 = hp->arch == LEAN_ARCH_QWEN2, qwen3 = hp->arch == LEAN_ARCH_QWEN3;
    /* used: whether this architecture reads the tensor; when it does, it is required.
     * Others ignore it (a llama file with q/k norms still runs as llama). */
    const struct {
        const char *suffix;
        int64_t ne0, ne1;
        enum tensor_kind kind;
        bool used;
        lean_tensor *out;
    } specs[] = {
        {"attn_norm.weight", d, 0, T_F32, true, &L->attn_norm},
        {"attn_q.weight", d, q_dim, T_MATRIX, true, &L->wq},
        {"attn_k.weight", d, kv_dim, T_MATRIX, true, &L->wk},
        {"attn_v.weight", d, kv_dim, T_MATRIX, true, &L->wv},
        {"attn_output.weight", q_dim, d, T_MATRIX, true, &L->wo},
        {"attn_q.bias", q_dim, 0, T_F32, qwen2, &L->bq},
        {"attn_k.bias", kv_dim, 0, T_F32, qwen2, &L->bk},
        {"attn_v.bias", kv_dim, 0, T_F32, qwen2, &L->bv},
        {"attn_q_norm.weight", hp->head_dim, 0, T_F32, qwen3, &L->q_norm},
        {"attn_k_norm.weight", hp->head_dim, 0, T_F32, qwen3, &L->k_norm},
        {"ffn_norm.weight", d, 0, T_F32, true, &L->ffn_norm},
        {"ffn_gate.weight", d, ff, T_MATRIX, true, &L->w_gate},
        {"ffn_up.weight", d, ff, T_MATRIX, true, &L->w_up},
        {"ffn_down.weight", ff, d, T_MATRIX, true, &L->w_down},
    };
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        if (!specs[i].used) continue;
        char name[96];
        snprintf(name, sizeof name, "blk.%d.%s", il, specs[i].suffix);
        lean_status st = get_tensor(f, name, specs[i].ne0, specs[i].ne1, specs[i].kind, true,
                                    specs[i].out, err);
        if (st != LEAN_OK) return st;
    }
    return LEAN_OK;
}

/* token_embd first: its rows are n_vocab, which every other check may use. */
static lean_status load_tensors(lean_model *m, lean_error *err) {
    const gguf_file *f = m->gguf;
    lean_hparams *hp = &m->hp;
    const gguf_tensor_info *te = gguf_find_tensor(f, "token_embd.weight");
    if (!te) return LEAN_FAIL(err, LEAN_ERR_MODEL, "tensor 'token_embd.weight' is missing");
    if (te->ne[1] < 1 || te->ne[1] > MAX_VOCAB)
        return LEAN_FAIL(err, LEAN_ERR_MODEL, "tensor 'token_embd.weight' has %lld rows (n_vocab), expected 1..%d",
                         (long long)te->ne[1], MAX_VOCAB);
    hp->n_vocab = (int32_t)te->ne[1];
    const gguf_value *toks = gguf_find(f, "tokenizer.ggml.tokens");
    if (toks && toks->type == GGUF_ARRAY && toks->v.arr.count != (uint64_t)hp->n_vocab)
        return LEAN_FAIL(err, LEAN_ERR_MODEL,
                         "tokenizer.ggml.tokens has %llu tokens but token_embd.weight has %d rows",
                         (unsigned long long)toks->v.arr.count, hp->n_vocab);

    const int64_t d = hp->n_embd, V = hp->n_vocab;
    lean_status st;
    if ((st = get_tensor(f, "token_embd.weight", d, V, T_MATRIX, true, &m->tok_embd, err)) ||
        (st = get_tensor(f, "output_norm.weight", d, 0, T_F32, true, &m->output_norm, err)) ||
        (st = get_tensor(f, "output.weight", d, V, T_MATRIX, false, &m->output, err)) ||
        (st = get_tensor(f, "rope_freqs.weight", hp->head_dim / 2, 0, T_F32, false, &m->rope_freqs,
                         err)))
        return st;
    m->tied_output = m->output.name == NULL;
    if (m->tied_output) m->output = m->tok_embd;

    m->layers = lean_calloc((size_t)hp->n_layer, sizeof *m->layers);
    if (!m->layers)
        return LEAN_FAIL(err, LEAN_ERR_NOMEM, "allocating %d layer descriptors", hp->n_layer);
    for (int il = 0; il < hp->n_layer; il++)
        if ((st = load_layer(f, hp, il, &m->layers[il], err)) != LEAN_OK) return st;
    return LEAN_OK;
}

/* ---- weights ---- */

static void bind(lean_tensor *t, const uint8_t *data_section) {
    if (t->name) t->data = data_section + t->offset;
}

/* Points every view at data_section (the byte the file's data_offset maps to). */
static void bind_all(lean_model *m, const uint8_t *data_section) {
    bind(&m->tok_embd, data_section);
    bind(&m->output_norm, data_section);
    bind(&m->output, data_section);
    bind(&m->rope_freqs, data_section);
    for (int il = 0; il < m->hp.n_layer; il++) {
        lean_layer *L = &m->layers[il];
        lean_tensor *ts[] = {&L->attn_norm, &L->wq, &L->wk, &L->wv, &L->wo, &L->bq, &L->bk,
                             &L->bv, &L->q_norm, &L->k_norm, &L->ffn_norm, &L->w_gate, &L->w_up,
                             &L->w_down};
        for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) bind(ts[i], data_section);
    }
}

/* Bytes from data_offset to the end of the last tensor (the reader checked each fits the file). */
static uint64_t data_bytes(const gguf_file *f) {
    uint64_t end = 0;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        uint64_t e = f->tensors[i].offset + f->tensors[i].n_bytes;
        if (e > end) end = e;
    }
    return end;
}

/* ---- the streamed data section: pulled (a read callback) or pushed (lean_model_loader) ----
 * A lean_weight_source walks the tensors to read in file order: the data section into
 * m->weights (a host load), or, GPU-only, each tensor the GPU part takes, in pieces of at most
 * STREAM_CHUNK_BYTES of whole blocks through one buffer, given to the part's sink, and
 * rope_freqs into m->weights. source_want says which bytes come next and where they go;
 * source_got takes them. A pull reads exactly those; a push copies them out of what arrives,
 * skipping the bytes no tensor wants. */

typedef struct source_item {
    uint64_t offset, n_bytes; /* in the file */
    uint32_t block;           /* sink items come in pieces of whole blocks */
    int k;                    /* the sink's tensor k, or -1: into host */
    uint8_t *host;
    const char *name;
} source_item;

struct lean_weight_source {
    lean_model *m;
    const lean_backend *be; /* GPU-only: the backend whose part is being filled */
    source_item *items;
    int n_items, cur;
    uint64_t at, fill; /* bytes of items[cur] given on, and in chunk */
    uint8_t *chunk;
    lean_tensor_sink sink;
    void *user;
    lean_progress_fn progress; /* a host load's: bytes of the data section */
    void *progress_user;
};

static int by_offset(const void *a, const void *b) {
    const source_item *x = a, *y = b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }

/* The piece of item it that starts at its byte at. */
static uint64_t piece_of(const source_item *it, uint64_t at) {
    return min_u64(it->n_bytes - at, it->k < 0 ? STREAM_CHUNK_BYTES : STREAM_CHUNK_BYTES / it->block * it->block);
}

/* The next bytes the load wants: *n at file offset *off, into *dst; *n == 0 once all came. */
static void source_want(const lean_weight_source *s, uint64_t *off, uint8_t **dst, uint64_t *n) {
    *n = 0;
    if (s->cur == s->n_items) return;
    const source_item *it = &s->items[s->cur];
    *off = it->offset + s->at + s->fill;
    *dst = (it->k < 0 ? it->host + s->at : s->chunk) + s->fill;
    *n = piece_of(it, s->at) - s->fill;
}

/* n (<= source_want's) of the bytes wanted have come. */
static lean_status source_got(lean_weight_source *s, uint64_t n, lean_error *err) {
    const source_item *it = &s->items[s->cur];
    const uint64_t piece = piece_of(it, s->at);
    s->fill += n;
    if (s->fill < piece) return LEAN_OK;
    lean_status st = it->k < 0 ? LEAN_OK : s->sink(s->user, it->k, s->at, s->chunk, piece, err);
    s->at += piece, s->fill = 0;
    if (it->k < 0 && s->progress) s->progress(s->progress_user, s->at, it->n_bytes);
    if (s->at == it->n_bytes) s->cur++, s->at = 0;
    return st;
}

lean_status lean_weight_source_expect(lean_weight_source *s, const lean_tensor *const *ts, int n,
                                      lean_tensor_sink sink, void *user, lean_error *err) {
    lean_model *m = s->m;
    lean_tensor *host = m->rope_freqs.name ? &m->rope_freqs : NULL;
    s->items = lean_calloc((size_t)n + 1, sizeof *s->items);
    s->chunk = lean_malloc(STREAM_CHUNK_BYTES);
    if (host) m->weights = lean_malloc((size_t)host->n_bytes);
    if (!s->items || !s->chunk || (host && !m->weights))
        return LEAN_FAIL(err, LEAN_ERR_NOMEM, "allocating the %zu-byte buffer of a streamed load", STREAM_CHUNK_BYTES);
    const uint64_t base = m->gguf->data_offset;
    for (int k = 0; k < n; k++)
        s->items[s->n_items++] = (source_item){.offset = base + ts[k]->offset, .n_bytes = ts[k]->n_bytes, .k = k,
                                               .block = lean_type_traits_get(ts[k]->type)->block_bytes,
                                               .name = ts[k]->name};
    if (host) {
        s->items[s->n_items++] = (source_item){.offset = base + host->offset, .n_bytes = host->n_bytes, .k = -1,
                                               .host = m->weights, .name = host->name};
        host->data = m->weights; /* filled before the load returns */
    }
    qsort(s->items, (size_t)s->n_items, sizeof *s->items, by_offset);
    s->sink = sink, s->user = user;
    return LEAN_OK;
}

/* After the header: what the data section's bytes are read for. GPU-only, the GPU backend's
 * part is made now (device, buffers; lean_model_params.gpu_params), and names its tensors
 * (lean_weight_source_expect); else the data section goes to m->weights. */
static lean_status source_begin(lean_model *m, const lean_model_params *p, lean_weight_source *s, lean_error *err) {
    *s = (lean_weight_source){.m = m};
    if (!p || !p->gpu_only) {
        const uint64_t end = data_bytes(m->gguf);
        if (end > SIZE_MAX || !(m->weights = lean_malloc((size_t)end)))
            return LEAN_FAIL(err, LEAN_ERR_NOMEM, "allocating %llu bytes for tensor data", (unsigned long long)end);
        s->items = lean_calloc(1, sizeof *s->items);
        if (!s->items) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "allocating a streamed load");
        s->items[0] = (source_item){.offset = m->gguf->data_offset, .n_bytes = end, .k = -1, .host = m->weights};
        s->n_items = end > 0;
        if (p) s->progress = p->progress, s->progress_user = p->progress_user;
        return LEAN_OK;
    }
    const lean_ctx_params cp = p->gpu_params ? *p->gpu_params : lean_ctx_default_params();
    lean_backend_choice bc;
    lean_status st = lean_backend_choose(cp.backend, &bc, err);
    if (st != LEAN_OK) return st;
    if (!bc.be->model_create || !bc.be->model_finish)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "gpu_only: backend '%s' keeps no weights on a device (\"gpu\" or \"auto\")",
                         cp.backend);
    const lean_backend_config cfg = {.hardware_only = bc.hardware_only, .exact = cp.exact != 0,
                                     .profile = cp.profile != 0, .progress = p->progress,
                                     .progress_user = p->progress_user, .source = s};
    st = bc.be->model_create(m, &cfg, &m->share->part, err);
    if (st == LEAN_OK) m->share->be = s->be = bc.be;
    return st;
}

/* Every byte wanted has come: the part's uploads finish (GPU-only), or the views are bound.
 * LEAN_PENDING (pump mode: the uploads' checks are out): call again, it resumes there. */
static lean_status source_end(lean_weight_source *s, uint64_t pos, lean_error *err) {
    lean_status st = LEAN_OK;
    const source_item *it = s->cur < s->n_items ? &s->items[s->cur] : NULL;
    if (it && it->name)
        st = LEAN_FAIL(err, LEAN_ERR_IO, "reading tensor '%s': the stream ended at byte %llu, %llu bytes into it",
                       it->name, (unsigned long long)pos,
                       (unsigned long long)(pos > it->offset ? pos - it->offset : 0));
    else if (it)
        st = LEAN_FAIL(err, LEAN_ERR_IO, "reading tensor data: the stream ended at byte %llu, before byte %llu",
                       (unsigned long long)pos, (unsigned long long)(it->offset + it->n_bytes));
    else if (s->be)
        st = s->be->model_finish(s->m->share->part, err), s->m->gpu_only = st == LEAN_OK;
    else
        bind_all(s->m, s->m->weights);
    lean_free(s->items);
    lean_free(s->chunk);
    s->items = NULL, s->chunk = NULL;
    return st;
}

/* Reads what the source wants through read(), in file order. */
static lean_status source_pull(lean_weight_source *s, lean_read_fn read, void *user, uint64_t *pos,
                               lean_error *err) {
    for (;;) {
        uint64_t off, n;
        uint8_t *dst;
        source_want(s, &off, &dst, &n);
        if (!n) return LEAN_OK;
        const size_t got = read(user, off, dst, (size_t)n);
        *pos = off + got;
        if (got != n) return LEAN_OK; /* the stream ended: source_end names the tensor */
        lean_status st = source_got(s, n, err);
        if (st != LEAN_OK) return st;
    }
}

/* Takes n bytes that arrived at file offset pos. */
static lean_status source_push(lean_weight_source *s, uint64_t pos, const uint8_t *bytes, uint64_t n,
                               lean_error *err) {
    while (n) {
        uint64_t off, want;
        uint8_t *dst;
        source_want(s, &off, &dst, &want);
        if (!want) return LEAN_OK; /* past the last tensor */
        const uint64_t skip = min_u64(n, off > pos ? off - pos : 0); /* bytes no tensor wants */
        pos += skip, bytes += skip, n -= skip;
        const uint64_t take = min_u64(n, want);
        if (!take) continue;
        memcpy(dst, bytes, (size_t)take);
        pos += take, bytes += take, n -= take;
        lean_status st = source_got(s, take, err);
        if (st != LEAN_OK) return st;
    }
    return LEAN_OK;
}

/* ---- the pushed load (lean_model_loader) ---- */

static lean_status load_header(lean_read_fn read, void *user, uint64_t file_size, lean_model **out,
                               lean_error *err);

#define HEADER_FIRST_TRY ((size_t)64 << 10) /* bytes before the header is parsed the first time */

struct lean_model_loader {
    lean_model_params p;
    lean_ctx_params gpu;    /* p.gpu_params' copy */
    uint64_t file_size, pos; /* bytes pushed so far */
    uint8_t *head;          /* the bytes so far, until the header parses */
    size_t head_len, head_cap, next_try;
    lean_model *m;          /* once the header parsed */
    bool begun;             /* src made (GPU-only: the device open) and the header's bytes given it */
    lean_weight_source src;
    lean_status failed;     /* the first failure, returned again */
    lean_error why;
    bool resume;            /* the last push returned LEAN_PENDING: the same push again resumes */
    size_t resume_at;       /* at its byte resume_at */
};

/* A lean_read_fn over the bytes pushed so far; starved: it was asked past them. */
typedef struct head_reader {
    const uint8_t *bytes;
    size_t len;
    bool starved;
} head_reader;

static size_t head_read(void *user, uint64_t off, void *dst, size_t n) {
    head_reader *h = user;
    if (off >= h->len || n > h->len - off) h->starved = true;
    if (off >= h->len) return 0;
    if (n > h->len - off) n = h->len - off;
    memcpy(dst, h->bytes + off, n);
    return n;
}

lean_status lean_model_loader_begin(uint64_t file_size, const lean_model_params *p, lean_model_loader **out,
                                    lean_error *err) {
    if (!out) return LEAN_FAIL(err, LEAN_ERR_ARG, "lean_model_loader_begin: NULL argument");
    *out = lean_calloc(1, sizeof **out);
    if (!*out) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "allocating a model loader");
    lean_model_loader *l = *out;
    l->p = p ? *p : lean_model_default_params();
    if (l->p.gpu_params) l->gpu = *l->p.gpu_params, l->p.gpu_params = &l->gpu;
    l->file_size = file_size;
    l->next_try = HEADER_FIRST_TRY;
    return LEAN_OK;
}

/* Parses the header once enough has come (a starved parse waits for twice the bytes). */
static lean_status loader_header(lean_model_loader *l, bool last, lean_error *err) {
    if (l->head_len < l->next_try && !last) return LEAN_OK;
    head_reader h = {.bytes = l->head, .len = l->head_len};
    lean_error e;
    lean_status st = load_header(head_read, &h, l->file_size, &l->m, &e);
    if (st != LEAN_OK && h.starved && !last) {
        l->next_try = 2 * l->head_len;
        return LEAN_OK;
    }
    if (st != LEAN_OK && h.starved && l->head_len < l->file_size)
        return LEAN_FAIL(err, LEAN_ERR_IO, "the stream ended at byte %zu, inside the header (the file has %llu)",
                         l->head_len, (unsigned long long)l->file_size);
    if (err && st != LEAN_OK) *err = e;
    return st;
}

/* After the header: the data section's source (GPU-only: the device opens, which in pump mode
 * answers LEAN_PENDING until the browser has made it: then made again by the call made again),
 * given the bytes kept past the header. */
static lean_status loader_data(lean_model_loader *l, lean_error *err) {
    lean_status st = source_begin(l->m, &l->p, &l->src, err);
    if (st == LEAN_PENDING) return st;
    l->begun = true;
    if (st == LEAN_OK) st = source_push(&l->src, 0, l->head, l->head_len, err);
    lean_free(l->head);
    l->head = NULL;
    return st;
}

/* The loader's first failure, kept and returned by every later call. */
static lean_status loader_failed(lean_model_loader *l, lean_status st, lean_error *err) {
    if (st != LEAN_OK && !l->failed) {
        l->failed = st;
        if (err) l->why = *err;
        else l->why = (lean_error){.status = st};
    }
    return st;
}

lean_status lean_model_loader_push(lean_model_loader *l, const void *bytes, size_t n, lean_error *err) {
    if (!l || (n && !bytes)) return LEAN_FAIL(err, LEAN_ERR_ARG, "lean_model_loader_push: NULL argument");
    if (l->failed) {
        if (err) *err = l->why;
        return l->failed;
    }
    size_t at = 0; /* bytes of this push taken */
    if (l->resume) /* the push made again after LEAN_PENDING (lean.h): the same bytes */
        at = l->resume_at, l->resume = false;
    else if (n > l->file_size - l->pos)
        return loader_failed(l, LEAN_FAIL(err, LEAN_ERR_ARG, "lean_model_loader_push: %zu bytes past the %llu the "
                                          "file was said to have", n, (unsigned long long)l->file_size), err);
    lean_status st = LEAN_OK;
    const uint8_t *b = bytes;
    b += at, n -= at;
    while (st == LEAN_OK && n && !l->m) { /* the header: kept (up to the next try) until it parses */
        const size_t take = l->next_try > l->head_len && l->next_try - l->head_len < n ? l->next_try - l->head_len : n;
        if (take > l->head_cap - l->head_len) {
            size_t cap = l->head_cap ? l->head_cap : HEADER_FIRST_TRY;
            while (cap - l->head_len < take) cap *= 2;
            uint8_t *grown = lean_realloc(l->head, cap);
            if (!grown) return loader_failed(l, LEAN_FAIL(err, LEAN_ERR_NOMEM, "keeping %zu header bytes", cap), err);
            l->head = grown, l->head_cap = cap;
        }
        memcpy(l->head + l->head_len, b, take);
        l->head_len += take, l->pos += take, b += take, n -= take, at += take;
        st = loader_header(l, l->pos == l->file_size, err);
    }
    if (st == LEAN_OK && l->m && !l->begun) st = loader_data(l, err);
    if (st == LEAN_PENDING) {
        l->resume = true, l->resume_at = at;
        return st;
    }
    /* the sinks never wait (in pump mode the GPU's checks of the uploads come back later) */
    if (st == LEAN_OK && n) st = source_push(&l->src, l->pos, b, n, err);
    l->pos += n;
    return loader_failed(l, st, err);
}

void lean_model_loader_free(lean_model_loader *l) {
    if (!l) return;
    lean_free(l->src.items);
    lean_free(l->src.chunk);
    lean_model_free(l->m); /* the GPU part made so far with it */
    lean_free(l->head);
    lean_free(l);
}

lean_status lean_model_loader_end(lean_model_loader *l, lean_model **out, lean_error *err) {
    if (!l || !out) {
        lean_model_loader_free(l);
        return LEAN_FAIL(err, LEAN_ERR_ARG, "lean_model_loader_end: NULL argument");
    }
    *out = NULL;
    lean_status st = l->failed;
    if (st != LEAN_OK && err) *err = l->why;
    if (st == LEAN_OK && !l->m) st = loader_header(l, true, err); /* what came, parsed now */
    if (st == LEAN_OK && !l->begun) st = loader_data(l, err);
    if (st == LEAN_OK) st = source_end(&l->src, l->pos, err);
    if (st == LEAN_PENDING) return st; /* made again, it resumes (lean.h) */
    if (st == LEAN_OK) *out = l->m, l->m = NULL;
    lean_model_loader_free(l);
    return st;
}

/* ---- load / free ---- */

/* Header -> validated model without weights. On failure *out is NULL. */
static lean_status load_header(lean_read_fn read, void *user, uint64_t file_size, lean_model **out,
                               lean_error *err) {
    *out = NULL;
    lean_model *m = lean_calloc(1, sizeof *m);
    lean_model_share *share = lean_calloc(1, sizeof *share);
    if (!m || !share || !lean_mutex_init(&share->lock)) {
        lean_free(m);
        lean_free(share);
        return LEAN_FAIL(err, LEAN_ERR_NOMEM, "allocating the model");
    }
    m->share = share;
    lean_status st = gguf_read(read, user, file_size, &m->gguf, err);
    if (st == LEAN_OK) st = parse_hparams(m->gguf, &m->hp, err);
    if (st == LEAN_OK) st = load_tensors(m, err);
    /* a broken tokenizer does not stop the load: it keeps its error (tokenizer.c) */
    if (st == LEAN_OK) st = lean_tokenizer_for_model(m->gguf, &m->tokenizer, err);
    if (st != LEAN_OK) {
        lean_model_free(m);
        return st;
    }
    *out = m;
    return LEAN_OK;
}

static lean_status load_stream(lean_read_fn read, void *user, uint64_t file_size, const lean_model_params *p,
                               lean_model **out, lean_error *err);

/* Hosts without mmap (WASI) stream the file through stdio instead. */
static lean_status load_file_stdio(const char *path, const lean_model_params *p, lean_model **out,
                                   lean_error *err) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return LEAN_FAIL(err, LEAN_ERR_IO, "cannot open '%s'", path);
    lean_status st;
    off_t size;
    if (fseeko(fp, 0, SEEK_END) != 0 || (size = ftello(fp)) < 0)
        st = LEAN_FAIL(err, LEAN_ERR_IO, "cannot find the size of '%s'", path);
    else
        st = load_stream(lean_read_stdio, fp, (uint64_t)size, p, out, err);
    fclose(fp);
    return st;
}

lean_model_params lean_model_default_params(void) {
    return (lean_model_params){.progress = NULL, .gpu_only = 0, .gpu_params = NULL};
}

lean_status lean_model_load_file(const char *path, lean_model **out, lean_error *err) {
    return lean_model_load_file_params(path, NULL, out, err);
}

lean_status lean_model_load_file_params(const char *path, const lean_model_params *p, lean_model **out,
                                        lean_error *err) {
    if (!path || !out) return LEAN_FAIL(err, LEAN_ERR_ARG, "lean_model_load_file: NULL argument");
    *out = NULL;
    if (p && p->gpu_only) return load_file_stdio(path, p, out, err); /* read once, in file order */
    lean_mapped_file map;
    lean_status st = lean_map_file(path, &map, err);
    if (st == LEAN_ERR_UNSUPPORTED) return load_file_stdio(path, p, out, err);
    if (st != LEAN_OK) return st;
    lean_model *m;
    st = load_header(lean_read_mapped, &map, map.size, &m, err);
    if (st != LEAN_OK) {
        lean_unmap_file(&map);
        return st;
    }
    m->map = map;
    bind_all(m, (const uint8_t *)map.data + m->gguf->data_offset);
    if (p && p->progress) { /* mapped: nothing is read now */
        const uint64_t n = data_bytes(m->gguf);
        p->progress(p->progress_user, n, n);
    }
    *out = m;
    return LEAN_OK;
}

lean_status lean_model_load_memory(const void *data, size_t size, const lean_model_params *p, lean_model **out,
                                   lean_error *err) {
    if (!data || !out) return LEAN_FAIL(err, LEAN_ERR_ARG, "lean_model_load_memory: NULL argument");
    *out = NULL;
    /* the views are read as the types they hold, as from a page-aligned mapping */
    if ((uintptr_t)data % 16 != 0)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "lean_model_load_memory: data at %p is not aligned to 16 bytes",
                         data);
    if (p && p->gpu_only)
        return LEAN_FAIL(err, LEAN_ERR_ARG,
                         "lean_model_load_memory: gpu_only is for weights that never sit in host memory, and "
                         "these do: load them without it, or stream them (lean_model_load_stream_params)");
    /* a view, not a mapping: m->map stays empty, so lean_model_free leaves data to the caller */
    lean_mapped_file view = {.data = (void *)data, .size = size};
    lean_model *m;
    lean_status st = load_header(lean_read_mapped, &view, size, &m, err);
    if (st != LEAN_OK) return st;
    bind_all(m, (const uint8_t *)data + m->gguf->data_offset);
    if (p && p->progress) {
        const uint64_t n = data_bytes(m->gguf);
        p->progress(p->progress_user, n, n);
    }
    *out = m;
    return LEAN_OK;
}

lean_status lean_model_load_stream(lean_read_fn read, void *user, uint64_t file_size,
                                   lean_model **out, lean_error *err) {
    return load_stream(read, user, file_size, NULL, out, err);
}

lean_status lean_model_load_stream_params(lean_read_fn read, void *user, uint64_t file_size,
                                          const lean_model_params *p, lean_model **out, lean_error *err) {
    return load_stream(read, user, file_size, p, out, err);
}

static lean_status load_stream(lean_read_fn read, void *user, uint64_t file_size, const lean_model_params *p,
                               lean_model **out, lean_error *err) {
    if (!read || !out) return LEAN_FAIL(err, LEAN_ERR_ARG, "lean_model_load_stream: NULL argument");
    *out = NULL;
    lean_model *m;
    lean_status st = load_header(read, user, file_size, &m, err);
    if (st != LEAN_OK) return st;
    lean_weight_source src;
    uint64_t pos = m->gguf->data_offset;
    st = source_begin(m, p, &src, err);
    if (st == LEAN_OK) st = source_pull(&src, read, user, &pos, err);
    if (st == LEAN_OK) st = source_end(&src, pos, err);
    if (st == LEAN_PENDING) /* a GPU wait in pump mode: this call cannot be made again */
        st = LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "a GPU-only load through a read callback waits on the GPU, "
                       "which this host cannot do without JSPI: push the bytes through lean_model_loader");
    lean_free(src.items);
    lean_free(src.chunk);
    if (st != LEAN_OK) {
        lean_model_free(m);
        return st;
    }
    *out = m;
    return LEAN_OK;
}

void lean_model_free(lean_model *m) {
    if (!m) return;
    lean_ctx_free(m->share->settling); /* a pending lean_ctx_create never made again */
    /* every context is freed by now (lean.h): the model's reference is the part's last */
    if (m->share->part) m->share->be->model_release(m->share->part);
    lean_packed_free(m->share->packed);
    lean_mutex_destroy(&m->share->lock);
    lean_free(m->share);
    gguf_free(m->gguf);
    lean_tokenizer_free(m->tokenizer);
    lean_free(m->layers);
    lean_free(m->weights);
    if (m->map.data) lean_unmap_file(&m->map);
    lean_free(m);
}

/* ---- info ---- */

static const char *str_or_empty(const gguf_file *f, const char *key) {
    const gguf_value *v = gguf_find(f, key);
    return v && v->type == GGUF_STRING ? v->v.str.ptr : "";
}

void lean_model_get_info(const lean_model *m, lean_model_info *out) {
    const lean_hparams *hp = &m->hp;
    const gguf_file *f = m->gguf;
    memset(out, 0, sizeof *out);
    out->arch = arch_names[hp->arch];
    out->name = str_or_empty(f, "general.name");
    out->n_vocab = hp->n_vocab;
    out->n_embd = hp->n_embd;
    out->n_layer = hp->n_layer;
    out->n_head = hp->n_head;
    out->n_head_kv = hp->n_head_kv;
    out->head_dim = hp->head_dim;
    out->n_ff = hp->n_ff;
    out->n_ctx_train = hp->n_ctx_train;
    out->rope_base = hp->rope_base;
    out->rms_eps = hp->rms_eps;
    out->tied_output = m->tied_output;
    out->n_tensors = f->n_tensors > INT32_MAX ? INT32_MAX : (int32_t)f->n_tensors;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor_info *t = &f->tensors[i];
        if (t->type < 32) out->n_tensors_by_type[t->type]++;
        out->n_params += t->n_elems;
        out->weight_bytes += t->n_bytes;
    }
    out->tokenizer = str_or_empty(f, "tokenizer.ggml.model");
    out->has_chat_template = gguf_find(f, "tokenizer.chat_template") != NULL;
}

int32_t lean_model_n_vocab(const lean_model *m) { return m->hp.n_vocab; }

const lean_tokenizer *lean_model_tokenizer(const lean_model *m) { return m ? m->tokenizer : NULL; }

const char *lean_model_chat_template(const lean_model *m) {
    if (!m || !m->gguf) return NULL;
    const gguf_value *v = gguf_find(m->gguf, "tokenizer.chat_template");
    if (!v || v->type != GGUF_STRING) return NULL;
    return v->v.str.ptr;
}

static const char *token_text(const gguf_file *f, const char *id_key) {
    const gguf_value *id = gguf_find(f, id_key);
    const gguf_value *toks = gguf_find(f, "tokenizer.ggml.tokens");
    if (!id || !toks || toks->type != GGUF_ARRAY || toks->v.arr.elem_type != GGUF_STRING) return NULL;
    uint64_t i;
    switch (id->type) {
    case GGUF_U8: case GGUF_U16: case GGUF_U32: case GGUF_U64: i = id->v.u64; break;
    case GGUF_I8: case GGUF_I16: case GGUF_I32: case GGUF_I64:
        if (id->v.i64 < 0) return NULL;
        i = (uint64_t)id->v.i64;
        break;
    default: return NULL;
    }
    if (i >= toks->v.arr.count) return NULL;
    return toks->v.arr.items[i].v.str.ptr;
}

void lean_chat_params_from_model(const lean_model *m, lean_chat_params *p) {
    if (!m || !m->gguf || !p) return;
    const char *bos = token_text(m->gguf, "tokenizer.ggml.bos_token_id");
    const char *eos = token_text(m->gguf, "tokenizer.ggml.eos_token_id");
    if (bos) p->bos_token = bos;
    if (eos) p->eos_token = eos;
}
