/* wasm_pump_host.c — what tests/wasm_pump.mjs needs beyond the browser build's own exports.
 * build-wasm/wasm_pump_host.wasm is web/lean_web.c (lean.wasm's exports, the calls the page's
 * worker makes) linked with this file, so the test drives the very C the worker drives, with
 * JSPI and without it (the pump); these are the few things it checks that a page never asks:
 * a model written by src/dev's generator, whether a generation ran resident on the GPU, a fixed
 * run-ahead, a chat session's resident ids, and a sampler held to a grammar. Not a test program
 * of its own (those are tests/test_*.c):
 * `make wasm-webgpu` builds it. */
#include "core/test_hooks.h"
#include "dev/lean_dev.h"
#include "gpu/test_hooks.h"
#include "lean.h"

#include <string.h>

#define EXPORT(name) __attribute__((export_name(#name)))

/* Writes a model of preset to path (recipe f32, seed 1; "tiny-llama" has a tokenizer and a chat
 * template); its status, the message in *err (a lean_error the caller allocated). */
EXPORT(host_gen_model) int host_gen_model(const char *path, const char *preset, lean_error *err) {
    lean_gen_params gp = {.preset = preset, .recipe = "f32", .seed = 1};
    return lean_generate_model(&gp, path, err);
}

/* Whether the generation in progress on c runs on the GPU (its sampler), not on the host. */
EXPORT(host_gen_resident) int host_gen_resident(const lean_ctx *c) { return lean_ctx_gen_resident(c); }

/* Fixes the run-ahead of c's GPU device (lean_gpu_options.gen_pace), so that the work both runs
 * give the GPU does not depend on how fast its steps went. c must be a GPU context. */
EXPORT(host_gen_pace) void host_gen_pace(lean_ctx *c, uint32_t pace) {
    lean_gpu_options_of(lean_backend_gpu_device(lean_ctx_backend_state(c)))->gen_pace = pace;
}

/* The resident ids of the session (into ids, at most cap); their count. */
EXPORT(host_chat_ids) int32_t host_chat_ids(const lean_chat_session *s, int32_t *ids, int32_t cap) {
    int32_t n = 0;
    const int32_t *r = lean_chat_session_ids(s, &n);
    memcpy(ids, r, sizeof *ids * (size_t)(n < cap ? n : cap));
    return n;
}

/* Holds smp to a grammar of gbnf over m's vocabulary (made here; kept until the next call, so
 * one sampler at a time); its status, the message in *err. */
EXPORT(host_sampler_grammar) int host_sampler_grammar(lean_sampler *smp, const lean_model *m, const char *gbnf,
                                                      lean_error *err) {
    static lean_grammar *g;
    lean_grammar_free(g);
    g = NULL;
    lean_status st = lean_grammar_create(gbnf, strlen(gbnf), NULL, lean_model_tokenizer(m), &g, err);
    return st != LEAN_OK ? st : lean_sampler_set_grammar(smp, g, err);
}
