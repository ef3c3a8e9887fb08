// What a gate outage (every replica down) does, measured on one real control plane before and after
// this release (docs/design.md §6 quotes the figures this prints):
//   (a) a Revision created in a namespace no PrestartHook can match;
//   (b) a Revision created in a namespace a hook matches;
//   (c) a released Revision whose hooks contributed bindings scales from zero (its ReplicaSet
//       creates a pod; a replacement after a node drain is the same request).
// Before: the previous release (PREVIOUS_RELEASE, _previous.ts) installed with kubectl and its gate
// run from its own source; all replicas stopped. After: this release applied over it (the upgrade an
// admin does), this tree's gate run and stopped the same way.
//
// The previous release fails closed everywhere: (a), (b) and (c) are refused. This release:
// (a) created as usual (the Revision webhook fails open and the stamp policy finds no hook);
// (b) refused by the stamp policy, with a message that says why, so never admitted unheld;
// (c) the pod is created with its bindings (they are in the pod template, projected when Knative
// made the Deployment). What is left: a Deployment made under the previous release keeps asking the
// Pod webhook, so its pods still wait for the gate (shown last).
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { applyManifests, servesMutatingPolicies } from '@knative-prestart/devcluster/apply.ts';
import { type HookServer, startHookServer } from '@knative-prestart/devcluster/gate/hook-server.ts';
import { type HookMethods, hookMethods } from '@knative-prestart/devcluster/gate/hooks.ts';
import type { GateProcess } from '@knative-prestart/devcluster/gate/process.ts';
import { syncReply } from '@knative-prestart/devcluster/gate/replies.ts';
import { isHeld, type RevisionMethods, type RevisionOptions, revisionMethods } from '@knative-prestart/devcluster/gate/revisions.ts';
import { knativeServingCrdDir } from '@knative-prestart/devcluster/knative.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import { AdmissionregistrationV1Api, AppsV1Api, CoreV1Api, PatchStrategy, setHeaderOptions, type V1Pod } from '@kubernetes/client-node';
import test, { type ExecutionContext } from 'ava';
import { gateKubeconfig, replicaPorts, startReplica } from './_gates.ts';
import { type PreviousRelease, previousRelease } from './_previous.ts';
import { freshCluster, type Installed } from './_support.ts';

const IMAGE = `registry.example.com/knative-prestart@sha256:${'cd'.repeat(32)}`;
const SHOP = 'shop';
const QUIET = 'quiet';
const HOOK = 'db';
const contributions = [
  { name: 'db-env', secretName: 'app-db', as: 'env' as const, env: { DATABASE_URL: 'url' } },
  { name: 'db', secretName: 'app-db', as: 'volume' as const },
];

let installed: Installed;
let previous: PreviousRelease;
let kubeconfigPath: string;
let hook: HookServer;
let hooks: HookMethods;
let shop: RevisionMethods;
let quiet: RevisionMethods;
let apps: AppsV1Api;
let core: CoreV1Api;
const gates: GateProcess[] = [];

interface Outcome {
  case: string;
  result: 'created' | 'refused';
  ms: number;
  message?: string;
}
type Phase = 'before' | 'after' | 'stamped';
/** By case: what the previous release, this one, and this one with the apiserver's stamp did. */
const matrix = new Map<string, Partial<Record<Phase, Outcome>>>();

test.before(async () => {
  previous = await previousRelease();
  installed = await freshCluster(IMAGE);
  const admin = installed.cluster.kubeConfig;
  await applyManifests(admin, await knativeServingCrdDir());
  await installed.kubectl('apply', '--server-side', ...previous.configFiles.flatMap((f) => ['-f', f]));
  for (const ns of [SHOP, QUIET]) await installed.kubectl('create', 'namespace', ns);
  await installed.kubectl('create', 'secret', 'generic', 'app-db', '-n', SHOP, '--from-literal=url=postgres://app');
  kubeconfigPath = await gateKubeconfig(installed.cluster);
  hooks = hookMethods(admin, SHOP);
  shop = revisionMethods(admin, SHOP);
  quiet = revisionMethods(admin, QUIET);
  apps = admin.makeApiClient(AppsV1Api);
  core = admin.makeApiClient(CoreV1Api);
  // Every Revision of the namespace shop is held for `db`, which answers at once, contributing the Secret.
  hook = await startHookServer(async (req) => syncReply(req, 'succeeded', { contributions }));
});

test.after.always(async () => {
  await Promise.all(gates.map((g) => g.stop()));
  await hook?.close();
  await installed?.stop();
  const cell = (o?: Outcome) => (o ? `${o.result} (${o.ms} ms)` : '—');
  const rows = [...matrix].map(([name, m]) => `| ${name} | ${cell(m.before)} | ${cell(m.after)} | ${cell(m.stamped)} |`);
  if (rows.length > 0) {
    process.stderr.write(
      `\noutage matrix (all gate replicas down):\n| case | before | after | after, apiserver stamp |\n| --- | --- | --- | --- |\n${rows.join('\n')}\n`,
    );
  }
});

/** A gate of `cli` (the previous release's, or this tree's), by URL, until stopped. */
async function runGate(cli?: string): Promise<GateProcess> {
  const gate = await startReplica({
    kubeconfigPath,
    ports: await replicaPorts(),
    leaseSeconds: 3,
    // Only this tree's gate knows the flag; a second lets the path tests follow an admin quickly.
    ...(cli ? { cli } : { stampCheckSeconds: 1 }),
  });
  gates.push(gate);
  return gate;
}

/** Held, hook answered with bindings, released: then its Deployment, made as Knative makes it, with one Ready pod. */
async function releasedWithBindings(name: string): Promise<V1Pod> {
  const created = await shop.createRevision(name);
  if (!isHeld(created)) throw new Error(`${name} was not held`);
  const released = await shop.waitReleased(name);
  const deployment = await shop.createDeploymentLikeKnative(released);
  if (!deployment.created) throw new Error(`${name}'s Deployment was refused: ${deployment.message}`);
  return waitFor(
    async () => (await podsOf(name)).find((p) => p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')),
    {
      timeoutMs: 60_000,
      what: `a Ready pod of ${name}`,
    },
  );
}

async function podsOf(revision: string): Promise<V1Pod[]> {
  return (await core.listNamespacedPod({ namespace: SHOP, labelSelector: `serving.knative.dev/revision=${revision}` })).items;
}

function hasBindings(pod: V1Pod | undefined): boolean {
  const app = pod?.spec?.containers.find((c) => c.name === 'user-container');
  return Boolean(app?.env?.some((e) => e.name === 'DATABASE_URL') && pod?.spec?.volumes?.some((v) => v.secret?.secretName === 'app-db'));
}

async function createRevision(label: string, methods: RevisionMethods, name: string, opts: RevisionOptions = {}): Promise<Outcome> {
  const start = Date.now();
  try {
    const rev = await methods.createRevision(name, opts);
    return { case: label, result: 'created', ms: Date.now() - start, message: isHeld(rev) ? 'held' : 'not held' };
  } catch (err) {
    const body = (err as { body?: string }).body;
    const message = (typeof body === 'string' ? (JSON.parse(body) as { message?: string }).message : undefined) ?? String(err);
    return { case: label, result: 'refused', ms: Date.now() - start, message };
  }
}

/** FailedCreate events of the Deployment's ReplicaSets, summed: a refused pod create counts one more. */
async function failedCreates(deployment: string): Promise<{ count: number; message: string }> {
  const events = (await core.listNamespacedEvent({ namespace: SHOP, fieldSelector: 'reason=FailedCreate' })).items.filter(
    (e) => e.involvedObject.kind === 'ReplicaSet' && e.involvedObject.name?.startsWith(`${deployment}-`),
  );
  const latest = events.sort((a, b) => String(a.lastTimestamp).localeCompare(String(b.lastTimestamp))).at(-1);
  return { count: events.reduce((n, e) => n + (e.count ?? 1), 0), message: latest?.message ?? '' };
}

/** Scales the Revision's Deployment to zero and back to one, and waits for the pod or for its refusal. */
async function scaleFromZero(label: string, revision: string): Promise<Outcome & { pod?: V1Pod }> {
  const name = `${revision}-deployment`;
  // As Knative's autoscaler scales it: spec.replicas only.
  const scale = (replicas: number) =>
    apps.patchNamespacedDeploymentScale(
      { name, namespace: SHOP, body: { spec: { replicas } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
  await scale(0);
  await waitFor(async () => (await podsOf(revision)).length === 0, { timeoutMs: 60_000, what: `${revision}'s pods to be gone` });
  const refusedBefore = (await failedCreates(name)).count;
  const start = Date.now();
  await scale(1);
  return waitFor(
    async () => {
      const pod = (await podsOf(revision))[0];
      if (pod) return { case: label, result: 'created' as const, ms: Date.now() - start, pod };
      const refused = await failedCreates(name);
      return refused.count > refusedBefore
        ? { case: label, result: 'refused' as const, ms: Date.now() - start, message: refused.message }
        : undefined;
    },
    { timeoutMs: 60_000, what: `a pod of ${revision}, or its refusal` },
  );
}

function record(t: ExecutionContext, phase: Phase, o: Outcome): void {
  matrix.set(o.case, { ...matrix.get(o.case), [phase]: o });
  t.log(`${phase}: ${o.case}: ${o.result} in ${o.ms} ms${o.message ? ` (${o.message.slice(0, 300)})` : ''}`);
}

test.serial(
  'the previous release, all replicas down: every Revision and the pods of released Revisions with bindings are refused',
  async (t) => {
    const gate = await runGate(previous.cli);
    await hooks.createHook(HOOK, { contributions: { allowed: ['env', 'volume'] }, delivery: { transport: 'http', url: hook.url } });
    await hooks.waitUntilStamped(HOOK, {});
    const pod = await releasedWithBindings('app-00001');
    t.true(hasBindings(pod), 'with the gate up, the Pod webhook gave the pod its bindings');
    await gate.stop();

    const a = await createRevision('(a) Revision, no hook can match', quiet, 'q-00001');
    const b = await createRevision('(b) Revision, a hook matches', shop, 'app-00002');
    const c = await scaleFromZero('(c) released with bindings, scale from zero', 'app-00001');
    for (const o of [a, b, c]) record(t, 'before', o);
    t.like(a, { result: 'refused' });
    t.regex(a.message ?? '', /failed calling webhook "revisions\.prestart\.dev"/);
    t.like(b, { result: 'refused' });
    t.like(c, { result: 'refused' });
    t.regex(c.message ?? '', /failed calling webhook "pods\.prestart\.dev"/);
  },
);

test.serial('this release, all replicas down: only what a hook holds waits; released Services scale with their bindings', async (t) => {
  // The upgrade: this release applied over the previous one. The gate writes its webhook
  // configuration itself (here by URL, which the release's Service form cannot merge with), so the
  // release's copy of it is left out.
  const release = installed.objects['knative-prestart.yaml']?.filter((o) => o.kind !== 'MutatingWebhookConfiguration') ?? [];
  const file = join(installed.releaseDir, 'upgrade.json');
  await writeFile(file, JSON.stringify({ apiVersion: 'v1', kind: 'List', items: release }));
  await installed.kubectl('apply', '--server-side', '--force-conflicts', '-f', file);
  const gate = await runGate();
  await hooks.waitUntilStamped(HOOK, {});
  // The pod refused during the outage: its ReplicaSet retried, and the gate, back, gave it its bindings.
  const legacyPod = await waitFor(async () => (await podsOf('app-00001'))[0], {
    timeoutMs: 90_000,
    what: "app-00001's pod once the gate is back",
  });
  t.true(hasBindings(legacyPod), 'a Deployment of the previous release: its pods get their bindings from the Pod webhook');
  const pod = await releasedWithBindings('app-00003');
  t.true(hasBindings(pod));
  const template = (await apps.readNamespacedDeployment({ name: 'app-00003-deployment', namespace: SHOP })).spec?.template;
  t.truthy(template?.metadata?.annotations?.['prestart.dev/injected'], 'the bindings are in the pod template');
  t.true(
    template?.spec?.containers.find((c) => c.name === 'user-container')?.env?.some((e) => e.name === 'DATABASE_URL'),
    'the template carries the env binding',
  );
  t.falsy(template?.spec?.containers.find((c) => c.name === 'queue-proxy')?.env?.some((e) => e.name === 'DATABASE_URL'));
  await gate.stop();

  const a = await createRevision('(a) Revision, no hook can match', quiet, 'q-00002');
  const b = await createRevision('(b) Revision, a hook matches', shop, 'app-00004');
  const c = await scaleFromZero('(c) released with bindings, scale from zero', 'app-00003');
  for (const o of [a, b, c]) record(t, 'after', o);
  t.like(a, { result: 'created', message: 'not held' });
  t.like(b, { result: 'refused' });
  t.regex(
    b.message ?? '',
    /ValidatingAdmissionPolicy 'prestart-stamp-revisions'.*Revision app-00004 matches PrestartHook db but was not held for it/,
  );
  t.like(c, { result: 'created' });
  t.true(hasBindings(c.pod), 'the pod has its bindings, though no gate answered');

  const legacy = await scaleFromZero('(c′) a Deployment made under the previous release, scale from zero', 'app-00001');
  record(t, 'after', legacy);
  t.like(legacy, { result: 'refused' }, 'its template has no bindings: its pods still wait for the Pod webhook');
});

test.serial('this release, all replicas down: a snapshot written on the template neither adds nor skips a hook', async (t) => {
  // The gate is down, so nothing rewrites what the template says; the stamp policy checks it.
  const added = await createRevision('adds hook db where it does not apply', quiet, 'q-00003', {
    labels: { 'prestart.dev/hold': 'true' },
    annotations: { 'prestart.dev/hooks': JSON.stringify([HOOK]) },
  });
  t.like(added, { result: 'refused' });
  t.regex(added.message ?? '', /names PrestartHook db in its prestart\.dev\/hooks annotation, but that hook does not apply to it/);
  const skipped = await createRevision('lists hook db but is not held', shop, 'app-00005', {
    annotations: { 'prestart.dev/hooks': JSON.stringify([HOOK]) },
  });
  t.like(skipped, { result: 'refused' });
  t.regex(skipped.message ?? '', /Revision app-00005 matches PrestartHook db but was not held for it/);
});

/** The Revision webhook's names in the gate's configuration: present only where the gate stamps. */
async function registeredWebhooks(): Promise<string[]> {
  const config = await installed.cluster.kubeConfig
    .makeApiClient(AdmissionregistrationV1Api)
    .readMutatingWebhookConfiguration({ name: 'knative-prestart' });
  return (config.webhooks ?? []).map((w) => w.name);
}

async function admittedHeldByDryRun(name: string): Promise<void> {
  await waitFor(() => shop.dryRunRevision(name).then(isHeld, () => false), {
    timeoutMs: 30_000,
    what: `a dry-run create of ${name} to be admitted held`,
  });
}

const stampFile = () => join(installed.releaseDir, 'knative-prestart-apiserver-stamp.yaml');

test.serial(
  'this release with the apiserver stamp, all replicas down: nothing is refused, a hooked Revision is admitted held',
  async (t) => {
    if (!(await servesMutatingPolicies(installed.cluster.kubeConfig))) {
      // An apiserver before 1.36: the stamp file cannot be applied, and the gate keeps its webhook.
      const applied = await installed.kubectl('apply', '--server-side', '-f', stampFile()).then(
        () => 'applied',
        (err: { stderr?: string }) => err.stderr ?? String(err),
      );
      t.regex(applied, /no matches for kind "MutatingAdmissionPolicy"/);
      return;
    }
    await installed.kubectl('apply', '--server-side', '-f', stampFile());
    const gate = await runGate();
    await waitFor(async () => !(await registeredWebhooks()).includes('revisions.prestart.dev'), {
      timeoutMs: 30_000,
      what: 'the gate to drop its Revision webhook where the apiserver stamps',
    });
    t.deepEqual(await registeredWebhooks(), ['pods.prestart.dev', 'deployments.prestart.dev']);
    await gate.stop();

    const a = await createRevision('(a) Revision, no hook can match', quiet, 'q-00004');
    const b = await createRevision('(b) Revision, a hook matches', shop, 'app-00006');
    for (const o of [a, b]) record(t, 'stamped', o);
    t.like(a, { result: 'created', message: 'not held' });
    t.like(b, { result: 'created', message: 'held' }, 'stamped by the apiserver, no gate asked');
    const stamped = await shop.getRevision('app-00006');
    t.is(stamped?.metadata?.annotations?.['prestart.dev/hooks'], JSON.stringify([HOOK]));
    t.true(stamped?.metadata?.finalizers?.includes('prestart.dev/cancel-hooks'));

    const back = Date.now();
    await runGate();
    const asked = await waitFor(() => hook.requests.find((r) => r.data.revision.name === 'app-00006'), {
      timeoutMs: 30_000,
      what: 'the gate, back, to ask the hook about app-00006',
    });
    t.log(`from the gate's start to its first request for a Revision admitted during the outage: ${Date.now() - back} ms`);
    t.truthy(asked);
    t.false(isHeld(await shop.waitReleased('app-00006')));
  },
);

test.serial('the apiserver stamp removed: the gate registers its Revision webhook again within seconds', async (t) => {
  if (!(await servesMutatingPolicies(installed.cluster.kubeConfig))) {
    t.true((await registeredWebhooks()).includes('revisions.prestart.dev'), 'an apiserver before 1.36: the gate stamps');
    return;
  }
  const removed = Date.now();
  await installed.kubectl('delete', '-f', stampFile());
  await waitFor(async () => (await registeredWebhooks()).includes('revisions.prestart.dev'), {
    timeoutMs: 30_000,
    what: 'the gate to register its Revision webhook again',
  });
  t.log(`webhook registered again ${Date.now() - removed} ms after the stamp file was deleted`);
  // Until the apiserver's watch has both changes, the stamp policy refuses the Revision (never admits it unheld).
  await admittedHeldByDryRun('app-00007');
  const rev = await shop.createRevision('app-00007');
  t.true(isHeld(rev), "stamped by the gate's webhook");
  t.false(isHeld(await shop.waitReleased('app-00007')));
});
