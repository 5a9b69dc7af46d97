/* lora.h — LoRA adapters on the GPU (docs/lora.md; core/lora.h has the set): a context's
 * adapters as F32 copies on the device, and per adapted weight ("site") the two dispatches that
 * add s * B (A x) to the weight's product, recorded by forward.c right after that product and
 * before anything reads it (a bias, RoPE, SwiGLU, the residual). */
#ifndef LEAN_GPU_LORA_H
#define LEAN_GPU_LORA_H

#include "core/lora.h"
#include "gpu/ops.h"

/* Where a site reads and adds, for calls of up to max_tok tokens: x (max_tok, x_stride) holds
 * the weight's input at column 0 of each token's row; y (max_tok, y_stride) its product at
 * columns y_col .. y_col + rows. Widths in floats. The embedding's site (gather) reads the
 * tokens' ids from x instead (max_tok u32; x_stride unused): its first dispatch is
 * lora_gather.wgsl's rows of A, not lora_down's product. */
typedef struct gpu_lora_io {
    bool gather;
    lean_gpu_buf *x;
    uint32_t x_stride;
    lean_gpu_buf *y;
    uint32_t y_stride, y_col;
    uint32_t rows; /* the weight's rows (outputs) */
    int32_t max_tok;
} gpu_lora_io;

typedef struct gpu_lora gpu_lora;

/* *out = set on g: io[i] says where site i reads and adds (set->n_sites entries, every one
 * read: consecutive sites of one input adding to adjacent columns of one output share their
 * dispatches). The adapters' tensors are
 * dequantized on the host (any type lean reads) and each term's B scaled by its s, then
 * uploaded: rank x (rows + cols) x 4 bytes a term. */
lean_status gpu_lora_create(lean_gpu *g, const lora_set *set, const gpu_lora_io *io, gpu_lora **out, lean_error *err);
/* Whether l (nullable: none) adds to site i or to a site sharing its dispatches. */
bool gpu_lora_on(const gpu_lora *l, int32_t site);
/* Records the two dispatches of the sites that start at site i for n_tok tokens (nothing
 * where none has terms, or where i shares an earlier site's). */
void gpu_lora_record(lean_gpu_cmd *c, const gpu_lora *l, int32_t site, int32_t n_tok);
void gpu_lora_free(gpu_lora *l); /* NULL is fine */

/* gate (n_tok, n) <- silu(g) * u of gu's rows (n_tok, 2 n), g | u (swiglu_rows.wgsl): the SwiGLU
 * of a stacked [Wgate; Wup] computed as a plain matmul, so that adapters add to g and u first. */
lean_status gpu_swiglu_rows_create(lean_gpu *g, lean_gpu_buf *gu, lean_gpu_buf *gate, int32_t n, gpu_op *op,
                                   lean_error *err);

#endif
