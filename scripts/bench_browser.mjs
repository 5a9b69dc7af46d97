#!/usr/bin/env node
// bench_browser.mjs — prefill and decode speed of the browser build (build-web/, `make web`) in
// a headless browser, measured as `lean bench` measures natively, to put the two side by side.
//
//   node scripts/bench_browser.mjs -m MODEL [--browser chromium|firefox] [--backend cpu|gpu|auto]
//                                  [-t THREADS] [-p 128] [-n 64] [-r 3] [--seed 42]
//
// Per repetition, through lean.js's public API (tests/browser/page.html): a cold prefill of
// P pseudo-random ids (generate with maxTokens 1: lean.stats.prefillTokensPerSecond), then
// N greedy tokens after an 8-id prompt (lean.stats.decodeTokensPerSecond), the shapes of
// `lean bench -p P -n N`. Prints info and the min and median of each, as a Markdown table.
import { launch, serve } from '../tests/browser/harness.mjs';
import path from 'node:path';

const o = { browser: 'chromium', backend: 'cpu', threads: undefined, p: 128, n: 64, r: 3, seed: 42, model: null };
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
    const a = argv[i], v = () => argv[++i];
    if (a === '-m') o.model = v();
    else if (a === '--browser') o.browser = v();
    else if (a === '--backend') o.backend = v();
    else if (a === '-t') o.threads = Number(v());
    else if (a === '-p') o.p = Number(v());
    else if (a === '-n') o.n = Number(v());
    else if (a === '-r') o.r = Number(v());
    else if (a === '--seed') o.seed = Number(v());
    else { console.error(`bench_browser: unknown argument '${a}'`); process.exit(2); }
}
if (!o.model) { console.error('usage: node scripts/bench_browser.mjs -m MODEL [--browser B] [--backend B] [-t N] [-p P] [-n N] [-r R]'); process.exit(2); }

// The ids: splitmix64 as `lean bench` draws its own (the same sequence is not needed, only
// ids spread over the vocabulary).
function ids(seed, count, nVocab) {
    let x = BigInt(seed) & 0xffffffffffffffffn;
    const out = [];
    for (let i = 0; i < count; i++) {
        x = (x + 0x9e3779b97f4a7c15n) & 0xffffffffffffffffn;
        let z = x;
        z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & 0xffffffffffffffffn;
        z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & 0xffffffffffffffffn;
        out.push(Number((z ^ (z >> 31n)) % BigInt(nVocab)));
    }
    return out;
}
const median = (a) => [...a].sort((x, y) => x - y)[Math.floor((a.length - 1) / 2)];

const server = await serve([`/bench-model=${path.dirname(path.resolve(o.model))}`]);
const browser = await launch(o.browser, 1_800_000);
try {
    const page = await browser.newPage();
    page.on('pageerror', (e) => console.error(`[pageerror] ${e.message}`));
    await page.goto(`${server.url}test/page.html`);
    await page.waitForFunction(() => window.leanReady || window.leanError);
    const call = (fn, ...args) => page.evaluate((fn, args) => window.leanTest[fn](...args), fn, args);
    const url = `/bench-model/${path.basename(o.model)}`;
    const loaded = await page.evaluate((url, backend, threads) => window.leanTest.load(url, backend, threads),
                                       url, o.backend, o.threads);
    if (loaded.error) throw new Error(`load: ${loaded.error.message}`);
    const info = loaded.info;
    console.log(`${await browser.version()}: ${info.name}, backend ${info.backend} (${info.detail}), ` +
                `threads ${info.threads}, jspi ${info.jspi}, load ${loaded.ms.toFixed(0)} ms`);
    const pp = [], tg = [];
    for (let rep = 0; rep < o.r; rep++) {
        let r = await call('generate', { ids: ids(o.seed + rep, o.p, info.nVocab), maxTokens: 1 });
        if (r.error) throw new Error(`prefill: ${r.error.message}`);
        pp.push(r.stats.prefillTokensPerSecond);
        r = await call('generate', { ids: ids(o.seed + 1000 + rep, 8, info.nVocab), maxTokens: o.n });
        if (r.error) throw new Error(`decode: ${r.error.message}`);
        tg.push(r.stats.decodeTokensPerSecond);
        console.log(`rep ${rep + 1}: pp${o.p} ${pp.at(-1).toFixed(1)} tok/s, tg${o.n} ${tg.at(-1).toFixed(1)} tok/s ` +
                    `(${r.ids.length} ids, stop ${r.stats.stop})`);
    }
    console.log(`\n| browser | backend | threads | pp${o.p} tok/s (min / median) | tg${o.n} tok/s (min / median) |`);
    console.log('|---|---|--:|--:|--:|');
    console.log(`| ${await browser.version()} | ${info.backend} | ${info.threads} | ` +
                `${Math.min(...pp).toFixed(1)} / ${median(pp).toFixed(1)} | ${Math.min(...tg).toFixed(1)} / ${median(tg).toFixed(1)} |`);
} finally {
    await browser.close();
    server.close();
}
