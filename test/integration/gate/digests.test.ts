// Issue 20, "hooks see what will run", on the real control plane: the gate asks no hook before
// Knative's status has the digests, records them on the run, sends them in the request, and
// refuses the release when the status names other digests after the hook was asked. Knative's
// revision reconciler is played by the admin writing the Revision's status subresource, as
// Knative does (its reconcileDigest); the hook answers only when the test says so.

import { type GateEnv, gateEnv } from '@knative-prestart/devcluster/gate/env.ts';
import { type ReceivedRequest, startHookServer } from '@knative-prestart/devcluster/gate/hook-server.ts';
import { asyncReply } from '@knative-prestart/devcluster/gate/replies.ts';
import { isHeld } from '@knative-prestart/devcluster/gate/revisions.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import { ApiException, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import test from 'ava';
import { REVISIONS, type RevisionObject } from '../../../api/resources.ts';
import type { ContainerImage } from '../../../api/types.ts';
import { statusDigestTests } from '../../../gate/core/release-patch.ts';

const IMAGE = 'dev.local/demo/app:v1';
const DIGEST_A = `dev.local/demo/app@sha256:${'a'.repeat(64)}`;
const DIGEST_B = `dev.local/demo/app@sha256:${'b'.repeat(64)}`;

let env: GateEnv;

test.before(async () => {
  env = await gateEnv('digests');
});

test.after.always(async () => {
  await env?.stop();
});

/** Writes the Revision's status as Knative's revision reconciler does: through the status subresource. */
async function writeStatus(name: string, status: RevisionObject['status']): Promise<RevisionObject> {
  return (await env.custom.patchNamespacedCustomObjectStatus(
    { ...REVISIONS, namespace: env.namespace, name, body: { status } },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  )) as RevisionObject;
}

const readyOf = (run: { status?: { conditions?: Array<{ type: string; reason?: string; message?: string }> } } | undefined) =>
  run?.status?.conditions?.find((c) => c.type === 'Ready');

/** A hook that records every request and answers only when the test replies (asyncReply). */
async function hookFor(t: import('ava').ExecutionContext, key: string) {
  const hookName = `${env.instance}-${key}`;
  const requests: ReceivedRequest[] = [];
  const server = await startHookServer(async (req) => {
    requests.push(req);
    return { status: 202 };
  });
  t.teardown(() => server.close());
  await env.createHook(hookName, { match: env.annotationMatch('scan', key), delivery: { transport: 'http', url: server.url } });
  await env.waitUntilStamped(hookName, { scan: key });
  return { hookName, requests };
}

test.serial(
  'no request before Knative resolved the digests; a failed resolution is on the run; then the request carries them',
  async (t) => {
    const { requests } = await hookFor(t, 'wait');
    const created = await env.createRevision('wait-00001', { annotations: { scan: 'wait' }, containerStatuses: false });
    t.true(isHeld(created));

    const waiting = await env.waitForRun('wait-00001', 'waiting for the digests', (r) => readyOf(r)?.reason === 'ResolvingDigests');
    t.is(waiting.status?.phase, 'Pending');
    t.is(waiting.spec.containers, undefined, 'nothing recorded yet');
    t.is(requests.length, 0, 'no hook is asked before the status has the digests');

    // Knative could not resolve: its reason is the run's, and still nothing is asked.
    const missing = 'failed to resolve image to digest: HEAD https://dev.local/v2/demo/app/manifests/v1: 404 Not Found';
    await writeStatus('wait-00001', {
      conditions: [
        {
          type: 'ContainerHealthy',
          status: 'False',
          reason: 'ContainerMissing',
          message: missing,
          lastTransitionTime: new Date().toISOString(),
        },
      ],
    });
    const failed = await env.waitForRun('wait-00001', "Knative's ContainerMissing", (r) => readyOf(r)?.reason === 'ContainerMissing');
    t.regex(readyOf(failed)?.message ?? '', /Knative could not resolve the image digests \(ContainerHealthy: failed to resolve image/);
    t.is(requests.length, 0, 'a failed resolution asks no hook');
    t.true(isHeld(await env.getRevision('wait-00001')));

    // Knative retried and resolved: the run records the digests, then the hook is asked about them.
    await writeStatus('wait-00001', {
      conditions: [{ type: 'ContainerHealthy', status: 'Unknown', reason: 'Deploying', lastTransitionTime: new Date().toISOString() }],
      containerStatuses: [{ name: 'user-container', imageDigest: DIGEST_A }],
    });
    const request = await waitFor(() => requests[0], { timeoutMs: 30_000, what: 'the request, once the digests are there' });
    const expected: ContainerImage[] = [{ name: 'user-container', image: IMAGE, digest: DIGEST_A }];
    t.deepEqual((request.data.revision as unknown as { containers: ContainerImage[] }).containers, expected);
    const run = await env.getRun('wait-00001');
    t.deepEqual(run?.spec.containers, expected, 'the run recorded them before the request went out');

    // Recorded once: not even the admin can change them on the run (the CRD's rule).
    const changed = await env.custom
      .patchNamespacedCustomObject(
        {
          group: 'prestart.dev',
          version: 'v1alpha1',
          plural: 'prestartruns',
          namespace: env.namespace,
          name: 'wait-00001',
          body: { spec: { containers: [{ name: 'user-container', image: IMAGE, digest: DIGEST_B }] } },
        },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      )
      .catch((err: unknown) => err);
    t.true(changed instanceof ApiException && changed.code === 422, 'spec.containers cannot change once set');
    if (changed instanceof ApiException) t.regex(String(changed.body), /spec is the snapshot taken when the run started/);

    t.is((await asyncReply(request, 'succeeded')).status, 202);
    await env.waitReleased('wait-00001');
  },
);

test.serial(
  'digests changed after the hook was asked: no release, the run Failed/ImagesChanged, the Revision held and says why',
  async (t) => {
    const { requests } = await hookFor(t, 'swap');
    await env.createRevision('swap-00001', {
      annotations: { scan: 'swap' },
      containerStatuses: [{ name: 'user-container', imageDigest: DIGEST_A }],
    });
    const request = await waitFor(() => requests[0], { timeoutMs: 30_000, what: 'the request' });
    t.is((request.data.revision as unknown as { containers: ContainerImage[] }).containers[0]?.digest, DIGEST_A);

    // The hook scanned A. Before it answers, someone writes B into Knative's status.
    await writeStatus('swap-00001', { containerStatuses: [{ name: 'user-container', imageDigest: DIGEST_B }] });
    t.is((await asyncReply(request, 'succeeded')).status, 202);

    const run = await env.waitForRun('swap-00001', 'Failed (ImagesChanged)', (r) => r.status?.phase === 'Failed');
    t.is(readyOf(run)?.reason, 'ImagesChanged');
    t.is(
      readyOf(run)?.message,
      `the images changed after the hooks were asked: container user-container: hooks saw ${DIGEST_A}, now ${DIGEST_B}`,
    );
    t.is(run.status?.hooks[0]?.phase, 'Succeeded', 'what the hook answered stays recorded');
    const rev = await waitFor(
      async () => {
        const r = await env.getRevision('swap-00001');
        return r.metadata?.annotations?.['prestart.dev/reason'] ? r : undefined;
      },
      { timeoutMs: 30_000, what: 'the hold reason on the Revision' },
    );
    t.true(isHeld(rev), 'still held');
    t.regex(
      rev.metadata?.annotations?.['prestart.dev/reason'] ?? '',
      /hooks saw .*, now .*; to run every hook on what will run: kubectl delete prestartrun swap-00001/,
    );
    // find, not filter: an empty list is truthy and would end the wait before the event is written.
    const event = await waitFor(async () => (await env.revisionEvents('swap-00001')).find((e) => e.reason === 'ImagesChanged'), {
      timeoutMs: 30_000,
      what: 'the Warning ImagesChanged event',
    });
    t.is(event.type, 'Warning');
    const denied = await env.createDeploymentLikeKnative(rev);
    t.false(denied.created, 'Knative still cannot create the Deployment');
  },
);

test.serial(
  'a JSON patch of a Revision (the main resource) tests its status: a release patch racing a status write fails whole',
  async (t) => {
    // A Revision no hook holds: the patch here is the admin's, to show what the apiserver does with a
    // test operation on /status in a patch of the main resource (the release's guard, release-patch.ts).
    await env.createRevision('race-00001', { containerStatuses: [{ name: 'user-container', imageDigest: DIGEST_A }] });
    const patch = (containers: ContainerImage[]) =>
      env.custom
        .patchNamespacedCustomObject(
          {
            ...REVISIONS,
            namespace: env.namespace,
            name: 'race-00001',
            body: [...statusDigestTests(containers), { op: 'add', path: '/metadata/labels/guarded', value: 'yes' }],
          },
          setHeaderOptions('Content-Type', PatchStrategy.JsonPatch),
        )
        .then(
          (r) => r as RevisionObject,
          (err: unknown) => err,
        );
    const refused = await patch([{ name: 'user-container', image: IMAGE, digest: DIGEST_B }]);
    t.true(refused instanceof ApiException && refused.code === 422, 'a test on /status that fails refuses the whole patch');
    t.is((await env.getRevision('race-00001')).metadata?.labels?.guarded, undefined, 'nothing of it applied');
    const applied = await patch([{ name: 'user-container', image: IMAGE, digest: DIGEST_A }]);
    t.false(applied instanceof ApiException, 'the same test against the stored status passes');
    t.is((applied as RevisionObject).metadata?.labels?.guarded, 'yes');
  },
);
