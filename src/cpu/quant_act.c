/* quant_act.c — the activation formats of kernels.h: which one each weight type takes, their
 * sizes, and their quantizers (defined here once, for every kernel table).
 *
 * What it does: x (floats) -> lean_q8_32 or lean_q8_k blocks, with d = max |x| / 127 and
 * qs = x * (127 / max |x|) rounded half to even (ggml's nearest_int trick: exact for
 * |v| < 2^22, and the same bits under any compiler that keeps float semantics). Plain C on purpose: an
 * activation row is quantized once per op and read by every weight row, so its cost is
 * O(cols) against the matmul's O(rows * cols), and one scalar definition gives every ISA and
 * every thread count the same activations.
 * What it does not: choose kernels (kernels_generic.c), or dequantize (tests do that).
 *
 * Sections: formats · quantizers
 */
#include "core/formats_layout.h"

#include "cpu/kernels.h"

#include <math.h>
#include <string.h>

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

/* ---- formats ---- */

int lean_act_for(uint32_t type) {
    switch (type) {
    case LEAN_TYPE_F32:
    case LEAN_TYPE_F16:
    case LEAN_TYPE_BF16: return LEAN_ACT_F32;
    case LEAN_TYPE_Q4_0:
    case LEAN_TYPE_Q4_1:
    case LEAN_TYPE_Q5_0:
    case LEAN_TYPE_Q5_1:
    case LEAN_TYPE_Q8_0: return LEAN_ACT_Q8_32;
    case LEAN_TYPE_Q2_K:
    case LEAN_TYPE_Q3_K:
    case LEAN_TYPE_Q4_K:
    case LEAN_TYPE_Q5_K:
    case LEAN_TYPE_Q6_K: return LEAN_ACT_Q8_K;
    default: return -1;
    }
}

size_t lean_act_row_bytes(lean_act_type act, int64_t n) {
    switch (act) {
    case LEAN_ACT_Q8_32: return (size_t)(n / 32) * sizeof(lean_q8_32);
    case LEAN_ACT_Q8_K: return (size_t)(n / LEAN_QK_K) * sizeof(lean_q8_k);
    case LEAN_ACT_F32: break;
    }
    return (size_t)n * sizeof(float);
}

/* ---- quantizers ---- */

/* n (32 or 256) values of x -> qs; returns d. max |x| is taken on the bit patterns (for
 * non-negative floats their order as integers), which is exact, has no order of evaluation
 * to keep, and lets the compiler vectorize the loop; a NaN wins it, so a NaN anywhere in the
 * block makes d NaN (and the outputs that read it NaN) instead of being skipped. A block whose
 * max |x| is 0 has d = 0 and quants 0. */
static inline float quantize_block(const float *x, int8_t *qs, int n) {
    uint32_t amax_bits = 0;
    for (int j = 0; j < n; j++) {
        uint32_t b;
        memcpy(&b, &x[j], sizeof b);
        b &= 0x7fffffffu;
        amax_bits = b > amax_bits ? b : amax_bits;
    }
    float amax;
    memcpy(&amax, &amax_bits, sizeof amax);
    const float d = amax / 127.0f;
    const float id = d > 0.0f ? 127.0f / amax : 0.0f;
    for (int j = 0; j < n; j++) {
        int32_t q = nearest_int(x[j] * id); /* |x[j] * id| <= 127.5: exact */
        qs[j] = (int8_t)(q > 127 ? 127 : q < -127 ? -127 : q);
    }
    return d;
}

static void quantize_q8_32(const float *x, lean_q8_32 *b, int64_t n) {
    for (int64_t i = 0; i < n / 32; i++, x += 32, b++) {
        b->d = quantize_block(x, b->qs, 32);
        int32_t s = 0;
        for (int j = 0; j < 32; j++) s += b->qs[j];
        b->s = s;
    }
}

static void quantize_q8_k(const float *x, lean_q8_k *b, int64_t n) {
    for (int64_t i = 0; i < n / LEAN_QK_K; i++, x += LEAN_QK_K, b++) {
        b->d = quantize_block(x, b->qs, LEAN_QK_K);
        for (int g = 0; g < LEAN_QK_K / 16; g++) {
            int s = 0;
            for (int j = 0; j < 16; j++) s += b->qs[16 * g + j];
            b->bsums[g] = (int16_t)s;
        }
    }
}

void lean_quantize_act(lean_act_type act, const float *x, void *dst, int64_t n) {
    switch (act) {
    case LEAN_ACT_Q8_32: quantize_q8_32(x, dst, n); return;
    case LEAN_ACT_Q8_K: quantize_q8_k(x, dst, n); return;
    case LEAN_ACT_F32: break;
    }
    if (dst != x) memcpy(dst, x, (size_t)n * sizeof(float));
}
