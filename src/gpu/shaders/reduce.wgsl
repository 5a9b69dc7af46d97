// reduce.wgsl — sums and maxima of one value per invocation across a workgroup of WG
// invocations (WG a power of two), through workgroup memory: a tree, so the order of the
// additions is fixed by WG, never by the data. reduce_sg.wgsl has the same functions over
// subgroups (pipeline.c's lean_gpu_reduce_shader picks one per device). Every function
// contains barriers: every invocation of the workgroup must call it, in uniform control flow.
// Constants: WG, RED_ROWS (the most values per invocation wg_sums adds at once), SG (0 here).
var<workgroup> red: array<f32, WG * RED_ROWS>;

fn wg_sum(v: f32, lid: u32) -> f32 {
    red[lid] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s / 2u) {
        if (lid < s) { red[lid] = red[lid] + red[lid + s]; }
        workgroupBarrier();
    }
    let r = red[0];
    workgroupBarrier();
    return r;
}

fn wg_max(v: f32, lid: u32) -> f32 {
    red[lid] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s / 2u) {
        if (lid < s) { red[lid] = max(red[lid], red[lid + s]); }
        workgroupBarrier();
    }
    let r = red[0];
    workgroupBarrier();
    return r;
}

// RED_ROWS sums at once (row r: every invocation's v[r]), each added as wg_sum adds one
fn wg_sums(v: array<f32, RED_ROWS>, lid: u32) -> array<f32, RED_ROWS> {
    for (var r = 0u; r < RED_ROWS; r++) { red[r * WG + lid] = v[r]; }
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s / 2u) {
        if (lid < s) {
            for (var r = 0u; r < RED_ROWS; r++) { red[r * WG + lid] += red[r * WG + lid + s]; }
        }
        workgroupBarrier();
    }
    var t: array<f32, RED_ROWS>;
    for (var r = 0u; r < RED_ROWS; r++) { t[r] = red[r * WG]; }
    workgroupBarrier();
    return t;
}
