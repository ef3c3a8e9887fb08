// The gate as a separate OS process (the CLI), so a test can kill it for real.
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { deathSignalPrefix } from '../processes.ts';
import { waitFor } from '../wait.ts';
import type { GateEnv } from './env.ts';

const cli = fileURLToPath(new URL('../../cli/main.ts', import.meta.url));
/**
 * Set to a compiled CLI (`npm run build` makes dist/cli/main.js) to run that instead of the
 * source under tsx, whose loader alone adds ~85 MiB to the process: benches that weigh the gate.
 */
export const GATE_CLI_ENV = 'KNATIVE_PRESTART_GATE_CLI';

export interface GateProcess {
  child: ChildProcess;
  output: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  stop(): Promise<void>;
}

export interface GatePorts {
  webhook: number;
  sink: number;
}

/** Starts `knative-prestart gate` for env's namespace; `crashAt` arms a crash point. */
export async function spawnGate(env: GateEnv, ports: GatePorts, crashAt?: string, nats?: string): Promise<GateProcess> {
  const compiled = process.env[GATE_CLI_ENV];
  const args = [
    ...(compiled ? [compiled] : ['--import', 'tsx', cli]),
    'gate',
    '--kubeconfig',
    env.gateKubeconfigPath,
    '--instance',
    env.instance,
    '--namespace-selector',
    `prestart.dev/gate=${env.instance}`,
    '--webhook-host',
    '127.0.0.1',
    '--webhook-port',
    String(ports.webhook),
    '--webhook-url',
    `https://127.0.0.1:${ports.webhook}`,
    '--sink-host',
    '127.0.0.1',
    '--sink-port',
    String(ports.sink),
    '--lease-duration',
    '3',
    '--log-level',
    'warn',
    ...(nats ? ['--nats', nats] : []),
  ];
  const { KNATIVE_PRESTART_CRASH_AT: _, ...inherited } = process.env;
  // Dies with the test process (SIGKILL on parent death), so an interrupted run leaves no gate behind.
  const [cmd, ...prefix] = [...deathSignalPrefix(), process.execPath];
  const child = spawn(cmd as string, [...prefix, ...args], {
    env: crashAt ? { ...inherited, KNATIVE_PRESTART_CRASH_AT: crashAt } : inherited,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  child.stderr?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  const exited = once(child, 'exit').then(([code, signal]) => ({ code: code as number | null, signal: signal as NodeJS.Signals | null }));
  await waitFor(
    async () => {
      if (child.exitCode !== null || child.signalCode !== null) throw new Error(`gate exited early:\n${out}`);
      return fetch(`http://127.0.0.1:${ports.sink}/readyz`).then(
        (r) => r.ok,
        () => false,
      );
    },
    { timeoutMs: 60_000, what: 'the gate process to serve' },
  );
  return {
    child,
    output: () => out,
    exited,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        await exited;
      }
    },
  };
}
