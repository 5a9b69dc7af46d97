/* weights.h — weight matrices on the GPU in their own block formats: upload (with the
 * load-time repacking each format's kernels want, documented in weight_upload.c), matrix x
 * activations for decode (one token: a vector kernel) and prefill (n tokens: a tiled kernel;
 * matmul.c), and the embedding gather (one row per token, dequantized; get_rows.c). Every
 * format lean reads: F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q2_K Q3_K Q4_K Q5_K Q6_K.
 *
 * Shapes follow model.h: W is (rows, cols), y = W x. Activations are F32, token-major:
 * x[t * cols + c], y[t * rows + r], t < n_tok. The number of tokens of the current call is
 * read by the kernels from the step uniform (forward.c owns it): a 16-byte uniform buffer
 * whose first u32 is n_tok (WGSL: struct Step { n_tok: u32, pos: u32, a: u32, b: u32 }). */
#ifndef LEAN_GPU_WEIGHTS_H
#define LEAN_GPU_WEIGHTS_H

#include "gpu/gpu.h"
#include "core/model.h"

/* A stack of matrices in different 32-weight block formats (gpu_weight_upload_stacked): rows
 * before end are part p's (after the previous part's), found at row + gap of the layout. */
typedef struct gpu_weight_part {
    uint32_t type;
    int64_t end, gap;
} gpu_weight_part;
#define GPU_WEIGHT_MAX_PARTS 4

/* One weight matrix (or vector) resident on the GPU. */
typedef struct gpu_weight {
    uint32_t type;       /* lean_type of the file (the first part's, for a mixed stack) */
    int64_t rows, cols;  /* a vector is (1, cols) */
    lean_gpu_buf *buf;   /* the (repacked) blocks */
    uint64_t scale_base; /* word of buf where the separated f16 scales start (weight_upload.c) */
    int n_parts;         /* 0, or the formats of a mixed stack (2 or more) */
    gpu_weight_part part[GPU_WEIGHT_MAX_PARTS];
} gpu_weight;

/* Repacks t (whose data is mapped) and uploads it; a tensor larger than gpu_binding_max_bytes
 * fails with LEAN_ERR_UNSUPPORTED naming it, its size and the limit. */
lean_status gpu_weight_upload(lean_gpu *g, const lean_tensor *t, gpu_weight *out, lean_error *err);
/* The rows of ts[0..n) stacked into one weight (ts[0]'s rows first), uploaded as one tensor
 * named name: so one dispatch reads [Wq; Wk; Wv] or [Wgate; Wup]. The tensors must share
 * columns and either their type or, up to GPU_WEIGHT_MAX_PARTS runs of one type, the 32-weight
 * block formats Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 (llama.cpp's _K_M files give Q5_0 q, k and Q8_0 v
 * where rows are no multiple of 256): gpu_weight_stackable says which; LEAN_ERR_UNSUPPORTED
 * otherwise (the caller keeps them apart). Each tensor is repacked where it lies, a piece at a
 * time (no copy of the stack on the host). A mixed stack serves matmuls, not get_rows. */
bool gpu_weight_stackable(const lean_tensor *const *ts, int n);
lean_status gpu_weight_upload_stacked(lean_gpu *g, const lean_tensor *const *ts, int n, const char *name,
                                      gpu_weight *out, lean_error *err);

/* The upload in pieces, which the two above are made of and a streamed load uses (forward.c):
 * begin makes the buffer of a weight (one tensor, or a stack as gpu_weight_upload_stacked's)
 * and checks it as they do, without reading any data; put gives it bytes [at, at + n) of
 * tensor i's file data (whole blocks), repacked and written at once (the caller may reuse
 * bytes after it); end checks every byte of every tensor came, writes the words two tensors
 * share, and hands the weight over. The tensors may come in any order, each one's pieces in
 * order. cancel (or a failed end) frees the fill and its buffer. The repack scratch is one for
 * any number of fills: at most 32768 blocks' quants and scales (6.9 MB, Q6_K's), made on
 * first use; with the caller's piece, all the host memory an upload takes. */
typedef struct gpu_repack gpu_repack;
typedef struct gpu_weight_fill gpu_weight_fill;
lean_status gpu_repack_new(gpu_repack **out, lean_error *err);
void gpu_repack_free(gpu_repack *r);
lean_status gpu_weight_fill_begin(lean_gpu *g, gpu_repack *r, const lean_tensor *const *ts, int n, const char *name,
                                  gpu_weight_fill **out, lean_error *err);
/* A plain buffer of `usage` (gpu.h) holding ts[0..n) (up to 4) one after another as the file has
 * them (F32 norms and biases); end's weight has only buf set. */
lean_status gpu_weight_fill_begin_bytes(lean_gpu *g, const lean_tensor *const *ts, int n, const char *name,
                                        unsigned usage, gpu_weight_fill **out, lean_error *err);
lean_status gpu_weight_fill_put(gpu_weight_fill *f, int i, uint64_t at, const void *bytes, uint64_t n,
                                lean_error *err);
lean_status gpu_weight_fill_end(gpu_weight_fill *f, gpu_weight *out, lean_error *err);
void gpu_weight_fill_cancel(gpu_weight_fill *f);
void gpu_weight_free(gpu_weight *w);

/* What a matmul does with its outputs (shaders/matmul_out.wgsl has each one's expression, the
 * unfused op's, so a fused mode changes no bit). */
typedef enum gpu_mm_mode {
    GPU_MM_SET,    /* y = W x */
    GPU_MM_ADD,    /* y += W x: the residual add, fused into Wo and Wdown */
    GPU_MM_BIAS,   /* y = W x + bias: qwen2's q, k, v biases */
    GPU_MM_SWIGLU, /* W stacks [Wgate; Wup] (2 n rows, gpu_weight_upload_stacked):
                      y = silu(Wgate x) * (Wup x), n outputs */
} gpu_mm_mode;

/* Where a matmul writes: output o (< rows, or rows / 2 in SWIGLU mode) of token t at element
 * t * stride + col + o of y, from byte offset on (a multiple of min_storage_offset_align);
 * stride 0 means the number of outputs (tokens' rows packed). bias: BIAS only, F32 laid out as
 * a row of y: output o's at col + o. part: NULL, or scratch for the prefill kernel's partial
 * sums, at least gpu_matmul_part_floats F32s (read and written by the matmul only; matmuls
 * recorded one after another may share it): with it, a matrix with few output tiles is split
 * over its columns (matmul.c says when) and its parts added by a second dispatch. */
typedef struct gpu_mm_kv gpu_mm_kv;
typedef struct gpu_mm_out {
    lean_gpu_buf *y;
    uint64_t offset;
    uint32_t col, stride;
    gpu_mm_mode mode;
    lean_gpu_buf *bias;
    const gpu_mm_kv *kv; /* NULL, or (SET and BIAS only) decode's Q, K, V epilogue: below */
    lean_gpu_buf *part;
} gpu_mm_out;
/* The F32s of part a matmul of a rows x cols weight in mode takes for max_tok tokens (0: it is
 * not split, part may be NULL). A function of the shape and g's options (tile_ksplit) alone. */
uint64_t gpu_matmul_part_floats(lean_gpu *g, int64_t rows, int64_t cols, gpu_mm_mode mode, int32_t max_tok);

/* Decode's Q, K, V epilogue, for a matmul whose outputs are columns col .. of the q | k | v
 * row (stride q_dim + 2 kv_dim; col and the outputs whole heads): the one-token kernel does
 * qkv_post's work for a model without q/k norms — q and k rotated by RoPE at the position in
 * step (words: n_tok, pos, ...) with table's cos and sin (gpu_rope_table_create), q written to
 * y, k and v to row pos of kc and vc (n_ctx, kv_dim) — so a decode step has no qkv_post
 * dispatch; each value is qkv_post's expression over the matmul's (biased) output. The prefill
 * kernel writes y as without it (qkv_post follows there). It binds 3 more storage buffers
 * (6 to 8 in all, with a bias and a normed input): gpu_matmul_kv_fits says whether the device
 * has them. */
struct gpu_mm_kv {
    lean_gpu_buf *step, *kc, *vc, *table;
    int32_t q_dim, kv_dim, head_dim;
    bool neox;
};
bool gpu_matmul_kv_fits(lean_gpu *g, bool bias, bool normed);

/* What a matmul reads: x (max_tok, cols) F32 from byte offset on (a multiple of the device's
 * min_storage_offset_align). With norm (a storage buffer of cols F32 padded to 16 bytes), the
 * one-token kernel reads instead raw's row 0 (decode; row t of the batched pass, which raw must
 * then hold: (max_tok, cols) is bound where raw has it) RMS-normed by norm with eps, rmsnorm.wgsl's computation bit for bit: the norm's
 * own dispatch fused away in decode; a prefill (n_tok > 1) reads x, normed by that dispatch. */
typedef struct gpu_mm_in {
    lean_gpu_buf *x;
    uint64_t offset;
    lean_gpu_buf *raw, *norm; /* NULL: x is the input */
    float eps;
} gpu_mm_in;

/* W x for up to max_tok tokens per call, W fixed at bind time. One gpu_matmul per
 * weight use (a layer's wq, wk, ...), made at load; recording it costs no allocation.
 * LEAN_ERR_ARG for a misaligned offset, a buffer too small, a SWIGLU weight of odd rows or a
 * BIAS without bias; LEAN_ERR_UNSUPPORTED for more storage buffers than the device binds; step
 * may be NULL when max_tok is 1. n_tok == 1 runs matmul_vec.wgsl,
 * n_tok > 1 matmul_tiled.wgsl; each fixes its summation order by its own shape (the files say
 * which), so a prefill's results do not depend on n_tok, and equal a decode's only to rounding. */
typedef struct gpu_matmul gpu_matmul;
/* Whether the one-token kernel takes a normed input of cols columns on g: a row short enough
 * for the fusion to pay (every workgroup sums its squares), and the norm weight's storage
 * buffer bindable beside a bias. */
bool gpu_matmul_can_norm(lean_gpu *g, int32_t cols);
lean_status gpu_matmul_create(lean_gpu *g, const gpu_weight *w, int32_t max_tok, lean_gpu_buf *step,
                              const gpu_mm_in *in, const gpu_mm_out *out, gpu_matmul **res, lean_error *err);
/* Records the dispatches for n_tok tokens (1 <= n_tok <= max_tok; the step uniform must say
 * the same n_tok when the command buffer runs). */
void gpu_matmul_record(lean_gpu_cmd *c, const gpu_matmul *m, int32_t n_tok);
/* The batched decode pass (lean_decode_batch): the one-token kernel over each of n_rows rows of
 * x into rows of y (row t at t * stride), each row's bits those of a one-token call on it.
 * Any matmul records rows where its weight's columns are a multiple of 4
 * (gpu_matmul_rows_fit: rows start on a vec4) and it has no q|k|v epilogue (which writes one
 * position). gpu_matmul_create_rows makes a matmul with the one-token kernel alone, for up to
 * max_rows rows (LEAN_ERR_UNSUPPORTED for those two where max_rows > 1). With a rows uniform
 * (16 bytes, its first u32 the n_rows of each record, as step.wgsl's n_tok), a workgroup takes
 * several rows, each weight loaded once for them, the bits the same; it takes a plain input and
 * no epilogue (else LEAN_ERR_ARG). rows NULL: a workgroup a row. */
bool gpu_matmul_rows_fit(const gpu_weight *w);
lean_status gpu_matmul_create_rows(lean_gpu *g, const gpu_weight *w, int32_t max_rows, lean_gpu_buf *rows,
                                   const gpu_mm_in *in, const gpu_mm_out *out, gpu_matmul **res, lean_error *err);
void gpu_matmul_record_rows(lean_gpu_cmd *c, const gpu_matmul *m, int32_t n_rows);
void gpu_matmul_free(gpu_matmul *m);

/* out[t * cols + c] = dequantized row ids[t] of W, for t < n_tok (ids: one u32 per token). */
typedef struct gpu_get_rows gpu_get_rows;
lean_status gpu_get_rows_create(lean_gpu *g, const gpu_weight *w, int32_t max_tok, lean_gpu_buf *step,
                                lean_gpu_buf *ids, lean_gpu_buf *out, gpu_get_rows **res, lean_error *err);
void gpu_get_rows_record(lean_gpu_cmd *c, const gpu_get_rows *gr, int32_t n_tok);
void gpu_get_rows_free(gpu_get_rows *gr);

#endif
