// The JetStream side of the contract, shared by the gate's request emitter, the gate's reply sink
// and the hook SDK: the two streams and their defaults, creating them, durable pull consumers,
// connections closed only by whoever opened them, and publishing. (nats-binding.ts lays out one
// message.)
import {
  AckPolicy,
  type ConnectionOptions,
  connect,
  DeliverPolicy,
  type JetStreamClient,
  type JetStreamManager,
  type NatsConnection,
  nanos,
  type PubAck,
  RetentionPolicy,
  StorageType,
  type StreamConfig,
} from 'nats';
import type { Message } from './event.ts';
import { toNatsHeaders } from './nats-binding.ts';

export interface StreamSpec {
  name: string;
  /** The stream captures `<subjectPrefix>.>`; a hook's own subject is `<subjectPrefix>.<hook>`. */
  subjectPrefix: string;
  /** How long a message is kept. */
  maxAgeMs: number;
  /** Publishes with one message id inside this window are stored once. */
  duplicateWindowMs: number;
}

const MINUTE = 60_000;

/**
 * The gate's streams. A request is resent with the same id while unanswered (every
 * resendInterval), so its window is wide; a hook resending a reply does so within seconds
 * (JetStream's default of 2 min). A day covers any hook's timeout and restart.
 */
export const STREAMS = {
  requests: { name: 'PRESTART_REQUESTS', subjectPrefix: 'prestart.requests', maxAgeMs: 24 * 60 * MINUTE, duplicateWindowMs: 10 * MINUTE },
  replies: { name: 'PRESTART_REPLIES', subjectPrefix: 'prestart.replies', maxAgeMs: 24 * 60 * MINUTE, duplicateWindowMs: 2 * MINUTE },
} as const satisfies Record<string, StreamSpec>;

export interface EnsureStreamOptions {
  /**
   * True (the gate, which owns the streams): an existing stream is brought to these subjects and
   * limits. False (a hook): a missing stream is created with them, an existing one is left as the
   * gate set it up.
   */
  adjust: boolean;
}

/**
 * Creates the stream, or (with `adjust`) brings an existing one to the wanted subjects and limits.
 * Safe to run from several replicas at once: a create that loses the race is re-read.
 */
export async function ensureStream(jsm: JetStreamManager, spec: StreamSpec, opts: EnsureStreamOptions = { adjust: true }): Promise<void> {
  const subjects = [`${spec.subjectPrefix}.>`];
  const wanted: Partial<StreamConfig> = {
    subjects,
    max_age: nanos(spec.maxAgeMs),
    duplicate_window: nanos(Math.min(spec.duplicateWindowMs, spec.maxAgeMs)),
  };
  for (let round = 0; round < 2; round++) {
    const existing = await jsm.streams.info(spec.name).catch((err: unknown) => {
      if (isNotFound(err)) return undefined;
      throw err;
    });
    if (existing === undefined) {
      try {
        await jsm.streams.add({ name: spec.name, retention: RetentionPolicy.Limits, storage: StorageType.File, ...wanted });
        return;
      } catch (err) {
        if (round === 0 && isAlreadyInUse(err)) continue;
        throw err;
      }
    }
    if (!opts.adjust) return;
    const cfg = existing.config;
    const have = new Set(cfg.subjects ?? []);
    if (subjects.every((s) => have.has(s)) && cfg.max_age === wanted.max_age && cfg.duplicate_window === wanted.duplicate_window) return;
    await jsm.streams.update(spec.name, {
      ...cfg,
      subjects: [...new Set([...(cfg.subjects ?? []), ...subjects])],
      max_age: wanted.max_age,
      duplicate_window: wanted.duplicate_window,
    });
    return;
  }
}

export interface DurableConsumerSpec {
  durable: string;
  filterSubject: string;
  /** Redelivery after this long without an ack (or a working()). */
  ackWaitMs: number;
  /** Messages handed out and not yet acked, across the consumer's replicas; server default when absent. */
  maxAckPending?: number;
}

/**
 * A durable pull consumer with explicit acks that starts at the beginning of the stream (a new
 * consumer also takes what was sent before it existed) and redelivers without a bound (a message
 * that keeps failing ends when its reader finds it stale and terminates it). An existing one is
 * brought to the wanted filter and timings.
 */
export async function ensureDurableConsumer(jsm: JetStreamManager, stream: string, c: DurableConsumerSpec): Promise<void> {
  const config = {
    ack_wait: nanos(c.ackWaitMs),
    filter_subject: c.filterSubject,
    ...(c.maxAckPending === undefined ? {} : { max_ack_pending: c.maxAckPending }),
  };
  const existing = await jsm.consumers.info(stream, c.durable).catch(() => undefined);
  if (!existing) {
    await jsm.consumers.add(stream, {
      durable_name: c.durable,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      max_deliver: -1,
      ...config,
    });
    return;
  }
  const e = existing.config;
  const same =
    e.ack_wait === config.ack_wait &&
    e.filter_subject === config.filter_subject &&
    (c.maxAckPending === undefined || e.max_ack_pending === c.maxAckPending);
  if (!same) await jsm.consumers.update(stream, c.durable, config);
}

/** Where to reach NATS: servers to connect to, or a connection that stays the caller's. */
export interface NatsTarget {
  /** NATS server URL(s), e.g. nats://127.0.0.1:4222. Ignored when `connection` is given. */
  servers?: string | string[];
  /** An existing connection to use; it is never closed here. */
  connection?: NatsConnection;
  connectionOptions?: Omit<ConnectionOptions, 'servers'>;
}

export function checkNatsTarget(target: NatsTarget, who: string): void {
  if (!target.connection && !target.servers) throw new Error(`${who}: servers or connection is required`);
}

export interface OwnedConnection<T> {
  nc: NatsConnection;
  /** What `setup` returned. */
  value: T;
  /** Drains and closes the connection when it was opened here; a given one stays open. */
  release(): Promise<void>;
}

/**
 * The target's connection, or a new one named `name` that reconnects forever, with `setup` run on
 * it. A connection opened here is closed again when setup fails.
 */
export async function connectOwned<T>(
  target: NatsTarget,
  name: string,
  setup: (nc: NatsConnection) => Promise<T>,
): Promise<OwnedConnection<T>> {
  const given = target.connection;
  const nc = given ?? (await connect({ name, maxReconnectAttempts: -1, ...target.connectionOptions, servers: target.servers }));
  let value: T;
  try {
    value = await setup(nc);
  } catch (err) {
    if (!given) await nc.close().catch(() => {});
    throw err;
  }
  return {
    nc,
    value,
    async release() {
      if (!given) await nc.drain().catch(() => nc.close());
    },
  };
}

/**
 * Publishes one message in the NATS binding and waits for JetStream to store it. With the
 * CloudEvent id as `msgID`, a resend of the same event inside the stream's duplicate window is
 * stored once.
 */
export function publishMessage(
  js: JetStreamClient,
  subject: string,
  message: Message,
  opts: { msgID: string; timeoutMs: number },
): Promise<PubAck> {
  const body = typeof message.body === 'string' ? new TextEncoder().encode(message.body) : message.body;
  return js.publish(subject, body, { msgID: opts.msgID, headers: toNatsHeaders(message), timeout: opts.timeoutMs });
}

function isNotFound(err: unknown): boolean {
  const e = err as { code?: string; api_error?: { err_code?: number }; message?: string };
  return e?.api_error?.err_code === 10059 || e?.code === '404' || /not found/i.test(e?.message ?? '');
}

function isAlreadyInUse(err: unknown): boolean {
  const e = err as { api_error?: { err_code?: number }; message?: string };
  return e?.api_error?.err_code === 10058 || /already in use/i.test(e?.message ?? '');
}
