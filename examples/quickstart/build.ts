// Phase 1: the control-plane and Knative binaries the demo runs (build-binaries.sh quickstart,
// then node and knative-serving-images for the real node; quickstart-broker), built once from Go modules and cached. The first build is long (about
// 17 min on an idle 2-core machine, the sum of the figures below),
// so it is shown as it goes: each component as it starts and ends, and a clock while one builds;
// a warm cache is one line.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { BUILD_SCRIPT, BUILD_SCRIPT_PATH, cacheDir } from '@knative-prestart/devcluster/binaries.ts';
import type { Output } from './output.ts';
import { seconds } from './summary.ts';

/**
 * Seconds each component took on its first build on an idle 2-core machine, all caches empty
 * (2026-12-02: a cold real-node quickstart, and a cold CI run for kwok and Eventing).
 */
const FIRST_BUILD_SECONDS: Record<string, number> = {
  etcd: 42,
  kwok: 62,
  kubernetes: 230,
  'knative-serving': 101,
  'knative-eventing': 49,
  node: 92,
  'knative-serving-images': 19,
};
export interface BuildOptions {
  /** Default: devcluster/build-binaries.sh. */
  script?: string;
  /** What to build (the script's arguments, one run each, in order); default `quickstart`, the plain demo's parts only. */
  targets?: string[];
  /** A step that ends sooner was a cache hit (the script checks and returns); default 1.5 s. */
  cacheHitMs?: number;
  /** Off a terminal, a "still building" line this often; default a minute. */
  plainTickMs?: number;
}

export class BuildError extends Error {
  override readonly name = 'BuildError';
}

function expected(name: string): string {
  const s = FIRST_BUILD_SECONDS[name];
  return s ? `; about ${roughly(s)} on a 2-core machine` : '';
}

/**
 * A build estimate as a person reads it: to 5 s under a minute, whole minutes from there on, so a
 * short build never reads "about 0 min".
 */
export function roughly(seconds: number): string {
  const fives = Math.max(5, Math.round(seconds / 5) * 5);
  return fives < 60 ? `${fives} s` : `${Math.round(seconds / 60)} min`;
}

export async function buildBinaries(out: Output, signal: AbortSignal, opts: BuildOptions = {}): Promise<void> {
  const cached: string[] = [];
  for (const target of opts.targets ?? ['quickstart']) cached.push(...(await buildTarget(out, signal, target, opts)));
  if (cached.length > 0) out.say(`binaries: cached in ${join(cacheDir(), 'bin')} (${cached.join(', ')})`);
}

/** Runs the script for `target`; returns the components it found already built. */
async function buildTarget(out: Output, signal: AbortSignal, target: string, opts: BuildOptions): Promise<string[]> {
  const cacheHitMs = opts.cacheHitMs ?? 1500;
  const plainTickMs = opts.plainTickMs ?? 60_000;
  const child = spawn('bash', [opts.script ?? BUILD_SCRIPT_PATH, target], { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  // Its own process group, so stopping reaches the go commands under the script, not just bash.
  const killGroup = (sig: NodeJS.Signals) => {
    try {
      if (child.pid) process.kill(-child.pid, sig);
    } catch {
      // Already gone.
    }
  };
  const onAbort = () => {
    killGroup('SIGTERM');
    setTimeout(() => killGroup('SIGKILL'), 3000).unref();
  };
  signal.addEventListener('abort', onAbort, { once: true });

  const cached: string[] = [];
  let step: { name: string; started: number; shown: boolean; lastTick: number } | undefined;
  let lastOther = '';
  const show = () => {
    if (!step || step.shown) return;
    step.shown = true;
    out.say(`binaries: building ${step.name} (first run only${expected(step.name)}) ...`);
  };
  // A clock while a component builds: redrawn each second on a terminal, a line a minute elsewhere.
  const ticker = setInterval(
    () => {
      if (!step) return;
      const now = performance.now();
      if (!step.shown && now - step.started >= cacheHitMs) show();
      if (!step.shown) return;
      const elapsed = seconds(now - step.started);
      if (out.tty) out.region([`  building ${step.name}: ${elapsed} so far`]);
      else if (now - step.lastTick >= plainTickMs) {
        step.lastTick = now;
        out.say(`binaries: still building ${step.name}, ${elapsed} so far`);
      }
    },
    Math.min(1000, plainTickMs),
  );

  const onLine = (line: string) => {
    const text = line.replace(/^build-binaries: /, '');
    const starting = /^building (\S+) \.\.\.$/.exec(text);
    if (starting?.[1]) {
      step = { name: starting[1], started: performance.now(), shown: false, lastTick: performance.now() };
      return;
    }
    const built = /^(\S+) built in (\d+)s$/.exec(text);
    if (built?.[1] && step?.name === built[1]) {
      if (step.shown) {
        out.region([]);
        out.say(`binaries: ${built[1]} built in ${seconds(performance.now() - step.started)}`);
      } else cached.push(built[1]);
      step = undefined;
      return;
    }
    show();
    lastOther = text;
    out.say(`binaries: ${text}`);
  };
  for (const stream of [child.stdout, child.stderr]) createInterface({ input: stream }).on('line', onLine);

  const code = await new Promise<number>((resolve) => {
    child.on('error', (err) => {
      lastOther = `cannot run bash: ${err.message}`;
      resolve(127);
    });
    child.on('close', (c, sig) => resolve(c ?? (sig ? 128 : 1)));
  });
  clearInterval(ticker);
  signal.removeEventListener('abort', onAbort);
  out.region([]);
  if (signal.aborted) throw new BuildError('interrupted while building the binaries');
  if (code !== 0)
    throw new BuildError(`building the binaries failed (${BUILD_SCRIPT} ${target}, exit ${code}): ${lastOther || 'see the lines above'}`);
  return cached;
}
