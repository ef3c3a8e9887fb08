import { request } from 'node:https';
import type { KubeConfig } from '@kubernetes/client-node';

export interface KubeResponse {
  status: number;
  /** Parsed JSON when the body is JSON, else the text. */
  body: unknown;
}

/**
 * A raw request to the apiserver with the kubeconfig's credentials. For what the typed client
 * does not carry well: server-side apply of arbitrary YAML, discovery, exact status codes.
 */
export async function kubeRequest(
  kc: KubeConfig,
  method: string,
  path: string,
  body?: unknown,
  contentType = 'application/json',
): Promise<KubeResponse> {
  const server = kc.getCurrentCluster()?.server;
  if (!server) throw new Error('kubeconfig has no current cluster');
  const url = new URL(path, server);
  const options: Parameters<KubeConfig['applyToHTTPSOptions']>[0] = { method, headers: { accept: 'application/json' } };
  await kc.applyToHTTPSOptions(options);
  const payload = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request(url, { ...(options as object), method }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        text += chunk;
      });
      res.on('end', () => {
        let parsed: unknown = text;
        try {
          parsed = text === '' ? undefined : JSON.parse(text);
        } catch {
          // Not JSON: keep the text.
        }
        resolve({ status: res.statusCode ?? 0, body: parsed });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    if (payload !== undefined) {
      req.setHeader('content-type', contentType);
      req.end(payload);
    } else req.end();
  });
}

/** The message of a Kubernetes Status body, or the raw body. */
export function statusMessage(res: KubeResponse): string {
  const b = res.body as { message?: unknown } | undefined;
  return typeof b?.message === 'string' ? b.message : JSON.stringify(res.body);
}
