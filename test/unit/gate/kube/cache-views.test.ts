// The caches keep what the gate reads and nothing else (gate/kube/cache-views.ts), lists come in pages,
// and supersession is looked up per Configuration (gate/kube/revision-index.ts).
import test from 'ava';
import { type RevisionObject, type RunObject, toRevisionView } from '../../../../api/resources.ts';
import { CANCEL_FINALIZER, HOLD_LABEL, PRESTART_CONDITION, type PrestartRunStatus } from '../../../../api/types.ts';
import { contributionsOf } from '../../../../gate/core/index.ts';
import { heldRevisionView, isFinished, revisionStub, routeView, runView } from '../../../../gate/kube/cache-views.ts';
import { pagedList } from '../../../../gate/kube/caches.ts';
import { RevisionIndex } from '../../../../gate/kube/revision-index.ts';

const managedFields = [{ manager: 'controller', operation: 'Update', fieldsV1: { 'f:spec': { 'f:containers': {} } } }];

const knativeRevision = (name: string, generation: number, extra: Record<string, string> = {}): RevisionObject => ({
  apiVersion: 'serving.knative.dev/v1',
  kind: 'Revision',
  metadata: {
    name,
    namespace: 'shop',
    uid: `uid-${name}`,
    resourceVersion: '42',
    creationTimestamp: new Date('2025-01-01T00:00:00Z'),
    labels: {
      'serving.knative.dev/configuration': 'checkout',
      'serving.knative.dev/configurationGeneration': String(generation),
      'serving.knative.dev/service': 'checkout',
      ...extra,
    },
    annotations: { 'prestart.dev/hooks': '["db"]', 'serving.knative.dev/creator': 'ci' },
    finalizers: [CANCEL_FINALIZER],
    ownerReferences: [{ apiVersion: 'serving.knative.dev/v1', kind: 'Configuration', name: 'checkout', uid: 'c' }],
    managedFields,
  } as RevisionObject['metadata'],
  spec: {
    containers: [
      {
        name: 'user-container',
        image: 'registry.example/checkout@sha256:abc',
        env: [{ name: 'A', value: 'b' }],
        ports: [{ containerPort: 8080 }],
      },
    ],
  } as unknown as RevisionObject['spec'],
  status: {
    conditions: [
      { type: 'Ready', status: 'Unknown', lastTransitionTime: 't' },
      { type: PRESTART_CONDITION, status: 'Unknown', reason: 'db Requested', lastTransitionTime: 't' },
    ],
  },
});

test('a held Revision keeps what decide() and the request event read, and drops the rest', (t) => {
  const full = knativeRevision('checkout-00002', 2, { [HOLD_LABEL]: 'true' });
  const view = heldRevisionView(full);
  t.deepEqual(toRevisionView(view), toRevisionView({ ...full, status: { conditions: full.status?.conditions?.slice(1) } }));
  t.is(view.metadata?.managedFields, undefined);
  t.is(view.metadata?.ownerReferences, undefined);
  t.deepEqual(view.spec, { containers: [{ name: 'user-container', image: 'registry.example/checkout@sha256:abc' }] });
  t.deepEqual(
    view.status?.conditions?.map((c) => c.type),
    [PRESTART_CONDITION],
    "of the status, only the gate's own condition",
  );
});

test('a Revision stub keeps its name, Configuration, generation and the gate finalizer', (t) => {
  const stub = revisionStub(knativeRevision('checkout-00003', 3));
  t.deepEqual(stub, {
    metadata: {
      name: 'checkout-00003',
      namespace: 'shop',
      resourceVersion: '42',
      labels: { 'serving.knative.dev/configuration': 'checkout', 'serving.knative.dev/configurationGeneration': '3' },
      finalizers: [CANCEL_FINALIZER],
    },
  });
});

test('a Route keeps the Revisions its traffic names', (t) => {
  const route = routeView({
    metadata: { name: 'checkout', namespace: 'shop', resourceVersion: '7', managedFields } as RevisionObject['metadata'],
    spec: { traffic: [{ revisionName: 'checkout-00001' }, { latestRevision: true, percent: 100 } as { revisionName?: string }] },
  });
  t.deepEqual(route.spec, { traffic: [{ revisionName: 'checkout-00001' }] });
  t.is(route.metadata?.managedFields, undefined);
});

const runStatus = (phase: PrestartRunStatus['phase']): PrestartRunStatus => ({
  phase,
  hooks: [
    {
      name: 'db',
      phase: phase === 'Running' ? 'Requested' : 'Succeeded',
      attempt: 1,
      requestedAt: 't0',
      lastSentAt: 't0',
      answeredAt: 't1',
      deadline: 't9',
      message: 'migrated',
      contributions: [{ name: 'db', secretName: 's', as: 'volume' }],
    },
  ],
  conditions: [{ type: 'Ready', status: phase === 'Cancelled' ? 'False' : 'Unknown', message: 'why', lastTransitionTime: 't' }],
  summary: '1/1',
  ...(phase === 'Released' ? { releasedAt: 't2' } : {}),
});

const run = (phase: PrestartRunStatus['phase']): RunObject => ({
  apiVersion: 'prestart.dev/v1alpha1',
  kind: 'PrestartRun',
  metadata: { name: 'checkout-00002', namespace: 'shop', uid: 'run-uid', resourceVersion: '9', managedFields } as RunObject['metadata'],
  spec: { revisionUID: 'uid-checkout-00002', hooks: [{ name: 'db' } as RunObject['spec']['hooks'][number]] },
  status: runStatus(phase),
});

test('a run in progress is cached whole, without managed fields; the controller may write from it', (t) => {
  const view = runView(run('Running'));
  t.deepEqual(view.status, runStatus('Running'));
  t.deepEqual(view.spec, run('Running').spec);
  t.is(view.metadata?.managedFields, undefined);
  t.false(isFinished(view));
});

test('a released run is cached slim: its phase and the contributions; never written from', (t) => {
  const view = runView(run('Released'));
  t.true(isFinished(view));
  t.deepEqual(view.spec, { revisionUID: 'uid-checkout-00002', hooks: [] });
  t.deepEqual(view.status, {
    phase: 'Released',
    hooks: [{ name: 'db', phase: 'Succeeded', attempt: 1, contributions: [{ name: 'db', secretName: 's', as: 'volume' }] }],
    conditions: [],
  });
  t.deepEqual(contributionsOf(view.status), [{ name: 'db', secretName: 's', as: 'volume' }], 'what the pod webhook injects');
  t.is(view.metadata?.uid, 'run-uid', 'the Deployment webhook marks the template with it');
});

test('a released run whose hooks contributed nothing keeps no hooks at all', (t) => {
  const plain = run('Released');
  const status = plain.status as PrestartRunStatus;
  const view = runView({ ...plain, status: { ...status, hooks: status.hooks.map(({ contributions: _, ...h }) => h) } });
  t.deepEqual(view.status, { phase: 'Released', hooks: [], conditions: [] });
  t.deepEqual(contributionsOf(view.status), []);
});

test("a cancelled run keeps its Ready condition: it is the Revision's hold reason", (t) => {
  const view = runView(run('Cancelled'));
  t.deepEqual(view.status?.conditions, runStatus('Cancelled').conditions);
});

test('a list comes in pages; only the view of each object is kept', async (t) => {
  const pages: Record<string, { items: RevisionObject[]; metadata: { resourceVersion: string; continue?: string } }> = {
    first: { items: [knativeRevision('a-00001', 1), knativeRevision('a-00002', 2)], metadata: { resourceVersion: '100', continue: 'p2' } },
    p2: { items: [knativeRevision('a-00003', 3)], metadata: { resourceVersion: '100' } },
  };
  const asked: (string | undefined)[] = [];
  const list = await pagedList(async (cont) => {
    asked.push(cont);
    return pages[cont ?? 'first'] as (typeof pages)[string];
  }, revisionStub);
  t.deepEqual(asked, [undefined, 'p2']);
  t.deepEqual(
    list.items.map((i) => i.metadata?.name),
    ['a-00001', 'a-00002', 'a-00003'],
  );
  t.is(list.metadata.resourceVersion, '100');
  t.is(list.items[0]?.metadata?.managedFields, undefined);
});

test('supersession is a look at one Configuration: the newest Revision above a generation', (t) => {
  const index = new RevisionIndex();
  for (const gen of [1, 2, 3]) index.set(revisionStub(knativeRevision(`checkout-0000${gen}`, gen)));
  index.set(
    revisionStub({
      ...knativeRevision('other-00009', 9),
      metadata: {
        name: 'other-00009',
        namespace: 'shop',
        labels: { 'serving.knative.dev/configuration': 'other', 'serving.knative.dev/configurationGeneration': '9' },
      },
    }),
  );
  t.deepEqual(index.newer('shop', 'checkout', 1), { name: 'checkout-00003', generation: 3 });
  t.is(index.newer('shop', 'checkout', 3), undefined);
  t.is(index.newer('elsewhere', 'checkout', 1), undefined, 'per namespace');
  index.delete(revisionStub(knativeRevision('checkout-00003', 3)));
  t.deepEqual(index.newer('shop', 'checkout', 1), { name: 'checkout-00002', generation: 2 });
  t.deepEqual([...index.siblings('shop', 'checkout')].sort(), ['checkout-00001', 'checkout-00002']);
});

test('the index knows which Revisions carry the gate finalizer, as it comes and goes', (t) => {
  const index = new RevisionIndex();
  const rev = knativeRevision('checkout-00001', 1);
  index.set(revisionStub(rev));
  t.true(index.hasFinalizer('shop', 'checkout-00001'));
  index.set(revisionStub({ ...rev, metadata: { ...rev.metadata, finalizers: [] } }));
  t.false(index.hasFinalizer('shop', 'checkout-00001'));
  t.deepEqual([...index.withFinalizer()], []);
});

test('a Revision whose Configuration label changes moves with it', (t) => {
  const index = new RevisionIndex();
  const rev = knativeRevision('web-00002', 2);
  index.set(revisionStub(rev));
  const moved = { ...rev, metadata: { ...rev.metadata, labels: { ...rev.metadata?.labels, 'serving.knative.dev/configuration': 'web' } } };
  index.set(revisionStub(moved));
  t.deepEqual([...index.siblings('shop', 'checkout')], []);
  t.deepEqual([...index.siblings('shop', 'web')], ['web-00002']);
});
