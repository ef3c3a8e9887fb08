// Serving a hook from NATS JetStream: a durable consumer on `prestart.requests.<hook>` (stream
// PRESTART_REQUESTS), replies published on `prestart.replies.<hook>` (stream PRESTART_REPLIES),
// in the CloudEvents NATS binding. A request is acked only after its reply is stored, so a hook
// that dies mid-run gets the request again; while the handler runs the message is kept alive
// with working(), so JetStream does not hand it to another replica meanwhile.
import { setTimeout as sleep } from 'node:timers/promises';
import {
  AckPolicy,
  type ConnectionOptions,
  type ConsumerMessages,
  connect,
  DeliverPolicy,
  type JetStreamManager,
  type JsMsg,
  type NatsConnection,
  nanos,
  RetentionPolicy,
  StorageType,
} from 'nats';
import pino, { type Logger } from 'pino';
import { type BackoffPolicy, nextRetryDelay } from '../../api/retry.ts';
import type { CloudEventRecord } from '../../schemas/event.ts';
import { parseRequested } from '../../schemas/index.ts';
import {
  fromNatsMessage,
  REPLIES_STREAM,
  REPLIES_SUBJECT_PREFIX,
  REQUESTS_STREAM,
  REQUESTS_SUBJECT_PREFIX,
  subjectFor,
} from '../../schemas/nats-binding.ts';
import { sendReply } from '../../sinks/nats.ts';
import { defaultSource } from './outcome.ts';
import { createHookRunner, type HookRunner } from './runner.ts';
import { DEFAULT_SEND_POLICY } from './send.ts';
import type { HookHandler } from './types.ts';

export interface ServeHookNatsOptions {
  /** The PrestartHook served; requests for other hooks are acked and left alone. */
  name: string;
  handler: HookHandler;
  /** NATS server URL(s). Ignored when `connection` is given. */
  servers?: string | string[];
  /** An existing connection; it stays open on stop(). */
  connection?: NatsConnection;
  connectionOptions?: Omit<ConnectionOptions, 'servers'>;
  /** Durable consumer shared by the hook's replicas. Default "prestart-hook-<name>". */
  durable?: string;
  /** Default `prestart.requests.<name>` (the PrestartHook's delivery.nats.subject, if it sets one). */
  subject?: string;
  source?: string;
  logger?: Logger;
  /** Redelivery after this long without an ack or a working() from this hook. Default 30 s. */
  ackWaitMs?: number;
  /** Requests handed to this hook and not yet acked, across replicas. Default 256. */
  maxInFlight?: number;
  /** Retries of a reply publish. */
  publishPolicy?: BackoffPolicy;
  remember?: number;
}

export interface NatsHookService {
  durable: string;
  subject: string;
  runner: HookRunner;
  /** Stops pulling, aborts running handlers (their requests are nak'ed for another replica), closes its own connection. */
  stop(): Promise<void>;
}

export async function serveHookNats(opts: ServeHookNatsOptions): Promise<NatsHookService> {
  if (!opts.connection && !opts.servers) throw new Error('serveHookNats: servers or connection is required');
  const log = opts.logger ?? pino({ name: `prestart-hook-${opts.name}`, level: process.env.LOG_LEVEL ?? 'info' });
  const durable = opts.durable ?? `prestart-hook-${opts.name}`;
  const subject = opts.subject ?? subjectFor(REQUESTS_SUBJECT_PREFIX, opts.name);
  const ackWaitMs = opts.ackWaitMs ?? 30_000;
  const policy = opts.publishPolicy ?? DEFAULT_SEND_POLICY;
  const runner = createHookRunner({
    handler: opts.handler,
    source: opts.source ?? defaultSource(opts.name),
    logger: log,
    ...(opts.remember ? { remember: opts.remember } : {}),
  });
  const nc =
    opts.connection ?? (await connect({ name: durable, maxReconnectAttempts: -1, ...opts.connectionOptions, servers: opts.servers }));
  let stopping = false;
  const inflight = new Set<Promise<void>>();

  async function publish(event: CloudEventRecord): Promise<void> {
    const started = Date.now();
    for (let tries = 1; ; tries++) {
      try {
        await sendReply(nc, opts.name, event);
        return;
      } catch (err) {
        const delay = stopping ? undefined : nextRetryDelay(tries, Date.now() - started, policy);
        if (delay === undefined) throw err;
        await sleep(delay);
      }
    }
  }

  async function settleWith(m: JsMsg, final: CloudEventRecord): Promise<void> {
    try {
      await publish(final);
      m.ack();
    } catch (err) {
      log.error({ err, seq: m.seq }, 'reply not published; the request is redelivered and the same reply sent again');
      m.nak(5_000);
    }
  }

  async function handle(m: JsMsg): Promise<void> {
    const parsed = parseRequested(fromNatsMessage(m.headers, m.data));
    if (!parsed.ok) {
      log.warn({ seq: m.seq, code: parsed.error.code, reason: parsed.error.reason }, 'request refused (term)');
      m.term();
      return;
    }
    const request = parsed.request;
    if (request.hook !== opts.name) {
      log.info(
        { event: request.key, hook: request.hook },
        `request for hook "${request.hook}" ignored: this consumer serves "${opts.name}"`,
      );
      m.ack();
      return;
    }
    if (request.data.action === 'cancel') {
      log.info({ event: request.key, reason: request.data.reason, result: runner.cancel(request) }, 'cancel');
      m.ack();
      return;
    }
    const submission = runner.submit(request, publish);
    if (submission.type === 'skipped') {
      log.info({ event: request.key, reason: submission.reason }, 'request not run');
      // Shutting down is no answer to the request: another replica takes it.
      if (stopping) m.nak();
      else m.ack();
      return;
    }
    if (submission.type === 'finished') {
      await settleWith(m, submission.final);
      return;
    }
    const keepAlive = setInterval(() => m.working(), Math.max(100, Math.floor(ackWaitMs / 3)));
    const final = await submission.job.done.finally(() => clearInterval(keepAlive));
    if (final) await settleWith(m, final);
    else if (stopping) m.nak();
    else m.ack();
  }

  let messages: ConsumerMessages;
  try {
    const jsm = await nc.jetstreamManager();
    await ensureStreamExists(jsm, REQUESTS_STREAM, `${REQUESTS_SUBJECT_PREFIX}.>`, 10 * 60_000);
    await ensureStreamExists(jsm, REPLIES_STREAM, `${REPLIES_SUBJECT_PREFIX}.>`, 2 * 60_000);
    await ensureConsumer(jsm, { durable, subject, ackWaitMs, maxInFlight: opts.maxInFlight ?? 256 });
    messages = await (await nc.jetstream().consumers.get(REQUESTS_STREAM, durable)).consume({ max_messages: 64 });
  } catch (err) {
    if (!opts.connection) await nc.close().catch(() => {});
    throw err;
  }
  // Not bounded here: a cancel must get through while long handlers run; JetStream's
  // max_ack_pending bounds the work instead.
  const loop = (async () => {
    for await (const m of messages) {
      const p: Promise<void> = handle(m)
        .catch((err: unknown) => log.error({ err, seq: m.seq }, 'unexpected error handling a request'))
        .finally(() => inflight.delete(p));
      inflight.add(p);
    }
  })();
  log.info({ server: nc.getServer(), durable, subject }, 'serving hook requests from NATS JetStream');

  return {
    durable,
    subject,
    runner,
    async stop() {
      if (stopping) return;
      stopping = true;
      await messages.close().catch(() => {});
      await loop.catch(() => {});
      await runner.close();
      await Promise.allSettled([...inflight]);
      if (!opts.connection) await nc.drain().catch(() => nc.close());
    },
  };
}

/** Creates the stream with the gate's defaults when it is missing; never changes one the gate set up. */
async function ensureStreamExists(jsm: JetStreamManager, name: string, subjects: string, duplicateWindowMs: number): Promise<void> {
  if (await jsm.streams.info(name).catch(() => undefined)) return;
  try {
    await jsm.streams.add({
      name,
      subjects: [subjects],
      retention: RetentionPolicy.Limits,
      storage: StorageType.File,
      max_age: nanos(24 * 3600_000),
      duplicate_window: nanos(duplicateWindowMs),
    });
  } catch (err) {
    // Another replica or the gate created it meanwhile.
    if (!(await jsm.streams.info(name).catch(() => undefined))) throw err;
  }
}

async function ensureConsumer(
  jsm: JetStreamManager,
  c: { durable: string; subject: string; ackWaitMs: number; maxInFlight: number },
): Promise<void> {
  const existing = await jsm.consumers.info(REQUESTS_STREAM, c.durable).catch(() => undefined);
  const config = { ack_wait: nanos(c.ackWaitMs), filter_subject: c.subject, max_ack_pending: c.maxInFlight };
  if (!existing) {
    await jsm.consumers.add(REQUESTS_STREAM, {
      durable_name: c.durable,
      ack_policy: AckPolicy.Explicit,
      // A new hook also takes requests sent before it existed; expired ones are skipped by deadline.
      deliver_policy: DeliverPolicy.All,
      max_deliver: -1,
      ...config,
    });
    return;
  }
  const e = existing.config;
  if (e.ack_wait !== config.ack_wait || e.filter_subject !== config.filter_subject || e.max_ack_pending !== config.max_ack_pending) {
    await jsm.consumers.update(REQUESTS_STREAM, c.durable, config);
  }
}
