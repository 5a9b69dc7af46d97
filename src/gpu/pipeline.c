/* pipeline.c — WGSL sources, compute pipelines and their bind groups.
 *
 * Sections: embedded shaders | constants as source text | pipelines (compiled once per
 * distinct text) | bind groups.
 *
 * A pipeline's source is `const NAME: TYPE = VALUE;` lines for its constants, then its
 * sources concatenated; entry point "main"; layout "auto" (derived from the shader, so bind
 * group 0's layout comes from wgpuComputePipelineGetBindGroupLayout). Compilation happens
 * inside validation, out-of-memory and internal error scopes: a rejected shader names the
 * pipeline's label and the compiler's first message with its line:column, counted in the
 * full text (the constants come first, one line each). */
#include "gpu/gpu_impl.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- embedded shaders: src/gpu/shaders/NAME.wgsl, the table generated at build time ---- */

const char *lean_gpu_shader(const char *name) {
    for (size_t i = 0; name && i < gpu_n_shader_files; i++)
        if (strcmp(gpu_shader_files[i].name, name) == 0) return gpu_shader_files[i].text;
    return NULL;
}

const char *lean_gpu_reduce_shader(lean_gpu *g) {
    return lean_gpu_shader(lean_gpu_subgroup_size(g) ? "reduce_sg" : "reduce");
}

/* ---- constants as source text ---- */

static bool is_identifier(const char *s) {
    if (!s || !(*s == '_' || (*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z'))) return false;
    for (s++; *s; s++)
        if (!(*s == '_' || (*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9')))
            return false;
    return true;
}

/* Writes one `const NAME: TYPE = VALUE;\n` line into line (cap bytes), or fails naming it. */
static lean_status const_line(const lean_gpu_const *c, const char *label, char *line, size_t cap, lean_error *err) {
    double v = c->value;
    bool integral = isfinite(v) && v == floor(v);
    if (!is_identifier(c->name))
        return LEAN_FAIL(err, LEAN_ERR_ARG, "pipeline '%s': constant name '%s' is not a WGSL identifier", label,
                         c->name ? c->name : "(null)");
    if (c->type == 'u' && integral && v >= 0 && v <= 4294967295.0)
        snprintf(line, cap, "const %s: u32 = %.0fu;\n", c->name, v);
    else if (c->type == 'i' && integral && v > -2147483648.0 && v <= 2147483647.0)
        snprintf(line, cap, "const %s: i32 = %.0fi;\n", c->name, v);
    else if (c->type == 'i' && v == -2147483648.0) /* -2147483648i would negate an out-of-range literal */
        snprintf(line, cap, "const %s: i32 = -2147483647i - 1i;\n", c->name);
    else if (c->type == 'f' && isfinite(v) && fabs(v) <= FLT_MAX)
        snprintf(line, cap, "const %s: f32 = %.9gf;\n", c->name, (double)(float)v);
    else
        return LEAN_FAIL(err, LEAN_ERR_ARG, "pipeline '%s': constant %s = %g does not fit type '%c' (u, i or f)",
                         label, c->name, v, c->type);
    return LEAN_OK;
}

/* Length of src's leading directive line ("enable ...;\n"), 0 when it has none. WGSL wants
 * directives before every declaration, constants included. */
static size_t directive_len(const char *src) {
    if (strncmp(src, "enable ", 7) != 0) return 0;
    const char *nl = strchr(src, '\n');
    return nl ? (size_t)(nl - src) + 1 : strlen(src);
}

/* The full text: the sources' directives, constants, then the sources (a directive's line
 * left there as a comment, so every source keeps its length and lines for locate). *out is
 * lean_malloc'd, NUL-terminated. */
static lean_status build_text(const char *label, const char *const *src, int n_src, const lean_gpu_const *consts,
                              int n_consts, char **out, size_t *out_len, lean_error *err) {
    enum { LINE = 128 };
    size_t len = 0;
    for (int i = 0; i < n_src; i++) {
        if (!src[i]) return LEAN_FAIL(err, LEAN_ERR_ARG, "pipeline '%s': source %d is NULL", label, i);
        len += strlen(src[i]);
    }
    size_t dirs = 0;
    for (int i = 0; i < n_src; i++) dirs += directive_len(src[i]);
    char *text = lean_malloc((size_t)n_consts * LINE + len + dirs + 1);
    if (!text) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "pipeline '%s': out of memory", label);
    size_t at = 0;
    for (int i = 0; i < n_src; i++) {
        size_t n = directive_len(src[i]);
        memcpy(text + at, src[i], n);
        at += n;
    }
    for (int i = 0; i < n_consts; i++) {
        lean_status st = const_line(&consts[i], label, text + at, LINE, err);
        if (st != LEAN_OK) return lean_free(text), st;
        at += strlen(text + at);
    }
    for (int i = 0; i < n_src; i++) {
        size_t n = strlen(src[i]);
        memcpy(text + at, src[i], n);
        const size_t d = directive_len(src[i]);
        if (d >= 3) memset(text + at, '/', 2), memset(text + at + 2, ' ', d - 3);
        at += n;
    }
    text[at] = 0;
    *out = text;
    *out_len = at;
    return LEAN_OK;
}

/* ---- pipelines ---- */

static uint64_t fnv1a(const char *s, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 0x100000001b3ull;
    return h;
}

/* Where line `line` (1-based) of the full text comes from: "constants" or "source K line L". */
static void locate(const lean_gpu_pipeline *p, const char *const *src, int n_src, uint32_t line, char *out,
                   size_t cap) {
    size_t at = 0; /* byte offset of the line's start in p->text */
    for (uint32_t l = 1; l < line && at < p->text_len; at++)
        if (p->text[at] == '\n') l++;
    size_t start = p->text_len; /* where the sources begin: after the constants */
    for (int k = 0; k < n_src; k++) start -= strlen(src[k]);
    if (at < start) {
        snprintf(out, cap, "constants");
        return;
    }
    for (int k = 0; k < n_src; k++) {
        size_t n = strlen(src[k]);
        if (at < start + n || k == n_src - 1) {
            uint32_t l = 1;
            for (size_t i = start; i < at; i++) l += p->text[i] == '\n';
            snprintf(out, cap, "source %d line %u", k, l);
            return;
        }
        start += n;
    }
}

/* Where a compiler message puts the error, in the full text: Dawn's "... :LINE:COL error:
 * MESSAGE\n<source line>\n<caret>" (the message after "error: "), or wgpu's (JS hosts)
 * "\nMESSAGE\n  ┌─ NAME:LINE:COL\n..." (the first line). False for a message without a position
 * (a pipeline error); *text is then its first line. */
static bool message_position(const char *msg, unsigned *line, unsigned *col, const char **text) {
    msg += strspn(msg, " \n");
    *text = msg;
    const char *at = strstr(msg, "\xe2\x94\x8c\xe2\x94\x80 "); /* "┌─ " */
    if (at) {
        const char *c = at + strcspn(at, "\n"); /* back over ":COL", then ":LINE" */
        for (int k = 0; k < 2 && c > at; k++)
            while (--c > at && *c != ':') {}
        return sscanf(c, ":%u:%u", line, col) == 2;
    }
    const char *e = strstr(msg, " error: ");
    if (!e) return false;
    const char *colon = e;
    while (colon > msg && colon[-1] != ' ') colon--; /* back to ":LINE:COL" */
    *text = e + strlen(" error: ");
    return sscanf(colon, ":%u:%u", line, col) == 2;
}

/* The first message and where in the sources its line is, as "line L:C (source K line M):
 * MESSAGE", or the message's first line when it names no position. */
static void compiler_message(const lean_gpu_pipeline *p, const char *const *src, int n_src, const char *msg,
                             char *out, size_t cap) {
    unsigned line = 0, col = 0;
    const char *text;
    if (!message_position(msg, &line, &col, &text)) {
        snprintf(out, cap, "%.*s", (int)strcspn(text, "\n"), text);
        return;
    }
    char where[48];
    locate(p, src, n_src, line, where, sizeof where);
    snprintf(out, cap, "line %u:%u (%s): %.*s", line, col, where, (int)strcspn(text, "\n"), text);
}

static lean_status compile(lean_gpu *g, lean_gpu_pipeline *p, const char *const *src, int n_src, lean_error *err) {
    WGPUShaderSourceWGSL wgsl = {{NULL, WGPUSType_ShaderSourceWGSL}, {p->text, p->text_len}};
    WGPUShaderModuleDescriptor sm_desc = {&wgsl.chain, gpu_sv(p->label)};
    gpu_scope_push(g);
    WGPUShaderModule sm = g->w.DeviceCreateShaderModule(g->device, &sm_desc);
    WGPUComputePipelineDescriptor desc = {NULL, gpu_sv(p->label), NULL, {NULL, sm, {"main", 4}, 0, NULL}};
    if (g->dump) fprintf(stderr, "=== lean-gpu-pipeline %s\n", p->label);
    p->pipe = g->w.DeviceCreateComputePipeline(g->device, &desc);
    if (sm) g->w.ShaderModuleRelease(sm);
    char msg[400], first[320], what[80];
    snprintf(what, sizeof what, "pipeline '%s'", p->label);
    WGPUErrorType e = gpu_scope_pop(g, what, msg, sizeof msg);
    if (e == WGPUErrorType_NoError && p->pipe) return LEAN_OK;
    if (p->pipe) g->w.ComputePipelineRelease(p->pipe);
    p->pipe = NULL;
    if (e == WGPUErrorType_NoError) snprintf(msg, sizeof msg, "no pipeline was made");
    compiler_message(p, src, n_src, msg, first, sizeof first);
    return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "pipeline '%s': %s", p->label, first);
}

lean_status lean_gpu_pipeline_create(lean_gpu *g, const char *label, const char *const *src, int n_src,
                                     const lean_gpu_const *consts, int n_consts, lean_gpu_pipeline **out,
                                     lean_error *err) {
    *out = NULL;
    lean_status st = gpu_check(g, err);
    if (st != LEAN_OK) return st;
    label = label ? label : "";
    if (n_src < 1 || !src || n_consts < 0 || (n_consts && !consts))
        return LEAN_FAIL(err, LEAN_ERR_ARG, "pipeline '%s': %d sources, %d constants", label, n_src, n_consts);
    lean_gpu_pipeline *p = lean_calloc(1, sizeof *p);
    if (!p) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "pipeline '%s': out of memory", label);
    snprintf(p->label, sizeof p->label, "%s", label);
    st = build_text(label, src, n_src, consts, n_consts, &p->text, &p->text_len, err);
    if (st != LEAN_OK) return lean_free(p), st;
    p->hash = fnv1a(p->text, p->text_len);
    for (lean_gpu_pipeline *q = g->pipelines; q; q = q->next)
        if (q->hash == p->hash && q->text_len == p->text_len && memcmp(q->text, p->text, p->text_len) == 0) {
            lean_free(p->text), lean_free(p);
            *out = q;
            return LEAN_OK;
        }
    st = compile(g, p, src, n_src, err);
    if (st != LEAN_OK) return lean_free(p->text), lean_free(p), st;
    p->next = g->pipelines;
    g->pipelines = p;
    *out = p;
    return LEAN_OK;
}

/* ---- bind groups ---- */

static lean_status make_group(lean_gpu *g, lean_gpu_pipeline *p, const WGPUBindGroupEntry *entries, int n,
                              const char *label, WGPUBindGroup *out, lean_error *err) {
    gpu_scope_push(g);
    WGPUBindGroupLayout layout = g->w.ComputePipelineGetBindGroupLayout(p->pipe, 0);
    WGPUBindGroupDescriptor desc = {NULL, gpu_sv(label), layout, (size_t)n, entries};
    *out = g->w.DeviceCreateBindGroup(g->device, &desc);
    if (layout) g->w.BindGroupLayoutRelease(layout);
    char msg[400], what[80];
    snprintf(what, sizeof what, "bind group '%s'", label);
    WGPUErrorType e = gpu_scope_pop(g, what, msg, sizeof msg);
    if (e == WGPUErrorType_NoError && *out) return LEAN_OK;
    if (*out) g->w.BindGroupRelease(*out);
    *out = NULL;
    return LEAN_FAIL(err, gpu_error_status(e, LEAN_ERR_ARG), "bind group '%s' of pipeline '%s': %s", label, p->label,
                     e != WGPUErrorType_NoError ? msg : "creation failed");
}

lean_status lean_gpu_bindgroup_create(lean_gpu *g, lean_gpu_pipeline *p, const lean_gpu_bind *binds, int n,
                                      const char *label, lean_gpu_bindgroup **out, lean_error *err) {
    *out = NULL;
    lean_status st = gpu_check(g, err);
    if (st != LEAN_OK) return st;
    label = label ? label : "";
    if (!p || n < 0 || (n && !binds))
        return LEAN_FAIL(err, LEAN_ERR_ARG, "bind group '%s': no pipeline or %d bindings", label, n);
    WGPUBindGroupEntry *entries = lean_calloc(n ? (size_t)n : 1, sizeof *entries);
    lean_gpu_bindgroup *bg = lean_calloc(1, sizeof *bg);
    if (!entries || !bg) {
        lean_free(entries), lean_free(bg);
        return LEAN_FAIL(err, LEAN_ERR_NOMEM, "bind group '%s': out of memory", label);
    }
    for (int i = 0; i < n && st == LEAN_OK; i++) {
        if (!binds[i].buf) st = LEAN_FAIL(err, LEAN_ERR_ARG, "bind group '%s': binding %d has no buffer", label, i);
        else { /* a view's range: its base added, "whole" meaning the view's rest */
            const lean_gpu_buf *b = binds[i].buf;
            const uint64_t whole = b->view ? b->size - binds[i].offset : WGPU_WHOLE_SIZE;
            entries[i] = (WGPUBindGroupEntry){.binding = (uint32_t)i, .buffer = b->buf,
                                              .offset = b->base + binds[i].offset,
                                              .size = binds[i].size ? binds[i].size : whole};
        }
    }
    if (st == LEAN_OK) st = make_group(g, p, entries, n, label, &bg->group, err);
    lean_free(entries);
    if (st != LEAN_OK) return lean_free(bg), st;
    bg->g = g;
    bg->next = g->groups;
    if (g->groups) g->groups->prev = bg;
    g->groups = bg;
    *out = bg;
    return LEAN_OK;
}

void lean_gpu_bindgroup_free(lean_gpu_bindgroup *bg) {
    if (!bg) return;
    lean_gpu *g = bg->g;
    if (bg->prev) bg->prev->next = bg->next;
    else g->groups = bg->next;
    if (bg->next) bg->next->prev = bg->prev;
    g->w.BindGroupRelease(bg->group);
    lean_free(bg);
}
