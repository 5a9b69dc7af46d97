/* fuzz_serve.c — the libFuzzer target for `lean serve`'s request reader (serve/api.c over
 * jansson): what a client's POST body turns into.
 *
 *   make fuzz         build-fuzz/fuzz_serve   (clang -fsanitize=fuzzer,address,undefined)
 *   make fuzz-run     runs it (with the other targets) on a fresh copy of tests/data/fuzz_serve/
 *
 * The first byte picks the endpoint (chat, completions, tokenize, detokenize), the rest is the
 * body, against the vocabulary of a tiny generated model (tiny-qwen2's byte-level one; the
 * chat template ChatML) with a 256-token context: api.c reads the server's fields, never its
 * model, so no backend is linked. A request that is refused must come back as an OpenAI error
 * object (valid JSON, a message, a 4xx/5xx status). A job that is accepted must hold what the
 * engine relies on: 1 <= n_prompt < n_ctx (n_prompt + max_tokens <= n_ctx when set), ids in
 * the vocabulary, non-empty stop strings, sampler parameters lean accepts; and every reply and
 * stream event written for it must be valid JSON. */
#include "../serve/serve.h"
#include "dev/lean_dev.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define REQUIRE(cond)                                                              \
    do {                                                                           \
        if (!(cond)) {                                                             \
            fprintf(stderr, "fuzz_serve: %s:%d: %s\n", __FILE__, __LINE__, #cond); \
            __builtin_trap();                                                      \
        }                                                                          \
    } while (0)

static serve_server srv;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    char path[] = "/tmp/fuzz_serve_XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    close(fd);
    lean_gen_params gp = {.preset = "tiny-qwen2", .recipe = "q8_0", .seed = 1, .n_layer = 1};
    lean_error err;
    lean_tokenizer *tok;
    REQUIRE(lean_generate_model(&gp, path, &err) == LEAN_OK);
    REQUIRE(lean_tokenizer_load_file(path, &tok, &err) == LEAN_OK);
    unlink(path);
    srv.tok = tok;
    srv.model_id = "tiny";
    srv.template_src = NULL; /* ChatML (fuzz_template covers the template engine) */
    srv.chat = lean_chat_default_params();
    srv.chat.add_generation_prompt = 1;
    srv.n_vocab = lean_tokenizer_n_tokens(tok);
    srv.n_ctx = 256;
    srv.created_s = 1;
    REQUIRE(pthread_mutex_init(&srv.mu, NULL) == 0);
    return 0;
}

/* s is a JSON document (an SSE event: "data: " first); with error, an OpenAI error object. */
static void require_json(const char *s, int error) {
    REQUIRE(s);
    if (strncmp(s, "data: ", 6) == 0) s += 6;
    if (*s == 0) return; /* an event left out (no usage asked) */
    json_error_t e;
    json_t *v = json_loads(s, JSON_ALLOW_NUL, &e); /* a token may be the byte 0: "\u0000" */
    REQUIRE(v);
    if (error) REQUIRE(json_is_string(json_object_get(json_object_get(v, "error"), "message")));
    json_decref(v);
}

static void check_job(serve_job *j) {
    lean_error err;
    REQUIRE(j->n_prompt >= 1 && j->n_prompt < srv.n_ctx);
    REQUIRE(j->max_tokens >= 0 && (j->max_tokens == 0 || (int64_t)j->n_prompt + j->max_tokens <= srv.n_ctx));
    for (int32_t i = 0; i < j->n_prompt; i++) REQUIRE(j->prompt[i] >= 0 && j->prompt[i] < srv.n_vocab);
    for (int i = 0; i < j->n_stop; i++) REQUIRE(j->stop[i] && j->stop[i][0]);
    REQUIRE(lean_sampler_params_check(&j->sampling, &err) == LEAN_OK);
    /* the replies written for it, as the engine would leave it */
    static const char text[] = "caf\xc3\xa9 \"quoted\"\n";
    j->text = strdup(text);
    REQUIRE(j->text);
    j->n_text = j->cap_text = sizeof text - 1;
    j->finish = "stop";
    j->done = 1;
    api_reply r = api_job_reply(&srv, j);
    REQUIRE(r.status == 200);
    require_json(r.body, 0);
    free(r.body);
    char *ev[] = {api_stream_first(&srv, j), api_stream_delta(&srv, j, text, sizeof text - 1),
                  api_stream_final(&srv, j), api_stream_usage(&srv, j)};
    for (size_t i = 0; i < sizeof ev / sizeof ev[0]; i++) require_json(ev[i], 0), free(ev[i]);
    j->http_status = 500;
    snprintf(j->error, sizeof j->error, "a failure");
    char *e = api_stream_error(j);
    require_json(e, 1);
    free(e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const char *body = (const char *)data + 1;
    size_t n = size - 1;
    api_reply r = {0, NULL};
    switch (data[0] % 4) {
    case 0:
    case 1: {
        serve_job *j = NULL;
        if (api_parse_job(&srv, data[0] % 4 ? JOB_COMPLETION : JOB_CHAT, body, n, &j, &r) == 0) {
            REQUIRE(j);
            check_job(j);
            job_unref_locked(j);
            return 0;
        }
        REQUIRE(r.status >= 400 && r.status < 600);
        require_json(r.body, 1);
        break;
    }
    case 2:
        r = api_tokenize(&srv, body, n);
        require_json(r.body, r.status != 200);
        break;
    default:
        r = api_detokenize(&srv, body, n);
        require_json(r.body, r.status != 200);
        break;
    }
    free(r.body);
    return 0;
}
