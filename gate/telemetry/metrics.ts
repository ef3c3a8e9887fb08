// Prometheus metrics of one gate process, on its own registry so tests and benches can run
// several gates in one process. docs/operations.md lists them with example alerts.
//
// Labels are bounded: hook (PrestartHook names, which admins create), transport, outcome, phase,
// webhook, verdict, and the apiserver's verb, resource and status code of the gate's own calls. Never a Revision or a namespace: those grow without bound.
// (Exceptions: the namespace and name of a Broker that PrestartHooks deliver through, as many
// as the hooks admins create; and the namespace and Revision of image drift, a series only while
// a Revision's pods run what its hooks did not approve, each an incident.)
//
// Who reports what: every replica counts what it does itself (admissions, requests it sends,
// replies its sinks take). Transitions (attempts ended, resends, retries, runs released...) are
// counted by the leader only (gate/telemetry/observer.ts), and so are the gauges of what is held now,
// computed from the informer caches at scrape time: summed over replicas, nothing counts twice.
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { ClusterVersions } from '../../api/compatibility.ts';
import type { RevisionObject, RunObject } from '../../api/resources.ts';
import { HOLD_LABEL, type HookStatus } from '../../api/types.ts';
import type { DriftGauge } from '../checks/image-drift-check.ts';
import type { QueueInstruments } from '../controller/workqueue.ts';
import type { BrokerGauge } from '../core/broker-namespace.ts';
import type { ShellGauge } from '../core/pod-shell.ts';
import type { RequestObserver } from '../kube/apiserver-agent-pool.ts';
import { kubeRequestKind } from '../kube/request-kind.ts';
import { RunObserver } from './observer.ts';
import { noTracing, type Tracing } from './tracing.ts';

/** What the hold gauges read at scrape time: the leader's informer caches. */
export interface HoldSource {
  revisions: { list(): readonly RevisionObject[] };
  runs: { get(name: string, namespace?: string): RunObject | undefined };
}

export interface Metrics {
  registry: Registry;
  reconciles: Counter<'result'>;
  reconcileSeconds: Histogram;
  requests: Counter<'transport' | 'action' | 'result'>;
  admissions: Counter<'webhook' | 'result'>;
  /** Time to answer one AdmissionReview, by webhook (revisions, pods). */
  admissionSeconds: Histogram<'webhook'>;
  /** Every apiserver request the gate's API clients make (withRequestTimeout's observer). */
  kubeRequest: RequestObserver;
  /** The leader's view of transitions (called by the controller); feeds the metrics below and the run/attempt spans. */
  observer: RunObserver;
  /** The work queue's adds, waits and retries; the controller hands its queue these. */
  queue: QueueInstruments;
  /** The hold gauges read `source` while `leader.isLeader`; called once the caches exist. */
  watch(source: HoldSource, leader: { readonly isLeader: boolean }): void;
  /** The Broker namespace gauge reads `source` at scrape time while the replica leads (gate/checks/broker-namespace-check.ts). */
  brokerNamespaces(source: () => readonly BrokerGauge[]): void;
  /** The pod shell gauge reads `source` at scrape time while the replica leads (gate/checks/pod-shell-check.ts). */
  podShell(source: () => readonly ShellGauge[]): void;
  /** The image drift gauge reads `source` at scrape time while the replica leads (gate/checks/image-drift-check.ts). */
  imageDrift(source: () => readonly DriftGauge[]): void;
  /** Where the gate runs: prestart_gate_cluster_info{kubernetes, knative_serving} 1 ("unknown" where unread). */
  clusterInfo(versions: ClusterVersions | undefined): void;
  /** A leadership term starts with this queue: the observer forgets the last term, the queue reports here. */
  startTerm(queue: { readonly length: number; instruments?: QueueInstruments }): void;
}

const SECOND_BUCKETS_FAST = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];
const SECOND_BUCKETS_KUBE = [0.0025, 0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24];
const SECOND_BUCKETS_HOOK = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 15, 30, 60, 120, 300, 900, 1800, 3600];
const SECOND_BUCKETS_HOLD = [0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400];
const SECOND_BUCKETS_HUMAN = [30, 60, 300, 900, 1800, 3600, 7200, 14400, 43200, 86400, 259200];

/** `tracing` gets the run and attempt spans the observer records; none by default. */
export function createMetrics(withDefaults = false, tracing: Tracing = noTracing): Metrics {
  const registry = new Registry();
  if (withDefaults) collectDefaultMetrics({ register: registry, prefix: 'prestart_gate_' });
  const registers = [registry];
  let source: HoldSource | undefined;
  let leading: () => boolean = () => false;
  let depth: (() => number) | undefined;
  let brokers: () => readonly BrokerGauge[] = () => [];
  let shells: () => readonly ShellGauge[] = () => [];
  let drifts: () => readonly DriftGauge[] = () => [];
  let lastView: { at: number; view: HoldView } | undefined;
  // Three gauges read the same view in one scrape: compute it once per scrape.
  const view = (s: HoldSource): HoldView => {
    const now = Date.now();
    if (!lastView || now - lastView.at > 250) lastView = { at: now, view: holdView(s, now) };
    return lastView.view;
  };

  const attemptSeconds = new Histogram({
    name: 'prestart_gate_hook_attempt_duration_seconds',
    help: 'Time from a request to its hook to the end of that attempt, by hook, transport and outcome (succeeded, failed, timed_out, cancelled, retry)',
    labelNames: ['hook', 'transport', 'outcome'] as const,
    buckets: SECOND_BUCKETS_HOOK,
    registers,
  });
  const resends = new Counter({
    name: 'prestart_gate_hook_resends_total',
    help: 'Unanswered requests sent again (same CloudEvent id), by hook and transport',
    labelNames: ['hook', 'transport'] as const,
    registers,
  });
  const retries = new Counter({
    name: 'prestart_gate_hook_retries_total',
    help: 'Failed or timed-out hooks re-run by an admin (the prestart.dev/retry annotation), by hook',
    labelNames: ['hook'] as const,
    registers,
  });
  const runs = new Counter({
    name: 'prestart_gate_runs_total',
    help: 'PrestartRuns that reached a phase: released, failed (a blocking hook failed or timed out), cancelled',
    labelNames: ['outcome'] as const,
    registers,
  });
  const holdSeconds = new Histogram({
    name: 'prestart_gate_hold_duration_seconds',
    help: 'Time a released Revision was held: from its creation (when the gate stamped it) to its release',
    buckets: SECOND_BUCKETS_HOLD,
    registers,
  });
  const breakGlass = new Counter({
    name: 'prestart_gate_break_glass_releases_total',
    help: 'Held Revisions whose hold someone other than the gate removed while their hooks had not passed, by the run phase then',
    labelNames: ['phase'] as const,
    registers,
  });
  const auditOutcomes = new Counter({
    name: 'prestart_gate_audit_outcomes_total',
    help: 'Attempts of Audit (shadow) hooks, by hook and what they would have decided; they never hold a Revision',
    labelNames: ['hook', 'outcome'] as const,
    registers,
  });
  const approvalSeconds = new Histogram({
    name: 'prestart_gate_approval_wait_seconds',
    help: 'Time a held Revision waited for a person: from the request of its current hooks to the approval annotation, by verdict',
    labelNames: ['verdict'] as const,
    buckets: SECOND_BUCKETS_HUMAN,
    registers,
  });

  const clusterInfo = new Gauge({
    name: 'prestart_gate_cluster_info',
    help: "Where the gate runs: the apiserver's version and Knative Serving's release, as read at start",
    labelNames: ['kubernetes', 'knative_serving'] as const,
    registers,
  });
  new Gauge({
    name: 'prestart_gate_held_revisions',
    help: 'Revisions held now (reported by the leader)',
    registers,
    collect() {
      this.reset();
      if (source && leading()) this.set(view(source).held);
    },
  });
  new Gauge({
    name: 'prestart_gate_hook_held_revisions',
    help: 'Revisions held now by each hook that has not passed yet, by the hook phase (Pending, Requested, Failed, TimedOut, Cancelled; hook="" when no run says which)',
    labelNames: ['hook', 'phase'] as const,
    registers,
    collect() {
      this.reset();
      if (!source || !leading()) return;
      for (const [key, n] of view(source).byHook) {
        const [hook, phase] = key.split('\0') as [string, string];
        this.set({ hook, phase }, n);
      }
    },
  });
  new Gauge({
    name: 'prestart_gate_hook_oldest_hold_seconds',
    help: 'Age of the oldest Revision held now by each hook (hook="" when no run says which)',
    labelNames: ['hook'] as const,
    registers,
    collect() {
      this.reset();
      if (!source || !leading()) return;
      for (const [hook, age] of view(source).oldest) this.set({ hook }, age);
    },
  });

  new Gauge({
    name: 'prestart_gate_broker_namespace_open',
    help:
      'Subjects from outside the namespace of a Broker that PrestartHooks deliver through (system:authenticated, system:unauthenticated, ' +
      'system:serviceaccounts[:other namespace], ServiceAccounts of other namespaces) that may create Triggers there, and so read every ' +
      'request the Broker carries: 0 when none, -1 when the last check failed (reported by the leader, checked every 5 minutes)',
    labelNames: ['namespace', 'broker'] as const,
    registers,
    collect() {
      this.reset();
      if (!leading()) return;
      for (const b of brokers()) this.set({ namespace: b.namespace, broker: b.name }, b.value);
    },
  });

  new Gauge({
    name: 'prestart_gate_namespace_pod_shell_open',
    help:
      'Subjects named by the RoleBindings of a namespace that PrestartRuns are in (or from outside it: system:authenticated, ' +
      'system:serviceaccounts, other namespaces’ ServiceAccounts) that may exec or attach into its pods, which no admission policy sees: ' +
      '0 when none, -1 when the last check failed (reported by the leader, checked every 5 minutes)',
    labelNames: ['namespace'] as const,
    registers,
    collect() {
      this.reset();
      if (!leading()) return;
      for (const g of shells()) this.set({ namespace: g.namespace }, g.value);
    },
  });

  new Gauge({
    name: 'prestart_gate_image_drift',
    help:
      'Containers of the pods of a released hooked Revision that run an image digest other than the one its pre-start hooks approved ' +
      '(their status.containerStatuses[].imageID against the PrestartRun’s spec.containers); a series only while some do (reported by the leader)',
    labelNames: ['namespace', 'revision'] as const,
    registers,
    collect() {
      this.reset();
      if (!leading()) return;
      for (const g of drifts()) this.set({ namespace: g.namespace, revision: g.revision }, g.value);
    },
  });

  const queueAdds = new Counter({ name: 'prestart_gate_workqueue_adds_total', help: 'Keys added to the work queue', registers });
  const queueRetries = new Counter({
    name: 'prestart_gate_workqueue_retries_total',
    help: 'Keys requeued with backoff after a failed reconcile',
    registers,
  });
  const queueLatency = new Histogram({
    name: 'prestart_gate_workqueue_queue_latency_seconds',
    help: 'Time a key waited in the work queue before a worker took it',
    buckets: SECOND_BUCKETS_FAST,
    registers,
  });
  new Gauge({
    name: 'prestart_gate_workqueue_depth',
    help: 'Keys waiting in the work queue (reported by the leader)',
    registers,
    collect() {
      this.reset();
      if (depth && leading()) this.set(depth());
    },
  });

  const kubeSeconds = new Histogram({
    name: 'prestart_gate_kube_request_duration_seconds',
    help: "Apiserver requests of the gate, from its side (connection pool and network included), by the apiserver's verb and resource",
    labelNames: ['verb', 'resource'] as const,
    buckets: SECOND_BUCKETS_KUBE,
    registers,
  });
  const kubeRequests = new Counter({
    name: 'prestart_gate_kube_requests_total',
    help: 'Apiserver requests of the gate by verb, resource and HTTP status (0: no answer, e.g. a timeout)',
    labelNames: ['verb', 'resource', 'code'] as const,
    registers,
  });

  return {
    registry,
    kubeRequest: (method, path, status, seconds) => {
      const { verb, resource } = kubeRequestKind(method, path);
      kubeSeconds.observe({ verb, resource }, seconds);
      kubeRequests.inc({ verb, resource, code: String(status) });
    },
    reconciles: new Counter({ name: 'prestart_gate_reconciles_total', help: 'Revision reconciles', labelNames: ['result'], registers }),
    reconcileSeconds: new Histogram({
      name: 'prestart_gate_reconcile_seconds',
      help: 'Time to reconcile one Revision (the work duration of one work-queue key)',
      buckets: [0.001, 0.005, 0.02, 0.1, 0.5, 2, 10],
      registers,
    }),
    requests: new Counter({
      name: 'prestart_gate_requests_total',
      help: 'Requests and cancels sent to hooks',
      labelNames: ['transport', 'action', 'result'],
      registers,
    }),
    admissions: new Counter({
      name: 'prestart_gate_admissions_total',
      help: 'Admission reviews answered',
      labelNames: ['webhook', 'result'],
      registers,
    }),
    admissionSeconds: new Histogram({
      name: 'prestart_gate_admission_duration_seconds',
      help: 'Time to answer one AdmissionReview, by webhook (revisions, pods)',
      labelNames: ['webhook'] as const,
      buckets: SECOND_BUCKETS_FAST,
      registers,
    }),
    observer: new RunObserver(
      {
        attemptEnded: (hook, transport, outcome, seconds) => attemptSeconds.observe({ hook, transport, outcome }, seconds),
        resent: (hook, transport) => resends.inc({ hook, transport }),
        retried: (hook) => retries.inc({ hook }),
        runEnded: (outcome) => runs.inc({ outcome }),
        held: (seconds) => holdSeconds.observe(seconds),
        brokenGlass: (phase) => breakGlass.inc({ phase }),
        approvalWaited: (verdict, seconds) => approvalSeconds.observe({ verdict }, seconds),
        auditOutcome: (hook, outcome) => auditOutcomes.inc({ hook, outcome }),
      },
      tracing,
    ),
    queue: {
      added: () => queueAdds.inc(),
      waited: (ms) => queueLatency.observe(ms / 1000),
      retried: () => queueRetries.inc(),
    },
    watch(s, leader) {
      source = s;
      leading = () => leader.isLeader;
    },
    brokerNamespaces(source) {
      brokers = source;
    },
    podShell(source) {
      shells = source;
    },
    imageDrift(source) {
      drifts = source;
    },
    clusterInfo(versions) {
      clusterInfo.reset();
      clusterInfo.set({ kubernetes: versions?.kubernetes ?? 'unknown', knative_serving: versions?.knativeServing ?? 'unknown' }, 1);
    },
    startTerm(queue) {
      this.observer.reset();
      queue.instruments = this.queue;
      depth = () => queue.length;
    },
  };
}

interface HoldView {
  held: number;
  /** "hook\0phase" -> held Revisions. */
  byHook: Map<string, number>;
  /** hook -> age in seconds of its oldest held Revision. */
  oldest: Map<string, number>;
}

function holdView(source: HoldSource, now: number): HoldView {
  const view: HoldView = { held: 0, byHook: new Map(), oldest: new Map() };
  for (const rev of source.revisions.list()) {
    if (rev.metadata?.labels?.[HOLD_LABEL] !== 'true' || rev.metadata.deletionTimestamp) continue;
    view.held++;
    const age = Math.max(0, (now - new Date(rev.metadata.creationTimestamp ?? now).getTime()) / 1000);
    const runObj = source.runs.get(rev.metadata.name ?? '', rev.metadata.namespace);
    const run = runObj?.spec?.revisionUID === rev.metadata.uid ? runObj : undefined;
    const holding = (run?.status?.hooks ?? []).filter((h) => isHolding(h, run?.spec.hooks.find((s) => s.name === h.name)?.failurePolicy));
    for (const h of holding.length > 0 ? holding : [{ name: '', phase: 'None' }]) {
      const key = `${h.name}\0${h.phase}`;
      view.byHook.set(key, (view.byHook.get(key) ?? 0) + 1);
      view.oldest.set(h.name, Math.max(view.oldest.get(h.name) ?? 0, age));
    }
  }
  return view;
}

/** A hook still keeps the Revision: not yet passed (Ignore lets a failure pass). */
function isHolding(h: HookStatus, failurePolicy: string | undefined): boolean {
  if (h.phase === 'Succeeded') return false;
  if ((h.phase === 'Failed' || h.phase === 'TimedOut') && failurePolicy === 'Ignore') return false;
  return true;
}
