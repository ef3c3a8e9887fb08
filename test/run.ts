// `npm test`: builds (or finds cached) control-plane binaries, starts ONE real local cluster,
// runs every ava test file against it, stops it however ava ends, and exits with ava's code.
//
//   npm test                              all unit and integration tests
//   npm test -- test/integration/x.test.ts   only these files (any ava flags pass through)
import { type ChildProcess, spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { constants } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { BUILD_SCRIPT_PATH } from './cluster/binaries.ts';
import { type Cluster, startCluster } from './cluster/control-plane.ts';
import { ClusterStartError } from './cluster/errors.ts';
import { CLUSTER_DIR_ENV, KUBECONFIG_ENV } from './cluster/shared.ts';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const DEFAULT_FILES = ['test/unit/**/*.test.ts', 'test/integration/**/*.test.ts'];

const say = (line: string) => process.stdout.write(`test/run: ${line}\n`);
const seconds = (t0: number) => `${((performance.now() - t0) / 1000).toFixed(1)}s`;
const signalExitCode = (signal: NodeJS.Signals) => 128 + constants.signals[signal];

let cluster: Cluster | undefined;
let ava: ChildProcess | undefined;
let interrupted: NodeJS.Signals | undefined;

for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.on(signal, () => {
    // The cluster's own exit hook kills its processes at once; ava gets the signal too (from the
    // terminal, or from us), and we exit once it has gone.
    interrupted = signal;
    if (ava && ava.exitCode === null) ava.kill(signal);
    else void finish(signalExitCode(signal));
  });
}

async function finish(code: number): Promise<never> {
  if (cluster) {
    const keep = code !== 0;
    await cluster.stop({ keepDir: keep });
    if (keep) say(`cluster logs kept in ${cluster.dir}`);
  }
  process.exit(code);
}

function run(cmd: string, args: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  return new Promise((resolvePromise) => {
    const child = spawn(cmd, args, { cwd: root, stdio: 'inherit', env });
    if (cmd === process.execPath) ava = child;
    child.on('error', (err) => {
      say(`cannot run ${cmd}: ${err.message}`);
      resolvePromise(127);
    });
    child.on('exit', (code, signal) => resolvePromise(code ?? (signal ? signalExitCode(signal) : 1)));
  });
}

/** Files or folders among the arguments replace the default globs; flags pass through. */
function avaArgs(args: string[]): string[] {
  const namesFiles = args.some((a) => !a.startsWith('-') && (a.endsWith('.ts') || a.startsWith('test/')));
  return namesFiles ? args : [...DEFAULT_FILES, ...args];
}

async function main(): Promise<never> {
  const t0 = performance.now();
  const built = await run('bash', [BUILD_SCRIPT_PATH, 'all']);
  if (built !== 0) {
    say(`building the control-plane binaries failed (exit ${built}); see the lines above`);
    return process.exit(built);
  }
  say(`binaries ready in ${seconds(t0)}`);
  if (interrupted) return finish(signalExitCode(interrupted));

  const t1 = performance.now();
  try {
    cluster = await startCluster({ progress: (line) => say(`cluster: ${line}`) });
  } catch (err) {
    if (err instanceof ClusterStartError) {
      process.stderr.write(`${err.message}\n`);
      return process.exit(1);
    }
    throw err;
  }
  say(`control plane ready in ${seconds(t1)} at ${cluster.apiserverUrl} (dir ${cluster.dir})`);
  say(
    `versions: ${Object.entries(cluster.versions)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ')}`,
  );
  if (interrupted) return finish(signalExitCode(interrupted));

  // ava's CLI entry (its package exports hide package.json, so find it next to the main entry).
  const avaCli = join(dirname(createRequire(import.meta.url).resolve('ava')), 'cli.mjs');
  const t2 = performance.now();
  const code = await run(process.execPath, [avaCli, ...avaArgs(process.argv.slice(2))], {
    ...process.env,
    [KUBECONFIG_ENV]: cluster.kubeconfigPath,
    [CLUSTER_DIR_ENV]: cluster.dir,
  });
  say(`ava exited with code ${code} after ${seconds(t2)}`);
  return finish(interrupted ? signalExitCode(interrupted) : code);
}

main().catch(async (err: unknown) => {
  process.stderr.write(`test/run: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  await finish(1);
});
