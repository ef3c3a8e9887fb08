// Trigger wiring on the real control plane: the reconciler, running as the gate's own identity
// (RBAC of config/300-rbac.yaml), against Knative Eventing's real Trigger and Broker CRDs and
// the real garbage collector of kube-controller-manager. No Knative controller or webhook runs
// here, so Triggers are plain stored objects: what is checked is what the gate writes.
//
// The gate writes Triggers only where an admin bound knative-prestart-gate-triggers (this file's
// two namespaces, as an admin would for a Broker there; a third is left unbound on purpose).
// The reconciler is scoped to this file's namespaces, so the hooks other files create at
// the same time cannot change its counts. Tests run in order: each starts from the state the
// previous one left.
//
// The first test needs a cluster without the Trigger CRD. This file is the only one that
// installs Knative Eventing's CRDs; if they are already there (a cluster reused from an earlier
// run), it deletes the Trigger CRD first.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { applyManifests } from '@knative-prestart/devcluster/apply.ts';
import type { Cluster } from '@knative-prestart/devcluster/control-plane.ts';
import { allowGateTriggers } from '@knative-prestart/devcluster/gate/trigger-rights.ts';
import { knativeEventingCrdFiles } from '@knative-prestart/devcluster/knative.ts';
import { sharedCluster } from '@knative-prestart/devcluster/shared.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import { ApiException, CoreV1Api, CustomObjectsApi, KubeConfig, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import test from 'ava';
import yaml from 'js-yaml';
import pino from 'pino';
import type { HookDelivery, PrestartHookSpec } from '../../../api/types.ts';
import { APPLIED_HASH_ANNOTATION } from '../../../triggers/compare.ts';
import type { Destination, TriggerObject } from '../../../triggers/desired.ts';
import { mayNotWrite, type ReconcileResult, startTriggerReconciler, TriggerReconciler } from '../../../triggers/reconciler.ts';

const GATE_USER = 'system:serviceaccount:knative-prestart:knative-prestart-gate';
const GATE_GROUPS = ['system:serviceaccounts', 'system:serviceaccounts:knative-prestart', 'system:authenticated'];
const configFile = (name: string) => fileURLToPath(new URL(`../../../config/${name}`, import.meta.url));
const root = fileURLToPath(new URL('../../../', import.meta.url));
const TRIGGERS = { group: 'eventing.knative.dev', version: 'v1', plural: 'triggers' } as const;
const HOOKS = { group: 'prestart.dev', version: 'v1alpha1', plural: 'prestarthooks' } as const;
const GATE_SINK: Destination = { uri: 'http://127.0.0.1:18080/' };
// Garbage collection starts once the collector's periodic discovery has seen the new CRDs.
const GC_TIMEOUT_MS = 120_000;

const suffix = randomBytes(3).toString('hex');
const ns1 = `triggers-a-${suffix}`;
const ns2 = `triggers-b-${suffix}`;
const unbound = `triggers-c-${suffix}`;
const hookName = (n: string) => `tw-${n}-${suffix}`;
const [A, B, C, D, E, F, G] = ['a', 'b', 'c', 'd', 'e', 'f', 'g'].map(hookName) as [string, string, string, string, string, string, string];

let cluster: Cluster;
let admin: CustomObjectsApi;
let gateKc: KubeConfig;
const stops: (() => Promise<void>)[] = [];

interface LiveTrigger extends TriggerObject {
  metadata: TriggerObject['metadata'] & { uid: string };
}

test.before(async () => {
  cluster = await sharedCluster();
  const kc = cluster.kubeConfig;
  await applyManifests(kc, configFile('100-prestarthook-crd.yaml'));
  await applyManifests(kc, configFile('100-prestartrun-crd.yaml'));
  await applyManifests(kc, configFile('300-rbac.yaml'));
  admin = kc.makeApiClient(CustomObjectsApi);
  const core = kc.makeApiClient(CoreV1Api);
  for (const name of [ns1, ns2, unbound]) await core.createNamespace({ body: { metadata: { name } } });
  for (const name of [ns1, ns2]) await allowGateTriggers(kc, name);
  gateKc = new KubeConfig();
  gateKc.loadFromFile(await cluster.mintUserKubeconfig(GATE_USER, GATE_GROUPS));
});

test.after.always(async () => {
  for (const stop of stops) await stop().catch(() => undefined);
  if (!admin) return;
  for (const name of [A, B, C, D, E, F, G]) await admin.deleteClusterCustomObject({ ...HOOKS, name }).catch(() => undefined);
  const core = cluster.kubeConfig.makeApiClient(CoreV1Api);
  for (const name of [ns1, ns2, unbound]) await core.deleteNamespace({ name }).catch(() => undefined);
});

// ---- helpers ---------------------------------------------------------------------------------

const service = (name: string) => ({ ref: { apiVersion: 'serving.knative.dev/v1', kind: 'Service', name } });
const viaBroker = (namespace: string, broker: string, subscriber: Destination): HookDelivery => ({
  transport: 'broker',
  broker: { name: broker, namespace, subscriber },
});

async function createHook(name: string, delivery: HookDelivery): Promise<string> {
  // Matches no Revision anywhere (its namespaces have none), so the gates of other test files ignore it.
  const spec: Partial<PrestartHookSpec> = {
    match: { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': ns1 } } },
    delivery,
  };
  const created = (await admin.createClusterCustomObject({
    ...HOOKS,
    body: { apiVersion: 'prestart.dev/v1alpha1', kind: 'PrestartHook', metadata: { name }, spec },
  })) as { metadata: { uid: string } };
  return created.metadata.uid;
}

async function patchHookDelivery(name: string, delivery: Record<string, unknown>): Promise<void> {
  await admin.patchClusterCustomObject(
    { ...HOOKS, name, body: { spec: { delivery } } },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );
}

async function deleteHook(name: string): Promise<void> {
  await admin.deleteClusterCustomObject({ ...HOOKS, name });
}

async function getTrigger(namespace: string, name: string): Promise<LiveTrigger | undefined> {
  try {
    return (await admin.getNamespacedCustomObject({ ...TRIGGERS, namespace, name })) as LiveTrigger;
  } catch (err) {
    if (err instanceof ApiException && err.code === 404) return undefined;
    throw err;
  }
}

async function mustGetTrigger(namespace: string, name: string): Promise<LiveTrigger> {
  const t = await getTrigger(namespace, name);
  if (!t) throw new Error(`Trigger ${namespace}/${name} not found`);
  return t;
}

async function triggerNames(namespace: string): Promise<string[]> {
  const list = (await admin.listNamespacedCustomObject({ ...TRIGGERS, namespace })) as { items: LiveTrigger[] };
  return list.items.map((t) => t.metadata.name).sort();
}

const ownerNames = (t: LiveTrigger | undefined) => (t?.metadata.ownerReferences ?? []).map((o) => o.name).sort();
const requestTrigger = (hook: string) => `prestart-hook-${hook}`;
const counts = (r: ReconcileResult) => ({
  created: r.created,
  updated: r.updated,
  deleted: r.deleted,
  unchanged: r.unchanged,
  failed: r.failed,
});
const counted = (c: Partial<ReturnType<typeof counts>>) => ({ created: 0, updated: 0, deleted: 0, unchanged: 0, failed: 0, ...c });

function reconciler(): TriggerReconciler {
  return new TriggerReconciler({ kc: gateKc, log: pino({ level: 'silent' }), gateSubscriber: GATE_SINK, namespaces: [ns1, ns2] });
}

/** A pino logger whose lines the test can read. */
function capturedLog(): { log: pino.Logger; lines: { level: number; msg: string }[] } {
  const lines: { level: number; msg: string }[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(line) as { level: number; msg: string });
      done();
    },
  });
  return { log: pino({ level: 'info' }, sink), lines };
}

async function removeTriggerCrd(): Promise<void> {
  const crds = 'customresourcedefinitions';
  const crd = { group: 'apiextensions.k8s.io', version: 'v1', plural: crds, name: 'triggers.eventing.knative.dev' };
  try {
    await admin.deleteClusterCustomObject(crd);
  } catch (err) {
    if (err instanceof ApiException && err.code === 404) return;
    throw err;
  }
  await waitFor(
    async () => {
      try {
        await admin.listClusterCustomObject({ ...TRIGGERS });
        return false;
      } catch (err) {
        return err instanceof ApiException && err.code === 404;
      }
    },
    { what: 'the Trigger API to go away', timeoutMs: 60_000 },
  );
}

// ---- tests -----------------------------------------------------------------------------------

test.serial('without Knative Eventing the reconciler says so once, and wires the hooks once the Trigger CRD is installed', async (t) => {
  await removeTriggerCrd();
  await createHook(A, viaBroker(ns1, 'default', service('hook-a')));
  const { log, lines } = capturedLog();
  const handle = startTriggerReconciler({ kc: gateKc, log, gateSubscriber: GATE_SINK, resyncMs: 300, namespaces: [ns1, ns2] });
  stops.push(handle.stop);

  const first = await handle.reconcileNow();
  const second = await handle.reconcileNow();
  t.true(first.triggerApiMissing);
  t.true(second.triggerApiMissing);
  t.deepEqual(counts(second), counted({}));
  t.is(lines.filter((l) => /serves no eventing\.knative\.dev\/v1 Triggers/.test(l.msg) && l.level === 40).length, 1);

  for (const file of await knativeEventingCrdFiles('trigger', 'broker')) await applyManifests(cluster.kubeConfig, file);
  // No call from here on: the periodic resync must find the new API by itself.
  const trigger = await waitFor(() => getTrigger(ns1, requestTrigger(A)), {
    what: `Trigger ${requestTrigger(A)} created by a resync`,
    timeoutMs: 30_000,
  });
  t.deepEqual(trigger.spec.subscriber, service('hook-a'));
  await waitFor(() => lines.some((l) => l.msg === 'the Trigger API is served now'), { what: 'the reconciler to notice the Trigger API' });
  await handle.stop();
});

test.serial(
  'each Broker hook gets a Trigger for its requests, each Broker one reply Trigger to the gate; http hooks get none',
  async (t) => {
    // What admins create: the Brokers and the hooks.
    await applyManifests(
      cluster.kubeConfig,
      [ns1, ns2]
        .map((ns) => `apiVersion: eventing.knative.dev/v1\nkind: Broker\nmetadata: {name: default, namespace: ${ns}}\nspec: {}\n`)
        .join('---\n'),
    );
    const uidA = (await admin.getClusterCustomObject({ ...HOOKS, name: A })) as { metadata: { uid: string } };
    const uidB = await createHook(B, viaBroker(ns1, 'default', { uri: `http://hook-b.${ns1}.svc/` }));
    await createHook(C, { transport: 'http', url: 'http://hook-c.example.com/' });

    const r = reconciler();
    // A's request Trigger and the reply Trigger exist from the test before; the reply Trigger gains B as owner.
    t.deepEqual(counts(await r.reconcile()), counted({ created: 1, updated: 1, unchanged: 1 }));

    t.deepEqual(await triggerNames(ns1), ['prestart-gate-replies-default', requestTrigger(A), requestTrigger(B)].sort());
    t.deepEqual(await triggerNames(ns2), []);

    const reqB = await mustGetTrigger(ns1, requestTrigger(B));
    t.is(reqB.spec.broker, 'default');
    t.deepEqual(reqB.spec.filters, [{ exact: { type: 'revision.prestart.requested', prestarthook: B } }]);
    t.deepEqual(reqB.spec.subscriber, { uri: `http://hook-b.${ns1}.svc/` });
    t.deepEqual(reqB.spec.delivery, { retry: 5, backoffPolicy: 'exponential', backoffDelay: 'PT1S' });
    t.deepEqual(reqB.metadata.ownerReferences, [{ apiVersion: 'prestart.dev/v1alpha1', kind: 'PrestartHook', name: B, uid: uidB }]);
    t.is(reqB.metadata.labels['app.kubernetes.io/managed-by'], 'knative-prestart');

    const replies = await mustGetTrigger(ns1, 'prestart-gate-replies-default');
    t.is(replies.spec.broker, 'default');
    t.deepEqual(replies.spec.filters, [{ exact: { type: 'revision.prestart.completed' } }]);
    t.deepEqual(replies.spec.subscriber, GATE_SINK);
    t.deepEqual(
      replies.metadata.ownerReferences?.map((o) => [o.name, o.uid]).sort(),
      [
        [A, uidA.metadata.uid],
        [B, uidB],
      ].sort(),
    );
    t.is(replies.metadata.labels['app.kubernetes.io/managed-by'], 'knative-prestart');

    // The http hook has no Trigger anywhere.
    for (const ns of [ns1, ns2]) {
      const list = (await admin.listNamespacedCustomObject({ ...TRIGGERS, namespace: ns, labelSelector: `prestart.dev/hook=${C}` })) as {
        items: unknown[];
      };
      t.is(list.items.length, 0);
    }

    // Again: nothing to do.
    t.deepEqual(counts(await r.reconcile()), counted({ unchanged: 3 }));
  },
);

test.serial("a changed subscriber updates the hook's Trigger, and a hand edit is undone", async (t) => {
  const r = reconciler();
  const before = await mustGetTrigger(ns1, requestTrigger(B));
  await patchHookDelivery(B, { broker: { subscriber: { uri: null, ref: service('hook-b2').ref } } });
  t.deepEqual(counts(await r.reconcile()), counted({ updated: 1, unchanged: 2 }));
  const after = await mustGetTrigger(ns1, requestTrigger(B));
  // The uri the gate no longer sets is gone, not left next to the new ref.
  t.deepEqual(after.spec.subscriber, service('hook-b2'));
  t.is(after.metadata.uid, before.metadata.uid);
  t.not(after.metadata.annotations?.[APPLIED_HASH_ANNOTATION], before.metadata.annotations?.[APPLIED_HASH_ANNOTATION]);

  await admin.patchNamespacedCustomObject(
    { ...TRIGGERS, namespace: ns1, name: requestTrigger(A), body: { spec: { filters: [{ exact: { type: 'something.else' } }] } } },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );
  t.deepEqual(counts(await r.reconcile()), counted({ updated: 1, unchanged: 2 }));
  t.deepEqual((await mustGetTrigger(ns1, requestTrigger(A))).spec.filters, [
    { exact: { type: 'revision.prestart.requested', prestarthook: A } },
  ]);
  t.deepEqual(counts(await r.reconcile()), counted({ unchanged: 3 }));
});

test.serial('a field the gate does not set, added by an admin, is kept, also when the gate rewrites the Trigger', async (t) => {
  const r = reconciler();
  const dls = { uri: 'http://dead-letters.example.com/' };
  await admin.patchNamespacedCustomObject(
    { ...TRIGGERS, namespace: ns1, name: requestTrigger(B), body: { spec: { delivery: { deadLetterSink: dls } } } },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );
  t.deepEqual(counts(await r.reconcile()), counted({ unchanged: 3 }));
  await patchHookDelivery(B, { broker: { subscriber: { ref: service('hook-b3').ref } } });
  t.deepEqual(counts(await r.reconcile()), counted({ updated: 1, unchanged: 2 }));
  const after = await mustGetTrigger(ns1, requestTrigger(B));
  t.deepEqual(after.spec.subscriber, service('hook-b3'));
  t.deepEqual(after.spec.delivery as unknown, { retry: 5, backoffPolicy: 'exponential', backoffDelay: 'PT1S', deadLetterSink: dls });
});

test.serial('a hook moved to a Broker in another namespace gets its Triggers there; the old request Trigger goes', async (t) => {
  const r = reconciler();
  await patchHookDelivery(B, { broker: { namespace: ns2 } });
  // Created: B's request Trigger and the reply Trigger in ns2. Deleted: B's in ns1. Updated: ns1's reply Trigger loses B.
  t.deepEqual(counts(await r.reconcile()), counted({ created: 2, deleted: 1, updated: 1, unchanged: 1 }));
  t.deepEqual(await triggerNames(ns1), ['prestart-gate-replies-default', requestTrigger(A)].sort());
  t.deepEqual(await triggerNames(ns2), ['prestart-gate-replies-default', requestTrigger(B)].sort());
  t.deepEqual(ownerNames(await getTrigger(ns1, 'prestart-gate-replies-default')), [A]);
  t.deepEqual(ownerNames(await getTrigger(ns2, 'prestart-gate-replies-default')), [B]);
});

test.serial("a hook moved to another Broker of the same namespace gets a new Trigger (Knative's broker field is immutable)", async (t) => {
  const r = reconciler();
  const before = await mustGetTrigger(ns1, requestTrigger(A));
  await patchHookDelivery(A, { broker: { name: 'second' } });
  t.deepEqual(counts(await r.reconcile()), counted({ created: 1, updated: 1, deleted: 1, unchanged: 2 }));
  const after = await mustGetTrigger(ns1, requestTrigger(A));
  t.is(after.spec.broker, 'second');
  t.not(after.metadata.uid, before.metadata.uid);
  t.deepEqual(await triggerNames(ns1), ['prestart-gate-replies-second', requestTrigger(A)].sort());
});

test.serial('a hook switched to transport http loses its Triggers: the gate deletes them', async (t) => {
  const r = reconciler();
  await patchHookDelivery(A, { transport: 'http', url: 'http://hook-a.example.com/', broker: null });
  t.deepEqual(counts(await r.reconcile()), counted({ deleted: 2, unchanged: 2 }));
  t.deepEqual(await triggerNames(ns1), []);
});

test.serial('hooksChanged() wires a new hook without waiting for the resync', async (t) => {
  const handle = startTriggerReconciler({
    kc: gateKc,
    log: pino({ level: 'silent' }),
    gateSubscriber: GATE_SINK,
    resyncMs: 600_000,
    namespaces: [ns1, ns2],
  });
  stops.push(handle.stop);
  // The pass at start; after it, only hooksChanged() can bring D's Trigger within the wait below.
  await handle.reconcileNow();
  await createHook(D, viaBroker(ns2, 'default', service('hook-d')));
  handle.hooksChanged();
  const reqD = await waitFor(() => getTrigger(ns2, requestTrigger(D)), { what: `Trigger ${requestTrigger(D)}`, timeoutMs: 10_000 });
  t.deepEqual(reqD.spec.subscriber, service('hook-d'));
  await waitFor(async () => ownerNames(await getTrigger(ns2, 'prestart-gate-replies-default')).join() === [B, D].sort().join(), {
    what: 'the reply Trigger to be owned by both hooks',
    timeoutMs: 10_000,
  });
  await handle.stop();
  t.deepEqual(counts(await reconciler().reconcile()), counted({ unchanged: 3 }));
});

test.serial('deleting hooks: the garbage collector removes their Triggers, the reply Trigger with the last hook', async (t) => {
  // No reconciler runs during this test: only ownerReferences can do it.
  await deleteHook(B);
  await waitFor(async () => (await getTrigger(ns2, requestTrigger(B))) === undefined, {
    what: `the garbage collector to delete ${requestTrigger(B)}`,
    timeoutMs: GC_TIMEOUT_MS,
  });
  // The reply Trigger still has an owner (D), so it stays.
  t.truthy(await getTrigger(ns2, 'prestart-gate-replies-default'));
  const after = await reconciler().reconcile();
  t.is(after.deleted, 0);
  t.is(after.failed, 0);
  t.deepEqual(ownerNames(await getTrigger(ns2, 'prestart-gate-replies-default')), [D]);

  await deleteHook(D);
  await waitFor(
    async () =>
      (await getTrigger(ns2, requestTrigger(D))) === undefined && (await getTrigger(ns2, 'prestart-gate-replies-default')) === undefined,
    { what: `the garbage collector to delete ${requestTrigger(D)} and the reply Trigger`, timeoutMs: GC_TIMEOUT_MS },
  );
  t.deepEqual(await triggerNames(ns2), []);
  t.deepEqual(counts(await reconciler().reconcile()), counted({}));
});

test.serial('a Trigger the gate does not manage is left alone, and reported', async (t) => {
  await admin.createNamespacedCustomObject({
    ...TRIGGERS,
    namespace: ns1,
    body: {
      apiVersion: 'eventing.knative.dev/v1',
      kind: 'Trigger',
      metadata: { name: requestTrigger(E), namespace: ns1 },
      spec: { broker: 'default', subscriber: { uri: 'http://someone-else.example.com/' } },
    },
  });
  await createHook(E, viaBroker(ns1, 'default', service('hook-e')));
  const r = reconciler();
  // The reply Trigger is created; E's own name is taken.
  t.deepEqual(counts(await r.reconcile()), counted({ created: 1, failed: 1 }));
  const theirs = await mustGetTrigger(ns1, requestTrigger(E));
  t.deepEqual(theirs.spec.subscriber, { uri: 'http://someone-else.example.com/' });
  t.is(theirs.metadata.labels?.['app.kubernetes.io/managed-by'], undefined);
  t.is(theirs.metadata.ownerReferences, undefined);
  // And it is not deleted either, though E's Trigger is "missing" and the gate lists by its label.
  t.deepEqual(counts(await r.reconcile()), counted({ unchanged: 1, failed: 1 }));
});

test.serial(
  'the gate writes no Trigger where no admin bound its Trigger role: it says which namespace and the command, and wires the hook once bound',
  async (t) => {
    await createHook(G, viaBroker(unbound, 'default', { uri: 'http://hook-g.example.com/' }));
    const { log, lines } = capturedLog();
    const r = new TriggerReconciler({ kc: gateKc, log, gateSubscriber: GATE_SINK, namespaces: [unbound] });
    t.deepEqual(counts(await r.reconcile()), counted({ failed: 2 }), 'neither the request Trigger nor the reply Trigger');
    const warned = lines.filter((l) => l.msg === mayNotWrite(unbound));
    t.is(warned.length, 2);
    t.regex(
      warned[0]?.msg ?? '',
      new RegExp(`kubectl create rolebinding knative-prestart-gate-triggers -n ${unbound} --clusterrole=knative-prestart-gate-triggers`),
    );
    const none = (await admin.listNamespacedCustomObject({ ...TRIGGERS, namespace: unbound })) as { items: unknown[] };
    t.is(none.items.length, 0, 'nothing was written');

    await allowGateTriggers(cluster.kubeConfig, unbound);
    t.deepEqual(counts(await r.reconcile()), counted({ created: 2 }));
    t.truthy(await mustGetTrigger(unbound, requestTrigger(G)));
  },
);

test.serial('`knative-prestart triggers --from-cluster` prints the Triggers the reconciler keeps', async (t) => {
  await createHook(F, viaBroker(ns2, 'bus', { uri: 'http://hook-f.example.com/' }));
  await reconciler().reconcile();
  const stdout = await new Promise<string>((resolve, reject) =>
    execFile(
      process.execPath,
      [
        '--import',
        'tsx',
        'cli/main.ts',
        'triggers',
        '--from-cluster',
        '--kubeconfig',
        cluster.kubeconfigPath,
        '--gate-uri',
        GATE_SINK.uri ?? '',
        '--owner-references',
      ],
      { cwd: root, timeout: 90_000, maxBuffer: 16 * 1024 * 1024 },
      (err, out, stderr) => (err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(out)),
    ),
  );
  const printed = (yaml.loadAll(stdout) as TriggerObject[]).filter((d) => d.metadata.namespace === ns2);
  t.deepEqual(
    printed.map((d) => d.metadata.name),
    ['prestart-gate-replies-bus', requestTrigger(F)],
  );
  for (const doc of printed) {
    const live = await mustGetTrigger(ns2, doc.metadata.name);
    t.deepEqual(live.spec, doc.spec);
    t.deepEqual(live.metadata.ownerReferences, doc.metadata.ownerReferences);
    for (const [k, v] of Object.entries(doc.metadata.labels)) t.is(live.metadata.labels[k], v);
  }
});

test.serial("the EventPolicy example of docs/brokers.md is what Knative's EventPolicy CRD stores", async (t) => {
  const [crd] = await knativeEventingCrdFiles('eventpolicy');
  await applyManifests(cluster.kubeConfig, crd ?? '');
  const text = readFileSync(fileURLToPath(new URL('../../../examples/eventpolicy.yaml', import.meta.url)), 'utf8');
  const policies = (yaml.loadAll(text) as { metadata: { name: string; namespace: string }; spec: unknown }[]).map((p) => ({
    ...p,
    metadata: { ...p.metadata, namespace: ns1 },
  }));
  t.is(policies.length, 2);
  const stored = (await applyManifests(cluster.kubeConfig, yaml.dump({ apiVersion: 'v1', kind: 'List', items: policies }))) as {
    spec: unknown;
  }[];
  // Unknown fields would have been pruned: what was stored is exactly what the example says.
  t.deepEqual(
    stored.map((s) => s.spec),
    policies.map((p) => p.spec),
  );
});
