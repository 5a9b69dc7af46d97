/* matrix.c — Dawn's experimental subgroup matrices (chromium_experimental_subgroup_matrix,
 * tensor cores under Vulkan's cooperative matrices): the probe that tells whether a device's
 * shapes compute what the CPU does. device.c asks for the feature and reads the shapes the
 * adapter offers (lean_gpu_info.matrix_configs); a prefill matmul on them is to come here.
 *
 * Sections: pipelines | values | the probe. */
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
    if (n_extra < 0 || n_extra > 4) return LEAN_FAIL(err, LEAN_ERR_ARG, "%s: %d extra constants (0 .. 4)", shape, n_extra);
    char aliases[64];
    snprintf(aliases, sizeof aliases, "alias T = %s;\nalias R = %s;\n", c->type, c->result);
    const char *src[3] = {"enable f16;\n", aliases, lean_gpu_shader(shader)};
    if (!src[2]) return LEAN_FAIL(err, LEAN_ERR_ARG, "no shader '%s'", shader);
    lean_gpu_const k[8] = {{"M", 'u', c->m}, {"N", 'u', c->n}, {"K", 'u', c->k},
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

/* ---- the probe ---- */

lean_status lean_gpu_matrix_probe(lean_gpu *g, const lean_gpu_matrix_config *c, bool run, bool *pass,
                                  char *report, size_t cap, lean_error *err) {
    char shape[96];
    shape_name(c, shape, sizeof shape);
    *pass = false;
    report[0] = 0;
    lean_gpu_pipeline *p = NULL;
    lean_status st = lean_gpu_matrix_pipeline(g, c, "matrix_probe", NULL, 0, &p, err);
    if (st != LEAN_OK) return st;
    if (!run) {
        *pass = true;
        snprintf(report, cap, "compiled %s (not run)", shape);
        return LEAN_OK;
    }

    const uint32_t ta = type_bytes(c->type), tr = type_bytes(c->result);
    const uint32_t n_a = c->m * c->k, n_b = c->k * c->n, n_c = c->m * c->n;
    uint8_t host_a[64 * 64 * 4], host_b[64 * 64 * 4], host_c[64 * 64 * 4], got[64 * 64 * 4];
    probe_fill(c->type, 0, n_a, host_a);
    probe_fill(c->type, 1, n_b, host_b);
    probe_fill(c->result, 2, n_c, host_c);
    lean_gpu_buf *buf[4] = {NULL};
    const uint64_t bytes[4] = {(uint64_t)n_a * ta, (uint64_t)n_b * ta, (uint64_t)n_c * tr, (uint64_t)n_c * tr};
    const void *data[3] = {host_a, host_b, host_c};
    static const char *const names[4] = {"matrix_probe a", "matrix_probe b", "matrix_probe c", "matrix_probe out"};
    for (int i = 0; i < 4 && st == LEAN_OK; i++) {
        st = lean_gpu_buf_create(g, bytes[i], LEAN_GPU_STORAGE, names[i], &buf[i], err);
        if (st == LEAN_OK && i < 3) st = lean_gpu_buf_write(g, buf[i], 0, data[i], (bytes[i] + 3) & ~3ull, err);
    }
    lean_gpu_bindgroup *bg = NULL;
    lean_gpu_cmd *cmd = NULL;
    const lean_gpu_bind binds[4] = {{buf[0], 0, 0}, {buf[1], 0, 0}, {buf[2], 0, 0}, {buf[3], 0, 0}};
    if (st == LEAN_OK) st = lean_gpu_bindgroup_create(g, p, binds, 4, "matrix_probe", &bg, err);
    if (st == LEAN_OK) st = lean_gpu_begin(g, &cmd, err);
    if (st == LEAN_OK) {
        lean_gpu_dispatch(cmd, p, bg, 1, 1, 1);
        st = lean_gpu_submit(cmd, err);
    }
    if (st == LEAN_OK) st = lean_gpu_buf_read(g, buf[3], 0, got, (bytes[3] + 3) & ~3ull, err);
    if (st == LEAN_OK) {
        uint32_t bad = 0, first = 0;
        double want_first = 0, got_first = 0;
        for (uint32_t i = 0; i < c->m; i++)
            for (uint32_t j = 0; j < c->n; j++) {
                double want = probe_read(c->result, host_c + (size_t)(i * c->n + j) * tr);
                for (uint32_t l = 0; l < c->k; l++)
                    want += probe_read(c->type, host_a + (size_t)(i * c->k + l) * ta) *
                            probe_read(c->type, host_b + (size_t)(l * c->n + j) * ta);
                const double have = probe_read(c->result, got + (size_t)(i * c->n + j) * tr);
                if (have != want && bad++ == 0) first = i * c->n + j, want_first = want, got_first = have;
            }
        *pass = bad == 0;
        if (bad)
            snprintf(report, cap, "FAIL %s: %u of %u values differ from the CPU's; the first, row %u column %u: %g, "
                     "the CPU's %g", shape, bad, n_c, first / c->n, first % c->n, got_first, want_first);
        else
            snprintf(report, cap, "PASS %s: all %u values equal the CPU's", shape, n_c);
    }
    lean_gpu_bindgroup_free(bg);
    for (int i = 0; i < 4; i++) lean_gpu_buf_free(buf[i]);
    return st;
}
