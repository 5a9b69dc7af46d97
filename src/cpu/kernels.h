/* kernels.h — the CPU kernel table: matrix x activations in every weight format, the
 * attention primitives, SwiGLU and the activation quantizer, behind one struct of function
 * pointers per instruction set.
 *
 * One ISA per file (STYLE habit 10):
 *   kernels_generic.c  portable C, the twin every other table is tested against (and what
 *                      wasm32 and any CPU without a better table runs)
 *   x86_avx2.c         AVX2 + FMA + F16C (x86-64, chosen at run time with cpuid)
 *   x86_avx512.c       AVX-512 F/BW/VL + VNNI (x86-64, chosen at run time with cpuid)
 *   arm_neon.c         NEON, with sdot where __ARM_FEATURE_DOTPROD (aarch64, chosen at compile
 *                      time: every aarch64 CPU has NEON; -march=armv8.2-a+dotprod adds sdot)
 *   wasm_simd128.c     wasm simd128 (wasm32, chosen at compile time: the wasm build passes
 *                      -msimd128, as wasm has no run-time feature test)
 *   wasm_relaxed.c     wasm relaxed SIMD's integer dot product for the quantized formats but
 *                      Q8_0, Q3_K (the relaxed build, -mrelaxed-simd; its other entries are simd128's)
 * The 128-bit tables compute every output in the generic table's order of float operations
 * (the integer sums, exact, in any order), so they give its bits (same_as_generic, tested).
 * A file implements the signatures below for the formats it has; a NULL entry is filled from
 * the next table the CPU runs when the table is chosen (lean_kernels_select), so a chosen
 * table is always complete. tests/test_kernels.c holds every table to the reference dequantizers
 * (formats.c) on random blocks of every format and ragged shapes.
 *
 * ---- activations: quantized once per op, in one of three formats ----
 * A weight matrix W (rows, cols) is never widened to float. Its rows are dotted with the
 * activations x (n_tok, cols) stored in the format its type asks for (lean_act_for):
 *   F32 weights, F16, BF16   LEAN_ACT_F32   the floats themselves
 *   Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 LEAN_ACT_Q8_32 lean_q8_32 blocks (ggml's Q8_0/Q8_1 role)
 *   Q2_K Q3_K Q4_K Q5_K Q6_K LEAN_ACT_Q8_K  lean_q8_k blocks  (ggml's Q8_K role)
 * so every dot product of a quantized format is an integer dot product of its quants with
 * 8-bit activations, scaled once per block. quant_act.c defines the two quantizers, once,
 * for every table; a table may compute them faster, but only to the same bytes (tested), so
 * the activations are the same on every ISA and thread count.
 *
 * block lean_q8_32: 32 activations, 40 bytes.
 *   OFFSET  SIZE  DESCRIPTION
 *        0     4  d: f32 scale = max |x| / 127 (0 for an all-zero block)
 *        4     4  s: int32, the sum of the 32 qs (for the formats' offsets and minimums)
 *        8    32  qs: int8 in [-127, 127], qs[j] = round_half_even(x[j] / d); x[j] ~ qs[j] * d
 *
 * block lean_q8_k: 256 activations, 292 bytes.
 *   OFFSET  SIZE  DESCRIPTION
 *        0     4  d: f32 scale = max |x| / 127
 *        4   256  qs: int8 in [-127, 127], as above
 *      260    32  bsums: int16 sums of qs[16i .. 16i + 15], i = 0..15
 *
 * Error: |x[j] - qs[j] * d| <= d / 2 (plus one rounding of x * (1/d)), so a dot product
 * with weights w moves by at most sum over blocks of d_b / 2 * sum_{j in b} |w_j|; the
 * kernel tests derive their tolerances from this bound.
 *
 * ---- exact: F32 activations against the weights' own blocks (lean_ctx_params.exact) ----
 * matmul_exact[type] computes the same product with the activations left as floats, for every
 * type: each weight is the reference dequantizer's float (formats.c), computed from its block
 * in registers (never a widened copy of the matrix), times the float activation, summed in
 * float. So it carries only float32 rounding, as the reference backend (forward_ref.c) and the
 * GPU's F32 path do, and no activation-quantization error. For the float formats it is the
 * matmul above, which already takes F32 activations. The generic table sums in eight
 * interleaved partial sums (element i into lane i % 8, as its F32 dot), and so do NEON and
 * simd128, giving its bits (same_as_generic); the x86 tables in their vectors' lanes with
 * FMA, each in an order of its own fixed by the kernel alone.
 *
 * ---- exactness contract of every table ----
 * Each output y[t][r] is computed by one call in an order fixed by the kernel alone: it does
 * not depend on r0/r1, on n_tok or on which other rows and tokens share the call. So a
 * row range split across threads, a prefill split into batches and a decode of one token
 * all give the same bits (tests/test_kernels.c checks it for every format). Likewise every
 * other entry computes each output element from its own inputs in a fixed order. Tables
 * differ from one another (other orders, FMA, polynomial exp): the same table must be used
 * for a whole sequence, which lean_backend_cpu does (chosen once, at create).
 */
#ifndef LEAN_KERNELS_H
#define LEAN_KERNELS_H

#include "core/formats.h"
#include "core/formats_layout.h" /* get_scale_q3_k */

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* ---- activation formats (quant_act.c) ---- */

typedef enum lean_act_type {
    LEAN_ACT_F32 = 0,   /* float rows */
    LEAN_ACT_Q8_32 = 1, /* lean_q8_32 blocks */
    LEAN_ACT_Q8_K = 2,  /* lean_q8_k blocks */
} lean_act_type;
#define LEAN_N_ACT_TYPES 3

typedef struct lean_q8_32 {
    float d;
    int32_t s;
    int8_t qs[32];
} lean_q8_32;

typedef struct lean_q8_k {
    float d;
    int8_t qs[LEAN_QK_K];
    int16_t bsums[LEAN_QK_K / 16];
} lean_q8_k;

/* The activation format weights of type `type` are dotted with; -1 for a type with no
 * kernel. */
int lean_act_for(uint32_t type);

/* Bytes of one activation row of n elements (n a multiple of the format's block). */
size_t lean_act_row_bytes(lean_act_type act, int64_t n);

/* dst = x (n) in format act (for LEAN_ACT_F32 a copy). n: a multiple of 32 (Q8_32) or
 * 256 (Q8_K). The same bits on every ISA. */
void lean_quantize_act(lean_act_type act, const float *x, void *dst, int64_t n);

/* The 8 six-bit scales and mins of a Q4_K / Q5_K super-block from its 12 packed bytes q
 * (core/formats_layout.h's get_scale_min_k4, ggml's layout): sub-block j is d sc[j] q - dmin m[j].
 * Shared by every table's unpacking. */
static inline void lean_k4_scales(const uint8_t *q, uint8_t sc[8], uint8_t m[8]) {
    for (int j = 0; j < 4; j++) {
        sc[j] = q[j] & 63;
        m[j] = q[j + 4] & 63;
    }
    for (int j = 4; j < 8; j++) {
        sc[j] = (uint8_t)((q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4));
        m[j] = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* lean_k4_scales' sc[8] and m[8] as the bytes of two u64 (byte j = sc[j], m[j]; ggml's masks),
 * in registers: bytes stored one at a time and read back as a vector would stall
 * store-to-load forwarding. Little-endian (every target lean builds for). */
static inline void lean_k4_scales64(const uint8_t *q, uint64_t *sc, uint64_t *m) {
    uint32_t u[3];
    memcpy(u, q, sizeof u);
    const uint32_t lo6 = 0x3f3f3f3f, lo4 = 0x0f0f0f0f, lo2 = 0x03030303;
    *sc = (u[0] & lo6) | (uint64_t)((u[2] & lo4) | (((u[0] >> 6) & lo2) << 4)) << 32;
    *m = (u[1] & lo6) | (uint64_t)(((u[2] >> 4) & lo4) | (((u[1] >> 6) & lo2) << 4)) << 32;
}

/* The exact kernels' formats (kernels.h "exact"), as the tiles' f argument of every ISA file,
 * in the order of their legacy and K block sizes (X_Q4_K + k is their K_Q4 + k). */
enum { X_Q4_0, X_Q4_1, X_Q5_0, X_Q5_1, X_Q8_0, X_Q4_K, X_Q5_K, X_Q6_K, X_Q2_K, X_Q3_K };

/* A K super-block's scales as floats, made as the reference dequantizer (formats.c) makes
 * them: Q4_K / Q5_K d sc[j] and dmin m[j] (sub-block j of 32); Q6_K, Q3_K d sc[s] (of 16);
 * Q2_K d sc[s] and dmin m[s] (of 16). */
typedef struct lean_kscale {
    float d[16], m[16];
} lean_kscale;

static inline void lean_kscale_of(int f, const uint8_t *b, lean_kscale *ks) {
    if (f == X_Q2_K) {
        const float d = lean_f16_to_f32((uint16_t)(b[80] | (b[81] << 8)));
        const float dmin = lean_f16_to_f32((uint16_t)(b[82] | (b[83] << 8)));
        for (int s = 0; s < 16; s++) ks->d[s] = d * (float)(b[s] & 0x0f), ks->m[s] = dmin * (float)(b[s] >> 4);
        return;
    }
    if (f == X_Q3_K) {
        const float d = lean_f16_to_f32((uint16_t)(b[108] | (b[109] << 8)));
        for (int s = 0; s < 16; s++) ks->d[s] = d * (float)get_scale_q3_k(s, b + 96);
        return;
    }
    if (f == X_Q6_K) {
        const float d = lean_f16_to_f32((uint16_t)(b[208] | (b[209] << 8)));
        for (int s = 0; s < 16; s++) ks->d[s] = d * (float)(int8_t)b[192 + s];
        return;
    }
    const float d = lean_f16_to_f32((uint16_t)(b[0] | (b[1] << 8)));
    const float dmin = lean_f16_to_f32((uint16_t)(b[2] | (b[3] << 8)));
    uint8_t sc[8], m[8];
    lean_k4_scales(b + 4, sc, m);
    for (int j = 0; j < 8; j++) ks->d[j] = d * (float)sc[j], ks->m[j] = dmin * (float)m[j];
}

/* ---- the table ---- */

/* The weight types lean_type can name, as table indices. */
#define LEAN_N_TYPE_IDS 32

/* y[t * y_row_elems + r] = W[r, :] . x_t   for r in [r0, r1), t in [0, n_tok)
 *   cols         elements per row (a multiple of the type's block)
 *   w            the whole matrix: row r starts at w + r * w_row_bytes (no alignment)
 *   x            n_tok activation rows in lean_act_for(type)'s format; token t starts at
 *                (const char *)x + t * x_row_bytes
 *   y            output floats; only y[t][r0..r1) are written */
typedef void (*lean_matmul_fn)(int64_t cols, const void *w, size_t w_row_bytes, int64_t r0, int64_t r1,
                               const void *x, size_t x_row_bytes, int32_t n_tok, float *y,
                               int64_t y_row_elems);
/* The same parameters, for the files that define a lean_matmul_fn per format. */
#define LEAN_MATMUL_ARGS                                                                             \
    int64_t cols, const void *w, size_t w_row_bytes, int64_t r0, int64_t r1, const void *x,        \
        size_t x_row_bytes, int32_t n_tok, float *y, int64_t y_row_elems

/* Attention scores of one query against n keys: s[j] = q . k_j, k_j = k + j * k_row_elems,
 * each over hd floats. */
typedef void (*lean_attn_scores_fn)(const float *q, const float *k, int64_t k_row_elems, int32_t n,
                                    int32_t hd, float *s);

/* The weighted sum of n value rows, added in key order: o[i] += sum_j p[j] * v_j[i],
 * v_j = v + j * v_row_elems, i in [0, hd). Before that o is scaled: o[i] *= c. */
typedef void (*lean_attn_accum_fn)(float *o, float c, const float *v, int64_t v_row_elems, const float *p,
                                   int32_t n, int32_t hd);

/* gate[i] = silu(gate[i]) * up[i] = gate / (1 + e^-gate) * up, i in [0, n). */
typedef void (*lean_swiglu_fn)(float *gate, const float *up, int64_t n);

/* The softmax numerators of a block of scores: s[i] = e^(s[i] - m), i in [0, n); returns their
 * sum, added in an order fixed by n alone. */
typedef float (*lean_exp_sum_fn)(float *s, int32_t n, float m);

/* lean_quantize_act computed with this ISA: the same bytes (tests/test_kernels.c checks), only
 * faster. The generic table's is lean_quantize_act itself. */
typedef void (*lean_quantize_act_fn)(lean_act_type act, const float *x, void *dst, int64_t n);

typedef struct lean_kernels {
    const char *name;                        /* "generic", "avx2", ... */
    bool same_as_generic;                    /* every entry gives lean_kernels_generic's bits */
    lean_matmul_fn matmul[LEAN_N_TYPE_IDS];  /* indexed by lean_type; NULL: none */
    lean_matmul_fn matmul_exact[LEAN_N_TYPE_IDS]; /* x: F32 rows for every type (above); NULL: none */
    /* w: the matrix in cpu/repack.h's layout of its type (w_row_bytes: still the file's bytes of a
     * row), r0 a multiple of 16; the same bits as matmul
     * (tested). NULL: the type has no such kernel in this table (matmul reads the file's rows). */
    lean_matmul_fn matmul_packed[LEAN_N_TYPE_IDS];
    lean_attn_scores_fn attn_scores;
    lean_attn_accum_fn attn_accum;
    lean_exp_sum_fn exp_sum;
    lean_swiglu_fn swiglu;
    lean_quantize_act_fn quantize_act;
} lean_kernels;

/* The portable table: every format, every platform. */
extern const lean_kernels lean_kernels_generic;

/* The ISA tables, as their files define them (entries they lack are NULL). NULL when the
 * file is not compiled for this target or the CPU lacks the instructions (cpuid). */
const lean_kernels *lean_kernels_avx2(void);   /* x86_avx2.c: AVX2 + FMA + F16C, every entry */
const lean_kernels *lean_kernels_avx512(void); /* x86_avx512.c: AVX-512 F/BW/VL + VNNI, the
                                                  quantized formats */
const lean_kernels *lean_kernels_neon(void);    /* arm_neon.c: the matmuls, attention */
const lean_kernels *lean_kernels_simd128(void); /* wasm_simd128.c: the matmuls, attention */
const lean_kernels *lean_kernels_relaxed(void); /* wasm_relaxed.c: Q4_0 .. Q8_0, Q2_K, Q4_K .. Q6_K */

/* The table named `name` ("generic", "avx2", "avx512", "neon", "relaxed", "simd128"), or the
 * best the CPU runs for NULL / "auto", each empty entry filled from the next table in the order
 * avx512, avx2, neon, relaxed, simd128, generic that the CPU runs; then matmul_exact of the float formats is the
 * chosen matmul (the same product); matmul_packed comes with the matmul it gives the bits of,
 * from the table that matmul came from. *out stays untouched and -1 is returned for
 * an unknown name or one this CPU cannot run. Thread-safe. */
int lean_kernels_select(const char *name, lean_kernels *out);

#endif
