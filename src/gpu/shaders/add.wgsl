// add.wgsl — x += y, token by token: the residual add (y a (n_tok, N) array, Y_STRIDE = N)
// and qwen2's bias add (y one row of N, Y_STRIDE = 0). Invocation (i, t): element i of token t;
// workgroups (ceil(N / WG), n_tok).
// Constants: N, Y_STRIDE (elements between tokens' rows of y), WG.
@group(0) @binding(0) var<storage, read_write> x: array<f32>; // (n_batch, N)
@group(0) @binding(1) var<storage, read> y: array<f32>;       // (n_batch, N) or (N)

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    let t = gid.y;
    if (i >= N) { return; }
    x[t * N + i] = x[t * N + i] + y[t * Y_STRIDE + i];
}
