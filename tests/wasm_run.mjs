// wasm_run.mjs — runs one wasm32-wasi test program under Node's WASI and exits with its status.
//
//   node tests/wasm_run.mjs build-wasm/tests/test_gguf.wasm [args...]
//
// The file system the program sees, so the same relative paths work as natively:
//   /      the repository root (read-write); the working directory is "/", so
//          "tests/data/x.gguf" opens <repo>/tests/data/x.gguf
//   /tmp   a fresh host temporary directory, removed afterwards; TMPDIR=/tmp
// argv[0] is the test's name (test_gguf); the environment holds TMPDIR, PWD=/ and the
// host's CI and LEAN_* variables, nothing else.
//
// LEAN_DAWN_NODE=PATH puts the Dawn of a dawn.node addon (npm's webgpu package:
// scripts/setup_dawn_node.sh) behind navigator.gpu, made with LEAN_DAWN_FLAGS (its create()
// options, space-separated, e.g. "enable-dawn-features=vulkan_enable_f16_on_nvidia", the
// toggle that lets Dawn grant shader-f16 on NVIDIA); Deno loads such addons. Its adapter is
// asked for as the program asks, then, if none, at the compatibility level (OpenGL ES).
//
// Exit status: the program's own (main's return or exit()); 134 when it traps
// (abort(), unreachable, out-of-bounds memory, stack overflow), with the trap on stderr.
// Needs Node >= 18 (WASI preview1 without flags from Node 20; on 18 pass
// --experimental-wasi-unstable-preview1).
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import process from 'node:process';
import { fileURLToPath } from 'node:url';

// Node prints "ExperimentalWarning: WASI is an experimental feature" once per run; in a
// suite of many programs it is noise. Every other warning still goes through.
const emitWarning = process.emitWarning;
process.emitWarning = function (warning, ...rest) {
    const text = typeof warning === 'string' ? warning : String(warning?.message ?? '');
    if (text.includes('WASI')) return;
    return emitWarning.call(process, warning, ...rest);
};
const { WASI } = await import('node:wasi');
if (process.env.LEAN_DAWN_NODE) {
    const { createRequire } = await import('node:module');
    const { create } = createRequire(import.meta.url)(path.resolve(process.env.LEAN_DAWN_NODE));
    const dawn = create((process.env.LEAN_DAWN_FLAGS ?? '').split(' ').filter(Boolean));
    const request = dawn.requestAdapter.bind(dawn);
    dawn.requestAdapter = async (o) => (await request(o)) ?? request({ ...o, featureLevel: 'compatibility' });
    globalThis.navigator ??= {};
    Object.defineProperty(globalThis.navigator, 'gpu', { value: dawn, configurable: true });
}
const { leanWebGPU } = await import('../web/webgpu_imports.mjs');

const [file, ...args] = process.argv.slice(2);
if (!file) {
    process.stderr.write('usage: node tests/wasm_run.mjs TEST.wasm [args...]\n');
    process.exit(2);
}
const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const name = path.basename(file).replace(/\.wasm$/, '');

const env = { TMPDIR: '/tmp', PWD: '/' };
for (const [k, v] of Object.entries(process.env)) {
    if (k === 'CI' || k.startsWith('LEAN_')) env[k] = v;
}

const tmp = mkdtempSync(path.join(os.tmpdir(), `lean-${name}-`));
let status;
try {
    const wasi = new WASI({
        version: 'preview1',
        args: [name, ...args],
        env,
        preopens: { '/': repoRoot, '/tmp': tmp },
        returnOnExit: true,
    });
    const module = await WebAssembly.compile(readFileSync(file));
    const gpu = leanWebGPU({ pump: false }); // main cannot be called again after LEAN_PENDING
    const imports = { ...wasi.getImportObject(), ...gpu.imports };
    if (!gpu.jspi) {
        const instance = await WebAssembly.instantiate(module, imports);
        gpu.setMemory(instance.exports.memory);
        status = wasi.start(instance);
    } else {
        // WebGPU with JSPI: the program may suspend (src/gpu/web.c), so its entry runs through
        // WebAssembly.promising, and its exit comes as our own proc_exit's exception (WASI's
        // start() would see a pending promise). start() gets a stand-in with a no-op entry:
        // it only hands the memory to the WASI functions.
        class Exit {
            constructor(code) {
                this.code = code;
            }
        }
        const preview1 = { ...imports.wasi_snapshot_preview1, proc_exit: (code) => { throw new Exit(code); } };
        const instance = await WebAssembly.instantiate(module, { ...imports, wasi_snapshot_preview1: preview1 });
        gpu.setMemory(instance.exports.memory);
        wasi.start({ exports: { memory: instance.exports.memory, _start() {} } });
        try {
            await WebAssembly.promising(instance.exports._start)();
            status = 0;
        } catch (e) {
            if (!(e instanceof Exit)) throw e;
            status = e.code;
        }
    }
} catch (e) {
    // The stack, cut short: a stack overflow would print every frame.
    const trace = String(e && e.stack ? e.stack : e).split('\n');
    const more = trace.length > 24 ? `\n    ... ${trace.length - 24} more frames` : '';
    process.stderr.write(`${name}: trapped: ${trace.slice(0, 24).join('\n')}${more}\n`);
    status = 134;
} finally {
    rmSync(tmp, { recursive: true, force: true });
}
process.exitCode = status;
