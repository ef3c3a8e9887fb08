import test from 'ava';
import { APPLIED_HASH_ANNOTATION, covers, withHash } from '../../../triggers/compare.ts';
import { desiredTriggers } from '../../../triggers/desired.ts';
import { brokerHook, GATE } from './_hooks.ts';

const desired = (subscriber: { ref?: { apiVersion: string; kind: string; name: string }; uri?: string }) => {
  const [, request] = desiredTriggers([brokerHook('db', { name: 'default', namespace: 'shop', subscriber }, 'u')], GATE);
  if (!request) throw new Error('no request Trigger');
  return withHash(request);
};

/** The object as the apiserver returns it after Knative's webhook defaulted it. */
function stored(t: ReturnType<typeof desired>) {
  const copy = structuredClone(t) as Record<string, unknown> & typeof t;
  return {
    ...copy,
    metadata: {
      ...copy.metadata,
      uid: 'x',
      resourceVersion: '7',
      labels: { ...copy.metadata.labels, 'app.kubernetes.io/part-of': 'shop' },
    },
    spec: {
      ...copy.spec,
      filter: {},
      subscriber: copy.spec.subscriber.ref
        ? { ...copy.spec.subscriber, ref: { ...copy.spec.subscriber.ref, namespace: 'shop' } }
        : copy.spec.subscriber,
    },
    status: { conditions: [] },
  };
}

const migrator = { ref: { apiVersion: 'serving.knative.dev/v1', kind: 'Service', name: 'migrator' } };

test("a stored Trigger with Knative's defaults added still counts as what the gate wants", (t) => {
  const want = desired(migrator);
  t.true(covers(stored(want), want));
});

test('a Trigger someone edited does not', (t) => {
  const want = desired(migrator);
  const live = stored(want);
  live.spec.filters = [{ exact: { type: 'revision.prestart.requested' } }];
  t.false(covers(live, want));
});

test('a subscriber that lost its uri is noticed through the hash, though the old object covers the new one', (t) => {
  const before = desired({ ...migrator, uri: '/hooks/db' });
  const after = desired(migrator);
  const live = stored(before);
  // Field by field the old object has everything the new one asks for...
  t.true(covers(live.spec, after.spec));
  // ...but not the new hash.
  t.not(before.metadata.annotations?.[APPLIED_HASH_ANNOTATION], after.metadata.annotations?.[APPLIED_HASH_ANNOTATION]);
  t.false(covers(live, after));
});

test('the hash is stable for equal desires', (t) => {
  t.is(
    desired(migrator).metadata.annotations?.[APPLIED_HASH_ANNOTATION],
    desired(migrator).metadata.annotations?.[APPLIED_HASH_ANNOTATION],
  );
});

test('lists must match in length and item by item', (t) => {
  t.true(covers([{ a: 1, b: 2 }], [{ a: 1 }]));
  t.false(covers([{ a: 1 }, { a: 2 }], [{ a: 1 }]));
  t.false(covers({ a: [1] }, { a: { 0: 1 } }));
  t.false(covers(undefined, { a: 1 }));
  t.true(covers({ a: 1 }, undefined));
});
