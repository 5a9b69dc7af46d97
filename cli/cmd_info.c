/* cmd_info.c — `lean info FILE`: what a model file holds; `lean info --gpu`: the WebGPU
 * adapter lean would use. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const usage_info =
    "usage: lean info FILE\n"
    "       lean info --gpu [FILE]\n"
    "Prints the architecture, name, shapes, context length, tensor count per type, total\n"
    "parameters and bytes, tokenizer kind and whether a chat template is present.\n"
    "--gpu: first the WebGPU adapter lean would use: its backend and feature level,\n"
    "features, limits and the library it came from (exit status 1 if there is none; the\n"
    "message says where the library was searched for).\n";

static void print_count(const char *label, uint64_t n) {
    const char *unit = "";
    double v = (double)n;
    if (n >= 1000000000ull) v /= 1e9, unit = "B";
    else if (n >= 1000000ull) v /= 1e6, unit = "M";
    else if (n >= 1000ull) v /= 1e3, unit = "K";
    printf("%-14s %llu", label, (unsigned long long)n);
    if (*unit) printf(" (%.2f %s)", v, unit);
    printf("\n");
}

/* `lean info --gpu`: the adapter, or why there is none. */
static int print_gpu(void) {
    char text[2048];
    lean_error err;
    if (lean_gpu_probe(text, sizeof text, &err) != LEAN_OK) return lib_error(&err);
    printf("%s", text);
    return 0;
}

int cmd_info(int argc, char **argv) {
    if (argc >= 1 && is_help(argv[0])) return printf("%s", usage_info), 0;
    if (argc >= 1 && strcmp(argv[0], "--gpu") == 0) {
        if (argc > 2) return usage_error(usage_info, "info --gpu takes at most one FILE");
        int rc = print_gpu();
        if (rc != 0 || argc == 1) return rc;
        printf("\n");
        argc--, argv++;
    }
    if (argc != 1) return usage_error(usage_info, "info takes one FILE");
    lean_error err;
    lean_model *m;
    if (lean_model_load_file(argv[0], &m, &err) != LEAN_OK) return lib_error(&err);
    lean_model_info in;
    lean_model_get_info(m, &in);
    printf("%-14s %s\n", "file", argv[0]);
    printf("%-14s %s\n", "architecture", in.arch);
    printf("%-14s %s\n", "name", *in.name ? in.name : "(none)");
    printf("%-14s %d\n", "vocab", in.n_vocab);
    printf("%-14s %d\n", "embedding", in.n_embd);
    printf("%-14s %d\n", "layers", in.n_layer);
    printf("%-14s %d (kv %d), head_dim %d\n", "heads", in.n_head, in.n_head_kv, in.head_dim);
    printf("%-14s %d\n", "feed-forward", in.n_ff);
    printf("%-14s %d\n", "context", in.n_ctx_train);
    printf("%-14s %g\n", "rope base", (double)in.rope_base);
    printf("%-14s %g\n", "rms eps", (double)in.rms_eps);
    printf("%-14s %s\n", "output", in.tied_output ? "tied to token_embd" : "output.weight");
    printf("%-14s %d:", "tensors", in.n_tensors);
    for (int t = 0; t < 32; t++)
        if (in.n_tensors_by_type[t])
            printf(" %s %d", lean_type_name(t) ? lean_type_name(t) : "?", in.n_tensors_by_type[t]);
    printf("\n");
    print_count("parameters", in.n_params);
    printf("%-14s %llu (%.1f MiB)\n", "weight bytes", (unsigned long long)in.weight_bytes,
           (double)in.weight_bytes / (1024.0 * 1024.0));
    printf("%-14s %s\n", "tokenizer", *in.tokenizer ? in.tokenizer : "(none)");
    printf("%-14s %s\n", "chat template", in.has_chat_template ? "yes" : "no");
    lean_model_free(m);
    return 0;
}

/* ---- run ---- */

/* "1,2,3" -> *ids (malloc'd), *n. 0 on success. */
