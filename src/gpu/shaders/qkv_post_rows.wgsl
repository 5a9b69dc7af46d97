// qkv_post_rows.wgsl — qkv_post.wgsl for the batched decode pass: one workgroup per (head
// slot, row of a page's list, batch_rows.wgsl), each row's token at its own position into its own
// sequence's slot of the page's caches; the per-head work is qkv_post_head.wgsl's, so each
// row's bits are decode's. Constants: qkv_post.wgsl's and ROWS.
@group(0) @binding(1) var<storage, read_write> qkv: array<f32>; // (rows, QKV): the batch's rows
@group(0) @binding(2) var<storage, read_write> kc: array<f32>;  // (slots, n_ctx, KV_DIM): the page's key caches
@group(0) @binding(3) var<storage, read_write> vc: array<f32>;  // the page's value caches
@group(0) @binding(4) var<storage, read> table: array<f32>;     // (n_ctx, HEAD_DIM): the page's RoPE table
@group(0) @binding(5) var<uniform> norms: array<vec4<f32>, NORM_VEC4>; // as in qkv_post.wgsl

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let r = rows[wid.y];
    post_head(wid.x, r.x * QKV + wid.x * HEAD_DIM, r.y, r.z, lid);
}
