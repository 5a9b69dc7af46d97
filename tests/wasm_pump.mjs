// wasm_pump.mjs — the wasm32 build's GPU path without JSPI (the pump: include/lean.h,
// LEAN_PENDING) held to the same build with JSPI, under Deno (navigator.gpu: wgpu, over Mesa's
// lavapipe here). build-wasm/wasm_pump_host.wasm is the browser build's lean.wasm exports
// (web/lean_web.c) with a few test hooks (tests/wasm_pump_host.c); this script makes the calls
// web/lean_worker.js makes, as it makes them:
//   JSPI:  through WebAssembly.promising, a GPU wait suspending the wasm stack;
//   pump:  WebAssembly.Suspending deleted before the module is loaded, so no wait can block:
//          while ((st = call(...)) === LEAN_PENDING) await gpu.settle();
// Both runs do the same work on a fresh module and GPU device, models loaded from wasm memory
// as the worker loads them: a prompt prefilled in chunks with its logits and one id more; a
// greedy and a seeded generation on the GPU (the resident sampler, steps in flight, one stopped
// early so its maps are dropped); a greedy and a seeded two-turn chat (and, in the pump run, a
// chat reset while a step is pending, then the turn again, which must reply as the first did;
// a seeded generation under a grammar: the resident draw one step at a time under its mask);
// and a context whose kernel the device rejects (a shader broken on its way to WebGPU), which
// must fail lean_ctx_create with the pipeline's name; and the GPU-only load through
// lean_model_loader (whose push opens the device and whose end waits for the uploads' checks),
// its logits the memory-loaded model's. Every id, every logit's bits and
// every reply must be the same in both; the pump run must have returned LEAN_PENDING (else it
// tested nothing) and the JSPI run never.
//
//   deno run -A tests/wasm_pump.mjs [build-wasm/wasm_pump_host.wasm]
// Prints "wasm_pump: N passed, N failed" (tests/run.sh counts it); exit status 1 on a failure.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import process from 'node:process';
import { fileURLToPath } from 'node:url';
import { leanWebGPU } from '../web/webgpu_imports.mjs';

const { WASI } = await import('node:wasi');
const encoder = new TextEncoder();
const LEAN_OK = 0, LEAN_PENDING = 9;
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const file = process.argv[2] ?? path.join(root, 'build-wasm/wasm_pump_host.wasm');
const module = await WebAssembly.compile(readFileSync(file));
const FIXTURE = 'build/fixtures/qwen2-q8_0.gguf';
const BROKEN = 'rmsnorm'; // the kernel whose shader is broken in the last part
// The run-ahead, fixed (src/gpu/forward.c, gen_pace: otherwise it follows the measured step
// time, and the steps dropped at a stop, hence the work compared below, would too): greedy
// blocks of 16 ids, 8 sampled steps in flight.
const PACE = 16;

let passed = 0, failed = 0;
const check = (ok, what) => {
    if (ok) passed++;
    else failed++, console.log(`FAIL: ${what}`);
};

// fnv-1a 64 over bytes, as hex: a logits row's bits in one word
const fnv = (bytes) => {
    let h = 0xcbf29ce484222325n;
    for (const b of bytes) h = BigInt.asUintN(64, (h ^ BigInt(b)) * 0x100000001b3n);
    return h.toString(16);
};

// While on, every device made gets its `label` kernel's shader broken (a syntax error).
let breakKernel = null;
// The work every device was given: queue writes and dispatches (the empty command buffers
// webgpu_imports.mjs submits while a map waits have none), so a run that did work twice shows.
const work = { writes: 0, dispatches: 0 };
const gpu0 = navigator.gpu;
const requestAdapter = gpu0.requestAdapter.bind(gpu0);
gpu0.requestAdapter = async (o) => {
    const a = await requestAdapter(o);
    if (!a) return a;
    const requestDevice = a.requestDevice.bind(a);
    a.requestDevice = async (d) => {
        const dev = await requestDevice(d);
        const queue = dev.queue, writeBuffer = queue.writeBuffer.bind(queue);
        queue.writeBuffer = (...a) => (work.writes++, writeBuffer(...a));
        const createCommandEncoder = dev.createCommandEncoder.bind(dev);
        dev.createCommandEncoder = (...a) => {
            const enc = createCommandEncoder(...a), beginComputePass = enc.beginComputePass.bind(enc);
            enc.beginComputePass = (...b) => {
                const pass = beginComputePass(...b), dispatch = pass.dispatchWorkgroups.bind(pass);
                pass.dispatchWorkgroups = (...c) => (work.dispatches++, dispatch(...c));
                return pass;
            };
            return enc;
        };
        const createShaderModule = dev.createShaderModule.bind(dev);
        dev.createShaderModule = (desc) =>
            createShaderModule(breakKernel && desc.label === breakKernel ? { ...desc, code: `${desc.code}\nfn (` } : desc);
        return dev;
    };
    return a;
};

// A fresh instance of the host; jspi false hides WebAssembly.Suspending while it loads and runs.
async function host(jspi, tmp) {
    const wasi = new WASI({ version: 'preview1', args: ['wasm_pump_host'], env: {}, preopens: { '/': root, '/tmp': tmp } });
    const gpu = leanWebGPU();
    if (gpu.jspi !== jspi) throw new Error(`leanWebGPU().jspi is ${gpu.jspi}, wanted ${jspi}`);
    const lean_web = { progress: () => {} }; // lean_web.c's import
    const instance = await WebAssembly.instantiate(module, { ...wasi.getImportObject(), ...gpu.imports, lean_web });
    gpu.setMemory(instance.exports.memory);
    wasi.initialize(instance);
    const x = instance.exports;
    const h = { x, pending: 0, by: {} }; // by: LEAN_PENDING returns per export
    const promising = {};
    // a call that may wait on the GPU, made the way this host can
    h.call = async (name, ...args) => {
        if (jspi) {
            promising[name] ??= WebAssembly.promising(x[name]);
            const st = await promising[name](...args);
            if (st === LEAN_PENDING) h.pending++;
            return st;
        }
        let st;
        while ((st = x[name](...args)) === LEAN_PENDING) {
            h.pending++, (h.by[name] = (h.by[name] ?? 0) + 1);
            await gpu.settle();
        }
        return st;
    };
    // a void call (never pending); with JSPI it may still wait (a dropped map), so it is promised too
    h.drop = async (name, ...args) => {
        if (!jspi) return x[name](...args);
        promising[name] ??= WebAssembly.promising(x[name]);
        await promising[name](...args);
    };
    const mem = () => x.memory.buffer;
    h.cstr = (s) => {
        const b = encoder.encode(s);
        const p = x.lw_alloc(b.length + 1);
        new Uint8Array(mem(), p, b.length + 1).set([...b, 0]);
        return p;
    };
    h.ints = (a) => {
        const p = x.lw_alloc(4 * Math.max(a.length, 1));
        new Int32Array(mem(), p, a.length).set(a);
        return p;
    };
    h.i32 = (p) => new Int32Array(mem(), p, 1)[0];
    h.readStr = (p, n) => new TextDecoder().decode(new Uint8Array(mem(), p, n ?? new Uint8Array(mem(), p).indexOf(0)));
    h.error = () => h.readStr(x.lw_error_msg());
    h.logits = () => {
        const f = new Float32Array(mem(), h.logitsPtr, h.nVocab);
        let best = 0;
        for (let i = 1; i < f.length; i++) if (f[i] > f[best]) best = i;
        return { hash: fnv(new Uint8Array(f.buffer, f.byteOffset, f.byteLength)), argmax: best };
    };
    h.ok = async (name, ...args) => {
        const st = await h.call(name, ...args);
        if (st !== LEAN_OK) throw new Error(`${name}: status ${st}: ${h.error()}`);
    };
    // an export that writes a handle through its last argument: the handle
    h.make = async (name, ...args) => {
        const out = x.lw_alloc(4);
        await h.ok(name, ...args, out);
        return h.i32(out);
    };
    // a model file's bytes into wasm memory, loaded in place (lw_model_load), as the worker does
    h.load = async (file) => {
        const bytes = readFileSync(file), p = x.lw_alloc(bytes.length);
        new Uint8Array(mem(), p, bytes.length).set(bytes);
        h.use(await h.make('lw_model_load', p, bytes.length));
    };
    h.use = (model) => {
        h.model = model;
        const buf = x.lw_alloc(8192);
        h.nVocab = JSON.parse(h.readStr(buf, Math.min(x.lw_model_info(model, buf, 8192), 8191))).nVocab;
        h.logitsPtr = x.lw_alloc(4 * h.nVocab);
    };
    // the GPU-only load (lean_model_params.gpu_only) as the worker makes it: the file's bytes
    // pushed in pieces of `piece` bytes through one buffer (lean_model_loader), exact
    h.loadGpuOnly = async (file, piece) => {
        const bytes = readFileSync(file), buf = x.lw_alloc(piece);
        const loader = await h.make('lw_loader_begin', bytes.length, h.cstr('gpu'), 1);
        for (let at = 0; at < bytes.length; at += piece) {
            const part = bytes.subarray(at, at + piece);
            new Uint8Array(mem(), buf, part.length).set(part);
            await h.ok('lw_loader_push', loader, buf, part.length);
        }
        h.use(await h.make('lw_loader_end', loader));
    };
    h.ctx = (nCtx, nBatch) => h.make('lw_ctx_create', h.model, h.cstr('gpu'), nCtx, nBatch, 0, 1); // exact
    return h;
}

// n ids of a generation begun from the context's last logits (stop early: n < max)
async function generate(h, ctx, smp, max, n) {
    const idp = h.x.lw_alloc(4);
    await h.ok('lw_gen_begin', ctx, smp, max);
    const ids = [];
    for (let i = 0; i < n; i++) {
        await h.ok('lw_gen_next', ctx, idp);
        ids.push(h.i32(idp));
    }
    ids.resident = h.x.host_gen_resident(ctx) === 1;
    await h.drop('lw_gen_end', ctx); // drops the steps still in flight (the pump: without waiting)
    return ids;
}

// A generation of max ids, or fewer if one fails: its ids, last status and whether it ran resident.
async function generateAll(h, ctx, smp, max) {
    const idp = h.x.lw_alloc(4);
    await h.ok('lw_gen_begin', ctx, smp, max);
    const ids = [];
    let st;
    while (ids.length < max && (st = await h.call('lw_gen_next', ctx, idp)) === LEAN_OK) ids.push(h.i32(idp));
    const resident = h.x.host_gen_resident(ctx) === 1;
    await h.drop('lw_gen_end', ctx);
    return { ids, st, resident };
}

// A chat session on the GPU, F32, 40 ids a reply; sampled when temperature > 0.
async function chatSession(h, temperature, seed) {
    const s = await h.make('lw_chat_create', h.model, h.cstr('gpu'), 512, 16, 0, 1);
    h.x.host_gen_pace(h.x.lw_chat_ctx(s), PACE);
    await h.ok('lw_chat_set_sampling', s, temperature, 40, 0.95, 1, 64, seed, 0, 0, 40); // no logit bias
    return s;
}

async function chatTurns(h, s, texts) {
    const tp = h.x.lw_alloc(4), np = h.x.lw_alloc(4), mp = h.x.lw_alloc(4);
    const replies = [];
    for (const t of texts) {
        await h.ok('lw_chat_submit', s, h.cstr(t));
        let reply = '';
        for (let more = 1; more; ) {
            await h.ok('lw_chat_step', s, tp, np, mp);
            const u = new Uint32Array(h.x.memory.buffer);
            reply += h.readStr(u[tp / 4], u[np / 4]);
            more = u[mp / 4];
        }
        replies.push(reply);
    }
    const idsp = h.x.lw_alloc(4 * 1024);
    const n = h.x.host_chat_ids(s, idsp, 1024);
    return { replies, ids: [...new Int32Array(h.x.memory.buffer, idsp, Math.min(n, 1024))] };
}

// Everything one run does; what it returns must not depend on how the waits went.
async function run(jspi) {
    const tmp = mkdtempSync(path.join(os.tmpdir(), 'lean-pump-'));
    const out = {};
    work.writes = work.dispatches = 0;
    try {
        let h = await host(jspi, tmp);
        await h.load(FIXTURE);
        let ctx = await h.ctx(256, 8);
        h.x.host_gen_pace(ctx, PACE); // the model's device: every context below
        out.backend = h.readStr(h.x.lw_ctx_backend(ctx, h.x.lw_alloc(160), 160));
        const prompt = Array.from({ length: 21 }, (_, i) => (i * 37 + 5) % h.nVocab);
        await h.ok('lw_prefill', ctx, h.ints(prompt), prompt.length, h.logitsPtr); // three chunks of 8
        out.prefill = h.logits();
        await h.ok('lw_prefill', ctx, h.ints([out.prefill.argmax]), 1, h.logitsPtr);
        out.decode = h.logits();
        let smp = await h.make('lw_sampler_create', h.model, 0, 0, 1, 1, 64, 0, 0, 0); // greedy, no logit bias
        out.greedy = await generate(h, ctx, smp, 40, 40); // past two 16-id blocks: maps in flight at the end
        out.resident = out.greedy.resident;
        h.x.lw_sampler_free(smp);
        await h.drop('lw_ctx_free', ctx);
        ctx = await h.ctx(256, 8);
        await h.ok('lw_prefill', ctx, h.ints(prompt), prompt.length, h.logitsPtr);
        smp = await h.make('lw_sampler_create', h.model, 0.8, 40, 0.95, 1.1, 64, 7, 0, 0);
        await h.ok('lw_sampler_accept', smp, h.ints(prompt), prompt.length);
        out.seeded = await generate(h, ctx, smp, 64, 12); // stopped early: eight steps in flight dropped
        out.resident &&= out.seeded.resident;
        out.pos = h.x.lw_ctx_pos(ctx);
        // the context goes on by hand after the drop
        await h.ok('lw_prefill', ctx, h.ints([out.seeded.at(-1)]), 1, h.logitsPtr);
        out.after = h.logits();
        h.x.lw_sampler_free(smp);
        await h.drop('lw_ctx_free', ctx);
        out.pending = h.pending;
        const by = h.by;

        h = await host(jspi, tmp);
        const gerr = h.x.lw_alloc(516); // a lean_error
        if (h.x.host_gen_model(h.cstr('/tmp/chat.gguf'), h.cstr('tiny-llama'), gerr) !== LEAN_OK)
            throw new Error(`host_gen_model: ${h.readStr(gerr + 4)}`);
        await h.load(path.join(tmp, 'chat.gguf'));
        const turns = ['Hello there, how are you?', 'And then?'];
        let s = await chatSession(h, 0, 0);
        out.chatGreedy = await chatTurns(h, s, turns);
        await h.drop('lw_chat_free', s);
        if (!jspi) { // a reset while a step is pending drops its read-back; the next turn is exact
            const before = { ...work }; // this part's work is the pump run's alone: not counted
            s = await chatSession(h, 0, 0);
            await h.ok('lw_chat_submit', s, h.cstr(turns[0]));
            const p = h.x.lw_alloc(12);
            let st, steps = 0;
            while ((st = h.x.lw_chat_step(s, p, p + 4, p + 8)) === LEAN_OK) steps++;
            h.x.lw_chat_reset(s);
            out.resetPending = { st, steps };
            out.afterReset = (await chatTurns(h, s, [turns[0]])).replies[0];
            await h.drop('lw_chat_free', s);
            Object.assign(work, before);
        }
        s = await chatSession(h, 0.8, 7);
        out.chatSeeded = await chatTurns(h, s, turns);
        await h.drop('lw_chat_free', s);
        // a grammar: {"n": an integer, "ok": a boolean}, drawn on the GPU under its mask
        ctx = await h.ctx(128, 8);
        await h.ok('lw_prefill', ctx, h.ints([1, 2, 3]), 3, h.logitsPtr);
        smp = await h.make('lw_sampler_create', h.model, 1.0, 0, 1, 1, 64, 11, 0, 0); // the wide draw
        const gbnf = 'root ::= "{\\"n\\": " "-"? [0-9]{1,6} ", \\"ok\\": " ("true" | "false") "}"';
        if (h.x.host_sampler_grammar(smp, h.model, h.cstr(gbnf), gerr) !== LEAN_OK)
            throw new Error(`host_sampler_grammar: ${h.readStr(gerr + 4)}`);
        const before = h.pending;
        out.grammar = await generateAll(h, ctx, smp, 24); // ~20 ids of JSON, then end-of-generation ids
        out.grammarWaited = h.pending > before;
        h.x.lw_sampler_free(smp);
        await h.drop('lw_ctx_free', ctx);
        for (const [k, v] of Object.entries(h.by)) by[k] = (by[k] ?? 0) + v;
        out.pending += h.pending;

        h = await host(jspi, tmp);
        await h.load(FIXTURE);
        breakKernel = BROKEN;
        const out4 = h.x.lw_alloc(4);
        const st = await h.call('lw_ctx_create', h.model, h.cstr('gpu'), 64, 8, 0, 1, out4);
        breakKernel = null;
        out.broken = { st: st === LEAN_OK ? 'ok' : 'failed', names: h.error().includes(`pipeline '${BROKEN}'`) };
        if (st !== LEAN_OK) console.log(`${jspi ? 'jspi' : 'pump'}: the broken kernel: ${h.error()}`);
        out.pending += h.pending;
        for (const [k, v] of Object.entries(h.by)) by[k] = (by[k] ?? 0) + v;

        // the GPU-only load: the device opens inside a push, the uploads' checks come back in
        // end; its logits are the memory-loaded model's (both exact, on equal devices)
        h = await host(jspi, tmp);
        await h.loadGpuOnly(FIXTURE, (1 << 20) + 4100); // pieces that split the header and tensors
        ctx = await h.ctx(256, 8);
        await h.ok('lw_prefill', ctx, h.ints(prompt), prompt.length, h.logitsPtr);
        out.gpuOnly = h.logits();
        await h.drop('lw_ctx_free', ctx);
        await h.drop('lw_model_free', h.model);
        out.pending += h.pending;
        out.gpuOnlyBy = { ...h.by };
        for (const [k, v] of Object.entries(h.by)) by[k] = (by[k] ?? 0) + v;
        out.by = by;
        out.work = { ...work };
    } finally {
        rmSync(tmp, { recursive: true, force: true });
    }
    return out;
}

const queueOf = (r) => JSON.stringify(r.work);
const suspending = WebAssembly.Suspending;
delete WebAssembly.Suspending; // the pump: as in Safari
let pump;
try {
    pump = await run(false);
} finally {
    WebAssembly.Suspending = suspending;
}
const jspi = await run(true);

console.log(`backend: ${pump.backend}; LEAN_PENDING returned ${pump.pending} times without JSPI, ${jspi.pending} with`);
check(pump.backend.startsWith('gpu') && jspi.backend === pump.backend, `GPU backend in both (${pump.backend} / ${jspi.backend})`);
console.log(`without JSPI, LEAN_PENDING came from: ${JSON.stringify(pump.by)}`);
check(pump.pending > 0, 'the pump run waited through LEAN_PENDING');
check(pump.resident && jspi.resident, 'both generations ran on the GPU (resident sampler)');
check(jspi.pending === 0, 'the JSPI run never saw LEAN_PENDING');
console.log(`work: ${JSON.stringify(pump.work)} without JSPI, ${JSON.stringify(jspi.work)} with`);
check(pump.work.dispatches > 0 && queueOf(pump) === queueOf(jspi), 'the same queue writes and dispatches with and without JSPI');
check(pump.gpuOnly.hash === pump.prefill.hash, `the GPU-only load's logits equal the memory load's (${pump.gpuOnly.hash})`);
check(pump.gpuOnlyBy.lw_loader_push > 0 && pump.gpuOnlyBy.lw_loader_end > 0,
    `without JSPI the GPU-only load waited in a push and in end: ${JSON.stringify(pump.gpuOnlyBy)}`);
for (const k of ['prefill', 'decode', 'greedy', 'seeded', 'pos', 'after', 'chatGreedy', 'chatSeeded', 'grammar', 'broken',
    'gpuOnly']) {
    const a = JSON.stringify(pump[k]), b = JSON.stringify(jspi[k]);
    check(a === b, `${k}: pump ${a.slice(0, 300)}\n      jspi ${b.slice(0, 300)}`);
}
check(pump.resetPending.st === LEAN_PENDING && pump.resetPending.steps >= 1,
    `a chat step was left pending after ${pump.resetPending.steps} steps (status ${pump.resetPending.st})`);
check(pump.afterReset === pump.chatGreedy.replies[0], `after a reset mid-step, the turn again: '${pump.afterReset}'`);
check(pump.greedy.length === 40 && pump.seeded.length === 12, 'every id was drawn');
check(pump.grammar.resident && jspi.grammar.resident && pump.grammarWaited && pump.grammar.ids.length === 24,
    `the grammar's reply was drawn on the GPU, waiting without JSPI (${pump.grammar.ids.length} ids, status ` +
    `${pump.grammar.st})`);
check(pump.chatGreedy.replies.every((r) => r.length > 0) && pump.chatSeeded.replies.every((r) => r.length > 0),
    'every chat reply has text');
check(pump.chatGreedy.replies[0] !== pump.chatSeeded.replies[0], 'the seeded chat differs from the greedy one');
check(pump.broken.st === 'failed' && pump.broken.names, `the broken kernel fails the context, naming it (pump)`);
check(jspi.broken.st === 'failed' && jspi.broken.names, `the broken kernel fails the context, naming it (JSPI)`);
console.log(`wasm_pump: ${passed} passed, ${failed} failed`);
process.exitCode = failed ? 1 : 0;
