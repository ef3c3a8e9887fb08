// The text of `kn prestart list/get/why`, from PrestartRuns as the apiserver returns them.
import test from 'ava';
import type { RunObject } from '../../../../api/resources.ts';
import type { HookStatus, PrestartRunStatus } from '../../../../api/types.ts';
import { humanDuration, progressBar, renderRunList, renderRunTree, whyParagraph } from '../../../../cli/prestart/render.ts';

const NOW = new Date('2025-01-01T00:10:00.000Z');
const snapshot = (name: string, order: number) => ({
  name,
  order,
  timeoutSeconds: 600,
  resendIntervalSeconds: 30,
  failurePolicy: 'Fail' as const,
  allowedContributions: [],
  delivery: { transport: 'http' as const, url: 'http://x/' },
});

function run(phase: PrestartRunStatus['phase'], hooks: HookStatus[], ready = ''): RunObject {
  return {
    metadata: { name: 'demo-00002', namespace: 'team-a', creationTimestamp: new Date('2025-01-01T00:05:00.000Z') },
    spec: { revisionUID: 'u', hooks: [snapshot('db', 0), snapshot('migrate', 1)] },
    status: {
      phase,
      hooks,
      conditions: [{ type: 'Ready', status: 'Unknown', message: ready, lastTransitionTime: '' }],
      summary: `${hooks.filter((h) => h.phase === 'Succeeded').length}/${hooks.length}`,
    },
  };
}

const running = run(
  'Running',
  [
    { name: 'db', phase: 'Succeeded', attempt: 1 },
    {
      name: 'migrate',
      phase: 'Requested',
      attempt: 1,
      progress: 40,
      message: 'migrating table 3/7',
      deadline: '2025-01-01T00:14:12.000Z',
      details: 'kubectl logs job/migrate-demo -n team-a',
    },
  ],
  'waiting for migrate',
);
const failed = run('Failed', [
  { name: 'db', phase: 'Succeeded', attempt: 1 },
  { name: 'migrate', phase: 'Failed', attempt: 2, message: 'quota exceeded', details: 'https://ci.example/run/7' },
]);

test('durations and the progress bar', (t) => {
  t.is(humanDuration(252_000), '4m12s');
  t.is(humanDuration(3_780_000), '1h3m');
  t.is(humanDuration(-5), '0s');
  t.is(progressBar(40), '[####------]  40%');
  t.is(progressBar(undefined), '');
});

test('get: a tree of the hooks by order with phase, progress bar, countdown, last message and details link', (t) => {
  t.is(
    renderRunTree(running, NOW),
    [
      'Name:       demo-00002',
      'Namespace:  team-a',
      'Status:     ◌ Running (1/2 hooks succeeded)',
      'Message:    waiting for migrate',
      '',
      'demo-00002 (PrestartRun)',
      '├── order 0',
      '│   └── ✔ db  Succeeded  attempt 1',
      '└── order 1',
      '    └── ◌ migrate  Requested  attempt 1  [####------]  40%  deadline in 4m12s',
      '            migrating table 3/7',
      '            details: kubectl logs job/migrate-demo -n team-a',
    ].join('\n'),
  );
  t.regex(renderRunTree(running, new Date('2025-01-01T00:15:00.000Z')), /deadline passed/);
});

test('why: waiting names the hook, its progress, deadline and message, and says nothing needs doing', (t) => {
  t.is(
    whyParagraph(running, NOW),
    'Revision demo-00002 in team-a is held while it waits for hook migrate (order 1, attempt 1, 40%, times out in 4m12s), which last said "migrating table 3/7". Already succeeded: db. Details for migrate: kubectl logs job/migrate-demo -n team-a. Nothing to do unless it is stuck: watch it with kn prestart get demo-00002 -n team-a -w.',
  );
});

test('why: a failure names the hook, the reason, the details and the retry command', (t) => {
  const why = whyParagraph(failed, NOW);
  t.regex(why, /^Revision demo-00002 in team-a is held because hook migrate failed: quota exceeded \(attempt 2\)\./);
  t.regex(why, /Details for migrate: https:\/\/ci\.example\/run\/7\./);
  t.regex(why, /re-run the failed hooks with: kn prestart retry demo-00002 -n team-a/);
});

test('why: a hook missing at start cannot be retried; the paragraph says to start over', (t) => {
  const missing: RunObject = { ...failed, spec: { revisionUID: 'u', hooks: [snapshot('db', 0)] } };
  t.regex(
    whyParagraph(missing, NOW),
    /cannot be retried: fix the PrestartHook, then start over with: kubectl delete prestartrun demo-00002 -n team-a\.$/,
  );
});

test('list: held runs first, then the most recent, with what each waits on', (t) => {
  const released: RunObject = {
    ...run('Released', [{ name: 'db', phase: 'Succeeded', attempt: 1 }]),
    metadata: { name: 'demo-00001', namespace: 'team-a', creationTimestamp: new Date('2025-01-01T00:09:00.000Z') },
  };
  const lines = renderRunList([released, failed, running], NOW).split('\n');
  t.regex(lines[0] ?? '', /^NAMESPACE +REVISION +PHASE +HOOKS +AGE +WAITING ON \/ REASON$/);
  t.regex(lines[1] ?? '', /^team-a +demo-00002 +Failed +1\/2 +5m0s +migrate Failed: quota exceeded$/);
  t.regex(lines[2] ?? '', /^team-a +demo-00002 +Running +1\/2 +5m0s +migrate Requested 40%: migrating table 3\/7$/);
  t.regex(lines[3] ?? '', /^team-a +demo-00001 +Released +1\/1 +1m0s$/);
});

test('list -A: by namespace, then name, as kubectl sorts, whether held or not', (t) => {
  const at = (namespace: string, name: string, phase: 'Released' | 'Running', minute: number): RunObject => ({
    ...run(phase, [{ name: 'db', phase: phase === 'Released' ? 'Succeeded' : 'Requested', attempt: 1 }]),
    metadata: { name, namespace, creationTimestamp: new Date(`2025-01-01T00:0${minute}:00.000Z`) },
  });
  const runs = [
    at('team-b', 'api-00001', 'Running', 9),
    at('team-a', 'web-00002', 'Released', 8),
    at('team-a', 'web-00001', 'Running', 1),
    at('team-a', 'api-00003', 'Released', 2),
  ];
  const order = (text: string) =>
    text
      .split('\n')
      .slice(1)
      .map((l) => l.split(/ +/).slice(0, 2).join('/'));
  t.deepEqual(order(renderRunList(runs, NOW, { allNamespaces: true })), [
    'team-a/api-00003',
    'team-a/web-00001',
    'team-a/web-00002',
    'team-b/api-00001',
  ]);
  const oneNamespace = runs.filter((r) => r.metadata?.namespace === 'team-a');
  t.deepEqual(
    order(renderRunList(oneNamespace, NOW, { allNamespaces: true })),
    ['team-a/api-00003', 'team-a/web-00001', 'team-a/web-00002'],
    '-A with runs in one namespace only: still by name',
  );
  t.deepEqual(
    order(renderRunList(oneNamespace, NOW)),
    ['team-a/web-00001', 'team-a/web-00002', 'team-a/api-00003'],
    'without -A: held first, then the most recent',
  );
});

test('why on a released run says what each hook said when it let go: an approval hook names who approved, when and why', (t) => {
  const approvals =
    '2 of 2 approvals; approved by bob (groups: sre) at 2025-01-01T00:07:00.000Z: ok; approved by alice at 2025-01-01T00:08:00.000Z: go';
  const released = run(
    'Released',
    [
      { name: 'db', phase: 'Succeeded', attempt: 1 },
      { name: 'migrate', phase: 'Succeeded', attempt: 1, message: approvals },
    ],
    '2/2 hooks succeeded',
  );
  t.is(
    whyParagraph(released, NOW),
    `Revision demo-00002 in team-a is not held: it was released (2/2 hooks succeeded). migrate said: ${approvals}.`,
  );
});
