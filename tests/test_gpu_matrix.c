/* test_gpu_matrix.c — Dawn's experimental subgroup matrices (src/gpu/matrix.c, device.c's
 * feature part, webgpu.h's declarations), where they are and where they are not:
 *
 * - Dawn's Null backend (offers every feature, runs nothing): the device is granted the
 *   feature by webgpu.h's value (0x50037), so `enable chromium_experimental_subgroup_matrix`
 *   compiles only if that value is the feature; bad matrix_gemm shapes are refused; the configs' sType (0x5003B) is one the
 *   adapter's info takes, and its neighbours are not; matrix_probe.wgsl and matrix_peak.wgsl
 *   (tools/gpu_bench.c) compile for every component type this Dawn knows (f32, f16, i32, u32)
 *   in shapes of 8 (compile only)
 * - our declarations of WGPUSubgroupMatrixConfig and WGPUAdapterPropertiesSubgroupMatrixConfigs
 *   against the offsets the library's own operator== reads (webgpu.h says how they were found)
 * - the real adapter: every shape it offers is run by the probe and by matrix_gemm.wgsl (a
 *   small matmul in blocks, its columns read column-major) and must equal the CPU's products (small integers: exact in every type); the shader compiler's error is printed if
 *   any. Mesa's llvmpipe offers none (it says so); the H200 does (scripts/h200_gpu.sh matrix),
 *   asked for with vulkan_enable_f16_on_nvidia so that its f16 shapes have shader-f16.
 *
 * lean-test: native-only (Dawn's Null backend and its toggles: native Dawn only) */
#include "gpu/gpu_impl.h"
#include "gpu_test.h"

#include <stdio.h>
#include <string.h>

static void test_layouts(void) {
    CHECK(sizeof(WGPUSubgroupMatrixConfig) == 0x14, "WGPUSubgroupMatrixConfig is %zu bytes, the library's 0x14",
          sizeof(WGPUSubgroupMatrixConfig));
    CHECK(offsetof(WGPUSubgroupMatrixConfig, resultComponentType) == 0x4 &&
              offsetof(WGPUSubgroupMatrixConfig, M) == 0x8 && offsetof(WGPUSubgroupMatrixConfig, N) == 0xc &&
              offsetof(WGPUSubgroupMatrixConfig, K) == 0x10,
          "WGPUSubgroupMatrixConfig's members are not at 0x4, 0x8, 0xc, 0x10");
    CHECK(sizeof(WGPUAdapterPropertiesSubgroupMatrixConfigs) == 0x20 &&
              offsetof(WGPUAdapterPropertiesSubgroupMatrixConfigs, configCount) == 0x10 &&
              offsetof(WGPUAdapterPropertiesSubgroupMatrixConfigs, configs) == 0x18,
          "WGPUAdapterPropertiesSubgroupMatrixConfigs is not 0x20 bytes with members at 0x10 and 0x18");
}

/* Whether the Null adapter's info takes a chained struct of this sType. */
static bool info_takes(lean_gpu *g, WGPUSType stype) {
    WGPUAdapterPropertiesSubgroupMatrixConfigs mc = {{NULL, stype}, 0, NULL};
    WGPUAdapterInfo ai = {.nextInChain = &mc.chain};
    if (g->w.AdapterGetInfo(g->adapter, &ai) != WGPUStatus_Success) return false;
    g->w.AdapterInfoFreeMembers(ai);
    if (stype == WGPUSType_AdapterPropertiesSubgroupMatrixConfigs && g->w.AdapterPropertiesSubgroupMatrixConfigsFreeMembers)
        g->w.AdapterPropertiesSubgroupMatrixConfigsFreeMembers(mc);
    return true;
}

static void test_null_backend(void) {
    const lean_gpu_options opt = {.f16 = LEAN_GPU_OFF, .int8 = LEAN_GPU_OFF, .null_backend = true};
    lean_gpu *g = NULL;
    lean_error err;
    lean_status st = lean_gpu_open(&g, &opt, &err);
    CHECK(st == LEAN_OK, "Dawn's Null backend does not open: %s", err.msg);
    if (st != LEAN_OK) return;
    const lean_gpu_info *in = lean_gpu_get_info(g);
    CHECK(in->subgroup_matrix, "the Null device was not granted feature %#x (subgroup matrices)",
          (unsigned)WGPUFeatureName_ChromiumExperimentalSubgroupMatrix);
    CHECK(info_takes(g, WGPUSType_AdapterPropertiesSubgroupMatrixConfigs),
          "the adapter's info refuses sType %#x (the subgroup-matrix configs)",
          (unsigned)WGPUSType_AdapterPropertiesSubgroupMatrixConfigs);
    printf("the sTypes beside it, which Dawn refuses (its two errors on stderr):\n");
    fflush(stdout);
    CHECK(!info_takes(g, (WGPUSType)(WGPUSType_AdapterPropertiesSubgroupMatrixConfigs - 1)) &&
              !info_takes(g, (WGPUSType)(WGPUSType_AdapterPropertiesSubgroupMatrixConfigs + 1)),
          "the adapter's info takes the sTypes beside %#x too: the check means nothing",
          (unsigned)WGPUSType_AdapterPropertiesSubgroupMatrixConfigs);
    static const char *const types[][2] = {{"f32", "f32"}, {"f16", "f16"}, {"f16", "f32"}, {"i32", "i32"},
                                           {"u32", "u32"}};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        lean_gpu_matrix_config c = {.m = 8, .n = 8, .k = 8};
        snprintf(c.type, sizeof c.type, "%s", types[i][0]);
        snprintf(c.result, sizeof c.result, "%s", types[i][1]);
        bool pass = false;
        char report[256];
        st = lean_gpu_matrix_probe(g, &c, false, &pass, report, sizeof report, &err);
        CHECK(st == LEAN_OK && pass, "matrix_probe %s -> %s does not compile on the Null backend: %s", types[i][0],
              types[i][1], st == LEAN_OK ? report : err.msg);
        const lean_gpu_const iter = {"ITER", 'u', 4};
        lean_gpu_pipeline *p = NULL;
        st = lean_gpu_matrix_pipeline(g, &c, "matrix_peak", &iter, 1, &p, &err);
        CHECK(st == LEAN_OK, "matrix_peak %s -> %s (gpu_bench matrix) does not compile on the Null backend: %s",
              types[i][0], types[i][1], err.msg);
        const lean_gpu_gemm m = {.rows = 32, .cols = 32, .depth = 16, .tm = 2, .tn = 2};
        st = lean_gpu_matrix_gemm_check(g, &c, &m, false, &pass, report, sizeof report, &err);
        CHECK(st == LEAN_OK && pass, "matrix_gemm %s -> %s does not compile on the Null backend: %s", types[i][0],
              types[i][1], st == LEAN_OK ? report : err.msg);
    }
    lean_gpu_matrix_config bad = {.type = "f32", .result = "f32", .m = 8, .n = 0, .k = 8};
    bool pass = true;
    char report[256];
    st = lean_gpu_matrix_probe(g, &bad, false, &pass, report, sizeof report, &err);
    CHECK(st == LEAN_ERR_ARG && !pass && strstr(err.msg, "1 .. 64"), "a shape with N = 0: status %d, '%s'", st,
          err.msg);
    const lean_gpu_matrix_config f32 = {.type = "f32", .result = "f32", .m = 8, .n = 8, .k = 8};
    static const lean_gpu_gemm bad_gemm[] = {{24, 32, 16, 2, 2}, {32, 32, 12, 2, 2}, {32, 32, 16, 5, 1},
                                             {32, 32, 344, 1, 1}};
    for (size_t i = 0; i < sizeof bad_gemm / sizeof bad_gemm[0]; i++) {
        st = lean_gpu_matrix_gemm_check(g, &f32, &bad_gemm[i], false, &pass, report, sizeof report, &err);
        CHECK(st == LEAN_ERR_ARG, "matrix_gemm %u x %u x %u in blocks of %u x %u: status %d, not LEAN_ERR_ARG ('%s')",
              bad_gemm[i].rows, bad_gemm[i].cols, bad_gemm[i].depth, bad_gemm[i].tm, bad_gemm[i].tn, st, err.msg);
    }
    lean_gpu_close(g);
}

/* Every shape the real adapter offers, run; none is not a failure (llvmpipe has none). */
static void test_adapter(void) {
    if (test_gpu_skipped("test_gpu_matrix")) return;
    lean_gpu_options opt = test_gpu_exact;
    opt.nvidia_f16 = true;
    lean_gpu *g = NULL;
    lean_error err;
    lean_status st = lean_gpu_open(&g, &opt, &err);
    CHECK(st == LEAN_OK, "no WebGPU device (run scripts/setup_webgpu.sh; LEAN_TEST_GPU=0 skips): %s", err.msg);
    if (st != LEAN_OK) return;
    char text[2048];
    lean_gpu_describe(g, text, sizeof text);
    printf("%s", text);
    const lean_gpu_info *in = lean_gpu_get_info(g);
    if (!in->n_matrix_configs) printf("subgroup matrices: not here: %s offers none\n", in->adapter);
    for (uint32_t i = 0; i < in->n_matrix_configs; i++) {
        const lean_gpu_matrix_config *c = &in->matrix_configs[i];
        bool pass = false;
        char report[512];
        st = lean_gpu_matrix_probe(g, c, true, &pass, report, sizeof report, &err);
        if (st == LEAN_OK) printf("%s\n", report);
        else printf("FAIL %s\n", err.msg);
        CHECK(st == LEAN_OK && pass, "subgroup-matrix shape %u of %u on %s: %s", i + 1, in->n_matrix_configs,
              in->adapter, st == LEAN_OK ? report : err.msg);
        /* the matmul: 2 x 2 workgroups of 2 x 2 blocks, 4 steps through the depth */
        const lean_gpu_gemm m = {.rows = 4 * c->m, .cols = 4 * c->n, .depth = 4 * c->k, .tm = 2, .tn = 2};
        st = lean_gpu_matrix_gemm_check(g, c, &m, true, &pass, report, sizeof report, &err);
        if (st == LEAN_OK) printf("%s\n", report);
        else printf("FAIL %s\n", err.msg);
        CHECK(st == LEAN_OK && pass, "matrix_gemm on shape %u of %u on %s: %s", i + 1, in->n_matrix_configs,
              in->adapter, st == LEAN_OK ? report : err.msg);
    }
    lean_gpu_close(g);
}

int main(void) {
    test_layouts();
    test_null_backend();
    test_adapter();
    return test_finish("test_gpu_matrix");
}
