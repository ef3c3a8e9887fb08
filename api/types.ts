// The floor of the house: the prestart.dev API (its labels, annotations and CRD shapes) and the
// plain views of the Kubernetes objects the gate reads. Everything here is plain data and imports
// nothing of ours; every other layer (the contract, the transports, the gate, the hook kit) builds
// on it.

export const API_VERSION = 'prestart.dev/v1alpha1';

/** Label that holds a Revision (and, copied by Knative, its Deployment) before it may start. */
export const HOLD_LABEL = 'prestart.dev/hold';
/** Annotation with the JSON list of hook names that applied when the Revision was created. */
export const HOOKS_ANNOTATION = 'prestart.dev/hooks';
/** Annotation carrying why the Revision is held; Knative copies it to the Deployment, where the policy message reads it. */
export const REASON_ANNOTATION = 'prestart.dev/reason';
/** Label put on a released Revision whose hooks contributed bindings; scopes the Pod webhook. */
export const INJECT_LABEL = 'prestart.dev/inject';
/**
 * Annotation the gate puts on the pod template of a released Revision's Deployment once it has
 * projected the bindings into it (value: the PrestartRun's uid). Its pods then carry their bindings
 * from the ReplicaSet and are not sent to the Pod webhook.
 */
export const INJECTED_ANNOTATION = 'prestart.dev/injected';
/** Finalizer on a held Revision so the gate can tell its hooks when it is deleted. */
export const CANCEL_FINALIZER = 'prestart.dev/cancel-hooks';
/** Annotation an admin sets on a PrestartRun (any new value) to re-run its failed or timed-out hooks. */
export const RETRY_ANNOTATION = 'prestart.dev/retry';
/**
 * Break glass: an admin sets this annotation on a PrestartRun (value: the reason) to have the gate
 * release its Revision without its hooks (`kn prestart release REV --force --reason TEXT`). The
 * hold policy lets only holders of the verb force-release on prestartruns (cluster-wide) set it,
 * together with FORCE_RELEASE_BY_ANNOTATION naming themselves.
 */
/**
 * Set by the gate on every PrestartRun it creates: its requests are named by the run's UID
 * (`<runUID>/<hook>/<attempt>`, correlation ids v2). A run without it was created by a release
 * before run binding; the gate keeps that run's ids (`<revisionUID>/…`, v1) until it ends, so an
 * upgrade neither refuses the hooks' answers to requests in flight nor makes hooks run twice.
 */
export const RUN_IDS_ANNOTATION = 'prestart.dev/request-ids';
export const RUN_IDS_V2 = 'v2';
/**
 * The approval built-in hook's decisions on a Revision: one `prestart.dev/approval.<id>`
 * (approved | rejected) per person, beside `-by.<id>`, `-groups.<id>` and `-message.<id>`
 * (hooks/builtin/approval/decision.ts; the approval policy checks who writes them).
 */
export const APPROVAL_VERDICT_PREFIX = 'prestart.dev/approval.';
export const FORCE_RELEASE_ANNOTATION = 'prestart.dev/force-release';
/** Who set FORCE_RELEASE_ANNOTATION: the policy requires it to equal the request's username. */
export const FORCE_RELEASE_BY_ANNOTATION = 'prestart.dev/force-release-by';
/** Label on the Events the gate records, with their reason (HookFailed...): an ApiServerSource selects notifications by it. */
export const EVENT_REASON_LABEL = 'prestart.dev/event-reason';

/**
 * Type of the condition the gate writes on a held Revision's status, so `kn revision describe` and
 * `kubectl describe revision` name the hook that holds it. Always severity Info: Knative's
 * ConditionSet (knative.dev/pkg apis, recomputeHappiness/findUnhappyDependent) folds every
 * condition of severity Error (the default, "") that is not True into Ready; Info ones it keeps
 * and never reads, so this condition can never turn Knative's Ready False.
 */
export const PRESTART_CONDITION = 'PrestartHooksReady';
/**
 * Knative's Revision conditions that say why it could not resolve the images' digests: its
 * reconcileDigest marks ContainerHealthy False (reason ContainerMissing) and retries by itself.
 * A run waiting for the digests shows the first of these that is False (gate/core/containers.ts).
 */
export const RESOLUTION_CONDITIONS: readonly string[] = ['ContainerHealthy', 'ResourcesAvailable'];

export type FailurePolicy = 'Fail' | 'Ignore';
export type HookMode = 'Enforce' | 'Audit';
export type TransportKind = 'http' | 'broker' | 'nats';
export type ContributionKind = 'env' | 'envFrom' | 'volume';

export interface LabelSelectorRequirement {
  key: string;
  operator: 'In' | 'NotIn' | 'Exists' | 'DoesNotExist';
  values?: string[];
}
export interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: LabelSelectorRequirement[];
}

/** Where and how a hook's requests are delivered. Exactly one branch matches `transport`. */
export interface HookDelivery {
  transport: TransportKind;
  /** transport http: the hook's URL; the gate POSTs the request there. */
  url?: string;
  /** transport broker: the Broker the request goes through, and the subscriber its Trigger delivers to. */
  broker?: {
    name: string;
    namespace: string;
    /** A URL to use instead of the Broker's status.address (e.g. outside the cluster). */
    url?: string;
    subscriber: { ref?: { apiVersion: string; kind: string; name: string; namespace?: string }; uri?: string };
  };
  /** transport nats: the JetStream subject to publish on; defaults to `prestart.requests.<hook>` (must fall under `prestart.requests.>`). */
  nats?: { subject?: string };
}

export interface PrestartHookSpec {
  match: {
    /** The Revision must carry this annotation (with this value, when given). */
    annotation?: { key: string; value?: string };
    namespaceSelector?: LabelSelector;
    /** Selector over the Revision's labels. */
    revisionSelector?: LabelSelector;
  };
  /** Hooks of the same order run in parallel; a higher order starts once all lower ones succeeded. */
  order: number;
  /** Go-style duration ("90s", "10m"): how long one attempt may take before it is TimedOut. */
  timeout: string;
  failurePolicy: FailurePolicy;
  /** Go-style duration: re-send an unanswered request this often (same CloudEvent id). */
  resendInterval: string;
  /**
   * Optional Go-style duration: the hook must send a progress reply at least this often (the first
   * within this long of the request); silent longer, it is TimedOut before its `timeout`.
   */
  heartbeatTimeout?: string;
  /** Enforce (default): the hook holds and may fail the Revision. Audit: requested and recorded, never holds or fails it. */
  mode?: HookMode;
  params?: Record<string, unknown>;
  contributions?: { allowed: ContributionKind[] };
  delivery: HookDelivery;
  /**
   * Who the hook is, for sender identity (docs/protocol.md "Sender identity"). Absent: the hook is
   * known by its HMAC replyid alone, as before.
   */
  identity?: HookIdentity;
  /**
   * Bounds on the hook's `retry` replies (ask me again after a delay): a longer delay is cut to
   * maxDelay (Go duration), and the retry after maxRetries fails the hook. Absent: 5m and 10
   * (gate/core/retry-after.ts); maxRetries 0 refuses retries.
   */
  retryAfter?: { maxDelay?: string; maxRetries?: number };
}

/**
 * The hook's identity on the wire. Its replies to the gate's sink carry a token of
 * `serviceAccount` (checked by TokenReview when the gate runs with --reply-identity); the gate's
 * requests to it carry a token of the gate's own ServiceAccount minted for `audience`, when set.
 */
export interface HookIdentity {
  /** The ServiceAccount the hook runs as: a reply's token must belong to it. */
  serviceAccount?: { namespace: string; name: string };
  /** Direct HTTP: the audience the gate's token is minted for when it calls the hook. */
  audience?: string;
}

export interface PrestartHook {
  /** A PrestartHook's name, or `<namespace>/<name>` for a NamespacedPrestartHook (namespacedHookName). */
  name: string;
  generation: number;
  spec: PrestartHookSpec;
  /**
   * Set for a NamespacedPrestartHook: its namespace, the only one whose Revisions it applies to.
   * Its spec is then the one the gate derived (gate/core/namespaced-hooks.ts): the delivery
   * resolved to its Service's address, the identity in its namespace.
   */
  namespace?: string;
  /** Why the gate will not run this hook (fail closed): the run fails it with this message. */
  problem?: string;
}

/**
 * A team's own hook, for the Revisions of its namespace (config/100-namespacedprestarthook-crd.yaml).
 * It runs after every PrestartHook, delivers only to a Service or Knative Service of its own
 * namespace, and answers as a ServiceAccount of its own namespace.
 */
export interface NamespacedPrestartHookSpec
  extends Pick<
    PrestartHookSpec,
    'order' | 'timeout' | 'failurePolicy' | 'resendInterval' | 'heartbeatTimeout' | 'mode' | 'params' | 'contributions' | 'retryAfter'
  > {
  match: { annotation?: { key: string; value?: string }; revisionSelector?: LabelSelector };
  delivery: {
    transport: 'http';
    /** A Service of the hook's namespace. */
    service?: { name: string; port?: number; path?: string };
    /** A Knative Service of the hook's namespace (its cluster-local address). */
    knativeService?: { name: string; path?: string };
  };
  identity?: { serviceAccount?: { name: string } };
}

/**
 * One container of a Revision as Knative will run it: the image its spec names and the digest
 * Knative resolved for it (status.containerStatuses / status.initContainerStatuses, paired by
 * position as Knative pairs them: api/resources.ts resolvedContainers). Knative builds the
 * Deployment's containers from `digest` when it is set, from `image` otherwise. Init containers:
 * Knative v0.50.0 resolves their digests but keeps the spec's image in the pod (resources/deploy.go
 * BuildPodSpec), so `digest` is what their tag named when Knative resolved it.
 */
export interface ContainerImage {
  /** The container's name in the Revision's spec (Knative names an unnamed single container user-container). */
  name: string;
  /** As written in the Revision's spec (a tag, or already a digest). */
  image: string;
  /**
   * Knative's resolved reference (`repository@sha256:...`). Absent when Knative does not resolve
   * the image's registry (config-deployment `registries-skipping-tag-resolving`, default
   * kind.local, ko.local, dev.local): Knative then runs `image` exactly as written.
   */
  digest?: string;
  /** An init container (spec.initContainers). */
  init?: boolean;
}

export interface RevisionView {
  namespace: string;
  name: string;
  uid: string;
  configuration?: string;
  service?: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
  images: string[];
  /**
   * Every container with the digest Knative resolved, once Knative has resolved them all (its own
   * test: as many statuses as containers, and init containers alike; api/resources.ts
   * digestsResolved); undefined until then. Containers first, then init containers.
   */
  containers?: ContainerImage[];
  createdAt: Date;
  deleting: boolean;
  finalizers: string[];
  /** status.conditions as Knative (and the gate) wrote them; the gate reads and writes only its own type. */
  conditions?: Condition[];
}

export type HookPhase = 'Pending' | 'Requested' | 'Succeeded' | 'Failed' | 'TimedOut' | 'Cancelled';
export type RunPhase = 'Pending' | 'Running' | 'Released' | 'Failed' | 'Cancelled';

/** A Secret the hook asks to project into the Revision's pods (servicebinding.io style). */
export interface Contribution {
  /** Binding name; the volume is mounted at $SERVICE_BINDING_ROOT/<name>. */
  name: string;
  secretName: string;
  as: ContributionKind;
  /** as=env: env var name -> key in the Secret. */
  env?: Record<string, string>;
}

/** The hook's spec as it was when the run started: later edits do not change a running Revision. */
export interface HookSnapshot {
  name: string;
  order: number;
  timeoutSeconds: number;
  resendIntervalSeconds: number;
  /** Present only when the hook sets heartbeatTimeout. */
  heartbeatTimeoutSeconds?: number;
  /** Present only for Audit (shadow) hooks, so snapshots of Enforce hooks stay as they were. */
  mode?: 'Audit';
  /** Present only when the hook sets spec.retryAfter (the defaults apply otherwise: gate/core/retry-after.ts). */
  retryAfter?: { maxDelaySeconds: number; maxRetries: number };
  failurePolicy: FailurePolicy;
  allowedContributions: ContributionKind[];
  delivery: HookDelivery;
  params?: Record<string, unknown>;
}

export interface HookStatus {
  name: string;
  phase: HookPhase;
  /**
   * 1-based; increases when an admin retries and when the gate asks again after the hook's
   * `retry` reply. Resends keep the attempt.
   */
  attempt: number;
  requestedAt?: string;
  /** When a send was last recorded (the request, an outage's resend); other resends are not written (gate/core/resend.ts). */
  lastSentAt?: string;
  answeredAt?: string;
  /** When the hook last sent a progress reply (its heartbeat). */
  lastProgressAt?: string;
  deadline?: string;
  message?: string;
  progress?: number;
  /** Where a person finds more: a URL (logs, a ticket, a dashboard) or a command, from the hook's last reply. */
  details?: string;
  contributions?: Contribution[];
  /** The hook answered `retry`: the gate asks again (attempt + 1, same deadline) then; absent otherwise. */
  retryAt?: string;
  /** How many `retry` replies this hook gave since its stage (or an admin's retry) asked it first. */
  retries?: number;
  /** The reason the hook's last `retry` reply gave. */
  retryReason?: string;
}

export interface Condition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason?: string;
  message?: string;
  /** Knative's severity: "" (Error) counts toward its Ready; the gate's condition on a Revision is always Info. */
  severity?: '' | 'Warning' | 'Info';
  lastTransitionTime: string;
}

export interface PrestartRunSpec {
  revisionUID: string;
  hooks: HookSnapshot[];
  /**
   * When the gate created the run with its first stage requested (RFC 3339, ms). The create is the
   * record of those requests: until the status is stored, it is what that start implies
   * (gate/core/first-stage.ts). Absent on a run that started Pending, or made by an earlier release.
   */
  startedAt?: string;
  /**
   * What the hooks were asked about: the Revision's containers with Knative's resolved digests,
   * recorded before the first request is sent. The gate releases only while the Revision's
   * resolved containers still equal these. Absent on a run made by an earlier release, and on a
   * new run until Knative has resolved every digest (no request goes out before).
   */
  containers?: ContainerImage[];
}

export interface PrestartRunStatus {
  phase: RunPhase;
  hooks: HookStatus[];
  conditions: Condition[];
  /** The value of the retry annotation last acted on. */
  observedRetry?: string;
  releasedAt?: string;
  /** "2/3": succeeded hooks out of all, for kubectl's printer column. */
  summary?: string;
  /** Set when an admin broke the glass (FORCE_RELEASE_ANNOTATION): the run was released without its hooks. */
  forcedRelease?: { reason: string; by: string; at: string };
  /**
   * After the release: pods of the Revision seen running a digest other than the one the hooks
   * approved (gate/core/drift.ts), the first ones found; absent while none was.
   */
  imageDrift?: ImageDriftRecord[];
}

/** A container of a released Revision's pod that runs another digest than the one its hooks approved. */
export interface ImageDriftRecord {
  pod: string;
  container: string;
  /** The approved digest (sha256:...), from the run's spec.containers. */
  expected: string;
  /** The digest the pod's kubelet reports (status.containerStatuses[].imageID). */
  running: string;
  detectedAt: string;
}

export interface PrestartRunView {
  namespace: string;
  name: string;
  /** metadata.uid: replies name the run by it, so one captured from a deleted run never applies to its successor. */
  uid: string;
  /** True for a run created by a release before run binding (no RUN_IDS_ANNOTATION): its requests keep v1 ids. */
  legacyIds?: boolean;
  resourceVersion?: string;
  retryToken?: string;
  /** The admin's break-glass request (FORCE_RELEASE_ANNOTATION and its -by), when there is one. */
  forceRelease?: { reason: string; by: string };
  spec: PrestartRunSpec;
  status?: PrestartRunStatus;
}

/** A verified completed reply, as the sinks hand it to the state. */
export interface Reply {
  namespace: string;
  revision: string;
  revisionUID: string;
  /** The PrestartRun the request was sent for (its metadata.uid); absent in a v1 id (see RUN_IDS_ANNOTATION). */
  runUID?: string;
  hook: string;
  attempt: number;
  /**
   * `progress` is a non-final report: it updates message/progress and keeps the hook Requested.
   * `retry` ends the attempt and asks the gate to ask again after `retryAfter` seconds.
   */
  outcome: 'succeeded' | 'failed' | 'progress' | 'retry';
  /** With `retry` only: seconds until the gate should ask again. */
  retryAfter?: number;
  message?: string;
  /** Where a person finds more (a URL or a command), when the hook gave one. */
  details?: string;
  progress?: number;
  contributions?: Contribution[];
  /** The CloudEvent's source+id, for logs. */
  eventKey: string;
  /** The reply's W3C traceparent, when it carries one: the gate's reply span continues it. */
  traceparent?: string;
}
