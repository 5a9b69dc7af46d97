// sample_rows.wgsl — a draw per row (src/gpu/sample.c's gpu_sampler_rows): workgroup_id.y is
// the row; its parameters are entry y of an array, its lists and trace ROW_WORDS words into
// scratch per row, its position word 4y of hist, its logits row y, its id out[OUT_INDEX + y].
// The kernels made for rows (sample_topk, sample_merge, sample_pick) call row_begin(workgroup_id.y)
// first. Goes with sample_common.wgsl.
// Constants: ROW_WORDS.
@group(0) @binding(1) var<storage, read> PR: array<Params>;
var<private> P: Params;
var<private> RB: u32;
var<private> HB: u32;
var<private> ROW: u32;
fn row_begin(r: u32) {
    P = PR[r];
    RB = r * ROW_WORDS;
    HB = 4u * r;
    ROW = r;
}
