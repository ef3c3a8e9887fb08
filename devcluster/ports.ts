import { createServer, type Server } from 'node:net';
import { ClusterStartError } from './errors.ts';

function listen(port: number): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen({ host: '127.0.0.1', port, exclusive: true }, () => resolve(server));
  });
}

function close(server: Server): Promise<void> {
  return new Promise((resolve) => server.close(() => resolve()));
}

/**
 * Free ports on 127.0.0.1, all held open until every one is chosen so no two are the same.
 * Another process could still take one before our child binds it; that shows as the child
 * exiting early with "address already in use" in its log.
 */
export async function freePorts(count: number): Promise<number[]> {
  const servers = await Promise.all(Array.from({ length: count }, () => listen(0)));
  const ports = servers.map((s) => {
    const addr = s.address();
    if (addr === null || typeof addr === 'string') throw new Error('no port from listen(0)');
    return addr.port;
  });
  await Promise.all(servers.map(close));
  return ports;
}

/**
 * A port pinned by an environment variable (for a firewall rule, a debugger, a fixed kubeconfig),
 * or undefined when the variable is unset. Fails before anything starts when the port is taken.
 */
export async function pinnedPort(envName: string, what: string): Promise<number | undefined> {
  const raw = process.env[envName];
  if (raw === undefined || raw === '') return undefined;
  const port = Number(raw);
  if (!Number.isInteger(port) || port <= 0 || port > 65535) {
    throw new ClusterStartError(`${envName}=${raw} is not a port number`);
  }
  try {
    await close(await listen(port));
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EADDRINUSE') {
      throw new ClusterStartError(
        `port ${port} for ${what} (from ${envName}) is already in use on 127.0.0.1: stop what holds it (ss -ltnp 'sport = :${port}') or unset ${envName}`,
      );
    }
    throw new ClusterStartError(`cannot bind 127.0.0.1:${port} for ${what} (from ${envName}): ${code ?? String(err)}`);
  }
  return port;
}
