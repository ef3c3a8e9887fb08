// Requests and replies through a real nats-server with JetStream (one server per test, so the
// streams and consumers of one test never see another's messages).

import { type NatsServer, startNatsServer } from '@knative-prestart/devcluster/nats.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import test from 'ava';
import { AckPolicy, connect, type NatsConnection } from 'nats';
import pino from 'pino';
import { Registry } from 'prom-client';
import { createNatsTransport } from '../../../emitter/nats.ts';
import { TransportError } from '../../../emitter/transport.ts';
import { sendReply } from '../../../hooks/sdk/nats.ts';
import { parseRequested } from '../../../schemas/index.ts';
import { fromNatsMessage } from '../../../schemas/nats-binding.ts';
import { createSinkMetrics } from '../../../sinks/metrics.ts';
import { createNatsSink, type NatsSinkOptions } from '../../../sinks/nats.ts';
import { STREAMS } from '../../../transport/nats.ts';
import { completedEvent, recordingOnReply, requestEvent } from '../../support/events.ts';
import { deferred } from '../../support/http-server.ts';
import { foreignKeys, keys } from '../../support/keys.ts';

const silent = pino({ level: 'silent' });

interface Ctx {
  server: NatsServer;
  nc: NatsConnection;
  cleanups: (() => Promise<unknown>)[];
}

async function natsFor(t: import('ava').ExecutionContext): Promise<Ctx> {
  const server = await startNatsServer();
  const nc = await connect({ servers: server.url });
  const ctx: Ctx = { server, nc, cleanups: [] };
  t.teardown(async () => {
    for (const fn of ctx.cleanups.reverse()) await fn().catch(() => {});
    await nc.close();
    await server.stop();
  });
  return ctx;
}

function startSink(ctx: Ctx, opts: Omit<NatsSinkOptions, 'keys' | 'servers' | 'logger'> & { servers?: string }) {
  const sink = createNatsSink({ keys, servers: ctx.server.url, logger: silent, nakDelayMs: 50, ...opts });
  ctx.cleanups.push(() => sink.stop());
  return sink;
}

async function consumerState(nc: NatsConnection, durable = 'prestart-gate') {
  const info = await (await nc.jetstreamManager()).consumers.info(STREAMS.replies.name, durable);
  // delivered.consumer_seq counts every delivery, redeliveries included.
  return { pending: info.num_pending, ackPending: info.num_ack_pending, deliveries: info.delivered.consumer_seq };
}

/** Every reply handed out and settled: nothing left to deliver, nothing waiting for an ack. */
const settled = (nc: NatsConnection, durable?: string) => async () => {
  const s = await consumerState(nc, durable);
  return s.pending === 0 && s.ackPending === 0 ? s : undefined;
};

test('a request is stored in PRESTART_REQUESTS and a hook reads back the same CloudEvent (NATS binary binding)', async (t) => {
  const ctx = await natsFor(t);
  const transport = createNatsTransport({ servers: ctx.server.url, logger: silent });
  ctx.cleanups.push(() => transport.close());
  const event = requestEvent({ hook: 'db-migrate' });
  t.deepEqual(await transport.send(event, { transport: 'nats' }, 'db-migrate'), { type: 'accepted' });

  // The hook's side: its own durable consumer on its subject.
  const jsm = await ctx.nc.jetstreamManager();
  await jsm.consumers.add(STREAMS.requests.name, {
    durable_name: 'db-migrate-hook',
    ack_policy: AckPolicy.Explicit,
    filter_subject: 'prestart.requests.db-migrate',
  });
  const consumer = await ctx.nc.jetstream().consumers.get(STREAMS.requests.name, 'db-migrate-hook');
  const msg = await consumer.next({ expires: 5_000 });
  t.truthy(msg);
  if (!msg) return;
  t.is(msg.subject, 'prestart.requests.db-migrate');
  // Binding: attributes as ce-* headers, datacontenttype as ce-datacontenttype, no content-type.
  t.is(msg.headers?.get('ce-id'), event.id);
  t.is(msg.headers?.get('ce-datacontenttype'), 'application/json');
  t.is(msg.headers?.get('content-type'), '');
  t.is(msg.headers?.get('Nats-Msg-Id'), event.id);
  const parsed = parseRequested(fromNatsMessage(msg.headers, msg.data));
  t.true(parsed.ok);
  if (parsed.ok) {
    t.is(parsed.request.event.id, event.id);
    t.is(parsed.request.data.hook.name, 'db-migrate');
  }
  msg.ack();
});

test('a resent request (same CloudEvent id) is stored once', async (t) => {
  const ctx = await natsFor(t);
  const transport = createNatsTransport({ servers: ctx.server.url, logger: silent });
  ctx.cleanups.push(() => transport.close());
  const event = requestEvent({ hook: 'resent' });
  await transport.send(event, { transport: 'nats' }, 'resent');
  await transport.send(event, { transport: 'nats' }, 'resent');
  await transport.send(requestEvent({ hook: 'resent', attempt: 2 }), { transport: 'nats' }, 'resent');
  const info = await (await ctx.nc.jetstreamManager()).streams.info(STREAMS.requests.name);
  t.is(info.state.messages, 2);
});

test('the request stream is created once and re-used by a second gate', async (t) => {
  const ctx = await natsFor(t);
  const a = createNatsTransport({ servers: ctx.server.url, logger: silent });
  const b = createNatsTransport({ servers: ctx.server.url, logger: silent });
  ctx.cleanups.push(
    () => a.close(),
    () => b.close(),
  );
  await a.ready();
  await b.ready();
  const streams = await (await ctx.nc.jetstreamManager()).streams.list().next();
  t.deepEqual(
    streams.map((s) => [s.config.name, s.config.subjects]),
    [[STREAMS.requests.name, ['prestart.requests.>']]],
  );
});

test('a subject no stream captures gives a retriable error that says so', async (t) => {
  const ctx = await natsFor(t);
  const transport = createNatsTransport({ servers: ctx.server.url, logger: silent, ackTimeoutMs: 1_000 });
  ctx.cleanups.push(() => transport.close());
  const err = await t.throwsAsync(transport.send(requestEvent(), { transport: 'nats', nats: { subject: 'elsewhere.db' } }, 'db-migrate'), {
    instanceOf: TransportError,
  });
  t.true(err?.retriable);
  t.regex(err?.message ?? '', /elsewhere\.db/);
});

test('a server that is not there is a retriable error', async (t) => {
  const ctx = await natsFor(t);
  const url = ctx.server.url;
  await ctx.server.stop();
  const transport = createNatsTransport({ servers: url, logger: silent, connectionOptions: { timeout: 500 } });
  const err = await t.throwsAsync(transport.send(requestEvent(), { transport: 'nats' }, 'db-migrate'), { instanceOf: TransportError });
  t.true(err?.retriable);
  t.regex(err?.message ?? '', /cannot connect/);
  await transport.close();
});

test('a reply published on prestart.replies.<hook> reaches the gate verified, and is acked', async (t) => {
  const ctx = await natsFor(t);
  const { seen, onReply } = recordingOnReply();
  const registry = new Registry();
  await startSink(ctx, { onReply, metrics: createSinkMetrics(registry) }).start();
  const reply = completedEvent(requestEvent({ hook: 'db-migrate', attempt: 3 }), { message: 'done' });
  const ack = await sendReply(ctx.nc, 'db-migrate', reply);
  t.is(ack.stream, STREAMS.replies.name);
  await waitFor(() => seen.length === 1, { what: 'the reply to reach onReply' });
  t.like(seen[0], { hook: 'db-migrate', attempt: 3, outcome: 'succeeded', message: 'done', revision: 'checkout-00002' });
  t.like(await waitFor(settled(ctx.nc), { what: 'the reply to be acked' }), { deliveries: 1 });
  t.regex(await registry.metrics(), /prestart_gate_replies_total\{transport="nats",result="applied",outcome="succeeded"\} 1/);
});

test('a structured-mode reply is taken too', async (t) => {
  const ctx = await natsFor(t);
  const { seen, onReply } = recordingOnReply();
  await startSink(ctx, { onReply }).start();
  await sendReply(ctx.nc, 'db-migrate', completedEvent(), { mode: 'structured' });
  await waitFor(() => seen.length === 1, { what: 'the structured reply to reach onReply' });
  t.is(seen[0]?.outcome, 'succeeded');
  await waitFor(settled(ctx.nc), { what: 'the reply to be acked' });
});

test('onReply throwing (transient) gets the reply redelivered until it is recorded', async (t) => {
  const ctx = await natsFor(t);
  let calls = 0;
  const { seen, onReply } = recordingOnReply(() => {
    calls += 1;
    if (calls < 3) throw new Error('apiserver unavailable');
    return { type: 'applied' };
  });
  await startSink(ctx, { onReply }).start();
  await sendReply(ctx.nc, 'db-migrate', completedEvent());
  await waitFor(() => seen.length === 3, { what: 'two redeliveries after transient errors' });
  t.is(new Set(seen.map((r) => r.eventKey)).size, 1);
  t.like(await waitFor(settled(ctx.nc), { what: 'the reply to be acked at last' }), { deliveries: 3 });
});

test('a forged reply and a rejected one are terminated: never redelivered, the forged one never reaches the gate', async (t) => {
  const ctx = await natsFor(t);
  const { seen, onReply } = recordingOnReply(() => ({ type: 'rejected', reason: 'stale attempt' }));
  const registry = new Registry();
  await startSink(ctx, { onReply, metrics: createSinkMetrics(registry) }).start();
  await sendReply(ctx.nc, 'db-migrate', completedEvent(requestEvent({ ring: foreignKeys })));
  await sendReply(ctx.nc, 'db-migrate', completedEvent());
  const state = await waitFor(settled(ctx.nc), { what: 'both replies to be settled' });
  t.is(state.deliveries, 2, 'each delivered once');
  t.is(seen.length, 1, 'only the genuine reply reached onReply');
  const text = await registry.metrics();
  t.regex(text, /result="invalid",outcome="unknown"\} 1/);
  t.regex(text, /result="rejected",outcome="succeeded"\} 1/);
});

test('a gate that dies before acking: the reply is redelivered to the next consumer', async (t) => {
  const ctx = await natsFor(t);
  const crashing = await connect({ servers: ctx.server.url });
  const stuck = deferred<{ type: 'applied' }>();
  const first = recordingOnReply(() => stuck.promise);
  const sinkA = createNatsSink({ keys, connection: crashing, onReply: first.onReply, logger: silent, ackWaitMs: 1_000 });
  ctx.cleanups.push(() => sinkA.stop());
  await sinkA.start();
  await sendReply(ctx.nc, 'db-migrate', completedEvent());
  await waitFor(() => first.seen.length === 1, { what: 'the first gate to take the reply' });
  // The crash: the connection goes away with the reply in hand and unacked.
  await crashing.close();
  stuck.resolve({ type: 'applied' });

  const second = recordingOnReply();
  await startSink(ctx, { onReply: second.onReply, ackWaitMs: 1_000 }).start();
  await waitFor(() => second.seen.length === 1, { what: 'the reply to be redelivered to the second gate', timeoutMs: 15_000 });
  t.is(second.seen[0]?.eventKey, first.seen[0]?.eventKey);
  t.like(await waitFor(settled(ctx.nc), { what: 'the redelivered reply to be acked' }), { deliveries: 2 });
});

test("a genuine reply published on another hook's subject is terminated and never reaches the gate", async (t) => {
  const ctx = await natsFor(t);
  const { seen, onReply } = recordingOnReply();
  await startSink(ctx, { onReply }).start();
  // A reply for db-migrate (its replyid verifies) on the subject only another hook may publish to.
  await sendReply(ctx.nc, 'db-migrate', completedEvent(requestEvent({ hook: 'db-migrate' })), { subject: 'prestart.replies.scanner' });
  t.like(await waitFor(settled(ctx.nc), { what: 'the misplaced reply to be settled' }), { deliveries: 1 });
  t.is(seen.length, 0);
});
