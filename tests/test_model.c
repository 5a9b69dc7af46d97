/* test_model.c — src/core/model.c: loading, hyperparameters, tensor validation, info.
 *
 * Every broken model is a tiny file written with gguf_writer and broken in one named way
 * (tiny_model.h); each test asserts the status and a substring of the message, so a
 * message that stops naming the tensor, key or numbers fails here.
 */
#include "core/model.h"
#include "test.h"
#include "tiny_model.h"

#include <fcntl.h>

/* Writes sp, loads it (mmap), frees it; returns the status, err filled. Every file is also
 * loaded from memory (lean_model_load_memory), which must answer the same, message included. */
static lean_status load_spec(const tiny_spec *sp, lean_error *err) {
    char path[256];
    tiny_path(path, sizeof path);
    lean_status st = tiny_write(sp, path, NULL, err);
    if (st != LEAN_OK) {
        CHECK(0, "writing %s: %s", path, err->msg);
        return st;
    }
    lean_model *m = NULL;
    st = lean_model_load_file(path, &m, err);
    CHECK((st == LEAN_OK) == (m != NULL), "status %d but model %p", st, (void *)m);
    lean_model_free(m);

    size_t len;
    uint8_t *bytes = test_read_file(path, &len);
    CHECK(bytes != NULL, "reading %s", path);
    lean_error merr = {0};
    m = NULL;
    lean_status mst = bytes ? lean_model_load_memory(bytes, len, NULL, &m, &merr) : LEAN_ERR_IO;
    CHECK(mst == st && (mst == LEAN_OK || strcmp(merr.msg, err->msg) == 0),
          "from memory: status %d \"%s\", from the file: %d \"%s\"", mst, merr.msg, st, err->msg);
    CHECK((mst == LEAN_OK) == (m != NULL), "status %d but model %p", mst, (void *)m);
    lean_model_free(m);
    free(bytes);
    unlink(path);
    return st;
}

/* Loading sp must fail with status and a message containing want. */
#define EXPECT_FAIL(sp, status, want)                                                              \
    do {                                                                                           \
        lean_error e_ = {0};                                                                       \
        lean_status st_ = load_spec(&(sp), &e_);                                                   \
        CHECK(st_ == (status), "status %d (%s), expected %d; msg: %s", st_, lean_status_str(st_),  \
              (status), e_.msg);                                                                   \
        CHECK(strstr(e_.msg, (want)) != NULL, "message \"%s\" lacks \"%s\"", e_.msg, (want));       \
    } while (0)

static void test_valid_models(void) {
    const char *archs[] = {"llama", "qwen2", "qwen3"};
    for (int a = 0; a < 3; a++) {
        tiny_spec sp = tiny_default(archs[a]);
        lean_error err = {0};
        CHECK(load_spec(&sp, &err) == LEAN_OK, "%s: %s", archs[a], err.msg);
    }
    /* extras are ignored: a llama file with a bias it does not use, and an unknown tensor */
    tiny_spec sp = tiny_default("llama");
    sp.extra = "blk.0.attn_q.bias";
    lean_error err = {0};
    CHECK(load_spec(&sp, &err) == LEAN_OK, "extra tensor: %s", err.msg);
}

static void test_info(void) {
    tiny_spec sp = tiny_default("qwen3");
    sp.tied = 1;
    sp.n_tokens = sp.n_vocab;
    char path[256];
    tiny_path(path, sizeof path);
    tiny_model tm;
    lean_error err = {0};
    CHECK(tiny_write(&sp, path, &tm, &err) == LEAN_OK, "%s", err.msg);
    lean_model *m = NULL;
    CHECK(lean_model_load_file(path, &m, &err) == LEAN_OK, "%s", err.msg);
    if (m) {
        lean_model_info info;
        lean_model_get_info(m, &info);
        CHECK(strcmp(info.arch, "qwen3") == 0, "arch %s", info.arch);
        CHECK(strcmp(info.name, "tiny") == 0, "name %s", info.name);
        CHECK(info.n_vocab == 97 && lean_model_n_vocab(m) == 97, "n_vocab %d", info.n_vocab);
        CHECK(info.n_embd == 64 && info.n_layer == 2 && info.n_head == 4 && info.n_head_kv == 2,
              "shape %d %d %d %d", info.n_embd, info.n_layer, info.n_head, info.n_head_kv);
        CHECK(info.head_dim == 32, "head_dim %d (from key_length)", info.head_dim);
        CHECK(info.n_ff == 96 && info.n_ctx_train == 256, "n_ff %d ctx %d", info.n_ff, info.n_ctx_train);
        CHECK(info.tied_output == 1, "tied %d", info.tied_output);
        CHECK(info.rope_base == 10000.0f && info.rms_eps == 1e-5f, "rope %g eps %g",
              (double)info.rope_base, (double)info.rms_eps);
        CHECK(info.n_tensors == tm.n && info.n_tensors_by_type[LEAN_TYPE_F32] == tm.n,
              "n_tensors %d (f32 %d), wrote %d", info.n_tensors,
              info.n_tensors_by_type[LEAN_TYPE_F32], tm.n);
        uint64_t params = 0;
        for (int i = 0; i < tm.n; i++) params += (uint64_t)(tm.t[i].ne0 * tm.t[i].ne1);
        CHECK(info.n_params == params, "n_params %llu, expected %llu",
              (unsigned long long)info.n_params, (unsigned long long)params);
        CHECK(info.weight_bytes == params * 4, "weight_bytes %llu", (unsigned long long)info.weight_bytes);
        CHECK(strcmp(info.tokenizer, "gpt2") == 0, "tokenizer '%s'", info.tokenizer);
        CHECK(info.has_chat_template == 0, "chat template %d", info.has_chat_template);
        CHECK(m->hp.rope_style == LEAN_ROPE_NEOX, "qwen3 rope style %d", m->hp.rope_style);
        CHECK(m->layers[1].q_norm.data != NULL && m->layers[1].bq.data == NULL, "qwen3 views");
        CHECK(m->output.data == m->tok_embd.data, "tied output shares token_embd");
    }
    lean_model_free(m);
    tiny_free(&tm);
    unlink(path);
}

/* One way to break tiny_default(arch) (the fields as in tiny_spec), and what loading the
 * file must then say (LEAN_ERR_MODEL). */
typedef struct broken {
    const char *arch, *omit, *reshape, *as_f16;
    int rope_freqs, n_tokens;
    const char *set_key; /* set[0] */
    uint32_t set_value;
    const char *want;
} broken;

static void expect_broken(const broken *cases, size_t n) {
    for (size_t i = 0; i < n; i++) {
        tiny_spec sp = tiny_default(cases[i].arch);
        sp.omit = cases[i].omit;
        sp.reshape = cases[i].reshape;
        sp.as_f16 = cases[i].as_f16;
        sp.rope_freqs = cases[i].rope_freqs;
        sp.n_tokens = cases[i].n_tokens;
        sp.set[0].key = cases[i].set_key;
        sp.set[0].value = cases[i].set_value;
        EXPECT_FAIL(sp, LEAN_ERR_MODEL, cases[i].want);
    }
}

static void test_missing(void) {
    static const broken cases[] = {
        {"llama", .omit = "blk.1.attn_k.weight", .want = "tensor 'blk.1.attn_k.weight' is missing"},
        {"llama", .omit = "token_embd.weight", .want = "tensor 'token_embd.weight' is missing"},
        {"llama", .omit = "output_norm.weight", .want = "tensor 'output_norm.weight' is missing"},
        {"qwen2", .omit = "blk.0.attn_v.bias", .want = "tensor 'blk.0.attn_v.bias' is missing"},
        {"qwen3", .omit = "blk.1.attn_k_norm.weight", .want = "tensor 'blk.1.attn_k_norm.weight' is missing"},
        {"llama", .omit = "llama.block_count", .want = "missing key 'llama.block_count'"},
        {"llama", .omit = "llama.attention.layer_norm_rms_epsilon",
         .want = "missing key 'llama.attention.layer_norm_rms_epsilon'"},
        {"llama", .omit = "general.architecture", .want = "missing key 'general.architecture'"},
        {"qwen2", .omit = "qwen2.embedding_length", .want = "missing key 'qwen2.embedding_length'"},
        /* without head_count_kv it is head_count (4), and k/v are [64, 32] */
        {"qwen2", .omit = "qwen2.attention.head_count_kv",
         .want = "tensor 'blk.0.attn_k.weight' has shape [64, 32], expected [64, 64]"},
    };
    expect_broken(cases, sizeof cases / sizeof cases[0]);
    /* optional keys take their defaults */
    tiny_spec sp = tiny_default("qwen2");
    sp.omit = "qwen2.rope.freq_base";
    lean_error err = {0};
    CHECK(load_spec(&sp, &err) == LEAN_OK, "without rope.freq_base: %s", err.msg);
}

static void test_shapes_and_types(void) {
    static const broken cases[] = {
        {"llama", .reshape = "blk.0.attn_q.weight",
         .want = "tensor 'blk.0.attn_q.weight' has shape [64, 65], expected [64, 64]"},
        {"llama", .reshape = "blk.1.ffn_down.weight",
         .want = "tensor 'blk.1.ffn_down.weight' has shape [96, 65], expected [96, 64]"},
        {"llama", .reshape = "output_norm.weight", .want = "tensor 'output_norm.weight' has shape [65], expected [64]"},
        {"llama", .reshape = "output.weight", .want = "tensor 'output.weight' has shape [64, 98], expected [64, 97]"},
        {"llama", .reshape = "rope_freqs.weight", .rope_freqs = 1,
         .want = "tensor 'rope_freqs.weight' has shape [9], expected [8]"},
        {"llama", .as_f16 = "blk.0.ffn_norm.weight",
         .want = "tensor 'blk.0.ffn_norm.weight' has type f16, expected f32"},
        {"qwen2", .as_f16 = "blk.1.attn_q.bias", .want = "tensor 'blk.1.attn_q.bias' has type f16, expected f32"},
        /* the tokenizer's vocabulary must agree with token_embd's rows */
        {"llama", .n_tokens = 50, .want = "tokenizer.ggml.tokens has 50 tokens but token_embd.weight has 97 rows"},
    };
    expect_broken(cases, sizeof cases / sizeof cases[0]);
    /* matrices and the embedding may have any supported type */
    tiny_spec sp = tiny_default("llama");
    sp.as_f16 = "blk.0.attn_v.weight";
    lean_error err = {0};
    CHECK(load_spec(&sp, &err) == LEAN_OK, "f16 matrix: %s", err.msg);
    sp.as_f16 = "token_embd.weight";
    CHECK(load_spec(&sp, &err) == LEAN_OK, "f16 token_embd: %s", err.msg);
}

static void test_hparams(void) {
    static const broken cases[] = {
        {"llama", .set_key = "llama.attention.head_count_kv", .set_value = 3,
         .want = "n_head (4) is not a multiple of n_head_kv (3)"},
        {"llama", .set_key = "llama.attention.head_count_kv", .set_value = 0,
         .want = "llama.attention.head_count_kv is 0, expected 1..1024"},
        {"llama", .set_key = "llama.attention.head_count", .set_value = 0,
         .want = "llama.attention.head_count is 0"},
        {"llama", .set_key = "llama.embedding_length", .set_value = 1u << 30,
         .want = "llama.embedding_length is 1073741824, expected 1..65536"},
        {"llama", .set_key = "llama.block_count", .set_value = 0xffffffffu,
         .want = "llama.block_count is 4294967295"},
        {"llama", .set_key = "llama.context_length", .set_value = 0, .want = "llama.context_length is 0"},
        {"llama", .set_key = "llama.feed_forward_length", .set_value = 1u << 31,
         .want = "llama.feed_forward_length is 2147483648"},
    };
    expect_broken(cases, sizeof cases / sizeof cases[0]);

    tiny_spec sp = tiny_default("llama");
    sp.rope_dims = 8;
    EXPECT_FAIL(sp, LEAN_ERR_UNSUPPORTED, "llama.rope.dimension_count is 8 but head_dim is 16");
    sp.rope_dims = 16;
    lean_error err = {0};
    CHECK(load_spec(&sp, &err) == LEAN_OK, "rope dims = head_dim: %s", err.msg);

    sp = tiny_default("qwen3");
    sp.set[0].key = "qwen3.attention.value_length";
    sp.set[0].value = 16;
    EXPECT_FAIL(sp, LEAN_ERR_UNSUPPORTED, "value_length is 16 but key_length is 32");

    sp = tiny_default("llama");
    sp.rms_eps = 0.0f;
    EXPECT_FAIL(sp, LEAN_ERR_MODEL, "llama.attention.layer_norm_rms_epsilon is 0");
    sp = tiny_default("llama");
    sp.rope_base = -1.0f;
    EXPECT_FAIL(sp, LEAN_ERR_MODEL, "llama.rope.freq_base is -1");

    sp = tiny_default("llama");
    sp.arch_name = "gpt2";
    EXPECT_FAIL(sp, LEAN_ERR_UNSUPPORTED, "architecture 'gpt2' is not supported");
}

/* ---- streamed loading ---- */

typedef struct stream_src {
    int fd;
    uint64_t fail_after; /* reads at or past this byte offset return 0 (0 = never) */
    size_t max_read;     /* the largest single read seen */
} stream_src;

static size_t stream_read(void *user, uint64_t off, void *dst, size_t n) {
    stream_src *s = user;
    if (n > s->max_read) s->max_read = n;
    if (s->fail_after && off + n > s->fail_after) return 0;
    ssize_t got = pread(s->fd, dst, n, (off_t)off);
    return got < 0 ? 0 : (size_t)got;
}

static void test_stream(void) {
    tiny_spec sp = tiny_default("qwen2");
    sp.n_layer = 3;
    char path[256];
    tiny_path(path, sizeof path);
    lean_error err = {0};
    CHECK(tiny_write(&sp, path, NULL, &err) == LEAN_OK, "%s", err.msg);
    lean_model *a = NULL, *b = NULL;
    CHECK(lean_model_load_file(path, &a, &err) == LEAN_OK, "%s", err.msg);
    stream_src src = {.fd = open(path, O_RDONLY)};
    uint64_t size = (uint64_t)lseek(src.fd, 0, SEEK_END);
    CHECK(lean_model_load_stream(stream_read, &src, size, &b, &err) == LEAN_OK, "%s", err.msg);
    CHECK(src.max_read <= ((size_t)8 << 20), "a read of %zu bytes", src.max_read);
    if (a && b) {
#ifndef __wasi__ /* WASI has no mmap: lean_model_load_file streams there */
        CHECK(a->map.data != NULL && a->weights == NULL, "file load maps");
#endif
        CHECK(b->map.data == NULL && b->weights != NULL, "stream load owns its weights");
        CHECK(memcmp(&a->hp, &b->hp, sizeof a->hp) == 0, "same hyperparameters");
        const lean_tensor *ta = &a->layers[2].w_down, *tb = &b->layers[2].w_down;
        CHECK(ta->n_bytes == tb->n_bytes && memcmp(ta->data, tb->data, ta->n_bytes) == 0,
              "same ffn_down bytes");
        CHECK(memcmp(a->layers[1].bv.data, b->layers[1].bv.data, a->layers[1].bv.n_bytes) == 0,
              "same bias bytes");
    }
    lean_model_free(b);
    b = NULL;
    /* a read failing inside the data section: an i/o error naming the offset, no model */
    src.fail_after = size - 100;
    lean_status st = lean_model_load_stream(stream_read, &src, size, &b, &err);
    CHECK(st == LEAN_ERR_IO && b == NULL, "status %d: %s", st, err.msg);
    CHECK(strstr(err.msg, "reading tensor data") != NULL, "message: %s", err.msg);

    /* allocation failures while streaming: every one ends in NOMEM, nothing leaks (ASan) */
    src.fail_after = 0;
    for (uint64_t n = 1;; n++) {
        lean_alloc_fail_at(n, false);
        st = lean_model_load_stream(stream_read, &src, size, &b, &err);
        lean_alloc_fail_at(0, false);
        if (st == LEAN_OK) {
            lean_model_free(b);
            CHECK(n > 3, "only %llu allocations", (unsigned long long)n);
            break;
        }
        CHECK(st == LEAN_ERR_NOMEM && b == NULL, "fail at %llu: status %d: %s",
              (unsigned long long)n, st, err.msg);
        if (st != LEAN_ERR_NOMEM) break;
    }
    close(src.fd);
    lean_model_free(a);
    unlink(path);

    st = lean_model_load_file("/nonexistent/lean.gguf", &a, &err);
    CHECK(st == LEAN_ERR_IO && a == NULL, "missing file: status %d", st);
}

/* lean_model_load_file_params' progress: bytes of tensor data, ending at their total. */
static void test_load_progress(void) {
    tiny_spec sp = tiny_default("llama");
    char path[256];
    tiny_path(path, sizeof path);
    lean_error err = {0};
    CHECK(tiny_write(&sp, path, NULL, &err) == LEAN_OK, "%s", err.msg);
    test_progress pr = {0};
    lean_model_params mp = lean_model_default_params();
    CHECK(mp.progress == NULL, "no callback by default");
    mp.progress = test_progress_fn;
    mp.progress_user = &pr;
    lean_model *m = NULL;
    CHECK(lean_model_load_file_params(path, &mp, &m, &err) == LEAN_OK, "%s", err.msg);
    if (m) {
        uint64_t end = 0;
        for (uint64_t i = 0; i < m->gguf->n_tensors; i++) {
            uint64_t e = m->gguf->tensors[i].offset + m->gguf->tensors[i].n_bytes;
            if (e > end) end = e;
        }
        CHECK(!pr.broken && pr.done == end && pr.total == end, "progress %llu of %llu, data %llu",
              (unsigned long long)pr.done, (unsigned long long)pr.total, (unsigned long long)end);
        /* mapped: one call; streamed (WASI): one per 8 MiB chunk, and this file's data is one */
        CHECK(pr.calls == 1, "%llu calls", (unsigned long long)pr.calls);
    }
    lean_model_free(m);
    /* NULL params: lean_model_load_file */
    m = NULL;
    CHECK(lean_model_load_file_params(path, NULL, &m, &err) == LEAN_OK && m, "%s", err.msg);
    lean_model_free(m);
    unlink(path);
}

/* lean_model_load_memory over a fixture: the views point into the caller's bytes (no copy),
 * the logits are the mapped model's bit for bit, broken or truncated bytes fail as files do,
 * and every allocation failure ends in NOMEM without a leak. */
static void test_memory(void) {
    const char *path = "build/fixtures/qwen2-q4_0.gguf";
    size_t len;
    uint8_t *bytes = test_read_file(path, &len);
    CHECK(bytes != NULL, "cannot read %s: run `make test-data`", path);
    if (!bytes) return;
    lean_error err = {0};
    lean_model *a = NULL, *b = NULL;
    CHECK(lean_model_load_file(path, &a, &err) == LEAN_OK, "%s", err.msg);
    test_progress pr = {0};
    lean_model_params mp = lean_model_default_params();
    mp.progress = test_progress_fn;
    mp.progress_user = &pr;
    CHECK(lean_model_load_memory(bytes, len, &mp, &b, &err) == LEAN_OK, "%s", err.msg);
    CHECK(!pr.broken && pr.calls == 1 && pr.done == pr.total && pr.total > 0, "progress: %llu calls",
          (unsigned long long)pr.calls);
    if (a && b) {
        CHECK(b->map.data == NULL && b->weights == NULL, "a memory load neither maps nor copies");
        const uint8_t *w = b->layers[1].w_up.data;
        CHECK(w >= bytes && w + b->layers[1].w_up.n_bytes <= bytes + len, "views point into the caller's bytes");
        const int32_t ids[] = {1, 17, 42, 99, 5, 63, 2, 8};
        const int32_t nv = lean_model_n_vocab(a);
        float *la = malloc(sizeof(float) * (size_t)nv), *lb = malloc(sizeof(float) * (size_t)nv);
        lean_ctx_params cp = lean_ctx_default_params();
        cp.backend = "cpu";
        cp.n_ctx = 64;
        lean_ctx *ca = NULL, *cb = NULL;
        CHECK(lean_ctx_create(a, &cp, &ca, &err) == LEAN_OK, "%s", err.msg);
        CHECK(lean_ctx_create(b, &cp, &cb, &err) == LEAN_OK, "%s", err.msg);
        if (ca && cb && la && lb) {
            CHECK(lean_prefill(ca, ids, 8, la, &err) == LEAN_OK, "%s", err.msg);
            CHECK(lean_prefill(cb, ids, 8, lb, &err) == LEAN_OK, "%s", err.msg);
            CHECK(memcmp(la, lb, sizeof(float) * (size_t)nv) == 0, "the same logits as the mapped file's");
        }
        lean_ctx_free(ca);
        lean_ctx_free(cb);
        free(la);
        free(lb);
    }
    lean_model_free(b);
    b = NULL;

    /* truncated: the reader's check names the tensor and the sizes, as for a short file */
    lean_status st = lean_model_load_memory(bytes, len - 100, NULL, &b, &err);
    CHECK(st == LEAN_ERR_FORMAT && b == NULL, "truncated: status %d: %s", st, err.msg);
    CHECK(strstr(err.msg, "bytes") != NULL, "message: %s", err.msg);
    /* not a GGUF */
    uint8_t junk[64] __attribute__((aligned(16))) = "not a gguf file at all";
    st = lean_model_load_memory(junk, sizeof junk, NULL, &b, &err);
    CHECK(st == LEAN_ERR_FORMAT && b == NULL, "junk: status %d: %s", st, err.msg);
    st = lean_model_load_memory(bytes + 4, len - 4, NULL, &b, &err);
    CHECK(st == LEAN_ERR_ARG && strstr(err.msg, "aligned") && b == NULL, "misaligned: status %d: %s", st, err.msg);
    mp = lean_model_default_params();
    mp.gpu_only = 1;
    st = lean_model_load_memory(bytes, len, &mp, &b, &err);
    CHECK(st == LEAN_ERR_ARG && strstr(err.msg, "gpu_only") && b == NULL, "gpu_only: status %d: %s", st, err.msg);
    st = lean_model_load_memory(NULL, len, NULL, &b, &err);
    CHECK(st == LEAN_ERR_ARG && b == NULL, "NULL data: status %d", st);

    for (uint64_t n = 1;; n++) {
        lean_alloc_fail_at(n, false);
        st = lean_model_load_memory(bytes, len, NULL, &b, &err);
        lean_alloc_fail_at(0, false);
        if (st == LEAN_OK) {
            lean_model_free(b);
            CHECK(n > 3, "only %llu allocations", (unsigned long long)n);
            break;
        }
        CHECK(st == LEAN_ERR_NOMEM && b == NULL, "fail at %llu: status %d: %s", (unsigned long long)n, st,
              err.msg);
        if (st != LEAN_ERR_NOMEM) break;
    }
    lean_model_free(a);
    free(bytes);
}

int main(void) {
    test_valid_models();
    test_info();
    test_missing();
    test_shapes_and_types();
    test_hparams();
    test_load_progress();
    test_stream();
    test_memory();
    return test_finish("test_model");
}
