/* quantize.c — ggml's reference (non-imatrix) weight quantizers for every type lean runs, and
 * the lookup the developer tools use (dev/quantize.h): quantize_row_*_ref, what llama.cpp's
 * quantizer writes without an importance matrix, so files lean writes decode the same there.
 *
 * Same rules as core/formats.c, whose dequantizers and OFFSET / SIZE tables these invert
 * (its header comment says the rules): ggml's operations in ggml's float32 order, never
 * fused, fields little-endian and written byte by byte (core/formats_layout.h, shared with
 * the dequantizers). Quantizers expect finite input; for NaN or inf they give some defined
 * block (ggml's result there is undefined behaviour). tests/test_formats.c holds every one
 * to vectors made by an independent numpy implementation (scripts/quants.py).
 *
 * Not in the runtime library: lean reads weights, it never writes them. The activations the
 * CPU backend quantizes at run time are another format (cpu/quant_act.c).
 *
 * The K-quants' make_qkx2_quants (Q4_K/Q5_K) and make_qx_quants (rmse_type 1, Q6_K) search
 * several candidate scales per sub-block, so they are far slower than the dequantizers
 * (about 20 passes over each sub-block).
 *
 * Sections:
 *   1. helpers: the roundings
 *   2. F32, F16, BF16
 *   3. Q8_0
 *   4. Q4_0, Q4_1, Q5_0, Q5_1 (one quantizer per kind, for 4 or 5 bits)
 *   5. the K-quant scale searches: make_qkx2_quants, make_qx_quants
 *   6. Q4_K, Q5_K (one quantizer, for 4 or 5 bits)
 *   7. Q6_K
 *   8. Q2_K, Q3_K
 *   9. the lookup: lean_quantizer_of
 */
#include "dev/quantize.h"

#include "core/formats_layout.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#define QK_K LEAN_QK_K
#define GROUP_MAX_EPS 1e-15f /* ggml's threshold for "this group is all zero" */

/* ================================================================ 1. helpers */

static int clamp_int(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* ggml's (int8_t)(v) / (uint8_t)(v) on v >= 0 followed by MIN(hi, .): truncation toward
 * zero, capped. For every finite input the legacy quantizers produce v in [0, hi + 1.5],
 * where this is exactly ggml's expression; NaN and negatives give 0 instead of UB. */
static int trunc_cap(float v, int hi) {
    if (!(v > 0.0f)) return 0;
    if (v >= (float)hi) return hi;
    return (int)v;
}

/* ggml's int8_t q = roundf(v): to nearest, halves away from zero. For every finite input
 * Q8_0 produces |v| <= 127 (plus an ulp), where this is exactly ggml's expression;
 * NaN gives 0 and infinities saturate instead of UB. */
static int8_t round_to_int8(float v) {
    float r = roundf(v);
    if (r != r) return 0;
    if (r >= 127.0f) return 127;
    if (r <= -128.0f) return -128;
    return (int8_t)r;
}

/* ================================================================ 2. F32, F16, BF16
 * One element per "block": 4, 2 and 2 bytes, little-endian. */

static void quantize_f32(const float *src, void *dst, int64_t n) {
    memcpy(dst, src, (size_t)n * sizeof(float));
}

static void quantize_f16(const float *src, void *dst, int64_t n) {
    uint8_t *p = dst;
    for (int64_t i = 0; i < n; i++) store_f16(p + 2 * i, src[i]);
}

static void quantize_bf16(const float *src, void *dst, int64_t n) {
    uint8_t *p = dst;
    for (int64_t i = 0; i < n; i++) {
        uint16_t h = lean_f32_to_bf16(src[i]);
        p[2 * i] = (uint8_t)(h & 0xff);
        p[2 * i + 1] = (uint8_t)(h >> 8);
    }
}

/* ================================================================ 3. Q8_0
 * amax = max |x|, d = amax / 127, qs = roundf(x * (1/d)) (half away from zero); d = 0
 * (id = 0) for an all-zero block. */

static void quantize_q8_0(const float *src, void *dst, int64_t n) {
    uint8_t *b = dst;
    for (int64_t i = 0; i < n / QK8_0; i++, b += Q8_0_BYTES, src += QK8_0) {
        float amax = 0.0f;
        for (int j = 0; j < QK8_0; j++) amax = fmaxf(amax, fabsf(src[j]));
        const float d = amax / 127;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        store_f16(b, d);
        for (int j = 0; j < QK8_0; j++) b[2 + j] = (uint8_t)round_to_int8(src[j] * id);
    }
}

/* ================================================================ 4. Q4_0, Q4_1, Q5_0, Q5_1
 * With Z = 2^(bits-1) and Q = 2^bits - 1 (8 and 15 for 4 bits, 16 and 31 for 5):
 *   _0: max = the first x of largest |x|; d = max / -Z (so max maps to -Z and the range
 *       is asymmetric, [-Z, Z - 1]); q = min(Q, trunc(x / d + Z + 0.5)).
 *   _1: d = (max - min) / Q, m = min; q = min(Q, trunc((x - min) / d + 0.5)) (ggml caps
 *       Q4_1 only; for finite input Q5_1's q <= 31 regardless).
 * In all four, "/ d" is "* id" with id = 1/d (0 when d is 0). */

/* the first element of largest magnitude, with its sign (0 for an all-zero block) */
static float signed_absmax(const float *x, int n) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; j++) {
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    return max;
}

static void min_max(const float *x, int n, float *out_min, float *out_max) {
    float min = 3.40282347e+38f, max = -3.40282347e+38f; /* FLT_MAX */
    for (int j = 0; j < n; j++) {
        if (x[j] < min) min = x[j];
        if (x[j] > max) max = x[j];
    }
    *out_min = min;
    *out_max = max;
}

/* Q4_0 / Q5_0: d, then the quants. */
static void quantize_sym(const float *src, void *dst, int64_t n, int bits) {
    const int zero = 1 << (bits - 1), qmax = (1 << bits) - 1;
    const float offset = (float)zero + 0.5f; /* 8.5 or 16.5: rounds, and shifts to unsigned */
    const size_t block_bytes = bits == 5 ? Q5_0_BYTES : Q4_0_BYTES;
    uint8_t *b = dst;
    int q[QK_LEGACY];
    for (int64_t i = 0; i < n / QK_LEGACY; i++, b += block_bytes, src += QK_LEGACY) {
        const float d = signed_absmax(src, QK_LEGACY) / -zero;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        store_f16(b, d);
        for (int j = 0; j < QK_LEGACY; j++) q[j] = trunc_cap(src[j] * id + offset, qmax);
        store_quants(b + 2, bits, q);
    }
}

/* Q4_1 / Q5_1: d, m, then the quants. */
static void quantize_min(const float *src, void *dst, int64_t n, int bits) {
    const int qmax = (1 << bits) - 1;
    const size_t block_bytes = bits == 5 ? Q5_1_BYTES : Q4_1_BYTES;
    uint8_t *b = dst;
    int q[QK_LEGACY];
    for (int64_t i = 0; i < n / QK_LEGACY; i++, b += block_bytes, src += QK_LEGACY) {
        float min, max;
        min_max(src, QK_LEGACY, &min, &max);
        const float d = (max - min) / qmax;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        store_f16(b, d);
        store_f16(b + 2, min);
        for (int j = 0; j < QK_LEGACY; j++) q[j] = trunc_cap((src[j] - min) * id + 0.5f, qmax);
        store_quants(b + 4, bits, q);
    }
}

static void quantize_q4_0(const float *src, void *dst, int64_t n) { quantize_sym(src, dst, n, 4); }
static void quantize_q5_0(const float *src, void *dst, int64_t n) { quantize_sym(src, dst, n, 5); }
static void quantize_q4_1(const float *src, void *dst, int64_t n) { quantize_min(src, dst, n, 4); }
static void quantize_q5_1(const float *src, void *dst, int64_t n) { quantize_min(src, dst, n, 5); }

/* ================================================================ 5. the K-quant scale searches */

/* ggml's make_qkx2_quants: fits x[i] ~ scale * L[i] - the_min with L[i] in [0, nmax],
 * minimizing sum weights[i] * err^2 (or * |err| with use_mad, Q2_K's). It starts from the
 * min/max grid, then tries nstep + 1 grids iscale = (rmin + rdelta * is + nmax) /
 * (max - min), solving the weighted least squares for (scale, min) on each and keeping
 * the best. Returns the scale; *the_min >= 0 is the minimum's magnitude. Laux is
 * scratch for n quants. Note that min moves with each improvement and later grids use
 * the new one, exactly as in ggml. */
static float make_qkx2_quants(int n, int nmax, const float *x, const float *weights, uint8_t *L,
                              float *the_min, uint8_t *Laux, float rmin, float rdelta, int nstep, int use_mad) {
    float min = x[0];
    float max = x[0];
    float sum_w = weights[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        float w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        for (int i = 0; i < n; i++) L[i] = 0;
        *the_min = -min;
        return 0.0f;
    }
    float iscale = (float)nmax / (max - min);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; i++) {
        int l = nearest_int(iscale * (x[i] - min));
        L[i] = (uint8_t)clamp_int(l, 0, nmax);
        float diff = scale * (float)L[i] + min - x[i];
        diff = use_mad ? fabsf(diff) : diff * diff;
        best_error += weights[i] * diff;
    }
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * (float)is + (float)nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            int l = clamp_int(nearest_int(iscale * (x[i] - min)), 0, nmax);
            Laux[i] = (uint8_t)l;
            float w = weights[i];
            sum_l += w * (float)l;
            sum_l2 += w * (float)l * (float)l;
            sum_xl += w * (float)l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0;
            for (int i = 0; i < n; i++) {
                float diff = this_scale * (float)Laux[i] + this_min - x[i];
                diff = use_mad ? fabsf(diff) : diff * diff;
                cur_error += weights[i] * diff;
            }
            if (cur_error < best_error) {
                for (int i = 0; i < n; i++) L[i] = Laux[i];
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

/* The first x[i] of largest |x| into *max; false (and all L = 0) for a group whose largest |x|
 * is below GROUP_MAX_EPS (make_qx_quants' and make_q3_quants' start). */
static bool first_absmax(int n, const float *x, float *max, uint8_t *L) {
    float amax = 0;
    *max = 0;
    for (int i = 0; i < n; i++) {
        float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            *max = x[i];
        }
    }
    if (amax >= GROUP_MAX_EPS) return true;
    for (int i = 0; i < n; i++) L[i] = 0;
    return false;
}

/* ggml's make_qx_quants with rmse_type = 1 and no importance weights (weights x^2):
 * a symmetric fit x[i] ~ scale * (L[i] - nmax), L[i] in [0, 2 * nmax - 1]. Starts from
 * the grid that maps the largest |x| to -nmax, then tries the 18 grids
 * -(nmax + 0.1 * is) / max, is = -9..9, keeping the one with the largest
 * sumlx^2 / suml2 (least weighted squared error). Returns the scale (0 for a group
 * whose largest |x| is below GROUP_MAX_EPS, with all L = 0). */
static float make_qx_quants(int n, int nmax, const float *x, uint8_t *L) {
    float max;
    if (!first_absmax(n, x, &max, L)) return 0.0f;
    float iscale = (float)-nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (uint8_t)(l + nmax);
        float w = x[i] * x[i];
        sumlx += w * x[i] * (float)l;
        suml2 += w * (float)l * (float)l;
    }
    float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        iscale = -((float)nmax + 0.1f * (float)is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; i++) {
            int l = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
            float w = x[i] * x[i];
            sumlx += w * x[i] * (float)l;
            suml2 += w * (float)l * (float)l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++) {
                L[i] = (uint8_t)(nmax + clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1));
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* ggml's make_q3_quants with do_rmse (Q3_K): the grid that maps the largest |x| to -nmax,
 * then up to 5 sweeps that move one L[i] at a time (L[i] in [-nmax, nmax - 1]) to where
 * the weighted (x^2) least squares puts it, keeping a move when it raises sumlx^2 / suml2.
 * Writes L[i] + nmax, returns the scale (0 and all L = 0 for an all-zero group). */
static float make_q3_quants(int n, int nmax, const float *x, uint8_t *L) {
    float max;
    if (!first_absmax(n, x, &max, L)) return 0.0f;
    const float iscale = (float)-nmax / max;
    int l8[QK_K / 16];
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        l8[i] = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
        float w = x[i] * x[i];
        sumlx += w * x[i] * (float)l8[i];
        suml2 += w * (float)l8[i] * (float)l8[i];
    }
    for (int itry = 0; itry < 5; itry++) {
        int n_changed = 0;
        for (int i = 0; i < n; i++) {
            float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * (float)l8[i];
            if (!(slx > 0)) continue;
            float sl2 = suml2 - w * (float)l8[i] * (float)l8[i];
            int new_l = clamp_int(nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
            if (new_l == l8[i]) continue;
            slx += w * x[i] * (float)new_l;
            sl2 += w * (float)new_l * (float)new_l;
            if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                l8[i] = new_l;
                sumlx = slx;
                suml2 = sl2;
                n_changed++;
            }
        }
        if (!n_changed) break;
    }
    for (int i = 0; i < n; i++) L[i] = (uint8_t)(l8[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* The scales of a Q4_K or Q5_K super-block: per 32-weight sub-block a (scale, min) fit,
 * then the 6-bit quantization of the 8 scales and 8 mins against the super-block's d and
 * dmin, then the quants again against the rounded scales. Writes d, dmin and the 12
 * scale bytes into block (offsets 0, 2, 4) and the quants (0..nmax) into L. */
static void quantize_k_scales(const float *x, uint8_t *block, uint8_t *L, int nmax, float rmin, float rdelta,
                              int nstep) {
    uint8_t Laux[32];
    float weights[32];
    float mins[QK_K / 32];
    float scales[QK_K / 32];
    float max_scale = 0; /* the mins are subtracted, so the scales are positive */
    float max_min = 0;
    for (int j = 0; j < QK_K / 32; j++) {
        const float *xs = x + 32 * j;
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++) sum_x2 += xs[l] * xs[l];
        float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++) weights[l] = av_x + fabsf(xs[l]);
        scales[j] = make_qkx2_quants(32, nmax, xs, weights, L + 32 * j, &mins[j], Laux, rmin, rdelta, nstep, 0);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }

    float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    uint8_t *sm = block + 4;
    for (int j = 0; j < QK_K / 32; j++) {
        /* ggml stores nearest_int's int into a uint8_t (mod 256), then caps at 63 */
        uint8_t ls = (uint8_t)nearest_int(inv_scale * scales[j]);
        uint8_t lm = (uint8_t)nearest_int(inv_min * mins[j]);
        put_scale_min_k4(j, sm, ls < 63 ? ls : 63, lm < 63 ? lm : 63);
    }
    store_f16(block, max_scale / 63.f);
    store_f16(block + 2, max_min / 63.f);

    for (int j = 0; j < QK_K / 32; j++) {
        uint8_t sc, m;
        get_scale_min_k4(j, sm, &sc, &m);
        const float d = load_f16(block) * (float)sc;
        if (d == 0.0f) continue; /* keeps the quants of the fit above */
        const float dm = load_f16(block + 2) * (float)m;
        for (int ii = 0; ii < 32; ii++) {
            L[32 * j + ii] = (uint8_t)clamp_int(nearest_int((x[32 * j + ii] + dm) / d), 0, nmax);
        }
    }
}

/* ================================================================ 6. Q4_K, Q5_K
 * Per 32-weight sub-block a (scale, min) fit (quantize_k_scales, above), then the quants:
 * weight 32j + l's low 4 bits into qs[32 * (j / 2) + l] (the low nibble for even j, the high
 * for odd), Q5_K's fifth bit into bit j of qh[l] (formats.c's tables). */

static void quantize_k45(const float *src, void *dst, int64_t n, int bits) {
    const size_t block_bytes = bits == 5 ? LEAN_Q5_K_BYTES : LEAN_Q4_K_BYTES;
    uint8_t *b = dst;
    uint8_t L[QK_K];
    for (int64_t i = 0; i < n / QK_K; i++, b += block_bytes, src += QK_K) {
        if (bits == 5) quantize_k_scales(src, b, L, 31, -0.5f, 0.1f, 15); /* ggml's grids */
        else quantize_k_scales(src, b, L, 15, -1.0f, 0.1f, 20);
        uint8_t *qh = b + 16; /* Q5_K only */
        uint8_t *qs = bits == 5 ? b + 48 : b + 16;
        if (bits == 5) memset(qh, 0, QK_K / 8);
        for (int j = 0; j < QK_K / 32; j += 2, qs += 32) {
            for (int l = 0; l < 32; l++) {
                int l1 = L[32 * j + l], l2 = L[32 * j + 32 + l];
                if (bits == 5) qh[l] |= (uint8_t)(((l1 >> 4) << j) | ((l2 >> 4) << (j + 1)));
                qs[l] = (uint8_t)((l1 & 0x0f) | ((l2 & 0x0f) << 4));
            }
        }
    }
}

static void quantize_q4_k(const float *src, void *dst, int64_t n) { quantize_k45(src, dst, n, 4); }
static void quantize_q5_k(const float *src, void *dst, int64_t n) { quantize_k45(src, dst, n, 5); }

/* ================================================================ 7. Q6_K
 * Per 16-weight sub-block a symmetric fit (make_qx_quants), the 16 scales to int8 against
 * the super-scale d, the quants again against the rounded scales, then packed: weight e's
 * low 4 bits and high 2 bits as formats.c's table places them. */

/* A super-block's 16 symmetric sub-block fits (fit: make_qx_quants for Q6_K, make_q3_quants
 * for Q3_K, with nmax) into scales and L; returns the largest |scale|, *max_scale that scale
 * with its sign. */
static float fit_sub16(const float *src, int nmax, float (*fit)(int, int, const float *, uint8_t *), uint8_t *L,
                       float *scales, float *max_scale) {
    float max_abs_scale = 0;
    *max_scale = 0;
    for (int ib = 0; ib < QK_K / 16; ib++) {
        scales[ib] = fit(16, nmax, src + 16 * ib, L + 16 * ib);
        if (fabsf(scales[ib]) > max_abs_scale) {
            max_abs_scale = fabsf(scales[ib]);
            *max_scale = scales[ib];
        }
    }
    return max_abs_scale;
}

static void quantize_q6_k(const float *src, void *dst, int64_t n) {
    uint8_t *b = dst;
    uint8_t L[QK_K];
    float scales[QK_K / 16];
    for (int64_t i = 0; i < n / QK_K; i++, b += LEAN_Q6_K_BYTES, src += QK_K) {
        float max_scale;
        if (fit_sub16(src, 32, make_qx_quants, L, scales, &max_scale) < GROUP_MAX_EPS) { /* an all-zero block (d = +0) */
            memset(b, 0, LEAN_Q6_K_BYTES);
            continue;
        }

        float iscale = -128.f / max_scale;
        store_f16(b + 208, 1 / iscale);
        int8_t *sc = (int8_t *)(b + 192);
        for (int ib = 0; ib < QK_K / 16; ib++) {
            int v = nearest_int(iscale * scales[ib]);
            b[192 + ib] = (uint8_t)(v < 127 ? v : 127); /* ggml: int -> int8_t, mod 256 */
        }

        for (int j = 0; j < QK_K / 16; j++) {
            const float d = load_f16(b + 208) * (float)sc[j];
            if (d == 0.0f) continue; /* keeps the quants of the fit above */
            for (int ii = 0; ii < 16; ii++) {
                L[16 * j + ii] = (uint8_t)(clamp_int(nearest_int(src[16 * j + ii] / d), -32, 31) + 32);
            }
        }

        uint8_t *ql = b;
        uint8_t *qh = b + 128;
        for (int j = 0; j < QK_K; j += 128, ql += 64, qh += 32) {
            for (int l = 0; l < 32; l++) {
                const uint8_t q1 = L[j + l], q2 = L[j + l + 32], q3 = L[j + l + 64], q4 = L[j + l + 96];
                ql[l] = (uint8_t)((q1 & 0x0f) | ((q3 & 0x0f) << 4));
                ql[l + 32] = (uint8_t)((q2 & 0x0f) | ((q4 & 0x0f) << 4));
                qh[l] = (uint8_t)((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
            }
        }
    }
}

/* ================================================================ 8. Q2_K, Q3_K
 * ggml's quantize_row_q2_K_ref and q3_K_ref: Q2_K fits each 16-weight sub-block with
 * make_qkx2_quants (use_mad), Q3_K with make_q3_quants; then the scales (and mins) to 4 or
 * 6 bits against the super-scales, the quants again against the rounded scales, and the
 * packing of formats.c's tables. */

/* weight e's 2 low bits into qs: qs[32h + l] holds e = 128h + 32k + l at bits 2k */
static void pack_2bit(const uint8_t *L, uint8_t *qs) {
    for (int j = 0; j < QK_K; j += 128)
        for (int l = 0; l < 32; l++)
            qs[j / 4 + l] = (uint8_t)((L[j + l] & 3) | ((L[j + l + 32] & 3) << 2) | ((L[j + l + 64] & 3) << 4) |
                                      ((L[j + l + 96] & 3) << 6));
}

static void quantize_q2_k(const float *src, void *dst, int64_t n) {
    uint8_t *b = dst;
    uint8_t L[QK_K], Laux[16];
    float weights[16], mins[QK_K / 16], scales[QK_K / 16];
    for (int64_t i = 0; i < n / QK_K; i++, b += LEAN_Q2_K_BYTES, src += QK_K) {
        float max_scale = 0, max_min = 0; /* the mins are subtracted, so the scales are positive */
        for (int j = 0; j < QK_K / 16; j++) {
            for (int l = 0; l < 16; l++) weights[l] = fabsf(src[16 * j + l]);
            scales[j] = make_qkx2_quants(16, 3, src + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, 1);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        /* ggml stores nearest_int's int into the uint8_t scale byte (mod 256), the min's
         * shifted left 4 over it, uncapped */
        const float is = max_scale > 0 ? 15.f / max_scale : 0.f, im = max_min > 0 ? 15.f / max_min : 0.f;
        for (int j = 0; j < QK_K / 16; j++)
            b[j] = (uint8_t)(max_scale > 0 ? nearest_int(is * scales[j]) : 0) |
                   (uint8_t)(max_min > 0 ? (unsigned)nearest_int(im * mins[j]) << 4 : 0);
        store_f16(b + 80, max_scale > 0 ? max_scale / 15.f : 0.f);
        store_f16(b + 82, max_min > 0 ? max_min / 15.f : 0.f);
        for (int j = 0; j < QK_K / 16; j++) {
            const float d = load_f16(b + 80) * (float)(b[j] & 0x0f);
            if (d == 0.0f) continue; /* keeps the quants of the fit above */
            const float dm = load_f16(b + 82) * (float)(b[j] >> 4);
            for (int l = 0; l < 16; l++)
                L[16 * j + l] = (uint8_t)clamp_int(nearest_int((src[16 * j + l] + dm) / d), 0, 3);
        }
        pack_2bit(L, b + 16);
    }
}

static void quantize_q3_k(const float *src, void *dst, int64_t n) {
    uint8_t *b = dst;
    uint8_t L[QK_K];
    float scales[QK_K / 16];
    for (int64_t i = 0; i < n / QK_K; i++, b += LEAN_Q3_K_BYTES, src += QK_K) {
        float max_scale;
        fit_sub16(src, 4, make_q3_quants, L, scales, &max_scale);
        memset(b, 0, LEAN_Q3_K_BYTES);
        const float iscale = max_scale != 0.0f ? -32.f / max_scale : 0.f;
        if (max_scale != 0.0f) /* else every scale byte 0 (scale -32) and d = +0 */
            for (int j = 0; j < QK_K / 16; j++)
                put_scale_q3_k(j, b + 96, clamp_int(nearest_int(iscale * scales[j]), -32, 31));
        store_f16(b + 108, max_scale != 0.0f ? 1 / iscale : 0.f);
        for (int j = 0; j < QK_K / 16; j++) {
            const float d = load_f16(b + 108) * (float)get_scale_q3_k(j, b + 96);
            if (d == 0.0f) continue; /* keeps the quants of the fit above */
            for (int l = 0; l < 16; l++) L[16 * j + l] = (uint8_t)(clamp_int(nearest_int(src[16 * j + l] / d), -4, 3) + 4);
        }
        for (int e = 0; e < QK_K; e++) /* the third bit: bit e / 32 of hmask[e % 32] */
            b[e % 32] |= (uint8_t)((L[e] >> 2) << (e / 32));
        pack_2bit(L, b + 32);
    }
}

/* ================================================================ 9. the lookup
 * Indexed by type id, as formats.c's type table. */

static const lean_quantize_row_fn quantizers[] = {
    [LEAN_TYPE_F32] = quantize_f32,   [LEAN_TYPE_F16] = quantize_f16,   [LEAN_TYPE_Q4_0] = quantize_q4_0,
    [LEAN_TYPE_Q4_1] = quantize_q4_1, [LEAN_TYPE_Q5_0] = quantize_q5_0, [LEAN_TYPE_Q5_1] = quantize_q5_1,
    [LEAN_TYPE_Q8_0] = quantize_q8_0, [LEAN_TYPE_Q2_K] = quantize_q2_k, [LEAN_TYPE_Q3_K] = quantize_q3_k,
    [LEAN_TYPE_Q4_K] = quantize_q4_k, [LEAN_TYPE_Q5_K] = quantize_q5_k,
    [LEAN_TYPE_Q6_K] = quantize_q6_k, [LEAN_TYPE_BF16] = quantize_bf16,
};

lean_quantize_row_fn lean_quantizer_of(uint32_t type) {
    return type < sizeof quantizers / sizeof quantizers[0] ? quantizers[type] : NULL;
}
