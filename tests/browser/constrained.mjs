// constrained.mjs — the browser module's grammars and LoRA adapters (docs/grammar.md,
// docs/lora.md), against the native CLI's ids computed at test time. One page per browser, on
// the CPU's exact path (the browser's simd128 and native AVX agree bit for bit there, as
// run.mjs's seeded checks need):
//   - generate({ ids, jsonSchema }) on the chat model (SmolLM2's vocabulary), seeded at
//     temperature 1 over the whole vocabulary: the ids `lean run --json-schema` draws, a reply
//     that ends because the grammar is complete and parses with the schema's required keys;
//     generate({ grammar }) (GBNF): `lean run --grammar`'s ids;
//   - chat(text, { jsonSchema }): `lean chat --json-schema`'s reply, parsed;
//   - a bad schema rejects naming its place;
//   - Lean.load(..., { loras: [{ url }] }) on the llama fixture: `lean run --lora`'s greedy ids;
//     setLoras with two adapters (one from an ArrayBuffer, scales 0.75 and -0.5): `lean run
//     --lora-scaled A 0.75 --lora-scaled B -0.5`'s; a misfit (another architecture's adapter)
//     rejects naming it and the adapters in force stay; setLoras([]): the model's own ids.
import { execFileSync } from 'node:child_process';

const LEAN = 'build/lean';
const SCHEMA = {
    type: 'object',
    properties: { name: { type: 'string', maxLength: 10 }, age: { type: 'integer' }, ok: { type: 'boolean' } },
    required: ['name', 'age', 'ok'],
};
const GBNF = 'root ::= ("yes" | "no") " " [0-9] [0-9]?';
const PROMPT = [1, 2, 3, 4, 5, 6, 7, 8];
const DRAW = { temperature: 1, topK: 0, topP: 1, seed: 5 };
const DRAW_FLAGS = ['--temp', '1', '--top-k', '0', '--top-p', '1', '--seed', '5'];
const LLAMA = 'build/fixtures/llama-q4_k.gguf';

const lean = (args, input = '') => execFileSync(LEAN, args, { input, encoding: 'utf8', stdio: ['pipe', 'pipe', 'pipe'] });
const ids = (out) => out.trim().split(/\s+/).filter(Boolean).map(Number);

// The native references (chatModel: the file run.mjs generated).
export function constrainedReferences(chatModel) {
    const run = (model, extra) => ids(lean(['run', '-m', model, '--ids', PROMPT.join(','), '--backend', 'cpu', '--exact', '-q',
                                            ...extra]));
    return {
        schema: run(chatModel, ['-n', '300', ...DRAW_FLAGS, '--json-schema', JSON.stringify(SCHEMA)]),
        gbnf: run(chatModel, ['-n', '16', ...DRAW_FLAGS, '--grammar', GBNF]),
        chat: lean(['chat', '-m', chatModel, '--backend', 'cpu', '--exact', '-q', '-n', '300', ...DRAW_FLAGS,
                    '--json-schema', JSON.stringify(SCHEMA)], 'Who are you?\n').replace(/\n$/, ''),
        loraA: run(LLAMA, ['-n', '16', '--greedy', '--lora', 'build/lora/llama-a.gguf']),
        loraAB: run(LLAMA, ['-n', '16', '--greedy', '--lora-scaled', 'build/lora/llama-a.gguf', '0.75',
                            '--lora-scaled', 'build/lora/llama-b.gguf', '-0.5']),
        base: run(LLAMA, ['-n', '16', '--greedy']),
    };
}

// h: run.mjs's helpers { call, load, check, same, fmt }; chatUrl: the chat model's URL.
export async function constrainedChecks(page, t, ref, chatUrl, jspi, h) {
    const { call, load, check, same, fmt } = h;
    if (await load(page, `${t} grammar`, chatUrl, 'cpu', jspi, { exact: true })) {
        let r = await call(page, 'generate', { ids: PROMPT, maxTokens: 300, jsonSchema: SCHEMA, ...DRAW });
        let parsed = null;
        try { parsed = JSON.parse(r.text); } catch { /* checked below */ }
        check(!r.error && same(r.ids, ref.schema) && r.stats?.stop === 'eog' && parsed &&
              SCHEMA.required.every((k) => k in parsed),
              `${t}: generate({ jsonSchema }): lean run --json-schema's ids, ${JSON.stringify(r.text)} parses (${r.secs})`,
              r.error ? r.error.message : `got ${fmt(r.ids)} (${JSON.stringify(r.text)}, stop ${r.stats?.stop}), ` +
              `lean run ${fmt(ref.schema)}`);
        r = await call(page, 'generate', { ids: PROMPT, maxTokens: 16, grammar: GBNF, ...DRAW });
        check(!r.error && same(r.ids, ref.gbnf) && /^(yes|no) [0-9][0-9]?$/.test(r.text),
              `${t}: generate({ grammar }): lean run --grammar's ids, ${JSON.stringify(r.text)} (${r.secs})`,
              r.error ? r.error.message : `got ${fmt(r.ids)} (${JSON.stringify(r.text)}), lean run ${fmt(ref.gbnf)}`);
        r = await call(page, 'chat', 'Who are you?', { maxTokens: 300, jsonSchema: SCHEMA, ...DRAW });
        parsed = null;
        try { parsed = JSON.parse(r.text); } catch { /* checked below */ }
        check(!r.error && r.text === ref.chat && parsed !== null,
              `${t}: chat(text, { jsonSchema }): lean chat --json-schema's reply, parsed (${r.secs})`,
              r.error ? r.error.message : `got ${JSON.stringify(r.text)}, lean chat ${JSON.stringify(ref.chat)}`);
        r = await call(page, 'generate', { ids: PROMPT, jsonSchema: { type: 'object', properties: { a: { type: 7 } } } });
        check(r.error && /#\/properties\/a/.test(r.error.message), `${t}: a malformed schema rejects: '${r.error?.message}'`,
              r.error ? r.error.message : 'no error');
    }
    if (!await load(page, `${t} lora`, `/models/${LLAMA.split('/').pop()}`, 'cpu', jspi,
                    { exact: true, loras: [{ url: '/lora/llama-a.gguf' }] })) return;
    let r = await call(page, 'generate', { ids: PROMPT, maxTokens: 16 });
    check(!r.error && same(r.ids, ref.loraA), `${t}: Lean.load({ loras }): lean run --lora's ids (${r.secs})`,
          r.error ? r.error.message : `got ${fmt(r.ids)}, lean run ${fmt(ref.loraA)}`);
    r = await call(page, 'setLoras', [{ url: '/lora/llama-a.gguf', scale: 0.75 }, { fetch: '/lora/llama-b.gguf', scale: -0.5 }]);
    const two = r.error ? r : await call(page, 'generate', { ids: PROMPT, maxTokens: 16 });
    check(!two.error && r.n === 2 && same(two.ids, ref.loraAB),
          `${t}: setLoras(two, one from an ArrayBuffer): lean run --lora-scaled x2's ids (${two.secs})`,
          two.error ? two.error.message : `got ${fmt(two.ids)}, lean run ${fmt(ref.loraAB)}`);
    r = await call(page, 'setLoras', [{ url: '/lora/qwen2-a.gguf' }]);
    const kept = await call(page, 'generate', { ids: PROMPT, maxTokens: 16 });
    check(r.error && /qwen2/.test(r.error.message) && same(kept.ids, ref.loraAB),
          `${t}: a misfit adapter rejects ('${r.error?.message}'), the adapters in force stay`,
          r.error ? `ids ${fmt(kept.ids)}` : 'no error');
    r = await call(page, 'setLoras', []);
    const none = r.error ? r : await call(page, 'generate', { ids: PROMPT, maxTokens: 16 });
    check(!none.error && same(none.ids, ref.base), `${t}: setLoras([]): the model's own ids (${none.secs})`,
          none.error ? none.error.message : `got ${fmt(none.ids)}, lean run ${fmt(ref.base)}`);
}
