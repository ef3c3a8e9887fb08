// The Kubernetes objects the gate reads, as much of them as it uses, and their conversion into
// the core's plain views.
import type { KubernetesObject } from '@kubernetes/client-node';
import type {
  Condition,
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
export const ROUTES: Resource = { group: 'serving.knative.dev', version: 'v1', plural: 'routes', namespaced: true };
export const HOOKS: Resource = { group: 'prestart.dev', version: 'v1alpha1', plural: 'prestarthooks', namespaced: false };
export const RUNS: Resource = { group: 'prestart.dev', version: 'v1alpha1', plural: 'prestartruns', namespaced: true };

export function watchPath(r: Resource): string {
  return `/apis/${r.group}/${r.version}/${r.plural}`;
}

export interface RevisionObject extends KubernetesObject {
  spec?: { containers?: Array<{ name?: string; image?: string }> };
  status?: { conditions?: Condition[] };
}
export interface RouteObject extends KubernetesObject {
  spec?: { traffic?: Array<{ revisionName?: string }> };
}
export interface HookObject extends KubernetesObject {
  spec: PrestartHookSpec;
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
  return {
    namespace: md.namespace ?? '',
    name: md.name ?? '',
    uid: md.uid ?? '',
    configuration: labels['serving.knative.dev/configuration'],
    service: labels['serving.knative.dev/service'],
    labels,
    annotations: md.annotations ?? {},
    images: (obj.spec?.containers ?? []).flatMap((c) => (c.image ? [c.image] : [])),
    createdAt: md.creationTimestamp ? new Date(md.creationTimestamp) : new Date(0),
    deleting: md.deletionTimestamp !== undefined && md.deletionTimestamp !== null,
    finalizers: md.finalizers ?? [],
    conditions: obj.status?.conditions ?? [],
  };
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
