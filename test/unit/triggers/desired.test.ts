import test from 'ava';
import {
  desiredTriggers,
  inClusterGateSubscriber,
  MANAGED_BY_LABEL,
  REQUEST_DELIVERY,
  type TriggerObject,
} from '../../../triggers/desired.ts';
import { brokerHook, GATE, hookWith } from './_hooks.ts';

const svc = (name: string) => ({ ref: { apiVersion: 'serving.knative.dev/v1', kind: 'Service', name } });
const find = (ts: TriggerObject[], ns: string, name: string) => ts.find((t) => t.metadata.namespace === ns && t.metadata.name === name);

test('a broker hook gets a Trigger for its own requests, delivered to its subscriber, owned by the hook', (t) => {
  const hooks = [brokerHook('db-migrate', { name: 'default', namespace: 'shop', subscriber: svc('migrator') }, 'uid-db')];
  const trigger = find(desiredTriggers(hooks, GATE), 'shop', 'prestart-hook-db-migrate');
  t.deepEqual(trigger, {
    apiVersion: 'eventing.knative.dev/v1',
    kind: 'Trigger',
    metadata: {
      name: 'prestart-hook-db-migrate',
      namespace: 'shop',
      labels: {
        'app.kubernetes.io/managed-by': 'knative-prestart',
        'prestart.dev/trigger': 'requests',
        'prestart.dev/hook': 'db-migrate',
        'eventing.knative.dev/broker': 'default',
      },
      ownerReferences: [{ apiVersion: 'prestart.dev/v1alpha1', kind: 'PrestartHook', name: 'db-migrate', uid: 'uid-db' }],
    },
    spec: {
      broker: 'default',
      filters: [{ exact: { type: 'revision.prestart.requested', prestarthook: 'db-migrate' } }],
      subscriber: svc('migrator'),
      delivery: { retry: 5, backoffPolicy: 'exponential', backoffDelay: 'PT1S' },
    },
  });
});

test('each Broker gets one reply Trigger to the gate, owned by every hook using that Broker', (t) => {
  const hooks = [
    brokerHook('scan', { name: 'default', namespace: 'shop', subscriber: { uri: 'http://scan.shop.svc/' } }, 'uid-scan'),
    brokerHook('db', { name: 'default', namespace: 'shop', subscriber: svc('db') }, 'uid-db'),
    brokerHook('audit', { name: 'bus', namespace: 'ops', subscriber: svc('audit') }, 'uid-audit'),
  ];
  const triggers = desiredTriggers(hooks, GATE);
  const replies = triggers.filter((x) => x.metadata.labels['prestart.dev/trigger'] === 'replies');
  t.deepEqual(
    replies.map((r) => [r.metadata.namespace, r.metadata.name, r.spec.broker]),
    [
      ['ops', 'prestart-gate-replies-bus', 'bus'],
      ['shop', 'prestart-gate-replies-default', 'default'],
    ],
  );
  const shop = find(triggers, 'shop', 'prestart-gate-replies-default');
  t.deepEqual(shop?.spec.filters, [{ exact: { type: 'revision.prestart.completed' } }]);
  t.deepEqual(shop?.spec.subscriber, GATE);
  t.deepEqual(
    shop?.metadata.ownerReferences?.map((o) => o.uid),
    ['uid-db', 'uid-scan'],
  );
  t.is(shop?.metadata.labels[MANAGED_BY_LABEL], 'knative-prestart');
  // What Eventing's webhook would default, and what its Broker reconciler finds Triggers by.
  t.is(shop?.metadata.labels['eventing.knative.dev/broker'], 'default');
});

test('hooks of other transports need no Triggers', (t) => {
  const hooks = [hookWith('direct', { transport: 'http', url: 'http://hook.example/' }), hookWith('stream', { transport: 'nats' })];
  t.deepEqual(desiredTriggers(hooks, GATE), []);
});

test('the output is sorted and does not depend on the order of the hooks', (t) => {
  const hooks = [
    brokerHook('b', { name: 'default', namespace: 'zeta', subscriber: svc('b') }, 'u-b'),
    brokerHook('a', { name: 'default', namespace: 'alpha', subscriber: svc('a') }, 'u-a'),
    brokerHook('c', { name: 'default', namespace: 'zeta', subscriber: svc('c') }, 'u-c'),
  ];
  const one = desiredTriggers(hooks, GATE);
  const other = desiredTriggers([...hooks].reverse(), GATE);
  t.deepEqual(one, other);
  t.deepEqual(
    one.map((x) => `${x.metadata.namespace}/${x.metadata.name}`),
    [
      'alpha/prestart-gate-replies-default',
      'alpha/prestart-hook-a',
      'zeta/prestart-gate-replies-default',
      'zeta/prestart-hook-b',
      'zeta/prestart-hook-c',
    ],
  );
});

test('hooks read without uids (from a file) give Triggers without ownerReferences', (t) => {
  const triggers = desiredTriggers([brokerHook('db', { name: 'default', namespace: 'shop', subscriber: svc('db') })], GATE);
  t.is(triggers.length, 2);
  for (const trigger of triggers) t.false('ownerReferences' in trigger.metadata);
});

test('long hook and Broker names give Trigger names of at most 63 characters that stay distinct', (t) => {
  const long = `h${'x'.repeat(62)}`;
  const longer = `h${'x'.repeat(61)}y`;
  const broker = `events.${'b'.repeat(60)}`;
  const triggers = desiredTriggers(
    [
      brokerHook(long, { name: broker, namespace: 'shop', subscriber: svc('a') }, 'u1'),
      brokerHook(longer, { name: broker, namespace: 'shop', subscriber: svc('b') }, 'u2'),
    ],
    GATE,
  );
  const names = triggers.map((x) => x.metadata.name);
  t.is(new Set(names).size, 3);
  for (const name of names) {
    t.true(name.length <= 63, name);
    t.regex(name, /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/);
  }
  // The filter and the label still carry the full hook name.
  const req = triggers.find((x) => x.metadata.labels['prestart.dev/hook'] === long);
  t.deepEqual(req?.spec.filters, [{ exact: { type: 'revision.prestart.requested', prestarthook: long } }]);
});

test('a hook named like a reply Trigger does not collide with it', (t) => {
  const triggers = desiredTriggers(
    [brokerHook('gate-replies-default', { name: 'default', namespace: 'shop', subscriber: svc('x') }, 'u')],
    GATE,
  );
  t.is(new Set(triggers.map((x) => x.metadata.name)).size, 2);
});

test('changing the desired objects does not change the next result (no shared state)', (t) => {
  const hooks = [brokerHook('db', { name: 'default', namespace: 'shop', subscriber: svc('db') }, 'u')];
  const first = desiredTriggers(hooks, GATE);
  for (const x of first) {
    x.spec.delivery.retry = 99;
    if (x.spec.subscriber.ref) x.spec.subscriber.ref.name = 'changed';
    if (x.spec.subscriber.uri) x.spec.subscriber.uri = 'changed';
  }
  const second = desiredTriggers(hooks, GATE);
  t.is(second[0]?.spec.delivery.retry, REQUEST_DELIVERY.retry);
  t.is(REQUEST_DELIVERY.retry, 5);
  t.is(hooks[0]?.spec.delivery.broker?.subscriber.ref?.name, 'db');
  t.deepEqual(GATE, { uri: 'http://127.0.0.1:8080/events' });
});

test("in cluster the reply Triggers deliver to the gate's Service by URI, port 80, path /", (t) => {
  // A ref would be refused by Knative: a Trigger's subscriber ref must be in the Trigger's namespace.
  t.deepEqual(inClusterGateSubscriber(), { uri: 'http://knative-prestart-gate.knative-prestart.svc/' });
  t.deepEqual(inClusterGateSubscriber('gates'), { uri: 'http://knative-prestart-gate.gates.svc/' });
});

test('a gate subscriber with neither ref nor uri is refused', (t) => {
  t.throws(() => desiredTriggers([], {}), { message: /ref or a uri/ });
});
