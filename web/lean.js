// lean.js — lean in a web page: a GGUF model running in a dedicated Worker (lean_worker.js over
// lean.wasm), on the visitor's GPU through WebGPU or on the CPU. docs/web.md is the reference.
//
//   import { Lean } from './lean.js';
//   const lean = await Lean.load('model.gguf', { onProgress: (p) => console.log(p.phase, p.loaded, p.total) });
//   lean.info.backend;                                            // 'gpu' or 'cpu'
//   const { ids, text } = await lean.generate({ prompt: 'Once upon', maxTokens: 32 });
//   for await (const piece of lean.chat('Hi!')) show(piece);      // the reply, streamed
//   const { text: json } = await lean.generate({ prompt: 'A cat:', jsonSchema: { type: 'object' } });
//   await lean.setLoras([{ url: 'adapter.gguf', scale: 0.5 }]);    // LoRA adapters, no reload
//   await lean.free();
//
// Every method but free waits for the ones before it (the worker runs one request at a time).
// Errors reject with an Error whose message is lean's own.

const WORKER_URL = new URL('./lean_worker.js', import.meta.url);
const CACHE_NAME = 'lean-models-v1'; // lean_worker.js fills it

// Lean.load gives up when its worker shows no progress for this long (options.stallTimeout):
// a load never hangs, and the error names the stage it stopped in. A healthy load reports
// often: each stage as it enters it, bytes a few times a second.
const LOAD_STALL_MS = 120_000;
// A start that stays in stage 'threads' this long goes to a new worker (options.threadStartTimeout;
// Lean.#start says why). Healthy starts took under 7 s at load 12 on 2 cores.
const THREAD_START_MS = 30_000;
const FREE_WAIT_MS = 10_000;
// The stages of a load, in order (the worker's 'stage' messages and the byte phases of its
// progress messages), as the error names them.
const LOAD_STAGES = {
    worker: 'starting the worker (lean_worker.js)',
    wasm: 'fetching lean.wasm',
    compile: 'compiling and instantiating lean.wasm',
    threads: 'starting the CPU threads (a Web Worker each)',
    open: 'opening the model (the Cache API lookup, the HTTP response)',
    download: 'downloading the model',
    cache: 'reading the model from the Cache API',
    load: 'reading the model',
    parse: 'checking the model (lean_model_load)',
    upload: 'sending the weights to the GPU',
    store: 'finishing the model\'s Cache API copy',
    backend: 'starting the backend (the GPU adapter and device, the weights)',
    loras: 'loading the adapters',
};

// Where the page's sampling names meet the worker's (the same names: kept in one list).
const SAMPLING = ['temperature', 'topK', 'topP', 'repeatPenalty', 'repeatLastN', 'seed'];
const pick = (o, keys) => Object.fromEntries(keys.filter((k) => o?.[k] !== undefined).map((k) => [k, o[k]]));
// The sampling fields for the worker, logitBias as [id, value] pairs: given as OpenAI's object
// { "15": -5, "42": 3.5 } (keys: token ids in decimal), an array of [id, value] pairs or a Map.
// The worker and lean_sampler_create check the ids and values, naming the bad one.
function sampling(o) {
    const s = pick(o, SAMPLING), b = o?.logitBias;
    if (b == null) return s;
    const pair = (e) => {
        if (!Array.isArray(e) || e.length !== 2) throw new TypeError(`logitBias: ${JSON.stringify(e)} is not an [id, bias] pair`);
        return e;
    };
    if (b instanceof Map || Array.isArray(b)) s.logitBias = Array.from(b, pair);
    else if (typeof b === 'object' && [Object.prototype, null].includes(Object.getPrototypeOf(b)))
        s.logitBias = Object.entries(b).map(([k, v]) => [/^-?\d+$/.test(k) ? Number(k) : k, v]);
    else throw new TypeError(`logitBias: expected { id: bias }, [[id, bias], ...] or a Map, got ${b?.constructor?.name ?? typeof b}`);
    return s;
}
// A reply held to a grammar: { grammar: GBNF text } or { jsonSchema: a schema, object or JSON text }
// (docs/grammar.md), for the worker: the schema as JSON text; and to { allowedIds: token ids }.
const constraint = (o) => ({
    ...pick(o, ['grammar']),
    ...(o?.jsonSchema != null ? { jsonSchema: typeof o.jsonSchema === 'string' ? o.jsonSchema : JSON.stringify(o.jsonSchema) } : {}),
    ...(o?.allowedIds != null ? { allowedIds: Array.from(o.allowedIds) } : {}),
});
// An adapter's file as bytes: { url } (fetched relative to the page), { data } (an ArrayBuffer,
// typed array, File or Blob); copied, so the caller keeps its buffer.
async function adapterBytes(a) {
    if (a?.url !== undefined) {
        const url = new URL(a.url, globalThis.location?.href).href;
        const r = await fetch(url);
        if (!r.ok) throw new Error(`${url}: HTTP ${r.status}`);
        return new Uint8Array(await r.arrayBuffer());
    }
    const d = a?.data;
    if (typeof Blob !== 'undefined' && d instanceof Blob) return new Uint8Array(await d.arrayBuffer());
    if (d instanceof ArrayBuffer) return new Uint8Array(d.slice(0));
    if (ArrayBuffer.isView(d)) return new Uint8Array(d.buffer.slice(d.byteOffset, d.byteOffset + d.byteLength));
    throw new TypeError('an adapter is { url } or { data: ArrayBuffer | typed array | Blob }, with an optional scale');
}

// What watches a load: guard.saw(message) for each of the worker's messages, guard.race(p): p,
// or the first of the stall timeout and the signal's abort (rejecting); guard.end() once done.
function loadGuard(signal, stallMs) {
    let stage = 'worker', loaded = 0, total = 0, timer = 0, fail;
    const failed = new Promise((_, reject) => (fail = reject));
    failed.catch(() => {}); // raced below; unobserved when the load ends first
    const where = () => `${LOAD_STAGES[stage] ?? stage} (stage '${stage}'` +
        (loaded ? `, ${loaded}${total ? ' of ' + total : ''} bytes` : '') + ')';
    const arm = () => {
        clearTimeout(timer);
        if (stallMs > 0) timer = setTimeout(() => fail(new DOMException(
            `Lean.load: no progress in ${stallMs / 1000} s while ${where()}; the load was stopped`, 'TimeoutError')), stallMs);
    };
    const abort = () => fail(new DOMException(`Lean.load aborted while ${where()}`, 'AbortError'));
    signal?.addEventListener('abort', abort, { once: true });
    arm();
    return {
        saw(m) {
            if (m.type === 'stage') [stage, loaded, total] = [m.stage, 0, 0];
            else if (m.type === 'progress') [stage, loaded, total] = [m.phase, m.loaded, m.total];
            arm();
        },
        race: (p) => Promise.race([p, failed]),
        end() {
            clearTimeout(timer);
            signal?.removeEventListener('abort', abort);
        },
    };
}

export class Lean {
    #worker;
    #next = 1;
    #pending = new Map(); // request id -> { resolve, reject, onMessage }
    #history = []; // the conversation chat(text) continues: [{ role, content }]
    #system;
    info = null;
    stats = null;

    constructor(worker) {
        this.#attach(worker);
    }

    #attach(worker) {
        this.#worker = worker;
        worker.onmessage = ({ data }) => {
            if (data.type === 'info') {
                this.info = data.info;
                return;
            }
            const p = this.#pending.get(data.id);
            if (!p) return;
            if (data.type) return p.onMessage?.(data);
            this.#pending.delete(data.id);
            if (data.ok) p.resolve(data.result);
            else p.reject(new Error(data.error));
        };
        worker.onerror = (e) => {
            e.preventDefault?.();
            const err = new Error(`lean's worker failed: ${e.message ?? e}`);
            for (const p of this.#pending.values()) p.reject(err);
            this.#pending.clear();
        };
    }

    // Loads a model. source: a URL (string or URL), a File or Blob, an ArrayBuffer or typed
    // array, or a ReadableStream of bytes (opts.size: its length, when known).
    // opts: { backend: 'auto' | 'gpu' | 'cpu', nCtx, threads, exact, cache, jspi, gpuOnly, softwareGpu,
    //         onProgress, size, loras (as setLoras takes them), signal, stallTimeout (ms),
    //         threadStartTimeout (ms), testStuckThreads (a test hook: that many starts stick) }
    // signal (an AbortSignal) stops the load, rejecting with an AbortError; with no progress for
    // stallTimeout ms (LOAD_STALL_MS; 0: wait for ever) it rejects with a TimeoutError naming the
    // stage. Either way the worker is terminated, whatever it was waiting on.
    static async load(source, opts = {}) {
        opts.signal?.throwIfAborted();
        const worker = new Worker(WORKER_URL, { type: 'module', name: 'lean' });
        const lean = new Lean(worker);
        const { onProgress, signal, stallTimeout = LOAD_STALL_MS, threadStartTimeout = THREAD_START_MS,
                testStuckThreads = 0, ...rest } = opts;
        const options = pick(rest, ['backend', 'nCtx', 'threads', 'exact', 'cache', 'jspi', 'gpuOnly', 'softwareGpu']);
        // a page without JSPI (or one that deleted it to test the other path) gets a worker without
        options.jspi ??= typeof WebAssembly.Suspending === 'function';
        const transfer = [];
        let src;
        if (typeof source === 'string' || source instanceof URL) {
            // relative to the page, as fetch would read it there
            src = { url: new URL(source, globalThis.location?.href).href };
        } else if (typeof Blob !== 'undefined' && source instanceof Blob) {
            src = { blob: source };
        } else if (source instanceof ArrayBuffer || ArrayBuffer.isView(source)) {
            // copied once into the worker's message (the caller keeps its buffer)
            const b = source instanceof ArrayBuffer ? new Uint8Array(source) : new Uint8Array(source.buffer, source.byteOffset, source.byteLength);
            src = { bytes: b };
        } else if (typeof ReadableStream !== 'undefined' && source instanceof ReadableStream) {
            src = { stream: source, size: opts.size };
            transfer.push(source);
        } else {
            worker.terminate();
            throw new TypeError('Lean.load: the source must be a URL, File/Blob, ArrayBuffer, typed array or ReadableStream');
        }
        const guard = loadGuard(signal, stallTimeout);
        try {
            const onMessage = (m) => {
                guard.saw(m);
                if (m.type === 'progress') onProgress?.(m);
            };
            // the source goes to the worker once lean.wasm runs there: a restarted start loses nothing
            await lean.#start(options, guard, onMessage, threadStartTimeout, testStuckThreads);
            lean.info = await guard.race(lean.#request('load', { source: src, opts: options }, { transfer, onMessage }));
            if (opts.loras?.length) {
                guard.saw({ type: 'stage', stage: 'loras' });
                await guard.race(lean.setLoras(opts.loras));
            }
        } catch (e) {
            lean.#worker.terminate();
            lean.#worker = null;
            throw e;
        } finally {
            guard.end();
        }
        return lean;
    }

    // Whether the Cache API holds the model at url (a Lean.load of it would read no network).
    static async cached(url) {
        if (typeof caches === 'undefined') return false;
        const cache = await caches.open(CACHE_NAME);
        return !!(await cache.match(new URL(url, globalThis.location?.href).href));
    }

    // Drops url's model from the Cache API, or every model lean cached when url is absent.
    static async uncache(url) {
        if (typeof caches === 'undefined') return false;
        if (url === undefined) return caches.delete(CACHE_NAME);
        return (await caches.open(CACHE_NAME)).delete(new URL(url, globalThis.location?.href).href);
    }

    // Starts lean.wasm in the worker (its stages 'wasm', 'compile', 'threads'). On the CPU rung
    // the worker starts a Worker per thread, and Firefox's Worker constructor there was seen to
    // block for good, about 1 start in 100 under load (docs/runs/2026-12-06-browser-thread-start.md):
    // a start that stays in 'threads' for threadStartMs goes to a new worker, once as asked and
    // then on one thread, each restart's reason in info.fallback. stuckForTest: how many starts
    // the worker makes stick (the test of this).
    async #start(opts, guard, onMessage, threadStartMs, stuckForTest) {
        const fallback = [];
        for (let attempt = 0; ; attempt++) {
            let timer = 0, stuck;
            const stalled = new Promise((resolve) => (stuck = resolve));
            const watch = (m) => {
                onMessage(m);
                clearTimeout(timer);
                if (m.type === 'stage' && m.stage === 'threads' && threadStartMs > 0) timer = setTimeout(stuck, threadStartMs);
            };
            const started = this.#request('start', { opts, fallback, testStuck: attempt < stuckForTest }, { onMessage: watch });
            const done = await guard.race(Promise.race([started.then(() => true), stalled.then(() => false)]))
                .finally(() => clearTimeout(timer));
            if (done) return;
            const last = attempt > 0;
            fallback.push({ backend: 'cpu-threads', reason: `the CPU threads did not start in ${threadStartMs / 1000} s: ` +
                            `lean's worker was restarted${last ? ' on one thread' : ''}` });
            this.#worker.terminate();
            this.#pending.clear(); // the start's answer never comes: nothing waits on it but the race above
            this.#attach(new Worker(WORKER_URL, { type: 'module', name: 'lean' }));
            if (last) opts = { ...opts, threads: 1 };
        }
    }

    #request(op, args, { transfer = [], onMessage, signal } = {}) {
        if (!this.#worker) return Promise.reject(new Error('this model was freed'));
        const id = this.#next++;
        return new Promise((resolve, reject) => {
            this.#pending.set(id, { resolve, reject, onMessage });
            if (signal) {
                const stop = () => this.#worker?.postMessage({ op: 'abort', target: id });
                if (signal.aborted) stop();
                else signal.addEventListener('abort', stop, { once: true });
            }
            this.#worker.postMessage({ id, op, args }, transfer);
        });
    }

    // { ids | prompt, maxTokens = 32, temperature (0/absent: greedy), topK, topP, repeatPenalty,
    //   repeatLastN, seed, logitBias, ignoreEog, grammar | jsonSchema, allowedIds, signal,
    //   onToken(id, text) } -> { ids, text }
    // logitBias ({ "15": -5 }, [[15, -5]] or a Map; values in [-100, 100]) adds to those ids'
    // logits before every other step, greedy too: -100 all but bans an id (allowedIds bans).
    // With grammar (GBNF) or jsonSchema, only ids that keep the reply inside it are drawn, and it
    // ends once the grammar is complete (an end-of-generation id, not in ids). With allowedIds
    // (token ids), every id drawn is one of them (with a grammar, allowed by both); the reply ends
    // on an end-of-generation id only if one is listed.
    async generate(o = {}) {
        const args = { ...pick(o, ['prompt', 'maxTokens', 'ignoreEog']), ...sampling(o), ...constraint(o), stream: !!o.onToken };
        if (o.ids) args.ids = Array.from(o.ids);
        // after an abort no id reaches onToken, and the result ends where onToken stopped: the
        // worker may have sent a few more before it saw the abort (its cache keeps them, exact)
        let seen = 0, seenText = '';
        const onMessage = (m) => {
            if (m.type !== 'token' || o.signal?.aborted) return;
            if (m.token >= 0) seen++;
            seenText += m.text;
            o.onToken?.(m.token, m.text);
        };
        const r = await this.#request('generate', args, { onMessage, signal: o.signal });
        this.stats = r.stats;
        if (args.stream && o.signal?.aborted && r.ids.length > seen) {
            this.stats = { ...r.stats, nGenerated: seen, stop: 'abort' };
            return { ids: r.ids.slice(0, seen), text: seenText };
        }
        return { ids: r.ids, text: r.text };
    }

    // An async iterator of the reply's text pieces. input: the user's text (the conversation so
    // far continues; opts.system sets its system prompt), or the whole conversation
    // [{ role, content }, ...] ending with the user's message (which then becomes the one
    // chat(text) continues). The KV cache keeps what the turns share.
    // opts: { maxTokens, signal, system, temperature, topK, topP, repeatPenalty, repeatLastN, seed,
    //         logitBias, grammar | jsonSchema, allowedIds (this reply held to them, as in generate) }
    async *chat(input, opts = {}) {
        let messages;
        if (typeof input === 'string') {
            if (opts.system !== undefined) this.#system = opts.system;
            const sys = this.#system ? [{ role: 'system', content: this.#system }] : [];
            messages = [...sys, ...this.#history, { role: 'user', content: input }];
        } else {
            messages = input.map(({ role, content }) => ({ role, content }));
            if (opts.system !== undefined && messages[0]?.role !== 'system') messages.unshift({ role: 'system', content: opts.system });
            this.#system = messages[0]?.role === 'system' ? messages[0].content : undefined;
        }
        const queue = [];
        let wake = null, done = false, failure = null, shown = '';
        const notify = () => wake?.();
        const args = { messages, ...pick(opts, ['maxTokens']), ...sampling(opts), ...constraint(opts) };
        const controller = new AbortController();
        opts.signal?.addEventListener('abort', () => controller.abort(), { once: true });
        if (opts.signal?.aborted) controller.abort();
        const finished = this.#request('chat', args, {
            signal: controller.signal,
            onMessage: (m) => {
                if (m.type === 'piece') queue.push(m.text), notify();
            },
        }).then(
            (r) => {
                this.stats = r.stats;
                // aborted: the reply is the text handed out before the abort (the next turn passes
                // the conversation whole, so the session's cache reuses what it shares with it)
                const reply = controller.signal.aborted ? shown : r.text;
                if (reply !== r.text) this.stats = { ...r.stats, stop: 'abort' };
                this.#history = [...messages.filter((m) => m.role !== 'system'), { role: 'assistant', content: reply }];
                done = true;
                notify();
            },
            (e) => {
                failure = e;
                done = true;
                notify();
            },
        );
        try {
            for (;;) {
                if (controller.signal.aborted) break; // no piece after the abort
                if (queue.length) {
                    const piece = queue.shift();
                    shown += piece;
                    yield piece;
                    continue;
                }
                if (done) break;
                await new Promise((r) => (wake = r));
                wake = null;
            }
            await finished;
            if (failure) throw failure;
        } finally {
            // a loop left early (break, throw) stops the reply; the session stays usable
            if (!done) {
                controller.abort();
                await finished;
            }
        }
    }

    // LoRA adapters (llama.cpp's GGUF adapters, docs/lora.md) applied to every call from now on:
    // [{ url | data, scale = 1 }, ...], each added (not merged: switching is instant, no reload);
    // [] removes them. An adapter that does not fit the model rejects, naming the tensor, and
    // the adapters in force stay. The KV cache was computed without them: the next call
    // prefills its prompt whole. Resolves to the number of adapters in force.
    async setLoras(loras = []) {
        if (!Array.isArray(loras)) throw new TypeError('setLoras takes an array of { url | data, scale }');
        const list = [];
        for (const a of loras) list.push({ bytes: await adapterBytes(a), scale: a.scale ?? 1 });
        return this.#request('setLoras', { loras: list }, { transfer: list.map((a) => a.bytes.buffer) });
    }

    // Forgets the conversation (the KV cache is kept: a new one reuses what it shares).
    async resetChat() {
        this.#history = [];
        this.#system = undefined;
        await this.#request('resetChat', {});
    }

    // text -> ids (BOS where the model's file says so; opts.parseSpecial reads "<|im_start|>" as its id)
    async tokenize(text, opts = {}) {
        return Int32Array.from(await this.#request('tokenize', { text, ...pick(opts, ['addSpecial', 'parseSpecial']) }));
    }

    // ids -> text (opts.skipSpecial leaves out BOS, EOS and other control tokens)
    async detokenize(ids, opts = {}) {
        return this.#request('detokenize', { ids: Array.from(ids), skipSpecial: !!opts.skipSpecial });
    }

    // A test hook: destroys the GPU device the model runs on now, between two steps of a reply
    // in progress if there is one, as a GPU reset or a driver crash would lose it (docs/web.md,
    // "a lost device"). A no-op on the CPU.
    testLoseDevice() {
        this.#worker?.postMessage({ op: 'testLoseDevice' });
    }

    // Frees the model, its contexts and the worker; the object is unusable after. The worker is
    // terminated once it answers, or after FREE_WAIT_MS when it does not (it may be stuck on
    // the GPU): terminating it frees everything it held anyway.
    async free() {
        if (!this.#worker) return;
        let timer = 0;
        try {
            await Promise.race([this.#request('free', {}), new Promise((resolve) => (timer = setTimeout(resolve, FREE_WAIT_MS)))]);
        } finally {
            clearTimeout(timer);
            this.#worker.terminate();
            this.#worker = null;
        }
    }
}
