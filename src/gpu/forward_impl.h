/* forward_impl.h — what the two files of lean_backend_gpu share (not for callers of
 * backend.h): the model's part and a context's state, and the calls each file makes of the
 * other. forward.c: create / destroy, the forward pass, resident generation, LoRA, the table;
 * forward_batch.c: the batched pass (lean_decode_batch) and batched generation
 * (lean_gen_next_batch), whose own kernels (gpu_batch) only it sees.
 *
 * Sections: state · forward.c's calls · forward_batch.c's calls */
#ifndef LEAN_GPU_FORWARD_IMPL_H
#define LEAN_GPU_FORWARD_IMPL_H

#include "core/backend.h"

#include "gpu/kvpool.h"
#include "gpu/lora.h"
#include "gpu/ops.h"
#include "gpu/sample.h"
#include "gpu/weights.h"

#include <stdatomic.h>

/* ---- state ---- */

/* Read-back blocks and how much work runs ahead of the host (forward.c's generation section says why). */
#define GEN_BLOCK_MAX 16      /* greedy ids per block, at most */
#define GEN_GREEDY_FLIGHT 2   /* greedy blocks in flight */
#define GEN_SAMPLED_FLIGHT 8  /* sampled blocks (one id each) in flight, at most */
#define GEN_SLOTS 8           /* max(GEN_GREEDY_FLIGHT, GEN_SAMPLED_FLIGHT) */
#define GEN_AHEAD_MS 25.0     /* the GPU time one greedy block (sampled: the flight) aims at */

/* A batched step's ids read back (forward_batch.c): one READBACK buffer and one map for every
 * row of the step, a u32 a row; each row's queue holds it until that row takes its id or ends. */
typedef struct gpu_step_ids gpu_step_ids;

/* A resident generation: steps 0 .. limit - 1; step j draws the id for position pos0 + j
 * (after decoding step j - 1's id at pos0 + j - 1, for j > 0). Steps go in blocks, block b
 * into slot b % GEN_SLOTS; a slot is mapped once its block's last step is submitted and is not
 * written again until it has been taken. A batched step's block of one is read from the step's
 * shared read-back (shared[b % GEN_SLOTS], at its row) instead of the slot. Block sizes follow the measured step time (gen_pace). */
typedef struct gpu_gen {
    gpu_sampler *smp;       /* made for cfg; kept across generations with the same settings */
    sampler_cfg cfg;
    lean_gpu_buf *slot[GEN_SLOTS]; /* READBACK, GEN_BLOCK_MAX ids each */
    bool mapping[GEN_SLOTS];
    int32_t slot_n[GEN_SLOTS];     /* ids in the slot's block */
    double slot_t0_ms[GEN_SLOTS];  /* when its block's first step was submitted */
    gpu_step_ids *shared[GEN_SLOTS]; /* a batched step's read-back the block's id lies in, or NULL */
    int32_t shared_row[GEN_SLOTS];   /* its row there */
    bool on, greedy;
    bool masked;            /* each draw under a mask gen_next gives (backend.h): one step at a time */
    bool stepwise;          /* advanced by batched steps (gen_next_batch): blocks of one, one step ahead */
    bool behind;            /* a batched step drew for it (gpu_sampler_rows): smp's position is stale */
    int32_t pace;           /* greedy: ids per block; sampled: blocks in flight (gen_pace) */
    int32_t pos0, limit;
    int32_t n_sub;          /* steps submitted */
    int32_t b_sub, b_read;  /* blocks submitted, blocks taken */
    int32_t n_read;         /* ids read back: the last block taken is ready[0 .. ready_n) */
    int32_t n_out;          /* ids handed out */
    int32_t ready_n;
    double taken_ms;        /* when the last block was taken (gen_begin: when it began) */
    int32_t ready[GEN_BLOCK_MAX];
} gpu_gen;

/* Stacked matrices (gpu_weight_upload_stacked), used when their parts stack
 * (gpu_weight_stackable: one format, or 32-weight block formats such as a q4_k_m file's Q5_0
 * Wq, Wk and Q8_0 Wv at rows no multiple of 256): W_QKV = [Wq; Wk; Wv], one matmul into qkv,
 * or [Wq; Wk] when only those two do (q4_k_m's Wv is Q6_K on some layers where Wq, Wk are
 * Q4_K); W_GATE_UP = [Wgate; Wup], one SWIGLU matmul. The parts stacked stay empty (and a
 * stack whose parts do not stack). */
enum { W_Q, W_K, W_V, W_O, W_GATE, W_UP, W_DOWN, W_QKV, W_GATE_UP, N_MATRICES };

/* Q, K and V's matmuls in recording order: the stack (it starts at column 0 of qkv's rows),
 * then the parts not in it (at columns 0, q_dim, q_dim + kv_dim). */
static const int QKV_ORDER[] = {W_QKV, W_Q, W_K, W_V};

/* A layer's weights: the model's, uploaded once for all its contexts. */
typedef struct gpu_layer_weights {
    gpu_weight w[N_MATRICES];      /* the layer's matrices, in the file's formats */
    lean_gpu_buf *attn_norm, *ffn_norm; /* (n_embd) F32 */
    lean_gpu_buf *bqkv;    /* qwen2: (q_dim + 2 kv_dim) F32, bq | bk | bv, as qkv's rows */
    lean_gpu_buf *qk_norm; /* qwen3: (2, head_dim) F32 q_norm, k_norm; a uniform (qkv_post) */
} gpu_layer_weights;

/* The model-level part (backend.h): the device and every weight, shared by the model's
 * contexts. A context's call holds lock while it uses the device, so contexts of several
 * threads take turns on it (one queue, one set of error scopes, one buffer list). */
struct lean_backend_model {
    const lean_model *m;
    lean_gpu *g;
    lean_mutex lock;
    atomic_int refs;             /* the model's (until it lets go) and one per context */
    const char *thread;          /* on OpenGL (ES), the opening thread's thread_tag; else NULL */
    int sampler_checked;         /* gpu_sampler_check on g: 0 not yet, 1 passed, -1 failed */
    gpu_sampler_check_run *check; /* that check in flight (pump mode: it returned LEAN_PENDING) */
    gpu_layer_weights *layers;   /* n_layer */
    gpu_kv_pool pool;            /* every context's KV cache and RoPE table (kvpool.h) */
    gpu_weight tok_embd, output; /* output unused (tok_embd serves) when tied */
    lean_gpu_buf *output_norm;   /* (n_embd) F32 */
    struct stream_plan *stream;  /* a GPU-only load's uploads in progress (until model_finish) */
};

/* A layer's part of one sequence: its KV cache and its kernels over the model's weights. */
typedef struct gpu_layer {
    gpu_matmul *mm[N_MATRICES]; /* over gpu_layer_weights' w[] */
    /* (n_ctx, kv_dim) F32, keys after RoPE: the (n_layer, n_ctx, kv_dim) cache as one buffer
     * per layer, so no binding exceeds the storage binding limit for long contexts; views of
     * the context's slot of the model's KV pool (s->kv owns them) */
    lean_gpu_buf *k_cache, *v_cache;
    gpu_op norm_attn, qkv_post; /* norm_attn, norm_ffn: prefill's only where norm_in_matmul */
    gpu_op norm_ffn, swiglu; /* swiglu: only without W_GATE_UP */
    gpu_attention attn;
    bool norm_in_matmul; /* decode's Q, K, V and gate, up matmuls norm their input themselves */
    bool kv_in_matmul;   /* decode's Q, K, V matmuls do qkv_post's work (gpu_mm_kv) */
    /* What adapters on the layer need where an epilogue would read the product before they add
     * to it (forward.c's section "LoRA"; made on the first set that needs them): at QKV_ORDER's indices,
     * decode's matmuls without the q|k|v epilogue (kv_in_matmul; gpu_make_plain_qkv), qkv_post
     * after them; at
     * W_GATE_UP, the stack as a plain matmul into gu, swiglu_rows after it. */
    gpu_matmul *lora_mm[N_MATRICES];
    gpu_op swiglu_rows;
} gpu_layer;

typedef struct gpu_batch gpu_batch; /* forward_batch.c's */

/* One sequence on the model's device. B = n_batch; widths as in forward_ref.c. */
struct lean_backend_state {
    lean_backend_model *bm;     /* the model's part: a reference */
    const lean_model *m;
    lean_gpu *g;                /* bm->g */
    int32_t n_ctx, n_batch;
    bool exact;                 /* lean_ctx_params.exact: a batched pass keeps each row's decode bits */
    gpu_layer *layers;          /* n_layer */
    gpu_kv_slot kv;             /* its KV cache: a slot of the model's pool (kvpool.h) */
    lean_gpu_buf *rope_table;   /* (n_ctx, head_dim): cos, sin of every position: its KV page's */
    lean_gpu_buf *step;         /* uniform {n_tok, pos, 0, 0}, written per call */
    lean_gpu_buf *step1;        /* uniform {1, 0, 0, 0}: for the one-row logits matmul */
    lean_gpu_buf *ids;          /* (B) u32 */
    lean_gpu_buf *x, *xn;       /* (B, n_embd) residual (Wo and Wdown add into it), normed input */
    lean_gpu_buf *qkv;          /* (B, q_dim + 2 kv_dim): q | k | v per token; q roped in place */
    lean_gpu_buf *att;          /* (B, q_dim) + attention partials (gpu_attention_out_floats) */
    lean_gpu_buf *gate, *up;    /* (B, n_ff) */
    lean_gpu_buf *part;         /* prefill matmuls' partial sums (gpu_mm_out), NULL if none splits */
    lean_gpu_buf *x_last;       /* (n_embd) the last token, normed */
    lean_gpu_buf *logits;       /* (n_vocab) */
    lean_gpu_buf *logits_rb;    /* (n_vocab) READBACK: a forward call's logits, mapped */
    bool logits_wait;           /* pump mode: a forward's logits map is in flight (gpu_forward) */
    gpu_get_rows *embed;
    gpu_op norm_out;
    gpu_matmul *mm_out;
    gpu_gen gen;
    gpu_lora *lora;             /* the adapters in force (set_lora), NULL: none */
    const lora_set *lora_set;   /* what lora was made of (the context's, alive until the next set) */
    lean_gpu_buf *gu;           /* (B, 2 n_ff) g | u of a stacked gate, up with adapters; NULL until then */
    gpu_batch *batch;           /* NULL until it leads a batched pass (forward_batch.c) */
    int64_t batch_rows;         /* the rows of the batched passes it has led (test_hooks.h) */
    int64_t batch_attn;         /* their attention records: a layer's, one per KV page (test_hooks.h) */
};

/* ---- forward.c's calls ---- */

/* *out = a zeroed storage buffer of a * b floats (or u32s). */
lean_status gpu_new_buf(lean_backend_state *s, uint64_t a, uint64_t b, const char *label, lean_gpu_buf **out,
                        lean_error *err);
/* Layer il's Q, K, V matmuls without decode's q|k|v epilogue (into lora_mm, made once). */
lean_status gpu_make_plain_qkv(lean_backend_state *s, int32_t il, lean_error *err);
/* *out: a part buffer (gpu_mm_out.part) for any of a layer's matmuls made for B tokens, left
 * NULL where they take no split or the parts would pass one binding (they then run unsplit). */
lean_status gpu_new_part(lean_backend_state *s, int32_t B, const char *name, lean_gpu_buf **out, lean_error *err);
/* Layer il's matrices over up to rows rows of a batch (gpu_matmul_create_rows, uniform its rows
 * uniform) into mm[N_MATRICES]: Q, K, V from xn into qkv's rows (no epilogue), Wo from att,
 * gate, up from xn (into gate, up; or the stack's SwiGLU into gate), down from gate; Wo and down
 * added to x. Every input plain: the pass runs the norms. tiled_ffn: the FFN's also have the
 * tiled kernel (gpu_matmul_create for rows tokens), split over part (nullable: unsplit). */
lean_status gpu_make_batch_matmuls(lean_backend_state *s, int32_t il, int32_t rows, lean_gpu_buf *uniform,
                                   lean_gpu_buf *att, bool tiled_ffn, lean_gpu_buf *part, gpu_matmul **mm,
                                   lean_error *err);
/* n tokens at pos through s's own forward pass (backend.h's forward); LEAN_PENDING in pump mode. */
lean_status gpu_forward(lean_backend_state *s, const int32_t *ids, int32_t n, int32_t pos, float *logits,
                        lean_error *err);
/* The monotonic clock in milliseconds (the generation's pace). */
double gpu_now_ms(void);
/* Hands out a generation's next id from the blocks submitted (one must be). */
lean_status gpu_gen_take(lean_backend_state *s, int32_t *id, lean_error *err);
/* backend.h's gen_next: submits what the flight allows, then takes. */
lean_status gpu_gen_next(lean_backend_state *s, const uint32_t *mask, int32_t *id, lean_error *err);

/* ---- forward_batch.c's calls ---- */

/* *id = row's id of the batched step p (the step's one map taken by the first row to ask);
 * LEAN_PENDING in pump mode. */
lean_status gpu_step_ids_take(gpu_step_ids *p, int32_t row, int32_t *id, lean_error *err);
/* A row done with p (its id taken, or its generation ended): the last one drops a map still in
 * flight, and frees p if its batch has gone. */
void gpu_step_ids_release(gpu_step_ids *p);

/* Frees s's batched pass's kernels (a no-op when it never led one). */
void gpu_batch_free(lean_backend_state *s);
/* backend.h's forward_batch, batch_check and gen_next_batch (the caller holds the device's lock). */
lean_status gpu_forward_batch(lean_backend_state *const *s, const int32_t *ids, const int32_t *pos, int32_t n,
                              float *logits, lean_error *err);
lean_status gpu_batch_check(const lean_backend_state *first, const lean_backend_state *s, int32_t i, lean_error *err);
lean_status gpu_gen_next_batch(lean_backend_state *const *s, const uint32_t *const *masks, int32_t n, int32_t *ids,
                               lean_error *err);

#endif
