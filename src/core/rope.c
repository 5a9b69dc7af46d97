/* rope.c — the rotary position embedding's angles (rope.h). */
#include "core/rope.h"

#include <math.h>

void lean_rope_angles(float *cos_out, float *sin_out, int32_t pos, int32_t head_dim, float base,
                      const float *freq_factors) {
    const float theta_scale = powf(base, -2.0f / (float)head_dim);
    float theta = (float)pos; /* pos * theta_scale^i, for i = 0, 1, ... */
    for (int32_t i = 0; i < head_dim / 2; i++) {
        const float th = freq_factors ? theta / freq_factors[i] : theta;
        cos_out[i] = cosf(th);
        sin_out[i] = sinf(th);
        theta *= theta_scale;
    }
}
