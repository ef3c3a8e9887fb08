// Bad input to the running gate gets a clear error and changes nothing: replies for unknown
// Revisions or hooks, stale attempts, duplicates, forgeries, malformed and oversized bodies, and
// invalid PrestartHooks (refused by the CRD schema and CEL at apply time).

import { type GateEnv, gateEnv } from '@knative-prestart/devcluster/gate/env.ts';
import { type HookServer, type ReceivedRequest, startHookServer } from '@knative-prestart/devcluster/gate/hook-server.ts';
import type { HookOverrides } from '@knative-prestart/devcluster/gate/hooks.ts';
import { asyncReply, completedFor } from '@knative-prestart/devcluster/gate/replies.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import { ApiException } from '@kubernetes/client-node';
import test from 'ava';
import type { RunObject } from '../../../api/resources.ts';
import { CORRELATION_SECRET } from '../../../gate/delivery/correlation-keys.ts';
import { buildCompleted, KeyRing, toBinary, toStructured } from '../../../schemas/index.ts';

let env: GateEnv;
let keys: KeyRing;
let hookName: string;
let hookServer: HookServer;
let request: ReceivedRequest;
let revisionUID: string;
let runUID: string;
const requests: ReceivedRequest[] = [];

test.before(async () => {
  env = await gateEnv('bad');
  const secret = await env.core.readNamespacedSecret({ name: CORRELATION_SECRET, namespace: 'knative-prestart' });
  keys = KeyRing.fromHex(
    ...Buffer.from(secret.data?.keys ?? '', 'base64')
      .toString('utf8')
      .split(','),
  );
  hookServer = await startHookServer(async (req) => {
    requests.push(req);
    return { status: 202 };
  });
  hookName = `${env.instance}-db`;
  await env.createHook(hookName, {
    match: env.annotationMatch('bad'),
    resendInterval: '10m',
    timeout: '10m',
    delivery: { transport: 'http', url: hookServer.url },
  });
  await env.waitUntilStamped(hookName, { bad: 'yes' });
  const rev = await env.createRevision('bad-00001', { annotations: { bad: 'yes' } });
  revisionUID = rev.metadata?.uid ?? '';
  request = await waitFor(() => requests[0], { timeoutMs: 30_000, what: 'the request' });
  const run = await env.waitForRun('bad-00001', 'Requested', (r) => r.status?.hooks?.[0]?.phase === 'Requested');
  runUID = run.metadata?.uid ?? '';
});

test.after.always(async () => {
  await hookServer?.close();
  await env?.stop();
});

async function post(body: string | Uint8Array, headers: Record<string, string>) {
  const res = await fetch(env.gate.sinkUrl, { method: 'POST', headers, body });
  const text = await res.text();
  return { status: res.status, error: text ? (JSON.parse(text) as { error?: string }).error : undefined };
}

async function postEvent(event: ReturnType<typeof buildCompleted>, mode: 'binary' | 'structured' = 'binary') {
  const msg = mode === 'binary' ? toBinary(event) : toStructured(event);
  return post(msg.body, msg.headers);
}

const snapshot = async (): Promise<RunObject> => (await env.getRun('bad-00001')) as RunObject;

/** Asserts the reply was refused with `status` and a reason matching `reason`, and the run is untouched. */
async function refused(
  t: import('ava').ExecutionContext,
  send: () => Promise<{ status: number; error?: string }>,
  status: number,
  reason: RegExp,
) {
  const before = await snapshot();
  const res = await send();
  t.is(res.status, status);
  t.regex(res.error ?? '', reason);
  const after = await snapshot();
  t.is(after.metadata?.resourceVersion, before.metadata?.resourceVersion, 'the PrestartRun did not change');
}

function replyFor(ref: { revision: string; uid: string; hook: string; attempt: number }) {
  const correlationid = keys.mint({
    namespace: env.namespace,
    revision: ref.revision,
    revisionUID: ref.uid,
    runUID,
    hook: ref.hook,
    attempt: ref.attempt,
  });
  return buildCompleted({ request: { correlationid, hook: ref.hook, attempt: ref.attempt }, outcome: 'succeeded', source: '/attacker' });
}

test.serial('a reply for an unknown Revision is refused', async (t) => {
  await refused(t, () => postEvent(replyFor({ revision: 'nope-00001', uid: 'x', hook: hookName, attempt: 1 })), 422, /unknown revision/);
});

test.serial('a reply for a hook the Revision does not have is refused', async (t) => {
  await refused(
    t,
    () => postEvent(replyFor({ revision: 'bad-00001', uid: revisionUID, hook: 'other-hook', attempt: 1 })),
    422,
    /unknown hook|other-hook/,
  );
});

test.serial('a reply for another Revision with the same name (different UID) is refused', async (t) => {
  await refused(t, () => postEvent(replyFor({ revision: 'bad-00001', uid: 'another-uid', hook: hookName, attempt: 1 })), 422, /UID|uid/);
});

test.serial('a forged replyid (not signed with the gate key) is refused', async (t) => {
  const forger = new KeyRing([KeyRing.generateKey()]);
  const correlationid = forger.mint({ namespace: env.namespace, revision: 'bad-00001', revisionUID, runUID, hook: hookName, attempt: 1 });
  const event = buildCompleted({ request: { correlationid, hook: hookName, attempt: 1 }, outcome: 'succeeded', source: '/attacker' });
  await refused(t, () => postEvent(event), 403, /replyid/);
});

test.serial('malformed, non-CloudEvent and oversized bodies are refused', async (t) => {
  await refused(t, () => post('{"hello":"world"}', { 'content-type': 'application/json' }), 400, /.+/);
  await refused(t, () => post('not json at all', { 'content-type': 'application/cloudevents+json' }), 400, /.+/);
  const big = toStructured(completedFor(request, 'succeeded', { message: 'x' }));
  const padded = JSON.stringify({ ...JSON.parse(String(big.body)), pad: 'x'.repeat(200 * 1024) });
  await refused(t, () => post(padded, big.headers), 413, /.+/);
});

test.serial('a duplicate reply is acknowledged and applied once; a stale attempt is refused', async (t) => {
  const event = completedFor(request, 'failed', { message: 'first answer', id: 'reply-1' });
  t.is((await postEvent(event)).status, 202);
  const failed = await env.waitForRun('bad-00001', 'Failed', (r) => r.status?.hooks?.[0]?.phase === 'Failed');
  const answeredAt = failed.status?.hooks?.[0]?.answeredAt;
  const settled = await env.waitForRun('bad-00001', 'run phase Failed', (r) => r.status?.phase === 'Failed');
  t.is((await postEvent(event, 'structured')).status, 202, 'the same reply again, in the other mode');
  const after = await snapshot();
  t.is(after.metadata?.resourceVersion, settled.metadata?.resourceVersion, 'the duplicate changed nothing');
  t.is(after.status?.hooks?.[0]?.answeredAt, answeredAt);

  await env.annotateRun('bad-00001', { 'prestart.dev/retry': 'again' });
  await waitFor(() => requests.find((r) => r.data.attempt === 2), { timeoutMs: 30_000, what: 'attempt 2' });
  await env.waitForRun(
    'bad-00001',
    'attempt 2 Requested',
    (r) => r.status?.hooks?.[0]?.attempt === 2 && r.status.hooks[0].phase === 'Requested',
  );
  const stale = await asyncReply(request, 'succeeded', { message: 'late answer to attempt 1' });
  t.is(stale.status, 422);
  t.regex(((await stale.json()) as { error: string }).error, /stale/);
  t.is((await snapshot()).status?.hooks?.[0]?.phase, 'Requested');
});

test('an invalid PrestartHook is refused at apply time with the reason', async (t) => {
  const invalid: Array<[string, Record<string, unknown>, RegExp]> = [
    ['http without a url', { delivery: { transport: 'http' } }, /url/],
    ['a timeout that is not a duration', { timeout: 'soon', delivery: { transport: 'http', url: 'http://127.0.0.1:1/' } }, /timeout/],
    ['an order out of range', { order: 1000, delivery: { transport: 'http', url: 'http://127.0.0.1:1/' } }, /order/],
    ['a broker without a subscriber', { delivery: { transport: 'broker', broker: { name: 'default', namespace: 'x' } } }, /subscriber/],
    [
      'an unknown failure policy',
      { failurePolicy: 'Sometimes', delivery: { transport: 'http', url: 'http://127.0.0.1:1/' } },
      /failurePolicy/,
    ],
  ];
  for (const [what, spec, reason] of invalid) {
    // Over the env's defaults, which the CRD accepts: the refusal is the invalid field's.
    const err = await env.createHook(`${env.instance}-invalid`, spec as unknown as HookOverrides).then(
      () => undefined,
      (e: unknown) => e,
    );
    t.true(err instanceof ApiException && err.code === 422, `${what} is refused`);
    if (err instanceof ApiException) t.regex(String(err.body), reason, what);
  }
});
