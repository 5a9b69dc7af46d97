/* test_gpu_sample.c — GPU-resident sampling (src/gpu/sample.c, shaders/sample_*.wgsl) against
 * the CPU's sample_reference (src/core/sampler.c), on whatever adapter lean_gpu_open finds (in
 * CI: Dawn over Mesa llvmpipe).
 * lean-test: webgpu (in wasm32 only the webgpu stage runs it: a JavaScript host with WebGPU)
 *
 * Every check is bit for bit: the id, and the trace (candidates and their penalized logits,
 * weights, running sums, kept count, top-p's mass, uniform, target, pick).
 *   one draw     for each vocabulary size (1 .. 151936, ragged ones), logits kind (random,
 *                ties at the k-th logit and at the argmax, -inf / NaN masked entries, all
 *                equal, +-0, nothing allowed) and sampling setting (greedy, temperature only,
 *                top-k 1/40/63/64 x top-p 0.5/0.95/1, penalties with a history; the wide draw:
 *                top-k 0/65/100, flat and peaked, with and without top-p), at seeds and
 *                positions drawn per case; the logits sit at an unaligned offset of their buffer.
 *   many steps   a resident sequence: the GPU keeps its own position and penalty window across
 *                steps (no host writes but the logits), the CPU's lean_sampler accepts each id;
 *                windows shorter and longer than the run, and the whole history.
 *   seeds        one setting of each draw, many seeds x positions on one logits vector.
 *   masks        gpu_sampler_set_mask (lean_mask's bitset, as a grammar writes it): grammar-like
 *                sparse masks, half the vocabulary, one id, the ragged last word, bits past
 *                n_vocab, only non-finite logits allowed (no id), for greedy, capped, wide and
 *                penalized draws; then the mask turned off again.
 *   rows         gpu_sampler_rows (a draw per row of one logits buffer, one dispatch a level for
 *                all rows): each row's id is its own sampler's, each row its own setting,
 *                seed, position and logits; penalties and the wide draw are not taken.
 *   check        gpu_sampler_check passes on this adapter (it compares with the CPU itself).
 *   errors       create/reset with bad arguments fail with a message.
 */
#include "test.h"

#include "gpu/sample.h"
#include "tiny_model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static lean_gpu *G;

/* ---- data ---- */

static uint64_t rng_state = 0x243f6a8885a308d3ull;
static uint32_t rnd(void) { return (uint32_t)(tiny_rng(&rng_state) >> 32); }
static float rnd_unit(void) { return (float)rnd() / 2147483648.0f - 1.0f; } /* [-1, 1) */

enum { L_RANDOM, L_TIES, L_MASKED, L_EQUAL, L_ZEROS, L_NONE, L_KINDS };
static const char *const kind_name[L_KINDS] = {"random", "ties", "masked", "equal", "zeros", "none"};

/* Logits of one kind. ties: few distinct values, so the k-th logit and the maximum are shared
 * by many ids; zeros: +0 and -0 (equal as floats) among negatives. */
static void make_logits(float *x, int32_t n, int kind) {
    for (int32_t i = 0; i < n; i++) {
        switch (kind) {
        case L_RANDOM: x[i] = 8.0f * rnd_unit(); break;
        case L_TIES: x[i] = (float)(rnd() % 7) * 0.75f - 2.0f; break;
        case L_MASKED: {
            const uint32_t r = rnd() % 10;
            x[i] = r < 3 ? -INFINITY : r == 3 ? NAN : r == 4 ? INFINITY : 5.0f * rnd_unit();
            break;
        }
        case L_EQUAL: x[i] = 1.25f; break;
        case L_ZEROS: x[i] = rnd() % 3 == 0 ? -0.5f * (float)(rnd() % 4) : (rnd() & 1 ? 0.0f : -0.0f); break;
        default: x[i] = -INFINITY; break;
        }
    }
}

/* ---- one GPU sampler over fresh buffers ---- */

#define LOGITS_OFF_BYTES 12 /* unaligned on purpose: the sampler binds from an aligned offset */
#define OUT_INDEX 3

typedef struct rig {
    lean_gpu_buf *logits, *out;
    gpu_sampler *s;
} rig;

static bool rig_make(rig *r, const sampler_cfg *cfg, int32_t n_vocab) {
    lean_error err;
    *r = (rig){0};
    lean_status st = lean_gpu_buf_create(G, LOGITS_OFF_BYTES + 4 * (uint64_t)n_vocab + 20, LEAN_GPU_STORAGE,
                                         "test logits", &r->logits, &err);
    if (st == LEAN_OK) st = lean_gpu_buf_create(G, 4 * (OUT_INDEX + 2), LEAN_GPU_STORAGE, "test ids", &r->out, &err);
    if (st == LEAN_OK) st = gpu_sampler_create(G, cfg, n_vocab, r->logits, LOGITS_OFF_BYTES, r->out, OUT_INDEX, &r->s, &err);
    CHECK(st == LEAN_OK, "making a GPU sampler for %d ids: %s", n_vocab, err.msg);
    return st == LEAN_OK;
}

static void rig_free(rig *r) {
    gpu_sampler_free(r->s);
    lean_gpu_buf_free(r->logits);
    lean_gpu_buf_free(r->out);
}

/* Writes the logits and records, submits and reads back one draw. */
static bool gpu_draw(rig *r, const float *x, int32_t n_vocab, uint32_t *id) {
    lean_error err;
    lean_gpu_cmd *c = NULL;
    lean_status st = lean_gpu_buf_write(G, r->logits, LOGITS_OFF_BYTES, x, 4 * (uint64_t)n_vocab, &err);
    if (st == LEAN_OK) st = lean_gpu_begin(G, &c, &err);
    if (st == LEAN_OK) {
        gpu_sampler_record(c, r->s);
        st = lean_gpu_submit(c, &err);
    }
    if (st == LEAN_OK) st = lean_gpu_buf_read(G, r->out, 4 * OUT_INDEX, id, 4, &err);
    CHECK(st == LEAN_OK, "a GPU draw over %d ids: %s", n_vocab, err.msg);
    return st == LEAN_OK;
}

/* One draw on both sides for (logits, mask (nullable), history, pos): gpu_sampler_compare. */
static bool compare_masked(const char *what, rig *r, const float *x, const uint32_t *mask, int32_t n_vocab,
                           const int32_t *hist, int32_t n_hist, uint32_t pos, float *work) {
    lean_error err;
    lean_status st = lean_gpu_buf_write(G, r->logits, LOGITS_OFF_BYTES, x, 4 * (uint64_t)n_vocab, &err);
    if (st == LEAN_OK) st = gpu_sampler_compare(r->s, x, mask, hist, n_hist, pos, work, &err);
    CHECK(st == LEAN_OK, "%s: %s", what, err.msg);
    return st == LEAN_OK || st == LEAN_ERR_UNSUPPORTED; /* a difference: go on with the next case */
}

/* One draw on both sides for (logits, history, pos), no mask. */
static bool compare_draw(const char *what, rig *r, const float *x, int32_t n_vocab, const int32_t *hist,
                         int32_t n_hist, uint32_t pos, float *work) {
    return compare_masked(what, r, x, NULL, n_vocab, hist, n_hist, pos, work);
}

/* ---- settings ---- */

static lean_sampler_params params_of(double temp, int32_t top_k, double top_p, double penalty, int32_t last_n,
                                     uint64_t seed) {
    lean_sampler_params p = lean_sampler_default_params();
    p.temperature = temp;
    p.top_k = top_k;
    p.top_p = top_p;
    p.repeat_penalty = penalty;
    p.repeat_last_n = last_n;
    p.seed = seed;
    return p;
}

static sampler_cfg cfg_of(double temp, int32_t top_k, double top_p, double penalty, int32_t last_n, uint64_t seed) {
    const lean_sampler_params p = params_of(temp, top_k, top_p, penalty, last_n, seed);
    sampler_cfg c;
    lean_error err;
    CHECK(sampler_config(&p, &c, &err) == LEAN_OK, "settings: %s", err.msg);
    return c;
}

typedef struct setting {
    double temp;
    int32_t top_k;
    double top_p, penalty;
    int32_t last_n;
} setting;

static const setting settings[] = {
    {0, 0, 1, 1, 64},      /* greedy */
    {0, 40, 0.9, 1.3, 8},  /* greedy with a penalty (top-k/p ignored) */
    {1.0, 64, 1, 1, 64},   /* temperature only, among the 64 best */
    {0.7, 64, 1, 1, 64},   {1.0, 1, 1, 1, 64},     {0.8, 40, 1, 1, 64},   {0.8, 40, 0.95, 1, 64},
    {0.8, 40, 0.5, 1, 64}, {1.3, 64, 0.95, 1, 64}, {0.8, 63, 1, 1, 64},   {0.8, 63, 0.95, 1, 64},
    {1.0, 64, 0.5, 1, 64}, {0.6, 1, 0.5, 1, 64},   {0.8, 40, 0.95, 1.3, 8}, {0.8, 64, 0.95, 0.8, -1},
    {1.0, 50, 1, 1.5, 64},
    /* the wide draw: top-k 0 or above 64, over the whole vocabulary */
    {1.0, 0, 1, 1, 64},    {0.8, 100, 1, 1, 64},  {0.8, 100, 0.95, 1, 64}, {0.8, 0, 0.95, 1, 64},
    {1.0, 0, 0.5, 1, 64},  {8.0, 0, 0.95, 1, 64}, {0.8, 0, 0.95, 0.8, -1}, {1.0, 100, 1, 1.5, 64},
    {3.0, 65, 0.9, 1.2, 8},
};
#define N_SETTINGS ((int)(sizeof settings / sizeof settings[0]))

/* ---- the tests ---- */

/* A history of n ids in [0, n_vocab), often repeating. */
static void make_history(int32_t *h, int32_t n, int32_t n_vocab) {
    for (int32_t i = 0; i < n; i++) h[i] = i > 0 && rnd() % 3 == 0 ? h[rnd() % (uint32_t)i] : (int32_t)(rnd() % (uint32_t)n_vocab);
}

static void test_draws(int32_t n_vocab) {
    float *x = malloc(sizeof *x * (size_t)n_vocab), *work = malloc(sizeof *work * SAMPLER_WORK_FLOATS(n_vocab));
    int32_t hist[40];
    for (int si = 0; si < N_SETTINGS; si++) {
        const setting *t = &settings[si];
        const uint64_t seed = ((uint64_t)rnd() << 32) | rnd();
        const sampler_cfg cfg = cfg_of(t->temp, t->top_k, t->top_p, t->penalty, t->last_n, seed);
        rig r;
        if (!rig_make(&r, &cfg, n_vocab)) break;
        for (int kind = 0; kind < L_KINDS; kind++) {
            make_logits(x, n_vocab, kind);
            const int32_t n_hist = (int32_t)(rnd() % 40);
            make_history(hist, n_hist, n_vocab);
            char what[160];
            snprintf(what, sizeof what, "n_vocab %d, %s logits, temp %g top-k %d top-p %g penalty %g/%d, seed %llx",
                     n_vocab, kind_name[kind], t->temp, t->top_k, t->top_p, t->penalty, t->last_n,
                     (unsigned long long)seed);
            if (!compare_draw(what, &r, x, n_vocab, hist, n_hist, rnd() % 100000, work)) break;
        }
        rig_free(&r);
    }
    free(x);
    free(work);
}

/* Steps without resets: the GPU's own position and window against lean_sampler's. */
static void test_resident(int32_t n_vocab, int32_t last_n, int steps) {
    const sampler_cfg cfg = cfg_of(1.0, 40, 0.95, 1.4, last_n, 0x5eedull);
    const lean_sampler_params p = params_of(1.0, 40, 0.95, 1.4, last_n, 0x5eedull);
    lean_sampler *cpu = NULL;
    lean_error err;
    rig r;
    if (!rig_make(&r, &cfg, n_vocab)) return;
    CHECK(lean_sampler_create(&p, n_vocab, &cpu, &err) == LEAN_OK, "lean_sampler_create: %s", err.msg);
    float *x = malloc(sizeof *x * (size_t)n_vocab);
    int32_t prompt[12];
    make_history(prompt, 12, n_vocab);
    const uint32_t pos0 = 12;
    CHECK(lean_sampler_accept(cpu, prompt, 12, &err) == LEAN_OK, "accept: %s", err.msg);
    CHECK(gpu_sampler_reset(r.s, pos0, prompt, 12, &err) == LEAN_OK, "reset: %s", err.msg);
    int mismatches = 0;
    for (int s = 0; s < steps; s++) {
        /* few distinct values near the top, so recent ids (penalized) change the candidates */
        for (int32_t i = 0; i < n_vocab; i++) x[i] = (float)(rnd() % 5) + 0.25f * rnd_unit();
        uint32_t gid;
        int32_t cid = -1;
        if (!gpu_draw(&r, x, n_vocab, &gid)) break;
        CHECK(lean_sampler_sample(cpu, x, (int32_t)(pos0 + (uint32_t)s), NULL, &cid, &err) == LEAN_OK, "sample: %s",
              err.msg);
        if (gid != (uint32_t)cid) mismatches++;
        CHECK(lean_sampler_accept(cpu, &cid, 1, &err) == LEAN_OK, "accept: %s", err.msg);
        if (mismatches) break;
    }
    CHECK(mismatches == 0, "resident steps over %d ids, window %d: the GPU's id differs from the CPU's", n_vocab, last_n);
    free(x);
    lean_sampler_free(cpu);
    rig_free(&r);
}

enum { M_SPARSE, M_HALF, M_ONE, M_RAGGED, M_PAST, M_NONFINITE, M_KINDS };
static const char *const mask_name[M_KINDS] = {"sparse", "half", "one id", "last word", "bits past n_vocab",
                                               "only non-finite"};

/* A mask of one kind over x (M_NONFINITE allows exactly the ids whose logit is not finite). */
static void make_mask(uint32_t *bits, int32_t n_vocab, int kind, const float *x) {
    const size_t words = LEAN_MASK_WORDS(n_vocab);
    memset(bits, 0, words * 4);
    const int32_t last = (int32_t)(words - 1) * 32;
    for (int32_t i = 0; i < n_vocab; i++) {
        const bool on = kind == M_SPARSE   ? rnd() % 97 == 0 || i == n_vocab / 3
                        : kind == M_HALF   ? rnd() & 1
                        : kind == M_ONE    ? i == n_vocab / 2
                        : kind == M_RAGGED ? i >= last
                        : kind == M_PAST   ? rnd() % 5 == 0
                                           : !isfinite(x[i]);
        if (on) lean_mask_allow(bits, i);
    }
    if (kind == M_PAST && n_vocab % 32) bits[words - 1] |= ~0u << (n_vocab % 32); /* never drawn */
}

/* Masked draws for a few settings and every kind of mask, then one unmasked draw. */
static void test_masks(int32_t n_vocab) {
    float *x = malloc(sizeof *x * (size_t)n_vocab), *work = malloc(sizeof *work * SAMPLER_WORK_FLOATS(n_vocab));
    uint32_t *bits = malloc(4 * LEAN_MASK_WORDS(n_vocab));
    int32_t hist[24];
    static const int picks[] = {0, 1, 6, 15, 17, 19}; /* greedy (plain, penalized), capped, penalized, wide (top-p) */
    for (size_t pi = 0; pi < sizeof picks / sizeof *picks; pi++) {
        const setting *t = &settings[picks[pi]];
        const sampler_cfg cfg = cfg_of(t->temp, t->top_k, t->top_p, t->penalty, t->last_n, 0x3a5c + pi);
        rig r;
        if (!rig_make(&r, &cfg, n_vocab)) break;
        char what[160];
        bool ok = true;
        for (int kind = 0; kind < M_KINDS && ok; kind++) {
            make_logits(x, n_vocab, kind == M_NONFINITE ? L_MASKED : kind % 2 ? L_TIES : L_RANDOM);
            make_mask(bits, n_vocab, kind, x);
            make_history(hist, 24, n_vocab);
            snprintf(what, sizeof what, "n_vocab %d, %s mask, temp %g top-k %d top-p %g penalty %g/%d", n_vocab,
                     mask_name[kind], t->temp, t->top_k, t->top_p, t->penalty, t->last_n);
            ok = compare_masked(what, &r, x, bits, n_vocab, hist, 24, rnd() % 100000, work);
        }
        make_logits(x, n_vocab, L_RANDOM);
        snprintf(what, sizeof what, "n_vocab %d, the mask off again, setting %d", n_vocab, picks[pi]);
        if (ok) compare_draw(what, &r, x, n_vocab, hist, 24, rnd() % 100000, work);
        rig_free(&r);
    }
    free(bits);
    free(x);
    free(work);
}

/* The logit bias: made with one (cfg's), then changed, turned off and on again on the same
 * sampler (gpu_sampler_set_bias), each draw held to sample_reference's with the same list;
 * with a mask too; greedy with +100 on an id draws it. */
static void test_bias(int32_t n_vocab) {
    float *x = malloc(sizeof *x * (size_t)n_vocab), *work = malloc(sizeof *work * SAMPLER_WORK_FLOATS(n_vocab));
    uint32_t *bits = malloc(4 * LEAN_MASK_WORDS(n_vocab));
    int32_t hist[24];
    lean_logit_bias b[3][6];
    for (int l = 0; l < 3; l++) /* distinct ids a list (a stride of a prime over the vocabulary) */
        for (int i = 0; i < 6; i++)
            b[l][i] = (lean_logit_bias){(int32_t)(((uint32_t)l * 101u + (uint32_t)i * 7919u) % (uint32_t)n_vocab),
                                        l == 2 && i == 0 ? 100.0f : 6.0f * rnd_unit()};
    const int32_t n_list = n_vocab < 6 ? 1 : 6;
    static const int picks[] = {0, 1, 6, 15, 17, 19}; /* greedy (plain, penalized), capped, penalized, wide (top-p) */
    for (size_t pi = 0; pi < sizeof picks / sizeof *picks; pi++) {
        const setting *t = &settings[picks[pi]];
        sampler_cfg cfg = cfg_of(t->temp, t->top_k, t->top_p, t->penalty, t->last_n, 0xb1a5 + pi);
        cfg.bias = b[0];
        cfg.n_bias = n_list;
        rig r;
        if (!rig_make(&r, &cfg, n_vocab)) break;
        bool ok = gpu_sampler_takes_bias(r.s);
        CHECK(ok, "made with a bias, no room for one");
        for (int step = 0; step < 5 && ok; step++) { /* list 0, 1, none, 2 (+100 first), 2 under a mask */
            const int l = step == 0 ? 0 : step == 1 ? 1 : 2;
            lean_error err;
            ok = gpu_sampler_set_bias(r.s, b[l], step == 2 ? 0 : n_list, &err) == LEAN_OK;
            CHECK(ok, "set_bias: %s", err.msg);
            make_logits(x, n_vocab, step % 2 ? L_TIES : L_RANDOM);
            make_history(hist, 24, n_vocab);
            for (uint32_t w = 0; w < LEAN_MASK_WORDS(n_vocab); w++) bits[w] = rnd() | 1u; /* id 0 stays allowed */
            if (n_vocab % 32) bits[LEAN_MASK_WORDS(n_vocab) - 1] &= ~(~0u << (n_vocab % 32));
            char what[160];
            snprintf(what, sizeof what, "n_vocab %d, bias list %d (step %d), temp %g top-k %d top-p %g penalty %g/%d",
                     n_vocab, l, step, t->temp, t->top_k, t->top_p, t->penalty, t->last_n);
            if (ok) ok = compare_masked(what, &r, x, step == 4 ? bits : NULL, n_vocab, hist, 24, rnd() % 100000, work);
            if (ok && step == 3 && picks[pi] == 0) { /* greedy, +100 on b[2][0]'s id: drawn */
                uint32_t id = GPU_SAMPLE_NO_ID;
                gpu_sampler_reset(r.s, 5, NULL, 0, &err);
                gpu_draw(&r, x, n_vocab, &id);
                CHECK(id == (uint32_t)b[2][0].id, "greedy with +100 on %d: drew %u", b[2][0].id, id);
            }
        }
        rig_free(&r);
    }
    free(bits);
    free(x);
    free(work);
}

/* One logits vector, many seeds x positions: only the draw changes. */
static void test_seeds(int32_t n_vocab) {
    float *x = malloc(sizeof *x * (size_t)n_vocab), *work = malloc(sizeof *work * SAMPLER_WORK_FLOATS(n_vocab));
    make_logits(x, n_vocab, L_RANDOM);
    for (int si = 0; si < 16; si++) {
        const uint64_t seed = si == 0 ? 0 : si == 1 ? UINT64_MAX - 1 : ((uint64_t)rnd() << 32) | rnd();
        const sampler_cfg cfg = cfg_of(1.5, si % 2 ? 64 : 0, 0.99, 1, 64, seed);
        rig r;
        if (!rig_make(&r, &cfg, n_vocab)) break;
        for (int pi = 0; pi < 16; pi++) {
            const uint32_t pos = pi == 0 ? 0 : pi == 1 ? UINT32_MAX : rnd();
            char what[96];
            snprintf(what, sizeof what, "seeds: seed %llx position %u", (unsigned long long)seed, pos);
            if (!compare_draw(what, &r, x, n_vocab, NULL, 0, pos, work)) break;
        }
        rig_free(&r);
    }
    free(x);
    free(work);
}

/* gpu_sampler_rows: n_rows rows of one logits buffer, each its own setting (those it takes: no
 * penalty, not the wide draw), seed, position and kind of logits, one throwaway row (NULL) among
 * them; each row's id is the one its own gpu_sampler draws (held to the CPU above). */
static void test_rows(int32_t n_vocab, int32_t n_rows) {
    lean_error err;
    float *x = malloc(sizeof *x * (size_t)n_vocab * (size_t)n_rows);
    lean_gpu_buf *logits = NULL, *out = NULL;
    gpu_sampler_rows *rows = NULL;
    lean_status st = x ? LEAN_OK : LEAN_ERR_NOMEM;
    if (!st) st = lean_gpu_buf_create(G, 4 * (uint64_t)n_vocab * (uint64_t)n_rows, LEAN_GPU_STORAGE, "rows logits", &logits, &err);
    if (!st) st = lean_gpu_buf_create(G, 4 * (uint64_t)n_rows, LEAN_GPU_STORAGE, "rows ids", &out, &err);
    if (!st) st = gpu_sampler_rows_create(G, n_vocab, n_rows, logits, out, &rows, &err);
    CHECK(st == LEAN_OK, "rows: making a draw of %d rows of %d ids: %s", n_rows, n_vocab, err.msg);
    uint32_t want[64], got[64];
    int taken = 0, mismatches = 0;
    for (int32_t r = 0, si = 0; !st && r < n_rows; r++) {
        float *row = x + (size_t)r * (size_t)n_vocab;
        make_logits(row, n_vocab, r % L_KINDS);
        if (r == n_rows / 2) { /* the throwaway row */
            gpu_sampler_rows_set(rows, r, NULL, 0);
            continue;
        }
        const setting *t = &settings[si++ % N_SETTINGS];
        while (t->penalty != 1 || (t->temp > 0 && (t->top_k == 0 || t->top_k > SAMPLER_K_CAP))) t = &settings[si++ % N_SETTINGS];
        const sampler_cfg cfg = cfg_of(t->temp, t->top_k, t->top_p, t->penalty, t->last_n, ((uint64_t)rnd() << 32) | rnd());
        const uint32_t pos = rnd() % 100000;
        rig one;
        if (!rig_make(&one, &cfg, n_vocab)) break;
        taken += gpu_sampler_rows_takes(one.s);
        st = gpu_sampler_reset(one.s, pos, NULL, 0, &err);
        if (!st && !gpu_draw(&one, row, n_vocab, &want[r])) st = LEAN_ERR_ARG;
        gpu_sampler_rows_set(rows, r, one.s, pos);
        rig_free(&one);
    }
    lean_gpu_cmd *c = NULL;
    if (!st) st = lean_gpu_buf_write(G, logits, 0, x, 4 * (uint64_t)n_vocab * (uint64_t)n_rows, &err);
    if (!st) st = gpu_sampler_rows_write(rows, n_rows, &err);
    if (!st) st = lean_gpu_begin(G, &c, &err);
    if (!st) {
        gpu_sampler_rows_record(c, rows, n_rows);
        st = lean_gpu_submit(c, &err);
    }
    if (!st) st = lean_gpu_buf_read(G, out, 0, got, 4 * (uint64_t)n_rows, &err);
    CHECK(st == LEAN_OK, "rows: %d rows of %d ids: %s", n_rows, n_vocab, err.msg);
    for (int32_t r = 0; !st && r < n_rows; r++) mismatches += r != n_rows / 2 && got[r] != want[r];
    CHECK(!st && mismatches == 0 && taken == n_rows - 1,
          "rows: %d rows of %d ids: %d ids differ from their own sampler's, %d of %d samplers taken", n_rows, n_vocab,
          mismatches, taken, n_rows - 1);
    const sampler_cfg pen = cfg_of(0.8, 40, 0.95, 1.3, 8, 1), wide = cfg_of(0.8, 0, 0.95, 1, 64, 1);
    rig a, b;
    if (!st && rig_make(&a, &pen, n_vocab)) {
        if (rig_make(&b, &wide, n_vocab)) {
            CHECK(!gpu_sampler_rows_takes(a.s) && !gpu_sampler_rows_takes(b.s), "rows: a penalty or the wide draw taken");
            rig_free(&b);
        }
        rig_free(&a);
    }
    gpu_sampler_rows_free(rows);
    lean_gpu_buf_free(logits);
    lean_gpu_buf_free(out);
    free(x);
}

static void test_errors(void) {
    lean_error err;
    lean_gpu_buf *logits = NULL, *out = NULL;
    gpu_sampler *s = (gpu_sampler *)&err;
    CHECK(lean_gpu_buf_create(G, 400, LEAN_GPU_STORAGE, "test logits", &logits, &err) == LEAN_OK, "%s", err.msg);
    /* 16 bytes (buffers are whole vec4s): ids 0..3 */
    CHECK(lean_gpu_buf_create(G, 8, LEAN_GPU_STORAGE, "test ids", &out, &err) == LEAN_OK, "%s", err.msg);
    sampler_cfg cfg = cfg_of(1.0, 40, 1, 1.2, 4, 7);
    CHECK(gpu_sampler_create(G, &cfg, 101, logits, 0, out, 0, &s, &err) == LEAN_ERR_ARG && !s &&
              strstr(err.msg, "101 ids"), "logits past the buffer: %s", err.msg);
    CHECK(gpu_sampler_create(G, &cfg, 10, logits, 2, out, 0, &s, &err) == LEAN_ERR_ARG, "unaligned offset");
    CHECK(gpu_sampler_create(G, &cfg, 10, logits, 0, out, 4, &s, &err) == LEAN_ERR_ARG && strstr(err.msg, "index 4"),
          "out index past the buffer: %s", err.msg);
    CHECK(gpu_sampler_create(G, &cfg, 0, logits, 0, out, 0, &s, &err) == LEAN_ERR_ARG, "no vocabulary");
    cfg.seed = LEAN_SEED_RANDOM;
    CHECK(gpu_sampler_create(G, &cfg, 10, logits, 0, out, 0, &s, &err) == LEAN_ERR_ARG && strstr(err.msg, "seed"),
          "unresolved seed: %s", err.msg);
    cfg.seed = 7;
    CHECK(gpu_sampler_create(G, &cfg, 100, logits, 0, out, 1, &s, &err) == LEAN_OK, "%s", err.msg);
    const int32_t bad[] = {3, 100};
    CHECK(gpu_sampler_reset(s, 0, bad, 2, &err) == LEAN_ERR_ARG && strstr(err.msg, "history[1] = 100"),
          "a history id outside the vocabulary: %s", err.msg);
    CHECK(gpu_sampler_reset(s, 0, NULL, 1, &err) == LEAN_ERR_ARG, "history NULL");
    const lean_logit_bias far = {100, 1.0f}, huge = {3, 200.0f};
    CHECK(gpu_sampler_set_bias(s, &far, 1, &err) == LEAN_ERR_ARG && strstr(err.msg, "id 100"),
          "a bias id outside the vocabulary: %s", err.msg);
    CHECK(gpu_sampler_set_bias(s, &huge, 1, &err) == LEAN_ERR_ARG && strstr(err.msg, "200"), "a bias of 200: %s",
          err.msg);
    CHECK(gpu_sampler_set_bias(s, NULL, 1, &err) == LEAN_ERR_ARG, "bias NULL");
    const lean_logit_bias fine = {3, 1.0f}; /* made without a bias: no room for one */
    CHECK(!gpu_sampler_takes_bias(s) && gpu_sampler_set_bias(s, &fine, 1, &err) == LEAN_ERR_ARG &&
              strstr(err.msg, "without a bias"), "a bias on a sampler made without one: %s", err.msg);
    CHECK(gpu_sampler_set_bias(s, NULL, 0, &err) == LEAN_OK, "no bias on it: %s", err.msg);
    gpu_sampler_free(s);
    lean_gpu_buf_free(logits);
    lean_gpu_buf_free(out);
}

int main(void) {
    lean_error err;
    if (lean_gpu_open(&G, NULL, &err) != LEAN_OK) {
        CHECK(false, "no WebGPU adapter (bash scripts/setup_webgpu.sh installs Dawn): %s", err.msg);
        return test_finish("test_gpu_sample");
    }
    const lean_gpu_info *info = lean_gpu_get_info(G);
    fprintf(stderr, "test_gpu_sample: adapter %s (%s)\n", info->adapter, info->backend);
    CHECK(gpu_sampler_check(G, &err) == LEAN_OK, "the adapter check: %s", err.msg);
    static const int32_t small[] = {1, 2, 7, 63, 64, 65, 127, 128, 129, 1000, 1024, 1025};
    for (size_t i = 0; i < sizeof small / sizeof small[0]; i++) test_draws(small[i]);
    test_draws(17000);  /* 5 first-level lists, one merge */
    test_draws(50257);  /* GPT-2 (ragged): 13 lists, two merge levels */
    test_draws(151936); /* Qwen2.5: 38 lists, two merge levels (full groups of FAN) */
    test_resident(1000, 8, 40);
    test_resident(5000, -1, 30);
    test_resident(300, 64, 30);
    test_seeds(32000);
    test_masks(1000);
    test_masks(1025);
    test_masks(50257);
    test_bias(1);
    test_bias(1000);
    test_bias(50257);
    test_rows(1000, 13);
    test_rows(151936, 5); /* 38 lists a row, two merge levels */
    test_errors();
    lean_gpu_close(G);
    return test_finish("test_gpu_sample");
}
