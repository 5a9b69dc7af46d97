/* test_cpu_backend.c — src/cpu/forward.c and pool.c (lean_backend_cpu), and the backend choice
 * of lean_ctx_params (src/core/session.c), through lean.h.
 *
 * The fast backend is held to the reference backend ("cpu-ref") and to transformers:
 *
 *   threads     the logits of a prefill and of the decode steps after it are the same bits for
 *               1, 2, 3 and 16 threads, for every kernel table this CPU runs (generic, avx2...)
 *               and formats of every family (legacy, K-quants, floats, mixed).
 *   batches     the same bits for a prefill split into batches of any size or into calls of
 *               any size, for decoding after a prefill, and after truncating and re-prefilling.
 *   reference   tiny random models (tiny_model.h), every architecture and format, decoded token
 *               by token, logits against cpu-ref at every step:
 *                 F32 / F16 / BF16 weights: the activations stay float, only the summation
 *                 order differs: |delta| <= 1e-4 (1 + |ref|), test_forward.c's tolerance.
 *                 quantized weights: every matmul reads 8-bit activations (quant_act.c); held
 *                 to the bound tests/parity_bound.h derives from their rounding (every logit,
 *                 the greedy pick at every decided step; near-ties waived, counted, printed;
 *                 25% of the steps decided), on models 256 wide (8 activation blocks of 32 an
 *                 input, 1 layer, as the K-quants' always were). The derivation gives the
 *                 error's mean size; on 64-wide models (2 blocks an input) single models
 *                 stray from it: over 40 seeds of 64-wide llama, 3 (q5_0 twice, q4_1 once)
 *                 had an error 2.3-2.5 sigma rms and 1.1-1.55x the bound, with the same bits
 *                 on every table (so no kernel's bug) and the same with a 4096-token
 *                 vocabulary; 240 models 256 wide stayed within 0.81 of it (rms 1.56 sigma
 *                 at most), as the fixtures do (docs/runs/2026-12-05-exact-cpu-avx2.md).
 *   fixtures    the parity fixtures (build/fixtures, made by `make test-data`) against
 *               transformers and cpu-ref at every prompt position and every decoded step, with
 *               the bound tests/parity_bound.h derives from the 8-bit activations' rounding
 *               (float weights: 1e-3, test_parity.c's tolerance): every logit, the top-k id
 *               sets, the greedy pick at every decided step; the near-ties waived are counted
 *               and printed, and a minimum of steps must be decided (float weights: every
 *               near-tie still transformers' pick).
 *   params      backend names, n_threads, and failing allocations (NOMEM, no leak).
 */
#include "lean.h"
#include "fixture.h"
#include "parity_bound.h"
#include "test.h"
#include "tiny_model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define N_SEQ 13

/* The CPU backends with their own kernel table that this CPU runs. */
static const char *isa_backends[6];
static int n_isa;

static void find_isas(const lean_model *m) {
    const char *cands[] = {"cpu-generic", "cpu-avx2", "cpu-avx512", "cpu-neon", "cpu-simd128"};
    n_isa = 0;
    for (size_t i = 0; i < sizeof cands / sizeof cands[0]; i++) {
        lean_ctx_params p = lean_ctx_default_params();
        p.backend = cands[i];
        lean_ctx *c = NULL;
        lean_error err;
        lean_status st = lean_ctx_create(m, &p, &c, &err);
        CHECK(st == LEAN_OK || st == LEAN_ERR_UNSUPPORTED, "%s: %s", cands[i], err.msg);
        if (st == LEAN_OK) isa_backends[n_isa++] = cands[i];
        lean_ctx_free(c);
    }
}

static lean_ctx *new_ctx(const lean_model *m, const char *backend, int n_threads, int n_ctx, int n_batch) {
    lean_ctx_params p = lean_ctx_default_params();
    p.n_ctx = n_ctx;
    p.n_batch = n_batch;
    p.n_threads = n_threads;
    p.backend = backend;
    lean_ctx *c = NULL;
    lean_error err = {0};
    lean_status st = lean_ctx_create(m, &p, &c, &err);
    CHECK(st == LEAN_OK, "ctx (%s, %d threads): %s", backend ? backend : "default", n_threads, err.msg);
    return c;
}

/* logits (n_steps, V): after prefilling ids[0..n_pre) in calls of `step`, then after decoding
 * each of ids[n_pre..n). */
static void run_seq(const lean_model *m, const char *backend, int n_threads, int n_batch, int step,
                    const int32_t *ids, int n_pre, int n, float *logits) {
    const int V = lean_model_n_vocab(m);
    lean_ctx *c = new_ctx(m, backend, n_threads, 64, n_batch);
    lean_error err = {0};
    for (int done = 0; c && done < n_pre; done += step) {
        const int k = n_pre - done < step ? n_pre - done : step;
        CHECK(lean_prefill(c, ids + done, k, logits, &err) == LEAN_OK, "%s", err.msg);
    }
    for (int t = n_pre; c && t < n; t++)
        CHECK(lean_decode(c, ids[t], logits + (int64_t)(t - n_pre + 1) * V, &err) == LEAN_OK, "%s", err.msg);
    lean_ctx_free(c);
}

/* ---- models ---- */

typedef struct model_case {
    const char *what;
    tiny_spec sp;
} model_case;

static tiny_spec spec(const char *arch, uint32_t mt, uint32_t et, int wide) {
    tiny_spec sp = tiny_default(arch);
    sp.matrix_type = mt;
    sp.embd_type = et;
    if (wide) { /* K-quant rows are multiples of 256 */
        sp.n_embd = 256;
        sp.n_ff = 512;
        sp.head_dim = 64;
        sp.n_layer = 1;
    }
    return sp;
}

static lean_model *load_spec(const tiny_spec *sp, tiny_model *tm, char *path, size_t cap) {
    tiny_path(path, cap);
    lean_error err = {0};
    lean_model *m = NULL;
    CHECK(tiny_write(sp, path, tm, &err) == LEAN_OK, "%s", err.msg);
    CHECK(lean_model_load_file(path, &m, &err) == LEAN_OK, "%s", err.msg);
    return m;
}

/* ---- threads and batches ---- */

static void check_invariance(const char *what, const lean_model *m) {
    const int V = lean_model_n_vocab(m), n_pre = 9, n = N_SEQ, steps = n - n_pre + 1;
    int32_t ids[N_SEQ];
    tiny_ids(ids, n, V, 11);
    const size_t lb = sizeof(float) * (size_t)V * steps;
    float *want = calloc(1, lb), *got = calloc(1, lb);
    for (int b = 0; b < n_isa; b++) {
        const char *be = isa_backends[b];
        run_seq(m, be, 1, n_pre, n_pre, ids, n_pre, n, want);
        const int threads[] = {2, 3, 16};
        for (size_t i = 0; i < sizeof threads / sizeof threads[0]; i++) {
            memset(got, 0, lb);
            run_seq(m, be, threads[i], n_pre, n_pre, ids, n_pre, n, got);
            CHECK(memcmp(got, want, lb) == 0, "%s %s: %d threads differ from 1", what, be, threads[i]);
        }
        const int batches[] = {1, 2, 4, 5};
        for (size_t i = 0; i < sizeof batches / sizeof batches[0]; i++) {
            memset(got, 0, lb);
            run_seq(m, be, 2, batches[i], n_pre, ids, n_pre, n, got);
            CHECK(memcmp(got, want, lb) == 0, "%s %s: n_batch %d differs from one batch", what, be, batches[i]);
            memset(got, 0, lb);
            run_seq(m, be, 3, n_pre, batches[i], ids, n_pre, n, got);
            CHECK(memcmp(got, want, lb) == 0, "%s %s: prefill calls of %d differ from one call", what, be,
                  batches[i]);
        }
        /* truncate over other tokens, then re-prefill */
        lean_ctx *c = new_ctx(m, be, 2, 64, 4);
        lean_error err = {0};
        const int32_t other[6] = {1, 2, 3, 4, 5, 6};
        CHECK(c && lean_prefill(c, ids, 5, NULL, &err) == LEAN_OK, "%s", err.msg);
        CHECK(c && lean_prefill(c, other, 6, NULL, &err) == LEAN_OK, "%s", err.msg);
        CHECK(c && lean_ctx_truncate(c, 5, &err) == LEAN_OK, "%s", err.msg);
        CHECK(c && lean_prefill(c, ids + 5, n_pre - 5, got, &err) == LEAN_OK, "%s", err.msg);
        CHECK(memcmp(got, want, sizeof(float) * (size_t)V) == 0, "%s %s: re-prefill after truncate differs", what, be);
        lean_ctx_free(c);
    }
    free(want), free(got);
}

static void test_invariance(void) {
    const model_case cases[] = {
        {"llama q4_0", spec("llama", LEAN_TYPE_Q4_0, LEAN_TYPE_Q8_0, 0)},
        {"qwen2 q5_0/q5_1", spec("qwen2", LEAN_TYPE_Q5_0, LEAN_TYPE_Q5_1, 0)},
        {"qwen3 q4_1/f16", spec("qwen3", LEAN_TYPE_Q4_1, LEAN_TYPE_F16, 0)},
        {"llama q4_k/q6_k", spec("llama", LEAN_TYPE_Q4_K, LEAN_TYPE_Q6_K, 1)},
        {"qwen3 q5_k/q8_0", spec("qwen3", LEAN_TYPE_Q5_K, LEAN_TYPE_Q8_0, 1)},
        {"llama q2_k/q3_k", spec("llama", LEAN_TYPE_Q2_K, LEAN_TYPE_Q3_K, 1)},
        {"llama bf16/f32", spec("llama", LEAN_TYPE_BF16, LEAN_TYPE_F32, 0)},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[256];
        lean_model *m = load_spec(&cases[i].sp, NULL, path, sizeof path);
        if (m) {
            if (i == 0) find_isas(m);
            check_invariance(cases[i].what, m);
        }
        lean_model_free(m);
        unlink(path);
    }
}

/* ---- against the reference ---- */

static bool is_float_type(uint32_t t) { return t == LEAN_TYPE_F32 || t == LEAN_TYPE_F16 || t == LEAN_TYPE_BF16; }

/* The worst error of fast against ref over one step's logits for float weights: |d| / (1 +
 * |ref|) against 1e-4. Returns error / tolerance. */
static double float_step_error(const float *fast, const float *ref, int V) {
    double worst = 0;
    for (int i = 0; i < V; i++) {
        const double e = fabs((double)fast[i] - ref[i]) / (1 + fabs(ref[i])) / 1e-4;
        if (!(e <= worst)) worst = isnan(e) ? INFINITY : e;
    }
    return worst;
}

/* check_bound's tally over every model and table (bound_result's fields that apply). */
static bound_result ref_total;

/* Quantized weights, one table's N_SEQ steps against cpu-ref's with parity_bound.h's bound
 * of the 8-bit activations (block: 32, or 256 for the K-quants): every logit within z sigma +
 * FIXTURE_TOL (3 there), and at a decided step (4 there, cpu-ref's pick standing in for
 * transformers') the same greedy pick; near-ties waived, counted into bound_total. */
static void check_bound(const char *what, const lean_model *m, int block, const float *fast, const float *ref) {
    const int V = lean_model_n_vocab(m);
    const bound b = bound_make(BOUND_8BIT, block, m, N_SEQ);
    double worst = 0, worst_gain = 0;
    int decided = 0, ties = 0, ties_match = 0;
    for (int s = 0; s < N_SEQ; s++) {
        const float *f = fast + (int64_t)s * V, *r = ref + (int64_t)s * V;
        double ratio, gain;
        bound_step(&b, f, r, V, &ratio, &gain);
        worst = fmax(worst, ratio), worst_gain = fmax(worst_gain, gain);
        const bool same = fixture_argmax(f, V) == fixture_argmax(r, V);
        if (bound_decided(&b, r, V, N_SEQ)) {
            decided++;
            CHECK(same, "%s step %d: greedy pick %d, cpu-ref's %d (a decided step)", what, s, fixture_argmax(f, V),
                  fixture_argmax(r, V));
        } else {
            ties++, ties_match += same;
        }
    }
    CHECK(worst <= 1, "%s: max |fast - cpu-ref| %.3g x the bound", what, worst);
    ref_total.steps += N_SEQ, ref_total.decided += decided;
    ref_total.ties += ties, ref_total.ties_match += ties_match;
    ref_total.worst_max = fmax(ref_total.worst_max, worst);
    ref_total.worst_gain = fmax(ref_total.worst_gain, worst_gain);
    printf("| %-28s | %.2f | %.2f | %d/%d | %d (%d) |\n", what, worst, worst_gain, decided, N_SEQ, ties, ties_match);
}

static void test_reference(void) {
    const char *archs[] = {"llama", "qwen2", "qwen3"};
    printf("the CPU kernels against cpu-ref on tiny models (tests/parity_bound.h, 8-bit activations):\n"
           "| model format table | max error / bound | rms error / sigma | greedy = cpu-ref at decided steps "
           "| near-ties waived (picked anyway) |\n|---|---|---|---|---|\n");
    for (size_t ai = 0; ai < 3; ai++) {
        for (size_t ti = 0; ti < 13; ti++) {
            const uint32_t types[] = {LEAN_TYPE_F32,  LEAN_TYPE_F16,  LEAN_TYPE_BF16, LEAN_TYPE_Q8_0, LEAN_TYPE_Q4_0,
                                      LEAN_TYPE_Q4_1, LEAN_TYPE_Q5_0, LEAN_TYPE_Q5_1, LEAN_TYPE_Q4_K, LEAN_TYPE_Q5_K,
                                      LEAN_TYPE_Q6_K, LEAN_TYPE_Q2_K, LEAN_TYPE_Q3_K};
            const uint32_t t = types[ti];
            const bool k = lean_type_traits_get(t)->block_elems == LEAN_QK_K, quant = !is_float_type(t);
            tiny_spec sp = spec(archs[ai], t, t, quant); /* quantized: 256 wide (see the top) */
            sp.seed = 5 + ti;
            char path[256];
            lean_model *m = load_spec(&sp, NULL, path, sizeof path);
            if (!m) continue;
            const int V = lean_model_n_vocab(m);
            int32_t ids[N_SEQ];
            tiny_ids(ids, N_SEQ, V, 3 + ti);
            float *ref = malloc(sizeof(float) * (size_t)V * N_SEQ), *fast = malloc(sizeof(float) * (size_t)V * N_SEQ);
            run_seq(m, "cpu-ref", 1, 8, 1, ids, 1, N_SEQ, ref);
            for (int b = 0; b < n_isa; b++) {
                run_seq(m, isa_backends[b], 2, 8, 1, ids, 1, N_SEQ, fast);
                char what[96];
                snprintf(what, sizeof what, "%s %s %s", archs[ai], lean_type_name((int)t), isa_backends[b]);
                if (!quant) {
                    double worst = 0;
                    for (int s = 0; s < N_SEQ; s++)
                        worst = fmax(worst, float_step_error(fast + (int64_t)s * V, ref + (int64_t)s * V, V));
                    CHECK(worst <= 1, "%s: logits %.3g tolerances from cpu-ref", what, worst);
                } else {
                    check_bound(what, m, k ? 256 : 32, fast, ref);
                }
            }
            free(ref), free(fast);
            lean_model_free(m);
            unlink(path);
        }
    }
    const bound_result *t = &ref_total;
    printf("summary: the CPU kernels against cpu-ref on tiny models: %d of %d greedy steps decided (each cpu-ref's pick), "
           "%d near-ties waived (%d picked anyway); worst max error %.2f of the bound, worst rms error %.2f sigma\n",
           t->decided, t->steps, t->ties, t->ties_match, t->worst_max, t->worst_gain);
    CHECK(100 * t->decided >= BOUND_MIN_DECIDED_PCT * t->steps, "tiny models: %d of %d greedy steps decided, under %d%%",
          t->decided, t->steps, BOUND_MIN_DECIDED_PCT);
}

/* ---- the parity fixtures ---- */

/* Every kernel table this CPU runs on fx against transformers, with the bound of
 * parity_bound.h: the 8-bit activations' for quantized weights, none for float weights (F32
 * activations). cpu-ref's logits are computed once for all of them. */
static void run_fixture(const fixture *fx, void *user) {
    (void)user;
    lean_error err;
    lean_model *m = NULL;
    if (lean_model_load_file(fx->model, &m, &err) != LEAN_OK) {
        CHECK(0, "%s: %s (make test-data builds it)", fx->model, err.msg);
        return;
    }
    const int V = lean_model_n_vocab(m);
    const bool float_w = fixture_float_weights(fx);
    float *lr = bound_alloc(fx, V), *lf = bound_alloc(fx, V);
    lean_ctx *ref = new_ctx(m, "cpu-ref", 1, 128, 64);
    if (lr && lf && ref && bound_run(fx, ref, V, lr)) {
        for (int b = 0; b < n_isa; b++) {
            lean_ctx *fast = new_ctx(m, isa_backends[b], 2, 128, 64);
            if (fast && bound_run(fx, fast, V, lf)) {
                const enum bound_path path = float_w ? BOUND_FLOAT : BOUND_8BIT;
                const bound_result r = bound_fixture(fx, isa_backends[b], lf, lr, path, m);
                CHECK(!float_w || r.ties_match == r.ties, "%s %s: %d of %d near-ties not transformers' pick with "
                      "float weights", fx->model, isa_backends[b], r.ties - r.ties_match, r.ties);
            }
            lean_ctx_free(fast);
        }
    }
    lean_ctx_free(ref);
    free(lr), free(lf);
    lean_model_free(m);
}

static void test_fixtures(void) {
    bound_header("the CPU kernels (8-bit activations on quantized weights)");
    fixture_each_all(run_fixture, NULL);
    bound_summary("the CPU kernels, every table");
}

/* ---- params ---- */

static void test_params(void) {
    tiny_spec sp = tiny_default("llama");
    char path[256];
    lean_model *m = load_spec(&sp, NULL, path, sizeof path);
    if (!m) return;
    lean_ctx_params p = lean_ctx_default_params();
    CHECK(p.n_threads == 0 && p.backend == NULL, "defaults");
    const char *ok[] = {NULL, "auto", "cpu", "cpu-ref", "cpu-generic"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        lean_ctx *c = new_ctx(m, ok[i], 0, 32, 8);
        lean_ctx_free(c);
    }
    lean_ctx *c = (lean_ctx *)&p;
    lean_error err = {0};
    p.backend = "tpu";
    CHECK(lean_ctx_create(m, &p, &c, &err) == LEAN_ERR_ARG && c == NULL, "unknown backend");
    CHECK(strstr(err.msg, "unknown backend 'tpu'") != NULL, "message: %s", err.msg);
    p.backend = "cpu-no-such-isa";
    CHECK(lean_ctx_create(m, &p, &c, &err) == LEAN_ERR_UNSUPPORTED && c == NULL, "unknown isa: %s", err.msg);
    p.backend = "cpu-";
    CHECK(lean_ctx_create(m, &p, &c, &err) == LEAN_ERR_ARG && c == NULL, "empty isa: %s", err.msg);
    p.backend = NULL;
    p.n_threads = -1;
    CHECK(lean_ctx_create(m, &p, &c, &err) == LEAN_ERR_ARG && c == NULL, "n_threads -1: %s", err.msg);
    lean_model_free(m);
    unlink(path);
}

/* Fails every allocation of load -> ctx (3 threads) -> prefill in turn (tiny_alloc_sweep). */
static void test_alloc_failures(void) {
    tiny_spec sp = spec("qwen3", LEAN_TYPE_Q4_K, LEAN_TYPE_Q8_0, 1);
    lean_ctx_params p = lean_ctx_default_params();
    p.backend = "cpu";
    p.n_threads = 3;
    p.n_ctx = 16;
    tiny_alloc_sweep(&sp, &p);
}

int main(void) {
    test_invariance(); /* first: it finds the kernel tables this CPU runs */
    CHECK(n_isa >= 1, "no CPU kernel table runs here");
    printf("CPU backends tested:");
    for (int i = 0; i < n_isa; i++) printf(" %s", isa_backends[i]);
    printf("\n");
    test_reference();
    test_fixtures();
    test_params();
    test_alloc_failures();
    return test_finish("test_cpu_backend");
}
