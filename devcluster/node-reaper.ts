// Watches the owner of a real node and undoes its host changes if it dies without doing so
// itself (SIGKILL, an ava timeout): node.ts spawns this detached, with a pipe on its stdin whose
// only writer is the owner. The pipe closes when the owner is gone, however it ended; then the
// state file (node-host.ts) says whether a teardown is still due (it is removed by a normal
// stop or by the owner's exit hook). What it reaped is logged in <node root>/reaper.log.
import { appendFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { nodeRoot, reapNodeLeftovers } from './node-host.ts';

process.stdin.resume();
process.stdin.on('end', () => {
  // What it did goes to <node root>/reaper.log, the one trace a reaped node leaves.
  for (const line of reapNodeLeftovers()) {
    mkdirSync(nodeRoot(), { recursive: true });
    appendFileSync(join(nodeRoot(), 'reaper.log'), `${new Date().toISOString()} ${line}\n`);
  }
  process.exit(0);
});
