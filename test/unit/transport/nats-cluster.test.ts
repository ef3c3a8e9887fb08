// Where a client connects and how many copies the streams get: a comma-separated server list (the
// one string --nats and NATS_URL hold) taken apart, and the replicas read from the INFO the server
// greeted with. (A real three-node cluster: test/integration/gate/nats-cluster.test.ts.)
import test from 'ava';
import type { NatsConnection, ServerInfo } from 'nats';
import { natsServerList, streamReplicas } from '../../../transport/nats.ts';

/** Only `info` is read: what the server said in its INFO line. */
const greetedWith = (info: Partial<ServerInfo> | undefined) => ({ info }) as unknown as NatsConnection;

test('a comma-separated list is every server, spaces and empty items dropped', (t) => {
  t.deepEqual(natsServerList('nats://a:4222, nats://b:4222,,nats://c:4222 '), ['nats://a:4222', 'nats://b:4222', 'nats://c:4222']);
  t.deepEqual(natsServerList('nats://a:4222'), ['nats://a:4222']);
  t.deepEqual(natsServerList(['nats://a:4222,nats://b:4222', 'nats://c:4222']), ['nats://a:4222', 'nats://b:4222', 'nats://c:4222']);
});

test('a lone server gets one copy; a cluster three, or as many nodes as it has when fewer', (t) => {
  t.deepEqual(streamReplicas(greetedWith({ server_name: 'solo' })), { count: 1, exact: false });
  const urls = (n: number) => Array.from({ length: n }, (_, i) => `10.0.0.${i}:4222`);
  t.deepEqual(streamReplicas(greetedWith({ cluster: 'c', connect_urls: urls(5) })), { count: 3, exact: false });
  t.deepEqual(streamReplicas(greetedWith({ cluster: 'c', connect_urls: urls(3) })), { count: 3, exact: false });
  t.deepEqual(streamReplicas(greetedWith({ cluster: 'c', connect_urls: urls(2) })), { count: 2, exact: false });
  t.deepEqual(streamReplicas(greetedWith({ cluster: 'c' })), { count: 3, exact: false }, 'no_advertise: assumed three');
  t.deepEqual(streamReplicas(greetedWith(undefined)), { count: 1, exact: false });
});

test('an operator-chosen count wins, both ways, and must be 1 to 5', (t) => {
  t.deepEqual(streamReplicas(greetedWith({ cluster: 'c', connect_urls: ['a', 'b', 'c'] }), 1), { count: 1, exact: true });
  t.deepEqual(streamReplicas(greetedWith({}), 5), { count: 5, exact: true });
  t.throws(() => streamReplicas(greetedWith({}), 0), { message: /1 to 5/ });
  t.throws(() => streamReplicas(greetedWith({}), 6), { message: /1 to 5/ });
});
