/* cmd_chat.c — `lean chat`: an interactive conversation through the model's chat template.
 *
 *   lean chat -m model.gguf --system "You are terse."
 *   printf 'Hi\nWhat is 2+2?\n' | lean chat -m model.gguf -n 64 --seed 1
 *
 * One lean_chat_session (lean.h, "conversations") holds the conversation and its KV cache:
 * each line read from stdin is a user message, the reply streams to stdout as it is drawn,
 * and one line on stderr says how much of the conversation was reused from the cache.
 * Ctrl-C (SIGINT) aborts the reply in progress through lean_chat_abort (one atomic store,
 * safe in a signal handler) and returns to the prompt; at the prompt it exits, as EOF does.
 *
 * Sections: usage · arguments · input · signals · the loop */
#include "cli.h"

#include <errno.h>
#ifndef __wasi__
#include <signal.h>
#else
typedef int sig_atomic_t; /* wasm32-wasi has no signals (its signal.h refuses): none arrive */
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- usage ---- */

static const char *const usage_chat =
    "usage: lean chat -m FILE [--ctx N] [--batch N] [--backend B] [--exact] [-n N] [--system TEXT]\n"
    "                 [--stop S]... [--template JINJAFILE | --chatml] [--drop-oldest] [sampling flags]\n"
    "                 [--grammar G | --grammar-file F | --json-schema S | --json-schema-file F]\n"
    "                 [--lora FILE]... [--lora-scaled FILE SCALE]...\n"
    "A conversation with the model through its chat template. Each line on stdin is a message\n"
    "(a line ending in '\\' goes on with the next); the reply streams to stdout, and a line on\n"
    "stderr tells how many prompt tokens were reused from the cache and how many computed.\n"
    "Typing /reset forgets the conversation (the system prompt stays); /quit or end of input\n"
    "(Ctrl-D) exits. Ctrl-C stops the reply in progress; at the prompt it exits.\n"
    "llama.cpp's spellings work too: --model, --n-predict, -c/--ctx-size, -b/--batch-size.\n"
    "  -m FILE              the model (GGUF, with a tokenizer)\n"
    "  --ctx N              context length in tokens (default: the model's, at most 4096)\n"
    "  --batch N            prefill chunk in tokens (default 512 gpu, 64 cpu)\n"
    "  --backend B          auto (default: WebGPU on a hardware GPU, else cpu), gpu, cpu, cpu-ref,\n"
    "                       cpu-generic, cpu-avx2, cpu-avx512, cpu-neon, cpu-simd128 (see lean\n"
    "                       run --help)\n"
    "  --exact              F32 arithmetic throughout (see lean run --help; default: faster)\n"
    "  -n N                 most tokens per reply (default 0: until the model ends it or the\n"
    "                       context is full)\n"
    "  --system TEXT        the system prompt\n"
    "  --stop S             end the reply before S (repeatable); S is never printed\n"
    "  --template JINJAFILE this chat template instead of the model's\n"
    "  --chatml             the ChatML template instead of the model's (a model without a\n"
    "                       template gets ChatML anyway, said on stderr)\n"
    "  --drop-oldest        when the conversation outgrows the context, leave out its oldest\n"
    "                       turns (default: say so, and keep the conversation as it is)\n"
    LORA_USAGE
    VERBOSITY_USAGE
    SAMPLING_USAGE
    GRAMMAR_USAGE;

/* ---- arguments ---- */

#define MAX_STOPS 16

typedef struct chat_args {
    const char *model, *system, *template_path, *backend;
    const char *stops[MAX_STOPS];
    int n_stops, chatml, drop_oldest, exact;
    int verbosity; /* -1 quiet, 0, 1 verbose */
    long long n_predict, n_ctx, n_batch;
    lean_sampler_params sampling;
    grammar_flags grammar;
    lora_flags lora;
} chat_args;

/* llama-cli's spellings of the flags chat has */
static const flag_alias chat_aliases[] = {
    {"--model", "-m"}, {"--n-predict", "-n"}, {"-c", "--ctx"}, {"--ctx-size", "--ctx"},
    {"-b", "--batch"}, {"--batch-size", "--batch"}, {NULL, NULL},
};

/* 0: parsed; -1: help was printed (exit 0); otherwise the exit status of a usage error. */
static int parse_chat(int argc, char **argv, chat_args *a) {
    *a = (chat_args){.sampling = lean_sampler_default_params()}; /* chat samples: llama.cpp's defaults */
    for (int i = 0; i < argc; i++) {
        const char *o = flag_name(argv[i], chat_aliases);
        if (is_help(o)) return printf("%s", usage_chat), -1;
        if (parse_verbosity_flag(o, &a->verbosity)) continue;
        int rc = parse_sampling_flag(usage_chat, argc, argv, &i, &a->sampling);
        if (rc < 0) rc = parse_grammar_flag(usage_chat, argc, argv, &i, &a->grammar);
        char msg[300];
        if (rc < 0 && (rc = parse_lora_flag(argc, argv, &i, &a->lora, msg, sizeof msg)) > 0)
            return usage_error(usage_chat, "%s", msg);
        if (rc == 0) continue;
        if (rc > 0) return rc;
        if (strcmp(o, "--chatml") == 0) {
            a->chatml = 1;
            continue;
        }
        if (strcmp(o, "--drop-oldest") == 0 || strcmp(o, "--exact") == 0) {
            *(o[2] == 'd' ? &a->drop_oldest : &a->exact) = 1;
            continue;
        }
        /* flags with a value */
        if (i + 1 >= argc) return usage_error(usage_chat, "'%s' needs a value (or is unknown)", o);
        const char *v = argv[++i];
        long long *num = strcmp(o, "-n") == 0 ? &a->n_predict
                         : strcmp(o, "--ctx") == 0 ? &a->n_ctx
                         : strcmp(o, "--batch") == 0 ? &a->n_batch : NULL;
        if (strcmp(o, "-m") == 0) a->model = v;
        else if (strcmp(o, "--system") == 0) a->system = v;
        else if (strcmp(o, "--template") == 0) a->template_path = v;
        else if (strcmp(o, "--backend") == 0) a->backend = v;
        else if (strcmp(o, "--stop") == 0) {
            if (!*v) return usage_error(usage_chat, "--stop needs a non-empty string");
            if (a->n_stops == MAX_STOPS) return usage_error(usage_chat, "at most %d --stop strings", MAX_STOPS);
            a->stops[a->n_stops++] = v;
        } else if (!num) return usage_error(usage_chat, "unknown option '%s'", o);
        else if (parse_long(v, 0, INT32_MAX, num) != 0)
            return usage_error(usage_chat, "%s expects a count >= 0, got '%s'", o, v);
    }
    if (!a->model) return usage_error(usage_chat, "-m FILE is required");
    if (a->chatml && a->template_path) return usage_error(usage_chat, "--chatml and --template exclude each other");
    return 0;
}

/* ---- input ---- */

/* One message: lines joined while they end in '\\'. Returns 1 with *msg (malloc'd, without
 * the newline), 0 at end of input, -1 when interrupted (SIGINT at the prompt), -2 when the
 * message passes CLI_MAX_INPUT_BYTES (the rest of its line is read and dropped). Byte by
 * byte rather than getline, which would grow without a bound on a line with no end. */
static int read_message(char **msg, int interactive) {
    size_t n = 0, cap = 256;
    char *out = malloc(cap);
    int got = 0; /* a byte of this message was read */
    if (!out) return 0;
    for (;;) {
        errno = 0;
        const int ch = getc(stdin);
        if (ch == EOF) {
            const int interrupted = ferror(stdin) && errno == EINTR;
            clearerr(stdin);
            if (!got || interrupted) {
                free(out);
                return interrupted ? -1 : 0;
            }
        } else if (ch != '\n') {
            got = 1;
            if (n >= CLI_MAX_INPUT_BYTES) {
                for (int c = ch; c != EOF && c != '\n';) c = getc(stdin);
                free(out);
                return -2;
            }
            if (n + 2 > cap) {
                const size_t grown = cap * 2 > CLI_MAX_INPUT_BYTES + 2 ? CLI_MAX_INPUT_BYTES + 2 : cap * 2;
                char *g = realloc(out, grown);
                if (!g) {
                    free(out);
                    return 0;
                }
                out = g;
                cap = grown;
            }
            out[n++] = (char)ch;
            continue;
        }
        got = 1; /* the end of a line (or of the input after a partial one) */
        if (n && out[n - 1] == '\r') n--;
        const int more = n && out[n - 1] == '\\';
        if (more) out[n - 1] = '\n';
        if (!more || ch == EOF) break;
        if (interactive) fputs("... ", stderr);
    }
    out[n] = 0;
    *msg = out;
    return 1;
}

/* ---- signals ---- */

static lean_chat_session *volatile g_session;
static volatile sig_atomic_t g_in_reply;

static void on_sigint(int sig) {
    (void)sig;
    if (g_in_reply && g_session) lean_chat_abort(g_session); /* the reply stops at its next step */
    /* at the prompt: getline fails with EINTR (no SA_RESTART) and the loop ends */
}

static void catch_sigint(lean_chat_session *s) {
    g_session = s;
#ifndef __wasi__
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0; /* no SA_RESTART: Ctrl-C at the prompt ends the read */
    sigaction(SIGINT, &sa, NULL);
#else
    (void)on_sigint;
#endif
}

static void release_sigint(void) {
#ifndef __wasi__
    signal(SIGINT, SIG_DFL);
#endif
    g_session = NULL;
}

/* ---- the loop ---- */

static int print_text(void *user, const char *text, size_t n) {
    (void)user;
    fwrite(text, 1, n, stdout);
    fflush(stdout);
    return 0;
}

static const char *stop_name(int stop) {
    switch (stop) {
    case LEAN_CHAT_STOP_EOG: return "end of generation";
    case LEAN_CHAT_STOP_STRING: return "stop string";
    case LEAN_CHAT_STOP_LIMIT: return "-n limit";
    case LEAN_CHAT_STOP_CONTEXT: return "context full";
    case LEAN_CHAT_STOP_ABORT: return "interrupted";
    case LEAN_CHAT_STOP_CALLBACK: return "stopped";
    }
    return "?";
}

int cmd_chat(int argc, char **argv) {
    chat_args a;
    int rc = parse_chat(argc, argv, &a);
    if (rc) return rc < 0 ? 0 : rc;

    lean_error err;
    lean_model *m = NULL;
    lean_chat_session *s = NULL;
    lean_grammar *grammar = NULL;
    lean_lora *loras[MAX_LORAS] = {NULL};
    char *tpl = NULL;
    rc = 1;
    if (a.template_path && !(tpl = read_path(a.template_path, NULL))) return input_error("the template", a.template_path);
    if (load_model(a.model, &m, &err) != LEAN_OK) goto fail;
    lean_chat_session_params p = lean_chat_session_default_params();
    p.n_ctx = (int32_t)a.n_ctx;
    p.n_batch = (int32_t)a.n_batch;
    p.backend = a.backend;
    p.exact = a.exact;
    p.n_predict = (int32_t)a.n_predict;
    p.sampling = a.sampling;
    p.system = a.system;
    p.stop = a.stops;
    p.n_stop = a.n_stops;
    p.drop_oldest = a.drop_oldest;
    p.template_source = a.chatml ? lean_chat_template_chatml() : tpl;
    p.chatml_fallback = 1;
    if (!p.template_source && !lean_model_chat_template(m))
        fprintf(stderr, "lean: the model has no chat template; using ChatML\n");
    if (grammar_from_flags(&a.grammar, lean_model_tokenizer(m), &grammar) != 0) goto done;
    if (chat_session_create_quietly(m, &p, a.verbosity, &s, &err) != LEAN_OK) goto fail;
    if (grammar && lean_chat_session_set_grammar(s, grammar, &err) != LEAN_OK) goto fail;
    if (loras_load(&a.lora, m, loras) != 0) goto done;
    if (a.lora.n && lean_chat_session_set_loras(s, loras, a.lora.scale, a.lora.n, &err) != LEAN_OK) goto fail;
    print_backend(lean_chat_session_ctx(s), a.verbosity);
    print_sampling(&a.sampling, lean_sampler_seed(lean_chat_session_sampler(s)));

    catch_sigint(s);

    const int interactive = isatty(STDIN_FILENO);
    for (;;) {
        if (interactive) fputs("> ", stderr);
        char *msg = NULL;
        int got = read_message(&msg, interactive);
        if (got == -2) {
            fprintf(stderr, "lean: a message on stdin is larger than %u MiB, the most lean reads "
                            "(CLI_MAX_INPUT_BYTES); it was dropped\n", CLI_MAX_INPUT_BYTES >> 20);
            continue;
        }
        if (got <= 0) {
            if (interactive) fputc('\n', stderr);
            break;
        }
        if (strcmp(msg, "/quit") == 0 || strcmp(msg, "/exit") == 0) {
            free(msg);
            break;
        }
        if (strcmp(msg, "/reset") == 0) {
            lean_chat_session_reset(s);
            fprintf(stderr, "[conversation cleared]\n");
            free(msg);
            continue;
        }
        if (!msg[0]) { /* an empty line is no message */
            free(msg);
            continue;
        }
        lean_chat_turn_stats st;
        const double t0 = now_ms();
        g_in_reply = 1;
        lean_status ts = lean_chat_turn(s, msg, print_text, NULL, &st, &err);
        g_in_reply = 0;
        const double t1 = now_ms();
        free(msg);
        if (ts != LEAN_OK) {
            lib_error(&err);
            if (ts == LEAN_ERR_CONTEXT_FULL)
                fprintf(stderr, "lean: type /reset to start afresh%s\n",
                        a.drop_oldest ? "" : ", or run with --drop-oldest");
            continue;
        }
        printf("\n");
        fflush(stdout);
        const double secs = (t1 - t0) / 1e3;
        fprintf(stderr, "[%d prompt tokens: %d reused, %d computed; %d generated; %.2f s (%.1f tok/s); %s%s]\n",
                st.n_prompt, st.n_reused, st.n_prefilled, st.n_generated, secs,
                secs > 0 ? (st.n_prefilled + st.n_generated) / secs : 0.0, stop_name(st.stop),
                st.n_dropped ? ", oldest turns dropped" : "");
    }
    rc = 0;
    goto done;
fail:
    lib_error(&err);
done:
    release_sigint();
    lean_chat_session_free(s);
    for (int i = 0; i < a.lora.n; i++) lean_lora_free(loras[i]);
    lean_grammar_free(grammar);
    lean_model_free(m);
    free(tpl);
    return rc;
}
