/* fixture.h — the transformers parity fixtures (tests/data/fixtures/NAME.txt, written by
 * scripts/make_fixtures.py on a machine with torch + transformers) and the comparisons every
 * backend's parity test makes against them. The models are build/fixtures/NAME-FMT.gguf,
 * rebuilt bit-identically by `make test-data`; fixture_each checks each one's SHA-256
 * against the one transformers' reference was made from before a test may load it.
 *
 * Seven models (FIXTURE_NAMES): llama, qwen2, qwen3 with random weights, each with an untied
 * output matrix and one tied to the embedding (4 layers, vocabulary 4096), in 13 formats; and
 * the trained demo model (models/lean-demo.gguf, Q8_0). The file, line by line:
 *   arch ARCH / tied 0|1             the model
 *   format FMT                       a case begins: build/fixtures/NAME-FMT.gguf
 *   sha256 HEX                       that file's SHA-256
 *   prompt N ID...                   16 ids
 *   continuation N ID...             transformers' 32-token greedy continuation
 *   logits POS N ID:LOGIT...         transformers' top-21 (descending) after the first POS ids
 *                                    of prompt + continuation: every prompt position
 *                                    (POS 1..16), then after decoding 1, 2, 3, 4, 8, 16, 24
 *                                    and 32 ids of the continuation
 *   penalty P N ID...                (optional) transformers' greedy ids under repetition
 *                                    penalty P over the whole history (generate(...,
 *                                    repetition_penalty=P, do_sample=False))
 *   end                              the case ends
 * The demo model's file (tests/data/fixtures/demo.txt, scripts/demo/make_fixture.py) has one
 * case: `cases 1` after `tied`, and `model PATH` (models/lean-demo.gguf) after `format`.
 * The 21st logit marks the edge of the top-20: where the 20th and 21st are within
 * 2 x the tolerance, lean may order them either way, so the id set is compared over the
 * largest k <= 20 with a clear gap below it (fixture_point_check).
 *
 * Header-only (static functions): each test program includes it once. */
#ifndef LEAN_TEST_FIXTURE_H
#define LEAN_TEST_FIXTURE_H

#include "lean.h"
#include "test.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FIXTURE_MAX_IDS 64
#define FIXTURE_TOPK 20      /* ids whose set is compared; the file holds one more */
#define FIXTURE_MAX_POINTS 32
/* formats per model in every fixture file: make_fixtures.py's FORMATS */
#define FIXTURE_N_FORMATS 13

static const char *const FIXTURE_NAMES[] = {"llama", "llama-tied", "qwen2", "qwen2-untied", "qwen3", "qwen3-tied", "demo"};
#define FIXTURE_N_NAMES ((int)(sizeof FIXTURE_NAMES / sizeof FIXTURE_NAMES[0]))

/* transformers' logits after the first n_pos ids of prompt + continuation. */
typedef struct fixture_point {
    int n_pos, n;
    int ids[FIXTURE_TOPK + 1];
    float logits[FIXTURE_TOPK + 1]; /* descending */
} fixture_point;

typedef struct fixture {
    char arch[16];  /* the fixture's name: the architecture, -tied / -untied for the other variant */
    char model_arch[16], fmt[16];
    int tied;
    char model[160]; /* build/fixtures/NAME-FMT.gguf */
    char sha256[65]; /* hex, as recorded with the reference */
    int n_prompt, prompt[FIXTURE_MAX_IDS];
    int n_cont, cont[FIXTURE_MAX_IDS];
    int n_points;
    fixture_point points[FIXTURE_MAX_POINTS]; /* by n_pos */
    double penalty;                           /* 0: no penalty run */
    int n_penalized, penalized[FIXTURE_MAX_IDS];
    /* Views for the readers that compare only after the prompt and after the last decode:
     * the top ids and logits there, n_top / n_end the ids whose set is comparable (see
     * fixture_point_safe_k with FIXTURE_TOL). */
    int n_top, n_end;
    const int *top_ids, *end_ids;
    const float *top_logits, *end_logits;
} fixture;

/* The largest tolerance the parity checks use on the F32 path (see fixture_parity). */
#define FIXTURE_TOL 1e-3f

static inline bool fixture_float_weights(const fixture *fx) {
    return !strcmp(fx->fmt, "f32") || !strcmp(fx->fmt, "f16") || !strcmp(fx->fmt, "bf16");
}

/* The largest k <= FIXTURE_TOPK whose top-k set cannot change under errors up to tol on
 * every logit: its k-th and (k+1)-th logits more than 2 x tol apart (0 if none is). */
static inline int fixture_point_safe_k(const fixture_point *pt, float tol) {
    int k = pt->n - 1 < FIXTURE_TOPK ? pt->n - 1 : FIXTURE_TOPK;
    while (k > 0 && !(pt->logits[k - 1] - pt->logits[k] > 2 * tol)) k--;
    return k;
}

/* The point after n_pos ids, or NULL. */
static inline const fixture_point *fixture_at(const fixture *fx, int n_pos) {
    for (int i = 0; i < fx->n_points; i++)
        if (fx->points[i].n_pos == n_pos) return &fx->points[i];
    return NULL;
}

/* ---- SHA-256 (FIPS 180-4), to check a model file against the recorded hash ---- */

typedef struct fixture_sha256_ctx {
    uint32_t h[8];
    uint64_t n_bytes;
    uint8_t block[64];
} fixture_sha256_ctx;

static inline uint32_t fixture_ror(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static inline void fixture_sha256_block(uint32_t h[8], const uint8_t *p) {
    static const uint32_t k[64] = {
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
        0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
        0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
        0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
        0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
        0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
        0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};
    uint32_t w[64], s[8];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        const uint32_t s0 = fixture_ror(w[i - 15], 7) ^ fixture_ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
        const uint32_t s1 = fixture_ror(w[i - 2], 17) ^ fixture_ror(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    memcpy(s, h, sizeof s);
    for (int i = 0; i < 64; i++) {
        const uint32_t t1 = s[7] + (fixture_ror(s[4], 6) ^ fixture_ror(s[4], 11) ^ fixture_ror(s[4], 25)) +
                            ((s[4] & s[5]) ^ (~s[4] & s[6])) + k[i] + w[i];
        const uint32_t t2 = (fixture_ror(s[0], 2) ^ fixture_ror(s[0], 13) ^ fixture_ror(s[0], 22)) +
                            ((s[0] & s[1]) ^ (s[0] & s[2]) ^ (s[1] & s[2]));
        memmove(s + 1, s, 7 * sizeof s[0]);
        s[4] += t1;
        s[0] = t1 + t2;
    }
    for (int i = 0; i < 8; i++) h[i] += s[i];
}

static inline void fixture_sha256_init(fixture_sha256_ctx *c) {
    static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(c->h, h0, sizeof h0);
    c->n_bytes = 0;
}

static inline void fixture_sha256_update(fixture_sha256_ctx *c, const uint8_t *p, size_t n) {
    while (n > 0) {
        const size_t used = (size_t)(c->n_bytes % 64), take = n < 64 - used ? n : 64 - used;
        if (used == 0 && n >= 64) { /* whole blocks straight from the input */
            fixture_sha256_block(c->h, p);
            c->n_bytes += 64, p += 64, n -= 64;
            continue;
        }
        memcpy(c->block + used, p, take);
        c->n_bytes += take, p += take, n -= take;
        if (used + take == 64) fixture_sha256_block(c->h, c->block);
    }
}

/* The digest as 64 lowercase hex digits and a NUL. */
static inline void fixture_sha256_final(fixture_sha256_ctx *c, char hex[65]) {
    const uint64_t bits = c->n_bytes * 8;
    uint8_t pad[72] = {0x80};
    const size_t n_pad = (size_t)((c->n_bytes % 64 < 56 ? 56 : 120) - c->n_bytes % 64);
    for (int i = 0; i < 8; i++) pad[n_pad + (size_t)i] = (uint8_t)(bits >> (56 - 8 * i));
    fixture_sha256_update(c, pad, n_pad + 8);
    for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", (unsigned)(c->h[i / 4] >> (24 - 8 * (i % 4))) & 0xff);
}

/* The SHA-256 of the file at path into hex; false when it cannot be read. */
static inline bool fixture_sha256_file(const char *path, char hex[65]) {
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    fixture_sha256_ctx c;
    fixture_sha256_init(&c);
    static uint8_t buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) fixture_sha256_update(&c, buf, n);
    const bool ok = !ferror(f);
    fclose(f);
    fixture_sha256_final(&c, hex);
    return ok;
}

/* Does the file at path hash to want (hex)? Each path is hashed once per process: the
 * tests visit every fixture several times. */
static inline bool fixture_file_matches(const char *path, const char *want) {
    static struct {
        char path[160], hex[65];
    } seen[128];
    static int n_seen;
    for (int i = 0; i < n_seen; i++)
        if (!strcmp(seen[i].path, path)) return !strcmp(seen[i].hex, want);
    char hex[65];
    if (!fixture_sha256_file(path, hex)) return false;
    if (n_seen < (int)(sizeof seen / sizeof seen[0])) {
        snprintf(seen[n_seen].path, sizeof seen[n_seen].path, "%s", path);
        memcpy(seen[n_seen].hex, hex, sizeof hex);
        n_seen++;
    }
    return !strcmp(hex, want);
}

/* The SHA-256 that tests/data/fixtures/NAME.txt records for build/fixtures/NAME-FMT.gguf, into
 * hex; false when the file or the format is missing. */
static inline bool fixture_recorded_sha(const char *name, const char *fmt, char hex[65]) {
    char path[256], line[4096], at[16] = "";
    snprintf(path, sizeof path, "tests/data/fixtures/%s.txt", name);
    FILE *f = fopen(path, "r");
    hex[0] = 0;
    while (f && fgets(line, sizeof line, f)) {
        if (sscanf(line, "format %15s", at) == 1) continue;
        if (!strcmp(at, fmt) && sscanf(line, "sha256 %64s", hex) == 1) break;
    }
    if (f) fclose(f);
    return strlen(hex) == 64;
}

/* ---- reading ---- */

static inline int fixture_read_ints(FILE *f, int *dst) {
    int n = 0;
    if (fscanf(f, "%d", &n) != 1 || n < 0 || n > FIXTURE_MAX_IDS) return -1;
    for (int i = 0; i < n; i++)
        if (fscanf(f, "%d", &dst[i]) != 1) return -1;
    return n;
}

static inline bool fixture_read_point(FILE *f, fixture_point *pt) {
    if (fscanf(f, "%d %d", &pt->n_pos, &pt->n) != 2 || pt->n < 2 || pt->n > FIXTURE_TOPK + 1) return false;
    for (int i = 0; i < pt->n; i++)
        if (fscanf(f, " %d:%f", &pt->ids[i], &pt->logits[i]) != 2) return false;
    return true;
}

/* Is a case complete: the hash, the prompt and continuation, a point at every prompt
 * position and one after the whole continuation? */
static inline bool fixture_complete(const fixture *fx) {
    if (fx->n_prompt <= 0 || fx->n_cont <= 0 || strlen(fx->sha256) != 64) return false;
    for (int p = 1; p <= fx->n_prompt; p++)
        if (!fixture_at(fx, p)) return false;
    return fixture_at(fx, fx->n_prompt + fx->n_cont) != NULL;
}

/* Which fixtures a run visits: every one (LEAN_TEST_FIXTURES unset or "all"), or with
 * LEAN_TEST_FIXTURES=pairs the half (3 of the 6 models in each format) in which every format
 * still meets every architecture, and every format and every architecture both a tied and an
 * untied output:
 * format i of architecture a (llama 0, qwen2 1, qwen3 2) on its tied model when i + a is odd,
 * else on its untied one; LEAN_TEST_FIXTURES=rest is the other half, which pairs them the same
 * way; LEAN_TEST_FIXTURES=formats visits each format once (13 of 78): format i on architecture
 * i % 3, tied when i / 3 is odd, so every architecture still meets both outputs. tests/run.sh's stages whose instrumentation or emulation makes the sweep cost minutes
 * (asan, neon, the webgpu stage's test_exact) ask for pairs: what a fixture reaches is its
 * format's kernels, its architecture's forward and its output (tied or not), and all of it
 * still runs there; where two stages run one program on the same adapter (native and asan:
 * test_gpu_forward over llvmpipe) one takes pairs and the other rest, so every fixture runs.
 * Anything else set is a failed CHECK, not a silent full or empty sweep. */
static inline bool fixture_selected(const fixture *fx, int format_index, int n_cases) {
    static int mode = -1; /* 0: every fixture, 1: pairs, 2: rest, 3: formats */
    if (mode < 0) {
        const char *env = getenv("LEAN_TEST_FIXTURES");
        mode = !env                       ? 0
               : !strcmp(env, "pairs")   ? 1
               : !strcmp(env, "rest")    ? 2
               : !strcmp(env, "formats") ? 3
                                         : 0;
        if (env && *env && !mode && strcmp(env, "all")) /* (a CHECK only here: the tallies stay as they were) */
            CHECK(0, "LEAN_TEST_FIXTURES='%s': 'pairs', 'rest', 'formats' or 'all' (the default)", env);
        if (mode == 3)
            printf("fixtures: LEAN_TEST_FIXTURES=formats: %d of %d, every format once\n", FIXTURE_N_FORMATS,
                   6 * FIXTURE_N_FORMATS);
        else if (mode)
            printf("fixtures: LEAN_TEST_FIXTURES=%s: %d of %d, every format on every architecture\n", env,
                   3 * FIXTURE_N_FORMATS, 6 * FIXTURE_N_FORMATS);
    }
    if (!mode || n_cases == 1) return true; /* a one-case file (the demo) is never halved */
    const int arch = !strcmp(fx->model_arch, "llama") ? 0 : !strcmp(fx->model_arch, "qwen2") ? 1 : 2;
    if (mode == 3) return arch == format_index % 3 && fx->tied == (format_index / 3) % 2;
    return fx->tied == ((format_index + arch) % 2 == (mode == 1));
}

/* Calls run(fx, user) for every format of tests/data/fixtures/NAME.txt (those
 * fixture_selected keeps), in file order, and CHECKs that the file is well formed, has all
 * FIXTURE_N_FORMATS formats, and that each model file is the one the reference was made from
 * (a case whose file differs fails and is not run). */
static inline void fixture_each(const char *name, void (*run)(const fixture *fx, void *user), void *user) {
    char path[256];
    snprintf(path, sizeof path, "tests/data/fixtures/%s.txt", name);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL, "cannot open %s (made by scripts/make_fixtures.py)", path);
    if (!f) return;
    fixture *fx = calloc(1, sizeof *fx);
    int n_cases = 0, want_cases = FIXTURE_N_FORMATS;
    char word[32];
    bool ok = fx != NULL;
    CHECK(fx != NULL, "out of memory");
    if (fx) snprintf(fx->arch, sizeof fx->arch, "%s", name);
    while (ok && fscanf(f, "%31s", word) == 1) {
        if (word[0] == '#') {
            int ch;
            while ((ch = fgetc(f)) != '\n' && ch != EOF) {}
        } else if (!strcmp(word, "arch")) {
            ok = fscanf(f, "%15s", fx->model_arch) == 1;
        } else if (!strcmp(word, "tied")) {
            ok = fscanf(f, "%d", &fx->tied) == 1;
        } else if (!strcmp(word, "cases")) {
            ok = fscanf(f, "%d", &want_cases) == 1 && want_cases >= 1 && want_cases <= FIXTURE_N_FORMATS;
        } else if (!strcmp(word, "format")) {
            ok = fscanf(f, "%15s", fx->fmt) == 1;
            snprintf(fx->model, sizeof fx->model, "build/fixtures/%s-%s.gguf", name, fx->fmt);
            fx->n_prompt = fx->n_cont = fx->n_points = fx->n_penalized = 0;
            fx->penalty = 0;
            fx->sha256[0] = 0;
        } else if (!strcmp(word, "model")) {
            ok = fscanf(f, "%159s", fx->model) == 1;
        } else if (!strcmp(word, "penalty")) {
            ok = fscanf(f, "%lf", &fx->penalty) == 1 && fx->penalty > 0 &&
                 (fx->n_penalized = fixture_read_ints(f, fx->penalized)) > 0;
        } else if (!strcmp(word, "sha256")) {
            ok = fscanf(f, "%64s", fx->sha256) == 1;
        } else if (!strcmp(word, "prompt")) {
            ok = (fx->n_prompt = fixture_read_ints(f, fx->prompt)) > 0;
        } else if (!strcmp(word, "continuation")) {
            ok = (fx->n_cont = fixture_read_ints(f, fx->cont)) > 0;
        } else if (!strcmp(word, "logits")) {
            ok = fx->n_points < FIXTURE_MAX_POINTS && fixture_read_point(f, &fx->points[fx->n_points]);
            if (ok) fx->n_points++;
        } else if (!strcmp(word, "end")) {
            if (!(ok = fixture_complete(fx))) {
                CHECK(0, "%s: format %s is incomplete (hash, prompt, continuation, every prompt position and "
                      "the last decode point)", path, fx->fmt);
                break;
            }
            const fixture_point *top = fixture_at(fx, fx->n_prompt), *end = fixture_at(fx, fx->n_prompt + fx->n_cont);
            fx->top_ids = top->ids, fx->top_logits = top->logits, fx->n_top = fixture_point_safe_k(top, FIXTURE_TOL);
            fx->end_ids = end->ids, fx->end_logits = end->logits, fx->n_end = fixture_point_safe_k(end, FIXTURE_TOL);
            if (fixture_selected(fx, n_cases, want_cases)) {
                const bool same = fixture_file_matches(fx->model, fx->sha256);
                CHECK(same, "%s: missing or not the file transformers' reference was made from (SHA-256 %s); "
                      "`make test-data` rebuilds it", fx->model, fx->sha256);
                if (same) run(fx, user);
            }
            n_cases++;
        } else {
            ok = false;
        }
        if (!ok) CHECK(0, "%s: malformed or unknown '%s' line (format %s)", path, word, fx ? fx->fmt : "");
    }
    fclose(f);
    free(fx);
    CHECK(n_cases == want_cases, "%s: %d formats, expected %d", path, n_cases, want_cases);
}

/* fixture_each over every model of FIXTURE_NAMES. */
static inline void fixture_each_all(void (*run)(const fixture *fx, void *user), void *user) {
    for (int i = 0; i < FIXTURE_N_NAMES; i++) fixture_each(FIXTURE_NAMES[i], run, user);
}

static inline int fixture_argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* The gap between the largest and the second largest logit. */
static inline float fixture_top2_gap(const float *x, int n) {
    const int b = fixture_argmax(x, n);
    float second = -INFINITY;
    for (int i = 0; i < n; i++)
        if (i != b && x[i] > second) second = x[i];
    return x[b] - second;
}

/* Is id among the k largest of logits (ties broken by lower id, as the script orders them)? */
static inline int fixture_in_topk(const float *logits, int n_vocab, int id, int k) {
    int above = 0;
    for (int i = 0; i < n_vocab; i++)
        if (logits[i] > logits[id] || (logits[i] == logits[id] && i < id)) above++;
    return above < k;
}

/* Largest |lean - transformers| over transformers' top ids (NaN counts as infinite);
 * *same_set (nullable): every one of them is also in lean's top-n. */
static inline float fixture_top_delta(const float *logits, int n_vocab, const int *ids, const float *want, int n,
                                      int *same_set) {
    float worst = 0;
    if (same_set) *same_set = 1;
    for (int i = 0; i < n; i++) {
        const float d = fabsf(logits[ids[i]] - want[i]);
        if (!(d <= worst)) worst = isnan(d) ? INFINITY : d;
        if (same_set && !fixture_in_topk(logits, n_vocab, ids[i], n)) *same_set = 0;
    }
    return worst;
}

/* One point against lean's logits: the largest |delta| over all its ids into *delta, and
 * whether lean's top-k set is transformers' for k = fixture_point_safe_k(pt, tol) (*k). */
static inline bool fixture_point_check(const fixture_point *pt, const float *logits, int n_vocab, float tol,
                                       float *delta, int *k) {
    *delta = fixture_top_delta(logits, n_vocab, pt->ids, pt->logits, pt->n, NULL);
    *k = fixture_point_safe_k(pt, tol);
    int same = 1;
    fixture_top_delta(logits, n_vocab, pt->ids, pt->logits, *k, &same);
    return same;
}

/* The parity check of one fixture on the backend named by `backend` (a const char *, the
 * lean_ctx_params.backend; fixture_each's user pointer), exact arithmetic:
 *   - every prompt position: prefill the prompt's first p ids into an emptied context
 *     (lean_ctx_truncate to 0), p = 1..16, and compare with transformers' point p;
 *   - then decode transformers' 32-token continuation after the whole prompt, lean's argmax
 *     equal to its id at every step, comparing at the recorded decode points (the KV-cache
 *     path over 48 positions);
 * at each point |delta| <= FIXTURE_TOL on all 21 recorded logits and the same top-k id set
 * (fixture_point_check). Prints one parity-table row (fixture_parity_header). */
static struct {
    int files, points, points_equal, narrow, ids, ids_equal;
} fixture_parity_total; /* fixture_parity's runs since the last fixture_parity_summary */

static inline void fixture_parity_header(void) {
    printf("| model | fmt  | max abs delta logit (16 prompt positions) | (8 decode points) | top-k ids equal (k < 20 at a "
           "near-tie) | 32-token continuation equal |\n");
    printf("|---|---|---|---|---|---|\n");
}

/* One line for the parity table's rows since the last call (what: the backend), for CI's log
 * (tests/run.sh passes a passing program's "summary: " lines through). */
static inline void fixture_parity_summary(const char *what) {
    printf("summary: %s against transformers: %d fixtures, top-k ids equal at %d of %d points (%d compared over k < 20 "
           "at a near-tie), %d of %d greedy ids transformers'\n", what, fixture_parity_total.files,
           fixture_parity_total.points_equal, fixture_parity_total.points, fixture_parity_total.narrow,
           fixture_parity_total.ids_equal, fixture_parity_total.ids);
    memset(&fixture_parity_total, 0, sizeof fixture_parity_total);
}

/* transformers' greedy ids under a repetition penalty over the whole history (the prompt
 * included), through lean's sampler on ctx's backend. */
static inline void fixture_penalty_check(const fixture *c, lean_ctx *ctx, float *logits, int n_vocab) {
    lean_error err;
    lean_sampler_params sp = lean_sampler_default_params();
    sp.greedy = 1, sp.repeat_penalty = c->penalty, sp.repeat_last_n = -1, sp.seed = 0;
    lean_sampler *s = NULL;
    lean_status st = lean_sampler_create(&sp, n_vocab, &s, &err);
    if (st == LEAN_OK) st = lean_sampler_accept(s, c->prompt, c->n_prompt, &err);
    if (st == LEAN_OK) st = lean_ctx_truncate(ctx, 0, &err);
    if (st == LEAN_OK) st = lean_prefill(ctx, c->prompt, c->n_prompt, logits, &err);
    int n_same = 0, first_diff = -1, lean_id = -1;
    for (int i = 0; st == LEAN_OK && i < c->n_penalized; i++) {
        int32_t id = -1;
        st = lean_sampler_sample(s, logits, lean_ctx_pos(ctx), NULL, &id, &err);
        if (st != LEAN_OK) break;
        if (id == c->penalized[i]) n_same++;
        else if (first_diff < 0) first_diff = i, lean_id = id;
        /* transformers' ids go on, so a later step stays comparable after a mismatch */
        st = lean_sampler_accept(s, &c->penalized[i], 1, &err);
        if (st == LEAN_OK && i + 1 < c->n_penalized) st = lean_decode(ctx, c->penalized[i], logits, &err);
    }
    CHECK(st == LEAN_OK, "%s: repetition penalty run: %s", c->model, err.msg);
    CHECK(n_same == c->n_penalized, "%s: under repetition penalty %g the greedy ids differ at token %d (lean %d, "
          "transformers %d)", c->model, c->penalty, first_diff, lean_id, first_diff >= 0 ? c->penalized[first_diff] : -1);
    printf("| %-12s | %-4s | repetition penalty %g: %d of %d greedy ids equal |\n", c->arch, c->fmt, c->penalty, n_same,
           c->n_penalized);
    lean_sampler_free(s);
}

static inline void fixture_parity(const fixture *c, void *backend) {
    const char *path = c->model;
    lean_error err;
    lean_model *m = NULL;
    lean_ctx *ctx = NULL;
    if (lean_model_load_file(path, &m, &err) != LEAN_OK) {
        CHECK(0, "%s: %s", path, err.msg);
        return;
    }
    lean_ctx_params cp = lean_ctx_default_params();
    cp.n_ctx = 128;
    cp.backend = (const char *)backend;
    cp.exact = true; /* FIXTURE_TOL is the F32 path's bound */
    lean_status st = lean_ctx_create(m, &cp, &ctx, &err);
    CHECK(st == LEAN_OK, "%s: ctx (%s): %s", path, cp.backend, err.msg);
    int n_vocab = lean_model_n_vocab(m);
    float *logits = malloc(sizeof(float) * (size_t)n_vocab);
    if (st != LEAN_OK || !logits) goto done;

    float worst[2] = {0, 0}; /* prompt positions, decode points */
    int worst_pos[2] = {0, 0}, n_sets = 0, n_sets_equal = 0, n_narrow = 0, first_set_diff = -1;
    for (int p = 1; p <= c->n_prompt; p++) {
        st = lean_ctx_truncate(ctx, 0, &err);
        if (st == LEAN_OK) st = lean_prefill(ctx, c->prompt, p, logits, &err);
        if (st != LEAN_OK) {
            CHECK(0, "%s: prefill of %d ids: %s", path, p, err.msg);
            goto done;
        }
        float d;
        int k;
        const bool same = fixture_point_check(fixture_at(c, p), logits, n_vocab, FIXTURE_TOL, &d, &k);
        if (!(d <= worst[0])) worst[0] = d, worst_pos[0] = p;
        n_sets++, n_sets_equal += same, n_narrow += k < FIXTURE_TOPK;
        if (!same && first_set_diff < 0) first_set_diff = p;
    }

    /* Decode transformers' continuation (so later steps stay comparable even after a
     * mismatch) and count how many of lean's own argmax picks agree with it. */
    int n_same = 0, first_diff = -1, lean_id = -1;
    for (int i = 0; i < c->n_cont; i++) {
        int pick = fixture_argmax(logits, n_vocab);
        if (pick == c->cont[i]) n_same++;
        else if (first_diff < 0) first_diff = i, lean_id = pick;
        if (lean_decode(ctx, c->cont[i], logits, &err) != LEAN_OK) {
            CHECK(0, "%s: decode: %s", path, err.msg);
            goto done;
        }
        const fixture_point *pt = fixture_at(c, c->n_prompt + i + 1);
        if (!pt) continue;
        float d;
        int k;
        const bool same = fixture_point_check(pt, logits, n_vocab, FIXTURE_TOL, &d, &k);
        if (!(d <= worst[1])) worst[1] = d, worst_pos[1] = pt->n_pos;
        n_sets++, n_sets_equal += same, n_narrow += k < FIXTURE_TOPK;
        if (!same && first_set_diff < 0) first_set_diff = pt->n_pos;
    }
    CHECK(worst[0] <= FIXTURE_TOL, "%s: max |delta logit| %.3g > %.0e at prompt position %d", path, worst[0],
          FIXTURE_TOL, worst_pos[0] - 1);
    CHECK(worst[1] <= FIXTURE_TOL, "%s: after decoding, max |delta logit| %.3g > %.0e after %d ids", path, worst[1],
          FIXTURE_TOL, worst_pos[1]);
    CHECK(n_sets_equal == n_sets, "%s: top-k ids differ from transformers' at %d of %d points (first after %d ids)",
          path, n_sets - n_sets_equal, n_sets, first_set_diff);
    CHECK(n_same == c->n_cont, "%s: continuation differs at token %d (lean %d, transformers %d)", path, first_diff,
          lean_id, first_diff >= 0 ? c->cont[first_diff] : -1);
    printf("| %-12s | %-4s | %.2e | %.2e | %d/%d (%d near-ties) | %s |\n", c->arch, c->fmt, worst[0], worst[1],
           n_sets_equal, n_sets, n_narrow, n_same == c->n_cont ? "yes" : "no");
    fixture_parity_total.files++, fixture_parity_total.points += n_sets, fixture_parity_total.points_equal += n_sets_equal;
    fixture_parity_total.narrow += n_narrow, fixture_parity_total.ids += c->n_cont, fixture_parity_total.ids_equal += n_same;
    if (c->n_penalized > 0) fixture_penalty_check(c, ctx, logits, n_vocab);
done:
    free(logits);
    lean_ctx_free(ctx);
    lean_model_free(m);
}

#endif
