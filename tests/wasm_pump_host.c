/* wasm_pump_host.c — lean.h's calls as the exports of a wasm32 reactor (no main), for
 * tests/wasm_pump.mjs: there JavaScript makes each call itself, as a page's worker does, so the
 * two ways a GPU wait can go in a browser are held to each other on one build: JSPI (the export
 * called through WebAssembly.promising, the wait suspended) and the pump (no JSPI: a call
 * returns LEAN_PENDING, JavaScript awaits settle() and makes it again; lean.h).
 *
 * Every export that can fail returns its lean_status; host_error() is the last message. One
 * model, one context, one sampler, one chat session at a time, in statics. Not a test program
 * of its own (those are tests/test_*.c): `make wasm-webgpu` builds it as
 * build-wasm/wasm_pump_host.wasm. */
#include "core/test_hooks.h"
#include "dev/lean_dev.h"
#include "lean.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT(name) __attribute__((export_name(#name)))

static lean_error err;
static lean_model *model;
static lean_ctx *ctx;
static lean_sampler *smp;
static lean_chat_session *chat;
static float *logits; /* (n_vocab) the last prefill's or decode's */

EXPORT(host_malloc) void *host_malloc(size_t n) { return malloc(n); }
EXPORT(host_free) void host_free(void *p) { free(p); }
EXPORT(host_error) const char *host_error(void) { return err.msg; }
EXPORT(host_logits) const float *host_logits(void) { return logits; }
EXPORT(host_n_vocab) int32_t host_n_vocab(void) { return model ? lean_model_n_vocab(model) : 0; }

/* Loads path; with a preset, first writes a model of it there (src/dev: "tiny-llama" has a
 * tokenizer and a chat template). */
EXPORT(host_model) int host_model(const char *path, const char *preset) {
    lean_status st = LEAN_OK;
    if (preset) {
        lean_gen_params gp = {.preset = preset, .recipe = "f32", .seed = 1};
        st = lean_generate_model(&gp, path, &err);
    }
    if (st == LEAN_OK) st = lean_model_load_file(path, &model, &err);
    if (st == LEAN_OK && !(logits = malloc(sizeof *logits * (size_t)lean_model_n_vocab(model)))) {
        err.status = st = LEAN_ERR_NOMEM;
        snprintf(err.msg, sizeof err.msg, "host: no memory for the logits");
    }
    return st;
}

/* A context on the "gpu" backend (no fallback: a failure is the answer), F32 throughout. */
EXPORT(host_ctx) int host_ctx(int32_t n_ctx, int32_t n_batch) {
    lean_ctx_params cp = lean_ctx_default_params();
    cp.n_ctx = n_ctx;
    cp.n_batch = n_batch;
    cp.backend = "gpu";
    cp.exact = 1;
    return lean_ctx_create(model, &cp, &ctx, &err);
}

EXPORT(host_ctx_free) void host_ctx_free(void) {
    lean_ctx_free(ctx);
    ctx = NULL;
}

EXPORT(host_backend) const char *host_backend(void) {
    static char text[160];
    return ctx ? lean_ctx_backend_str(ctx, text, sizeof text) : "";
}

EXPORT(host_pos) int32_t host_pos(void) { return ctx ? lean_ctx_pos(ctx) : -1; }
EXPORT(host_prefill) int host_prefill(const int32_t *ids, int32_t n) { return lean_prefill(ctx, ids, n, logits, &err); }
EXPORT(host_decode) int host_decode(int32_t id) { return lean_decode(ctx, id, logits, &err); }

/* A sampler: greedy when temperature is 0; seed exact as a double below 2^53. */
EXPORT(host_sampler) int host_sampler(double temperature, int32_t top_k, double top_p, double penalty, double seed) {
    lean_sampler_free(smp);
    smp = NULL;
    lean_sampler_params p = lean_sampler_default_params();
    p.temperature = temperature;
    p.greedy = temperature == 0;
    p.top_k = top_k;
    p.top_p = top_p;
    p.repeat_penalty = penalty;
    p.seed = (uint64_t)seed;
    return lean_sampler_create(&p, lean_model_n_vocab(model), &smp, &err);
}

EXPORT(host_accept) int host_accept(const int32_t *ids, int32_t n) { return lean_sampler_accept(smp, ids, n, &err); }
EXPORT(host_gen_begin) int host_gen_begin(int32_t max_ids) { return lean_gen_begin(ctx, smp, max_ids, &err); }
EXPORT(host_gen_next) int host_gen_next(int32_t *id) { return lean_gen_next(ctx, id, &err); }
EXPORT(host_gen_end) void host_gen_end(void) { lean_gen_end(ctx); }
/* Whether the generation in progress runs on the GPU (its sampler), not on the host. */
EXPORT(host_gen_resident) int host_gen_resident(void) { return lean_ctx_gen_resident(ctx); }

/* A chat session on the "gpu" backend, F32, n_predict ids a reply; sampled when temperature > 0. */
EXPORT(host_chat) int host_chat(int32_t n_ctx, int32_t n_batch, int32_t n_predict, double temperature, double seed) {
    lean_chat_session_params p = lean_chat_session_default_params();
    p.n_ctx = n_ctx;
    p.n_batch = n_batch;
    p.n_predict = n_predict;
    p.backend = "gpu";
    p.exact = 1;
    p.sampling.temperature = temperature;
    p.sampling.greedy = temperature == 0;
    p.sampling.seed = (uint64_t)seed;
    return lean_chat_session_create(model, &p, &chat, &err);
}

EXPORT(host_chat_submit) int host_chat_submit(const char *text) { return lean_chat_submit(chat, text, &err); }
EXPORT(host_chat_step) int host_chat_step(const char **text, size_t *n_bytes, int *more) {
    return lean_chat_step(chat, text, n_bytes, more, &err);
}

/* The resident ids of the session (into ids, at most cap); their count. */
EXPORT(host_chat_ids) int32_t host_chat_ids(int32_t *ids, int32_t cap) {
    int32_t n = 0;
    const int32_t *r = lean_chat_session_ids(chat, &n);
    memcpy(ids, r, sizeof *ids * (size_t)(n < cap ? n : cap));
    return n;
}

EXPORT(host_chat_reset) void host_chat_reset(void) { lean_chat_session_reset(chat); }

EXPORT(host_chat_free) void host_chat_free(void) {
    lean_chat_session_free(chat);
    chat = NULL;
}
