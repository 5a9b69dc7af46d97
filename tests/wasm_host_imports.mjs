// wasm_host_imports.mjs — what a host thread of a threaded test program may call (WASI: a test's
// pool chunk may sleep or yield), for web/threads.mjs's hostImports option (tests/wasm_run.mjs).
// Nothing is preopened: chunks open no files.
const emitWarning = process.emitWarning; // the same filter as wasm_run.mjs: WASI's warning is noise
process.emitWarning = function (warning, ...rest) {
    const text = typeof warning === 'string' ? warning : String(warning?.message ?? '');
    if (text.includes('WASI')) return;
    return emitWarning.call(process, warning, ...rest);
};
const { WASI } = await import('node:wasi');

export function hostImports({ memory }) {
    const wasi = new WASI({ version: 'preview1', returnOnExit: true });
    const imports = wasi.getImportObject();
    // binds the WASI functions to the memory; the program's own _start runs on the main thread
    wasi.start({ exports: { memory, _start() {} } });
    return imports;
}
