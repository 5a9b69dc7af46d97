// bench_web.mjs — the browser build's speed (build-web/: lean.js, its worker, lean.wasm) on one
// model, measured through the public API as a page would see it, printed as `lean bench` does so
// the two compare line by line (scripts/h200_gpu.sh web sets them side by side).
//
//   make web && deno run -A scripts/bench_web.mjs MODEL [--backend gpu|cpu|auto] [-p 128]
//       [-n 128] [-r 3] [--seed 42] [--no-jspi] [--exact] [--json]
//       [--trace]
//
// What it runs, after Lean.load(the file's bytes, { backend, jspi, exact, nCtx }):
//   warm-up  generate 2 ids after the decode prompt, untimed (the pipelines' first use)
//   pp P     generate({ ids: P ids, maxTokens: 0 }): lean.stats.prefillTokensPerSecond
//   tg N     generate({ ids: 8 ids, maxTokens: N + 1, ignoreEog: true }), greedy:
//            lean.stats.decodeTokensPerSecond (N decodes: the first id comes from the prompt's
//            logits), timed inside the worker as for any page (sampler, text pieces and the
//            worker's per-step yield included)
// R repetitions, pp and tg alternating, so neither finds its ids in the KV cache (checked:
// lean.stats.nReused must be 0). The ids are lean bench's (cli/cmd_bench.c: splitmix64 of
// --seed, stream 1 for prefill, 3 for the decode prompt), and the N + 1 greedy ids are hashed
// as there (FNV-1a 64), so the hash line equals `lean bench`'s on the same backend when the
// arithmetic is the same. Columns: min and median ms and tokens/s of the R repetitions; load is
// one Lean.load (worker start, lean.wasm's compile, the copy into wasm memory, the upload).
//
// The wait path: JSPI where the host has WebAssembly.Suspending (Deno does), else or with
// --no-jspi the pump (Lean.load's jspi: false); lean.info.jspi says which ran.
//
// The GPU: Deno's own navigator.gpu (wgpu; lavapipe on a machine without a GPU), or, with
// LEAN_DAWN_NODE=PATH (scripts/setup_dawn_node.sh; LEAN_DAWN_FLAGS: tests/dawn_node.mjs), npm's
// Dawn for Node, the Dawn Chromium ships: the worker is then started from
// scripts/bench_web_worker.mjs, which puts that Dawn behind the worker's navigator.gpu and
// imports build-web/lean_worker.js unchanged (Lean.load creates its Worker through the global
// Worker, which this script replaces for that one URL). On a machine without a GPU Dawn finds
// only OpenGL ES: LEAN_DAWN_FLAGS=backend=opengles EGL_PLATFORM=surfaceless.
// --trace: scripts/web_trace.mjs counts in the worker, per id handed out, the calls between
// JS and wasm, the navigator.gpu calls and timers, and times the maps (a line per generate on
// stderr; the worker is then always scripts/bench_web_worker.mjs).
// Exit status: 0; 1 when repetitions chose different ids or a call failed; 2 usage.
import process from 'node:process';

const usage = 'usage: deno run -A scripts/bench_web.mjs MODEL [--backend gpu|cpu|auto] [-p P] [-n N] [-r R] [--seed S] [--no-jspi] [--exact] [--json] [--trace]';
const BENCH_PROMPT = 8; // cli/cmd_bench.c's
const STREAM_PP = 1n, STREAM_PROMPT = 3n;

function parseArgs(argv) {
    const a = { backend: 'gpu', p: 128, n: 128, r: 3, seed: 42n, jspi: true, exact: false, json: false, trace: false, model: '' };
    const num = (v, name) => {
        if (!/^\d+$/.test(v ?? '')) throw new Error(`${name} wants a number, not '${v}'`);
        return Number(v);
    };
    for (let i = 0; i < argv.length; i++) {
        const o = argv[i];
        if (o === '--backend') a.backend = argv[++i];
        else if (o === '-p') a.p = num(argv[++i], o);
        else if (o === '-n') a.n = num(argv[++i], o);
        else if (o === '-r') a.r = Math.max(1, num(argv[++i], o));
        else if (o === '--seed') a.seed = BigInt(num(argv[++i], o));
        else if (o === '--no-jspi') a.jspi = false;
        else if (o === '--exact') a.exact = true;
        else if (o === '--json') a.json = true;
        else if (o === '--trace') a.trace = true;
        else if (!o.startsWith('-') && !a.model) a.model = o;
        else throw new Error(`unknown argument '${o}'`);
    }
    if (!a.model || !['gpu', 'cpu', 'auto'].includes(a.backend)) throw new Error('a model and a backend of gpu, cpu or auto');
    return a;
}

// cli/cmd_bench.c's bench_ids: n ids in [0, nVocab), splitmix64 over 64-bit words
function benchIds(seed, stream, nVocab, n) {
    const M = (1n << 64n) - 1n;
    let x = (seed ^ ((stream * 0xd1b54a32d192ed03n) & M)) & M;
    const out = [];
    for (let i = 0; i < n; i++) {
        x = (x + 0x9e3779b97f4a7c15n) & M;
        let z = x;
        z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & M;
        z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & M;
        z ^= z >> 31n;
        out.push(Number(z % BigInt(nVocab)));
    }
    return out;
}

// FNV-1a 64 over the ids' little-endian bytes, 16 hex digits (cli/cmd_bench.c's)
function fnv1a64(ids) {
    const M = (1n << 64n) - 1n;
    let h = 0xcbf29ce484222325n;
    for (const id of ids)
        for (let b = 0; b < 4; b++) h = ((h ^ BigInt((id >>> (8 * b)) & 0xff)) * 0x100000001b3n) & M;
    return h.toString(16).padStart(16, '0');
}

const median = (v) => {
    const s = [...v].sort((x, y) => x - y), k = s.length >> 1;
    return s.length % 2 ? s[k] : (s[k - 1] + s[k]) / 2;
};

// a row of lean bench's table (cli/cmd_bench.c print_table_row)
function tableRow(r) {
    const pad = (s, w) => String(s).padEnd(w), rpad = (s, w) => String(s).padStart(w);
    const tps = (ms) => (r.nTokens ? (r.nTokens / (ms / 1e3)).toFixed(2) : '');
    return `| ${pad(r.name, 28)} | ${rpad(r.size, 9)} | ${rpad(r.params, 8)} | ${pad(r.backend, 15)} | ${rpad(r.threads, 7)} | ${pad(r.test, 13)} | ${rpad(r.minMs.toFixed(2), 10)} | ${rpad(r.medianMs.toFixed(2), 10)} | ${rpad(tps(r.medianMs), 12)} | ${rpad(tps(r.minMs), 12)} |`;
}
const TABLE_HEAD = `| ${'model'.padEnd(28)} | ${'size'.padStart(9)} | ${'params'.padStart(8)} | ${'backend'.padEnd(15)} | ${'threads'.padStart(7)} | ${'test'.padEnd(13)} | ${'min ms'.padStart(10)} | ${'median ms'.padStart(10)} | ${'t/s median'.padStart(12)} | ${'t/s best'.padStart(12)} |
| ---------------------------- | --------: | -------: | --------------- | ------: | ------------- | ---------: | ---------: | -----------: | -----------: |`;

async function main() {
    let a;
    try {
        a = parseArgs(process.argv.slice(2));
    } catch (e) {
        console.error(`bench_web.mjs: ${e.message}\n${usage}`);
        return 2;
    }
    if (a.trace) process.env.LEAN_WEB_TRACE = '1';
    if (process.env.LEAN_DAWN_NODE || a.trace) {
        const shim = new URL('./bench_web_worker.mjs', import.meta.url);
        const Base = globalThis.Worker;
        globalThis.Worker = class extends Base {
            constructor(url, opts) {
                super(String(url).endsWith('/lean_worker.js') ? shim : url, opts);
            }
        };
    }
    const { Lean } = await import('../build-web/lean.js');
    const bytes = await Deno.readFile(a.model);
    const nCtx = Math.max(a.p, BENCH_PROMPT + a.n + 1); // cli/cmd_bench.c's bench_ctx_len, no suffix
    const t0 = performance.now();
    const lean = await Lean.load(bytes, { backend: a.backend, jspi: a.jspi, exact: a.exact, nCtx, cache: false });
    const loadMs = performance.now() - t0;
    const info = lean.info;
    const name = a.model.replace(/^.*\//, '').replace(/\.gguf$/, '');
    const wait = info.jspi ? 'jspi' : 'pump';
    const row = {
        name,
        size: `${(info.weightBytes / 2 ** 20).toFixed(1)} MiB`,
        params: info.nParams >= 1e9 ? `${(info.nParams / 1e9).toFixed(2)} B` : `${(info.nParams / 1e6).toFixed(2)} M`,
        // the wait path in the label: lean bench's table has no column for it
        backend: `web ${info.backend}${info.backend === 'gpu' ? ` (${wait})` : ''}${a.exact ? ' exact' : ''}`,
        threads: info.backend === 'cpu' ? info.threads : 'default',
    };
    const out = [];
    const emit = (r) => {
        out.push(r);
        if (a.json) console.log(JSON.stringify(r));
        else console.log((out.length === 1 ? TABLE_HEAD + '\n' : '') + tableRow(r));
    };
    const dawn = process.env.LEAN_DAWN_NODE;
    const host = dawn ? `dawn.node (${dawn}, flags '${process.env.LEAN_DAWN_FLAGS ?? ''}')` : "Deno's own (wgpu)";
    console.error(`bench_web: ${info.detail}; navigator.gpu: ${host}; wait: ${wait} (lean.info.jspi ${info.jspi}); load ${loadMs.toFixed(0)} ms` +
        (info.fallback.length ? `; fallback: ${JSON.stringify(info.fallback)}` : ''));
    emit({ ...row, test: 'load', wait, nTokens: 0, ms: [loadMs], minMs: loadMs, medianMs: loadMs });

    const prompt = benchIds(a.seed, STREAM_PROMPT, info.nVocab, BENCH_PROMPT);
    const ppIds = benchIds(a.seed, STREAM_PP, info.nVocab, a.p);
    await lean.generate({ ids: prompt, maxTokens: 2, ignoreEog: true }); // warm-up
    const ppMs = [], tgMs = [];
    let ids = null, sameIds = true;
    for (let r = 0; r < a.r; r++) {
        if (a.p) {
            await lean.generate({ ids: ppIds, maxTokens: 0 });
            if (lean.stats.nReused) throw new Error(`pp${a.p}: ${lean.stats.nReused} ids came from the cache`);
            ppMs.push((a.p / lean.stats.prefillTokensPerSecond) * 1e3);
        }
        if (a.n) {
            const got = await lean.generate({ ids: prompt, maxTokens: a.n + 1, ignoreEog: true });
            if (lean.stats.nReused) throw new Error(`tg${a.n}: ${lean.stats.nReused} ids came from the cache`);
            if (got.ids.length !== a.n + 1) throw new Error(`tg${a.n}: ${got.ids.length} ids, not ${a.n + 1}`);
            tgMs.push((a.n / lean.stats.decodeTokensPerSecond) * 1e3);
            if (ids && got.ids.join() !== ids.join()) sameIds = false;
            ids ??= got.ids;
        }
    }
    if (a.p) emit({ ...row, test: `pp${a.p}`, wait, nTokens: a.p, ms: ppMs, minMs: Math.min(...ppMs), medianMs: median(ppMs) });
    if (a.n) {
        emit({ ...row, test: `tg${a.n}`, wait, nTokens: a.n, ms: tgMs, minMs: Math.min(...tgMs), medianMs: median(tgMs), ids, hash: fnv1a64(ids), sameIds });
        if (!a.json) {
            console.log(`\n- ${name}, ${row.backend}, threads ${row.threads}, tg${a.n}: greedy ids fnv1a64 ${fnv1a64(ids)} (${ids.length} ids, ` +
                `${sameIds ? 'the same in every repetition' : 'DIFFERENT between repetitions'})`);
        }
    }
    await lean.free();
    return sameIds ? 0 : 1;
}

try {
    process.exitCode = await main();
} catch (e) {
    console.error(`bench_web.mjs: ${e?.message ?? e}`);
    process.exitCode = 1;
}
// after a failure the worker is still running and would keep the process alive
process.exit(process.exitCode);
