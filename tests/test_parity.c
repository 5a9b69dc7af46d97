/* test_parity.c — lean's CPU reference against transformers, for every architecture x
 * format fixture in tests/data/fixtures (made by scripts/make_fixtures.py on a machine
 * with torch + transformers; transformers saw exactly the weights each file holds).
 *
 * The GGUF files themselves are rebuilt bit-identically into build/fixtures by
 * `scripts/make_fixtures.py models build/fixtures` (numpy only), which checks each one's
 * SHA-256 against the one recorded with the reference; tests/run.sh runs it first.
 *
 * For each file: prefill the prompt, compare the logits of the reference's top-20 ids
 * (|delta| <= 1e-3) and require the same top-20 id set; then decode the 32-token
 * continuation, requiring lean's argmax to equal transformers' id at every step, and
 * compare the top-20 after the last one the same way (this checks the KV-cache path
 * over 48 positions). Prints one parity-table row per file.
 *
 * Why 1e-3 for every format: the reference backend dequantizes each weight row exactly
 * (bit-exact with the numpy dequantizer that fed transformers) and does all arithmetic
 * in float32, so a quantized file differs from transformers only by float32 summation
 * order, the same as F32 (measured deltas are ~1e-5; see docs/parity.md). */
#include "lean.h"
#include "test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_IDS 64
#define TOL 1e-3f

typedef struct fixture_case {
    char fmt[16];
    int n_top, top_ids[MAX_IDS];
    float top_logits[MAX_IDS];
    int n_cont, cont[MAX_IDS];
    int n_end, end_ids[MAX_IDS];
    float end_logits[MAX_IDS];
} fixture_case;

static int read_ints(FILE *f, int *dst, int max) {
    int n = 0;
    if (fscanf(f, "%d", &n) != 1 || n < 0 || n > max) return -1;
    for (int i = 0; i < n; i++)
        if (fscanf(f, "%d", &dst[i]) != 1) return -1;
    return n;
}

static int read_top(FILE *f, int *ids, float *logits) {
    int n = 0;
    if (fscanf(f, "%d", &n) != 1 || n < 0 || n > MAX_IDS) return -1;
    for (int i = 0; i < n; i++)
        if (fscanf(f, " %d:%f", &ids[i], &logits[i]) != 2) return -1;
    return n;
}

static int argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* Is id among the k largest of logits (ties broken by lower id, as topk does)? */
static int in_topk(const float *logits, int n_vocab, int id, int k) {
    int above = 0;
    for (int i = 0; i < n_vocab; i++)
        if (logits[i] > logits[id] || (logits[i] == logits[id] && i < id)) above++;
    return above < k;
}

/* Largest |lean - reference| over the reference's top ids; *same_set: every one of them
 * is also in lean's top-n. */
static float compare_top(const float *logits, int n_vocab, const int *ids, const float *ref, int n,
                         int *same_set) {
    float max_delta = 0;
    *same_set = 1;
    for (int i = 0; i < n; i++) {
        float d = fabsf(logits[ids[i]] - ref[i]);
        if (!(d <= max_delta)) max_delta = isnan(d) ? INFINITY : d;
        if (!in_topk(logits, n_vocab, ids[i], n)) *same_set = 0;
    }
    return max_delta;
}

static void run_case(const char *arch, const int *prompt, int n_prompt, const fixture_case *c) {
    char path[256];
    snprintf(path, sizeof path, "build/fixtures/%s-%s.gguf", arch, c->fmt);
    lean_error err;
    lean_model *m = NULL;
    lean_ctx *ctx = NULL;
    if (lean_model_load_file(path, &m, &err) != LEAN_OK) {
        CHECK(0, "%s: %s", path, err.msg);
        return;
    }
    lean_ctx_params cp = lean_ctx_default_params();
    cp.n_ctx = 128;
    lean_status st = lean_ctx_create(m, &cp, &ctx, &err);
    CHECK(st == LEAN_OK, "%s: ctx: %s", path, err.msg);
    int n_vocab = lean_model_n_vocab(m);
    float *logits = malloc(sizeof(float) * (size_t)n_vocab);
    if (st != LEAN_OK || !logits) goto done;

    st = lean_prefill(ctx, prompt, n_prompt, logits, &err);
    CHECK(st == LEAN_OK, "%s: prefill: %s", path, err.msg);
    if (st != LEAN_OK) goto done;

    int ids_equal, end_equal;
    float max_delta = compare_top(logits, n_vocab, c->top_ids, c->top_logits, c->n_top, &ids_equal);
    CHECK(max_delta <= TOL, "%s: max |delta logit| %.3g > %.0e", path, max_delta, TOL);
    CHECK(ids_equal, "%s: top-%d ids differ from transformers'", path, c->n_top);

    /* Decode transformers' continuation (so later steps stay comparable even after a
     * mismatch) and count how many of lean's own argmax picks agree with it. */
    int n_same = 0, first_diff = -1, lean_id = -1;
    for (int i = 0; i < c->n_cont; i++) {
        int pick = argmax(logits, n_vocab);
        if (pick == c->cont[i]) n_same++;
        else if (first_diff < 0) first_diff = i, lean_id = pick;
        if (lean_decode(ctx, c->cont[i], logits, &err) != LEAN_OK) {
            CHECK(0, "%s: decode: %s", path, err.msg);
            goto done;
        }
    }
    CHECK(n_same == c->n_cont, "%s: continuation differs at token %d (lean %d, transformers %d)",
          path, first_diff, lean_id, first_diff >= 0 ? c->cont[first_diff] : -1);
    float end_delta = compare_top(logits, n_vocab, c->end_ids, c->end_logits, c->n_end, &end_equal);
    CHECK(end_delta <= TOL, "%s: after decoding, max |delta logit| %.3g > %.0e", path, end_delta, TOL);
    CHECK(end_equal, "%s: after decoding, top-%d ids differ", path, c->n_end);
    if (end_delta > max_delta) max_delta = end_delta;
    printf("| %-5s | %-4s | %.2e | %-3s | %-3s |\n", arch, c->fmt, max_delta,
           ids_equal && end_equal ? "yes" : "no", n_same == c->n_cont ? "yes" : "no");
done:
    free(logits);
    lean_ctx_free(ctx);
    lean_model_free(m);
}

static void run_arch(const char *arch) {
    char path[256];
    snprintf(path, sizeof path, "tests/data/fixtures/%s.txt", arch);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL, "cannot open %s (made by scripts/make_fixtures.py)", path);
    if (!f) return;
    int prompt[MAX_IDS], n_prompt = -1, n_cases = 0;
    char word[32];
    fixture_case c;
    memset(&c, 0, sizeof c);
    while (fscanf(f, "%31s", word) == 1) {
        if (word[0] == '#') {
            int ch;
            while ((ch = fgetc(f)) != '\n' && ch != EOF) {}
        } else if (!strcmp(word, "prompt")) {
            n_prompt = read_ints(f, prompt, MAX_IDS);
        } else if (!strcmp(word, "format")) {
            CHECK(fscanf(f, "%15s", c.fmt) == 1, "%s: format name", path);
        } else if (!strcmp(word, "sha256")) {
            /* The file's hash: scripts/make_fixtures.py models checks it when it
             * rebuilds build/fixtures (tests/run.sh does that before any test runs). */
            CHECK(fscanf(f, "%*64s") == 0, "%s: sha256", path);
        } else if (!strcmp(word, "top")) {
            c.n_top = read_top(f, c.top_ids, c.top_logits);
        } else if (!strcmp(word, "continuation")) {
            c.n_cont = read_ints(f, c.cont, MAX_IDS);
        } else if (!strcmp(word, "end_top")) {
            c.n_end = read_top(f, c.end_ids, c.end_logits);
            int ok = n_prompt > 0 && c.n_top > 0 && c.n_cont > 0 && c.n_end > 0;
            CHECK(ok, "%s: malformed fixture before format %s", path, c.fmt);
            if (ok) run_case(arch, prompt, n_prompt, &c);
            n_cases++;
        } else {
            CHECK(0, "%s: unknown line '%s'", path, word);
            break;
        }
    }
    fclose(f);
    CHECK(n_cases == 9, "%s: %d formats, expected 9", path, n_cases);
}

int main(void) {
    printf("| arch  | fmt  | max abs delta logit (top-20, prompt and end) | top-20 ids equal | 32-token continuation equal |\n");
    printf("|---|---|---|---|---|\n");
    run_arch("llama");
    run_arch("qwen2");
    run_arch("qwen3");
    return test_finish("test_parity");
}
