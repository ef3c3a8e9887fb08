import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { ClusterStartError } from './errors.ts';

const run = promisify(execFile);

// Certificates come from the openssl CLI: it is on every Debian machine, issues a cert in
// ~10 ms, and keeps the CA a pair of plain files any process (a test worker minting a tenant's
// kubeconfig) can sign with. ECDSA P-256 keys: instant to generate, accepted by Go and Node TLS.

/** A CA as two PEM files. */
export interface CaFiles {
  certFile: string;
  keyFile: string;
}

export interface CertFiles {
  certFile: string;
  keyFile: string;
}

export interface IssueOptions {
  commonName: string;
  /** Become the O= attributes: Kubernetes reads them as the user's groups. */
  organizations?: string[];
  /** Adds serverAuth and these subject alternative names. */
  server?: { ips?: string[]; dnsNames?: string[] };
  /** Adds clientAuth. */
  client?: boolean;
}

const days = '3650';

// A config of our own so the machine's openssl.cnf adds no extensions behind our back.
async function minimalConfig(dir: string, name: string): Promise<string> {
  const path = join(dir, `${name}.openssl.cnf`);
  await writeFile(path, '[req]\ndistinguished_name = dn\nprompt = no\n[dn]\n');
  return path;
}

async function openssl(args: string[]): Promise<void> {
  try {
    await run('openssl', args);
  } catch (err) {
    const e = err as NodeJS.ErrnoException & { stderr?: string };
    if (e.code === 'ENOENT') throw new ClusterStartError('openssl is not installed: apt-get install -y openssl');
    throw new ClusterStartError(`openssl ${args[0]} failed: ${(e.stderr ?? e.message).trim().split('\n').pop()}`);
  }
}

/** `/` and `+` separate attributes in openssl's -subj syntax; escape them inside values. */
function subjectValue(value: string): string {
  return value.replace(/[\\/+]/g, (c) => `\\${c}`);
}

export function subject(commonName: string, organizations: string[] = []): string {
  return [`/CN=${subjectValue(commonName)}`, ...organizations.map((o) => `/O=${subjectValue(o)}`)].join('');
}

const newKey = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-noenc'];

export async function createCertificateAuthority(dir: string, name: string, commonName: string): Promise<CaFiles> {
  await mkdir(dir, { recursive: true });
  const files = { certFile: join(dir, `${name}.crt`), keyFile: join(dir, `${name}.key`) };
  await openssl([
    'req',
    '-x509',
    '-new',
    ...newKey,
    '-config',
    await minimalConfig(dir, name),
    '-days',
    days,
    '-keyout',
    files.keyFile,
    '-out',
    files.certFile,
    '-subj',
    subject(commonName),
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign,digitalSignature',
  ]);
  return files;
}

export async function issueCertificate(ca: CaFiles, dir: string, name: string, opts: IssueOptions): Promise<CertFiles> {
  await mkdir(dir, { recursive: true });
  const files = { certFile: join(dir, `${name}.crt`), keyFile: join(dir, `${name}.key`) };
  const usages: string[] = [];
  const ext: string[] = ['-addext', 'basicConstraints=critical,CA:FALSE', '-addext', 'keyUsage=critical,digitalSignature,keyEncipherment'];
  if (opts.server) {
    usages.push('serverAuth');
    const sans = [...(opts.server.ips ?? []).map((ip) => `IP:${ip}`), ...(opts.server.dnsNames ?? []).map((d) => `DNS:${d}`)];
    if (sans.length > 0) ext.push('-addext', `subjectAltName=${sans.join(',')}`);
  }
  if (opts.client) usages.push('clientAuth');
  if (usages.length > 0) ext.push('-addext', `extendedKeyUsage=${usages.join(',')}`);
  await openssl([
    'req',
    '-x509',
    '-new',
    ...newKey,
    '-config',
    await minimalConfig(dir, name),
    '-days',
    days,
    '-CA',
    ca.certFile,
    '-CAkey',
    ca.keyFile,
    '-set_serial',
    `0x${randomBytes(12).toString('hex')}`,
    '-keyout',
    files.keyFile,
    '-out',
    files.certFile,
    '-subj',
    subject(opts.commonName, opts.organizations),
    ...ext,
  ]);
  return files;
}

/** A bare key pair: kube-apiserver signs service-account tokens with the private half. */
export async function createSigningKeyPair(dir: string, name: string): Promise<{ keyFile: string; publicKeyFile: string }> {
  await mkdir(dir, { recursive: true });
  const keyFile = join(dir, `${name}.key`);
  const publicKeyFile = join(dir, `${name}.pub`);
  await openssl(['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', keyFile]);
  await openssl(['pkey', '-in', keyFile, '-pubout', '-out', publicKeyFile]);
  return { keyFile, publicKeyFile };
}

export async function readPem(files: CertFiles): Promise<{ certPem: string; keyPem: string }> {
  const [certPem, keyPem] = await Promise.all([readFile(files.certFile, 'utf8'), readFile(files.keyFile, 'utf8')]);
  return { certPem, keyPem };
}
