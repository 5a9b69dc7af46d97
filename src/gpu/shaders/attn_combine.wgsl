// attn_combine.wgsl — merges the split partials of attention.wgsl for a one-token call:
// with M = max_s m_s,  out = sum_s acc_s e^(m_s - M) / sum_s l_s e^(m_s - M).
// The number of splits is the one forward.c dispatched: ceil((pos + 1) / step.chunk).
// One workgroup per head; lane d handles dimensions d, d + WG, ...
// Constants: N_HEAD, HEAD_DIM, PART_OFF, WG.
@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<storage, read_write> out: array<f32>; // as in attention.wgsl

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let h = wid.x;
    let n_split = (step.pos + step.chunk) / step.chunk;
    let stride = N_HEAD * (HEAD_DIM + 2u); // between one split's partials and the next's
    let first = PART_OFF + h * (HEAD_DIM + 2u);
    var mx = -3.0e38;
    for (var s = 0u; s < n_split; s++) { mx = max(mx, out[first + s * stride + HEAD_DIM]); }
    var l = 0.0;
    for (var s = 0u; s < n_split; s++) {
        let p = first + s * stride;
        l += out[p + HEAD_DIM + 1u] * exp(out[p + HEAD_DIM] - mx);
    }
    for (var d = lid; d < HEAD_DIM; d += WG) {
        var a = 0.0;
        for (var s = 0u; s < n_split; s++) {
            let p = first + s * stride;
            a += out[p + d] * exp(out[p + HEAD_DIM] - mx);
        }
        out[h * HEAD_DIM + d] = a / l;
    }
}
