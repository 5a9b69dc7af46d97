#!/usr/bin/env node
// run.mjs — lean in real browsers: Debian's Chromium and Firefox ESR, headless, driven by
// puppeteer-core (package.json; no browser download), against the browser build (build-web/,
// `make web`) served by scripts/serve_web.mjs with cross-origin isolation.
//
//   node tests/browser/run.mjs [chromium] [firefox] [--verbose] [--only=GROUP,...]   (default: both, all)
//   GROUP: env models chat lost memory stall constrained page (--only=chat: the chat checks alone, while working on them)
//   npm run test:browser
//
// Needs build-web/ (make web), build/lean and the fixtures and vocabularies (make test-data).
// In each browser, with JSPI and then without it (page.html?jspi=0: WebAssembly.Suspending
// and .promising deleted before lean.js loads, Lean.load told { jspi: false } for its worker):
//   - for the fixture models llama-q4_k and qwen2-q8_0, on backend 'gpu' and on 'cpu':
//     Lean.load from a URL gives info.backend as asked (and info.jspi as the path taken);
//     generate's greedy ids equal `lean run --greedy`'s on the same backend, and a seeded
//     sampled reply equals `lean run --temp .. --seed 7`'s (on the CPU both exact: a draw can
//     turn on a logit's last bits; compared as lists; the FNV-1a 64
//     hash `lean bench` prints is shown). Each backend against its own native twin: on these
//     random models a near-tie can go either way between the CPU's 8-bit activations and
//     the GPU's arithmetic, while wasm and native of one backend compute the same. The first
//     model on 'gpu' loads once more with { gpuOnly: true } (the weights streamed to the GPU):
//     the same greedy ids. On the first model, generate's logitBias: { [greedy first id]: -100 }
//     (OpenAI's object) moves the first id and gives `lean run --greedy --logit-bias ID-100`'s
//     ids; a seeded sampled reply with a bias given as a Map equals `lean run --temp ..
//     --logit-bias ..`'s; a bad bias (an id that is not one, past the vocabulary, twice; a value
//     past 100) rejects naming it, before any work.
//   - chat on a small random model with SmolLM2's tokenizer and template (`lean gen`): two
//     streamed greedy turns equal `lean chat`'s replies, the second reusing the KV cache;
//     chat's logitBias: +100 on one id gives that id's text thrice, a bad bias rejects;
//     an AbortSignal ends a long reply (stop reason abort), leaving at most 2 GPU steps queued
//     unread (lean.stats.gpuStepsUnread; Chromium); after it, a new chat equals turn one.
//   - a lost device (lean.testLoseDevice): under 'auto' the call runs on the CPU, info.fallback
//     says why; under 'gpu', lost while ids stream, the call rejects and the next runs on a new
//     device (lostChecks).
//   - memory: a 505 MiB model loaded on the CPU rung raises no browser process's peak RSS
//     past lean run's peak on it plus 96 MiB (the weights sit once: rss.mjs, onceCheck);
//     too little GPU memory (a tensor past the storage binding limit, where the browser's is
//     128 MiB): 'auto' runs on the CPU saying why; 'gpu' and GPU-only loads reject naming the limit;
//     where the binding holds that (Chromium), 'auto' on native.hugeModel rejects naming the
//     limit and wasm memory. (A model over 4 GiB loading and running on the GPU rung:
//     over4g.mjs, a separate command, minutes long.)
//   - grammars and JSON schemas in generate and chat, LoRA adapters through Lean.load and
//     setLoras, against the CLI's ids (constrained.mjs): on the GPU in Chromium (a tiny
//     model), and, with JSPI only, on the CPU's exact path in both browsers.
//   - Lean.load never hangs: a stalled source ends in a TimeoutError naming the stage after
//     options.stallTimeout, or in an AbortError through options.signal; a start stuck in stage
//     'threads' (testStuckThreads) goes to a new worker, then to one thread; the page then
//     loads and runs a model (stallChecks).
// Then the chat page (web/index.html): a 404, a file not GGUF, a model too big for wasm memory
// and for the GPU (native.hugeModel, on the CPU rung, on the GPU's and under 'auto') and a download cut short
// shown as errors; a model loaded by URL, a message
// sent, a reply shown; tokens/s shown; a second turn (lean chat's reply, the KV cache reused);
// Regenerate, New chat and Stop (pageTurnChecks); its logit bias setting:
// bad values shown as errors, +100 on one id gives `lean chat --logit-bias`'s reply
// (pageBiasChecks); served without cross-origin isolation, a model dropped on it starts
// loading at once and loads, its progress bar rising to 1, on the CPU on one thread saying why, and
// replies (pageDropChecks);
// screenshots go to build/browser-artifacts/. A check a browser cannot make prints
// "NOT MEASURED ..." (the GPU memory check in Chromium), neither a pass nor a failure.
// References come from the native CLI at test time (tests/browser/native.mjs). Every check
// prints "ok ..." or "FAIL ...: why"; each browser ends with "browser_NAME: N passed, N failed"
// (tests/run.sh sums them). A browser that does not start is a failure, not a skip.
// Exit status 1 if anything failed.
import fs from 'node:fs';
import { BROWSERS, launch, serve } from './harness.mjs';
import * as native from './native.mjs';
import { constrainedChecks, constrainedReferences } from './constrained.mjs';
import { peakRise } from './rss.mjs';

const MODELS = ['llama-q4_k', 'qwen2-q8_0'];          // build/fixtures, served at /models/
const BACKENDS = ['gpu', 'cpu'];
const PROMPT = [1, 2, 3, 4, 5, 6, 7, 8];
const N = 16;                                          // tokens generated per check
// Chat replies are shorter: Chromium's SwiftShader takes seconds a token on the chat
// model's 49152-entry output layer (Firefox tens of milliseconds).
const CHAT_N = 8;
const SAMPLING = { temperature: 0.8, topK: 40, topP: 0.95, repeatPenalty: 1.1, seed: 7 };
const CHAT_MODEL = 'build/browser/chat-tiny-q8_0.gguf'; // served at /browser-models/
const CHAT = ['Hello there', 'Tell me a story'];
// The chat page's logit bias setting: +100 on id 300 makes it every id of a short greedy reply.
const PAGE_BIAS = [[300, 100]], PAGE_BIAS_N = 3;
const BIG_MODEL = 'build/browser/big-q8_0.gguf';        // served at /browser-models/; native.bigModel
const ONCE_MODEL = 'build/browser/once-q8_0.gguf';      // native.bigModel's 24 layers (onceCheck)
const HUGE_MODEL = 'build/browser/huge-f32.gguf';       // native.hugeModel: 4 GiB declared, a sparse file
// the end of the error for a model past wasm memory whose GPU load failed under 'auto'
const WASM_TOO = /at \d+ bytes the model does not fit in wasm memory \(4 GiB\) for the CPU either/;
const ARTIFACTS = 'build/browser-artifacts';
const STEP_MS = 600_000;  // a hang guard per browser call (a hung page fails, never waits forever)

const argv = process.argv.slice(2);
const verbose = argv.includes('--verbose');
const names = argv.filter((a) => !a.startsWith('--'));
const GROUPS = ['env', 'models', 'chat', 'lost', 'memory', 'stall', 'constrained', 'page'];
const only = argv.find((a) => a.startsWith('--only='))?.slice(7).split(',') ?? GROUPS;
for (const g of only) if (!GROUPS.includes(g)) { console.error(`run.mjs: unknown group '${g}' (${GROUPS.join(' ')})`); process.exit(2); }
const wanted = (g) => only.includes(g);
for (const n of names) if (!BROWSERS[n]) { console.error(`run.mjs: unknown browser '${n}' (chromium, firefox)`); process.exit(2); }
if (names.length === 0) names.push(...Object.keys(BROWSERS));

let passed = 0, failed = 0, unmeasured = 0;
function check(ok, what, why = '') {
    if (ok) { passed++; console.log(`ok   ${what}`); }
    else { failed++; console.log(`FAIL ${what}${why ? ': ' + why : ''}`); }
    return ok;
}
// A check this browser cannot make: said plainly, neither a pass nor a failure.
function notMeasured(what) {
    unmeasured++;
    console.log(`NOT MEASURED ${what}`);
}
const fmt = (ids) => ids ? `${native.fnv1a64(ids)} [${ids.join(' ')}]` : 'none';
const same = (a, b) => Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((x, i) => x === b[i]);
const guard = (p, what) => Promise.race([p, new Promise((_, reject) =>
    setTimeout(() => reject(new Error(`${what}: no answer in ${STEP_MS / 1000} s`)), STEP_MS).unref())]);

// The native references: per model and backend the greedy and seeded ids; chat replies.
function references() {
    const ref = {};
    for (const m of MODELS)
        for (const b of BACKENDS) {
            const file = `build/fixtures/${m}.gguf`, r = ref[`${m}/${b}`] = {
                greedy: native.runIds(file, b, PROMPT, N),
                sampled: native.runIds(file, b, PROMPT, N, SAMPLING, b === 'cpu'),
            };
            if (m !== MODELS[0]) continue;
            // the logit bias (modelChecks): the greedy first id banned; the seeded reply's second
            // id pushed down and another id up (both on the exact path on the CPU, as the seeded
            // reply: the browser reloads exact before them)
            r.ban = [[r.greedy[0], -100]];
            r.banned = native.runIds(file, b, PROMPT, N, null, b === 'cpu', r.ban);
            r.push = [[r.sampled[1], -7.5], [r.sampled[1] === 9 ? 10 : 9, 2.25]];
            r.pushed = native.runIds(file, b, PROMPT, N, SAMPLING, b === 'cpu', r.push);
        }
    native.chatModel(CHAT_MODEL);
    ref.big = native.runIds(native.bigModel(BIG_MODEL), 'cpu', PROMPT, 4);
    if (wanted('page') || wanted('memory')) native.hugeModel(HUGE_MODEL);
    if (wanted('memory')) {
        ref.once = native.runIds(native.bigModel(ONCE_MODEL, 0), 'cpu', PROMPT, 4);
        // the engine's own peak on that model, onceCheck' budget: cpu-generic, which keeps no
        // repacked copy of the weights (the wasm kernels keep none; x86's may)
        ref.onceRss = native.peakRss(['run', '-m', ONCE_MODEL, '--ids', PROMPT.join(','), '-n', '4', '--ctx', '256',
                                      '--backend', 'cpu-generic', '-q', '--greedy']);
    }
    for (const b of BACKENDS) ref[`chat/${b}`] = native.chatReplies(CHAT_MODEL, b, CHAT, CHAT_N);
    if (wanted('page')) // the page's logit bias setting (pageBiasChecks), on the GPU as the page's model
        for (const [k, bias] of [['plain', []], ['biased', PAGE_BIAS]])
            ref[`page/${k}`] = native.chatReplies(CHAT_MODEL, 'gpu', CHAT.slice(0, 1), PAGE_BIAS_N, null, bias)[0];
    for (const b of wanted('constrained') ? BACKENDS : [])  // the GPU's: Chromium's only (runBrowser)
        if (b === 'cpu' || names.includes('chromium')) ref[`constrained/${b}`] = constrainedReferences(CHAT_MODEL, b);
    return ref;
}

async function openTestPage(browser, url, jspi) {
    const page = await browser.newPage();
    if (verbose) page.on('console', (msg) => console.error(`  [console] ${msg.text()}`));
    page.on('pageerror', (e) => console.error(`  [pageerror] ${e.message}`));
    await page.goto(`${url}test/page.html${jspi ? '' : '?jspi=0'}`);
    await page.waitForFunction(() => window.leanReady || window.leanError, { timeout: 60_000 });
    const error = await page.evaluate(() => window.leanError || null);
    if (error) throw new Error(error);
    return page;
}
// call(page, fn, ...args): window.leanTest[fn](...args) in the page; r.secs: how long it took
// (shown in the check's line, so a slow browser is visible in the log).
async function call(page, fn, ...args) {
    const t0 = performance.now();
    const r = await guard(page.evaluate((fn, args) => window.leanTest[fn](...args), fn, args), fn);
    r.secs = `${((performance.now() - t0) / 1000).toFixed(1)} s`;
    return r;
}

async function load(page, tag, url, backend, jspi, extra = {}) {
    const r = await call(page, 'load', url, backend, 0, extra);
    const opts = JSON.stringify({ backend, ...extra }).replace(/"/g, '');
    if (!check(!r.error, `${tag}: Lean.load('${url}', ${opts}) (${r.secs})`, r.error?.message)) return false;
    const i = r.info;
    const ok = check(i.backend === backend && i.jspi === jspi, `${tag}: info.backend ${i.backend}, info.jspi ${i.jspi}`,
                     `wanted backend ${backend}, jspi ${jspi}; fallback ${JSON.stringify(i.fallback)}`);
    if (verbose) console.error(`  info ${JSON.stringify(i)}`);
    return ok;
}

async function modelChecks(page, t, m, b, ref, jspi) {
    if (!await load(page, t, `/models/${m}.gguf`, b, jspi)) return;
    if (b === 'cpu') { // the CPU rung on every core (the threaded build: the page is cross-origin
        // isolated), lean-mt-relaxed.wasm where the engine validates relaxed SIMD (wasm_features.mjs)
        const { info } = await page.evaluate(() => window.leanTest.info());
        const cores = await page.evaluate(() => navigator.hardwareConcurrency);
        check(info.threads === cores, `${t}: ${info.threads} threads, ${cores} cores`, `fallback ${JSON.stringify(info.fallback)}`);
        const relaxed = await page.evaluate(async () => (await import('/wasm_features.mjs')).relaxedSimd());
        const [wasm, isa] = relaxed ? ['lean-mt-relaxed.wasm', 'relaxed'] : ['lean-mt.wasm', 'simd128'];
        check(info.wasm === wasm && info.detail.startsWith(`cpu (${isa}, ${cores} threads)`),
              `${t}: ${info.wasm}, '${info.detail}' (relaxed SIMD ${relaxed ? 'validates' : 'does not'})`,
              `wanted ${wasm}, 'cpu (${isa}, ${cores} threads)'`);
    }
    const want = ref[`${m}/${b}`];
    let r = await call(page, 'generate', { ids: PROMPT, maxTokens: N });
    check(!r.error && same(r.ids, want.greedy), `${t}: greedy ids ${r.error ? '' : native.fnv1a64(r.ids)} (${r.secs})`,
          r.error ? r.error.message : `got ${fmt(r.ids)}, lean run ${fmt(want.greedy)}`);
    // A draw can turn on a logit's last bits, and the CPU's 8-bit kernels round differently per
    // ISA (simd128 here, AVX-512 natively): on the CPU the seeded reply is held on the exact path.
    if (b === 'cpu' && !await load(page, t, `/models/${m}.gguf`, b, jspi, { exact: true })) return;
    r = await call(page, 'generate', { ids: PROMPT, maxTokens: N, ...SAMPLING });
    check(!r.error && same(r.ids, want.sampled), `${t}: seeded sampled ids ${r.error ? '' : native.fnv1a64(r.ids)} (${r.secs})`,
          r.error ? r.error.message : `got ${fmt(r.ids)}, lean run ${fmt(want.sampled)}`);
    if (m === MODELS[0]) await biasChecks(page, t, want);
    if (b !== 'gpu' || m !== MODELS[0]) return;
    // the GPU-only load (weights streamed to the GPU through lean_model_loader; without JSPI its
    // waits go through the pump): the same ids
    // and again from a gzip body (its size unknown up front: read from its GGUF header)
    for (const url of [`/models/${m}.gguf`, `/gzip-models/${m}.gguf`]) {
        if (!await load(page, `${t} gpuOnly`, url, b, jspi, { gpuOnly: true, cache: false })) return;
        r = await call(page, 'generate', { ids: PROMPT, maxTokens: N });
        check(!r.error && same(r.ids, want.greedy), `${t} gpuOnly ${url}: greedy ids ${r.error ? '' : native.fnv1a64(r.ids)} (${r.secs})`,
              r.error ? r.error.message : `got ${fmt(r.ids)}, lean run ${fmt(want.greedy)}`);
    }
}

// generate's logitBias (on the CPU on the exact path, as the references): OpenAI's object
// banning the greedy first id, a Map on a seeded reply, each against `lean run --logit-bias`;
// bad ones reject naming what is wrong (lean.js and the worker: not an id, not a number;
// lean_sampler_create: past the vocabulary, outside [-100, 100], an id twice).
async function biasChecks(page, t, want) {
    const [[id0, v0]] = want.ban;
    let r = await call(page, 'generate', { ids: PROMPT, maxTokens: N, logitBias: { [id0]: v0 } });
    check(!r.error && r.ids[0] !== want.greedy[0] && same(r.ids, want.banned),
          `${t}: logitBias { ${id0}: -100 }: first id ${r.ids?.[0]}, not ${id0}; lean run --logit-bias's ids (${r.secs})`,
          r.error ? r.error.message : `got ${fmt(r.ids)}, lean run ${fmt(want.banned)}`);
    r = await call(page, 'generate', { ids: PROMPT, maxTokens: N, ...SAMPLING, logitBias: want.push, biasAsMap: true });
    check(!r.error && same(r.ids, want.pushed) && !same(want.pushed, want.sampled), // a bias that changes the reply
          `${t}: seeded, logitBias a Map ${JSON.stringify(want.push)}: lean run --logit-bias's ids (${r.secs})`,
          r.error ? r.error.message : `got ${fmt(r.ids)}, lean run ${fmt(want.pushed)}, unbiased ${fmt(want.sampled)}`);
    const bad = [[{ abc: 1 }, /logitBias: "abc" is not a token id/], [{ 5: 'x' }, /logitBias: id 5's bias "x" is not a number/],
                 [{ 1000000000: 1 }, /id 1000000000 is outside the vocabulary/],
                 [{ 5: 150 }, /\(id 5\): value 150 must be finite and in \[-100, 100\]/],
                 [[[5, 1], [5, -1]], /id 5 is listed twice/], [7, /logitBias: expected \{ id: bias \}/]];
    const got = [];
    for (const [logitBias, want] of bad) {
        r = await call(page, 'generate', { ids: PROMPT, maxTokens: N, logitBias });
        got.push(r.error?.message ?? `resolved: ${fmt(r.ids)}`);
        if (!r.error || !want.test(r.error.message)) break;
    }
    check(got.length === bad.length && bad.every(([, re], i) => re.test(got[i])),
          `${t}: a bad logitBias rejects: ${got.map((m) => `'${m}'`).join(', ')}`, `wanted ${bad[got.length - 1]?.[1]}`);
}

async function chatChecks(page, t, b, ref, jspi, browser) {
    const greedy = { maxTokens: CHAT_N, temperature: 0 };
    const want = ref[`chat/${b}`];
    if (!await load(page, t, `/browser-models/${CHAT_MODEL.split('/').pop()}`, b, jspi)) return;
    let r = await call(page, 'chat', CHAT[0], greedy);
    check(!r.error && r.text === want[0] && r.pieces.length > 1,
          `${t}: turn 1 streamed in ${r.pieces?.length} pieces, equal to lean chat's (${r.secs})`,
          r.error ? r.error.message : `got ${JSON.stringify(r.text)}, lean chat ${JSON.stringify(want[0])}`);
    r = await call(page, 'chat', CHAT[1], greedy);
    check(!r.error && r.text === want[1] && r.stats?.nReused > 0,
          `${t}: turn 2 equal to lean chat's, ${r.stats?.nReused} prompt tokens reused (${r.secs})`,
          r.error ? r.error.message : `got ${JSON.stringify(r.text)} (stats ${JSON.stringify(r.stats)}), lean chat ${JSON.stringify(want[1])}`);
    // Abort after 2 pieces of a reply that would run to 64 (the random model never ends it):
    // the turn must end through the abort (stats.stop 'abort', not the limit), with an
    // AbortError or a plain end. How many pieces still come after the abort depends on how
    // far a fast engine got before the message reached it: shown, not asserted.
    r = await call(page, 'chat', 'Go on', { maxTokens: 64, temperature: 0 }, 2);
    check(r.aborted && (!r.error || r.error.name === 'AbortError') && r.stats?.stop === 'abort' &&
          r.stats.nGenerated < 64,
          `${t}: abort ended the reply: ${r.stats?.nGenerated} ids, ${r.pieces.length} pieces ` +
          `(${r.afterAbort} after the abort) (${r.secs})`,
          `error ${JSON.stringify(r.error)}, stats ${JSON.stringify(r.stats)}`);
    // What the next turn waits behind: the steps the GPU ran ahead of the abort, unread (a
    // submitted step cannot be recalled). The run-ahead is GPU time, at most two blocks of
    // ~25 ms (src/gpu/forward.c, gen_pace): one step a block where a step takes over 12.5 ms,
    // as SwiftShader's do on the chat model's 49152-entry output layer (seconds: a margin of
    // 100x), so Chromium holds it to 2. A fixed 32-step run-ahead left 16 here and made the
    // new chat below wait minutes (docs/runs/2026-12-05-browser-abort.md). Firefox's steps
    // take tens of milliseconds, near the pace's edge: its count is shown, not asserted.
    const unread = r.stats?.gpuStepsUnread;
    const what = `${t}: ${unread} GPU steps run ahead of the abort, unread`;
    if (b === 'gpu' && browser !== 'chromium') console.log(`note ${what}`);
    else check(b === 'gpu' ? unread >= 0 && unread <= 2 : unread === 0, what, `stats ${JSON.stringify(r.stats)}`);
    r = await call(page, 'resetChat');
    const r2 = r.error ? r : await call(page, 'chat', CHAT[0], greedy);
    check(!r2.error && r2.text === want[0], `${t}: after the abort, a new chat equals turn 1 (${r2.secs})`,
          r2.error ? r2.error.message : `got ${JSON.stringify(r2.text)}`);
    // logitBias in a chat turn: +100 on id 300 makes it every id of a greedy reply; a value past
    // 100 rejects (lean_chat_session_set_sampling), before the turn starts
    const three = await call(page, 'detokenize', [300, 300, 300], { skipSpecial: true });
    r = await call(page, 'chat', 'Go on', { maxTokens: 3, temperature: 0, logitBias: { 300: 100 } });
    check(!r.error && !three.error && r.text === three.text,
          `${t}: chat(text, { logitBias: { 300: 100 } }): id 300 thrice, ${JSON.stringify(r.text)} (${r.secs})`,
          r.error?.message ?? three.error?.message ?? `got ${JSON.stringify(r.text)}, want ${JSON.stringify(three.text)}`);
    r = await call(page, 'chat', 'Go on', { maxTokens: 3, logitBias: { 300: 101 } });
    check(r.error && /\(id 300\): value 101 must be finite and in \[-100, 100\]/.test(r.error.message),
          `${t}: chat with a bias of 101 rejects: '${r.error?.message}'`, r.error ? r.error.message : `replied ${JSON.stringify(r.text)}`);
}

// A lost device (lean.testLoseDevice: GPUDevice.destroy() in the worker, as a GPU reset would).
// 'auto' (softwareGpu: these browsers' adapters are software ones) on the GPU: the device lost
// before a call, the call runs on the CPU instead (lean_run --backend cpu's ids), info says
// why. 'gpu': the device lost while ids stream, the call rejects saying so, and the next call
// runs on a new device (lean run's GPU ids).
async function lostChecks(page, t, ref, jspi) {
    const m = MODELS[0], url = `/models/${m}.gguf`, args = { ids: PROMPT, maxTokens: N };
    if (!await load(page, `${t} auto`, url, 'gpu', jspi, { backend: 'auto', softwareGpu: true })) return;
    let r = await call(page, 'generateLosing', args, 0);
    // the reason is lean's message for what failed first: the loss itself, or (Firefox, which
    // rejects a pending map before it says the device is lost) the read it broke
    const lost = (i, why = /destroyed|lost/) => i?.fallback?.some((f) => f.backend === 'gpu' && why.test(f.reason));
    check(!r.error && same(r.ids, ref[`${m}/cpu`].greedy) && r.info.backend === 'cpu' && lost(r.info),
          `${t} auto: device lost, the call ran on the CPU: ${r.info?.detail}, fallback ` +
          `${JSON.stringify(r.info?.fallback)} (${r.secs})`,
          r.error ? r.error.message : `ids ${fmt(r.ids)}, lean run --backend cpu ${fmt(ref[`${m}/cpu`].greedy)}`);
    if (!await load(page, `${t} gpu`, url, 'gpu', jspi)) return;
    r = await call(page, 'generateLosing', { ...args, maxTokens: 64, ignoreEog: true }, 2);
    check(r.error && /lost during this reply/.test(r.error.message) && r.streamed < 64 && lost(r.info, /destroyed|lost|map failed/),
          `${t} gpu: device lost after ${r.streamed} streamed ids: '${r.error?.message}' (${r.secs})`,
          `error ${JSON.stringify(r.error)}, info ${JSON.stringify(r.info)}`);
    r = await call(page, 'generate', args);
    check(!r.error && same(r.ids, ref[`${m}/gpu`].greedy), `${t} gpu: the next call, on a new device (${r.secs})`,
          r.error ? r.error.message : `got ${fmt(r.ids)}, lean run ${fmt(ref[`${m}/gpu`].greedy)}`);
}

// Too little memory: a model whose token_embd is more than the device's storage binding limit
// (Firefox's 128 MiB; native.bigModel). 'auto' (softwareGpu) passes over the GPU naming the
// limit and runs on the CPU (lean run's ids); 'gpu' and a GPU-only load reject, naming it.
// Chromium's limit is 1 GiB, which holds it: there 'auto' is not measured, and the output says so
// ('NOT MEASURED', counted apart from passes and failures, in the browser's last lines); 'gpu'
// is, on native.hugeModel (a 4 GiB token_embd, past any binding; too big for the CPU rung), and
// so is 'auto' there: no rung holds it, the error names the binding and wasm memory.
async function memoryChecks(page, t, ref, jspi, browser) {
    await unsizedChecks(page, t);
    const limit = await page.evaluate(async () => (await navigator.gpu.requestAdapter()).limits.maxStorageBufferBindingSize);
    const holds = limit >= native.BIG_TENSOR_BYTES;
    if (holds)
        notMeasured(`${t} auto: too little GPU memory: this browser's storage binding limit (${limit} bytes) holds the ` +
                    `big model's ${native.BIG_TENSOR_BYTES}-byte token_embd (measured in Firefox, whose limit is 128 MiB)`);
    const url = `/browser-models/${(holds ? HUGE_MODEL : BIG_MODEL).split('/').pop()}`, binding = /storage binding limit/;
    if (!holds && await load(page, `${t} auto`, url, 'cpu', jspi, { backend: 'auto', softwareGpu: true, cache: false })) {
        const r = await call(page, 'generate', { ids: PROMPT, maxTokens: 4 });
        const info = (await page.evaluate(() => window.leanTest.info())).info;
        check(!r.error && same(r.ids, ref.big) && info.fallback.some((f) => f.backend === 'gpu' && binding.test(f.reason)),
              `${t} auto: the GPU passed over (${info.fallback.map((f) => f.reason).join('; ')}), CPU ids (${r.secs})`,
              r.error ? r.error.message : `ids ${fmt(r.ids)}, lean run ${fmt(ref.big)}; fallback ${JSON.stringify(info.fallback)}`);
    }
    if (holds) { // 'auto' on the huge model: past the binding and past wasm memory, an error naming both
        const r = await call(page, 'load', url, 'auto', 0, { cache: false, softwareGpu: true });
        check(r.error && binding.test(r.error.message) && WASM_TOO.test(r.error.message),
              `${t} auto ${url}: rejected: '${r.error?.message}' (${r.secs})`, r.error ? r.error.message : `loaded: ${JSON.stringify(r.info)}`);
    }
    for (const extra of [{}, { gpuOnly: true }]) {
        const r = await call(page, 'load', url, 'gpu', 0, { cache: false, ...extra });
        check(r.error && binding.test(r.error.message), `${t} gpu ${url} ${JSON.stringify(extra)}: rejected: '${r.error?.message}' (${r.secs})`,
              r.error ? r.error.message : `loaded: ${JSON.stringify(r.info)}`);
    }
}

// The weights sit once in memory: a 505 MiB model (native.bigModel, all 24 layers) loaded on the
// CPU rung from its URL (no Cache API) raises no browser process's peak RSS (rss.mjs: the page's
// renderer or content process, which holds its worker and the wasm memory) past the native
// engine's peak on the same model (`lean run`, the file mapped, its KV cache, scratch and
// vocabulary: ref.onceRss) plus LOAD_MARGIN, what a load costs a browser besides: a worker, its
// compiled module, its thread workers and the stream's one read buffer (measured 25 to 35 MiB
// in both browsers, docs/runs/2026-12-07-browser-rss.md). A second copy of the weights (the
// bytes gathered whole and then copied, or kept after the copy) is the file again, 505 MiB. Then
// lean run's ids, so the model measured is the model that runs.
const LOAD_MARGIN = 96 * 2 ** 20;
// The same bound on the loads whose size is not known up front (the file's size read from its
// GGUF header, then one buffer: web/lean_worker.js sizeFromHeader): the body chunked without a
// Content-Length, and gzip-encoded; and on a first load with the Cache API on (the body teed
// into cache.put as the worker reads it). Then bodies of unknown size that are not a model: a
// file that is not GGUF, and a model cut short, each rejected naming why.
// A gzip body costs Chromium's renderer more outside wasm memory (a heap mapping that grew to
// ~150 MiB while it decoded; peak rises 722 to 782 MiB, Firefox's 564 to 571:
// docs/runs/2026-12-07-browser-unknown-size.md): GZIP_MARGIN on top, still well short of a
// second copy of the weights (505 MiB; the old gathering path rose 1108 to 1123 MiB).
const GZIP_MARGIN = 256 * 2 ** 20;
// A first load with the Cache API on feeds cache.put chunk copies as the worker reads (a paced
// tee, at most 8 chunks queued); Firefox's cache writer frees them late (peak rise 638 and 722
// MiB in two runs, Chromium 633-637: docs/runs/2026-12-07-browser-unknown-size.md):
// CACHE_MARGIN on top, short of a second copy (Chromium's plain resp.clone() tee: 886-898 MiB).
const CACHE_MARGIN = 160 * 2 ** 20;
const ONCE_LOADS = [['/browser-models', { cache: false }], ['/chunked', { cache: false }], ['/gzip', { cache: false }],
                    ['/browser-models', { cache: true }]];
async function onceCheck(page, t, ref, browser, [dir, extra]) {
    const name = ONCE_MODEL.split('/').pop(), size = fs.statSync(ONCE_MODEL).size;
    const pid = browser.process()?.pid;
    if (!check(pid > 0, `${t}: the browser's process is known (${pid})`)) return;
    const url = `${dir}/${name}`, tag = `${t} ${url} ${JSON.stringify(extra)}`;
    const uncache = () => page.evaluate((u) => caches.open('lean-models-v1').then((c) => c.delete(new URL(u, location.href).href)), url);
    if (extra.cache) await uncache(); // a first load: the cache fills while the worker reads
    const { bytes, pid: where, result: r } = await peakRise(pid, () => call(page, 'load', url, 'cpu', 0, { nCtx: 256, ...extra }));
    if (!check(!r.error && r.info.backend === 'cpu', `${tag}: a ${size}-byte model loads on the CPU (${r.secs})`, r.error?.message ?? JSON.stringify(r.info))) return;
    const mib = (n) => `${(n / 2 ** 20).toFixed(1)} MiB`;
    const gzip = dir === '/gzip' ? GZIP_MARGIN : 0, cached = extra.cache ? CACHE_MARGIN : 0;
    const bound = ref.onceRss + LOAD_MARGIN + gzip + cached;
    check(bytes > size && bytes < bound,
          `${tag}: the weights once in memory: a peak RSS rise of ${mib(bytes)} (pid ${where}) for a ${mib(size)} file ` +
          `(bound ${mib(bound)}: lean run's peak ${mib(ref.onceRss)} and ${mib(LOAD_MARGIN)}${gzip ? ` and gzip's ${mib(gzip)}` : ''}${cached ? ` and the cache fill's ${mib(cached)}` : ''})`,
          bytes <= size ? 'less than the file: not the process that holds the model' : 'more than the weights once');
    const g = await call(page, 'generate', { ids: PROMPT, maxTokens: 4 });
    check(!g.error && same(g.ids, ref.once), `${tag}: that model on the CPU gives lean run's ids (${g.secs})`,
          g.error ? g.error.message : `ids ${fmt(g.ids)}, lean run ${fmt(ref.once)}`);
    await call(page, 'free');
    if (extra.cache) { // the cache holds the file as it was: loaded from there, the same ids
        const c = await call(page, 'load', url, 'cpu', 0, { nCtx: 256, ...extra });
        const h = c.error ? c : await call(page, 'generate', { ids: PROMPT, maxTokens: 4 });
        check(!h.error && r.cached && c.phases.includes('cache') && same(h.ids, ref.once),
              `${tag}: cached by the first load, loaded again from the cache: lean run's ids (${c.secs})`,
              h.error ? h.error.message : `cached ${r.cached}, phases ${c.phases}, ids ${fmt(h.ids)}, lean run ${fmt(ref.once)}`);
        await call(page, 'free');
        await uncache();
    }
}

async function unsizedChecks(page, t) {
    const chat = CHAT_MODEL.split('/').pop();
    for (const [url, why] of [['/chunked-test/page.html', /bad magic .* not a GGUF file/],
                              [`/chunked-cut/${chat}`, /truncated download: \d+ of \d+ bytes \(the size its GGUF header gives\) arrived/],
                              [`/gzip-cut/${chat}`, /truncated download: \d+ of \d+ bytes \(the size its GGUF header gives\) arrived/]]) {
        const r = await call(page, 'load', url, 'cpu', 0, { cache: false });
        check(r.error && why.test(r.error.message) && r.error.message.includes(url), `${t} ${url}, its size unknown: rejected: '${r.error?.message}' (${r.secs})`,
              r.error ? r.error.message : `loaded: ${JSON.stringify(r.info)}`);
        if (!r.error) await call(page, 'free');
    }
}

// The chat page, through its own controls (the ids chat.js lists as the tests' contract):
// the demo model offered first; a missing model's 404, a picked file that is not GGUF and a
// download cut short (sized, and chunked with no Content-Length) shown in the page; the chat
// model by URL on the GPU, one greedy message sent with Enter, the reply shown, a screenshot;
// the reply equals lean chat's, as the API's does; at a phone's width the page fits, no
// sideways scrolling; then pageTurnChecks and pageBiasChecks.
async function pageCheck(browser, name, url, ref) {
    const page = await browser.newPage();
    const model = `/browser-models/${CHAT_MODEL.split('/').pop()}`;
    try {
        if (verbose) page.on('console', (msg) => console.error(`  [console] ${msg.text()}`));
        page.on('pageerror', (e) => console.error(`  [pageerror] ${e.message}`));
        await page.setViewport({ width: 900, height: 800 });
        // With no ?model the page offers the demo model, served beside it by `make web`.
        await page.goto(`${url}index.html`);
        const demo = await page.evaluate(async () => {
            const u = document.getElementById('model-url').value;
            const r = await fetch(u, { headers: { Range: 'bytes=0-3' } });
            return { u, ok: r.ok, magic: new TextDecoder().decode((await r.arrayBuffer()).slice(0, 4)) };
        });
        check(demo.u === 'demo/lean-demo.gguf' && demo.ok && demo.magic === 'GGUF',
              `${name} page: offers the demo model first (${demo.u}, served, a GGUF)`, JSON.stringify(demo));
        const ready = () => document.getElementById('app').dataset.state === 'ready' ||
                            !document.getElementById('error').hidden;
        const errorText = () => page.$eval('#error', (el) => el.hidden ? null : el.textContent.trim());
        // a model that is not there: the page says so (the HTTP status), never hangs, and loads again after
        await page.goto(`${url}index.html?model=${encodeURIComponent('/browser-models/missing.gguf')}&backend=cpu`);
        await page.waitForSelector('#load');
        await page.click('#load');
        await page.waitForFunction(ready, { timeout: STEP_MS });
        let error = await page.$eval('#error', (el) => el.hidden ? null : document.getElementById('error-text').textContent.trim());
        const state = await page.$eval('#app', (el) => el.dataset.state);
        check(/HTTP 404/.test(error ?? '') && state === 'empty', `${name} page: a missing model shows '${error}'`,
              `error ${JSON.stringify(error)}, state ${state}`);
        // a picked file that is not GGUF (the file picker's path): lean's reason shown
        const picker = await page.$('#model-file');
        await page.$eval('#error', (el) => { el.hidden = true; });
        await picker.uploadFile('package.json');
        await page.waitForFunction(ready, { timeout: STEP_MS });
        error = await page.$eval('#error', (el) => el.hidden ? null : document.getElementById('error-text').textContent.trim());
        check(/package\.json/.test(error ?? '') && /magic|GGUF/i.test(error ?? ''), `${name} page: a picked file that is not GGUF shows '${error}'`,
              JSON.stringify(error));
        // a model too big for the device: native.hugeModel's 4 GiB tensor, picked on the CPU rung,
        // which keeps the model in wasm32's memory: lean's reason shown, the page back to no model
        await page.$eval('#error', (el) => { el.hidden = true; });
        await page.select('#backend', 'cpu');
        await picker.uploadFile(HUGE_MODEL);
        await page.waitForFunction(ready, { timeout: STEP_MS });
        error = await errorText();
        const huge = await page.$eval('#app', (el) => el.dataset.state);
        check(/huge-f32\.gguf/.test(error ?? '') && /keeps the model in wasm memory, which holds 4 GiB at most/.test(error ?? '') &&
              huge === 'empty', `${name} page: a model too big for wasm memory shows '${error}'`, `error ${JSON.stringify(error)}, state ${huge}`);
        // the same on the GPU rung (streamed there, the file past wasm memory): its 4 GiB tensor is
        // past the adapter's storage binding, which lean names after the header, before the data
        await page.$eval('#error', (el) => { el.hidden = true; });
        await page.select('#backend', 'gpu');
        await picker.evaluate((el) => { el.value = ''; }); // the same file picked again fires no change
        await picker.uploadFile(HUGE_MODEL);
        await page.waitForFunction(ready, { timeout: STEP_MS });
        error = await errorText();
        const hugeGpu = await page.$eval('#app', (el) => el.dataset.state);
        check(/huge-f32\.gguf/.test(error ?? '') && /tensor 'token_embd\.weight' .* more than this device's storage binding limit/.test(error ?? '') &&
              hugeGpu === 'empty', `${name} page: a model too big for the GPU shows '${error}'`, `error ${JSON.stringify(error)}, state ${hugeGpu}`);
        // the same under 'auto' (the page's default, no softwareGpu): the GPU passed over (these
        // browsers' adapters are software ones; a hardware one: its binding limit), the CPU named
        await page.$eval('#error', (el) => { el.hidden = true; });
        await page.select('#backend', 'auto');
        await picker.evaluate((el) => { el.value = ''; });
        await picker.uploadFile(HUGE_MODEL);
        await page.waitForFunction(ready, { timeout: STEP_MS });
        error = await errorText();
        const hugeAuto = await page.$eval('#app', (el) => el.dataset.state);
        check(/huge-f32\.gguf/.test(error ?? '') && /'auto' passes over the GPU: the only adapter is a software one|storage binding limit/.test(error ?? '') &&
              WASM_TOO.test(error ?? '') && hugeAuto === 'empty', `${name} page: a model too big for both under 'auto' shows '${error}'`,
              `error ${JSON.stringify(error)}, state ${hugeAuto}`);
        // a download cut short (serve_web.mjs --cut: the whole Content-Length, half the bytes;
        // --chunked-cut: no Content-Length, the size then the GGUF header's): lean's reason
        // shown, no model
        for (const [mount, how] of [['/cut/', 'sized'], ['/chunked-cut/', 'chunked, its size unknown']]) {
            await page.goto(`${url}index.html?model=${encodeURIComponent(model.replace('/browser-models/', mount))}&backend=gpu`);
            await page.waitForSelector('#load');
            await page.click('#load');
            await page.waitForFunction(ready, { timeout: STEP_MS });
            error = await errorText();
            const cut = await page.$eval('#app', (el) => el.dataset.state);
            check(/truncated download/.test(error ?? '') && cut === 'empty', `${name} page: a download cut short (${how}) shows '${error}'`,
                  `error ${JSON.stringify(error)}, state ${cut}`);
        }
        await page.goto(`${url}index.html?model=${encodeURIComponent(model)}&backend=gpu`);
        await page.waitForSelector('#load');
        await page.click('#load');
        await page.waitForFunction(ready, { timeout: STEP_MS });
        error = await errorText();
        const backend = await page.$eval('#info-backend', (el) => el.textContent.trim());
        const module = await page.$eval('#info-wasm', (el) => el.textContent.trim());
        if (!check(!error && backend === 'gpu' && /^lean(-relaxed)?\.wasm$/.test(module),
                   `${name} page: the model loads by URL, backend ${backend}, module ${module}`,
                   error || `backend '${backend}', module '${module}'`)) return;
        await page.$eval('#settings', (el) => { el.open = true; });
        await page.$eval('#greedy', (el) => { if (!el.checked) el.click(); });
        await page.$eval('#max-tokens', (el, n) => { el.value = String(n); el.dispatchEvent(new Event('change')); }, CHAT_N);
        await page.type('#prompt', CHAT[0]);
        await page.keyboard.press('Enter'); // sent from the keyboard, as chat.js promises
        await page.waitForFunction(() => document.querySelector('#messages li[data-role=assistant][data-done]') ||
                                         !document.getElementById('error').hidden, { timeout: STEP_MS });
        error = await errorText();
        const reply = error ? '' : await page.$eval('#messages li[data-role=assistant] .reply', (el) => el.textContent);
        fs.mkdirSync(ARTIFACTS, { recursive: true });
        const shot = `${ARTIFACTS}/${name}-chat-page.png`;
        await page.screenshot({ path: shot, fullPage: true });
        check(!error && reply.length > 0, `${name} page: a reply is shown (${shot})`, error || 'an empty reply');
        check(reply === ref['chat/gpu'][0], `${name} page: the greedy reply equals lean chat's`,
              `page ${JSON.stringify(reply)}, lean chat ${JSON.stringify(ref['chat/gpu'][0])}`);
        // at a phone's width (360 CSS pixels) nothing runs off the side: no sideways scrolling
        await page.setViewport({ width: 360, height: 740 });
        const wide = await page.evaluate(() => ({ page: document.documentElement.scrollWidth, view: innerWidth }));
        const phone = `${ARTIFACTS}/${name}-chat-page-phone.png`;
        await page.screenshot({ path: phone, fullPage: true });
        check(wide.page <= wide.view, `${name} page: at 360 px wide it fits (${wide.page} px of content, ${phone})`,
              JSON.stringify(wide));
        await page.setViewport({ width: 900, height: 800 });
        await pageTurnChecks(page, name, ref);
        await pageBiasChecks(page, name, ref);
    } catch (e) {
        check(false, `${name} page`, e.message);
    } finally {
        await page.close().catch(() => {});
    }
}

// The page's buttons and the turns after the first, in the conversation pageCheck began
// (greedy, CHAT_N tokens): turn one's stats show prefill and decode tokens/s, both positive;
// a second turn sent with Enter equals lean chat's second reply, and its stats show the KV
// cache reused (at least turn one's whole prompt: only the new turn's tokens prefilled);
// Regenerate replaces that reply (two messages each still, the same greedy text again); New
// chat empties the conversation, and the next message gets lean chat's first reply again (a
// history left behind would make it a later turn); Stop, clicked once a long reply has begun,
// ends it (data-done 'stopped', fewer tokens than asked), and the page, ready again, answers
// the next message.
async function pageTurnChecks(page, name, ref) {
    const state = () => page.evaluate(() => {
        const replies = [...document.querySelectorAll('#messages li[data-role=assistant]')];
        const last = replies[replies.length - 1], stats = last?.querySelector('.stats');
        return {
            app: document.getElementById('app').dataset.state,
            error: document.getElementById('error').hidden ? null : document.getElementById('error-text').textContent.trim(),
            messages: document.querySelectorAll('#messages li').length,
            reply: last?.querySelector('.reply').textContent ?? null,
            done: last?.dataset.done ?? null,
            stats: stats ? { ...stats.dataset, text: stats.textContent } : null,
        };
    });
    // Marks the replies there are, then acts (a send or a click); ends when a reply not marked
    // has ended (or an error shows) and the page is ready again.
    const turn = async (act) => {
        await page.$$eval('#messages li', (els) => els.forEach((el) => { el.dataset.seen = ''; }));
        await act();
        await page.waitForFunction(() => document.getElementById('app').dataset.state === 'ready' &&
            (!document.getElementById('error').hidden ||
             document.querySelector('#messages li[data-role=assistant][data-done]:not([data-seen])')), { timeout: STEP_MS });
        return state();
    };
    const send = (text) => turn(async () => { await page.type('#prompt', text); await page.keyboard.press('Enter'); });
    const maxTokens = (n) => page.$eval('#max-tokens', (el, v) => { el.value = String(v); el.dispatchEvent(new Event('change')); }, n);

    const one = await state();
    const prefill = Number(one.stats?.prefillTps), decode = Number(one.stats?.decodeTps);
    check(prefill > 0 && decode > 0 && /prefill \d+(\.\d)? tok\/s · decode \d+(\.\d)? tok\/s/.test(one.stats.text),
          `${name} page: the reply shows prefill ${prefill.toFixed(1)} and decode ${decode.toFixed(1)} tokens/s`, JSON.stringify(one.stats));
    const two = await send(CHAT[1]);
    check(!two.error && two.messages === 4 && two.reply === ref['chat/gpu'][1],
          `${name} page: a second turn equals lean chat's second reply ${JSON.stringify(two.reply)}`,
          `${JSON.stringify(two)}; lean chat ${JSON.stringify(ref['chat/gpu'][1])}`);
    const nPrompt = Number(two.stats?.nPrompt), nReused = Number(two.stats?.nReused);
    check(nReused >= Number(one.stats?.nPrompt) && nReused < nPrompt,
          `${name} page: the second turn reuses the KV cache (${nReused} of ${nPrompt} prompt tokens; turn one's prompt ${one.stats?.nPrompt})`,
          `turn one ${JSON.stringify(one.stats)}, turn two ${JSON.stringify(two.stats)}`);
    await page.focus('#prompt');
    const again = await turn(() => page.click('#regenerate'));
    check(!again.error && again.messages === 4 && again.reply === two.reply,
          `${name} page: Regenerate replaces the last reply (greedy: the same text, ${again.messages} messages)`,
          `${JSON.stringify(again)}; before ${JSON.stringify(two.reply)}`);
    await page.click('#new-chat');
    await page.waitForFunction(() => document.getElementById('app').dataset.state === 'ready', { timeout: STEP_MS });
    const cleared = await state();
    const first = await send(CHAT[0]);
    check(cleared.messages === 0 && !first.error && first.messages === 2 && first.reply === ref['chat/gpu'][0],
          `${name} page: New chat empties the conversation (${cleared.messages} messages), the next reply is lean chat's first`,
          `after New chat ${JSON.stringify(cleared)}; then ${JSON.stringify(first)}; lean chat ${JSON.stringify(ref['chat/gpu'][0])}`);
    const LONG = 128;
    await maxTokens(LONG);
    const stopped = await turn(async () => {
        await page.type('#prompt', CHAT[1]);
        await page.keyboard.press('Enter');
        await page.waitForFunction(() => document.querySelector('#messages li[data-role=assistant]:not([data-seen]) .reply')?.textContent ||
                                         !document.getElementById('error').hidden, { timeout: STEP_MS });
        await page.click('#stop');
    });
    check(!stopped.error && stopped.done === 'stopped' && !(Number(stopped.stats?.nGenerated) >= LONG),
          `${name} page: Stop ends a long reply (${stopped.stats?.nGenerated ?? '?'} of ${LONG} tokens, ${JSON.stringify(stopped.reply)})`,
          JSON.stringify(stopped));
    await maxTokens(CHAT_N);
    const after = await send(CHAT[0]);
    check(!after.error && after.messages === 6 && after.reply.length > 0 && after.done && after.done !== 'stopped',
          `${name} page: after Stop the page answers the next message (${after.done}: ${JSON.stringify(after.reply)})`,
          JSON.stringify(after));
}

// The page's logit bias setting (#logit-bias, JSON { "id": bias }), in a new chat: each bad
// value (not JSON, an id past the vocabulary, a bias of 101) fails the turn with lean's reason
// shown in the page, no message left and the text back in the box; then the page, still
// usable, sends it with +100 on id 300: the reply is `lean chat --logit-bias 300+100`'s, which
// is not the unbiased one (so a setting that were ignored fails here).
async function pageBiasChecks(page, name, ref) {
    const send = async (bias) => {
        await page.$eval('#logit-bias', (el, v) => { el.value = v; }, bias);
        await page.$eval('#error', (el) => { el.hidden = true; });
        await page.focus('#prompt');
        await page.keyboard.press('Enter');
        await page.waitForFunction(() => document.getElementById('app').dataset.state === 'ready' &&
            (!document.getElementById('error').hidden || document.querySelector('#messages li[data-role=assistant][data-done]')),
            { timeout: STEP_MS });
        return page.evaluate(() => ({
            error: document.getElementById('error').hidden ? null : document.getElementById('error-text').textContent.trim(),
            messages: document.querySelectorAll('#messages li').length,
            prompt: document.getElementById('prompt').value,
            reply: document.querySelector('#messages li[data-role=assistant] .reply')?.textContent ?? null,
        }));
    };
    await page.click('#new-chat');
    await page.waitForFunction(() => document.getElementById('app').dataset.state === 'ready', { timeout: STEP_MS });
    await page.$eval('#max-tokens', (el, n) => { el.value = String(n); el.dispatchEvent(new Event('change')); }, PAGE_BIAS_N);
    await page.type('#prompt', CHAT[0]);
    const bad = [['{"300": 100', /logitBias: expected \{ id: bias \}.* got String/],
                 ['{"1000000000": 1}', /id 1000000000 is outside the vocabulary/],
                 ['{"300": 101}', /\(id 300\): value 101 must be finite and in \[-100, 100\]/]];
    for (const [bias, want] of bad) {
        const r = await send(bias);
        check(r.error && want.test(r.error) && r.messages === 0 && r.prompt === CHAT[0],
              `${name} page: logit bias ${bias} shows '${r.error}', the turn undone`, JSON.stringify(r));
    }
    const [[id, v]] = PAGE_BIAS;
    const r = await send(JSON.stringify({ [id]: v }));
    check(!r.error && r.reply === ref['page/biased'] && ref['page/biased'] !== ref['page/plain'],
          `${name} page: then logit bias { "${id}": ${v} } gives lean chat --logit-bias's reply ${JSON.stringify(r.reply)}`,
          `${JSON.stringify(r)}; lean chat --logit-bias ${JSON.stringify(ref['page/biased'])}, unbiased ${JSON.stringify(ref['page/plain'])}`);
}

// The chat page served without cross-origin isolation (serve_web.mjs --plain at /plain/: no
// SharedArrayBuffer), on the CPU asked for 2 threads: the chat model dropped on the page (a drop
// event carrying a DataTransfer with the model's bytes as a File, as a file dragged from the
// desktop) loads (the status names the file); the progress bar, from 0, rises to 1 naming the phase
// and the bytes ('load 12.3 MiB of 12.3 MiB'), and is hidden once loaded; info names the rung
// (cpu), one thread and why (info.fallback); the greedy reply equals lean chat's on the CPU.
async function pageDropChecks(browser, name, url, ref) {
    const page = await browser.newPage();
    const file = CHAT_MODEL.split('/').pop();
    try {
        if (verbose) page.on('console', (msg) => console.error(`  [console] ${msg.text()}`));
        page.on('pageerror', (e) => console.error(`  [pageerror] ${e.message}`));
        await page.goto(`${url}plain/index.html?backend=cpu&threads=2`);
        await page.waitForSelector('#load');
        const env = await page.evaluate(async (u, fileName) => {
            // every change to the progress bar, its text and its box, in order, until the test reads them
            const box = document.getElementById('progress-box'), bar = document.getElementById('progress');
            const seen = window.progressSeen = [];
            new MutationObserver(() => seen.push({ value: bar.hasAttribute('value') ? bar.value : null, hidden: box.hidden,
                                                   text: document.getElementById('progress-text').textContent }))
                .observe(box, { attributes: true, childList: true, characterData: true, subtree: true });
            const bytes = await (await fetch(u)).arrayBuffer();
            const dt = new DataTransfer();
            dt.items.add(new File([bytes], fileName));
            document.body.dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
            return { isolated: crossOriginIsolated, sab: typeof SharedArrayBuffer !== 'undefined', size: bytes.byteLength,
                     state: document.getElementById('app').dataset.state, status: document.getElementById('status').textContent };
        }, `/browser-models/${file}`, file);
        // the drop starts the load at once (chat.js's load sets the state before it awaits):
        // a drop ignored fails here, not after STEP_MS of waiting for a load that never began
        if (!check(env.state === 'loading' && env.status === `Loading ${file}…`,
                   `${name} page (not isolated): the drop starts loading ('${env.status}')`, JSON.stringify(env))) return;
        await page.waitForFunction(() => document.getElementById('app').dataset.state === 'ready' ||
                                         !document.getElementById('error').hidden, { timeout: STEP_MS });
        const got = await page.evaluate(() => ({
            state: document.getElementById('app').dataset.state, status: document.getElementById('status').textContent,
            error: document.getElementById('error').hidden ? null : document.getElementById('error-text').textContent.trim(),
            model: document.getElementById('info-model').textContent, backend: document.getElementById('info-backend').textContent,
            threads: document.getElementById('info-threads').textContent, fallback: document.getElementById('info-fallback').textContent,
            boxHidden: document.getElementById('progress-box').hidden, seen: window.progressSeen,
        }));
        if (!check(got.state === 'ready' && !got.error && got.status === `Ready: ${file} on cpu.`,
                   `${name} page (not isolated): a model dropped on the page loads ('${got.status}')`, JSON.stringify(got))) return;
        // the bar's values as the bytes came: from 0 never down to 1, each text naming the phase
        // and the bytes of the whole; the box hidden at the end
        const shown = got.seen.filter((r) => !r.hidden && r.value !== null);
        const texts = shown.map((r) => r.text).filter((t) => t);
        const bytes = texts.map((t) => /^load ([\d.]+ [KMG]iB) of ([\d.]+ [KMG]iB)$/.exec(t));
        check(shown.length >= 2 && shown[0].value === 0 && shown.at(-1).value === 1 &&
              shown.every((r, i) => i === 0 || r.value >= shown[i - 1].value) &&
              bytes.length > 0 && bytes.every((m) => m && m[2] === bytes[0][2]) && bytes.at(-1)[1] === bytes.at(-1)[2] && got.boxHidden,
              `${name} page (not isolated): the progress bar rises ${shown.map((r) => r.value.toFixed(2)).join(' ')} ` +
              `('${texts.at(-1)}'), hidden once loaded`, JSON.stringify({ seen: got.seen, boxHidden: got.boxHidden, size: env.size }));
        const why = /^cpu-threads: 2 threads: the page is not cross-origin isolated \(COOP\/COEP\): no SharedArrayBuffer$/;
        check(!env.isolated && !env.sab && got.backend === 'cpu' && got.threads === '1' && why.test(got.fallback),
              `${name} page (not isolated): backend ${got.backend}, ${got.threads} thread, fallback '${got.fallback}'`,
              JSON.stringify({ env, got: { ...got, seen: undefined } }));
        await page.$eval('#settings', (el) => { el.open = true; });
        await page.$eval('#greedy', (el) => { if (!el.checked) el.click(); });
        await page.$eval('#max-tokens', (el, n) => { el.value = String(n); el.dispatchEvent(new Event('change')); }, CHAT_N);
        await page.type('#prompt', CHAT[0]);
        await page.keyboard.press('Enter');
        await page.waitForFunction(() => document.querySelector('#messages li[data-role=assistant][data-done]') ||
                                         !document.getElementById('error').hidden, { timeout: STEP_MS });
        const r = await page.evaluate(() => ({
            error: document.getElementById('error').hidden ? null : document.getElementById('error-text').textContent.trim(),
            reply: document.querySelector('#messages li[data-role=assistant] .reply')?.textContent ?? null,
        }));
        check(!r.error && r.reply === ref['chat/cpu'][0], `${name} page (not isolated): the reply equals lean chat's on the CPU ${JSON.stringify(r.reply)}`,
              `${JSON.stringify(r)}; lean chat ${JSON.stringify(ref['chat/cpu'][0])}`);
    } catch (e) {
        check(false, `${name} page (not isolated)`, e.message);
    } finally {
        await page.close().catch(() => {});
    }
}

// Lean.load never hangs (lean.js, loadGuard): a source that stops sending after 64 KiB ends
// the load with a TimeoutError once options.stallTimeout passes without progress, naming the
// stage and the bytes that came; one with no stall timeout ends with an AbortError when its
// signal aborts. A start made to stick twice in stage 'threads' (testStuckThreads; Firefox's
// Worker constructor did under load) ends on one thread after two restarts of lean's worker,
// info.fallback naming each, with lean run's ids. Then the same page loads a model and runs
// it (lean run's greedy ids), and loads it again from the Cache API (phase 'cache', no 'download').
async function stallChecks(page, t, ref, jspi) {
    // 6 s: the worker's start (stage 'wasm', compiling the module) must end first, under CI's load too
    let r = await call(page, 'loadStalled', 6000, 0);
    const at = /downloading the model \(stage 'download', 65536 of 1048576 bytes\)/;
    check(r.error?.name === 'TimeoutError' && /no progress in 6 s/.test(r.error.message) && at.test(r.error.message),
          `${t}: a stalled stream: '${r.error?.message}' (${r.secs})`, JSON.stringify(r.error ?? r.info));
    r = await call(page, 'loadStalled', 0, 6000);
    check(r.error?.name === 'AbortError' && /^Lean.load aborted while/.test(r.error.message) && at.test(r.error.message),
          `${t}: options.signal aborted: '${r.error?.message}' (${r.secs})`, JSON.stringify(r.error ?? r.info));
    // a start stuck in stage 'threads' (testStuckThreads: the worker's start never ends there, as
    // Firefox's Worker constructor did under load): after threadStartTimeout a new worker, after
    // the second stuck start one on one thread; info.fallback says so; lean run's ids
    const m = MODELS[0];
    r = await call(page, 'load', `/models/${m}.gguf`, 'cpu', 2, { testStuckThreads: 2, threadStartTimeout: 3000 });
    const restarts = r.info?.fallback?.filter((f) => f.backend === 'cpu-threads') ?? [];
    if (check(!r.error && r.info.threads === 1 && restarts.length === 2 &&
              restarts.every((f, i) => f.reason === `the CPU threads did not start in 3 s: lean's worker was restarted${i ? ' on one thread' : ''}`),
              `${t}: a thread start stuck twice: ${JSON.stringify(restarts.map((f) => f.reason))}, ${r.info?.threads} thread (${r.secs})`,
              r.error?.message ?? JSON.stringify(r.info))) {
        r = await call(page, 'generate', { ids: PROMPT, maxTokens: N });
        check(!r.error && same(r.ids, ref[`${m}/cpu`].greedy), `${t}: then lean run's greedy ids (${r.secs})`,
              r.error ? r.error.message : `got ${fmt(r.ids)}, lean run ${fmt(ref[`${m}/cpu`].greedy)}`);
    }
    if (!await load(page, `${t} then`, `/models/${m}.gguf`, 'cpu', jspi)) return;
    r = await call(page, 'generate', { ids: PROMPT, maxTokens: N });
    check(!r.error && same(r.ids, ref[`${m}/cpu`].greedy), `${t}: then a load and generate on the same page (${r.secs})`,
          r.error ? r.error.message : `got ${fmt(r.ids)}, lean run ${fmt(ref[`${m}/cpu`].greedy)}`);
    // the load above filled the Cache API (or an earlier group's did): the next reads it, not the network
    r = await call(page, 'load', `/models/${m}.gguf`, 'cpu', 0);
    check(!r.error && r.cached && r.phases.includes('cache') && !r.phases.includes('download'),
          `${t}: a second load reads the Cache API: phases ${r.phases?.join(' ')} (${r.secs})`,
          r.error ? r.error.message : `cached ${r.cached}, phases ${r.phases}`);
}

// What the page runs on: an adapter, cross-origin isolation, JSPI present or deleted.
async function envChecks(page, tag, jspi) {
    const env = await page.evaluate(async () => {
        const a = await navigator.gpu?.requestAdapter();
        const f = a ? [...a.features] : [];
        return { adapter: a ? `${a.info?.vendor || '?'} ${a.info?.architecture || '?'}` : null,
                 f16: f.includes('shader-f16'), subgroups: f.includes('subgroups'),
                 features: f.sort().join(' '), isolated: crossOriginIsolated,
                 suspending: typeof WebAssembly.Suspending !== 'undefined' };
    });
    check(env.adapter !== null, `${tag}: navigator.gpu adapter ${env.adapter}, shader-f16 ${env.f16}, ` +
          `subgroups ${env.subgroups}`, 'navigator.gpu gave no adapter');
    if (verbose) console.error(`  features ${env.features}`);
    check(env.isolated && env.suspending === jspi, `${tag}: crossOriginIsolated, ` +
          `WebAssembly.Suspending ${env.suspending ? 'present' : 'deleted'}`,
          `crossOriginIsolated ${env.isolated}, Suspending present ${env.suspending}`);
}

async function runBrowser(name, url, ref) {
    const p0 = passed, f0 = failed, u0 = unmeasured;
    let browser;
    try {
        browser = await launch(name, STEP_MS + 60_000);
        check(true, `${name}: ${await browser.version()} started`);
    } catch (e) {
        check(false, `${name}: ${BROWSERS[name].executablePath} does not start`, e.message);
    }
    if (browser) {
        for (const jspi of [true, false]) {
            const tag = `${name} ${jspi ? 'jspi' : 'no-jspi'}`;
            // Each group on a fresh page: a page that hung (a FAIL) takes no other check with it.
            const groups = [];
            if (wanted('env')) groups.push(async (page) => envChecks(page, tag, jspi));
            // Chromium's GPU rung: the first model's group only, and the chat with JSPI only
            // (SwiftShader's minutes); Firefox runs every model and the chat on its GPU both ways
            const slowPump = (b, m) => name === 'chromium' && b === 'gpu' && (m === 'chat' ? !jspi : m !== MODELS[0]);
            for (const m of wanted('models') ? MODELS : [])
                for (const b of BACKENDS)
                    if (!slowPump(b, m)) groups.push(async (page) => modelChecks(page, `${tag} ${m} ${b}`, m, b, ref, jspi));
            for (const b of wanted('chat') ? BACKENDS : [])
                if (!slowPump(b, 'chat')) groups.push(async (page) => chatChecks(page, `${tag} chat ${b}`, b, ref, jspi, name));
            if (wanted('lost')) groups.push(async (page) => lostChecks(page, `${tag} lost device`, ref, jspi));
            if (wanted('memory')) {
                // each load measured on its own fresh page: a page's wasm memory, once grown, stays
                for (const l of ONCE_LOADS) groups.push(async (page) => onceCheck(page, `${tag} memory`, ref, browser, l));
                groups.push(async (page) => memoryChecks(page, `${tag} memory`, ref, jspi, browser));
            }
            if (wanted('stall')) groups.push(async (page) => stallChecks(page, `${tag} stalled load`, ref, jspi));
            // the GPU rung in Chromium, with JSPI and without (SwiftShader: a load alone takes
            // tens of seconds under CI's load, so one browser's GPU; Firefox's runs the models
            // and chat groups); the CPU rung in both, with JSPI only (its grammars and adapters
            // never wait on a GPU: JSPI's absence changes nothing there)
            for (const b of wanted('constrained') ? BACKENDS : [])
                if (b === 'gpu' ? name === 'chromium' : jspi)
                    groups.push(async (page) => constrainedChecks(page, `${tag} constrained ${b}`, ref[`constrained/${b}`], b, jspi,
                                                                  { call, load, check, same, fmt }));
            for (const group of groups) {
                let page;
                try {
                    page = await openTestPage(browser, url, jspi);
                    await group(page);
                } catch (e) {
                    check(false, `${tag}: the test page`, e.message);
                } finally {
                    await page?.close().catch(() => {});
                }
            }
        }
        if (wanted('page')) {
            await pageCheck(browser, name, url, ref);
            await pageDropChecks(browser, name, url, ref);
        }
        await browser.close().catch(() => {});
    }
    if (unmeasured > u0) console.log(`browser_${name}: ${unmeasured - u0} checks NOT MEASURED in this browser (above)`);
    console.log(`browser_${name}: ${passed - p0} passed, ${failed - f0} failed`);
}

let server;
try {
    if (!fs.existsSync('build-web/lean.js')) throw new Error('build-web/lean.js is missing: run make web');
    const ref = references();
    server = await serve(['/models=build/fixtures', '/browser-models=build/browser', '/lora=build/lora'],
                         ['/cut=build/browser'], ['/plain=build-web'],
                         ['--chunked', '/chunked=build/browser', '--gzip', '/gzip=build/browser', '--gzip', '/gzip-models=build/fixtures',
                          '--chunked', '/chunked-test=tests/browser', '--chunked-cut', '/chunked-cut=build/browser',
                          '--gzip-cut', '/gzip-cut=build/browser']);
    console.log(`serving build-web at ${server.url}`);
    for (const name of names) await runBrowser(name, server.url, ref);
} catch (e) {
    check(false, 'setup', e.message);
    console.log(`browser: ${passed} passed, ${failed} failed`);
} finally {
    server?.close();
}
process.exit(failed ? 1 : 0);
