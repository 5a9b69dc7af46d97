/* matrix.c — Dawn's experimental subgroup matrices (chromium_experimental_subgroup_matrix,
 * tensor cores under Vulkan's cooperative matrices): the probe that tells whether a device's
 * shapes compute what the CPU does. device.c asks for the feature and reads the shapes the
 * adapter offers (lean_gpu_info.matrix_configs); a prefill matmul on them is to come here.
 *
 * Sections: pipelines | values | checks | the probe and the matmul. */
#include "core/formats.h"
#include "gpu/gpu_impl.h"

#include <stdio.h>
#include <string.h>

/* ---- pipelines ---- */

static void shape_name(const lean_gpu_matrix_config *c, char *buf, size_t cap) {
    snprintf(buf, cap, "%s %ux%u * %ux%u -> %s %ux%u", c->type, c->m, c->k, c->k, c->n, c->result, c->m, c->n);
}

lean_status lean_gpu_matrix_pipeline(lean_gpu *g, const lean_gpu_matrix_config *c, const char *shader,
                                     const lean_gpu_const *extra, int n_extra, lean_gpu_pipeline **out,
                                     lean_error *err) {
    const lean_gpu_info *in = lean_gpu_get_info(g);
    char shape[96];
    shape_name(c, shape, sizeof shape);
    if (!in->subgroup_matrix)
        return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "%s: the device has no subgroup matrices", shape);
    const bool f16 = !strcmp(c->type, "f16") || !strcmp(c->result, "f16");
    if (f16 && !in->shader_f16)
        return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "%s: f16 needs shader-f16, which the device lacks", shape);
    if (!strcmp(c->type, "?") || !strcmp(c->result, "?"))
        return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "%s: a component type this build does not know", shape);
    if (c->m < 1 || c->n < 1 || c->k < 1 || c->m > 64 || c->n > 64 || c->k > 64)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "%s: each dimension must be 1 .. 64", shape);
    if (n_extra < 0 || n_extra > 6) return LEAN_FAIL(err, LEAN_ERR_ARG, "%s: %d extra constants (0 .. 6)", shape, n_extra);
    char aliases[64];
    snprintf(aliases, sizeof aliases, "alias T = %s;\nalias R = %s;\n", c->type, c->result);
    const char *src[3] = {"enable f16;\n", aliases, lean_gpu_shader(shader)};
    if (!src[2]) return LEAN_FAIL(err, LEAN_ERR_ARG, "no shader '%s'", shader);
    lean_gpu_const k[10] = {{"M", 'u', c->m}, {"N", 'u', c->n}, {"K", 'u', c->k},
                           {"WG", 'u', in->subgroup_max_size ? in->subgroup_max_size : 64}};
    for (int i = 0; i < n_extra; i++) k[4 + i] = extra[i];
    char label[160];
    snprintf(label, sizeof label, "%s %s", shader, shape);
    return lean_gpu_pipeline_create(g, label, f16 ? src : src + 1, f16 ? 3 : 2, k, 4 + n_extra, out, err);
}

/* ---- values: small integers, so every product and sum is exact in f16, f32 and i32/u32 ---- */

/* Element i of a, b or c (which: 0, 1, 2): in -3 .. 3, -2 .. 2, -4 .. 4 (0 .. 6, 0 .. 4, 0 .. 8
 * for u32). |sum| <= 6 K + 4 stays below 2048, f16's last exact integer, for K <= 340. */
static int probe_value(int which, uint32_t i, bool is_unsigned) {
    static const int mul[3] = {5, 3, 1}, add[3] = {1, 2, 0}, mod[3] = {7, 5, 9};
    const int v = (int)((i * (uint32_t)mul[which] + (uint32_t)add[which]) % (uint32_t)mod[which]);
    return is_unsigned ? v : v - mod[which] / 2;
}

/* n elements of type t ("f32", "f16", "i32", "u32") holding probe_value(which, i): bytes in
 * out (4 n for 32-bit types, 2 n for f16). */
static void probe_fill(const char *t, int which, uint32_t n, uint8_t *out) {
    for (uint32_t i = 0; i < n; i++) {
        const int v = probe_value(which, i, !strcmp(t, "u32"));
        if (!strcmp(t, "f16")) {
            const uint16_t h = lean_f32_to_f16((float)v);
            memcpy(out + 2 * (size_t)i, &h, 2);
        } else if (!strcmp(t, "f32")) {
            const float f = (float)v;
            memcpy(out + 4 * (size_t)i, &f, 4);
        } else {
            const int32_t s = v; /* i32; u32's values are not negative */
            memcpy(out + 4 * (size_t)i, &s, 4);
        }
    }
}

static double probe_read(const char *t, const uint8_t *at) {
    if (!strcmp(t, "f16")) {
        uint16_t h;
        memcpy(&h, at, 2);
        return lean_f16_to_f32(h);
    }
    if (!strcmp(t, "f32")) {
        float f;
        memcpy(&f, at, 4);
        return f;
    }
    int32_t s; /* i32 and u32 alike: the values are small */
    memcpy(&s, at, 4);
    return s;
}

static uint32_t type_bytes(const char *t) {
    return !strcmp(t, "f16") ? 2 : 4;
}

/* ---- checks: a kernel's product on small integers against the CPU's ---- */

/* out[i][j] = c[i][j] (when there is a c) + sum over l of a[i a_i + l a_l] * b[l b_l + j b_j],
 * for i < n_i, j < n_j, l < n_l; out and c (n_i, n_j) row-major. */
typedef struct product {
    uint32_t n_i, n_j, n_l;
    uint32_t a_i, a_l, b_l, b_j;
    bool has_c;
} product;

/* Fills a, b (and c), runs p on (gx, gy) workgroups, reads out back and compares: *pass and a
 * line in report. The bindings: a, b, (c,) out. */
static lean_status check_product(lean_gpu *g, const lean_gpu_matrix_config *c, lean_gpu_pipeline *p, uint32_t gx,
                                 uint32_t gy, const product *pr, const char *what, bool *pass, char *report,
                                 size_t cap, lean_error *err) {
    const uint32_t ta = type_bytes(c->type), tr = type_bytes(c->result);
    const uint32_t n_a = (pr->n_i - 1) * pr->a_i + (pr->n_l - 1) * pr->a_l + 1;
    const uint32_t n_b = (pr->n_l - 1) * pr->b_l + (pr->n_j - 1) * pr->b_j + 1, n_out = pr->n_i * pr->n_j;
    const int n_in = pr->has_c ? 3 : 2;
    const uint64_t bytes[4] = {((uint64_t)n_a * ta + 3) & ~3ull, ((uint64_t)n_b * ta + 3) & ~3ull,
                               ((uint64_t)n_out * tr + 3) & ~3ull, ((uint64_t)n_out * tr + 3) & ~3ull};
    uint8_t *host[4] = {lean_malloc(bytes[0]), lean_malloc(bytes[1]), lean_malloc(bytes[2]), lean_malloc(bytes[3])};
    lean_gpu_buf *buf[4] = {NULL};
    lean_gpu_bindgroup *bg = NULL;
    lean_gpu_cmd *cmd = NULL;
    lean_status st = LEAN_OK;
    if (!host[0] || !host[1] || !host[2] || !host[3]) st = LEAN_FAIL(err, LEAN_ERR_NOMEM, "%s: no memory", what);
    if (st == LEAN_OK) {
        probe_fill(c->type, 0, n_a, host[0]);
        probe_fill(c->type, 1, n_b, host[1]);
        probe_fill(c->result, 2, n_out, host[2]); /* c, when there is one */
    }
    for (int i = 0; i <= n_in && st == LEAN_OK; i++) { /* the inputs, then out (bytes[3]: out's size) */
        const uint64_t n = i == n_in ? bytes[3] : bytes[i];
        st = lean_gpu_buf_create(g, n, LEAN_GPU_STORAGE, what, &buf[i], err);
        if (st == LEAN_OK && i < n_in) st = lean_gpu_buf_write(g, buf[i], 0, host[i], n, err);
    }
    const lean_gpu_bind binds[4] = {{buf[0], 0, 0}, {buf[1], 0, 0}, {buf[2], 0, 0}, {buf[3], 0, 0}};
    if (st == LEAN_OK) st = lean_gpu_bindgroup_create(g, p, binds, n_in + 1, what, &bg, err);
    if (st == LEAN_OK) st = lean_gpu_begin(g, &cmd, err);
    if (st == LEAN_OK) {
        lean_gpu_dispatch(cmd, p, bg, gx, gy, 1);
        st = lean_gpu_submit(cmd, err);
    }
    if (st == LEAN_OK) st = lean_gpu_buf_read(g, buf[n_in], 0, host[3], bytes[3], err);
    if (st == LEAN_OK) {
        uint32_t bad = 0, first = 0;
        double want_first = 0, got_first = 0;
        for (uint32_t i = 0; i < pr->n_i; i++)
            for (uint32_t j = 0; j < pr->n_j; j++) {
                const uint32_t o = i * pr->n_j + j;
                double want = pr->has_c ? probe_read(c->result, host[2] + (size_t)o * tr) : 0;
                for (uint32_t l = 0; l < pr->n_l; l++)
                    want += probe_read(c->type, host[0] + (size_t)(i * pr->a_i + l * pr->a_l) * ta) *
                            probe_read(c->type, host[1] + (size_t)(l * pr->b_l + j * pr->b_j) * ta);
                const double have = probe_read(c->result, host[3] + (size_t)o * tr);
                if (have != want && bad++ == 0) first = o, want_first = want, got_first = have;
            }
        *pass = bad == 0;
        if (bad)
            snprintf(report, cap, "FAIL %s: %u of %u values differ from the CPU's; the first, row %u column %u: %g, "
                     "the CPU's %g", what, bad, n_out, first / pr->n_j, first % pr->n_j, got_first, want_first);
        else
            snprintf(report, cap, "PASS %s: all %u values equal the CPU's", what, n_out);
    }
    lean_gpu_bindgroup_free(bg);
    for (int i = 0; i < 4; i++) lean_gpu_buf_free(buf[i]), lean_free(host[i]);
    return st;
}

/* ---- the probe and the matmul ---- */

lean_status lean_gpu_matrix_probe(lean_gpu *g, const lean_gpu_matrix_config *c, bool run, bool *pass,
                                  char *report, size_t cap, lean_error *err) {
    char what[128];
    shape_name(c, what + snprintf(what, sizeof what, "probe "), sizeof what - 6);
    *pass = false;
    report[0] = 0;
    lean_gpu_pipeline *p = NULL;
    lean_status st = lean_gpu_matrix_pipeline(g, c, "matrix_probe", NULL, 0, &p, err);
    if (st != LEAN_OK || !run) {
        *pass = st == LEAN_OK;
        if (st == LEAN_OK) snprintf(report, cap, "compiled %s (not run)", what);
        return st;
    }
    const product pr = {c->m, c->n, c->k, c->k, 1, c->n, 1, true};
    return check_product(g, c, p, 1, 1, &pr, what, pass, report, cap, err);
}

lean_status lean_gpu_matrix_gemm_pipeline(lean_gpu *g, const lean_gpu_matrix_config *c, const lean_gpu_gemm *m,
                                          lean_gpu_pipeline **out, uint32_t groups[2], lean_error *err) {
    if (m->tm < 1 || m->tn < 1 || m->tm > 4 || m->tn > 4)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "matrix_gemm: blocks of %u x %u matrices (1 .. 4 each)", m->tm, m->tn);
    if (!m->rows || !m->cols || !m->depth || m->rows % (m->tm * c->m) || m->cols % (m->tn * c->n) ||
        m->depth % c->k)
        return LEAN_FAIL(err, LEAN_ERR_ARG,
                         "matrix_gemm: %u x %u x %u is not a multiple of the block (%u rows, %u columns, depth %u)",
                         m->rows, m->cols, m->depth, m->tm * c->m, m->tn * c->n, c->k);
    if ((uint64_t)m->rows * m->depth >= 1ull << 32 || (uint64_t)m->cols * m->depth >= 1ull << 32 ||
        (uint64_t)m->rows * m->cols >= 1ull << 32)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "matrix_gemm: %u x %u x %u passes u32 indices", m->rows, m->cols, m->depth);
    groups[0] = m->cols / (m->tn * c->n), groups[1] = m->rows / (m->tm * c->m);
    const lean_gpu_const k[] = {{"TM", 'u', m->tm},     {"TN", 'u', m->tn},       {"ROWS", 'u', m->rows},
                                {"COLS", 'u', m->cols}, {"DEPTH", 'u', m->depth}};
    return lean_gpu_matrix_pipeline(g, c, "matrix_gemm", k, 5, out, err);
}

lean_status lean_gpu_matrix_gemm_check(lean_gpu *g, const lean_gpu_matrix_config *c, const lean_gpu_gemm *m, bool run,
                                       bool *pass, char *report, size_t cap, lean_error *err) {
    char what[160];
    const int n = snprintf(what, sizeof what, "gemm %ux%ux%u in blocks of %ux%u, ", m->rows, m->cols, m->depth, m->tm,
                           m->tn);
    shape_name(c, what + n, sizeof what - (size_t)n);
    *pass = false;
    report[0] = 0;
    if (m->depth > 340) /* probe_value's bound: every sum exact in f16 */
        return LEAN_FAIL(err, LEAN_ERR_ARG, "%s: a depth over 340 is not exact in f16", what);
    lean_gpu_pipeline *p = NULL;
    uint32_t groups[2];
    lean_status st = lean_gpu_matrix_gemm_pipeline(g, c, m, &p, groups, err);
    if (st != LEAN_OK || !run) {
        *pass = st == LEAN_OK;
        if (st == LEAN_OK) snprintf(report, cap, "compiled %s (not run)", what);
        return st;
    }
    const product pr = {m->rows, m->cols, m->depth, m->depth, 1, 1, m->depth, false};
    return check_product(g, c, p, groups[0], groups[1], &pr, what, pass, report, cap, err);
}
