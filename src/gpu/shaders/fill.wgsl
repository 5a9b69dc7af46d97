// fill.wgsl — out[i] = VALUE + i * STEP for i < N (u32 elements): sets a buffer on the GPU
// without an upload; also the runtime's own test kernel (tests/test_gpu_device.c).
// Constants (written before this text): WG (workgroup size), N, VALUE, STEP (all u32).
// One invocation per element; the grid is ceil(N / WG) workgroups along x.

@group(0) @binding(0) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < N) {
        out[id.x] = VALUE + id.x * STEP;
    }
}
