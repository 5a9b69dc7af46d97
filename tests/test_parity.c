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
#include "fixture.h"
#include "test.h"

#define TOL 1e-3f

static void run_case(const fixture *c, void *user) {
    (void)user;
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
    cp.backend = "cpu-ref";
    lean_status st = lean_ctx_create(m, &cp, &ctx, &err);
    CHECK(st == LEAN_OK, "%s: ctx: %s", path, err.msg);
    int n_vocab = lean_model_n_vocab(m);
    float *logits = malloc(sizeof(float) * (size_t)n_vocab);
    if (st != LEAN_OK || !logits) goto done;

    st = lean_prefill(ctx, c->prompt, c->n_prompt, logits, &err);
    CHECK(st == LEAN_OK, "%s: prefill: %s", path, err.msg);
    if (st != LEAN_OK) goto done;

    int ids_equal, end_equal;
    float max_delta = fixture_top_delta(logits, n_vocab, c->top_ids, c->top_logits, c->n_top, &ids_equal);
    CHECK(max_delta <= TOL, "%s: max |delta logit| %.3g > %.0e", path, max_delta, TOL);
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
    CHECK(end_delta <= TOL, "%s: after decoding, max |delta logit| %.3g > %.0e", path, end_delta, TOL);
    CHECK(end_equal, "%s: after decoding, top-%d ids differ", path, c->n_end);
    if (end_delta > max_delta) max_delta = end_delta;
    printf("| %-5s | %-4s | %.2e | %-3s | %-3s |\n", c->arch, c->fmt, max_delta,
           ids_equal && end_equal ? "yes" : "no", n_same == c->n_cont ? "yes" : "no");
done:
    free(logits);
    lean_ctx_free(ctx);
    lean_model_free(m);
}

int main(void) {
    printf("| arch  | fmt  | max abs delta logit (top-20, prompt and end) | top-20 ids equal | 32-token continuation equal |\n");
    printf("|---|---|---|---|---|\n");
    fixture_each("llama", run_case, NULL);
    fixture_each("qwen2", run_case, NULL);
    fixture_each("qwen3", run_case, NULL);
    return test_finish("test_parity");
}
