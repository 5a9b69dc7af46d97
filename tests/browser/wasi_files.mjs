// wasi_files.mjs — web/wasi.mjs's WASI with what a test program needs besides: its arguments
// and environment, and files, so that the wasm32 test programs (build-wasm/tests) run in a page
// as under tests/wasm_run.mjs. One directory is preopened, "/", the repository root, which is
// the working directory: "tests/shaders/argmax.wgsl" opens the repository's file.
//
//   const wasi = wasiFiles({ args: ['test_gpu_ops'], env: { TMPDIR: '/tmp' }, readFile });
//   // imports: wasi.imports; after instantiating: wasi.setMemory(instance.exports.memory)
//
// readFile(path): the bytes of the repository's file at path (relative, no "." or ".."
// parts), or null when there is none; called once a path, synchronously (program.html fetches
// with a synchronous XMLHttpRequest). Files the program writes (under /tmp, say) live in this
// page's memory only, as do writes to files read; unlink and rename act on them there. Output
// to stdout and stderr goes to the console, line by line (web/wasi.mjs).
import { wasiImports } from '/wasi.mjs';

const ESUCCESS = 0, EBADF = 8, EEXIST = 20, EINVAL = 28, EISDIR = 31, ENOENT = 44, ENOTDIR = 54;
const DIR = 3, FILE = 4;                       // WASI filetypes
const O_CREAT = 1, O_DIRECTORY = 2, O_EXCL = 4, O_TRUNC = 8, FD_APPEND = 1;
const ROOT = 3;                                // the preopened directory's fd
const ALL_RIGHTS = 0x1fffffffn;

export function wasiFiles({ args = [], env = {}, readFile }) {
    const base = wasiImports();
    let memory = null;
    const view = () => new DataView(memory.buffer);
    const u8 = () => new Uint8Array(memory.buffer);
    const encoder = new TextEncoder(), decoder = new TextDecoder();
    const files = new Map(); // path -> { data: Uint8Array, size } (null: read, and none there)
    const fds = new Map();   // fd -> { path, pos, append }
    let nextFd = ROOT + 1;

    const str = (ptr, len) => decoder.decode(u8().slice(ptr, ptr + len));
    // path relative to the root, normalized; null when it leaves the root
    const resolve = (ptr, len) => {
        const parts = [];
        for (const p of str(ptr, len).split('/')) {
            if (p === '' || p === '.') continue;
            if (p === '..') { if (!parts.length) return null; parts.pop(); } else parts.push(p);
        }
        return parts.join('/');
    };
    const lookup = (path) => {
        if (!files.has(path)) {
            const data = readFile(path);
            files.set(path, data ? { data, size: data.length } : null);
        }
        return files.get(path);
    };
    const isDir = (path) => path === '' || [...files.keys()].some((k) => files.get(k) && k.startsWith(path + '/'));
    const grow = (f, size) => {
        if (size > f.data.length) {
            const d = new Uint8Array(Math.max(size, 2 * f.data.length));
            d.set(f.data.subarray(0, f.size));
            f.data = d;
        }
        f.size = Math.max(f.size, size);
    };
    // strings: [bytes] into a pointer array and a buffer, as args_get and environ_get fill them
    const strings = (list, ptrs, buf) => {
        for (const s of list) {
            const b = encoder.encode(s + '\0');
            view().setUint32(ptrs, buf, true);
            u8().set(b, buf);
            ptrs += 4;
            buf += b.length;
        }
        return ESUCCESS;
    };
    const sizes = (list, count, size) => {
        view().setUint32(count, list.length, true);
        view().setUint32(size, list.reduce((n, s) => n + encoder.encode(s).length + 1, 0), true);
        return ESUCCESS;
    };
    const envList = Object.entries(env).map(([k, v]) => `${k}=${v}`);
    const filestat = (buf, type, size) => {
        u8().fill(0, buf, buf + 64);
        view().setUint8(buf + 16, type);
        view().setBigUint64(buf + 24, 1n, true);
        view().setBigUint64(buf + 32, BigInt(size), true);
        return ESUCCESS;
    };

    const own = {
        args_sizes_get: (count, size) => sizes(args, count, size),
        args_get: (ptrs, buf) => strings(args, ptrs, buf),
        environ_sizes_get: (count, size) => sizes(envList, count, size),
        environ_get: (ptrs, buf) => strings(envList, ptrs, buf),
        fd_prestat_get(fd, buf) {
            if (fd !== ROOT) return EBADF;
            view().setUint8(buf, 0);
            view().setUint32(buf + 4, 1, true);
            return ESUCCESS;
        },
        fd_prestat_dir_name(fd, ptr, len) {
            if (fd !== ROOT || len < 1) return EBADF;
            u8()[ptr] = 0x2f; // "/"
            return ESUCCESS;
        },
        fd_fdstat_get(fd, buf) {
            if (fd !== ROOT && !fds.has(fd)) return base.imports.wasi_snapshot_preview1.fd_fdstat_get(fd, buf);
            u8().fill(0, buf, buf + 24);
            view().setUint8(buf, fd === ROOT ? DIR : FILE);
            view().setBigUint64(buf + 8, ALL_RIGHTS, true);
            view().setBigUint64(buf + 16, ALL_RIGHTS, true);
            return ESUCCESS;
        },
        fd_fdstat_set_flags: (fd) => (fds.has(fd) ? ESUCCESS : EBADF),
        path_open(dirfd, dirflags, ptr, len, oflags, rightsBase, rightsInheriting, fdflags, out) {
            if (dirfd !== ROOT) return EBADF;
            const path = resolve(ptr, len);
            if (path === null) return ENOENT;
            if (oflags & O_DIRECTORY || path === '') return isDir(path) ? ENOTDIR : ENOENT; // no directory fds
            let f = lookup(path);
            if (f && oflags & O_CREAT && oflags & O_EXCL) return EEXIST;
            if (!f) {
                if (!(oflags & O_CREAT)) return isDir(path) ? EISDIR : ENOENT;
                f = { data: new Uint8Array(0), size: 0 };
                files.set(path, f);
            }
            if (oflags & O_TRUNC) f.size = 0;
            const fd = nextFd++;
            fds.set(fd, { path, pos: 0, append: !!(fdflags & FD_APPEND) });
            view().setUint32(out, fd, true);
            return ESUCCESS;
        },
        fd_close: (fd) => (fds.delete(fd) ? ESUCCESS : EBADF),
        fd_read(fd, iovs, n, nread) {
            const h = fds.get(fd);
            if (!h) return base.imports.wasi_snapshot_preview1.fd_read(fd, iovs, n, nread);
            const f = files.get(h.path);
            let total = 0;
            for (let i = 0; i < n; i++) {
                const ptr = view().getUint32(iovs + 8 * i, true), len = view().getUint32(iovs + 8 * i + 4, true);
                const k = Math.max(0, Math.min(len, f.size - h.pos));
                u8().set(f.data.subarray(h.pos, h.pos + k), ptr);
                h.pos += k;
                total += k;
                if (k < len) break;
            }
            view().setUint32(nread, total, true);
            return ESUCCESS;
        },
        fd_write(fd, iovs, n, nwritten) {
            const h = fds.get(fd);
            if (!h) return base.imports.wasi_snapshot_preview1.fd_write(fd, iovs, n, nwritten);
            const f = files.get(h.path);
            if (h.append) h.pos = f.size;
            let total = 0;
            for (let i = 0; i < n; i++) {
                const ptr = view().getUint32(iovs + 8 * i, true), len = view().getUint32(iovs + 8 * i + 4, true);
                grow(f, h.pos + len);
                f.data.set(u8().subarray(ptr, ptr + len), h.pos);
                h.pos += len;
                total += len;
            }
            view().setUint32(nwritten, total, true);
            return ESUCCESS;
        },
        fd_seek(fd, offset, whence, out) {
            const h = fds.get(fd);
            if (!h) return base.imports.wasi_snapshot_preview1.fd_seek(fd, offset, whence, out);
            const from = [0, h.pos, files.get(h.path).size][whence];
            const pos = from === undefined ? -1 : from + Number(offset);
            if (pos < 0) return EINVAL;
            h.pos = pos;
            view().setBigUint64(out, BigInt(pos), true);
            return ESUCCESS;
        },
        fd_tell(fd, out) {
            const h = fds.get(fd);
            if (!h) return EBADF;
            view().setBigUint64(out, BigInt(h.pos), true);
            return ESUCCESS;
        },
        fd_filestat_get(fd, buf) {
            if (fd === ROOT) return filestat(buf, DIR, 0);
            const h = fds.get(fd);
            return h ? filestat(buf, FILE, files.get(h.path).size) : EBADF;
        },
        path_filestat_get(dirfd, flags, ptr, len, buf) {
            if (dirfd !== ROOT) return EBADF;
            const path = resolve(ptr, len);
            if (path === null) return ENOENT;
            const f = path === '' ? null : lookup(path);
            return f ? filestat(buf, FILE, f.size) : isDir(path) ? filestat(buf, DIR, 0) : ENOENT;
        },
        path_unlink_file(dirfd, ptr, len) {
            const path = dirfd === ROOT ? resolve(ptr, len) : null;
            if (path === null || !lookup(path)) return ENOENT;
            files.set(path, null);
            return ESUCCESS;
        },
        path_rename(fd1, p1, l1, fd2, p2, l2) {
            const from = fd1 === ROOT ? resolve(p1, l1) : null, to = fd2 === ROOT ? resolve(p2, l2) : null;
            if (from === null || to === null || !lookup(from)) return ENOENT;
            files.set(to, files.get(from));
            files.set(from, null);
            return ESUCCESS;
        },
        path_remove_directory: () => ENOENT, // no directories of its own
    };
    // own first, then web/wasi.mjs's (output, clocks, random bytes, exit; ENOSYS for the rest)
    const preview1 = Object.assign(Object.create(base.imports.wasi_snapshot_preview1), own);
    return {
        imports: { wasi_snapshot_preview1: preview1 },
        setMemory(m) {
            memory = m;
            base.setMemory(m);
        },
    };
}
