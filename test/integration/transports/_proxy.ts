// A real HTTP forward proxy on 127.0.0.1 standing in for cluster DNS: it takes absolute-form
// requests (`POST http://broker-ingress.knative-eventing.svc.cluster.local/ns/name`) for any
// host and forwards them to one fixed upstream, streaming both ways so that an upstream that
// holds its answer holds it through the proxy too. An upstream it cannot reach gets the
// client a 502, as a real proxy answers.
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ForwardedRequest {
  /** The request target as the client sent it (absolute-form). */
  target: string;
  headers: http.IncomingHttpHeaders;
}

export interface ForwardProxy {
  /** http://127.0.0.1:PORT */
  url: string;
  /** Every request the proxy took, in order. */
  forwarded: ForwardedRequest[];
  /** Client connections open right now. */
  connections(): Promise<number>;
  close(): Promise<void>;
}

const HOP_BY_HOP = new Set(['proxy-connection', 'proxy-authorization', 'connection', 'keep-alive']);

export function startForwardProxy(upstream: { host: string; port: number }): Promise<ForwardProxy> {
  const forwarded: ForwardedRequest[] = [];
  const server = http.createServer((req, res) => {
    const raw = req.url ?? '';
    if (!/^https?:\/\//.test(raw)) {
      res.writeHead(400, { 'content-type': 'text/plain' }).end('proxy: expected an absolute-form request target');
      return;
    }
    forwarded.push({ target: raw, headers: req.headers });
    const target = new URL(raw);
    const headers = Object.fromEntries(Object.entries(req.headers).filter(([name]) => !HOP_BY_HOP.has(name)));
    const out = http.request({
      host: upstream.host,
      port: upstream.port,
      method: req.method,
      path: `${target.pathname}${target.search}`,
      headers,
    });
    out.on('response', (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    out.on('error', (err) => {
      if (res.headersSent) res.destroy();
      else res.writeHead(502, { 'content-type': 'text/plain' }).end(`proxy: cannot reach ${target.host}: ${err.message}`);
    });
    // A client that goes away (the transport closing) takes the upstream request with it.
    res.on('close', () => {
      if (!res.writableFinished) out.destroy();
    });
    req.pipe(out);
  });
  // Long enough that only the client can be the one closing idle connections in a test.
  server.keepAliveTimeout = 60_000;
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      resolve({
        url: `http://127.0.0.1:${port}`,
        forwarded,
        connections: () => new Promise((done, fail) => server.getConnections((err, n) => (err ? fail(err) : done(n)))),
        close: () =>
          new Promise<void>((done) => {
            server.closeAllConnections();
            server.close(() => done());
          }),
      });
    });
  });
}
