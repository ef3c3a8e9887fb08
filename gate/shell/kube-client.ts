// The gate's writes to Kubernetes. Every write is either idempotent (merge patches that set a
// final value) or guarded by resourceVersion (optimistic concurrency), so a crash or a second
// replica at any point cannot apply an effect twice or on top of a state it did not see.
import { CoreV1Api, CustomObjectsApi, type KubeConfig, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { isNotFound } from '../../api/kube-errors.ts';
import { FIELD_MANAGER, REVISIONS, type Resource, type RevisionObject, RUNS, type RunObject } from '../../api/resources.ts';
import type { PrestartRunSpec, PrestartRunStatus, RevisionView } from '../../api/types.ts';

export class KubeClient {
  readonly custom: CustomObjectsApi;
  readonly core: CoreV1Api;

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

  async getRevision(namespace: string, name: string): Promise<RevisionObject | undefined> {
    try {
      return (await this.custom.getNamespacedCustomObject({ ...gvp(REVISIONS), namespace, name })) as RevisionObject;
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  /** Creates the run owned by its Revision (garbage collected with it), then writes its first status. */
  async createRun(revision: RevisionView, spec: PrestartRunSpec, status: PrestartRunStatus): Promise<void> {
    const body: RunObject = {
      apiVersion: `${RUNS.group}/${RUNS.version}`,
      kind: 'PrestartRun',
      metadata: {
        name: revision.name,
        namespace: revision.namespace,
        labels: { 'serving.knative.dev/revision': revision.name },
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
    await this.replaceRunStatus(created, status);
  }

  /** Replaces the status, failing with 409 when the run changed since `run` was read. */
  async replaceRunStatus(run: RunObject, status: PrestartRunStatus): Promise<RunObject> {
    const body = { ...run, status };
    return (await this.custom.replaceNamespacedCustomObjectStatus({
      ...gvp(RUNS),
      namespace: run.metadata?.namespace ?? '',
      name: run.metadata?.name ?? '',
      body,
      fieldManager: FIELD_MANAGER,
    })) as RunObject;
  }

  /** A JSON merge patch; put metadata.resourceVersion in it to make it conditional. */
  async mergePatchRevision(namespace: string, name: string, patch: object): Promise<void> {
    await this.custom.patchNamespacedCustomObject(
      { ...gvp(REVISIONS), namespace, name, body: patch, fieldManager: FIELD_MANAGER },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
  }

  async recordEvent(revision: RevisionView, eventType: 'Normal' | 'Warning', reason: string, message: string, now: Date): Promise<void> {
    await this.core.createNamespacedEvent({
      namespace: revision.namespace,
      body: {
        metadata: { generateName: `${revision.name}.`, namespace: revision.namespace },
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
