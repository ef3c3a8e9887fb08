// Sender identity end to end on the Broker road (issue 22): Knative Eventing v0.50.0 with
// `authentication-oidc: enabled` (devcluster/knative-eventing.ts, `oidc: true`), the EventPolicies
// of examples/eventpolicy.yaml applied as the install step an admin runs, and the gate with
// `--reply-identity required`. What a user checks:
//   - the Broker announces an audience, and the gate's request gets through it (the gate sends its
//     ServiceAccount's token for that audience, and the policy lets only the gate send requests);
//   - a stranger who harvested the request's replyid (with a Trigger of their own on the Broker,
//     review R4) cannot use it: a POST to the Broker is refused by Eventing (401 without a token,
//     403 by the EventPolicy with one), and a POST straight to the gate's sink is refused by the
//     gate (401/403); the PrestartRun is untouched and the Revision stays held;
//   - the hook's own reply, sent to the Broker with its ServiceAccount token, comes back through
//     the gate's reply Trigger (Eventing's filter sends the Trigger's OIDC token for the sink's
//     audience) and releases the Revision.
// Real here: Knative Serving's and Eventing's controllers, the MT broker ingress and filter, the
// InMemoryChannel dispatcher, the EventPolicy reconciler, the apiserver's TokenRequest, TokenReview
// and OIDC discovery, Kubernetes' controllers, the gate, a hook written with the SDK. Stand-ins:
// cluster DNS (the service proxy and the apiserver tunnel, named in knative-eventing.ts) and, as in
// serving.test.ts, no networking layer (startIngressStandIn is not needed: only Revisions are read).
//
// Eventing's sender identity is cluster-wide (config-features): this file runs on a control plane
// of its own, so no other file's Broker sees it.
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { applyManifests } from '@knative-prestart/devcluster/apply.ts';
import { type GateEnv, gateEnv } from '@knative-prestart/devcluster/gate/env.ts';
import {
  type ReceivedRequest,
  type HookServer as RecordingServer,
  startHookServer,
} from '@knative-prestart/devcluster/gate/hook-server.ts';
import { completedFor } from '@knative-prestart/devcluster/gate/replies.ts';
import { isHeld } from '@knative-prestart/devcluster/gate/revisions.ts';
import { condition, Knative, waitForRevision } from '@knative-prestart/devcluster/knative-client.ts';
import { type KnativeEventing, startKnativeEventing } from '@knative-prestart/devcluster/knative-eventing.ts';
import { type KnativeServing, startKnativeServing } from '@knative-prestart/devcluster/knative-serving.ts';
import { kubeRequest } from '@knative-prestart/devcluster/kube-request.ts';
import { freePorts } from '@knative-prestart/devcluster/ports.ts';
import { CLUSTER_DIR_ENV, KUBECONFIG_ENV } from '@knative-prestart/devcluster/shared.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import test from 'ava';
import yaml from 'js-yaml';
import pino from 'pino';
import { type HookServer, serveHook, succeed } from '../../hooks/index.ts';
import { toBinary } from '../../schemas/index.ts';
import { DEFAULT_SINK_AUDIENCE } from '../../sinks/identity.ts';
import { replyTriggerName, requestTriggerName } from '../../triggers/names.ts';

// A control plane of this file's own (devcluster/shared.ts starts one when none is given).
delete process.env[KUBECONFIG_ENV];
delete process.env[CLUSTER_DIR_ENV];

const BROKER = 'default';
const HOOK_SA = 'db-migrate-hook';
const STRANGER_SA = 'stranger';
/** Another hook's identity on the same Broker, with the per-hook policy the example asks for. */
const OTHER_SA = 'other-hook';
const BINDING = 'identity-db';
const examplePolicies = fileURLToPath(new URL('../../examples/eventpolicy.yaml', import.meta.url));

let env: GateEnv;
let serving: KnativeServing;
let eventing: KnativeEventing;
let kn: Knative;
let hook: HookServer;
let harvester: RecordingServer;
let hookName: string;
let brokerAudience: string;
let tokenDir: string;
let sinkUrl: string;
/** Lets the hook finish its work, per Revision (the test attacks first). */
const finish = new Map<string, () => void>();
const timings: string[] = [];
const since = (t0: number) => `${((performance.now() - t0) / 1000).toFixed(1)} s`;

interface BrokerStatus {
  status?: {
    address?: { url?: string; audience?: string };
    policies?: { name: string }[];
    conditions?: { type: string; status: string }[];
  };
}

async function getBroker(): Promise<BrokerStatus> {
  return (await kubeRequest(env.admin, 'GET', `/apis/eventing.knative.dev/v1/namespaces/${env.namespace}/brokers/${BROKER}`))
    .body as BrokerStatus;
}

async function tokenOf(name: string, audience: string): Promise<string> {
  const answer = await env.core.createNamespacedServiceAccountToken({
    name,
    namespace: env.namespace,
    body: { spec: { audiences: [audience], expirationSeconds: 3600 } },
  });
  return answer.status?.token ?? '';
}

/**
 * examples/eventpolicy.yaml as an admin applies it, with this cluster's names in place of the
 * example's namespace `shop` (the hook is the example's `db-migrate`, its ServiceAccount
 * `db-migrate-hook`); nothing else changed.
 */
async function installExamplePolicies(): Promise<string[]> {
  const docs = yaml.loadAll(await readFile(examplePolicies, 'utf8')) as object[];
  const ns = env.namespace;
  const text = JSON.stringify(docs)
    .replaceAll('"namespace":"shop"', `"namespace":"${ns}"`)
    .replaceAll('system:serviceaccount:shop:', `system:serviceaccount:${ns}:`);
  const adapted = JSON.parse(text) as { metadata: { name: string } }[];
  await applyManifests(env.admin, adapted.map((d) => JSON.stringify(d)).join('\n---\n'));
  return adapted.map((d) => d.metadata.name);
}

test.before(async () => {
  const t0 = performance.now();
  const progress = (line: string) => process.stderr.write(`e2e: ${line}\n`);
  env = await gateEnv('ident-bus', { inProcess: false });
  serving = await startKnativeServing(env.cluster, { progress });
  eventing = await startKnativeEventing(env.cluster, { progress, oidc: true });
  kn = new Knative(env.admin, env.namespace);
  timings.push(`control plane, Knative Serving and Eventing (OIDC) ready: ${since(t0)}`);
  for (const name of [HOOK_SA, STRANGER_SA, OTHER_SA]) {
    await env.core.createNamespacedServiceAccount({ namespace: env.namespace, body: { metadata: { name } } });
  }
  await eventing.createBroker(env.namespace, BROKER);
  brokerAudience = (await getBroker()).status?.address?.audience ?? '';

  const [sinkPort] = (await freePorts(1)) as [number];
  sinkUrl = `http://127.0.0.1:${sinkPort}/`;
  await env.startGate({
    sink: { host: '127.0.0.1', port: sinkPort, maxBytes: 64 * 1024 },
    triggers: { replyUri: sinkUrl, namespaces: [env.namespace] },
    broker: { proxy: eventing.proxyUrl },
    senderIdentity: { replies: 'required' },
  });

  // The hook: the SDK, its ServiceAccount's token (as projected for the Broker's audience) with
  // every report to K_SINK, the Broker; 202 at once, the outcome once the test lets it finish.
  // The example's hook name: hooks are cluster-wide, and this control plane is the file's own.
  hookName = 'db-migrate';
  tokenDir = await mkdtemp(join(tmpdir(), 'prestart-hook-token-'));
  const tokenFile = join(tokenDir, 'token');
  await writeFile(tokenFile, await tokenOf(HOOK_SA, brokerAudience));
  hook = await serveHook({
    name: hookName,
    host: '127.0.0.1',
    port: 0,
    sink: eventing.ingressUrl(env.namespace, BROKER),
    tokenFile,
    logger: pino({ name: 'identity-hook', level: process.env.GATE_LOG_LEVEL ?? 'warn' }),
    handler: async (req) => {
      await new Promise<void>((resolve) => finish.set(req.revision.name, resolve));
      return succeed(`database for ${req.revision.name} ready`);
    },
  });
  // The stranger's harvester: a Trigger of their own on the Broker's requests (review R4).
  harvester = await startHookServer(async () => ({ status: 202 }));
});

test.after.always(async () => {
  for (const line of timings) process.stderr.write(`e2e: broker-identity: ${line}\n`);
  await hook?.close();
  await harvester?.close();
  await env?.stop();
  await eventing?.stop();
  await serving?.stop();
  if (tokenDir) await rm(tokenDir, { recursive: true, force: true });
});

test.serial(
  'install: the Broker announces an audience; examples/eventpolicy.yaml applies to it; the gate’s Triggers are Ready',
  async (t) => {
    t.is(brokerAudience, `eventing.knative.dev/broker/${env.namespace}/${BROKER}`);
    const t0 = performance.now();
    const names = await installExamplePolicies();
    t.deepEqual(names, ['prestart-requests', 'prestart-replies-db-migrate']);
    // A second hook's policy, as the example says: one per hook, naming the hook in its filter.
    await applyManifests(
      env.admin,
      JSON.stringify({
        apiVersion: 'eventing.knative.dev/v1alpha1',
        kind: 'EventPolicy',
        metadata: { name: 'prestart-replies-other', namespace: env.namespace },
        spec: {
          to: [{ ref: { apiVersion: 'eventing.knative.dev/v1', kind: 'Broker', name: BROKER } }],
          from: [{ sub: `system:serviceaccount:${env.namespace}:${OTHER_SA}` }],
          filters: [{ exact: { type: 'revision.prestart.completed', prestarthook: 'other' } }],
        },
      }),
    );
    await env.createHook(hookName, {
      match: env.annotationMatch(BINDING, 'yes'),
      identity: { serviceAccount: { namespace: env.namespace, name: HOOK_SA } },
      timeout: '5m',
      delivery: { transport: 'broker', broker: { name: BROKER, namespace: env.namespace, subscriber: { uri: hook.url } } },
    });
    await env.waitUntilStamped(hookName, { [BINDING]: 'yes' });
    const broker = await waitFor(
      async () => {
        const b = await getBroker();
        const applied = (b.status?.policies ?? []).map((p) => p.name).sort();
        return applied.length === 3 ? b : undefined;
      },
      { timeoutMs: 60_000, what: 'the Broker to list the three EventPolicies in status.policies' },
    );
    t.deepEqual(broker.status?.policies?.map((p) => p.name).sort(), [
      'prestart-replies-db-migrate',
      'prestart-replies-other',
      'prestart-requests',
    ]);

    // The stranger's Trigger, made as any editor of the namespace can (the webhook would add the label).
    await applyManifests(
      env.admin,
      JSON.stringify({
        apiVersion: 'eventing.knative.dev/v1',
        kind: 'Trigger',
        metadata: { name: 'stranger-harvest', namespace: env.namespace, labels: { 'eventing.knative.dev/broker': BROKER } },
        spec: { broker: BROKER, filters: [{ exact: { type: 'revision.prestart.requested' } }], subscriber: { uri: harvester.url } },
      }),
    );
    const triggers = await waitFor(
      async () => {
        const res = await kubeRequest(env.admin, 'GET', `/apis/eventing.knative.dev/v1/namespaces/${env.namespace}/triggers`);
        const items = (res.body as { items: TriggerLike[] }).items;
        const ready = items.filter((i) => i.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'));
        return ready.length === 3 ? { items } : undefined;
      },
      { timeoutMs: 60_000, what: 'the request, reply and stranger’s Triggers to be Ready' },
    ).then((r) => r.items);
    const reply = triggers.find((x) => x.metadata.name === replyTriggerName(BROKER));
    t.is(reply?.spec.subscriber.audience, DEFAULT_SINK_AUDIENCE, 'the reply Trigger asks for a token for the sink’s audience');
    t.truthy(reply?.status?.auth?.serviceAccountName, 'Eventing gave the reply Trigger an OIDC ServiceAccount');
    const request = triggers.find((x) => x.metadata.name === requestTriggerName(hookName));
    t.is(
      request?.status?.auth?.serviceAccountName,
      'prestart-hook-db-migrate-oidc-eventing.knative.dev-trigger',
      'the request Trigger’s identity is the one examples/eventpolicy.yaml names',
    );
    timings.push(`policies applied to the Broker and Triggers Ready: ${since(t0)}`);
  },
);

interface TriggerLike {
  metadata: { name: string };
  spec: { subscriber: { uri?: string; audience?: string } };
  status?: { conditions?: { type: string; status: string }[]; auth?: { serviceAccountName?: string } };
}

function post(url: string, req: ReceivedRequest, token?: string, attributes: Record<string, string> = {}): Promise<Response> {
  const msg = toBinary({ ...completedFor(req, 'succeeded', { message: 'forged' }), ...attributes });
  const headers: Record<string, string> = { ...msg.headers, ...(token === undefined ? {} : { authorization: `Bearer ${token}` }) };
  return fetch(url, { method: 'POST', headers, body: msg.body });
}

/** Replies the gate's HTTP sink refused before the state (its own counter). */
async function invalidReplies(): Promise<number> {
  const text = await env.gate.metrics.registry.getSingleMetricAsString('prestart_gate_replies_total');
  return text
    .split('\n')
    .filter((l) => l.includes('transport="http"') && l.includes('result="invalid"'))
    .reduce((n, l) => n + Number(l.split(' ').pop()), 0);
}

test.serial(
  'a stranger with a harvested replyid is refused by the Broker and by the gate; the hook’s own reply through the Broker releases the Revision',
  async (t) => {
    const t0 = performance.now();
    await kn.createService('ident', { annotations: { [BINDING]: 'yes' } });
    const rev = await waitForRevision(kn, 'ident-00001', 'created by Knative', () => true, { timeoutMs: 30_000 });
    t.true(isHeld(rev), 'held');
    // The request went through the OIDC Broker to both the hook and the stranger's Trigger.
    const harvested = await waitFor(() => harvester.requests.find((r) => r.data.revision.name === 'ident-00001'), {
      timeoutMs: 30_000,
      what: 'the stranger’s Trigger to harvest the request',
    });
    await waitFor(() => finish.get('ident-00001'), { timeoutMs: 30_000, what: 'the hook to be working on ident-00001' });
    timings.push(`request through the OIDC Broker to the hook: ${since(t0)} after the Service's create`);
    const before = await env.waitForRun('ident-00001', 'hook Requested', (r) => r.status?.hooks?.[0]?.phase === 'Requested');

    // To the Broker: no token, then the stranger's own token for the Broker's audience.
    const ingress = eventing.ingressUrl(env.namespace, BROKER);
    const bare = await post(ingress, harvested);
    t.is(bare.status, 401, 'Eventing’s ingress wants a token');
    const strangerAtBroker = await post(ingress, harvested, await tokenOf(STRANGER_SA, brokerAudience));
    t.is(strangerAtBroker.status, 403, 'the EventPolicy names only the gate and the hook');

    // Straight to the gate's sink: no token, the stranger's token for the sink's audience.
    const bareAtSink = await post(sinkUrl, harvested);
    t.is(bareAtSink.status, 401);
    t.regex(((await bareAtSink.json()) as { error: string }).error, /needs a bearer token/);
    const strangerAtSink = await post(sinkUrl, harvested, await tokenOf(STRANGER_SA, DEFAULT_SINK_AUDIENCE));
    t.is(strangerAtSink.status, 403);
    t.regex(((await strangerAtSink.json()) as { error: string }).error, /stranger's; hook .* replies as /);

    // Another hook's identity, allowed on the Broker for its own hook only: the reply as harvested
    // names db-migrate and the Broker refuses it; renamed to its own hook, the Broker takes it and
    // the gate refuses it (the signed replyid names db-migrate).
    const otherToken = await tokenOf(OTHER_SA, brokerAudience);
    const otherAsDbMigrate = await post(ingress, harvested, otherToken);
    t.is(otherAsDbMigrate.status, 403, 'the per-hook policy: another hook’s identity may not name db-migrate');
    const refusedBefore = await invalidReplies();
    await post(ingress, harvested, otherToken, { prestarthook: 'other' });
    await waitFor(async () => (await invalidReplies()) > refusedBefore, {
      timeoutMs: 30_000,
      what: 'the gate to refuse the relabelled reply the Broker delivered',
    });

    const after = await env.getRun('ident-00001');
    t.is(after?.metadata?.resourceVersion, before.metadata?.resourceVersion, 'no refused reply touched the run');
    t.true(isHeld(await kn.revision('ident-00001')), 'still held');

    // The hook's own reply: to the Broker with its token, back through the reply Trigger.
    const replied = performance.now();
    finish.get('ident-00001')?.();
    const run = await env.waitForRun('ident-00001', 'Released', (r) => r.status?.phase === 'Released', 60_000);
    timings.push(`hook's reply through the OIDC Broker to the release: ${since(replied)}`);
    t.regex(run.status?.hooks[0]?.message ?? '', /database for ident-00001 ready/);
    const ready = await waitForRevision(kn, 'ident-00001', 'Ready=True', (r) => condition(r, 'Ready')?.status === 'True', {
      timeoutMs: 60_000,
    });
    t.false(isHeld(ready));
  },
);
