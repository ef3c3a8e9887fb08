// Sink counters go on the registry the gate exposes, once per registry.
import test from 'ava';
import { Registry } from 'prom-client';
import { countReply, createSinkMetrics } from '../../../sinks/metrics.ts';

test('counters are registered on the given registry and shared by the sinks using it', async (t) => {
  const registry = new Registry();
  const a = createSinkMetrics(registry);
  const b = createSinkMetrics(registry);
  t.is(a, b);
  countReply(a, 'http', 'applied');
  countReply(b, 'nats', 'transient');
  const text = await registry.metrics();
  t.regex(text, /prestart_sink_replies_total\{transport="http",outcome="applied"\} 1/);
  t.regex(text, /prestart_sink_replies_total\{transport="nats",outcome="transient"\} 1/);
});

test('without a registry each sink gets a private one (no clash with the global registry)', (t) => {
  t.not(createSinkMetrics().registry, createSinkMetrics().registry);
});
