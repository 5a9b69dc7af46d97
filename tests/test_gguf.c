/* test_gguf.c — the GGUF reader, writer and file access (src/core/gguf.c, file.c;
 * src/dev/gguf_writer.c).
 *
 * Sections:
 *   1. helpers        an independent byte builder (not the writer), value comparison,
 *                     read callbacks (memory, 7-bytes-at-a-time, zero-tailed virtual file)
 *   2. layout         the writer's bytes against a hand-built file (gguf.h's tables)
 *   3. round trip     every value type, nested arrays, arrays of strings, tensors; from
 *                     memory, mmap and stdio; v2 and v3; general.alignment; getters;
 *                     streamed tensor data (gguf_writer_write_stream): byte for byte
 *                     the copying writer's, and fills that fail or miscount
 *   4. malformed      one test per refusal listed in gguf.h: status AND message; the memory
 *                     bound (GGUF_MAX_HEADER_BYTES) against headers of many empty strings,
 *                     empty arrays, arrays of empty strings, keys and tensors, measured
 *                     through the allocation table (lean_alloc_bytes)
 *   5. truncation     every prefix of a valid file
 *   6. faults         the n-th allocation fails, for every n (reader and writer)
 *   7. writer errors and file access errors
 */
#include "core/formats.h"
#include "dev/gguf_writer.h"
#include "test.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ====================================================================== 1. helpers */

static char tmpdir[64];

static const char *tmp_path(const char *name) {
    static char p[128];
    snprintf(p, sizeof p, "%s/%s", tmpdir, name);
    return p;
}

/* A growable byte string, little-endian appends: builds files by hand from gguf.h's
 * tables, independently of the writer. */
typedef struct bytes {
    uint8_t *p;
    size_t n, cap;
} bytes;

static void b_put(bytes *b, const void *src, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        if (!b->p) abort(); /* tests only */
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}
static void b_le(bytes *b, uint64_t v, int n) {
    for (int i = 0; i < n; i++) {
        uint8_t c = (uint8_t)(v >> (8 * i));
        b_put(b, &c, 1);
    }
}
static void b_u32(bytes *b, uint32_t v) { b_le(b, v, 4); }
static void b_u64(bytes *b, uint64_t v) { b_le(b, v, 8); }
static void b_str(bytes *b, const char *s) {
    b_u64(b, strlen(s));
    b_put(b, s, strlen(s));
}
/* magic, version 3, n_tensors, n_kv */
static void b_head(bytes *b, uint64_t n_tensors, uint64_t n_kv) {
    b_put(b, "GGUF", 4);
    b_u32(b, 3);
    b_u64(b, n_tensors);
    b_u64(b, n_kv);
}
static void b_pad(bytes *b, size_t align) {
    while (b->n % align) b_le(b, 0, 1);
}

static bool value_eq(const gguf_value *a, const gguf_value *b) {
    if (a->type != b->type) return false;
    switch (a->type) {
    case GGUF_I8: case GGUF_I16: case GGUF_I32: case GGUF_I64: return a->v.i64 == b->v.i64;
    case GGUF_F32: {
        float x = (float)a->v.f64, y = (float)b->v.f64;
        return memcmp(&x, &y, 4) == 0;
    }
    case GGUF_F64: return memcmp(&a->v.f64, &b->v.f64, 8) == 0;
    case GGUF_STRING:
        return a->v.str.len == b->v.str.len && memcmp(a->v.str.ptr, b->v.str.ptr, a->v.str.len) == 0 &&
               a->v.str.ptr[a->v.str.len] == 0;
    case GGUF_ARRAY:
        if (a->v.arr.elem_type != b->v.arr.elem_type || a->v.arr.count != b->v.arr.count) return false;
        for (uint64_t i = 0; i < a->v.arr.count; i++)
            if (!value_eq(&a->v.arr.items[i], &b->v.arr.items[i])) return false;
        return true;
    default: return a->v.u64 == b->v.u64; /* unsigned, bool */
    }
}

static lean_status read_mem(const void *p, uint64_t n, gguf_file **out, lean_error *err) {
    lean_mapped_file m = {(void *)p, n};
    return gguf_read(lean_read_mapped, &m, n, out, err);
}

/* The file b read from memory; a read that fails is a failed CHECK and NULL. */
static gguf_file *read_ok(const bytes *b) {
    gguf_file *f = NULL;
    lean_error e = {0};
    CHECK(read_mem(b->p, b->n, &f, &e) == LEAN_OK, "%s", e.msg);
    return f;
}

/* A callback that hands out at most 7 bytes per call, as a slow stream might. */
static size_t read_dribble(void *user, uint64_t off, void *dst, size_t n) {
    return lean_read_mapped(user, off, dst, n < 7 ? n : 7);
}

/* A virtual file: the bytes of m, then zeros up to whatever file_size the test claims. */
static size_t read_zero_tail(void *user, uint64_t off, void *dst, size_t n) {
    const lean_mapped_file *m = user;
    memset(dst, 0, n);
    if (off < m->size) lean_read_mapped(user, off, dst, n);
    return n;
}

/* Runs gguf_read over memory and checks the status and a piece of the message. */
#define EXPECT_FAIL(p, n, want_status, want_msg)                                                  \
    do {                                                                                         \
        gguf_file *f_ = NULL;                                                                    \
        lean_error e_ = {0};                                                                     \
        lean_status s_ = read_mem((p), (n), &f_, &e_);                                           \
        CHECK(s_ == (want_status) && e_.status == s_ && strstr(e_.msg, (want_msg)) && !f_,      \
              "status %d (want %d), msg '%s' (want '%s')", s_, (want_status), e_.msg, (want_msg)); \
        gguf_free(f_);                                                                           \
    } while (0)

static size_t find_bytes(const bytes *b, const char *s) {
    size_t n = strlen(s);
    for (size_t i = 0; i + n <= b->n; i++)
        if (memcmp(b->p + i, s, n) == 0) return i;
    fprintf(stderr, "test bug: '%s' not in the file\n", s);
    abort();
}
static void patch_le(bytes *b, size_t off, uint64_t v, int n) {
    for (int i = 0; i < n; i++) b->p[off + i] = (uint8_t)(v >> (8 * i));
}
static bytes copy_of(const bytes *b) {
    bytes c = {0};
    b_put(&c, b->p, b->n);
    return c;
}

static bytes writer_bytes(gguf_writer *w) {
    void *p = NULL;
    uint64_t n = 0;
    lean_error e = {0};
    lean_status st = gguf_writer_write_mem(w, &p, &n, &e);
    CHECK(st == LEAN_OK, "write_mem: %s", e.msg);
    bytes b = {0};
    if (st == LEAN_OK) b_put(&b, p, (size_t)n);
    lean_free(p);
    gguf_writer_free(w);
    return b;
}

static uint8_t pattern(uint64_t tensor, uint64_t i) { return (uint8_t)(tensor * 31 + i * 7 + 1); }

static void add_pattern_tensor(gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                               const int64_t *ne, uint64_t idx) {
    uint64_t n = 1, nb = 0;
    for (uint32_t d = 0; d < n_dims; d++) n *= (uint64_t)ne[d];
    CHECK(lean_type_bytes(type, n, &nb), "type %u bytes", type);
    uint8_t *data = malloc(nb ? nb : 1);
    for (uint64_t i = 0; i < nb; i++) data[i] = pattern(idx, i);
    gguf_w_tensor(w, name, type, n_dims, ne, data, nb);
    free(data);
}

/* ====================================================================== 2. layout */

/* Two tensors and one key, byte for byte: the writer must produce exactly llama.cpp's
 * layout (offsets packed with padding, zero padding after the infos and every tensor). */
static void test_exact_layout(void) {
    gguf_writer *w = gguf_writer_new();
    gguf_w_u32(w, "a", 7);
    float t[2] = {1.0f, 2.0f}, u = -3.0f;
    gguf_w_tensor(w, "t", LEAN_TYPE_F32, 1, (int64_t[]){2}, t, 8);
    gguf_w_tensor(w, "u", LEAN_TYPE_F32, 1, (int64_t[]){1}, &u, 4);
    bytes got = writer_bytes(w);

    bytes x = {0};
    b_head(&x, 2, 1);
    b_str(&x, "a");
    b_u32(&x, GGUF_U32);
    b_u32(&x, 7);
    b_str(&x, "t");
    b_u32(&x, 1);
    b_u64(&x, 2);
    b_u32(&x, LEAN_TYPE_F32);
    b_u64(&x, 0);
    b_str(&x, "u");
    b_u32(&x, 1);
    b_u64(&x, 1);
    b_u32(&x, LEAN_TYPE_F32);
    b_u64(&x, 32);
    b_pad(&x, 32);
    b_put(&x, t, 8);
    b_pad(&x, 32);
    b_put(&x, &u, 4);
    b_pad(&x, 32);
    CHECK(x.n == 192, "hand-built size %zu", x.n);
    CHECK(got.n == x.n && memcmp(got.p, x.p, x.n) == 0, "writer bytes differ (%zu vs %zu)", got.n,
          x.n);

    gguf_file *f = NULL;
    lean_error e = {0};
    CHECK(read_mem(x.p, x.n, &f, &e) == LEAN_OK, "%s", e.msg);
    if (f) {
        CHECK(f->data_offset == 128 && f->tensors[1].offset == 32 && f->alignment == 32,
              "data_offset %" PRIu64, f->data_offset);
        CHECK(f->tensors[0].n_bytes == 8 && f->tensors[0].n_elems == 2, "t size");
    }
    gguf_free(f);
    free(got.p);
    free(x.p);
}

/* lean_gguf_size on every prefix of the hand-built file above: "need more" (0, 0) until the
 * header's last byte, then the last tensor's end (164) and that padded (192), the same for
 * every longer prefix; a file that is not GGUF and a bad version fail as gguf_read does; a
 * string whose length runs past the prefix asks for more rather than failing. */
static void test_size_from_prefix(void) {
    gguf_writer *w = gguf_writer_new();
    gguf_w_u32(w, "a", 7);
    float t[2] = {1.0f, 2.0f}, u = -3.0f;
    gguf_w_tensor(w, "t", LEAN_TYPE_F32, 1, (int64_t[]){2}, t, 8);
    gguf_w_tensor(w, "u", LEAN_TYPE_F32, 1, (int64_t[]){1}, &u, 4);
    bytes x = writer_bytes(w);
    size_t header_end = 0; /* the shortest prefix that sizes the file */
    for (size_t n = 0; n <= x.n; n++) {
        uint64_t lo = 1, hi = 1;
        lean_error e = {0};
        lean_status st = lean_gguf_size(x.p, n, &lo, &hi, &e);
        CHECK(st == LEAN_OK, "prefix %zu: %s", n, e.msg);
        if (lo && !header_end) header_end = n;
        CHECK(header_end ? lo == 164 && hi == 192 : lo == 0 && hi == 0 && e.msg[0],
              "prefix %zu: %" PRIu64 "..%" PRIu64 " (sized from %zu)", n, lo, hi, header_end);
    }
    CHECK(header_end > 24 && header_end <= 128, "sized from %zu bytes (data at 128)", header_end);

    uint64_t lo, hi;
    lean_error e = {0};
    static const char zip[] = "PK\3\4 not a model";
    CHECK(lean_gguf_size(zip, sizeof zip - 1, &lo, &hi, &e) == LEAN_ERR_FORMAT && strstr(e.msg, "not a GGUF"),
          "not GGUF: %s", e.msg);
    bytes v = {0};
    b_head(&v, 0, 1);
    memcpy(v.p + 4, "\7\0\0\0", 4); /* version 7 */
    CHECK(lean_gguf_size(v.p, v.n, &lo, &hi, &e) == LEAN_ERR_UNSUPPORTED, "version 7: %s", e.msg);
    bytes h = {0}; /* one key whose name claims 2^40 bytes: more bytes never end it (the caller's cap does) */
    b_head(&h, 0, 1);
    b_u64(&h, 1ull << 40);
    b_put(&h, "abcdefgh", 8);
    CHECK(lean_gguf_size(h.p, h.n, &lo, &hi, &e) == LEAN_OK && lo == 0 && hi == 0 && strstr(e.msg, "length"),
          "a 2^40-byte key name: %" PRIu64 " %s", lo, e.msg);
    free(x.p);
    free(v.p);
    free(h.p);
}

/* ====================================================================== 3. round trip */

/* The keys of the round-trip file, in order: what the reader must give back. */
#define MAX_EXP 64
static struct {
    const char *key;
    gguf_value v;
} exp_kv[MAX_EXP];
static int n_exp;

static gguf_value scalar(uint32_t type, uint64_t u, int64_t i, double f) {
    gguf_value v = {.type = type};
    if (type == GGUF_F32 || type == GGUF_F64) v.v.f64 = f;
    else if (type == GGUF_I8 || type == GGUF_I16 || type == GGUF_I32 || type == GGUF_I64) v.v.i64 = i;
    else v.v.u64 = u;
    return v;
}
static gguf_value str_value(const char *s) {
    gguf_value v = {.type = GGUF_STRING};
    v.v.str.ptr = (char *)s;
    v.v.str.len = strlen(s);
    return v;
}
static gguf_value arr_value(uint32_t et, gguf_value *items, uint64_t n) {
    gguf_value v = {.type = GGUF_ARRAY};
    v.v.arr.elem_type = et;
    v.v.arr.items = items;
    v.v.arr.count = n;
    return v;
}
static void expect(const char *key, gguf_value v) {
    exp_kv[n_exp].key = key;
    exp_kv[n_exp].v = v;
    n_exp++;
}

/* Static storage for the expected arrays' items. */
static gguf_value it_u8[3], it_i8[3], it_u16[3], it_i16[3], it_u32[3], it_i32[3], it_f32[3],
    it_bool[3], it_u64[3], it_i64[3], it_f64[3], it_str[4], in_a[2], in_b[1], in_ab[3], in3_0[2],
    in3_1[1], in3_00[2], in3_01[1], in3_10[1], in3_top[2];

/* Every value type through every writer entry point, plus four tensors. */
static gguf_writer *build_all_types(void) {
    gguf_writer *w = gguf_writer_new();
    n_exp = 0;
    /* the typed helpers */
    gguf_w_str(w, "general.architecture", "llama");
    expect("general.architecture", str_value("llama"));
    gguf_w_u32(w, "h.u32", 4000000000u);
    expect("h.u32", scalar(GGUF_U32, 4000000000u, 0, 0));
    gguf_w_u64(w, "h.u64", UINT64_MAX - 1);
    expect("h.u64", scalar(GGUF_U64, UINT64_MAX - 1, 0, 0));
    gguf_w_i32(w, "h.i32", INT32_MIN);
    expect("h.i32", scalar(GGUF_I32, 0, INT32_MIN, 0));
    gguf_w_f32(w, "h.f32", 1e-5f);
    expect("h.f32", scalar(GGUF_F32, 0, 0, 1e-5f));
    gguf_w_bool(w, "h.bool", true);
    expect("h.bool", scalar(GGUF_BOOL, 1, 0, 0));
    gguf_w_str(w, "h.empty", "");
    expect("h.empty", str_value(""));
    /* longer than the reader's 4 KiB buffer: read straight into the string */
    static char long_str[10000];
    memset(long_str, 'x', sizeof long_str - 1);
    long_str[0] = 'L';
    gguf_w_str(w, "h.long", long_str);
    expect("h.long", str_value(long_str));
    /* every scalar type through gguf_w_value, at its extremes */
    const gguf_value sv[] = {
        scalar(GGUF_U8, 255, 0, 0),         scalar(GGUF_I8, 0, -128, 0),
        scalar(GGUF_U16, 65535, 0, 0),      scalar(GGUF_I16, 0, -32768, 0),
        scalar(GGUF_U32, UINT32_MAX, 0, 0), scalar(GGUF_I32, 0, INT32_MAX, 0),
        scalar(GGUF_F32, 0, 0, -0.0),       scalar(GGUF_BOOL, 0, 0, 0),
        str_value("utf-8: h\xc3\xa9llo"),   scalar(GGUF_U64, UINT64_MAX, 0, 0),
        scalar(GGUF_I64, 0, INT64_MIN, 0),  scalar(GGUF_F64, 0, 0, -0.1),
    };
    static const char *const sk[] = {"v.u8",  "v.i8",   "v.u16", "v.i16", "v.u32", "v.i32",
                                     "v.f32", "v.bool", "v.str", "v.u64", "v.i64", "v.f64"};
    for (int i = 0; i < 12; i++) {
        gguf_w_value(w, sk[i], &sv[i]);
        expect(sk[i], sv[i]);
    }
    /* scalar arrays through gguf_w_arr (packed C values) */
    const uint8_t a_u8[3] = {0, 1, 255};
    const int8_t a_i8[3] = {-128, 0, 127};
    const uint16_t a_u16[3] = {0, 1, 65535};
    const int16_t a_i16[3] = {-32768, -1, 32767};
    const uint32_t a_u32[3] = {0, 7, UINT32_MAX};
    const int32_t a_i32[3] = {INT32_MIN, -1, INT32_MAX};
    const float a_f32[3] = {-1.5f, 0.0f, 3.25e30f};
    const bool a_bool[3] = {true, false, true};
    const uint64_t a_u64[3] = {0, 1ull << 40, UINT64_MAX};
    const int64_t a_i64[3] = {INT64_MIN, -1, INT64_MAX};
    const double a_f64[3] = {-2.5, 1e300, 5e-324};
    for (int i = 0; i < 3; i++) {
        it_u8[i] = scalar(GGUF_U8, a_u8[i], 0, 0);
        it_i8[i] = scalar(GGUF_I8, 0, a_i8[i], 0);
        it_u16[i] = scalar(GGUF_U16, a_u16[i], 0, 0);
        it_i16[i] = scalar(GGUF_I16, 0, a_i16[i], 0);
        it_u32[i] = scalar(GGUF_U32, a_u32[i], 0, 0);
        it_i32[i] = scalar(GGUF_I32, 0, a_i32[i], 0);
        it_f32[i] = scalar(GGUF_F32, 0, 0, a_f32[i]);
        it_bool[i] = scalar(GGUF_BOOL, a_bool[i], 0, 0);
        it_u64[i] = scalar(GGUF_U64, a_u64[i], 0, 0);
        it_i64[i] = scalar(GGUF_I64, 0, a_i64[i], 0);
        it_f64[i] = scalar(GGUF_F64, 0, 0, a_f64[i]);
    }
    gguf_w_arr(w, "a.u8", GGUF_U8, a_u8, 3);
    expect("a.u8", arr_value(GGUF_U8, it_u8, 3));
    gguf_w_arr(w, "a.i8", GGUF_I8, a_i8, 3);
    expect("a.i8", arr_value(GGUF_I8, it_i8, 3));
    gguf_w_arr(w, "a.u16", GGUF_U16, a_u16, 3);
    expect("a.u16", arr_value(GGUF_U16, it_u16, 3));
    gguf_w_arr(w, "a.i16", GGUF_I16, a_i16, 3);
    expect("a.i16", arr_value(GGUF_I16, it_i16, 3));
    gguf_w_arr(w, "a.u32", GGUF_U32, a_u32, 3);
    expect("a.u32", arr_value(GGUF_U32, it_u32, 3));
    gguf_w_arr(w, "a.i32", GGUF_I32, a_i32, 3);
    expect("a.i32", arr_value(GGUF_I32, it_i32, 3));
    gguf_w_arr(w, "a.f32", GGUF_F32, a_f32, 3);
    expect("a.f32", arr_value(GGUF_F32, it_f32, 3));
    gguf_w_arr(w, "a.bool", GGUF_BOOL, a_bool, 3);
    expect("a.bool", arr_value(GGUF_BOOL, it_bool, 3));
    gguf_w_arr(w, "a.u64", GGUF_U64, a_u64, 3);
    expect("a.u64", arr_value(GGUF_U64, it_u64, 3));
    gguf_w_arr(w, "a.i64", GGUF_I64, a_i64, 3);
    expect("a.i64", arr_value(GGUF_I64, it_i64, 3));
    gguf_w_arr(w, "a.f64", GGUF_F64, a_f64, 3);
    expect("a.f64", arr_value(GGUF_F64, it_f64, 3));
    gguf_w_arr(w, "a.empty", GGUF_U32, NULL, 0);
    expect("a.empty", arr_value(GGUF_U32, NULL, 0));
    /* arrays of strings */
    static const char *const strs[4] = {"<s>", "", "\xe2\x96\x81the", "a b\tc"};
    for (int i = 0; i < 4; i++) it_str[i] = str_value(strs[i]);
    gguf_w_arr_str(w, "a.str", strs, 4);
    expect("a.str", arr_value(GGUF_STRING, it_str, 4));
    /* nested: [["x", "y"], [], ["z"]] */
    in_a[0] = str_value("x");
    in_a[1] = str_value("y");
    in_b[0] = str_value("z");
    in_ab[0] = arr_value(GGUF_STRING, in_a, 2);
    in_ab[1] = arr_value(GGUF_STRING, NULL, 0);
    in_ab[2] = arr_value(GGUF_STRING, in_b, 1);
    gguf_value nest = arr_value(GGUF_ARRAY, in_ab, 3);
    gguf_w_value(w, "n.str2", &nest);
    expect("n.str2", nest);
    /* three levels of i32: [[[1, 2], [3]], [[4]]] */
    in3_00[0] = scalar(GGUF_I32, 0, 1, 0);
    in3_00[1] = scalar(GGUF_I32, 0, 2, 0);
    in3_01[0] = scalar(GGUF_I32, 0, 3, 0);
    in3_10[0] = scalar(GGUF_I32, 0, 4, 0);
    in3_0[0] = arr_value(GGUF_I32, in3_00, 2);
    in3_0[1] = arr_value(GGUF_I32, in3_01, 1);
    in3_1[0] = arr_value(GGUF_I32, in3_10, 1);
    in3_top[0] = arr_value(GGUF_ARRAY, in3_0, 2);
    in3_top[1] = arr_value(GGUF_ARRAY, in3_1, 1);
    gguf_value nest3 = arr_value(GGUF_ARRAY, in3_top, 2);
    gguf_w_value(w, "n.i32x3", &nest3);
    expect("n.i32x3", nest3);
    /* tensors: F32 matrix, Q4_0 rows of two blocks, odd-sized F16, one Q6_K block */
    add_pattern_tensor(w, "token_embd.weight", LEAN_TYPE_F32, 2, (int64_t[]){4, 3}, 0);
    add_pattern_tensor(w, "blk.0.attn_q.weight", LEAN_TYPE_Q4_0, 2, (int64_t[]){64, 2}, 1);
    add_pattern_tensor(w, "f16.odd", LEAN_TYPE_F16, 1, (int64_t[]){5}, 2);
    add_pattern_tensor(w, "q6k.4d", LEAN_TYPE_Q6_K, 4, (int64_t[]){256, 1, 1, 1}, 3);
    return w;
}

static const struct {
    const char *name;
    uint32_t type, n_dims;
    int64_t ne[4];
    uint64_t n_bytes;
} exp_t[4] = {
    {"token_embd.weight", LEAN_TYPE_F32, 2, {4, 3, 1, 1}, 48},
    {"blk.0.attn_q.weight", LEAN_TYPE_Q4_0, 2, {64, 2, 1, 1}, 72},
    {"f16.odd", LEAN_TYPE_F16, 1, {5, 1, 1, 1}, 10},
    {"q6k.4d", LEAN_TYPE_Q6_K, 4, {256, 1, 1, 1}, 210},
};

/* Everything build_all_types wrote, read back from f (whose file bytes are p). */
static void check_all_types(const gguf_file *f, const uint8_t *p, uint64_t align) {
    CHECK(f->n_kv == (uint64_t)n_exp, "n_kv %" PRIu64 " want %d", f->n_kv, n_exp);
    for (int i = 0; i < n_exp && (uint64_t)i < f->n_kv; i++) {
        CHECK(strcmp(f->kv[i].key.ptr, exp_kv[i].key) == 0, "key %d is '%s', want '%s'", i,
              f->kv[i].key.ptr, exp_kv[i].key);
        CHECK(value_eq(&f->kv[i].value, &exp_kv[i].v), "value of '%s'", exp_kv[i].key);
        CHECK(gguf_find(f, exp_kv[i].key) == &f->kv[i].value, "find '%s'", exp_kv[i].key);
    }
    CHECK(f->alignment == align && f->data_offset % align == 0, "alignment %" PRIu64, f->alignment);
    CHECK(f->n_tensors == 4, "n_tensors %" PRIu64, f->n_tensors);
    uint64_t want_off = 0;
    for (uint64_t i = 0; i < 4 && i < f->n_tensors; i++) {
        const gguf_tensor_info *t = &f->tensors[i];
        CHECK(strcmp(t->name.ptr, exp_t[i].name) == 0 && t->type == exp_t[i].type &&
                  t->n_dims == exp_t[i].n_dims && memcmp(t->ne, exp_t[i].ne, sizeof t->ne) == 0 &&
                  t->n_bytes == exp_t[i].n_bytes,
              "tensor %" PRIu64 " '%s'", i, t->name.ptr);
        CHECK(t->offset == want_off, "tensor '%s' offset %" PRIu64 " want %" PRIu64, t->name.ptr,
              t->offset, want_off);
        CHECK(gguf_find_tensor(f, exp_t[i].name) == t, "find tensor '%s'", exp_t[i].name);
        const uint8_t *d = p + f->data_offset + t->offset;
        bool same = true, zero_pad = true;
        for (uint64_t k = 0; k < t->n_bytes; k++) same = same && d[k] == pattern(i, k);
        uint64_t end = (t->n_bytes + align - 1) / align * align;
        for (uint64_t k = t->n_bytes; k < end; k++) zero_pad = zero_pad && d[k] == 0;
        CHECK(same && zero_pad, "tensor '%s' data or padding", t->name.ptr);
        want_off += end;
    }
    CHECK(f->file_size == f->data_offset + want_off, "file size %" PRIu64, f->file_size);
    CHECK(!gguf_find(f, "nope") && !gguf_find_tensor(f, "nope"), "absent names");
}

/* build_all_types's file: its bytes into *b, and read back (NULL, b freed, if that fails). */
static gguf_file *read_all_types(bytes *b) {
    *b = writer_bytes(build_all_types());
    gguf_file *f = read_ok(b);
    if (!f) free(b->p);
    return f;
}

/* A writer with f's keys and tensors, the data copied from the file bytes p; with
 * declare_odd, the odd-numbered tensors only declared (for a fill). */
static gguf_writer *rewriter(const gguf_file *f, const uint8_t *p, bool declare_odd) {
    gguf_writer *w = gguf_writer_new();
    for (uint64_t i = 0; i < f->n_kv; i++) gguf_w_value(w, f->kv[i].key.ptr, &f->kv[i].value);
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor_info *t = &f->tensors[i];
        if (declare_odd && i % 2) gguf_w_tensor_info(w, t->name.ptr, t->type, t->n_dims, t->ne);
        else gguf_w_tensor(w, t->name.ptr, t->type, t->n_dims, t->ne, p + f->data_offset + t->offset, t->n_bytes);
    }
    return w;
}

static void test_roundtrip(void) {
    bytes b = writer_bytes(build_all_types());
    /* from memory; and as version 2, which has the same layout */
    bytes v2 = copy_of(&b);
    patch_le(&v2, 4, 2, 4);
    const bytes *as[2] = {&b, &v2};
    for (uint32_t k = 0; k < 2; k++) {
        gguf_file *f = read_ok(as[k]);
        if (f) {
            CHECK(f->version == 3 - k, "version %u", f->version);
            check_all_types(f, as[k]->p, 32);
        }
        gguf_free(f);
    }
    /* a stream that gives 7 bytes per call */
    gguf_file *f = NULL;
    lean_error e = {0};
    lean_mapped_file m = {b.p, b.n};
    CHECK(gguf_read(read_dribble, &m, b.n, &f, &e) == LEAN_OK, "dribble: %s", e.msg);
    if (f) check_all_types(f, b.p, 32);
    gguf_free(f);
    /* gguf_w_value copies a read value exactly: rewrite the whole file from what was read */
    f = read_ok(&b);
    if (f) {
        bytes again = writer_bytes(rewriter(f, b.p, false));
        CHECK(again.n == b.n && memcmp(again.p, b.p, b.n) == 0, "rewrite differs");
        free(again.p);
    }
    gguf_free(f);
    free(v2.p);
    free(b.p);
}

/* The same file through gguf_writer_write, lean_map_file and lean_read_stdio. */
static void test_file_paths(void) {
    bytes b = writer_bytes(build_all_types());
    const char *path = tmp_path("all.gguf");
    lean_error e = {0};
    gguf_writer *w = build_all_types();
    CHECK(gguf_writer_write(w, path, &e) == LEAN_OK, "%s", e.msg);
    gguf_writer_free(w);

    lean_mapped_file m = {0};
    gguf_file *f = NULL;
#ifndef __wasi__
    CHECK(lean_map_file(path, &m, &e) == LEAN_OK, "%s", e.msg);
    CHECK(m.size == b.n && m.data && memcmp(m.data, b.p, b.n) == 0, "file bytes == memory bytes");
    CHECK(gguf_read(lean_read_mapped, &m, m.size, &f, &e) == LEAN_OK, "mapped: %s", e.msg);
    if (f) check_all_types(f, m.data, 32);
    gguf_free(f);
    f = NULL;
#else /* WASI has no mmap, and says what to use instead */
    CHECK(lean_map_file(path, &m, &e) == LEAN_ERR_UNSUPPORTED && strstr(e.msg, "use the streamed loader"),
          "%s", e.msg);
#endif
    lean_unmap_file(&m);
    CHECK(m.data == NULL && m.size == 0, "unmap clears");

    FILE *fp = fopen(path, "rb");
    CHECK(fp != NULL, "fopen");
    if (fp) {
        CHECK(gguf_read(lean_read_stdio, fp, b.n, &f, &e) == LEAN_OK, "stdio: %s", e.msg);
        if (f) check_all_types(f, b.p, 32);
        gguf_free(f);
        uint8_t x[4];
        CHECK(lean_read_stdio(fp, b.n - 2, x, 4) == 2, "stdio read at the end is short");
        CHECK(lean_read_stdio(fp, UINT64_MAX, x, 4) == 0, "stdio offset past off_t");
        fclose(fp);
    }
    remove(path);
    free(b.p);
}

/* A gguf_fill_fn: tensor `index` is pattern(index, k), written 5 bytes at a time (a
 * fill writes rows, not whole tensors), broken in one way when the test asks. */
typedef struct pattern_fill {
    int calls;
    uint64_t index[4];  /* the indices it was called with */
    uint64_t short_by;  /* writes this many bytes fewer */
    uint64_t extra;     /* ... or tries this many more */
    bool drop_status;   /* returns LEAN_OK whatever gguf_sink_write said */
    bool fail;          /* fails on its own */
} pattern_fill;

static lean_status fill_pattern(void *user, uint64_t index, const gguf_tensor_info *t, gguf_sink *sink,
                                lean_error *err) {
    pattern_fill *pf = user;
    if (pf->calls < 4) pf->index[pf->calls] = index;
    pf->calls++;
    if (pf->fail) return LEAN_FAIL(err, LEAN_ERR_IO, "test fill: no data for '%s'", t->name.ptr);
    uint64_t n = t->n_bytes - pf->short_by + pf->extra;
    lean_status st = LEAN_OK;
    for (uint64_t k = 0; k < n && st == LEAN_OK; k += 5) {
        uint8_t piece[5];
        size_t m = n - k < 5 ? (size_t)(n - k) : 5;
        for (size_t j = 0; j < m; j++) piece[j] = pattern(index, k + j);
        st = gguf_sink_write(sink, piece, m, err);
    }
    return pf->drop_status ? LEAN_OK : st;
}

static bool file_is(const char *path, const bytes *want) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return false;
    bytes got = {0};
    uint8_t buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, fp)) > 0) b_put(&got, buf, n);
    fclose(fp);
    bool same = got.n == want->n && memcmp(got.p, want->p, want->n) == 0;
    free(got.p);
    return same;
}

static bool exists(const char *path) { return access(path, F_OK) == 0; }

/* Streamed tensor data gives the very bytes of the copying writer, fill called once per
 * declared tensor, in order, with the file's tensor index; nothing is left beside it.
 * A fill that fails, writes too few or too many bytes, or drops gguf_sink_write's status
 * fails the write with a reason naming the tensor, leaving the file that was there
 * untouched and no .tmp. A declared tensor cannot go through the copying writes. */
static void test_stream(void) {
    bytes b;
    gguf_file *f = read_all_types(&b);
    if (!f) return;
    lean_error e = {0};
    const char *path = tmp_path("stream.gguf");
    char tmp[160];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    gguf_writer *w = rewriter(f, b.p, true);
    pattern_fill pf = {0};
    CHECK(gguf_writer_write_stream(w, path, fill_pattern, &pf, &e) == LEAN_OK, "%s", e.msg);
    CHECK(file_is(path, &b), "streamed bytes == copied bytes");
    CHECK(!exists(tmp), "no .tmp left");
    CHECK(pf.calls == 2 && pf.index[0] == 1 && pf.index[1] == 3, "fill calls %d (%llu, %llu)", pf.calls,
          (unsigned long long)pf.index[0], (unsigned long long)pf.index[1]);
    /* writing again replaces the file */
    pf.calls = 0;
    CHECK(gguf_writer_write_stream(w, path, fill_pattern, &pf, &e) == LEAN_OK, "%s", e.msg);
    CHECK(file_is(path, &b) && pf.calls == 2, "rewritten");
    gguf_writer_free(w);

    bytes old = {0};
    b_put(&old, "an older file", 13);
    static const struct {
        pattern_fill pf;
        lean_status status;
        const char *msg;
    } cases[] = {
        {{.short_by = 1}, LEAN_ERR_ARG, "the fill of tensor 'blk.0.attn_q.weight' wrote 71 of its 72 bytes"},
        {{.extra = 1}, LEAN_ERR_ARG, "the fill of tensor 'blk.0.attn_q.weight' wrote more than its 72 bytes"},
        {{.extra = 1, .drop_status = true}, LEAN_ERR_ARG, "wrote more than its 72 bytes"},
        {{.fail = true}, LEAN_ERR_IO, "test fill: no data for 'blk.0.attn_q.weight'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        FILE *fp = fopen(path, "wb");
        if (fp) {
            fwrite(old.p, 1, old.n, fp);
            fclose(fp);
        }
        w = rewriter(f, b.p, true);
        pf = cases[i].pf;
        lean_status st = gguf_writer_write_stream(w, path, fill_pattern, &pf, &e);
        CHECK(st == cases[i].status && strstr(e.msg, cases[i].msg), "case %zu: status %d '%s'", i, st, e.msg);
        CHECK(pf.calls == 1, "case %zu: stops at the first bad tensor (%d calls)", i, pf.calls);
        CHECK(file_is(path, &old) && !exists(tmp), "case %zu: the old file stays, no .tmp", i);
        gguf_writer_free(w);
    }
    remove(path);
    free(old.p);
    pf = (pattern_fill){0};

    /* without a fill, a declared tensor has no data */
    w = rewriter(f, b.p, true);
    CHECK(gguf_writer_write(w, path, &e) == LEAN_ERR_ARG &&
              strstr(e.msg, "tensor 'blk.0.attn_q.weight' has no data (declared with gguf_w_tensor_info"),
          "%s", e.msg);
    CHECK(!exists(path) && !exists(tmp), "nothing created");
    void *p = NULL;
    uint64_t n = 0;
    CHECK(gguf_writer_write_mem(w, &p, &n, &e) == LEAN_ERR_ARG && strstr(e.msg, "has no data") && !p, "%s",
          e.msg);
    gguf_writer_free(w);
    /* declared tensors may claim any size, but not a data section past 64 bits */
    w = gguf_writer_new();
    gguf_w_tensor_info(w, "a", LEAN_TYPE_F16, 1, (int64_t[]){(int64_t)1 << 62}); /* 2^63 bytes */
    gguf_w_tensor_info(w, "b", LEAN_TYPE_F16, 1, (int64_t[]){(int64_t)1 << 62});
    CHECK(gguf_writer_write_stream(w, path, fill_pattern, &pf, &e) == LEAN_ERR_ARG &&
              strstr(e.msg, "the data section overflows at tensor 'b'") && !exists(path) && !exists(tmp),
          "%s", e.msg);
    gguf_writer_free(w);
    /* the .tmp name cannot be allocated: a clean NOMEM, nothing created */
    w = rewriter(f, b.p, true);
    lean_alloc_fail_at(1, false);
    lean_status st = gguf_writer_write_stream(w, path, fill_pattern, &pf, &e);
    lean_alloc_fail_at(0, false);
    CHECK(st == LEAN_ERR_NOMEM && strstr(e.msg, "out of memory") && !exists(path) && !exists(tmp), "%d %s", st,
          e.msg);
    gguf_writer_free(w);
    /* a full device fails inside the fill (2 MiB: past the 1 MiB buffer), written in place */
    if (access("/dev/full", W_OK) == 0) {
        w = gguf_writer_new();
        gguf_w_tensor_info(w, "big", LEAN_TYPE_F32, 1, (int64_t[]){1 << 19});
        st = gguf_writer_write_stream(w, "/dev/full", fill_pattern, &pf, &e);
        CHECK(st == LEAN_ERR_IO && strstr(e.msg, "writing '/dev/full' failed after") && pf.calls == 1, "%d %s", st,
              e.msg);
        gguf_writer_free(w);
    }
    gguf_free(f);
    free(b.p);
}

static void test_alignment(void) {
    /* set after a tensor was added: it applies to the whole file all the same */
    gguf_writer *w = build_all_types();
    gguf_w_u32(w, "general.alignment", 64);
    expect("general.alignment", scalar(GGUF_U32, 64, 0, 0));
    bytes b = writer_bytes(w);
    gguf_file *f = read_ok(&b);
    if (f) check_all_types(f, b.p, 64);
    gguf_free(f);
    free(b.p);
    /* alignment 1: no padding anywhere */
    w = gguf_writer_new();
    gguf_w_u32(w, "general.alignment", 1);
    add_pattern_tensor(w, "x", LEAN_TYPE_F16, 1, (int64_t[]){3}, 0);
    add_pattern_tensor(w, "y", LEAN_TYPE_F16, 1, (int64_t[]){1}, 1);
    b = writer_bytes(w);
    f = read_ok(&b);
    if (f) {
        CHECK(f->alignment == 1 && f->tensors[1].offset == 6 && f->data_offset + 8 == b.n,
              "alignment 1 packs (offset %" PRIu64 ")", f->tensors[1].offset);
    }
    gguf_free(f);
    free(b.p);
}

static void test_getters(void) {
    gguf_writer *w = gguf_writer_new();
    gguf_w_u32(w, "u32", 7);
    gguf_w_i32(w, "neg", -1);
    gguf_w_f32(w, "f", 0.5f);
    gguf_w_str(w, "s", "hi");
    gguf_value u8 = scalar(GGUF_U8, 200, 0, 0), big = scalar(GGUF_U64, 1ull << 32, 0, 0);
    gguf_value i64 = scalar(GGUF_I64, 0, 12345, 0), f64 = scalar(GGUF_F64, 0, 0, 0.25);
    gguf_w_value(w, "u8", &u8);
    gguf_w_value(w, "big", &big);
    gguf_w_value(w, "i64", &i64);
    gguf_w_value(w, "f64", &f64);
    const uint32_t arr[2] = {1, 2};
    gguf_w_arr(w, "arr", GGUF_U32, arr, 2);
    bytes b = writer_bytes(w);
    gguf_file *f = read_ok(&b);
    lean_error e = {0};
    if (!f) {
        free(b.p);
        return;
    }
    uint32_t u = 0;
    float x = 0;
    const char *s = NULL;
    const gguf_value *a = NULL;
    CHECK(gguf_get_u32(f, "u32", &u, &e) == LEAN_OK && u == 7, "u32");
    CHECK(gguf_get_u32(f, "u8", &u, &e) == LEAN_OK && u == 200, "u8 as u32");
    CHECK(gguf_get_u32(f, "i64", &u, &e) == LEAN_OK && u == 12345, "i64 as u32");
    CHECK(gguf_get_f32(f, "f", &x, &e) == LEAN_OK && x == 0.5f, "f32");
    CHECK(gguf_get_f32(f, "f64", &x, &e) == LEAN_OK && x == 0.25f, "f64 as f32");
    CHECK(gguf_get_str(f, "s", &s, &e) == LEAN_OK && strcmp(s, "hi") == 0, "str");
    CHECK(gguf_get_arr(f, "arr", GGUF_U32, &a, &e) == LEAN_OK && a->v.arr.count == 2, "arr");
    u = 99;
    CHECK(gguf_get_u32(f, "neg", &u, &e) == LEAN_ERR_MODEL && strstr(e.msg, "'neg' is -1") && u == 99,
          "%s", e.msg);
    CHECK(gguf_get_u32(f, "big", &u, &e) == LEAN_ERR_MODEL && strstr(e.msg, "does not fit in u32"),
          "%s", e.msg);
    CHECK(gguf_get_u32(f, "s", &u, &e) == LEAN_ERR_MODEL && strstr(e.msg, "expected an integer"), "%s",
          e.msg);
    CHECK(gguf_get_u32(f, "missing.key", &u, &e) == LEAN_ERR_MODEL &&
              strstr(e.msg, "'missing.key' is missing"),
          "%s", e.msg);
    CHECK(gguf_get_f32(f, "u32", &x, &e) == LEAN_ERR_MODEL && strstr(e.msg, "expected f32"), "%s",
          e.msg);
    CHECK(gguf_get_str(f, "u32", &s, &e) == LEAN_ERR_MODEL && strstr(e.msg, "expected string"), "%s",
          e.msg);
    CHECK(gguf_get_arr(f, "arr", GGUF_I32, &a, &e) == LEAN_ERR_MODEL &&
              strstr(e.msg, "has type array of u32; expected array of i32"),
          "%s", e.msg);
    gguf_free(f);
    free(b.p);
}

/* ====================================================================== 4. malformed */

/* The base for patching: equal-length key names (so one can be renamed into another),
 * one of each kind the patches need, two tensors. */
static bytes base_file(bool with_alignment) {
    gguf_writer *w = gguf_writer_new();
    gguf_w_str(w, "k.str", "llama");
    gguf_w_u32(w, "k.u32", 7);
    gguf_w_bool(w, "k.bol", true);
    const uint32_t a[3] = {1, 2, 3};
    gguf_w_arr(w, "k.arr", GGUF_U32, a, 3);
    if (with_alignment) gguf_w_u32(w, "general.alignment", 32);
    add_pattern_tensor(w, "t.a", LEAN_TYPE_F32, 1, (int64_t[]){8}, 0);       /* 32 bytes */
    add_pattern_tensor(w, "t.b", LEAN_TYPE_Q4_0, 2, (int64_t[]){32, 2}, 1);  /* 36 bytes */
    return writer_bytes(w);
}

/* Offsets inside base_file: a key's name, its type field, its value; a tensor's fields. */
static size_t key_at(const bytes *b, const char *k) { return find_bytes(b, k); }
static size_t type_at(const bytes *b, const char *k) { return key_at(b, k) + strlen(k); }
static size_t value_at(const bytes *b, const char *k) { return type_at(b, k) + 4; }
static size_t ndims_at(const bytes *b, const char *t) { return find_bytes(b, t) + strlen(t); }
static size_t ne_at(const bytes *b, const char *t, int d) { return ndims_at(b, t) + 4 + 8 * d; }
static size_t ttype_at(const bytes *b, const char *t, int n_dims) { return ne_at(b, t, n_dims); }
static size_t toff_at(const bytes *b, const char *t, int n_dims) { return ttype_at(b, t, n_dims) + 4; }

/* Applies one patch of n bytes at off to a copy of base and expects the failure. */
#define PATCH_FAIL(base, off, val, width, st, msg)                                                 \
    do {                                                                                          \
        bytes c_ = copy_of(base);                                                                 \
        patch_le(&c_, (off), (val), (width));                                                     \
        EXPECT_FAIL(c_.p, c_.n, (st), (msg));                                                     \
        free(c_.p);                                                                               \
    } while (0)

static void test_malformed_header(const bytes *b) {
    EXPECT_FAIL(b->p, 0, LEAN_ERR_FORMAT, "truncated: header: magic at offset 0 needs 4 bytes");
    PATCH_FAIL(b, 0, 'X', 1, LEAN_ERR_FORMAT, "bad magic 58 47 55 46");
    PATCH_FAIL(b, 4, 1, 4, LEAN_ERR_UNSUPPORTED, "unsupported GGUF version 1 ");
    PATCH_FAIL(b, 4, 4, 4, LEAN_ERR_UNSUPPORTED, "unsupported GGUF version 4 ");
    PATCH_FAIL(b, 4, 0, 4, LEAN_ERR_UNSUPPORTED, "unsupported GGUF version 0 ");
    PATCH_FAIL(b, 4, 0x03000000, 4, LEAN_ERR_UNSUPPORTED, "(a big-endian file?)");
    EXPECT_FAIL(b->p, 12, LEAN_ERR_FORMAT, "truncated: header: n_tensors at offset 8 needs 8 bytes, the file has 12");
    EXPECT_FAIL(b->p, 20, LEAN_ERR_FORMAT, "truncated: header: n_kv at offset 16 needs 8 bytes");
    PATCH_FAIL(b, 8, 1ull << 40, 8, LEAN_ERR_FORMAT, "claims 1099511627776 tensors and 4 keys");
    PATCH_FAIL(b, 16, UINT64_MAX, 8, LEAN_ERR_FORMAT, "keys, which cannot fit");
    PATCH_FAIL(b, 8, UINT64_MAX / 16, 8, LEAN_ERR_FORMAT, "which cannot fit"); /* n * 32 overflows */
    /* one key fewer said: the last key is read as a tensor info, its type as n_dims */
    PATCH_FAIL(b, 16, 3, 8, LEAN_ERR_FORMAT, "tensor 'k.arr' has n_dims 9 at offset");
}

static void test_malformed_values(const bytes *b) {
    /* lengths: checked against the bytes left before any allocation */
    PATCH_FAIL(b, key_at(b, "k.u32") - 8, 1ull << 62, 8, LEAN_ERR_FORMAT,
               "key #1: key at offset");
    PATCH_FAIL(b, key_at(b, "k.u32") - 8, UINT64_MAX, 8, LEAN_ERR_FORMAT,
               "has length 18446744073709551615, but only");
    PATCH_FAIL(b, value_at(b, "k.str"), UINT64_MAX - 1, 8, LEAN_ERR_FORMAT,
               "key 'k.str': string at offset");
    PATCH_FAIL(b, value_at(b, "k.arr") + 4, 1ull << 61, 8, LEAN_ERR_FORMAT,
               "has 2305843009213693952 elements of type u32, which cannot fit");
    PATCH_FAIL(b, value_at(b, "k.arr") + 4, (1ull << 62) + 1, 8, LEAN_ERR_FORMAT,
               "which cannot fit"); /* count * 4 overflows */
    /* types */
    PATCH_FAIL(b, type_at(b, "k.u32"), 13, 4, LEAN_ERR_FORMAT, "key 'k.u32' has unknown value type 13");
    PATCH_FAIL(b, type_at(b, "k.u32"), 0xffffffffu, 4, LEAN_ERR_FORMAT, "unknown value type 4294967295");
    PATCH_FAIL(b, value_at(b, "k.arr"), 13, 4, LEAN_ERR_FORMAT, "has unknown element type 13");
    PATCH_FAIL(b, value_at(b, "k.bol"), 2, 1, LEAN_ERR_FORMAT, "key 'k.bol': bool at offset");
    PATCH_FAIL(b, value_at(b, "k.bol"), 255, 1, LEAN_ERR_FORMAT, "is 255; it must be 0 or 1");
    /* names */
    bytes c = copy_of(b);
    memcpy(c.p + key_at(&c, "k.bol"), "k.u32", 5);
    EXPECT_FAIL(c.p, c.n, LEAN_ERR_FORMAT, "duplicate key 'k.u32' at offset");
    free(c.p);
    char msg[96];
    snprintf(msg, sizeof msg, "key at offset %zu contains a NUL byte", key_at(b, "k.u32") - 8);
    PATCH_FAIL(b, key_at(b, "k.u32") + 1, 0, 1, LEAN_ERR_FORMAT, msg);
    c = copy_of(b);
    memcpy(c.p + find_bytes(&c, "t.b"), "t.a", 3);
    EXPECT_FAIL(c.p, c.n, LEAN_ERR_FORMAT, "duplicate tensor 't.a' at offset");
    free(c.p);
    PATCH_FAIL(b, find_bytes(b, "t.a"), 0, 1, LEAN_ERR_FORMAT, "tensor at offset");
}

/* Arrays nested GGUF_MAX_DEPTH deep are fine; one more level is refused. */
static void test_nesting(void) {
    for (int levels = GGUF_MAX_DEPTH; levels <= GGUF_MAX_DEPTH + 1; levels++) {
        bytes x = {0};
        b_head(&x, 0, 1);
        b_str(&x, "deep");
        b_u32(&x, GGUF_ARRAY);
        for (int l = 1; l < levels; l++) {
            b_u32(&x, GGUF_ARRAY);
            b_u64(&x, 1);
        }
        b_u32(&x, GGUF_U8);
        b_u64(&x, 1);
        b_le(&x, 42, 1);
        if (levels == GGUF_MAX_DEPTH) {
            gguf_file *f = NULL;
            lean_error e = {0};
            CHECK(read_mem(x.p, x.n, &f, &e) == LEAN_OK, "%d levels: %s", levels, e.msg);
            if (f) {
                const gguf_value *v = &f->kv[0].value;
                for (int l = 1; l < levels; l++) v = &v->v.arr.items[0];
                CHECK(v->v.arr.elem_type == GGUF_U8 && v->v.arr.items[0].v.u64 == 42, "deepest value");
                gguf_writer *w = gguf_writer_new(); /* the writer takes what the reader takes */
                gguf_w_value(w, "deep", &f->kv[0].value);
                bytes again = writer_bytes(w);
                CHECK(again.n >= x.n && memcmp(again.p, x.p, x.n) == 0, "rewrite of 8 levels");
                free(again.p);
            }
            gguf_free(f);
        } else {
            /* header 24 + key 12 + type 4: level 1 at 40, level 8 (holding a 9th) at 40 + 7 * 12 */
            EXPECT_FAIL(x.p, x.n, LEAN_ERR_FORMAT, "key 'deep': array at offset 124 nests deeper than 8");
        }
        free(x.p);
    }
}

/* More than GGUF_MAX_VALUES array values in all is refused before allocating, even when
 * the file is big enough to hold them (a virtual file of zeros here). */
static void test_value_cap(void) {
    bytes x = {0};
    b_head(&x, 0, 2);
    b_str(&x, "a");
    b_u32(&x, GGUF_ARRAY);
    b_u32(&x, GGUF_U8);
    b_u64(&x, 10);
    b_put(&x, "0123456789", 10);
    b_str(&x, "b");
    b_u32(&x, GGUF_ARRAY);
    b_u32(&x, GGUF_U8);
    b_u64(&x, GGUF_MAX_VALUES - 9); /* 10 + this = the cap + 1 */
    lean_mapped_file m = {x.p, x.n};
    gguf_file *f = NULL;
    lean_error e = {0};
    lean_status st = gguf_read(read_zero_tail, &m, x.n + GGUF_MAX_VALUES, &f, &e);
    CHECK(st == LEAN_ERR_FORMAT && strstr(e.msg, "key 'b': array at offset") &&
              strstr(e.msg, "lean's limit of 16777216 array values"),
          "%d %s", st, e.msg);
    gguf_free(f);
#ifdef __wasi__
    /* wasm32: counts that fit a (claimed) 1 TiB stream but not the 4 GiB address space */
    patch_le(&x, 16, 1ull << 32, 8);
    f = NULL;
    st = gguf_read(read_zero_tail, &m, 1ull << 40, &f, &e);
    CHECK(st == LEAN_ERR_UNSUPPORTED && strstr(e.msg, "more than this build can address"), "%d %s", st,
          e.msg);
#endif
    free(x.p);
}

/* A virtual file: head's bytes, then unit's repeated up to whatever file_size the test claims. */
typedef struct pattern {
    const uint8_t *head, *unit;
    size_t n_head, n_unit;
} periodic;

static size_t read_periodic(void *user, uint64_t off, void *dst, size_t n) {
    const periodic *p = user;
    uint8_t *d = dst;
    for (size_t i = 0; i < n; i++, off++)
        d[i] = off < p->n_head ? p->head[off] : p->unit[(off - p->n_head) % p->n_unit];
    return n;
}

/* Reads head + n_units * unit; returns the status, with what the reader allocated (bytes
 * asked, plus GGUF_ALLOC_OVERHEAD per allocation: the reader's own measure, an upper bound
 * of glibc's) checked against the bound. */
static lean_status read_measured(const char *what, const bytes *head, const bytes *unit, uint64_t n_units,
                                 lean_error *e) {
    periodic p = {head->p, unit->p, head->n, unit->n};
    gguf_file *f = NULL;
    lean_alloc_fail_at(0, false);
    lean_status st = gguf_read(read_periodic, &p, head->n + n_units * unit->n, &f, e);
    uint64_t asked = lean_alloc_bytes(), n_alloc = lean_alloc_fail_at(0, false);
    uint64_t held = asked + n_alloc * GGUF_ALLOC_OVERHEAD;
    CHECK(held <= GGUF_MAX_HEADER_BYTES, "%s: the reader allocated %" PRIu64 " bytes in %" PRIu64
          " allocations (%" PRIu64 " counted), over the bound of %llu", what, asked, n_alloc, held,
          GGUF_MAX_HEADER_BYTES);
    printf("memory bound: %s (%" PRIu64 " MiB file): %s, %" PRIu64 " MiB in %" PRIu64 " allocations\n", what,
           (head->n + n_units * unit->n) >> 20, st == LEAN_OK ? "read" : "refused", held >> 20, n_alloc);
    gguf_free(f);
    return st;
}

/* One key, an array of n elements of elem_type (each one unit). */
static bytes array_head(uint32_t elem_type, uint64_t n) {
    bytes h = {0};
    b_head(&h, 0, 1);
    b_str(&h, "k");
    b_u32(&h, GGUF_ARRAY);
    b_u32(&h, elem_type);
    b_u64(&h, n);
    return h;
}

#define EXPECT_LIMIT(st, e, what)                                                                          \
    CHECK((st) == LEAN_ERR_FORMAT && strstr((e).msg, "lean's limit of 512 MiB of memory for a GGUF header"), \
          "%s: %d %s", what, st, (e).msg)

/* Before the bound counted every allocation, GGUF_MAX_VALUES empty strings (8 file bytes
 * each) took ~1.1 GB: a gguf_value and a 1-byte string apiece. */
static void test_memory_bound(void) {
    lean_error e = {0};
    bytes zeros = {0}, inner = {0};
    b_u64(&zeros, 0);
    b_u32(&zeros, 0); /* 12 zero bytes: an empty string (8) or an empty u8 array (12) */
    /* a small one is read, and costs what the reader counts */
    bytes h = array_head(GGUF_STRING, 100000);
    zeros.n = 8;
    lean_status st = read_measured("100000 empty strings", &h, &zeros, 100000, &e);
    CHECK(st == LEAN_OK, "%s", e.msg);
    free(h.p);
    /* the shapes that broke the old bound: refused at 512 MiB, having held less */
    h = array_head(GGUF_STRING, GGUF_MAX_VALUES); /* its values alone would take 512 MiB */
    st = read_measured("2^24 empty strings", &h, &zeros, GGUF_MAX_VALUES, &e);
    EXPECT_LIMIT(st, e, "2^24 empty strings");
    CHECK(strstr(e.msg, "key 'k': array at offset"), "%s", e.msg);
    free(h.p);
#ifndef __wasi__ /* these allocate ~512 MiB before the refusal: more than Node's wasm runtime grows to */
    h = array_head(GGUF_STRING, 8500000); /* 256 MB of values, then the strings */
    st = read_measured("8.5M empty strings", &h, &zeros, 8500000, &e);
    EXPECT_LIMIT(st, e, "8.5M empty strings");
    CHECK(strstr(e.msg, "key 'k': string at offset"), "%s", e.msg);
    free(h.p);
    h = array_head(GGUF_ARRAY, 8500000);
    zeros.n = 12;
    st = read_measured("8.5M empty arrays", &h, &zeros, 8500000, &e);
    EXPECT_LIMIT(st, e, "8.5M empty arrays");
    CHECK(strstr(e.msg, "key 'k': array at offset"), "%s", e.msg);
    free(h.p);
    /* 16383 arrays of 1023 empty strings: 2^24 - 1024 values */
    b_u32(&inner, GGUF_STRING);
    b_u64(&inner, 1023);
    for (int i = 0; i < 1023; i++) b_u64(&inner, 0);
    h = array_head(GGUF_ARRAY, 16383);
    st = read_measured("16383 arrays of 1023 empty strings", &h, &inner, 16383, &e);
    EXPECT_LIMIT(st, e, "arrays of empty strings");
    free(h.p);
#endif
    /* tables: 12M keys or 7M tensors are refused before their table is allocated */
    zeros.n = 12;
    h = (bytes){0};
    b_head(&h, 0, 12000000);
    st = read_measured("12M keys", &h, &zeros, 13000000, &e);
    EXPECT_LIMIT(st, e, "keys");
    CHECK(strstr(e.msg, "the key table"), "%s", e.msg);
    free(h.p);
    h = (bytes){0};
    b_head(&h, 7000000, 0);
    st = read_measured("7M tensors", &h, &zeros, 19000000, &e);
    EXPECT_LIMIT(st, e, "tensors");
    CHECK(strstr(e.msg, "the tensor table"), "%s", e.msg);
    free(h.p);
    free(zeros.p);
    free(inner.p);
}

static void test_malformed_alignment(void) {
    bytes b = base_file(true);
    size_t v = value_at(&b, "general.alignment");
    PATCH_FAIL(&b, v, 0, 4, LEAN_ERR_FORMAT, "general.alignment is 0; it must be a nonzero power of two");
    PATCH_FAIL(&b, v, 48, 4, LEAN_ERR_FORMAT, "general.alignment is 48; it must be");
    PATCH_FAIL(&b, v - 4, GGUF_I32, 4, LEAN_ERR_FORMAT, "general.alignment has type i32; it must be u32");
    /* alignment 64 on a file laid out for 32: offset 32 of t.b is now misaligned */
    PATCH_FAIL(&b, v, 64, 4, LEAN_ERR_FORMAT, "tensor 't.b' offset 32 (at offset");
    free(b.p);
}

static void test_malformed_tensors(const bytes *b) {
    /* shapes */
    PATCH_FAIL(b, ndims_at(b, "t.a"), 0, 4, LEAN_ERR_FORMAT, "tensor 't.a' has n_dims 0 at offset");
    PATCH_FAIL(b, ndims_at(b, "t.b"), 5, 4, LEAN_ERR_FORMAT, "tensor 't.b' has n_dims 5 at offset");
    PATCH_FAIL(b, ne_at(b, "t.a", 0), 0, 8, LEAN_ERR_FORMAT,
               "tensor 't.a' has ne[0] = 0 at offset");
    PATCH_FAIL(b, ne_at(b, "t.b", 1), 1ull << 63, 8, LEAN_ERR_FORMAT,
               "ne[1] = -9223372036854775808 at offset");
    PATCH_FAIL(b, ne_at(b, "t.b", 1), UINT64_MAX, 8, LEAN_ERR_FORMAT, "every dimension must be >= 1");
    bytes c = copy_of(b);
    patch_le(&c, ne_at(&c, "t.b", 0), 1ull << 32, 8);
    patch_le(&c, ne_at(&c, "t.b", 1), 1ull << 31, 8);
    EXPECT_FAIL(c.p, c.n, LEAN_ERR_FORMAT, "tensor 't.b': the element count overflows at ne[1]");
    free(c.p);
    /* 2^62 f32 elements fit int64 but not their 2^64 bytes */
    PATCH_FAIL(b, ne_at(b, "t.a", 0), 1ull << 62, 8, LEAN_ERR_FORMAT,
               "tensor 't.a' (f32): the size in bytes of 4611686018427387904 elements overflows");
    /* types */
    PATCH_FAIL(b, ttype_at(b, "t.b", 2), 99, 4, LEAN_ERR_UNSUPPORTED,
               "tensor 't.b' has type id 99 (offset");
    PATCH_FAIL(b, ttype_at(b, "t.b", 2), 43, 4, LEAN_ERR_UNSUPPORTED, "has type id 43 (offset"); /* past ggml's */
    /* a type ggml defines and lean does not run is named, as ggml.h spells it */
    PATCH_FAIL(b, ttype_at(b, "t.b", 2), 15, 4, LEAN_ERR_UNSUPPORTED,
               "tensor 't.b' has type Q8_K (id 15, at offset");
    PATCH_FAIL(b, ttype_at(b, "t.b", 2), 4, 4, LEAN_ERR_UNSUPPORTED, "has type Q4_2 (id 4,");  /* retired */
    PATCH_FAIL(b, ttype_at(b, "t.a", 1), 9, 4, LEAN_ERR_UNSUPPORTED, "'t.a' has type Q8_1 (id 9,");
    PATCH_FAIL(b, ttype_at(b, "t.a", 1), 42, 4, LEAN_ERR_UNSUPPORTED, "'t.a' has type Q2_0 (id 42,");
    PATCH_FAIL(b, ttype_at(b, "t.a", 1), 23, 4, LEAN_ERR_UNSUPPORTED, "'t.a' has type IQ4_XS (id 23,");
    PATCH_FAIL(b, ne_at(b, "t.b", 0), 16, 8, LEAN_ERR_FORMAT,
               "tensor 't.b' (q4_0): rows of 16 elements are not a multiple of the block of 32");
    /* offsets and data ranges */
    PATCH_FAIL(b, toff_at(b, "t.b", 2), 33, 8, LEAN_ERR_FORMAT,
               "tensor 't.b' offset 33 (at offset");
    PATCH_FAIL(b, toff_at(b, "t.b", 2), 33, 8, LEAN_ERR_FORMAT, "is not a multiple of the alignment 32");
    gguf_file *f = NULL;
    lean_error e = {0};
    CHECK(read_mem(b->p, b->n, &f, &e) == LEAN_OK, "base: %s", e.msg);
    uint64_t data = f ? f->data_offset : 0;
    gguf_free(f);
    char msg[128];
    snprintf(msg, sizeof msg, "tensor 't.b' data ends at %" PRIu64 ", the file has %zu bytes",
             data + 4096 + 36, b->n);
    PATCH_FAIL(b, toff_at(b, "t.b", 2), 4096, 8, LEAN_ERR_FORMAT, msg);
    PATCH_FAIL(b, toff_at(b, "t.b", 2), UINT64_MAX - 31, 8, LEAN_ERR_FORMAT,
               "tensor 't.b' data range overflows");
    snprintf(msg, sizeof msg, "tensor 't.b' data ends at %" PRIu64 ", the file has %" PRIu64 " bytes",
             data + 32 + 36, data + 32 + 35);
    EXPECT_FAIL(b->p, data + 32 + 35, LEAN_ERR_FORMAT, msg);
    /* overlaps: t.b moved onto t.a (equal starts: either may be named first), then t.a
     * moved past t.b's start so that the sort by offset matters */
    PATCH_FAIL(b, toff_at(b, "t.b", 2), 0, 8, LEAN_ERR_FORMAT, ") overlap");
    c = copy_of(b);
    patch_le(&c, toff_at(&c, "t.a", 1), 64, 8);
    patch_le(&c, toff_at(&c, "t.b", 2), 32, 8);
    snprintf(msg, sizeof msg, "tensors 't.b' (bytes %" PRIu64 "..%" PRIu64 ") and 't.a' (from %" PRIu64
             ") overlap", data + 32, data + 68, data + 64);
    EXPECT_FAIL(c.p, c.n, LEAN_ERR_FORMAT, msg);
    /* ... but disjoint tensors out of file order are fine */
    patch_le(&c, toff_at(&c, "t.a", 1), 96, 8);
    patch_le(&c, toff_at(&c, "t.b", 2), 0, 8);
    static const uint8_t more[32];
    b_put(&c, more, 32); /* grow the data section to hold t.a at 96 */
    f = NULL;
    CHECK(read_mem(c.p, c.n, &f, &e) == LEAN_OK, "out of order: %s", e.msg);
    gguf_free(f);
    free(c.p);
}

/* The callback delivers less than file_size promised: an I/O error, not a format one. */
static void test_short_read(const bytes *b) {
    lean_mapped_file m = {b->p, 40};
    gguf_file *f = NULL;
    lean_error e = {0};
    lean_status st = gguf_read(lean_read_mapped, &m, b->n, &f, &e);
    CHECK(st == LEAN_ERR_IO && strstr(e.msg, "returned 0: the file is shorter than the"), "%d %s", st,
          e.msg);
    CHECK(gguf_read(NULL, &m, 4, &f, &e) == LEAN_ERR_ARG && !f, "NULL read");
    /* ... and when it happens inside a long string, read past the buffer straight into the
     * string's memory, that memory is freed (ASan would see the leak) */
    bytes all = writer_bytes(build_all_types());
    m.data = all.p;
    m.size = find_bytes(&all, "Lxxx") + 9000;
    st = gguf_read(lean_read_mapped, &m, all.n, &f, &e);
    CHECK(st == LEAN_ERR_IO && strstr(e.msg, "returned 0") && !f, "%d %s", st, e.msg);
    free(all.p);
}

/* ====================================================================== 5. truncation */

/* Every prefix shorter than the end of the last tensor's data must fail with a format
 * error; longer prefixes lose only trailing padding and must read. */
static void test_truncation(void) {
    bytes b;
    gguf_file *f = read_all_types(&b);
    if (!f) return;
    lean_error e = {0};
    const gguf_tensor_info *last = &f->tensors[f->n_tensors - 1];
    uint64_t need = f->data_offset + last->offset + last->n_bytes;
    gguf_free(f);
    int bad = 0, good = 0;
    for (uint64_t len = 0; len <= b.n; len++) {
        f = NULL;
        memset(&e, 0, sizeof e);
        lean_status st = read_mem(b.p, len, &f, &e);
        bool ok = len < need ? st == LEAN_ERR_FORMAT && !f &&
                                   (strstr(e.msg, "truncated: ") || strstr(e.msg, "data ends at") ||
                                    strstr(e.msg, "bytes remain") || strstr(e.msg, "cannot fit"))
                             : st == LEAN_OK;
        if (!ok && bad++ < 5)
            fprintf(stderr, "prefix %" PRIu64 " of %zu: status %d '%s'\n", len, b.n, st, e.msg);
        good += ok;
        gguf_free(f);
    }
    CHECK(bad == 0, "%d of %zu prefixes misbehaved", bad, b.n + 1);
    CHECK(good == (int)b.n + 1, "all %zu prefixes checked", b.n + 1);
    free(b.p);
}

/* ====================================================================== 6. faults */

static void test_reader_oom(void) {
    bytes b = writer_bytes(build_all_types());
    for (int sticky = 0; sticky <= 1; sticky++) {
        int failures = 0;
        bool done = false;
        for (uint64_t n = 1; n < 100000 && !done; n++) {
            gguf_file *f = NULL;
            lean_error e = {0};
            lean_alloc_fail_at(n, sticky);
            lean_status st = read_mem(b.p, b.n, &f, &e);
            lean_alloc_fail_at(0, false);
            if (st == LEAN_OK) {
                check_all_types(f, b.p, 32);
                done = true;
            } else {
                CHECK(st == LEAN_ERR_NOMEM && !f && strstr(e.msg, "out of memory"),
                      "fail at %" PRIu64 ": %d %s", n, st, e.msg);
                failures++;
            }
            gguf_free(f);
        }
        CHECK(done && failures > 40, "reader OOM loop (sticky %d): %d failures", sticky, failures);
    }
    free(b.p);
}

static void test_writer_oom(void) {
    int failures = 0;
    bool done = false;
    for (uint64_t n = 1; n < 100000 && !done; n++) {
        lean_alloc_fail_at(n, false);
        gguf_writer *w = build_all_types();
        void *p = NULL;
        uint64_t len = 0;
        lean_error e = {0};
        lean_status st = gguf_writer_write_mem(w, &p, &len, &e);
        gguf_writer_free(w);
        lean_alloc_fail_at(0, false);
        if (st == LEAN_OK) {
            done = true;
            gguf_file *f = NULL;
            CHECK(read_mem(p, len, &f, &e) == LEAN_OK, "%s", e.msg);
            if (f) check_all_types(f, p, 32);
            gguf_free(f);
        } else {
            CHECK(st == LEAN_ERR_NOMEM && strstr(e.msg, "out of memory"), "fail at %" PRIu64 ": %d %s",
                  n, st, e.msg);
            failures++;
        }
        lean_free(p);
    }
    CHECK(done && failures > 40, "writer OOM loop: %d failures", failures);
}

/* ====================================================================== 7. errors */

static void expect_writer_error(gguf_writer *w, lean_status want, const char *msg) {
    lean_error e = {0};
    void *p = NULL;
    uint64_t n = 0;
    lean_status st = gguf_writer_write_mem(w, &p, &n, &e);
    CHECK(st == want && strstr(e.msg, msg) && !p, "status %d msg '%s' (want '%s')", st, e.msg, msg);
    gguf_writer_free(w);
}

static void test_writer_errors(void) {
    const float d[4] = {0};
    gguf_writer *w = gguf_writer_new();
    gguf_w_u32(w, "x", 1);
    gguf_w_i32(w, "x", 2);
    gguf_w_u32(w, "y", 3); /* sticky: the first error stays */
    expect_writer_error(w, LEAN_ERR_ARG, "duplicate key 'x'");

    w = gguf_writer_new();
    gguf_w_u32(w, "general.alignment", 48);
    expect_writer_error(w, LEAN_ERR_ARG, "general.alignment must be a u32 power of two");
    w = gguf_writer_new();
    gguf_w_i32(w, "general.alignment", 64);
    expect_writer_error(w, LEAN_ERR_ARG, "general.alignment must be a u32 power of two");

    w = gguf_writer_new();
    gguf_w_tensor(w, "t", LEAN_TYPE_Q4_0, 1, (int64_t[]){64}, d, 16);
    expect_writer_error(w, LEAN_ERR_ARG, "tensor 't' (q4_0, 64 elements) needs 36 bytes, got 16");
    w = gguf_writer_new();
    gguf_w_tensor(w, "t", LEAN_TYPE_Q4_0, 1, (int64_t[]){16}, d, 9);
    expect_writer_error(w, LEAN_ERR_ARG, "rows whole blocks");
    w = gguf_writer_new();
    gguf_w_tensor(w, "t", 99, 1, (int64_t[]){4}, d, 16);
    expect_writer_error(w, LEAN_ERR_ARG, "tensor 't': bad name, shape or type (type 99");
    w = gguf_writer_new();
    gguf_w_tensor(w, "t", LEAN_TYPE_F32, 0, (int64_t[]){4}, d, 16);
    expect_writer_error(w, LEAN_ERR_ARG, "n_dims 0");
    w = gguf_writer_new();
    gguf_w_tensor(w, "t", LEAN_TYPE_F32, 2, (int64_t[]){4, 0}, d, 0);
    expect_writer_error(w, LEAN_ERR_ARG, "bad name, shape or type");
    char longname[GGUF_MAX_NAME + 1];
    memset(longname, 'n', GGUF_MAX_NAME);
    longname[GGUF_MAX_NAME] = 0;
    w = gguf_writer_new();
    gguf_w_tensor(w, longname, LEAN_TYPE_F32, 1, (int64_t[]){4}, d, 16);
    expect_writer_error(w, LEAN_ERR_ARG, "names must be < 64 bytes");
    longname[GGUF_MAX_NAME - 1] = 0; /* 63 bytes is fine */
    w = gguf_writer_new();
    gguf_w_tensor(w, longname, LEAN_TYPE_F32, 1, (int64_t[]){4}, d, 16);
    bytes ok = writer_bytes(w);
    CHECK(ok.n > 0, "63-byte name accepted");
    free(ok.p);
    w = gguf_writer_new();
    gguf_w_tensor(w, "t", LEAN_TYPE_F32, 1, (int64_t[]){4}, d, 16);
    gguf_w_tensor(w, "t", LEAN_TYPE_F32, 1, (int64_t[]){4}, d, 16);
    expect_writer_error(w, LEAN_ERR_ARG, "duplicate tensor 't'");
    w = gguf_writer_new();
    gguf_w_tensor(w, "t", LEAN_TYPE_F32, 1, (int64_t[]){4}, NULL, 16);
    expect_writer_error(w, LEAN_ERR_ARG, "NULL data");

    w = gguf_writer_new();
    gguf_w_str(w, "s", NULL);
    expect_writer_error(w, LEAN_ERR_ARG, "key 's': NULL string");
    w = gguf_writer_new();
    gguf_w_arr_str(w, "s", (const char *[]){"a", NULL}, 2);
    expect_writer_error(w, LEAN_ERR_ARG, "key 's': string 1 is NULL");
    w = gguf_writer_new();
    gguf_w_arr(w, "a", GGUF_STRING, d, 1);
    expect_writer_error(w, LEAN_ERR_ARG, "bad scalar array (type 8");
    gguf_value items[2] = {scalar(GGUF_U32, 1, 0, 0), scalar(GGUF_I32, 0, 1, 0)};
    gguf_value mixed = arr_value(GGUF_U32, items, 2);
    w = gguf_writer_new();
    gguf_w_value(w, "m", &mixed);
    expect_writer_error(w, LEAN_ERR_ARG, "key 'm': item 1 has type i32 in an array of u32");
    gguf_value wide = scalar(GGUF_U8, 256, 0, 0);
    w = gguf_writer_new();
    gguf_w_value(w, "u", &wide);
    expect_writer_error(w, LEAN_ERR_ARG, "key 'u': 256 does not fit in u8");
    gguf_value neg = scalar(GGUF_I16, 0, -40000, 0);
    w = gguf_writer_new();
    gguf_w_value(w, "i", &neg);
    expect_writer_error(w, LEAN_ERR_ARG, "key 'i': -40000 does not fit in i16");
    gguf_value unknown = {.type = 13};
    w = gguf_writer_new();
    gguf_w_value(w, "q", &unknown);
    expect_writer_error(w, LEAN_ERR_ARG, "key 'q' has unknown value type 13");
    w = gguf_writer_new();
    gguf_w_value(w, "q", NULL);
    expect_writer_error(w, LEAN_ERR_ARG, "key 'q': NULL value");
    gguf_value nullstr = {.type = GGUF_STRING, .v.str = {3, NULL}};
    w = gguf_writer_new();
    gguf_w_value(w, "q", &nullstr);
    expect_writer_error(w, LEAN_ERR_ARG, "key 'q' has a NULL string");
    /* nine levels of arrays: one more than the reader takes */
    gguf_value lv[9];
    for (int l = 0; l < 9; l++) {
        lv[l] = arr_value(l < 8 ? GGUF_ARRAY : GGUF_U8, l < 8 ? &lv[l + 1] : NULL, l < 8 ? 1 : 0);
    }
    w = gguf_writer_new();
    gguf_w_value(w, "deep", &lv[0]);
    expect_writer_error(w, LEAN_ERR_ARG, "key 'deep': bad array (element type 9, 1 items, depth 8");
    w = gguf_writer_new();
    gguf_w_value(w, "deep", &lv[1]); /* eight levels are fine */
    bytes eight = writer_bytes(w);
    CHECK(eight.n > 0, "eight levels written");
    free(eight.p);
    w = gguf_writer_new();
    gguf_w_arr(w, "big", GGUF_U8, d, GGUF_MAX_VALUES + 1); /* refused before data is read */
    expect_writer_error(w, LEAN_ERR_ARG, "key 'big': 16777217 values exceed the limit of 16777216");
    w = gguf_writer_new();
    gguf_w_u32(w, NULL, 1);
    expect_writer_error(w, LEAN_ERR_ARG, "NULL key");
    expect_writer_error(NULL, LEAN_ERR_NOMEM, "NULL writer");

    /* a path that cannot be created: an I/O error naming it, nothing left behind */
    lean_error e = {0};
    w = gguf_writer_new();
    gguf_w_u32(w, "x", 1);
    const char *bad = "/nonexistent-dir-lean/x.gguf";
    CHECK(gguf_writer_write(w, bad, &e) == LEAN_ERR_IO && strstr(e.msg, "cannot create '/nonexistent"),
          "%s", e.msg);
    gguf_writer_free(w);
    /* a full device: fwrite/fclose fail, the partial file is removed */
    if (access("/dev/full", W_OK) == 0) {
        w = gguf_writer_new();
        gguf_w_u32(w, "x", 1);
        lean_status st = gguf_writer_write(w, "/dev/full", &e);
        CHECK(st == LEAN_ERR_IO && strstr(e.msg, "writing '/dev/full' failed"), "%d %s", st, e.msg);
        gguf_writer_free(w);
    }
}

static void test_file_errors(void) {
    lean_mapped_file m = {0};
    lean_error e = {0};
#ifndef __wasi__
    CHECK(lean_map_file("/nonexistent-lean.gguf", &m, &e) == LEAN_ERR_IO &&
              strstr(e.msg, "cannot open '/nonexistent-lean.gguf'"),
          "%s", e.msg);
#endif
    const char *path = tmp_path("empty.gguf");
    FILE *fp = fopen(path, "wb");
    if (fp) fclose(fp);
#ifndef __wasi__
    CHECK(lean_map_file(tmpdir, &m, &e) == LEAN_ERR_IO && strstr(e.msg, "is not a regular file"), "%s",
          e.msg);
    CHECK(lean_map_file(path, &m, &e) == LEAN_OK && m.data == NULL && m.size == 0, "empty: %s", e.msg);
#endif
    gguf_file *f = NULL;
    CHECK(gguf_read(lean_read_mapped, &m, m.size, &f, &e) == LEAN_ERR_FORMAT &&
              strstr(e.msg, "needs 4 bytes, the file has 0 bytes"),
          "%s", e.msg);
    lean_unmap_file(&m);
    remove(path);
    uint8_t x;
    CHECK(lean_read_mapped(&m, 0, &x, 1) == 0, "read past an empty mapping");
}

int main(void) {
#ifdef __wasi__
    snprintf(tmpdir, sizeof tmpdir, "/tmp"); /* wasm_run.mjs maps a fresh host dir there */
#else
    snprintf(tmpdir, sizeof tmpdir, "/tmp/lean_test_gguf_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
#endif
    test_exact_layout();
    test_size_from_prefix();
    test_roundtrip();
    test_file_paths();
    test_stream();
    test_alignment();
    test_getters();
    bytes base = base_file(false);
    test_malformed_header(&base);
    test_malformed_values(&base);
    test_nesting();
    test_value_cap();
    test_memory_bound();
    test_malformed_alignment();
    test_malformed_tensors(&base);
    test_short_read(&base);
    free(base.p);
    test_truncation();
    test_reader_oom();
    test_writer_oom();
    test_writer_errors();
    test_file_errors();
#ifndef __wasi__
    rmdir(tmpdir);
#endif
    return test_finish("test_gguf");
}
