/* formats_k.c — the K-quant super-block formats Q4_K, Q5_K and Q6_K: layouts,
 * reference dequantization and ggml's reference (non-imatrix) quantizers.
 *
 * A K-quant super-block holds 256 weights (LEAN_QK_K) split into sub-blocks (8 of 32
 * for Q4_K/Q5_K, 16 of 16 for Q6_K), each with its own small integer scale (and, for
 * Q4_K/Q5_K, minimum), which an f16 super-scale turns into floats.
 *
 * Same rules as formats.c (whose header comment says them): ggml's operations in
 * ggml's float32 order, never fused, fields little-endian and read byte by byte.
 * The quantizers here are ggml's quantize_row_q{4,5,6}_K_ref, i.e. what llama.cpp's
 * quantizer writes without an importance matrix: make_qkx2_quants for Q4_K/Q5_K,
 * make_qx_quants (rmse_type 1) for Q6_K. They search several candidate scales per
 * sub-block, so they are far slower than the dequantizers (about 20 passes over
 * each sub-block).
 *
 * Sections:
 *   1. helpers: nearest_int, the 6-bit scale packing (get_scale_min_k4)
 *   2. the scale searches: make_qkx2_quants, make_qx_quants
 *   3. Q4_K, Q5_K (one dequantizer and one quantizer, for 4 or 5 bits)
 *   4. Q6_K
 */
#include "core/formats.h"

#include <math.h>
#include <string.h>

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#define QK_K LEAN_QK_K
#define GROUP_MAX_EPS 1e-15f /* ggml's threshold for "this group is all zero" */

/* ================================================================ 1. helpers */

static float load_f16(const uint8_t *p) { return lean_f16_to_f32((uint16_t)(p[0] | (p[1] << 8))); }

static void store_f16(uint8_t *p, float f) {
    uint16_t h = lean_f32_to_f16(f);
    p[0] = (uint8_t)(h & 0xff);
    p[1] = (uint8_t)(h >> 8);
}

static int clamp_int(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* ggml's nearest_int: adding 1.5 * 2^23 leaves round-to-nearest-even(fval) in the low
 * mantissa bits. Exact for |fval| <= 2^22 - 1; outside that (and for inf/NaN) it
 * returns the same garbage ggml's does, which the callers then clamp. */
static int nearest_int(float fval) {
    float val = fval + 12582912.0f;
    uint32_t bits;
    memcpy(&bits, &val, sizeof bits);
    return (int)(bits & 0x007fffff) - 0x00400000;
}

/* The 12 scale bytes of Q4_K/Q5_K hold 8 six-bit scales sc[j] and 8 six-bit mins m[j]:
 *   BYTES   BITS  CONTENT
 *   0..3    0..5  sc[0..3]
 *   0..3    6..7  sc[4..7] >> 4     (top two bits)
 *   4..7    0..5  m[0..3]
 *   4..7    6..7  m[4..7] >> 4
 *   8..11   0..3  sc[4..7] & 0xf
 *   8..11   4..7  m[4..7] & 0xf
 * (ggml's get_scale_min_k4.) */
static void get_scale_min_k4(int j, const uint8_t *q, uint8_t *sc, uint8_t *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

static void put_scale_min_k4(int j, uint8_t *q, uint8_t sc, uint8_t m) {
    if (j < 4) { /* bytes j and j + 4 are first written here; j >= 4 ORs into them */
        q[j] = sc;
        q[j + 4] = m;
    } else {
        q[j + 4] = (uint8_t)((sc & 0x0f) | ((m & 0x0f) << 4));
        q[j - 4] |= (uint8_t)((sc >> 4) << 6);
        q[j] |= (uint8_t)((m >> 4) << 6);
    }
}

/* ================================================================ 2. scale searches */

/* ggml's make_qkx2_quants with use_mad = false: fits x[i] ~ scale * L[i] - the_min
 * with L[i] in [0, nmax], minimizing sum weights[i] * err^2. It starts from the
 * min/max grid, then tries nstep + 1 grids iscale = (rmin + rdelta * is + nmax) /
 * (max - min), solving the weighted least squares for (scale, min) on each and keeping
 * the best. Returns the scale; *the_min >= 0 is the minimum's magnitude. Laux is
 * scratch for n quants. Note that min moves with each improvement and later grids use
 * the new one, exactly as in ggml. */
static float make_qkx2_quants(int n, int nmax, const float *x, const float *weights, uint8_t *L,
                              float *the_min, uint8_t *Laux, float rmin, float rdelta, int nstep) {
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
        diff = diff * diff;
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
                diff = diff * diff;
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

/* ggml's make_qx_quants with rmse_type = 1 and no importance weights (weights x^2):
 * a symmetric fit x[i] ~ scale * (L[i] - nmax), L[i] in [0, 2 * nmax - 1]. Starts from
 * the grid that maps the largest |x| to -nmax, then tries the 18 grids
 * -(nmax + 0.1 * is) / max, is = -9..9, keeping the one with the largest
 * sumlx^2 / suml2 (least weighted squared error). Returns the scale (0 for a group
 * whose largest |x| is below GROUP_MAX_EPS, with all L = 0). */
static float make_qx_quants(int n, int nmax, const float *x, uint8_t *L) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++) {
        float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < GROUP_MAX_EPS) {
        for (int i = 0; i < n; i++) L[i] = 0;
        return 0.0f;
    }
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
        scales[j] = make_qkx2_quants(32, nmax, xs, weights, L + 32 * j, &mins[j], Laux, rmin, rdelta, nstep);
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

/* ================================================================ 3. Q4_K, Q5_K
 *
 * block_q4_K: 256 weights, 144 bytes.
 *   OFFSET  SIZE  DESCRIPTION
 *        0     2  d: f16 super-scale of the sub-block scales
 *        2     2  dmin: f16 super-scale of the sub-block mins
 *        4    12  scales: 8 six-bit scales sc[j] and 8 six-bit mins m[j] (table above)
 *       16   128  qs: 4-bit quants q
 *
 * block_q5_K: 256 weights, 176 bytes: Q4_K with a fifth bit per quant.
 *   OFFSET  SIZE  DESCRIPTION
 *        0     2  d: f16 super-scale of the sub-block scales
 *        2     2  dmin: f16 super-scale of the sub-block mins
 *        4    12  scales: 8 six-bit scales and 8 six-bit mins (as Q4_K)
 *       16    32  qh: high bits; bit j of qh[l] is the fifth bit of weight 32j + l
 *       48   128  qs: low 4 bits, placed exactly as Q4_K's quants
 *
 * Sub-block j (0..7) is weights 32j .. 32j + 31; their low 4 bits sit in
 * qs[32 * (j / 2) + l], the low nibble for even j, the high nibble for odd j
 * (l = 0..31). Weight 32j + l, q its 4 or 5 bits:
 *   (d * sc[j]) * q - (dmin * m[j]) */

static void dequant_k45(const void *src, float *dst, int64_t n, int bits) {
    const size_t block_bytes = bits == 5 ? LEAN_Q5_K_BYTES : LEAN_Q4_K_BYTES;
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, b += block_bytes) {
        const float d = load_f16(b);
        const float dmin = load_f16(b + 2);
        const uint8_t *qh = b + 16; /* Q5_K only */
        const uint8_t *qs = bits == 5 ? b + 48 : b + 16;
        for (int j = 0; j < QK_K / 32; j += 2, qs += 32) {
            uint8_t sc, m;
            get_scale_min_k4(j, b + 4, &sc, &m);
            const float d1 = d * (float)sc, m1 = dmin * (float)m;
            get_scale_min_k4(j + 1, b + 4, &sc, &m);
            const float d2 = d * (float)sc, m2 = dmin * (float)m;
            const uint8_t u1 = (uint8_t)(1u << j), u2 = (uint8_t)(2u << j);
            for (int l = 0; l < 32; l++) {
                int h = bits == 5 && (qh[l] & u1) ? 16 : 0;
                *dst++ = d1 * (float)((qs[l] & 0x0f) + h) - m1;
            }
            for (int l = 0; l < 32; l++) {
                int h = bits == 5 && (qh[l] & u2) ? 16 : 0;
                *dst++ = d2 * (float)((qs[l] >> 4) + h) - m2;
            }
        }
    }
}

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

void lean_dequant_q4_k(const void *src, float *dst, int64_t n) { dequant_k45(src, dst, n, 4); }
void lean_dequant_q5_k(const void *src, float *dst, int64_t n) { dequant_k45(src, dst, n, 5); }
void lean_quantize_q4_k(const float *src, void *dst, int64_t n) { quantize_k45(src, dst, n, 4); }
void lean_quantize_q5_k(const float *src, void *dst, int64_t n) { quantize_k45(src, dst, n, 5); }

/* ================================================================ 4. Q6_K
 *
 * block_q6_K: 256 weights, 210 bytes.
 *   OFFSET  SIZE  DESCRIPTION
 *        0   128  ql: low 4 bits of the quants
 *      128    64  qh: high 2 bits of the quants
 *      192    16  scales: int8 scale of each 16-weight sub-block
 *      208     2  d: f16 super-scale
 *
 * Weight e (0..255): h = e / 128, k = (e % 128) / 32, l = e % 32;
 *   low  = (ql[64h + 32 * (k & 1) + l] >> (4 * (k >> 1))) & 0xf
 *   high = (qh[32h + l] >> (2k)) & 3
 *   weight = (d * scales[e / 16]) * ((low | high << 4) - 32) */

void lean_dequant_q6_k(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, b += LEAN_Q6_K_BYTES) {
        const float d = load_f16(b + 208);
        const uint8_t *ql = b;
        const uint8_t *qh = b + 128;
        const int8_t *sc = (const int8_t *)(b + 192);
        for (int h = 0; h < 2; h++, ql += 64, qh += 32, sc += 8, dst += 128) {
            for (int l = 0; l < 32; l++) {
                int is = l / 16;
                int q1 = ((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32;
                int q2 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32;
                int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                dst[l] = d * (float)sc[is + 0] * (float)q1;
                dst[l + 32] = d * (float)sc[is + 2] * (float)q2;
                dst[l + 64] = d * (float)sc[is + 4] * (float)q3;
                dst[l + 96] = d * (float)sc[is + 6] * (float)q4;
            }
        }
    }
}

void lean_quantize_q6_k(const float *src, void *dst, int64_t n) {
    uint8_t *b = dst;
    uint8_t L[QK_K];
    float scales[QK_K / 16];
    for (int64_t i = 0; i < n / QK_K; i++, b += LEAN_Q6_K_BYTES, src += QK_K) {
        float max_scale = 0, max_abs_scale = 0;
        for (int ib = 0; ib < QK_K / 16; ib++) {
            scales[ib] = make_qx_quants(16, 32, src + 16 * ib, L + 16 * ib);
            if (fabsf(scales[ib]) > max_abs_scale) {
                max_abs_scale = fabsf(scales[ib]);
                max_scale = scales[ib];
            }
        }
        if (max_abs_scale < GROUP_MAX_EPS) { /* an all-zero block (d = +0) */
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
