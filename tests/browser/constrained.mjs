// constrained.mjs — the browser module's grammars and LoRA adapters (docs/grammar.md,
// docs/lora.md), against the native CLI's ids computed at test time, on each rung:
//   - 'cpu': the CPU's exact path (the browser's simd128 and native AVX agree bit for bit
//     there, as run.mjs's seeded checks need): grammars on the chat model (SmolLM2's
//     vocabulary: tokens that span several grammar symbols), adapters on the llama fixture;
//   - 'gpu': WebGPU (the draws on the GPU's resident sampler and its grammar masks), against
//     `lean run --backend gpu`, all on one tiny model with `lean gen`'s byte-level stand-in
//     vocabulary (512 ids, ChatML) and two random adapters for it (scripts/make_lora.py), one
//     load, a smaller schema and fewer ids: SwiftShader takes seconds a step on the chat
//     model's 49152-entry output layer, and each load compiles its pipelines anew.
// The checks, on each:
//   - Lean.load(..., { loras: [{ url }] }): `lean run --lora`'s greedy ids; setLoras with two
//     adapters (one from an ArrayBuffer, scales 0.75 and -0.5): `lean run --lora-scaled A 0.75
//     --lora-scaled B -0.5`'s; a misfit (another architecture's adapter) rejects naming it and
//     the adapters in force stay; setLoras([]): the model's own ids;
//   - generate({ ids, jsonSchema }), seeded at temperature 1 over the whole vocabulary: the
//     ids `lean run --json-schema` draws, a reply that ends because the grammar is complete
//     and parses with the schema's required keys; generate({ grammar }) (GBNF): `lean run
//     --grammar`'s ids;
//   - chat(text, { jsonSchema }): `lean chat --json-schema`'s reply, parsed;
//   - a bad schema rejects naming its place;
//   - generate({ allowedIds }) (raw masks): the greedy reply's own ids allowed give that reply,
//     without its first id every id comes from the list, one id allowed (sampled) is drawn every
//     time; a non-id or an empty list rejects; chat(text, { allowedIds: [300] }): id 300's text
//     six times (lean_chat_session_set_mask).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';

const LEAN = 'build/lean';
const SCHEMA = {
    type: 'object',
    properties: { name: { type: 'string', maxLength: 10 }, age: { type: 'integer' }, ok: { type: 'boolean' } },
    required: ['name', 'age', 'ok'],
};
const GPU_SCHEMA = { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] };
const GBNF = 'root ::= ("yes" | "no") " " [0-9] [0-9]?';
const PROMPT = [1, 2, 3, 4, 5, 6, 7, 8];
const DRAW = { temperature: 1, topK: 0, topP: 1, seed: 5 };
const DRAW_FLAGS = ['--temp', '1', '--top-k', '0', '--top-p', '1', '--seed', '5'];
const LLAMA = 'build/fixtures/llama-q4_k.gguf';
// The GPU rung's model and adapters (served at /browser-models/, as the chat model is).
const TINY_MODEL = 'build/browser/constrained-tiny-q8_0.gguf';
const TINY_LORAS = ['build/browser/constrained-tiny-a.gguf', 'build/browser/constrained-tiny-b.gguf'];
const PYTHON = fs.existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3'; // as the Makefile's (numpy)
// a file's URL under run.mjs's server: build/browser at /browser-models, build/fixtures at /models, build/lora at /lora
const MOUNTS = { browser: 'browser-models', fixtures: 'models', lora: 'lora' };
const served = (file) => `/${MOUNTS[file.split('/')[1]]}/${file.split('/').pop()}`;

const lean = (args, input = '') => execFileSync(LEAN, args, { input, encoding: 'utf8', stdio: ['pipe', 'pipe', 'pipe'] });
const ids = (out) => out.trim().split(/\s+/).filter(Boolean).map(Number);

// The native references on one backend ('cpu': exact, grammars on chatModel, the file run.mjs
// generated; 'gpu': TINY_MODEL and its adapters, written here).
export function constrainedReferences(chatModel, backend) {
    const gpu = backend === 'gpu';
    if (gpu) {
        lean(['gen', '--preset', 'tiny-llama', '--type', 'q8_0', '--seed', '1', '-o', TINY_MODEL]);
        TINY_LORAS.forEach((f, i) => execFileSync(PYTHON, ['scripts/make_lora.py', 'adapter', TINY_MODEL, f, '--seed', String(i + 1)]));
    }
    const model = gpu ? TINY_MODEL : chatModel, loraModel = gpu ? TINY_MODEL : LLAMA;
    const [a, b] = gpu ? TINY_LORAS : ['build/lora/llama-a.gguf', 'build/lora/llama-b.gguf'];
    const schema = gpu ? GPU_SCHEMA : SCHEMA, nLora = gpu ? 8 : 16;
    const flags = ['--backend', backend, ...(gpu ? [] : ['--exact']), '-q'];
    const run = (m, extra) => ids(lean(['run', '-m', m, '--ids', PROMPT.join(','), ...flags, ...extra]));
    return {
        model: served(model), loraModel: served(loraModel), loras: [served(a), served(b)], schema, nLora,
        schemaIds: run(model, ['-n', '300', ...DRAW_FLAGS, '--json-schema', JSON.stringify(schema)]),
        gbnf: run(model, ['-n', '16', ...DRAW_FLAGS, '--grammar', GBNF]),
        chat: lean(['chat', '-m', model, ...flags, '-n', '300', ...DRAW_FLAGS,
                    '--json-schema', JSON.stringify(schema)], 'Who are you?\n').replace(/\n$/, ''),
        loraA: run(loraModel, ['-n', String(nLora), '--greedy', '--lora', a]),
        loraAB: run(loraModel, ['-n', String(nLora), '--greedy', '--lora-scaled', a, '0.75', '--lora-scaled', b, '-0.5']),
        base: run(loraModel, ['-n', String(nLora), '--greedy']),
    };
}

// h: run.mjs's helpers { call, load, check, same, fmt }; ref: constrainedReferences(.., backend).
export async function constrainedChecks(page, t, ref, backend, jspi, h) {
    const { call, load, check, same, fmt } = h;
    const exact = backend === 'cpu' ? { exact: true } : {};
    const n = ref.nLora;
    let loaded = await load(page, `${t} lora`, ref.loraModel, backend, jspi, { ...exact, loras: [{ url: ref.loras[0] }] });
    if (loaded) {
        let r = await call(page, 'generate', { ids: PROMPT, maxTokens: n });
        check(!r.error && same(r.ids, ref.loraA), `${t}: Lean.load({ loras }): lean run --lora's ids (${r.secs})`,
              r.error ? r.error.message : `got ${fmt(r.ids)}, lean run ${fmt(ref.loraA)}`);
        r = await call(page, 'setLoras', [{ url: ref.loras[0], scale: 0.75 }, { fetch: ref.loras[1], scale: -0.5 }]);
        const two = r.error ? r : await call(page, 'generate', { ids: PROMPT, maxTokens: n });
        check(!two.error && r.n === 2 && same(two.ids, ref.loraAB),
              `${t}: setLoras(two, one from an ArrayBuffer): lean run --lora-scaled x2's ids (${two.secs})`,
              two.error ? two.error.message : `got ${fmt(two.ids)}, lean run ${fmt(ref.loraAB)}`);
        r = await call(page, 'setLoras', [{ url: '/lora/qwen2-a.gguf' }]);
        const kept = await call(page, 'generate', { ids: PROMPT, maxTokens: n });
        check(r.error && /qwen2/.test(r.error.message) && same(kept.ids, ref.loraAB),
              `${t}: a misfit adapter rejects ('${r.error?.message}'), the adapters in force stay`,
              r.error ? `ids ${fmt(kept.ids)}` : 'no error');
        r = await call(page, 'setLoras', []);
        const none = r.error ? r : await call(page, 'generate', { ids: PROMPT, maxTokens: n });
        check(!none.error && same(none.ids, ref.base), `${t}: setLoras([]): the model's own ids (${none.secs})`,
              none.error ? none.error.message : `got ${fmt(none.ids)}, lean run ${fmt(ref.base)}`);
    }
    // the grammars: on the GPU the same model, its adapters removed just above
    if (ref.model !== ref.loraModel) loaded = await load(page, `${t} grammar`, ref.model, backend, jspi, exact);
    if (!loaded) return;
    const schema = ref.schema;
    let r = await call(page, 'generate', { ids: PROMPT, maxTokens: 300, jsonSchema: schema, ...DRAW });
    let parsed = null;
    try { parsed = JSON.parse(r.text); } catch { /* checked below */ }
    check(!r.error && same(r.ids, ref.schemaIds) && r.stats?.stop === 'eog' && parsed &&
          schema.required.every((k) => k in parsed),
          `${t}: generate({ jsonSchema }): lean run --json-schema's ids, ${JSON.stringify(r.text)} parses (${r.secs})`,
          r.error ? r.error.message : `got ${fmt(r.ids)} (${JSON.stringify(r.text)}, stop ${r.stats?.stop}), ` +
          `lean run ${fmt(ref.schemaIds)}`);
    r = await call(page, 'generate', { ids: PROMPT, maxTokens: 16, grammar: GBNF, ...DRAW });
    check(!r.error && same(r.ids, ref.gbnf) && /^(yes|no) [0-9][0-9]?$/.test(r.text),
          `${t}: generate({ grammar }): lean run --grammar's ids, ${JSON.stringify(r.text)} (${r.secs})`,
          r.error ? r.error.message : `got ${fmt(r.ids)} (${JSON.stringify(r.text)}), lean run ${fmt(ref.gbnf)}`);
    r = await call(page, 'chat', 'Who are you?', { maxTokens: 300, jsonSchema: schema, ...DRAW });
    parsed = null;
    try { parsed = JSON.parse(r.text); } catch { /* checked below */ }
    check(!r.error && r.text === ref.chat && parsed !== null,
          `${t}: chat(text, { jsonSchema }): lean chat --json-schema's reply, parsed (${r.secs})`,
          r.error ? r.error.message : `got ${JSON.stringify(r.text)}, lean chat ${JSON.stringify(ref.chat)}`);
    r = await call(page, 'generate', { ids: PROMPT, jsonSchema: { type: 'object', properties: { a: { type: 7 } } } });
    check(r.error && /#\/properties\/a/.test(r.error.message), `${t}: a malformed schema rejects: '${r.error?.message}'`,
          r.error ? r.error.message : 'no error');
    // raw masks (allowedIds; on the GPU the resident draw under the mask): the greedy reply's own
    // ids allowed give that reply; without its first id, another first id from the list; one id
    // allowed, seeded at temperature 1, only that id; a bad list rejects naming the entry
    const free = await call(page, 'generate', { ids: PROMPT, maxTokens: 8, ignoreEog: true });
    const own = [...new Set(free.ids ?? [])];
    r = await call(page, 'generate', { ids: PROMPT, maxTokens: 8, ignoreEog: true, allowedIds: own });
    check(!free.error && !r.error && same(r.ids, free.ids), `${t}: generate({ allowedIds: the greedy reply's ids }): that reply (${r.secs})`,
          free.error?.message ?? r.error?.message ?? `got ${fmt(r.ids)}, unmasked ${fmt(free.ids)}`);
    const others = [...own.filter((id) => id !== free.ids?.[0]), 3, 5].filter((id) => id !== free.ids?.[0]);
    r = await call(page, 'generate', { ids: PROMPT, maxTokens: 8, ignoreEog: true, allowedIds: others });
    check(!r.error && r.ids.length === 8 && r.ids[0] !== free.ids?.[0] && r.ids.every((id) => others.includes(id)),
          `${t}: generate({ allowedIds } without the greedy first id): every id from the list (${r.secs})`,
          r.error ? r.error.message : `got ${fmt(r.ids)}, allowed ${fmt(others)}`);
    r = await call(page, 'generate', { ids: PROMPT, maxTokens: 4, ignoreEog: true, allowedIds: [7], ...DRAW });
    check(!r.error && same(r.ids, [7, 7, 7, 7]), `${t}: generate({ allowedIds: [7] }), sampled: 7 every time`,
          r.error ? r.error.message : `got ${fmt(r.ids)}`);
    const six = await call(page, 'detokenize', [300, 300, 300, 300, 300, 300], { skipSpecial: true });
    r = await call(page, 'chat', 'Who are you?', { maxTokens: 6, allowedIds: [300], ...DRAW });
    check(!r.error && !six.error && r.text === six.text, `${t}: chat(text, { allowedIds: [300] }): id 300 six times, ${JSON.stringify(r.text)}`,
          r.error?.message ?? six.error?.message ?? `got ${JSON.stringify(r.text)}, want ${JSON.stringify(six.text)}`);
    r = await call(page, 'generate', { ids: PROMPT, allowedIds: [3, 1e9] });
    const empty = await call(page, 'generate', { ids: PROMPT, allowedIds: [] });
    check(r.error && /1000000000/.test(r.error.message) && empty.error && /allowedIds/.test(empty.error.message),
          `${t}: allowedIds with a non-id rejects ('${r.error?.message}'), and an empty list`,
          r.error ? empty.error?.message ?? 'an empty list taken' : 'no error');
}
