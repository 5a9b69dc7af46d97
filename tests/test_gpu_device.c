/* test_gpu_device.c — the WebGPU runtime (src/gpu: gpu.h over webgpu.h) on a real adapter:
 * in CI, Dawn over Mesa llvmpipe (scripts/setup_webgpu.sh installs it next to the build).
 *
 * - our struct declarations (src/gpu/webgpu.h) against the library's own layouts
 *   (tests/data/dawn-layouts.txt, made from its debug info by scripts/dawn_layouts.py):
 *   sizes and offsets
 * - open: adapter, backend, limits read back and plausible (at least WebGPU's defaults)
 * - the embedded shaders equal their files
 * - round trips: write, dispatch, read (ragged sizes, unaligned reads, writes over 8 MiB in
 *   pieces, a READBACK buffer, copies)
 * - the pipeline cache; a broken shader names the pipeline and line; bad constants
 * - wrong bind groups, bad dispatches, out-of-range buffers: errors, not crashes
 * - lean_gpu_lose_device: every later call fails with LEAN_ERR_DEVICE
 * - every allocation of a pass failing in turn: LEAN_ERR_NOMEM, nothing leaked
 *
 * Without a library or adapter the test FAILS (CI always has them after setup) and says why.
 * LEAN_TEST_GPU=0 skips the device part on a machine without them, loudly.
 *
 * lean-test: webgpu (in wasm32 only the webgpu stage runs it: a JavaScript host with WebGPU) */
#include "gpu/gpu_impl.h"
#include "gpu_test.h"
#include "gpu/test_hooks.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- layouts: offsets and sizes from tests/data/dawn-layouts.txt ----
 * Dawn's x86-64 ABI. Native only: in wasm32 (web.c) no struct crosses to the library. */
#ifndef __wasi__

/* The library's number for "struct TYPE" or "field TYPE MEMBER" (what: "TYPE" or
 * "TYPE.MEMBER"), or -1 when the file has none. */
static long dawn_layout(const char *text, const char *what) {
    char type[96], line[160];
    const char *dot = strchr(what, '.');
    snprintf(type, sizeof type, "%.*s", dot ? (int)(dot - what) : (int)strlen(what), what);
    if (dot) snprintf(line, sizeof line, "\nfield %s %s ", type, dot + 1);
    else snprintf(line, sizeof line, "\nstruct %s ", type);
    const char *at = strstr(text, line);
    return at ? strtol(at + strlen(line), NULL, 16) : -1;
}

#define LAYOUT(type, field) {#type "." #field, offsetof(type, field)}
#define SIZE(type) {#type, sizeof(type)}
static void test_layouts(void) {
    static const struct {
        const char *what;
        size_t got;
    } t[] = {
        SIZE(WGPUStringView), SIZE(WGPUChainedStruct), SIZE(WGPUFuture),
        SIZE(WGPUFutureWaitInfo), LAYOUT(WGPUFutureWaitInfo, completed),
        SIZE(WGPUInstanceCapabilities), LAYOUT(WGPUInstanceCapabilities, timedWaitAnyMaxCount),
        SIZE(WGPUInstanceDescriptor), LAYOUT(WGPUInstanceDescriptor, capabilities),
        SIZE(WGPURequestAdapterOptions), LAYOUT(WGPURequestAdapterOptions, powerPreference),
        LAYOUT(WGPURequestAdapterOptions, backendType), LAYOUT(WGPURequestAdapterOptions, compatibleSurface),
        SIZE(WGPUAdapterInfo), LAYOUT(WGPUAdapterInfo, device), LAYOUT(WGPUAdapterInfo, backendType),
        LAYOUT(WGPUAdapterInfo, adapterType), LAYOUT(WGPUAdapterInfo, subgroupMaxSize),
        SIZE(WGPULimits), LAYOUT(WGPULimits, maxStorageBuffersPerShaderStage),
        LAYOUT(WGPULimits, maxUniformBufferBindingSize), LAYOUT(WGPULimits, maxStorageBufferBindingSize),
        LAYOUT(WGPULimits, minUniformBufferOffsetAlignment), LAYOUT(WGPULimits, maxBufferSize),
        LAYOUT(WGPULimits, maxComputeWorkgroupStorageSize), LAYOUT(WGPULimits, maxComputeWorkgroupsPerDimension),
        LAYOUT(WGPULimits, maxImmediateSize), SIZE(WGPUQueueDescriptor),
        SIZE(WGPURequestAdapterCallbackInfo), LAYOUT(WGPURequestAdapterCallbackInfo, callback),
        LAYOUT(WGPURequestAdapterCallbackInfo, userdata2), SIZE(WGPURequestDeviceCallbackInfo),
        SIZE(WGPUDeviceLostCallbackInfo), SIZE(WGPUPopErrorScopeCallbackInfo),
        SIZE(WGPUBufferMapCallbackInfo), SIZE(WGPUQueueWorkDoneCallbackInfo),
        SIZE(WGPUUncapturedErrorCallbackInfo), LAYOUT(WGPUUncapturedErrorCallbackInfo, userdata1),
        SIZE(WGPUDeviceDescriptor), LAYOUT(WGPUDeviceDescriptor, requiredFeatures),
        LAYOUT(WGPUDeviceDescriptor, requiredLimits), LAYOUT(WGPUDeviceDescriptor, defaultQueue),
        LAYOUT(WGPUDeviceDescriptor, deviceLostCallbackInfo),
        LAYOUT(WGPUDeviceDescriptor, uncapturedErrorCallbackInfo), SIZE(WGPUBufferDescriptor),
        LAYOUT(WGPUBufferDescriptor, usage), LAYOUT(WGPUBufferDescriptor, mappedAtCreation),
        SIZE(WGPUShaderModuleDescriptor), SIZE(WGPUConstantEntry), LAYOUT(WGPUConstantEntry, value),
        SIZE(WGPUComputeState), LAYOUT(WGPUComputeState, entryPoint),
        LAYOUT(WGPUComputeState, constants), SIZE(WGPUComputePipelineDescriptor),
        LAYOUT(WGPUComputePipelineDescriptor, compute), SIZE(WGPUBindGroupEntry),
        LAYOUT(WGPUBindGroupEntry, buffer), LAYOUT(WGPUBindGroupEntry, size),
        LAYOUT(WGPUBindGroupEntry, textureView), SIZE(WGPUBindGroupDescriptor),
        LAYOUT(WGPUBindGroupDescriptor, entries), SIZE(WGPUCommandEncoderDescriptor),
        SIZE(WGPUPassTimestampWrites), SIZE(WGPUComputePassDescriptor),
        LAYOUT(WGPUComputePassDescriptor, timestampWrites), SIZE(WGPUCommandBufferDescriptor),
    };
    size_t len;
    char *text = (char *)test_read_file("tests/data/dawn-layouts.txt", &len);
    CHECK(text != NULL, "cannot read tests/data/dawn-layouts.txt (scripts/dawn_layouts.py makes it)");
    if (!text) return;
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        const long want = dawn_layout(text, t[i].what);
        CHECK(want >= 0 && t[i].got == (size_t)want, "%s: %zu, the library has %ld (-1: not in the file)", t[i].what,
              t[i].got, want);
    }
    free(text);
    /* not in the library's debug info (a chained struct): the standard's {chain, code} */
    CHECK(sizeof(WGPUShaderSourceWGSL) == 0x20 && offsetof(WGPUShaderSourceWGSL, code) == 0x10,
          "WGPUShaderSourceWGSL: size %zu, code at %zu", sizeof(WGPUShaderSourceWGSL),
          offsetof(WGPUShaderSourceWGSL, code));
}
#endif

/* ---- helpers ---- */

static lean_gpu_pipeline *make_pipeline(lean_gpu *g, const char *label, const char *src, const lean_gpu_const *c,
                                        int n) {
    lean_error err;
    lean_gpu_pipeline *p = NULL;
    lean_status st = lean_gpu_pipeline_create(g, label, &src, 1, c, n, &p, &err);
    CHECK(st == LEAN_OK && p, "pipeline '%s': %s", label, st ? err.msg : "");
    return p;
}

/* y[i] = x[i] * MUL + ADD for i < N (u32, wrapping). */
static const char *const affine_src =
    "@group(0) @binding(0) var<storage, read> x: array<u32>;\n"
    "@group(0) @binding(1) var<storage, read_write> y: array<u32>;\n"
    "@compute @workgroup_size(64)\n"
    "fn main(@builtin(global_invocation_id) id: vec3<u32>) {\n"
    "    if (id.x < N) { y[id.x] = x[id.x] * MUL + ADD; }\n"
    "}\n";

static uint32_t rng_state = 12345;
static uint32_t rng(void) {
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 17, rng_state ^= rng_state << 5;
    return rng_state;
}

/* ---- device tests ---- */

static void test_info(lean_gpu *g) {
    const lean_gpu_info *in = lean_gpu_get_info(g);
    CHECK(in->adapter[0] && in->backend[0], "adapter '%s', backend '%s'", in->adapter, in->backend);
    CHECK(strcmp(in->backend, "Null") != 0, "the Null backend runs nothing");
    CHECK(!strcmp(in->feature_level, "core") || !strcmp(in->feature_level, "compatibility"), "feature level '%s'",
          in->feature_level);
    /* WebGPU's default limits are the least an adapter may offer (compat where lower). */
    CHECK(in->max_storage_binding >= (128u << 20), "maxStorageBufferBindingSize %llu",
          (unsigned long long)in->max_storage_binding);
    CHECK(in->max_buffer >= (256u << 20) && in->max_buffer >= in->max_storage_binding, "maxBufferSize %llu",
          (unsigned long long)in->max_buffer);
    CHECK(in->max_storage_buffers_per_stage >= 4 && in->max_storage_buffers_per_stage <= 1u << 20,
          "maxStorageBuffersPerShaderStage %u", in->max_storage_buffers_per_stage);
    CHECK(in->max_workgroup_storage >= 16384 && in->max_workgroup_storage <= 1u << 24,
          "maxComputeWorkgroupStorageSize %u", in->max_workgroup_storage);
    CHECK(in->max_invocations >= 128 && in->max_workgroup_x >= 128 && in->max_workgroup_y >= 128 &&
              in->max_workgroup_z >= 64,
          "invocations %u, size %u x %u x %u", in->max_invocations, in->max_workgroup_x, in->max_workgroup_y,
          in->max_workgroup_z);
    CHECK(in->max_workgroups_per_dim >= 65535, "maxComputeWorkgroupsPerDimension %u", in->max_workgroups_per_dim);
    uint32_t a = in->min_storage_offset_align, u = in->min_uniform_offset_align;
    CHECK(a >= 4 && a <= 256 && !(a & (a - 1)) && u >= 4 && u <= 256 && !(u & (u - 1)), "alignments %u, %u", a, u);
    CHECK(!in->subgroups || (in->subgroup_min_size >= 1 && in->subgroup_min_size <= in->subgroup_max_size),
          "subgroup sizes %u-%u", in->subgroup_min_size, in->subgroup_max_size);
    char text[2048];
    lean_gpu_describe(g, text, sizeof text);
    CHECK(strstr(text, in->adapter) && strstr(text, in->backend), "describe: %s", text);
}

static void test_shaders(void) {
    size_t len = 0;
    uint8_t *file = test_read_file("src/gpu/shaders/fill.wgsl", &len);
    const char *fill = lean_gpu_shader("fill");
    CHECK(file && fill && strlen(fill) == len && memcmp(fill, file, len) == 0, "embedded fill.wgsl differs");
    free(file);
    CHECK(lean_gpu_shader("no_such_shader") == NULL && lean_gpu_shader(NULL) == NULL, "unknown shader names");
}

/* x -> y through a dispatch; also the fill kernel, and reads at unaligned offsets. */
static void test_round_trip(lean_gpu *g, uint32_t n) {
    lean_error err;
    lean_gpu_buf *x = NULL, *y = NULL;
    CHECK(lean_gpu_buf_create(g, n * 4ull, LEAN_GPU_STORAGE, "x", &x, &err) == LEAN_OK, "%s", err.msg);
    CHECK(lean_gpu_buf_create(g, n * 4ull + 2, LEAN_GPU_STORAGE, "y", &y, &err) == LEAN_OK, "%s", err.msg);
    if (!x || !y) return;
    CHECK(lean_gpu_buf_size(y) == (n * 4ull + 2 + 15) / 16 * 16, "size rounds up to 16: %llu",
          (unsigned long long)lean_gpu_buf_size(y));
    uint32_t *in = malloc(n * 4ull), *out = malloc(n * 4ull + 4);
    for (uint32_t i = 0; i < n; i++) in[i] = rng();
    CHECK(lean_gpu_buf_write(g, x, 0, in, n * 4ull, &err) == LEAN_OK, "write: %s", err.msg);
    lean_gpu_const c[] = {{"N", 'u', n}, {"MUL", 'u', 2654435761.0}, {"ADD", 'u', 12345}};
    lean_gpu_pipeline *p = make_pipeline(g, "affine", affine_src, c, 3);
    lean_gpu_bind binds[2] = {{x, 0, 0}, {y, 0, n * 4ull}};
    lean_gpu_bindgroup *bg = NULL;
    if (p) CHECK(lean_gpu_bindgroup_create(g, p, binds, 2, "affine", &bg, &err) == LEAN_OK, "%s", err.msg);
    lean_gpu_cmd *cmd = NULL;
    CHECK(lean_gpu_begin(g, &cmd, &err) == LEAN_OK, "%s", err.msg);
    if (!cmd) return;
    lean_gpu_dispatch(cmd, p, bg, (n + 63) / 64, 1, 1);
    CHECK(lean_gpu_submit(cmd, &err) == LEAN_OK, "submit: %s", err.msg);
    CHECK(lean_gpu_finish(g, &err) == LEAN_OK, "finish: %s", err.msg);
    memset(out, 0xab, n * 4ull + 4);
    CHECK(lean_gpu_buf_read(g, y, 0, out, n * 4ull + 4, &err) == LEAN_OK, "read: %s", err.msg);
    uint32_t bad = 0;
    for (uint32_t i = 0; i < n; i++) bad += out[i] != in[i] * 2654435761u + 12345u;
    CHECK(bad == 0 && out[n] == 0, "n %u: %u elements wrong; past the end %u (starts zeroed)", n, bad, out[n]);
    /* 10 bytes from byte 6: the read path widens to whole words and trims. */
    uint8_t part[10];
    if (n >= 4) {
        CHECK(lean_gpu_buf_read(g, x, 6, part, sizeof part, &err) == LEAN_OK, "%s", err.msg);
        CHECK(memcmp(part, (uint8_t *)in + 6, sizeof part) == 0, "unaligned read differs");
    }
    lean_gpu_bindgroup_free(bg);
    lean_gpu_buf_free(x);
    lean_gpu_buf_free(y);
    free(in);
    free(out);
}

/* The embedded fill kernel into a buffer, copied into a READBACK buffer and read directly. */
static void test_fill_and_readback(lean_gpu *g) {
    enum { N = 777 };
    lean_error err;
    const char *src = lean_gpu_shader("fill");
    lean_gpu_const c[] = {{"WG", 'u', 64}, {"N", 'u', N}, {"VALUE", 'u', 1000}, {"STEP", 'u', 7}};
    lean_gpu_pipeline *p = src ? make_pipeline(g, "fill", src, c, 4) : NULL;
    lean_gpu_buf *b = NULL, *rb = NULL;
    CHECK(lean_gpu_buf_create(g, N * 4, LEAN_GPU_STORAGE, "fill", &b, &err) == LEAN_OK, "%s", err.msg);
    CHECK(lean_gpu_buf_create(g, N * 4, LEAN_GPU_READBACK, "fill readback", &rb, &err) == LEAN_OK, "%s", err.msg);
    lean_gpu_bindgroup *bg = NULL;
    lean_gpu_bind bind = {b, 0, 0};
    if (p && b) CHECK(lean_gpu_bindgroup_create(g, p, &bind, 1, "fill", &bg, &err) == LEAN_OK, "%s", err.msg);
    lean_gpu_cmd *cmd = NULL;
    if (!bg || !rb || lean_gpu_begin(g, &cmd, &err) != LEAN_OK) return;
    lean_gpu_dispatch(cmd, p, bg, (N + 63) / 64, 1, 1);
    lean_gpu_copy(cmd, b, 0, rb, 0, N * 4);
    CHECK(lean_gpu_submit(cmd, &err) == LEAN_OK, "%s", err.msg);
    uint32_t out[N];
    CHECK(lean_gpu_buf_read(g, rb, 0, out, sizeof out, &err) == LEAN_OK, "%s", err.msg);
    uint32_t bad = 0;
    for (uint32_t i = 0; i < N; i++) bad += out[i] != 1000 + 7 * i;
    CHECK(bad == 0, "fill: %u wrong", bad);
    uint32_t two[2];
    CHECK(lean_gpu_buf_read(g, rb, 12, two, 8, &err) == LEAN_OK && two[0] == 1021 && two[1] == 1028,
          "readback at offset 12 (not 8-aligned): %u %u", two[0], two[1]);
    lean_gpu_buf_free(rb);
    lean_gpu_buf_free(b); /* bg is left to lean_gpu_close */
}

/* A write over 8 MiB goes in pieces; it must all land. */
static void test_large_write(lean_gpu *g) {
    const uint64_t bytes = (20ull << 20) + 12;
    lean_error err;
    lean_gpu_buf *b = NULL;
    CHECK(lean_gpu_buf_create(g, bytes, LEAN_GPU_STORAGE, "large", &b, &err) == LEAN_OK, "%s", err.msg);
    uint32_t *in = malloc(bytes), *out = malloc(bytes);
    if (!b || !in || !out) return free(in), free(out);
    for (uint64_t i = 0; i < bytes / 4; i++) in[i] = (uint32_t)(i * 2654435761u);
    CHECK(lean_gpu_buf_write(g, b, 0, in, bytes, &err) == LEAN_OK, "%s", err.msg);
    CHECK(lean_gpu_buf_read(g, b, 0, out, bytes, &err) == LEAN_OK, "%s", err.msg);
    CHECK(memcmp(in, out, bytes) == 0, "20 MiB write/read differs");
    CHECK(lean_gpu_buf_write(g, b, 8, in, 16, &err) == LEAN_OK, "%s", err.msg);
    CHECK(lean_gpu_buf_read(g, b, 8, out, 16, &err) == LEAN_OK && memcmp(in, out, 16) == 0, "write at offset 8");
    lean_gpu_buf_free(b);
    free(in);
    free(out);
}

static void test_pipeline_cache_and_errors(lean_gpu *g) {
    lean_error err;
    lean_gpu_const c1[] = {{"N", 'u', 10}, {"MUL", 'u', 3}, {"ADD", 'u', 1}};
    lean_gpu_const c2[] = {{"N", 'u', 11}, {"MUL", 'u', 3}, {"ADD", 'u', 1}};
    lean_gpu_pipeline *a = make_pipeline(g, "a", affine_src, c1, 3), *b = make_pipeline(g, "b", affine_src, c1, 3);
    lean_gpu_pipeline *d = make_pipeline(g, "d", affine_src, c2, 3);
    CHECK(a && a == b && d && d != a, "the cache: same text, same pipeline; other constants, another");

    /* Line 3 of the full text: one constant line, then line 2 of the source. */
    const char *broken = "@compute @workgroup_size(1)\nfn main() { let v: u32 = K + ; }\n";
    lean_gpu_const k = {"K", 'u', 1};
    lean_gpu_pipeline *p = NULL;
    lean_status st = lean_gpu_pipeline_create(g, "broken kernel", &broken, 1, &k, 1, &p, &err);
    CHECK(st == LEAN_ERR_UNSUPPORTED && !p, "broken shader: status %d", st);
    CHECK(strstr(err.msg, "pipeline 'broken kernel'") && strstr(err.msg, "line 3:") &&
              strstr(err.msg, "source 0 line 2"),
          "message names the pipeline and line: %s", err.msg);
    /* Valid WGSL, invalid pipeline: no entry point "main". */
    const char *no_main = "@compute @workgroup_size(1)\nfn other() {}\n";
    st = lean_gpu_pipeline_create(g, "no main", &no_main, 1, NULL, 0, &p, &err);
    CHECK(st == LEAN_ERR_UNSUPPORTED && strstr(err.msg, "pipeline 'no main'"), "no entry point: %d %s", st, err.msg);
    lean_gpu_const bad[] = {{"N", 'u', -1}, {"X", 'i', 0.5}, {"F", 'f', 1e300}, {"1x", 'u', 1}, {"T", 'q', 1}};
    for (int i = 0; i < 5; i++) {
        st = lean_gpu_pipeline_create(g, "consts", &affine_src, 1, &bad[i], 1, &p, &err);
        CHECK(st == LEAN_ERR_ARG && strstr(err.msg, "constant"), "constant %d: %d %s", i, st, err.msg);
    }
    lean_gpu_const ok[] = {{"A", 'i', -2147483648.0}, {"B", 'f', -0.1}, {"C", 'u', 4294967295.0}};
    const char *use = "@compute @workgroup_size(1)\nfn main() { _ = A; _ = B; _ = C; }\n";
    p = make_pipeline(g, "constant edges", use, ok, 3);
    CHECK(p != NULL, "constants at their types' edges compile");
}

static void test_bad_bindings(lean_gpu *g) {
    lean_error err;
    lean_gpu_const c[] = {{"N", 'u', 4}, {"MUL", 'u', 1}, {"ADD", 'u', 0}};
    lean_gpu_pipeline *p = make_pipeline(g, "affine", affine_src, c, 3);
    lean_gpu_buf *s = NULL, *u = NULL;
    CHECK(lean_gpu_buf_create(g, 64, LEAN_GPU_STORAGE, "s", &s, &err) == LEAN_OK, "%s", err.msg);
    CHECK(lean_gpu_buf_create(g, 64, LEAN_GPU_UNIFORM, "u", &u, &err) == LEAN_OK, "%s", err.msg);
    if (!p || !s || !u) return;
    lean_gpu_bindgroup *bg = NULL;
    lean_gpu_bind one[1] = {{s, 0, 0}}, three[3] = {{s, 0, 0}, {s, 0, 0}, {s, 0, 0}};
    lean_gpu_bind uniform[2] = {{s, 0, 0}, {u, 0, 0}}, offset[2] = {{s, 4, 16}, {s, 0, 0}};
    lean_gpu_bind none[2] = {{s, 0, 0}, {NULL, 0, 0}}, past[2] = {{s, 0, 128}, {s, 0, 0}};
    struct {
        const lean_gpu_bind *b;
        int n;
        const char *what;
    } cases[] = {{one, 1, "too few"},          {three, 3, "too many"},       {uniform, 2, "a uniform as storage"},
                 {offset, 2, "misaligned offset"}, {none, 2, "no buffer"}, {past, 2, "past the end"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lean_status st = lean_gpu_bindgroup_create(g, p, cases[i].b, cases[i].n, "wrong", &bg, &err);
        CHECK(st == LEAN_ERR_ARG && !bg && strstr(err.msg, "bind group 'wrong'"), "%s: %d %s", cases[i].what, st,
              err.msg);
    }
    /* A bind group of another pipeline's "auto" layout: caught at submit. */
    lean_gpu_const c2[] = {{"N", 'u', 5}, {"MUL", 'u', 1}, {"ADD", 'u', 0}};
    lean_gpu_pipeline *q = make_pipeline(g, "affine 2", affine_src, c2, 3);
    lean_gpu_bind two[2] = {{s, 0, 0}, {s, 0, 0}};
    lean_gpu_cmd *cmd = NULL;
    if (q && lean_gpu_bindgroup_create(g, q, two, 2, "of q", &bg, &err) == LEAN_OK &&
        lean_gpu_begin(g, &cmd, &err) == LEAN_OK) {
        lean_gpu_dispatch(cmd, p, bg, 1, 1, 1);
        lean_status st = lean_gpu_submit(cmd, &err);
        CHECK(st == LEAN_ERR_ARG && strstr(err.msg, "submit"), "foreign bind group: %d %s", st, err.msg);
    }
    if (lean_gpu_begin(g, &cmd, &err) == LEAN_OK) {
        lean_gpu_dispatch(cmd, p, NULL, 1, 1, 1);
        lean_status st = lean_gpu_submit(cmd, &err);
        CHECK(st == LEAN_ERR_ARG && strstr(err.msg, "bind group"), "NULL bind group: %d %s", st, err.msg);
    }
    if (lean_gpu_begin(g, &cmd, &err) == LEAN_OK) {
        lean_gpu_copy(cmd, s, 0, s, 32, 64); /* overlapping, and past the end */
        lean_status st = lean_gpu_submit(cmd, &err);
        CHECK(st == LEAN_ERR_ARG, "bad copy: %d %s", st, err.msg);
    }
    CHECK(lean_gpu_finish(g, &err) == LEAN_OK, "the device survives recording errors: %s", err.msg);
    lean_gpu_buf_free(s);
    lean_gpu_buf_free(u);
}

static void test_bad_buffers(lean_gpu *g) {
    lean_error err;
    const lean_gpu_info *in = lean_gpu_get_info(g);
    lean_gpu_buf *b = NULL;
    lean_status st = lean_gpu_buf_create(g, in->max_buffer + 4, LEAN_GPU_STORAGE, "huge", &b, &err);
    CHECK(st == LEAN_ERR_UNSUPPORTED && !b && strstr(err.msg, "'huge'") && strstr(err.msg, "maxBufferSize"),
          "over the limit: %d %s", st, err.msg);
    st = lean_gpu_buf_create(g, UINT64_MAX, LEAN_GPU_STORAGE, "max", &b, &err);
    CHECK(st == LEAN_ERR_UNSUPPORTED && !b, "UINT64_MAX bytes: %d %s", st, err.msg);
    CHECK(lean_gpu_buf_create(g, 0, LEAN_GPU_STORAGE, "empty", &b, &err) == LEAN_OK && lean_gpu_buf_size(b) == 16,
          "a zero-size buffer gets 16 bytes: %s", err.msg);
    lean_gpu_buf_free(b);
    st = lean_gpu_buf_create(g, 64, 0, "no usage", &b, &err);
    CHECK(st == LEAN_ERR_ARG, "no usage: %d", st);
    st = lean_gpu_buf_create(g, 64, LEAN_GPU_READBACK | LEAN_GPU_STORAGE, "mixed", &b, &err);
    CHECK(st == LEAN_ERR_ARG, "READBACK with STORAGE: %d", st);
    CHECK(lean_gpu_buf_create(g, 64, LEAN_GPU_UNIFORM, "u", &b, &err) == LEAN_OK, "%s", err.msg);
    uint32_t v[32] = {0};
    st = lean_gpu_buf_write(g, b, 32, v, 64, &err);
    CHECK(st == LEAN_ERR_ARG && strstr(err.msg, "'u'"), "write past the end: %d %s", st, err.msg);
    st = lean_gpu_buf_write(g, b, 2, v, 4, &err);
    CHECK(st == LEAN_ERR_ARG, "unaligned write: %d", st);
    st = lean_gpu_buf_write(g, b, UINT64_MAX - 2, v, 8, &err);
    CHECK(st == LEAN_ERR_ARG, "offset overflow: %d", st);
    st = lean_gpu_buf_read(g, b, 0, v, 4, &err);
    CHECK(st == LEAN_ERR_ARG, "reading a UNIFORM buffer: %d %s", st, err.msg);
    st = lean_gpu_buf_write(g, b, 0, v, 64, &err);
    CHECK(st == LEAN_OK, "%s", err.msg);
    lean_gpu_buf_free(b);
    lean_gpu_buf_free(NULL);
}

/* After a loss every call fails with LEAN_ERR_DEVICE; close still frees everything. */
static void test_lost(lean_gpu *g) {
    lean_error err;
    lean_gpu_buf *b = NULL;
    CHECK(lean_gpu_buf_create(g, 64, LEAN_GPU_STORAGE, "before", &b, &err) == LEAN_OK, "%s", err.msg);
    lean_gpu_lose_device(g);
    uint32_t v[16] = {0};
    lean_gpu_buf *b2 = NULL;
    lean_gpu_pipeline *p = NULL;
    lean_gpu_bindgroup *bg = NULL;
    lean_gpu_cmd *cmd = NULL;
    const char *src = "@compute @workgroup_size(1)\nfn main() {}\n";
    lean_status st[7] = {
        lean_gpu_buf_create(g, 64, LEAN_GPU_STORAGE, "after", &b2, &err),
        lean_gpu_buf_write(g, b, 0, v, 64, &err),
        lean_gpu_buf_read(g, b, 0, v, 64, &err),
        lean_gpu_pipeline_create(g, "after", &src, 1, NULL, 0, &p, &err),
        lean_gpu_bindgroup_create(g, p, NULL, 0, "after", &bg, &err),
        lean_gpu_begin(g, &cmd, &err),
        lean_gpu_finish(g, &err),
    };
    for (int i = 0; i < 7; i++) CHECK(st[i] == LEAN_ERR_DEVICE, "call %d after the loss: status %d", i, st[i]);
    CHECK(strstr(err.msg, "device") != NULL, "the loss is named: %s", err.msg);
    CHECK(!b2 && !p && !bg && !cmd, "nothing made after the loss");
}

/* One pass of buffer -> pipeline (constant VALUE: a new one each time) -> bind group ->
 * dispatch -> read, on g; frees what it made. */
static lean_status one_pass(lean_gpu *g, uint32_t value, lean_error *err) {
    lean_gpu_buf *b = NULL;
    lean_gpu_pipeline *p = NULL;
    lean_gpu_bindgroup *bg = NULL;
    lean_gpu_cmd *c = NULL;
    const char *src = lean_gpu_shader("fill");
    lean_gpu_const k[] = {{"WG", 'u', 64}, {"N", 'u', 16}, {"VALUE", 'u', value}, {"STEP", 'u', 1}};
    uint32_t out[16] = {0};
    lean_status st = lean_gpu_buf_create(g, sizeof out, LEAN_GPU_STORAGE, "oom", &b, err);
    if (st == LEAN_OK) st = lean_gpu_pipeline_create(g, "oom", &src, 1, k, 4, &p, err);
    lean_gpu_bind bind = {b, 0, 0};
    if (st == LEAN_OK) st = lean_gpu_bindgroup_create(g, p, &bind, 1, "oom", &bg, err);
    if (st == LEAN_OK) st = lean_gpu_begin(g, &c, err);
    if (st == LEAN_OK) lean_gpu_dispatch(c, p, bg, 1, 1, 1), st = lean_gpu_submit(c, err);
    if (st == LEAN_OK) st = lean_gpu_buf_read(g, b, 0, out, sizeof out, err);
    if (st == LEAN_OK && (out[0] != value || out[15] != value + 15))
        st = LEAN_FAIL(err, LEAN_ERR_DEVICE, "wrong result %u %u", out[0], out[15]);
    lean_gpu_bindgroup_free(bg);
    lean_gpu_buf_free(b);
    return st;
}

/* Every allocation of a pass fails in turn: a clean LEAN_ERR_NOMEM each time, the device
 * still usable (ASan: nothing leaked). One device: Mesa keeps memory of every context. */
static void test_out_of_memory(lean_gpu *g) {
    lean_error err;
    lean_gpu *none = NULL;
    lean_alloc_fail_at(1, false);
    CHECK(lean_gpu_open(&none, NULL, &err) == LEAN_ERR_NOMEM && !none, "open with no memory: %s", err.msg);
    CHECK(one_pass(g, 100, &err) == LEAN_OK, "%s", err.msg); /* makes the staging buffer */
    lean_alloc_fail_at(0, false);
    CHECK(one_pass(g, 200, &err) == LEAN_OK, "%s", err.msg);
    uint64_t n_allocs = lean_alloc_fail_at(0, false);
    CHECK(n_allocs >= 5, "a pass allocates %llu times", (unsigned long long)n_allocs);
    for (uint64_t n = 1; n <= n_allocs; n++) {
        lean_alloc_fail_at(n, false);
        lean_status st = one_pass(g, 300 + (uint32_t)n, &err);
        CHECK(st == LEAN_ERR_NOMEM, "allocation %llu failing: status %d (%s)", (unsigned long long)n, st,
              st ? err.msg : "");
    }
    lean_alloc_fail_at(0, false);
    CHECK(one_pass(g, 400, &err) == LEAN_OK, "after the failures: %s", err.msg);
}

#ifndef __wasi__
/* LEAN_GPU_DUMP=1: each kernel named on stderr before it is made, then the library's log of
 * it (Dawn's dump_shaders: the WGSL with our constants, then what it became), between markers.
 * Native only: the log is Dawn's (wgpuDeviceSetLoggingCallback); JavaScript has none, and
 * WASI no dup2 to catch stderr with. */
static void test_dump(void) {
    char path[] = "/tmp/lean_dump_XXXXXX";
    const int fd = mkstemp(path), saved = dup(2);
    CHECK(fd >= 0 && saved >= 0, "temp file");
    if (fd < 0 || saved < 0) return;
    fflush(stderr);
    dup2(fd, 2);
    setenv("LEAN_GPU_DUMP", "1", 1);
    lean_gpu *g = NULL;
    lean_error err;
    const lean_status st = lean_gpu_open(&g, NULL, &err);
    lean_gpu_const c[] = {{"N", 'u', 12345}, {"MUL", 'u', 3}, {"ADD", 'u', 1}};
    const bool made = st == LEAN_OK && make_pipeline(g, "dumped kernel", affine_src, c, 3) != NULL;
    lean_gpu_close(g);
    unsetenv("LEAN_GPU_DUMP");
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    CHECK(made, "dump: no pipeline: %s", st == LEAN_OK ? "" : err.msg);
    char text[1 << 16];
    const ssize_t n = pread(fd, text, sizeof text - 1, 0);
    close(fd);
    unlink(path);
    text[n > 0 ? n : 0] = 0;
    const char *named = strstr(text, "=== lean-gpu-pipeline dumped kernel\n");
    const char *log = named ? strstr(named, "<<< lean-gpu-log\n") : NULL;
    CHECK(named && log && strstr(log, "12345") && strstr(log, ">>> lean-gpu-log\n"),
          "dump: the kernel's name, then its text between the markers: %.300s", text);
}
#endif

int main(void) {
#ifndef __wasi__
    test_layouts();
#endif
    test_shaders();
    lean_gpu *g = test_gpu_open("test_gpu_device");
    if (!g) return test_finish("test_gpu_device");
    test_info(g);
    test_round_trip(g, 1000);
    test_round_trip(g, 1237);
    test_round_trip(g, 1);
    test_fill_and_readback(g);
    test_large_write(g);
    test_pipeline_cache_and_errors(g);
    test_bad_bindings(g);
    test_bad_buffers(g);
    test_out_of_memory(g);
    test_lost(g);
    lean_gpu_close(g);
#ifndef __wasi__
    test_dump();
#endif
    return test_finish("test_gpu_device");
}
