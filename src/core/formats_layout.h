/* formats_layout.h — the block layouts' shared pieces, for the code on both sides of them:
 * the reference dequantizers (core/formats.c, in the runtime) and ggml's reference weight
 * quantizers (dev/quantize.c, developer tools only). Block sizes, little-endian field access,
 * the packing of quants and of K-quant scales, both directions, and ggml's nearest_int (which
 * the activation quantizer, cpu/quant_act.c, rounds with too).
 *
 * Everything is static inline, so a file compiles only what it uses and the runtime library
 * carries no weight quantizer. The OFFSET / SIZE tables of every block are formats.c's.
 * Multi-byte fields are read and written byte by byte, so blocks need no alignment.
 */
#ifndef LEAN_FORMATS_LAYOUT_H
#define LEAN_FORMATS_LAYOUT_H

#include "core/formats.h"

#include <string.h>

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF /* as in formats.c: never fuse a*b + c */
#endif

/* Block sizes (formats.h has the K-quants': LEAN_QK_K, LEAN_Q4_K_BYTES ...). */
#define QK8_0 32
#define Q8_0_BYTES 34
#define QK_LEGACY 32 /* weights per block of Q4_0, Q4_1, Q5_0, Q5_1 */
#define Q4_0_BYTES 18
#define Q4_1_BYTES 20
#define Q5_0_BYTES 22
#define Q5_1_BYTES 24

/* ---- little-endian field access ---- */

static inline float load_f16(const uint8_t *p) { return lean_f16_to_f32((uint16_t)(p[0] | (p[1] << 8))); }

static inline void store_f16(uint8_t *p, float f) {
    uint16_t h = lean_f32_to_f16(f);
    p[0] = (uint8_t)(h & 0xff);
    p[1] = (uint8_t)(h >> 8);
}

static inline uint32_t load_u32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static inline void store_u32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

/* ---- the quants of Q4_0, Q4_1, Q5_0, Q5_1 (formats.c, section 4) ----
 * p: the block's fields after its scale(s): qh (5 bits only), then qs. */

/* Quant j (0..31). */
static inline int load_quant(const uint8_t *p, int bits, int j) {
    const uint8_t *qs = bits == 5 ? p + 4 : p;
    int q = j < QK_LEGACY / 2 ? qs[j] & 0x0f : qs[j - QK_LEGACY / 2] >> 4;
    if (bits == 5) q |= (int)((load_u32(p) >> j) & 1) << 4;
    return q;
}

/* The 32 quants q[] (each < 2^bits). */
static inline void store_quants(uint8_t *p, int bits, const int *q) {
    uint8_t *qs = bits == 5 ? p + 4 : p;
    uint32_t qh = 0;
    for (int j = 0; j < QK_LEGACY / 2; j++) {
        qs[j] = (uint8_t)((q[j] & 0x0f) | ((q[j + QK_LEGACY / 2] & 0x0f) << 4));
        qh |= (uint32_t)(q[j] >> 4) << j;
        qh |= (uint32_t)(q[j + QK_LEGACY / 2] >> 4) << (j + QK_LEGACY / 2);
    }
    if (bits == 5) store_u32(p, qh);
}

/* ---- the scales of Q4_K and Q5_K ----
 * The 12 scale bytes hold 8 six-bit scales sc[j] and 8 six-bit mins m[j]:
 *   BYTES   BITS  CONTENT
 *   0..3    0..5  sc[0..3]
 *   0..3    6..7  sc[4..7] >> 4     (top two bits)
 *   4..7    0..5  m[0..3]
 *   4..7    6..7  m[4..7] >> 4
 *   8..11   0..3  sc[4..7] & 0xf
 *   8..11   4..7  m[4..7] & 0xf
 * (ggml's get_scale_min_k4.) */
static inline void get_scale_min_k4(int j, const uint8_t *q, uint8_t *sc, uint8_t *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

static inline void put_scale_min_k4(int j, uint8_t *q, uint8_t sc, uint8_t m) {
    if (j < 4) { /* bytes j and j + 4 are first written here; j >= 4 ORs into them */
        q[j] = sc;
        q[j + 4] = m;
    } else {
        q[j + 4] = (uint8_t)((sc & 0x0f) | ((m & 0x0f) << 4));
        q[j - 4] |= (uint8_t)((sc >> 4) << 6);
        q[j] |= (uint8_t)((m >> 4) << 6);
    }
}

/* ---- the scales of Q3_K ----
 * The 12 scale bytes hold 16 six-bit scales s[k] (stored with +32: the scale is s[k] - 32):
 *   BYTES   BITS  CONTENT
 *   0..7    0..3  s[0..7] & 0xf
 *   0..7    4..7  s[8..15] & 0xf
 *   8..11   2i..  s[k] >> 4 for k = 4i + (byte - 8), i = 0..3 (bits 2i, 2i + 1)
 * (ggml's kmask unpacking in dequantize_row_q3_K.) */
static inline int get_scale_q3_k(int k, const uint8_t *q) {
    const int lo = (q[k % 8] >> (4 * (k / 8))) & 0x0f, hi = (q[8 + k % 4] >> (2 * (k / 4))) & 3;
    return (lo | (hi << 4)) - 32;
}

static inline void put_scale_q3_k(int k, uint8_t *q, int s) { /* s in [-32, 31]; q zeroed first */
    const int u = s + 32;
    q[k % 8] |= (uint8_t)((u & 0x0f) << (4 * (k / 8)));
    q[8 + k % 4] |= (uint8_t)((u >> 4) << (2 * (k / 4)));
}

/* ---- rounding ---- */

/* ggml's nearest_int: adding 1.5 * 2^23 leaves round-to-nearest-even(fval) in the low
 * mantissa bits. Exact for |fval| <= 2^22 - 1; outside that (and for inf/NaN) it
 * returns the same garbage ggml's does, which the callers then clamp. */
static inline int nearest_int(float fval) {
    float val = fval + 12582912.0f;
    uint32_t bits;
    memcpy(&bits, &val, sizeof bits);
    return (int)(bits & 0x007fffff) - 0x00400000;
}

#endif
