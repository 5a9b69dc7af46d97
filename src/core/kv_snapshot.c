/* kv_snapshot.c — a context's KV cache as bytes (save, restore) and copied into another
 * context (fork): lean.h's "KV snapshots and forks".
 *
 * What it does: fills and empties the format kv_snapshot.h draws (kv_format.c writes and checks
 * its header: the model, the shapes, the positions, a checksum; then every layer's keys and
 * values as F32 rows), moving rows through the backend's KV access (backend.h: in place on the CPU, reads and
 * writes of the device's buffers on the GPU, a copy on the device for a fork on one device).
 * Every check runs before any state changes. What it does not: keep ids, logits or sampler
 * state (the caller has them), or touch files.
 *
 * Sections: rows · save / restore · fork
 */
#include "core/kv_snapshot.h"

#include <string.h>

/* ---- rows: a context's layer il, keys (kind 0) or values (1), rows [0, n) ---- */

/* To host (save: to_host) or from it. */
static lean_status rows_move(const ctx_kv *k, int32_t il, int kind, int32_t n, void *host, bool to_host,
                             lean_error *err) {
    const size_t bytes = (size_t)n * lean_kv_dim(&k->m->hp) * 4;
    if (n == 0) return LEAN_OK;
    if (k->be->kv_host) {
        float *rows = k->be->kv_host(k->state, il, kind);
        memcpy(to_host ? host : rows, to_host ? rows : host, bytes);
        return LEAN_OK;
    }
    if (!k->be->kv_read) return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "the %s backend has no KV access", k->be->name);
    return to_host ? k->be->kv_read(k->state, il, kind, n, host, err) : k->be->kv_write(k->state, il, kind, n, host, err);
}

/* ---- save / restore ---- */

lean_status lean_kv_save(lean_ctx *c, void *buf, size_t cap, size_t *n_bytes, lean_error *err) {
    ctx_kv k;
    lean_status st = lean_ctx_kv(c, "lean_kv_save", &k, err);
    if (st != LEAN_OK) return st;
    if (!n_bytes) return LEAN_FAIL(err, LEAN_ERR_ARG, "lean_kv_save: n_bytes is NULL");
    const lean_hparams *hp = &k.m->hp;
    const uint32_t kv_dim = (uint32_t)lean_kv_dim(hp);
    const uint64_t payload = kv_payload_bytes((uint32_t)hp->n_layer, kv_dim, (uint64_t)k.pos);
    const uint64_t total = payload + KV_SNAPSHOT_HEADER;
    if (total > SIZE_MAX)
        return LEAN_FAIL(err, LEAN_ERR_NOMEM, "a KV snapshot of %d positions takes %llu bytes, more than this host addresses",
                         k.pos, (unsigned long long)total);
    *n_bytes = (size_t)total;
    if (!buf && cap == 0) return LEAN_OK; /* the size, asked */
    if (!buf || cap < total)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "lean_kv_save: a snapshot of %d positions takes %llu bytes, the buffer has %zu",
                         k.pos, (unsigned long long)total, buf ? cap : 0);
    kv_snapshot_header(buf, k.m, k.pos);
    uint8_t *p = (uint8_t *)buf + KV_SNAPSHOT_HEADER;
    const size_t rows_bytes = (size_t)k.pos * kv_dim * 4;
    for (int32_t il = 0; st == LEAN_OK && il < hp->n_layer; il++)
        for (int kind = 0; st == LEAN_OK && kind < 2; kind++, p += rows_bytes)
            st = rows_move(&k, il, kind, k.pos, p, true, err);
    if (st == LEAN_OK) kv_snapshot_seal(buf);
    return st;
}

lean_status lean_kv_restore(lean_ctx *c, const void *buf, size_t n_bytes, lean_error *err) {
    ctx_kv k;
    lean_status st = lean_ctx_kv(c, "lean_kv_restore", &k, err);
    if (st != LEAN_OK) return st;
    if (!buf) return LEAN_FAIL(err, LEAN_ERR_ARG, "lean_kv_restore: NULL snapshot");
    const lean_hparams *hp = &k.m->hp;
    const kv_shape want = {.model_id = kv_model_identity(k.m), .n_layer = (uint32_t)hp->n_layer,
                           .kv_dim = (uint32_t)lean_kv_dim(hp), .n_ctx = k.n_ctx};
    int32_t n_pos = 0;
    st = kv_snapshot_parse(buf, n_bytes, &want, &n_pos, err);
    if (st != LEAN_OK) return st;
    const uint8_t *p = (const uint8_t *)buf + KV_SNAPSHOT_HEADER;
    const size_t rows_bytes = (size_t)n_pos * want.kv_dim * 4;
    for (int32_t il = 0; st == LEAN_OK && il < hp->n_layer; il++)
        for (int kind = 0; st == LEAN_OK && kind < 2; kind++, p += rows_bytes)
            st = rows_move(&k, il, kind, n_pos, (void *)p, false, err);
    /* a write that failed midway (a lost device) leaves no consistent prefix: the context empties */
    lean_ctx_kv_set_pos(c, st == LEAN_OK ? n_pos : 0);
    return st;
}

/* ---- fork ---- */

/* dst's rows [0, n) of every layer from src's, through tmp (one layer's keys or values) in host
 * memory: contexts on two backends, or on two devices. */
static lean_status copy_through_host(const ctx_kv *dst, const ctx_kv *src, int32_t n, void *tmp, lean_error *err) {
    lean_status st = LEAN_OK;
    for (int32_t il = 0; st == LEAN_OK && il < src->m->hp.n_layer; il++)
        for (int kind = 0; st == LEAN_OK && kind < 2; kind++) {
            st = rows_move(src, il, kind, n, tmp, true, err);
            if (st == LEAN_OK) st = rows_move(dst, il, kind, n, tmp, false, err);
        }
    return st;
}

lean_status lean_kv_fork(lean_ctx *dst, lean_ctx *src, int32_t n_pos, lean_error *err) {
    ctx_kv d, s;
    lean_status st = lean_ctx_kv(src, "lean_kv_fork (its source)", &s, err);
    if (st == LEAN_OK) st = lean_ctx_kv(dst, "lean_kv_fork (its destination)", &d, err);
    if (st != LEAN_OK) return st;
    if (dst == src) return LEAN_FAIL(err, LEAN_ERR_ARG, "lean_kv_fork: the source is the destination");
    if (d.m != s.m && kv_model_identity(d.m) != kv_model_identity(s.m))
        return LEAN_FAIL(err, LEAN_ERR_MODEL, "lean_kv_fork: the two contexts are of different models");
    if (n_pos < 0 || n_pos > s.pos)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "lean_kv_fork of %d positions: the source holds 0..%d", n_pos, s.pos);
    if (n_pos > d.n_ctx)
        return LEAN_FAIL(err, LEAN_ERR_CONTEXT_FULL, "lean_kv_fork of %d positions into a context of %d", n_pos,
                         d.n_ctx);
    const size_t bytes = (size_t)n_pos * lean_kv_dim(&s.m->hp) * 4; /* one layer's keys or values */
    if (d.be->kv_host && s.be->kv_host) { /* both in host memory: straight across */
        for (int32_t il = 0; il < s.m->hp.n_layer; il++)
            for (int kind = 0; kind < 2; kind++)
                if (bytes) memcpy(d.be->kv_host(d.state, il, kind), s.be->kv_host(s.state, il, kind), bytes);
        lean_ctx_kv_set_pos(dst, n_pos);
        return LEAN_OK;
    }
    st = d.be == s.be && d.be->kv_copy ? d.be->kv_copy(d.state, s.state, n_pos, err) : LEAN_ERR_UNSUPPORTED;
    if (st == LEAN_ERR_UNSUPPORTED) { /* the carrier first, so that running out of memory changes nothing */
        void *tmp = lean_malloc(bytes);
        if (!tmp) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "lean_kv_fork: %zu bytes to carry one layer's rows", bytes);
        st = copy_through_host(&d, &s, n_pos, tmp, err);
        lean_free(tmp);
    }
    lean_ctx_kv_set_pos(dst, st == LEAN_OK ? n_pos : 0); /* a failure midway leaves no consistent prefix */
    return st;
}
