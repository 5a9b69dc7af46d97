// rmsnorm.wgsl — RMSNorm with a weight, as ops_ref.c's ref_rmsnorm:
//   out = x / sqrt(mean(x^2) + EPS) * w        over each token's row of N elements
// Workgroup (s, t) writes elements s * 4 WG .. s * 4 WG + 4 WG - 1 of token t's row: every
// workgroup of the row computes the row's sum itself, in the same order, so they agree bit for
// bit — a row takes ceil(N / 4 WG) workgroups side by side rather than one walking it all, since
// a lone workgroup's dependent loads, not bytes, were this kernel's time
// (docs/runs/2026-12-04-moved-from-src.md).
// The order: lane l adds dot(x4, x4) of the vec4s x4 = elements 4v .. 4v + 3 (0 past N) for
// v = l, l + WG, ... in turn, then the lanes' sums are added across the workgroup (reduce.wgsl
// or reduce_sg.wgsl): matmul_in.wgsl's normed input computes exactly this. (dot, not four
// `ss += a * a`, which a compiler may contract into fused multiply-adds one way in one kernel
// and another way in the other: the H200's test saw the two differ once the loops unrolled.)
// The loops run a constant number of times (VPL), so the compiler can issue their loads
// together.
// (matmul_in.wgsl computes the same, fused into decode's matmuls; qkv_post.wgsl the per-head
// norms of q and k.)
// LAST_ONLY = 1: only the call's last token, written to row 0 of out (the final norm before
// the logits).
// Constants: N, EPS, WG, LAST_ONLY.
@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<storage, read> x: array<f32>;         // (n_batch, N)
@group(0) @binding(2) var<storage, read> w: array<f32>;         // (N)
@group(0) @binding(3) var<storage, read_write> out: array<f32>; // (n_batch, N), or (N)

const VPL: u32 = (N + 4u * WG - 1u) / (4u * WG); // vec4s a lane sums

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    var src = wid.y * N; // first element of the row, in x
    var dst = src;                         // and in out
    if (LAST_ONLY == 1u) {
        src = (step.n_tok - 1u) * N;
        dst = 0u;
    }
    var ss = 0.0;
    for (var k = 0u; k < VPL; k++) { // vec4 v = lid + k WG, in matmul_in.wgsl's order
        let e = 4u * (lid + k * WG);
        var v = vec4<f32>(0.0);
        for (var i = 0u; i < 4u; i++) {
            if (e + i < N) { v[i] = x[src + e + i]; }
        }
        ss += dot(v, v);
    }
    ss = wg_sum(ss, lid);
    let scale = 1.0 / sqrt(ss / f32(N) + EPS);
    for (var k = 0u; k < 4u; k++) {
        let i = wid.x * 4u * WG + k * WG + lid;
        if (i < N) { out[dst + i] = x[src + i] * scale * w[i]; }
    }
}
