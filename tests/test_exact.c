/* test_exact.c — lean_ctx_params.exact on the CPU kernels (src/cpu/forward.c with kernels.h's
 * matmul_exact: float activations against the weights' own blocks), held to three things:
 *
 *   parity      every transformers fixture (tests/data/fixtures, fixture.h's fixture_parity:
 *               logits within FIXTURE_TOL = 1e-3 after the prompt and after decoding the
 *               32-token continuation, the same top-20 ids, every greedy step) on "cpu", the
 *               best table this CPU runs, with its threads;
 *   same bits   for every kernel table this CPU runs and every format: the logits after a
 *               prompt and after each of a few decode steps are the same bits for 1, 2 and 3
 *               threads and for prefill batches of 1, 5 and the whole prompt;
 *   same reply  for every one of the 13 formats (tiny models, tiny_model.h, the three
 *               architectures in turn), one seeded sampled reply (lean_gen_*, temperature 1.5,
 *               top-k 40, top-p 0.95, repetition penalty 1.1), the same with a logit bias on a
 *               few ids (it must change the reply), and one greedy reply: the same
 *               ids on cpu-ref, on every CPU table exact, and on the GPU's exact path (WebGPU:
 *               Dawn natively, navigator.gpu under Deno in the webgpu stage; LEAN_TEST_GPU=0
 *               skips it, saying so); and its FNV-1a hash equal to the one recorded in
 *               tests/data/exact_replies.txt, so every build that runs this (native x86-64,
 *               wasm32 in the webgpu stage) gives the same replies as the one that wrote it.
 *               The file is this program's output: after a change that moves the replies on
 *               purpose (the tiny models, the sampler), rewrite it with
 *                 build/tests/test_exact | grep 'reply fnv1a64' | sed 's/ on cpu-ref.*$//' > tests/data/exact_replies.txt
 * The 8-bit path is checked to differ from the exact one (so exact really took its own kernels).
 *
 * lean-test: webgpu (in wasm32 the webgpu stage runs it: the CPU tables of the wasm build and
 * navigator.gpu) */
#include "fixture.h"
#include "gpu_test.h"
#include "tiny_model.h"

#include <stdlib.h>
#include <string.h>

#define N_PROMPT 9
#define N_STEPS 4   /* decode steps compared bit for bit */
#define N_REPLY 24  /* ids per reply */

static const uint32_t formats[] = {LEAN_TYPE_F32,  LEAN_TYPE_F16,  LEAN_TYPE_BF16, LEAN_TYPE_Q8_0,
                                   LEAN_TYPE_Q4_0, LEAN_TYPE_Q4_1, LEAN_TYPE_Q5_0, LEAN_TYPE_Q5_1,
                                   LEAN_TYPE_Q4_K, LEAN_TYPE_Q5_K, LEAN_TYPE_Q6_K, LEAN_TYPE_Q2_K,
                                   LEAN_TYPE_Q3_K};
#define N_FORMATS (sizeof formats / sizeof formats[0])

static const char *isa_names[] = {"cpu-generic", "cpu-avx2", "cpu-avx512", "cpu-neon", "cpu-simd128"};
#define N_ISA (sizeof isa_names / sizeof isa_names[0])

/* A context on backend `be` (exact unless told), or NULL (LEAN_ERR_UNSUPPORTED: *unsupported). */
static lean_ctx *new_ctx(const lean_model *m, const char *be, bool exact, int32_t threads, int32_t n_batch,
                         bool *unsupported) {
    lean_ctx_params p = lean_ctx_default_params();
    p.backend = be;
    p.exact = exact;
    p.n_threads = threads;
    p.n_ctx = 64;
    p.n_batch = n_batch;
    lean_ctx *c = NULL;
    lean_error err = {0};
    const lean_status st = lean_ctx_create(m, &p, &c, &err);
    if (unsupported) *unsupported = st == LEAN_ERR_UNSUPPORTED;
    if (st != LEAN_ERR_UNSUPPORTED || !unsupported) CHECK(st == LEAN_OK, "%s (exact %d): %s", be, exact, err.msg);
    return st == LEAN_OK ? c : NULL;
}

/* A model of every matrix in `type`, architecture by format index. */
static lean_model *load_format(uint32_t type, int i, char *path, size_t cap) {
    static const char *arch[] = {"llama", "qwen2", "qwen3"};
    return tiny_load_all(arch[i % 3], type, 100 + (uint64_t)i, path, cap);
}

/* ---- same bits for any thread count and batch ---- */

/* logits (N_STEPS + 1, V): after the prompt (prefilled in batches of n_batch) and after each of
 * N_STEPS decoded ids. */
static bool run_logits(lean_ctx *c, const int32_t *ids, int32_t V, float *logits) {
    lean_error err = {0};
    bool ok = lean_prefill(c, ids, N_PROMPT, logits, &err) == LEAN_OK;
    for (int s = 0; ok && s < N_STEPS; s++)
        ok = lean_decode(c, ids[N_PROMPT + s], logits + (size_t)(s + 1) * (size_t)V, &err) == LEAN_OK;
    CHECK(ok, "prefill/decode: %s", err.msg);
    return ok;
}

static bool quantized(uint32_t type) {
    return type != LEAN_TYPE_F32 && type != LEAN_TYPE_F16 && type != LEAN_TYPE_BF16;
}

static void test_same_bits(const lean_model *m, uint32_t type, const int32_t *ids) {
    const char *fmt = lean_type_name((int)type);
    const int32_t V = lean_model_n_vocab(m);
    const size_t n = (size_t)V * (N_STEPS + 1);
    float *ref = malloc(sizeof(float) * n), *got = malloc(sizeof(float) * n), *fast = malloc(sizeof(float) * n);
    for (size_t i = 0; i < N_ISA; i++) {
        bool unsupported = false;
        lean_ctx *c = new_ctx(m, isa_names[i], true, 1, N_PROMPT, &unsupported);
        if (!c) continue; /* a table this CPU lacks (unsupported); else a failed CHECK */
        const bool ok = run_logits(c, ids, V, ref);
        lean_ctx_free(c);
        if (!ok) continue;
        const int32_t threads[] = {2, 3, 3}, batches[] = {N_PROMPT, 5, 1};
        for (int k = 0; k < 3; k++) {
            c = new_ctx(m, isa_names[i], true, threads[k], batches[k], NULL);
            if (c && run_logits(c, ids, V, got))
                CHECK(!memcmp(ref, got, sizeof(float) * n), "%s %s exact: %d threads, batch %d: not the bits of 1 thread",
                      fmt, isa_names[i], threads[k], batches[k]);
            lean_ctx_free(c);
        }
        /* the quantized formats' 8-bit path: other logits (exact took its own kernels) */
        c = new_ctx(m, isa_names[i], false, 1, N_PROMPT, NULL);
        if (c && run_logits(c, ids, V, fast) && quantized(type))
            CHECK(memcmp(ref, fast, sizeof(float) * n) != 0, "%s %s: exact gives the 8-bit path's bits", fmt, isa_names[i]);
        lean_ctx_free(c);
    }
    free(ref), free(got), free(fast);
}

/* ---- the same reply on every backend ---- */

static uint64_t fnv1a(const int32_t *ids, int n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < n; i++)
        for (int b = 0; b < 4; b++) h = (h ^ (((uint32_t)ids[i] >> (8 * b)) & 0xff)) * 0x100000001b3ull;
    return h;
}

enum { SEEDED, GREEDY, BIASED, N_MODES };
static const char *const mode_name[N_MODES] = {"seeded", "greedy", "biased"};

/* N_REPLY ids after the prompt through lean_gen_* (the draw on the GPU for the GPU backend),
 * seeded sampling, greedy, or seeded sampling with a logit bias on a few ids. */
static bool reply(lean_ctx *c, const int32_t *prompt, int32_t V, int mode, int32_t *out) {
    const bool greedy = mode == GREEDY;
    const lean_logit_bias bias[4] = {{5 % V, 3.0f}, {11 % V, -2.5f}, {(V - 1) % V, 1.75f}, {40 % V, 0.6f}};
    lean_sampler_params sp = lean_sampler_default_params();
    if (mode == BIASED) sp.logit_bias = bias, sp.n_logit_bias = V > 40 ? 4 : 1;
    sp.temperature = greedy ? 0.0 : 1.5; /* hot: the draws leave the argmax */
    sp.top_k = 40;
    sp.top_p = 0.95;
    sp.repeat_penalty = 1.1;
    sp.seed = 1234;
    lean_sampler *smp = NULL;
    lean_error err = {0};
    float *logits = malloc(sizeof(float) * (size_t)V);
    lean_status st = lean_sampler_create(&sp, V, &smp, &err);
    if (!st) st = lean_sampler_accept(smp, prompt, N_PROMPT, &err);
    if (!st) st = lean_prefill(c, prompt, N_PROMPT, logits, &err);
    if (!st) st = lean_gen_begin(c, smp, N_REPLY, &err);
    for (int i = 0; !st && i < N_REPLY; i++) st = lean_gen_next(c, &out[i], &err);
    lean_gen_end(c);
    CHECK(st == LEAN_OK, "reply: %s", err.msg);
    lean_sampler_free(smp);
    free(logits);
    return st == LEAN_OK;
}

static char *recorded; /* tests/data/exact_replies.txt */

static void test_same_reply(const lean_model *m, uint32_t type, const int32_t *prompt, bool gpu) {
    const char *fmt = lean_type_name((int)type);
    const int32_t V = lean_model_n_vocab(m);
    int32_t seeded[N_REPLY] = {0};
    for (int mode = 0; mode < N_MODES; mode++) {
        int32_t want[N_REPLY], got[N_REPLY];
        lean_ctx *c = new_ctx(m, "cpu-ref", true, 1, 0, NULL);
        const bool ok = c && reply(c, prompt, V, mode, want);
        lean_ctx_free(c);
        if (!ok) continue;
        if (mode == SEEDED) memcpy(seeded, want, sizeof seeded);
        if (mode == BIASED) /* else a bias lost everywhere alike would go unseen */
            CHECK(memcmp(seeded, want, sizeof seeded) != 0, "%s: the logit bias left the seeded reply as it was", fmt);
        char ran[128] = "cpu-ref";
        const char *names[N_ISA + 2];
        size_t nn = 0;
        names[nn++] = "cpu";
        for (size_t i = 0; i < N_ISA; i++) names[nn++] = isa_names[i];
        if (gpu) names[nn++] = "gpu";
        for (size_t i = 0; i < nn; i++) {
            bool unsupported = false;
            const bool is_gpu = !strcmp(names[i], "gpu"); /* no GPU is a failure (gpu_test.h) */
            c = new_ctx(m, names[i], true, !strcmp(names[i], "cpu") ? 3 : 0, 0, is_gpu ? NULL : &unsupported);
            if (!c) continue;
            if (reply(c, prompt, V, mode, got)) {
                int at = -1;
                for (int k = N_REPLY - 1; k >= 0; k--)
                    if (got[k] != want[k]) at = k;
                CHECK(at < 0, "%s %s reply, exact: %s differs from cpu-ref at id %d (%d, cpu-ref %d)", fmt,
                      mode_name[mode], names[i], at, at >= 0 ? got[at] : 0, at >= 0 ? want[at] : 0);
                if (strlen(ran) + strlen(names[i]) + 3 < sizeof ran) strcat(strcat(ran, ", "), names[i]);
            }
            lean_ctx_free(c);
        }
        char line[96];
        snprintf(line, sizeof line, "exact %-4s %-6s reply fnv1a64 %016llx", fmt, mode_name[mode],
                 (unsigned long long)fnv1a(want, N_REPLY));
        printf("%s on %s\n", line, ran);
        CHECK(recorded && strstr(recorded, line), "'%s' is not in tests/data/exact_replies.txt", line);
    }
}

/* ---- transformers ---- */

static void test_parity(void) {
    fixture_parity_header();
    fixture_each("llama", fixture_parity, "cpu");
    fixture_each("qwen2", fixture_parity, "cpu");
    fixture_each("qwen3", fixture_parity, "cpu");
}

int main(void) {
    test_parity();
    const bool gpu = !test_gpu_skipped("test_exact (its GPU replies)");
    size_t len = 0;
    uint8_t *bytes = test_read_file("tests/data/exact_replies.txt", &len);
    recorded = bytes ? realloc(bytes, len + 1) : NULL;
    if (recorded) recorded[len] = 0;
    else free(bytes);
    CHECK(recorded != NULL, "cannot read tests/data/exact_replies.txt (run from the repository)");
    for (size_t i = 0; i < N_FORMATS; i++) {
        char path[256];
        lean_model *m = load_format(formats[i], (int)i, path, sizeof path);
        if (m) {
            int32_t ids[N_PROMPT + N_STEPS];
            tiny_ids(ids, N_PROMPT + N_STEPS, lean_model_n_vocab(m), 7 + (int)i);
            test_same_bits(m, formats[i], ids);
            test_same_reply(m, formats[i], ids, gpu);
        }
        lean_model_free(m);
        unlink(path);
    }
    free(recorded);
    return test_finish("test_exact");
}
