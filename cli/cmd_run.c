/* cmd_run.c — `lean run`: generation from token ids through the sampler, with speeds on stderr.
 *
 * Argument parsing is one loop: --help, then the sampling flags (shared with
 * `lean chat`: cli.c's parse_sampling_flag), then flags with a value. A new flag is one more
 * branch in parse_run and one more line in usage_run. */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const usage_run =
    "usage: lean run -m FILE --ids ID,ID,... [-n N] [--ctx N] [--batch N] [sampling flags]\n"
    "Prefills the ids, then generates N more (default 16): greedily (the argmax, the lowest\n"
    "id on ties) unless --temp T > 0 is given, then drawn by the sampler with the flags\n"
    "below (their defaults are llama.cpp's). Prints the generated ids on\n"
    "stdout, space-separated, and the sampling settings with the seed, the prefill and the\n"
    "decode speeds on stderr. A run with a given --seed prints the same ids every time.\n"
    "  -m FILE      the model (GGUF)\n"
    "  --ids LIST   prompt token ids, comma-separated\n"
    "  -n N         tokens to generate (default 16)\n"
    "  --ctx N      context length in tokens (default: the model's, at most 4096)\n"
    "  --batch N    prefill chunk in tokens (default 64)\n"
    SAMPLING_USAGE;

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

typedef struct run_args {
    const char *model, *ids;
    long long n_gen, n_ctx, n_batch;
    lean_sampler_params sampling;
} run_args;

/* 0: parsed; -1: help was printed (exit 0); otherwise the exit status of a usage error. */
static int parse_run(int argc, char **argv, run_args *a) {
    *a = (run_args){.n_gen = 16, .sampling = lean_sampler_default_params()};
    a->sampling.temperature = 0; /* `run` is greedy unless asked: reproducible ids by default */
    for (int i = 0; i < argc; i++) {
        const char *o = argv[i];
        if (is_help(o)) return printf("%s", usage_run), -1;
        int rc = parse_sampling_flag(usage_run, argc, argv, &i, &a->sampling);
        if (rc == 0) continue;
        if (rc > 0) return rc;
        /* flags with a value */
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

int cmd_run(int argc, char **argv) {
    run_args a;
    int rc = parse_run(argc, argv, &a);
    if (rc) return rc < 0 ? 0 : rc;
    int32_t *ids = NULL, n_ids = 0;
    if (parse_ids(a.ids, &ids, &n_ids) != 0)
        return usage_error(usage_run, "--ids expects comma-separated ids >= 0, got '%s'", a.ids);

    lean_error err;
    lean_model *m = NULL;
    lean_ctx *c = NULL;
    lean_sampler *smp = NULL;
    float *logits = NULL;
    rc = 1;
    if (lean_model_load_file(a.model, &m, &err) != LEAN_OK) goto fail;
    lean_ctx_params cp = lean_ctx_default_params();
    cp.n_ctx = (int32_t)a.n_ctx;
    cp.n_batch = (int32_t)a.n_batch;
    if (lean_ctx_create(m, &cp, &c, &err) != LEAN_OK) goto fail;
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
    /* The first token comes from the prefill's logits; each later one needs a decode. */
    for (long long i = 0; i < a.n_gen; i++) {
        int32_t next;
        /* The draw is keyed by the position the token will occupy: the same on every backend. */
        if (lean_sampler_sample(smp, logits, lean_ctx_pos(c), NULL, &next, &err) != LEAN_OK ||
            lean_sampler_accept(smp, &next, 1, &err) != LEAN_OK) {
            printf("\n");
            goto fail;
        }
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
    lean_sampler_free(smp);
    lean_ctx_free(c);
    lean_model_free(m);
    return rc;
}
