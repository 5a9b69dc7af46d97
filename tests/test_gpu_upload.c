/* test_gpu_upload.c — the weights' way to the GPU (DESIGN.md principle 1, issue 24 item 5):
 *   - bounded writes: between two submits at most 8 MiB of queue writes are pending, counted
 *     across writes (lean_gpu_write_pending_peak): many 1 MiB writes and one of 20 MiB read back
 *     intact with the peak at 8 MiB; a model whose tensors are larger (a 10.9 MB Q8_0 embedding)
 *     and smaller (norms, 2 MiB F32 matrices adding up past 8 MiB) than that uploads with the
 *     peak <= 8 MiB, loaded normally and GPU-only;
 *   - the GPU-only load (lean_model_params.gpu_only) over a read callback, pushed through a
 *     lean_model_loader in pieces of 1 byte to 3 MiB, and from a path: on fixture models of
 *     every format and architecture, and tiny ones with rope_freqs and a tied output, the logits
 *     after a prompt and the greedy ids after it are the normal load's GPU context's, bit for
 *     bit; a pushed host load's tensors are the mapped file's; the stream is read forward only (each read at or past the last one's offset), in
 *     reads of at most 8 MiB; progress runs up to the bytes the GPU takes; the host allocates
 *     less than the weights (the normal streamed load's bytes less its weights, plus at most
 *     16 MiB: the 8 MiB piece and the repack scratch);
 *   - what such a model refuses: a CPU context (LEAN_ERR_UNSUPPORTED naming GPU-only), a context
 *     asking for other device settings (exact), a CPU backend for the load itself (LEAN_ERR_ARG);
 *     an "auto" context shares its device;
 *   - a stream that ends early (inside a tensor, inside the header), pulled or pushed, fails
 *     cleanly: LEAN_ERR_IO naming the tensor or the header, no model, the device closed; a push
 *     past the file's size is refused, and end returns the refusal.
 *
 * lean-test: webgpu (in wasm32 only the webgpu stage runs it: a JavaScript host with WebGPU) */
#include "core/common.h"
#include "core/gguf.h"
#include "core/model.h"
#include "core/test_hooks.h"
#include "gpu/test_hooks.h"
#include "gpu_test.h"
#include "tiny_model.h"

#include <stdlib.h>

#define MIB ((uint64_t)1 << 20)
#define N_CTX 64
#define N_PROMPT 6
#define N_GEN 8

/* A read callback over a file that checks the reads go forward and stops at limit bytes. */
typedef struct reader {
    FILE *fp;
    uint64_t limit;    /* reads past it come short (a truncated download) */
    uint64_t last_off; /* the last read's offset */
    uint64_t max_n;    /* the largest read */
    int backwards;     /* a read began before the last one */
} reader;

static size_t read_fn(void *user, uint64_t off, void *dst, size_t n) {
    reader *r = user;
    if (off < r->last_off) r->backwards = 1;
    r->last_off = off;
    if (n > r->max_n) r->max_n = n;
    if (off >= r->limit) return 0;
    if (n > r->limit - off) n = (size_t)(r->limit - off);
    if (fseeko(r->fp, (off_t)off, SEEK_SET) != 0) return 0;
    return fread(dst, 1, n, r->fp);
}

static uint64_t file_size(FILE *fp) {
    fseeko(fp, 0, SEEK_END);
    return (uint64_t)ftello(fp);
}

/* The model at path loaded GPU-only through read_fn (limit: bytes the stream gives). */
static lean_status load_gpu_only(const char *path, uint64_t limit, const lean_ctx_params *cp, test_progress *watch,
                                 reader *r, lean_model **m, lean_error *err) {
    *r = (reader){.fp = fopen(path, "rb")};
    if (!r->fp) return LEAN_FAIL(err, LEAN_ERR_IO, "cannot open %s", path);
    const uint64_t size = file_size(r->fp);
    r->limit = limit < size ? limit : size;
    lean_model_params p = lean_model_default_params();
    p.gpu_only = 1;
    p.gpu_params = cp;
    if (watch) p.progress = test_progress_fn, p.progress_user = watch;
    lean_status st = lean_model_load_stream_params(read_fn, r, size, &p, m, err);
    fclose(r->fp);
    return st;
}

/* The model at path pushed through a lean_model_loader in pieces of varying sizes (1 byte to
 * 3 MiB), the first limit bytes only; gpu_only as asked. */
static lean_status load_pushed(const char *path, uint64_t limit, bool gpu_only, const lean_ctx_params *cp,
                               lean_model **m, lean_error *err) {
    size_t size = 0;
    uint8_t *bytes = test_read_file(path, &size);
    if (!bytes) return LEAN_FAIL(err, LEAN_ERR_IO, "cannot read %s", path);
    lean_model_params p = lean_model_default_params();
    p.gpu_only = gpu_only;
    p.gpu_params = cp;
    lean_model_loader *l = NULL;
    lean_status st = lean_model_loader_begin(size, &p, &l, err);
    static const size_t pieces[] = {1, 7, 4096, 65535, 3 << 20, 100, 1 << 20};
    const uint64_t end = limit < size ? limit : size;
    for (uint64_t at = 0, i = 0; !st && at < end; i++) {
        const size_t n = (size_t)(end - at < pieces[i % 7] ? end - at : pieces[i % 7]);
        st = lean_model_loader_push(l, bytes + at, n, err);
        at += n;
    }
    lean_error end_err;
    const lean_status st_end = l ? lean_model_loader_end(l, m, &end_err) : st;
    CHECK(st == LEAN_OK || st_end == st, "a failed push's error comes back from end: %d, then %d", st, st_end);
    if (!st && err) *err = end_err;
    free(bytes);
    return st ? st : st_end;
}

static lean_ctx_params gpu_params(const char *backend) {
    lean_ctx_params cp = lean_ctx_default_params();
    cp.backend = backend;
    cp.n_ctx = N_CTX;
    cp.n_batch = 4; /* the prompt in two chunks */
    cp.exact = 1;
    return cp;
}

static lean_gpu *device_of(lean_ctx *c) { return lean_backend_gpu_device(lean_ctx_backend_state(c)); }

/* What a context computes: the logits after the prompt, then greedy ids (resident). */
typedef struct run {
    float *logits;
    int32_t ids[N_GEN];
    bool ok;
} run;

static run run_model(const lean_model *m, const char *what, test_progress *watch) {
    run r = {.logits = malloc(sizeof(float) * (size_t)lean_model_n_vocab(m))};
    lean_error err;
    lean_ctx *c = NULL;
    lean_sampler *smp = NULL;
    lean_ctx_params cp = gpu_params("gpu");
    if (watch) cp.progress = test_progress_fn, cp.progress_user = watch;
    int32_t prompt[N_PROMPT];
    tiny_ids(prompt, N_PROMPT, lean_model_n_vocab(m), 5);
    lean_sampler_params sp = lean_sampler_default_params();
    sp.temperature = 0; /* greedy */
    lean_status st = lean_ctx_create(m, &cp, &c, &err);
    if (!st) st = lean_prefill(c, prompt, N_PROMPT, r.logits, &err);
    if (!st) st = lean_sampler_create(&sp, lean_model_n_vocab(m), &smp, &err);
    if (!st) st = lean_gen_begin(c, smp, N_GEN, &err);
    for (int i = 0; !st && i < N_GEN; i++) st = lean_gen_next(c, &r.ids[i], &err);
    lean_gen_end(c);
    CHECK(st == LEAN_OK, "%s: %s", what, err.msg);
    r.ok = st == LEAN_OK;
    lean_sampler_free(smp);
    lean_ctx_free(c);
    return r;
}

/* The GPU-only load of path equals the normal one; the stream goes forward, in bounded reads. */
static void check_same(const char *path, const char *what) {
    lean_error err;
    lean_model *a = NULL, *b = NULL;
    if (lean_model_load_file(path, &a, &err) != LEAN_OK) {
        CHECK(false, "%s: %s", what, err.msg);
        return;
    }
    const lean_ctx_params cp = gpu_params("gpu");
    test_progress watch = {0};
    reader r;
    const lean_status st = load_gpu_only(path, UINT64_MAX, &cp, &watch, &r, &b, &err);
    CHECK(st == LEAN_OK, "%s gpu-only: %s", what, err.msg);
    if (st == LEAN_OK) {
        CHECK(!r.backwards && r.max_n <= 8 * MIB, "%s: reads %s, the largest %llu bytes", what,
              r.backwards ? "went back" : "forward", (unsigned long long)r.max_n);
        test_progress ctx_watch = {0}; /* the normal load's first GPU context uploads */
        run x = run_model(a, what, &ctx_watch), y = run_model(b, what, NULL);
        lean_model *c = NULL;
        const lean_status pushed = load_pushed(path, UINT64_MAX, true, &cp, &c, &err);
        CHECK(pushed == LEAN_OK, "%s pushed gpu-only: %s", what, err.msg);
        run z = pushed ? (run){0} : run_model(c, what, NULL);
        if (x.ok && z.ok)
            CHECK(!memcmp(x.logits, z.logits, sizeof(float) * (size_t)lean_model_n_vocab(a)) &&
                      !memcmp(x.ids, z.ids, sizeof x.ids),
                  "%s: the pushed GPU-only load computes otherwise", what);
        free(z.logits);
        lean_model_free(c);
        lean_model_params fp = lean_model_default_params(); /* a path: read through stdio */
        fp.gpu_only = 1, fp.gpu_params = &cp, c = NULL;
        const lean_status filed = lean_model_load_file_params(path, &fp, &c, &err);
        CHECK(filed == LEAN_OK, "%s file gpu-only: %s", what, err.msg);
        z = filed ? (run){0} : run_model(c, what, NULL);
        if (x.ok && z.ok)
            CHECK(!memcmp(x.logits, z.logits, sizeof(float) * (size_t)lean_model_n_vocab(a)) &&
                      !memcmp(x.ids, z.ids, sizeof x.ids),
                  "%s: the file's GPU-only load computes otherwise", what);
        free(z.logits);
        lean_model_free(c);
        CHECK(!watch.broken && watch.calls > 0 && watch.done == watch.total && watch.total == ctx_watch.total,
              "%s: progress %llu calls, %llu of %llu (a context's upload: %llu)", what, (unsigned long long)watch.calls,
              (unsigned long long)watch.done, (unsigned long long)watch.total, (unsigned long long)ctx_watch.total);
        if (x.ok && y.ok) {
            const size_t V = (size_t)lean_model_n_vocab(a);
            CHECK(!memcmp(x.logits, y.logits, sizeof(float) * V), "%s: gpu-only logits differ", what);
            CHECK(!memcmp(x.ids, y.ids, sizeof x.ids), "%s: gpu-only greedy ids differ (%d vs %d first)", what,
                  x.ids[0], y.ids[0]);
        }
        free(x.logits);
        free(y.logits);
    }
    lean_model_free(b);
    lean_model_free(a);
}

/* Many small writes and one large one: the peak pending stays at 8 MiB, the bytes land. */
static void test_write_pending(void) {
    lean_gpu *g = test_gpu_open("test_gpu_upload");
    if (!g) return;
    lean_error err;
    lean_gpu_buf *b = NULL;
    const uint64_t n_small = 24, big = 20 * MIB, total = n_small * MIB + big;
    uint32_t *src = malloc(total), *back = malloc(total);
    for (uint64_t i = 0; i < total / 4; i++) src[i] = (uint32_t)(i * 2654435761u);
    lean_status st = lean_gpu_buf_create(g, total, LEAN_GPU_STORAGE, "pending", &b, &err);
    (void)lean_gpu_write_pending_peak(g, true);
    for (uint64_t i = 0; !st && i < n_small; i++) st = lean_gpu_buf_write(g, b, i * MIB, (char *)src + i * MIB, MIB, &err);
    if (!st) st = lean_gpu_buf_write(g, b, n_small * MIB, (char *)src + n_small * MIB, big, &err);
    const uint64_t peak = lean_gpu_write_pending_peak(g, false);
    if (!st) st = lean_gpu_buf_read(g, b, 0, back, total, &err);
    CHECK(st == LEAN_OK, "writes: %s", err.msg);
    CHECK(st || !memcmp(src, back, total), "the written bytes do not read back");
    CHECK(peak == 8 * MIB, "pending peak over %llu writes of 1 MiB and one of 20 MiB: %llu bytes (want 8 MiB)",
          (unsigned long long)n_small, (unsigned long long)peak);
    lean_gpu_buf_free(b);
    lean_gpu_close(g);
    free(src);
    free(back);
}

/* A model with tensors larger and smaller than 8 MiB: token_embd Q8_0 of 10.9 MB (two read
 * pieces, the first of an odd number of blocks), 2 MiB F32 gate, up, down, small norms. */
static tiny_spec big_spec(void) {
    tiny_spec sp = tiny_default("llama");
    sp.n_embd = 256, sp.n_head = 4, sp.n_head_kv = 2, sp.head_dim = 64, sp.n_ff = 2048, sp.n_vocab = 40000;
    sp.tied = 1, sp.embd_type = LEAN_TYPE_Q8_0, sp.matrix_type = LEAN_TYPE_F32, sp.rope_freqs = 1;
    return sp;
}

static void test_big_model(const char *path) {
    lean_error err;
    lean_model *m = NULL, *s = NULL, *g = NULL;
    CHECK(lean_model_load_file(path, &m, &err) == LEAN_OK, "load: %s", err.msg);
    if (!m) return;
    lean_model_info info;
    lean_model_get_info(m, &info);
    /* the normal load's device: every tensor written, the pending peak within 8 MiB */
    const lean_ctx_params cp = gpu_params("gpu");
    lean_ctx *c = NULL;
    if (lean_ctx_create(m, &cp, &c, &err) == LEAN_OK) {
        const uint64_t peak = lean_gpu_write_pending_peak(device_of(c), false);
        CHECK(peak <= 8 * MIB && peak > 4 * MIB, "normal load: pending peak %llu bytes (weights %llu)",
              (unsigned long long)peak, (unsigned long long)info.weight_bytes);
        lean_ctx_free(c);
    } else {
        CHECK(false, "gpu ctx: %s", err.msg);
    }
    /* host bytes: a normal streamed load's hold the weights; a GPU-only load's do not */
    FILE *fp = fopen(path, "rb");
    const uint64_t size = file_size(fp);
    lean_alloc_fail_at(0, false);
    CHECK(lean_model_load_stream(lean_read_stdio, fp, size, &s, &err) == LEAN_OK, "streamed: %s", err.msg);
    const uint64_t streamed = lean_alloc_bytes();
    fclose(fp);
    reader r;
    lean_alloc_fail_at(0, false);
    const lean_status st = load_gpu_only(path, UINT64_MAX, &cp, NULL, &r, &g, &err);
    const uint64_t gpu_only = lean_alloc_bytes();
    CHECK(st == LEAN_OK, "gpu-only: %s", err.msg);
    CHECK(streamed >= info.weight_bytes && gpu_only + info.weight_bytes <= streamed + 16 * MIB,
          "host bytes asked: GPU-only %llu, streamed %llu, weights %llu", (unsigned long long)gpu_only,
          (unsigned long long)streamed, (unsigned long long)info.weight_bytes);
    CHECK(gpu_only < info.weight_bytes, "GPU-only load: %llu host bytes for %llu of weights",
          (unsigned long long)gpu_only, (unsigned long long)info.weight_bytes);
    lean_model *pm = NULL;
    lean_alloc_fail_at(0, false);
    CHECK(load_pushed(path, UINT64_MAX, true, &cp, &pm, &err) == LEAN_OK, "pushed gpu-only: %s", err.msg);
    const uint64_t pushed = lean_alloc_bytes();
    lean_model_free(pm);
    CHECK(pushed + info.weight_bytes <= streamed + 16 * MIB, "host bytes asked: pushed GPU-only %llu, streamed %llu",
          (unsigned long long)pushed, (unsigned long long)streamed);
    printf("big model: weights %llu bytes; host bytes asked: streamed %llu, GPU-only %llu, pushed GPU-only %llu\n",
           (unsigned long long)info.weight_bytes, (unsigned long long)streamed, (unsigned long long)gpu_only,
           (unsigned long long)pushed);
    if (st == LEAN_OK) {
        /* the load's device: its first context finds the peak of the streamed upload */
        if (lean_ctx_create(g, &cp, &c, &err) == LEAN_OK) {
            const uint64_t peak = lean_gpu_write_pending_peak(device_of(c), false);
            CHECK(peak <= 8 * MIB && peak > 4 * MIB, "gpu-only load: pending peak %llu bytes", (unsigned long long)peak);
            lean_ctx_free(c);
        } else {
            CHECK(false, "gpu-only ctx: %s", err.msg);
        }
    }
    lean_model_free(g);
    lean_model_free(s);
    lean_model_free(m);
}

/* What a GPU-only model refuses, and a stream that ends early. */
static void test_refusals(const char *path) {
    lean_error err;
    lean_model *m = NULL;
    reader r;
    const lean_ctx_params cp = gpu_params("gpu");
    const int open0 = lean_gpu_open_count();
    if (load_gpu_only(path, UINT64_MAX, &cp, NULL, &r, &m, &err) != LEAN_OK) {
        CHECK(false, "gpu-only: %s", err.msg);
        return;
    }
    lean_ctx *c = NULL;
    lean_ctx_params other = gpu_params("cpu");
    CHECK(lean_ctx_create(m, &other, &c, &err) == LEAN_ERR_UNSUPPORTED && !c && strstr(err.msg, "GPU-only"),
          "a cpu context: %s", err.msg);
    other = gpu_params("cpu-ref");
    CHECK(lean_ctx_create(m, &other, &c, &err) == LEAN_ERR_UNSUPPORTED && !c, "a cpu-ref context: %s", err.msg);
    other = gpu_params("gpu");
    other.exact = 0;
    CHECK(lean_ctx_create(m, &other, &c, &err) == LEAN_ERR_UNSUPPORTED && !c && strstr(err.msg, "GPU-only"),
          "a context of other settings: %s", err.msg);
    other = gpu_params("auto"); /* the load's device, software adapter or not */
    CHECK(lean_ctx_create(m, &other, &c, &err) == LEAN_OK && lean_gpu_open_count() == open0 + 1,
          "an auto context: %s", err.msg);
    lean_ctx_free(c);
    lean_model_free(m);
    CHECK(lean_gpu_open_count() == open0, "the device closes with the model");

    other = gpu_params("cpu");
    m = NULL;
    CHECK(load_gpu_only(path, UINT64_MAX, &other, NULL, &r, &m, &err) == LEAN_ERR_ARG && !m,
          "gpu-only on the CPU: %s", err.msg);
    /* ends inside the last tensor, then inside the header */
    FILE *fp = fopen(path, "rb");
    const uint64_t size = file_size(fp);
    fclose(fp);
    const uint64_t cut[] = {size - 100, 40};
    for (int i = 0; i < 2; i++) {
        m = NULL;
        const lean_status st = load_gpu_only(path, cut[i], &cp, NULL, &r, &m, &err);
        CHECK(st != LEAN_OK && !m && lean_gpu_open_count() == open0, "truncated at %llu: %d %s",
              (unsigned long long)cut[i], st, err.msg);
        if (i == 0)
            CHECK(st == LEAN_ERR_IO && strstr(err.msg, "reading tensor '"), "truncated in a tensor: %s", err.msg);
        for (int gpu = 0; gpu < 2; gpu++) { /* the same bytes pushed, to the GPU or the host */
            m = NULL;
            const lean_status sp = load_pushed(path, cut[i], gpu, &cp, &m, &err);
            CHECK(sp == LEAN_ERR_IO && !m && lean_gpu_open_count() == open0 &&
                      strstr(err.msg, i == 0 ? (gpu ? "reading tensor '" : "reading tensor data") : "inside the header"),
                  "pushed (%s), truncated at %llu: %d %s", gpu ? "gpu-only" : "host", (unsigned long long)cut[i], sp,
                  err.msg);
        }
    }
    /* more bytes than the file has: refused, and the refusal is end's too */
    lean_model_loader *l = NULL;
    static const uint8_t junk[8];
    CHECK(lean_model_loader_begin(4, NULL, &l, &err) == LEAN_OK && lean_model_loader_push(l, junk, 8, &err) == LEAN_ERR_ARG &&
              lean_model_loader_push(l, junk, 1, &err) == LEAN_ERR_ARG && lean_model_loader_end(l, &m, &err) == LEAN_ERR_ARG &&
              !m,
          "a push past the file: %s", err.msg);
}

/* A host load pushed in pieces equals the mapped one: the same bytes behind every view. */
static void test_pushed_host(const char *path) {
    lean_error err;
    lean_model *a = NULL, *b = NULL;
    CHECK(lean_model_load_file(path, &a, &err) == LEAN_OK, "load: %s", err.msg);
    CHECK(load_pushed(path, UINT64_MAX, false, NULL, &b, &err) == LEAN_OK, "pushed: %s", err.msg);
    if (a && b) {
        bool same = !memcmp(a->tok_embd.data, b->tok_embd.data, a->tok_embd.n_bytes) &&
                    !memcmp(a->output_norm.data, b->output_norm.data, a->output_norm.n_bytes);
        for (int il = 0; il < a->hp.n_layer; il++)
            same = same && !memcmp(a->layers[il].w_down.data, b->layers[il].w_down.data, a->layers[il].w_down.n_bytes) &&
                   !memcmp(a->layers[il].wq.data, b->layers[il].wq.data, a->layers[il].wq.n_bytes);
        CHECK(same && !b->gpu_only, "a pushed host load's tensors differ from the mapped ones");
    }
    lean_model_free(a);
    lean_model_free(b);
}

int main(void) {
    if (test_gpu_skipped("test_gpu_upload")) return test_finish("test_gpu_upload");
    test_write_pending();

    char path[256];
    tiny_path(path, sizeof path);
    const tiny_spec big = big_spec();
    lean_error err;
    CHECK(tiny_write(&big, path, NULL, &err) == LEAN_OK, "write: %s", err.msg);
    test_big_model(path);
    check_same(path, "big tiny (Q8_0 embedding, rope_freqs, tied)");
    test_refusals(path);
    test_pushed_host(path);
    unlink(path);

    /* tiny models: untied Q8_0 stacks, qwen2's biases, qwen3's q/k norms */
    const char *archs[] = {"llama", "qwen2", "qwen3"};
    for (int a = 0; a < 3; a++) {
        tiny_spec sp = tiny_default(archs[a]);
        sp.matrix_type = LEAN_TYPE_Q8_0;
        CHECK(tiny_write(&sp, path, NULL, &err) == LEAN_OK, "write: %s", err.msg);
        check_same(path, archs[a]);
        unlink(path);
    }
    /* the fixtures (make test-data): every format, each on one architecture */
    static const char *const fixtures[] = {"llama-q4_k", "qwen2-q8_0",      "qwen3-q6_k",   "llama-f16",
                                           "qwen2-q4_1", "qwen3-q5_0",      "llama-bf16",   "qwen2-f32",
                                           "qwen3-q4_0", "llama-tied-q5_1", "qwen2-untied-q5_k"};
    for (size_t i = 0; i < sizeof fixtures / sizeof fixtures[0]; i++) {
        char fx[128];
        snprintf(fx, sizeof fx, "build/fixtures/%s.gguf", fixtures[i]);
        check_same(fx, fixtures[i]);
    }
    return test_finish("test_gpu_upload");
}
