// Revisions and PrestartRuns in a test gate's namespace: a Revision created the way Knative's
// configuration controller creates it, the Deployment Knative would then create for it, and
// what the gate wrote back (its hold, its PrestartRun, its Events).
import {
  ApiException,
  AppsV1Api,
  CoreV1Api,
  type CoreV1Event,
  CustomObjectsApi,
  type KubeConfig,
  type KubernetesObject,
  PatchStrategy,
  setHeaderOptions,
} from '@kubernetes/client-node';
import { REVISIONS, type RevisionObject, RUNS, type RunObject } from '../../api/resources.ts';
import { HOLD_LABEL } from '../../api/types.ts';
import { waitFor } from '../wait.ts';

/** The gate's hold label, as `kubectl get revision -L prestart.dev/hold` shows it. */
export const isHeld = (rev: KubernetesObject | undefined): boolean => rev?.metadata?.labels?.[HOLD_LABEL] === 'true';

export interface RevisionOptions {
  annotations?: Record<string, string>;
  labels?: Record<string, string>;
  /** Default: the name without its -NNNNN suffix, as Knative names Revisions. */
  configuration?: string;
  generation?: number;
  /** Who creates it (a tenant, say); default the admin. */
  kc?: KubeConfig;
  /**
   * The status.containerStatuses Knative's revision reconciler writes once it resolved the digests
   * (the gate asks no hook before): default one user-container without a digest, as Knative
   * writes it for dev.local, a registry it skips; false: none yet (a test writes them later).
   */
  containerStatuses?: false | Array<{ name?: string; imageDigest?: string }>;
}

export type DeploymentAttempt = { created: true } | { created: false; status: number; message: string };

export interface RevisionMethods {
  /** Creates a Revision the way Knative's configuration controller does (labels included). */
  createRevision(name: string, opts?: RevisionOptions): Promise<RevisionObject>;
  getRevision(name: string): Promise<RevisionObject>;
  /** What the apiserver would admit for createRevision, with its mutations, without creating it (dry run). */
  dryRunRevision(name: string, opts?: RevisionOptions): Promise<RevisionObject>;
  /** Waits until the gate releases Revision `name` (removes its hold), and returns it. */
  waitReleased(name: string, timeoutMs?: number): Promise<RevisionObject>;
  getRun(name: string): Promise<RunObject | undefined>;
  /** Waits until PrestartRun `name` exists and passes `ok`; `what` says what the test waits for. */
  waitForRun(name: string, what: string, ok: (run: RunObject) => boolean, timeoutMs?: number): Promise<RunObject>;
  /** Merges `annotations` into PrestartRun `name`, as `kc` (default the admin). */
  annotateRun(name: string, annotations: Record<string, string>, kc?: KubeConfig): Promise<void>;
  /** Tries to create the Deployment Knative would create for the Revision: its labels and annotations, copied. */
  createDeploymentLikeKnative(rev: RevisionObject): Promise<DeploymentAttempt>;
  revisionEvents(name: string): Promise<CoreV1Event[]>;
}

export function revisionMethods(admin: KubeConfig, namespace: string): RevisionMethods {
  const custom = admin.makeApiClient(CustomObjectsApi);
  const getRevision = async (name: string) => (await custom.getNamespacedCustomObject({ ...REVISIONS, namespace, name })) as RevisionObject;
  const getRun = async (name: string) => {
    try {
      return (await custom.getNamespacedCustomObject({ ...RUNS, namespace, name })) as RunObject;
    } catch (err) {
      if (err instanceof ApiException && err.code === 404) return undefined;
      throw err;
    }
  };
  return {
    async createRevision(name, opts = {}) {
      const api = (opts.kc ?? admin).makeApiClient(CustomObjectsApi);
      const created = (await api.createNamespacedCustomObject({
        ...REVISIONS,
        namespace,
        body: revisionBody(namespace, name, opts),
      })) as RevisionObject;
      const containerStatuses = opts.containerStatuses ?? [{ name: 'user-container' }];
      if (containerStatuses === false) return created;
      // What Knative's reconcileDigest writes next, as Knative (here: the admin) through the status subresource.
      return (await custom.patchNamespacedCustomObjectStatus(
        { ...REVISIONS, namespace, name, body: { status: { containerStatuses } } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      )) as RevisionObject;
    },
    getRevision,
    async dryRunRevision(name, opts = {}) {
      const api = (opts.kc ?? admin).makeApiClient(CustomObjectsApi);
      return (await api.createNamespacedCustomObject({
        ...REVISIONS,
        namespace,
        body: revisionBody(namespace, name, opts),
        dryRun: 'All',
      })) as RevisionObject;
    },
    waitReleased(name, timeoutMs = 30_000) {
      return waitFor(
        async () => {
          const rev = await getRevision(name);
          return isHeld(rev) ? undefined : rev;
        },
        { timeoutMs, what: `Revision ${name} released` },
      );
    },
    getRun,
    waitForRun(name, what, ok, timeoutMs = 30_000) {
      return waitFor(
        async () => {
          const run = await getRun(name);
          return run && ok(run) ? run : undefined;
        },
        { timeoutMs, what: `PrestartRun ${name}: ${what}` },
      );
    },
    async annotateRun(name, annotations, kc) {
      const api = (kc ?? admin).makeApiClient(CustomObjectsApi);
      await api.patchNamespacedCustomObject(
        { ...RUNS, namespace, name, body: { metadata: { annotations } } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
    },
    createDeploymentLikeKnative: (rev) => createDeploymentLikeKnative(admin.makeApiClient(AppsV1Api), namespace, rev),
    async revisionEvents(name) {
      const core = admin.makeApiClient(CoreV1Api);
      return (await core.listNamespacedEvent({ namespace, fieldSelector: `involvedObject.name=${name}` })).items;
    },
  };
}

/** A Revision as Knative's configuration controller writes it, with `opts`' labels, annotations and (a tenant's) finalizers or uid. */
export function revisionBody(namespace: string, name: string, opts: RevisionOptions & { finalizers?: string[]; uid?: string }): object {
  const configuration = opts.configuration ?? name.replace(/-\d+$/, '');
  return {
    apiVersion: 'serving.knative.dev/v1',
    kind: 'Revision',
    metadata: {
      name,
      namespace,
      labels: {
        'serving.knative.dev/configuration': configuration,
        'serving.knative.dev/configurationGeneration': String(opts.generation ?? 1),
        'serving.knative.dev/service': configuration,
        ...opts.labels,
      },
      annotations: opts.annotations ?? {},
      ...(opts.finalizers ? { finalizers: opts.finalizers } : {}),
      ...(opts.uid ? { uid: opts.uid } : {}),
    },
    spec: { containers: [{ image: 'dev.local/demo/app:v1', name: 'user-container' }] },
  };
}

async function createDeploymentLikeKnative(apps: AppsV1Api, namespace: string, rev: RevisionObject): Promise<DeploymentAttempt> {
  const md = rev.metadata ?? {};
  const labels = { ...(md.labels ?? {}), 'serving.knative.dev/revision': md.name ?? '', 'serving.knative.dev/revisionUID': md.uid ?? '' };
  try {
    await apps.createNamespacedDeployment({
      namespace,
      body: {
        metadata: { name: `${md.name}-deployment`, namespace, labels, annotations: md.annotations ?? {} },
        spec: {
          replicas: 1,
          selector: { matchLabels: { 'serving.knative.dev/revisionUID': md.uid ?? '' } },
          template: {
            metadata: { labels, annotations: md.annotations ?? {} },
            spec: {
              containers: [
                { name: 'user-container', image: 'dev.local/demo/app:v1' },
                { name: 'queue-proxy', image: 'dev.local/queue:v1' },
              ],
            },
          },
        },
      },
    });
    return { created: true };
  } catch (err) {
    if (err instanceof ApiException) {
      const body = typeof err.body === 'string' ? safeJson(err.body) : err.body;
      return { created: false, status: err.code, message: (body as { message?: string } | undefined)?.message ?? String(err.body) };
    }
    throw err;
  }
}

function safeJson(s: string): unknown {
  try {
    return JSON.parse(s);
  } catch {
    return { message: s };
  }
}
