// rmsnorm.wgsl — RMSNorm with a weight, as ops_ref.c's ref_rmsnorm:
//   out = x / sqrt(mean(x^2) + EPS) * w        over each token's row of N elements
// One workgroup per token: workgroup (0, t). Lane l sums the squares of elements 4v .. 4v + 3
// for v = l, l + WG, ... in index order, then the lanes' sums are added across the workgroup
// (reduce.wgsl or reduce_sg.wgsl): matmul_in.wgsl's normed input keeps this order exactly.
// (matmul_in.wgsl computes the same, fused into decode's matmuls; qkv_post.wgsl the per-head
// norms of q and k.)
// LAST_ONLY = 1: only the call's last token, written to row 0 of out (the final norm before
// the logits).
// Constants: N, EPS, WG, LAST_ONLY.
@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<storage, read> x: array<f32>;         // (n_batch, N)
@group(0) @binding(2) var<storage, read> w: array<f32>;         // (N)
@group(0) @binding(3) var<storage, read_write> out: array<f32>; // (n_batch, N), or (N)

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    var src = wid.y * N; // first element of the row, in x
    var dst = src;                         // and in out
    if (LAST_ONLY == 1u) {
        src = (step.n_tok - 1u) * N;
        dst = 0u;
    }
    var ss = 0.0;
    for (var v = lid; v < (N + 3u) / 4u; v += WG) { // four at a time, in matmul_in.wgsl's order
        for (var i = 4u * v; i < min(4u * v + 4u, N); i++) { ss += x[src + i] * x[src + i]; }
    }
    ss = wg_sum(ss, lid);
    let scale = 1.0 / sqrt(ss / f32(N) + EPS);
    for (var i = lid; i < N; i += WG) { out[dst + i] = x[src + i] * scale * w[i]; }
}
