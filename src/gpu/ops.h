/* ops.h — the forward pass's kernels other than matmul and the embedding gather (weights.h):
 * RMSNorm, the QKV post-processing (head norms, RoPE, the KV writes), attention and SwiGLU
 * (the residual and bias adds are matmul output modes, weights.h). Each is made once at
 * load — a pipeline (shared through gpu.h's cache) and a bind group over fixed buffers — and
 * recorded per call for the call's n_tok tokens.
 *
 * Shapes are those of ops_ref.h: activations are F32 and token-major, (n_tok, width) arrays;
 * the KV cache of one layer is (n_ctx, kv_dim). Kernels that depend on the position or the
 * token count read them from the step uniform (step.wgsl: n_tok, pos), which must hold the
 * recorded n_tok and the call's position when the command buffer runs. Widths are elements.
 *
 * Every kernel runs on any adapter: F32 only, GPU_OP_WG (64) invocations (decode's attention:
 * GPU_ATTN_WG, 128, the compatibility limit), under 2 KiB of workgroup storage (qkv_post: a
 * head, head_dim floats; decode attention: up to 4 KiB; prefill attention: up to 16 KiB, the
 * WebGPU minimum), at most 4 storage buffers per kernel (the compatibility default) and
 * uniforms within the 16 KiB every adapter binds. */
#ifndef LEAN_GPU_OPS_H
#define LEAN_GPU_OPS_H

#include "gpu/gpu.h"
#include "core/model.h"

#define GPU_OP_WG 64 /* invocations per workgroup, every kernel here */

/* One kernel over fixed buffers, dispatched (wg_x, per_tok ? n_tok : 1, 1). */
typedef struct gpu_op {
    lean_gpu_pipeline *pipe; /* owned by the lean_gpu (cached by source) */
    lean_gpu_bindgroup *bg;  /* owned */
    uint32_t wg_x;
    bool per_tok;
} gpu_op;
void gpu_op_record(lean_gpu_cmd *c, const gpu_op *op, int32_t n_tok);
void gpu_op_free(gpu_op *op); /* frees the bind group; a zeroed op is fine */

/* out (n_tok, n) = rmsnorm of each token's row of x (n_tok, n), times w (n).
 * last_only: only the call's last token, written as out's first row (out (n) is enough). */
lean_status gpu_rmsnorm_create(lean_gpu *g, lean_gpu_buf *step, lean_gpu_buf *x, lean_gpu_buf *w,
                               lean_gpu_buf *out, int32_t n, float eps, bool last_only, gpu_op *op, lean_error *err);

/* gate (n_tok, n) <- silu(gate) * up (n_tok, n). */
lean_status gpu_swiglu_create(lean_gpu *g, lean_gpu_buf *gate, lean_gpu_buf *up, int32_t n, gpu_op *op,
                              lean_error *err);

/* The table qkv_post.wgsl reads, (n_ctx, head_dim) F32: row p holds cos then sin of position p's
 * head_dim / 2 angles, computed on the host by ops_ref.c's ref_rope_angles itself (base,
 * freq_factors (head_dim / 2) or NULL), so the GPU rotates by the reference's very bits: no
 * angle or sin/cos is computed on the GPU, whose compilers may contract or reassociate a
 * range reduction (1e-4 rad off at angle 4000 on NVIDIA). n_ctx * head_dim * 4 bytes;
 * LEAN_ERR_UNSUPPORTED naming n_ctx when that exceeds gpu_binding_max_bytes. */
lean_status gpu_rope_table_create(lean_gpu *g, int32_t n_ctx, int32_t head_dim, float base,
                                  const float *freq_factors, lean_gpu_buf **out, lean_error *err);

/* qkv_post.wgsl, one dispatch between a layer's Q, K, V matmul and its attention: of the call's
 * rows of qkv (n_batch, q_dim + 2 kv_dim; q | k | v per token, qwen2's biases added), q's and
 * k's heads RMS-normed by norms (qwen3: a UNIFORM buffer of 2 * head_dim F32, q_norm then
 * k_norm; NULL: no norm) and rotated at positions pos.. by table (gpu_rope_table_create), q in
 * place, k into kc row pos + t (ref_rmsnorm, ref_rope), and v copied into vc row pos + t;
 * kc, vc (n_ctx, kv_dim). LEAN_ERR_UNSUPPORTED when the norms pass the device's uniform
 * binding limit (head_dim past 2048 on any adapter). */
lean_status gpu_qkv_post_create(lean_gpu *g, const lean_hparams *hp, lean_gpu_buf *step, lean_gpu_buf *qkv,
                                lean_gpu_buf *kc, lean_gpu_buf *vc, lean_gpu_buf *table, lean_gpu_buf *norms,
                                gpu_op *op, lean_error *err);

/* Causal grouped-query attention of the call's queries q (n_tok rows of q_stride floats, the
 * heads first: q_dim) over one layer's
 * cache kc, vc (n_ctx, kv_dim), into out's first (n_tok, q_dim) floats. A one-token call
 * (decode, attention.wgsl: GPU_ATTN_WG invocations a head) whose keys exceed
 * gpu_attention_chunk(pos) splits them over workgroups of that many keys and merges the
 * partials, kept in out after the att rows: size out with gpu_attention_out_floats.
 * A call of several tokens (prefill; n_batch > 1 only) runs the tiled kernel,
 * attention_tiled.wgsl: tq tokens a workgroup share each key and value read.
 * LEAN_ERR_UNSUPPORTED when head_dim is no multiple of 4 or past 4 GPU_ATTN_WG (decode reads a
 * head as vec4s, one a lane), or too large for the prefill tiles in the device's workgroup
 * storage (past 2000 or so). */
#define GPU_ATTN_WG 128
/* prefill's: GPU_ATTN_TILED_TQ_LANES / lpt tokens a workgroup, their keys walked by
 * GPU_ATTN_KSPLITS groups of lanes side by side (ops.c says what was measured) */
#define GPU_ATTN_TILED_TQ_LANES 16
#define GPU_ATTN_KSPLITS 2
#define GPU_ATTN_MIN_CHUNK 256
#define GPU_ATTN_MAX_SPLITS 32
/* Keys a decode workgroup takes at position pos: GPU_ATTN_MIN_CHUNK (two tiles of GPU_ATTN_WG
 * keys), or the multiple of it that keeps the splits (merged one after another by
 * attn_combine.wgsl, a dispatch of its own) at GPU_ATTN_MAX_SPLITS or fewer. Up to 256 keys a
 * head is one workgroup and no merge: decode is latency, and a split costs a dispatch (on the
 * H200 ~4 us) where a tile costs a workgroup one more pass of its loop. It travels in the step
 * uniform (gpu_step_words). */
uint32_t gpu_attention_chunk(int32_t pos);
/* The step uniform's words for n_tok tokens at pos (step.wgsl): n_tok, pos, the chunk, 0. */
void gpu_step_words(int32_t n_tok, int32_t pos, uint32_t w[4]);
typedef struct gpu_attention {
    gpu_op main, combine; /* one token: attention.wgsl (split) and attn_combine.wgsl */
    gpu_op tiled;         /* several tokens: attention_tiled.wgsl, tq tokens a workgroup */
    int32_t n_head;
    uint32_t tq;
} gpu_attention;
uint64_t gpu_attention_out_floats(const lean_hparams *hp, int32_t n_ctx, int32_t n_batch);
lean_status gpu_attention_create(lean_gpu *g, const lean_hparams *hp, int32_t n_batch, lean_gpu_buf *step,
                                 lean_gpu_buf *q, int32_t q_stride, lean_gpu_buf *kc, lean_gpu_buf *vc,
                                 lean_gpu_buf *out, gpu_attention *a, lean_error *err);
void gpu_attention_record(lean_gpu_cmd *c, const gpu_attention *a, int32_t n_tok, int32_t pos);
void gpu_attention_free(gpu_attention *a);

/* The batched decode pass's qkv_post and attention over the rows whose caches lie in one KV page
 * (kvpool.h; forward.c, section "batch"): qkv_post_rows.wgsl, attention_rows.wgsl and
 * attn_combine_rows.wgsl, each row's bits those of qkv_post and decode's attention at its
 * position (they share qkv_post_head.wgsl, attention_walk.wgsl and attn_merge.wgsl). rows: a
 * UNIFORM of rows_max vec4<u32> (batch_rows.wgsl), the page's rows; qkv: the batch's rows
 * (rows_max, q_dim + 2 kv_dim); kc, vc: the page's caches; table: its RoPE table; norms as
 * gpu_qkv_post_create's; out: gpu_attention_rows_out_floats floats, att (rows_max, q_dim) first.
 * Recording takes the page's row count and the greatest position among them (the splits). */
typedef struct gpu_attention_rows {
    gpu_op post, main, combine;
    int32_t n_head, n_slots;
} gpu_attention_rows;
uint64_t gpu_attention_rows_out_floats(const lean_hparams *hp, int32_t rows_max);
lean_status gpu_attention_rows_create(lean_gpu *g, const lean_hparams *hp, lean_gpu_buf *rows, int32_t rows_max,
                                      lean_gpu_buf *qkv, lean_gpu_buf *kc, lean_gpu_buf *vc, lean_gpu_buf *table,
                                      lean_gpu_buf *norms, lean_gpu_buf *out, gpu_attention_rows *a, lean_error *err);
void gpu_attention_rows_record(lean_gpu_cmd *c, const gpu_attention_rows *a, int32_t n_rows, int32_t max_pos);
void gpu_attention_rows_free(gpu_attention_rows *a);

#endif
