/* fuzz_kvsnap.c — the libFuzzer target for the KV snapshot reader (src/core/kv_format.c:
 * kv_snapshot_parse, the refusals kv_snapshot.h lists), and the generator of its seeds
 * (tests/data/fuzz_kvsnap/).
 *
 *   make fuzz         build-fuzz/fuzz_kvsnap   (clang -fsanitize=fuzzer,address,undefined)
 *   make fuzz-run     runs it (with the other targets) on a fresh copy of the seeds
 *   make fuzz-seeds   rebuilds the seeds: this file compiled with -DFUZZ_KVSNAP_SEEDS has a
 *                     main() that writes them
 *
 * An input is a mode byte, then the snapshot. The context it is read for: WANT below (2
 * layers, kv_dim 8, n_ctx 16: payloads up to 2 KiB). Mode bit 0 sets the fields compared with
 * the context (identity, n_layer, kv_dim) to the context's, bit 1 reseals the checksum (where
 * the payload field matches the bytes), so that mutations reach the checks behind them. Promises held: a refusal is one of kv_snapshot.h's
 * statuses with a message; an accepted snapshot has the magic, version 1, the context's
 * identity and shape, n_pos <= n_ctx, exactly 64 + the payload's bytes, and the checksum its
 * bytes sum to. A broken promise traps (a crash for libFuzzer).
 */
#include "core/kv_snapshot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REQUIRE(cond)                                                              \
    do {                                                                           \
        if (!(cond)) {                                                             \
            fprintf(stderr, "fuzz_kvsnap: %s:%d: %s\n", __FILE__, __LINE__, #cond); \
            __builtin_trap();                                                      \
        }                                                                          \
    } while (0)

static const kv_shape WANT = {.model_id = 0x0123456789abcdefull, .n_layer = 2, .kv_dim = 8, .n_ctx = 16};

static void put_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put_u64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint64_t get_u64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const uint8_t mode = data[0];
    const size_t n = size - 1;
    uint8_t *b = malloc(n ? n : 1); /* its own allocation: ASan sees a read past the end */
    REQUIRE(b);
    memcpy(b, data + 1, n);
    if (n >= KV_SNAPSHOT_HEADER && (mode & 1)) {
        put_u64(b + 16, WANT.model_id);
        put_u32(b + 24, WANT.n_layer);
        put_u32(b + 28, WANT.kv_dim);
    }
    /* sealed only where the payload field is the bytes there (the seal reads that many) */
    if (n >= KV_SNAPSHOT_HEADER && (mode & 2) && get_u64(b + 40) == n - KV_SNAPSHOT_HEADER) kv_snapshot_seal(b);
    lean_error err = {0};
    int32_t n_pos = -1;
    const lean_status st = kv_snapshot_parse(b, n, &WANT, &n_pos, &err);
    if (st != LEAN_OK) {
        REQUIRE(st == LEAN_ERR_FORMAT || st == LEAN_ERR_UNSUPPORTED || st == LEAN_ERR_MODEL ||
                st == LEAN_ERR_CONTEXT_FULL);
        REQUIRE(err.status == st && err.msg[0] && n_pos == -1);
    } else {
        REQUIRE(memcmp(b, "LEANKV\r\n", 8) == 0 && b[8] == 1 && !b[9] && !b[10] && !b[11]);
        REQUIRE(get_u64(b + 16) == WANT.model_id);
        REQUIRE(n_pos >= 0 && n_pos <= WANT.n_ctx);
        const uint64_t payload = kv_payload_bytes(WANT.n_layer, WANT.kv_dim, (uint64_t)n_pos);
        REQUIRE(n == KV_SNAPSHOT_HEADER + payload);
        REQUIRE(get_u64(b + 48) == kv_checksum(b, b + KV_SNAPSHOT_HEADER, payload));
    }
    free(b);
    return 0;
}

#ifdef FUZZ_KVSNAP_SEEDS
/* A snapshot for WANT of n_pos positions (payload: a ramp), after mode byte `mode`, written to
 * dir/name; cut: bytes left off its end. */
static int seed(const char *dir, const char *name, uint8_t mode, uint32_t n_pos, size_t cut) {
    const uint64_t payload = kv_payload_bytes(WANT.n_layer, WANT.kv_dim, n_pos);
    const size_t n = KV_SNAPSHOT_HEADER + (size_t)payload;
    uint8_t *b = calloc(1, n + 1);
    if (!b) return 1;
    b[0] = mode;
    uint8_t *h = b + 1;
    memcpy(h, "LEANKV\r\n", 8);
    put_u32(h + 8, KV_SNAPSHOT_VERSION);
    put_u32(h + 12, KV_SNAPSHOT_HEADER);
    put_u64(h + 16, WANT.model_id);
    put_u32(h + 24, WANT.n_layer);
    put_u32(h + 28, WANT.kv_dim);
    put_u32(h + 32, LEAN_TYPE_F32);
    put_u32(h + 36, n_pos);
    put_u64(h + 40, payload);
    for (uint64_t i = 0; i < payload / 4; i++) {
        const float f = (float)i * 0.125f - 3.0f;
        memcpy(h + KV_SNAPSHOT_HEADER + 4 * i, &f, 4);
    }
    kv_snapshot_seal(h);
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    const int bad = !f || fwrite(b, 1, n + 1 - cut, f) != n + 1 - cut;
    if (f) fclose(f);
    free(b);
    return bad;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    int bad = seed(argv[1], "empty", 0, 0, 0) | seed(argv[1], "one", 0, 1, 0) | seed(argv[1], "three", 2, 3, 0) |
              seed(argv[1], "full", 3, 16, 0) | seed(argv[1], "too_long", 3, 17, 0) |
              seed(argv[1], "truncated", 0, 2, 5);
    if (bad) fprintf(stderr, "fuzz_kvsnap: cannot write the seeds in %s\n", argv[1]);
    return bad;
}
#endif
