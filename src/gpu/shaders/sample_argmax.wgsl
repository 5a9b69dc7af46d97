// sample_argmax.wgsl — one level of the greedy tree: each workgroup finds the best of its
// CHUNK entries (load_entry(e) for e in [wid * CHUNK, ...), e < N_IN; sample_vocab or
// sample_lists supplies it) under the candidates' order (larger value, then lower id: the
// CPU's first largest) and writes it as entry wid at OUT_OFF (words). Invocation lid scans
// entries lid, lid + WG, ... (UNROLL at a time, so that their reads overlap); then a tree
// over the invocations.
// Constants: WG (64), N_IN, CHUNK, OUT_OFF.
const UNROLL = 4u;
var<workgroup> red: array<Entry, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let end = min(N_IN, (wid.x + 1u) * CHUNK);
    var b = SENTINEL;
    for (var e = wid.x * CHUNK + lid; e < end; e += UNROLL * WG) {
        var x: array<Entry, UNROLL>;
        for (var u = 0u; u < UNROLL; u++) { x[u] = load_entry(e + u * WG, end); }
        for (var u = 0u; u < UNROLL; u++) {
            if (better(x[u], b)) { b = x[u]; }
        }
    }
    red[lid] = b;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid < s && better(red[lid + s], red[lid])) { red[lid] = red[lid + s]; }
        workgroupBarrier();
    }
    if (lid == 0u) { store_list_entry(OUT_OFF, wid.x, red[0]); }
}
