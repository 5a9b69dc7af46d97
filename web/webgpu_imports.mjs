// webgpu_imports.mjs — the "lean_webgpu" imports of the wasm32 build (src/gpu/web.c): lean's
// webgpu.h calls, made with navigator.gpu.
//
// Only numbers cross: C passes strings as (pointer, byte count) into the wasm memory and
// 64-bit sizes as doubles; objects are ids into `objects` (0 = none). Asynchronous calls
// return a future id; C waits on it with future_wait, then reads its status (1 = success),
// value (an object id, or an error type) and message.
//
//   const gpu = leanWebGPU();
//   const instance = await WebAssembly.instantiate(module, { ...other, ...gpu.imports });
//   gpu.setMemory(instance.exports.memory);
//
// Two ways to wait (gpu.jspi says which this host has):
// - JSPI (WebAssembly.Suspending): future_wait suspends the wasm stack until the promise
//   settles; call the exports that may wait through WebAssembly.promising.
// - No JSPI (Safari): future_wait only looks, and a lean.h call that would wait returns
//   LEAN_PENDING (9) instead (include/lean.h): await gpu.settle(), then make the same call
//   again with the same arguments, until it returns something else:
//       while ((st = exports.f(...args)) === 9) await gpu.settle();
// Abort: gpu.interrupt() ends every wait on a buffer map at once (JSPI: that call returns
// LEAN_PENDING, having drawn nothing; the pump: settle() resolves) until gpu.resume(); then end
// the generation (lean_gen_end drops the maps in flight without waiting for the GPU's work).
//
// A host that cannot make a call again (a WASI command's main: tests/wasm_run.mjs) passes
// { pump: false }: without JSPI it then gets no instance, as without navigator.gpu. Then every
// import is still there, and `why` says what is missing: C reports no WebGPU, and the program
// runs on the CPU.

const ERROR_TYPE = { GPUValidationError: 2, GPUOutOfMemoryError: 3, GPUInternalError: 4 };
const errorType = (e) => ERROR_TYPE[e?.constructor?.name] ?? 5; // WGPUErrorType
const FILTERS = [undefined, 'validation', 'out-of-memory', 'internal']; // WGPUErrorFilter
const POWER = [undefined, 'low-power', 'high-performance']; // WGPUPowerPreference
const UNSET = 0xffffffff; // a query index C leaves out
// Firefox (ESR 153) resolves a pending mapAsync ~100 ms late unless the queue sees more work; an
// empty command buffer submitted every MAP_NUDGE_MS while the map waits makes it 2-3 ms
// (docs/runs/2026-12-05-firefox-map-nudge.md). Other hosts resolve a map once the GPU is done,
// and a timer submitting there is only noise in the step loop (a suspect in the H200's decode
// stalls: docs/runs/2026-12-05-browser-gpu-h200.md), so a device is nudged only once a map on
// it has waited MAP_NUDGE_AFTER_MS (past any decode block of a fast GPU); a device whose maps
// then resolve within MAP_LAZY_MS of the first nudge MAP_LAZY_SEEN times in a row is one that
// needs it, and every later map on it is nudged from its start, as every map is in Firefox,
// whose need was measured. One such map proves nothing: a 40-46 ms prefill (smollm2-1.7b's
// pp128 on an H100) ends there by chance (docs/runs/2026-12-06-web-pump.md).
const MAP_NUDGE_MS = 2;
const MAP_NUDGE_AFTER_MS = 40;
const MAP_LAZY_MS = 3 * MAP_NUDGE_MS;
const MAP_LAZY_SEEN = 3;
const LAZY_HOST = /Firefox\//.test(globalThis.navigator?.userAgent ?? '');

export function leanWebGPU({ pump = true } = {}) {
    const gpu = globalThis.navigator?.gpu;
    const jspi = typeof WebAssembly.Suspending === 'function' && typeof WebAssembly.promising === 'function';
    const usable = !!gpu && (jspi || pump);
    let memory = null;
    const objects = new Map(); // id -> GPU object
    const meta = new Map(); // id -> what C needs beside it (device events, a buffer's mapping)
    const futures = new Map(); // id -> { settled, status, value, message, done }
    const nudged = new Map(); // device -> { active: its maps nudged, since, nudges, quick: quick maps in a row, lazy }
    let nudging = 0, nudge = null; // maps being nudged, on any device; the timer while there are
    const blocking = new Set(); // without JSPI: the futures C looked at unsettled (settle() waits for them)
    let interrupted = false; // interrupt(): waits on maps end now
    const waiters = new Set(); // what wakes the waits under way that interrupt() cuts short
    let nextId = 1;
    let device = { features: [], limits: {} }; // the next requestDevice's descriptor
    let entries = []; // the next bind group's entries
    const commands = []; // submit's list, reused
    let unread = 0; // submits since the last read of a mapped range (stepsUnread)

    const add = (o) => {
        if (o === null || o === undefined) return 0;
        const id = nextId++;
        objects.set(id, o);
        return id;
    };
    const get = (id) => objects.get(id);
    const bytes = (ptr, len) => new Uint8Array(memory.buffer, ptr, len);
    const decoder = new TextDecoder(), encoder = new TextEncoder();
    const str = (ptr, len) => (ptr && len ? decoder.decode(bytes(ptr, len)) : undefined);
    // writes s (UTF-8) at ptr, at most cap bytes (nul: and a NUL after, within cap); returns its length
    const put = (s, ptr, cap, nul = false) => {
        const b = encoder.encode(s ?? '');
        const n = Math.min(b.length, nul ? cap - 1 : cap);
        if (ptr && n > 0) bytes(ptr, n).set(b.subarray(0, n));
        if (ptr && nul && cap > 0) bytes(ptr + n, 1)[0] = 0;
        return b.length;
    };
    const size = (v) => (v < 0 ? undefined : v); // -1: the whole buffer
    // a future for promise p, which resolves to { status, value, message }
    const future = (p) => {
        const f = { settled: false, status: 0, value: 0, message: '' };
        f.done = Promise.resolve(p).then(
            (r) => Object.assign(f, { status: 1, value: 0, message: '' }, r, { settled: true }),
            (e) => Object.assign(f, { settled: true, status: 3, value: 0, message: String(e?.message ?? e) }),
        );
        const id = nextId++;
        futures.set(id, f);
        return id;
    };

    const nudgeAll = () => {
        for (const [dev, n] of nudged) {
            if (!n.active) continue;
            n.nudges++;
            try {
                dev.queue.submit([dev.createCommandEncoder().finish()]);
            } catch {
                // a lost device: its map fails on its own
            }
        }
    };
    // while promise p (a map on device d) is unsettled, nudges d's queue: from the start on a
    // lazy device, else once it has waited MAP_NUDGE_AFTER_MS (MAP_NUDGE_MS says why)
    const nudgeWhile = (d, p) => {
        let n = nudged.get(d);
        if (!n) nudged.set(d, (n = { active: 0, since: 0, nudges: 0, quick: 0, lazy: LAZY_HOST }));
        let active = false;
        const begin = () => {
            active = true;
            if (n.active++ === 0) (n.since = performance.now()), (n.nudges = 0);
            if (nudging++ === 0) nudge = setInterval(nudgeAll, MAP_NUDGE_MS);
        };
        const timer = n.lazy ? (begin(), null) : setTimeout(begin, MAP_NUDGE_AFTER_MS);
        const done = () => {
            clearTimeout(timer);
            // settled before any nudge: this host needs none, so the run of quick maps is broken
            if (!active) return void (n.quick = 0);
            // resolved right after the nudges began, again and again: this host waits for queue activity
            if (n.nudges > 0) n.quick = performance.now() - n.since <= MAP_LAZY_MS ? n.quick + 1 : 0;
            if (n.quick >= MAP_LAZY_SEEN) n.lazy = true;
            n.active--;
            if (--nudging === 0) clearInterval(nudge), (nudge = null);
        };
        p.then(done, done);
        return p;
    };

    // JSPI's wait: 1 settled, 0 not within ms, 2 a map's wait cut short by interrupt(); a settled
    // future answers at once, without suspending
    const wait = (id, ms) => {
        const f = futures.get(id);
        if (!f || f.settled) return 1;
        if (interrupted && f.map) return 2;
        return waitLong(f, ms);
    };
    const waitLong = async (f, ms) => {
        let timer, wakeUp;
        await new Promise((r) => {
            wakeUp = r;
            timer = setTimeout(r, Math.min(ms, 2 ** 31 - 1));
            f.done.then(r);
            if (f.map) waiters.add(r);
        });
        clearTimeout(timer);
        waiters.delete(wakeUp);
        return f.settled ? 1 : interrupted && f.map ? 2 : 0;
    };

    const imports = {
        why(buf, cap) {
            const why = !gpu ? 'navigator.gpu is missing' : !usable ? 'no JSPI (WebAssembly.Suspending), no pump' : '';
            return why ? put(why, buf, cap) : 0;
        },
        jspi: () => (jspi ? 1 : 0),
        instance_create: () => (usable ? add({}) : 0),
        request_adapter: (power, fallback) =>
            future(
                gpu.requestAdapter({ powerPreference: POWER[power], forceFallbackAdapter: !!fallback }).then((a) =>
                    a ? { value: add(a) } : { status: 3, message: 'navigator.gpu.requestAdapter found no adapter' },
                ),
            ),
        // without JSPI, only a look: C returns LEAN_PENDING and is called again after settle()
        future_wait: jspi
            ? new WebAssembly.Suspending(wait)
            : (id) => (futures.get(id)?.settled === false ? (blocking.add(id), 0) : 1),
        future_status: (id) => futures.get(id)?.status ?? 3,
        future_value: (id) => futures.get(id)?.value ?? 0,
        future_message: (id, buf, cap) => put(futures.get(id)?.message, buf, cap),
        future_free: (id) => void futures.delete(id),
        adapter_info(id, field, buf, cap) {
            const a = get(id);
            const info = a?.info ?? {};
            // the adapter's name: Deno's device is a number, its description the name; Chromium
            // gives neither (SwiftShader: vendor "google", architecture "swiftshader")
            const name = (/^\d*$/.test(info.device ?? '') ? info.description : info.device) ||
                         [info.vendor, info.architecture].filter(Boolean).join(' ');
            switch (field) {
                case 0: return put(info.vendor, buf, cap);
                case 1: return put(info.architecture, buf, cap);
                case 2: return put(name, buf, cap);
                case 3: return put(name === info.description ? '' : info.description, buf, cap);
                case 4: return a?.isFallbackAdapter || info.isFallbackAdapter ? 1 : 0;
                case 5: return info.subgroupMinSize ?? 0;
                case 6: return info.subgroupMaxSize ?? 0;
                default: return 0;
            }
        },
        limit: (id, name, len) => get(id)?.limits?.[str(name, len)] ?? -1,
        // Every device here is core level: lean never asks for a compatibility adapter in JS.
        wgsl_feature: (name, len) => (navigator.gpu.wgslLanguageFeatures?.has(str(name, len)) ? 1 : 0),
        has_feature: (id, name, len) =>
            str(name, len) === 'core-features-and-limits' || get(id)?.features?.has(str(name, len)) ? 1 : 0,
        device_begin: () => void (device = { features: [], limits: {} }),
        device_feature: (name, len) => void device.features.push(str(name, len)),
        device_limit: (name, len, v) => void (device.limits[str(name, len)] = v),
        request_device(adapter, label, len) {
            const a = get(adapter);
            const requiredLimits = {};
            for (const [k, v] of Object.entries(device.limits)) if (k in a.limits) requiredLimits[k] = v;
            const desc = { label: str(label, len), requiredFeatures: device.features, requiredLimits };
            return future(
                a.requestDevice(desc).then((d) => {
                    const id = add(d);
                    const m = { events: [], destroyed: false };
                    meta.set(id, m);
                    d.lost.then((info) => {
                        if (!m.destroyed) m.events.push([1, info.reason === 'destroyed' ? 2 : 1, info.message]);
                    });
                    d.onuncapturederror = (e) => m.events.push([2, errorType(e.error), e.error?.message]);
                    return { value: id };
                }),
            );
        },
        device_event(id, code, buf, cap) {
            const e = meta.get(id)?.events.shift();
            if (!e) return 0;
            new Uint32Array(memory.buffer, code, 1)[0] = e[1];
            put(e[2], buf, cap, true);
            return e[0];
        },
        device_queue: (id) => add(get(id).queue),
        create_buffer(dev, usage, size, mapped, label, len) {
            const id = add(get(dev).createBuffer({ usage, size, mappedAtCreation: !!mapped, label: str(label, len) }));
            if (id) meta.set(id, { device: get(dev) });
            return id;
        },
        create_shader: (dev, code, len, label, llen) =>
            add(get(dev).createShaderModule({ code: str(code, len), label: str(label, llen) })),
        create_pipeline: (dev, module, entry, len, label, llen) =>
            add(
                get(dev).createComputePipeline({
                    label: str(label, llen),
                    layout: 'auto',
                    compute: { module: get(module), entryPoint: str(entry, len) },
                }),
            ),
        bind_entry: (binding, buffer, offset, sz) =>
            void entries.push({ binding, resource: { buffer: get(buffer), offset, size: size(sz) } }),
        create_bind_group(dev, layout, label, len) {
            const desc = { layout: get(layout), entries, label: str(label, len) };
            entries = [];
            return add(get(dev).createBindGroup(desc));
        },
        push_scope: (dev, filter) => get(dev).pushErrorScope(FILTERS[filter]),
        pop_scope: (dev) =>
            future(
                get(dev)
                    .popErrorScope()
                    .then((e) => ({ value: e ? errorType(e) : 1, message: e?.message ?? '' })),
            ),
        create_query_set: (dev, count) => add(get(dev).createQuerySet({ type: 'timestamp', count })),
        destroy(id) {
            const m = meta.get(id);
            if (m) m.destroyed = true; // a device: C reports the loss itself
            get(id)?.destroy?.();
        },
        release: (id) => void (objects.delete(id), meta.delete(id)),
        write_buffer: (q, buf, offset, data, sz) => get(q).writeBuffer(get(buf), offset, memory.buffer, data, sz),
        // A submit's command buffers, recorded by web.c as words (its "command lists"), replayed
        // here in one call: an op, then its operands (ids; 64-bit values as low, high words);
        // the small queue writes made since the last submit come first (WRITE).
        submit_list(q, ptr, n) {
            const w = new Uint32Array(memory.buffer, ptr, n);
            const u64 = (i) => w[i] + w[i + 1] * 2 ** 32;
            let enc = null, pass = null, k = 0;
            for (let i = 0; i < n; ) {
                switch (w[i]) {
                    case 1: // ENCODER device
                        enc = get(w[i + 1]).createCommandEncoder();
                        i += 2;
                        break;
                    case 2: { // PASS query-set begin end (query set 0: untimed)
                        const qs = w[i + 1], b = w[i + 2], e = w[i + 3];
                        pass = enc.beginComputePass(
                            qs
                                ? {
                                      timestampWrites: {
                                          querySet: get(qs),
                                          beginningOfPassWriteIndex: b === UNSET ? undefined : b,
                                          endOfPassWriteIndex: e === UNSET ? undefined : e,
                                      },
                                  }
                                : undefined,
                        );
                        i += 4;
                        break;
                    }
                    case 3: // PIPELINE id
                        pass.setPipeline(get(w[i + 1]));
                        i += 2;
                        break;
                    case 4: // BIND group id
                        pass.setBindGroup(w[i + 1], get(w[i + 2]));
                        i += 3;
                        break;
                    case 5: // DISPATCH x y z
                        pass.dispatchWorkgroups(w[i + 1], w[i + 2], w[i + 3]);
                        i += 4;
                        break;
                    case 6: // END_PASS
                        pass.end();
                        pass = null;
                        i += 1;
                        break;
                    case 7: // COPY src offset dst offset size
                        enc.copyBufferToBuffer(get(w[i + 1]), u64(i + 2), get(w[i + 4]), u64(i + 5), u64(i + 7));
                        i += 9;
                        break;
                    case 8: // RESOLVE set first count dst offset
                        enc.resolveQuerySet(get(w[i + 1]), w[i + 2], w[i + 3], get(w[i + 4]), u64(i + 5));
                        i += 7;
                        break;
                    case 9: // FINISH
                        commands[k++] = enc.finish();
                        enc = null;
                        i += 1;
                        break;
                    case 10: // WRITE buffer offset bytes data (web.c's held writes: before the submit, in order)
                        get(q).writeBuffer(get(w[i + 1]), u64(i + 2), memory.buffer, ptr + 4 * (i + 5), w[i + 4]);
                        i += 5 + Math.ceil(w[i + 4] / 4);
                        break;
                    default:
                        throw new Error(`submit: no op ${w[i]} (word ${i} of ${n})`);
                }
            }
            commands.length = k;
            unread++;
            get(q).submit(commands);
            commands.fill(undefined); // the command buffers are spent: nothing kept alive
        },
        work_done: (q) => future(get(q).onSubmittedWorkDone()),
        map_read(buf, offset, sz) {
            const m = meta.get(buf) ?? {};
            Object.assign(m, { mapOffset: offset, mapSize: size(sz), range: null });
            meta.set(buf, m);
            const p = get(buf).mapAsync(1 /* GPUMapMode.READ */, offset, size(sz));
            const id = future(m.device ? nudgeWhile(m.device, p) : p);
            futures.get(id).map = true; // interrupt() cuts its waits short
            m.future = id;
            return id;
        },
        // WebGPU hands out a mapped range once (ranges may not overlap): the whole mapping is
        // taken at the first copy and kept until unmap.
        mapped_copy(buf, offset, sz, dst) {
            const m = meta.get(buf);
            if (m?.mapOffset === undefined) return 0; // not mapped
            m.range ??= get(buf).getMappedRange(m.mapOffset, m.mapSize);
            bytes(dst, sz).set(new Uint8Array(m.range, offset - m.mapOffset, sz));
            unread = 0;
            return 1;
        },
        unmap(buf) {
            const m = meta.get(buf);
            if (m) m.range = m.mapOffset = undefined; // no copies until the next map
            // a pending map this aborts answers at once: its wait is never cut short
            const f = futures.get(m?.future);
            if (f) f.map = false;
            get(buf).unmap();
        },
        bind_group_layout: (p, group) => add(get(p).getBindGroupLayout(group)),
    };
    // A call that throws (wgpu throws where Dawn records an error: an unmap on a lost device)
    // must not trap the program: it returns 0 and its error goes to every open device as an
    // uncaptured internal error, which fails the context with the message (device.c).
    for (const [name, fn] of Object.entries(imports)) {
        if (typeof fn !== 'function' || name === 'future_wait') continue;
        // fixed arity (6 at most is used): no arguments array made per call
        imports[name] = (a, b, c, d, x, y) => {
            try {
                return fn(a, b, c, d, x, y);
            } catch (e) {
                for (const m of meta.values()) m.events?.push([2, 4, `${name}: ${e?.message ?? e}`]);
                return 0;
            }
        };
    }
    return {
        imports: { lean_webgpu: imports },
        jspi: !!gpu && jspi,
        setMemory(m) {
            memory = m;
        },
        // A test hook (lean_worker.js 'testLoseDevice'): destroys every device made here, as a
        // GPU reset would lose it; lean learns of it at its next wait, as of any loss.
        loseDevices() {
            for (const [id, m] of meta) if (m.events && !m.destroyed) get(id)?.destroy();
        },
        // The pump: resolves once every request the last call found unanswered has settled
        // (every request in flight, if it found none), so the call, made again, gets further.
        // Only those: the steps a generation keeps in flight behind the one it waits for stay
        // in flight. Never rejects: a failed request is an answer C reads.
        // An interrupt() resolves it at once.
        async settle() {
            const ids = [...blocking];
            blocking.clear();
            const open = (ids.length ? ids.map((id) => futures.get(id)) : [...futures.values()]).filter(
                (f) => f && !f.settled,
            );
            if (interrupted) return;
            let wakeUp;
            await new Promise((r) => {
                wakeUp = r;
                waiters.add(r);
                Promise.all(open.map((f) => f.done)).then(r);
            });
            waiters.delete(wakeUp);
        },
        // Abort (web/lean_worker.js): every wait on a buffer map, under way or to come, ends
        // unanswered (JSPI: C's wait returns LEAN_PENDING; the pump: settle() resolves), until
        // resume(). The maps stay in flight: lean_gen_end drops them.
        interrupt() {
            interrupted = true;
            for (const r of waiters) r();
            waiters.clear();
        },
        resume() {
            interrupted = false;
        },
        get interrupted() {
            return interrupted;
        },
        // Submits since the last read-back: at the end of a reply, the steps the GPU ran (or
        // still runs) ahead that nobody read: a stop cannot recall them, the next call waits
        // behind them (lean_worker.js: stats.gpuStepsUnread; src/gpu/forward.c, gen_pace).
        get stepsUnread() {
            return unread;
        },
    };
}
