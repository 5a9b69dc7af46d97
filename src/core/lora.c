/* lora.c — LoRA adapter files (lean.h, "LoRA adapters") and the sets contexts apply.
 *
 * What it does: reads an adapter GGUF as llama.cpp writes it (convert_lora_to_gguf.py) and
 * checks it against the model it is for before anything is kept: the keys
 *     general.type          "adapter"
 *     adapter.type          "lora"
 *     general.architecture  the model's
 *     adapter.lora.alpha    f32, optional (0: the scale is used as it is)
 * and the tensors, each NAME.lora_a (rank, cols) or NAME.lora_b (rows, rank) for a 2-D weight
 * NAME (rows, cols) of the model (shapes here are (ne[1], ne[0]) as in model.h), both present,
 * of one rank, of a type lean reads with whole blocks per row. *_norm.weight tensors are
 * skipped, as llama.cpp skips them. token_embd.weight's pair is llama.cpp's embedding LoRA,
 * A and B flipped: lora_a (n_vocab, rank), lora_b (n_embd, rank) (convert_lora_to_gguf.py
 * transposes PEFT's lora_embedding_A for it; llama.cpp's build_inp_embd reads it so); it adapts
 * the lookup only, not a tied output. Then it makes a context's set (lora.h) from adapters and
 * scales. What it does not: compute (the backends' forward passes add the terms).
 *
 * Sections: adapter (load, checks) · sets
 */
#include "core/lora.h"

#include "core/formats.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- adapter ---- */

typedef struct lora_pair {
    int32_t site;     /* lora.h: lora_site / lora_site_output */
    int32_t rank;
    lean_tensor a, b; /* views into the adapter's bytes */
} lora_pair;

struct lean_lora {
    const lean_model *m;
    uint8_t *bytes; /* the file, owned */
    gguf_file *gguf;
    float alpha;
    int32_t n_pairs, max_rank;
    lora_pair *pairs;
};

void lean_lora_free(lean_lora *a) {
    if (!a) return;
    gguf_free(a->gguf);
    lean_free(a->pairs);
    lean_free(a->bytes);
    lean_free(a);
}

int32_t lean_lora_n_weights(const lean_lora *a) { return a ? a->n_pairs : 0; }
int32_t lean_lora_max_rank(const lean_lora *a) { return a ? a->max_rank : 0; }

static bool ends_with(const char *s, const char *suffix) {
    const size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* The site of the model's 2-D weight called base, or -1. */
static int32_t site_of(const lean_model *m, const char *base) {
    if (strcmp(base, m->tok_embd.name) == 0) return lora_site_embd(&m->hp);
    if (!m->tied_output && strcmp(base, m->output.name) == 0) return lora_site_output(&m->hp);
    int il;
    int used = 0;
    if (sscanf(base, "blk.%d.%n", &il, &used) != 1 || used == 0 || il < 0 || il >= m->hp.n_layer) return -1;
    const lean_layer *L = &m->layers[il];
    const lean_tensor *ws[LORA_N_SLOTS] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
    for (int k = 0; k < LORA_N_SLOTS; k++)
        if (strcmp(base, ws[k]->name) == 0) return lora_site(il, k);
    return -1;
}

/* The weight a site adapts. */
static const lean_tensor *weight_of(const lean_model *m, int32_t site) {
    if (site == lora_site_embd(&m->hp)) return &m->tok_embd;
    if (site == lora_site_output(&m->hp)) return &m->output;
    const lean_layer *L = &m->layers[site / LORA_N_SLOTS];
    const lean_tensor *ws[LORA_N_SLOTS] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
    return ws[site % LORA_N_SLOTS];
}

/* *out = a view of tensor ti (a matrix of any type lean reads, rows of whole blocks) in bytes. */
static lean_status view(const gguf_file *f, const gguf_tensor_info *ti, const uint8_t *bytes, lean_tensor *out,
                        lean_error *err) {
    const char *name = ti->name.ptr;
    if (ti->n_dims > 2)
        return LEAN_FAIL(err, LEAN_ERR_MODEL, "LoRA tensor '%s' has %u dimensions, expected a matrix (2)", name,
                         ti->n_dims);
    const lean_type_traits *tt = lean_type_traits_get(ti->type);
    if (!tt)
        return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "LoRA tensor '%s' has type %s (id %u), which lean does not read",
                         name, lean_ggml_type_name(ti->type) ? lean_ggml_type_name(ti->type) : "?", ti->type);
    uint64_t row_bytes;
    if (!lean_type_bytes(ti->type, (uint64_t)ti->ne[0], &row_bytes))
        return LEAN_FAIL(err, LEAN_ERR_MODEL, "LoRA tensor '%s': rows of %lld elements are not whole %s blocks of %u",
                         name, (long long)ti->ne[0], tt->name, tt->block_elems);
    if ((f->data_offset + ti->offset) % 4 != 0) /* F32 is read through float pointers, F16 as u16 */
        return LEAN_FAIL(err, LEAN_ERR_FORMAT, "LoRA tensor '%s' starts at byte %llu, not a multiple of 4", name,
                         (unsigned long long)(f->data_offset + ti->offset));
    *out = (lean_tensor){.name = name, .type = ti->type, .n_bytes = ti->n_bytes, .offset = ti->offset,
                         .data = bytes + f->data_offset + ti->offset};
    memcpy(out->ne, ti->ne, sizeof out->ne);
    return LEAN_OK;
}

/* The keys: an adapter, a LoRA, for the model's architecture; *alpha. */
static lean_status check_keys(const lean_model *m, const gguf_file *f, float *alpha, lean_error *err) {
    const gguf_value *v = gguf_find(f, "general.type");
    if (!v || v->type != GGUF_STRING || strcmp(v->v.str.ptr, "adapter") != 0)
        return LEAN_FAIL(err, LEAN_ERR_MODEL, "not a LoRA adapter: general.type is %s%s%s, expected \"adapter\"",
                         v && v->type == GGUF_STRING ? "\"" : "",
                         !v ? "missing" : v->type == GGUF_STRING ? v->v.str.ptr : "not a string",
                         v && v->type == GGUF_STRING ? "\"" : "");
    v = gguf_find(f, "adapter.type");
    if (!v || v->type != GGUF_STRING || strcmp(v->v.str.ptr, "lora") != 0)
        return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "adapter.type is %s, expected \"lora\"",
                         !v ? "missing" : v->type == GGUF_STRING ? v->v.str.ptr : "not a string");
    const char *arch, *model_arch;
    lean_status st = gguf_get_str(f, "general.architecture", &arch, err);
    if (st != LEAN_OK) return st;
    if ((st = gguf_get_str(m->gguf, "general.architecture", &model_arch, err)) != LEAN_OK) return st;
    if (strcmp(arch, model_arch) != 0)
        return LEAN_FAIL(err, LEAN_ERR_MODEL, "the adapter is for architecture '%s', the model is '%s'", arch,
                         model_arch);
    *alpha = 0.0f;
    if (gguf_find(f, "adapter.lora.alpha")) {
        if ((st = gguf_get_f32(f, "adapter.lora.alpha", alpha, err)) != LEAN_OK) return st;
        if (!isfinite(*alpha))
            return LEAN_FAIL(err, LEAN_ERR_MODEL, "adapter.lora.alpha is %g, expected a finite number", *alpha);
    }
    return LEAN_OK;
}

/* Pairs every NAME.lora_a with its NAME.lora_b and checks both against the model's NAME. */
static lean_status check_tensors(lean_lora *a, lean_error *err) {
    const lean_model *m = a->m;
    const gguf_file *f = a->gguf;
    const int32_t n_sites = lora_n_sites(&m->hp);
    int32_t *at = lean_malloc(sizeof *at * (size_t)n_sites); /* site -> its pair, or -1 */
    a->pairs = lean_calloc(f->n_tensors ? (size_t)f->n_tensors : 1, sizeof *a->pairs);
    if (!at || !a->pairs) {
        lean_free(at);
        return LEAN_FAIL(err, LEAN_ERR_NOMEM, "allocating the pairs of %llu LoRA tensors",
                         (unsigned long long)f->n_tensors);
    }
    for (int32_t i = 0; i < n_sites; i++) at[i] = -1;
    lean_status st = LEAN_OK;
    for (uint64_t i = 0; i < f->n_tensors && st == LEAN_OK; i++) {
        const gguf_tensor_info *ti = &f->tensors[i];
        const char *name = ti->name.ptr;
        if (ends_with(name, "_norm.weight")) continue;
        const bool is_a = ends_with(name, ".lora_a");
        if (!is_a && !ends_with(name, ".lora_b")) {
            st = LEAN_FAIL(err, LEAN_ERR_MODEL, "LoRA tensor '%s' is neither NAME.lora_a nor NAME.lora_b", name);
            break;
        }
        char base[GGUF_MAX_NAME + 1];
        snprintf(base, sizeof base, "%.*s", (int)(strlen(name) - strlen(".lora_a")), name);
        const int32_t site = site_of(m, base);
        if (site < 0) {
            st = LEAN_FAIL(err, LEAN_ERR_MODEL, "LoRA tensor '%s': the model has no weight '%s'%s", name, base,
                           strcmp(base, "output.weight") == 0 ? " (its output is tied to the embedding)" : "");
            break;
        }
        if (at[site] < 0) {
            at[site] = a->n_pairs++;
            a->pairs[at[site]].site = site;
        }
        lora_pair *p = &a->pairs[at[site]];
        lean_tensor *t = is_a ? &p->a : &p->b;
        st = view(f, ti, a->bytes, t, err); /* the reader refuses duplicate names: t was empty */
    }
    for (int32_t k = 0; k < a->n_pairs && st == LEAN_OK; k++) {
        const lora_pair *p = &a->pairs[k];
        const lean_tensor *w = weight_of(m, p->site);
        if (!p->a.name || !p->b.name) {
            st = LEAN_FAIL(err, LEAN_ERR_MODEL, "LoRA for '%s' has %s but no %s.%s", w->name,
                           p->a.name ? p->a.name : p->b.name, w->name, p->a.name ? "lora_b" : "lora_a");
            break;
        }
        /* A (rank, cols) and B (rows, rank) of W (rows, cols): ne [cols, rank] and [rank, rows]; the
         * embedding's pair flipped: A (n_vocab, rank), B (n_embd, rank), ne [rank, rows] and [rank, cols] */
        const bool embd = p->site == lora_site_embd(&m->hp);
        const int64_t rank = embd ? p->a.ne[0] : p->a.ne[1]; /* <= the file's bytes: the reader bounds every shape */
        const bool fits = embd ? p->a.ne[1] == w->ne[1] && p->b.ne[1] == w->ne[0] && p->b.ne[0] == rank
                               : p->a.ne[0] == w->ne[0] && p->b.ne[1] == w->ne[1] && p->b.ne[0] == rank;
        if (!fits)
            st = LEAN_FAIL(err, LEAN_ERR_MODEL,
                           "LoRA for '%s' (%lld rows, %lld cols): %s is [%lld, %lld] and %s is [%lld, %lld] (ne), "
                           "expected %s%lld%s and [rank, %lld]%s",
                           w->name, (long long)w->ne[1], (long long)w->ne[0], p->a.name, (long long)p->a.ne[0],
                           (long long)p->a.ne[1], p->b.name, (long long)p->b.ne[0], (long long)p->b.ne[1],
                           embd ? "[rank, " : "[", (long long)(embd ? w->ne[1] : w->ne[0]), embd ? "]" : ", rank]",
                           (long long)(embd ? w->ne[0] : w->ne[1]),
                           embd ? " (the embedding's A and B are flipped)" : "");
        a->pairs[k].rank = (int32_t)rank;
        if (rank > a->max_rank) a->max_rank = (int32_t)rank;
    }
    if (st == LEAN_OK && a->n_pairs == 0)
        st = LEAN_FAIL(err, LEAN_ERR_MODEL, "the adapter has no NAME.lora_a / NAME.lora_b tensors");
    lean_free(at);
    return st;
}

lean_status lean_lora_load_memory(const lean_model *m, const void *data, size_t size, lean_lora **out,
                                  lean_error *err) {
    if (!m || !data || !out) return LEAN_FAIL(err, LEAN_ERR_ARG, "lean_lora_load_memory: NULL argument");
    *out = NULL;
    lean_lora *a = lean_calloc(1, sizeof *a);
    uint8_t *bytes = lean_malloc(size);
    if (!a || !bytes) {
        lean_free(a);
        lean_free(bytes);
        return LEAN_FAIL(err, LEAN_ERR_NOMEM, "allocating a LoRA adapter of %zu bytes", size);
    }
    memcpy(bytes, data, size);
    a->m = m;
    a->bytes = bytes;
    lean_mapped_file view_of = {.data = bytes, .size = size};
    lean_status st = gguf_read(lean_read_mapped, &view_of, size, &a->gguf, err);
    if (st == LEAN_OK) st = check_keys(m, a->gguf, &a->alpha, err);
    if (st == LEAN_OK) st = check_tensors(a, err);
    if (st != LEAN_OK) {
        lean_lora_free(a);
        return st;
    }
    *out = a;
    return LEAN_OK;
}

lean_status lean_lora_load_file(const lean_model *m, const char *path, lean_lora **out, lean_error *err) {
    if (!m || !path || !out) return LEAN_FAIL(err, LEAN_ERR_ARG, "lean_lora_load_file: NULL argument");
    *out = NULL;
    FILE *fp = fopen(path, "rb");
    if (!fp) return LEAN_FAIL(err, LEAN_ERR_IO, "cannot open the LoRA adapter '%s'", path);
    lean_status st = LEAN_OK;
    uint8_t *bytes = NULL;
    off_t size = 0;
    if (fseeko(fp, 0, SEEK_END) != 0 || (size = ftello(fp)) < 0 || fseeko(fp, 0, SEEK_SET) != 0)
        st = LEAN_FAIL(err, LEAN_ERR_IO, "cannot find the size of '%s'", path);
    else if ((uint64_t)size > SIZE_MAX || !(bytes = lean_malloc((size_t)size)))
        st = LEAN_FAIL(err, LEAN_ERR_NOMEM, "reading '%s' (%lld bytes): out of memory", path, (long long)size);
    else if (size > 0 && fread(bytes, 1, (size_t)size, fp) != (size_t)size)
        st = LEAN_FAIL(err, LEAN_ERR_IO, "reading '%s': short read", path);
    fclose(fp);
    if (st == LEAN_OK) st = lean_lora_load_memory(m, bytes, (size_t)size, out, err);
    lean_free(bytes);
    return st;
}

/* ---- sets ---- */

void lora_set_free(lora_set *set) {
    if (!set) return;
    lean_free(set->first);
    lean_free(set->terms);
    lean_free(set);
}

bool lora_set_same(const lora_set *a, const lora_set *b) {
    if (!a || !b) return a == b;
    if (a->n_sites != b->n_sites || memcmp(a->first, b->first, sizeof *a->first * (size_t)(a->n_sites + 1)))
        return false;
    for (int32_t t = 0; t < a->first[a->n_sites]; t++) {
        const lora_term *x = &a->terms[t], *y = &b->terms[t];
        if (x->a != y->a || x->b != y->b || x->rank != y->rank || memcmp(&x->scale, &y->scale, sizeof x->scale))
            return false;
    }
    return true;
}

lean_status lora_set_make(const lean_model *m, lean_lora *const *loras, const float *scales, int32_t n,
                          lora_set **out, lean_error *err) {
    *out = NULL;
    if (n < 1 || !loras || !scales) return LEAN_FAIL(err, LEAN_ERR_ARG, "LoRA set: %d adapters (or NULL arrays)", n);
    int64_t n_terms = 0;
    for (int32_t i = 0; i < n; i++) {
        if (!loras[i]) return LEAN_FAIL(err, LEAN_ERR_ARG, "LoRA set: adapter %d is NULL", i);
        if (loras[i]->m != m) return LEAN_FAIL(err, LEAN_ERR_ARG, "LoRA set: adapter %d was loaded for another model", i);
        if (!isfinite(scales[i])) return LEAN_FAIL(err, LEAN_ERR_ARG, "LoRA set: scale %d is %g", i, scales[i]);
        n_terms += loras[i]->n_pairs;
    }
    const int32_t n_sites = lora_n_sites(&m->hp);
    lora_set *set = lean_calloc(1, sizeof *set);
    int32_t *fill = lean_calloc((size_t)n_sites + 1, sizeof *fill);
    if (set) {
        set->n_sites = n_sites;
        set->first = lean_calloc((size_t)n_sites + 1, sizeof *set->first);
        set->terms = lean_calloc((size_t)n_terms, sizeof *set->terms);
    }
    if (!set || !fill || !set->first || !set->terms) {
        lora_set_free(set);
        lean_free(fill);
        return LEAN_FAIL(err, LEAN_ERR_NOMEM, "allocating a LoRA set of %lld terms", (long long)n_terms);
    }
    /* counts per site, then prefix sums; terms of one site in the adapters' order */
    for (int32_t i = 0; i < n; i++)
        for (int32_t k = 0; k < loras[i]->n_pairs; k++) set->first[loras[i]->pairs[k].site + 1]++;
    for (int32_t s = 0; s < n_sites; s++) set->first[s + 1] += set->first[s];
    for (int32_t i = 0; i < n; i++) {
        const lean_lora *a = loras[i];
        for (int32_t k = 0; k < a->n_pairs; k++) {
            const lora_pair *p = &a->pairs[k];
            const float scale = a->alpha != 0.0f ? scales[i] * a->alpha / (float)p->rank : scales[i];
            set->terms[set->first[p->site] + fill[p->site]++] =
                (lora_term){.a = &p->a, .b = &p->b, .rank = p->rank, .scale = scale};
            if (p->rank > set->max_rank) set->max_rank = p->rank;
        }
    }
    for (int32_t s = 0; s < n_sites; s++) {
        int64_t r = 0;
        for (int32_t t = set->first[s]; t < set->first[s + 1]; t++) r += set->terms[t].rank;
        if (r > INT32_MAX) {
            lora_set_free(set);
            lean_free(fill);
            return LEAN_FAIL(err, LEAN_ERR_ARG, "LoRA set: the ranks of weight %d sum to %lld", s, (long long)r);
        }
        if (r > set->max_site_rank) set->max_site_rank = (int32_t)r;
    }
    lean_free(fill);
    *out = set;
    return LEAN_OK;
}
