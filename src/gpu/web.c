/* web.c — WebGPU through JavaScript: the wasm32 build's wgpu_api (webgpu.h), each function a
 * wrapper over an import of the module "lean_webgpu" (web/webgpu_imports.mjs), which drives
 * navigator.gpu, but for the recording calls (encoders, passes, copies): those write a command
 * list here, which QueueSubmit hands over in one call (section "command lists"), and the small
 * queue writes, which go in that call too (section "held writes"). The rest of src/gpu cannot
 * tell it from native.c's Dawn.
 *
 * The boundary carries numbers only: C flattens every descriptor into scalars (a string is a
 * pointer and a byte count into the wasm memory, a 64-bit size a double, exact below 2^53),
 * so the layouts of webgpu.h's structs stay on this side. Handles are the JS side's object
 * ids (1, 2, ...; 0 is NULL) cast to the opaque pointer types.
 *
 * Waiting. JS settles a promise; C must see its result inside wgpuInstanceWaitAny, the only
 * place lean waits (gpu_wait). With JSPI, lean_webgpu.future_wait is a suspending import
 * (WebAssembly.Suspending; the host wraps the entry in WebAssembly.promising): the wasm stack
 * sleeps until the promise settles or the timeout passes, and the JS event loop runs
 * meanwhile. Without JSPI (Safari) it only says whether the promise has settled, and lean runs
 * in pump mode (gpu_load_library's *pump; lean.h, LEAN_PENDING): an unsettled wait returns to
 * JavaScript, which awaits settle() and calls again. Either way WaitAny then reads the future's
 * status, handle and message and calls the callback the asynchronous call was given (all
 * callbacks are WaitAnyOnly here). An abort (the host's interrupt()) cuts the JSPI wait on a
 * buffer map short: gpu_wait_interrupted() says so, and gpu_wait returns LEAN_PENDING as in
 * pump mode, the map left in flight for lean_gen_end to drop. A host without navigator.gpu (or without JSPI that cannot
 * make a call again: a WASI command) gets no instance: CreateInstance returns NULL and
 * lean_webgpu.why says why.
 * Device lost and uncaptured errors arrive as JS events; JS queues them and WaitAny hands
 * them to the device's callbacks after each wait (Dawn calls them inside the failing call;
 * here they come at the next wait). DeviceDestroy calls the lost callback itself, reason
 * Destroyed, as Dawn does.
 * Mapped ranges: JS can give only a copy of a mapped range; GetConstMappedRange copies it
 * into a malloc'd block that lives until the buffer is unmapped, destroyed or released.
 *
 * Only in the wasm32 build (native.c is the other one). */
#include "gpu/gpu_impl.h"

#ifdef __wasi__

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define IMPORT(name) __attribute__((import_module("lean_webgpu"), import_name(#name)))

/* ---- the imports (web/webgpu_imports.mjs); ids are u32, 0 = none ---- */
IMPORT(why) uint32_t js_why(char *buf, uint32_t cap);
IMPORT(instance_create) uint32_t js_instance_create(void);
IMPORT(request_adapter) uint32_t js_request_adapter(uint32_t power_preference, uint32_t force_fallback);
IMPORT(jspi) uint32_t js_jspi(void);
IMPORT(future_wait) uint32_t js_future_wait(uint32_t future, double timeout_ms); /* 1 settled, 2 interrupted */
IMPORT(future_status) uint32_t js_future_status(uint32_t future);
IMPORT(future_value) uint32_t js_future_value(uint32_t future);
IMPORT(future_message) uint32_t js_future_message(uint32_t future, char *buf, uint32_t cap);
IMPORT(future_free) void js_future_free(uint32_t future);
IMPORT(adapter_info) uint32_t js_adapter_info(uint32_t adapter, uint32_t field, char *buf, uint32_t cap);
IMPORT(limit) double js_limit(uint32_t object, const char *name, uint32_t len);
IMPORT(has_feature) uint32_t js_has_feature(uint32_t object, const char *name, uint32_t len);
IMPORT(wgsl_feature) uint32_t js_wgsl_feature(const char *name, uint32_t len);
IMPORT(device_begin) void js_device_begin(void);
IMPORT(device_feature) void js_device_feature(const char *name, uint32_t len);
IMPORT(device_limit) void js_device_limit(const char *name, uint32_t len, double value);
IMPORT(request_device) uint32_t js_request_device(uint32_t adapter, const char *label, uint32_t len);
IMPORT(device_event) uint32_t js_device_event(uint32_t device, uint32_t *code, char *buf, uint32_t cap);
IMPORT(device_queue) uint32_t js_device_queue(uint32_t device);
IMPORT(create_buffer) uint32_t js_create_buffer(uint32_t device, double usage, double size, uint32_t mapped,
                                                const char *label, uint32_t len);
IMPORT(create_shader) uint32_t js_create_shader(uint32_t device, const char *code, uint32_t len, const char *label,
                                                uint32_t label_len);
IMPORT(create_pipeline) uint32_t js_create_pipeline(uint32_t device, uint32_t module, const char *entry, uint32_t len,
                                                    const char *label, uint32_t label_len);
IMPORT(bind_entry) void js_bind_entry(uint32_t binding, uint32_t buffer, double offset, double size);
IMPORT(create_bind_group) uint32_t js_create_bind_group(uint32_t device, uint32_t layout, const char *label,
                                                        uint32_t len);
IMPORT(push_scope) void js_push_scope(uint32_t device, uint32_t filter);
IMPORT(pop_scope) uint32_t js_pop_scope(uint32_t device);
IMPORT(create_query_set) uint32_t js_create_query_set(uint32_t device, uint32_t count);
IMPORT(destroy) void js_destroy(uint32_t object);
IMPORT(release) void js_release(uint32_t object);
IMPORT(write_buffer) void js_write_buffer(uint32_t queue, uint32_t buffer, double offset, const void *data,
                                          uint32_t size);
IMPORT(submit_list) void js_submit_list(uint32_t queue, const uint32_t *words, uint32_t n);
IMPORT(work_done) uint32_t js_work_done(uint32_t queue);
IMPORT(map_read) uint32_t js_map_read(uint32_t buffer, double offset, double size);
IMPORT(mapped_copy) uint32_t js_mapped_copy(uint32_t buffer, double offset, double size, void *dst);
IMPORT(unmap) void js_unmap(uint32_t buffer);
IMPORT(bind_group_layout) uint32_t js_bind_group_layout(uint32_t pipeline, uint32_t group);

#define ID(h) ((uint32_t)(uintptr_t)(h))
#define HANDLE(T, id) ((T)(uintptr_t)(id))

/* A StringView's bytes: WGPU_STRLEN means up to a NUL; {NULL, WGPU_STRLEN} is none. */
static uint32_t sv_len(WGPUStringView s) {
    if (!s.data) return 0;
    return (uint32_t)(s.length == WGPU_STRLEN ? strlen(s.data) : s.length);
}

/* ---- pending futures: the callback each asynchronous call was given ---- */

typedef enum { F_ADAPTER, F_DEVICE, F_SCOPE, F_MAP, F_WORK_DONE } future_kind;

/* ---- devices: their lost and uncaptured-error callbacks ---- */

typedef struct device_cb {
    uint32_t id;
    WGPUDeviceLostCallbackInfo lost;
    WGPUUncapturedErrorCallbackInfo error;
} device_cb;

static device_cb devices[8]; /* lean opens one device per context; a few contexts at once */

static device_cb *device_of(uint32_t id) {
    for (size_t i = 0; i < sizeof devices / sizeof devices[0]; i++)
        if (devices[i].id == id) return &devices[i];
    return NULL;
}

typedef struct pending {
    uint32_t id;
    future_kind kind;
    void *callback;
    void *userdata1, *userdata2;
    device_cb device; /* F_DEVICE: the new device's callbacks, registered when it arrives */
} pending;

static pending *pend;
static size_t n_pend, cap_pend;

/* Records future id with its callback; returns the WGPUFuture (id 0 when JS made none, or
 * when no memory is left for the record: a wait on it fails). */
static WGPUFuture remember(uint32_t id, future_kind kind, void *callback, void *u1, void *u2,
                           const device_cb *device) {
    if (!id) return (WGPUFuture){0};
    if (n_pend == cap_pend) {
        size_t cap = cap_pend ? 2 * cap_pend : 16;
        pending *p = realloc(pend, cap * sizeof *p);
        if (!p) {
            js_future_free(id);
            return (WGPUFuture){0};
        }
        pend = p, cap_pend = cap;
    }
    pend[n_pend++] = (pending){id, kind, callback, u1, u2, device ? *device : (device_cb){0}};
    return (WGPUFuture){id};
}

/* Calls future p's callback with what JS settled it with; forgets it. */
static void deliver(size_t i) {
    pending p = pend[i];
    pend[i] = pend[--n_pend];
    char msg[512];
    uint32_t n = js_future_message(p.id, msg, sizeof msg);
    WGPUStringView m = {msg, n < sizeof msg ? n : sizeof msg};
    uint32_t status = js_future_status(p.id), value = js_future_value(p.id);
    js_future_free(p.id);
    switch (p.kind) {
    case F_ADAPTER:
        ((WGPURequestAdapterCallback)p.callback)(status, HANDLE(WGPUAdapter, value), m, p.userdata1, p.userdata2);
        break;
    case F_DEVICE:
        if (status == WGPURequestDeviceStatus_Success && value) {
            device_cb *slot = device_of(0); /* a free one; none: its events go unreported */
            if (slot) *slot = p.device, slot->id = value;
        }
        ((WGPURequestDeviceCallback)p.callback)(status, HANDLE(WGPUDevice, value), m, p.userdata1, p.userdata2);
        break;
    case F_SCOPE:
        ((WGPUPopErrorScopeCallback)p.callback)(status, (WGPUErrorType)value, m, p.userdata1, p.userdata2);
        break;
    case F_MAP: ((WGPUBufferMapCallback)p.callback)(status, m, p.userdata1, p.userdata2); break;
    case F_WORK_DONE: ((WGPUQueueWorkDoneCallback)p.callback)(status, m, p.userdata1, p.userdata2); break;
    }
}

/* Hands the queued device events (kind 1 lost, 2 uncaptured error) to their callbacks. */
static void device_events(void) {
    for (size_t i = 0; i < sizeof devices / sizeof devices[0]; i++) {
        device_cb *d = &devices[i];
        uint32_t code, kind;
        char msg[512];
        while (d->id && (kind = js_device_event(d->id, &code, msg, sizeof msg)) != 0) {
            uint32_t n = (uint32_t)strlen(msg);
            WGPUDevice dev = HANDLE(WGPUDevice, d->id);
            WGPUStringView m = {msg, n};
            if (kind == 1 && d->lost.callback) {
                d->lost.callback(&dev, (WGPUDeviceLostReason)code, m, d->lost.userdata1, d->lost.userdata2);
                d->lost.callback = NULL; /* once */
            } else if (kind == 2 && d->error.callback) {
                d->error.callback(&dev, (WGPUErrorType)code, m, d->error.userdata1, d->error.userdata2);
            }
        }
    }
}

/* ---- mapped ranges: copies alive until unmap ---- */

typedef struct mapped {
    uint32_t buffer;
    void *copy;
    struct mapped *next;
} mapped;

static mapped *ranges;

static void drop_ranges(uint32_t buffer) {
    for (mapped **p = &ranges; *p;) {
        mapped *r = *p;
        if (r->buffer == buffer) {
            *p = r->next;
            free(r->copy);
            free(r);
        } else {
            p = &r->next;
        }
    }
}

/* ---- command lists ----
 * Encoders, passes and command buffers live here, not in JavaScript: each is a list of words
 * in wasm memory (an op, then its operands: ids, 64-bit values as low and high words), and
 * QueueSubmit hands the lists to ONE import, submit_list, which replays them with
 * navigator.gpu (DESIGN.md: one JS call per list). A decode step's ~100 dispatches were ~300
 * import calls. The handles of all three are the list's address. */

enum { OP_ENCODER = 1, OP_PASS, OP_PIPELINE, OP_BIND, OP_DISPATCH, OP_END_PASS, OP_COPY, OP_RESOLVE, OP_FINISH, OP_WRITE };

typedef struct cmdlist {
    uint32_t *w;
    uint32_t n, cap;
    bool failed;                      /* out of memory while recording: Finish gives no buffer */
    bool encoder_alive, buffer_alive; /* freed once neither is */
} cmdlist;

static cmdlist *spare; /* a freed list kept with its words: lean records one at a time */
static uint32_t *joined; /* QueueSubmit's lists of several buffers, end to end */
static uint32_t joined_cap;

static bool grow(uint32_t **w, uint32_t *cap, uint32_t need) {
    if (need <= *cap) return true;
    uint32_t c = *cap ? *cap : 256;
    while (c < need) c *= 2;
    uint32_t *p = realloc(*w, c * sizeof *p);
    if (!p) return false;
    *w = p, *cap = c;
    return true;
}

static void put(cmdlist *l, const uint32_t *op, uint32_t n) {
    if (l->failed || !grow(&l->w, &l->cap, l->n + n)) {
        l->failed = true;
        return;
    }
    memcpy(l->w + l->n, op, n * sizeof *op);
    l->n += n;
}
#define PUT(l, ...) put((l), (const uint32_t[]){__VA_ARGS__}, sizeof((const uint32_t[]){__VA_ARGS__}) / 4)
#define LO(x) ((uint32_t)(x))
#define HI(x) ((uint32_t)((uint64_t)(x) >> 32))
#define LIST(h) ((cmdlist *)(void *)(h))

static void list_release(cmdlist *l) {
    if (l->encoder_alive || l->buffer_alive) return;
    if (spare) {
        free(l->w);
        free(l);
        return;
    }
    l->n = 0;
    l->failed = false;
    spare = l;
}

/* ---- held writes ----
 * A small QueueWriteBuffer (a decode step's 16-byte uniform) is not an import call of its own:
 * its bytes wait here as OP_WRITE buffer offset(lo, hi) bytes data-words and go first in the
 * next submit's list, whose replay makes them the same writeBuffer calls just before
 * queue.submit: the queue's order is unchanged and a step is one crossing, not two
 * (docs/runs/2026-12-05-browser-abort.md). Whatever else their order matters to (a larger
 * write, another queue, a map, work done, an error scope, a buffer or device going away, a
 * wait) writes them out first, each through write_buffer (flush_held). */

#define HELD_MAX_BYTES 256
static uint32_t *held;
static uint32_t held_n, held_cap, held_queue;

static void flush_held(void) {
    for (uint32_t i = 0; i < held_n; i += 5 + (held[i + 4] + 3) / 4)
        js_write_buffer(held_queue, held[i + 1], (double)held[i + 2] + (double)held[i + 3] * 4294967296.0,
                        held + i + 5, held[i + 4]);
    held_n = 0;
}

/* ---- instance and adapter ---- */

static WGPUInstance CreateInstance(const WGPUInstanceDescriptor *desc) {
    (void)desc;
    return HANDLE(WGPUInstance, js_instance_create());
}

static WGPUFuture InstanceRequestAdapter(WGPUInstance instance, const WGPURequestAdapterOptions *o,
                                         WGPURequestAdapterCallbackInfo info) {
    (void)instance; /* feature level and backend: a JS host has one of each */
    return remember(js_request_adapter(o ? o->powerPreference : 0, o ? o->forceFallbackAdapter : 0), F_ADAPTER,
                    (void *)info.callback, info.userdata1, info.userdata2, NULL);
}

static bool wait_cut; /* a wait ended early by the host's interrupt() (gpu_wait_interrupted) */

static WGPUWaitStatus InstanceWaitAny(WGPUInstance instance, size_t count, WGPUFutureWaitInfo *futures,
                                      uint64_t timeout_ns) {
    (void)instance;
    flush_held();
    bool any = false;
    for (size_t k = 0; k < count; k++) {
        WGPUFutureWaitInfo *f = &futures[k];
        if (f->completed) continue;
        size_t i = 0;
        while (i < n_pend && pend[i].id != f->future.id) i++;
        if (i == n_pend) return WGPUWaitStatus_Error; /* unknown, or already delivered */
        const uint32_t settled = js_future_wait(pend[i].id, (double)timeout_ns / 1e6);
        if (settled == 2) wait_cut = true;
        if (settled != 1) continue;
        deliver(i);
        f->completed = 1;
        any = true;
    }
    device_events();
    return any ? WGPUWaitStatus_Success : WGPUWaitStatus_TimedOut;
}

static void InstanceRelease(WGPUInstance instance) { js_release(ID(instance)); }
static WGPUBool InstanceHasWGSLLanguageFeature(WGPUInstance instance, WGPUWGSLLanguageFeatureName f) {
    (void)instance;
    static const char packed[] = "packed_4x8_integer_dot_product";
    return f == WGPUWGSLLanguageFeatureName_Packed4x8IntegerDotProduct && js_wgsl_feature(packed, sizeof packed - 1);
}

/* field: 0 vendor, 1 architecture, 2 device, 3 description; a NUL-terminated copy each */
static WGPUStringView info_string(WGPUAdapter adapter, uint32_t field) {
    char tmp[256];
    uint32_t n = js_adapter_info(ID(adapter), field, tmp, sizeof tmp);
    if (n > sizeof tmp - 1) n = sizeof tmp - 1;
    char *s = malloc(n + 1);
    if (!s) return (WGPUStringView){NULL, 0};
    memcpy(s, tmp, n);
    s[n] = 0;
    return (WGPUStringView){s, n};
}

static WGPUStatus AdapterGetInfo(WGPUAdapter adapter, WGPUAdapterInfo *info) {
    info->vendor = info_string(adapter, 0);
    info->architecture = info_string(adapter, 1);
    info->device = info_string(adapter, 2);
    info->description = info_string(adapter, 3);
    info->backendType = WGPUBackendType_WebGPU;
    info->adapterType = js_adapter_info(ID(adapter), 4, NULL, 0) ? WGPUAdapterType_CPU : WGPUAdapterType_Unknown;
    info->vendorID = info->deviceID = 0;
    info->subgroupMinSize = js_adapter_info(ID(adapter), 5, NULL, 0);
    info->subgroupMaxSize = js_adapter_info(ID(adapter), 6, NULL, 0);
    return WGPUStatus_Success;
}

static void AdapterInfoFreeMembers(WGPUAdapterInfo info) {
    free((void *)info.vendor.data);
    free((void *)info.architecture.data);
    free((void *)info.device.data);
    free((void *)info.description.data);
}

/* ---- limits and features, by their JavaScript names ---- */

static const struct {
    const char *name;
    size_t offset;
    bool wide; /* uint64_t, else uint32_t */
} limit_fields[] = {
#define L32(f) {#f, offsetof(WGPULimits, f), false}
#define L64(f) {#f, offsetof(WGPULimits, f), true}
    L32(maxTextureDimension1D), L32(maxTextureDimension2D), L32(maxTextureDimension3D), L32(maxTextureArrayLayers),
    L32(maxBindGroups), L32(maxBindGroupsPlusVertexBuffers), L32(maxBindingsPerBindGroup),
    L32(maxDynamicUniformBuffersPerPipelineLayout), L32(maxDynamicStorageBuffersPerPipelineLayout),
    L32(maxSampledTexturesPerShaderStage), L32(maxSamplersPerShaderStage), L32(maxStorageBuffersPerShaderStage),
    L32(maxStorageTexturesPerShaderStage), L32(maxUniformBuffersPerShaderStage), L64(maxUniformBufferBindingSize),
    L64(maxStorageBufferBindingSize), L32(minUniformBufferOffsetAlignment), L32(minStorageBufferOffsetAlignment),
    L32(maxVertexBuffers), L64(maxBufferSize), L32(maxVertexAttributes), L32(maxVertexBufferArrayStride),
    L32(maxInterStageShaderVariables), L32(maxColorAttachments), L32(maxColorAttachmentBytesPerSample),
    L32(maxComputeWorkgroupStorageSize), L32(maxComputeInvocationsPerWorkgroup), L32(maxComputeWorkgroupSizeX),
    L32(maxComputeWorkgroupSizeY), L32(maxComputeWorkgroupSizeZ), L32(maxComputeWorkgroupsPerDimension),
    L32(maxImmediateSize),
#undef L32
#undef L64
};
#define N_LIMITS (sizeof limit_fields / sizeof limit_fields[0])

/* A limit the JS object lacks reads as -1 and is left at 0 ("undefined"). */
static WGPUStatus get_limits(uint32_t object, WGPULimits *l) {
    for (size_t i = 0; i < N_LIMITS; i++) {
        double v = js_limit(object, limit_fields[i].name, (uint32_t)strlen(limit_fields[i].name));
        char *at = (char *)l + limit_fields[i].offset;
        if (v < 0) v = 0;
        if (limit_fields[i].wide) *(uint64_t *)at = (uint64_t)v;
        else *(uint32_t *)at = v > 4294967295.0 ? UINT32_MAX : (uint32_t)v;
    }
    return WGPUStatus_Success;
}

static const char *feature_name(WGPUFeatureName f) {
    switch ((int)f) {
    case WGPUFeatureName_TimestampQuery: return "timestamp-query";
    case WGPUFeatureName_ShaderF16: return "shader-f16";
    case WGPUFeatureName_Subgroups: return "subgroups";
    case 0x12: return "core-features-and-limits";
    default: return NULL;
    }
}

static WGPUBool has_feature(uint32_t object, WGPUFeatureName f) {
    const char *n = feature_name(f);
    return n && js_has_feature(object, n, (uint32_t)strlen(n));
}

static WGPUStatus AdapterGetLimits(WGPUAdapter a, WGPULimits *l) { return get_limits(ID(a), l); }
static WGPUBool AdapterHasFeature(WGPUAdapter a, WGPUFeatureName f) { return has_feature(ID(a), f); }
static WGPUStatus DeviceGetLimits(WGPUDevice d, WGPULimits *l) { return get_limits(ID(d), l); }
static WGPUBool DeviceHasFeature(WGPUDevice d, WGPUFeatureName f) { return has_feature(ID(d), f); }

static WGPUFuture AdapterRequestDevice(WGPUAdapter adapter, const WGPUDeviceDescriptor *desc,
                                       WGPURequestDeviceCallbackInfo info) {
    js_device_begin();
    for (size_t i = 0; i < desc->requiredFeatureCount; i++) {
        const char *n = feature_name(desc->requiredFeatures[i]);
        if (n) js_device_feature(n, (uint32_t)strlen(n));
    }
    if (desc->requiredLimits)
        for (size_t i = 0; i < N_LIMITS; i++) {
            const char *at = (const char *)desc->requiredLimits + limit_fields[i].offset;
            double v = limit_fields[i].wide ? (double)*(const uint64_t *)at : (double)*(const uint32_t *)at;
            if (v > 0) js_device_limit(limit_fields[i].name, (uint32_t)strlen(limit_fields[i].name), v);
        }
    /* Dawn's toggles (desc->nextInChain) have no JavaScript counterpart: ignored */
    const device_cb cb = {0, desc->deviceLostCallbackInfo, desc->uncapturedErrorCallbackInfo};
    return remember(js_request_device(ID(adapter), desc->label.data, sv_len(desc->label)), F_DEVICE,
                    (void *)info.callback, info.userdata1, info.userdata2, &cb);
}

static void AdapterRelease(WGPUAdapter adapter) { js_release(ID(adapter)); }

/* ---- device ---- */

static WGPUQueue DeviceGetQueue(WGPUDevice d) { return HANDLE(WGPUQueue, js_device_queue(ID(d))); }

static WGPUBuffer DeviceCreateBuffer(WGPUDevice d, const WGPUBufferDescriptor *b) {
    return HANDLE(WGPUBuffer, js_create_buffer(ID(d), (double)b->usage, (double)b->size, b->mappedAtCreation,
                                               b->label.data, sv_len(b->label)));
}

static WGPUShaderModule DeviceCreateShaderModule(WGPUDevice d, const WGPUShaderModuleDescriptor *desc) {
    for (const WGPUChainedStruct *c = desc->nextInChain; c; c = c->next)
        if (c->sType == WGPUSType_ShaderSourceWGSL) {
            const WGPUShaderSourceWGSL *src = (const WGPUShaderSourceWGSL *)c;
            return HANDLE(WGPUShaderModule, js_create_shader(ID(d), src->code.data, sv_len(src->code),
                                                             desc->label.data, sv_len(desc->label)));
        }
    return NULL;
}

/* Layout "auto" only (lean's pipelines all derive theirs); no override constants (lean writes
 * its constants into the source). */
static WGPUComputePipeline DeviceCreateComputePipeline(WGPUDevice d, const WGPUComputePipelineDescriptor *p) {
    if (p->layout || p->compute.constantCount) return NULL;
    return HANDLE(WGPUComputePipeline,
                  js_create_pipeline(ID(d), ID(p->compute.module), p->compute.entryPoint.data,
                                     sv_len(p->compute.entryPoint), p->label.data, sv_len(p->label)));
}

static WGPUBindGroup DeviceCreateBindGroup(WGPUDevice d, const WGPUBindGroupDescriptor *g) {
    for (size_t i = 0; i < g->entryCount; i++) {
        const WGPUBindGroupEntry *e = &g->entries[i];
        js_bind_entry(e->binding, ID(e->buffer), (double)e->offset, e->size == WGPU_WHOLE_SIZE ? -1.0 : (double)e->size);
    }
    return HANDLE(WGPUBindGroup, js_create_bind_group(ID(d), ID(g->layout), g->label.data, sv_len(g->label)));
}

static WGPUCommandEncoder DeviceCreateCommandEncoder(WGPUDevice d, const WGPUCommandEncoderDescriptor *desc) {
    (void)desc;
    cmdlist *l = spare ? spare : calloc(1, sizeof *l);
    if (!l) return NULL;
    spare = NULL;
    l->encoder_alive = true;
    PUT(l, OP_ENCODER, ID(d));
    return (WGPUCommandEncoder)l;
}

static void DevicePushErrorScope(WGPUDevice d, WGPUErrorFilter f) {
    flush_held(); /* a write's error goes to the scope open when it was made */
    js_push_scope(ID(d), f);
}

static WGPUFuture DevicePopErrorScope(WGPUDevice d, WGPUPopErrorScopeCallbackInfo info) {
    flush_held();
    return remember(js_pop_scope(ID(d)), F_SCOPE, (void *)info.callback, info.userdata1, info.userdata2, NULL);
}

static WGPUQuerySet DeviceCreateQuerySet(WGPUDevice d, const WGPUQuerySetDescriptor *q) {
    return HANDLE(WGPUQuerySet, js_create_query_set(ID(d), q->count));
}

static void DeviceDestroy(WGPUDevice d) {
    flush_held();
    js_destroy(ID(d));
    device_cb *cb = device_of(ID(d));
    if (cb && cb->lost.callback) {
        WGPUDeviceLostCallback lost = cb->lost.callback;
        cb->lost.callback = NULL;
        lost(&d, WGPUDeviceLostReason_Destroyed, (WGPUStringView){"device destroyed", 16}, cb->lost.userdata1,
             cb->lost.userdata2);
    }
}

static void DeviceRelease(WGPUDevice d) {
    flush_held();
    device_cb *cb = device_of(ID(d));
    if (cb) *cb = (device_cb){0};
    js_release(ID(d));
}

/* ---- queue and buffers ---- */

static void QueueWriteBuffer(WGPUQueue q, WGPUBuffer b, uint64_t offset, const void *data, size_t size) {
    const uint32_t words = 5 + (uint32_t)(size + 3) / 4;
    if (held_n && held_queue != ID(q)) flush_held();
    if (size > HELD_MAX_BYTES || !grow(&held, &held_cap, held_n + words)) { /* too big to hold, or no memory */
        flush_held();
        js_write_buffer(ID(q), ID(b), (double)offset, data, (uint32_t)size);
        return;
    }
    uint32_t *w = held + held_n;
    w[0] = OP_WRITE, w[1] = ID(b), w[2] = LO(offset), w[3] = HI(offset), w[4] = (uint32_t)size;
    w[words - 1] = 0;
    memcpy(w + 5, data, size);
    held_queue = ID(q);
    held_n += words;
}

static void QueueSubmit(WGPUQueue q, size_t count, const WGPUCommandBuffer *commands) {
    if (held_n && held_queue != ID(q)) flush_held();
    if (count == 1 && !held_n) {
        js_submit_list(ID(q), LIST(commands[0])->w, LIST(commands[0])->n);
        return;
    }
    uint32_t n = held_n; /* the held writes first: they were made before this submit */
    for (size_t i = 0; i < count; i++) n += LIST(commands[i])->n;
    if (!grow(&joined, &joined_cap, n)) { /* out of memory: the writes alone, nothing submitted */
        flush_held();
        return;
    }
    memcpy(joined, held, held_n * sizeof *joined);
    n = held_n;
    held_n = 0;
    for (size_t i = 0; i < count; i++) {
        const cmdlist *l = LIST(commands[i]);
        memcpy(joined + n, l->w, l->n * sizeof *joined);
        n += l->n;
    }
    js_submit_list(ID(q), joined, n); /* count 0: an empty submit */
}

static WGPUFuture QueueOnSubmittedWorkDone(WGPUQueue q, WGPUQueueWorkDoneCallbackInfo info) {
    flush_held();
    return remember(js_work_done(ID(q)), F_WORK_DONE, (void *)info.callback, info.userdata1, info.userdata2, NULL);
}

static void QueueRelease(WGPUQueue q) {
    flush_held();
    js_release(ID(q));
}

static WGPUFuture BufferMapAsync(WGPUBuffer b, WGPUMapMode mode, size_t offset, size_t size,
                                 WGPUBufferMapCallbackInfo info) {
    (void)mode; /* lean maps for reading only */
    flush_held();
    return remember(js_map_read(ID(b), (double)offset, size == SIZE_MAX ? -1.0 : (double)size), F_MAP,
                    (void *)info.callback, info.userdata1, info.userdata2, NULL);
}

static const void *BufferGetConstMappedRange(WGPUBuffer b, size_t offset, size_t size) {
    mapped *r = malloc(sizeof *r);
    void *copy = malloc(size ? size : 1);
    if (!r || !copy || !js_mapped_copy(ID(b), (double)offset, (double)size, copy)) {
        free(r), free(copy);
        return NULL;
    }
    *r = (mapped){ID(b), copy, ranges};
    ranges = r;
    return copy;
}

static void BufferUnmap(WGPUBuffer b) {
    flush_held();
    drop_ranges(ID(b));
    js_unmap(ID(b));
}

static void BufferDestroy(WGPUBuffer b) {
    flush_held();
    drop_ranges(ID(b));
    js_destroy(ID(b));
}

static void BufferRelease(WGPUBuffer b) {
    flush_held();
    drop_ranges(ID(b));
    js_release(ID(b));
}

/* ---- pipelines, bind groups, commands ---- */

static void ShaderModuleRelease(WGPUShaderModule m) { js_release(ID(m)); }
static WGPUBindGroupLayout ComputePipelineGetBindGroupLayout(WGPUComputePipeline p, uint32_t group) {
    return HANDLE(WGPUBindGroupLayout, js_bind_group_layout(ID(p), group));
}
static void ComputePipelineRelease(WGPUComputePipeline p) { js_release(ID(p)); }
static void BindGroupLayoutRelease(WGPUBindGroupLayout l) { js_release(ID(l)); }
static void BindGroupRelease(WGPUBindGroup g) { js_release(ID(g)); }

static WGPUComputePassEncoder CommandEncoderBeginComputePass(WGPUCommandEncoder e, const WGPUComputePassDescriptor *d) {
    const WGPUPassTimestampWrites *t = d ? d->timestampWrites : NULL;
    PUT(LIST(e), OP_PASS, t ? ID(t->querySet) : 0, t ? t->beginningOfPassWriteIndex : 0, t ? t->endOfPassWriteIndex : 0);
    return (WGPUComputePassEncoder)e;
}

static void CommandEncoderCopyBufferToBuffer(WGPUCommandEncoder e, WGPUBuffer src, uint64_t so, WGPUBuffer dst,
                                             uint64_t dof, uint64_t size) {
    PUT(LIST(e), OP_COPY, ID(src), LO(so), HI(so), ID(dst), LO(dof), HI(dof), LO(size), HI(size));
}

static void CommandEncoderResolveQuerySet(WGPUCommandEncoder e, WGPUQuerySet set, uint32_t first, uint32_t count,
                                          WGPUBuffer dst, uint64_t off) {
    PUT(LIST(e), OP_RESOLVE, ID(set), first, count, ID(dst), LO(off), HI(off));
}

static WGPUCommandBuffer CommandEncoderFinish(WGPUCommandEncoder e, const WGPUCommandBufferDescriptor *d) {
    (void)d;
    cmdlist *l = LIST(e);
    PUT(l, OP_FINISH);
    if (l->failed) return NULL;
    l->buffer_alive = true;
    return (WGPUCommandBuffer)l;
}

static void CommandEncoderRelease(WGPUCommandEncoder e) {
    LIST(e)->encoder_alive = false;
    list_release(LIST(e));
}
static void CommandBufferRelease(WGPUCommandBuffer c) {
    LIST(c)->buffer_alive = false;
    list_release(LIST(c));
}
static void ComputePassEncoderSetPipeline(WGPUComputePassEncoder p, WGPUComputePipeline pl) {
    PUT(LIST(p), OP_PIPELINE, ID(pl));
}
static void ComputePassEncoderSetBindGroup(WGPUComputePassEncoder p, uint32_t group, WGPUBindGroup g, size_t n,
                                           const uint32_t *offsets) {
    (void)n, (void)offsets; /* lean uses no dynamic offsets */
    PUT(LIST(p), OP_BIND, group, ID(g));
}
static void ComputePassEncoderDispatchWorkgroups(WGPUComputePassEncoder p, uint32_t x, uint32_t y, uint32_t z) {
    PUT(LIST(p), OP_DISPATCH, x, y, z);
}
static void ComputePassEncoderEnd(WGPUComputePassEncoder p) { PUT(LIST(p), OP_END_PASS); }
static void ComputePassEncoderRelease(WGPUComputePassEncoder p) { (void)p; /* the encoder's list */ }
static void QuerySetDestroy(WGPUQuerySet s) { js_destroy(ID(s)); }
static void QuerySetRelease(WGPUQuerySet s) { js_release(ID(s)); }

/* ---- the table ---- */

lean_status gpu_load_library(wgpu_api *w, char *path, size_t path_cap, bool *pump, lean_error *err) {
    *pump = !js_jspi();
    char why[256];
    uint32_t n = js_why(why, sizeof why - 1);
    if (n) {
        why[n < sizeof why - 1 ? n : sizeof why - 1] = 0;
        return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "no WebGPU in this JavaScript host: %s", why);
    }
    *w = (wgpu_api){
        CreateInstance, InstanceRequestAdapter, InstanceWaitAny, InstanceRelease, InstanceHasWGSLLanguageFeature, AdapterGetInfo,
        AdapterInfoFreeMembers, AdapterGetLimits, AdapterHasFeature, AdapterRequestDevice, AdapterRelease,
        DeviceGetLimits, DeviceHasFeature, DeviceGetQueue, DeviceCreateBuffer, DeviceCreateShaderModule,
        DeviceCreateComputePipeline, DeviceCreateBindGroup, DeviceCreateCommandEncoder, DevicePushErrorScope,
        DevicePopErrorScope, DeviceCreateQuerySet, DeviceDestroy, DeviceRelease, QueueWriteBuffer, QueueSubmit,
        QueueOnSubmittedWorkDone, QueueRelease, BufferMapAsync, BufferGetConstMappedRange, BufferUnmap,
        BufferDestroy, BufferRelease, ShaderModuleRelease, ComputePipelineGetBindGroupLayout,
        ComputePipelineRelease, BindGroupLayoutRelease, BindGroupRelease, CommandEncoderBeginComputePass,
        CommandEncoderCopyBufferToBuffer, CommandEncoderResolveQuerySet, CommandEncoderFinish,
        CommandEncoderRelease, CommandBufferRelease, ComputePassEncoderSetPipeline, ComputePassEncoderSetBindGroup,
        ComputePassEncoderDispatchWorkgroups, ComputePassEncoderEnd, ComputePassEncoderRelease, QuerySetDestroy,
        QuerySetRelease, NULL /* DeviceSetLoggingCallback: Dawn's own */,
        NULL /* AdapterPropertiesSubgroupMatrixConfigsFreeMembers: no subgroup matrices here */,
    };
    snprintf(path, path_cap, "JavaScript (navigator.gpu%s)", *pump ? ", no JSPI" : "");
    return LEAN_OK;
}

bool gpu_wait_interrupted(void) {
    const bool cut = wait_cut;
    wait_cut = false;
    return cut;
}

bool gpu_steps_unscoped(void) {
    return true;
}

/* The default adapter request is the only one a JavaScript host has. */
bool gpu_default_request_useful(const char *library) {
    (void)library;
    return true;
}

#endif
