/* test_template.c — chat templates (src/template/template*.c) held to jinja2, byte for byte.
 *
 *   1. jinja2 agreement   every template of tests/data/templates/refs.json (real families'
 *                         chat templates, from npm packages; scripts/make_template_refs.py)
 *                         x every conversation x add_generation_prompt false/true: lean's
 *                         render equals jinja2's, or both fail (with raise_exception's message).
 *                         LEAN_TEMPLATE_REFS=path/refs.json checks another set instead.
 *                         An entry naming a "gguf" (the demo model) is rendered with the
 *                         template and bos/eos tokens lean reads from that file.
 *   2. the API            ChatML fallback (NULL template), arguments, JSON messages, the
 *                         model's template and tokens
 *   3. Jinja semantics    small templates whose jinja2 output is written down here
 *   4. refusals           unsupported constructs and malformed templates fail with a message
 *                         naming the construct and its line/column, and never crash; every
 *                         builtin without parameters, called with a keyword or positional
 *                         argument, fails naming itself and the argument (it once read a NULL
 *                         parameter name)
 *   5. limits             deep nesting, recursion, long loops and huge strings stop with errors
 *   6. robustness         every prefix and many mutations of real templates: no crash
 *   7. out of memory      the n-th allocation fails for every n: LEAN_ERR_NOMEM, no leak
 */
#include "template/json.h"
#include "core/model.h"
#include "dev/gguf_writer.h"
#include "template/template.h"
#include "test.h"

#include <stdlib.h>
#include <string.h>

static char *read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    size_t k;
    while (buf && (k = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += k;
        if (cap - len < 2) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf) buf[len] = 0;
    if (n) *n = len;
    return buf;
}

/* Renders src with a conversation; returns the status, *out malloc'd (or NULL). */
static lean_status render(const char *src, const lean_chat_message *m, size_t n, int agp, const char *bos,
                          const char *eos, char **out, size_t *len, lean_error *err) {
    lean_chat_params p = lean_chat_default_params();
    p.add_generation_prompt = agp;
    p.bos_token = bos;
    p.eos_token = eos;
    p.now_s = 1721995200; /* 2024-07-26 12:00 UTC, as the references */
    *out = NULL;
    return lean_chat_render_ex(src, m, n, &p, out, len, err);
}

/* Renders with one user message "hi"; the output (malloc'd) or NULL with *err set. */
static char *render1(const char *src, lean_error *err) {
    lean_chat_message m[] = {{"user", "hi"}};
    char *out;
    size_t len;
    lean_status st = render(src, m, 1, 1, "<s>", "</s>", &out, &len, err);
    return st == LEAN_OK ? out : NULL;
}

static void expect_render(const char *src, const char *want, int line) {
    lean_error err = {0};
    char *out = render1(src, &err);
    if (!out) {
        t_failed++;
        fprintf(stderr, "test_template.c:%d: FAIL: %s\n  error: %s\n", line, src, err.msg);
        return;
    }
    if (strcmp(out, want) != 0) {
        t_failed++;
        fprintf(stderr, "test_template.c:%d: FAIL: %s\n  got:  [%s]\n  want: [%s]\n", line, src, out, want);
    } else {
        t_passed++;
    }
    lean_chat_free(out);
}
#define EXPECT(src, want) expect_render(src, want, __LINE__)

/* The template fails with status st and a message containing each of the fragments. */
static void expect_error(const char *src, lean_status st, const char *frag1, const char *frag2, int line) {
    lean_error err = {0};
    char *out = render1(src, &err);
    if (out) {
        t_failed++;
        fprintf(stderr, "test_template.c:%d: FAIL: %s\n  rendered [%s], expected an error\n", line, src, out);
        lean_chat_free(out);
        return;
    }
    bool ok = err.status == st && (!frag1 || strstr(err.msg, frag1)) && (!frag2 || strstr(err.msg, frag2));
    if (!ok) {
        t_failed++;
        fprintf(stderr, "test_template.c:%d: FAIL: %s\n  error %s: %s\n  expected %s with '%s' '%s'\n", line, src,
                lean_status_str(err.status), err.msg, lean_status_str(st), frag1 ? frag1 : "", frag2 ? frag2 : "");
    } else {
        t_passed++;
    }
}
#define EXPECT_ERR(src, st, f1, f2) expect_error(src, st, f1, f2, __LINE__)

/* ---- 1. jinja2 agreement ---- */

static const char *jstr(const json_value *o, const char *key) {
    const json_value *v = json_get(o, key);
    return v && v->type == JSON_STRING ? v->str : NULL;
}

static void show_diff(const char *name, int conv, int agp, const char *got, size_t got_n, const char *want, size_t want_n) {
    size_t i = 0;
    while (i < got_n && i < want_n && got[i] == want[i]) i++;
    size_t from = i > 40 ? i - 40 : 0;
    fprintf(stderr, "  %s conv %d agp %d: differs at byte %zu (got %zu bytes, want %zu)\n", name, conv, agp, i, got_n, want_n);
    fprintf(stderr, "    got:  [%.*s]\n", (int)((got_n - from) > 120 ? 120 : got_n - from), got + from);
    fprintf(stderr, "    want: [%.*s]\n", (int)((want_n - from) > 120 ? 120 : want_n - from), want + from);
}

/* The chat template and bos/eos tokens lean reads from a model file, for a refs.json entry
 * naming one (the demo model): its template must be the entry's file, its tokens the entry's.
 * Read through stdio, as lean reads a model where there is no mmap (WASI). */
static gguf_file *model_template(const char *path, const char *file_src, const json_value *tm, const char **tmpl,
                                 lean_chat_params *p) {
    FILE *fp = fopen(path, "rb");
    CHECK(fp != NULL, "cannot open %s", path);
    if (!fp) return NULL;
    fseek(fp, 0, SEEK_END);
    long size = ftell(fp);
    gguf_file *f = NULL;
    lean_error err = {0};
    CHECK(size > 0 && gguf_read(lean_read_stdio, fp, (uint64_t)size, &f, &err) == LEAN_OK, "%s: %s", path, err.msg);
    fclose(fp);
    if (!f) return NULL;
    struct lean_model model;
    memset(&model, 0, sizeof model);
    model.gguf = f;
    *tmpl = lean_model_chat_template(&model);
    CHECK(*tmpl && strcmp(*tmpl, file_src) == 0, "%s: its chat template is not %s", path, jstr(tm, "file"));
    lean_chat_params_from_model(&model, p);
    const char *bos = jstr(tm, "bos_token"), *eos = jstr(tm, "eos_token");
    CHECK(p->bos_token && bos && strcmp(p->bos_token, bos) == 0 && p->eos_token && eos && strcmp(p->eos_token, eos) == 0,
          "%s: bos/eos %s/%s, refs.json says %s/%s", path, p->bos_token ? p->bos_token : "(none)",
          p->eos_token ? p->eos_token : "(none)", bos ? bos : "(none)", eos ? eos : "(none)");
    if (!*tmpl) {
        gguf_free(f);
        return NULL;
    }
    return f;
}

static void test_refs(void) {
    const char *path = getenv("LEAN_TEMPLATE_REFS");
    if (!path || !*path) path = "tests/data/templates/refs.json";
    char dir[512];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) slash[1] = 0;
    else dir[0] = 0;

    size_t n;
    char *text = read_file(path, &n);
    CHECK(text != NULL, "cannot read %s", path);
    if (!text) return;
    json_value *refs = NULL;
    lean_error err = {0};
    CHECK(json_parse(text, n, &refs, &err) == LEAN_OK, "%s: %s", path, err.msg);
    free(text);
    if (!refs) return;

    const json_value *convs = json_get(refs, "conversations");
    const json_value *tmpls = json_get(refs, "templates");
    const json_value *now = json_get(refs, "now_s");
    CHECK(convs && tmpls && now && convs->type == JSON_ARRAY && tmpls->type == JSON_ARRAY, "refs.json layout");
    if (!convs || !tmpls || !now) {
        json_free(refs);
        return;
    }
    /* the conversations as lean_chat_message arrays */
    lean_chat_message **msgs = calloc(convs->n, sizeof *msgs);
    size_t *n_msgs = calloc(convs->n, sizeof *n_msgs);
    for (size_t i = 0; i < convs->n; i++) {
        const json_value *ms = json_get(&convs->items[i], "messages");
        n_msgs[i] = ms->n;
        msgs[i] = calloc(ms->n ? ms->n : 1, sizeof **msgs);
        for (size_t j = 0; j < ms->n; j++) {
            msgs[i][j].role = jstr(&ms->items[j], "role");
            msgs[i][j].content = jstr(&ms->items[j], "content");
        }
    }
    int total = 0, agree = 0, n_err = 0;
    for (size_t t = 0; t < tmpls->n; t++) {
        const json_value *tm = &tmpls->items[t];
        const char *name = jstr(tm, "name");
        char file[1024];
        snprintf(file, sizeof file, "%s%s", dir, jstr(tm, "file"));
        char *src = read_file(file, NULL);
        CHECK(src != NULL, "cannot read %s", file);
        if (!src) continue;
        /* an entry naming a model file: the template and tokens as lean reads them from it */
        const char *gguf_path = jstr(tm, "gguf"), *tmpl = src;
        lean_chat_params from_model = lean_chat_default_params();
        gguf_file *model_file = gguf_path ? model_template(gguf_path, src, tm, &tmpl, &from_model) : NULL;
        if (gguf_path && !model_file) {
            free(src);
            continue;
        }
        const json_value *renders = json_get(tm, "renders");
        int t_agree = 0;
        for (size_t r = 0; r < renders->n; r++) {
            const json_value *rd = &renders->items[r];
            int conv = (int)json_get(rd, "conv")->num;
            int agp = json_get(rd, "add_generation_prompt")->type == JSON_TRUE;
            const json_value *want = json_get(rd, "output");
            char *out;
            size_t len;
            lean_error e = {0};
            lean_chat_params p = lean_chat_default_params();
            p.add_generation_prompt = agp;
            p.bos_token = model_file ? from_model.bos_token : jstr(tm, "bos_token");
            p.eos_token = model_file ? from_model.eos_token : jstr(tm, "eos_token");
            p.now_s = (int64_t)now->num;
            lean_status st = lean_chat_render_ex(tmpl, msgs[conv], n_msgs[conv], &p, &out, &len, &e);
            total++;
            bool ok;
            if (want) {
                ok = st == LEAN_OK && len == want->len && memcmp(out, want->str, len) == 0;
                if (!ok && st == LEAN_OK) show_diff(name, conv, agp, out, len, want->str, want->len);
                if (!ok && st != LEAN_OK) fprintf(stderr, "  %s conv %d agp %d: %s\n", name, conv, agp, e.msg);
            } else {
                n_err++;
                const char *kind = jstr(rd, "error"), *msg = jstr(rd, "message");
                ok = st != LEAN_OK;
                if (ok && kind && strcmp(kind, "TemplateError") == 0 && msg)
                    ok = st == LEAN_ERR_ARG && strstr(e.msg, "template raised: ") && strstr(e.msg, msg);
                if (!ok)
                    fprintf(stderr, "  %s conv %d agp %d: jinja2 raised %s (%s); lean: %s\n", name, conv, agp, kind,
                            msg ? msg : "", st == LEAN_OK ? "rendered" : e.msg);
            }
            if (st == LEAN_OK) lean_chat_free(out);
            CHECK(ok, "%s: conversation %d, add_generation_prompt %d differs from jinja2", name, conv, agp);
            agree += ok;
            t_agree += ok;
        }
        free(src);
        if (model_file) gguf_free(model_file);
        if (t_agree != (int)renders->n) fprintf(stderr, "  %s: %d of %zu agree\n", name, t_agree, renders->n);
    }
    printf("jinja2 agreement: %zu templates, %d of %d renders identical or failing alike (%d expected failures)\n",
           tmpls->n, agree, total, n_err);

    /* the snippets: one feature each, rendered with conversation 2 */
    const json_value *snips = json_get(refs, "snippets");
    int s_total = 0, s_agree = 0;
    for (size_t i = 0; snips && i < snips->n; i++) {
        const json_value *sn = &snips->items[i];
        const char *name = jstr(sn, "name"), *src = jstr(sn, "template");
        const json_value *want = json_get(sn, "output");
        char *out;
        size_t len;
        lean_error e = {0};
        lean_chat_params p = lean_chat_default_params();
        p.add_generation_prompt = 1;
        p.bos_token = "<s>";
        p.eos_token = "</s>";
        p.now_s = (int64_t)now->num;
        lean_status st = lean_chat_render_ex(src, msgs[2], n_msgs[2], &p, &out, &len, &e);
        bool ok;
        if (want) {
            ok = st == LEAN_OK && len == want->len && memcmp(out, want->str, len) == 0;
            if (!ok && st == LEAN_OK) show_diff(name, 2, 1, out, len, want->str, want->len);
            if (!ok && st != LEAN_OK) fprintf(stderr, "  snippet %s: %s\n", name, e.msg);
        } else {
            const char *kind = jstr(sn, "error"), *msg = jstr(sn, "message");
            ok = st != LEAN_OK;
            if (ok && kind && strcmp(kind, "TemplateError") == 0 && msg)
                ok = st == LEAN_ERR_ARG && strstr(e.msg, msg) != NULL;
            if (ok && kind && strcmp(kind, "TemplateSyntaxError") == 0) ok = st == LEAN_ERR_FORMAT;
            if (!ok)
                fprintf(stderr, "  snippet %s: jinja2 raised %s (%s); lean: %s\n", name, kind, msg ? msg : "",
                        st == LEAN_OK ? out : e.msg);
        }
        if (st == LEAN_OK) lean_chat_free(out);
        CHECK(ok, "snippet %s differs from jinja2", name);
        s_total++;
        s_agree += ok;
    }
    printf("jinja2 agreement: %d of %d feature snippets\n", s_agree, s_total);
    for (size_t i = 0; i < convs->n; i++) free(msgs[i]);
    free(msgs);
    free(n_msgs);
    json_free(refs);
}

/* ---- 2. the API ---- */

static void test_api(void) {
    lean_error err = {0};
    char *out = NULL;
    size_t len = 0;

    /* the fallback is the committed chatml.jinja, which jinja2 rendered in test_refs */
    char *file = read_file("tests/data/templates/chatml.jinja", NULL);
    CHECK(file && strcmp(file, lean_chat_template_chatml()) == 0, "lean_chat_template_chatml() differs from chatml.jinja");
    free(file);
    lean_chat_message m[] = {{"system", "S"}, {"user", "U \"q\""}};
    CHECK(lean_chat_render(NULL, m, 2, 1, NULL, NULL, &out, &len, &err) == LEAN_OK, "%s", err.msg);
    const char *want = "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU \"q\"<|im_end|>\n<|im_start|>assistant\n";
    CHECK(out && strcmp(out, want) == 0 && len == strlen(want), "ChatML: [%s]", out ? out : "");
    lean_chat_free(out);
    CHECK(lean_chat_render(NULL, m, 0, 0, NULL, NULL, &out, &len, &err) == LEAN_OK && len == 0 && out && out[0] == 0,
          "no messages: empty text");
    lean_chat_free(out);

    /* arguments */
    char *sentinel = (char *)"untouched";
    out = sentinel;
    CHECK(lean_chat_render(NULL, m, 2, 0, NULL, NULL, NULL, &len, &err) == LEAN_ERR_ARG, "out NULL");
    CHECK(lean_chat_render(NULL, NULL, 2, 0, NULL, NULL, &out, &len, &err) == LEAN_ERR_ARG && out == sentinel, "messages NULL");
    lean_chat_message bad[] = {{"user", NULL}};
    CHECK(lean_chat_render(NULL, bad, 1, 0, NULL, NULL, &out, &len, &err) == LEAN_ERR_ARG && strstr(err.msg, "content"),
          "NULL content: %s", err.msg);
    CHECK(lean_chat_render_ex(NULL, m, 2, NULL, &out, &len, &err) == LEAN_ERR_ARG, "params NULL");
    CHECK(lean_chat_render("{{ x.y }}", m, 2, 0, NULL, NULL, &out, &len, &err) == LEAN_ERR_ARG && out == sentinel,
          "a failing render leaves *out untouched");
    CHECK(lean_chat_render("{{ x.y }}", m, 2, 0, NULL, NULL, &out, NULL, NULL) == LEAN_ERR_ARG, "err may be NULL");
    CHECK(lean_chat_render("ok", m, 2, 0, NULL, NULL, &out, NULL, NULL) == LEAN_OK && strcmp(out, "ok") == 0, "out_len may be NULL");
    lean_chat_free(out);
    lean_chat_free(NULL);

    /* bos/eos: NULL leaves the variable undefined, as transformers does for a missing token */
    EXPECT("{{ bos_token is defined }}{{ bos_token }}|{{ eos_token }}", "True<s>|</s>");
    CHECK(lean_chat_render("[{{ bos_token }}]{{ eos_token is defined }}", m, 2, 0, NULL, NULL, &out, &len, &err) == LEAN_OK &&
              strcmp(out, "[]False") == 0, "NULL tokens: %s", out);
    lean_chat_free(out);
    /* strftime_now: the default clock is the current time (a four-digit year) */
    lean_chat_params p = lean_chat_default_params();
    CHECK(p.now_s == LEAN_CHAT_NOW && p.add_generation_prompt == 0 && !p.bos_token, "defaults");
    CHECK(lean_chat_render_ex("{{ strftime_now('%Y') }}", m, 2, &p, &out, &len, &err) == LEAN_OK && len == 4 &&
              out[0] == '2', "strftime_now now: %s", out);
    lean_chat_free(out);
    p.now_s = 0;
    CHECK(lean_chat_render_ex("{{ strftime_now('%d %b %Y %H:%M') }}", m, 2, &p, &out, &len, &err) == LEAN_OK &&
              strcmp(out, "01 Jan 1970 00:00") == 0, "strftime_now epoch: %s", out);
    lean_chat_free(out);

    /* JSON messages */
    const char *js = " [ {\"role\": \"user\", \"content\": \"a\\u00e9\\ud83d\\ude42\\n\\\"\"},\n"
                     "   {\"content\": \"b\", \"role\": \"assistant\", \"extra\": [1, {\"x\": null}, 2.5e3, true]} ] ";
    lean_chat_message *msgs = NULL;
    size_t n = 0;
    CHECK(lean_chat_parse_messages(js, strlen(js), &msgs, &n, &err) == LEAN_OK && n == 2, "parse: %s", err.msg);
    if (msgs && n == 2) {
        CHECK(strcmp(msgs[0].role, "user") == 0 && strcmp(msgs[0].content, "a\xc3\xa9\xf0\x9f\x99\x82\n\"") == 0, "message 0");
        CHECK(strcmp(msgs[1].role, "assistant") == 0 && strcmp(msgs[1].content, "b") == 0, "message 1");
    }
    lean_chat_messages_free(msgs, n);
    CHECK(lean_chat_parse_messages("[]", 2, &msgs, &n, &err) == LEAN_OK && n == 0, "empty list");
    lean_chat_messages_free(msgs, n);
    static const char *const bad_json[] = {
        "{}", "[{\"role\": \"user\"}]", "[{\"role\": 1, \"content\": \"x\"}]", "[{\"role\": \"u\", \"content\": \"a\\u0000b\"}]",
        "[1,]", "[", "[\"\\ud800\"]", "[] x", "[{\"role\": \"u\", \"content\": \"\x01\"}]", "[{\"role\": \"u\" \"content\": \"\"}]",
        "", "[tru]", "[01]", "[1.]", "[\"\\x\"]", "[{\"role\": \"u\", \"content\": null}]",
    };
    for (size_t i = 0; i < sizeof bad_json / sizeof bad_json[0]; i++) {
        msgs = NULL;
        lean_status st = lean_chat_parse_messages(bad_json[i], strlen(bad_json[i]), &msgs, &n, &err);
        CHECK(st == LEAN_ERR_FORMAT && msgs == NULL && err.msg[0], "bad JSON %zu (%s): %s", i, bad_json[i], lean_status_str(st));
    }
    char deep[300];
    memset(deep, '[', 200);
    memset(deep + 200, ']', 99);
    deep[299] = 0;
    CHECK(lean_chat_parse_messages(deep, strlen(deep), &msgs, &n, &err) == LEAN_ERR_FORMAT && strstr(err.msg, "deeper"),
          "deep JSON: %s", err.msg);
}

/* The model's template and tokens: a gguf_file with just the tokenizer keys. */
static void test_model_template(void) {
    gguf_writer *w = gguf_writer_new();
    const char *toks[] = {"<|begin|>", "<|end|>", "a"};
    gguf_w_str(w, "tokenizer.chat_template", "{{ bos_token }}{{ messages[0].content }}{{ eos_token }}");
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, 3);
    gguf_w_u32(w, "tokenizer.ggml.bos_token_id", 0);
    gguf_w_u32(w, "tokenizer.ggml.eos_token_id", 1);
    void *mem = NULL;
    uint64_t bytes = 0;
    lean_error err = {0};
    CHECK(gguf_writer_write_mem(w, &mem, &bytes, &err) == LEAN_OK, "%s", err.msg);
    gguf_writer_free(w);
    lean_mapped_file mf = {mem, bytes};
    gguf_file *f = NULL;
    CHECK(gguf_read(lean_read_mapped, &mf, bytes, &f, &err) == LEAN_OK, "%s", err.msg);
    if (f) {
        struct lean_model model;
        memset(&model, 0, sizeof model);
        model.gguf = f;
        const char *t = lean_model_chat_template(&model);
        CHECK(t && strcmp(t, "{{ bos_token }}{{ messages[0].content }}{{ eos_token }}") == 0, "model template");
        lean_chat_params p = lean_chat_default_params();
        lean_chat_params_from_model(&model, &p);
        CHECK(p.bos_token && strcmp(p.bos_token, "<|begin|>") == 0 && p.eos_token && strcmp(p.eos_token, "<|end|>") == 0,
              "tokens from the model");
        lean_chat_message m[] = {{"user", "x"}};
        char *out;
        size_t len;
        CHECK(lean_chat_render_ex(t, m, 1, &p, &out, &len, &err) == LEAN_OK && strcmp(out, "<|begin|>x<|end|>") == 0,
              "render with the model's template");
        lean_chat_free(out);
        gguf_free(f);
    }
    lean_free(mem);
    /* a file without the keys: NULL template, params untouched */
    w = gguf_writer_new();
    gguf_w_u32(w, "tokenizer.ggml.bos_token_id", 7); /* out of range: no tokens */
    CHECK(gguf_writer_write_mem(w, &mem, &bytes, &err) == LEAN_OK, "%s", err.msg);
    gguf_writer_free(w);
    mf = (lean_mapped_file){mem, bytes};
    f = NULL;
    CHECK(gguf_read(lean_read_mapped, &mf, bytes, &f, &err) == LEAN_OK, "%s", err.msg);
    if (f) {
        struct lean_model model;
        memset(&model, 0, sizeof model);
        model.gguf = f;
        CHECK(lean_model_chat_template(&model) == NULL, "no template");
        lean_chat_params p = lean_chat_default_params();
        p.bos_token = "keep";
        lean_chat_params_from_model(&model, &p);
        CHECK(strcmp(p.bos_token, "keep") == 0 && p.eos_token == NULL, "params untouched");
        gguf_free(f);
    }
    lean_free(mem);
    CHECK(lean_model_chat_template(NULL) == NULL, "NULL model");
}

/* ---- 3. Jinja semantics not covered by the snippets ---- */

static void test_semantics(void) {
    EXPECT("{{ 1 + 2 }}", "3");
    EXPECT("{% for m in messages %}{{ m.role }}:{{ m.content }}{% endfor %}", "user:hi");
    EXPECT("{{ add_generation_prompt }} {{ tools }} {{ documents }}", "True None None");
    EXPECT("a\n", "a");                     /* one trailing newline dropped */
    EXPECT("a\n\n", "a\n");
    EXPECT("\xef\xbb\xbfx", "\xef\xbb\xbfx"); /* bytes pass through */
    EXPECT("{{ '\\x00' | length }}", "1");
    EXPECT("{% set ns = namespace(x=[]) %}{% set ns.x = ns.x + [1] %}{% set ns.x = ns.x + [2] %}{{ ns.x }}", "[1, 2]");
    EXPECT("{{ range(3)|map('string')|join }}", "012");
}

/* ---- 4. refusals ---- */

static void test_refusals(void) {
    /* what lean does not render: LEAN_ERR_UNSUPPORTED, naming the construct and where */
    EXPECT_ERR("{% include 'x' %}", LEAN_ERR_UNSUPPORTED, "line 1 col 4", "tag 'include' is not supported");
    EXPECT_ERR("{% extends 'base' %}", LEAN_ERR_UNSUPPORTED, "tag 'extends'", NULL);
    EXPECT_ERR("{% import 'x' as y %}", LEAN_ERR_UNSUPPORTED, "tag 'import'", NULL);
    EXPECT_ERR("{% from 'x' import y %}", LEAN_ERR_UNSUPPORTED, "tag 'from'", NULL);
    EXPECT_ERR("{% block b %}{% endblock %}", LEAN_ERR_UNSUPPORTED, "tag 'block'", NULL);
    EXPECT_ERR("{% call f() %}{% endcall %}", LEAN_ERR_UNSUPPORTED, "tag 'call'", NULL);
    EXPECT_ERR("{% autoescape true %}{% endautoescape %}", LEAN_ERR_UNSUPPORTED, "tag 'autoescape'", NULL);
    EXPECT_ERR("\n\n  {{ messages|groupby('role') }}", LEAN_ERR_UNSUPPORTED, "line 3 col 15", "filter 'groupby' is not supported");
    EXPECT_ERR("{{ x|urlize }}", LEAN_ERR_UNSUPPORTED, "filter 'urlize'", NULL);
    EXPECT_ERR("{% for x in [] %}{{ x|wordwrap }}{% endfor %}", LEAN_ERR_UNSUPPORTED, "filter 'wordwrap'", NULL);
    EXPECT_ERR("{% if true %}{{ x|xmlattr }}{% endif %}", LEAN_ERR_UNSUPPORTED, "filter 'xmlattr'", NULL);
    EXPECT_ERR("{% for x in y recursive %}{% endfor %}", LEAN_ERR_UNSUPPORTED, "recursive for loops", NULL);
    EXPECT_ERR("{{ f(*a) }}", LEAN_ERR_UNSUPPORTED, "*args", NULL);
    EXPECT_ERR("{{ dict(**a) }}", LEAN_ERR_UNSUPPORTED, "**kwargs", NULL);
    EXPECT_ERR("{{ lipsum() }}", LEAN_ERR_UNSUPPORTED, "global 'lipsum'", NULL);
    EXPECT_ERR("{{ cycler(1, 2) }}", LEAN_ERR_UNSUPPORTED, "global 'cycler'", NULL);
    EXPECT_ERR("{{ 'a'.encode() }}", LEAN_ERR_UNSUPPORTED, "str.encode()", NULL);
    EXPECT_ERR("{{ [1].pop() }}", LEAN_ERR_UNSUPPORTED, "list.pop()", NULL);
    EXPECT_ERR("{{ 99999999999999999999 }}", LEAN_ERR_UNSUPPORTED, "64 bits", NULL);
    EXPECT_ERR("{{ 9223372036854775807 + 1 }}", LEAN_ERR_UNSUPPORTED, "overflow", NULL);
    EXPECT_ERR("{{ '\\N{EM DASH}' }}", LEAN_ERR_UNSUPPORTED, "\\N{", NULL);
    EXPECT_ERR("{{ '{:>5}'.format(1) }}", LEAN_ERR_UNSUPPORTED, "str.format", NULL);
    EXPECT_ERR("{{ '%(a)s' % {'a': 1} }}", LEAN_ERR_UNSUPPORTED, "%(name)", NULL);
    EXPECT_ERR("{{ [1]|select }}", LEAN_ERR_UNSUPPORTED, "generator", NULL);
    EXPECT_ERR("{{ x|nosuchfilter }}", LEAN_ERR_FORMAT, "no filter named 'nosuchfilter'", NULL);
    EXPECT_ERR("{{ x is nosuchtest }}", LEAN_ERR_FORMAT, "no test named 'nosuchtest'", NULL);
    EXPECT_ERR("{% if true %}{{ x|nosuchfilter }}{% endif %}", LEAN_ERR_FORMAT, "no filter named", NULL);
    EXPECT_ERR("{{ raise_exception('Only user and assistant roles are supported!') }}", LEAN_ERR_ARG,
               "template raised: Only user and assistant roles are supported!", "line 1 col");

    /* malformed templates: LEAN_ERR_FORMAT with the position */
    EXPECT_ERR("{% if x %}", LEAN_ERR_FORMAT, "the 'if' at line 1 col 4 is not closed", NULL);
    EXPECT_ERR("{% for x in y %}{% if 1 %}{% endfor %}", LEAN_ERR_FORMAT, "unknown tag 'endfor'", NULL);
    EXPECT_ERR("{{ x ", LEAN_ERR_FORMAT, "is not closed", NULL);
    EXPECT_ERR("{% for %}", LEAN_ERR_FORMAT, "expected an expression", NULL);
    EXPECT_ERR("{% endfor %}", LEAN_ERR_FORMAT, "unknown tag 'endfor'", NULL);
    EXPECT_ERR("{% else %}", LEAN_ERR_FORMAT, "unknown tag 'else'", NULL);
    EXPECT_ERR("{{ ) }}", LEAN_ERR_FORMAT, "unexpected ')'", NULL);
    EXPECT_ERR("{{ (1, 2] }}", LEAN_ERR_FORMAT, "unexpected ']', expected ')'", NULL);
    EXPECT_ERR("a {# unclosed", LEAN_ERR_FORMAT, "missing end of comment", "line 1 col 3");
    EXPECT_ERR("{% raw %}x", LEAN_ERR_FORMAT, "missing end of raw", NULL);
    EXPECT_ERR("{{ 'abc }}", LEAN_ERR_FORMAT, "unterminated string", NULL);
    EXPECT_ERR("{{ x|| }}", LEAN_ERR_FORMAT, "expected a name", NULL);
    EXPECT_ERR("{% set = 1 %}", LEAN_ERR_FORMAT, NULL, NULL);
    EXPECT_ERR("{% set 1 = 1 %}", LEAN_ERR_FORMAT, "can't assign", NULL);
    EXPECT_ERR("{{ [1, 2 }}", LEAN_ERR_FORMAT, NULL, NULL);
    EXPECT_ERR("{{ {1: }}", LEAN_ERR_FORMAT, NULL, NULL);
    EXPECT_ERR("{% if %}{% endif %}", LEAN_ERR_FORMAT, "expected an expression", NULL);
    EXPECT_ERR("{{ 1 + }}", LEAN_ERR_FORMAT, NULL, NULL);
    EXPECT_ERR("{% break %}", LEAN_ERR_FORMAT, "'break' outside a for loop", NULL);
    EXPECT_ERR("{% for x in y %}{% macro m() %}{% continue %}{% endmacro %}{% endfor %}", LEAN_ERR_FORMAT, "'continue' outside", NULL);
    EXPECT_ERR("{% macro f(a=1, b) %}{% endmacro %}", LEAN_ERR_FORMAT, "non-default argument", NULL);
    EXPECT_ERR("{{ x is }}", LEAN_ERR_FORMAT, "expected a name", NULL);
    EXPECT_ERR("{{ '\\xZZ' }}", LEAN_ERR_FORMAT, "truncated \\x escape", NULL);
    EXPECT_ERR("{{ @ }}", LEAN_ERR_FORMAT, "unexpected character '@'", NULL);
    EXPECT_ERR("{{ 1 is defined is defined }}", LEAN_ERR_FORMAT, NULL, NULL);
    EXPECT_ERR("{{ f(a=1, 2) }}", LEAN_ERR_FORMAT, "positional argument after a keyword", NULL);
    EXPECT_ERR("{% foo %}", LEAN_ERR_FORMAT, "unknown tag 'foo'", NULL);
    EXPECT_ERR("line1\n  {% if %}", LEAN_ERR_FORMAT, "line 2 col 9", NULL);
    EXPECT_ERR("{% for a in b %}\n{% else %}\n{% else %}{% endfor %}", LEAN_ERR_FORMAT, "line 3", "unknown tag 'else'");
}

/* Every builtin that takes no arguments, called with one: an error naming the builtin and
 * the argument. Before the binder stopped at its NULL name, each keyword case crashed. */
static void test_unexpected_arguments(void) {
    static const char *const filters[] = {
        "abs", "capitalize", "lower", "upper", "title", "length", "count", "escape", "e", "forceescape", "first",
        "last", "items", "list", "reverse", "safe", "string", "wordcount",
    };
    static const char *const str_methods[] = {
        "upper", "lower", "title", "capitalize", "swapcase", "isdigit", "isdecimal", "isnumeric", "isalpha",
        "isalnum", "isspace", "islower", "isupper",
    };
    char src[160], want[96];
    const char *canon;
    for (size_t i = 0; i < sizeof filters / sizeof filters[0]; i++) {
        /* messages in error say the filter's own name, not an alias */
        canon = !strcmp(filters[i], "count") ? "length" : !strcmp(filters[i], "e") ? "escape" : filters[i];
        const char *arg = !strcmp(filters[i], "items") ? "{'k': 1}" : !strcmp(filters[i], "abs") ? "-3" : "'ab'";
        snprintf(src, sizeof src, "{{ %s|%s(a=1) }}", arg, filters[i]);
        snprintf(want, sizeof want, "%s() got an unexpected keyword argument 'a'", canon);
        EXPECT_ERR(src, LEAN_ERR_ARG, want, "line 1 col");
        snprintf(src, sizeof src, "{{ %s|%s(1) }}", arg, filters[i]);
        snprintf(want, sizeof want, "%s() takes no arguments (1 given)", canon);
        EXPECT_ERR(src, LEAN_ERR_ARG, want, NULL);
    }
    for (size_t i = 0; i < sizeof str_methods / sizeof str_methods[0]; i++) {
        snprintf(src, sizeof src, "{{ 'ab'.%s(x=1) }}", str_methods[i]);
        snprintf(want, sizeof want, "%s() got an unexpected keyword argument 'x'", str_methods[i]);
        EXPECT_ERR(src, LEAN_ERR_ARG, want, NULL);
    }
    EXPECT_ERR("{{ {'a': 1}.items(k=2) }}", LEAN_ERR_ARG, "items() got an unexpected keyword argument 'k'", NULL);
    EXPECT_ERR("{{ {'a': 1}.keys(k=2) }}", LEAN_ERR_ARG, "keys() got an unexpected keyword argument 'k'", NULL);
    EXPECT_ERR("{{ {'a': 1}.values(1) }}", LEAN_ERR_ARG, "values() takes no arguments (1 given)", NULL);
    EXPECT_ERR("{{ {'a': 1}.copy(k=2) }}", LEAN_ERR_ARG, "copy() got an unexpected keyword argument 'k'", NULL);
    EXPECT_ERR("{{ [1].copy(k=2) }}", LEAN_ERR_ARG, "copy() got an unexpected keyword argument 'k'", NULL);
    EXPECT_ERR("{{ [1].index(1, k=2) }}", LEAN_ERR_ARG, "index() got an unexpected keyword argument 'k'", NULL);
    EXPECT_ERR("{{ [1].count(value=1) }}", LEAN_ERR_ARG, "count() got an unexpected keyword argument 'value'", NULL);
    EXPECT_ERR("{{ range(n=3) }}", LEAN_ERR_ARG, "range() got an unexpected keyword argument 'n'", NULL);
    EXPECT_ERR("{% for x in [1] %}{{ loop.cycle(1, k=2) }}{% endfor %}", LEAN_ERR_ARG,
               "cycle() got an unexpected keyword argument 'k'", NULL);
    EXPECT_ERR("{% for x in [1] %}{{ loop.changed(k=2) }}{% endfor %}", LEAN_ERR_ARG,
               "changed() got an unexpected keyword argument 'k'", NULL);
    /* builtins with parameters: an unknown keyword names the builtin too */
    EXPECT_ERR("{{ 's'.strip(x=1) }}", LEAN_ERR_ARG, "strip() got an unexpected keyword argument 'x'", NULL);
    EXPECT_ERR("{{ 's'.rstrip(x=1) }}", LEAN_ERR_ARG, "rstrip() got an unexpected keyword argument 'x'", NULL);
    EXPECT_ERR("{{ {'a': 1}.get('a', k=2) }}", LEAN_ERR_ARG, "get() got an unexpected keyword argument 'k'", NULL);
    EXPECT_ERR("{{ 's'|center(a=1) }}", LEAN_ERR_ARG, "center() got an unexpected keyword argument 'a'", NULL);
    EXPECT_ERR("{{ 's'|d(a=1) }}", LEAN_ERR_ARG, "default() got an unexpected keyword argument 'a'", NULL);
    EXPECT_ERR("{{ [1]|map('upper', a=1)|list }}", LEAN_ERR_ARG, "upper() got an unexpected keyword argument 'a'", NULL);
    EXPECT_ERR("{{ 1 is odd(k=1) }}", LEAN_ERR_ARG, "odd() got an unexpected keyword argument 'k'", NULL);
    EXPECT_ERR("{{ [1]|select('odd', k=1)|list }}", LEAN_ERR_ARG, "odd() got an unexpected keyword argument 'k'", NULL);
    EXPECT_ERR("{{ raise_exception(m=1) }}", LEAN_ERR_ARG, "raise_exception() got an unexpected keyword argument 'm'", NULL);
    EXPECT_ERR("{{ strftime_now(f=1) }}", LEAN_ERR_ARG, "strftime_now() got an unexpected keyword argument 'f'", NULL);
}

/* ---- 5. limits ---- */

static char *repeat(const char *head, const char *unit, size_t n, const char *mid, const char *unit2, size_t n2,
                    const char *tail) {
    size_t len = strlen(head) + strlen(unit) * n + strlen(mid) + strlen(unit2) * n2 + strlen(tail) + 1;
    char *s = malloc(len), *p = s;
    p += sprintf(p, "%s", head);
    for (size_t i = 0; i < n; i++) p += sprintf(p, "%s", unit);
    p += sprintf(p, "%s", mid);
    for (size_t i = 0; i < n2; i++) p += sprintf(p, "%s", unit2);
    sprintf(p, "%s", tail);
    return s;
}

static void test_limits(void) {
    char *s;
    s = repeat("{{ ", "(", 5000, "1", ")", 5000, " }}");
    EXPECT_ERR(s, LEAN_ERR_UNSUPPORTED, "nested deeper than 100", NULL);
    free(s);
    s = repeat("{{ ", "[", 90, "1", "]", 90, " }}"); /* deep but within the limit of brackets... */
    EXPECT_ERR(s, LEAN_ERR_UNSUPPORTED, "nested deeper", NULL); /* ...not of expressions */
    free(s);
    s = repeat("", "{% if 1 %}", 5000, "x", "{% endif %}", 5000, "");
    EXPECT_ERR(s, LEAN_ERR_UNSUPPORTED, "nested deeper than 100", NULL);
    free(s);
    s = repeat("", "{% if 1 %}", 40, "deep", "{% endif %}", 40, "");
    EXPECT(s, "deep");
    free(s);
    s = repeat("{{ ", "not ", 5000, "1", "", 0, " }}");
    EXPECT_ERR(s, LEAN_ERR_UNSUPPORTED, "nested deeper", NULL);
    free(s);
    s = repeat("{{ ", "- ", 5000, "1", "", 0, " }}");
    EXPECT_ERR(s, LEAN_ERR_UNSUPPORTED, "nested deeper", NULL);
    free(s);
    s = repeat("{{ 1", " + 1", 500, "", "", 0, " }}"); /* a long chain nests to the left */
    EXPECT(s, "501");
    free(s);
    s = repeat("{{ 1", " + 1", 20000, "", "", 0, " }}");
    EXPECT_ERR(s, LEAN_ERR_UNSUPPORTED, "nests deeper than 1000", NULL);
    free(s);
    /* 5000-deep lists built by a loop: == stops at 64 levels (unequal), < fails */
    EXPECT("{% set ns = namespace(x=[], y=[]) %}{% for i in range(5000) %}{% set ns.x = [ns.x] %}{% set ns.y = [ns.y] %}"
           "{% endfor %}{{ ns.x == ns.x }}{{ ns.x == ns.y }}", "TrueFalse");
    EXPECT_ERR("{% set ns = namespace(x=[], y=[]) %}{% for i in range(5000) %}{% set ns.x = [ns.x] %}{% set ns.y = [ns.y] %}"
               "{% endfor %}{{ ns.x < ns.y }}", LEAN_ERR_UNSUPPORTED, "cannot be compared", NULL);
    EXPECT_ERR("{% set ns = namespace(x=()) %}{% for i in range(5000) %}{% set ns.x = (ns.x,) %}{% endfor %}"
               "{{ {ns.x: 1} }}", LEAN_ERR_UNSUPPORTED, "nested deeper", NULL);
    EXPECT_ERR("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", LEAN_ERR_UNSUPPORTED, "macro calls nested deeper", NULL);
    EXPECT("{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{{ n }}{% endif %}{% endmacro %}{{ f(20) }}",
           "1234567891011121314151617181920");
    /* (one range list for both loops: a long render that stays small in memory) */
    EXPECT_ERR("{% set r = range(100000) %}{% for i in r %}{% for j in r %}{% endfor %}{% endfor %}", LEAN_ERR_UNSUPPORTED,
               "steps", NULL);
    EXPECT_ERR("{{ 'x' * 1000000000 }}", LEAN_ERR_NOMEM, "MiB", NULL);
#ifndef __wasm__
    /* Node 20's WASI host crashes at exit (segfault or "Invalid bytecode", after main has
     * returned and the tally is printed) once this has grown the wasm memory to ~200 MiB;
     * the limit itself is the same code in every build, so this runs natively only. */
    EXPECT_ERR("{% set ns = namespace(s='0123456789abcdef') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
               LEAN_ERR_NOMEM, "MiB", NULL);
#endif
    EXPECT_ERR("{% set ns = namespace(x=1) %}{% set ns.x = ns %}{{ ns }}", LEAN_ERR_UNSUPPORTED, "nested deeper", NULL);
    EXPECT_ERR("{% set ns = namespace(x=1) %}{% set ns.x = [ns] %}{{ ns.x|tojson }}", LEAN_ERR_ARG, "not JSON serializable", NULL);
}

/* ---- 6. robustness: prefixes and mutations of the real templates never crash ---- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rng(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static int robust_one(const char *src, const lean_chat_message *m, size_t n) {
    char *out;
    size_t len;
    lean_error err = {0};
    lean_chat_params p = lean_chat_default_params();
    p.add_generation_prompt = 1;
    p.bos_token = "<s>";
    p.now_s = 0;
    lean_status st = lean_chat_render_ex(src, m, n, &p, &out, &len, &err);
    if (st == LEAN_OK) {
        lean_chat_free(out);
        return 1;
    }
    bool known = st == LEAN_ERR_FORMAT || st == LEAN_ERR_UNSUPPORTED || st == LEAN_ERR_ARG || st == LEAN_ERR_NOMEM;
    CHECK(known && err.msg[0] && err.status == st, "robustness: status %d, message [%s]", st, err.msg);
    return 0;
}

static void test_robustness(void) {
    size_t n;
    char *text = read_file("tests/data/templates/refs.json", &n);
    json_value *refs = NULL;
    lean_error err = {0};
    if (!text || json_parse(text, n, &refs, &err) != LEAN_OK) {
        CHECK(0, "refs.json");
        free(text);
        return;
    }
    free(text);
    lean_chat_message m[] = {{"system", "sys"}, {"user", "u1"}, {"assistant", "a1"}, {"user", "u2 <think>x</think>"}};
    const json_value *tmpls = json_get(refs, "templates");
    int renders = 0, ok = 0;
    static const char interesting[] = "{}%#-+()[]'\"|.~ \n=:,!*/0aZ_";
    for (size_t t = 0; t < tmpls->n; t++) {
        char path[512];
        snprintf(path, sizeof path, "tests/data/templates/%s", jstr(&tmpls->items[t], "file"));
        size_t len;
        char *src = read_file(path, &len);
        if (!src) continue;
        char *buf = malloc(len + 1);
        size_t stride = 1 + len / 400;
        for (size_t k = 0; k <= len; k += stride) { /* prefixes: unclosed everything */
            memcpy(buf, src, k);
            buf[k] = 0;
            ok += robust_one(buf, m, 4);
            renders++;
        }
        for (int k = 0; k < 40; k++) { /* mutations */
            memcpy(buf, src, len + 1);
            int edits = 1 + (int)(rng() % 3);
            for (int e = 0; e < edits && len; e++) {
                size_t at = rng() % len;
                uint64_t r = rng();
                buf[at] = (r & 1) ? interesting[(r >> 1) % (sizeof interesting - 1)] : (char)(1 + (r >> 8) % 255);
            }
            ok += robust_one(buf, m, 4);
            renders++;
        }
        free(buf);
        free(src);
    }
    json_free(refs);
    printf("robustness: %d prefixes and mutations of the real templates, %d rendered, the rest failed cleanly\n", renders, ok);

    /* token soup: random sequences of Jinja fragments */
    static const char *const frag[] = {
        "{{ ", " }}", "{% ", " %}", "{%- ", " -%}", "{{- ", " -}}", "{# c #}", "if ", "elif ", "else", "endif", "for ",
        " in ", "endfor", "set ", " = ", "macro ", "endmacro", "m(", ")", "(", "[", "]", "{", "}", ",", ":", ".", "|",
        " is ", "not ", " and ", " or ", "~", "+", "-", "*", "/", "//", "%", "**", "==", "!=", "<", ">=", "x", "y", "ns",
        "namespace(a=1)", "ns.a", "messages", "m.role", "m.content", "loop.index", "loop", "'s'", "\"t\"", "1", "2.5",
        "none", "true", "trim", "tojson", "length", "join(',')", "map(attribute='role')", "select('odd')", "list", "first",
        "last", "default('d')", "string", "items", "upper", "replace('a','b')", "defined", "mapping", "iterable",
        "range(3)", "raise_exception('e')", "strftime_now('%Y')", "'a'.split(',')", ".strip()", ".startswith('a')",
        "break", "continue", "filter upper", "endfilter", "with x = 1", "endwith", "raw", "endraw", "generation",
        "endgeneration", "\n", "  ", "text", "#}", "%}", "}}", "'%s' % ", "dict(a=1)", "[1, 2][::-1]", "is not none",
    };
    int soup_ok = 0, soup = 20000;
    char buf[2048];
    for (int it = 0; it < soup; it++) {
        size_t len = 0;
        int k = 1 + (int)(rng() % 40);
        for (int i = 0; i < k; i++) {
            const char *f = frag[rng() % (sizeof frag / sizeof frag[0])];
            size_t l = strlen(f);
            if (len + l >= sizeof buf) break;
            memcpy(buf + len, f, l);
            len += l;
        }
        buf[len] = 0;
        soup_ok += robust_one(buf, m, 4);
    }
    printf("robustness: %d random token soups, %d rendered, the rest failed cleanly\n", soup, soup_ok);
}

/* ---- 7. out of memory ---- */

static void oom_render(const char *name, const char *src, const lean_chat_message *m, size_t n, size_t chunk) {
    lean_chat_params p = lean_chat_default_params();
    p.add_generation_prompt = 1;
    p.bos_token = "<s>";
    p.eos_token = "</s>";
    p.now_s = 0;
    char *out;
    size_t len;
    lean_error err = {0};
    lean_alloc_fail_at(0, false);
    lean_status st = tj_chat_render(src, m, n, &p, chunk, &out, &len, &err);
    uint64_t count = lean_alloc_fail_at(0, false);
    CHECK(st == LEAN_OK, "%s: %s", name, err.msg);
    if (st != LEAN_OK) return;
    char *want = out;
    size_t want_len = len;
    int nomem = 0, checked = 0;
    for (uint64_t i = 1; i <= count + 1; i++) {
        for (int sticky = 0; sticky < 2; sticky++) {
            lean_alloc_fail_at(i, sticky != 0);
            out = NULL;
            st = tj_chat_render(src, m, n, &p, chunk, &out, &len, &err);
            lean_alloc_fail_at(0, false);
            checked++;
            if (i <= count) {
                nomem += st == LEAN_ERR_NOMEM && out == NULL;
                CHECK(st == LEAN_ERR_NOMEM && out == NULL && strstr(err.msg, "memory"),
                      "%s: allocation %llu of %llu failed, status %s: %s", name, (unsigned long long)i,
                      (unsigned long long)count, lean_status_str(st), err.msg);
            } else {
                CHECK(st == LEAN_OK && len == want_len && memcmp(out, want, len) == 0, "%s: past the last allocation", name);
            }
            if (st == LEAN_OK) lean_chat_free(out);
        }
    }
    lean_chat_free(want);
    printf("out of memory: %s, %llu allocations (arena chunk %zu bytes), each failed once and from then on: %d NOMEM\n",
           name, (unsigned long long)count, chunk, nomem);
}

static void test_oom(void) {
    lean_chat_message m[] = {{"system", "You are concise."}, {"user", "Hi \"there\"\n"}, {"assistant", "<think>\nr\n</think>\n\nA"},
                             {"user", "Tell me a joke."}};
    static const char *const names[] = {"qwen3", "llama3_2", "mistral_nemo"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char path[256];
        snprintf(path, sizeof path, "tests/data/templates/%s.jinja", names[i]);
        char *src = read_file(path, NULL);
        CHECK(src != NULL, "%s", path);
        if (!src) continue;
        oom_render(names[i], src, m, 4, 512);
        free(src);
    }
    oom_render("snippet", "{% macro f(x) %}{{ x|tojson }}{% endmacro %}{% set ns = namespace(a=[]) %}"
                          "{% for m in messages if m.role != 'system' %}{% set ns.a = ns.a + [m.content|trim] %}{% endfor %}"
                          "{{ f(ns.a) }}{{ messages|map(attribute='role')|unique|list }}{{ '%s-%d' % ('a', 1) }}",
               m, 4, 64);
    /* JSON messages */
    const char *js = "[{\"role\": \"user\", \"content\": \"a\\u00e9\"}, {\"role\": \"assistant\", \"content\": \"b\", \"x\": [1, {}]}]";
    lean_alloc_fail_at(0, false);
    lean_chat_message *msgs = NULL;
    size_t n = 0;
    lean_error err = {0};
    CHECK(lean_chat_parse_messages(js, strlen(js), &msgs, &n, &err) == LEAN_OK, "%s", err.msg);
    uint64_t count = lean_alloc_fail_at(0, false);
    lean_chat_messages_free(msgs, n);
    int nomem = 0;
    for (uint64_t i = 1; i <= count; i++) {
        lean_alloc_fail_at(i, false);
        msgs = NULL;
        lean_status st = lean_chat_parse_messages(js, strlen(js), &msgs, &n, &err);
        lean_alloc_fail_at(0, false);
        nomem += st == LEAN_ERR_NOMEM;
        CHECK(st == LEAN_ERR_NOMEM && msgs == NULL, "parse_messages: allocation %llu failed: %s", (unsigned long long)i,
              lean_status_str(st));
    }
    printf("out of memory: lean_chat_parse_messages, %llu allocations: %d NOMEM\n", (unsigned long long)count, nomem);
}

int main(void) {
    test_refs();
    test_api();
    test_model_template();
    test_semantics();
    test_refusals();
    test_unexpected_arguments();
    test_limits();
    test_robustness();
    test_oom();
    return test_finish("test_template");
}
