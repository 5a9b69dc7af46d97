/* gguf.h — reading and writing GGUF files (versions 2 and 3).
 *
 * The file, all integers little-endian:
 *
 *   OFFSET  SIZE  DESCRIPTION
 *   0       4     magic "GGUF" (bytes 0x47 0x47 0x55 0x46)
 *   4       4     version: u32, 2 or 3 (1 used u32 counts; refused)
 *   8       8     n_tensors: u64
 *   16      8     n_kv: u64
 *   24      ...   n_kv key/value pairs:   key: string, type: u32, value
 *   ...     ...   n_tensors tensor infos: name: string, n_dims: u32 (1..4),
 *                 ne[n_dims]: u64 each (ne[0] is the contiguous dimension),
 *                 type: u32 (lean_type), offset: u64 (from the data start,
 *                 a multiple of the alignment)
 *   ...     ...   padding to general.alignment (u32 key, default 32, a power of two)
 *   data    ...   tensor data; each tensor's bytes start at data + offset
 *
 *   string: len u64, then len bytes (UTF-8, no NUL)
 *   value types: 0 u8, 1 i8, 2 u16, 3 i16, 4 u32, 5 i32, 6 f32, 7 bool (1 byte, 0 or 1),
 *                8 string, 9 array (elem type u32, count u64, elements), 10 u64,
 *                11 i64, 12 f64. Arrays may nest.
 *
 * The reader copies the header (keys, strings, arrays, tensor infos) into memory it
 * owns and never touches tensor data: the caller maps or streams it using
 * gguf_file.data_offset and each tensor's offset/size, which the reader has checked
 * against the file size. Every size read from the file is checked for overflow and
 * against the bytes that remain before anything is allocated.
 */
#ifndef LEAN_GGUF_H
#define LEAN_GGUF_H

#include "common.h"

enum gguf_vtype {
    GGUF_U8 = 0, GGUF_I8 = 1, GGUF_U16 = 2, GGUF_I16 = 3, GGUF_U32 = 4, GGUF_I32 = 5,
    GGUF_F32 = 6, GGUF_BOOL = 7, GGUF_STRING = 8, GGUF_ARRAY = 9, GGUF_U64 = 10,
    GGUF_I64 = 11, GGUF_F64 = 12,
};
#define GGUF_DEFAULT_ALIGNMENT 32

typedef struct gguf_string {
    uint64_t len;
    char *ptr; /* owned, NUL-terminated for convenience (len excludes the NUL) */
} gguf_string;

typedef struct gguf_value gguf_value;
struct gguf_value {
    uint32_t type; /* enum gguf_vtype */
    union {
        uint64_t u64;  /* U8, U16, U32, U64, BOOL */
        int64_t i64;   /* I8, I16, I32, I64 */
        double f64;    /* F32, F64 */
        gguf_string str;
        struct {
            uint32_t elem_type;
            uint64_t count;
            gguf_value *items; /* count values, owned */
        } arr;
    } v;
};

typedef struct gguf_kv {
    gguf_string key;
    gguf_value value;
} gguf_kv;

typedef struct gguf_tensor_info {
    gguf_string name;
    uint32_t n_dims;
    int64_t ne[4];      /* elements per dimension; unused dims are 1 */
    uint32_t type;      /* lean_type */
    uint64_t offset;    /* bytes from gguf_file.data_offset */
    uint64_t n_elems;
    uint64_t n_bytes;
} gguf_tensor_info;

typedef struct gguf_file {
    uint32_t version;
    uint64_t n_kv;
    gguf_kv *kv;
    uint64_t n_tensors;
    gguf_tensor_info *tensors;
    uint64_t alignment;   /* bytes */
    uint64_t data_offset; /* bytes from the file start; a multiple of alignment */
    uint64_t file_size;   /* bytes */
} gguf_file;

/* Parses the header through read() (see lean_read_fn). On success *out owns
 * everything it points to. Errors name the problem and the byte offset. */
lean_status gguf_read(lean_read_fn read, void *user, uint64_t file_size, gguf_file **out,
                      lean_error *err);
void gguf_free(gguf_file *f);

/* Lookups. find returns NULL when absent. The typed getters fail with LEAN_ERR_MODEL
 * naming the key when it is absent or has an incompatible type; integer getters accept
 * any integer type whose value fits. */
const gguf_value *gguf_find(const gguf_file *f, const char *key);
const gguf_tensor_info *gguf_find_tensor(const gguf_file *f, const char *name);
lean_status gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out, lean_error *err);
lean_status gguf_get_f32(const gguf_file *f, const char *key, float *out, lean_error *err);
/* The string stays owned by f. */
lean_status gguf_get_str(const gguf_file *f, const char *key, const char **out, lean_error *err);

/* ---- writing ----
 * A writer collects keys and tensors in memory order, then writes the file in one pass
 * (version 3, alignment 32 unless general.alignment is set). Tensor data is copied at
 * add time. Any failure is sticky: later calls do nothing and gguf_writer_write returns it. */
typedef struct gguf_writer gguf_writer;
gguf_writer *gguf_writer_new(void);
void gguf_writer_free(gguf_writer *w);
void gguf_w_u32(gguf_writer *w, const char *key, uint32_t v);
void gguf_w_i32(gguf_writer *w, const char *key, int32_t v);
void gguf_w_f32(gguf_writer *w, const char *key, float v);
void gguf_w_bool(gguf_writer *w, const char *key, bool v);
void gguf_w_str(gguf_writer *w, const char *key, const char *v);
/* Copies a value read by gguf_read (any type, nested arrays included). */
void gguf_w_value(gguf_writer *w, const char *key, const gguf_value *v);
/* Arrays of scalars: elem_type is a gguf_vtype other than STRING/ARRAY; data packed. */
void gguf_w_arr(gguf_writer *w, const char *key, uint32_t elem_type, const void *data, uint64_t count);
void gguf_w_arr_str(gguf_writer *w, const char *key, const char *const *strs, uint64_t count);
/* ne: elements per dim (ne[0] contiguous); data: n_bytes of the type's blocks. */
void gguf_w_tensor(gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                   const int64_t *ne, const void *data, uint64_t n_bytes);
lean_status gguf_writer_write(gguf_writer *w, const char *path, lean_error *err);

/* File access shared by the loader and tools: mmap the whole file read-only. */
typedef struct lean_mapped_file {
    void *data;
    uint64_t size;
} lean_mapped_file;
lean_status lean_map_file(const char *path, lean_mapped_file *out, lean_error *err);
void lean_unmap_file(lean_mapped_file *f);
/* A lean_read_fn over memory (user = a lean_mapped_file *). */
size_t lean_read_mapped(void *user, uint64_t off, void *dst, size_t n);

#endif
