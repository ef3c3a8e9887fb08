// A real nats-server with JetStream for tests: its own store in a temporary directory, a free
// port on 127.0.0.1, killed on stop (and by the kernel if the test process dies first). It runs
// from a config file, so a test can add accounts, users, permissions and TLS (nats-auth.ts
// writes those blocks).
import { mkdtempSync, writeFileSync } from 'node:fs';
import { connect as tcpConnect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BUILD_SCRIPT, cacheDir, pinnedVersions } from './binaries.ts';
import { ClusterStartError } from './errors.ts';
import { freePorts } from './ports.ts';
import { findExecutable, onPath, startService } from './service.ts';

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
  return findExecutable(
    [process.env.NATS_SERVER_BIN, join(cacheDir(), 'bin', `nats-server-${version}`, 'nats-server'), ...onPath('nats-server')],
    `no nats-server binary: run ${BUILD_SCRIPT} nats (pinned ${version}), set NATS_SERVER_BIN, or apt-get install nats-server`,
  );
}

export interface NatsServerOptions {
  timeoutMs?: number;
  /** More of nats-server's config (accounts, authorization, tls, operator…), appended to listen, name and JetStream. */
  config?: string;
}

export async function startNatsServer(opts: NatsServerOptions = {}): Promise<NatsServer> {
  const binary = natsServerBinary();
  const dir = mkdtempSync(join(tmpdir(), 'prestart-nats-'));
  const [port] = await freePorts(1);
  if (port === undefined) throw new ClusterStartError('no free port for nats-server');
  const configFile = join(dir, 'nats-server.conf');
  writeFileSync(
    configFile,
    [
      `listen: "127.0.0.1:${port}"`,
      `server_name: "test-${port}"`,
      `jetstream { store_dir: ${JSON.stringify(join(dir, 'jetstream'))} }`,
      opts.config ?? '',
    ].join('\n'),
  );
  // Accepting TCP is not enough: the INFO line proves it is nats-server talking.
  const { component, stop } = await startService(
    { name: 'nats-server', command: binary, args: ['-c', configFile] },
    dir,
    () => natsInfo(port),
    { what: `nats-server on 127.0.0.1:${port} to greet`, timeoutMs: opts.timeoutMs ?? 15_000, intervalMs: 50 },
  );
  return { url: `nats://127.0.0.1:${port}`, port, binary, logFile: component.logFile, stop };
}

/** Resolves true once the server sent its INFO line with JetStream on, false otherwise. */
export function natsInfo(port: number): Promise<boolean> {
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
