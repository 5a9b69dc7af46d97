/* test_gpu_forward.c — the WebGPU backend (src/gpu/forward.c) as a whole, on whatever adapter
 * lean_gpu_open finds (Dawn over llvmpipe in CI):
 *   - parity with transformers on every fixture (tests/data/fixtures; the same check and
 *     tolerance as test_parity.c holds the CPU reference to: fixture_parity);
 *   - greedy ids over 32 steps, chosen by the GPU's argmax, equal to the CPU reference's on
 *     tiny models of each architecture in several formats (an FNV-1a hash of the ids, and
 *     the first difference printed);
 *   - a suffix prefill over a resident prefix (also after truncation) equal to one prefill,
 *     and a prefill split at every chunk boundary (n_batch 1..7) equal to one prefill;
 *   - decode past 256 positions (split attention) against the reference's logits;
 *   - the dispatches one decode step records, per architecture, at most a stated number;
 *   - context-full and bad-id errors; backend choice ("auto" on a software adapter is the CPU);
 *   - a device lost mid-generation: LEAN_ERR_DEVICE with a message, then a clean free;
 *   - where the adapter grants shader-f16, the f16 path held to transformers (and cpu-ref) on
 *     every fixture, at every prompt position and decoded step, with the bound tests/parity_bound.h
 *     derives from f16's rounding: every logit and top-k set, the greedy pick at every
 *     decided step, near-ties waived and counted, a minimum of decided steps;
 *   - where WGSL has packed dot products, the 8-bit prefill (every quantized format:
 *     int8_fixture) held the same way with the bound of its 8-bit inputs (fast_parity);
 *   - lean_ctx_params.exact against the default on the Q8_0 and Q4_0 fixtures: exact takes
 *     neither fast path and is transformers' within FIXTURE_TOL; the default takes each where
 *     the adapter has it (on a software adapter neither: the same logits bit for bit; else
 *     within the bound of the paths it took).
 * Everything else runs the exact F32 path (lean_ctx_params.exact; test_gpu_open's device:
 * test_gpu_exact).
 * Logit comparisons between GPU calls that differ only in how tokens were batched allow
 * 1e-4 (the matmul and attention kernels may sum in an order that depends on the batch
 * size; observed differences are ~1e-6).
 *
 * lean-test: webgpu (in wasm32 only the webgpu stage runs it: a JavaScript host with WebGPU) */
#include "core/backend.h"
#include "core/test_hooks.h"
#include "fixture.h"
#include "gpu_test.h"
#include "parity_bound.h"
#include "tiny_model.h"
#include "gpu/ops.h"
#include "gpu/test_hooks.h"
#include "gpu/weights.h"

#define N_PROMPT 13
#define N_GREEDY 32
#define BATCH_TOL 1e-4f

static lean_model *load(const char *path) {
    lean_error err;
    lean_model *m = NULL;
    CHECK(lean_model_load_file(path, &m, &err) == LEAN_OK, "%s: %s", path, err.msg);
    return m;
}

/* The GPU options new_ctx makes contexts with: the F32 path (the CPU stays as the backend
 * choice puts it); a section forcing a variant changes them and puts them back. */
static lean_gpu_options ctx_gpu = {.f16 = LEAN_GPU_OFF, .int8 = LEAN_GPU_OFF}; /* test_gpu_exact */

static lean_ctx *new_ctx(const lean_model *m, const char *backend, int32_t n_ctx, int32_t n_batch) {
    lean_error err;
    lean_ctx *c = NULL;
    lean_ctx_params cp = lean_ctx_default_params();
    cp.backend = backend;
    cp.n_ctx = n_ctx;
    cp.n_batch = n_batch;
    lean_status st = lean_ctx_create_gpu(m, &cp, &ctx_gpu, &c, &err);
    CHECK(st == LEAN_OK, "ctx (%s, n_ctx %d, n_batch %d): %s", backend, n_ctx, n_batch, err.msg);
    return c;
}

static float max_diff(const float *a, const float *b, int n) {
    float worst = 0;
    for (int i = 0; i < n; i++) {
        const float d = fabsf(a[i] - b[i]);
        if (!(d <= worst)) worst = isnan(d) ? INFINITY : d;
    }
    return worst;
}

static uint64_t fnv1a(const int32_t *ids, int n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < n; i++)
        for (int b = 0; b < 4; b++) h = (h ^ (((uint32_t)ids[i] >> (8 * b)) & 0xff)) * 0x100000001b3ull;
    return h;
}

/* ---- greedy ids against the CPU reference ---- */

/* The GPU's argmax of the context's logits buffer as it is now (gpu_test.h's argmax kernel on
 * the context's device; a command of its own, waited for). */
static lean_status gpu_argmax(lean_ctx *c, int32_t n_vocab, int32_t *id, lean_error *err) {
    lean_backend_state *s = lean_ctx_backend_state(c);
    lean_gpu *g = lean_backend_gpu_device(s);
    lean_gpu_buf *out = NULL;
    gpu_op op = {0};
    lean_gpu_cmd *cmd = NULL;
    uint32_t u = 0;
    lean_status st = lean_gpu_buf_create(g, 4, LEAN_GPU_STORAGE, "argmax", &out, err);
    if (st == LEAN_OK) st = test_gpu_argmax_create(g, lean_backend_gpu_logits(s), out, n_vocab, &op, err);
    if (st == LEAN_OK) st = lean_gpu_begin(g, &cmd, err);
    if (st == LEAN_OK) {
        gpu_op_record(cmd, &op, 1);
        st = lean_gpu_submit(cmd, err);
    }
    if (st == LEAN_OK) st = lean_gpu_buf_read(g, out, 0, &u, sizeof u, err);
    gpu_op_free(&op);
    lean_gpu_buf_free(out);
    *id = (int32_t)u;
    return st;
}

/* The prompt (n_prompt ids; its logits into prompt_logits unless NULL), then N_GREEDY greedy
 * ids into out (the GPU's own argmax when on the GPU). */
static bool greedy(lean_ctx *c, const int32_t *prompt, int n_prompt, float *prompt_logits, int32_t *out,
                   int n_vocab) {
    lean_error err;
    float *logits = malloc(sizeof(float) * (size_t)n_vocab);
    const bool gpu = lean_ctx_backend(c) == &lean_backend_gpu;
    lean_status st = lean_prefill(c, prompt, n_prompt, logits, &err);
    if (st == LEAN_OK && prompt_logits) memcpy(prompt_logits, logits, sizeof(float) * (size_t)n_vocab);
    for (int i = 0; st == LEAN_OK && i < N_GREEDY; i++) {
        out[i] = fixture_argmax(logits, n_vocab);
        if (gpu) {
            int32_t id = -1;
            st = gpu_argmax(c, n_vocab, &id, &err);
            CHECK(id == out[i], "step %d: the GPU's argmax %d, the host's over its logits %d", i, id, out[i]);
        }
        if (st == LEAN_OK) st = lean_decode(c, out[i], logits, &err);
    }
    CHECK(st == LEAN_OK, "greedy: %s", err.msg);
    free(logits);
    return st == LEAN_OK;
}

/* One tensor of sp in another format, as q4_k_m files mix them: "NAME" is written as F16
 * (which stacks with nothing: the unstacked paths), "q8_0:NAME" as Q8_0 (beside Q4_0 or Q5_0:
 * a stack of two formats); NULL: none. */
static void retype(tiny_spec *sp, const char *as) {
    if (as && strncmp(as, "q8_0:", 5) == 0) sp->as_q8_0 = as + 5;
    else sp->as_f16 = as;
}

/* K-quants (rows of 256) get n_embd = n_ff = 256, head_dim 64 (q_dim 256). as: retype's. */
static void test_greedy(const char *arch, uint32_t type, const char *as) {
    char path[256];
    lean_error err;
    tiny_spec sp = tiny_default(arch);
    sp.matrix_type = sp.embd_type = type;
    if (lean_type_traits_get(type)->block_elems == 256) sp.n_embd = sp.n_ff = 256, sp.head_dim = 64;
    sp.rope_freqs = !strcmp(arch, "llama");
    sp.tied = !strcmp(arch, "qwen2");
    retype(&sp, as);
    tiny_path(path, sizeof path);
    CHECK(tiny_write(&sp, path, NULL, &err) == LEAN_OK, "%s: %s", path, err.msg);
    lean_model *m = load(path);
    if (!m) goto out;
    int32_t prompt[N_PROMPT], ref[N_GREEDY], got[N_GREEDY];
    tiny_ids(prompt, N_PROMPT, sp.n_vocab, sp.seed + 5);
    lean_ctx *cr = new_ctx(m, "cpu-ref", 64, 8), *cg = new_ctx(m, "gpu", 64, 8);
    if (cr && cg && greedy(cr, prompt, N_PROMPT, NULL, ref, sp.n_vocab) &&
        greedy(cg, prompt, N_PROMPT, NULL, got, sp.n_vocab)) {
        int first = -1;
        for (int i = 0; i < N_GREEDY && first < 0; i++)
            if (ref[i] != got[i]) first = i;
        CHECK(fnv1a(ref, N_GREEDY) == fnv1a(got, N_GREEDY),
              "%s %s%s%s: greedy hash %016llx (gpu) != %016llx (cpu-ref): first difference at step %d (%d vs %d)", arch,
              lean_type_traits_get(type)->name, as ? ", retyped " : "", as ? as : "", (unsigned long long)fnv1a(got, N_GREEDY),
              (unsigned long long)fnv1a(ref, N_GREEDY), first, first >= 0 ? got[first] : -1,
              first >= 0 ? ref[first] : -1);
    }
    lean_ctx_free(cr);
    lean_ctx_free(cg);
    lean_model_free(m);
out:
    unlink(path);
}

/* ---- batching: suffix prefill, truncation, chunk boundaries ---- */

/* The logits after prefilling ids[0..n) in pieces of `split` (the first piece, then the rest
 * as one suffix call; split 0 = one call), on a context of n_batch. */
static bool prefill_logits(const lean_model *m, int32_t n_batch, const int32_t *ids, int n, int split, float *logits) {
    lean_error err;
    lean_ctx *c = new_ctx(m, "gpu", 64, n_batch);
    if (!c) return false;
    lean_status st = split ? lean_prefill(c, ids, split, NULL, &err) : LEAN_OK;
    if (st == LEAN_OK) st = lean_prefill(c, ids + split, n - split, logits, &err);
    CHECK(st == LEAN_OK, "prefill (n_batch %d, split %d): %s", n_batch, split, err.msg);
    lean_ctx_free(c);
    return st == LEAN_OK;
}

static void test_batching(const lean_model *m) {
    const int V = lean_model_n_vocab(m), n = 21;
    int32_t ids[21], other[8];
    tiny_ids(ids, n, V, 11);
    tiny_ids(other, 8, V, 12);
    float *one = malloc(sizeof(float) * (size_t)V), *got = malloc(sizeof(float) * (size_t)V);
    if (!prefill_logits(m, 64, ids, n, 0, one)) goto done;
    for (int split = 1; split < n; split += 4)
        if (prefill_logits(m, 64, ids, n, split, got))
            CHECK(max_diff(one, got, V) <= BATCH_TOL, "suffix prefill after %d tokens: max |delta| %g", split,
                  max_diff(one, got, V));
    for (int nb = 1; nb <= 7; nb++)
        if (prefill_logits(m, nb, ids, n, 0, got))
            CHECK(max_diff(one, got, V) <= BATCH_TOL, "n_batch %d: max |delta| %g", nb, max_diff(one, got, V));

    /* a resident prefix, a wrong continuation, truncated back, then the right suffix */
    lean_error err;
    lean_ctx *c = new_ctx(m, "gpu", 64, 64);
    lean_status st = c ? LEAN_OK : LEAN_ERR_ARG;
    if (st == LEAN_OK) st = lean_prefill(c, ids, 9, NULL, &err);
    if (st == LEAN_OK) st = lean_prefill(c, other, 8, NULL, &err);
    if (st == LEAN_OK) st = lean_ctx_truncate(c, 9, &err);
    if (st == LEAN_OK) st = lean_prefill(c, ids + 9, n - 9, got, &err);
    CHECK(st == LEAN_OK, "truncate and suffix: %s", c ? err.msg : "no context");
    if (st == LEAN_OK)
        CHECK(max_diff(one, got, V) <= BATCH_TOL, "suffix after truncation: max |delta| %g", max_diff(one, got, V));
    lean_ctx_free(c);
done:
    free(one);
    free(got);
}

/* Past GPU_ATTN_MIN_CHUNK positions decode splits its keys over workgroups (ops.h): logits there,
 * after a 300-token prefill, against the reference's (the transformers tolerance, 1e-3). */
static void test_long_context(const lean_model *m) {
    enum { N = 300, N_CTX = 320 };
    const int V = lean_model_n_vocab(m);
    int32_t ids[N + 2];
    tiny_ids(ids, N + 2, V, 21);
    float *ref = malloc(sizeof(float) * (size_t)V), *got = malloc(sizeof(float) * (size_t)V);
    lean_ctx *cr = new_ctx(m, "cpu-ref", N_CTX, 64), *cg = new_ctx(m, "gpu", N_CTX, 64);
    lean_error err;
    lean_status st = cr && cg ? LEAN_OK : LEAN_ERR_ARG;
    if (st == LEAN_OK) st = lean_prefill(cr, ids, N, NULL, &err);
    if (st == LEAN_OK) st = lean_prefill(cg, ids, N, NULL, &err);
    for (int i = N; st == LEAN_OK && i < N + 2; i++) {
        st = lean_decode(cr, ids[i], ref, &err);
        if (st == LEAN_OK) st = lean_decode(cg, ids[i], got, &err);
        if (st == LEAN_OK)
            CHECK(max_diff(ref, got, V) <= FIXTURE_TOL, "decode at position %d: max |gpu - cpu-ref| %g", i,
                  max_diff(ref, got, V));
    }
    CHECK(st == LEAN_OK, "long context: %s", cr && cg ? err.msg : "no context");
    lean_ctx_free(cr);
    lean_ctx_free(cg);
    free(ref);
    free(got);
}

/* ---- dispatches per decode step ---- */

/* On a fast GPU a small model's decode step costs ~4 us per dispatch, more than its bytes:
 * the dispatches one decode step records (embedding, every layer, final norm, logits)
 * on a tiny 2-layer model of arch, held to at most `most` so a fusion undone fails here. */
static void test_dispatches(const char *arch, uint32_t type, const char *as, uint64_t most, uint64_t kv_saves) {
    char path[256];
    lean_error err;
    tiny_spec sp = tiny_default(arch);
    sp.matrix_type = sp.embd_type = type;
    retype(&sp, as);
    tiny_path(path, sizeof path);
    CHECK(tiny_write(&sp, path, NULL, &err) == LEAN_OK, "%s: %s", path, err.msg);
    lean_model *m = load(path);
    lean_ctx *c = m ? new_ctx(m, "gpu", 64, 8) : NULL;
    if (c) {
        int32_t ids[4];
        tiny_ids(ids, 4, sp.n_vocab, 9);
        float *logits = malloc(sizeof(float) * (size_t)sp.n_vocab);
        lean_gpu *g = lean_backend_gpu_device(lean_ctx_backend_state(c));
        /* where the device binds the Q, K, V epilogue's storage buffers, its qkv_post is gone */
        if (gpu_matmul_kv_fits(g, strcmp(arch, "qwen2") == 0, true)) most -= kv_saves;
        lean_status st = lean_prefill(c, ids, 3, logits, &err);
        const uint64_t before = lean_gpu_dispatch_count(g);
        if (st == LEAN_OK) st = lean_decode(c, ids[3], logits, &err);
        const uint64_t n = lean_gpu_dispatch_count(g) - before;
        CHECK(st == LEAN_OK, "%s: %s", arch, err.msg);
        printf("dispatches per decode step, %s %s%s%s, %d layers: %llu\n", arch, lean_type_traits_get(type)->name,
               as ? ", retyped " : "", as ? as : "", sp.n_layer, (unsigned long long)n);
        CHECK(n <= most, "%s %s: %llu dispatches per decode step, at most %llu before", arch,
              lean_type_traits_get(type)->name, (unsigned long long)n, (unsigned long long)most);
        free(logits);
    }
    lean_ctx_free(c);
    lean_model_free(m);
    unlink(path);
}

/* ---- the fast paths against transformers ---- */

/* fx on the GPU with f16 and int8 as given (a fast path) against transformers and cpu-ref,
 * with parity_bound.h's bound for that path's arithmetic: the f16 path rounds prefill's
 * matmul inputs and weights to f16 (tiled_f16.wgsl), the 8-bit prefill quantizes their
 * inputs in 32-column blocks (matmul_tiled_i8.wgsl: every quantized format; the CPU backend's
 * blocks but for the K-quants, whose Q8_K has 256); the decode steps
 * after either run the F32 path over the prompt's KV cache. */
static void fast_parity(const fixture *fx, lean_gpu_force f16, lean_gpu_force int8, enum bound_path path,
                        const char *name) {
    lean_model *m = load(fx->model);
    if (!m) return;
    const int V = lean_model_n_vocab(m);
    float *lr = bound_alloc(fx, V), *lf = bound_alloc(fx, V);
    lean_ctx *ref = new_ctx(m, "cpu-ref", 128, 64);
    ctx_gpu.f16 = f16, ctx_gpu.int8 = int8;
    lean_ctx *fast = new_ctx(m, "gpu", 128, 64);
    ctx_gpu = test_gpu_exact;
    if (lr && lf && ref && fast) {
        const lean_gpu *g = lean_backend_gpu_device(lean_ctx_backend_state(fast));
        CHECK(lean_gpu_f16(g) == (f16 == LEAN_GPU_ON) && lean_gpu_int8(g) == (int8 == LEAN_GPU_ON),
              "%s: the device took f16 %d, int8 %d", fx->model, lean_gpu_f16(g), lean_gpu_int8(g));
        if (bound_run(fx, ref, V, lr) && bound_run(fx, fast, V, lf)) bound_fixture(fx, name, lf, lr, path, m);
    }
    lean_ctx_free(ref);
    lean_ctx_free(fast);
    free(lr), free(lf);
    lean_model_free(m);
}

static void f16_parity(const fixture *fx, void *user) {
    (void)user;
    fast_parity(fx, LEAN_GPU_ON, LEAN_GPU_OFF, BOUND_F16, "gpu f16");
}

/* The 8-bit prefill's fixtures: Q8_0 and Q4_0 on every model; each other quantized format on
 * one model, each model one of them (every architecture, tied and untied, takes a K-quant), as
 * each fixture costs ~3 CPU s on llvmpipe, whose dot products Dawn replaces; the whole sweep,
 * every quantized format on every model, passed in docs/runs/2026-12-05-gpu-int8-formats.md. */
static bool int8_fixture(const fixture *fx) {
    static const char *const one[][2] = {{"llama", "q4_k"},         {"llama-tied", "q5_1"}, {"qwen2", "q6_k"},
                                         {"qwen2-untied", "q4_1"}, {"qwen3", "q5_0"},      {"qwen3-tied", "q5_k"}};
    if (!strcmp(fx->fmt, "q8_0") || !strcmp(fx->fmt, "q4_0")) return true;
    for (size_t i = 0; i < sizeof one / sizeof one[0]; i++)
        if (!strcmp(fx->arch, one[i][0]) && !strcmp(fx->fmt, one[i][1])) return true;
    return false;
}

static void int8_parity(const fixture *fx, void *user) {
    (void)user;
    if (!int8_fixture(fx)) return; /* float weights keep float arithmetic; int8_fixture says which others */
    fast_parity(fx, LEAN_GPU_OFF, LEAN_GPU_ON, BOUND_8BIT_32, "gpu 8-bit prefill");
}

static void test_f16(void) {
    bound_header("the f16 path");
    fixture_each_all(f16_parity, NULL);
    bound_summary("the f16 path");
}

static void test_int8(void) {
    bound_header("the 8-bit prefill");
    fixture_each_all(int8_parity, NULL);
    bound_summary("the 8-bit prefill");
}

/* ---- lean_ctx_params.exact against the default ---- */

/* A context made through the public parameters alone (exact or the default), its prompt's
 * logits into logits; the paths its device took into *f16, *int8. */
static bool public_prompt(const lean_model *m, const fixture *fx, bool exact, float *logits, bool *f16, bool *int8) {
    lean_ctx_params cp = lean_ctx_default_params();
    cp.backend = "gpu";
    cp.n_ctx = 128;
    cp.exact = exact;
    lean_ctx *c = NULL;
    lean_error err;
    lean_status st = lean_ctx_create(m, &cp, &c, &err);
    if (!st) {
        const lean_gpu *g = lean_backend_gpu_device(lean_ctx_backend_state(c));
        *f16 = lean_gpu_f16(g), *int8 = lean_gpu_int8(g);
        st = lean_prefill(c, fx->prompt, fx->n_prompt, logits, &err);
    }
    CHECK(st == LEAN_OK, "%s (exact %d): %s", fx->model, exact, err.msg);
    lean_ctx_free(c);
    return st == LEAN_OK;
}

/* exact: neither fast path, and transformers' logits within FIXTURE_TOL. The default: the
 * 8-bit prefill exactly where the adapter is hardware (not Apple's) with packed dot products,
 * the f16 path where it grants shader-f16; with neither (a software adapter without
 * shader-f16, as llvmpipe here) the exact path's logits bit for bit, else within the fast
 * paths' bounds (parity_bound.h's, added when the default takes both). */
static void exact_against_default(const fixture *fx, void *info) {
    const lean_gpu_info *in = info;
    if (strcmp(fx->fmt, "q8_0") && strcmp(fx->fmt, "q4_0")) return;
    lean_model *m = load(fx->model);
    if (!m) return;
    const int V = lean_model_n_vocab(m);
    float *le = malloc(sizeof(float) * (size_t)V), *ld = malloc(sizeof(float) * (size_t)V);
    bool e16 = true, e8 = true, d16 = false, d8 = false;
    if (public_prompt(m, fx, true, le, &e16, &e8) && public_prompt(m, fx, false, ld, &d16, &d8)) {
        CHECK(!e16 && !e8, "%s: exact took the f16 path (%d) or the 8-bit prefill (%d)", fx->model, e16, e8);
        int same_ids;
        const float d_ref = fixture_top_delta(le, V, fx->top_ids, fx->top_logits, fx->n_top, &same_ids);
        CHECK(d_ref <= FIXTURE_TOL && same_ids, "%s: exact's logits max |delta| %.3g from transformers' (top ids %s)",
              fx->model, d_ref, same_ids ? "equal" : "differ");
        const bool hw_dot = in->packed_dot && !in->software && strncmp(in->vendor, "apple", 5) != 0;
        CHECK(d8 == hw_dot && d16 == in->shader_f16, "%s: the default took int8 %d (want %d), f16 %d (want %d)",
              fx->model, d8, hw_dot, d16, in->shader_f16);
        const float d = max_diff(le, ld, V);
        const bound b8 = bound_make(BOUND_8BIT, 32, m, 1), b16 = bound_make(BOUND_F16, 0, m, 1);
        const double tol = (d8 ? bound_max(&b8, le, V) : 0) + (d16 ? bound_max(&b16, le, V) : 0);
        if (!d8 && !d16)
            CHECK(memcmp(le, ld, sizeof(float) * (size_t)V) == 0, "%s: default and exact logits differ (%.3g) on "
                  "the same path", fx->model, d);
        else
            CHECK(d <= tol, "%s: the default's logits max |delta| %.3g from exact's > %.3g", fx->model, d, tol);
        printf("| %-5s | %-4s | %.2e | %s%s |\n", fx->arch, fx->fmt, d, d8 ? "8-bit prefill " : "",
               d16 ? "f16" : !d8 ? "F32 (the exact path)" : "");
    }
    free(le);
    free(ld);
    lean_model_free(m);
}

static void test_exact(const lean_gpu_info *in) {
    printf("lean_ctx_params.exact against the default:\n| arch  | fmt  | max abs delta logit (after the prompt) "
           "| the default's path |\n|---|---|---|---|\n");
    fixture_each_all(exact_against_default, (void *)in);
}

/* ---- errors ---- */

static void test_errors(const lean_model *m) {
    const int V = lean_model_n_vocab(m);
    lean_error err;
    int32_t ids[16];
    tiny_ids(ids, 16, V, 3);
    float *logits = malloc(sizeof(float) * (size_t)V);
    lean_ctx *c = new_ctx(m, "gpu", 16, 8);
    if (c) {
        CHECK(lean_prefill(c, ids, 16, logits, &err) == LEAN_OK, "filling the context: %s", err.msg);
        CHECK(lean_decode(c, ids[0], logits, &err) == LEAN_ERR_CONTEXT_FULL, "a 17th token in n_ctx 16");
        CHECK(lean_ctx_truncate(c, 4, &err) == LEAN_OK, "truncate: %s", err.msg);
        CHECK(lean_decode(c, V, logits, &err) == LEAN_ERR_ARG && strstr(err.msg, "vocabulary"),
              "id n_vocab: %s", err.msg);
        CHECK(lean_decode(c, -1, logits, &err) == LEAN_ERR_ARG, "id -1");
        CHECK(lean_decode(c, ids[1], logits, &err) == LEAN_OK, "decoding after the errors: %s", err.msg);
        CHECK(lean_ctx_pos(c) == 5, "position %d after the errors, want 5", lean_ctx_pos(c));

        /* the device goes away mid-generation */
        lean_gpu_lose_device(lean_backend_gpu_device(lean_ctx_backend_state(c)));
        lean_status st = lean_decode(c, ids[2], logits, &err);
        CHECK(st == LEAN_ERR_DEVICE && err.msg[0], "decode on a lost device: status %d '%s'", st, err.msg);
        CHECK(lean_decode(c, ids[2], NULL, &err) == LEAN_ERR_DEVICE, "decode without logits on a lost device");
        lean_ctx_free(c);
    }
    free(logits);
}

/* "auto" takes the GPU only on a hardware adapter; "gpu" takes any. */
static void test_choice(const lean_model *m, bool software) {
    lean_ctx *c = new_ctx(m, "auto", 32, 8);
    if (c)
        CHECK(lean_ctx_backend(c) == (software ? &lean_backend_cpu : &lean_backend_gpu),
              "auto on a %s adapter chose %s", software ? "software" : "hardware", lean_ctx_backend(c)->name);
    lean_ctx_free(c);
    c = new_ctx(m, NULL, 32, 8);
    if (c) CHECK(lean_ctx_backend(c) == (software ? &lean_backend_cpu : &lean_backend_gpu), "NULL = auto");
    lean_ctx_free(c);
}

/* fixture_parity on the Q8_0 fixtures only (--subgroups) */
static void parity_q8_0(const fixture *fx, void *user) {
    if (strcmp(fx->fmt, "q8_0") == 0) fixture_parity(fx, user);
}

/* --subgroups (tests/run.sh's browser stage, in Chromium, whose SwiftShader is the one CI
 * adapter with subgroups, and slow): the forward over subgroups held to transformers on one
 * fixture per architecture (Q8_0), and the greedy ids of each architecture's Q8_0 model against
 * the CPU reference; the rest does not depend on the reductions and runs in the other stages. */
int main(int argc, char **argv) {
    const bool subgroups_only = argc > 1 && strcmp(argv[1], "--subgroups") == 0;
    lean_gpu *g = test_gpu_open("test_gpu_forward");
    if (!g) return test_finish("test_gpu_forward");
    const bool software = lean_gpu_get_info(g)->software;
    const lean_gpu_info info = *lean_gpu_get_info(g);
    printf("adapter: %s (%s)\n", info.adapter, info.backend);
    test_gpu_variant(g, "subgroups"); /* every forward below reduces over them where it can */
    /* (--subgroups runs neither, so it says nothing of them to the ledger) */
    const bool f16 = !subgroups_only && test_gpu_variant(g, "f16");
    const bool dot = !subgroups_only && test_gpu_variant(g, "int8");
    lean_gpu_close(g);

    fixture_parity_header();
    const char *archs[] = {"llama", "qwen2", "qwen3"};
    if (subgroups_only) {
        for (int a = 0; a < 3; a++) fixture_each(archs[a], parity_q8_0, "gpu");
        fixture_parity_summary("gpu (subgroups)");
        for (int a = 0; a < 3; a++) test_greedy(archs[a], LEAN_TYPE_Q8_0, NULL);
        return test_finish("test_gpu_forward");
    }
    fixture_each_all(fixture_parity, "gpu");
    fixture_parity_summary("gpu");

    for (int a = 0; a < 3; a++) {
        test_greedy(archs[a], LEAN_TYPE_F32, NULL);
        test_greedy(archs[a], LEAN_TYPE_Q8_0, NULL);
        test_greedy(archs[a], LEAN_TYPE_Q4_0, NULL);
    }
    test_greedy("llama", LEAN_TYPE_F16, NULL);
    test_greedy("qwen3", LEAN_TYPE_Q4_K, NULL);
    test_greedy("qwen2", LEAN_TYPE_Q6_K, NULL);
    test_greedy("llama", LEAN_TYPE_Q2_K, NULL);
    test_greedy("qwen3", LEAN_TYPE_Q3_K, NULL);
    test_greedy("llama", LEAN_TYPE_Q8_0, "blk.1.ffn_up.weight"); /* Wgate, Wup apart */
    test_greedy("qwen2", LEAN_TYPE_Q8_0, "blk.0.attn_v.weight"); /* Wq, Wk, Wv apart, with biases */
    test_greedy("qwen3", LEAN_TYPE_Q4_0, "blk.1.attn_k.weight"); /* and with head norms */
    test_greedy("qwen2", LEAN_TYPE_Q5_0, "q8_0:blk.0.attn_v.weight"); /* [Wq; Wk; Wv] of two formats */
    test_greedy("llama", LEAN_TYPE_Q4_0, "q8_0:blk.1.ffn_up.weight"); /* [Wgate; Wup] of two */
    /* decode's qkv_post as a dispatch where the Q, K, V matmuls would do its work (a device
     * without their storage buffers): llama's RoPE, qwen2's NEOX with biases */
    ctx_gpu.no_kv_epilogue = true;
    test_greedy("llama", LEAN_TYPE_Q8_0, NULL);
    test_greedy("qwen2", LEAN_TYPE_Q4_0, NULL);
    test_dispatches("llama", LEAN_TYPE_F32, NULL, 15, 0);
    ctx_gpu.no_kv_epilogue = false;

    /* 2 layers: embedding + 2 x 6 per layer + final norm, logits (forward.c's list), or 5 per
     * layer where the Q, K, V matmuls do qkv_post's work (not qwen3's head norms); a layer whose
     * Wv has its own format (q4_k_m) one more */
    test_dispatches("llama", LEAN_TYPE_F32, NULL, 15, 2);
    test_dispatches("qwen2", LEAN_TYPE_Q8_0, NULL, 15, 2);
    test_dispatches("qwen3", LEAN_TYPE_Q4_0, NULL, 15, 0);
    test_dispatches("qwen3", LEAN_TYPE_Q4_0, "blk.0.attn_v.weight", 16, 0);
    test_dispatches("llama", LEAN_TYPE_Q4_0, "blk.0.attn_v.weight", 16, 2);
    test_dispatches("qwen2", LEAN_TYPE_Q5_0, "q8_0:blk.0.attn_v.weight", 15, 2); /* stacked all the same */

    lean_model *m = load("build/fixtures/qwen3-q8_0.gguf");
    if (m) {
        test_batching(m);
        test_long_context(m);
        test_errors(m);
        test_choice(m, software);
        lean_model_free(m);
    }
    if (f16) test_f16();
    if (dot) test_int8();
    test_exact(&info);
    return test_finish("test_gpu_forward");
}
