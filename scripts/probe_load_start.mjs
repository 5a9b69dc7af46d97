#!/usr/bin/env node
// probe_load_start.mjs — how long each stage of Lean.load's start takes in a real browser, load
// after load: a missing model on the CPU rung (the start, then a 404), the time each stage
// message reached the page. Finds starts that stick (docs/runs/2026-12-06-browser-thread-start.md).
//
//   node scripts/probe_load_start.mjs [firefox|chromium] [LOADS] [OPTIONS_JSON]
//   e.g. node scripts/probe_load_start.mjs firefox 200 '{"threadStartTimeout":0,"stallTimeout":20000}'
//
// Needs build-web/ (make web) and build/browser/ (served at /browser-models/; the model is
// missing on purpose). Prints one line per load: seconds, the load average, each stage@seconds
// (a 'worker' for every lean worker started: a restart shows a second), and how it ended.
import fs from 'node:fs';
import { launch, serve } from '../tests/browser/harness.mjs';

const [name = 'firefox', loads = '50', extra = '{}'] = process.argv.slice(2);
const server = await serve(['/browser-models=build/browser']);
const browser = await launch(name, 900_000);
try {
    const page = await browser.newPage();
    await page.goto(`${server.url}test/page.html`);
    await page.waitForFunction(() => window.leanReady || window.leanError, { timeout: 60_000 });
    // every Worker the page starts (lean.js's) reports its stage messages' arrival times
    await page.evaluate(() => {
        const W = window.Worker;
        window.stages = [];
        window.Worker = class extends W {
            constructor(url, options) {
                super(url, options);
                const t0 = performance.now(), at = () => Math.round(performance.now() - t0);
                window.stages.push(['worker', 0]);
                this.addEventListener('message', ({ data }) => {
                    if (data?.type === 'stage') window.stages.push([data.stage, at()]);
                    else if (data?.ok !== undefined) window.stages.push([data.ok ? 'ok' : 'error', at()]);
                });
            }
        };
    });
    for (let i = 0; i < Number(loads); i++) {
        const t0 = Date.now();
        const r = await page.evaluate(async (extra) => {
            window.stages = [];
            const r = await window.leanTest.load('/browser-models/missing.gguf', 'cpu', 0, extra);
            return { message: r.error?.message ?? 'loaded', stages: window.stages };
        }, JSON.parse(extra));
        const load = fs.readFileSync('/proc/loadavg', 'utf8').split(' ')[0];
        const stages = r.stages.map(([s, ms]) => `${s}@${(ms / 1000).toFixed(1)}`).join(' ');
        console.log(`${i} ${((Date.now() - t0) / 1000).toFixed(1)} s load ${load}: ${stages} | ${r.message}`);
    }
} finally {
    await browser.close();
    server.close();
}
