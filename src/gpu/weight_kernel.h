/* weight_kernel.h — what the kernels that read a weight share, inside src/gpu (weights.h is
 * the contract outside): each format's GPU side (weight_upload.c's table), compiling a kernel
 * over a weight (weight_kernel.c: formats.wgsl + the format's file + the kernel), and the
 * device checks every such kernel makes before it binds (weight_kernel.c).
 * Users: weight_upload.c, matmul.c, get_rows.c. */
#ifndef LEAN_GPU_WEIGHT_KERNEL_H
#define LEAN_GPU_WEIGHT_KERNEL_H

#include "gpu/weights.h"

/* The GPU side of a format: weights per chunk (formats.wgsl), and the byte offset of the f16
 * scale cut out of each block (-1: the blocks are uploaded as they are). The WGSL helpers are
 * named after lean_type_traits.name (dq_q4_0, col_q4_0; format_q4_0.wgsl names them for the
 * kernels). */
typedef struct gpu_format {
    uint32_t type;
    uint32_t chunk;
    int32_t d_offset;
} gpu_format;
/* NULL: the type has no GPU kernels. */
const gpu_format *gpu_format_of(uint32_t type);

/* Chunks of formats.wgsl in a row of w (the F32/F16/BF16 rows end in a partial one). */
uint64_t gpu_weight_row_chunks(const gpu_weight *w);

/* Compiles formats.wgsl + format_<fmt>.wgsl (a mixed stack: its glue, written here) + kernel +
 * words ("words_u32" or "words_vec4": how W is read) + a matmul's modes where given (out: "set",
 * "add", "bias", "swiglu", "qkv", "qkv_bias" — matmul_out.wgsl and matmul_out_<out>.wgsl; in:
 * "plain" or "normed" — matmul_in.wgsl and matmul_in_<in>.wgsl after the reductions, matmul_vec
 * only) + arith (matmul_tiled's "tiled_f32" or "tiled_f16") + tiled_common.wgsl for the tiled
 * kernels, with w's shape constants (formats.wgsl's list) and n_extra kernel constants. NULL
 * modes: not compiled in. */
lean_status gpu_weight_pipeline(lean_gpu *g, const gpu_weight *w, const char *kernel, const char *words,
                                const char *in, const char *out, const char *arith, const lean_gpu_const *extra,
                                int n_extra, lean_gpu_pipeline **res, lean_error *err);

/* the device's limit on workgroups per dispatch dimension (65535 when it does not say) */
uint32_t gpu_max_groups(lean_gpu *g);
/* buf holds [offset, offset + bytes) and offset is aligned for binding; what names it in the
 * error */
lean_status gpu_check_binding(lean_gpu *g, const lean_gpu_buf *buf, uint64_t offset, uint64_t bytes,
                              const char *what, lean_error *err);

#endif
