/* lean_dev.h — the developer tools: the model generator and the file quantizer (generate.c;
 * the row quantizers are dev/quantize.h). Not part of the runtime library: they are built
 * into liblean_dev.a, which the CLI (`lean gen`, `lean quantize`) and the tests link beside
 * liblean.a. */
#ifndef LEAN_DEV_H
#define LEAN_DEV_H

#include "lean.h"

/* Writes a GGUF with seeded random weights at an architecture preset's shapes:
 * "smollm2-135m", "smollm2-360m", "smollm2-1.7b", "qwen2.5-0.5b", "qwen3-0.6b",
 * "llama-3.2-1b", or the tiny test shapes "tiny-llama", "tiny-qwen2", "tiny-qwen3".
 * recipe: a type name ("q4_0", "f16", ...) for every matrix, or "q4_k_m" / "q5_k_m"
 * (llama.cpp's mixed layouts). vocab_path (nullable): a GGUF whose tokenizer.* keys are copied in
 * (its token count sets n_vocab); without one a byte-level stand-in vocabulary is used. */
typedef struct lean_gen_params {
    const char *preset;
    const char *recipe;
    const char *vocab_path;
    uint64_t seed;
    int32_t n_layer; /* 0 = the preset's; fewer layers make quick test files */
    lean_progress_fn progress; /* nullable: tensors written (lean.h, "progress") */
    void *progress_user;
} lean_gen_params;
lean_status lean_generate_model(const lean_gen_params *p, const char *out_path, lean_error *err);

/* Re-encodes every 2-D weight matrix of in_path with recipe (as above); norms, biases
 * and other 1-D tensors stay F32. */
lean_status lean_quantize_file(const char *in_path, const char *out_path, const char *recipe,
                               lean_error *err);
/* The same, with a progress callback. */
typedef struct lean_quantize_params {
    const char *recipe;
    lean_progress_fn progress; /* nullable: tensors written (lean.h, "progress") */
    void *progress_user;
} lean_quantize_params;
lean_status lean_quantize_file_params(const char *in_path, const char *out_path, const lean_quantize_params *p,
                                      lean_error *err);

#endif
