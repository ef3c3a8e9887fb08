import test from 'ava';
import { logText } from '../../../../examples/quickstart/live.ts';
import { describeBinding, podBinding, shortEventMessage, viewLines } from '../../../../examples/quickstart/view.ts';
import { deployment, HOLD_EVENT, objects, pod, revision, run, service } from './_objects.ts';

test('a held Revision reads as held, with Knative’s own view of it', (t) => {
  const lines = viewLines(
    objects((o) =>
      o.revisions.set('demo-00001', revision('demo-00001', { held: true, hooks: ['demo-db'], ready: ['Unknown', 'Deploying'] })),
    ),
  );
  t.is(lines[0]?.mark, 'held');
  t.is(
    lines[0]?.text,
    'Revision demo-00001: held by the gate before Knative may create its Deployment (label prestart.dev/hold=true, hooks: demo-db); Knative: Ready=Unknown (Deploying)',
  );
});

test('a released Revision says so, and that its pods get the bindings', (t) => {
  const [line] = viewLines(
    objects((o) =>
      o.revisions.set('demo-00001', revision('demo-00001', { held: false, hooks: ['demo-db'], inject: true, ready: ['True'] })),
    ),
  );
  t.is(line?.mark, 'ok');
  t.is(line?.text, 'Revision demo-00001: released by the gate (hold label removed, its pods get the bindings); Knative: Ready=True');
});

test('a Revision no hook matched is not called released', (t) => {
  const [line] = viewLines(objects((o) => o.revisions.set('other-00001', revision('other-00001', { held: false }))));
  t.is(line?.text, 'Revision other-00001: no hook matched it; Knative has not reported yet');
});

test('Knative’s retry event shows its count and the hold policy’s message first, not the whole admission denial', (t) => {
  const lines = viewLines(
    objects((o) => {
      o.revisions.set('demo-00001', revision('demo-00001', { held: true, hooks: ['demo-db'] }));
      o.events.set('demo-00001.1', HOLD_EVENT);
    }),
  );
  t.is(
    lines[1] && logText(lines[1]),
    "Revision demo-00001: Knative's event Warning InternalError ×4: knative-prestart: Revision demo-00001 is held until its pre-start hooks finish; " +
      "see: kubectl get prestartrun demo-00001 -n demo (Knative's create of Deployment demo-00001-deployment, denied by the hold policy)",
  );
  t.is(shortEventMessage('Revision becomes ready'), 'Revision becomes ready', 'other messages as they are');
});

test('the PrestartRun and each hook’s phase, progress and message; hook lines name their run for a log', (t) => {
  const lines = viewLines(
    objects((o) => {
      o.revisions.set('demo-00001', revision('demo-00001', { held: true, hooks: ['demo-db'] }));
      o.runs.set('demo-00001', run('demo-00001', 'Running', { progress: 50, message: 'demo: creating the user' }));
    }),
  );
  t.deepEqual(
    lines.slice(1).map((l) => [l.key, l.mark, l.indent, l.context, l.text]),
    [
      ['run/demo-00001', 'wait', 1, undefined, 'PrestartRun demo-00001: Running (0/1 hooks succeeded)'],
      ['run/demo-00001/hook/demo-db', 'wait', 2, 'PrestartRun demo-00001', 'hook demo-db: Requested 50%: demo: creating the user'],
    ],
  );
});

test('a failed hook is marked failed, with a retried attempt counted', (t) => {
  const lines = viewLines(
    objects((o) => {
      o.revisions.set('demo-00001', revision('demo-00001', { held: true, hooks: ['demo-db'] }));
      o.runs.set('demo-00001', run('demo-00001', 'Failed', { phase: 'Failed', attempt: 2, message: 'no capacity' }));
    }),
  );
  t.is(lines[2]?.mark, 'fail');
  t.is(lines[2]?.text, 'hook demo-db: Failed (attempt 2): no capacity');
});

test('the Deployment and its pods come under their Revision; a pod shows the binding the gate injected', (t) => {
  const lines = viewLines(
    objects((o) => {
      o.revisions.set('demo-00001', revision('demo-00001', { held: false, hooks: ['demo-db'] }));
      o.deployments.set('demo-00001-deployment', deployment('demo-00001', 1));
      o.pods.set('p', pod('demo-00001', { ready: true, bound: true }));
      o.services.set('demo', service(['True'], [{ revisionName: 'demo-00001', percent: 100 }]));
    }),
  );
  t.deepEqual(
    lines.map((l) => l.text),
    [
      'Revision demo-00001: released by the gate (hold label removed); Knative has not reported yet',
      'Deployment demo-00001-deployment: created by Knative, 1/1 pods ready',
      'Pod demo-00001-deployment-abc-xyz: Running, Ready; binding: env DATABASE_URL, DATABASE_PASSWORD from Secret demo-db; files at /bindings/db from Secret demo-db',
      'Service demo: Ready, traffic 100% to demo-00001 (its Route reads Ready from the Ingress stand-in)',
    ],
  );
});

test('the binding is read from the app container only, never queue-proxy', (t) => {
  const b = podBinding(pod('demo-00001', { ready: true, bound: true }));
  t.deepEqual(b, {
    env: [
      { name: 'DATABASE_URL', secret: 'demo-db', key: 'uri' },
      { name: 'DATABASE_PASSWORD', secret: 'demo-db', key: 'password' },
    ],
    mounts: [{ path: '/bindings/db', secret: 'demo-db' }],
  });
  t.is(describeBinding(podBinding(pod('demo-00001', { ready: true, bound: false }))), 'no binding');
});

test('a Service not Ready yet says why, in Knative’s words', (t) => {
  const [line] = viewLines(
    objects((o) =>
      o.services.set('demo', service(['Unknown', 'RevisionMissing', 'Configuration "demo" is waiting for a Revision to become ready.'])),
    ),
  );
  t.is(
    line?.text,
    'Service demo: not ready yet, Ready=Unknown (RevisionMissing): Configuration "demo" is waiting for a Revision to become ready.',
  );
});
