/* cmd_gen.c — `lean gen` (a random-weight model at a preset's shapes) and
 * `lean quantize` (re-encode a model's matrices). */
#include "cli.h"
#include "dev/lean_dev.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const usage_gen =
    "usage: lean gen --preset P --type T [--vocab FILE] [--seed S] [--layers N] -o OUT\n"
    "Writes a model with seeded random weights at a preset's shapes.\n"
    "  --preset P   smollm2-135m, smollm2-360m, smollm2-1.7b, qwen2.5-0.5b, qwen3-0.6b,\n"
    "               llama-3.2-1b, tiny-llama, tiny-qwen2, tiny-qwen3\n"
    "  --type T     a type for every matrix (f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1,\n"
    "               q2_k, q3_k, q4_k, q5_k, q6_k) or q4_k_m (llama.cpp's mixed layout)\n"
    "  --vocab FILE a GGUF whose tokenizer is copied in (default: a byte-level stand-in)\n"
    "  --seed S     random seed (default 1)\n"
    "  --layers N   fewer layers than the preset's (default: the preset's)\n"
    "  -o OUT       the file to write\n";

static const char *const usage_quantize =
    "usage: lean quantize IN OUT TYPE\n"
    "Re-encodes every 2-D weight matrix of IN as TYPE (or the q4_k_m recipe); norms,\n"
    "biases and other 1-D tensors stay f32.\n";

int cmd_gen(int argc, char **argv) {
    lean_gen_params p = {.seed = 1};
    const char *out = NULL;
    for (int i = 0; i < argc; i++) {
        const char *o = argv[i];
        if (is_help(o)) return printf("%s", usage_gen), 0;
        if (i + 1 >= argc) return usage_error(usage_gen, "'%s' needs a value (or is unknown)", o);
        const char *v = argv[++i];
        long long x;
        if (strcmp(o, "--preset") == 0) p.preset = v;
        else if (strcmp(o, "--type") == 0) p.recipe = v;
        else if (strcmp(o, "--vocab") == 0) p.vocab_path = v;
        else if (strcmp(o, "-o") == 0) out = v;
        else if (strcmp(o, "--seed") == 0) {
            char *end;
            errno = 0;
            p.seed = strtoull(v, &end, 10);
            if (errno || end == v || *end || *v == '-')
                return usage_error(usage_gen, "--seed expects an unsigned integer, got '%s'", v);
        } else if (strcmp(o, "--layers") == 0) {
            if (parse_long(v, 0, INT32_MAX, &x) != 0)
                return usage_error(usage_gen, "--layers expects a count >= 0, got '%s'", v);
            p.n_layer = (int32_t)x;
        } else return usage_error(usage_gen, "unknown option '%s'", o);
    }
    if (!p.preset || !p.recipe || !out)
        return usage_error(usage_gen, "--preset, --type and -o are required");
    lean_error err;
    progress_bar bar;
    progress_begin(&bar, "writing");
    p.progress = progress_draw;
    p.progress_user = &bar;
    lean_status st = lean_generate_model(&p, out, &err);
    progress_draw(&bar, 1, 1); /* a failure leaves the bar short of its end: clear it */
    return st != LEAN_OK ? lib_error(&err) : 0;
}

int cmd_quantize(int argc, char **argv) {
    if (argc >= 1 && is_help(argv[0])) return printf("%s", usage_quantize), 0;
    if (argc != 3) return usage_error(usage_quantize, "quantize takes IN OUT TYPE");
    lean_error err;
    progress_bar bar;
    progress_begin(&bar, "writing");
    const lean_quantize_params p = {.recipe = argv[2], .progress = progress_draw, .progress_user = &bar};
    lean_status st = lean_quantize_file_params(argv[0], argv[1], &p, &err);
    progress_draw(&bar, 1, 1); /* a failure leaves the bar short of its end: clear it */
    return st != LEAN_OK ? lib_error(&err) : 0;
}
