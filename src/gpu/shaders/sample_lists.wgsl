// sample_lists.wgsl — a later level of the greedy tree: load_entry(e, end) is entry e of the
// previous level's results, which lie one after another from IN_OFF (words) in the scratch
// buffer as (value bits, id) pairs (SENTINEL for e >= end). Goes before sample_argmax.
// Constants: IN_OFF.
fn load_entry(e: u32, end: u32) -> Entry {
    if (e >= end) { return SENTINEL; }
    return load_list_entry(IN_OFF, e);
}
