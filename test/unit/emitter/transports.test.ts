// Choosing a transport per hook, and what a hook asking for a missing one sees.
import test from 'ava';
import { createTransports, TransportError } from '../../../emitter/index.ts';
import { requestEvent } from '../../support/events.ts';

test('direct HTTP is on by default; Broker and NATS only when configured', async (t) => {
  const transports = createTransports();
  t.deepEqual([...transports.kinds], ['http']);
  t.is(transports.forDelivery({ transport: 'http', url: 'http://127.0.0.1:1/' }).kind, 'http');
  await transports.close();
});

test('each configured kind gets its own transport', async (t) => {
  const transports = createTransports({
    broker: { resolveBrokerUrl: async () => 'http://127.0.0.1:1/' },
    nats: { servers: 'nats://127.0.0.1:1' },
  });
  for (const kind of ['http', 'broker', 'nats'] as const) t.is(transports.forDelivery({ transport: kind }).kind, kind);
  await transports.close();
});

test('a hook asking for a transport the gate was not started with fails for good, saying which and why', async (t) => {
  const transports = createTransports({ http: false, broker: { resolveBrokerUrl: async () => 'http://127.0.0.1:1/' } });
  const transport = transports.forDelivery({ transport: 'nats' });
  t.is(transport.kind, 'nats');
  const err = await t.throwsAsync(transport.send(requestEvent(), { transport: 'nats' }, 'db-migrate'), { instanceOf: TransportError });
  t.false(err?.retriable);
  t.regex(err?.message ?? '', /hook db-migrate asks for transport "nats"/);
  t.regex(err?.message ?? '', /configured: broker/);
  await transports.close();
});
