enable chromium_experimental_subgroup_matrix;
// matrix_probe.wgsl — one subgroup-matrix multiply-accumulate, for the host to check against
// the CPU (src/gpu/matrix.c): out = a * b + c, a (M rows, K columns), b (K rows, N columns),
// c and out (M rows, N columns), all row-major. Dawn's experimental subgroup matrices
// (docs/gpu.md, "Subgroup matrices"): subgroupMatrixLoad(pointer, first element, column major?,
// elements per row) as this Dawn (2025) spells it.
// Constants: M N K, WG (the adapter's largest subgroup size: Dawn wants a workgroup's x size a
// multiple of it in a kernel on subgroup matrices). Aliases written in before: T (a's and b's
// elements), R (c's and out's).
// Bindings: 0 a: (M, K) T, 1 b: (K, N) T, 2 c: (M, N) R, 3 out: (M, N) R.

@group(0) @binding(0) var<storage, read> a: array<T>;
@group(0) @binding(1) var<storage, read> b: array<T>;
@group(0) @binding(2) var<storage, read> c: array<R>;
@group(0) @binding(3) var<storage, read_write> out: array<R>;

@compute @workgroup_size(WG)
fn main() {
    // every subgroup of the workgroup computes the same product (one when the size is fixed)
    let left = subgroupMatrixLoad<subgroup_matrix_left<T, K, M>>(&a, 0, false, K);
    let right = subgroupMatrixLoad<subgroup_matrix_right<T, N, K>>(&b, 0, false, N);
    let acc = subgroupMatrixLoad<subgroup_matrix_result<R, N, M>>(&c, 0, false, N);
    subgroupMatrixStore(&out, 0, subgroupMatrixMultiplyAccumulate(left, right, acc), false, N);
}
