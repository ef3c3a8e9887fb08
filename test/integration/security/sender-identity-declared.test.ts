// Sender identity as the release runs it (`--reply-identity declared`, config/500-gate.yaml), on the
// real control plane with real ServiceAccount tokens and TokenReviews: a hook that names its
// ServiceAccount can be answered only with that ServiceAccount's token, so the harvested-replyid
// attack is closed for it; a hook that names none is still answered on its signed replyid, so an
// install that predates identity keeps working; a hook deleted while a run waits on it is answered by nobody.

import { type GateEnv, gateEnv } from '@knative-prestart/devcluster/gate/env.ts';
import { type ReceivedRequest, startHookServer } from '@knative-prestart/devcluster/gate/hook-server.ts';
import { completedFor } from '@knative-prestart/devcluster/gate/replies.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import test from 'ava';
import { toBinary } from '../../../schemas/index.ts';
import { AUDIENCE_HEADER, DEFAULT_SINK_AUDIENCE } from '../../../sinks/identity.ts';

let env: GateEnv;

test.before(async () => {
  env = await gateEnv('declared', { inProcess: false });
  await env.startGate({ senderIdentity: { replies: 'declared' } });
  await env.core.createNamespacedServiceAccount({ namespace: env.namespace, body: { metadata: { name: 'hook-sa' } } });
});

test.after.always(async () => {
  await env?.stop();
});

async function tokenOf(name: string): Promise<string> {
  const answer = await env.core.createNamespacedServiceAccountToken({
    name,
    namespace: env.namespace,
    body: { spec: { audiences: [DEFAULT_SINK_AUDIENCE], expirationSeconds: 600 } },
  });
  return answer.status?.token ?? '';
}

function postReply(req: ReceivedRequest, token?: string): Promise<Response> {
  const msg = toBinary(completedFor(req, 'succeeded'));
  const headers: Record<string, string> = { ...msg.headers, ...(token === undefined ? {} : { authorization: `Bearer ${token}` }) };
  return fetch(req.data.replyTo ?? '', { method: 'POST', headers, body: msg.body });
}

/** A hook that records its requests and answers later; `identity` as its PrestartHook names it. */
async function heldBy(tag: string, identity?: { serviceAccount: { namespace: string; name: string } }) {
  const pending: ReceivedRequest[] = [];
  const hook = await startHookServer(async (req) => {
    pending.push(req);
    return { status: 202 };
  });
  const hookName = `${env.instance}-${tag}`;
  await env.createHook(hookName, {
    match: env.annotationMatch('declared', tag),
    ...(identity ? { identity } : {}),
    delivery: { transport: 'http', url: hook.url },
  });
  await env.waitUntilStamped(hookName, { declared: tag });
  const revision = `${tag}-00001`;
  await env.createRevision(revision, { annotations: { declared: tag } });
  const request = await waitFor(() => pending[0], { timeoutMs: 30_000, what: `hook ${hookName} to receive its request` });
  await env.waitForRun(revision, 'hook Requested', (r) => r.status?.hooks?.[0]?.phase === 'Requested');
  return { hook, hookName, revision, request };
}

test.serial('a hook that names its ServiceAccount: the harvested replyid alone is refused, the hook’s own token releases', async (t) => {
  const { hook, hookName, revision, request } = await heldBy('named', { serviceAccount: { namespace: env.namespace, name: 'hook-sa' } });
  t.teardown(() => hook.close());
  const before = await env.getRun(revision);

  const stranger = await postReply(request);
  t.is(stranger.status, 401);
  t.regex(
    ((await stranger.json()) as { error: string }).error,
    new RegExp(
      `reply for hook ${hookName} needs a bearer token \\(it replies as system:serviceaccount:${env.namespace}:hook-sa directly\\)`,
    ),
  );
  t.is(stranger.headers.get(AUDIENCE_HEADER), DEFAULT_SINK_AUDIENCE, 'the sink names the audience it wants');
  const after = await env.getRun(revision);
  t.is(after?.metadata?.resourceVersion, before?.metadata?.resourceVersion, 'the refused reply touched nothing');

  t.is((await postReply(request, await tokenOf('hook-sa'))).status, 202);
  await env.waitReleased(revision);
});

test.serial('a hook that names no ServiceAccount is answered on its signed replyid, as before identity', async (t) => {
  const { hook, revision, request } = await heldBy('unnamed');
  t.teardown(() => hook.close());
  t.is((await postReply(request)).status, 202);
  await env.waitReleased(revision);
});

test.serial('a hook deleted while its run waits: neither the harvested replyid nor any token answers for it', async (t) => {
  const { hook, hookName, revision, request } = await heldBy('deleted', { serviceAccount: { namespace: env.namespace, name: 'hook-sa' } });
  t.teardown(() => hook.close());
  await env.deleteHook(hookName);
  // Once the gate's cache has lost the hook, it no longer knows whom the hook replied as.
  const stranger = await waitFor(
    async () => {
      const res = await postReply(request);
      return res.status === 403 ? res : undefined;
    },
    { what: 'the sink to refuse a reply for the deleted hook' },
  );
  t.regex(((await stranger.json()) as { error: string }).error, new RegExp(`no PrestartHook ${hookName} exists now`));
  t.is((await postReply(request, await tokenOf('hook-sa'))).status, 403, 'not even its former ServiceAccount');
  const run = await env.getRun(revision);
  t.is(run?.status?.hooks?.[0]?.phase, 'Requested', 'the run still waits');
  t.true((await env.getRevision(revision)).metadata?.labels?.['prestart.dev/hold'] === 'true', 'still held');
});
