// Post-release image drift, the pure part: a released hooked Revision whose pods run an image
// digest other than the one its hooks were asked about (the run's spec.containers). The admission
// policies keep anyone without the cluster's controllers' verbs from re-imaging those pods, their
// ReplicaSet or Deployment (config/200-hold-policy.yaml, config/220-revision-pods-policy.yaml);
// this is the alarm for what gets past them: a cluster admin, a node whose runtime pulled another
// image for the same reference, a registry that served another manifest for the digest's tag.
//
// What the pods run is what their kubelets report: status.containerStatuses[].imageID, in the
// runtime's form (`repo@sha256:...`, `docker-pullable://repo@sha256:...`, or a bare `sha256:...`
// when the runtime knows the image by no repository digest). Only the digest is compared: the
// repository part differs between runtimes and mirrors for the same image.
import type { ContainerImage, ImageDriftRecord } from '../../api/types.ts';

/** The Warning Event on the Revision, once per (pod, container, running digest). */
export const REASON_IMAGE_DRIFT = 'ImageDrift';
/** Findings a run's status keeps (the CRD's maxItems): the first ones; later ones still get their Event. */
export const MAX_RECORDED_DRIFT = 32;

/** One pod of the Revision as its kubelet reports it: each started container's imageID. */
export interface PodImages {
  name: string;
  /** Containers and init containers alike (names are unique within a pod); imageID absent until it started. */
  containers: ReadonlyArray<{ name: string; imageID?: string }>;
}

export interface DriftFinding {
  pod: string;
  container: string;
  /** The digest the hooks approved (sha256:...). */
  expected: string;
  /** The digest the pod runs (sha256:...). */
  running: string;
}

/** The `algorithm:hex` digest at the end of an image reference or an imageID; undefined when it names none. */
export function digestOf(ref: string | undefined): string | undefined {
  return ref?.match(/(?:^|[@/:])(sha(?:256|384|512):[0-9a-f]{32,})$/)?.[1];
}

/**
 * Every container of `pods` whose running digest is not the one the hooks approved for its name.
 * Not drift: a container the hooks were not asked about (Knative's queue-proxy, a sidecar a
 * webhook added), one that has not started (no imageID yet), one whose approved image names no
 * digest (a registry Knative does not resolve: nothing to compare with).
 */
export function imageDrift(approved: readonly ContainerImage[], pods: readonly PodImages[]): DriftFinding[] {
  const expected = new Map<string, string>();
  for (const c of approved) {
    const digest = digestOf(c.digest ?? c.image);
    if (digest !== undefined) expected.set(c.name, digest);
  }
  const findings: DriftFinding[] = [];
  for (const pod of pods) {
    for (const c of pod.containers) {
      const want = expected.get(c.name);
      const running = c.imageID ? digestOf(c.imageID) : undefined;
      // An imageID in no form we know is reported as it is (within the run's field's length): what
      // runs cannot be shown to be what was approved.
      const runs = running ?? c.imageID?.slice(0, 512);
      if (want === undefined || !runs || runs === want) continue;
      findings.push({ pod: pod.name, container: c.name, expected: want, running: runs });
    }
  }
  return findings;
}

/** What a finding is told once by: the pod, the container and what it runs. */
export function findingKey(f: Pick<DriftFinding, 'pod' | 'container' | 'running'>): string {
  return `${f.pod}\0${f.container}\0${f.running}`;
}

/** One line a person reads in the Event, the run and `kn prestart why`. */
export function driftText(f: Pick<DriftFinding, 'pod' | 'container' | 'expected' | 'running'>): string {
  return `pod ${f.pod} container ${f.container} runs ${f.running} but hooks approved ${f.expected}`;
}

/** The Event's message for a finding on a Revision. */
export function driftMessage(f: DriftFinding): string {
  return `image drift: ${driftText(f)}; the pod runs an image its pre-start hooks were not asked about`;
}

/**
 * The findings not told yet (by this term, or by the run's status: a new leader does not repeat
 * what an earlier one recorded), and the run's record with them added, first ones kept.
 */
export function newDrift(
  findings: readonly DriftFinding[],
  told: ReadonlySet<string>,
  recorded: readonly ImageDriftRecord[],
  now: Date,
): { fresh: DriftFinding[]; record: ImageDriftRecord[] } {
  const known = new Set([...told, ...recorded.map(findingKey)]);
  const fresh: DriftFinding[] = [];
  for (const f of findings) {
    const key = findingKey(f);
    if (known.has(key)) continue;
    known.add(key);
    fresh.push(f);
  }
  const added = fresh.map((f): ImageDriftRecord => ({ ...f, detectedAt: now.toISOString() }));
  return { fresh, record: [...recorded, ...added].slice(0, MAX_RECORDED_DRIFT) };
}
