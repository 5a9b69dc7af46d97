#!/usr/bin/env node
// rss_trace.mjs — where a browser's memory goes while lean loads a model on the CPU rung: every
// 100 ms, each browser process whose RSS rose more than 50 MiB, its rise, its peak's rise, and
// its largest mappings' resident sizes from /proc/PID/smaps (the wasm memory is one anonymous
// mapping, so what is not in it is the rest: the worker, the module, the stream's buffers).
// docs/runs/2026-12-07-browser-rss.md.
//
//   node scripts/rss_trace.mjs MODEL.gguf [chromium|firefox] [--no-jspi] [--chunked|--gzip|--cache]
//
// Needs build-web/ (make web). The model is served from its folder; loaded with cache: false,
// or with the cache on (--cache, a first load: the entry deleted before); --chunked and --gzip
// serve it without a Content-Length (serve_web.mjs's modes of those names).
import fs from 'node:fs';
import path from 'node:path';
import { launch, serve } from '../tests/browser/harness.mjs';
import { descendants, statusKb } from '../tests/browser/rss.mjs';

const args = process.argv.slice(2);
const model = args.find((a) => a.endsWith('.gguf'));
const name = args.find((a) => a === 'chromium' || a === 'firefox') ?? 'chromium';
const jspi = !args.includes('--no-jspi');
const mode = args.find((a) => a === '--chunked' || a === '--gzip'), cache = args.includes('--cache');
if (!model) { console.error('usage: node scripts/rss_trace.mjs MODEL.gguf [chromium|firefox] [--no-jspi] [--chunked|--gzip|--cache]'); process.exit(2); }

const MiB = (kb) => `${(kb / 1024).toFixed(0)}M`;
// the largest mappings by resident size: "ADDRESS RSS/SIZE NAME"
function topMappings(pid, n) {
    let text;
    try { text = fs.readFileSync(`/proc/${pid}/smaps`, 'utf8'); } catch { return []; }
    const maps = [];
    for (const line of text.split('\n')) {
        const h = /^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ \S+\s*(.*)$/.exec(line);
        if (h) maps.push({ at: h[1], kb: (parseInt(h[2], 16) - parseInt(h[1], 16)) / 1024, name: h[3] || 'anon', rss: 0 });
        const r = /^Rss:\s+(\d+)/.exec(line);
        if (r && maps.length) maps[maps.length - 1].rss = Number(r[1]);
    }
    return maps.sort((a, b) => b.rss - a.rss).slice(0, n).map((m) => `${m.at} ${MiB(m.rss)}/${MiB(m.kb)} ${m.name}`);
}

const dir = path.dirname(path.resolve(model));
const server = await serve(mode ? [] : [`/trace=${dir}`], [], [], mode ? [mode, `/trace=${dir}`] : []);
const browser = await launch(name, 600_000);
try {
    const page = await browser.newPage();
    await page.goto(`${server.url}test/page.html${jspi ? '' : '?jspi=0'}`);
    await page.waitForFunction(() => window.leanReady || window.leanError, { timeout: 60_000 });
    const root = browser.process().pid, before = new Map();
    for (const pid of descendants(root)) {
        try { fs.writeFileSync(`/proc/${pid}/clear_refs`, '5'); } catch { continue; } // VmHWM := VmRSS
        before.set(pid, statusKb(pid, 'VmRSS'));
    }
    const t0 = Date.now();
    const line = (all) => {
        const out = [];
        for (const pid of descendants(root)) {
            const rss = statusKb(pid, 'VmRSS'), hwm = statusKb(pid, 'VmHWM'), b = before.get(pid) ?? 0;
            if (rss === null || (hwm - b < 50 * 1024)) continue;
            out.push(`pid ${pid} rss +${MiB(rss - b)} peak +${MiB(hwm - b)}: ${topMappings(pid, all ? 4 : 2).join(' | ')}`);
        }
        console.log(`${((Date.now() - t0) / 1000).toFixed(1)} s ${out.join('; ')}`);
    };
    const tick = setInterval(() => line(false), 100);
    const url = `/trace/${path.basename(model)}`;
    if (cache) await page.evaluate((u) => caches.open('lean-models-v1').then((c) => c.delete(new URL(u, location.href).href)), url);
    const r = await page.evaluate((u, cache) => window.leanTest.load(u, 'cpu', 0, { cache, nCtx: 256 }), url, cache);
    clearInterval(tick);
    console.log(r.error ? `load failed: ${r.error.message}` : `loaded: ${r.info.detail}, ${r.info.wasm}, jspi ${r.info.jspi}`);
    line(true);
} finally {
    await browser.close();
    server.close();
}
