// attn_merge.wgsl — the merge of attn_combine.wgsl, shared with attn_combine_rows.wgsl (so a
// batched row's bits are decode's). Reads the including kernel's out; constants N_HEAD, HEAD_DIM, WG.
// Merges the n_split partials of one head, the first at float first of out, the next
// N_HEAD (HEAD_DIM + 2) floats on, into out[at .. at + HEAD_DIM).
fn merge(n_split: u32, first: u32, at: u32, lid: u32) {
    let stride = N_HEAD * (HEAD_DIM + 2u); // between one split's partials and the next's
    var mx = -3.0e38;
    for (var s = 0u; s < n_split; s++) { mx = max(mx, out[first + s * stride + HEAD_DIM]); }
    var l = 0.0;
    for (var s = 0u; s < n_split; s++) {
        let p = first + s * stride;
        l += out[p + HEAD_DIM + 1u] * exp(out[p + HEAD_DIM] - mx);
    }
    for (var d = lid; d < HEAD_DIM; d += WG) {
        var a = 0.0;
        for (var s = 0u; s < n_split; s++) {
            let p = first + s * stride;
            a += out[p + d] * exp(out[p + HEAD_DIM] - mx);
        }
        out[at + d] = a / l;
    }
}
