// web_api.mjs — build-web/lean.js (the browser module, its worker and lean.wasm) under Deno,
// held to the native CLI: Deno has module Workers, JSPI and navigator.gpu (wgpu over lavapipe),
// so the module runs here as in a browser. The browsers themselves: tests/browser/.
//
//   make web && deno run -A tests/web_api.mjs      (from the repository root; needs build/lean
//                                                   and build/fixtures: make all test-data)
//
// What is checked (the references are computed now by build/lean, never written down):
//   - the CPU rung runs the module web/wasm_features.mjs picks (lean-relaxed.wasm under Deno 2)
//   - greedy ids of two fixture models through Lean.generate on the 'cpu' rung equal
//     `lean run --ids` on the CPU, and on 'gpu' (exact) equal `lean run --backend gpu --exact`
//   - a seeded sampled run equals `lean run --temp ... -s --exact` on the CPU, with a logitBias
//     (pairs, a Map) too: `lean run ... --logit-bias`
//   - with a vocabulary and a template (a model made by `lean gen`): prompt text, tokenize and
//     detokenize, two chat turns equal `lean chat`'s replies, the second reusing the cache
//   - abort (chat and generate): nothing reaches the page after it (on the CPU, and on the GPU
//     with JSPI and the pump), and the next call still gives the same reply, exact
//   - lean.info's arch, nParams and formats (tensors per type) equal `lean info`'s
//   - a lost device (lean.testLoseDevice) on 'gpu': while ids stream the call rejects saying so;
//     before a call, the call runs on a new device; the next ids are the same; info says why
//   - bad input rejects with lean's reason and leaves nothing broken: not GGUF, truncated, an
//     id outside the vocabulary, a model freed
//   - a URL: downloaded, then from the Cache API without a request; a 404 rejects
//   - the GPU-only load (gpuOnly: weights streamed to the GPU) from a URL and a Blob, and from a
//     URL without JSPI (the loader's GPU waits answered through the pump), equals
//     `lean run --backend gpu --exact`; it refuses the CPU rung and a truncated file
//   - without JSPI ('jspi: false'): 'auto' takes the CPU and says why; a forced 'gpu' loads
//     and matches where webgpu_imports.mjs has the pump's settle(), and otherwise rejects
//     naming JSPI
// Prints "web_api: N passed, N failed" last.
import { Lean } from '../build-web/lean.js';
import { leanWebGPU } from '../web/webgpu_imports.mjs';
import { leanWasmName, relaxedSimd } from '../web/wasm_features.mjs';

let passed = 0, failed = 0;
const check = (ok, what) => {
    if (ok) passed++;
    else failed++, console.log(`FAIL: ${what}`);
};
const same = (got, want, what) => check(got === want, `${what}: got '${got}', want '${want}'`);
async function rejects(p, want, what) {
    try {
        await p;
        check(false, `${what}: resolved, expected a rejection naming '${want}'`);
    } catch (e) {
        check(String(e.message).includes(want), `${what}: '${e.message}' lacks '${want}'`);
    }
}

const lean = async (...args) => {
    const out = await new Deno.Command('build/lean', { args, stdin: 'null', stderr: 'null' }).output();
    if (!out.success) throw new Error(`build/lean ${args.join(' ')} failed`);
    return new TextDecoder().decode(out.stdout).replace(/\n$/, ''); // ids end with a newline; text has none
};
const leanChat = async (model, lines, ...args) => {
    const p = new Deno.Command('build/lean', { args: ['chat', '-m', model, '-q', ...args], stdin: 'piped', stdout: 'piped', stderr: 'null' }).spawn();
    const w = p.stdin.getWriter();
    await w.write(new TextEncoder().encode(lines.join('\n') + '\n'));
    await w.close();
    const out = await p.output();
    return new TextDecoder().decode(out.stdout).split('\n').filter((l) => l.length);
};

// `lean info FILE`'s architecture, parameter count and tensors per type, in lean.info's terms
// (formats: { TYPE: tensor count }, the type upper-case as lean.info names it)
async function leanInfo(file) {
    const text = await lean('info', file);
    const field = (name) => text.match(new RegExp(`^${name} +(.*)$`, 'm'))?.[1];
    const pairs = (field('tensors') ?? '').replace(/^\d+: /, '').split(' ');
    const formats = {};
    for (let i = 0; i + 1 < pairs.length; i += 2) formats[pairs[i].toUpperCase()] = Number(pairs[i + 1]);
    return { arch: field('architecture'), nParams: Number(field('parameters')?.split(' ')[0]), formats };
}
const sortedKeys = (o) => JSON.stringify(Object.fromEntries(Object.entries(o ?? {}).sort()));

const PROMPT = [1, 2, 3, 4, 5, 6, 7, 8];
const SAMPLING = { temperature: 0.8, topK: 40, topP: 0.95, repeatPenalty: 1.1, seed: 7 };
const samplingArgs = ['--temp', '0.8', '--top-k', '40', '--top-p', '0.95', '--repeat-penalty', '1.1', '-s', '7'];

for (const file of ['build/fixtures/llama-q4_k.gguf', 'build/fixtures/qwen2-q8_0.gguf']) {
    const bytes = await Deno.readFile(file);
    const ids = ['--ids', PROMPT.join(','), '-n', '24'];
    const cpu = await Lean.load(bytes, { backend: 'cpu' });
    same(cpu.info.backend, 'cpu', `${file}: info.backend`);
    // the model as lean info describes it (what lean.js reads through lw_model_info)
    const want = await leanInfo(file);
    check(want.arch && want.nParams > 0 && Object.keys(want.formats).length > 0, `${file}: no architecture, parameters or tensors read from lean info: ${JSON.stringify(want)}`);
    same(cpu.info.arch, want.arch, `${file}: info.arch`);
    same(cpu.info.nParams, want.nParams, `${file}: info.nParams`);
    same(sortedKeys(cpu.info.formats), sortedKeys(want.formats), `${file}: info.formats`);
    // the module web/wasm_features.mjs chose (Deno 2 has relaxed SIMD: lean-relaxed.wasm)
    const isa = relaxedSimd() ? 'relaxed' : 'simd128';
    check(cpu.info.detail.startsWith(`cpu (${isa},`), `${file}: info.detail '${cpu.info.detail}' is not ${isa}'s`);
    same(cpu.info.wasm, leanWasmName(cpu.info.threads > 1), `${file}: info.wasm`);
    same((await cpu.generate({ ids: PROMPT, maxTokens: 24 })).ids.join(' '), await lean('run', '-m', file, ...ids, '--backend', 'cpu'), `${file}: cpu greedy`);
    // the cache kept from the last call: the same prompt again reuses all but one id
    await cpu.generate({ ids: PROMPT, maxTokens: 4 });
    same(cpu.stats.nReused, PROMPT.length - 1, `${file}: ids reused by a repeated prompt`);
    await cpu.free();
    // A draw can turn on a logit's last bits, and the 8-bit kernels round differently per ISA
    // (simd128 here, AVX-512 natively): the seeded reply is held on the exact path.
    const exact = await Lean.load(bytes, { backend: 'cpu', exact: true });
    const seeded = (await exact.generate({ ids: PROMPT, maxTokens: 24, ...SAMPLING })).ids;
    same(seeded.join(' '), await lean('run', '-m', file, ...ids, '--backend', 'cpu', '--exact', ...samplingArgs), `${file}: cpu exact seeded`);
    // logitBias as [id, value] pairs and as a Map (the browsers give OpenAI's object): the
    // seeded first id pushed out, another id up; lean run --logit-bias's ids
    const bias = [[seeded[0], -100], [seeded[0] === 9 ? 10 : 9, 3.5]];
    const wantBias = await lean('run', '-m', file, ...ids, '--backend', 'cpu', '--exact', ...samplingArgs,
        '--logit-bias', `${bias[0][0]}-100`, '--logit-bias', `${bias[1][0]}+3.5`);
    check(wantBias.split(' ')[0] !== String(seeded[0]), `${file}: lean run --logit-bias ${seeded[0]}-100 keeps the first id`);
    for (const logitBias of [bias, new Map(bias)])
        same((await exact.generate({ ids: PROMPT, maxTokens: 24, ...SAMPLING, logitBias })).ids.join(' '), wantBias,
            `${file}: cpu exact seeded, logitBias ${logitBias instanceof Map ? 'a Map' : 'pairs'}`);
    await exact.free();

    const gpu = await Lean.load(bytes, { backend: 'gpu', exact: true });
    same(gpu.info.backend, 'gpu', `${file}: info.backend`);
    check(gpu.info.jspi === true && gpu.info.adapter.length > 0, `${file}: info.jspi ${gpu.info.jspi}, adapter '${gpu.info.adapter}'`);
    const wantGpu = await lean('run', '-m', file, ...ids, '--backend', 'gpu', '--exact');
    same((await gpu.generate({ ids: PROMPT, maxTokens: 24 })).ids.join(' '), wantGpu, `${file}: gpu greedy`);
    // the device lost while ids stream (lean.testLoseDevice): the call rejects saying so, the
    // next runs on a new device; lost before a call, the call runs on the new device unseen
    let n = 0;
    await rejects(gpu.generate({ ids: PROMPT, maxTokens: 64, ignoreEog: true, onToken: () => ++n === 2 && gpu.testLoseDevice() }),
        'lost during this reply', `${file}: device lost after ${n} streamed ids`);
    same((await gpu.generate({ ids: PROMPT, maxTokens: 24 })).ids.join(' '), wantGpu, `${file}: gpu greedy on a new device`);
    gpu.testLoseDevice();
    same((await gpu.generate({ ids: PROMPT, maxTokens: 24 })).ids.join(' '), wantGpu, `${file}: device lost before the call`);
    check(gpu.info.backend === 'gpu' && gpu.info.fallback.length === 2 && gpu.info.fallback.every((f) => /lost|destroyed|map failed/.test(f.reason)),
        `${file}: info.fallback names both losses: ${JSON.stringify(gpu.info.fallback)}`);
    await gpu.free();
}

// a model with a vocabulary and a chat template: random weights, smollm2's tokenizer
const dir = await Deno.makeTempDir({ prefix: 'lean-web-api-' });
const chatModel = `${dir}/chat.gguf`;
await lean('gen', '--preset', 'tiny-llama', '--type', 'q8_0', '--vocab', 'build/vocab/smollm2.gguf', '-o', chatModel);
{
    const m = await Lean.load(new Blob([await Deno.readFile(chatModel)]), { backend: 'cpu', nCtx: 512 });
    check(m.info.hasChatTemplate && m.info.tokenizer === 'gpt2', `chat model info: ${JSON.stringify(m.info)}`);
    const r = await m.generate({ prompt: 'Once upon a time', maxTokens: 12 });
    same(r.text, await lean('run', '-m', chatModel, '-p', 'Once upon a time', '-n', '12', '--temp', '0', '--backend', 'cpu'), 'prompt text');
    const ids = await m.tokenize('Hello world, 123');
    same(Array.from(ids).join(' '), await lean('tokenize', '-m', chatModel, '-p', 'Hello world, 123'), 'tokenize');
    same(await m.detokenize(ids), 'Hello world, 123', 'detokenize');

    const want = await leanChat(chatModel, ['Hi there', 'And then?'], '-n', '10', '--temp', '0', '--backend', 'cpu', '--ctx', '512');
    const replies = [];
    for (const text of ['Hi there', 'And then?']) {
        let reply = '', pieces = 0;
        for await (const piece of m.chat(text, { maxTokens: 10 })) (reply += piece), pieces++;
        replies.push(reply);
        check(pieces > 1, `chat '${text}' came in ${pieces} piece(s)`);
    }
    same(replies.join('\n'), want.join('\n'), 'two chat turns');
    check(m.stats.nReused > 0 && m.stats.stop === 'limit', `turn two: ${JSON.stringify(m.stats)}`);

    // Abort (issue 24: within one decode step, the session usable). What the page sees is exact:
    // aborted in the callback of the k-th piece or id, the k-th is the last it gets (lean.js drops
    // what the worker sent before it saw the abort). The worker itself sees the abort at its next
    // yield to its event loop (lean_worker.js's stopAsked, at most YIELD_MS after the last one),
    // so how many steps it ran past the page's abort is a matter of timing and only its cache,
    // rewound, shows it: the loose bound on its own count below is no timing claim.
    // Abort after two pieces: stops early, keeps the session; a conversation passed whole
    // (turn one again, the same greedy reply) still gives lean chat's reply
    const ac = new AbortController();
    let n = 0;
    for await (const _ of m.chat('Tell me a long story', { maxTokens: 200, signal: ac.signal })) if (++n === 2) ac.abort();
    same(n, 2, 'chat abort after the second piece: pieces handed out');
    check(m.stats.stop === 'abort' && m.stats.nGenerated < 50, `chat abort: ${JSON.stringify(m.stats)}`);
    let again = '';
    for await (const piece of m.chat([{ role: 'user', content: 'Hi there' }], { maxTokens: 10 })) again += piece;
    same(again, want[0], 'chat after an abort, the conversation passed whole');
    // generate aborted in the third id's onToken: those three ids (an unaborted run's first
    // three), no onToken call after it, and stats that say so
    const first3 = (await m.generate({ prompt: 'Once', maxTokens: 3, ignoreEog: true })).ids;
    const ac2 = new AbortController(), seen = [];
    const cut = await m.generate({ prompt: 'Once', maxTokens: 200, ignoreEog: true, signal: ac2.signal,
        onToken: (id) => seen.push(id) === 3 && ac2.abort() });
    same(seen.length, 3, 'generate abort at the third id: onToken calls');
    same(cut.ids.join(' '), first3.join(' '), 'generate abort at the third id: the ids handed out');
    check(m.stats.stop === 'abort' && m.stats.nGenerated === 3, `generate abort at the third id: ${JSON.stringify(m.stats)}`);
    same((await m.generate({ prompt: 'Once upon a time', maxTokens: 12 })).text, r.text, 'generate after an abort');
    await m.free();
}

// abort on the GPU, with JSPI and with the pump: no id or piece reaches the page after the
// abort (the worker's wait for the next block of ids is cut short, not sat out), and the cache
// and the conversation stay exact: what follows equals a fresh model's. Short: on lavapipe a
// step of this model (its 49152-id logits) takes tens of ms.
{
    const bytes = await Deno.readFile(chatModel);
    const opts = { backend: 'gpu', exact: true, nCtx: 512 };
    const fresh = await Lean.load(bytes, opts);
    const ref = await fresh.generate({ prompt: 'Once upon a time', maxTokens: 8, ignoreEog: true });
    for (const jspi of [true, false]) {
        if (!jspi && typeof leanWebGPU().settle !== 'function') continue;
        const m = await Lean.load(bytes, { ...opts, jspi });
        const what = `gpu abort (${jspi ? 'JSPI' : 'pump'})`;
        const ac = new AbortController(), seen = [];
        const cut = await m.generate({ prompt: 'Once upon a time', maxTokens: 400, ignoreEog: true, signal: ac.signal,
            onToken: (id) => seen.push(id) === 3 && ac.abort() });
        same(cut.ids.join(' '), ref.ids.slice(0, 3).join(' '), `${what}: the ids handed out`);
        same(seen.length, 3, `${what}: onToken calls`);
        check(m.stats.stop === 'abort' && m.stats.nGenerated === 3, `${what}: ${JSON.stringify(m.stats)}`);
        same((await m.generate({ prompt: 'Once upon a time', maxTokens: 8, ignoreEog: true })).ids.join(' '), ref.ids.join(' '),
            `${what}: generate after it`);
        // a sampled chat (ids read back one by one, 8 steps in flight), aborted after two pieces
        const sampling = { temperature: 0.8, topK: 40, topP: 0.95, seed: 7, maxTokens: 8 };
        const ac2 = new AbortController();
        let shown = '', n = 0;
        for await (const piece of m.chat('Tell me a long story', { ...sampling, maxTokens: 300, signal: ac2.signal })) {
            shown += piece;
            if (++n === 2) ac2.abort();
        }
        check(n === 2 && m.stats.stop === 'abort', `${what}: chat: ${n} pieces, ${JSON.stringify(m.stats)}`);
        let next = '';
        for await (const piece of m.chat('And then?', sampling)) next += piece;
        const conversation = [{ role: 'user', content: 'Tell me a long story' }, { role: 'assistant', content: shown },
            { role: 'user', content: 'And then?' }];
        let want = '';
        for await (const piece of fresh.chat(conversation, sampling)) want += piece;
        same(next, want, `${what}: the turn after the aborted one`);
        check(next.length > 0, `${what}: the turn after it said something`);
        await m.free();
    }
    await fresh.free();
}
await Deno.remove(dir, { recursive: true });

// bad input
const good = await Deno.readFile('build/fixtures/llama-q8_0.gguf');
await rejects(Lean.load(new TextEncoder().encode('not a model, only text'), { backend: 'cpu' }), 'not a GGUF file', 'text as a model');
await rejects(Lean.load(good.subarray(0, good.length - 1000), { backend: 'cpu' }), 'bytes', 'a truncated model');
await rejects(Lean.load(good, { backend: 'tpu' }), "backend 'tpu'", 'an unknown backend');
{
    const m = await Lean.load(good, { backend: 'cpu' });
    await rejects(m.generate({ ids: [1, 100000] }), 'outside the vocabulary', 'an id outside the vocabulary');
    await rejects(m.tokenize('hi'), 'no tokenizer', 'tokenize without a vocabulary');
    const want = await lean('run', '-m', 'build/fixtures/llama-q8_0.gguf', '--ids', PROMPT.join(','), '-n', '8', '--backend', 'cpu');
    same((await m.generate({ ids: PROMPT, maxTokens: 8 })).ids.join(' '), want, 'after the errors');
    await m.free();
    await rejects(m.generate({ ids: PROMPT }), 'freed', 'a freed model');

    // without JSPI
    const auto = await Lean.load(good, { backend: 'auto', jspi: false });
    check(auto.info.jspi === false, 'jspi: false in info');
    same((await auto.generate({ ids: PROMPT, maxTokens: 8 })).ids.join(' '), want, 'no JSPI, auto: ids');
    await auto.free();
    if (typeof leanWebGPU().settle === 'function') {
        const g = await Lean.load(good, { backend: 'gpu', exact: true, jspi: false });
        // no JSPI, yet the GPU answered: only the pump (LEAN_PENDING, gpu.settle) can have waited
        check(g.info.backend === 'gpu' && g.info.jspi === false, `no JSPI, gpu: info ${JSON.stringify(g.info)}`);
        same((await g.generate({ ids: PROMPT, maxTokens: 24 })).ids.join(' '),
            await lean('run', '-m', 'build/fixtures/llama-q8_0.gguf', '--ids', PROMPT.join(','), '-n', '24', '--backend', 'gpu', '--exact'), 'no JSPI, gpu: ids');
        await g.free();
    } else {
        await rejects(Lean.load(good, { backend: 'gpu', jspi: false }), 'JSPI', 'no JSPI and no pump: a forced gpu');
    }
}

// a URL: downloaded, then read from the Cache API without asking the server; a 404; the
// GPU-only load (weights streamed to the GPU, never whole in wasm memory) from a URL and a Blob
{
    const file = 'build/fixtures/qwen2-q4_k.gguf';
    const bytes = await Deno.readFile(file);
    let hits = 0;
    const server = Deno.serve({ hostname: '127.0.0.1', port: 0, onListen() {} }, (req) => {
        hits++;
        return new URL(req.url).pathname === '/m.gguf'
            ? new Response(bytes, { headers: { 'content-length': String(bytes.length) } })
            : new Response('no', { status: 404, statusText: 'Not Found' });
    });
    const base = `http://127.0.0.1:${server.addr.port}`;
    await caches.delete('lean-models-v1');
    const want = await lean('run', '-m', file, '--ids', PROMPT.join(','), '-n', '16', '--backend', 'cpu');
    for (const round of ['download', 'cache']) {
        const phases = new Set(), before = hits;
        const m = await Lean.load(`${base}/m.gguf`, { backend: 'cpu', onProgress: (p) => phases.add(p.phase) });
        check(phases.has(round) && (round === 'download') === hits > before, `URL load ${round}: phases ${[...phases]}, ${hits - before} requests`);
        same((await m.generate({ ids: PROMPT, maxTokens: 16 })).ids.join(' '), want, `URL load ${round}: ids`);
        await m.free();
    }
    await rejects(Lean.load(`${base}/none.gguf`), 'HTTP 404', 'a missing URL');
    // (Lean.cached and Lean.uncache are not checked here: Deno's main thread sees another Cache
    // storage than its workers, where a browser's page and worker share their origin's.)
    const wantGpu = await lean('run', '-m', file, '--ids', PROMPT.join(','), '-n', '16', '--backend', 'gpu', '--exact');
    const gpuOnlyRuns = [['URL', `${base}/m.gguf`, true], ['Blob', new Blob([bytes]), true], ['URL, no JSPI', `${base}/m.gguf`, false]];
    for (const [name, src, jspi] of gpuOnlyRuns) {
        const phases = new Set();
        const m = await Lean.load(src, { backend: 'gpu', exact: true, gpuOnly: true, cache: false, jspi, onProgress: (p) => phases.add(p.phase) });
        check(m.info.backend === 'gpu' && m.info.jspi === jspi && phases.has('upload'),
            `GPU-only ${name}: ${m.info.backend}, jspi ${m.info.jspi}, phases ${[...phases]}`);
        same((await m.generate({ ids: PROMPT, maxTokens: 16 })).ids.join(' '), wantGpu, `GPU-only load from a ${name}: ids`);
        await m.free();
    }
    await rejects(Lean.load(new Blob([bytes]), { backend: 'cpu', gpuOnly: true }), 'CPU rung', 'GPU-only on the CPU');
    await rejects(Lean.load(new Blob([bytes.subarray(0, bytes.length - 4096)]), { backend: 'gpu', gpuOnly: true }), 'bytes', 'GPU-only, truncated');
    await server.shutdown();
}

console.log(`web_api: ${passed} passed, ${failed} failed`);
