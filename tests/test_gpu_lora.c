/* test_gpu_lora.c — LoRA adapters on the GPU backend (src/gpu/lora.c, the hooks in
 * src/gpu/forward.c), held to the numpy and PEFT references and cpu-ref as test_lora.c holds
 * the CPU.
 *
 * For the six parity models in F32 and their three numpy adapters (lora_ref.h; `make test-data`),
 * the three cases (a alone; a * 0.75 + b * -0.5; e + b * 0.5, b and e adapting the embedding
 * too: lora_gather.wgsl), and their PEFT adapter (committed; its one case at scale 1), at prompt
 * positions 4, 8 and 16, the GPU's exact path:
 *   - prefill (the tiled kernels; a stacked gate, up computed plain, then swiglu_rows): the
 *     recorded top-21 within 1e-3 of the reference's, its argmax, every logit within 1e-3 of
 *     cpu-ref's with the same adapters;
 *   - decode (the last prompt token alone after the others: the one-token kernels, whose norm
 *     and q|k|v epilogue an adapted layer runs as dispatches of their own): every logit within
 *     1e-3 of cpu-ref's.
 * Switching without reload: the adapters removed give the model's bits again; scale 0 the
 * model's logits within 1e-5. A resident greedy reply (lean_gen_*, the draw on the GPU) under
 * adapter a, and under the last case (the embedding's terms read the drawn ids): cpu-ref's ids. A quantized base (q8_0, q4_k): the GPU within 1e-3 of cpu-ref.
 * Out of memory: every allocation of a set failing in turn ends in a clean error that keeps the
 * adapters in force.
 * lean-test: webgpu (in wasm32 only the webgpu stage runs it: a JavaScript host with WebGPU) */
#include "core/common.h" /* lean_alloc_fail_at */
#include "fixture.h"
#include "lora_ref.h"
#include "test.h"

#include <math.h>

#define MAX_V 4096
#define TOL 1e-3f
#define N_REPLY 8

static lean_ctx *new_ctx(const lean_model *m, const char *backend) {
    lean_ctx_params p = lean_ctx_default_params();
    p.backend = backend, p.exact = 1, p.n_ctx = 64;
    lean_ctx *c = NULL;
    lean_error err;
    CHECK(lean_ctx_create(m, &p, &c, &err) == LEAN_OK, "ctx %s: %s", backend, err.msg);
    return c;
}

static bool set(lean_ctx *c, lean_lora *const *a, const float *s, int n) {
    lean_error err;
    lean_status st = lean_ctx_set_loras(c, a, s, n, &err);
    CHECK(st == LEAN_OK, "set_loras: %s", err.msg);
    return st == LEAN_OK;
}

/* logits after ids[0..n) from an empty cache: one prefill, or (decode) n - 1 tokens then the last alone */
static bool logits_at(lean_ctx *c, const int32_t *ids, int n, bool decode, float *out) {
    lean_error err;
    lean_status st = lean_ctx_truncate(c, 0, &err);
    if (!st && decode && n > 1) st = lean_prefill(c, ids, n - 1, NULL, &err);
    if (!st) st = decode ? lean_prefill(c, ids + n - 1, 1, out, &err) : lean_prefill(c, ids, n, out, &err);
    CHECK(st == LEAN_OK, "%s %d: %s", decode ? "decode" : "prefill", n, err.msg);
    return st == LEAN_OK;
}

static float max_diff(const float *a, const float *b, int n) {
    float d = 0;
    for (int i = 0; i < n; i++) d = fmaxf(d, fabsf(a[i] - b[i]));
    return d;
}

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++) if (x[i] > x[b]) b = i;
    return b;
}

/* N_REPLY greedy ids after ids[0..n) through lean_gen_* */
static bool greedy(lean_ctx *c, const int32_t *ids, int n, int32_t V, int32_t *out) {
    lean_sampler_params sp = lean_sampler_default_params();
    sp.temperature = 0.0;
    lean_sampler *smp = NULL;
    lean_error err = {0};
    float *logits = malloc(sizeof(float) * (size_t)V);
    lean_status st = lean_sampler_create(&sp, V, &smp, &err);
    if (!st) st = lean_ctx_truncate(c, 0, &err);
    if (!st) st = lean_prefill(c, ids, n, logits, &err);
    if (!st) st = lean_gen_begin(c, smp, N_REPLY, &err);
    for (int i = 0; !st && i < N_REPLY; i++) st = lean_gen_next(c, &out[i], &err);
    lean_gen_end(c);
    CHECK(st == LEAN_OK, "greedy reply: %s", err.msg);
    lean_sampler_free(smp);
    free(logits);
    return st == LEAN_OK;
}

/* src's reference of the parity model name (m) on cpu-ref (cr) and the GPU (cg); first: the first
 * source on these contexts, which also makes the switching checks (once per model: they are about
 * the GPU's variants, not the adapters' values) */
static void check_source(const lora_source *src, const char *name, const lean_model *m, lean_ctx *cr, lean_ctx *cg,
                         bool first) {
    ref_file r;
    lean_lora *ad[LORA_REF_MAX];
    if (!lora_ref_open(src, name, m, &r, ad)) return;
    const char *who = src->who;
    const int V = lean_model_n_vocab(m);
    float *ref = malloc(sizeof(float) * MAX_V), *got = malloc(sizeof(float) * MAX_V),
          *base = malloc(sizeof(float) * MAX_V);
    int32_t ids[16];
    for (int i = 0; i < 16; i++) ids[i] = r.prompt[i];
    if (first) logits_at(cg, ids, 16, false, base); /* the model's, before any adapter */
    float max_top = 0, max_all = 0; /* over the cases and positions, for the log */
    for (int k = 0; k < r.n_cases; k++) {
        const ref_case *c = &r.cases[k];
        lean_lora *use[2];
        for (int i = 0; i < c->n_terms; i++) use[i] = ad[c->adapter[i]];
        set(cr, use, c->scale, c->n_terms);
        set(cg, use, c->scale, c->n_terms);
        for (int p = 0; p < 3; p++) {
            const int pos = c->pos[p];
            logits_at(cr, ids, pos, false, ref);
            logits_at(cg, ids, pos, false, got);
            float worst = 0;
            for (int i = 0; i < 21; i++) worst = fmaxf(worst, fabsf(got[c->ids[p][i]] - c->logit[p][i]));
            max_top = fmaxf(max_top, worst);
            CHECK(worst <= TOL, "%s case %s pos %d: gpu prefill differs from %s by %g", name, c->name, pos, who,
                  worst);
            CHECK(argmax(got, V) == c->ids[p][0], "%s case %s pos %d: gpu argmax %d, %s's %d", name, c->name, pos,
                  argmax(got, V), who, c->ids[p][0]);
            float d = max_diff(got, ref, V);
            max_all = fmaxf(max_all, d);
            CHECK(d <= TOL, "%s case %s pos %d: gpu prefill max |delta| %g from cpu-ref", name, c->name, pos, d);
            logits_at(cg, ids, pos, true, got);
            d = max_diff(got, ref, V);
            max_all = fmaxf(max_all, d);
            CHECK(d <= TOL, "%s case %s pos %d: gpu decode max |delta| %g from cpu-ref", name, c->name, pos, d);
        }
    }
    printf("%s: gpu max |delta| from %s's top-21 %.3g, from cpu-ref %.3g\n", name, who, max_top, max_all);
    if (first) {
        /* a resident greedy reply under adapter a, cpu-ref's ids */
        const float one = 1.0f, zero = 0.0f;
        int32_t want[N_REPLY] = {0}, reply[N_REPLY] = {0};
        set(cr, ad, &one, 1);
        set(cg, ad, &one, 1);
        if (greedy(cr, ids, 8, V, want) && greedy(cg, ids, 8, V, reply))
            CHECK(!memcmp(want, reply, sizeof want), "%s: the gpu's greedy reply under the adapter is not cpu-ref's",
                  name);
        /* and under the last case (e and b: the embedding's terms on the ids the GPU draws) */
        const ref_case *last = &r.cases[r.n_cases - 1];
        lean_lora *use[2];
        for (int i = 0; i < last->n_terms; i++) use[i] = ad[last->adapter[i]];
        set(cr, use, last->scale, last->n_terms);
        set(cg, use, last->scale, last->n_terms);
        if (greedy(cr, ids, 8, V, want) && greedy(cg, ids, 8, V, reply))
            CHECK(!memcmp(want, reply, sizeof want), "%s: the gpu's greedy reply under case %s is not cpu-ref's",
                  name, last->name);
        /* removed: the model's bits; scale 0: its values */
        set(cg, NULL, NULL, 0);
        logits_at(cg, ids, 16, false, got);
        CHECK(!memcmp(got, base, sizeof(float) * (size_t)V), "%s: removed adapters leave other logits on the gpu", name);
        set(cg, ad, &zero, 1);
        logits_at(cg, ids, 16, false, got);
        CHECK(max_diff(got, base, V) <= 1e-5f, "%s: an adapter of scale 0 moves the gpu's logits by %g", name,
              max_diff(got, base, V));
    }
    set(cr, NULL, NULL, 0), set(cg, NULL, NULL, 0); /* before the adapters go */
    for (int i = 0; i < LORA_REF_MAX; i++) lean_lora_free(ad[i]);
    free(ref), free(got), free(base);
}

static void test_model(const char *name) {
    lean_model *m = lora_ref_model(name);
    if (!m) return;
    lean_ctx *cr = new_ctx(m, "cpu-ref"), *cg = new_ctx(m, "gpu");
    if (cr && cg) {
        check_source(&LORA_NUMPY, name, m, cr, cg, true);
        check_source(&LORA_PEFT, name, m, cr, cg, false);
    }
    lean_ctx_free(cr), lean_ctx_free(cg);
    lean_model_free(m);
}

/* A quantized base takes the adapters on the GPU as on cpu-ref, prefill and decode. */
static void test_quantized(const char *model, const char *adapter) {
    lean_error err;
    lean_model *m = NULL;
    CHECK(lean_model_load_file(model, &m, &err) == LEAN_OK, "%s: %s (make test-data)", model, err.msg);
    if (!m) return;
    lean_lora *a = NULL;
    CHECK(lean_lora_load_file(m, adapter, &a, &err) == LEAN_OK, "%s: %s", adapter, err.msg);
    const int V = lean_model_n_vocab(m);
    float *ref = malloc(sizeof(float) * (size_t)V), *got = malloc(sizeof(float) * (size_t)V);
    const int32_t ids[] = {1, 5, 9, 14, 2, 7, 30, 11, 3, 21};
    const float scale = 0.8f;
    lean_ctx *cr = new_ctx(m, "cpu-ref"), *cg = new_ctx(m, "gpu");
    if (a && cr && cg && set(cr, &a, &scale, 1) && set(cg, &a, &scale, 1)) {
        for (int decode = 0; decode < 2; decode++) {
            logits_at(cr, ids, 10, false, ref);
            logits_at(cg, ids, 10, decode, got);
            CHECK(max_diff(got, ref, V) <= TOL, "%s: gpu %s max |delta| %g from cpu-ref", model,
                  decode ? "decode" : "prefill", max_diff(got, ref, V));
        }
    }
    lean_ctx_free(cr), lean_ctx_free(cg);
    lean_lora_free(a);
    free(ref), free(got);
    lean_model_free(m);
}

/* Every allocation of lean_ctx_set_loras on the GPU failing in turn (the first set, which also
 * makes the unfused variants): LEAN_ERR_NOMEM, the adapters in force (none) unchanged, and the
 * set made at last computes what one made at once does. */
static void test_out_of_memory(void) {
    lean_error err;
    lean_model *m = NULL;
    lean_lora *a = NULL;
    CHECK(lean_model_load_file("build/fixtures/llama-f32.gguf", &m, &err) == LEAN_OK, "llama: %s", err.msg);
    if (m) CHECK(lean_lora_load_file(m, "build/lora/llama-a.gguf", &a, &err) == LEAN_OK, "llama-a: %s", err.msg);
    lean_ctx *cg = m ? new_ctx(m, "gpu") : NULL, *c1 = m ? new_ctx(m, "gpu") : NULL;
    const int V = m ? lean_model_n_vocab(m) : 0;
    float *base = malloc(sizeof(float) * MAX_V), *got = malloc(sizeof(float) * MAX_V),
          *want = malloc(sizeof(float) * MAX_V);
    const int32_t ids[] = {3, 1, 4, 1, 5, 9, 2, 6};
    const float one = 1.0f;
    if (a && cg && c1 && logits_at(cg, ids, 8, true, base) && set(c1, &a, &one, 1) && logits_at(c1, ids, 8, true, want)) {
        int fails = 0, runs = 0;
        bool kept = true;
        for (uint64_t k = 1; k < 2000; k++) {
            lean_alloc_fail_at(k, false);
            const lean_status st = lean_ctx_set_loras(cg, &a, &one, 1, &err);
            lean_alloc_fail_at(0, false);
            runs++;
            if (st == LEAN_OK) break;
            fails += st == LEAN_ERR_NOMEM;
            if (k % 16 == 1) { /* now and then: still the model's logits */
                logits_at(cg, ids, 8, true, got);
                kept &= !memcmp(got, base, sizeof(float) * (size_t)V);
            }
        }
        CHECK(fails == runs - 1 && runs > 3, "gpu set_loras out of memory: %d clean failures of %d runs", fails, runs);
        CHECK(kept, "a failed gpu set_loras changed the adapters in force");
        logits_at(cg, ids, 8, true, got);
        CHECK(!memcmp(got, want, sizeof(float) * (size_t)V), "the set made after the failures computes otherwise");
    }
    lean_ctx_free(cg), lean_ctx_free(c1);
    lean_lora_free(a);
    free(base), free(got), free(want);
    lean_model_free(m);
}

int main(void) {
    if (test_gpu_skipped("test_gpu_lora")) return 0;
    for (size_t i = 0; i < sizeof LORA_NAMES / sizeof LORA_NAMES[0]; i++) test_model(LORA_NAMES[i]);
    test_quantized("build/fixtures/llama-q8_0.gguf", "build/lora/llama-a.gguf");
    test_quantized("build/fixtures/qwen2-q4_k.gguf", "build/lora/qwen2-a.gguf");
    test_out_of_memory();
    return test_finish("test_gpu_lora");
}
