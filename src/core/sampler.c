/* sampler.c — choosing the next id: transformers' semantics, one computation for every backend.
 *
 * What it does. Two computations over the same parameters (sampler.h):
 *   - hf_*: transformers' SequenceBiasLogitsProcessor (one-id sequences: the logit bias),
 *     RepetitionPenaltyLogitsProcessor, TemperatureLogitsWarper,
 *     TopKLogitsWarper and TopPLogitsWarper, transcribed in float32 with torch's CPU
 *     rounding. They define the distribution; tests/test_sampler.c holds them to
 *     transformers' own output bit for bit (tests/data/sampler, scripts/make_sampler_fixtures.py).
 *   - sample_reference: the resident computation (DESIGN.md principle 6). Every backend
 *     computes exactly this, and the CPU uses it for every token (lean_sampler_sample), so
 *     GPU kernels can be held to it bit for bit. Only float32 multiplications, additions,
 *     subtractions and comparisons, integer operations on u32, no division (reciprocals are
 *     computed once, on the host, when the parameters are set), exp as a fixed polynomial,
 *     top-k by a comparison network, and a counter-based generator keyed by (seed, position).
 * What it does not: min-p, typical-p, frequency/presence penalties, grammars (a grammar
 * hands us a lean_mask), beam search. Nothing here allocates per token.
 *
 * How sample_reference deviates from transformers' sampler (all of it, on purpose):
 *   1. The random stream: Philox4x32-10 keyed by (seed, position) instead of torch's
 *      generator state, so the ids for a seed differ from transformers'; the distribution
 *      is the same (tests: chi-square against the exact distribution).
 *   2. Float32 rounding: x * fl(1/penalty) and (x - max) * fl(1/temperature) instead of
 *      x / penalty and x / temperature (one rounding apart), a polynomial exp (a few ulp from
 *      exp), sums in a fixed order. Probabilities move by ~1e-7 relative; a kept set can
 *      differ only when a cumulative probability lies within that of the top-p threshold.
 *   3. Ties at the k-th logit: transformers keeps every id whose logit equals the k-th
 *      largest (scores < kth are removed), so it can keep more than k; here exactly k are
 *      kept, ordered by logit and then by lower id (test_sampler.c shows a case).
 *   4. Top-k = 0 (off) or > 64 draws over the whole vocabulary (the wide draw): the kept
 *      set is transformers' (up to 2 and 3), but the top-p prefix's mass is summed in id
 *      order, not rank order, and the draw walks the kept ids in id order, so the ids for a
 *      seed differ from those the capped draw (1 <= top_k <= 64: among the 64 best by a
 *      network, sums in rank order) would give; the distribution is the same. Its cost:
 *      a few passes over the vocabulary, up to ~70 when top-p keeps more than 64 ids.
 *   5. Ranking happens on the penalized logits before temperature (scaling by a positive
 *      constant keeps the order; only float ties created by that rounding could differ).
 *   6. A NaN or infinite logit (after the bias and the penalty) counts as masked out.
 *   7. The logit bias is added only where its value is nonzero (transformers adds a dense
 *      tensor, turning a -0 logit into +0 everywhere): the order is the same, -0 == +0.
 *
 * Sections:
 *   1. parameters      defaults, checks, the derived float32 constants
 *   2. transformers    hf_logit_bias, hf_repetition_penalty, hf_temperature, hf_top_k, hf_top_p,
 *                      hf_process
 *   3. resident arithmetic   Philox4x32-10 on u32, the uniform, the polynomial exp
 *   4. top-k network   a bitonic sorting/merging network over blocks of 64; the wide
 *                      draw's keys, masses and threshold search
 *   5. sample_reference (the capped and the wide draw), and comparing traces
 *   6. the handle      lean_sampler: history window, penalty set, lean_sampler_sample
 */
#include "core/sampler.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Every float operation below must round once, to nearest even: no fused multiply-add
 * (clang contracts by default; gcc does not in -std=c11), no excess precision, and no
 * subnormal ever arises (sampler_exp cuts off before them; a GPU may flush them).
 * x86-64 SSE, arm64 and wasm do this. For a GPU: WGSL's accuracy rules for f32 + and * may
 * admit either neighbouring value and Vulkan leaves the default rounding mode to the
 * implementation, so the GPU backend must check at start-up that its adapter reproduces
 * these draws (src/gpu/sample.c's gpu_sampler_check compares traces with sample_reference)
 * and sample on the CPU otherwise. Everything else here is u32 integer arithmetic, exact everywhere. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif
#if !defined(FLT_EVAL_METHOD) || FLT_EVAL_METHOD != 0
#error "sampler.c needs float arithmetic evaluated in float (FLT_EVAL_METHOD == 0)"
#endif

/* ================================================================ 1. parameters */

lean_sampler_params lean_sampler_default_params(void) {
    /* llama.cpp's common_params_sampling defaults (common/common.h). */
    return (lean_sampler_params){
        .temperature = 0.8,
        .top_k = 40,
        .top_p = 0.95,
        .repeat_penalty = 1.0,
        .repeat_last_n = 64,
        .seed = LEAN_SEED_RANDOM,
        .greedy = 0,
        .logit_bias = NULL,
        .n_logit_bias = 0,
    };
}

lean_status sampler_check_bias(const lean_logit_bias *bias, int32_t n, int32_t n_vocab, lean_error *err) {
    if (n < 0 || (n > 0 && !bias))
        return LEAN_FAIL(err, LEAN_ERR_ARG, "logit_bias: %d entries%s", n,
                         n < 0 ? ": must be >= 0" : " but the list is NULL");
    for (int32_t i = 0; i < n; i++) {
        const lean_logit_bias b = bias[i];
        if (b.id < 0) return LEAN_FAIL(err, LEAN_ERR_ARG, "logit_bias[%d]: id %d is negative", i, b.id);
        if (n_vocab > 0 && b.id >= n_vocab)
            return LEAN_FAIL(err, LEAN_ERR_ARG, "logit_bias[%d]: id %d is outside the vocabulary [0, %d)", i, b.id,
                             n_vocab);
        if (!(b.value >= -100.0f && b.value <= 100.0f))
            return LEAN_FAIL(err, LEAN_ERR_ARG, "logit_bias[%d] (id %d): value %g must be finite and in [-100, 100]",
                             i, b.id, (double)b.value);
    }
    return LEAN_OK;
}

lean_status sampler_config(const lean_sampler_params *p, sampler_cfg *out, lean_error *err) {
    if (!p) return LEAN_FAIL(err, LEAN_ERR_ARG, "sampler parameters are NULL");
    /* Written so that NaN fails every check. */
    if (!(p->temperature >= 0) || !(p->temperature <= FLT_MAX))
        return LEAN_FAIL(err, LEAN_ERR_ARG, "temperature %g: must be >= 0 and finite (0 = greedy)",
                         p->temperature);
    if (p->top_k < 0) return LEAN_FAIL(err, LEAN_ERR_ARG, "top_k %d: must be >= 0 (0 = off)", p->top_k);
    if (!(p->top_p >= 0 && p->top_p <= 1))
        return LEAN_FAIL(err, LEAN_ERR_ARG, "top_p %g: must be in [0, 1] (1 = off)", p->top_p);
    if (!(p->repeat_penalty > 0) || !(p->repeat_penalty <= FLT_MAX))
        return LEAN_FAIL(err, LEAN_ERR_ARG, "repeat_penalty %g: must be > 0 and finite (1 = off)",
                         p->repeat_penalty);
    if (p->repeat_last_n < -1)
        return LEAN_FAIL(err, LEAN_ERR_ARG,
                         "repeat_last_n %d: must be >= -1 (-1 = the whole history, 0 = off)",
                         p->repeat_last_n);
    lean_status st = sampler_check_bias(p->logit_bias, p->n_logit_bias, 0, err);
    if (st != LEAN_OK) return st;
    sampler_cfg c = {0};
    c.greedy = p->greedy != 0 || p->temperature == 0;
    c.penalty = (float)p->repeat_penalty;
    c.inv_penalty = 1.0f / c.penalty;
    if (c.penalty == 0 || !(c.inv_penalty <= FLT_MAX) || c.inv_penalty == 0)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "repeat_penalty %g: its float32 reciprocal is not finite",
                         p->repeat_penalty);
    c.use_penalty = c.penalty != 1.0f && p->repeat_last_n != 0;
    c.temperature = (float)p->temperature;
    c.inv_temperature = 1.0f;
    if (!c.greedy) {
        c.inv_temperature = 1.0f / c.temperature;
        if (c.temperature == 0 || !(c.inv_temperature <= FLT_MAX))
            return LEAN_FAIL(err, LEAN_ERR_ARG,
                             "temperature %g: too small, its float32 reciprocal is not finite",
                             p->temperature);
    }
    c.top_k = p->top_k;
    c.top_p = p->top_p;
    c.top_p_f = (float)p->top_p;
    c.use_top_p = p->top_p < 1;
    c.repeat_last_n = p->repeat_last_n;
    c.seed = p->seed;
    c.bias = p->logit_bias;
    c.n_bias = p->n_logit_bias;
    *out = c;
    return LEAN_OK;
}

lean_status lean_sampler_params_check(const lean_sampler_params *p, lean_error *err) {
    sampler_cfg c;
    return sampler_config(p, &c, err);
}

/* ================================================================ 2. transformers
 *
 * torch's CPU float32 semantics, as transformers 5.x calls it (logits_process.py):
 *   RepetitionPenalty  score = gather(scores, input_ids); where(score < 0, score * penalty,
 *                      score / penalty); scatter back. A Python float scalar becomes a
 *                      float32 operand; CPU division is a true division (on CUDA torch
 *                      multiplies by the reciprocal instead, which is why the fixtures are
 *                      made on the CPU). Duplicate ids scatter the same value: once per id.
 *   Temperature        scores / temperature.
 *   TopK               scores < topk(scores, k).values[-1] -> -inf: ties at the k-th value stay.
 *   TopP               sort ascending; cumsum(softmax(sorted)) (float32 probabilities, summed
 *                      in double by the CPU cumsum, each sum rounded to float32);
 *                      remove where cumsum <= 1 - top_p (the Python double, rounded to
 *                      float32 for the comparison); keep the last (most likely) one.
 * The softmax is the one thing not transcribed bit for bit: torch's vectorised exp is its
 * own; here each probability is the float32 rounding of a double-precision softmax. */

void hf_logit_bias(float *x, const lean_logit_bias *bias, int32_t n_bias) {
    for (int32_t i = 0; i < n_bias; i++) x[bias[i].id] = x[bias[i].id] + bias[i].value;
}

void hf_repetition_penalty(float *x, int32_t n_vocab, const int32_t *ids, int32_t n_ids, float penalty) {
    (void)n_vocab;
    /* gather all first, then scatter: a repeated id sees its original score every time */
    for (int32_t i = 0; i < n_ids; i++) {
        const int32_t id = ids[i];
        bool seen = false;
        for (int32_t j = 0; j < i && !seen; j++) seen = ids[j] == id;
        if (seen) continue;
        const float s = x[id];
        x[id] = s < 0 ? s * penalty : s / penalty;
    }
}

void hf_temperature(float *x, int32_t n_vocab, float temperature) {
    for (int32_t i = 0; i < n_vocab; i++) x[i] = x[i] / temperature;
}

static int cmp_float_desc(const void *a, const void *b) {
    const float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

lean_status hf_top_k(float *x, int32_t n_vocab, int32_t k, lean_error *err) {
    if (k <= 0) return LEAN_OK;
    if (k > n_vocab) k = n_vocab;
    float *v = lean_malloc(sizeof *v * (size_t)n_vocab);
    if (!v) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "top-k: %d floats", n_vocab);
    memcpy(v, x, sizeof *v * (size_t)n_vocab);
    qsort(v, (size_t)n_vocab, sizeof *v, cmp_float_desc);
    const float kth = v[k - 1];
    for (int32_t i = 0; i < n_vocab; i++)
        if (x[i] < kth) x[i] = -INFINITY;
    lean_free(v);
    return LEAN_OK;
}

typedef struct id_logit {
    float v;
    int32_t id;
} id_logit;

static int cmp_ascending(const void *a, const void *b) {
    const id_logit *x = a, *y = b;
    if (x->v != y->v) return x->v < y->v ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

lean_status hf_top_p(float *x, int32_t n_vocab, double top_p, lean_error *err) {
    id_logit *s = lean_malloc(sizeof *s * (size_t)n_vocab);
    if (!s) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "top-p: %d entries", n_vocab);
    for (int32_t i = 0; i < n_vocab; i++) s[i] = (id_logit){x[i], i};
    qsort(s, (size_t)n_vocab, sizeof *s, cmp_ascending);
    const double max = s[n_vocab - 1].v;
    if (max == -INFINITY) { /* torch: softmax of all -inf is NaN; NaN <= t removes nothing */
        lean_free(s);
        return LEAN_OK;
    }
    double sum = 0;
    for (int32_t i = 0; i < n_vocab; i++) sum += exp((double)s[i].v - max);
    const float threshold = (float)(1.0 - top_p);
    double cum = 0;
    for (int32_t i = 0; i < n_vocab - 1; i++) { /* the last one is always kept */
        const float prob = (float)(exp((double)s[i].v - max) / sum);
        cum += prob;
        if ((float)cum <= threshold) x[s[i].id] = -INFINITY;
    }
    lean_free(s);
    return LEAN_OK;
}

lean_status hf_process(const sampler_cfg *cfg, float *x, int32_t n_vocab, const uint32_t *mask_bits,
                       const int32_t *history, int32_t n_history, lean_error *err) {
    hf_logit_bias(x, cfg->bias, cfg->n_bias);
    if (mask_bits)
        for (int32_t i = 0; i < n_vocab; i++)
            if (!lean_mask_allows(mask_bits, i)) x[i] = -INFINITY;
    if (cfg->use_penalty) {
        int32_t start = 0;
        if (cfg->repeat_last_n >= 0 && n_history > cfg->repeat_last_n) start = n_history - cfg->repeat_last_n;
        hf_repetition_penalty(x, n_vocab, history + start, n_history - start, cfg->penalty);
    }
    if (cfg->greedy) return LEAN_OK;
    if (cfg->temperature != 1.0f) hf_temperature(x, n_vocab, cfg->temperature);
    lean_status st = hf_top_k(x, n_vocab, cfg->top_k, err);
    if (st == LEAN_OK && cfg->use_top_p) st = hf_top_p(x, n_vocab, cfg->top_p, err);
    return st;
}

void softmax_f64(const float *x, int32_t n, double *p) {
    double max = -INFINITY, sum = 0;
    for (int32_t i = 0; i < n; i++)
        if (x[i] > max) max = x[i];
    for (int32_t i = 0; i < n; i++) {
        p[i] = max == -INFINITY || x[i] == -INFINITY ? 0.0 : exp((double)x[i] - max);
        sum += p[i];
    }
    for (int32_t i = 0; i < n && sum > 0; i++) p[i] /= sum;
}

/* ================================================================ 3. resident arithmetic
 *
 * The generator: Philox4x32-10 (Salmon, Moraes, Dror, Shaw, "Parallel random numbers: as
 * easy as 1, 2, 3", SC'11), as Random123's philox4x32_R(10, ctr, key):
 *   round(c, k): (hi0, lo0) = M0 * c0, (hi1, lo1) = M1 * c2  (32 x 32 -> 64-bit products)
 *                c = (hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0)
 *   10 rounds; before rounds 2..10 the key is bumped: k0 += W0, k1 += W1 (mod 2^32).
 *   M0 = 0xD2511F53, M1 = 0xCD9E8D57, W0 = 0x9E3779B9, W1 = 0xBB67AE85.
 * WGSL has no u64, so the product's high half is assembled from 16-bit halves (below); the
 * C does the same, so this file is the literal twin of the shader. Known-answer vectors
 * (Random123 kat_vectors) are in test_sampler.c.
 *
 * The draw for position pos under seed s: ctr = (pos, 0, 0, 0), key = (s & 0xffffffff,
 * s >> 32); x = word 0 of the output; u = f32(x >> 8) * 2^-24 (exact: 24 bits). Words 1..3
 * are unused (free for later per-position needs); counter words 1..3 stay 0. */

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

uint32_t sampler_mulhilo32(uint32_t a, uint32_t b, uint32_t *hi) {
    const uint32_t a_lo = a & 0xffffu, a_hi = a >> 16, b_lo = b & 0xffffu, b_hi = b >> 16;
    const uint32_t ll = a_lo * b_lo, lh = a_lo * b_hi, hl = a_hi * b_lo, hh = a_hi * b_hi;
    /* bits 16..47 of the product: each term < 2^16 (+ < 2^16 carry), so no overflow */
    const uint32_t mid = (ll >> 16) + (lh & 0xffffu) + (hl & 0xffffu);
    *hi = hh + (lh >> 16) + (hl >> 16) + (mid >> 16);
    return a * b; /* the low half: u32 multiplication wraps in C and in WGSL */
}

void philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3], k0 = key[0], k1 = key[1];
    for (int r = 0; r < 10; r++) {
        if (r > 0) {
            k0 += PHILOX_W0;
            k1 += PHILOX_W1;
        }
        uint32_t hi0, hi1;
        const uint32_t lo0 = sampler_mulhilo32(PHILOX_M0, c0, &hi0);
        const uint32_t lo1 = sampler_mulhilo32(PHILOX_M1, c2, &hi1);
        const uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
        c0 = n0;
        c1 = lo1;
        c2 = n2;
        c3 = lo0;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

float sampler_uniform(uint64_t seed, uint32_t pos) {
    const uint32_t ctr[4] = {pos, 0, 0, 0};
    const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    uint32_t x[4];
    philox4x32_10(ctr, key, x);
    return (float)(x[0] >> 8) * 0x1p-24f;
}

/* exp(d), d <= 0, in float32 (every step one correctly rounded operation):
 *   d < -86 (or -inf, or NaN) -> 0. exp(-86) ~ 4.5e-38 is below anything that matters next
 *     to the largest weight, which is exactly 1; the cut keeps every result normal, since
 *     a GPU may flush subnormals.
 *   t = d * LOG2E; h = t + 0.5; n = floor(h) (through an i32: trunc, minus 1 if above)
 *   r = (d - n * LN2_HI) - n * LN2_LO          (Cody-Waite; |r| <= ~0.347)
 *   p = ((((((C6 r + C5) r + C4) r + C3) r + C2) r + 1) r + 1)   (Horner, degree 6 Taylor)
 *   result = p * 2^n, 2^n built from bits ((n + 127) << 23); n in [-124, 0]
 * Constants (float32, hex): LOG2E 0x1.715476p+0, LN2_HI 0x1.62e4p-1 (0x3f317200, few bits
 * so n * LN2_HI is exact), LN2_LO 0x1.7f7d1cp-20 (0x35bfbe8e), C2 0x1p-1, C3 0x1.555556p-3,
 * C4 0x1.555556p-5, C5 0x1.111112p-7, C6 0x1.6c16c2p-10 (the float32 roundings of 1/n!).
 * Accuracy: a few ulp over the range (test_sampler.c measures it against libm's exp). */
float sampler_exp(float d) {
    if (!(d >= -86.0f)) return 0.0f;
    const float t = d * 0x1.715476p+0f;
    const float h = t + 0.5f;
    int32_t n = (int32_t)h; /* truncates toward zero; h in [-123.6, 0.5] */
    if ((float)n > h) n -= 1;
    const float nf = (float)n;
    const float r = (d - nf * 0x1.62e4p-1f) - nf * 0x1.7f7d1cp-20f;
    float p = 0x1.6c16c2p-10f;
    p = p * r + 0x1.111112p-7f;
    p = p * r + 0x1.555556p-5f;
    p = p * r + 0x1.555556p-3f;
    p = p * r + 0x1p-1f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    const uint32_t bits = (uint32_t)(n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

/* ================================================================ 4. top-k network
 *
 * The candidates are the first K of all allowed, finite (penalized) logits under one total
 * order: larger logit first, then lower id (float comparison: -0 == +0). The set and its
 * order are therefore unique, and any correct network computes the same one; this is the
 * one the CPU runs and a GPU workgroup can run:
 *   best[64]: sorted, initially 64 sentinels (-inf, id 0xffffffff, worse than any real entry)
 *   scan ids in order; an entry that beats best[63] joins a block of 64; a full block (and
 *   the last, padded with sentinels) is sorted by a bitonic network, then merged into best:
 *   m[j] = better(best[j], block[63 - j]) (a bitonic sequence holding the 64 best of both),
 *   then bitonic half-cleaners with strides 32, 16, ..., 1.
 * (Skipping entries that do not beat best[63] changes nothing: best[63] only improves.)
 * Cost: a 150k vocabulary scans once; blocks fill rarely after the first few. */

typedef struct cand {
    float v;
    uint32_t id;
} cand;

static inline bool better(cand a, cand b) { return a.v > b.v || (a.v == b.v && a.id < b.id); }

static void bitonic_sort64(cand *a) {
    for (uint32_t k = 2; k <= SAMPLER_K_CAP; k <<= 1)
        for (uint32_t j = k >> 1; j > 0; j >>= 1)
            for (uint32_t i = 0; i < SAMPLER_K_CAP; i++) {
                const uint32_t l = i ^ j;
                if (l <= i) continue;
                const bool desc = (i & k) == 0; /* this run is sorted best-first */
                if (desc ? better(a[l], a[i]) : better(a[i], a[l])) {
                    const cand t = a[i];
                    a[i] = a[l];
                    a[l] = t;
                }
            }
}

static void merge_block(cand *best, cand *block) {
    bitonic_sort64(block);
    for (uint32_t j = 0; j < SAMPLER_K_CAP; j++) {
        const cand o = block[SAMPLER_K_CAP - 1 - j];
        if (better(o, best[j])) best[j] = o;
    }
    for (uint32_t j = SAMPLER_K_CAP >> 1; j > 0; j >>= 1)
        for (uint32_t i = 0; i < SAMPLER_K_CAP; i++) {
            const uint32_t l = i ^ j;
            if (l > i && better(best[l], best[i])) {
                const cand t = best[i];
                best[i] = best[l];
                best[l] = t;
            }
        }
}

static inline bool is_finite_bits(float x) {
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    return (b & 0x7f800000u) != 0x7f800000u;
}

/* The wide draw's arithmetic (section 5's wide steps). An entry's key orders as the
 * candidates do (larger value, then lower id) in one u64: the float's bits made monotone
 * (-0 as +0) above the complemented id. A GPU compares the same integers. */
static inline uint64_t entry_key(float v, uint32_t id) {
    uint32_t b;
    memcpy(&b, &v, sizeof b);
    if (b == 0x80000000u) b = 0;
    const uint32_t k = b & 0x80000000u ? ~b : b | 0x80000000u;
    return (uint64_t)k << 32 | (0xffffffffu - id);
}

/* The entry a key names. */
static cand key_entry(uint64_t key) {
    const uint32_t k = (uint32_t)(key >> 32), b = k & 0x80000000u ? k & 0x7fffffffu : ~k;
    float v;
    memcpy(&v, &b, sizeof v);
    return (cand){v, 0xffffffffu - (uint32_t)key};
}

/* Whether the entry (v, id) has a key >= that of t = key_bound(key): float comparisons,
 * cheaper than the key. Every key between two finite values' names a finite value but the
 * -0 slot (high word 0x7fffffff, no entry's: -0 counts as +0), whose set is every value >= 0.
 * NaN (an excluded id) reaches none. */
static inline cand key_bound(uint64_t key) {
    return key >> 32 == 0x7fffffffu ? (cand){0.0f, 0xffffffffu} : key_entry(key);
}
static inline bool reaches(float v, uint32_t id, cand t) { return v > t.v || (v == t.v && id <= t.id); }

/* How many allowed entries have a key >= t, and the mass of their weights w (w_i = 0 for
 * the others): sequential sums over blocks of SAMPLER_SUM_BLOCK consecutive ids, lowest id
 * first, then the block sums added in block order. Adding a weight >= 0 never lowers a
 * float sum (rounding is monotone), so the mass only grows as t falls: a threshold search
 * over it is well defined. (A GPU: one invocation per block, then one for the blocks.) */
static float wide_measure(const float *a, const float *w, int32_t n_vocab, uint64_t t, int32_t *count) {
    const cand tb = key_bound(t);
    float total = 0;
    int32_t c = 0;
    for (int32_t b = 0; b < n_vocab; b += SAMPLER_SUM_BLOCK) {
        const int32_t end = n_vocab - b < SAMPLER_SUM_BLOCK ? n_vocab : b + SAMPLER_SUM_BLOCK;
        float s = 0;
        for (int32_t i = b; i < end; i++)
            if (reaches(a[i], (uint32_t)i, tb)) {
                c++;
                s = s + w[i];
            }
        total = total + s;
    }
    *count = c;
    return total;
}

/* Whether the set of entries with keys >= t is enough: k_lim of them, or a mass of at
 * least limit (INFINITY: top-p off). True at the worst allowed entry (all of them, k_lim <= their
 * number), and it only turns false as t rises. */
static bool wide_enough(const float *a, const float *w, int32_t n_vocab, uint64_t t, int32_t k_lim, float limit) {
    int32_t c;
    const float m = wide_measure(a, w, n_vocab, t, &c);
    return c >= k_lim || m >= limit;
}

/* The key of the worst kept entry: the largest key t (always an entry's) whose set is
 * enough. The 64 candidates are tried first (top-p usually stops among them), by bisection
 * over their ranks; past them, by bisection over the keys between the 64th candidate's and
 * the worst allowed entry's (at most 64 measures of the whole vocabulary). */
static uint64_t wide_threshold(const float *a, const float *w, int32_t n_vocab, const cand *best, int32_t n_best,
                               uint64_t worst, int32_t k_lim, float limit) {
    int32_t lo = -1, hi = n_best - 1; /* best[hi] is enough or hi past the list */
    if (wide_enough(a, w, n_vocab, entry_key(best[hi].v, best[hi].id), k_lim, limit)) {
        while (hi - lo > 1) { /* best[lo] is not enough (lo = -1: none tried) */
            const int32_t mid = lo + (hi - lo) / 2;
            if (wide_enough(a, w, n_vocab, entry_key(best[mid].v, best[mid].id), k_lim, limit))
                hi = mid;
            else
                lo = mid;
        }
        return entry_key(best[hi].v, best[hi].id);
    }
    uint64_t yes = worst, no = entry_key(best[n_best - 1].v, best[n_best - 1].id);
    while (no - yes > 1) {
        const uint64_t mid = yes + (no - yes) / 2;
        if (wide_enough(a, w, n_vocab, mid, k_lim, limit))
            yes = mid;
        else
            no = mid;
    }
    return yes;
}

/* ================================================================ 5. sample_reference
 *
 *   a_i   = logits[i]; ids masked out, or whose a_i is NaN/inf after step 1, take no part
 *   1.    for each distinct id in the penalty window: a = a < 0 ? a * penalty : a * inv_penalty
 *   2.    greedy: the first i with the largest a_i (lowest id on ties); done
 *   3.    c_0..c_{K-1}: top K by the network, K = min(64, allowed ids); with 1 <= top_k <= 64
 *         K = min(top_k, allowed ids) and steps 4-6 (the capped draw) follow, else the wide
 *         draw (W1-W4)
 *   4.    w_j = sampler_exp((a_{c_j} - a_{c_0}) * inv_temperature)  (w_0 = 1); S_j = S_{j-1} + w_j
 *   5.    top-p (top_p < 1): keep the prefix of j with S_{j-1} < top_p * S_{K-1} (S_{-1} = 0),
 *         at least one: the smallest set whose probability reaches top_p (transformers: drop j
 *         when the mass of the ids above it is already >= top_p)
 *   6.    u = uniform(seed, pos); t = u * S_{m-1}; pick the first j with t < S_j.
 *         Since u <= 1 - 2^-24 and S_{m-1} >= 1, t < S_{m-1} always (round to nearest), and
 *         the picked w_j > 0.
 * The wide draw (top_k 0 or > 64): every allowed id takes part, none is capped away.
 *   W1.   w_i = sampler_exp((a_i - a_{c_0}) * inv_temperature) for every allowed i. mass(t)
 *         and count(t) of a key t: over the allowed entries with key >= t (entry_key: the
 *         candidates' order as an integer), the weights summed in id blocks (wide_measure).
 *   W2.   k = min(top_k, allowed) (all allowed when top_k = 0); t_k = the key of the k-th
 *         best entry; with top-p, M = mass(t_k) and limit = top_p * M, else limit = 0.
 *   W3.   the kept set: entries with key >= t*, t* the largest key with count(t*) >= k or
 *         mass(t*) >= limit (wide_threshold): the k best, or fewer, the smallest prefix whose
 *         mass reaches top_p * M (step 5's rule, measured in id order instead of rank order).
 *   W4.   u = uniform(seed, pos); t = u * mass(t*); the running sum of the kept weights in
 *         wide_measure's order (the sum of the blocks before, plus the block's own running
 *         sum) first exceeds t at the drawn id (whose weight is > 0, as in step 6).
 * Every value is float32; sums are sequential in a fixed order. The capped draw for
 * top_k <= 64 is older than the wide one; their ids for a seed differ, their
 * distributions are the same. */

/* Steps W1-W4 of the wide draw on the penalized logits a (excluded ids NaN), the
 * network's best[0..n_best) and the count of allowed ids; w: n_vocab floats of scratch. */
static lean_status wide_draw(const sampler_cfg *cfg, const float *a, int32_t n_vocab, const cand *best,
                             int32_t n_best, int32_t n_allowed, uint32_t pos, float *w, int32_t *out_id,
                             sample_trace *trace) {
    uint64_t worst = UINT64_MAX;
    for (int32_t i = 0; i < n_vocab; i++) {
        w[i] = 0;
        if (!is_finite_bits(a[i])) continue;
        w[i] = sampler_exp((a[i] - best[0].v) * cfg->inv_temperature);
        const uint64_t key = entry_key(a[i], (uint32_t)i);
        if (key < worst) worst = key;
    }
    const int32_t k = cfg->top_k > 0 && cfg->top_k < n_allowed ? cfg->top_k : n_allowed;
    int32_t count;
    float total = 0, limit = INFINITY;
    if (cfg->use_top_p) {
        const uint64_t t_k = k == n_allowed ? worst : wide_threshold(a, w, n_vocab, best, n_best, worst, k, INFINITY);
        total = wide_measure(a, w, n_vocab, t_k, &count);
        limit = cfg->top_p_f * total;
    }
    const uint64_t t = k == n_allowed && !cfg->use_top_p ? worst
                                                         : wide_threshold(a, w, n_vocab, best, n_best, worst, k, limit);
    const float kept = wide_measure(a, w, n_vocab, t, &count);
    const float u = sampler_uniform(cfg->seed, pos);
    const float target = u * kept;
    int32_t id = -1;
    const cand tb = key_bound(t);
    float before = 0; /* the blocks' sum before this block */
    for (int32_t b = 0; b < n_vocab && id < 0; b += SAMPLER_SUM_BLOCK) {
        const int32_t end = n_vocab - b < SAMPLER_SUM_BLOCK ? n_vocab : b + SAMPLER_SUM_BLOCK;
        float s = 0;
        for (int32_t i = b; i < end && id < 0; i++)
            if (reaches(a[i], (uint32_t)i, tb)) {
                s = s + w[i];
                if (target < before + s) id = i;
            }
        before = before + s;
    }
    if (trace) {
        memset(trace, 0, sizeof *trace);
        trace->wide = true;
        trace->n_cand = k;
        trace->n_kept = count;
        for (int32_t j = 0; j < n_best && j < count; j++) {
            trace->ids[j] = (int32_t)best[j].id;
            trace->logit[j] = best[j].v;
            trace->weight[j] = w[best[j].id];
        }
        const cand last = key_entry(t);
        trace->last_id = (int32_t)last.id;
        trace->last_logit = last.v;
        trace->mass = total;
        trace->kept = kept;
        trace->u = u;
        trace->target = target;
        trace->pick = -1;
        trace->id = id;
    }
    *out_id = id;
    return LEAN_OK;
}

/* The greedy draw: the first id of the largest allowed logit (a scan keeping a[i] > a[best]),
 * in two passes: the maximum in 8 interleaved lanes, then its first id; -1 if none is allowed
 * with a finite logit. One pass chains each element's compare on the previous one's load of
 * a[best] (~10 cycles an id: 10% of a batched decode step of 8 sequences here); ties, -0 and
 * +0 come out the same. Without a mask the first pass has no branch (a non-finite logit
 * counts as -inf, which never raises a lane), so the compiler makes it vector compares. */
static int32_t greedy_id(const float *a, int32_t n_vocab, const uint32_t *mask_bits) {
#define ALLOWED(i) (is_finite_bits(a[i]) && (!mask_bits || lean_mask_allows(mask_bits, (i))))
    float lane[8];
    for (int l = 0; l < 8; l++) lane[l] = -INFINITY;
    int32_t i0 = 0;
    if (!mask_bits)
        for (; i0 + 8 <= n_vocab; i0 += 8)
            for (int l = 0; l < 8; l++) {
                const float v = is_finite_bits(a[i0 + l]) ? a[i0 + l] : -INFINITY;
                lane[l] = v > lane[l] ? v : lane[l];
            }
    for (int32_t i = i0; i < n_vocab; i++)
        if (ALLOWED(i) && a[i] > lane[i % 8]) lane[i % 8] = a[i];
    float top = -INFINITY;
    for (int l = 0; l < 8; l++) top = lane[l] > top ? lane[l] : top;
    int32_t best = -1;
    for (int32_t i = 0; i < n_vocab && top > -INFINITY && best < 0; i++)
        if (a[i] == top && ALLOWED(i)) best = i;
    return best;
#undef ALLOWED
}

lean_status sample_reference(const sampler_cfg *cfg, const float *logits, int32_t n_vocab,
                             const uint32_t *mask_bits, const int32_t *penalty_ids,
                             int32_t n_penalty_ids, uint32_t pos, float *work, int32_t *out_id,
                             sample_trace *trace, lean_error *err) {
    float *a = work;
    /* A greedy draw with nothing to add reads the logits where they are (the copy was a
     * quarter of its time). */
    const bool in_place = cfg->greedy && cfg->n_bias == 0 && !(cfg->use_penalty && n_penalty_ids > 0);
    if (!in_place) memcpy(a, logits, sizeof *a * (size_t)n_vocab);
    for (int32_t i = 0; !in_place && i < cfg->n_bias; i++)
        if (cfg->bias[i].value != 0) /* rule 7: lean_sampler's list has no zeros, sampler_config's may */
            a[cfg->bias[i].id] += cfg->bias[i].value;
    if (cfg->use_penalty && !in_place)
        for (int32_t i = 0; i < n_penalty_ids; i++) {
            const float v = a[penalty_ids[i]];
            a[penalty_ids[i]] = v < 0 ? v * cfg->penalty : v * cfg->inv_penalty;
        }
#define ALLOWED(i) (is_finite_bits(a[i]) && (!mask_bits || lean_mask_allows(mask_bits, (i))))

    if (cfg->greedy) {
        const float *g = in_place ? logits : a;
        const int32_t best = greedy_id(g, n_vocab, mask_bits);
        if (best < 0) return LEAN_FAIL(err, LEAN_ERR_ARG, "no id of %d is allowed with a finite logit", n_vocab);
        if (trace) {
            memset(trace, 0, sizeof *trace);
            trace->n_cand = trace->n_kept = 1;
            trace->ids[0] = best;
            trace->logit[0] = g[best];
            trace->weight[0] = trace->cum[0] = 1.0f;
            trace->id = best;
        }
        *out_id = best;
        return LEAN_OK;
    }

    cand best[SAMPLER_K_CAP], block[SAMPLER_K_CAP];
    const cand sentinel = {-INFINITY, 0xffffffffu};
    for (int j = 0; j < SAMPLER_K_CAP; j++) best[j] = sentinel;
    int32_t n_allowed = 0, nb = 0;
    for (int32_t i = 0; i < n_vocab; i++) {
        if (!ALLOWED(i)) {
            a[i] = NAN; /* the wide draw's test for an allowed id is a finite a_i */
            continue;
        }
        n_allowed++;
        const cand c = {a[i], (uint32_t)i};
        if (!better(c, best[SAMPLER_K_CAP - 1])) continue;
        block[nb++] = c;
        if (nb == SAMPLER_K_CAP) {
            merge_block(best, block);
            nb = 0;
        }
    }
#undef ALLOWED
    if (nb > 0) {
        for (int j = nb; j < SAMPLER_K_CAP; j++) block[j] = sentinel;
        merge_block(best, block);
    }
    if (n_allowed == 0) return LEAN_FAIL(err, LEAN_ERR_ARG, "no id of %d is allowed with a finite logit", n_vocab);

    const int32_t n_best = n_allowed < SAMPLER_K_CAP ? n_allowed : SAMPLER_K_CAP;
    if (cfg->top_k == 0 || cfg->top_k > SAMPLER_K_CAP)
        return wide_draw(cfg, a, n_vocab, best, n_best, n_allowed, pos, work + n_vocab, out_id, trace);
    const int32_t k = cfg->top_k < n_best ? cfg->top_k : n_best;
    float w[SAMPLER_K_CAP], cum[SAMPLER_K_CAP] = {0}; /* k >= 1: {0} only quiets the compiler */
    for (int32_t j = 0; j < k; j++) {
        w[j] = sampler_exp((best[j].v - best[0].v) * cfg->inv_temperature);
        cum[j] = j == 0 ? w[0] : cum[j - 1] + w[j];
    }
    int32_t m = k;
    float total = 0;
    if (cfg->use_top_p) {
        total = cum[k - 1];
        const float limit = cfg->top_p_f * total;
        m = 1;
        while (m < k && cum[m - 1] < limit) m++;
    }
    const float u = sampler_uniform(cfg->seed, pos);
    const float target = u * cum[m - 1];
    int32_t pick = m - 1;
    for (int32_t j = 0; j < m; j++)
        if (target < cum[j]) {
            pick = j;
            break;
        }
    if (trace) {
        memset(trace, 0, sizeof *trace);
        trace->n_cand = k;
        trace->n_kept = m;
        for (int32_t j = 0; j < k; j++) {
            trace->ids[j] = (int32_t)best[j].id;
            trace->logit[j] = best[j].v;
            trace->weight[j] = w[j];
            trace->cum[j] = cum[j];
        }
        trace->mass = total;
        trace->u = u;
        trace->target = target;
        trace->pick = pick;
        trace->id = (int32_t)best[pick].id;
    }
    *out_id = (int32_t)best[pick].id;
    return LEAN_OK;
}

static bool same_bits(float a, float b) {
    uint32_t x, y;
    memcpy(&x, &a, sizeof x);
    memcpy(&y, &b, sizeof y);
    return x == y;
}

bool sample_trace_same(const sample_trace *a, const sample_trace *b, char *msg, size_t cap) {
    if (a->wide != b->wide || a->n_cand != b->n_cand || a->n_kept != b->n_kept || a->pick != b->pick || a->id != b->id) {
        snprintf(msg, cap, "wide %d/%d, candidates %d/%d, kept %d/%d, pick %d/%d, id %d/%d", a->wide, b->wide,
                 a->n_cand, b->n_cand, a->n_kept, b->n_kept, a->pick, b->pick, a->id, b->id);
        return false;
    }
    if (!same_bits(a->u, b->u) || !same_bits(a->target, b->target) || !same_bits(a->mass, b->mass) ||
        !same_bits(a->kept, b->kept)) {
        snprintf(msg, cap, "u %a/%a, target %a/%a, top-p's mass %a/%a, kept mass %a/%a", a->u, b->u, a->target,
                 b->target, a->mass, b->mass, a->kept, b->kept);
        return false;
    }
    if (a->last_id != b->last_id || !same_bits(a->last_logit, b->last_logit)) {
        snprintf(msg, cap, "the worst kept entry: id %d/%d, logit %a/%a", a->last_id, b->last_id, a->last_logit,
                 b->last_logit);
        return false;
    }
    const int32_t n = a->wide ? (a->n_kept < SAMPLER_K_CAP ? a->n_kept : SAMPLER_K_CAP) : a->n_cand;
    for (int32_t j = 0; j < n && j < SAMPLER_K_CAP; j++)
        if (a->ids[j] != b->ids[j] || !same_bits(a->logit[j], b->logit[j]) || !same_bits(a->weight[j], b->weight[j]) ||
            !same_bits(a->cum[j], b->cum[j])) {
            snprintf(msg, cap, "candidate %d: id %d/%d, logit %a/%a, weight %a/%a, running sum %a/%a", j, a->ids[j],
                     b->ids[j], a->logit[j], b->logit[j], a->weight[j], b->weight[j], a->cum[j], b->cum[j]);
            return false;
        }
    return true;
}

/* ================================================================ 6. the handle
 *
 * The history holds accepted ids (only while the penalty is on). With repeat_last_n >= 0
 * only the last repeat_last_n matter; older ones are dropped when the array would grow.
 * Before each draw the window's distinct ids are listed (a generation stamp per vocabulary
 * id dedupes in O(window)). */

struct lean_sampler {
    sampler_cfg cfg;
    int32_t n_vocab;
    int32_t *hist;      /* accepted ids, oldest first */
    size_t n_hist, cap_hist;
    uint32_t *stamp;    /* (n_vocab) the generation that last listed each id */
    uint32_t gen;
    int32_t *distinct;  /* (n_vocab) the window's distinct ids */
    float *work;        /* (SAMPLER_WORK_FLOATS) penalized logits, the wide draw's weights */
    lean_logit_bias *bias; /* (cfg.n_bias) the params' bias, sorted by id, zeros dropped; cfg.bias */
    lean_grammar *grammar; /* nullable, not owned: every draw is masked by it and moves it on */
    uint32_t *gbits;    /* (LEAN_MASK_WORDS(n_vocab)) the grammar's mask, and the caller's */
};

static int cmp_bias_id(const void *a, const void *b) {
    const int32_t x = ((const lean_logit_bias *)a)->id, y = ((const lean_logit_bias *)b)->id;
    return (x > y) - (x < y);
}

/* cfg's bias list (checked by sampler_config but for the vocabulary) into out, sorted by id,
 * entries of value 0 dropped; cfg->n_bias becomes their count. LEAN_ERR_ARG for an id past
 * n_vocab or listed twice. */
static lean_status copy_bias(sampler_cfg *cfg, int32_t n_vocab, lean_logit_bias *out, lean_error *err) {
    lean_status st = sampler_check_bias(cfg->bias, cfg->n_bias, n_vocab, err);
    if (st != LEAN_OK) return st;
    if (cfg->n_bias > 0) memcpy(out, cfg->bias, sizeof *out * (size_t)cfg->n_bias);
    qsort(out, (size_t)cfg->n_bias, sizeof *out, cmp_bias_id);
    int32_t n = 0;
    for (int32_t i = 0; i < cfg->n_bias; i++) {
        if (i > 0 && out[i].id == out[i - 1].id)
            return LEAN_FAIL(err, LEAN_ERR_ARG, "logit_bias: id %d is listed twice", out[i].id);
        if (out[i].value != 0) out[n++] = out[i];
    }
    cfg->n_bias = n;
    return LEAN_OK;
}

/* A seed for LEAN_SEED_RANDOM from the clock, an address and a counter (splitmix64). */
static uint64_t pick_seed(const void *addr) {
    static uint64_t counter;
    uint64_t x = (uint64_t)time(NULL) ^ ((uint64_t)(uintptr_t)addr << 16) ^ (++counter * 0x9E3779B97F4A7C15u);
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9u;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBu;
    x ^= x >> 31;
    return x == LEAN_SEED_RANDOM ? 0 : x;
}

lean_status lean_sampler_create(const lean_sampler_params *p, int32_t n_vocab, lean_sampler **out,
                                lean_error *err) {
    if (!out) return LEAN_FAIL(err, LEAN_ERR_ARG, "lean_sampler_create: out is NULL");
    *out = NULL;
    if (n_vocab < 1) return LEAN_FAIL(err, LEAN_ERR_ARG, "n_vocab %d: must be >= 1", n_vocab);
    sampler_cfg cfg;
    lean_status st = sampler_config(p, &cfg, err);
    if (st != LEAN_OK) return st;
    lean_sampler *s = lean_calloc(1, sizeof *s);
    if (!s) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "allocating the sampler");
    s->cfg = cfg;
    s->n_vocab = n_vocab;
    if (s->cfg.seed == LEAN_SEED_RANDOM) s->cfg.seed = pick_seed(s);
    s->stamp = lean_calloc((size_t)n_vocab, sizeof *s->stamp);
    s->distinct = lean_calloc((size_t)n_vocab, sizeof *s->distinct);
    s->work = lean_calloc(SAMPLER_WORK_FLOATS(n_vocab), sizeof *s->work);
    s->bias = lean_malloc(sizeof *s->bias * (size_t)(cfg.n_bias > 0 ? cfg.n_bias : 1));
    if (!s->stamp || !s->distinct || !s->work || !s->bias) {
        lean_sampler_free(s);
        return LEAN_FAIL(err, LEAN_ERR_NOMEM, "sampler scratch for %d ids", n_vocab);
    }
    st = copy_bias(&cfg, n_vocab, s->bias, err);
    if (st != LEAN_OK) {
        lean_sampler_free(s);
        return st;
    }
    s->cfg.bias = s->bias;
    s->cfg.n_bias = cfg.n_bias;
    *out = s;
    return LEAN_OK;
}

void lean_sampler_free(lean_sampler *s) {
    if (!s) return;
    lean_free(s->hist);
    lean_free(s->stamp);
    lean_free(s->distinct);
    lean_free(s->work);
    lean_free(s->bias);
    lean_free(s->gbits);
    lean_free(s);
}

lean_status lean_sampler_set_grammar(lean_sampler *s, lean_grammar *g, lean_error *err) {
    if (!s) return LEAN_FAIL(err, LEAN_ERR_ARG, "lean_sampler_set_grammar: NULL sampler");
    if (g && !s->gbits && !(s->gbits = lean_malloc(LEAN_MASK_WORDS(s->n_vocab) * sizeof *s->gbits)))
        return LEAN_FAIL(err, LEAN_ERR_NOMEM, "out of memory");
    s->grammar = g;
    return LEAN_OK;
}

const lean_grammar *sampler_grammar(const lean_sampler *s) { return s->grammar; }

void lean_sampler_reset(lean_sampler *s) {
    if (s) s->n_hist = 0;
}

uint64_t lean_sampler_seed(const lean_sampler *s) { return s ? s->cfg.seed : 0; }

const sampler_cfg *sampler_get_cfg(const lean_sampler *s) { return &s->cfg; }
int32_t sampler_n_vocab(const lean_sampler *s) { return s->n_vocab; }

const int32_t *sampler_history(const lean_sampler *s, int32_t *n) {
    *n = (int32_t)s->n_hist;
    return s->hist;
}

lean_status lean_sampler_accept(lean_sampler *s, const int32_t *ids, int32_t n, lean_error *err) {
    if (!s) return LEAN_FAIL(err, LEAN_ERR_ARG, "lean_sampler_accept: NULL sampler");
    if (n < 0 || (n > 0 && !ids))
        return LEAN_FAIL(err, LEAN_ERR_ARG, "lean_sampler_accept: %d ids%s", n, n < 0 ? "" : " but ids is NULL");
    for (int32_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= s->n_vocab)
            return LEAN_FAIL(err, LEAN_ERR_ARG, "ids[%d] = %d is outside the vocabulary [0, %d)", i, ids[i],
                             s->n_vocab);
    if (!s->cfg.use_penalty || n == 0) return LEAN_OK;
    const int32_t last_n = s->cfg.repeat_last_n;
    if (last_n >= 0 && n >= last_n) { /* the window is only new ids */
        ids += n - last_n;
        n = last_n;
        s->n_hist = 0;
    }
    if (s->n_hist + (size_t)n > s->cap_hist) {
        if (last_n >= 0 && s->n_hist > (size_t)last_n) { /* drop what the window no longer sees */
            memmove(s->hist, s->hist + (s->n_hist - (size_t)last_n), sizeof *s->hist * (size_t)last_n);
            s->n_hist = (size_t)last_n;
        }
        if (s->n_hist + (size_t)n > s->cap_hist) {
            size_t cap = s->cap_hist ? s->cap_hist : 256;
            while (cap < s->n_hist + (size_t)n) cap *= 2;
            int32_t *h = lean_realloc(s->hist, sizeof *h * cap);
            if (!h) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "sampler history of %zu ids", cap);
            s->hist = h;
            s->cap_hist = cap;
        }
    }
    memcpy(s->hist + s->n_hist, ids, sizeof *ids * (size_t)n);
    s->n_hist += (size_t)n;
    return LEAN_OK;
}

lean_status lean_sampler_sample(lean_sampler *s, const float *logits, int32_t pos, const lean_mask *mask,
                                int32_t *out_id, lean_error *err) {
    if (!s || !logits || !out_id) return LEAN_FAIL(err, LEAN_ERR_ARG, "lean_sampler_sample: NULL argument");
    if (pos < 0) return LEAN_FAIL(err, LEAN_ERR_ARG, "position %d: must be >= 0", pos);
    if (mask && (!mask->bits || mask->n_vocab != s->n_vocab))
        return LEAN_FAIL(err, LEAN_ERR_ARG, "mask of %d ids%s for a sampler of %d", mask->n_vocab,
                         mask->bits ? "" : " (bits NULL)", s->n_vocab);
    int32_t n_distinct = 0;
    if (s->cfg.use_penalty && s->n_hist > 0) {
        if (++s->gen == 0) { /* wrapped: forget every stamp */
            memset(s->stamp, 0, sizeof *s->stamp * (size_t)s->n_vocab);
            s->gen = 1;
        }
        const int32_t last_n = s->cfg.repeat_last_n;
        size_t start = last_n >= 0 && s->n_hist > (size_t)last_n ? s->n_hist - (size_t)last_n : 0;
        for (size_t i = s->n_hist; i-- > start;) {
            const int32_t id = s->hist[i];
            if (s->stamp[id] != s->gen) {
                s->stamp[id] = s->gen;
                s->distinct[n_distinct++] = id;
            }
        }
    }
    const uint32_t *bits;
    lean_status st = sampler_grammar_mask(s, mask, &bits, err);
    if (st == LEAN_OK)
        st = sample_reference(&s->cfg, logits, s->n_vocab, bits, s->distinct, n_distinct, (uint32_t)pos, s->work,
                              out_id, NULL, err);
    if (st == LEAN_OK) st = sampler_grammar_take(s, *out_id, err);
    return st;
}

lean_status sampler_check_mask(int32_t n_vocab, const lean_mask *mask, const char *who, lean_error *err) {
    const int32_t V = n_vocab;
    if (!mask->bits) return LEAN_FAIL(err, LEAN_ERR_ARG, "%s: the mask's bits are NULL", who);
    if (mask->n_vocab != V)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "%s: a mask of %d ids for a vocabulary of %d", who, mask->n_vocab, V);
    const size_t words = LEAN_MASK_WORDS(V);
    const uint32_t past = V % 32 ? ~0u << (V % 32) : 0; /* the last word's bits past n_vocab */
    if (mask->bits[words - 1] & past)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "%s: the mask allows id %d, past the vocabulary of %d", who,
                         (int32_t)(32 * (words - 1)) + __builtin_ctz(mask->bits[words - 1] & past), V);
    for (size_t w = 0; w < words; w++)
        if (mask->bits[w]) return LEAN_OK;
    return LEAN_FAIL(err, LEAN_ERR_ARG, "%s: the mask allows no id (all %d bits clear)", who, V);
}

lean_status sampler_grammar_mask(lean_sampler *s, const lean_mask *mask, const uint32_t **bits, lean_error *err) {
    *bits = mask ? mask->bits : NULL;
    if (!s->grammar) return LEAN_OK;
    /* the grammar's mask, and the caller's too */
    lean_status st = lean_grammar_mask(s->grammar, s->gbits, s->n_vocab, NULL, err);
    if (st != LEAN_OK) return st;
    if (mask)
        for (size_t w = 0; w < LEAN_MASK_WORDS(s->n_vocab); w++) s->gbits[w] &= mask->bits[w];
    *bits = s->gbits;
    return LEAN_OK;
}

lean_status sampler_grammar_take(lean_sampler *s, int32_t id, lean_error *err) {
    return s->grammar ? lean_grammar_accept_token(s->grammar, id, err) : LEAN_OK;
}
