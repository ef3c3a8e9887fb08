// The Kubernetes objects the gate reads, as much of them as it uses, and their conversion into
// the core's plain views.
import type { KubernetesObject } from '@kubernetes/client-node';
import type {
  Condition,
  ContainerImage,
  NamespacedPrestartHookSpec,
  PrestartHook,
  PrestartHookSpec,
  PrestartRunSpec,
  PrestartRunStatus,
  PrestartRunView,
  RevisionView,
} from './types.ts';
import { FORCE_RELEASE_ANNOTATION, FORCE_RELEASE_BY_ANNOTATION, RETRY_ANNOTATION, RUN_IDS_ANNOTATION, RUN_IDS_V2 } from './types.ts';

/** The field manager of every write the gate makes (server-side apply and patches). */
export const FIELD_MANAGER = 'knative-prestart-gate';

export interface Resource {
  group: string;
  version: string;
  plural: string;
  namespaced: boolean;
}

export const REVISIONS: Resource = { group: 'serving.knative.dev', version: 'v1', plural: 'revisions', namespaced: true };
export const CONFIGURATIONS: Resource = { group: 'serving.knative.dev', version: 'v1', plural: 'configurations', namespaced: true };
export const ROUTES: Resource = { group: 'serving.knative.dev', version: 'v1', plural: 'routes', namespaced: true };
export const HOOKS: Resource = { group: 'prestart.dev', version: 'v1alpha1', plural: 'prestarthooks', namespaced: false };
export const NAMESPACED_HOOKS: Resource = {
  group: 'prestart.dev',
  version: 'v1alpha1',
  plural: 'namespacedprestarthooks',
  namespaced: true,
};
export const RUNS: Resource = { group: 'prestart.dev', version: 'v1alpha1', plural: 'prestartruns', namespaced: true };

export function watchPath(r: Resource): string {
  return `/apis/${r.group}/${r.version}/${r.plural}`;
}

/** A container as a Revision's spec names it, and the digest Knative's status records for it. */
export interface RevisionContainer {
  name?: string;
  image?: string;
}
export interface RevisionContainerStatus {
  name?: string;
  /** Empty or absent for a registry in config-deployment's registries-skipping-tag-resolving. */
  imageDigest?: string;
}
export interface RevisionObject extends KubernetesObject {
  spec?: { containers?: RevisionContainer[]; initContainers?: RevisionContainer[] };
  status?: {
    conditions?: Condition[];
    containerStatuses?: RevisionContainerStatus[];
    initContainerStatuses?: RevisionContainerStatus[];
  };
}
export interface ConfigurationObject extends KubernetesObject {
  status?: { latestCreatedRevisionName?: string; conditions?: Condition[] };
}
export interface RouteObject extends KubernetesObject {
  spec?: { traffic?: Array<{ revisionName?: string }> };
}
export interface HookObject extends KubernetesObject {
  spec: PrestartHookSpec;
}
export interface NamespacedHookObject extends KubernetesObject {
  spec: NamespacedPrestartHookSpec;
}
export interface RunObject extends KubernetesObject {
  spec: PrestartRunSpec;
  status?: PrestartRunStatus;
}

export function keyOf(obj: KubernetesObject): string {
  return `${obj.metadata?.namespace ?? ''}/${obj.metadata?.name ?? ''}`;
}

export function splitKey(key: string): { namespace: string; name: string } {
  const i = key.indexOf('/');
  return { namespace: key.slice(0, i), name: key.slice(i + 1) };
}

export function toRevisionView(obj: RevisionObject): RevisionView {
  const md = obj.metadata ?? {};
  const labels = md.labels ?? {};
  const containers = resolvedContainers(obj);
  return {
    namespace: md.namespace ?? '',
    name: md.name ?? '',
    uid: md.uid ?? '',
    configuration: labels['serving.knative.dev/configuration'],
    service: labels['serving.knative.dev/service'],
    labels,
    annotations: md.annotations ?? {},
    images: (obj.spec?.containers ?? []).flatMap((c) => (c.image ? [c.image] : [])),
    ...(containers === undefined ? {} : { containers }),
    createdAt: md.creationTimestamp ? new Date(md.creationTimestamp) : new Date(0),
    deleting: md.deletionTimestamp !== undefined && md.deletionTimestamp !== null,
    finalizers: md.finalizers ?? [],
    conditions: obj.status?.conditions ?? [],
  };
}

/**
 * True once Knative has resolved the digest of every container, by its own test (knative.dev/serving
 * v0.50.0 pkg/reconciler/revision/revision.go reconcileDigest: as many statuses as containers; it
 * counts containers and init containers together, the gate counts each list apart, which is
 * stricter: a status Knative never writes is never taken as resolved). Knative builds the
 * Deployment only after this test passes, and from these statuses.
 */
export function digestsResolved(obj: Pick<RevisionObject, 'spec' | 'status'>): boolean {
  const statuses = obj.status?.containerStatuses;
  return (
    statuses !== undefined &&
    statuses.length === (obj.spec?.containers ?? []).length &&
    (obj.status?.initContainerStatuses ?? []).length === (obj.spec?.initContainers ?? []).length
  );
}

/**
 * Every container with the digest Knative resolved for it, once it resolved them all; undefined
 * before. Paired by position, as Knative pairs them (the status of container i is
 * status.containerStatuses[i] in resources/deploy.go BuildUserContainers, whatever its name).
 * An empty imageDigest (a registry Knative skips) leaves `digest` out: the image runs as written.
 */
export function resolvedContainers(obj: Pick<RevisionObject, 'spec' | 'status'>): ContainerImage[] | undefined {
  if (!digestsResolved(obj)) return undefined;
  const one = (c: RevisionContainer, s: RevisionContainerStatus | undefined, init: boolean): ContainerImage => ({
    name: c.name ?? '',
    image: c.image ?? '',
    ...(s?.imageDigest ? { digest: s.imageDigest } : {}),
    ...(init ? { init: true } : {}),
  });
  const statuses = obj.status?.containerStatuses ?? [];
  const initStatuses = obj.status?.initContainerStatuses ?? [];
  return [
    ...(obj.spec?.containers ?? []).map((c, i) => one(c, statuses[i], false)),
    ...(obj.spec?.initContainers ?? []).map((c, i) => one(c, initStatuses[i], true)),
  ];
}

export function toHook(obj: HookObject): PrestartHook {
  return { name: obj.metadata?.name ?? '', generation: obj.metadata?.generation ?? 0, spec: obj.spec };
}

export function toRunView(obj: RunObject): PrestartRunView {
  const md = obj.metadata ?? {};
  return {
    namespace: md.namespace ?? '',
    name: md.name ?? '',
    uid: md.uid ?? '',
    ...(md.annotations?.[RUN_IDS_ANNOTATION] === RUN_IDS_V2 ? {} : { legacyIds: true }),
    resourceVersion: md.resourceVersion,
    retryToken: md.annotations?.[RETRY_ANNOTATION],
    ...forceReleaseOf(md.annotations ?? {}),
    spec: obj.spec,
    status: obj.status,
  };
}

/** The break-glass request on a run; only with a reason (the hold policy requires one, and the name of who asked). */
function forceReleaseOf(annotations: Record<string, string>): Pick<PrestartRunView, 'forceRelease'> {
  const reason = annotations[FORCE_RELEASE_ANNOTATION]?.trim();
  return reason ? { forceRelease: { reason, by: annotations[FORCE_RELEASE_BY_ANNOTATION] ?? '' } } : {};
}

/** Knative numbers a Configuration's Revisions by this label; a higher one is newer. */
export function configurationGeneration(obj: KubernetesObject): number {
  const v = obj.metadata?.labels?.['serving.knative.dev/configurationGeneration'];
  return v === undefined ? 0 : Number.parseInt(v, 10) || 0;
}
