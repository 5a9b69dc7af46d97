#!/usr/bin/env node
// serve_bench.mjs — aggregate decode speed of a running `lean serve` (or any OpenAI-compatible
// server) against the number of concurrent streams, over HTTP on this machine. Measures only;
// docs/runs/ keeps what it printed with the command.
//
//   node scripts/serve_bench.mjs --url http://127.0.0.1:8080 [--streams 1,2,4,8,16,32] [-n 64]
//                                [--rounds 2] [--prompt TEXT]
//
// For each S: S clients at once, each making --rounds greedy completions of -n tokens (streamed,
// so the first token's time is seen); aggregate tok/s = every reply's completion tokens / the
// wall time of the S clients, with the prompts' prefill and HTTP included. The server needs
// --parallel >= the largest S (more streams than slots queue).
const args = process.argv.slice(2);
const opt = (name, def) => {
    const i = args.indexOf(name);
    return i >= 0 ? args[i + 1] : def;
};
const url = opt('--url', 'http://127.0.0.1:8080');
const streams = opt('--streams', '1,2,4,8,16,32').split(',').map(Number);
const n = Number(opt('-n', '64')), rounds = Number(opt('--rounds', '2'));
const prompt = opt('--prompt', 'Once upon a time');

async function one(k) {
    const t0 = performance.now();
    const r = await fetch(url + '/v1/completions', {
        method: 'POST', headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ prompt: `${prompt} (${k})`, max_tokens: n, temperature: 0, stream: true,
                               stream_options: { include_usage: true } }),
    });
    const text = await r.text();
    let tokens = 0;
    for (const ev of text.split('\n\n')) {
        if (!ev.startsWith('data: {')) continue;
        const j = JSON.parse(ev.slice(6));
        if (j.usage) tokens = j.usage.completion_tokens;
    }
    return { tokens, ms: performance.now() - t0 };
}

console.log('| streams | replies | tokens | wall s | aggregate tok/s | per stream tok/s | p50 reply ms |');
console.log('|---:|---:|---:|---:|---:|---:|---:|');
let base = 0;
for (const s of streams) {
    await one(-1); // warm: the server's slots and caches
    const t0 = performance.now();
    const res = (await Promise.all(Array.from({ length: s }, async (_, c) => {
        const out = [];
        for (let r = 0; r < rounds; r++) out.push(await one(c * rounds + r));
        return out;
    }))).flat();
    const wall = (performance.now() - t0) / 1e3;
    const tokens = res.reduce((a, r) => a + r.tokens, 0);
    const ms = res.map((r) => r.ms).sort((a, b) => a - b);
    const agg = tokens / wall;
    if (s === streams[0]) base = agg;
    console.log(`| ${s} | ${res.length} | ${tokens} | ${wall.toFixed(2)} | ${agg.toFixed(1)} (${(agg / base).toFixed(2)}x) | ` +
                `${(agg / s).toFixed(1)} | ${ms[Math.floor(ms.length / 2)].toFixed(0)} |`);
}
