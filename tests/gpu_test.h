/* gpu_test.h — how every GPU test program starts: the LEAN_TEST_GPU=0 skip, the F32 path,
 * then the device (EGL's platform: testlib.c).
 * Header-only, not in testlib.c: testlib.c is also built for wasm, where there is no GPU. */
#ifndef LEAN_GPU_TEST_H
#define LEAN_GPU_TEST_H

#include "gpu/gpu.h"
#include "gpu/ops.h"
#include "test.h"

#include <stdlib.h>

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

#endif
