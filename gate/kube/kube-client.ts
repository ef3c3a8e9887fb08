// The gate's writes to Kubernetes. Every write is either idempotent (merge patches that set a
// final value) or guarded by resourceVersion (optimistic concurrency), so a crash or a second
// replica at any point cannot apply an effect twice or on top of a state it did not see.
import type { RequestOptions } from 'node:https';
import {
  type ApiConstructor,
  type ApiType,
  CoreV1Api,
  CustomObjectsApi,
  createConfiguration,
  KubeConfig,
  PatchStrategy,
  type RequestContext,
  ServerConfiguration,
  setHeaderOptions,
  type V1Namespace,
  wrapHttpLibrary,
} from '@kubernetes/client-node';
import { isNotFound } from '../../api/kube-errors.ts';
import { FIELD_MANAGER, REVISIONS, type Resource, type RevisionObject, RUNS, type RunObject } from '../../api/resources.ts';
import {
  type Condition,
  type ContainerImage,
  EVENT_REASON_LABEL,
  type ImageDriftRecord,
  type PrestartRunSpec,
  type PrestartRunStatus,
  type RevisionView,
  RUN_IDS_ANNOTATION,
  RUN_IDS_V2,
} from '../../api/types.ts';
import type { JsonPatchOp } from '../core/jsonpatch.ts';
import { ApiserverAgentPool, PooledHttp, type RequestObserver } from './apiserver-agent-pool.ts';

export class KubeClient {
  readonly custom: CustomObjectsApi;
  readonly core: CoreV1Api;

  /**
   * Hears every run this client creates or whose status it writes, as the apiserver returned it:
   * the gate keeps it until its informer catches up (written-runs.ts).
   */
  onRunWritten: (run: RunObject) => void = () => undefined;

  constructor(readonly kc: KubeConfig) {
    this.custom = kc.makeApiClient(CustomObjectsApi);
    this.core = kc.makeApiClient(CoreV1Api);
  }

  async list<T>(r: Resource): Promise<{ items: T[]; metadata?: { resourceVersion?: string } }> {
    return this.custom.listClusterCustomObject({ group: r.group, version: r.version, plural: r.plural });
  }

  async getRun(namespace: string, name: string): Promise<RunObject | undefined> {
    try {
      return (await this.custom.getNamespacedCustomObject({ ...gvp(RUNS), namespace, name })) as RunObject;
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  async getNamespace(name: string): Promise<V1Namespace | undefined> {
    try {
      return await this.core.readNamespace({ name });
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  async getRevision(namespace: string, name: string): Promise<RevisionObject | undefined> {
    try {
      return (await this.custom.getNamespacedCustomObject({ ...gvp(REVISIONS), namespace, name })) as RevisionObject;
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  /**
   * Creates the run owned by its Revision (garbage collected with it), then writes its first status
   * when one is given (a run started with spec.startedAt has none to write yet): returns it as stored.
   */
  async createRun(revision: RevisionView, spec: PrestartRunSpec, status: PrestartRunStatus | undefined): Promise<RunObject> {
    const body: RunObject = {
      apiVersion: `${RUNS.group}/${RUNS.version}`,
      kind: 'PrestartRun',
      metadata: {
        name: revision.name,
        namespace: revision.namespace,
        labels: { 'serving.knative.dev/revision': revision.name },
        annotations: { [RUN_IDS_ANNOTATION]: RUN_IDS_V2 },
        ownerReferences: [{ apiVersion: 'serving.knative.dev/v1', kind: 'Revision', name: revision.name, uid: revision.uid }],
      },
      spec,
    };
    const created = (await this.custom.createNamespacedCustomObject({
      ...gvp(RUNS),
      namespace: revision.namespace,
      body,
      fieldManager: FIELD_MANAGER,
    })) as RunObject;
    if (status) return this.replaceRunStatus(created, status);
    this.onRunWritten(created);
    return created;
  }

  /** Replaces the status, failing with 409 when the run changed since `run` was read. */
  async replaceRunStatus(run: RunObject, status: PrestartRunStatus): Promise<RunObject> {
    const body = { ...run, status };
    const written = (await this.custom.replaceNamespacedCustomObjectStatus({
      ...gvp(RUNS),
      namespace: run.metadata?.namespace ?? '',
      name: run.metadata?.name ?? '',
      body,
      fieldManager: FIELD_MANAGER,
    })) as RunObject;
    this.onRunWritten(written);
    return written;
  }

  /**
   * Writes spec.containers on the run, failing with 409 when the run changed since `run`
   * was read (its resourceVersion is the patch's precondition) and with 422 when the run already
   * records containers (the CRD lets spec.containers be set once, nothing else in the spec change).
   */
  async recordRunContainers(run: RunObject, containers: ContainerImage[]): Promise<RunObject> {
    const written = (await this.custom.patchNamespacedCustomObject(
      {
        ...gvp(RUNS),
        namespace: run.metadata?.namespace ?? '',
        name: run.metadata?.name ?? '',
        body: { metadata: { resourceVersion: run.metadata?.resourceVersion }, spec: { containers } },
        fieldManager: FIELD_MANAGER,
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    )) as RunObject;
    this.onRunWritten(written);
    return written;
  }

  /**
   * Writes status.imageDrift on a run, and nothing else of its status: a finished run is cached
   * slim and final (cache-views.ts), so its status is never replaced, only this field merged in.
   */
  async recordRunDrift(namespace: string, name: string, imageDrift: ImageDriftRecord[]): Promise<RunObject> {
    const written = (await this.custom.patchNamespacedCustomObjectStatus(
      { ...gvp(RUNS), namespace, name, body: { status: { imageDrift } }, fieldManager: FIELD_MANAGER },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    )) as RunObject;
    this.onRunWritten(written);
    return written;
  }

  /** A JSON merge patch; put metadata.resourceVersion in it to make it conditional. */
  async mergePatchRevision(namespace: string, name: string, patch: object): Promise<void> {
    await this.custom.patchNamespacedCustomObject(
      { ...gvp(REVISIONS), namespace, name, body: patch, fieldManager: FIELD_MANAGER },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
  }

  /** An RFC 6902 JSON patch: its test operations make it conditional on exactly what it changes. Returns the patched resourceVersion. */
  async jsonPatchRevision(namespace: string, name: string, ops: readonly JsonPatchOp[]): Promise<string | undefined> {
    const patched = (await this.custom.patchNamespacedCustomObject(
      { ...gvp(REVISIONS), namespace, name, body: ops, fieldManager: FIELD_MANAGER },
      setHeaderOptions('Content-Type', PatchStrategy.JsonPatch),
    )) as RevisionObject;
    return patched.metadata?.resourceVersion;
  }

  /**
   * Sets one condition type on the Revision's status and keeps every other one (Knative's): a live
   * read, then a merge patch of status.conditions conditional on that read's resourceVersion, so a
   * status Knative wrote in between is never overwritten (409: the caller decides again).
   */
  async setRevisionCondition(namespace: string, name: string, condition: Condition): Promise<void> {
    const live = await this.getRevision(namespace, name);
    if (!live) return;
    // The cache may lag behind the gate's own last write: nothing to do when the live object shows it.
    const current = live.status?.conditions?.find((c) => c.type === condition.type);
    if (current && (['status', 'reason', 'message', 'severity'] as const).every((k) => (current[k] ?? '') === (condition[k] ?? ''))) return;
    const others = (live.status?.conditions ?? []).filter((c) => c.type !== condition.type);
    const conditions = [...others, condition].sort((a, b) => (a.type < b.type ? -1 : a.type > b.type ? 1 : 0));
    await this.custom.patchNamespacedCustomObjectStatus(
      {
        ...gvp(REVISIONS),
        namespace,
        name,
        body: { metadata: { resourceVersion: live.metadata?.resourceVersion }, status: { conditions } },
        fieldManager: FIELD_MANAGER,
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
  }

  async recordEvent(revision: RevisionView, eventType: 'Normal' | 'Warning', reason: string, message: string, now: Date): Promise<void> {
    await this.core.createNamespacedEvent({
      namespace: revision.namespace,
      body: {
        metadata: { generateName: `${revision.name}.`, namespace: revision.namespace, labels: { [EVENT_REASON_LABEL]: reason } },
        involvedObject: {
          apiVersion: 'serving.knative.dev/v1',
          kind: 'Revision',
          name: revision.name,
          namespace: revision.namespace,
          uid: revision.uid,
        },
        type: eventType,
        reason,
        message: message.slice(0, 1024),
        source: { component: FIELD_MANAGER },
        firstTimestamp: now,
        lastTimestamp: now,
        count: 1,
      },
    });
  }
}

function gvp(r: Resource): { group: string; version: string; plural: string } {
  return { group: r.group, version: r.version, plural: r.plural };
}

/**
 * A copy of `kc` whose every API request gives up after `timeoutMs` (client-node sets no timeout:
 * a half-open connection would hang a status write, or a lease renewal, forever), and whose
 * watches give up when the apiserver has not answered within `timeoutMs`. Every API client made
 * from it (makeApiClient) inherits both, and tells `observe` how long each request took (watches
 * are not requests that end: they are not told).
 */
export function withRequestTimeout(kc: KubeConfig, timeoutMs: number, observe?: RequestObserver): KubeConfig {
  const timed = new TimedKubeConfig(Math.max(1, Math.round(timeoutMs)), observe);
  timed.loadFromOptions({ clusters: kc.clusters, contexts: kc.contexts, users: kc.users, currentContext: kc.currentContext });
  return timed;
}

class TimedKubeConfig extends KubeConfig {
  /** Kept connections (client-node would open one per request: gate/kube/apiserver-agent-pool.ts). */
  private readonly connections = new ApiserverAgentPool();

  constructor(
    private readonly timeoutMs: number,
    private readonly observe: RequestObserver | undefined,
  ) {
    super();
  }

  /** Every generated API client calls this before each request; a caller's own signal wins. */
  override async applySecurityAuthentication(context: RequestContext): Promise<void> {
    await super.applySecurityAuthentication(context);
    if (context.getSignal() === undefined) context.setSignal(AbortSignal.timeout(this.timeoutMs));
  }

  /** API clients that send over the pool's kept connections (gate/kube/apiserver-agent-pool.ts). */
  override makeApiClient<T extends ApiType>(apiClientType: ApiConstructor<T>): T {
    const cluster = this.getCurrentCluster();
    if (!cluster) throw new Error('No active cluster!');
    const httpApi = wrapHttpLibrary(new PooledHttp(this.connections, this.observe));
    return new apiClientType(
      createConfiguration({ baseServer: new ServerConfiguration(cluster.server, {}), authMethods: { default: this }, httpApi }),
    );
  }

  /** Watches: node-fetch's `timeout` bounds the wait for the response head (the stream itself is guarded in informer.ts). */
  override async applyToFetchOptions(opts: RequestOptions): ReturnType<KubeConfig['applyToFetchOptions']> {
    return { ...(await super.applyToFetchOptions(opts)), timeout: this.timeoutMs };
  }
}
