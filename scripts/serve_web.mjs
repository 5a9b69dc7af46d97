#!/usr/bin/env node
// serve_web.mjs — a static file server for the browser build (build-web/), for development
// and the browser tests. No dependencies: Node's http, fs, path and zlib only.
//
//   node scripts/serve_web.mjs [--root DIR] [--port N] [--host H] [--mount /PREFIX=DIR]... [--cut /PREFIX=DIR]...
//                              [--plain /PREFIX=DIR]... [--chunked /PREFIX=DIR]... [--gzip /PREFIX=DIR]...
//                              [--chunked-cut /PREFIX=DIR]... [--gzip-cut /PREFIX=DIR]... [--quiet]
//
//   --root DIR            the folder served at / (default build-web)
//   --port N              the port (default 8080; 0 = any free port)
//   --host H              the address to bind (default 127.0.0.1: this machine only)
//   --mount /PREFIX=DIR   also serve DIR under /PREFIX/, e.g. --mount /models=build/fixtures
//                         for the test models; repeatable; the longest prefix wins
//   --cut /PREFIX=DIR     as --mount, but each file is a download cut short: the whole file's
//                         Content-Length, half its bytes, then the connection closed (the
//                         browser tests' truncated download)
//   --plain /PREFIX=DIR   as --mount, but without the cross-origin isolation headers below: a
//                         page served there has no SharedArrayBuffer (the browser tests' page
//                         on the single-threaded CPU rung, e.g. --plain /plain=build-web)
//   --chunked /PREFIX=DIR as --mount, but without a Content-Length (chunked transfer): a body
//                         whose size the browser learns only at its end
//   --gzip /PREFIX=DIR    as --chunked, the body gzip-encoded (Content-Encoding: gzip)
//   --chunked-cut /PREFIX=DIR, --gzip-cut /PREFIX=DIR  as --chunked and --gzip, but half the
//                         file's bytes, ended as if whole (a download of unknown size cut short)
//                         (these four ignore Range: the whole file, 200)
//   --quiet               no line per request
//
// Prints "serving ROOT at http://127.0.0.1:PORT/" once listening (the tests read the URL
// from that line), then one line per request unless --quiet. Ctrl-C (SIGINT/SIGTERM) stops it.
//
// Every response (but --plain's) carries the headers that make a page cross-origin isolated, which is what
// SharedArrayBuffer (the threaded CPU build) needs: Cross-Origin-Opener-Policy: same-origin
// and Cross-Origin-Embedder-Policy: require-corp, plus Cross-Origin-Resource-Policy:
// same-origin so the page's own fetches (the worker, the .wasm, models) pass require-corp.
// WebGPU needs a secure context: http://127.0.0.1 is one, a file: URL is not.
// MIME types matter: WebAssembly.instantiateStreaming insists on application/wasm, and
// module scripts and workers on a JavaScript type. GET and HEAD; one byte range per request
// ("Range: bytes=A-B", "A-", "-N") answered 206, an unsatisfiable one 416; anything outside
// the served folders (.. or a link out of them) is 404. Files are streamed, never read whole
// (a model can be gigabytes).
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';

const MIME = {
    '.html': 'text/html; charset=utf-8',
    '.js': 'text/javascript; charset=utf-8',
    '.mjs': 'text/javascript; charset=utf-8',
    '.css': 'text/css; charset=utf-8',
    '.json': 'application/json; charset=utf-8',
    '.wasm': 'application/wasm',
    '.wgsl': 'text/plain; charset=utf-8',
    '.txt': 'text/plain; charset=utf-8',
    '.md': 'text/plain; charset=utf-8',
    '.svg': 'image/svg+xml',
    '.png': 'image/png',
    '.ico': 'image/x-icon',
    '.webmanifest': 'application/manifest+json',
    '.gguf': 'application/octet-stream',
};

// usage(msg): with msg, the error and the usage line (exit 2); without (--help), this file's
// opening comment (exit 0).
function usage(msg) {
    if (msg) {
        process.stderr.write(`serve_web: ${msg}\nusage: node scripts/serve_web.mjs [--root DIR] [--port N] ` +
                             '[--host H] [--mount /PREFIX=DIR]... [--cut /PREFIX=DIR]... [--plain /PREFIX=DIR]... [--chunked /PREFIX=DIR]... ' +
                             '[--gzip /PREFIX=DIR]... [--chunked-cut /PREFIX=DIR]... [--gzip-cut /PREFIX=DIR]... [--quiet]\n');
        process.exit(2);
    }
    const self = fs.readFileSync(new URL(import.meta.url), 'utf8').split('\n');
    const doc = self.slice(1, self.findIndex((l) => !l.startsWith('//') && l !== self[0]));
    process.stdout.write(doc.map((l) => l.replace(/^\/\/ ?/, '')).join('\n') + '\n');
    process.exit(0);
}

const UNSIZED = ['--chunked', '--gzip', '--chunked-cut', '--gzip-cut']; // bodies without a Content-Length

function parseArgs(argv) {
    const o = { root: 'build-web', port: 8080, host: '127.0.0.1', mounts: [], quiet: false };
    for (let i = 0; i < argv.length; i++) {
        const a = argv[i];
        const val = () => (i + 1 < argv.length ? argv[++i] : usage(`${a} needs a value`));
        if (a === '--root') o.root = val();
        else if (a === '--port') {
            o.port = Number(val());
            if (!Number.isInteger(o.port) || o.port < 0 || o.port > 65535) usage('--port: 0..65535');
        } else if (a === '--host') o.host = val();
        else if (['--mount', '--cut', '--plain', ...UNSIZED].includes(a)) {
            const m = /^(\/[^=]*)=(.+)$/.exec(val());
            if (!m) usage(`${a} takes /PREFIX=DIR`);
            o.mounts.push({ prefix: m[1].replace(/\/+$/, ''), dir: m[2], cut: a === '--cut', plain: a === '--plain',
                            unsized: UNSIZED.includes(a) ? a.slice(2) : null });
        } else if (a === '--quiet') o.quiet = true;
        else if (a === '-h' || a === '--help') usage();
        else usage(`unknown argument '${a}'`);
    }
    return o;
}

// resolve(mounts, urlPath): { file, cut, plain, unsized }, the file a URL path names and whether its
// mount is --cut or --plain (unsized: 'chunked', 'gzip', 'chunked-cut', 'gzip-cut' or null), or null when it lies outside every served folder. Mounts are sorted longest prefix
// first; the root is the mount ''.
function resolve(mounts, urlPath) {
    for (const { prefix, dir, cut, plain, unsized } of mounts) {
        if (urlPath !== prefix && !urlPath.startsWith(prefix + '/')) continue;
        const rel = urlPath.slice(prefix.length) || '/';
        const file = path.resolve(dir, '.' + rel);
        // Also through links: the real path must stay inside the real folder.
        let real;
        try { real = fs.realpathSync(file); } catch { return null; }
        const base = fs.realpathSync(dir);
        if (real !== base && !real.startsWith(base + path.sep)) return null;
        return { file: real, cut: Boolean(cut), plain: Boolean(plain), unsized: unsized ?? null };
    }
    return null;
}

// range(header, size): {start, end} (inclusive) for one "bytes=" range, null for no usable
// Range header (serve it all), or 'bad' when it cannot be satisfied.
function range(header, size) {
    if (!header) return null;
    const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
    if (!m || (m[1] === '' && m[2] === '')) return null; // several ranges or junk: the whole file
    let start, end;
    if (m[1] === '') { // the last N bytes
        const n = Number(m[2]);
        if (n === 0) return 'bad';
        start = Math.max(0, size - n);
        end = size - 1;
    } else {
        start = Number(m[1]);
        end = m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1);
    }
    if (start >= size || start > end) return 'bad';
    return { start, end };
}

const opts = parseArgs(process.argv.slice(2));
for (const d of [opts.root, ...opts.mounts.map((m) => m.dir)]) {
    if (!fs.existsSync(d) || !fs.statSync(d).isDirectory()) usage(`'${d}' is not a folder`);
}
const mounts = [...opts.mounts, { prefix: '', dir: opts.root }]
    .sort((a, b) => b.prefix.length - a.prefix.length);

const server = http.createServer((req, res) => {
    const isolation = {
        'Cross-Origin-Opener-Policy': 'same-origin',
        'Cross-Origin-Embedder-Policy': 'require-corp',
        'Cross-Origin-Resource-Policy': 'same-origin',
        'Cache-Control': 'no-cache', // development: always the file as it is now
    };
    const done = (status, headers, body) => {
        res.writeHead(status, { ...isolation, ...headers });
        res.end(req.method === 'HEAD' ? undefined : body);
        if (!opts.quiet) console.log(`${status} ${req.method} ${req.url}`);
    };
    const text = (status, msg) => done(status, { 'Content-Type': 'text/plain; charset=utf-8',
                                                 'Content-Length': Buffer.byteLength(msg) }, msg);
    if (req.method !== 'GET' && req.method !== 'HEAD') {
        res.setHeader('Allow', 'GET, HEAD');
        return text(405, 'only GET and HEAD\n');
    }
    let urlPath;
    try { urlPath = decodeURIComponent(new URL(req.url, 'http://x').pathname); } catch {
        return text(400, 'bad URL\n');
    }
    if (urlPath.includes('\0')) return text(400, 'bad URL\n');
    const found = resolve(mounts, urlPath);
    if (found?.plain) for (const h of ['Cross-Origin-Opener-Policy', 'Cross-Origin-Embedder-Policy', 'Cross-Origin-Resource-Policy'])
        delete isolation[h];
    let file = found?.file;
    let st = file && fs.statSync(file, { throwIfNoEntry: false });
    if (st && st.isDirectory()) {
        if (!urlPath.endsWith('/')) { // relative URLs in index.html need the slash
            res.setHeader('Location', urlPath + '/');
            return text(301, 'moved\n');
        }
        file = path.join(file, 'index.html');
        st = fs.statSync(file, { throwIfNoEntry: false });
    }
    if (!st || !st.isFile()) return text(404, `not found: ${urlPath}\n`);

    const type = MIME[path.extname(file).toLowerCase()] || 'application/octet-stream';
    if (found.unsized) { // no Content-Length: Node sends the body chunked
        const gzip = found.unsized.startsWith('gzip');
        res.writeHead(200, { ...isolation, 'Content-Type': type, ...(gzip ? { 'Content-Encoding': 'gzip' } : {}) });
        if (!opts.quiet) console.log(`200 ${req.method} ${req.url} (${found.unsized})`);
        if (req.method === 'HEAD') return res.end();
        const end = found.unsized.endsWith('-cut') ? Math.floor(st.size / 2) - 1 : st.size - 1;
        const stream = fs.createReadStream(file, { start: 0, end: Math.max(end, 0) });
        stream.on('error', () => res.destroy());
        if (gzip) stream.pipe(zlib.createGzip({ level: 1 })).pipe(res);
        else stream.pipe(res);
        return;
    }
    const r = range(req.headers.range, st.size);
    if (r === 'bad') return done(416, { 'Content-Range': `bytes */${st.size}`, 'Content-Length': 0 }, '');
    const start = r ? r.start : 0, end = r ? r.end : st.size - 1;
    const headers = { ...isolation, 'Content-Type': type, 'Accept-Ranges': 'bytes',
                      'Content-Length': st.size === 0 ? 0 : end - start + 1,
                      'Last-Modified': st.mtime.toUTCString() };
    if (r) headers['Content-Range'] = `bytes ${start}-${end}/${st.size}`;
    res.writeHead(r ? 206 : 200, headers);
    if (!opts.quiet) console.log(`${r ? 206 : 200} ${req.method} ${req.url}`);
    if (req.method === 'HEAD' || st.size === 0) return res.end();
    if (found.cut) { // half the bytes promised, then the connection closed
        const stream = fs.createReadStream(file, { start, end: start + Math.floor((end - start) / 2) });
        stream.on('error', () => res.destroy());
        stream.on('end', () => res.destroy());
        stream.pipe(res, { end: false });
        return;
    }
    const stream = fs.createReadStream(file, { start, end });
    stream.on('error', () => res.destroy());
    stream.pipe(res);
});

server.listen(opts.port, opts.host, () => {
    const { port } = server.address();
    const host = opts.host.includes(':') ? `[${opts.host}]` : opts.host;
    const extra = opts.mounts.map((m) => `, ${m.dir} at ${m.prefix}/`).join('');
    console.log(`serving ${opts.root} at http://${host}:${port}/${extra}`);
});
server.on('error', (e) => { process.stderr.write(`serve_web: ${e.message}\n`); process.exit(1); });
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => server.close(() => process.exit(0)));
