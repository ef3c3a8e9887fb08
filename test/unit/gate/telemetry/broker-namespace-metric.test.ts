import test from 'ava';
import { createMetrics } from '../../../../gate/telemetry/metrics.ts';

const noHolds = { revisions: { list: () => [] }, runs: { get: () => undefined } };

test('prestart_gate_broker_namespace_open: one series per Broker while leading, none otherwise', async (t) => {
  const metrics = createMetrics();
  const leader = { isLeader: true };
  metrics.watch(noHolds, leader);
  metrics.brokerNamespaces(() => [
    { namespace: 'shop', name: 'default', value: 2 },
    { namespace: 'tools', name: 'bus', value: -1 },
  ]);
  const text = await metrics.registry.metrics();
  t.regex(text, /# HELP prestart_gate_broker_namespace_open Subjects from outside the namespace of a Broker/);
  t.regex(text, /^prestart_gate_broker_namespace_open\{namespace="shop",broker="default"\} 2$/m);
  t.regex(text, /^prestart_gate_broker_namespace_open\{namespace="tools",broker="bus"\} -1$/m);
  leader.isLeader = false;
  t.notRegex(await metrics.registry.metrics(), /^prestart_gate_broker_namespace_open\{/m);
});
