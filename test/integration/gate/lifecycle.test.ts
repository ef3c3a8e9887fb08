// Stages, failure policies, timeouts, the admin retry and cancellation, on the real control plane.

import { type GateEnv, gateEnv } from '@knative-prestart/devcluster/gate/env.ts';
import { type HookServer, type ReceivedRequest, startHookServer } from '@knative-prestart/devcluster/gate/hook-server.ts';
import type { HookOverrides } from '@knative-prestart/devcluster/gate/hooks.ts';
import { asyncReply } from '@knative-prestart/devcluster/gate/replies.ts';
import { isHeld } from '@knative-prestart/devcluster/gate/revisions.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import test from 'ava';

let env: GateEnv;
const servers: HookServer[] = [];

test.before(async () => {
  env = await gateEnv('life');
});

test.after.always(async () => {
  await Promise.all(servers.map((s) => s.close()));
  await env?.stop();
});

/** A hook that records requests and answers 202; the test replies when it wants to. */
async function recordingHook(name: string, overrides: Omit<HookOverrides, 'delivery'>) {
  const hook = await startHookServer(async () => ({ status: 202 }));
  servers.push(hook);
  const fullName = `${env.instance}-${name}`;
  await env.createHook(fullName, { ...overrides, delivery: { transport: 'http', url: hook.url } });
  const key = overrides.match?.annotation?.key;
  if (key) await env.waitUntilStamped(fullName, { [key]: 'yes' });
  return { name: fullName, server: hook };
}

const matchOn = (key: string) => env.annotationMatch(key);

const startRequests = (s: HookServer) => s.requests.filter((r) => r.data.action === 'start');

test.serial('hooks of one order run in parallel; the next order starts only when both succeeded', async (t) => {
  const a = await recordingHook('stage-a', { match: matchOn('stages'), order: 1 });
  const b = await recordingHook('stage-b', { match: matchOn('stages'), order: 1 });
  const c = await recordingHook('stage-c', { match: matchOn('stages'), order: 2 });
  await env.createRevision('stages-00001', { annotations: { stages: 'yes' } });

  const [ra, rb] = await Promise.all(
    [a, b].map((h) => waitFor(() => startRequests(h.server)[0], { timeoutMs: 30_000, what: `${h.name} to be requested` })),
  );
  t.is(startRequests(c.server).length, 0, 'order 2 waits for order 1');
  await asyncReply(ra as ReceivedRequest, 'succeeded');
  await env.waitForRun(
    'stages-00001',
    'a succeeded',
    (r) => r.status?.hooks?.some((h) => h.name === a.name && h.phase === 'Succeeded') ?? false,
  );
  t.is(startRequests(c.server).length, 0, 'order 2 still waits while b works');
  await asyncReply(rb as ReceivedRequest, 'succeeded');
  const rc = await waitFor(() => startRequests(c.server)[0], { timeoutMs: 30_000, what: 'order 2 to start' });
  t.true(isHeld(await env.getRevision('stages-00001')));
  await asyncReply(rc, 'succeeded');
  await env.waitReleased('stages-00001');
  const run = await env.waitForRun('stages-00001', 'Released', (r) => r.status?.phase === 'Released');
  t.is(run.status?.summary, '3/3');
});

test.serial('a Fail hook that fails keeps the Revision held and says why in all three places; an admin retry releases it', async (t) => {
  const h = await recordingHook('migrate', { match: matchOn('migrate'), failurePolicy: 'Fail' });
  await env.createRevision('mig-00001', { annotations: { migrate: 'yes' } });
  const first = await waitFor(() => startRequests(h.server)[0], { timeoutMs: 30_000, what: 'the first attempt' });
  t.is(first.data.attempt, 1);
  await asyncReply(first, 'failed', { message: 'migration 0042 failed: column exists' });

  const failed = await env.waitForRun('mig-00001', 'Failed', (r) => r.status?.phase === 'Failed');
  const ready = failed.status?.conditions?.find((c) => c.type === 'Ready');
  t.is(ready?.status, 'False');
  t.regex(ready?.message ?? '', /migration 0042 failed: column exists/);

  const rev = await waitFor(
    async () => {
      const r = await env.getRevision('mig-00001');
      return r.metadata?.annotations?.['prestart.dev/reason'] ? r : undefined;
    },
    { timeoutMs: 30_000, what: 'the hold reason on the Revision' },
  );
  t.true(isHeld(rev));
  const denied = await env.createDeploymentLikeKnative(rev);
  t.false(denied.created);
  if (!denied.created) t.regex(denied.message, /migration 0042 failed: column exists/, 'the policy message carries the reason');
  const warning = await waitFor(
    async () => (await env.revisionEvents('mig-00001')).find((e) => e.type === 'Warning' && /column exists/.test(e.message ?? '')),
    { timeoutMs: 30_000, what: 'a Warning event on the Revision' },
  );
  t.is(warning.involvedObject.kind, 'Revision');

  await env.annotateRun('mig-00001', { 'prestart.dev/retry': 'fixed-0042' });
  const second = await waitFor(() => startRequests(h.server).find((r) => r.data.attempt === 2), {
    timeoutMs: 30_000,
    what: 'attempt 2 after the retry',
  });
  t.not(second.ceId, first.ceId, 'a new attempt is a new request');
  await asyncReply(second, 'succeeded');
  await env.waitReleased('mig-00001');
  const after = await env.getRevision('mig-00001');
  t.is(after.metadata?.annotations?.['prestart.dev/reason'], undefined, 'the reason is cleared on release');
});

test.serial('a Fail hook that times out keeps the Revision held; an Ignore hook that fails does not', async (t) => {
  await recordingHook('slow', { match: matchOn('slow'), timeout: '2s', resendInterval: '1s', failurePolicy: 'Fail' });
  const ignored = await recordingHook('optional', { match: matchOn('optional'), failurePolicy: 'Ignore' });
  await env.createRevision('slow-00001', { annotations: { slow: 'yes' } });
  await env.createRevision('opt-00001', { annotations: { optional: 'yes' } });

  const timedOut = await env.waitForRun('slow-00001', 'TimedOut', (r) => r.status?.hooks?.[0]?.phase === 'TimedOut');
  t.is(timedOut.status?.phase, 'Failed');
  t.regex(timedOut.status?.conditions?.find((c) => c.type === 'Ready')?.reason ?? '', /TimedOut/);
  t.true(isHeld(await env.getRevision('slow-00001')));

  const req = await waitFor(() => startRequests(ignored.server)[0], { timeoutMs: 30_000, what: 'the optional hook request' });
  await asyncReply(req, 'failed', { message: 'scanner unavailable' });
  await env.waitReleased('opt-00001');
  const run = await env.waitForRun('opt-00001', 'Released', (r) => r.status?.phase === 'Released');
  t.is(run.status?.hooks?.[0]?.phase, 'Failed');
});

test.serial('an unanswered request is re-sent with the same CloudEvent id', async (t) => {
  const h = await recordingHook('resend', { match: matchOn('resend'), resendInterval: '1s', timeout: '1m' });
  await env.createRevision('resend-00001', { annotations: { resend: 'yes' } });
  const [one, two] = await waitFor(() => (startRequests(h.server).length >= 2 ? startRequests(h.server) : undefined), {
    timeoutMs: 30_000,
    what: 'a resend',
  });
  t.is(one?.ceId, two?.ceId);
  t.is(one?.data.attempt, two?.data.attempt);
});

test.serial('deleting a held Revision cancels its hooks and tells them', async (t) => {
  const h = await recordingHook('cancel', { match: matchOn('cancel') });
  await env.createRevision('gone-00001', { annotations: { cancel: 'yes' } });
  await waitFor(() => startRequests(h.server)[0], { timeoutMs: 30_000, what: 'the request' });
  await env.custom.deleteNamespacedCustomObject({
    group: 'serving.knative.dev',
    version: 'v1',
    plural: 'revisions',
    namespace: env.namespace,
    name: 'gone-00001',
  });
  const cancel = await waitFor(() => h.server.requests.find((r) => r.data.action === 'cancel'), { timeoutMs: 30_000, what: 'the cancel' });
  t.regex(String((cancel.data as unknown as { reason?: string }).reason), /deleted/);
  await waitFor(
    async () =>
      env.custom
        .getNamespacedCustomObject({
          group: 'serving.knative.dev',
          version: 'v1',
          plural: 'revisions',
          namespace: env.namespace,
          name: 'gone-00001',
        })
        .then(
          () => false,
          () => true,
        ),
    { timeoutMs: 30_000, what: 'the Revision to be gone (finalizer removed)' },
  );
});

test.serial('a Revision superseded while held is cancelled, unless traffic names it', async (t) => {
  const h = await recordingHook('supersede', { match: matchOn('supersede') });
  await env.createRevision('sup-00001', { annotations: { supersede: 'yes' }, configuration: 'sup', generation: 1 });
  await waitFor(() => startRequests(h.server).find((r) => r.data.revision.name === 'sup-00001'), {
    timeoutMs: 30_000,
    what: 'request for 00001',
  });
  await env.createRevision('sup-00002', { annotations: { supersede: 'yes' }, configuration: 'sup', generation: 2 });
  const cancelled = await env.waitForRun('sup-00001', 'Cancelled', (r) => r.status?.phase === 'Cancelled');
  t.regex(cancelled.status?.conditions?.find((c) => c.type === 'Ready')?.message ?? '', /sup-00002/);
  // The run is recorded Cancelled before the hook is told (record-then-send), so wait for the message.
  const cancel = await waitFor(() => h.server.requests.find((r) => r.data.action === 'cancel' && r.data.revision.name === 'sup-00001'), {
    timeoutMs: 30_000,
    what: 'the cancel for 00001',
  });
  t.is(cancel.data.revision.name, 'sup-00001');
  t.is((await env.waitForRun('sup-00002', 'Running', (r) => r.status?.phase === 'Running')).status?.phase, 'Running');
});
