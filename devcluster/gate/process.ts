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
  /**
   * The URL the apiserver calls (default https://127.0.0.1:<webhook>): e.g. a balancer in front of
   * several replicas, standing in for the Service.
   */
  webhookUrl?: string;
  /** The URL hooks reply to (default http://127.0.0.1:<sink>/events). */
  sinkUrl?: string;
}

/**
 * Starts `knative-prestart gate` for env's namespace; `crashAt` arms a crash point. `nats` is the
 * `--nats` URL, or the NATS flags as a whole (with credentials and TLS).
 */
export async function spawnGate(
  env: Pick<GateEnv, 'gateKubeconfigPath' | 'instance'>,
  ports: GatePorts,
  crashAt?: string,
  nats?: string | readonly string[],
): Promise<GateProcess> {
  return startGateProcess({
    crashAt,
    args: [
      '--kubeconfig',
      env.gateKubeconfigPath,
      '--instance',
      env.instance,
      '--namespace-selector',
      `prestart.dev/gate=${env.instance}`,
      ...listenArgs(ports),
      '--lease-duration',
      '3',
      '--log-level',
      'warn',
      ...(typeof nats === 'string' ? ['--nats', nats] : (nats ?? [])),
    ],
    readyPort: ports.sink,
  });
}

/** The flags that put a gate's webhooks and sink on 127.0.0.1 `ports`, reached at their URLs. */
export function listenArgs(ports: GatePorts): string[] {
  return [
    '--webhook-host',
    '127.0.0.1',
    '--webhook-port',
    String(ports.webhook),
    '--webhook-url',
    ports.webhookUrl ?? `https://127.0.0.1:${ports.webhook}`,
    '--sink-host',
    '127.0.0.1',
    '--sink-port',
    String(ports.sink),
    ...(ports.sinkUrl ? ['--sink-url', ports.sinkUrl] : []),
  ];
}

export interface GateProcessOptions {
  /** The flags after `gate`. */
  args: readonly string[];
  /** The sink port, where /readyz says when the gate serves. */
  readyPort: number;
  crashAt?: string | undefined;
  /** Another CLI entry point (e.g. a previous release's source tree); default this tree's. */
  cli?: string;
}

/** Runs `<cli> gate <args>` and waits until it is ready; it dies with this process. */
export async function startGateProcess(opts: GateProcessOptions): Promise<GateProcess> {
  const compiled = opts.cli ? undefined : process.env[GATE_CLI_ENV];
  // The apiserver calls a host process at its URL, with no Service to catch up with its stop: it
  // need not wait for a quiet spell, only for the requests in flight (a previous release's CLI
  // has no such flag).
  const drain = opts.cli || opts.args.includes('--drain-quiet') ? [] : ['--drain-quiet', '0'];
  const args = [...(compiled ? [compiled] : ['--import', 'tsx', opts.cli ?? cli]), 'gate', ...opts.args, ...drain];
  const { KNATIVE_PRESTART_CRASH_AT: _, ...inherited } = process.env;
  // Dies with the test process (SIGKILL on parent death), so an interrupted run leaves no gate behind.
  const [cmd, ...prefix] = [...deathSignalPrefix(), process.execPath];
  const child = spawn(cmd as string, [...prefix, ...args], {
    env: opts.crashAt ? { ...inherited, KNATIVE_PRESTART_CRASH_AT: opts.crashAt } : inherited,
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
    () =>
      fetch(`http://127.0.0.1:${opts.readyPort}/readyz`).then(
        (r) => r.ok,
        () => false,
      ),
    {
      timeoutMs: 60_000,
      what: 'the gate process to serve',
      bail: () => (child.exitCode !== null || child.signalCode !== null ? new Error(`gate exited early:\n${out}`) : undefined),
    },
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
