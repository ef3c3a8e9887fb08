// The simulator against real hooks: what the gate would decide, from the gate's own core.
import test from 'ava';
import { start as startExample } from '../../../../examples/typescript-binding-hook/index.ts';
import type { ReceivedReply } from '../../../../hooks/conformance/reply-sink.ts';
import { formatSimulation, simulate } from '../../../../hooks/simulator/index.ts';
import { start as nonCloudEventBody } from '../../../fixtures/broken-hooks/non-cloudevent-body.ts';
import { silent } from '../_support.ts';

async function example(t: import('ava').ExecutionContext) {
  const hook = await startExample({ port: 0, host: '127.0.0.1', durationMs: 200, logger: silent });
  t.teardown(() => hook.close());
  return hook;
}

test('the example hook gets the Revision released with its Secret as env and volume', async (t) => {
  const hook = await example(t);
  const live: ReceivedReply[] = [];
  const result = await simulate(hook.url, {
    hook: 'provision-db',
    params: { secretName: 'orders-db' },
    annotations: { team: 'payments' },
    onReply: (r) => live.push(r),
  });
  const data = result.request.data as { revision: { namespace: string; name: string; annotations: Record<string, string> } };
  t.like(data.revision, { namespace: 'demo', name: 'demo-00001' });
  t.is(data.revision.annotations.team, 'payments');
  t.is(result.answer.status, 202);
  t.is(live.length, result.replies.length, 'every reply was reported as it came');
  t.true(result.verdict.released);
  t.deepEqual(result.verdict.injected, [
    'env DATABASE_URL = key "uri" of Secret orders-db',
    'env DATABASE_PASSWORD = key "password" of Secret orders-db',
    'volume: Secret orders-db mounted read-only at /bindings/db (SERVICE_BINDING_ROOT=/bindings)',
  ]);
  const text = formatSimulation(result);
  t.regex(text, /^decision : RELEASED \(1\/1 hooks succeeded\)$/m);
  t.regex(
    text,
    /"path":"\/spec\/containers\/0\/volumeMounts","value":\[\{"name":"prestart-db","mountPath":"\/bindings\/db","readOnly":true\}\]/,
  );
});

test('a failing hook leaves the Revision held, with the reason and the retry command', async (t) => {
  const hook = await example(t);
  const result = await simulate(hook.url, { hook: 'provision-db', params: { fail: true } });
  t.false(result.verdict.released);
  t.regex(
    result.verdict.why,
    /^held: hook provision-db failed: demo: the database server refused to create user "app"; retry: kubectl annotate prestartrun demo-00001 -n demo prestart\.dev\/retry=2 --overwrite$/,
  );
});

test('a hook the gate would refuse (200 with a body that is not a CloudEvent) fails as it would in the cluster', async (t) => {
  const hook = await nonCloudEventBody('demo-hook');
  t.teardown(() => hook.close());
  const result = await simulate(hook.url);
  t.false(result.verdict.released);
  t.regex(
    result.verdict.why,
    /^held: hook demo-hook failed: the hook could not take the request: POST http:\/\/127\.0\.0\.1:\d+: hook answered 200 with a body that is not a CloudEvent/,
  );
});

test('a hook that never replies leaves the Revision held until the deadline', async (t) => {
  const hook = await example(t);
  const result = await simulate(hook.url, { hook: 'not-served-here', timeoutMs: 300 });
  t.false(result.verdict.released);
  t.regex(result.verdict.why, /^held: no final reply within 0.3s; the gate re-sends the request every 30s until the deadline/);
});
