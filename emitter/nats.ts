// Delivery through NATS JetStream. Requests go to the stream PRESTART_REQUESTS (subjects
// `prestart.requests.>`), which the gate creates or widens at start; hooks read it with their own
// durable consumers, so a hook that is down gets its requests when it comes back.
//
// The CloudEvent travels in binary mode per the CloudEvents NATS binding (attributes as `ce-*`
// NATS headers, data as the payload). The JetStream message id is the CloudEvent id, so the
// gate's resends of one request (same id) inside the stream's duplicate window are stored once.
// A request counts as delivered only when JetStream acknowledged storing it.
import { type ConnectionOptions, connect, type JetStreamClient, type NatsConnection } from 'nats';
import pino, { type Logger } from 'pino';
import type { HookDelivery } from '../api/types.ts';
import type { CloudEventRecord } from '../schemas/event.ts';
import { toBinary } from '../schemas/index.ts';
import {
  ensureStream,
  isValidPublishSubject,
  REQUESTS_STREAM,
  REQUESTS_SUBJECT_PREFIX,
  subjectFor,
  toNatsHeaders,
} from '../schemas/nats-binding.ts';
import { type SendOutcome, type Transport, TransportError } from './transport.ts';

export interface NatsTransportOptions {
  /** NATS server URL(s), e.g. nats://127.0.0.1:4222. Ignored when `connection` is given. */
  servers?: string | string[];
  /** An existing connection to use; the transport then does not close it. */
  connection?: NatsConnection;
  connectionOptions?: Omit<ConnectionOptions, 'servers'>;
  /** How long to wait for JetStream's publish ack. Default 5 s. */
  ackTimeoutMs?: number;
  /** JetStream dedupe window for resends (same id). Default 10 min. */
  duplicateWindowMs?: number;
  /** How long requests are kept in the stream. Default 24 h. */
  maxAgeMs?: number;
  logger?: Logger;
}

export interface NatsTransport extends Transport {
  /** Connects and makes sure the stream exists; sends do this on first use anyway. */
  ready(): Promise<void>;
}

export function createNatsTransport(opts: NatsTransportOptions): NatsTransport {
  if (!opts.connection && !opts.servers) throw new Error('nats transport: servers or connection is required');
  const ackTimeoutMs = opts.ackTimeoutMs ?? 5_000;
  const log = opts.logger ?? pino({ name: 'nats-transport' });
  let setup: Promise<{ nc: NatsConnection; js: JetStreamClient }> | undefined;
  let closed = false;

  async function open(): Promise<{ nc: NatsConnection; js: JetStreamClient }> {
    const nc =
      opts.connection ??
      (await connect({
        name: 'knative-prestart-gate',
        maxReconnectAttempts: -1,
        ...opts.connectionOptions,
        servers: opts.servers,
      }));
    try {
      await ensureStream(await nc.jetstreamManager(), {
        name: REQUESTS_STREAM,
        subjects: [`${REQUESTS_SUBJECT_PREFIX}.>`],
        maxAgeMs: opts.maxAgeMs ?? 24 * 3600_000,
        duplicateWindowMs: opts.duplicateWindowMs ?? 10 * 60_000,
      });
    } catch (err) {
      if (!opts.connection) await nc.close().catch(() => {});
      throw err;
    }
    log.info({ server: nc.getServer(), stream: REQUESTS_STREAM }, 'NATS JetStream request stream ready');
    return { nc, js: nc.jetstream() };
  }

  function ready(): Promise<{ nc: NatsConnection; js: JetStreamClient }> {
    if (closed) return Promise.reject(new TransportError('nats transport closed', true));
    if (!setup) {
      setup = open();
      // A failed start is retried by the next send rather than remembered forever.
      setup.catch(() => {
        setup = undefined;
      });
    }
    return setup;
  }

  async function send(event: CloudEventRecord, delivery: HookDelivery, hook: string): Promise<SendOutcome> {
    const subject = delivery.nats?.subject ?? subjectFor(REQUESTS_SUBJECT_PREFIX, hook);
    if (!isValidPublishSubject(subject)) {
      throw new TransportError(`hook ${hook}: ${JSON.stringify(subject)} is not a NATS subject one can publish to`, false);
    }
    let js: JetStreamClient;
    try {
      ({ js } = await ready());
    } catch (err) {
      if (err instanceof TransportError) throw err;
      throw new TransportError(`NATS: cannot connect or set up stream ${REQUESTS_STREAM}: ${(err as Error).message}`, true);
    }
    const message = toBinary(event);
    const body = typeof message.body === 'string' ? new TextEncoder().encode(message.body) : message.body;
    try {
      const ack = await js.publish(subject, body, {
        msgID: event.id,
        headers: toNatsHeaders(message),
        timeout: ackTimeoutMs,
      });
      if (ack.duplicate) log.debug({ hook, subject, eventId: event.id, seq: ack.seq }, 'request already in the stream (resend)');
      return { type: 'accepted' };
    } catch (err) {
      throw new TransportError(`NATS: publish to ${subject} not acknowledged: ${describeNatsError(err)}`, true);
    }
  }

  return {
    kind: 'nats',
    send,
    async ready() {
      await ready();
    },
    async close() {
      closed = true;
      const current = setup;
      setup = undefined;
      if (!current || opts.connection) return;
      const conn = await current.catch(() => undefined);
      await conn?.nc.drain().catch(() => conn.nc.close());
    },
  };
}

/** "503" from a publish means no stream captures the subject. */
export function describeNatsError(err: unknown): string {
  const e = err as { code?: string; message?: string };
  if (e?.code === '503') return 'no JetStream stream captures this subject (503 no responders)';
  return e?.message ?? String(err);
}
