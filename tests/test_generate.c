/* test_generate.c — the model generator and the quantizer (src/dev/generate.c).
 *
 * Generates the tiny presets in several recipes into $TMPDIR and reads them back with
 * the gguf reader: keys, tensor names / shapes / types (the Q4_K_M layout per tensor),
 * the stand-in vocabulary, value statistics, determinism, lean_quantize_file round trips
 * (and that quantizing a generated F32 file gives the very bytes the generator writes for
 * that recipe), vocabulary files (copied keys, [PAD] padding), bad parameters, and a
 * failed-allocation loop (every failure clean, nothing leaked under ASan).
 *
 * LEAN_SLOW_TESTS=1 also generates every real preset with one layer (a few seconds):
 * their keys and shapes, the fallback types at rows of 576/896, llama3 rope_freqs.
 */
#include "test.h"

#include "dev/lean_dev.h"
#include "core/formats.h"
#include "dev/gguf_writer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---------------------------------------------------------------- helpers */

/* A file read whole into memory and parsed (mmap is not there under WASI). */
typedef struct opened {
    lean_mapped_file map; /* data: malloc'd */
    gguf_file *f;
} opened;


static int open_gguf(const char *path, opened *o) {
    lean_error err;
    size_t n = 0;
    memset(o, 0, sizeof *o);
    o->map.data = test_read_file(path, &n);
    o->map.size = n;
    if (!o->map.data) {
        CHECK(0, "cannot read %s", path);
        return 0;
    }
    if (gguf_read(lean_read_mapped, &o->map, o->map.size, &o->f, &err) != LEAN_OK) {
        CHECK(0, "read %s: %s", path, err.msg);
        free(o->map.data);
        return 0;
    }
    return 1;
}

static void close_gguf(opened *o) {
    gguf_free(o->f);
    free(o->map.data);
}

static const uint8_t *tdata(const opened *o, const gguf_tensor_info *t) {
    return (const uint8_t *)o->map.data + o->f->data_offset + t->offset;
}

/* The tensor as floats (malloc'd). */
static float *tfloats(const opened *o, const gguf_tensor_info *t) {
    float *x = malloc(sizeof(float) * (size_t)t->n_elems);
    const lean_type_traits *tr = lean_type_traits_get(t->type);
    tr->dequant(tdata(o, t), x, (int64_t)t->n_elems);
    return x;
}

static uint32_t u32key(const opened *o, const char *key) {
    uint32_t v = 0xdeadbeef;
    lean_error err;
    CHECK(gguf_get_u32(o->f, key, &v, &err) == LEAN_OK, "%s", err.msg);
    return v;
}

static const char *strkey(const opened *o, const char *key) {
    const char *s = "";
    lean_error err;
    CHECK(gguf_get_str(o->f, key, &s, &err) == LEAN_OK, "%s", err.msg);
    return s;
}

static const gguf_tensor_info *tensor(const opened *o, const char *name) {
    const gguf_tensor_info *t = gguf_find_tensor(o->f, name);
    CHECK(t != NULL, "tensor %s missing", name);
    return t;
}

static void check_tensor(const opened *o, const char *name, int64_t ne0, int64_t ne1, uint32_t type) {
    const gguf_tensor_info *t = gguf_find_tensor(o->f, name);
    if (!t) {
        CHECK(0, "tensor %s missing", name);
        return;
    }
    uint32_t nd = ne1 > 1 ? 2 : 1;
    CHECK(t->n_dims == nd && t->ne[0] == ne0 && t->ne[1] == ne1, "%s: n_dims %u ne %lld x %lld, want %u: %lld x %lld",
          name, t->n_dims, (long long)t->ne[0], (long long)t->ne[1], nd, (long long)ne0, (long long)ne1);
    CHECK(t->type == type, "%s: type %s, want %s", name, lean_type_name((int)t->type), lean_type_name((int)type));
}

static int same_bytes(const char *a, const char *b) {
    size_t na = 0, nb = 0;
    uint8_t *pa = test_read_file(a, &na), *pb = test_read_file(b, &nb);
    int same = pa && pb && na == nb && memcmp(pa, pb, na) == 0;
    free(pa);
    free(pb);
    return same;
}

static lean_status gen(const char *preset, const char *recipe, uint64_t seed, int n_layer, const char *vocab,
                       const char *path, lean_error *err) {
    lean_gen_params p = {.preset = preset, .recipe = recipe, .vocab_path = vocab, .seed = seed, .n_layer = n_layer};
    return lean_generate_model(&p, path, err);
}

/* Generates preset in recipe (stand-in vocabulary) into a temporary file and opens it;
 * open_gguf reads the file whole, so it is removed at once. 0 when it cannot be opened. */
static int gen_open(const char *preset, const char *recipe, uint64_t seed, int n_layer, opened *o) {
    char path[256];
    lean_error err;
    test_tmp_path(path, sizeof path, recipe);
    CHECK(gen(preset, recipe, seed, n_layer, NULL, path, &err) == LEAN_OK, "%s %s: %s", preset, recipe, err.msg);
    int ok = open_gguf(path, o);
    unlink(path);
    return ok;
}

static void mean_std(const float *x, uint64_t n, double *mean, double *sd) {
    double s = 0, s2 = 0;
    for (uint64_t i = 0; i < n; i++) s += x[i];
    *mean = s / (double)n;
    for (uint64_t i = 0; i < n; i++) s2 += (x[i] - *mean) * (x[i] - *mean);
    *sd = sqrt(s2 / (double)n);
}

/* ---------------------------------------------------------------- tests */

/* tiny-llama in F32: every key, every tensor, the stand-in vocabulary, value statistics. */
static void test_tiny_llama_f32(void) {
    opened o;
    if (!gen_open("tiny-llama", "f32", 7, 0, &o)) return;

    CHECK(strcmp(strkey(&o, "general.architecture"), "llama") == 0, "arch");
    CHECK(strcmp(strkey(&o, "general.type"), "model") == 0, "type");
    CHECK(strstr(strkey(&o, "general.name"), "tiny-llama") != NULL, "name");
    CHECK(strcmp(strkey(&o, "lean.generator.preset"), "tiny-llama") == 0, "preset key");
    CHECK(strcmp(strkey(&o, "lean.generator.recipe"), "f32") == 0, "recipe key");
    const gguf_value *seed = gguf_find(o.f, "lean.generator.seed");
    CHECK(seed && seed->type == GGUF_U64 && seed->v.u64 == 7, "seed key");
    CHECK(u32key(&o, "general.file_type") == 0, "file_type");
    CHECK(u32key(&o, "general.quantization_version") == 2, "quantization_version");
    CHECK(u32key(&o, "llama.context_length") == 2048, "ctx");
    CHECK(u32key(&o, "llama.embedding_length") == 256, "n_embd");
    CHECK(u32key(&o, "llama.block_count") == 2, "n_layer");
    CHECK(u32key(&o, "llama.feed_forward_length") == 512, "n_ff");
    CHECK(u32key(&o, "llama.attention.head_count") == 4, "n_head");
    CHECK(u32key(&o, "llama.attention.head_count_kv") == 2, "n_head_kv");
    CHECK(u32key(&o, "llama.rope.dimension_count") == 64, "rope dims");
    CHECK(u32key(&o, "llama.vocab_size") == 512, "vocab_size");
    CHECK(gguf_find(o.f, "llama.attention.key_length") == NULL, "no key_length for tiny-llama");
    const gguf_value *v = gguf_find(o.f, "llama.rope.freq_base");
    CHECK(v && v->type == GGUF_F32 && v->v.f64 == 10000.0, "freq_base");
    v = gguf_find(o.f, "llama.attention.layer_norm_rms_epsilon");
    CHECK(v && v->type == GGUF_F32 && (float)v->v.f64 == 1e-5f, "rms eps");
    v = gguf_find(o.f, "llama.block_count");
    CHECK(v && v->type == GGUF_U32, "u32 keys, as the converter writes them");

    /* the stand-in vocabulary */
    CHECK(strcmp(strkey(&o, "tokenizer.ggml.model"), "gpt2") == 0, "tokenizer model");
    CHECK(strcmp(strkey(&o, "tokenizer.ggml.pre"), "gpt-2") == 0, "pre");
    const gguf_value *toks = gguf_find(o.f, "tokenizer.ggml.tokens");
    const gguf_value *types = gguf_find(o.f, "tokenizer.ggml.token_type");
    const gguf_value *merges = gguf_find(o.f, "tokenizer.ggml.merges");
    CHECK(toks && toks->type == GGUF_ARRAY && toks->v.arr.elem_type == GGUF_STRING && toks->v.arr.count == 512, "tokens");
    CHECK(types && types->type == GGUF_ARRAY && types->v.arr.elem_type == GGUF_I32 && types->v.arr.count == 512,
          "token_type is an i32 array");
    CHECK(merges && merges->type == GGUF_ARRAY && merges->v.arr.elem_type == GGUF_STRING &&
              merges->v.arr.count == 512 - 256 - 3, "merges");
    if (toks && types && merges && toks->v.arr.count == 512 && merges->v.arr.count == 253) {
        const gguf_value *t = toks->v.arr.items;
        CHECK(strcmp(t[0].v.str.ptr, "!") == 0 && strcmp(t[93].v.str.ptr, "~") == 0, "GPT-2 byte order");
        CHECK(strcmp(t[188].v.str.ptr, "\xc4\x80") == 0, "byte 0 is U+0100");
        CHECK(strcmp(t[256].v.str.ptr, "\xc4\xa0\xc4\xa0") == 0, "first merge");
        CHECK(strcmp(t[509].v.str.ptr, "<|endoftext|>") == 0 && strcmp(t[511].v.str.ptr, "<|im_end|>") == 0, "specials");
        int ok = 1, distinct = 1;
        for (int m = 0; m < 253; m++) { /* every merge "a b" makes token 256 + m */
            char joined[32];
            const char *s = merges->v.arr.items[m].v.str.ptr, *sp = strchr(s, ' ');
            snprintf(joined, sizeof joined, "%.*s%s", (int)(sp - s), s, sp + 1);
            if (strcmp(joined, t[256 + m].v.str.ptr) != 0) ok = 0;
        }
        for (int i = 0; i < 512; i++)
            for (int j = i + 1; j < 512; j++)
                if (strcmp(t[i].v.str.ptr, t[j].v.str.ptr) == 0) distinct = 0;
        CHECK(ok, "merges and tokens agree");
        CHECK(distinct, "tokens are distinct");
        CHECK(types->v.arr.items[0].v.i64 == 1 && types->v.arr.items[508].v.i64 == 1 &&
                  types->v.arr.items[509].v.i64 == 3 && types->v.arr.items[511].v.i64 == 3,
              "token types: normal, control");
    }
    CHECK(u32key(&o, "tokenizer.ggml.bos_token_id") == 509, "bos");
    CHECK(u32key(&o, "tokenizer.ggml.eos_token_id") == 511, "eos");
    CHECK(gguf_find(o.f, "tokenizer.chat_template") != NULL, "chat template");

    /* tensors: 1 + 2 x 9 + 2 (output_norm, output: tiny-llama is untied) */
    CHECK(o.f->n_tensors == 21, "n_tensors %llu", (unsigned long long)o.f->n_tensors);
    check_tensor(&o, "token_embd.weight", 256, 512, LEAN_TYPE_F32);
    check_tensor(&o, "output.weight", 256, 512, LEAN_TYPE_F32);
    check_tensor(&o, "output_norm.weight", 256, 1, LEAN_TYPE_F32);
    check_tensor(&o, "blk.1.attn_norm.weight", 256, 1, LEAN_TYPE_F32);
    check_tensor(&o, "blk.1.attn_q.weight", 256, 256, LEAN_TYPE_F32);
    check_tensor(&o, "blk.1.attn_k.weight", 256, 128, LEAN_TYPE_F32);
    check_tensor(&o, "blk.1.attn_v.weight", 256, 128, LEAN_TYPE_F32);
    check_tensor(&o, "blk.1.attn_output.weight", 256, 256, LEAN_TYPE_F32);
    check_tensor(&o, "blk.1.ffn_norm.weight", 256, 1, LEAN_TYPE_F32);
    check_tensor(&o, "blk.1.ffn_gate.weight", 256, 512, LEAN_TYPE_F32);
    check_tensor(&o, "blk.1.ffn_up.weight", 256, 512, LEAN_TYPE_F32);
    check_tensor(&o, "blk.1.ffn_down.weight", 512, 256, LEAN_TYPE_F32);
    CHECK(gguf_find_tensor(o.f, "blk.0.attn_q.bias") == NULL && gguf_find_tensor(o.f, "rope_freqs.weight") == NULL,
          "no biases, no rope_freqs");

    /* values: matrices ~ N(0, 0.02^2), norms ~ 1 +- 0.05, distinct tensors differ */
    double mean, sd;
    const gguf_tensor_info *te = tensor(&o, "token_embd.weight"), *tq = tensor(&o, "blk.0.attn_q.weight");
    const gguf_tensor_info *tn = tensor(&o, "blk.0.attn_norm.weight");
    if (te && tq && tn) {
        float *x = tfloats(&o, te);
        mean_std(x, te->n_elems, &mean, &sd);
        CHECK(fabs(mean) < 0.001 && fabs(sd - 0.02) < 0.0005, "token_embd mean %g sd %g", mean, sd);
        float mx = 0;
        for (uint64_t i = 0; i < te->n_elems; i++) mx = fabsf(x[i]) > mx ? fabsf(x[i]) : mx;
        CHECK(mx <= 0.02f * 3.4642f && mx > 0.02f * 2.5f, "max |w| %g (Irwin-Hall bound 3.46 sd)", mx);
        free(x);
        x = tfloats(&o, tn);
        mean_std(x, tn->n_elems, &mean, &sd);
        CHECK(fabs(mean - 1) < 0.02 && fabs(sd - 0.05) < 0.01, "norm mean %g sd %g", mean, sd);
        free(x);
        CHECK(memcmp(tdata(&o, te), tdata(&o, tq), 256 * 4) != 0, "tensors differ");
    }
    close_gguf(&o);
}

/* qwen2 (biases, tied) and qwen3 (q/k norms, key_length) layouts. */
static void test_arch_layouts(void) {
    opened o;
    if (gen_open("tiny-qwen2", "f16", 1, 0, &o)) {
        CHECK(strcmp(strkey(&o, "general.architecture"), "qwen2") == 0, "arch");
        CHECK(u32key(&o, "general.file_type") == 1, "file_type f16");
        CHECK(o.f->n_tensors == 1 + 2 * 12 + 1, "n_tensors %llu", (unsigned long long)o.f->n_tensors);
        CHECK(gguf_find_tensor(o.f, "output.weight") == NULL, "tied");
        check_tensor(&o, "token_embd.weight", 256, 512, LEAN_TYPE_F16);
        check_tensor(&o, "blk.0.attn_q.bias", 256, 1, LEAN_TYPE_F32);
        check_tensor(&o, "blk.0.attn_k.bias", 128, 1, LEAN_TYPE_F32);
        check_tensor(&o, "blk.1.attn_v.bias", 128, 1, LEAN_TYPE_F32);
        check_tensor(&o, "blk.1.ffn_down.weight", 512, 256, LEAN_TYPE_F16);
        const gguf_value *v = gguf_find(o.f, "qwen2.rope.freq_base");
        CHECK(v && v->v.f64 == 1e6, "qwen2 freq_base");
        close_gguf(&o);
    }
    if (gen_open("tiny-qwen3", "bf16", 1, 0, &o)) {
        CHECK(strcmp(strkey(&o, "general.architecture"), "qwen3") == 0, "arch");
        CHECK(u32key(&o, "general.file_type") == 32, "file_type bf16");
        CHECK(u32key(&o, "qwen3.attention.key_length") == 64, "key_length");
        CHECK(u32key(&o, "qwen3.attention.value_length") == 64, "value_length");
        CHECK(o.f->n_tensors == 1 + 2 * 11 + 1, "n_tensors %llu", (unsigned long long)o.f->n_tensors);
        check_tensor(&o, "blk.0.attn_q_norm.weight", 64, 1, LEAN_TYPE_F32);
        check_tensor(&o, "blk.1.attn_k_norm.weight", 64, 1, LEAN_TYPE_F32);
        check_tensor(&o, "blk.1.attn_q.weight", 256, 256, LEAN_TYPE_BF16);
        check_tensor(&o, "token_embd.weight", 256, 512, LEAN_TYPE_BF16);
        CHECK(gguf_find_tensor(o.f, "blk.0.attn_q.bias") == NULL, "no biases");
        close_gguf(&o);
    }
}

/* Single-type recipes put every matrix in the type; Q4_K_M follows llama.cpp's rules. */
static void test_recipes(void) {
    opened o;
    static const struct { const char *recipe; uint32_t type, ftype; } single[] = {
        {"q8_0", LEAN_TYPE_Q8_0, 7}, {"q4_0", LEAN_TYPE_Q4_0, 2}, {"q4_1", LEAN_TYPE_Q4_1, 3},
        {"q5_0", LEAN_TYPE_Q5_0, 8}, {"q5_1", LEAN_TYPE_Q5_1, 9}, {"Q4_K", LEAN_TYPE_Q4_K, 14},
        {"q5_k", LEAN_TYPE_Q5_K, 16}, {"q6_k", LEAN_TYPE_Q6_K, 18}, {"q2_k", LEAN_TYPE_Q2_K, 10},
        {"Q3_K", LEAN_TYPE_Q3_K, 11},
    };
    for (size_t i = 0; i < sizeof single / sizeof single[0]; i++) {
        if (!gen_open("tiny-llama", single[i].recipe, 3, 0, &o)) continue;
        CHECK(u32key(&o, "general.file_type") == single[i].ftype, "%s file_type", single[i].recipe);
        int ok = 1;
        for (uint64_t k = 0; k < o.f->n_tensors; k++) {
            const gguf_tensor_info *t = &o.f->tensors[k];
            uint32_t want = t->n_dims == 2 ? single[i].type : LEAN_TYPE_F32;
            if (t->type != want) {
                ok = 0;
                CHECK(0, "%s: %s is %s", single[i].recipe, t->name.ptr, lean_type_name((int)t->type));
            }
        }
        CHECK(ok, "%s layout", single[i].recipe);
        close_gguf(&o);
    }

    /* Q4_K_M, untied (tiny-llama, 2 layers): output Q6_K; token_embd keeps Q4_K;
     * use_more_bits(i, 2) is true for layer 1 only -> attn_v / ffn_down Q6_K there. */
    if (gen_open("tiny-llama", "q4_k_m", 3, 0, &o)) {
        CHECK(u32key(&o, "general.file_type") == 15, "Q4_K_M file_type");
        check_tensor(&o, "token_embd.weight", 256, 512, LEAN_TYPE_Q4_K);
        check_tensor(&o, "output.weight", 256, 512, LEAN_TYPE_Q6_K);
        check_tensor(&o, "blk.0.attn_v.weight", 256, 128, LEAN_TYPE_Q4_K);
        check_tensor(&o, "blk.1.attn_v.weight", 256, 128, LEAN_TYPE_Q6_K);
        check_tensor(&o, "blk.0.ffn_down.weight", 512, 256, LEAN_TYPE_Q4_K);
        check_tensor(&o, "blk.1.ffn_down.weight", 512, 256, LEAN_TYPE_Q6_K);
        check_tensor(&o, "blk.1.attn_q.weight", 256, 256, LEAN_TYPE_Q4_K);
        check_tensor(&o, "blk.1.attn_k.weight", 256, 128, LEAN_TYPE_Q4_K);
        check_tensor(&o, "blk.1.attn_output.weight", 256, 256, LEAN_TYPE_Q4_K);
        check_tensor(&o, "blk.1.ffn_gate.weight", 256, 512, LEAN_TYPE_Q4_K);
        check_tensor(&o, "blk.1.ffn_up.weight", 256, 512, LEAN_TYPE_Q4_K);
        check_tensor(&o, "blk.1.ffn_norm.weight", 256, 1, LEAN_TYPE_F32);
        close_gguf(&o);
    }

    /* Q4_K_M, tied (tiny-qwen2): token_embd is the output -> Q6_K; biases F32. With 8
     * layers use_more_bits(i, 8) = i < 1 || i >= 7 || (i - 1) % 3 == 2: layers 0, 3, 6, 7. */
    if (gen_open("tiny-qwen2", "q4_k_m", 3, 8, &o)) {
        check_tensor(&o, "token_embd.weight", 256, 512, LEAN_TYPE_Q6_K);
        check_tensor(&o, "blk.0.attn_q.bias", 256, 1, LEAN_TYPE_F32);
        for (int il = 0; il < 8; il++) {
            int more = il < 1 || il >= 7 || (il - 1) % 3 == 2;
            char nm[64];
            snprintf(nm, sizeof nm, "blk.%d.attn_v.weight", il);
            check_tensor(&o, nm, 256, 128, more ? LEAN_TYPE_Q6_K : LEAN_TYPE_Q4_K);
            snprintf(nm, sizeof nm, "blk.%d.ffn_down.weight", il);
            check_tensor(&o, nm, 512, 256, more ? LEAN_TYPE_Q6_K : LEAN_TYPE_Q4_K);
        }
        CHECK(u32key(&o, "qwen2.block_count") == 8, "n_layer 8");
        close_gguf(&o);
    }
    if (gen_open("tiny-qwen3", "q5_k_m", 3, 0, &o)) {
        CHECK(u32key(&o, "general.file_type") == 17, "Q5_K_M file_type");
        check_tensor(&o, "token_embd.weight", 256, 512, LEAN_TYPE_Q6_K);
        check_tensor(&o, "blk.0.attn_v.weight", 256, 128, LEAN_TYPE_Q5_K);
        check_tensor(&o, "blk.1.attn_v.weight", 256, 128, LEAN_TYPE_Q6_K);
        check_tensor(&o, "blk.0.attn_q.weight", 256, 256, LEAN_TYPE_Q5_K);
        close_gguf(&o);
    }
}

/* The same seed gives the same bytes; another seed, other bytes; n_layer shortens. */
static void test_determinism(void) {
    char a[256], b[256], c[256];
    lean_error err;
    test_tmp_path(a, sizeof a, "det_a.gguf");
    test_tmp_path(b, sizeof b, "det_b.gguf");
    test_tmp_path(c, sizeof c, "det_c.gguf");
    CHECK(gen("tiny-qwen3", "q4_k_m", 42, 0, NULL, a, &err) == LEAN_OK, "%s", err.msg);
    CHECK(gen("tiny-qwen3", "q4_k_m", 42, 0, NULL, b, &err) == LEAN_OK, "%s", err.msg);
    CHECK(gen("tiny-qwen3", "q4_k_m", 43, 0, NULL, c, &err) == LEAN_OK, "%s", err.msg);
    CHECK(same_bytes(a, b), "same seed, same bytes");
    CHECK(!same_bytes(a, c), "another seed, other bytes");
    opened oa, oc;
    if (open_gguf(a, &oa)) {
        if (open_gguf(c, &oc)) {
            const gguf_tensor_info *ta = tensor(&oa, "blk.0.ffn_up.weight"), *tc = tensor(&oc, "blk.0.ffn_up.weight");
            if (ta && tc)
                CHECK(ta->offset == tc->offset && memcmp(tdata(&oa, ta), tdata(&oc, tc), (size_t)ta->n_bytes) != 0,
                      "seeds give other weights");
            close_gguf(&oc);
        }
        close_gguf(&oa);
    }
    /* fewer layers: the first layers' weights are the same as the full model's */
    CHECK(gen("tiny-qwen3", "q4_k_m", 42, 1, NULL, c, &err) == LEAN_OK, "%s", err.msg);
    if (open_gguf(a, &oa)) {
        if (open_gguf(c, &oc)) {
            CHECK(u32key(&oc, "qwen3.block_count") == 1, "n_layer 1");
            CHECK(gguf_find_tensor(oc.f, "blk.1.attn_q.weight") == NULL, "one layer only");
            const gguf_tensor_info *ta = tensor(&oa, "blk.0.ffn_up.weight"), *tc = tensor(&oc, "blk.0.ffn_up.weight");
            if (ta && tc)
                CHECK(ta->type == tc->type && memcmp(tdata(&oa, ta), tdata(&oc, tc), (size_t)ta->n_bytes) == 0,
                      "a weight depends on (seed, name) only");
            close_gguf(&oc);
        }
        close_gguf(&oa);
    }
    unlink(a);
    unlink(b);
    unlink(c);
}

/* lean_quantize_file: f32 -> q8_0 within Q8_0's error bound, 1-D tensors kept, keys
 * updated; q8_0 -> f32 exact; and f32 -> R gives exactly the generator's file for R. */
/* The generator's progress: one call per tensor written, in order, ending at their count. */
static void test_gen_progress(void) {
    char path[256];
    lean_error err;
    test_tmp_path(path, sizeof path, "progress.gguf");
    test_progress pr = {0};
    lean_gen_params p = {.preset = "tiny-qwen3", .recipe = "q4_0", .seed = 3, .progress = test_progress_fn,
                         .progress_user = &pr};
    CHECK(lean_generate_model(&p, path, &err) == LEAN_OK, "%s", err.msg);
    opened o;
    if (open_gguf(path, &o)) {
        CHECK(!pr.broken && pr.calls == o.f->n_tensors && pr.done == o.f->n_tensors && pr.total == o.f->n_tensors,
              "gen progress: %llu calls, %llu of %llu, %llu tensors", (unsigned long long)pr.calls,
              (unsigned long long)pr.done, (unsigned long long)pr.total, (unsigned long long)o.f->n_tensors);
        close_gguf(&o);
    }
    unlink(path);
}

static void test_quantize_file(void) {
    char f32[256], q8[256], back[256], direct[256], viaq[256];
    lean_error err;
    test_tmp_path(f32, sizeof f32, "qf_f32.gguf");
    test_tmp_path(q8, sizeof q8, "qf_q8.gguf");
    test_tmp_path(back, sizeof back, "qf_back.gguf");
    test_tmp_path(direct, sizeof direct, "qf_direct.gguf");
    test_tmp_path(viaq, sizeof viaq, "qf_viaq.gguf");
    CHECK(gen("tiny-llama", "f32", 5, 0, NULL, f32, &err) == LEAN_OK, "%s", err.msg);
    test_progress qp = {0};
    const lean_quantize_params qparams = {.recipe = "q8_0", .progress = test_progress_fn, .progress_user = &qp};
    CHECK(lean_quantize_file_params(f32, q8, &qparams, &err) == LEAN_OK, "%s", err.msg);
    CHECK(lean_quantize_file(q8, back, "f32", &err) == LEAN_OK, "%s", err.msg);
    opened a, b, c;
    if (open_gguf(f32, &a)) {
        if (open_gguf(q8, &b)) {
            CHECK(b.f->n_tensors == a.f->n_tensors && b.f->n_kv == a.f->n_kv, "same tensors and keys");
            CHECK(!qp.broken && qp.calls == b.f->n_tensors && qp.done == b.f->n_tensors && qp.total == b.f->n_tensors,
                  "quantize progress: %llu calls, %llu of %llu tensors", (unsigned long long)qp.calls,
                  (unsigned long long)qp.done, (unsigned long long)qp.total);
            CHECK(u32key(&b, "general.file_type") == 7, "file_type updated");
            CHECK(strcmp(strkey(&b, "lean.generator.recipe"), "q8_0") == 0, "recipe key updated");
            CHECK(strcmp(strkey(&b, "general.name"), strkey(&a, "general.name")) == 0, "other keys copied");
            const gguf_value *ta = gguf_find(a.f, "tokenizer.ggml.merges"), *tb = gguf_find(b.f, "tokenizer.ggml.merges");
            CHECK(ta && tb && tb->v.arr.count == ta->v.arr.count &&
                      strcmp(tb->v.arr.items[7].v.str.ptr, ta->v.arr.items[7].v.str.ptr) == 0,
                  "arrays copied");
            for (uint64_t k = 0; k < a.f->n_tensors; k++) {
                const gguf_tensor_info *t0 = &a.f->tensors[k], *t1 = gguf_find_tensor(b.f, t0->name.ptr);
                if (!t1) {
                    CHECK(0, "%s missing", t0->name.ptr);
                    continue;
                }
                CHECK(t1->ne[0] == t0->ne[0] && t1->ne[1] == t0->ne[1], "%s shape", t0->name.ptr);
                if (t0->n_dims == 1) {
                    CHECK(t1->type == LEAN_TYPE_F32 && memcmp(tdata(&a, t0), tdata(&b, t1), (size_t)t0->n_bytes) == 0,
                          "%s kept", t0->name.ptr);
                    continue;
                }
                CHECK(t1->type == LEAN_TYPE_Q8_0, "%s is q8_0", t0->name.ptr);
                float *x = tfloats(&a, t0), *y = tfloats(&b, t1);
                int ok = 1;
                for (uint64_t blk = 0; blk < t0->n_elems / 32; blk++) {
                    float amax = 0;
                    for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(x[blk * 32 + i]));
                    float tol = amax / 127.0f * 0.6f + 1e-12f; /* half a step, + the f16 scale's rounding */
                    for (int i = 0; i < 32; i++)
                        if (fabsf(x[blk * 32 + i] - y[blk * 32 + i]) > tol) ok = 0;
                }
                CHECK(ok, "%s: every element within Q8_0's bound", t0->name.ptr);
                free(x);
                free(y);
            }
            if (open_gguf(back, &c)) {
                const gguf_tensor_info *tq = tensor(&b, "blk.1.ffn_down.weight"), *tf = tensor(&c, "blk.1.ffn_down.weight");
                if (tq && tf) {
                    float *y = tfloats(&b, tq);
                    CHECK(tf->type == LEAN_TYPE_F32 && memcmp(y, tdata(&c, tf), (size_t)tf->n_bytes) == 0,
                          "q8_0 -> f32 is the exact dequantization");
                    free(y);
                }
                CHECK(u32key(&c, "general.file_type") == 0, "file_type f32");
                close_gguf(&c);
            }
            close_gguf(&b);
        }
        close_gguf(&a);
    }

    /* quantize(generate(f32), R) == generate(R), byte for byte */
    static const struct { const char *preset, *recipe; } same[] = {
        {"tiny-llama", "q4_k_m"}, {"tiny-qwen2", "q4_k_m"}, {"tiny-qwen3", "q5_0"}, {"tiny-qwen2", "bf16"},
        {"tiny-llama", "q2_k"}, {"tiny-qwen3", "q3_k"},
    };
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
        CHECK(gen(same[i].preset, "f32", 11, 0, NULL, f32, &err) == LEAN_OK, "%s", err.msg);
        CHECK(gen(same[i].preset, same[i].recipe, 11, 0, NULL, direct, &err) == LEAN_OK, "%s", err.msg);
        CHECK(lean_quantize_file(f32, viaq, same[i].recipe, &err) == LEAN_OK, "%s", err.msg);
        CHECK(same_bytes(direct, viaq), "%s %s: quantize_file(f32) == generate", same[i].preset, same[i].recipe);
    }
    /* re-quantizing to the recipe a file already has changes nothing */
    CHECK(lean_quantize_file(direct, viaq, same[sizeof same / sizeof same[0] - 1].recipe, &err) == LEAN_OK, "%s", err.msg);
    CHECK(same_bytes(direct, viaq), "same recipe: same bytes");

    CHECK(lean_quantize_file(f32, f32, "q8_0", &err) == LEAN_ERR_ARG, "in == out refused");
    CHECK(same_bytes(direct, viaq), "nothing written over");
    unlink(f32);
    unlink(q8);
    unlink(back);
    unlink(direct);
    unlink(viaq);
}

/* A vocabulary file: its tokenizer.* keys are copied; a short token list is padded with
 * [PAD<i>] tokens of type UNUSED up to the preset's rows; a long one sets n_vocab. */
static int write_vocab(const char *path, int n_tokens, int with_tokens) {
    gguf_writer *w = gguf_writer_new();
    char **toks = malloc(sizeof(char *) * (size_t)n_tokens);
    int32_t *types = malloc(sizeof(int32_t) * (size_t)n_tokens);
    for (int i = 0; i < n_tokens; i++) {
        toks[i] = malloc(16);
        snprintf(toks[i], 16, i == 0 ? "<s>" : "t%d", i);
        types[i] = i == 0 ? 3 : 1;
    }
    const char *merges[] = {"t 1", "t 2"};
    gguf_w_str(w, "general.architecture", "llama");
    gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
    gguf_w_str(w, "tokenizer.ggml.pre", "qwen2");
    if (with_tokens) gguf_w_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)toks, (uint64_t)n_tokens);
    gguf_w_arr(w, "tokenizer.ggml.token_type", GGUF_I32, types, (uint64_t)n_tokens);
    gguf_w_arr_str(w, "tokenizer.ggml.merges", merges, 2);
    gguf_w_u32(w, "tokenizer.ggml.bos_token_id", 0);
    gguf_w_bool(w, "tokenizer.ggml.add_bos_token", true);
    gguf_w_str(w, "tokenizer.chat_template", "{{ messages }}");
    lean_error err;
    lean_status st = gguf_writer_write(w, path, &err);
    CHECK(st == LEAN_OK, "vocab: %s", err.msg);
    gguf_writer_free(w);
    for (int i = 0; i < n_tokens; i++) free(toks[i]);
    free(toks);
    free(types);
    return st == LEAN_OK;
}

static void test_vocab_file(void) {
    char vocab[256], path[256];
    lean_error err;
    opened o;
    test_tmp_path(vocab, sizeof vocab, "vocab.gguf");
    test_tmp_path(path, sizeof path, "withvocab.gguf");
    if (!write_vocab(vocab, 300, 1)) return;
    CHECK(gen("tiny-llama", "q8_0", 1, 0, vocab, path, &err) == LEAN_OK, "%s", err.msg);
    if (open_gguf(path, &o)) {
        const gguf_value *toks = gguf_find(o.f, "tokenizer.ggml.tokens");
        const gguf_value *types = gguf_find(o.f, "tokenizer.ggml.token_type");
        CHECK(toks && toks->v.arr.count == 512 && types && types->v.arr.count == 512, "padded to 512");
        if (toks && types && toks->v.arr.count == 512 && types->v.arr.count == 512) {
            CHECK(strcmp(toks->v.arr.items[0].v.str.ptr, "<s>") == 0 && strcmp(toks->v.arr.items[299].v.str.ptr, "t299") == 0,
                  "tokens copied");
            CHECK(strcmp(toks->v.arr.items[300].v.str.ptr, "[PAD300]") == 0 &&
                      strcmp(toks->v.arr.items[511].v.str.ptr, "[PAD511]") == 0,
                  "pad tokens");
            CHECK(types->v.arr.items[0].v.i64 == 3 && types->v.arr.items[299].v.i64 == 1 &&
                      types->v.arr.items[300].v.i64 == 5 && types->v.arr.items[511].v.i64 == 5,
                  "pad tokens are UNUSED");
        }
        CHECK(strcmp(strkey(&o, "tokenizer.ggml.pre"), "qwen2") == 0, "pre copied");
        CHECK(strcmp(strkey(&o, "tokenizer.chat_template"), "{{ messages }}") == 0, "template copied");
        const gguf_value *m = gguf_find(o.f, "tokenizer.ggml.merges");
        CHECK(m && m->v.arr.count == 2, "merges copied");
        const gguf_value *ab = gguf_find(o.f, "tokenizer.ggml.add_bos_token");
        CHECK(ab && ab->type == GGUF_BOOL && ab->v.u64 == 1, "bool copied");
        CHECK(gguf_find(o.f, "general.architecture") && strcmp(strkey(&o, "general.architecture"), "llama") == 0,
              "only tokenizer.* keys come from the vocab");
        CHECK(u32key(&o, "llama.vocab_size") == 512, "vocab_size");
        check_tensor(&o, "token_embd.weight", 256, 512, LEAN_TYPE_Q8_0);
        close_gguf(&o);
    }
    /* more tokens than the preset has rows: the vocabulary decides */
    if (write_vocab(vocab, 700, 1)) {
        CHECK(gen("tiny-qwen2", "f16", 1, 0, vocab, path, &err) == LEAN_OK, "%s", err.msg);
        if (open_gguf(path, &o)) {
            CHECK(u32key(&o, "qwen2.vocab_size") == 700, "vocab_size 700");
            check_tensor(&o, "token_embd.weight", 256, 700, LEAN_TYPE_F16);
            const gguf_value *toks = gguf_find(o.f, "tokenizer.ggml.tokens");
            CHECK(toks && toks->v.arr.count == 700, "700 tokens");
            close_gguf(&o);
        }
    }
    /* a file without tokens is no vocabulary */
    if (write_vocab(vocab, 10, 0)) {
        CHECK(gen("tiny-qwen2", "f16", 1, 0, vocab, path, &err) == LEAN_ERR_MODEL, "no tokens: %s", err.msg);
        CHECK(strstr(err.msg, "tokenizer.ggml.tokens") != NULL, "message names the key: %s", err.msg);
    }
    unlink(vocab);
    unlink(path);
}

static void test_bad_params(void) {
    char path[256], bad[300];
    lean_error err;
    test_tmp_path(path, sizeof path, "bad.gguf");
    lean_gen_params p = {.preset = "tiny-llama", .recipe = "q8_0", .seed = 1};
    CHECK(lean_generate_model(NULL, path, &err) == LEAN_ERR_ARG, "NULL params");
    CHECK(lean_generate_model(&p, NULL, &err) == LEAN_ERR_ARG, "NULL path");
    CHECK(gen("gpt-5", "q8_0", 1, 0, NULL, path, &err) == LEAN_ERR_ARG && strstr(err.msg, "gpt-5") &&
              strstr(err.msg, "smollm2-135m"),
          "unknown preset: %s", err.msg);
    CHECK(gen(NULL, "q8_0", 1, 0, NULL, path, &err) == LEAN_ERR_ARG, "no preset");
    CHECK(gen("tiny-llama", "q3_k_m", 1, 0, NULL, path, &err) == LEAN_ERR_ARG && strstr(err.msg, "q3_k_m") &&
              strstr(err.msg, "q4_k_m"),
          "unknown recipe: %s", err.msg);
    CHECK(gen("tiny-llama", NULL, 1, 0, NULL, path, &err) == LEAN_ERR_ARG, "no recipe");
    CHECK(gen("tiny-llama", "q8_0", 1, -1, NULL, path, &err) == LEAN_ERR_ARG && strstr(err.msg, "-1"),
          "n_layer -1: %s", err.msg);
    CHECK(gen("tiny-llama", "q8_0", 1, 100000, NULL, path, &err) == LEAN_ERR_ARG && strstr(err.msg, "100000"),
          "n_layer 100000: %s", err.msg);
    snprintf(bad, sizeof bad, "%s.no_such_dir/model.gguf", path);
    CHECK(gen("tiny-llama", "q8_0", 1, 0, NULL, bad, &err) == LEAN_ERR_IO && strstr(err.msg, "no_such_dir"),
          "unwritable: %s", err.msg);
    CHECK(access(path, F_OK) != 0, "nothing written on failure");
    CHECK(gen("tiny-llama", "q8_0", 1, 0, bad, path, &err) == LEAN_ERR_IO, "missing vocab: %s", err.msg);
    CHECK(access(path, F_OK) != 0, "nothing written on failure");

    CHECK(lean_quantize_file(bad, path, "q8_0", &err) == LEAN_ERR_IO, "missing input: %s", err.msg);
    CHECK(lean_quantize_file(NULL, path, "q8_0", &err) == LEAN_ERR_ARG, "NULL input");
    FILE *fp = fopen(path, "wb");
    if (fp) {
        fputs("not a gguf file at all, just some text", fp);
        fclose(fp);
    }
    char out[256];
    test_tmp_path(out, sizeof out, "bad_out.gguf");
    CHECK(lean_quantize_file(path, out, "q8_0", &err) == LEAN_ERR_FORMAT, "not GGUF: %s", err.msg);
    CHECK(lean_quantize_file(path, out, "q9", &err) == LEAN_ERR_ARG, "bad recipe: %s", err.msg);
    CHECK(access(out, F_OK) != 0, "nothing written on failure");
    unlink(path);
}

/* Every allocation failing in turn: a clean LEAN_ERR_NOMEM (or success), nothing leaked
 * (ASan checks), no file left behind. */
static void test_alloc_failures(void) {
    char path[256], src[256];
    lean_error err;
    test_tmp_path(path, sizeof path, "oom.gguf");
    test_tmp_path(src, sizeof src, "oom_src.gguf");
    CHECK(gen("tiny-qwen2", "q4_k_m", 1, 1, NULL, src, &err) == LEAN_OK, "%s", err.msg);
    int failures = 0, ok_runs = 0, other = 0;
    for (uint64_t n = 1; n < 200; n++) {
        lean_alloc_fail_at(n, false);
        lean_status st = gen("tiny-qwen2", "q4_k_m", 1, 1, NULL, path, &err);
        lean_alloc_fail_at(0, false);
        if (st == LEAN_ERR_NOMEM) failures++;
        else if (st == LEAN_OK) ok_runs++;
        else other++;
        if (st == LEAN_OK) break;
        CHECK(access(path, F_OK) != 0, "n=%llu: no file after a failure", (unsigned long long)n);
    }
    CHECK(failures > 0 && ok_runs == 1 && other == 0, "generate: %d NOMEM, %d ok, %d other", failures, ok_runs, other);
    CHECK(same_bytes(src, path), "the run that succeeded wrote the right file");
    unlink(path);
    failures = ok_runs = other = 0;
    for (uint64_t n = 1; n < 100000; n++) {
        lean_alloc_fail_at(n, false);
        lean_status st = lean_quantize_file(src, path, "q8_0", &err);
        lean_alloc_fail_at(0, false);
        if (st == LEAN_ERR_NOMEM) failures++;
        else if (st == LEAN_OK) ok_runs++;
        else other++;
        if (st == LEAN_OK) break;
    }
    CHECK(failures > 0 && ok_runs == 1 && other == 0, "quantize: %d NOMEM, %d ok, %d other", failures, ok_runs, other);
    unlink(path);
    unlink(src);
}

/* LEAN_SLOW_TESTS: every real preset with one layer. */
static void test_real_presets(void) {
    static const struct {
        const char *name, *arch;
        uint32_t n_embd, n_head, n_kv, head_dim, n_ff, n_vocab, n_ctx;
        double theta;
        int rope_freqs, head_keys;
    } P[] = {
        {"smollm2-135m", "llama", 576, 9, 3, 64, 1536, 49152, 8192, 1e5, 0, 0},
        {"smollm2-360m", "llama", 960, 15, 5, 64, 2560, 49152, 8192, 1e5, 0, 0},
        {"smollm2-1.7b", "llama", 2048, 32, 32, 64, 8192, 49152, 8192, 1.3e5, 0, 0},
        {"qwen2.5-0.5b", "qwen2", 896, 14, 2, 64, 4864, 151936, 32768, 1e6, 0, 0},
        {"qwen3-0.6b", "qwen3", 1024, 16, 8, 128, 3072, 151936, 40960, 1e6, 0, 1},
        {"llama-3.2-1b", "llama", 2048, 32, 8, 64, 8192, 128256, 131072, 5e5, 1, 1},
    };
    char key[128];
    opened o;
    for (size_t i = 0; i < sizeof P / sizeof P[0]; i++) {
        if (!gen_open(P[i].name, "q4_k_m", 1, 1, &o)) continue;
#define KEY(s) (snprintf(key, sizeof key, "%s.%s", P[i].arch, s), key)
        CHECK(strcmp(strkey(&o, "general.architecture"), P[i].arch) == 0, "%s arch", P[i].name);
        CHECK(u32key(&o, KEY("embedding_length")) == P[i].n_embd, "%s n_embd", P[i].name);
        CHECK(u32key(&o, KEY("attention.head_count")) == P[i].n_head, "%s n_head", P[i].name);
        CHECK(u32key(&o, KEY("attention.head_count_kv")) == P[i].n_kv, "%s n_kv", P[i].name);
        CHECK(u32key(&o, KEY("feed_forward_length")) == P[i].n_ff, "%s n_ff", P[i].name);
        CHECK(u32key(&o, KEY("vocab_size")) == P[i].n_vocab, "%s n_vocab", P[i].name);
        CHECK(u32key(&o, KEY("context_length")) == P[i].n_ctx, "%s n_ctx", P[i].name);
        CHECK(u32key(&o, KEY("rope.dimension_count")) == P[i].head_dim, "%s head_dim", P[i].name);
        CHECK((gguf_find(o.f, KEY("attention.key_length")) != NULL) == P[i].head_keys, "%s key_length", P[i].name);
        const gguf_value *v = gguf_find(o.f, KEY("rope.freq_base"));
        CHECK(v && v->v.f64 == (double)(float)P[i].theta, "%s theta", P[i].name);
#undef KEY
        uint32_t q = P[i].n_head * P[i].head_dim, kv = P[i].n_kv * P[i].head_dim;
        /* Q4_K_M with rows not a multiple of 256 falls back like llama.cpp */
        int odd = P[i].n_embd % 256 != 0;
        check_tensor(&o, "token_embd.weight", P[i].n_embd, P[i].n_vocab, odd ? LEAN_TYPE_Q8_0 : LEAN_TYPE_Q6_K);
        check_tensor(&o, "blk.0.attn_q.weight", P[i].n_embd, q, odd ? LEAN_TYPE_Q5_0 : LEAN_TYPE_Q4_K);
        check_tensor(&o, "blk.0.attn_v.weight", P[i].n_embd, kv, odd ? LEAN_TYPE_Q8_0 : LEAN_TYPE_Q6_K);
        check_tensor(&o, "blk.0.attn_output.weight", q, P[i].n_embd, q % 256 ? LEAN_TYPE_Q5_0 : LEAN_TYPE_Q4_K);
        check_tensor(&o, "blk.0.ffn_down.weight", P[i].n_ff, P[i].n_embd, LEAN_TYPE_Q6_K);
        CHECK(gguf_find_tensor(o.f, "output.weight") == NULL, "%s tied", P[i].name);
        const gguf_tensor_info *rf = gguf_find_tensor(o.f, "rope_freqs.weight");
        CHECK((rf != NULL) == P[i].rope_freqs, "%s rope_freqs", P[i].name);
        if (rf) {
            /* convert_hf_to_gguf.py's values for Llama 3.2 (theta 5e5, head_dim 64, factor 32,
             * low 1, high 4, 8192): wavelength 2 pi 5e5^(i/32) is < 2048 for i <= 14 (factor
             * 1), > 8192 for i >= 18 (factor 32), and smooth for i = 15..17. */
            const float *f = (const float *)tdata(&o, rf);
            CHECK(rf->ne[0] == 32 && f[0] == 1.0f && f[14] == 1.0f && f[18] == 32.0f && f[31] == 32.0f,
                  "rope_freqs ends: %g %g %g %g", f[0], f[14], f[18], f[31]);
            CHECK(f[15] > 1.0f && f[15] < f[16] && f[16] < f[17] && f[17] < 32.0f, "rope_freqs smooth: %g %g %g",
                  f[15], f[16], f[17]);
        }
        close_gguf(&o);
    }
    /* Q3_K (and Q2_K) on rows of 576 falls back to Q4_0, as llama.cpp's tensor_type_fallback */
    if (gen_open("smollm2-135m", "q3_k", 1, 1, &o)) {
        check_tensor(&o, "token_embd.weight", 576, 49152, LEAN_TYPE_Q4_0);
        check_tensor(&o, "blk.0.ffn_down.weight", 1536, 576, LEAN_TYPE_Q3_K);
        close_gguf(&o);
    }
}

int main(void) {
    test_tiny_llama_f32();
    test_arch_layouts();
    test_recipes();
    test_determinism();
    test_gen_progress();
    test_quantize_file();
    test_vocab_file();
    test_bad_params();
    test_alloc_failures();
    const char *slow = getenv("LEAN_SLOW_TESTS");
    if (slow && *slow && strcmp(slow, "0") != 0) test_real_presets();
    return test_finish("test_generate");
}
