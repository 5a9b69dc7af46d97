/* cmd_run.c — `lean run`: raw completion of a prompt (text streamed, or token ids), with
 * speeds on stderr.
 *
 * The prompt is text (-p TEXT, -f FILE, or stdin when neither nor --ids is given), tokenized
 * the way transformers' tokenizer(text) does it (BOS where the file says so, special tokens
 * written in the text parsed), and the completion streams to stdout as whole characters
 * (lean_text_stream) until -n tokens or an end-of-generation token; or the prompt is --ids,
 * and exactly -n generated ids are printed, space-separated.
 *
 * Argument parsing is one loop: --help, then the sampling flags (shared with
 * `lean chat`: cli.c's parse_sampling_flag), then flags with a value. A new flag is one more
 * branch in parse_run and one more line in usage_run. */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const usage_run =
    "usage: lean run -m FILE (-p TEXT | -f FILE | --ids ID,ID,... | < FILE) [-n N] [--ctx N]\n"
    "                [--batch N] [sampling flags] [grammar flags]\n"
    "Prefills the prompt, then generates N more tokens (default 16): greedily (the argmax, the\n"
    "lowest id on ties) unless --temp T > 0 is given, then drawn by the sampler with the flags\n"
    "below (their defaults are llama.cpp's). A text prompt is tokenized with the model's\n"
    "vocabulary (BOS added where the file says so; special tokens in the text parsed) and the\n"
    "completion streams to stdout as text, ending early at an end-of-generation token. With\n"
    "--ids the generated ids are printed on stdout, space-separated. The sampling settings with\n"
    "the seed, the prefill and the decode speeds go to stderr. A run with a given --seed prints\n"
    "the same output every time.\n"
    "llama.cpp's spellings work too: --model, --prompt, --file, --n-predict, -c/--ctx-size,\n"
    "-b/--batch-size, --threads.\n"
    "  -m FILE      the model (GGUF)\n"
    "  -p TEXT      the prompt\n"
    "  -f FILE      the prompt, read from FILE ('-': stdin)\n"
    "  --ids LIST   prompt token ids, comma-separated\n"
    "               (with none of the three, the prompt is read from stdin)\n"
    "  -n N         tokens to generate (default 16)\n"
    "  --ctx N      context length in tokens (default: the model's, at most 4096)\n"
    "  --batch N    prefill chunk in tokens (default 512 gpu, 64 cpu)\n"
    "  -t N         CPU threads (default 0: one per CPU)\n"
    "  --backend B  auto (the default: gpu on a hardware GPU adapter, else cpu), gpu (WebGPU,\n"
    "               software adapters too), cpu (the CPU kernels: the best table this CPU runs,\n"
    "               threads), cpu-generic, cpu-avx2, cpu-avx512, cpu-neon, cpu-simd128 (one\n"
    "               table), cpu-ref (the reference)\n"
    "  --exact      F32 arithmetic throughout: on the GPU no f16 or 8-bit matmuls, on the CPU\n"
    "               float activations, not 8-bit ones (default: the faster paths)\n"
    LORA_USAGE
    VERBOSITY_USAGE
    SAMPLING_USAGE
    GRAMMAR_USAGE;

static int parse_ids(const char *s, int32_t **ids, int32_t *n) {
    int32_t cap = 1;
    for (const char *p = s; *p; p++) cap += *p == ',';
    int32_t *v = malloc(sizeof *v * (size_t)cap), k = 0;
    if (!v) return -1;
    const char *p = s;
    for (;;) {
        char *end;
        errno = 0;
        long long x = strtoll(p, &end, 10);
        if (errno || end == p || x < 0 || x > INT32_MAX || (*end && *end != ',')) {
            free(v);
            return -1;
        }
        v[k++] = (int32_t)x;
        if (!*end) break;
        p = end + 1;
    }
    *ids = v;
    *n = k;
    return 0;
}

/* llama-cli's spellings */
static const flag_alias run_aliases[] = {
    {"--model", "-m"}, {"--prompt", "-p"}, {"--file", "-f"}, {"--n-predict", "-n"}, {"-c", "--ctx"},
    {"--ctx-size", "--ctx"}, {"-b", "--batch"}, {"--batch-size", "--batch"}, {"--threads", "-t"}, {NULL, NULL},
};

typedef struct run_args {
    const char *model, *ids, *prompt, *prompt_file;
    long long n_gen, n_ctx, n_batch;
    lean_sampler_params sampling;
    long long n_threads;
    const char *backend;
    int verbosity; /* -1 quiet, 0, 1 verbose */
    int exact;
    lora_flags lora;
    grammar_flags grammar;
} run_args;

/* 0: parsed; -1: help was printed (exit 0); otherwise the exit status of a usage error. */
static int parse_run(int argc, char **argv, run_args *a) {
    *a = (run_args){.n_gen = 16, .sampling = lean_sampler_default_params()};
    a->sampling.temperature = 0; /* `run` is greedy unless asked: reproducible output by default */
    for (int i = 0; i < argc; i++) {
        const char *o = flag_name(argv[i], run_aliases);
        if (is_help(o)) return printf("%s", usage_run), -1;
        if (parse_verbosity_flag(o, &a->verbosity)) continue;
        int rc = parse_sampling_flag(usage_run, argc, argv, &i, &a->sampling);
        if (rc == 0) continue;
        if (rc > 0) return rc;
        if ((rc = parse_grammar_flag(usage_run, argc, argv, &i, &a->grammar)) >= 0) {
            if (rc > 0) return rc;
            continue;
        }
        if (strcmp(o, "--exact") == 0) {
            a->exact = 1;
            continue;
        }
        char msg[300];
        if ((rc = parse_lora_flag(argc, argv, &i, &a->lora, msg, sizeof msg)) >= 0) {
            if (rc > 0) return usage_error(usage_run, "%s", msg);
            continue;
        }
        /* flags with a value */
        if (i + 1 >= argc) return usage_error(usage_run, "'%s' needs a value (or is unknown)", o);
        const char *v = argv[++i];
        long long *num = strcmp(o, "-n") == 0 ? &a->n_gen
                         : strcmp(o, "--ctx") == 0 ? &a->n_ctx
                         : strcmp(o, "--batch") == 0 ? &a->n_batch
                         : strcmp(o, "-t") == 0 ? &a->n_threads : NULL;
        if (strcmp(o, "-m") == 0) a->model = v;
        else if (strcmp(o, "--ids") == 0) a->ids = v;
        else if (strcmp(o, "-p") == 0) a->prompt = v;
        else if (strcmp(o, "-f") == 0) a->prompt_file = v;
        else if (strcmp(o, "--backend") == 0) a->backend = v;
        else if (!num) return usage_error(usage_run, "unknown option '%s'", o);
        else if (parse_long(v, 0, INT32_MAX, num) != 0)
            return usage_error(usage_run, "expected a count >= 0, got '%s'", v);
    }
    if (!a->model) return usage_error(usage_run, "-m FILE is required");
    if (!!a->ids + !!a->prompt + !!a->prompt_file > 1)
        return usage_error(usage_run, "give one prompt: -p TEXT, -f FILE or --ids");
    return 0;
}

/* The prompt as text (-p, -f, or stdin), tokenized as transformers' tokenizer(text) does:
 * ADD_SPECIAL and PARSE_SPECIAL. 0 on success; 1 after printing the error. */
static int text_prompt(const run_args *a, const lean_tokenizer *tok, int32_t **ids, int32_t *n_ids) {
    lean_error err;
    char *text = NULL;
    size_t len = 0;
    if (a->prompt) {
        len = strlen(a->prompt);
        text = malloc(len + 1);
        if (text) memcpy(text, a->prompt, len + 1);
    } else {
        const char *path = a->prompt_file ? a->prompt_file : "-";
        FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
        if (!f) return fprintf(stderr, "lean: cannot open '%s': %s\n", path, strerror(errno)), 1;
        if (f == stdin && isatty(STDIN_FILENO)) fprintf(stderr, "lean: reading the prompt from stdin (end it with Ctrl-D)\n");
        text = read_all(f, &len);
        const int why = errno;
        if (f != stdin) fclose(f);
        errno = why;
        if (!text) return input_error("the prompt", path);
    }
    if (!text) return fprintf(stderr, "lean: out of memory\n"), 1;
    const uint32_t flags = LEAN_TOKENIZE_ADD_SPECIAL | LEAN_TOKENIZE_PARSE_SPECIAL;
    int32_t n = 0;
    int rc = 1;
    if (lean_tokenize(tok, text, len, flags, NULL, 0, &n, &err) != LEAN_OK) {
        lib_error(&err);
    } else if (n == 0) {
        fprintf(stderr, "lean: the prompt is empty (no tokens)\n");
    } else if (!(*ids = malloc(sizeof **ids * (size_t)n))) {
        fprintf(stderr, "lean: out of memory\n");
    } else if (lean_tokenize(tok, text, len, flags, *ids, n, n_ids, &err) != LEAN_OK) {
        lib_error(&err);
        free(*ids);
        *ids = NULL;
    } else {
        rc = 0;
    }
    free(text);
    return rc;
}

/* Appends id to the growing list ids[0..n) of room *cap; -1 out of memory. */
static int id_push(int32_t **ids, long long n, long long *cap, int32_t id) {
    if (n == *cap) {
        const long long c = *cap ? 2 * *cap : 256;
        int32_t *p = realloc(*ids, sizeof *p * (size_t)c);
        if (!p) return -1;
        *ids = p, *cap = c;
    }
    (*ids)[n] = id;
    return 0;
}

/* The grammar's own cost per drawn id: its work (a mask, then an accept) replayed over the ids
 * the reply drew, apart from the model, since the draws themselves run inside lean_gen_next
 * (docs/runs/2026-12-05-grammar-cost.md). A fresh grammar from the same flags: the reply's has
 * its masks cached by now. ms, or -1 on an error. */
static double grammar_replay_ms(const grammar_flags *f, const lean_tokenizer *tok, const int32_t *ids, long long n,
                                int32_t n_vocab) {
    lean_error err;
    lean_grammar *g = NULL;
    uint32_t *bits = malloc(LEAN_MASK_WORDS(n_vocab) * sizeof *bits);
    double ms = -1;
    if (bits && grammar_from_flags(f, tok, &g) == 0 && g) {
        const double t0 = now_ms();
        long long i = 0;
        for (; i < n; i++)
            if (lean_grammar_mask(g, bits, n_vocab, NULL, &err) != LEAN_OK ||
                (!lean_token_is_eog(tok, ids[i]) && lean_grammar_accept_token(g, ids[i], &err) != LEAN_OK))
                break;
        if (i == n) ms = now_ms() - t0;
    }
    lean_grammar_free(g);
    free(bits);
    return ms;
}

int cmd_run(int argc, char **argv) {
    run_args a;
    int rc = parse_run(argc, argv, &a);
    if (rc) return rc < 0 ? 0 : rc;
    int32_t *ids = NULL, n_ids = 0;
    if (a.ids && parse_ids(a.ids, &ids, &n_ids) != 0)
        return usage_error(usage_run, "--ids expects comma-separated ids >= 0, got '%s'", a.ids);
    const int as_text = !a.ids; /* a text prompt: the completion is printed as text */

    lean_error err;
    lean_model *m = NULL;
    lean_ctx *c = NULL;
    lean_sampler *smp = NULL;
    lean_text_stream *ts = NULL;
    lean_grammar *grammar = NULL;
    float *logits = NULL;
    lean_lora *loras[MAX_LORAS] = {NULL};
    const lean_tokenizer *tok = NULL;
    const char *stopped = "";
    int32_t *drawn = NULL; /* under a grammar: the ids drawn, for the grammar's cost */
    long long cap_drawn = 0;
    rc = 1;
    if (load_model(a.model, &m, &err) != LEAN_OK) goto fail;
    if (as_text) {
        tok = lean_model_tokenizer(m);
        if (!tok) {
            fprintf(stderr, "lean: the model has no tokenizer: give the prompt as --ids\n");
            goto done;
        }
        if (lean_tokenizer_check(tok, &err) != LEAN_OK) goto fail;
        if (text_prompt(&a, tok, &ids, &n_ids) != 0) goto done;
        if (lean_text_stream_create(tok, LEAN_DETOKENIZE_SKIP_SPECIAL, &ts, &err) != LEAN_OK) goto fail;
    }
    if (grammar_from_flags(&a.grammar, lean_model_tokenizer(m), &grammar) != 0) goto done;
    lean_ctx_params cp = lean_ctx_default_params();
    cp.n_ctx = (int32_t)a.n_ctx;
    cp.n_batch = (int32_t)a.n_batch;
    cp.n_threads = (int32_t)a.n_threads;
    cp.backend = a.backend;
    cp.exact = a.exact;
    if (ctx_create_quietly(m, &cp, a.verbosity, &c, &err) != LEAN_OK) goto fail;
    print_backend(c, a.verbosity);
    if (loras_load(&a.lora, m, loras) != 0) goto done;
    if (a.lora.n && lean_ctx_set_loras(c, loras, a.lora.scale, a.lora.n, &err) != LEAN_OK) goto fail;
    const int32_t n_vocab = lean_model_n_vocab(m);
    if (lean_sampler_create(&a.sampling, n_vocab, &smp, &err) != LEAN_OK) goto fail;
    /* The prompt is history too: the penalty's window counts it, as transformers' does. */
    if (lean_sampler_accept(smp, ids, n_ids, &err) != LEAN_OK) goto fail;
    print_sampling(&a.sampling, lean_sampler_seed(smp));
    logits = malloc(sizeof *logits * (size_t)n_vocab);
    if (!logits) {
        fprintf(stderr, "lean: out of memory\n");
        goto done;
    }

    double t0 = now_ms();
    if (lean_prefill(c, ids, n_ids, logits, &err) != LEAN_OK) goto fail;
    double t1 = now_ms();
    /* lean_gen_*: the draw keyed by the position each token will occupy, on the backend (the
     * GPU keeps ids and logits there): the same ids as sampling and decoding here, step by step.
     * Under a grammar (on the sampler) every draw is held to its mask, on the GPU too: the mask
     * goes down and one id comes back per step; the reply ends where the grammar does. */
    long long n_drawn = 0;
    if (grammar && lean_sampler_set_grammar(smp, grammar, &err) != LEAN_OK) goto fail;
    if (a.n_gen > 0 && lean_gen_begin(c, smp, a.n_gen < INT32_MAX ? (int32_t)a.n_gen : 0, &err) != LEAN_OK) goto fail;
    for (long long i = 0; i < a.n_gen; i++) {
        int32_t next;
        const char *piece;
        size_t n_piece;
        if (grammar && lean_grammar_done(grammar)) {
            stopped = "; stopped: the grammar is complete";
            break;
        }
        if (lean_gen_next(c, &next, &err) != LEAN_OK) goto fail_line;
        if (grammar && id_push(&drawn, n_drawn, &cap_drawn, next) != 0) {
            fprintf(stderr, "lean: out of memory\n");
            goto done;
        }
        n_drawn++;
        if ((as_text || grammar) && lean_token_is_eog(lean_model_tokenizer(m), next)) {
            stopped = grammar ? "; stopped at an end-of-generation token (the grammar is complete)"
                              : "; stopped at an end-of-generation token";
            break;
        }
        if (!as_text) {
            printf("%s%d", i ? " " : "", next);
        } else if (next < lean_tokenizer_n_tokens(tok)) {
            if (lean_text_stream_push(ts, next, &piece, &n_piece, &err) != LEAN_OK) goto fail_line;
            fwrite(piece, 1, n_piece, stdout);
        }
        fflush(stdout);
    }
    lean_gen_end(c);
    if (as_text) {
        const char *rest;
        size_t n_rest;
        if (lean_text_stream_flush(ts, &rest, &n_rest, &err) != LEAN_OK) goto fail_line;
        fwrite(rest, 1, n_rest, stdout);
    }
    /* ids end with a newline; text gets one only on a terminal, so piped text stays exact */
    if (!as_text || isatty(STDOUT_FILENO)) printf("\n");
    fflush(stdout);
    double t2 = now_ms();
    long long n_dec = n_drawn > 1 ? n_drawn - 1 : 0;
    fprintf(stderr, "prefill: %d tokens in %.1f ms (%.1f tok/s); decode: %lld tokens in %.1f ms (%.1f tok/s)%s\n",
            n_ids, t1 - t0, n_ids / ((t1 - t0) / 1e3), n_dec, t2 - t1, n_dec ? n_dec / ((t2 - t1) / 1e3) : 0.0,
            stopped);
    /* the grammar's share: masks and accepts, per drawn id (docs/runs/2026-12-05-grammar-cost.md) */
    const double grammar_ms =
        grammar && n_drawn ? grammar_replay_ms(&a.grammar, lean_model_tokenizer(m), drawn, n_drawn, n_vocab) : -1;
    if (grammar_ms >= 0)
        fprintf(stderr, "grammar: %.1f ms in masks and accepts (replayed), %.2f ms per token\n", grammar_ms,
                grammar_ms / (double)n_drawn);
    rc = 0;
    goto done;
fail_line:
    printf("\n");
fail:
    lib_error(&err);
done:
    free(logits);
    free(ids);
    free(drawn);
    lean_text_stream_free(ts);
    lean_grammar_free(grammar);
    lean_sampler_free(smp);
    lean_ctx_free(c);
    for (int i = 0; i < a.lora.n; i++) lean_lora_free(loras[i]);
    lean_model_free(m);
    return rc;
}
