enable subgroups;
// reduce_sg.wgsl — reduce.wgsl's functions over subgroups: each subgroup adds (or takes the
// maximum of) its invocations' values in registers (subgroupAdd, subgroupMax), and the
// subgroups' results are then added in subgroup order through workgroup memory. The order is
// the hardware's and the subgroup size's, fixed for a device: pipeline.c uses this file only
// where the adapter's subgroups have one size (min = max), so every kernel on the device sums
// alike — a normed matmul's row scale stays rmsnorm.wgsl's bit for bit.
// Subgroup k is taken to hold invocations k SG .. k SG + SG - 1: how every implementation lays
// out a one-dimensional workgroup; the GPU tests, run against CPU references on the H200,
// would see any other layout.
// Constants: WG, RED_ROWS (as reduce.wgsl), SG (the device's subgroup size).
var<workgroup> red: array<f32, WG * RED_ROWS>;

const N_SG: u32 = (WG + SG - 1u) / SG; // subgroups in the workgroup

// subgroup k's value v at red[r * WG + k]
fn sg_put(v: f32, r: u32, lid: u32) {
    if (lid % SG == 0u) { red[r * WG + lid / SG] = v; }
}

fn wg_sum(v: f32, lid: u32) -> f32 {
    sg_put(subgroupAdd(v), 0u, lid);
    workgroupBarrier();
    var t = red[0];
    for (var i = 1u; i < N_SG; i++) { t += red[i]; }
    workgroupBarrier();
    return t;
}

fn wg_max(v: f32, lid: u32) -> f32 {
    sg_put(subgroupMax(v), 0u, lid);
    workgroupBarrier();
    var t = red[0];
    for (var i = 1u; i < N_SG; i++) { t = max(t, red[i]); }
    workgroupBarrier();
    return t;
}

fn wg_sums(v: array<f32, RED_ROWS>, lid: u32) -> array<f32, RED_ROWS> {
    for (var r = 0u; r < RED_ROWS; r++) { sg_put(subgroupAdd(v[r]), r, lid); }
    workgroupBarrier();
    var t: array<f32, RED_ROWS>;
    for (var r = 0u; r < RED_ROWS; r++) {
        t[r] = red[r * WG];
        for (var i = 1u; i < N_SG; i++) { t[r] += red[r * WG + i]; }
    }
    workgroupBarrier();
    return t;
}
