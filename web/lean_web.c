/* lean_web.c — the C side of the browser build: what web/lean_worker.js calls in lean.wasm,
 * a wasm32 reactor (`make web`). Only lean.h underneath.
 *
 * Calling convention (JS passes numbers only): pointers are offsets into the wasm memory,
 * strings are (pointer, byte count) or NUL-terminated where lean.h wants that, and every call
 * that can fail returns a lean_status with its outputs written through pointers, so that the
 * worker can call it again unchanged when it answers LEAN_PENDING (the pump: a GPU wait in a
 * host without JSPI). The message of the last failure is lw_error_msg(): the worker is one
 * thread, and it reads the message before its next call. Seeds cross as doubles (exact below
 * 2^53); a negative one asks for a random seed. A logit bias crosses as (pointer, count) of
 * lean_logit_bias {int32 id, float value}, 8 bytes each, copied by the sampler.
 *
 * Sections: errors and buffers · model · contexts and generation · text · chat sessions ·
 * grammars and adapters
 */
#include "lean.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT(name) __attribute__((export_name(#name))) name

/* The worker's progress handler: phase 0 = uploading weights to the GPU (bytes). */
__attribute__((import_module("lean_web"), import_name("progress"))) void lw_progress(double done, double total,
                                                                                    int phase);

/* ---- errors and buffers ---- */

static lean_error last_err;

const char *EXPORT(lw_error_msg)(void) { return last_err.msg; }

/* malloc's alignment (16) is what lean_model_load_memory asks of a model's bytes. */
void *EXPORT(lw_alloc)(size_t n) { return malloc(n ? n : 1); }
void EXPORT(lw_free)(void *p) { free(p); }

static lean_sampler_params sampling(double temperature, int32_t top_k, double top_p, double repeat_penalty,
                                    int32_t repeat_last_n, double seed, const lean_logit_bias *bias,
                                    int32_t n_bias) {
    lean_sampler_params sp = lean_sampler_default_params();
    sp.temperature = temperature;
    sp.top_k = top_k;
    sp.top_p = top_p;
    sp.repeat_penalty = repeat_penalty;
    sp.repeat_last_n = repeat_last_n;
    sp.seed = seed < 0 ? LEAN_SEED_RANDOM : (uint64_t)seed;
    sp.greedy = temperature <= 0;
    sp.logit_bias = bias;
    sp.n_logit_bias = n_bias;
    return sp;
}

static void upload_progress(void *user, uint64_t done, uint64_t total) {
    (void)user;
    lw_progress((double)done, (double)total, 0);
}

/* ---- model ---- */

/* data: lw_alloc'd bytes of the file, kept by the worker until lw_model_free, then freed. */
int EXPORT(lw_model_load)(const void *data, size_t size, lean_model **out) {
    return lean_model_load_memory(data, size, NULL, out, &last_err);
}
void EXPORT(lw_model_free)(lean_model *m) { lean_model_free(m); }

/* The GPU-only load (lean_model_params.gpu_only), for files larger than wasm memory: the worker
 * pushes the file's bytes as they arrive (lean_model_loader) and each tensor goes to the GPU in
 * pieces. The device is made on the way, with these settings (backend "gpu" or "auto", exact),
 * and the model serves GPU contexts with the same settings only. Without JSPI a push and end
 * may answer LEAN_PENDING: made again unchanged. */
int EXPORT(lw_loader_begin)(double file_size, const char *backend, int32_t exact, lean_model_loader **out) {
    static char name[16]; /* read by the pushes: the worker's string lives for this call only */
    snprintf(name, sizeof name, "%s", backend);
    lean_ctx_params cp = lean_ctx_default_params();
    cp.backend = name;
    cp.exact = exact;
    lean_model_params p = lean_model_default_params();
    p.gpu_only = 1;
    p.gpu_params = &cp; /* copied by the loader */
    p.progress = upload_progress;
    return lean_model_loader_begin((uint64_t)file_size, &p, out, &last_err);
}
int EXPORT(lw_loader_push)(lean_model_loader *l, const void *bytes, size_t n) {
    return lean_model_loader_push(l, bytes, n, &last_err);
}
/* frees l, but when it answers LEAN_PENDING */
int EXPORT(lw_loader_end)(lean_model_loader *l, lean_model **out) { return lean_model_loader_end(l, out, &last_err); }
void EXPORT(lw_loader_free)(lean_model_loader *l) { lean_model_loader_free(l); }
/* A model of unknown size (no Content-Length, gzip): the file's size from its first n bytes
 * (lean_gguf_size). out: 2 doubles, the least and most bytes (exact below 2^53); 0, 0 when
 * the header goes on past n bytes (lw_error_msg says what it wants). */
int EXPORT(lw_gguf_size)(const void *prefix, size_t n, double *out) {
    uint64_t lo, hi;
    lean_status st = lean_gguf_size(prefix, n, &lo, &hi, &last_err);
    out[0] = (double)lo;
    out[1] = (double)hi;
    return st;
}

/* Appends s as a JSON string. */
static size_t json_str(char *buf, size_t cap, size_t n, const char *s) {
    n += (size_t)snprintf(n < cap ? buf + n : NULL, n < cap ? cap - n : 0, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') n += (size_t)snprintf(n < cap ? buf + n : NULL, n < cap ? cap - n : 0, "\\%c", *p);
        else if (*p < 0x20) n += (size_t)snprintf(n < cap ? buf + n : NULL, n < cap ? cap - n : 0, "\\u%04x", *p);
        else n += (size_t)snprintf(n < cap ? buf + n : NULL, n < cap ? cap - n : 0, "%c", *p);
    }
    return n + (size_t)snprintf(n < cap ? buf + n : NULL, n < cap ? cap - n : 0, "\"");
}

/* The model as JSON into buf (NUL-terminated within cap); returns the full length. */
size_t EXPORT(lw_model_info)(const lean_model *m, char *buf, size_t cap) {
    lean_model_info mi;
    lean_model_get_info(m, &mi);
    size_t n = 0;
#define PUT(...) (n += (size_t)snprintf(n < cap ? buf + n : NULL, n < cap ? cap - n : 0, __VA_ARGS__))
    PUT("{\"arch\":");
    n = json_str(buf, cap, n, mi.arch);
    PUT(",\"name\":");
    n = json_str(buf, cap, n, mi.name);
    PUT(",\"tokenizer\":");
    n = json_str(buf, cap, n, mi.tokenizer);
    PUT(",\"nParams\":%llu,\"weightBytes\":%llu,\"nVocab\":%d,\"nEmbd\":%d,\"nLayer\":%d,\"nHead\":%d,"
        "\"nHeadKv\":%d,\"nFf\":%d,\"nCtxTrain\":%d,\"hasChatTemplate\":%s,\"formats\":{",
        (unsigned long long)mi.n_params, (unsigned long long)mi.weight_bytes, mi.n_vocab, mi.n_embd, mi.n_layer,
        mi.n_head, mi.n_head_kv, mi.n_ff, mi.n_ctx_train, mi.has_chat_template ? "true" : "false");
    const char *sep = "";
    for (int t = 0; t < 32; t++) {
        const char *name = lean_type_name(t);
        if (!mi.n_tensors_by_type[t] || !name) continue;
        PUT("%s\"", sep);
        for (const char *c = name; *c; c++) PUT("%c", *c >= 'a' && *c <= 'z' ? *c - 'a' + 'A' : *c);
        PUT("\":%d", mi.n_tensors_by_type[t]);
        sep = ",";
    }
    PUT("}}");
#undef PUT
    return n;
}

/* ---- contexts and generation ---- */

/* n_batch: the most tokens a prefill's chunk takes, 0 for the backend's own */
int EXPORT(lw_ctx_create)(const lean_model *m, const char *backend, int32_t n_ctx, int32_t n_batch, int32_t n_threads,
                          int32_t exact, lean_ctx **out) {
    lean_ctx_params cp = lean_ctx_default_params();
    cp.backend = backend;
    cp.n_ctx = n_ctx;
    cp.n_batch = n_batch;
    cp.n_threads = n_threads;
    cp.exact = exact;
    cp.progress = upload_progress;
    return lean_ctx_create(m, &cp, out, &last_err);
}
void EXPORT(lw_ctx_free)(lean_ctx *c) { lean_ctx_free(c); }
int32_t EXPORT(lw_ctx_pos)(const lean_ctx *c) { return lean_ctx_pos(c); }
int32_t EXPORT(lw_ctx_n_ctx)(const lean_ctx *c) { return lean_ctx_n_ctx(c); }
const char *EXPORT(lw_ctx_backend)(const lean_ctx *c, char *buf, size_t cap) {
    return lean_ctx_backend_str(c, buf, cap);
}
int EXPORT(lw_ctx_truncate)(lean_ctx *c, int32_t n_pos) { return lean_ctx_truncate(c, n_pos, &last_err); }
/* logits: n_vocab floats (the worker's buffer), or 0 when none are wanted */
int EXPORT(lw_prefill)(lean_ctx *c, const int32_t *ids, int32_t n, float *logits) {
    return lean_prefill(c, ids, n, logits, &last_err);
}

int EXPORT(lw_sampler_create)(const lean_model *m, double temperature, int32_t top_k, double top_p,
                              double repeat_penalty, int32_t repeat_last_n, double seed, const lean_logit_bias *bias,
                              int32_t n_bias, lean_sampler **out) {
    const lean_sampler_params sp =
        sampling(temperature, top_k, top_p, repeat_penalty, repeat_last_n, seed, bias, n_bias);
    return lean_sampler_create(&sp, lean_model_n_vocab(m), out, &last_err);
}
void EXPORT(lw_sampler_free)(lean_sampler *s) { lean_sampler_free(s); }
double EXPORT(lw_sampler_seed)(const lean_sampler *s) { return (double)lean_sampler_seed(s); }
int EXPORT(lw_sampler_accept)(lean_sampler *s, const int32_t *ids, int32_t n) {
    return lean_sampler_accept(s, ids, n, &last_err);
}
int EXPORT(lw_gen_begin)(lean_ctx *c, lean_sampler *s, int32_t max_ids) {
    return lean_gen_begin(c, s, max_ids, &last_err);
}
int EXPORT(lw_gen_next)(lean_ctx *c, int32_t *id) { return lean_gen_next(c, id, &last_err); }
/* A generation whose every draw is held to a mask of allowed ids (generate's allowedIds). */
int EXPORT(lw_gen_begin_masked)(lean_ctx *c, lean_sampler *s, int32_t max_ids) {
    return lean_gen_begin_masked(c, s, max_ids, &last_err);
}
/* The next id among those bits (LEAN_MASK_WORDS(n_vocab) words) allows. */
int EXPORT(lw_gen_next_masked)(lean_ctx *c, const uint32_t *bits, int32_t n_vocab, int32_t *id) {
    const lean_mask mask = {bits, n_vocab};
    return lean_gen_next_masked(c, &mask, id, &last_err);
}
void EXPORT(lw_gen_end)(lean_ctx *c) { lean_gen_end(c); }

/* ---- text (the model's tokenizer) ---- */

static lean_status tokenizer(const lean_model *m, const lean_tokenizer **out) {
    *out = lean_model_tokenizer(m);
    if (!*out) {
        last_err.status = LEAN_ERR_MODEL;
        snprintf(last_err.msg, sizeof last_err.msg, "the model file has no tokenizer (tokenizer.ggml.model)");
        return LEAN_ERR_MODEL;
    }
    return lean_tokenizer_check(*out, &last_err);
}

/* flags: lean_tokenize_flags. *n_ids may exceed max_ids: call again with room for them. */
int EXPORT(lw_tokenize)(const lean_model *m, const char *text, size_t n_text, uint32_t flags, int32_t *ids,
                        int32_t max_ids, int32_t *n_ids) {
    const lean_tokenizer *t;
    lean_status st = tokenizer(m, &t);
    return st ? st : lean_tokenize(t, text, n_text, flags, ids, max_ids, n_ids, &last_err);
}
/* flags: lean_detokenize_flags. *n_bytes >= cap: call again with more room. */
int EXPORT(lw_detokenize)(const lean_model *m, const int32_t *ids, int32_t n_ids, uint32_t flags, char *text,
                          size_t cap, size_t *n_bytes) {
    const lean_tokenizer *t;
    lean_status st = tokenizer(m, &t);
    return st ? st : lean_detokenize(t, ids, n_ids, flags, text, cap, n_bytes, &last_err);
}
/* 1 when generation stops at id; 0 for a model without a tokenizer */
int EXPORT(lw_is_eog)(const lean_model *m, int32_t id) {
    const lean_tokenizer *t = lean_model_tokenizer(m);
    return t ? lean_token_is_eog(t, id) : 0;
}
int32_t EXPORT(lw_n_tokens)(const lean_model *m) {
    const lean_tokenizer *t = lean_model_tokenizer(m);
    return t ? lean_tokenizer_n_tokens(t) : 0;
}
int32_t EXPORT(lw_token_bos)(const lean_model *m) {
    const lean_tokenizer *t = lean_model_tokenizer(m);
    return t ? lean_token_bos(t) : -1;
}

/* Streaming text of generated ids, special tokens skipped (as chat replies are). */
int EXPORT(lw_text_stream_create)(const lean_model *m, lean_text_stream **out) {
    const lean_tokenizer *t;
    lean_status st = tokenizer(m, &t);
    return st ? st : lean_text_stream_create(t, LEAN_DETOKENIZE_SKIP_SPECIAL, out, &last_err);
}
int EXPORT(lw_text_stream_push)(lean_text_stream *s, int32_t id, const char **text, size_t *n) {
    return lean_text_stream_push(s, id, text, n, &last_err);
}
int EXPORT(lw_text_stream_flush)(lean_text_stream *s, const char **text, size_t *n) {
    return lean_text_stream_flush(s, text, n, &last_err);
}
void EXPORT(lw_text_stream_free)(lean_text_stream *s) { lean_text_stream_free(s); }

/* ---- chat sessions ---- */

int EXPORT(lw_chat_create)(const lean_model *m, const char *backend, int32_t n_ctx, int32_t n_batch, int32_t n_threads,
                           int32_t exact, lean_chat_session **out) {
    lean_chat_session_params p = lean_chat_session_default_params();
    p.backend = backend;
    p.n_ctx = n_ctx;
    p.n_batch = n_batch;
    p.n_threads = n_threads;
    p.exact = exact;
    p.chatml_fallback = 1; /* a model without a template still chats, in ChatML */
    p.progress = upload_progress;
    return lean_chat_session_create(m, &p, out, &last_err);
}
void EXPORT(lw_chat_free)(lean_chat_session *s) { lean_chat_session_free(s); }
void EXPORT(lw_chat_reset)(lean_chat_session *s) { lean_chat_session_reset(s); }
void EXPORT(lw_chat_abort)(lean_chat_session *s) { lean_chat_abort(s); }

/* The conversation before the next turn: JSON [{"role", "content"}, ...], system first if any. */
int EXPORT(lw_chat_set_messages)(lean_chat_session *s, const char *json, size_t n_json) {
    lean_chat_message *msgs;
    size_t n;
    lean_status st = lean_chat_parse_messages(json, n_json, &msgs, &n, &last_err);
    if (st != LEAN_OK) return st;
    st = lean_chat_session_set_messages(s, msgs, n, &last_err);
    lean_chat_messages_free(msgs, n);
    return st;
}
int EXPORT(lw_chat_set_sampling)(lean_chat_session *s, double temperature, int32_t top_k, double top_p,
                                 double repeat_penalty, int32_t repeat_last_n, double seed,
                                 const lean_logit_bias *bias, int32_t n_bias, int32_t n_predict) {
    const lean_sampler_params sp =
        sampling(temperature, top_k, top_p, repeat_penalty, repeat_last_n, seed, bias, n_bias);
    return lean_chat_session_set_sampling(s, &sp, n_predict, &last_err);
}
int EXPORT(lw_chat_submit)(lean_chat_session *s, const char *user_text) {
    return lean_chat_submit(s, user_text, &last_err);
}
int EXPORT(lw_chat_step)(lean_chat_session *s, const char **text, size_t *n, int *more) {
    return lean_chat_step(s, text, n, more, &last_err);
}
/* out: 6 int32 (lean_chat_turn_stats: n_prompt, n_reused, n_prefilled, n_generated, n_dropped, stop) */
void EXPORT(lw_chat_stats)(const lean_chat_session *s, lean_chat_turn_stats *out) { lean_chat_session_stats(s, out); }
double EXPORT(lw_chat_seed)(const lean_chat_session *s) {
    return (double)lean_sampler_seed(lean_chat_session_sampler(s));
}
const lean_ctx *EXPORT(lw_chat_ctx)(const lean_chat_session *s) { return lean_chat_session_ctx(s); }

/* ---- grammars and adapters ---- */

/* A grammar over the model's vocabulary from text (n bytes): GBNF, or with is_schema a JSON
 * Schema (lean_json_schema_to_gbnf); the error names the place. */
int EXPORT(lw_grammar_create)(const lean_model *m, const char *text, size_t n, int32_t is_schema, lean_grammar **out) {
    const lean_tokenizer *t;
    lean_status st = tokenizer(m, &t);
    char *gbnf = NULL;
    if (st == LEAN_OK && is_schema) st = lean_json_schema_to_gbnf(text, n, &gbnf, &last_err);
    if (st == LEAN_OK) st = lean_grammar_create(gbnf ? gbnf : text, gbnf ? strlen(gbnf) : n, NULL, t, out, &last_err);
    lean_grammar_text_free(gbnf);
    return st;
}
void EXPORT(lw_grammar_free)(lean_grammar *g) { lean_grammar_free(g); }
/* g nullable: none */
int EXPORT(lw_sampler_set_grammar)(lean_sampler *s, lean_grammar *g) { return lean_sampler_set_grammar(s, g, &last_err); }
int EXPORT(lw_chat_set_grammar)(lean_chat_session *s, lean_grammar *g) {
    return lean_chat_session_set_grammar(s, g, &last_err);
}
/* The mask of the session's next replies (bits NULL: none; n_vocab bits). */
int EXPORT(lw_chat_set_mask)(lean_chat_session *s, const uint32_t *bits, int32_t n_vocab) {
    const lean_mask mask = {bits, n_vocab};
    return lean_chat_session_set_mask(s, bits ? &mask : NULL, &last_err);
}

/* An adapter from size bytes of its file (copied: the worker frees them after). */
int EXPORT(lw_lora_load)(const lean_model *m, const void *data, size_t size, lean_lora **out) {
    return lean_lora_load_memory(m, data, size, out, &last_err);
}
void EXPORT(lw_lora_free)(lean_lora *a) { lean_lora_free(a); }
/* n adapters loras[i] (pointers) with scales[i] (float32) on a context / a chat session */
int EXPORT(lw_ctx_set_loras)(lean_ctx *c, lean_lora *const *loras, const float *scales, int32_t n) {
    return lean_ctx_set_loras(c, loras, scales, n, &last_err);
}
int EXPORT(lw_chat_set_loras)(lean_chat_session *s, lean_lora *const *loras, const float *scales, int32_t n) {
    return lean_chat_session_set_loras(s, loras, scales, n, &last_err);
}
