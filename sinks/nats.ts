// JetStream receiver for completed events. Hooks publish replies on `prestart.replies.<hook>`
// into the stream PRESTART_REPLIES; every gate replica pulls from one durable consumer, so each
// reply is handled by one replica at a time and survives gate restarts.
//
// A message is acked only after the gate recorded it (applied) or found it already recorded
// (duplicate). Input no retry can fix is terminated with the reason; transient trouble is nak'ed
// with a growing delay. A replica that dies mid-way never acks, and JetStream redelivers the
// message after ack_wait to whichever replica pulls next.
import {
  AckPolicy,
  type ConnectionOptions,
  type ConsumerConfig,
  type ConsumerMessages,
  connect,
  DeliverPolicy,
  type JetStreamManager,
  type JsMsg,
  type NatsConnection,
  nanos,
  type PubAck,
} from 'nats';
import pino, { type Logger } from 'pino';
import type { CloudEventRecord } from '../schemas/event.ts';
import { DEFAULT_MAX_REPLY_BYTES, type KeyRing, toBinary, toStructured } from '../schemas/index.ts';
import {
  ensureStream,
  fromNatsMessage,
  REPLIES_STREAM,
  REPLIES_SUBJECT_PREFIX,
  serverSupportsTermReason,
  subjectFor,
  toNatsHeaders,
} from '../schemas/nats-binding.ts';
import { type Handled, handleCompleted } from './intake.ts';
import { countReply, createSinkMetrics, type SinkMetrics } from './metrics.ts';
import type { OnReply } from './types.ts';

export const DEFAULT_REPLIES_DURABLE = 'prestart-gate';

export interface NatsSinkOptions {
  keys: KeyRing;
  onReply: OnReply;
  /** NATS server URL(s). Ignored when `connection` is given. */
  servers?: string | string[];
  /** An existing connection; the sink then leaves it open on stop(). */
  connection?: NatsConnection;
  connectionOptions?: Omit<ConnectionOptions, 'servers'>;
  /** Durable consumer name shared by all gate replicas. Default "prestart-gate". */
  durable?: string;
  /** Largest accepted event. Default 64 KiB. */
  maxBytes?: number;
  /** Redelivery after this long without an ack (a crashed replica). Default 30 s. */
  ackWaitMs?: number;
  /** First delay of a nak after a transient error; doubles per redelivery up to `maxNakDelayMs`. Default 1 s. */
  nakDelayMs?: number;
  maxNakDelayMs?: number;
  /** Replies handled at once by this replica. Default 4. */
  concurrency?: number;
  /** How long replies are kept in the stream. Default 24 h. */
  maxAgeMs?: number;
  logger?: Logger;
  metrics?: SinkMetrics;
}

export interface NatsSink {
  /** Connects, creates the stream and the durable consumer when missing, and starts pulling. */
  start(): Promise<void>;
  /** Stops pulling, waits for the replies being handled, and closes its own connection. */
  stop(): Promise<void>;
}

export function createNatsSink(opts: NatsSinkOptions): NatsSink {
  if (!opts.connection && !opts.servers) throw new Error('nats sink: servers or connection is required');
  const durable = opts.durable ?? DEFAULT_REPLIES_DURABLE;
  const maxBytes = opts.maxBytes ?? DEFAULT_MAX_REPLY_BYTES;
  const concurrency = Math.max(1, opts.concurrency ?? 4);
  const nakDelayMs = opts.nakDelayMs ?? 1_000;
  const maxNakDelayMs = opts.maxNakDelayMs ?? 60_000;
  const log = opts.logger ?? pino({ name: 'nats-sink' });
  const metrics = opts.metrics ?? createSinkMetrics();
  let nc: NatsConnection | undefined;
  let messages: ConsumerMessages | undefined;
  let loop: Promise<void> | undefined;
  const inflight = new Set<Promise<void>>();

  async function handle(m: JsMsg, termWithReason: boolean): Promise<void> {
    const handled = await handleCompleted(fromNatsMessage(m.headers, m.data), { keys: opts.keys, maxBytes, onReply: opts.onReply });
    countReply(metrics, 'nats', handled.outcome);
    const fields = { subject: m.subject, seq: m.seq, deliveries: m.info.redeliveryCount };
    try {
      settle(m, handled, termWithReason, fields);
    } catch (err) {
      // The connection went away between handling and settling: JetStream redelivers after ack_wait.
      log.warn({ ...fields, err }, 'could not settle a reply message; it will be redelivered');
    }
  }

  function settle(m: JsMsg, handled: Handled, termWithReason: boolean, fields: Record<string, unknown>): void {
    switch (handled.outcome) {
      case 'applied':
      case 'duplicate':
        m.ack();
        log.debug({ ...fields, event: handled.reply.eventKey, outcome: handled.outcome }, 'completed event taken');
        return;
      case 'rejected':
      case 'invalid': {
        const reason = handled.outcome === 'invalid' ? `${handled.code}: ${handled.reason}` : handled.reason;
        if (termWithReason) m.term(reason.slice(0, 512));
        else m.term();
        log.warn({ ...fields, outcome: handled.outcome, reason }, 'completed event dropped for good (term)');
        return;
      }
      case 'transient': {
        const delay = Math.min(maxNakDelayMs, nakDelayMs * 2 ** Math.max(0, m.info.redeliveryCount - 1));
        m.nak(delay);
        log.error({ ...fields, err: handled.error, delay }, 'completed event not recorded; nak for redelivery');
        return;
      }
    }
  }

  async function run(stream: ConsumerMessages, termWithReason: boolean): Promise<void> {
    for await (const m of stream) {
      while (inflight.size >= concurrency) await Promise.race(inflight);
      const p: Promise<void> = handle(m, termWithReason)
        .catch((err: unknown) => log.error({ err, seq: m.seq }, 'unexpected error handling a reply message'))
        .finally(() => inflight.delete(p));
      inflight.add(p);
    }
  }

  return {
    async start() {
      if (loop) return;
      const conn =
        opts.connection ??
        (await connect({ name: 'knative-prestart-sink', maxReconnectAttempts: -1, ...opts.connectionOptions, servers: opts.servers }));
      try {
        const jsm = await conn.jetstreamManager();
        await ensureRepliesStreamWith(jsm, opts.maxAgeMs);
        await ensureConsumer(jsm, durable, opts.ackWaitMs ?? 30_000);
        const consumer = await conn.jetstream().consumers.get(REPLIES_STREAM, durable);
        messages = await consumer.consume({ max_messages: concurrency * 2 });
      } catch (err) {
        if (!opts.connection) await conn.close().catch(() => {});
        throw err;
      }
      nc = conn;
      const termWithReason = serverSupportsTermReason(conn.info?.version);
      const stream = messages;
      loop = run(stream, termWithReason).catch((err: unknown) => log.error({ err }, 'reply consumer stopped'));
      // A connection closed under the sink (by its owner, or for good) would leave the consumer
      // retrying on a dead connection: stop pulling; unacked replies go to other replicas.
      void conn.closed().then(() => {
        if (messages !== stream) return;
        log.warn({ durable }, 'NATS connection closed; reply consumer stops');
        void stream.close().catch(() => {});
      });
      log.info({ server: conn.getServer(), stream: REPLIES_STREAM, durable }, 'NATS reply consumer started');
    },
    async stop() {
      if (!loop) return;
      const stream = messages;
      messages = undefined;
      await stream?.close().catch(() => {});
      await loop;
      await Promise.allSettled([...inflight]);
      if (!opts.connection) await nc?.drain().catch(() => nc?.close());
      loop = undefined;
      nc = undefined;
    },
  };
}

/** The replies stream with the gate's defaults; hooks may call it before their first sendReply. */
export async function ensureRepliesStream(nc: NatsConnection, maxAgeMs?: number): Promise<void> {
  await ensureRepliesStreamWith(await nc.jetstreamManager(), maxAgeMs);
}

async function ensureRepliesStreamWith(jsm: JetStreamManager, maxAgeMs = 24 * 3600_000): Promise<void> {
  await ensureStream(jsm, {
    name: REPLIES_STREAM,
    subjects: [`${REPLIES_SUBJECT_PREFIX}.>`],
    maxAgeMs,
    duplicateWindowMs: 2 * 60_000,
  });
}

async function ensureConsumer(jsm: JetStreamManager, durable: string, ackWaitMs: number): Promise<void> {
  const wanted: Partial<ConsumerConfig> = {
    durable_name: durable,
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.All,
    filter_subject: `${REPLIES_SUBJECT_PREFIX}.>`,
    ack_wait: nanos(ackWaitMs),
    // Unbounded: a reply that keeps failing transiently ends when the gate finds it stale (term).
    max_deliver: -1,
  };
  const existing = await jsm.consumers.info(REPLIES_STREAM, durable).catch(() => undefined);
  if (!existing) {
    await jsm.consumers.add(REPLIES_STREAM, wanted);
    return;
  }
  if (existing.config.ack_wait !== wanted.ack_wait || existing.config.filter_subject !== wanted.filter_subject) {
    await jsm.consumers.update(REPLIES_STREAM, durable, { ack_wait: wanted.ack_wait, filter_subject: wanted.filter_subject });
  }
}

export interface SendReplyOptions {
  /** Default binary (attributes in `ce-*` NATS headers). */
  mode?: 'binary' | 'structured';
  /** Default `prestart.replies.<hook>`. */
  subject?: string;
  timeoutMs?: number;
}

/**
 * Publishes a completed event for `hook` (as a hook does) and waits for JetStream to store it.
 * The message id is the CloudEvent id, so a hook resending the same reply is stored once.
 */
export async function sendReply(nc: NatsConnection, hook: string, event: CloudEventRecord, opts: SendReplyOptions = {}): Promise<PubAck> {
  const message = opts.mode === 'structured' ? toStructured(event) : toBinary(event);
  const body = typeof message.body === 'string' ? new TextEncoder().encode(message.body) : message.body;
  return nc.jetstream().publish(opts.subject ?? subjectFor(REPLIES_SUBJECT_PREFIX, hook), body, {
    msgID: event.id,
    headers: toNatsHeaders(message),
    timeout: opts.timeoutMs ?? 5_000,
  });
}
