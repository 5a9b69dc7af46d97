// wasm_run.mjs — runs one wasm32-wasi test program under Node's WASI and exits with its status.
//
//   node tests/wasm_run.mjs build-wasm/tests/test_gguf.wasm [args...]
//   node tests/wasm_run.mjs --threads 4 build-wasm-mt/tests/test_cpu_backend.wasm [args...]
//   deno run -A tests/wasm_run.mjs --count-imports build-wasm/lean.wasm bench --backend gpu ...
//
// --count-imports: at exit, how many times each lean_webgpu import was called, on stderr
// ("imports: NAME COUNT ..."): the JavaScript crossings of the GPU path
// (docs/runs/2026-12-05-browser-abort.md counts them per decode step).
//
// A threaded program (make wasm-mt: it imports a shared env.memory) runs through
// web/threads.mjs with --threads N threads, the caller included (default: this machine's CPUs);
// its host threads are Node worker_threads.
//
// The file system the program sees, so the same relative paths work as natively:
//   /      the repository root (read-write); the working directory is "/", so
//          "tests/data/x.gguf" opens <repo>/tests/data/x.gguf
//   /tmp   a fresh host temporary directory, removed afterwards; TMPDIR=/tmp
// argv[0] is the test's name (test_gguf); the environment holds TMPDIR, PWD=/ and the
// host's CI and LEAN_* variables, nothing else.
//
// LEAN_DAWN_NODE=PATH puts the Dawn of a dawn.node addon (npm's webgpu package:
// scripts/setup_dawn_node.sh) behind navigator.gpu, made with LEAN_DAWN_FLAGS (tests/dawn_node.mjs).
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
await import('./dawn_node.mjs'); // navigator.gpu from LEAN_DAWN_NODE, when set
const { leanWebGPU } = await import('../web/webgpu_imports.mjs');
const { startProgram } = await import('./wasm_start.mjs');

let argv = process.argv.slice(2), threads;
const countImports = argv[0] === '--count-imports';
if (countImports) argv = argv.slice(1);
if (argv[0] === '--threads') {
    threads = Number(argv[1]);
    argv = argv.slice(2);
}
const [file, ...args] = argv;
if (!file || (threads !== undefined && !(threads >= 1))) {
    process.stderr.write('usage: node tests/wasm_run.mjs [--threads N] TEST.wasm [args...]\n');
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
    const bytes = readFileSync(file);
    const module = await WebAssembly.compile(bytes);
    const gpu = leanWebGPU({ pump: false }); // main cannot be called again after LEAN_PENDING
    const calls = {};
    if (countImports) {
        const lw = gpu.imports.lean_webgpu;
        for (const [k, f] of Object.entries(lw))
            if (typeof f === 'function') lw[k] = (...a) => ((calls[k] = (calls[k] ?? 0) + 1), f(...a));
        process.on('exit', () => process.stderr.write(`imports: ${Object.entries(calls).map((e) => e.join(' ')).join(' ')}\n`));
    }
    const imports = { ...wasi.getImportObject(), ...gpu.imports };
    const shared = WebAssembly.Module.imports(module).some((i) => i.module === 'env' && i.name === 'memory');
    if (shared) {
        // CPU only: host threads cannot suspend, so this path has no JSPI (GPU programs are
        // not built threaded). WASI's start() wants the memory as an export: a stand-in.
        const { instantiateThreaded } = await import('../web/threads.mjs');
        const t = await instantiateThreaded(bytes, imports, {
            threads, cpus: os.availableParallelism(), hostImports: new URL('./wasm_host_imports.mjs', import.meta.url),
        });
        gpu.setMemory(t.memory);
        try {
            status = wasi.start({ exports: { memory: t.memory, _start: t.instance.exports._start } });
        } finally {
            t.terminate();
        }
    } else {
        status = await startProgram(module, imports, gpu, wasi);
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
