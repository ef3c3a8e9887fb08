// The one counter of replies, whatever road they took, registered on whatever registry the gate
// exposes (never the global one implicitly, so two sinks in one process or in tests do not
// collide). Two words, two meanings: `result` is what the gate did with the event (applied,
// duplicate, rejected, invalid, transient), `outcome` what the hook said (succeeded, failed,
// retry, progress; "unknown" when the event could not be read).
import { Counter, Registry } from 'prom-client';
import type { Handled, Intake } from './intake.ts';
import type { SinkOutcome } from './types.ts';

/** http and nats: the sinks; direct: a hook's synchronous answer; gate: a failure the gate records itself (an undeliverable request). */
export type ReplyRoad = 'http' | 'nats' | 'direct' | 'gate';

export interface SinkMetrics {
  readonly registry: Registry;
  /** Replies taken, by road (transport), result and outcome. */
  readonly replies: Counter<'transport' | 'result' | 'outcome'>;
}

const cache = new WeakMap<Registry, SinkMetrics>();

/** The reply counter on `registry` (created once per registry; a fresh private registry by default). */
export function createSinkMetrics(registry: Registry = new Registry()): SinkMetrics {
  const existing = cache.get(registry);
  if (existing) return existing;
  const metrics: SinkMetrics = {
    registry,
    replies: new Counter({
      name: 'prestart_gate_replies_total',
      help: 'Completed events taken, by transport (http, nats, direct, gate), result (applied, duplicate, rejected, invalid, transient) and outcome (succeeded, failed, retry, progress, unknown)',
      labelNames: ['transport', 'result', 'outcome'] as const,
      registers: [registry],
    }),
  };
  cache.set(registry, metrics);
  return metrics;
}

/** Counts one event; pass the Handled when there is one, so the hook's outcome is counted too. */
export function countReply(metrics: SinkMetrics, transport: ReplyRoad, handled: Handled | SinkOutcome): void {
  if (typeof handled === 'string') {
    metrics.replies.inc({ transport, result: handled, outcome: 'unknown' });
    return;
  }
  metrics.replies.inc({ transport, result: handled.outcome, outcome: 'reply' in handled ? handled.reply.outcome : 'unknown' });
}

/** The intake as the gate's own roads use it (synchronous answers, self-made failures), counted. */
export function countingIntake(intake: Intake, metrics: SinkMetrics): Intake {
  return {
    options: intake.options,
    async message(message) {
      const handled = await intake.message(message);
      countReply(metrics, 'direct', handled);
      return handled;
    },
    async reply(reply) {
      const handled = await intake.reply(reply);
      countReply(metrics, 'gate', handled);
      return handled;
    },
  };
}
