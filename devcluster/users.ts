import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { type CaFiles, issueCertificate, readPem } from './certs.ts';
import { writeKubeconfig } from './kubeconfig.ts';

export interface MintParams {
  dir: string;
  apiserverUrl: string;
  ca: CaFiles;
}

/**
 * Issues a client certificate for `user` in `groups` from the cluster's CA and writes a
 * kubeconfig for it: the apiserver authenticates it like any real user, and RBAC decides.
 */
export async function mintUserKubeconfig(p: MintParams, user: string, groups: string[] = []): Promise<string> {
  if (user === '') throw new Error('mintUserKubeconfig: user must not be empty');
  // Unique per call: test workers may mint the same user at the same time.
  const name = `${user.replace(/[^A-Za-z0-9._-]/g, '_').slice(0, 60)}-${randomBytes(4).toString('hex')}`;
  const usersDir = join(p.dir, 'users');
  const files = await issueCertificate(p.ca, usersDir, name, { commonName: user, organizations: groups, client: true });
  const [{ certPem, keyPem }, caCertPem] = await Promise.all([readPem(files), readFile(p.ca.certFile, 'utf8')]);
  const path = join(usersDir, `${name}.kubeconfig`);
  await writeKubeconfig(path, { server: p.apiserverUrl, caCertPem, clientCertPem: certPem, clientKeyPem: keyPem, user });
  return path;
}
