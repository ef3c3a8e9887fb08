import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface ComponentSpec {
  name: string;
  command: string;
  args: string[];
  env?: NodeJS.ProcessEnv;
  /**
   * Stop with SIGKILL at once. For processes whose state is thrown away anyway and whose
   * graceful shutdown is slow (kube-apiserver drains for over 20 s, etcd then waits for it).
   * Nothing is lost from the logs: Go's klog and zap write stderr unbuffered.
   */
  hardStop?: boolean;
}

export interface ExitInfo {
  code: number | null;
  signal: NodeJS.Signals | null;
  error?: Error;
}

/** One running control-plane process, leader of its own process group. */
export interface Component {
  readonly name: string;
  readonly pid: number;
  readonly command: string;
  readonly logFile: string;
  /** Resolves when the process is gone, however it ended. */
  readonly exited: Promise<ExitInfo>;
  /** Set once it has exited. */
  exitInfo: ExitInfo | undefined;
  readonly hardStop: boolean;
  /** Lets the event loop wait for this process (it does not by default: see startComponent). */
  ref(): void;
}

let pdeathsigPrefix: string[] | undefined;

/**
 * `setpriv --pdeathsig SIGKILL` makes the kernel kill the child when the thread that spawned it
 * dies, even by SIGKILL, when no exit handler of ours can run. util-linux ships it on Debian;
 * without it we still kill process groups on exit and reap leftovers at the next start.
 */
export function deathSignalPrefix(): string[] {
  if (pdeathsigPrefix === undefined) {
    const probe = spawnSync('setpriv', ['--help'], { encoding: 'utf8' });
    pdeathsigPrefix = probe.status === 0 && probe.stdout.includes('--pdeathsig') ? ['setpriv', '--pdeathsig', 'SIGKILL'] : [];
  }
  return pdeathsigPrefix;
}

export function hasDeathSignal(): boolean {
  return deathSignalPrefix().length > 0;
}

export function startComponent(spec: ComponentSpec, logDir: string): Component {
  const logFile = join(logDir, `${spec.name}.log`);
  const out = openSync(logFile, 'a');
  const [cmd, ...prefixArgs] = [...deathSignalPrefix(), spec.command];
  let child: ChildProcess;
  try {
    // detached: own process group (and session), so a terminal's Ctrl-C does not reach it
    // before we decide the order of shutdown, and one kill(-pgid) takes everything it forked.
    child = spawn(cmd as string, [...prefixArgs, ...spec.args], {
      detached: true,
      stdio: ['ignore', out, out],
      env: spec.env ?? process.env,
    });
  } finally {
    closeSync(out);
  }
  // Unreferenced: a script that forgets stop() still ends, and its exit hook kills the group.
  child.unref();
  let exitInfo: ExitInfo | undefined;
  const exited = new Promise<ExitInfo>((resolve) => {
    child.once('error', (error) => {
      exitInfo ??= { code: null, signal: null, error };
      resolve(exitInfo);
    });
    child.once('exit', (code, signal) => {
      exitInfo ??= { code, signal };
      resolve(exitInfo);
    });
  });
  const component: Component = {
    name: spec.name,
    pid: child.pid ?? -1,
    command: spec.command,
    logFile,
    exited,
    get exitInfo() {
      return exitInfo;
    },
    hardStop: spec.hardStop ?? false,
    ref: () => child.ref(),
  };
  return component;
}

export function describeExit(info: ExitInfo): string {
  if (info.error) return `could not be started (${info.error.message})`;
  if (info.signal) return `was killed by ${info.signal}`;
  return `exited with code ${info.code}`;
}

/** Last lines of a log file, indented, for an error message. */
export function logTail(file: string, lines = 15): string {
  try {
    const text = readFileSync(file, 'utf8').trimEnd();
    if (text === '') return '    (log is empty)';
    return text
      .split('\n')
      .slice(-lines)
      .map((l) => `    ${l.length > 400 ? `${l.slice(0, 400)}…` : l}`)
      .join('\n');
  } catch {
    return '    (no log)';
  }
}

/** Signals a whole process group; a group that is already gone is not an error. */
export function signalGroup(pid: number, signal: NodeJS.Signals): void {
  if (pid <= 0) return;
  try {
    process.kill(-pid, signal);
  } catch {
    // ESRCH: nothing left to signal.
  }
}

/** SIGTERM (SIGKILL for hardStop ones), then SIGKILL whatever is still there after graceMs. */
export async function stopComponents(components: Component[], graceMs: number): Promise<void> {
  const running = components.filter((c) => c.exitInfo === undefined);
  for (const c of running) {
    c.ref();
    signalGroup(c.pid, c.hardStop ? 'SIGKILL' : 'SIGTERM');
  }
  const all = Promise.all(running.map((c) => c.exited));
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), graceMs);
  });
  const result = await Promise.race([all, timedOut]);
  clearTimeout(timer);
  if (result === 'timeout') {
    for (const c of running) signalGroup(c.pid, 'SIGKILL');
    await all;
  }
  // Children of a component (none expected) share its group: make sure none outlive it.
  for (const c of components) signalGroup(c.pid, 'SIGKILL');
}
