// A hook that answers in the HTTP response (200 + completed CloudEvent) goes through the same
// intake as a reply posted to the sink; an answer the intake refuses, or a request the hook
// refuses for good, fails the hook at once with the core's message instead of waiting for the
// timeout.

import { type GateEnv, gateEnv } from '@knative-prestart/devcluster/gate/env.ts';
import { type ReceivedRequest, startHookServer } from '@knative-prestart/devcluster/gate/hook-server.ts';
import { syncReply } from '@knative-prestart/devcluster/gate/replies.ts';
import { isHeld } from '@knative-prestart/devcluster/gate/revisions.ts';
import test from 'ava';

let env: GateEnv;

test.before(async () => {
  env = await gateEnv('sync');
});

test.after.always(async () => {
  await env?.stop();
});

/** A hook answering each request with `answer`, for Revisions annotated `<key>: yes`. */
async function hookAnswering(
  key: string,
  answer: (req: ReceivedRequest) => { status: number; headers?: Record<string, string>; body?: string },
) {
  const server = await startHookServer(async (req) => answer(req));
  const name = `${env.instance}-${key}`;
  // Long resend and timeout: whatever happens to the hook happens because of its first answer.
  await env.createHook(name, {
    match: env.annotationMatch(key, 'yes'),
    timeout: '10m',
    resendInterval: '10m',
    delivery: { transport: 'http', url: server.url },
  });
  await env.waitUntilStamped(name, { [key]: 'yes' });
  return { name, server };
}

test('a synchronous success is recorded and releases the Revision', async (t) => {
  const hook = await hookAnswering('sync-ok', (req) => syncReply(req, 'succeeded', { message: 'done at once' }));
  t.teardown(() => hook.server.close());
  await env.createRevision('sync-ok-00001', { annotations: { 'sync-ok': 'yes' } });
  await env.waitReleased('sync-ok-00001');
  const run = await env.waitForRun('sync-ok-00001', 'Released', (r) => r.status?.phase === 'Released');
  t.like(run.status?.hooks?.[0], { name: hook.name, phase: 'Succeeded', message: 'done at once' });
  t.is(hook.server.requests.length, 1);
});

test('a synchronous reply the intake refuses fails the hook with the reason', async (t) => {
  // A replyid that does not verify: the sink would answer 403 to it.
  const hook = await hookAnswering('sync-bad', (req) =>
    syncReply({ ...req, correlationid: `${req.correlationid.slice(0, -2)}xx` }, 'succeeded'),
  );
  t.teardown(() => hook.server.close());
  await env.createRevision('sync-bad-00001', { annotations: { 'sync-bad': 'yes' } });
  const run = await env.waitForRun('sync-bad-00001', 'Failed', (r) => r.status?.phase === 'Failed');
  t.regex(run.status?.hooks?.[0]?.message ?? '', /^the hook answered with an invalid reply: /);
  t.true(isHeld(await env.getRevision('sync-bad-00001')));
});

test('a request the hook refuses for good fails the hook with what it answered', async (t) => {
  const hook = await hookAnswering('sync-404', () => ({ status: 404, body: 'no such route' }));
  t.teardown(() => hook.server.close());
  await env.createRevision('sync-404-00001', { annotations: { 'sync-404': 'yes' } });
  const run = await env.waitForRun('sync-404-00001', 'Failed', (r) => r.status?.phase === 'Failed');
  t.regex(
    run.status?.hooks?.[0]?.message ?? '',
    /^the hook could not take the request: POST http:\/\/127\.0\.0\.1:\d+\/: hook answered 404: no such route/,
  );
  t.true(isHeld(await env.getRevision('sync-404-00001')));
});
