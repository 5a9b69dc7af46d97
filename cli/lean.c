/* lean.c — the `lean` command.
 *
 *   lean info FILE                               what a model file holds
 *   lean run -m FILE --ids 1,2,3 -n 32 [--ctx N] [--batch N]
 *                                                greedy generation from token ids
 *   lean gen --preset P --type T [--vocab FILE] [--seed S] [--layers N] -o OUT
 *                                                a random-weight model at a preset's shapes
 *   lean quantize IN OUT TYPE                    re-encode a model's matrices
 *
 * Only lean.h is used: the CLI is a front end like any other. Results go to stdout,
 * errors and timings to stderr; the exit status is 0 on success, 1 when the library
 * reports an error, 2 for a usage error.
 *
 * Sections: helpers · info · run · gen · quantize · main
 */
#include "lean.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- helpers ---- */

static const char *const usage_main =
    "usage: lean COMMAND [ARGS]\n"
    "\n"
    "commands:\n"
    "  info FILE            print a model's architecture, shapes and tensor types\n"
    "  run -m FILE ...      generate token ids greedily from prompt ids\n"
    "  gen --preset P ...   write a random-weight model at a preset's shapes\n"
    "  quantize IN OUT TYPE re-encode every weight matrix of IN as TYPE\n"
    "\n"
    "'lean COMMAND --help' describes one command.\n";

static const char *const usage_info =
    "usage: lean info FILE\n"
    "Prints the architecture, name, shapes, context length, tensor count per type, total\n"
    "parameters and bytes, tokenizer kind and whether a chat template is present.\n";

static const char *const usage_run =
    "usage: lean run -m FILE --ids ID,ID,... [-n N] [--ctx N] [--batch N]\n"
    "Prefills the ids, then generates N more (default 16), each the argmax of the logits\n"
    "(the lowest id on ties). Prints the generated ids on stdout, space-separated, and the\n"
    "prefill and decode speeds on stderr.\n"
    "  -m FILE      the model (GGUF)\n"
    "  --ids LIST   prompt token ids, comma-separated\n"
    "  -n N         tokens to generate (default 16)\n"
    "  --ctx N      context length in tokens (default: the model's, at most 4096)\n"
    "  --batch N    prefill chunk in tokens (default 64)\n";

static const char *const usage_gen =
    "usage: lean gen --preset P --type T [--vocab FILE] [--seed S] [--layers N] -o OUT\n"
    "Writes a model with seeded random weights at a preset's shapes.\n"
    "  --preset P   smollm2-135m, smollm2-360m, smollm2-1.7b, qwen2.5-0.5b, qwen3-0.6b,\n"
    "               llama-3.2-1b, tiny-llama, tiny-qwen2, tiny-qwen3\n"
    "  --type T     a type for every matrix (f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1,\n"
    "               q4_k, q5_k, q6_k) or q4_k_m (llama.cpp's mixed layout)\n"
    "  --vocab FILE a GGUF whose tokenizer is copied in (default: a byte-level stand-in)\n"
    "  --seed S     random seed (default 1)\n"
    "  --layers N   fewer layers than the preset's (default: the preset's)\n"
    "  -o OUT       the file to write\n";

static const char *const usage_quantize =
    "usage: lean quantize IN OUT TYPE\n"
    "Re-encodes every 2-D weight matrix of IN as TYPE (or the q4_k_m recipe); norms,\n"
    "biases and other 1-D tensors stay f32.\n";

/* Prints "lean: <message>" and the command's usage on stderr; returns exit status 2. */
__attribute__((format(printf, 2, 3))) static int usage_error(const char *usage, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "lean: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n\n%s", usage);
    va_end(ap);
    return 2;
}

static int lib_error(const lean_error *err) {
    fprintf(stderr, "lean: %s: %s\n", lean_status_str(err->status), err->msg);
    return 1;
}

static int is_help(const char *a) { return strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0; }

/* Parses a whole decimal integer in [lo, hi]; 0 on success. */
static int parse_long(const char *s, long long lo, long long hi, long long *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* ---- info ---- */

static void print_count(const char *label, uint64_t n) {
    const char *unit = "";
    double v = (double)n;
    if (n >= 1000000000ull) v /= 1e9, unit = "B";
    else if (n >= 1000000ull) v /= 1e6, unit = "M";
    else if (n >= 1000ull) v /= 1e3, unit = "K";
    printf("%-14s %llu", label, (unsigned long long)n);
    if (*unit) printf(" (%.2f %s)", v, unit);
    printf("\n");
}

static int cmd_info(int argc, char **argv) {
    if (argc >= 1 && is_help(argv[0])) return printf("%s", usage_info), 0;
    if (argc != 1) return usage_error(usage_info, "info takes one FILE");
    lean_error err;
    lean_model *m;
    if (lean_model_load_file(argv[0], &m, &err) != LEAN_OK) return lib_error(&err);
    lean_model_info in;
    lean_model_get_info(m, &in);
    printf("%-14s %s\n", "file", argv[0]);
    printf("%-14s %s\n", "architecture", in.arch);
    printf("%-14s %s\n", "name", *in.name ? in.name : "(none)");
    printf("%-14s %d\n", "vocab", in.n_vocab);
    printf("%-14s %d\n", "embedding", in.n_embd);
    printf("%-14s %d\n", "layers", in.n_layer);
    printf("%-14s %d (kv %d), head_dim %d\n", "heads", in.n_head, in.n_head_kv, in.head_dim);
    printf("%-14s %d\n", "feed-forward", in.n_ff);
    printf("%-14s %d\n", "context", in.n_ctx_train);
    printf("%-14s %g\n", "rope base", (double)in.rope_base);
    printf("%-14s %g\n", "rms eps", (double)in.rms_eps);
    printf("%-14s %s\n", "output", in.tied_output ? "tied to token_embd" : "output.weight");
    printf("%-14s %d:", "tensors", in.n_tensors);
    for (int t = 0; t < 32; t++)
        if (in.n_tensors_by_type[t])
            printf(" %s %d", lean_type_name(t) ? lean_type_name(t) : "?", in.n_tensors_by_type[t]);
    printf("\n");
    print_count("parameters", in.n_params);
    printf("%-14s %llu (%.1f MiB)\n", "weight bytes", (unsigned long long)in.weight_bytes,
           (double)in.weight_bytes / (1024.0 * 1024.0));
    printf("%-14s %s\n", "tokenizer", *in.tokenizer ? in.tokenizer : "(none)");
    printf("%-14s %s\n", "chat template", in.has_chat_template ? "yes" : "no");
    lean_model_free(m);
    return 0;
}

/* ---- run ---- */

/* "1,2,3" -> *ids (malloc'd), *n. 0 on success. */
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

/* The index of the largest logit; the lowest index among equals. */
static int32_t argmax(const float *x, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

typedef struct run_args {
    const char *model, *ids;
    long long n_gen, n_ctx, n_batch;
} run_args;

/* 0: parsed; -1: help was printed (exit 0); otherwise the exit status of a usage error. */
static int parse_run(int argc, char **argv, run_args *a) {
    *a = (run_args){.n_gen = 16};
    for (int i = 0; i < argc; i++) {
        const char *o = argv[i];
        if (is_help(o)) return printf("%s", usage_run), -1;
        if (i + 1 >= argc) return usage_error(usage_run, "'%s' needs a value (or is unknown)", o);
        const char *v = argv[++i];
        long long *num = strcmp(o, "-n") == 0 ? &a->n_gen
                         : strcmp(o, "--ctx") == 0 ? &a->n_ctx
                         : strcmp(o, "--batch") == 0 ? &a->n_batch : NULL;
        if (strcmp(o, "-m") == 0) a->model = v;
        else if (strcmp(o, "--ids") == 0) a->ids = v;
        else if (!num) return usage_error(usage_run, "unknown option '%s'", o);
        else if (parse_long(v, 0, INT32_MAX, num) != 0)
            return usage_error(usage_run, "expected a count >= 0, got '%s'", v);
    }
    if (!a->model) return usage_error(usage_run, "-m FILE is required");
    if (!a->ids) return usage_error(usage_run, "--ids is required");
    return 0;
}

static int cmd_run(int argc, char **argv) {
    run_args a;
    int rc = parse_run(argc, argv, &a);
    if (rc) return rc < 0 ? 0 : rc;
    int32_t *ids = NULL, n_ids = 0;
    if (parse_ids(a.ids, &ids, &n_ids) != 0)
        return usage_error(usage_run, "--ids expects comma-separated ids >= 0, got '%s'", a.ids);

    lean_error err;
    lean_model *m = NULL;
    lean_ctx *c = NULL;
    float *logits = NULL;
    rc = 1;
    if (lean_model_load_file(a.model, &m, &err) != LEAN_OK) goto fail;
    lean_ctx_params cp = lean_ctx_default_params();
    cp.n_ctx = (int32_t)a.n_ctx;
    cp.n_batch = (int32_t)a.n_batch;
    if (lean_ctx_create(m, &cp, &c, &err) != LEAN_OK) goto fail;
    const int32_t n_vocab = lean_model_n_vocab(m);
    logits = malloc(sizeof *logits * (size_t)n_vocab);
    if (!logits) {
        fprintf(stderr, "lean: out of memory\n");
        goto done;
    }

    double t0 = now_ms();
    if (lean_prefill(c, ids, n_ids, logits, &err) != LEAN_OK) goto fail;
    double t1 = now_ms();
    /* The first token comes from the prefill's logits; each later one needs a decode. */
    for (long long i = 0; i < a.n_gen; i++) {
        int32_t next = argmax(logits, n_vocab);
        printf("%s%d", i ? " " : "", next);
        fflush(stdout);
        if (i + 1 < a.n_gen && lean_decode(c, next, logits, &err) != LEAN_OK) {
            printf("\n");
            goto fail;
        }
    }
    printf("\n");
    double t2 = now_ms();
    long long n_dec = a.n_gen > 1 ? a.n_gen - 1 : 0;
    fprintf(stderr, "prefill: %d tokens in %.1f ms (%.1f tok/s); decode: %lld tokens in %.1f ms (%.1f tok/s)\n",
            n_ids, t1 - t0, n_ids / ((t1 - t0) / 1e3), n_dec, t2 - t1,
            n_dec ? n_dec / ((t2 - t1) / 1e3) : 0.0);
    rc = 0;
    goto done;
fail:
    lib_error(&err);
done:
    free(logits);
    free(ids);
    lean_ctx_free(c);
    lean_model_free(m);
    return rc;
}

/* ---- gen ---- */

static int cmd_gen(int argc, char **argv) {
    lean_gen_params p = {.seed = 1};
    const char *out = NULL;
    for (int i = 0; i < argc; i++) {
        const char *o = argv[i];
        if (is_help(o)) return printf("%s", usage_gen), 0;
        if (i + 1 >= argc) return usage_error(usage_gen, "'%s' needs a value (or is unknown)", o);
        const char *v = argv[++i];
        long long x;
        if (strcmp(o, "--preset") == 0) p.preset = v;
        else if (strcmp(o, "--type") == 0) p.recipe = v;
        else if (strcmp(o, "--vocab") == 0) p.vocab_path = v;
        else if (strcmp(o, "-o") == 0) out = v;
        else if (strcmp(o, "--seed") == 0) {
            char *end;
            errno = 0;
            p.seed = strtoull(v, &end, 10);
            if (errno || end == v || *end || *v == '-')
                return usage_error(usage_gen, "--seed expects an unsigned integer, got '%s'", v);
        } else if (strcmp(o, "--layers") == 0) {
            if (parse_long(v, 0, INT32_MAX, &x) != 0)
                return usage_error(usage_gen, "--layers expects a count >= 0, got '%s'", v);
            p.n_layer = (int32_t)x;
        } else return usage_error(usage_gen, "unknown option '%s'", o);
    }
    if (!p.preset || !p.recipe || !out)
        return usage_error(usage_gen, "--preset, --type and -o are required");
    lean_error err;
    if (lean_generate_model(&p, out, &err) != LEAN_OK) return lib_error(&err);
    return 0;
}

/* ---- quantize ---- */

static int cmd_quantize(int argc, char **argv) {
    if (argc >= 1 && is_help(argv[0])) return printf("%s", usage_quantize), 0;
    if (argc != 3) return usage_error(usage_quantize, "quantize takes IN OUT TYPE");
    lean_error err;
    if (lean_quantize_file(argv[0], argv[1], argv[2], &err) != LEAN_OK) return lib_error(&err);
    return 0;
}

/* ---- main ---- */

int main(int argc, char **argv) {
    if (argc < 2) return fprintf(stderr, "%s", usage_main), 2;
    const char *cmd = argv[1];
    if (is_help(cmd) || strcmp(cmd, "help") == 0) return printf("%s", usage_main), 0;
    if (strcmp(cmd, "info") == 0) return cmd_info(argc - 2, argv + 2);
    if (strcmp(cmd, "run") == 0) return cmd_run(argc - 2, argv + 2);
    if (strcmp(cmd, "gen") == 0) return cmd_gen(argc - 2, argv + 2);
    if (strcmp(cmd, "quantize") == 0) return cmd_quantize(argc - 2, argv + 2);
    return usage_error(usage_main, "unknown command '%s'", cmd);
}
