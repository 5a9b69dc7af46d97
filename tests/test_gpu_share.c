/* test_gpu_share.c — what the contexts of one model share (DESIGN.md "Lifetimes", backend.h):
 *   - on the GPU, 4 contexts of one model hold one device (lean_gpu_open_count) with one copy of
 *     the weights and 4 KV caches and activations: the device's bytes (lean_gpu_bytes_allocated)
 *     with k contexts are S + k P, S (the model's part) at least the weights' bytes and P (a
 *     context's) at least its KV cache and less than the weights;
 *   - the 4 used in turn (prefills and greedy decode steps interleaved, then resident
 *     generations interleaved) give the logits and ids one context used alone gives, bit for
 *     bit; so do contexts made and used by two threads at once (native builds);
 *   - freeing the contexts leaves the model's bytes (and the read-back staging buffer) on the
 *     device, and freeing the model closes the device;
 *   - a lost device: its contexts fail with LEAN_ERR_DEVICE, the next context gets a new device
 *     (the model does not keep a dead one) with the same logits, and the dead one closes with
 *     its last context;
 *   - a context asking for other device options (exact beside the default) gets a device of its
 *     own, closed with it, while contexts asking alike share the model's;
 *   - the "auto" ladder: an allocation that fails while the GPU rung is built leaves the CPU to
 *     try (lean_ctx_fallback says the GPU ran out of memory), one that fails outside it is
 *     LEAN_ERR_NOMEM; run before any other auto context, which on a software adapter would mark
 *     the process as having no hardware GPU and skip the rung;
 *   - on the CPU, contexts do not copy the weights: the tensors stay views into the file's data
 *     and the heap grows by less than the weights per context (glibc builds without a sanitizer);
 *   - lean_ctx_params.progress: the context that makes the model's part (the first, or the exact
 *     one that goes alone) is told of the upload, done never decreasing, up to done == total ==
 *     the bytes of every tensor the GPU takes (the file's less rope_freqs), within the part's
 *     device bytes; a context on the part made already, and a CPU context, are told nothing.
 *
 * lean-test: webgpu (in wasm32 only the webgpu stage runs it: a JavaScript host with WebGPU) */
#include "core/test_hooks.h"
#include "gpu/test_hooks.h"
#include "gpu/gpu_impl.h"
#include "gpu_test.h"
#include "tiny_model.h"

#include <stdlib.h>

#ifndef __wasi__
#include <pthread.h>
#endif
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#ifndef __has_feature
#define __has_feature(x) 0
#endif

#define N_CTX 64
#define N_PROMPT 7
#define N_STEPS 12 /* greedy ids after the prompt */
#define N_SEQ 4

/* A context whose progress calls go to watch (nullable: none asked for). */
static lean_ctx *new_ctx_watched(const lean_model *m, const char *backend, test_progress *watch) {
    lean_error err;
    lean_ctx *c = NULL;
    lean_ctx_params cp = lean_ctx_default_params();
    cp.backend = backend;
    cp.n_ctx = N_CTX;
    cp.n_batch = 8;
    cp.n_threads = 1;
    if (watch) cp.progress = test_progress_fn, cp.progress_user = watch;
    CHECK(lean_ctx_create(m, &cp, &c, &err) == LEAN_OK, "%s ctx: %s", backend, err.msg);
    return c;
}

static lean_ctx *new_ctx(const lean_model *m, const char *backend) { return new_ctx_watched(m, backend, NULL); }

static lean_gpu *device_of(lean_ctx *c) { return lean_backend_gpu_device(lean_ctx_backend_state(c)); }

static int32_t argmax(const float *x, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* One sequence's greedy run: the logits after the prompt and after each decoded id, the ids. */
typedef struct seq {
    float logits[N_STEPS + 1][128];
    int32_t ids[N_STEPS];
    int32_t gen[N_STEPS]; /* a generation's ids (lean_gen_*, greedy) from the prompt */
} seq;

static void prompt_of(int i, int32_t V, int32_t *ids) { tiny_ids(ids, N_PROMPT, V, 11 + (uint64_t)i); }

/* Step k of sequence i on c: the prompt (k = 0) or the id step k - 1 chose. */
static lean_status step(lean_ctx *c, int i, int k, int32_t V, seq *r, lean_error *err) {
    int32_t prompt[N_PROMPT];
    prompt_of(i, V, prompt);
    lean_status st = k == 0 ? lean_prefill(c, prompt, N_PROMPT, r->logits[0], err)
                            : lean_decode(c, r->ids[k - 1], r->logits[k], err);
    if (st == LEAN_OK && k < N_STEPS) r->ids[k] = argmax(r->logits[k], V);
    return st;
}

static lean_status greedy(lean_ctx *c, int i, int32_t V, seq *r, lean_error *err) {
    lean_status st = lean_ctx_truncate(c, 0, err);
    for (int k = 0; st == LEAN_OK && k <= N_STEPS; k++) st = step(c, i, k, V, r, err);
    return st;
}

/* Begins a greedy generation of sequence i's prompt on c (emptied first). */
static lean_status gen_begin(lean_ctx *c, int i, int32_t V, lean_sampler *smp, lean_error *err) {
    int32_t prompt[N_PROMPT];
    float logits[128];
    prompt_of(i, V, prompt);
    lean_status st = lean_ctx_truncate(c, 0, err);
    if (!st) st = lean_prefill(c, prompt, N_PROMPT, logits, err);
    if (!st) st = lean_gen_begin(c, smp, N_STEPS, err);
    return st;
}

static lean_sampler *greedy_sampler(int32_t V) {
    lean_sampler_params sp = lean_sampler_default_params();
    sp.greedy = 1;
    lean_sampler *smp = NULL;
    lean_error err;
    CHECK(lean_sampler_create(&sp, V, &smp, &err) == LEAN_OK, "sampler: %s", err.msg);
    return smp;
}

static void same_seq(const char *what, int i, const seq *got, const seq *want, int32_t V, bool gen) {
    for (int k = 0; k <= N_STEPS; k++)
        CHECK(memcmp(got->logits[k], want->logits[k], sizeof(float) * (size_t)V) == 0,
              "%s: sequence %d's logits at step %d differ from one context's alone", what, i, k);
    CHECK(memcmp(got->ids, want->ids, sizeof got->ids) == 0, "%s: sequence %d's greedy ids differ", what, i);
    if (gen) CHECK(memcmp(got->gen, want->gen, sizeof got->gen) == 0, "%s: sequence %d's generation differs", what, i);
}

static lean_model *load(const char *path) {
    lean_model *m = NULL;
    lean_error err;
    CHECK(lean_model_load_file(path, &m, &err) == LEAN_OK, "%s: %s", path, err.msg);
    return m;
}

/* The bytes the GPU holds for the model's tensors (F32 vectors as they are, matrices in their
 * file's format, stacks the sum of their parts): at least the file's tensor bytes. */
static uint64_t weight_bytes(const lean_model *m) {
    lean_model_info info;
    lean_model_get_info(m, &info);
    return info.weight_bytes;
}

/* The bytes the GPU takes from the file: every tensor but rope_freqs (the states' RoPE tables
 * hold it); the tiny models have no tensor their architecture does not read. */
static uint64_t upload_bytes(const lean_model *m) { return weight_bytes(m) - m->rope_freqs.n_bytes; }

/* what told the upload of a model's part: calls in order up to done == total == its bytes */
static void check_upload(const char *what, const test_progress *p, const lean_model *m) {
    CHECK(p->calls > 0 && !p->broken, "%s: %llu progress calls, %s", what, (unsigned long long)p->calls,
          p->broken ? "out of order" : "in order");
    CHECK(p->done == p->total && p->total == upload_bytes(m), "%s: the last call says %llu of %llu bytes, not %llu",
          what, (unsigned long long)p->done, (unsigned long long)p->total, (unsigned long long)upload_bytes(m));
}

/* ---- threads ---- */

#ifndef __wasi__
typedef struct thread_job {
    const lean_model *m;
    int i;
    seq got;
    lean_status st;
    lean_error err;
} thread_job;

/* A context made, used and freed by this thread while another does the same on the model. */
static void *thread_main(void *arg) {
    thread_job *j = arg;
    lean_ctx_params cp = lean_ctx_default_params();
    cp.backend = "gpu";
    cp.n_ctx = N_CTX;
    cp.n_batch = 8;
    lean_ctx *c = NULL;
    j->st = lean_ctx_create(j->m, &cp, &c, &j->err);
    if (j->st == LEAN_OK) j->st = greedy(c, j->i, lean_model_n_vocab(j->m), &j->got, &j->err);
    lean_ctx_free(c);
    return NULL;
}

static void test_threads(const lean_model *m, const seq *alone) {
    thread_job *jobs = calloc(2, sizeof *jobs);
    pthread_t t[2];
    bool started[2];
    for (int k = 0; k < 2; k++) {
        jobs[k] = (thread_job){.m = m, .i = k};
        started[k] = pthread_create(&t[k], NULL, thread_main, &jobs[k]) == 0;
        CHECK(started[k], "pthread_create");
    }
    for (int k = 0; k < 2; k++) {
        if (!started[k]) continue;
        pthread_join(t[k], NULL);
        CHECK(jobs[k].st == LEAN_OK, "thread %d: %s", k, jobs[k].err.msg);
        if (jobs[k].st == LEAN_OK) same_seq("two threads", k, &jobs[k].got, &alone[k], lean_model_n_vocab(m), false);
    }
    free(jobs);
}
#endif

/* ---- 4 contexts, one copy of the weights ---- */

static void test_share(const char *path) {
    lean_error err;
    const int n_open = lean_gpu_open_count();
    lean_model *m = load(path);
    if (!m) return;
    const int32_t V = lean_model_n_vocab(m);
    lean_ctx *c[N_SEQ] = {NULL};
    uint64_t bytes[N_SEQ + 1] = {0}; /* bytes[k]: with k contexts */
    lean_gpu *g = NULL;
    test_progress told[N_SEQ] = {{0}}; /* what each context's progress callback heard */
    for (int i = 0; i < N_SEQ; i++) {
        c[i] = new_ctx_watched(m, "gpu", &told[i]);
        if (!c[i]) goto out;
        if (!g) g = device_of(c[i]);
        CHECK(device_of(c[i]) == g, "context %d has a device of its own", i);
        bytes[i + 1] = lean_gpu_bytes_allocated(g);
    }
    CHECK(lean_gpu_open_count() == n_open + 1, "%d devices open for %d contexts of one model",
          lean_gpu_open_count() - n_open, N_SEQ);
    const uint64_t P = bytes[2] - bytes[1], S = bytes[1] - P;
    const lean_hparams *hp = &m->hp;
    const uint64_t kv = 2ull * (uint64_t)hp->n_layer * N_CTX * (uint64_t)lean_kv_dim(hp) * 4;
    printf("gpu bytes: model %llu (weights in the file %llu), per context %llu (KV cache %llu); with 1..4 contexts:",
           (unsigned long long)S, (unsigned long long)weight_bytes(m), (unsigned long long)P, (unsigned long long)kv);
    for (int k = 1; k <= N_SEQ; k++) printf(" %llu", (unsigned long long)bytes[k]);
    printf("\n");
    /* The KV caches are slots of the model's pool (src/gpu/kvpool.h): contexts 1 and 2 get a
     * page of one slot each, context 3 a page of two (the slots there are), which context 4 fills;
     * a page's contexts share its RoPE table (N_CTX x head_dim F32), so 4 contexts hold one
     * table less than 4 alone would, and 3 sit in between. */
    const uint64_t rope = (uint64_t)N_CTX * (uint64_t)hp->head_dim * 4;
    for (int k = 1; k <= 2; k++)
        CHECK(bytes[k] == S + (uint64_t)k * P, "%d contexts hold %llu bytes, not model %llu + %d x %llu", k,
              (unsigned long long)bytes[k], (unsigned long long)S, k, (unsigned long long)P);
    CHECK(bytes[4] == S + 4 * P - rope, "4 contexts hold %llu bytes, not model %llu + 4 x %llu - %llu",
          (unsigned long long)bytes[4], (unsigned long long)S, (unsigned long long)P, (unsigned long long)rope);
    CHECK(bytes[2] < bytes[3] && bytes[3] < bytes[4], "3 contexts hold %llu bytes: not between 2's and 4's",
          (unsigned long long)bytes[3]);
    CHECK(S >= weight_bytes(m), "the model's part holds %llu bytes, less than its weights' %llu",
          (unsigned long long)S, (unsigned long long)weight_bytes(m));
    CHECK(P >= kv && P < weight_bytes(m), "a context holds %llu bytes: not its KV cache (%llu) without weights (%llu)",
          (unsigned long long)P, (unsigned long long)kv, (unsigned long long)weight_bytes(m));
    printf("progress: the first context heard %llu calls, up to %llu of %llu bytes\n",
           (unsigned long long)told[0].calls, (unsigned long long)told[0].done, (unsigned long long)told[0].total);
    check_upload("the first context", &told[0], m);
    CHECK(told[0].total <= S, "%llu bytes uploaded, but the model's part holds %llu",
          (unsigned long long)told[0].total, (unsigned long long)S);
    for (int i = 1; i < N_SEQ; i++)
        CHECK(told[i].calls == 0, "context %d, on the model's part made already, heard %llu progress calls", i,
              (unsigned long long)told[i].calls);

    /* each sequence alone on context 0, then the 4 interleaved, one step each in turn */
    seq *alone = calloc(N_SEQ, sizeof *alone), *got = calloc(N_SEQ, sizeof *got);
    lean_sampler *smp[N_SEQ];
    for (int i = 0; i < N_SEQ; i++) smp[i] = greedy_sampler(V);
    lean_status st = LEAN_OK;
    for (int i = 0; st == LEAN_OK && i < N_SEQ; i++) {
        st = greedy(c[0], i, V, &alone[i], &err);
        if (!st) st = gen_begin(c[0], i, V, smp[0], &err);
        for (int k = 0; !st && k < N_STEPS; k++) st = lean_gen_next(c[0], &alone[i].gen[k], &err);
        lean_gen_end(c[0]);
    }
    CHECK(st == LEAN_OK, "alone: %s", err.msg);
    for (int i = 0; st == LEAN_OK && i < N_SEQ; i++) st = lean_ctx_truncate(c[i], 0, &err);
    for (int k = 0; st == LEAN_OK && k <= N_STEPS; k++)
        for (int i = 0; st == LEAN_OK && i < N_SEQ; i++) st = step(c[i], i, k, V, &got[i], &err);
    for (int i = 0; st == LEAN_OK && i < N_SEQ; i++) st = gen_begin(c[i], i, V, smp[i], &err);
    for (int k = 0; st == LEAN_OK && k < N_STEPS; k++)
        for (int i = 0; st == LEAN_OK && i < N_SEQ; i++) st = lean_gen_next(c[i], &got[i].gen[k], &err);
    for (int i = 0; i < N_SEQ; i++) lean_gen_end(c[i]);
    CHECK(st == LEAN_OK, "interleaved: %s", err.msg);
    for (int i = 0; st == LEAN_OK && i < N_SEQ; i++) same_seq("interleaved", i, &got[i], &alone[i], V, true);
#ifndef __wasi__
    if (st == LEAN_OK) test_threads(m, alone);
#endif
    for (int i = 0; i < N_SEQ; i++) lean_sampler_free(smp[i]);
    free(alone);
    free(got);

    for (int i = 0; i < N_SEQ; i++) lean_ctx_free(c[i]), c[i] = NULL;
    const uint64_t staging = g->staging ? g->staging->size : 0;
    CHECK(lean_gpu_bytes_allocated(g) == S + staging,
          "with every context freed the device holds %llu bytes, not the model's %llu + staging %llu",
          (unsigned long long)lean_gpu_bytes_allocated(g), (unsigned long long)S, (unsigned long long)staging);
out:
    for (int i = 0; i < N_SEQ; i++) lean_ctx_free(c[i]);
    lean_model_free(m);
    CHECK(lean_gpu_open_count() == n_open, "%d devices open after lean_model_free", lean_gpu_open_count() - n_open);
}

/* ---- a lost device ---- */

static void test_lost(const char *path) {
    lean_error err;
    const int n_open = lean_gpu_open_count();
    lean_model *m = load(path);
    if (!m) return;
    const int32_t V = lean_model_n_vocab(m);
    seq *r = calloc(2, sizeof *r);
    lean_ctx *a = new_ctx(m, "gpu"), *b = NULL;
    if (a) {
        CHECK(greedy(a, 0, V, &r[0], &err) == LEAN_OK, "before the loss: %s", err.msg);
        lean_gpu *lost = device_of(a);
        lean_gpu_lose_device(lost);
        CHECK(lean_decode(a, 1, r[0].logits[0], &err) == LEAN_ERR_DEVICE, "decode on the lost device");
        b = new_ctx(m, "gpu");
        if (b) {
            CHECK(device_of(b) != lost, "a new context took the lost device");
            CHECK(lean_gpu_open_count() == n_open + 2, "%d devices open: the lost one (its context lives on) and "
                  "the new one", lean_gpu_open_count() - n_open);
            CHECK(greedy(b, 0, V, &r[1], &err) == LEAN_OK, "on the new device: %s", err.msg);
            same_seq("the new device", 0, &r[1], &r[0], V, false);
        }
        CHECK(lean_decode(a, 1, NULL, &err) == LEAN_ERR_DEVICE, "the lost device's context after the new one");
        lean_ctx_free(a);
        CHECK(lean_gpu_open_count() == n_open + (b != NULL), "the lost device closes with its last context");
    }
    lean_ctx_free(b);
    lean_model_free(m);
    free(r);
    CHECK(lean_gpu_open_count() == n_open, "%d devices open after lean_model_free", lean_gpu_open_count() - n_open);
}

/* A context whose device options differ from the model's device (here exact, which turns the
 * f16 and 8-bit paths off, against the default) cannot share it: it gets a device of its own,
 * freed with it; its logits are the shared device's where both run the same path (llvmpipe has
 * neither fast path, so both are exact here). */
static void test_options(const char *path) {
    lean_error err;
    const int n_open = lean_gpu_open_count();
    lean_model *m = load(path);
    if (!m) return;
    const int32_t V = lean_model_n_vocab(m);
    seq *r = calloc(3, sizeof *r);
    lean_ctx *a = new_ctx(m, "gpu"), *b = new_ctx(m, "gpu"), *x = NULL;
    lean_ctx_params cp = lean_ctx_default_params();
    test_progress told = {0};
    cp.backend = "gpu", cp.n_ctx = N_CTX, cp.n_batch = 8, cp.exact = true;
    cp.progress = test_progress_fn, cp.progress_user = &told;
    CHECK(lean_ctx_create(m, &cp, &x, &err) == LEAN_OK, "exact ctx: %s", err.msg);
    if (x) check_upload("the exact context (a part of its own)", &told, m);
    if (a && b && x) {
        CHECK(device_of(a) == device_of(b), "two default contexts share the model's device");
        CHECK(device_of(x) != device_of(a), "the exact context took the default's device");
        CHECK(lean_gpu_open_count() == n_open + 2, "%d devices open: the model's and the exact context's",
              lean_gpu_open_count() - n_open);
        CHECK(greedy(a, 0, V, &r[0], &err) == LEAN_OK && greedy(x, 0, V, &r[1], &err) == LEAN_OK,
              "greedy: %s", err.msg);
        if (!lean_gpu_f16(device_of(a)) && !lean_gpu_int8(device_of(a)))
            same_seq("exact beside the default, both exact", 0, &r[1], &r[0], V, false);
    }
    lean_ctx_free(x);
    CHECK(lean_gpu_open_count() == n_open + (a || b), "the exact context's device closes with it");
    lean_ctx_free(a);
    lean_ctx_free(b);
    lean_model_free(m);
    free(r);
    CHECK(lean_gpu_open_count() == n_open, "%d devices open after lean_model_free", lean_gpu_open_count() - n_open);
}

/* ---- the CPU: views into the mapping ---- */

/* t's data is the model's own: in the mapping (or, streamed, its one weight buffer) at its
 * offset in the file's data section, not a copy. */
static bool is_view(const lean_model *m, const lean_tensor *t) {
    const char *base = m->map.data ? (const char *)m->map.data + m->gguf->data_offset : m->weights;
    return t->data && t->data == base + t->offset;
}

static uint64_t heap_bytes(void) {
#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__) && !__has_feature(address_sanitizer)
    const struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
#else
    return 0; /* no count here (a sanitizer's allocator, another libc) */
#endif
}

static void test_auto_out_of_memory(const char *path) {
    lean_model *m = load(path);
    if (!m) return;
    lean_ctx_params cp = lean_ctx_default_params();
    cp.n_ctx = N_CTX, cp.n_batch = 8, cp.n_threads = 1;
    int fell = 0, nomem = 0, other = 0;
    for (uint64_t n = 1; n < 100000; n++) {
        lean_error err = {0};
        lean_ctx *c = NULL;
        lean_alloc_fail_at(n, false);
        const lean_status st = lean_ctx_create(m, &cp, &c, &err);
        const uint64_t used = lean_alloc_fail_at(0, false);
        const char *why = st == LEAN_OK ? lean_ctx_fallback(c) : NULL;
        char text[128];
        if (st == LEAN_OK && why && strstr(why, "(out of memory)")) {
            fell++;
            CHECK(!strncmp(lean_ctx_backend_str(c, text, sizeof text), "cpu", 3), "fell back to %s", text);
        } else if (st == LEAN_ERR_NOMEM) {
            nomem++;
        } else if (st != LEAN_OK) {
            other++;
            CHECK(0, "allocation %llu failing: status %d (%s)", (unsigned long long)n, st, err.msg);
        }
        lean_ctx_free(c);
        if (used < n) break; /* no allocation failed: the sweep is over */
    }
    printf("auto, each allocation failing in turn: %d fell back to the cpu, %d out of memory\n", fell, nomem);
    CHECK(fell > 0 && nomem > 0 && !other, "auto: %d fell back, %d out of memory, %d other", fell, nomem, other);
    lean_model_free(m);
}

static void test_cpu(const char *path) {
    lean_model *m = load(path);
    if (!m) return;
    lean_ctx *c[N_SEQ] = {NULL};
    test_progress told = {0};
    const uint64_t before = heap_bytes();
    for (int i = 0; i < N_SEQ; i++) c[i] = new_ctx_watched(m, "cpu", i ? NULL : &told);
    const uint64_t per = (heap_bytes() - before) / N_SEQ;
    CHECK(told.calls == 0, "a cpu context heard %llu progress calls", (unsigned long long)told.calls);
    CHECK(is_view(m, &m->tok_embd) && is_view(m, &m->layers[0].wq) && is_view(m, &m->layers[m->hp.n_layer - 1].w_down),
          "the model's tensors are not views into its file's data");
    if (before) {
        printf("cpu heap bytes per context: %llu (weights %llu)\n", (unsigned long long)per,
               (unsigned long long)weight_bytes(m));
        CHECK(per > 0 && per < weight_bytes(m), "a cpu context takes %llu heap bytes, weights %llu",
              (unsigned long long)per, (unsigned long long)weight_bytes(m));
    } else {
        printf("test_gpu_share: no heap count here (a sanitizer, or not glibc): cpu contexts' bytes unchecked\n");
    }
    for (int i = 0; i < N_SEQ; i++) lean_ctx_free(c[i]);
    lean_model_free(m);
}

int main(void) {
    lean_gpu *g0 = test_gpu_open("test_gpu_share");
    if (!g0) return test_finish("test_gpu_share");
    lean_gpu_close(g0);
    char path[256];
    lean_error err;
    tiny_spec sp = tiny_default("llama"); /* F32: weights several times a context's bytes at N_CTX */
    tiny_path(path, sizeof path);
    CHECK(tiny_write(&sp, path, NULL, &err) == LEAN_OK, "%s: %s", path, err.msg);
    test_auto_out_of_memory(path);
    test_share(path);
    test_lost(path);
    test_options(path);
    test_cpu(path);
    unlink(path);
    return test_finish("test_gpu_share");
}
