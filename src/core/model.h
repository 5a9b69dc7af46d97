/* model.h — a loaded model: hyperparameters from the GGUF keys and validated views of
 * every tensor the architectures need. Backend-neutral: weights stay in their file
 * format; backends read them through lean_tensor views.
 *
 * Lifetimes (llama2.c's split): lean_hparams (numbers), the tensor views (point into
 * the mapping or the streamed weight buffer, owned by lean_model), what every sequence
 * shares on a backend (lean_model_share: the GPU's device and uploaded weights, owned by
 * lean_model), and per-sequence state (owned by a backend's context, never here). */
#ifndef LEAN_MODEL_H
#define LEAN_MODEL_H

#include "core/common.h"
#include "core/gguf.h"

typedef enum lean_arch { LEAN_ARCH_LLAMA, LEAN_ARCH_QWEN2, LEAN_ARCH_QWEN3 } lean_arch;

/* How RoPE pairs the dimensions of one head.
 * NORM (llama in GGUF): pairs (2i, 2i+1) — llama.cpp's converter permutes the q/k rows
 *   of HF checkpoints so that this equals HF's rotate_half on the original rows.
 * NEOX (qwen2, qwen3): pairs (i, i + head_dim/2), HF's order kept. */
typedef enum lean_rope_style { LEAN_ROPE_NORM, LEAN_ROPE_NEOX } lean_rope_style;

typedef struct lean_tensor {
    const char *name;   /* owned by the gguf_file */
    uint32_t type;      /* lean_type */
    int64_t ne[4];      /* ne[0] contiguous; a matrix (rows = ne[1], cols = ne[0]) */
    uint64_t n_bytes;
    uint64_t offset;    /* bytes from the start of the file's data section */
    const void *data;   /* NULL until weights are mapped/read; NULL name = absent */
} lean_tensor;

/* Every count is >= 1 and bounded (model.c's limits) so that products of two or three
 * of them fit easily in 64 bits; head_dim is even; n_head % n_head_kv == 0. */
typedef struct lean_hparams {
    lean_arch arch;
    int32_t n_vocab, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_ctx_train;
    float rms_eps;
    float rope_base;       /* theta base */
    lean_rope_style rope_style;
} lean_hparams;

/* Shapes in comments are (rows, cols) = (ne[1], ne[0]); y = W x with x of length cols. */
typedef struct lean_layer {
    lean_tensor attn_norm;   /* (n_embd) */
    lean_tensor wq;          /* (n_head * head_dim, n_embd) */
    lean_tensor wk, wv;      /* (n_head_kv * head_dim, n_embd) */
    lean_tensor wo;          /* (n_embd, n_head * head_dim) */
    lean_tensor bq, bk, bv;  /* qwen2 only: (n_head * head_dim), (n_head_kv * head_dim) x2 */
    lean_tensor q_norm, k_norm; /* qwen3 only: (head_dim), applied per head before RoPE */
    lean_tensor ffn_norm;    /* (n_embd) */
    lean_tensor w_gate, w_up;/* (n_ff, n_embd) */
    lean_tensor w_down;      /* (n_embd, n_ff) */
} lean_layer;

/* What the contexts of a model share on a backend beyond the tensor views: that backend's
 * model-level part (backend.h; on the GPU the device, the uploaded weights, the pipelines),
 * made by the first context that needs it and kept until lean_model_free. The one thing
 * about a model that changes after load, so it sits behind a pointer, under lock: contexts
 * may be created from several threads at once (session.c). */
typedef struct lean_model_share {
    lean_mutex lock;
    const struct lean_backend *be;   /* the backend that made part: only the GPU makes one */
    struct lean_backend_model *part; /* NULL until then; the model holds one reference */
    struct lean_packed *packed; /* the CPU's repacked matrices (cpu/repack.h), made by the first
                                   context that reads them; NULL until then */
    struct lean_ctx *settling; /* pump mode (lean.h, LEAN_PENDING): a context made but not yet
                                  settled, for lean_ctx_create made again; freed with the model */
} lean_model_share;

struct lean_model {
    gguf_file *gguf;
    lean_hparams hp;
    lean_tensor tok_embd;    /* (n_vocab, n_embd) */
    lean_tensor output_norm; /* (n_embd) */
    lean_tensor output;      /* (n_vocab, n_embd); == tok_embd when tied */
    lean_tensor rope_freqs;  /* optional (head_dim / 2) F32: llama3 scaling, theta_i /= f_i */
    bool tied_output;
    lean_layer *layers;      /* n_layer */
    lean_mapped_file map;    /* set when loaded with mmap */
    void *weights;           /* set when streamed: the data section, owned */
    struct lean_tokenizer *tokenizer; /* from the tokenizer.* keys (tokenizer.h); NULL when
                                         the file has none; owned */
    lean_model_share *share;  /* owned */
    bool gpu_only; /* lean_model_params.gpu_only: the weights are on share->part's device only, and
                      no view has data but rope_freqs' (in weights) */
};

/* A streamed load's data section (model.c), walked in file order. GPU-only, the backend's
 * model_create (lean_backend_config.source) names the tensors it takes and the sink their bytes
 * go to, and returns; the load then gives sink every piece of them as the stream brings it, and
 * calls the backend's model_finish after the last. */
typedef struct lean_weight_source lean_weight_source;
/* Takes bytes [at, at + n) of tensor k of the list given to lean_weight_source_expect: whole
 * blocks, at most 8 MiB, each tensor's pieces in order, the tensors in file order; the bytes
 * are the source's again once it returns. */
typedef lean_status (*lean_tensor_sink)(void *user, int k, uint64_t at, const void *bytes, uint64_t n,
                                        lean_error *err);
/* ts[0..n) are to be read, in the order of their places in the file, in pieces through one
 * 8 MiB buffer; the tensors the host keeps (rope_freqs: each context's RoPE table) are read
 * into the model on the way. */
lean_status lean_weight_source_expect(lean_weight_source *src, const lean_tensor *const *ts, int n,
                                      lean_tensor_sink sink, void *user, lean_error *err);

/* The longest context lean allocates (tokens); with model.c's other limits it keeps
 * every KV cache size far from overflow. */
#define LEAN_MAX_N_CTX (1 << 24)

/* Widths of one token's queries (all heads) and of its keys or values (all KV heads). */
static inline int32_t lean_q_dim(const lean_hparams *hp) { return hp->n_head * hp->head_dim; }
static inline int32_t lean_kv_dim(const lean_hparams *hp) { return hp->n_head_kv * hp->head_dim; }
/* The longest row of any layer matrix or output (n_embd, n_ff or lean_q_dim columns). */
static inline int32_t lean_max_cols(const lean_hparams *hp) {
    const int32_t m = hp->n_embd > hp->n_ff ? hp->n_embd : hp->n_ff;
    return lean_q_dim(hp) > m ? lean_q_dim(hp) : m;
}

#endif
