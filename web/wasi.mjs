// wasi.mjs — the few WASI preview1 calls lean.wasm (a reactor: no main, no files) makes, for a
// browser or any JavaScript host: output to the console, clocks, random bytes; no arguments, no
// environment, no files (EBADF), the rest ENOSYS. The library itself prints nothing and opens
// nothing in the browser build; these are what wasi-libc links in.
//
//   const wasi = wasiImports();
//   const instance = await WebAssembly.instantiate(module, { ...wasi.imports, ...others });
//   wasi.setMemory(instance.exports.memory);
//   instance.exports._initialize();

const ESUCCESS = 0, EBADF = 8, ENOSYS = 52;

export class WasiExit extends Error {
    constructor(code) {
        super(`lean.wasm exited with status ${code}`);
        this.code = code;
    }
}

export function wasiImports() {
    let memory = null;
    const view = () => new DataView(memory.buffer);
    const decoder = new TextDecoder();
    const lines = { 1: '', 2: '' }; // text written to stdout / stderr, until its newline
    const sink = { 1: (s) => console.log(s), 2: (s) => console.error(s) };

    const fns = {
        args_sizes_get(argc, bufSize) {
            view().setUint32(argc, 0, true);
            view().setUint32(bufSize, 0, true);
            return ESUCCESS;
        },
        args_get: () => ESUCCESS,
        environ_sizes_get(count, bufSize) {
            view().setUint32(count, 0, true);
            view().setUint32(bufSize, 0, true);
            return ESUCCESS;
        },
        environ_get: () => ESUCCESS,
        clock_res_get(id, out) {
            view().setBigUint64(out, 1000n, true);
            return ESUCCESS;
        },
        // 0 realtime, else monotonic (the process clocks too): nanoseconds
        clock_time_get(id, precision, out) {
            const ms = id === 0 ? Date.now() : performance.timeOrigin + performance.now();
            view().setBigUint64(out, BigInt(Math.round(ms * 1e6)), true);
            return ESUCCESS;
        },
        random_get(buf, len) {
            // getRandomValues fills at most 65536 bytes at a time, and not a shared buffer's view
            for (let off = 0; off < len; off += 65536) {
                const n = Math.min(65536, len - off);
                const tmp = new Uint8Array(n);
                crypto.getRandomValues(tmp);
                new Uint8Array(memory.buffer, buf + off, n).set(tmp);
            }
            return ESUCCESS;
        },
        fd_write(fd, iovs, iovsLen, nwritten) {
            if (fd !== 1 && fd !== 2) return EBADF;
            const v = view();
            let total = 0;
            for (let i = 0; i < iovsLen; i++) {
                const ptr = v.getUint32(iovs + 8 * i, true), len = v.getUint32(iovs + 8 * i + 4, true);
                // a copy: TextDecoder refuses views of a shared memory (the threaded build)
                lines[fd] += decoder.decode(new Uint8Array(memory.buffer, ptr, len).slice());
                total += len;
            }
            const parts = lines[fd].split('\n');
            lines[fd] = parts.pop();
            for (const line of parts) sink[fd](line);
            v.setUint32(nwritten, total, true);
            return ESUCCESS;
        },
        fd_fdstat_get: (fd) => (fd <= 2 ? ENOSYS : EBADF),
        fd_close: () => EBADF,
        fd_seek: () => EBADF,
        fd_read: () => EBADF,
        fd_prestat_get: () => EBADF,
        fd_prestat_dir_name: () => EBADF,
        path_open: () => EBADF,
        sched_yield: () => ESUCCESS,
        proc_exit(code) {
            throw new WasiExit(code);
        },
    };
    // anything else wasi-libc might link in answers ENOSYS
    const preview1 = new Proxy(fns, { get: (o, name) => (name in o ? o[name] : () => ENOSYS) });
    return {
        imports: { wasi_snapshot_preview1: preview1 },
        setMemory(m) {
            memory = m;
        },
    };
}
