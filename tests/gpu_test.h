/* gpu_test.h — how every GPU test program starts: the LEAN_TEST_GPU=0 skip, the F32 path,
 * then the device (EGL's platform: testlib.c); and the contexts of a test that sweeps the
 * backends, the GPU among them (be_spec, test_ctx).
 * Header-only, not in testlib.c: testlib.c is also built for wasm, where there is no GPU. */
#ifndef LEAN_GPU_TEST_H
#define LEAN_GPU_TEST_H

#include "gpu/gpu.h"
#include "gpu/ops.h"
#include "test.h"

#include <stdlib.h>
#include <string.h>

/* The F32 path, whatever the adapter grants: the tests hold it to the references; the f16
 * path (tiled_f16.wgsl) and the 8-bit prefill are held to it by test_gpu_weights and
 * test_gpu_forward, which turn them on themselves. Contexts: lean_ctx_params.exact. */
static const lean_gpu_options test_gpu_exact = {.f16 = LEAN_GPU_OFF, .int8 = LEAN_GPU_OFF};

/* The device for test program `name` (the caller closes it), opened with test_gpu_exact, or
 * NULL — after test_gpu_skipped's line when LEAN_TEST_GPU=0 asks to skip, or after a failed
 * CHECK when none opens (a missing GPU is a failure otherwise); main then returns
 * test_finish(name). */
static inline lean_gpu *test_gpu_open(const char *name) {
    if (test_gpu_skipped(name)) return NULL;
    lean_gpu *g = NULL;
    lean_error err;
    const lean_status st = lean_gpu_open(&g, &test_gpu_exact, &err);
    CHECK(st == LEAN_OK, "%s: no WebGPU device (run scripts/setup_webgpu.sh; LEAN_TEST_GPU=0 skips): %s", name,
          err.msg);
    return st == LEAN_OK ? g : NULL;
}

/* The ledger's line for a GPU variant that needs an adapter feature (tests/run.sh keeps the
 * ledger of which variant ran in which stage, and fails when one ran in none): whether g can run
 * variant, after "variant NAME: ran" or "variant NAME: not here: WHY". The variants, as
 * run.sh's VARIANTS lists them: "subgroups" (reduce_sg.wgsl: lean_gpu_subgroup_size, so
 * subgroups of one fixed size), "f16" (tiled_f16.wgsl: shader-f16), "int8"
 * (matmul_tiled_i8.wgsl: WGSL's packed_4x8_integer_dot_product), "timestamps" (the profile's
 * kernel times: timestamp-query). A program that lacks the
 * feature says so here rather than returning silently; one that prints "ran" runs it. */
static inline bool test_gpu_variant(lean_gpu *g, const char *variant) {
    const lean_gpu_info *in = lean_gpu_get_info(g);
    char why[128] = "";
    if (strcmp(variant, "subgroups") == 0) {
        if (!in->subgroups)
            snprintf(why, sizeof why, "the adapter has no subgroups");
        else if (!lean_gpu_subgroup_size(g))
            snprintf(why, sizeof why, "subgroups of %u to %u lanes, not one fixed size", in->subgroup_min_size,
                     in->subgroup_max_size);
    } else if (strcmp(variant, "f16") == 0) {
        if (!in->shader_f16) snprintf(why, sizeof why, "the adapter has no shader-f16");
    } else if (strcmp(variant, "int8") == 0) {
        if (!in->packed_dot) snprintf(why, sizeof why, "WGSL has no packed_4x8_integer_dot_product here");
    } else if (strcmp(variant, "timestamps") == 0) {
        if (!in->timestamp_query) snprintf(why, sizeof why, "the adapter has no timestamp-query");
    } else {
        CHECK(0, "test_gpu_variant: unknown variant '%s'", variant);
        return false;
    }
    if (*why)
        printf("variant %s: not here: %s (%s)\n", variant, why, in->adapter);
    else
        printf("variant %s: ran\n", variant);
    return !*why;
}

/* The argmax kernel, which only tests run (tests/shaders/argmax.wgsl, read from the repository,
 * the tests' working directory): out[0] (u32) = the argmax of x (n), the lowest index among
 * equals, in one workgroup of GPU_OP_WG. */
static inline lean_status test_gpu_argmax_create(lean_gpu *g, lean_gpu_buf *x, lean_gpu_buf *out, int32_t n,
                                                 gpu_op *op, lean_error *err) {
    static const char path[] = "tests/shaders/argmax.wgsl";
    *op = (gpu_op){.wg_x = 1};
    size_t len = 0;
    uint8_t *bytes = test_read_file(path, &len);
    char *text = bytes ? realloc(bytes, len + 1) : NULL;
    if (!text) {
        free(bytes);
        return LEAN_FAIL(err, LEAN_ERR_IO, "%s: cannot read it (run from the repository)", path);
    }
    text[len] = 0;
    const char *src[] = {text};
    const lean_gpu_const k[] = {{"N", 'u', n}, {"WG", 'u', GPU_OP_WG}};
    const lean_gpu_bind b[] = {{x, 0, 0}, {out, 0, 0}};
    lean_status st = lean_gpu_pipeline_create(g, "argmax", src, 1, k, 2, &op->pipe, err);
    if (st == LEAN_OK) st = lean_gpu_bindgroup_create(g, op->pipe, b, 2, "argmax", &op->bg, err);
    free(text);
    return st;
}

/* A backend a sweep runs: lean_ctx_params.backend and .exact. */
typedef struct be_spec {
    const char *name;
    bool exact;
} be_spec;

/* A context of m on b: n_ctx positions, prefill chunks of n_batch; NULL after a failed CHECK. */
static inline lean_ctx *test_ctx(const lean_model *m, const be_spec *b, int32_t n_ctx, int32_t n_batch) {
    lean_ctx_params p = lean_ctx_default_params();
    p.backend = b->name;
    p.exact = b->exact;
    p.n_ctx = n_ctx;
    p.n_batch = n_batch;
    lean_ctx *c = NULL;
    lean_error err = {0};
    CHECK(lean_ctx_create(m, &p, &c, &err) == LEAN_OK, "%s (exact %d): %s", b->name, b->exact, err.msg);
    return c;
}

/* The first i < n where ids a[i] and b[i] differ, or -1. */
static inline int test_first_diff(const int32_t *a, const int32_t *b, int n) {
    for (int i = 0; i < n; i++)
        if (a[i] != b[i]) return i;
    return -1;
}

#endif
