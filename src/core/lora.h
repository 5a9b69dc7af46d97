/* lora.h — LoRA adapters (lean.h, "LoRA adapters"): what a backend sees of a context's set.
 *
 * A lean_lora is one adapter file checked against its model: for each adapted weight, the
 * views of its A (rank, cols) and B (rows, rank) in the adapter's own bytes; for the embedding
 * (rows n_vocab, cols n_embd: a lookup, not a product) A is (n_vocab, rank) and B (n_embd,
 * rank), as llama.cpp keeps them, and token id's row gets s * B A[id]. A lora_set is
 * what lean_ctx_set_loras made of the adapters and scales a context applies: per adapted
 * weight ("site"), the terms s * B (A x) to add to W x, in the order the adapters were given.
 * The context owns the set; a backend reads it (backend.h, set_lora) until the next one. */
#ifndef LEAN_LORA_H
#define LEAN_LORA_H

#include "core/model.h"

/* The weights of a layer an adapter may adapt, in lean_layer's order. */
enum { LORA_WQ, LORA_WK, LORA_WV, LORA_WO, LORA_GATE, LORA_UP, LORA_DOWN, LORA_N_SLOTS };

/* Site of (layer il, slot); the output matrix is site lora_site_output(hp), the embedding
 * (token_embd.weight's lookup) lora_site_embd(hp), the last of lora_n_sites(hp). */
static inline int32_t lora_site(int32_t il, int slot) { return il * LORA_N_SLOTS + slot; }
static inline int32_t lora_site_output(const lean_hparams *hp) { return hp->n_layer * LORA_N_SLOTS; }
static inline int32_t lora_site_embd(const lean_hparams *hp) { return hp->n_layer * LORA_N_SLOTS + 1; }
static inline int32_t lora_n_sites(const lean_hparams *hp) { return hp->n_layer * LORA_N_SLOTS + 2; }

/* One adapter's addition to one weight: y += scale * B (A x); to the embedding of id,
 * x += scale * B A[id]. */
typedef struct lora_term {
    const lean_tensor *a; /* (rank, cols): A x is (rank); the embedding's: (n_vocab, rank) */
    const lean_tensor *b; /* (rows, rank) */
    int32_t rank;
    float scale;          /* the adapter's scale * alpha / rank (llama.cpp's get_scale) */
} lora_term;

typedef struct lora_set {
    int32_t n_sites;   /* lora_n_sites(hp) */
    int32_t *first;    /* (n_sites + 1): the terms of site i are terms[first[i] .. first[i + 1]) */
    lora_term *terms;
    int32_t max_rank;      /* the largest rank of any term */
    int32_t max_site_rank; /* the largest sum of the ranks of one site's terms */
} lora_set;

/* The terms of site i (n: how many). */
static inline const lora_term *lora_terms(const lora_set *set, int32_t site, int32_t *n) {
    *n = set ? set->first[site + 1] - set->first[site] : 0;
    return set ? set->terms + set->first[site] : NULL;
}

/* The longest row of any A (a layer matrix's columns) or B (rank) of set, a model of hp's:
 * a scratch row of this many floats holds any. */
static inline int32_t lora_row_cap(const lean_hparams *hp, const lora_set *set) {
    return set->max_rank > lean_max_cols(hp) ? set->max_rank : lean_max_cols(hp);
}

/* *out = the set of loras[0..n) with scales[0..n) for model m (n >= 1); every adapter was
 * loaded for m and every scale is finite, else LEAN_ERR_ARG. */
lean_status lora_set_make(const lean_model *m, lean_lora *const *loras, const float *scales, int32_t n,
                          lora_set **out, lean_error *err);
void lora_set_free(lora_set *set);
/* Whether a and b (nullable: none) add the same terms, so one pass may run both (a batch). */
bool lora_set_same(const lora_set *a, const lora_set *b);

#endif
