/* fuzz_lora.c — the libFuzzer target for the LoRA adapter reader (src/core/lora.c), and the
 * generator of its seed corpus (tests/data/fuzz_lora/).
 *
 *   make fuzz        build-fuzz/fuzz_lora (clang -fsanitize=fuzzer,address,undefined)
 *   make fuzz-run    runs it with the other targets, inputs <= 4096 bytes
 *   seeds            this file compiled with -DFUZZ_LORA_SEEDS has a main() that writes them with
 *                    gguf_writer (every seed has a known origin):
 *       cc -std=c11 -D_DEFAULT_SOURCE -Iinclude -Isrc -DFUZZ_LORA_SEEDS -o /tmp/seeds tests/fuzz_lora.c \
 *          build/liblean_dev.a build/liblean.a -lm -lpthread && /tmp/seeds tests/data/fuzz_lora
 *
 * Each input is an adapter file for one fixed model (llama, 2 layers, n_embd 32, n_ff 64, kv_dim
 * 16, a token_embd and an untied output of 16 rows; F32). The model is made here from a GGUF
 * header alone — the fuzzer's library has no backends, and the reader needs only the model's
 * names and shapes —
 * so the views have no data. lean_lora_load_memory must return LEAN_OK with at least one
 * adapted weight, each of rank >= 1, or an error with a message; a load that succeeds must
 * succeed again on a copy (the adapter keeps no pointer into the caller's bytes). ASan finds
 * any read outside the input. A broken promise traps (a crash for libFuzzer).
 */
#include "core/formats.h"
#include "core/lora.h"
#include "dev/gguf_writer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REQUIRE(cond)                                                            \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "fuzz_lora: %s:%d: %s\n", __FILE__, __LINE__, #cond); \
            __builtin_trap();                                                    \
        }                                                                        \
    } while (0)

enum { D = 32, FF = 64, KV = 16, V = 16, NL = 2 };

/* The model's tensors: name suffix, ne0 (cols), ne1 (rows). */
static const struct {
    const char *suffix;
    int64_t ne0, ne1;
} LAYER[] = {{"attn_q.weight", D, D},      {"attn_k.weight", D, KV},  {"attn_v.weight", D, KV},
             {"attn_output.weight", D, D}, {"ffn_gate.weight", D, FF}, {"ffn_up.weight", D, FF},
             {"ffn_down.weight", FF, D}};

/* ---- the model (names and shapes only) ---- */

static lean_model model;
static lean_layer layers[NL];

static void tensor(lean_tensor *t, const gguf_file *f, const char *name) {
    const gguf_tensor_info *ti = gguf_find_tensor(f, name);
    REQUIRE(ti);
    *t = (lean_tensor){.name = ti->name.ptr, .type = ti->type, .n_bytes = ti->n_bytes};
    memcpy(t->ne, ti->ne, sizeof t->ne);
}

static void add(gguf_writer *w, const char *name, int64_t ne0, int64_t ne1) {
    static float zeros[FF * D];
    const int64_t ne[2] = {ne0, ne1};
    gguf_w_tensor(w, name, LEAN_TYPE_F32, 2, ne, zeros, (uint64_t)(ne0 * ne1) * sizeof(float));
}

static void model_init(void) {
    if (model.gguf) return;
    gguf_writer *w = gguf_writer_new();
    gguf_w_str(w, "general.architecture", "llama");
    add(w, "token_embd.weight", D, V); /* every model has one (model.c refuses a file without) */
    add(w, "output.weight", D, V);
    char name[64];
    for (int il = 0; il < NL; il++)
        for (size_t k = 0; k < sizeof LAYER / sizeof LAYER[0]; k++) {
            snprintf(name, sizeof name, "blk.%d.%s", il, LAYER[k].suffix);
            add(w, name, LAYER[k].ne0, LAYER[k].ne1);
        }
    void *bytes = NULL;
    uint64_t n = 0;
    lean_error err;
    REQUIRE(gguf_writer_write_mem(w, &bytes, &n, &err) == LEAN_OK);
    gguf_writer_free(w);
    lean_mapped_file view = {.data = bytes, .size = n};
    REQUIRE(gguf_read(lean_read_mapped, &view, n, &model.gguf, &err) == LEAN_OK);
    lean_free(bytes); /* the header owns its names: the views need no data */
    model.hp = (lean_hparams){.arch = LEAN_ARCH_LLAMA, .n_vocab = V, .n_embd = D, .n_layer = NL, .n_head = 2,
                              .n_head_kv = 1, .head_dim = KV, .n_ff = FF};
    model.layers = layers;
    tensor(&model.tok_embd, model.gguf, "token_embd.weight");
    tensor(&model.output, model.gguf, "output.weight");
    for (int il = 0; il < NL; il++) {
        lean_tensor *ts[] = {&layers[il].wq,     &layers[il].wk,   &layers[il].wv,    &layers[il].wo,
                             &layers[il].w_gate, &layers[il].w_up, &layers[il].w_down};
        for (size_t k = 0; k < sizeof LAYER / sizeof LAYER[0]; k++) {
            snprintf(name, sizeof name, "blk.%d.%s", il, LAYER[k].suffix);
            tensor(ts[k], model.gguf, name);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    model_init();
    lean_lora *a = NULL;
    lean_error err = {0};
    const lean_status st = lean_lora_load_memory(&model, size ? data : (const uint8_t *)"", size, &a, &err);
    if (st != LEAN_OK) {
        REQUIRE(a == NULL && err.status == st && err.msg[0] && memchr(err.msg, 0, sizeof err.msg));
        return 0;
    }
    REQUIRE(a && lean_lora_n_weights(a) >= 1 && lean_lora_max_rank(a) >= 1);
    uint8_t *copy = malloc(size ? size : 1);
    memcpy(copy, data, size);
    lean_lora *b = NULL;
    REQUIRE(lean_lora_load_memory(&model, copy, size, &b, &err) == LEAN_OK);
    memset(copy, 0xff, size);
    REQUIRE(lean_lora_n_weights(b) == lean_lora_n_weights(a) && lean_lora_max_rank(b) == lean_lora_max_rank(a));
    free(copy);
    lean_lora_free(b);
    lean_lora_free(a);
    return 0;
}

#ifdef FUZZ_LORA_SEEDS
/* ---- seeds: adapters for the model above, each through the target ---- */

static void seed(const char *dir, const char *file, const char *arch, const char *const *bases, int n_bases,
                 int64_t rank, uint32_t type, int drop_b) {
    gguf_writer *w = gguf_writer_new();
    gguf_w_str(w, "general.architecture", arch);
    gguf_w_str(w, "general.type", "adapter");
    gguf_w_str(w, "adapter.type", "lora");
    gguf_w_f32(w, "adapter.lora.alpha", 4.0f);
    static uint8_t fill[FF * 8 * 4];
    for (size_t i = 0; i < sizeof fill; i++) fill[i] = (uint8_t)(i * 37 + 11) & 0x3f; /* small finite values */
    for (int i = 0; i < n_bases; i++) {
        int64_t cols = D, rows = D;
        for (size_t k = 0; k < sizeof LAYER / sizeof LAYER[0]; k++)
            if (strstr(bases[i], LAYER[k].suffix)) cols = LAYER[k].ne0, rows = LAYER[k].ne1;
        if (!strcmp(bases[i], "output.weight")) rows = V;
        char name[64];
        const int64_t na[2] = {cols, rank}, nb[2] = {rank, rows};
        uint64_t ba = 0, bb = 0;
        lean_type_bytes(type, (uint64_t)(cols * rank), &ba);
        lean_type_bytes(type, (uint64_t)(rank * rows), &bb);
        snprintf(name, sizeof name, "%s.lora_a", bases[i]);
        gguf_w_tensor(w, name, type, 2, na, fill, ba);
        if (drop_b) continue;
        snprintf(name, sizeof name, "%s.lora_b", bases[i]);
        gguf_w_tensor(w, name, type, 2, nb, fill, bb);
    }
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    lean_error err;
    if (gguf_writer_write(w, path, &err) != LEAN_OK) {
        fprintf(stderr, "%s: %s\n", path, err.msg);
        exit(1);
    }
    gguf_writer_free(w);
    FILE *f = fopen(path, "rb");
    static uint8_t buf[1 << 16];
    const size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    LLVMFuzzerTestOneInput(buf, n); /* every seed must pass the target's checks */
    printf("%s: %zu bytes\n", path, n);
}

int main(int argc, char **argv) {
    if (argc != 2) return fprintf(stderr, "usage: %s DIR\n", argv[0]), 2;
    const char *two[] = {"blk.0.attn_q.weight", "blk.1.ffn_down.weight"};
    const char *out[] = {"output.weight"};
    const char *v[] = {"blk.1.attn_v.weight"};
    const char *bad[] = {"blk.7.attn_q.weight"};
    seed(argv[1], "two_f32.gguf", "llama", two, 2, 2, LEAN_TYPE_F32, 0);
    seed(argv[1], "output_f16.gguf", "llama", out, 1, 3, LEAN_TYPE_F16, 0);
    seed(argv[1], "v_q8_0.gguf", "llama", v, 1, 32, LEAN_TYPE_Q8_0, 0);
    seed(argv[1], "no_b.gguf", "llama", v, 1, 2, LEAN_TYPE_F32, 1);
    seed(argv[1], "other_arch.gguf", "qwen2", v, 1, 2, LEAN_TYPE_F32, 0);
    seed(argv[1], "unknown_layer.gguf", "llama", bad, 1, 2, LEAN_TYPE_F32, 0);
    return 0;
}
#endif
