// The stand-in for cluster DNS and Services: an HTTP forward proxy that Knative's data plane
// (and the gate's Broker transport) are pointed at with HTTP_PROXY. Knative addresses its parts
// by `<service>.<namespace>.svc.cluster.local` names; the proxy maps each name to the loopback
// (or network-namespace) address where that part listens, and answers 502 for any other name,
// so nothing leaves the test's own addresses. Go and the gate never proxy loopback
// destinations, so the apiserver and subscribers on 127.0.0.1 are dialled directly.
// HTTPS (CONNECT) is refused: the data plane runs without TLS here, and a refused CONNECT is how
// an OIDC discovery request for kubernetes.default.svc ends without a DNS lookup.
import { appendFileSync } from 'node:fs';
import http from 'node:http';

export interface Upstream {
  host: string;
  port: number;
}

export interface ForwardedRequest {
  /** The request target as the client sent it (absolute-form). */
  target: string;
  headers: http.IncomingHttpHeaders;
}

export interface ServiceProxy {
  /** One URL per listening address, e.g. http://127.0.0.1:41234; `url` is the first. */
  urls: string[];
  url: string;
  /** Every request the proxy routed, in order. */
  forwarded: ForwardedRequest[];
  /** Client connections open right now. */
  connections(): Promise<number>;
  close(): Promise<void>;
}

export interface ServiceProxyOptions {
  /** Addresses to listen on (one port for all): loopback, and a network namespace's host end. Default 127.0.0.1. */
  hosts?: string[];
  route: (hostname: string) => Upstream | undefined;
  /** One line per request: method, URL, where it went. */
  logFile?: string;
}

/** Headers about the hop to the proxy, not for the upstream. */
const HOP_BY_HOP = new Set(['proxy-connection', 'proxy-authorization', 'connection', 'keep-alive']);

export async function startServiceProxy(opts: ServiceProxyOptions): Promise<ServiceProxy> {
  const logFile = opts.logFile;
  const log = (line: string) => {
    if (logFile) appendFileSync(logFile, `${new Date().toISOString()} ${line}\n`);
  };
  const hosts = opts.hosts ?? ['127.0.0.1'];
  const forwarded: ForwardedRequest[] = [];
  const agent = new http.Agent({ keepAlive: true });
  const handler: http.RequestListener = (req, res) => {
    let target: URL;
    try {
      target = new URL(req.url ?? '');
    } catch {
      res.writeHead(400, { 'content-type': 'text/plain' }).end('a proxy request needs an absolute URL');
      return;
    }
    const upstream = opts.route(target.hostname);
    log(`${req.method} ${target.href} -> ${upstream ? `${upstream.host}:${upstream.port}` : 'no route'}`);
    if (!upstream) {
      res.writeHead(502, { 'content-type': 'text/plain' }).end(`service proxy: no route for ${target.hostname}`);
      return;
    }
    forwarded.push({ target: target.href, headers: req.headers });
    const headers = Object.fromEntries(Object.entries(req.headers).filter(([name]) => !HOP_BY_HOP.has(name)));
    const forward = http.request(
      { host: upstream.host, port: upstream.port, method: req.method, path: `${target.pathname}${target.search}`, headers, agent },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    forward.on('error', (err) => {
      log(`  ${target.hostname}: ${err.message}`);
      if (res.headersSent) res.destroy();
      else res.writeHead(502, { 'content-type': 'text/plain' }).end(`service proxy: cannot reach ${target.hostname}: ${err.message}`);
    });
    // A client that goes away (the gate's Broker transport closing, a timeout) cancels the forward.
    res.on('close', () => {
      if (!res.writableFinished) forward.destroy();
    });
    req.pipe(forward);
  };
  const servers: http.Server[] = [];
  let port = 0;
  for (const host of hosts) {
    const server = http.createServer({ keepAliveTimeout: 60_000 }, handler);
    server.on('connect', (req, socket) => {
      log(`CONNECT ${req.url} -> refused`);
      socket.end('HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n');
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => resolve());
    });
    port = (server.address() as { port: number }).port;
    servers.push(server);
  }
  const urls = hosts.map((h) => `http://${h}:${port}`);
  return {
    urls,
    url: urls[0] as string,
    forwarded,
    connections: async () => {
      const counts = await Promise.all(
        servers.map((s) => new Promise<number>((done, fail) => s.getConnections((err, n) => (err ? fail(err) : done(n))))),
      );
      return counts.reduce((a, b) => a + b, 0);
    },
    async close() {
      agent.destroy();
      await Promise.all(
        servers.map(
          (s) =>
            new Promise<void>((resolve) => {
              s.close(() => resolve());
              s.closeAllConnections();
            }),
        ),
      );
    },
  };
}
