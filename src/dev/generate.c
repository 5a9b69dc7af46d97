/* generate.c — model files: GGUF models with seeded random weights at the real shapes
 * of an architecture preset (lean_generate_model), and re-quantization of a GGUF file
 * to another recipe (lean_quantize_file). Tests and benchmarks use both.
 *
 * What it writes is standard GGUF laid out as llama.cpp's converter and quantizer lay
 * it out (same key names and key types, same tensor names and shapes, same per-tensor
 * types for Q4_K_M / Q5_K_M), so llama.cpp and other engines run the same file. Checked
 * against llama.cpp itself: it loads and runs every preset, and its llama_model_quantize
 * of a generated F32 file gives tensors byte-identical to what this file writes for
 * Q4_K_M and Q5_K_M (types and data), and for Q8_0, Q6_K, F16, BF16 (Q2_K and Q3_K: the
 * quantizers are held to ggml's bytes by test_formats, the files were not run there).
 *
 * Memory: nothing big is ever held. The header (keys, tensor infos) is built in a
 * gguf_writer (a few MB with a 150k-token vocabulary), every tensor declared without
 * data; gguf_writer_write_stream then has each one produced a row at a time — random
 * floats, quantized — straight into the file. A 1.7B-parameter model needs two row
 * buffers, not gigabytes.
 *
 * What it does not do: real weights, imatrix quantization, 3-D (expert) tensors in the
 * generator, or any type choice other than llama.cpp's rules transcribed in section 2.
 *
 * Sections:
 *   1. presets         the architectures' shapes, each with where it comes from
 *   2. recipes         the type each tensor gets (one type, or llama.cpp's _K_M mixes)
 *   3. random numbers  counter-based, integer-only: identical bytes on every platform
 *   4. vocabularies    the built-in stand-in, or tokenizer.* keys copied from a file
 *   5. streaming the tensors: how each tensor's bytes are made, row by row
 *   6. lean_generate_model
 *   7. lean_quantize_file
 */
#include "dev/lean_dev.h"
#include "core/common.h"
#include "core/formats.h"
#include "dev/gguf_writer.h"
#include "dev/quantize.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

/* ================================================================ 1. presets
 *
 * Shapes are the Hugging Face config.json values of each model (hidden_size,
 * num_hidden_layers, num_attention_heads, num_key_value_heads, head_dim,
 * intermediate_size, vocab_size, max_position_embeddings, rope_theta, rms_norm_eps,
 * tie_word_embeddings, rope_scaling):
 *
 *   smollm2-135m  HuggingFaceTB/SmolLM2-135M   576, 30 L,  9 h,  3 kv, ff 1536,  49152 voc,
 *                 ctx 8192, theta 1e5, eps 1e-5, tied
 *   smollm2-360m  HuggingFaceTB/SmolLM2-360M   960, 32 L, 15 h,  5 kv, ff 2560,  49152 voc,
 *                 ctx 8192, theta 1e5, eps 1e-5, tied
 *   smollm2-1.7b  HuggingFaceTB/SmolLM2-1.7B  2048, 24 L, 32 h, 32 kv, ff 8192,  49152 voc,
 *                 ctx 8192, theta 1.3e5, eps 1e-5, tied
 *   qwen2.5-0.5b  Qwen/Qwen2.5-0.5B            896, 24 L, 14 h,  2 kv, ff 4864, 151936 voc,
 *                 ctx 32768, theta 1e6, eps 1e-6, tied, q/k/v biases (Qwen2 attention)
 *   qwen3-0.6b    Qwen/Qwen3-0.6B             1024, 28 L, 16 h,  8 kv, head_dim 128,
 *                 ff 3072, 151936 voc, ctx 40960, theta 1e6, eps 1e-6, tied, q/k RMSNorm
 *   llama-3.2-1b  meta-llama/Llama-3.2-1B     2048, 16 L, 32 h,  8 kv, head_dim 64,
 *                 ff 8192, 128256 voc, ctx 131072, theta 5e5, eps 1e-5, tied,
 *                 rope_scaling llama3 (factor 32, low 1, high 4, original ctx 8192)
 *
 * The tiny-* presets are lean's own test shapes: every row length a multiple of 256 so
 * every K-quant applies. tiny-llama is untied (it has output.weight) so the untied path
 * is covered too; tiny-qwen2 and tiny-qwen3 are tied like their real models.
 */
typedef struct gen_preset {
    const char *name;
    const char *arch;          /* general.architecture */
    int32_t n_vocab;           /* embedding rows */
    int32_t n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_ctx;
    float rope_base, rms_eps;
    bool tied;                 /* no output.weight: the output reuses token_embd */
    bool head_dim_keys;        /* write attention.key_length / value_length (the HF config
                                  has head_dim, so llama.cpp's converter writes them) */
    float llama3_factor;       /* > 0: llama3 rope scaling, written as rope_freqs.weight */
    float llama3_low, llama3_high;
    int32_t llama3_orig_ctx;
} gen_preset;

static const gen_preset presets[] = {
    {"smollm2-135m", "llama", 49152, 576, 30, 9, 3, 64, 1536, 8192, 100000.0f, 1e-5f, true, false, 0, 0, 0, 0},
    {"smollm2-360m", "llama", 49152, 960, 32, 15, 5, 64, 2560, 8192, 100000.0f, 1e-5f, true, false, 0, 0, 0, 0},
    {"smollm2-1.7b", "llama", 49152, 2048, 24, 32, 32, 64, 8192, 8192, 130000.0f, 1e-5f, true, false, 0, 0, 0, 0},
    {"qwen2.5-0.5b", "qwen2", 151936, 896, 24, 14, 2, 64, 4864, 32768, 1000000.0f, 1e-6f, true, false, 0, 0, 0, 0},
    {"qwen3-0.6b", "qwen3", 151936, 1024, 28, 16, 8, 128, 3072, 40960, 1000000.0f, 1e-6f, true, true, 0, 0, 0, 0},
    {"llama-3.2-1b", "llama", 128256, 2048, 16, 32, 8, 64, 8192, 131072, 500000.0f, 1e-5f, true, true,
     32.0f, 1.0f, 4.0f, 8192},
    {"tiny-llama", "llama", 512, 256, 2, 4, 2, 64, 512, 2048, 10000.0f, 1e-5f, false, false, 0, 0, 0, 0},
    {"tiny-qwen2", "qwen2", 512, 256, 2, 4, 2, 64, 512, 2048, 1000000.0f, 1e-6f, true, false, 0, 0, 0, 0},
    {"tiny-qwen3", "qwen3", 512, 256, 2, 4, 2, 64, 512, 2048, 1000000.0f, 1e-6f, true, true, 0, 0, 0, 0},
};
#define N_PRESETS (sizeof presets / sizeof presets[0])
#define GEN_MAX_LAYERS 256 /* lean_gen_params.n_layer may ask for 1..this many */

static const gen_preset *find_preset(const char *name) {
    for (size_t i = 0; i < N_PRESETS; i++)
        if (strcmp(presets[i].name, name) == 0) return &presets[i];
    return NULL;
}

/* ================================================================ 2. recipes
 *
 * A recipe is one type for every 2-D weight matrix (token_embd and output included), or
 * a llama.cpp mix. Norms, biases and rope_freqs (1-D) are always F32. file_type is the
 * llama_ftype value llama.cpp writes as general.file_type; llama.cpp has no "all Q4_K"
 * ftype, so the single K types carry the _S value (Q2_K its own), as `llama-quantize --pure`
 * files do. llama.cpp's Q2_K_S and Q3_K_S/M/L mixes are not among the recipes.
 *
 * The _K_M mixes follow llama.cpp src/llama-quant.cpp, llama_tensor_get_type_impl:
 *   - output.weight, and token_embd.weight when tied: Q6_K, or Q8_0 when the row length
 *     is not a multiple of 256;
 *   - attn_v.weight and ffn_down.weight of layer i: Q6_K when use_more_bits(i, n_layer),
 *     else the default (Q4_K for Q4_K_M, Q5_K for Q5_K_M);
 *   - everything else (untied token_embd included): the default;
 * then tensor_type_fallback: a row length the type's block does not divide falls back
 * Q2_K, Q3_K -> Q4_0, Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, and to F16 if even that
 * does not divide.
 * Single-type recipes get the same fallback (llama.cpp throws for the legacy types there;
 * F16 is lean's choice, never met at the presets' shapes). */
enum { MIX_NONE, MIX_K_M };

typedef struct gen_recipe {
    const char *name;
    uint32_t type;      /* the type, or the mix's default type */
    uint32_t file_type; /* llama_ftype */
    int mix;
} gen_recipe;

static const gen_recipe recipes[] = {
    {"f32", LEAN_TYPE_F32, 0, MIX_NONE},     {"f16", LEAN_TYPE_F16, 1, MIX_NONE},
    {"bf16", LEAN_TYPE_BF16, 32, MIX_NONE},  {"q8_0", LEAN_TYPE_Q8_0, 7, MIX_NONE},
    {"q4_0", LEAN_TYPE_Q4_0, 2, MIX_NONE},   {"q4_1", LEAN_TYPE_Q4_1, 3, MIX_NONE},
    {"q5_0", LEAN_TYPE_Q5_0, 8, MIX_NONE},   {"q5_1", LEAN_TYPE_Q5_1, 9, MIX_NONE},
    {"q2_k", LEAN_TYPE_Q2_K, 10, MIX_NONE},  {"q3_k", LEAN_TYPE_Q3_K, 11, MIX_NONE},
    {"q4_k", LEAN_TYPE_Q4_K, 14, MIX_NONE},  {"q5_k", LEAN_TYPE_Q5_K, 16, MIX_NONE},
    {"q6_k", LEAN_TYPE_Q6_K, 18, MIX_NONE},  {"q4_k_m", LEAN_TYPE_Q4_K, 15, MIX_K_M},
    {"q5_k_m", LEAN_TYPE_Q5_K, 17, MIX_K_M},
};
#define N_RECIPES (sizeof recipes / sizeof recipes[0])

static bool name_eq_nocase(const char *a, const char *b) {
    for (; *a && *b; a++, b++) {
        char ca = (*a >= 'A' && *a <= 'Z') ? (char)(*a + 32) : *a;
        if (ca != *b) return false;
    }
    return *a == *b;
}

static const gen_recipe *find_recipe(const char *name) {
    for (size_t i = 0; i < N_RECIPES; i++)
        if (name_eq_nocase(name, recipes[i].name)) return &recipes[i];
    return NULL;
}

static void recipe_names(char *buf, size_t cap) {
    size_t k = 0;
    buf[0] = 0;
    for (size_t i = 0; i < N_RECIPES && k < cap; i++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%s", i ? ", " : "", recipes[i].name);
}

/* llama.cpp's tensor categories (tensor_get_category), by name. */
typedef enum tcat { CAT_OTHER, CAT_TOKEN_EMBD, CAT_OUTPUT, CAT_ATTN_V, CAT_FFN_DOWN } tcat;

static tcat tensor_category(const char *name) {
    if (strcmp(name, "output.weight") == 0) return CAT_OUTPUT;
    if (strcmp(name, "token_embd.weight") == 0) return CAT_TOKEN_EMBD;
    if (strstr(name, "attn_v.weight")) return CAT_ATTN_V;
    if (strstr(name, "ffn_down")) return CAT_FFN_DOWN;
    return CAT_OTHER;
}

/* llama.cpp's tensor_allows_quantization for the tensors these architectures have:
 * 2-D or more, the name ends in "weight", not a norm. */
static bool is_weight_matrix(const char *name, uint32_t n_dims) {
    size_t n = strlen(name);
    if (n_dims < 2 || n < 6 || strcmp(name + n - 6, "weight") != 0) return false;
    return strstr(name, "_norm.weight") == NULL;
}

/* The layer of "blk.<i>.<...>", or -1. */
static int tensor_layer(const char *name) {
    if (strncmp(name, "blk.", 4) != 0) return -1;
    int v = 0, digits = 0;
    for (const char *p = name + 4; *p >= '0' && *p <= '9' && digits < 6; p++, digits++) v = v * 10 + (*p - '0');
    return digits ? v : -1;
}

static bool use_more_bits(int i_layer, int n_layer) {
    return i_layer < n_layer / 8 || i_layer >= 7 * n_layer / 8 || (i_layer - n_layer / 8) % 3 == 2;
}

static uint32_t block_elems(uint32_t type) {
    const lean_type_traits *t = lean_type_traits_get(type);
    return t ? t->block_elems : 1;
}

static uint32_t fallback_type(uint32_t type, int64_t ncols) {
    if (ncols % block_elems(type) == 0) return type;
    uint32_t r;
    switch (type) {
    case LEAN_TYPE_Q2_K:
    case LEAN_TYPE_Q3_K: r = LEAN_TYPE_Q4_0; break;
    case LEAN_TYPE_Q4_K: r = LEAN_TYPE_Q5_0; break;
    case LEAN_TYPE_Q5_K: r = LEAN_TYPE_Q5_1; break;
    case LEAN_TYPE_Q6_K: r = LEAN_TYPE_Q8_0; break;
    default: r = LEAN_TYPE_F16; break;
    }
    return ncols % block_elems(r) == 0 ? r : LEAN_TYPE_F16;
}

/* The type of weight matrix `name` (row length ncols) in a file of n_layer layers. */
static uint32_t recipe_type(const gen_recipe *r, const char *name, int64_t ncols, int n_layer, bool tied) {
    uint32_t t = r->type;
    if (r->mix == MIX_K_M) {
        tcat cat = tensor_category(name);
        if (cat == CAT_OUTPUT || (tied && cat == CAT_TOKEN_EMBD)) {
            t = ncols % 256 != 0 ? LEAN_TYPE_Q8_0 : LEAN_TYPE_Q6_K;
        } else if (cat == CAT_ATTN_V || cat == CAT_FFN_DOWN) {
            int il = tensor_layer(name);
            if (il >= 0 && use_more_bits(il, n_layer)) t = LEAN_TYPE_Q6_K;
        }
    }
    return fallback_type(t, ncols);
}

/* ================================================================ 3. random numbers
 *
 * Element i of a tensor is a pure function of (seed, tensor name, i): splitmix64's
 * finalizer over key + (i + 1) * golden, where key mixes the seed with the name's
 * FNV-1a hash. The 64 bits are four 16-bit uniforms whose sum (Irwin-Hall, n = 4) is
 * shifted and scaled to mean 0, variance 1: close to Gaussian, bounded at +-3.46, and
 * computed with integers and one float multiply, so every platform and every order of
 * generation gives the same bytes. */
#define GOLDEN 0x9E3779B97F4A7C15ull
#define IH_MEAN 131070                      /* 4 * 65535 / 2 */
#define IH_INV_SD 2.6428997921303014e-05f   /* 1 / sqrt(4 * (65536^2 - 1) / 12) */

static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t tensor_key(uint64_t seed, const char *name) {
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a 64 */
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) h = (h ^ *p) * 0x100000001b3ull;
    return mix64(mix64(seed + GOLDEN) ^ h);
}

static float draw_normal(uint64_t key, uint64_t i) {
    uint64_t z = mix64(key + (i + 1) * GOLDEN);
    int32_t s = (int32_t)((z & 0xffff) + ((z >> 16) & 0xffff) + ((z >> 32) & 0xffff) + (z >> 48));
    return (float)(s - IH_MEAN) * IH_INV_SD;
}

/* ================================================================ 4. vocabularies
 *
 * The stand-in (no vocab file): a real byte-level BPE vocabulary in GPT-2's format, of
 * any size, made by rule:
 *   ids 0..255            the 256 bytes, as GPT-2's bytes_to_unicode characters, in its
 *                         order ('!'..'~', then U+00A1.., then the rest from U+0100)
 *   ids 256..n-4          merged tokens: first all pairs "x y" over a 64-symbol
 *                         alphabet (space 'Ġ', letters by frequency, newline 'Ċ', digits,
 *                         capitals) in order of rank sum, then triples "xy z"
 *   ids n-3..n-1          "<|endoftext|>" (bos, pad), "<|im_start|>", "<|im_end|>" (eos),
 *                         control tokens
 * with pre-tokenizer "gpt-2" and a ChatML chat template. Every merge yields a token of
 * the vocabulary, and every token is reachable, so llama.cpp and any BPE tokenizer load
 * and use it. n may be up to 256 + 64*64 + 64^3 + 3. */
static const char *const alphabet[64] = {
    "\xc4\xa0", "e", "t", "a", "o", "i", "n", "s", "r", "h", "l", "d", "c", "u", "m", "f",
    "p", "g", "w", "y", "b", "v", "k", "x", "j", "q", "z", "\xc4\x8a", "0", "1", "2", "3",
    "4", "5", "6", "7", "8", "9", "A", "B", "C", "D", "E", "F", "G", "H", "I", "J",
    "K", "L", "M", "N", "O", "P", "Q", "R", "S", "T", "U", "V", "W", "X", "Y", "Z",
};
#define STANDIN_SPECIALS 3
#define STANDIN_MAX ((uint64_t)256 + 64 * 64 + 64 * 64 * 64 + STANDIN_SPECIALS)
static const char *const standin_specials[STANDIN_SPECIALS] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
static const char standin_template[] =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/* UTF-8 of GPT-2's character for token id 0..255 (bytes_to_unicode order). */
static size_t gpt2_byte_token(int id, char out[3]) {
    uint32_t cp;
    if (id < 94) cp = 0x21 + (uint32_t)id;                    /* '!'..'~' */
    else if (id < 106) cp = 0xA1 + (uint32_t)(id - 94);        /* U+00A1..U+00AC */
    else if (id < 188) cp = 0xAE + (uint32_t)(id - 106);       /* U+00AE..U+00FF */
    else cp = 0x100 + (uint32_t)(id - 188);                    /* bytes 0..32, 127..160, 173 */
    if (cp < 0x80) { out[0] = (char)cp; return 1; }
    out[0] = (char)(0xC0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
}

/* The k-th pair (a, b) of alphabet indices in rank-sum order. */
static void standin_pair(uint32_t k, int *a, int *b) {
    for (int d = 0; d < 127; d++) {
        int lo = d < 64 ? 0 : d - 63, hi = d < 64 ? d : 63, cnt = hi - lo + 1;
        if (k < (uint32_t)cnt) { *a = lo + (int)k; *b = d - *a; return; }
        k -= (uint32_t)cnt;
    }
    *a = *b = 0; /* unreachable for k < 4096 */
}

/* Merge m (0-based) as its two parts. */
static void standin_merge(uint64_t m, char *left, char *right) {
    int a, b;
    if (m < 64 * 64) {
        standin_pair((uint32_t)m, &a, &b);
        strcpy(left, alphabet[a]);
        strcpy(right, alphabet[b]);
    } else {
        uint64_t t = m - 64 * 64;
        standin_pair((uint32_t)(t / 64), &a, &b);
        snprintf(left, 8, "%s%s", alphabet[a], alphabet[b]);
        strcpy(right, alphabet[t % 64]);
    }
}

/* Stand-in token id, written into out unless it is a (static) special. A merged token
 * has at most three 2-byte symbols, a rule "left right" 7 bytes: out[16] holds either
 * with room for what snprintf's length check assumes of l and r. */
static const char *standin_token(uint64_t id, uint64_t n_vocab, char out[16]) {
    uint64_t first_special = n_vocab - STANDIN_SPECIALS;
    if (id >= first_special) return standin_specials[id - first_special];
    if (id < 256) {
        out[gpt2_byte_token((int)id, out)] = 0;
        return out;
    }
    char l[8], r[8];
    standin_merge(id - 256, l, r);
    snprintf(out, 16, "%s%s", l, r);
    return out;
}

/* Stand-in merge m as its rule "left right". */
static const char *standin_rule(uint64_t m, uint64_t n_vocab, char out[16]) {
    (void)n_vocab;
    char l[8], r[8];
    standin_merge(m, l, r);
    snprintf(out, 16, "%s %s", l, r);
    return out;
}

/* A string array of n strings made by make(), held only while the writer encodes it. */
static lean_status w_made_strs(gguf_writer *w, const char *key, uint64_t n, uint64_t n_vocab,
                               const char *(*make)(uint64_t i, uint64_t n_vocab, char out[16]), lean_error *err) {
    char(*text)[16] = lean_calloc((size_t)n, sizeof *text);
    const char **strs = lean_calloc((size_t)n, sizeof *strs);
    lean_status st = LEAN_OK;
    if (text && strs) {
        for (uint64_t i = 0; i < n; i++) strs[i] = make(i, n_vocab, text[i]);
        gguf_w_arr_str(w, key, strs, n);
    } else {
        st = LEAN_FAIL(err, LEAN_ERR_NOMEM, "out of memory for the %llu strings of %s", (unsigned long long)n, key);
    }
    lean_free(text);
    lean_free(strs);
    return st;
}

static lean_status write_standin_vocab(gguf_writer *w, uint64_t n_vocab, lean_error *err) {
    uint64_t n_merges = n_vocab - 256 - STANDIN_SPECIALS;
    uint32_t first_special = (uint32_t)(n_vocab - STANDIN_SPECIALS);
    int32_t *types = lean_calloc((size_t)n_vocab, sizeof *types);
    if (!types)
        return LEAN_FAIL(err, LEAN_ERR_NOMEM, "out of memory for %llu token types", (unsigned long long)n_vocab);
    for (uint64_t i = 0; i < n_vocab; i++) types[i] = i < first_special ? 1 : 3; /* normal, control */
    gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
    gguf_w_str(w, "tokenizer.ggml.pre", "gpt-2");
    lean_status st = w_made_strs(w, "tokenizer.ggml.tokens", n_vocab, n_vocab, standin_token, err);
    gguf_w_arr(w, "tokenizer.ggml.token_type", GGUF_I32, types, n_vocab);
    lean_free(types);
    if (st == LEAN_OK) st = w_made_strs(w, "tokenizer.ggml.merges", n_merges, n_vocab, standin_rule, err);
    gguf_w_u32(w, "tokenizer.ggml.bos_token_id", first_special);
    gguf_w_u32(w, "tokenizer.ggml.eos_token_id", first_special + 2);
    gguf_w_u32(w, "tokenizer.ggml.padding_token_id", first_special);
    gguf_w_bool(w, "tokenizer.ggml.add_bos_token", false);
    gguf_w_str(w, "tokenizer.chat_template", standin_template);
    return st;
}

/* A GGUF opened for reading: mapped where the platform maps, else read through stdio. */
typedef struct gguf_src {
    lean_mapped_file map;
    FILE *fp;
    lean_read_fn read;
    void *user;
    gguf_file *f;
} gguf_src;

static void src_close(gguf_src *s) {
    gguf_free(s->f);
    if (s->fp) fclose(s->fp);
    if (s->map.data) lean_unmap_file(&s->map);
    memset(s, 0, sizeof *s);
}

static lean_status src_open(gguf_src *s, const char *path, const char *what, lean_error *err) {
    memset(s, 0, sizeof *s);
    uint64_t size;
    lean_error e2;
    lean_status st = lean_map_file(path, &s->map, &e2);
    if (st == LEAN_OK) {
        s->read = lean_read_mapped;
        s->user = &s->map;
        size = s->map.size;
    } else if (st == LEAN_ERR_UNSUPPORTED) {
        s->fp = fopen(path, "rb");
        if (!s->fp) return LEAN_FAIL(err, LEAN_ERR_IO, "%s '%s': %s", what, path, strerror(errno));
        struct stat sb;
        if (fstat(fileno(s->fp), &sb) != 0 || sb.st_size < 0) {
            src_close(s);
            return LEAN_FAIL(err, LEAN_ERR_IO, "%s '%s': cannot stat", what, path);
        }
        size = (uint64_t)sb.st_size;
        s->read = lean_read_stdio;
        s->user = s->fp;
    } else {
        return LEAN_FAIL(err, st, "%s: %s", what, e2.msg);
    }
    st = gguf_read(s->read, s->user, size, &s->f, &e2);
    if (st != LEAN_OK) {
        src_close(s);
        return LEAN_FAIL(err, st, "%s '%s': %s", what, path, e2.msg);
    }
    return LEAN_OK;
}

static bool starts_with(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

/* v, a per-token array of n_tokens, padded to n_vocab entries the way llama.cpp's
 * converter pads (convert_hf_to_gguf.py, get_vocab_base): "[PAD<i>]" tokens of type
 * UNUSED (5), score -1000. The first n_tokens items are v's own (not copied). */
static lean_status w_padded(gguf_writer *w, const char *key, const gguf_value *v, uint64_t n_vocab, lean_error *err) {
    const uint32_t et = v->v.arr.elem_type;
    const uint64_t n_tokens = v->v.arr.count;
    gguf_value *items = lean_calloc((size_t)n_vocab, sizeof *items);
    char(*pads)[24] = et == GGUF_STRING ? lean_calloc((size_t)(n_vocab - n_tokens), sizeof *pads) : NULL;
    if (!items || (et == GGUF_STRING && !pads)) {
        lean_free(items);
        lean_free(pads);
        return LEAN_FAIL(err, LEAN_ERR_NOMEM, "out of memory padding %s to %llu entries", key,
                         (unsigned long long)n_vocab);
    }
    memcpy(items, v->v.arr.items, (size_t)n_tokens * sizeof *items);
    for (uint64_t k = n_tokens; k < n_vocab; k++) {
        gguf_value *it = &items[k];
        it->type = et;
        if (et == GGUF_STRING) {
            it->v.str.ptr = pads[k - n_tokens];
            it->v.str.len = (uint64_t)snprintf(it->v.str.ptr, sizeof *pads, "[PAD%llu]", (unsigned long long)k);
        } else if (et == GGUF_I32) {
            it->v.i64 = 5;
        } else {
            it->v.f64 = -1000.0f;
        }
    }
    gguf_value padded = {.type = GGUF_ARRAY, .v.arr = {et, n_vocab, items}};
    gguf_w_value(w, key, &padded);
    lean_free(items);
    lean_free(pads);
    return LEAN_OK;
}

/* Copies every tokenizer.* key of vf, the per-token arrays padded from n_tokens to
 * n_vocab entries. */
static lean_status copy_vocab(gguf_writer *w, const gguf_file *vf, uint64_t n_tokens, uint64_t n_vocab,
                              const char *path, lean_error *err) {
    for (uint64_t i = 0; i < vf->n_kv; i++) {
        const char *key = vf->kv[i].key.ptr;
        const gguf_value *v = &vf->kv[i].value;
        if (!starts_with(key, "tokenizer.")) continue;
        bool per_token = v->type == GGUF_ARRAY && v->v.arr.count == n_tokens &&
                         (strcmp(key, "tokenizer.ggml.tokens") == 0 || strcmp(key, "tokenizer.ggml.token_type") == 0 ||
                          strcmp(key, "tokenizer.ggml.scores") == 0);
        if (!per_token || n_vocab == n_tokens) {
            gguf_w_value(w, key, v);
            continue;
        }
        uint32_t et = v->v.arr.elem_type;
        if (!(et == GGUF_STRING || et == GGUF_I32 || et == GGUF_F32))
            return LEAN_FAIL(err, LEAN_ERR_MODEL, "vocab '%s': %s has element type %s; cannot pad it", path, key,
                             gguf_vtype_name(et));
        lean_status st = w_padded(w, key, v, n_vocab, err);
        if (st != LEAN_OK) return st;
    }
    return LEAN_OK;
}

/* ================================================================ 5. streaming the tensors
 *
 * An out_file is a gguf_writer holding the header (keys, and every tensor declared
 * without data) and, per tensor, how to produce its bytes. out_write hands fill_tensor to
 * gguf_writer_write_stream, which writes the header and then calls it for each tensor
 * in turn; fill_tensor makes the tensor a row at a time (random floats or a source row,
 * quantized) in buffers sized for the largest row. */
typedef enum fill_kind {
    FILL_NORMAL,     /* generate: mean + std * N(0,1), quantized row by row */
    FILL_ROPE_FREQS, /* generate: llama3 rope factors */
    FILL_COPY,       /* quantize: the source bytes as they are */
    FILL_REQUANT,    /* quantize: dequantize the source row, quantize to type */
} fill_kind;

/* How a tensor's bytes are made (its name, shape and type are the writer's). */
typedef struct out_tensor {
    fill_kind fill;
    float mean, std;             /* FILL_NORMAL */
    const gguf_tensor_info *src; /* FILL_COPY, FILL_REQUANT */
} out_tensor;

#define CHUNK_BYTES ((size_t)1 << 20) /* FILL_COPY reads and writes this much at a time */

typedef struct out_file {
    gguf_writer *w; /* NULL when out of memory: the gguf_w_* calls do nothing, the write says so */
    out_tensor *t;  /* n_t, in the writer's order */
    uint32_t n_t, cap_t;
    uint64_t max_cols, max_row; /* the longest row (elements), the largest row (bytes, source rows too) */
    /* sources of the fills */
    uint64_t seed;
    const gen_preset *preset;
    gguf_src *src;
    lean_progress_fn progress; /* nullable: tensors written, of n_t */
    void *progress_user;
    /* while out_write runs */
    float *xrow;    /* max_cols floats */
    uint8_t *qrow;  /* max_row bytes */
    uint8_t *chunk; /* max(CHUNK_BYTES, max_row) bytes */
} out_file;

static void out_free(out_file *o) {
    gguf_writer_free(o->w);
    lean_free(o->t);
    lean_free(o->xrow);
    lean_free(o->qrow);
    lean_free(o->chunk);
    memset(o, 0, sizeof *o);
}

/* Declares a tensor (the writer checks the name, shape and type; a bad one fails the
 * write) and how its bytes will be made. */
static lean_status out_tensor_add(out_file *o, const char *name, uint32_t type, uint32_t n_dims, const int64_t *ne,
                                  out_tensor how, lean_error *err) {
    if (o->n_t == o->cap_t) {
        uint32_t cap = o->cap_t ? o->cap_t * 2 : 64;
        out_tensor *t = lean_realloc(o->t, (size_t)cap * sizeof *t);
        if (!t) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "out of memory for %u tensors", cap);
        o->t = t;
        o->cap_t = cap;
    }
    gguf_w_tensor_info(o->w, name, type, n_dims, ne);
    o->t[o->n_t++] = how;
    uint64_t row = 0;
    if ((uint64_t)ne[0] > o->max_cols) o->max_cols = (uint64_t)ne[0];
    if (lean_type_bytes(type, (uint64_t)ne[0], &row) && row > o->max_row) o->max_row = row;
    if (how.src && lean_type_bytes(how.src->type, (uint64_t)ne[0], &row) && row > o->max_row) o->max_row = row;
    return LEAN_OK;
}

/* llama3 rope factors exactly as convert_hf_to_gguf.py (LlamaModel, generate_extra_tensors)
 * computes them, in float32 like its torch tensors: freq_i = 1 / base^(2i / dim);
 * wavelen = 2 pi / freq; factor 1 when wavelen < orig/high, `factor` when > orig/low,
 * else 1 / ((1 - s) / factor + s) with s = (orig / wavelen - low) / (high - low).
 * The model divides theta_i by factor_i. */
static void llama3_rope_factors(const gen_preset *p, float *out) {
    int dim = p->head_dim;
    float lo_wl = (float)p->llama3_orig_ctx / p->llama3_low, hi_wl = (float)p->llama3_orig_ctx / p->llama3_high;
    for (int i = 0; i < dim / 2; i++) {
        float e = (float)(2 * i) / (float)dim;
        float freq = 1.0f / powf(p->rope_base, e);
        float wavelen = 6.28318530717958647692f / freq;
        if (wavelen < hi_wl) {
            out[i] = 1.0f;
        } else if (wavelen > lo_wl) {
            out[i] = p->llama3_factor;
        } else {
            float smooth = ((float)p->llama3_orig_ctx / wavelen - p->llama3_low) / (p->llama3_high - p->llama3_low);
            float a = (1.0f - smooth) / p->llama3_factor;
            out[i] = 1.0f / (a + smooth);
        }
    }
}

/* gguf_fill_fn: tensor i's n_bytes, a row (or, copying, a chunk) at a time. */
static lean_status fill_tensor(void *user, uint64_t i, const gguf_tensor_info *t, gguf_sink *sink, lean_error *err) {
    out_file *o = user;
    const out_tensor *how = &o->t[i];
    const lean_quantize_row_fn quantize = lean_quantizer_of(t->type); /* every type written has one */
    int64_t ncols = t->ne[0];
    uint64_t nrows = t->n_elems / (uint64_t)ncols;
    size_t row_bytes = (size_t)(t->n_bytes / nrows);
    lean_status st = LEAN_OK;
    switch (how->fill) {
    case FILL_NORMAL: {
        uint64_t key = tensor_key(o->seed, t->name.ptr);
        for (uint64_t r = 0; r < nrows && st == LEAN_OK; r++) {
            for (int64_t c = 0; c < ncols; c++) {
                float d = how->std * draw_normal(key, r * (uint64_t)ncols + (uint64_t)c);
                o->xrow[c] = how->mean + d;
            }
            quantize(o->xrow, o->qrow, ncols);
            st = gguf_sink_write(sink, o->qrow, row_bytes, err);
        }
        break;
    }
    case FILL_ROPE_FREQS:
        llama3_rope_factors(o->preset, o->xrow);
        st = gguf_sink_write(sink, o->xrow, (size_t)t->n_bytes, err);
        break;
    case FILL_COPY: {
        const gguf_src *s = o->src;
        uint64_t off = s->f->data_offset + how->src->offset;
        for (uint64_t done = 0; done < t->n_bytes && st == LEAN_OK;) {
            size_t n = t->n_bytes - done < CHUNK_BYTES ? (size_t)(t->n_bytes - done) : CHUNK_BYTES;
            if (s->read(s->user, off + done, o->chunk, n) != n)
                return LEAN_FAIL(err, LEAN_ERR_IO, "reading tensor '%s' failed", t->name.ptr);
            st = gguf_sink_write(sink, o->chunk, n, err);
            done += n;
        }
        break;
    }
    case FILL_REQUANT: {
        const gguf_src *s = o->src;
        const lean_type_traits *str = lean_type_traits_get(how->src->type);
        size_t src_row = (size_t)(how->src->n_bytes / nrows);
        uint64_t off = s->f->data_offset + how->src->offset;
        for (uint64_t r = 0; r < nrows && st == LEAN_OK; r++) {
            if (s->read(s->user, off + r * src_row, o->chunk, src_row) != src_row)
                return LEAN_FAIL(err, LEAN_ERR_IO, "reading tensor '%s' row %llu failed", t->name.ptr,
                                 (unsigned long long)r);
            str->dequant(o->chunk, o->xrow, ncols);
            quantize(o->xrow, o->qrow, ncols);
            st = gguf_sink_write(sink, o->qrow, row_bytes, err);
        }
        break;
    }
    }
    if (st == LEAN_OK && o->progress) o->progress(o->progress_user, i + 1, o->n_t);
    return st;
}

static lean_status out_write(out_file *o, const char *path, lean_error *err) {
    if (o->max_cols > SIZE_MAX / sizeof(float) || o->max_row > SIZE_MAX)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "a row is too long for this platform");
    o->xrow = lean_malloc((size_t)o->max_cols * sizeof(float));
    o->qrow = lean_malloc((size_t)o->max_row);
    o->chunk = lean_malloc(CHUNK_BYTES > o->max_row ? CHUNK_BYTES : (size_t)o->max_row);
    if (!o->xrow || !o->qrow || !o->chunk)
        return LEAN_FAIL(err, LEAN_ERR_NOMEM, "out of memory for row buffers (%llu floats)",
                         (unsigned long long)o->max_cols);
    return gguf_writer_write_stream(o->w, path, fill_tensor, o, err);
}

/* ================================================================ 6. lean_generate_model */

typedef enum tkind { T_MATRIX, T_NORM, T_BIAS } tkind;

/* Initial values: matrices N(0, 0.02^2) as HF's initializer_range; norms 1 + N(0, 0.05^2);
 * biases N(0, 0.02^2). With these, activations through a random model stay O(1). */
static lean_status add_gen_tensor(out_file *o, const gen_recipe *r, const char *name, tkind kind, int64_t ne0,
                                  int64_t ne1, int n_layer, bool tied, lean_error *err) {
    int64_t ne[2] = {ne0, ne1};
    uint32_t n_dims = kind == T_MATRIX ? 2 : 1;
    uint32_t type = kind == T_MATRIX ? recipe_type(r, name, ne0, n_layer, tied) : LEAN_TYPE_F32;
    out_tensor how = {FILL_NORMAL, kind == T_NORM ? 1.0f : 0.0f, kind == T_NORM ? 0.05f : 0.02f, NULL};
    return out_tensor_add(o, name, type, n_dims, ne, how, err);
}

static lean_status add_gen_tensors(out_file *o, const gen_preset *p, const gen_recipe *r, int n_layer, int64_t n_vocab,
                                   lean_error *err) {
    lean_status st;
    char name[GGUF_MAX_NAME];
    int64_t q_dim = (int64_t)p->n_head * p->head_dim, kv_dim = (int64_t)p->n_head_kv * p->head_dim;
    bool bias = strcmp(p->arch, "qwen2") == 0, qk_norm = strcmp(p->arch, "qwen3") == 0;
#define ADD(kind, ne0, ne1, ...)                                                      \
    do {                                                                              \
        snprintf(name, sizeof name, __VA_ARGS__);                                     \
        if ((st = add_gen_tensor(o, r, name, kind, ne0, ne1, n_layer, p->tied, err))) \
            return st;                                                                \
    } while (0)

    ADD(T_MATRIX, p->n_embd, n_vocab, "token_embd.weight");              /* (n_vocab, n_embd) */
    if (p->llama3_factor > 0) {
        int64_t ne = p->head_dim / 2;
        out_tensor how = {.fill = FILL_ROPE_FREQS};                       /* (head_dim / 2) */
        if ((st = out_tensor_add(o, "rope_freqs.weight", LEAN_TYPE_F32, 1, &ne, how, err))) return st;
    }
    for (int il = 0; il < n_layer; il++) {
        ADD(T_NORM, p->n_embd, 1, "blk.%d.attn_norm.weight", il);         /* (n_embd) */
        ADD(T_MATRIX, p->n_embd, q_dim, "blk.%d.attn_q.weight", il);      /* (n_head * head_dim, n_embd) */
        if (bias) ADD(T_BIAS, q_dim, 1, "blk.%d.attn_q.bias", il);        /* (n_head * head_dim) */
        ADD(T_MATRIX, p->n_embd, kv_dim, "blk.%d.attn_k.weight", il);     /* (n_head_kv * head_dim, n_embd) */
        if (bias) ADD(T_BIAS, kv_dim, 1, "blk.%d.attn_k.bias", il);       /* (n_head_kv * head_dim) */
        ADD(T_MATRIX, p->n_embd, kv_dim, "blk.%d.attn_v.weight", il);     /* (n_head_kv * head_dim, n_embd) */
        if (bias) ADD(T_BIAS, kv_dim, 1, "blk.%d.attn_v.bias", il);       /* (n_head_kv * head_dim) */
        if (qk_norm) {
            ADD(T_NORM, p->head_dim, 1, "blk.%d.attn_q_norm.weight", il); /* (head_dim) */
            ADD(T_NORM, p->head_dim, 1, "blk.%d.attn_k_norm.weight", il); /* (head_dim) */
        }
        ADD(T_MATRIX, q_dim, p->n_embd, "blk.%d.attn_output.weight", il); /* (n_embd, n_head * head_dim) */
        ADD(T_NORM, p->n_embd, 1, "blk.%d.ffn_norm.weight", il);          /* (n_embd) */
        ADD(T_MATRIX, p->n_embd, p->n_ff, "blk.%d.ffn_gate.weight", il);  /* (n_ff, n_embd) */
        ADD(T_MATRIX, p->n_embd, p->n_ff, "blk.%d.ffn_up.weight", il);    /* (n_ff, n_embd) */
        ADD(T_MATRIX, p->n_ff, p->n_embd, "blk.%d.ffn_down.weight", il);  /* (n_embd, n_ff) */
    }
    ADD(T_NORM, p->n_embd, 1, "output_norm.weight");                      /* (n_embd) */
    if (!p->tied) ADD(T_MATRIX, p->n_embd, n_vocab, "output.weight");     /* (n_vocab, n_embd) */
#undef ADD
    return LEAN_OK;
}

/* The architecture keys, as convert_hf_to_gguf.py writes them (TextModel and LlamaModel
 * set_gguf_parameters; llama.cpp reads them in llama_model::load_hparams). */
static void write_arch_keys(gguf_writer *w, const gen_preset *p, int n_layer, uint64_t n_vocab) {
    char key[96];
#define K(suffix) (snprintf(key, sizeof key, "%s.%s", p->arch, suffix), key)
    gguf_w_u32(w, K("context_length"), (uint32_t)p->n_ctx);
    gguf_w_u32(w, K("embedding_length"), (uint32_t)p->n_embd);
    gguf_w_u32(w, K("block_count"), (uint32_t)n_layer);
    gguf_w_u32(w, K("feed_forward_length"), (uint32_t)p->n_ff);
    gguf_w_u32(w, K("attention.head_count"), (uint32_t)p->n_head);
    gguf_w_u32(w, K("attention.head_count_kv"), (uint32_t)p->n_head_kv);
    gguf_w_f32(w, K("rope.freq_base"), p->rope_base);
    gguf_w_f32(w, K("attention.layer_norm_rms_epsilon"), p->rms_eps);
    if (p->head_dim_keys) {
        gguf_w_u32(w, K("attention.key_length"), (uint32_t)p->head_dim);
        gguf_w_u32(w, K("attention.value_length"), (uint32_t)p->head_dim);
    }
    gguf_w_u32(w, K("rope.dimension_count"), (uint32_t)p->head_dim);
    gguf_w_u32(w, K("vocab_size"), (uint32_t)n_vocab);
#undef K
}

lean_status lean_generate_model(const lean_gen_params *p, const char *out_path, lean_error *err) {
    if (!p || !out_path) return LEAN_FAIL(err, LEAN_ERR_ARG, "lean_generate_model: params and out_path are required");
    if (!p->preset) return LEAN_FAIL(err, LEAN_ERR_ARG, "lean_generate_model: no preset given");
    const gen_preset *pre = find_preset(p->preset);
    if (!pre) {
        char names[256];
        size_t k = 0;
        for (size_t i = 0; i < N_PRESETS; i++)
            k += (size_t)snprintf(names + k, sizeof names - k, "%s%s", i ? ", " : "", presets[i].name);
        return LEAN_FAIL(err, LEAN_ERR_ARG, "unknown preset '%s' (known: %s)", p->preset, names);
    }
    const gen_recipe *rec = p->recipe ? find_recipe(p->recipe) : NULL;
    if (!rec) {
        char names[256];
        recipe_names(names, sizeof names);
        return LEAN_FAIL(err, LEAN_ERR_ARG, "unknown recipe '%s' (known: %s)", p->recipe ? p->recipe : "(null)", names);
    }
    if (p->n_layer < 0 || p->n_layer > GEN_MAX_LAYERS)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "n_layer %d is out of range: 0 (the preset's %d) or 1..%d", p->n_layer,
                         pre->n_layer, GEN_MAX_LAYERS);
    int n_layer = p->n_layer ? p->n_layer : pre->n_layer;

    lean_status st;
    out_file o = {0};
    gguf_src vs = {0};
    uint64_t n_tokens = 0, n_vocab = (uint64_t)pre->n_vocab;
    o.w = gguf_writer_new();
    o.seed = p->seed;
    o.preset = pre;
    o.progress = p->progress;
    o.progress_user = p->progress_user;

    if (p->vocab_path) {
        if ((st = src_open(&vs, p->vocab_path, "vocab", err))) goto done;
        const gguf_value *toks = gguf_find(vs.f, "tokenizer.ggml.tokens");
        if (!toks || toks->type != GGUF_ARRAY || toks->v.arr.elem_type != GGUF_STRING || toks->v.arr.count == 0) {
            st = LEAN_FAIL(err, LEAN_ERR_MODEL, "vocab '%s' has no tokenizer.ggml.tokens string array", p->vocab_path);
            goto done;
        }
        n_tokens = toks->v.arr.count;
        if (n_tokens > (uint64_t)INT32_MAX) {
            st = LEAN_FAIL(err, LEAN_ERR_MODEL, "vocab '%s' has %llu tokens; at most %d", p->vocab_path,
                           (unsigned long long)n_tokens, INT32_MAX);
            goto done;
        }
        if (n_tokens > n_vocab) n_vocab = n_tokens;
    } else if (n_vocab > STANDIN_MAX) {
        st = LEAN_FAIL(err, LEAN_ERR_ARG, "the stand-in vocabulary has at most %llu tokens", (unsigned long long)STANDIN_MAX);
        goto done;
    }

    char text[160];
    gguf_w_str(o.w, "general.architecture", pre->arch);
    gguf_w_str(o.w, "general.type", "model");
    snprintf(text, sizeof text, "%s (lean random weights, seed %llu)", pre->name, (unsigned long long)p->seed);
    gguf_w_str(o.w, "general.name", text);
    gguf_w_str(o.w, "lean.generator.preset", pre->name);
    gguf_w_u64(o.w, "lean.generator.seed", p->seed);
    gguf_w_str(o.w, "lean.generator.recipe", rec->name);
    gguf_w_u32(o.w, "general.file_type", rec->file_type);
    gguf_w_u32(o.w, "general.quantization_version", 2); /* GGML_QNT_VERSION */
    write_arch_keys(o.w, pre, n_layer, n_vocab);
    if (p->vocab_path) {
        if ((st = copy_vocab(o.w, vs.f, n_tokens, n_vocab, p->vocab_path, err))) goto done;
    } else if ((st = write_standin_vocab(o.w, n_vocab, err))) {
        goto done;
    }
    if ((st = add_gen_tensors(&o, pre, rec, n_layer, (int64_t)n_vocab, err))) goto done;
    st = out_write(&o, out_path, err);

done:
    src_close(&vs);
    out_free(&o);
    return st;
}

/* ================================================================ 7. lean_quantize_file */

/* The layer count for the _K_M rules: <arch>.block_count, else 1 + the highest blk.N. */
static int file_layers(const gguf_file *f) {
    const gguf_value *arch = gguf_find(f, "general.architecture");
    if (arch && arch->type == GGUF_STRING) {
        char key[128];
        uint32_t n;
        snprintf(key, sizeof key, "%s.block_count", arch->v.str.ptr);
        if (gguf_get_u32(f, key, &n, NULL) == LEAN_OK && n > 0 && n <= INT32_MAX) return (int)n;
    }
    int n = 0;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        int il = tensor_layer(f->tensors[i].name.ptr);
        if (il + 1 > n) n = il + 1;
    }
    return n;
}

lean_status lean_quantize_file(const char *in_path, const char *out_path, const char *recipe, lean_error *err) {
    const lean_quantize_params p = {.recipe = recipe};
    return lean_quantize_file_params(in_path, out_path, &p, err);
}

lean_status lean_quantize_file_params(const char *in_path, const char *out_path, const lean_quantize_params *p,
                                      lean_error *err) {
    if (!in_path || !out_path || !p)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "lean_quantize_file: in_path, out_path and params are required");
    const char *recipe = p->recipe;
    const gen_recipe *rec = recipe ? find_recipe(recipe) : NULL;
    if (!rec) {
        char names[256];
        recipe_names(names, sizeof names);
        return LEAN_FAIL(err, LEAN_ERR_ARG, "unknown recipe '%s' (known: %s)", recipe ? recipe : "(null)", names);
    }
    struct stat si, so;
    if (stat(in_path, &si) == 0 && stat(out_path, &so) == 0 && si.st_dev == so.st_dev && si.st_ino == so.st_ino)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "'%s' and '%s' are the same file", in_path, out_path);

    lean_status st;
    gguf_src s;
    out_file o = {0};
    if ((st = src_open(&s, in_path, "input", err))) return st;
    const gguf_file *f = s.f;
    o.w = gguf_writer_new(); /* general.alignment, when f has it, is copied below */
    o.src = &s;
    o.progress = p->progress;
    o.progress_user = p->progress_user;

    /* Keys: all of them, general.file_type / quantization_version / lean.generator.recipe
     * replaced in place (appended when absent). */
    bool had_ftype = false, had_qv = false;
    for (uint64_t i = 0; i < f->n_kv; i++) {
        const char *key = f->kv[i].key.ptr;
        if (strcmp(key, "general.file_type") == 0) {
            gguf_w_u32(o.w, key, rec->file_type);
            had_ftype = true;
        } else if (strcmp(key, "general.quantization_version") == 0) {
            gguf_w_u32(o.w, key, 2);
            had_qv = true;
        } else if (strcmp(key, "lean.generator.recipe") == 0) {
            gguf_w_str(o.w, key, rec->name);
        } else {
            gguf_w_value(o.w, key, &f->kv[i].value);
        }
    }
    if (!had_ftype) gguf_w_u32(o.w, "general.file_type", rec->file_type);
    if (!had_qv) gguf_w_u32(o.w, "general.quantization_version", 2);

    int n_layer = file_layers(f);
    bool tied = gguf_find_tensor(f, "output.weight") == NULL;
    for (uint64_t i = 0; i < f->n_tensors && st == LEAN_OK; i++) {
        const gguf_tensor_info *ti = &f->tensors[i];
        bool matrix = is_weight_matrix(ti->name.ptr, ti->n_dims);
        uint32_t type = matrix ? recipe_type(rec, ti->name.ptr, ti->ne[0], n_layer, tied) : ti->type;
        out_tensor how = {.fill = type == ti->type ? FILL_COPY : FILL_REQUANT, .src = ti};
        st = out_tensor_add(&o, ti->name.ptr, type, ti->n_dims, ti->ne, how, err);
    }
    if (st == LEAN_OK) st = out_write(&o, out_path, err);
    out_free(&o);
    src_close(&s);
    return st;
}
