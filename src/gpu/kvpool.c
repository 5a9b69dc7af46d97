/* kvpool.c — the model's KV pool (kvpool.h has the layout and the growth rule).
 *
 * Sections: pages · slots
 */
#include "gpu/kvpool.h"

#include "gpu/ops.h"

#include <stdio.h>

/* ---- pages ---- */

static void page_free(gpu_kv_page *p, int32_t n_layer) {
    for (int32_t il = 0; il < n_layer; il++) {
        if (p->k) lean_gpu_buf_free(p->k[il]);
        if (p->v) lean_gpu_buf_free(p->v[il]);
    }
    lean_free(p->k);
    lean_free(p->v);
    lean_gpu_buf_free(p->rope);
    lean_free(p);
}

/* A page of the growth rule's slots of n_ctx positions, or n_seq where that is more. */
static lean_status page_new(lean_gpu *g, gpu_kv_pool *pool, const lean_model *m, int32_t n_ctx, int32_t n_seq,
                            gpu_kv_page **out, lean_error *err) {
    *out = NULL;
    const lean_hparams *hp = &m->hp;
    const uint64_t align = lean_gpu_get_info(g)->min_storage_offset_align ? lean_gpu_get_info(g)->min_storage_offset_align
                                                                          : 256;
    uint64_t bytes;
    if (!lean_mul_u64((uint64_t)n_ctx, (uint64_t)lean_kv_dim(hp) * 4, &bytes) || bytes > gpu_binding_max_bytes(g))
        return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "gpu: a KV cache of %d positions x %d floats passes the %llu-byte "
                         "storage binding", n_ctx, lean_kv_dim(hp), (unsigned long long)gpu_binding_max_bytes(g));
    const uint64_t stride = (bytes + align - 1) / align * align;
    int32_t cap = 0; /* the growth rule: the slots of n_ctx the pages have */
    for (const gpu_kv_page *p = pool->pages; p; p = p->next) cap += p->n_ctx == n_ctx ? p->cap : 0;
    const uint64_t fit = gpu_binding_max_bytes(g) / stride;
    if (cap < n_seq) cap = n_seq;
    if (cap < 1) cap = 1;
    if (cap > GPU_KV_PAGE_SLOTS) cap = GPU_KV_PAGE_SLOTS;
    if ((uint64_t)cap > fit) cap = fit ? (int32_t)fit : 1;
    gpu_kv_page *p = lean_calloc(1, sizeof *p);
    if (!p) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "gpu: a KV page");
    *p = (gpu_kv_page){.id = ++pool->next_id, .n_ctx = n_ctx, .cap = cap, .slot_bytes = stride};
    p->k = lean_calloc((size_t)hp->n_layer, sizeof *p->k);
    p->v = lean_calloc((size_t)hp->n_layer, sizeof *p->v);
    lean_status st = p->k && p->v ? LEAN_OK : LEAN_FAIL(err, LEAN_ERR_NOMEM, "gpu: a KV page's %d layers", hp->n_layer);
    /* the last slot only as long as it needs: one slot is exactly the cache it was alone */
    const uint64_t total = stride * (uint64_t)(cap - 1) + bytes;
    for (int32_t il = 0; !st && il < hp->n_layer; il++) {
        st = lean_gpu_buf_create(g, total, LEAN_GPU_STORAGE, "key cache", &p->k[il], err);
        if (!st) st = lean_gpu_buf_create(g, total, LEAN_GPU_STORAGE, "value cache", &p->v[il], err);
    }
    if (!st)
        st = gpu_rope_table_create(g, n_ctx, hp->head_dim, hp->rope_base, m->rope_freqs.data, &p->rope, err);
    if (st) {
        page_free(p, hp->n_layer);
        return st;
    }
    p->next = pool->pages;
    pool->pages = p;
    *out = p;
    return LEAN_OK;
}

/* ---- slots ---- */

static bool page_full(const gpu_kv_page *p) {
    return p->used == (p->cap == GPU_KV_PAGE_SLOTS ? ~0ull : (1ull << p->cap) - 1);
}

lean_status gpu_kv_take(lean_gpu *g, gpu_kv_pool *pool, const lean_model *m, int32_t n_ctx, int32_t n_seq,
                        gpu_kv_slot *out, lean_error *err) {
    *out = (gpu_kv_slot){0};
    const int32_t n_layer = m->hp.n_layer;
    gpu_kv_page *p = pool->pages;
    while (p && (p->n_ctx != n_ctx || page_full(p))) p = p->next;
    lean_status st = p ? LEAN_OK : page_new(g, pool, m, n_ctx, n_seq, &p, err);
    if (st) return st;
    int32_t i = 0;
    while (p->used >> i & 1) i++;
    p->used |= 1ull << i;
    *out = (gpu_kv_slot){.page = p, .index = i};
    out->k = lean_calloc((size_t)n_layer, sizeof *out->k);
    out->v = lean_calloc((size_t)n_layer, sizeof *out->v);
    if (!out->k || !out->v) st = LEAN_FAIL(err, LEAN_ERR_NOMEM, "gpu: a KV slot's %d layers", n_layer);
    const uint64_t bytes = ((uint64_t)n_ctx * (uint64_t)lean_kv_dim(&m->hp) * 4 + 15) / 16 * 16;
    for (int32_t il = 0; !st && il < n_layer; il++) {
        st = lean_gpu_buf_view(p->k[il], (uint64_t)i * p->slot_bytes, bytes, "key cache", &out->k[il], err);
        if (!st) st = lean_gpu_buf_view(p->v[il], (uint64_t)i * p->slot_bytes, bytes, "value cache", &out->v[il], err);
    }
    if (st) gpu_kv_give(pool, m, out);
    return st;
}

void gpu_kv_give(gpu_kv_pool *pool, const lean_model *m, gpu_kv_slot *slot) {
    gpu_kv_page *p = slot->page;
    if (!p) return;
    for (int32_t il = 0; il < m->hp.n_layer; il++) {
        if (slot->k) lean_gpu_buf_free(slot->k[il]);
        if (slot->v) lean_gpu_buf_free(slot->v[il]);
    }
    lean_free(slot->k);
    lean_free(slot->v);
    p->used &= ~(1ull << slot->index);
    *slot = (gpu_kv_slot){0};
    if (p->used) return;
    gpu_kv_page **at = &pool->pages;
    while (*at != p) at = &(*at)->next;
    *at = p->next;
    page_free(p, m->hp.n_layer);
}

uint32_t gpu_kv_slot_base(const gpu_kv_slot *slot) {
    return (uint32_t)((uint64_t)slot->index * slot->page->slot_bytes / 4);
}
