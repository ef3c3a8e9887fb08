// Wires one gate process: informers, the correlation keys, the admission webhooks (HTTPS), the
// reply sinks (HTTP, NATS), leader election, and the controller and checks that run only while
// leading. Each object is built once its dependencies are, and handed what it uses.
import pino, { type Logger } from 'pino';
import { createIntake } from '../sinks/intake.ts';
import { countingIntake, createSinkMetrics } from '../sinks/metrics.ts';
import { createLeaderChecks } from './checks/leader-checks.ts';
import { DEFAULTS, type GateConfig } from './config.ts';
import { Controller } from './controller/controller.ts';
import { LeaderElector } from './controller/leader.ts';
import { DEFAULT_CLUSTER_DOMAIN } from './core/index.ts';
import { loadOrCreateKeyRing, watchKeyRing } from './delivery/correlation-keys.ts';
import { hookTransports } from './delivery/hook-transports.ts';
import { guardNamespacedTargets } from './delivery/namespaced-targets.ts';
import { startNatsReplies } from './delivery/nats-replies.ts';
import { replyIdentity } from './delivery/reply-identity.ts';
import { ReplyRecorder } from './delivery/reply-recorder.ts';
import { RequestSender } from './delivery/request-sender.ts';
import { createCaches, type InformerHealth, syncCaches } from './kube/caches.ts';
import { KubeClient, withRequestTimeout } from './kube/kube-client.ts';
import { type Clock, systemClock } from './runtime/clock.ts';
import { type DrainOptions, trackRequests } from './server/drain.ts';
import { close } from './server/listen.ts';
import { startSinkServer } from './server/sink-server.ts';
import { createMetrics, type Metrics } from './telemetry/metrics.ts';
import { startTracing, tracingFromEnv } from './telemetry/tracing.ts';
import type { Stamper } from './webhooks/stamp-path.ts';
import { startWebhookServer } from './webhooks/webhook-server.ts';

export interface RunningGate {
  /** The URL hooks POST replies to. */
  sinkUrl: string;
  /** The webhook server's base URL (https). */
  webhookUrl: string;
  metrics: Metrics;
  controller: Controller;
  isLeader(): boolean;
  /** Each informer's state: listed yet, failing since when. */
  informers(): InformerHealth[];
  /** Whether this gate serves `namespace` now, as its namespace cache says (--namespace-selector). */
  inScope(namespace: string): boolean;
  /** Who stamps new Revisions, as this replica last found (gate/webhooks/stamp-path.ts). */
  stamper(): Stamper | undefined;
  /**
   * Stops the gate. With `drain`, first steps down as leader and serves the webhooks and the
   * sink until they are quiet (gate/server/drain.ts): what a pod does on SIGTERM.
   */
  stop(options?: { drain?: DrainOptions }): Promise<void>;
}

/** `clock` is the gate's one source of time: Observed.now, answeredAt and event timestamps. */
export async function startGate(
  config: GateConfig,
  log: Logger = pino({ name: 'gate' }),
  clock: Clock = systemClock,
): Promise<RunningGate> {
  const tracing = await startTracing(config.tracing ?? tracingFromEnv());
  const metrics = createMetrics(false, tracing);
  metrics.clusterInfo(config.clusterVersions);
  // Every apiserver call of the gate gives up in time: none can hang a worker or the lease.
  const kc = withRequestTimeout(config.kubeConfig, (config.apiTimeoutSeconds ?? DEFAULTS.apiTimeoutSeconds) * 1000, metrics.kubeRequest);
  const client = new KubeClient(kc);
  const caches = createCaches(kc, client, log, {
    namespaceSelector: config.namespaceSelector,
    watchTimeoutSeconds: config.watchTimeoutSeconds,
    namespacedHooks: { limit: config.namespacedHooks?.limit, clusterDomain: config.namespacedHooks?.clusterDomain },
  });
  const watchFailureMs = (config.watchFailureSeconds ?? DEFAULTS.watchFailureSeconds) * 1000;
  const keys = await loadOrCreateKeyRing(kc, config.namespace);
  // Rotation without a restart: every replica follows the Secret (gate/delivery/correlation-keys.ts).
  const keyWatch = watchKeyRing(kc, config.namespace, keys, log);
  const replies = new ReplyRecorder(client, caches.written, log, clock);
  // The one way into the state for every reply: HTTP sink, NATS sink, synchronous answers.
  const intake = createIntake({ keys, maxBytes: config.sink.maxBytes, onReply: tracing.traceReplies(replies.record.bind(replies)) });
  const sinkMetrics = createSinkMetrics(metrics.registry);

  const identity = replyIdentity(kc, caches, config.senderIdentity);
  const sink = await startSinkServer(
    config.sink,
    { ...intake.options, logger: log, metrics: sinkMetrics, ...(identity ? { identity } : {}) },
    { caches, watchFailureMs, registry: metrics.registry },
  );
  const sinkUrl = sink.url;

  // A team's hook is sent to only while its address is a Service of its namespace's pods.
  const transports = guardNamespacedTargets(
    hookTransports(kc, caches, config, log),
    client,
    config.namespacedHooks?.clusterDomain ?? DEFAULT_CLUSTER_DOMAIN,
  );
  const natsSink = await startNatsReplies(config.nats, intake, transports, sinkMetrics, log);

  // The informers list in the background; the webhooks serve meanwhile and refuse, retryably,
  // what they cannot yet decide. Nothing leads before every cache is synced.
  const synced = syncCaches(caches);
  const webhooks = await startWebhookServer(kc, config, caches, watchFailureMs, metrics, log);
  const { tls, url: webhookUrl } = webhooks;
  // A team's first hook needs the Revision webhook at once, also where the apiserver stamps.
  for (const verb of ['add', 'delete'] as const) caches.namespacedHooks.on(verb, () => tls.recheck());
  const drainer = trackRequests([sink.server, webhooks.server]);
  await tls.register(webhookUrl);
  await synced;
  tls.recheck();

  const sender = new RequestSender({ transports, keys, source: config.source, replyTo: sinkUrl, log, metrics, tracing });
  const checks = createLeaderChecks({
    kc,
    client,
    caches,
    gateNamespace: config.namespace,
    ...(config.triggers ? { triggers: { ...config.triggers, ...(identity ? { audience: identity.audience } : {}) } } : {}),
    stamper: tls,
    clock,
    log,
  });
  metrics.brokerNamespaces(checks.brokerNamespaceGauges);
  metrics.podShell(checks.podShellGauges);
  metrics.imageDrift(checks.imageDriftGauges);
  // One controller for the life of the process; each term of leadership starts and stops it.
  const controller = new Controller({
    caches,
    apply: { client, sender, intake: countingIntake(intake, sinkMetrics), clock },
    replies,
    log,
    metrics,
    workers: config.workers,
    resyncMs: (config.resyncSeconds ?? DEFAULTS.resyncSeconds) * 1000,
  });
  const leader = new LeaderElector(
    kc,
    {
      namespace: config.namespace,
      name: `knative-prestart-gate-${config.instance}`,
      identity: config.identity,
      leaseSeconds: config.leaseSeconds,
      observeRequest: metrics.kubeRequest,
      terms: [controller, checks],
    },
    log,
  );
  metrics.watch(caches, leader);
  leader.start();
  sink.status.markReady();
  log.info({ sinkUrl, webhookUrl, instance: config.instance }, 'gate started');

  return {
    sinkUrl,
    webhookUrl,
    metrics,
    controller,
    isLeader: () => leader.isLeader,
    inScope: (namespace) => caches.namespaces.get(namespace) !== undefined,
    stamper: () => tls.stamper(),
    informers: () => caches.health(),
    async stop(options) {
      sink.status.markStopping();
      await leader.stop();
      await checks.stop();
      await controller.stop();
      if (options?.drain) await drainer.drain(options.drain);
      await natsSink?.stop();
      tls.stop();
      await Promise.all([close(sink.server), close(webhooks.server)]);
      await transports.close();
      await keyWatch.stop();
      await caches.stop();
      await tracing.shutdown();
    },
  };
}
