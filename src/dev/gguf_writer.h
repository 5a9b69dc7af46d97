/* gguf_writer.h — writing GGUF files (the layout: core/gguf.h), for the developer tools
 * (src/dev) and the tests; not part of the runtime library. */
#ifndef LEAN_GGUF_WRITER_H
#define LEAN_GGUF_WRITER_H

#include "core/gguf.h"

/* ---- writing ----
 * A writer collects keys and tensors in order, then writes the file in one pass (version
 * 3, alignment 32 unless general.alignment is set). Keys are encoded as they are added
 * (a key costs about its size in the file; the writer keeps no pointer to the caller's
 * data). A tensor is either copied at add time (gguf_w_tensor) or only declared
 * (gguf_w_tensor_info): then gguf_writer_write_stream's fill produces its bytes while
 * the file is written, so a model of any size needs no more memory than its header.
 * Any failure is sticky: later calls do nothing and the write returns it.
 *
 * The file is laid out the way llama.cpp's gguf writer does it, so llama.cpp loads it:
 * keys in insertion order, tensor infos in insertion order, zero padding to the
 * alignment after the infos and after every tensor's data (the last one included), and
 * each offset = the previous offset + its size rounded up to the alignment.
 * general.alignment, when given, must be a u32 power of two and applies to the whole
 * file, whenever it is set. Refused with LEAN_ERR_ARG: NULL arguments, duplicate keys
 * or tensor names, tensor names of GGUF_MAX_NAME bytes or more, bad shapes or types,
 * n_bytes that differ from the shape's size, integer values that do not fit their type.
 * Nested arrays are written (the reader takes them) but llama.cpp cannot read them. */
typedef struct gguf_writer gguf_writer;
gguf_writer *gguf_writer_new(void);
void gguf_writer_free(gguf_writer *w);
void gguf_w_u32(gguf_writer *w, const char *key, uint32_t v);
void gguf_w_u64(gguf_writer *w, const char *key, uint64_t v);
void gguf_w_i32(gguf_writer *w, const char *key, int32_t v);
void gguf_w_f32(gguf_writer *w, const char *key, float v);
void gguf_w_bool(gguf_writer *w, const char *key, bool v);
void gguf_w_str(gguf_writer *w, const char *key, const char *v);
/* Any value (a value read by gguf_read, nested arrays included), checked first. */
void gguf_w_value(gguf_writer *w, const char *key, const gguf_value *v);
/* Arrays of scalars: elem_type is a gguf_vtype other than STRING/ARRAY; data holds count
 * packed host C values of that type (uint16_t, float, ...; bool: one byte each). */
void gguf_w_arr(gguf_writer *w, const char *key, uint32_t elem_type, const void *data, uint64_t count);
void gguf_w_arr_str(gguf_writer *w, const char *key, const char *const *strs, uint64_t count);
/* ne: elements per dim (ne[0] contiguous); data: n_bytes of the type's blocks. */
void gguf_w_tensor(gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                   const int64_t *ne, const void *data, uint64_t n_bytes);
/* A tensor without data: its n_bytes (from the shape and type) come from the fill. */
void gguf_w_tensor_info(gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                        const int64_t *ne);

/* Writes the file to path: <path>.tmp, renamed to path once complete, so a failure leaves
 * no partial file under either name. (A path that exists and is not a regular file, such
 * as a device, is written in place, and left as it is on failure.) The data of a tensor
 * declared with gguf_w_tensor_info comes from fill(user, index, t, sink, err), called
 * once per such tensor in file order (index counts all tensors; t: its name, shape, type
 * and n_bytes): it must write exactly t->n_bytes through gguf_sink_write. A fill that
 * fails, or writes fewer or more bytes (LEAN_ERR_ARG, naming the tensor), fails the
 * write. The file is buffered in 1 MiB pieces, so a fill may write a row at a time. */
typedef struct gguf_sink gguf_sink;
typedef lean_status (*gguf_fill_fn)(void *user, uint64_t index, const gguf_tensor_info *t,
                                    gguf_sink *sink, lean_error *err);
lean_status gguf_sink_write(gguf_sink *sink, const void *p, size_t n, lean_error *err);
lean_status gguf_writer_write_stream(gguf_writer *w, const char *path, gguf_fill_fn fill,
                                     void *user, lean_error *err);
/* The same with every tensor's data copied in (a declared tensor is LEAN_ERR_ARG). */
lean_status gguf_writer_write(gguf_writer *w, const char *path, lean_error *err);
/* The same bytes into one lean_malloc'd buffer (*out, *out_bytes; free with lean_free). */
lean_status gguf_writer_write_mem(gguf_writer *w, void **out, uint64_t *out_bytes, lean_error *err);

#endif
