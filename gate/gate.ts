// Wires one gate process: informers, the correlation keys, the admission webhooks (HTTPS), the
// reply sinks (HTTP, NATS), leader election, and the controller that runs only while leading.
import { createServer as createHttpServer, type Server } from 'node:http';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import express from 'express';
import pino, { type Logger } from 'pino';
import { toHook } from '../api/resources.ts';
import { createTransports, kubeBrokerResolver, type Transports } from '../emitter/index.ts';
import { createSinkRouter } from '../sinks/http.ts';
import { createIntake } from '../sinks/intake.ts';
import { createSinkMetrics } from '../sinks/metrics.ts';
import { createNatsSink, type NatsSink } from '../sinks/nats.ts';
import { startTriggerReconciler, type TriggerReconcilerHandle } from '../triggers/reconciler.ts';
import { DEFAULTS, type GateConfig } from './config.ts';
import { type Caches, startCaches, syncCaches } from './shell/caches.ts';
import { type Clock, systemClock } from './shell/clock.ts';
import { Controller } from './shell/controller.ts';
import { loadOrCreateKeyRing } from './shell/keys.ts';
import { KubeClient } from './shell/kube-client.ts';
import { LeaderElector } from './shell/leader.ts';
import { createMetrics, type Metrics } from './shell/metrics.ts';
import { ReplyRecorder } from './shell/replies.ts';
import { RequestSender } from './shell/requests.ts';
import { admissionRouter } from './webhooks/admission.ts';
import { startWebhookTls, type WebhookTls } from './webhooks/tls.ts';

export interface RunningGate {
  /** The URL hooks POST replies to. */
  sinkUrl: string;
  /** The webhook server's base URL (https). */
  webhookUrl: string;
  metrics: Metrics;
  controller: Controller;
  isLeader(): boolean;
  stop(): Promise<void>;
}

/** `clock` is the gate's one source of time: Observed.now, answeredAt and event timestamps. */
export async function startGate(
  config: GateConfig,
  log: Logger = pino({ name: 'gate' }),
  clock: Clock = systemClock,
): Promise<RunningGate> {
  const kc = config.kubeConfig;
  const client = new KubeClient(kc);
  const metrics = createMetrics();
  const caches = await startCaches(kc, client, log, config.namespaceSelector);
  const keys = await loadOrCreateKeyRing(kc, config.namespace);
  const replies = new ReplyRecorder(client, (ns, name) => caches.runs.get(name, ns), log, metrics, clock);
  // The one way into the state for every reply: HTTP sink, NATS sink, synchronous answers.
  const intake = createIntake({ keys, maxBytes: config.sink.maxBytes, onReply: replies.record.bind(replies) });
  const sinkMetrics = createSinkMetrics(metrics.registry);

  // Ready once the webhooks serve and the controller may lead: a probe (and the tests) must not
  // route admission or replies to a gate that is still starting.
  let ready = false;
  const sinkApp = express();
  sinkApp.get('/readyz', (_req, res) => {
    res
      .status(ready ? 200 : 503)
      .type('text/plain')
      .send(ready ? 'ok' : 'starting');
  });
  sinkApp.get('/metrics', async (_req, res) => {
    res.type(metrics.registry.contentType).send(await metrics.registry.metrics());
  });
  sinkApp.use(createSinkRouter({ ...intake.options, logger: log, metrics: sinkMetrics }));
  const sinkServer = await listen(createHttpServer(sinkApp), config.sink.host, config.sink.port);
  const sinkUrl = config.sink.publicUrl ?? `http://${config.sink.host}:${port(sinkServer)}/events`;

  const transports: Transports = createTransports({
    http: {},
    broker: {
      resolveBrokerUrl: kubeBrokerResolver(async () => kc),
      ...(config.broker?.proxy === undefined ? {} : { proxy: config.broker.proxy }),
    },
    ...(config.nats ? { nats: { servers: config.nats.servers } } : {}),
  });
  let natsSink: NatsSink | undefined;
  if (config.nats) {
    natsSink = createNatsSink({ ...intake.options, servers: config.nats.servers, logger: log, metrics: sinkMetrics });
    await natsSink.start();
  }

  await syncCaches(caches);
  const webhookApp = express();
  webhookApp.use(
    admissionRouter(
      {
        hooks: () => caches.hooks.list().map(toHook),
        namespaceLabels: async (ns) => caches.namespaces.get(ns)?.metadata?.labels ?? (caches.namespaces.get(ns) ? {} : undefined),
        run: async (ns, name) => caches.runs.get(name, ns) ?? (await client.getRun(ns, name)),
      },
      log,
      metrics,
      config.webhook.bindingRoot,
    ),
  );
  const tls: WebhookTls = await startWebhookTls(kc, config, log);
  const webhookServer = await listen(
    createHttpsServer({ key: tls.current().keyPem, cert: tls.current().certPem }, webhookApp),
    config.webhook.host,
    config.webhook.port,
  );
  tls.onRotate((pair) => webhookServer.setSecureContext({ key: pair.keyPem, cert: pair.certPem }));
  const webhookUrl = config.webhook.urlBase ?? `https://${config.webhook.host}:${port(webhookServer)}`;
  await tls.register(webhookUrl);

  const sender = new RequestSender({
    transports,
    keys,
    source: config.source,
    replyTo: sinkUrl,
    log,
    metrics,
  });
  // Triggers are wired by the leader only; every hook change asks for a pass.
  let triggers: TriggerReconcilerHandle | undefined;
  const triggerConfig = config.triggers;
  const hooksChanged = () => triggers?.hooksChanged();
  for (const verb of ['add', 'update', 'delete'] as const) caches.hooks.on(verb, hooksChanged);
  let controller = newController();
  function newController(): Controller {
    return new Controller({
      caches,
      apply: { client, sender, intake, clock },
      log,
      metrics,
      workers: config.workers,
      resyncMs: (config.resyncSeconds ?? DEFAULTS.resyncSeconds) * 1000,
    });
  }
  const leader = new LeaderElector(
    kc,
    {
      namespace: config.namespace,
      name: `knative-prestart-gate-${config.instance}`,
      identity: config.identity,
      leaseSeconds: config.leaseSeconds,
      renewSeconds: config.leaseSeconds ? Math.max(1, Math.floor(config.leaseSeconds / 3)) : undefined,
      onStartedLeading: () => {
        controller.start();
        if (triggerConfig) {
          triggers = startTriggerReconciler({
            kc,
            log,
            gateSubscriber: { uri: triggerConfig.replyUri },
            namespaces: triggerConfig.namespaces,
          });
        }
      },
      onStoppedLeading: () => {
        void triggers?.stop();
        triggers = undefined;
        // A controller cannot be restarted after its queue shut down: the next term gets a new one.
        const old = controller;
        controller = newController();
        void old.stop();
      },
    },
    log,
  );
  leader.start();
  ready = true;
  log.info({ sinkUrl, webhookUrl, instance: config.instance }, 'gate started');

  return {
    sinkUrl,
    webhookUrl,
    metrics,
    get controller() {
      return controller;
    },
    isLeader: () => leader.isLeader,
    async stop() {
      await leader.stop();
      await triggers?.stop();
      await controller.stop();
      await natsSink?.stop();
      tls.stop();
      await Promise.all([close(sinkServer), close(webhookServer)]);
      await transports.close();
      await caches.stop();
    },
  };
}

// Go's HTTP client (the apiserver calling webhooks, hooks replying) keeps idle connections for
// 90 s; Node closes them after 5 s by default, so a request sent on a connection Node is closing
// at that instant fails with "connection reset by peer" (seen in bench/webhook-latency.ts). The
// server must outlive the client's idle timeout.
const KEEP_ALIVE_MS = 120_000;

function listen<S extends Server | HttpsServer>(server: S, host: string, portNumber: number): Promise<S> {
  server.keepAliveTimeout = KEEP_ALIVE_MS;
  server.headersTimeout = KEEP_ALIVE_MS + 5_000;
  return new Promise((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) =>
      reject(err.code === 'EADDRINUSE' ? new Error(`port ${host}:${portNumber} is already in use`) : err),
    );
    server.listen(portNumber, host, () => resolve(server));
  });
}

function port(server: Server | HttpsServer): number {
  return (server.address() as AddressInfo).port;
}

function close(server: Server | HttpsServer): Promise<void> {
  server.closeAllConnections();
  return new Promise((resolve) => server.close(() => resolve()));
}

export type { Caches };
