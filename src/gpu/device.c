/* device.c — the WebGPU instance, adapter and device behind a lean_gpu, and how errors and
 * waits work for everything else in src/gpu.
 *
 * Sections: errors and waits | adapter | device | info, kernel variants and describe |
 * open, close, loss.
 *
 * Adapter choice: a high-performance adapter at the default (core) feature level first
 * (when a Vulkan loader is there to find one). On a machine without a GPU driver Dawn
 * answers that with its Null backend, which runs nothing, so then OpenGL ES at the
 * compatibility level is asked for (Mesa's llvmpipe under
 * EGL, which without a display needs EGL_PLATFORM=surfaceless in the environment: the front
 * ends set it, lean.h says so to other hosts). The device gets the adapter's own limits (Dawn's defaults are lower) and the
 * optional features lean can use, each only when the adapter offers it.
 *
 * Waiting: the instance is created with timed waits, and every asynchronous call uses
 * WaitAnyOnly callbacks, so callbacks run only inside gpu_wait, on the calling thread. In pump
 * mode (the wasm32 build without JSPI: web.c) no wait blocks: gpu_wait looks once and says
 * LEAN_PENDING; the error scopes and queue checks that natively are waited for where they are
 * made go to g->later instead, and a wait first needs those made before it answered (gpu.h,
 * lean_gpu_settle). A half-open device (adapter or device request pending) is kept in
 * `opening` for the call made again. */
#include "gpu/gpu_impl.h"
#include "gpu/test_hooks.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- errors and waits ---- */

lean_status gpu_check(const lean_gpu *g, lean_error *err) {
    if (g->failed) return LEAN_FAIL(err, LEAN_ERR_DEVICE, "%s", g->fail_msg);
    return LEAN_OK;
}

lean_status lean_gpu_check(const lean_gpu *g, lean_error *err) {
    return gpu_check(g, err);
}

/* The first failure wins: later ones are usually its consequences. */
static void gpu_set_failed(lean_gpu *g, const char *what, WGPUStringView message) {
    if (g->failed) return;
    char msg[320];
    gpu_sv_copy(msg, sizeof msg, message);
    snprintf(g->fail_msg, sizeof g->fail_msg, "%s: %s", what, msg);
    g->failed = true;
}

static void on_device_lost(const WGPUDevice *device, WGPUDeviceLostReason reason, WGPUStringView message,
                           void *userdata1, void *userdata2) {
    (void)device, (void)userdata2;
    gpu_set_failed(userdata1, reason == WGPUDeviceLostReason_Destroyed ? "GPU device destroyed" : "GPU device lost",
                   message);
}

static const char *error_kind(WGPUErrorType type);

static void on_uncaptured_error(const WGPUDevice *device, WGPUErrorType type, WGPUStringView message,
                                void *userdata1, void *userdata2) {
    (void)device, (void)userdata2;
    gpu_set_failed(userdata1, error_kind(type), message);
}

/* Debugging aids, read when a device is opened (docs/gpu.md): LEAN_GPU_DUMP=1, the library's
 * log (Dawn's dump_shaders: each kernel's WGSL and what it became, SPIR-V on Vulkan) on
 * stderr, a message between marker lines, for scripts/h200_vk_stats.sh (pipeline.c names each
 * kernel before it is made); LEAN_PROFILE=1, the profile (lean_gpu_options.profile). */
static bool env_on(const char *name) {
    const char *e = getenv(name);
    return e && strcmp(e, "1") == 0;
}

static void on_log(uint32_t type, WGPUStringView message, void *userdata1, void *userdata2) {
    (void)type, (void)userdata1, (void)userdata2;
    const size_t n = message.length == WGPU_STRLEN ? (message.data ? strlen(message.data) : 0) : message.length;
    fprintf(stderr, "<<< lean-gpu-log\n%.*s\n>>> lean-gpu-log\n", (int)n, message.data ? message.data : "");
}

static WGPUErrorType scope_error(const gpu_req *q) {
    return q->r.done ? q->r.type : WGPUErrorType_Unknown;
}

static const char *error_kind(WGPUErrorType type) {
    return type == WGPUErrorType_OutOfMemory ? "GPU out of memory"
           : type == WGPUErrorType_Validation ? "GPU validation error"
                                              : "GPU internal error";
}

/* What an answered request of g->later means: an error scope's error, or a queue whose work
 * did not complete, fails g (a dropped map's answer means nothing). */
static void later_apply(lean_gpu *g, const gpu_req *q) {
    char what[160];
    if (q->kind == GPU_REQ_SCOPE && scope_error(q) != WGPUErrorType_NoError) {
        snprintf(what, sizeof what, "%s: %s", q->what, error_kind(scope_error(q)));
        const char *msg = q->r.msg;
        while (*msg == '\n' || *msg == ' ') msg++; /* wgpu's messages start on a line of their own */
        gpu_set_failed(g, what, gpu_sv(msg));
    } else if (q->kind == GPU_REQ_WORK_DONE && !q->r.ok) {
        gpu_set_failed(g, q->what, gpu_sv("the queue's work did not complete"));
    }
}

gpu_req *gpu_req_new(gpu_req_kind kind, const char *what) {
    gpu_req *q = lean_calloc(1, sizeof *q);
    if (q) q->kind = kind, snprintf(q->what, sizeof q->what, "%s", what);
    return q;
}

void gpu_later(lean_gpu *g, gpu_req *q) {
    if (g->pump) { /* in order: the first error caught is the one reported */
        gpu_req **end = g->later ? &g->later_last->next : &g->later;
        *end = g->later_last = q;
        return;
    }
    if (gpu_wait(g, q->f, q->what, NULL) == LEAN_OK) later_apply(g, q);
    lean_free(q);
}

/* Pump mode: applies and frees every request of g->later asked for before future `before` (by
 * id: web.c's ids only grow) that has been answered; LEAN_PENDING while any has not. Those
 * asked for later check later work, not what a wait on `before` reads; and a look at one
 * tells the JavaScript side what settle() waits for. */
static lean_status later_poll(lean_gpu *g, uint64_t before, lean_error *err) {
    bool pending = false;
    gpu_req *prev = NULL; /* the last one kept */
    for (gpu_req **p = &g->later; *p;) {
        gpu_req *q = *p;
        WGPUFutureWaitInfo wait = {q->f, 0};
        WGPUWaitStatus s = q->f.id < before ? g->w.InstanceWaitAny(g->instance, 1, &wait, 0) : WGPUWaitStatus_TimedOut;
        if (s == WGPUWaitStatus_TimedOut) {
            pending |= q->f.id < before;
            prev = q;
            p = &q->next;
            continue;
        }
        if (s != WGPUWaitStatus_Success || !wait.completed) q->r.done = false; /* lost: as an unanswered scope */
        if (q->kind == GPU_REQ_SCOPE || s == WGPUWaitStatus_Success) later_apply(g, q);
        *p = q->next;
        if (g->later_last == q) g->later_last = prev;
        lean_free(q);
    }
    return pending ? LEAN_FAIL(err, LEAN_PENDING, "the GPU's checks of earlier work have not all come back") : LEAN_OK;
}

lean_status lean_gpu_settle(lean_gpu *g, lean_error *err) {
    lean_status st = g->pump ? later_poll(g, UINT64_MAX, err) : LEAN_OK;
    return st == LEAN_OK ? gpu_check(g, err) : st;
}

lean_status gpu_wait(lean_gpu *g, WGPUFuture f, const char *what, lean_error *err) {
    WGPUFutureWaitInfo wait = {f, 0};
    if (g->pump) { /* one look: the JavaScript host awaits settle() and calls again */
        lean_status st = later_poll(g, f.id, err);
        if (st != LEAN_OK) return st;
        WGPUWaitStatus s = g->w.InstanceWaitAny(g->instance, 1, &wait, 0);
        if (s == WGPUWaitStatus_Success && wait.completed) return LEAN_OK;
        if (s == WGPUWaitStatus_TimedOut)
            return LEAN_FAIL(err, LEAN_PENDING, "waiting for %s: not answered yet (call again after settle())", what);
        return LEAN_FAIL(err, LEAN_ERR_DEVICE, "waiting for %s: wgpuInstanceWaitAny failed (status %d)", what, (int)s);
    }
    for (;;) {
        /* One-second slices: a long kernel on a software adapter is not a failure. */
        WGPUWaitStatus s = g->w.InstanceWaitAny(g->instance, 1, &wait, 1000000000ull);
        /* unscoped step submits (submit_unscoped): their errors came as uncaptured ones */
        if (s == WGPUWaitStatus_Success && wait.completed) return g->submit_unscoped ? gpu_check(g, err) : LEAN_OK;
        if (s == WGPUWaitStatus_TimedOut && gpu_wait_interrupted()) /* an abort: left in flight, as pump mode */
            return LEAN_FAIL(err, LEAN_PENDING, "waiting for %s: interrupted (call again, or end: lean.h)", what);
        if (s != WGPUWaitStatus_TimedOut)
            return LEAN_FAIL(err, LEAN_ERR_DEVICE, "waiting for %s: wgpuInstanceWaitAny failed (status %d)", what,
                             (int)s);
    }
}

static void on_scope_popped(WGPUPopErrorScopeStatus status, WGPUErrorType type, WGPUStringView message,
                            void *userdata1, void *userdata2) {
    (void)userdata2;
    gpu_async *r = userdata1;
    r->done = true;
    r->ok = status == WGPUPopErrorScopeStatus_Success;
    r->type = r->ok ? type : WGPUErrorType_Unknown;
    gpu_sv_copy(r->msg, sizeof r->msg, message);
}

static const WGPUErrorFilter scope_filters[3] = {WGPUErrorFilter_Internal, WGPUErrorFilter_OutOfMemory,
                                                 WGPUErrorFilter_Validation};

void gpu_scope_push(lean_gpu *g) {
    for (int i = 0; i < 3; i++) g->w.DevicePushErrorScope(g->device, scope_filters[i]);
}

WGPUErrorType gpu_scope_pop(lean_gpu *g, const char *what, char *msg, size_t cap) {
    if (g->pump) { /* checked at the next wait (gpu_wait), before any result is read */
        for (int i = 0; i < 3; i++) {
            gpu_req *q = gpu_req_new(GPU_REQ_SCOPE, what);
            if (!q) {
                gpu_set_failed(g, what, gpu_sv("out of memory for its error scope"));
                continue;
            }
            WGPUPopErrorScopeCallbackInfo info = {NULL, WGPUCallbackMode_WaitAnyOnly, on_scope_popped, &q->r, NULL};
            q->f = g->w.DevicePopErrorScope(g->device, info);
            gpu_later(g, q);
        }
        msg[0] = 0;
        return WGPUErrorType_NoError;
    }
    gpu_async r[3];
    WGPUFuture f[3];
    for (int i = 0; i < 3; i++) { /* innermost (validation) first */
        r[i].done = false;
        WGPUPopErrorScopeCallbackInfo info = {NULL, WGPUCallbackMode_WaitAnyOnly, on_scope_popped, &r[i], NULL};
        f[i] = g->w.DevicePopErrorScope(g->device, info);
    }
    WGPUErrorType first = WGPUErrorType_NoError;
    for (int i = 0; i < 3; i++) {
        if (gpu_wait(g, f[i], "an error scope", NULL) != LEAN_OK || !r[i].done) {
            r[i].type = WGPUErrorType_Unknown;
            snprintf(r[i].msg, sizeof r[i].msg, "the error scope never completed");
        }
        if (first == WGPUErrorType_NoError && r[i].type != WGPUErrorType_NoError) {
            first = r[i].type;
            snprintf(msg, cap, "%s", r[i].msg);
        }
    }
    return first;
}

lean_status gpu_error_status(WGPUErrorType type, lean_status what_invalid) {
    if (type == WGPUErrorType_Validation) return what_invalid;
    if (type == WGPUErrorType_OutOfMemory) return LEAN_ERR_NOMEM;
    return LEAN_ERR_DEVICE;
}

/* ---- adapter ---- */

static void on_adapter(WGPURequestAdapterStatus status, WGPUAdapter adapter, WGPUStringView message,
                       void *userdata1, void *userdata2) {
    (void)userdata2;
    gpu_async *r = userdata1;
    r->done = true;
    r->ok = status == WGPURequestAdapterStatus_Success && adapter;
    r->handle = r->ok ? adapter : NULL;
    gpu_sv_copy(r->msg, sizeof r->msg, message);
}

static const char *backend_name(WGPUBackendType b) {
    switch (b) {
    case WGPUBackendType_Null: return "Null";
    case WGPUBackendType_WebGPU: return "WebGPU";
    case WGPUBackendType_D3D11: return "D3D11";
    case WGPUBackendType_D3D12: return "D3D12";
    case WGPUBackendType_Metal: return "Metal";
    case WGPUBackendType_Vulkan: return "Vulkan";
    case WGPUBackendType_OpenGL: return "OpenGL";
    case WGPUBackendType_OpenGLES: return "OpenGLES";
    default: return "undefined";
    }
}

/* Waits for g->req, made by start(g, &g->req->r) unless one is in flight already; the answer
 * into *r. Pump mode: LEAN_PENDING while unanswered, g->req kept for the call made again. */
static lean_status await_request(lean_gpu *g, WGPUFuture (*start)(lean_gpu *, gpu_async *), const char *what,
                                 gpu_async *r, lean_error *err) {
    if (!g->req) {
        if (!(g->req = gpu_req_new(GPU_REQ_DROP, what)))
            return LEAN_FAIL(err, LEAN_ERR_NOMEM, "out of memory asking for %s", what);
        g->req->f = start(g, &g->req->r);
    }
    lean_status st = gpu_wait(g, g->req->f, what, err);
    if (st == LEAN_PENDING) return st;
    *r = g->req->r;
    lean_free(g->req);
    g->req = NULL;
    return st;
}

static WGPUFuture start_adapter(lean_gpu *g, gpu_async *r) {
    /* Adapters offer Dawn's experimental features (subgroup matrices) only under this toggle. */
    const char *enabled[2] = {"allow_unsafe_apis"};
    size_t n_enabled = 1;
    if (g->opt.nvidia_f16) enabled[n_enabled++] = "vulkan_enable_f16_on_nvidia";
    WGPUDawnTogglesDescriptor toggles = {{NULL, WGPUSType_DawnTogglesDescriptor}, n_enabled, enabled, 0, NULL};
    /* the default request first, then OpenGL ES at the compatibility level (open_adapter) */
    WGPURequestAdapterOptions opt = {&toggles.chain, WGPUFeatureLevel_Undefined, WGPUPowerPreference_HighPerformance,
                                     0, WGPUBackendType_Undefined, NULL};
    if (g->opt.null_backend) opt.backendType = WGPUBackendType_Null;
    else if (g->open_stage == 1) opt.featureLevel = WGPUFeatureLevel_Compatibility, opt.backendType = WGPUBackendType_OpenGLES;
    WGPURequestAdapterCallbackInfo info = {NULL, WGPUCallbackMode_WaitAnyOnly, on_adapter, r, NULL};
    return g->w.InstanceRequestAdapter(g->instance, &opt, info);
}

/* The adapter request of g->open_stage. NULL with a note in why when none (or only the Null
 * backend) came; *st LEAN_PENDING while unanswered in pump mode. */
static WGPUAdapter request_adapter(lean_gpu *g, char *why, size_t cap, lean_status *st) {
    gpu_async r = {.done = false};
    *st = await_request(g, start_adapter, "the adapter", &r, NULL);
    if (*st == LEAN_PENDING) return NULL;
    if (*st != LEAN_OK || !r.ok) {
        snprintf(why, cap, "%.*s", (int)cap - 1, r.done && r.msg[0] ? r.msg : "no adapter");
        return NULL;
    }
    WGPUAdapter adapter = r.handle;
    WGPUAdapterInfo ai = {.nextInChain = NULL};
    WGPUBackendType got = WGPUBackendType_Undefined;
    if (g->w.AdapterGetInfo(adapter, &ai) == WGPUStatus_Success) {
        got = ai.backendType;
        g->w.AdapterInfoFreeMembers(ai);
    }
    if ((got == WGPUBackendType_Null && !g->opt.null_backend) || got == WGPUBackendType_Undefined) {
        snprintf(why, cap, "only the %s backend", backend_name(got));
        g->w.AdapterRelease(adapter);
        return NULL;
    }
    return adapter;
}

/* Resumed in pump mode at g->open_stage (0: the default request, 1: OpenGL ES). */
static lean_status open_adapter(lean_gpu *g, lean_error *err) {
    lean_status st = LEAN_OK;
    if (g->open_stage == 0) {
        snprintf(g->why[0], sizeof g->why[0], "no Vulkan loader (libvulkan.so.1)");
        /* Without a Vulkan loader the default request can only end at the Null backend; skipping
         * it also spares stderr Dawn's "Couldn't load Vulkan" warning. */
        if (g->opt.null_backend || gpu_default_request_useful(g->library)) g->adapter = request_adapter(g, g->why[0], sizeof g->why[0], &st);
        if (st == LEAN_PENDING) return st;
        g->open_stage = g->adapter ? 2 : 1;
    }
    if (g->open_stage == 1) {
        g->adapter = request_adapter(g, g->why[1], sizeof g->why[1], &st);
        if (st == LEAN_PENDING) return st;
        g->open_stage = 2;
    }
    if (!g->adapter)
        return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "no WebGPU adapter from %s: default request: %s; OpenGLES: %s",
                         g->library, g->why[0], g->why[1]);
    return LEAN_OK;
}

/* ---- device ---- */

static void on_device(WGPURequestDeviceStatus status, WGPUDevice device, WGPUStringView message, void *userdata1,
                      void *userdata2) {
    (void)userdata2;
    gpu_async *r = userdata1;
    r->done = true;
    r->ok = status == WGPURequestDeviceStatus_Success && device;
    r->handle = r->ok ? device : NULL;
    gpu_sv_copy(r->msg, sizeof r->msg, message);
}

/* The device request (open_device), with the adapter's limits (WGPU_LIMIT_* "undefined" when
 * it reports none: open_device fails first then). */
static WGPUFuture start_device(lean_gpu *g, gpu_async *r) {
    WGPULimits limits = {.nextInChain = NULL};
    (void)g->w.AdapterGetLimits(g->adapter, &limits);
    static const WGPUFeatureName optional[] = {WGPUFeatureName_ShaderF16, WGPUFeatureName_Subgroups,
                                               WGPUFeatureName_TimestampQuery,
                                               WGPUFeatureName_ChromiumExperimentalSubgroupMatrix};
    WGPUFeatureName features[4];
    size_t n_features = 0;
    for (size_t i = 0; i < 4; i++)
        if (g->w.AdapterHasFeature(g->adapter, optional[i]) &&
            !(optional[i] == WGPUFeatureName_ChromiumExperimentalSubgroupMatrix && g->matrix_refused))
            features[n_features++] = optional[i];

    WGPUDeviceDescriptor desc = {.label = gpu_sv("lean"),
                                 .requiredFeatureCount = n_features,
                                 .requiredFeatures = features,
                                 .requiredLimits = &limits,
                                 .defaultQueue = {NULL, gpu_sv(NULL)},
                                 .deviceLostCallbackInfo = {NULL, WGPUCallbackMode_AllowSpontaneous,
                                                            on_device_lost, g, NULL},
                                 .uncapturedErrorCallbackInfo = {NULL, on_uncaptured_error, g, NULL}};
    /* profiling: kernel times finer than Dawn's 100 µs timestamp rounding (profile.c) */
    static const char *const unquantized[] = {"timestamp_quantization"};
    /* Dawn clamps every storage index unless told not to; our kernels keep theirs in range by
     * construction (shapes checked when a pipeline is made, ids clamped in-kernel), and the
     * clamps cost prefill time (docs/runs/2026-12-03-gpu-h200-table-2.md). */
    const char *enabled[3] = {"disable_robustness", "allow_unsafe_apis"}; /* the latter: as the adapter's */
    size_t n_enabled = 2;
    if (g->dump) enabled[n_enabled++] = "dump_shaders"; /* what Dawn compiled each kernel to */
    WGPUDawnTogglesDescriptor toggles = {{NULL, WGPUSType_DawnTogglesDescriptor}, n_enabled, enabled,
                                         g->opt.profile, unquantized};
    desc.nextInChain = &toggles.chain;
    WGPURequestDeviceCallbackInfo info = {NULL, WGPUCallbackMode_WaitAnyOnly, on_device, r, NULL};
    return g->w.AdapterRequestDevice(g->adapter, &desc, info);
}

/* Resumed in pump mode while the request is in flight (g->req). */
static lean_status open_device(lean_gpu *g, lean_error *err) {
    WGPULimits limits = {.nextInChain = NULL};
    if (!g->req && g->w.AdapterGetLimits(g->adapter, &limits) != WGPUStatus_Success)
        return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "the adapter did not report its limits");
    gpu_async r = {.done = false};
    lean_status st = await_request(g, start_device, "the device", &r, err);
    if (st == LEAN_OK && !r.ok && !g->matrix_refused &&
        g->w.AdapterHasFeature(g->adapter, WGPUFeatureName_ChromiumExperimentalSubgroupMatrix)) {
        /* an experimental feature must not cost the device: ask again without it */
        g->matrix_refused = true;
        st = await_request(g, start_device, "the device", &r, err);
    }
    if (st != LEAN_OK) return st;
    if (!r.ok)
        return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "no WebGPU device on '%s': %s", g->info.adapter,
                         r.msg[0] ? r.msg : "request failed");
    g->device = r.handle;
    g->queue = g->w.DeviceGetQueue(g->device);
    if (g->dump && g->w.DeviceSetLoggingCallback)
        g->w.DeviceSetLoggingCallback(g->device, (WGPULoggingCallbackInfo){NULL, on_log, NULL, NULL});
    else if (g->dump)
        fprintf(stderr, "lean: LEAN_GPU_DUMP: %s has no wgpuDeviceSetLoggingCallback; no log\n", g->library);
    return LEAN_OK;
}

/* ---- info and describe ---- */

static bool is_software_rasterizer(const char *name) {
    static const char *const names[] = {"llvmpipe", "lavapipe", "softpipe", "SwiftShader"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strstr(name, names[i])) return true;
    return false;
}

static const char *matrix_type(WGPUSubgroupMatrixComponentType t) {
    switch (t) {
    case WGPUSubgroupMatrixComponentType_F32: return "f32";
    case WGPUSubgroupMatrixComponentType_F16: return "f16";
    case WGPUSubgroupMatrixComponentType_U32: return "u32";
    case WGPUSubgroupMatrixComponentType_I32: return "i32";
    default: return "?";
    }
}

/* The subgroup-matrix shapes the adapter offers, from its info's chained struct. */
static void fill_matrix_configs(lean_gpu *g) {
    lean_gpu_info *in = &g->info;
    if (!g->w.AdapterHasFeature(g->adapter, WGPUFeatureName_ChromiumExperimentalSubgroupMatrix)) return;
    WGPUAdapterPropertiesSubgroupMatrixConfigs mc = {{NULL, WGPUSType_AdapterPropertiesSubgroupMatrixConfigs}, 0, NULL};
    WGPUAdapterInfo ai = {.nextInChain = &mc.chain};
    if (g->w.AdapterGetInfo(g->adapter, &ai) != WGPUStatus_Success) return;
    for (size_t i = 0; i < mc.configCount && mc.configs && in->n_matrix_configs < LEAN_GPU_MATRIX_CONFIGS_MAX; i++) {
        const WGPUSubgroupMatrixConfig *c = &mc.configs[i];
        lean_gpu_matrix_config *o = &in->matrix_configs[in->n_matrix_configs++];
        snprintf(o->type, sizeof o->type, "%s", matrix_type(c->componentType));
        snprintf(o->result, sizeof o->result, "%s", matrix_type(c->resultComponentType));
        o->m = c->M, o->n = c->N, o->k = c->K;
    }
    g->w.AdapterInfoFreeMembers(ai);
    if (g->w.AdapterPropertiesSubgroupMatrixConfigsFreeMembers) g->w.AdapterPropertiesSubgroupMatrixConfigsFreeMembers(mc);
}

static void fill_adapter_info(lean_gpu *g) {
    lean_gpu_info *in = &g->info;
    WGPUAdapterInfo ai = {.nextInChain = NULL};
    if (g->w.AdapterGetInfo(g->adapter, &ai) != WGPUStatus_Success) return;
    gpu_sv_copy(in->adapter, sizeof in->adapter, ai.device);
    if (!in->adapter[0]) gpu_sv_copy(in->adapter, sizeof in->adapter, ai.description);
    gpu_sv_copy(in->vendor, sizeof in->vendor, ai.vendor);
    gpu_sv_copy(in->architecture, sizeof in->architecture, ai.architecture);
    snprintf(in->backend, sizeof in->backend, "%s", backend_name(ai.backendType));
    gpu_sv_copy(g->description, sizeof g->description, ai.description);
    /* Dawn reports llvmpipe under OpenGL ES as adapterType Unknown, not CPU: know it by name. */
    in->software = ai.adapterType == WGPUAdapterType_CPU || is_software_rasterizer(in->adapter);
    in->subgroup_min_size = ai.subgroupMinSize;
    in->subgroup_max_size = ai.subgroupMaxSize;
    g->w.AdapterInfoFreeMembers(ai);
    fill_matrix_configs(g);
}

/* What the device was granted (not what the adapter offered). */
static lean_status fill_device_info(lean_gpu *g, lean_error *err) {
    lean_gpu_info *in = &g->info;
    WGPULimits l = {.nextInChain = NULL};
    if (g->w.DeviceGetLimits(g->device, &l) != WGPUStatus_Success)
        return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "the device on '%s' did not report its limits", in->adapter);
    in->shader_f16 = g->w.DeviceHasFeature(g->device, WGPUFeatureName_ShaderF16);
    in->subgroups = g->w.DeviceHasFeature(g->device, WGPUFeatureName_Subgroups);
    in->timestamp_query = g->w.DeviceHasFeature(g->device, WGPUFeatureName_TimestampQuery);
    in->subgroup_matrix = g->w.DeviceHasFeature(g->device, WGPUFeatureName_ChromiumExperimentalSubgroupMatrix);
    in->packed_dot = g->w.InstanceHasWGSLLanguageFeature &&
                     g->w.InstanceHasWGSLLanguageFeature(g->instance, WGPUWGSLLanguageFeatureName_Packed4x8IntegerDotProduct);
    if (!in->subgroups) in->subgroup_min_size = in->subgroup_max_size = 0;
    /* Compatibility-level devices lack the core feature-and-limits feature (0x12). */
    snprintf(in->feature_level, sizeof in->feature_level, "%s",
             g->w.DeviceHasFeature(g->device, (WGPUFeatureName)0x12) ? "core" : "compatibility");
    in->max_storage_binding = l.maxStorageBufferBindingSize;
    in->max_buffer = l.maxBufferSize;
    in->max_storage_buffers_per_stage = l.maxStorageBuffersPerShaderStage;
    in->max_workgroup_storage = l.maxComputeWorkgroupStorageSize;
    in->max_invocations = l.maxComputeInvocationsPerWorkgroup;
    in->max_workgroup_x = l.maxComputeWorkgroupSizeX;
    in->max_workgroup_y = l.maxComputeWorkgroupSizeY;
    in->max_workgroup_z = l.maxComputeWorkgroupSizeZ;
    in->max_workgroups_per_dim = l.maxComputeWorkgroupsPerDimension;
    in->min_storage_offset_align = l.minStorageBufferOffsetAlignment;
    in->min_uniform_offset_align = l.minUniformBufferOffsetAlignment;
    return LEAN_OK;
}

const lean_gpu_info *lean_gpu_get_info(const lean_gpu *g) {
    return &g->info;
}

/* ---- kernel variants: which the device's features and its options allow (gpu.h) ---- */

/* Where the device has subgroups of one size (min = max: every pipeline then gets that size,
 * so all kernels sum alike), the reductions run over them: faster decode than reduce.wgsl's
 * trees (docs/runs/2026-12-03-gpu-h200-decode.md). */
uint32_t lean_gpu_subgroup_size(lean_gpu *g) {
    const lean_gpu_info *in = lean_gpu_get_info(g);
    const bool fixed = in->subgroups && in->subgroup_min_size > 0 && in->subgroup_min_size == in->subgroup_max_size;
    return fixed && !g->opt.no_subgroups ? in->subgroup_min_size : 0;
}

/* The f16 path (matmul_tiled over tiled_f16.wgsl) where the device grants shader-f16. */
bool lean_gpu_f16(const lean_gpu *g) {
    return lean_gpu_get_info(g)->shader_f16 && g->opt.f16 != LEAN_GPU_OFF;
}

/* The 8-bit prefill (matmul_tiled_i8.wgsl for Q8_0 and Q4_0 weights) where WGSL has packed
 * dot products and, by default, the adapter is hardware that has them as instructions as far
 * as we know: not a software adapter (llvmpipe, SwiftShader) and not Apple's (Metal has no
 * 8-bit dot product, so Dawn writes each as a dozen integer operations there). */
bool lean_gpu_int8(const lean_gpu *g) {
    const lean_gpu_info *in = lean_gpu_get_info(g);
    const bool fast = !in->software && strncmp(in->vendor, "apple", 5) != 0;
    return in->packed_dot && (g->opt.int8 == LEAN_GPU_AUTO ? fast : g->opt.int8 == LEAN_GPU_ON);
}

lean_gpu_options *lean_gpu_options_of(lean_gpu *g) {
    return &g->opt;
}

/* "matrices       ..." of lean_gpu_describe: each shape as TYPE MxK * TYPE KxN -> RESULT MxN. */
static void describe_matrices(const lean_gpu_info *in, char *buf, size_t cap) {
    size_t n = (size_t)snprintf(buf, cap, "matrices       %s",
                                in->subgroup_matrix ? "subgroup matrices (chromium_experimental_subgroup_matrix):"
                                : in->n_matrix_configs ? "offered, but the device was refused them:"
                                                       : "no subgroup matrices");
    for (uint32_t i = 0; i < in->n_matrix_configs && n < cap; i++) {
        const lean_gpu_matrix_config *c = &in->matrix_configs[i];
        n += (size_t)snprintf(buf + n, cap - n, "%s %s %ux%u * %ux%u -> %s %ux%u", i ? "," : "", c->type, c->m, c->k,
                              c->k, c->n, c->result, c->m, c->n);
    }
    if (in->n_matrix_configs && !in->shader_f16 && n < cap)
        for (uint32_t i = 0; i < in->n_matrix_configs; i++)
            if (!strcmp(in->matrix_configs[i].type, "f16") || !strcmp(in->matrix_configs[i].result, "f16")) {
                snprintf(buf + n, cap - n, " (f16 ones need shader-f16, which this device lacks)");
                break;
            }
}

void lean_gpu_describe(const lean_gpu *g, char *buf, size_t cap) {
    const lean_gpu_info *in = &g->info;
    char subgroup[48] = "", matrices[512];
    if (in->subgroups) snprintf(subgroup, sizeof subgroup, " (size %u-%u)", in->subgroup_min_size, in->subgroup_max_size);
    describe_matrices(in, matrices, sizeof matrices);
    snprintf(buf, cap,
             "adapter        %s%s%s\n"
             "vendor         %s%s%s\n"
             "backend        %s, %s level%s\n"
             "features       shader-f16 %s, subgroups %s%s, timestamp-query %s\n"
             "%s\n"
             "prefill        %s%s\n"
             "storage        binding %llu MiB, buffer %llu MiB, %u buffers per stage\n"
             "workgroups     %u invocations, size %u x %u x %u, %u per dimension, %u KiB shared\n"
             "alignment      storage offsets %u, uniform offsets %u\n"
             "library        %s\n",
             in->adapter, g->description[0] ? ", " : "", g->description, in->vendor[0] ? in->vendor : "(unknown)",
             in->architecture[0] ? ", " : "", in->architecture, in->backend,
             in->feature_level, in->software ? ", software (CPU) adapter" : "", in->shader_f16 ? "yes" : "no",
             in->subgroups ? "yes" : "no", subgroup, in->timestamp_query ? "yes" : "no", matrices,
             lean_gpu_f16(g) ? "f16 path (matmuls in f16, shaders/tiled_f16.wgsl; --exact: F32)"
             : in->shader_f16 ? "F32 path (--exact)" : "F32 path (no shader-f16)",
             lean_gpu_int8(g) ? "; quantized prefill on 8-bit dot products (--exact: off)"
             : g->opt.int8 == LEAN_GPU_OFF ? "; 8-bit dot products off (--exact)"
             : in->packed_dot ? "; 8-bit dot products off (a software or Apple adapter)"
                              : "; no 8-bit dot products in WGSL here",
             (unsigned long long)(in->max_storage_binding >> 20), (unsigned long long)(in->max_buffer >> 20),
             in->max_storage_buffers_per_stage, in->max_invocations, in->max_workgroup_x, in->max_workgroup_y,
             in->max_workgroup_z, in->max_workgroups_per_dim, in->max_workgroup_storage >> 10,
             in->min_storage_offset_align, in->min_uniform_offset_align, g->library);
}

lean_status lean_gpu_probe(char *text, size_t cap, lean_error *err) {
    lean_gpu *g;
    lean_status st = lean_gpu_open(&g, NULL, err);
    if (st != LEAN_OK) return st;
    lean_gpu_describe(g, text, cap);
    lean_gpu_close(g);
    return LEAN_OK;
}

/* ---- open, close, loss ---- */

/* The library and its instance are loaded once per process and kept until exit: every
 * lean_gpu shares them. Releasing the instance unloads the driver (the Vulkan loader dlcloses
 * its ICD), and loading NVIDIA's driver again in the same process fails ("cannot allocate
 * memory in static TLS block", seen on the H200 after one open/close cycle), so the second
 * lean_gpu would find only Dawn's Null backend. A failure is not kept: the next open tries
 * again. */
static struct {
    bool ready;
    bool pump; /* gpu_load_library's */
    wgpu_api w;
    char library[sizeof ((lean_gpu *)0)->library];
    WGPUInstance instance;
} shared;
#ifndef __wasi__
#include <pthread.h>
static pthread_mutex_t shared_lock = PTHREAD_MUTEX_INITIALIZER;
#define SHARED_LOCK() pthread_mutex_lock(&shared_lock)
#define SHARED_UNLOCK() pthread_mutex_unlock(&shared_lock)
#else
#define SHARED_LOCK() ((void)0) /* one thread in wasm32-wasi */
#define SHARED_UNLOCK() ((void)0)
#endif

static lean_status load_shared(lean_error *err) {
    if (shared.ready) return LEAN_OK;
    lean_status st = gpu_load_library(&shared.w, shared.library, sizeof shared.library, &shared.pump, err);
    if (st != LEAN_OK) return st;
    WGPUInstanceDescriptor desc = {NULL, {NULL, 1, 8}};
    shared.instance = shared.w.CreateInstance(&desc);
    if (!shared.instance)
        return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "%s: wgpuCreateInstance (with timed waits) failed",
                         shared.library);
    shared.ready = true;
    return LEAN_OK;
}

/* g's library functions and instance: the process's shared ones. */
static lean_status create_instance(lean_gpu *g, lean_error *err) {
    SHARED_LOCK();
    lean_status st = load_shared(err);
    if (st == LEAN_OK) {
        g->w = shared.w;
        memcpy(g->library, shared.library, sizeof g->library);
        g->instance = shared.instance;
        g->pump = shared.pump;
        g->submit_unscoped = gpu_steps_unscoped();
    }
    SHARED_UNLOCK();
    return st;
}

static atomic_int n_open; /* lean_gpu_open_count: every g from its calloc to lean_gpu_close */

int lean_gpu_open_count(void) {
    return atomic_load(&n_open);
}

/* Pump mode: the open that returned LEAN_PENDING, resumed by the call made again (one thread
 * in wasm32; natively never set). */
static lean_gpu *opening;

lean_status lean_gpu_open(lean_gpu **out, const lean_gpu_options *opt, lean_error *err) {
    *out = NULL;
    lean_gpu *g = opening;
    opening = NULL;
    lean_status st = LEAN_OK;
    if (!g) {
        if (!(g = lean_calloc(1, sizeof *g))) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "out of memory opening the GPU");
        atomic_fetch_add(&n_open, 1);
        if (opt) g->opt = *opt;
        g->opt.profile |= env_on("LEAN_PROFILE");
        g->dump = env_on("LEAN_GPU_DUMP");
        st = create_instance(g, err);
    }
    if (st == LEAN_OK && !g->adapter) {
        st = open_adapter(g, err);
        if (st == LEAN_OK) fill_adapter_info(g);
    }
    if (st == LEAN_OK) st = open_device(g, err);
    if (st == LEAN_PENDING) {
        opening = g;
        return st;
    }
    if (st == LEAN_OK) st = fill_device_info(g, err);
    if (st == LEAN_OK && g->opt.profile) st = gpu_profile_open(g, err);
    if (st != LEAN_OK) {
        lean_gpu_close(g);
        return st;
    }
    *out = g;
    return LEAN_OK;
}

void lean_gpu_lose_device(lean_gpu *g) {
    if (!g || !g->device || g->destroyed) return;
    g->destroyed = true;
    g->w.DeviceDestroy(g->device); /* the lost callback runs inside, reason Destroyed */
    if (!g->failed) {              /* should it not have: the contract is that every call fails */
        g->failed = true;
        snprintf(g->fail_msg, sizeof g->fail_msg, "GPU device destroyed");
    }
}

void lean_gpu_close(lean_gpu *g) {
    if (!g) return;
    gpu_profile_close(g);
    for (lean_gpu_bindgroup *bg = g->groups, *next; bg; bg = next) {
        next = bg->next;
        g->w.BindGroupRelease(bg->group);
        lean_free(bg);
    }
    while (g->bufs) lean_gpu_buf_free(g->bufs);
    for (lean_gpu_pipeline *p = g->pipelines, *next; p; p = next) {
        next = p->next;
        g->w.ComputePipelineRelease(p->pipe);
        lean_free(p->text);
        lean_free(p);
    }
    if (g->queue) g->w.QueueRelease(g->queue);
    if (g->device) {
        lean_gpu_lose_device(g);
        g->w.DeviceRelease(g->device);
    }
    if (g->adapter) g->w.AdapterRelease(g->adapter);
    /* pump mode: answers still to come are never waited for, so their callbacks never run */
    for (gpu_req *q = g->later, *next; q; q = next) next = q->next, lean_free(q);
    lean_free(g->req);
    lean_free(g); /* the instance is the process's (create_instance) */
    atomic_fetch_sub(&n_open, 1);
}
