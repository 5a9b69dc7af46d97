// words_u32.wgsl — the weight's words as formats.wgsl reads them, one u32 a load: matmul_vec
// and get_rows, whose neighbouring lanes read neighbouring words (declared as vec4s, decode
// was slower: docs/runs/2026-12-04-moved-from-src.md).
@group(0) @binding(0) var<storage, read> W: array<u32>;
fn wd(i: u32) -> u32 { return W[i]; }
fn wq4(i: u32) -> vec4<u32> { return vec4<u32>(W[4u * i], W[4u * i + 1u], W[4u * i + 2u], W[4u * i + 3u]); }
