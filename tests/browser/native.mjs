// native.mjs — the browser tests' references, computed at test time by the committed native
// CLI (build/lean), never written down: greedy and seeded ids (`lean run --ids`), chat replies
// (`lean chat`), and the small chat model itself (`lean gen`). See tests/browser/run.mjs.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

export const LEAN = 'build/lean';

function lean(args, input = '') {
    return execFileSync(LEAN, args, { input, encoding: 'utf8', stdio: ['pipe', 'pipe', 'pipe'],
                                      maxBuffer: 1 << 26, timeout: 600_000 });
}

// FNV-1a 64 over the ids' little-endian int32 bytes: the hash `lean bench` prints.
export function fnv1a64(ids) {
    let h = 0xcbf29ce484222325n;
    for (const id of ids)
        for (let b = 0; b < 4; b++) {
            h ^= BigInt((id >>> (8 * b)) & 0xff);
            h = (h * 0x100000001b3n) & 0xffffffffffffffffn;
        }
    return h.toString(16).padStart(16, '0');
}

// sampling(s): the CLI's flags for the API's sampling fields (greedy when s is null).
function samplingFlags(s) {
    if (!s) return ['--greedy'];
    return ['--temp', String(s.temperature), '--top-k', String(s.topK), '--top-p', String(s.topP),
            '--repeat-penalty', String(s.repeatPenalty), '--seed', String(s.seed)];
}

// biasFlags(pairs): `--logit-bias ID+B` (or ID-B) for each [id, value] of the API's logitBias.
export const biasFlags = (pairs) => pairs.flatMap(([id, v]) => ['--logit-bias', `${id}${v < 0 ? '-' : '+'}${Math.abs(v)}`]);

// runIds: the ids `lean run` generates after the prompt ids, on one backend (bias: [id, value]
// pairs, as logitBias).
export function runIds(model, backend, prompt, n, sampling = null, exact = false, bias = []) {
    const out = lean(['run', '-m', model, '--ids', prompt.join(','), '-n', String(n), '--backend', backend, '-q',
                      ...samplingFlags(sampling), ...(exact ? ['--exact'] : []), ...biasFlags(bias)]);
    return out.trim().split(/\s+/).filter(Boolean).map(Number);
}

// peakRss: the peak resident set of `lean ARGS`, in bytes, the model file it maps included
// (getrusage's ru_maxrss of the child, through python3: Node reports no child's).
export function peakRss(args) {
    const py = 'import resource, subprocess, sys; subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, ' +
               'stderr=subprocess.DEVNULL, check=True); print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)';
    return 1024 * Number(execFileSync('python3', ['-c', py, LEAN, ...args], { encoding: 'utf8', timeout: 600_000 }).trim());
}

// chatReplies: the replies of `lean chat` to the user messages, one conversation (each
// reply is printed followed by a newline; a reply may hold newlines itself, so turn k's
// reply is what the run with k messages printed after the run with k - 1 messages).
// bias: [id, value] pairs, as logitBias.
export function chatReplies(model, backend, messages, n, sampling = null, bias = []) {
    const args = ['chat', '-m', model, '-n', String(n), '--backend', backend, '-q', ...samplingFlags(sampling),
                  ...biasFlags(bias)];
    const replies = [];
    let before = '';
    for (let k = 1; k <= messages.length; k++) {
        const out = lean(args, messages.slice(0, k).map((m) => m + '\n').join(''));
        if (!out.startsWith(before) || !out.endsWith('\n'))
            throw new Error(`lean chat: turn ${k}'s output does not extend turn ${k - 1}'s`);
        replies.push(out.slice(before.length, -1));
        before = out;
    }
    return replies;
}

// chatModel: a small random-weight model with a real tokenizer and chat template (SmolLM2's
// vocabulary from `make test-data`), written by `lean gen` where the test wants it.
export function chatModel(file) {
    const vocab = 'build/vocab/smollm2.gguf';
    if (!fs.existsSync(vocab)) throw new Error(`${vocab} is missing: run make test-data`);
    fs.mkdirSync(path.dirname(file), { recursive: true });
    lean(['gen', '--preset', 'tiny-llama', '--type', 'q8_0', '--vocab', vocab, '--seed', '1', '-o', file]);
    return file;
}

// bigModel: one layer of Qwen2.5-0.5B's shapes in Q8_0, random weights (`lean gen`): its
// token_embd (151936 x 896) takes 144.6 MB, more than a 128 MiB storage binding holds. With
// layers 0, all of the preset's (24: a 505 MiB file).
export const BIG_TENSOR_BYTES = (151936 * 896 / 32) * 34;
export function bigModel(file, layers = 1) {
    fs.mkdirSync(path.dirname(file), { recursive: true });
    lean(['gen', '--preset', 'qwen2.5-0.5b', '--type', 'q8_0', '--layers', String(layers), '--seed', '1', '-o', file]);
    return file;
}

// hugeModel: a one-layer llama (the fixtures' layer shapes, all F32) whose token_embd.weight
// (256 x 4194304, lean's most rows: 4 GiB, tied to the output) is past what wasm32's memory
// holds and past any GPU's storage binding (lean's kernels index 2^32 - 4 bytes at most); its
// data is a hole (a sparse file: the header on disk, a few KiB), which the page must refuse
// before reading it.
export const HUGE_TENSOR_BYTES = 256 * 4194304 * 4;
export function hugeModel(file) {
    const u32 = (v) => { const b = Buffer.alloc(4); b.writeUInt32LE(v); return b; };
    const u64 = (v) => { const b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt(v)); return b; };
    const f32 = (v) => { const b = Buffer.alloc(4); b.writeFloatLE(v); return b; };
    const str = (s) => Buffer.concat([u64(Buffer.byteLength(s)), Buffer.from(s)]);
    const keys = [['general.architecture', 8, str('llama')], // 8: a string, 4: a uint32, 6: a float32
        ...[['context_length', 256], ['embedding_length', 256], ['block_count', 1], ['feed_forward_length', 512],
            ['attention.head_count', 4], ['attention.head_count_kv', 2], ['attention.key_length', 64],
            ['attention.value_length', 64], ['rope.dimension_count', 64]].map(([k, v]) => [`llama.${k}`, 4, u32(v)]),
        ['llama.attention.layer_norm_rms_epsilon', 6, f32(1e-5)]];
    const tensors = [['token_embd.weight', [256, 4194304]], ['output_norm.weight', [256]], ['blk.0.attn_norm.weight', [256]],
        ['blk.0.attn_q.weight', [256, 256]], ['blk.0.attn_k.weight', [256, 128]], ['blk.0.attn_v.weight', [256, 128]],
        ['blk.0.attn_output.weight', [256, 256]], ['blk.0.ffn_norm.weight', [256]], ['blk.0.ffn_gate.weight', [256, 512]],
        ['blk.0.ffn_up.weight', [256, 512]], ['blk.0.ffn_down.weight', [512, 256]]];
    const align = (n) => Math.ceil(n / 32) * 32; // general.alignment's default
    let at = 0;
    const infos = tensors.map(([name, ne]) => {
        const info = Buffer.concat([str(name), u32(ne.length), ...ne.map(u64), u32(0), u64(at)]); // 0: F32
        at = align(at + ne.reduce((a, b) => a * b, 4));
        return info;
    });
    const head = Buffer.concat([Buffer.from('GGUF'), u32(3), u64(tensors.length), u64(keys.length), // version, counts
        ...keys.map(([k, type, v]) => Buffer.concat([str(k), u32(type), v])), ...infos]);
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, head);
    fs.truncateSync(file, align(head.length) + at);
    return file;
}

// over4gModel: SmolLM2-1.7B's shapes (2048 wide, feed-forward 8192, 49152 tokens, tied) in Q8_0
// with 62 layers, random weights (`lean gen`): a 4.5 GB file, past wasm32's 4 GiB, whose largest
// tensor (token_embd, OVER4G_TENSOR_BYTES: 102 MiB) fits a 128 MiB storage binding (over4g.mjs).
export const OVER4G_TENSOR_BYTES = (49152 * 2048 / 32) * 34;
export function over4gModel(file) {
    fs.mkdirSync(path.dirname(file), { recursive: true });
    lean(['gen', '--preset', 'smollm2-1.7b', '--type', 'q8_0', '--layers', '62', '--seed', '1', '-o', file]);
    return file;
}
