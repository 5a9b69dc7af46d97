/* backend.h — the small interface every backend implements (CPU now, WebGPU later).
 * A backend state is one sequence: its KV cache and scratch activations.
 * Positions are token indices; the caller (lean_ctx in session.c) checks ranges. */
#ifndef LEAN_BACKEND_H
#define LEAN_BACKEND_H

#include "model.h"

typedef struct lean_backend_state lean_backend_state;

typedef struct lean_backend {
    const char *name;
    /* n_ctx: KV cache length; n_batch: the most tokens one prefill call gets. */
    lean_status (*create)(const lean_model *m, int32_t n_ctx, int32_t n_batch,
                          lean_backend_state **out, lean_error *err);
    /* Runs ids[0..n) at positions pos..pos+n (n <= n_batch), writing their K/V.
     * logits (nullable): n_vocab floats for the last of the n tokens. */
    lean_status (*forward)(lean_backend_state *s, const int32_t *ids, int32_t n, int32_t pos,
                           float *logits, lean_error *err);
    void (*destroy)(lean_backend_state *s);
} lean_backend;

extern const lean_backend lean_backend_cpu_ref;

#endif
