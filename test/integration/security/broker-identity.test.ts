// Sender identity on the Broker road (issue 22), on the real control plane: real ServiceAccounts,
// real TokenRequest tokens, real TokenReviews by the gate, the gate running as its own
// ServiceAccount with the RBAC of config/300-rbac.yaml, Knative Eventing's real Broker and
// Trigger CRDs.
//
// Stand-ins, because no Knative Eventing runs in this file (test/e2e/broker-identity.test.ts runs
// the real one with `authentication-oidc: enabled`):
// - the Broker's class annotation (Eventing's webhook defaults it) and status (Ready, address url
//   and audience) are written by the test as Eventing writes them, and the url points at a plain HTTP server of the test standing in for
//   the broker ingress: it records what the gate sends, and the test checks the Bearer token with
//   the apiserver's TokenReview, as the ingress checks it against the apiserver's OIDC keys;
// - the reply Trigger's status.auth.serviceAccountName and that ServiceAccount are written by the
//   test as Eventing's Trigger reconciler writes them, and the test POSTs to the gate's sink with a
//   token of that ServiceAccount for the Trigger's subscriber audience, as the broker filter does.

import { applyManifests } from '@knative-prestart/devcluster/apply.ts';
import { GATE_USER, type GateEnv, gateEnv, installedCluster } from '@knative-prestart/devcluster/gate/env.ts';
import type { ReceivedRequest } from '@knative-prestart/devcluster/gate/hook-server.ts';
import { completedFor } from '@knative-prestart/devcluster/gate/replies.ts';
import { isHeld } from '@knative-prestart/devcluster/gate/revisions.ts';
import { knativeEventingCrdFiles } from '@knative-prestart/devcluster/knative.ts';
import { kubeRequest } from '@knative-prestart/devcluster/kube-request.ts';
import { CLUSTER_DIR_ENV, KUBECONFIG_ENV } from '@knative-prestart/devcluster/shared.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import { AuthenticationV1Api } from '@kubernetes/client-node';
import test from 'ava';
import { BROKER_CLASS_ANNOTATION, brokerAudience } from '../../../emitter/broker-address.ts';
import { toBinary } from '../../../schemas/index.ts';
import { AUDIENCE_HEADER, DEFAULT_SINK_AUDIENCE } from '../../../sinks/identity.ts';
import { replyTriggerName, requestTriggerName } from '../../../triggers/names.ts';
import { type FakeIngress, type IngressHit, startFakeIngress } from '../emitter/_ingress.ts';

// A control plane of this file's own (devcluster/shared.ts starts one when none is given):
// test/integration/triggers/triggers.test.ts needs the shared cluster without the Trigger CRD at
// its start, and this file needs that CRD.
delete process.env[KUBECONFIG_ENV];
delete process.env[CLUSTER_DIR_ENV];

const BROKER = 'default';
const PLAIN = 'plain';

let env: GateEnv;
let ingress: FakeIngress;

test.after.always(async () => {
  await env?.stop();
  await ingress?.close();
});

test.before(async () => {
  // Eventing's Broker and Trigger CRDs, on this file's own control plane.
  const cluster = await installedCluster();
  for (const file of await knativeEventingCrdFiles('broker', 'trigger')) await applyManifests(cluster.kubeConfig, file);
  ingress = await startFakeIngress();
  env = await gateEnv('bident', { inProcess: false });
  for (const name of ['stranger-sa']) {
    await env.core.createNamespacedServiceAccount({ namespace: env.namespace, body: { metadata: { name } } });
  }
  await env.startGate({
    senderIdentity: { replies: 'required' },
    triggers: { replyUri: 'http://127.0.0.1:9/', namespaces: [env.namespace] },
  });
  await createBroker(BROKER, brokerAudience(env.namespace, BROKER));
  await createBroker(PLAIN, undefined);
});

/**
 * A Broker with the class Eventing's webhook defaults and the status its reconciler would write:
 * Ready for its generation, its address, and its audience when OIDC is on. `forged` changes what
 * a namespace editor may write instead (brokers/status is in Eventing's aggregated edit role).
 */
async function createBroker(
  name: string,
  audience: string | undefined,
  forged: { brokerClass?: string; ready?: 'True' | 'False' } = {},
): Promise<void> {
  const base = `/apis/eventing.knative.dev/v1/namespaces/${env.namespace}/brokers`;
  const created = await kubeRequest(env.admin, 'POST', base, {
    apiVersion: 'eventing.knative.dev/v1',
    kind: 'Broker',
    metadata: { name, annotations: { [BROKER_CLASS_ANNOTATION]: forged.brokerClass ?? 'MTChannelBasedBroker' } },
  });
  if (created.status >= 300) throw new Error(`create Broker ${name}: ${JSON.stringify(created.body)}`);
  const generation = (created.body as { metadata: { generation: number } }).metadata.generation;
  const ready = forged.ready ?? 'True';
  const status = await kubeRequest(
    env.admin,
    'PATCH',
    `${base}/${name}/status`,
    {
      status: {
        observedGeneration: generation,
        conditions: [{ type: 'Ready', status: ready, ...(ready === 'True' ? {} : { reason: 'FilterNotReady' }) }],
        address: { url: `${ingress.url}/${env.namespace}/${name}`, ...(audience ? { audience } : {}) },
      },
    },
    'application/merge-patch+json',
  );
  if (status.status >= 300) throw new Error(`Broker ${name} status: ${JSON.stringify(status.body)}`);
}

/** The request the gate sent to the (stand-in) ingress for a Revision, as the hook would receive it. */
async function requestAt(broker: string, revision: string): Promise<{ hit: IngressHit; req: ReceivedRequest }> {
  const hit = await waitFor(
    () =>
      ingress
        .hitsFor(`/${env.namespace}/${broker}`)
        .find((h) => (JSON.parse(h.body || '{}') as { revision?: { name?: string } }).revision?.name === revision),
    { timeoutMs: 30_000, what: `the gate's request for ${revision} at Broker ${broker}` },
  );
  const req: ReceivedRequest = {
    headers: hit.headers,
    body: hit.body,
    ceId: String(hit.headers['ce-id'] ?? ''),
    data: JSON.parse(hit.body),
    correlationid: String(hit.headers['ce-correlationid'] ?? ''),
  };
  return { hit, req };
}

async function tokenOf(namespace: string, name: string, audience: string): Promise<string> {
  const answer = await env.core.createNamespacedServiceAccountToken({
    name,
    namespace,
    body: { spec: { audiences: [audience], expirationSeconds: 600 } },
  });
  return answer.status?.token ?? '';
}

function postReply(req: ReceivedRequest, outcome: 'succeeded' | 'progress', token?: string): Promise<Response> {
  const msg = toBinary(completedFor(req, outcome));
  const headers: Record<string, string> = { ...msg.headers, ...(token === undefined ? {} : { authorization: `Bearer ${token}` }) };
  // The reply Trigger's subscriber: the gate's sink (a Trigger delivers to "/").
  return fetch(new URL('/', env.gate.sinkUrl), { method: 'POST', headers, body: msg.body });
}

/** A hook `<instance>-<label>` delivering through `broker` (its subscriber is never reached), and held Revisions it matches. */
async function brokerHookHolding(label: string, broker: string, revisions: string[]): Promise<void> {
  const hook = `${env.instance}-${label}`;
  await env.createHook(hook, {
    match: env.annotationMatch('bident', label),
    delivery: { transport: 'broker', broker: { name: broker, namespace: env.namespace, subscriber: { uri: 'http://127.0.0.1:9/' } } },
  });
  await env.waitUntilStamped(hook, { bident: label });
  for (const name of revisions) await env.createRevision(name, { annotations: { bident: label } });
}

const errorOf = async (res: Response) => ((await res.json()) as { error: string }).error;

test.serial(
  'the gate sends to a Broker with its ServiceAccount token for the Broker’s audience, kept across sends; none without an audience',
  async (t) => {
    await brokerHookHolding('bus', BROKER, ['bus-00001', 'bus-00002']);
    const first = (await requestAt(BROKER, 'bus-00001')).hit;
    const second = (await requestAt(BROKER, 'bus-00002')).hit;
    const auth = String(first.headers.authorization ?? '');
    t.regex(auth, /^Bearer \S+$/);
    const reviews = env.admin.makeApiClient(AuthenticationV1Api);
    const audience = brokerAudience(env.namespace, BROKER);
    const review = await reviews.createTokenReview({ body: { spec: { token: auth.slice('Bearer '.length), audiences: [audience] } } });
    t.true(review.status?.authenticated, 'valid for the Broker’s audience');
    t.is(review.status?.user?.username, GATE_USER, 'the gate’s own ServiceAccount');
    const elsewhere = await reviews.createTokenReview({
      body: { spec: { token: auth.slice('Bearer '.length), audiences: [DEFAULT_SINK_AUDIENCE] } },
    });
    t.not(elsewhere.status?.authenticated, true, 'not valid for any other audience');
    t.is(second.headers.authorization, auth, 'the same token for the second request (minted once, refreshed at 80% of its life)');

    await brokerHookHolding('plain', PLAIN, ['plain-00001']);
    const plain = (await requestAt(PLAIN, 'plain-00001')).hit;
    t.is(plain.headers.authorization, undefined, 'a Broker that announces no audience gets no token');
  },
);

test.serial(
  'required: a Broker-delivered reply counts only with the reply Trigger’s OIDC identity; the request Trigger’s, a stranger’s or none change nothing',
  async (t) => {
    const ns = env.namespace;
    const triggers = `/apis/eventing.knative.dev/v1/namespaces/${ns}/triggers`;
    // The gate's reply Trigger asks Eventing for a token for the sink's audience.
    const replyTrigger = await waitFor(
      async () => {
        const res = await kubeRequest(env.admin, 'GET', `${triggers}/${replyTriggerName(BROKER)}`);
        return res.status === 200 ? (res.body as { spec: { subscriber: { audience?: string } } }) : undefined;
      },
      { timeoutMs: 30_000, what: 'the gate’s reply Trigger' },
    );
    t.is(replyTrigger.spec.subscriber.audience, DEFAULT_SINK_AUDIENCE);

    const { req } = await requestAt(BROKER, 'bus-00001');
    const before = await env.waitForRun('bus-00001', 'hook Requested', (r) => r.status?.hooks?.[0]?.phase === 'Requested');

    // Before Eventing gave the reply Trigger an identity (OIDC off), no token can be tied to the hook.
    await env.core.createNamespacedServiceAccount({ namespace: ns, body: { metadata: { name: 'replies-oidc' } } });
    await env.core.createNamespacedServiceAccount({ namespace: ns, body: { metadata: { name: 'request-oidc' } } });
    const early = await postReply(req, 'succeeded', await tokenOf(ns, 'replies-oidc', DEFAULT_SINK_AUDIENCE));
    t.is(early.status, 403);
    t.regex(await errorOf(early), /no OIDC identity yet/);

    // What Eventing's Trigger reconciler writes once authentication-oidc is on (stand-in).
    for (const [name, sa] of [
      [replyTriggerName(BROKER), 'replies-oidc'],
      [requestTriggerName(`${env.instance}-bus`), 'request-oidc'],
    ] as const) {
      const res = await kubeRequest(
        env.admin,
        'PATCH',
        `${triggers}/${name}/status`,
        { status: { auth: { serviceAccountName: sa } } },
        'application/merge-patch+json',
      );
      t.is(res.status, 200, JSON.stringify(res.body));
    }

    const none = await postReply(req, 'succeeded');
    t.is(none.status, 401);
    t.is(none.headers.get(AUDIENCE_HEADER), DEFAULT_SINK_AUDIENCE);

    const stranger = await postReply(req, 'succeeded', await tokenOf(ns, 'stranger-sa', DEFAULT_SINK_AUDIENCE));
    t.is(stranger.status, 403);
    t.regex(await errorOf(stranger), /stranger-sa.*replies as .*replies-oidc \(through the Broker's reply Trigger/);

    // The hook's request Trigger is how a synchronous answer re-enters the Broker: it may post to
    // the Broker (EventPolicy), never straight to the gate.
    const requestTrigger = await postReply(req, 'succeeded', await tokenOf(ns, 'request-oidc', DEFAULT_SINK_AUDIENCE));
    t.is(requestTrigger.status, 403);

    const wrongAudience = await postReply(req, 'succeeded', await tokenOf(ns, 'replies-oidc', brokerAudience(ns, BROKER)));
    t.is(wrongAudience.status, 401);

    const after = await env.getRun('bus-00001');
    t.is(after?.metadata?.resourceVersion, before.metadata?.resourceVersion, 'no refused reply touched the run');

    // The broker filter's delivery (stand-in): the reply Trigger's ServiceAccount, the sink's audience.
    const delivered = await postReply(req, 'succeeded', await tokenOf(ns, 'replies-oidc', DEFAULT_SINK_AUDIENCE));
    t.is(delivered.status, 202, await delivered.text());
    await env.waitReleased('bus-00001');
  },
);

/** The audiences the apiserver takes tokens for: its issuer (no --api-audiences is set here), as it publishes it. */
async function apiserverAudience(): Promise<string> {
  const res = await kubeRequest(env.admin, 'GET', '/.well-known/openid-configuration');
  return (res.body as { issuer: string }).issuer;
}

/** The gate's warnings that name `what`, once one is logged. */
const gateWarned = (what: RegExp, label: string) =>
  waitFor(() => env.gateLog.find((line) => what.test(line)), { timeoutMs: 30_000, what: `the gate's warning: ${label}` });

test.serial(
  "a forged Broker status borrows nothing: the apiserver's audience, another Broker's, a class nobody reconciles, not Ready: nothing sent, each said",
  async (t) => {
    const ns = env.namespace;
    const apiserver = await apiserverAudience();
    // The attack, shown to be worth making: a token of the gate for the apiserver's audience is
    // the gate at the apiserver (what the gate would have sent to the forged ingress).
    const stolen = await tokenOf('knative-prestart', 'knative-prestart-gate', apiserver);
    const asApiserver = await env.admin.makeApiClient(AuthenticationV1Api).createTokenReview({ body: { spec: { token: stolen } } });
    t.true(asApiserver.status?.authenticated, 'the apiserver takes a gate token minted for its audience');
    t.is(asApiserver.status?.user?.username, GATE_USER);

    const cases = [
      { label: 'apiserver', audience: apiserver, forged: {}, said: /announces the audience \\"https?:[^"]*\\", but Eventing gives it/ },
      {
        label: 'other',
        audience: brokerAudience(ns, BROKER),
        forged: {},
        said: /announces the audience \\"eventing\.knative\.dev\/broker\/[^"]*\/default\\"/,
      },
      {
        label: 'unowned',
        audience: brokerAudience(ns, 'forged-unowned'),
        forged: { brokerClass: 'Homemade' },
        said: /has class \\"Homemade\\", which is not one the gate trusts to write its status/,
      },
      {
        label: 'notready',
        audience: undefined as string | undefined,
        forged: { ready: 'False' as const },
        said: /is not Ready \(Ready=False \(FilterNotReady\)\)/,
      },
    ];
    for (const c of cases) {
      const broker = `forged-${c.label}`;
      await createBroker(broker, c.audience, c.forged);
      await brokerHookHolding(c.label, broker, [`${c.label}-00001`]);
    }
    for (const c of cases) {
      const line = await gateWarned(new RegExp(`Broker ${ns}/forged-${c.label} .*`), c.label);
      t.regex(line, c.said, c.label);
      t.true(isHeld(await env.getRevision(`${c.label}-00001`)), `${c.label}: still held`);
    }
    for (const c of cases) t.deepEqual(ingress.hitsFor(`/${ns}/forged-${c.label}`), [], `${c.label}: nothing reached its ingress`);
  },
);

test.serial(
  "identity.audience naming the apiserver's audience: the gate mints nothing for it and sends nothing, and says why",
  async (t) => {
    const apiserver = await apiserverAudience();
    const hook = `${env.instance}-direct`;
    await env.createHook(hook, {
      match: env.annotationMatch('bident', 'direct'),
      delivery: { transport: 'http', url: `${ingress.url}/direct` },
      identity: { audience: apiserver },
    });
    await env.waitUntilStamped(hook, { bident: 'direct' });
    await env.createRevision('direct-00001', { annotations: { bident: 'direct' } });
    const line = await gateWarned(/the apiserver accepts a token for the audience/, 'identity.audience refused');
    t.regex(line, /one sent there would be the gate's own credentials, so the gate mints none for it/);
    t.deepEqual(ingress.hitsFor('/direct'), [], 'the hook got no request (a request never goes without its token)');
  },
);
