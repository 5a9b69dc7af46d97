/* kv_snapshot.h — KV snapshots' byte format (kv_format.c), their save, restore and fork
 * (kv_snapshot.c) and the door session.c opens for
 * them into a context. Internal: the public calls are lean.h's "KV snapshots and forks".
 *
 * A snapshot, little-endian (every target lean builds for is):
 *
 *   OFFSET  SIZE  DESCRIPTION
 *   0       8     magic "LEANKV\r\n" (a text transfer that rewrites line ends breaks it)
 *   8       4     u32 version, KV_SNAPSHOT_VERSION
 *   12      4     u32 header bytes, KV_SNAPSHOT_HEADER (the payload starts there)
 *   16      8     u64 model identity (kv_model_identity: architecture, shapes, types)
 *   24      4     u32 n_layer
 *   28      4     u32 kv_dim = n_head_kv * head_dim
 *   32      4     u32 element type of the payload: LEAN_TYPE_F32 (every backend's KV)
 *   36      4     u32 n_pos, the positions held (0 is a snapshot of an empty context)
 *   40      8     u64 payload bytes = n_layer * 2 * n_pos * kv_dim * 4
 *   48      8     u64 checksum (kv_checksum) of bytes [0, 48) and of the payload
 *   56      8     zero (reserved; checked)
 *   64      ...   payload: for each layer, its keys (n_pos, kv_dim) after RoPE, then its
 *                 values (n_pos, kv_dim), F32
 *
 * kv_snapshot_parse refuses, in this order and changing nothing: fewer than 64 bytes or fewer
 * than the header says (LEAN_ERR_FORMAT, "truncated"), another magic (LEAN_ERR_FORMAT, "not a
 * KV snapshot"), another version or header size (LEAN_ERR_UNSUPPORTED), reserved bytes not zero (LEAN_ERR_FORMAT), another model or
 * shape (LEAN_ERR_MODEL, both identities named), another element type (LEAN_ERR_UNSUPPORTED),
 * a payload size that is not the one the counts give or bytes missing or left over
 * (LEAN_ERR_FORMAT), more positions than the context holds (LEAN_ERR_CONTEXT_FULL), a checksum
 * that does not match (LEAN_ERR_FORMAT, "corrupted"). */
#ifndef LEAN_KV_SNAPSHOT_H
#define LEAN_KV_SNAPSHOT_H

#include "core/backend.h"

#define KV_SNAPSHOT_VERSION 1u
#define KV_SNAPSHOT_HEADER 64u

/* What a snapshot must match to be restored: the model and the context's length. */
typedef struct kv_shape {
    uint64_t model_id;
    uint32_t n_layer, kv_dim;
    int32_t n_ctx;
} kv_shape;

/* 64-bit FNV-1a over the architecture, the hyperparameters the keys and values depend on, and
 * every tensor's name, type and shape: two files of one model in other formats differ; two
 * fine-tunes of one architecture and shapes do not (a caller who keeps snapshots of several
 * such models keys them by file). */
uint64_t kv_model_identity(const lean_model *m);
/* The checksum at offset 48: over header bytes [0, 48) then the payload, 8 bytes a step. */
uint64_t kv_checksum(const uint8_t *header, const uint8_t *payload, uint64_t payload_bytes);
/* Bytes of n_pos positions' keys and values (the payload); model.c's limits and LEAN_MAX_N_CTX
 * keep it far below 2^64 for any n_pos < 2^32. */
uint64_t kv_payload_bytes(uint32_t n_layer, uint32_t kv_dim, uint64_t n_pos);
/* Writes the header of a snapshot of m's n_pos positions into b[0..64), the checksum zero;
 * kv_snapshot_seal writes it once the payload follows the header. */
void kv_snapshot_header(uint8_t *b, const lean_model *m, int32_t n_pos);
void kv_snapshot_seal(uint8_t *b);
/* Checks bytes[0..n) against want (the refusals above); on success *n_pos is its positions and
 * the payload lies at bytes + KV_SNAPSHOT_HEADER. */
lean_status kv_snapshot_parse(const void *bytes, size_t n, const kv_shape *want, int32_t *n_pos, lean_error *err);

/* session.c's door: a context's backend, state and position for a KV call (what names it
 * in errors), failing with LEAN_ERR_ARG during a generation or a pending prefill. */
typedef struct ctx_kv {
    const lean_model *m;
    const lean_backend *be;
    lean_backend_state *state;
    int32_t pos, n_ctx;
} ctx_kv;
lean_status lean_ctx_kv(lean_ctx *c, const char *what, ctx_kv *out, lean_error *err);
/* The context now holds n_pos positions written by kv_snapshot.c, and no logits. */
void lean_ctx_kv_set_pos(lean_ctx *c, int32_t n_pos);

#endif
