// Where the apiserver stamps the hold (Kubernetes >= 1.36, release/knative-prestart-apiserver-stamp.yaml),
// a gate outage refuses nothing: with no gate replica running, Knative's own creates of 100 hooked
// Revisions (50 from Service updates, 50 from new Services) are all admitted held, and none gets a
// Deployment. When the gate comes back, each is requested once and released once its hook answers.
// Real here: Knative's reconcilers and webhook, Kubernetes' controllers, the policies, the gate; the
// hook is an HTTP server in this process that answers at once.

import { servesMutatingPolicies } from '@knative-prestart/devcluster/apply.ts';
import { type GateEnv, gateEnv } from '@knative-prestart/devcluster/gate/env.ts';
import { type HookServer, startHookServer } from '@knative-prestart/devcluster/gate/hook-server.ts';
import { syncReply } from '@knative-prestart/devcluster/gate/replies.ts';
import { isHeld } from '@knative-prestart/devcluster/gate/revisions.ts';
import { condition, Knative, type KnativeObject } from '@knative-prestart/devcluster/knative-client.ts';
import { type KnativeServing, startKnativeServing } from '@knative-prestart/devcluster/knative-serving.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import { AppsV1Api, CoreV1Api } from '@kubernetes/client-node';
import test from 'ava';

const HOOKED = { 'outage-held': 'yes' };
const UPDATED = Array.from({ length: 50 }, (_, i) => `upd-${i}`);
const CREATED = Array.from({ length: 50 }, (_, i) => `new-${i}`);
/** Knative's own reconcilers create one Revision at a time per Configuration; this many Service writes at once. */
const WRITERS = 10;

let env: GateEnv;
let serving: KnativeServing;
let kn: Knative;
let hook: HookServer;

test.before(async () => {
  env = await gateEnv('e2eheld');
  serving = await startKnativeServing(env.cluster, { progress: (line) => process.stderr.write(`e2e: ${line}\n`) });
  kn = new Knative(env.admin, env.namespace);
  hook = await startHookServer(async (req) => syncReply(req, 'succeeded'));
  const name = `${env.instance}-db`;
  await env.createHook(name, { match: env.annotationMatch('outage-held', 'yes'), delivery: { transport: 'http', url: hook.url } });
  await env.waitUntilStamped(name, HOOKED);
});

test.after.always(async () => {
  await hook?.close();
  await env?.stop();
  await serving?.stop();
});

async function inBatches(names: string[], write: (name: string) => Promise<unknown>): Promise<void> {
  for (let i = 0; i < names.length; i += WRITERS) await Promise.all(names.slice(i, i + WRITERS).map(write));
}

async function revisions(): Promise<KnativeObject[]> {
  const list = (await env.custom.listNamespacedCustomObject({
    group: 'serving.knative.dev',
    version: 'v1',
    plural: 'revisions',
    namespace: env.namespace,
  })) as { items: KnativeObject[] };
  return list.items;
}

const hookedRevisions = async () => (await revisions()).filter((r) => r.metadata?.annotations?.['outage-held'] === 'yes');

test.serial('no gate replica runs: 100 hooked Revisions Knative creates are admitted held, none refused, none deployed', async (t) => {
  if (!(await servesMutatingPolicies(env.admin))) {
    // Before Kubernetes 1.36 the gate's webhook stamps, and an outage refuses hooked Revisions (bindings-outage.test.ts).
    t.false(await servesMutatingPolicies(env.admin));
    return;
  }
  // Services that exist before the outage, with no hook: their next Revision is the hooked one.
  await inBatches(UPDATED, (name) => kn.createService(name));
  await waitFor(async () => (await revisions()).filter((r) => condition(r, 'Ready')?.status === 'True').length === UPDATED.length, {
    timeoutMs: 180_000,
    what: `the ${UPDATED.length} Services' first Revisions to be Ready`,
  });

  await env.gate.stop();
  const outageStart = Date.now();
  await inBatches(UPDATED, (name) => kn.updateService(name, { annotations: HOOKED, env: { VERSION: '2' } }));
  await inBatches(CREATED, (name) => kn.createService(name, { annotations: HOOKED }));
  // Every hooked Revision created, and looked at by Knative's revision reconciler, which would have made its Deployment.
  const hooked = await waitFor(
    async () => {
      const all = await hookedRevisions();
      return all.length === 100 && all.every((r) => (r.status?.observedGeneration ?? 0) >= 1) ? all : undefined;
    },
    { timeoutMs: 180_000, what: '100 hooked Revisions created and reconciled by Knative while no gate runs' },
  );
  t.log(`100 hooked Revisions created and reconciled ${Date.now() - outageStart} ms into the outage`);
  t.deepEqual(
    hooked.filter((r) => !isHeld(r)).map((r) => r.metadata?.name),
    [],
    '0 unheld',
  );
  const configurations = (await env.custom.listNamespacedCustomObject({
    group: 'serving.knative.dev',
    version: 'v1',
    plural: 'configurations',
    namespace: env.namespace,
  })) as { items: KnativeObject[] };
  t.deepEqual(
    configurations.items.filter((c) => condition(c, 'Ready')?.reason === 'RevisionFailed').map((c) => c.metadata?.name),
    [],
    '0 refused: no Configuration says its Revision create failed',
  );
  const failures = await env.admin
    .makeApiClient(CoreV1Api)
    .listNamespacedEvent({ namespace: env.namespace, fieldSelector: 'involvedObject.kind=Configuration,reason=CreationFailed' });
  t.is(failures.items.length, 0, '0 refused: no CreationFailed event');
  const hookedNames = new Set(hooked.map((r) => r.metadata?.name));
  const deployments = await env.admin.makeApiClient(AppsV1Api).listNamespacedDeployment({ namespace: env.namespace });
  t.deepEqual(
    deployments.items.map((d) => d.metadata?.labels?.['serving.knative.dev/revision']).filter((r) => hookedNames.has(r)),
    [],
    '0 Deployments of a held Revision',
  );
  t.is(hook.requests.length, 0, 'nothing asked while no gate runs');

  const back = Date.now();
  await env.startGate();
  await waitFor(() => hook.requests.length > 0, { timeoutMs: 60_000, what: 'the gate, back, to send its first request' });
  const firstRequest = Date.now() - back;
  await waitFor(async () => (await hookedRevisions()).every((r) => !isHeld(r)), {
    timeoutMs: 180_000,
    what: 'all 100 hooked Revisions to be released',
  });
  const allReleased = Date.now() - back;
  t.log(`from the gate's start: first request after ${firstRequest} ms, all 100 released after ${allReleased} ms`);
  const asked = new Map<string, number>();
  for (const r of hook.requests) asked.set(r.data.revision.name, (asked.get(r.data.revision.name) ?? 0) + 1);
  t.is(asked.size, 100, 'each hooked Revision was asked');
  t.deepEqual(
    [...asked].filter(([, n]) => n !== 1),
    [],
    'each was asked once',
  );
});
