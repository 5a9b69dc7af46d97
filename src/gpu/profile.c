/* profile.c — where a step's GPU time goes (lean_gpu_options.profile, or LEAN_PROFILE=1):
 * dispatches per step, and, on an adapter with timestamp-query, every kernel timed.
 *
 * Dispatches are counted by cmd.c for every device (lean_gpu_dispatch_count); the report
 * gives those since the last one. WebGPU timestamps mark the beginning and end of a pass, not of a dispatch, so a profiling
 * device gives each dispatch its own compute pass (cmd.c asks gpu_profile_pass for the writes)
 * with queries 2i and 2i + 1 for the i-th dispatch of a command buffer. Before the command
 * buffer is finished the queries are resolved into a buffer and copied to a mappable one;
 * after the submit the host waits for them and adds end - begin to the kernel's row (kernels
 * are named by their pipeline's label). A profiled run is therefore slower than a plain one
 * — a pass per dispatch, and a wait per command buffer, so no steps overlap — but each
 * kernel's time is its own. Dawn rounds timestamps to 100 µs unless its
 * timestamp_quantization toggle is off; device.c turns it off when profiling.
 *
 * Only one command buffer is recorded at a time on a device (gpu.h's model), so the labels
 * of the one being recorded live here. */
#include "gpu/gpu_impl.h"

#include <stdio.h>
#include <stdlib.h>

#define MAX_TIMED 2048 /* dispatches timed per command buffer (Dawn allows 4096 queries a set) */
#define MAX_ROWS 96    /* kernels (labels) in the table; more are summed in the last row */

typedef struct prof_row {
    char label[64];
    uint64_t calls;
    uint64_t ns;
} prof_row;

typedef struct gpu_profile {
    WGPUQuerySet set;       /* 2 * MAX_TIMED timestamps; NULL without timestamp-query */
    WGPUBuffer resolved;    /* QueryResolve | CopySrc */
    WGPUBuffer readback;    /* MapRead | CopyDst */
    const char *pending[MAX_TIMED]; /* the labels of the command buffer being recorded */
    uint64_t times[2 * MAX_TIMED];  /* its timestamps, read back: begin and end of each pass */
    prof_row rows[MAX_ROWS];
    int n_rows;
    uint64_t base;          /* lean_gpu_dispatch_count at the last report */
    uint64_t timed;
} gpu_profile;

static WGPUBuffer raw_buffer(lean_gpu *g, WGPUBufferUsage usage, const char *label) {
    WGPUBufferDescriptor d = {NULL, gpu_sv(label), usage, (uint64_t)MAX_TIMED * 16, 0};
    return g->w.DeviceCreateBuffer(g->device, &d);
}

lean_status gpu_profile_open(lean_gpu *g, lean_error *err) {
    if (g->pump) /* every submit would wait for its times */
        return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "profiling waits for the GPU, which needs JSPI here");
    gpu_profile *p = lean_calloc(1, sizeof *p);
    if (!p) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "the profile");
    g->prof = p;
    if (!g->info.timestamp_query) return LEAN_OK; /* counts only */
    WGPUQuerySetDescriptor qd = {NULL, gpu_sv("lean profile"), WGPUQueryType_Timestamp, 2 * MAX_TIMED};
    gpu_scope_push(g);
    p->set = g->w.DeviceCreateQuerySet(g->device, &qd);
    p->resolved = raw_buffer(g, WGPUBufferUsage_QueryResolve | WGPUBufferUsage_CopySrc, "lean profile resolved");
    p->readback = raw_buffer(g, WGPUBufferUsage_MapRead | WGPUBufferUsage_CopyDst, "lean profile readback");
    char msg[400];
    if (gpu_scope_pop(g, "the profile", msg, sizeof msg) != WGPUErrorType_NoError || !p->set || !p->resolved || !p->readback)
        return LEAN_FAIL(err, LEAN_ERR_DEVICE, "the profile's timestamp queries: %s", msg);
    return LEAN_OK;
}

void gpu_profile_close(lean_gpu *g) {
    gpu_profile *p = g->prof;
    if (!p) return;
    if (p->set) {
        g->w.QuerySetDestroy(p->set);
        g->w.QuerySetRelease(p->set);
    }
    WGPUBuffer bufs[2] = {p->resolved, p->readback};
    for (int i = 0; i < 2; i++) {
        if (!bufs[i]) continue;
        g->w.BufferDestroy(bufs[i]);
        g->w.BufferRelease(bufs[i]);
    }
    lean_free(p);
    g->prof = NULL;
}

const WGPUPassTimestampWrites *gpu_profile_pass(lean_gpu *g, uint32_t i, const char *label,
                                                WGPUPassTimestampWrites *tw) {
    gpu_profile *p = g->prof;
    if (!p->set || i >= MAX_TIMED) return NULL;
    p->pending[i] = label;
    *tw = (WGPUPassTimestampWrites){NULL, p->set, 2 * i, 2 * i + 1};
    return tw;
}

void gpu_profile_resolve(lean_gpu *g, WGPUCommandEncoder enc, uint32_t n) {
    gpu_profile *p = g->prof;
    if (!p->set || n == 0) return;
    if (n > MAX_TIMED) n = MAX_TIMED;
    g->w.CommandEncoderResolveQuerySet(enc, p->set, 0, 2 * n, p->resolved, 0);
    g->w.CommandEncoderCopyBufferToBuffer(enc, p->resolved, 0, p->readback, 0, (uint64_t)n * 16);
}

static prof_row *row_of(gpu_profile *p, const char *label) {
    for (int r = 0; r < p->n_rows; r++)
        if (!strcmp(p->rows[r].label, label)) return &p->rows[r];
    if (p->n_rows == MAX_ROWS) return &p->rows[MAX_ROWS - 1];
    prof_row *row = &p->rows[p->n_rows++];
    *row = (prof_row){.calls = 0};
    snprintf(row->label, sizeof row->label, "%s", p->n_rows == MAX_ROWS ? "(other kernels)" : label);
    return row;
}

lean_status gpu_profile_collect(lean_gpu *g, uint32_t n, lean_error *err) {
    gpu_profile *p = g->prof;
    if (!p->set || n == 0) return LEAN_OK;
    if (n > MAX_TIMED) n = MAX_TIMED;
    const uint64_t bytes = (uint64_t)n * 16;
    lean_status st = gpu_map_copy(g, p->readback, 0, bytes, 0, p->times, bytes, "lean profile readback", err);
    for (uint32_t i = 0; st == LEAN_OK && i < n; i++) {
        const uint64_t *t = p->times + 2 * i;
        prof_row *row = row_of(p, p->pending[i] ? p->pending[i] : "?");
        row->calls++;
        row->ns += t[1] > t[0] ? t[1] - t[0] : 0;
        p->timed++;
    }
    return st;
}

bool lean_gpu_profiling(const lean_gpu *g) { return g->prof != NULL; }

static int by_time(const void *a, const void *b) {
    const prof_row *x = a, *y = b;
    return x->ns < y->ns ? 1 : x->ns > y->ns ? -1 : strcmp(x->label, y->label);
}

void lean_gpu_profile_report(lean_gpu *g, int64_t steps, char *text, size_t cap) {
    gpu_profile *p = g->prof;
    size_t at = 0;
#define PUT(...)                                                                 \
    do {                                                                         \
        int k_ = snprintf(text + at, at < cap ? cap - at : 0, __VA_ARGS__);      \
        if (k_ > 0) at += (size_t)k_;                                            \
    } while (0)
    if (cap) text[0] = 0;
    if (!p) return;
    const double per = steps > 0 ? (double)steps : 1.0;
    uint64_t total = 0;
    for (int r = 0; r < p->n_rows; r++) total += p->rows[r].ns;
    const uint64_t dispatches = lean_gpu_dispatch_count(g) - p->base;
    PUT("dispatches %.1f per step (%llu in %lld steps)", (double)dispatches / per, (unsigned long long)dispatches,
        (long long)(steps > 0 ? steps : 1));
    if (!p->set) PUT("; no kernel times: the adapter has no timestamp-query\n");
    else PUT("; GPU time %.1f us per step in %llu timed dispatches\n", total / per / 1e3,
             (unsigned long long)p->timed);
    qsort(p->rows, (size_t)p->n_rows, sizeof *p->rows, by_time);
    for (int r = 0; p->set && r < p->n_rows; r++) {
        const prof_row *w = &p->rows[r];
        PUT("  %-32s %8.1f calls %9.1f us %7.2f us/call %5.1f%%\n", w->label, w->calls / per, w->ns / per / 1e3,
            w->calls ? w->ns / 1e3 / (double)w->calls : 0.0, total ? 100.0 * (double)w->ns / (double)total : 0.0);
    }
#undef PUT
    p->n_rows = 0;
    p->base = lean_gpu_dispatch_count(g);
    p->timed = 0;
}
