// `npm test`: builds (or finds cached) control-plane binaries, starts ONE real local cluster,
// runs every ava test file against it, stops it however ava ends, and exits with ava's code.
//
//   npm test                              all unit and integration tests
//   npm test -- test/integration/x.test.ts   only these files or folders (devcluster/test/ too; any ava flags pass through)
//   npm run test:e2e                      (--e2e) the end-to-end suite against Knative Serving's
//                                         own controllers, with test/e2e/ava.config.mjs
import { type ChildProcess, spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { constants } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stripVTControlCharacters } from 'node:util';
import { BUILD_SCRIPT_PATH } from '@knative-prestart/devcluster/binaries.ts';
import { type Cluster, startCluster } from '@knative-prestart/devcluster/control-plane.ts';
import { ClusterStartError } from '@knative-prestart/devcluster/errors.ts';
import { CLUSTER_DIR_ENV, KUBECONFIG_ENV } from '@knative-prestart/devcluster/shared.ts';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const e2e = process.argv.includes('--e2e');
const cliArgs = process.argv.slice(2).filter((a) => a !== '--e2e');
// The devcluster package's own tests run here too, on the same cluster (devcluster/README.md).
const DEFAULT_FILES = e2e
  ? ['test/e2e/**/*.test.ts']
  : [
      'test/unit/**/*.test.ts',
      'test/integration/**/*.test.ts',
      'devcluster/test/unit/**/*.test.ts',
      'devcluster/test/integration/**/*.test.ts',
    ];
const E2E_AVA_CONFIG = 'test/e2e/ava.config.mjs';

const say = (line: string) => process.stdout.write(`test/run: ${line}\n`);
const seconds = (t0: number) => `${((performance.now() - t0) / 1000).toFixed(1)}s`;
const signalExitCode = (signal: NodeJS.Signals) => 128 + constants.signals[signal];

let cluster: Cluster | undefined;
/** The child running now (the build, then ava): a signal is passed on to it. */
let running: ChildProcess | undefined;
let interrupted: NodeJS.Signals | undefined;

for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.on(signal, () => {
    // The cluster's own exit hook kills its processes at once; the running child gets the signal
    // too (from the terminal, or from us), and main() finishes once it has gone.
    interrupted = signal;
    if (running && running.exitCode === null && running.signalCode === null) running.kill(signal);
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

interface RunOptions {
  env?: NodeJS.ProcessEnv;
  /** Sees every line the child prints on stdout (still forwarded as it comes). */
  onLine?: (line: string) => void;
}

function run(cmd: string, args: string[], opts: RunOptions = {}): Promise<number> {
  return new Promise((resolvePromise) => {
    const child = spawn(cmd, args, {
      cwd: root,
      stdio: ['inherit', opts.onLine ? 'pipe' : 'inherit', 'inherit'],
      env: opts.env ?? process.env,
    });
    running = child;
    if (opts.onLine && child.stdout) {
      const onLine = opts.onLine;
      let pending = '';
      child.stdout.on('data', (chunk: Buffer) => {
        process.stdout.write(chunk);
        const lines = (pending + chunk.toString('utf8')).split('\n');
        pending = lines.pop() ?? '';
        for (const line of lines) onLine(line);
      });
      child.stdout.on('end', () => pending && onLine(pending));
    }
    child.on('error', (err) => {
      say(`cannot run ${cmd}: ${err.message}`);
      resolvePromise(127);
    });
    child.on('close', (code, signal) => resolvePromise(code ?? (signal ? signalExitCode(signal) : 1)));
  });
}

/**
 * Counts ava's ✔ and ✘ lines, so the run ends with one plain "N passed, N failed" line (ava
 * itself prints only the failures' count when some fail). A test file that crashes counts as failed.
 */
function testCounter() {
  const counts = { passed: 0, failed: 0 };
  const plain = (line: string) => stripVTControlCharacters(line).trimStart();
  return {
    counts,
    onLine: (line: string) => {
      const text = plain(line);
      if (text.startsWith('✔')) counts.passed++;
      else if (text.startsWith('✘')) counts.failed++;
    },
  };
}

/** A test file or folder among the arguments (anything else not a flag is a flag's value). */
const namesTests = (a: string) => a.endsWith('.ts') || a.startsWith('test/') || a.startsWith('devcluster/');

/** Files or folders among the arguments replace the default globs; flags pass through. */
function avaArgs(args: string[]): string[] {
  const namesFiles = args.some((a) => !a.startsWith('-') && namesTests(a));
  return namesFiles ? args : [...DEFAULT_FILES, ...args];
}

/** True when the run includes test/integration/release/ (the default set does). */
function selectsInstallTests(args: string[]): boolean {
  if (e2e) return false;
  const files = args.filter((a) => !a.startsWith('-'));
  const named = files.some(namesTests);
  return (
    !named ||
    files.some(
      (a) =>
        a.startsWith('test/integration/release') || a === 'test/integration' || a === 'test/integration/' || a === 'test' || a === 'test/',
    )
  );
}

async function main(): Promise<never> {
  const t0 = performance.now();
  const built = await run('bash', [BUILD_SCRIPT_PATH, 'all']);
  if (interrupted) return finish(signalExitCode(interrupted));
  if (built !== 0) {
    say(`building the control-plane binaries failed (exit ${built}); see the lines above`);
    return process.exit(built);
  }
  say(`binaries ready in ${seconds(t0)}`);

  // The install tests run the product as an admin gets it: dist/ (the kn plugin) and the image.
  // Both builds are cached (seconds when nothing changed), and only done when those tests run.
  if (selectsInstallTests(cliArgs)) {
    for (const script of ['build', 'image']) {
      const code = await run('npm', ['run', '--silent', script]);
      if (interrupted) return finish(signalExitCode(interrupted));
      if (code !== 0) {
        say(`npm run ${script} failed (exit ${code}); see the lines above`);
        return process.exit(code);
      }
    }
  }

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
  const counter = testCounter();
  const code = await run(
    process.execPath,
    [avaCli, ...(e2e ? ['--config', E2E_AVA_CONFIG] : []), ...(process.stdout.isTTY ? ['--color'] : []), ...avaArgs(cliArgs)],
    {
      env: { ...process.env, [KUBECONFIG_ENV]: cluster.kubeconfigPath, [CLUSTER_DIR_ENV]: cluster.dir },
      onLine: counter.onLine,
    },
  );
  say(`ava exited with code ${code} after ${seconds(t2)}`);
  process.stdout.write(`tests: ${counter.counts.passed} passed, ${counter.counts.failed} failed\n`);
  return finish(interrupted ? signalExitCode(interrupted) : code);
}

main().catch(async (err: unknown) => {
  process.stderr.write(`test/run: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  await finish(1);
});
