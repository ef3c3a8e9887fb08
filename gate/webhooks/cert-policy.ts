// When the webhook certificates must be renewed, and for which names: plain decisions over
// dates and name lists, so they can be reasoned about (and tested) without crypto or an API.
import { isIP } from 'node:net';

const DAY_MS = 24 * 60 * 60 * 1000;
export const CA_VALIDITY_MS = 365 * DAY_MS;
export const LEAF_VALIDITY_MS = 30 * DAY_MS;
/** Renew once less than this fraction of a certificate's lifetime is left. */
export const RENEW_WHEN_REMAINING = 1 / 3;
/** Certificates start a little in the past: the apiserver's clock may lag the gate's. */
export const BACKDATE_MS = 5 * 60 * 1000;

export interface Validity {
  notBefore: Date;
  notAfter: Date;
}

/** The names a serving certificate is valid for. */
export interface SubjectAltNames {
  dnsNames: string[];
  ipAddresses: string[];
}

/** Where the apiserver reaches the gate: through a Service, and/or by explicit names and IPs. */
export interface ServingIdentity {
  service?: { name: string; namespace: string };
  dnsNames?: readonly string[];
  ipAddresses?: readonly string[];
}

/**
 * SANs for the serving certificate. The apiserver calls a Service-referenced webhook as
 * `<svc>.<ns>.svc`; the shorter and longer forms cover in-cluster clients and proxies.
 */
export function servingSans(identity: ServingIdentity): SubjectAltNames {
  const dns: string[] = [];
  if (identity.service) {
    const { name, namespace } = identity.service;
    dns.push(name, `${name}.${namespace}`, `${name}.${namespace}.svc`, `${name}.${namespace}.svc.cluster.local`);
  }
  dns.push(...(identity.dnsNames ?? []));
  const ips = [...(identity.ipAddresses ?? [])].map((ip) => ip.trim());
  for (const ip of ips) {
    if (isIP(ip) === 0) throw new Error(`webhook certificate: "${ip}" is not an IP address`);
  }
  const sans = { dnsNames: unique(dns.map((n) => n.trim().toLowerCase())), ipAddresses: unique(ips) };
  if (sans.dnsNames.length === 0 && sans.ipAddresses.length === 0) {
    throw new Error('webhook certificate: no DNS name or IP address to issue it for (give a service, dnsNames or ipAddresses)');
  }
  return sans;
}

/** Same names, in any order. */
export function sameSans(a: SubjectAltNames, b: SubjectAltNames): boolean {
  return (
    sameSet(
      a.dnsNames.map((n) => n.toLowerCase()),
      b.dnsNames.map((n) => n.toLowerCase()),
    ) && sameSet(a.ipAddresses, b.ipAddresses)
  );
}

/** The moment a certificate should be replaced: when `fraction` of its lifetime is left. */
export function renewAt(validity: Validity, fraction: number = RENEW_WHEN_REMAINING): Date {
  const lifetime = validity.notAfter.getTime() - validity.notBefore.getTime();
  return new Date(validity.notAfter.getTime() - lifetime * fraction);
}

export function isRenewalDue(validity: Validity, now: Date, fraction: number = RENEW_WHEN_REMAINING): boolean {
  return now.getTime() >= renewAt(validity, fraction).getTime();
}

export function caValidity(now: Date, lifetimeMs: number = CA_VALIDITY_MS): Validity {
  return { notBefore: new Date(now.getTime() - BACKDATE_MS), notAfter: new Date(now.getTime() + lifetimeMs) };
}

/** A leaf never outlives its CA: a chain with an expired CA does not verify. */
export function leafValidity(now: Date, ca: Validity, lifetimeMs: number = LEAF_VALIDITY_MS): Validity {
  const notAfter = Math.min(now.getTime() + lifetimeMs, ca.notAfter.getTime());
  return { notBefore: new Date(now.getTime() - BACKDATE_MS), notAfter: new Date(notAfter) };
}

/** What the gate learnt from the certificates stored in the Secret. */
export interface StoredCertFacts {
  ca: Validity & { keyMatches: boolean };
  leaf: Validity & SubjectAltNames & { keyMatches: boolean; issuedByCa: boolean };
}

export type CertPlan =
  | { action: 'reuse' }
  /** New serving certificate from the stored CA. */
  | { action: 'renewLeaf'; reason: string }
  /** New CA and serving certificate; the old CA stays in the bundle until it expires. */
  | { action: 'renewAll'; reason: string };

export function planCerts(
  stored: StoredCertFacts | undefined,
  wanted: SubjectAltNames,
  now: Date,
  fraction: number = RENEW_WHEN_REMAINING,
): CertPlan {
  if (!stored) return { action: 'renewAll', reason: 'no usable certificates stored' };
  if (!stored.ca.keyMatches) return { action: 'renewAll', reason: 'the stored CA key does not match the CA certificate' };
  if (isRenewalDue(stored.ca, now, fraction)) {
    return { action: 'renewAll', reason: `the CA expires at ${stored.ca.notAfter.toISOString()}` };
  }
  if (!stored.leaf.issuedByCa) return { action: 'renewLeaf', reason: 'the serving certificate was not issued by the stored CA' };
  if (!stored.leaf.keyMatches) return { action: 'renewLeaf', reason: 'the stored serving key does not match its certificate' };
  if (!sameSans(stored.leaf, wanted)) return { action: 'renewLeaf', reason: 'the serving names changed' };
  if (isRenewalDue(stored.leaf, now, fraction)) {
    return { action: 'renewLeaf', reason: `the serving certificate expires at ${stored.leaf.notAfter.toISOString()}` };
  }
  return { action: 'reuse' };
}

/**
 * When to look at the Secret again: at the next renewal, but at least every `maxIntervalMs`,
 * so a replica picks up certificates another replica renewed.
 */
export function nextCheckAt(stored: StoredCertFacts, now: Date, maxIntervalMs: number, fraction: number = RENEW_WHEN_REMAINING): Date {
  const due = Math.min(renewAt(stored.leaf, fraction).getTime(), renewAt(stored.ca, fraction).getTime());
  return new Date(Math.max(now.getTime(), Math.min(due, now.getTime() + maxIntervalMs)));
}

export interface BundledCa {
  pem: string;
  notAfter: Date;
}

/**
 * The CAs the apiserver should trust: the current one first, then older ones that have not
 * expired, so replicas still serving a certificate from the previous CA keep working until they
 * reload.
 */
export function caBundle(current: BundledCa, previous: readonly BundledCa[], now: Date): string[] {
  const pems = [current.pem.trim()];
  for (const ca of previous) {
    const pem = ca.pem.trim();
    if (ca.notAfter.getTime() > now.getTime() && !pems.includes(pem)) pems.push(pem);
  }
  return pems;
}

function unique(values: readonly string[]): string[] {
  return [...new Set(values.filter((v) => v !== ''))];
}

function sameSet(a: readonly string[], b: readonly string[]): boolean {
  const sa = new Set(a);
  const sb = new Set(b);
  return sa.size === sb.size && [...sa].every((v) => sb.has(v));
}
