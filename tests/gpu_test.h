/* gpu_test.h — how every GPU test program starts: the LEAN_TEST_GPU=0 skip, the F32 path,
 * then the device (EGL's platform: testlib.c).
 * Header-only, not in testlib.c: testlib.c is also built for wasm, where there is no GPU. */
#ifndef LEAN_GPU_TEST_H
#define LEAN_GPU_TEST_H

#include "gpu.h"
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

#endif
