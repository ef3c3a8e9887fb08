// Replies are bound to one run and one requested attempt. An attacker who can read the requests
// (a Trigger on the Broker, the traffic) can answer a request it has seen: the correlationid is a
// bearer token. These tests make sure that token is worth nothing beyond its own request: not
// for the run an admin created again after a failure (attempts start at 1 again), and not for a
// hook the gate has not asked yet.

import { type GateEnv, gateEnv } from '@knative-prestart/devcluster/gate/env.ts';
import { type HookServer, startHookServer } from '@knative-prestart/devcluster/gate/hook-server.ts';
import { asyncReply, completedFor } from '@knative-prestart/devcluster/gate/replies.ts';
import { isHeld } from '@knative-prestart/devcluster/gate/revisions.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import test from 'ava';
import { RUNS, type RunObject } from '../../../api/resources.ts';
import { CORRELATION_SECRET, keysOf } from '../../../gate/delivery/correlation-keys.ts';
import { buildCompleted, KeyRing, toBinary } from '../../../schemas/index.ts';

let env: GateEnv;
let hook: HookServer;

test.before(async () => {
  env = await gateEnv('runbind');
  hook = await startHookServer(async () => ({ status: 202 }));
});

test.after.always(async () => {
  await hook?.close();
  await env?.stop();
});

async function post(event: ReturnType<typeof buildCompleted>): Promise<{ status: number; error?: string }> {
  const msg = toBinary(event);
  const res = await fetch(env.gate.sinkUrl, { method: 'POST', headers: msg.headers, body: msg.body });
  const text = await res.text();
  return { status: res.status, error: text ? (JSON.parse(text) as { error?: string }).error : undefined };
}

const requestsFor = (revision: string) => hook.requests.filter((r) => r.data.revision.name === revision && r.data.action === 'start');

test.serial('a reply captured from a run that failed and was deleted is refused for the run created after it', async (t) => {
  const hookName = `${env.instance}-migrate`;
  await env.createHook(hookName, {
    match: env.annotationMatch('replay', 'yes'),
    timeout: '10m',
    resendInterval: '10m',
    delivery: { transport: 'http', url: hook.url },
  });
  await env.waitUntilStamped(hookName, { replay: 'yes' });
  await env.createRevision('replay-00001', { annotations: { replay: 'yes' } });

  const first = await waitFor(() => requestsFor('replay-00001')[0], { timeoutMs: 30_000, what: 'the first request' });
  // The attacker reads the request and keeps a success for it; the hook itself reports a failure.
  const captured = completedFor(first, 'succeeded', { message: 'all good, trust me' });
  t.is((await asyncReply(first, 'failed', { message: 'migration 0042 failed' })).status, 202);
  const failed = await env.waitForRun('replay-00001', 'Failed', (r) => r.status?.phase === 'Failed');

  // The admin starts over, as the hold reason says: a new run, attempt 1 again.
  await env.custom.deleteNamespacedCustomObject({ ...RUNS, namespace: env.namespace, name: 'replay-00001' });
  const second = await waitFor(() => requestsFor('replay-00001')[1], { timeoutMs: 30_000, what: 'the request of the new run' });
  const recreated = await env.waitForRun(
    'replay-00001',
    'the new run waiting for its hook',
    (r) => r.metadata?.uid !== failed.metadata?.uid && r.status?.hooks?.[0]?.phase === 'Requested',
  );
  t.is(second.data.attempt, 1, 'the new run starts at attempt 1 again');
  t.is(first.data.attempt, 1);
  t.not(second.ceId, first.ceId, 'a new request id: a hook that remembers the old one runs again instead of answering from memory');
  t.true(second.ceId.startsWith(`${recreated.metadata?.uid}/`), `the id names the new run: ${second.ceId}`);
  t.not(second.correlationid, first.correlationid);

  const answer = await post(captured);
  t.is(answer.status, 422, 'refused for good: a Broker does not redeliver a 422');
  t.regex(
    answer.error ?? '',
    new RegExp(
      `^reply for an earlier PrestartRun ${env.namespace}/replay-00001 \\(uid ${failed.metadata?.uid}, now ${recreated.metadata?.uid}\\): the run was deleted and started over`,
    ),
  );
  const after = (await env.getRun('replay-00001')) as RunObject;
  t.is(after.metadata?.resourceVersion, recreated.metadata?.resourceVersion, 'the new run did not change');
  t.is(after.status?.hooks?.[0]?.phase, 'Requested');
  t.true(isHeld(await env.getRevision('replay-00001')), 'the Revision stays held');

  // The hook's own answer to the new request still releases.
  t.is((await asyncReply(second, 'succeeded')).status, 202);
  await env.waitReleased('replay-00001');
});

test.serial('a final reply for a later-order hook, sent before the earlier order finished, is refused and changes nothing', async (t) => {
  const first = `${env.instance}-schema`;
  const later = `${env.instance}-warm`;
  for (const [name, order] of [
    [first, 1],
    [later, 2],
  ] as const) {
    await env.createHook(name, {
      match: env.annotationMatch('ordered', 'yes'),
      order,
      timeout: '10m',
      resendInterval: '10m',
      delivery: { transport: 'http', url: hook.url },
    });
  }
  await env.waitUntilStamped(later, { ordered: 'yes' });
  const rev = await env.createRevision('ordered-00001', { annotations: { ordered: 'yes' } });
  const run = await env.waitForRun('ordered-00001', `${first} Requested`, (r) =>
    Boolean(r.status?.hooks?.some((h) => h.name === first && h.phase === 'Requested')),
  );
  t.like(
    run.status?.hooks?.find((h) => h.name === later),
    { phase: 'Pending', attempt: 1 },
  );

  // Whoever holds a genuine id for the later hook (here: the gate's own key, read as an admin).
  const secret = await env.core.readNamespacedSecret({ name: CORRELATION_SECRET, namespace: 'knative-prestart' });
  const correlationid = new KeyRing(keysOf(secret)).mint({
    namespace: env.namespace,
    revision: 'ordered-00001',
    revisionUID: rev.metadata?.uid ?? '',
    runUID: run.metadata?.uid ?? '',
    hook: later,
    attempt: 1,
  });
  const early = buildCompleted({ request: { correlationid, hook: later, attempt: 1 }, outcome: 'succeeded', source: '/attacker' });
  const answer = await post(early);
  t.is(answer.status, 422);
  t.is(answer.error, `hook ${later} has not been requested yet (attempt 1 is Pending); succeeded reply refused`);
  const after = (await env.getRun('ordered-00001')) as RunObject;
  t.is(after.metadata?.resourceVersion, run.metadata?.resourceVersion, 'the run did not change');
  t.true(isHeld(await env.getRevision('ordered-00001')));
  t.false(
    hook.requests.some((r) => r.data.hook.name === later),
    `${later} was never asked`,
  );
});
