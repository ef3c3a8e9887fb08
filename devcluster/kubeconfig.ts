import { writeFile } from 'node:fs/promises';

export interface KubeconfigParams {
  server: string;
  caCertPem: string;
  clientCertPem: string;
  clientKeyPem: string;
  user: string;
}

const b64 = (s: string) => Buffer.from(s).toString('base64');

/**
 * Writes a self-contained kubeconfig (certs embedded, so it stays valid wherever it is copied).
 * JSON is YAML, and both client-go and @kubernetes/client-node read it.
 */
export async function writeKubeconfig(path: string, p: KubeconfigParams): Promise<void> {
  const config = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'knative-prestart', cluster: { server: p.server, 'certificate-authority-data': b64(p.caCertPem) } }],
    users: [{ name: p.user, user: { 'client-certificate-data': b64(p.clientCertPem), 'client-key-data': b64(p.clientKeyPem) } }],
    contexts: [{ name: p.user, context: { cluster: 'knative-prestart', user: p.user } }],
    'current-context': p.user,
    preferences: {},
  };
  await writeFile(path, `${JSON.stringify(config, null, 2)}\n`, { mode: 0o600 });
}
