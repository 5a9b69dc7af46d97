// wasm_start.mjs — how a wasm32-wasi test program's main runs beside lean's WebGPU imports
// (web/webgpu_imports.mjs), for every JavaScript host the tests have: tests/wasm_run.mjs (Node's
// WASI, or Deno's) and tests/browser/program.html (tests/browser/wasi_files.mjs in Chromium).
//
//   const status = await startProgram(module, imports, gpu, wasi);
//
// imports: the WASI imports (wasi_snapshot_preview1) and gpu.imports; gpu: leanWebGPU({ pump:
// false }); wasi.start(instance): hands the WASI functions the instance's memory, calls its
// _start and returns the exit status (Node's WASI.start with returnOnExit does both). Resolves
// to the program's exit status (main's return or exit()'s); a trap is thrown.
export async function startProgram(module, imports, gpu, wasi) {
    if (!gpu.jspi) {
        const instance = await WebAssembly.instantiate(module, imports);
        gpu.setMemory(instance.exports.memory);
        return wasi.start(instance) ?? 0;
    }
    // WebGPU with JSPI: the program may suspend (src/gpu/web.c), so its entry runs through
    // WebAssembly.promising, and its exit comes as our own proc_exit's exception (a WASI
    // start() would see a pending promise). start() gets a stand-in with a no-op entry: it only
    // hands the memory to the WASI functions. The other WASI functions are looked up through
    // the prototype, so a host that answers any name (a Proxy) still does.
    class Exit {
        constructor(code) {
            this.code = code;
        }
    }
    const preview1 = Object.assign(Object.create(imports.wasi_snapshot_preview1), {
        proc_exit: (code) => { throw new Exit(code); },
    });
    const instance = await WebAssembly.instantiate(module, { ...imports, wasi_snapshot_preview1: preview1 });
    gpu.setMemory(instance.exports.memory);
    wasi.start({ exports: { memory: instance.exports.memory, _start() {} } });
    try {
        await WebAssembly.promising(instance.exports._start)();
        return 0;
    } catch (e) {
        if (!(e instanceof Exit)) throw e;
        return e.code;
    }
}
