// A test hook service: a real HTTP server on 127.0.0.1 that records each request the gate sends
// it and answers as the test says.
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ReceivedRequest {
  headers: IncomingHttpHeaders;
  body: string;
  ceId: string;
  data: { action: string; attempt: number; replyTo?: string; revision: { name: string }; hook: { name: string } };
  correlationid: string;
}

export interface HookServer {
  url: string;
  requests: ReceivedRequest[];
  close(): Promise<void>;
}

/**
 * A hook service. `answer` decides the HTTP answer for each request: a status and optional
 * headers/body (e.g. 200 with a completed CloudEvent), after any async work it wants.
 */
export async function startHookServer(
  answer: (req: ReceivedRequest) => Promise<{ status: number; headers?: Record<string, string>; body?: string }>,
): Promise<HookServer> {
  const requests: ReceivedRequest[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const received: ReceivedRequest = {
        headers: req.headers,
        body,
        ceId: String(req.headers['ce-id'] ?? ''),
        data: JSON.parse(body || '{}'),
        correlationid: String(req.headers['ce-correlationid'] ?? ''),
      };
      requests.push(received);
      answer(received).then(
        (a) => {
          res.writeHead(a.status, a.headers ?? {});
          res.end(a.body ?? '');
        },
        (err: unknown) => {
          res.writeHead(500);
          res.end(String(err));
        },
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
