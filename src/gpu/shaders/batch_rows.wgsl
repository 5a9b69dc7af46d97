// batch_rows.wgsl — the rows of a batched decode pass whose caches lie in one KV page
// (forward.c, section "batch"; kvpool.h), written by the host before each pass: entry i is
// the i-th such row (workgroup y = i): {its row in the batch's activations, its position, the
// first float of its sequence's slot in the page's caches, its attention chunk
// (gpu_attention_chunk of the position)}. ROWS: the entries, the pass's most rows.
@group(0) @binding(0) var<uniform> rows: array<vec4<u32>, ROWS>;
