/* gguf.c — the GGUF reader. The byte tables are in gguf.h; every check below points at a
 * row there. (The writer is a developer tool: src/dev/gguf_writer.c.)
 *
 * Reading goes through a lean_read_fn and a 4 KiB cursor, so one parser serves mmap
 * (lean_read_mapped) and streamed hosts (wasm) alike, and the file is never copied
 * whole. Nothing read from the file is trusted: each count or length is first checked
 * against the bytes that remain (with overflow-checked arithmetic), then allocated.
 *
 * Sections:
 *   1. cursor      bounds-checked little-endian reads through the callback
 *   2. values      scalars, strings, arrays (nested up to GGUF_MAX_DEPTH), freeing
 *   3. name set    duplicate keys / tensor names in O(1) each (open addressing)
 *   4. header      magic, version, counts, key/values, general.alignment
 *   5. tensors     infos, shapes, types, offsets, data ranges, overlaps
 *   6. gguf_read, gguf_free, lookups and typed getters
 * Not here: mmap and stdio reads (file.c), block sizes (formats.c), tensor data (the
 * loader reads it using data_offset + offset, which the reader has range-checked).
 */
#include "core/gguf.h"

#include "core/formats.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define U64 PRIu64
#define I64 PRId64

/* ====================================================================== 1. cursor */

#define CUR_BUF_BYTES 4096

typedef struct cursor {
    lean_read_fn read;
    void *user;
    uint64_t file_size; /* bytes; nothing at or past it is read */
    uint64_t pos;       /* file offset of the next byte to consume */
    uint64_t buf_start; /* file offset of buf[0] */
    size_t buf_len;     /* valid bytes in buf */
    uint64_t n_values;  /* array values read so far, against GGUF_MAX_VALUES */
    uint64_t mem_bytes; /* allocated so far (charge), against GGUF_MAX_HEADER_BYTES */
    bool past_end;      /* a length or count ran past file_size (gguf_size: more bytes may fit it) */
    lean_error *err;
    char where[160];    /* what is being read, for messages: "key 'general.name'" */
    uint8_t buf[CUR_BUF_BYTES];
} cursor;

static uint64_t cur_left(const cursor *c) { return c->file_size - c->pos; }

/* Whether n more bytes fit before file_size; when not, noted (gguf_size: need more bytes). */
static bool cur_fits(cursor *c, uint64_t n) {
    if (n <= cur_left(c)) return true;
    c->past_end = true;
    return false;
}

/* The file must still hold n bytes at pos. */
static lean_status cur_need(cursor *c, uint64_t n, const char *what) {
    if (cur_fits(c, n)) return LEAN_OK;
    return LEAN_FAIL(c->err, LEAN_ERR_FORMAT,
                     "truncated: %s: %s at offset %" U64 " needs %" U64 " bytes, the file has %" U64
                     " bytes",
                     c->where, what, c->pos, n, c->file_size);
}

/* Counts an allocation of n * size bytes (plus GGUF_ALLOC_OVERHEAD) against
 * GGUF_MAX_HEADER_BYTES before it is made. Nothing is given back when freed: the sum
 * bounds the peak. */
static lean_status charge(cursor *c, uint64_t n, uint64_t size, const char *what) {
    uint64_t bytes = 0;
    if (!lean_mul_u64(n, size, &bytes) || !lean_add_u64(bytes, GGUF_ALLOC_OVERHEAD, &bytes) ||
        bytes > GGUF_MAX_HEADER_BYTES - c->mem_bytes)
        return LEAN_FAIL(c->err, LEAN_ERR_FORMAT,
                         "%s: %s at offset %" U64 " takes the header past lean's limit of %llu MiB of "
                         "memory for a GGUF header (GGUF_MAX_HEADER_BYTES; %" U64 " bytes held)",
                         c->where, what, c->pos, GGUF_MAX_HEADER_BYTES >> 20, c->mem_bytes);
    c->mem_bytes += bytes;
    return LEAN_OK;
}

/* Calls read() until n bytes arrive. cur_need has already promised they exist, so a
 * short read means the callback (or file_size) lied: an I/O error, not a format one. */
static lean_status cur_read_at(cursor *c, uint64_t off, uint8_t *dst, size_t n) {
    size_t done = 0;
    while (done < n) {
        size_t got = c->read(c->user, off + done, dst + done, n - done);
        if (got == 0 || got > n - done)
            return LEAN_FAIL(c->err, LEAN_ERR_IO,
                             "read of %zu bytes at offset %" U64 " returned %zu: the file is shorter "
                             "than the %" U64 " bytes it was said to have, or reading failed",
                             n - done, off + done, got, c->file_size);
        done += got;
    }
    return LEAN_OK;
}

/* Copies n bytes at pos into dst and advances. Small reads come from the buffer; a read
 * at least a buffer long (a long string) goes straight to dst. */
static lean_status cur_read(cursor *c, void *dst, uint64_t n, const char *what) {
    lean_status st = cur_need(c, n, what);
    if (st != LEAN_OK) return st;
    uint8_t *out = dst;
    while (n > 0) {
        uint64_t avail = c->buf_start + c->buf_len - c->pos; /* pos >= buf_start always */
        if (avail == 0) {
            if (n >= CUR_BUF_BYTES) { /* n fits size_t: the caller allocated n bytes */
                st = cur_read_at(c, c->pos, out, (size_t)n);
                if (st != LEAN_OK) return st;
                c->pos += n;
                c->buf_start = c->pos; /* the buffer is behind us now: empty it */
                c->buf_len = 0;
                return LEAN_OK;
            }
            uint64_t left = cur_left(c);
            size_t want = left < CUR_BUF_BYTES ? (size_t)left : CUR_BUF_BYTES;
            st = cur_read_at(c, c->pos, c->buf, want);
            if (st != LEAN_OK) return st;
            c->buf_start = c->pos;
            c->buf_len = want;
            continue;
        }
        size_t take = (size_t)(avail < n ? avail : n);
        memcpy(out, c->buf + (c->pos - c->buf_start), take);
        out += take;
        c->pos += take;
        n -= take;
    }
    return LEAN_OK;
}

static uint64_t le_decode(const uint8_t *b, unsigned bytes) {
    uint64_t v = 0;
    for (unsigned i = 0; i < bytes; i++) v |= (uint64_t)b[i] << (8 * i);
    return v;
}

/* Reads a little-endian unsigned integer of 1, 2, 4 or 8 bytes. */
static lean_status cur_uint(cursor *c, unsigned bytes, uint64_t *out, const char *what) {
    uint8_t b[8];
    lean_status st = cur_read(c, b, bytes, what);
    if (st == LEAN_OK) *out = le_decode(b, bytes);
    return st;
}

static lean_status cur_u32(cursor *c, uint32_t *out, const char *what) {
    uint64_t v = 0;
    lean_status st = cur_uint(c, 4, &v, what);
    *out = (uint32_t)v;
    return st;
}

/* ====================================================================== 2. values */

/* Bytes of one scalar in the file; 0 for STRING/ARRAY (variable) and unknown types. */
static const uint8_t vtype_bytes[13] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
static const char *const vtype_names[13] = {"u8",  "i8",   "u16",    "i16",   "u32", "i32", "f32",
                                            "bool", "string", "array", "u64", "i64", "f64"};

const char *gguf_vtype_name(uint32_t type) { return type < 13 ? vtype_names[type] : "?"; }

static bool vtype_known(uint32_t type) { return type <= GGUF_F64; }
bool gguf_vtype_known(uint32_t type) { return vtype_known(type); }
unsigned gguf_vtype_bytes(uint32_t type) { return vtype_known(type) ? vtype_bytes[type] : 0; }

/* The fewest file bytes one element of this type takes: a string is at least its u64
 * length, an array its u32 type + u64 count. Used to bound counts before allocating. */
static uint64_t vtype_min_bytes(uint32_t type) {
    if (type == GGUF_STRING) return 8;
    if (type == GGUF_ARRAY) return 12;
    return vtype_bytes[type];
}

static void value_free(gguf_value *v) {
    if (v->type == GGUF_STRING) {
        lean_free(v->v.str.ptr);
    } else if (v->type == GGUF_ARRAY) {
        for (uint64_t i = 0; i < v->v.arr.count; i++) value_free(&v->v.arr.items[i]);
        lean_free(v->v.arr.items);
    }
    memset(v, 0, sizeof *v);
}

/* string: len u64, then len bytes. The length is checked against the bytes left before
 * the allocation, so a lying length costs nothing. */
static lean_status rd_string(cursor *c, gguf_string *s, const char *what) {
    uint64_t len = 0;
    uint64_t at = c->pos;
    lean_status st = cur_uint(c, 8, &len, what);
    if (st != LEAN_OK) return st;
    if (!cur_fits(c, len) || len >= SIZE_MAX)
        return LEAN_FAIL(c->err, LEAN_ERR_FORMAT,
                         "%s: %s at offset %" U64 " has length %" U64 ", but only %" U64
                         " bytes remain in the file",
                         c->where, what, at, len, cur_left(c));
    if ((st = charge(c, 1, len + 1, what)) != LEAN_OK) return st;
    char *p = lean_malloc((size_t)len + 1);
    if (!p) return LEAN_FAIL(c->err, LEAN_ERR_NOMEM, "%s: out of memory for a %" U64 "-byte string",
                             c->where, len);
    st = cur_read(c, p, len, what);
    if (st != LEAN_OK) {
        lean_free(p);
        return st;
    }
    p[len] = 0;
    s->ptr = p;
    s->len = len;
    return LEAN_OK;
}

/* One scalar of a known fixed-size type into v (widened: see gguf_value). */
static lean_status rd_scalar(cursor *c, uint32_t type, gguf_value *v) {
    uint64_t at = c->pos, raw = 0;
    unsigned bytes = vtype_bytes[type];
    lean_status st = cur_uint(c, bytes, &raw, vtype_names[type]);
    if (st != LEAN_OK) return st;
    v->type = type;
    switch (type) {
    case GGUF_I8: v->v.i64 = (int8_t)raw; break;
    case GGUF_I16: v->v.i64 = (int16_t)raw; break;
    case GGUF_I32: v->v.i64 = (int32_t)raw; break;
    case GGUF_I64: v->v.i64 = (int64_t)raw; break;
    case GGUF_F32: {
        uint32_t u = (uint32_t)raw;
        float f;
        memcpy(&f, &u, 4);
        v->v.f64 = f;
        break;
    }
    case GGUF_F64: memcpy(&v->v.f64, &raw, 8); break;
    case GGUF_BOOL:
        if (raw > 1)
            return LEAN_FAIL(c->err, LEAN_ERR_FORMAT,
                             "%s: bool at offset %" U64 " is %" U64 "; it must be 0 or 1", c->where,
                             at, raw);
        v->v.u64 = raw;
        break;
    default: v->v.u64 = raw; break; /* U8, U16, U32, U64 */
    }
    return LEAN_OK;
}

/* depth: the nesting level v has if it is an array (a key's own value is level 1). */
static lean_status rd_value(cursor *c, uint32_t type, gguf_value *v, unsigned depth);

/* array: elem_type u32, count u64, count elements. depth is this array's level. The count must fit in the bytes left at the element type's minimum size
 * and under GGUF_MAX_VALUES before the items are allocated. */
static lean_status rd_array(cursor *c, gguf_value *v, unsigned depth) {
    uint64_t at = c->pos, count = 0, need = 0;
    uint32_t et = 0;
    lean_status st = cur_u32(c, &et, "array element type");
    if (st == LEAN_OK) st = cur_uint(c, 8, &count, "array count");
    if (st != LEAN_OK) return st;
    if (!vtype_known(et))
        return LEAN_FAIL(c->err, LEAN_ERR_FORMAT,
                         "%s: array at offset %" U64 " has unknown element type %u", c->where, at, et);
    if (et == GGUF_ARRAY && depth >= GGUF_MAX_DEPTH)
        return LEAN_FAIL(c->err, LEAN_ERR_FORMAT,
                         "%s: array at offset %" U64 " nests deeper than %d levels", c->where, at,
                         GGUF_MAX_DEPTH);
    if (!lean_mul_u64(count, vtype_min_bytes(et), &need) || !cur_fits(c, need))
        return LEAN_FAIL(c->err, LEAN_ERR_FORMAT,
                         "%s: array at offset %" U64 " has %" U64 " elements of type %s, which cannot "
                         "fit in the %" U64 " bytes left in the file",
                         c->where, at, count, vtype_names[et], cur_left(c));
    if (count > GGUF_MAX_VALUES - c->n_values)
        return LEAN_FAIL(c->err, LEAN_ERR_FORMAT,
                         "%s: array at offset %" U64 " has %" U64 " elements, taking the file past "
                         "lean's limit of %llu array values",
                         c->where, at, count, GGUF_MAX_VALUES);
    c->n_values += count;
    if ((st = charge(c, count, sizeof(gguf_value), "array")) != LEAN_OK) return st;
    /* count <= GGUF_MAX_VALUES (2^24), so count * sizeof(gguf_value) fits size_t even on
     * wasm32. */
    gguf_value *items = lean_calloc((size_t)count, sizeof *items);
    if (!items) return LEAN_FAIL(c->err, LEAN_ERR_NOMEM, "%s: out of memory for %" U64
                                 " array elements", c->where, count);
    v->type = GGUF_ARRAY;
    v->v.arr.elem_type = et;
    v->v.arr.items = items;
    v->v.arr.count = count; /* items are zeroed (u8): value_free is safe at any point */
    for (uint64_t i = 0; i < count; i++) {
        st = rd_value(c, et, &items[i], depth + 1);
        if (st != LEAN_OK) return st;
    }
    return LEAN_OK;
}

static lean_status rd_value(cursor *c, uint32_t type, gguf_value *v, unsigned depth) {
    if (type == GGUF_STRING) {
        v->type = GGUF_STRING;
        return rd_string(c, &v->v.str, "string");
    }
    if (type == GGUF_ARRAY) return rd_array(c, v, depth);
    return rd_scalar(c, type, v);
}

/* ====================================================================== 3. name set */

/* Open addressing over pointers to the names (which live in arrays allocated up front,
 * so they do not move). Capacity is a power of two >= 2n: probes stay short. */
typedef struct name_set {
    const gguf_string **slots;
    uint64_t mask;
} name_set;

static uint64_t name_hash(const gguf_string *s) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (uint64_t i = 0; i < s->len; i++) h = (h ^ (uint8_t)s->ptr[i]) * 1099511628211ull;
    return h;
}

static lean_status set_init(cursor *c, name_set *s, uint64_t n) {
    uint64_t cap = 16;
    while (cap < 2 * n) cap *= 2; /* n <= file bytes / 13, so 2n cannot overflow */
    s->mask = cap - 1;
    s->slots = NULL;
    lean_status st = n ? charge(c, cap, sizeof *s->slots, "the name set") : LEAN_OK;
    if (st != LEAN_OK) return st;
    s->slots = n ? lean_calloc((size_t)cap, sizeof *s->slots) : NULL;
    if (n && !s->slots) return LEAN_FAIL(c->err, LEAN_ERR_NOMEM, "out of memory for %" U64 " names", n);
    return LEAN_OK;
}

/* Inserts name; returns false when an equal name is already there. */
static bool set_insert(name_set *s, const gguf_string *name) {
    for (uint64_t i = name_hash(name) & s->mask;; i = (i + 1) & s->mask) {
        const gguf_string *o = s->slots[i];
        if (!o) {
            s->slots[i] = name;
            return true;
        }
        if (o->len == name->len && memcmp(o->ptr, name->ptr, name->len) == 0) return false;
    }
}

/* Reads the name of key or tensor #i, refusing NUL bytes inside (lookups use C strings, so
 * "a\0b" would shadow "a") and duplicates; c->where names the entry by number, then by name. */
static lean_status rd_name(cursor *c, gguf_string *s, name_set *set, const char *kind, uint64_t i) {
    snprintf(c->where, sizeof c->where, "%s #%" U64, kind, i);
    uint64_t at = c->pos;
    lean_status st = rd_string(c, s, kind);
    if (st != LEAN_OK) return st;
    if (memchr(s->ptr, 0, s->len))
        return LEAN_FAIL(c->err, LEAN_ERR_FORMAT, "%s at offset %" U64 " contains a NUL byte", kind,
                         at);
    if (!set_insert(set, s))
        return LEAN_FAIL(c->err, LEAN_ERR_FORMAT, "duplicate %s '%.200s' at offset %" U64, kind, s->ptr,
                         at);
    snprintf(c->where, sizeof c->where, "%s '%.120s'", kind, s->ptr);
    return LEAN_OK;
}

/* ====================================================================== 4. header */

/* magic "GGUF", version 2 or 3, n_tensors, n_kv; the counts must fit the file at the
 * smallest size of a key/value (13 bytes) and of a tensor info (32 bytes). */
static lean_status rd_preamble(cursor *c, gguf_file *f) {
    uint8_t m[4];
    strcpy(c->where, "header");
    lean_status st = cur_read(c, m, 4, "magic");
    if (st != LEAN_OK) return st;
    if (memcmp(m, "GGUF", 4) != 0)
        return LEAN_FAIL(c->err, LEAN_ERR_FORMAT,
                         "bad magic %02x %02x %02x %02x at offset 0: not a GGUF file (expected "
                         "'GGUF' = 47 47 55 46)",
                         m[0], m[1], m[2], m[3]);
    st = cur_u32(c, &f->version, "version");
    if (st != LEAN_OK) return st;
    if (f->version != 2 && f->version != 3)
        return LEAN_FAIL(c->err, LEAN_ERR_UNSUPPORTED,
                         "unsupported GGUF version %u (0x%08x) at offset 4: lean reads versions 2 and "
                         "3%s",
                         f->version, f->version,
                         (f->version & 0xffff) == 0 && f->version ? " (a big-endian file?)" : "");
    uint64_t n_t = 0, n_kv = 0, kv_min, t_min, need;
    st = cur_uint(c, 8, &n_t, "n_tensors");
    if (st == LEAN_OK) st = cur_uint(c, 8, &n_kv, "n_kv");
    if (st != LEAN_OK) return st;
    if (!lean_mul_u64(n_kv, 13, &kv_min) || !lean_mul_u64(n_t, 32, &t_min) ||
        !lean_add_u64(kv_min, t_min, &need) || !cur_fits(c, need))
        return LEAN_FAIL(c->err, LEAN_ERR_FORMAT,
                         "header at offset 8 claims %" U64 " tensors and %" U64 " keys, which cannot "
                         "fit in the %" U64 " bytes left in the file",
                         n_t, n_kv, cur_left(c));
    /* Each table below (infos, name set, sort spans) takes at most 128 bytes per entry,
     * so this keeps every (size_t) cast exact: on wasm32 a stream larger than 4 GiB
     * could otherwise claim more entries than the address space holds. */
    if (n_kv > SIZE_MAX / 128 || n_t > SIZE_MAX / 128)
        return LEAN_FAIL(c->err, LEAN_ERR_UNSUPPORTED,
                         "header at offset 8 claims %" U64 " tensors and %" U64 " keys, more than "
                         "this build can address",
                         n_t, n_kv);
    f->n_tensors = n_t;
    f->n_kv = n_kv;
    return LEAN_OK;
}

/* n_kv of: key string, value type u32, value. f->kv was allocated zeroed for n_kv. */
static lean_status rd_kvs(cursor *c, gguf_file *f) {
    name_set set;
    lean_status st = set_init(c, &set, f->n_kv);
    for (uint64_t i = 0; st == LEAN_OK && i < f->n_kv; i++) {
        gguf_kv *kv = &f->kv[i];
        st = rd_name(c, &kv->key, &set, "key", i);
        if (st != LEAN_OK) break;
        uint64_t at = c->pos;
        uint32_t type = 0;
        st = cur_u32(c, &type, "value type");
        if (st != LEAN_OK) break;
        if (!vtype_known(type)) {
            st = LEAN_FAIL(c->err, LEAN_ERR_FORMAT, "%s has unknown value type %u at offset %" U64,
                           c->where, type, at);
            break;
        }
        st = rd_value(c, type, &kv->value, 1);
    }
    lean_free(set.slots);
    return st;
}

/* general.alignment: absent -> 32; present -> a u32, nonzero power of two. */
static lean_status check_alignment(cursor *c, gguf_file *f) {
    f->alignment = GGUF_DEFAULT_ALIGNMENT;
    const gguf_value *v = gguf_find(f, "general.alignment");
    if (!v) return LEAN_OK;
    if (v->type != GGUF_U32)
        return LEAN_FAIL(c->err, LEAN_ERR_FORMAT, "general.alignment has type %s; it must be u32",
                         gguf_vtype_name(v->type));
    if (v->v.u64 == 0 || (v->v.u64 & (v->v.u64 - 1)) != 0)
        return LEAN_FAIL(c->err, LEAN_ERR_FORMAT,
                         "general.alignment is %" U64 "; it must be a nonzero power of two", v->v.u64);
    f->alignment = v->v.u64;
    return LEAN_OK;
}

/* ====================================================================== 5. tensors */

/* n_dims u32 (1..4), then ne[n_dims] u64 each >= 1 as int64, product <= INT64_MAX. */
static lean_status rd_shape(cursor *c, gguf_tensor_info *t) {
    uint64_t at = c->pos;
    lean_status st = cur_u32(c, &t->n_dims, "n_dims");
    if (st != LEAN_OK) return st;
    if (t->n_dims < 1 || t->n_dims > 4)
        return LEAN_FAIL(c->err, LEAN_ERR_FORMAT, "%s has n_dims %u at offset %" U64 "; it must be 1..4",
                         c->where, t->n_dims, at);
    uint64_t n = 1;
    for (unsigned d = 0; d < 4; d++) t->ne[d] = 1;
    for (unsigned d = 0; d < t->n_dims; d++) {
        uint64_t ne = 0;
        at = c->pos;
        st = cur_uint(c, 8, &ne, "ne");
        if (st != LEAN_OK) return st;
        if (ne == 0 || ne > (uint64_t)INT64_MAX)
            return LEAN_FAIL(c->err, LEAN_ERR_FORMAT,
                             "%s has ne[%u] = %" I64 " at offset %" U64 "; every dimension must be >= 1",
                             c->where, d, (int64_t)ne, at);
        t->ne[d] = (int64_t)ne;
        if (!lean_mul_u64(n, ne, &n) || n > (uint64_t)INT64_MAX)
            return LEAN_FAIL(c->err, LEAN_ERR_FORMAT,
                             "%s: the element count overflows at ne[%u] = %" U64 " (offset %" U64 ")",
                             c->where, d, ne, at);
    }
    t->n_elems = n;
    return LEAN_OK;
}

/* type u32 (known to formats.c), then the row must be whole blocks, then offset u64
 * (a multiple of the alignment). n_bytes follows from the shape and type. */
static lean_status rd_type_offset(cursor *c, gguf_tensor_info *t, uint64_t alignment) {
    uint64_t at = c->pos;
    lean_status st = cur_u32(c, &t->type, "type");
    if (st != LEAN_OK) return st;
    const lean_type_traits *tr = lean_type_traits_get(t->type);
    const char *ggml_name = lean_ggml_type_name(t->type);
    if (!tr && ggml_name)
        return LEAN_FAIL(c->err, LEAN_ERR_UNSUPPORTED,
                         "%s has type %s (id %u, at offset %" U64 "), which lean does not support", c->where,
                         ggml_name, t->type, at);
    if (!tr)
        return LEAN_FAIL(c->err, LEAN_ERR_UNSUPPORTED,
                         "%s has type id %u (offset %" U64 "), which neither lean nor ggml defines", c->where,
                         t->type, at);
    if ((uint64_t)t->ne[0] % tr->block_elems != 0)
        return LEAN_FAIL(c->err, LEAN_ERR_FORMAT,
                         "%s (%s): rows of %" I64 " elements are not a multiple of the block of %u",
                         c->where, tr->name, t->ne[0], tr->block_elems);
    if (!lean_type_bytes(t->type, t->n_elems, &t->n_bytes))
        return LEAN_FAIL(c->err, LEAN_ERR_FORMAT, "%s (%s): the size in bytes of %" U64
                         " elements overflows", c->where, tr->name, t->n_elems);
    at = c->pos;
    st = cur_uint(c, 8, &t->offset, "offset");
    if (st != LEAN_OK) return st;
    if (t->offset % alignment != 0)
        return LEAN_FAIL(c->err, LEAN_ERR_FORMAT,
                         "%s offset %" U64 " (at offset %" U64 ") is not a multiple of the alignment %" U64,
                         c->where, t->offset, at, alignment);
    return LEAN_OK;
}

static lean_status rd_tensor_infos(cursor *c, gguf_file *f) {
    name_set set;
    lean_status st = set_init(c, &set, f->n_tensors);
    for (uint64_t i = 0; st == LEAN_OK && i < f->n_tensors; i++) {
        gguf_tensor_info *t = &f->tensors[i];
        st = rd_name(c, &t->name, &set, "tensor", i);
        if (st != LEAN_OK) break;
        st = rd_shape(c, t);
        if (st == LEAN_OK) st = rd_type_offset(c, t, f->alignment);
    }
    lean_free(set.slots);
    return st;
}

typedef struct span {
    uint64_t start, end; /* file offsets, end exclusive */
    const char *name;
} span;

static int span_cmp(const void *a, const void *b) {
    const span *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* Every tensor's bytes [data_offset + offset, + n_bytes) inside the file, and no two
 * overlapping (checked after a sort by start: O(n log n)). llama.cpp goes further and
 * wants them packed in order; lean only needs them disjoint. */
static lean_status check_data_ranges(cursor *c, gguf_file *f) {
    if (f->n_tensors == 0) return LEAN_OK;
    strcpy(c->where, "tensor data");
    lean_status st = charge(c, f->n_tensors, sizeof(span), "the overlap check");
    if (st != LEAN_OK) return st;
    span *s = lean_calloc((size_t)f->n_tensors, sizeof *s); /* n <= file bytes / 32 */
    if (!s) return LEAN_FAIL(c->err, LEAN_ERR_NOMEM, "out of memory checking %" U64 " tensors",
                             f->n_tensors);
    for (uint64_t i = 0; st == LEAN_OK && i < f->n_tensors; i++) {
        const gguf_tensor_info *t = &f->tensors[i];
        s[i].name = t->name.ptr;
        if (!lean_add_u64(f->data_offset, t->offset, &s[i].start) ||
            !lean_add_u64(s[i].start, t->n_bytes, &s[i].end))
            st = LEAN_FAIL(c->err, LEAN_ERR_FORMAT,
                           "tensor '%.120s' data range overflows: data %" U64 " + offset %" U64
                           " + %" U64 " bytes",
                           t->name.ptr, f->data_offset, t->offset, t->n_bytes);
        else if (s[i].end > f->file_size)
            st = LEAN_FAIL(c->err, LEAN_ERR_FORMAT,
                           "tensor '%.120s' data ends at %" U64 ", the file has %" U64 " bytes",
                           t->name.ptr, s[i].end, f->file_size);
    }
    if (st == LEAN_OK) qsort(s, (size_t)f->n_tensors, sizeof *s, span_cmp);
    for (uint64_t i = 1; st == LEAN_OK && i < f->n_tensors; i++)
        if (s[i].start < s[i - 1].end)
            st = LEAN_FAIL(c->err, LEAN_ERR_FORMAT,
                           "tensors '%.100s' (bytes %" U64 "..%" U64 ") and '%.100s' (from %" U64
                           ") overlap",
                           s[i - 1].name, s[i - 1].start, s[i - 1].end, s[i].name, s[i].start);
    lean_free(s);
    return st;
}

/* ====================================================================== 6. read, free, get */

static lean_status read_all(cursor *c, gguf_file *f) {
    lean_status st = rd_preamble(c, f);
    if (st != LEAN_OK) return st;
    if ((st = charge(c, f->n_kv, sizeof *f->kv, "the key table")) != LEAN_OK ||
        (st = charge(c, f->n_tensors, sizeof *f->tensors, "the tensor table")) != LEAN_OK) {
        f->n_kv = f->n_tensors = 0; /* nothing allocated for gguf_free to walk */
        return st;
    }
    /* The preamble bounded both counts by the file size, so these fit size_t. */
    f->kv = lean_calloc((size_t)f->n_kv, sizeof *f->kv);
    f->tensors = lean_calloc((size_t)f->n_tensors, sizeof *f->tensors);
    if (!f->kv || !f->tensors) {
        /* gguf_free walks n_kv / n_tensors entries: forget the counts of what is NULL */
        if (!f->kv) f->n_kv = 0;
        if (!f->tensors) f->n_tensors = 0;
        return LEAN_FAIL(c->err, LEAN_ERR_NOMEM, "out of memory for the key and tensor tables");
    }
    st = rd_kvs(c, f);
    if (st == LEAN_OK) st = check_alignment(c, f);
    if (st == LEAN_OK) st = rd_tensor_infos(c, f);
    if (st != LEAN_OK) return st;
    uint64_t pad = (f->alignment - c->pos % f->alignment) % f->alignment;
    if (!lean_add_u64(c->pos, pad, &f->data_offset))
        return LEAN_FAIL(c->err, LEAN_ERR_FORMAT, "the data offset overflows");
    return check_data_ranges(c, f);
}

/* A cursor over read() up to file_size, or NULL (out of memory; err set). */
static cursor *cur_open(lean_read_fn read, void *user, uint64_t file_size, lean_error *err) {
    cursor *c = lean_malloc(sizeof *c);
    if (!c) {
        LEAN_FAIL(err, LEAN_ERR_NOMEM, "out of memory starting to read a GGUF header");
        return NULL;
    }
    memset(c, 0, offsetof(cursor, buf));
    c->read = read;
    c->user = user;
    c->file_size = file_size;
    c->err = err;
    return c;
}

/* The header through c; tensor data is checked against data_limit (the file's size). */
static lean_status read_file(cursor *c, uint64_t data_limit, gguf_file **out) {
    gguf_file *f = lean_calloc(1, sizeof *f);
    if (!f) return LEAN_FAIL(c->err, LEAN_ERR_NOMEM, "out of memory starting to read a GGUF header");
    f->file_size = data_limit;
    strcpy(c->where, "header");
    lean_status st = charge(c, 1, sizeof *c, "the reader");
    if (st == LEAN_OK) st = charge(c, 1, sizeof *f, "the file");
    if (st == LEAN_OK) st = read_all(c, f);
    if (st == LEAN_OK) *out = f;
    else gguf_free(f);
    return st;
}

lean_status gguf_read(lean_read_fn read, void *user, uint64_t file_size, gguf_file **out,
                      lean_error *err) {
    if (!read || !out) return LEAN_FAIL(err, LEAN_ERR_ARG, "gguf_read: read and out must not be NULL");
    cursor *c = cur_open(read, user, file_size, err);
    if (!c) return LEAN_ERR_NOMEM;
    lean_status st = read_file(c, file_size, out);
    lean_free(c);
    return st;
}

/* The prefix as a file of n bytes: a read past it is a header that goes on (past_end). Tensor
 * data may lie anywhere (UINT64_MAX): the size is what the header says it is. */
lean_status lean_gguf_size(const void *prefix, size_t n, uint64_t *size_min, uint64_t *size_max, lean_error *err) {
    if ((!prefix && n) || !size_min || !size_max)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "lean_gguf_size: prefix, size_min and size_max must not be NULL");
    *size_min = *size_max = 0;
    lean_mapped_file mem = {(void *)prefix, n};
    cursor *c = cur_open(lean_read_mapped, &mem, n, err);
    if (!c) return LEAN_ERR_NOMEM;
    gguf_file *f = NULL;
    lean_status st = read_file(c, UINT64_MAX, &f);
    if (st == LEAN_ERR_FORMAT && c->past_end) {
        st = LEAN_OK; /* err keeps the reason: what the header wants past these n bytes */
    } else if (st == LEAN_OK) {
        uint64_t end = f->n_tensors ? 0 : c->pos; /* a file of no tensors ends at its header */
        for (uint64_t i = 0; i < f->n_tensors; i++) { /* read_file checked these sums */
            uint64_t e = f->data_offset + f->tensors[i].offset + f->tensors[i].n_bytes;
            if (e > end) end = e;
        }
        uint64_t pad = (f->alignment - end % f->alignment) % f->alignment;
        *size_min = end;
        if (!lean_add_u64(end, pad, size_max)) *size_max = end; /* padding past 2^64: none */
    }
    gguf_free(f);
    lean_free(c);
    return st;
}

void gguf_free(gguf_file *f) {
    if (!f) return;
    for (uint64_t i = 0; f->kv && i < f->n_kv; i++) {
        lean_free(f->kv[i].key.ptr);
        value_free(&f->kv[i].value);
    }
    for (uint64_t i = 0; f->tensors && i < f->n_tensors; i++) lean_free(f->tensors[i].name.ptr);
    lean_free(f->kv);
    lean_free(f->tensors);
    lean_free(f);
}

const gguf_value *gguf_find(const gguf_file *f, const char *key) {
    if (!f || !key) return NULL;
    for (uint64_t i = 0; i < f->n_kv; i++)
        if (strcmp(f->kv[i].key.ptr, key) == 0) return &f->kv[i].value;
    return NULL;
}

const gguf_tensor_info *gguf_find_tensor(const gguf_file *f, const char *name) {
    if (!f || !name) return NULL;
    for (uint64_t i = 0; i < f->n_tensors; i++)
        if (strcmp(f->tensors[i].name.ptr, name) == 0) return &f->tensors[i];
    return NULL;
}

static lean_status get_typed(const gguf_file *f, const char *key, const gguf_value **v,
                             lean_error *err) {
    *v = gguf_find(f, key);
    if (!*v) return LEAN_FAIL(err, LEAN_ERR_MODEL, "key '%s' is missing", key ? key : "(null)");
    return LEAN_OK;
}

lean_status gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out, lean_error *err) {
    const gguf_value *v;
    lean_status st = get_typed(f, key, &v, err);
    if (st != LEAN_OK) return st;
    bool is_unsigned = v->type == GGUF_U8 || v->type == GGUF_U16 || v->type == GGUF_U32 ||
                       v->type == GGUF_U64;
    bool is_signed = v->type == GGUF_I8 || v->type == GGUF_I16 || v->type == GGUF_I32 ||
                     v->type == GGUF_I64;
    if (!is_unsigned && !is_signed)
        return LEAN_FAIL(err, LEAN_ERR_MODEL, "key '%s' has type %s; expected an integer", key,
                         gguf_vtype_name(v->type));
    if (is_unsigned && v->v.u64 > UINT32_MAX)
        return LEAN_FAIL(err, LEAN_ERR_MODEL, "key '%s' is %" U64 ", which does not fit in u32", key,
                         v->v.u64);
    if (is_signed && (v->v.i64 < 0 || v->v.i64 > (int64_t)UINT32_MAX))
        return LEAN_FAIL(err, LEAN_ERR_MODEL, "key '%s' is %" I64 ", which does not fit in u32", key,
                         v->v.i64);
    *out = (uint32_t)(is_unsigned ? v->v.u64 : (uint64_t)v->v.i64);
    return LEAN_OK;
}

lean_status gguf_get_f32(const gguf_file *f, const char *key, float *out, lean_error *err) {
    const gguf_value *v;
    lean_status st = get_typed(f, key, &v, err);
    if (st != LEAN_OK) return st;
    if (v->type != GGUF_F32 && v->type != GGUF_F64)
        return LEAN_FAIL(err, LEAN_ERR_MODEL, "key '%s' has type %s; expected f32", key,
                         gguf_vtype_name(v->type));
    *out = (float)v->v.f64;
    return LEAN_OK;
}

lean_status gguf_get_str(const gguf_file *f, const char *key, const char **out, lean_error *err) {
    const gguf_value *v;
    lean_status st = get_typed(f, key, &v, err);
    if (st != LEAN_OK) return st;
    if (v->type != GGUF_STRING)
        return LEAN_FAIL(err, LEAN_ERR_MODEL, "key '%s' has type %s; expected string", key,
                         gguf_vtype_name(v->type));
    *out = v->v.str.ptr;
    return LEAN_OK;
}

lean_status gguf_get_arr(const gguf_file *f, const char *key, uint32_t elem_type,
                         const gguf_value **out, lean_error *err) {
    const gguf_value *v;
    lean_status st = get_typed(f, key, &v, err);
    if (st != LEAN_OK) return st;
    if (v->type != GGUF_ARRAY || v->v.arr.elem_type != elem_type)
        return LEAN_FAIL(err, LEAN_ERR_MODEL, "key '%s' has type %s%s%s; expected array of %s", key,
                         gguf_vtype_name(v->type), v->type == GGUF_ARRAY ? " of " : "",
                         v->type == GGUF_ARRAY ? gguf_vtype_name(v->v.arr.elem_type) : "",
                         gguf_vtype_name(elem_type));
    *out = v;
    return LEAN_OK;
}
