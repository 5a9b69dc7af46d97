/* cmd_serve.c — `lean serve`: an OpenAI-compatible HTTP server over one model
 * (docs/serve.md). Flags, the model and its slots (one lean_ctx each), then the engine
 * (engine.c) and the listener (http.c) until SIGINT or SIGTERM.
 *
 * Native only (cli/main.c lists it outside wasm32): libmicrohttpd and jansson are linked
 * into the `lean` command, never into the library. */
#include "../cli/cli.h"
#include "serve.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char *const usage_serve =
    "usage: lean serve -m FILE [--host 127.0.0.1] [--port 8080] [--parallel N] [--ctx N] [flags]\n"
    "Serves the model over HTTP with OpenAI's API: POST /v1/chat/completions (through the\n"
    "model's chat template; \"stream\": true for server-sent events), POST /v1/completions,\n"
    "GET /v1/models, GET /health, POST /tokenize and /detokenize (llama-server's), and the\n"
    "browser chat page (build-web/, `make web`) at /. N slots decode together; a request\n"
    "takes the free slot whose KV cache holds most of its prompt (a conversation's earlier\n"
    "turns are not computed again). Ctrl-C stops it. docs/serve.md has the details.\n"
    "llama-server's spellings work too: --model, -c/--ctx-size, -np, --threads.\n"
    "  -m FILE         the model (GGUF)\n"
    "  --host H        the address to listen on (default 127.0.0.1: this machine only)\n"
    "  --port N        the port (default 8080; 0 = any free port, printed)\n"
    "  --parallel N    slots: requests decoded at once (default 4); more wait in a queue\n"
    "  --ctx N         context length of each slot in tokens (default: the model's, at\n"
    "                  most 4096)\n"
    "  --alias NAME    the model's name in the API (default: the file's name)\n"
    "  --web DIR       the folder served at / (default: build-web, here or beside the\n"
    "                  build folder of this lean, when it has index.html; 'none': no page)\n"
    "  --max-body N    the largest request body in bytes (default 8388608); larger is 413\n"
    "  --max-queue N   requests waiting for a slot before 503 (default 1024)\n"
    "  --timeout S     close a connection idle for S seconds; answer 408 and close one whose\n"
    "                  request body is not whole S seconds after its headers (default 120)\n"
    "  -t N            CPU threads (default 0: one per CPU); every step uses them all\n"
    "  --backend B     as `lean run` (default auto)\n"
    "  --exact         F32 arithmetic throughout (as `lean run`)\n"
    "  --lora FILE     a LoRA adapter (llama.cpp's GGUF) with scale 1, applied in every slot;\n"
    "                  repeat for several (docs/lora.md)\n"
    "  --lora-scaled FILE SCALE  the same with that scale (FILE:SCALE works too)\n"
    "  -q, --quiet     no line per request on stderr\n"
    "  -v, --verbose   libmicrohttpd's and the WebGPU library's messages too\n";

static const flag_alias serve_aliases[] = {
    {"--model", "-m"}, {"-c", "--ctx"}, {"--ctx-size", "--ctx"}, {"-np", "--parallel"}, {"--threads", "-t"},
    {NULL, NULL},
};

/* The file's name without its folders: the model's id in the API. */
static const char *base_name(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

static int has_index(const char *dir) {
    char p[4096];
    struct stat st;
    return snprintf(p, sizeof p, "%s/index.html", dir) < (int)sizeof p && stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* The default page folder: build-web in the working folder, else the one beside the folder this
 * lean was built into (build/lean -> build/../build-web), so `lean serve` run from elsewhere in
 * a checkout still serves the page; NULL when neither holds index.html. */
static const char *default_web(char *buf, size_t cap) {
    if (has_index("build-web")) return "build-web";
    ssize_t n = readlink("/proc/self/exe", buf, cap - 1);
    if (n <= 0) return NULL;
    buf[n] = 0;
    char *slash = strrchr(buf, '/');
    if (!slash || (size_t)(slash - buf) + sizeof "/../build-web" > cap) return NULL;
    strcpy(slash, "/../build-web");
    return has_index(buf) ? buf : NULL;
}

int cmd_serve(int argc, char **argv) {
    const char *model_path = NULL, *host = "127.0.0.1", *alias = NULL, *web = NULL;
    long long port = 8080, parallel = 4, n_ctx = 0, max_body = 8 << 20, max_queue = 1024, threads = 0, timeout = 120;
    int verbosity = 0;
    lora_flags lora = {0};
    lean_lora *loras[MAX_LORAS] = {NULL};
    lean_ctx_params cp = lean_ctx_default_params();
    for (int i = 0; i < argc; i++) {
        const char *o = flag_name(argv[i], serve_aliases);
        if (is_help(o)) return printf("%s", usage_serve), 0;
        if (parse_verbosity_flag(o, &verbosity)) continue;
        if (strcmp(o, "--exact") == 0) {
            cp.exact = 1;
            continue;
        }
        char msg[300];
        const int lrc = parse_lora_flag(argc, argv, &i, &lora, msg, sizeof msg);
        if (lrc > 0) return usage_error(usage_serve, "%s", msg);
        if (lrc == 0) continue;
        if (i + 1 >= argc) return usage_error(usage_serve, "'%s' needs a value (or is unknown)", argv[i]);
        const char *v = argv[++i];
        int bad = 0;
        if (strcmp(o, "-m") == 0) model_path = v;
        else if (strcmp(o, "--host") == 0) host = v;
        else if (strcmp(o, "--alias") == 0) alias = v;
        else if (strcmp(o, "--web") == 0) web = v;
        else if (strcmp(o, "--backend") == 0) cp.backend = v;
        else if (strcmp(o, "--port") == 0) bad = parse_long(v, 0, 65535, &port);
        else if (strcmp(o, "--parallel") == 0) bad = parse_long(v, 1, 256, &parallel);
        else if (strcmp(o, "--ctx") == 0) bad = parse_long(v, 0, 1 << 24, &n_ctx);
        else if (strcmp(o, "--max-body") == 0) bad = parse_long(v, 1024, 1ll << 32, &max_body);
        else if (strcmp(o, "--max-queue") == 0) bad = parse_long(v, 1, 1 << 20, &max_queue);
        else if (strcmp(o, "-t") == 0) bad = parse_long(v, 0, 1024, &threads);
        else if (strcmp(o, "--timeout") == 0) bad = parse_long(v, 1, 86400, &timeout);
        else return usage_error(usage_serve, "unknown flag '%s'", argv[i - 1]);
        if (bad) return usage_error(usage_serve, "bad value '%s' for %s", v, argv[i - 1]);
    }
    if (!model_path) return usage_error(usage_serve, "-m FILE is required");
    char web_buf[4096];
    if (!web) web = default_web(web_buf, sizeof web_buf);
    else if (strcmp(web, "none") == 0) web = NULL;
    else if (!has_index(web)) return usage_error(usage_serve, "--web %s: no index.html there", web);
    cp.n_ctx = (int32_t)n_ctx;
    cp.n_threads = (int32_t)threads;
    cp.n_seq = (int32_t)parallel; /* the slots are decoded together: on the GPU, one KV page */

    /* SIGINT and SIGTERM are taken by sigwait below: blocked before any thread starts, so
     * every thread inherits the mask. A closed socket must not kill the process. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    lean_error err;
    lean_model *m = NULL;
    serve_http *http = NULL;
    int rc = 1, started = 0, mutex = 0;
    serve_server srv = {.verbosity = verbosity, .max_body_bytes = (size_t)max_body, .max_queued = (int)max_queue,
                        .timeout_s = (unsigned)timeout,
                        .web_dir = web, .created_s = (int64_t)time(NULL)};
    if (load_model(model_path, &m, &err) != LEAN_OK) {
        lib_error(&err);
        goto out;
    }
    srv.model = m;
    if (loras_load(&lora, m, loras) != 0) goto out; /* each checked against the model, named if it does not fit */
    srv.loras = loras, srv.lora_scales = lora.scale, srv.n_loras = lora.n;
    srv.model_id = alias ? alias : base_name(model_path);
    srv.n_vocab = lean_model_n_vocab(m);
    srv.tok = lean_model_tokenizer(m);
    if (!srv.tok) {
        fprintf(stderr, "lean: %s has no tokenizer (tokenizer.ggml.model): it cannot be served\n", model_path);
        goto out;
    }
    if (lean_tokenizer_check(srv.tok, &err) != LEAN_OK) {
        lib_error(&err);
        goto out;
    }
    srv.template_src = lean_model_chat_template(m);
    srv.chat = lean_chat_default_params();
    lean_chat_params_from_model(m, &srv.chat);
    srv.chat.add_generation_prompt = 1;
    lean_model_info mi;
    lean_model_get_info(m, &mi);
    srv.n_params = mi.n_params;
    if (!srv.template_src && verbosity >= 0)
        fprintf(stderr, "lean serve: the model has no chat template: chat uses ChatML\n");
    if (pthread_mutex_init(&srv.mu, NULL) != 0 || pthread_cond_init(&srv.wake, NULL) != 0) {
        fprintf(stderr, "lean: cannot make the server's lock\n");
        goto out;
    }
    mutex = 1;
    if (engine_start(&srv, &cp, (int)parallel, verbosity, &err) != LEAN_OK) {
        lib_error(&err);
        goto out;
    }
    started = 1;
    char msg[512], backend[256];
    int bound = (int)port;
    if (!(http = http_start(&srv, host, &bound, msg, sizeof msg))) {
        fprintf(stderr, "lean: %s\n", msg);
        goto out;
    }
    char adapters[32] = "";
    if (lora.n) snprintf(adapters, sizeof adapters, ", %d LoRA adapter%s", lora.n, lora.n > 1 ? "s" : "");
    fprintf(stderr, "lean serve: %s, %d slots of %d tokens, backend %s%s%s%s\n", srv.model_id, srv.n_slots, srv.n_ctx,
            engine_backend_str(&srv, backend, sizeof backend), adapters, web ? ", page from " : "", web ? web : "");
    fprintf(stderr, "lean serve: listening on http://%s%s%s:%d/\n", strchr(host, ':') ? "[" : "", host,
            strchr(host, ':') ? "]" : "", bound);
    int sig;
    sigwait(&sigs, &sig);
    if (verbosity >= 0) fprintf(stderr, "lean serve: %s: stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    rc = 0;
out:
    if (started) engine_stop(&srv); /* every job cancelled: connections waiting on one return */
    http_stop(http);
    if (mutex) pthread_mutex_destroy(&srv.mu), pthread_cond_destroy(&srv.wake);
    for (int i = 0; i < lora.n; i++) lean_lora_free(loras[i]); /* after the slots that used them */
    lean_model_free(m);
    return rc;
}
