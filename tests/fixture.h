/* fixture.h — the transformers parity fixtures (tests/data/fixtures/ARCH.txt, written by
 * scripts/make_fixtures.py on a machine with torch + transformers) and the comparisons every
 * backend's parity test makes against them. The models are build/fixtures/ARCH-FMT.gguf,
 * rebuilt bit-identically by `make test-data`.
 *
 * A fixture file holds one prompt and, per format: the sha256 of the model, transformers'
 * top-20 (id:logit) after the prompt, its 32-token greedy continuation, and its top-20 after
 * decoding that continuation.
 *
 * Header-only (static functions): each test program includes it once. */
#ifndef LEAN_TEST_FIXTURE_H
#define LEAN_TEST_FIXTURE_H

#include "lean.h"
#include "test.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FIXTURE_MAX_IDS 64
#define FIXTURE_N_FORMATS 9 /* formats per architecture in every fixture file */

typedef struct fixture {
    char arch[16], fmt[16];
    char model[128]; /* build/fixtures/ARCH-FMT.gguf */
    int n_prompt, prompt[FIXTURE_MAX_IDS];
    int n_top, top_ids[FIXTURE_MAX_IDS]; /* after the prompt */
    float top_logits[FIXTURE_MAX_IDS];
    int n_cont, cont[FIXTURE_MAX_IDS]; /* greedy continuation */
    int n_end, end_ids[FIXTURE_MAX_IDS]; /* after decoding cont */
    float end_logits[FIXTURE_MAX_IDS];
} fixture;

static inline bool fixture_float_weights(const fixture *fx) {
    return !strcmp(fx->fmt, "f32") || !strcmp(fx->fmt, "f16") || !strcmp(fx->fmt, "bf16");
}

static inline int fixture_read_ints(FILE *f, int *dst) {
    int n = 0;
    if (fscanf(f, "%d", &n) != 1 || n < 0 || n > FIXTURE_MAX_IDS) return -1;
    for (int i = 0; i < n; i++)
        if (fscanf(f, "%d", &dst[i]) != 1) return -1;
    return n;
}

static inline int fixture_read_top(FILE *f, int *ids, float *logits) {
    int n = 0;
    if (fscanf(f, "%d", &n) != 1 || n < 0 || n > FIXTURE_MAX_IDS) return -1;
    for (int i = 0; i < n; i++)
        if (fscanf(f, " %d:%f", &ids[i], &logits[i]) != 2) return -1;
    return n;
}

/* Calls run(fx, user) for every format of tests/data/fixtures/ARCH.txt, in file order, and
 * CHECKs that the file is well formed and has all FIXTURE_N_FORMATS formats. */
static inline void fixture_each(const char *arch, void (*run)(const fixture *fx, void *user), void *user) {
    char path[256];
    snprintf(path, sizeof path, "tests/data/fixtures/%s.txt", arch);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL, "cannot open %s (made by scripts/make_fixtures.py)", path);
    if (!f) return;
    fixture *fx = calloc(1, sizeof *fx);
    int n_cases = 0;
    char word[32];
    snprintf(fx->arch, sizeof fx->arch, "%s", arch);
    fx->n_prompt = -1;
    while (fx && fscanf(f, "%31s", word) == 1) {
        if (word[0] == '#') {
            int ch;
            while ((ch = fgetc(f)) != '\n' && ch != EOF) {}
        } else if (!strcmp(word, "prompt")) {
            fx->n_prompt = fixture_read_ints(f, fx->prompt);
        } else if (!strcmp(word, "format")) {
            CHECK(fscanf(f, "%15s", fx->fmt) == 1, "%s: format name", path);
            snprintf(fx->model, sizeof fx->model, "build/fixtures/%s-%s.gguf", arch, fx->fmt);
        } else if (!strcmp(word, "sha256")) {
            /* checked by scripts/make_fixtures.py when it rebuilds build/fixtures */
            CHECK(fscanf(f, "%*64s") == 0, "%s: sha256", path);
        } else if (!strcmp(word, "top")) {
            fx->n_top = fixture_read_top(f, fx->top_ids, fx->top_logits);
        } else if (!strcmp(word, "continuation")) {
            fx->n_cont = fixture_read_ints(f, fx->cont);
        } else if (!strcmp(word, "end_top")) {
            fx->n_end = fixture_read_top(f, fx->end_ids, fx->end_logits);
            const int ok = fx->n_prompt > 0 && fx->n_top > 0 && fx->n_cont > 0 && fx->n_end > 0;
            CHECK(ok, "%s: malformed fixture before format %s", path, fx->fmt);
            if (ok) run(fx, user);
            n_cases++;
        } else {
            CHECK(0, "%s: unknown line '%s'", path, word);
            break;
        }
    }
    CHECK(fx != NULL, "out of memory");
    fclose(f);
    free(fx);
    CHECK(n_cases == FIXTURE_N_FORMATS, "%s: %d formats, expected %d", path, n_cases, FIXTURE_N_FORMATS);
}

static inline int fixture_argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* The gap between the largest and the second largest logit. */
static inline float fixture_top2_gap(const float *x, int n) {
    const int b = fixture_argmax(x, n);
    float second = -INFINITY;
    for (int i = 0; i < n; i++)
        if (i != b && x[i] > second) second = x[i];
    return x[b] - second;
}

/* Is id among the k largest of logits (ties broken by lower id, as torch.topk does)? */
static inline int fixture_in_topk(const float *logits, int n_vocab, int id, int k) {
    int above = 0;
    for (int i = 0; i < n_vocab; i++)
        if (logits[i] > logits[id] || (logits[i] == logits[id] && i < id)) above++;
    return above < k;
}

/* Largest |lean - transformers| over transformers' top ids (NaN counts as infinite);
 * *same_set (nullable): every one of them is also in lean's top-n. */
static inline float fixture_top_delta(const float *logits, int n_vocab, const int *ids, const float *want, int n,
                               int *same_set) {
    float worst = 0;
    if (same_set) *same_set = 1;
    for (int i = 0; i < n; i++) {
        const float d = fabsf(logits[ids[i]] - want[i]);
        if (!(d <= worst)) worst = isnan(d) ? INFINITY : d;
        if (same_set && !fixture_in_topk(logits, n_vocab, ids[i], n)) *same_set = 0;
    }
    return worst;
}

/* The parity check of one fixture on the backend named by `backend` (a const char *, the
 * lean_ctx_params.backend; fixture_each's user pointer): prefill the prompt, compare the
 * logits of transformers' top-20 ids (|delta| <= FIXTURE_TOL) and require the same top-20 id
 * set; then decode transformers' 32-token continuation, requiring lean's argmax to equal its
 * id at every step, and compare the top-20 after the last one the same way (the KV-cache path
 * over 48 positions). Prints one parity-table row (fixture_parity_header). */
#define FIXTURE_TOL 1e-3f

static inline void fixture_parity_header(void) {
    printf("| arch  | fmt  | max abs delta logit (top-20, prompt and end) | top-20 ids equal | 32-token continuation equal |\n");
    printf("|---|---|---|---|---|\n");
}

static inline void fixture_parity(const fixture *c, void *backend) {
    const char *path = c->model;
    lean_error err;
    lean_model *m = NULL;
    lean_ctx *ctx = NULL;
    if (lean_model_load_file(path, &m, &err) != LEAN_OK) {
        CHECK(0, "%s: %s", path, err.msg);
        return;
    }
    lean_ctx_params cp = lean_ctx_default_params();
    cp.n_ctx = 128;
    cp.backend = (const char *)backend;
    cp.exact = true; /* FIXTURE_TOL is the F32 path's bound */
    lean_status st = lean_ctx_create(m, &cp, &ctx, &err);
    CHECK(st == LEAN_OK, "%s: ctx (%s): %s", path, cp.backend, err.msg);
    int n_vocab = lean_model_n_vocab(m);
    float *logits = malloc(sizeof(float) * (size_t)n_vocab);
    if (st != LEAN_OK || !logits) goto done;

    st = lean_prefill(ctx, c->prompt, c->n_prompt, logits, &err);
    CHECK(st == LEAN_OK, "%s: prefill: %s", path, err.msg);
    if (st != LEAN_OK) goto done;

    int ids_equal, end_equal;
    float max_delta = fixture_top_delta(logits, n_vocab, c->top_ids, c->top_logits, c->n_top, &ids_equal);
    CHECK(max_delta <= FIXTURE_TOL, "%s: max |delta logit| %.3g > %.0e", path, max_delta, FIXTURE_TOL);
    CHECK(ids_equal, "%s: top-%d ids differ from transformers'", path, c->n_top);

    /* Decode transformers' continuation (so later steps stay comparable even after a
     * mismatch) and count how many of lean's own argmax picks agree with it. */
    int n_same = 0, first_diff = -1, lean_id = -1;
    for (int i = 0; i < c->n_cont; i++) {
        int pick = fixture_argmax(logits, n_vocab);
        if (pick == c->cont[i]) n_same++;
        else if (first_diff < 0) first_diff = i, lean_id = pick;
        if (lean_decode(ctx, c->cont[i], logits, &err) != LEAN_OK) {
            CHECK(0, "%s: decode: %s", path, err.msg);
            goto done;
        }
    }
    CHECK(n_same == c->n_cont, "%s: continuation differs at token %d (lean %d, transformers %d)",
          path, first_diff, lean_id, first_diff >= 0 ? c->cont[first_diff] : -1);
    float end_delta = fixture_top_delta(logits, n_vocab, c->end_ids, c->end_logits, c->n_end, &end_equal);
    CHECK(end_delta <= FIXTURE_TOL, "%s: after decoding, max |delta logit| %.3g > %.0e", path, end_delta, FIXTURE_TOL);
    CHECK(end_equal, "%s: after decoding, top-%d ids differ", path, c->n_end);
    if (end_delta > max_delta) max_delta = end_delta;
    printf("| %-5s | %-4s | %.2e | %-3s | %-3s |\n", c->arch, c->fmt, max_delta,
           ids_equal && end_equal ? "yes" : "no", n_same == c->n_cont ? "yes" : "no");
done:
    free(logits);
    lean_ctx_free(ctx);
    lean_model_free(m);
}

#endif
