/* quantize.h — ggml's reference (non-imatrix) weight quantizers, one per type lean runs
 * (dev/quantize.c). A developer tool in liblean_dev.a: the runtime reads weights and never
 * writes them, so its type table (core/formats.h) has the dequantizers only. */
#ifndef LEAN_DEV_QUANTIZE_H
#define LEAN_DEV_QUANTIZE_H

#include "core/formats.h"

/* src: n floats, n a multiple of the type's block_elems (lean_type_traits_get);
 * dst: n / block_elems blocks of block_bytes. Expects finite input. */
typedef void (*lean_quantize_row_fn)(const float *src, void *dst, int64_t n);

/* The quantizer of a type id, NULL for one lean does not run. */
lean_quantize_row_fn lean_quantizer_of(uint32_t type);

#endif
