// words_vec4.wgsl — the weight's words as formats.wgsl reads them, four a vec4 (every buffer
// is a whole number of them, lean_gpu_buf_create): matmul_tiled, where each lane reads its own
// row and a group's quants (formats.wgsl's chunk_group) come in one 16-byte load.
@group(0) @binding(0) var<storage, read> W: array<vec4<u32>>;
fn wd(i: u32) -> u32 { return W[i >> 2u][i & 3u]; }
fn wq4(i: u32) -> vec4<u32> { return W[i]; }
