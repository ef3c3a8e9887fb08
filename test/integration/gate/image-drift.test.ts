// Post-release image drift on the real control plane: a hooked Revision is released with the
// digest its hook approved, then a pod of its reports another one. The gate (as its real
// ServiceAccount, config/300-rbac.yaml: it reads pods) records a Warning ImageDrift Event on the
// Revision, shows the gauge and writes the run's status.imageDrift, which `kn prestart why` prints;
// a released Revision whose pod runs the approved digest gets none of it.
//
// Stand-ins, each named: Knative's revision reconciler is played by the admin (it writes the
// resolved digest into the Revision's status, and creates the Deployment Knative would, which the
// admin may: a cluster admin holds every verb the Deployment and pod policies ask); the cluster's
// own Deployment and ReplicaSet controllers then make the pod (the ReplicaSet controller's
// identity is the one config/220-revision-pods-policy.yaml lets create a Revision's pods), on a
// kwok node where nothing runs. A kubelet's report of what a container runs is played by the admin
// writing the pod's status.containerStatuses[].imageID through the pods/status subresource, once
// kwok has marked the pod Running (kwok writes no imageID).

import { type GateEnv, gateEnv } from '@knative-prestart/devcluster/gate/env.ts';
import { startHookServer } from '@knative-prestart/devcluster/gate/hook-server.ts';
import { syncReply } from '@knative-prestart/devcluster/gate/replies.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import { PatchStrategy, setHeaderOptions, type V1ContainerStatus, type V1Pod } from '@kubernetes/client-node';
import test from 'ava';
import { Command } from 'commander';
import type { RevisionObject, RunObject } from '../../../api/resources.ts';
import { registerPrestartCommands } from '../../../cli/prestart/commands.ts';
import { REASON_IMAGE_DRIFT } from '../../../gate/core/drift.ts';

const APPROVED = `sha256:${'a'.repeat(64)}`;
const OTHER = `sha256:${'b'.repeat(64)}`;
const RESOLVED = `dev.local/demo/app@${APPROVED}`;

let env: GateEnv;
let closeHook: () => Promise<void> = async () => {};

test.before(async () => {
  env = await gateEnv('image-drift');
  const hook = await startHookServer(async (req) => syncReply(req, 'succeeded'));
  closeHook = () => hook.close();
  const hookName = `${env.instance}-scan`;
  await env.createHook(hookName, { match: env.annotationMatch('scan', 'yes'), delivery: { transport: 'http', url: hook.url } });
  await env.waitUntilStamped(hookName, { scan: 'yes' });
});

test.after.always(async () => {
  await closeHook();
  await env?.stop();
});

/** A hooked Revision whose hook approved RESOLVED, released, and the Running pod of its Deployment. */
async function releasedWithPod(name: string): Promise<{ revision: RevisionObject; pod: V1Pod }> {
  await env.createRevision(name, { annotations: { scan: 'yes' }, containerStatuses: [{ name: 'user-container', imageDigest: RESOLVED }] });
  const revision = await env.waitReleased(name);
  // Released in the run too (written a moment after the hold comes off): the pod is judged from the moment it reports.
  const run = await env.waitForRun(name, 'Released', (r) => r.status?.phase === 'Released');
  if (run.spec.containers?.[0]?.digest !== RESOLVED) throw new Error(`run ${name} did not record the approved digest`);
  const made = await env.createDeploymentLikeKnative(revision);
  if (!made.created) throw new Error(`the Deployment of ${name} was refused: ${made.message}`);
  const pod = await waitFor(
    async () => {
      const pods = await env.core.listNamespacedPod({
        namespace: env.namespace,
        labelSelector: `serving.knative.dev/revisionUID=${revision.metadata?.uid}`,
      });
      return pods.items.find((p) => p.status?.phase === 'Running' && p.status.containerStatuses?.length);
    },
    { timeoutMs: 60_000, what: `a Running pod of ${name} (Deployment and ReplicaSet controllers, kwok)` },
  );
  return { revision, pod };
}

/** What a kubelet reports once the containers started: each one's imageID (the stand-in, see the top). */
async function reportImages(pod: V1Pod, userContainerImageID: string): Promise<void> {
  const imageIDs: Record<string, string> = {
    'user-container': userContainerImageID,
    // Knative's own sidecar: never in the run's snapshot, never drift.
    'queue-proxy': `docker-pullable://dev.local/queue@sha256:${'c'.repeat(64)}`,
  };
  const containerStatuses = (pod.status?.containerStatuses ?? []).map(
    (c): V1ContainerStatus => ({ ...c, imageID: imageIDs[c.name] ?? c.imageID }),
  );
  await env.core.patchNamespacedPodStatus(
    { namespace: env.namespace, name: pod.metadata?.name ?? '', body: { status: { containerStatuses } } },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );
}

/** The gate's gauge series for a Revision; undefined when absent. */
async function gauge(revision: string): Promise<number | undefined> {
  const text = await (await fetch(new URL('/metrics', env.gate.sinkUrl))).text();
  const line = text.split('\n').find((l) => l.startsWith(`prestart_gate_image_drift{namespace="${env.namespace}",revision="${revision}"}`));
  return line === undefined ? undefined : Number(line.split(' ').pop());
}

/** `kn prestart why <revision>` in this process, as the admin. */
async function why(revision: string): Promise<string> {
  let out = '';
  const program = new Command('knative-prestart').exitOverride();
  registerPrestartCommands(program, {
    out: (text) => {
      out += `${text}\n`;
    },
    setExitCode: () => undefined,
    now: () => new Date(),
  });
  await program.parseAsync(['node', 'knative-prestart', 'why', revision, '-n', env.namespace, '--kubeconfig', env.cluster.kubeconfigPath]);
  return out.trim();
}

test.serial(
  'a released Revision’s pod running another digest than its hooks approved: a Warning Event, the gauge, the run, kn prestart why',
  async (t) => {
    // The control first: the gate takes pod changes in the order its watch brings them, so by the
    // time the drifted pod's Event is there, the control pod's report has been judged.
    const control = await releasedWithPod('same-00001');
    await reportImages(control.pod, `dev.local/demo/app@${APPROVED}`);

    const drifted = await releasedWithPod('drift-00001');
    const podName = drifted.pod.metadata?.name ?? '';
    await reportImages(drifted.pod, `docker.io/someone/else@${OTHER}`);

    const expected = `image drift: pod ${podName} container user-container runs ${OTHER} but hooks approved ${APPROVED}`;
    // find, not filter: an empty list is truthy and would end the wait before the event is written.
    const event = await waitFor(async () => (await env.revisionEvents('drift-00001')).find((e) => e.reason === REASON_IMAGE_DRIFT), {
      timeoutMs: 30_000,
      what: 'the Warning ImageDrift Event on the Revision',
    });
    t.is(event.type, 'Warning');
    t.is(event.involvedObject.uid, drifted.revision.metadata?.uid);
    t.true(event.message?.startsWith(expected), event.message);

    t.is(await waitFor(() => gauge('drift-00001'), { timeoutMs: 10_000, what: 'prestart_gate_image_drift for drift-00001' }), 1);

    const run: RunObject = await env.waitForRun('drift-00001', 'status.imageDrift', (r) => (r.status?.imageDrift?.length ?? 0) > 0);
    t.like(run.status?.imageDrift?.[0], { pod: podName, container: 'user-container', expected: APPROVED, running: OTHER });
    t.true(
      (await why('drift-00001')).includes(
        `Image drift: pod ${podName} container user-container runs ${OTHER} but hooks approved ${APPROVED}`,
      ),
    );

    // The control: its pod runs the approved digest (queue-proxy, not in the snapshot, runs whatever it runs).
    t.deepEqual(
      (await env.revisionEvents('same-00001')).filter((e) => e.reason === REASON_IMAGE_DRIFT),
      [],
      'no ImageDrift Event for the pod on the approved digest',
    );
    t.is(await gauge('same-00001'), undefined);
    t.is((await env.getRun('same-00001'))?.status?.imageDrift, undefined);
    t.notRegex(await why('same-00001'), /Image drift:/);
  },
);
