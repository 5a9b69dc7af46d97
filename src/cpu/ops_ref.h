/* ops_ref.h — the plain single-threaded kernels of the reference forward (ops_ref.c).
 *
 * Every op is written for clarity and determinism, not speed: float32 arithmetic,
 * every sum accumulated in index order, nothing reassociated. A token's result
 * therefore depends only on that token's inputs, never on how a prefill was split
 * into batches — the property the tests check bit for bit.
 *
 * Activations are token-major: n tokens of width d are one (n, d) float array.
 */
#ifndef LEAN_OPS_REF_H
#define LEAN_OPS_REF_H

#include "core/lora.h"
#include "core/model.h"

/* sum_i a[i] * b[i], accumulated in float in index order. */
float ref_dot(const float *a, const float *b, int64_t n);

/* out (n) = x (n) / sqrt(mean(x^2) + eps) * w (n). out may equal x. */
void ref_rmsnorm(float *out, const float *x, const float *w, int64_t n, float eps);

/* out (n_tok, rows) = x (n_tok, cols) @ W^T for W (rows, cols) in any format.
 * row: scratch of cols floats. One weight row is dequantized at a time, then dotted
 * with every token, so each row is decoded once per batch and no more than one row is
 * ever widened to float. */
void ref_matmul(float *out, const float *x, int32_t n_tok, const lean_tensor *w, float *row);

/* LoRA (core/lora.h): y += scale * B (A x) for each of n_terms terms of one weight, in two
 * halves so that a threaded caller can split the second by rows of y:
 * ref_lora_down: tmp = for each term j, (n_tok, rank_j) = x (n_tok, cols) A_j^T, the terms'
 *   blocks one after the other (n_tok * the sum of the ranks floats). row: scratch of cols floats.
 * ref_lora_up: rows [r0, r1) of y (n_tok, y_row_elems) += scale_j * tmp_j B_j^T, term after
 *   term; a row of y depends only on its own row of each B. row: scratch of max rank floats. */
void ref_lora_down(float *tmp, const float *x, int32_t n_tok, const lora_term *terms, int32_t n_terms, float *row);
void ref_lora_up(float *y, int64_t y_row_elems, int32_t n_tok, const float *tmp, const lora_term *terms,
                 int32_t n_terms, int64_t r0, int64_t r1, float *row);

/* The embedding's LoRA (core/lora.h, lora_site_embd): x (n_tok, n_embd) += scale_j * B_j A_j[ids[t]]
 * for each term j, token t: tmp gets each term's (n_tok, rank_j) rows of A as ref_lora_down lays
 * out its products, then ref_lora_up adds them. row: scratch of max rank floats. */
void ref_lora_embed(float *x, int64_t n_embd, const int32_t *ids, int32_t n_tok, const lora_term *terms,
                    int32_t n_terms, float *tmp, float *row);

/* x (n_tok, n) += b (n), b F32. */
void ref_add_bias(float *x, const float *b, int32_t n_tok, int64_t n);

/* out (cols) = row `id` of E (rows, cols), dequantized. */
void ref_embed_row(float *out, const lean_tensor *E, int32_t id);

/* Rotates every head of x (n_heads, head_dim) by the angles of one position.
 * NORM pairs (2i, 2i+1); NEOX pairs (i, i + head_dim/2) — see lean_rope_style.
 * cos_t, sin_t: (head_dim / 2), the position's angles (lean_rope_angles, core/rope.h). */
void ref_rope(float *x, int32_t n_heads, int32_t head_dim, lean_rope_style style,
              const float *cos_t, const float *sin_t);

/* x (n) <- softmax(x), subtracting the max first so expf never overflows. */
void ref_softmax(float *x, int32_t n);

/* gate (n) <- silu(gate) * up, silu(g) = g / (1 + e^-g). */
void ref_swiglu(float *gate, const float *up, int64_t n);

#endif
