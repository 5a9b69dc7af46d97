// lean_worker.js — the dedicated module Worker that runs lean.wasm for lean.js, so the page never
// blocks. It owns the wasm instance, the model's bytes (in wasm memory) and the contexts.
//
// Messages (lean.js is the only client):
//   in   { id, op, args }   op: start | load | generate | chat | tokenize | detokenize | resetChat | free
//                            (start: lean.wasm instantiated, before load hands over the source)
//        { op: 'abort', target }   stops request `target` between two steps (any time)
//        { op: 'testLoseDevice' }  destroys the GPU device now, as a GPU reset would (a test hook)
//   out  { id, ok: true, result } | { id, ok: false, error }      the answer to request id
//        { id, type: 'progress', phase, loaded, total }            while loading
//        { id, type: 'stage', stage }                              a load's next stage (lean.js)
//        { id, type: 'piece', text } | { id, type: 'token', token, text }   while generating
//        { type: 'info', info }    the backend changed (a GPU failure fell back to the CPU)
// Requests run one at a time, in order; aborts bypass the queue.
//
// GPU waits: where JSPI exists the GPU-touching exports run through WebAssembly.promising and
// suspend at a wait (src/gpu/web.c); where it does not, such a call returns LEAN_PENDING and is
// called again, unchanged, once gpu.settle() says the GPU's work is done (the pump: lean.h).
//
// Sections: instance · calls · memory helpers · load (sources, cache) · backend ladder ·
//           generate · chat · tokens · messages

import { leanWebGPU } from './webgpu_imports.mjs';
import { wasiImports } from './wasi.mjs';
import { instantiateThreaded } from './threads.mjs';
import { leanWasmName } from './wasm_features.mjs';

const LEAN_ERR_DEVICE = 8;
// The pump's status (lean.h LEAN_PENDING, added by the no-JSPI work); never returned with JSPI.
const LEAN_PENDING = 9;
const LEAN_ERR_ARG = 6; // lean.h
const TOKENIZE_ADD_SPECIAL = 1, TOKENIZE_PARSE_SPECIAL = 2, DETOKENIZE_SKIP_SPECIAL = 1;
const CACHE_NAME = 'lean-models-v1'; // bump when the cache's layout changes
const STOPS = ['none', 'eog', 'string', 'limit', 'context', 'abort', 'callback'];

// ---- instance ----

let ex = null; // lean.wasm's exports, GPU-touching ones wrapped (below)
let gpu = null; // leanWebGPU()
let memory = null;

// Exports that may wait on the GPU: through WebAssembly.promising under JSPI.
const GPU_CALLS = [
    'lw_ctx_create', 'lw_ctx_free', 'lw_ctx_truncate', 'lw_prefill', 'lw_gen_begin', 'lw_gen_next', 'lw_gen_end',
    'lw_gen_begin_masked', 'lw_gen_next_masked',
    'lw_loader_push', 'lw_loader_end', 'lw_loader_free', 'lw_model_free', 'lw_chat_create', 'lw_chat_free', 'lw_chat_reset', 'lw_chat_submit', 'lw_chat_step',
    'lw_chat_set_messages', 'lw_chat_set_sampling', 'lw_ctx_set_loras', 'lw_chat_set_loras',
];

// jspi false: run as where WebAssembly.Suspending does not exist (Safari; the pump's tests);
// testStuck: the thread start never ends (lean.js's test of restarting a stuck start)
async function instantiate(jspi, opts, testStuck) {
    if (!jspi) delete WebAssembly.Suspending; // this worker's own global: the page keeps its JSPI
    gpu = leanWebGPU();
    const wasi = wasiImports();
    const imports = {
        ...wasi.imports,
        ...gpu.imports,
        lean_web: {
            progress: (done, total) => post({ id: current, type: 'progress', phase: 'upload', loaded: done, total }),
        },
    };
    let instance = null;
    const threads = await cpuThreads(opts);
    if (threads > 1) {
        try {
            if (testStuck) {
                stage('threads');
                await new Promise(() => {});
            }
            const name = leanWasmName(true);
            const t = await instantiateThreaded(await fetchWasm(name), imports, { threads, onStage: stage });
            ({ instance, memory } = t);
            state.threads = t.threads;
            state.wasm = name;
        } catch (e) {
            state.fallback.push({ backend: 'cpu-threads', reason: `${threads} threads: ${e.message ?? e}` });
        }
    }
    if (!instance) {
        stage('wasm');
        state.wasm = leanWasmName();
        const bytes = await fetchWasm(state.wasm);
        stage('compile');
        ({ instance } = await WebAssembly.instantiate(bytes, imports));
        memory = instance.exports.memory;
    }
    gpu.setMemory(memory);
    wasi.setMemory(memory);
    instance.exports._initialize();
    ex = { ...instance.exports };
    if (gpu.jspi) for (const name of GPU_CALLS) ex[name] = WebAssembly.promising(instance.exports[name]);
}

async function fetchWasm(name) {
    const url = new URL(`./${name}`, import.meta.url);
    const resp = await fetch(url);
    if (!resp.ok) throw new Error(`fetching ${url}: HTTP ${resp.status} ${resp.statusText}`);
    return resp.arrayBuffer();
}

// How many threads the CPU rung gets: more than one only with the threaded build (web/threads.mjs), which
// needs a cross-origin isolated page (SharedArrayBuffer) and is taken only when the CPU is the
// rung (backend 'cpu', or 'auto' without a hardware GPU), since the GPU path runs on lean.wasm.
// A reason it cannot have them goes to info.fallback.
async function cpuThreads(opts) {
    const want = Math.max(1, Math.floor(opts.threads ?? navigator.hardwareConcurrency ?? 1));
    if (want === 1) return 1;
    const backend = opts.backend ?? 'auto';
    if (backend === 'gpu' || opts.gpuOnly || (backend === 'auto' && !(await gpuRefusal(opts)))) return 1;
    if (!globalThis.crossOriginIsolated || typeof SharedArrayBuffer === 'undefined') {
        const reason = `${want} threads: the page is not cross-origin isolated (COOP/COEP): no SharedArrayBuffer`;
        state.fallback.push({ backend: 'cpu-threads', reason });
        return 1;
    }
    return want;
}

// ---- calls ----

class LeanError extends Error {
    constructor(status, message) {
        super(message);
        this.status = status;
    }
}

// Calls export name until it is not pending (the pump contract); returns its status.
async function pump(name, ...args) {
    for (;;) {
        const st = await ex[name](...args);
        if (st !== LEAN_PENDING) return st;
        await gpu.settle();
    }
}

// Lets the worker's event loop run (an abort message waits there): a message to ourselves is a
// task of its own without setTimeout's clamping. The step loops take it only once YIELD_MS have
// passed since the last (not per step: a hop per token was a suspect in the H200's decode
// stalls, docs/runs/2026-12-05-browser-gpu-h200.md); a GPU wait inside a step lets the loop run
// anyway, and an abort that arrives then cuts the wait short (step()).
const YIELD_MS = 10;
const tick = new MessageChannel();
let lastYield = 0;
const yielded = (r) => ((lastYield = performance.now()), r());
const yieldTask = () => new Promise((r) => ((tick.port1.onmessage = () => yielded(r)), tick.port2.postMessage(0)));
// whether request reqId was asked to stop, letting the event loop run first when it is time
async function stopAsked(reqId) {
    if (!aborted.has(reqId) && performance.now() - lastYield >= YIELD_MS) await yieldTask();
    return aborted.has(reqId);
}

// One step of a generation (lw_gen_next, lw_chat_step: f with up to 4 arguments) for request
// reqId, as pump() does, but an abort of reqId arriving while it waits on the GPU ends the wait
// at once (gpu.interrupt(): the GPU's maps stop being waited for) and the step returns
// LEAN_PENDING having drawn nothing, the steps in flight left to the caller's lean_gen_end (or,
// in a chat, to the next step, which ends the turn). Under JSPI as in the pump.
let stepOf = 0; // the request whose step is running (an abort of it interrupts the GPU's waits)
async function step(reqId, f, a, b, c, d) {
    stepOf = aborted.has(reqId) ? 0 : reqId;
    try {
        for (;;) {
            const st = await f(a, b, c, d);
            if (st !== LEAN_PENDING || gpu.interrupted) return st;
            await gpu.settle();
            if (gpu.interrupted) return st;
        }
    } finally {
        stepOf = 0;
        gpu.resume();
    }
}

// lean's message for status st (not 0)
const failure = (st) => new LeanError(st, cstr(ex.lw_error_msg()));

// pump, then throw lean's message on failure
async function call(name, ...args) {
    const st = await pump(name, ...args);
    if (st !== 0) throw new LeanError(st, cstr(ex.lw_error_msg()));
}

// ---- memory helpers ----

const encoder = new TextEncoder(), decoder = new TextDecoder();
const u8 = (ptr, n) => new Uint8Array(memory.buffer, ptr, n);
const i32 = (ptr, n) => new Int32Array(memory.buffer, ptr, n);
// one int32 at ptr, through a view made again only when the memory grows (the step loops' reads)
let heap32 = null;
const int32At = (ptr) => {
    if (heap32?.buffer !== memory.buffer) heap32 = new Int32Array(memory.buffer);
    return heap32[ptr >> 2];
};
// n bytes of UTF-8 at ptr as text (a copy first where the memory is shared: TextDecoder refuses it)
const utf8 = (ptr, n) => {
    const b = u8(ptr, n);
    return decoder.decode(memory.buffer instanceof ArrayBuffer ? b : b.slice());
};
const cstr = (ptr) => {
    const b = new Uint8Array(memory.buffer, ptr);
    return decoder.decode(b.slice(0, b.indexOf(0))); // a copy: no decoding of shared memory
};

function alloc(n) {
    if (n > 0xffff0000) throw new LeanError(5, `${n} bytes do not fit in wasm32's memory (4 GiB)`);
    const p = ex.lw_alloc(n);
    if (!p) throw new LeanError(5, `out of memory: cannot allocate ${n} bytes in wasm memory (at most 4 GiB)`);
    return p;
}

// Runs f with the listed things in wasm memory (strings NUL-terminated, arrays of int32, numbers
// as byte counts of scratch), freeing them after.
async function withMem(items, f) {
    const ptrs = [];
    try {
        for (const it of items) {
            if (typeof it === 'string') {
                const b = encoder.encode(it);
                const p = alloc(b.length + 1);
                u8(p, b.length).set(b);
                u8(p + b.length, 1)[0] = 0;
                ptrs.push(p);
            } else if (typeof it === 'number') {
                const p = alloc(it);
                u8(p, it).fill(0);
                ptrs.push(p);
            } else {
                const p = alloc(4 * Math.max(it.length, 1));
                i32(p, it.length).set(it);
                ptrs.push(p);
            }
        }
        return await f(...ptrs);
    } finally {
        for (const p of ptrs) ex.lw_free(p);
    }
}

// ---- state ----

let current = 0; // the request being served (progress messages carry its id)
const aborted = new Set(); // ids of requests asked to stop
const state = {
    model: 0, bytes: 0, // the model and its file's bytes (lw_alloc'd, freed after the model)
    info: null,
    opts: null, // Lean.load's options
    backend: 'cpu', // the rung in use: the lean_ctx_params.backend string
    threads: 1, // the CPU rung's threads (the threaded build's, else 1)
    wasm: '', // the module running (wasm_features.mjs's leanWasmName): info.wasm
    fallback: [], // [{ backend, reason }]
    ctx: 0, ctxIds: [], logits: 0, // generate's context and the ids resident in its cache
    chat: 0, // the chat session (its own context)
    gpuOnly: false, // the weights went to the GPU only (loadGpuOnly)
    loras: [], // [{ ptr, scale }]: the adapters (setLoras) on every context made from now on
    chatGrammar: 0, // the last chat turn's grammar (its session may hold it)
};
const streamed = new Set(); // ids of requests whose pieces or tokens were posted (gpuLost)
const post = (m) => {
    if (m.type === 'piece' || m.type === 'token') streamed.add(m.id);
    self.postMessage(m);
};

// ---- load: sources and the cache ----

// Where a load is, for lean.js's stall guard (LOAD_STAGES there); its bytes come as progress.
const stage = (name) => post({ id: current, type: 'stage', stage: name });

// The largest model file kept in wasm memory (wasm32 addresses 4 GiB; the rest is for the KV
// cache and activations); a larger one streams to the GPU instead (loadGpuOnly).
const MEMORY_MODEL_MAX = 3.5 * 2 ** 30;

// Copies the source's chunks into a wasm buffer of its size, so the bytes are written once;
// returns the buffer. A size its GGUF header gave (sizeFromHeader) may be followed by padding up
// to src.sizeMax: checked, not kept.
async function streamToWasm(src, onBytes) {
    const { size, phase } = src, max = src.sizeMax ?? size;
    const p = alloc(size);
    let loaded = 0;
    try {
        for (;;) {
            const { done, value } = await readChunk(src, loaded);
            if (done) break;
            if (loaded + value.length > max) throw new Error(`the download is longer than ${said(src, max)}`);
            if (loaded < size) u8(p + loaded, Math.min(value.length, size - loaded)).set(value.subarray(0, size - loaded));
            loaded += value.length;
            onBytes(phase, Math.min(loaded, size), size);
        }
        if (loaded < size) throw new Error(`truncated download: ${loaded} of ${said(src, size)} arrived`);
    } catch (e) {
        ex.lw_free(p);
        throw e;
    }
    return { ptr: p, size };
}

// "N bytes", and whose word it is when the file's own header gave it
const said = (src, n) => `${src.sizeMax === undefined ? 'its announced ' : ''}${n} bytes${src.sizeMax === undefined ? '' : ' (the size its GGUF header gives)'}`;

// A source of unknown size (-1: no Content-Length, a gzip body, a stream without options.size)
// is sized by its own GGUF header (lw_gguf_size, lean's reader and its checks): the first bytes
// gather in wasm memory until the header is whole (tried at 64 KiB, then each time they double),
// at most HEADER_MAX. Then src.size is the last tensor's end, src.sizeMax that padded, and
// src.reader gives the gathered bytes again (1 MiB views, made as read: the memory may grow
// between reads), then the rest of the stream: read once, never held twice.
const HEADER_MAX = 64 << 20;
async function sizeFromHeader(src, onBytes) {
    const out = alloc(16);
    let cap = 1 << 20, n = 0, head = alloc(cap), tryAt = 64 << 10, rest = null, ended = false;
    try {
        for (;;) {
            if (!rest) {
                const r = await readChunk(src, n);
                ended = r.done;
                rest = ended ? null : r.value;
            }
            if (rest) { // as much of the chunk as the head takes; the rest waits (a page's chunk may be huge)
                if (n === cap) {
                    const bigger = alloc(Math.min(cap * 2, HEADER_MAX));
                    u8(bigger, n).set(u8(head, n));
                    ex.lw_free(head);
                    head = bigger;
                    cap = Math.min(cap * 2, HEADER_MAX);
                }
                const take = Math.min(rest.length, cap - n);
                u8(head + n, take).set(rest.subarray(0, take));
                n += take;
                rest = take < rest.length ? rest.subarray(take) : null;
                onBytes(src.phase, n, 0);
            }
            if (!ended && n < tryAt && n < cap) continue;
            const st = ex.lw_gguf_size(head, n, out);
            if (st !== 0) throw failure(st);
            const [lo, hi] = new Float64Array(memory.buffer, out, 2);
            if (lo > 0) {
                src.size = lo;
                src.sizeMax = hi;
                break;
            }
            if (ended) throw new Error(`truncated download: it ended after ${n} bytes, inside its GGUF header (${cstr(ex.lw_error_msg())})`);
            if (n >= HEADER_MAX) throw new Error(`its size is unknown and its GGUF header does not end within its first ${HEADER_MAX} bytes (${cstr(ex.lw_error_msg())})`);
            tryAt = n * 2;
        }
    } catch (e) {
        ex.lw_free(head);
        throw e;
    } finally {
        ex.lw_free(out);
    }
    const inner = src.reader;
    let at = 0;
    src.dropHead = () => { if (head) ex.lw_free(head); head = 0; };
    src.reader = {
        async read() {
            if (head && at < n) {
                const k = Math.min(READ_BYTES, n - at);
                at += k;
                return { done: false, value: u8(head + at - k, k) };
            }
            src.dropHead();
            if (rest) {
                const v = rest;
                rest = null;
                return { done: false, value: v };
            }
            return ended ? { done: true } : inner.read();
        },
    };
}

async function readChunk(src, loaded) {
    try {
        return await src.reader.read();
    } catch (e) {
        const of = src.size >= 0 ? ` of ${src.size}` : '';
        throw new Error(`truncated download: it stopped after ${loaded}${of} bytes (${e.message ?? e})`);
    }
}

// A reader of stream's bytes through one reused buffer (BYOB) where the stream is a byte stream
// (fetch's and a Blob's bodies): a default reader's every chunk is a new buffer, garbage the
// collector takes late (200 to 300 MiB of them at a 505 MiB load's peak:
// docs/runs/2026-12-07-browser-rss.md). A value is valid until the next read.
const READ_BYTES = 1 << 20;
function bytesReader(stream) {
    let reader;
    try {
        reader = stream.getReader({ mode: 'byob' });
    } catch {
        return stream.getReader(); // not a byte stream (a page's own ReadableStream)
    }
    let buf = new ArrayBuffer(READ_BYTES);
    return {
        async read() {
            const r = await reader.read(new Uint8Array(buf));
            if (r.done) return { done: true };
            buf = r.value.buffer; // the same memory, handed back (the view passed was detached)
            return r;
        },
    };
}

async function openCache(enabled) {
    if (!enabled || typeof caches === 'undefined') return null;
    try {
        return await caches.open(CACHE_NAME);
    } catch {
        return null; // an opaque origin or a private window: load without the cache
    }
}

// source ({ url } | { blob } | { bytes } | { stream, size }) -> { reader, size (-1: unknown),
// phase, name, done(ok) }; done is called once the bytes are read (ok) or failed.
async function openSource(source, opts) {
    const none = async () => {};
    if (source.bytes) {
        const b = new Uint8Array(source.bytes);
        let given = false;
        const reader = { read: async () => (given ? { done: true } : ((given = true), { done: false, value: b })) };
        return { reader, size: b.length, phase: 'load', name: 'the model bytes', done: none };
    }
    if (source.blob)
        return { reader: bytesReader(source.blob.stream()), size: source.blob.size, phase: 'load', name: source.blob.name || 'the file', done: none };
    if (source.stream) return { reader: bytesReader(source.stream), size: source.size ?? -1, phase: 'download', name: 'the stream', done: none };

    const url = source.url;
    const cache = await openCache(opts.cache !== false && /^https?:/.test(url));
    let resp = cache ? await cache.match(url).catch(() => undefined) : undefined;
    const phase = resp ? 'cache' : 'download';
    if (!resp) {
        try {
            resp = await fetch(url);
        } catch (e) {
            throw new Error(`fetching ${url}: ${e.message ?? e}`);
        }
        if (!resp.ok) throw new Error(`fetching ${url}: HTTP ${resp.status}${resp.statusText ? ' ' + resp.statusText : ''}`);
    }
    // Content-Length is the body's size unless the body is encoded (gzip: its compressed size)
    const len = resp.headers.get('content-length');
    const size = len !== null && !resp.headers.get('content-encoding') ? Number(len) : -1;
    const put = (r) => cache.put(url, r).then(
        () => navigator.storage?.persist?.().catch(() => false),
        () => undefined, // a full quota: the model still loads, only uncached
    );
    let cached = Promise.resolve(), reader = bytesReader(resp.body);
    if (cache && phase === 'download') {
        const tee = pacedTee(reader);
        reader = tee.reader;
        const headers = { 'Content-Type': resp.headers.get('content-type') ?? 'application/octet-stream' };
        if (size >= 0) headers['Content-Length'] = String(size);
        cached = put(new Response(tee.body, { headers })).finally(tee.release);
    }
    const done = async (ok) => {
        if (ok) await cached;
        else if (cache) await cache.delete(url).catch(() => false); // never keep a truncated file
    };
    return { reader, size, phase, name: url, done };
}

// The body read once for the worker and for cache.put: each chunk read is queued, copied, for
// the cache, and the next read waits while TEE_CHUNKS are queued. A tee (resp.clone()) buffers
// all its slow side has not taken, up to the whole file again (Chromium: a 898 MiB peak rise
// for a 505 MiB model, docs/runs/2026-12-07-browser-unknown-size.md); here the cache's pace
// holds the load back instead. release(): the cache side is gone (put settled): read freely.
const TEE_CHUNKS = 8;
function pacedTee(inner) {
    let ctl, wake = null, gone = false;
    const body = new ReadableStream({
        start(c) { ctl = c; },
        pull() { wake?.(); },
        cancel() { gone = true; wake?.(); },
    }, { highWaterMark: TEE_CHUNKS });
    const release = () => { gone = true; wake?.(); };
    const reader = {
        async read() {
            while (!gone && ctl.desiredSize <= 0) await new Promise((r) => { wake = r; });
            wake = null;
            let r;
            try {
                r = await inner.read();
            } catch (e) {
                if (!gone) ctl.error(e);
                throw e;
            }
            if (!gone) r.done ? ctl.close() : ctl.enqueue(r.value.slice());
            return r;
        },
    };
    return { body, reader, release };
}

// A model whose weights go straight from the stream to the GPU, never whole in wasm memory
// (lean_model_params.gpu_only): for files past MEMORY_MODEL_MAX, or asked for (opts.gpuOnly).
// The bytes are pushed as they arrive (lean_model_loader, through one PUSH_BYTES buffer); a push
// and the end may wait on the GPU, so they go through call(): JSPI or the pump alike.
const PUSH_BYTES = 8 << 20;
async function loadGpuOnly(src, opts, onBytes) {
    const want = opts.backend ?? 'auto';
    // 'auto' asks gpuRefusal first, as chooseBackend does: lean's own 'auto' on a software
    // adapter ends in the device wait failing, which says nothing of why
    const refusal = want === 'auto' ? await gpuRefusal(opts) : '';
    const why =
        want === 'cpu' ? "the CPU rung keeps the model in wasm memory, which holds 4 GiB at most: use backend 'gpu' or 'auto'"
        : refusal ? `'auto' passes over the GPU: ${refusal}${opts.gpuOnly ? '' : `; at ${src.size} bytes the model does not fit in wasm memory (4 GiB) for the CPU either`}`
        : '';
    if (why) throw new Error(`${src.name}: ${src.size} bytes streamed to the GPU: ${why}`);
    const buf = alloc(PUSH_BYTES);
    let loader = 0;
    try {
        // lean's 'auto' takes a hardware adapter only; 'gpu' any (softwareGpu)
        const rung = want === 'auto' && opts.softwareGpu ? 'gpu' : want;
        loader = await withMem([rung, 4], async (name, out) => {
            await call('lw_loader_begin', src.size, name, opts.exact ? 1 : 0, out);
            return i32(out, 1)[0];
        });
        // the file's src.size bytes pushed; padding after them (src.sizeMax) checked, not pushed
        const max = src.sizeMax ?? src.size;
        for (let loaded = 0; ; ) {
            const { done, value } = await readChunk(src, loaded);
            if (done) break;
            if (loaded + value.length > max) throw new Error(`the download is longer than ${said(src, max)}`);
            const mine = value.subarray(0, Math.max(0, src.size - loaded));
            for (let at = 0; at < mine.length; at += PUSH_BYTES) {
                const part = mine.subarray(at, at + PUSH_BYTES);
                u8(buf, part.length).set(part);
                await call('lw_loader_push', loader, buf, part.length);
            }
            loaded += value.length;
            onBytes(src.phase, Math.min(loaded, src.size), src.size);
        }
        const l = loader;
        loader = 0; // end frees it, failing or not
        state.model = await withMem([4], async (out) => {
            await call('lw_loader_end', l, out);
            return i32(out, 1)[0];
        });
    } catch (e) {
        // taken for its size: the GPU was the only rung (too little memory there is the end)
        if (opts.gpuOnly) throw e;
        throw new Error(`${e.message}; at ${src.size} bytes the model does not fit in wasm memory (4 GiB) for the CPU either`);
    } finally {
        if (loader) await ex.lw_loader_free(loader);
        ex.lw_free(buf);
    }
    state.gpuOnly = true;
}

// ---- the backend ladder ----

// Why lean's "auto" would not take the GPU here, or '' when a hardware adapter is there (any
// adapter, with opts.softwareGpu).
async function gpuRefusal(opts) {
    if (!globalThis.navigator?.gpu) return 'navigator.gpu is missing (no WebGPU in this browser or context)';
    if (!gpu.jspi && typeof gpu.settle !== 'function') return 'no JSPI (WebAssembly.Suspending) to wait on the GPU with';
    let adapter = null;
    try {
        adapter = await navigator.gpu.requestAdapter({ powerPreference: 'high-performance' });
    } catch (e) {
        return `requestAdapter failed: ${e.message ?? e}`;
    }
    if (!adapter) return 'navigator.gpu.requestAdapter found no adapter';
    const info = adapter.info ?? {};
    if ((adapter.isFallbackAdapter || info.isFallbackAdapter) && !opts.softwareGpu)
        return `the only adapter is a software one (${nameOf(info)})`;
    return '';
}

const nameOf = (i) => [i.vendor, i.architecture, i.device, i.description].filter(Boolean).join(' ') || 'unnamed';

// What the page's WebGPU says its adapter is ("google swiftshader", "mesa llvmpipe ...").
async function adapterName() {
    const a = await navigator.gpu?.requestAdapter().catch(() => null);
    return nameOf(a?.info ?? {});
}

// Makes generate's context on the first rung that works: sets state.backend and state.ctx.
async function chooseBackend(opts) {
    const want = opts.backend ?? 'auto';
    if (state.gpuOnly) { // the weights are on the GPU only: its contexts are the only ones
        state.ctx = await createCtx('gpu', opts);
        state.backend = 'gpu';
        return;
    }
    if (want !== 'auto' && want !== 'gpu' && want !== 'cpu')
        throw new Error(`backend '${want}': expected 'auto', 'gpu' or 'cpu'`);
    if (want === 'gpu' || want === 'auto') {
        const why = want === 'auto' ? await gpuRefusal(opts) : '';
        if (!why) {
            try {
                state.ctx = await createCtx('gpu', opts);
                state.backend = 'gpu';
                return;
            } catch (e) {
                if (want === 'gpu') throw e;
                state.fallback.push({ backend: 'gpu', reason: e.message });
            }
        } else {
            state.fallback.push({ backend: 'gpu', reason: why });
        }
    }
    state.ctx = await createCtx('cpu', opts);
    state.backend = 'cpu';
}

async function createCtx(backend, opts) {
    return withMem([backend, 4], async (name, out) => {
        await call('lw_ctx_create', state.model, name, opts.nCtx ?? 0, 0, threadsFor(backend, opts), opts.exact ? 1 : 0, out);
        return i32(out, 1)[0];
    });
}

// The CPU rung's threads: what the threaded build started (cpuThreads), else 1.
function threadsFor(backend) {
    return backend === 'cpu' ? state.threads : 1;
}

async function describe() {
    let detail = await withMem([256], (buf) => cstr(ex.lw_ctx_backend(state.ctx, buf, 256)));
    // "gpu (NAME, API)": the adapter's name is what lies before the last comma
    const inner = state.backend === 'gpu' ? (detail.match(/^gpu \((.*)\)$/)?.[1] ?? '') : '';
    let adapter = inner.includes(', ') ? inner.slice(0, inner.lastIndexOf(', ')) : inner;
    if (state.backend === 'gpu' && !adapter) { // browsers may leave the name C reads empty
        adapter = await adapterName();
        detail = detail.replace('gpu (', `gpu (${adapter}`);
    }
    state.info = {
        ...state.modelInfo,
        nCtx: ex.lw_ctx_n_ctx(state.ctx),
        backend: state.backend,
        detail,
        adapter,
        threads: state.backend === 'cpu' ? threadsFor('cpu', state.opts) : 0,
        wasm: state.wasm,
        jspi: gpu.jspi,
        fallback: state.fallback,
    };
    return state.info;
}

// A lost device (or any failure of the GPU mid-work, LEAN_ERR_DEVICE) met by request reqId: the
// contexts on it are freed and the reason goes to info.fallback; under 'auto' the CPU takes
// over, under 'gpu' a new device opens (lean.h: the model uploads its weights again), and lean.js
// hears of it ('info'). The request then runs again if none of its output reached the page and
// it had not run again already; else it rejects, saying so (its pieces would come twice). A
// GPU-only model has lost its weights: it rejects, and so does every later call. Throws e when
// it is no such failure.
async function gpuLost(e, reqId, again) {
    if (!(e instanceof LeanError) || e.status !== LEAN_ERR_DEVICE || state.backend !== 'gpu') throw e;
    state.fallback.push({ backend: 'gpu', reason: e.message });
    await freeContexts();
    if (state.gpuOnly) throw new Error(`${e.message}; the model was loaded GPU-only (its weights were on that device): load it again`);
    if ((state.opts.backend ?? 'auto') === 'auto') state.backend = 'cpu';
    state.ctx = await adaptedCtx();
    post({ type: 'info', info: await describe() });
    if (streamed.has(reqId) || again)
        throw new Error(`the GPU device was lost during this reply (${e.message}); ` +
            `${state.backend === 'cpu' ? 'lean runs on the CPU now' : 'a new device is open'}: call again`);
}

// One sequence lives at a time (generate's context or the chat session's), so that wasm memory
// holds one KV cache; the model keeps its GPU weights across them (lean.h), so a switch costs
// the other's cache only.
async function generateCtx() {
    if (state.chat) await ex.lw_chat_free(state.chat);
    state.chat = 0;
    state.ctx ||= await adaptedCtx();
    return state.ctx;
}

// ---- adapters (setLoras) ----

// The adapters in force (state.loras) on a context (f 'lw_ctx_set_loras') or a chat session
// ('lw_chat_set_loras', which drops the session's cache: computed without them).
async function setLorasOn(f, target) {
    const n = state.loras.length;
    await withMem([4 * n, 4 * n], async (ptrs, scales) => {
        i32(ptrs, n).set(state.loras.map((a) => a.ptr));
        new Float32Array(memory.buffer, scales, n).set(state.loras.map((a) => a.scale));
        await call(f, target, ptrs, scales, n);
    });
}

async function adaptedCtx() {
    const ctx = await createCtx(state.backend, state.opts);
    if (state.loras.length) {
        try {
            await setLorasOn('lw_ctx_set_loras', ctx);
        } catch (e) {
            await ex.lw_ctx_free(ctx);
            throw e;
        }
    }
    return ctx;
}

// loras: [{ bytes (Uint8Array of the adapter's GGUF file), scale }]; [] removes them. Loaded
// for the model (a misfit is refused naming the tensor), then set on the live context; on
// failure the adapters in force stay.
async function setLoras({ loras }) {
    const made = [];
    try {
        for (const { bytes, scale } of loras) {
            const p = alloc(bytes.length);
            try {
                u8(p, bytes.length).set(bytes);
                await withMem([4], async (out) => {
                    await call('lw_lora_load', state.model, p, bytes.length, out);
                    made.push({ ptr: i32(out, 1)[0], scale });
                });
            } finally {
                ex.lw_free(p); // lean keeps its own copy
            }
        }
    } catch (e) {
        for (const a of made) ex.lw_lora_free(a.ptr);
        throw e;
    }
    const old = state.loras;
    state.loras = made;
    try {
        if (state.chat) {
            await setLorasOn('lw_chat_set_loras', state.chat);
        } else if (state.ctx) {
            await setLorasOn('lw_ctx_set_loras', state.ctx);
            state.ctxIds = []; // computed without them: prefilled again
            await call('lw_ctx_truncate', state.ctx, 0);
        }
    } catch (e) {
        state.loras = old;
        for (const a of made) ex.lw_lora_free(a.ptr);
        throw e;
    }
    for (const a of old) ex.lw_lora_free(a.ptr);
    return made.length;
}

// ---- masks (generate's allowedIds) ----

// The bitset of n_vocab bits (lean_mask: bit id % 32 of word id / 32) that allows the ids of
// allowed, as int32 words for withMem; null for none. Refused, naming the id: an empty list,
// or an entry that is not an id of the model (lean_gen_next_masked's contract, checked here
// so that the message names the list's own entry).
function allowedMask(allowed, nVocab) {
    if (allowed == null) return null;
    if (!Array.isArray(allowed) || allowed.length === 0)
        throw new LeanError(LEAN_ERR_ARG, 'allowedIds: expected a non-empty array of token ids');
    const words = new Int32Array(Math.ceil(nVocab / 32));
    for (const id of allowed) {
        if (!Number.isInteger(id) || id < 0 || id >= nVocab)
            throw new LeanError(LEAN_ERR_ARG, `allowedIds: ${id} is not a token id of this model (0 .. ${nVocab - 1})`);
        words[id >> 5] |= 1 << (id & 31);
    }
    return words;
}

// ---- logit bias (generate and chat's logitBias) ----

// o.logitBias ([id, value] pairs from lean.js) as lean_logit_bias entries for withMem: int32
// words, two an entry (the id, the value's float32 bits); null for none. Refused here only what
// the C side cannot see: an id that is not an int32 integer, a value that is not a number. An id
// past the vocabulary, a value outside [-100, 100] or not finite, an id given twice:
// lean_sampler_create refuses them, naming the entry (logit_bias[i], in the order given).
function biasEntries(pairs) {
    if (pairs == null || pairs.length === 0) return null;
    const words = new Int32Array(2 * pairs.length), values = new Float32Array(words.buffer);
    pairs.forEach(([id, value], i) => {
        if (!Number.isInteger(id) || Math.abs(id) > 0x7fffffff)
            throw new LeanError(LEAN_ERR_ARG, `logitBias: ${JSON.stringify(id)} is not a token id`);
        if (typeof value !== 'number')
            throw new LeanError(LEAN_ERR_ARG, `logitBias: id ${id}'s bias ${JSON.stringify(value)} is not a number`);
        words[2 * i] = id;
        values[2 * i + 1] = value;
    });
    return words;
}

// ---- grammars (generate and chat's grammar or jsonSchema) ----

// A grammar for o.grammar (GBNF text) or o.jsonSchema (a schema's JSON text), or 0 for none.
async function grammarOf(o) {
    if (o.grammar != null && o.jsonSchema != null) throw new Error('give grammar or jsonSchema, not both');
    const text = o.jsonSchema ?? o.grammar;
    if (text == null) return 0;
    return withMem([text, 4], async (t, out) => {
        await call('lw_grammar_create', state.model, t, encoder.encode(text).length, o.jsonSchema != null ? 1 : 0, out);
        return i32(out, 1)[0];
    });
}

async function freeContexts() {
    if (state.chat) await ex.lw_chat_free(state.chat);
    if (state.ctx) await ex.lw_ctx_free(state.ctx);
    if (state.logits) ex.lw_free(state.logits);
    Object.assign(state, { chat: 0, ctx: 0, logits: 0, ctxIds: [] });
}

// fallback: what lean.js passed over before this worker ([{ backend, reason }], info.fallback)
async function start({ opts, fallback, testStuck }) {
    if (ex) throw new Error('lean.wasm is started already in this worker');
    state.fallback.push(...fallback);
    stage('wasm');
    await instantiate(opts.jspi !== false, opts, testStuck);
}

async function load({ source, opts }) {
    if (!ex) throw new Error('lean.wasm is not started: start comes before load');
    if (state.model) throw new Error('this worker has a model already');
    state.opts = opts;
    // -Infinity: the first report always goes; a worker can read its first bytes within 50 ms
    // of its own time origin, and a stream that then stalls was named as stalled in 'open'
    let last = -Infinity;
    const onBytes = (phase, loaded, total) => {
        const now = performance.now();
        if (now - last < 50 && loaded !== total) return; // a few messages a second are enough
        last = now;
        post({ id: current, type: 'progress', phase, loaded, total: Math.max(total, 0) });
    };
    stage('open');
    const src = await openSource(source, opts);
    try {
        if (src.size < 0) await sizeFromHeader(src, onBytes);
        if (opts.gpuOnly || src.size > MEMORY_MODEL_MAX) {
            await loadGpuOnly(src, opts, onBytes);
        } else {
            const { ptr, size } = await streamToWasm(src, onBytes);
            state.bytes = ptr;
            stage('parse');
            await withMem([4], async (out) => {
                await call('lw_model_load', ptr, size, out);
                state.model = i32(out, 1)[0];
            });
            post({ id: current, type: 'progress', phase: 'load', loaded: size, total: size });
        }
        stage('store');
        await src.done(true);
    } catch (e) {
        await src.done(false);
        src.dropHead?.();
        if (state.bytes) ex.lw_free(state.bytes);
        state.bytes = 0;
        throw src.name.includes('://') && !e.message.includes(src.name) ? new Error(`${src.name}: ${e.message}`) : e;
    }
    state.modelInfo = await withMem([8192], (buf) => {
        const n = ex.lw_model_info(state.model, buf, 8192);
        return JSON.parse(decoder.decode(u8(buf, Math.min(n, 8191)).slice()));
    });
    stage('backend');
    await chooseBackend(opts);
    return describe();
}

// ---- generate ----

// The GPU steps submitted after the reply's last read-back (webgpu_imports.mjs): work run ahead
// and dropped, which the next call waits behind; 0 on the CPU.
const stepsUnread = () => (state.backend === 'gpu' ? gpu.stepsUnread : 0);

function samplingArgs(o) {
    const t = o.temperature ?? 0;
    return [t, o.topK ?? 40, o.topP ?? 0.95, o.repeatPenalty ?? 1, o.repeatLastN ?? 64, o.seed ?? -1];
}

async function tokenize(text, flags) {
    return withMem([text, 4], async (t, nOut) => {
        const n = encoder.encode(text).length;
        const max = 3 * n + 3; // lean.h's bound
        return withMem([max], async (ids) => {
            await call('lw_tokenize', state.model, t, n, flags, ids, max, nOut);
            return Array.from(i32(ids, i32(nOut, 1)[0]));
        });
    });
}

async function generate(o, reqId) {
    for (let again = false; ; again = true) {
        try {
            return await generateOnce(o, reqId);
        } catch (e) {
            await gpuLost(e, reqId, again);
        }
    }
}

async function generateOnce(o, reqId) {
    const ids = o.ids ? Array.from(o.ids) : await tokenize(o.prompt ?? '', TOKENIZE_ADD_SPECIAL | TOKENIZE_PARSE_SPECIAL);
    if (!ids.length) throw new Error('generate: no prompt ids');
    const ctx = await generateCtx();
    const maxTokens = o.maxTokens ?? 32;
    const nVocab = state.modelInfo.nVocab;
    if (!state.logits) state.logits = alloc(4 * nVocab);
    const hasText = ex.lw_n_tokens(state.model) > 0;
    // the cache keeps the longest prefix it shares with these ids; at least one is run again
    let common = 0;
    while (common < ids.length && common < state.ctxIds.length && ids[common] === state.ctxIds[common]) common++;
    if (common === ids.length) common--;
    state.ctxIds = state.ctxIds.slice(0, common);
    await call('lw_ctx_truncate', ctx, common);

    const out = [];
    let text = '', smp = 0, ts = 0, grammar = 0, stop = 'limit';
    const t0 = performance.now();
    let t1 = t0;
    const mask = allowedMask(o.allowedIds, nVocab); // a bad one fails before any work
    const bias = biasEntries(o.logitBias); // as does a bad bias (its C checks: the sampler's, below)
    await withMem([ids, 16, mask ?? [], bias ?? []], async (idsPtr, scratch, maskPtr, biasPtr) => {
        try {
            grammar = await grammarOf(o);
            await call('lw_sampler_create', state.model, ...samplingArgs(o), biasPtr, bias ? bias.length / 2 : 0, scratch);
            smp = i32(scratch, 1)[0];
            await call('lw_prefill', ctx, idsPtr + 4 * common, ids.length - common, state.logits);
            state.ctxIds = ids.slice();
            t1 = performance.now();
            if (grammar) await call('lw_sampler_set_grammar', smp, grammar); // lw_gen_* then draw on the host
            await call('lw_sampler_accept', smp, idsPtr, ids.length);
            if (hasText) {
                await call('lw_text_stream_create', state.model, scratch);
                ts = i32(scratch, 1)[0];
            }
            if (maxTokens > 0) {
                await call(mask ? 'lw_gen_begin_masked' : 'lw_gen_begin', ctx, smp, maxTokens);
                // the hot loop: no call() wrappers, no views made, the event loop every YIELD_MS
                const nText = hasText ? ex.lw_n_tokens(state.model) : 0;
                for (let i = 0; i < maxTokens; i++) {
                    if (await stopAsked(reqId)) {
                        stop = 'abort';
                        break;
                    }
                    const st = mask ? await step(reqId, ex.lw_gen_next_masked, ctx, maskPtr, nVocab, scratch)
                                    : await step(reqId, ex.lw_gen_next, ctx, scratch);
                    if (st === LEAN_PENDING) { // aborted while it waited: nothing drawn
                        stop = 'abort';
                        break;
                    }
                    if (st !== 0) throw failure(st);
                    if (aborted.has(reqId)) { // drawn after the abort came: not handed out (rewound below)
                        stop = 'abort';
                        break;
                    }
                    const id = int32At(scratch);
                    out.push(id);
                    if (!o.ignoreEog && ex.lw_is_eog(state.model, id)) {
                        stop = 'eog';
                        break;
                    }
                    let piece = '';
                    if (ts && id < nText) {
                        const st = ex.lw_text_stream_push(ts, id, scratch, scratch + 4);
                        if (st !== 0) throw failure(st);
                        piece = utf8(int32At(scratch), int32At(scratch + 4));
                        text += piece;
                    }
                    if (o.stream) post({ id: reqId, type: 'token', token: id, text: piece });
                }
            }
            if (ts) {
                await call('lw_text_stream_flush', ts, scratch, scratch + 4);
                const rest = decoder.decode(u8(i32(scratch, 1)[0], i32(scratch + 4, 1)[0]).slice());
                if (rest) {
                    text += rest;
                    if (o.stream) post({ id: reqId, type: 'token', token: -1, text: rest });
                }
            }
        } finally {
            await ex.lw_gen_end(ctx); // the cache: the prompt and every drawn id but the last
            if (ts) ex.lw_text_stream_free(ts);
            if (smp) ex.lw_sampler_free(smp);
            if (grammar) ex.lw_grammar_free(grammar);
        }
    });
    // the ids handed out, the end-of-generation one left out of the result
    if (out.length) state.ctxIds.push(...out.slice(0, -1));
    const pos = ex.lw_ctx_pos(ctx);
    // an id drawn after an abort, not handed out, is in the cache's rows: rewound
    if (pos > state.ctxIds.length) await call('lw_ctx_truncate', ctx, state.ctxIds.length);
    else if (pos < state.ctxIds.length) state.ctxIds = []; // never guess: prefill afresh
    const t2 = performance.now();
    const result = stop === 'eog' ? out.slice(0, -1) : out;
    const nDec = Math.max(out.length - 1, 0);
    return {
        ids: result,
        text,
        stats: {
            nPrompt: ids.length,
            nReused: common,
            nGenerated: out.length,
            prefillTokensPerSecond: (ids.length - common) / Math.max((t1 - t0) / 1e3, 1e-9),
            decodeTokensPerSecond: nDec ? nDec / Math.max((t2 - t1) / 1e3, 1e-9) : 0,
            stop,
            gpuStepsUnread: stepsUnread(),
            wasmBytes: memory.buffer.byteLength,
        },
    };
}

// ---- chat ----

async function chatSession() {
    if (state.chat) return state.chat;
    if (state.ctx) await ex.lw_ctx_free(state.ctx);
    Object.assign(state, { ctx: 0, ctxIds: [] });
    const o = state.opts;
    state.chat = await withMem([state.backend, 4], async (name, out) => {
        await call('lw_chat_create', state.model, name, o.nCtx ?? 0, 0, threadsFor(state.backend, o), o.exact ? 1 : 0, out);
        return i32(out, 1)[0];
    });
    try {
        if (state.loras.length) await setLorasOn('lw_chat_set_loras', state.chat);
    } catch (e) {
        await ex.lw_chat_free(state.chat); // never a session without the adapters asked for
        state.chat = 0;
        throw e;
    }
    return state.chat;
}

async function chat(o, reqId) {
    for (let again = false; ; again = true) {
        try {
            return await chatOnce(o, reqId);
        } catch (e) {
            await gpuLost(e, reqId, again);
        }
    }
}

// o.messages: the whole conversation, ending with the user's new message
async function chatOnce(o, reqId) {
    const msgs = o.messages;
    const last = msgs[msgs.length - 1];
    if (!last || last.role !== 'user') throw new Error("chat: the last message must be the user's");
    const s = await chatSession();
    const [t, k, p, r, n, seed] = samplingArgs(o);
    const history = JSON.stringify(msgs.slice(0, -1));
    await withMem([history], (json) => call('lw_chat_set_messages', s, json, encoder.encode(history).length));
    const bias = biasEntries(o.logitBias);
    await withMem([bias ?? []], (b) => call('lw_chat_set_sampling', s, t, k, p, r, n, seed, b, bias ? bias.length / 2 : 0,
                                             o.maxTokens ?? 0));
    // this turn's grammar (o.grammar, o.jsonSchema; 0: none) replaces the last turn's, freed now
    const grammar = await grammarOf(o);
    try {
        await call('lw_chat_set_grammar', s, grammar);
    } catch (e) {
        if (grammar) ex.lw_grammar_free(grammar);
        throw e;
    }
    if (state.chatGrammar) ex.lw_grammar_free(state.chatGrammar);
    state.chatGrammar = grammar;
    // and to this turn's allowed ids (o.allowedIds; none: every id), as generate's
    const nVocab = state.modelInfo.nVocab, mask = allowedMask(o.allowedIds, nVocab);
    await withMem([mask ?? []], (bits) => call('lw_chat_set_mask', s, mask ? bits : 0, nVocab));
    let text = '';
    const t0 = performance.now();
    let t1 = 0, nPrefill = 0;
    await withMem([last.content, 16, 24], async (user, scratch, st) => {
        await call('lw_chat_submit', s, user);
        ex.lw_chat_stats(s, st);
        nPrefill = i32(st, 6)[2];
        for (let more = 1, abortSent = false; more; ) {
            if (!abortSent && (await stopAsked(reqId))) {
                ex.lw_chat_abort(s); // the next step ends the turn, keeping the text handed out
                abortSent = true;
            }
            const st = await step(reqId, ex.lw_chat_step, s, scratch, scratch + 4, scratch + 8);
            if (st === LEAN_PENDING) continue; // aborted while it waited: the next step ends the turn
            if (st !== 0) throw failure(st);
            const n = int32At(scratch + 4);
            more = int32At(scratch + 8);
            if (n > 0) {
                const piece = utf8(int32At(scratch), n);
                text += piece;
                post({ id: reqId, type: 'piece', text: piece });
            }
            // the prefill is done once the cache holds the whole prompt: its last chunk read the
            // logits back, so the GPU had finished it (the first id may come much later, in a
            // block of several read back together)
            if (!t1) {
                ex.lw_chat_stats(s, st);
                if (ex.lw_ctx_pos(ex.lw_chat_ctx(s)) >= i32(st, 6)[0] || i32(st, 6)[3] > 0) t1 = performance.now();
            }
        }
    });
    const t2 = performance.now();
    const st = await withMem([24], (p) => (ex.lw_chat_stats(s, p), Array.from(i32(p, 6))));
    t1 ||= t2;
    const nDec = Math.max(st[3] - 1, 0);
    return {
        text,
        stats: {
            nPrompt: st[0],
            nReused: st[1],
            nGenerated: st[3],
            prefillTokensPerSecond: nPrefill / Math.max((t1 - t0) / 1e3, 1e-9),
            decodeTokensPerSecond: nDec ? nDec / Math.max((t2 - t1) / 1e3, 1e-9) : 0,
            stop: STOPS[st[5]] ?? String(st[5]),
            gpuStepsUnread: stepsUnread(),
            wasmBytes: memory.buffer.byteLength,
        },
    };
}

// ---- tokens ----

async function detokenize({ ids, skipSpecial }) {
    return withMem([Array.from(ids), 4], async (p, nOut) => {
        let cap = 16 * ids.length + 16;
        for (;;) {
            const text = await withMem([cap], async (buf) => {
                await call('lw_detokenize', state.model, p, ids.length, skipSpecial ? DETOKENIZE_SKIP_SPECIAL : 0, buf, cap, nOut);
                const n = i32(nOut, 1)[0];
                return n < cap ? decoder.decode(u8(buf, n).slice()) : null;
            });
            if (text !== null) return text;
            cap = i32(nOut, 1)[0] + 1;
        }
    });
}

// ---- messages ----

const ops = {
    start,
    load,
    generate: (a, id) => generate(a, id),
    chat: (a, id) => chat(a, id),
    tokenize: ({ text, addSpecial = true, parseSpecial = false }) =>
        tokenize(text, (addSpecial ? TOKENIZE_ADD_SPECIAL : 0) | (parseSpecial ? TOKENIZE_PARSE_SPECIAL : 0)),
    detokenize,
    setLoras,
    async resetChat() {
        if (state.chat) await ex.lw_chat_reset(state.chat);
    },
    async free() {
        await freeContexts();
        for (const a of state.loras) ex.lw_lora_free(a.ptr); // before their model
        if (state.chatGrammar) ex.lw_grammar_free(state.chatGrammar); // after its session
        Object.assign(state, { loras: [], chatGrammar: 0 });
        if (state.model) await ex.lw_model_free(state.model);
        if (state.bytes) ex.lw_free(state.bytes); // after the model: its weights lived here
        Object.assign(state, { model: 0, bytes: 0 });
    },
};

let queue = Promise.resolve();
let broken = ''; // why lean.wasm can no longer be trusted
self.onmessage = ({ data }) => {
    if (data.op === 'abort') {
        aborted.add(data.target);
        if (data.target === stepOf) gpu.interrupt(); // its step waits on the GPU: no longer
        return;
    }
    if (data.op === 'testLoseDevice') return gpu?.loseDevices(); // lean.js testLoseDevice: now, not queued
    queue = queue.then(async () => {
        current = data.id;
        try {
            if (broken) throw new Error(`lean.wasm stopped after an earlier trap (${broken}): load the model again`);
            if (!ops[data.op]) throw new Error(`unknown request '${data.op}'`);
            if (data.op !== 'start' && data.op !== 'load' && !state.model) throw new Error('no model is loaded (or it was freed)');
            const result = await ops[data.op](data.args ?? {}, data.id);
            post({ id: data.id, ok: true, result });
        } catch (e) {
            // a trap (unreachable, out of bounds) leaves the instance's state unknown: refuse the rest
            if (e instanceof WebAssembly.RuntimeError) broken = e.message;
            post({ id: data.id, ok: false, error: String(e?.message ?? e) });
        } finally {
            aborted.delete(data.id);
            streamed.delete(data.id);
        }
    });
};
