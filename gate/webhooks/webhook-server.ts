// The admission webhooks' HTTPS server: the router, its TLS (a certificate the gate issues and
// rotates itself), and the URL the MutatingWebhookConfiguration points at.
import type { Server } from 'node:https';
import type { KubeConfig } from '@kubernetes/client-node';
import express from 'express';
import type { Logger } from 'pino';
import type { GateConfig } from '../config.ts';
import type { Caches } from '../kube/caches.ts';
import { listenHttps, port } from '../server/listen.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import { admissionRouter } from './admission.ts';
import { admissionSources } from './admission-sources.ts';
import { startWebhookTls, type WebhookTls } from './tls.ts';

export interface WebhookServer {
  server: Server;
  /** The server's base URL (https). */
  url: string;
  tls: WebhookTls;
}

/** Serves at once: until the informers have listed, the webhooks refuse, retryably, what they cannot decide. */
export async function startWebhookServer(
  kc: KubeConfig,
  config: GateConfig,
  caches: Caches,
  watchFailureMs: number,
  metrics: Metrics,
  log: Logger,
): Promise<WebhookServer> {
  const app = express();
  app.use(admissionRouter(admissionSources(config, caches, watchFailureMs, metrics.kubeRequest), log, metrics, config.webhook.bindingRoot));
  const tls = await startWebhookTls(kc, config, log, () => caches.catalog.anyNamespaced());
  const server = await listenHttps(app, tls, config.webhook.host, config.webhook.port);
  const url = config.webhook.urlBase ?? `https://${config.webhook.host}:${port(server)}`;
  return { server, url, tls };
}
