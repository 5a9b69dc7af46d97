/* lean.h — the whole public C API of lean.
 *
 * lean runs GGUF language models (architectures llama, qwen2, qwen3) on WebGPU and on
 * the CPU. Everything a front end needs is declared here; nothing else in
 * the source tree is part of the contract.
 *
 *   lean_error err;
 *   lean_model *m;  lean_ctx *c;
 *   if (lean_model_load_file("model.gguf", &m, &err) != LEAN_OK) puts(err.msg);
 *   lean_ctx_params cp = lean_ctx_default_params();
 *   lean_ctx_create(m, &cp, &c, &err);
 *   float *logits = malloc(sizeof(float) * lean_model_n_vocab(m));
 *   lean_prefill(c, ids, n_ids, logits, &err);      // logits of the last id
 *   lean_decode(c, next_id, logits, &err);          // one more token
 *   lean_ctx_free(c); lean_model_free(m);
 *
 * Failure contract: every call that can fail returns a lean_status. When it is not
 * LEAN_OK, *err (if non-NULL) holds the same status and a message naming what is
 * wrong, with the numbers; output pointers are left NULL/untouched and nothing leaks.
 * The library never exits or aborts the process. Status values are only appended.
 *
 * Ownership: a lean_model is immutable once loaded and may be shared by several
 * lean_ctx (one per sequence), made and used from several threads; free every ctx
 * before its model. The model owns what its sequences share: the weights (mapped or
 * read once) and, on the GPU, the device and the uploaded weights, made by its first GPU
 * context and freed by lean_model_free, so N contexts hold one copy of the weights. A
 * lean_ctx owns its KV cache and activations, and is used by one thread at a time.
 * Once the model's device is lost (LEAN_ERR_DEVICE), the contexts on it keep failing and
 * the next GPU context opens a new one ("auto" takes the CPU if none comes). A GPU context
 * that asks for other device settings than the model's first (exact or profile where that one
 * did not, or the reverse for exact) opens a device and weights of its own, freed with it.
 */
#ifndef LEAN_H
#define LEAN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define LEAN_API __declspec(dllexport)
#else
#define LEAN_API __attribute__((visibility("default")))
#endif

/* The release: the Makefile reads LEAN_VERSION from this line for the shared library's name
 * (liblean.so.MAJOR.MINOR.PATCH, soname liblean.so.MAJOR) and lean.pc. */
#define LEAN_VERSION "0.1.0"
#define LEAN_VERSION_MAJOR 0
#define LEAN_VERSION_MINOR 1
#define LEAN_VERSION_PATCH 0
/* LEAN_VERSION as the library was built: compare it with the header a program was built with. */
LEAN_API const char *lean_version(void);

typedef enum lean_status {
    LEAN_OK = 0,
    LEAN_ERR_IO = 1,           /* a file could not be opened, read, mapped or written */
    LEAN_ERR_FORMAT = 2,       /* the file is malformed: truncated, bad magic, overflowing counts */
    LEAN_ERR_UNSUPPORTED = 3,  /* well-formed but not something lean runs: version, type, arch */
    LEAN_ERR_MODEL = 4,        /* a required key or tensor is missing or has the wrong shape/type */
    LEAN_ERR_NOMEM = 5,        /* an allocation failed */
    LEAN_ERR_ARG = 6,          /* the caller asked for something that makes no sense */
    LEAN_ERR_CONTEXT_FULL = 7, /* the tokens do not fit in the context */
    LEAN_ERR_DEVICE = 8,       /* the GPU device was lost or failed mid-work (the message says why) */
    LEAN_PENDING = 9,          /* not an error: the GPU has not answered yet; call again (below) */
} lean_status;

/* LEAN_PENDING: only the wasm32 build returns it, and only in a JavaScript host without JSPI
 * (WebAssembly.Suspending: Safari), where a GPU wait cannot block. Only these calls return it:
 * lean_ctx_create, lean_prefill, lean_decode, lean_gen_begin, lean_gen_next,
 * lean_chat_session_create, lean_chat_step, lean_chat_turn, lean_gpu_probe and, for a GPU-only
 * load, lean_model_loader_push and lean_model_loader_end. The call
 * stopped where it had to wait, with nothing lost: await settle() of web/webgpu_imports.mjs
 * (it resolves once the GPU requests the call found unanswered have answered), then make the
 * SAME call again
 * with the SAME arguments; it resumes there (no work is done twice, a kernel the device
 * rejected still fails lean_ctx_create). Make no other call on that context or session in
 * between, but lean_gen_end (it drops a pending prefill's read-back, or a generation's steps in
 * flight without waiting for them), a chat abort (the next step ends the turn: at once where
 * the pending step was a draw, else once that step is done) or a free; void calls never wait
 * there. Natively these calls block instead and never return it; with JSPI they block too,
 * unless the host cuts a wait on a buffer map short (web/webgpu_imports.mjs interrupt(): an
 * abort), when they return it as above. */

LEAN_API const char *lean_status_str(lean_status s);

/* Filled by failing calls. msg is always NUL-terminated. */
typedef struct lean_error {
    lean_status status;
    char msg[512];
} lean_error;

/* ---- tensor types: the GGUF/ggml type ids, so files and API agree ---- */
typedef enum lean_type {
    LEAN_TYPE_F32 = 0,
    LEAN_TYPE_F16 = 1,
    LEAN_TYPE_Q4_0 = 2,
    LEAN_TYPE_Q4_1 = 3,
    LEAN_TYPE_Q5_0 = 6,
    LEAN_TYPE_Q5_1 = 7,
    LEAN_TYPE_Q8_0 = 8,
    LEAN_TYPE_Q2_K = 10,
    LEAN_TYPE_Q3_K = 11,
    LEAN_TYPE_Q4_K = 12,
    LEAN_TYPE_Q5_K = 13,
    LEAN_TYPE_Q6_K = 14,
    LEAN_TYPE_BF16 = 30,
} lean_type;

/* "f32", "q4_k", ...; NULL for a type lean does not know. */
LEAN_API const char *lean_type_name(int type);
/* Parses "f32", "Q4_K", ... (case-insensitive); -1 if unknown. */
LEAN_API int lean_type_from_name(const char *name);

/* ---- progress of work that takes seconds (loading, uploading to the GPU, generating,
 * quantizing a model) ----
 * Called on the calling thread with done of total units (the call says which), done never
 * decreasing, the last call with done == total; total is the same on every call. For a front
 * end's progress bar: the library itself never prints. */
typedef void (*lean_progress_fn)(void *user, uint64_t done, uint64_t total);

/* ---- models ---- */
typedef struct lean_model lean_model;

/* Maps the file (mmap) and validates every tensor it needs. Where mmap does not exist
 * (wasm32-wasi) it loads through lean_model_load_stream over stdio instead. */
LEAN_API lean_status lean_model_load_file(const char *path, lean_model **out, lean_error *err);

/* How to load (lean_model_load_file_params). Zeroed, or lean_model_default_params(), is
 * lean_model_load_file. */
typedef struct lean_model_params {
    /* nullable: bytes of tensor data made ready. Read through stdio (no mmap), one call per
     * chunk read; mapped, one call (total, total) once the file is mapped and checked, as
     * the pages are read later, on first use; GPU-only (below), one call per piece uploaded,
     * of total = the bytes the GPU takes (as lean_ctx_params.progress counts them). */
    lean_progress_fn progress;
    void *progress_user;
    /* Nonzero: the GPU-only load, for a model larger than the host's memory (wasm32's 4 GiB).
     * The load makes the model's GPU part itself (the device and every weight on it, as a first
     * GPU context would), reading each tensor once, in file order, in pieces of at most 8 MiB
     * written straight to the device: the weights never sit in host memory. Host memory for the
     * weights peaks at the 8 MiB piece plus the repacking of one piece into its GPU layout (at
     * most 32768 blocks: 6.9 MB for Q6_K, 1 MB for Q8_0; none for F32, F16, Q4_1, Q5_1, Q4_K,
     * Q5_K), and rope_freqs (head_dim / 2 floats), which the host keeps for each context's RoPE
     * table. The header (tokenizer, chat template) is read as in any load. Such a model serves
     * GPU contexts only, all on that one device and with its settings: a CPU context, one with
     * other exact or profile settings, one on another thread where the device is OpenGL (ES),
     * and any after its device is lost fail (LEAN_ERR_UNSUPPORTED, or LEAN_ERR_DEVICE for the
     * loss), as the weights are on no other device to upload again. Streamed loads (a read
     * callback or lean_model_loader) and lean_model_load_file_params (which then reads the file
     * through stdio, once) honour it. */
    int32_t gpu_only;
    /* nullable, with gpu_only: the device's settings, read as a context's (backend: "gpu" for any
     * adapter, NULL or "auto" for a hardware one only, failing with LEAN_ERR_UNSUPPORTED on a
     * software one, a CPU name is LEAN_ERR_ARG; exact; profile); NULL: the defaults. Contexts
     * made with the same exact and profile share it ("auto" and "gpu" alike). */
    const struct lean_ctx_params *gpu_params;
} lean_model_params;
LEAN_API lean_model_params lean_model_default_params(void);
LEAN_API lean_status lean_model_load_file_params(const char *path, const lean_model_params *p, lean_model **out,
                                                 lean_error *err);

/* A model over a file's bytes the caller already holds in memory, data[0..size) (a browser
 * host's download, a file read by other means): used in place, as the mapping of
 * lean_model_load_file is, so the weights are never copied. The caller owns data: it keeps
 * it alive and unchanged until lean_model_free, then frees it itself (lean never writes or
 * frees it). data must be aligned to 16 bytes (malloc's). The checks, statuses and messages
 * are lean_model_load_file's; LEAN_ERR_ARG for a NULL data or out, or a misaligned data.
 * p (nullable): its progress is called once, (total, total), as for a mapped file; gpu_only
 * is LEAN_ERR_ARG (the weights are in host memory already). */
LEAN_API lean_status lean_model_load_memory(const void *data, size_t size, const lean_model_params *p,
                                            lean_model **out, lean_error *err);

/* Streamed load for hosts without mmap (wasm): the header is parsed from small reads,
 * then tensor data is read in file order straight into the model's weight memory.
 * read() copies n bytes at byte offset off into dst and returns the number copied
 * (fewer means the file ends there). */
typedef size_t (*lean_read_fn)(void *user, uint64_t off, void *dst, size_t n);
LEAN_API lean_status lean_model_load_stream(lean_read_fn read, void *user, uint64_t file_size,
                                            lean_model **out, lean_error *err);
/* The same with lean_model_params (progress per chunk read; gpu_only: tensors to the GPU). It
 * reads forward only: the header, then just the bytes of the tensors it takes, in file order. */
LEAN_API lean_status lean_model_load_stream_params(lean_read_fn read, void *user, uint64_t file_size,
                                                   const lean_model_params *p, lean_model **out, lean_error *err);

/* The streamed load driven by the caller, for bytes that arrive when they arrive (a fetch in a
 * browser, where a read callback could not wait for the network): begin with the file's size,
 * push its bytes in order in pieces of any size, end. What lean_model_load_stream_params does
 * with the same params, without a callback: the header is kept until it parses (it is tried at
 * 64 KiB and again each time the bytes pushed double), then the weights go to host memory or,
 * gpu_only, to the GPU as they come. A failed push keeps its error, returned by every later
 * push and by end; end fails with LEAN_ERR_IO naming the tensor the stream stopped in when
 * fewer than the file's bytes came. end frees the loader (free abandons one), but when it
 * returns LEAN_PENDING. This is the GPU-only load of a host without JSPI: the push that opens
 * the device (the header's end) and end (the uploads' checks) may return LEAN_PENDING, and are
 * made again as lean.h's pump says; a GPU-only load through a read callback there fails with
 * LEAN_ERR_UNSUPPORTED, as the callback could not be called again. */
typedef struct lean_model_loader lean_model_loader;
LEAN_API lean_status lean_model_loader_begin(uint64_t file_size, const lean_model_params *p, lean_model_loader **out,
                                             lean_error *err);
LEAN_API lean_status lean_model_loader_push(lean_model_loader *l, const void *bytes, size_t n, lean_error *err);
LEAN_API lean_status lean_model_loader_end(lean_model_loader *l, lean_model **out, lean_error *err);
LEAN_API void lean_model_loader_free(lean_model_loader *l);
/* A GGUF file's size from its first n bytes, for a stream whose length is not known up front (no
 * Content-Length, a gzip body): the header says where the data starts and where each tensor
 * ends. LEAN_OK with *size_min = *size_max = 0: the header goes on past these n bytes (err says
 * what it wants there); call again with more. Else the file is *size_min bytes (its last
 * tensor's end) to *size_max (that padded to general.alignment, as llama.cpp writes it). The
 * header's checks, statuses and messages are lean_model_load_file's (a file that is not GGUF,
 * a hostile header); it allocates what the header takes, within GGUF_MAX_HEADER_BYTES. */
LEAN_API lean_status lean_gguf_size(const void *prefix, size_t n, uint64_t *size_min, uint64_t *size_max,
                                    lean_error *err);
LEAN_API void lean_model_free(lean_model *m);

typedef struct lean_model_info {
    const char *arch;      /* "llama", "qwen2", "qwen3" */
    const char *name;      /* general.name, or "" */
    int32_t n_vocab, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff;
    int32_t n_ctx_train;   /* <arch>.context_length */
    float rope_base, rms_eps;
    int32_t tied_output;   /* 1 when output.weight is absent and token_embd is reused */
    int32_t n_tensors;
    int32_t n_tensors_by_type[32]; /* indexed by lean_type */
    const char *tokenizer; /* tokenizer.ggml.model, or "" */
    int32_t has_chat_template;
    uint64_t n_params;
    uint64_t weight_bytes;
} lean_model_info;
LEAN_API void lean_model_get_info(const lean_model *m, lean_model_info *out);
LEAN_API int32_t lean_model_n_vocab(const lean_model *m);

/* ---- contexts: one sequence, its KV cache and activations (the weights are the model's) ---- */
typedef struct lean_ctx lean_ctx;

typedef struct lean_ctx_params {
    int32_t n_ctx;     /* KV cache length in tokens; 0 = the model's n_ctx_train capped at 4096 */
    int32_t n_batch;   /* prefill chunk in tokens; 0 = the backend's: 512 on the GPU, 64 on the CPU */
    int32_t n_threads; /* CPU threads; 0 = one per CPU this process may use (1 in wasm) */
    /* The contexts of this n_ctx, this one among them, that the caller means to decode together
     * (lean_decode_batch, lean_gen_next_batch), as llama.cpp's n_seq_max; 0 = 1. The GPU keeps
     * the KV caches of a model's contexts in shared pages, and a batched pass runs one
     * attention a layer per page its rows lie in: a context that opens a page (none of its
     * n_ctx has a free slot) makes it of at least n_seq slots, so n_seq contexts made together
     * lie in one page. Past 64 slots (the most a page holds, and a batched pass's rows), or past
     * what one storage binding holds, the page is of as many as fit: more contexts lie in more
     * pages. Unset, the page is of as many slots as the pages of its n_ctx already hold (1, 1,
     * 2, 4, ...: a lone context allocates its own cache only). The CPU ignores it. */
    int32_t n_seq;
    /* Which backend computes:
     *   NULL or "auto": WebGPU when a hardware GPU adapter is found and the model loads onto
     *     it, else "cpu" (no WebGPU library, a software adapter such as llvmpipe, or any
     *     failure creating the GPU backend);
     *   "gpu": WebGPU on whatever adapter there is (software ones too); fails with the
     *     runtime's message (LEAN_ERR_UNSUPPORTED) when there is none;
     *   "cpu": the CPU kernels (the best instruction set this CPU has, threads);
     *   "cpu-generic", "cpu-avx2", "cpu-avx512", "cpu-neon", "cpu-relaxed", "cpu-simd128": that
     *     kernel table (for tests and measurements; LEAN_ERR_UNSUPPORTED where the CPU lacks it);
     *   "cpu-ref": the plain single-threaded reference.
     * The CPU kernels compute with 8-bit activations unless exact (below), so their logits are
     * close to, not the same bits as, the reference's; they are the same bits for every
     * n_threads and every n_batch, exact or not. The GPU computes in F32 like the reference, in
     * another summation order, except where exact is false (below). */
    const char *backend;
    /* The exact path (default false: the fast paths). Exact means F32 arithmetic throughout,
     * on every backend: the logits of transformers' computation within F32 rounding. Not exact,
     * the GPU runs prefill's matmuls in f16 where the adapter grants shader-f16, and Q8_0 and
     * Q4_0 prefill on 8-bit dot products where the adapter has them as instructions (not on a
     * software adapter or Apple's); `lean info --gpu` says which are in force. On the CPU,
     * not exact, the kernels ("cpu", "cpu-<isa>", auto's CPU rung) dot the quantized formats
     * with 8-bit activations; exact, with the float activations (each weight dequantized in
     * registers, F32 sums), threaded and SIMD as the default. Nonzero: exact. */
    int32_t exact;
    /* The GPU backend counts every dispatch and, where the adapter has timestamp-query, times
     * every kernel, for lean_ctx_profile (a profiled run is slower). Nonzero: profile. */
    int32_t profile;
    /* nullable: bytes of weights uploaded, when lean_ctx_create makes the model's GPU part (its
     * first GPU context, or one that cannot share it: see the top of this file), a call after
     * each tensor (or stack of tensors uploaded as one), of total = the bytes of every tensor it
     * uploads (lean_model_info.weight_bytes less those the GPU does not take: rope_freqs, and any
     * the architecture does not read). Never called when the part exists already, nor on the
     * CPU, whose contexts read the weights where the model mapped them. A failed upload stops
     * short of total ("auto" then takes the CPU). Called under the model's lock: it must not
     * create a context of the same model. */
    lean_progress_fn progress;
    void *progress_user;
} lean_ctx_params;
LEAN_API lean_ctx_params lean_ctx_default_params(void);

LEAN_API lean_status lean_ctx_create(const lean_model *m, const lean_ctx_params *p, lean_ctx **out,
                                     lean_error *err);
LEAN_API void lean_ctx_free(lean_ctx *c);
/* Tokens resident in the KV cache; the next prefill/decode writes at this position. */
LEAN_API int32_t lean_ctx_pos(const lean_ctx *c);
LEAN_API int32_t lean_ctx_n_ctx(const lean_ctx *c);
/* The prefill chunk in tokens: n_batch as asked, or the backend's default (lean_ctx_params). */
LEAN_API int32_t lean_ctx_n_batch(const lean_ctx *c);
/* What computes c, for people (a front end prints it once): "cpu (avx2, 2 threads)",
 * "cpu_ref", "gpu (NVIDIA H200, Vulkan)". Writes at most cap bytes, NUL-terminated (cut
 * short if need be), and returns text. */
LEAN_API const char *lean_ctx_backend_str(const lean_ctx *c, char *text, size_t cap);
/* Why the "auto" backend passed over the GPU for c: the GPU rung's error and its status
 * ("... (unsupported)" for no library or a software adapter, "... (out of memory)"), or NULL
 * when c runs on the rung it asked for first. */
LEAN_API const char *lean_ctx_fallback(const lean_ctx *c);
/* Forget every position >= n_pos (0 <= n_pos <= lean_ctx_pos). */
LEAN_API lean_status lean_ctx_truncate(lean_ctx *c, int32_t n_pos, lean_error *err);

/* Runs n ids starting at lean_ctx_pos() (in chunks of n_batch), appending them to the
 * cache. logits (nullable) receives n_vocab floats: the next-token logits after the
 * last id. LEAN_ERR_CONTEXT_FULL (and no change) when pos + n > n_ctx. */
LEAN_API lean_status lean_prefill(lean_ctx *c, const int32_t *ids, int32_t n, float *logits,
                                  lean_error *err);
/* One token: the same as lean_prefill of one id. */
LEAN_API lean_status lean_decode(lean_ctx *c, int32_t id, float *logits, lean_error *err);

/* ---- batches: several sequences of one model in one forward pass (src/core/session.c) ----
 * A server decodes its active sequences together. Each sequence is a lean_ctx (its own KV
 * cache and position); lean_decode_batch advances n of them by one token each in one forward
 * pass: the matmuls run over the n rows at once (the weights are read once for all of them),
 * each row attends to its own cache at its own position. A new request joins between steps:
 * lean_prefill its context (alone), then put it in the next batch (continuous batching).
 *
 *   lean_ctx *seq[3] = {a, b, c};            // contexts of one model, prefilled
 *   int32_t next[3] = {id_a, id_b, id_c};    // each one's next token
 *   float *logits = malloc(sizeof(float) * 3 * lean_model_n_vocab(m));
 *   lean_decode_batch(seq, next, 3, logits, &err);   // row i: seq[i]'s next-token logits
 *
 * Each ctx[i] ends as lean_decode(ctx[i], ids[i], row i of logits) would leave it, and what a
 * sequence computes does not depend on the others in the batch: on the CPU kernels (exact or
 * not) and on the GPU its logits are the same bits as decoded alone, so the same ids follow;
 * the reference ("cpu-ref") decodes the contexts one after another, with the same bits too.
 * Rules: ctx[0..n) are n distinct contexts of one model on one backend; where they share a
 * pass also with the same settings: on the CPU kernels the kernel table and exact, on the GPU
 * one device (contexts of one model share it unless their device options differ, or, on
 * OpenGL, they were made on another thread). A pass takes the contexts in order, up to
 * min(64, n_batch) of them, with the threads, n_batch and (GPU) activations of its first
 * (ctx[0] for the first pass); more contexts make more passes.
 * logits (nullable): n * n_vocab floats, row i the next-token logits of ctx[i], which are also
 * what a following lean_gen_begin on ctx[i] draws from. The contexts are used by the calling
 * thread for the call's duration (lean_ctx's one-thread rule holds for each).
 * Errors, found before anything runs (nothing changes), naming the index: LEAN_ERR_ARG for a
 * NULL pointer, n < 1, a context given twice, contexts of other models, backends or settings, a
 * context with a generation in progress or a prefill pending, an id outside the vocabulary;
 * LEAN_ERR_CONTEXT_FULL for a context whose cache is full. A backend failure midway (a lost
 * GPU) leaves each context either advanced or as it was (lean_ctx_pos tells). Never returns
 * LEAN_PENDING: in a host without JSPI a GPU context fails with LEAN_ERR_UNSUPPORTED. */
LEAN_API lean_status lean_decode_batch(lean_ctx *const *ctx, const int32_t *ids, int32_t n, float *logits,
                                       lean_error *err);
/* ---- LoRA adapters (src/core/lora.c; docs/lora.md) ----
 * Low-rank adapters in llama.cpp's GGUF format (convert_lora_to_gguf.py writes them):
 * general.type = "adapter", adapter.type = "lora", general.architecture the model's,
 * adapter.lora.alpha (absent: 0), and for each adapted weight W (rows, cols) of the model two
 * tensors W.lora_a (rank, cols) and W.lora_b (rows, rank), of any type lean reads. Adapted
 * weights: every layer's attn_q/k/v/output and ffn_gate/up/down, and output.weight (an untied
 * output); *_norm.weight tensors are ignored as llama.cpp ignores them. A context with adapters
 * computes, for each adapted W and input x,
 *     y = W x + sum over adapters: s * B (A x),   s = scale * alpha / rank (scale when alpha = 0)
 * as llama.cpp and PEFT do: nothing is merged into W, so adapters are switched between calls at
 * no cost, on several contexts of one model each with its own set. An adapter of
 * token_embd.weight (llama.cpp's flipped pair: lora_a ne [rank, n_vocab], lora_b ne [rank,
 * n_embd]) adds s * B A[t] to the embedding of id t, the lookup only (a tied output is not adapted).
 *
 *   lean_lora *a;
 *   lean_lora_load_file(m, "adapter.gguf", &a, &err);   // checked against m
 *   float scale = 1.0f;
 *   lean_ctx_set_loras(c, &a, &scale, 1, &err);           // the calls that follow use it
 *   lean_ctx_set_loras(c, NULL, NULL, 0, &err);           // and none again
 *   lean_lora_free(a);                                    // once no context uses it
 *
 * A file that does not fit the model is refused with LEAN_ERR_MODEL (or LEAN_ERR_UNSUPPORTED
 * for one lean does not read: an adapter.type other than lora, a tensor type), the message naming the tensor:
 * a weight the model lacks, shapes that do not match it, a lora_a without its lora_b, another
 * architecture. The adapter keeps its own copy of the file's bytes, and m must outlive it. */
typedef struct lean_lora lean_lora;
LEAN_API lean_status lean_lora_load_file(const lean_model *m, const char *path, lean_lora **out, lean_error *err);
/* The same from size bytes at data (copied: data may go once it returns). */
LEAN_API lean_status lean_lora_load_memory(const lean_model *m, const void *data, size_t size, lean_lora **out,
                                           lean_error *err);
LEAN_API void lean_lora_free(lean_lora *a);
/* Adapted weights (pairs of tensors) in a; the largest rank among them. */
LEAN_API int32_t lean_lora_n_weights(const lean_lora *a);
LEAN_API int32_t lean_lora_max_rank(const lean_lora *a);
/* The adapters the calls on c apply from now on, loras[i] with scales[i] (finite; 0 is
 * allowed and adds nothing); n = 0 (loras, scales NULL) removes them all. Each adapter must
 * have been loaded for c's model and outlive its use by c (until the next call here or
 * lean_ctx_free). The KV cache keeps what was computed before: truncate it to recompute a
 * prefix under the new adapters. The logits of the last call are dropped (lean_gen_begin
 * needs a prefill or decode first). LEAN_ERR_ARG during a generation or for a bad argument,
 * LEAN_ERR_UNSUPPORTED on a backend without LoRA (every backend of lean has it: docs/lora.md);
 * on failure the adapters in force stay. */
LEAN_API lean_status lean_ctx_set_loras(lean_ctx *c, lean_lora *const *loras, const float *scales, int32_t n,
                                        lean_error *err);

/* ---- tokenizers (src/text/tokenizer.c) ----
 * Text <-> token ids with the vocabulary a GGUF file carries (its tokenizer.ggml.* keys),
 * giving the ids Hugging Face `tokenizers` gives for the same tokenizer.json. Works on any
 * GGUF with those keys: a model, or a vocabulary-only file (no tensors).
 *
 *   lean_tokenizer *tok;
 *   if (lean_tokenizer_load_file("vocab.gguf", &tok, &err) != LEAN_OK) puts(err.msg);
 *   int32_t ids[256], n;
 *   lean_tokenize(tok, text, strlen(text), LEAN_TOKENIZE_ADD_SPECIAL, ids, 256, &n, &err);
 *   if (n > 256) { ... the buffer was short: n ids are needed; call again with more room }
 *   char out[1024]; size_t len;
 *   lean_detokenize(tok, ids, n, 0, out, sizeof out, &len, &err);   // out == text, here
 *   lean_tokenizer_free(tok);
 *
 * What is implemented (tokenizer.ggml.model / tokenizer.ggml.pre):
 *   "gpt2"  byte-level BPE, with the pre-tokenizer (word-splitting regex) the file names:
 *           "gpt-2" (GPT-2), "llama-bpe" / "llama3" / "llama-v3" (Llama 3), "qwen2" (Qwen2,
 *           Qwen2.5, Qwen3; NFC-normalized first, as their tokenizer.json says), "smollm" and
 *           "starcoder" (SmolLM/SmolLM2, StarCoder: digits one by one, then GPT-2's regex).
 *   "llama" SentencePiece-style BPE with byte fallback (Llama 2, TinyLlama): spaces as
 *           U+2581, one before each run of text (tokenizer.ggml.add_space_prefix).
 * Anything else fails to load with LEAN_ERR_UNSUPPORTED naming it.
 *
 * Text in is any bytes: invalid UTF-8 is first replaced, each maximal invalid subpart by
 * U+FFFD (as Python's errors="replace", JS's TextDecoder and Rust's from_utf8_lossy do before
 * HF sees the text). Text out is always valid UTF-8, with the same replacement for byte
 * sequences the ids spell that are not UTF-8 (HF's byte-level decoder does that too; its
 * SentencePiece one writes one U+FFFD per byte of such a run of <0xNN> tokens, and llama.cpp
 * hands the bytes out raw). Lengths are bytes; counts of ids are int32.
 * Unicode data is version 15.0: characters assigned later count as unassigned.
 *
 * Special tokens: the tokens of type CONTROL, USER_DEFINED and UNKNOWN are matched in the
 * text (leftmost, longest first) and never split; CONTROL and UNKNOWN ones only with
 * LEAN_TOKENIZE_PARSE_SPECIAL, USER_DEFINED ones always (as in HF and llama.cpp). A chat
 * prompt is tokenized with lean_chat_tokenize, which parses them only in the template's own
 * text, so user text cannot inject "<|im_end|>".
 *
 * A lean_tokenizer is immutable once loaded: any number of threads may use one at once.
 * A model's tokenizer (lean_model_tokenizer) lives as long as the model. */
typedef struct lean_tokenizer lean_tokenizer;

/* Reads only the tokenizer.* keys of any GGUF (the header; tensor data is not touched).
 * Errors: LEAN_ERR_IO/FORMAT from reading the file, LEAN_ERR_MODEL for missing or
 * ill-typed keys (naming the key and the numbers: "tokenizer.ggml.token_type has 3 entries
 * for 5 tokens", merges that name tokens not in the vocabulary, ids out of range),
 * LEAN_ERR_UNSUPPORTED for a model or pre-tokenizer lean does not implement. */
LEAN_API lean_status lean_tokenizer_load_file(const char *path, lean_tokenizer **out, lean_error *err);
/* The same through a read callback (see lean_read_fn), for hosts without files. */
LEAN_API lean_status lean_tokenizer_load_stream(lean_read_fn read, void *user, uint64_t file_size,
                                                lean_tokenizer **out, lean_error *err);
LEAN_API void lean_tokenizer_free(lean_tokenizer *t);

/* The tokenizer of a model's file, owned by the model (do not free it); NULL when the file
 * has no tokenizer.ggml.model key. A tokenizer whose keys are broken does not stop the model
 * from loading: it is returned all the same, and every call on it fails with the reason
 * (lean_tokenizer_check says it up front). */
LEAN_API const lean_tokenizer *lean_model_tokenizer(const lean_model *m);
/* LEAN_OK, or why this tokenizer cannot be used (into *err). */
LEAN_API lean_status lean_tokenizer_check(const lean_tokenizer *t, lean_error *err);

typedef enum lean_tokenize_flags {
    LEAN_TOKENIZE_ADD_SPECIAL = 1,   /* add BOS / EOS where the file says so
                                        (tokenizer.ggml.add_bos_token / add_eos_token): HF's
                                        add_special_tokens=True */
    LEAN_TOKENIZE_PARSE_SPECIAL = 2, /* control tokens written in the text ("<|im_start|>",
                                        "<s>") become their ids; without it they are text */
} lean_tokenize_flags;

/* text[0..text_bytes) -> ids. Writes min(*n_ids, max_ids) ids and sets *n_ids to the number
 * of ids the text makes: when *n_ids > max_ids the buffer was too small (ids = NULL,
 * max_ids = 0 just counts). Never more than 3 * text_bytes + 3 ids. text_bytes is at most
 * 2^29 (512 MiB; more is LEAN_ERR_ARG): split longer texts. */
LEAN_API lean_status lean_tokenize(const lean_tokenizer *t, const char *text, size_t text_bytes,
                                   uint32_t flags, int32_t *ids, int32_t max_ids, int32_t *n_ids,
                                   lean_error *err);

typedef enum lean_detokenize_flags {
    LEAN_DETOKENIZE_SKIP_SPECIAL = 1, /* leave out CONTROL and UNKNOWN tokens (BOS, EOS,
                                         "<|im_end|>"...): HF's skip_special_tokens=True */
} lean_detokenize_flags;

/* ids -> UTF-8 text, as HF's decode: each token's bytes (lean_token_piece), concatenated and
 * made valid UTF-8; for "llama" vocabularies with add_space_prefix, one leading space is
 * dropped (the one encoding added). Writes min(*n_bytes, max_bytes) bytes, then a NUL when
 * there is room; *n_bytes is the text's full length (so *n_bytes >= max_bytes means the
 * buffer was too small). LEAN_ERR_ARG names an id outside [0, n_tokens). */
LEAN_API lean_status lean_detokenize(const lean_tokenizer *t, const int32_t *ids, int32_t n_ids,
                                     uint32_t flags, char *text, size_t max_bytes, size_t *n_bytes,
                                     lean_error *err);

/* ---- token access (all return 0 / NULL / -1 for an id outside the vocabulary) */
typedef enum lean_token_type { /* GGUF's tokenizer.ggml.token_type values */
    LEAN_TOKEN_NORMAL = 1, LEAN_TOKEN_UNKNOWN = 2, LEAN_TOKEN_CONTROL = 3,
    LEAN_TOKEN_USER_DEFINED = 4, LEAN_TOKEN_UNUSED = 5, LEAN_TOKEN_BYTE = 6,
} lean_token_type;
LEAN_API int32_t lean_tokenizer_n_tokens(const lean_tokenizer *t);
LEAN_API int32_t lean_token_get_type(const lean_tokenizer *t, int32_t id); /* a lean_token_type */
/* The token as the vocabulary writes it ("Ġhello", "▁Hello", "<0x0A>"); *n_bytes (nullable)
 * gets its length. Owned by the tokenizer; NUL-terminated. */
LEAN_API const char *lean_token_text(const lean_tokenizer *t, int32_t id, size_t *n_bytes);
/* The bytes the token stands for (" hello", "\n"; maybe part of a UTF-8 character), the
 * SentencePiece prefix space not removed. Owned by the tokenizer; NUL-terminated. */
LEAN_API const char *lean_token_piece(const lean_tokenizer *t, int32_t id, size_t *n_bytes);
/* Special ids, -1 when the vocabulary has none. eot: tokenizer.ggml.eot_token_id, else the
 * first of "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", ... */
LEAN_API int32_t lean_token_bos(const lean_tokenizer *t);
LEAN_API int32_t lean_token_eos(const lean_tokenizer *t);
LEAN_API int32_t lean_token_eot(const lean_tokenizer *t);
/* 1 when generation should stop at id (llama.cpp's end-of-generation set): eos, eot, eom,
 * and the tokens "<|eot_id|>", "<|im_end|>", "<|endoftext|>", "<|end|>", "<end_of_turn>",
 * "<|eom_id|>", "<|end_of_text|>", "</s>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>"... */
LEAN_API int lean_token_is_eog(const lean_tokenizer *t, int32_t id);

typedef struct lean_tokenizer_info {
    const char *model;       /* "gpt2" or "llama" ("" when unusable) */
    const char *pre;         /* tokenizer.ggml.pre, or "" */
    int32_t n_tokens;
    int32_t bos, eos, eot, unk, pad; /* -1 when absent */
    int32_t add_bos, add_eos;        /* what LEAN_TOKENIZE_ADD_SPECIAL adds */
    int32_t add_space_prefix;        /* "llama": U+2581 before each run of text */
    int32_t normalize_nfc;           /* text is NFC-normalized first (qwen2) */
} lean_tokenizer_info;
LEAN_API void lean_tokenizer_get_info(const lean_tokenizer *t, lean_tokenizer_info *out);

/* ---- streaming: ids as they are generated -> text, whole characters only.
 * push() returns the text that id completes: a character split over several ids (a byte-
 * level emoji, SentencePiece byte tokens) comes out once its last byte is there. The
 * concatenation of everything push() and flush() return is exactly lean_detokenize of all
 * the ids with the same flags (the SentencePiece leading-space rule included). The text
 * handed back is owned by the stream and valid until its next call. flush() ends the
 * sequence: it returns what is held back (an unfinished character becomes U+FFFD) and
 * starts the stream afresh. The tokenizer must outlive the stream. */
typedef struct lean_text_stream lean_text_stream;
LEAN_API lean_status lean_text_stream_create(const lean_tokenizer *t, uint32_t flags /* lean_detokenize_flags */,
                                             lean_text_stream **out, lean_error *err);
LEAN_API lean_status lean_text_stream_push(lean_text_stream *s, int32_t id, const char **text,
                                           size_t *n_bytes, lean_error *err);
LEAN_API lean_status lean_text_stream_flush(lean_text_stream *s, const char **text, size_t *n_bytes,
                                            lean_error *err);
LEAN_API void lean_text_stream_free(lean_text_stream *s);

/* ---- chat templates (src/template/template.c) ---- */

/* Turning a conversation into the prompt text a model was trained on, by rendering the
 * model's own chat template (tokenizer.chat_template, a Jinja template) exactly as Hugging
 * Face transformers does with jinja2: the same bytes, or an error.
 *
 *   lean_chat_message msgs[] = {{"system", "You are terse."}, {"user", "Hi"}};
 *   lean_chat_params cp = lean_chat_default_params();
 *   lean_chat_params_from_model(m, &cp);          // bos_token / eos_token strings
 *   cp.add_generation_prompt = 1;
 *   char *text; size_t len;
 *   if (lean_chat_render_ex(lean_model_chat_template(m), msgs, 2, &cp, &text, &len, &err))
 *       ...;                                      // err.msg names the construct and where
 *   lean_chat_free(text);
 *
 * The template sees the variables transformers passes: messages (a list of {"role",
 * "content"} dicts), add_generation_prompt, bos_token and eos_token (undefined when NULL),
 * tools = none, documents = none; the globals raise_exception(msg) and strftime_now(fmt)
 * (now_s, UTC), range, dict, namespace; the filter tojson as transformers defines it
 * (json.dumps(x, ensure_ascii=False)).
 *
 * The Jinja subset (src/template/template_*.c say more): {{ }}, {% %}, {# #} with -/+ whitespace
 * control, trim_blocks and lstrip_blocks; if/elif/else, for (else, filtering "if", tuple
 * targets, loop.index/index0/revindex/first/last/length/previtem/nextitem/cycle/changed,
 * break/continue), set (names, tuples, namespace attributes, blocks), macro, filter blocks,
 * with, raw, generation; Python's operators, literals, slices and comparisons with its
 * semantics; the filters and tests jinja2 has except those listed below; str methods (strip,
 * split, startswith, replace, format, ...), dict.items/keys/values/get, list.index/count.
 * Refused with LEAN_ERR_UNSUPPORTED, the message naming the construct and its line/column:
 * include/import/extends/block, call blocks, recursive loops, autoescape, *args and **kwargs in
 * calls; the filters filesizeformat, groupby, pprint, random, striptags, urlencode, urlize,
 * wordwrap, xmlattr; the globals lipsum, cycler, joiner; integers beyond 64 bits; a
 * render past 256 MiB, nesting deeper than 100 levels, 32 nested macro calls or 10 million
 * steps. Case mapping (upper, lower, title, capitalize) is ASCII-only.
 *
 * Errors: LEAN_ERR_FORMAT, a malformed template ("template line 1 col 36: unexpected end of
 * template: the 'for' at line 1 col 4 is not closed (expected 'endfor')"); LEAN_ERR_UNSUPPORTED,
 * see above ("template line 3 col 15: filter 'groupby' is not supported"); LEAN_ERR_ARG, the
 * template refused the conversation: raise_exception ("template line 1 col 56: template
 * raised: System role not supported"), or a runtime error jinja2 raises too (an undefined
 * variable's attribute, a type error); LEAN_ERR_NOMEM.
 *
 * Fallback: a model without a template, or one whose template lean cannot render, can be
 * rendered as ChatML by asking for it explicitly: template_source NULL renders
 * lean_chat_template_chatml(). lean never falls back by itself. */
typedef struct lean_chat_message {
    const char *role;    /* "system", "user", "assistant", "tool", ...: any string */
    const char *content; /* UTF-8 text */
} lean_chat_message;

typedef struct lean_chat_params {
    int32_t add_generation_prompt; /* 1: end with the assistant turn's opening */
    const char *bos_token;         /* nullable: the template's bos_token (undefined if NULL) */
    const char *eos_token;         /* nullable: the template's eos_token */
    int64_t now_s;                 /* strftime_now's clock, seconds since 1970 UTC;
                                      LEAN_CHAT_NOW (the default) = the current time */
} lean_chat_params;
#define LEAN_CHAT_NOW INT64_MIN
LEAN_API lean_chat_params lean_chat_default_params(void);

/* Renders n messages through template_source (a NUL-terminated Jinja template; NULL = the
 * ChatML fallback). *out: a NUL-terminated string of *out_len bytes (out_len nullable),
 * owned by the caller, freed with lean_chat_free. On failure *out is left untouched. */
LEAN_API lean_status lean_chat_render(const char *template_source, const lean_chat_message *messages,
                                      size_t n, int add_generation_prompt, const char *bos_token,
                                      const char *eos_token, char **out, size_t *out_len,
                                      lean_error *err);
LEAN_API lean_status lean_chat_render_ex(const char *template_source,
                                         const lean_chat_message *messages, size_t n,
                                         const lean_chat_params *p, char **out, size_t *out_len,
                                         lean_error *err);
LEAN_API void lean_chat_free(char *s);

/* Renders the messages as lean_chat_render_ex does and tokenizes the text for a model, as
 * lean_tokenize with LEAN_TOKENIZE_PARSE_SPECIAL (not ADD_SPECIAL: templates write their own
 * BOS) except inside the messages: a CONTROL or UNKNOWN token's text that a role or content
 * holds is tokenized as the plain text it is. A user who types "<|im_end|>" gets the ids of
 * those ten characters (as lean_tokenize without PARSE_SPECIAL makes them, in the context of
 * the text around them), never the control token, so no one can close a turn or forge one
 * (transformers' apply_chat_template(tokenize=True) does read them as control tokens; lean
 * does not). The template's own text, bos_token and eos_token keep their control tokens;
 * a control token is read only when every one of its bytes came from there. USER_DEFINED
 * tokens are matched everywhere, as always. Conversations whose messages hold no control-token
 * text get exactly lean_tokenize(PARSE_SPECIAL)'s ids of the rendering.
 * How (src/core/prompt.c): the messages are rendered a second time with each such text
 * changed byte for byte, and the bytes where the renderings differ are the messages'. A
 * template whose output length depends on that text (it branches on it, or escapes other of
 * its characters than < and >) fails with LEAN_ERR_UNSUPPORTED. ids / max_ids / n_ids as
 * lean_tokenize. */
LEAN_API lean_status lean_chat_tokenize(const lean_tokenizer *t, const char *template_source,
                                        const lean_chat_message *messages, size_t n,
                                        const lean_chat_params *p, int32_t *ids, int32_t max_ids,
                                        int32_t *n_ids, lean_error *err);

/* The model file's tokenizer.chat_template, owned by the model; NULL when it has none. */
LEAN_API const char *lean_model_chat_template(const lean_model *m);
/* Sets p->bos_token / p->eos_token to the text of the model's tokenizer.ggml.bos_token_id /
 * eos_token_id tokens (owned by the model); leaves each untouched when the file lacks it. */
LEAN_API void lean_chat_params_from_model(const lean_model *m, lean_chat_params *p);
/* The ChatML template used when template_source is NULL:
 * <|im_start|>ROLE\nCONTENT<|im_end|>\n per message, then <|im_start|>assistant\n if asked. */
LEAN_API const char *lean_chat_template_chatml(void);

/* Parses a conversation written as JSON, [{"role": "...", "content": "..."}, ...] (other
 * keys are ignored), into *out (n messages, freed with lean_chat_messages_free). */
LEAN_API lean_status lean_chat_parse_messages(const char *json, size_t len, lean_chat_message **out,
                                              size_t *n, lean_error *err);
LEAN_API void lean_chat_messages_free(lean_chat_message *messages, size_t n);

/* ---- sampling (src/core/sampler.c) ---- */

/* Choosing the next id from logits with transformers' semantics and order: logit bias
 * (SequenceBiasLogitsProcessor with single ids; llama.cpp's logit_bias, also first in its
 * chain), repetition penalty (RepetitionPenaltyLogitsProcessor), temperature, top-k, top-p,
 * draw; the argmax after the bias and the penalty when greedy. The same seed gives the same ids on every
 * backend: the draw for a position depends only on (seed, position, logits, history), never
 * on what ran before. It is not torch's random stream (so not transformers' exact ids for a
 * seed); the distribution is transformers' (sampler.c lists every deviation: float32
 * rounding, ties at the k-th logit cut at k with the lower id first). top_k 0 or above 64
 * draws over the whole vocabulary (no candidate cap), on every backend.
 *
 *   lean_sampler_params sp = lean_sampler_default_params();
 *   sp.seed = 42;
 *   lean_sampler *s;
 *   lean_sampler_create(&sp, lean_model_n_vocab(m), &s, &err);
 *   lean_sampler_accept(s, prompt, n_prompt, &err);        // history for the penalty
 *   lean_prefill(c, prompt, n_prompt, logits, &err);
 *   for (...) {
 *       int32_t id;
 *       lean_sampler_sample(s, logits, lean_ctx_pos(c), NULL, &id, &err);
 *       lean_sampler_accept(s, &id, 1, &err);
 *       lean_decode(c, id, logits, &err);
 *   }
 *   lean_sampler_free(s);
 *
 * Defaults are llama.cpp's (common_params_sampling): temperature 0.8, top_k 40, top_p 0.95,
 * repeat_penalty 1.0 (off), repeat_last_n 64, a random seed. llama.cpp's min_p (0.05) has no
 * counterpart here: transformers applies none by default. Real-valued parameters are doubles
 * so that they round to float32 where Python's floats do in transformers (0.9 -> 1 - 0.9). */
#define LEAN_SEED_RANDOM UINT64_MAX /* a seed chosen at create time; see lean_sampler_seed */

/* One additive logit bias (OpenAI's and llama.cpp's logit_bias): value is added to id's raw
 * logit, in logit units (natural-log odds), before every other step: the penalty then sees
 * the biased logit, and the temperature divides it. Purely additive: -100 makes an id all but
 * impossible (its weight is at most e^-100 of another's at temperature 1) but does not remove
 * it the way a mask does; for a hard ban or exclusive choice use a lean_mask (lean serve maps
 * OpenAI's -100 and 100 to one). */
typedef struct lean_logit_bias {
    int32_t id;            /* in [0, n_vocab); each id at most once in a list */
    float value;           /* finite, in [-100, 100] (OpenAI's range); 0 adds nothing */
} lean_logit_bias;

typedef struct lean_sampler_params {
    double temperature;    /* >= 0; 0 = greedy (the argmax); default 0.8 */
    int32_t top_k;         /* >= 0; keep the k most likely ids; 0 = off; default 40 */
    double top_p;          /* in [0, 1]; keep the fewest most likely ids whose probabilities
                              reach top_p; 1 = off; default 0.95 */
    double repeat_penalty; /* > 0; logits of ids in the window: positive / penalty, negative
                              * penalty, once per distinct id; 1 = off; default 1.0 */
    int32_t repeat_last_n; /* the window: the last n accepted ids; -1 = the whole history
                              (prompt included, as transformers does); 0 = off; default 64 */
    uint64_t seed;         /* keys the draws; LEAN_SEED_RANDOM (default) = pick one */
    int32_t greedy;        /* nonzero: always the argmax after the bias, penalty and mask */
    const lean_logit_bias *logit_bias; /* n_logit_bias entries in any order (nullable when 0);
                              read by lean_sampler_create only (copied); default none */
    int32_t n_logit_bias;  /* >= 0 */
} lean_sampler_params;
LEAN_API lean_sampler_params lean_sampler_default_params(void);
/* LEAN_OK if every parameter is in range; otherwise LEAN_ERR_ARG naming it and its value
 * (a bias's id is checked against the vocabulary by lean_sampler_create, which knows it). */
LEAN_API lean_status lean_sampler_params_check(const lean_sampler_params *p, lean_error *err);

/* Logit masks for constrained decoding: a packed bitset of n_vocab bits, bit (id % 32) of
 * bits[id / 32] set when id may be drawn. Masked-out ids are never drawn (nor the argmax). */
typedef struct lean_mask {
    const uint32_t *bits;  /* LEAN_MASK_WORDS(n_vocab) words */
    int32_t n_vocab;       /* must equal the sampler's */
} lean_mask;
#define LEAN_MASK_WORDS(n_vocab) (((size_t)(n_vocab) + 31) / 32)
static inline void lean_mask_allow(uint32_t *bits, int32_t id) { bits[id >> 5] |= 1u << (id & 31); }
static inline int lean_mask_allows(const uint32_t *bits, int32_t id) { return (bits[id >> 5] >> (id & 31)) & 1; }

typedef struct lean_grammar lean_grammar; /* "grammars" below */

/* One sequence's sampler: its parameters (the logit bias list copied), its seed and the
 * history the penalty sees. LEAN_ERR_ARG for a parameter out of range (lean_sampler_params_check),
 * a bias id outside [0, n_vocab) or listed twice. */
typedef struct lean_sampler lean_sampler;
LEAN_API lean_status lean_sampler_create(const lean_sampler_params *p, int32_t n_vocab,
                                         lean_sampler **out, lean_error *err);
LEAN_API void lean_sampler_free(lean_sampler *s);
/* Forgets the history (the seed and parameters stay). */
LEAN_API void lean_sampler_reset(lean_sampler *s);
/* The seed in use: the one given, or the one chosen for LEAN_SEED_RANDOM (print it to
 * replay a run). */
LEAN_API uint64_t lean_sampler_seed(const lean_sampler *s);
/* Appends ids (each in [0, n_vocab)) to the history: the prompt, then every drawn id. */
LEAN_API lean_status lean_sampler_accept(lean_sampler *s, const int32_t *ids, int32_t n, lean_error *err);
/* Draws the next id from logits[n_vocab] (not modified). pos: the position the drawn token
 * will occupy (lean_ctx_pos before its decode); it keys the draw with the seed. mask
 * (nullable): only allowed ids are drawn. Does not add the id to the history.
 * LEAN_ERR_ARG if the mask does not match n_vocab or allows no id with a finite logit. */
LEAN_API lean_status lean_sampler_sample(lean_sampler *s, const float *logits, int32_t pos,
                                         const lean_mask *mask, int32_t *out_id, lean_error *err);
/* Holds every draw of s to grammar g (nullable: none; not owned, must outlive its use; see
 * "grammars" below): lean_sampler_sample then draws under g's mask (and the mask given, both)
 * and moves g on by the id drawn; it fails with g's error at a dead end. lean_gen_* with such
 * a sampler draws under g too: on the GPU one step at a time (a grammar's next mask depends on
 * the id just drawn, so the GPU cannot run ahead), the mask going down and the id coming back
 * each step, never the logits; the same ids as the host's draw. */
LEAN_API lean_status lean_sampler_set_grammar(lean_sampler *s, struct lean_grammar *g, lean_error *err);

/* ---- grammars (src/core/grammar*.c) ----
 * Output held to a grammar: GBNF as llama.cpp defines it (its grammars/README.md: rules
 * `name ::= ...`, "literals", [classes], ., ( ), * + ? {m,n}, <[id]> tokens, # comments),
 * or a JSON Schema turned into GBNF (lean_json_schema_to_gbnf). Each step the grammar writes
 * a lean_mask of the tokens that keep the output inside it (a token may span several grammar
 * symbols, or end inside a UTF-8 character); the sampler draws under that mask; the drawn
 * token moves the grammar on. docs/grammar.md has the whole story.
 *
 *   lean_grammar *g;
 *   lean_grammar_create(gbnf, strlen(gbnf), "root", lean_model_tokenizer(m), &g, &err);
 *   uint32_t *bits = malloc(LEAN_MASK_WORDS(n_vocab) * 4);
 *   lean_mask mask = {bits, n_vocab};
 *   for (...) {                                   // after lean_prefill(c, ..., logits, &err)
 *       if (lean_grammar_done(g)) break;          // nothing can follow: the reply is over
 *       if (lean_grammar_mask(g, bits, n_vocab, NULL, &err) != LEAN_OK) break; // dead end
 *       lean_sampler_sample(s, logits, lean_ctx_pos(c), &mask, &id, &err);
 *       if (lean_token_is_eog(tok, id)) break;    // allowed only once the grammar is complete
 *       lean_grammar_accept_token(g, id, &err);
 *       lean_sampler_accept(s, &id, 1, &err);
 *       lean_decode(c, id, logits, &err);
 *   }
 *   lean_grammar_free(g);
 *
 * Tokens: NORMAL, USER_DEFINED and BYTE tokens match by their bytes (lean_token_piece);
 * end-of-generation tokens are allowed when the output so far completes the grammar; other
 * control tokens only through <[id]>. A grammar is used by one thread at a time. */
/* llama.cpp's MAX_REPETITION_THRESHOLD: x{m,n} with m above it is refused (n above it means no
 * bound), and so are repetitions nested past that many copies. */
#define LEAN_GRAMMAR_MAX_REPEAT 2000
/* Parses gbnf (len bytes) with start rule root (NULL: "root"). t (nullable: then the grammar
 * takes text only, lean_grammar_accept_text) is the vocabulary the masks are over; it must
 * outlive the grammar. LEAN_ERR_FORMAT names the line and column of what is wrong: syntax,
 * an undefined rule, no root, left recursion, a repetition over 2000. */
LEAN_API lean_status lean_grammar_create(const char *gbnf, size_t len, const char *root, const lean_tokenizer *t,
                                         lean_grammar **out, lean_error *err);
LEAN_API void lean_grammar_free(lean_grammar *g);
/* Back to the start (no output yet). */
LEAN_API lean_status lean_grammar_reset(lean_grammar *g, lean_error *err);
/* Writes the tokens that may come next into bits (LEAN_MASK_WORDS(n_vocab) words; n_vocab >=
 * the vocabulary's size, ids past it never allowed); *n_allowed (nullable) counts them.
 * LEAN_ERR_ARG when no token can continue the output (a dead end: stop there). */
LEAN_API lean_status lean_grammar_mask(lean_grammar *g, uint32_t *bits, int32_t n_vocab, int32_t *n_allowed,
                                       lean_error *err);
/* Moves the grammar on by a token / by UTF-8 text; LEAN_ERR_ARG (nothing changes) when it
 * does not fit. */
LEAN_API lean_status lean_grammar_accept_token(lean_grammar *g, int32_t id, lean_error *err);
LEAN_API lean_status lean_grammar_accept_text(lean_grammar *g, const char *text, size_t n, lean_error *err);
/* Nonzero when the output so far is a whole sentence of the grammar (it may go on). */
LEAN_API int lean_grammar_complete(const lean_grammar *g);
/* Nonzero when the output is complete and nothing may follow: the reply ends here. */
LEAN_API int lean_grammar_done(const lean_grammar *g);
/* A JSON Schema (the subset docs/grammar.md lists: object properties/required/
 * additionalProperties false, array items/minItems/maxItems, enum, const, string, number,
 * integer, boolean, null, anyOf/oneOf, $ref to #/$defs or #/definitions) as GBNF text with
 * rule root, written to *gbnf (NUL-terminated, freed with lean_grammar_text_free). The JSON
 * it allows is compact (no whitespace between tokens but one optional space, as llama.cpp's
 * converter). LEAN_ERR_FORMAT names the schema path (e.g. #/properties/age) of what is
 * malformed; LEAN_ERR_UNSUPPORTED of what lies outside the subset. */
LEAN_API lean_status lean_json_schema_to_gbnf(const char *schema, size_t len, char **gbnf, lean_error *err);
LEAN_API void lean_grammar_text_free(char *gbnf);

/* ---- generation (src/core/session.c) ----
 * The decode loop with the drawn id kept on the backend. lean_gen_next hands out, bit for bit,
 * the ids of the step-by-step loop
 *     lean_sampler_sample(smp, logits, lean_ctx_pos(c), NULL, &id, &err);
 *     lean_sampler_accept(smp, &id, 1, &err);
 *     ...and before the next draw: lean_decode(c, id, logits, &err);
 * but on the GPU backend the draw runs on the GPU, the id feeds the next step's embedding
 * there, the backend runs steps ahead of the caller (about 50 ms of GPU work: up to 32 greedy
 * steps, read back up to 16 ids at a time; up to 8 sampled steps, read back one at a time; a
 * stop cannot recall them, so on a slow GPU fewer) and only ids cross to the host.
 * Elsewhere (the CPU backends, or a GPU whose arithmetic cannot reproduce the CPU's draw) the
 * same loop runs on the host.
 *
 *     lean_prefill(c, prompt, n, logits, &err);  // logits asked for: the first draw's
 *     lean_gen_begin(c, smp, 256, &err);         // at most 256 ids; 0 = until the context is full
 *     while (lean_gen_next(c, &id, &err) == LEAN_OK && !lean_token_is_eog(tok, id)) show(id);
 *     lean_gen_end(c);
 *
 * State: after k ids were handed out, lean_ctx_pos is the prompt's end + k - 1 (the last id is
 * drawn but not in the cache, as in the loop above) and the sampler has accepted all k. Stop
 * after any id: lean_gen_end drops what the backend ran ahead (those cache rows lie past
 * lean_ctx_pos, overwritten later) and leaves exactly the step-by-step state, so lean_decode
 * of the last id continues by hand. Between begin and end the context takes no other call.
 *
 * Errors: lean_gen_begin fails with LEAN_ERR_ARG when the context's last call did not compute
 * logits (prefill or decode without them, a truncate, or a generation since), when a
 * generation is already in progress, or when the sampler's n_vocab differs from the model's.
 * lean_gen_next fails with LEAN_ERR_CONTEXT_FULL when the next draw would be past n_ctx,
 * LEAN_ERR_ARG past max_ids, and with the backend's error (LEAN_ERR_DEVICE for a lost GPU);
 * after a failure only lean_gen_end is useful. With a grammar on the sampler
 * (lean_sampler_set_grammar) every draw is held to it and moves it on, as lean_sampler_sample
 * does (its dead end fails lean_gen_next with its error); on the GPU the draw stays resident
 * under the grammar's mask (written to the device each step: n_vocab / 8 bytes), but no step
 * runs ahead: one id is read back per step. */
LEAN_API lean_status lean_gen_begin(lean_ctx *c, lean_sampler *smp, int32_t max_ids, lean_error *err);
LEAN_API lean_status lean_gen_next(lean_ctx *c, int32_t *id, lean_error *err);
/* A no-op when no generation is in progress; it also ends a prefill left LEAN_PENDING (the
 * chunks it completed stay in the cache). */
LEAN_API void lean_gen_end(lean_ctx *c);
/* Many generations together (a server's slots): lean_gen_next of each of ctx[0..n), ids[i]
 * ctx[i]'s next id, with the last ids handed out decoded in one forward pass as
 * lean_decode_batch does (its rules: one model, one backend, passes of min(64, n_batch) rows
 * led by their first context). Each context keeps its own sampler (settings, seed, penalties,
 * grammar; a raw mask per draw through lean_gen_next_batch_masked, below) and gets the ids
 * lean_gen_next would give it alone. A generation joins by
 * lean_gen_begin on its prefilled context and leaves by lean_gen_end, between calls; ctx[i]
 * need not have drawn as many ids as the others. On the GPU the draws stay resident: each
 * context's sampler draws from its row on the device and only the n ids come back, and the
 * backend runs one step ahead, as lean_gen_next does: before a call waits for its ids it
 * submits the next step of every context whose draws take no mask (nothing the caller decides
 * changes that draw), so the GPU decodes step t + 1 while the host reads step t's ids. The
 * caller does nothing for it: the set of contexts may change between calls, a context may step
 * alone with lean_gen_next (it is then served its queued step first, and runs one step ahead
 * there too), and lean_gen_end drops the step in flight (its cache row lies past lean_ctx_pos).
 * A masked generation (a grammar, lean_gen_begin_masked) runs no step ahead: its next mask may
 * depend on the id just drawn. One generation alone (n = 1) on the device steps as
 * lean_gen_next does, through decode's kernels (faster than a batched pass of one row).
 *
 *     for (;;) {                                       // active[0..n): contexts in generation
 *         lean_gen_next_batch(active, n, next, &err);  // next[i]: active[i]'s id
 *         ...                                          // end the finished (lean_gen_end), drop them
 *     }
 *
 * Errors, found before anything runs, naming the index: LEAN_ERR_ARG for a NULL pointer, n < 1,
 * a context given twice, of another model or backend or setting, without a generation, whose
 * max_ids are drawn, or drawing on the host beside ones drawing on the device (ctx[0]'s side);
 * LEAN_ERR_CONTEXT_FULL for a generation at the end of its context. A failure midway (a
 * grammar's dead end, a lost device) may leave some contexts advanced: only lean_gen_end is
 * useful after it. Never LEAN_PENDING: in a host without JSPI a GPU context fails with
 * LEAN_ERR_UNSUPPORTED. */
LEAN_API lean_status lean_gen_next_batch(lean_ctx *const *ctx, int32_t n, int32_t *ids, lean_error *err);

/* Raw logit masks on a generation: each draw held to a bitset of allowed ids the caller gives
 * step by step (lean_mask above), on every backend; with a grammar on the sampler, to both.
 * On the GPU the draw stays resident: the mask goes down (n_vocab / 8 bytes) and one id comes
 * back per step, no step run ahead (the next mask may depend on the id just drawn).
 *
 *     lean_gen_begin_masked(c, smp, 64, &err);
 *     for (...) {
 *         memset(bits, 0, LEAN_MASK_WORDS(n_vocab) * sizeof *bits);
 *         lean_mask_allow(bits, some_id);                       // as many as allowed
 *         const lean_mask mask = {bits, n_vocab};
 *         if (lean_gen_next_masked(c, &mask, &id, &err) != LEAN_OK) break;
 *     }
 *     lean_gen_end(c);
 *
 * lean_gen_begin_masked is lean_gen_begin for such a generation (the same errors). In it
 * lean_gen_next_masked draws the next id among those mask allows (mask NULL: this draw
 * unmasked; the mask is read during the call only), and lean_gen_next is lean_gen_next_masked
 * with NULL. Errors, nothing drawn: LEAN_ERR_ARG for a generation begun with lean_gen_begin, a
 * mask whose n_vocab is not the model's (longer or shorter), bits NULL, a bit set past n_vocab,
 * or no bit set; a mask that allows only ids of non-finite logits (or none the grammar allows)
 * fails the draw, as lean_sampler_sample does. After LEAN_PENDING (the pump) call again with
 * the same mask. */
LEAN_API lean_status lean_gen_begin_masked(lean_ctx *c, lean_sampler *smp, int32_t max_ids, lean_error *err);
LEAN_API lean_status lean_gen_next_masked(lean_ctx *c, const lean_mask *mask, int32_t *id, lean_error *err);
/* lean_gen_next_batch with a mask per context: ids[i] is drawn among those masks[i] allows, the
 * id lean_gen_next_masked(ctx[i], masks[i], ...) would give ctx[i] alone. masks NULL, or
 * masks[i] NULL: that draw unmasked (lean_gen_next_batch is this with masks NULL); masks are
 * read during the call only. Contexts begun with lean_gen_begin and with lean_gen_begin_masked
 * may share a batch; on the GPU the masked rows draw resident, each mask going down
 * (n_vocab / 8 bytes) beside the pass. Errors, found before anything runs, naming the index:
 * lean_gen_next_batch's, and LEAN_ERR_ARG for masks[i] on a generation begun without masks, or
 * whose n_vocab is not the model's, bits NULL, a bit set past n_vocab, or no bit set (as
 * lean_gen_next_masked). A mask that allows only ids of non-finite logits fails the draw midway,
 * as a grammar's dead end does. */
LEAN_API lean_status lean_gen_next_batch_masked(lean_ctx *const *ctx, int32_t n, const lean_mask *const *masks,
                                                int32_t *ids, lean_error *err);

/* ---- KV snapshots and forks (src/core/kv_snapshot.c) ----
 * A context's KV cache (the keys and values of its lean_ctx_pos positions) saved as bytes in
 * host memory, to restore later into a context of the same model on any backend (CPU, cpu-ref,
 * GPU); and a fork: another context given the first n_pos positions of one (a shared prefix
 * computed once, then copied: device to device where both are on one GPU device).
 *
 *   size_t n;
 *   lean_kv_save(c, NULL, 0, &n, &err);     // the size: 64 + n_layer * 2 * pos * kv_dim * 4 bytes
 *   void *snap = malloc(n);
 *   lean_kv_save(c, snap, n, &n, &err);
 *   lean_kv_restore(c2, snap, n, &err);     // lean_ctx_pos(c2) == lean_ctx_pos(c)
 *   lean_decode(c2, next_id, logits, &err); // as c would go on, bit for bit on c's backend
 *
 *   lean_prefill(shared, prefix, n_prefix, NULL, &err);
 *   lean_kv_fork(branch, shared, n_prefix, &err);  // branch: any context of the model
 *   lean_prefill(branch, own_ids, n_own, logits, &err);
 *
 * A snapshot (src/core/kv_snapshot.h has its byte table) is a 64-byte header (magic, version,
 * the model's identity: a hash of its architecture, hyperparameters and every tensor's name,
 * type and shape; n_layer, kv_dim, the element type F32, the positions, a checksum) and then
 * each layer's keys (after RoPE) and values as F32, whatever backend wrote it. It holds the KV
 * rows only: the ids, the last logits and the sampler's state are the caller's. A context
 * restored (or forked into) holds exactly the positions given, and no logits: decode the next
 * id to get them (after lean_gen_end that is the last id handed out, which is not in the
 * cache). On the backend that saved it, the context then goes on with the same bits as one
 * that never stopped; on another, from the saver's numbers (the same ids on the exact path).
 * Two models of the same architecture, shapes and types (fine-tunes of one base) have the same
 * identity: keep each model's snapshots apart. Threads: a fork uses both contexts, so neither
 * may be in use on another thread meanwhile (contexts of one model elsewhere may be).
 *
 * Errors (the context unchanged): LEAN_ERR_ARG during a generation or a pending prefill, for
 * NULL arguments, or a buffer shorter than the snapshot (*n_bytes is still set to its size);
 * lean_kv_restore refuses a truncated or corrupted snapshot or not one at all
 * (LEAN_ERR_FORMAT), another version (LEAN_ERR_UNSUPPORTED), another model's
 * (LEAN_ERR_MODEL, both identities named), more positions than n_ctx (LEAN_ERR_CONTEXT_FULL).
 * A backend failing midway (a lost device: LEAN_ERR_DEVICE) leaves the context empty
 * (lean_ctx_pos 0). On the GPU in a host without JSPI (lean.h, LEAN_PENDING) reading the cache
 * cannot wait: lean_kv_save and a fork out of a GPU context on another device fail there with
 * LEAN_ERR_UNSUPPORTED. */

/* Writes the snapshot of c into buf[0..cap) and its size into *n_bytes; buf NULL and cap 0
 * only sets *n_bytes. */
LEAN_API lean_status lean_kv_save(lean_ctx *c, void *buf, size_t cap, size_t *n_bytes, lean_error *err);
/* Replaces c's cache with the snapshot bytes[0..n_bytes) (every check before any change). */
LEAN_API lean_status lean_kv_restore(lean_ctx *c, const void *bytes, size_t n_bytes, lean_error *err);
/* dst (another context of the same model, any backend and n_ctx) holds src's first n_pos
 * positions (0 <= n_pos <= lean_ctx_pos(src)) and nothing after; src is unchanged.
 * LEAN_ERR_MODEL for contexts of two models, LEAN_ERR_CONTEXT_FULL when n_pos > dst's n_ctx. */
LEAN_API lean_status lean_kv_fork(lean_ctx *dst, lean_ctx *src, int32_t n_pos, lean_error *err);

/* ---- profile ----
 * Where a context's GPU time goes. With lean_ctx_params.profile (or LEAN_PROFILE=1 in the
 * environment when the context is created: a debugging aid, docs/gpu.md), the GPU backend counts every dispatch and, where the adapter has
 * timestamp-query, times every kernel: each dispatch then runs in a compute pass of its own
 * between two timestamps and each submit waits for its times, so a profiled run is slower
 * than a plain one, but each kernel's time is its own. lean_ctx_profile writes (NUL-terminated,
 * at most cap bytes) the dispatches and, per kernel, calls and GPU time since its last call,
 * divided by steps (the decode steps or calls the caller ran since; 1 = totals), longest
 * first, and starts afresh. LEAN_ERR_UNSUPPORTED on the CPU backends or without profile.
 * `lean bench --profile` prints it for every measurement. */
LEAN_API lean_status lean_ctx_profile(lean_ctx *c, int64_t steps, char *text, size_t cap, lean_error *err);

/* ---- conversations (src/core/chat.c) ----
 * A chat session: a conversation with a model whose tokens stay resident in the KV cache
 * from one turn to the next.
 *
 *   lean_chat_session_params sp = lean_chat_session_default_params();
 *   sp.system = "You are terse.";
 *   sp.sampling.seed = 42;
 *   lean_chat_session *s;
 *   if (lean_chat_session_create(m, &sp, &s, &err) != LEAN_OK) puts(err.msg);
 *   lean_chat_turn_stats st;
 *   lean_chat_turn(s, "Hi", print_text, NULL, &st, &err);   // the reply, streamed to print_text
 *   lean_chat_turn(s, "And?", print_text, NULL, &st, &err); // st.n_reused > 0: the first turn
 *   lean_chat_session_free(s);                               // was not computed again
 *
 * A turn renders the whole conversation (the system prompt, every earlier turn, the new user
 * text) through the chat template with add_generation_prompt and tokenizes it with
 * lean_chat_tokenize (control tokens parsed in the template's text, never in the messages;
 * no ADD_SPECIAL: the template writes the BOS itself), keeps the longest prefix of those ids
 * that the KV cache already holds, prefills the rest and draws the reply until one of:
 * an end-of-generation token (lean_token_is_eog; it is not part of the reply), a stop string
 * (the reply ends before it; text that might still grow into one is held back and never
 * handed out), n_predict ids, a full context, lean_chat_abort, or the text callback asking to
 * stop. The reply text (special tokens skipped, as HF's skip_special_tokens=True) becomes the
 * assistant's message. The ids kept resident are exactly those in the cache, generated ones
 * included, so the KV state after any number of turns is that of one fresh prefill of them.
 * Control-token text written by the user ("<|im_end|>") stays text: lean_chat_tokenize.
 *
 * The pump: lean_chat_submit starts a turn (render, tokenize, reuse the prefix: no model
 * work), then each lean_chat_step does one bounded piece of work (one prefill chunk of
 * n_batch ids, or one generated id) and hands back the reply text it made final; it says
 * whether more is coming. lean_chat_turn is that loop with a callback.
 *
 * Overflow: a turn needs n_prompt + max(n_predict, 1) <= n_ctx. When it does not fit, the
 * turn fails with LEAN_ERR_CONTEXT_FULL (naming the numbers; nothing changes), or, with
 * drop_oldest, the oldest user/assistant pairs are left out (never the system prompt) until
 * it fits; they leave the conversation when the turn ends. A reply that fills the context
 * before it is done ends with LEAN_CHAT_STOP_CONTEXT.
 *
 * Failure: a submit that fails changes nothing. A step that fails ends the turn: the
 * conversation stays as it was before the turn (the user text is not kept), the resident
 * ids stay exact, and the session can take the next turn. An aborted turn (lean_chat_abort
 * or the callback) is kept, with the reply text handed out so far.
 *
 * Threads: a session is used by one thread at a time, except lean_chat_abort, which any
 * thread (or a signal handler: it is one atomic store) may call at any time. */
typedef struct lean_chat_session lean_chat_session;

typedef struct lean_chat_session_params {
    int32_t n_ctx;                /* KV cache length in tokens; 0 = lean_ctx's default */
    int32_t n_batch;              /* prefill chunk in tokens (one step); 0 = the backend's (lean_ctx_params) */
    lean_sampler_params sampling; /* how reply ids are drawn; default lean_sampler_default_params */
    const char *template_source;  /* nullable: a Jinja chat template used instead of the model's */
    int32_t chatml_fallback;      /* nonzero: ChatML (lean_chat_template_chatml) when the model has
                                     no template and none is given; otherwise that is an error */
    const char *system;           /* nullable: the system prompt, the first message of every turn */
    const char *const *stop;      /* n_stop stop strings (non-empty); copied */
    int32_t n_stop;
    int32_t n_predict;            /* most ids drawn per reply (the end-of-generation id included);
                                     0 = no limit but the context */
    int32_t drop_oldest;          /* nonzero: drop the oldest turns instead of failing on overflow */
    const char *backend;          /* lean_ctx_params.backend: NULL = "auto" */
    int32_t exact;                /* lean_ctx_params.exact: nonzero, F32 arithmetic throughout */
    lean_progress_fn progress;    /* lean_ctx_params.progress, for the session's context */
    void *progress_user;
    int32_t n_threads;            /* lean_ctx_params.n_threads: 0 = one per CPU (1 in wasm) */
} lean_chat_session_params;
LEAN_API lean_chat_session_params lean_chat_session_default_params(void);

/* Why a turn ended (lean_chat_turn_stats.stop); appended only. */
typedef enum lean_chat_stop {
    LEAN_CHAT_STOP_NONE = 0,     /* the turn is still going (or none ran) */
    LEAN_CHAT_STOP_EOG = 1,      /* the model drew an end-of-generation token */
    LEAN_CHAT_STOP_STRING = 2,   /* a stop string appeared */
    LEAN_CHAT_STOP_LIMIT = 3,    /* n_predict ids were drawn */
    LEAN_CHAT_STOP_CONTEXT = 4,  /* the context is full */
    LEAN_CHAT_STOP_ABORT = 5,    /* lean_chat_abort */
    LEAN_CHAT_STOP_CALLBACK = 6, /* the text callback returned nonzero */
} lean_chat_stop;

typedef struct lean_chat_turn_stats {
    int32_t n_prompt;    /* ids of the rendered conversation */
    int32_t n_reused;    /* of them, already in the KV cache (not computed again) */
    int32_t n_prefilled; /* n_prompt - n_reused: prefilled by this turn */
    int32_t n_generated; /* ids drawn (the end-of-generation id included) */
    int32_t n_dropped;   /* earlier messages left out to fit (drop_oldest) */
    int32_t stop;        /* a lean_chat_stop */
} lean_chat_turn_stats;

/* Text callback: n_bytes (> 0) of reply text, whole UTF-8 characters, not NUL-terminated,
 * valid during the call. Return nonzero to end the reply there. */
typedef int (*lean_chat_text_fn)(void *user, const char *text, size_t n_bytes);

/* Creates the session's own lean_ctx and lean_sampler over m (which must outlive it).
 * Errors: LEAN_ERR_MODEL when the model has no usable tokenizer, or no chat template (and
 * neither template_source nor chatml_fallback); LEAN_ERR_ARG for bad params (an empty stop
 * string, n_predict >= n_ctx, sampler ranges). */
LEAN_API lean_status lean_chat_session_create(const lean_model *m, const lean_chat_session_params *p,
                                              lean_chat_session **out, lean_error *err);
LEAN_API void lean_chat_session_free(lean_chat_session *s);
/* Forgets every turn (the system prompt stays) and ends a turn in progress. The KV cache
 * is kept: the next turn reuses whatever prefix it shares with it. */
LEAN_API void lean_chat_session_reset(lean_chat_session *s);

/* One turn: submit, then steps until the reply ends, on_text (nullable) receiving the text.
 * stats (nullable) is filled on success and failure alike. */
LEAN_API lean_status lean_chat_turn(lean_chat_session *s, const char *user_text, lean_chat_text_fn on_text,
                                    void *user, lean_chat_turn_stats *stats, lean_error *err);
/* Starts a turn (LEAN_ERR_ARG if one is in progress). */
LEAN_API lean_status lean_chat_submit(lean_chat_session *s, const char *user_text, lean_error *err);
/* Does one piece of the turn's work. *text / *n_bytes: reply text made final by it (maybe
 * none), owned by the session until its next call. *more: 1 while the turn goes on, 0 once it
 * has ended (or when no turn was in progress). */
LEAN_API lean_status lean_chat_step(lean_chat_session *s, const char **text, size_t *n_bytes, int *more,
                                    lean_error *err);
/* Ends the turn in progress at its next step (any thread, any time; a no-op between turns:
 * lean_chat_submit clears it). A draw left LEAN_PENDING is not waited for: that next step ends
 * the turn at once, with the text handed out before it. */
LEAN_API void lean_chat_abort(lean_chat_session *s);
/* The turn in progress, or the last one. */
LEAN_API void lean_chat_session_stats(const lean_chat_session *s, lean_chat_turn_stats *out);

/* Between turns, for a front end that keeps the conversation itself (a page that regenerates
 * or edits a reply): replaces the conversation with msgs (copied): an optional first "system"
 * message (the system prompt; without one the session has none), then "user" and "assistant"
 * messages in turn, ending with an assistant's. No model work: the next turn renders them and
 * reuses the prefix the KV cache shares with that rendering. LEAN_ERR_ARG during a turn or for
 * another order of roles; on failure nothing changes. */
LEAN_API lean_status lean_chat_session_set_messages(lean_chat_session *s, const lean_chat_message *msgs, size_t n,
                                                    lean_error *err);
/* Between turns: the sampling parameters and n_predict of the turns that follow (as in
 * lean_chat_session_params; checked the same way). LEAN_ERR_ARG during a turn; on failure
 * nothing changes. */
LEAN_API lean_status lean_chat_session_set_sampling(lean_chat_session *s, const lean_sampler_params *sampling,
                                                    int32_t n_predict, lean_error *err);
/* Holds every reply from the next turn on to grammar g (nullable: none; not owned, must outlive
 * its use; "grammars" above), reset at the start of each turn: a reply ends when the model
 * draws an end-of-generation token, which the grammar allows only once it is complete (or at
 * the usual limits). Not during a turn (LEAN_ERR_ARG). A dead end fails the step with g's error. */
LEAN_API lean_status lean_chat_session_set_grammar(lean_chat_session *s, lean_grammar *g, lean_error *err);
/* Raw logit masks on the replies (lean_mask; lean_gen_next_masked on a context): every draw
 * that follows is held to the ids mask allows (copied; NULL: none), with the grammar where one
 * is set; the mask stays for the turns that follow until set again.
 *
 *     lean_chat_session_set_mask(s, &(lean_mask){bits, n_vocab}, &err);   // a whole reply
 *     lean_chat_submit(s, "Yes or no?", &err);
 *     do {                                         // or a mask per draw, through the pump:
 *         lean_chat_session_set_mask(s, &next_mask, &err);                // before each step
 *         lean_chat_step(s, &text, &n, &more, &err);
 *     } while (more);
 *
 * Between turns (and while the prompt is prefilled) it sets the mask of the reply to come;
 * during a reply begun with a mask it replaces the mask from the next draw on (NULL: the rest
 * unmasked). A reply still ends on an end-of-generation id only where the mask allows one
 * (lean_token_is_eog), else at n_predict, a stop string or a full context. Errors, nothing
 * changed: LEAN_ERR_ARG for a mask whose n_vocab is not the model's, bits NULL, a bit set past
 * n_vocab or no bit set, during a reply begun without a mask (on the GPU its steps ran ahead),
 * or while a step is LEAN_PENDING; LEAN_ERR_NOMEM. On the GPU a masked reply draws resident
 * but reads one id back per step, as lean_gen_next_masked does. A mask that allows only ids of
 * non-finite logits (or none the grammar allows) fails the step, as lean_gen_next_masked does. */
LEAN_API lean_status lean_chat_session_set_mask(lean_chat_session *s, const lean_mask *mask, lean_error *err);
/* Between turns: the LoRA adapters of the turns that follow, as lean_ctx_set_loras on the
 * session's context (not owned; n = 0 removes them). The KV cache was computed without them, so
 * the next turn prefills the whole conversation again. LEAN_ERR_ARG during a turn; on failure
 * nothing changes. */
LEAN_API lean_status lean_chat_session_set_loras(lean_chat_session *s, lean_lora *const *loras, const float *scales,
                                                 int32_t n, lean_error *err);

/* The conversation: the system prompt (if any), then user and assistant messages in turn
 * order; the last is the latest reply. Owned by the session, valid until it changes. */
LEAN_API const lean_chat_message *lean_chat_session_messages(const lean_chat_session *s, size_t *n);
/* The ids resident in the KV cache, in position order (*n = lean_ctx_pos). Owned by the
 * session, valid until its next call. */
LEAN_API const int32_t *lean_chat_session_ids(const lean_chat_session *s, int32_t *n);
/* The session's context (its lean_ctx_n_ctx, lean_ctx_pos) and sampler (its seed). */
LEAN_API const lean_ctx *lean_chat_session_ctx(const lean_chat_session *s);
LEAN_API const lean_sampler *lean_chat_session_sampler(const lean_chat_session *s);

/* ---- WebGPU (src/gpu) ----
 * The library reads no environment but three debugging aids (docs/gpu.md): LEAN_WEBGPU_LIB,
 * the webgpu.h library to load first; LEAN_PROFILE=1, profile every context; LEAN_GPU_DUMP=1,
 * every kernel's WGSL and what Dawn compiled it to, on stderr. It sets none: a host on Mesa
 * without a display (Dawn's OpenGL ES over EGL, e.g. llvmpipe on a server) sets
 * EGL_PLATFORM=surfaceless in its environment before the first GPU call, as the lean command
 * does, or Mesa's EGL finds no display and there is no adapter. */
/* Opens the WebGPU device the "gpu" backend would use (the library search and adapter
 * choice of src/gpu/native.c and device.c), writes what it is into text (NUL-terminated,
 * at most cap bytes; one fact per line: adapter, backend and feature level, features,
 * limits, library path) and closes it. LEAN_ERR_UNSUPPORTED, the message naming every
 * place searched or why no adapter came, where there is none. For `lean info --gpu`. */
LEAN_API lean_status lean_gpu_probe(char *text, size_t cap, lean_error *err);

#ifdef __cplusplus
}
#endif
#endif /* LEAN_H */
