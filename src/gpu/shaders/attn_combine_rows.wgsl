// attn_combine_rows.wgsl — attn_combine.wgsl for the batched decode pass: one workgroup per
// (head, row of a page's list, batch_rows.wgsl); a split row's partials (attention_rows.wgsl)
// merged by attn_merge.wgsl's merge() into its att row; an unsplit row returns at once.
// Constants: attn_combine.wgsl's, Q_DIM, SPLITS.
@group(0) @binding(1) var<storage, read_write> out: array<f32>; // as in attention_rows.wgsl

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let r = rows[wid.y];
    let n_split = (r.y + r.w) / r.w;
    if (n_split == 1u) { return; }
    merge(n_split, PART_OFF + (r.x * SPLITS * N_HEAD + wid.x) * (HEAD_DIM + 2u), r.x * Q_DIM + wid.x * HEAD_DIM, lid);
}
