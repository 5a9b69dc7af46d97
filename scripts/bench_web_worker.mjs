// bench_web_worker.mjs — build-web/'s lean_worker.js with navigator.gpu taken from npm's Dawn for
// Node (tests/dawn_node.mjs, LEAN_DAWN_NODE) before the worker's first line runs: the Worker
// scripts/bench_web.mjs starts in lean_worker.js's place, so lean.js and the worker run
// unchanged. Static imports, evaluated in order, so the worker's onmessage is set before this
// module's evaluation ends and no message of Lean.load's is missed. With LEAN_WEB_TRACE=1
// (bench_web.mjs --trace) web_trace.mjs counts the worker's calls first.
import '../tests/dawn_node.mjs';
import './web_trace.mjs';
import '../build-web/lean_worker.js';
