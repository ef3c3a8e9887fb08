// An upgrade from the previous release (PREVIOUS_RELEASE, _previous.ts) with Revisions mid-flight,
// on a fresh real cluster, done the way a Deployment rolls: the previous release installed with
// kubectl and its gate running from its own source; then this release applied over it, this tree's
// gate started beside the old one, the old one stopped. One URL each for the webhooks and for
// replies (balancers standing in for the gate's Service) follows whichever gates run.
//
// Mid-flight when the upgrade starts: three Revisions whose hook `migrate` was asked and has not
// answered, one whose second-stage hook waits for `migrate`, and one whose hook `scan` failed.
// After it: none released early, none lost (each ends released, or still held with its reason),
// the hook's answers to the requests it got from the previous gate are taken, and no hook is asked
// again for work it was already asked to do: resends carry the same CloudEvent id (the protocol's
// dedupe key), so a hook runs each attempt once.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { applyManifests } from '@knative-prestart/devcluster/apply.ts';
import { type HookServer, type ReceivedRequest, startHookServer } from '@knative-prestart/devcluster/gate/hook-server.ts';
import { type HookMethods, hookMethods } from '@knative-prestart/devcluster/gate/hooks.ts';
import type { GatePorts, GateProcess } from '@knative-prestart/devcluster/gate/process.ts';
import { asyncReply, syncReply } from '@knative-prestart/devcluster/gate/replies.ts';
import { isHeld, type RevisionMethods, revisionMethods } from '@knative-prestart/devcluster/gate/revisions.ts';
import { knativeServingCrdDir } from '@knative-prestart/devcluster/knative.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import { CoordinationV1Api } from '@kubernetes/client-node';
import test from 'ava';
import { HOOKS_ANNOTATION, REASON_ANNOTATION } from '../../../api/types.ts';
import { type Balancer, startBalancer } from './_balancer.ts';
import { gateKubeconfig, replicaPorts, startReplica } from './_gates.ts';
import { type PreviousRelease, previousRelease } from './_previous.ts';
import { freshCluster, type Installed } from './_support.ts';

const IMAGE = `registry.example.com/knative-prestart@sha256:${'ab'.repeat(32)}`;
const NS = 'shop';
const WAITING = ['cart-00001', 'orders-00001', 'search-00001'];
const STAGED = 'mail-00001';
const FAILED = 'scan-00001';

let installed: Installed;
let previous: PreviousRelease;
let kubeconfigPath: string;
let hook: HookServer;
let hooks: HookMethods;
let revisions: RevisionMethods;
let webhooks: Balancer;
let sinks: Balancer;
let oldGate: GateProcess;
let upgradedAt = 0;
const gates: GateProcess[] = [];
/** When the hook received each request. */
const receivedAt = new Map<ReceivedRequest, number>();

test.before(async () => {
  previous = await previousRelease();
  installed = await freshCluster(IMAGE);
  await applyManifests(installed.cluster.kubeConfig, await knativeServingCrdDir());
  await installed.kubectl('apply', '--server-side', ...previous.configFiles.flatMap((f) => ['-f', f]));
  await installed.kubectl('create', 'namespace', NS);
  kubeconfigPath = await gateKubeconfig(installed.cluster);
  hooks = hookMethods(installed.cluster.kubeConfig, NS);
  revisions = revisionMethods(installed.cluster.kubeConfig, NS);
  // `scan` fails at once; every other request waits for the test to answer it (202).
  hook = await startHookServer(async (req) => {
    receivedAt.set(req, Date.now());
    return req.data.hook.name === 'scan' ? syncReply(req, 'failed', { message: 'image scan found 3 critical CVEs' }) : { status: 202 };
  });
  webhooks = await startBalancer([]);
  sinks = await startBalancer([]);
});

test.after.always(async () => {
  await Promise.all(gates.map((g) => g.stop()));
  await webhooks?.close();
  await sinks?.close();
  await hook?.close();
  await installed?.stop();
});

async function runGate(cli?: string): Promise<{ gate: GateProcess; ports: GatePorts }> {
  const ports = await replicaPorts({ webhookUrl: webhooks.url('https'), sinkUrl: sinks.url('http', '/events') });
  const gate = await startReplica({ kubeconfigPath, ports, leaseSeconds: 3, ...(cli ? { cli } : {}) });
  gates.push(gate);
  webhooks.markUp(ports.webhook);
  sinks.markUp(ports.sink);
  return { gate, ports };
}

const requestsFor = (revision: string, hookName: string) =>
  hook.requests.filter((r) => r.data.revision.name === revision && r.data.hook.name === hookName && r.data.action === 'start');

async function leaseHolder(): Promise<string | undefined> {
  const lease = await installed.cluster.kubeConfig
    .makeApiClient(CoordinationV1Api)
    .readNamespacedLease({ name: 'knative-prestart-gate-default', namespace: 'knative-prestart' })
    .catch(() => undefined);
  return lease?.spec?.holderIdentity ?? undefined;
}

/** Answers `request` as an asynchronous hook does, through the reply URL; a hook retries what does not reach a gate. */
async function answer(request: ReceivedRequest): Promise<{ status: number; body: string }> {
  return waitFor(
    async () => {
      const r = await asyncReply(request, 'succeeded');
      return r.status === 202 || (r.status >= 400 && r.status < 500) ? { status: r.status, body: await r.text() } : undefined;
    },
    { what: `a reply to ${request.data.revision.name}/${request.data.hook.name} to reach a gate` },
  );
}

const sentAfterUpgrade = (r: ReceivedRequest) => (receivedAt.get(r) ?? 0) >= upgradedAt;

test.serial('the previous release holds Revisions mid-flight', async (t) => {
  oldGate = (await runGate(previous.cli)).gate;
  await hooks.createHook('migrate', { resendInterval: '2s', timeout: '10m', delivery: { transport: 'http', url: hook.url } });
  await hooks.createHook('scan', { match: hooks.annotationMatch('scan', 'yes'), delivery: { transport: 'http', url: hook.url } });
  await hooks.createHook('notify', {
    order: 1,
    match: hooks.annotationMatch('notify', 'yes'),
    resendInterval: '2s',
    delivery: { transport: 'http', url: hook.url },
  });
  await hooks.waitUntilStamped('notify', { notify: 'yes' });
  await hooks.waitUntilStamped('scan', { scan: 'yes' });
  for (const name of WAITING) await revisions.createRevision(name);
  await revisions.createRevision(STAGED, { annotations: { notify: 'yes' } });
  await revisions.createRevision(FAILED, { annotations: { scan: 'yes' } });
  for (const name of [...WAITING, STAGED]) {
    await waitFor(() => requestsFor(name, 'migrate')[0], { what: `the previous gate to ask migrate for ${name}` });
  }
  const failed = await revisions.waitForRun(FAILED, 'Failed', (r) => r.status?.phase === 'Failed');
  t.regex(failed.status?.hooks?.find((h) => h.name === 'scan')?.message ?? '', /3 critical CVEs/);
  for (const name of [...WAITING, STAGED, FAILED]) t.true(isHeld(await revisions.getRevision(name)), `${name} held`);
});

test.serial('the upgrade: this release applied, its gate started, the previous one stopped; nothing released, nothing lost', async (t) => {
  // The gate writes its webhook configuration itself (here by URL, which the release's Service
  // form cannot merge with), so the release's copy of it is left out.
  const release = installed.objects['knative-prestart.yaml']?.filter((o) => o.kind !== 'MutatingWebhookConfiguration') ?? [];
  const file = join(installed.releaseDir, 'upgrade.json');
  await writeFile(file, JSON.stringify({ apiVersion: 'v1', kind: 'List', items: release }));
  await installed.kubectl('apply', '--server-side', '--force-conflicts', '-f', file);
  await runGate();
  const oldLeader = await leaseHolder();
  await oldGate.stop();
  upgradedAt = Date.now();
  await waitFor(
    async () => {
      const holder = await leaseHolder();
      return holder !== undefined && holder !== oldLeader;
    },
    { what: 'the new gate to lead' },
  );
  // The new leader looked at every held Revision: it resends the unanswered requests every 2 s.
  for (const name of [...WAITING, STAGED]) {
    await waitFor(() => requestsFor(name, 'migrate').some(sentAfterUpgrade), {
      what: `the new gate to resend migrate's request for ${name}`,
    });
  }
  for (const name of [...WAITING, STAGED, FAILED]) t.true(isHeld(await revisions.getRevision(name)), `${name} still held`);
  for (const name of [...WAITING, STAGED]) {
    const run = await revisions.getRun(name);
    t.is(run?.status?.phase, 'Running', `${name}'s run goes on`);
    t.is(run?.status?.hooks?.find((h) => h.name === 'migrate')?.phase, 'Requested');
  }
  const failed = await revisions.getRevision(FAILED);
  t.regex(failed.metadata?.annotations?.[REASON_ANNOTATION] ?? '', /scan.*3 critical CVEs/s, 'the failed one keeps its reason');
  t.is((await revisions.getRun(FAILED))?.status?.phase, 'Failed');
});

test.serial("the hook's answers to the requests the previous gate sent are taken", async (t) => {
  for (const name of [WAITING[0] as string, STAGED]) {
    const first = requestsFor(name, 'migrate')[0] as ReceivedRequest;
    t.false(sentAfterUpgrade(first), 'a request of the previous gate');
    const reply = await answer(first);
    t.is(reply.status, 202, `${name}: the new gate refused the answer to the previous gate's request: ${reply.body}`);
  }
  if (t.passed) {
    await revisions.waitReleased(WAITING[0] as string);
    const notify = await waitFor(() => requestsFor(STAGED, 'notify')[0], { what: 'the second stage to start' });
    t.is((await answer(notify)).status, 202);
    await revisions.waitReleased(STAGED);
  }
});

test.serial('no hook is asked again for an attempt it was asked for, except by resends with the same CloudEvent id', (t) => {
  const ids = new Map<string, Set<string>>();
  for (const r of hook.requests.filter((x) => x.data.action === 'start')) {
    const key = `${r.data.revision.name}/${r.data.hook.name}/attempt ${r.data.attempt}`;
    ids.set(key, (ids.get(key) ?? new Set()).add(r.ceId));
  }
  const asked = Object.fromEntries([...ids].map(([key, set]) => [key, [...set]]));
  t.log(JSON.stringify(asked, null, 1));
  for (const [key, set] of ids) t.is(set.size, 1, `${key} was asked under ${set.size} CloudEvent ids: ${[...set].join(', ')}`);
});

test.serial('in the end every Revision is released, or still held with its reason', async (t) => {
  // The rest answered the way a hook answers a resend: the latest request it got.
  for (const name of [WAITING[0] as string, WAITING[1] as string]) {
    if (!isHeld(await revisions.getRevision(name))) continue;
    t.is((await answer(requestsFor(name, 'migrate').at(-1) as ReceivedRequest)).status, 202);
  }
  if (isHeld(await revisions.getRevision(STAGED))) {
    if (requestsFor(STAGED, 'notify').length === 0) await answer(requestsFor(STAGED, 'migrate').at(-1) as ReceivedRequest);
    const notify = await waitFor(() => requestsFor(STAGED, 'notify').at(-1), { what: 'the second stage to start' });
    t.is((await answer(notify)).status, 202);
  }
  for (const name of [WAITING[0] as string, WAITING[1] as string, STAGED]) {
    const released = await revisions.waitReleased(name);
    t.truthy(released.metadata?.annotations?.[HOOKS_ANNOTATION]);
    t.is((await revisions.waitForRun(name, 'Released', (r) => r.status?.phase === 'Released')).status?.phase, 'Released');
  }
  const unanswered = WAITING[2] as string;
  t.true(isHeld(await revisions.getRevision(unanswered)), `${unanswered}, whose hook never answered, is held`);
  t.is((await revisions.getRun(unanswered))?.status?.hooks?.[0]?.phase, 'Requested');
  t.true(isHeld(await revisions.getRevision(FAILED)), `${FAILED} is held`);
  t.regex((await revisions.getRevision(FAILED)).metadata?.annotations?.[REASON_ANNOTATION] ?? '', /3 critical CVEs/);
});
