/* formats.c — the tensor type table, f16/bf16 scalar conversions, and every block format's
 * layout and reference dequantizer: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, and the
 * K-quant super-blocks Q2_K, Q3_K, Q4_K, Q5_K, Q6_K.
 *
 * Every layout and every operation here is ggml's, bit for bit: the dequantizers are
 * ggml's dequantize_row_*, evaluated in the same float32 operation order. They are the
 * reference every SIMD and WGSL kernel is tested against, so they stay plain: one
 * element at a time, no tricks. tests/test_formats.c holds them to vectors made by an
 * independent numpy implementation (scripts/quants.py).
 *
 * What it does not do: quantize weights (ggml's reference quantizers are developer tools,
 * dev/quantize.c, sharing these layouts through core/formats_layout.h), choose types, or SIMD.
 *
 * Float rules that exactness depends on (the quantizers keep them too): every operation is
 * float32 (FLT_EVAL_METHOD 0 on x86-64, arm64, wasm); a*b + c is never fused into an fma
 * (gcc does not contract in ISO C mode; clang is told so below). Multi-byte fields are
 * little-endian; they are read and written byte by byte, so blocks need no alignment.
 *
 * Sections:
 *   1. f16 / bf16 scalars
 *   2. F32, F16, BF16 rows
 *   3. Q8_0
 *   4. Q4_0, Q4_1, Q5_0, Q5_1 (one dequantizer per kind, for 4 or 5 bits)
 *   5. Q4_K, Q5_K (one dequantizer, for 4 or 5 bits)
 *   6. Q6_K
 *   7. Q2_K, Q3_K
 *   8. the type table, lean_type_bytes, names
 */
#include "core/formats.h"
#include "core/formats_layout.h"

#include <ctype.h>
#include <string.h>

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

/* ================================================================ 1. f16 / bf16 scalars
 *
 * IEEE binary16: sign 1 | exponent 5 (bias 15) | mantissa 10.
 * bfloat16:      sign 1 | exponent 8 (bias 127) | mantissa 7  (the top half of an f32).
 *
 * f32 -> f16 rounds to nearest, ties to even, with subnormal results and overflow to
 * inf (|x| >= 65520). A NaN becomes sign | 0x7e00 (ggml drops the payload).
 * f16 -> f32 is exact; a NaN keeps its payload and gets the quiet bit (what ggml's
 * arithmetic conversion produces).
 * f32 -> bf16 rounds to nearest even; a NaN keeps its top bits and is made quiet
 * (| 0x0040). bf16 -> f32 appends 16 zero bits, NaN or not. */

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

float lean_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ff;
    if (exp == 0x1f) { /* inf, or NaN made quiet */
        return f32_from_bits(sign | 0x7f800000u | (mant << 13) | (mant ? 0x00400000u : 0));
    }
    if (exp == 0) { /* zero or subnormal: mant * 2^-24, exact in f32 */
        float v = (float)mant * 0x1p-24f;
        return sign ? -v : v;
    }
    return f32_from_bits(sign | ((exp + 127 - 15) << 23) | (mant << 13));
}

uint16_t lean_f32_to_f16(float f) {
    uint32_t x = f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    uint32_t ax = x & 0x7fffffffu;

    if (ax > 0x7f800000u) return sign | 0x7e00; /* NaN */
    if (ax >= 0x477ff000u) return sign | 0x7c00; /* >= 65520 (halfway past 65504): inf */
    if (ax >= 0x38800000u) {                     /* >= 2^-14: a normal half */
        /* rebias the exponent (127 -> 15), then round the 13 dropped mantissa bits to
         * nearest even; a carry out of the mantissa correctly bumps the exponent */
        uint32_t r = ax - ((127u - 15u) << 23);
        r += 0x0fffu + ((r >> 13) & 1);
        return sign | (uint16_t)(r >> 13);
    }
    /* a subnormal half (or zero): round |f| / 2^-24 to nearest even */
    uint32_t exp = ax >> 23;
    if (exp < 102) return sign; /* |f| < 2^-25 (f32 subnormals included): rounds to 0 */
    uint32_t mant = (ax & 0x7fffffu) | 0x800000u; /* |f| = mant * 2^(exp - 150) */
    uint32_t shift = 126 - exp;                   /* 14 .. 24 */
    uint32_t q = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (q & 1))) q++; /* q may reach 0x400: the smallest normal */
    return sign | (uint16_t)q;
}

float lean_bf16_to_f32(uint16_t h) { return f32_from_bits((uint32_t)h << 16); }

uint16_t lean_f32_to_bf16(float f) {
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x0040); /* quiet NaN */
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1)) >> 16); /* round to nearest even */
}

/* ================================================================ 2. F32, F16, BF16 rows
 * One element per "block": 4, 2 and 2 bytes, little-endian. */

static void dequant_f32(const void *src, float *dst, int64_t n) {
    memcpy(dst, src, (size_t)n * sizeof(float));
}

static void dequant_f16(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t i = 0; i < n; i++) dst[i] = load_f16(p + 2 * i);
}

static void dequant_bf16(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t i = 0; i < n; i++) dst[i] = lean_bf16_to_f32((uint16_t)(p[2 * i] | (p[2 * i + 1] << 8)));
}

/* ================================================================ 3. Q8_0
 *
 * block_q8_0: 32 weights, 34 bytes.
 *   OFFSET  SIZE  DESCRIPTION
 *        0     2  d: f16 scale
 *        2    32  qs[32]: int8 quants; weight j = qs[j] * d
 */

static void dequant_q8_0(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / QK8_0; i++, b += Q8_0_BYTES, dst += QK8_0) {
        const float d = load_f16(b);
        const int8_t *qs = (const int8_t *)(b + 2);
        for (int j = 0; j < QK8_0; j++) dst[j] = (float)qs[j] * d;
    }
}

/* ================================================================ 4. Q4_0, Q4_1, Q5_0, Q5_1
 *
 * Four formats from two choices: 4 or 5 bits per quant, and a symmetric scale (_0) or a
 * scale and a minimum (_1). Element j of a 32-weight block keeps its low 4 bits in byte
 * qs[j % 16] (the low nibble for j < 16, the high nibble for j >= 16); with 5 bits, bit j
 * of the little-endian u32 qh is its fifth bit, so element j's quant is
 *   (j < 16 ? qs[j] & 0x0f : qs[j - 16] >> 4) | (((qh >> j) & 1) << 4).
 *
 * block_q4_0: 32 weights, 18 bytes.        block_q5_0: 32 weights, 22 bytes.
 *   OFFSET  SIZE  DESCRIPTION                OFFSET  SIZE  DESCRIPTION
 *        0     2  d: f16 scale                    0     2  d: f16 scale
 *        2    16  qs[16]: low 4 bits              2     4  qh: u32, fifth bits
 *                                                 6    16  qs[16]: low 4 bits
 * weight = (q - 8) * d                     weight = (q - 16) * d
 *
 * block_q4_1: 32 weights, 20 bytes.        block_q5_1: 32 weights, 24 bytes.
 *   OFFSET  SIZE  DESCRIPTION                OFFSET  SIZE  DESCRIPTION
 *        0     2  d: f16 scale                    0     2  d: f16 scale
 *        2     2  m: f16 minimum                  2     2  m: f16 minimum
 *        4    16  qs[16]: low 4 bits              4     4  qh: u32, fifth bits
 *                                                 8    16  qs[16]: low 4 bits
 * weight = q * d + m                       weight = q * d + m
 * (load_quant and store_quants, formats_layout.h, read and write the quants.) */

/* Q4_0 / Q5_0: d, then the quants; weight = (q - 2^(bits-1)) * d. */
static void dequant_sym(const void *src, float *dst, int64_t n, int bits) {
    const int zero = 1 << (bits - 1);
    const size_t block_bytes = bits == 5 ? Q5_0_BYTES : Q4_0_BYTES;
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / QK_LEGACY; i++, b += block_bytes, dst += QK_LEGACY) {
        const float d = load_f16(b);
        for (int j = 0; j < QK_LEGACY; j++) dst[j] = (float)(load_quant(b + 2, bits, j) - zero) * d;
    }
}

/* Q4_1 / Q5_1: d, m, then the quants; weight = q * d + m. */
static void dequant_min(const void *src, float *dst, int64_t n, int bits) {
    const size_t block_bytes = bits == 5 ? Q5_1_BYTES : Q4_1_BYTES;
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / QK_LEGACY; i++, b += block_bytes, dst += QK_LEGACY) {
        const float d = load_f16(b);
        const float m = load_f16(b + 2);
        for (int j = 0; j < QK_LEGACY; j++) dst[j] = (float)load_quant(b + 4, bits, j) * d + m;
    }
}

static void dequant_q4_0(const void *src, float *dst, int64_t n) { dequant_sym(src, dst, n, 4); }
static void dequant_q5_0(const void *src, float *dst, int64_t n) { dequant_sym(src, dst, n, 5); }
static void dequant_q4_1(const void *src, float *dst, int64_t n) { dequant_min(src, dst, n, 4); }
static void dequant_q5_1(const void *src, float *dst, int64_t n) { dequant_min(src, dst, n, 5); }

/* ================================================================ 5. Q4_K, Q5_K
 *
 * A K-quant super-block holds 256 weights (LEAN_QK_K) split into sub-blocks (8 of 32
 * for Q4_K/Q5_K, 16 of 16 for Q6_K), each with its own small integer scale (and, for
 * Q4_K/Q5_K, minimum), which an f16 super-scale turns into floats.
 *
 * block_q4_K: 256 weights, 144 bytes.
 *   OFFSET  SIZE  DESCRIPTION
 *        0     2  d: f16 super-scale of the sub-block scales
 *        2     2  dmin: f16 super-scale of the sub-block mins
 *        4    12  scales: 8 six-bit scales sc[j] and 8 six-bit mins m[j]
 *                 (get_scale_min_k4, formats_layout.h, has their table)
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
    for (int64_t i = 0; i < n / LEAN_QK_K; i++, b += block_bytes) {
        const float d = load_f16(b);
        const float dmin = load_f16(b + 2);
        const uint8_t *qh = b + 16; /* Q5_K only */
        const uint8_t *qs = bits == 5 ? b + 48 : b + 16;
        for (int j = 0; j < LEAN_QK_K / 32; j += 2, qs += 32) {
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

static void dequant_q4_k(const void *src, float *dst, int64_t n) { dequant_k45(src, dst, n, 4); }
static void dequant_q5_k(const void *src, float *dst, int64_t n) { dequant_k45(src, dst, n, 5); }

/* ================================================================ 6. Q6_K
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

static void dequant_q6_k(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / LEAN_QK_K; i++, b += LEAN_Q6_K_BYTES) {
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

/* ================================================================ 7. Q2_K, Q3_K
 *
 * block_q2_K: 256 weights, 84 bytes.
 *   OFFSET  SIZE  DESCRIPTION
 *        0    16  scales: sub-block k's 4-bit scale sc[k] (low nibble) and min m[k] (high)
 *       16    64  qs: 2-bit quants q
 *       80     2  d: f16 super-scale of the scales
 *       82     2  dmin: f16 super-scale of the mins
 *
 * block_q3_K: 256 weights, 110 bytes.
 *   OFFSET  SIZE  DESCRIPTION
 *        0    32  hmask: bit 4h + k of hmask[l] is the third bit of weight 128h + 32k + l
 *       32    64  qs: low 2 bits of the quants
 *       96    12  scales: 16 six-bit scales s[k] (get_scale_q3_k, formats_layout.h)
 *      108     2  d: f16 super-scale
 *
 * 16 sub-blocks of 16: weight e (0..255), h = e / 128, k = (e % 128) / 32, l = e % 32,
 * s = e / 16 its sub-block; q = (qs[32h + l] >> 2k) & 3 (qs at the offset above):
 *   Q2_K  (d * sc[s]) * q - (dmin * m[s])
 *   Q3_K  (d * s[s]) * (q - 4 + 4 * third bit)   (ggml subtracts 4 where the bit is clear) */

static void dequant_q2_k(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / LEAN_QK_K; i++, b += LEAN_Q2_K_BYTES) {
        const float d = load_f16(b + 80), dmin = load_f16(b + 82);
        for (int e = 0; e < LEAN_QK_K; e++) {
            const int s = e / 16, q = (b[16 + 32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
            const float dl = d * (float)(b[s] & 0x0f), ml = dmin * (float)(b[s] >> 4);
            *dst++ = dl * (float)q - ml;
        }
    }
}

static void dequant_q3_k(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / LEAN_QK_K; i++, b += LEAN_Q3_K_BYTES) {
        const float d = load_f16(b + 108);
        for (int e = 0; e < LEAN_QK_K; e++) {
            const int h = e / 128, k = (e % 128) / 32, l = e % 32;
            const int q = ((b[32 + 32 * h + l] >> (2 * k)) & 3) - ((b[l] >> (4 * h + k)) & 1 ? 0 : 4);
            const float dl = d * (float)get_scale_q3_k(e / 16, b + 96);
            *dst++ = dl * (float)q;
        }
    }
}

/* ================================================================ 8. the type table
 * Indexed by the GGUF/ggml type id; an entry without a name is a type lean does not
 * support. Ids only ever get appended (see lean_type in lean.h). */

static const lean_type_traits type_table[] = {
    [LEAN_TYPE_F32] = {"f32", 1, 4, dequant_f32},
    [LEAN_TYPE_F16] = {"f16", 1, 2, dequant_f16},
    [LEAN_TYPE_Q4_0] = {"q4_0", QK_LEGACY, Q4_0_BYTES, dequant_q4_0},
    [LEAN_TYPE_Q4_1] = {"q4_1", QK_LEGACY, Q4_1_BYTES, dequant_q4_1},
    [LEAN_TYPE_Q5_0] = {"q5_0", QK_LEGACY, Q5_0_BYTES, dequant_q5_0},
    [LEAN_TYPE_Q5_1] = {"q5_1", QK_LEGACY, Q5_1_BYTES, dequant_q5_1},
    [LEAN_TYPE_Q8_0] = {"q8_0", QK8_0, Q8_0_BYTES, dequant_q8_0},
    [LEAN_TYPE_Q2_K] = {"q2_k", LEAN_QK_K, LEAN_Q2_K_BYTES, dequant_q2_k},
    [LEAN_TYPE_Q3_K] = {"q3_k", LEAN_QK_K, LEAN_Q3_K_BYTES, dequant_q3_k},
    [LEAN_TYPE_Q4_K] = {"q4_k", LEAN_QK_K, LEAN_Q4_K_BYTES, dequant_q4_k},
    [LEAN_TYPE_Q5_K] = {"q5_k", LEAN_QK_K, LEAN_Q5_K_BYTES, dequant_q5_k},
    [LEAN_TYPE_Q6_K] = {"q6_k", LEAN_QK_K, LEAN_Q6_K_BYTES, dequant_q6_k},
    [LEAN_TYPE_BF16] = {"bf16", 1, 2, dequant_bf16},
};

#define N_TYPE_IDS (sizeof type_table / sizeof type_table[0])

const lean_type_traits *lean_type_traits_get(uint32_t type) {
    if (type >= N_TYPE_IDS || !type_table[type].name) return NULL;
    return &type_table[type];
}

bool lean_type_bytes(uint32_t type, uint64_t n_elems, uint64_t *out_bytes) {
    const lean_type_traits *t = lean_type_traits_get(type);
    if (!t || n_elems % t->block_elems != 0) return false;
    return lean_mul_u64(n_elems / t->block_elems, t->block_bytes, out_bytes);
}

/* Every ggml type id's name as ggml.h spells it (ggml_type, ids 0 to 42), for messages about
 * files lean cannot run ("tensor 'x' has type IQ2_XS"). ggml retired 4, 5 and 31 to 33, 36 to 38
 * (Q4_2, Q4_3, the repacked Q4_0 and IQ4_NL layouts); they keep their old names here. */
static const char *const ggml_type_names[] = {
    "F32", "F16", "Q4_0", "Q4_1", "Q4_2", "Q4_3", "Q5_0", "Q5_1", "Q8_0", "Q8_1",
    "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K", "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S",
    "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS", "I8", "I16", "I32", "I64", "F64", "IQ1_M",
    "BF16", "Q4_0_4_4", "Q4_0_4_8", "Q4_0_8_8", "TQ1_0", "TQ2_0", "IQ4_NL_4_4", "IQ4_NL_4_8", "IQ4_NL_8_8", "MXFP4",
    "NVFP4", "Q1_0", "Q2_0",
};

const char *lean_ggml_type_name(uint32_t type) {
    return type < sizeof ggml_type_names / sizeof ggml_type_names[0] ? ggml_type_names[type] : NULL;
}

const char *lean_type_name(int type) {
    if (type < 0) return NULL;
    const lean_type_traits *t = lean_type_traits_get((uint32_t)type);
    return t ? t->name : NULL;
}

int lean_type_from_name(const char *name) {
    if (!name) return -1;
    for (uint32_t id = 0; id < N_TYPE_IDS; id++) {
        const char *tn = type_table[id].name; /* lower case */
        if (!tn) continue;
        size_t k = 0;
        while (tn[k] && tolower((unsigned char)name[k]) == tn[k]) k++;
        if (!tn[k] && !name[k]) return (int)id;
    }
    return -1;
}
