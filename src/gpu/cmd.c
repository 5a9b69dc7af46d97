/* cmd.c — recording work into a command buffer, submitting it, waiting for it.
 *
 * Consecutive dispatches share one compute pass (a pass per dispatch would cost a pass
 * begin/end each); the pipeline and bind group are set only when they change. A copy ends
 * the pass. WebGPU defers recording errors to wgpuCommandEncoderFinish, so lean_gpu_submit
 * runs Finish and Submit inside error scopes and reports the first error there (but a forward
 * step's in JavaScript: lean_gpu_submit_step); a NULL argument to a
 * recording call is remembered the same way. */
#include "gpu/gpu_impl.h"

#include <stdio.h>

struct lean_gpu_cmd {
    lean_gpu *g;
    WGPUCommandEncoder enc;
    WGPUComputePassEncoder pass; /* the open compute pass, or NULL */
    const lean_gpu_pipeline *pipe; /* what the open pass has bound */
    const lean_gpu_bindgroup *group;
    uint32_t n_dispatch; /* recorded so far (profiling numbers each one's pass) */
    char error[128]; /* the first recording error caught here ("" if none) */
};

lean_status lean_gpu_begin(lean_gpu *g, lean_gpu_cmd **out, lean_error *err) {
    *out = NULL;
    lean_status st = gpu_check(g, err);
    if (st != LEAN_OK) return st;
    lean_gpu_cmd *c = lean_calloc(1, sizeof *c);
    if (!c) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "out of memory beginning a command buffer");
    WGPUCommandEncoderDescriptor desc = {NULL, gpu_sv(NULL)};
    c->g = g;
    c->enc = g->w.DeviceCreateCommandEncoder(g->device, &desc);
    if (!c->enc) {
        lean_free(c);
        return LEAN_FAIL(err, LEAN_ERR_DEVICE, "no command encoder");
    }
    *out = c;
    return LEAN_OK;
}

static void end_pass(lean_gpu_cmd *c) {
    if (!c->pass) return;
    c->g->w.ComputePassEncoderEnd(c->pass);
    c->g->w.ComputePassEncoderRelease(c->pass);
    c->pass = NULL;
}

void lean_gpu_dispatch(lean_gpu_cmd *c, lean_gpu_pipeline *p, lean_gpu_bindgroup *bg, uint32_t x, uint32_t y,
                       uint32_t z) {
    if (c->error[0]) return;
    if (!p || !bg) {
        snprintf(c->error, sizeof c->error, "dispatch without a %s", p ? "bind group" : "pipeline");
        return;
    }
    const wgpu_api *w = &c->g->w;
    WGPUPassTimestampWrites tw;
    const WGPUPassTimestampWrites *timed = NULL;
    if (c->g->prof) { /* a pass per dispatch, so that timestamps can bracket it */
        end_pass(c);
        timed = gpu_profile_pass(c->g, c->n_dispatch, p->label, &tw);
    }
    c->n_dispatch++;
    if (!c->pass) {
        WGPUComputePassDescriptor desc = {NULL, gpu_sv(NULL), timed};
        c->pass = w->CommandEncoderBeginComputePass(c->enc, &desc);
        c->pipe = NULL;
    }
    if (c->pipe != p) {
        w->ComputePassEncoderSetPipeline(c->pass, p->pipe);
        c->pipe = p;
        c->group = NULL; /* an "auto" layout belongs to one pipeline: bind again */
    }
    if (c->group != bg) {
        w->ComputePassEncoderSetBindGroup(c->pass, 0, bg->group, 0, NULL);
        c->group = bg;
    }
    w->ComputePassEncoderDispatchWorkgroups(c->pass, x, y, z);
    c->g->dispatches++;
}

uint64_t lean_gpu_dispatch_count(const lean_gpu *g) { return g->dispatches; }

void lean_gpu_copy(lean_gpu_cmd *c, lean_gpu_buf *src, uint64_t src_offset, lean_gpu_buf *dst, uint64_t dst_offset,
                   uint64_t size) {
    if (c->error[0]) return;
    if (!src || !dst) {
        snprintf(c->error, sizeof c->error, "copy without a %s buffer", src ? "destination" : "source");
        return;
    }
    end_pass(c);
    c->g->w.CommandEncoderCopyBufferToBuffer(c->enc, src->buf, src->base + src_offset, dst->buf, dst->base + dst_offset,
                                             size);
}

static lean_status submit(lean_gpu_cmd *c, bool scoped, lean_error *err) {
    lean_gpu *g = c->g;
    const wgpu_api *w = &g->w;
    end_pass(c);
    lean_status st = gpu_check(g, err);
    if (st == LEAN_OK && c->error[0]) st = LEAN_FAIL(err, LEAN_ERR_ARG, "submit: %s", c->error);
    if (st == LEAN_OK) {
        WGPUCommandBufferDescriptor desc = {NULL, gpu_sv(NULL)};
        if (g->prof) gpu_profile_resolve(g, c->enc, c->n_dispatch);
        if (scoped) gpu_scope_push(g);
        WGPUCommandBuffer cb = w->CommandEncoderFinish(c->enc, &desc);
        if (cb) w->QueueSubmit(g->queue, 1, &cb), w->CommandBufferRelease(cb), g->write_pending = 0;
        char msg[400] = "";
        WGPUErrorType e = scoped ? gpu_scope_pop(g, "submit", msg, sizeof msg) : WGPUErrorType_NoError;
        if (e != WGPUErrorType_NoError) st = LEAN_FAIL(err, gpu_error_status(e, LEAN_ERR_ARG), "submit: %s", msg);
        else if (!cb) st = LEAN_FAIL(err, LEAN_ERR_DEVICE, "submit: no command buffer");
    }
    if (st == LEAN_OK && g->prof) st = gpu_profile_collect(g, c->n_dispatch, err);
    w->CommandEncoderRelease(c->enc);
    lean_free(c);
    return st;
}

lean_status lean_gpu_submit(lean_gpu_cmd *c, lean_error *err) {
    return submit(c, true, err);
}

lean_status lean_gpu_submit_step(lean_gpu_cmd *c, lean_error *err) {
    return submit(c, !c->g->submit_unscoped, err);
}

static void on_work_done(WGPUQueueWorkDoneStatus status, WGPUStringView message, void *userdata1, void *userdata2) {
    (void)message, (void)userdata2;
    gpu_async *r = userdata1;
    r->done = true;
    r->ok = status == WGPUQueueWorkDoneStatus_Success;
}

lean_status lean_gpu_finish(lean_gpu *g, lean_error *err) {
    lean_status st = gpu_check(g, err);
    if (st != LEAN_OK) return st;
    if (g->pump) { /* checked at the next wait (lean_gpu_settle) */
        gpu_req *q = gpu_req_new(GPU_REQ_WORK_DONE, "the queue");
        if (!q) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "out of memory asking for the queue's work");
        WGPUQueueWorkDoneCallbackInfo info = {NULL, WGPUCallbackMode_WaitAnyOnly, on_work_done, &q->r, NULL};
        q->f = g->w.QueueOnSubmittedWorkDone(g->queue, info);
        gpu_later(g, q);
        return LEAN_OK;
    }
    gpu_async r = {.done = false};
    WGPUQueueWorkDoneCallbackInfo info = {NULL, WGPUCallbackMode_WaitAnyOnly, on_work_done, &r, NULL};
    st = gpu_wait(g, g->w.QueueOnSubmittedWorkDone(g->queue, info), "the queue", err);
    if (st == LEAN_OK) st = gpu_check(g, err);
    if (st == LEAN_OK && !r.ok) st = LEAN_FAIL(err, LEAN_ERR_DEVICE, "the queue's work did not complete");
    return st;
}
