// Loaded into the gate process by bench/held-memory.ts (NODE_OPTIONS=--import): on SIGUSR2 it
// runs a full garbage collection and writes process.memoryUsage() to $BENCH_HEAP_FILE, so the
// bench can tell what the gate retains from garbage not yet collected. Plain JavaScript with no
// dependencies, because it must load into the compiled gate too, where there is no tsx.
import { renameSync, writeFileSync } from 'node:fs';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc');
const file = process.env.BENCH_HEAP_FILE;

if (file) {
  process.on('SIGUSR2', () => {
    gc();
    gc();
    writeFileSync(`${file}.tmp`, JSON.stringify(process.memoryUsage()));
    renameSync(`${file}.tmp`, file);
  });
}
