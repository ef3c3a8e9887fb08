// Run by bench/gate-memory.ts as `node [options] --expose-gc _load-probe.mjs MODULE...`: imports the
// modules given (none: a bare Node process), lets the event loop settle, then prints the resident
// set and V8's heap as JSON, before and after a full garbage collection. Plain JavaScript, so it
// loads the compiled gate as the gate's own process does, with no loader of ours in between.
import { readFileSync } from 'node:fs';

const kib = (field) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync('/proc/self/status', 'utf8'))?.[1]);
for (const specifier of process.argv.slice(2)) await import(specifier);
await new Promise((resolve) => setTimeout(resolve, 500));
const rss = kib('VmRSS');
globalThis.gc();
globalThis.gc();
const usage = process.memoryUsage();
console.log(JSON.stringify({ rss, rssAfterGc: kib('VmRSS'), heapUsed: usage.heapUsed / 1024, heapTotal: usage.heapTotal / 1024 }));
