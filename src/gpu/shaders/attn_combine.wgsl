// attn_combine.wgsl — merges the split partials of attention.wgsl for a one-token call:
// with M = max_s m_s,  out = sum_s acc_s e^(m_s - M) / sum_s l_s e^(m_s - M).
// The number of splits is the one forward.c dispatched: ceil((pos + 1) / step.chunk).
// One workgroup per head; lane d handles dimensions d, d + WG, ... (attn_merge.wgsl's merge()).
// Constants: N_HEAD, HEAD_DIM, PART_OFF, WG.
@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<storage, read_write> out: array<f32>; // as in attention.wgsl

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let h = wid.x;
    merge((step.pos + step.chunk) / step.chunk, PART_OFF + h * (HEAD_DIM + 2u), h * HEAD_DIM, lid);
}
