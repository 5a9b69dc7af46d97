/* ops_ref.c — the reference kernels (see ops_ref.h for the contract of each).
 *
 * What it does: dot products, RMSNorm, format-generic matmul (and LoRA's two halves), embedding lookup
 * (through formats.c's reference dequantizers), RoPE, softmax, SwiGLU — one plain
 * loop each, float32, sums in index order.
 * What it does not: threads, SIMD, or anything clever; faster kernels live in their own
 * files and are tested against these.
 *
 * Sections: reductions · weights (matmul, LoRA, embedding) · position (RoPE) · activations
 */
#include "cpu/ops_ref.h"

#include "core/formats.h"

#include <math.h>

/* a*b + c is never fused into an fma, so every ISA rounds the same way (gcc does not
 * contract in ISO C mode; clang is told so here). */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

/* ---- reductions ---- */

float ref_dot(const float *a, const float *b, int64_t n) {
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++) sum += a[i] * b[i];
    return sum;
}

void ref_rmsnorm(float *out, const float *x, const float *w, int64_t n, float eps) {
    float ss = 0.0f; /* sum of squares, float, index order (ggml sums in double; we do not) */
    for (int64_t i = 0; i < n; i++) ss += x[i] * x[i];
    const float scale = 1.0f / sqrtf(ss / (float)n + eps);
    for (int64_t i = 0; i < n; i++) out[i] = x[i] * scale * w[i];
}

/* ---- weights ---- */

/* Bytes of one row of t; the model checked rows are whole blocks. */
static size_t row_bytes(const lean_tensor *t) {
    uint64_t b = 0;
    lean_type_bytes(t->type, (uint64_t)t->ne[0], &b);
    return (size_t)b;
}

void ref_matmul(float *out, const float *x, int32_t n_tok, const lean_tensor *w, float *row) {
    const lean_type_traits *tt = lean_type_traits_get(w->type);
    const int64_t cols = w->ne[0], rows = w->ne[1];
    const size_t rb = row_bytes(w);
    const uint8_t *src = w->data;
    for (int64_t r = 0; r < rows; r++) {
        tt->dequant(src + (size_t)r * rb, row, cols); /* row (cols) = W[r, :] */
        for (int32_t t = 0; t < n_tok; t++) out[(int64_t)t * rows + r] = ref_dot(row, x + (int64_t)t * cols, cols);
    }
}

void ref_lora_down(float *tmp, const float *x, int32_t n_tok, const lora_term *terms, int32_t n_terms, float *row) {
    for (int32_t j = 0; j < n_terms; j++) {
        ref_matmul(tmp, x, n_tok, terms[j].a, row); /* (n_tok, rank) */
        tmp += (int64_t)n_tok * terms[j].rank;
    }
}

void ref_lora_up(float *y, int64_t y_row_elems, int32_t n_tok, const float *tmp, const lora_term *terms,
                 int32_t n_terms, int64_t r0, int64_t r1, float *row) {
    for (int32_t j = 0; j < n_terms; j++) {
        const lora_term *tm = &terms[j];
        const lean_type_traits *tt = lean_type_traits_get(tm->b->type);
        const size_t rb = row_bytes(tm->b);
        for (int64_t r = r0; r < r1; r++) {
            tt->dequant((const uint8_t *)tm->b->data + (size_t)r * rb, row, tm->rank); /* row (rank) = B[r, :] */
            for (int32_t t = 0; t < n_tok; t++)
                y[(int64_t)t * y_row_elems + r] += tm->scale * ref_dot(tmp + (int64_t)t * tm->rank, row, tm->rank);
        }
        tmp += (int64_t)n_tok * tm->rank;
    }
}

void ref_lora_embed(float *x, int64_t n_embd, const int32_t *ids, int32_t n_tok, const lora_term *terms,
                    int32_t n_terms, float *tmp, float *row) {
    float *t = tmp;
    for (int32_t j = 0; j < n_terms; j++)
        for (int32_t k = 0; k < n_tok; k++, t += terms[j].rank) ref_embed_row(t, terms[j].a, ids[k]); /* A[id] (rank) */
    ref_lora_up(x, n_embd, n_tok, tmp, terms, n_terms, 0, n_embd, row);
}

void ref_add_bias(float *x, const float *b, int32_t n_tok, int64_t n) {
    for (int32_t t = 0; t < n_tok; t++)
        for (int64_t i = 0; i < n; i++) x[(int64_t)t * n + i] += b[i];
}

void ref_embed_row(float *out, const lean_tensor *E, int32_t id) {
    const lean_type_traits *tt = lean_type_traits_get(E->type);
    tt->dequant((const uint8_t *)E->data + (size_t)id * row_bytes(E), out, E->ne[0]);
}

/* ---- position ---- */

void ref_rope(float *x, int32_t n_heads, int32_t head_dim, lean_rope_style style,
              const float *cos_t, const float *sin_t) {
    const int32_t half = head_dim / 2;
    for (int32_t h = 0; h < n_heads; h++) {
        float *v = x + (int64_t)h * head_dim; /* (head_dim) */
        for (int32_t i = 0; i < half; i++) {
            /* the pair rotated by angle i: adjacent (NORM) or half a head apart (NEOX) */
            const int32_t i0 = style == LEAN_ROPE_NORM ? 2 * i : i;
            const int32_t i1 = style == LEAN_ROPE_NORM ? 2 * i + 1 : i + half;
            const float a = v[i0], b = v[i1];
            /* explicit fma, as the GPU's kernels write it: no compiler may contract it otherwise */
            v[i0] = fmaf(a, cos_t[i], -(b * sin_t[i]));
            v[i1] = fmaf(a, sin_t[i], b * cos_t[i]);
        }
    }
}

/* ---- activations ---- */

void ref_softmax(float *x, int32_t n) {
    float max = x[0];
    for (int32_t i = 1; i < n; i++)
        if (x[i] > max) max = x[i];
    float sum = 0.0f;
    for (int32_t i = 0; i < n; i++) {
        x[i] = expf(x[i] - max);
        sum += x[i];
    }
    for (int32_t i = 0; i < n; i++) x[i] /= sum;
}

void ref_swiglu(float *gate, const float *up, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        const float g = gate[i];
        gate[i] = g / (1.0f + expf(-g)) * up[i];
    }
}
