/* fuzz_gguf.c — the libFuzzer target for the GGUF reader, and the generator of its
 * seed corpus (tests/data/fuzz_gguf/).
 *
 *   make fuzz         build-fuzz/fuzz_gguf   (clang -fsanitize=fuzzer,address,undefined)
 *   make fuzz-run     runs it FUZZ_SECONDS (60) on a fresh copy of the seeds, inputs <= 4096 bytes
 *   make fuzz-seeds   rebuilds the seeds: this file compiled with -DFUZZ_GGUF_SEEDS has a
 *                     main() that writes them with gguf_writer (so every seed has a known origin)
 *
 * Each input is parsed twice — from memory through lean_read_mapped, and through a callback
 * that hands out 3 bytes per call (the cursor's refill paths) — and the two must agree on the
 * status and the message. When it parses, every key, value (recursively) and tensor info is
 * touched and held to the reader's promises (gguf.h): names NUL-terminated and findable,
 * arrays homogeneous and at most GGUF_MAX_DEPTH deep, shapes valid, offsets aligned, data
 * inside the file, tensors disjoint. Then the header is written back with the writer and
 * read again: both parses must be equal, tensor bytes included. A broken promise traps (a
 * crash for libFuzzer). Planting a bug in the reader's overlap check is found in seconds.
 */
#include "core/formats.h"
#include "dev/gguf_writer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REQUIRE(cond)                                                            \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "fuzz_gguf: %s:%d: %s\n", __FILE__, __LINE__, #cond); \
            __builtin_trap();                                                    \
        }                                                                        \
    } while (0)

/* ====================================================================== checks */

typedef struct mem {
    const uint8_t *p;
    size_t n;
} mem;

static size_t read_3(void *user, uint64_t off, void *dst, size_t n) {
    const mem *m = user;
    if (off >= m->n) return 0;
    size_t take = n < 3 ? n : 3;
    if (take > m->n - off) take = (size_t)(m->n - off);
    memcpy(dst, m->p + off, take);
    return take;
}

static bool value_eq(const gguf_value *a, const gguf_value *b) {
    if (a->type != b->type) return false;
    switch (a->type) {
    case GGUF_F32: case GGUF_F64: return memcmp(&a->v.f64, &b->v.f64, sizeof a->v.f64) == 0;
    case GGUF_STRING:
        return a->v.str.len == b->v.str.len && memcmp(a->v.str.ptr, b->v.str.ptr, a->v.str.len) == 0;
    case GGUF_ARRAY:
        if (a->v.arr.elem_type != b->v.arr.elem_type || a->v.arr.count != b->v.arr.count) return false;
        for (uint64_t i = 0; i < a->v.arr.count; i++)
            if (!value_eq(&a->v.arr.items[i], &b->v.arr.items[i])) return false;
        return true;
    default: return a->v.u64 == b->v.u64; /* the integer union members alias */
    }
}

/* Walks a value; returns the number of array elements under it. */
static uint64_t touch_value(const gguf_value *v, unsigned depth) {
    REQUIRE(v->type <= GGUF_F64);
    if (v->type == GGUF_STRING) {
        REQUIRE(v->v.str.ptr && v->v.str.ptr[v->v.str.len] == 0);
        return 0;
    }
    if (v->type == GGUF_BOOL) REQUIRE(v->v.u64 <= 1);
    if (v->type != GGUF_ARRAY) return 0;
    REQUIRE(depth <= GGUF_MAX_DEPTH && v->v.arr.elem_type <= GGUF_F64);
    uint64_t n = v->v.arr.count;
    for (uint64_t i = 0; i < v->v.arr.count; i++) {
        REQUIRE(v->v.arr.items[i].type == v->v.arr.elem_type);
        n += touch_value(&v->v.arr.items[i], depth + 1);
    }
    return n;
}

static void touch_file(const gguf_file *f, uint64_t size) {
    REQUIRE(f->version == 2 || f->version == 3);
    REQUIRE(f->file_size == size && f->alignment && !(f->alignment & (f->alignment - 1)));
    REQUIRE(f->data_offset % f->alignment == 0);
    uint64_t values = 0;
    for (uint64_t i = 0; i < f->n_kv; i++) {
        const gguf_kv *kv = &f->kv[i];
        REQUIRE(strlen(kv->key.ptr) == kv->key.len);
        REQUIRE(gguf_find(f, kv->key.ptr) == &kv->value);
        values += touch_value(&kv->value, 1);
    }
    REQUIRE(values <= GGUF_MAX_VALUES);
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor_info *t = &f->tensors[i];
        REQUIRE(strlen(t->name.ptr) == t->name.len && gguf_find_tensor(f, t->name.ptr) == t);
        REQUIRE(t->n_dims >= 1 && t->n_dims <= 4);
        uint64_t n = 1, bytes = 0;
        for (int d = 0; d < 4; d++) {
            REQUIRE(t->ne[d] >= 1 && (d < (int)t->n_dims || t->ne[d] == 1));
            REQUIRE(lean_mul_u64(n, (uint64_t)t->ne[d], &n));
        }
        REQUIRE(n == t->n_elems && lean_type_bytes(t->type, n, &bytes) && bytes == t->n_bytes);
        REQUIRE(t->offset % f->alignment == 0);
        REQUIRE(t->n_bytes <= size && f->data_offset <= size - t->n_bytes &&
                t->offset <= size - t->n_bytes - f->data_offset);
        for (uint64_t j = 0; j < i; j++) { /* disjoint (O(n^2): inputs are small) */
            const gguf_tensor_info *u = &f->tensors[j];
            REQUIRE(t->offset + t->n_bytes <= u->offset || u->offset + u->n_bytes <= t->offset);
        }
    }
}

static lean_status parse(const uint8_t *p, size_t n, lean_read_fn fn, gguf_file **f, lean_error *e) {
    lean_mapped_file m = {(void *)p, n};
    mem s = {p, n};
    return gguf_read(fn, fn == lean_read_mapped ? (void *)&m : (void *)&s, n, f, e);
}

/* Writes f back (keys, infos and the input's tensor bytes) and reads it again. */
static void roundtrip(const gguf_file *f, const uint8_t *data) {
    /* general.alignment may be any u32 power of two; the writer honours it, so 2^31 would
     * make a 2 GiB file of padding. Correct, but no use to the fuzzer: skip big ones. */
    if (f->alignment > 4096) return;
    for (uint64_t i = 0; i < f->n_tensors; i++)
        if (f->tensors[i].name.len >= GGUF_MAX_NAME) return; /* the writer keeps llama.cpp's limit */
    gguf_writer *w = gguf_writer_new();
    REQUIRE(w);
    for (uint64_t i = 0; i < f->n_kv; i++) gguf_w_value(w, f->kv[i].key.ptr, &f->kv[i].value);
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor_info *t = &f->tensors[i];
        gguf_w_tensor(w, t->name.ptr, t->type, t->n_dims, t->ne, data + f->data_offset + t->offset,
                      t->n_bytes);
    }
    void *out = NULL;
    uint64_t n = 0;
    lean_error e = {0};
    lean_status st = gguf_writer_write_mem(w, &out, &n, &e);
    gguf_writer_free(w);
    if (st != LEAN_OK) fprintf(stderr, "fuzz_gguf: the writer refused what the reader took: %s\n", e.msg);
    REQUIRE(st == LEAN_OK);
    gguf_file *g = NULL;
    st = parse(out, (size_t)n, lean_read_mapped, &g, &e);
    if (st != LEAN_OK) fprintf(stderr, "fuzz_gguf: the reader refused the writer's file: %s\n", e.msg);
    REQUIRE(st == LEAN_OK);
    REQUIRE(g->n_kv == f->n_kv && g->n_tensors == f->n_tensors && g->alignment == f->alignment);
    for (uint64_t i = 0; i < f->n_kv; i++) {
        REQUIRE(strcmp(g->kv[i].key.ptr, f->kv[i].key.ptr) == 0);
        REQUIRE(value_eq(&g->kv[i].value, &f->kv[i].value));
    }
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor_info *a = &f->tensors[i], *b = &g->tensors[i];
        REQUIRE(strcmp(a->name.ptr, b->name.ptr) == 0 && a->type == b->type && a->n_dims == b->n_dims);
        REQUIRE(memcmp(a->ne, b->ne, sizeof a->ne) == 0 && a->n_bytes == b->n_bytes);
        REQUIRE(memcmp(data + f->data_offset + a->offset,
                       (const uint8_t *)out + g->data_offset + b->offset, (size_t)a->n_bytes) == 0);
    }
    gguf_free(g);
    lean_free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gguf_file *f = NULL, *g = NULL;
    lean_error e1 = {0}, e2 = {0};
    lean_status s1 = parse(data, size, lean_read_mapped, &f, &e1);
    lean_status s2 = parse(data, size, read_3, &g, &e2);
    REQUIRE(s1 == s2 && strcmp(e1.msg, e2.msg) == 0);
    REQUIRE((s1 == LEAN_OK) == (f != NULL) && (f != NULL) == (g != NULL));
    if (s1 != LEAN_OK) {
        REQUIRE(e1.status == s1 && e1.msg[0] && s1 != LEAN_ERR_NOMEM && s1 != LEAN_ERR_IO);
        return 0;
    }
    touch_file(f, size);
    roundtrip(f, data);
    gguf_free(f);
    gguf_free(g);
    return 0;
}

/* ====================================================================== seed generator */
#ifdef FUZZ_GGUF_SEEDS

/* Tensor bytes: a fixed pattern, so the seeds are the same on every run. */
static void add_tensor(gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                       const int64_t *ne) {
    static uint8_t buf[8192];
    uint64_t n = 1, bytes = 0;
    for (uint32_t d = 0; d < n_dims; d++) n *= (uint64_t)ne[d];
    if (!lean_type_bytes(type, n, &bytes) || bytes > sizeof buf) {
        fprintf(stderr, "seed tensor '%s' is too big\n", name);
        exit(1);
    }
    for (uint64_t i = 0; i < bytes; i++) buf[i] = (uint8_t)(i * 37 + n_dims);
    gguf_w_tensor(w, name, type, n_dims, ne, buf, bytes);
}

static void seed_minimal(gguf_writer *w) { (void)w; }

static void seed_llama(gguf_writer *w) {
    static const char *const toks[] = {"<unk>", "<s>", "</s>", "\xe2\x96\x81the", "a", "b"};
    const float scores[6] = {0, 0, 0, -1.5f, -2, -3};
    const int32_t types[6] = {2, 3, 3, 1, 1, 1};
    gguf_w_str(w, "general.architecture", "llama");
    gguf_w_str(w, "general.name", "seed");
    gguf_w_u32(w, "llama.context_length", 64);
    gguf_w_u32(w, "llama.embedding_length", 32);
    gguf_w_u32(w, "llama.block_count", 1);
    gguf_w_f32(w, "llama.rope.freq_base", 10000.0f);
    gguf_w_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    gguf_w_str(w, "tokenizer.ggml.model", "llama");
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, 6);
    gguf_w_arr(w, "tokenizer.ggml.scores", GGUF_F32, scores, 6);
    gguf_w_arr(w, "tokenizer.ggml.token_type", GGUF_I32, types, 6);
    gguf_w_bool(w, "tokenizer.ggml.add_bos_token", true);
    add_tensor(w, "token_embd.weight", LEAN_TYPE_Q8_0, 2, (int64_t[]){32, 6});
    add_tensor(w, "blk.0.attn_norm.weight", LEAN_TYPE_F32, 1, (int64_t[]){32});
    add_tensor(w, "blk.0.attn_q.weight", LEAN_TYPE_Q4_0, 2, (int64_t[]){32, 32});
    add_tensor(w, "output_norm.weight", LEAN_TYPE_F16, 1, (int64_t[]){32});
}

static void seed_all_values(gguf_writer *w) {
    const gguf_value sv[] = {
        {.type = GGUF_U8, .v.u64 = 200},        {.type = GGUF_I8, .v.i64 = -100},
        {.type = GGUF_U16, .v.u64 = 60000},     {.type = GGUF_I16, .v.i64 = -30000},
        {.type = GGUF_U32, .v.u64 = 4000000000}, {.type = GGUF_I32, .v.i64 = -2000000000},
        {.type = GGUF_F32, .v.f64 = 0.5},       {.type = GGUF_BOOL, .v.u64 = 0},
        {.type = GGUF_U64, .v.u64 = UINT64_MAX}, {.type = GGUF_I64, .v.i64 = INT64_MIN},
        {.type = GGUF_F64, .v.f64 = -0.25},
    };
    static const char *const keys[] = {"u8", "i8", "u16", "i16", "u32", "i32",
                                       "f32", "bool", "u64", "i64", "f64"};
    for (int i = 0; i < 11; i++) gguf_w_value(w, keys[i], &sv[i]);
    gguf_w_str(w, "str", "h\xc3\xa9llo");
    const uint16_t a16[3] = {1, 2, 3};
    const double af[2] = {1.5, -2.5};
    const bool ab[2] = {true, false};
    gguf_w_arr(w, "arr.u16", GGUF_U16, a16, 3);
    gguf_w_arr(w, "arr.f64", GGUF_F64, af, 2);
    gguf_w_arr(w, "arr.bool", GGUF_BOOL, ab, 2);
    gguf_w_arr(w, "arr.empty", GGUF_I64, NULL, 0);
    /* [[["x"], []], [["y", "z"]]]: three levels, strings at the bottom */
    gguf_value s[3] = {{.type = GGUF_STRING}, {.type = GGUF_STRING}, {.type = GGUF_STRING}};
    s[0].v.str = (gguf_string){1, "x"};
    s[1].v.str = (gguf_string){1, "y"};
    s[2].v.str = (gguf_string){1, "z"};
    gguf_value l2[3] = {{.type = GGUF_ARRAY}, {.type = GGUF_ARRAY}, {.type = GGUF_ARRAY}};
    l2[0].v.arr.elem_type = l2[1].v.arr.elem_type = l2[2].v.arr.elem_type = GGUF_STRING;
    l2[0].v.arr.items = &s[0], l2[0].v.arr.count = 1;
    l2[2].v.arr.items = &s[1], l2[2].v.arr.count = 2;
    gguf_value l1[2] = {{.type = GGUF_ARRAY}, {.type = GGUF_ARRAY}};
    l1[0].v.arr.elem_type = l1[1].v.arr.elem_type = GGUF_ARRAY;
    l1[0].v.arr.items = &l2[0], l1[0].v.arr.count = 2;
    l1[1].v.arr.items = &l2[2], l1[1].v.arr.count = 1;
    gguf_value top = {.type = GGUF_ARRAY};
    top.v.arr.elem_type = GGUF_ARRAY;
    top.v.arr.items = l1;
    top.v.arr.count = 2;
    gguf_w_value(w, "nested", &top);
    add_tensor(w, "t", LEAN_TYPE_F32, 1, (int64_t[]){3});
}

static void seed_kquant(gguf_writer *w) {
    gguf_w_u32(w, "general.alignment", 64);
    gguf_w_str(w, "general.architecture", "qwen2");
    add_tensor(w, "blk.0.ffn_up.weight", LEAN_TYPE_Q4_K, 2, (int64_t[]){256, 2});
    add_tensor(w, "blk.0.ffn_down.weight", LEAN_TYPE_Q6_K, 2, (int64_t[]){256, 1});
    add_tensor(w, "blk.0.attn_v.weight", LEAN_TYPE_Q5_K, 1, (int64_t[]){256});
    add_tensor(w, "blk.0.attn_k.bias", LEAN_TYPE_BF16, 1, (int64_t[]){7});
}

static void seed_many_tensors(gguf_writer *w) {
    gguf_w_u32(w, "general.alignment", 8);
    static const uint32_t types[] = {LEAN_TYPE_F32,  LEAN_TYPE_F16,  LEAN_TYPE_Q4_0, LEAN_TYPE_Q4_1,
                                     LEAN_TYPE_Q5_0, LEAN_TYPE_Q5_1, LEAN_TYPE_Q8_0, LEAN_TYPE_BF16};
    for (int i = 0; i < 8; i++) {
        char name[32];
        snprintf(name, sizeof name, "t%d", i);
        add_tensor(w, name, types[i], 4, (int64_t[]){32, 1, 2, 1});
    }
}

/* One seed: the writer's bytes, optionally with the version patched to 2. */
static int write_seed(const char *dir, const char *name, void (*fill)(gguf_writer *), int version) {
    gguf_writer *w = gguf_writer_new();
    fill(w);
    void *p = NULL;
    uint64_t n = 0;
    lean_error e = {0};
    lean_status st = gguf_writer_write_mem(w, &p, &n, &e);
    gguf_writer_free(w);
    if (st != LEAN_OK || n > 4096) {
        fprintf(stderr, "seed %s: %s (%llu bytes)\n", name, e.msg, (unsigned long long)n);
        lean_free(p);
        return 1;
    }
    ((uint8_t *)p)[4] = (uint8_t)version;
    LLVMFuzzerTestOneInput(p, (size_t)n); /* every seed must pass the target's checks */
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *fp = fopen(path, "wb");
    int bad = !fp || fwrite(p, 1, (size_t)n, fp) != n;
    if (fp) bad |= fclose(fp) != 0;
    if (bad) fprintf(stderr, "cannot write %s\n", path);
    else printf("%s: %llu bytes\n", path, (unsigned long long)n);
    lean_free(p);
    return bad;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s OUT_DIR   (writes the fuzz_gguf seed corpus)\n", argv[0]);
        return 2;
    }
    int bad = 0;
    bad |= write_seed(argv[1], "minimal.gguf", seed_minimal, 3);
    bad |= write_seed(argv[1], "llama.gguf", seed_llama, 3);
    bad |= write_seed(argv[1], "llama_v2.gguf", seed_llama, 2);
    bad |= write_seed(argv[1], "all_values.gguf", seed_all_values, 3);
    bad |= write_seed(argv[1], "kquant_align64.gguf", seed_kquant, 3);
    bad |= write_seed(argv[1], "many_tensors_align8.gguf", seed_many_tensors, 3);
    return bad;
}
#endif
