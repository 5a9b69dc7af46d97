// sample_one.wgsl — one draw (src/gpu/sample.c's gpu_sampler): the parameters in a uniform, and
// the draw's scratch, position (hist[0]) and id (out[OUT_INDEX]) at no offset. Goes with
// sample_common.wgsl.
@group(0) @binding(1) var<uniform> P: Params;
const RB = 0u;  // words into scratch: the draw's lists and trace
const HB = 0u;  // words into hist: the draw's position
const ROW = 0u; // logits row and out index
fn row_begin(r: u32) {}
