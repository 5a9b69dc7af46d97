/* buffer.c — GPU buffers: creation (checked against the device's limits, inside error
 * scopes), chunked writes, blocking read-back through a mappable staging buffer, and maps that
 * are asked for and taken apart (lean_gpu_map_begin / take / drop: the reads pump mode makes).
 * A map in flight is a gpu_req of its own, so a buffer freed or a map dropped before its answer
 * comes leaves the callback somewhere to write (gpu_later).
 *
 * Usages (gpu.h -> WebGPU): STORAGE = Storage|CopySrc|CopyDst, UNIFORM = Uniform|CopyDst,
 * READBACK = MapRead|CopyDst (WebGPU allows MapRead only with CopyDst). A read of a STORAGE
 * buffer copies the range into g->staging (grown on demand, at most STAGING_MAX bytes, so a
 * larger read goes in pieces) and maps that; a READBACK buffer is mapped directly. */
#include "gpu/gpu_impl.h"
#include "gpu/test_hooks.h"

#include <stdio.h>

/* The most bytes of queue writes pending between two submits, counted across writes: a submit
 * lets the browser release the staging memory of the writes before it (DESIGN.md principle 1) */
#define WRITE_PENDING_MAX ((uint64_t)8 << 20)
#define STAGING_MAX ((uint64_t)64 << 20)

static uint64_t round_up(uint64_t n, uint64_t to) {
    return (n + to - 1) / to * to;
}

static WGPUBufferUsage wgpu_usage(unsigned usage) {
    WGPUBufferUsage u = 0;
    if (usage & LEAN_GPU_STORAGE) u |= WGPUBufferUsage_Storage | WGPUBufferUsage_CopySrc | WGPUBufferUsage_CopyDst;
    if (usage & LEAN_GPU_UNIFORM) u |= WGPUBufferUsage_Uniform | WGPUBufferUsage_CopyDst;
    if (usage & LEAN_GPU_READBACK) u |= WGPUBufferUsage_MapRead | WGPUBufferUsage_CopyDst;
    return u;
}

lean_status lean_gpu_buf_create(lean_gpu *g, uint64_t size, unsigned usage, const char *label, lean_gpu_buf **out,
                                lean_error *err) {
    *out = NULL;
    lean_status st = gpu_check(g, err);
    if (st != LEAN_OK) return st;
    label = label ? label : "";
    unsigned known = LEAN_GPU_STORAGE | LEAN_GPU_UNIFORM | LEAN_GPU_READBACK;
    if (!usage || (usage & ~known) || ((usage & LEAN_GPU_READBACK) && usage != LEAN_GPU_READBACK))
        return LEAN_FAIL(err, LEAN_ERR_ARG, "buffer '%s': usage 0x%x is not STORAGE and/or UNIFORM, or READBACK alone",
                         label, usage);
    if (size > g->info.max_buffer / 16 * 16)
        return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "buffer '%s': %llu bytes is more than the device's maxBufferSize %llu",
                         label, (unsigned long long)size, (unsigned long long)g->info.max_buffer);
    /* a whole number of vec4s (kernels read activations as vec4s; a zero-size buffer cannot
     * be bound) */
    uint64_t bytes = size < 16 ? 16 : round_up(size, 16);
    lean_gpu_buf *b = lean_calloc(1, sizeof *b);
    if (!b) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "buffer '%s': out of memory", label);
    snprintf(b->label, sizeof b->label, "%s", label);
    WGPUBufferDescriptor desc = {NULL, gpu_sv(b->label), wgpu_usage(usage), bytes, 0};
    gpu_scope_push(g);
    b->buf = g->w.DeviceCreateBuffer(g->device, &desc);
    char msg[400];
    char what[80];
    snprintf(what, sizeof what, "buffer '%s'", b->label);
    WGPUErrorType e = gpu_scope_pop(g, what, msg, sizeof msg);
    if (e != WGPUErrorType_NoError || !b->buf) {
        if (b->buf) g->w.BufferRelease(b->buf);
        lean_free(b);
        return LEAN_FAIL(err, gpu_error_status(e, LEAN_ERR_ARG), "buffer '%s' (%llu bytes): %s", label,
                         (unsigned long long)bytes, e != WGPUErrorType_NoError ? msg : "creation failed");
    }
    b->g = g;
    b->size = bytes;
    b->usage = usage;
    b->next = g->bufs;
    if (g->bufs) g->bufs->prev = b;
    g->bufs = b;
    g->bytes += bytes;
    *out = b;
    return LEAN_OK;
}

lean_status lean_gpu_buf_view(lean_gpu_buf *parent, uint64_t offset, uint64_t size, const char *label,
                              lean_gpu_buf **out, lean_error *err) {
    *out = NULL;
    label = label ? label : "";
    if (!parent || parent->view || parent->usage != LEAN_GPU_STORAGE)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "view '%s': the parent must be a STORAGE buffer of its own", label);
    const uint64_t align = parent->g->info.min_storage_offset_align ? parent->g->info.min_storage_offset_align : 256;
    if (offset % align || size % 16 || !size || offset > parent->size || size > parent->size - offset)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "view '%s': %llu bytes at %llu of buffer '%s' (%llu bytes; offsets "
                         "multiples of %llu, sizes of 16)", label, (unsigned long long)size,
                         (unsigned long long)offset, parent->label, (unsigned long long)parent->size,
                         (unsigned long long)align);
    lean_gpu_buf *b = lean_calloc(1, sizeof *b);
    if (!b) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "view '%s': out of memory", label);
    *b = (lean_gpu_buf){.g = parent->g, .buf = parent->buf, .size = size, .base = offset, .view = true,
                        .usage = parent->usage};
    snprintf(b->label, sizeof b->label, "%s", label);
    *out = b;
    return LEAN_OK;
}

void lean_gpu_buf_free(lean_gpu_buf *b) {
    if (!b) return;
    if (b->view) { /* the parent's buffer stays */
        lean_free(b);
        return;
    }
    lean_gpu *g = b->g;
    if (b->prev) b->prev->next = b->next;
    else g->bufs = b->next;
    if (b->next) b->next->prev = b->prev;
    g->bytes -= b->size;
    if (g->staging == b) g->staging = NULL;
    g->w.BufferDestroy(b->buf); /* aborts a map in flight (its record outlives b: gpu_later) */
    if (b->map) b->map->kind = GPU_REQ_DROP, gpu_later(g, b->map);
    g->w.BufferRelease(b->buf);
    lean_free(b);
}

uint64_t lean_gpu_buf_size(const lean_gpu_buf *b) {
    return b->size;
}

uint64_t lean_gpu_bytes_allocated(const lean_gpu *g) {
    return g->bytes;
}

uint64_t lean_gpu_write_pending_peak(lean_gpu *g, bool reset) {
    const uint64_t peak = g->write_pending_peak;
    if (reset) g->write_pending_peak = g->write_pending;
    return peak;
}

uint64_t lean_gpu_map_count(const lean_gpu *g) {
    return g->maps;
}

/* [offset, offset + size) inside b, or LEAN_ERR_ARG naming what is wrong. */
static lean_status check_range(const lean_gpu_buf *b, uint64_t offset, uint64_t size, const char *what,
                               lean_error *err) {
    if (!b) return LEAN_FAIL(err, LEAN_ERR_ARG, "%s: no buffer", what);
    if (offset > b->size || size > b->size - offset)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "%s of %llu bytes at offset %llu: buffer '%s' has %llu bytes", what,
                         (unsigned long long)size, (unsigned long long)offset, b->label, (unsigned long long)b->size);
    return LEAN_OK;
}

lean_status lean_gpu_buf_write(lean_gpu *g, lean_gpu_buf *b, uint64_t offset, const void *data, uint64_t size,
                               lean_error *err) {
    lean_status st = gpu_check(g, err);
    if (st == LEAN_OK) st = check_range(b, offset, size, "write", err);
    if (st != LEAN_OK) return st;
    if (offset % 4 || size % 4 || (size && !data))
        return LEAN_FAIL(err, LEAN_ERR_ARG, "write to buffer '%s': offset %llu and size %llu must be multiples of 4%s",
                         b->label, (unsigned long long)offset, (unsigned long long)size, data ? "" : ", data given");
    for (uint64_t done = 0; done < size;) {
        const uint64_t piece = size - done < WRITE_PENDING_MAX ? size - done : WRITE_PENDING_MAX;
        if (g->write_pending + piece > WRITE_PENDING_MAX) { /* an empty submit: no wait */
            g->w.QueueSubmit(g->queue, 0, NULL);
            g->write_pending = 0;
        }
        g->w.QueueWriteBuffer(g->queue, b->buf, b->base + offset + done, (const char *)data + done, (size_t)piece);
        g->write_pending += piece;
        if (g->write_pending > g->write_pending_peak) g->write_pending_peak = g->write_pending;
        done += piece;
    }
    return gpu_check(g, err);
}

static void on_mapped(WGPUMapAsyncStatus status, WGPUStringView message, void *userdata1, void *userdata2) {
    (void)userdata2;
    gpu_async *r = userdata1;
    r->done = true;
    r->ok = status == WGPUMapAsyncStatus_Success;
    gpu_sv_copy(r->msg, sizeof r->msg, message);
}

/* Asks for [map_off, map_off + map_len) of a MapRead buffer to be mapped (map_off a multiple
 * of 8, map_len of 4): the request (NULL when out of memory), answered when waited on. */
static gpu_req *map_start(lean_gpu *g, WGPUBuffer buf, uint64_t map_off, uint64_t map_len, const char *label) {
    gpu_req *q = gpu_req_new(GPU_REQ_DROP, label);
    if (!q) return NULL;
    WGPUBufferMapCallbackInfo info = {NULL, WGPUCallbackMode_WaitAnyOnly, on_mapped, &q->r, NULL};
    q->f = g->w.BufferMapAsync(buf, WGPUMapMode_Read, (size_t)map_off, (size_t)map_len, info);
    return q;
}

/* A read the device could not serve. A lost device aborts maps: the loss itself is reported
 * where known; but it may be told after the read fails (Firefox rejects a pending map, or
 * unmaps a mapped one, before it says the device is lost), so the device is failed from here
 * and the model replaces it (session.c), not a context made on it next. */
static lean_status read_failed(lean_gpu *g, const char *label, const char *what, const char *why, lean_error *err) {
    lean_status st = gpu_check(g, err);
    if (st != LEAN_OK) return st;
    g->failed = true;
    snprintf(g->fail_msg, sizeof g->fail_msg, "read of buffer '%.60s': %s%s%.300s", label, what, *why ? ": " : "", why);
    return LEAN_FAIL(err, LEAN_ERR_DEVICE, "%s", g->fail_msg);
}

/* Waits for map_start's request *q, copies n bytes from map_off + skip to dst, unmaps, frees
 * *q. LEAN_PENDING (pump mode): *q stays in flight. */
static lean_status map_finish(lean_gpu *g, WGPUBuffer buf, gpu_req **q, uint64_t map_off, uint64_t map_len,
                              uint64_t skip, void *dst, uint64_t n, const char *label, lean_error *err) {
    lean_status st = gpu_wait(g, (*q)->f, "a buffer map", err);
    if (st == LEAN_PENDING) return st;
    const gpu_async r_ = (*q)->r, *r = &r_;
    lean_free(*q);
    *q = NULL;
    if (st != LEAN_OK) return st;
    if (!r->ok) return read_failed(g, label, "map failed", r->msg, err);
    const char *p = g->w.BufferGetConstMappedRange(buf, (size_t)map_off, (size_t)map_len);
    if (p) memcpy(dst, p + skip, (size_t)n);
    g->w.BufferUnmap(buf);
    return p ? LEAN_OK : read_failed(g, label, "no mapped range", "", err);
}

lean_status gpu_map_copy(lean_gpu *g, WGPUBuffer buf, uint64_t map_off, uint64_t map_len, uint64_t skip, void *dst,
                         uint64_t n, const char *label, lean_error *err) {
    if (g->pump) /* nothing could resume it: the reads lean makes there are map_begin/take */
        return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "read of buffer '%s': a blocking read, which needs JSPI here",
                         label);
    gpu_req *q = map_start(g, buf, map_off, map_len, label);
    if (!q) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "read of buffer '%s': out of memory", label);
    return map_finish(g, buf, &q, map_off, map_len, skip, dst, n, label, err);
}

/* g->staging with at least bytes (<= STAGING_MAX) bytes. */
static lean_status staging(lean_gpu *g, uint64_t bytes, lean_error *err) {
    if (g->staging && g->staging->size >= bytes) return LEAN_OK;
    lean_gpu_buf_free(g->staging);
    uint64_t want = bytes < (1u << 16) ? (1u << 16) : round_up(bytes, 1u << 16);
    return lean_gpu_buf_create(g, want < STAGING_MAX ? want : STAGING_MAX, LEAN_GPU_READBACK, "lean staging",
                               &g->staging, err);
}

/* Copies [a, a + len) of b (both multiples of 4) to the start of g->staging and submits. */
static lean_status copy_to_staging(lean_gpu *g, lean_gpu_buf *b, uint64_t a, uint64_t len, lean_error *err) {
    lean_gpu_cmd *c;
    lean_status st = lean_gpu_begin(g, &c, err);
    if (st != LEAN_OK) return st;
    lean_gpu_copy(c, b, a, g->staging, 0, len);
    return lean_gpu_submit(c, err);
}

lean_status lean_gpu_buf_read(lean_gpu *g, lean_gpu_buf *b, uint64_t offset, void *dst, uint64_t size,
                              lean_error *err) {
    lean_status st = gpu_check(g, err);
    if (st == LEAN_OK) st = check_range(b, offset, size, "read", err);
    if (st != LEAN_OK) return st;
    if (size == 0) return lean_gpu_finish(g, err);
    if (b->usage == LEAN_GPU_READBACK) { /* whole 4-byte words from an 8-aligned start */
        uint64_t a = offset / 8 * 8;
        return gpu_map_copy(g, b->buf, a, round_up(offset + size, 4) - a, offset - a, dst, size, b->label, err);
    }
    if (!(b->usage & LEAN_GPU_STORAGE))
        return LEAN_FAIL(err, LEAN_ERR_ARG, "read of buffer '%s': only STORAGE and READBACK buffers can be read",
                         b->label);
    for (uint64_t done = 0; done < size && st == LEAN_OK;) {
        uint64_t a = (offset + done) / 4 * 4;
        uint64_t e = round_up(offset + size, 4);
        if (e - a > STAGING_MAX) e = a + STAGING_MAX;
        uint64_t n = e - (offset + done) < size - done ? e - (offset + done) : size - done;
        st = staging(g, e - a, err);
        if (st == LEAN_OK) st = copy_to_staging(g, b, a, e - a, err);
        if (st == LEAN_OK)
            st = gpu_map_copy(g, g->staging->buf, 0, e - a, offset + done - a, (char *)dst + done, n, b->label, err);
        done += n;
    }
    return st;
}

lean_status lean_gpu_map_begin(lean_gpu_buf *b, lean_error *err) {
    lean_status st = check_range(b, 0, 0, "map", err);
    if (st == LEAN_OK) st = gpu_check(b->g, err);
    if (st != LEAN_OK) return st;
    if (b->usage != LEAN_GPU_READBACK || b->map)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "map of buffer '%s': %s", b->label,
                         b->map ? "a map is already in flight" : "not a READBACK buffer");
    b->map = map_start(b->g, b->buf, 0, b->size, b->label);
    b->g->maps += b->map != NULL;
    return b->map ? LEAN_OK : LEAN_FAIL(err, LEAN_ERR_NOMEM, "map of buffer '%s': out of memory", b->label);
}

lean_status lean_gpu_map_take(lean_gpu_buf *b, void *dst, uint64_t size, lean_error *err) {
    lean_status st = check_range(b, 0, size, "map", err);
    if (st != LEAN_OK) return st;
    if (!b->map) return LEAN_FAIL(err, LEAN_ERR_ARG, "map of buffer '%s': none in flight", b->label);
    return map_finish(b->g, b->buf, &b->map, 0, b->size, 0, dst, size, b->label, err);
}

void lean_gpu_map_drop(lean_gpu_buf *b) {
    if (!b || !b->map) return;
    gpu_req *q = b->map;
    b->map = NULL;
    /* unmap aborts the map if it is still pending (its answer, at once, means nothing), so a
     * drop never waits for the GPU's work (an abort "within one step": lean_gen_end) */
    b->g->w.BufferUnmap(b->buf);
    gpu_later(b->g, q);
}
