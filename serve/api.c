/* api.c — the OpenAI API of `lean serve` as JSON: requests read into jobs, replies, stream
 * chunks and errors written. JSON through jansson (Debian's libjansson): lean's own JSON
 * reader is internal to the library (the chat-template engine's) and lean.h exposes only
 * lean_chat_parse_messages, which reads a message list but not a request's other fields.
 *
 * What a request may hold (docs/serve.md has the table): messages (chat) or prompt
 * (completions), model, max_tokens / max_completion_tokens, temperature, top_p, top_k,
 * repeat_penalty, repeat_last_n, seed, stop, stream, stream_options.include_usage,
 * response_format (a grammar the reply is held to: json_object, json_schema), logit_bias
 * (-100 and 100: a mask every draw is held to; values between: added to the logits). Keys it
 * does not know are ignored, as OpenAI's clients send extras; those whose meaning lean cannot
 * honour (n > 1, logprobs, tools, penalties other than repeat_penalty) are refused, not
 * silently dropped. Defaults are llama.cpp's (lean_sampler_default_params), as llama-server's.
 *
 * Errors: 400 invalid_request_error (malformed JSON naming line and column, a field of the
 * wrong type or out of range naming it, a prompt over the context: context_length_exceeded,
 * a schema lean cannot hold to: invalid_schema naming its path),
 * 404 model_not_found, 413 (http.c), 500/503 server_error.
 *
 * Sections: errors, reading a request, replies, stream chunks, the small endpoints. */
#include "serve.h"

#include <jansson.h>
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- errors ---- */

static char *dump(json_t *v) {
    char *s = v ? json_dumps(v, JSON_COMPACT) : NULL;
    json_decref(v);
    return s;
}

/* s made valid UTF-8 in place, each byte of a broken, overlong, surrogate or cut sequence
 * replaced by '?': a message may quote the request (a parse error's text, a schema's key), and
 * json_pack refuses a string that is not UTF-8, which left the reply without a body. */
static void utf8_repair(char *s) {
    unsigned char *p = (unsigned char *)s;
    while (*p) {
        const unsigned c = p[0];
        const int n = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        int ok = n > 0;
        for (int i = 1; ok && i < n; i++) ok = (p[i] & 0xC0) == 0x80; /* stops at the NUL */
        if (ok && n == 3) ok = !(c == 0xE0 && p[1] < 0xA0) && !(c == 0xED && p[1] >= 0xA0);
        if (ok && n == 4) ok = !(c == 0xF0 && p[1] < 0x90) && !(c == 0xF4 && p[1] >= 0x90);
        if (!ok) {
            *p++ = '?';
            continue;
        }
        p += n;
    }
}

static api_reply verror(int status, const char *code, const char *param, const char *fmt, va_list ap) {
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    utf8_repair(msg);
    const char *type = status >= 500 ? "server_error" : "invalid_request_error";
    json_t *e = json_pack("{s:{s:s,s:s,s:s?,s:s?}}", "error", "message", msg, "type", type, "param", param, "code", code);
    return (api_reply){status, dump(e)};
}

api_reply api_error(int status, const char *code, const char *param, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    api_reply r = verror(status, code, param, fmt, ap);
    va_end(ap);
    return r;
}

/* ---- reading a request ---- */

/* The parsed body, or NULL with *fail set. */
static json_t *parse_object(const char *body, size_t n, api_reply *fail) {
    json_error_t e;
    json_t *v = json_loadb(body, n, 0, &e);
    if (!v) {
        *fail = api_error(400, "invalid_json", NULL, "malformed JSON at line %d column %d: %s", e.line, e.column, e.text);
        return NULL;
    }
    if (!json_is_object(v)) {
        json_decref(v);
        *fail = api_error(400, "invalid_json", NULL, "the request body must be a JSON object");
        return NULL;
    }
    return v;
}

/* A number field in [lo, hi] (absent or null: *out unchanged); -1 with *fail set. */
static int get_real(json_t *o, const char *key, double lo, double hi, double *out, api_reply *fail) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_number(v) || !(json_number_value(v) >= lo && json_number_value(v) <= hi)) {
        *fail = api_error(400, "invalid_value", key, "'%s' must be a number in [%g, %g]", key, lo, hi);
        return -1;
    }
    *out = json_number_value(v);
    return 0;
}

/* An integer field in [lo, hi] (a real with no fraction counts); absent or null: unchanged. */
static int get_int(json_t *o, const char *key, long long lo, long long hi, long long *out, api_reply *fail) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    double d = json_is_real(v) ? json_real_value(v) : NAN;
    int ok = json_is_integer(v) || (d == floor(d) && fabs(d) < 9e18); /* a cast past 2^63 is undefined */
    long long x = json_is_integer(v) ? json_integer_value(v) : ok ? (long long)d : 0;
    if (!ok || x < lo || x > hi) {
        *fail = api_error(400, "invalid_value", key, "'%s' must be an integer in [%lld, %lld]", key, lo, hi);
        return -1;
    }
    *out = x;
    return 0;
}

static int get_bool(json_t *o, const char *key, int *out, api_reply *fail) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_boolean(v)) {
        *fail = api_error(400, "invalid_type", key, "'%s' must be true or false", key);
        return -1;
    }
    *out = json_is_true(v);
    return 0;
}

/* Keys whose meaning lean does not implement: refused unless they hold their neutral value. */
static int refuse_unsupported(json_t *o, api_reply *fail) {
    static const struct {
        const char *key;
        double neutral; /* a number's; NAN: false, null or an empty array */
    } keys[] = {{"n", 1}, {"best_of", 1}, {"presence_penalty", 0}, {"frequency_penalty", 0}, {"min_p", 0},
                {"logprobs", NAN}, {"top_logprobs", 0}, {"tools", NAN}, {"functions", NAN}, {"echo", NAN},
                {"suffix", NAN}};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        json_t *v = json_object_get(o, keys[i].key);
        if (!v || json_is_null(v) || json_is_false(v)) continue;
        if (json_is_number(v) && json_number_value(v) == keys[i].neutral) continue;
        if ((json_is_array(v) && json_array_size(v) == 0) || (json_is_object(v) && json_object_size(v) == 0)) continue;
        *fail = api_error(400, "unsupported_parameter", keys[i].key, "'%s' is not supported by lean serve",
                          keys[i].key);
        return -1;
    }
    return 0;
}

/* The text of a message's content: a string, or an array of {"type": "text", "text"} parts
 * (joined; malloc'd into *owned). NULL with *fail set. */
static const char *message_content(json_t *c, size_t i, char **owned, api_reply *fail) {
    if (json_is_string(c)) return json_string_value(c);
    if (json_is_null(c)) return "";
    if (!json_is_array(c)) {
        *fail = api_error(400, "invalid_type", "messages", "messages[%zu].content must be a string or an array of parts",
                          i);
        return NULL;
    }
    size_t len = 0, k;
    json_t *part;
    json_array_foreach(c, k, part) {
        json_t *type = json_object_get(part, "type"), *text = json_object_get(part, "text");
        if (!json_is_string(type) || strcmp(json_string_value(type), "text") != 0 || !json_is_string(text)) {
            *fail = api_error(400, "unsupported_content", "messages",
                              "messages[%zu].content[%zu]: only parts {\"type\": \"text\", \"text\": ...} are supported",
                              i, k);
            return NULL;
        }
        len += json_string_length(text);
    }
    char *s = malloc(len + 1), *p = s;
    if (!s) return *fail = api_error(500, NULL, NULL, "no memory for a message"), NULL;
    json_array_foreach(c, k, part) {
        json_t *text = json_object_get(part, "text");
        memcpy(p, json_string_value(text), json_string_length(text));
        p += json_string_length(text);
    }
    *p = 0;
    return *owned = s;
}

/* The chat prompt: the messages through the model's template, tokenized for it. */
static int chat_prompt(const serve_server *srv, json_t *req, serve_job *j, api_reply *fail) {
    json_t *msgs = json_object_get(req, "messages");
    if (!json_is_array(msgs) || json_array_size(msgs) == 0) {
        *fail = api_error(400, "invalid_value", "messages", "'messages' must be a non-empty array");
        return -1;
    }
    size_t n = json_array_size(msgs);
    lean_chat_message *m = calloc(n, sizeof *m);
    char **owned = calloc(n, sizeof *owned);
    int rc = -1;
    if (!m || !owned) {
        *fail = api_error(500, NULL, NULL, "no memory for %zu messages", n);
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *o = json_array_get(msgs, i), *role = json_object_get(o, "role");
        if (!json_is_object(o) || !json_is_string(role)) {
            *fail = api_error(400, "invalid_value", "messages", "messages[%zu] must be an object with a string 'role'", i);
            goto out;
        }
        m[i].role = json_string_value(role);
        if (!(m[i].content = message_content(json_object_get(o, "content"), i, &owned[i], fail))) goto out;
    }
    lean_error err;
    int32_t n_ids = 0;
    j->prompt = malloc(sizeof *j->prompt * (size_t)srv->n_ctx);
    if (!j->prompt) {
        *fail = api_error(500, NULL, NULL, "no memory for the prompt");
        goto out;
    }
    lean_status st = lean_chat_tokenize(srv->tok, srv->template_src, m, n, &srv->chat, j->prompt, srv->n_ctx, &n_ids, &err);
    if (st != LEAN_OK) {
        *fail = st == LEAN_ERR_NOMEM ? api_error(500, NULL, NULL, "%s", err.msg)
                                     : api_error(400, "invalid_messages", "messages", "%s", err.msg);
        goto out;
    }
    j->n_prompt = n_ids;
    rc = 0;
out:
    for (size_t i = 0; owned && i < n; i++) free(owned[i]);
    free(owned);
    free(m);
    return rc;
}

/* The completion prompt: a string (tokenized as `lean run` does: BOS where the file says, special
 * tokens in the text parsed, as llama-server), an array of ids, or an array of one of either. */
static int completion_prompt(const serve_server *srv, json_t *req, serve_job *j, api_reply *fail) {
    json_t *p = json_object_get(req, "prompt");
    if (json_is_array(p) && json_array_size(p) == 1 && !json_is_integer(json_array_get(p, 0)))
        p = json_array_get(p, 0);
    if (json_is_array(p) && json_array_size(p) == 1 && json_is_array(json_array_get(p, 0))) p = json_array_get(p, 0);
    j->prompt = malloc(sizeof *j->prompt * (size_t)srv->n_ctx);
    if (!j->prompt) return *fail = api_error(500, NULL, NULL, "no memory for the prompt"), -1;
    if (json_is_string(p)) {
        lean_error err;
        int32_t n_ids;
        if (lean_tokenize(srv->tok, json_string_value(p), json_string_length(p),
                          LEAN_TOKENIZE_ADD_SPECIAL | LEAN_TOKENIZE_PARSE_SPECIAL, j->prompt, srv->n_ctx, &n_ids,
                          &err) != LEAN_OK)
            return *fail = api_error(400, "invalid_value", "prompt", "%s", err.msg), -1;
        j->n_prompt = n_ids;
        return 0;
    }
    if (json_is_array(p) && json_array_size(p) > 0) {
        size_t i;
        json_t *v;
        json_array_foreach(p, i, v) {
            if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= srv->n_vocab)
                return *fail = api_error(400, "invalid_value", "prompt", "prompt[%zu] is not a token id in [0, %d)", i,
                                         srv->n_vocab),
                       -1;
            if (i < (size_t)srv->n_ctx) j->prompt[i] = (int32_t)json_integer_value(v);
        }
        j->n_prompt = json_array_size(p) > (size_t)INT32_MAX ? INT32_MAX : (int32_t)json_array_size(p);
        return 0;
    }
    *fail = api_error(400, "invalid_value", "prompt", "'prompt' must be a string or a non-empty array of token ids");
    return -1;
}

static int parse_stop(json_t *req, serve_job *j, api_reply *fail) {
    json_t *s = json_object_get(req, "stop");
    if (!s || json_is_null(s)) return 0;
    size_t n = json_is_string(s) ? 1 : json_is_array(s) ? json_array_size(s) : 0;
    if ((!json_is_string(s) && !json_is_array(s)) || n > 16) {
        *fail = api_error(400, "invalid_value", "stop", "'stop' must be a string or an array of at most 16 strings");
        return -1;
    }
    j->stop = calloc(n ? n : 1, sizeof *j->stop);
    if (!j->stop) return *fail = api_error(500, NULL, NULL, "no memory for stop strings"), -1;
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_is_string(s) ? s : json_array_get(s, i);
        if (!json_is_string(v) || json_string_length(v) == 0 || json_string_length(v) != strlen(json_string_value(v))) {
            *fail = api_error(400, "invalid_value", "stop", "stop[%zu] must be a non-empty string", i);
            return -1;
        }
        if (!(j->stop[j->n_stop] = strdup(json_string_value(v))))
            return *fail = api_error(500, NULL, NULL, "no memory for stop strings"), -1;
        j->n_stop++;
    }
    return 0;
}

/* response_format: {"type": "text"} (nothing), {"type": "json_object"} (any JSON object; with a
 * "schema" beside it, that schema, as llama-server reads it), or {"type": "json_schema",
 * "json_schema": {"schema": ...}} ("name" and "strict" not needed: the grammar is always
 * strict). A schema becomes the grammar every draw of the reply is held to; a schema lean
 * cannot convert, and what it cannot hold to, is refused here, naming the schema path. */
static int parse_response_format(const serve_server *srv, json_t *req, serve_job *j, api_reply *fail) {
    json_t *rf = json_object_get(req, "response_format");
    if (!rf || json_is_null(rf)) return 0;
    json_t *type = json_object_get(rf, "type"), *schema = NULL;
    if (!json_is_object(rf) || !json_is_string(type))
        return *fail = api_error(400, "invalid_type", "response_format",
                                 "'response_format' must be an object with a string 'type'"),
               -1;
    const char *t = json_string_value(type);
    if (strcmp(t, "text") == 0) return 0;
    if (strcmp(t, "json_object") == 0) {
        schema = json_object_get(rf, "schema");
    } else if (strcmp(t, "json_schema") == 0) {
        json_t *js = json_object_get(rf, "json_schema");
        if (!json_is_object(js) || !(schema = json_object_get(js, "schema")))
            return *fail = api_error(400, "invalid_value", "response_format",
                                     "response_format of type 'json_schema' needs 'json_schema': {\"schema\": {...}}"),
                   -1;
    } else {
        return *fail = api_error(400, "invalid_value", "response_format",
                                 "response_format.type must be 'text', 'json_object' or 'json_schema', not '%s'", t),
               -1;
    }
    if (!srv->tok)
        return *fail = api_error(400, "invalid_value", "response_format",
                                 "response_format needs the model's tokenizer, and the model has none"),
               -1;
    /* no schema: {} is any JSON object (lean_json_schema_to_gbnf, as llama.cpp's converter) */
    char *text = schema ? json_dumps(schema, JSON_COMPACT | JSON_ENCODE_ANY) : strdup("{}"), *gbnf = NULL;
    if (!text) return *fail = api_error(500, NULL, NULL, "no memory for the schema"), -1;
    lean_error err;
    lean_status st = lean_json_schema_to_gbnf(text, strlen(text), &gbnf, &err);
    if (st == LEAN_OK) st = lean_grammar_create(gbnf, strlen(gbnf), NULL, srv->tok, &j->grammar, &err);
    lean_grammar_text_free(gbnf);
    free(text);
    if (st == LEAN_OK) return 0;
    *fail = st == LEAN_ERR_NOMEM ? api_error(500, NULL, NULL, "%s", err.msg)
                                 : api_error(400, "invalid_schema", "response_format", "%s", err.msg);
    return -1;
}

/* logit_bias: {"id": value}, value in [-100, 100]. As OpenAI defines the ends, -100 bans the id
 * and 100 selects among the ids given 100 only; 0 changes nothing. Both ends become the job's
 * mask (lean_gen_next_batch_masked: on every backend, resident on the GPU), so they hold
 * whatever the logits' scale and the temperature; a value between is added to the id's logit
 * before the penalty and the temperature (the sampler's logit_bias, lean.h), as llama-server
 * and OpenAI add it. */
static int parse_logit_bias(const serve_server *srv, json_t *req, serve_job *j, api_reply *fail) {
    json_t *lb = json_object_get(req, "logit_bias"), *v;
    if (!lb || json_is_null(lb)) return 0;
    if (!json_is_object(lb))
        return *fail = api_error(400, "invalid_type", "logit_bias", "'logit_bias' must be an object of token ids to "
                                 "numbers in [-100, 100]"),
               -1;
    const size_t words = LEAN_MASK_WORDS(srv->n_vocab);
    uint32_t *ban = calloc(words, sizeof *ban), *only = calloc(words, sizeof *only);
    uint32_t *seen = calloc(words, sizeof *seen);
    lean_logit_bias *add = malloc(sizeof *add * (json_object_size(lb) + 1));
    int n_ban = 0, n_only = 0, n_add = 0, rc = -1;
    const char *key;
    if (!ban || !only || !seen || !add) {
        *fail = api_error(500, NULL, NULL, "no memory for logit_bias");
        goto out;
    }
    json_object_foreach(lb, key, v) {
        char *end;
        const long long id = strtoll(key, &end, 10);
        if (!isdigit((unsigned char)key[0]) || *end || id >= srv->n_vocab) { /* digits only: no sign, no space */
            *fail = api_error(400, "invalid_value", "logit_bias",
                              "logit_bias key '%s' is not a token id of this model (an integer in [0, %d))", key,
                              srv->n_vocab);
            goto out;
        }
        const double x = json_is_number(v) ? json_number_value(v) : NAN;
        if (!(x >= -100 && x <= 100)) {
            *fail = api_error(400, "invalid_value", "logit_bias", "logit_bias['%s'] must be a number in [-100, 100]", key);
            goto out;
        }
        if (lean_mask_allows(seen, (int32_t)id)) { /* "7" and "007" */
            *fail = api_error(400, "invalid_value", "logit_bias", "logit_bias gives token id %lld twice ('%s')", id, key);
            goto out;
        }
        lean_mask_allow(seen, (int32_t)id);
        if (x > -100 && x < 100 && x != 0) add[n_add++] = (lean_logit_bias){(int32_t)id, (float)x};
        if (x == -100) lean_mask_allow(ban, (int32_t)id), n_ban++;
        if (x == 100) lean_mask_allow(only, (int32_t)id), n_only++;
    }
    int any = 0;
    for (size_t w = 0; w < words; w++) { /* the allowed: the ids given 100 (all if none), less the banned */
        const uint32_t past = w + 1 == words && srv->n_vocab % 32 ? ~0u << (srv->n_vocab % 32) : 0;
        only[w] = (n_only ? only[w] : ~past) & ~ban[w];
        any |= only[w] != 0;
    }
    if (!any) {
        *fail = api_error(400, "invalid_value", "logit_bias", "logit_bias leaves no token id to draw");
        goto out;
    }
    if (n_ban || n_only) j->allow = only, only = NULL; /* else all zeros: no mask */
    if (n_add) j->bias = add, add = NULL;
    j->sampling.logit_bias = j->bias;
    j->sampling.n_logit_bias = n_add;
    rc = 0;
out:
    free(ban), free(only), free(seen), free(add);
    return rc;
}

int api_parse_job(const serve_server *srv, job_kind kind, const char *body, size_t n, serve_job **out,
                  api_reply *fail) {
    json_t *req = parse_object(body, n, fail);
    if (!req) return -1;
    serve_job *j = job_new();
    if (!j) {
        json_decref(req);
        *fail = api_error(500, NULL, NULL, "no memory for a job");
        return -1;
    }
    j->kind = kind;
    j->sampling = lean_sampler_default_params();
    json_t *model = json_object_get(req, "model");
    long long max_tokens = 0, top_k = j->sampling.top_k, last_n = j->sampling.repeat_last_n, seed = -1;
    json_t *so = json_object_get(req, "stream_options");
    lean_error err;
    int rc = -1;
    if (model && !json_is_null(model) &&
        (!json_is_string(model) || (strcmp(json_string_value(model), srv->model_id) != 0 &&
                                    strcmp(json_string_value(model), "") != 0))) {
        *fail = api_error(404, "model_not_found", "model", "the model '%s' does not exist: this server has '%s'",
                          json_is_string(model) ? json_string_value(model) : "(not a string)", srv->model_id);
        goto out;
    }
    if (refuse_unsupported(req, fail) || get_bool(req, "stream", &j->stream, fail) ||
        (json_is_object(so) && get_bool(so, "include_usage", &j->include_usage, fail)) ||
        get_int(req, "max_tokens", 1, INT32_MAX, &max_tokens, fail) ||
        get_int(req, "max_completion_tokens", 1, INT32_MAX, &max_tokens, fail) ||
        get_real(req, "temperature", 0, 100, &j->sampling.temperature, fail) ||
        get_real(req, "top_p", 0, 1, &j->sampling.top_p, fail) || get_int(req, "top_k", 0, INT32_MAX, &top_k, fail) ||
        get_real(req, "repeat_penalty", 1e-6, 1e6, &j->sampling.repeat_penalty, fail) ||
        get_int(req, "repeat_last_n", -1, INT32_MAX, &last_n, fail) || get_int(req, "seed", INT64_MIN, INT64_MAX, &seed, fail) ||
        parse_stop(req, j, fail) || parse_response_format(srv, req, j, fail) || parse_logit_bias(srv, req, j, fail))
        goto out;
    j->max_tokens = (int32_t)max_tokens;
    j->sampling.top_k = (int32_t)top_k;
    j->sampling.repeat_last_n = (int32_t)last_n;
    j->sampling.seed = seed == -1 ? LEAN_SEED_RANDOM : (uint64_t)seed;
    if (lean_sampler_params_check(&j->sampling, &err) != LEAN_OK) {
        *fail = api_error(400, "invalid_value", NULL, "%s", err.msg);
        goto out;
    }
    if ((kind == JOB_CHAT ? chat_prompt : completion_prompt)(srv, req, j, fail)) goto out;
    if (j->n_prompt < 1) { /* the first draw needs the logits of a last prompt id */
        *fail = api_error(400, "invalid_value", kind == JOB_CHAT ? "messages" : "prompt", "the prompt makes no tokens");
        goto out;
    }
    if (j->n_prompt + 1 > srv->n_ctx || (j->max_tokens && (int64_t)j->n_prompt + j->max_tokens > srv->n_ctx)) {
        *fail = api_error(400, "context_length_exceeded", kind == JOB_CHAT ? "messages" : "prompt",
                          "this model's context is %d tokens per request; the prompt has %d tokens and max_tokens "
                          "is %d (%lld in all)",
                          srv->n_ctx, j->n_prompt, j->max_tokens, (long long)j->n_prompt + (j->max_tokens ? j->max_tokens : 1));
        goto out;
    }
    static uint64_t n_ids; /* every job's id differs: the start time and a count */
    snprintf(j->id, sizeof j->id, "%s-%llx-%llu", kind == JOB_CHAT ? "chatcmpl" : "cmpl",
             (unsigned long long)srv->created_s, (unsigned long long)__atomic_add_fetch(&n_ids, 1, __ATOMIC_RELAXED));
    rc = 0;
out:
    json_decref(req);
    if (rc == 0) *out = j;
    else job_unref_locked(j); /* only this thread has it */
    return rc;
}

/* ---- replies ---- */

static json_t *usage_json(const serve_job *j) {
    return json_pack("{s:i,s:i,s:i,s:{s:i}}", "prompt_tokens", (json_int_t)j->n_prompt, "completion_tokens",
                     (json_int_t)j->n_gen, "total_tokens", (json_int_t)(j->n_prompt + j->n_gen),
                     "prompt_tokens_details", "cached_tokens", (json_int_t)j->n_cached);
}

api_reply api_job_reply(const serve_server *srv, const serve_job *j) {
    if (j->http_status) return api_error(j->http_status, NULL, NULL, "%s", j->error);
    json_t *text = json_stringn(j->text ? j->text : "", j->n_text), *choice;
    if (j->kind == JOB_CHAT)
        choice = json_pack("{s:i,s:{s:s,s:o},s:s}", "index", 0, "message", "role", "assistant", "content", text,
                           "finish_reason", j->finish);
    else
        choice = json_pack("{s:i,s:o,s:n,s:s}", "index", 0, "text", text, "logprobs", "finish_reason", j->finish);
    json_t *r = json_pack("{s:s,s:s,s:I,s:s,s:[o],s:o}", "id", j->id, "object",
                          j->kind == JOB_CHAT ? "chat.completion" : "text_completion", "created",
                          (json_int_t)j->created_s, "model", srv->model_id, "choices", choice, "usage", usage_json(j));
    char *s = dump(r);
    return s ? (api_reply){200, s} : api_error(500, NULL, NULL, "no memory for the reply");
}

/* ---- stream chunks ---- */

static char *event(json_t *v) {
    char *s = dump(v), *e = NULL;
    if (s && (e = malloc(strlen(s) + 9))) sprintf(e, "data: %s\n\n", s);
    free(s);
    return e;
}

static char *chunk(const serve_server *srv, const serve_job *j, json_t *choice) {
    json_t *r = json_pack("{s:s,s:s,s:I,s:s,s:[o]}", "id", j->id, "object",
                          j->kind == JOB_CHAT ? "chat.completion.chunk" : "text_completion", "created",
                          (json_int_t)j->created_s, "model", srv->model_id, "choices", choice);
    return event(r);
}

char *api_stream_first(const serve_server *srv, const serve_job *j) {
    if (j->kind != JOB_CHAT) return strdup("");
    return chunk(srv, j, json_pack("{s:i,s:{s:s,s:s},s:n}", "index", 0, "delta", "role", "assistant", "content", "",
                                   "finish_reason"));
}

char *api_stream_delta(const serve_server *srv, const serve_job *j, const char *text, size_t n) {
    json_t *t = json_stringn(text, n);
    if (j->kind == JOB_CHAT)
        return chunk(srv, j, json_pack("{s:i,s:{s:o},s:n}", "index", 0, "delta", "content", t, "finish_reason"));
    return chunk(srv, j, json_pack("{s:i,s:o,s:n,s:n}", "index", 0, "text", t, "logprobs", "finish_reason"));
}

char *api_stream_final(const serve_server *srv, const serve_job *j) {
    if (j->kind == JOB_CHAT)
        return chunk(srv, j, json_pack("{s:i,s:{},s:s}", "index", 0, "delta", "finish_reason", j->finish));
    return chunk(srv, j, json_pack("{s:i,s:s,s:n,s:s}", "index", 0, "text", "", "logprobs", "finish_reason", j->finish));
}

char *api_stream_usage(const serve_server *srv, const serve_job *j) {
    json_t *r = json_pack("{s:s,s:s,s:I,s:s,s:[],s:o}", "id", j->id, "object",
                          j->kind == JOB_CHAT ? "chat.completion.chunk" : "text_completion", "created",
                          (json_int_t)j->created_s, "model", srv->model_id, "choices", "usage", usage_json(j));
    return event(r);
}

char *api_stream_error(const serve_job *j) {
    api_reply e = api_error(j->http_status ? j->http_status : 500, NULL, NULL, "%s", j->error);
    char *s = NULL;
    if (e.body && (s = malloc(strlen(e.body) + 9))) sprintf(s, "data: %s\n\n", e.body);
    free(e.body);
    return s;
}

/* ---- the small endpoints ---- */

api_reply api_models(const serve_server *srv) {
    json_t *r = json_pack("{s:s,s:[{s:s,s:s,s:I,s:s,s:{s:i,s:i,s:I}}]}", "object", "list", "data", "id", srv->model_id,
                          "object", "model", "created", (json_int_t)srv->created_s, "owned_by", "lean", "meta",
                          "n_vocab", (json_int_t)srv->n_vocab, "n_ctx", (json_int_t)srv->n_ctx, "n_params",
                          (json_int_t)srv->n_params);
    return (api_reply){200, dump(r)};
}

/* {"status": "ok", "slots_idle", "slots_processing", "queued", "requests_done", "requests_cancelled"}:
 * llama-server's health fields, and counts a test can wait on. */
api_reply api_health(const serve_server *srv) {
    pthread_mutex_t *mu = (pthread_mutex_t *)&srv->mu; /* const server, a lock all the same */
    pthread_mutex_lock(mu);
    int busy = srv->n_busy, queued = srv->n_queued;
    uint64_t done = srv->n_done, cancelled = srv->n_cancelled;
    pthread_mutex_unlock(mu);
    json_t *r = json_pack("{s:s,s:i,s:i,s:i,s:I,s:I}", "status", "ok", "slots_idle", srv->n_slots - busy,
                          "slots_processing", busy, "queued", queued, "requests_done", (json_int_t)done,
                          "requests_cancelled", (json_int_t)cancelled);
    return (api_reply){200, dump(r)};
}

/* POST /tokenize {"content", "add_special" (false), "parse_special" (true), "with_pieces" (false)}
 * -> {"tokens": [ids]} or, with_pieces, [{"id", "piece"}]: llama-server's spelling. */
api_reply api_tokenize(const serve_server *srv, const char *body, size_t n) {
    api_reply fail;
    json_t *req = parse_object(body, n, &fail);
    if (!req) return fail;
    json_t *content = json_object_get(req, "content");
    int add_special = 0, parse_special = 1, with_pieces = 0;
    int32_t *ids = NULL, n_ids = 0;
    lean_error err;
    json_t *list = NULL;
    if (!json_is_string(content)) {
        fail = api_error(400, "invalid_value", "content", "'content' must be a string");
        goto out;
    }
    if (get_bool(req, "add_special", &add_special, &fail) || get_bool(req, "parse_special", &parse_special, &fail) ||
        get_bool(req, "with_pieces", &with_pieces, &fail))
        goto out;
    uint32_t flags = (add_special ? LEAN_TOKENIZE_ADD_SPECIAL : 0) | (parse_special ? LEAN_TOKENIZE_PARSE_SPECIAL : 0);
    const char *text = json_string_value(content);
    size_t len = json_string_length(content);
    if (lean_tokenize(srv->tok, text, len, flags, NULL, 0, &n_ids, &err) != LEAN_OK) {
        fail = api_error(400, "invalid_value", "content", "%s", err.msg);
        goto out;
    }
    if (!(ids = malloc(sizeof *ids * (size_t)(n_ids ? n_ids : 1)))) {
        fail = api_error(500, NULL, NULL, "no memory for %d ids", n_ids);
        goto out;
    }
    if (lean_tokenize(srv->tok, text, len, flags, ids, n_ids, &n_ids, &err) != LEAN_OK) {
        fail = api_error(400, "invalid_value", "content", "%s", err.msg);
        goto out;
    }
    list = json_array();
    for (int32_t i = 0; i < n_ids; i++) {
        if (!with_pieces) {
            json_array_append_new(list, json_integer(ids[i]));
            continue;
        }
        size_t pl;
        const char *piece = lean_token_piece(srv->tok, ids[i], &pl);
        json_t *ps = json_stringn(piece, pl);
        if (!ps) { /* part of a UTF-8 character: its bytes, as llama-server does */
            ps = json_array();
            for (size_t b = 0; b < pl; b++) json_array_append_new(ps, json_integer((unsigned char)piece[b]));
        }
        json_array_append_new(list, json_pack("{s:i,s:o}", "id", (json_int_t)ids[i], "piece", ps));
    }
    fail = (api_reply){200, dump(json_pack("{s:o}", "tokens", list))};
out:
    free(ids);
    json_decref(req);
    return fail;
}

/* POST /detokenize {"tokens": [ids]} -> {"content": text}. */
api_reply api_detokenize(const serve_server *srv, const char *body, size_t n) {
    api_reply fail;
    json_t *req = parse_object(body, n, &fail);
    if (!req) return fail;
    json_t *tokens = json_object_get(req, "tokens");
    int32_t *ids = NULL;
    char *text = NULL;
    size_t n_ids = json_is_array(tokens) ? json_array_size(tokens) : 0, len = 0;
    lean_error err;
    if (!json_is_array(tokens) || n_ids > (size_t)INT32_MAX) {
        fail = api_error(400, "invalid_value", "tokens", "'tokens' must be an array of token ids");
        goto out;
    }
    if (!(ids = malloc(sizeof *ids * (n_ids ? n_ids : 1)))) {
        fail = api_error(500, NULL, NULL, "no memory for %zu ids", n_ids);
        goto out;
    }
    for (size_t i = 0; i < n_ids; i++) {
        json_t *v = json_array_get(tokens, i);
        int32_t n_tok = lean_tokenizer_n_tokens(srv->tok);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= n_tok) {
            fail = api_error(400, "invalid_value", "tokens", "tokens[%zu] is not a token id in [0, %d)", i, n_tok);
            goto out;
        }
        ids[i] = (int32_t)json_integer_value(v);
    }
    if (lean_detokenize(srv->tok, ids, (int32_t)n_ids, 0, NULL, 0, &len, &err) != LEAN_OK) {
        fail = api_error(400, "invalid_value", "tokens", "%s", err.msg);
        goto out;
    }
    if (!(text = malloc(len + 1))) {
        fail = api_error(500, NULL, NULL, "no memory for %zu bytes of text", len);
        goto out;
    }
    if (lean_detokenize(srv->tok, ids, (int32_t)n_ids, 0, text, len + 1, &len, &err) != LEAN_OK) {
        fail = api_error(400, "invalid_value", "tokens", "%s", err.msg);
        goto out;
    }
    fail = (api_reply){200, dump(json_pack("{s:s%}", "content", text, len))};
out:
    free(text);
    free(ids);
    json_decref(req);
    return fail;
}
