// Measures the local control plane: time from startCluster() to ready, and memory of each
// process (VmHWM = peak resident set, VmRSS = now) after an optional workload.
//
//   node --import tsx bench/control-plane.ts                      start, measure, stop
//   node --import tsx bench/control-plane.ts --starts 3           three start/stop cycles
//   node --import tsx bench/control-plane.ts devcluster/test/integration/cluster.test.ts
//        runs those ava files against the cluster first, so VmHWM is the peak while they ran
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { startCluster } from '@knative-prestart/devcluster/control-plane.ts';
import { PID_STATE_FILE, type PidState } from '@knative-prestart/devcluster/leftovers.ts';
import { CLUSTER_DIR_ENV, KUBECONFIG_ENV } from '@knative-prestart/devcluster/shared.ts';

function memoryKiB(pid: number): { hwm: number; rss: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const field = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? 0);
  return { hwm: field('VmHWM'), rss: field('VmRSS') };
}

const args = process.argv.slice(2);
const startsFlag = args.indexOf('--starts');
const starts = startsFlag >= 0 ? Number(args[startsFlag + 1]) : 1;
const files = args.filter((a, i) => a.endsWith('.ts') && (startsFlag < 0 || i !== startsFlag + 1));

for (let i = 1; i <= starts; i++) {
  const t0 = performance.now();
  const cluster = await startCluster();
  const startMs = performance.now() - t0;
  console.log(`start ${i}: control plane ready in ${(startMs / 1000).toFixed(2)} s`);
  try {
    if (files.length > 0 && i === starts) {
      const avaCli = join(dirname(createRequire(import.meta.url).resolve('ava')), 'cli.mjs');
      const t1 = performance.now();
      const res = spawnSync(process.execPath, [avaCli, ...files], {
        stdio: 'inherit',
        env: { ...process.env, [KUBECONFIG_ENV]: cluster.kubeconfigPath, [CLUSTER_DIR_ENV]: cluster.dir },
      });
      console.log(`ava ${files.join(' ')}: exit ${res.status} in ${((performance.now() - t1) / 1000).toFixed(1)} s`);
    }
    if (i === starts) {
      const state = JSON.parse(readFileSync(join(cluster.dir, PID_STATE_FILE), 'utf8')) as PidState;
      let hwm = 0;
      let rss = 0;
      for (const c of state.components) {
        const m = memoryKiB(c.pid);
        hwm += m.hwm;
        rss += m.rss;
        console.log(
          `${c.name.padEnd(24)} VmHWM ${(m.hwm / 1024).toFixed(0).padStart(5)} MiB   VmRSS ${(m.rss / 1024).toFixed(0).padStart(5)} MiB`,
        );
      }
      console.log(
        `${'sum'.padEnd(24)} VmHWM ${(hwm / 1024).toFixed(0).padStart(5)} MiB   VmRSS ${(rss / 1024).toFixed(0).padStart(5)} MiB`,
      );
    }
  } finally {
    const t2 = performance.now();
    await cluster.stop();
    console.log(`stop ${i}: ${((performance.now() - t2) / 1000).toFixed(2)} s`);
  }
}
