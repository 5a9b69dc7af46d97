/* test_hooks.h — what the GPU backend exposes only for its tests. They stay in the library
 * because they reach state its files keep private: a lean_backend_gpu state (gpu/forward.c)
 * and the device inside a lean_gpu (device.c, which also loses the device when it closes). */
#ifndef LEAN_GPU_TEST_HOOKS_H
#define LEAN_GPU_TEST_HOOKS_H

#include "core/backend.h"
#include "gpu/gpu.h"

/* On a lean_backend_gpu state: its device, and its logits buffer ((n_vocab) F32: those of the
 * last forward call that asked for logits, or of a generation's last step). */
lean_gpu *lean_backend_gpu_device(lean_backend_state *s);
lean_gpu_buf *lean_backend_gpu_logits(lean_backend_state *s);
/* On a lean_backend_gpu state: the rows of the batched passes it has led (lean_decode_batch in
 * one pass, not row by row). */
int64_t lean_backend_gpu_batch_rows(lean_backend_state *s);
/* On a lean_backend_gpu state: the attention records (qkv_post, attention and, past a chunk, a
 * merge: one a layer per KV page the rows lie in) of the batched passes it has led. */
int64_t lean_backend_gpu_batch_attention(lean_backend_state *s);
/* On a lean_backend_gpu state: the id of the KV page (kvpool.h) its cache lies in, and *cap its
 * slots. */
uint64_t lean_backend_gpu_kv_page(lean_backend_state *s, int32_t *cap);
/* On a lean_backend_gpu state: the steps of its generation submitted past the ids handed out
 * (run ahead); 0 without a generation. */
int32_t lean_backend_gpu_gen_ahead(lean_backend_state *s);

/* The most bytes of queue writes that were pending between two submits on g (lean_gpu_buf_write
 * keeps it at most 8 MiB) since g was opened or the last reset; reset starts counting afresh. */
uint64_t lean_gpu_write_pending_peak(lean_gpu *g, bool reset);

/* The read-back maps begun on g (lean_gpu_map_begin) since it was opened. */
uint64_t lean_gpu_map_count(const lean_gpu *g);

/* Destroys the device now, as a driver reset would; every later call fails with
 * LEAN_ERR_DEVICE. */
void lean_gpu_lose_device(lean_gpu *g);

#endif
