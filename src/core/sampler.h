/* sampler.h — the sampler's internals, exposed for tests (tests/test_sampler.c) and for the
 * GPU backend (src/gpu/sample.c), which reproduces sample_reference bit for bit.
 *
 * Two computations live in sampler.c:
 *
 *   hf_*            transformers' logits processors, transcribed in float32 with torch's CPU
 *                   rounding (RepetitionPenalty, Temperature, TopK, TopP). They define what
 *                   the distribution *is*; tests hold them to transformers' own output bit
 *                   for bit. Nothing at run time samples through them.
 *   sample_reference the resident computation every backend reproduces: multiplications,
 *                   additions and comparisons on float32, a fixed polynomial exp, top-k by a
 *                   comparison network, and Philox4x32-10 keyed by (seed, position). It draws
 *                   from the same distribution as transformers (up to float32 rounding; see
 *                   sampler.c for every deviation) with a different random stream.
 */
#ifndef LEAN_SAMPLER_H
#define LEAN_SAMPLER_H

#include "core/common.h"

/* The candidates the top-k network keeps: 1 <= top_k <= 64 draws among them (the capped
 * draw); top_k = 0 (off) or > 64 draws over the whole vocabulary (the wide draw, sampler.c). */
#define SAMPLER_K_CAP 64
/* Ids per partial sum in the wide draw's masses (sampler.c, wide_measure). */
#define SAMPLER_SUM_BLOCK 256
/* Floats of scratch sample_reference needs for n_vocab ids. */
#define SAMPLER_WORK_FLOATS(n_vocab) (2 * (size_t)(n_vocab))

/* The validated parameters in the form both computations use. Where torch rounds a Python
 * float to float32 before using it, the float32 value is kept here. */
typedef struct sampler_cfg {
    bool greedy;          /* params.greedy or temperature == 0: argmax after penalty and mask */
    bool use_penalty;     /* repeat_penalty != 1 and repeat_last_n != 0 */
    float penalty;        /* (float)repeat_penalty: torch's scalar in score * penalty */
    float inv_penalty;    /* fl(1 / penalty): sample_reference multiplies instead of dividing */
    float temperature;    /* (float)temperature: torch's scalar in scores / temperature */
    float inv_temperature;/* fl(1 / temperature) (1 when greedy) */
    int32_t top_k;        /* 0 = off */
    bool use_top_p;       /* top_p < 1 */
    double top_p;         /* as given: transformers' threshold is (float)(1.0 - top_p) */
    float top_p_f;        /* (float)top_p: sample_reference's p */
    int32_t repeat_last_n;/* -1 = the whole history */
    uint64_t seed;        /* resolved (never LEAN_SEED_RANDOM) */
    const lean_logit_bias *bias; /* n_bias (id, value): value added to x[id] first; not owned:
                           * the params' list from sampler_config, the lean_sampler's copy
                           * (ids checked, sorted, no zeros) in sampler_get_cfg */
    int32_t n_bias;
} sampler_cfg;

/* Checks a logit bias list of n entries: n >= 0, the list there when n > 0, each id >= 0 and
 * (n_vocab > 0) below n_vocab, each value finite in [-100, 100]. Every check of a bias list
 * is this one (sampler_config, lean_sampler_create, gpu_sampler_set_bias). */
lean_status sampler_check_bias(const lean_logit_bias *bias, int32_t n, int32_t n_vocab, lean_error *err);

/* Checks p (every range, with the value in the message) and fills *out. A random seed
 * request stays LEAN_SEED_RANDOM in out->seed; lean_sampler_create resolves it. */
lean_status sampler_config(const lean_sampler_params *p, sampler_cfg *out, lean_error *err);

/* A lean_sampler's settings (the seed resolved) and its penalty history: the accepted ids,
 * oldest first, of which the window is the last repeat_last_n (none kept when the penalty is
 * off). What a resident sampler on another device is set up from (session.c). */
const sampler_cfg *sampler_get_cfg(const lean_sampler *s);
const int32_t *sampler_history(const lean_sampler *s, int32_t *n);
int32_t sampler_n_vocab(const lean_sampler *s);
/* The grammar set with lean_sampler_set_grammar, or NULL. */
const lean_grammar *sampler_grammar(const lean_sampler *s);
/* The two halves of a draw under the grammar, for a draw made elsewhere (a resident generation
 * on the GPU, session.c): sampler_grammar_mask writes the grammar's mask for the next draw (and
 * with the caller's mask, nullable, both) into the sampler's own words and points *bits at them
 * (valid until the next call on s); *bits NULL without a grammar (and without mask); the
 * grammar's LEAN_ERR_ARG at a dead end. sampler_grammar_take moves the grammar on by the id
 * drawn (nothing without a grammar). lean_sampler_sample is these around sample_reference. */
lean_status sampler_grammar_mask(lean_sampler *s, const lean_mask *mask, const uint32_t **bits, lean_error *err);
/* LEAN_OK when mask fits a vocabulary of n_vocab ids (lean.h, lean_gen_next_masked: its n_vocab,
 * bits not NULL, no bit past n_vocab, some bit set); else LEAN_ERR_ARG, the message led by who. */
lean_status sampler_check_mask(int32_t n_vocab, const lean_mask *mask, const char *who, lean_error *err);
lean_status sampler_grammar_take(lean_sampler *s, int32_t id, lean_error *err);

/* ---- transformers' processors, in place on x[n_vocab] (float32, torch CPU semantics) ---- */

/* SequenceBiasLogitsProcessor with one-id sequences: x[id] = x[id] + value for each entry. */
void hf_logit_bias(float *x, const lean_logit_bias *bias, int32_t n_bias);
/* RepetitionPenaltyLogitsProcessor: for every distinct id in ids[0..n_ids) (duplicates are
 * harmless: gather/scatter penalizes each id once), x = x < 0 ? x * penalty : x / penalty.
 * O(n_ids^2) deduplication: a test reference, not a run-time path. */
void hf_repetition_penalty(float *x, int32_t n_vocab, const int32_t *ids, int32_t n_ids, float penalty);
/* TemperatureLogitsWarper: x = x / temperature. */
void hf_temperature(float *x, int32_t n_vocab, float temperature);
/* TopKLogitsWarper: x = -inf where x < the k-th largest value (ties at it are all kept).
 * Allocates a copy of x; LEAN_ERR_NOMEM only. */
lean_status hf_top_k(float *x, int32_t n_vocab, int32_t k, lean_error *err);
/* TopPLogitsWarper (min_tokens_to_keep 1): sorts ascending (ties: lower id first), removes
 * ids whose cumulative probability is <= (float)(1 - top_p), keeps the last. Probabilities
 * are float32 roundings of a double-precision softmax, summed in double as torch's CPU
 * cumsum does. Allocates; LEAN_ERR_NOMEM only. */
lean_status hf_top_p(float *x, int32_t n_vocab, double top_p, lean_error *err);
/* The whole chain as transformers' generate() builds it for these settings: the logit bias,
 * masked-out ids set to -inf (mask_bits nullable), penalty (if on), then, unless greedy,
 * temperature, top-k (if top_k > 0) and top-p (if top_p < 1). history: the penalty's window. */
lean_status hf_process(const sampler_cfg *cfg, float *x, int32_t n_vocab, const uint32_t *mask_bits,
                       const int32_t *history, int32_t n_history, lean_error *err);
/* p = softmax(x) in double (p = 0 where x = -inf). All -inf: p = 0 everywhere. */
void softmax_f64(const float *x, int32_t n, double *p);

/* ---- the resident computation ---- */

/* Philox4x32-10 (Salmon et al., SC'11; Random123's philox4x32_R(10, ctr, key)), written
 * with 32-bit operations only (mulhi from 16-bit halves) exactly as WGSL must write it. */
void philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);
/* The high and low 32 bits of a * b, from u32 multiplies, adds and shifts only. */
uint32_t sampler_mulhilo32(uint32_t a, uint32_t b, uint32_t *hi);
/* The draw's uniform for (seed, position): word 0 of Philox(ctr = {pos, 0, 0, 0},
 * key = {seed low, seed high}), top 24 bits * 2^-24. In [0, 1), a multiple of 2^-24. */
float sampler_uniform(uint64_t seed, uint32_t pos);
/* exp(d) for d <= 0 by range reduction and a fixed polynomial (sampler.c, section 3):
 * 0 for d < -86 (and -inf, NaN); never a subnormal; sampler_exp(0) == 1 exactly. */
float sampler_exp(float d);

/* What sample_reference saw, for tests (and for comparing a GPU's read-back). */
typedef struct sample_trace {
    bool wide;                     /* the wide draw (top_k 0 or > 64), else the capped one */
    int32_t n_cand;                /* candidates after top-k (capped: <= SAMPLER_K_CAP; wide: k) */
    int32_t n_kept;                /* of those, kept by top-p (a prefix) */
    int32_t ids[SAMPLER_K_CAP];    /* candidates, best first (logit desc, then id asc); wide: the
                                    * first min(n_kept, 64) kept */
    float logit[SAMPLER_K_CAP];    /* their penalized logits */
    float weight[SAMPLER_K_CAP];   /* sampler_exp((logit - logit[0]) * inv_temperature) */
    float cum[SAMPLER_K_CAP];      /* capped: running sums of weight, in order (wide: 0) */
    float mass;                    /* the mass top-p measured the kept set against (0: top-p off) */
    float kept;                    /* wide: the kept set's mass (capped: 0) */
    int32_t last_id;               /* wide: the worst kept entry (the threshold), id and logit */
    float last_logit;
    float u, target;               /* the uniform and u * the kept mass */
    int32_t pick;                  /* capped: index into ids of the drawn id (wide: -1) */
    int32_t id;                    /* the drawn id */
} sample_trace;

/* Whether two traces are the same bit for bit (counts, pick, ids, every float's bits, up to
 * each one's n_cand); if not, the first difference, in words, goes to msg (cap bytes). For
 * holding another backend's sampler to sample_reference. */
bool sample_trace_same(const sample_trace *a, const sample_trace *b, char *msg, size_t cap);

/* The resident sampler: x = logits + bias (cfg->bias; an entry of value 0 adds nothing, so -0
 * stays -0), then the penalty, the mask, the draw. logits[n_vocab] are read, never written; work holds
 * SAMPLER_WORK_FLOATS(n_vocab) floats (scratch). penalty_ids: the distinct ids of the penalty window. mask_bits (nullable): a
 * packed bitset of allowed ids. pos: the position keying the random draw (the position the
 * drawn token will occupy). trace (nullable) receives the intermediate values.
 * LEAN_ERR_ARG when no id is allowed and finite. */
lean_status sample_reference(const sampler_cfg *cfg, const float *logits, int32_t n_vocab,
                             const uint32_t *mask_bits, const int32_t *penalty_ids,
                             int32_t n_penalty_ids, uint32_t pos, float *work, int32_t *out_id,
                             sample_trace *trace, lean_error *err);

#endif
