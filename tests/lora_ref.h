/* lora_ref.h — the references of the LoRA tests (test_lora.c, test_gpu_lora.c), two sources in one
 * format (scripts/make_lora.py's): for the parity model NAME (build/fixtures/NAME-f32.gguf, its
 * SHA-256 the one tests/data/fixtures/NAME.txt records) and its adapters DIR/NAME-LABEL.gguf,
 * each adapter's SHA-256 ("adapter LABEL HEX"), the prompt, and per case ("case NAME N
 * LABEL:SCALE...") the top-21 logits at three prompt positions, then "end".
 *   numpy: tests/data/lora/NAME.txt, a float64 forward from the math, adapters a, b and e in
 *          build/lora/ (make_lora.py; `make test-data`), three cases (b and e adapt the
 *          embedding too);
 *   PEFT:  tests/data/lora/peft/peft-NAME.txt, transformers + PEFT, adapter "peft" converted as
 *          convert_lora_to_gguf.py does, committed beside it (scripts/lora_peft_reference.py
 *          made both on the H200 machine; they cannot be remade without torch + peft), one case.
 * Header-only, as fixture.h is. */
#ifndef LEAN_TEST_LORA_REF_H
#define LEAN_TEST_LORA_REF_H

#include "fixture.h"
#include "lean.h"
#include "test.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { LORA_REF_MAX = 3 }; /* adapters in a reference, and cases */

/* the parity models the adapters are made for */
static const char *const LORA_NAMES[] = {"llama", "llama-tied", "qwen2", "qwen2-untied", "qwen3", "qwen3-tied"};

/* where a reference and its adapters are */
typedef struct lora_source {
    const char *who;      /* in messages */
    const char *ref;      /* the reference file, %s the model's name */
    const char *adapters; /* the adapters' folder */
    const char *remake;   /* how its adapters are made, for a mismatch's message */
} lora_source;

static const lora_source LORA_NUMPY = {"numpy", "tests/data/lora/%s.txt", "build/lora", "make test-data"};
static const lora_source LORA_PEFT = {"PEFT", "tests/data/lora/peft/peft-%s.txt", "tests/data/lora/peft",
                                      "committed: scripts/lora_peft_reference.py, torch + peft"};

typedef struct ref_case {
    char name[16];
    int n_terms;
    int adapter[2]; /* indices into ref_file's adapters (a case has up to 2 terms) */
    float scale[2];
    int n_pos;
    int pos[3];
    int ids[3][21];
    float logit[3][21];
} ref_case;

typedef struct ref_file {
    int n_adapters;
    char label[LORA_REF_MAX][16], sha[LORA_REF_MAX][65];
    int prompt[16], n_prompt;
    ref_case cases[LORA_REF_MAX];
    int n_cases;
} ref_file;

/* Reads src's reference of model name; true when it is whole (every case's terms name an
 * adapter of the file, three positions of 21 logits each, "end"). */
static bool read_ref(const lora_source *src, const char *name, ref_file *r) {
    char path[128], line[4096];
    snprintf(path, sizeof path, src->ref, name);
    FILE *f = fopen(path, "r");
    if (!f) return false;
    memset(r, 0, sizeof *r);
    bool ok = true, end = false;
    while (ok && fgets(line, sizeof line, f)) {
        char lb[16], hex[65];
        ref_case *c = r->n_cases ? &r->cases[r->n_cases - 1] : NULL;
        if (sscanf(line, "adapter %15s %64s", lb, hex) == 2) {
            ok = r->n_adapters < LORA_REF_MAX && strlen(hex) == 64;
            if (ok) snprintf(r->label[r->n_adapters], 16, "%s", lb), memcpy(r->sha[r->n_adapters++], hex, 65);
        } else if (!strncmp(line, "prompt ", 7)) {
            char *p = line + 7, *e;
            r->n_prompt = (int)strtol(p, &e, 10);
            for (int i = 0; i < r->n_prompt && i < 16; i++) r->prompt[i] = (int)strtol(e, &e, 10);
        } else if (!strncmp(line, "case ", 5)) {
            ok = r->n_cases < LORA_REF_MAX;
            c = &r->cases[r->n_cases++];
            char t[2][32] = {{0}};
            const int n = ok ? sscanf(line, "case %15s %d %31s %31s", c->name, &c->n_terms, t[0], t[1]) : 0;
            ok = n >= 3 && c->n_terms >= 1 && c->n_terms <= 2 && n == 2 + c->n_terms;
            for (int i = 0; ok && i < c->n_terms; i++) {
                char *colon = strchr(t[i], ':');
                ok = colon != NULL;
                if (!ok) break;
                *colon = 0;
                c->scale[i] = strtof(colon + 1, NULL);
                c->adapter[i] = -1;
                for (int k = 0; k < r->n_adapters; k++)
                    if (!strcmp(r->label[k], t[i])) c->adapter[i] = k;
                ok = c->adapter[i] >= 0;
            }
        } else if (!strncmp(line, "logits ", 7)) {
            ok = c && c->n_pos < 3;
            char *p = line + 7, *e;
            const int pos = (int)strtol(p, &e, 10), k = (int)strtol(e, &e, 10);
            ok = ok && k == 21 && pos >= 1 && pos <= 16;
            for (int i = 0; ok && i < 21; i++) {
                c->ids[c->n_pos][i] = (int)strtol(e, &e, 10);
                ok = *e == ':';
                c->logit[c->n_pos][i] = strtof(e + 1, &e); /* past the ':' */
            }
            if (ok) c->pos[c->n_pos++] = pos;
        } else if (!strncmp(line, "end", 3)) {
            end = true;
        }
    }
    fclose(f);
    for (int k = 0; k < r->n_cases; k++) ok &= r->cases[k].n_pos == 3;
    return ok && end && r->n_prompt == 16 && r->n_cases >= 1;
}

/* The parity model NAME in F32 (build/fixtures/NAME-f32.gguf, checked against the hash
 * transformers' fixture records), loaded; NULL, CHECKed, when it is missing, altered or refused. */
static lean_model *lora_ref_model(const char *name) {
    char path[160], sha[65];
    snprintf(path, sizeof path, "build/fixtures/%s-f32.gguf", name);
    const bool same = fixture_recorded_sha(name, "f32", sha) && fixture_file_matches(path, sha);
    CHECK(same, "%s: missing or not the model of tests/data/fixtures/%s.txt (make test-data)", path, name);
    lean_error err;
    lean_model *m = NULL;
    if (same) CHECK(lean_model_load_file(path, &m, &err) == LEAN_OK, "%s: %s", path, err.msg);
    return m;
}

/* src's reference for model m (the parity model name) into r and its adapters, checked against
 * the reference's hashes, loaded into ad; false, with each problem CHECKed, when the reference is
 * incomplete or any adapter is missing, altered or refused. */
static bool lora_ref_open(const lora_source *src, const char *name, const lean_model *m, ref_file *r,
                          lean_lora *ad[LORA_REF_MAX]) {
    char path[160];
    for (int i = 0; i < LORA_REF_MAX; i++) ad[i] = NULL;
    if (!read_ref(src, name, r)) {
        snprintf(path, sizeof path, src->ref, name);
        CHECK(0, "%s: missing, malformed or incomplete", path);
        return false;
    }
    bool all = true;
    for (int i = 0; i < r->n_adapters; i++) {
        snprintf(path, sizeof path, "%s/%s-%s.gguf", src->adapters, name, r->label[i]);
        const bool match = fixture_file_matches(path, r->sha[i]);
        CHECK(match, "%s: not the adapter %s saw (%s)", path, src->who, src->remake);
        lean_error err;
        const lean_status st = match ? lean_lora_load_file(m, path, &ad[i], &err) : LEAN_ERR_IO;
        if (match) CHECK(st == LEAN_OK, "%s: %s", path, err.msg);
        all &= st == LEAN_OK;
    }
    if (!all)
        for (int i = 0; i < LORA_REF_MAX; i++) lean_lora_free(ad[i]), ad[i] = NULL;
    return all;
}

#endif
