// Serving a hook from NATS JetStream: a durable consumer on `prestart.requests.<hook>` (stream
// PRESTART_REQUESTS), replies published on `prestart.replies.<hook>` (stream PRESTART_REPLIES),
// in the CloudEvents NATS binding. A request is acked only after its reply is stored, so a hook
// that dies mid-run gets the request again; while the handler runs the message is kept alive
// with working(), so JetStream does not hand it to another replica meanwhile.
import type { ConsumerMessages, JetStreamManager, JsMsg, NatsConnection, PubAck } from 'nats';
import pino, { type Logger } from 'pino';
import type { CloudEventRecord } from '../../schemas/event.ts';
import { toBinary, toStructured } from '../../schemas/index.ts';
import type { NatsSecurity } from '../../schemas/nats-auth.ts';
import { fromNatsMessage, subjectFor } from '../../schemas/nats-binding.ts';
import {
  checkNatsTarget,
  connectOwned,
  type DurableConsumerSpec,
  ensureDurableConsumer,
  ensureStream,
  hookDurable,
  hookInboxPrefix,
  isStreamNotFound,
  jetStreamManager,
  type NatsTarget,
  PULL_EXPIRES_MS,
  publishMessage,
  STREAMS,
  streamReplicas,
} from '../../transport/nats.ts';
import { type BackoffPolicy, retry } from '../../transport/retry.ts';
import { natsSecurityFromEnv } from './nats-env.ts';
import { defaultSource } from './outcome.ts';
import { createHookRunner, dispatchRequest, type HookRunner } from './runner.ts';
import { DEFAULT_SEND_POLICY } from './send.ts';
import type { HookHandler } from './types.ts';

export interface ServeHookNatsOptions extends NatsTarget {
  /** The PrestartHook served; requests for other hooks are acked and left alone. */
  name: string;
  handler: HookHandler;
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

/**
 * What the options leave out comes from the environment (natsSecurityFromEnv): servers from
 * NATS_URL (one URL, or a cluster's as a comma-separated list), credentials and TLS from the
 * mounted files it names.
 */
export async function serveHookNats(options: ServeHookNatsOptions): Promise<NatsHookService> {
  const opts: ServeHookNatsOptions = options.connection
    ? options
    : {
        ...options,
        ...(options.servers === undefined && process.env.NATS_URL ? { servers: process.env.NATS_URL } : {}),
        ...(options.security === undefined ? withSecurity(natsSecurityFromEnv()) : {}),
      };
  checkNatsTarget(opts, 'serveHookNats');
  const log = opts.logger ?? pino({ name: `prestart-hook-${opts.name}`, level: process.env.LOG_LEVEL ?? 'info' });
  const durable = opts.durable ?? hookDurable(opts.name);
  const subject = opts.subject ?? subjectFor(STREAMS.requests.subjectPrefix, opts.name);
  const ackWaitMs = opts.ackWaitMs ?? 30_000;
  const policy = opts.publishPolicy ?? DEFAULT_SEND_POLICY;
  const runner = createHookRunner({
    handler: opts.handler,
    source: opts.source ?? defaultSource(opts.name),
    logger: log,
    ...(opts.remember ? { remember: opts.remember } : {}),
  });
  const stopping = new AbortController();
  const inflight = new Set<Promise<void>>();

  const {
    nc,
    value: messages,
    release,
  } = await connectOwned(opts, { name: durable, inboxPrefix: hookInboxPrefix(durable) }, async (conn): Promise<ConsumerMessages> => {
    await ensureHookConsumer(conn, await jetStreamManager(conn), {
      durable,
      filterSubject: subject,
      ackWaitMs,
      maxAckPending: opts.maxInFlight ?? 256,
    });
    return (await conn.jetstream().consumers.get(STREAMS.requests.name, durable)).consume({ max_messages: 64, expires: PULL_EXPIRES_MS });
  });

  // Stopping ends the retries: the request is nak'ed and another replica sends the reply.
  async function publish(event: CloudEventRecord): Promise<void> {
    await retry(() => sendReply(nc, opts.name, event), policy, { signal: stopping.signal });
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
    const dispatched = dispatchRequest(runner, fromNatsMessage(m.headers, m.data), {
      serves: opts.name,
      logger: log,
      fields: { seq: m.seq },
      progressFor: () => publish,
    });
    if (dispatched.type === 'refused') {
      m.term();
      return;
    }
    if (dispatched.type === 'taken') {
      m.ack();
      return;
    }
    const { submission } = dispatched;
    if (submission.type === 'skipped') {
      // Shutting down is no answer to the request: another replica takes it.
      if (stopping.signal.aborted) m.nak();
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
    else if (stopping.signal.aborted) m.nak();
    else m.ack();
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
      if (stopping.signal.aborted) return;
      stopping.abort(new Error('the hook is shutting down'));
      await messages.close().catch(() => {});
      await loop.catch(() => {});
      await runner.close();
      await Promise.allSettled([...inflight]);
      await release();
    },
  };
}

function withSecurity(security: NatsSecurity | undefined): { security?: NatsSecurity } {
  return security ? { security } : {};
}

/**
 * The hook's own durable. The gate owns the streams and creates them at its start; only when the
 * requests stream is missing does the hook create both with the gate's defaults (never changing
 * one that exists). A hook with least-privilege NATS permissions may not, and then says so.
 */
async function ensureHookConsumer(nc: NatsConnection, jsm: JetStreamManager, consumer: DurableConsumerSpec): Promise<void> {
  try {
    await ensureDurableConsumer(jsm, STREAMS.requests.name, consumer);
    return;
  } catch (err) {
    if (!isStreamNotFound(err)) throw err;
  }
  try {
    const replicas = streamReplicas(nc);
    await ensureStream(jsm, STREAMS.requests, { adjust: false, replicas });
    await ensureStream(jsm, STREAMS.replies, { adjust: false, replicas });
  } catch (err) {
    throw new Error(
      `stream ${STREAMS.requests.name} does not exist yet and this hook could not create it; start the gate, which creates it: ${(err as Error).message}`,
    );
  }
  await ensureDurableConsumer(jsm, STREAMS.requests.name, consumer);
}

export interface SendReplyOptions {
  /** Default binary (attributes in `ce-*` NATS headers). */
  mode?: 'binary' | 'structured';
  /** Default `prestart.replies.<hook>`, the only subject the gate takes `hook`'s replies from. */
  subject?: string;
  timeoutMs?: number;
}

/**
 * Publishes a completed event for `hook` and waits for JetStream to store it. The message id is
 * the CloudEvent id, so a hook resending the same reply is stored once.
 */
export function sendReply(nc: NatsConnection, hook: string, event: CloudEventRecord, opts: SendReplyOptions = {}): Promise<PubAck> {
  const subject = opts.subject ?? subjectFor(STREAMS.replies.subjectPrefix, hook);
  const message = opts.mode === 'structured' ? toStructured(event) : toBinary(event);
  return publishMessage(nc.jetstream(), subject, message, { msgID: event.id, timeoutMs: opts.timeoutMs ?? 5_000 });
}
