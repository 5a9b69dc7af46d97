// sample_merge.wgsl — a later level of the top-k tree: each workgroup merges FAN sorted lists
// of 64 (lists wid * FAN ..., of the N_IN lists at IN_OFF, words) into the 64 best of them,
// best first, written as list wid at OUT_OFF: one bitonic merge per list (merge_into). The
// lists' entries are read up front (one per invocation per list), so the merges wait on no
// device memory.
// Constants: WG (64), N_IN, FAN, IN_OFF, OUT_OFF. best: sample_common.wgsl's.

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    row_begin(wid.y);
    let first = wid.x * FAN;
    var mine: array<Entry, FAN>; // entry 63 - lid of each list (entry lid of the first)
    for (var l = 0u; l < FAN; l++) {
        mine[l] = SENTINEL;
        if (first + l < N_IN) { mine[l] = load_list_entry(IN_OFF, (first + l) * 64u + select(63u - lid, lid, l == 0u)); }
    }
    best[lid] = mine[0];
    for (var l = 1u; l < FAN; l++) {
        workgroupBarrier();
        merge_into(mine[l], lid);
    }
    store_list_entry(OUT_OFF, wid.x * 64u + lid, best[lid]);
}
