/* test_gen_mask.c — raw logit masks on a generation (lean.h: lean_gen_begin_masked,
 * lean_gen_next_masked; src/core/session.c), on a tiny Q8_0 llama on every backend: cpu-ref,
 * cpu (exact and 8-bit), gpu (exact; the draw resident on the GPU under each mask):
 *
 *   per step    a mask that changes every step (and follows the id drawn before) holds every
 *               draw: seeded and greedy, the ids equal those of the step-by-step loop on the
 *               same backend (lean_sampler_sample under the mask, lean_decode), and on the
 *               exact path cpu-ref's;
 *   one id      a mask of one id forces that id, greedy and sampled;
 *   no mask     a masked generation given NULL masks draws the ids of an unmasked one;
 *   refusals    an empty mask, one of n_vocab - 1 or n_vocab + 1 ids, a bit set past the
 *               vocabulary, bits NULL, a mask on a generation begun without masks: LEAN_ERR_ARG
 *               naming it, nothing drawn (the next draw is the one the run would have made);
 *   batched     lean_gen_next_batch_masked over four generations (per-step masks seeded, one
 *               id greedy, NULL masks, and one begun unmasked beside them; one leaving early):
 *               each row the ids of the same masked generation alone, on the GPU through the
 *               batched pass, the unmasked row one step ahead after each call and the masked
 *               ones none (test_hooks.h); bad masks refused naming the index, nothing drawn.
 *
 * lean-test: webgpu (in wasm32 the webgpu stage runs it: the CPU backends and navigator.gpu) */
#include "core/test_hooks.h"
#include "gpu/test_hooks.h"
#include "gpu_test.h"
#include "tiny_model.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define N_PROMPT 9
#define N_GEN 24
#define N_CTX 64

static const be_spec backends[] = {{"cpu-ref", true}, {"cpu", true}, {"cpu", false}, {"gpu", true}};
static size_t n_be = sizeof backends / sizeof backends[0]; /* without the GPU when LEAN_TEST_GPU=0 */

static lean_sampler *sampler(int32_t V, bool greedy, const int32_t *prompt) {
    lean_sampler_params sp = lean_sampler_default_params();
    /* hot, with the penalty: every stage of the draw in play, so the mask meets each */
    sp.temperature = greedy ? 0.0 : 1.4, sp.top_k = 0, sp.top_p = 0.95, sp.repeat_penalty = 1.2, sp.seed = 5;
    lean_sampler *s = NULL;
    lean_error err = {0};
    lean_status st = lean_sampler_create(&sp, V, &s, &err);
    if (!st) st = lean_sampler_accept(s, prompt, N_PROMPT, &err);
    CHECK(st == LEAN_OK, "sampler: %s", err.msg);
    return s;
}

/* How the masks are chosen, step by step. */
typedef enum mask_kind {
    MASK_SUBSET, /* about a third of the ids, a subset keyed by the step and the id drawn before */
    MASK_ONE,    /* the one id forced_id(step) */
    MASK_NONE,   /* NULL: no mask */
} mask_kind;

static int32_t forced_id(int step, int32_t V) { return (int32_t)((7 * step + 3) % V); }

/* The mask for draw `step` after id `prev` into bits; NULL for MASK_NONE. */
static const uint32_t *make_mask(mask_kind kind, int step, int32_t prev, int32_t V, uint32_t *bits) {
    if (kind == MASK_NONE) return NULL;
    memset(bits, 0, LEAN_MASK_WORDS(V) * sizeof *bits);
    if (kind == MASK_ONE) {
        lean_mask_allow(bits, forced_id(step, V));
        return bits;
    }
    uint64_t r = 0x9E3779B97F4A7C15u * (uint64_t)(step + 1) ^ (uint64_t)(prev + 2);
    for (int32_t i = 0; i < V; i++)
        if (tiny_rng(&r) % 3 == 0) lean_mask_allow(bits, i);
    lean_mask_allow(bits, (int32_t)(r % (uint64_t)V)); /* never empty */
    return bits;
}

/* On c (emptied first): the prompt, then N_GEN ids under kind's masks into out, through
 * lean_gen_begin_masked / lean_gen_next_masked (gen) or the step-by-step loop on the host
 * (lean_sampler_sample under the mask, lean_decode). *resident: the GPU drew them. */
static bool run(lean_ctx *c, const int32_t *prompt, int32_t V, bool greedy, mask_kind kind, bool gen, int32_t *out,
                bool *resident) {
    lean_error err = {0};
    float *logits = malloc(sizeof(float) * (size_t)V);
    uint32_t *bits = malloc(LEAN_MASK_WORDS(V) * sizeof *bits);
    lean_sampler *smp = sampler(V, greedy, prompt);
    lean_status st = lean_ctx_truncate(c, 0, &err);
    if (!st) st = lean_prefill(c, prompt, N_PROMPT, logits, &err);
    if (!st && gen) st = lean_gen_begin_masked(c, smp, N_GEN, &err);
    if (resident) *resident = !st && gen && lean_ctx_gen_resident(c);
    for (int i = 0; !st && i < N_GEN; i++) {
        const uint32_t *b = make_mask(kind, i, i ? out[i - 1] : -1, V, bits);
        const lean_mask mask = {b, V};
        if (gen) {
            st = lean_gen_next_masked(c, b ? &mask : NULL, &out[i], &err);
            continue;
        }
        if (i > 0) st = lean_decode(c, out[i - 1], logits, &err);
        if (!st) st = lean_sampler_sample(smp, logits, lean_ctx_pos(c), b ? &mask : NULL, &out[i], &err);
        if (!st) st = lean_sampler_accept(smp, &out[i], 1, &err);
        if (!st && b) CHECK(lean_mask_allows(b, out[i]), "the step-by-step draw %d took id %d, masked out", i, out[i]);
    }
    if (gen) lean_gen_end(c);
    CHECK(st == LEAN_OK, "%s run (kind %d, greedy %d): %s", gen ? "masked" : "host", kind, greedy, err.msg);
    lean_sampler_free(smp);
    free(bits);
    free(logits);
    return st == LEAN_OK;
}

/* An unmasked generation's ids (lean_gen_begin, lean_gen_next). */
static bool plain(lean_ctx *c, const int32_t *prompt, int32_t V, bool greedy, int32_t *out) {
    lean_error err = {0};
    float *logits = malloc(sizeof(float) * (size_t)V);
    lean_sampler *smp = sampler(V, greedy, prompt);
    lean_status st = lean_ctx_truncate(c, 0, &err);
    if (!st) st = lean_prefill(c, prompt, N_PROMPT, logits, &err);
    if (!st) st = lean_gen_begin(c, smp, N_GEN, &err);
    for (int i = 0; !st && i < N_GEN; i++) st = lean_gen_next(c, &out[i], &err);
    lean_gen_end(c);
    CHECK(st == LEAN_OK, "unmasked run: %s", err.msg);
    lean_sampler_free(smp);
    free(logits);
    return st == LEAN_OK;
}

/* ---- the ids ---- */

static void test_ids(lean_ctx *const *ctx, const int32_t *prompt, int32_t V) {
    for (int g = 0; g < 2; g++) {
        const bool greedy = g == 0;
        int32_t ref[N_GEN] = {0}; /* cpu-ref's masked ids */
        for (size_t b = 0; b < n_be; b++) {
            const be_spec *be = &backends[b];
            int32_t a[N_GEN] = {0}, h[N_GEN] = {0}, one[N_GEN] = {0}, none[N_GEN] = {0}, un[N_GEN] = {0};
            bool resident = false;
            if (!ctx[b]) continue;
            const bool ok = run(ctx[b], prompt, V, greedy, MASK_SUBSET, true, a, &resident) &&
                            run(ctx[b], prompt, V, greedy, MASK_SUBSET, false, h, NULL);
            const bool gpu = strcmp(be->name, "gpu") == 0;
            CHECK(resident == gpu, "%s: the draw resident %d (want it on the GPU only)", be->name, resident);
            if (!ok) continue;
            uint32_t *bits = malloc(LEAN_MASK_WORDS(V) * sizeof *bits);
            for (int i = 0; i < N_GEN; i++) {
                make_mask(MASK_SUBSET, i, i ? a[i - 1] : -1, V, bits);
                CHECK(lean_mask_allows(bits, a[i]), "%s greedy %d: draw %d took id %d, masked out", be->name, greedy,
                      i, a[i]);
            }
            free(bits);
            int d = test_first_diff(a, h, N_GEN);
            CHECK(d < 0, "%s (exact %d) greedy %d: masked generation vs the step-by-step loop differ at %d: %d / %d",
                  be->name, be->exact, greedy, d, d < 0 ? 0 : a[d], d < 0 ? 0 : h[d]);
            if (b == 0) memcpy(ref, a, sizeof ref);
            d = test_first_diff(a, ref, N_GEN);
            CHECK(!be->exact || d < 0, "%s (exact) greedy %d: differs from cpu-ref at %d", be->name, greedy, d);
            /* one allowed id forces it */
            if (run(ctx[b], prompt, V, greedy, MASK_ONE, true, one, NULL))
                for (int i = 0; i < N_GEN; i++)
                    CHECK(one[i] == forced_id(i, V), "%s greedy %d: a mask of id %d drew %d at step %d", be->name,
                          greedy, forced_id(i, V), one[i], i);
            /* NULL masks: an unmasked generation's ids */
            if (run(ctx[b], prompt, V, greedy, MASK_NONE, true, none, NULL) && plain(ctx[b], prompt, V, greedy, un)) {
                d = test_first_diff(none, un, N_GEN);
                CHECK(d < 0, "%s greedy %d: NULL masks vs no masks differ at %d", be->name, greedy, d);
                CHECK(test_first_diff(none, a, N_GEN) >= 0, "%s greedy %d: the masks changed nothing", be->name, greedy);
            }
        }
    }
}

/* ---- refusals ---- */

/* One refused call: status LEAN_ERR_ARG and msg containing want. */
static void refused(lean_status st, const lean_error *err, const char *want, const char *what) {
    CHECK(st == LEAN_ERR_ARG && strstr(err->msg, want), "%s: status %d, '%s' (want '%s')", what, st, err->msg, want);
}

static void test_refusals(lean_ctx *c, const be_spec *be, const int32_t *prompt, int32_t V) {
    lean_error err = {0};
    float *logits = malloc(sizeof(float) * (size_t)V);
    const size_t words = LEAN_MASK_WORDS(V) + 1;
    uint32_t *bits = calloc(words, sizeof *bits);
    lean_sampler *smp = sampler(V, true, prompt);
    int32_t id = -1, want[2];
    lean_status st = lean_ctx_truncate(c, 0, &err);
    if (!st) st = lean_prefill(c, prompt, N_PROMPT, logits, &err);
    /* begun without masks: a mask is refused */
    if (!st) st = lean_gen_begin(c, smp, 4, &err);
    lean_mask mask = {bits, V};
    lean_mask_allow(bits, 1);
    refused(lean_gen_next_masked(c, &mask, &id, &err), &err, "begun without masks", be->name);
    lean_gen_end(c);
    /* the ids two draws under masks of id 5 and then id 6 give (a resident generation's end
     * leaves no logits: prefill again) */
    lean_sampler_free(smp);
    smp = sampler(V, true, prompt);
    if (!st) st = lean_ctx_truncate(c, 0, &err);
    if (!st) st = lean_prefill(c, prompt, N_PROMPT, logits, &err);
    if (!st) st = lean_gen_begin_masked(c, smp, 4, &err);
    bits[0] = 1u << 5;
    if (!st) st = lean_gen_next_masked(c, &mask, &want[0], &err);
    bits[0] = 1u << 6;
    if (!st) st = lean_gen_next_masked(c, &mask, &want[1], &err);
    lean_gen_end(c);
    CHECK(st == LEAN_OK && want[0] == 5 && want[1] == 6, "%s: masks of one id: %d %d (%s)", be->name, want[0], want[1],
          err.msg);
    /* again, with every refusal before each draw: nothing drawn, the same ids */
    lean_sampler_free(smp);
    smp = sampler(V, true, prompt);
    if (!st) st = lean_ctx_truncate(c, 0, &err);
    if (!st) st = lean_prefill(c, prompt, N_PROMPT, logits, &err);
    if (!st) st = lean_gen_begin_masked(c, smp, 4, &err);
    for (int k = 0; !st && k < 2; k++) {
        const int32_t pos = lean_ctx_pos(c);
        memset(bits, 0, words * sizeof *bits);
        refused(lean_gen_next_masked(c, &mask, &id, &err), &err, "allows no id", be->name);
        lean_mask_allow(bits, 5 + k);
        lean_mask shorter = {bits, V - 1}, longer = {bits, V + 1}, none = {NULL, V};
        refused(lean_gen_next_masked(c, &shorter, &id, &err), &err, "a mask of 299 ids for a vocabulary of 300", be->name);
        refused(lean_gen_next_masked(c, &longer, &id, &err), &err, "a mask of 301 ids for a vocabulary of 300", be->name);
        refused(lean_gen_next_masked(c, &none, &id, &err), &err, "bits are NULL", be->name);
        lean_mask_allow(bits, V); /* one past the end, in the last word */
        refused(lean_gen_next_masked(c, &mask, &id, &err), &err, "allows id 300, past the vocabulary of 300", be->name);
        bits[V / 32] &= ~(1u << (V % 32));
        CHECK(lean_ctx_pos(c) == pos, "%s: a refused mask moved the position %d -> %d", be->name, pos, lean_ctx_pos(c));
        st = lean_gen_next_masked(c, &mask, &id, &err);
        CHECK(st == LEAN_OK && id == want[k], "%s: after the refusals draw %d gave %d, want %d (%s)", be->name, k, id,
              want[k], err.msg);
    }
    lean_gen_end(c);
    CHECK(st == LEAN_OK, "%s: refusals: %s", be->name, err.msg);
    refused(lean_gen_next_masked(c, &mask, &id, &err), &err, "no generation in progress", be->name);
    lean_sampler_free(smp);
    free(bits);
    free(logits);
}

/* ---- batched ---- */

#define N_ROWS 4
/* Row r's masks, draw and end: masked per step (seeded), one id (greedy; leaves after 10 ids),
 * NULL masks (seeded), begun with lean_gen_begin (seeded: masks[3] stays NULL). */
static const mask_kind row_kind[N_ROWS] = {MASK_SUBSET, MASK_ONE, MASK_NONE, MASK_NONE};
static const bool row_greedy[N_ROWS] = {false, true, false, false};
static const int row_stop[N_ROWS] = {N_GEN, 10, N_GEN, N_GEN};

/* Refusals of a batched call (good: the masks of a call that draws), each naming its index;
 * nothing moves. */
static void batch_refusals(lean_ctx *const *ctx, const lean_mask *const *good, int32_t V, const char *what) {
    lean_error err = {0};
    int32_t ids[N_ROWS], pos[N_ROWS];
    uint32_t *none = calloc(LEAN_MASK_WORDS(V), sizeof *none), *past = malloc(LEAN_MASK_WORDS(V) * sizeof *past);
    memcpy(past, good[0]->bits, LEAN_MASK_WORDS(V) * sizeof *past);
    past[V / 32] |= 1u << (V % 32); /* V % 32 != 0: id V lies in the last word */
    const lean_mask empty = {none, V}, shorter = {good[0]->bits, V - 1}, longer = {good[0]->bits, V + 1},
                    no_bits = {NULL, V}, beyond = {past, V};
    const struct {
        int row;
        const lean_mask *mask;
        const char *says;
    } cases[] = {
        {0, &empty, "masks[0]: the mask allows no id"},
        {1, &shorter, "masks[1]: a mask of 299 ids for a vocabulary of 300"},
        {1, &longer, "masks[1]: a mask of 301 ids for a vocabulary of 300"},
        {2, &no_bits, "masks[2]: the mask's bits are NULL"},
        {2, &beyond, "masks[2]: the mask allows id 300, past the vocabulary of 300"},
        {3, good[0], "masks[3] is for ctx[3], whose generation was begun without masks"},
    };
    for (int r = 0; r < N_ROWS; r++) pos[r] = lean_ctx_pos(ctx[r]);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const lean_mask *m[N_ROWS];
        memcpy(m, good, sizeof m);
        m[cases[k].row] = cases[k].mask;
        refused(lean_gen_next_batch_masked(ctx, N_ROWS, m, ids, &err), &err, cases[k].says, what);
    }
    for (int r = 0; r < N_ROWS; r++)
        CHECK(lean_ctx_pos(ctx[r]) == pos[r], "%s: a refused batch moved ctx[%d] %d -> %d", what, r, pos[r],
              lean_ctx_pos(ctx[r]));
    free(none), free(past);
}

static void test_batch(const lean_model *m, const be_spec *be, lean_ctx *alone_ctx, const int32_t *prompt, int32_t V) {
    int32_t alone[N_ROWS][N_GEN], got[N_ROWS][N_GEN];
    lean_ctx *ctx[N_ROWS] = {0};
    lean_sampler *smp[N_ROWS] = {0};
    uint32_t *bits[N_ROWS] = {0};
    float *logits = malloc(sizeof(float) * (size_t)V);
    lean_error err = {0};
    bool ok = logits != NULL;
    int behind = 0; /* GPU rows whose steps ran ahead other than one (plain) or none (masked) */
    char what[64];
    snprintf(what, sizeof what, "batched %s%s", be->name, be->exact ? " exact" : "");
    for (int r = 0; ok && r < N_ROWS; r++) /* alone */
        ok = r < 3 ? run(alone_ctx, prompt, V, row_greedy[r], row_kind[r], true, alone[r], NULL)
                   : plain(alone_ctx, prompt, V, row_greedy[r], alone[r]);
    for (int r = 0; ok && r < N_ROWS; r++) {
        ctx[r] = test_ctx(m, be, N_CTX, 8);
        smp[r] = sampler(V, row_greedy[r], prompt);
        bits[r] = malloc(LEAN_MASK_WORDS(V) * sizeof *bits[r]);
        ok = ctx[r] && bits[r] && lean_prefill(ctx[r], prompt, N_PROMPT, logits, &err) == LEAN_OK &&
             (r < 3 ? lean_gen_begin_masked(ctx[r], smp[r], N_GEN, &err) : lean_gen_begin(ctx[r], smp[r], N_GEN, &err)) ==
                 LEAN_OK;
    }
    for (int i = 0; ok && i < N_GEN; i++) {
        lean_ctx *in[N_ROWS];
        const lean_mask *masks[N_ROWS];
        lean_mask mk[N_ROWS];
        int which[N_ROWS], n = 0;
        for (int r = 0; r < N_ROWS; r++) {
            if (i >= row_stop[r]) continue;
            const uint32_t *b = make_mask(row_kind[r], i, i ? got[r][i - 1] : -1, V, bits[r]);
            mk[n] = (lean_mask){b, V};
            masks[n] = b ? &mk[n] : NULL, in[n] = ctx[r], which[n++] = r;
        }
        if (i == 2) batch_refusals(in, masks, V, what); /* all four rows in, masks[0] a subset */
        int32_t ids[N_ROWS];
        ok = lean_gen_next_batch_masked(in, n, masks, ids, &err) == LEAN_OK;
        for (int k = 0; ok && k < n; k++) got[which[k]][i] = ids[k];
        for (int k = 0; ok && !strcmp(be->name, "gpu") && k < n; k++) /* the run-ahead: plain rows only */
            behind += lean_backend_gpu_gen_ahead(lean_ctx_backend_state(in[k])) != (which[k] < 3 || i + 1 == N_GEN ? 0 : 1);
        for (int r = 0; r < N_ROWS; r++)
            if (i + 1 == row_stop[r] && r == 1) lean_gen_end(ctx[r]); /* leaves early */
    }
    CHECK(ok, "%s: %s", what, err.msg);
    CHECK(behind == 0, "%s: %d rows not one step ahead (plain) or none (masked)", what, behind);
    for (int r = 0; ok && r < N_ROWS; r++) {
        const int d = test_first_diff(alone[r], got[r], row_stop[r]);
        CHECK(d < 0, "%s: row %d (kind %d, greedy %d) differs from its generation alone at %d: %d / %d", what, r,
              row_kind[r], row_greedy[r], d, d < 0 ? 0 : alone[r][d], d < 0 ? 0 : got[r][d]);
    }
    if (ok) CHECK(test_first_diff(got[1], (int32_t[]){forced_id(0, V), forced_id(1, V)}, 2) < 0,
                  "%s: the one-id mask did not force its ids", what);
    int64_t led = 0;
    for (int r = 0; !strcmp(be->name, "gpu") && r < N_ROWS; r++)
        led += ctx[r] ? lean_backend_gpu_batch_rows(lean_ctx_backend_state(ctx[r])) : 0;
    CHECK(strcmp(be->name, "gpu") || !ok || led > 2 * N_GEN, "%s: %lld rows went through a batched pass", what,
          (long long)led);
    for (int r = 0; r < N_ROWS; r++) {
        if (ctx[r]) lean_gen_end(ctx[r]);
        lean_ctx_free(ctx[r]), lean_sampler_free(smp[r]), free(bits[r]);
    }
    free(logits);
}

int main(void) {
    if (test_gpu_skipped("test_gen_mask (its GPU context)")) n_be--;
    char path[256];
    tiny_spec sp = tiny_default("llama");
    sp.matrix_type = sp.embd_type = LEAN_TYPE_Q8_0;
    sp.n_vocab = 300; /* 300 % 32 = 12: the last mask word is partly past the vocabulary */
    sp.seed = 31;
    tiny_path(path, sizeof path);
    lean_error err = {0};
    lean_model *m = NULL;
    lean_status st = tiny_write(&sp, path, NULL, &err);
    if (!st) st = lean_model_load_file(path, &m, &err);
    CHECK(st == LEAN_OK, "the model: %s", err.msg);
    if (st) return test_finish("test_gen_mask");
    const int32_t V = lean_model_n_vocab(m);
    int32_t prompt[N_PROMPT];
    tiny_ids(prompt, N_PROMPT, V, 3);
    lean_ctx *ctx[sizeof backends / sizeof backends[0]] = {NULL};
    for (size_t b = 0; b < n_be; b++) ctx[b] = test_ctx(m, &backends[b], N_CTX, 8);
    test_ids(ctx, prompt, V);
    for (size_t b = 0; b < n_be; b++)
        if (ctx[b]) test_refusals(ctx[b], &backends[b], prompt, V), test_batch(m, &backends[b], ctx[b], prompt, V);
    for (size_t b = 0; b < n_be; b++) lean_ctx_free(ctx[b]);
    lean_model_free(m);
    unlink(path);
    return test_finish("test_gen_mask");
}
