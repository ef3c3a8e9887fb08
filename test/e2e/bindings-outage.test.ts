// With Knative Serving's own controllers: the bindings a hook contributed are projected into the
// pod template of the Revision's Deployment when Knative creates it, and Knative keeps them (it
// compares its deployment-hash label, not the spec; when its own configuration changes the spec it
// updates the Deployment, and the gate projects them again). So with every gate replica down:
//   - a released Service's pods are replaced (and scaled) with their bindings;
//   - a Service no hook matches rolls out as usual;
//   - a Service a hook matches: where the apiserver stamps (Kubernetes >= 1.36, the release's
//     knative-prestart-apiserver-stamp.yaml), Knative's Revision is admitted held and gets no
//     Deployment until the gate, back, asks its hooks; where the gate's webhook stamps, the stamp
//     policy refuses it, Knative says why on the Configuration and backs off, and the gate, back,
//     makes Knative try again at once (gate/core/refused-rollout.ts) instead of after its back-off.
//     Either way its current Revision keeps serving all along.
// Real here: Knative's reconcilers and webhook, Kubernetes' controllers, the gate, the policies.

import { applyManifests, servesMutatingPolicies } from '@knative-prestart/devcluster/apply.ts';
import { type GateEnv, gateEnv } from '@knative-prestart/devcluster/gate/env.ts';
import { type HookServer, startHookServer } from '@knative-prestart/devcluster/gate/hook-server.ts';
import { syncReply } from '@knative-prestart/devcluster/gate/replies.ts';
import { isHeld } from '@knative-prestart/devcluster/gate/revisions.ts';
import { condition, Knative, type KnativeObject, readyPodOf, waitForRevision } from '@knative-prestart/devcluster/knative-client.ts';
import {
  KNATIVE_NAMESPACE,
  type KnativeServing,
  QUEUE_SIDECAR_IMAGE,
  startKnativeServing,
} from '@knative-prestart/devcluster/knative-serving.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import { AppsV1Api, CoreV1Api, PatchStrategy, setHeaderOptions, type V1Deployment, type V1Pod } from '@kubernetes/client-node';
import test from 'ava';
import { RETRY_CREATE_ANNOTATION } from '../../gate/core/refused-rollout.ts';
import { STAMP_POLICIES } from '../../gate/webhooks/stamp-path.ts';

const BINDING = { 'serving-binding': 'shop-db' };
let env: GateEnv;
let serving: KnativeServing;
let kn: Knative;
let hook: HookServer;
let apps: AppsV1Api;
let core: CoreV1Api;
/** This apiserver serves MutatingAdmissionPolicy v1, and the suite's cluster has the apiserver stamp installed. */
let apiserverStamps: boolean;
const STAMP_FILE = new URL('../../config/230-stamp-mutating-policy.yaml', import.meta.url).pathname;
/** Looks again at who stamps every second, so the test follows its own removal of the apiserver stamp at once. */
const GATE = { stampCheckSeconds: 1 };

test.before(async () => {
  env = await gateEnv('e2eout', { gate: GATE });
  apiserverStamps = await servesMutatingPolicies(env.admin);
  serving = await startKnativeServing(env.cluster, { progress: (line) => process.stderr.write(`e2e: ${line}\n`) });
  kn = new Knative(env.admin, env.namespace);
  apps = env.admin.makeApiClient(AppsV1Api);
  core = env.admin.makeApiClient(CoreV1Api);
  await core.createNamespacedSecret({
    namespace: env.namespace,
    body: { metadata: { name: 'shop-db' }, stringData: { uri: 'postgres://shop' } },
  });
  hook = await startHookServer(async (req) =>
    syncReply(req, 'succeeded', {
      contributions: [
        { name: 'db-env', secretName: 'shop-db', as: 'env', env: { DATABASE_URL: 'uri' } },
        { name: 'db', secretName: 'shop-db', as: 'volume' },
      ],
    }),
  );
  const name = `${env.instance}-db`;
  await env.createHook(name, {
    match: env.annotationMatch('serving-binding', 'shop-db'),
    contributions: { allowed: ['env', 'volume'] },
    delivery: { transport: 'http', url: hook.url },
  });
  await env.waitUntilStamped(name, BINDING);
});

test.afterEach.always(async (t) => {
  if (t.passed) return;
  t.log(`hook requests: ${hook.requests.map((r) => `${r.data.revision.name}/${r.data.action}`).join(', ') || 'none'}`);
  for (const name of ['shop-00001', 'shop-00002']) t.log(`${name}: run ${JSON.stringify((await env.getRun(name))?.status ?? null)}`);
});

test.after.always(async () => {
  // The next files expect the apiserver stamp where it is served.
  if (apiserverStamps) await applyManifests(env.admin, STAMP_FILE);
  await setQueueImage(QUEUE_SIDECAR_IMAGE).catch(() => undefined);
  await hook?.close();
  await env?.stop();
  await serving?.stop();
});

const revision = (name: string, what: string, ok: (rev: KnativeObject) => boolean, timeoutMs = 90_000) =>
  waitForRevision(kn, name, what, ok, { timeoutMs, logs: serving.controllerLog });
const ready = (name: string) => revision(name, 'Ready=True', (r) => condition(r, 'Ready')?.status === 'True');
const deploymentOf = (rev: string) => apps.readNamespacedDeployment({ name: `${rev}-deployment`, namespace: env.namespace });

function bindingsIn(spec: V1Pod['spec']): boolean {
  const app = spec?.containers.find((c) => c.name === 'user-container');
  const queue = spec?.containers.find((c) => c.name === 'queue-proxy');
  return Boolean(
    app?.env?.some((e) => e.name === 'DATABASE_URL' && e.valueFrom?.secretKeyRef?.name === 'shop-db') &&
      app?.volumeMounts?.some((m) => m.mountPath === '/bindings/db') &&
      spec?.volumes?.some((v) => v.secret?.secretName === 'shop-db') &&
      !queue?.env?.some((e) => e.name === 'DATABASE_URL'),
  );
}

/** Knative's queue-proxy image: changing it changes every Revision's Deployment spec, so Knative updates them. */
async function setQueueImage(image: string): Promise<void> {
  await core.patchNamespacedConfigMap(
    { name: 'config-deployment', namespace: KNATIVE_NAMESPACE, body: { data: { 'queue-sidecar-image': image } } },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );
}

test.serial("the bindings are in the Deployment's pod template, and Knative keeps them there", async (t) => {
  await kn.createService('shop', { annotations: BINDING });
  await ready('shop-00001');
  const made = await deploymentOf('shop-00001');
  t.true(bindingsIn(made.spec?.template.spec), 'projected into the template when Knative created the Deployment');
  t.truthy(made.spec?.template.metadata?.annotations?.['prestart.dev/injected']);
  t.is(made.metadata?.generation, 1, 'Knative reconciled the Revision to Ready without rewriting the Deployment');
  t.true(bindingsIn((await readyPodOf(core, env.namespace, 'shop-00001')).spec));

  // Knative's own configuration changes the Deployment's spec: Knative updates it, the gate projects again.
  await setQueueImage(`${QUEUE_SIDECAR_IMAGE}-next`);
  const updated: V1Deployment = await waitFor(
    async () => {
      const d = await deploymentOf('shop-00001');
      return d.spec?.template.spec?.containers.some((c) => c.image === `${QUEUE_SIDECAR_IMAGE}-next`) ? d : undefined;
    },
    { timeoutMs: 90_000, what: 'Knative to update the Deployment for its new queue-proxy image' },
  );
  t.true((updated.metadata?.generation ?? 0) > 1);
  t.true(bindingsIn(updated.spec?.template.spec), 'still there after Knative rewrote the spec');
  await setQueueImage(QUEUE_SIDECAR_IMAGE);
  // The next test deletes a pod of this Revision: it must not pick one this rollout is replacing.
  await rolledOut('shop-00001', QUEUE_SIDECAR_IMAGE);
});

/**
 * Waits until the Revision's Deployment runs `queueImage` with its rollout complete and no pod of
 * the Revision left terminating, so that the Revision's ready pod is the one that stays.
 */
async function rolledOut(rev: string, queueImage: string): Promise<void> {
  await waitFor(
    async () => {
      const d = await deploymentOf(rev);
      const want = d.spec?.replicas ?? 1;
      const s = d.status;
      const done =
        d.spec?.template.spec?.containers.some((c) => c.image === queueImage) &&
        (s?.observedGeneration ?? 0) >= (d.metadata?.generation ?? 1) &&
        s?.updatedReplicas === want &&
        s?.replicas === want &&
        s?.availableReplicas === want;
      if (!done) return undefined;
      const pods = await core.listNamespacedPod({ namespace: env.namespace, labelSelector: `serving.knative.dev/revision=${rev}` });
      return pods.items.length === want && pods.items.every((p) => !p.metadata?.deletionTimestamp) ? d : undefined;
    },
    { timeoutMs: 90_000, what: `the rollout of ${rev}'s Deployment to ${queueImage} to finish, its old pods gone` },
  );
}

const configuration = async (name: string) =>
  (await env.custom.getNamespacedCustomObject({
    group: 'serving.knative.dev',
    version: 'v1',
    plural: 'configurations',
    namespace: env.namespace,
    name,
  })) as KnativeObject;

test.serial('every gate replica down: pods are replaced with their bindings, a Service no hook matches rolls out', async (t) => {
  await env.gate.stop();
  const before = await readyPodOf(core, env.namespace, 'shop-00001');
  await core.deleteNamespacedPod({ name: before.metadata?.name ?? '', namespace: env.namespace });
  const replacement = await waitFor(
    async () =>
      (await core.listNamespacedPod({ namespace: env.namespace, labelSelector: 'serving.knative.dev/revision=shop-00001' })).items.find(
        (p) => p.metadata?.name !== before.metadata?.name && p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'),
      ),
    { timeoutMs: 60_000, what: 'the ReplicaSet to replace the pod while no gate runs' },
  );
  t.true(bindingsIn(replacement.spec), 'the replacement has its bindings');

  await kn.createService('plain');
  const plain = await ready('plain-00001');
  t.false(isHeld(plain), 'a Service no hook matches rolls out as usual');
  await env.startGate();
});

test.serial(
  'the apiserver stamps, every gate replica down: a hooked rollout is admitted held, gets no Deployment, and goes on once the gate is back',
  async (t) => {
    if (!apiserverStamps) {
      // Kubernetes before 1.36: the webhook path is the only one, tested below.
      t.false(await servesMutatingPolicies(env.admin));
      return;
    }
    await env.gate.stop();
    await kn.updateService('shop', { annotations: BINDING, env: { VERSION: '2' } });
    // Knative's revision reconciler has looked at it (and would have made its Deployment).
    const held = await revision('shop-00002', 'created and reconciled while no gate runs', (r) => (r.status?.observedGeneration ?? 0) >= 1);
    t.true(isHeld(held), 'held: stamped by the apiserver');
    t.is(held.metadata?.annotations?.['prestart.dev/hooks'], JSON.stringify([`${env.instance}-db`]));
    await t.throwsAsync(deploymentOf('shop-00002'), undefined, 'no Deployment while held');
    t.not(condition(await configuration('shop'), 'Ready')?.reason, 'RevisionFailed', 'Knative was refused nothing');
    t.is(condition(await kn.revision('shop-00001'), 'Ready')?.status, 'True', 'the current Revision keeps serving');

    const back = Date.now();
    await env.startGate();
    await ready('shop-00002');
    t.log(`shop-00002 Ready ${Date.now() - back} ms after the gate started again`);
    t.true(bindingsIn((await readyPodOf(core, env.namespace, 'shop-00002')).spec));
  },
);

/** Knative's failed creates of a Revision for Configuration `name`, as its Events count them. */
async function creationFailures(name: string): Promise<number> {
  const events = await core.listNamespacedEvent({
    namespace: env.namespace,
    fieldSelector: `involvedObject.kind=Configuration,involvedObject.name=${name},reason=CreationFailed`,
  });
  return events.items.reduce((n, e) => n + (e.count ?? 1), 0);
}

/** What an admin does on a cluster without the apiserver stamp: the gate's webhook stamps again. */
async function removeApiserverStamp(): Promise<void> {
  for (const plural of ['mutatingadmissionpolicybindings', 'mutatingadmissionpolicies']) {
    for (const name of STAMP_POLICIES) {
      await env.custom.deleteClusterCustomObject({ group: 'admissionregistration.k8s.io', version: 'v1', plural, name });
    }
  }
}

test.serial(
  "the gate's webhook stamps, every gate replica down: Knative is refused, and tries again as soon as the gate is back",
  async (t) => {
    const next = apiserverStamps ? 'shop-00003' : 'shop-00002';
    if (apiserverStamps) await removeApiserverStamp();
    await waitFor(() => env.gate.stamper() === 'webhook', { what: 'the gate to register its Revision webhook' });
    await env.gate.stop();
    // The outage as Knative will meet it: the apiserver has dropped its stamp, and the gate's webhook does not answer.
    await waitFor(
      () =>
        env.custom
          .createNamespacedCustomObject({
            group: 'serving.knative.dev',
            version: 'v1',
            plural: 'revisions',
            namespace: env.namespace,
            dryRun: 'All',
            body: {
              apiVersion: 'serving.knative.dev/v1',
              kind: 'Revision',
              metadata: { name: `probe-${Date.now()}`, annotations: BINDING },
              spec: { containers: [{ image: 'dev.local/demo/app:v1' }] },
            },
          })
          .then(
            () => false,
            (err: unknown) => /prestart-stamp-revisions/.test(String((err as { body?: unknown }).body)),
          ),
      { timeoutMs: 30_000, what: 'a hooked Revision to be refused by the stamp policy' },
    );
    await kn.updateService('shop', { annotations: BINDING, env: { VERSION: '3' } });
    const refused = await waitFor(
      async () => {
        const c = condition(await configuration('shop'), 'Ready');
        return c?.status === 'False' && /prestart-stamp-revisions/.test(c.message ?? '') ? c : undefined;
      },
      { timeoutMs: 60_000, what: 'Knative to report the refused Revision on Configuration shop' },
    );
    const firstRefusal = Date.now();
    t.log(`Configuration shop: ${refused.reason}: ${refused.message}`);
    t.is(await kn.revision(next), undefined, 'no Revision was created unheld');
    // The outage lasts until Knative has been refused 12 times: its back-off (5 ms doubling) then
    // puts its next try about as far ahead as the outage has lasted, some 20 s.
    await waitFor(async () => (await creationFailures('shop')) >= 12, {
      timeoutMs: 90_000,
      what: 'Knative to be refused 12 times',
    });
    const outage = Date.now() - firstRefusal;

    const back = Date.now();
    await env.startGate();
    const held = await revision(next, 'created by Knative once the gate is back', () => true, 120_000);
    const resumed = Date.now() - back;
    t.log(
      `outage ${outage} ms after the first refusal (${await creationFailures('shop')} refusals): ` +
        `${next} created ${resumed} ms after the gate started again; Knative's own next try was due about ${outage} ms after its last`,
    );
    t.truthy(held.metadata?.annotations?.['prestart.dev/hooks'], 'stamped');
    const latest = await kn.revision(apiserverStamps ? 'shop-00002' : 'shop-00001');
    t.truthy(latest?.metadata?.annotations?.[RETRY_CREATE_ANNOTATION], 'the gate asked Knative to try again, on its latest Revision');
    await ready(next);
    t.true(bindingsIn((await readyPodOf(core, env.namespace, next)).spec));
  },
);
