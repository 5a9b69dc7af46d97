/* gguf_writer.c — the GGUF writer (gguf_writer.h), a developer tool: the model generator and
 * the tests write files with it; the runtime only reads them (core/gguf.c). The byte tables
 * are in core/gguf.h.
 *
 * Sections: the writer's state · the sink and the encoders · keys · tensors · emitting
 */
#include "dev/gguf_writer.h"

#include "core/formats.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define U64 PRIu64
#define I64 PRId64

/* ---- the writer's state ----
 *
 * Keys are encoded when they are added, each into one record of the bytes the file will
 * hold (key string, value type u32, value), so a 150k-token vocabulary costs about its
 * size in the file, not a gguf_value per token. Tensors are either copied at add time
 * (gguf_w_tensor) or only declared (gguf_w_tensor_info), their bytes then coming from
 * gguf_writer_write_stream's fill. One emitter writes the file, counts it, or fills a
 * buffer, through a sink. */

typedef struct w_kv {
    uint8_t *rec;     /* key string, value type, value; owned */
    uint64_t n_bytes;
    size_t key_len;   /* bytes of the key, which rec holds from offset 8 */
} w_kv;

typedef struct w_tensor {
    gguf_tensor_info info; /* offset unused: emit lays the tensors out */
    void *data;            /* info.n_bytes, owned; NULL: declared, the fill writes it */
} w_tensor;

struct gguf_writer {
    w_kv *kv;
    uint64_t n_kv, cap_kv;
    w_tensor *t;
    uint64_t n_t, cap_t;
    uint64_t alignment; /* bytes; general.alignment or 32 */
    uint64_t n_values;  /* array values, kept under the reader's GGUF_MAX_VALUES */
    lean_error err;     /* err.status != LEAN_OK once anything failed: sticky */
};

gguf_writer *gguf_writer_new(void) {
    gguf_writer *w = lean_calloc(1, sizeof *w);
    if (w) w->alignment = GGUF_DEFAULT_ALIGNMENT;
    return w;
}

void gguf_writer_free(gguf_writer *w) {
    if (!w) return;
    for (uint64_t i = 0; i < w->n_kv; i++) lean_free(w->kv[i].rec);
    for (uint64_t i = 0; i < w->n_t; i++) {
        lean_free(w->t[i].info.name.ptr);
        lean_free(w->t[i].data);
    }
    lean_free(w->kv);
    lean_free(w->t);
    lean_free(w);
}

static bool w_ok(const gguf_writer *w) { return w && w->err.status == LEAN_OK; }

/* Records the first failure only; later calls see !w_ok and do nothing. */
__attribute__((format(printf, 3, 4))) static void w_fail(gguf_writer *w, lean_status st,
                                                         const char *fmt, ...) {
    if (!w_ok(w)) return;
    va_list ap;
    va_start(ap, fmt);
    w->err.status = st;
    vsnprintf(w->err.msg, sizeof w->err.msg, fmt, ap);
    va_end(ap);
}

/* Returns arr grown (doubling: O(1) amortized) so that it holds more than n entries of
 * elem_bytes, or NULL (failure recorded; arr is still valid and owned by the caller). */
static void *w_grow(gguf_writer *w, void *arr, uint64_t n, uint64_t *cap, size_t elem_bytes) {
    if (n < *cap) return arr;
    uint64_t ncap = *cap ? *cap * 2 : 16, bytes;
    if (!lean_mul_u64(ncap, elem_bytes, &bytes) || bytes > SIZE_MAX) {
        w_fail(w, LEAN_ERR_NOMEM, "gguf writer: table of %" U64 " entries is too large", ncap);
        return NULL;
    }
    void *p = lean_realloc(arr, (size_t)bytes);
    if (!p) {
        w_fail(w, LEAN_ERR_NOMEM, "gguf writer: out of memory growing a table to %" U64 " entries",
               ncap);
        return NULL;
    }
    *cap = ncap;
    return p;
}

/* ---- the sink and the encoders ----
 * Where emitted bytes go: a FILE, a buffer of cap bytes, or nowhere (counting). */
struct gguf_sink {
    FILE *fp;
    const char *path;            /* fp's name, for messages */
    int io_errno;                /* nonzero once a write to fp failed: its errno */
    uint8_t *mem;
    uint64_t cap;
    uint64_t pos;                /* bytes emitted so far */
    const gguf_tensor_info *t;   /* the tensor a fill is writing, which ends at end */
    uint64_t end;
    bool overran;                /* the fill tried to write past end */
};

static void put(gguf_sink *s, const void *p, uint64_t n) {
    if (s->fp && !s->io_errno && n && fwrite(p, 1, (size_t)n, s->fp) != n)
        s->io_errno = errno ? errno : EIO;
    /* a buffer is sized by a count pass of the same bytes: the check cannot fail, but
     * keeps a bug from writing past it */
    if (s->mem && n && s->pos + n <= s->cap) memcpy(s->mem + s->pos, p, (size_t)n);
    s->pos += n;
}

static void put_le(gguf_sink *s, uint64_t v, unsigned bytes) {
    uint8_t b[8];
    for (unsigned i = 0; i < bytes; i++) b[i] = (uint8_t)(v >> (8 * i));
    put(s, b, bytes);
}

static void put_str(gguf_sink *s, const char *p, uint64_t len) {
    put_le(s, len, 8);
    put(s, p, len);
}

static void put_pad(gguf_sink *s, uint64_t alignment) {
    static const uint8_t zeros[256];
    uint64_t pad = (alignment - s->pos % alignment) % alignment;
    while (pad) {
        uint64_t n = pad < sizeof zeros ? pad : sizeof zeros;
        put(s, zeros, n);
        pad -= n;
    }
}

/* The value's payload (its type is written by the caller: the kv or the array). */
static void put_value(gguf_sink *s, const gguf_value *v) {
    switch (v->type) {
    case GGUF_STRING: put_str(s, v->v.str.ptr, v->v.str.len); break;
    case GGUF_ARRAY:
        put_le(s, v->v.arr.elem_type, 4);
        put_le(s, v->v.arr.count, 8);
        for (uint64_t i = 0; i < v->v.arr.count; i++) put_value(s, &v->v.arr.items[i]);
        break;
    case GGUF_F32: {
        float f = (float)v->v.f64;
        uint32_t u;
        memcpy(&u, &f, 4);
        put_le(s, u, 4);
        break;
    }
    case GGUF_F64: {
        uint64_t u;
        memcpy(&u, &v->v.f64, 8);
        put_le(s, u, 8);
        break;
    }
    default: put_le(s, v->v.u64, gguf_vtype_bytes(v->type)); break; /* ints: two's complement */
    }
}

/* One packed host C value of scalar type et (uint16_t, float, ...; bool: one byte). */
static void put_packed(gguf_sink *s, uint32_t et, const uint8_t *p) {
    unsigned bytes = gguf_vtype_bytes(et);
    uint64_t u = 0;
    if (et == GGUF_BOOL) {
        u = *p != 0;
    } else if (bytes == 1) {
        u = *p;
    } else if (bytes == 2) {
        uint16_t x;
        memcpy(&x, p, 2);
        u = x;
    } else if (bytes == 4) { /* u32, i32, f32: the bits as they are */
        uint32_t x;
        memcpy(&x, p, 4);
        u = x;
    } else {
        memcpy(&u, p, 8);
    }
    put_le(s, u, bytes);
}

/* What a key's value is made from: a gguf_value, or else an array of count packed C
 * values (data) or C strings (strs) of elem_type. */
typedef struct w_src {
    const gguf_value *v;
    uint32_t elem_type;
    uint64_t count;
    const void *data;
    const char *const *strs;
} w_src;

/* A key's record: key string, value type, value. */
static void put_kv(gguf_sink *s, const char *key, const w_src *src) {
    put_str(s, key, strlen(key));
    if (src->v) {
        put_le(s, src->v->type, 4);
        put_value(s, src->v);
        return;
    }
    put_le(s, GGUF_ARRAY, 4);
    put_le(s, src->elem_type, 4);
    put_le(s, src->count, 8);
    const uint8_t *p = src->data;
    for (uint64_t i = 0; i < src->count; i++) {
        if (src->strs) put_str(s, src->strs[i], strlen(src->strs[i]));
        else put_packed(s, src->elem_type, p + i * gguf_vtype_bytes(src->elem_type));
    }
}

/* ---- keys ---- */

/* Checks a value the caller built (gguf_w_value) before it is encoded: known types, items
 * of the array's element type, integers in range, nesting and value count in the
 * reader's limits. */
static bool w_check_value(gguf_writer *w, const char *key, const gguf_value *v, unsigned depth) {
    static const uint64_t umax[13] = {[GGUF_U8] = UINT8_MAX, [GGUF_U16] = UINT16_MAX,
                                      [GGUF_U32] = UINT32_MAX, [GGUF_U64] = UINT64_MAX,
                                      [GGUF_BOOL] = 1};
    static const int64_t imax[13] = {[GGUF_I8] = INT8_MAX, [GGUF_I16] = INT16_MAX,
                                     [GGUF_I32] = INT32_MAX, [GGUF_I64] = INT64_MAX};
    uint32_t t = v->type;
    if (!gguf_vtype_known(t)) {
        w_fail(w, LEAN_ERR_ARG, "gguf writer: key '%s' has unknown value type %u", key, t);
        return false;
    }
    if (umax[t] && v->v.u64 > umax[t]) {
        w_fail(w, LEAN_ERR_ARG, "gguf writer: key '%s': %" U64 " does not fit in %s", key, v->v.u64,
               gguf_vtype_name(t));
        return false;
    }
    if (imax[t] && (v->v.i64 > imax[t] || v->v.i64 < -imax[t] - 1)) {
        w_fail(w, LEAN_ERR_ARG, "gguf writer: key '%s': %" I64 " does not fit in %s", key, v->v.i64,
               gguf_vtype_name(t));
        return false;
    }
    if (t == GGUF_STRING && !v->v.str.ptr && v->v.str.len) {
        w_fail(w, LEAN_ERR_ARG, "gguf writer: key '%s' has a NULL string", key);
        return false;
    }
    if (t != GGUF_ARRAY) return true;
    const uint32_t et = v->v.arr.elem_type;
    const uint64_t n = v->v.arr.count;
    if (depth > GGUF_MAX_DEPTH || (et == GGUF_ARRAY && depth == GGUF_MAX_DEPTH) ||
        !gguf_vtype_known(et) || (n && !v->v.arr.items) || n > GGUF_MAX_VALUES - w->n_values) {
        w_fail(w, LEAN_ERR_ARG, "gguf writer: key '%s': bad array (element type %u, %" U64
               " items, depth %u; limits: depth %d, %llu values)", key, et, n, depth, GGUF_MAX_DEPTH,
               GGUF_MAX_VALUES);
        return false;
    }
    w->n_values += n;
    for (uint64_t i = 0; i < n; i++) {
        if (v->v.arr.items[i].type != et) {
            w_fail(w, LEAN_ERR_ARG, "gguf writer: key '%s': item %" U64 " has type %s in an array of %s",
                   key, i, gguf_vtype_name(v->v.arr.items[i].type), gguf_vtype_name(et));
            return false;
        }
        if (!w_check_value(w, key, &v->v.arr.items[i], depth + 1)) return false;
    }
    return true;
}

/* Appends key = src as one record (a count pass sizes it, a second fills it). */
static void w_add_kv(gguf_writer *w, const char *key, const w_src *src) {
    if (!w_ok(w)) return;
    if (!key) {
        w_fail(w, LEAN_ERR_ARG, "gguf writer: NULL key");
        return;
    }
    size_t len = strlen(key);
    for (uint64_t i = 0; i < w->n_kv; i++) /* O(n_kv) per key: headers have dozens */
        if (w->kv[i].key_len == len && memcmp(w->kv[i].rec + 8, key, len) == 0) {
            w_fail(w, LEAN_ERR_ARG, "gguf writer: duplicate key '%s'", key);
            return;
        }
    if (strcmp(key, "general.alignment") == 0) {
        const gguf_value *v = src->v;
        if (!v || v->type != GGUF_U32 || v->v.u64 == 0 || (v->v.u64 & (v->v.u64 - 1)) != 0) {
            w_fail(w, LEAN_ERR_ARG, "gguf writer: general.alignment must be a u32 power of two");
            return;
        }
        w->alignment = v->v.u64;
    }
    w_kv *grown = w_grow(w, w->kv, w->n_kv, &w->cap_kv, sizeof *w->kv);
    if (!grown) return;
    w->kv = grown;
    gguf_sink count = {0};
    put_kv(&count, key, src);
    gguf_sink s = {.mem = count.pos <= SIZE_MAX ? lean_malloc((size_t)count.pos) : NULL,
                   .cap = count.pos};
    if (!s.mem) {
        w_fail(w, LEAN_ERR_NOMEM, "gguf writer: out of memory for key '%s' (%" U64 " bytes)", key,
               count.pos);
        return;
    }
    put_kv(&s, key, src);
    w->kv[w->n_kv].rec = s.mem;
    w->kv[w->n_kv].n_bytes = s.pos;
    w->kv[w->n_kv].key_len = len;
    w->n_kv++;
}

static void w_scalar(gguf_writer *w, const char *key, uint32_t type, uint64_t u, int64_t i,
                     double f) {
    gguf_value v = {.type = type};
    if (type == GGUF_F32 || type == GGUF_F64) v.v.f64 = f;
    else if (type == GGUF_I8 || type == GGUF_I16 || type == GGUF_I32 || type == GGUF_I64) v.v.i64 = i;
    else v.v.u64 = u;
    w_add_kv(w, key, &(w_src){.v = &v});
}

void gguf_w_u32(gguf_writer *w, const char *key, uint32_t v) { w_scalar(w, key, GGUF_U32, v, 0, 0); }
void gguf_w_u64(gguf_writer *w, const char *key, uint64_t v) { w_scalar(w, key, GGUF_U64, v, 0, 0); }
void gguf_w_i32(gguf_writer *w, const char *key, int32_t v) { w_scalar(w, key, GGUF_I32, 0, v, 0); }
void gguf_w_f32(gguf_writer *w, const char *key, float v) { w_scalar(w, key, GGUF_F32, 0, 0, v); }
void gguf_w_bool(gguf_writer *w, const char *key, bool v) { w_scalar(w, key, GGUF_BOOL, v, 0, 0); }

void gguf_w_str(gguf_writer *w, const char *key, const char *s) {
    if (!w_ok(w)) return;
    if (!s) {
        w_fail(w, LEAN_ERR_ARG, "gguf writer: key '%s': NULL string", key ? key : "");
        return;
    }
    gguf_value v = {.type = GGUF_STRING, .v.str = {strlen(s), (char *)s}};
    w_add_kv(w, key, &(w_src){.v = &v});
}

void gguf_w_value(gguf_writer *w, const char *key, const gguf_value *v) {
    if (!w_ok(w)) return;
    if (!v) {
        w_fail(w, LEAN_ERR_ARG, "gguf writer: key '%s': NULL value", key ? key : "");
        return;
    }
    if (w_check_value(w, key ? key : "", v, 1)) w_add_kv(w, key, &(w_src){.v = v});
}

/* The gguf_w_arr* helpers' share of the reader's GGUF_MAX_VALUES. */
static bool w_count_values(gguf_writer *w, const char *key, uint64_t count) {
    if (count > GGUF_MAX_VALUES - w->n_values) {
        w_fail(w, LEAN_ERR_ARG, "gguf writer: key '%s': %" U64 " values exceed the limit of %llu",
               key ? key : "", count, GGUF_MAX_VALUES);
        return false;
    }
    w->n_values += count;
    return true;
}

void gguf_w_arr(gguf_writer *w, const char *key, uint32_t et, const void *data, uint64_t count) {
    if (!w_ok(w)) return;
    if (!gguf_vtype_bytes(et) || (count && !data)) {
        w_fail(w, LEAN_ERR_ARG, "gguf writer: key '%s': bad scalar array (type %u, %s data)",
               key ? key : "", et, data ? "with" : "NULL");
        return;
    }
    if (w_count_values(w, key, count))
        w_add_kv(w, key, &(w_src){.elem_type = et, .count = count, .data = data});
}

void gguf_w_arr_str(gguf_writer *w, const char *key, const char *const *strs, uint64_t count) {
    if (!w_ok(w)) return;
    for (uint64_t i = 0; i < count; i++) {
        if (!strs || !strs[i]) {
            w_fail(w, LEAN_ERR_ARG, "gguf writer: key '%s': string %" U64 " is NULL",
                   key ? key : "", i);
            return;
        }
    }
    if (w_count_values(w, key, count))
        w_add_kv(w, key, &(w_src){.elem_type = GGUF_STRING, .count = count, .strs = strs});
}

/* ---- tensors ---- */

/* Shape and type as the reader will check them, plus llama.cpp's name limit; *t gets
 * the shape, type, element count and size. */
static bool w_check_tensor(gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                           const int64_t *ne, gguf_tensor_info *t) {
    const lean_type_traits *tr = lean_type_traits_get(type);
    uint64_t n = 1, n_bytes = 0;
    bool ok = name && strlen(name) < GGUF_MAX_NAME && n_dims >= 1 && n_dims <= 4 && ne && tr;
    for (uint32_t d = 0; ok && d < n_dims; d++)
        ok = ne[d] >= 1 && lean_mul_u64(n, (uint64_t)ne[d], &n) && n <= (uint64_t)INT64_MAX;
    ok = ok && ne[0] % tr->block_elems == 0 && lean_type_bytes(type, n, &n_bytes);
    if (!ok) {
        w_fail(w, LEAN_ERR_ARG, "gguf writer: tensor '%.100s': bad name, shape or type (type %u, "
               "n_dims %u; names must be < %d bytes, rows whole blocks)", name ? name : "(null)",
               type, n_dims, GGUF_MAX_NAME);
        return false;
    }
    memset(t, 0, sizeof *t);
    t->n_dims = n_dims;
    for (uint32_t d = 0; d < 4; d++) t->ne[d] = d < n_dims ? ne[d] : 1;
    t->type = type;
    t->n_elems = n;
    t->n_bytes = n_bytes;
    return true;
}

/* Appends tensor t named name, with a copy of data (n_bytes) unless data is NULL. */
static void w_add_tensor(gguf_writer *w, const char *name, gguf_tensor_info *t, const void *data) {
    for (uint64_t i = 0; i < w->n_t; i++) /* O(n_t) per tensor: a few thousand at most */
        if (strcmp(w->t[i].info.name.ptr, name) == 0) {
            w_fail(w, LEAN_ERR_ARG, "gguf writer: duplicate tensor '%s'", name);
            return;
        }
    w_tensor *grown = w_grow(w, w->t, w->n_t, &w->cap_t, sizeof *w->t);
    if (!grown) return;
    w->t = grown;
    t->name.len = strlen(name);
    t->name.ptr = lean_strndup(name, t->name.len);
    void *copy = data ? lean_malloc((size_t)t->n_bytes) : NULL;
    if (!t->name.ptr || (data && !copy)) {
        lean_free(t->name.ptr);
        lean_free(copy);
        w_fail(w, LEAN_ERR_NOMEM, "gguf writer: out of memory for tensor '%s' (%" U64 " bytes)",
               name, data ? t->n_bytes : 0);
        return;
    }
    if (data) memcpy(copy, data, (size_t)t->n_bytes);
    w->t[w->n_t].info = *t;
    w->t[w->n_t].data = copy;
    w->n_t++;
}

void gguf_w_tensor(gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                   const int64_t *ne, const void *data, uint64_t n_bytes) {
    gguf_tensor_info t;
    if (!w_ok(w) || !w_check_tensor(w, name, type, n_dims, ne, &t)) return;
    if (t.n_bytes != n_bytes) {
        w_fail(w, LEAN_ERR_ARG, "gguf writer: tensor '%s' (%s, %" U64 " elements) needs %" U64
               " bytes, got %" U64, name, lean_type_traits_get(type)->name, t.n_elems, t.n_bytes,
               n_bytes);
        return;
    }
    if (!data || n_bytes > SIZE_MAX) {
        w_fail(w, LEAN_ERR_ARG, "gguf writer: tensor '%s': %s", name,
               data ? "too large for this build" : "NULL data");
        return;
    }
    w_add_tensor(w, name, &t, data);
}

void gguf_w_tensor_info(gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                        const int64_t *ne) {
    gguf_tensor_info t;
    if (w_ok(w) && w_check_tensor(w, name, type, n_dims, ne, &t)) w_add_tensor(w, name, &t, NULL);
}

/* ---- emitting ---- */

static uint64_t align_up(uint64_t x, uint64_t a) { return x + (a - x % a) % a; }

static lean_status sink_io_error(const gguf_sink *s, lean_error *err) {
    return LEAN_FAIL(err, LEAN_ERR_IO, "writing '%s' failed after %" U64 " bytes: %s", s->path,
                     s->pos, strerror(s->io_errno));
}

static lean_status fill_overran(const gguf_tensor_info *t, lean_error *err) {
    return LEAN_FAIL(err, LEAN_ERR_ARG, "gguf writer: the fill of tensor '%s' wrote more than its %"
                     U64 " bytes", t->name.ptr, t->n_bytes);
}

lean_status gguf_sink_write(gguf_sink *s, const void *p, size_t n, lean_error *err) {
    if (n > s->end - s->pos) { /* pos <= end while a fill runs */
        s->overran = true;
        return fill_overran(s->t, err);
    }
    put(s, p, n);
    return s->io_errno ? sink_io_error(s, err) : LEAN_OK;
}

/* The whole file, in gguf.h's table order. Offsets: each tensor starts where the last
 * one's padded size ended, as llama.cpp requires. A tensor's bytes are its copy, or what
 * fill writes (w_ready has made sure there is a fill where a tensor has no copy). */
static lean_status emit(const gguf_writer *w, gguf_sink *s, gguf_fill_fn fill, void *user,
                        lean_error *err) {
    put(s, "GGUF", 4);
    put_le(s, 3, 4);
    put_le(s, w->n_t, 8);
    put_le(s, w->n_kv, 8);
    for (uint64_t i = 0; i < w->n_kv; i++) put(s, w->kv[i].rec, w->kv[i].n_bytes);
    uint64_t off = 0;
    for (uint64_t i = 0; i < w->n_t; i++) {
        const gguf_tensor_info *t = &w->t[i].info;
        put_str(s, t->name.ptr, t->name.len);
        put_le(s, t->n_dims, 4);
        for (uint32_t d = 0; d < t->n_dims; d++) put_le(s, (uint64_t)t->ne[d], 8);
        put_le(s, t->type, 4);
        put_le(s, off, 8);
        off = align_up(off + t->n_bytes, w->alignment);
    }
    put_pad(s, w->alignment);
    for (uint64_t i = 0; i < w->n_t; i++) {
        const gguf_tensor_info *t = &w->t[i].info;
        if (w->t[i].data) {
            put(s, w->t[i].data, t->n_bytes);
        } else {
            const uint64_t start = s->pos;
            s->t = t;
            s->end = start + t->n_bytes;
            lean_status st = fill(user, i, t, s, err);
            if (st != LEAN_OK) return st;
            /* the same failures again, for a fill that dropped gguf_sink_write's status */
            if (s->io_errno) return sink_io_error(s, err);
            if (s->overran) return fill_overran(t, err);
            if (s->pos != s->end)
                return LEAN_FAIL(err, LEAN_ERR_ARG, "gguf writer: the fill of tensor '%s' wrote %"
                                 U64 " of its %" U64 " bytes", t->name.ptr, s->pos - start,
                                 t->n_bytes);
        }
        put_pad(s, w->alignment);
    }
    return s->io_errno ? sink_io_error(s, err) : LEAN_OK;
}

/* The writer's sticky failure, a declared tensor and no fill to write it, or a data
 * section that overflows 64 bits (declared tensors are not held: they may claim any
 * size). */
static lean_status w_ready(const gguf_writer *w, gguf_fill_fn fill, lean_error *err) {
    if (!w) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "gguf writer: NULL writer (out of memory?)");
    if (w->err.status != LEAN_OK) return LEAN_FAIL(err, w->err.status, "%s", w->err.msg);
    uint64_t end = 0; /* a bound on the data section's end: each tensor padded by a whole alignment */
    for (uint64_t i = 0; i < w->n_t; i++) {
        const gguf_tensor_info *t = &w->t[i].info;
        if (!w->t[i].data && !fill)
            return LEAN_FAIL(err, LEAN_ERR_ARG, "gguf writer: tensor '%s' has no data (declared "
                             "with gguf_w_tensor_info: write with gguf_writer_write_stream)",
                             t->name.ptr);
        if (!lean_add_u64(end, t->n_bytes, &end) || !lean_add_u64(end, w->alignment, &end))
            return LEAN_FAIL(err, LEAN_ERR_ARG, "gguf writer: the data section overflows at "
                             "tensor '%s' (%" U64 " bytes)", t->name.ptr, t->n_bytes);
        end -= end % w->alignment;
    }
    return LEAN_OK;
}

lean_status gguf_writer_write_stream(gguf_writer *w, const char *path, gguf_fill_fn fill,
                                     void *user, lean_error *err) {
    lean_status st = w_ready(w, fill, err);
    if (st != LEAN_OK) return st;
    if (!path) return LEAN_FAIL(err, LEAN_ERR_ARG, "gguf writer: NULL path");
    /* A regular file is written as <path>.tmp, renamed to path once complete. Anything
     * else that exists (a device, a pipe) is written in place and left as it is on
     * failure: removing it could delete what is not ours. */
    struct stat sb;
    char *tmp = NULL;
    if (stat(path, &sb) != 0 || S_ISREG(sb.st_mode)) {
        size_t n = strlen(path);
        tmp = lean_malloc(n + 5);
        if (!tmp) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "gguf writer: out of memory for a path");
        memcpy(tmp, path, n);
        memcpy(tmp + n, ".tmp", 5);
    }
    gguf_sink s = {.path = tmp ? tmp : path};
    s.fp = fopen(s.path, "wb");
    if (!s.fp) {
        st = LEAN_FAIL(err, LEAN_ERR_IO, "cannot create '%s': %s", s.path, strerror(errno));
        goto done;
    }
    setvbuf(s.fp, NULL, _IOFBF, 1 << 20); /* fills write rows: gather them in 1 MiB pieces */
    st = emit(w, &s, fill, user, err);
    if (fclose(s.fp) != 0 && !s.io_errno) s.io_errno = errno;
    if (st == LEAN_OK && s.io_errno) st = sink_io_error(&s, err);
    if (st == LEAN_OK && tmp && rename(tmp, path) != 0)
        st = LEAN_FAIL(err, LEAN_ERR_IO, "cannot rename '%s' to '%s': %s", tmp, path,
                       strerror(errno));
done:
    if (st != LEAN_OK && tmp) remove(tmp);
    lean_free(tmp);
    return st;
}

lean_status gguf_writer_write(gguf_writer *w, const char *path, lean_error *err) {
    return gguf_writer_write_stream(w, path, NULL, NULL, err);
}

lean_status gguf_writer_write_mem(gguf_writer *w, void **out, uint64_t *out_bytes, lean_error *err) {
    lean_status st = w_ready(w, NULL, err);
    if (st != LEAN_OK) return st;
    if (!out || !out_bytes) return LEAN_FAIL(err, LEAN_ERR_ARG, "gguf writer: NULL output");
    gguf_sink count = {0};
    emit(w, &count, NULL, NULL, err); /* every tensor has its copy: nothing can fail */
    if (count.pos > SIZE_MAX)
        return LEAN_FAIL(err, LEAN_ERR_NOMEM, "gguf writer: %" U64 " bytes do not fit in memory",
                         count.pos);
    gguf_sink s = {.mem = lean_malloc((size_t)count.pos), .cap = count.pos};
    if (!s.mem)
        return LEAN_FAIL(err, LEAN_ERR_NOMEM, "gguf writer: out of memory for %" U64 " bytes",
                         count.pos);
    emit(w, &s, NULL, NULL, err);
    *out = s.mem;
    *out_bytes = s.pos;
    return LEAN_OK;
}
