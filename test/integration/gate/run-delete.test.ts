// `kubectl delete prestartrun <name>` starts a held Revision's hooks over, as the gate's own hold
// reason tells admins to do: the gate sees the run go, creates a new one at once (not at the
// next resync, minutes later) and asks the hook again; the new reply releases the Revision.

import { type GateEnv, gateEnv } from '@knative-prestart/devcluster/gate/env.ts';
import { startHookServer } from '@knative-prestart/devcluster/gate/hook-server.ts';
import { asyncReply } from '@knative-prestart/devcluster/gate/replies.ts';
import { isHeld } from '@knative-prestart/devcluster/gate/revisions.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import test from 'ava';
import { RUNS } from '../../../api/resources.ts';
import { REASON_ANNOTATION } from '../../../api/types.ts';

let env: GateEnv;

test.before(async () => {
  env = await gateEnv('rundel');
});

test.after.always(async () => {
  await env?.stop();
});

test('deleting the PrestartRun of a held Revision re-creates it, re-sends the request and releases on the new reply', async (t) => {
  const hook = await startHookServer(async () => ({ status: 202 }));
  t.teardown(() => hook.close());
  const hookName = `${env.instance}-migrate`;
  // No resend within the test: every request the hook gets comes from a new decision.
  await env.createHook(hookName, {
    match: env.annotationMatch('migrate', 'yes'),
    timeout: '10m',
    resendInterval: '10m',
    delivery: { transport: 'http', url: hook.url },
  });
  await env.waitUntilStamped(hookName, { migrate: 'yes' });
  await env.createRevision('mig-00001', { annotations: { migrate: 'yes' } });

  const first = await waitFor(() => hook.requests[0], { timeoutMs: 30_000, what: 'the first request' });
  await asyncReply(first, 'failed', { message: 'migration 0042 failed' });
  const failed = await env.waitForRun('mig-00001', 'Failed', (r) => r.status?.phase === 'Failed');
  await waitFor(
    async () => /migration 0042 failed/.test((await env.getRevision('mig-00001')).metadata?.annotations?.[REASON_ANNOTATION] ?? ''),
    {
      what: 'the hold reason on the Revision',
    },
  );

  await env.custom.deleteNamespacedCustomObject({ ...RUNS, namespace: env.namespace, name: 'mig-00001' });
  const t0 = Date.now();
  const recreated = await env.waitForRun(
    'mig-00001',
    'a new run',
    (r) => r.metadata?.uid !== failed.metadata?.uid && r.status?.hooks?.[0]?.phase === 'Requested',
    15_000,
  );
  t.log(`new run Requested ${Date.now() - t0} ms after the delete`);
  t.is(recreated.status?.phase, 'Running');
  t.is(recreated.status?.hooks?.[0]?.attempt, 1, 'a new run starts at attempt 1');
  const second = await waitFor(() => hook.requests[1], { timeoutMs: 15_000, what: 'the hook to be asked again' });
  t.is(second.data.action, 'start');
  t.is(second.data.revision.name, 'mig-00001');
  t.true(isHeld(await env.getRevision('mig-00001')), 'still held while the hook works again');

  const answer = await asyncReply(second, 'succeeded');
  t.is(answer.status, 202);
  const released = await env.waitReleased('mig-00001');
  t.is(released.metadata?.annotations?.[REASON_ANNOTATION], undefined, 'the old failure is no longer the hold reason');
  const run = await env.waitForRun('mig-00001', 'Released', (r) => r.status?.phase === 'Released');
  t.is(run.metadata?.uid, recreated.metadata?.uid);
  t.is(hook.requests.length, 2, 'one request per run');
});
