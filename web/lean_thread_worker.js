// lean_thread_worker.js — one host thread of lean's threaded wasm build (started by threads.mjs).
// Gets { module, memory, hostImports }: instantiates the module over the shared memory and says
// { ready: true }. Then { stackTop, index, serve }, posted when the library first wants threads
// (src/cpu/pool.c): moves its __stack_pointer to its own stack (every instance starts on the
// main instance's) and calls the function at table index serve, the pool's host loop, which
// never returns. Valid as a module Worker in a page and as a Node worker_threads script (either
// module system: no static import, no require).

(async () => {
    // Deno has Node's process global in its Web Workers too: a Worker scope means the Web's port.
    const node = typeof WorkerGlobalScope === 'undefined' && typeof process !== 'undefined' && !!process.versions?.node;
    const port = node ? (await import('node:worker_threads')).parentPort : globalThis;
    const fs = node ? await import('node:fs') : null;
    // A trap here leaves the main thread waiting for chunks inside wasm, with its event loop
    // blocked: say why on stderr at once, not through a message it cannot read.
    const fail = (e) => {
        const text = `lean host thread: ${e?.stack ?? e}\n`;
        if (fs) fs.writeSync(2, text);
        else console.error(text);
        port.postMessage({ error: String(e?.message ?? e) });
    };
    let instance;
    const onMessage = async (m) => {
        try {
            if (!instance) { // { module, memory, hostImports }: instantiate
                const { module, memory, hostImports } = m;
                const given = hostImports ? (await import(hostImports)).hostImports({ memory, module }) : {};
                const imports = {};
                for (const { module: mod, name, kind } of WebAssembly.Module.imports(module)) {
                    imports[mod] ??= {};
                    if (mod === 'env' && name === 'memory') imports[mod][name] = memory;
                    else if (kind === 'function') {
                        imports[mod][name] = given[mod]?.[name] ?? (() => {
                            throw new Error(`a host thread called ${mod}.${name}, which only the main thread has`);
                        });
                    }
                }
                instance = await WebAssembly.instantiate(module, imports);
                port.postMessage({ ready: true });
                return;
            }
            // { stackTop, index, serve }: the pool's loop, on this thread's own stack; never returns
            const { stackTop, index, serve } = m;
            instance.exports.__stack_pointer.value = stackTop;
            instance.exports.__indirect_function_table.get(serve)(index);
            throw new Error(`host thread ${index}: its loop returned`);
        } catch (e) {
            fail(e);
        }
    };
    if (node) port.on('message', onMessage);
    else {
        globalThis.onmessage = (e) => onMessage(e.data);
        // a message that cannot be read here (the module or the shared memory) would otherwise
        // leave threads.mjs waiting for a ready that never comes
        globalThis.onmessageerror = () => fail(new Error('a message from the main thread could not be read'));
    }
})();
