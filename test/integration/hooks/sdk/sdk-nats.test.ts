// serveHookNats() against a real nats-server: the gate's NATS transport sends, the gate's NATS
// sink receives, and the hook's durable consumer sits in between.

import { startNatsServer } from '@knative-prestart/devcluster/nats.ts';
import { waitFor } from '@knative-prestart/devcluster/wait.ts';
import test, { type ExecutionContext } from 'ava';
import { connect, type NatsConnection } from 'nats';
import type { Reply } from '../../../../api/types.ts';
import { createNatsTransport } from '../../../../emitter/nats.ts';
import { type HookHandler, type NatsHookService, serveHookNats, succeed } from '../../../../hooks/sdk/index.ts';
import { toBinary } from '../../../../schemas/index.ts';
import { toNatsHeaders } from '../../../../schemas/nats-binding.ts';
import { createNatsSink } from '../../../../sinks/nats.ts';
import { STREAMS } from '../../../../transport/nats.ts';
import { cancelEvent, requestEvent } from '../../../support/events.ts';
import { keys } from '../../../support/keys.ts';
import { silent } from '../_support.ts';

interface Setup {
  url: string;
  nc: NatsConnection;
  seen: Reply[];
  send: (event: ReturnType<typeof requestEvent>) => Promise<unknown>;
  serve: (handler: HookHandler) => Promise<NatsHookService>;
}

async function setup(t: ExecutionContext): Promise<Setup> {
  const server = await startNatsServer();
  const nc = await connect({ servers: server.url });
  const transport = createNatsTransport({ servers: server.url, logger: silent });
  const seen: Reply[] = [];
  const sink = createNatsSink({
    keys,
    servers: server.url,
    logger: silent,
    onReply: async (reply) => {
      seen.push(reply);
      return { type: 'applied' };
    },
  });
  const services: NatsHookService[] = [];
  t.teardown(async () => {
    for (const s of services) await s.stop();
    await sink.stop();
    await transport.close();
    await nc.close();
    await server.stop();
  });
  await sink.start();
  return {
    url: server.url,
    nc,
    seen,
    send: (event) => transport.send(event, { transport: 'nats' }, String(event.prestarthook)),
    serve: async (handler) => {
      const service = await serveHookNats({ servers: server.url, name: 'db', handler, logger: silent, ackWaitMs: 2_000 });
      services.push(service);
      return service;
    },
  };
}

async function requestConsumer(nc: NatsConnection) {
  const info = await (await nc.jetstreamManager()).consumers.info(STREAMS.requests.name, 'prestart-hook-db');
  // delivered.consumer_seq counts every delivery, redeliveries included.
  return { pending: info.num_pending, ackPending: info.num_ack_pending, deliveries: info.delivered.consumer_seq };
}

const settled = (nc: NatsConnection) => async () => {
  const s = await requestConsumer(nc);
  return s.pending === 0 && s.ackPending === 0 ? s : undefined;
};

test('a request sent by the gate is served and its replies reach the gate; the request is acked after the reply', async (t) => {
  const ctx = await setup(t);
  await ctx.serve(async (req, c) => {
    await c.progress(30, 'copying');
    return succeed(`migrated ${req.revision.name}`);
  });
  await ctx.send(requestEvent({ hook: 'db' }));
  await waitFor(() => ctx.seen.some((r) => r.outcome === 'succeeded'), { what: 'the final reply to reach the gate' });
  t.deepEqual(
    ctx.seen.map((r) => [r.outcome, r.message]),
    [
      ['progress', 'copying'],
      ['succeeded', 'migrated checkout-00002'],
    ],
  );
  t.like(await waitFor(settled(ctx.nc), { what: 'the request to be acked' }), { deliveries: 1 });
});

test('a request delivered again after it finished is answered with the same reply, without a second run', async (t) => {
  const ctx = await setup(t);
  let runs = 0;
  await ctx.serve(async () => succeed(`run ${++runs}`));
  const event = requestEvent({ hook: 'db' });
  await ctx.send(event);
  await waitFor(() => ctx.seen.length === 1, { what: 'the first reply' });
  await waitFor(settled(ctx.nc), { what: 'the first delivery to be acked' });
  // The same request once more, as after JetStream's duplicate window (no msgID dedupe).
  const message = toBinary(event);
  await ctx.nc
    .jetstream()
    .publish('prestart.requests.db', new TextEncoder().encode(String(message.body)), { headers: toNatsHeaders(message) });
  await waitFor(async () => (await requestConsumer(ctx.nc)).pending === 0 && (await settled(ctx.nc)()), { what: 'the repeat to be acked' });
  t.is(runs, 1);
  const replies = await (await ctx.nc.jetstreamManager()).streams.info(STREAMS.replies.name);
  t.is(replies.state.messages, 1, 'the re-sent reply has the same id, so JetStream stored it once');
  t.is(ctx.seen.length, 1);
});

test('a cancel aborts the running handler; the request is acked and nothing is replied', async (t) => {
  const ctx = await setup(t);
  const service = await ctx.serve(
    (_req, c) =>
      new Promise((_resolve, reject) => {
        c.signal.addEventListener('abort', () => reject(c.signal.reason));
      }),
  );
  const start = requestEvent({ hook: 'db' });
  await ctx.send(start);
  await waitFor(() => service.runner.running === 1, { what: 'the handler to start' });
  await ctx.send(cancelEvent(start));
  await waitFor(() => service.runner.running === 0, { what: 'the cancel to end the run' });
  await waitFor(settled(ctx.nc), { what: 'both messages to be acked' });
  t.is((await (await ctx.nc.jetstreamManager()).streams.info(STREAMS.replies.name)).state.messages, 0);
});

test('a hook stopped mid-run hands the request back, and the next replica answers it', async (t) => {
  const ctx = await setup(t);
  const stuck = await ctx.serve(
    (_req, c) => new Promise((_resolve, reject) => c.signal.addEventListener('abort', () => reject(c.signal.reason))),
  );
  await ctx.send(requestEvent({ hook: 'db' }));
  await waitFor(() => stuck.runner.running === 1, { what: 'the first replica to start' });
  await stuck.stop();
  await ctx.serve(async () => succeed('done by the second replica'));
  await waitFor(() => ctx.seen.length === 1, { what: 'the second replica to reply' });
  t.is(ctx.seen[0]?.message, 'done by the second replica');
  t.like(await waitFor(settled(ctx.nc), { what: 'the request to be acked' }), { deliveries: 2 });
});
