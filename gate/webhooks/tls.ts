// The gate's webhook TLS, tied to its configuration: certificates from the shared Secret, the
// MutatingWebhookConfiguration that trusts them, and renewal that updates the configuration's
// caBundle before the HTTPS server switches certificates.
import { isIP } from 'node:net';
import { CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { DEFAULTS, type GateConfig } from '../config.ts';
import type { ServingIdentity } from './cert-policy.ts';
import { ensureWebhookCerts, keepCertsFresh, WEBHOOK_CERT_SECRET, type WebhookCerts } from './certs.ts';
import { parseLabelSelector } from './label-selector.ts';
import { ensureWebhookConfiguration, type RegistrationResult } from './registration.ts';
import { type Stamper, whoStamps } from './stamp-path.ts';
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
  /** Who stamps new Revisions, as last found; undefined before register(). */
  stamper(): Stamper | undefined;
  /** Called once the configuration says who stamps after that changed. */
  onStamperChange(listener: (stamper: Stamper) => void): void;
  /**
   * Writes the configuration again if whether the Revision webhook is needed changed (a first
   * NamespacedPrestartHook created, the last one deleted); no-op before register().
   */
  recheck(): void;
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

/**
 * `namespacedHooks`: whether any NamespacedPrestartHook exists. The apiserver's stamp
 * (config/230) knows PrestartHooks only, so while a team has a hook the Revision webhook stays
 * registered on the apiserver path too, and writes the whole stamp (docs/design.md, "Who stamps").
 */
export async function startWebhookTls(
  kc: KubeConfig,
  config: GateConfig,
  log: Logger,
  namespacedHooks: () => boolean = () => false,
): Promise<WebhookTls> {
  const certOptions = {
    namespace: config.namespace,
    secretName: certSecretName(config.instance),
    identity: servingIdentity(config.webhook),
  };
  const initial = await ensureWebhookCerts(kc, certOptions);
  const listeners: Array<(pair: CertPair) => void> = [];
  const stamperListeners: Array<(stamper: Stamper) => void> = [];
  let registration: Omit<WebhookConfigurationOptions, 'caBundle'> | undefined;

  const policies = kc.makeApiClient(CustomObjectsApi);
  let stamper: Stamper | undefined;
  /** Whether the configuration last written was for NamespacedPrestartHooks too. */
  let stampsNamespaced = false;
  /** Looks again at who stamps; true when that changed. A failed look keeps the last answer. */
  const findStamper = async (): Promise<boolean> => {
    const path = await whoStamps(policies);
    if (path.unknown && stamper !== undefined) {
      log.warn({ why: path.why }, 'could not tell who stamps new Revisions; keeping the webhook configuration as it is');
      return false;
    }
    if (path.stamper === stamper) return false;
    stamper = path.stamper;
    log.info(
      { stamper, why: path.why },
      stamper === 'apiserver'
        ? 'the apiserver stamps new Revisions: the Revision webhook is not registered, and a gate outage refuses no Revision'
        : "the gate's webhook stamps new Revisions: while no gate replica answers, the stamp policy refuses hooked Revisions",
    );
    return true;
  };

  /** Writes the configuration; once it says who stamps after a change, tells the listeners. */
  const writeConfiguration = async (caBundle: string, stamperChanged: boolean): Promise<RegistrationResult> => {
    if (!registration) throw new Error('webhook configuration: register() was not called');
    stampsNamespaced = namespacedHooks();
    const result = await ensureWebhookConfiguration(kc, {
      ...registration,
      caBundle,
      stampRevisions: config.revisionWebhook === 'always' || stamper !== 'apiserver' || stampsNamespaced,
    });
    if (result !== 'unchanged') log.info({ name: registration.name, result }, 'webhook configuration written');
    if (stamperChanged && stamper) for (const listener of stamperListeners) listener(stamper);
    return result;
  };
  const register = async (caBundle: string): Promise<RegistrationResult> => writeConfiguration(caBundle, await findStamper());

  // An admin installs or removes the apiserver's stamp at any time; the hourly certificate check
  // is too slow to follow, and between the two the stamp policy refuses hooked Revisions.
  const stampCheck = setInterval(
    () => {
      if (!registration) return;
      findStamper()
        .then((changed) =>
          changed || stampsNamespaced !== namespacedHooks() ? writeConfiguration(refresher.current().caBundle, changed) : undefined,
        )
        .catch((err: unknown) => log.warn({ err }, 'checking who stamps new Revisions failed; retrying'));
    },
    (config.stampCheckSeconds ?? DEFAULTS.stampCheckSeconds) * 1000,
  );
  stampCheck.unref();

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
    stamper: () => stamper,
    recheck: () => {
      if (!registration || stampsNamespaced === namespacedHooks()) return;
      writeConfiguration(refresher.current().caBundle, false).catch((err: unknown) =>
        log.warn({ err }, 'writing the webhook configuration for NamespacedPrestartHooks failed; the periodic check retries'),
      );
    },
    onStamperChange: (listener) => {
      stamperListeners.push(listener);
    },
    stop: () => {
      clearInterval(stampCheck);
      refresher.stop();
    },
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
