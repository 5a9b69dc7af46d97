// web_trace.mjs — imported for its effect by scripts/bench_web_worker.mjs when LEAN_WEB_TRACE=1
// (bench_web.mjs --trace): counts, inside the worker, what each generate() does per id it hands
// out, and prints one line per generate to stderr:
//   imp.NAME   wasm -> JS calls of each import (web/webgpu_imports.mjs, WASI, lean_web)
//   exp.NAME   JS -> wasm calls of each export (expP.: through WebAssembly.promising, JSPI)
//   gpu.NAME   navigator.gpu calls: queue submit / writeBuffer / onSubmittedWorkDone, mapAsync,
//              error scopes, and the recording submit_list replays (encoders, copies, passes,
//              setPipeline, setBindGroup, dispatchWorkgroups: the host's work per step)
//   timer.NAME setTimeout (by delay), setInterval (the map nudge's timer), setImmediate (the
//              polls dawn.node makes while a request is open)
// and times: ms per id inside submit_list (its replay of a step's recording and the submit)
// and inside queue.submit (the difference: the host's recording work), inside wasm calls (the
// pump only: under JSPI a call's time includes its waits), each mapAsync's time to resolve,
// and from a map resolving to the next call into wasm (the host's latency in picking a
// read-back up).
// Installed before lean_worker.js's first line runs, so every object it makes is counted.
import process from 'node:process';

if (process.env.LEAN_WEB_TRACE === '1') {
    const counts = new Map();
    const inc = (k) => counts.set(k, (counts.get(k) ?? 0) + 1);
    const t = { inWasm: 0, mapMs: 0, maps: 0, pickup: 0, pickups: 0 };
    let resolvedAt = 0; // when the last map resolved, until a call into wasm picks it up
    const enter = () => {
        if (!resolvedAt) return;
        t.pickup += performance.now() - resolvedAt;
        t.pickups++;
        resolvedAt = 0;
    };

    for (const name of ['setTimeout', 'setInterval', 'setImmediate']) {
        const f = globalThis[name];
        if (typeof f !== 'function') continue;
        globalThis[name] = function (cb, ms, ...rest) {
            inc(`timer.${name}${name === 'setTimeout' ? `(${ms ?? 0})` : ''}`);
            return f.call(this, cb, ms, ...rest);
        };
    }

    // an own property shadows the prototype's (dawn.node's methods are not writable there)
    const ms = new Map(); // the time inside the calls timed: submit_list, queue.submit
    const timed = (key, f, self, a) => {
        const t0 = performance.now();
        try {
            return f.apply(self, a);
        } finally {
            ms.set(key, (ms.get(key) ?? 0) + performance.now() - t0);
        }
    };
    const count = (o, name, key) => {
        const f = o[name];
        Object.defineProperty(o, name, { configurable: true, writable: true, value(...a) {
            inc(key);
            return key === 'gpu.submit' ? timed(key, f, this, a) : f.apply(this, a);
        } });
    };
    const gpu = globalThis.navigator?.gpu;
    if (gpu) {
        const requestAdapter = gpu.requestAdapter.bind(gpu);
        gpu.requestAdapter = async (o) => {
            const a = await requestAdapter(o);
            if (!a) return a;
            const requestDevice = a.requestDevice.bind(a);
            a.requestDevice = async (desc) => {
                const d = await requestDevice(desc);
                for (const m of ['submit', 'writeBuffer', 'onSubmittedWorkDone']) count(d.queue, m, `gpu.${m}`);
                for (const m of ['pushErrorScope', 'popErrorScope']) count(d, m, `gpu.${m}`);
                const createCommandEncoder = d.createCommandEncoder.bind(d);
                d.createCommandEncoder = (ed) => {
                    inc('gpu.createCommandEncoder');
                    const e = createCommandEncoder(ed);
                    count(e, 'copyBufferToBuffer', 'gpu.copyBufferToBuffer');
                    const beginComputePass = e.beginComputePass.bind(e);
                    e.beginComputePass = (pd) => {
                        inc('gpu.beginComputePass');
                        const pass = beginComputePass(pd);
                        for (const m of ['setPipeline', 'setBindGroup', 'dispatchWorkgroups'])
                            count(pass, m, `gpu.${m}`);
                        return pass;
                    };
                    return e;
                };
                const createBuffer = d.createBuffer.bind(d);
                d.createBuffer = (bd) => {
                    const b = createBuffer(bd);
                    const mapAsync = b.mapAsync;
                    Object.defineProperty(b, 'mapAsync', { configurable: true, value(...x) {
                        inc('gpu.mapAsync');
                        const t0 = performance.now();
                        return mapAsync.apply(this, x).then((r) => {
                            resolvedAt = performance.now();
                            t.mapMs += resolvedAt - t0;
                            t.maps++;
                            return r;
                        });
                    } });
                    return b;
                };
                return d;
            };
            return a;
        };
    }

    // every import counted; exports counted (and timed, where they are not JSPI's: a promising
    // export must stay the wasm function itself)
    const instantiate = WebAssembly.instantiate;
    WebAssembly.instantiate = async (bytes, imports) => {
        for (const o of Object.values(imports))
            for (const [k, f] of Object.entries(o))
                if (typeof f === 'function')
                    o[k] = k === 'submit_list' ? (...a) => (inc(`imp.${k}`), timed(`imp.${k}`, f, null, a))
                                               : (...a) => (inc(`imp.${k}`), f(...a));
        const r = await instantiate(bytes, imports);
        if (typeof WebAssembly.Suspending === 'function') return r;
        const exports = {};
        for (const [k, f] of Object.entries(r.instance.exports))
            exports[k] = typeof f !== 'function' ? f : (...a) => {
                inc(`exp.${k}`);
                enter();
                const t0 = performance.now();
                try {
                    return f(...a);
                } finally {
                    t.inWasm += performance.now() - t0;
                }
            };
        return { module: r.module, instance: { exports } };
    };
    const promising = WebAssembly.promising;
    if (promising)
        WebAssembly.promising = (f) => {
            const p = promising(f);
            return (...a) => (inc(`expP.${f.name}`), enter(), p(...a));
        };

    const postMessage = self.postMessage.bind(self);
    self.postMessage = (m, ...rest) => {
        const n = m?.ok && m.result?.ids && m.result.stats?.nGenerated;
        if (n > 2) {
            const per = Object.fromEntries([...counts].sort().map(([k, v]) => [k, +(v / n).toFixed(2)]));
            const inside = [...ms].map(([k, v]) => `${k} ${(v / n).toFixed(3)}`).join(', ');
            const rate = m.result.stats.decodeTokensPerSecond.toFixed(1);
            console.error(`web_trace: per id (${n} ids, decode ${rate} ids/s): ${JSON.stringify(per)}; ` +
                `ms per id in ${inside}; in wasm ${(t.inWasm / n).toFixed(3)} ms/id (pump only); ` +
                `${t.maps} maps, ${(t.mapMs / Math.max(t.maps, 1)).toFixed(2)} ms each to resolve; ` +
                `resolved to picked up ${(t.pickup / Math.max(t.pickups, 1)).toFixed(3)} ms (${t.pickups})`);
        }
        if (m?.ok) {
            counts.clear();
            ms.clear();
            Object.assign(t, { inWasm: 0, mapMs: 0, maps: 0, pickup: 0, pickups: 0 });
        }
        return postMessage(m, ...rest);
    };
}
