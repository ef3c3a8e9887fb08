// Knative objects as a user writes and reads them, what the dev cluster's users (the quickstart,
// the e2e suite, the benches) observe over time (events, Deployments), and the one stand-in
// it needs (Ingresses). Knows nothing of the gate.
import {
  ApiException,
  type CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  PatchStrategy,
  setHeaderOptions,
  type V1Pod,
  Watch,
} from '@kubernetes/client-node';
import { WaitTimeoutError, waitFor } from './wait.ts';

export interface Condition {
  type: string;
  status: string;
  reason?: string;
  message?: string;
}

export interface TrafficTarget {
  revisionName?: string;
  percent?: number;
  latestRevision?: boolean;
}

export interface KnativeObject {
  metadata?: {
    name?: string;
    namespace?: string;
    uid?: string;
    generation?: number;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    finalizers?: string[];
  };
  status?: {
    observedGeneration?: number;
    conditions?: Condition[];
    latestCreatedRevisionName?: string;
    latestReadyRevisionName?: string;
    traffic?: TrafficTarget[];
    /** A Revision's: one per container once Knative resolved its image (imageDigest absent where it skips the registry). */
    containerStatuses?: { name?: string; imageDigest?: string }[];
  };
}

export function condition(obj: KnativeObject | undefined, type: string): Condition | undefined {
  return obj?.status?.conditions?.find((c) => c.type === type);
}

/** "Ready=Unknown/Deploying, ResourcesAvailable=…": for failure messages. */
export function conditionsLine(obj: KnativeObject | undefined): string {
  return (
    (obj?.status?.conditions ?? []).map((c) => `${c.type}=${c.status}${c.reason ? `/${c.reason}` : ''}`).join(', ') || '(no conditions)'
  );
}

export class Knative {
  private readonly api: CustomObjectsApi;
  constructor(
    kc: KubeConfig,
    readonly namespace: string,
  ) {
    this.api = kc.makeApiClient(CustomObjectsApi);
  }

  private async get(plural: string, name: string, group = 'serving.knative.dev', version = 'v1'): Promise<KnativeObject | undefined> {
    try {
      return (await this.api.getNamespacedCustomObject({ group, version, plural, namespace: this.namespace, name })) as KnativeObject;
    } catch (err) {
      if (err instanceof ApiException && err.code === 404) return undefined;
      throw err;
    }
  }

  service(name: string) {
    return this.get('services', name);
  }
  revision(name: string) {
    return this.get('revisions', name);
  }
  route(name: string) {
    return this.get('routes', name);
  }

  /**
   * A Knative Service of one container as a user writes it. The HPA autoscaler class: the
   * default KPA scrapes pod IPs, which nothing may reach here.
   */
  async createService(name: string, template: ServiceTemplate = {}): Promise<KnativeObject> {
    return (await this.api.createNamespacedCustomObject({
      group: 'serving.knative.dev',
      version: 'v1',
      plural: 'services',
      namespace: this.namespace,
      body: {
        apiVersion: 'serving.knative.dev/v1',
        kind: 'Service',
        metadata: { name },
        spec: { template: serviceTemplate(template) },
      },
    })) as KnativeObject;
  }

  /** A new template, as `kn service update` sends it: Knative creates the next Revision. */
  async updateService(name: string, template: ServiceTemplate): Promise<void> {
    await this.api.patchNamespacedCustomObject(
      {
        group: 'serving.knative.dev',
        version: 'v1',
        plural: 'services',
        namespace: this.namespace,
        name,
        body: { spec: { template: serviceTemplate(template) } },
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
  }
}

/** What a test varies in a Service's template; the image defaults to one in dev.local, which Knative never resolves. */
export interface ServiceTemplate {
  annotations?: Record<string, string>;
  env?: Record<string, string>;
  image?: string;
}

function serviceTemplate(t: ServiceTemplate): object {
  return {
    metadata: { annotations: { 'autoscaling.knative.dev/class': 'hpa.autoscaling.knative.dev', ...t.annotations } },
    spec: {
      containers: [
        {
          image: t.image ?? 'dev.local/demo/app:v1',
          ...(t.env ? { env: Object.entries(t.env).map(([name, value]) => ({ name, value })) } : {}),
        },
      ],
    },
  };
}

/** Waits until Revision `name` satisfies `ok`; the timeout names its conditions and where Knative logs. */
export function waitForRevision(
  kn: Knative,
  name: string,
  what: string,
  ok: (rev: KnativeObject) => boolean,
  { timeoutMs = 30_000, logs }: { timeoutMs?: number; logs?: string } = {},
): Promise<KnativeObject> {
  let last: KnativeObject | undefined;
  return waitFor(
    async () => {
      last = await kn.revision(name);
      return last && ok(last) ? last : undefined;
    },
    { timeoutMs, what: `Revision ${name} ${what}` },
  ).catch((err: unknown) => {
    throw new Error(`${(err as Error).message}; its conditions: ${conditionsLine(last)}${logs ? `; Knative's log: ${logs}` : ''}`);
  });
}

/** A pod of the Revision that kwok reports Ready. */
export function readyPodOf(core: CoreV1Api, namespace: string, revision: string): Promise<V1Pod> {
  return waitFor(
    async () => {
      const pods = await core.listNamespacedPod({ namespace, labelSelector: `serving.knative.dev/revision=${revision}` });
      // A terminating pod may still say Ready, but it is on its way out.
      return pods.items.find(
        (p) => !p.metadata?.deletionTimestamp && p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'),
      );
    },
    { timeoutMs: 60_000, what: `a Ready pod of ${revision} (kwok node)` },
  );
}

export interface Sighting<T> {
  object: T;
  /** performance.now() when the watch delivered it. */
  at: number;
}

/**
 * Watches a collection from now on and keeps every ADDED/MODIFIED object with the time it was
 * seen, so a test can ask afterwards what existed when, instead of sampling now and then.
 */
export async function watchCollection<T extends { metadata?: { name?: string } }>(
  kc: KubeConfig,
  path: string,
  query: Record<string, string> = {},
): Promise<{ seen: Sighting<T>[]; stop(): void }> {
  const seen: Sighting<T>[] = [];
  let stopped = false;
  let controller: AbortController | undefined;
  const start = async (): Promise<void> => {
    controller = await new Watch(kc).watch(
      path,
      query,
      (phase, obj: T) => {
        if (phase === 'ADDED' || phase === 'MODIFIED') seen.push({ object: obj, at: performance.now() });
      },
      // A watch the apiserver ends (timeout) is resumed; seeing an object again is harmless.
      () => {
        if (!stopped) void start();
      },
    );
  };
  await start();
  return {
    seen,
    stop() {
      stopped = true;
      controller?.abort();
    },
  };
}

/** Resolves with the first sighting `ok` accepts, or throws one line naming `what` after timeoutMs. */
export async function firstSighting<T>(
  sightings: Sighting<T>[],
  ok: (o: T) => boolean,
  what: string,
  timeoutMs: number,
): Promise<Sighting<T>> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const hit = sightings.find((s) => ok(s.object));
    if (hit) return hit;
    if (performance.now() > deadline) throw new WaitTimeoutError(`timed out after ${(timeoutMs / 1000).toFixed(1)}s waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

export interface CoreEvent {
  metadata?: { name?: string };
  reason?: string;
  message?: string;
  count?: number;
  type?: string;
  source?: { component?: string };
  involvedObject?: { name?: string; kind?: string };
}

/** Knative's reconcile attempts of one object, one per increment of its InternalError event's count. */
export function retryTimes(events: Sighting<CoreEvent>[]): { count: number; at: number }[] {
  const out: { count: number; at: number }[] = [];
  let last = 0;
  for (const { object, at } of events) {
    if (object.reason !== 'InternalError') continue;
    const count = object.count ?? 1;
    if (count > last) {
      out.push({ count, at });
      last = count;
    }
  }
  return out;
}

/**
 * STAND-IN for a Knative networking layer (Istio, Kourier, Contour: none runs here). It does
 * what such a layer reports once it programmed an Ingress, and nothing else: marks every
 * Ingress of the namespace (or, with ALL_NAMESPACES, of the cluster, as a real layer does) Ready
 * for its current generation, with a cluster-internal load balancer name. Knative's route
 * reconciler then marks the Route, and so the Service, Ready. No traffic flows anywhere: the suite
 * reads traffic from Route/Service status only.
 */
export function startIngressStandIn(kc: KubeConfig, namespace: string | typeof ALL_NAMESPACES): { stop(): void } {
  return runIngressStandIn(
    kc,
    namespace === ALL_NAMESPACES ? ALL_NAMESPACES : [namespace],
    async () => 'stand-in-ingress.knative-serving.svc.cluster.local',
  );
}

/** Every namespace, now and later: what a networking layer watches. */
export const ALL_NAMESPACES = Symbol('all namespaces');

export type IngressObject = KnativeObject & { metadata: { name: string; generation: number } };

/**
 * The loop of the Ingress stand-ins (this file's and ingress-route-stand-in.ts), as a controller
 * runs: every 200 ms, each Ingress of `namespaces` not Ready for its generation is marked Ready
 * with the load balancer `addressFor` names for it; undefined leaves it for a later round.
 */
export function runIngressStandIn<I extends IngressObject>(
  kc: KubeConfig,
  namespaces: string[] | typeof ALL_NAMESPACES,
  addressFor: (ing: I, api: CustomObjectsApi) => Promise<string | undefined>,
): { stop(): void } {
  const api = kc.makeApiClient(CustomObjectsApi);
  let stopped = false;
  const lists: (() => Promise<unknown>)[] =
    namespaces === ALL_NAMESPACES
      ? [() => api.listClusterCustomObject(INGRESSES)]
      : namespaces.map((namespace) => () => api.listNamespacedCustomObject({ ...INGRESSES, namespace }));
  const loop = async () => {
    while (!stopped) {
      for (const list of lists) {
        try {
          for (const ing of ((await list()) as { items: I[] }).items) {
            const ready = condition(ing, 'Ready')?.status === 'True' && ing.status?.observedGeneration === ing.metadata.generation;
            if (ready) continue;
            const address = await addressFor(ing, api);
            if (address !== undefined) await markIngressReady(api, ing.metadata.namespace ?? '', ing.metadata, address);
          }
        } catch {
          // A conflict or a namespace going away: the next round sees the current state.
        }
      }
      // A controller's poll period, not a test waiting on a condition.
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  };
  void loop();
  return {
    stop() {
      stopped = true;
    },
  };
}

const INGRESSES = { group: 'networking.internal.knative.dev', version: 'v1alpha1', plural: 'ingresses' } as const;

/** Writes what a networking layer writes once it serves Ingress `ing`: Ready, with `domainInternal` as its load balancer. */
async function markIngressReady(
  api: CustomObjectsApi,
  namespace: string,
  ing: { name: string; generation: number },
  domainInternal: string,
): Promise<void> {
  const lb = { ingress: [{ domainInternal }] };
  const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  const conditions = ['LoadBalancerReady', 'NetworkConfigured', 'Ready'].map((type) => ({ type, status: 'True', lastTransitionTime: now }));
  await api.patchNamespacedCustomObjectStatus(
    {
      ...INGRESSES,
      namespace,
      name: ing.name,
      body: { status: { observedGeneration: ing.generation, conditions, publicLoadBalancer: lb, privateLoadBalancer: lb } },
    },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );
}
