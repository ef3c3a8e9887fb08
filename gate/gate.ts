// Wires one gate process: informers, the correlation keys, the admission webhooks (HTTPS), the
// reply sinks (HTTP, NATS), leader election, and the controller that runs only while leading.
import { createServer as createHttpServer, type Server } from 'node:http';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { CoreV1Api } from '@kubernetes/client-node';
import express from 'express';
import pino, { type Logger } from 'pino';
import { errorLine } from '../api/kube-errors.ts';
import { toHook } from '../api/resources.ts';
import { createTransports, kubeBrokerResolver, type Transports } from '../emitter/index.ts';
import { installSinkRoutes } from '../sinks/http.ts';
import { DEFAULT_SINK_AUDIENCE } from '../sinks/identity.ts';
import { createIntake } from '../sinks/intake.ts';
import { countingIntake, createSinkMetrics } from '../sinks/metrics.ts';
import type { NatsSink } from '../sinks/nats.ts';
import { createReplyIdentity, kubeTokenReview } from '../sinks/token-review.ts';
import { startTriggerReconciler, type TriggerReconcilerHandle } from '../triggers/reconciler.ts';
import { replyTriggerLookup } from '../triggers/reply-identity.ts';
import { type BrokerNamespaceCheck, startBrokerNamespaceCheck } from './checks/broker-namespace-check.ts';
import { type ImageDriftWatch, startImageDriftWatch } from './checks/image-drift-check.ts';
import { type PodShellCheck, startPodShellCheck } from './checks/pod-shell-check.ts';
import { type RefusedRollouts, startRefusedRollouts } from './checks/refused-rollout-retry.ts';
import { DEFAULTS, type GateConfig } from './config.ts';
import { Controller } from './controller/controller.ts';
import { LeaderElector } from './controller/leader.ts';
import { labelSelectorMatches } from './core/match.ts';
import { loadOrCreateKeyRing, watchKeyRing } from './delivery/correlation-keys.ts';
import { ReplyRecorder } from './delivery/reply-recorder.ts';
import { RequestSender } from './delivery/request-sender.ts';
import { createTokenSource, kubeAcceptedByApiserver, kubeMintToken, refuseApiserverAudiences } from './delivery/sa-tokens.ts';
import type { RequestObserver } from './kube/apiserver-agent-pool.ts';
import { type Caches, cacheProblems, createCaches, type InformerHealth, syncCaches } from './kube/caches.ts';
import { KubeClient, withRequestTimeout } from './kube/kube-client.ts';
import { type Clock, systemClock } from './runtime/clock.ts';
import { type DrainOptions, trackRequests } from './server/drain.ts';
import { createMetrics, type Metrics } from './telemetry/metrics.ts';
import { startTracing, tracingFromEnv } from './telemetry/tracing.ts';
import { type AdmissionSources, admissionRouter, RetryLater } from './webhooks/admission.ts';
import { parseLabelSelector } from './webhooks/label-selector.ts';
import type { Stamper } from './webhooks/stamp-path.ts';
import { startWebhookTls, type WebhookTls } from './webhooks/tls.ts';

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
  // Every apiserver call of the gate gives up in time: none can hang a worker or the lease.
  const tracing = await startTracing(config.tracing ?? tracingFromEnv());
  const metrics = createMetrics(false, tracing);
  metrics.clusterInfo(config.clusterVersions);
  const kc = withRequestTimeout(config.kubeConfig, (config.apiTimeoutSeconds ?? DEFAULTS.apiTimeoutSeconds) * 1000, metrics.kubeRequest);
  const client = new KubeClient(kc);
  const caches = createCaches(kc, client, log, {
    namespaceSelector: config.namespaceSelector,
    watchTimeoutSeconds: config.watchTimeoutSeconds,
  });
  const watchFailureMs = (config.watchFailureSeconds ?? DEFAULTS.watchFailureSeconds) * 1000;
  const keys = await loadOrCreateKeyRing(kc, config.namespace);
  // Rotation without a restart: every replica follows the Secret (gate/delivery/correlation-keys.ts).
  const keyWatch = watchKeyRing(kc, config.namespace, keys, log);
  // Every run the gate writes is read back from that write until the watch delivers it, and a
  // stored reply wakes the leader at once: no watch round trip between an answer and the release.
  client.onRunWritten = (run) => caches.written.note(run);
  let wake = (_namespace: string, _name: string): void => undefined;
  const replies = new ReplyRecorder(
    client,
    (ns, name) => caches.written.get(ns, name),
    log,
    clock,
    (ns, name) => wake(ns, name),
  );
  // The one way into the state for every reply: HTTP sink, NATS sink, synchronous answers.
  const intake = createIntake({ keys, maxBytes: config.sink.maxBytes, onReply: tracing.traceReplies(replies.record.bind(replies)) });
  const sinkMetrics = createSinkMetrics(metrics.registry);

  // Ready once every informer has listed, the webhooks serve and the controller may lead: a probe
  // (and the tests) must not route admission or replies to a gate that is still starting.
  let ready = false;
  let stopping = false;
  const sinkApp = express();
  sinkApp.get('/readyz', (_req, res) => {
    const waiting = cacheProblems(caches.health(), Date.now(), Number.POSITIVE_INFINITY);
    res
      .status(ready ? 200 : 503)
      .type('text/plain')
      .send(ready ? 'ok' : [stopping ? 'stopping' : 'starting', ...waiting].join('\n'));
  });
  sinkApp.get('/metrics', async (_req, res) => {
    res.type(metrics.registry.contentType).send(await metrics.registry.metrics());
  });
  // Live while no informer has been failing for watchFailureSeconds: a replica whose watches
  // cannot recover is restarted by its liveness probe instead of serving a stale picture.
  const health = () => {
    const problems = cacheProblems(caches.health(), Date.now(), watchFailureMs);
    return { ok: problems.length === 0, message: problems.length === 0 ? 'ok' : problems.join('\n') };
  };
  // Sender identity: replies to the HTTP sink checked against the hook's ServiceAccount (TokenReview,
  // cached per token), read from the hooks cache so an edited identity counts at once.
  const replyMode = config.senderIdentity?.replies ?? 'off';
  const identity =
    replyMode === 'off'
      ? undefined
      : createReplyIdentity({
          mode: replyMode,
          audience: config.senderIdentity?.audience ?? DEFAULT_SINK_AUDIENCE,
          identityOf: (hook) => caches.hooks.get(hook)?.spec?.identity,
          hookExists: (hook) => caches.hooks.get(hook) !== undefined,
          // Broker-delivered replies come as the gate's reply Trigger's OIDC ServiceAccount.
          replyTriggerOf: replyTriggerLookup(kc, { deliveryOf: (hook) => caches.hooks.get(hook)?.spec?.delivery }),
          review: kubeTokenReview(kc),
        });
  installSinkRoutes(sinkApp, { ...intake.options, logger: log, metrics: sinkMetrics, health, ...(identity ? { identity } : {}) });
  const sinkServer = await listen(createHttpServer(sinkApp), config.sink.host, config.sink.port);
  const sinkUrl = config.sink.publicUrl ?? `http://${config.sink.host}:${port(sinkServer)}/events`;

  // The gate's token for hooks that name an audience (direct HTTP) and for Brokers that announce
  // one (Knative Eventing's sender identity); minted only when one does.
  const gateTokens = createTokenSource(
    refuseApiserverAudiences(
      kubeMintToken(kc, { serviceAccount: config.serviceAccount ?? { namespace: DEFAULTS.namespace, name: 'knative-prestart-gate' } }),
      kubeAcceptedByApiserver(kc),
    ),
  );
  const transports: Transports = createTransports({
    http: {
      bearerFor: async (hook) => {
        const audience = caches.hooks.get(hook)?.spec?.identity?.audience;
        return audience === undefined ? undefined : gateTokens.token(audience);
      },
    },
    broker: {
      resolveBrokerUrl: kubeBrokerResolver(async () => kc, config.broker?.classes),
      bearerFor: (audience) => gateTokens.token(audience),
      ...(config.broker?.proxy === undefined ? {} : { proxy: config.broker.proxy }),
    },
    ...(config.nats
      ? { nats: { servers: config.nats.servers, security: config.nats.security, replicas: config.nats.replicas, logger: log } }
      : {}),
  });
  let natsSink: NatsSink | undefined;
  if (config.nats) {
    // The nats client is loaded only by a gate given NATS (what a gate does not use, it does not load).
    const { createNatsSink } = await import('../sinks/nats.ts');
    natsSink = createNatsSink({
      ...intake.options,
      servers: config.nats.servers,
      security: config.nats.security,
      replicas: config.nats.replicas,
      logger: log,
      metrics: sinkMetrics,
    });
    await natsSink.start();
    // Both streams exist before any hook starts: a hook with least-privilege permissions may not
    // create them. A NATS that refuses the gate's credentials stops the start here, visibly.
    await transports.ready();
  }

  // The informers list in the background; the webhooks serve meanwhile and refuse, retryably,
  // what they cannot yet decide. Nothing leads before every cache is synced.
  const synced = syncCaches(caches);
  const webhookApp = express();
  webhookApp.use(
    admissionRouter(admissionSources(config, caches, watchFailureMs, metrics.kubeRequest), log, metrics, config.webhook.bindingRoot),
  );
  const tls: WebhookTls = await startWebhookTls(kc, config, log);
  const webhookServer = await listen(
    createHttpsServer({ key: tls.current().keyPem, cert: tls.current().certPem }, webhookApp),
    config.webhook.host,
    config.webhook.port,
  );
  tls.onRotate((pair) => webhookServer.setSecureContext({ key: pair.keyPem, cert: pair.certPem }));
  const webhookUrl = config.webhook.urlBase ?? `https://${config.webhook.host}:${port(webhookServer)}`;
  const drainer = trackRequests([sinkServer, webhookServer]);
  await tls.register(webhookUrl);
  await synced;

  const sender = new RequestSender({
    transports,
    keys,
    source: config.source,
    replyTo: sinkUrl,
    log,
    metrics,
    tracing,
  });
  // Triggers are wired by the leader only; every hook change asks for a pass.
  let triggers: TriggerReconcilerHandle | undefined;
  const triggerConfig = config.triggers;
  // So is the check of who may read a Broker's requests: at the start of a term, on
  // every hook change, and every 5 minutes; it reports the gauge and Events, and blocks nothing.
  let brokerCheck: BrokerNamespaceCheck | undefined;
  metrics.brokerNamespaces(() => brokerCheck?.gauges() ?? []);
  const hooksChanged = () => {
    triggers?.hooksChanged();
    brokerCheck?.hooksChanged();
  };
  for (const verb of ['add', 'update', 'delete'] as const) caches.hooks.on(verb, hooksChanged);
  // And the check of who may open a shell in the pods of a namespace hooks hold Revisions in: at
  // the start of a term, when a namespace gets its first run, and every 5 minutes.
  let shellCheck: PodShellCheck | undefined;
  metrics.podShell(() => shellCheck?.gauges() ?? []);
  caches.runs.on('add', (run) => shellCheck?.runAdded(run.metadata?.namespace ?? ''));
  // And the watch of what the pods of released hooked Revisions run (image drift): on every change
  // of their pods or runs, and over every cached pod at the start of a term.
  let driftWatch: ImageDriftWatch | undefined;
  metrics.imageDrift(() => driftWatch?.gauges() ?? []);
  for (const verb of ['add', 'update', 'delete'] as const) caches.pods.on(verb, (pod) => driftWatch?.podChanged(pod));
  for (const verb of ['add', 'update'] as const) caches.runs.on(verb, (run) => driftWatch?.runChanged(run));
  // And the rollouts Knative was refused while no replica could stamp: at the start of a term (the
  // gate is back), when who stamps changes, and every 5 minutes.
  let refusedRollouts: RefusedRollouts | undefined;
  tls.onStamperChange(() => refusedRollouts?.poke());
  // One controller for the life of the process; each term of leadership starts and stops it.
  const controller = new Controller({
    caches,
    apply: { client, sender, intake: countingIntake(intake, sinkMetrics), clock },
    log,
    metrics,
    workers: config.workers,
    resyncMs: (config.resyncSeconds ?? DEFAULTS.resyncSeconds) * 1000,
  });
  wake = (ns, name) => controller.wake(ns, name);
  const leader = new LeaderElector(
    kc,
    {
      namespace: config.namespace,
      name: `knative-prestart-gate-${config.instance}`,
      identity: config.identity,
      leaseSeconds: config.leaseSeconds,
      observeRequest: metrics.kubeRequest,
      onStartedLeading: () => {
        controller.start();
        if (triggerConfig) {
          triggers = startTriggerReconciler({
            kc,
            log,
            // With identity on, Eventing's filter delivers replies with a token for the sink's audience.
            gateSubscriber: { uri: triggerConfig.replyUri, ...(identity ? { audience: identity.audience } : {}) },
            namespaces: triggerConfig.namespaces,
          });
        }
        brokerCheck = startBrokerNamespaceCheck({
          kc,
          hooks: () => caches.hooks.list(),
          gateNamespace: config.namespace,
          ...(triggerConfig?.namespaces ? { namespaces: triggerConfig.namespaces } : {}),
          log,
        });
        shellCheck = startPodShellCheck({
          kc,
          // Only the namespaces this gate serves (its namespace cache is narrowed by --namespace-selector):
          // another gate instance's namespaces are that gate's to report.
          runNamespaces: () =>
            caches.runs
              .list()
              .map((r) => r.metadata?.namespace ?? '')
              .filter((ns) => caches.namespaces.get(ns) !== undefined),
          gateNamespace: config.namespace,
          log,
        });
        driftWatch = startImageDriftWatch({
          pods: (namespace) => caches.pods.list(namespace),
          run: (namespace, name) => caches.written.get(namespace, name),
          inScope: (namespace) => caches.namespaces.get(namespace) !== undefined,
          client,
          core: kc.makeApiClient(CoreV1Api),
          clock,
          log,
        });
        driftWatch.checkAll();
        refusedRollouts = startRefusedRollouts({
          client,
          inScope: (namespace) => caches.namespaces.get(namespace) !== undefined,
          clock,
          log,
        });
      },
      onStoppedLeading: () => {
        void triggers?.stop();
        triggers = undefined;
        void brokerCheck?.stop();
        brokerCheck = undefined;
        void shellCheck?.stop();
        shellCheck = undefined;
        void driftWatch?.stop();
        driftWatch = undefined;
        void refusedRollouts?.stop();
        refusedRollouts = undefined;
        void controller.stop();
      },
    },
    log,
  );
  metrics.watch(caches, () => leader.isLeader);
  leader.start();
  ready = true;
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
      ready = false;
      stopping = true;
      await leader.stop();
      await triggers?.stop();
      await brokerCheck?.stop();
      await driftWatch?.stop();
      await refusedRollouts?.stop();
      await controller.stop();
      if (options?.drain) await drainer.drain(options.drain);
      await natsSink?.stop();
      tls.stop();
      await Promise.all([close(sinkServer), close(webhookServer)]);
      await transports.close();
      await keyWatch.stop();
      await caches.stop();
      await tracing.shutdown();
    },
  };
}

/** The apiserver waits 5 s for a webhook (webhook-configuration.ts): a live read must end well before. */
const WEBHOOK_READ_TIMEOUT_MS = 3_000;

/**
 * What the webhooks read: the caches while they can be trusted, the apiserver where a cache cannot
 * tell (a namespace it has not seen), and a retryable refusal where neither can answer. Never
 * "out of scope" for a namespace it could not read: that would admit a Revision unheld.
 */
function admissionSources(config: GateConfig, caches: Caches, watchFailureMs: number, observeRequest: RequestObserver): AdmissionSources {
  const reads = new KubeClient(withRequestTimeout(config.kubeConfig, WEBHOOK_READ_TIMEOUT_MS, observeRequest));
  const selector = config.namespaceSelector === undefined ? undefined : parseLabelSelector(config.namespaceSelector);
  const trouble = (name: string) =>
    cacheProblems(
      caches.health().filter((h) => h.name === name),
      Date.now(),
      watchFailureMs,
    );
  return {
    hooks: () => {
      const problems = trouble('prestarthooks');
      if (problems.length > 0) throw new RetryLater(`the gate does not know the PrestartHooks yet (${problems.join('; ')})`);
      return caches.hooks.list().map(toHook);
    },
    namespaceLabels: async (ns) => {
      const cached = caches.namespaces.get(ns);
      if (cached && trouble('namespaces').length === 0) return cached.metadata?.labels ?? {};
      // Not in the cache (created a moment ago, or while the namespaces watch is down): ask.
      let live: Awaited<ReturnType<KubeClient['getNamespace']>>;
      try {
        live = await reads.getNamespace(ns);
      } catch (err) {
        throw new RetryLater(`the gate could not read namespace ${ns} to tell whether its Revisions are held (${errorLine(err)})`);
      }
      if (!live) throw new RetryLater(`namespace ${ns} was not found`);
      const labels = live.metadata?.labels ?? {};
      return selector === undefined || labelSelectorMatches(selector, labels) ? labels : undefined;
    },
    run: async (ns, name) => {
      const cached = caches.runs.get(name, ns);
      if (cached) return cached;
      try {
        return await reads.getRun(ns, name);
      } catch (err) {
        throw new RetryLater(`the gate could not read PrestartRun ${ns}/${name} (${errorLine(err)})`);
      }
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
