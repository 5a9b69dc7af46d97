/* rope.h — the rotary position embedding's angles: model math, shared by the CPU backend
 * (which rotates with them, cpu/ops_ref.c) and the GPU backend (which uploads a table of
 * them, gpu/ops.c), so both rotate by the same bits. */
#ifndef LEAN_ROPE_H
#define LEAN_ROPE_H

#include "core/common.h"

/* The rotation angles of one position, as llama.cpp computes them:
 *   theta_scale = base^(-2 / head_dim),  theta_i = pos * theta_scale^i / freq_factor_i
 * (theta_scale^i by repeated multiplication in float, like ggml's rope cache).
 * cos_out, sin_out: (head_dim / 2). freq_factors: (head_dim / 2) or NULL (all 1). */
void lean_rope_angles(float *cos_out, float *sin_out, int32_t pos, int32_t head_dim, float base,
                      const float *freq_factors);

#endif
