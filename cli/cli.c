/* cli.c — helpers shared by the `lean` commands (see cli.h). */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int usage_error(const char *usage, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "lean: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n\n%s", usage);
    va_end(ap);
    return 2;
}

int lib_error(const lean_error *err) {
    fprintf(stderr, "lean: %s: %s\n", lean_status_str(err->status), err->msg);
    return 1;
}

int is_help(const char *a) { return strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0; }

int parse_long(const char *s, long long lo, long long hi, long long *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* ---- llama.cpp's spellings ---- */

const char *flag_name(const char *o, const flag_alias *table) {
    for (const flag_alias *a = table; a->alias; a++)
        if (strcmp(o, a->alias) == 0) return a->flag;
    return o;
}

/* ---- what stderr shows ---- */

int parse_verbosity_flag(const char *o, int *verbosity) {
    if (strcmp(o, "-q") == 0 || strcmp(o, "--quiet") == 0) return *verbosity = -1, 1;
    if (strcmp(o, "-v") == 0 || strcmp(o, "--verbose") == 0) return *verbosity = 1, 1;
    return 0;
}

/* fd 2 to /dev/null; the saved fd to give stderr_restore, or -1 (nothing changed). WASI has
 * no dup, and no WebGPU library that prints. */
static int stderr_mute(const char *backend, int verbosity) {
#if defined(__wasi__)
    (void)backend, (void)verbosity;
    return -1;
#else
    if (verbosity > 0 || (backend && strcmp(backend, "gpu") == 0)) return -1;
    fflush(stderr);
    int saved = dup(STDERR_FILENO), null = open("/dev/null", O_WRONLY);
    if (saved < 0 || null < 0 || dup2(null, STDERR_FILENO) < 0) {
        if (saved >= 0) close(saved);
        saved = -1;
    }
    if (null >= 0) close(null);
    return saved;
#endif
}

static void stderr_restore(int saved) {
#if !defined(__wasi__)
    if (saved < 0) return;
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
#else
    (void)saved;
#endif
}

/* Around a context's creation: fd 2 muted (stderr_mute), and a bar for the weights' upload
 * drawn where people see it, the real stderr. */
typedef struct quiet {
    int saved;
    progress_bar bar;
} quiet;

static void quiet_begin(quiet *q, const char *backend, int verbosity) {
    progress_begin(&q->bar, "uploading"); /* before the mute: is the real stderr a terminal */
    q->saved = stderr_mute(backend, verbosity);
    if (q->saved >= 0) q->bar.fd = q->saved;
}

static void quiet_end(quiet *q) {
    progress_draw(&q->bar, 1, 1); /* a failure leaves the bar short of its end: clear it */
    stderr_restore(q->saved);
}

lean_status ctx_create_quietly(const lean_model *m, const lean_ctx_params *p, int verbosity, lean_ctx **out,
                               lean_error *err) {
    quiet q;
    quiet_begin(&q, p->backend, verbosity);
    lean_ctx_params cp = *p;
    cp.progress = progress_draw, cp.progress_user = &q.bar;
    lean_status st = lean_ctx_create(m, &cp, out, err);
    quiet_end(&q);
    return st;
}

lean_status chat_session_create_quietly(const lean_model *m, const lean_chat_session_params *p, int verbosity,
                                        lean_chat_session **out, lean_error *err) {
    quiet q;
    quiet_begin(&q, p->backend, verbosity);
    lean_chat_session_params sp = *p;
    sp.progress = progress_draw, sp.progress_user = &q.bar;
    lean_status st = lean_chat_session_create(m, &sp, out, err);
    quiet_end(&q);
    return st;
}

void print_backend(const lean_ctx *c, int verbosity) {
    char text[256];
    if (verbosity >= 0) fprintf(stderr, "lean: backend %s\n", lean_ctx_backend_str(c, text, sizeof text));
    /* on a machine without a GPU every run passes it over: why, only when asked (-v) */
    if (verbosity >= 1 && lean_ctx_fallback(c)) fprintf(stderr, "lean: gpu passed over: %s\n", lean_ctx_fallback(c));
}

/* ---- a progress bar ---- */

void progress_begin(progress_bar *b, const char *label) {
    *b = (progress_bar){.label = label, .t0_ms = now_ms(), .fd = STDERR_FILENO, .tty = isatty(STDERR_FILENO),
                        .percent = -1};
}

/* Straight to the fd (dprintf): stderr's FILE is unbuffered, and muted it is not the terminal. */
void progress_draw(void *user, uint64_t done, uint64_t total) {
    progress_bar *b = user;
    if (!b->tty) return;
    if (done >= total) {
        if (b->percent >= 0) dprintf(b->fd, "\r\033[K");
        b->percent = -1;
        return;
    }
    if (now_ms() - b->t0_ms < 250) return;
    const int pct = (int)(100.0 * (double)done / (double)total), width = 30, fill = pct * width / 100;
    if (pct == b->percent) return;
    b->percent = pct;
    dprintf(b->fd, "\r\033[K%s [%.*s%*s] %3d%%", b->label, fill, "==============================", width - fill, "",
            pct);
}

lean_status load_model(const char *path, lean_model **out, lean_error *err) {
    progress_bar bar;
    progress_begin(&bar, "loading");
    const lean_model_params p = {.progress = progress_draw, .progress_user = &bar};
    lean_status st = lean_model_load_file_params(path, &p, out, err);
    progress_draw(&bar, 1, 1); /* a failure leaves the bar short of its end: clear it */
    return st;
}

/* ---- sampling flags ---- */

/* A whole decimal number (strtod syntax, finite); 0 on success. */
static int parse_double(const char *s, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || v != v) return -1;
    *out = v;
    return 0;
}

/* --logit-bias ID+B / ID-B (llama.cpp's): one more entry of the process's one list (a command
 * parses one set of sampling flags). */
static int parse_logit_bias(const char *usage, const char *v, lean_sampler_params *p) {
    static lean_logit_bias list[CLI_MAX_LOGIT_BIAS];
    char *end;
    errno = 0;
    const long long id = strtoll(v, &end, 10);
    double b;
    if (errno || end == v || v[0] == '-' || v[0] == '+' || (*end != '+' && *end != '-') || end[1] == '+' ||
        end[1] == '-' || parse_double(end + 1, &b) != 0 || id > INT32_MAX)
        return usage_error(usage, "--logit-bias expects TOKEN_ID+BIAS or TOKEN_ID-BIAS (e.g. 15043+1), got '%s'", v);
    if (*end == '-') b = -b;
    if (!(b >= -100 && b <= 100))
        return usage_error(usage, "--logit-bias %s: the bias %g must be in [-100, 100]", v, b);
    if (p->n_logit_bias >= CLI_MAX_LOGIT_BIAS)
        return usage_error(usage, "--logit-bias: at most %d of them", CLI_MAX_LOGIT_BIAS);
    for (int32_t k = 0; k < p->n_logit_bias; k++)
        if (p->logit_bias[k].id == id) return usage_error(usage, "--logit-bias: token id %lld is given twice", id);
    list[p->n_logit_bias] = (lean_logit_bias){(int32_t)id, (float)b};
    p->logit_bias = list;
    p->n_logit_bias++;
    return 0;
}

int parse_sampling_flag(const char *usage, int argc, char **argv, int *i, lean_sampler_params *p) {
    const char *o = argv[*i];
    if (strcmp(o, "--greedy") == 0) {
        p->greedy = 1;
        return 0;
    }
    if (strcmp(o, "--logit-bias") == 0) {
        if (*i + 1 >= argc) return usage_error(usage, "'%s' needs a value", o);
        return parse_logit_bias(usage, argv[++*i], p);
    }
    const bool is_seed = strcmp(o, "--seed") == 0 || strcmp(o, "-s") == 0;
    double *real = strcmp(o, "--temp") == 0             ? &p->temperature
                   : strcmp(o, "--top-p") == 0          ? &p->top_p
                   : strcmp(o, "--repeat-penalty") == 0 ? &p->repeat_penalty : NULL;
    int32_t *count = strcmp(o, "--top-k") == 0           ? &p->top_k
                     : strcmp(o, "--repeat-last-n") == 0 ? &p->repeat_last_n : NULL;
    if (!is_seed && !real && !count) return -1;
    if (*i + 1 >= argc) return usage_error(usage, "'%s' needs a value", o);
    const char *v = argv[++*i];
    long long n;
    if (is_seed) {
        char *end;
        errno = 0;
        unsigned long long x = strtoull(v, &end, 10);
        if (strcmp(v, "-1") == 0) p->seed = LEAN_SEED_RANDOM;
        else if (errno || end == v || *end || v[0] == '-' || v[0] == '+' || x == UINT64_MAX)
            return usage_error(usage, "%s expects -1 or a whole number in [0, 2^64 - 1), got '%s'", o, v);
        else p->seed = x;
        return 0;
    }
    if (real && parse_double(v, real) != 0) return usage_error(usage, "%s expects a number, got '%s'", o, v);
    if (count) {
        if (parse_long(v, INT32_MIN, INT32_MAX, &n) != 0)
            return usage_error(usage, "%s expects a whole number, got '%s'", o, v);
        *count = (int32_t)n;
    }
    lean_error err;
    if (lean_sampler_params_check(p, &err) != LEAN_OK) return usage_error(usage, "%s %s: %s", o, v, err.msg);
    return 0;
}

void print_sampling(const lean_sampler_params *p, uint64_t seed) {
    if (p->greedy || p->temperature == 0) {
        fprintf(stderr, "sampling: greedy, repeat-penalty %g (last %d)%s\n", p->repeat_penalty, p->repeat_last_n,
                p->n_logit_bias ? ", logit bias" : "");
        return;
    }
    fprintf(stderr, "sampling: seed %llu, temp %g, top-k %d, top-p %g, repeat-penalty %g (last %d)%s\n",
            (unsigned long long)seed, p->temperature, p->top_k, p->top_p, p->repeat_penalty, p->repeat_last_n,
            p->n_logit_bias ? ", logit bias" : "");
}

/* ---- input ---- */

char *read_all(FILE *f, size_t *len) {
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    int why = ENOMEM;
    /* the buffer grows to CLI_MAX_INPUT_BYTES + 2: one byte past the limit says "too big" */
    for (size_t k; buf && (k = fread(buf + n, 1, cap - n - 1, f)) > 0;) {
        n += k;
        if (n > CLI_MAX_INPUT_BYTES) {
            why = EFBIG;
            free(buf), buf = NULL;
        } else if (cap - n < 2) {
            const size_t grown = cap * 2 > CLI_MAX_INPUT_BYTES + 2 ? CLI_MAX_INPUT_BYTES + 2 : cap * 2;
            char *nb = realloc(buf, grown);
            if (!nb) free(buf);
            buf = nb;
            cap = grown;
        }
    }
    if (buf && ferror(f)) why = errno ? errno : EIO, free(buf), buf = NULL;
    if (!buf) {
        errno = why;
        return NULL;
    }
    buf[n] = 0;
    if (len) *len = n;
    return buf;
}

char *read_path(const char *path, size_t *len) {
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!f) return NULL;
    char *buf = read_all(f, len);
    const int why = errno;
    if (f != stdin) fclose(f);
    errno = why;
    return buf;
}

void input_error_text(char *out, size_t cap, const char *what, const char *path) {
    const char *from = strcmp(path, "-") == 0 ? "stdin" : path;
    if (errno == EFBIG)
        snprintf(out, cap, "lean: %s in %s is larger than %u MiB, the most lean reads (CLI_MAX_INPUT_BYTES)", what,
                 from, CLI_MAX_INPUT_BYTES >> 20);
    else
        snprintf(out, cap, "lean: cannot read %s from %s: %s", what, from, strerror(errno));
}

int input_error(const char *what, const char *path) {
    char msg[600];
    input_error_text(msg, sizeof msg, what, path);
    fprintf(stderr, "%s\n", msg);
    return 1;
}

int parse_grammar_flag(const char *usage, int argc, char **argv, int *i, grammar_flags *f) {
    const char *o = argv[*i];
    const char **slot = strcmp(o, "--grammar") == 0            ? &f->grammar
                        : strcmp(o, "--grammar-file") == 0     ? &f->grammar_file
                        : strcmp(o, "--json-schema") == 0      ? &f->schema
                        : strcmp(o, "--json-schema-file") == 0 ? &f->schema_file : NULL;
    if (!slot) return -1;
    if (*i + 1 >= argc) return usage_error(usage, "'%s' needs a value", o);
    if (f->grammar || f->grammar_file || f->schema || f->schema_file)
        return usage_error(usage, "give one of --grammar, --grammar-file, --json-schema, --json-schema-file");
    *slot = argv[++*i];
    return 0;
}

int grammar_from_flags(const grammar_flags *f, const lean_tokenizer *tok, lean_grammar **g) {
    lean_error err;
    *g = NULL;
    const char *path = f->grammar_file ? f->grammar_file : f->schema_file;
    const int is_schema = f->schema || f->schema_file;
    char *text = NULL;
    size_t len = 0;
    if (path) {
        if (!(text = read_path(path, &len))) return input_error(is_schema ? "the JSON schema" : "the grammar", path);
    } else if (f->grammar || f->schema) {
        const char *v = f->grammar ? f->grammar : f->schema;
        len = strlen(v);
        if (!(text = malloc(len + 1))) return fprintf(stderr, "lean: out of memory\n"), 1;
        memcpy(text, v, len + 1);
    } else {
        return 0;
    }
    if (!tok) {
        free(text);
        return fprintf(stderr, "lean: a grammar needs the model's tokenizer, and the model has none\n"), 1;
    }
    char *gbnf = NULL;
    lean_status st = LEAN_OK;
    if (is_schema) st = lean_json_schema_to_gbnf(text, len, &gbnf, &err);
    if (st == LEAN_OK) st = lean_grammar_create(gbnf ? gbnf : text, gbnf ? strlen(gbnf) : len, NULL, tok, g, &err);
    lean_grammar_text_free(gbnf);
    free(text);
    return st == LEAN_OK ? 0 : lib_error(&err);
}

/* A LoRA scale: a finite number of at most 1e6 in size; 0 on success. */
static int parse_scale(const char *s, float *out) {
    char *end;
    errno = 0;
    const double x = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(x) || fabs(x) > 1e6) return -1;
    *out = (float)x;
    return 0;
}

int parse_lora_flag(int argc, char **argv, int *i, lora_flags *f, char *msg, size_t cap) {
    const char *o = argv[*i];
    if (strcmp(o, "--lora") != 0 && strcmp(o, "--lora-scaled") != 0) return -1;
    const int scaled = o[6] == '-';
    if (*i + 1 >= argc) return snprintf(msg, cap, "'%s' needs %s", o, scaled ? "FILE SCALE" : "FILE"), 2;
    if (f->n == MAX_LORAS) return snprintf(msg, cap, "more than %d adapters", MAX_LORAS), 2;
    char *file = argv[++*i], *colon = strrchr(file, ':');
    if (scaled && *i + 1 < argc && parse_scale(argv[*i + 1], &f->scale[f->n]) == 0) {
        ++*i; /* FILE SCALE (older llama.cpp) */
    } else if (scaled) { /* FILE:SCALE (llama.cpp today) */
        if (!colon || parse_scale(colon + 1, &f->scale[f->n]) != 0)
            return snprintf(msg, cap, "--lora-scaled expects FILE SCALE or FILE:SCALE, got '%s%s%s'", file,
                            *i + 1 < argc ? " " : "", *i + 1 < argc ? argv[*i + 1] : ""),
                   2;
        *colon = 0;
    } else {
        f->scale[f->n] = 1.0f;
    }
    f->file[f->n++] = file;
    return 0;
}

int loras_load(const lora_flags *f, const lean_model *m, lean_lora **loras) {
    lean_error err;
    for (int i = 0; i < f->n; i++)
        if (lean_lora_load_file(m, f->file[i], &loras[i], &err) != LEAN_OK)
            return fprintf(stderr, "lean: %s: adapter '%s': %s\n", lean_status_str(err.status), f->file[i], err.msg), 1;
    return 0;
}
