/* test_kv_snapshot.c — KV snapshots and forks (lean.h "KV snapshots and forks";
 * src/core/kv_snapshot.c, kv_format.c), on tiny Q8_0 models of the three architectures and on
 * every backend: cpu-ref, cpu (8-bit and exact), gpu (exact, and not exact: a second device):
 *
 *   continue    a generation stopped after K ids, saved, restored into another context and
 *               continued gives the ids of the one that never stopped (greedy and seeded), and
 *               the logits after decoding the last id are the same bits as the saver's;
 *   round trip  a restored context saves the same bytes it was given, whatever its backend
 *               (so the GPU's write and read and the CPU's keep every bit);
 *   across      cpu-ref's snapshot restored on every backend, and every backend's restored on
 *               cpu-ref: on the exact path the greedy reply of cpu-ref;
 *   fork        a fork of n_pos positions continued by the rest of the prompt gives the source's
 *               logits bit for bit; every pair of backends (the GPU's device copy, through host
 *               memory between devices or backends) forks to the same bytes;
 *   refusals    every truncation, another magic, version, element type, model (architecture or
 *               format), payload size, trailing bytes, reserved bytes, a flipped payload bit, a
 *               context too short, a short buffer, a generation in progress, NULLs: each its
 *               status and a message naming it, and the context unchanged;
 *   same file   two loads of one file take each other's snapshots and forks.
 *
 * lean-test: webgpu (in wasm32 the webgpu stage runs it: the CPU backends and navigator.gpu) */
#include "core/kv_snapshot.h"
#include "gpu_test.h"
#include "tiny_model.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define N_PROMPT 11
#define N_REPLY 20
#define K_STOP 7 /* ids drawn before the snapshot */
#define N_CTX 64

static const be_spec backends[] = {{"cpu-ref", true}, {"cpu", false}, {"cpu", true}, {"gpu", true}, {"gpu", false}};
#define N_BE (sizeof backends / sizeof backends[0])
static size_t n_be = N_BE; /* without the GPU ones when LEAN_TEST_GPU=0 */

static lean_model *load(const char *arch, uint32_t type, char *path, size_t cap) {
    tiny_spec sp = tiny_default(arch);
    sp.matrix_type = sp.embd_type = type;
    sp.n_vocab = 300; /* untied, as tiny_default: a tied tiny model echoes its last id */
    sp.seed = 77;
    tiny_path(path, cap);
    lean_error err = {0};
    lean_model *m = NULL;
    CHECK(tiny_write(&sp, path, NULL, &err) == LEAN_OK, "%s", err.msg);
    CHECK(lean_model_load_file(path, &m, &err) == LEAN_OK, "%s: %s", arch, err.msg);
    return m;
}

/* The snapshot of c (malloc'd; NULL after a failed CHECK), its size in *n. */
static uint8_t *save(lean_ctx *c, size_t *n, const char *what) {
    lean_error err = {0};
    *n = 0;
    lean_status st = lean_kv_save(c, NULL, 0, n, &err);
    uint8_t *b = st == LEAN_OK ? malloc(*n) : NULL;
    if (b) st = lean_kv_save(c, b, *n, n, &err);
    CHECK(st == LEAN_OK && b, "%s: save: %s", what, err.msg);
    if (st != LEAN_OK) free(b);
    return st == LEAN_OK ? b : NULL;
}

static lean_sampler *sampler(int32_t V, bool greedy, const int32_t *accepted, int32_t n) {
    lean_sampler_params sp = lean_sampler_default_params();
    /* hot, so that the draws leave the argmax, with every stage of the sampler in play */
    sp.temperature = greedy ? 0.0 : 1.4, sp.top_k = 50, sp.top_p = 0.9, sp.repeat_penalty = 1.2, sp.seed = 99;
    lean_sampler *s = NULL;
    lean_error err = {0};
    lean_status st = lean_sampler_create(&sp, V, &s, &err);
    if (!st) st = lean_sampler_accept(s, accepted, n, &err);
    CHECK(st == LEAN_OK, "sampler: %s", err.msg);
    return s;
}

/* On c (emptied first): the prompt, then n ids through lean_gen_* into out. */
static bool gen(lean_ctx *c, const int32_t *prompt, int32_t V, bool greedy, int n, int32_t *out) {
    lean_error err = {0};
    float *logits = malloc(sizeof(float) * (size_t)V);
    lean_sampler *smp = sampler(V, greedy, prompt, N_PROMPT);
    lean_status st = lean_ctx_truncate(c, 0, &err);
    if (!st) st = lean_prefill(c, prompt, N_PROMPT, logits, &err);
    if (!st) st = lean_gen_begin(c, smp, n, &err);
    for (int i = 0; !st && i < n; i++) st = lean_gen_next(c, &out[i], &err);
    lean_gen_end(c);
    CHECK(st == LEAN_OK, "gen: %s", err.msg);
    lean_sampler_free(smp);
    free(logits);
    return st == LEAN_OK;
}

/* ---- continue: stop, save, restore elsewhere, go on ---- */

static void test_continue(const char *tag, lean_ctx *a, lean_ctx *b, const int32_t *prompt, int32_t V) {
    lean_error err = {0};
    float *la = malloc(sizeof(float) * (size_t)V), *lb = malloc(sizeof(float) * (size_t)V);
    for (int greedy = 0; greedy < 2; greedy++) {
        const char *kind = greedy ? "greedy" : "seeded";
        int32_t want[N_REPLY], got[N_REPLY];
        if (!gen(a, prompt, V, greedy, N_REPLY, want) || !gen(a, prompt, V, greedy, K_STOP, got)) continue;
        size_t n = 0;
        uint8_t *snap = save(a, &n, tag);
        if (!snap) continue;
        const int32_t pos = lean_ctx_pos(a);
        CHECK(pos == N_PROMPT + K_STOP - 1, "%s: position %d after %d ids", tag, pos, K_STOP);
        /* b held something else: the restore replaces it */
        lean_status st = lean_ctx_truncate(b, 0, &err);
        if (!st) st = lean_prefill(b, prompt + 3, 5, NULL, &err);
        if (!st) st = lean_kv_restore(b, snap, n, &err);
        CHECK(st == LEAN_OK, "%s %s: restore: %s", tag, kind, err.msg);
        CHECK(lean_ctx_pos(b) == pos, "%s: restored position %d, saved %d", tag, lean_ctx_pos(b), pos);
        size_t n2 = 0;
        uint8_t *again = save(b, &n2, tag);
        CHECK(again && n2 == n && memcmp(again, snap, n) == 0, "%s %s: the restored context saves other bytes", tag,
              kind);
        free(again);
        /* decoding the last id: the same bits on the saver and the restored */
        st = lean_decode(a, got[K_STOP - 1], la, &err);
        if (!st) st = lean_decode(b, got[K_STOP - 1], lb, &err);
        CHECK(st == LEAN_OK && memcmp(la, lb, sizeof(float) * (size_t)V) == 0,
              "%s %s: logits after the restore differ from the saver's (%s)", tag, kind, err.msg);
        /* then the rest of the reply, with a sampler in the saver's state */
        int32_t history[N_PROMPT + K_STOP];
        memcpy(history, prompt, sizeof(int32_t) * N_PROMPT);
        memcpy(history + N_PROMPT, got, sizeof(int32_t) * K_STOP);
        lean_sampler *smp = sampler(V, greedy, history, N_PROMPT + K_STOP);
        if (!st) st = lean_gen_begin(b, smp, N_REPLY - K_STOP, &err);
        for (int i = K_STOP; !st && i < N_REPLY; i++) st = lean_gen_next(b, &got[i], &err);
        lean_gen_end(b);
        lean_sampler_free(smp);
        const int at = test_first_diff(got, want, N_REPLY);
        CHECK(st == LEAN_OK && at < 0, "%s %s: the restored reply differs at id %d (%d, never stopped %d): %s", tag,
              kind, at, at >= 0 ? got[at] : 0, at >= 0 ? want[at] : 0, err.msg);
        free(snap);
    }
    free(la), free(lb);
}

/* ---- fork: the prefix copied, the rest computed, the source's bits ---- */

static void test_fork_same(const char *tag, lean_ctx *a, lean_ctx *b, const int32_t *prompt, int32_t V) {
    lean_error err = {0};
    float *la = malloc(sizeof(float) * (size_t)V), *lb = malloc(sizeof(float) * (size_t)V);
    const int32_t split = N_PROMPT - 3;
    lean_status st = lean_ctx_truncate(a, 0, &err);
    if (!st) st = lean_prefill(a, prompt, split, NULL, &err);
    if (!st) st = lean_prefill(a, prompt + split, N_PROMPT - split, la, &err);
    if (!st) st = lean_ctx_truncate(b, 0, &err);
    if (!st) st = lean_prefill(b, prompt + 1, N_PROMPT - 1, NULL, &err); /* overwritten, and cut to split */
    if (!st) st = lean_kv_fork(b, a, split, &err);
    CHECK(st == LEAN_OK, "%s: fork: %s", tag, err.msg);
    CHECK(lean_ctx_pos(b) == split && lean_ctx_pos(a) == N_PROMPT, "%s: fork left positions %d (dst) and %d (src)",
          tag, lean_ctx_pos(b), lean_ctx_pos(a));
    if (!st) st = lean_prefill(b, prompt + split, N_PROMPT - split, lb, &err);
    CHECK(st == LEAN_OK && memcmp(la, lb, sizeof(float) * (size_t)V) == 0,
          "%s: a fork's logits differ from its source's (%s)", tag, err.msg);
    free(la), free(lb);
}

/* Every pair of backends: the fork's bytes are the source's. a[i] holds the prompt. */
static void test_fork_pairs(const char *arch, lean_ctx **a, lean_ctx **b) {
    lean_error err = {0};
    for (size_t i = 0; i < n_be; i++) {
        size_t n_src = 0;
        uint8_t *src = a[i] ? save(a[i], &n_src, arch) : NULL;
        for (size_t j = 0; src && j < n_be; j++) {
            if (!b[j]) continue;
            const lean_status st = lean_kv_fork(b[j], a[i], N_PROMPT, &err);
            size_t n_dst = 0;
            uint8_t *dst = st == LEAN_OK ? save(b[j], &n_dst, arch) : NULL;
            CHECK(st == LEAN_OK && dst && n_dst == n_src && memcmp(src, dst, n_src) == 0,
                  "%s: fork %s%s -> %s%s: other bytes (%s)", arch, backends[i].name, backends[i].exact ? " exact" : "",
                  backends[j].name, backends[j].exact ? " exact" : "", err.msg);
            free(dst);
        }
        free(src);
    }
}

/* ---- across backends, on the exact path ---- */

static void test_across(const char *arch, lean_ctx **a, lean_ctx **b, const int32_t *prompt, int32_t V) {
    lean_error err = {0};
    int32_t want[N_REPLY], got[N_REPLY];
    if (!gen(a[0], prompt, V, true, N_REPLY, want)) return;
    float *logits = malloc(sizeof(float) * (size_t)V);
    for (size_t i = 1; i < n_be; i++) {
        if (!backends[i].exact || !a[i] || !b[i]) continue;
        /* one way: cpu-ref's prompt (but its last id) on backend i; the other: i's on cpu-ref */
        for (int way = 0; way < 2; way++) {
            lean_ctx *from = way ? a[i] : a[0], *to = way ? b[0] : b[i];
            size_t n = 0;
            lean_status st = lean_ctx_truncate(from, 0, &err);
            if (!st) st = lean_prefill(from, prompt, N_PROMPT - 1, NULL, &err);
            uint8_t *snap = st == LEAN_OK ? save(from, &n, arch) : NULL;
            if (snap) st = lean_kv_restore(to, snap, n, &err);
            if (!st) st = lean_decode(to, prompt[N_PROMPT - 1], logits, &err);
            lean_sampler *smp = sampler(V, true, prompt, N_PROMPT);
            if (!st) st = lean_gen_begin(to, smp, N_REPLY, &err);
            for (int k = 0; !st && k < N_REPLY; k++) st = lean_gen_next(to, &got[k], &err);
            lean_gen_end(to);
            lean_sampler_free(smp);
            const int at = test_first_diff(got, want, N_REPLY);
            CHECK(st == LEAN_OK && at < 0, "%s: %s's snapshot on %s: greedy reply differs at %d (%s)", arch,
                  way ? backends[i].name : "cpu-ref", way ? "cpu-ref" : backends[i].name, at, err.msg);
            free(snap);
        }
    }
    free(logits);
}

/* ---- refusals ---- */

static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }

/* restore of bytes[0..n) into c fails with want, a message containing needle, and c unchanged */
static void refused(lean_ctx *c, const uint8_t *bytes, size_t n, lean_status want, const char *needle,
                    const char *what) {
    size_t n0 = 0, n1 = 0;
    uint8_t *before = save(c, &n0, what);
    lean_error err = {0};
    const lean_status st = lean_kv_restore(c, bytes, n, &err);
    CHECK(st == want && strstr(err.msg, needle), "%s: status %d (want %d), message '%s' (want '%s')", what, st, want,
          err.msg, needle);
    uint8_t *after = save(c, &n1, what);
    CHECK(before && after && n0 == n1 && memcmp(before, after, n0) == 0, "%s: the refused restore changed the context",
          what);
    free(before), free(after);
}

/* A copy of snap with the checksum made right again (so a later check is the one that fires). */
static uint8_t *edited(const uint8_t *snap, size_t n, size_t at, uint32_t value, bool reseal) {
    uint8_t *b = malloc(n + 1);
    memcpy(b, snap, n);
    put32(b + at, value);
    if (reseal) kv_snapshot_seal(b);
    return b;
}

static void test_refusals(const lean_model *m, const lean_model *other_arch, const lean_model *other_type) {
    lean_error err = {0};
    const be_spec ref = backends[0];
    lean_ctx *c = test_ctx(m, &ref, N_CTX, 8), *d = test_ctx(m, &ref, N_CTX, 8), *small = test_ctx(m, &ref, 4, 8);
    lean_ctx *o1 = test_ctx(other_arch, &ref, N_CTX, 8), *o2 = test_ctx(other_type, &ref, N_CTX, 8);
    if (!c || !d || !small || !o1 || !o2) goto done;
    int32_t ids[8];
    tiny_ids(ids, 8, lean_model_n_vocab(m), 3);
    CHECK(lean_prefill(c, ids, 6, NULL, &err) == LEAN_OK, "%s", err.msg);
    CHECK(lean_prefill(d, ids + 2, 3, NULL, &err) == LEAN_OK, "%s", err.msg); /* the target: 3 other positions */
    size_t n = 0;
    uint8_t *snap = save(c, &n, "refusals");
    if (!snap) goto done;
    CHECK(n == 64 + 2 * 2 * 6 * (size_t)(2 * 16) * 4, "a snapshot of 6 positions is %zu bytes", n);
    for (size_t len = 0; len < n; len++) { /* every truncation */
        lean_status st = lean_kv_restore(d, snap, len, &err);
        if (st != LEAN_ERR_FORMAT || !strstr(err.msg, "truncated")) {
            CHECK(0, "truncated to %zu of %zu bytes: status %d, '%s'", len, n, st, err.msg);
            break;
        }
    }
    CHECK(lean_ctx_pos(d) == 3, "truncated snapshots moved the position to %d", lean_ctx_pos(d));
    refused(d, snap, n - 1, LEAN_ERR_FORMAT, "truncated", "one byte short");
    /* one header field changed (resealed where a later check is to fire than the checksum's) */
    static const struct {
        size_t at;
        uint32_t value;
        bool reseal;
        lean_status want;
        const char *needle;
    } edits[] = {
        {4, 0x0a0d5658, false, LEAN_ERR_FORMAT, "not a KV snapshot"},   /* "LEANXV\r\n" */
        {8, 2, false, LEAN_ERR_UNSUPPORTED, "version 2"},
        {12, 128, false, LEAN_ERR_UNSUPPORTED, "128-byte header"},
        {60, 1, false, LEAN_ERR_FORMAT, "reserved"},
        {28, 64, true, LEAN_ERR_MODEL, "another model"},                  /* kv_dim */
        {32, LEAN_TYPE_F16, true, LEAN_ERR_UNSUPPORTED, "element type 1"},
        {40, 12, true, LEAN_ERR_FORMAT, "payload is 12 bytes"},
        {36, 5, true, LEAN_ERR_FORMAT, "5 positions take"}, /* the payload field says 6's */
    };
    for (size_t e = 0; e < sizeof edits / sizeof edits[0]; e++) {
        char what[64];
        snprintf(what, sizeof what, "u32 %u at offset %zu", edits[e].value, edits[e].at);
        uint8_t *b = edited(snap, n, edits[e].at, edits[e].value, edits[e].reseal);
        refused(d, b, n, edits[e].want, edits[e].needle, what);
        free(b);
    }
    uint8_t *b = edited(snap, n, 0, 0x4e41454c, false); /* "LEAN" over "LEAN": a copy */
    b[n] = 0;
    refused(d, b, n + 1, LEAN_ERR_FORMAT, "past its end", "a trailing byte");
    b[64 + 100] ^= 0x10; /* one bit of a key */
    refused(d, b, n, LEAN_ERR_FORMAT, "corrupted", "a flipped payload bit");
    b[64 + 100] ^= 0x10;
    b[20] ^= 1; /* the model identity */
    refused(d, b, n, LEAN_ERR_MODEL, "another model", "identity");
    free(b);
    refused(o1, snap, n, LEAN_ERR_MODEL, "another model", "another architecture");
    refused(o2, snap, n, LEAN_ERR_MODEL, "another model", "another format");
    refused(small, snap, n, LEAN_ERR_CONTEXT_FULL, "does not fit in a context of 4", "a short context");
    CHECK(lean_kv_restore(d, NULL, n, &err) == LEAN_ERR_ARG, "NULL bytes: %s", err.msg);
    CHECK(lean_kv_restore(NULL, snap, n, &err) == LEAN_ERR_ARG, "NULL context: %s", err.msg);

    /* save: a short buffer names the size and still tells it */
    size_t need = 0;
    CHECK(lean_kv_save(c, snap, n - 1, &need, &err) == LEAN_ERR_ARG && need == n && strstr(err.msg, "takes"),
          "a short buffer: need %zu of %zu, '%s'", need, n, err.msg);
    CHECK(lean_kv_save(c, NULL, 0, NULL, &err) == LEAN_ERR_ARG, "NULL n_bytes");

    /* during a generation: every call refuses, and the generation goes on */
    float *logits = malloc(sizeof(float) * (size_t)lean_model_n_vocab(m));
    lean_sampler *smp = sampler(lean_model_n_vocab(m), true, ids, 6);
    int32_t id = 0;
    lean_status st = lean_decode(c, ids[6], logits, &err);
    if (!st) st = lean_gen_begin(c, smp, 4, &err);
    if (!st) st = lean_gen_next(c, &id, &err);
    CHECK(st == LEAN_OK, "generation: %s", err.msg);
    CHECK(lean_kv_save(c, NULL, 0, &need, &err) == LEAN_ERR_ARG && strstr(err.msg, "generation"), "save: '%s'",
          err.msg);
    CHECK(lean_kv_restore(c, snap, n, &err) == LEAN_ERR_ARG, "restore during a generation: '%s'", err.msg);
    CHECK(lean_kv_fork(d, c, 2, &err) == LEAN_ERR_ARG, "fork from a generation: '%s'", err.msg);
    CHECK(lean_kv_fork(c, d, 2, &err) == LEAN_ERR_ARG, "fork into a generation: '%s'", err.msg);
    CHECK(lean_gen_next(c, &id, &err) == LEAN_OK, "the generation after refusals: %s", err.msg);
    lean_gen_end(c);
    lean_sampler_free(smp);
    free(logits);

    /* fork refusals */
    CHECK(lean_kv_fork(c, c, 1, &err) == LEAN_ERR_ARG, "fork into itself");
    CHECK(lean_kv_fork(d, c, lean_ctx_pos(c) + 1, &err) == LEAN_ERR_ARG && strstr(err.msg, "holds"),
          "fork past the source: '%s'", err.msg);
    CHECK(lean_kv_fork(d, c, -1, &err) == LEAN_ERR_ARG, "fork of -1 positions");
    CHECK(lean_kv_fork(small, c, 5, &err) == LEAN_ERR_CONTEXT_FULL, "fork into a short context: '%s'", err.msg);
    CHECK(lean_kv_fork(o1, c, 2, &err) == LEAN_ERR_MODEL, "fork into another model: '%s'", err.msg);
    CHECK(lean_kv_fork(d, NULL, 2, &err) == LEAN_ERR_ARG, "fork from NULL");
    CHECK(lean_ctx_pos(d) == 3, "refused forks moved the position to %d", lean_ctx_pos(d));

    /* an empty context: 64 bytes, and restoring it empties */
    CHECK(lean_ctx_truncate(c, 0, &err) == LEAN_OK, "%s", err.msg);
    free(snap);
    snap = save(c, &n, "empty");
    CHECK(n == 64, "an empty context's snapshot is %zu bytes", n);
    CHECK(snap && lean_kv_restore(d, snap, n, &err) == LEAN_OK && lean_ctx_pos(d) == 0, "restore empty: %s",
          err.msg);
    CHECK(lean_kv_fork(d, c, 0, &err) == LEAN_OK && lean_ctx_pos(d) == 0, "fork of 0 positions: %s", err.msg);
    free(snap);
done:
    lean_ctx_free(c), lean_ctx_free(d), lean_ctx_free(small), lean_ctx_free(o1), lean_ctx_free(o2);
}

/* The same file loaded twice: two lean_models of one identity take each other's snapshots and
 * forks. */
static void test_same_file(const lean_model *m, const char *path) {
    lean_error err = {0};
    lean_model *again = NULL;
    CHECK(lean_model_load_file(path, &again, &err) == LEAN_OK, "%s", err.msg);
    lean_ctx *c = test_ctx(m, &backends[0], N_CTX, 8), *d = again ? test_ctx(again, &backends[0], N_CTX, 8) : NULL;
    int32_t ids[5];
    tiny_ids(ids, 5, lean_model_n_vocab(m), 5);
    size_t n = 0;
    uint8_t *snap = c && d && lean_prefill(c, ids, 5, NULL, &err) == LEAN_OK ? save(c, &n, "same file") : NULL;
    CHECK(snap && lean_kv_restore(d, snap, n, &err) == LEAN_OK && lean_ctx_pos(d) == 5,
          "a snapshot into a second load of its file: %s", err.msg);
    CHECK(d && lean_ctx_truncate(d, 0, &err) == LEAN_OK && lean_kv_fork(d, c, 4, &err) == LEAN_OK &&
              lean_ctx_pos(d) == 4,
          "a fork into a second load of its file: %s", err.msg);
    free(snap);
    lean_ctx_free(c), lean_ctx_free(d);
    lean_model_free(again);
}

int main(void) {
    if (test_gpu_skipped("test_kv_snapshot (its GPU contexts)")) n_be = 3;
    static const char *archs[] = {"llama", "qwen2", "qwen3"};
    char paths[3][256], path_f32[256];
    lean_model *models[3];
    for (int k = 0; k < 3; k++) models[k] = load(archs[k], LEAN_TYPE_Q8_0, paths[k], sizeof paths[k]);
    for (int k = 0; k < 3; k++) {
        lean_model *m = models[k];
        if (!m) continue;
        const int32_t V = lean_model_n_vocab(m);
        int32_t prompt[N_PROMPT];
        tiny_ids(prompt, N_PROMPT, V, 11 + (uint64_t)k);
        lean_ctx *a[N_BE] = {0}, *b[N_BE] = {0};
        for (size_t i = 0; i < n_be; i++) /* a second GPU device (~2 s on llvmpipe) for llama only */
            if (k == 0 || strcmp(backends[i].name, "gpu") || backends[i].exact)
                a[i] = test_ctx(m, &backends[i], N_CTX, 8), b[i] = test_ctx(m, &backends[i], N_CTX, 8);
        for (size_t i = 0; i < n_be; i++) {
            char tag[64];
            snprintf(tag, sizeof tag, "%s %s%s", archs[k], backends[i].name, backends[i].exact ? " exact" : "");
            if (!a[i] || !b[i]) continue;
            test_continue(tag, a[i], b[i], prompt, V);
            test_fork_same(tag, a[i], b[i], prompt, V);
        }
        test_fork_pairs(archs[k], a, b); /* a[i] holds the prompt (test_fork_same) */
        test_across(archs[k], a, b, prompt, V);
        for (size_t i = 0; i < n_be; i++) lean_ctx_free(a[i]), lean_ctx_free(b[i]);
    }
    lean_model *f32 = load("llama", LEAN_TYPE_F32, path_f32, sizeof path_f32);
    if (models[0] && models[2] && f32) test_refusals(models[0], models[2], f32);
    lean_model_free(f32);
    if (models[0]) test_same_file(models[0], paths[0]);
    unlink(path_f32);
    for (int k = 0; k < 3; k++) lean_model_free(models[k]), unlink(paths[k]);
    return test_finish("test_kv_snapshot");
}
