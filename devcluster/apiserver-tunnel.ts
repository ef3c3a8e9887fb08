// Stand-in for cluster DNS and the `kubernetes` Service, for HTTPS to the apiserver by its in-cluster
// name only: an HTTP forward proxy that takes `CONNECT kubernetes.default.svc:443` and pipes the
// connection to the apiserver on 127.0.0.1 (TLS stays end to end: the serving certificate names
// kubernetes.default.svc). Anything else is refused with 403, so nothing leaves this machine.
//
// Why: with `authentication-oidc` enabled, Knative Eventing's data plane reads the apiserver's
// OIDC discovery at https://kubernetes.default.svc (config-features `oidc-discovery-base-url`'s
// default) through its Kubernetes client, which honours HTTPS_PROXY. The service proxy
// (service-proxy.ts) carries the plain-HTTP data plane and refuses CONNECT; this carries only that.
import { appendFileSync } from 'node:fs';
import http from 'node:http';
import { connect } from 'node:net';
import type { Upstream } from './service-proxy.ts';

export interface ApiserverTunnel {
  /** One URL per listening address, in the order of `hosts`. */
  urls: string[];
  /** CONNECTs carried so far. */
  readonly tunnels: number;
  close(): Promise<void>;
}

/** The names a pod would use for the apiserver; only port 443. */
const APISERVER_NAMES = new Set(['kubernetes.default.svc', 'kubernetes.default.svc.cluster.local']);

export async function startApiserverTunnel(opts: { hosts: string[]; apiserver: Upstream; logFile?: string }): Promise<ApiserverTunnel> {
  const log = (line: string) => {
    if (opts.logFile) appendFileSync(opts.logFile, `${new Date().toISOString()} ${line}\n`);
  };
  let tunnels = 0;
  // CONNECTed sockets leave the server's bookkeeping: closed here on close().
  const open = new Set<{ destroy(): void }>();
  const servers: http.Server[] = [];
  const urls: string[] = [];
  for (const host of opts.hosts) {
    const server = http.createServer((req, res) => {
      log(`${req.method} ${req.url} -> refused (only CONNECT to the apiserver)`);
      res.writeHead(403).end();
    });
    server.on('connect', (req, socket, head) => {
      const [name, port] = (req.url ?? '').split(':');
      if (!name || !APISERVER_NAMES.has(name) || port !== '443') {
        log(`CONNECT ${req.url} -> refused`);
        socket.end('HTTP/1.1 403 Forbidden\r\n\r\n');
        return;
      }
      tunnels++;
      log(`CONNECT ${req.url} -> ${opts.apiserver.host}:${opts.apiserver.port}`);
      const upstream = connect(opts.apiserver.port, opts.apiserver.host, () => {
        socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
        if (head.length > 0) upstream.write(head);
        upstream.pipe(socket).pipe(upstream);
      });
      open.add(socket).add(upstream);
      const forget = () => {
        open.delete(socket);
        open.delete(upstream);
      };
      upstream.on('close', forget);
      upstream.on('error', () => socket.destroy());
      socket.on('error', () => upstream.destroy());
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, host, () => resolve());
    });
    servers.push(server);
    const { port } = server.address() as { port: number };
    urls.push(`http://${host}:${port}`);
  }
  return {
    urls,
    get tunnels() {
      return tunnels;
    },
    async close() {
      for (const s of open) s.destroy();
      for (const s of servers) s.closeAllConnections();
      await Promise.all(servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
    },
  };
}
