/* get_rows.c — the embedding gather on the GPU (weights.h is the contract): token t's row
 * ids[t] of a weight in its own block format, dequantized to F32 by shaders/get_rows.wgsl with
 * formats.wgsl's decoders (the reference's operations, so every value is exact). Its CPU twin:
 * ops_ref.c's ref_embed_row (the format's dequantizer, src/core/formats.c). */
#include "gpu/weight_kernel.h"

enum { ROWS_WG = 64 }; /* chunks a workgroup */

struct gpu_get_rows {
    lean_gpu_pipeline *p;
    lean_gpu_bindgroup *bg;
    uint32_t groups_x; /* workgroups per row; y = the token */
};

lean_status gpu_get_rows_create(lean_gpu *g, const gpu_weight *w, int32_t max_tok, lean_gpu_buf *step,
                                lean_gpu_buf *ids, lean_gpu_buf *out, gpu_get_rows **res, lean_error *err) {
    const uint32_t max_dim = gpu_max_groups(g);
    if (w->n_parts)
        return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "get_rows: a stack of %d formats (its rows are in col_nib order)",
                         w->n_parts);
    if (max_tok < 1 || (uint32_t)max_tok > max_dim)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "get_rows: max_tok %d is not in 1 .. %u", max_tok, max_dim);
    const uint64_t out_bytes = (uint64_t)max_tok * (uint64_t)w->cols * 4;
    lean_status st = gpu_check_binding(g, ids, 0, (uint64_t)max_tok * 4, "get_rows ids", err);
    if (st == LEAN_OK) st = gpu_check_binding(g, out, 0, out_bytes, "get_rows out", err);
    if (st == LEAN_OK && !step) st = LEAN_FAIL(err, LEAN_ERR_ARG, "get_rows: no step uniform");
    if (st != LEAN_OK) return st;
    gpu_get_rows *gr = lean_calloc(1, sizeof *gr);
    if (!gr) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "no memory for a get_rows");
    gr->groups_x = (uint32_t)((gpu_weight_row_chunks(w) + ROWS_WG - 1) / ROWS_WG); /* <= 65535 for cols < 16 M */
    const lean_gpu_const k[] = {{"WG", 'u', ROWS_WG}};
    const lean_gpu_bind binds[4] = {{w->buf, 0, 0}, {ids, 0, (uint64_t)max_tok * 4}, {out, 0, out_bytes}, {step, 0, 16}};
    st = gpu_weight_pipeline(g, w, "get_rows", "words_u32", NULL, NULL, NULL, k, 1, &gr->p, err);
    if (st == LEAN_OK) st = lean_gpu_bindgroup_create(g, gr->p, binds, 4, "get_rows", &gr->bg, err);
    if (st != LEAN_OK) {
        gpu_get_rows_free(gr);
        return st;
    }
    *res = gr;
    return LEAN_OK;
}

void gpu_get_rows_record(lean_gpu_cmd *c, const gpu_get_rows *gr, int32_t n_tok) {
    lean_gpu_dispatch(c, gr->p, gr->bg, gr->groups_x, (uint32_t)n_tok, 1);
}

void gpu_get_rows_free(gpu_get_rows *gr) {
    if (!gr) return;
    lean_gpu_bindgroup_free(gr->bg);
    lean_free(gr);
}
