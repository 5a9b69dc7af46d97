// matmul_vec.wgsl — y = W x for one token (decode), or for each of several rows of x (the batched
// decode pass, lean_decode_batch: one row per sequence): a matrix-vector product over the
// weight's own blocks (formats.wgsl decodes them), its input read by matmul_in.wgsl's x4_at
// (x, or x RMS-normed) and each output written by matmul_out.wgsl's y_out (set, residual add,
// bias, or SwiGLU of a stacked [Wgate; Wup]).
//
// A workgroup of WG invocations computes RPW consecutive outputs o0 .. o0 + RPW - 1 (in QKV
// mode, NEOX: out_of's order, matmul_out.wgsl), each from NW weight rows (1; 2 in SWIGLU mode:
// row o and row o + OUTS): RPW * NW rows, slot s = k * RPW + r holding row o0 + r + k * OUTS.
// Its index is wid.y * NX + wid.x (outputs / RPW can pass the 65535-per-dimension dispatch
// limit: the C side splits the workgroups over x and y). Invocation l takes chunks l, l + WG,
// l + 2 WG, ... of every one of its rows (one chunk = CH weights; its columns come as CH / 4
// runs of 4, formats.wgsl's chunk_col(c, 4q) .. + 3): it reads the chunk's x once, as CH / 4
// vec4s, then adds each of its rows' chunk dot to the row's sum (formats.wgsl's chunk_vdot:
// for the formats whose format_<fmt>.wgsl names their own pair, their quants' dot then the block's scale
// (and min); for the others the decoded chunk's runs' dots, run by run). The WG sums of a row
// are then added across the workgroup (wg_sums: reduce.wgsl's tree or reduce_sg.wgsl's
// subgroups). That order depends only on WG, CH, the format and the device's reduction, never
// on which rows share the workgroup or the mode.
// Rows of a batch: workgroup z takes rows t = z * TPW .. z * TPW + TPW - 1 below vec_rows()
// (vec_rows.wgsl: the rows uniform's first word; vec_each.wgsl: TPW = 1, every z dispatched is
// a row), x from vec4 t * X_VEC4 (so COLS % 4 = 0 where t > 0: gpu_matmul_record_rows), y at
// t * Y_STRIDE. Each chunk of W is loaded once for the workgroup's rows and dotted with each
// row's x in turn, each row into its own sums: every row's arithmetic is the one-token kernel's.
//
// Constants: ROWS COLS CHUNKS BPR SCALE_BASE CH (formats.wgsl), WG (a power of two), RPW, TPW
// (> 1 only with the plain input), NX, NW, OUTS (= ROWS / NW), Y_COL, BIAS_AT, KV_*
// (matmul_out.wgsl), NORM_AT, X_VEC4, NORM_LANES, EPS (matmul_in.wgsl), RED_ROWS (= RPW * NW,
// the reduction's), PRE (1: the first chunks' loads issued before x_begin; the same sums
// either way).
// Bindings: 0 W (formats.wgsl), 1 x: (rows, cols) f32 as vec4s, 2 y: f32, output o of row t at
// t * Y_STRIDE + Y_COL + o; 3 the rows uniform (TPW > 1);
// then the bias (BIAS mode), the norm weight (normed input) and QKV mode's four.

@group(0) @binding(1) var<storage, read> X: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> Y: array<f32>;

const SLOTS: u32 = RPW * NW;
// chunks a lane takes: a constant count, so the compiler can unroll the loop and issue several
// chunks' loads before the first one's arrive (decode's matmuls are short: latency, not bytes)
const CPL: u32 = (CHUNKS + WG - 1u) / WG;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) l: u32) {
    let o0 = (wid.y * NX + wid.x) * RPW;
    let t0 = wid.z * TPW; // the workgroup's first row of a batch (0 in decode)
    if (o0 >= OUTS || t0 >= vec_rows()) { return; } // the whole workgroup: both are uniform
    let nt = min(TPW, vec_rows() - t0);              // its rows
    // PRE: the lane's first chunk of every row loaded (decoded, where VRAW is the decoded chunk)
    // before x_begin, so its loads are in flight while a normed input sums the row's squares (a
    // barrier the loads cannot cross)
    var w0: array<VRAW, SLOTS>;
    if (PRE == 1u) {
        for (var s = 0u; s < SLOTS; s++) { w0[s] = chunk_vload(row_of(o0, s), min(l, CHUNKS - 1u)); }
    }
    x_begin(l, t0 * X_VEC4);
    var acc: array<array<f32, SLOTS>, TPW>; // acc[j][s]: row t0 + j, slot s
    for (var k = 0u; k < CPL; k++) {
        let c = l + k * WG;
        if (CHUNKS % WG != 0u && c >= CHUNKS) { break; } // folded away where every lane has CPL
        var r = w0;
        for (var s = 0u; s < SLOTS; s++) {
            if (PRE == 0u || k > 0u) { r[s] = chunk_vload(row_of(o0, s), c); }
        }
        for (var j = 0u; j < TPW; j++) {
            if (TPW > 1u && j >= nt) { break; }
            let xr = (t0 + j) * X_VEC4;
            var xs: XRUNS;
            for (var q = 0u; q < RUNS; q++) { xs[q] = x4_at(xr, chunk_col(c, 4u * q)); }
            for (var s = 0u; s < SLOTS; s++) { acc[j][s] = chunk_vdot(r[s], acc[j][s], xs); }
        }
    }
    for (var j = 0u; j < TPW; j++) {
        if (TPW > 1u && j >= nt) { break; } // uniform, as nt is: wg_sums has barriers
        let sum = wg_sums(acc[j], l);
        // b: the up row's sum in SWIGLU mode (slot l + RPW), the RoPE partner's in QKV mode (slot
        // l ^ 1: RPW is even); unused otherwise
        if (l < RPW && o0 + l < OUTS) {
            let o = out_of(o0 + l);
            y_out((t0 + j) * Y_STRIDE + Y_COL + o, o, sum[l],
                  select(sum[(l + RPW) % SLOTS], sum[l ^ 1u], KV_MODE == 1u));
        }
    }
}

// the weight row of slot s in the workgroup of outputs o0 ..
fn row_of(o0: u32, s: u32) -> u32 { return out_of(min(o0 + s % RPW, OUTS - 1u)) + (s / RPW) * OUTS; }
