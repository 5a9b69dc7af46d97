// threads.mjs — lean's threaded wasm build (make wasm-mt; make web's lean-mt.wasm) on all cores:
// one shared memory, the main instance, and host threads (Web Workers, or Node's
// worker_threads) that run the CPU kernels' pool chunks (src/cpu/pool.c). Same bits for any
// thread count: the pool's chunks do not depend on which thread runs them.
//
//   import { instantiateThreaded } from './threads.mjs';
//   const bytes = await (await fetch('lean-mt.wasm')).arrayBuffer();
//   const { instance, memory, threads, terminate } = await instantiateThreaded(bytes, imports, { threads: 4 });
//   wasi.setMemory(memory);           // your WASI shim and lean_webgpu imports: memory is not exported
//   instance.exports._initialize?.(); // a reactor; a command's _start runs main
//   ...                               // lean_ctx_params.n_threads 0 = every thread started here
//   terminate();                      // ends the host threads (the instance is unusable after)
//
// bytes     the threaded build's .wasm (ArrayBuffer / typed array): its import section says how
//           large the shared memory must start (the module imports env.memory).
// imports   the main instance's import object, without env.memory and lean_thread (added here).
// options   threads: the thread count, the caller included (default: cpus); threads - 1 host
//           threads are started. cpus: the machine's CPUs (default navigator.hardwareConcurrency,
//           else 1); with more threads than CPUs the pool sleeps instead of spinning.
//           hostImports: URL of an ES module whose hostImports({ memory, module })
//           returns import functions a chunk may call on a host thread (tests: WASI for
//           nanosleep); every other import there is a stub that throws, since the library's
//           chunks call nothing outside the module.
//           onStage: called with 'compile' and then 'threads' as the work moves on (a caller's
//           progress report). startTimeout: ms a host thread has to say it is ready
//           (default THREAD_START_MS).
// Resolves once every host thread has instantiated the module; each starts serving (waiting
// inside wasm: memory.atomic.wait32) when the library first wants threads. Rejects if a
// worker fails to start, or is not ready within startTimeout (the caller then runs on one
// thread). Firefox's Worker constructor itself can block the caller's thread for good, where no
// timer here runs: lean.js restarts such a start (docs/runs/2026-12-06-browser-thread-start.md).
//
// Needs cross-origin isolation in a page (crossOriginIsolated, SharedArrayBuffer) and a
// caller off the page's main thread: the caller waits with memory.atomic.wait, which a page's
// main thread may not do. Run it in a dedicated Worker (lean_worker.js) or under Node.
// A TextDecoder does not decode views of a SharedArrayBuffer: a WASI shim copies first.

const WORKER_URL = new URL('./lean_thread_worker.js', import.meta.url);
const THREAD_START_MS = 30_000;

// env.memory's limits in the module's import section: { initial, maximum, shared } in pages.
export function memoryImport(bytes) {
    const b = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes.buffer ?? bytes, bytes.byteOffset ?? 0,
        bytes.byteLength);
    let at = 8; // magic, version
    const leb = () => {
        let v = 0, shift = 0, byte;
        do {
            byte = b[at++];
            v += (byte & 0x7f) * 2 ** shift;
            shift += 7;
        } while (byte & 0x80);
        return v;
    };
    const name = () => {
        const n = leb();
        at += n;
        return new TextDecoder().decode(b.subarray(at - n, at));
    };
    const limits = () => {
        const flags = b[at++];
        const initial = leb();
        return { initial, maximum: flags & 1 ? leb() : undefined, shared: (flags & 2) !== 0 };
    };
    while (at < b.length) {
        const id = b[at++], size = leb(), end = at + size;
        if (id !== 2) { // not the import section
            at = end;
            continue;
        }
        for (let n = leb(); n > 0; n--) {
            const mod = name(), field = name(), kind = b[at++];
            if (kind === 0) leb(); // function: type index
            else if (kind === 1) at++, limits(); // table: element type, limits
            else if (kind === 3) at += 2; // global: value type, mutability
            else if (kind === 2) {
                const l = limits();
                if (mod === 'env' && field === 'memory') return l;
            } else break;
        }
        break;
    }
    throw new Error('threads.mjs: the module imports no env.memory (not the threaded build: make wasm-mt)');
}

// A Worker running lean_thread_worker.js: the page's (or Deno's) Worker, else Node's.
async function startWorker() {
    if (typeof Worker !== 'undefined') {
        const w = new Worker(WORKER_URL, { type: 'module' });
        return {
            post: (m) => w.postMessage(m),
            on: (f) => {
                w.onmessage = (e) => f(e.data);
                w.onerror = (e) => f({ error: e.message ?? String(e) });
            },
            terminate: () => w.terminate(),
        };
    }
    const { Worker: NodeWorker } = await import('node:worker_threads');
    const w = new NodeWorker(WORKER_URL);
    w.unref(); // host threads never end: they must not keep Node's process alive
    return {
        post: (m) => w.postMessage(m),
        on: (f) => {
            w.on('message', f);
            w.on('error', (e) => f({ error: String(e?.stack ?? e) }));
        },
        terminate: () => w.terminate(),
    };
}

export async function instantiateThreaded(bytes, imports, options = {}) {
    if (typeof document !== 'undefined' && typeof WorkerGlobalScope === 'undefined')
        throw new Error("threads.mjs: a page's main thread may not wait (memory.atomic.wait): run lean in a Worker");
    const cpus = Math.max(1, options.cpus ?? globalThis.navigator?.hardwareConcurrency ?? 1);
    const threads = Math.max(1, Math.floor(options.threads ?? cpus));
    const limits = memoryImport(bytes);
    if (!limits.shared) throw new Error('threads.mjs: env.memory is not shared (not the threaded build)');
    const memory = new WebAssembly.Memory({ initial: limits.initial, maximum: limits.maximum, shared: true });
    options.onStage?.('compile');
    const module = await WebAssembly.compile(bytes);
    options.onStage?.('threads');
    const hostImports = options.hostImports ? String(options.hostImports) : null;
    const workers = [];
    const terminate = () => workers.forEach((w) => w.terminate());
    try {
        // threads - 1 workers instantiate the module and wait for lean_thread.start
        await Promise.all(Array.from({ length: threads - 1 }, async (_, index) => {
            const w = await startWorker();
            workers.push(w);
            const ms = options.startTimeout ?? THREAD_START_MS;
            let timer;
            await new Promise((resolve, reject) => {
                timer = setTimeout(() => reject(new Error(`lean host thread ${index} did not start in ${ms / 1000} s`)), ms);
                w.on((m) => {
                    if (m?.ready) resolve();
                    else if (m?.error) reject(new Error(`lean host thread ${index}: ${m.error}`));
                });
                w.post({ module, memory, hostImports });
            }).finally(() => clearTimeout(timer));
        }));
    } catch (e) {
        terminate();
        throw e;
    }
    // src/cpu/pool.c calls these on the thread that owns the context, the first time it wants
    // threads; start posts each worker its stack and entry (the worker runs it at once, while
    // this thread goes on inside wasm)
    const leanThread = {
        count: () => workers.length,
        cpus: () => cpus,
        start: (n, at, serve) => {
            const tops = new Uint32Array(memory.buffer, at >>> 0, n);
            for (let i = 0; i < n; i++) workers[i].post({ stackTop: tops[i], index: i, serve });
        },
    };
    const instance = await WebAssembly.instantiate(module, {
        ...imports, env: { ...imports.env, memory }, lean_thread: leanThread,
    });
    return { instance, module, memory, threads, terminate };
}
