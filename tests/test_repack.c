/* test_repack.c — src/cpu/repack.c: a model's repacked weight copies (cpu/repack.h's R16 and KS
 * layouts) as the CPU contexts share them. The kernels that read the copies are held to their
 * matmul's bits in test_kernels; this checks the model-level part:
 *
 *   sharing     contexts of several kernel tables (avx512, avx2, generic: those this CPU runs)
 *               and an exact one, alive at once on one model of mixed types (Q4_K with a Q8_0
 *               matrix; Q4_0 with a Q8_0 output of 97 rows, the last R16 group padded), each
 *               made after the others have copied what they read: every context's logits are
 *               the bits of the same table on a model of its own. (A table must not read a
 *               copy another table made for a type it has no packed kernel for.)
 *   ordering    the same with the contexts made in the reverse order.
 *   allocation  every allocation of load -> context (copies made) -> prefill failing in turn,
 *               once and from then on: LEAN_ERR_NOMEM each time, nothing leaked (ASan).
 *
 * lean-test: native-only (CI time: the copies are plain C, the same in every build; the wasm
 * tables read none) */
#include "core/common.h"
#include "tiny_model.h"

#include <lean.h>

#define N_IDS 5

/* the last: "cpu" exact (its own kernels, no copies) */
static const char *const backends[] = {"cpu-avx512", "cpu-avx2", "cpu-generic", "cpu exact"};
#define N_BACKENDS 4

static lean_status make_ctx(lean_model *m, const char *backend, lean_ctx **c, lean_error *err) {
    lean_ctx_params p = lean_ctx_default_params();
    p.exact = !strcmp(backend, "cpu exact");
    p.backend = p.exact ? "cpu" : backend;
    p.n_threads = 2;
    p.n_ctx = 16;
    return lean_ctx_create(m, &p, c, err);
}

/* The logits of ids on a fresh load of path with one context of backend; false when this CPU
 * has no such table. */
static bool alone(const char *path, const char *backend, const int32_t *ids, float *logits) {
    lean_error err = {0};
    lean_model *m = NULL;
    lean_ctx *c = NULL;
    CHECK(lean_model_load_file(path, &m, &err) == LEAN_OK, "%s", err.msg);
    lean_status st = m ? make_ctx(m, backend, &c, &err) : LEAN_ERR_ARG;
    if (st == LEAN_OK) CHECK(lean_prefill(c, ids, N_IDS, logits, &err) == LEAN_OK, "%s: %s", backend, err.msg);
    lean_ctx_free(c);
    lean_model_free(m);
    return st == LEAN_OK;
}

static void check_sharing(const char *what, const tiny_spec *sp) {
    char path[256];
    tiny_path(path, sizeof path);
    lean_error err = {0};
    CHECK(tiny_write(sp, path, NULL, &err) == LEAN_OK, "%s", err.msg);
    int32_t ids[N_IDS];
    tiny_ids(ids, N_IDS, sp->n_vocab, 3);
    const size_t lb = sizeof(float) * (size_t)sp->n_vocab;
    float *want[N_BACKENDS], *got = malloc(lb);
    bool have[N_BACKENDS];
    for (int b = 0; b < N_BACKENDS; b++) {
        want[b] = malloc(lb);
        have[b] = alone(path, backends[b], ids, want[b]);
    }
    CHECK(have[2] && have[3], "%s: no generic or exact context", what);
    for (int order = 0; order < 2; order++) {
        lean_model *m = NULL;
        lean_ctx *c[N_BACKENDS] = {NULL};
        CHECK(lean_model_load_file(path, &m, &err) == LEAN_OK, "%s", err.msg);
        for (int i = 0; m && i < N_BACKENDS; i++) { /* all made, then all run */
            const int b = order ? N_BACKENDS - 1 - i : i;
            if (have[b]) CHECK(make_ctx(m, backends[b], &c[b], &err) == LEAN_OK, "%s: %s", backends[b], err.msg);
        }
        for (int b = 0; b < N_BACKENDS; b++) {
            if (!c[b]) continue;
            CHECK(lean_prefill(c[b], ids, N_IDS, got, &err) == LEAN_OK, "%s: %s", backends[b], err.msg);
            CHECK(memcmp(got, want[b], lb) == 0, "%s, %s beside the others (order %d): not its logits alone", what,
                  backends[b], order);
        }
        for (int b = 0; b < N_BACKENDS; b++) lean_ctx_free(c[b]);
        lean_model_free(m);
    }
    int n = 0;
    for (int b = 0; b < N_BACKENDS; b++) n += have[b], free(want[b]);
    printf("%s: %d contexts on one model\n", what, n);
    free(got);
    unlink(path);
}

static void test_alloc_failures(void) {
    tiny_spec sp = tiny_default("llama");
    sp.matrix_type = LEAN_TYPE_Q4_0;
    sp.embd_type = LEAN_TYPE_Q8_0;
    sp.as_q8_0 = "output.weight";
    char path[256];
    tiny_path(path, sizeof path);
    lean_error err = {0};
    CHECK(tiny_write(&sp, path, NULL, &err) == LEAN_OK, "%s", err.msg);
    int32_t ids[N_IDS];
    tiny_ids(ids, N_IDS, sp.n_vocab, 5);
    float logits[97];
    for (int sticky = 0; sticky < 2; sticky++) {
        uint64_t n = 1;
        for (; n < 10000; n++) {
            lean_model *m = NULL;
            lean_ctx *c = NULL;
            lean_alloc_fail_at(n, sticky);
            lean_status st = lean_model_load_file(path, &m, &err);
            if (st == LEAN_OK) st = make_ctx(m, "cpu", &c, &err);
            if (st == LEAN_OK) st = lean_prefill(c, ids, N_IDS, logits, &err);
            lean_alloc_fail_at(0, false);
            lean_ctx_free(c);
            lean_model_free(m);
            if (st == LEAN_OK) break;
            CHECK(st == LEAN_ERR_NOMEM, "failing allocation %llu (sticky %d): status %d: %s", (unsigned long long)n,
                  sticky, st, err.msg);
            if (st != LEAN_ERR_NOMEM) break;
        }
        CHECK(n > 10 && n < 10000, "sticky %d: %llu allocations", sticky, (unsigned long long)n);
    }
    unlink(path);
}

int main(void) {
    tiny_spec k = tiny_default("llama"); /* Q4_K rows: multiples of 256 */
    k.n_embd = 256, k.n_ff = 512, k.head_dim = 64, k.n_layer = 1;
    k.matrix_type = LEAN_TYPE_Q4_K, k.embd_type = LEAN_TYPE_Q8_0, k.as_q8_0 = "blk.0.attn_v.weight";
    check_sharing("q4_k + q8_0", &k);
    tiny_spec l = tiny_default("qwen2");
    l.matrix_type = LEAN_TYPE_Q4_0, l.embd_type = LEAN_TYPE_Q8_0, l.as_q8_0 = "output.weight";
    check_sharing("q4_0 + q8_0 output", &l);
    test_alloc_failures();
    return test_finish("test_repack");
}
