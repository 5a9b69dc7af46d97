/* backend.h — the small interface every backend implements (CPU now, WebGPU later).
 * A backend state is one sequence: its KV cache and scratch activations.
 * Positions are token indices; the caller (lean_ctx in session.c) checks ranges. */
#ifndef LEAN_BACKEND_H
#define LEAN_BACKEND_H

#include "model.h"
#include "sampler.h"

typedef struct lean_backend_state lean_backend_state;
struct lean_gpu_options; /* src/gpu/gpu.h */

/* Everything a backend is created with (create_config). */
typedef struct lean_backend_config {
    int32_t n_ctx;     /* KV cache length in tokens */
    int32_t n_batch;   /* the most tokens one forward call gets (1 <= n_batch <= n_ctx) */
    int32_t n_threads; /* CPU threads; 0 = one per CPU; backends without threads ignore it */
    const char *isa;   /* CPU kernel table (kernels.h): NULL = the best this CPU runs */
    bool hardware_only; /* GPU backends: fail (LEAN_ERR_UNSUPPORTED) on a software adapter */
    bool exact;         /* lean_ctx_params.exact: the GPU keeps every matmul in F32 */
    bool profile;       /* lean_ctx_params.profile: the GPU counts and times its dispatches */
    const struct lean_gpu_options *gpu; /* the GPU's kernel variants; NULL: the library's (tests) */
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

/* Internal, for tests: lean_ctx_create with the GPU backend's kernel variants forced (gpu.h's
 * lean_gpu_options; the params' exact and profile apply over them). */
lean_status lean_ctx_create_gpu(const lean_model *m, const lean_ctx_params *p, const struct lean_gpu_options *gpu,
                                lean_ctx **out, lean_error *err);
/* Internal, for tests: the backend a context runs on and its state (session.c). */
const lean_backend *lean_ctx_backend(const lean_ctx *c);
lean_backend_state *lean_ctx_backend_state(lean_ctx *c);
/* Whether the generation in progress runs on the backend (gen_begin took it). */
bool lean_ctx_gen_resident(const lean_ctx *c);
/* Internal, for tests, on a lean_backend_gpu state (src/gpu/forward.c): its device (to lose it
 * with lean_gpu_lose_device), and the GPU's argmax of its logits buffer as it is now: those of
 * the last forward call that asked for logits, or of a generation's last step (argmax.wgsl, a
 * command of its own; waits for the GPU). */
struct lean_gpu;
struct lean_gpu *lean_backend_gpu_device(lean_backend_state *s);
lean_status lean_backend_gpu_argmax(lean_backend_state *s, int32_t *id, lean_error *err);

#endif
