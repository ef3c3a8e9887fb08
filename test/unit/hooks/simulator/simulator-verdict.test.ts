// What the gate's core decides from a hook's replies, for the simulator's made-up Revision.
import test from 'ava';
import type { Reply } from '../../../../api/types.ts';
import { buildScenario, DEMO_REVISION, type Scenario } from '../../../../hooks/simulator/scenario.ts';
import { describeContributions, judge } from '../../../../hooks/simulator/verdict.ts';

const NOW = new Date('2025-06-01T12:00:00.000Z');

function scenario(over: Partial<Parameters<typeof buildScenario>[0]> = {}): Scenario {
  return buildScenario({ hook: 'provision-db', url: 'http://127.0.0.1:9', params: { secretName: 'orders-db' }, now: NOW, ...over });
}

function replyFor(s: Scenario, outcome: Reply['outcome'], extra: Partial<Reply> = {}): Reply {
  return {
    namespace: 'demo',
    revision: DEMO_REVISION,
    revisionUID: s.run.spec.revisionUID,
    runUID: s.run.uid,
    hook: 'provision-db',
    attempt: 1,
    outcome,
    eventKey: '/hook#1',
    ...extra,
  };
}

test('the scenario is what the gate would send: attempt 1, its deadline, the params and allowed kinds of the PrestartHook', (t) => {
  const s = scenario({ allowed: ['env'], annotations: { team: 'payments' } });
  t.is(s.send.attempt, 1);
  t.is(s.send.deadline, '2025-06-01T12:10:00.000Z');
  t.deepEqual(s.send.hook.params, { secretName: 'orders-db' });
  t.deepEqual(s.send.hook.allowedContributions, ['env']);
  t.is(s.observed.revision.annotations.team, 'payments');
  t.is(s.observed.revision.annotations['prestart.dev/hooks'], '["provision-db"]');
  t.is(s.run.status?.hooks[0]?.phase, 'Requested');
});

test('a success with contributions releases the Revision and shows the pod patch', (t) => {
  const s = scenario();
  const v = judge(
    s,
    [
      replyFor(s, 'progress', { progress: 40, message: 'creating user' }),
      replyFor(s, 'succeeded', {
        message: 'ready',
        contributions: [
          { name: 'db-env', secretName: 'orders-db', as: 'env', env: { DATABASE_URL: 'uri' } },
          { name: 'db', secretName: 'orders-db', as: 'volume' },
        ],
      }),
    ],
    NOW,
  );
  t.true(v.released);
  t.is(v.runPhase, 'Released');
  t.is(v.why, 'released: 1/1 hooks succeeded');
  t.deepEqual(v.steps, ['progress 40%: creating user', 'succeeded: ready']);
  t.deepEqual(v.injected, [
    'env DATABASE_URL = key "uri" of Secret orders-db',
    'volume: Secret orders-db mounted read-only at /bindings/db (SERVICE_BINDING_ROOT=/bindings)',
  ]);
  t.deepEqual(v.patch[0], { op: 'add', path: '/spec/volumes', value: [{ name: 'prestart-db', secret: { secretName: 'orders-db' } }] });
  t.true(v.patch.some((op) => op.op === 'add' && op.path === '/spec/containers/0/volumeMounts'));
  t.false(
    v.patch.some((op) => op.path.startsWith('/spec/containers/1')),
    'queue-proxy gets nothing',
  );
});

test('a contribution of a kind the PrestartHook does not allow is dropped with a note', (t) => {
  const s = scenario({ allowed: ['env'] });
  const v = judge(s, [replyFor(s, 'succeeded', { contributions: [{ name: 'db', secretName: 'orders-db', as: 'volume' }] })], NOW);
  t.true(v.released);
  t.deepEqual(v.contributions, []);
  t.regex(v.steps[0] ?? '', /dropped contributions: db: kind volume not allowed \(allowed: env\)/);
});

test('a failure holds the Revision with the reason and the retry command', (t) => {
  const s = scenario();
  const v = judge(s, [replyFor(s, 'failed', { message: 'quota exceeded' })], NOW);
  t.false(v.released);
  t.is(v.hookPhase, 'Failed');
  t.is(
    v.why,
    'held: hook provision-db failed: quota exceeded; retry: kubectl annotate prestartrun demo-00001 -n demo prestart.dev/retry=2 --overwrite',
  );
  t.deepEqual(v.patch, []);
});

test('without a final reply the Revision stays held until the deadline', (t) => {
  const v = judge(scenario(), [], NOW, 'no final reply within 60s');
  t.false(v.released);
  t.is(v.hookPhase, 'Requested');
  t.is(
    v.why,
    'held: no final reply within 60s; the gate re-sends the request every 30s until the deadline 2025-06-01T12:10:00.000Z, then the hook is TimedOut',
  );
});

test('a repeated final reply is a duplicate', (t) => {
  const s = scenario();
  const v = judge(s, [replyFor(s, 'succeeded'), replyFor(s, 'succeeded')], NOW);
  t.is(v.steps[1], 'succeeded: a duplicate, nothing changes');
});

test('envFrom contributions read as such', (t) => {
  t.deepEqual(describeContributions([{ name: 'cfg', secretName: 'app-config', as: 'envFrom' }]), [
    'envFrom: every key of Secret app-config as an env var',
  ]);
});
