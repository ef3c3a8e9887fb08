// Runs several benches against one local control plane (started once, stopped at the end),
// one after another so they do not measure each other. Each bench alone starts its own.
//
//   node --import tsx bench/run.ts bench/webhook-latency.ts bench/release-latency.ts bench/held-memory.ts
//   node --import tsx bench/run.ts --hold     start a control plane, print its kubeconfig, wait for ^C
import { type ChildProcess, spawn } from 'node:child_process';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Cluster, startCluster } from '@knative-prestart/devcluster/control-plane.ts';
import { CLUSTER_DIR_ENV, KUBECONFIG_ENV } from '@knative-prestart/devcluster/shared.ts';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const hold = process.argv.includes('--hold');
const files = process.argv.slice(2).filter((a) => a.endsWith('.ts'));
const say = (line: string) => process.stdout.write(`bench/run: ${line}\n`);

let cluster: Cluster | undefined;
let running: ChildProcess | undefined;

async function finish(code: number): Promise<never> {
  await cluster?.stop();
  process.exit(code);
}

for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.on(signal, () => {
    if (running && running.exitCode === null) running.kill(signal);
    void finish(1);
  });
}

function run(file: string): Promise<number> {
  return new Promise((done) => {
    const child = spawn(process.execPath, ['--import', 'tsx', file], {
      cwd: root,
      stdio: 'inherit',
      env: { ...process.env, [KUBECONFIG_ENV]: cluster?.kubeconfigPath, [CLUSTER_DIR_ENV]: cluster?.dir },
    });
    running = child;
    child.on('close', (code) => done(code ?? 1));
  });
}

if (!hold && files.length === 0) {
  say('name the bench files to run, or --hold');
  process.exit(2);
}
const t0 = performance.now();
cluster = await startCluster({ progress: (line) => process.stderr.write(`cluster: ${line}\n`) });
say(`control plane ready in ${((performance.now() - t0) / 1000).toFixed(1)} s (${cluster.dir})`);
if (hold) {
  say(`export ${KUBECONFIG_ENV}=${cluster.kubeconfigPath} ${CLUSTER_DIR_ENV}=${cluster.dir}`);
  // Keeps the process (and so the cluster) alive until a signal ends it.
  setInterval(() => undefined, 1 << 30);
  await new Promise(() => undefined);
}
let failed = 0;
for (const file of files) {
  say(`--- ${file}`);
  const code = await run(file);
  if (code !== 0) {
    failed++;
    say(`${file} exited ${code}`);
  }
}
await finish(failed > 0 ? 1 : 0);
