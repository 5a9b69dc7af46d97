/* backend.h — the small interface every backend implements (CPU now, WebGPU later).
 * A backend state is one sequence: its KV cache and scratch activations.
 * Positions are token indices; the caller (lean_ctx in session.c) checks ranges. */
#ifndef LEAN_BACKEND_H
#define LEAN_BACKEND_H

#include "core/model.h"
#include "core/sampler.h"

typedef struct lean_backend_state lean_backend_state;

/* Everything a backend is created with (create_config). */
typedef struct lean_backend_config {
    int32_t n_ctx;     /* KV cache length in tokens */
    int32_t n_batch;   /* the most tokens one forward call gets (1 <= n_batch <= n_ctx) */
    int32_t n_threads; /* CPU threads; 0 = one per CPU; backends without threads ignore it */
    const char *isa;   /* CPU kernel table (kernels.h): NULL = the best this CPU runs */
    bool hardware_only; /* GPU backends: fail (LEAN_ERR_UNSUPPORTED) on a software adapter */
} lean_backend_config;

typedef struct lean_backend {
    const char *name;
    /* the prefill chunk (n_batch) when the caller names none: the GPU's kernels fill the
     * device only with hundreds of tokens a call, the CPU's gain nothing past tens */
    int32_t n_batch_default;
    /* n_ctx: KV cache length; n_batch: the most tokens one prefill call gets. NULL when
     * create_config is given (session.c calls create_config first). */
    lean_status (*create)(const lean_model *m, int32_t n_ctx, int32_t n_batch,
                          lean_backend_state **out, lean_error *err);
    /* Optional (NULL: create is used, with the config's n_ctx and n_batch): create with
     * every setting of the config. */
    lean_status (*create_config)(const lean_model *m, const lean_backend_config *cfg,
                                 lean_backend_state **out, lean_error *err);
    /* Runs ids[0..n) at positions pos..pos+n (n <= n_batch), writing their K/V.
     * logits (nullable): n_vocab floats for the last of the n tokens. */
    lean_status (*forward)(lean_backend_state *s, const int32_t *ids, int32_t n, int32_t pos,
                           float *logits, lean_error *err);
    void (*destroy)(lean_backend_state *s);

    /* Optional, resident generation (lean.h, "generation"); NULL: session.c draws on the host.
     * gen_begin: from the logits of the last forward call (which asked for logits; the next
     * position is pos), draw with cfg at positions pos, pos + 1, ..., decoding each drawn id
     * so the next can be drawn, at most max_ids draws (pos + max_ids - 1 <= n_ctx). history:
     * the sampler's penalty history (sampler_history). LEAN_ERR_UNSUPPORTED when this device
     * cannot reproduce the host's draw (session.c then draws on the host).
     * gen_next: the next drawn id, in order, waiting for it; the KV cache may run ahead.
     * gen_end: drops (waits out) the steps in flight; safe after any failure. */
    lean_status (*gen_begin)(lean_backend_state *s, const sampler_cfg *cfg, const int32_t *history,
                             int32_t n_history, int32_t pos, int32_t max_ids, lean_error *err);
    lean_status (*gen_next)(lean_backend_state *s, int32_t *id, lean_error *err);
    void (*gen_end)(lean_backend_state *s);

    /* Optional (lean_ctx_profile): the profile since the last call, per step. */
    lean_status (*profile)(lean_backend_state *s, int64_t steps, char *text, size_t cap, lean_error *err);
} lean_backend;

extern const lean_backend lean_backend_cpu_ref; /* src/cpu/forward_ref.c: the reference */
extern const lean_backend lean_backend_cpu;     /* src/cpu/forward.c: kernels, threads */
extern const lean_backend lean_backend_gpu;     /* src/gpu/forward.c: WebGPU */

/* What a lean_ctx_params.backend name runs (src/backends.c, the one place that knows the
 * list): the backend, its config's isa and hardware_only, and the backend to build instead
 * when it fails for any reason but out of memory (NULL: none, the failure is the answer). */
typedef struct lean_backend_choice {
    const lean_backend *be;
    const char *isa;     /* for the CPU backend: NULL = the best this CPU runs */
    bool hardware_only;  /* a GPU backend on a software adapter fails (and falls back) */
    const lean_backend *fallback;
} lean_backend_choice;
/* LEAN_ERR_ARG naming the choices for an unknown name; NULL is "auto". */
lean_status lean_backend_choose(const char *name, lean_backend_choice *out, lean_error *err);

#endif
