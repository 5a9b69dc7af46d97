// bench_llamacpp.mjs — llama.cpp's side of `lean bench`: the same phases, the same ids,
// through node-llama-cpp's prebuilt llama.cpp (CPU build), for side-by-side tables.
//
// No llama.cpp checkout or llama-bench binary is available here; the npm package
// node-llama-cpp ships llama.cpp as libllama.so + libggml-cpu-<isa>.so (the best variant for
// the CPU is chosen at start-up, as llama.cpp's own builds do) behind a Node addon. This
// script drives it through its public API:
//   load     getLlama() once, then llama.loadModel (mmap) + model.createContext, R times
//   pp P     sequence.evaluateWithoutGeneratingNewTokens(P ids) into an empty sequence
//            (batchSize >= P: one llama_decode of the whole prompt, as llama-bench's pp)
//   pp N @ dD  the same for N ids after a resident prefix of D (the N erased between reps)
//   tg N     the 8-token prompt, then N single-token decodes, each fed the greedy id
//            (temperature 0: llama.cpp's greedy sampler, the first of equal maxima), the
//            N + 1 ids hashed with FNV-1a 64 as `lean bench` hashes them
// The ids are `lean bench`'s (splitmix64 of --seed, streams 1/2/3: see cli/cmd_bench.c), so
// both engines see the same input on the same file. Differences from llama-bench: each
// decode goes through a JS promise (tens of microseconds a token; measured, see
// docs/runs/2026-12-02-cpu-bench-first.md), and tg here samples the argmax on the CPU after
// each token (llama-bench feeds random ids without sampling).
//
// Install (pinned; its own prefix, since scripts/make_vocabs.sh's `npm install --prefix
// build/npm` removes packages it was not given):
//   npm install --no-save --no-audit --no-fund --ignore-scripts --omit=optional \
//       --prefix build/npm-llamacpp node-llama-cpp@3.22.1 @node-llama-cpp/linux-x64@3.22.1
// (--omit=optional keeps the CUDA and Vulkan builds out; --ignore-scripts skips the
// postinstall, which would try to download or build llama.cpp.)
//
// Usage: node scripts/bench_llamacpp.mjs -m FILE [-m FILE ...] [-p LIST] [-n LIST]
//            [--suffix LIST] [-r R] [-t LIST] [--seed S] [--batch N] [--json]
// Defaults as `lean bench`: -p 128 -n 64 --suffix 128+32 -r 3 --seed 42; -t default 2.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const NPM_DIR = process.env.LEAN_LLAMACPP_NPM || path.join(here, "..", "build", "npm-llamacpp");
const PROMPT = 8; // cmd_bench.c's BENCH_PROMPT

const usage = `usage: node scripts/bench_llamacpp.mjs -m FILE [-m FILE ...] [-p LIST] [-n LIST]
           [--suffix LIST] [-r R] [-t LIST] [--seed S] [--batch N] [--json]
llama.cpp (node-llama-cpp ${"3.22.1"}'s prebuilt CPU build) timed on lean bench's phases and ids.
`;

function die(msg) {
    process.stderr.write(`bench_llamacpp: ${msg}\n\n${usage}`);
    process.exit(2);
}

function parseList(v, what, min) {
    const out = v.split(",").map((s) => {
        if (!/^\d+$/.test(s) || Number(s) < min) die(`${what} expects whole numbers >= ${min}, got '${v}'`);
        return Number(s);
    });
    return out;
}

function parseArgs(argv) {
    const a = { models: [], pp: [128], tg: [64], suffix: [[128, 32]], reps: 3, threads: [2], seed: 42n, batch: 0, json: false };
    for (let i = 0; i < argv.length; i++) {
        const o = argv[i];
        if (o === "-h" || o === "--help") {
            process.stdout.write(usage);
            process.exit(0);
        }
        if (o === "--json") { a.json = true; continue; }
        if (i + 1 >= argv.length) die(`'${o}' needs a value (or is unknown)`);
        const v = argv[++i];
        if (o === "-m") a.models.push(v);
        else if (o === "-p") a.pp = parseList(v, "-p", 0).filter((x) => x > 0);
        else if (o === "-n") a.tg = parseList(v, "-n", 0).filter((x) => x > 0);
        else if (o === "-t") a.threads = parseList(v, "-t", 1);
        else if (o === "-r") a.reps = parseList(v, "-r", 1)[0];
        else if (o === "--batch") a.batch = parseList(v, "--batch", 1)[0];
        else if (o === "--seed") {
            if (!/^\d+$/.test(v)) die(`--seed expects a whole number, got '${v}'`);
            a.seed = BigInt(v);
        } else if (o === "--suffix") {
            if (v === "none" || v === "0") a.suffix = [];
            else a.suffix = v.split(",").map((s) => {
                const m = /^(\d+)\+(\d+)$/.exec(s);
                if (!m || Number(m[2]) < 1) die(`--suffix expects D+N, comma-separated, or 'none', got '${v}'`);
                return [Number(m[1]), Number(m[2])];
            });
        } else die(`unknown option '${o}'`);
    }
    if (!a.models.length) die("-m FILE is required");
    return a;
}

// ---- lean bench's ids and hash (cli/cmd_bench.c: bench_ids, fnv1a64_ids) ----
const M64 = (1n << 64n) - 1n;
function benchIds(seed, stream, nVocab, n) {
    let x = (seed ^ ((BigInt(stream) * 0xD1B54A32D192ED03n) & M64)) & M64;
    const out = new Array(n);
    for (let i = 0; i < n; i++) {
        x = (x + 0x9E3779B97F4A7C15n) & M64;
        let z = x;
        z = ((z ^ (z >> 30n)) * 0xBF58476D1CE4E5B9n) & M64;
        z = ((z ^ (z >> 27n)) * 0x94D049BB133111EBn) & M64;
        z = z ^ (z >> 31n);
        out[i] = Number(z % BigInt(nVocab));
    }
    return out;
}
function fnv1a64(ids) {
    let h = 0xCBF29CE484222325n;
    for (const id of ids)
        for (let b = 0; b < 4; b++) {
            h ^= BigInt((id >>> (8 * b)) & 0xff);
            h = (h * 0x100000001B3n) & M64;
        }
    return h.toString(16).padStart(16, "0");
}

// ---- statistics and output ----
const now = () => performance.now();
function stat(ms) {
    const s = [...ms].sort((x, y) => x - y), n = s.length;
    return { min: s[0], median: n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2 };
}
const tps = (n, ms) => (n / (ms / 1e3));

let headerDone = false;
function emit(a, row) {
    if (a.json) {
        process.stdout.write(JSON.stringify(row) + "\n");
        return;
    }
    if (!headerDone) {
        headerDone = true;
        console.log("| model                        | engine          | threads | test          |     min ms |  median ms |   t/s median |     t/s best |");
        console.log("| ---------------------------- | --------------- | ------: | ------------- | ---------: | ---------: | -----------: | -----------: |");
    }
    const f = (x) => x.toFixed(2).padStart(10);
    const t = (x) => (row.n_tokens ? tps(row.n_tokens, x).toFixed(2) : "").padStart(12);
    console.log(`| ${row.model_name.padEnd(28)} | ${row.engine.padEnd(15)} | ${String(row.threads).padStart(7)} | ${row.test.padEnd(13)} | ${f(row.min_ms)} | ${f(row.median_ms)} | ${t(row.median_ms)} | ${t(row.min_ms)} |`);
}

// ---- the measurements ----
async function benchOne(a, llama, engine, file, threads, notes) {
    const name = path.basename(file).replace(/\.gguf$/, "");
    let nCtx = PROMPT + 1;
    for (const p of a.pp) nCtx = Math.max(nCtx, p);
    for (const [d, n] of a.suffix) nCtx = Math.max(nCtx, d + n);
    for (const n of a.tg) nCtx = Math.max(nCtx, PROMPT + n);
    const batch = a.batch || Math.max(512, ...a.pp, ...a.suffix.map((s) => s[1]));
    const base = { model: file, model_name: name, engine, threads };

    let model = null, ctx = null;
    const ms = [];
    for (let r = 0; r < a.reps; r++) {
        if (ctx) await ctx.dispose();
        if (model) await model.dispose();
        const t0 = now();
        model = await llama.loadModel({ modelPath: file, gpuLayers: 0, useMmap: true });
        ctx = await model.createContext({ contextSize: nCtx, batchSize: batch, threads: { ideal: threads, min: threads },
                                          sequences: 1, flashAttention: false });
        ms.push(now() - t0);
    }
    let s = stat(ms);
    emit(a, { ...base, phase: "load", test: "load", n_tokens: 0, ms, min_ms: s.min, median_ms: s.median });

    const nVocab = model.fileInfo.metadata?.tokenizer?.ggml?.tokens?.length;
    if (!Number.isInteger(nVocab) || nVocab <= 0) throw new Error(`cannot read the vocabulary size of ${file}`);
    const seq = ctx.getSequence();
    const prompt = benchIds(a.seed, 3, nVocab, PROMPT);
    // warm-up, untimed
    await seq.evaluateWithoutGeneratingNewTokens(prompt);
    await seq.clearHistory();

    for (const p of a.pp) {
        const ids = benchIds(a.seed, 1, nVocab, p), ms = [];
        for (let r = 0; r < a.reps; r++) {
            await seq.clearHistory();
            const t0 = now();
            await seq.evaluateWithoutGeneratingNewTokens(ids);
            ms.push(now() - t0);
        }
        s = stat(ms);
        emit(a, { ...base, phase: "prefill", test: `pp${p}`, n_tokens: p, depth: 0, ms, min_ms: s.min, median_ms: s.median });
    }
    for (const [d, n] of a.suffix) {
        const ids = benchIds(a.seed, 2, nVocab, d + n), ms = [];
        await seq.clearHistory();
        if (d) await seq.evaluateWithoutGeneratingNewTokens(ids.slice(0, d));
        for (let r = 0; r < a.reps; r++) {
            if (seq.nextTokenIndex > d) await seq.eraseContextTokenRanges([{ start: d, end: seq.nextTokenIndex }]);
            const t0 = now();
            await seq.evaluateWithoutGeneratingNewTokens(ids.slice(d));
            ms.push(now() - t0);
        }
        s = stat(ms);
        emit(a, { ...base, phase: "suffix", test: `pp${n} @ d${d}`, n_tokens: n, depth: d, ms, min_ms: s.min, median_ms: s.median });
    }
    for (const n of a.tg) {
        const ms = [];
        let first = null, same = true;
        for (let r = 0; r < a.reps; r++) {
            await seq.clearHistory();
            // the prompt; the greedy id after its last token is g0
            const res = await seq.controlledEvaluate([...prompt.slice(0, -1), [prompt[PROMPT - 1], { generateNext: { token: true } }]]);
            const gen = [res[PROMPT - 1].next.token];
            const t0 = now();
            const it = seq.evaluate([gen[0]], { temperature: 0 });
            for (let k = 0; k < n; k++) {
                const { value, done } = await it.next();
                if (done) throw new Error(`generation stopped after ${k} of ${n} tokens`);
                gen.push(value);
                if (k + 1 < n) continue;
            }
            ms.push(now() - t0);
            await it.return();
            if (!first) first = gen;
            else if (first.join() !== gen.join()) same = false;
        }
        s = stat(ms);
        const hash = fnv1a64(first);
        emit(a, { ...base, phase: "decode", test: `tg${n}`, n_tokens: n, depth: PROMPT, ms, min_ms: s.min, median_ms: s.median,
                  prompt, ids: first, hash, same_ids_every_rep: same });
        notes.push(`- ${name}, ${engine}, threads ${threads}, tg${n}: greedy ids fnv1a64 ${hash} (${first.length} ids${same ? "" : ", DIFFERENT between repetitions"})`);
    }
    await ctx.dispose();
    await model.dispose();
}

async function main() {
    const a = parseArgs(process.argv.slice(2));
    const require = createRequire(path.join(NPM_DIR, "package.json"));
    let nlc;
    try {
        nlc = await import(require.resolve("node-llama-cpp"));
    } catch (e) {
        process.stderr.write(`bench_llamacpp: node-llama-cpp is not installed under ${NPM_DIR} (see this script's header)\n${e.message}\n`);
        process.exit(1);
    }
    const llama = await nlc.getLlama({ gpu: false, build: "never", maxThreads: 0, logLevel: "error", progressLogs: false });
    const pkg = JSON.parse(readFileSync(path.join(NPM_DIR, "node_modules", "node-llama-cpp", "package.json"), "utf8"));
    const engine = `llama.cpp ${llama.llamaCppRelease?.release ?? "?"}`;
    if (!a.json) process.stderr.write(`node-llama-cpp ${pkg.version}, llama.cpp release ${llama.llamaCppRelease?.release ?? "?"}, ` +
                                      `build ${llama.buildType}, cpu ${llama.cpuMathCores ?? "?"} math cores\n`);
    const notes = [];
    for (const file of a.models)
        for (const t of a.threads) await benchOne(a, llama, engine, file, t, notes);
    if (!a.json && notes.length) console.log("\n" + notes.join("\n"));
    await llama.dispose();
}

main().catch((e) => {
    process.stderr.write(`bench_llamacpp: ${e.stack || e}\n`);
    process.exit(1);
});
