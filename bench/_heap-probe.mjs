// Loaded into the gate process by bench/held-memory.ts (NODE_OPTIONS=--import): on SIGUSR2 it
// runs a full garbage collection and writes process.memoryUsage() to $BENCH_HEAP_FILE, so the
// bench can tell what the gate retains from garbage not yet collected. Plain JavaScript with no
// dependencies, because it must load into the compiled gate too, where there is no tsx.
import { renameSync, writeFileSync } from 'node:fs';
import { setFlagsFromString, writeHeapSnapshot } from 'node:v8';
import { runInNewContext } from 'node:vm';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc');
const file = process.env.BENCH_HEAP_FILE;
// Set BENCH_HEAP_SNAPSHOT_DIR to also write a heap snapshot (Chrome DevTools' Memory tab opens it) at each probe.
const snapshots = process.env.BENCH_HEAP_SNAPSHOT_DIR;

if (file) {
  process.on('SIGUSR2', () => {
    gc();
    gc();
    if (snapshots) writeHeapSnapshot(`${snapshots}/gate-${process.pid}-${Date.now()}.heapsnapshot`);
    writeFileSync(`${file}.tmp`, JSON.stringify(process.memoryUsage()));
    renameSync(`${file}.tmp`, file);
  });
}
