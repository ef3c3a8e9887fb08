// The JetStream sink of a gate given NATS: replies that come back over NATS enter the same intake
// as the HTTP sink's.
import type { Logger } from 'pino';
import type { Transports } from '../../emitter/index.ts';
import type { Intake } from '../../sinks/intake.ts';
import type { SinkMetrics } from '../../sinks/metrics.ts';
import type { NatsSink } from '../../sinks/nats.ts';
import type { GateConfig } from '../config.ts';

/** Resolves once the sink consumes and both streams exist; undefined for a gate without NATS. */
export async function startNatsReplies(
  nats: GateConfig['nats'],
  intake: Intake,
  transports: Transports,
  metrics: SinkMetrics,
  log: Logger,
): Promise<NatsSink | undefined> {
  if (!nats) return undefined;
  // The nats client is loaded only by a gate given NATS (what a gate does not use, it does not load).
  const { createNatsSink } = await import('../../sinks/nats.ts');
  const sink = createNatsSink({
    ...intake.options,
    servers: nats.servers,
    security: nats.security,
    replicas: nats.replicas,
    logger: log,
    metrics,
  });
  await sink.start();
  // Both streams exist before any hook starts: a hook with least-privilege permissions may not
  // create them. A NATS that refuses the gate's credentials stops the start here, visibly.
  await transports.ready();
  return sink;
}
