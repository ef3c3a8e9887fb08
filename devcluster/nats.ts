// A real nats-server with JetStream for tests: its own store in a temporary directory, a free
// port on 127.0.0.1, killed on stop (and by the kernel if the test process dies first).
import { accessSync, constants, mkdtempSync, rmSync } from 'node:fs';
import { connect as tcpConnect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BUILD_SCRIPT, cacheDir, pinnedVersions } from './binaries.ts';
import { ClusterStartError } from './errors.ts';
import { onExit } from './exit-hooks.ts';
import { freePorts } from './ports.ts';
import { describeExit, logTail, signalGroup, startComponent, stopComponents } from './processes.ts';
import { waitFor } from './wait.ts';

export interface NatsServer {
  /** nats://127.0.0.1:PORT */
  url: string;
  port: number;
  /** The binary that runs, for test titles and error messages. */
  binary: string;
  logFile: string;
  stop(): Promise<void>;
}

/**
 * The pinned build from build-binaries.sh first, then $NATS_SERVER_BIN, then a nats-server on
 * PATH (Debian ships one; older, but JetStream and headers are there since 2.2).
 */
export function natsServerBinary(): string {
  const version = pinnedVersions().NATS_SERVER_VERSION ?? 'v2.15.2';
  const candidates = [
    process.env.NATS_SERVER_BIN,
    join(cacheDir(), 'bin', `nats-server-${version}`, 'nats-server'),
    ...(process.env.PATH ?? '')
      .split(':')
      .filter(Boolean)
      .map((dir) => join(dir, 'nats-server')),
  ].filter((p): p is string => Boolean(p));
  for (const path of candidates) {
    try {
      accessSync(path, constants.X_OK);
      return path;
    } catch {
      // next candidate
    }
  }
  throw new ClusterStartError(
    `no nats-server binary: run ${BUILD_SCRIPT} nats (pinned ${version}), set NATS_SERVER_BIN, or apt-get install nats-server`,
  );
}

export async function startNatsServer(opts: { timeoutMs?: number } = {}): Promise<NatsServer> {
  const binary = natsServerBinary();
  const dir = mkdtempSync(join(tmpdir(), 'prestart-nats-'));
  const [port] = await freePorts(1);
  if (port === undefined) throw new ClusterStartError('no free port for nats-server');
  const component = startComponent(
    {
      name: 'nats-server',
      command: binary,
      args: ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', join(dir, 'jetstream'), '--server_name', `test-${port}`],
    },
    dir,
  );
  const unregister = onExit(() => signalGroup(component.pid, 'SIGKILL'));
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    await stopComponents([component], 5_000);
    unregister();
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    // Accepting TCP is not enough: the INFO line proves it is nats-server talking.
    await waitFor(() => natsInfo(port), {
      what: `nats-server on 127.0.0.1:${port} to greet`,
      timeoutMs: opts.timeoutMs ?? 15_000,
      intervalMs: 50,
      bail: () =>
        component.exitInfo
          ? new ClusterStartError(`nats-server ${describeExit(component.exitInfo)}`, logTail(component.logFile))
          : undefined,
    });
  } catch (err) {
    await stop();
    throw err;
  }
  return { url: `nats://127.0.0.1:${port}`, port, binary, logFile: component.logFile, stop };
}

/** Resolves true once the server sent its INFO line with JetStream on, false otherwise. */
function natsInfo(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = tcpConnect({ host: '127.0.0.1', port });
    let seen = '';
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1_000, () => done(false));
    socket.on('error', () => done(false));
    socket.on('data', (chunk) => {
      seen += chunk.toString('utf8');
      if (seen.includes('\r\n')) done(seen.startsWith('INFO ') && seen.includes('"jetstream":true'));
    });
  });
}
