// matmul_vec.wgsl — y = W x for one token (decode): a matrix-vector product over the
// weight's own blocks (formats.wgsl decodes them), its input read by matmul_in.wgsl's x_at
// (x, or x RMS-normed) and each output written by matmul_out.wgsl's y_out (set, residual add,
// bias, or SwiGLU of a stacked [Wgate; Wup]).
//
// A workgroup of WG invocations computes RPW consecutive outputs o0 .. o0 + RPW - 1, each from
// NW weight rows (1; 2 in SWIGLU mode: row o and row o + OUTS): RPW * NW rows, slot
// s = k * RPW + r holding row o0 + r + k * OUTS. Its index is wid.y * NX + wid.x (outputs / RPW
// can pass the 65535-per-dimension dispatch limit: the C side splits the workgroups over x and
// y). Invocation l takes chunks l, l + WG, l + 2 WG, ... of every one of its rows (one chunk =
// CH weights, decoded once, dotted with x in i order), accumulating in that order; the WG
// partial sums of a row are then added in workgroup memory by a tree (stride WG/2, WG/4, ..., 1).
// That order depends only on WG and CH, never on which rows share the workgroup or the mode.
//
// Constants: ROWS COLS CHUNKS BPR SCALE_BASE CH (formats.wgsl), WG (a power of two), RPW, NX,
// NW, OUTS (= ROWS / NW), Y_COL, BIAS_AT (matmul_out.wgsl), NORM_AT, NORM_VEC4, EPS
// (matmul_in.wgsl).
// Bindings: 0 W (formats.wgsl), 1 x: (cols) f32, 2 y: f32, output o at Y_COL + o; then the
// bias (BIAS mode) and the norm weight (a uniform; normed input).

@group(0) @binding(1) var<storage, read> X: array<f32>;
@group(0) @binding(2) var<storage, read_write> Y: array<f32>;

const SLOTS: u32 = RPW * NW;
var<workgroup> part: array<f32, SLOTS * WG>; // part[s * WG + l]: lane l's sum for slot s

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) l: u32) {
    let o0 = (wid.y * NX + wid.x) * RPW;
    if (o0 >= OUTS) { return; } // the whole workgroup: o0 is uniform
    x_begin(l);
    var acc: array<f32, SLOTS>;
    for (var c = l; c < CHUNKS; c += WG) {
        for (var s = 0u; s < SLOTS; s++) {
            dequant_chunk(min(o0 + s % RPW, OUTS - 1u) + (s / RPW) * OUTS, c);
            var d = 0.0;
            for (var i = 0u; i < CH; i++) {
                let col = chunk_col(c, i);
                if (col < COLS) { d += wv[i] * x_at(col); }
            }
            acc[s] += d;
        }
    }
    for (var s = 0u; s < SLOTS; s++) { part[s * WG + l] = acc[s]; }
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride >>= 1u) {
        if (l < stride) {
            for (var s = 0u; s < SLOTS; s++) { part[s * WG + l] += part[s * WG + l + stride]; }
        }
        workgroupBarrier();
    }
    // b: the up row's sum in SWIGLU mode (slot l + RPW); unused otherwise (slot l again)
    if (l < RPW && o0 + l < OUTS) { y_out(Y_COL + o0 + l, o0 + l, part[l * WG], part[((l + RPW) % SLOTS) * WG]); }
}
