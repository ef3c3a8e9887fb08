// Sender identity on the direct HTTP road (issue 22, review R4), on the real control plane: real
// ServiceAccounts, real tokens from the TokenRequest API, real TokenReviews by the gate. With
// --reply-identity required a valid replyid is no longer enough: a reply must carry a token of the
// ServiceAccount its PrestartHook names, minted for the sink's audience. And the gate calls a hook
// that names an audience with its own ServiceAccount's token.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GATE_USER, type GateEnv, gateEnv } from '@knative-prestart/devcluster/gate/env.ts';
import { type ReceivedRequest, startHookServer } from '@knative-prestart/devcluster/gate/hook-server.ts';
import { completedFor } from '@knative-prestart/devcluster/gate/replies.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import { AuthenticationV1Api } from '@kubernetes/client-node';
import test from 'ava';
import { serveHook } from '../../../hooks/sdk/http.ts';
import { toBinary } from '../../../schemas/index.ts';
import { AUDIENCE_HEADER, DEFAULT_SINK_AUDIENCE } from '../../../sinks/identity.ts';

let env: GateEnv;

test.before(async () => {
  env = await gateEnv('ident', { inProcess: false });
  await env.startGate({ senderIdentity: { replies: 'required' } });
  for (const name of ['hook-sa', 'stranger-sa']) {
    await env.core.createNamespacedServiceAccount({ namespace: env.namespace, body: { metadata: { name } } });
  }
});

test.after.always(async () => {
  await env?.stop();
});

/** A real token of ServiceAccount `name` for `audience`, minted as the admin with the TokenRequest API. */
async function tokenOf(name: string, audience = DEFAULT_SINK_AUDIENCE): Promise<string> {
  const answer = await env.core.createNamespacedServiceAccountToken({
    name,
    namespace: env.namespace,
    body: { spec: { audiences: [audience], expirationSeconds: 600 } },
  });
  return answer.status?.token ?? '';
}

/** TokenReviews the gate has made, from its own kube request metric. */
async function tokenReviews(): Promise<number> {
  const text = await env.gate.metrics.registry.metrics();
  let n = 0;
  for (const line of text.split('\n')) {
    if (line.startsWith('prestart_gate_kube_requests_total{') && line.includes('resource="tokenreviews"')) {
      n += Number(line.split(' ').pop());
    }
  }
  return n;
}

/** Replies the HTTP sink refused before the state (401/403 among them). */
async function refusedReplies(): Promise<number> {
  const text = await env.gate.metrics.registry.metrics();
  let n = 0;
  for (const line of text.split('\n')) {
    if (line.startsWith('prestart_gate_replies_total{transport="http",result="invalid"')) n += Number(line.split(' ').pop());
  }
  return n;
}

function postReply(req: ReceivedRequest, outcome: 'succeeded' | 'progress', token?: string): Promise<Response> {
  const msg = toBinary(completedFor(req, outcome));
  const headers: Record<string, string> = { ...msg.headers, ...(token === undefined ? {} : { authorization: `Bearer ${token}` }) };
  return fetch(req.data.replyTo ?? '', { method: 'POST', headers, body: msg.body });
}

test.serial(
  'required: only the hook’s own ServiceAccount token for the sink’s audience releases; strangers get 401/403 and change nothing',
  async (t) => {
    const hookName = `${env.instance}-raw`;
    const hookAudience = `https://${hookName}.example`;
    const pending: ReceivedRequest[] = [];
    const hook = await startHookServer(async (req) => {
      pending.push(req);
      return { status: 202 };
    });
    t.teardown(() => hook.close());
    await env.createHook(hookName, {
      match: env.annotationMatch('ident', 'raw'),
      identity: { serviceAccount: { namespace: env.namespace, name: 'hook-sa' }, audience: hookAudience },
      delivery: { transport: 'http', url: hook.url },
    });
    await env.waitUntilStamped(hookName, { ident: 'raw' });
    await env.createRevision('raw-00001', { annotations: { ident: 'raw' } });
    const request = await waitFor(() => pending[0], { timeoutMs: 30_000, what: 'the hook to receive its request' });

    // Gate -> hook: a Bearer token the apiserver says is the gate's ServiceAccount's, for the hook's audience.
    const auth = String(request.headers.authorization ?? '');
    t.regex(auth, /^Bearer \S+$/);
    const review = await env.admin
      .makeApiClient(AuthenticationV1Api)
      .createTokenReview({ body: { spec: { token: auth.slice('Bearer '.length), audiences: [hookAudience] } } });
    t.true(review.status?.authenticated);
    t.is(review.status?.user?.username, GATE_USER);

    const before = await env.waitForRun('raw-00001', 'hook Requested', (r) => r.status?.hooks?.[0]?.phase === 'Requested');
    const reviewsBefore = await tokenReviews();

    // A stranger with the harvested replyid: no token, another ServiceAccount's, the hook's for another audience.
    const none = await postReply(request, 'succeeded');
    t.is(none.status, 401);
    t.regex(((await none.json()) as { error: string }).error, /needs a bearer token/);
    t.is(none.headers.get(AUDIENCE_HEADER), DEFAULT_SINK_AUDIENCE, 'the sink names the audience it wants');
    t.regex(none.headers.get('www-authenticate') ?? '', /^Bearer /);

    const stranger = await postReply(request, 'succeeded', await tokenOf('stranger-sa'));
    t.is(stranger.status, 403);
    t.regex(((await stranger.json()) as { error: string }).error, new RegExp(`stranger-sa.*hook ${hookName} replies as .*hook-sa`));

    const elsewhere = await postReply(request, 'succeeded', await tokenOf('hook-sa', 'https://somewhere.else'));
    t.is(elsewhere.status, 401);
    t.regex(((await elsewhere.json()) as { error: string }).error, /not valid for audience/);

    const garbled = await postReply(request, 'succeeded', 'not-a-token');
    t.is(garbled.status, 401);

    const after = await env.getRun('raw-00001');
    t.is(after?.metadata?.resourceVersion, before.metadata?.resourceVersion, 'no refused reply touched the run');
    t.is(after?.status?.hooks?.[0]?.phase, 'Requested');
    t.is((await tokenReviews()) - reviewsBefore, 3, 'one TokenReview per distinct token (the malformed one is refused before)');

    // The hook itself: a progress report, then the result, with one token: reviewed once.
    const own = await tokenOf('hook-sa');
    t.is((await postReply(request, 'progress', own)).status, 202);
    t.is((await postReply(request, 'succeeded', own)).status, 202);
    await env.waitReleased('raw-00001');
    t.is((await tokenReviews()) - reviewsBefore, 4, 'the hook’s token was reviewed once for both replies');
    // The stranger's refusal is remembered too: sending it again costs no review.
    t.is((await postReply(request, 'succeeded', await tokenOf('stranger-sa'))).status, 403);
    t.is((await tokenReviews()) - reviewsBefore, 5, 'a new token is a new review');
  },
);

test.serial('the SDK sends the token in its projected token file and the Revision is released', async (t) => {
  const hookName = `${env.instance}-sdk`;
  const dir = await mkdtemp(join(tmpdir(), 'prestart-token-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const tokenFile = join(dir, 'prestart-token');
  await writeFile(tokenFile, await tokenOf('hook-sa'));
  const hook = await serveHook({
    name: hookName,
    port: 0,
    host: '127.0.0.1',
    tokenFile,
    handler: async () => ({ succeeded: true, message: 'done' }),
  });
  t.teardown(() => hook.close());
  await env.createHook(hookName, {
    match: env.annotationMatch('ident', 'sdk'),
    identity: { serviceAccount: { namespace: env.namespace, name: 'hook-sa' } },
    delivery: { transport: 'http', url: hook.url },
  });
  await env.waitUntilStamped(hookName, { ident: 'sdk' });
  await env.createRevision('sdk-00001', { annotations: { ident: 'sdk' } });
  await env.waitReleased('sdk-00001');
  t.pass();
});

test.serial('a hook whose SDK sends another ServiceAccount’s token is refused: the Revision stays held, its run untouched', async (t) => {
  const hookName = `${env.instance}-notoken`;
  const dir = await mkdtemp(join(tmpdir(), 'prestart-token-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  // A token of the wrong ServiceAccount: the SDK sends it, the gate answers 403, the SDK gives up (a 4xx is for good).
  const tokenFile = join(dir, 'prestart-token');
  await writeFile(tokenFile, await tokenOf('stranger-sa'));
  let finished = 0;
  // The hook answers only once the test has read the run as it stood before the reply.
  let answer = (): void => undefined;
  const answered = new Promise<void>((resolve) => {
    answer = resolve;
  });
  const hook = await serveHook({
    name: hookName,
    port: 0,
    host: '127.0.0.1',
    tokenFile,
    handler: async () => {
      await answered;
      finished++;
      return { succeeded: true };
    },
  });
  t.teardown(() => hook.close());
  await env.createHook(hookName, {
    match: env.annotationMatch('ident', 'wrong'),
    identity: { serviceAccount: { namespace: env.namespace, name: 'hook-sa' } },
    delivery: { transport: 'http', url: hook.url },
  });
  await env.waitUntilStamped(hookName, { ident: 'wrong' });
  const refusedBefore = await refusedReplies();
  await env.createRevision('wrong-00001', { annotations: { ident: 'wrong' } });
  const run = await env.waitForRun('wrong-00001', 'hook Requested', (r) => r.status?.hooks?.[0]?.phase === 'Requested');
  answer();
  await waitFor(async () => finished > 0 && (await refusedReplies()) > refusedBefore, {
    timeoutMs: 30_000,
    what: 'the sink to refuse the hook’s reply',
  });
  const later = await env.getRun('wrong-00001');
  t.is(later?.status?.hooks?.[0]?.phase, 'Requested');
  t.is(later?.metadata?.resourceVersion, run.metadata?.resourceVersion);
});
