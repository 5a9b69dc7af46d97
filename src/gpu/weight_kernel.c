/* weight_kernel.c — compiles the kernels that read a weight matrix (matmul.c's, get_rows.c's):
 * shaders/formats.wgsl (every format's dequantizer), the file that names the weight's format
 * for the kernels (format_<fmt>.wgsl, picked by the type's name; a mixed stack's, which picks
 * the part by row, is written here), the kernel and its modes' files, with the weight's shape
 * written in as constants. Also the device checks those kernels make before they bind.
 * What it does not: choose a kernel's shape or variant (matmul.c) or lay out a weight
 * (weight_upload.c).
 *
 * Sections: shape constants · a mixed stack's glue · the pipeline · device checks
 */
#include "gpu/weight_kernel.h"

#include "core/formats.h"

#include <stdio.h>
#include <string.h>

/* ---- shape constants ---- */

uint64_t gpu_weight_row_chunks(const gpu_weight *w) {
    const uint32_t chunk = gpu_format_of(w->type)->chunk;
    return ((uint64_t)w->cols + chunk - 1) / chunk;
}

/* The constants every kernel over w needs (formats.wgsl's list); returns how many. */
static int shape_consts(const gpu_weight *w, lean_gpu_const *c) {
    const gpu_format *f = gpu_format_of(w->type);
    const lean_type_traits *tr = lean_type_traits_get(w->type);
    const uint64_t bpr = (uint64_t)w->cols / tr->block_elems, scale_base = w->scale_base;
    c[0] = (lean_gpu_const){"ROWS", 'u', (double)w->rows};
    c[1] = (lean_gpu_const){"COLS", 'u', (double)w->cols};
    c[2] = (lean_gpu_const){"CHUNKS", 'u', (double)gpu_weight_row_chunks(w)};
    c[3] = (lean_gpu_const){"BPR", 'u', (double)bpr};
    c[4] = (lean_gpu_const){"SCALE_BASE", 'u', (double)scale_base};
    c[5] = (lean_gpu_const){"CH", 'u', (double)f->chunk};
    return 6;
}

/* ---- a mixed stack's glue ---- */

/* The chunk dot a part takes in matmul_vec: the one its format's file names (format_<fmt>.wgsl:
 * Q4_0's, Q4_1's and Q5_1's own pair, every other format's decoded chunk, "dq"), so a part sums
 * as its own matrix does (test_gpu_weights holds the two to the same bits). */
static const char *chunk_dot_of(uint32_t type) {
    const bool own = type == LEAN_TYPE_Q4_0 || type == LEAN_TYPE_Q4_1 || type == LEAN_TYPE_Q5_1;
    return own ? lean_type_traits_get(type)->name : "dq";
}

/* What a format file names, for a mixed stack (weight_upload.c: its parts at virtual rows):
 * dequant_chunk and block_i8 (matmul_tiled_i8's blocks; a Q8_0 part's in col_nib's order) pick
 * the part by row, every part's chunks in col_nib's columns, one chunk a group (matmul_tiled);
 * block_step takes each block's own form (bs_any). Its chunk dot: of decoded chunks alone, "dq"
 * through dequant_chunk (so PRE still decodes the first chunks early); with a part of its own
 * dot, a chunk_vdot that picks the part by row, VRAW (row, c) (so its loads come late, PRE or
 * not). The parts' names, joined by '+', go to name (for labels). */
static void mixed_glue(const gpu_weight *w, char *glue, size_t cap, char *name, size_t name_cap) {
    int n = snprintf(glue, cap,
                     "const GCH: u32 = 1u;\n"
                     "fn chunk_group(row: u32, g: u32) -> GRAW { return gl_any(row, g); }\n"
                     "fn group_chunk(r: GRAW, k: u32) { gd_any(r, k); }\n"
                     "fn chunk_col(c: u32, i: u32) -> u32 { return col_nib(c, i); }\n"
                     "fn dequant_chunk(row: u32, c: u32) {\n");
    int m = 0; /* the chunk_vdot that picks the part, appended after dequant_chunk */
    char vdot[1024];
    m += snprintf(vdot, sizeof vdot,
                  "alias VRAW = vec2<u32>;\n"
                  "fn chunk_vload(row: u32, c: u32) -> VRAW { return VRAW(row, c); }\n"
                  "fn chunk_vdot(r: VRAW, acc: f32, x: XRUNS) -> f32 {\n");
    int q = 0; /* block_i8, appended after the chunk dot */
    char bi[768];
    q += snprintf(bi, sizeof bi, "fn block_step(w: BI8, p: vec2<i32>, x: XB, acc: f32) -> f32 { return bs_any(w, p, x, acc); }\n"
                                 "fn block_i8(row: u32, b: u32) -> BI8 {\n");
    size_t at = 0;
    bool own = false; /* a part with its own chunk dot */
    for (int p = 0; p < w->n_parts; p++) {
        const lean_type t = w->part[p].type;
        const char *fmt = lean_type_traits_get(t)->name, *dot = chunk_dot_of(t);
        const long long end = (long long)w->part[p].end, gap = (long long)w->part[p].gap;
        at += (size_t)snprintf(name + at, name_cap - at, "%s%s", p ? "+" : "", fmt);
        n += snprintf(glue + n, cap - (size_t)n, "    if (row < %lldu) { dq_%s(row + %lldu, c); return; }\n", end, fmt,
                      gap);
        own = own || strcmp(dot, "dq") != 0;
        /* vl_dq reads through dequant_chunk, which finds the part itself: the row as it is */
        m += snprintf(vdot + m, sizeof vdot - (size_t)m,
                      "    if (r.x < %lldu) { return vd_%s(vl_%s(r.x + %lldu, r.y), acc, x); }\n", end, dot, dot,
                      strcmp(dot, "dq") ? gap : 0);
        const char *nib = t == LEAN_TYPE_Q8_0 ? "_nib" : "";
        if (p + 1 < w->n_parts)
            q += snprintf(bi + q, sizeof bi - (size_t)q, "    if (row < %lldu) { return bi_%s%s(row + %lldu, b); }\n",
                          end, fmt, nib, gap);
        else q += snprintf(bi + q, sizeof bi - (size_t)q, "    return bi_%s%s(row + %lldu, b);\n}\n", fmt, nib, gap);
    }
    n += snprintf(glue + n, cap - (size_t)n, "}\n");
    if (!own)
        n += snprintf(glue + n, cap - (size_t)n,
                      "alias VRAW = VR_dq;\n"
                      "fn chunk_vload(row: u32, c: u32) -> VRAW { return vl_dq(row, c); }\n"
                      "fn chunk_vdot(r: VRAW, acc: f32, x: XRUNS) -> f32 { return vd_dq(r, acc, x); }\n");
    else n += snprintf(glue + n, cap - (size_t)n, "%s    return acc;\n}\n", vdot);
    snprintf(glue + n, cap - (size_t)n, "%s", bi);
}

/* ---- the pipeline ---- */

lean_status gpu_weight_pipeline(lean_gpu *g, const gpu_weight *w, const char *kernel, const char *words,
                                const char *in, const char *out, const char *arith, const lean_gpu_const *extra,
                                int n_extra, lean_gpu_pipeline **res, lean_error *err) {
    char glue[3072], label[96], name[48], fmt_file[64], out_file[64], in_file[64];
    if (w->n_parts) mixed_glue(w, glue, sizeof glue, name, sizeof name);
    else snprintf(name, sizeof name, "%s", lean_type_traits_get(w->type)->name);
    snprintf(fmt_file, sizeof fmt_file, "format_%s", name);
    snprintf(out_file, sizeof out_file, "matmul_out_%s", out ? out : "");
    snprintf(in_file, sizeof in_file, "matmul_in_%s", in ? in : "");
    snprintf(label, sizeof label, "%s_%s%s%s%s%s%s%s", kernel, name, in ? "_" : "", in ? in : "", out ? "_" : "",
             out ? out : "", arith ? "_" : "", arith ? arith : "");
    const char *src[12] = {lean_gpu_shader("formats"), w->n_parts ? glue : lean_gpu_shader(fmt_file),
                           lean_gpu_shader(kernel), lean_gpu_shader(words)};
    int n_src = 4;
    if (out) {
        src[n_src++] = lean_gpu_shader("matmul_out");
        src[n_src++] = lean_gpu_shader(out_file);
    }
    if (in) {
        src[n_src++] = lean_gpu_reduce_shader(g);
        src[n_src++] = lean_gpu_shader("matmul_in");
        src[n_src++] = lean_gpu_shader(in_file);
    }
    if (arith) src[n_src++] = lean_gpu_shader(arith);
    if (!strncmp(kernel, "matmul_tiled", 12)) src[n_src++] = lean_gpu_shader("tiled_common"); /* both tiled kernels' */
    for (int i = 0; i < n_src; i++)
        if (!src[i]) return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "pipeline '%s': shader missing", label);
    lean_gpu_const consts[32];
    const int n_shape = shape_consts(w, consts);
    memcpy(consts + n_shape, extra, sizeof(lean_gpu_const) * (size_t)n_extra);
    return lean_gpu_pipeline_create(g, label, src, n_src, consts, n_shape + n_extra, res, err);
}

/* ---- device checks ---- */

uint32_t gpu_max_groups(lean_gpu *g) {
    const uint32_t max = lean_gpu_get_info(g)->max_workgroups_per_dim;
    return max ? max : 65535;
}

lean_status gpu_check_binding(lean_gpu *g, const lean_gpu_buf *buf, uint64_t offset, uint64_t bytes,
                              const char *what, lean_error *err) {
    const uint32_t align = lean_gpu_get_info(g)->min_storage_offset_align;
    if (!buf) return LEAN_FAIL(err, LEAN_ERR_ARG, "%s: no buffer", what);
    if (align && offset % align)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "%s: offset %llu is not a multiple of %u", what,
                         (unsigned long long)offset, align);
    if (offset > lean_gpu_buf_size(buf) || bytes > lean_gpu_buf_size(buf) - offset)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "%s: needs bytes [%llu, %llu), the buffer has %llu", what,
                         (unsigned long long)offset, (unsigned long long)(offset + bytes),
                         (unsigned long long)lean_gpu_buf_size(buf));
    return LEAN_OK;
}

