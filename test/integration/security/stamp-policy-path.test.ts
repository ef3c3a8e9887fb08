// The apiserver's stamp (config/230-stamp-mutating-policy.yaml) under attack, with a real gate
// running against it: where the apiserver serves MutatingAdmissionPolicy v1 the gate registers
// no Revision webhook, so every hold label, hooks snapshot and cancel finalizer below is the
// policy's, and the gate holds and releases from them alone.
//   - A namespace editor (`edit` plus Knative's editor rules) forges every key the stamp owns on
//     its own Revisions, by create and by server-side apply, and marks them the way the policy
//     marks its own work (metadata.uid): a hooked Revision comes out stamped exactly as the
//     policy decides and held for the hook that matches; one no hook matches comes out with the
//     forged keys gone, unheld. The control is the same bodies admitted where the stamp does not
//     apply (an excluded namespace, dry run): there every forged key survives.
//   - A PrestartHook created between two creates is in the second one's stamp only: the policy
//     reads its parameters live, and the gate (never restarted) asks the new hook about the
//     second Revision only.
//   - A PrestartHook deleted while Revisions wait on it: the snapshot the gate took when it started
//     their runs still counts (docs/design.md, "Stamping"), so the hook's answer releases one and
//     its silence times the other out, held (the retry its reason offers asks the deleted hook
//     again); a Revision whose run starts after the delete fails closed ("PrestartHook X not
//     found", decide's startRun), asks no hook at all, and fails the same way when started over;
//     Revisions created after the delete are stamped without it.
// On an apiserver before 1.36 the policy cannot be installed and the gate's webhook stamps:
// each test then only checks that the gate registered it.

import { applyManifests, servesMutatingPolicies } from '@knative-prestart/devcluster/apply.ts';
import { type GateEnv, gateEnv, installedCluster } from '@knative-prestart/devcluster/gate/env.ts';
import { type HookServer, type ReceivedRequest, startHookServer } from '@knative-prestart/devcluster/gate/hook-server.ts';
import { asyncReply, syncReply } from '@knative-prestart/devcluster/gate/replies.ts';
import { isHeld, revisionBody as knativeRevisionBody } from '@knative-prestart/devcluster/gate/revisions.ts';
import { kubeRequest } from '@knative-prestart/devcluster/kube-request.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import { AdmissionregistrationV1Api, CustomObjectsApi, KubeConfig, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import test, { type ExecutionContext } from 'ava';
import { REVISIONS, type RevisionObject, RUNS, type RunObject } from '../../../api/resources.ts';
import { CANCEL_FINALIZER, HOLD_LABEL, HOOKS_ANNOTATION, INJECT_LABEL, REASON_ANNOTATION, RETRY_ANNOTATION } from '../../../api/types.ts';
import { webhookConfigurationName } from '../../../gate/webhooks/tls.ts';
import { REVISIONS_WEBHOOK } from '../../../gate/webhooks/webhook-configuration.ts';
import { bindKnativeEditor } from './_knative-editor.ts';

const STAMP_FILE = new URL('../../../config/230-stamp-mutating-policy.yaml', import.meta.url).pathname;
const TENANT = 'stamp-path-editor';
/** The value the policy writes into metadata.uid while it stamps (config/230). */
const MARK = 'knative-prestart-stamping';
/** A finalizer of the tenant's own: kept, and the gate's goes after it. */
const OWN_FINALIZER = 'example.com/keep';
/** Namespaces the stamp leaves alone (the policies' matchConstraints): the control's. */
const EXCLUDED = 'kube-system';

let env: GateEnv;
let tenant: KubeConfig;
let served = false;
let hooks: HookServer;
const drops: (() => Promise<void>)[] = [];

interface Seen {
  hook: string;
  revision: string;
  at: number;
  req: ReceivedRequest;
}
/** Every request any hook of this file received, in order. */
const seen: Seen[] = [];
/** Hooks that answer 202 and reply later (or never); the others answer succeeded at once. */
const silent = new Set<string>();
const asked = (hook: string, revision: string) => seen.filter((s) => s.hook === hook && s.revision === revision);

const hookName = (short: string) => `${env.instance}-${short}`;

interface Keys {
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  finalizers?: string[];
  uid?: string;
}

/** A Revision as Knative's configuration controller writes it, plus what the tenant adds. */
const revisionBody = (name: string, keys: Keys, namespace = env.namespace) => knativeRevisionBody(namespace, name, keys);

const revisionsPath = (namespace: string, version = 'v1') => `/apis/serving.knative.dev/${version}/namespaces/${namespace}/revisions`;

/** Server-side apply as the tenant: creates the Revision when it is not there. */
const tenantApply = (name: string, keys: Keys) =>
  kubeRequest(
    tenant,
    'PATCH',
    `${revisionsPath(env.namespace)}/${name}?fieldManager=tenant&force=true`,
    revisionBody(name, keys),
    'application/apply-patch+yaml',
  );

/**
 * The tenant creates a Revision (`create` or server-side `apply`); returns it as admitted, then
 * writes the digests Knative would resolve next (the gate asks no hook before).
 */
async function tenantCreates(how: 'create' | 'apply', name: string, keys: Keys): Promise<RevisionObject> {
  let admitted: RevisionObject;
  if (how === 'create') {
    admitted = (await tenant
      .makeApiClient(CustomObjectsApi)
      .createNamespacedCustomObject({ ...REVISIONS, namespace: env.namespace, body: revisionBody(name, keys) })) as RevisionObject;
  } else {
    const res = await tenantApply(name, keys);
    if (res.status !== 201) throw new Error(`server-side apply of ${name}: HTTP ${res.status}: ${JSON.stringify(res.body)}`);
    admitted = res.body as RevisionObject;
  }
  await env.custom.patchNamespacedCustomObjectStatus(
    { ...REVISIONS, namespace: env.namespace, name, body: { status: { containerStatuses: [{ name: 'user-container' }] } } },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );
  return admitted;
}

/** The keys the stamp owns, as a Revision carries them. */
function stampOf(rev: RevisionObject) {
  const labels = rev.metadata?.labels ?? {};
  const annotations = rev.metadata?.annotations ?? {};
  const pick = (from: Record<string, string>, keys: string[]) => Object.fromEntries(keys.filter((k) => k in from).map((k) => [k, from[k]]));
  return {
    labels: pick(labels, [HOLD_LABEL, INJECT_LABEL]),
    annotations: pick(annotations, [HOOKS_ANNOTATION, REASON_ANNOTATION]),
    finalizers: rev.metadata?.finalizers ?? [],
  };
}

/** What the policy writes on a Revision that `names` match (name order), the tenant's own finalizers first. */
const heldStamp = (names: string[], own: string[] = []) => ({
  labels: { [HOLD_LABEL]: 'true' },
  annotations: { [HOOKS_ANNOTATION]: JSON.stringify([...names].sort()) },
  finalizers: [...own, CANCEL_FINALIZER],
});
const unheldStamp = (own: string[] = []) => ({ labels: {}, annotations: {}, finalizers: own });

/** The hooks the policy would stamp on a Revision with `annotations` now (dry run as the admin, nothing stored). */
async function stampedNow(annotations: Record<string, string>): Promise<string[]> {
  const rev = await env.dryRunRevision(`probe-${Date.now()}-00001`, { annotations });
  return JSON.parse(rev.metadata?.annotations?.[HOOKS_ANNOTATION] ?? '[]') as string[];
}

/** Waits until the apiserver's policy sees the hooks as they are now: `hook` in the stamp or not. */
async function policySees(hook: string, present: boolean, annotations: Record<string, string>): Promise<number> {
  const start = Date.now();
  await waitFor(async () => (await stampedNow(annotations)).includes(hook) === present, {
    what: `the apiserver's stamp to ${present ? 'name' : 'drop'} PrestartHook ${hook}`,
  });
  return Date.now() - start;
}

async function runOf(name: string): Promise<RunObject> {
  return waitFor(() => env.getRun(name), { what: `PrestartRun ${name}` });
}

const runHooks = (run: RunObject) => run.spec.hooks.map((h) => h.name).sort();
const hookStatus = (run: RunObject, hook: string) => run.status?.hooks.find((h) => h.name === hook);

async function registeredWebhooks(): Promise<string[]> {
  const config = await env.admin
    .makeApiClient(AdmissionregistrationV1Api)
    .readMutatingWebhookConfiguration({ name: webhookConfigurationName(env.instance) });
  return (config.webhooks ?? []).map((w) => w.name ?? '');
}

/** An apiserver before 1.36: nothing of this file applies; the gate's webhook stamps instead. */
async function webhookStamps(t: ExecutionContext): Promise<boolean> {
  if (served) return false;
  await waitFor(async () => (await registeredWebhooks()).includes(REVISIONS_WEBHOOK), {
    what: 'the gate to register its Revision webhook (no MutatingAdmissionPolicy v1 here)',
  });
  t.pass('no MutatingAdmissionPolicy v1 here: the gate stamps');
  return true;
}

test.before(async () => {
  const cluster = await installedCluster();
  served = await servesMutatingPolicies(cluster.kubeConfig);
  // Other test files expect the stamp too: applied (server-side, idempotent) and left in place.
  if (served) await applyManifests(cluster.kubeConfig, STAMP_FILE);
  env = await gateEnv('stamppath');
  drops.push(await bindKnativeEditor(env.admin, env.namespace, TENANT, `${env.instance}-knative-edit`));
  tenant = new KubeConfig();
  tenant.loadFromFile(await env.cluster.mintUserKubeconfig(TENANT, ['system:authenticated']));
  hooks = await startHookServer(async (req) => {
    seen.push({ hook: req.data.hook.name, revision: req.data.revision.name, at: Date.now(), req });
    return silent.has(req.data.hook.name) ? { status: 202 } : syncReply(req, 'succeeded');
  });
  const delivery = { transport: 'http' as const, url: hooks.url };
  // Each test's hooks match an annotation of its own, in this namespace only (other files share the cluster).
  await env.createHook(hookName('scan'), { match: env.annotationMatch('scan'), delivery });
  await env.createHook(hookName('other'), { match: env.annotationMatch('other-feature'), delivery });
  // The tenant's bindings and the policies take effect a moment after they are written.
  await waitFor(
    () =>
      tenant
        .makeApiClient(CustomObjectsApi)
        .createNamespacedCustomObject({ ...REVISIONS, namespace: env.namespace, body: revisionBody('rbac-probe-00001', {}), dryRun: 'All' })
        .then(() => true),
    { what: `${TENANT} to create Revisions in ${env.namespace}` },
  );
  if (served) await policySees(hookName('scan'), true, { scan: 'yes' });
});

test.after.always(async () => {
  if (!env) return;
  // The tenant's own finalizer would keep its Revisions, and so the namespace, from going away.
  const list = (await env.custom.listNamespacedCustomObject({ ...REVISIONS, namespace: env.namespace }).catch(() => ({ items: [] }))) as {
    items: RevisionObject[];
  };
  for (const rev of list.items) {
    const finalizers = rev.metadata?.finalizers ?? [];
    if (!finalizers.includes(OWN_FINALIZER)) continue;
    await env.custom
      .patchNamespacedCustomObject(
        {
          ...REVISIONS,
          namespace: env.namespace,
          name: rev.metadata?.name ?? '',
          body: { metadata: { finalizers: finalizers.filter((f) => f !== OWN_FINALIZER) } },
        },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      )
      .catch(() => undefined);
  }
  // Held ones carry the gate's finalizer: deleted while the gate runs, it cancels and removes it.
  await env.custom.deleteCollectionNamespacedCustomObject({ ...REVISIONS, namespace: env.namespace }).catch(() => undefined);
  await waitFor(
    async () =>
      ((await env.custom.listNamespacedCustomObject({ ...REVISIONS, namespace: env.namespace })) as { items: unknown[] }).items.length ===
      0,
    { what: `the Revisions of ${env.namespace} gone`, timeoutMs: 20_000 },
  ).catch(() => undefined);
  for (const drop of drops) await drop();
  await env.stop();
  await hooks?.close();
});

test.serial('the apiserver stamps: the gate registered no Revision webhook, only its Pod and Deployment ones', async (t) => {
  if (await webhookStamps(t)) return;
  await waitFor(async () => !(await registeredWebhooks()).includes(REVISIONS_WEBHOOK), {
    what: 'the gate to leave Revisions to the apiserver',
  });
  t.false((await registeredWebhooks()).includes(REVISIONS_WEBHOOK));
});

test.serial(
  'a tenant’s forged stamp on a hooked Revision is replaced by the policy’s, and the gate holds and releases by it',
  async (t) => {
    if (await webhookStamps(t)) return;
    const scan = hookName('scan');
    const other = hookName('other');
    const attacks: Array<{ name: string; how: 'create' | 'apply'; keys: Keys; own?: string[] }> = [
      {
        name: 'skip-00001',
        how: 'create',
        // Unheld, no hooks, an approval of its own, the pods' injection, the gate's finalizer first.
        keys: {
          labels: { [HOLD_LABEL]: 'false', [INJECT_LABEL]: 'true' },
          annotations: { scan: 'yes', [HOOKS_ANNOTATION]: '[]', [REASON_ANNOTATION]: 'approved by security' },
          finalizers: [CANCEL_FINALIZER, OWN_FINALIZER],
        },
        own: [OWN_FINALIZER],
      },
      {
        name: 'swap-00001',
        how: 'create',
        // Held already, for a hook that does not apply and one that does not exist.
        keys: { labels: { [HOLD_LABEL]: 'true' }, annotations: { scan: 'yes', [HOOKS_ANNOTATION]: `["${other}","imaginary"]` } },
      },
      {
        name: 'add-00001',
        how: 'create',
        // The right hook plus one that does not apply.
        keys: { annotations: { scan: 'yes', [HOOKS_ANNOTATION]: `["${other}","${scan}"]` } },
      },
      {
        name: 'garbled-00001',
        how: 'create',
        // A hold value the gate does not know and a snapshot that is no JSON at all.
        keys: { labels: { [HOLD_LABEL]: 'no' }, annotations: { scan: 'yes', [HOOKS_ANNOTATION]: 'not json' } },
      },
      {
        name: 'applied-00001',
        how: 'apply',
        keys: {
          labels: { [HOLD_LABEL]: 'false', [INJECT_LABEL]: 'true' },
          annotations: { scan: 'yes', [HOOKS_ANNOTATION]: '[]', [REASON_ANNOTATION]: 'approved by security' },
          finalizers: [CANCEL_FINALIZER],
        },
      },
      {
        name: 'marked-00001',
        how: 'create',
        // The policy's own "already stripped" mark: the apiserver wipes metadata.uid before admission.
        keys: {
          uid: MARK,
          labels: { [HOLD_LABEL]: 'false', [INJECT_LABEL]: 'true' },
          annotations: { scan: 'yes', [HOOKS_ANNOTATION]: `["${other}"]`, [REASON_ANNOTATION]: 'approved' },
          finalizers: [CANCEL_FINALIZER],
        },
      },
    ];
    // Control: the legitimate path, no forged key at all.
    const control = await tenantCreates('create', 'plain-00001', { annotations: { scan: 'yes' } });
    t.deepEqual(stampOf(control), heldStamp([scan]), 'control: a hooked Revision is stamped held');

    for (const a of attacks) {
      const admitted = await tenantCreates(a.how, a.name, a.keys);
      t.deepEqual(stampOf(admitted), heldStamp([scan], a.own), `${a.name} (${a.how}): the policy's stamp, not the tenant's`);
      t.true(isHeld(admitted), `${a.name} admitted held`);
      t.not(admitted.metadata?.uid, MARK, `${a.name}: the uid is the apiserver's`);
    }

    // The gate works from that stamp: asks the hook the snapshot names, then releases.
    for (const name of ['plain-00001', ...attacks.map((a) => a.name)]) {
      const released = await env.waitReleased(name);
      const run = await env.waitForRun(name, 'Released', (r) => r.status?.phase === 'Released');
      t.deepEqual(runHooks(run), [scan], `${name}: the run snapshots the stamped hook only`);
      t.true(asked(scan, name).length > 0, `${name}: the gate asked ${scan}`);
      t.false(released.metadata?.finalizers?.includes(CANCEL_FINALIZER) ?? false, `${name}: the gate's finalizer went with the hold`);
      t.is(released.metadata?.annotations?.[REASON_ANNOTATION], undefined, `${name}: no reason left`);
      t.is(released.metadata?.labels?.[INJECT_LABEL], undefined, `${name}: nothing to inject, no label`);
    }
    t.deepEqual(
      seen.filter((s) => s.hook === other),
      [],
      `${other}, forged into snapshots, was never asked`,
    );

    // The control that makes the above mean something: where the stamp does not apply, every forged key survives.
    for (const a of attacks) {
      const { uid: _ignored, ...keys } = a.keys;
      const kept = (await env.custom.createNamespacedCustomObject({
        ...REVISIONS,
        namespace: EXCLUDED,
        body: revisionBody(a.name, keys, EXCLUDED),
        dryRun: 'All',
      })) as RevisionObject;
      t.deepEqual(
        stampOf(kept),
        {
          labels: Object.fromEntries(Object.entries(keys.labels ?? {}).filter(([k]) => k === HOLD_LABEL || k === INJECT_LABEL)),
          annotations: Object.fromEntries(
            Object.entries(keys.annotations ?? {}).filter(([k]) => k === HOOKS_ANNOTATION || k === REASON_ANNOTATION),
          ),
          finalizers: keys.finalizers ?? [],
        },
        `control: ${a.name} in ${EXCLUDED} keeps what the tenant wrote`,
      );
    }
  },
);

test.serial('no hook matches: the forged keys are stripped and the Revision is not held', async (t) => {
  if (await webhookStamps(t)) return;
  const scan = hookName('scan');
  const attacks: Array<{ name: string; how: 'create' | 'apply'; keys: Keys; own?: string[] }> = [
    {
      name: 'fake-hold-00001',
      how: 'create',
      // A hold for a real hook that does not apply to it: left, the gate would fail it closed forever.
      keys: {
        labels: { [HOLD_LABEL]: 'true', [INJECT_LABEL]: 'true' },
        annotations: { [HOOKS_ANNOTATION]: `["${scan}"]`, [REASON_ANNOTATION]: 'held by security' },
        finalizers: [OWN_FINALIZER, CANCEL_FINALIZER],
      },
      own: [OWN_FINALIZER],
    },
    {
      name: 'fake-apply-00001',
      how: 'apply',
      keys: {
        labels: { [HOLD_LABEL]: 'true' },
        annotations: { [HOOKS_ANNOTATION]: '["imaginary"]', [REASON_ANNOTATION]: 'x' },
        finalizers: [CANCEL_FINALIZER],
      },
    },
    { name: 'fake-label-00001', how: 'create', keys: { labels: { [HOLD_LABEL]: 'true' } } },
    {
      name: 'fake-marked-00001',
      how: 'create',
      keys: { uid: MARK, labels: { [HOLD_LABEL]: 'true', [INJECT_LABEL]: 'true' }, annotations: { [HOOKS_ANNOTATION]: '[]' } },
    },
  ];
  // Control: a Revision no hook matches, created plainly, is neither stamped nor held.
  const control = await tenantCreates('create', 'unhooked-00001', { annotations: { feature: 'none' } });
  t.deepEqual(stampOf(control), unheldStamp());
  t.deepEqual(await env.createDeploymentLikeKnative(control), { created: true }, 'control: its Deployment is admitted');

  for (const a of attacks) {
    const admitted = await tenantCreates(a.how, a.name, a.keys);
    t.deepEqual(stampOf(admitted), unheldStamp(a.own), `${a.name} (${a.how}): every forged key stripped`);
    t.deepEqual(await env.createDeploymentLikeKnative(admitted), { created: true }, `${a.name}: not held, its Deployment is admitted`);
  }
  // By the time a hooked Revision created after them is released, none of them has a run: the gate never took them for held.
  await tenantCreates('create', 'after-unhooked-00001', { annotations: { scan: 'yes' } });
  await env.waitReleased('after-unhooked-00001');
  for (const a of attacks) t.is(await env.getRun(a.name), undefined, `${a.name}: no PrestartRun`);
  t.deepEqual(
    seen.filter((s) => attacks.some((a) => a.name === s.revision)),
    [],
    'no hook was asked about them',
  );
});

test.serial('the ways around: metadata.uid by apply, and Revisions under another apiVersion', async (t) => {
  if (await webhookStamps(t)) return;
  // Server-side apply may not carry the mark either: a uid names an object that must already exist.
  const marked = await tenantApply('marked-apply-00001', {
    uid: MARK,
    labels: { [HOLD_LABEL]: 'false' },
    annotations: { scan: 'yes', [HOOKS_ANNOTATION]: '[]' },
  });
  t.is(marked.status, 409, JSON.stringify(marked.body));
  t.regex(JSON.stringify(marked.body), /uid mismatch/);
  t.is((await kubeRequest(env.admin, 'GET', `${revisionsPath(env.namespace)}/marked-apply-00001`)).status, 404, 'nothing created');
  // The policies match serving.knative.dev/v1 (matchPolicy Equivalent would cover other versions
  // of the same resource): Knative serves Revisions as v1 only (its group serves v1beta1 for
  // DomainMappings alone), so there is no other door.
  const crd = (await kubeRequest(env.admin, 'GET', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions/revisions.serving.knative.dev'))
    .body as { spec: { versions: { name: string; served: boolean }[] } };
  t.deepEqual(
    crd.spec.versions.filter((v) => v.served).map((v) => v.name),
    ['v1'],
    'Knative Serving serves Revisions as v1 only; another version needs an attack here',
  );
  const beta = await kubeRequest(tenant, 'POST', revisionsPath(env.namespace, 'v1beta1'), {
    ...revisionBody('beta-00001', { labels: { [HOLD_LABEL]: 'false' }, annotations: { scan: 'yes' } }),
    apiVersion: 'serving.knative.dev/v1beta1',
  });
  t.is(beta.status, 404);
});

test.serial(
  'a PrestartHook created between two creates: only the second is stamped with it and asked about it, no gate restart',
  async (t) => {
    if (await webhookStamps(t)) return;
    const gate = env.gate;
    const base = hookName('base');
    const late = hookName('late');
    const delivery = { transport: 'http' as const, url: hooks.url };
    await env.createHook(base, { match: env.annotationMatch('live'), delivery });
    await policySees(base, true, { live: 'yes' });

    const first = await tenantCreates('create', 'live-one-00001', { annotations: { live: 'yes' } });
    t.deepEqual(stampOf(first), heldStamp([base]));

    const created = Date.now();
    await env.createHook(late, { match: env.annotationMatch('live'), delivery });
    const lag = await policySees(late, true, { live: 'yes' });
    t.log(`the policy stamped PrestartHook ${late} ${lag} ms after its create returned (${Date.now() - created} ms in all)`);

    const second = await tenantCreates('create', 'live-two-00001', { annotations: { live: 'yes' } });
    t.deepEqual(stampOf(second), heldStamp([base, late]), 'the same template, now stamped with the new hook too');

    await env.waitReleased('live-one-00001');
    await env.waitReleased('live-two-00001');
    t.deepEqual(runHooks(await runOf('live-one-00001')), [base]);
    t.deepEqual(runHooks(await runOf('live-two-00001')), [base, late].sort());
    t.true(asked(base, 'live-one-00001').length > 0 && asked(base, 'live-two-00001').length > 0, `${base} asked about both`);
    t.true(asked(late, 'live-two-00001').length > 0, `${late} asked about the second`);
    t.deepEqual(
      seen.filter((s) => s.hook === late).map((s) => s.revision),
      asked(late, 'live-two-00001').map((s) => s.revision),
      `${late} asked about nothing else (the first was released without it)`,
    );
    t.is(env.gate, gate, 'the same gate throughout');
  },
);

test.serial(
  'a PrestartHook deleted while Revisions wait on it: the run’s snapshot still counts; new Revisions are stamped without it',
  async (t) => {
    if (await webhookStamps(t)) return;
    const a = hookName('pair-a');
    const b = hookName('pair-b');
    const delivery = { transport: 'http' as const, url: hooks.url };
    silent.add(b);
    await env.createHook(a, { match: env.annotationMatch('pair'), delivery });
    await env.createHook(b, { match: env.annotationMatch('pair'), delivery, timeout: '15s', resendInterval: '2s' });
    await policySees(a, true, { pair: 'yes' });
    await policySees(b, true, { pair: 'yes' });

    for (const name of ['pair-answered-00001', 'pair-silent-00001']) {
      const rev = await tenantCreates('create', name, { annotations: { pair: 'yes' } });
      t.deepEqual(stampOf(rev), heldStamp([a, b]), name);
      await env.waitForRun(
        name,
        `${a} Succeeded, ${b} Requested`,
        (r) => hookStatus(r, a)?.phase === 'Succeeded' && hookStatus(r, b)?.phase === 'Requested',
      );
    }

    const deletedAt = Date.now();
    await env.deleteHook(b);
    await policySees(b, false, { pair: 'yes' });
    const after = await tenantCreates('create', 'pair-after-00001', { annotations: { pair: 'yes' } });
    t.deepEqual(stampOf(after), heldStamp([a]), 'created after the delete: stamped without it');

    // The gate still acts on the deleted hook's snapshot: it resends the request while it waits.
    for (const name of ['pair-answered-00001', 'pair-silent-00001']) {
      await waitFor(() => asked(b, name).some((s) => s.at > deletedAt), { what: `a resend to deleted ${b} about ${name}` });
      t.true(isHeld(await env.getRevision(name)), `${name} still held`);
      t.is(hookStatus(await runOf(name), b)?.phase, 'Requested', `${name}: ${b} still Requested`);
    }

    // Its answer still counts: the Revision is released with both hooks passed.
    const request = asked(b, 'pair-answered-00001').at(-1) as Seen;
    t.is((await asyncReply(request.req, 'succeeded')).status, 202, `a reply for deleted ${b} is taken`);
    await env.waitReleased('pair-answered-00001');
    const answered = await env.waitForRun('pair-answered-00001', 'Released', (r) => r.status?.phase === 'Released');
    t.is(answered.status?.summary, '2/2');

    // Its silence times out as the snapshot says (15s): held, with the reason and a Warning.
    const silentRun = await env.waitForRun(
      'pair-silent-00001',
      `${b} TimedOut`,
      (r) => r.status?.phase === 'Failed' && hookStatus(r, b)?.phase === 'TimedOut',
    );
    t.regex(hookStatus(silentRun, b)?.message ?? '', /no reply within 15s/);
    const held = await waitFor(
      async () => {
        const rev = await env.getRevision('pair-silent-00001');
        return rev.metadata?.annotations?.[REASON_ANNOTATION] ? rev : undefined;
      },
      { what: 'the hold reason on pair-silent-00001' },
    );
    t.true(isHeld(held));
    t.regex(held.metadata?.annotations?.[REASON_ANNOTATION] ?? '', new RegExp(`hook ${b} timed out: no reply within 15s`));
    const denied = await env.createDeploymentLikeKnative(held);
    t.like(denied, { created: false, status: 403 }, 'its Deployment is denied');
    const events = await waitFor(
      async () => (await env.revisionEvents('pair-silent-00001')).filter((e) => e.type === 'Warning' && e.message?.includes(b)),
      { what: 'a Warning event on pair-silent-00001' },
    );
    t.is(events[0]?.reason, 'HookTimedOut');

    // The retry the reason offers asks the deleted hook again, from the snapshot; its answer releases.
    const token = /prestart\.dev\/retry=(\S+)/.exec(held.metadata?.annotations?.[REASON_ANNOTATION] ?? '')?.[1];
    t.truthy(token, 'the reason says how to retry');
    await env.annotateRun('pair-silent-00001', { [RETRY_ANNOTATION]: token ?? '' });
    const retried = await waitFor(() => asked(b, 'pair-silent-00001').find((s) => s.req.data.attempt === 2), {
      what: `attempt 2 sent to deleted ${b}`,
    });
    t.is((await asyncReply(retried.req, 'succeeded')).status, 202);
    await env.waitReleased('pair-silent-00001');

    // The Revision created after the delete asked A alone and is released.
    await env.waitReleased('pair-after-00001');
    t.deepEqual(runHooks(await runOf('pair-after-00001')), [a]);
    t.deepEqual(asked(b, 'pair-after-00001'), []);
  },
);

test.serial('a hook deleted before the gate starts the run: the Revision fails closed, held, and asks no hook', async (t) => {
  if (await webhookStamps(t)) return;
  const c = hookName('gone-c');
  const d = hookName('gone-d');
  const delivery = { transport: 'http' as const, url: hooks.url };
  await env.createHook(c, { match: env.annotationMatch('gone'), delivery });
  await env.createHook(d, { match: env.annotationMatch('gone'), delivery, order: 1 });
  await policySees(c, true, { gone: 'yes' });
  await policySees(d, true, { gone: 'yes' });

  // No gate runs: the apiserver alone admits the Revision, held for both.
  const stopping = Date.now();
  await env.gate.stop();
  t.log(`gate stopped in ${Date.now() - stopping} ms`);
  const missing = await tenantCreates('create', 'gone-missing-00001', { annotations: { gone: 'yes' } });
  t.deepEqual(stampOf(missing), heldStamp([c, d]), 'stamped and held with no gate running');
  t.like(await env.createDeploymentLikeKnative(missing), { created: false, status: 403 }, 'its Deployment is denied meanwhile');
  await env.deleteHook(d);
  await policySees(d, false, { gone: 'yes' });
  const after = await tenantCreates('create', 'gone-after-00001', { annotations: { gone: 'yes' } });
  t.deepEqual(stampOf(after), heldStamp([c]), 'created after the delete: stamped without it');

  const starting = Date.now();
  await env.startGate();
  t.log(`gate leading again in ${Date.now() - starting} ms`);
  const run = await env.waitForRun('gone-missing-00001', 'Failed', (r) => r.status?.phase === 'Failed');
  t.log(`run failed closed ${Date.now() - starting} ms after the gate started`);
  t.deepEqual(runHooks(run), [c], 'only the hook that still exists is snapshotted');
  t.like(hookStatus(run, d), { phase: 'Failed', message: `PrestartHook ${d} not found` });
  t.is(hookStatus(run, c)?.phase, 'Pending', `${c} is never asked: a blocking hook stops the run`);
  const held = await waitFor(
    async () => {
      const rev = await env.getRevision('gone-missing-00001');
      return rev.metadata?.annotations?.[REASON_ANNOTATION] ? rev : undefined;
    },
    { what: 'the hold reason on gone-missing-00001' },
  );
  t.true(isHeld(held), 'still held');
  t.regex(
    held.metadata?.annotations?.[REASON_ANNOTATION] ?? '',
    new RegExp(
      `hook ${d} failed: PrestartHook ${d} not found; start over: kubectl delete prestartrun gone-missing-00001 -n ${env.namespace}`,
    ),
  );
  const events = await waitFor(
    async () => (await env.revisionEvents('gone-missing-00001')).filter((e) => e.type === 'Warning' && e.reason === 'HookFailed'),
    { what: 'a HookFailed event on gone-missing-00001' },
  );
  t.regex(events[0]?.message ?? '', new RegExp(`PrestartHook ${d} not found`));

  // Control: the Revision stamped after the delete runs its one hook and is released.
  await env.waitReleased('gone-after-00001');
  t.true(asked(c, 'gone-after-00001').length > 0);
  t.like(await env.createDeploymentLikeKnative(await env.getRevision('gone-after-00001')), { created: true });
  t.deepEqual(asked(c, 'gone-missing-00001'), [], `${c} was never asked about the Revision that failed closed`);
  t.deepEqual(asked(d, 'gone-missing-00001'), []);
  t.true(isHeld(await env.getRevision('gone-missing-00001')), 'and it stays held');

  // Starting over, as the reason says, fails closed again: the snapshot still names the deleted hook.
  await env.custom.deleteNamespacedCustomObject({ ...RUNS, namespace: env.namespace, name: 'gone-missing-00001' });
  const again = await env.waitForRun(
    'gone-missing-00001',
    'a new run, Failed',
    (r) => r.metadata?.uid !== run.metadata?.uid && r.status?.phase === 'Failed',
  );
  t.like(hookStatus(again, d), { phase: 'Failed', message: `PrestartHook ${d} not found` });
  t.true(isHeld(await env.getRevision('gone-missing-00001')), 'still held after starting over');
  t.deepEqual(asked(c, 'gone-missing-00001'), [], `${c} still never asked`);
});
