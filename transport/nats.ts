// The JetStream client shared by the gate's request emitter, the gate's reply sink and the hook
// SDK: creating the two streams, durable pull consumers, connections closed only by whoever opened
// them, publishing. (The contract holds what this talks about, without the client:
// schemas/nats-binding.ts lays out one message, schemas/nats-names.ts the names and settings,
// schemas/nats-permissions.ts the permissions each side needs; nats-auth.ts here is how a client
// authenticates.)
import {
  AckPolicy,
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
import type { Message } from '../schemas/event.ts';
import { toNatsHeaders } from '../schemas/nats-binding.ts';
import { MAX_REPLICAS, type NatsTarget, natsServerList, type StreamSpec } from '../schemas/nats-names.ts';
import { natsSecurityOptions } from './nats-auth.ts';

export {
  checkNatsTarget,
  GATE_INBOX_PREFIX,
  GATE_REPLIES_DURABLE,
  hookDurable,
  hookInboxPrefix,
  MAX_REPLICAS,
  type NatsTarget,
  natsServerList,
  STREAMS,
  type StreamSpec,
} from '../schemas/nats-names.ts';

/**
 * The JetStream manager of our clients. It does not ask `$JS.API.INFO` first (nats.js does by
 * default), so no identity needs that permission: a server without JetStream shows in the first
 * real call instead.
 */
export function jetStreamManager(nc: NatsConnection): Promise<JetStreamManager> {
  return nc.jetstreamManager({ checkAPI: false });
}

export interface EnsureStreamOptions {
  /**
   * True (the gate, which owns the streams): an existing stream is brought to these subjects and
   * limits. False (a hook): a missing stream is created with them, an existing one is left as the
   * gate set it up.
   */
  adjust: boolean;
  /** Copies of the stream (streamReplicas); absent: the server's default, one. */
  replicas?: ReplicasWanted;
}

/** How many copies of a stream to keep, and whether an existing stream with more is brought down to it. */
export interface ReplicasWanted {
  count: number;
  /** True when an operator chose the count: it is applied both ways. A default only ever raises. */
  exact: boolean;
}

/**
 * The replicas of the streams: `explicit` when given, else 3 on a clustered server (the INFO it
 * greeted with names a cluster) or as many as it has when fewer, else 1. The size is the client
 * URLs the server advertises, one per node; a cluster that advertises none (`no_advertise`) is
 * taken to have three, and one with fewer makes the stream create fail with "insufficient
 * resources", which asks for --nats-replicas.
 */
export function streamReplicas(nc: NatsConnection, explicit?: number): ReplicasWanted {
  if (explicit !== undefined) {
    if (!Number.isInteger(explicit) || explicit < 1 || explicit > MAX_REPLICAS)
      throw new Error(`NATS replicas must be 1 to ${MAX_REPLICAS}, not ${explicit}`);
    return { count: explicit, exact: true };
  }
  const info = nc.info;
  if (!info?.cluster) return { count: 1, exact: false };
  const nodes = info.connect_urls?.length ?? 0;
  return { count: nodes === 0 ? 3 : Math.min(3, nodes), exact: false };
}

/** The replicas an existing stream should be brought to, or undefined to leave them. */
function replicasChange(have: number | undefined, wanted: ReplicasWanted | undefined): number | undefined {
  if (!wanted) return undefined;
  const current = have && have > 0 ? have : 1;
  if (current === wanted.count) return undefined;
  return wanted.exact || current < wanted.count ? wanted.count : undefined;
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
        await jsm.streams.add({
          name: spec.name,
          retention: RetentionPolicy.Limits,
          storage: StorageType.File,
          ...wanted,
          ...(opts.replicas ? { num_replicas: opts.replicas.count } : {}),
        });
        return;
      } catch (err) {
        if (round === 0 && isAlreadyInUse(err)) continue;
        throw err;
      }
    }
    if (!opts.adjust) return;
    const cfg = existing.config;
    const have = new Set(cfg.subjects ?? []);
    // A stream with fewer copies is scaled up in place: the server adds peers, which catch up
    // from the leader while the stream keeps serving; its consumers that follow it scale too.
    const replicas = replicasChange(cfg.num_replicas, opts.replicas);
    if (
      subjects.every((s) => have.has(s)) &&
      cfg.max_age === wanted.max_age &&
      cfg.duplicate_window === wanted.duplicate_window &&
      replicas === undefined
    )
      return;
    await jsm.streams.update(spec.name, {
      ...cfg,
      subjects: [...new Set([...(cfg.subjects ?? []), ...subjects])],
      max_age: wanted.max_age,
      duplicate_window: wanted.duplicate_window,
      ...(replicas === undefined ? {} : { num_replicas: replicas }),
    });
    if (replicas !== undefined) await untilScaled(jsm, spec.name, replicas);
    return;
  }
}

/**
 * How long one pull of our durable consumers waits at the server. A pull lives at the consumer's
 * leader; when that node dies without a hand-off (SIGKILL, a lost machine) the pull dies with it,
 * and nats.js notices only when two idle heartbeats (half of this each) are missed, then pulls
 * again from the new leader. At nats.js's 30 s default a hook received nothing for 25 s after the
 * leader of its durable was killed (test/integration/gate/nats-cluster.test.ts); at 5 s a lost
 * pull is renewed within about 5 s, at the price of one pull request per 5 s per idle consumer.
 */
export const PULL_EXPIRES_MS = 5_000;

/**
 * A change of replicas is carried out after the update returns (nats-server 2.15 answers with the
 * `desired` peers and the old count); until it is, the server refuses to scale the stream's
 * consumers ("replica count exceeds parent stream"). The new peers copy the stream from the
 * leader, at most a day of small messages, so this is seconds; a stream that does not get there
 * in a minute stops the start with what the server said.
 */
async function untilScaled(jsm: JetStreamManager, name: string, count: number, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (let pause = 50; ; pause = Math.min(pause * 2, 1_000)) {
    const { cluster } = await jsm.streams.info(name);
    const desired = (cluster as { desired?: unknown } | undefined)?.desired;
    if (desired === undefined && (cluster?.replicas?.length ?? 0) === count - 1) return;
    if (Date.now() > deadline)
      throw new Error(`stream ${name} did not reach ${count} replicas in ${timeoutMs / 1000} s: ${JSON.stringify(cluster)}`);
    await new Promise((resolve) => setTimeout(resolve, pause));
  }
}

export interface DurableConsumerSpec {
  durable: string;
  filterSubject: string;
  /** Redelivery after this long without an ack (or a working()). */
  ackWaitMs: number;
  /** Messages handed out and not yet acked, across the consumer's replicas; server default when absent. */
  maxAckPending?: number;
  /**
   * The stream's replicas, known to the stream's owner. A durable is created following its stream
   * (num_replicas 0: nats-server scales it with the stream); one pinned to another count (made by
   * hand, or by an older release) is re-pinned to this one.
   */
  replicas?: number;
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
  const repin = c.replicas !== undefined && (e.num_replicas ?? 0) > 0 && e.num_replicas !== c.replicas;
  const same =
    e.ack_wait === config.ack_wait &&
    e.filter_subject === config.filter_subject &&
    (c.maxAckPending === undefined || e.max_ack_pending === c.maxAckPending) &&
    !repin;
  if (!same) await jsm.consumers.update(stream, c.durable, { ...config, ...(repin ? { num_replicas: c.replicas } : {}) });
}

export interface OwnedConnection<T> {
  nc: NatsConnection;
  /** What `setup` returned. */
  value: T;
  /** Drains and closes the connection when it was opened here; a given one stays open. */
  release(): Promise<void>;
}

/** Who a connection opened here is: its name in the server's monitoring, and its default inbox prefix. */
export interface NatsIdentity {
  name: string;
  inboxPrefix: string;
}

/**
 * The target's connection, or a new one that reconnects forever, with `setup` run on it. A
 * connection opened here is closed again when setup fails. With several servers (a list, or
 * comma-separated), the first connect tries each before it fails, and a lost connection moves on
 * to the others at once; nats.js waits reconnectTimeWait (2 s) only before dialling again a server
 * it dialled less than that ago. A cluster also tells its clients of its other nodes.
 */
export async function connectOwned<T>(
  target: NatsTarget,
  identity: NatsIdentity,
  setup: (nc: NatsConnection) => Promise<T>,
): Promise<OwnedConnection<T>> {
  const given = target.connection;
  const nc =
    given ??
    (await connect({
      name: identity.name,
      maxReconnectAttempts: -1,
      ...natsSecurityOptions(target.security, identity.inboxPrefix),
      ...target.connectionOptions,
      ...(target.servers === undefined ? {} : { servers: natsServerList(target.servers) }),
    }));
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

/** The answer of a JetStream API call about a stream that does not exist. */
export function isStreamNotFound(err: unknown): boolean {
  const e = err as { api_error?: { err_code?: number }; message?: string };
  return e?.api_error?.err_code === 10059 || /stream not found/i.test(e?.message ?? '');
}

function isNotFound(err: unknown): boolean {
  const e = err as { code?: string; api_error?: { err_code?: number }; message?: string };
  return e?.api_error?.err_code === 10059 || e?.code === '404' || /not found/i.test(e?.message ?? '');
}

function isAlreadyInUse(err: unknown): boolean {
  const e = err as { api_error?: { err_code?: number }; message?: string };
  return e?.api_error?.err_code === 10058 || /already in use/i.test(e?.message ?? '');
}
