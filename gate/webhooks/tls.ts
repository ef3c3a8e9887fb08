// The gate's webhook TLS, tied to its configuration: certificates from the shared Secret, the
// MutatingWebhookConfiguration that trusts them, and renewal that updates the configuration's
// caBundle before the HTTPS server switches certificates.
import { isIP } from 'node:net';
import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { GateConfig } from '../config.ts';
import type { ServingIdentity } from './cert-policy.ts';
import { ensureWebhookCerts, keepCertsFresh, WEBHOOK_CERT_SECRET, type WebhookCerts } from './certs.ts';
import { parseLabelSelector } from './label-selector.ts';
import { ensureWebhookConfiguration, type RegistrationResult } from './registration.ts';
import { WEBHOOK_CONFIGURATION_NAME, type WebhookConfigurationOptions } from './webhook-configuration.ts';

export interface CertPair {
  keyPem: string;
  certPem: string;
  /** PEM CA certificates the apiserver trusts for this gate. */
  caBundle: string;
}

export interface WebhookTls {
  current(): CertPair;
  /** Called after a renewal, once the webhook configuration trusts the new certificate. */
  onRotate(listener: (pair: CertPair) => void): void;
  /**
   * Writes the webhook configuration. `webhookUrl` (where the server listens) is used only when
   * the config gives neither a webhook URL nor a Service.
   */
  register(webhookUrl: string): Promise<RegistrationResult>;
  stop(): void;
}

const DEFAULT_INSTANCE = 'default';

/** The default instance keeps the names config/ uses; other instances get their own objects. */
export function webhookConfigurationName(instance: string): string {
  return instance === DEFAULT_INSTANCE ? WEBHOOK_CONFIGURATION_NAME : `${WEBHOOK_CONFIGURATION_NAME}-${instance}`;
}

export function certSecretName(instance: string): string {
  return instance === DEFAULT_INSTANCE ? WEBHOOK_CERT_SECRET : `${WEBHOOK_CERT_SECRET}-${instance}`;
}

/** The names the apiserver will use to reach this gate: the URL's host, or the Service. */
export function servingIdentity(webhook: GateConfig['webhook']): ServingIdentity {
  const dnsNames: string[] = [];
  const ipAddresses: string[] = [];
  const addHost = (host: string): void => {
    const h = host.replace(/^\[|\]$/g, '');
    if (isIP(h) !== 0) ipAddresses.push(isWildcard(h) ? '127.0.0.1' : h);
    else if (h !== '') dnsNames.push(h);
  };
  if (webhook.urlBase) addHost(new URL(webhook.urlBase).hostname);
  else if (!webhook.service) addHost(webhook.host);
  return {
    ...(webhook.service && !webhook.urlBase ? { service: { name: webhook.service.name, namespace: webhook.service.namespace } } : {}),
    dnsNames,
    ipAddresses,
  };
}

export async function startWebhookTls(kc: KubeConfig, config: GateConfig, log: Logger): Promise<WebhookTls> {
  const certOptions = {
    namespace: config.namespace,
    secretName: certSecretName(config.instance),
    identity: servingIdentity(config.webhook),
  };
  const initial = await ensureWebhookCerts(kc, certOptions);
  const listeners: Array<(pair: CertPair) => void> = [];
  let registration: Omit<WebhookConfigurationOptions, 'caBundle'> | undefined;

  const register = async (caBundle: string): Promise<RegistrationResult> => {
    if (!registration) throw new Error('webhook configuration: register() was not called');
    const result = await ensureWebhookConfiguration(kc, { ...registration, caBundle });
    if (result !== 'unchanged') log.info({ name: registration.name, result }, 'webhook configuration written');
    return result;
  };

  const refresher = keepCertsFresh(kc, {
    ...certOptions,
    initial,
    // Each check also repairs the configuration (deleted, or its caBundle overwritten).
    publish: async (certs) => {
      if (registration) await register(certs.caBundle);
    },
    onChange: (certs) => {
      log.info({ notAfter: certs.notAfter.toISOString() }, 'webhook certificate renewed');
      for (const listener of listeners) listener(toPair(certs));
    },
    onError: (err) => log.warn({ err }, 'webhook certificate check failed; retrying'),
  });

  return {
    current: () => toPair(refresher.current()),
    onRotate: (listener) => {
      listeners.push(listener);
    },
    register: async (webhookUrl) => {
      const { urlBase, service } = config.webhook;
      registration = {
        name: webhookConfigurationName(config.instance),
        ...(urlBase ? { urlBase } : service ? { service } : { urlBase: loopbackIfWildcard(webhookUrl) }),
        ...(config.namespaceSelector ? { namespaceSelector: parseLabelSelector(config.namespaceSelector) } : {}),
        instance: config.instance,
        gateNamespace: config.namespace,
      };
      return register(refresher.current().caBundle);
    },
    stop: () => refresher.stop(),
  };
}

function toPair(certs: WebhookCerts): CertPair {
  return { keyPem: certs.key, certPem: certs.cert, caBundle: certs.caBundle };
}

function isWildcard(ip: string): boolean {
  return ip === '0.0.0.0' || ip === '::';
}

/** A server listening on every address is reached by the local apiserver at 127.0.0.1. */
function loopbackIfWildcard(webhookUrl: string): string {
  const url = new URL(webhookUrl);
  if (isWildcard(url.hostname.replace(/^\[|\]$/g, ''))) url.hostname = '127.0.0.1';
  return url.href;
}
