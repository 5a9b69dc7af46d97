/* kv_format.c — the bytes of a KV snapshot (kv_snapshot.h's table): the model identity, the
 * checksum, the header written and checked. No context here (kv_snapshot.c moves the rows), so
 * the fuzzer (tests/fuzz_kvsnap.c) links it alone.
 *
 * Sections: identity and checksum · the header
 */
#include "core/kv_snapshot.h"

#include <string.h>

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "snapshots store the host's F32 bytes as little-endian");

/* ---- identity and checksum ---- */

#define FNV_OFFSET 0xcbf29ce484222325ull
#define FNV_PRIME 0x100000001b3ull

static uint64_t fnv_bytes(uint64_t h, const void *p, size_t n) {
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * FNV_PRIME;
    return h;
}

static uint64_t fnv_u64(uint64_t h, uint64_t v) {
    uint8_t b[8];
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (8 * i));
    return fnv_bytes(h, b, 8);
}

static uint64_t fnv_f32(uint64_t h, float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return fnv_u64(h, u);
}

/* A tensor's name (its length first, so names cannot run together), type and shape; an
 * absent one (no name) is one zero. */
static uint64_t fnv_tensor(uint64_t h, const lean_tensor *t) {
    if (!t->name) return fnv_u64(h, 0);
    const size_t len = strlen(t->name);
    h = fnv_bytes(fnv_u64(h, len + 1), t->name, len);
    h = fnv_u64(h, t->type);
    for (int i = 0; i < 4; i++) h = fnv_u64(h, (uint64_t)t->ne[i]);
    return h;
}

uint64_t kv_model_identity(const lean_model *m) {
    const lean_hparams *hp = &m->hp;
    uint64_t h = FNV_OFFSET;
    const int32_t ints[] = {(int32_t)hp->arch, hp->n_vocab, hp->n_embd,  hp->n_layer,        hp->n_head,
                            hp->n_head_kv,     hp->head_dim, hp->n_ff,   (int32_t)hp->rope_style, m->tied_output};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) h = fnv_u64(h, (uint32_t)ints[i]);
    h = fnv_f32(fnv_f32(h, hp->rms_eps), hp->rope_base);
    h = fnv_tensor(fnv_tensor(fnv_tensor(h, &m->tok_embd), &m->output_norm), &m->output);
    h = fnv_tensor(h, &m->rope_freqs);
    if (m->rope_freqs.name && m->rope_freqs.data) /* the host keeps it on every load: it turns the keys */
        h = fnv_bytes(h, m->rope_freqs.data, m->rope_freqs.n_bytes);
    for (int32_t il = 0; il < hp->n_layer; il++) {
        const lean_layer *L = &m->layers[il];
        const lean_tensor *ts[] = {&L->attn_norm, &L->wq, &L->wk,     &L->wv,       &L->wo,   &L->bq,     &L->bk,
                                   &L->bv,        &L->q_norm, &L->k_norm, &L->ffn_norm, &L->w_gate, &L->w_up, &L->w_down};
        for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) h = fnv_tensor(h, ts[i]);
    }
    return h;
}

/* Word-wise FNV (xor a word, multiply by the odd prime): each step is a bijection of the
 * state, so any change confined to one word always changes the sum; ~1 ns per 8 bytes. */
static uint64_t sum_words(uint64_t h, const uint8_t *p, uint64_t n) {
    uint64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = (h ^ w) * FNV_PRIME;
    }
    if (i < n) { /* the payload is whole floats: at most one half word left */
        uint64_t w = 0;
        memcpy(&w, p + i, (size_t)(n - i));
        h = (h ^ w) * FNV_PRIME;
    }
    return h;
}

uint64_t kv_checksum(const uint8_t *header, const uint8_t *payload, uint64_t payload_bytes) {
    return sum_words(sum_words(FNV_OFFSET, header, 48), payload, payload_bytes);
}

/* ---- the header (kv_snapshot.h's table) ---- */

static const uint8_t MAGIC[8] = {'L', 'E', 'A', 'N', 'K', 'V', '\r', '\n'};

static void put_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put_u64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t get_u64(const uint8_t *p) { return (uint64_t)get_u32(p) | (uint64_t)get_u32(p + 4) << 32; }

uint64_t kv_payload_bytes(uint32_t n_layer, uint32_t kv_dim, uint64_t n_pos) {
    return (uint64_t)n_layer * 2 * n_pos * kv_dim * 4;
}

void kv_snapshot_header(uint8_t *b, const lean_model *m, int32_t n_pos) {
    const uint32_t n_layer = (uint32_t)m->hp.n_layer, kv_dim = (uint32_t)lean_kv_dim(&m->hp);
    memset(b, 0, KV_SNAPSHOT_HEADER);
    memcpy(b, MAGIC, 8);
    put_u32(b + 8, KV_SNAPSHOT_VERSION);
    put_u32(b + 12, KV_SNAPSHOT_HEADER);
    put_u64(b + 16, kv_model_identity(m));
    put_u32(b + 24, n_layer);
    put_u32(b + 28, kv_dim);
    put_u32(b + 32, LEAN_TYPE_F32);
    put_u32(b + 36, (uint32_t)n_pos);
    put_u64(b + 40, kv_payload_bytes(n_layer, kv_dim, (uint64_t)n_pos));
}

void kv_snapshot_seal(uint8_t *b) { put_u64(b + 48, kv_checksum(b, b + KV_SNAPSHOT_HEADER, get_u64(b + 40))); }

lean_status kv_snapshot_parse(const void *bytes, size_t n, const kv_shape *want, int32_t *n_pos, lean_error *err) {
    const uint8_t *b = bytes;
    if (n < KV_SNAPSHOT_HEADER)
        return LEAN_FAIL(err, LEAN_ERR_FORMAT, "KV snapshot truncated: %zu bytes, the header alone is %u", n,
                         KV_SNAPSHOT_HEADER);
    if (memcmp(b, MAGIC, 8) != 0) return LEAN_FAIL(err, LEAN_ERR_FORMAT, "not a KV snapshot (no LEANKV magic)");
    const uint32_t version = get_u32(b + 8), header = get_u32(b + 12);
    if (version != KV_SNAPSHOT_VERSION || header != KV_SNAPSHOT_HEADER)
        return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED,
                         "KV snapshot version %u with a %u-byte header: this lean reads version %u (%u bytes)", version,
                         header, KV_SNAPSHOT_VERSION, KV_SNAPSHOT_HEADER);
    if (get_u64(b + 56) != 0) return LEAN_FAIL(err, LEAN_ERR_FORMAT, "KV snapshot's reserved bytes 56..63 are not zero");
    const uint64_t model = get_u64(b + 16);
    const uint32_t n_layer = get_u32(b + 24), kv_dim = get_u32(b + 28), type = get_u32(b + 32), pos = get_u32(b + 36);
    if (model != want->model_id || n_layer != want->n_layer || kv_dim != want->kv_dim)
        return LEAN_FAIL(err, LEAN_ERR_MODEL,
                         "KV snapshot of another model: identity %016llx, %u layers of %u keys per position; this "
                         "context's model is %016llx, %u layers of %u",
                         (unsigned long long)model, n_layer, kv_dim, (unsigned long long)want->model_id, want->n_layer,
                         want->kv_dim);
    if (type != LEAN_TYPE_F32)
        return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "KV snapshot of element type %u: only F32 (%d) is read", type,
                         LEAN_TYPE_F32);
    const uint64_t payload = get_u64(b + 40), expect = kv_payload_bytes(n_layer, kv_dim, pos);
    if (payload != expect)
        return LEAN_FAIL(err, LEAN_ERR_FORMAT, "KV snapshot's payload is %llu bytes; %u positions take %llu",
                         (unsigned long long)payload, pos, (unsigned long long)expect);
    if (n - KV_SNAPSHOT_HEADER != payload)
        return LEAN_FAIL(err, LEAN_ERR_FORMAT, "KV snapshot %s: %zu bytes, its header says %llu",
                         n - KV_SNAPSHOT_HEADER < payload ? "truncated" : "has bytes past its end", n,
                         (unsigned long long)(payload + KV_SNAPSHOT_HEADER));
    if (pos > (uint32_t)want->n_ctx)
        return LEAN_FAIL(err, LEAN_ERR_CONTEXT_FULL, "KV snapshot of %u positions does not fit in a context of %d", pos,
                         want->n_ctx);
    const uint64_t sum = get_u64(b + 48), got = kv_checksum(b, b + KV_SNAPSHOT_HEADER, payload);
    if (sum != got)
        return LEAN_FAIL(err, LEAN_ERR_FORMAT, "KV snapshot corrupted: checksum %016llx, its bytes sum to %016llx",
                         (unsigned long long)sum, (unsigned long long)got);
    *n_pos = (int32_t)pos;
    return LEAN_OK;
}
