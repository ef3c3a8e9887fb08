// A hook that runs on Knative is never held: a Revision of a Knative Service that some PrestartHook
// delivers to is held by no hook, so no hook waits on itself and no two hooks wait on each other.
import test from 'ava';
import { hookService, hooksFor } from '../../../gate/core/match.ts';
import { hook, revision } from './_builders.ts';

const broker = (subscriber: { ref?: { apiVersion: string; kind: string; name: string; namespace?: string }; uri?: string }) => ({
  delivery: { transport: 'broker' as const, broker: { name: 'default', namespace: 'hooks', subscriber } },
});

test('the Service a hook delivers to: a Broker subscriber ref, or a cluster-local host in a URL', (t) => {
  t.deepEqual(hookService(hook('db', broker({ ref: { apiVersion: 'serving.knative.dev/v1', kind: 'Service', name: 'provision-db' } }))), {
    name: 'provision-db',
    namespace: 'hooks',
  });
  t.deepEqual(
    hookService(hook('db', broker({ ref: { apiVersion: 'serving.knative.dev/v1', kind: 'Service', name: 'p', namespace: 'other' } }))),
    { name: 'p', namespace: 'other' },
  );
  t.is(
    hookService(hook('db', broker({ ref: { apiVersion: 'v1', kind: 'Service', name: 'plain' } }))),
    undefined,
    'a core Service is no Knative Service',
  );
  t.deepEqual(hookService(hook('db', broker({ uri: 'http://scan.security.svc.cluster.local/events' }))), {
    name: 'scan',
    namespace: 'security',
  });
  t.deepEqual(hookService(hook('db', { delivery: { transport: 'http', url: 'http://scan.security.svc/' } })), {
    name: 'scan',
    namespace: 'security',
  });
  t.is(hookService(hook('db', { delivery: { transport: 'http', url: 'https://hooks.example.com/scan' } })), undefined);
  t.is(hookService(hook('db', { delivery: { transport: 'http', url: 'not a url' } })), undefined);
  t.is(hookService(hook('db', { delivery: { transport: 'nats' } })), undefined);
});

test("a Revision of a hook's own Service is held by no hook, even by one that matches every Revision", (t) => {
  const everything = hook('scan-all', { delivery: { transport: 'http', url: 'http://scanner.hooks.svc.cluster.local/' } });
  const db = hook('db', broker({ ref: { apiVersion: 'serving.knative.dev/v1', kind: 'Service', name: 'provision-db' } }));
  const hooks = [everything, db];
  t.deepEqual(hooksFor(revision({ namespace: 'hooks', service: 'provision-db' }), {}, hooks), [], 'the db hook itself');
  t.deepEqual(hooksFor(revision({ namespace: 'hooks', service: 'scanner' }), {}, hooks), [], 'a cycle of two is impossible');
  t.deepEqual(
    hooksFor(revision({ namespace: 'team-a', service: 'provision-db' }), {}, hooks).map((h) => h.name),
    ['db', 'scan-all'],
    'the same name in another namespace is an app like any other',
  );
  t.deepEqual(
    hooksFor(revision({ namespace: 'hooks', service: 'shop' }), {}, hooks).map((h) => h.name),
    ['db', 'scan-all'],
  );
  t.deepEqual(
    hooksFor(revision({ namespace: 'hooks', service: undefined }), {}, hooks).map((h) => h.name),
    ['db', 'scan-all'],
    'a Revision of no Service',
  );
});
