// The one reply counter goes on the registry the gate exposes, once per registry; `result` is what
// the gate did with an event, `outcome` what the hook said.
import test from 'ava';
import { Registry } from 'prom-client';
import type { Reply } from '../../../api/types.ts';
import type { Handled, Intake } from '../../../sinks/intake.ts';
import { countingIntake, countReply, createSinkMetrics } from '../../../sinks/metrics.ts';

const reply: Reply = {
  namespace: 'shop',
  revision: 'checkout-00002',
  revisionUID: 'u1',
  runUID: 'r1',
  hook: 'db',
  attempt: 1,
  outcome: 'failed',
  eventKey: '/hook#1',
};

test('counters are registered on the given registry and shared by the sinks using it', async (t) => {
  const registry = new Registry();
  const a = createSinkMetrics(registry);
  const b = createSinkMetrics(registry);
  t.is(a, b);
  countReply(a, 'http', { outcome: 'applied', reply });
  countReply(b, 'nats', 'transient');
  const text = await registry.metrics();
  t.regex(text, /prestart_gate_replies_total\{transport="http",result="applied",outcome="failed"\} 1/);
  t.regex(text, /prestart_gate_replies_total\{transport="nats",result="transient",outcome="unknown"\} 1/);
});

test("the gate's own roads count as direct (a synchronous answer) and gate (a failure it records)", async (t) => {
  const metrics = createSinkMetrics(new Registry());
  const handled: Handled = { outcome: 'duplicate', reply };
  const intake: Intake = {
    options: { keys: undefined as never, maxBytes: 1, onReply: async () => ({ type: 'applied' }) },
    message: async () => handled,
    reply: async () => ({ outcome: 'invalid', code: 'bad', status: 400, reason: 'no' }),
  };
  const counted = countingIntake(intake, metrics);
  t.is(await counted.message({ headers: {}, body: new Uint8Array() }), handled);
  await counted.reply(reply);
  const text = await metrics.registry.metrics();
  t.regex(text, /prestart_gate_replies_total\{transport="direct",result="duplicate",outcome="failed"\} 1/);
  t.regex(text, /prestart_gate_replies_total\{transport="gate",result="invalid",outcome="unknown"\} 1/);
});

test('without a registry each sink gets a private one (no clash with the global registry)', (t) => {
  t.not(createSinkMetrics().registry, createSinkMetrics().registry);
});
