// What the gate's caches keep of each object: what its decisions, webhooks and request events
// read, nothing else. A cluster with 10,000 Revisions and their PrestartRuns would otherwise cost
// the gate ~130 MiB of cached JSON (managed fields, pod specs, Knative's status), and twice that
// while a re-list is parsed next to the old cache. The informers apply these to every object
// they receive, from the list and from the watch (gate/kube/informer.ts).
//
//   held Revision   metadata without managedFields/ownerReferences, the containers' (and init
//                   containers') names and images, and of its status the digests Knative resolved
//                   (containerStatuses, initContainerStatuses), the gate's own condition
//                   (PRESTART_CONDITION) and, while the digests are unresolved, Knative's
//                   ContainerHealthy/ResourcesAvailable when False (why resolution failed)
//   any Revision    a stub: name, uid, configuration and its generation, our finalizer; from
//                   PartialObjectMetadata (the apiserver sends no spec or status at all)
//   Route           the Revision names its traffic targets
//   PrestartRun     without managedFields; once Released or Cancelled (final: decide() never
//                   writes it again) only its uid, phase, the containers it recorded, the hooks
//                   that contributed bindings (the pod webhook injects those), the Ready
//                   condition of a cancelled run and the image drift recorded after a release
//   Revision's pod  (leader, for the drift watch) its Revision's labels and each container's imageID
import type { KubernetesObject, V1ObjectMeta } from '@kubernetes/client-node';
import {
  digestsResolved,
  type RevisionContainer,
  type RevisionContainerStatus,
  type RevisionObject,
  type RouteObject,
  type RunObject,
} from '../../api/resources.ts';
import { CANCEL_FINALIZER, type HookStatus, PRESTART_CONDITION, type PrestartRunStatus, RESOLUTION_CONDITIONS } from '../../api/types.ts';

/** Accept headers that make the apiserver send PartialObjectMetadata(List): metadata only. */
export const METADATA_ONLY = 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json';
export const METADATA_ONLY_LIST = 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json';

export const CONFIGURATION_LABEL = 'serving.knative.dev/configuration';
export const CONFIGURATION_GENERATION_LABEL = 'serving.knative.dev/configurationGeneration';

/**
 * One copy of the strings many cached objects repeat (namespaces, Configuration names, phases,
 * hook names): JSON.parse makes a new string for every occurrence.
 */
const interned = new Map<string, string>();
function intern<T extends string | undefined>(value: T): T {
  if (value === undefined) return value;
  const known = interned.get(value);
  if (known !== undefined) return known as T;
  // Unbounded in principle; in practice namespaces, Configurations and hooks, not per-object names.
  interned.set(value, value);
  return value;
}

/** Shared, frozen: the many slim objects that have none point at the same empty list. */
const NONE = Object.freeze([]) as unknown as never[];
const GATE_FINALIZER_ONLY = Object.freeze([CANCEL_FINALIZER]) as unknown as string[];

/** The metadata fields every view keeps: identity, the version the cache compares, deletion. */
function identity(md: V1ObjectMeta | undefined, withUid = true): V1ObjectMeta {
  const out: V1ObjectMeta = { name: md?.name, resourceVersion: md?.resourceVersion };
  if (withUid) out.uid = md?.uid;
  if (md?.namespace) out.namespace = intern(md.namespace);
  if (md?.deletionTimestamp) out.deletionTimestamp = md.deletionTimestamp;
  return out;
}

/** A held Revision as decide() and the request event read it (toRevisionView). */
export function heldRevisionView(obj: RevisionObject): RevisionObject {
  const md = obj.metadata;
  const metadata: V1ObjectMeta = { ...identity(md), creationTimestamp: md?.creationTimestamp };
  if (md?.labels) metadata.labels = md.labels;
  if (md?.annotations) metadata.annotations = md.annotations;
  if (md?.finalizers?.length) metadata.finalizers = md.finalizers;
  const spec: NonNullable<RevisionObject['spec']> = { containers: (obj.spec?.containers ?? []).map(nameAndImage) };
  if (obj.spec?.initContainers?.length) spec.initContainers = obj.spec.initContainers.map(nameAndImage);
  const view: RevisionObject = { apiVersion: obj.apiVersion, kind: obj.kind, metadata, spec };
  const status: NonNullable<RevisionObject['status']> = {};
  // The digests Knative resolved: what the hooks are asked about and the release is checked against.
  if (obj.status?.containerStatuses) status.containerStatuses = obj.status.containerStatuses.map(nameAndDigest);
  if (obj.status?.initContainerStatuses) status.initContainerStatuses = obj.status.initContainerStatuses.map(nameAndDigest);
  // Knative's own conditions only while the digests are unresolved: a failed resolution is what
  // the waiting run says (decide's startRun). Once resolved they change with every denied Deployment.
  const resolved = digestsResolved(obj);
  const conditions = obj.status?.conditions?.filter(
    (c) => c.type === PRESTART_CONDITION || (!resolved && c.status === 'False' && RESOLUTION_CONDITIONS.includes(c.type)),
  );
  if (conditions?.length) status.conditions = conditions;
  if (Object.keys(status).length > 0) view.status = status;
  return view;
}

function nameAndImage(c: RevisionContainer): RevisionContainer {
  return { name: c.name, image: c.image };
}

function nameAndDigest(s: RevisionContainerStatus): RevisionContainerStatus {
  return s.imageDigest ? { name: s.name, imageDigest: s.imageDigest } : { name: s.name };
}

/**
 * Any Revision, for supersession (which Revisions a Configuration has, and their generations) and
 * for the one thing an unheld Revision can still need from the gate: its cancel finalizer removed.
 */
export function revisionStub(obj: KubernetesObject): KubernetesObject {
  const md = obj.metadata;
  const metadata = identity(md, false);
  const configuration = md?.labels?.[CONFIGURATION_LABEL];
  if (configuration !== undefined) {
    metadata.labels = { [CONFIGURATION_LABEL]: intern(configuration) };
    const generation = md?.labels?.[CONFIGURATION_GENERATION_LABEL];
    if (generation !== undefined) metadata.labels[CONFIGURATION_GENERATION_LABEL] = intern(generation);
  }
  if (md?.finalizers?.includes(CANCEL_FINALIZER)) metadata.finalizers = GATE_FINALIZER_ONLY;
  return { metadata };
}

/** A Route as namedByTraffic reads it. */
export function routeView(obj: RouteObject): RouteObject {
  const traffic = (obj.spec?.traffic ?? []).flatMap((t) => (t.revisionName ? [{ revisionName: t.revisionName }] : []));
  return { metadata: identity(obj.metadata, false), spec: { traffic } };
}

/**
 * Released and Cancelled are final: decide() never writes such a run again (rules 2, 4, 8, 9), so
 * the cache keeps it slim (runView) and no status is ever written from it (apply.ts).
 */
export function isFinished(run: Pick<RunObject, 'status'> | undefined): boolean {
  const phase = run?.status?.phase;
  return phase === 'Released' || phase === 'Cancelled';
}

/**
 * A PrestartRun as the controller, the webhooks and the reply recorder read it: whole (without
 * managed fields) while it may still be written; once finished, what its readers look at: the
 * run's uid (the Deployment webhook's marker), the Revision UID, the phase, the hooks that
 * contributed bindings and their contributions (the Pod and Deployment webhooks, the inject
 * label), and a cancelled run's Ready condition (its hold reason).
 */
export function runView(obj: RunObject): RunObject {
  const md = obj.metadata;
  if (!isFinished(obj) || !obj.status) {
    const metadata: V1ObjectMeta = { ...identity(md), creationTimestamp: md?.creationTimestamp };
    if (md?.generation !== undefined) metadata.generation = md.generation;
    if (md?.labels) metadata.labels = md.labels;
    if (md?.annotations) metadata.annotations = md.annotations;
    const whole: RunObject = { apiVersion: intern(obj.apiVersion), kind: intern(obj.kind), metadata, spec: obj.spec };
    if (obj.status) whole.status = obj.status;
    return whole;
  }
  const spec: RunObject['spec'] = { revisionUID: obj.spec?.revisionUID, hooks: NONE };
  // A held Revision whose run is Released is released again only while its digests are still these (decide's releaseAgain).
  if (obj.spec?.containers) spec.containers = obj.spec.containers;
  return { metadata: identity(md), spec, status: slimStatus(obj.status) };
}

function slimStatus(status: PrestartRunStatus): PrestartRunStatus {
  const contributed = status.hooks.filter((h) => h.contributions?.length);
  const hooks =
    contributed.length === 0
      ? NONE
      : contributed.map(
          (h): HookStatus => ({ name: intern(h.name), phase: intern(h.phase), attempt: h.attempt, contributions: h.contributions }),
        );
  // A cancelled run's Ready message is the hold reason decide() keeps on the Revision (keepCancelled).
  const conditions = status.phase === 'Cancelled' ? status.conditions.filter((c) => c.type === 'Ready') : NONE;
  const slim: PrestartRunStatus = { phase: intern(status.phase), hooks, conditions };
  // What drift was recorded: a new leader does not tell it again (gate/checks/image-drift-check.ts).
  if (status.imageDrift?.length) slim.imageDrift = status.imageDrift;
  return slim;
}

/** The pod labels that tie a pod to its Revision (Knative puts them on every pod of the Revision). */
export const REVISION_LABEL = 'serving.knative.dev/revision';
export const REVISION_UID_LABEL = 'serving.knative.dev/revisionUID';

/** A Revision's pod as the drift watch reads it: its Revision, and what each started container runs. */
export interface PodObject extends KubernetesObject {
  status?: { containerStatuses?: PodImageStatus[]; initContainerStatuses?: PodImageStatus[] };
}
export interface PodImageStatus {
  name: string;
  imageID?: string;
}

/** A pod: name, its Revision's two labels and each container's name and imageID; nothing of its spec. */
export function podView(obj: PodObject): PodObject {
  const md = obj.metadata;
  const metadata = identity(md, false);
  const labels: Record<string, string> = {};
  for (const key of [REVISION_LABEL, REVISION_UID_LABEL]) {
    const value = md?.labels?.[key];
    if (value !== undefined) labels[key] = intern(value);
  }
  metadata.labels = labels;
  const images = (list: PodImageStatus[] | undefined) =>
    list?.map((c) => (c.imageID ? { name: c.name, imageID: c.imageID } : { name: c.name }));
  const status: NonNullable<PodObject['status']> = {};
  const containers = images(obj.status?.containerStatuses);
  const inits = images(obj.status?.initContainerStatuses);
  if (containers?.length) status.containerStatuses = containers;
  if (inits?.length) status.initContainerStatuses = inits;
  return { metadata, status };
}
