/* tokenizer.h — inside a lean_tokenizer: what the loader (tokenizer.c) builds from a GGUF's
 * tokenizer.* keys and the two encoders (tokenizer_bpe.c) read. The public contract is the
 * tokenizers section of lean.h.
 *
 * The GGUF keys read (llama.cpp's names; every array is checked for type and length):
 *
 *   KEY                               TYPE        USE
 *   tokenizer.ggml.model              string      "gpt2" (byte-level BPE) or "llama"
 *                                                 (SentencePiece-style BPE with byte fallback)
 *   tokenizer.ggml.pre                string      gpt2 only: the pre-tokenizer (pre_kind below)
 *   tokenizer.ggml.tokens             string[n]   the vocabulary by id; n in 1..LEAN_TOK_MAX_TOKENS
 *   tokenizer.ggml.token_type         i32[n]      lean_token_type per id (absent: all NORMAL)
 *   tokenizer.ggml.scores             f32[n]      llama only: merge priority (absent: all 0)
 *   tokenizer.ggml.merges             string[m]   gpt2 only, required: "left right", rank order
 *   tokenizer.ggml.{bos,eos,eot,eom,unknown,padding}_token_id   u32 (any integer type)
 *   tokenizer.ggml.add_bos_token / add_eos_token / add_space_prefix   bool
 *
 * Memory: the token strings are copied into one blob (the gguf_file can be freed), plus
 * per token its decoded bytes ("piece"), and two open-addressing hash tables (text -> id,
 * (left, right) -> merge). For a 150k-token vocabulary with 150k merges: ~10 MB.
 */
#ifndef LEAN_TOKENIZER_H
#define LEAN_TOKENIZER_H

#include "core/common.h"
#include "core/gguf.h"

#define LEAN_TOK_MAX_TOKENS (1 << 22)   /* ids fit in int32 with room; model.c's MAX_VOCAB */
#define LEAN_TOK_MAX_MERGES (1 << 24)
#define LEAN_TOK_MAX_TOKEN_BYTES 65536  /* one token's text */
#define LEAN_TOK_MAX_TEXT_BYTES (1 << 29) /* one lean_tokenize call: ids, sizes and offsets
                                             then fit in int32 with room */

enum tok_kind { TOK_BPE, TOK_SPM };

/* The pre-tokenizers lean implements, by the regex HF's tokenizer.json uses. */
enum pre_kind {
    PRE_NONE,      /* llama (SentencePiece): no pre-tokenizer */
    PRE_GPT2,      /* 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
    PRE_STARCODER, /* each \p{N} alone (Digits, individual_digits), then PRE_GPT2 */
    PRE_LLAMA3,    /* (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
                      ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
    PRE_QWEN2,     /* PRE_LLAMA3 with \p{N} one at a time, after NFC */
};

/* A text -> id map: open addressing, linear probing, FNV-1a over the key bytes. */
typedef struct tok_hash {
    int32_t *slots; /* id, or -1 when empty */
    uint32_t mask;  /* capacity - 1; capacity a power of two >= 2 * count */
} tok_hash;

/* (left id, right id) -> merge. */
typedef struct tok_merge {
    uint64_t key;   /* (uint64)left << 32 | right; UINT64_MAX when empty */
    int32_t rank;   /* lower merges first */
    int32_t result; /* the id of left + right */
} tok_merge;

/* The first slot to probe for a merge key (Fibonacci hashing; linear probing after it). */
static inline uint32_t tok_merge_slot(uint64_t key, uint32_t mask) {
    return (uint32_t)((key * 0x9E3779B97F4A7C15ull) >> 32) & mask;
}

struct lean_tokenizer {
    lean_status status;      /* LEAN_OK, or why this model's tokenizer could not be built */
    char error[512];         /* the message of that failure */

    enum tok_kind kind;
    enum pre_kind pre;
    char model_name[16];     /* "gpt2" / "llama" */
    char pre_name[64];       /* tokenizer.ggml.pre, or "" */
    bool nfc;                /* normalize text segments to NFC first (Qwen2's tokenizer.json) */
    bool ignore_merges;      /* a word that is itself a token is taken whole (Llama 3) */
    bool add_space_prefix;   /* SPM: "\u2581" before each text segment, one space stripped on decode */
    bool add_bos, add_eos;

    int32_t n_tokens;
    char *text;              /* every token's string, NUL after each; owned */
    uint32_t *text_off;      /* (n_tokens + 1) byte offsets into text; len = next - this - 1 */
    char *piece;             /* every token's decoded bytes, NUL after each; owned */
    uint32_t *piece_off;     /* (n_tokens + 1) offsets into piece, the same way */
    uint8_t *type;           /* lean_token_type per id */
    float *score;            /* SPM: per id; NULL for BPE */

    tok_hash by_text;        /* token string -> id (all tokens) */
    tok_hash by_piece;       /* BPE: decoded bytes -> id, NORMAL tokens only (ignore_merges) */
    tok_merge *merges;       /* BPE: capacity merge_mask + 1, a power of two >= 4/3 merges */
    uint32_t merge_mask;
    int32_t byte_id[256];    /* BPE: the token of one byte; SPM: <0xNN>; -1 if none */

    int32_t *special;        /* ids matched in the text: CONTROL / USER_DEFINED / UNKNOWN, */
    int32_t n_special;       /*   sorted by first byte, then longest first */
    int32_t special_start[257]; /* special[special_start[b] .. special_start[b + 1]) start with b */

    int32_t bos, eos, eot, eom, unk, pad; /* -1 when absent */
    uint8_t *eog;            /* n_tokens flags: end of generation */
};

/* ---- tokenizer.c ---- */

/* Builds a tokenizer from f's tokenizer.* keys (f may be freed afterwards). Errors name the
 * key and the numbers: LEAN_ERR_MODEL (missing/ill-typed keys, merges naming unknown
 * tokens, ids out of range), LEAN_ERR_UNSUPPORTED (a model or pre-tokenizer lean does not
 * implement), LEAN_ERR_NOMEM. */
lean_status lean_tokenizer_build(const gguf_file *f, lean_tokenizer **out, lean_error *err);

/* For the model loader: *out = NULL when f has no tokenizer.ggml.model key; otherwise the
 * tokenizer, or — when it cannot be built — a tokenizer that holds the error and fails
 * every call with it (so the model still loads). Returns LEAN_ERR_NOMEM only when not even
 * that could be allocated; LEAN_OK otherwise. */
lean_status lean_tokenizer_for_model(const gguf_file *f, lean_tokenizer **out, lean_error *err);

/* lean_tokenize, where plain (nullable; text_bytes flags, 0 or 1) marks the bytes that are
 * text whatever the flags say: a CONTROL or UNKNOWN token is matched only where none of its
 * bytes is marked. lean_chat_tokenize marks the text that came from messages. */
lean_status tok_tokenize(const lean_tokenizer *t, const char *text, size_t text_bytes, uint32_t flags,
                         const uint8_t *plain, int32_t *ids, int32_t max_ids, int32_t *n_ids, lean_error *err);
/* The CONTROL or UNKNOWN token (the longest) whose text starts s[0..n), or -1: what
 * LEAN_TOKENIZE_PARSE_SPECIAL would read there as a token and plain text would not. */
int32_t tok_match_control(const lean_tokenizer *t, const char *s, size_t n);

/* A growable id array (the encoders append to it). */
typedef struct tok_ids {
    int32_t *v;
    size_t n, cap;
    bool oom;     /* an append failed: the result is incomplete */
} tok_ids;
void tok_ids_push(tok_ids *a, int32_t id);

/* The id whose string blob[off[id] .. off[id + 1] - 1) (each is NUL-terminated in the blob)
 * equals key[0..len), or -1. */
int32_t tok_hash_get(const tok_hash *h, const char *blob, const uint32_t *off, const char *key,
                     size_t len);
static inline int32_t tok_text_id(const lean_tokenizer *t, const char *s, size_t n) {
    return tok_hash_get(&t->by_text, t->text, t->text_off, s, n);
}
static inline size_t tok_text_len(const lean_tokenizer *t, int32_t id) {
    return t->text_off[id + 1] - t->text_off[id] - 1;
}

/* ---- tokenizer_bpe.c: the encoders, on one text segment (no special tokens in it) ---- */

/* Byte-level BPE: normalizes (NFC when t->nfc), pre-tokenizes, merges each word (HF's
 * Word::merge_all order). s is valid UTF-8. */
lean_status tok_encode_bpe(const lean_tokenizer *t, const char *s, size_t n, tok_ids *out,
                           lean_error *err);
/* SentencePiece-style: "\u2581" for spaces (and before the segment when add_space_prefix),
 * merges by score (llama.cpp's llm_tokenizer_spm), byte fallback. s is valid UTF-8. */
lean_status tok_encode_spm(const lean_tokenizer *t, const char *s, size_t n, tok_ids *out,
                           lean_error *err);

/* GPT-2's bytes_to_unicode: the character (code point) byte b is written as in a byte-level
 * vocabulary, and back (-1 for a code point that stands for no byte). */
uint32_t tok_byte_to_cp(uint8_t b);
int tok_cp_to_byte(uint32_t cp);

#endif
