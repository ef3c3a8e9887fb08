// The gate's own small CA: ECDSA P-256 keys, a self-signed CA and serving certificates it
// issues, as PEM. No Kubernetes here; certs.ts stores the results.
//
// Certificates are made with @peculiar/x509, loaded only when one is made (a new install, a
// renewal): a replica that starts with valid stored certificates reads them with node:crypto
// alone and never loads it (nor tsyringe and reflect-metadata, which it brings).
import { createPrivateKey, X509Certificate as NodeX509Certificate, webcrypto } from 'node:crypto';
import { isIP } from 'node:net';
import type * as X509 from '@peculiar/x509';
import type { StoredCertFacts, SubjectAltNames, Validity } from './cert-policy.ts';

let library: Promise<typeof X509> | undefined;
/** @peculiar/x509, loaded at the first certificate made; it (through tsyringe) needs the Reflect metadata API first. */
function loadX509(): Promise<typeof X509> {
  // A CommonJS package: Node's import() gives its exports as names and as `default`; the bundle
  // (scripts/bundle.mjs) gives `default` alone.
  library ??= import('reflect-metadata')
    .then(() => import('@peculiar/x509'))
    .then((mod) => (mod as unknown as { default?: typeof X509 }).default ?? mod);
  return library;
}

const crypto = webcrypto;
type CryptoKey = webcrypto.CryptoKey;
type CryptoKeyPair = webcrypto.CryptoKeyPair;
const KEY_ALGORITHM = { name: 'ECDSA', namedCurve: 'P-256' } as const;
const SIGNING_ALGORITHM = { name: 'ECDSA', hash: 'SHA-256' } as const;

export interface PemPair {
  certPem: string;
  keyPem: string;
}

export async function createCa(validity: Validity, commonName = 'knative-prestart webhook CA'): Promise<PemPair> {
  const x509 = await loadX509();
  const keys = await generateKeys();
  const cert = await x509.X509CertificateGenerator.createSelfSigned(
    {
      name: [{ CN: [commonName] }],
      notBefore: validity.notBefore,
      notAfter: validity.notAfter,
      keys,
      signingAlgorithm: SIGNING_ALGORITHM,
      extensions: [
        // pathLength 0: this CA signs serving certificates only, never another CA.
        new x509.BasicConstraintsExtension(true, 0, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
        await x509.SubjectKeyIdentifierExtension.create(keys.publicKey, false, crypto),
      ],
    },
    crypto,
  );
  return { certPem: cert.toString('pem'), keyPem: await exportPrivateKey(x509, keys.privateKey) };
}

export async function issueServingCert(ca: PemPair, sans: SubjectAltNames, validity: Validity): Promise<PemPair> {
  const x509 = await loadX509();
  const caCert = new x509.X509Certificate(ca.certPem);
  const caKey = await crypto.subtle.importKey('pkcs8', x509.PemConverter.decodeFirst(ca.keyPem), KEY_ALGORITHM, false, ['sign']);
  const keys = await generateKeys();
  const names = [
    ...sans.dnsNames.map((value) => ({ type: 'dns' as const, value })),
    ...sans.ipAddresses.map((value) => ({ type: 'ip' as const, value })),
  ];
  const cert = await x509.X509CertificateGenerator.create(
    {
      // Clients match the SANs; the CN is only for people reading the certificate.
      subject: [{ CN: ['knative-prestart webhook'] }],
      // The CA's own encoded name, so issuer and subject compare byte for byte (Go does).
      issuer: caCert.subjectName,
      notBefore: validity.notBefore,
      notAfter: validity.notAfter,
      publicKey: keys.publicKey,
      signingKey: caKey,
      signingAlgorithm: SIGNING_ALGORITHM,
      extensions: [
        new x509.BasicConstraintsExtension(false, undefined, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
        new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth], false),
        new x509.SubjectAlternativeNameExtension(names, false),
        await x509.AuthorityKeyIdentifierExtension.create(caCert, false, crypto),
        await x509.SubjectKeyIdentifierExtension.create(keys.publicKey, false, crypto),
      ],
    },
    crypto,
  );
  return { certPem: cert.toString('pem'), keyPem: await exportPrivateKey(x509, keys.privateKey) };
}

export function certValidity(certPem: string): Validity {
  const cert = new NodeX509Certificate(certPem);
  // OpenSSL's form, e.g. "Dec  1 10:44:11 2026 GMT" (whole seconds, as X.509 stores them).
  return { notBefore: parsedTime(cert.validFrom), notAfter: parsedTime(cert.validTo) };
}

function parsedTime(text: string): Date {
  const t = new Date(text);
  if (Number.isNaN(t.getTime())) throw new Error(`certificate: unreadable validity time "${text}"`);
  return t;
}

/** One name of Node's subjectAltName text: `DNS:name` or `IP Address:addr`, JSON-quoted when it holds a comma or quote. */
const SAN_ENTRY = /(DNS|IP Address):("(?:[^"\\]|\\.)*"|[^,]*)(?:, |$)/g;

export function certSans(certPem: string): SubjectAltNames {
  const sans: SubjectAltNames = { dnsNames: [], ipAddresses: [] };
  for (const [, type, raw] of (new NodeX509Certificate(certPem).subjectAltName ?? '').matchAll(SAN_ENTRY)) {
    const value = raw?.startsWith('"') ? (JSON.parse(raw) as string) : (raw ?? '');
    if (type === 'DNS') sans.dnsNames.push(value);
    else sans.ipAddresses.push(canonicalIp(value));
  }
  return sans;
}

/** OpenSSL spells IPv6 out in full and in upper case (0:0:0:0:0:0:0:1); the wanted names use the short form (::1). */
function canonicalIp(ip: string): string {
  return isIP(ip) === 6 ? new URL(`http://[${ip}]/`).hostname.slice(1, -1) : ip;
}

export function isIssuedBy(certPem: string, caPem: string): boolean {
  const cert = new NodeX509Certificate(certPem);
  const ca = new NodeX509Certificate(caPem);
  return cert.checkIssued(ca) && cert.verify(ca.publicKey);
}

export function keyMatchesCert(keyPem: string, certPem: string): boolean {
  return new NodeX509Certificate(certPem).checkPrivateKey(createPrivateKey(keyPem));
}

/** Everything planCerts needs to know about a stored CA and serving pair. Throws on unparsable PEM. */
export function inspectCerts(ca: PemPair, leaf: PemPair): StoredCertFacts {
  return {
    ca: { ...certValidity(ca.certPem), keyMatches: keyMatchesCert(ca.keyPem, ca.certPem) },
    leaf: {
      ...certValidity(leaf.certPem),
      ...certSans(leaf.certPem),
      keyMatches: keyMatchesCert(leaf.keyPem, leaf.certPem),
      issuedByCa: isIssuedBy(leaf.certPem, ca.certPem),
    },
  };
}

/** The certificates of a PEM bundle, each as its own PEM block. */
export function splitCertificates(bundle: string): string[] {
  return bundle.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
}

async function generateKeys(): Promise<CryptoKeyPair> {
  return crypto.subtle.generateKey(KEY_ALGORITHM, true, ['sign', 'verify']);
}

async function exportPrivateKey(x509: typeof X509, key: CryptoKey): Promise<string> {
  return x509.PemConverter.encode(await crypto.subtle.exportKey('pkcs8', key), 'PRIVATE KEY');
}
