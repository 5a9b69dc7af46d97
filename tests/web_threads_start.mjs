// web_threads_start.mjs — web/threads.mjs never waits for ever on a host thread that does not
// start (docs/runs/2026-12-05-browser-load-hang.md): under Node's worker_threads, one whose
// hostImports module never finishes loading makes instantiateThreaded reject within its
// startTimeout, naming the thread, and a normal start still resolves.
//
//   node tests/web_threads_start.mjs [build-web/lean-mt.wasm]    (any threaded build: make web)
// Prints "ok ..." / "FAIL ..." per check, then "web_threads_start: N passed, N failed"; exit status 1 on a failure.
import { readFileSync } from 'node:fs';
import { instantiateThreaded } from '../web/threads.mjs';
import { wasiImports } from '../web/wasi.mjs';

let passed = 0, failed = 0;
const check = (ok, what, why = '') => {
    if (ok) passed++, console.log(`ok   ${what}`);
    else failed++, console.log(`FAIL ${what}${why ? ': ' + why : ''}`);
};
const bytes = readFileSync(process.argv[2] ?? 'build-web/lean-mt.wasm');
// a program's imports (WASI), stubbed past what instantiation needs: nothing here runs it
const imports = () => {
    const o = { ...wasiImports().imports };
    for (const { module, name, kind } of WebAssembly.Module.imports(new WebAssembly.Module(bytes)))
        if (kind === 'function' && module !== 'lean_thread') (o[module] ??= {})[name] ??= () => 0;
    return o;
};

// a hostImports module whose top-level await never settles: the host thread never says ready
const never = 'data:text/javascript,await new Promise(() => {});';
let r;
try {
    r = await instantiateThreaded(bytes, imports(), { threads: 2, hostImports: never, startTimeout: 500 });
} catch (e) {
    r = e;
}
check(r instanceof Error && /lean host thread 0 did not start in 0.5 s/.test(r.message),
      `a host thread that never starts: '${r?.message}'`, r instanceof Error ? r.message : 'it resolved');
r = null;
try {
    r = await instantiateThreaded(bytes, imports(), { threads: 2, startTimeout: 60_000 });
    check(r.threads === 2, `a normal start: ${r.threads} threads`);
} catch (e) {
    check(false, 'a normal start', e.message);
} finally {
    r?.terminate?.();
}
console.log(`web_threads_start: ${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
