// matmul_vec.wgsl — y = W x for one token (decode): a matrix-vector product over the
// weight's own blocks (formats.wgsl decodes them).
//
// A workgroup of WG invocations computes RPW consecutive rows; its index is
// wid.y * NX + wid.x (rows / RPW can pass the 65535-per-dimension dispatch limit: the C
// side splits the workgroups over x and y). Invocation l takes chunks l, l + WG, l + 2 WG, ...
// of every one of its rows (one chunk = CH weights, decoded once, dotted with x in i order),
// accumulating in that order; the WG partial sums of a row are then added in workgroup memory
// by a tree (stride WG/2, WG/4, ..., 1). That order depends only on WG and CH, never on which
// rows share the workgroup.
//
// Constants: ROWS COLS CHUNKS BPR SCALE_BASE CH (formats.wgsl), WG (a power of two), RPW, NX.
// Bindings: 0 W (formats.wgsl), 1 x: (cols) f32, 2 y: (rows) f32.

@group(0) @binding(1) var<storage, read> X: array<f32>;
@group(0) @binding(2) var<storage, read_write> Y: array<f32>;

var<workgroup> part: array<f32, RPW * WG>; // part[r * WG + l]: lane l's sum for row r0 + r

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) l: u32) {
    let r0 = (wid.y * NX + wid.x) * RPW;
    if (r0 >= ROWS) { return; } // the whole workgroup: r0 is uniform
    var acc: array<f32, RPW>;
    for (var c = l; c < CHUNKS; c += WG) {
        for (var r = 0u; r < RPW; r++) {
            dequant_chunk(min(r0 + r, ROWS - 1u), c);
            var s = 0.0;
            for (var i = 0u; i < CH; i++) {
                let col = chunk_col(c, i);
                if (col < COLS) { s += wv[i] * X[col]; }
            }
            acc[r] += s;
        }
    }
    for (var r = 0u; r < RPW; r++) { part[r * WG + l] = acc[r]; }
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride >>= 1u) {
        if (l < stride) {
            for (var r = 0u; r < RPW; r++) { part[r * WG + l] += part[r * WG + l + stride]; }
        }
        workgroupBarrier();
    }
    if (l < RPW && r0 + l < ROWS) { Y[r0 + l] = part[l * WG]; }
}
