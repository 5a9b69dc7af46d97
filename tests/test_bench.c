/* test_bench.c — `lean bench` (cli/cmd_bench.c) without timing: nothing here asserts a speed.
 *
 * The command's file is compiled into this program (with cli/cli.c, the helpers it uses), so
 * its static functions are reachable:
 *   - arguments: every bad one is refused with exit status 2 and a message naming it; good
 *     lists parse to the right values (0 leaves a phase out)
 *   - the pieces: bench_ids (in range, fixed by seed and stream), fnv1a64_ids (against a
 *     byte-wise FNV-1a written here, itself checked on the published test vector)
 *   - a whole run on a generated tiny model: --json gives one well-formed JSON object per
 *     row (checked by a small JSON parser below), the rows expected, and a decode hash equal
 *     to the one computed here from greedy ids produced independently through lean.h; the
 *     table output has its header, rows and the hash; one backend's hash is the same at 1
 *     and 2 threads (lean.h's promise), for cpu and cpu-ref; a row names the backend asked
 *     for, with " (exact)" after it for an exact row (--exact, or a name ending in "+exact"),
 *     and the exact CPU kernels' ids are the reference's on this model; an unknown backend or
 *     a missing model is exit status 1; --streams gives aggregate decode rows (lean_decode_batch)
 *     whose stream 0 has the decode row's ids, on cpu, cpu-ref and, natively, the GPU; --depth
 *     gives decode-at-depth rows whose ids are the greedy ids after the D context ids (stream 0
 *     of the seed), computed here, on cpu and cpu-ref.
 */
#include "dev/lean_dev.h"
#include "test.h"

#include "../cli/cli.c"
#include "../cli/cmd_bench.c"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---------------------------------------------------------------- helpers */

/* parse_bench on a NULL-terminated list of arguments. */
static int parse(bench_args *a, char *msg, size_t cap, const char *const *args) {
    int argc = 0;
    while (args[argc]) argc++;
    return parse_bench(argc, (char **)args, a, msg, cap);
}

/* Byte-wise FNV-1a 64, this test's own. */
static uint64_t fnv_bytes(const unsigned char *p, size_t n) {
    uint64_t h = 0xCBF29CE484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001B3ull;
    return h;
}

static char *slurp_text(const char *path) {
    size_t n;
    return (char *)test_read_file(path, &n);
}

/* ---- a small JSON parser: is the text one well-formed value? (RFC 8259 syntax) ---- */

static const char *json_ws(const char *p) {
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
    return p;
}
static const char *json_value(const char *p, int depth);
static const char *json_str(const char *p) {
    if (*p++ != '"') return NULL;
    while (*p != '"') {
        if ((unsigned char)*p < 0x20) return NULL;
        if (*p == '\\') {
            p++;
            if (*p == 'u') {
                for (int i = 1; i <= 4; i++)
                    if (!isxdigit((unsigned char)p[i])) return NULL;
                p += 4;
            } else if (!strchr("\"\\/bfnrt", *p) || !*p) {
                return NULL;
            }
        }
        p++;
    }
    return p + 1;
}
static const char *json_num(const char *p) {
    if (*p == '-') p++;
    if (*p == '0') p++;
    else if (isdigit((unsigned char)*p)) while (isdigit((unsigned char)*p)) p++;
    else return NULL;
    if (*p == '.') {
        if (!isdigit((unsigned char)*++p)) return NULL;
        while (isdigit((unsigned char)*p)) p++;
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-') p++;
        if (!isdigit((unsigned char)*p)) return NULL;
        while (isdigit((unsigned char)*p)) p++;
    }
    return p;
}
static const char *json_value(const char *p, int depth) {
    if (depth > 32) return NULL;
    p = json_ws(p);
    if (*p == '{' || *p == '[') {
        const char close = *p == '{' ? '}' : ']';
        const int obj = *p == '{';
        p = json_ws(p + 1);
        if (*p == close) return p + 1;
        for (;;) {
            if (obj) {
                if (!(p = json_str(json_ws(p)))) return NULL;
                p = json_ws(p);
                if (*p++ != ':') return NULL;
            }
            if (!(p = json_value(p, depth + 1))) return NULL;
            p = json_ws(p);
            if (*p == close) return p + 1;
            if (*p++ != ',') return NULL;
        }
    }
    if (*p == '"') return json_str(p);
    if (strncmp(p, "true", 4) == 0) return p + 4;
    if (strncmp(p, "false", 5) == 0) return p + 5;
    if (strncmp(p, "null", 4) == 0) return p + 4;
    return json_num(p);
}
static int json_ok(const char *line) {
    const char *end = json_value(line, 0);
    return end && *json_ws(end) == 0;
}

/* The ids of key ("ids", "prompt") in a JSON line: count returned, at most cap stored. */
static int json_id_list(const char *line, const char *key, int32_t *out, int cap) {
    char pat[32];
    snprintf(pat, sizeof pat, "\"%s\":[", key);
    const char *p = strstr(line, pat);
    if (!p) return -1;
    p += strlen(pat);
    int n = 0;
    while (*p && *p != ']') {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p) return -1;
        if (n < cap) out[n] = (int32_t)v;
        n++;
        p = *end == ',' ? end + 1 : end;
    }
    return n;
}

/* ---------------------------------------------------------------- tests */

static void test_arguments(void) {
    bench_args a;
    char msg[512];
    const struct {
        const char *args[8];
        const char *says; /* the message contains this */
    } bad[] = {
        {{NULL}, "-m FILE is required"},
        {{"-p", "16"}, "-m FILE is required"},
        {{"-m", "x", "-p", "abc"}, "-p expects"},
        {{"-m", "x", "-p", "16,,32"}, "-p expects"},
        {{"-m", "x", "-p", "-4"}, "-p expects"},
        {{"-m", "x", "-n", "1x"}, "-n expects"},
        {{"-m", "x", "-r", "0"}, "-r expects repetitions in [1, 1000], got '0'"},
        {{"-m", "x", "--suffix", "5"}, "--suffix expects D+N"},
        {{"-m", "x", "--suffix", "8+0"}, "--suffix expects D+N"},
        {{"-m", "x", "--suffix", "8+2,x"}, "--suffix expects D+N"},
        {{"-m", "x", "-t", "0"}, "-t expects thread counts"},
        {{"-m", "x", "--backend", ",cpu"}, "--backend expects"},
        {{"-m", "x", "--backend", "cpu,"}, "--backend expects"},
        {{"-m", "x", "--bandwidth", "-3"}, "--bandwidth expects"},
        {{"-m", "x", "--bandwidth", "fast"}, "--bandwidth expects"},
        {{"-m", "x", "--seed", "-1"}, "--seed expects"},
        {{"-m", "x", "--streams", "0"}, "--streams expects stream counts in [1, 256]"},
        {{"-m", "x", "--streams", "4,257"}, "--streams expects"},
        {{"-m", "x", "--depth", "-1"}, "--depth expects context depths"},
        {{"-m", "x", "--depth", "64,"}, "--depth expects"},
        {{"-m", "x", "--bogus", "1"}, "unknown option '--bogus'"},
        {{"-m", "x", "-n"}, "'-n' needs a value"},
        {{"model.gguf"}, "unexpected argument 'model.gguf'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = parse(&a, msg, sizeof msg, bad[i].args);
        CHECK(rc == 2, "case %zu: rc %d", i, rc);
        CHECK(strstr(msg, bad[i].says) != NULL, "case %zu: message '%s' lacks '%s'", i, msg, bad[i].says);
    }

    const char *help[] = {"-m", "x", "--help", NULL};
    CHECK(parse(&a, msg, sizeof msg, help) == -1, "--help");

    const char *defaults[] = {"-m", "a.gguf", NULL};
    CHECK(parse(&a, msg, sizeof msg, defaults) == 0, "defaults: %s", msg);
    CHECK(a.n_models == 1 && strcmp(a.models[0], "a.gguf") == 0, "model");
    CHECK(a.n_pp == 1 && a.pp[0] == 128 && a.n_tg == 1 && a.tg[0] == 64, "default -p/-n");
    CHECK(a.n_suffix == 1 && a.suffix[0].depth == 128 && a.suffix[0].n == 32, "default --suffix");
    CHECK(a.reps == 3 && a.seed == 42 && a.n_threads == 0 && a.n_backends == 0 && !a.json, "defaults");
    CHECK(!a.exact && !a.profile, "neither --exact nor --profile by default");
    CHECK(a.bandwidth_gbps == 0, "no bandwidth");
    CHECK(a.n_streams == 0, "no aggregate decode rows by default");
    CHECK(a.n_depth == 0, "no decode-at-depth rows by default");
    const char *depths[] = {"-m", "a", "--depth", "0,128,4096", NULL};
    CHECK(parse(&a, msg, sizeof msg, depths) == 0 && a.n_depth == 2 && a.depth[0] == 128 && a.depth[1] == 4096,
          "--depth 0,128,4096 (0 dropped): %s", msg);
    const char *streams[] = {"-m", "a", "--streams", "1,8,32", NULL};
    CHECK(parse(&a, msg, sizeof msg, streams) == 0 && a.n_streams == 3 && a.streams[0] == 1 && a.streams[1] == 8 &&
              a.streams[2] == 32,
          "--streams 1,8,32: %s", msg);

    const char *many[] = {"-m", "a", "-m", "b", "-p", "0,16,512", "-n", "0", "--suffix", "0+4,256+64", "-r", "5",
                          "-t", "1,2", "--backend", "cpu,cpu-ref", "--bandwidth", "12.5", "--seed", "7", "--json",
                          "--batch", "32", "--exact", "--profile", NULL};
    CHECK(parse(&a, msg, sizeof msg, many) == 0, "many: %s", msg);
    CHECK(a.n_models == 2 && strcmp(a.models[1], "b") == 0, "two models");
    CHECK(a.n_pp == 2 && a.pp[0] == 16 && a.pp[1] == 512, "-p 0,16,512 -> 16,512");
    CHECK(a.n_tg == 0, "-n 0 leaves decode out");
    CHECK(a.n_suffix == 2 && a.suffix[0].depth == 0 && a.suffix[0].n == 4 && a.suffix[1].depth == 256 &&
              a.suffix[1].n == 64, "suffix list");
    CHECK(a.reps == 5 && a.seed == 7 && a.json && a.n_batch == 32 && a.exact && a.profile, "scalars");
    CHECK(a.n_threads == 2 && a.threads[0] == 1 && a.threads[1] == 2, "threads");
    CHECK(a.n_backends == 2 && strcmp(a.backends[0], "cpu") == 0 && strcmp(a.backends[1], "cpu-ref") == 0,
          "backends");
    CHECK(a.bandwidth_gbps == 12.5, "bandwidth");

    const char *none[] = {"-m", "a", "--suffix", "none", NULL};
    CHECK(parse(&a, msg, sizeof msg, none) == 0 && a.n_suffix == 0, "--suffix none");

    /* llama-bench's spellings; -q and -v */
    const char *llama[] = {"--model", "a", "--n-prompt", "64,256", "--n-gen", "16", "--threads", "3",
                           "--repetitions", "2", "-b", "8", "-q", NULL};
    CHECK(parse(&a, msg, sizeof msg, llama) == 0, "llama-bench's spellings: %s", msg);
    CHECK(a.n_models == 1 && strcmp(a.models[0], "a") == 0 && a.n_pp == 2 && a.pp[0] == 64 && a.pp[1] == 256 &&
              a.n_tg == 1 && a.tg[0] == 16 && a.n_threads == 1 && a.threads[0] == 3 && a.reps == 2 &&
              a.n_batch == 8 && a.verbosity == -1,
          "llama-bench's spellings parsed");
    const char *batch_size[] = {"-m", "a", "--batch-size", "128", "--verbose", NULL};
    CHECK(parse(&a, msg, sizeof msg, batch_size) == 0 && a.n_batch == 128 && a.verbosity == 1, "--batch-size: %s",
          msg);
    const char *bad_alias[] = {"-m", "a", "--n-gen", "x", NULL};
    CHECK(parse(&a, msg, sizeof msg, bad_alias) == 2 && strstr(msg, "-n expects decode lengths"), "--n-gen x: %s", msg);
}

static void test_pieces(void) {
    /* FNV-1a 64's published vectors: "" and "a" */
    CHECK(fnv_bytes((const unsigned char *)"", 0) == 0xCBF29CE484222325ull, "fnv of empty");
    CHECK(fnv_bytes((const unsigned char *)"a", 1) == 0xAF63DC4C8601EC8Cull, "fnv of a");
    const int32_t ids[] = {0, 1, 255, 256, 49151, 151935, INT32_MAX};
    unsigned char le[sizeof ids];
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
        for (int b = 0; b < 4; b++) le[4 * i + b] = (unsigned char)((uint32_t)ids[i] >> (8 * b));
    CHECK(fnv1a64_ids(ids, 7) == fnv_bytes(le, sizeof le), "fnv1a64_ids = FNV-1a of the little-endian bytes");
    CHECK(fnv1a64_ids(ids, 0) == 0xCBF29CE484222325ull, "no ids");

    int32_t x[300], y[300], z[300];
    bench_ids(42, STREAM_PP, 97, x, 300);
    bench_ids(42, STREAM_PP, 97, y, 300);
    bench_ids(42, STREAM_PROMPT, 97, z, 300);
    int in_range = 1, seen_hi = 0;
    for (int i = 0; i < 300; i++) in_range &= x[i] >= 0 && x[i] < 97, seen_hi |= x[i] >= 90;
    CHECK(in_range && seen_hi, "ids in [0, 97), spread");
    CHECK(memcmp(x, y, sizeof x) == 0, "same seed and stream, same ids");
    CHECK(memcmp(x, z, sizeof x) != 0, "another stream, other ids");
    bench_ids(43, STREAM_PP, 97, y, 300);
    CHECK(memcmp(x, y, sizeof x) != 0, "another seed, other ids");
    bench_ids(42, STREAM_PP, 1, y, 10);
    CHECK(y[0] == 0 && y[9] == 0, "a one-token vocabulary");

    double ms[] = {5, 1, 4, 2}, scratch[4];
    bench_stat s = stat_of(ms, 4, scratch);
    CHECK(s.min_ms == 1 && s.median_ms == 3, "min 1, median 3 (got %g %g)", s.min_ms, s.median_ms);
    CHECK(ms[0] == 5 && ms[3] == 2, "stat_of leaves its input in run order");
    s = stat_of(ms, 3, scratch);
    CHECK(s.min_ms == 1 && s.median_ms == 4, "odd count");
}

/* The greedy ids of `tg n` computed here through lean.h alone, hashed byte-wise. */
static uint64_t greedy_hash(const char *path, const int32_t *prompt, int32_t n_prompt, int32_t n, int32_t *out) {
    lean_error err;
    lean_model *m = NULL;
    lean_ctx *c = NULL;
    uint64_t h = 0;
    if (lean_model_load_file(path, &m, &err) != LEAN_OK) {
        CHECK(0, "load: %s", err.msg);
        return 0;
    }
    lean_ctx_params cp = lean_ctx_default_params();
    cp.n_ctx = 64;
    const int32_t nv = lean_model_n_vocab(m);
    float *logits = malloc(sizeof *logits * (size_t)nv);
    unsigned char *le = malloc(4 * ((size_t)n + 1));
    if (!logits || !le || lean_ctx_create(m, &cp, &c, &err) != LEAN_OK ||
        lean_prefill(c, prompt, n_prompt, logits, &err) != LEAN_OK) {
        CHECK(0, "ctx/prefill: %s", err.msg);
        goto done;
    }
    for (int32_t k = 0; k <= n; k++) {
        int32_t best = 0; /* first maximum: the lowest id on ties */
        for (int32_t i = 1; i < nv; i++)
            if (logits[i] > logits[best]) best = i;
        out[k] = best;
        for (int b = 0; b < 4; b++) le[4 * k + b] = (unsigned char)((uint32_t)best >> (8 * b));
        if (k < n && lean_decode(c, best, logits, &err) != LEAN_OK) {
            CHECK(0, "decode: %s", err.msg);
            goto done;
        }
    }
    h = fnv_bytes(le, 4 * ((size_t)n + 1));
done:
    free(le);
    free(logits);
    lean_ctx_free(c);
    lean_model_free(m);
    return h;
}

static void test_run(void) {
    char model[256], out_path[256];
    test_tmp_path(model, sizeof model, "model.gguf");
    lean_gen_params gp = {.preset = "tiny-llama", .recipe = "q8_0", .seed = 5};
    lean_error err;
    if (lean_generate_model(&gp, model, &err) != LEAN_OK) {
        CHECK(0, "generate: %s", err.msg);
        return;
    }

    /* --json: one object per row */
    test_tmp_path(out_path, sizeof out_path, "out.jsonl");
    FILE *out = fopen(out_path, "w");
    CHECK(out != NULL, "open %s", out_path);
    if (!out) return;
    char *args[] = {"-m", model, "-p", "8", "-n", "5", "--suffix", "4+3", "-r", "2", "--seed", "9",
                    "--bandwidth", "10", "--json", NULL};
    int rc = bench_main(15, args, out);
    fclose(out);
    CHECK(rc == 0, "bench --json exit status %d", rc);
    char *text = slurp_text(out_path);
    CHECK(text != NULL, "read %s", out_path);
    if (!text) return;
    const char *want[] = {"\"test\":\"load\"", "\"test\":\"pp8\"", "\"test\":\"pp3 @ d4\"", "\"test\":\"tg5\""};
    int n_lines = 0;
    char *tg = NULL;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"), n_lines++) {
        CHECK(json_ok(line), "line %d is not well-formed JSON: %s", n_lines + 1, line);
        if (n_lines < 4) CHECK(strstr(line, want[n_lines]) != NULL, "line %d lacks %s", n_lines + 1, want[n_lines]);
        CHECK(strstr(line, "\"reps\":2,") != NULL, "line %d: reps", n_lines + 1);
        if (strstr(line, "\"phase\":\"decode\"")) tg = line;
    }
    CHECK(n_lines == 4, "%d rows, expected 4", n_lines);
    CHECK(tg != NULL, "a decode row");
    if (tg) {
        int32_t prompt[16], ids[16], expect_prompt[BENCH_PROMPT], mine[6];
        const int np = json_id_list(tg, "prompt", prompt, 16), ni = json_id_list(tg, "ids", ids, 16);
        CHECK(np == BENCH_PROMPT && ni == 6, "prompt %d ids, ids %d", np, ni);
        lean_model *m;
        if (lean_model_load_file(model, &m, &err) == LEAN_OK) {
            bench_ids(9, STREAM_PROMPT, lean_model_n_vocab(m), expect_prompt, BENCH_PROMPT);
            lean_model_free(m);
            CHECK(np == BENCH_PROMPT && memcmp(prompt, expect_prompt, sizeof prompt[0] * BENCH_PROMPT) == 0,
                  "the prompt is stream 3 of the seed");
        }
        const uint64_t h = greedy_hash(model, expect_prompt, BENCH_PROMPT, 5, mine);
        char hex[32];
        snprintf(hex, sizeof hex, "\"hash\":\"%016llx\"", (unsigned long long)h);
        CHECK(strstr(tg, hex) != NULL, "decode hash: expected %s in %s", hex, tg);
        CHECK(ni == 6 && memcmp(ids, mine, sizeof mine) == 0, "the ids are the greedy ids");
        CHECK(strstr(tg, "\"same_ids_every_rep\":true") != NULL, "same ids every repetition");
        CHECK(strstr(tg, "\"roofline_tok_s\":") != NULL && strstr(tg, "\"bandwidth_gbps\":10.000") != NULL,
              "roofline with --bandwidth");
    }
    free(text);

    /* the table */
    out = fopen(out_path, "w");
    if (!out) return;
    char *targs[] = {"-m", model, "-p", "4", "-n", "3", "--suffix", "none", "-r", "1", NULL};
    rc = bench_main(10, targs, out);
    fclose(out);
    CHECK(rc == 0, "bench table exit status %d", rc);
    text = slurp_text(out_path);
    if (text) {
        CHECK(strncmp(text, "| model", 7) == 0, "starts with the header: %.40s", text);
        CHECK(strstr(text, "| load ") && strstr(text, "| pp4 ") && strstr(text, "| tg3 "), "rows");
        CHECK(!strstr(text, " @ d"), "no suffix row with --suffix none");
        CHECK(strstr(text, "greedy ids fnv1a64 ") != NULL, "the decode note: %s", text);
        free(text);
    }

    /* one backend gives the same ids at every thread count (lean.h), so the same hash */
    out = fopen(out_path, "w");
    if (!out) return;
    char *targs2[] = {"-m", model, "-p", "0", "-n", "6", "--suffix", "none", "-r", "1", "-t", "1,2", "--backend",
                      "cpu,cpu-ref", "--json", NULL};
    rc = bench_main(15, targs2, out);
    fclose(out);
    CHECK(rc == 0, "bench -t 1,2 --backend cpu,cpu-ref exit status %d", rc);
    text = slurp_text(out_path);
    if (text) {
        char hashes[4][17] = {{0}};
        int n_tg = 0;
        for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
            const char *h = strstr(line, "\"hash\":\"");
            if (!h) continue;
            const char *label = n_tg < 2 ? "\"backend\":\"cpu\"" : "\"backend\":\"cpu-ref\"";
            CHECK(strstr(line, label) != NULL, "decode row %d lacks %s (not exact: the name asked)", n_tg, label);
            if (n_tg < 4) memcpy(hashes[n_tg], h + 8, 16);
            n_tg++;
        }
        CHECK(n_tg == 4, "%d decode rows, expected 4 (2 backends x 2 thread counts)", n_tg);
        CHECK(strcmp(hashes[0], hashes[1]) == 0, "cpu: 1 and 2 threads, the same ids (%s, %s)", hashes[0],
              hashes[1]);
        CHECK(strcmp(hashes[2], hashes[3]) == 0, "cpu-ref: 1 and 2 threads, the same ids (%s, %s)", hashes[2],
              hashes[3]);
        free(text);
    }

    /* exact rows say so: --exact makes every row exact, "+exact" one backend's; the exact CPU
     * kernels (float activations) give the reference's ids here */
    for (int k = 0; k < 2; k++) {
        out = fopen(out_path, "w");
        if (!out) return;
        char *eargs[] = {"-m", model, "-p", "0", "-n", "4", "--suffix", "none", "-r", "1", "-t", "1", "--backend",
                         k ? "cpu,cpu+exact,cpu-ref" : "cpu,cpu-ref", "--json", k ? NULL : "--exact", NULL};
        rc = bench_main(k ? 15 : 16, eargs, out);
        fclose(out);
        CHECK(rc == 0, "bench --backend %s exit status %d", eargs[13], rc);
        text = slurp_text(out_path);
        if (!text) continue;
        const char *label[2][3] = {{"\"backend\":\"cpu (exact)\"", "\"backend\":\"cpu-ref (exact)\""},
                                   {"\"backend\":\"cpu\"", "\"backend\":\"cpu (exact)\"", "\"backend\":\"cpu-ref\""}};
        const int n_rows = k ? 3 : 2;
        char hashes[3][17] = {{0}};
        int n_tg = 0;
        for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
            const char *h = strstr(line, "\"hash\":\"");
            if (!h) continue;
            if (n_tg < n_rows) {
                CHECK(strstr(line, label[k][n_tg]) != NULL, "decode row %d lacks %s: %s", n_tg, label[k][n_tg], line);
                memcpy(hashes[n_tg], h + 8, 16);
            }
            n_tg++;
        }
        CHECK(n_tg == n_rows, "%d decode rows, expected %d", n_tg, n_rows);
        CHECK(strcmp(hashes[n_rows - 2], hashes[n_rows - 1]) == 0, "cpu exact and cpu-ref: the same ids (%s, %s)",
              hashes[n_rows - 2], hashes[n_rows - 1]);
        free(text);
    }

    /* aggregate decode: rows tgN xS whose stream 0 has tg N's ids (the hash above), the note
     * saying so, for the CPU kernels' batched pass, cpu-ref's context-by-context one and, natively
     * (LEAN_TEST_GPU=0 skips it), the GPU's batched pass */
    out = fopen(out_path, "w");
    if (!out) return;
#ifdef __wasm__
    const bool gpu = false; /* no WebGPU under Node */
#else
    const bool gpu = !test_gpu_skipped("test_bench --backend gpu --streams");
#endif
    char *sargs[] = {"-m", model, "-p", "0", "-n", "5", "--suffix", "none", "-r", "2", "--seed", "9", "--streams",
                     "1,3", "--backend", gpu ? "cpu,cpu-ref,gpu" : "cpu,cpu-ref", "--json", NULL};
    rc = bench_main(17, sargs, out);
    fclose(out);
    CHECK(rc == 0, "bench --streams exit status %d", rc);
    text = slurp_text(out_path);
    if (text) {
        int n_batch = 0;
        char tg_hash[17] = "";
        for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
            CHECK(json_ok(line), "not well-formed JSON: %s", line);
            const char *h = strstr(line, "\"hash\":\"");
            if (strstr(line, "\"phase\":\"decode\"") && h) memcpy(tg_hash, h + 8, 16);
            if (!strstr(line, "\"phase\":\"batch\"")) continue;
            const int S = n_batch % 2 ? 3 : 1;
            char test[32], tokens[32];
            snprintf(test, sizeof test, "\"test\":\"tg5 x%d\"", S);
            snprintf(tokens, sizeof tokens, "\"n_tokens\":%d,", 5 * S);
            CHECK(strstr(line, test) && strstr(line, tokens), "batch row %d: %s", n_batch, line);
            CHECK(h && !strncmp(h + 8, tg_hash, 16), "batch row %d: stream 0's hash is not tg5's %s: %s", n_batch,
                  tg_hash, line);
            CHECK(strstr(line, "\"same_ids_as_alone\":true") && strstr(line, "\"same_ids_every_rep\":true"),
                  "batch row %d: %s", n_batch, line);
            n_batch++;
        }
        CHECK(n_batch == (gpu ? 6 : 4), "%d batch rows, expected %d (%d backends x 2 stream counts)", n_batch,
              gpu ? 6 : 4, gpu ? 3 : 2);
        free(text);
    }

    /* decode at depth: rows tg3 @ d12, the greedy ids after the 12 ids of stream 0, which the
     * repetitions (the context truncated back to 11 ids each time) do not change */
    out = fopen(out_path, "w");
    if (!out) return;
    char *dargs[] = {"-m", model, "-p", "0", "-n", "3", "--suffix", "none", "-r", "2", "--seed", "9", "--depth",
                     "12", "--backend", "cpu,cpu-ref", "--json", NULL};
    rc = bench_main(17, dargs, out);
    fclose(out);
    CHECK(rc == 0, "bench --depth exit status %d", rc);
    text = slurp_text(out_path);
    if (text) {
        int32_t dctx[12], dmine[4];
        lean_model *m;
        uint64_t h = 0;
        if (lean_model_load_file(model, &m, &err) == LEAN_OK) {
            bench_ids(9, STREAM_DEPTH, lean_model_n_vocab(m), dctx, 12);
            lean_model_free(m);
            h = greedy_hash(model, dctx, 12, 3, dmine);
        }
        char hex[32];
        snprintf(hex, sizeof hex, "\"hash\":\"%016llx\"", (unsigned long long)h);
        int n_depth = 0;
        for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
            CHECK(json_ok(line), "not well-formed JSON: %s", line);
            if (!strstr(line, "\"phase\":\"depth\"")) continue;
            int32_t got[16];
            CHECK(strstr(line, "\"test\":\"tg3 @ d12\"") && strstr(line, "\"depth\":12,") &&
                      strstr(line, "\"n_tokens\":3,"),
                  "depth row %d: %s", n_depth, line);
            CHECK(json_id_list(line, "prompt", got, 16) == 12 && memcmp(got, dctx, sizeof dctx) == 0,
                  "depth row %d: the context is stream 0 of the seed", n_depth);
            CHECK(strstr(line, hex) && json_id_list(line, "ids", got, 16) == 4 && memcmp(got, dmine, sizeof dmine) == 0,
                  "depth row %d: expected %s: %s", n_depth, hex, line);
            CHECK(strstr(line, "\"same_ids_every_rep\":true") != NULL, "depth row %d: %s", n_depth, line);
            n_depth++;
        }
        CHECK(n_depth == 2, "%d depth rows, expected 2 (2 backends)", n_depth);
        free(text);
    }

    /* an unknown backend is the library's error: exit status 1 */
    char *bargs[] = {"-m", model, "-r", "1", "--backend", "abacus", NULL};
    out = fopen(out_path, "w");
    if (out) {
        CHECK(bench_main(6, bargs, out) == 1, "unknown backend: exit status 1");
        fclose(out);
    }

    /* a missing model is the library's error: exit status 1 */
    char missing[256];
    test_tmp_path(missing, sizeof missing, "missing.gguf");
    char *margs[] = {"-m", missing, "-r", "1", NULL};
    out = fopen(out_path, "w");
    if (out) {
        CHECK(bench_main(4, margs, out) == 1, "missing model: exit status 1");
        fclose(out);
    }
    remove(out_path);
    remove(model);
}

int main(void) {
    test_arguments();
    test_pieces();
    test_run();
    return test_finish("test_bench");
}
