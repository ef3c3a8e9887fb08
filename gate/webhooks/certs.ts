// The webhook serving certificate, kept in one Secret in the gate's namespace so every replica
// serves the same certificate and the apiserver needs one caBundle. A replica reuses what is
// stored while it is valid for the wanted names, and renews it (optimistic concurrency on the
// Secret decides which replica's renewal wins) once a third of its life is left.
import type { SecureContextOptions, Server as TlsServer } from 'node:tls';
import { CoreV1Api, type KubeConfig, type V1Secret } from '@kubernetes/client-node';
import { isConflict, isNotFound } from '../../api/kube-errors.ts';
import { certValidity, createCa, inspectCerts, issueServingCert, type PemPair, splitCertificates } from './cert-authority.ts';
import {
  type BundledCa,
  CA_VALIDITY_MS,
  caBundle,
  caValidity,
  LEAF_VALIDITY_MS,
  leafValidity,
  planCerts,
  RENEW_WHEN_REMAINING,
  renewAt,
  type ServingIdentity,
  type StoredCertFacts,
  servingSans,
} from './cert-policy.ts';

export const WEBHOOK_CERT_SECRET = 'knative-prestart-webhook-certs';

/** Secret keys: tls.crt/tls.key follow kubernetes.io/tls; the CA key lives beside them to sign renewals. */
const KEY = { cert: 'tls.crt', key: 'tls.key', caCert: 'ca.crt', caKey: 'ca.key', caBundle: 'ca-bundle.crt' } as const;

export interface WebhookCerts {
  /** PEM private key of the serving certificate. */
  key: string;
  /** PEM serving certificate. */
  cert: string;
  /** PEM CA certificates the apiserver must trust (the current CA first): the webhooks' caBundle. */
  caBundle: string;
  notAfter: Date;
  /** When the serving certificate is due for renewal. */
  renewAt: Date;
}

export interface WebhookCertOptions {
  /** The gate's namespace, where the Secret lives. */
  namespace: string;
  secretName?: string;
  /** The names the apiserver uses to reach the gate (Service and/or DNS names, IPs such as 127.0.0.1). */
  identity: ServingIdentity;
  caValidityMs?: number;
  leafValidityMs?: number;
  now?: () => Date;
}

interface Stored {
  secret: V1Secret;
  ca: PemPair;
  leaf: PemPair;
  bundle: string[];
  facts: StoredCertFacts | undefined;
}

const MAX_ATTEMPTS = 5;

/** Returns certificates valid for `identity`, creating or renewing the shared Secret when needed. */
export async function ensureWebhookCerts(kc: KubeConfig, options: WebhookCertOptions): Promise<WebhookCerts> {
  const core = kc.makeApiClient(CoreV1Api);
  const name = options.secretName ?? WEBHOOK_CERT_SECRET;
  const { namespace } = options;
  const sans = servingSans(options.identity);
  const now = options.now ?? (() => new Date());

  for (let attempt = 1; ; attempt++) {
    const secret = await readSecret(core, name, namespace);
    const stored = secret ? parseStored(secret) : undefined;
    const plan = planCerts(stored?.facts, sans, now());
    if (plan.action === 'reuse' && stored) return toWebhookCerts(stored.leaf, stored.bundle.join('\n'));

    const at = now();
    const ca = plan.action === 'renewLeaf' && stored ? stored.ca : await createCa(caValidity(at, options.caValidityMs ?? CA_VALIDITY_MS));
    const leaf = await issueServingCert(ca, sans, leafValidity(at, certValidity(ca.certPem), options.leafValidityMs ?? LEAF_VALIDITY_MS));
    const bundle = caBundle(bundledCa(ca.certPem), previousCas(stored), at);
    const data = encodeData(ca, leaf, bundle);
    try {
      if (secret) {
        await core.replaceNamespacedSecret({ name, namespace, body: { ...secret, data: { ...secret.data, ...data } } });
      } else {
        await core.createNamespacedSecret({
          namespace,
          body: {
            apiVersion: 'v1',
            kind: 'Secret',
            metadata: { name, namespace, labels: { 'app.kubernetes.io/part-of': 'knative-prestart' } },
            type: 'kubernetes.io/tls',
            data,
          },
        });
      }
      return toWebhookCerts(leaf, bundle.join('\n'));
    } catch (err) {
      // Another replica wrote first: its certificates are as good as ours, so read and reuse them.
      if (!isConflict(err) || attempt >= MAX_ATTEMPTS) throw err;
    }
  }
}

export interface CertRefresher {
  /** The certificates the servers currently use. */
  current(): WebhookCerts;
  stop(): void;
}

export interface KeepFreshOptions extends WebhookCertOptions {
  /** What the servers were started with (from ensureWebhookCerts). */
  initial: WebhookCerts;
  /** Servers (https.Server is one) that switch to renewed certificates via setSecureContext. */
  servers?: readonly TlsServer[];
  /** setSecureContext replaces the whole context: repeat here any TLS options the servers were created with. */
  tlsOptions?: SecureContextOptions;
  /**
   * Runs after every check, before the servers switch when `changed`: e.g. publish the caBundle
   * in the webhook configuration (and recreate it if it was deleted). If it throws, the servers
   * keep the old certificate and the check is repeated after retryAfterErrorMs.
   */
  publish?: (certs: WebhookCerts, changed: boolean) => void | Promise<void>;
  /** Runs after the servers switched to renewed certificates. */
  onChange?: (certs: WebhookCerts) => void;
  onError?: (err: unknown) => void;
  /** Look at the Secret at least this often, to pick up another replica's renewal (default 1 h). */
  maxCheckIntervalMs?: number;
  retryAfterErrorMs?: number;
}

/** Keeps the servers' certificate current until stopped. Timers do not keep the process alive. */
export function keepCertsFresh(kc: KubeConfig, options: KeepFreshOptions): CertRefresher {
  const maxInterval = options.maxCheckIntervalMs ?? 60 * 60 * 1000;
  const retryAfterError = options.retryAfterErrorMs ?? 60 * 1000;
  const now = options.now ?? (() => new Date());
  let current = options.initial;
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;

  const schedule = (delayMs: number): void => {
    if (stopped) return;
    // setTimeout fires at once for delays beyond 2^31-1 ms.
    timer = setTimeout(check, Math.max(0, Math.min(delayMs, 2 ** 31 - 1)));
    timer.unref();
  };
  const untilNextCheck = (): number => Math.min(current.renewAt.getTime() - now().getTime(), maxInterval);

  async function check(): Promise<void> {
    try {
      const certs = await ensureWebhookCerts(kc, options);
      if (stopped) return;
      const changed = certs.cert !== current.cert || certs.caBundle !== current.caBundle;
      await options.publish?.(certs, changed);
      if (changed && !stopped) {
        for (const server of options.servers ?? []) useCerts(server, certs, options.tlsOptions);
        current = certs;
        options.onChange?.(certs);
      }
      schedule(untilNextCheck());
    } catch (err) {
      options.onError?.(err);
      schedule(retryAfterError);
    }
  }

  schedule(untilNextCheck());
  return {
    current: () => current,
    stop: () => {
      stopped = true;
      if (timer) clearTimeout(timer);
    },
  };
}

/** TLS options for creating a server with these certificates. */
export function tlsServerOptions(certs: WebhookCerts, extra: SecureContextOptions = {}): SecureContextOptions {
  return { ...extra, key: certs.key, cert: certs.cert };
}

/** Switches a running server to new certificates; connections already open keep theirs. */
export function useCerts(server: TlsServer, certs: WebhookCerts, extra: SecureContextOptions = {}): void {
  server.setSecureContext(tlsServerOptions(certs, extra));
}

async function readSecret(core: CoreV1Api, name: string, namespace: string): Promise<V1Secret | undefined> {
  try {
    return await core.readNamespacedSecret({ name, namespace });
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
}

function parseStored(secret: V1Secret): Stored | undefined {
  const get = (key: string): string | undefined => {
    const value = secret.data?.[key];
    return value === undefined ? undefined : Buffer.from(value, 'base64').toString('utf8');
  };
  const [caCert, caKey, cert, key] = [get(KEY.caCert), get(KEY.caKey), get(KEY.cert), get(KEY.key)];
  if (!caCert || !caKey || !cert || !key) return undefined;
  const ca = { certPem: caCert, keyPem: caKey };
  const leaf = { certPem: cert, keyPem: key };
  const bundle = splitCertificates(get(KEY.caBundle) ?? caCert);
  let facts: StoredCertFacts | undefined;
  try {
    facts = inspectCerts(ca, leaf);
  } catch {
    // Unparsable PEM: treated like no certificates, so the gate heals a damaged Secret.
    facts = undefined;
  }
  return { secret, ca, leaf, bundle: bundle.length > 0 ? bundle : [caCert.trim()], facts };
}

function previousCas(stored: Stored | undefined): BundledCa[] {
  if (!stored) return [];
  const cas: BundledCa[] = [];
  for (const pem of [stored.ca.certPem, ...stored.bundle]) {
    try {
      cas.push(bundledCa(pem));
    } catch {
      // A damaged entry cannot be trusted anyway.
    }
  }
  return cas;
}

function bundledCa(pem: string): BundledCa {
  return { pem, notAfter: certValidity(pem).notAfter };
}

function encodeData(ca: PemPair, leaf: PemPair, bundle: readonly string[]): Record<string, string> {
  const b64 = (s: string): string => Buffer.from(s, 'utf8').toString('base64');
  return {
    [KEY.cert]: b64(leaf.certPem),
    [KEY.key]: b64(leaf.keyPem),
    [KEY.caCert]: b64(ca.certPem),
    [KEY.caKey]: b64(ca.keyPem),
    [KEY.caBundle]: b64(`${bundle.join('\n')}\n`),
  };
}

function toWebhookCerts(leaf: PemPair, bundle: string): WebhookCerts {
  const validity = certValidity(leaf.certPem);
  return {
    key: leaf.keyPem,
    cert: leaf.certPem,
    caBundle: `${bundle.trim()}\n`,
    notAfter: validity.notAfter,
    renewAt: renewAt(validity, RENEW_WHEN_REMAINING),
  };
}
