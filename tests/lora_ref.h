/* lora_ref.h — the numpy reference of the LoRA tests (test_lora.c, test_gpu_lora.c):
 * tests/data/lora/NAME.txt, written by scripts/make_lora.py for the parity model NAME and its two
 * adapters build/lora/NAME-{a,b}.gguf (their SHA-256, the prompt, and per case the adapters and
 * scales and the top-21 logits at three prompt positions). Header-only, as fixture.h is. */
#ifndef LEAN_TEST_LORA_REF_H
#define LEAN_TEST_LORA_REF_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the parity models the adapters are made for */
static const char *const LORA_NAMES[] = {"llama", "llama-tied", "qwen2", "qwen2-untied", "qwen3", "qwen3-tied"};

typedef struct ref_case {
    char name[16];
    int n_terms;
    char label[2];
    float scale[2];
    int pos[3];
    int ids[3][21];
    float logit[3][21];
} ref_case;

typedef struct ref_file {
    char sha[2][65]; /* adapters a, b */
    int prompt[16], n_prompt;
    ref_case cases[2];
    int n_cases;
} ref_file;

static bool read_ref(const char *name, ref_file *r) {
    char path[128], line[4096];
    snprintf(path, sizeof path, "tests/data/lora/%s.txt", name);
    FILE *f = fopen(path, "r");
    if (!f) return false;
    memset(r, 0, sizeof *r);
    int n_pos = 0;
    while (fgets(line, sizeof line, f)) {
        char lb[8], hex[65];
        if (sscanf(line, "adapter %7s %64s", lb, hex) == 2) {
            snprintf(r->sha[lb[0] == 'b'], 65, "%s", hex);
        } else if (!strncmp(line, "prompt ", 7)) {
            char *p = line + 7, *end;
            r->n_prompt = (int)strtol(p, &end, 10);
            for (int i = 0; i < r->n_prompt && i < 16; i++) r->prompt[i] = (int)strtol(end, &end, 10);
        } else if (!strncmp(line, "case ", 5) && r->n_cases < 2) {
            ref_case *c = &r->cases[r->n_cases++];
            char t[2][32] = {{0}};
            sscanf(line, "case %15s %d %31s %31s", c->name, &c->n_terms, t[0], t[1]);
            for (int i = 0; i < c->n_terms && i < 2; i++) c->label[i] = t[i][0], c->scale[i] = strtof(t[i] + 2, NULL);
            n_pos = 0;
        } else if (!strncmp(line, "logits ", 7) && r->n_cases && n_pos < 3) {
            ref_case *c = &r->cases[r->n_cases - 1];
            char *p = line + 7, *end;
            c->pos[n_pos] = (int)strtol(p, &end, 10);
            const int k = (int)strtol(end, &end, 10);
            for (int i = 0; i < k && i < 21; i++) {
                c->ids[n_pos][i] = (int)strtol(end, &end, 10);
                c->logit[n_pos][i] = strtof(end + 1, &end); /* past the ':' */
            }
            n_pos++;
        }
    }
    fclose(f);
    return r->n_prompt == 16 && r->n_cases == 2;
}

#endif
