/* gpu_impl.h — what the files implementing gpu.h over webgpu.h share (not for callers of
 * gpu.h): the objects behind the opaque handles, the library loader, waiting on futures and
 * error scopes. Files: native.c (finding and loading the library), device.c (instance,
 * adapter, device, errors, waits, kernel variants), buffer.c, pipeline.c (pipelines, bind
 * groups, shaders), cmd.c (recording and submitting).
 *
 * Ownership: g owns every buffer, pipeline and bind group made on it; each sits in one of g's
 * lists, so lean_gpu_close frees whatever the caller has not (nothing may be used after it).
 * Failure: once the device is lost or an error escapes every error scope (an uncaptured
 * error), g->failed is set with the first message, and every call after that fails with
 * LEAN_ERR_DEVICE and that message (gpu_check). */
#ifndef LEAN_GPU_IMPL_H
#define LEAN_GPU_IMPL_H

#include "gpu/gpu.h"
#include "gpu/webgpu.h"

#include <string.h>

/* What an asynchronous call's callback reports (callbacks fire inside gpu_wait, so this can
 * live on the caller's stack): done, success, the handle it made (adapter, device), the error
 * type (error scopes) and the message. */
typedef struct gpu_async {
    bool done, ok;
    void *handle;
    WGPUErrorType type;
    char msg[400];
} gpu_async;

/* A request in flight whose answer may come after the call that asked has returned (without
 * JSPI in a JavaScript host: pump mode), or that nobody waits for any more: heap-allocated so
 * its callback always has somewhere to write. */
typedef enum { GPU_REQ_SCOPE, GPU_REQ_WORK_DONE, GPU_REQ_DROP } gpu_req_kind;
typedef struct gpu_req {
    WGPUFuture f;
    gpu_async r;
    gpu_req_kind kind; /* in g->later: what its answer means (device.c, gpu_later) */
    char what[80];     /* what asked, for the message */
    struct gpu_req *next;
} gpu_req;

struct lean_gpu_buf {
    lean_gpu *g;
    WGPUBuffer buf;
    uint64_t size;  /* bytes, a multiple of 4 */
    uint64_t base;  /* a view's first byte in buf (lean_gpu_buf_view); 0 for a buffer of its own */
    bool view;      /* buf is its parent's: not in g->bufs, not destroyed with the view */
    unsigned usage; /* LEAN_GPU_* */
    char label[64];
    lean_gpu_buf *prev, *next; /* g->bufs */
    gpu_req *map; /* a READBACK buffer's map in flight (lean_gpu_map_begin), or NULL */
};

struct lean_gpu_pipeline {
    WGPUComputePipeline pipe;
    char *text;       /* the full source compiled (the cache key), lean_malloc'd */
    size_t text_len;
    uint64_t hash;    /* of text (FNV-1a) */
    char label[64];
    lean_gpu_pipeline *next; /* g->pipelines; freed only by lean_gpu_close */
};

struct lean_gpu_bindgroup {
    lean_gpu *g;
    WGPUBindGroup group;
    lean_gpu_bindgroup *prev, *next; /* g->groups */
};

struct lean_gpu {
    wgpu_api w; /* the library's functions */
    char library[1024]; /* the path it was loaded from (absolute when found by path) */
    WGPUInstance instance;
    WGPUAdapter adapter;
    WGPUDevice device;
    WGPUQueue queue;
    lean_gpu_info info;
    lean_gpu_options opt; /* as opened (lean_gpu_open), profile set by LEAN_PROFILE=1 too */
    bool dump;            /* LEAN_GPU_DUMP=1 when opened (device.c) */
    char description[128]; /* the adapter's description, e.g. "OpenGL version OpenGL ES 3.2 Mesa 22.3.6" */
    bool failed;    /* the device is lost or an uncaptured error happened: fail_msg says which */
    bool destroyed; /* wgpuDeviceDestroy was called (lose_device or close) */
    char fail_msg[400];
    lean_gpu_buf *bufs;
    uint64_t bytes;        /* the sizes of bufs (lean_gpu_bytes_allocated) */
    lean_gpu_pipeline *pipelines;
    lean_gpu_bindgroup *groups;
    lean_gpu_buf *staging; /* READBACK buffer for lean_gpu_buf_read, grown on demand */
    struct gpu_profile *prof; /* opt.profile: profile.c's counts and timestamps; else NULL */
    uint64_t dispatches;   /* recorded by lean_gpu_dispatch since open (lean_gpu_dispatch_count) */
    /* bytes queued by QueueWriteBuffer since the last submit (buffer.c keeps it at most
     * WRITE_PENDING_MAX), and the most it has been since open (test_hooks.h) */
    uint64_t write_pending, write_pending_peak;
    uint64_t maps;         /* lean_gpu_map_begin calls since open (test_hooks.h) */
    /* Pump mode (a JavaScript host without JSPI, web.c): a wait never blocks; an unanswered
     * one is LEAN_PENDING. Error scopes and queue-done checks go to `later` instead of being
     * waited for; a wait first needs those asked for before it answered (gpu_wait), so no
     * result is trusted before the errors of the work before it are known. */
    bool pump;
    /* A forward step's submit has no error scopes (gpu_steps_unscoped): an error in it comes
     * as an uncaptured error, which fails g, and a wait reports it (gpu_wait). */
    bool submit_unscoped;
    gpu_req *later, *later_last; /* in the order asked */
    gpu_req *req;          /* lean_gpu_open's adapter or device request in flight (pump mode) */
    int open_stage;        /* lean_gpu_open: 0 default adapter request, 1 OpenGL ES, 2 device */
    char why[2][256];      /* lean_gpu_open: why each adapter request found none */
    bool matrix_refused;   /* lean_gpu_open: the device request with subgroup matrices failed */
};

/* native.c: fills *w with the functions of the first webgpu.h library found (native.c's header
 * says in which order) and writes its path to path. LEAN_ERR_UNSUPPORTED naming every place
 * tried. In wasm32, web.c: the functions over JavaScript's navigator.gpu. *pump: waits cannot
 * block (web.c without JSPI; natively never). */
lean_status gpu_load_library(wgpu_api *w, char *path, size_t path_cap, bool *pump, lean_error *err);
/* Whether the default adapter request can find more than the Null backend: natively, whether
 * the Vulkan loader (libvulkan.so.1) can be loaded, beside library or by name; in JS, always. */
bool gpu_default_request_useful(const char *library);
/* Whether the last wait that timed out was cut short by the host (web.c: an abort interrupts
 * the waits on buffer maps, web/webgpu_imports.mjs interrupt()), then forgotten; natively,
 * never. gpu_wait then returns LEAN_PENDING, as pump mode does. */
bool gpu_wait_interrupted(void);
/* Whether a forward step's submit goes without error scopes (lean_gpu_submit_step): in
 * JavaScript (web.c), where popping them costs promises and, under JSPI, a wait on each, a
 * trip through the event loop, three a decode step (a suspect in the browser's decode
 * stalls); its errors come as uncaptured ones instead. Natively, no. */
bool gpu_steps_unscoped(void);

/* The embedded src/gpu/shaders/NAME.wgsl files ($(BUILD)/gen/shaders.c, made by
 * tools/embed_wgsl.c): name without ".wgsl", text NUL-terminated. */
typedef struct gpu_shader_file {
    const char *name;
    const char *text;
} gpu_shader_file;
extern const gpu_shader_file gpu_shader_files[];
extern const size_t gpu_n_shader_files;


/* device.c */
/* LEAN_OK, or LEAN_ERR_DEVICE with the message of the loss / uncaptured error. */
lean_status gpu_check(const lean_gpu *g, lean_error *err);
/* Blocks in wgpuInstanceWaitAny until f completes; LEAN_ERR_DEVICE if waiting fails (or, with
 * submit_unscoped, if g has failed by then: an uncaptured error of a step). Pump
 * mode: LEAN_PENDING, at once, until f and every request in g->later asked for before it have
 * been answered (those are then applied: an error fails g); f stays in flight for the next
 * call. */
lean_status gpu_wait(lean_gpu *g, WGPUFuture f, const char *what, lean_error *err);
/* A request for g->req-style bookkeeping: zeroed, kind and what set; NULL when out of memory. */
gpu_req *gpu_req_new(gpu_req_kind kind, const char *what);
/* Hands req (answered or not) to g: pump mode keeps it in g->later until answered (an error
 * scope's error, or an unfinished queue, then fails g); natively it is waited for now. */
void gpu_later(lean_gpu *g, gpu_req *req);
/* Pushes validation, out-of-memory and internal error scopes around the calls that follow. */
void gpu_scope_push(lean_gpu *g);
/* Pops the three scopes, waits for them, and returns the first error caught (NoError if none)
 * with its message (NUL-terminated, at most cap - 1 bytes) in msg. Pump mode: returns NoError
 * at once, the scopes going to g->later (what names the calls inside them there). */
WGPUErrorType gpu_scope_pop(lean_gpu *g, const char *what, char *msg, size_t cap);
/* The lean_status for an error of this type: validation -> what_invalid, OOM -> NOMEM,
 * anything else -> DEVICE. */
lean_status gpu_error_status(WGPUErrorType type, lean_status what_invalid);

/* buffer.c: maps [map_off, map_off + map_len) of a MapRead buffer (map_off a multiple of 8,
 * map_len of 4) once the work submitted so far is done, copies n bytes from map_off + skip to
 * dst, unmaps. Blocking: LEAN_ERR_UNSUPPORTED in pump mode (a read there is map_begin/take). */
lean_status gpu_map_copy(lean_gpu *g, WGPUBuffer buf, uint64_t map_off, uint64_t map_len, uint64_t skip, void *dst,
                         uint64_t n, const char *label, lean_error *err);

/* profile.c (see its header). gpu_profile_pass: the timestamp writes for the pass of the
 * i-th dispatch of the command buffer being recorded (NULL: untimed);
 * gpu_profile_resolve: before Finish, for n dispatches; gpu_profile_collect: after Submit,
 * waits for their times. */
lean_status gpu_profile_open(lean_gpu *g, lean_error *err);
void gpu_profile_close(lean_gpu *g);
const WGPUPassTimestampWrites *gpu_profile_pass(lean_gpu *g, uint32_t i, const char *label,
                                                WGPUPassTimestampWrites *tw);
void gpu_profile_resolve(lean_gpu *g, WGPUCommandEncoder enc, uint32_t n);
lean_status gpu_profile_collect(lean_gpu *g, uint32_t n, lean_error *err);

/* The view of a C string (NULL: none). */
static inline WGPUStringView gpu_sv(const char *s) {
    WGPUStringView v = {s, WGPU_STRLEN};
    return v;
}
/* Copies a view into dst (NUL-terminated, truncated to cap - 1 bytes). */
static inline void gpu_sv_copy(char *dst, size_t cap, WGPUStringView v) {
    size_t n = v.data ? (v.length == WGPU_STRLEN ? strlen(v.data) : v.length) : 0;
    if (n > cap - 1) n = cap - 1;
    if (n) memcpy(dst, v.data, n);
    dst[n] = 0;
}

#endif
