// harness.mjs — what the browser tests and scripts/bench_browser.mjs share: how Debian's
// browsers are started headless (puppeteer-core, no download) and how build-web/ is served.
import puppeteer from 'puppeteer-core';
import { spawn } from 'node:child_process';
import readline from 'node:readline';

export const BROWSERS = {
    chromium: {
        executablePath: '/usr/bin/chromium',
        headless: true,
        // WebGPU is behind this flag on Linux; SwiftShader is the adapter without a GPU.
        args: ['--no-sandbox', '--enable-unsafe-webgpu'],
    },
    firefox: {
        browser: 'firefox',
        executablePath: '/usr/bin/firefox-esr',
        headless: true,
        extraPrefsFirefox: { 'dom.webgpu.enabled': true, 'gfx.webgpu.ignore-blocklist': true },
    },
};

// launch(name, protocolTimeoutMs): one of BROWSERS started.
export function launch(name, protocolTimeout) {
    return puppeteer.launch({ ...BROWSERS[name], protocolTimeout });
}

// serve(mounts, cuts, plains, more): scripts/serve_web.mjs on a free port with build-web/ at /,
// tests/browser/ at /test/, the given '/PREFIX=DIR' mounts, --cut mounts (each download cut
// short), --plain mounts (no cross-origin isolation) and more of its arguments as they are
// (['--chunked', '/PREFIX=DIR', ...]); resolves to { url, close() }.
export function serve(mounts = [], cuts = [], plains = [], more = []) {
    const args = ['scripts/serve_web.mjs', '--root', 'build-web', '--port', '0', '--quiet', '--mount', '/test=tests/browser'];
    for (const m of mounts) args.push('--mount', m);
    for (const m of cuts) args.push('--cut', m);
    for (const m of plains) args.push('--plain', m);
    args.push(...more);
    const srv = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
    return new Promise((resolve, reject) => {
        srv.on('exit', (code) => reject(new Error(`serve_web.mjs exited ${code}`)));
        readline.createInterface({ input: srv.stdout }).on('line', (line) => {
            const m = /(http:\/\/\S+\/)/.exec(line);
            if (m) resolve({ url: m[1], close: () => srv.kill() });
        });
    });
}
