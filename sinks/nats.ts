// JetStream receiver for completed events. Hooks publish replies on `prestart.replies.<hook>`
// into the stream PRESTART_REPLIES; every gate replica pulls from one durable consumer, so each
// reply is handled by one replica at a time and survives gate restarts.
//
// A reply is taken only from its own hook's subject: with per-hook NATS permissions only that
// hook may publish there, so a correlationid that leaked elsewhere is not enough to answer.
//
// A message is acked only after the gate recorded it (applied) or found it already recorded
// (duplicate). Input no retry can fix is terminated with the reason; transient trouble is nak'ed
// with a growing delay. A replica that dies mid-way never acks, and JetStream redelivers the
// message after ack_wait to whichever replica pulls next.
import type { ConsumerMessages, JsMsg } from 'nats';
import pino, { type Logger } from 'pino';
import { DEFAULT_MAX_REPLY_BYTES, type KeyRing } from '../schemas/index.ts';
import { fromNatsMessage, serverSupportsTermReason } from '../schemas/nats-binding.ts';
import {
  checkNatsTarget,
  connectOwned,
  ensureDurableConsumer,
  ensureStream,
  GATE_INBOX_PREFIX,
  GATE_REPLIES_DURABLE,
  jetStreamManager,
  type NatsTarget,
  PULL_EXPIRES_MS,
  STREAMS,
  streamReplicas,
} from '../transport/nats.ts';
import { type Handled, handleCompleted } from './intake.ts';
import { countReply, createSinkMetrics, type SinkMetrics } from './metrics.ts';
import type { OnReply, ReplyDisposition } from './types.ts';

export const DEFAULT_REPLIES_DURABLE = GATE_REPLIES_DURABLE;

export interface NatsSinkOptions extends NatsTarget {
  keys: KeyRing;
  onReply: OnReply;
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
  /** How long replies are kept in the stream. Default: STREAMS.replies. */
  maxAgeMs?: number;
  /** Copies of the stream (the durable follows it), applied both ways; default from the server (streamReplicas), only ever raised. */
  replicas?: number;
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
  checkNatsTarget(opts, 'nats sink');
  const durable = opts.durable ?? DEFAULT_REPLIES_DURABLE;
  const maxBytes = opts.maxBytes ?? DEFAULT_MAX_REPLY_BYTES;
  const concurrency = Math.max(1, opts.concurrency ?? 4);
  const nakDelayMs = opts.nakDelayMs ?? 1_000;
  const maxNakDelayMs = opts.maxNakDelayMs ?? 60_000;
  const log = opts.logger ?? pino({ name: 'nats-sink' });
  const metrics = opts.metrics ?? createSinkMetrics();
  let release: (() => Promise<void>) | undefined;
  let messages: ConsumerMessages | undefined;
  let loop: Promise<void> | undefined;
  const inflight = new Set<Promise<void>>();

  /** The verified reply's hook must be the one whose subject it came on. */
  function fromItsHook(subject: string): OnReply {
    return async (reply): Promise<ReplyDisposition> => {
      const expected = `${STREAMS.replies.subjectPrefix}.${reply.hook}`;
      if (subject === expected) return opts.onReply(reply);
      return { type: 'rejected', reason: `a reply for hook ${reply.hook} must come on ${expected}, not on ${subject}` };
    };
  }

  async function handle(m: JsMsg, termWithReason: boolean): Promise<void> {
    const handled = await handleCompleted(fromNatsMessage(m.headers, m.data), {
      keys: opts.keys,
      maxBytes,
      onReply: fromItsHook(m.subject),
    });
    countReply(metrics, 'nats', handled);
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
      const stream = STREAMS.replies;
      const owned = await connectOwned(opts, { name: 'knative-prestart-sink', inboxPrefix: GATE_INBOX_PREFIX }, async (nc) => {
        const jsm = await jetStreamManager(nc);
        const replicas = streamReplicas(nc, opts.replicas);
        await ensureStream(jsm, opts.maxAgeMs === undefined ? stream : { ...stream, maxAgeMs: opts.maxAgeMs }, { adjust: true, replicas });
        await ensureDurableConsumer(jsm, stream.name, {
          durable,
          filterSubject: `${stream.subjectPrefix}.>`,
          ackWaitMs: opts.ackWaitMs ?? 30_000,
          replicas: replicas.count,
        });
        return (await nc.jetstream().consumers.get(stream.name, durable)).consume({
          max_messages: concurrency * 2,
          expires: PULL_EXPIRES_MS,
        });
      });
      const conn = owned.nc;
      const pulled = owned.value;
      messages = pulled;
      release = owned.release;
      const termWithReason = serverSupportsTermReason(conn.info?.version);
      loop = run(pulled, termWithReason).catch((err: unknown) => log.error({ err }, 'reply consumer stopped'));
      // A connection closed under the sink (by its owner, or for good) would leave the consumer
      // retrying on a dead connection: stop pulling; unacked replies go to other replicas.
      void conn.closed().then(() => {
        if (messages !== pulled) return;
        log.warn({ durable }, 'NATS connection closed; reply consumer stops');
        void pulled.close().catch(() => {});
      });
      log.info({ server: conn.getServer(), stream: stream.name, durable }, 'NATS reply consumer started');
    },
    async stop() {
      if (!loop) return;
      const stream = messages;
      messages = undefined;
      await stream?.close().catch(() => {});
      await loop;
      await Promise.allSettled([...inflight]);
      await release?.();
      loop = undefined;
      release = undefined;
    },
  };
}
