// Many objects written to the local apiserver quickly, for benches at scale (tens of thousands of
// pods and Revisions): raw HTTPS over a keep-alive agent with bodies serialised once per object,
// since the typed client spends more CPU per request (model walking, a connection per burst) than
// a 2-core machine can spare next to the control plane it is loading.
import { Agent, request } from 'node:https';
import type { KubeConfig } from '@kubernetes/client-node';

export interface BulkWriter {
  /**
   * Sends one request; resolves with the parsed answer. Throttling (429) and an apiserver busy
   * for a moment (5xx) are retried after a short pause; any other failure rejects with the status.
   */
  send(method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE', path: string, body?: unknown, contentType?: string): Promise<unknown>;
  /** A GET whose answer is not JSON (the apiserver's /metrics). */
  getText(path: string): Promise<string>;
  close(): void;
}

export class BulkError extends Error {
  constructor(
    readonly status: number,
    readonly body: string,
  ) {
    super(`HTTP ${status}: ${body.slice(0, 300)}`);
    this.name = 'BulkError';
  }
}

const RETRIES = 8;

export async function bulkWriter(kc: KubeConfig, concurrency: number): Promise<BulkWriter> {
  const server = kc.getCurrentCluster()?.server;
  if (!server) throw new Error('kubeconfig has no current cluster');
  const options: Parameters<KubeConfig['applyToHTTPSOptions']>[0] = { headers: { accept: 'application/json' } };
  await kc.applyToHTTPSOptions(options);
  const agent = new Agent({ ...(options as object), keepAlive: true, maxSockets: concurrency });
  const once = (method: string, path: string, payload: string | undefined, contentType: string) =>
    new Promise<{ status: number; text: string }>((resolve, reject) => {
      const req = request(new URL(path, server), { ...(options as object), agent, method }, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          text += chunk;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
        res.on('error', reject);
      });
      req.on('error', reject);
      if (payload !== undefined) req.setHeader('content-type', contentType);
      req.end(payload);
    });
  return {
    async send(method, path, body, contentType = 'application/json') {
      const payload = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body);
      for (let attempt = 1; ; attempt++) {
        const { status, text } = await once(method, path, payload, contentType);
        if (status >= 200 && status < 300) return text === '' ? undefined : JSON.parse(text);
        if ((status === 429 || status >= 500) && attempt < RETRIES) {
          await new Promise((resolve) => setTimeout(resolve, 100 * attempt));
          continue;
        }
        throw new BulkError(status, text);
      }
    },
    async getText(path) {
      const { status, text } = await once('GET', path, undefined, 'text/plain');
      if (status !== 200) throw new BulkError(status, text);
      return text;
    },
    close: () => agent.destroy(),
  };
}

/** Runs `fn(i)` for i in [0, count), `concurrency` at a time; `progress` hears every 1,000. */
export async function inParallel(
  count: number,
  concurrency: number,
  fn: (i: number) => Promise<void>,
  progress?: (done: number) => void,
): Promise<void> {
  let next = 0;
  let done = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, count) }, async () => {
      while (next < count) {
        await fn(next++);
        if (++done % 1000 === 0) progress?.(done);
      }
    }),
  );
}
