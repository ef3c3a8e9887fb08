// What a leader runs beside the controller, for each term of leadership: the reply Triggers, and
// the checks that report and block nothing (who may read a Broker's requests, who may open a shell
// in held pods, image drift after a release, rollouts Knative was refused). Created once per
// process, so the informer handlers are registered once; each term starts them and stops them.
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { startTriggerReconciler, type TriggerReconcilerHandle } from '../../triggers/reconciler.ts';
import type { BrokerGauge } from '../core/broker-namespace.ts';
import type { ShellGauge } from '../core/pod-shell.ts';
import type { Caches } from '../kube/caches.ts';
import type { KubeClient } from '../kube/kube-client.ts';
import type { Clock } from '../runtime/clock.ts';
import { type BrokerNamespaceCheck, startBrokerNamespaceCheck } from './broker-namespace-check.ts';
import { type DriftGauge, type ImageDriftWatch, startImageDriftWatch } from './image-drift-check.ts';
import { type PodShellCheck, startPodShellCheck } from './pod-shell-check.ts';
import { type RefusedRollouts, startRefusedRollouts } from './refused-rollout-retry.ts';

export interface LeaderChecksOptions {
  kc: KubeConfig;
  client: KubeClient;
  caches: Caches;
  /** The gate's own namespace (its ServiceAccount's). */
  gateNamespace: string;
  /** Reply Triggers are kept only when the gate is given a reply URI; `audience` when replies carry tokens. */
  triggers?: { replyUri: string; namespaces?: readonly string[]; audience?: string };
  /** Who stamps new Revisions (gate/webhooks/tls.ts): a change retries the refused rollouts. */
  stamper: { onStamperChange(listener: () => void): void };
  clock: Clock;
  log: Logger;
}

export interface LeaderChecks {
  startTerm(): void;
  /** Stops what the term started, without waiting. */
  endTerm(): void;
  /** Stops what runs and resolves once it has stopped. */
  stop(): Promise<void>;
  brokerNamespaceGauges(): readonly BrokerGauge[];
  podShellGauges(): readonly ShellGauge[];
  imageDriftGauges(): readonly DriftGauge[];
}

export function createLeaderChecks(opts: LeaderChecksOptions): LeaderChecks {
  const { kc, client, caches, clock, log } = opts;
  const inScope = (namespace: string) => caches.namespaces.get(namespace) !== undefined;
  let triggers: TriggerReconcilerHandle | undefined;
  // Who may read a Broker's requests: at the start of a term, on every hook change, and every 5
  // minutes; it reports the gauge and Events, and blocks nothing. Every hook change also asks the
  // Triggers for a pass.
  let brokerCheck: BrokerNamespaceCheck | undefined;
  const hooksChanged = () => {
    triggers?.hooksChanged();
    brokerCheck?.hooksChanged();
  };
  for (const verb of ['add', 'update', 'delete'] as const) caches.hooks.on(verb, hooksChanged);
  // Who may open a shell in the pods of a namespace hooks hold Revisions in: at the start of a
  // term, when a namespace gets its first run, and every 5 minutes.
  let shellCheck: PodShellCheck | undefined;
  caches.runs.on('add', (run) => shellCheck?.runAdded(run.metadata?.namespace ?? ''));
  // What the pods of released hooked Revisions run (image drift): on every change of their pods or
  // runs, and over every cached pod at the start of a term.
  let driftWatch: ImageDriftWatch | undefined;
  for (const verb of ['add', 'update', 'delete'] as const) caches.pods.on(verb, (pod) => driftWatch?.podChanged(pod));
  for (const verb of ['add', 'update'] as const) caches.runs.on(verb, (run) => driftWatch?.runChanged(run));
  // The rollouts Knative was refused while no replica could stamp: at the start of a term (the
  // gate is back), when who stamps changes, and every 5 minutes.
  let refusedRollouts: RefusedRollouts | undefined;
  opts.stamper.onStamperChange(() => refusedRollouts?.poke());

  const startTerm = () => {
    const triggerConfig = opts.triggers;
    if (triggerConfig) {
      triggers = startTriggerReconciler({
        kc,
        log,
        // With identity on, Eventing's filter delivers replies with a token for the sink's audience.
        gateSubscriber: {
          uri: triggerConfig.replyUri,
          ...(triggerConfig.audience === undefined ? {} : { audience: triggerConfig.audience }),
        },
        namespaces: triggerConfig.namespaces,
      });
    }
    brokerCheck = startBrokerNamespaceCheck({
      kc,
      hooks: () => caches.hooks.list(),
      gateNamespace: opts.gateNamespace,
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
          .filter(inScope),
      gateNamespace: opts.gateNamespace,
      log,
    });
    driftWatch = startImageDriftWatch({
      pods: (namespace) => caches.pods.list(namespace),
      run: (namespace, name) => caches.written.get(namespace, name),
      inScope,
      client,
      core: kc.makeApiClient(CoreV1Api),
      clock,
      log,
    });
    driftWatch.checkAll();
    refusedRollouts = startRefusedRollouts({ client, inScope, clock, log });
  };

  /** Takes what the term started, so a term that starts meanwhile starts its own. */
  const running = () => {
    const all = [triggers, brokerCheck, shellCheck, driftWatch, refusedRollouts];
    triggers = undefined;
    brokerCheck = undefined;
    shellCheck = undefined;
    driftWatch = undefined;
    refusedRollouts = undefined;
    return all.map((c) => c?.stop());
  };

  return {
    startTerm,
    endTerm: () => void running(),
    stop: async () => {
      await Promise.all(running());
    },
    brokerNamespaceGauges: () => brokerCheck?.gauges() ?? [],
    podShellGauges: () => shellCheck?.gauges() ?? [],
    imageDriftGauges: () => driftWatch?.gauges() ?? [],
  };
}
