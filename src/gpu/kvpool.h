/* kvpool.h — the model's KV pool: every context's key and value caches live in a few shared
 * buffers (pages), so the batched decode pass (forward.c, section "batch") reaches the caches of
 * all its rows through one binding and runs one qkv_post and one attention dispatch a layer for
 * every row of a page, not one a sequence.
 *
 * A page holds cap slots of n_ctx positions: per layer one key and one value buffer, (cap,
 * n_ctx, kv_dim) F32 with each slot at a stride rounded up to the device's storage offset
 * alignment, and the RoPE table of n_ctx positions (gpu_rope_table_create) its contexts share.
 * A context takes a free slot of its n_ctx (gpu_kv_take) and binds its slot's views; the page
 * a new slot needs holds as many slots as the pages of that n_ctx already do together (1, 1, 2,
 * 4, ...: a lone context allocates what it did alone), or the n_seq its context asks for
 * (lean_ctx_params.n_seq: the contexts the caller decodes together) where that is more, so
 * they lie in one page; at most GPU_KV_PAGE_SLOTS and what one binding holds. A page goes with
 * its last slot.
 * Callers hold the model's lock (forward.c). */
#ifndef LEAN_GPU_KVPOOL_H
#define LEAN_GPU_KVPOOL_H

#include "core/model.h"
#include "gpu/gpu.h"

#define GPU_KV_PAGE_SLOTS 64 /* the most slots a page holds (one u64 of flags) */

typedef struct gpu_kv_page {
    uint64_t id;             /* serial, never reused: the batched pass keys its kernels by it */
    int32_t n_ctx, cap;      /* cap slots of n_ctx positions */
    uint64_t used;           /* bit i: slot i is taken */
    uint64_t slot_bytes;     /* a slot's stride in k[], v[] */
    lean_gpu_buf **k, **v;   /* n_layer each: (cap, slot_bytes / 4) F32 */
    lean_gpu_buf *rope;      /* (n_ctx, head_dim): the contexts' RoPE table */
    struct gpu_kv_page *next;
} gpu_kv_page;

typedef struct gpu_kv_pool {
    gpu_kv_page *pages;
    uint64_t next_id;
} gpu_kv_pool;

/* A context's place: slot `index` of page; k[il], v[il] views of its (n_ctx, kv_dim) range. */
typedef struct gpu_kv_slot {
    gpu_kv_page *page;
    int32_t index;
    lean_gpu_buf **k, **v; /* n_layer views each */
} gpu_kv_slot;

/* A free slot of n_ctx positions (a new page where none is free, of at least n_seq slots
 * within the limits); out zeroed on failure. */
lean_status gpu_kv_take(lean_gpu *g, gpu_kv_pool *pool, const lean_model *m, int32_t n_ctx, int32_t n_seq,
                        gpu_kv_slot *out, lean_error *err);
/* Gives the slot back (a zeroed slot is fine); its page goes with its last slot. */
void gpu_kv_give(gpu_kv_pool *pool, const lean_model *m, gpu_kv_slot *slot);
/* The slot's first float in its page's buffers (a multiple of 4: slot strides are). */
uint32_t gpu_kv_slot_base(const gpu_kv_slot *slot);

#endif
