// Delivery through NATS JetStream. Requests go to the stream PRESTART_REQUESTS (subjects
// `prestart.requests.>`), which the gate creates or widens at start; hooks read it with their own
// durable consumers, so a hook that is down gets its requests when it comes back.
//
// The CloudEvent travels in binary mode per the CloudEvents NATS binding (attributes as `ce-*`
// NATS headers, data as the payload). The JetStream message id is the CloudEvent id, so the
// gate's resends of one request (same id) inside the stream's duplicate window are stored once.
// A request counts as delivered only when JetStream acknowledged storing it.
import type { JetStreamClient } from 'nats';
import pino, { type Logger } from 'pino';
import type { HookDelivery } from '../api/types.ts';
import type { CloudEventRecord } from '../schemas/event.ts';
import { toBinary } from '../schemas/index.ts';
import { isValidPublishSubject, subjectFor } from '../schemas/nats-binding.ts';
import {
  checkNatsTarget,
  connectOwned,
  ensureStream,
  GATE_INBOX_PREFIX,
  jetStreamManager,
  type NatsTarget,
  type OwnedConnection,
  publishMessage,
  STREAMS,
  streamReplicas,
} from '../transport/nats.ts';
import { type SendOutcome, type Transport, TransportError } from './transport.ts';

export interface NatsTransportOptions extends NatsTarget {
  /** How long to wait for JetStream's publish ack. Default 5 s. */
  ackTimeoutMs?: number;
  /** JetStream dedupe window for resends (same id). Default: STREAMS.requests. */
  duplicateWindowMs?: number;
  /** How long requests are kept in the stream. Default: STREAMS.requests. */
  maxAgeMs?: number;
  /** Copies of the stream, applied both ways; default from the server (streamReplicas), only ever raised. */
  replicas?: number;
  logger?: Logger;
}

export interface NatsTransport extends Transport {
  /** Connects and makes sure the stream exists; sends do this on first use anyway. */
  ready(): Promise<void>;
}

const STREAM = STREAMS.requests;

export function createNatsTransport(opts: NatsTransportOptions): NatsTransport {
  checkNatsTarget(opts, 'nats transport');
  const ackTimeoutMs = opts.ackTimeoutMs ?? 5_000;
  const log = opts.logger ?? pino({ name: 'nats-transport' });
  const spec = {
    ...STREAM,
    ...(opts.maxAgeMs === undefined ? {} : { maxAgeMs: opts.maxAgeMs }),
    ...(opts.duplicateWindowMs === undefined ? {} : { duplicateWindowMs: opts.duplicateWindowMs }),
  };
  let setup: Promise<OwnedConnection<JetStreamClient>> | undefined;
  let closed = false;

  async function open(): Promise<OwnedConnection<JetStreamClient>> {
    const conn = await connectOwned(opts, { name: 'knative-prestart-gate', inboxPrefix: GATE_INBOX_PREFIX }, async (nc) => {
      await ensureStream(await jetStreamManager(nc), spec, { adjust: true, replicas: streamReplicas(nc, opts.replicas) });
      return nc.jetstream();
    });
    log.info({ server: conn.nc.getServer(), cluster: conn.nc.info?.cluster, stream: STREAM.name }, 'NATS JetStream request stream ready');
    return conn;
  }

  function ready(): Promise<OwnedConnection<JetStreamClient>> {
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
    const subject = delivery.nats?.subject ?? subjectFor(STREAM.subjectPrefix, hook);
    if (!isValidPublishSubject(subject)) {
      throw new TransportError(`hook ${hook}: ${JSON.stringify(subject)} is not a NATS subject one can publish to`, false);
    }
    let js: JetStreamClient;
    try {
      js = (await ready()).value;
    } catch (err) {
      if (err instanceof TransportError) throw err;
      throw new TransportError(`NATS: cannot connect or set up stream ${STREAM.name}: ${(err as Error).message}`, true);
    }
    const message = toBinary(event);
    try {
      const ack = await publishMessage(js, subject, message, { msgID: event.id, timeoutMs: ackTimeoutMs });
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
      await (await current?.catch(() => undefined))?.release();
    },
  };
}

/** "503" from a publish means no stream captures the subject. */
export function describeNatsError(err: unknown): string {
  const e = err as { code?: string; message?: string };
  if (e?.code === '503') return 'no JetStream stream captures this subject (503 no responders)';
  return e?.message ?? String(err);
}
