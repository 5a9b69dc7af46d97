// matmul_in.wgsl — what matmul_vec reads as its input x, four columns at a time, one pair of
// functions per mode, each in its own file compiled after this one: X itself
// (matmul_in_plain.wgsl), or X RMS-normed by the weight NORM_W (matmul_in_normed.wgsl: the
// layer's RMSNorm fused into decode's matmuls, so the norm costs no dispatch of its own):
//   fn x_begin(l: u32, xr: u32)          called once by every lane, in uniform control flow
//   fn x4_at(xr: u32, col: u32) -> vec4<f32>   columns col .. col + 3, col % 4 = 0
// of the row of x that starts at vec4 xr (matmul_vec.wgsl's batch row).
// Columns from COLS on read as 0 (X's binding is a whole number of vec4s: gpu_matmul_create
// rounds it up, so the last vec4 may hold another row's floats or padding).
// Normed, every workgroup computes the row's scale itself (the row is short: n_embd) as
// rmsnorm.wgsl does — lane l < NORM_LANES adds dot(x4, x4) of columns 4v .. 4v + 3 for v = l,
// l + NORM_LANES, ... in turn, then the workgroup sum (reduce.wgsl or reduce_sg.wgsl;
// lanes past NORM_LANES add 0, which leaves every sum as rmsnorm's workgroup makes it) — and
// x4_at returns x * scale * w, rmsnorm's expression, so its inputs are rmsnorm.wgsl's outputs
// bit for bit. NORM_W is a storage buffer (a uniform read at scattered words by the lanes is
// served one address at a time, several times slower: docs/runs/2026-12-04-moved-from-src.md),
// bound only in normed mode, at binding NORM_AT.
// X_VEC4: COLS / 4 rounded up. NORM_LANES: rmsnorm's workgroup size (WG here is a power of
// two at least that).

@group(0) @binding(NORM_AT) var<storage, read> NORM_W: array<vec4<f32>>; // (COLS), padded

// the row's scale, shared through workgroup memory: kept in a private variable set here and
// read in x4_at, it read wrong on llvmpipe (Dawn over OpenGL ES; the normed input's test)
var<workgroup> norm_scale: f32;

const NORM_VPL: u32 = (X_VEC4 + NORM_LANES - 1u) / NORM_LANES; // vec4s a lane sums

// v with the lanes of columns COLS and past set to 0 (constant-folded away when COLS % 4 = 0)
fn x4_mask(v: vec4<f32>, col: u32) -> vec4<f32> {
    if (COLS % 4u == 0u) { return v; }
    return select(vec4<f32>(0.0), v, vec4<u32>(col) + vec4<u32>(0u, 1u, 2u, 3u) < vec4<u32>(COLS));
}
