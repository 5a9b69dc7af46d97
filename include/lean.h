/* lean.h — the whole public C API of lean.
 *
 * lean runs GGUF language models (architectures llama, qwen2, qwen3) on the CPU and,
 * later, on WebGPU. Everything a front end needs is declared here; nothing else in
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
 * lean_ctx (one per sequence); free every ctx before its model. A lean_ctx is used
 * by one thread at a time.
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

typedef enum lean_status {
    LEAN_OK = 0,
    LEAN_ERR_IO = 1,           /* a file could not be opened, read, mapped or written */
    LEAN_ERR_FORMAT = 2,       /* the file is malformed: truncated, bad magic, overflowing counts */
    LEAN_ERR_UNSUPPORTED = 3,  /* well-formed but not something lean runs: version, type, arch */
    LEAN_ERR_MODEL = 4,        /* a required key or tensor is missing or has the wrong shape/type */
    LEAN_ERR_NOMEM = 5,        /* an allocation failed */
    LEAN_ERR_ARG = 6,          /* the caller asked for something that makes no sense */
    LEAN_ERR_CONTEXT_FULL = 7, /* the tokens do not fit in the context */
} lean_status;

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
    LEAN_TYPE_Q4_K = 12,
    LEAN_TYPE_Q5_K = 13,
    LEAN_TYPE_Q6_K = 14,
    LEAN_TYPE_BF16 = 30,
} lean_type;

/* "f32", "q4_k", ...; NULL for a type lean does not know. */
LEAN_API const char *lean_type_name(int type);
/* Parses "f32", "Q4_K", ... (case-insensitive); -1 if unknown. */
LEAN_API int lean_type_from_name(const char *name);

/* ---- models ---- */
typedef struct lean_model lean_model;

/* Maps the file (mmap) and validates every tensor it needs. Where mmap does not exist
 * (wasm32-wasi) it loads through lean_model_load_stream over stdio instead. */
LEAN_API lean_status lean_model_load_file(const char *path, lean_model **out, lean_error *err);

/* Streamed load for hosts without mmap (wasm): the header is parsed from small reads,
 * then tensor data is read in file order straight into the model's weight memory.
 * read() copies n bytes at byte offset off into dst and returns the number copied
 * (fewer means the file ends there). */
typedef size_t (*lean_read_fn)(void *user, uint64_t off, void *dst, size_t n);
LEAN_API lean_status lean_model_load_stream(lean_read_fn read, void *user, uint64_t file_size,
                                            lean_model **out, lean_error *err);
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

/* ---- contexts: one sequence, its KV cache and activations ---- */
typedef struct lean_ctx lean_ctx;

typedef struct lean_ctx_params {
    int32_t n_ctx;   /* KV cache length in tokens; 0 = the model's n_ctx_train capped at 4096 */
    int32_t n_batch; /* prefill chunk in tokens; 0 = 64 */
} lean_ctx_params;
LEAN_API lean_ctx_params lean_ctx_default_params(void);

LEAN_API lean_status lean_ctx_create(const lean_model *m, const lean_ctx_params *p, lean_ctx **out,
                                     lean_error *err);
LEAN_API void lean_ctx_free(lean_ctx *c);
/* Tokens resident in the KV cache; the next prefill/decode writes at this position. */
LEAN_API int32_t lean_ctx_pos(const lean_ctx *c);
LEAN_API int32_t lean_ctx_n_ctx(const lean_ctx *c);
/* Forget every position >= n_pos (0 <= n_pos <= lean_ctx_pos). */
LEAN_API lean_status lean_ctx_truncate(lean_ctx *c, int32_t n_pos, lean_error *err);

/* Runs n ids starting at lean_ctx_pos() (in chunks of n_batch), appending them to the
 * cache. logits (nullable) receives n_vocab floats: the next-token logits after the
 * last id. LEAN_ERR_CONTEXT_FULL (and no change) when pos + n > n_ctx. */
LEAN_API lean_status lean_prefill(lean_ctx *c, const int32_t *ids, int32_t n, float *logits,
                                  lean_error *err);
/* One token: the same as lean_prefill of one id. */
LEAN_API lean_status lean_decode(lean_ctx *c, int32_t id, float *logits, lean_error *err);

/* ---- model files: the generator and the quantizer ---- */

/* Writes a GGUF with seeded random weights at an architecture preset's shapes:
 * "smollm2-135m", "smollm2-360m", "smollm2-1.7b", "qwen2.5-0.5b", "qwen3-0.6b",
 * "llama-3.2-1b", or the tiny test shapes "tiny-llama", "tiny-qwen2", "tiny-qwen3".
 * recipe: a type name ("q4_0", "f16", ...) for every matrix, or "q4_k_m" / "q5_k_m"
 * (llama.cpp's mixed layouts). vocab_path (nullable): a GGUF whose tokenizer.* keys are copied in
 * (its token count sets n_vocab); without one a byte-level stand-in vocabulary is used. */
typedef struct lean_gen_params {
    const char *preset;
    const char *recipe;
    const char *vocab_path;
    uint64_t seed;
    int32_t n_layer; /* 0 = the preset's; fewer layers make quick test files */
} lean_gen_params;
LEAN_API lean_status lean_generate_model(const lean_gen_params *p, const char *out_path, lean_error *err);

/* Re-encodes every 2-D weight matrix of in_path with recipe (as above); norms, biases
 * and other 1-D tensors stay F32. */
LEAN_API lean_status lean_quantize_file(const char *in_path, const char *out_path, const char *recipe,
                                        lean_error *err);

/* ---- tokenizers (src/core/tokenizer.c) ---- */

/* ---- chat templates (src/core/template.c) ---- */

/* ---- sampling (src/core/sampler.c) ---- */

/* ---- conversations (src/core/chat.c) ---- */

#ifdef __cplusplus
}
#endif
#endif /* LEAN_H */
