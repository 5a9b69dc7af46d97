/* gguf.h — reading GGUF files (versions 2 and 3); dev/gguf_writer.h writes them.
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
 *
 * What the reader refuses (status, and the message names the item and byte offset):
 *   LEAN_ERR_FORMAT       bad magic; any read past the end (header or tensor data);
 *                         counts/lengths that cannot fit in the bytes left; unknown
 *                         value type; bool other than 0/1; arrays nested deeper than
 *                         GGUF_MAX_DEPTH; more than GGUF_MAX_VALUES array values in all;
 *                         a NUL byte inside a key or tensor name; duplicate keys or
 *                         tensor names; general.alignment not a u32 power of two;
 *                         n_dims outside 1..4; ne[i] < 1 (as int64); an element count
 *                         or byte size that overflows; a row (ne[0]) not a multiple of
 *                         the type's block; an offset not a multiple of the alignment;
 *                         tensor data outside the file; two tensors whose bytes overlap;
 *                         a header that needs more than GGUF_MAX_HEADER_BYTES of memory
 *                         (the message names the limit; see Memory).
 *   LEAN_ERR_UNSUPPORTED  version other than 2 or 3; a tensor type lean_type_traits_get
 *                         does not know.
 *   LEAN_ERR_IO           the read callback returned fewer bytes than file_size promised.
 *   LEAN_ERR_NOMEM        an allocation failed (nothing leaks).
 * Memory: every allocation the reader makes (the reader and file structs, the key and
 * tensor tables, each string, each array's values, the name sets and the overlap check's
 * spans) is counted before it is made, as its size plus GGUF_ALLOC_OVERHEAD, and the sum
 * (nothing given back when freed) stays within GGUF_MAX_HEADER_BYTES (512 MiB) whatever the
 * file: an empty string in the file (8 bytes) costs a gguf_value (32) and a 1-byte string
 * (33 counted), so 2^24 of them would take ~1.1 GB, and are refused at 512 MiB. The
 * overhead is glibc malloc's worst case (a chunk of max(32, size + 8 rounded up to 16)
 * bytes), so the count bounds real memory too. Versions 2 and 3 have the same layout (3
 * only added big-endian files, which are refused: their version reads as 0x03000000).
 */
#ifndef LEAN_GGUF_H
#define LEAN_GGUF_H

#include "core/common.h"

enum gguf_vtype {
    GGUF_U8 = 0, GGUF_I8 = 1, GGUF_U16 = 2, GGUF_I16 = 3, GGUF_U32 = 4, GGUF_I32 = 5,
    GGUF_F32 = 6, GGUF_BOOL = 7, GGUF_STRING = 8, GGUF_ARRAY = 9, GGUF_U64 = 10,
    GGUF_I64 = 11, GGUF_F64 = 12,
};
#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_DEPTH 8              /* array nesting levels, the outermost counts 1 */
#define GGUF_MAX_VALUES (1ull << 24)  /* array elements in one file, all arrays summed */
#define GGUF_MAX_HEADER_BYTES (512ull << 20) /* all the reader allocates for one file */
#define GGUF_ALLOC_OVERHEAD 32        /* bytes counted per allocation beyond its size */
#define GGUF_MAX_NAME 64              /* llama.cpp's GGML_MAX_NAME: the writer keeps tensor
                                         names shorter (the reader takes any length) */

/* "u8", "string", "array", ...; "?" for an unknown type id. */
const char *gguf_vtype_name(uint32_t type);
bool gguf_vtype_known(uint32_t type);   /* 0..GGUF_F64 */
unsigned gguf_vtype_bytes(uint32_t type); /* a scalar's bytes in the file; 0: string, array, unknown */

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
    uint64_t n_elems;   /* ne[0] * ne[1] * ne[2] * ne[3], <= INT64_MAX */
    uint64_t n_bytes;   /* lean_type_bytes(type, n_elems) */
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

/* Parses the header through read() (see lean_read_fn) with a small buffered cursor:
 * no mmap needed and the file is never copied whole. file_size is the file's length
 * in bytes; nothing at or past it is read. On success *out owns everything it points
 * to; on failure *out is left untouched. Errors name the problem and the byte offset.
 * data_offset is the header's end rounded up to the alignment; when the file has no
 * tensors it may lie past file_size. */
lean_status gguf_read(lean_read_fn read, void *user, uint64_t file_size, gguf_file **out,
                      lean_error *err);
void gguf_free(gguf_file *f);

/* Lookups (linear: O(n_kv) / O(n_tensors) string compares per call). find returns
 * NULL when absent. The typed getters fail with LEAN_ERR_MODEL naming the key when it
 * is absent or has an incompatible type; integer getters accept any integer type whose
 * value fits; gguf_get_f32 accepts f32 and f64. */
const gguf_value *gguf_find(const gguf_file *f, const char *key);
const gguf_tensor_info *gguf_find_tensor(const gguf_file *f, const char *name);
lean_status gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out, lean_error *err);
lean_status gguf_get_f32(const gguf_file *f, const char *key, float *out, lean_error *err);
/* The string stays owned by f. */
lean_status gguf_get_str(const gguf_file *f, const char *key, const char **out, lean_error *err);
/* An array whose elements have type elem_type (a gguf_vtype); *out stays owned by f. */
lean_status gguf_get_arr(const gguf_file *f, const char *key, uint32_t elem_type,
                         const gguf_value **out, lean_error *err);

/* File access shared by the loader and tools: mmap the whole file read-only (file.c).
 * An empty file maps to data NULL, size 0. WASI builds have no mmap: lean_map_file
 * returns LEAN_ERR_UNSUPPORTED there, and callers stream with lean_read_stdio. */
typedef struct lean_mapped_file {
    void *data;
    uint64_t size;
} lean_mapped_file;
lean_status lean_map_file(const char *path, lean_mapped_file *out, lean_error *err);
void lean_unmap_file(lean_mapped_file *f);
/* A lean_read_fn over memory (user = a lean_mapped_file *). */
size_t lean_read_mapped(void *user, uint64_t off, void *dst, size_t n);
/* A lean_read_fn over an open stdio stream (user = a FILE * opened "rb"): fseeko + fread,
 * for streamed loading where there is no mmap (wasm/WASI). */
size_t lean_read_stdio(void *user /* FILE* */, uint64_t off, void *dst, size_t n);

#endif
