// The floor of the house: the prestart.dev API (its labels, annotations and CRD shapes) and the
// plain views of the Kubernetes objects the gate reads. Everything here is plain data and imports
// nothing of ours; every other layer (the contract, the transports, the gate, the hook kit) builds
// on it.

export const API_GROUP = 'prestart.dev';
export const API_VERSION = 'prestart.dev/v1alpha1';

/** Label that holds a Revision (and, copied by Knative, its Deployment) before it may start. */
export const HOLD_LABEL = 'prestart.dev/hold';
/** Annotation with the JSON list of hook names that applied when the Revision was created. */
export const HOOKS_ANNOTATION = 'prestart.dev/hooks';
/** Annotation carrying why the Revision is held; Knative copies it to the Deployment, where the policy message reads it. */
export const REASON_ANNOTATION = 'prestart.dev/reason';
/** Label put on a released Revision whose hooks contributed bindings; scopes the Pod webhook. */
export const INJECT_LABEL = 'prestart.dev/inject';
/** Finalizer on a held Revision so the gate can tell its hooks when it is deleted. */
export const CANCEL_FINALIZER = 'prestart.dev/cancel-hooks';
/** Annotation an admin sets on a PrestartRun (any new value) to re-run its failed or timed-out hooks. */
export const RETRY_ANNOTATION = 'prestart.dev/retry';

export type FailurePolicy = 'Fail' | 'Ignore';
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
  params?: Record<string, unknown>;
  contributions?: { allowed: ContributionKind[] };
  delivery: HookDelivery;
}

export interface PrestartHook {
  name: string;
  generation: number;
  spec: PrestartHookSpec;
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
  createdAt: Date;
  deleting: boolean;
  finalizers: string[];
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
  failurePolicy: FailurePolicy;
  allowedContributions: ContributionKind[];
  delivery: HookDelivery;
  params?: Record<string, unknown>;
}

export interface HookStatus {
  name: string;
  phase: HookPhase;
  /** 1-based; increases only when an admin retries. Resends keep the attempt. */
  attempt: number;
  requestedAt?: string;
  lastSentAt?: string;
  answeredAt?: string;
  deadline?: string;
  message?: string;
  progress?: number;
  contributions?: Contribution[];
}

export interface Condition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason?: string;
  message?: string;
  lastTransitionTime: string;
}

export interface PrestartRunSpec {
  revisionUID: string;
  hooks: HookSnapshot[];
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
}

export interface PrestartRunView {
  namespace: string;
  name: string;
  resourceVersion?: string;
  retryToken?: string;
  spec: PrestartRunSpec;
  status?: PrestartRunStatus;
}

/** A verified completed reply, as the sinks hand it to the state. */
export interface Reply {
  namespace: string;
  revision: string;
  revisionUID: string;
  hook: string;
  attempt: number;
  /** `progress` is a non-final report: it updates message/progress and keeps the hook Requested. */
  outcome: 'succeeded' | 'failed' | 'progress';
  message?: string;
  progress?: number;
  contributions?: Contribution[];
  /** The CloudEvent's source+id, for logs. */
  eventKey: string;
}
