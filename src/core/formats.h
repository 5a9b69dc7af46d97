/* formats.h — tensor block formats: sizes and reference dequantization.
 *
 * A row of n elements of a quantized type is n / block_elems blocks of block_bytes
 * each (n must be a multiple of block_elems). Layouts are the ggml/GGUF ones, byte for
 * byte; formats.c documents each block as an OFFSET / SIZE table.
 *
 * The dequantizers are the reference every kernel (CPU SIMD, WGSL) is tested against.
 * The weight quantizers are developer tools, outside the runtime (dev/quantize.h).
 */
#ifndef LEAN_FORMATS_H
#define LEAN_FORMATS_H

#include "core/common.h"

typedef struct lean_type_traits {
    const char *name;      /* "q4_k" */
    uint32_t block_elems;  /* elements per block (1 for F32/F16/BF16) */
    uint32_t block_bytes;  /* bytes per block */
    /* n: elements, a multiple of block_elems. src: n / block_elems blocks. */
    void (*dequant)(const void *src, float *dst, int64_t n);
} lean_type_traits;

/* NULL for a type id lean does not support. */
const lean_type_traits *lean_type_traits_get(uint32_t type);

/* ggml's name for any type id it has defined ("Q8_K", "IQ2_XS"; a retired id's old name),
 * lean running it or not, for messages; NULL for an id ggml never defined. lean_type_name
 * (lean.h) is the contract for the types lean runs: lower case, NULL for the rest. */
const char *lean_ggml_type_name(uint32_t type);

/* Bytes of n elements of type; false if n is not a whole number of blocks or the
 * product overflows. */
bool lean_type_bytes(uint32_t type, uint64_t n_elems, uint64_t *out_bytes);

/* The K-quant super-blocks (formats.c documents their layouts). */
#define LEAN_QK_K 256        /* weights per K-quant super-block */
#define LEAN_Q2_K_BYTES 84
#define LEAN_Q3_K_BYTES 110
#define LEAN_Q4_K_BYTES 144
#define LEAN_Q5_K_BYTES 176
#define LEAN_Q6_K_BYTES 210

/* Scalar conversions, bit-exact with ggml (round to nearest even; NaN stays NaN). */
float lean_f16_to_f32(uint16_t h);
uint16_t lean_f32_to_f16(float f);
float lean_bf16_to_f32(uint16_t h);
uint16_t lean_f32_to_bf16(float f);

#endif
