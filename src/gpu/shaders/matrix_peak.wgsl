enable chromium_experimental_subgroup_matrix;
// matrix_peak.wgsl — how fast a device multiplies subgroup matrices (tools/gpu_bench.c,
// `gpu_bench matrix`): every subgroup does 4 * ITER multiply-accumulates of one shape on
// matrices it loaded once, in 4 independent chains (so one product's latency does not stall
// the next), and stores the 4 results. Not part of any forward pass: a ceiling for one.
// Constants: M N K WG ITER; aliases T, R (matrix.c, lean_gpu_matrix_pipeline).
// Bindings: 0 a: (M, K) T, 1 b: (K, N) T, 2 out: (workgroups, 4, M, N) R.

@group(0) @binding(0) var<storage, read> a: array<T>;
@group(0) @binding(1) var<storage, read> b: array<T>;
@group(0) @binding(2) var<storage, read_write> out: array<R>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>) {
    let left = subgroupMatrixLoad<subgroup_matrix_left<T, K, M>>(&a, 0, false, K);
    let right = subgroupMatrixLoad<subgroup_matrix_right<T, N, K>>(&b, 0, false, N);
    var acc0 = subgroup_matrix_result<R, N, M>();
    var acc1 = subgroup_matrix_result<R, N, M>();
    var acc2 = subgroup_matrix_result<R, N, M>();
    var acc3 = subgroup_matrix_result<R, N, M>();
    for (var i = 0u; i < ITER; i++) {
        acc0 = subgroupMatrixMultiplyAccumulate(left, right, acc0);
        acc1 = subgroupMatrixMultiplyAccumulate(left, right, acc1);
        acc2 = subgroupMatrixMultiplyAccumulate(left, right, acc2);
        acc3 = subgroupMatrixMultiplyAccumulate(left, right, acc3);
    }
    let base = wid.x * 4u * M * N;
    subgroupMatrixStore(&out, base, acc0, false, N);
    subgroupMatrixStore(&out, base + M * N, acc1, false, N);
    subgroupMatrixStore(&out, base + 2u * M * N, acc2, false, N);
    subgroupMatrixStore(&out, base + 3u * M * N, acc3, false, N);
}
