import { rmSync } from 'node:fs';
import { mkdtemp, readFile } from 'node:fs/promises';
import type { RequestListener } from 'node:http';
import { createServer, type Server } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createCertificateAuthority, issueCertificate, readPem } from './certs.ts';

export interface HttpsTestServer {
  /** https://127.0.0.1:<port> */
  url: string;
  port: number;
  /** Base64 of the CA's PEM, as a webhook's clientConfig.caBundle wants it. */
  caBundle: string;
  caCertPem: string;
  server: Server;
  close(): Promise<void>;
}

/**
 * Serves `handler` (a plain request listener or an express app) over HTTPS on a free port of
 * 127.0.0.1, with a certificate for IP 127.0.0.1 from a CA of its own. The apiserver can then
 * call it as a webhook: clientConfig.url = url + path, clientConfig.caBundle = caBundle.
 */
export async function startHttpsServer(handler: RequestListener): Promise<HttpsTestServer> {
  const dir = await mkdtemp(join(tmpdir(), 'knative-prestart-https-'));
  let pems: { certPem: string; keyPem: string; caCertPem: string };
  try {
    const ca = await createCertificateAuthority(dir, 'ca', 'knative-prestart-test-webhook-ca');
    const leaf = await issueCertificate(ca, dir, 'server', {
      commonName: '127.0.0.1',
      server: { ips: ['127.0.0.1'], dnsNames: ['localhost'] },
    });
    const { certPem, keyPem } = await readPem(leaf);
    pems = { certPem, keyPem, caCertPem: await readFile(ca.certFile, 'utf8') };
  } finally {
    // The keys live in memory from here on; nothing to leave behind.
    rmSync(dir, { recursive: true, force: true });
  }
  const server = createServer({ cert: pems.certPem, key: pems.keyPem }, handler);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host: '127.0.0.1', port: 0 }, () => resolve());
  });
  const addr = server.address();
  if (addr === null || typeof addr === 'string') throw new Error('https server has no port');
  let closed: Promise<void> | undefined;
  return {
    url: `https://127.0.0.1:${addr.port}`,
    port: addr.port,
    caBundle: Buffer.from(pems.caCertPem).toString('base64'),
    caCertPem: pems.caCertPem,
    server,
    close: () => {
      closed ??= new Promise<void>((resolve) => {
        // The apiserver keeps connections alive: drop them, or close() waits for their timeout.
        server.close(() => resolve());
        server.closeAllConnections();
      });
      return closed;
    },
  };
}
