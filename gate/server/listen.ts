// Opening and closing the gate's HTTP servers (the reply sink over HTTP, the webhooks over HTTPS).
import { createServer as createHttpServer, type RequestListener, type Server } from 'node:http';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';

// Go's HTTP client (the apiserver calling webhooks, hooks replying) keeps idle connections for
// 90 s; Node closes them after 5 s by default, so a request sent on a connection Node is closing
// at that instant fails with "connection reset by peer" (seen in bench/webhook-latency.ts). The
// server must outlive the client's idle timeout.
const KEEP_ALIVE_MS = 120_000;

/** A serving certificate that may be rotated while the server runs (gate/webhooks/tls.ts). */
export interface RotatingCertificate {
  current(): { keyPem: string; certPem: string };
  onRotate(listener: (pair: { keyPem: string; certPem: string }) => void): void;
}

export function listenHttp(app: RequestListener, host: string, portNumber: number): Promise<Server> {
  return listen(createHttpServer(app), host, portNumber);
}

/** An HTTPS server that serves the rotated certificate from the moment it is rotated. */
export async function listenHttps(app: RequestListener, cert: RotatingCertificate, host: string, portNumber: number): Promise<HttpsServer> {
  const server = await listen(createHttpsServer({ key: cert.current().keyPem, cert: cert.current().certPem }, app), host, portNumber);
  cert.onRotate((pair) => server.setSecureContext({ key: pair.keyPem, cert: pair.certPem }));
  return server;
}

function listen<S extends Server | HttpsServer>(server: S, host: string, portNumber: number): Promise<S> {
  server.keepAliveTimeout = KEEP_ALIVE_MS;
  server.headersTimeout = KEEP_ALIVE_MS + 5_000;
  return new Promise((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) =>
      reject(err.code === 'EADDRINUSE' ? new Error(`port ${host}:${portNumber} is already in use`) : err),
    );
    server.listen(portNumber, host, () => resolve(server));
  });
}

export function port(server: Server | HttpsServer): number {
  return (server.address() as AddressInfo).port;
}

export function close(server: Server | HttpsServer): Promise<void> {
  server.closeAllConnections();
  return new Promise((resolve) => server.close(() => resolve()));
}
