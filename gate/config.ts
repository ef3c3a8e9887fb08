// Everything one gate process is told, with the defaults an in-cluster install uses.
import type { KubeConfig } from '@kubernetes/client-node';
import type { ClusterVersions } from '../api/compatibility.ts';
import type { NatsSecurity } from '../schemas/nats-auth.ts';
import type { TracingConfig } from './telemetry/tracing.ts';

export interface GateConfig {
  kubeConfig: KubeConfig;
  /** Where the gate runs, as read at start (the metric prestart_gate_cluster_info shows it). */
  clusterVersions?: ClusterVersions;
  /** Namespace of the gate's own objects: lease, certificate and key Secrets. */
  namespace: string;
  /** Distinguishes gates sharing one cluster (the lease name, webhook configuration name). */
  instance: string;
  /** Identity in leader election; defaults to the host name and pid. */
  identity: string;
  /** Only namespaces matching this label selector are gated (e.g. "prestart.dev/gate=team-a"). */
  namespaceSelector?: string;
  webhook: {
    host: string;
    port: number;
    /** Local/out-of-cluster: the URL the apiserver calls, e.g. https://127.0.0.1:8443. */
    urlBase?: string;
    /** In-cluster: the Service in front of the gate. */
    service?: { name: string; namespace: string; port: number };
    /** Where contributed volumes are mounted; servicebinding.io's SERVICE_BINDING_ROOT. */
    bindingRoot: string;
  };
  sink: {
    host: string;
    port: number;
    /** The sink URL hooks reply to (data.replyTo); defaults to http://<host>:<port>/events. */
    publicUrl?: string;
    maxBytes: number;
  };
  /** CloudEvents `source` of the gate's events. */
  source: string;
  /**
   * NATS JetStream delivery: the servers (comma-separated for a cluster), the gate's credentials
   * and TLS (secrets by file), and the copies of its streams (default: 3 on a clustered server,
   * else 1; see streamReplicas).
   */
  nats?: { servers: string; security?: NatsSecurity; replicas?: number };
  /** Where spans go over OTLP/HTTP; default from OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT, else no export (docs/operations.md). */
  tracing?: TracingConfig;
  /**
   * Keep the Knative Triggers of Broker-delivered hooks, with the gate's reply Trigger
   * delivering to `replyUri` (a URL the Broker can reach). Off when undefined.
   */
  triggers?: { replyUri: string; namespaces?: string[] };
  broker?: {
    defaultNamespace?: string;
    /**
     * HTTP forward proxy for Broker delivery (every non-loopback ingress address goes through it).
     * Unset: HTTP_PROXY / HTTPS_PROXY / NO_PROXY decide.
     */
    proxy?: string;
    /**
     * Broker classes trusted besides emitter/broker-address.ts's KNOWN_BROKER_CLASSES: the gate
     * sends only to a Broker of a class whose controller writes its status (--broker-class).
     */
    classes?: string[];
  };
  /**
   * Sender identity (docs/protocol.md "Sender identity"). Absent: replies are trusted on their
   * HMAC replyid alone and the gate sends no tokens, as before.
   */
  senderIdentity?: {
    /** What the HTTP sink asks of a reply's bearer token (IdentityMode); default off. */
    replies: 'off' | 'optional' | 'declared' | 'required';
    /** The audience the sink announces and reviews reply tokens for. Default DEFAULT_SINK_AUDIENCE. */
    audience?: string;
  };
  /** The gate's own ServiceAccount, whose tokens (TokenRequest) go to hooks naming an audience. Default knative-prestart/knative-prestart-gate. */
  serviceAccount?: { namespace: string; name: string };
  workers: number;
  /** How long a dead leader's lease blocks a successor; a leader that cannot renew for 2/3 of it steps down. */
  leaseSeconds?: number;
  /** Every apiserver request gives up after this long. Default DEFAULTS.apiTimeoutSeconds. */
  apiTimeoutSeconds?: number;
  /**
   * An informer failing this long (its watch cannot be re-established) makes /healthz fail, and
   * makes the Revision webhook refuse rather than stamp from that cache. Default DEFAULTS.watchFailureSeconds.
   */
  watchFailureSeconds?: number;
  /** The apiserver ends each watch after this long and the gate renews it; default random 5 to 10 min, as client-go. */
  watchTimeoutSeconds?: number;
  /** How often the leader reconciles every Revision again, events or not; 0 turns it off. Default DEFAULTS.resyncSeconds. */
  resyncSeconds?: number;
  /**
   * The teams' NamespacedPrestartHooks: how many one namespace may have before none of them runs
   * (--namespaced-hook-limit; default 20, at most 40), and the cluster's DNS domain their Services'
   * addresses end in (--cluster-domain; default cluster.local).
   */
  namespacedHooks?: { limit?: number; clusterDomain?: string };
  /**
   * A stand-in for cluster DNS where the gate runs outside the cluster network (the tests, the
   * quickstart): where the direct HTTP transport connects for a cluster address, e.g. a team's
   * Service; undefined for an address it should dial as it is. Unset in a cluster.
   */
  serviceDns?: (url: URL) => URL | undefined;
  /** How often every replica looks again at who stamps new Revisions (webhooks/stamp-path.ts). Default DEFAULTS.stampCheckSeconds. */
  stampCheckSeconds?: number;
  /**
   * 'auto' (default): register the Revision webhook only where the apiserver does not stamp.
   * 'always': register it there too; the apiserver stamps first and the webhook writes the same
   * stamp again, and refuses (retryably) a Revision it cannot decide, as on older clusters.
   */
  revisionWebhook?: 'auto' | 'always';
}

export const DEFAULTS = {
  namespace: 'knative-prestart',
  instance: 'default',
  webhookPort: 8443,
  sinkPort: 8080,
  bindingRoot: '/bindings',
  maxReplyBytes: 64 * 1024,
  /**
   * Revisions reconciled at once. A worker only writes to the apiserver (sends and background
   * writes are off the workers), so this is how many of the gate's writes are in flight: too few,
   * and a burst of replies is released a few at a time, slower than the apiserver takes the same
   * PATCHes at once (bench/scale.ts measures it).
   */
  workers: 16,
  source: '/apis/prestart.dev/v1alpha1/gate',
  /**
   * Knative's controllers resync every 10 h: there a missed event only delays convergence. Here
   * it can leave a Revision held, which users see at once, so the bound is minutes. Held
   * Revisions with hooks in flight already wake up on their own (deadlines, resends every 30 s by
   * default); the resync only catches what no event and no timer covers, and costs one decide()
   * per Revision from the cache, no apiserver request for a Revision with nothing to do.
   */
  resyncSeconds: 300,
  /** Four GETs per replica; between an admin's change and the next look, hooked Revisions are refused, never unheld. */
  stampCheckSeconds: 30,
  /** Well above a healthy call (a 10 000-Revision list takes a few seconds), well below "hung". */
  apiTimeoutSeconds: 30,
  /** A watch restarts within 2 s of an error; half a minute of failures is an outage, not a blip. */
  watchFailureSeconds: 30,
  /**
   * On SIGTERM the gate steps down, then serves until no request came for drainQuietSeconds
   * (gate/server/drain.ts): longer than an EndpointSlice and kube-proxy update on a busy node.
   * drainMaxSeconds bounds it well inside the pod's 30 s grace period.
   */
  drainQuietSeconds: 5,
  drainMaxSeconds: 20,
} as const;
