// The patch that releases a held Revision: what it removes, and the test operations that make it
// fail (422) instead of applying over a change the decision did not see.
import type { ContainerImage, RevisionView } from '../../api/types.ts';
import { CANCEL_FINALIZER, HOLD_LABEL, INJECT_LABEL, REASON_ANNOTATION } from '../../api/types.ts';
import { type JsonPatchOp, pointer } from './jsonpatch.ts';

/**
 * The release as a JSON patch guarded by test operations on exactly what it removes, not by the
 * resourceVersion: a held Revision's status keeps changing (Knative's reconciles, the gate's own
 * condition), and a conflict with each of those writes cost the release a round trip or three.
 * A finalizer another party added before ours moves ours and fails its test, as a
 * hold someone else lifted fails the label's: the patch changes nothing (422) and the core looks again.
 *
 * `containers` (what the run recorded): the patch also tests that Knative's status
 * digests are exactly those, so a status write that lands between the decision (made from the
 * cache) and the release fails the patch, and Knative never builds a Deployment from digests no
 * hook saw. The apiserver applies a patch of the main resource to the whole stored object,
 * status included, before it drops the status changes (a CRD with a status subresource): a test
 * on /status sees the stored status (test/integration/gate/digests.test.ts shows it).
 */
export function releaseOps(revision: RevisionView, inject: boolean, containers?: readonly ContainerImage[]): JsonPatchOp[] {
  const hold = pointer('metadata', 'labels', HOLD_LABEL);
  const ops: JsonPatchOp[] = [...statusDigestTests(containers)];
  ops.push({ op: 'test', path: hold, value: 'true' }, { op: 'remove', path: hold });
  if (inject) ops.push({ op: 'add', path: pointer('metadata', 'labels', INJECT_LABEL), value: 'true' });
  // Remove the reason whether or not it is there (add, then remove): an earlier action of the
  // same list may have cleared it. A held Revision always has annotations (the hooks snapshot).
  const reason = pointer('metadata', 'annotations', REASON_ANNOTATION);
  ops.push({ op: 'add', path: reason, value: '' }, { op: 'remove', path: reason });
  const mine = revision.finalizers.indexOf(CANCEL_FINALIZER);
  if (mine >= 0) {
    const at = pointer('metadata', 'finalizers', mine);
    ops.push({ op: 'test', path: at, value: CANCEL_FINALIZER }, { op: 'remove', path: at });
  }
  return ops;
}

/**
 * Tests that status.containerStatuses (and initContainerStatuses) are what Knative wrote when it
 * resolved `containers`: one entry per container, in order, its name and its digest (Knative
 * leaves an empty digest out: imageDigest is omitempty). A whole-list test, so a list grown or
 * shrunk fails it too.
 */
export function statusDigestTests(containers: readonly ContainerImage[] | undefined): JsonPatchOp[] {
  if (!containers) return [];
  const entry = (c: ContainerImage) => ({ ...(c.name ? { name: c.name } : {}), ...(c.digest ? { imageDigest: c.digest } : {}) });
  const ops: JsonPatchOp[] = [
    { op: 'test', path: pointer('status', 'containerStatuses'), value: containers.filter((c) => !c.init).map(entry) },
  ];
  const init = containers.filter((c) => c.init);
  // Knative omits an empty initContainerStatuses: there is nothing to test when there are none.
  if (init.length > 0) ops.push({ op: 'test', path: pointer('status', 'initContainerStatuses'), value: init.map(entry) });
  return ops;
}
