// Counters of the sinks, registered on whatever registry the gate exposes (never the global one
// implicitly, so two sinks in one process or in tests do not collide).
import { Counter, Registry } from 'prom-client';
import type { SinkOutcome } from './types.ts';

export interface SinkMetrics {
  readonly registry: Registry;
  /** Replies received, by transport (http, nats) and outcome. */
  readonly replies: Counter<'transport' | 'outcome'>;
}

const cache = new WeakMap<Registry, SinkMetrics>();

/** The sink counters on `registry` (created once per registry; a fresh private registry by default). */
export function createSinkMetrics(registry: Registry = new Registry()): SinkMetrics {
  const existing = cache.get(registry);
  if (existing) return existing;
  const metrics: SinkMetrics = {
    registry,
    replies: new Counter({
      name: 'prestart_sink_replies_total',
      help: 'Completed events received by the sinks, by transport and outcome (applied, duplicate, rejected, invalid, transient).',
      labelNames: ['transport', 'outcome'] as const,
      registers: [registry],
    }),
  };
  cache.set(registry, metrics);
  return metrics;
}

export function countReply(metrics: SinkMetrics, transport: 'http' | 'nats', outcome: SinkOutcome): void {
  metrics.replies.inc({ transport, outcome });
}
