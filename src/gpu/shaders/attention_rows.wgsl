// attention_rows.wgsl — attention.wgsl for the batched decode pass: one workgroup per (head h,
// row of a page's list (batch_rows.wgsl), split s), each row's query against its own
// sequence's slot of the page's caches up to its own position, split as decode splits it (its
// chunk), through the same walk (attention_walk.wgsl): each row's bits are decode's. The
// dispatch's z is the most splits of its rows; a row's extra workgroups return at once. An
// unsplit row's output goes to its att row; a split row's partials to its SPLITS partials after
// the att rows, merged by attn_combine_rows.wgsl.
// Constants: attention.wgsl's, Q_DIM, Q_STRIDE4 (a row of q in vec4s), SPLITS (partials a row).
@group(0) @binding(1) var<storage, read> q: array<vec4<f32>>;  // (rows, q | k | v): the batch's rows, q after RoPE
@group(0) @binding(2) var<storage, read> kc: array<vec4<f32>>; // (slots, n_ctx, KV_DIM): the page's caches
@group(0) @binding(3) var<storage, read> vc: array<vec4<f32>>;
// [0, PART_OFF): att (rows, Q_DIM); then partials (rows, SPLITS, N_HEAD, HEAD_DIM + 2): acc, m, l
@group(0) @binding(4) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let r = rows[wid.y];
    let h = wid.x;
    let n_keys = r.y + 1u;
    let n_split = (n_keys + r.w - 1u) / r.w;
    if (wid.z >= n_split) { return; }
    let k0 = wid.z * r.w;
    let a = attend(h, k0, min(k0 + r.w, n_keys), r.x * Q_STRIDE4 + h * HD4, r.z / 4u, lid);
    if (lid >= HD4) { return; }
    if (n_split == 1u) {
        let at = r.x * Q_DIM + h * HEAD_DIM + 4u * lid;
        for (var c = 0u; c < 4u; c++) { out[at + c] = a.o[c] / a.l; }
        return;
    }
    let base = PART_OFF + ((r.x * SPLITS + wid.z) * N_HEAD + h) * (HEAD_DIM + 2u);
    for (var c = 0u; c < 4u; c++) { out[base + 4u * lid + c] = a.o[c]; }
    if (lid == 0u) {
        out[base + HEAD_DIM] = a.m;
        out[base + HEAD_DIM + 1u] = a.l;
    }
}
