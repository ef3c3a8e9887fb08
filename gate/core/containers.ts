// What will run: a hook is asked about the containers with the digests Knative resolved
// for them, recorded in the run's spec.containers before the first request goes out, and the
// Revision is released only while Knative's digests are still those. Knative builds the
// Deployment from its status digests (resources/deploy.go), which its `edit` role lets a tenant
// write and which a moving tag changes between a scan and a resolution: without this a hook could
// approve image A and image B would run.
import { type ContainerImage, RESOLUTION_CONDITIONS, type RevisionView } from '../../api/types.ts';
import { oneLine, type ReadyCondition } from './status.ts';

/** The Ready reason of a run waiting for Knative to resolve the digests. */
export const RESOLVING_DIGESTS = 'ResolvingDigests';
/** The Ready reason of a run whose Revision's digests changed after the hooks were asked. */
export const IMAGES_CHANGED = 'ImagesChanged';

/** Same containers, same order, same images and digests: what the hooks were asked about is what would run. */
export function sameContainers(recorded: readonly ContainerImage[], current: readonly ContainerImage[] | undefined): boolean {
  if (!current || recorded.length !== current.length) return false;
  return recorded.every((r, i) => {
    const c = current[i] as ContainerImage;
    return r.name === c.name && r.image === c.image && (r.digest ?? '') === (c.digest ?? '') && (r.init ?? false) === (c.init ?? false);
  });
}

/**
 * The run's Ready condition while Knative has not resolved every digest: nothing is requested
 * before it has. When Knative says resolution failed (ContainerHealthy False, ContainerMissing),
 * its reason and message are the run's: Knative retries by itself, and the run waits on.
 */
export function waitingForDigests(revision: Pick<RevisionView, 'conditions'>): ReadyCondition {
  const failed = RESOLUTION_CONDITIONS.map((type) => revision.conditions?.find((c) => c.type === type && c.status === 'False')).find(
    (c) => c !== undefined,
  );
  if (failed) {
    return {
      type: 'Ready',
      status: 'False',
      reason: failed.reason || RESOLVING_DIGESTS,
      message: oneLine(
        `Knative could not resolve the image digests (${failed.type}: ${failed.message ?? failed.reason ?? 'no message'}); no hook is asked before it has, and Knative retries`,
        1024,
      ),
    };
  }
  return {
    type: 'Ready',
    status: 'Unknown',
    reason: RESOLVING_DIGESTS,
    message: 'waiting for Knative to resolve the image digests; no hook is asked before it has',
  };
}

/** What each container was asked about against what would run now, and what to do. */
export function imagesChangedMessage(recorded: readonly ContainerImage[], current: readonly ContainerImage[] | undefined): string {
  const shown = (c: ContainerImage | undefined) => (c ? (c.digest ?? `${c.image} (unresolved)`) : 'none');
  const changes = current
    ? Array.from({ length: Math.max(recorded.length, current.length) }, (_, i) => [recorded[i], current[i]] as const)
        .filter(([r, c]) => !(r && c && sameContainers([r], [c])))
        .map(([r, c]) => `${(r ?? c)?.init ? 'init container' : 'container'} ${(r ?? c)?.name}: hooks saw ${shown(r)}, now ${shown(c)}`)
    : ['Knative no longer reports resolved digests for every container'];
  return oneLine(`the images changed after the hooks were asked: ${changes.join('; ')}`, 768);
}

/** The run's Ready condition once the images changed: it fails rather than release what no hook saw. */
export function imagesChangedCondition(
  recorded: readonly ContainerImage[],
  current: readonly ContainerImage[] | undefined,
): ReadyCondition {
  return { type: 'Ready', status: 'False', reason: IMAGES_CHANGED, message: imagesChangedMessage(recorded, current) };
}
