// words_u32.wgsl — the weight's words as formats.wgsl reads them, one u32 a load: matmul_vec
// and get_rows, whose neighbouring lanes read neighbouring words (declared as vec4s, decode
// lost 3-6%: H200 tg128 smollm2-1.7b q8_0 705 vs 750, qwen2.5-0.5b q8_0 1095 vs 1142).
@group(0) @binding(0) var<storage, read> W: array<u32>;
fn wd(i: u32) -> u32 { return W[i]; }
fn wq4(i: u32) -> vec4<u32> { return vec4<u32>(W[4u * i], W[4u * i + 1u], W[4u * i + 2u], W[4u * i + 3u]); }
