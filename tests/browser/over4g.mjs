#!/usr/bin/env node
// over4g.mjs — a model file over 4 GiB (more than wasm32 addresses) loads and generates on the
// browser's GPU rung: the weights stream to the GPU (lean_model_loader, web/lean_worker.js
// loadGpuOnly), never whole in wasm memory. A separate command, not in run.mjs: making the file,
// lean run's reference and the browser's load and generate take minutes (docs/testing.md).
//
//   node tests/browser/over4g.mjs [firefox|chromium]     (default firefox)
//
// The model: native.over4gModel, SmolLM2-1.7B's shapes in Q8_0 with 62 layers, random weights
// (`lean gen`, written where missing): 4.5 GB in all, its largest tensor (token_embd, tied to
// the output) 102 MiB, within Firefox's 128 MiB storage binding. Checks: the adapter's limits
// hold every tensor; Lean.load from its URL on backend 'gpu' (no Cache API) runs on the GPU;
// generate's greedy ids equal `lean run --backend gpu`'s (native Dawn, as run.mjs's GPU checks);
// the worker's wasm memory (lean.stats.wasmBytes) stays under an eighth of the file.
// Firefox by default: its WebGPU runs on Mesa's llvmpipe, tens of times faster than Chromium's
// SwiftShader here, whose GPU rung takes seconds a token on far smaller models (run.mjs).
import fs from 'node:fs';
import { BROWSERS, launch, serve } from './harness.mjs';
import * as native from './native.mjs';

const MODEL = 'build/browser/over4g-q8_0.gguf';  // served at /browser-models/
const PROMPT = [1, 2, 3, 4, 5, 6, 7, 8];
const N = 4;
const STEP_MS = 600_000; // a hang guard per browser call

const name = process.argv[2] ?? 'firefox';
if (!BROWSERS[name]) { console.error(`over4g.mjs: unknown browser '${name}' (chromium, firefox)`); process.exit(2); }

let passed = 0, failed = 0;
function check(ok, what, why = '') {
    if (ok) { passed++; console.log(`ok   ${what}`); }
    else { failed++; console.log(`FAIL ${what}${why ? ': ' + why : ''}`); }
    return ok;
}
const secs = (t0) => `${((performance.now() - t0) / 1000).toFixed(1)} s`;
const guard = (p, what) => Promise.race([p, new Promise((_, reject) =>
    setTimeout(() => reject(new Error(`${what}: no answer in ${STEP_MS / 1000} s`)), STEP_MS).unref())]);
const gib = (n) => `${(n / 2 ** 30).toFixed(2)} GiB`;

let server, browser;
try {
    if (!fs.existsSync('build-web/lean.js')) throw new Error('build-web/lean.js is missing: run make web');
    let t0 = performance.now();
    const made = !fs.existsSync(MODEL);
    if (made) native.over4gModel(MODEL);
    const size = fs.statSync(MODEL).size;
    check(size > 2 ** 32, `${MODEL}: ${size} bytes (${gib(size)}), past 4 GiB (${made ? `made in ${secs(t0)}` : 'made before'})`);
    t0 = performance.now();
    const want = native.runIds(MODEL, 'gpu', PROMPT, N);
    console.log(`lean run --backend gpu: [${want.join(' ')}] (${secs(t0)})`);

    server = await serve(['/browser-models=build/browser']);
    browser = await launch(name, STEP_MS + 60_000);
    const page = await browser.newPage();
    page.on('pageerror', (e) => console.error(`  [pageerror] ${e.message}`));
    await page.goto(`${server.url}test/page.html`);
    await page.waitForFunction(() => window.leanReady || window.leanError, { timeout: 60_000 });
    const error = await page.evaluate(() => window.leanError || null);
    if (error) throw new Error(error);

    const limits = await page.evaluate(async () => {
        const a = await navigator.gpu.requestAdapter();
        return { binding: a.limits.maxStorageBufferBindingSize, buffer: a.limits.maxBufferSize };
    });
    const largest = native.OVER4G_TENSOR_BYTES;
    check(largest <= Math.min(limits.binding, limits.buffer),
          `${name} (${await browser.version()}): the largest tensor's ${largest} bytes fit the adapter's ` +
          `maxStorageBufferBindingSize ${limits.binding} and maxBufferSize ${limits.buffer}`);

    const url = `/browser-models/${MODEL.split('/').pop()}`;
    t0 = performance.now();
    const r = await guard(page.evaluate((u) => window.leanTest.load(u, 'gpu', 0, { cache: false }), url), 'load');
    if (check(!r.error && r.info.backend === 'gpu', `${name}: Lean.load('${url}', {backend: gpu}) on the GPU (${secs(t0)})`,
              r.error ? r.error.message : JSON.stringify(r.info))) {
        t0 = performance.now();
        const g = await guard(page.evaluate((a) => window.leanTest.generate(a), { ids: PROMPT, maxTokens: N }), 'generate');
        check(!g.error && g.ids.length === N && g.ids.every((x, i) => x === want[i]),
              `${name}: greedy ids [${g.ids?.join(' ')}] equal lean run's (${secs(t0)})`,
              g.error ? g.error.message : `lean run [${want.join(' ')}]`);
        const w = g.stats?.wasmBytes;
        check(w > 0 && w < size / 8, `${name}: wasm memory ${w} bytes (${gib(w ?? 0)}), under an eighth of the ${gib(size)} file`);
    }
} catch (e) {
    check(false, 'over4g', e.message);
} finally {
    await browser?.close().catch(() => {});
    server?.close();
}
console.log(`over4g_${name}: ${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
