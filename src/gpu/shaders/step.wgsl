// step.wgsl — the per-call parameters the forward kernels read, written by forward.c before
// each submit (gpu_step_words): the call runs n_tok tokens at positions pos .. pos + n_tok - 1;
// chunk: the keys a decode attention workgroup takes (gpu_attention_chunk). 16 bytes (the
// uniform weights.h describes); b is unused.
struct Step { n_tok: u32, pos: u32, chunk: u32, b: u32 }
