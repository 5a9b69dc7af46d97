/* sample.h — GPU-resident sampling: the next id chosen on the GPU from a logits buffer, bit
 * for bit as src/core/sampler.c's sample_reference chooses it (same candidates, weights, sums,
 * top-p cut and Philox draw), so a seed gives the same ids on the CPU and the GPU. Only the
 * chosen id is written (a u32 in a buffer of the caller's: the next step's embedding input).
 *
 * State on the GPU, so decode steps need no host writes: the position of the next draw (it
 * keys the random draw, as lean_sampler_sample's pos: the position the drawn token will
 * occupy) and, when the repetition penalty is on, the penalty window (per-id counts and a
 * ring of the last repeat_last_n ids). Each recorded step draws at the held position, then
 * advances it and adds the drawn id to the window. gpu_sampler_reset sets both from the host
 * (after a prompt, or after stopping rolled the context back).
 *
 * Use: gpu_sampler_check once per device (sample on the CPU if it fails), gpu_sampler_create
 * at load (pipelines and bind groups made once), gpu_sampler_reset before the first draw,
 * gpu_sampler_record at the end of each step's command buffer (after the logits are written);
 * gpu_sampler_set_mask before a draw that a mask (lean_mask: a grammar's) holds.
 *
 * Not here: reading the id back (the caller copies or maps its out buffer). */
#ifndef LEAN_GPU_SAMPLE_H
#define LEAN_GPU_SAMPLE_H

#include "gpu/gpu.h"
#include "core/sampler.h"

/* Written instead of an id when no id has a finite (penalized) logit. */
#define GPU_SAMPLE_NO_ID 0xffffffffu

typedef struct gpu_sampler gpu_sampler;

/* cfg: from sampler_config, with the seed resolved (not LEAN_SEED_RANDOM), greedy or with
 * 1 <= top_k <= 64 (the capped draw; the wide one is LEAN_ERR_UNSUPPORTED: the host draws). logits: n_vocab
 * F32 at byte offset logits_offset (a multiple of 4). out: the id goes to u32 index out_index.
 * The buffers stay the caller's and must outlive s. Fails with LEAN_ERR_ARG on bad sizes,
 * LEAN_ERR_UNSUPPORTED when the device's limits cannot hold the vocabulary or the window. */
lean_status gpu_sampler_create(lean_gpu *g, const sampler_cfg *cfg, int32_t n_vocab, lean_gpu_buf *logits,
                               uint64_t logits_offset, lean_gpu_buf *out, uint32_t out_index,
                               gpu_sampler **res, lean_error *err);
/* Queues writes that set the next draw's position to pos and the penalty window to the last
 * repeat_last_n of history[0..n_history) (every one for -1), oldest first; ordered before any
 * command buffer submitted after it. LEAN_ERR_ARG for an id outside the vocabulary. */
lean_status gpu_sampler_reset(gpu_sampler *s, uint32_t pos, const int32_t *history, int32_t n_history,
                              lean_error *err);
/* Holds the draws recorded after this call to bits (LEAN_MASK_WORDS(n_vocab) words, lean_mask's
 * layout; copied now): an id whose bit is clear is never drawn, as sample_reference's mask_bits.
 * NULL: no mask (the state after create). Queues a write of n_vocab / 8 bytes (and of the
 * params' flags word when masking turns on or off), ordered before later submits. */
lean_status gpu_sampler_set_mask(gpu_sampler *s, const uint32_t *bits, lean_error *err);
/* Sets the logit bias of the draws recorded after this call: n (id, value) pairs, each id in
 * [0, n_vocab) at most once, values in [-100, 100] (lean_logit_bias; the list is copied), added
 * to the logits before the penalty as sample_reference adds cfg->bias. n = 0: none. Queues a
 * write of n_vocab * 4 bytes when the list differs from the one on the device (and of the
 * params' flags word when the bias turns on or off), ordered before later submits.
 * gpu_sampler_create sets cfg's, and makes room for a bias only when cfg has one: n > 0 on a
 * sampler made without is LEAN_ERR_ARG (gpu_sampler_takes_bias says which it is). */
lean_status gpu_sampler_set_bias(gpu_sampler *s, const lean_logit_bias *bias, int32_t n, lean_error *err);
bool gpu_sampler_takes_bias(const gpu_sampler *s);
/* Records one draw: the top-k tree (or the argmax tree when greedy), the wide draw's passes
 * (top_k 0 or > 64: keys and weights, 16 or 32 threshold levels of two dispatches), the pick.
 * 2-5 dispatches for a 152k vocabulary (36-70 for the wide draw); no allocation. */
void gpu_sampler_record(lean_gpu_cmd *c, const gpu_sampler *s);
/* A draw per row: one pass (the capped tree and the pick, each one dispatch over every row) draws
 * for rows 0 .. n - 1 of logits (row r: n_vocab F32 from float r * n_vocab), row r with the
 * settings and seed of the gpu_sampler given for it and at the position given, its id to u32
 * out[r]: the id that sampler draws from those logits at that position. Only samplers
 * gpu_sampler_rows_takes (no penalty, mask or bias, not the wide draw): their draw needs no state
 * but the position. The samplers' own positions are not advanced (gpu_sampler_reset them before
 * they draw again). Use: _set each row, _write (queues the rows' words), _record. */
typedef struct gpu_sampler_rows gpu_sampler_rows;
lean_status gpu_sampler_rows_create(lean_gpu *g, int32_t n_vocab, int32_t rows_max, lean_gpu_buf *logits,
                                    lean_gpu_buf *out, gpu_sampler_rows **res, lean_error *err);
bool gpu_sampler_rows_takes(const gpu_sampler *s);
/* Row row's draw: s's, at position pos; s NULL: a throwaway draw (a row drawn elsewhere). */
void gpu_sampler_rows_set(gpu_sampler_rows *r, int32_t row, const gpu_sampler *s, uint32_t pos);
lean_status gpu_sampler_rows_write(gpu_sampler_rows *r, int32_t n, lean_error *err);
/* n_levels + 1 dispatches (4 for a 152k vocabulary), whatever n. */
void gpu_sampler_rows_record(lean_gpu_cmd *c, const gpu_sampler_rows *r, int32_t n);
void gpu_sampler_rows_free(gpu_sampler_rows *r); /* NULL is fine */
/* Whether this adapter's arithmetic reproduces sample_reference: a few draws over a fixed
 * 1000-id vocabulary (bias, penalty, temperature, top-p; top-k 64, and top-k 0: the wide draw) compared
 * with the CPU's, traces bit for bit (WGSL lets + and * round either way and some drivers
 * ignore the FMA fence). LEAN_ERR_UNSUPPORTED naming the first difference: sample on the CPU.
 * Blocking; a few milliseconds. In two halves for the pump (gpu.h, lean_gpu_settle): _begin
 * submits every draw and one read-back of their ids and traces; _end waits for it (pump mode:
 * LEAN_PENDING, run kept for the next call) and compares, freeing run unless pending. */
lean_status gpu_sampler_check(lean_gpu *g, lean_error *err);
typedef struct gpu_sampler_check_run gpu_sampler_check_run;
lean_status gpu_sampler_check_begin(lean_gpu *g, gpu_sampler_check_run **out, lean_error *err);
lean_status gpu_sampler_check_end(gpu_sampler_check_run *run, lean_error *err);
void gpu_sampler_check_free(gpu_sampler_check_run *run); /* NULL is fine */
/* Holds s to sample_reference for one draw: sets the mask (nullable), resets s to (pos, history),
 * draws, and compares the id and the trace, bit for bit, with sample_reference's for the same
 * logits (which must be what s's logits buffer holds), mask and window. LEAN_ERR_UNSUPPORTED naming the first
 * difference. work: n_vocab floats. Blocking; for gpu_sampler_check and tests. */
lean_status gpu_sampler_compare(gpu_sampler *s, const float *logits, const uint32_t *mask, const int32_t *history,
                                int32_t n_history, uint32_t pos, float *work, lean_error *err);
/* Tests: reads back what the last draw saw, in sample_reference's trace form (blocking). */
lean_status gpu_sampler_read_trace(gpu_sampler *s, sample_trace *t, lean_error *err);
void gpu_sampler_free(gpu_sampler *s); /* NULL is fine */

#endif
