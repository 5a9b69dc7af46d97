/* backend.h — the small interface every backend implements (the CPU's two, WebGPU's).
 * Two lifetimes (DESIGN.md, "Lifetimes"):
 *   - the model-level part (lean_backend_model, optional): what every context of one model
 *     shares on the backend — on the GPU the device, the uploaded weights and the pipelines.
 *     Made by the model's first context of that backend, kept by the model (model.h,
 *     lean_model_share) and freed with it: N contexts upload the weights once. The CPU has
 *     none: its contexts read the weights where the model mapped them.
 *   - a backend state: one sequence, its KV cache, activations, bind groups, generation.
 *     A state is used by one thread at a time, but states of one model may be used by
 *     several threads at once: a backend serializes what they share (the GPU its device).
 * Positions are token indices; the caller (lean_ctx in session.c) checks ranges. */
#ifndef LEAN_BACKEND_H
#define LEAN_BACKEND_H

#include "core/lora.h"
#include "core/model.h"
#include "core/sampler.h"

typedef struct lean_backend_model lean_backend_model;
typedef struct lean_backend_state lean_backend_state;
struct lean_gpu_options; /* src/gpu/gpu.h */

/* Everything a backend is created with (create_config). */
typedef struct lean_backend_config {
    int32_t n_ctx;     /* KV cache length in tokens */
    int32_t n_batch;   /* the most tokens one forward call gets (1 <= n_batch <= n_ctx) */
    int32_t n_threads; /* CPU threads; 0 = one per CPU; backends without threads ignore it */
    int32_t n_seq;     /* lean_ctx_params.n_seq (>= 0): the GPU's KV page size (gpu/kvpool.h) */
    const char *isa;   /* CPU kernel table (kernels.h): NULL = the best this CPU runs */
    bool hardware_only; /* GPU backends: fail (LEAN_ERR_UNSUPPORTED) on a software adapter */
    bool exact;         /* lean_ctx_params.exact: the GPU keeps every matmul in F32 */
    bool profile;       /* lean_ctx_params.profile: the GPU counts and times its dispatches */
    const struct lean_gpu_options *gpu; /* the GPU's kernel variants; NULL: the library's (tests) */
    lean_progress_fn progress;          /* lean_ctx_params.progress: model_create's uploads */
    void *progress_user;
    /* NULL, or (a GPU-only load, model.c) where the tensors model_create takes come from: their
     * views have no data; model_create makes the buffers and names the tensors
     * (lean_weight_source_expect), the load gives their bytes, then calls model_finish;
     * progress counts bytes per piece */
    lean_weight_source *source;
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
     * every setting of the config, over the model-level part bm (NULL for a backend without
     * model_create); the state holds a reference to bm until destroy. */
    lean_status (*create_config)(const lean_model *m, lean_backend_model *bm, const lean_backend_config *cfg,
                                 lean_backend_state **out, lean_error *err);
    /* Optional, the model-level part (NULL: none). It depends only on the model and the
     * device, never on a context's settings (pipelines are cached by their source, so a variant
     * chosen per context is made once per device and key). session.c calls these three, and
     * create_config, under the model's lock (contexts may be made from several threads).
     * model_create: makes it, hardware_only as in the config, holding one reference: the model's.
     * model_check: whether bm serves a new context with cfg. LEAN_ERR_DEVICE when its device is
     *   lost: session.c then lets it go and makes another for this and later contexts (a lost
     *   device does not poison the model; contexts still on it fail with LEAN_ERR_DEVICE until
     *   freed, and the last one frees it). Other failures as create_config's. *alone: bm cannot
     *   serve this thread (Dawn's OpenGL ES backend binds its context to the thread that opened
     *   the device): session.c makes this context a part of its own, as before parts were shared.
     * model_release: drops the model's reference (the part goes with the last context's). */
    lean_status (*model_create)(const lean_model *m, const lean_backend_config *cfg, lean_backend_model **out,
                                lean_error *err);
    lean_status (*model_check)(lean_backend_model *bm, const lean_backend_config *cfg, bool *alone, lean_error *err);
    void (*model_release)(lean_backend_model *bm);
    /* Optional, a GPU-only load's end (lean_backend_config.source): every piece has been given;
     * checks every tensor came whole and finishes the uploads. */
    lean_status (*model_finish)(lean_backend_model *bm, lean_error *err);
    /* Runs ids[0..n) at positions pos..pos+n (n <= n_batch), writing their K/V.
     * logits (nullable): n_vocab floats for the last of the n tokens. */
    lean_status (*forward)(lean_backend_state *s, const int32_t *ids, int32_t n, int32_t pos,
                           float *logits, lean_error *err);
    void (*destroy)(lean_backend_state *s);
    /* Optional, both or neither (NULL: session.c runs forward on each state in turn): one forward
     * pass over n sequences, one token each (lean_decode_batch). batch_check: LEAN_OK when s may
     * share first's pass (as row i: the message names it), else LEAN_ERR_ARG saying what
     * differs; session.c asks it for every row before any pass runs. forward_batch: row i is
     * ids[i] at position pos[i] of s[i] (its KV cache; pos[i] < its n_ctx); s[0..n) are distinct
     * states that passed batch_check with s[0], whose scratch and threads do the work, so
     * n <= s[0]'s n_batch. logits (nullable): (n, n_vocab), row i s[i]'s. A row's arithmetic
     * must not depend on the other rows (the same bits as forward of it alone). After a failure
     * no position counts as written. */
    lean_status (*batch_check)(const lean_backend_state *first, const lean_backend_state *s, int32_t i,
                               lean_error *err);
    lean_status (*forward_batch)(lean_backend_state *const *s, const int32_t *ids, const int32_t *pos, int32_t n,
                                 float *logits, lean_error *err);

    /* Optional, resident generation (lean.h, "generation"); NULL: session.c draws on the host.
     * gen_begin: from the logits of the last forward call (which asked for logits; the next
     * position is pos), draw with cfg at positions pos, pos + 1, ..., decoding each drawn id
     * so the next can be drawn, at most max_ids draws (pos + max_ids - 1 <= n_ctx). history:
     * the sampler's penalty history (sampler_history). masked: every draw is held to a mask
     * given to gen_next (a grammar's or the caller's: it may depend on the id drawn before, so
     * the backend runs no step ahead of the caller; only the mask goes to the device and only
     * the id comes back).
     * LEAN_ERR_UNSUPPORTED when this device cannot reproduce the host's draw (session.c then
     * draws on the host).
     * gen_next: the next drawn id, in order, waiting for it; the KV cache may run ahead.
     *   mask (LEAN_MASK_WORDS(n_vocab) words; ignored unless masked; NULL there: this draw
     *   unmasked): the draw's, read when its step is submitted (a call made again after
     *   LEAN_PENDING may pass it again or not: that step is already submitted).
     * gen_end: drops (waits out) the steps in flight, and a forward's read-back left pending
     *   (pump mode); safe after any failure. */
    lean_status (*gen_begin)(lean_backend_state *s, const sampler_cfg *cfg, const int32_t *history,
                             int32_t n_history, int32_t pos, int32_t max_ids, bool masked, lean_error *err);
    lean_status (*gen_next)(lean_backend_state *s, const uint32_t *mask, int32_t *id, lean_error *err);
    void (*gen_end)(lean_backend_state *s);
    /* Optional (NULL: session.c steps each generation alone): gen_next of n resident
     * generations (states that passed batch_check with s[0]) in one pass, ids[i] s[i]'s; masks[i]
     * as gen_next's mask (NULL where s[i]'s generation is not masked, or this draw of it is not).
     * The same ids as gen_next of each alone. Never LEAN_PENDING. Like gen_next it may run steps
     * of a generation not masked ahead of the caller (gen_end drops them), and a state may come
     * to it with steps queued by gen_next or an earlier call. */
    lean_status (*gen_next_batch)(lean_backend_state *const *s, const uint32_t *const *masks, int32_t n,
                                  int32_t *ids, lean_error *err);

    /* Optional (NULL: nothing to wait for): LEAN_OK once every check of the work submitted so
     * far has come back clean; the first error it caught otherwise. Where waits cannot block
     * (pump mode: gpu.h, lean_gpu_settle) LEAN_PENDING until then; session.c asks before it
     * hands out a new context, so a kernel the device rejects fails lean_ctx_create. */
    lean_status (*settle)(lean_backend_state *s, lean_error *err);

    /* Optional (lean_ctx_backend_str; NULL: the name): what computes, for people, e.g.
     * "cpu (avx2, 2 threads)", "gpu (NVIDIA H200, Vulkan)"; NUL-terminated within cap. */
    void (*describe)(const lean_backend_state *s, char *text, size_t cap);

    /* Optional (lean_ctx_profile): the profile since the last call, per step. */
    lean_status (*profile)(lean_backend_state *s, int64_t steps, char *text, size_t cap, lean_error *err);

    /* KV access (kv_snapshot.c: snapshots and forks). Every backend keeps layer il's keys
     * (kind 0, after RoPE) and values (kind 1) as F32 rows of kv_dim, (n_ctx, kv_dim); a backend
     * gives either kv_host or kv_read and kv_write. Rows are token positions; the caller checks
     * ranges and that no generation is in flight.
     * kv_host: the (n_ctx, kv_dim) rows in host memory, read and written in place (the CPU's).
     * kv_read / kv_write: rows [0, n) to / from host bytes (any alignment), blocking.
     * kv_copy (optional): rows [0, n) of every layer from src to dst, both this backend's, on
     *   the backend itself (the GPU: device to device); LEAN_ERR_UNSUPPORTED when it cannot
     *   (another device), and the caller goes through host memory. */
    float *(*kv_host)(lean_backend_state *s, int32_t il, int kind);
    lean_status (*kv_read)(lean_backend_state *s, int32_t il, int kind, int32_t n, void *dst, lean_error *err);
    lean_status (*kv_write)(lean_backend_state *s, int32_t il, int kind, int32_t n, const void *src, lean_error *err);
    lean_status (*kv_copy)(lean_backend_state *dst, lean_backend_state *src, int32_t n, lean_error *err);
    /* Optional (NULL: the backend runs no LoRA, lean_ctx_set_loras fails LEAN_ERR_UNSUPPORTED):
     * the adapters the next forward calls apply (lora.h), NULL for none. set stays the context's,
     * unchanged until the next call here or destroy; on failure the previous set stays in force. */
    lean_status (*set_lora)(lean_backend_state *s, const lora_set *set, lean_error *err);
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
