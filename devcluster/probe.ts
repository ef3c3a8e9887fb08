import { request } from 'node:https';

export interface TlsClient {
  ca: string;
  cert?: string;
  key?: string;
}

/** One HTTPS GET with a short timeout; resolves with status and body, rejects on network errors. */
export function httpsGet(url: string, tls: TlsClient, timeoutMs = 2000): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'GET', ...tls, timeout: timeoutMs, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        body += chunk;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`no answer from ${url} within ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end();
  });
}
