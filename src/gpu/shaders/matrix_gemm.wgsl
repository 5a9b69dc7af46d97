enable chromium_experimental_subgroup_matrix;
// matrix_gemm.wgsl — a first matmul on subgroup matrices, the engine a quantized prefill
// matmul on them would wrap (issue 29 item 3): out = a * b^T, a (ROWS, DEPTH) T row-major
// (tokens' activations), b (COLS, DEPTH) T row-major (a weight's rows), out (ROWS, COLS) R.
// Each workgroup is one subgroup and computes a block of TM x TN result matrices (TM M rows,
// TN N columns), stepping through DEPTH by K: TM left matrices loaded from a, then per column
// block one right matrix straight from b (b^T is b read column-major) and TM products.
// Loads go straight to storage (the caches keep what neighbours share); ROWS, COLS and DEPTH
// must be multiples of the block (TM M, TN N, K): matrix.c checks. Not in any forward pass yet.
// Constants: M N K WG (matrix.c, lean_gpu_matrix_pipeline), TM TN ROWS COLS DEPTH; aliases T, R.
// Bindings: 0 a: (ROWS, DEPTH) T, 1 b: (COLS, DEPTH) T, 2 out: (ROWS, COLS) R.
// Workgroups: (COLS / (TN N), ROWS / (TM M)).

@group(0) @binding(0) var<storage, read> a: array<T>;
@group(0) @binding(1) var<storage, read> b: array<T>;
@group(0) @binding(2) var<storage, read_write> out: array<R>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>) {
    let row0 = wid.y * TM * M;
    let col0 = wid.x * TN * N;
    var acc: array<subgroup_matrix_result<R, N, M>, TM * TN>;
    var left: array<subgroup_matrix_left<T, K, M>, TM>;
    for (var d = 0u; d < DEPTH; d += K) {
        for (var i = 0u; i < TM; i++) {
            left[i] = subgroupMatrixLoad<subgroup_matrix_left<T, K, M>>(&a, (row0 + i * M) * DEPTH + d, false, DEPTH);
        }
        for (var j = 0u; j < TN; j++) {
            let right = subgroupMatrixLoad<subgroup_matrix_right<T, N, K>>(&b, (col0 + j * N) * DEPTH + d, true, DEPTH);
            for (var i = 0u; i < TM; i++) {
                acc[i * TN + j] = subgroupMatrixMultiplyAccumulate(left[i], right, acc[i * TN + j]);
            }
        }
    }
    for (var i = 0u; i < TM; i++) {
        for (var j = 0u; j < TN; j++) {
            subgroupMatrixStore(&out, (row0 + i * M) * COLS + col0 + j * N, acc[i * TN + j], false, COLS);
        }
    }
}
