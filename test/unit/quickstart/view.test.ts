import test from 'ava';
import { logText } from '../../../examples/quickstart/live.ts';
import {
  type DemoObjects,
  demoDone,
  describeBinding,
  type Milestones,
  nextMilestones,
  podBinding,
  shortEventMessage,
  timeline,
  viewLines,
  waitingFor,
} from '../../../examples/quickstart/view.ts';
import { deployment, empty, HOLD_EVENT, pod, revision, run, service, TARGET } from './_objects.ts';

type Mutable = { [K in keyof DemoObjects]: Map<string, unknown> };

function objects(fill: (o: Mutable) => void): DemoObjects {
  const o = empty() as unknown as Mutable;
  fill(o);
  return o as unknown as DemoObjects;
}

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

/** The story, one observation at a time, as the watches deliver it. */
function story(): DemoObjects[] {
  const steps: DemoObjects[] = [];
  const o = empty() as unknown as Mutable;
  const snap = () => steps.push({ ...o } as unknown as DemoObjects);
  const rev = (held: boolean, ready?: [string, string?]) =>
    o.revisions.set('demo-00001', revision('demo-00001', { held, hooks: ['demo-db'], ...(ready ? { ready } : {}) }));
  o.services = new Map([['demo', service(['Unknown', 'RevisionMissing'])]]);
  snap();
  o.revisions = new Map();
  rev(true);
  snap(); // 1: held
  o.runs = new Map([['demo-00001', run('demo-00001', 'Running', { progress: 25 })]]);
  snap(); // 2: hook running
  o.revisions = new Map();
  rev(false, ['Unknown', 'Deploying']);
  snap(); // 3: released
  o.deployments = new Map([['d', deployment('demo-00001', 0)]]);
  snap(); // 4: Deployment
  o.pods = new Map([['p', pod('demo-00001', { ready: true, bound: true })]]);
  snap(); // 5: pod Ready with the binding
  o.services = new Map([['demo', service(['True'], [{ revisionName: 'demo-00001', percent: 100 }])]]);
  snap(); // 6: Service Ready
  return steps;
}

test('milestones follow the story in order, each stamped when first seen; the demo is done at the Service Ready', (t) => {
  let m: Milestones = {};
  const seen: string[] = [];
  story().forEach((objs, i) => {
    m = nextMilestones(m, objs, TARGET, i * 1000);
    seen.push(waitingFor(m, TARGET));
  });
  t.deepEqual(m, { held: 1000, released: 3000, deployment: 4000, podReady: 5000, serviceReady: 6000 });
  t.true(demoDone(m));
  t.is(seen[0], 'Knative to create Revision demo-00001 and the gate to hold it');
  t.is(seen[1], 'the hook to finish and the gate to release Revision demo-00001');
  t.is(seen[4], 'a pod of Revision demo-00001 Ready with the binding');
  t.is(
    timeline(m, 0),
    'held +1.0s, released +3.0s (held for 2.0s), Deployment +4.0s, pod Ready with the binding +5.0s, Service Ready +6.0s',
  );
});

test('a Revision never seen held never counts as released: the demo does not pass without the gate', (t) => {
  let m: Milestones = {};
  const unheld = objects((o) => {
    o.revisions.set('demo-00001', revision('demo-00001', { held: false, ready: ['True'] }));
    o.deployments.set('d', deployment('demo-00001', 1));
    o.pods.set('p', pod('demo-00001', { ready: true, bound: true }));
    o.services.set('demo', service(['True']));
  });
  m = nextMilestones(m, unheld, TARGET, 1);
  t.deepEqual(m, {});
  t.false(demoDone(m));
});

test('pods without the binding do not complete the demo', (t) => {
  const m = nextMilestones(
    { held: 1, released: 2, deployment: 3 },
    objects((o) => o.pods.set('p', pod('demo-00001', { ready: true, bound: false }))),
    TARGET,
    4,
  );
  t.is(m.podReady, undefined);
});

test('a failed hook while held is a failure in one line, with where to look', (t) => {
  const m = nextMilestones(
    { held: 1 },
    objects((o) => {
      o.revisions.set('demo-00001', revision('demo-00001', { held: true, hooks: ['demo-db'] }));
      o.runs.set('demo-00001', run('demo-00001', 'Failed', { phase: 'Failed', message: 'the database server refused' }));
    }),
    TARGET,
    2,
  );
  t.is(
    m.failed,
    'hook demo-db failed: the database server refused; Revision demo-00001 stays held (kubectl get prestartrun demo-00001 -n demo)',
  );
});
