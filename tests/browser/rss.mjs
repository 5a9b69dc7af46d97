// rss.mjs — how much memory a browser's processes took while something ran, from Linux's
// /proc: every process under the browser's (the renderers and Firefox's content processes,
// where a page's workers and their wasm memory live) has its peak RSS reset (clear_refs 5)
// and its RSS read before; after, the largest rise of a peak over its own start is what the
// work took in one process. See memoryChecks in tests/browser/run.mjs.
import fs from 'node:fs';

// The pids under root (not root itself), from each /proc/PID/stat's parent pid.
export function descendants(root) {
    const parent = new Map();
    for (const d of fs.readdirSync('/proc')) {
        if (!/^\d+$/.test(d)) continue;
        try {
            const stat = fs.readFileSync(`/proc/${d}/stat`, 'utf8');
            parent.set(Number(d), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
        } catch { /* gone since the listing */ }
    }
    const out = [], todo = [root];
    while (todo.length) {
        const p = todo.pop();
        for (const [c, pp] of parent) if (pp === p) out.push(c), todo.push(c);
    }
    return out;
}

// kB of a /proc/PID/status line (VmRSS, VmHWM), or null for a process gone or kernel-less.
export function statusKb(pid, key) {
    try {
        const m = new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
        return m ? Number(m[1]) : null;
    } catch {
        return null;
    }
}

// peakRise(rootPid, work): runs work(); resolves to { bytes, pid, result }: the largest
// VmHWM after minus VmRSS before over the processes under rootPid that lived through it
// (a process started during work counts from 0).
export async function peakRise(rootPid, work) {
    const before = new Map();
    for (const pid of descendants(rootPid)) {
        try {
            fs.writeFileSync(`/proc/${pid}/clear_refs`, '5'); // VmHWM := VmRSS
        } catch { continue; }
        const rss = statusKb(pid, 'VmRSS');
        if (rss !== null) before.set(pid, rss);
    }
    const result = await work();
    let best = { bytes: 0, pid: 0 };
    for (const pid of descendants(rootPid)) {
        const hwm = statusKb(pid, 'VmHWM');
        if (hwm === null) continue;
        const rise = (hwm - (before.get(pid) ?? 0)) * 1024;
        if (rise > best.bytes) best = { bytes: rise, pid };
    }
    return { ...best, result };
}
