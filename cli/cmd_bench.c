/* cmd_bench.c — `lean bench`: how fast lean loads, prefills and decodes a model, and whether
 * its greedy ids stay the same, in the spirit of llama.cpp's llama-bench.
 *
 * For every model x backend x thread count, with r repetitions of each measurement:
 *   load     lean_model_load_file + lean_ctx_create (what a front end waits for before
 *            the first token; the mmap'd weights are paged in later, by the warm-up)
 *   warm-up  one untimed prefill and two generated ids, so page faults and the one-time
 *            set-up of a generation (the GPU's sampler) are not counted below
 *   pp P     cold prefill: P ids into an empty context
 *   pp N @ dD suffix prefill: N new ids after a resident prefix of D ids (prefilled once,
 *            untimed; the context is truncated back to D before each repetition)
 *   tg N     decode: N + 1 greedy ids (the argmax, the lowest id on ties) drawn with lean_gen_*
 *            (N decodes; on the GPU the ids stay there, steps in flight) after a prompt of
 *            BENCH_PROMPT ids; the N + 1 ids (the first from the prompt's logits) are hashed with FNV-1a 64 ("exactness hash"); every repetition must give
 *            the same ids (exit status 1 otherwise), and the hashes of one model are compared
 *            across backends and thread counts (a warning when they differ).
 *   tg N x S aggregate decode (--streams): S sequences made together (lean_ctx_params.n_seq),
 *            each prefilled alone with its own prompt (untimed; stream 0's is tg's), then N + 1 greedy draws each, the N decodes
 *            of every step made together by lean_decode_batch; tokens/s counts all S x N
 *            decoded ids. Stream 0's ids must be tg N's (a sequence's reply does not depend
 *            on the batch) and every repetition's the same (exit status 1 otherwise).
 *   tg N @ dD decode at depth (--depth): N + 1 greedy draws, as tg N, after D ids of context
 *            (prefilled once, untimed: D - 1 of them; before each repetition the context is
 *            truncated back to D - 1 and the last id prefilled, untimed), so every step
 *            attends to D and more positions: the cost of a long context (the original
 *            lean's decode_ctx). Same-ids rule as tg N.
 * The ids are pseudo-random, valid for the model's vocabulary, fixed by --seed (splitmix64;
 * bench_ids below), so runs, backends and machines see the same input.
 *
 * Output: a Markdown table like llama-bench's, one row per measurement (printed as it
 * completes), min and median over the repetitions in ms and tokens/s; then one line per
 * decode row with its hash, the bytes one decoded token reads (weights + KV cache) and,
 * with --bandwidth GBPS (from build/bandwidth), the roofline tokens/s and the fraction
 * reached. --json prints one JSON object per row instead (JSON Lines). A progress line is
 * rewritten on stderr while it runs when stderr is a terminal.
 *
 * Uses only lean.h. Timing is wall-clock (now_ms, CLOCK_MONOTONIC).
 *
 * Sections: usage -> argument lists -> ids and hashes -> statistics -> output (table, JSON)
 * -> the measurements -> cmd_bench.
 */
#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const usage_bench =
    "usage: lean bench -m FILE [-m FILE ...] [-p LIST] [-n LIST] [--suffix LIST] [-r R]\n"
    "                  [-t LIST] [--backend LIST] [--batch N] [--seed S] [--bandwidth GBPS] [--json]\n"
    "                  [--exact] [--profile] [--streams LIST] [--depth LIST]\n"
    "                  [--lora FILE]... [--lora-scaled FILE SCALE]...\n"
    "Times model load, cold prefill, suffix prefill and greedy decode, R times each, for every\n"
    "model x backend x thread count; prints a Markdown table (min and median ms and tokens/s),\n"
    "the exactness hash of the greedy ids and the bytes read per decoded token. LISTs are\n"
    "comma-separated; 0 (or 'none' for --suffix) leaves a phase out.\n"
    "llama-bench's spellings work too: --model, --n-prompt, --n-gen, --threads, -b/--batch-size,\n"
    "--repetitions.\n"
    "  -m FILE          a model (GGUF); repeat for several\n"
    "  -p LIST          cold prefill lengths in tokens (default 128)\n"
    "  -n LIST          decode lengths in tokens, greedy, after an 8-token prompt (default 64)\n"
    "  --suffix LIST    D+N: prefill N tokens after a resident prefix of D (default 128+32)\n"
    "  -r R             repetitions of each measurement (default 3)\n"
    "  -t LIST          thread counts (default: the library's, one per CPU)\n"
    "  --backend LIST   backends: auto, gpu, cpu, cpu-ref, cpu-generic, cpu-avx2, ... (default: the\n"
    "                   library's choice, shown as 'default')\n"
    "  --batch N        prefill chunk in tokens (default: the backend's, 512 gpu, 64 cpu)\n"
    "  --seed S         seed of the pseudo-random ids (default 42)\n"
    "  --bandwidth GBPS streaming-read bandwidth (build/bandwidth) for decode's roofline\n"
    "  --json           one JSON object per row (JSON Lines) instead of the table\n"
    "  --exact          F32 arithmetic throughout (see lean run --help; default: the faster paths)\n"
    "                   for every row; a backend named B+exact (--backend cpu,cpu+exact) is exact\n"
    "                   in its rows alone. Exact rows say 'B (exact)'\n"
    "  --profile        GPU: dispatches and each kernel's GPU time per step, for the last\n"
    "                   repetition of every measurement (profiled runs are slower)\n"
    "  --streams LIST   aggregate decode: S sequences decoded together (lean_decode_batch), -n ids\n"
    "                   each, for each S (e.g. 1,2,4,8,16,32); rows 'tgN xS', tokens/s of them all\n"
    "  --depth LIST     decode at depth: -n ids after D ids of context, for each D (e.g. 128,4096);\n"
    "                   rows 'tgN @ dD' (default none)\n"
    LORA_USAGE
    "                   Every row but load runs with the adapters; rows say 'B +N lora'\n"
    VERBOSITY_USAGE
    "Exit status: 0; 1 for a library error or when repetitions chose different ids; 2 usage.\n";

enum { BENCH_MAX_LIST = 16, BENCH_MAX_MODELS = 16, BENCH_PROMPT = 8, BENCH_MAX_STREAMS = 256 };

/* ---- argument lists ---- */

typedef struct bench_suffix {
    int32_t depth, n; /* N new ids after a resident prefix of D */
} bench_suffix;

typedef struct bench_args {
    const char *models[BENCH_MAX_MODELS];
    int n_models;
    int32_t pp[BENCH_MAX_LIST], tg[BENCH_MAX_LIST], threads[BENCH_MAX_LIST], streams[BENCH_MAX_LIST];
    int32_t depth[BENCH_MAX_LIST]; /* --depth: decode after D ids of context */
    int n_pp, n_tg, n_threads; /* n_threads 0: the library's default only */
    int n_depth;               /* 0: no decode-at-depth rows */
    int n_streams;             /* 0: no aggregate decode rows */
    bench_suffix suffix[BENCH_MAX_LIST];
    int n_suffix;
    const char *backends[BENCH_MAX_LIST];
    int n_backends;            /* 0: the library's default only */
    char backend_buf[256];     /* backends[] point in here */
    int32_t reps, n_batch;
    uint64_t seed;
    double bandwidth_gbps;     /* 0: not given */
    int json, profile, exact;
    lora_flags lora;
    int verbosity;             /* -1 quiet (-q), 0, 1 verbose (-v) */
} bench_args;

/* Usage errors are written to msg (not printed) so tests can read them; cmd_bench prints. */
static int arg_error(char *msg, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int arg_error(char *msg, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, cap, fmt, ap);
    va_end(ap);
    return 2;
}

/* A comma-separated list with no empty item, short enough for the parsers' buffers. */
static bool list_ok(const char *s) {
    size_t n = strlen(s);
    return n > 0 && n < 256 && s[0] != ',' && s[n - 1] != ',' && !strstr(s, ",,");
}

/* "128,512" -> out[]; counts in [lo, hi]. 0, or -1 for a malformed list. */
static int parse_count_list(const char *s, long long lo, long long hi, int32_t *out, int *n) {
    char buf[256];
    if (!list_ok(s)) return -1;
    strcpy(buf, s);
    *n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        long long v;
        if (*n == BENCH_MAX_LIST || parse_long(tok, lo, hi, &v) != 0) return -1;
        out[(*n)++] = (int32_t)v;
    }
    return *n ? 0 : -1;
}

/* Drops zeros from a count list (0 = leave the phase out). */
static void drop_zeros(int32_t *v, int *n) {
    int k = 0;
    for (int i = 0; i < *n; i++)
        if (v[i]) v[k++] = v[i];
    *n = k;
}

static int parse_suffix_list(const char *s, bench_suffix *out, int *n) {
    char buf[256];
    *n = 0;
    if (strcmp(s, "none") == 0 || strcmp(s, "0") == 0) return 0;
    if (!list_ok(s)) return -1;
    strcpy(buf, s);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *plus = strchr(tok, '+');
        long long d, k;
        if (!plus || *n == BENCH_MAX_LIST) return -1;
        *plus = 0;
        if (parse_long(tok, 0, INT32_MAX / 2, &d) != 0 || parse_long(plus + 1, 1, INT32_MAX / 2, &k) != 0) return -1;
        out[(*n)++] = (bench_suffix){(int32_t)d, (int32_t)k};
    }
    return *n ? 0 : -1;
}

/* llama-bench's spellings */
static const flag_alias bench_aliases[] = {
    {"--model", "-m"}, {"--n-prompt", "-p"}, {"--n-gen", "-n"}, {"--threads", "-t"}, {"-b", "--batch"},
    {"--batch-size", "--batch"}, {"--repetitions", "-r"}, {NULL, NULL},
};

/* 0: parsed; -1: help was asked for; otherwise a usage error's exit status (2), msg set. */
static int parse_bench(int argc, char **argv, bench_args *a, char *msg, size_t cap) {
    memset(a, 0, sizeof *a);
    a->pp[0] = 128, a->n_pp = 1;
    a->tg[0] = 64, a->n_tg = 1;
    a->suffix[0] = (bench_suffix){128, 32}, a->n_suffix = 1;
    a->reps = 3;
    a->seed = 42;
    msg[0] = 0;
    for (int i = 0; i < argc; i++) {
        const char *o = flag_name(argv[i], bench_aliases);
        if (is_help(o)) return -1;
        if (parse_verbosity_flag(o, &a->verbosity)) continue;
        if (strcmp(o, "--json") == 0 || strcmp(o, "--profile") == 0 || strcmp(o, "--exact") == 0) {
            *(o[2] == 'j' ? &a->json : o[2] == 'p' ? &a->profile : &a->exact) = 1;
            continue;
        }
        const int lora = parse_lora_flag(argc, argv, &i, &a->lora, msg, cap);
        if (lora >= 0) {
            if (lora > 0) return lora;
            continue;
        }
        if (o[0] != '-') return arg_error(msg, cap, "unexpected argument '%s' (models are given with -m FILE)", o);
        const bool known = strcmp(o, "-m") == 0 || strcmp(o, "-p") == 0 || strcmp(o, "-n") == 0 ||
                           strcmp(o, "--suffix") == 0 || strcmp(o, "-r") == 0 || strcmp(o, "-t") == 0 ||
                           strcmp(o, "--backend") == 0 || strcmp(o, "--batch") == 0 ||
                           strcmp(o, "--seed") == 0 || strcmp(o, "--bandwidth") == 0 || strcmp(o, "--streams") == 0 ||
                           strcmp(o, "--depth") == 0;
        if (!known) return arg_error(msg, cap, "unknown option '%s'", o);
        if (i + 1 >= argc) return arg_error(msg, cap, "'%s' needs a value", o);
        const char *v = argv[++i];
        long long n;
        if (strcmp(o, "-m") == 0) {
            if (a->n_models == BENCH_MAX_MODELS) return arg_error(msg, cap, "at most %d models (-m)", BENCH_MAX_MODELS);
            a->models[a->n_models++] = v;
        } else if (strcmp(o, "-p") == 0) {
            if (parse_count_list(v, 0, INT32_MAX / 2, a->pp, &a->n_pp) != 0)
                return arg_error(msg, cap, "-p expects prompt lengths >= 0, comma-separated (at most %d), got '%s'",
                                 BENCH_MAX_LIST, v);
            drop_zeros(a->pp, &a->n_pp);
        } else if (strcmp(o, "-n") == 0) {
            if (parse_count_list(v, 0, INT32_MAX / 2, a->tg, &a->n_tg) != 0)
                return arg_error(msg, cap, "-n expects decode lengths >= 0, comma-separated (at most %d), got '%s'",
                                 BENCH_MAX_LIST, v);
            drop_zeros(a->tg, &a->n_tg);
        } else if (strcmp(o, "--suffix") == 0) {
            if (parse_suffix_list(v, a->suffix, &a->n_suffix) != 0)
                return arg_error(msg, cap, "--suffix expects D+N (N new tokens after a prefix of D; N >= 1), "
                                 "comma-separated, or 'none', got '%s'", v);
        } else if (strcmp(o, "--depth") == 0) {
            if (parse_count_list(v, 0, INT32_MAX / 2, a->depth, &a->n_depth) != 0)
                return arg_error(msg, cap, "--depth expects context depths >= 0, comma-separated (at most %d), got '%s'",
                                 BENCH_MAX_LIST, v);
            drop_zeros(a->depth, &a->n_depth);
        } else if (strcmp(o, "--streams") == 0) {
            if (parse_count_list(v, 1, BENCH_MAX_STREAMS, a->streams, &a->n_streams) != 0)
                return arg_error(msg, cap, "--streams expects stream counts in [1, %d], comma-separated, got '%s'",
                                 BENCH_MAX_STREAMS, v);
        } else if (strcmp(o, "-t") == 0) {
            if (parse_count_list(v, 1, 1024, a->threads, &a->n_threads) != 0)
                return arg_error(msg, cap, "-t expects thread counts in [1, 1024], comma-separated, got '%s'", v);
        } else if (strcmp(o, "--backend") == 0) {
            if (!list_ok(v))
                return arg_error(msg, cap, "--backend expects backend names, comma-separated, got '%s'", v);
            strcpy(a->backend_buf, v);
            a->n_backends = 0;
            char *save = NULL;
            for (char *tok = strtok_r(a->backend_buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                if (a->n_backends == BENCH_MAX_LIST) return arg_error(msg, cap, "at most %d backends", BENCH_MAX_LIST);
                a->backends[a->n_backends++] = tok;
            }
        } else if (strcmp(o, "-r") == 0) {
            if (parse_long(v, 1, 1000, &n) != 0)
                return arg_error(msg, cap, "-r expects repetitions in [1, 1000], got '%s'", v);
            a->reps = (int32_t)n;
        } else if (strcmp(o, "--batch") == 0) {
            if (parse_long(v, 0, INT32_MAX, &n) != 0)
                return arg_error(msg, cap, "--batch expects a chunk length >= 0, got '%s'", v);
            a->n_batch = (int32_t)n;
        } else if (strcmp(o, "--seed") == 0) {
            char *end;
            errno = 0;
            unsigned long long s = strtoull(v, &end, 10);
            if (errno || end == v || *end || v[0] == '-' || v[0] == '+')
                return arg_error(msg, cap, "--seed expects a whole number in [0, 2^64), got '%s'", v);
            a->seed = s;
        } else { /* --bandwidth */
            char *end;
            errno = 0;
            double g = strtod(v, &end);
            if (errno || end == v || *end || !(g > 0) || g > 1e6)
                return arg_error(msg, cap, "--bandwidth expects GB/s > 0 (as build/bandwidth prints), got '%s'", v);
            a->bandwidth_gbps = g;
        }
    }
    if (a->n_models == 0) return arg_error(msg, cap, "-m FILE is required");
    return 0;
}

/* ---- ids and hashes ---- */

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* The bench's input ids: n ids in [0, n_vocab), the stream'th sequence of seed.
 * Streams: 0 the context of decode at depth, 1 cold prefill, 2 suffix prefill (prefix then
 * suffix), 3 the decode prompt. */
enum { STREAM_DEPTH = 0, STREAM_PP = 1, STREAM_SUFFIX = 2, STREAM_PROMPT = 3, STREAM_BATCH = 4 /* + s - 1: stream s's prompt */ };
static void bench_ids(uint64_t seed, uint64_t stream, int32_t n_vocab, int32_t *out, int32_t n) {
    uint64_t x = seed ^ (stream * 0xD1B54A32D192ED03ull);
    for (int32_t i = 0; i < n; i++) out[i] = (int32_t)(splitmix64(&x) % (uint64_t)n_vocab);
}

/* FNV-1a 64 over the ids' little-endian bytes. */
static uint64_t fnv1a64_ids(const int32_t *ids, int32_t n) {
    uint64_t h = 0xCBF29CE484222325ull;
    for (int32_t i = 0; i < n; i++)
        for (int b = 0; b < 4; b++) {
            h ^= ((uint32_t)ids[i] >> (8 * b)) & 0xFF;
            h *= 0x100000001B3ull;
        }
    return h;
}

/* ---- statistics ---- */

typedef struct bench_stat {
    double min_ms, median_ms;
} bench_stat;

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Min and median of ms[0..n) (n >= 1); scratch holds n doubles. */
static bench_stat stat_of(const double *ms, int n, double *scratch) {
    memcpy(scratch, ms, sizeof *ms * (size_t)n);
    qsort(scratch, (size_t)n, sizeof *scratch, cmp_double);
    bench_stat s = {scratch[0], n % 2 ? scratch[n / 2] : (scratch[n / 2 - 1] + scratch[n / 2]) / 2};
    return s;
}

static double tok_s(int32_t n, double ms) { return ms > 0 ? n / (ms / 1e3) : 0; }

/* ---- output ---- */

/* What one row says. Self-contained but for model and backend (argv strings) and, in
 * decode rows, ids and prompt (owned by whoever filled the row). */
typedef struct bench_row {
    const char *model;    /* the path given */
    char model_name[128]; /* its base name without .gguf */
    char arch[16];
    uint64_t weight_bytes, n_params;
    char backend[80];     /* what ran (backend_label): the name asked for, "default" when none was,
                             with " (exact)" for an exact row */
    int32_t threads;      /* 0: the library's default */
    const char *phase;    /* "load", "prefill", "suffix", "decode", "batch", "depth" */
    char test[48];        /* "load", "pp128", "pp32 @ d128", "tg64", "tg64 x8", "tg64 @ d4096" */
    int32_t n_tokens;     /* tokens the phase processes (0 for load) */
    int32_t depth;        /* tokens resident before it */
    const double *ms;     /* the repetitions' times, in run order */
    int reps;
    bench_stat st;
    /* decode rows only (ids NULL otherwise) */
    const int32_t *prompt, *ids;
    int32_t n_prompt, n_ids;
    uint64_t hash;
    int same_ids;                            /* every repetition chose the same ids */
    int streams;                             /* batch rows: S (ids and hash are stream 0's) */
    int alone_ids;                           /* batch rows: 1 stream 0's ids are tg's, 0 not, -1 unknown */
    double weight_read_bytes, kv_read_bytes; /* per decoded token (see bench_decode) */
} bench_row;

static void threads_str(int32_t threads, char *buf, size_t cap) {
    if (threads) snprintf(buf, cap, "%d", threads);
    else snprintf(buf, cap, "default");
}

static void print_table_header(FILE *out) {
    fprintf(out, "| %-28s | %9s | %8s | %-15s | %7s | %-13s | %10s | %10s | %12s | %12s |\n", "model", "size",
            "params", "backend", "threads", "test", "min ms", "median ms", "t/s median", "t/s best");
    fprintf(out, "| %s | %s: | %s: | %s | %s: | %s | %s: | %s: | %s: | %s: |\n", "----------------------------",
            "--------", "-------", "---------------", "------", "-------------", "---------", "---------",
            "-----------", "-----------");
}

static void print_table_row(FILE *out, const bench_row *r) {
    char size[32], params[32], threads[16], tps_med[32] = "", tps_best[32] = "";
    snprintf(size, sizeof size, "%.1f MiB", (double)r->weight_bytes / (1024.0 * 1024.0));
    if (r->n_params >= 1000000000ull) snprintf(params, sizeof params, "%.2f B", (double)r->n_params / 1e9);
    else snprintf(params, sizeof params, "%.2f M", (double)r->n_params / 1e6);
    threads_str(r->threads, threads, sizeof threads);
    if (r->n_tokens) {
        snprintf(tps_med, sizeof tps_med, "%.2f", tok_s(r->n_tokens, r->st.median_ms));
        snprintf(tps_best, sizeof tps_best, "%.2f", tok_s(r->n_tokens, r->st.min_ms));
    }
    fprintf(out, "| %-28s | %9s | %8s | %-15s | %7s | %-13s | %10.2f | %10.2f | %12s | %12s |\n", r->model_name,
            size, params, r->backend, threads, r->test, r->st.min_ms, r->st.median_ms, tps_med, tps_best);
}

static void json_string(FILE *out, const char *s) {
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(out, "\\%c", *p);
        else if (*p < 0x20) fprintf(out, "\\u%04x", *p);
        else fputc(*p, out);
    }
    fputc('"', out);
}

static void json_ids(FILE *out, const char *key, const int32_t *ids, int32_t n) {
    fprintf(out, ",\"%s\":[", key);
    for (int32_t i = 0; i < n; i++) fprintf(out, "%s%d", i ? "," : "", ids[i]);
    fputc(']', out);
}

/* Tokens/s if every byte a decoded token reads came at gbps. */
static double roofline_tok_s(const bench_row *r, double gbps) {
    return gbps * 1e9 / (r->weight_read_bytes + r->kv_read_bytes);
}

/* One JSON object on one line. Keys: model, model_name, arch, weight_bytes, n_params,
 * backend, threads (0 = default), phase, test, n_tokens, depth, reps, ms (run order),
 * min_ms, median_ms, and when n_tokens > 0 tok_s_median, tok_s_best; decode rows add
 * prompt, ids, hash (FNV-1a 64 of ids, 16 hex digits), same_ids_every_rep, (batch rows: ids and
 * hash of stream 0, streams, same_ids_as_alone: stream 0's ids are tg's, null when no tg row ran),
 * weight_bytes_per_token, kv_bytes_per_token and, with --bandwidth, bandwidth_gbps,
 * roofline_tok_s, roofline_fraction_median. */
static void print_json_row(FILE *out, const bench_row *r, double gbps) {
    fprintf(out, "{\"model\":");
    json_string(out, r->model);
    fprintf(out, ",\"model_name\":");
    json_string(out, r->model_name);
    fprintf(out, ",\"arch\":");
    json_string(out, r->arch);
    fprintf(out, ",\"weight_bytes\":%llu,\"n_params\":%llu,\"backend\":", (unsigned long long)r->weight_bytes,
            (unsigned long long)r->n_params);
    json_string(out, r->backend);
    fprintf(out, ",\"threads\":%d,\"phase\":\"%s\",\"test\":\"%s\",\"n_tokens\":%d,\"depth\":%d,\"reps\":%d,\"ms\":[",
            r->threads, r->phase, r->test, r->n_tokens, r->depth, r->reps);
    for (int i = 0; i < r->reps; i++) fprintf(out, "%s%.4f", i ? "," : "", r->ms[i]);
    fprintf(out, "],\"min_ms\":%.4f,\"median_ms\":%.4f", r->st.min_ms, r->st.median_ms);
    if (r->n_tokens)
        fprintf(out, ",\"tok_s_median\":%.4f,\"tok_s_best\":%.4f", tok_s(r->n_tokens, r->st.median_ms),
                tok_s(r->n_tokens, r->st.min_ms));
    if (r->ids) {
        json_ids(out, "prompt", r->prompt, r->n_prompt);
        json_ids(out, "ids", r->ids, r->n_ids);
        fprintf(out, ",\"hash\":\"%016llx\",\"same_ids_every_rep\":%s", (unsigned long long)r->hash,
                r->same_ids ? "true" : "false");
        if (r->streams)
            fprintf(out, ",\"streams\":%d,\"same_ids_as_alone\":%s", r->streams,
                    r->alone_ids == 1 ? "true" : r->alone_ids == 0 ? "false" : "null");
        fprintf(out, ",\"weight_bytes_per_token\":%.0f,\"kv_bytes_per_token\":%.0f", r->weight_read_bytes,
                r->kv_read_bytes);
        if (gbps > 0) {
            double roof = roofline_tok_s(r, gbps);
            fprintf(out, ",\"bandwidth_gbps\":%.3f,\"roofline_tok_s\":%.4f,\"roofline_fraction_median\":%.4f", gbps,
                    roof, tok_s(r->n_tokens, r->st.median_ms) / roof);
        }
    }
    fprintf(out, "}\n");
}

/* One line under the table for a decode row. */
static void print_decode_note(FILE *out, const bench_row *r, double gbps) {
    const double mib = 1024.0 * 1024.0;
    char threads[16];
    threads_str(r->threads, threads, sizeof threads);
    fprintf(out, "- %s, %s, threads %s, %s: greedy ids fnv1a64 %016llx (%d ids%s, %s%s); reads %.1f MiB a token "
            "(weights %.1f + KV %.2f)",
            r->model_name, r->backend, threads, r->test, (unsigned long long)r->hash, r->n_ids,
            r->streams ? " of stream 0" : "", r->same_ids ? "the same in every repetition" : "DIFFERENT between repetitions",
            !r->streams || r->alone_ids < 0 ? "" : r->alone_ids ? ", those of tg alone" : ", NOT those of tg alone",
            (r->weight_read_bytes + r->kv_read_bytes) / mib, r->weight_read_bytes / mib, r->kv_read_bytes / mib);
    if (gbps > 0) {
        double roof = roofline_tok_s(r, gbps), got = tok_s(r->n_tokens, r->st.median_ms);
        fprintf(out, "; roofline at %.2f GB/s: %.1f tok/s, the median reaches %.1f%% of it", gbps, roof,
                100 * got / roof);
    }
    fprintf(out, "\n");
}

/* ---- the measurements ---- */

typedef struct bench_run {
    const bench_args *a;
    FILE *out;
    bool progress;      /* rewrite a progress line on stderr */
    int step, n_steps;  /* measurements done, in all (for the progress line) */
    bool table_started;
    bench_row *decode;  /* copies of every decode row, ids owned (for the notes) */
    int n_decode, cap_decode;
    char *profiles;     /* --profile: every measurement's profile, printed after the table */
    size_t n_profiles;
    lean_lora *loras[MAX_LORAS]; /* --lora: the adapters of the model being measured */
} bench_run;

static void progress(bench_run *b, const char *model, const char *backend, int32_t threads, const char *test,
                     int rep) {
    if (!b->progress) return;
    char t[16];
    threads_str(threads, t, sizeof t);
    fprintf(stderr, "\r\033[K[%d/%d] %s, %s, threads %s, %s: repetition %d/%d", b->step + 1, b->n_steps, model,
            backend, t, test, rep + 1, b->a->reps);
    fflush(stderr);
}

static void emit(bench_run *b, const bench_row *r) {
    b->step++;
    if (b->progress) fprintf(stderr, "\r\033[K");
    if (b->a->json) {
        print_json_row(b->out, r, b->a->bandwidth_gbps);
    } else {
        if (!b->table_started) print_table_header(b->out), b->table_started = true;
        print_table_row(b->out, r);
    }
    fflush(b->out);
}

/* The backend and the thread count of one combination: "default" and 0 leave the library's
 * choice (lean_ctx_params: backend NULL, n_threads 0 = one thread per CPU). A name ending in
 * "+exact" is that backend with lean_ctx_params.exact (as --exact makes every row), so one run
 * can put both paths side by side; name (at least 64 bytes) gets the name without it. */
static void set_ctx_choice(lean_ctx_params *cp, const char *backend, int32_t threads, char *name) {
    const size_t n = strlen(backend), k = strlen("+exact");
    snprintf(name, 64, "%.*s", (int)(n > k && !strcmp(backend + n - k, "+exact") ? n - k : n), backend);
    if (strcmp(name, backend) != 0) cp->exact = 1;
    cp->backend = strcmp(name, "default") == 0 ? NULL : name;
    cp->n_threads = threads;
}

/* A row's backend: the name asked for (without "+exact"), then " (exact)" for an exact row. */
static void backend_label(const char *name, bool exact, char *out, size_t cap) {
    snprintf(out, cap, "%s%s", name, exact ? " (exact)" : "");
}

/* The model's base file name without ".gguf". */
static void model_name_of(const char *path, char *out, size_t cap) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    snprintf(out, cap, "%s", base);
    size_t n = strlen(out);
    if (n > 5 && strcmp(out + n - 5, ".gguf") == 0) out[n - 5] = 0;
}

/* The context every phase fits in: the longest of them, in tokens. */
static int64_t bench_ctx_len(const bench_args *a) {
    int64_t need = BENCH_PROMPT + 1;
    for (int i = 0; i < a->n_pp; i++) need = a->pp[i] > need ? a->pp[i] : need;
    for (int i = 0; i < a->n_suffix; i++) {
        int64_t s = (int64_t)a->suffix[i].depth + a->suffix[i].n;
        need = s > need ? s : need;
    }
    for (int i = 0; i < a->n_tg; i++) {
        int64_t s = (int64_t)BENCH_PROMPT + a->tg[i];
        need = s > need ? s : need;
        for (int k = 0; k < a->n_depth; k++) {
            const int64_t d = (int64_t)a->depth[k] + a->tg[i];
            need = d > need ? d : need;
        }
    }
    return need;
}

/* Keeps a copy of a decode row for the notes; takes ownership of ids. */
static lean_status keep_decode(bench_run *b, const bench_row *r, int32_t *ids, lean_error *err) {
    if (b->n_decode == b->cap_decode) {
        int cap = b->cap_decode ? 2 * b->cap_decode : 8;
        bench_row *nd = realloc(b->decode, sizeof *nd * (size_t)cap);
        if (!nd) {
            free(ids);
            err->status = LEAN_ERR_NOMEM;
            snprintf(err->msg, sizeof err->msg, "out of memory keeping the decode results");
            return LEAN_ERR_NOMEM;
        }
        b->decode = nd, b->cap_decode = cap;
    }
    bench_row k = *r;
    k.ids = ids, k.prompt = NULL, k.n_prompt = 0, k.ms = NULL;
    b->decode[b->n_decode++] = k;
    return LEAN_OK;
}

/* --profile: forget what the context counted so far (before a measurement's last repetition). */
static void profile_start(const bench_run *b, lean_ctx *c) {
    char none[1];
    if (b->a->profile) lean_ctx_profile(c, 1, none, sizeof none, NULL);
}

/* --profile: keeps the profile of the repetition just run, per step, for bench_notes. */
static void profile_keep(bench_run *b, lean_ctx *c, const bench_row *r, int64_t steps) {
    if (!b->a->profile) return;
    static char text[16384];
    lean_error err = {0};
    if (lean_ctx_profile(c, steps, text, sizeof text, &err) != LEAN_OK) snprintf(text, sizeof text, "%s\n", err.msg);
    char head[256];
    int nh = snprintf(head, sizeof head, "\nprofile: %s, %s, %s (last repetition; per %s)\n", r->model_name,
                      r->backend, r->test, steps > 1 ? "generated id" : "call");
    size_t add = (size_t)(nh > 0 ? nh : 0) + strlen(text);
    char *p = realloc(b->profiles, b->n_profiles + add + 1);
    if (!p) return; /* the profile is a note: out of memory only loses it */
    memcpy(p + b->n_profiles, head, (size_t)(nh > 0 ? nh : 0));
    memcpy(p + b->n_profiles + (size_t)(nh > 0 ? nh : 0), text, strlen(text) + 1);
    b->profiles = p;
    b->n_profiles += add;
}

/* Decode: truncate to keep ids, prefill the n_prompt ids of prompt after them (untimed), then
 * n + 1 timed greedy draws (smp), n of them decoded: gen[0] from the prompt's logits .. gen[n]. */
static lean_status decode_once(lean_ctx *c, lean_sampler *smp, int32_t keep, const int32_t *prompt, int32_t n_prompt,
                               int32_t n, float *logits, int32_t *gen, double *ms, lean_error *err) {
    lean_status st;
    if ((st = lean_ctx_truncate(c, keep, err)) != LEAN_OK ||
        (st = lean_prefill(c, prompt, n_prompt, logits, err)) != LEAN_OK)
        return st;
    double t0 = now_ms();
    st = lean_gen_begin(c, smp, n + 1, err);
    for (int32_t k = 0; st == LEAN_OK && k <= n; k++) st = lean_gen_next(c, &gen[k], err);
    lean_gen_end(c);
    *ms = now_ms() - t0;
    return st;
}

/* One decode row (row->phase and row->test set): R times n + 1 greedy draws after the n_ctx ids
 * of ctx_ids, of which the first keep stay resident (c holds them: depth rows, D - 1; tg rows,
 * none); the rest are prefilled before each repetition, untimed. The ids must not change.
 * Emits the row and keeps it. */
static lean_status bench_decode(bench_run *b, lean_ctx *c, lean_sampler *smp, bench_row *row,
                                const lean_model_info *info, const int32_t *ctx_ids, int32_t n_ctx, int32_t keep,
                                int32_t n, float *logits, double *ms, double *scratch, lean_error *err) {
    const int R = b->a->reps;
    int32_t *gen = malloc(sizeof *gen * ((size_t)n + 1)), *first = malloc(sizeof *first * ((size_t)n + 1));
    lean_status st = LEAN_OK;
    if (!gen || !first) {
        free(gen), free(first);
        err->status = LEAN_ERR_NOMEM;
        snprintf(err->msg, sizeof err->msg, "out of memory for %d decoded ids", n);
        return LEAN_ERR_NOMEM;
    }
    row->n_tokens = n, row->depth = n_ctx;
    row->same_ids = 1;
    for (int r = 0; r < R && st == LEAN_OK; r++) {
        progress(b, row->model_name, row->backend, row->threads, row->test, r);
        if (r == R - 1) profile_start(b, c);
        st = decode_once(c, smp, keep, ctx_ids + keep, n_ctx - keep, n, logits, r ? gen : first, &ms[r], err);
        if (st == LEAN_OK && r && memcmp(first, gen, sizeof *gen * ((size_t)n + 1)) != 0) row->same_ids = 0;
    }
    free(gen);
    if (st != LEAN_OK) {
        free(first);
        return st;
    }
    profile_keep(b, c, row, n + 1);
    row->st = stat_of(ms, R, scratch);
    row->prompt = ctx_ids, row->n_prompt = n_ctx;
    row->ids = first, row->n_ids = n + 1;
    row->hash = fnv1a64_ids(first, n + 1);
    /* Bytes a decoded token reads: every weight once (the output matrix, tied or not,
     * included; an untied model's token_embd is counted whole though one row of it is
     * read, which overstates the bytes by about its size), and the keys and values of
     * every position so far, F32 in lean's cache: for positions n_ctx .. n_ctx + n - 1,
     * on average (n_ctx + (n - 1) / 2 + 1) of them. */
    row->weight_read_bytes = (double)info->weight_bytes;
    row->kv_read_bytes = 2.0 * info->n_layer * info->n_head_kv * info->head_dim * (double)sizeof(float) *
                         (n_ctx + (n - 1) / 2.0 + 1);
    emit(b, row);
    st = keep_decode(b, row, first, err);
    row->ids = row->prompt = NULL;
    return st;
}

/* Aggregate decode (tg N x S): S sequences made like the measured context (cp) and together
 * (n_seq = S: on the GPU their KV caches lie in one page, so a step's pass runs one attention a
 * layer), stream 0 with its prompt, each prefilled alone (untimed), then R times N + 1 greedy
 * draws a stream (a generation each, its own greedy sampler), every step's draws by one
 * lean_gen_next_batch: the N decodes of a step in one pass, the draws resident on the GPU.
 * row: the decode rows' fields; alone: tg N's ids (NULL when that row did not run). */
static lean_status bench_streams(bench_run *b, const lean_model *m, const lean_ctx_params *cp, bench_row *row,
                                 const int32_t *prompt, int32_t n, int S, const int32_t *alone, double *ms,
                                 double *scratch, lean_error *err) {
    const bench_args *a = b->a;
    const int32_t V = lean_model_n_vocab(m);
    const size_t n_ids = (size_t)n + 1;
    lean_ctx **ctx = calloc((size_t)S, sizeof *ctx);
    int32_t *prompts = malloc(sizeof *prompts * (size_t)S * BENCH_PROMPT), *next = malloc(sizeof *next * (size_t)S);
    int32_t *ids = malloc(sizeof *ids * (size_t)S * n_ids), *first = malloc(sizeof *first * (size_t)S * n_ids);
    float *logits = malloc(sizeof *logits * (size_t)S * (size_t)V);
    lean_sampler **smps = calloc((size_t)S, sizeof *smps);
    lean_status st = LEAN_OK;
    if (!ctx || !prompts || !next || !ids || !first || !logits || !smps) {
        err->status = st = LEAN_ERR_NOMEM;
        snprintf(err->msg, sizeof err->msg, "out of memory for %d streams", S);
        goto done;
    }
    row->phase = "batch", row->n_tokens = S * n, row->depth = BENCH_PROMPT, row->streams = S;
    snprintf(row->test, sizeof row->test, "tg%d x%d", n, S);
    progress(b, row->model_name, row->backend, row->threads, row->test, 0);
    memcpy(prompts, prompt, sizeof *prompts * BENCH_PROMPT);
    lean_ctx_params together = *cp;
    together.n_seq = S;
    for (int s = 0; s < S && st == LEAN_OK; s++) {
        if (s) bench_ids(a->seed, STREAM_BATCH + (uint64_t)s - 1, V, prompts + (size_t)s * BENCH_PROMPT, BENCH_PROMPT);
        st = lean_ctx_create(m, &together, &ctx[s], err);
        if (st == LEAN_OK && a->lora.n) st = lean_ctx_set_loras(ctx[s], b->loras, a->lora.scale, a->lora.n, err);
    }
    lean_sampler_params greedy = lean_sampler_default_params();
    greedy.greedy = 1;
    for (int s = 0; s < S && st == LEAN_OK; s++) st = lean_sampler_create(&greedy, V, &smps[s], err);
    row->same_ids = 1;
    for (int r = 0; r < a->reps && st == LEAN_OK; r++) {
        progress(b, row->model_name, row->backend, row->threads, row->test, r);
        for (int s = 0; s < S && st == LEAN_OK; s++) {
            st = lean_ctx_truncate(ctx[s], 0, err);
            if (st == LEAN_OK)
                st = lean_prefill(ctx[s], prompts + (size_t)s * BENCH_PROMPT, BENCH_PROMPT, logits + (size_t)s * V, err);
        }
        int32_t *out = r ? ids : first;
        if (r == a->reps - 1) profile_start(b, ctx[0]);
        const double t0 = now_ms();
        for (int s = 0; s < S && st == LEAN_OK; s++) st = lean_gen_begin(ctx[s], smps[s], n + 1, err);
        for (int32_t k = 0; k <= n && st == LEAN_OK; k++) {
            st = lean_gen_next_batch(ctx, S, next, err);
            for (int s = 0; s < S; s++) out[(size_t)s * n_ids + (size_t)k] = next[s];
        }
        for (int s = 0; s < S; s++) lean_gen_end(ctx[s]);
        ms[r] = now_ms() - t0;
        if (r && memcmp(first, ids, sizeof *ids * (size_t)S * n_ids) != 0) row->same_ids = 0;
    }
    if (st != LEAN_OK) goto done;
    profile_keep(b, ctx[0], row, n + 1); /* ctx[0] drives the batched passes: their dispatches are its */
    row->st = stat_of(ms, a->reps, scratch);
    row->prompt = prompt, row->n_prompt = BENCH_PROMPT;
    row->ids = first, row->n_ids = (int32_t)n_ids;
    row->hash = fnv1a64_ids(first, (int32_t)n_ids);
    row->alone_ids = alone ? memcmp(alone, first, sizeof *first * n_ids) == 0 : -1;
    /* per decoded token: the weights once a step, shared by the S streams; each its own KV */
    row->weight_read_bytes /= S;
    emit(b, row);
    int32_t *kept = malloc(sizeof *kept * n_ids);
    if (kept) memcpy(kept, first, sizeof *kept * n_ids);
    st = kept ? keep_decode(b, row, kept, err) : LEAN_ERR_NOMEM;
    if (!kept) snprintf(err->msg, sizeof err->msg, "out of memory keeping the decode results"), err->status = st;
    row->weight_read_bytes *= S;
done:
    for (int s = 0; ctx && s < S; s++) lean_ctx_free(ctx[s]);
    for (int s = 0; smps && s < S; s++) lean_sampler_free(smps[s]);
    free(smps);
    row->ids = row->prompt = NULL, row->streams = 0, row->alone_ids = -1;
    free(ctx), free(prompts), free(next), free(ids), free(first), free(logits);
    return st;
}

/* Every phase for one model x backend x thread count. */
static lean_status bench_one(bench_run *b, const char *path, const char *backend, int32_t threads, lean_error *err) {
    const bench_args *a = b->a;
    const int R = a->reps;
    lean_model *m = NULL;
    lean_ctx *c = NULL;
    lean_sampler *smp = NULL;
    float *logits = NULL;
    int32_t *ids = NULL;
    double *ms = malloc(sizeof *ms * (size_t)R), *scratch = malloc(sizeof *scratch * (size_t)R);
    lean_status st = LEAN_OK;
    bench_row row = {.model = path, .threads = threads, .reps = R, .alone_ids = -1};
    snprintf(row.backend, sizeof row.backend, "%s", backend);
    model_name_of(path, row.model_name, sizeof row.model_name);
    const char *name = row.model_name;
    if (!ms || !scratch) goto nomem;

    const int64_t n_ctx = bench_ctx_len(a);
    if (n_ctx > INT32_MAX / 2) {
        err->status = st = LEAN_ERR_ARG;
        snprintf(err->msg, sizeof err->msg, "the phases need a context of %lld tokens", (long long)n_ctx);
        goto done;
    }
    lean_ctx_params cp = lean_ctx_default_params();
    cp.n_ctx = (int32_t)n_ctx;
    cp.n_batch = a->n_batch;
    cp.exact = a->exact;
    cp.profile = a->profile;
    char be_name[64];
    set_ctx_choice(&cp, backend, threads, be_name);

    /* load: R times; the last model and context are the ones measured below */
    for (int r = 0; r < R; r++) {
        progress(b, name, backend, threads, "load", r);
        lean_ctx_free(c), c = NULL;
        lean_model_free(m), m = NULL;
        double t0 = now_ms();
        if ((st = lean_model_load_file(path, &m, err)) != LEAN_OK ||
            (st = ctx_create_quietly(m, &cp, a->verbosity, &c, err)) != LEAN_OK)
            goto done;
        ms[r] = now_ms() - t0;
        if (r == 0) {
            if (b->progress) fprintf(stderr, "\r\033[K");
            print_backend(c, a->verbosity);
            backend_label(be_name, cp.exact != 0, row.backend, sizeof row.backend);
            if (a->lora.n) snprintf(row.backend + strlen(row.backend), sizeof row.backend - strlen(row.backend),
                                    " +%d lora", a->lora.n);
        }
    }
    /* --lora: every phase after load with the adapters (loading them is not timed) */
    for (int i = 0; i < a->lora.n; i++)
        if ((st = lean_lora_load_file(m, a->lora.file[i], &b->loras[i], err)) != LEAN_OK) {
            fprintf(stderr, "lean: adapter '%s':\n", a->lora.file[i]); /* err's message follows */
            goto done;
        }
    if (a->lora.n && (st = lean_ctx_set_loras(c, b->loras, a->lora.scale, a->lora.n, err)) != LEAN_OK) goto done;
    lean_model_info info;
    lean_model_get_info(m, &info);
    snprintf(row.arch, sizeof row.arch, "%s", info.arch);
    row.weight_bytes = info.weight_bytes, row.n_params = info.n_params;
    row.phase = "load", row.ms = ms, row.st = stat_of(ms, R, scratch);
    snprintf(row.test, sizeof row.test, "load");
    emit(b, &row);

    const int32_t n_vocab = info.n_vocab;
    logits = malloc(sizeof *logits * (size_t)n_vocab);
    ids = malloc(sizeof *ids * (size_t)n_ctx);
    if (!logits || !ids) goto nomem;
    lean_sampler_params greedy = lean_sampler_default_params();
    greedy.greedy = 1;
    if ((st = lean_sampler_create(&greedy, n_vocab, &smp, err)) != LEAN_OK) goto done;
    int32_t prompt[BENCH_PROMPT];
    bench_ids(a->seed, STREAM_PROMPT, n_vocab, prompt, BENCH_PROMPT);

    /* warm-up, untimed: every weight is read once (page faults of the mapping, caches) */
    progress(b, name, backend, threads, "warm-up", 0);
    double warm_ms;
    int32_t warm_ids[2];
    if ((st = decode_once(c, smp, 0, prompt, BENCH_PROMPT, 1, logits, warm_ids, &warm_ms, err)) != LEAN_OK) goto done;

    /* cold prefill: P ids into an empty context */
    for (int i = 0; i < a->n_pp; i++) {
        const int32_t n = a->pp[i];
        bench_ids(a->seed, STREAM_PP, n_vocab, ids, n);
        row.phase = "prefill", row.n_tokens = n, row.depth = 0;
        snprintf(row.test, sizeof row.test, "pp%d", n);
        for (int r = 0; r < R; r++) {
            progress(b, name, backend, threads, row.test, r);
            if ((st = lean_ctx_truncate(c, 0, err)) != LEAN_OK) goto done;
            if (r == R - 1) profile_start(b, c);
            double t0 = now_ms();
            if ((st = lean_prefill(c, ids, n, logits, err)) != LEAN_OK) goto done;
            ms[r] = now_ms() - t0;
        }
        profile_keep(b, c, &row, 1);
        row.st = stat_of(ms, R, scratch);
        emit(b, &row);
    }

    /* suffix prefill: the prefix of D ids once (untimed), then N ids after it R times */
    for (int i = 0; i < a->n_suffix; i++) {
        const int32_t d = a->suffix[i].depth, n = a->suffix[i].n;
        bench_ids(a->seed, STREAM_SUFFIX, n_vocab, ids, d + n);
        row.phase = "suffix", row.n_tokens = n, row.depth = d;
        snprintf(row.test, sizeof row.test, "pp%d @ d%d", n, d);
        progress(b, name, backend, threads, row.test, 0);
        if ((st = lean_ctx_truncate(c, 0, err)) != LEAN_OK) goto done;
        if (d > 0 && (st = lean_prefill(c, ids, d, NULL, err)) != LEAN_OK) goto done;
        for (int r = 0; r < R; r++) {
            progress(b, name, backend, threads, row.test, r);
            if ((st = lean_ctx_truncate(c, d, err)) != LEAN_OK) goto done;
            double t0 = now_ms();
            if ((st = lean_prefill(c, ids + d, n, logits, err)) != LEAN_OK) goto done;
            ms[r] = now_ms() - t0;
        }
        row.st = stat_of(ms, R, scratch);
        emit(b, &row);
    }

    /* decode: N greedy tokens after the prompt, R times; the ids must not change */
    row.phase = "decode";
    for (int i = 0; i < a->n_tg; i++) {
        snprintf(row.test, sizeof row.test, "tg%d", a->tg[i]);
        if ((st = bench_decode(b, c, smp, &row, &info, prompt, BENCH_PROMPT, 0, a->tg[i], logits, ms, scratch, err)) !=
            LEAN_OK)
            goto done;
    }

    /* aggregate decode: S sequences together, stream 0 held to the tg row's ids */
    const int tg0 = b->n_decode - a->n_tg; /* this combination's tg rows, kept */
    for (int i = 0; i < a->n_tg; i++) {
        const int32_t *alone = NULL;
        for (int j = tg0; j < tg0 + a->n_tg; j++)
            if (b->decode[j].n_tokens == a->tg[i]) alone = b->decode[j].ids;
        for (int k = 0; k < a->n_streams; k++)
            if ((st = bench_streams(b, m, &cp, &row, prompt, a->tg[i], a->streams[k], alone, ms, scratch,
                                    err)) != LEAN_OK)
                goto done;
    }

    /* decode at depth: N greedy tokens after D ids of context (D - 1 prefilled once, untimed) */
    row.phase = "depth";
    for (int k = 0; k < a->n_depth; k++) {
        const int32_t d = a->depth[k];
        bench_ids(a->seed, STREAM_DEPTH, n_vocab, ids, d);
        progress(b, name, backend, threads, "depth", 0);
        if ((st = lean_ctx_truncate(c, 0, err)) != LEAN_OK ||
            (d > 1 && (st = lean_prefill(c, ids, d - 1, NULL, err)) != LEAN_OK))
            goto done;
        for (int i = 0; i < a->n_tg; i++) {
            snprintf(row.test, sizeof row.test, "tg%d @ d%d", a->tg[i], d);
            if ((st = bench_decode(b, c, smp, &row, &info, ids, d, d - 1, a->tg[i], logits, ms, scratch, err)) != LEAN_OK)
                goto done;
        }
    }
    goto done;
nomem:
    err->status = st = LEAN_ERR_NOMEM;
    snprintf(err->msg, sizeof err->msg, "out of memory in lean bench (model %s)", name);
done:
    if (b->progress) fprintf(stderr, "\r\033[K");
    free(ids);
    free(logits);
    free(scratch);
    free(ms);
    lean_sampler_free(smp);
    lean_ctx_free(c);
    for (int i = 0; i < a->lora.n; i++) lean_lora_free(b->loras[i]), b->loras[i] = NULL;
    lean_model_free(m);
    return st;
}

/* The notes under the table, and the exactness verdicts. Returns 1 if some repetitions
 * disagreed (a non-deterministic backend), else 0. */
static int bench_notes(bench_run *b) {
    const bench_args *a = b->a;
    int rc = 0;
    if (!a->json && b->n_decode) {
        fprintf(b->out, "\n");
        for (int i = 0; i < b->n_decode; i++) print_decode_note(b->out, &b->decode[i], a->bandwidth_gbps);
    }
    /* JSON Lines stay JSON: the profiles go to stderr then */
    if (b->profiles) fputs(b->profiles, a->json ? stderr : b->out);
    for (int i = 0; i < b->n_decode; i++) {
        const bench_row *r = &b->decode[i];
        char t[16];
        threads_str(r->threads, t, sizeof t);
        if (!r->same_ids) {
            fprintf(stderr, "lean: %s, %s, threads %s, %s: the greedy ids differ between repetitions\n",
                    r->model_name, r->backend, t, r->test);
            rc = 1;
        }
        if (r->streams && r->alone_ids == 0) {
            fprintf(stderr, "lean: %s, %s, threads %s, %s: stream 0's greedy ids are not those decoded alone\n",
                    r->model_name, r->backend, t, r->test);
            rc = 1;
        }
        /* The first earlier row of the same model, backend and length that disagrees: one
         * backend gives the same bits at every thread count (lean.h). Backends may differ
         * (the CPU kernels' 8-bit activations against the reference's F32): a note only. */
        for (int j = 0; j < i; j++) {
            const bench_row *q = &b->decode[j];
            if (strcmp(q->model, r->model) != 0 || strcmp(q->test, r->test) != 0 || q->hash == r->hash)
                continue;
            const bool same_backend = strcmp(q->backend, r->backend) == 0;
            char tq[16];
            threads_str(q->threads, tq, sizeof tq);
            fprintf(stderr, "lean: %s: %s %s: greedy ids differ between %s threads %s (%016llx) and %s threads %s "
                    "(%016llx)%s\n",
                    same_backend ? "warning" : "note", r->model_name, r->test, q->backend, tq,
                    (unsigned long long)q->hash, r->backend, t, (unsigned long long)r->hash,
                    same_backend ? ": one backend should give the same ids at every thread count" : "");
            break;
        }
    }
    return rc;
}

/* The whole command, writing to out: 0, 1 (a library error, or repetitions that chose
 * different ids) or 2 (usage). */
static int bench_main(int argc, char **argv, FILE *out) {
    bench_args a;
    char msg[512];
    int rc = parse_bench(argc, argv, &a, msg, sizeof msg);
    if (rc < 0) return printf("%s", usage_bench), 0;
    if (rc) return usage_error(usage_bench, "%s", msg);

    static const char *const default_backend[] = {"default"};
    static const int32_t default_threads[] = {0};
    const char *const *backends = a.n_backends ? a.backends : default_backend;
    const int32_t *threads = a.n_threads ? a.threads : default_threads;
    const int n_backends = a.n_backends ? a.n_backends : 1, n_threads = a.n_threads ? a.n_threads : 1;

    bench_run b = {.a = &a, .out = out, .progress = isatty(2) != 0};
    b.n_steps = a.n_models * n_backends * n_threads * (1 + a.n_pp + a.n_suffix + a.n_tg * (1 + a.n_streams + a.n_depth));
    lean_error err = {0};
    rc = 0;
    for (int im = 0; im < a.n_models && !rc; im++)
        for (int ib = 0; ib < n_backends && !rc; ib++)
            for (int it = 0; it < n_threads && !rc; it++)
                if (bench_one(&b, a.models[im], backends[ib], threads[it], &err) != LEAN_OK) rc = lib_error(&err);
    if (!rc) rc = bench_notes(&b);
    for (int i = 0; i < b.n_decode; i++) free((void *)b.decode[i].ids);
    free(b.decode);
    free(b.profiles);
    return rc;
}

int cmd_bench(int argc, char **argv) { return bench_main(argc, argv, stdout); }
