// A stand-in for the gate's Service in front of several replicas, where the apiserver calls the
// webhooks by URL (this machine runs no kube-proxy): a TCP pass-through (TLS stays end to end,
// each replica serves the shared certificate) that sends each new connection to the next replica
// in turn. Like a Service whose endpoints follow readiness, it keeps sending to a replica that
// died until a connection to it fails; then it leaves that replica out. It never retries a failed
// connection on another replica (a Service cannot either): the client sees the failure. Each
// failure is counted, which is what a dead replica costs before it is taken out.
import { createConnection, createServer, type Server, type Socket } from 'node:net';

export interface Backend {
  port: number;
  /** False once a connection to it failed (and until markUp). */
  up: boolean;
  connections: number;
  /** Connections that could not be made, or broke before the backend closed them cleanly. */
  failures: number;
}

export interface Balancer {
  port: number;
  url(scheme: 'https' | 'http', path?: string): string;
  backends: Backend[];
  /** Puts a replica (new, or back) in rotation, as a Service does once its readiness probe passes. */
  markUp(port: number): void;
  close(): Promise<void>;
}

export async function startBalancer(ports: readonly number[]): Promise<Balancer> {
  const backends: Backend[] = ports.map((port) => ({ port, up: true, connections: 0, failures: 0 }));
  const sockets = new Set<Socket>();
  let next = 0;
  const pick = (): Backend | undefined => {
    for (let i = 0; i < backends.length; i++) {
      const b = backends[(next + i) % backends.length] as Backend;
      if (b.up) {
        next = (next + i + 1) % backends.length;
        return b;
      }
    }
    return undefined;
  };
  const server: Server = createServer((client) => {
    sockets.add(client);
    client.on('close', () => sockets.delete(client));
    const backend = pick();
    if (!backend) {
      client.destroy();
      return;
    }
    backend.connections++;
    const upstream = createConnection({ host: '127.0.0.1', port: backend.port });
    sockets.add(upstream);
    upstream.on('close', () => sockets.delete(upstream));
    let failed = false;
    const fail = () => {
      if (failed) return;
      failed = true;
      backend.failures++;
      backend.up = false;
      client.destroy();
    };
    upstream.on('error', fail);
    client.on('error', () => upstream.destroy());
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return {
    port,
    url: (scheme, path = '') => `${scheme}://127.0.0.1:${port}${path}`,
    backends,
    markUp(p) {
      const b = backends.find((x) => x.port === p);
      if (b) b.up = true;
      else backends.push({ port: p, up: true, connections: 0, failures: 0 });
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
