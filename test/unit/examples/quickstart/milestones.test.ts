import test from 'ava';
import { demoDone, type Milestones, nextMilestones, timeline, waitingFor } from '../../../../examples/quickstart/milestones.ts';
import type { DemoObjects } from '../../../../examples/quickstart/view.ts';
import { deployment, empty, type Mutable, objects, pod, revision, run, service, TARGET } from './_objects.ts';

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
